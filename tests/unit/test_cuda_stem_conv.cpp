// The cuda-stem tactic provider (kernels/cuda/stem_conv.h): every candidate of every case runs
// on the GPU and is compared with the CPU reference (FP16 storage: rel. L2 <= 2e-3); a
// persistent grid of one block gives the same bits as a full one; an engine forced onto the
// provider matches the CPU engine, also after a save and load. The negative cases (_n: no
// candidate, for a reason; a launch refused) need no GPU.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cuda_layer_case.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "kernels/cuda/fast_div.h"
#include "kernels/cuda/stem_conv.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using cuda::StemConvProvider;
using test::LayerCase;

/// One convolution: X [N, C, H, W] (values FP16 holds exactly), W [K, C, R, S], optional bias
/// and residual Z, as a Conv (no activation, no Z) or an ai.edgeinfer::FusedConv.
struct StemCase {
  int64_t N = 1, C = 3, H = 17, W = 17, K = 64, R = 7, S = 7;
  std::vector<int64_t> strides{2, 2}, dilations{1, 1}, pads{3, 3, 3, 3};
  bool bias = true, residual = false;
  std::string act;  // empty: none
  float alpha = 0.f, beta = 0.f;

  int64_t outDim(int64_t in, size_t i) const {
    const int64_t k = (i == 0 ? R : S);
    return (in + pads[i] + pads[i + 2] - dilations[i] * (k - 1) - 1) / strides[i] + 1;
  }

  LayerCase make() const {
    const bool fused = residual || !act.empty();
    LayerCase lc(fused ? "FusedConv" : "Conv");
    if (fused) lc.node().domain = graph::kEdgeInferDomain;
    lc.input(test::randomHalfExact(Shape{N, C, H, W}, 1, -1.f, 1.f))
        .constant(test::randomHalfExact(Shape{K, C, R, S}, 2, -0.3f, 0.3f));
    if (bias)
      lc.constant(test::randomHalfExact(Shape{K}, 3, -1.f, 1.f));
    else if (residual)
      lc.absent();
    if (residual)
      lc.input(test::randomHalfExact(Shape{N, K, outDim(H, 0), outDim(W, 1)}, 4, -1.f, 1.f));
    lc.attr("strides", graph::Attribute::Ints(strides))
        .attr("dilations", graph::Attribute::Ints(dilations))
        .attr("pads", graph::Attribute::Ints(pads))
        .attr("group", graph::Attribute::Int(1));
    if (fused) {
      lc.attr("activation", graph::Attribute::String(act))
          .attr("activation_alpha", graph::Attribute::Float(alpha))
          .attr("activation_beta", graph::Attribute::Float(beta));
    }
    return lc;
  }
};

/// Why the provider offers nothing for `c` at `precision` (empty: it offered tactics);
/// `yScale`: the output's int8 scale (INT8), `bitExact`: an INT8 bit-exact build.
std::string reasonFor(const StemCase& c, Precision precision = Precision::kFp16, float yScale = 0.f,
                      bool bitExact = false) {
  LayerCase lc = c.make();
  builder::LayerContext layer;
  const Status s = lc.layer(&layer);
  EXPECT_TRUE(s.ok()) << s.toString();
  layer.outputScales = {yScale};
  layer.int8BitExact = bitExact;
  StemConvProvider p;
  const auto cands = p.candidates(layer, precision);
  if (!cands.empty()) return "";
  EXPECT_FALSE(p.lastReason().empty());
  return p.lastReason();
}

/// Runs every candidate of `c` against the reference; returns their ids.
std::set<std::string> checkAll(const StemCase& c) {
  LayerCase lc = c.make();
  StemConvProvider p;
  return lc.runAll(p, 0.0, 2e-3);
}

/// Every tactic offered for a layer of `outputs` channels: the tiles m128, m64 and m128w8 (8
/// warps of one row) on each input format, in blocks of 64 channels (32 where there are no
/// more), and where there are more than 32 also in blocks of 32 ("n32").
std::set<std::string> allIds(int64_t outputs) {
  std::set<std::string> ids;
  for (const char* tile : {"m128", "m64", "m128w8"})
    for (const char* in : {"f32nchw", "f16nhwc", "f16nchw"}) {
      ids.insert(std::string("cuda-stem.") + tile + "." + in);
      if (outputs > 32) ids.insert(std::string("cuda-stem.") + tile + "n32." + in);
    }
  return ids;
}

// ---- What is not offered, and launches refused (no GPU needed) ----------------------------

TEST(CudaStemConv, Fp16AndInt8OutputPrecisionsOnly_n) {
  StemCase c;
  EXPECT_NE(reasonFor(c, Precision::kFp32).find("FP16 and INT8"), std::string::npos);
  // INT8: only with the output's scale (INT8 readers), and without a residual.
  EXPECT_NE(reasonFor(c, Precision::kInt8).find("no int8 scale"), std::string::npos);
  EXPECT_NE(reasonFor(c, Precision::kInt8, NAN).find("no int8 scale"), std::string::npos);
  // A scale whose reciprocal overflows (a subnormal): the epilogue multiplies by it.
  EXPECT_NE(reasonFor(c, Precision::kInt8, 1e-39f).find("too small"), std::string::npos);
  StemCase z = c;
  z.residual = true, z.act = "Relu";
  EXPECT_NE(reasonFor(z, Precision::kInt8, 0.05f).find("residual"), std::string::npos);
  // A bit-exact build: the stem stays an FP16 layer (FP16 arithmetic matches no INT8 emulation).
  EXPECT_NE(reasonFor(c, Precision::kInt8, 0.05f, true).find("bit-exact"), std::string::npos);
  // The INT8 tactics write int8 NHWC, and their ids say so (candidates need a device).
  std::string why;
  if (!test::gpuAvailable(&why)) return;
  EXPECT_EQ(reasonFor(c, Precision::kInt8, 0.05f), "");
  LayerCase lc = c.make();
  builder::LayerContext layer;
  ASSERT_TRUE(lc.layer(&layer).ok());
  layer.outputScales = {0.05f};
  StemConvProvider p;
  std::set<std::string> ids;
  for (const auto& t : p.candidates(layer, Precision::kInt8)) {
    ids.insert(t->id());
    EXPECT_EQ(t->outputFormat(0), (builder::TensorFormat{DataType::kInt8, builder::Layout::kNHWC}));
  }
  std::set<std::string> want;
  for (const auto& id : allIds(c.K)) want.insert(id + ".i8");
  EXPECT_EQ(ids, want);
}

TEST(CudaStemConv, ManyInputChannels_n) {
  StemCase c;
  c.C = 16, c.R = c.S = 3, c.pads = {1, 1, 1, 1};
  EXPECT_NE(reasonFor(c).find("C_in = 16 is over 8"), std::string::npos);
}

TEST(CudaStemConv, LargeWindow_n) {
  StemCase c;  // 7 x 7 x 8 = 392 products per output
  c.C = 8;
  EXPECT_NE(reasonFor(c).find("R * S * C_in = 392 is over 256"), std::string::npos) << reasonFor(c);
}

TEST(CudaStemConv, GroupedConvolution_n) {
  LayerCase g("Conv");  // weights of a grouped conv: [K, C / group, R, S]
  g.input(test::randomHalfExact(Shape{1, 4, 9, 9}, 1))
      .constant(test::randomHalfExact(Shape{8, 2, 3, 3}, 2))
      .attr("group", graph::Attribute::Int(2))
      .attr("pads", graph::Attribute::Ints({1, 1, 1, 1}));
  builder::LayerContext layer;
  ASSERT_TRUE(g.layer(&layer).ok());
  StemConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("group 1"), std::string::npos) << p.lastReason();
}

TEST(CudaStemConv, WeightsNotConstant_n) {
  LayerCase lc("Conv");
  lc.input(test::randomHalfExact(Shape{1, 3, 9, 9}, 1))
      .input(test::randomHalfExact(Shape{8, 3, 3, 3}, 2));
  builder::LayerContext layer;
  ASSERT_TRUE(lc.layer(&layer).ok());
  StemConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("not a constant"), std::string::npos) << p.lastReason();
}

TEST(CudaStemConv, PatchTooLarge_n) {
  StemCase c;  // stride 8 with 8 channels: a tile's patch of (15 * 8 + 5) columns is too large
  c.C = 8, c.R = c.S = 5, c.strides = {8, 8}, c.pads = {0, 0, 0, 0}, c.H = c.W = 64;
  EXPECT_NE(reasonFor(c).find("input patch"), std::string::npos) << reasonFor(c);
}

TEST(CudaStemConv, LaunchRefusesABadPlanOrMissingPointers_n) {
  cuda::StemConvPlan p;
  p.N = 1, p.C = 3, p.H = p.W = 8, p.K = 8, p.P = p.Q = 8, p.R = p.S = 3, p.padTop = 1;
  p.padLeft = 1, p.gemmK = 30, p.gemmKPad = 32, p.blockN = 32, p.warps = 4;
  alignas(16) static uint16_t buf[64];
  cuda::StemConvArgs a;
  a.x = a.w = a.z = buf;
  a.offsets = reinterpret_cast<const int32_t*>(buf);
  a.bias = reinterpret_cast<const float*>(buf);
  a.y = buf;
  cuda::StemConvPlan bad = p;
  bad.warps = 3;
  EXPECT_EQ(cuda::launchStemConv(bad, a, 1, nullptr).code(), ErrorCode::kInvalidArgument);
  bad = p;
  bad.gemmKPad = 24;  // not a multiple of 16
  EXPECT_EQ(cuda::launchStemConv(bad, a, 1, nullptr).code(), ErrorCode::kInvalidArgument);
  bad = p;
  bad.gemmK = 27;  // not stemGemmK() (R * S * C without the padding)
  EXPECT_EQ(cuda::launchStemConv(bad, a, 1, nullptr).code(), ErrorCode::kInvalidArgument);
  cuda::StemConvArgs missing = a;
  missing.w = nullptr;
  EXPECT_EQ(cuda::launchStemConv(p, missing, 1, nullptr).code(), ErrorCode::kInvalidArgument);
  missing = a;
  missing.offsets = nullptr;
  EXPECT_EQ(cuda::launchStemConv(p, missing, 1, nullptr).code(), ErrorCode::kInvalidArgument);
  missing = a;
  missing.y = reinterpret_cast<uint8_t*>(buf) + 2;  // not 16-byte aligned
  EXPECT_EQ(cuda::launchStemConv(p, missing, 1, nullptr).code(), ErrorCode::kInvalidArgument);
  bad = p;
  bad.int8Out = true;  // an int8 output needs its scale, and takes no residual
  EXPECT_EQ(cuda::launchStemConv(bad, a, 1, nullptr).code(), ErrorCode::kInvalidArgument);
  bad.yScale = 1e-39f;  // its reciprocal overflows
  EXPECT_EQ(cuda::launchStemConv(bad, a, 1, nullptr).code(), ErrorCode::kInvalidArgument);
  bad.yScale = 0.1f;
  bad.hasZ = true;
  EXPECT_EQ(cuda::launchStemConv(bad, a, 1, nullptr).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(cuda::prepareStemConv(bad).status().code(), ErrorCode::kInvalidArgument);
}

/// Checks stemTap() and stemPairOffsets() for one geometry: every tap (r, s, c) is at exactly
/// one K position, and each pair's second position is a padding or the value right after the
/// first in the patch (the kernel reads a pair as one word).
void checkKOrder(int32_t C, int32_t R, int32_t S, int32_t dilH, int32_t dilW, int32_t strideW) {
  SCOPED_TRACE("C " + std::to_string(C) + " R " + std::to_string(R) + " S " + std::to_string(S) +
               " dil " + std::to_string(dilH) + "x" + std::to_string(dilW));
  cuda::StemConvPlan p;
  p.C = C, p.R = R, p.S = S, p.dilH = dilH, p.dilW = dilW, p.strideW = strideW;
  p.gemmK = cuda::stemGemmK(p);
  p.gemmKPad = (p.gemmK + 15) / 16 * 16;
  EXPECT_EQ(p.gemmK % 2, 0);
  const int32_t patchW = 15 * strideW + (S - 1) * dilW + 1;
  auto offsetOf = [&](int32_t r, int32_t s, int32_t c) {
    return (r * dilH * patchW + s * dilW) * C + c;
  };
  std::set<int32_t> taps;
  const std::vector<int32_t> offsets = cuda::stemPairOffsets(p);
  ASSERT_EQ(offsets.size(), static_cast<size_t>(p.gemmKPad / 2));
  for (int32_t k = 0; k < p.gemmKPad; ++k) {
    int32_t r = -1, s = -1, c = -1;
    const bool real = cuda::stemTap(p, k, &r, &s, &c);
    if (k >= p.gemmK) {
      EXPECT_FALSE(real) << k;
      if (k % 2 == 0) {
        EXPECT_EQ(offsets[static_cast<size_t>(k / 2)], 0) << k;
      }
      continue;
    }
    if (!real) {
      EXPECT_NE(k % 2, 0) << "a pair never starts with padding: " << k;
      continue;
    }
    ASSERT_TRUE(r >= 0 && r < R && s >= 0 && s < S && c >= 0 && c < C) << k;
    EXPECT_TRUE(taps.insert((r * S + s) * C + c).second) << "tap twice: " << k;
    const int32_t first = k - k % 2;
    if (k % 2 == 0) {
      EXPECT_EQ(offsets[static_cast<size_t>(k / 2)], offsetOf(r, s, c)) << k;
    } else {
      EXPECT_EQ(offsetOf(r, s, c), offsets[static_cast<size_t>(first / 2)] + 1) << k;
    }
  }
  EXPECT_EQ(taps.size(), static_cast<size_t>(R * S * C));
  int32_t r = 0, s = 0, c = 0;
  EXPECT_FALSE(cuda::stemTap(p, -1, &r, &s, &c));
  EXPECT_FALSE(cuda::stemTap(p, p.gemmK, &r, &s, &c));
}

TEST(CudaStemConv, KOrderKeepsEveryPairSideBySide) {
  checkKOrder(3, 7, 7, 1, 1, 2);  // ResNet: rows of 21 values, padded to 22
  checkKOrder(3, 3, 3, 1, 1, 2);  // MobileNet: rows of 9
  checkKOrder(4, 3, 3, 1, 1, 1);  // even rows: no padding
  checkKOrder(1, 1, 7, 1, 1, 3);
  checkKOrder(3, 3, 3, 2, 2, 1);  // dilated: units of one tap's 3 channels, padded to 4
  checkKOrder(8, 3, 3, 2, 2, 2);
  checkKOrder(5, 5, 2, 3, 1, 2);
}

// The persistent stem kernel splits tile indices with fast_div.h's multiply-and-shift division:
// it must equal integer division for every divisor and numerator below 2^31 (the edges of each
// power of two, and random ones), on the host as on the device (the same arithmetic).
TEST(CudaStemConv, FastDivisionEqualsIntegerDivision) {
  std::mt19937 rng(5);
  std::vector<int32_t> divisors;
  for (int32_t d = 1; d <= 300; ++d) divisors.push_back(d);
  for (int b = 9; b < 31; ++b)
    for (int32_t e : {-1, 0, 1}) divisors.push_back((int32_t{1} << b) + e);
  divisors.push_back(0x7fffffff);
  for (int i = 0; i < 200; ++i) divisors.push_back(static_cast<int32_t>(rng() % 0x7fffffffu) + 1);
  int64_t wrong = 0;
  for (int32_t d : divisors) {
    const cuda::FastDiv f = cuda::fastDivisor(d);
    const int64_t d64 = d;  // (d + 1 overflows int32 at d = 2^31 - 1)
    std::vector<int64_t> ns = {0,           1,       d64 - 1,    d64,       d64 + 1,
                               2 * d64 - 1, 2 * d64, 0x7ffffffe, 0x7fffffff};
    for (int i = 0; i < 64; ++i) ns.push_back(rng() % 0x80000000u);
    for (int64_t n64 : ns) {
      if (n64 < 0 || n64 > 0x7fffffff) continue;  // the numerators divide() takes
      const auto n = static_cast<int32_t>(n64);
      if (cuda::divide(f, n) != n / d && ++wrong < 5)
        ADD_FAILURE() << n << " / " << d << " gave " << cuda::divide(f, n);
    }
  }
  EXPECT_EQ(wrong, 0);
  // A divisor below 1 (never a launch's) is taken as 1, not a division by zero.
  EXPECT_EQ(cuda::divide(cuda::fastDivisor(0), 12345), 12345);
  EXPECT_EQ(cuda::divide(cuda::fastDivisor(-7), 99), 99);
}

TEST(CudaStemConv, ResNetKOrder) {
  cuda::StemConvPlan p;
  p.C = 3, p.R = p.S = 7;
  EXPECT_EQ(cuda::stemUnitLength(p), 21);
  EXPECT_EQ(cuda::stemGemmK(p), 154);
  int32_t r = 0, s = 0, c = 0;
  ASSERT_TRUE(cuda::stemTap(p, 5, &r, &s, &c));
  EXPECT_EQ(r * 100 + s * 10 + c, 12);  // (0, 1, 2)
  EXPECT_FALSE(cuda::stemTap(p, 21, &r, &s, &c));
  ASSERT_TRUE(cuda::stemTap(p, 22, &r, &s, &c));
  EXPECT_EQ(r * 100 + s * 10 + c, 100);  // (1, 0, 0)
}

// ---- Every tactic against the CPU reference (GPU) -----------------------------------------

TEST(CudaStemConv, ResNetStem7x7Stride2OddSizes) {
  EI_SKIP_WITHOUT_GPU();
  StemCase c;  // 7x7 / 2, 3 -> 64, bias, ReLU; 19 x 23 input: partial tiles both ways
  c.N = 2, c.H = 19, c.W = 23, c.act = "Relu";
  EXPECT_EQ(checkAll(c), allIds(c.K));
}

/// Input rows that start on 16-byte boundaries (W = 64: 256, 128 and 384 bytes a row in the
/// three input formats) are copied whole pieces at a time, a tile ahead; the pieces left and
/// right of the image are zero-filled.
TEST(CudaStemConv, ResNetStem7x7Stride2RowsCopiedInWholePieces) {
  EI_SKIP_WITHOUT_GPU();
  StemCase c;
  c.N = 2, c.H = 37, c.W = 64, c.act = "Relu";
  EXPECT_EQ(checkAll(c), allIds(c.K));
}

TEST(CudaStemConv, RowsCopiedInWholePiecesDilatedStridedResidualSeveralBlocks) {
  EI_SKIP_WITHOUT_GPU();
  StemCase c;  // W = 24: 96, 48 and 192 bytes a row
  c.C = 4, c.K = 136, c.R = c.S = 3, c.strides = {2, 1}, c.dilations = {2, 2};
  c.pads = {2, 2, 2, 2}, c.H = 21, c.W = 24, c.residual = true, c.act = "SiLU";
  EXPECT_EQ(checkAll(c), allIds(c.K));
}

TEST(CudaStemConv, MobileNetStem3x3Stride2Relu6AsymmetricPads) {
  EI_SKIP_WITHOUT_GPU();
  StemCase c;  // 32 outputs: one block of 32 channels
  c.K = 32, c.R = c.S = 3, c.pads = {0, 0, 1, 1}, c.H = 30, c.W = 41, c.act = "Clip";
  c.alpha = 0.f, c.beta = 6.f;
  EXPECT_EQ(checkAll(c), allIds(c.K));
}

TEST(CudaStemConv, OutputChannelsNotAMultipleOf8) {
  EI_SKIP_WITHOUT_GPU();
  StemCase c;  // 20 outputs: scalar stores; 5x5 / 2 like BlazeFace's first layer
  c.K = 20, c.R = c.S = 5, c.pads = {1, 2, 2, 1}, c.H = 21, c.W = 18, c.act = "LeakyRelu";
  c.alpha = 0.1f;
  EXPECT_EQ(checkAll(c), allIds(c.K));
}

TEST(CudaStemConv, SeveralChannelBlocksNoBias) {
  EI_SKIP_WITHOUT_GPU();
  StemCase c;  // 136 outputs: three blocks of 64, the last partial; plain Conv
  c.C = 4, c.K = 136, c.R = c.S = 3, c.strides = {1, 1}, c.pads = {1, 1, 1, 1}, c.H = 19;
  c.W = 23, c.bias = false;
  EXPECT_EQ(checkAll(c), allIds(c.K));
}

TEST(CudaStemConv, ResidualBiasSiluDilatedMixedStrides) {
  EI_SKIP_WITHOUT_GPU();
  StemCase c;
  c.C = 8, c.K = 24, c.R = c.S = 3, c.strides = {1, 2}, c.dilations = {2, 2};
  c.pads = {2, 2, 2, 2}, c.H = 13, c.W = 35, c.residual = true, c.act = "SiLU";
  EXPECT_EQ(checkAll(c), allIds(c.K));
}

TEST(CudaStemConv, ResidualWithoutBiasOneChannelNonSquareKernel) {
  EI_SKIP_WITHOUT_GPU();
  StemCase c;  // a grayscale input, 1 x 7 kernel with stride 3 along W
  c.N = 3, c.C = 1, c.K = 16, c.R = 1, c.S = 7, c.strides = {1, 3}, c.pads = {0, 3, 0, 3};
  c.H = 9, c.W = 50, c.bias = false, c.residual = true, c.act = "";
  EXPECT_EQ(checkAll(c), allIds(c.K));
}

TEST(CudaStemConv, HardSwishFusedIn) {
  EI_SKIP_WITHOUT_GPU();
  StemCase c;  // MobileNetV3's stem: 3x3 / 2, 16 outputs, HardSwish
  c.K = 16, c.R = c.S = 3, c.pads = {1, 1, 1, 1}, c.H = c.W = 33, c.act = "HardSwish";
  EXPECT_EQ(checkAll(c), allIds(c.K));
}

TEST(CudaStemConv, ResidualOddChannelsInSeveralBlocksDilatedOddInput) {
  EI_SKIP_WITHOUT_GPU();
  StemCase c;  // 70 outputs: Z read in a partial second block, pairs (k, k + 1) past K
  c.C = 3, c.K = 70, c.R = c.S = 3, c.strides = {1, 1}, c.dilations = {1, 2};
  c.pads = {1, 2, 1, 2}, c.H = 12, c.W = 21, c.residual = true, c.act = "Relu";
  EXPECT_EQ(checkAll(c), allIds(c.K));
  StemCase odd = c;  // 33 outputs: the last output pair has no second channel
  odd.K = 33, odd.dilations = {2, 1}, odd.pads = {2, 1, 2, 1};
  EXPECT_EQ(checkAll(odd), allIds(odd.K));
}

/// Every INT8 candidate of `c` (int8 output with scale `ys`) against the reference's float
/// output quantized with ys: the kernel quantizes the FP32 sum of FP16 products, the reference
/// a double-precision sum, so an output may land one step away where the value is within
/// rounding of a half step, never further. Returns the ids run.
std::set<std::string> checkInt8(const StemCase& c, float ysOfMax) {
  LayerCase lc = c.make();
  builder::LayerContext layer;
  EXPECT_TRUE(lc.layer(&layer).ok());
  std::vector<Tensor> ref;
  EXPECT_TRUE(ref::runNode(lc.node(), lc.inputs(), ref).ok());
  float amax = 0.f;
  for (int64_t i = 0; i < ref[0].numel(); ++i)
    amax = std::max(amax, std::fabs(ref[0].data<float>()[i]));
  const float ys = amax * ysOfMax / 127.f;  // below 1: the largest outputs saturate
  layer.outputScales = {ys};
  StemConvProvider p;
  std::set<std::string> ids;
  for (auto& t : p.candidates(layer, Precision::kInt8)) {
    ids.insert(t->id());
    SCOPED_TRACE(t->id());
    EXPECT_TRUE(t->initialize(layer).ok());
    std::vector<const Tensor*> in = lc.inputs();
    in[1] = nullptr;  // consumed
    if (in.size() > 2) in[2] = nullptr;
    auto outs = test::runTactic(*t, layer, in);
    EXPECT_TRUE(outs.ok()) << outs.status().toString();
    if (!outs.ok()) continue;
    const Tensor& got = (*outs)[0];
    int64_t oneStep = 0, further = 0;
    for (int64_t i = 0; i < got.numel(); ++i) {
      const int q = static_cast<int>(std::lround(got.data<float>()[i] / ys));
      const int want = test::quantizeHost(ref[0].data<float>()[i], ys);
      oneStep += std::abs(q - want) == 1 ? 1 : 0;
      further += std::abs(q - want) > 1 ? 1 : 0;
    }
    EXPECT_EQ(further, 0) << "of " << got.numel();
    EXPECT_LE(oneStep, got.numel() / 200) << "of " << got.numel();
  }
  return ids;
}

std::set<std::string> int8Ids(int64_t outputs) {
  std::set<std::string> ids;
  for (const auto& id : allIds(outputs)) ids.insert(id + ".i8");
  return ids;
}

TEST(CudaStemConv, Int8OutputIsTheFloatResultQuantized) {
  EI_SKIP_WITHOUT_GPU();
  StemCase resnet;  // 7x7 / 2, 3 -> 64, ReLU, partial tiles
  resnet.N = 2, resnet.H = 19, resnet.W = 23, resnet.act = "Relu";
  EXPECT_EQ(checkInt8(resnet, 0.8f), int8Ids(resnet.K));
  StemCase narrow;  // 20 outputs: byte stores; no activation (negative outputs)
  narrow.K = 20, narrow.R = narrow.S = 5, narrow.pads = {1, 2, 2, 1}, narrow.H = 21;
  narrow.W = 18;
  EXPECT_EQ(checkInt8(narrow, 0.9f), int8Ids(narrow.K));
  StemCase blocks;  // 136 outputs in three channel blocks, the last partial; 48 (%16) too
  blocks.C = 4, blocks.K = 136, blocks.R = blocks.S = 3, blocks.strides = {1, 1};
  blocks.pads = {1, 1, 1, 1}, blocks.H = 19, blocks.W = 23, blocks.bias = false;
  EXPECT_EQ(checkInt8(blocks, 1.f), int8Ids(blocks.K));
  blocks.K = 48, blocks.act = "Clip", blocks.alpha = 0.f, blocks.beta = 1.5f;
  EXPECT_EQ(checkInt8(blocks, 0.7f), int8Ids(blocks.K));
  // Input rows on 16-byte boundaries (copied in whole pieces), ReLU and none.
  StemCase aligned = resnet;
  aligned.H = 30, aligned.W = 32;
  EXPECT_EQ(checkInt8(aligned, 0.8f), int8Ids(aligned.K));
  aligned.act = "", aligned.K = 40;
  EXPECT_EQ(checkInt8(aligned, 0.9f), int8Ids(aligned.K));
}

/// Two layers of one kernel version, the larger initialised first: the smaller one's
/// initialize() must not lower the shared-memory limit the larger one launches with.
TEST(CudaStemConv, ASmallerLayerInitialisedLaterLeavesTheLargerOneRunning) {
  EI_SKIP_WITHOUT_GPU();
  StemCase big;  // 7x7: about 45 KiB a block
  big.N = 1, big.H = big.W = 40;
  StemCase small = big;  // 3x3: about 30 KiB a block, same kernel (m128, 64 channels, NHWC)
  small.R = small.S = 3, small.pads = {1, 1, 1, 1};
  LayerCase lb = big.make(), ls = small.make();
  builder::LayerContext bigLayer, smallLayer;
  ASSERT_TRUE(lb.layer(&bigLayer).ok());
  ASSERT_TRUE(ls.layer(&smallLayer).ok());
  const std::string id = "cuda-stem.m128.f16nhwc";
  StemConvProvider provider;
  auto bigTactic = provider.find(bigLayer, Precision::kFp16, id);
  auto smallTactic = provider.find(smallLayer, Precision::kFp16, id);
  ASSERT_TRUE(bigTactic && smallTactic) << provider.lastReason();
  ASSERT_TRUE(bigTactic->initialize(bigLayer).ok());
  ASSERT_TRUE(smallTactic->initialize(smallLayer).ok());
  std::vector<Tensor> want;
  ASSERT_TRUE(ref::runNode(lb.node(), lb.inputs(), want).ok());
  std::vector<const Tensor*> in = lb.inputs();
  in[1] = in[2] = nullptr;  // consumed by the tactic
  auto got = test::runTactic(*bigTactic, bigLayer, in);
  ASSERT_TRUE(got.ok()) << got.status().toString();
  EXPECT_LE(test::relL2((*got)[0], want[0]), 2e-3);
}

/// A persistent grid of one block walks over every tile: the same bits as the full grid, and
/// as an input whose rows are not 16-byte aligned.
TEST(CudaStemConv, OneBlockGivesTheSameBitsAsAFullGrid) {
  EI_SKIP_WITHOUT_GPU();
  cuda::StemConvPlan p;  // ResNet's stem on a 2 x 3 x 64 x 48 NHWC half input
  p.N = 2, p.C = 3, p.H = 64, p.W = 48, p.K = 64, p.P = 32, p.Q = 24, p.R = p.S = 7;
  p.strideH = p.strideW = 2, p.padTop = p.padLeft = 3, p.gemmK = 154, p.gemmKPad = 160;
  p.blockN = 64, p.warps = 4, p.act = cuda::DeviceActivation::kRelu;
  const std::vector<int32_t> offsets = cuda::stemPairOffsets(p);
  auto blocks = cuda::prepareStemConv(p);
  ASSERT_TRUE(blocks.ok()) << blocks.status().toString();
  ASSERT_GT(*blocks, 1);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<__half> x(static_cast<size_t>(p.N) * p.H * p.W * p.C), w(64 * 160);
  std::vector<float> bias(64);
  for (auto& v : x) v = __float2half(u(rng));
  for (size_t i = 0; i < w.size(); ++i) {
    int32_t r = 0, s = 0, c = 0;
    const bool tap = cuda::stemTap(p, static_cast<int32_t>(i % 160), &r, &s, &c);
    w[i] = __float2half(tap ? 0.2f * u(rng) : 0.f);
  }
  for (auto& v : bias) v = u(rng);
  const size_t yElems = static_cast<size_t>(p.N) * p.P * p.Q * p.K;
  void *dx = nullptr, *dw = nullptr, *doff = nullptr, *db = nullptr, *dy1 = nullptr, *dy2 = nullptr;
  ASSERT_EQ(cudaMalloc(&doff, offsets.size() * 4), cudaSuccess);
  cudaMemcpy(doff, offsets.data(), offsets.size() * 4, cudaMemcpyHostToDevice);
  ASSERT_EQ(cudaMalloc(&dx, x.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dw, w.size() * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&db, bias.size() * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy1, yElems * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy2, yElems * 2), cudaSuccess);
  cudaMemcpy(dx, x.data(), x.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(dw, w.data(), w.size() * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(db, bias.data(), bias.size() * 4, cudaMemcpyHostToDevice);
  cudaMemset(dy1, 0xff, yElems * 2);
  cudaMemset(dy2, 0xff, yElems * 2);
  cuda::StemConvArgs a;
  a.x = dx, a.w = dw, a.offsets = static_cast<const int32_t*>(doff);
  a.bias = static_cast<const float*>(db), a.y = dy1;
  EXPECT_TRUE(cuda::launchStemConv(p, a, *blocks, nullptr).ok());
  a.y = dy2;
  EXPECT_TRUE(cuda::launchStemConv(p, a, 1, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  std::vector<uint16_t> y1(yElems), y2(yElems);
  cudaMemcpy(y1.data(), dy1, yElems * 2, cudaMemcpyDeviceToHost);
  cudaMemcpy(y2.data(), dy2, yElems * 2, cudaMemcpyDeviceToHost);
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), yElems * 2), 0);
  size_t unwritten = 0;
  for (uint16_t v : y2) unwritten += v == 0xffff ? 1 : 0;
  EXPECT_EQ(unwritten, 0u);
  // The same input 2 bytes past a 16-byte boundary: its rows are copied value by value instead
  // of in 16-byte pieces, the same bits.
  void* dxOdd = nullptr;
  ASSERT_EQ(cudaMalloc(&dxOdd, x.size() * 2 + 16), cudaSuccess);
  cudaMemcpy(static_cast<char*>(dxOdd) + 2, x.data(), x.size() * 2, cudaMemcpyHostToDevice);
  cudaMemset(dy2, 0xff, yElems * 2);
  a.x = static_cast<char*>(dxOdd) + 2;
  EXPECT_TRUE(cuda::launchStemConv(p, a, *blocks, nullptr).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemcpy(y2.data(), dy2, yElems * 2, cudaMemcpyDeviceToHost);
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), yElems * 2), 0);
  for (void* ptr : {dx, dxOdd, dw, doff, db, dy1, dy2}) cudaFree(ptr);
}

/// x [N, 3, 40, 36] -> Conv 7x7 / 2 + bias -> Relu -> y, the conv forced onto cuda-stem.
test::TestModel stemModel() {
  test::TestModel m(13);
  m.input("x", {-1, 3, 40, 36});
  m.randomInitializer("w", {64, 3, 7, 7}, 41, -0.2f, 0.2f);
  m.randomInitializer("b", {64}, 42);
  auto& c = m.node("Conv", {"x", "w", "b"}, {"c"}, "stem");
  test::TestModel::attrInts(c, "pads", {3, 3, 3, 3});
  test::TestModel::attrInts(c, "strides", {2, 2});
  m.node("Relu", {"c"}, {"y"}, "relu");
  m.output("y");
  return m;
}

TEST(CudaStemConv, EngineForcedOntoTheStemMatchesTheCpuAfterALoad) {
  EI_SKIP_WITHOUT_GPU();
  test::TempDir dir;
  const std::string bytes = stemModel().bytes();
  BuilderConfig cpuCfg;
  cpuCfg.backend = Backend::kCpu;
  cpuCfg.inputShapes = {{"x", Shape{2, 3, 40, 36}}};
  auto cpu = Builder::buildFromBuffer(bytes.data(), bytes.size(), cpuCfg);
  ASSERT_TRUE(cpu.ok()) << cpu.status().toString();
  auto cpuCtx = (*cpu)->createExecutionContext();
  ASSERT_TRUE(cpuCtx.ok());
  const Tensor x = test::randomHalfExact(Shape{2, 3, 40, 36}, 9, -1.f, 1.f);
  auto want = (*cpuCtx)->run({{"x", x}});
  ASSERT_TRUE(want.ok()) << want.status().toString();
  for (const char* id : {"cuda-stem.m128.f32nchw", "cuda-stem.m64.f16nhwc"}) {
    SCOPED_TRACE(id);
    BuilderConfig c = test::quickGpuConfig(dir.file("timing.cache"), Precision::kFp16);
    c.inputShapes = cpuCfg.inputShapes;
    c.forcedTactics["stem"] = id;
    auto built = Builder::buildFromBuffer(bytes.data(), bytes.size(), c);
    ASSERT_TRUE(built.ok()) << built.status().toString();
    ASSERT_TRUE((*built)->save(dir.file("s.engine")).ok());
    auto loaded = Engine::load(dir.file("s.engine"));
    ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
    for (Engine* e : {built->get(), loaded->get()}) {
      auto ctx = e->createExecutionContext();
      ASSERT_TRUE(ctx.ok()) << ctx.status().toString();
      auto got = (*ctx)->run({{"x", x}});
      ASSERT_TRUE(got.ok()) << got.status().toString();
      EXPECT_LE(test::relL2(got->at("y"), want->at("y")), 2e-3);
    }
  }
}

}  // namespace
}  // namespace edgeinfer

#else

TEST(CudaStemConv, NeedsCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif  // EDGEINFER_HAVE_CUDA
