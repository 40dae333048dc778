#include <cstdio>
#include <iostream>
#include <sstream>

#include "builder/timing_cache.h"
#include "cli.h"
#include "core/device.h"
#include "edgeinfer/engine.h"

namespace edgeinfer::cli {
namespace {

std::string version(int v, int majorDiv, int minorDiv) {
  std::ostringstream os;
  os << v / majorDiv << "." << (v % majorDiv) / minorDiv;
  return os.str();
}

std::string archList(const std::vector<int>& v) {
  std::string s;
  for (int a : v) s += (s.empty() ? "sm_" : ", sm_") + std::to_string(a);
  return s.empty() ? "none" : s;
}

}  // namespace

int cmdDevice(const Args& a) {
  if (a.has("help")) {
    std::cout << "usage: edgeinfer device [--index N]\n"
                 "Prints the GPU, its compute capability and memory, the device key engines and\n"
                 "timing caches are filed under, and whether this binary carries machine code\n"
                 "(SASS) for the GPU or makes the driver JIT-compile PTX at start.\n";
    return 0;
  }
  std::cout << "EdgeInfer " << sdkVersion() << "\n";
  std::cout << "CPU: device key " << cpuDeviceKey() << "\n";
  if (!builtWithCuda()) {
    std::cout << "GPU: this build has no CUDA support (configure with EDGEINFER_WITH_CUDA=ON)\n";
    return 0;
  }
  const int index = std::atoi(a.get("index", "0").c_str());
  auto dev = queryCudaDevice(index);
  if (!dev.ok()) {
    std::cout << "GPU: none usable: " << dev.status().toString() << "\n";
    return 0;
  }
  const CudaDeviceInfo& d = *dev;
  char mem[64];
  std::snprintf(mem, sizeof mem, "%.1f GiB", static_cast<double>(d.totalMemoryBytes) / (1 << 30));
  std::cout << "GPU " << d.index << ": " << d.name << "\n"
            << "  compute capability " << d.ccMajor << "." << d.ccMinor << ", " << d.smCount
            << " SMs, " << mem << ", L2 " << d.l2CacheBytes / (1 << 20)
            << " MiB, shared memory/block " << d.sharedMemPerBlockOptin / 1024 << " KiB (opt-in)\n"
            << "  driver " << version(d.driverVersion, 1000, 10) << ", runtime "
            << version(d.runtimeVersion, 1000, 10) << ", cuDNN " << d.cudnnVersion / 10000 << "."
            << (d.cudnnVersion % 10000) / 100 << "." << d.cudnnVersion % 100 << ", cuBLASLt "
            << d.cublasVersion << "\n"
            << "  device key: " << builder::DeviceKey::of(d).toString() << "\n"
            << "  this binary: SASS for " << archList(d.sassArchs) << "; PTX for "
            << archList(d.ptxArchs) << "\n";
  if (d.hasSass)
    std::cout << "  machine code: SASS for sm_" << d.cc() << " is embedded: no JIT compilation\n";
  else
    std::cout << "  machine code: NO SASS for sm_" << d.cc()
              << ": the driver JIT-compiles PTX at start (rebuild with CMAKE_CUDA_ARCHITECTURES "
                 "including "
              << d.cc() << ")\n";
  std::printf("  first kernel launch (module load%s): %.1f ms\n", d.hasSass ? "" : " + PTX JIT",
              d.firstLaunchMs);
  return 0;
}

}  // namespace edgeinfer::cli
