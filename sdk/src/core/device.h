// What the SDK knows about the machine it runs on: the CUDA device (when this build has
// CUDA and a GPU is usable) and the keys that identify it for engines and timing caches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "edgeinfer/status.h"

namespace edgeinfer {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;  // "NVIDIA H200"
  int ccMajor = 0, ccMinor = 0;
  int smCount = 0;
  int64_t totalMemoryBytes = 0;
  int64_t l2CacheBytes = 0;
  int64_t sharedMemPerBlockOptin = 0;
  int driverVersion = 0;  // e.g. 13000
  int runtimeVersion = 0;
  int cudnnVersion = 0;  // e.g. 91900 (0 if cuDNN is not linked)
  int cublasVersion = 0;
  /// Architectures this binary carries machine code (SASS) for, and PTX for, e.g. {87,90,110}.
  std::vector<int> sassArchs;
  std::vector<int> ptxArchs;
  bool hasSass = false;        // SASS for this device's architecture is embedded
  double firstLaunchMs = 0.0;  // first launch: module load (+ PTX JIT if no SASS)

  int cc() const { return ccMajor * 10 + ccMinor; }
};

/// True when this build was compiled with the CUDA backend.
bool builtWithCuda();

/// Queries GPU `index`. Fails (kUnsupported) in a build without CUDA, and (kCudaError) with
/// the driver's own words when there is no usable GPU.
Expected<CudaDeviceInfo> queryCudaDevice(int index = 0);

/// The CPU's key ("cpu-x86_64"): CPU reference engines are portable within an architecture.
std::string cpuDeviceKey();

}  // namespace edgeinfer
