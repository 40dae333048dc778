// Per-kernel attributes our CUDA kernels raise before their first launch on a device.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <tuple>
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

/// Blocks of `kernel` (`threads` a block, `smem` bytes of dynamic shared memory) resident on a
/// multiprocessor of the current device, asked of the runtime once per device, kernel, block
/// size and shared memory; 1 when it cannot say. For persistent kernels' grids.
inline int residentBlocks(const void* kernel, int threads, int smem) {
  static std::mutex mu;
  static std::map<std::tuple<int, const void*, int, int>, int> known;
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return 1;
  }
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_tuple(dev, kernel, threads, smem);
  if (const auto it = known.find(key); it != known.end()) return it->second;
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, threads,
                                                    static_cast<size_t>(smem)) != cudaSuccess) {
    cudaGetLastError();
    blocks = 1;
  }
  known[key] = std::max(blocks, 1);
  return known[key];
}

/// The grid of a persistent kernel whose blocks each take every (grid / slices)-th tile of one
/// slice of channels: as many blocks as are resident at once (`resident` on the device), no
/// more than `tiles`, a whole number of slices.
inline int64_t persistentGrid(int64_t tiles, int slices, int64_t resident) {
  const int64_t blocks = std::min(tiles, resident);
  return std::max<int64_t>(slices, blocks / slices * slices);
}

}  // namespace edgeinfer::cuda
