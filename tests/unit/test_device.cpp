// Device facts. The GPU half skips, saying why, where there is no usable GPU (CI).
#include <gtest/gtest.h>

#include "builder/engine_format.h"
#include "builder/timing_cache.h"
#include "core/device.h"
#include "edgeinfer/engine.h"

namespace edgeinfer {
namespace {

TEST(Device, CpuKeyNamesTheArchitecture) {
  EXPECT_EQ(cpuDeviceKey().rfind("cpu-", 0), 0u);
  EXPECT_EQ(builder::currentDeviceKey(Backend::kCpu), cpuDeviceKey());
}

TEST(Device, KeyIsStableAndFilesystemSafe) {
  CudaDeviceInfo d;
  d.name = "NVIDIA H200 / test";
  d.ccMajor = 9;
  d.smCount = 132;
  d.driverVersion = 13000;
  const std::string k = builder::DeviceKey::of(d).toString();
  EXPECT_EQ(k, builder::DeviceKey::of(d).toString());
  EXPECT_EQ(k.find('/'), std::string::npos);
  EXPECT_EQ(k.find(' '), std::string::npos);
  EXPECT_NE(k.find("sm90-132sm"), std::string::npos);
  CudaDeviceInfo other = d;
  other.cudnnVersion = 91900;  // another library version => another key
  EXPECT_NE(k, builder::DeviceKey::of(other).toString());
}

TEST(Device, NoSuchGpuIndex_n) {
  auto d = queryCudaDevice(1000);
  EXPECT_FALSE(d.ok());
}

// The public question (what the GStreamer plugin asks at load): agrees with the device query,
// and says why not.
TEST(Device, GpuUsableAgreesWithTheQuery) {
  std::string why;
  const bool usable = gpuUsable(0, &why);
  EXPECT_EQ(usable, queryCudaDevice(0).ok()) << why;
  if (!usable) {
    EXPECT_FALSE(why.empty());
  }
  if (!builtWithCuda()) {
    EXPECT_NE(why.find("built without CUDA"), std::string::npos) << why;
  }
  std::string none;
  EXPECT_FALSE(gpuUsable(1000, &none));
  EXPECT_FALSE(none.empty());
}

TEST(Device, GpuQuery) {
  if (!builtWithCuda()) {
    EXPECT_EQ(queryCudaDevice(0).status().code(), ErrorCode::kUnsupported);
    GTEST_SKIP() << "this build has no CUDA support";
  }
  auto d = queryCudaDevice(0);
  if (!d.ok()) GTEST_SKIP() << "no usable GPU: " << d.status().toString();
  EXPECT_FALSE(d->name.empty());
  EXPECT_GT(d->cc(), 50);
  EXPECT_GT(d->smCount, 0);
  EXPECT_GT(d->totalMemoryBytes, int64_t{1} << 30);
  EXPECT_GT(d->cudnnVersion, 90000);
  EXPECT_GT(d->firstLaunchMs, 0.0);
  // The default build embeds SASS for the data-centre Hopper parts the tests run on.
  if (d->cc() == 90) {
    EXPECT_TRUE(d->hasSass);
  }
  EXPECT_EQ(builder::currentDeviceKey(Backend::kCuda), builder::DeviceKey::of(*d).toString());
}

}  // namespace
}  // namespace edgeinfer
