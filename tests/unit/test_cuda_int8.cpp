// INT8 on the GPU (issue 6): the cuda-i8 convolution tactics (kernels/cuda/int8_conv.h)
// against a host computation of the same integer arithmetic and epilogue, the quantize /
// dequantize reformats, and INT8 engines end to end (calibration cache -> GPU engine, compared
// with FP32; serialised and loaded; the errors). Which candidates are offered, and the
// negative cases (_n), need no GPU; the rest skip with a message without one.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "builder/stage_record.h"
#include "builder/timing_cache.h"
#include "core/npy.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/calibration.h"
#include "edgeinfer/engine.h"
#include "int8_test_util.h"
#include "kernels/cuda/conv2d_layer.h"
#include "kernels/cuda/int8_conv.h"
#include "kernels/cuda/reformat.h"
#include "kernels/ref/activation.h"
#include "log_capture.h"
#include "quant/qdq.h"
#include "runtime/cuda/cuda_engine.h"
#include "runtime/cuda/cuda_plan.h"
#include "runtime/cuda_backend.h"
#include "tactic_test_util.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using builder::Layout;
using cuda::Int8ConvProvider;
using test::cosine;
using test::gpuAvailable;
using test::I8Case;
using test::Int8Fixture;
using test::randomTensor;
using test::runOnce;

/// The plan int8_conv.cpp's parseLayer makes of `c` (built): its geometry and K step.
cuda::Int8ConvPlan planOf(const I8Case& c) {
  cuda::Conv2dLayer l;
  std::string why;
  EXPECT_TRUE(cuda::parseConv2dLayer(c.layer, 31, &l, &why)) << why;
  cuda::Int8ConvPlan p;
  l.copyTo(&p);
  p.gemmK = p.R * p.S * p.C;
  p.gemmKPad = (p.gemmK + 63) / 64 * 64;
  return p;
}

/// A plan of `kernel` for N square images of `size` x `size` pixels, C -> K channels, an RS x RS
/// window of stride 1 with "same" padding (RS / 2): the geometry the provider's checks read.
cuda::Int8ConvPlan squarePlan(cuda::Int8ConvKernel kernel, int N, int C, int K, int size, int RS) {
  cuda::Int8ConvPlan p;
  p.kernel = kernel;
  p.N = N;
  p.C = C;
  p.K = K;
  p.H = p.W = p.P = p.Q = size;
  p.R = p.S = RS;
  p.padTop = p.padLeft = RS / 2;
  p.gemmK = p.gemmKPad = RS * RS * C;
  return p;
}

/// Launch arguments at a 16-byte aligned address nothing is allocated at: for plans refused
/// before anything reaches the device.
cuda::Int8ConvArgs refusedArgs() {
  cuda::Int8ConvArgs a;
  a.x = a.w = a.z = a.y = reinterpret_cast<void*>(uintptr_t{1} << 20);
  a.alpha = a.bias = reinterpret_cast<const float*>(uintptr_t{1} << 20);
  return a;
}

/// Which dense kernels the provider offers for `c` (built): the 3 mma.sync tile shapes, and on
/// a compute 9.0 device of a build with sm_90a code (C % 16 == 0) the wgmma ones: 128x128,
/// 128x64, 64x128, and 128x256 for more than 128 output channels, fed by TMA where the layer
/// fits it with 64-byte K steps, by cp.async elsewhere; with 128-byte K steps the TMA 128x128k128
/// where the layer fits it so, else the cp.async 128x128k128 and 128x64k128 for R*S*C > 64;
/// for K % 32 == 0 the persistent register-epilogue forms of the TMA 128x128, 128x64 and
/// 128x128k128 where their TMA kernel is offered, and where the layer has many tiles
/// (int8ConvManyTiles) the one-block ones: tmap128x64, tmard128x128k128, tmap128x128k128,
/// (K > 128) tmard128x256k128 and (many tiles of 192 pixels) tmard192x128k128;
/// and each TMA kernel again for every split-K factor int8ConvSplits gives it (and the driver
/// says runs), or where no TMA kernel runs the layer, each mma.sync kernel; for 1x1 layers the
/// pointwise kernels int8ConvPointwiseFits admits, 128x64, 128x128 (K > 64) and 64x256
/// (K > 128) (every case here has C <= 128, whose shared memory any sm_80 device allows in
/// every output format).
struct Offered {
  size_t kernels = 3;
  size_t splitK = 0;  ///< of those, kernels with K split
  bool tma = false, cpAsyncWgmma = false;
};
Offered offered(const I8Case& c) {
  Offered o;
  const cuda::Int8ConvPlan p = planOf(c);
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) {
    cudaGetLastError();
    sms = 0;
  }
  std::vector<cuda::Int8ConvKernel> splitKernels = {cuda::Int8ConvKernel::kMma128x128,
                                                    cuda::Int8ConvKernel::kMma128x64,
                                                    cuda::Int8ConvKernel::kMma64x128};
  if (cuda::int8ConvWgmmaAvailable() && c.C % 16 == 0) {
    const bool tma = cuda::int8ConvTmaAvailable();
    const bool tma64 = tma && cuda::int8ConvTmaFits(p, 64);
    const bool tma128 = tma && cuda::int8ConvTmaFits(p, 128);
    const bool k128 = !tma128 && c.R * c.S * c.C > 64;
    o.kernels = 3 + 3 + (c.K > 128 ? 1 : 0) + (tma128 ? 1 : k128 ? 2 : 0);
    if (c.K % 32 == 0) {  // the tmar forms, and the tmard and tmap ones on layers of many tiles
      const auto many = [&](int bn, int bm = 128) {
        return cuda::int8ConvManyTiles(p, bn, sms, bm) ? 1 : 0;
      };
      o.kernels += (tma64 ? 2 + many(64) : 0) +
                   (tma128 ? 1 + 2 * many(128) + (c.K > 128 ? many(256) : 0) + many(128, 192) : 0);
    }
    o.tma = tma64 || tma128;
    o.cpAsyncWgmma = !tma64 || k128;
    if (tma64 || tma128) splitKernels.clear();  // mma.sync splits only where no TMA kernel runs
    if (tma64) {
      splitKernels.insert(splitKernels.end(),
                          {cuda::Int8ConvKernel::kTma128x128, cuda::Int8ConvKernel::kTma128x64,
                           cuda::Int8ConvKernel::kTma64x128});
      if (c.K > 128) splitKernels.push_back(cuda::Int8ConvKernel::kTma128x256);
    }
    if (tma128) splitKernels.push_back(cuda::Int8ConvKernel::kTma128x128k128);
  }
  for (cuda::Int8ConvKernel k : splitKernels) {
    cuda::Int8ConvPlan q = p;
    q.kernel = k;
    for (int split : cuda::int8ConvSplits(q, sms))
      o.splitK += !cuda::isInt8ConvTmaKernel(k) || cuda::int8ConvTmaSplitRuns(k, split) ? 1 : 0;
  }
  if (c.C % 16 == 0 && cuda::int8ConvPointwiseFits(p))
    o.kernels += 1 + (c.K > 64 ? 2 : 0) + (c.K > 128 ? 1 : 0);  // 128x64, 128x128, 64x128, 64x256
  int optin = 0;
  if (cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev) != cudaSuccess)
    cudaGetLastError();
  if (c.C % 16 == 0 && cuda::int8ConvHaloFits(p) && cuda::int8ConvHaloSharedBytes(p) <= optin)
    o.kernels += 1;
  if (cuda::int8ConvWgmmaAvailable() && cuda::int8ConvHaloFits(p) && c.C % 64 == 0 &&
      cuda::int8ConvHaloWgSharedBytes(p) <= optin)
    o.kernels += 1;  // its wgmma form
  o.kernels += o.splitK;
  return o;
}

/// How one candidate's output compares with the host reference.
struct Agreement {
  int64_t differ = 0;       ///< elements not equal to the bit-exact reference
  int64_t unexplained = 0;  ///< of those, the ones rounding noise does not explain
  double worst = 0;         ///< largest difference: int8 in steps, fp16 relative (1e-3 floor)
};

/// `got` against the reference `want` (reference(), with its `pre` and `terms`): an int8 output
/// that differs must be one step away at a value v / s_y within rounding noise of a half step
/// (2^-19 of the terms summed, in steps: four times what two roundings of the same sum of
/// three terms can differ by); an fp16 one must be within that noise plus one fp16 rounding.
Agreement compare(const Tensor& got, const Tensor& want, const std::vector<float>& pre,
                  const std::vector<float>& terms, bool yInt8, float sy) {
  Agreement r;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = got.data<float>()[i], b = want.data<float>()[i];
    r.worst = std::max(r.worst, std::fabs(a - b) / (yInt8 ? sy : std::max(1e-3, std::fabs(b))));
    if (a == b) continue;
    ++r.differ;
    const double noise = std::ldexp(double{terms[static_cast<size_t>(i)]}, -19);
    if (yInt8) {
      const double t = double{pre[static_cast<size_t>(i)]} / sy;
      const double fromHalf = std::fabs(std::fabs(t - std::floor(t)) - 0.5);
      if (std::fabs(std::fabs(a - b) / sy - 1.0) > 1e-4 || fromHalf > noise / sy) ++r.unexplained;
    } else if (std::fabs(a - b) > noise + std::ldexp(std::fabs(b), -10) + 6e-8) {
      ++r.unexplained;
    }
  }
  return r;
}

/// Runs every candidate, in both roundings (LayerContext::int8BitExact), and compares it with
/// the reference. Bit-exact tactics (ids without ".f"): identical where `exact`, else (exp/tanh
/// activations) int8 within one step and fp16 within 1e-3 relative. Fast tactics: differences
/// only where compare() finds rounding noise (where `exact`), the same bounds otherwise.
/// `formats`: output (and residual) format combinations per dense kernel, or the candidates of
/// a depthwise layer. `only`: just the candidates whose id starts with it (the offered list's
/// size and families unchecked).
void checkAllCandidates(I8Case& c, bool exact, size_t formats, const char* only = nullptr) {
  c.build();
  struct Reference {
    bool done = false;
    Tensor want;
    std::vector<float> pre, terms;
  };
  std::map<std::pair<bool, bool>, Reference> refs;  // (y int8, z int8)
  const Offered want = offered(c);
  const size_t expectCandidates = c.group > 1 ? formats : formats * want.kernels;
  // The wgmma kernels must be among them exactly where this build has them and the device is
  // compute 9.0 (asked of the device here, not of the provider's own check).
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  const bool wantWgmma =
      c.group == 1 && c.C % 16 == 0 && cuda::int8ConvBuildHasWgmma() && major == 9 && minor == 0;
  for (const bool bitExact : {true, false}) {
    SCOPED_TRACE(bitExact ? "bit-exact rounding" : "fast rounding");
    c.layer.int8BitExact = bitExact;
    Int8ConvProvider prov;
    auto cands = prov.candidates(c.layer, Precision::kInt8);
    if (only) {  // only the candidates whose id starts with `only`
      cands.erase(std::remove_if(cands.begin(), cands.end(),
                                 [&](const auto& t) { return t->id().rfind(only, 0) != 0; }),
                  cands.end());
      ASSERT_FALSE(cands.empty()) << "no " << only << " candidate: " << prov.lastReason();
    } else {
      ASSERT_EQ(cands.size(), expectCandidates) << prov.lastReason();
    }
    size_t wgmma = 0, tma = 0, split = 0;
    for (const auto& t : cands) {
      wgmma += t->id().rfind("cuda-i8.wg", 0) == 0 ? 1 : 0;
      tma += t->id().rfind("cuda-i8.tma", 0) == 0 ? 1 : 0;
      split += std::regex_search(
          t->id(), std::regex("^cuda-i8\\.(tma[0-9x]+(k128)?|mma[0-9x]+v(16|4))s[0-9]+\\."));
      const std::string& id = t->id();
      EXPECT_EQ(id.size() > 2 && id.compare(id.size() - 2, 2, ".f") == 0, !bitExact) << id;
    }
    if (!only) {  // which families are offered (of the whole list)
      EXPECT_EQ(wgmma + tma > 0, wantWgmma)
          << "wgmma candidates on compute " << major << "." << minor
          << (cuda::int8ConvBuildHasWgmma() ? "" : " (no sm_90a code)");
      EXPECT_EQ(tma > 0, wantWgmma && want.tma) << "TMA candidates";
      EXPECT_EQ(split, c.group > 1 ? 0 : want.splitK * formats) << "split-K candidates";
      // cp.async-fed wgmma only where TMA cannot feed that tile.
      EXPECT_EQ(wgmma > 0, wantWgmma && want.cpAsyncWgmma) << "cp.async wgmma candidates";
    }
    for (auto& t : cands) {
      SCOPED_TRACE(t->id());
      ASSERT_TRUE(t->initialize(c.layer).ok());
      auto out = test::runTactic(*t, c.layer, c.inputs());
      ASSERT_TRUE(out.ok()) << out.status().toString();
      const bool yInt8 = t->outputFormat(0).dtype == DataType::kInt8;
      const bool zInt8 = c.residual && t->inputFormat(3).dtype == DataType::kInt8;
      Reference& ref = refs[{yInt8, zInt8}];  // computed once per output and residual format
      if (!ref.done) {
        ref.want = c.reference(yInt8, zInt8, &ref.pre, &ref.terms);
        ref.done = true;
      }
      const Tensor& want = ref.want;
      const Agreement r = compare((*out)[0], want, ref.pre, ref.terms, yInt8, c.sy);
      if (exact && bitExact) {
        EXPECT_EQ(r.differ, 0) << "of " << want.numel();
      } else if (exact) {
        EXPECT_EQ(r.unexplained, 0) << "of " << r.differ << " differing (" << want.numel() << ")";
      }
      // (one step between dequantized int8 values is 1 + a few 1e-6 steps after float rounding)
      EXPECT_LE(r.worst, yInt8 ? 1.0 + 1e-4 : 1e-3);
      std::printf(
          "[          ] %s: %lld of %lld differ (%lld beyond rounding noise), worst %.3g %s\n",
          t->id().c_str(), static_cast<long long>(r.differ), static_cast<long long>(want.numel()),
          static_cast<long long>(r.unexplained), r.worst, yInt8 ? "steps" : "rel");
    }
  }
}

// ---- Anywhere: which layers are offered ----------------------------------------------------

TEST(CudaInt8Conv, NotOfferedWithoutInt8PrecisionOrScale_n) {
  I8Case c;
  c.build();
  Int8ConvProvider prov;
  EXPECT_TRUE(prov.candidates(c.layer, Precision::kFp16).empty());
  EXPECT_NE(prov.lastReason().find("INT8 tactics only"), std::string::npos);
  c.layer.inputScales[0] = 0.f;
  EXPECT_TRUE(prov.candidates(c.layer, Precision::kInt8).empty());
  EXPECT_NE(prov.lastReason().find("no int8 scale"), std::string::npos) << prov.lastReason();
  c.layer.inputScales[0] = NAN;
  EXPECT_TRUE(prov.candidates(c.layer, Precision::kInt8).empty());
}

TEST(CudaInt8Conv, UnsupportedLayersAreNotOffered_n) {
  Int8ConvProvider prov;
  {
    I8Case c;  // grouped, not depthwise
    c.C = 16;
    c.K = 16;
    c.group = 4;
    c.build();
    EXPECT_TRUE(prov.candidates(c.layer, Precision::kInt8).empty());
    EXPECT_NE(prov.lastReason().find("depthwise"), std::string::npos) << prov.lastReason();
  }
  {
    I8Case c;  // dense with C % 4 != 0 (an RGB first layer)
    c.C = 3;
    c.build();
    EXPECT_TRUE(prov.candidates(c.layer, Precision::kInt8).empty());
    EXPECT_NE(prov.lastReason().find("% 4"), std::string::npos) << prov.lastReason();
  }
  {
    I8Case c;  // weights computed at run time
    c.build();
    c.g.value("W").constant = Tensor();
    EXPECT_TRUE(prov.candidates(c.layer, Precision::kInt8).empty());
    EXPECT_NE(prov.lastReason().find("weights"), std::string::npos) << prov.lastReason();
  }
  {
    I8Case c;  // not a convolution
    c.build();
    c.node.opType = "MaxPool";
    EXPECT_TRUE(prov.candidates(c.layer, Precision::kInt8).empty());
  }
  {
    I8Case c;  // float16 values are not what calibration measured
    c.build();
    c.layer.inputTypes[0] = DataType::kFloat16;
    EXPECT_TRUE(prov.candidates(c.layer, Precision::kInt8).empty());
  }
}

// ---- On the GPU: the kernels ----------------------------------------------------------------

TEST(CudaInt8Conv, Dense3x3MatchesTheIntegerReference) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c;  // C % 16 == 0: v16 loads; 2 images, 81 pixels each: partial tiles
  c.N = 2;
  c.K = 40;
  c.op = "FusedConv";
  c.act = "Relu";
  checkAllCandidates(c, /*exact=*/true, 2);  // every kernel x (i8, f16) outputs
}

TEST(CudaInt8Conv, Dense1x1Vec4WithoutBias) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c;
  c.C = 20;  // v4 loads
  c.K = 24;
  c.R = c.S = 1;
  c.pads = {0, 0, 0, 0};
  c.H = 13;
  c.W = 11;
  c.bias = false;
  checkAllCandidates(c, true, 2);
}

TEST(CudaInt8Conv, Dense5x5StridedDilatedWithResidualAndLeakyRelu) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c;
  c.op = "FusedConv";
  c.act = "LeakyRelu";
  c.N = 3;
  c.C = 36;
  c.K = 70;
  c.H = 17;
  c.W = 15;
  c.R = c.S = 5;
  c.strides = {2, 1};
  c.dilations = {2, 2};
  c.pads = {3, 1, 2, 4};
  c.residual = true;
  checkAllCandidates(c, true, 4);  // every kernel x (y i8, f16) x (z i8, f16)
}

TEST(CudaInt8Conv, DenseDeepKAcrossManyTiles) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c;  // K = 3*3*128 = 1152: 18 steps of 64; 130 channels: 2-3 column tiles
  c.N = 3;
  c.C = 128;
  c.K = 130;
  c.H = c.W = 14;
  c.sx = 0.01f;
  checkAllCandidates(c, true, 2);
}

// The wgmma kernels' cases (C % 16 == 0): K steps that cross window positions (C = 16, 48),
// a last step past R*S*C, strides, dilation and padding, a residual, 300 output channels
// (128x256 tiles and a partial one), and rows past the output in the last tile.
TEST(CudaInt8Conv, DenseStridedWithResidualAcrossWindowPositions) {
  EI_SKIP_WITHOUT_GPU();
  for (const int64_t C : {16, 48}) {
    SCOPED_TRACE("C = " + std::to_string(C));
    I8Case c;
    c.op = "FusedConv";
    c.act = "Relu";
    c.N = 2;
    c.C = C;
    c.K = C == 16 ? 300 : 72;
    c.H = 23;
    c.W = 21;
    c.strides = {2, 2};
    c.dilations = {2, 1};
    c.pads = {1, 0, 1, 1};
    c.residual = true;
    checkAllCandidates(c, true, 4);
  }
}

// The TMA-fed kernels (C % 64 == 0): the im2col walk across rows and images (600 output
// pixels: partial tiles of 128 and 64), strides, dilation and asymmetric padding along H and
// along W, int8 and fp16 residuals, partial column tiles, a 1x1 layer of 64 channels (only TMA
// kernels offered) and a strided one, the largest accumulators, 128-byte K steps (C = 128).
TEST(CudaInt8Conv, TmaKernelsAcrossStridesPaddingAndTiles) {
  EI_SKIP_WITHOUT_GPU();
  struct Case {
    const char* what;
    int64_t N, C, K, H, W, RS;
    std::vector<int64_t> strides, dilations, pads;
    bool residual, saturate;
  };
  const Case cases[] = {
      {"3x3, C 64, strides 2x1, dilation 2x1, pads 1 2 0 1, residual, K 300 (a partial 128x256 "
       "tile)",
       3,
       64,
       300,
       23,
       19,
       3,
       {2, 1},
       {2, 1},
       {1, 2, 0, 1},
       true,
       false},
      // K % 8 == 0 with a residual: the 128x64 kernel's residual prefetch.
      {"3x3, C 64, strides 1x2, dilation 1x2, pads 0 1 2 1, residual, K 96",
       2,
       64,
       96,
       13,
       29,
       3,
       {1, 2},
       {1, 2},
       {0, 1, 2, 1},
       true,
       false},
      {"1x1, C 64, K 64: TMA kernels only",
       2,
       64,
       64,
       10,
       10,
       1,
       {1, 1},
       {1, 1},
       {0, 0, 0, 0},
       false,
       false},
      // Accumulators of 127 * 127 * 1152 (> 2^22: the exact int32 -> float conversion's slow
      // path) and outputs far beyond the int8 range (the quantize's division path).
      {"3x3, C 128, saturated inputs and weights",
       1,
       128,
       64,
       6,
       6,
       3,
       {1, 1},
       {1, 1},
       {1, 1, 1, 1},
       false,
       true},
      {"1x1, C 128, stride 2, K 96 (a ResNet downsample)",
       2,
       128,
       96,
       15,
       15,
       1,
       {2, 2},
       {1, 1},
       {0, 0, 0, 0},
       false,
       false},
      // Batch 1: 4 tiles or fewer, K split up to 16 ways (36 steps of 64 bytes).
      {"3x3, C 256, one 7x7 image, K 200, residual: split K",
       1,
       256,
       200,
       7,
       7,
       3,
       {1, 1},
       {1, 1},
       {1, 1, 1, 1},
       true,
       false},
      {"3x3, C 128, 7x7 images, K 130",
       5,
       128,
       130,
       7,
       7,
       3,
       {1, 1},
       {1, 1},
       {1, 1, 1, 1},
       false,
       false},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    I8Case c;
    c.op = k.residual ? "FusedConv" : "Conv";
    c.act = k.residual ? "Relu" : "";
    c.N = k.N;
    c.C = k.C;
    c.K = k.K;
    c.H = k.H;
    c.W = k.W;
    c.R = c.S = k.RS;
    c.strides = k.strides;
    c.dilations = k.dilations;
    c.pads = k.pads;
    c.residual = k.residual;
    c.saturate = k.saturate;
    checkAllCandidates(c, true, k.residual ? 4 : 2);  // (y i8, f16) [x (z i8, f16)]
  }
}

// The persistent register-epilogue TMA kernels (tmar*, tmard*): tiles of 128 pixels, the last
// one partial, several a block, so the stage ring wraps across tiles at every phase:
//   - a 3x3 window of stride 1 and padding 1 on 2 images of 157x163 (400 tiles of 128 pixels),
//     C = 64, 96 output channels (a partial tile of 128, two of 64 with the second half empty):
//     tmar128x128 and tmar128x64, 400 and 800 tiles for at most two blocks a multiprocessor;
//   - a 1x1 layer on 2 images of 97x103 (157 tiles), C = 128, 160 output channels (tiles of 256
//     with 5 of their 8 groups of 32 in): the K steps of 128 bytes, tmar128x128k128 and the
//     one-block tmard128x128k128 and tmard128x256k128 (314 tiles for 132 blocks on an H100),
//     and tmard192x128k128 (105 x 2 tiles of 192 pixels, the last one partial);
//   - a 3x3 window on 2 images of 57x61, C = 128, 160 output channels: the 192-pixel im2col
//     boxes of tmard192x128k128 across image rows and images (37 x 2 tiles) and 9 window
//     positions of 128-byte K steps.
// With a residual and Relu: the lean epilogue instance (fast rounding to int8, an int8
// residual) and the general one (the bit-exact rounding, fp16 outputs or residuals), every
// output against the host reference.
TEST(CudaInt8Conv, TmaRegisterEpilogueKernelsWalkManyTiles) {
  EI_SKIP_WITHOUT_GPU();
  if (!cuda::int8ConvTmaAvailable()) GTEST_SKIP() << "no TMA kernels on this device or build";
  struct Case {
    int64_t C, K, H, W, RS;
  };
  for (const Case& k :
       {Case{64, 96, 157, 163, 3}, Case{128, 160, 97, 103, 1}, Case{128, 160, 57, 61, 3}}) {
    SCOPED_TRACE("C " + std::to_string(k.C) + ", K " + std::to_string(k.K) + ", " +
                 std::to_string(k.RS) + "x" + std::to_string(k.RS));
    I8Case c;
    c.op = "FusedConv";
    c.act = "Relu";
    c.N = 2;
    c.C = k.C;
    c.K = k.K;
    c.H = k.H;
    c.W = k.W;
    c.R = c.S = k.RS;
    const int64_t pad = k.RS / 2;
    c.pads = {pad, pad, pad, pad};
    c.residual = true;
    checkAllCandidates(c, true, 4, "cuda-i8.tmar");
    if (k.C == 128) {  // the 192-pixel tiles were among them where the layer has enough tiles
      int dev = 0, sms = 0;
      ASSERT_EQ(cudaGetDevice(&dev), cudaSuccess);
      ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev), cudaSuccess);
      Int8ConvProvider prov;
      const auto cands = prov.candidates(c.layer, Precision::kInt8);
      const auto n192 = std::count_if(cands.begin(), cands.end(), [](const auto& t) {
        return t->id().rfind("cuda-i8.tmard192x128k128.", 0) == 0;
      });
      EXPECT_EQ(n192 > 0, cuda::int8ConvManyTiles(planOf(c), 128, sms, 192)) << sms;
    }
  }
}

// The register-epilogue TMA kernels need whole groups of 32 output channels (their weights'
// rows are permuted within them) and run unsplit: other plans are refused before anything
// reaches the device (builds with the TMA kernels).
TEST(CudaInt8Conv, TmaRegisterEpilogueKernelsRefuseKNotOf32AndSplitK_n) {
  if (!cuda::int8ConvBuildHasWgmma()) GTEST_SKIP() << "this build has no TMA kernels";
  EXPECT_EQ(cuda::int8ConvTmaTile(cuda::Int8ConvKernel::kTmaR128x128k128).bk, 128);
  EXPECT_TRUE(cuda::isInt8ConvTmaRegKernel(cuda::Int8ConvKernel::kTmaR128x64));
  EXPECT_FALSE(cuda::isInt8ConvTmaKernel(cuda::Int8ConvKernel::kTmaR128x64))
      << "not among the kernels that split K";
  // K = 80: two groups of 32 and a half
  cuda::Int8ConvPlan p = squarePlan(cuda::Int8ConvKernel::kTmaR128x128, 1, 64, 80, 7, 3);
  const cuda::Int8ConvArgs a = refusedArgs();
  Status s = cuda::launchInt8Conv(p, a, nullptr);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.toString();
  EXPECT_NE(s.message().find("K % 32"), std::string::npos) << s.toString();
  p.K = 96;
  p.splitK = 2;
  s = cuda::launchInt8Conv(p, a, nullptr);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.toString();
  EXPECT_NE(s.message().find("split K"), std::string::npos) << s.toString();
  EXPECT_TRUE(cuda::int8ConvSplits(p, 132).empty()) << "no split-K factors offered";
  // One 7x7 image: one tile of 128 pixels a slice of channels, too few for the one-block
  // kernels; 64 images, 25 x 1 tiles of 96 channels: more than half of 48 multiprocessors.
  EXPECT_FALSE(cuda::int8ConvManyTiles(p, 128, 132));
  p.N = 64;
  EXPECT_FALSE(cuda::int8ConvManyTiles(p, 128, 132)) << "25 tiles";
  EXPECT_TRUE(cuda::int8ConvManyTiles(p, 128, 48)) << "25 tiles";
  EXPECT_TRUE(cuda::int8ConvManyTiles(p, 64, 100)) << "50 tiles";
  EXPECT_FALSE(cuda::int8ConvManyTiles(p, 64, 0)) << "no device";
  // Tiles of 192 pixels: 3136 pixels are 17 of them (the last partial), x 1 slice of 96.
  EXPECT_TRUE(cuda::int8ConvManyTiles(p, 128, 34, 192)) << "17 tiles";
  EXPECT_FALSE(cuda::int8ConvManyTiles(p, 128, 35, 192)) << "17 tiles";
  EXPECT_FALSE(cuda::int8ConvManyTiles(p, 128, 34, 0)) << "no tile";
  EXPECT_TRUE(cuda::isInt8ConvTmaRegKernel(cuda::Int8ConvKernel::kTmaRD192x128k128));
  EXPECT_FALSE(cuda::isInt8ConvTmaKernel(cuda::Int8ConvKernel::kTmaRD192x128k128));
  EXPECT_EQ(cuda::int8ConvTmaTile(cuda::Int8ConvKernel::kTmaRD192x128k128).bm, 192);
  EXPECT_EQ(cuda::int8ConvTmaTile(cuda::Int8ConvKernel::kTmaRD192x128k128).bk, 128);
  // The weights' permutation: within each group of 32, a bijection (channels 8t .. 8t + 7 of
  // the group at the accumulator columns 2t, 2t + 1 of its four 8-column tiles).
  std::set<int> seen;
  for (int r = 0; r < 64; ++r) {
    const int k = cuda::int8ConvPermutedChannel(r);
    EXPECT_EQ(k / 32, r / 32) << r;
    seen.insert(k);
  }
  EXPECT_EQ(seen.size(), 64u);
  for (int t = 0; t < 4; ++t)
    for (int b = 0; b < 4; ++b)
      for (int e = 0; e < 2; ++e)
        EXPECT_EQ(cuda::int8ConvPermutedChannel(8 * b + 2 * t + e), 8 * t + 2 * b + e);
}

// The pointwise kernels (int8_conv_pointwise.cu) walk their tiles in persistent blocks: with
// 51,182 output pixels (400 tiles of 128; 25,591 in 400 tiles of 64 in the second case, the
// last tiles partial) a block takes two or more tiles, so stages are refilled while others are
// in use; 96 and 288 output channels make partial slices for every tile width (96 of 128; 32 of
// 64, 128 and 256), C = 64 two K steps, C = 32 one. Every pointwise tile (128x64, 128x128,
// 64x128, 64x256).
// Each epilogue instance of the pointwise kernels: the general one (fp16 outputs or residuals,
// the bit-exact rounding) and the lean ones of the fast rounding to int8, with and without a
// residual and Relu (pwLean8: Relu as a saturating multiply-add of constants divided by 127).
TEST(CudaInt8Conv, PointwiseKernelsStreamManyTilesWithResiduals) {
  EI_SKIP_WITHOUT_GPU();
  for (const auto& [C, K, N] : {std::tuple<int64_t, int64_t, int64_t>{64, 96, 2}, {32, 288, 1}})
    for (const bool residual : {true, false})
      for (const char* act : {"Relu", ""}) {
        SCOPED_TRACE("C = " + std::to_string(C) + ", K = " + std::to_string(K) +
                     (residual ? ", residual" : "") + ", activation '" + act + "'");
        I8Case c;
        c.op = "FusedConv";
        c.act = act;
        c.N = N;
        c.C = C;
        c.K = K;
        // Many tiles a block for one instance (their stages are the same in all); smaller
        // images for the other epilogues (the host reference of all candidates is the cost).
        const bool many = residual && act[0] != '\0';
        c.H = many ? 157 : 41;
        c.W = many ? 163 : 53;
        c.R = c.S = 1;
        c.pads = {0, 0, 0, 0};
        c.residual = residual;
        c.build();
        Int8ConvProvider prov;
        size_t pw = 0;
        for (const auto& t : prov.candidates(c.layer, Precision::kInt8))
          pw += t->id().rfind("cuda-i8.pw", 0) == 0 ? 1 : 0;
        const size_t formats = residual ? 4 : 2;
        EXPECT_EQ(pw, (K > 128 ? 4u : 3u) * formats)
            << "pw128x64, pw128x128, pw64x128 (and pw64x256), each with y (i8, f16) [x z (i8, "
               "f16)]";
        checkAllCandidates(c, true, formats, "cuda-i8.pw");  // (the others: the cases above)
      }
}

// A residual folded into its reader (ResNet's downsample branch, int8ConvPointwiseFoldFits):
// the ".fold" tactic computes the residual from the folded layer's input and must give, bit for
// bit, what the folded layer's own pointwise tactic followed by the reader's gives. Strides 1
// (contiguous input rows) and 2 (the general copy), partial tiles of pixels (13 x 13 and 9 x 11
// images), a partial slice of channels (K = 160 on pw64x256), Relu and none, every pointwise
// tile.
TEST(CudaInt8Conv, FoldedResidualEqualsItsLayerThenTheReader) {
  EI_SKIP_WITHOUT_GPU();
  struct Geometry {
    int64_t stride, Cd, C, K, P, Q;
    const char* act;
  };
  for (const Geometry& ge :
       {Geometry{1, 64, 64, 256, 13, 13, "Relu"}, Geometry{2, 96, 32, 96, 9, 11, ""},
        Geometry{2, 32, 64, 160, 13, 13, "Relu"}}) {
    SCOPED_TRACE("stride " + std::to_string(ge.stride) + ", " + std::to_string(ge.Cd) + " + " +
                 std::to_string(ge.C) + " -> " + std::to_string(ge.K) + " channels");
    I8Case d;  // the folded layer: 1x1, no activation, its output is the reader's residual
    d.N = 2;
    d.C = ge.Cd;
    d.K = ge.K;
    d.H = (ge.P - 1) * ge.stride + 1;
    d.W = (ge.Q - 1) * ge.stride + 1;
    d.R = d.S = 1;
    d.pads = {0, 0, 0, 0};
    d.strides = {ge.stride, ge.stride};
    d.sx = 0.021f;
    d.sy = 0.03f;
    d.build();
    I8Case c;  // the reader
    c.op = "FusedConv";
    c.act = ge.act;
    c.N = 2;
    c.C = ge.C;
    c.K = ge.K;
    c.H = ge.P;
    c.W = ge.Q;
    c.R = c.S = 1;
    c.pads = {0, 0, 0, 0};
    c.residual = true;
    c.sz = d.sy;
    c.build();
    Int8ConvProvider prov;
    const auto pick = [&](const builder::LayerContext& l, const std::string& id) {
      std::unique_ptr<builder::Tactic> t;
      for (auto& cand : prov.candidates(l, Precision::kInt8))
        if (cand->id() == id) t = std::move(cand);
      return t;
    };
    builder::LayerContext folded = c.layer;
    folded.foldedZ = std::make_shared<builder::LayerContext>(d.layer);
    // Input 3 of the folded tactic is d's input, which the harness quantizes with the layer's
    // input-3 scale (Z's): values already on that grid give d's int8 bytes.
    Tensor xd = d.x.clone();
    for (int64_t i = 0; i < xd.numel(); ++i)
      xd.data<float>()[i] =
          static_cast<float>(test::quantizeHost(d.x.data<float>()[i], d.sx)) * c.sz;
    size_t tried = 0;
    for (const char* kernel : {"pw128x64", "pw128x128", "pw64x256"}) {
      const std::string base = std::string("cuda-i8.") + kernel;
      auto dt = pick(d.layer, base + ".i8.-.f");
      auto ct = pick(c.layer, base + ".i8.i8.f");
      auto ft = pick(folded, base + ".i8.fold.f");
      if (!ct) continue;  // (pw64x256: K > 128 only)
      SCOPED_TRACE(base);
      ASSERT_TRUE(dt && ft) << "folded tactic not offered: " << prov.lastReason();
      ++tried;
      ASSERT_TRUE(dt->initialize(d.layer).ok());
      auto z = test::runTactic(*dt, d.layer, d.inputs());
      ASSERT_TRUE(z.ok()) << z.status().toString();
      c.z = (*z)[0];  // its int8 output, dequantized: quantized again with sz, the same bytes
      ASSERT_TRUE(ct->initialize(c.layer).ok());
      auto want = test::runTactic(*ct, c.layer, c.inputs());
      ASSERT_TRUE(want.ok()) << want.status().toString();
      const Status init = ft->initialize(folded);
      ASSERT_TRUE(init.ok()) << init.toString();
      auto got = test::runTactic(*ft, folded, {&c.x, &c.w, &c.b, &xd});
      ASSERT_TRUE(got.ok()) << got.status().toString();
      int64_t differ = 0;
      for (int64_t i = 0; i < (*want)[0].numel(); ++i)
        differ += (*got)[0].data<float>()[i] != (*want)[0].data<float>()[i] ? 1 : 0;
      EXPECT_EQ(differ, 0) << "of " << (*want)[0].numel();
    }
    EXPECT_GE(tried, 2u);
  }
}

// Where a residual cannot be folded: no fold candidates, and the reason (anywhere: the checks
// are the provider's, before any device work; without a GPU the reason is the device's).
TEST(CudaInt8Conv, FoldNotOfferedWhereItCannotRun_n) {
  I8Case d;
  d.C = 32;
  d.K = 64;
  d.H = d.W = 8;
  d.R = d.S = 1;
  d.pads = {0, 0, 0, 0};
  d.build();
  I8Case c;
  c.op = "FusedConv";
  c.C = 32;
  c.K = 64;
  c.H = c.W = 8;
  c.R = c.S = 1;
  c.pads = {0, 0, 0, 0};
  c.residual = true;
  c.sz = d.sy;
  c.build();
  Int8ConvProvider prov;
  const auto offered = [&](const builder::LayerContext& l) {
    return prov.candidates(l, Precision::kInt8).size();
  };
  builder::LayerContext l = c.layer;
  l.foldedZ = std::make_shared<builder::LayerContext>(d.layer);
  std::string noGpu;
  const bool gpu = gpuAvailable(&noGpu);
  if (gpu) {
    EXPECT_GT(offered(l), 0u) << prov.lastReason();
  }
  // The bit-exact rounding; a residual scale that is not the folded layer's output scale; a
  // folded layer with an activation or 3x3 weights; a reader without int8 output.
  builder::LayerContext exact = l;
  exact.int8BitExact = true;
  EXPECT_EQ(offered(exact), 0u);
  EXPECT_NE(prov.lastReason().find("fast rounding"), std::string::npos) << prov.lastReason();
  builder::LayerContext scale = l;
  scale.inputScales[3] = d.sy * 2;
  EXPECT_EQ(offered(scale), 0u);
  I8Case d3 = d;
  d3.R = d3.S = 3;
  d3.pads = {1, 1, 1, 1};
  d3.build();
  builder::LayerContext window = l;
  window.foldedZ = std::make_shared<builder::LayerContext>(d3.layer);
  EXPECT_EQ(offered(window), 0u);
  I8Case dr = d;
  dr.op = "FusedConv";
  dr.act = "Relu";
  dr.build();
  builder::LayerContext act = l;
  act.foldedZ = std::make_shared<builder::LayerContext>(dr.layer);
  EXPECT_EQ(offered(act), 0u);
  builder::LayerContext f16 = l;
  f16.outputScales = {0.f};
  EXPECT_EQ(offered(f16), 0u);
  // A folded tactic initialised for a layer without its folded layer, and the other way round.
  if (gpu) {
    auto cands = prov.candidates(l, Precision::kInt8);
    ASSERT_FALSE(cands.empty());
    const Status st = cands[0]->initialize(c.layer);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("no folded residual layer"), std::string::npos) << st.toString();
    auto plain = prov.candidates(c.layer, Precision::kInt8);
    ASSERT_FALSE(plain.empty());
    EXPECT_FALSE(plain[0]->initialize(l).ok());
  }
}

/// A layer `c3` with the 1x1 layer `c1` reading its output chained into it
/// (LayerContext::chained): c1's output as the layer's last output.
builder::LayerContext chainedLayer(const I8Case& c3, const I8Case& c1) {
  builder::LayerContext both = c3.layer;
  both.chained = std::make_shared<builder::LayerContext>(c1.layer);
  both.outputShapes.push_back(c1.layer.outputShapes[0]);
  both.outputTypes.push_back(c1.layer.outputTypes[0]);
  both.outputScales.push_back(c1.sy);
  return both;
}

/// The layer reading `c3`'s output for chainedLayer(): 1x1, `K` outputs, input scale c3's.
I8Case chainedReader(const I8Case& c3, int64_t K, const char* act) {
  I8Case c1;
  c1.op = act[0] ? "FusedConv" : "Conv";
  c1.act = act;
  c1.N = c3.N;
  c1.C = c3.K;
  c1.K = K;
  c1.H = (c3.H + c3.pads[0] + c3.pads[2] - c3.R) / c3.strides[0] + 1;
  c1.W = (c3.W + c3.pads[1] + c3.pads[3] - c3.S) / c3.strides[1] + 1;
  c1.R = c1.S = 1;
  c1.pads = {0, 0, 0, 0};
  c1.sx = c3.sy;
  c1.sy = 0.04f;
  return c1;
}

// A 1x1 layer chained into the pointwise layer whose output it reads (ResNet's block boundary,
// int8ConvPointwiseChainFits): the ".chain" tactic must give, bit for bit, the layer's own
// pointwise output and what the chained layer's own pointwise tactic makes of it. Output
// channels of one and of two warps' pieces a tile row (64, 96, 128: pieces of 16 pixels x 32
// channels shared by 8 warps), with and without residual and Relu, partial tiles of pixels (13
// x 13, 9 x 11, 7 x 7 images), every chained tile; and 51,182 pixels (400 to 800 tiles, more
// than the blocks resident at once), so that blocks take several tiles and refill the stages
// whose residual rows held the previous tile's outputs.
TEST(CudaInt8Conv, ChainedLayerEqualsBothLayersApart) {
  EI_SKIP_WITHOUT_GPU();
  struct Geometry {
    int64_t N, C, K, H, W, K1;
    bool residual;
    const char* act;
    const char* act1;
  };
  for (const Geometry& ge : {Geometry{2, 64, 256, 13, 13, 64, true, "Relu", "Relu"},
                             Geometry{2, 32, 128, 9, 11, 96, false, "", ""},
                             Geometry{3, 64, 256, 7, 7, 128, true, "Relu", ""},
                             Geometry{1, 64, 192, 5, 9, 32, false, "Relu", "Relu"},
                             Geometry{2, 64, 256, 157, 163, 64, true, "Relu", "Relu"},
                             Geometry{2, 32, 128, 157, 163, 96, false, "Relu", ""}}) {
    SCOPED_TRACE(std::to_string(ge.C) + " -> " + std::to_string(ge.K) + " -> " +
                 std::to_string(ge.K1) + " channels, " + std::to_string(ge.H) + "x" +
                 std::to_string(ge.W) + (ge.residual ? ", residual" : ""));
    I8Case c3;
    c3.op = ge.residual || ge.act[0] ? "FusedConv" : "Conv";
    c3.act = ge.act;
    c3.N = ge.N;
    c3.C = ge.C;
    c3.K = ge.K;
    c3.H = ge.H;
    c3.W = ge.W;
    c3.R = c3.S = 1;
    c3.pads = {0, 0, 0, 0};
    c3.residual = ge.residual;
    c3.build();
    I8Case c1 = chainedReader(c3, ge.K1, ge.act1);
    c1.build();
    const builder::LayerContext both = chainedLayer(c3, c1);
    Int8ConvProvider prov;
    const auto pick = [&](const builder::LayerContext& l, const std::string& id) {
      std::unique_ptr<builder::Tactic> t;
      for (auto& cand : prov.candidates(l, Precision::kInt8))
        if (cand->id() == id) t = std::move(cand);
      return t;
    };
    const std::string res = ge.residual ? ".i8" : ".-";
    size_t tried = 0;
    for (const char* kernel : {"pw128x128", "pw64x256"}) {
      const std::string base = std::string("cuda-i8.") + kernel;
      auto ct = pick(both, base + ".i8" + res + ".f.chain");
      if (ge.K > 128 && std::string(kernel) == "pw128x128") {
        EXPECT_FALSE(ct) << "a layer of more output channels than a block's";
        continue;
      }
      SCOPED_TRACE(base);
      ASSERT_TRUE(ct) << "chained tactic not offered: " << prov.lastReason();
      ++tried;
      auto own3 = pick(c3.layer, base + ".i8" + res + ".f");
      if (!own3) own3 = pick(c3.layer, "cuda-i8.pw128x128.i8" + res + ".f");
      ASSERT_TRUE(own3);
      ASSERT_TRUE(own3->initialize(c3.layer).ok());
      auto mid = test::runTactic(*own3, c3.layer, c3.inputs());
      ASSERT_TRUE(mid.ok()) << mid.status().toString();
      // c1's input: c3's int8 output, dequantized (quantized again with sx = c3.sy: the bytes)
      c1.x = (*mid)[0];
      std::unique_ptr<builder::Tactic> own1;
      for (const char* k1 : {"pw128x64", "pw128x128", "pw64x256"})
        if (!own1) own1 = pick(c1.layer, std::string("cuda-i8.") + k1 + ".i8.-.f");
      ASSERT_TRUE(own1);
      ASSERT_TRUE(own1->initialize(c1.layer).ok());
      auto out = test::runTactic(*own1, c1.layer, c1.inputs());
      ASSERT_TRUE(out.ok()) << out.status().toString();
      const Status init = ct->initialize(both);
      ASSERT_TRUE(init.ok()) << init.toString();
      auto got = test::runTactic(*ct, both, c3.inputs());
      ASSERT_TRUE(got.ok()) << got.status().toString();
      ASSERT_EQ(got->size(), 2u);
      for (size_t o = 0; o < 2; ++o) {
        const Tensor& want = o == 0 ? (*mid)[0] : (*out)[0];
        int64_t differ = 0;
        for (int64_t i = 0; i < want.numel(); ++i)
          differ += (*got)[o].data<float>()[i] != want.data<float>()[i] ? 1 : 0;
        EXPECT_EQ(differ, 0) << "output " << o << ": of " << want.numel();
      }
    }
    EXPECT_GE(tried, 1u);
  }
}

// Where a layer cannot be chained: no chained candidates, and the reason (the provider's checks
// come before any device work; without a GPU the reason is the device's).
TEST(CudaInt8Conv, ChainNotOfferedWhereItCannotRun_n) {
  I8Case c3;
  c3.op = "FusedConv";
  c3.act = "Relu";
  c3.C = 32;
  c3.K = 64;
  c3.H = c3.W = 8;
  c3.R = c3.S = 1;
  c3.pads = {0, 0, 0, 0};
  c3.build();
  I8Case c1 = chainedReader(c3, 32, "Relu");
  c1.build();
  const builder::LayerContext l = chainedLayer(c3, c1);
  Int8ConvProvider prov;
  const auto offered = [&](const builder::LayerContext& layer) {
    return prov.candidates(layer, Precision::kInt8).size();
  };
  std::string noGpu;
  const bool gpu = gpuAvailable(&noGpu);
  if (gpu) {
    EXPECT_GT(offered(l), 0u) << prov.lastReason();
  }
  // The bit-exact rounding; an input scale of the chained layer that is not the layer's output
  // scale; no chained output among the layer's outputs; a chained 3x3 layer, one of stride 2,
  // one with a residual or a Sigmoid, or of 1056 outputs; a layer of more output channels than
  // a block's (512).
  builder::LayerContext exact = l;
  exact.int8BitExact = true;
  EXPECT_EQ(offered(exact), 0u);
  EXPECT_NE(prov.lastReason().find("fast rounding"), std::string::npos) << prov.lastReason();
  I8Case wrongScale = c1;
  wrongScale.sx = c3.sy * 2;
  wrongScale.build();
  EXPECT_EQ(offered(chainedLayer(c3, wrongScale)), 0u);
  builder::LayerContext noOutput = l;
  noOutput.outputShapes.pop_back();
  noOutput.outputTypes.pop_back();
  noOutput.outputScales.pop_back();
  EXPECT_EQ(offered(noOutput), 0u);
  const auto refusedReader = [&](I8Case c, const char* what) {
    c.build();
    EXPECT_EQ(offered(chainedLayer(c3, c)), 0u) << what;
    if (gpu) {
      EXPECT_FALSE(prov.lastReason().empty()) << what;
    }
  };
  I8Case window = c1;
  window.R = window.S = 3;
  window.pads = {1, 1, 1, 1};
  refusedReader(window, "3x3");
  I8Case strided = c1;
  strided.strides = {2, 2};
  strided.H = c1.H;
  refusedReader(strided, "stride 2");
  I8Case withZ = c1;
  withZ.op = "FusedConv";
  withZ.residual = true;
  refusedReader(withZ, "a residual");
  I8Case sigmoid = c1;
  sigmoid.op = "FusedConv";
  sigmoid.act = "Sigmoid";
  refusedReader(sigmoid, "Sigmoid");
  I8Case manyOutputs = c1;  // 1056 rows of 4 pieces: beyond the weight copy's 4096 pieces
  manyOutputs.K = 1056;
  refusedReader(manyOutputs, "1056 output channels");
  I8Case wide = c3;
  wide.K = 512;
  wide.build();
  I8Case wideReader = chainedReader(wide, 32, "Relu");
  wideReader.build();
  EXPECT_EQ(offered(chainedLayer(wide, wideReader)), 0u);
  // A chained tactic initialised for the layer alone, and a plain one for the chained layer.
  if (gpu) {
    auto cands = prov.candidates(l, Precision::kInt8);
    ASSERT_FALSE(cands.empty());
    const Status st = cands[0]->initialize(c3.layer);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find("no chained layer"), std::string::npos) << st.toString();
    auto plain = prov.candidates(c3.layer, Precision::kInt8);
    ASSERT_FALSE(plain.empty());
    EXPECT_FALSE(plain[0]->initialize(l).ok());
  }
}

// The halo kernels (3x3, stride 1, padding 1): tiles of whole rows (Q = 56: 2 rows; 28: 4; 13:
// 9, the last tile of an image short of rows; 9: 14 rows, more than the image; 128: one row),
// input channels 32 to 128 (13x13 with 128: two K chunks a position and a short last tile),
// output channels in one or two slices of 64 (96: the second half empty), several images,
// residuals, activations and output formats, both roundings, every output against the host
// reference. 24 images of 56x56 make 672 tiles, several a block of the persistent grid: the
// stages are refilled over tiles already done.
TEST(CudaInt8Conv, HaloKernelAcrossRowsChannelsAndEpilogues) {
  EI_SKIP_WITHOUT_GPU();
  struct Geometry {
    int64_t N, C, H, W, K;
  };
  for (const Geometry& gm :
       {Geometry{2, 64, 56, 56, 64}, Geometry{1, 128, 28, 28, 96}, Geometry{3, 32, 13, 13, 32},
        Geometry{1, 96, 7, 9, 64}, Geometry{1, 64, 3, 128, 32}, Geometry{5, 128, 13, 13, 64}})
    for (const bool residual : {false, true})
      for (const char* act : {"Relu", "", "Sigmoid"}) {
        if (residual && act[0] == 'S') continue;
        SCOPED_TRACE("N " + std::to_string(gm.N) + ", C " + std::to_string(gm.C) + ", " +
                     std::to_string(gm.H) + "x" + std::to_string(gm.W) + ", K " +
                     std::to_string(gm.K) + (residual ? ", residual" : "") + ", activation '" +
                     act + "'");
        I8Case c;
        c.op = "FusedConv";
        c.act = act;
        c.N = gm.N;
        c.C = gm.C;
        c.H = gm.H;
        c.W = gm.W;
        c.K = gm.K;
        c.residual = residual;
        c.build();
        Int8ConvProvider prov;
        size_t halo = 0, haloWg = 0;
        for (const auto& t : prov.candidates(c.layer, Precision::kInt8)) {
          halo += t->id().rfind("cuda-i8.halo128x64.", 0) == 0 ? 1 : 0;
          haloWg += t->id().rfind("cuda-i8.halowg128x64.", 0) == 0 ? 1 : 0;
        }
        const size_t formats = residual ? 4 : 2;
        EXPECT_EQ(halo, formats) << "y (i8, f16) [x z (i8, f16)]";
        EXPECT_EQ(haloWg, cuda::int8ConvWgmmaAvailable() && gm.C % 64 == 0 ? formats : 0u)
            << "the wgmma form: compute 9.0, C % 64 == 0";
        checkAllCandidates(c, act[0] != 'S', formats, "cuda-i8.halo");
      }
  // Many tiles a block: the lean epilogue (ResNet's case) and the general one with a residual.
  for (const bool residual : {false, true}) {
    SCOPED_TRACE(residual ? "24 images, residual" : "24 images, Relu");
    I8Case many;
    many.op = "FusedConv";
    many.act = residual ? "" : "Relu";
    many.N = 24;
    many.C = many.K = 64;
    many.H = many.W = 56;
    many.residual = residual;
    checkAllCandidates(many, true, residual ? 4 : 2, "cuda-i8.halo");
  }
  // The largest sums (x and w at their int8 extremes: 127 * 127 * 9 * 64 > 2^22) take the
  // general path of the lean instance's epilogue.
  I8Case sat;
  sat.op = "FusedConv";
  sat.act = "Relu";
  sat.C = 64;
  sat.K = 64;
  sat.H = sat.W = 12;
  sat.saturate = true;
  checkAllCandidates(sat, true, 2, "cuda-i8.halo");
}

// Which layers the halo kernel takes, and launches it refuses (no GPU needed: the checks come
// before anything reaches the device).
TEST(CudaInt8Conv, HaloKernelOnlyFor3x3Stride1Padding1Layers_n) {
  // ResNet-50's layer1 3x3 at batch 64: 64 -> 64 at 56x56
  cuda::Int8ConvPlan p = squarePlan(cuda::Int8ConvKernel::kHalo128x64, 64, 64, 64, 56, 3);
  EXPECT_TRUE(cuda::int8ConvHaloFits(p));
  // weights 9 x 64 x (64 + 16), alpha and bias, two halos of 4 rows x 58 pixels x 80 bytes
  EXPECT_EQ(cuda::int8ConvHaloSharedBytes(p), 9 * 64 * 80 + 512 + 2 * 4 * 58 * 80);
  const auto refused = [&](auto change, const char* why) {
    cuda::Int8ConvPlan q = p;
    change(q);
    EXPECT_FALSE(cuda::int8ConvHaloFits(q)) << why;
  };
  refused([](cuda::Int8ConvPlan& q) { q.strideH = q.strideW = 2; }, "stride 2");
  refused([](cuda::Int8ConvPlan& q) { q.dilH = q.dilW = 2; }, "dilation 2");
  refused([](cuda::Int8ConvPlan& q) { q.padTop = q.padLeft = 0, q.P = q.Q = 54; }, "no padding");
  refused([](cuda::Int8ConvPlan& q) { q.R = q.S = 1; }, "1x1");
  refused([](cuda::Int8ConvPlan& q) { q.C = 256, q.gemmK = q.gemmKPad = 9 * 256; }, "C > 128");
  refused([](cuda::Int8ConvPlan& q) { q.C = 48, q.gemmK = 9 * 48, q.gemmKPad = 448; }, "C % 32");
  refused([](cuda::Int8ConvPlan& q) { q.K = 40; }, "K % 32");
  refused([](cuda::Int8ConvPlan& q) { q.W = q.Q = 200; }, "more than 128 columns");
  cuda::Int8ConvArgs a;  // misaligned pointers are refused before any launch
  alignas(16) static int8_t buf[64];
  a.x = buf + 1;
  a.w = a.y = buf;
  a.alpha = a.bias = reinterpret_cast<const float*>(buf);
  Status st = cuda::launchInt8ConvHalo(p, a, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("16-byte aligned"), std::string::npos) << st.toString();
  cuda::Int8ConvPlan q = p;
  q.strideH = 2;
  st = cuda::launchInt8ConvHalo(q, a, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("not a 3x3 convolution of stride 1"), std::string::npos)
      << st.toString();
}

// Which layers the pointwise kernels take, and launches they refuse (no GPU needed: the checks
// come before anything reaches the device).
TEST(CudaInt8Conv, PointwiseKernelsOnlyForUnpadded1x1Layers_n) {
  // ResNet-50's layer1 expansion at batch 64: 64 -> 256 at 56x56
  cuda::Int8ConvPlan p = squarePlan(cuda::Int8ConvKernel::kPw64x256, 64, 64, 256, 56, 1);
  EXPECT_TRUE(cuda::int8ConvPointwiseFits(p));
  cuda::Int8ConvPlan q = p;  // a strided downsample: 56 -> 28
  q.strideH = q.strideW = 2;
  q.P = q.Q = 28;
  EXPECT_TRUE(cuda::int8ConvPointwiseFits(q));
  q.P = q.Q = 29;  // padding at the far side: one more output row and column
  EXPECT_FALSE(cuda::int8ConvPointwiseFits(q));
  q = p;
  q.R = q.S = 3;  // not 1x1
  q.gemmK = q.gemmKPad = 576;
  EXPECT_FALSE(cuda::int8ConvPointwiseFits(q));
  q = p;
  q.padTop = 1;
  EXPECT_FALSE(cuda::int8ConvPointwiseFits(q));
  q = p;
  q.C = q.gemmK = 48;  // C % 32 != 0
  EXPECT_FALSE(cuda::int8ConvPointwiseFits(q));
  q = p;
  q.C = q.gemmK = q.gemmKPad = 288;  // beyond 256 input channels
  EXPECT_FALSE(cuda::int8ConvPointwiseFits(q));
  q = p;
  q.K = 40;  // K % 32 != 0
  EXPECT_FALSE(cuda::int8ConvPointwiseFits(q));

  // Shared memory grows with the input channels, the tile's width and the residual's format.
  p.kernel = cuda::Int8ConvKernel::kPw128x64;
  const int plain = cuda::int8ConvPointwiseSharedBytes(p);
  p.hasZ = true;
  p.zScale = 0.1f;
  const int i8z = cuda::int8ConvPointwiseSharedBytes(p);
  p.zScale = 0.f;
  const int f16z = cuda::int8ConvPointwiseSharedBytes(p);
  EXPECT_LT(plain, i8z);
  EXPECT_LT(i8z, f16z);
  p.kernel = cuda::Int8ConvKernel::kPw128x128;
  const int wider = cuda::int8ConvPointwiseSharedBytes(p);
  EXPECT_LT(f16z, wider);
  p.kernel = cuda::Int8ConvKernel::kPw64x256;
  const int narrow = cuda::int8ConvPointwiseSharedBytes(p);
  p.C = p.gemmK = p.gemmKPad = 256;  // weights and input rows 4 times as long
  EXPECT_LT(narrow, cuda::int8ConvPointwiseSharedBytes(p));
  p.C = p.gemmK = p.gemmKPad = 64;

  // A launch of a layer the kernels do not take, or of misaligned tensors, is refused.
  alignas(16) static int8_t buf[64];
  cuda::Int8ConvArgs a;
  a.x = a.w = a.z = buf;
  a.alpha = a.bias = reinterpret_cast<const float*>(buf);
  a.y = buf + 8;  // 8-byte aligned only
  p.hasZ = false;
  Status st = cuda::launchInt8ConvPointwise(p, a, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("aligned"), std::string::npos) << st.toString();
  a.y = buf;
  q = p;
  q.padLeft = 1;
  st = cuda::launchInt8ConvPointwise(q, a, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("1x1"), std::string::npos) << st.toString();
  q = p;
  q.kernel = cuda::Int8ConvKernel::kTma128x64;
  st = cuda::launchInt8ConvPointwise(q, a, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("not a pointwise kernel"), std::string::npos) << st.toString();
}

// Split K is offered where a layer has fewer tiles than the device multiprocessors (batch 1),
// the two largest factors up to 16 (blocks of a cluster) that fill at most two blocks an SM,
// each split at least one K step; not for the 128x256 tile.
TEST(CudaInt8Conv, SplitKFactorsFollowTilesAndSteps) {
  // ResNet-50's layer4 3x3 at batch 1: 49 pixels, 512 -> 512; 4 tiles, 36 steps
  cuda::Int8ConvPlan p = squarePlan(cuda::Int8ConvKernel::kTma128x128k128, 1, 512, 512, 7, 3);
  EXPECT_EQ(cuda::int8ConvSplits(p, 132), (std::vector<int>{16, 8}));
  p.kernel = cuda::Int8ConvKernel::kTma64x128;  // 4 tiles, 72 steps
  EXPECT_EQ(cuda::int8ConvSplits(p, 132), (std::vector<int>{16, 8}));
  p.kernel = cuda::Int8ConvKernel::kTma128x256;  // its sums do not fit in shared memory
  EXPECT_TRUE(cuda::int8ConvSplits(p, 132).empty());
  p.kernel = cuda::Int8ConvKernel::kTma128x64;  // 8 tiles
  EXPECT_EQ(cuda::int8ConvSplits(p, 16), (std::vector<int>{4, 2})) << "8 * 4 <= 2 * 16";
  EXPECT_TRUE(cuda::int8ConvSplits(p, 8).empty()) << "as many tiles as multiprocessors";
  EXPECT_TRUE(cuda::int8ConvSplits(p, 0).empty()) << "no device";
  cuda::Int8ConvPlan q = p;  // 1x1, C 64: one K step, nothing to split
  q.C = 64;
  q.R = q.S = 1;
  q.gemmK = q.gemmKPad = 64;
  EXPECT_TRUE(cuda::int8ConvSplits(q, 132).empty());
  q.C = q.gemmK = q.gemmKPad = 192;  // 3 steps: 2 splits at most
  EXPECT_EQ(cuda::int8ConvSplits(q, 132), (std::vector<int>{2}));
  p.N = 64;  // batch 64: 25 x 8 tiles of 128x64, more than 132
  EXPECT_TRUE(cuda::int8ConvSplits(p, 132).empty());
  q.kernel = cuda::Int8ConvKernel::kWgmma128x128;  // the cp.async-fed wgmma kernels do not split
  EXPECT_TRUE(cuda::int8ConvSplits(q, 132).empty());
  q.kernel = cuda::Int8ConvKernel::kDepthwise;
  EXPECT_TRUE(cuda::int8ConvSplits(q, 132).empty());
  // The mma.sync kernels (Orin: 16 multiprocessors): layer4's 3x3 at batch 1 is 4 tiles of
  // 128x128, 72 steps of 64 bytes.
  p.N = 1;
  p.kernel = cuda::Int8ConvKernel::kMma128x128;
  EXPECT_EQ(cuda::int8ConvSplits(p, 16), (std::vector<int>{8, 4})) << "4 * 8 <= 2 * 16";
  p.kernel = cuda::Int8ConvKernel::kMma128x64;  // 8 tiles
  EXPECT_EQ(cuda::int8ConvSplits(p, 16), (std::vector<int>{4, 2}));
  // Their partial sums: S x pixels x whole tiles of channels, int32; none unsplit or for TMA.
  p.K = 500;
  p.splitK = 4;
  EXPECT_EQ(cuda::int8ConvWorkspaceBytes(p), size_t{4} * 49 * 512 * 4);
  p.kernel = cuda::Int8ConvKernel::kTma128x64;
  EXPECT_EQ(cuda::int8ConvWorkspaceBytes(p), 0u) << "TMA kernels add up in a cluster";
  p.kernel = cuda::Int8ConvKernel::kMma128x64;
  p.splitK = 1;
  EXPECT_EQ(cuda::int8ConvWorkspaceBytes(p), 0u);
}

// On Hopper a batch-1 layer of few tiles gets split-K TMA candidates, 16 ways included (the
// clusters run on a whole H100 / H200); every candidate's id, split or not, is found again by
// find() (an engine load) as the same tactic.
TEST(CudaInt8Conv, Batch1LayersGetSplitKCandidatesAndIdsRoundTrip) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c;  // ResNet-50's layer4 3x3 at batch 1, fewer channels: 49 pixels, 256 -> 256
  c.N = 1;
  c.C = c.K = 256;
  c.H = c.W = 7;
  c.build();
  for (const bool bitExact : {true, false}) {
    c.layer.int8BitExact = bitExact;
    Int8ConvProvider prov;
    auto cands = prov.candidates(c.layer, Precision::kInt8);
    ASSERT_FALSE(cands.empty()) << prov.lastReason();
    size_t s16 = 0, s8 = 0;
    for (auto& t : cands) {
      const bool tma = t->id().rfind("cuda-i8.tma", 0) == 0;  // (the mma.sync kernels split too)
      s16 += tma && t->id().find("s16.") != std::string::npos ? 1 : 0;
      s8 += tma && t->id().find("s8.") != std::string::npos ? 1 : 0;
      auto again = prov.find(c.layer, Precision::kInt8, t->id());
      ASSERT_NE(again, nullptr) << t->id();
      EXPECT_EQ(again->id(), t->id());
    }
    // A split mma.sync id the candidates do not list (built on a device of another SM count,
    // or where TMA kernels took the layer) is found all the same, within 2 to 16 ways of a K
    // step or more each (this layer: 36 steps); beyond them it is not.
    const std::string tail = bitExact ? ".i8.-" : ".i8.-.f";
    for (const char* split : {"s4", "s16"}) {
      const std::string id = std::string("cuda-i8.mma128x128v16") + split + tail;
      auto t = prov.find(c.layer, Precision::kInt8, id);
      ASSERT_NE(t, nullptr) << id;
      EXPECT_EQ(t->id(), id);
      EXPECT_EQ(t->workspaceBytes(), size_t{std::stoul(split + 1)} * 49 * 256 * 4) << id;
    }
    for (const char* split : {"s1", "s17", "s0", "sx"})
      EXPECT_EQ(
          prov.find(c.layer, Precision::kInt8, std::string("cuda-i8.mma128x128v16") + split + tail),
          nullptr)
          << split;
    if (cuda::int8ConvTmaAvailable()) {
      int dev = 0, sms = 0;
      cudaGetDevice(&dev);
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
      if (sms >= 100) {  // a whole H100 / H200, not a MIG slice
        EXPECT_GT(s16, 0u) << "no 16-way split among " << cands.size() << " candidates";
        EXPECT_GT(s8, 0u);
      }
    } else {
      EXPECT_EQ(s16 + s8, 0u) << "TMA splits without the TMA kernels";
    }
  }
}

// A split-K plan beyond a cluster's 16 blocks, or with fewer K steps than splits, is refused
// before anything reaches the device (builds with the TMA kernels).
TEST(CudaInt8Conv, SplitKBeyondItsLimitsIsAnError_n) {
  // 18 K steps of 64 bytes
  cuda::Int8ConvPlan p = squarePlan(cuda::Int8ConvKernel::kMma128x128, 1, 128, 128, 7, 3);
  cuda::Int8ConvArgs a = refusedArgs();
  {  // mma.sync: its partial sums need a workspace
    p.splitK = 2;
    Status s = cuda::launchInt8Conv(p, a, nullptr);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.toString();
    EXPECT_NE(s.message().find("workspace"), std::string::npos) << s.toString();
    a.workspace = reinterpret_cast<void*>((uintptr_t{1} << 20) + 4);  // misaligned
    s = cuda::launchInt8Conv(p, a, nullptr);
    EXPECT_NE(s.message().find("workspace"), std::string::npos) << s.toString();
    a.workspace = nullptr;
    p.kernel = cuda::Int8ConvKernel::kWgmma128x128;  // no split-K variant
    s = cuda::launchInt8Conv(p, a, nullptr);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.toString();
    EXPECT_NE(s.message().find("split K"), std::string::npos) << s.toString();
  }
  if (!cuda::int8ConvBuildHasWgmma()) GTEST_SKIP() << "this build has no TMA kernels";
  p.kernel = cuda::Int8ConvKernel::kTma64x128;
  for (const int split : {32, 17, 0}) {
    p.splitK = split;
    const Status s = cuda::launchInt8Conv(p, a, nullptr);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << split << ": " << s.toString();
    EXPECT_NE(s.message().find("split K"), std::string::npos) << s.toString();
  }
  p.C = p.K = 64;  // 9 steps, 16 splits
  p.gemmK = p.gemmKPad = 9 * 64;
  p.splitK = 16;
  const Status s = cuda::launchInt8Conv(p, a, nullptr);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << s.toString();
  EXPECT_NE(s.message().find("split K"), std::string::npos) << s.toString();
}

// A split-K mma.sync tactic without its workspace, or with too small a one, is an error naming
// it; with it, it runs. 96 input channels: no TMA kernel runs the layer (those need C % 64 == 0),
// so the mma.sync kernels get their split-K forms on every GPU.
TEST(CudaInt8Conv, SplitKWithoutItsWorkspaceIsAnError_n) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c;
  c.N = 1;
  c.C = 96;
  c.K = 128;
  c.H = c.W = 7;
  c.build();
  Int8ConvProvider prov;
  builder::Tactic* split = nullptr;
  auto cands = prov.candidates(c.layer, Precision::kInt8);
  for (auto& t : cands)
    if (t->workspaceBytes() > 0 && !split) split = t.get();
  ASSERT_NE(split, nullptr) << "a 7x7 layer at batch 1 gets split-K mma.sync candidates";
  EXPECT_EQ(split->id().rfind("cuda-i8.mma", 0), 0u) << split->id();
  ASSERT_TRUE(split->initialize(c.layer).ok());
  void *x = nullptr, *y = nullptr, *ws = nullptr;
  ASSERT_EQ(cudaMalloc(&x, 49 * 96), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&y, 49 * 128 * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&ws, split->workspaceBytes()), cudaSuccess);
  builder::LaunchArgs args;
  args.inputs = {x, nullptr, nullptr};
  args.outputs = {y};
  Status s = split->enqueue(args);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("workspace"), std::string::npos) << s.toString();
  args.workspace = ws;
  args.workspaceBytes = split->workspaceBytes() - 1;
  s = split->enqueue(args);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("workspace"), std::string::npos) << s.toString();
  args.workspaceBytes = split->workspaceBytes();
  EXPECT_TRUE(split->enqueue(args).ok());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaFree(x);
  cudaFree(y);
  cudaFree(ws);
}

// Geometry the TMA's im2col box cannot describe gets the other kernels, never a wrong result.
TEST(CudaInt8Conv, TmaNotOfferedBeyondItsBoundingBox_n) {
  cuda::Int8ConvPlan p = squarePlan(cuda::Int8ConvKernel::kMma128x128, 1, 64, 64, 8, 3);
  EXPECT_EQ(cuda::int8ConvTmaFits(p, 64), cuda::int8ConvBuildHasWgmma());
  EXPECT_FALSE(cuda::int8ConvTmaFits(p, 128)) << "C % 128 != 0";
  cuda::Int8ConvPlan q = p;
  q.C = 48;
  q.gemmK = 3 * 3 * 48;
  q.gemmKPad = (q.gemmK + 63) / 64 * 64;
  EXPECT_FALSE(cuda::int8ConvTmaFits(q, 64)) << "C % 64 != 0";
  q = p;
  q.padTop = 130;  // the box's corner is an 8-bit offset
  q.P = 8 + 130 - 2;
  EXPECT_FALSE(cuda::int8ConvTmaFits(q, 64)) << "padding beyond the box";
  q = p;
  q.strideW = 9;
  q.Q = 1;
  EXPECT_FALSE(cuda::int8ConvTmaFits(q, 64)) << "traversal stride above 8";
  // The box's corners: -128 and 127 are the limits.
  q = p;
  q.padLeft = 128;  // lower W corner -128; Q = 8 + 128 - 2 = 134: upper (133 - 128 - 7) = -2
  q.Q = 134;
  EXPECT_EQ(cuda::int8ConvTmaFits(q, 64), cuda::int8ConvBuildHasWgmma()) << "lower corner -128";
  q.padLeft = 129;
  q.Q = 135;
  EXPECT_FALSE(cuda::int8ConvTmaFits(q, 64)) << "lower corner -129";
  q = p;
  q.R = q.S = 1;
  q.padTop = q.padLeft = 0;
  q.gemmK = q.gemmKPad = 64;
  q.Q = 8 + 127;  // 127 columns of right padding: upper corner 134 - 7 = 127
  EXPECT_EQ(cuda::int8ConvTmaFits(q, 64), cuda::int8ConvBuildHasWgmma()) << "upper corner 127";
  q.Q = 8 + 128;
  EXPECT_FALSE(cuda::int8ConvTmaFits(q, 64)) << "upper corner 128";

  EI_SKIP_WITHOUT_GPU();
  I8Case c;  // the same padding in a layer: offered, without the TMA kernels
  c.C = 64;
  c.K = 32;
  c.H = c.W = 4;
  c.pads = {130, 1, 0, 1};
  c.build();
  c.layer.int8BitExact = true;
  Int8ConvProvider prov;
  auto cands = prov.candidates(c.layer, Precision::kInt8);
  ASSERT_FALSE(cands.empty()) << prov.lastReason();
  size_t wgmma = 0;
  for (auto& t : cands) {
    EXPECT_NE(t->id().rfind("cuda-i8.tma", 0), 0u) << t->id();
    if (t->id().rfind("cuda-i8.wg", 0) != 0) continue;
    ++wgmma;  // the cp.async-fed wgmma kernels take the layer, exactly
    SCOPED_TRACE(t->id());
    ASSERT_TRUE(t->initialize(c.layer).ok());
    auto out = test::runTactic(*t, c.layer, c.inputs());
    ASSERT_TRUE(out.ok()) << out.status().toString();
    const Tensor want = c.reference(t->outputFormat(0).dtype == DataType::kInt8, false);
    int64_t differ = 0;
    for (int64_t i = 0; i < want.numel(); ++i)
      differ += (*out)[0].data<float>()[i] != want.data<float>()[i];
    EXPECT_EQ(differ, 0) << "of " << want.numel();
  }
  EXPECT_EQ(wgmma > 0, cuda::int8ConvWgmmaAvailable());
}

TEST(CudaInt8Conv, SigmoidWithinOneStep) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c;  // expf on the device and the host may differ in the last bit
  c.op = "FusedConv";
  c.act = "Sigmoid";
  c.sy = 1.f / 127.f;
  checkAllCandidates(c, false, 2);
}

TEST(CudaInt8Conv, DepthwiseMatchesTheIntegerReference) {
  EI_SKIP_WITHOUT_GPU();
  for (int64_t C : {36, 6}) {  // dw4 and dw1
    SCOPED_TRACE("C = " + std::to_string(C));
    I8Case c;
    c.C = c.K = c.group = C;
    c.N = 2;
    c.H = 19;
    c.W = 10;
    c.strides = {2, 2};
    c.op = "FusedConv";
    c.act = "Relu";
    c.residual = false;
    checkAllCandidates(c, true, 2);  // (i8, f16) outputs
  }
}

// MobileNetV2's ReLU6 (Clip(0, 6) fused into the convolution) on a 1x1 expansion and a
// depthwise 3x3: int8 outputs saturate at 6 (127 steps of 6/127).
TEST(CudaInt8Conv, Relu6OnDenseAndDepthwiseMatchesTheIntegerReference) {
  EI_SKIP_WITHOUT_GPU();
  for (const bool depthwise : {false, true}) {
    SCOPED_TRACE(depthwise ? "depthwise" : "1x1 expansion");
    I8Case c;
    c.C = depthwise ? 96 : 16;
    c.K = 96;
    if (depthwise) {
      c.group = 96;
      c.sx = 6.f / 127.f;  // the input is a ReLU6 output too
    } else {
      c.R = c.S = 1;
      c.pads = {0, 0, 0, 0};
    }
    c.H = c.W = 14;
    c.op = "FusedConv";
    c.act = "Clip";
    c.actAlpha = 0.f;
    c.actBeta = 6.f;
    c.sy = 6.f / 127.f;
    checkAllCandidates(c, true, 2);
  }
}

TEST(CudaInt8Conv, TacticErrors_n) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c;
  c.build();
  Int8ConvProvider prov;
  auto cands = prov.candidates(c.layer, Precision::kInt8);
  ASSERT_FALSE(cands.empty());
  builder::LaunchArgs args;
  EXPECT_FALSE(cands[0]->enqueue(args).ok()) << "enqueue before initialize";
  builder::Tactic* i8out = nullptr;
  for (auto& t : cands)
    if (t->outputFormat(0).dtype == DataType::kInt8) i8out = t.get();
  ASSERT_NE(i8out, nullptr);
  builder::LayerContext noScale = c.layer;
  noScale.outputScales = {0.f};  // an engine plan that lost the output's scale
  const Status s = i8out->initialize(noScale);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no scale"), std::string::npos) << s.toString();
  ASSERT_TRUE(cands[0]->initialize(c.layer).ok());
  args.inputs = {nullptr, nullptr, nullptr};
  args.outputs = {nullptr};
  EXPECT_FALSE(cands[0]->enqueue(args).ok()) << "missing pointers";
}

// ---- Quantize / dequantize reformats --------------------------------------------------------

TEST(CudaInt8Reformat, QuantizeAndDequantizeLikeQuantizeLinear) {
  EI_SKIP_WITHOUT_GPU();
  const Shape s{2, 12, 5, 7};
  Tensor x = randomTensor(s, 9, -4.f, 4.f);
  x.data<float>()[3] = NAN;
  x.data<float>()[4] = 0.05f;  // exactly half a step: rounds to even
  const float scale = 0.025f;
  const int64_t n = x.numel();
  void *dx = nullptr, *dq = nullptr, *dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, n * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dq, n), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, n * 2), cudaSuccess);
  cudaMemcpy(dx, x.raw(), n * 4, cudaMemcpyHostToDevice);
  // fp32 NCHW -> int8 NHWC -> fp16 NCHW
  ASSERT_TRUE(cuda::launchReformat(dx, DataType::kFloat32, false, dq, DataType::kInt8, true, 2, 12,
                                   35, nullptr, scale)
                  .ok());
  ASSERT_TRUE(cuda::launchReformat(dq, DataType::kInt8, true, dy, DataType::kFloat16, false, 2, 12,
                                   35, nullptr, scale)
                  .ok());
  std::vector<int8_t> q(static_cast<size_t>(n));
  std::vector<uint16_t> y(static_cast<size_t>(n));
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  cudaMemcpy(q.data(), dq, n, cudaMemcpyDeviceToHost);
  cudaMemcpy(y.data(), dy, n * 2, cudaMemcpyDeviceToHost);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = (i / 35) % 12, hw = i % 35, b = i / (35 * 12);
    const int8_t want = test::quantizeHost(x.data<float>()[i], scale);
    bad += q[static_cast<size_t>((b * 35 + hw) * 12 + c)] != want;
    bad += y[static_cast<size_t>(i)] != floatToHalf(static_cast<float>(want) * scale);
    EXPECT_FLOAT_EQ(quant::fakeQuantize(x.data<float>()[i], scale),
                    std::isnan(x.data<float>()[i]) ? 0.f : static_cast<float>(want) * scale);
  }
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(test::quantizeHost(0.05f, scale), 2) << "half a step rounds to even";
  // A quantize reformat without a scale is an error, not garbage.
  const Status noScale = cuda::launchReformat(dx, DataType::kFloat32, false, dq, DataType::kInt8,
                                              false, 1, 1, n, nullptr, 0.f);
  EXPECT_EQ(noScale.code(), ErrorCode::kInvalidArgument);
  cudaFree(dx);
  cudaFree(dq);
  cudaFree(dy);
}

// The quantize every INT8 kernel ends with (kernels/cuda/quantize.cuh) skips the division
// where it cannot change the result: values a few ulps around every half step, the saturation
// edges, infinities and NaN, for ordinary, subnormal and huge scales, against the host's
// rint(v / scale) on the quantize reformat (which uses the same function).
TEST(CudaInt8Reformat, QuantizeAroundHalfStepsEqualsTheDivision) {
  EI_SKIP_WITHOUT_GPU();
  for (const float scale : {0.025f, 1.f / 127.f, 6.f / 127.f, 3.7e-3f, 1e-39f, 3e-39f, 1.7e38f}) {
    SCOPED_TRACE("scale " + std::to_string(scale));
    std::vector<float> v;
    for (int n = -131; n <= 131; ++n) {
      float h = (static_cast<float>(n) + 0.5f) * scale;  // about a half step
      for (int k = 0; k < 4; ++k) h = std::nextafter(h, -INFINITY);
      for (int k = 0; k < 9; ++k, h = std::nextafter(h, INFINITY)) v.push_back(h);
      v.push_back(static_cast<float>(n) * scale);  // whole steps
    }
    for (const float e : {INFINITY, -INFINITY, NAN, 0.f, -0.f, 3e38f, -3e38f, 1e-45f})
      v.push_back(e);
    const int64_t n = static_cast<int64_t>(v.size());
    void *dx = nullptr, *dq = nullptr;
    ASSERT_EQ(cudaMalloc(&dx, n * 4), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dq, n), cudaSuccess);
    cudaMemcpy(dx, v.data(), n * 4, cudaMemcpyHostToDevice);
    ASSERT_TRUE(cuda::launchReformat(dx, DataType::kFloat32, false, dq, DataType::kInt8, false, 1,
                                     1, n, nullptr, scale)
                    .ok());
    std::vector<int8_t> q(static_cast<size_t>(n));
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaMemcpy(q.data(), dq, n, cudaMemcpyDeviceToHost);
    int64_t bad = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int8_t want = test::quantizeHost(v[static_cast<size_t>(i)], scale);
      if (q[static_cast<size_t>(i)] != want && bad++ < 5)
        ADD_FAILURE() << "v = " << v[static_cast<size_t>(i)] << ": "
                      << int{q[static_cast<size_t>(i)]} << ", want " << int{want};
    }
    EXPECT_EQ(bad, 0) << "of " << n;
    cudaFree(dx);
    cudaFree(dq);
  }
}

// ---- INT8 engines --------------------------------------------------------------------------

/// A small residual CNN whose convolutions can all run INT8 (C_in % 4 == 0 after the first).
test::TestModel int8Cnn(uint32_t seed4 = 6) {
  test::TestModel m(13);
  m.input("x", {2, 8, 20, 18});
  m.randomInitializer("w1", {32, 8, 3, 3}, 1, -0.3f, 0.3f);
  m.randomInitializer("b1", {32}, 2, -0.2f, 0.2f);
  m.randomInitializer("w2", {32, 32, 3, 3}, 3, -0.1f, 0.1f);
  m.randomInitializer("b2", {32}, 4, -0.2f, 0.2f);
  m.randomInitializer("w3", {32, 1, 3, 3}, 5, -0.4f, 0.4f);
  m.randomInitializer("w4", {16, 32, 1, 1}, seed4, -0.3f, 0.3f);
  auto& c1 = m.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  test::TestModel::attrInts(c1, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  auto& c2 = m.node("Conv", {"r1", "w2", "b2"}, {"c2"}, "conv2");
  test::TestModel::attrInts(c2, "pads", {1, 1, 1, 1});
  m.node("Add", {"c2", "r1"}, {"a2"}, "add2");
  m.node("Relu", {"a2"}, {"r2"}, "relu2");
  auto& dw = m.node("Conv", {"r2", "w3"}, {"c3"}, "dwconv");
  test::TestModel::attr(dw, "group", 32);
  test::TestModel::attrInts(dw, "pads", {1, 1, 1, 1});
  test::TestModel::attrInts(dw, "strides", {2, 2});
  m.node("Relu", {"c3"}, {"r3"}, "relu3");
  m.node("Conv", {"r3", "w4"}, {"y"}, "conv4");
  m.output("y");
  return m;
}

/// 64-channel layers (the TMA-fed wgmma kernels on compute 9.0): a 3x3 convolution, a 3x3 one
/// with the residual add and ReLU fused, a strided 1x1 one.
test::TestModel int8Cnn64() {
  test::TestModel m(17);
  m.input("x", {2, 64, 15, 13});
  m.randomInitializer("w1", {64, 64, 3, 3}, 1, -0.05f, 0.05f);
  m.randomInitializer("b1", {64}, 2, -0.2f, 0.2f);
  m.randomInitializer("w2", {64, 64, 3, 3}, 3, -0.05f, 0.05f);
  m.randomInitializer("b2", {64}, 4, -0.2f, 0.2f);
  m.randomInitializer("w3", {96, 64, 1, 1}, 5, -0.2f, 0.2f);
  auto& c1 = m.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  test::TestModel::attrInts(c1, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  auto& c2 = m.node("Conv", {"r1", "w2", "b2"}, {"c2"}, "conv2");
  test::TestModel::attrInts(c2, "pads", {1, 1, 1, 1});
  m.node("Add", {"c2", "r1"}, {"a2"}, "add2");
  m.node("Relu", {"a2"}, {"r2"}, "relu2");
  auto& c3 = m.node("Conv", {"r2", "w3"}, {"y"}, "conv3");
  test::TestModel::attrInts(c3, "strides", {2, 2});
  m.output("y");
  return m;
}

// A strict INT8 engine of 64-channel layers (tensor maps as kernel parameters, encoded at each
// launch): close to the CPU's INT8 emulation, and the same outputs whether the layers run one
// by one, are captured into a CUDA graph or replayed with new input values.
TEST(CudaInt8Engine, TmaLayersMatchTheCpuInt8InCudaGraphs) {
  EI_SKIP_WITHOUT_GPU();
  Int8Fixture f;
  f.inputShape = Shape{2, 64, 15, 13};
  ASSERT_TRUE(f.prepare(int8Cnn64()).ok());
  auto cpuInt8 = f.cpuEngine(/*int8=*/true);
  ASSERT_TRUE(cpuInt8.ok()) << cpuInt8.status().toString();
  auto gpu = Builder::buildFromFile(f.model, f.config(/*strict=*/true));
  ASSERT_TRUE(gpu.ok()) << gpu.status().toString();
  EXPECT_EQ((*gpu)->info().precision, Precision::kInt8);
  if (cuda::int8ConvTmaAvailable()) {
    const auto tactics = runtime::cudaEngineTactics(**gpu);
    size_t tma = 0;
    for (const auto& [layer, id] : tactics) tma += id.rfind("cuda-i8.tma", 0) == 0 ? 1 : 0;
    std::printf("[          ] %zu of %zu layers on TMA kernels\n", tma, tactics.size());
  }
  const Tensor x2 = randomTensor(f.inputShape, 77, -1.f, 1.f);
  ContextOptions eager;
  eager.cudaGraphs = false;
  auto one = (*gpu)->createExecutionContext(eager);
  auto graphs = (*gpu)->createExecutionContext();
  ASSERT_TRUE(one.ok() && graphs.ok());
  const Tensor* xs[] = {&f.sample, &x2, &f.sample, &x2};  // warm-up, capture, replays
  for (const Tensor* x : xs) {
    auto a = (*one)->run({{"x", *x}});
    auto b = (*graphs)->run({{"x", *x}});
    ASSERT_TRUE(a.ok() && b.ok());
    const Tensor& ya = a->at("y");
    const Tensor& yb = b->at("y");
    ASSERT_EQ(ya.numel(), yb.numel());
    int64_t differ = 0;
    for (int64_t i = 0; i < ya.numel(); ++i) differ += ya.getAsDouble(i) != yb.getAsDouble(i);
    EXPECT_EQ(differ, 0) << "graph replay against layer-by-layer launches";
  }
  EXPECT_GE((*graphs)->stats().graphReplays, 2);
  const Tensor emulated = runOnce(**cpuInt8, f.sample), got = runOnce(**gpu, f.sample);
  const double vsCpu = cosine(got, emulated);
  std::printf("[          ] GPU INT8 (64-channel layers) vs CPU INT8: cosine %.6f, rel L2 %.4f\n",
              vsCpu, test::relL2(got, emulated));
  EXPECT_GT(vsCpu, 0.999);
}

TEST(CudaInt8Engine, StrictInt8EngineRunsInt8LayersCloseToFp32AndReloads) {
  EI_SKIP_WITHOUT_GPU();
  Int8Fixture f;
  ASSERT_TRUE(f.prepare(int8Cnn()).ok());
  BuilderConfig cpu;
  cpu.backend = Backend::kCpu;
  auto ref = Builder::buildFromFile(f.model, cpu);
  ASSERT_TRUE(ref.ok()) << ref.status().toString();
  const Tensor want = runOnce(**ref, f.sample);

  auto e = Builder::buildFromFile(f.model, f.config(/*strict=*/true));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ((*e)->info().precision, Precision::kInt8);
  const Tensor got = runOnce(**e, f.sample);
  ASSERT_EQ(got.numel(), want.numel());
  const double cos = cosine(got, want), err = test::relL2(got, want);
  std::printf("[          ] INT8 engine vs CPU FP32: cosine %.5f, rel L2 %.4f\n", cos, err);
  EXPECT_GT(cos, 0.995);
  EXPECT_LT(err, 0.08);

  // Serialised and loaded: the int8 tensors keep their scales, the results are identical.
  auto bytes = (*e)->serialize();
  ASSERT_TRUE(bytes.ok());
  const std::string text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  EXPECT_NE(text.find("cuda-i8."), std::string::npos) << "INT8 tactics in the plan";
  EXPECT_NE(text.find("\"scale\""), std::string::npos);
  auto loaded = Engine::deserialize(bytes->data(), bytes->size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  const Tensor again = runOnce(**loaded, f.sample);
  ASSERT_EQ(again.numel(), got.numel());
  EXPECT_EQ(std::memcmp(again.raw(), got.raw(), got.bytes()), 0);
}

// The rounding is a build option the engine records in its tactics: every cuda-i8 layer of a
// default (fast) build ends ".f" (none of a bit-exact build's does), saved and loaded engines
// keep it and their outputs, and the two builds differ by int8 rounding only.
TEST(CudaInt8Engine, BitExactRoundingIsRecordedInTheEngine) {
  EI_SKIP_WITHOUT_GPU();
  Int8Fixture f;
  f.inputShape = Shape{2, 64, 15, 13};
  ASSERT_TRUE(f.prepare(int8Cnn64()).ok());
  BuilderConfig exactConfig = f.config(/*strict=*/true);
  exactConfig.int8BitExact = true;
  auto exact = Builder::buildFromFile(f.model, exactConfig);
  ASSERT_TRUE(exact.ok()) << exact.status().toString();
  auto fast = Builder::buildFromFile(f.model, f.config(/*strict=*/true));  // same timing cache
  ASSERT_TRUE(fast.ok()) << fast.status().toString();
  const auto countInt8 = [](const Engine& e, bool wantExact) {
    size_t n = 0;
    for (const auto& [layer, id] : runtime::cudaEngineTactics(e)) {
      if (id.rfind("cuda-i8.", 0) != 0) continue;
      ++n;
      EXPECT_EQ(id.compare(id.size() - 2, 2, ".f") == 0, !wantExact) << layer << ": " << id;
    }
    return n;
  };
  const size_t n = countInt8(**exact, true);
  EXPECT_GT(n, 0u);
  EXPECT_EQ(countInt8(**fast, false), n);

  auto bytes = (*exact)->serialize();
  ASSERT_TRUE(bytes.ok());
  auto loaded = Engine::deserialize(bytes->data(), bytes->size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_EQ(countInt8(**loaded, true), n);
  const Tensor a = runOnce(**exact, f.sample), b = runOnce(**loaded, f.sample);
  ASSERT_EQ(a.numel(), b.numel());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.bytes()), 0);
  const Tensor c = runOnce(**fast, f.sample);
  // The fast engine too (its tactics found again by their ".f" ids).
  auto fastBytes = (*fast)->serialize();
  ASSERT_TRUE(fastBytes.ok());
  auto fastLoaded = Engine::deserialize(fastBytes->data(), fastBytes->size());
  ASSERT_TRUE(fastLoaded.ok()) << fastLoaded.status().toString();
  EXPECT_EQ(countInt8(**fastLoaded, false), n);
  const Tensor d = runOnce(**fastLoaded, f.sample);
  ASSERT_EQ(d.numel(), c.numel());
  EXPECT_EQ(std::memcmp(c.raw(), d.raw(), c.bytes()), 0);
  const double cos = cosine(a, c);
  std::printf("[          ] fast against bit-exact rounding, %zu INT8 layers: cosine %.7f\n", n,
              cos);
  EXPECT_GT(cos, 0.9999);
}

/// Two MobileNetV2 inverted residual blocks (1x1 expansion + ReLU6, depthwise 3x3 + ReLU6,
/// linear 1x1 projection + the block's input) and its head (1x1 + ReLU6, global average pool,
/// Flatten, Gemm), ReLU6 written as Clip with min/max inputs as PyTorch exports it.
test::TestModel invertedResiduals() {
  test::TestModel m(13);
  m.input("x", {2, 16, 14, 14});
  m.initializer("zero", {}, {0.f});
  m.initializer("six", {}, {6.f});
  std::string in = "x";
  uint32_t seed = 20;
  for (int b = 0; b < 2; ++b) {
    const std::string p = "b" + std::to_string(b) + "_";
    m.randomInitializer(p + "we", {64, 16, 1, 1}, seed++, -0.4f, 0.4f);
    m.randomInitializer(p + "be", {64}, seed++, -0.2f, 0.4f);
    m.randomInitializer(p + "wd", {64, 1, 3, 3}, seed++, -0.5f, 0.5f);
    m.randomInitializer(p + "bd", {64}, seed++, -0.2f, 0.4f);
    m.randomInitializer(p + "wp", {16, 64, 1, 1}, seed++, -0.2f, 0.2f);
    m.randomInitializer(p + "bp", {16}, seed++, -0.1f, 0.1f);
    m.node("Conv", {in, p + "we", p + "be"}, {p + "e"}, p + "expand");
    m.node("Clip", {p + "e", "zero", "six"}, {p + "er"}, p + "relu6a");
    auto& dw = m.node("Conv", {p + "er", p + "wd", p + "bd"}, {p + "d"}, p + "depthwise");
    test::TestModel::attr(dw, "group", 64);
    test::TestModel::attrInts(dw, "pads", {1, 1, 1, 1});
    m.node("Clip", {p + "d", "zero", "six"}, {p + "dr"}, p + "relu6b");
    m.node("Conv", {p + "dr", p + "wp", p + "bp"}, {p + "p"}, p + "project");
    m.node("Add", {p + "p", in}, {p + "out"}, p + "add");
    in = p + "out";
  }
  m.randomInitializer("wh", {64, 16, 1, 1}, seed++, -0.4f, 0.4f);
  m.randomInitializer("wc", {10, 64}, seed++, -0.3f, 0.3f);
  m.randomInitializer("bc", {10}, seed++, -0.1f, 0.1f);
  m.node("Conv", {in, "wh"}, {"h"}, "head");
  m.node("Clip", {"h", "zero", "six"}, {"hr"}, "relu6h");
  m.node("GlobalAveragePool", {"hr"}, {"gap"}, "pool");
  m.node("Flatten", {"gap"}, {"flat"}, "flatten");
  auto& fc = m.node("Gemm", {"flat", "wc", "bc"}, {"y"}, "classifier");
  test::TestModel::attr(fc, "transB", 1);
  m.output("y");
  return m;
}

// The GPU's strict INT8 engine of MobileNetV2-style blocks against the CPU's INT8 (the same
// int8 values in FP32 arithmetic) with the same calibration cache, and against FP32.
TEST(CudaInt8Engine, InvertedResidualBlocksMatchTheCpuInt8) {
  EI_SKIP_WITHOUT_GPU();
  Int8Fixture f;
  f.inputShape = Shape{2, 16, 14, 14};
  ASSERT_TRUE(f.prepare(invertedResiduals()).ok());
  auto fp32 = f.cpuEngine(/*int8=*/false);
  ASSERT_TRUE(fp32.ok()) << fp32.status().toString();
  auto cpuInt8 = f.cpuEngine(/*int8=*/true);
  ASSERT_TRUE(cpuInt8.ok()) << cpuInt8.status().toString();
  auto gpu = Builder::buildFromFile(f.model, f.config(/*strict=*/true));
  ASSERT_TRUE(gpu.ok()) << gpu.status().toString();
  EXPECT_EQ((*gpu)->info().precision, Precision::kInt8);
  const Tensor want = runOnce(**fp32, f.sample), emulated = runOnce(**cpuInt8, f.sample),
               got = runOnce(**gpu, f.sample);
  ASSERT_EQ(got.numel(), want.numel());
  double norm = 0;
  for (int64_t i = 0; i < got.numel(); ++i) norm += std::fabs(got.getAsDouble(i));
  EXPECT_GT(norm, 0.0) << "the GPU's INT8 output is all zeros";
  const double vsCpu = cosine(got, emulated), vsFp32 = cosine(got, want);
  std::printf("[          ] GPU INT8 vs CPU INT8: cosine %.6f, rel L2 %.4f; vs FP32: cosine %.5f\n",
              vsCpu, test::relL2(got, emulated), vsFp32);
  EXPECT_GT(vsCpu, 0.999);
  EXPECT_GT(vsFp32, 0.99);
}

// BlazeFace-style blocks: a stem Conv + Relu, then r = Relu(r + Conv1x1(DepthwiseConv3x3(r)))
// three times, and a 1x1 head. The depthwise weights are scaled per channel from 1/16 to 4, so
// their outputs' channels span 64x: what activation smoothing evens out.
test::TestModel depthwiseSeparableBlocks() {
  test::TestModel m;
  m.input("x", {2, 16, 14, 14});
  uint32_t seed = 300;
  m.randomInitializer("ws", {32, 16, 3, 3}, seed++, -0.3f, 0.3f);
  m.randomInitializer("bs", {32}, seed++, -0.1f, 0.2f);
  auto& stem = m.node("Conv", {"x", "ws", "bs"}, {"s"}, "stem");
  test::TestModel::attrInts(stem, "pads", {1, 1, 1, 1});
  m.node("Relu", {"s"}, {"r0"}, "relu0");
  std::string r = "r0";
  for (int b = 0; b < 3; ++b) {
    const std::string p = "b" + std::to_string(b) + "_";
    std::vector<float> wd(32 * 9);
    std::mt19937 rng(seed++);
    std::uniform_real_distribution<float> u(-1.f, 1.f);
    for (size_t i = 0; i < wd.size(); ++i)
      wd[i] = u(rng) * std::exp2(-4.f + 6.f * static_cast<float>(i / 9) / 31.f);
    m.initializer(p + "wd", {32, 1, 3, 3}, wd);
    m.randomInitializer(p + "wp", {32, 32, 1, 1}, seed++, -0.2f, 0.2f);
    m.randomInitializer(p + "bp", {32}, seed++, -0.1f, 0.1f);
    auto& dw = m.node("Conv", {r, p + "wd"}, {p + "d"}, p + "depthwise");
    test::TestModel::attr(dw, "group", 32);
    test::TestModel::attrInts(dw, "pads", {1, 1, 1, 1});
    m.node("Conv", {p + "d", p + "wp", p + "bp"}, {p + "q"}, p + "pointwise");
    m.node("Add", {r, p + "q"}, {p + "a"}, p + "add");
    m.node("Relu", {p + "a"}, {p + "r"}, p + "relu");
    r = p + "r";
  }
  m.randomInitializer("wh", {8, 32, 1, 1}, seed++, -0.3f, 0.3f);
  m.node("Conv", {r, "wh"}, {"y"}, "head");
  m.output("y");
  return m;
}

// Activation smoothing on the GPU: a cache with smoothing factors builds a strict INT8 engine
// whose outputs are the CPU's INT8 emulation of the smoothed graph (closer to it than to the
// emulation without smoothing: the GPU builder applied the factors), and close to FP32.
TEST(CudaInt8Engine, SmoothedCacheMatchesTheCpuInt8OfTheSmoothedGraph) {
  EI_SKIP_WITHOUT_GPU();
  Int8Fixture plain, smooth;
  plain.inputShape = smooth.inputShape = Shape{2, 16, 14, 14};
  smooth.smoothing = true;
  ASSERT_TRUE(plain.prepare(depthwiseSeparableBlocks()).ok());
  ASSERT_TRUE(smooth.prepare(depthwiseSeparableBlocks()).ok());
  EXPECT_EQ(plain.smoothed, 0u);
  ASSERT_GT(smooth.smoothed, 0u) << "the depthwise outputs must be smoothed";
  auto fp32 = smooth.cpuEngine(/*int8=*/false);
  auto cpuSmoothed = smooth.cpuEngine(/*int8=*/true);
  auto cpuPlain = plain.cpuEngine(/*int8=*/true);
  ASSERT_TRUE(fp32.ok() && cpuSmoothed.ok() && cpuPlain.ok());
  auto gpu = Builder::buildFromFile(smooth.model, smooth.config(/*strict=*/true));
  ASSERT_TRUE(gpu.ok()) << gpu.status().toString();
  EXPECT_EQ((*gpu)->info().precision, Precision::kInt8);
  const Tensor& x = smooth.sample;
  const Tensor want = runOnce(**fp32, x), emulated = runOnce(**cpuSmoothed, x),
               unsmoothed = runOnce(**cpuPlain, x), got = runOnce(**gpu, x);
  ASSERT_EQ(got.numel(), want.numel());
  const double vsCpu = test::relL2(got, emulated), vsPlain = test::relL2(got, unsmoothed);
  std::printf(
      "[          ] GPU INT8 (smoothed cache) vs CPU INT8 smoothed: rel L2 %.5f, cosine %.6f; vs "
      "CPU INT8 without smoothing: rel L2 %.5f; vs FP32: cosine %.5f (CPU INT8 without "
      "smoothing vs FP32: %.5f)\n",
      vsCpu, cosine(got, emulated), vsPlain, cosine(got, want), cosine(unsmoothed, want));
  EXPECT_GT(cosine(got, emulated), 0.999);
  EXPECT_LT(vsCpu, vsPlain) << "the GPU engine did not apply the cache's smoothing";
  EXPECT_GT(cosine(got, want), 0.99);
}

TEST(CudaInt8Engine, TimedInt8EngineIsAccurate) {
  EI_SKIP_WITHOUT_GPU();
  Int8Fixture f;
  ASSERT_TRUE(f.prepare(int8Cnn()).ok());
  BuilderConfig cpu;
  cpu.backend = Backend::kCpu;
  auto ref = Builder::buildFromFile(f.model, cpu);
  ASSERT_TRUE(ref.ok());
  auto e = Builder::buildFromFile(f.model, f.config(/*strict=*/false));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  const Tensor want = runOnce(**ref, f.sample), got = runOnce(**e, f.sample);
  ASSERT_EQ(got.numel(), want.numel());
  EXPECT_GT(cosine(got, want), 0.995);
}

// A timed INT8 build also builds the all-INT8 engine (strictPrecision's), runs both and keeps
// it if it is 1 % faster, saying so (or says the per-layer choice is that engine); the engine
// it returns is the one it says. Switched off, or in a strict build, nothing is compared.
TEST(CudaInt8Engine, TimedBuildKeepsTheFasterOfPerLayerAndAllInt8) {
  EI_SKIP_WITHOUT_GPU();
  Int8Fixture f;
  f.inputShape = Shape{2, 64, 15, 13};
  ASSERT_TRUE(f.prepare(int8Cnn64()).ok());
  const std::string said = "INT8: every INT8-capable layer in INT8 (";
  const std::string same = "INT8: the per-layer choice is the all-INT8 engine";
  const std::string nowhere = "but no layer runs in INT8";
  std::string line;
  std::unique_ptr<Engine> chosen;
  // The comparison with the all-INT8 engine as it is (its stages in FP16: the next test).
  BuilderConfig timedCfg = f.config(/*strict=*/false);
  timedCfg.int8StageSearch = false;
  {
    test::LogCapture log;
    auto e = Builder::buildFromFile(f.model, timedCfg);
    ASSERT_TRUE(e.ok()) << e.status().toString();
    chosen = std::move(e).value();
    ASSERT_EQ(log.count(Severity::kInfo, said) + log.count(Severity::kInfo, same), 1) << log.all();
    EXPECT_EQ(log.count(Severity::kWarning, "INT8: "), 0) << log.all();
    // "No layer runs in INT8" is said of the engine kept, once, and only if it runs none.
    EXPECT_EQ(log.count(Severity::kWarning, nowhere),
              chosen->info().precision == Precision::kInt8 ? 0 : 1)
        << log.all();
    const std::string all = log.all();
    const size_t at = all.find(log.count(Severity::kInfo, said) ? said : same);
    line = all.substr(at, all.find('\n', at) - at);
  }
  std::printf("[          ] %s\n", line.c_str());
  // The engine returned is the one kept (INT8 layers counted as the message counts them); the
  // all-INT8 one puts the 3 layers of this model on INT8 kernels.
  const auto int8Layers = [](const Engine& e) {
    int n = 0;
    for (const auto& [layer, id] : runtime::cudaEngineTactics(e))
      n += id.rfind("cuda-i8.", 0) == 0 || id.rfind("cublaslt-i8.", 0) == 0;
    return n;
  };
  int strictLayers = 3;
  if (line.rfind(said, 0) == 0) {
    int timedLayers = -1;
    double strictMs = 0, timedMs = 0;
    ASSERT_EQ(std::sscanf(line.c_str() + said.size(),
                          "%d layers on INT8 kernels) runs in %lf ms, the per-layer choice (%d) "
                          "in %lf",
                          &strictLayers, &strictMs, &timedLayers, &timedMs),
              4)
        << line;
    EXPECT_GT(strictMs, 0.0);
    EXPECT_GT(timedMs, 0.0);
    const bool strictKept = line.find("the former is kept") != std::string::npos;
    if (std::fabs(strictMs - 0.99 * timedMs) > 1e-4 * timedMs) {  // clear of the printed digits
      EXPECT_EQ(strictKept, strictMs < 0.99 * timedMs) << line;
    }
    EXPECT_EQ(int8Layers(*chosen), strictKept ? strictLayers : timedLayers);
  } else {
    EXPECT_EQ(int8Layers(*chosen), 3);
  }
  EXPECT_EQ(strictLayers, 3);

  // Per-layer only, and strict builds, compare nothing.
  BuilderConfig perLayer = f.config(/*strict=*/false);
  perLayer.int8WholeEngineChoice = false;
  test::LogCapture log;
  auto timed = Builder::buildFromFile(f.model, perLayer);
  ASSERT_TRUE(timed.ok()) << timed.status().toString();
  auto strict = Builder::buildFromFile(f.model, f.config(/*strict=*/true));
  ASSERT_TRUE(strict.ok()) << strict.status().toString();
  EXPECT_EQ(log.count(Severity::kInfo, said) + log.count(Severity::kInfo, same), 0) << log.all();
  EXPECT_EQ(log.count(Severity::kWarning, nowhere),
            (*timed)->info().precision == Precision::kInt8 ? 0 : 1)
      << log.all();
  EXPECT_EQ(int8Layers(**strict), 3);
  // Either way the engine kept computes what the CPU's INT8 emulation does, closely.
  auto cpuInt8 = f.cpuEngine(/*int8=*/true);
  ASSERT_TRUE(cpuInt8.ok()) << cpuInt8.status().toString();
  EXPECT_GT(cosine(runOnce(*chosen, f.sample), runOnce(**cpuInt8, f.sample)), 0.99);
}

/// Two network stages (graph::networkStages): two residual blocks of 3x3 layers at 32 channels
/// and 28x28, a strided 3x3 layer to 64 channels at 14x14, two blocks there.
test::TestModel twoStages() {
  test::TestModel m(13);
  m.input("x", {1, 32, 28, 28});
  std::string in = "x";
  uint32_t seed = 40;
  const auto conv = [&](const std::string& name, const std::string& x, int cin, int cout,
                        int stride) {
    m.randomInitializer(name + "_w", {cout, cin, 3, 3}, seed++, -0.15f, 0.15f);
    m.randomInitializer(name + "_b", {cout}, seed++, -0.1f, 0.1f);
    auto& c = m.node("Conv", {x, name + "_w", name + "_b"}, {name}, name);
    test::TestModel::attrInts(c, "pads", {1, 1, 1, 1});
    test::TestModel::attrInts(c, "strides", {stride, stride});
    return name;
  };
  const auto block = [&](const std::string& p, int c) {
    m.node("Relu", {conv(p + "a", in, c, c, 1)}, {p + "ar"}, p + "relu_a");
    m.node("Add", {conv(p + "b", p + "ar", c, c, 1), in}, {p + "sum"}, p + "add");
    m.node("Relu", {p + "sum"}, {p + "out"}, p + "relu");
    in = p + "out";
  };
  block("s1b0_", 32);
  block("s1b1_", 32);
  m.node("Relu", {conv("down", in, 32, 64, 2)}, {"down_r"}, "down_relu");
  in = "down_r";
  block("s2b0_", 64);
  block("s2b1_", 64);
  m.node("Identity", {in}, {"y"}, "out");
  m.output("y");
  return m;
}

// A timed INT8 build tries runs of the all-INT8 engine's network stages in FP16
// (int8StageSearch), never the last INT8 layers, before it compares that engine with its
// per-layer choice, and returns the engine the choice names; a strict build, the option off, a
// build without a timing cache and a model of one stage try none, and layers the configuration
// sets a precision or a tactic for are not moved.
TEST(CudaInt8Engine, TimedBuildTriesNetworkStagesInFp16) {
  EI_SKIP_WITHOUT_GPU();
  Int8Fixture f;
  f.inputShape = Shape{1, 32, 28, 28};
  const Status prepared = f.prepare(twoStages());
  ASSERT_TRUE(prepared.ok()) << prepared.toString();
  const std::string tried = "INT8: network stages tried in FP16 in the whole engine";
  std::unique_ptr<Engine> chosen;
  const std::vector<std::string> stageA = {"s1b0_a", "s1b0_b", "s1b1_a", "s1b1_b"};
  const std::vector<std::string> stageB = {"down", "s2b0_a", "s2b0_b", "s2b1_a", "s2b1_b"};
  {
    test::LogCapture log;
    auto e = Builder::buildFromFile(f.model, f.config(/*strict=*/false));
    ASSERT_TRUE(e.ok()) << e.status().toString();
    chosen = std::move(e).value();
    ASSERT_EQ(log.count(Severity::kInfo, tried), 1) << log.all();
    const std::string all = log.all();
    // The engine returned is the one the choice names: with the all-INT8 side kept after a
    // stage moved, that stage runs no INT8 kernel and the other one does.
    const auto int8Id = [](const std::string& id) {
      return id.rfind("cuda-i8.", 0) == 0 || id.rfind("cublaslt-i8.", 0) == 0;
    };
    const auto tactics = runtime::cudaEngineTactics(*chosen);
    for (const auto& [moved, stage, other] :
         {std::make_tuple("but the 4 of the network stages", stageA, stageB),
          std::make_tuple("but the 5 of the network stages", stageB, stageA)})
      if (all.find(moved) != std::string::npos &&
          all.find("the former is kept") != std::string::npos) {
        for (const auto& l : stage) EXPECT_FALSE(int8Id(tactics.at(l))) << l << " " << all;
        for (const auto& l : other) EXPECT_TRUE(int8Id(tactics.at(l))) << l << " " << all;
      }
    const size_t at = all.find(tried);
    const std::string line = all.substr(at, all.find('\n', at) - at);
    std::printf("[          ] %s\n", line.c_str());
    // "...(GPU time): TRIAL; TRIAL; kept: RUNS (S s)": each stage is tried alone (the first
    // with the second would take the last INT8 layers), and no second round follows a kept
    // one (what is left is the last INT8 layers).
    std::vector<std::string> items;
    for (size_t p = line.find("(GPU time): ") + 12, q; p != std::string::npos; p = q) {
      q = line.find("; ", p);
      items.push_back(line.substr(p, q == std::string::npos ? q : q - p));
      if (q != std::string::npos) q += 2;
    }
    ASSERT_EQ(items.size(), 3u) << line;
    EXPECT_EQ(items[0].rfind("'s1b0_a' .. 's1b1_b' (4 layers) in FP16: ", 0), 0u) << line;
    EXPECT_EQ(items[1].rfind("'down' .. 's2b1_b' (5 layers) in FP16: ", 0), 0u) << line;
    EXPECT_EQ(items[2].rfind("kept: ", 0), 0u) << line;
  }
  auto cpuFp32 = f.cpuEngine(/*int8=*/false);
  ASSERT_TRUE(cpuFp32.ok()) << cpuFp32.status().toString();
  EXPECT_GT(cosine(runOnce(*chosen, f.sample), runOnce(**cpuFp32, f.sample)), 0.99);
  {
    // The rebuild reads the search's outcome from the timing cache: the recorded run built and
    // measured once (searched again only if it no longer gains), or none.
    test::LogCapture log;
    auto e = Builder::buildFromFile(f.model, f.config(/*strict=*/false));
    ASSERT_TRUE(e.ok()) << e.status().toString();
    const int noSearch =
        log.count(Severity::kInfo, "(the timing cache's record; no search)") +
        log.count(Severity::kInfo, "none pays for this engine (the timing cache's");
    EXPECT_EQ(noSearch + log.count(Severity::kInfo, ": searching again"), 1) << log.all();
    EXPECT_EQ(log.count(Severity::kInfo, tried), noSearch ? 0 : 1) << log.all();
  }

  const auto triesNothing = [&](const BuilderConfig& c, const char* why) {
    SCOPED_TRACE(why);
    test::LogCapture log;
    auto e = Builder::buildFromFile(f.model, c);
    ASSERT_TRUE(e.ok()) << e.status().toString();
    EXPECT_EQ(log.count(Severity::kInfo, tried), 0) << log.all();
  };
  triesNothing(f.config(/*strict=*/true), "strict");
  BuilderConfig off = f.config(/*strict=*/false);
  off.int8StageSearch = false;
  triesNothing(off, "switched off");
  BuilderConfig set = f.config(/*strict=*/false);
  for (const auto* stage : {&stageA, &stageB})
    for (const auto& l : *stage) set.layerPrecision[l] = Precision::kInt8;
  triesNothing(set, "every layer's precision set");
  // Forced tactics (INT8 ones would be no candidates in FP16): those layers are not moved.
  auto strict = Builder::buildFromFile(f.model, f.config(/*strict=*/true));
  ASSERT_TRUE(strict.ok()) << strict.status().toString();
  BuilderConfig forced = f.config(/*strict=*/false);
  forced.forcedTactics = runtime::cudaEngineTactics(**strict);
  triesNothing(forced, "every layer's tactic forced");
  // Without a timing cache every trial would time the whole network again: no search.
  BuilderConfig noCache = f.config(/*strict=*/false);
  noCache.useTimingCache = false;
  triesNothing(noCache, "no timing cache");
}

/// x[1,64,14,14] -> 1x1 (64 -> 128) + Relu -> 1x1 (128 -> 64) + x -> Relu -> y: unstrided
/// 1x1 layers, which both our INT8 kernels and cuBLASLt's run in a strict build.
test::TestModel int8Pointwise() {
  test::TestModel m(17);
  m.input("x", {1, 64, 14, 14});
  m.randomInitializer("w1", {128, 64, 1, 1}, 11, -0.1f, 0.1f);
  m.randomInitializer("b1", {128}, 12, -0.2f, 0.2f);
  m.randomInitializer("w2", {64, 128, 1, 1}, 13, -0.1f, 0.1f);
  m.node("Conv", {"x", "w1", "b1"}, {"c1"}, "expand");
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  m.node("Conv", {"r1", "w2"}, {"c2"}, "project");
  m.node("Add", {"c2", "x"}, {"a"}, "add");
  m.node("Relu", {"a"}, {"y"}, "relu2");
  m.output("y");
  return m;
}

// Close runner-ups of another tactic family, and of another kernel of the chosen one's family (at
// most one of each a layer), are recorded by the build and, with
// BuilderConfig::tryRunnerUpsInEngine, tried in the whole engine: the engine keeps, per layer, its
// own choice or a runner-up, never anything else; a layer the user forced is left alone; whatever
// is kept computes what the CPU's INT8 emulation does. The outcome goes into the timing cache and
// a rebuild reads it; an engine under runnerUpTrialsMinEngineMs (this one, by default) is not
// tried.
TEST(CudaInt8Engine, CloseRunnerUpsAreTriedInTheWholeEngine) {
  EI_SKIP_WITHOUT_GPU();
  Int8Fixture f;
  f.inputShape = Shape{1, 64, 14, 14};
  ASSERT_TRUE(f.prepare(int8Pointwise()).ok());
  const auto family = [](const std::string& id) { return id.substr(0, id.find('.')); };
  const auto kernel = [](const std::string& id) {
    const size_t dot = id.find('.');
    return id.substr(0, dot == std::string::npos ? dot : id.find('.', dot + 1));
  };
  BuilderConfig off = f.config(/*strict=*/true);
  off.tryRunnerUpsInEngine = false;
  auto e0 = Builder::buildFromFile(f.model, off);
  ASSERT_TRUE(e0.ok()) << e0.status().toString();
  const auto tactics0 = runtime::cudaEngineTactics(**e0);
  const auto alts = runtime::cudaEngineAlternatives(**e0);
  ASSERT_FALSE(alts.empty()) << "both 1x1 layers have cuda-i8 and cublaslt-i8 candidates";
  std::map<std::string, std::set<std::string>> altOf;
  std::set<std::pair<std::string, std::string>> close;
  std::map<std::pair<std::string, bool>, int> kinds;  // (layer, another family): alternatives
  for (const auto& a : alts) {
    SCOPED_TRACE(a.layer);
    EXPECT_EQ(tactics0.at(a.layer), a.chosen);
    EXPECT_NE(kernel(a.alternative), kernel(a.chosen));
    const bool otherFamily = family(a.alternative) != family(a.chosen);
    EXPECT_EQ(++kinds[std::make_pair(a.layer, otherFamily)], 1)
        << "one runner-up of each kind a layer";
    EXPECT_GT(a.chosenMs, 0.0);
    EXPECT_GE(a.alternativeMs, a.chosenMs);
    EXPECT_FALSE(a.signature.empty());
    altOf[a.layer].insert(a.alternative);
    if (a.alternativeMs <= 1.15 * a.chosenMs) close.insert({a.signature, a.alternative});
    std::printf("[          ] %s: %s %.4f ms, runner-up %s %.4f ms\n", a.layer.c_str(),
                a.chosen.c_str(), a.chosenMs, a.alternative.c_str(), a.alternativeMs);
  }

  const std::string said = "runner-up tactics tried in the engine";
  std::unique_ptr<Engine> e1;
  {
    test::LogCapture log;
    BuilderConfig trials = f.config(/*strict=*/true);
    trials.tryRunnerUpsInEngine = true;
    trials.runnerUpTrialsMinEngineMs = 0.0;  // a small engine: tried all the same
    auto e = Builder::buildFromFile(f.model, trials);
    ASSERT_TRUE(e.ok()) << e.status().toString();
    e1 = std::move(e).value();
    EXPECT_EQ(log.count(Severity::kInfo, said), close.empty() ? 0 : 1) << log.all();
    const std::string all = log.all();
    if (const size_t at = all.find(said); at != std::string::npos)
      std::printf("[          ] %s\n", all.substr(at, all.find('\n', at) - at).c_str());
  }
  for (const auto& [layer, id] : runtime::cudaEngineTactics(*e1)) {
    SCOPED_TRACE(layer);
    EXPECT_TRUE(id == tactics0.at(layer) || (altOf.count(layer) && altOf.at(layer).count(id)))
        << id;
  }
  auto cpuInt8 = f.cpuEngine(/*int8=*/true);
  ASSERT_TRUE(cpuInt8.ok()) << cpuInt8.status().toString();
  EXPECT_GT(cosine(runOnce(*e1, f.sample), runOnce(**cpuInt8, f.sample)), 0.99);

  // The outcome is in the timing cache, under the first engine's signature: a rebuild reads it
  // (the recorded choices built and measured once, or "none pays" while the engine runs as
  // fast as it did) instead of trying again. A small engine's times move by more than the 3 %
  // that "none pays" allows, so a rebuild may also try again; it never does both.
  if (!close.empty()) {
    const auto entries = [&] {
      std::map<std::string, builder::TimingEntry> out;
      builder::TimingCache c((*e0)->info().deviceKey);
      EXPECT_TRUE(c.load(f.dir.file("timing.cache")).ok());
      for (const auto& [sig, entry] : c.entries())
        if (sig.rfind("runner-up-trials|", 0) == 0) out.emplace(sig, entry);
      return out;
    }();
    ASSERT_EQ(entries.size(), 1u) << "one record of the trials";
    const auto choices = builder::runnerUpChoices(entries.begin()->second);
    ASSERT_TRUE(choices.has_value());
    for (const auto& [layer, id] : *choices) {
      SCOPED_TRACE(layer);
      EXPECT_NE(id, tactics0.at(layer));
      EXPECT_EQ(runtime::cudaEngineTactics(*e1).at(layer), id) << "the kept engine's tactic";
    }
    test::LogCapture log;
    BuilderConfig again = f.config(/*strict=*/true);
    again.runnerUpTrialsMinEngineMs = 0.0;
    auto e = Builder::buildFromFile(f.model, again);
    ASSERT_TRUE(e.ok()) << e.status().toString();
    const int fromRecord = log.count(Severity::kInfo, "the timing cache's record");
    const int tried = log.count(Severity::kInfo, said);
    EXPECT_EQ(fromRecord + tried, 1) << log.all();
    if (!choices->empty() && fromRecord) {
      for (const auto& [layer, id] : *choices)
        EXPECT_EQ(runtime::cudaEngineTactics(**e).at(layer), id);
    }
    std::printf("[          ] rebuild: %s (%zu layer(s) recorded on runner-ups)\n",
                fromRecord ? "from the record" : "tried again", choices->size());
  }

  // Off, and by default for an engine under 0.1 ms: no trial.
  for (const bool byDefault : {false, true}) {
    test::LogCapture log;
    BuilderConfig c = f.config(/*strict=*/true);
    if (!byDefault) c.tryRunnerUpsInEngine = false;
    auto e = Builder::buildFromFile(f.model, c);
    ASSERT_TRUE(e.ok()) << e.status().toString();
    EXPECT_EQ(log.count(Severity::kInfo, said), 0) << log.all();
    EXPECT_EQ(log.count(Severity::kInfo, "the timing cache's record"), 0) << log.all();
    EXPECT_EQ(runtime::cudaEngineTactics(**e), tactics0);
  }

  // A forced layer keeps the tactic it was given.
  const auto& forcedLayer = alts.front();
  BuilderConfig forced = f.config(/*strict=*/true);
  forced.tryRunnerUpsInEngine = true;
  forced.runnerUpTrialsMinEngineMs = 0.0;
  forced.forcedTactics[forcedLayer.layer] = forcedLayer.chosen;
  auto e2 = Builder::buildFromFile(f.model, forced);
  ASSERT_TRUE(e2.ok()) << e2.status().toString();
  EXPECT_EQ(runtime::cudaEngineTactics(**e2).at(forcedLayer.layer), forcedLayer.chosen);
  for (const auto& a : runtime::cudaEngineAlternatives(**e2))
    EXPECT_NE(a.layer, forcedLayer.layer) << "a forced layer has no runner-up to try";
}

TEST(CudaInt8Engine, AModelOfOneStageTriesNoStage_n) {
  EI_SKIP_WITHOUT_GPU();
  Int8Fixture f;
  f.inputShape = Shape{1, 64, 14, 14};
  ASSERT_TRUE(f.prepare(int8Pointwise()).ok());  // the input is alive to the residual add
  test::LogCapture log;
  auto e = Builder::buildFromFile(f.model, f.config(/*strict=*/false));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ(log.count(Severity::kInfo, "network stages tried in FP16"), 0) << log.all();
}

TEST(CudaInt8Engine, Int8WithoutACalibrationCacheIsAClearError_n) {
  EI_SKIP_WITHOUT_GPU();
  Int8Fixture f;
  const test::TestModel m = int8Cnn();
  f.model = f.dir.write("m.onnx", m.bytes());
  BuilderConfig c = f.config(false);
  c.calibrationCachePath.clear();
  auto e = Builder::buildFromFile(f.model, c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("calibration cache"), std::string::npos)
      << e.status().toString();
  c.calibrationCachePath = f.dir.file("missing.calib");
  e = Builder::buildFromFile(f.model, c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("missing.calib"), std::string::npos) << e.status().toString();
}

TEST(CudaInt8Engine, CacheOfAnotherModelIsRefused_n) {
  EI_SKIP_WITHOUT_GPU();
  Int8Fixture f;
  ASSERT_TRUE(f.prepare(int8Cnn()).ok());
  const test::TestModel other = int8Cnn(/*seed4=*/77);  // other weights: another hash
  const std::string path = f.dir.write("other.onnx", other.bytes());
  auto e = Builder::buildFromFile(path, f.config(false));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("another model"), std::string::npos) << e.status().toString();
}

/// The tactic the engine's plan gives layer `name` ("" when there is none).
std::string tacticOf(const std::string& planText, const std::string& name) {
  const size_t at = planText.find("\"name\":\"" + name + "\"");
  if (at == std::string::npos) return "";
  const std::string key = "\"tactic\":\"";
  const size_t t = planText.find(key, at);
  if (t == std::string::npos) return "";
  const size_t end = planText.find('"', t + key.size());
  return planText.substr(t + key.size(), end - t - key.size());
}

TEST(CudaInt8Engine, OnlyInt8ConvolutionsReadInt8Outputs) {
  EI_SKIP_WITHOUT_GPU();
  // x -> conv1 + ReLU -> conv2 -> y (the graph output) and -> MaxPool -> p: conv1's output is
  // read by an INT8 convolution and by a float MaxPool, conv2's is the graph output. Neither
  // is requantized: both INT8 layers write fp16 (the MaxPool's input and y as the
  // convolution computed them, not rounded to the int8 grid).
  test::TestModel m(13);
  m.input("x", {2, 8, 20, 18});
  m.randomInitializer("w1", {16, 8, 3, 3}, 1, -0.3f, 0.3f);
  m.randomInitializer("w2", {16, 16, 3, 3}, 2, -0.2f, 0.2f);
  auto& c1 = m.node("Conv", {"x", "w1"}, {"c1"}, "conv1");
  test::TestModel::attrInts(c1, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  auto& c2 = m.node("Conv", {"r1", "w2"}, {"y"}, "conv2");
  test::TestModel::attrInts(c2, "pads", {1, 1, 1, 1});
  auto& mp = m.node("MaxPool", {"r1"}, {"p"}, "pool");
  test::TestModel::attrInts(mp, "kernel_shape", {2, 2});
  test::TestModel::attrInts(mp, "strides", {2, 2});
  m.output("y");
  m.output("p");
  Int8Fixture f;
  ASSERT_TRUE(f.prepare(m).ok());
  auto e = Builder::buildFromFile(f.model, f.config(/*strict=*/true));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  auto bytes = (*e)->serialize();
  ASSERT_TRUE(bytes.ok());
  const std::string text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  for (const char* layer : {"conv1", "conv2"}) {
    const std::string t = tacticOf(text, layer);
    EXPECT_EQ(t.rfind("cuda-i8.", 0), 0u) << layer << ": " << t;
    EXPECT_NE(t.find(".f16."), std::string::npos) << layer << " writes int8: " << t;
  }
  // Still INT8 through and through where it can be: conv2 reads r1 quantized (a reformat).
  EXPECT_NE(text.find("\"dtype\":\"int8\""), std::string::npos);
  // And closer to FP32 than any requantized output could be.
  BuilderConfig cpu;
  cpu.backend = Backend::kCpu;
  auto ref = Builder::buildFromFile(f.model, cpu);
  ASSERT_TRUE(ref.ok()) << ref.status().toString();
  const Tensor want = runOnce(**ref, f.sample), got = runOnce(**e, f.sample);
  EXPECT_GT(cosine(got, want), 0.995);
}

/// How often `what` occurs in `text` (a value's stored versions in a serialized plan).
size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

/// The GPU engine `e` of fixture `f` (output y) against the CPU's INT8 emulation (cosine above
/// 0.999) and FP32 (above minFp32) on f.sample, printed with `label`; and the engine saved and
/// loaded again finds the same tactics and gives the same bits.
void expectNearTheCpuAndReloadable(Engine& e, const Int8Fixture& f, const std::string& label,
                                   double minFp32) {
  auto cpuInt8 = f.cpuEngine(/*int8=*/true);
  ASSERT_TRUE(cpuInt8.ok()) << cpuInt8.status().toString();
  auto fp32 = f.cpuEngine(/*int8=*/false);
  ASSERT_TRUE(fp32.ok()) << fp32.status().toString();
  const Tensor got = runOnce(e, f.sample);
  const double vsInt8 = cosine(got, runOnce(**cpuInt8, f.sample));
  const double vsFp32 = cosine(got, runOnce(**fp32, f.sample));
  std::printf("[          ] %s: cosine %.6f against the CPU INT8, %.6f against FP32\n",
              label.c_str(), vsInt8, vsFp32);
  EXPECT_GT(vsInt8, 0.999);
  EXPECT_GT(vsFp32, minFp32);
  std::map<std::string, std::string> tactics;
  for (const auto& [layer, id] : runtime::cudaEngineTactics(e)) tactics[layer] = id;
  auto bytes = e.serialize();
  ASSERT_TRUE(bytes.ok());
  auto loaded = Engine::deserialize(bytes->data(), bytes->size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  for (const auto& [layer, id] : runtime::cudaEngineTactics(**loaded))
    EXPECT_EQ(id, tactics[layer]) << layer;
  const Tensor again = runOnce(**loaded, f.sample);
  ASSERT_EQ(again.numel(), got.numel());
  EXPECT_EQ(std::memcmp(again.raw(), got.raw(), got.bytes()), 0);
}

// ResNet's entry in a strict INT8 build: the 3-channel stem convolution (cuda-stem, FP16
// arithmetic) writes int8 for the MaxPool, which pools the int8 values (cuda.pool.i8) for the
// INT8 convolutions after it: no fp16 tensor and no quantize reformat between the stem and the
// first INT8 convolution. The engine stays close to the CPU's INT8 emulation and to FP32, and
// a saved and loaded engine finds the same tactics and gives the same bits.
TEST(CudaInt8Engine, StemAndMaxPoolHandInt8ToTheConvolutions) {
  EI_SKIP_WITHOUT_GPU();
  test::TestModel m(13);
  m.input("x", {2, 3, 40, 36});
  m.randomInitializer("w1", {32, 3, 7, 7}, 1, -0.2f, 0.2f);
  m.randomInitializer("b1", {32}, 2, -0.2f, 0.2f);
  m.randomInitializer("w2", {64, 32, 1, 1}, 3, -0.2f, 0.2f);
  m.randomInitializer("w3", {32, 32, 3, 3}, 4, -0.1f, 0.1f);
  auto& c1 = m.node("Conv", {"x", "w1", "b1"}, {"c1"}, "stem");
  test::TestModel::attrInts(c1, "pads", {3, 3, 3, 3});
  test::TestModel::attrInts(c1, "strides", {2, 2});
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  auto& mp = m.node("MaxPool", {"r1"}, {"p"}, "pool");
  test::TestModel::attrInts(mp, "kernel_shape", {3, 3});
  test::TestModel::attrInts(mp, "strides", {2, 2});
  test::TestModel::attrInts(mp, "pads", {1, 1, 1, 1});
  m.node("Conv", {"p", "w2"}, {"c2"}, "conv2");  // two INT8 readers of the pool
  auto& c3 = m.node("Conv", {"p", "w3"}, {"c3"}, "conv3");
  test::TestModel::attrInts(c3, "pads", {1, 1, 1, 1});
  test::TestModel::attr(m.node("Concat", {"c2", "c3"}, {"y"}, "cat"), "axis", 1);
  m.output("y");
  Int8Fixture f;
  f.inputShape = Shape{2, 3, 40, 36};
  ASSERT_TRUE(f.prepare(m).ok());
  auto e = Builder::buildFromFile(f.model, f.config(/*strict=*/true));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  std::map<std::string, std::string> tactics;
  for (const auto& [layer, id] : runtime::cudaEngineTactics(**e)) tactics[layer] = id;
  const std::string stem = tactics["stem"], pool = tactics["pool"];
  ASSERT_GE(stem.size(), 3u) << "no layer named stem";
  EXPECT_EQ(stem.rfind("cuda-stem.", 0), 0u) << stem;
  EXPECT_EQ(stem.substr(stem.size() - 3), ".i8") << "the stem writes int8: " << stem;
  EXPECT_EQ(pool, "cuda.pool.i8.nhwc");
  for (const char* layer : {"conv2", "conv3"}) {  // INT8 tactics (reading p as int8)
    const std::string& t = tactics[layer];
    EXPECT_TRUE(t.rfind("cuda-i8.", 0) == 0 || t.rfind("cublaslt-i8.", 0) == 0)
        << layer << ": " << t;
  }
  auto bytes = (*e)->serialize();
  ASSERT_TRUE(bytes.ok());
  const std::string text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  // Reformats: only the graph input's (float32 NCHW -> the stem's input format, if any) and the
  // outputs' (int8 -> float32 for y); none of r1 or p.
  for (const char* value : {"\"value\":\"r1\"", "\"value\":\"p\""})
    EXPECT_EQ(occurrences(text, value), 1u)
        << value << ": one stored version (int8), no reformatted copy";
  expectNearTheCpuAndReloadable(**e, f, "stem + int8 MaxPool engine", 0.995);
}

// A classifier's end in a strict INT8 build: the GlobalAveragePool writes int8 (quantized with
// the scale calibrated for the Gemm's input, which the Flatten between them passes back) and
// the Gemm reads it through the Flatten as it is: no quantize reformat between the pool and the
// classifier. Kept in FP16, the Gemm gets float features and the pool writes no int8.
TEST(CudaInt8Engine, GlobalPoolHandsInt8ToTheClassifier) {
  EI_SKIP_WITHOUT_GPU();
  test::TestModel m(13);
  m.input("x", {2, 8, 20, 18});
  m.randomInitializer("w1", {32, 8, 3, 3}, 1, -0.2f, 0.2f);
  m.randomInitializer("b1", {32}, 2, -0.2f, 0.2f);
  m.randomInitializer("wf", {10, 32}, 3, -0.3f, 0.3f);
  m.randomInitializer("bf", {10}, 4, -0.1f, 0.1f);
  auto& c1 = m.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  test::TestModel::attrInts(c1, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  m.node("GlobalAveragePool", {"r1"}, {"p"}, "pool");
  test::TestModel::attr(m.node("Flatten", {"p"}, {"f"}, "flatten"), "axis", 1);
  test::TestModel::attr(m.node("Gemm", {"f", "wf", "bf"}, {"y"}, "fc"), "transB", 1);
  m.output("y");
  Int8Fixture f;
  ASSERT_TRUE(f.prepare(m).ok());
  auto e = Builder::buildFromFile(f.model, f.config(/*strict=*/true));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  std::map<std::string, std::string> tactics;
  for (const auto& [layer, id] : runtime::cudaEngineTactics(**e)) tactics[layer] = id;
  const std::string pool = tactics["pool"], fc = tactics["fc"];
  EXPECT_EQ(pool.rfind("cuda.pool.", 0), 0u) << pool;
  ASSERT_GE(pool.size(), 3u);
  EXPECT_EQ(pool.substr(pool.size() - 3), ".i8") << "the pool writes int8: " << pool;
  EXPECT_TRUE(fc.rfind("cuda-i8.", 0) == 0 || fc.rfind("cublaslt-i8.", 0) == 0) << fc;
  auto bytes = (*e)->serialize();
  ASSERT_TRUE(bytes.ok());
  const std::string text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  EXPECT_EQ(occurrences(text, "\"value\":\"p\""), 1u) << "p: one stored version (int8)";
  EXPECT_EQ(occurrences(text, "\"value\":\"f\""), 1u) << "f: the view of p, not a reformat";
  expectNearTheCpuAndReloadable(**e, f, "int8 GlobalAveragePool -> Gemm engine", 0.99);

  // The classifier kept in FP16: nothing reads p as int8, so the pool writes float.
  BuilderConfig keep = f.config(/*strict=*/true);
  keep.layerPrecision["fc"] = Precision::kFp16;
  auto e16 = Builder::buildFromFile(f.model, keep);
  ASSERT_TRUE(e16.ok()) << e16.status().toString();
  for (const auto& [layer, id] : runtime::cudaEngineTactics(**e16)) {
    if (layer == "pool") {
      EXPECT_EQ(id.find(".i8"), std::string::npos) << id;
    } else if (layer == "fc") {
      EXPECT_EQ(id.find("i8"), std::string::npos) << id;
    }
  }
  auto fp32 = f.cpuEngine(/*int8=*/false);
  ASSERT_TRUE(fp32.ok()) << fp32.status().toString();
  EXPECT_GT(cosine(runOnce(**e16, f.sample), runOnce(**fp32, f.sample)), 0.99);
}

/// A 1x1 Conv `name` (k x c weights and bias drawn from `seed`) reading `in`.
void addConv1x1(test::TestModel& m, const std::string& name, const std::string& in, int64_t k,
                int64_t c, int64_t stride, uint32_t seed) {
  m.randomInitializer(name + "_w", {k, c, 1, 1}, seed, -0.15f, 0.15f);
  m.randomInitializer(name + "_b", {k}, seed + 1, -0.2f, 0.2f);
  auto& n = m.node("Conv", {in, name + "_w", name + "_b"}, {name}, name);
  test::TestModel::attrInts(n, "strides", {stride, stride});
}

/// The engines of `fused` (layers run as one kernel) and `apart` (the same kernels one layer at
/// a time): the same output bytes, the fused engine's again after a save and a load, and close
/// to the CPU's INT8 emulation. The fused engine's file as text, and its output, in `text` and
/// `out`.
void expectFusedEqualsApart(const Int8Fixture& f, const BuilderConfig& fused,
                            const BuilderConfig& apart, const char* what, std::string* text,
                            Tensor* out) {
  auto a = Builder::buildFromFile(f.model, apart);
  ASSERT_TRUE(a.ok()) << a.status().toString();
  auto e = Builder::buildFromFile(f.model, fused);
  ASSERT_TRUE(e.ok()) << e.status().toString();
  auto bytes = (*e)->serialize();
  ASSERT_TRUE(bytes.ok());
  *text = std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  const Tensor want = runOnce(**a, f.sample);
  *out = runOnce(**e, f.sample);
  ASSERT_GT(out->numel(), 0);
  ASSERT_EQ(out->numel(), want.numel());
  EXPECT_EQ(std::memcmp(out->raw(), want.raw(), out->bytes()), 0)
      << "the " << what << " engine differs from the layers apart";
  auto loaded = Engine::deserialize(bytes->data(), bytes->size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  const Tensor again = runOnce(**loaded, f.sample);
  EXPECT_EQ(std::memcmp(again.raw(), out->raw(), out->bytes()), 0) << "after a save and load";
  auto cpuInt8 = f.cpuEngine(/*int8=*/true);
  ASSERT_TRUE(cpuInt8.ok()) << cpuInt8.status().toString();
  const double cos = cosine(*out, runOnce(**cpuInt8, f.sample));
  std::printf("[          ] %s INT8 engine vs the CPU's INT8 emulation: cosine %.5f\n", what, cos);
  EXPECT_GT(cos, 0.999);
}

/// Two bottleneck blocks of 1x1 layers with downsample branches, as ResNet's first blocks of a
/// stage: 64 -> 32 -> 128 beside a 1x1 64 -> 128 (stride 1), then 128 -> 32 (stride 2) -> 128
/// beside a 1x1 stride-2 128 -> 128; a 1x1 head reads the second block (its output then stays
/// int8 between INT8 layers).
test::TestModel downsampleBlocks() {
  test::TestModel m(17);
  m.input("x", {2, 64, 14, 14});
  const auto conv = [&](const std::string& name, const std::string& in, int64_t k, int64_t c,
                        int64_t stride,
                        uint32_t seed) { addConv1x1(m, name, in, k, c, stride, seed); };
  conv("c1", "x", 32, 64, 1, 1);
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  conv("c3", "r1", 128, 32, 1, 3);
  conv("ds", "x", 128, 64, 1, 5);
  m.node("Add", {"c3", "ds"}, {"a1"}, "add1");
  m.node("Relu", {"a1"}, {"r2"}, "relu2");
  conv("c4", "r2", 32, 128, 2, 7);
  m.node("Relu", {"c4"}, {"r4"}, "relu4");
  conv("c6", "r4", 128, 32, 1, 9);
  conv("ds2", "r2", 128, 128, 2, 11);
  m.node("Add", {"c6", "ds2"}, {"a2"}, "add2");
  m.node("Relu", {"a2"}, {"r5"}, "relu5");
  conv("head", "r5", 32, 128, 1, 13);
  m.node("Relu", {"head"}, {"y"}, "relu6");
  m.output("y");
  return m;
}

// The downsample branches folded into their readers (the ".fold" tactics, forced here so that
// the test does not depend on which the timing prefers): the plan holds each downsample as a
// view step, the outputs equal bit for bit those of the engine that runs the same pointwise
// kernel for the downsample and then for its reader, a saved and loaded engine gives them again,
// and the engine stays close to the CPU's INT8 emulation.
TEST(CudaInt8Engine, DownsampleFoldedIntoItsReaderEqualsTheTwoLayers) {
  Int8Fixture f;
  f.inputShape = Shape{2, 64, 14, 14};
  const Status prepared = f.prepare(downsampleBlocks());
  ASSERT_TRUE(prepared.ok()) << prepared.toString();
  EI_SKIP_WITHOUT_GPU();
  BuilderConfig folded = f.config(/*strict=*/true);
  BuilderConfig apart = folded;
  for (const auto& [reader, producer] :
       {std::pair<std::string, std::string>{"c3", "ds"}, {"c6", "ds2"}}) {
    folded.forcedTactics[reader] = "cuda-i8.pw128x64.i8.fold.f";
    apart.forcedTactics[reader] = "cuda-i8.pw128x64.i8.i8.f";
    apart.forcedTactics[producer] = "cuda-i8.pw128x64.i8.-.f";
  }
  std::string text;
  Tensor got;
  expectFusedEqualsApart(f, folded, apart, "folded", &text, &got);
  if (HasFatalFailure()) return;
  EXPECT_EQ(tacticOf(text, "c3"), "cuda-i8.pw128x64.i8.fold.f");
  EXPECT_EQ(tacticOf(text, "c6"), "cuda-i8.pw128x64.i8.fold.f");
  for (const char* ds : {"ds", "ds2"}) {  // view steps: no tactic, and nothing else reads them
    const size_t at = text.find(std::string("\"name\":\"") + ds + "\"");
    ASSERT_NE(at, std::string::npos) << ds;
    const size_t stepStart = text.rfind('{', at);
    EXPECT_NE(text.find("\"kind\":\"view\"", stepStart), std::string::npos);
    EXPECT_LT(text.find("\"kind\":\"view\"", stepStart), at) << ds << " is a view step";
  }
  // Folding a layer whose residual's producer has another reader is a build error naming it.
  BuilderConfig bad = f.config(/*strict=*/true);
  bad.forcedTactics["head"] = "cuda-i8.pw128x64.i8.fold.f";
  auto b = Builder::buildFromFile(f.model, bad);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("cannot be folded"), std::string::npos)
      << b.status().toString();
}

/// 1x1 layers as at ResNet's block boundaries: an expansion e1 (64 -> 128, Relu) read by c2
/// (128 -> 128, Relu), then e2 (128 -> 128) with e1's output as residual (Add, Relu) read by a
/// reduction c4 (128 -> 32, Relu), and a 1x1 head (32 -> 64, Relu: y).
test::TestModel chainBlocks() {
  test::TestModel m(17);
  m.input("x", {2, 64, 14, 14});
  const auto conv = [&](const std::string& name, const std::string& in, int64_t k, int64_t c,
                        uint32_t seed) { addConv1x1(m, name, in, k, c, 1, seed); };
  conv("e1", "x", 128, 64, 1);
  m.node("Relu", {"e1"}, {"r1"}, "relu1");
  conv("c2", "r1", 128, 128, 3);
  m.node("Relu", {"c2"}, {"r2"}, "relu2");
  conv("e2", "r2", 128, 128, 5);
  m.node("Add", {"e2", "r1"}, {"a2"}, "add2");
  m.node("Relu", {"a2"}, {"r3"}, "relu3");
  conv("c4", "r3", 32, 128, 7);
  m.node("Relu", {"c4"}, {"r4"}, "relu4");
  conv("head", "r4", 64, 32, 9);
  m.node("Relu", {"head"}, {"y"}, "relu5");
  m.output("y");
  return m;
}

// The reductions chained into the expansions whose outputs they read (the ".chain" tactics,
// forced here so that the test does not depend on which the timing prefers): the plan holds no
// step of the chained layers, the outputs equal bit for bit those of the engine that runs the
// same pointwise kernels one layer at a time, a saved and loaded engine gives them again, and
// the engine stays close to the CPU's INT8 emulation. Then the timed build: whatever it
// chooses, its output matches; and forcing a chain where the reader cannot be chained is a
// build error naming both layers; a chain forced for the producer takes the reader even where
// the reader's own tactic is forced too (as the whole-engine trials force every other layer's).
TEST(CudaInt8Engine, ChainedLayersEqualTheLayersApart) {
  Int8Fixture f;
  f.inputShape = Shape{2, 64, 14, 14};
  const Status prepared = f.prepare(chainBlocks());
  ASSERT_TRUE(prepared.ok()) << prepared.toString();
  EI_SKIP_WITHOUT_GPU();
  BuilderConfig chained = f.config(/*strict=*/true);
  BuilderConfig apart = chained;
  chained.forcedTactics["e1"] = "cuda-i8.pw128x128.i8.-.f.chain";
  chained.forcedTactics["e2"] = "cuda-i8.pw128x128.i8.i8.f.chain";
  chained.forcedTactics["head"] = "cuda-i8.pw128x64.f16.-.f";  // (the graph output: fp16)
  apart.forcedTactics["e1"] = "cuda-i8.pw128x128.i8.-.f";
  apart.forcedTactics["e2"] = "cuda-i8.pw128x128.i8.i8.f";
  for (const char* layer : {"c2", "c4"}) apart.forcedTactics[layer] = "cuda-i8.pw128x64.i8.-.f";
  apart.forcedTactics["head"] = chained.forcedTactics["head"];
  std::string text;
  Tensor got;
  expectFusedEqualsApart(f, chained, apart, "chained", &text, &got);
  if (HasFatalFailure()) return;
  EXPECT_EQ(tacticOf(text, "e1"), "cuda-i8.pw128x128.i8.-.f.chain");
  EXPECT_EQ(tacticOf(text, "e2"), "cuda-i8.pw128x128.i8.i8.f.chain");
  EXPECT_EQ(tacticOf(text, "c2"), "") << "a chained layer has no step";
  EXPECT_EQ(tacticOf(text, "c4"), "") << "a chained layer has no step";
  // The timed build, chains where they are faster: the same output within rounding noise (its
  // other kernels' epilogues may round half-step ties the other way).
  auto timed = Builder::buildFromFile(f.model, f.config(/*strict=*/true));
  ASSERT_TRUE(timed.ok()) << timed.status().toString();
  EXPECT_GT(cosine(runOnce(**timed, f.sample), got), 0.9999);
  // The reader's forced tactic gives way to the chain forced for its producer.
  BuilderConfig both = chained;
  both.forcedTactics["c2"] = "cuda-i8.pw128x64.i8.-.f";
  auto e2 = Builder::buildFromFile(f.model, both);
  ASSERT_TRUE(e2.ok()) << e2.status().toString();
  auto bytes2 = (*e2)->serialize();
  ASSERT_TRUE(bytes2.ok());
  const std::string text2(reinterpret_cast<const char*>(bytes2->data()), bytes2->size());
  EXPECT_EQ(tacticOf(text2, "e1"), "cuda-i8.pw128x128.i8.-.f.chain");
  EXPECT_EQ(tacticOf(text2, "c2"), "") << "c2 chained despite its own forced tactic";
  EXPECT_EQ(std::memcmp(runOnce(**e2, f.sample).raw(), got.raw(), got.bytes()), 0);
  // A chain forced where the reader cannot run in it (e2 has a residual) is a build error
  // naming both layers.
  BuilderConfig bad = f.config(/*strict=*/true);
  bad.forcedTactics["c2"] = "cuda-i8.pw128x128.i8.-.f.chain";
  auto b = Builder::buildFromFile(f.model, bad);
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("no layer reading its output can be chained"),
            std::string::npos)
      << b.status().toString();
  EXPECT_NE(b.status().message().find("'c2'"), std::string::npos) << b.status().toString();
  EXPECT_NE(b.status().message().find("'e2': not an INT8 convolution without a residual"),
            std::string::npos)
      << b.status().toString();
}

// The L2 hints of the engine's launches (builder::LaunchArgs::lastReads: a step that reads an
// activation for the last time may read it evict-first): on the downsample blocks, with every
// layer on the pointwise kernels (which take the hint), the bits mark the last reader of each
// input and no earlier one, none with EDGEINFER_DISABLE_L2_HINTS=1, and the outputs are the same
// bits with and without.
TEST(CudaInt8Engine, LastReadsMarkTheLastReadersAndChangeNoResult) {
  Int8Fixture f;
  f.inputShape = Shape{2, 64, 14, 14};
  const Status prepared = f.prepare(downsampleBlocks());
  ASSERT_TRUE(prepared.ok()) << prepared.toString();
  EI_SKIP_WITHOUT_GPU();
  BuilderConfig cfg = f.config(/*strict=*/true);
  for (const char* layer : {"c1", "ds", "c4", "ds2"})
    cfg.forcedTactics[layer] = "cuda-i8.pw128x64.i8.-.f";
  for (const char* layer : {"c3", "c6"}) cfg.forcedTactics[layer] = "cuda-i8.pw128x64.i8.i8.f";
  cfg.forcedTactics["head"] = "cuda-i8.pw128x64.f16.-.f";  // (the graph output: fp16)
  std::map<std::string, size_t> stepOf;                    // layer -> its step
  const auto bitsOf = [&](const Engine& e) {
    std::map<std::string, uint32_t> bits;  // layer -> its step's lastReads
    const auto* ce = dynamic_cast<const runtime::cuda::CudaEngine*>(&e);
    EXPECT_NE(ce, nullptr) << "not a CUDA engine";
    if (!ce) return bits;
    const auto& plan = ce->plan();
    for (size_t i = 0; i < plan.steps.size(); ++i)
      if (plan.steps[i].kind == runtime::cuda::StepKind::kTactic && plan.steps[i].node >= 0) {
        const std::string& name = ce->graph().nodes[static_cast<size_t>(plan.steps[i].node)].name;
        bits[name] = ce->lastReads(i);
        stepOf[name] = i;
      }
    return bits;
  };
  auto hinted = Builder::buildFromFile(f.model, cfg);
  ASSERT_TRUE(hinted.ok()) << hinted.status().toString();
  std::map<std::string, uint32_t> bits = bitsOf(**hinted);
  ASSERT_EQ(bits.size(), 7u) << "a step for each of the seven convolutions";
  // x: read by c1 and ds, r2 by c4 and ds2 (the later of each pair reads it last; the plan
  // orders them); r1 and ds's output by c3 (input 0 and the residual, input 3), r4 and ds2's by
  // c6; r5 by head. Nothing reads the graph output y.
  for (const auto& [a, b] : {std::pair<std::string, std::string>{"c1", "ds"}, {"c4", "ds2"}}) {
    const bool aLast = stepOf[a] > stepOf[b];
    EXPECT_EQ(bits[a], aLast ? 1u : 0u) << a;
    EXPECT_EQ(bits[b], aLast ? 0u : 1u) << b;
  }
  EXPECT_EQ(bits["c3"], 1u | 8u);
  EXPECT_EQ(bits["c6"], 1u | 8u);
  EXPECT_EQ(bits["head"], 1u);
  const Tensor want = runOnce(**hinted, f.sample);
  ASSERT_GT(want.numel(), 0);
  setenv("EDGEINFER_DISABLE_L2_HINTS", "1", 1);
  auto plain = Builder::buildFromFile(f.model, cfg);
  unsetenv("EDGEINFER_DISABLE_L2_HINTS");
  ASSERT_TRUE(plain.ok()) << plain.status().toString();
  for (const auto& [layer, b] : bitsOf(**plain)) EXPECT_EQ(b, 0u) << layer;
  const Tensor got = runOnce(**plain, f.sample);
  ASSERT_EQ(got.bytes(), want.bytes());
  EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.bytes()), 0) << "the hints changed a result";
}

TEST(CudaInt8Engine, DamagedPlanScaleIsRefused_n) {
  // Anywhere: a plan whose int8 tensor lost its scale, or has a bad one.
  graph::Graph g;
  g.value("x").dtype = DataType::kFloat32;
  g.value("x").shape = Shape{1, 4};
  g.value("x").shapeKnown = true;
  g.inputs = {"x"};
  g.outputs = {"x"};
  const std::string base =
      R"({"tensors":[{"value":"x","dtype":"int8","layout":"linear"SCALE}],"steps":[],)"
      R"("inputs":{"x":0},"outputs":{"x":0}})";
  const auto with = [&](const std::string& scale) {
    std::string s = base;
    s.replace(s.find("SCALE"), 5, scale);
    return runtime::cuda::planFromJson(s, g);
  };
  EXPECT_TRUE(with(R"(,"scale":0.5)").ok());
  for (const char* bad : {"", R"(,"scale":0)", R"(,"scale":-1)", R"(,"scale":"x")"}) {
    auto p = with(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), ErrorCode::kCorruptFile);
  }
}

}  // namespace
}  // namespace edgeinfer

#else

TEST(CudaInt8Conv, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif
