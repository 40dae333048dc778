// Reformat kernels (kernels/cuda/reformat.h): every layout change NCHW <-> NHWC with a type
// change or none, for narrow channel counts (one thread per pixel: image inputs with C = 3) and
// wide ones (shared-memory tiles), against a host reference, element for element. Skips
// without a GPU.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA
#include <cuda_runtime.h>

#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "kernels/cuda/reformat.h"
#include "tactic_test_util.h"

namespace edgeinfer::cuda {
namespace {

/// Host reference of one element's conversion, as bytes of the destination type.
void convertHost(const uint8_t* src, DataType from, uint8_t* dst, DataType to) {
  float v = 0.f;
  if (from == DataType::kFloat32) std::memcpy(&v, src, 4);
  if (from == DataType::kFloat16) {
    uint16_t h;
    std::memcpy(&h, src, 2);
    v = halfToFloat(h);
  }
  if (from == to) {
    std::memcpy(dst, src, dataTypeSize(to));
  } else if (to == DataType::kFloat16) {
    const uint16_t h = floatToHalf(v);
    std::memcpy(dst, &h, 2);
  } else {
    std::memcpy(dst, &v, 4);
  }
}

/// Reformats a random [n][c][hw] (or [n][hw][c]) tensor on the GPU and compares every byte.
void checkReformat(DataType from, DataType to, bool srcNhwc, int64_t n, int64_t c, int64_t hw) {
  SCOPED_TRACE(std::string(dataTypeName(from)) + (srcNhwc ? ".nhwc" : ".nchw") + " -> " +
               dataTypeName(to) + (srcNhwc ? ".nchw" : ".nhwc") + ", c = " + std::to_string(c));
  const int64_t count = n * c * hw;
  const size_t is = dataTypeSize(from), os = dataTypeSize(to);
  std::vector<uint8_t> src(static_cast<size_t>(count) * is), want(static_cast<size_t>(count) * os);
  std::mt19937 rng(static_cast<uint32_t>(c * 131 + hw));
  std::uniform_real_distribution<float> u(-3.f, 3.f);
  for (int64_t i = 0; i < count; ++i) {
    const float v = u(rng);
    if (from == DataType::kFloat32) std::memcpy(&src[static_cast<size_t>(i) * 4], &v, 4);
    if (from == DataType::kFloat16) {
      const uint16_t h = floatToHalf(v);
      std::memcpy(&src[static_cast<size_t>(i) * 2], &h, 2);
    }
  }
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t q = 0; q < hw; ++q) {
        const int64_t planar = (b * c + k) * hw + q, packed = (b * hw + q) * c + k;
        const int64_t si = srcNhwc ? packed : planar, di = srcNhwc ? planar : packed;
        convertHost(&src[static_cast<size_t>(si) * is], from, &want[static_cast<size_t>(di) * os],
                    to);
      }
  void *dsrc = nullptr, *ddst = nullptr;
  ASSERT_EQ(cudaMalloc(&dsrc, src.size()), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ddst, want.size()), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dsrc, src.data(), src.size(), cudaMemcpyHostToDevice), cudaSuccess);
  const Status s = launchReformat(dsrc, from, srcNhwc, ddst, to, !srcNhwc, n, c, hw, nullptr);
  ASSERT_TRUE(s.ok()) << s.toString();
  std::vector<uint8_t> got(want.size());
  ASSERT_EQ(cudaMemcpy(got.data(), ddst, got.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dsrc);
  cudaFree(ddst);
  int64_t bad = 0;
  for (int64_t i = 0; i < count; ++i)
    bad +=
        std::memcmp(&got[static_cast<size_t>(i) * os], &want[static_cast<size_t>(i) * os], os) != 0;
  EXPECT_EQ(bad, 0);
}

TEST(CudaReformat, LayoutChangesMatchTheHostElementForElement) {
  EI_SKIP_WITHOUT_GPU();
  const DataType f32 = DataType::kFloat32, f16 = DataType::kFloat16;
  for (int64_t c : {2, 3, 4, 7, 8, 9, 33})  // narrow (one thread per pixel) and tiled
    for (bool srcNhwc : {false, true})
      for (auto [from, to] :
           {std::pair{f32, f16}, std::pair{f16, f32}, std::pair{f32, f32}, std::pair{f16, f16}})
        checkReformat(from, to, srcNhwc, 3, c, 37);
  // An image batch as ResNet-50 gets it (fp32 NCHW, 3 channels) into fp16 NHWC.
  checkReformat(f32, f16, false, 2, 3, 224 * 224);
}

TEST(CudaReformat, NarrowQuantizeAndDequantizeMatchTheHost) {
  EI_SKIP_WITHOUT_GPU();
  // float32 NCHW -> int8 NHWC (quantize) and back to float32 NCHW (dequantize), C = 3: both
  // directions of the one-thread-per-pixel path with a scale, against QuantizeLinear's rule.
  const int64_t n = 2, c = 3, hw = 41, count = n * c * hw;
  std::vector<float> x(static_cast<size_t>(count));
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  for (float& v : x) v = u(rng);
  x[7] = 0.045f;  // about one and a half steps: the rounding near a tie
  void *dx = nullptr, *dq = nullptr, *dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, count * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dq, count), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, count * 4), cudaSuccess);
  cudaMemcpy(dx, x.data(), count * 4, cudaMemcpyHostToDevice);
  const float scale = 0.03f;
  ASSERT_TRUE(launchReformat(dx, DataType::kFloat32, false, dq, DataType::kInt8, true, n, c, hw,
                             nullptr, scale)
                  .ok());
  ASSERT_TRUE(launchReformat(dq, DataType::kInt8, true, dy, DataType::kFloat32, false, n, c, hw,
                             nullptr, scale)
                  .ok());
  std::vector<int8_t> q(static_cast<size_t>(count));
  std::vector<float> y(static_cast<size_t>(count));
  ASSERT_EQ(cudaMemcpy(q.data(), dq, count, cudaMemcpyDeviceToHost), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(y.data(), dy, count * 4, cudaMemcpyDeviceToHost), cudaSuccess);
  int64_t bad = 0;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t p = 0; p < hw; ++p) {
        const size_t planar = static_cast<size_t>((b * c + k) * hw + p);
        const int8_t want = test::quantizeHost(x[planar], scale);
        bad += q[static_cast<size_t>((b * hw + p) * c + k)] != want;
        bad += y[planar] != static_cast<float>(want) * scale;
      }
  EXPECT_EQ(bad, 0);
  cudaFree(dx);
  cudaFree(dq);
  cudaFree(dy);
}

}  // namespace
}  // namespace edgeinfer::cuda

#else

TEST(CudaReformat, NeedsCuda) {
  GTEST_SKIP() << "this EdgeInfer was built without CUDA";
}

#endif
