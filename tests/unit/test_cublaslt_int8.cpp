// The cublaslt-i8 provider (kernels/cuda/cublaslt_int8.h): INT8 1x1 convolutions and Gemm /
// MatMul through cuBLASLt, every candidate against the host computation of the integer arithmetic
// and epilogue that cuda-i8 implements (int8_test_util.h), and small INT8 engines whose layers
// are forced onto the provider.
//
// Tolerances, and why:
//   - "i32" tactics: bit-exact. cuBLASLt's int32 products are exact, and our epilogue evaluates
//     the reference's float expressions one rounding at a time.
//   - "e8" tactics: within one quantization step, on at most 1 % of the elements (at least
//     one). cuBLASLt folds the division by s_y into alpha and bias (alpha' = s_x s_w / s_y,
//     bias' = B / s_y, beta = s_z / s_y) and rounds in its own order, so a value within a few
//     ulps of a half step may round the other way; anything systematic (truncation instead of
//     rounding, a missing bias, residual or ReLU, no saturation) moves far more elements or by
//     more than a step. (On an H100 every e8 case was bit-exact.)
// Which layers are offered, and the negative cases (_n), need no GPU; the rest skip without one.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "builder/optimize.h"
#include "int8_test_util.h"
#include "kernels/cuda/cublaslt_int8.h"
#include "kernels/cuda/cudnn_conv.h"
#include "kernels/cuda/int8_conv.h"
#include "kernels/ref/activation.h"
#include "quant/qdq.h"
#include "runtime/cuda/cuda_engine.h"
#include "tactic_test_util.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using cuda::CublasLtInt8Provider;
using test::I8Case;
using test::randomTensor;

bool startsWith(const std::string& s, const std::string& p) {
  return s.compare(0, p.size(), p) == 0;
}

bool isE8(const builder::Tactic& t) {
  return startsWith(t.id(), "cublaslt-i8.e8.");
}

using test::GemmI8Case;

struct Counts {
  int e8 = 0, i32 = 0;
};

/// Runs every candidate and compares it with `want(yInt8, zInt8)` as the header says: "i32"
/// bit-exact, "e8" within one step on at most 1 % of the elements. `only` filters by id prefix.
template <typename Ref>
Counts checkCandidates(std::vector<std::unique_ptr<builder::Tactic>>& cands,
                       const builder::LayerContext& layer, const std::vector<const Tensor*>& inputs,
                       float sy, bool hasZ, Ref want, const std::string& only = "") {
  Counts n;
  std::map<int, Tensor> refs;
  for (auto& t : cands) {
    if (!startsWith(t->id(), only)) continue;
    SCOPED_TRACE(t->id());
    const Status init = t->initialize(layer);
    EXPECT_TRUE(init.ok()) << init.toString();
    if (!init.ok()) continue;
    auto out = test::runTactic(*t, layer, inputs);
    EXPECT_TRUE(out.ok()) << out.status().toString();
    if (!out.ok()) continue;
    const bool yInt8 = t->outputFormat(0).dtype == DataType::kInt8;
    const bool zInt8 = hasZ && t->inputFormat(3).dtype == DataType::kInt8;
    const int key = (yInt8 ? 2 : 0) + (zInt8 ? 1 : 0);
    if (!refs.count(key)) refs[key] = want(yInt8, zInt8);  // (the large case's costs seconds)
    const Tensor& ref = refs[key];
    const Tensor& got = (*out)[0];
    int64_t differ = 0;
    double worst = 0;
    for (int64_t i = 0; i < ref.numel(); ++i) {
      const float a = got.data<float>()[i], b = ref.data<float>()[i];
      if (a != b || std::isnan(a)) ++differ;
      worst = std::max(worst, std::fabs(double{a} - b) / (yInt8 ? sy : 1.0));
    }
    if (isE8(*t)) {
      ++n.e8;
      EXPECT_TRUE(yInt8);
      EXPECT_LE(worst, 1.0) << "steps";
      EXPECT_LE(differ, std::max<int64_t>(1, ref.numel() / 100))
          << "more than 1 % of the elements differ";
    } else {
      ++n.i32;
      EXPECT_EQ(differ, 0) << "of " << ref.numel();
    }
    std::printf("[          ] %s: %lld of %lld differ, worst %.3g %s\n", t->id().c_str(),
                static_cast<long long>(differ), static_cast<long long>(ref.numel()), worst,
                yInt8 ? "steps" : "abs");
  }
  return n;
}

Counts checkConv(I8Case& c, const std::string& only = "") {
  c.build();
  CublasLtInt8Provider prov;
  auto cands = prov.candidates(c.layer, Precision::kInt8);
  std::printf("[          ] offered %zu: %s\n", cands.size(), prov.lastReason().c_str());
  EXPECT_FALSE(cands.empty()) << prov.lastReason();
  return checkCandidates(
      cands, c.layer, c.inputs(), c.sy, c.residual,
      [&](bool y, bool z) { return c.reference(y, z); }, only);
}

Counts checkGemm(GemmI8Case& c) {
  c.build();
  CublasLtInt8Provider prov;
  auto cands = prov.candidates(c.layer, Precision::kInt8);
  std::printf("[          ] offered %zu: %s\n", cands.size(), prov.lastReason().c_str());
  EXPECT_FALSE(cands.empty()) << prov.lastReason();
  return checkCandidates(cands, c.layer, c.inputs(), c.sy, false, [&](bool y, bool) {
    return c.reference(DataType::kInt8, y ? DataType::kInt8 : DataType::kFloat16);
  });
}

/// A 1x1 convolution case: M = N*H*W = 105 (odd), C_in 20 and C_out 36 (odd multiples of 4).
I8Case conv1x1() {
  I8Case c;
  c.N = 3;
  c.C = 20;
  c.H = 7;
  c.W = 5;
  c.K = 36;
  c.R = c.S = 1;
  c.pads = {0, 0, 0, 0};
  return c;
}

// A bit-exact build (LayerContext::int8BitExact) gets the i32 tactics (our bit-exact epilogue)
// and none of e8 (cuBLASLt's float epilogue, within one step), which the same layer gets
// otherwise.
TEST(CublasLtInt8, BitExactLayersGetNoE8Tactics_n) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c = conv1x1();
  c.op = "FusedConv";
  c.act = "Relu";
  c.build();
  const auto count = [](const std::vector<std::unique_ptr<builder::Tactic>>& cands,
                        const std::string& prefix) {
    size_t n = 0;
    for (const auto& t : cands) n += startsWith(t->id(), prefix) ? 1 : 0;
    return n;
  };
  CublasLtInt8Provider prov;
  auto fast = prov.candidates(c.layer, Precision::kInt8);
  EXPECT_GT(count(fast, "cublaslt-i8.e8."), 0u) << prov.lastReason();
  c.layer.int8BitExact = true;
  auto exact = prov.candidates(c.layer, Precision::kInt8);
  EXPECT_EQ(count(exact, "cublaslt-i8.e8."), 0u);
  EXPECT_GT(count(exact, "cublaslt-i8.i32."), 0u) << prov.lastReason();
  EXPECT_NE(prov.lastReason().find("bit-exact"), std::string::npos) << prov.lastReason();
}

// ---- Anywhere: which layers are offered ----------------------------------------------------

TEST(CublasLtInt8, NotOfferedWithoutInt8PrecisionOrScale_n) {
  I8Case c = conv1x1();
  c.build();
  CublasLtInt8Provider prov;
  EXPECT_TRUE(prov.candidates(c.layer, Precision::kFp16).empty());
  EXPECT_NE(prov.lastReason().find("INT8 tactics only"), std::string::npos);
  c.layer.inputScales[0] = 0.f;
  EXPECT_TRUE(prov.candidates(c.layer, Precision::kInt8).empty());
  EXPECT_NE(prov.lastReason().find("no int8 scale"), std::string::npos) << prov.lastReason();
}

TEST(CublasLtInt8, UnalignedChannelCountsAreNotOffered_n) {
  CublasLtInt8Provider prov;
  for (auto [cin, cout] : {std::pair<int64_t, int64_t>{18, 36}, {20, 30}}) {
    SCOPED_TRACE(std::to_string(cin) + " -> " + std::to_string(cout));
    I8Case c = conv1x1();
    c.C = cin;
    c.K = cout;
    c.build();
    EXPECT_TRUE(prov.candidates(c.layer, Precision::kInt8).empty());
    EXPECT_NE(prov.lastReason().find("% 4"), std::string::npos) << prov.lastReason();
  }
  GemmI8Case g;
  g.N = 22;
  g.build();
  EXPECT_TRUE(prov.candidates(g.layer, Precision::kInt8).empty());
  EXPECT_NE(prov.lastReason().find("% 4"), std::string::npos) << prov.lastReason();
}

TEST(CublasLtInt8, ConvolutionsThatAreNotMatrixProductsAreNotOffered_n) {
  CublasLtInt8Provider prov;
  const auto none = [&](I8Case& c, const char* why) {
    c.build();
    EXPECT_TRUE(prov.candidates(c.layer, Precision::kInt8).empty()) << why;
    EXPECT_FALSE(prov.lastReason().empty()) << why;
  };
  I8Case k3;  // 3x3
  none(k3, "3x3");
  I8Case s2 = conv1x1();
  s2.strides = {2, 2};
  none(s2, "stride 2");
  I8Case pad = conv1x1();
  pad.pads = {1, 0, 1, 0};
  none(pad, "padding");
  I8Case grp = conv1x1();
  grp.C = grp.K = 16;
  grp.group = 4;
  none(grp, "grouped");
  I8Case f16 = conv1x1();
  f16.build();
  f16.layer.inputTypes[0] = DataType::kFloat16;
  EXPECT_TRUE(prov.candidates(f16.layer, Precision::kInt8).empty());
}

TEST(CublasLtInt8, UnsupportedGemmsAreNotOffered_n) {
  CublasLtInt8Provider prov;
  {
    GemmI8Case g;
    g.build();
    g.node.attrs.set("transA", graph::Attribute::Int(1));
    EXPECT_TRUE(prov.candidates(g.layer, Precision::kInt8).empty());
    EXPECT_NE(prov.lastReason().find("transA"), std::string::npos) << prov.lastReason();
  }
  {
    GemmI8Case g;  // B computed at run time
    g.build();
    g.g.value("B").constant.reset();
    EXPECT_TRUE(prov.candidates(g.layer, Precision::kInt8).empty());
    EXPECT_NE(prov.lastReason().find("B is not a constant"), std::string::npos)
        << prov.lastReason();
  }
  {
    GemmI8Case g;  // C computed at run time
    g.build();
    g.g.value("C").constant.reset();
    EXPECT_TRUE(prov.candidates(g.layer, Precision::kInt8).empty());
    EXPECT_NE(prov.lastReason().find("runtime C"), std::string::npos) << prov.lastReason();
  }
}

TEST(CublasLtInt8, SwitchedOffByTheEnvironment_n) {
  I8Case c = conv1x1();
  c.build();
  CublasLtInt8Provider prov;
  ASSERT_EQ(setenv("EDGEINFER_DISABLE_CUBLASLT_INT8", "1", 1), 0);
  EXPECT_TRUE(prov.candidates(c.layer, Precision::kInt8).empty());
  EXPECT_NE(prov.lastReason().find("EDGEINFER_DISABLE_CUBLASLT_INT8"), std::string::npos);
  unsetenv("EDGEINFER_DISABLE_CUBLASLT_INT8");
}

// ---- On the GPU: every candidate against the integer reference ------------------------------

TEST(CublasLtInt8, Conv1x1WithBiasAndReluMatchesTheIntegerReference) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c = conv1x1();
  c.op = "FusedConv";
  c.act = "Relu";
  const Counts n = checkConv(c);
  EXPECT_GT(n.i32, 0);
  std::printf("[          ] e8 %d, i32 %d candidates\n", n.e8, n.i32);
}

TEST(CublasLtInt8, Conv1x1WithResidualAndReluMatchesTheIntegerReference) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c = conv1x1();
  c.N = 2;
  c.H = 9;
  c.W = 11;  // M = 198
  c.C = 12;
  c.K = 44;
  c.op = "FusedConv";
  c.act = "Relu";
  c.residual = true;
  const Counts n = checkConv(c);
  EXPECT_GT(n.i32, 0);
  std::printf("[          ] e8 %d, i32 %d candidates\n", n.e8, n.i32);
}

TEST(CublasLtInt8, Conv1x1ResidualWithoutBiasNoActivation) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c = conv1x1();
  c.op = "FusedConv";
  c.act = "";
  c.bias = false;
  c.residual = true;
  c.H = 3;
  c.W = 1;  // M = 9
  const Counts n = checkConv(c);
  EXPECT_GT(n.i32, 0);
}

TEST(CublasLtInt8, Conv1x1LeakyReluHasOnlyTheExactEpilogue) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c = conv1x1();
  c.op = "FusedConv";
  c.act = "LeakyRelu";
  c.bias = false;
  const Counts n = checkConv(c);
  EXPECT_EQ(n.e8, 0) << "cuBLASLt has no LeakyRelu epilogue: only i32 tactics";
  EXPECT_GT(n.i32, 0);
}

TEST(CublasLtInt8, Conv1x1SigmoidWithinOneStep) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c = conv1x1();  // expf on the device and the host may differ in the last bit
  c.op = "FusedConv";
  c.act = "Sigmoid";
  c.sy = 1.f / 127.f;
  c.build();
  CublasLtInt8Provider prov;
  auto cands = prov.candidates(c.layer, Precision::kInt8);
  ASSERT_FALSE(cands.empty()) << prov.lastReason();
  for (auto& t : cands) {
    SCOPED_TRACE(t->id());
    EXPECT_FALSE(isE8(*t));
    if (t->outputFormat(0).dtype != DataType::kInt8) continue;
    ASSERT_TRUE(t->initialize(c.layer).ok());
    auto out = test::runTactic(*t, c.layer, c.inputs());
    ASSERT_TRUE(out.ok()) << out.status().toString();
    const Tensor want = c.reference(true, false);
    double worst = 0;
    for (int64_t i = 0; i < want.numel(); ++i)
      worst =
          std::max(worst, std::fabs(double{(*out)[0].data<float>()[i]} - want.data<float>()[i]));
    EXPECT_LE(worst / c.sy, 1.0);
  }
}

TEST(CublasLtInt8, Conv1x1LargeLayerRunsInChunks) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c = conv1x1();  // M = 135200 rows x 64 int32 products = 34.6 MB: two chunks (i32)
  c.N = 2;
  c.C = 16;
  c.H = c.W = 260;
  c.K = 64;
  c.op = "FusedConv";
  c.act = "Relu";
  c.residual = true;
  const Counts n = checkConv(c, "cublaslt-i8.i32.");
  EXPECT_GT(n.i32, 0);
}

TEST(CublasLtInt8, GemmTransBWithBiasAndReluMatchesTheIntegerReference) {
  EI_SKIP_WITHOUT_GPU();
  GemmI8Case g;  // M = 37, K = 44, N = 20
  const Counts n = checkGemm(g);
  EXPECT_GT(n.i32, 0);
  std::printf("[          ] e8 %d, i32 %d candidates\n", n.e8, n.i32);
}

TEST(CublasLtInt8, GemmAlphaBetaWithoutTransB) {
  EI_SKIP_WITHOUT_GPU();
  GemmI8Case g;
  g.op = "Gemm";
  g.transB = false;
  g.alpha = 0.5f;
  g.beta = 2.f;
  g.a = Shape{5, 28};
  g.N = 12;
  EXPECT_GT(checkGemm(g).i32, 0);
}

TEST(CublasLtInt8, MatMulWithBiasFoldsLeadingDims) {
  EI_SKIP_WITHOUT_GPU();
  GemmI8Case g;
  g.op = "FusedMatMul";
  g.a = Shape{2, 19, 24};  // 38 rows
  g.N = 28;
  g.act = "";
  EXPECT_GT(checkGemm(g).i32, 0);
}

TEST(CublasLtInt8, OnlyTheExactEpilogueWhenSwitchedOff) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c = conv1x1();
  c.op = "FusedConv";
  c.act = "Relu";
  c.build();
  CublasLtInt8Provider prov;
  ASSERT_EQ(setenv("EDGEINFER_DISABLE_CUBLASLT_INT8", "e8", 1), 0);
  auto cands = prov.candidates(c.layer, Precision::kInt8);
  unsetenv("EDGEINFER_DISABLE_CUBLASLT_INT8");
  EXPECT_FALSE(cands.empty()) << prov.lastReason();
  for (auto& t : cands) EXPECT_FALSE(isE8(*t)) << t->id();
}

TEST(CublasLtInt8, TacticErrors_n) {
  EI_SKIP_WITHOUT_GPU();
  I8Case c = conv1x1();
  c.build();
  CublasLtInt8Provider prov;
  auto cands = prov.candidates(c.layer, Precision::kInt8);
  ASSERT_FALSE(cands.empty()) << prov.lastReason();
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
  builder::Tactic& t = *cands[0];
  ASSERT_TRUE(t.initialize(c.layer).ok());
  args.inputs = {nullptr, nullptr, nullptr};
  args.outputs = {nullptr};
  EXPECT_FALSE(t.enqueue(args).ok()) << "missing pointers";
  if (t.workspaceBytes() > 0) {  // pointers, but too small a workspace
    void *x = nullptr, *y = nullptr;
    ASSERT_EQ(cudaMalloc(&x, 4096), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&y, 8192), cudaSuccess);
    args.inputs[0] = x;
    args.outputs[0] = y;
    args.workspace = x;
    args.workspaceBytes = t.workspaceBytes() - 1;
    const Status ws = t.enqueue(args);
    EXPECT_FALSE(ws.ok());
    EXPECT_NE(ws.message().find("workspace"), std::string::npos) << ws.toString();
    cudaFree(x);
    cudaFree(y);
  }
}

// ---- INT8 engines ----------------------------------------------------------------------------

/// conv1 3x3 (cuda-i8 only) -> 1x1 convolutions (bias + Relu; bias + residual + Relu; bias, the
/// graph output in fp16). Input 2x8x19x17: M = 646 rows (not a multiple of 4); channels 20, 12,
/// 20, 36.
test::TestModel oneByOneCnn() {
  test::TestModel m(13);
  m.input("x", {2, 8, 19, 17});
  m.randomInitializer("w1", {20, 8, 3, 3}, 1, -0.3f, 0.3f);
  m.randomInitializer("b1", {20}, 2, -0.2f, 0.2f);
  m.randomInitializer("w2", {12, 20, 1, 1}, 3, -0.4f, 0.4f);
  m.randomInitializer("b2", {12}, 4, -0.2f, 0.2f);
  m.randomInitializer("w3", {20, 12, 1, 1}, 5, -0.4f, 0.4f);
  m.randomInitializer("b3", {20}, 6, -0.2f, 0.2f);
  m.randomInitializer("w4", {36, 20, 1, 1}, 7, -0.3f, 0.3f);
  m.randomInitializer("b4", {36}, 8, -0.2f, 0.2f);
  auto& c1 = m.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  test::TestModel::attrInts(c1, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  m.node("Conv", {"r1", "w2", "b2"}, {"c2"}, "conv2");
  m.node("Relu", {"c2"}, {"r2"}, "relu2");
  m.node("Conv", {"r2", "w3", "b3"}, {"c3"}, "conv3");
  m.node("Add", {"c3", "r1"}, {"a3"}, "add3");
  m.node("Relu", {"a3"}, {"r3"}, "relu3");
  m.node("Conv", {"r3", "w4", "b4"}, {"y"}, "conv4");
  m.output("y");
  return m;
}

/// The layer `name` of the graph the builder compiles, with the scales it gives an INT8 layer.
struct CompiledLayer {
  graph::Graph g;
  builder::LayerContext layer;
};

Status compiledLayer(const test::Int8Fixture& f, const std::string& name, CompiledLayer* out) {
  EI_ASSIGN_OR_RETURN(std::string bytes, builder::readModelFile(f.model));
  EI_ASSIGN_OR_RETURN(out->g, builder::importAndOptimize(bytes, f.config(true), f.dir.path()));
  EI_ASSIGN_OR_RETURN(CalibrationCache cache, CalibrationCache::load(f.cache));
  for (size_t i = 0; i < out->g.nodes.size(); ++i) {
    if (out->g.nodes[i].name != name) continue;
    out->layer = runtime::cuda::makeLayerContext(out->g, i);
    const auto scale = [&](const std::string& v) {
      const auto it = cache.tensorAmax.find(v);
      return v.empty() || it == cache.tensorAmax.end() ? 0.f : quant::activationScale(it->second);
    };
    for (const auto& in : out->g.nodes[i].inputs) out->layer.inputScales.push_back(scale(in));
    for (const auto& o : out->g.nodes[i].outputs) out->layer.outputScales.push_back(scale(o));
    return Status::Ok();
  }
  return Status(ErrorCode::kNotFound, "no layer '" + name + "'");
}

/// The first candidate of `prov` for layer `name` whose id starts with `prefix` and whose
/// output / residual formats are int8 wherever the layer has their scales (`bitExact`: of a
/// BuilderConfig::int8BitExact build).
Expected<std::string> pickTactic(builder::TacticProvider& prov, const test::Int8Fixture& f,
                                 const std::string& name, const std::string& prefix,
                                 bool bitExact = false) {
  CompiledLayer cl;
  EI_RETURN_IF_ERROR(compiledLayer(f, name, &cl));
  cl.layer.int8BitExact = bitExact;
  const bool yI8 = cl.layer.outputScale(0) > 0.f;
  const bool hasZ = cl.layer.hasInput(3), zI8 = cl.layer.inputScale(3) > 0.f;
  for (auto& t : prov.candidates(cl.layer, Precision::kInt8)) {
    if (!startsWith(t->id(), prefix)) continue;
    if ((t->outputFormat(0).dtype == DataType::kInt8) != yI8) continue;
    if (hasZ && (t->inputFormat(3).dtype == DataType::kInt8) != zI8) continue;
    return t->id();
  }
  return Status(ErrorCode::kNotFound, "layer '" + name + "' has no candidate '" + prefix + "'");
}

TEST(CublasLtInt8Engine, Forced1x1ConvsMatchCudaI8) {
  EI_SKIP_WITHOUT_GPU();
  test::Int8Fixture f;
  f.inputShape = Shape{2, 8, 19, 17};
  ASSERT_TRUE(f.prepare(oneByOneCnn()).ok());
  cuda::Int8ConvProvider i8;
  CublasLtInt8Provider lt;
  const std::vector<std::string> oneByOne = {"conv2", "conv3", "conv4"};
  // conv1 (3x3) is forced too: every engine reads the same int8 r1. cuda-i8 in its bit-exact
  // rounding, which the i32 tactics' epilogue computes too.
  // The e8 engine is a fast-rounding build (bit-exact builds get no e8 tactics): its conv1 is
  // cuda-i8's fast variant, within one step of the bit-exact one.
  auto conv1 = pickTactic(i8, f, "conv1", "cuda-i8.mma", /*bitExact=*/true);
  auto conv1Fast = pickTactic(i8, f, "conv1", "cuda-i8.mma", /*bitExact=*/false);
  ASSERT_TRUE(conv1.ok()) << conv1.status().toString();
  ASSERT_TRUE(conv1Fast.ok()) << conv1Fast.status().toString();

  const auto build = [&](const std::map<std::string, std::string>& forced, bool bitExact = true) {
    BuilderConfig c = f.config(/*strict=*/true);
    c.int8BitExact = bitExact;
    c.forcedTactics = forced;
    c.forcedTactics["conv1"] = bitExact ? *conv1 : *conv1Fast;
    return Builder::buildFromFile(f.model, c);
  };
  std::map<std::string, std::string> viaI8, viaI32, viaE8;
  for (const std::string& l : oneByOne) {
    auto a = pickTactic(i8, f, l, "cuda-i8.mma", /*bitExact=*/true);
    auto b = pickTactic(lt, f, l, "cublaslt-i8.i32.");
    ASSERT_TRUE(a.ok() && b.ok()) << l << ": " << lt.lastReason();
    viaI8[l] = *a;
    viaI32[l] = *b;
    auto e = pickTactic(lt, f, l, "cublaslt-i8.e8.");
    viaE8[l] = e.ok() ? *e : *b;  // conv4 writes fp16 (the graph output): only i32 can
  }
  EXPECT_NE(viaE8["conv2"], viaI32["conv2"]) << "conv2 (bias + Relu) offers no e8 tactic";
  EXPECT_NE(viaE8["conv3"], viaI32["conv3"]) << "conv3 (residual + Relu) offers no e8 tactic";

  auto ref = build(viaI8);
  ASSERT_TRUE(ref.ok()) << ref.status().toString();
  const Tensor want = test::runOnce(**ref, f.sample);

  auto e32 = build(viaI32);
  ASSERT_TRUE(e32.ok()) << e32.status().toString();
  const Tensor got32 = test::runOnce(**e32, f.sample);
  ASSERT_EQ(got32.numel(), want.numel());
  EXPECT_EQ(std::memcmp(got32.raw(), want.raw(), want.bytes()), 0)
      << "the i32 tactics compute cuda-i8's arithmetic: identical outputs";

  auto e8 = build(viaE8, /*bitExact=*/false);
  ASSERT_TRUE(e8.ok()) << e8.status().toString();
  const Tensor got8 = test::runOnce(**e8, f.sample);
  ASSERT_EQ(got8.numel(), want.numel());
  const double cos = test::cosine(got8, want), err = test::relL2(got8, want);
  std::printf("[          ] e8 engine vs cuda-i8 engine: cosine %.6f, rel L2 %.5f\n", cos, err);
  EXPECT_GT(cos, 0.9999);
  EXPECT_LT(err, 0.01);

  // The plan names the forced tactics, and a load (which finds them again through the
  // heuristics) computes the same.
  auto bytes = (*e8)->serialize();
  ASSERT_TRUE(bytes.ok());
  const std::string text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  for (const auto& [layer, id] : viaE8) EXPECT_NE(text.find(id), std::string::npos) << layer;
  auto loaded = Engine::deserialize(bytes->data(), bytes->size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  const Tensor again = test::runOnce(**loaded, f.sample);
  ASSERT_EQ(again.numel(), got8.numel());
  EXPECT_EQ(std::memcmp(again.raw(), got8.raw(), got8.bytes()), 0);
}

TEST(CublasLtInt8Engine, StrictInt8GemmsRunOnCublasLt) {
  EI_SKIP_WITHOUT_GPU();
  // fc1 (bias + Relu, int8 output) -> fc2 (the graph output, fp16); 24 rows: more than
  // cuda-i8.gemv takes (16), so cuBLASLt runs both.
  test::TestModel m(13);
  m.input("x", {24, 48});
  m.randomInitializer("w1", {36, 48}, 21, -0.3f, 0.3f);
  m.randomInitializer("b1", {36}, 22, -0.2f, 0.2f);
  m.randomInitializer("w2", {36, 20}, 23, -0.3f, 0.3f);
  m.randomInitializer("b2", {20}, 24, -0.2f, 0.2f);
  auto& g1 = m.node("Gemm", {"x", "w1", "b1"}, {"h"}, "fc1");
  test::TestModel::attr(g1, "transB", 1);
  m.node("Relu", {"h"}, {"r"}, "relu");
  m.node("Gemm", {"r", "w2", "b2"}, {"y"}, "fc2");
  m.output("y");
  test::Int8Fixture f;
  f.inputShape = Shape{24, 48};
  ASSERT_TRUE(f.prepare(m).ok());
  BuilderConfig cpu;
  cpu.backend = Backend::kCpu;
  auto ref = Builder::buildFromFile(f.model, cpu);
  ASSERT_TRUE(ref.ok()) << ref.status().toString();
  const Tensor want = test::runOnce(**ref, f.sample);
  auto e = Builder::buildFromFile(f.model, f.config(/*strict=*/true));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ((*e)->info().precision, Precision::kInt8);
  const Tensor got = test::runOnce(**e, f.sample);
  ASSERT_EQ(got.numel(), want.numel());
  const double cos = test::cosine(got, want), err = test::relL2(got, want);
  std::printf("[          ] INT8 Gemm engine vs CPU FP32: cosine %.5f, rel L2 %.4f\n", cos, err);
  EXPECT_GT(cos, 0.995);
  auto bytes = (*e)->serialize();
  ASSERT_TRUE(bytes.ok());
  const std::string text(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  size_t count = 0;
  for (size_t p = text.find("cublaslt-i8."); p != std::string::npos;
       p = text.find("cublaslt-i8.", p + 1))
    ++count;
  EXPECT_GE(count, 2u) << "both Gemm layers on cublaslt-i8";
  EXPECT_EQ(text.find("cublaslt.fp"), std::string::npos) << "no FP16/FP32 cuBLASLt Gemm";
}

// ---- Performance mode (EDGEINFER_PERF_TESTS=1): ResNet-50's convolutions at batch 64 ----------
// EDGEINFER_PERF_LAYERS=TEXT keeps the layers whose name contains it.

/// Time (ms) of one launch as the builder measures it: 10 launches captured into a CUDA graph,
/// 3 warm-up replays, the median of 7 timed replays divided by 10. Inputs are zeroed.
double graphTimeMs(builder::Tactic& t, const builder::LayerContext& layer) {
  std::vector<void*> bufs;
  // EDGEINFER_PERF_STAGGER=BYTES: the j-th buffer starts j * BYTES (rounded to 256) into its
  // allocation, so that the tensors' addresses no longer share their low bits (cudaMalloc
  // aligns large allocations alike).
  const char* staggerEnv = std::getenv("EDGEINFER_PERF_STAGGER");
  const size_t stagger = staggerEnv ? static_cast<size_t>(std::atol(staggerEnv)) / 256 * 256 : 0;
  const auto alloc = [&](size_t bytes) -> void* {
    void* p = nullptr;
    const size_t offset = stagger * bufs.size();
    if (cudaMalloc(&p, std::max<size_t>(bytes, 16) + offset) != cudaSuccess) return nullptr;
    bufs.push_back(p);
    p = static_cast<char*>(p) + offset;
    cudaMemset(p, 0, bytes);
    return p;
  };
  builder::LaunchArgs args;
  for (size_t k = 0; k < layer.inputShapes.size(); ++k) {
    const bool skip = !layer.hasInput(k) || t.consumesInput(k);
    args.inputs.push_back(skip ? nullptr
                               : alloc(static_cast<size_t>(layer.inputShapes[k].numel()) *
                                       dataTypeSize(t.inputFormat(k).dtype)));
  }
  args.outputs.push_back(alloc(static_cast<size_t>(layer.outputShapes[0].numel()) *
                               dataTypeSize(t.outputFormat(0).dtype)));
  args.workspaceBytes = t.workspaceBytes();
  args.workspace = args.workspaceBytes ? alloc(args.workspaceBytes) : nullptr;
  cudaStream_t st = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  double ms = INFINITY;
  bool ok = cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess &&
            cudaEventCreate(&e0) == cudaSuccess && cudaEventCreate(&e1) == cudaSuccess;
  args.stream = st;
  ok = ok && t.enqueue(args).ok() && cudaStreamSynchronize(st) == cudaSuccess;  // first use
  ok = ok && cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess;
  if (ok) {
    for (int i = 0; i < 10; ++i) ok = t.enqueue(args).ok() && ok;
    ok = cudaStreamEndCapture(st, &graph) == cudaSuccess && ok;
  }
  ok = ok && cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess;
  for (int i = 0; ok && i < 3; ++i) ok = cudaGraphLaunch(exec, st) == cudaSuccess;
  std::vector<float> samples;
  for (int i = 0; ok && i < 7; ++i) {
    float m = 0;
    ok = cudaEventRecord(e0, st) == cudaSuccess && cudaGraphLaunch(exec, st) == cudaSuccess &&
         cudaEventRecord(e1, st) == cudaSuccess && cudaEventSynchronize(e1) == cudaSuccess &&
         cudaEventElapsedTime(&m, e0, e1) == cudaSuccess;
    samples.push_back(m / 10);
  }
  if (ok) {
    std::sort(samples.begin(), samples.end());
    ms = samples[samples.size() / 2];
  }
  cudaGetLastError();
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  if (st) cudaStreamDestroy(st);
  for (void* p : bufs) cudaFree(p);
  return ms;
}

struct Best {
  double ms = INFINITY;
  std::string id;
  int n = 0;
};

/// The fastest of `cands` whose id starts with `prefix` and whose output is `out`.
Best fastest(std::vector<std::unique_ptr<builder::Tactic>>& cands,
             const builder::LayerContext& layer, const std::string& prefix, DataType out) {
  Best b;
  for (auto& t : cands) {
    if (!startsWith(t->id(), prefix) || t->outputFormat(0).dtype != out) continue;
    if (layer.hasInput(3) && out == DataType::kInt8 && t->inputFormat(3).dtype != DataType::kInt8)
      continue;  // int8 tensors flow: the residual is int8 too
    if (!t->initialize(layer).ok()) continue;
    ++b.n;
    const double ms = graphTimeMs(*t, layer);
    if (ms < b.ms) b.ms = ms, b.id = t->id();
  }
  return b;
}

TEST(CublasLtInt8Perf, ResNet50OneByOneConvsAtBatch64) {
  EI_SKIP_WITHOUT_GPU();
  if (!std::getenv("EDGEINFER_PERF_TESTS"))
    GTEST_SKIP() << "performance mode: set EDGEINFER_PERF_TESTS=1";
  struct L {
    const char* name;
    int64_t hw, cin, cout;
    bool residual;
    int64_t stride = 1;
  };
  const L layers[] = {
      {"layer1.0.conv3 56x56 64->256 +res", 56, 64, 256, true},
      {"layer1.0.downsample 56x56 64->256", 56, 64, 256, false},
      {"layer1.1.conv1 56x56 256->64", 56, 256, 64, false},
      {"layer1.0.conv1 56x56 64->64", 56, 64, 64, false},
      {"layer2.0.conv1 56x56 256->128", 56, 256, 128, false},
      {"layer2.0.downsample 56->28 256->512 /2", 56, 256, 512, false, 2},
      {"layer2.x.conv3 28x28 128->512 +res", 28, 128, 512, true},
      {"layer3.x.conv3 14x14 256->1024 +res", 14, 256, 1024, true},
      {"layer3.x.conv1 14x14 1024->256", 14, 1024, 256, false},
      {"layer4.x.conv1 7x7 2048->512", 7, 2048, 512, false},
      {"layer4.x.conv3 7x7 512->2048 +res", 7, 512, 2048, true},
  };
  const char* only = std::getenv("EDGEINFER_PERF_LAYERS");
  std::printf(
      "[          ] ms per layer, batch 64 (CUDA-graph replays; best candidate of each):\n");
  for (const L& l : layers) {
    if (only && !std::strstr(l.name, only)) continue;
    I8Case c;
    c.N = 64;
    c.H = c.W = l.hw;
    c.C = l.cin;
    c.K = l.cout;
    c.R = c.S = 1;
    c.pads = {0, 0, 0, 0};
    c.strides = {l.stride, l.stride};
    c.op = "FusedConv";
    c.act = "Relu";
    c.residual = l.residual;
    c.build();
    CublasLtInt8Provider lt;
    cuda::Int8ConvProvider i8;
    cuda::CudnnConvProvider dnn;
    auto ltc = lt.candidates(c.layer, Precision::kInt8);
    auto i8c = i8.candidates(c.layer, Precision::kInt8);
    builder::LayerContext exactLayer = c.layer;
    exactLayer.int8BitExact = true;
    auto i8x = i8.candidates(exactLayer, Precision::kInt8);
    auto dnc = dnn.candidates(c.layer, Precision::kFp16);
    const Best e8 = fastest(ltc, c.layer, "cublaslt-i8.e8.", DataType::kInt8);
    const Best i32 = fastest(ltc, c.layer, "cublaslt-i8.i32.", DataType::kInt8);
    const Best ci8 = fastest(i8c, c.layer, "cuda-i8.", DataType::kInt8);
    const Best ci8x = fastest(i8x, exactLayer, "cuda-i8.", DataType::kInt8);
    const Best pw = fastest(i8c, c.layer, "cuda-i8.pw", DataType::kInt8);
    const Best f16 = fastest(dnc, c.layer, "cudnn", DataType::kFloat16);
    const int64_t hwOut = (l.hw - 1) / l.stride + 1;
    const double gops = 2.0 * c.N * hwOut * hwOut * l.cin * l.cout * 1e-9;
    // int8 bytes the layer must move at least: its input, output and residual once each
    const double mb =
        1e-6 * c.N * (l.hw * l.hw * l.cin + hwOut * hwOut * l.cout * (l.residual ? 2 : 1));
    std::printf(
        "[          ] %-34s cublaslt-i8 e8 %.4f (%d, %.0f TOP/s) i32 %.4f (%d) | cuda-i8 %.4f "
        "(%d), "
        "bit-exact %.4f | pointwise %.4f (%.0f GB/s of %.1f MB) | cudnn fp16 %.4f (%d)\n",
        l.name, e8.ms, e8.n, gops / e8.ms, i32.ms, i32.n, ci8.ms, ci8.n, ci8x.ms, pw.ms, mb / pw.ms,
        mb, f16.ms, f16.n);
    std::printf("[          ]   %s | %s | %s | %s | %s | %s\n", e8.id.c_str(), i32.id.c_str(),
                ci8.id.c_str(), ci8x.id.c_str(), pw.id.c_str(), f16.id.c_str());
    std::fflush(stdout);
    if (l.stride == 1) {  // a GEMM only without strides
      EXPECT_GT(i32.n, 0) << lt.lastReason();
    }
  }
}

// ResNet-50's 3x3 convolutions at batch 64 (EDGEINFER_PERF_BATCH=N: another batch): every
// cuda-i8 kernel (int8 in and out, the default fast rounding; the best bit-exact one after them)
// against cuDNN's best FP16 engine. EDGEINFER_PERF_LAYERS=TEXT keeps the layers whose name
// contains it (e.g. for a profiler run on one layer).
TEST(CudaInt8Perf, ResNet50ThreeByThreeConvsAtBatch64) {
  EI_SKIP_WITHOUT_GPU();
  if (!std::getenv("EDGEINFER_PERF_TESTS"))
    GTEST_SKIP() << "performance mode: set EDGEINFER_PERF_TESTS=1";
  const char* only = std::getenv("EDGEINFER_PERF_LAYERS");
  struct L {
    const char* name;
    int64_t hw, c, stride;
  };
  const L layers[] = {
      {"layer3.x.conv2 14x14 256", 14, 256, 1},     {"layer1.x.conv2 56x56 64", 56, 64, 1},
      {"layer2.x.conv2 28x28 128", 28, 128, 1},     {"layer4.x.conv2 7x7 512", 7, 512, 1},
      {"layer2.0.conv2 56->28 128 /2", 56, 128, 2},
  };
  const char* batchEnv = std::getenv("EDGEINFER_PERF_BATCH");
  const int64_t batch = batchEnv ? std::max(1, std::atoi(batchEnv)) : 64;
  std::printf("[          ] ms per layer, batch %lld, int8 in and out (CUDA-graph replays):\n",
              static_cast<long long>(batch));
  for (const L& l : layers) {
    if (only && !std::strstr(l.name, only)) continue;
    I8Case c;
    c.N = batch;
    c.H = c.W = l.hw;
    c.C = c.K = l.c;
    c.strides = {l.stride, l.stride};
    c.op = "FusedConv";
    c.act = "Relu";
    c.build();
    cuda::Int8ConvProvider i8;
    cuda::CudnnConvProvider dnn;
    auto i8c = i8.candidates(c.layer, Precision::kInt8);
    auto dnc = dnn.candidates(c.layer, Precision::kFp16);
    const double gops = 2.0 * c.N * (l.hw / l.stride) * (l.hw / l.stride) * 9 * l.c * l.c * 1e-9;
    for (auto& t : i8c) {
      if (t->outputFormat(0).dtype != DataType::kInt8 || !t->initialize(c.layer).ok()) continue;
      const double ms = graphTimeMs(*t, c.layer);
      std::printf("[          ] %-30s %-28s %.4f ms (%.0f TOP/s)\n", l.name, t->id().c_str(), ms,
                  gops / ms);
    }
    builder::LayerContext exactLayer = c.layer;
    exactLayer.int8BitExact = true;
    auto i8x = i8.candidates(exactLayer, Precision::kInt8);
    const Best x = fastest(i8x, exactLayer, "cuda-i8.", DataType::kInt8);
    std::printf("[          ] %-30s bit-exact best of %d        %.4f ms %s\n", l.name, x.n, x.ms,
                x.id.c_str());
    const Best f16 = fastest(dnc, c.layer, "cudnn", DataType::kFloat16);
    std::printf("[          ] %-30s cudnn fp16 best of %d       %.4f ms (%.0f TFLOP/s) %s\n",
                l.name, f16.n, f16.ms, gops / f16.ms, f16.id.c_str());
    std::fflush(stdout);
    EXPECT_FALSE(i8c.empty()) << i8.lastReason();
  }
}

}  // namespace
}  // namespace edgeinfer

#else

TEST(CublasLtInt8, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif
