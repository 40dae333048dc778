// CPU reference kernels and shape inference for the integer / quantized linear ops
// (MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv) and the small tensor ops Trilu,
// CastLike, EyeLike, Shrink, MeanVarianceNormalization and Dropout's build-time check: the ONNX
// examples, random inputs against brute-force loops (fixed seeds) and negative cases (_n).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "graph/op_schema.h"
#include "kernels/ref/ref_kernels.h"
#include "ref_test_util.h"

namespace edgeinfer {
namespace {

using namespace test;

template <typename T>
std::vector<T> randomInts(size_t n, uint32_t seed, int lo, int hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> d(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(d(rng));
  return v;
}

int64_t requant(int64_t acc, float mult, int64_t zp, int64_t lo, int64_t hi) {
  const double v = std::nearbyint(static_cast<double>(acc) * mult) + static_cast<double>(zp);
  return static_cast<int64_t>(
      std::min(std::max(v, static_cast<double>(lo)), static_cast<double>(hi)));
}

// ---- MatMulInteger, QLinearMatMul ----------------------------------------------------------

TEST(RefMatMulInteger, OnnxExample) {
  graph::Node n = makeNode("MatMulInteger", 4);
  Tensor a = u8({4, 3}, {11, 7, 3, 10, 6, 2, 9, 5, 1, 8, 4, 0});
  Tensor b = u8({3, 2}, {1, 4, 2, 5, 3, 6});
  Tensor az = u8({}, {12});
  Tensor bz = u8({}, {0});
  Tensor y = run1(n, {&a, &b, &az, &bz});
  EXPECT_EQ(y.dtype(), DataType::kInt32);
  EXPECT_EQ(vals(y), V({-38, -83, -44, -98, -50, -113, -56, -128}));
}

TEST(RefMatMulInteger, RandomPerRowAndColumnZeroPointsWithBroadcast) {
  const int64_t M = 5, K = 7, N = 3;
  auto av = randomInts<int8_t>(2 * M * K, 1, -128, 127);
  auto bv = randomInts<uint8_t>(K * N, 2, 0, 255);
  auto azv = randomInts<int8_t>(M, 3, -20, 20);
  auto bzv = randomInts<uint8_t>(N, 4, 100, 150);
  Tensor a = s8({2, M, K}, av), b = u8({K, N}, bv), az = s8({M}, azv), bz = u8({N}, bzv);
  graph::Node n = makeNode("MatMulInteger", 4);
  Tensor y = run1(n, {&a, &b, &az, &bz});
  ASSERT_EQ(y.shape(), Shape({2, M, N}));
  for (int64_t t = 0; t < 2; ++t)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t j = 0; j < N; ++j) {
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += (av[static_cast<size_t>((t * M + m) * K + k)] - azv[static_cast<size_t>(m)]) *
                 (bv[static_cast<size_t>(k * N + j)] - bzv[static_cast<size_t>(j)]);
        EXPECT_EQ(y.getAsInt64((t * M + m) * N + j), acc);
      }
}

TEST(RefQLinearMatMul, OnnxExample2D) {
  graph::Node n = makeNode("QLinearMatMul", 8);
  Tensor a = u8({2, 4}, {208, 236, 0, 238, 3, 214, 255, 29});
  Tensor as = f32({}, {0.0066f});
  Tensor az = u8({}, {113});
  Tensor b = u8({4, 3}, {152, 51, 244, 60, 26, 255, 0, 127, 246, 127, 254, 247});
  Tensor bs = f32({}, {0.00705f});
  Tensor bz = u8({}, {114});
  Tensor ys = f32({}, {0.0107f});
  Tensor yz = u8({}, {118});
  Tensor y = run1(n, {&a, &as, &az, &b, &bs, &bz, &ys, &yz});
  EXPECT_EQ(y.dtype(), DataType::kUInt8);
  EXPECT_EQ(vals(y), V({168, 115, 255, 1, 66, 151}));
}

TEST(RefQLinearMatMul, RandomInt8AgainstBruteForce) {
  const int64_t M = 4, K = 13, N = 6;
  auto av = randomInts<int8_t>(M * K, 10, -128, 127);
  auto bv = randomInts<int8_t>(K * N, 11, -128, 127);
  Tensor a = s8({M, K}, av), b = s8({K, N}, bv);
  Tensor as = f32({}, {0.02f}), bs = f32({N}, {0.01f, 0.02f, 0.005f, 0.03f, 0.015f, 0.04f});
  Tensor az = s8({}, {3}), bz = s8({N}, {0, 0, 0, 0, 0, 0});
  Tensor ys = f32({}, {0.5f}), yz = s8({}, {-10});
  graph::Node n = makeNode("QLinearMatMul", 8);
  Tensor y = run1(n, {&a, &as, &az, &b, &bs, &bz, &ys, &yz});
  ASSERT_EQ(y.dtype(), DataType::kInt8);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t j = 0; j < N; ++j) {
      int64_t acc = 0;
      for (int64_t k = 0; k < K; ++k)
        acc += (av[static_cast<size_t>(m * K + k)] - 3) * bv[static_cast<size_t>(k * N + j)];
      const float mult = 0.02f * static_cast<float>(bs.getAsDouble(j)) / 0.5f;
      EXPECT_EQ(y.getAsInt64(m * N + j), requant(acc, mult, -10, -128, 127));
    }
}

TEST(RefQLinearMatMul, RoundsHalfToEven) {
  // acc = 1 * 5 = 5; 5 * 0.5 = 2.5 -> 2 ; 3 * 0.5 = 1.5 -> 2
  graph::Node n = makeNode("QLinearMatMul", 8);
  Tensor a = u8({1, 1}, {5}), b = u8({1, 2}, {1, 1});
  Tensor one = f32({}, {1.f}), half = f32({}, {0.5f}), two = f32({}, {2.f});
  Tensor z = u8({}, {0}), bz = u8({}, {0});
  Tensor a3 = u8({1, 1}, {3});
  EXPECT_EQ(vals(run1(n, {&a, &one, &z, &b, &half, &bz, &one, &z})), V({2, 2}));
  EXPECT_EQ(vals(run1(n, {&a3, &one, &z, &b, &one, &bz, &two, &z})), V({2, 2}));
}

TEST(RefMatMulInteger, InnerDimMismatch_n) {
  graph::Node n = makeNode("MatMulInteger", 2);
  Tensor a = u8({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = u8({2, 2}, {1, 2, 3, 4});
  EXPECT_EQ(runStatus(n, {&a, &b}).code(), ErrorCode::kInvalidModel);
}

TEST(RefMatMulInteger, FloatInput_n) {
  graph::Node n = makeNode("MatMulInteger", 2);
  Tensor a = f32({1, 1}, {1});
  Tensor b = u8({1, 1}, {1});
  EXPECT_EQ(runStatus(n, {&a, &b}).code(), ErrorCode::kInvalidModel);
}

TEST(RefMatMulInteger, ZeroPointTypeDiffers_n) {
  graph::Node n = makeNode("MatMulInteger", 3);
  Tensor a = u8({1, 1}, {1});
  Tensor b = u8({1, 1}, {1});
  Tensor az = s8({}, {0});
  EXPECT_EQ(runStatus(n, {&a, &b, &az}).code(), ErrorCode::kInvalidModel);
}

TEST(RefMatMulInteger, ZeroPointWrongLength_n) {
  graph::Node n = makeNode("MatMulInteger", 3);
  Tensor a = u8({2, 2}, {1, 2, 3, 4});
  Tensor b = u8({2, 2}, {1, 2, 3, 4});
  Tensor az = u8({3}, {0, 0, 0});
  EXPECT_FALSE(runStatus(n, {&a, &b, &az}).ok());
}

TEST(RefQLinearMatMul, FloatZeroPoint_n) {
  graph::Node n = makeNode("QLinearMatMul", 8);
  Tensor a = u8({1, 1}, {1}), b = u8({1, 1}, {1});
  Tensor s = f32({}, {1.f}), z = u8({}, {0}), fz = f32({}, {0.f});
  EXPECT_EQ(runStatus(n, {&a, &s, &z, &b, &s, &z, &s, &fz}).code(), ErrorCode::kInvalidModel);
}

TEST(RefQLinearMatMul, NonScalarYScale_n) {
  graph::Node n = makeNode("QLinearMatMul", 8);
  Tensor a = u8({1, 1}, {1}), b = u8({1, 1}, {1});
  Tensor s = f32({}, {1.f}), s2 = f32({2}, {1.f, 1.f}), z = u8({}, {0});
  EXPECT_EQ(runStatus(n, {&a, &s, &z, &b, &s, &z, &s2, &z}).code(), ErrorCode::kInvalidModel);
}

TEST(RefQLinearMatMul, IntegerScale_n) {
  graph::Node n = makeNode("QLinearMatMul", 8);
  Tensor a = u8({1, 1}, {1}), b = u8({1, 1}, {1});
  Tensor s = f32({}, {1.f}), is = i32({}, {1}), z = u8({}, {0});
  EXPECT_EQ(runStatus(n, {&a, &is, &z, &b, &s, &z, &s, &z}).code(), ErrorCode::kInvalidModel);
}

// ---- ConvInteger, QLinearConv --------------------------------------------------------------

TEST(RefConvInteger, OnnxExamples) {
  Tensor x = u8({1, 1, 3, 3}, {2, 3, 4, 5, 6, 7, 8, 9, 10});
  Tensor xz = u8({}, {1});
  Tensor w = u8({1, 1, 2, 2}, {1, 1, 1, 1});
  graph::Node n = makeNode("ConvInteger", 3);
  Tensor y = run1(n, {&x, &w, &xz});
  EXPECT_EQ(y.shape(), Shape({1, 1, 2, 2}));
  EXPECT_EQ(vals(y), V({12, 16, 24, 28}));
  graph::Node p = makeNode("ConvInteger", 3);
  p.attrs.set("pads", graph::Attribute::Ints({1, 1, 1, 1}));
  Tensor yp = run1(p, {&x, &w, &xz});
  EXPECT_EQ(yp.shape(), Shape({1, 1, 4, 4}));
  EXPECT_EQ(vals(yp), V({1, 3, 5, 3, 5, 12, 16, 9, 11, 24, 28, 15, 7, 15, 17, 9}));
}

/// Brute-force 2-D grouped convolution with explicit padding, in int64.
std::vector<int64_t> bruteConv2d(const std::vector<int>& x, const std::vector<int>& w, int64_t N,
                                 int64_t C, int64_t H, int64_t W, int64_t M, int64_t kh, int64_t kw,
                                 int64_t group, int64_t s, int64_t dh, int64_t dw, int64_t pad,
                                 int64_t* oh, int64_t* ow) {
  *oh = (H + 2 * pad - ((kh - 1) * dh + 1)) / s + 1;
  *ow = (W + 2 * pad - ((kw - 1) * dw + 1)) / s + 1;
  const int64_t cg = C / group, mg = M / group;
  std::vector<int64_t> y;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t i = 0; i < *oh; ++i)
        for (int64_t j = 0; j < *ow; ++j) {
          int64_t acc = 0;
          for (int64_t c = 0; c < cg; ++c)
            for (int64_t a = 0; a < kh; ++a)
              for (int64_t b = 0; b < kw; ++b) {
                const int64_t yy = i * s - pad + a * dh, xx = j * s - pad + b * dw;
                if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                const int64_t ci = (m / mg) * cg + c;
                acc +=
                    static_cast<int64_t>(x[static_cast<size_t>(((n * C + ci) * H + yy) * W + xx)]) *
                    w[static_cast<size_t>(((m * cg + c) * kh + a) * kw + b)];
              }
          y.push_back(acc);
        }
  return y;
}

TEST(RefConvInteger, RandomGroupedStridedDilatedAgainstBruteForce) {
  const int64_t N = 2, C = 4, H = 9, W = 7, M = 6, group = 2, kh = 3, kw = 2;
  auto xv = randomInts<uint8_t>(N * C * H * W, 20, 0, 255);
  auto wv = randomInts<int8_t>(M * (C / group) * kh * kw, 21, -128, 127);
  const uint8_t xzp = 128;
  const std::vector<int8_t> wzp = {0, 1, -1, 2, -2, 3};
  Tensor x = u8({N, C, H, W}, xv), w = s8({M, C / group, kh, kw}, wv);
  Tensor xz = u8({}, {xzp}), wz = s8({M}, wzp);
  graph::Node n = makeNode("ConvInteger", 4);
  n.attrs.set("group", graph::Attribute::Int(group));
  n.attrs.set("strides", graph::Attribute::Ints({2, 2}));
  n.attrs.set("dilations", graph::Attribute::Ints({2, 1}));
  n.attrs.set("pads", graph::Attribute::Ints({1, 1, 1, 1}));
  Tensor y = run1(n, {&x, &w, &xz, &wz});
  std::vector<int> xs(xv.begin(), xv.end()), ws(wv.begin(), wv.end());
  for (auto& v : xs) v -= xzp;
  const int64_t per = (C / group) * kh * kw;
  for (size_t i = 0; i < ws.size(); ++i) ws[i] -= wzp[i / static_cast<size_t>(per)];
  int64_t oh = 0, ow = 0;
  const auto ref = bruteConv2d(xs, ws, N, C, H, W, M, kh, kw, group, 2, 2, 1, 1, &oh, &ow);
  ASSERT_EQ(y.shape(), Shape({N, M, oh, ow}));
  for (size_t i = 0; i < ref.size(); ++i) EXPECT_EQ(y.getAsInt64(static_cast<int64_t>(i)), ref[i]);
}

TEST(RefQLinearConv, RandomPerChannelWithBiasAgainstBruteForce) {
  const int64_t N = 1, C = 3, H = 8, W = 6, M = 4, k = 3;
  auto xv = randomInts<int8_t>(N * C * H * W, 30, -128, 127);
  auto wv = randomInts<int8_t>(M * C * k * k, 31, -128, 127);
  const std::vector<int32_t> bias = {100, -2000, 0, 777};
  const std::vector<float> wsc = {0.001f, 0.002f, 0.0005f, 0.003f};
  Tensor x = s8({N, C, H, W}, xv), w = s8({M, C, k, k}, wv), b = i32({M}, bias);
  Tensor xs = f32({}, {0.05f}), xz = s8({}, {-3}), wsT = f32({M}, wsc), wz = s8({M}, {0, 0, 0, 0});
  Tensor ys = f32({}, {0.25f}), yz = u8({}, {128});
  graph::Node n = makeNode("QLinearConv", 9);
  n.attrs.set("auto_pad", graph::Attribute::String("SAME_UPPER"));
  Tensor y = run1(n, {&x, &xs, &xz, &w, &wsT, &wz, &ys, &yz, &b});
  ASSERT_EQ(y.shape(), Shape({N, M, H, W}));
  ASSERT_EQ(y.dtype(), DataType::kUInt8);
  std::vector<int> xi(xv.begin(), xv.end()), wi(wv.begin(), wv.end());
  for (auto& v : xi) v += 3;
  int64_t oh = 0, ow = 0;
  auto acc = bruteConv2d(xi, wi, N, C, H, W, M, k, k, 1, 1, 1, 1, 1, &oh, &ow);
  ASSERT_EQ(oh, H);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t i = 0; i < H * W; ++i) {
      const float mult = 0.05f * wsc[static_cast<size_t>(m)] / 0.25f;
      const int64_t a = acc[static_cast<size_t>(m * H * W + i)] + bias[static_cast<size_t>(m)];
      EXPECT_EQ(y.getAsInt64(m * H * W + i), requant(a, mult, 128, 0, 255)) << m << "," << i;
    }
}

TEST(RefConvInteger, ChannelsDoNotMatchGroup_n) {
  graph::Node n = makeNode("ConvInteger", 2);
  n.attrs.set("group", graph::Attribute::Int(2));
  Tensor x = u8({1, 3, 2, 2}, std::vector<uint8_t>(12, 1));
  Tensor w = u8({2, 1, 1, 1}, {1, 1});
  EXPECT_EQ(runStatus(n, {&x, &w}).code(), ErrorCode::kInvalidModel);
}

TEST(RefConvInteger, KernelLargerThanInput_n) {
  graph::Node n = makeNode("ConvInteger", 2);
  Tensor x = u8({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor w = u8({1, 1, 3, 3}, std::vector<uint8_t>(9, 1));
  EXPECT_EQ(runStatus(n, {&x, &w}).code(), ErrorCode::kInvalidModel);
}

TEST(RefConvInteger, WeightZeroPointWrongLength_n) {
  graph::Node n = makeNode("ConvInteger", 4);
  Tensor x = u8({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor w = u8({2, 1, 1, 1}, {1, 1});
  Tensor xz = u8({}, {0});
  Tensor wz = u8({3}, {0, 0, 0});
  EXPECT_EQ(runStatus(n, {&x, &w, &xz, &wz}).code(), ErrorCode::kInvalidModel);
}

TEST(RefConvInteger, RankMismatch_n) {
  graph::Node n = makeNode("ConvInteger", 2);
  Tensor x = u8({1, 1, 4}, {1, 2, 3, 4});
  Tensor w = u8({1, 1, 1, 1}, {1});
  EXPECT_EQ(runStatus(n, {&x, &w}).code(), ErrorCode::kInvalidModel);
}

TEST(RefQLinearConv, BiasWrongLength_n) {
  graph::Node n = makeNode("QLinearConv", 9);
  Tensor x = u8({1, 1, 2, 2}, {1, 2, 3, 4}), w = u8({1, 1, 1, 1}, {1});
  Tensor s = f32({}, {1.f}), z = u8({}, {0}), b = i32({2}, {0, 0});
  EXPECT_EQ(runStatus(n, {&x, &s, &z, &w, &s, &z, &s, &z, &b}).code(), ErrorCode::kInvalidModel);
}

TEST(RefQLinearConv, WeightScaleWrongLength_n) {
  graph::Node n = makeNode("QLinearConv", 8);
  Tensor x = u8({1, 1, 2, 2}, {1, 2, 3, 4}), w = u8({1, 1, 1, 1}, {1});
  Tensor s = f32({}, {1.f}), s3 = f32({3}, {1.f, 1.f, 1.f}), z = u8({}, {0});
  EXPECT_EQ(runStatus(n, {&x, &s, &z, &w, &s3, &z, &s, &z}).code(), ErrorCode::kInvalidModel);
}

TEST(RefQLinearConv, Int32OutputZeroPoint_n) {
  graph::Node n = makeNode("QLinearConv", 8);
  Tensor x = u8({1, 1, 2, 2}, {1, 2, 3, 4}), w = u8({1, 1, 1, 1}, {1});
  Tensor s = f32({}, {1.f}), z = u8({}, {0}), iz = i32({}, {0});
  EXPECT_EQ(runStatus(n, {&x, &s, &z, &w, &s, &z, &s, &iz}).code(), ErrorCode::kInvalidModel);
}

// ---- Trilu, CastLike, EyeLike, Shrink, MVN, Dropout ----------------------------------------

TEST(RefTrilu, UpperAndLowerWithK) {
  Tensor x = f32({2, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor k1 = i64({}, {1});
  graph::Node up = makeNode("Trilu", 2);
  EXPECT_EQ(vals(run1(up, {&x, &k1})), V({0, 2, 3, 0, 0, 6, 0, 0, 0, 0, 2, 3, 0, 0, 6, 0, 0, 0}));
  graph::Node lo = makeNode("Trilu", 1);
  lo.attrs.set("upper", graph::Attribute::Int(0));
  EXPECT_EQ(vals(run1(lo, {&x})), V({1, 0, 0, 4, 5, 0, 7, 8, 9, 1, 0, 0, 4, 5, 0, 7, 8, 9}));
  Tensor km = i64({}, {-5});  // beyond the matrix: everything kept (upper)
  Tensor r = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(vals(run1(up, {&r, &km})), V({1, 2, 3, 4, 5, 6}));
}

TEST(RefCastLike, CastsToSecondInputType) {
  graph::Node n = makeNode("CastLike", 2);
  Tensor x = f32({3}, {1.7f, -2.2f, 0.f});
  Tensor like = i32({1}, {0});
  Tensor y = run1(n, {&x, &like});
  EXPECT_EQ(y.dtype(), DataType::kInt32);
  EXPECT_EQ(vals(y), V({1, -2, 0}));
  Tensor h = make<uint16_t>(DataType::kFloat16, {1}, {0});
  EXPECT_EQ(run1(n, {&x, &h}).dtype(), DataType::kFloat16);
}

TEST(RefEyeLike, DtypeAttributeIsOnnxEnumAndK) {
  graph::Node n = makeNode("EyeLike", 1);
  n.attrs.set("dtype", graph::Attribute::Int(1));  // TensorProto FLOAT
  n.attrs.set("k", graph::Attribute::Int(1));
  Tensor x = i32({3, 4}, std::vector<int32_t>(12, 5));
  Tensor y = run1(n, {&x});
  EXPECT_EQ(y.dtype(), DataType::kFloat32);
  EXPECT_EQ(vals(y), V({0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1}));
  graph::Node same = makeNode("EyeLike", 1);
  same.attrs.set("k", graph::Attribute::Int(-2));
  Tensor y2 = run1(same, {&x});
  EXPECT_EQ(y2.dtype(), DataType::kInt32);
  EXPECT_EQ(vals(y2), V({0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0}));
}

TEST(RefShrink, HardAndSoft) {
  Tensor x = f32({5}, {-2, -1, 0, 1, 2});
  graph::Node hard = makeNode("Shrink", 1);
  hard.attrs.set("lambd", graph::Attribute::Float(1.5f));
  EXPECT_EQ(vals(run1(hard, {&x})), V({-2, 0, 0, 0, 2}));
  graph::Node soft = makeNode("Shrink", 1);
  soft.attrs.set("lambd", graph::Attribute::Float(1.5f));
  soft.attrs.set("bias", graph::Attribute::Float(1.5f));
  EXPECT_EQ(vals(run1(soft, {&x})), V({-0.5, 0, 0, 0, 0.5}));
  Tensor xi = i32({3}, {-5, 0, 5});
  soft.attrs.set("bias", graph::Attribute::Float(1.f));
  EXPECT_EQ(vals(run1(soft, {&xi})), V({-4, 0, 4}));
}

TEST(RefMvn, RandomAgainstBruteForce) {
  const Shape s({2, 3, 4, 5});
  Tensor x = randomF32(s, 42, -3.f, 5.f);
  for (const auto& axes : std::vector<std::vector<int64_t>>{{0, 2, 3}, {2, 3}, {-1}}) {
    graph::Node n = makeNode("MeanVarianceNormalization", 1);
    if (axes.size() != 3) n.attrs.set("axes", graph::Attribute::Ints(axes));
    Tensor y = run1(n, {&x});
    std::vector<bool> red(4, false);
    for (int64_t a : axes) red[static_cast<size_t>(a < 0 ? a + 4 : a)] = true;
    const std::vector<int64_t> st = contiguousStrides(s);
    for (int64_t i = 0; i < s.numel(); ++i) {
      // brute force: scan every element in the same group as i
      double sum = 0, sq = 0, cnt = 0;
      for (int64_t j = 0; j < s.numel(); ++j) {
        bool same = true;
        for (size_t d = 0; d < 4; ++d)
          if (!red[d] && (i / st[d]) % s[d] != (j / st[d]) % s[d]) same = false;
        if (!same) continue;
        const double v = x.getAsDouble(j);
        sum += v;
        sq += v * v;
        cnt += 1;
      }
      const double mean = sum / cnt;
      const double want = (x.getAsDouble(i) - mean) / (std::sqrt(sq / cnt - mean * mean) + 1e-9);
      EXPECT_NEAR(y.getAsDouble(i), want, 1e-5);
    }
  }
}

TEST(RefDropout, ConstantFalseTrainingModeRuns) {
  graph::Node n = makeNode("Dropout", 3, 2);
  Tensor x = f32({3}, {1, 2, 3});
  Tensor ratio = f32({}, {0.5f});
  Tensor mode = make<uint8_t>(DataType::kBool, {}, {0});
  auto out = runAll(n, {&x, &ratio, &mode});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(vals(out[0]), V({1, 2, 3}));
  EXPECT_EQ(vals(out[1]), V({1, 1, 1}));
}

TEST(RefDropout, NonConstantTrainingModeIsUnsupported_n) {
  graph::Node n = makeNode("Dropout", 3, 2);
  auto r = inferBuild(
      n, {iv(DataType::kFloat32, {3}), iv(DataType::kFloat32, {}), iv(DataType::kBool, {})});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(r.status().message().find("training_mode must be a constant"), std::string::npos);
}

TEST(RefDropout, TrueTrainingMode_n) {
  graph::Node n = makeNode("Dropout", 3, 2);
  Tensor x = f32({3}, {1, 2, 3});
  Tensor ratio = f32({}, {0.5f});
  Tensor mode = make<uint8_t>(DataType::kBool, {}, {1});
  EXPECT_EQ(runStatus(n, {&x, &ratio, &mode}).code(), ErrorCode::kUnsupported);
}

TEST(RefTrilu, RankOne_n) {
  graph::Node n = makeNode("Trilu", 1);
  Tensor x = f32({3}, {1, 2, 3});
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTrilu, Int32K_n) {
  graph::Node n = makeNode("Trilu", 2);
  Tensor x = f32({2, 2}, {1, 2, 3, 4});
  Tensor k = i32({}, {0});
  EXPECT_EQ(runStatus(n, {&x, &k}).code(), ErrorCode::kInvalidModel);
}

TEST(RefEyeLike, NotTwoDimensional_n) {
  graph::Node n = makeNode("EyeLike", 1);
  Tensor x = f32({2, 2, 2}, std::vector<float>(8, 0.f));
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefEyeLike, UnsupportedDtype_n) {
  graph::Node n = makeNode("EyeLike", 1);
  n.attrs.set("dtype", graph::Attribute::Int(11));  // DOUBLE
  Tensor x = f32({2, 2}, {0, 0, 0, 0});
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kUnsupported);
}

TEST(RefShrink, NegativeLambd_n) {
  graph::Node n = makeNode("Shrink", 1);
  n.attrs.set("lambd", graph::Attribute::Float(-1.f));
  Tensor x = f32({1}, {1});
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefMvn, AxisOutOfRange_n) {
  graph::Node n = makeNode("MeanVarianceNormalization", 1);
  n.attrs.set("axes", graph::Attribute::Ints({0, 3}));
  Tensor x = f32({2, 2, 2}, std::vector<float>(8, 1.f));
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefMvn, IntegerInput_n) {
  graph::Node n = makeNode("MeanVarianceNormalization", 1);
  Tensor x = i32({1, 1, 1, 1}, {1});
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefMvn, RepeatedAxis_n) {
  graph::Node n = makeNode("MeanVarianceNormalization", 1);
  n.attrs.set("axes", graph::Attribute::Ints({1, -2}));
  Tensor x = f32({2, 2, 2}, std::vector<float>(8, 1.f));
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

}  // namespace
}  // namespace edgeinfer
