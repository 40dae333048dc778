#include "core/device.h"

#include <cstdio>

namespace edgeinfer {

std::string cpuDeviceKey() {
#if defined(__x86_64__)
  return "cpu-x86_64";
#elif defined(__aarch64__)
  return "cpu-aarch64";
#else
  return "cpu-unknown";
#endif
}

std::string CudaDeviceInfo::deviceKey(const std::string& sdkVersion) const {
  std::string safe;
  for (char c : name) safe += (isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '_';
  // Library versions change kernels' timings and availability: hash them into the key.
  const std::string versions = std::to_string(driverVersion) + "/" +
                               std::to_string(runtimeVersion) + "/" + std::to_string(cudnnVersion) +
                               "/" + std::to_string(cublasVersion) + "/" + sdkVersion;
  uint32_t h = 2166136261u;
  for (char c : versions) {
    h ^= static_cast<uint8_t>(c);
    h *= 16777619u;
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "-sm%d-%dsm-%08x", cc(), smCount, h);
  return safe + buf;
}

}  // namespace edgeinfer

#ifndef EDGEINFER_HAVE_CUDA
namespace edgeinfer {

bool builtWithCuda() {
  return false;
}

Expected<CudaDeviceInfo> queryCudaDevice(int) {
  return Status(ErrorCode::kUnsupported, "this build of EdgeInfer has no CUDA support");
}

}  // namespace edgeinfer
#endif
