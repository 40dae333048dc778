// The builder's timing inputs (kernels/cuda/timing_data.h): float32, float16 and int8 buffers
// get pseudo-random values in their ranges (no zeros run, no NaN, every element written, the
// same values for the same seed, other values for another); other types are left untouched.
// The negative cases (_n) need no GPU. Candidates are timed without programmatic dependent
// launch (DependentLaunchOff), on the timing thread only.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <set>
#include <thread>
#include <vector>

#include "core/half.h"
#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/timing_data.h"
#include "tactic_test_util.h"

namespace edgeinfer {
namespace {

/// Fills `count` elements of `type` (seed) over a buffer poisoned with 0x7f bytes; the bytes.
std::vector<uint8_t> filled(DataType type, int64_t count, uint32_t seed) {
  const size_t bytes = static_cast<size_t>(count) * dataTypeSize(type);
  void* d = nullptr;
  EXPECT_EQ(cudaMalloc(&d, bytes), cudaSuccess);
  EXPECT_EQ(cudaMemset(d, 0x7f, bytes), cudaSuccess);
  EXPECT_TRUE(cuda::fillTimingData(d, type, count, seed, nullptr).ok());
  std::vector<uint8_t> host(bytes);
  EXPECT_EQ(cudaMemcpy(host.data(), d, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(d);
  return host;
}

TEST(CudaTimingData, FloatsAndInt8HoldValuesInTheirRanges) {
  EI_SKIP_WITHOUT_GPU();
  const int64_t n = 100003;  // not a multiple of the block size
  const auto f32 = filled(DataType::kFloat32, n, 1);
  const auto f16 = filled(DataType::kFloat16, n, 1);
  const auto i8 = filled(DataType::kInt8, n, 1);
  double sum = 0, sumSq = 0;
  int64_t zeros = 0;
  std::set<int> int8Values;
  for (int64_t i = 0; i < n; ++i) {
    float a = 0;
    std::memcpy(&a, f32.data() + 4 * i, 4);
    uint16_t h = 0;
    std::memcpy(&h, f16.data() + 2 * i, 2);
    const float b = halfToFloat(h);
    const int q = static_cast<int8_t>(i8[static_cast<size_t>(i)]);
    ASSERT_TRUE(a >= -1.f && a < 1.f) << i << ": " << a;
    ASSERT_TRUE(b >= -1.f && b <= 1.f) << i << ": " << b;  // fp16 rounding may reach 1
    ASSERT_TRUE(q >= -127 && q <= 127) << i << ": " << q;
    EXPECT_NEAR(a, b, 1e-3) << "the same value, rounded to half";
    sum += a;
    sumSq += static_cast<double>(a) * a;
    zeros += a == 0.f ? 1 : 0;
    int8Values.insert(q);
  }
  // Uniform in [-1, 1): mean 0, variance 1/3.
  EXPECT_NEAR(sum / n, 0.0, 0.01);
  EXPECT_NEAR(sumSq / n, 1.0 / 3.0, 0.01);
  EXPECT_LT(zeros, 10);
  EXPECT_EQ(int8Values.size(), 255u) << "every int8 value in [-127, 127] appears";
  EXPECT_EQ(filled(DataType::kFloat32, n, 1), f32) << "the same seed, the same values";
  EXPECT_NE(filled(DataType::kFloat32, n, 2), f32) << "another seed, other values";
  // Other types: not written (the poison stays).
  for (DataType t : {DataType::kInt32, DataType::kInt64, DataType::kBool, DataType::kUInt8}) {
    EXPECT_FALSE(cuda::fillsTimingData(t));
    for (uint8_t byte : filled(t, 1000, 1)) ASSERT_EQ(byte, 0x7f);
  }
}

TEST(CudaTimingData, NoBufferIsAnErrorAndNothingToFillIsNot_n) {
  EXPECT_EQ(cuda::fillTimingData(nullptr, DataType::kFloat32, 10, 1, nullptr).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_TRUE(cuda::fillTimingData(nullptr, DataType::kFloat32, 0, 1, nullptr).ok());
  EXPECT_TRUE(cuda::fillTimingData(nullptr, DataType::kInt64, 10, 1, nullptr).ok());
  EXPECT_TRUE(cuda::fillsTimingData(DataType::kFloat16));
  EXPECT_TRUE(cuda::fillsTimingData(DataType::kInt8));
}

/// Launch attributes addDependentLaunch puts on an empty launch configuration.
int dependentLaunchAttributes() {
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attrs[1];
  cuda::addDependentLaunch(&cfg, attrs);
  return static_cast<int>(cfg.numAttrs);
}

TEST(CudaTimingData, DependentLaunchIsOffWhileTimedOnThatThreadOnly) {
  EI_SKIP_WITHOUT_GPU();
  if (cuda::detail::deviceCapability() < 90)
    GTEST_SKIP() << "programmatic dependent launch needs compute 9.0";
  if (!cuda::dependentLaunchEnabled()) GTEST_SKIP() << "EDGEINFER_DISABLE_PDL is set";
  EXPECT_EQ(dependentLaunchAttributes(), 1);
  {
    const cuda::DependentLaunchOff off;
    EXPECT_FALSE(cuda::dependentLaunchEnabled());
    EXPECT_EQ(dependentLaunchAttributes(), 0);
    {
      const cuda::DependentLaunchOff nested;
      EXPECT_FALSE(cuda::dependentLaunchEnabled());
    }
    EXPECT_FALSE(cuda::dependentLaunchEnabled());  // the outer one still lives
    bool other = false;  // another thread (an engine running beside a build) keeps it
    std::thread t([&] {
      cudaSetDevice(0);
      other = cuda::dependentLaunchEnabled();
    });
    t.join();
    EXPECT_TRUE(other);
  }
  EXPECT_TRUE(cuda::dependentLaunchEnabled());
  EXPECT_EQ(dependentLaunchAttributes(), 1);
}

TEST(CudaTimingData, NoDeviceOrGuardMeansNoDependentLaunchAttribute_n) {
  // Without a GPU of compute 9.0 or inside a guard, a launch gets no attribute at all (an
  // unknown attribute would fail the launch on an older device).
  const cuda::DependentLaunchOff off;
  EXPECT_FALSE(cuda::dependentLaunchEnabled());
  EXPECT_EQ(dependentLaunchAttributes(), 0);
}

}  // namespace
}  // namespace edgeinfer

#else

TEST(CudaTimingData, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif  // EDGEINFER_HAVE_CUDA
