// The cuda-i8.gemv provider (kernels/cuda/int8_gemv.h): INT8 products of few rows. Every
// candidate (input int8, fp16 or float32; output float32, fp16 or int8) against the host's
// integer arithmetic and epilogue (int8_test_util.h's GemmI8Case: the expressions of
// cublaslt-i8's "i32" mode), in the one-row form and the row-tile forms: bit-exact, since the
// integer sums are exact and the epilogue is evaluated one rounding at a time in the same order; a
// float input is quantized as the quantize reformat does (its fp16 copy first, for an fp16 input).
// Then a strict INT8 engine whose classifier (global pool -> Gemm, batch 1) is forced onto it,
// against the CPU's INT8 emulation, and reloaded. Which layers are offered and the launch's
// refusals (_n) need no GPU.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/half.h"
#include "int8_test_util.h"
#include "kernels/cuda/int8_gemv.h"
#include "kernels/ref/activation.h"
#include "quant/qdq.h"
#include "tactic_test_util.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using cuda::GemvType;
using cuda::Int8GemvProvider;
using test::randomTensor;

/// A classifier at batch 1: FusedGemm, transB, bias, Relu, 1 x 512 -> 100.
test::GemmI8Case gemvCase() {
  test::GemmI8Case c;
  c.a = Shape{1, 512};
  c.N = 100;
  c.sx = 0.021f;
  c.sy = 0.047f;
  return c;
}

/// Every candidate of `c` against the reference: bit for bit. Returns how many ran.
int checkAll(test::GemmI8Case& c) {
  c.build();
  Int8GemvProvider prov;
  auto cands = prov.candidates(c.layer, Precision::kInt8);
  // 3 inputs x (f32, f16, i8) outputs, for each form: one row a block (up to 16 rows), row
  // tiles with 1 and with 4 channels a warp.
  const int64_t M = c.a.numel() / c.K();
  EXPECT_EQ(cands.size(), M <= cuda::kInt8GemvMaxRows ? 27u : 18u) << prov.lastReason();
  int ran = 0;
  for (auto& t : cands) {
    SCOPED_TRACE(t->id());
    const Status init = t->initialize(c.layer);
    EXPECT_TRUE(init.ok()) << init.toString();
    if (!init.ok()) continue;
    auto out = test::runTactic(*t, c.layer, c.inputs());
    EXPECT_TRUE(out.ok()) << out.status().toString();
    if (!out.ok()) continue;
    const Tensor want = c.reference(t->inputFormat(0).dtype, t->outputFormat(0).dtype);
    const Tensor& got = (*out)[0];
    int64_t differ = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      const float a = got.data<float>()[i], b = want.data<float>()[i];
      if (a != b || std::isnan(a)) ++differ;
    }
    EXPECT_EQ(differ, 0) << "of " << want.numel();
    std::printf("[          ] %s: %lld of %lld differ\n", t->id().c_str(),
                static_cast<long long>(differ), static_cast<long long>(want.numel()));
    ++ran;
  }
  return ran;
}

TEST(CudaInt8Gemv, ClassifierAtBatch1EqualsTheIntegerReference) {
  EI_SKIP_WITHOUT_GPU();
  test::GemmI8Case c = gemvCase();
  EXPECT_EQ(checkAll(c), 27);
}

TEST(CudaInt8Gemv, SixteenRowsOddChannelsGemmAlphaBetaNoActivation) {
  EI_SKIP_WITHOUT_GPU();
  test::GemmI8Case c = gemvCase();
  c.op = "Gemm";
  c.a = Shape{16, 48};
  c.N = 37;  // a block's last warps idle
  c.transB = false;
  c.alpha = 0.75f;
  c.beta = -1.5f;
  EXPECT_EQ(checkAll(c), 27);
}

TEST(CudaInt8Gemv, ClassifierAtBatch64OnRowTiles) {
  EI_SKIP_WITHOUT_GPU();
  // ResNet-50's classifier at batch 64: 4 tiles of 16 rows, 1000 channels (the last block of
  // 32 channels a quarter full with 4 channels a warp).
  test::GemmI8Case c = gemvCase();
  c.a = Shape{64, 2048};
  c.N = 1000;
  EXPECT_EQ(checkAll(c), 18);
}

TEST(CudaInt8Gemv, RowTilesShortLastTileAndWideRows) {
  EI_SKIP_WITHOUT_GPU();
  {
    // K 4096: 11 rows a block (44 KB), so 37 rows are tiles of 11, 11, 11 and 4; 37 channels:
    // the last warp's group of 4 holds one.
    test::GemmI8Case c = gemvCase();
    c.op = "Gemm";
    c.a = Shape{37, 4096};
    c.N = 37;
    c.alpha = 0.5f;
    c.beta = 2.f;
    EXPECT_EQ(cuda::int8GemvRowTile(37, 4096), 11);
    EXPECT_EQ(checkAll(c), 18);
  }
  {
    // The widest rows (16384): 2 rows a block; 5 rows (tiles of 2, 2, 1), 9 channels, MatMul
    // without a bias.
    test::GemmI8Case c = gemvCase();
    c.op = "FusedMatMul";
    c.a = Shape{5, cuda::kInt8GemvMaxK};
    c.N = 9;
    c.bias = false;
    EXPECT_EQ(cuda::int8GemvRowTile(5, cuda::kInt8GemvMaxK), 2);
    EXPECT_EQ(checkAll(c), 27);
  }
}

TEST(CudaInt8Gemv, MatMulFoldsLeadingDimsWithoutBias) {
  EI_SKIP_WITHOUT_GPU();
  test::GemmI8Case c = gemvCase();
  c.op = "FusedMatMul";
  c.a = Shape{1, 3, 1024};
  c.N = 24;
  c.bias = false;  // (Relu: an exp-based activation may differ by an ulp from the host's)
  EXPECT_EQ(checkAll(c), 27);
}

TEST(CudaInt8Gemv, ReloadTakesTheFloatInputsScaleFromTheState) {
  EI_SKIP_WITHOUT_GPU();
  test::GemmI8Case c = gemvCase();
  c.build();
  Int8GemvProvider prov;
  auto cands = prov.candidates(c.layer, Precision::kInt8);
  ASSERT_FALSE(cands.empty()) << prov.lastReason();
  const std::string id = "cuda-i8.gemv.f16.f32";
  std::string state;
  for (auto& t : cands)
    if (t->id() == id) state = t->serializedState();
  ASSERT_FALSE(state.empty());
  // A loaded engine's plan has no scale for a float tensor: the layer as the engine sees it.
  builder::LayerContext loaded = c.layer;
  loaded.inputScales[0] = 0.f;
  loaded.outputScales[0] = 0.f;
  auto t = prov.restore(loaded, Precision::kInt8, id, state);
  ASSERT_TRUE(t) << prov.lastReason();
  const Status init = t->initialize(loaded);
  ASSERT_TRUE(init.ok()) << init.toString();
  auto out = test::runTactic(*t, loaded, c.inputs());
  ASSERT_TRUE(out.ok()) << out.status().toString();
  const Tensor want = c.reference(DataType::kFloat16, DataType::kFloat32);
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_EQ((*out)[0].data<float>()[i], want.data<float>()[i]) << "element " << i;
}

TEST(CudaInt8Gemv, ReloadWithoutAUsableStateFindsNothing_n) {
  EI_SKIP_WITHOUT_GPU();
  test::GemmI8Case c = gemvCase();
  c.build();
  builder::LayerContext loaded = c.layer;
  loaded.inputScales[0] = 0.f;
  Int8GemvProvider prov;
  const std::string id = "cuda-i8.gemv.f16.f32";
  for (const std::string& bad : {std::string(), std::string("scales"), std::string("scales 1 2 3"),
                                 std::string("scales 3212836864 0"),  // -1.0f
                                 std::string("scales 2139095040 0"),  // +inf
                                 std::string("garbage")}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(prov.restore(loaded, Precision::kInt8, id, bad));
  }
}

TEST(CudaInt8Gemv, NotOfferedOutsideItsShapes_n) {
  const auto reason = [](test::GemmI8Case c, Precision p = Precision::kInt8) {
    c.build();
    Int8GemvProvider prov;
    EXPECT_TRUE(prov.candidates(c.layer, p).empty());
    return prov.lastReason();
  };
  test::GemmI8Case rows = gemvCase();
  rows.a = Shape{cuda::kInt8GemvMaxTiledRows + 1, 64};
  EXPECT_NE(reason(rows).find("more than 1024 rows"), std::string::npos);
  test::GemmI8Case odd = gemvCase();
  odd.a = Shape{1, 40};
  EXPECT_NE(reason(odd).find("multiple of 16"), std::string::npos);
  test::GemmI8Case wide = gemvCase();
  wide.a = Shape{1, cuda::kInt8GemvMaxK + 16};
  wide.N = 4;
  EXPECT_NE(reason(wide).find("multiple of 16 up to"), std::string::npos);
  test::GemmI8Case fp16 = gemvCase();
  EXPECT_NE(reason(fp16, Precision::kFp16).find("INT8 tactics only"), std::string::npos);
  setenv("EDGEINFER_DISABLE_INT8_GEMV", "1", 1);
  const std::string off = reason(gemvCase());
  unsetenv("EDGEINFER_DISABLE_INT8_GEMV");
  EXPECT_NE(off.find("switched off"), std::string::npos) << off;
  test::GemmI8Case noScale = gemvCase();
  noScale.sx = 0.f;
  EXPECT_NE(reason(noScale).find("no int8 scale"), std::string::npos);
  test::GemmI8Case transA = gemvCase();
  transA.op = "Gemm";
  transA.a = Shape{16, 16};  // square: A^T has A's shape
  transA.N = 16;
  transA.build();
  transA.node.attrs.set("transA", graph::Attribute::Int(1));
  transA.layer = builder::LayerContext{};
  ASSERT_TRUE(test::makeLayer(transA.node, transA.g, transA.inputs(), &transA.layer).ok());
  transA.layer.inputScales = {transA.sx, 0.f, 0.f};
  Int8GemvProvider prov;
  EXPECT_TRUE(prov.candidates(transA.layer, Precision::kInt8).empty());
  EXPECT_NE(prov.lastReason().find("transA"), std::string::npos) << prov.lastReason();
}

TEST(CudaInt8Gemv, SeventeenRowsGetTheRowTileFormsOnly_n) {
  EI_SKIP_WITHOUT_GPU();
  // 17 rows: the row-tile forms only; the one-row form is not found for such a layer.
  test::GemmI8Case c = gemvCase();
  c.a = Shape{17, 64};
  c.build();
  Int8GemvProvider prov;
  auto cands = prov.candidates(c.layer, Precision::kInt8);
  EXPECT_EQ(cands.size(), 18u) << prov.lastReason();
  for (auto& t : cands) EXPECT_EQ(t->id().rfind("cuda-i8.gemv.m16c", 0), 0u) << t->id();
  EXPECT_FALSE(prov.find(c.layer, Precision::kInt8, "cuda-i8.gemv.i8.f32"));
}

alignas(16) int8_t gHostBytes[64];  // host bytes: every plan below is refused before a launch

TEST(CudaInt8Gemv, LaunchRefusesBadPlans_n) {
  int8_t* const buf = gHostBytes;
  const float* f = reinterpret_cast<const float*>(buf);
  cuda::Int8GemvPlan ok;
  ok.M = 1;
  ok.K = 16;
  ok.N = 4;
  ok.xScale = 0.1f;
  const auto code = [&](cuda::Int8GemvPlan p, const void* x = gHostBytes, void* y = gHostBytes) {
    return cuda::launchInt8Gemv(p, x, buf, f, f, y, nullptr).code();
  };
  auto p = ok;
  p.M = 0;
  EXPECT_EQ(code(p), ErrorCode::kInvalidArgument);
  p = ok;
  p.M = cuda::kInt8GemvMaxRows + 1;
  EXPECT_EQ(code(p), ErrorCode::kInvalidArgument);
  p = ok;
  p.K = 40;
  EXPECT_EQ(code(p), ErrorCode::kInvalidArgument);
  // The row-tile form: its own row limit, tile and channels a warp.
  cuda::Int8GemvPlan tiled = ok;
  tiled.M = cuda::kInt8GemvMaxRows + 1;
  tiled.rowTile = 16;
  tiled.channelsPerWarp = 4;
  p = tiled;
  p.M = cuda::kInt8GemvMaxTiledRows + 1;
  EXPECT_EQ(code(p), ErrorCode::kInvalidArgument);
  p = tiled;
  p.rowTile = cuda::kInt8GemvRowTile + 1;
  EXPECT_EQ(code(p), ErrorCode::kInvalidArgument);
  p = tiled;
  p.rowTile = -1;
  EXPECT_EQ(code(p), ErrorCode::kInvalidArgument);
  p = tiled;
  p.K = 4096;  // 16 rows of 4 KB pass the 44 KB for the rows
  EXPECT_EQ(code(p), ErrorCode::kInvalidArgument);
  p = tiled;
  p.channelsPerWarp = 2;
  EXPECT_EQ(code(p), ErrorCode::kInvalidArgument);
  p = tiled;
  p.rowTile = 0;  // the one-row form: at most 16 rows
  EXPECT_EQ(code(p), ErrorCode::kInvalidArgument);
  p = ok;
  p.N = 0;
  EXPECT_EQ(code(p), ErrorCode::kInvalidArgument);
  p = ok;
  p.xScale = 0.f;  // a float input with no scale
  EXPECT_EQ(code(p), ErrorCode::kInvalidArgument);
  p = ok;
  p.y = GemvType::kInt8;  // an int8 output with no scale
  EXPECT_EQ(code(p), ErrorCode::kInvalidArgument);
  p = ok;
  p.xScale = NAN;
  EXPECT_EQ(code(p), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(ok, nullptr), ErrorCode::kInvalidArgument);
  EXPECT_EQ(code(ok, buf + 4), ErrorCode::kInvalidArgument);       // x not 16-byte aligned
  EXPECT_EQ(code(ok, buf, buf + 2), ErrorCode::kInvalidArgument);  // a float32 y at 2 bytes
}

TEST(CudaInt8Gemv, StrictEngineRunsTheClassifierOnItAtBatch1) {
  EI_SKIP_WITHOUT_GPU();
  // conv (bias + Relu) -> global average pool -> flatten -> Gemm 64 -> 40 (the graph output).
  test::TestModel m(13);
  m.input("x", {1, 8, 12, 10});
  m.randomInitializer("wc", {64, 8, 3, 3}, 41, -0.3f, 0.3f);
  m.randomInitializer("bc", {64}, 42, -0.2f, 0.2f);
  m.randomInitializer("wf", {40, 64}, 43, -0.3f, 0.3f);
  m.randomInitializer("bf", {40}, 44, -0.2f, 0.2f);
  auto& conv = m.node("Conv", {"x", "wc", "bc"}, {"c"}, "conv");
  test::TestModel::attrInts(conv, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"}, "relu");
  m.node("GlobalAveragePool", {"r"}, {"p"}, "pool");
  m.node("Flatten", {"p"}, {"f"}, "flatten");
  auto& fc = m.node("Gemm", {"f", "wf", "bf"}, {"y"}, "fc");
  test::TestModel::attr(fc, "transB", 1);
  m.output("y");
  test::Int8Fixture f;
  f.inputShape = Shape{1, 8, 12, 10};
  ASSERT_TRUE(f.prepare(m).ok());
  auto cpu = f.cpuEngine(/*int8=*/true);
  ASSERT_TRUE(cpu.ok()) << cpu.status().toString();
  const Tensor want = test::runOnce(**cpu, f.sample);
  // Forced (the choice by time is the builder's; this is about the tactic in an engine): the
  // fp16-input form, whose input scale no plan tensor keeps.
  BuilderConfig cfg = f.config(/*strict=*/true);
  cfg.forcedTactics["fc"] = "cuda-i8.gemv.f16.f32";
  auto e = Builder::buildFromFile(f.model, cfg);
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ((*e)->info().precision, Precision::kInt8);
  const Tensor got = test::runOnce(**e, f.sample);
  ASSERT_EQ(got.numel(), want.numel());
  const double cos = test::cosine(got, want);
  std::printf("[          ] strict INT8 engine vs the CPU's INT8: cosine %.6f, rel L2 %.5f\n", cos,
              test::relL2(got, want));
  EXPECT_GT(cos, 0.999);
  auto bytes = (*e)->serialize();
  ASSERT_TRUE(bytes.ok());
  const std::string text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  EXPECT_NE(text.find("cuda-i8.gemv.f16.f32"), std::string::npos) << "the classifier on it";
  // Reloaded, the engine finds its tactic again (findTactic: "cuda-i8." ids of two providers).
  auto again = Engine::deserialize(bytes->data(), bytes->size());
  ASSERT_TRUE(again.ok()) << again.status().toString();
  const Tensor got2 = test::runOnce(**again, f.sample);
  ASSERT_EQ(got2.numel(), got.numel());
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_EQ(got2.data<float>()[i], got.data<float>()[i]) << "element " << i;
}

}  // namespace
}  // namespace edgeinfer

#else

TEST(CudaInt8Gemv, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif  // EDGEINFER_HAVE_CUDA
