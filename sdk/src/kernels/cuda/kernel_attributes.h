// Per-kernel attributes our CUDA kernels raise before their first launch on a device.
#pragma once

#include <cuda_runtime.h>

#include <mutex>
#include <set>
#include <utility>

#include "edgeinfer/status.h"
#include "kernels/cuda/cuda_check.h"

namespace edgeinfer::cuda {

/// Lets `kernel` use `bytes` of dynamic shared memory (more than the default 48 KiB) on the
/// current device. The limit is an attribute of the kernel in each device's context: raised once
/// per kernel and device; a failure is reported, and tried again next time.
/// `nonPortableClusters`: the kernel may also be launched in clusters of more than 8 blocks.
inline Status allowSharedMemory(const void* kernel, int bytes, bool nonPortableClusters = false) {
  static std::mutex mu;
  static std::set<std::pair<const void*, int>> raised;
  int dev = 0;
  EI_CUDA_CHECK(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(mu);
  if (raised.count({kernel, dev})) return Status::Ok();
  EI_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
  if (nonPortableClusters)
    EI_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  raised.insert({kernel, dev});
  return Status::Ok();
}

}  // namespace edgeinfer::cuda
