// The CUDA half of core/device.h: device properties, library versions, and whether this
// binary carries SASS for the GPU or makes the driver JIT-compile PTX at start.
#include <cublasLt.h>
#include <cudnn.h>

#include <algorithm>
#include <chrono>
#include <sstream>

#include "core/device.h"
#include "kernels/cuda/cuda_check.h"

#ifndef EDGEINFER_CUDA_SASS_ARCHS
#define EDGEINFER_CUDA_SASS_ARCHS ""
#endif
#ifndef EDGEINFER_CUDA_PTX_ARCHS
#define EDGEINFER_CUDA_PTX_ARCHS ""
#endif

namespace edgeinfer {
namespace {

__global__ void probeKernel(int* out) {
  if (out) *out = 1;
}

std::vector<int> parseArchList(const char* list) {
  std::vector<int> v;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ';'))
    if (!item.empty()) v.push_back(std::stoi(item));
  return v;
}

}  // namespace

bool builtWithCuda() {
  return true;
}

Expected<CudaDeviceInfo> queryCudaDevice(int index) {
  CudaDeviceInfo info;
  info.index = index;
  info.sassArchs = parseArchList(EDGEINFER_CUDA_SASS_ARCHS);
  info.ptxArchs = parseArchList(EDGEINFER_CUDA_PTX_ARCHS);
  int count = 0;
  EI_CUDA_CHECK(cudaGetDeviceCount(&count));
  if (index < 0 || index >= count)
    return Status(ErrorCode::kNotFound, "CUDA device " + std::to_string(index) +
                                            " does not exist (" + std::to_string(count) +
                                            " found)");
  cudaDeviceProp p{};
  EI_CUDA_CHECK(cudaGetDeviceProperties(&p, index));
  info.name = p.name;
  info.ccMajor = p.major;
  info.ccMinor = p.minor;
  info.smCount = p.multiProcessorCount;
  info.totalMemoryBytes = static_cast<int64_t>(p.totalGlobalMem);
  info.l2CacheBytes = p.l2CacheSize;
  info.sharedMemPerBlockOptin = static_cast<int64_t>(p.sharedMemPerBlockOptin);
  EI_CUDA_CHECK(cudaDriverGetVersion(&info.driverVersion));
  EI_CUDA_CHECK(cudaRuntimeGetVersion(&info.runtimeVersion));
  info.cudnnVersion = static_cast<int>(cudnnGetVersion());
  info.cublasVersion = static_cast<int>(cublasLtGetVersion());
  info.hasSass =
      std::find(info.sassArchs.begin(), info.sassArchs.end(), info.cc()) != info.sassArchs.end();
  // The first launch creates the context and loads the module (JIT-compiling PTX if there is
  // no SASS for this GPU): time it so a user sees what start-up costs.
  EI_CUDA_CHECK(cudaSetDevice(index));
  const auto t0 = std::chrono::steady_clock::now();
  probeKernel<<<1, 1>>>(nullptr);
  EI_CUDA_CHECK(cudaGetLastError());
  EI_CUDA_CHECK(cudaDeviceSynchronize());
  info.firstLaunchMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return info;
}

}  // namespace edgeinfer
