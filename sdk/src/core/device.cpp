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
