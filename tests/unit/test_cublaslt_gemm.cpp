// The cublaslt tactic provider (kernels/cuda/cublaslt_gemm.h): every candidate tactic of every
// case is run on the GPU and compared with the CPU reference (FP32 rel. L2 <= 1e-5, FP16 <=
// 3e-3). Negative cases (_n) check which layers get no candidate; most need no GPU. Without
// CUDA in the build only the availability test exists, and it skips.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/cublas_check.h"
#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/ref/ref_kernels.h"
#include "tactic_test_util.h"

namespace edgeinfer {
namespace {

using cuda::CublasLtGemmProvider;

Tensor randomTensor(const Shape& s, uint32_t seed, float scale = 1.f) {
  Tensor t = Tensor::zeros(DataType::kFloat32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

/// One Gemm / MatMul layer: a graph holding B (and C / bias) as constants, and the node.
struct GemmCase {
  std::string op = "Gemm";  // Gemm, MatMul, FusedGemm, FusedMatMul
  Shape a{13, 37}, b{37, 19}, c;
  bool hasC = false, constB = true, constC = true;
  int64_t transA = 0, transB = 0;
  float alpha = 1.f, beta = 1.f;
  bool setAlphaBeta = false;
  std::string act;
  float actAlpha = 0.f, actBeta = 0.f;
  bool setActParams = false;

  graph::Graph g;
  graph::Node node;
  Tensor x, w, z;

  bool isGemm() const { return op == "Gemm" || op == "FusedGemm"; }
  void build() {
    x = randomTensor(a, 1);
    w = randomTensor(b, 2, 0.5f);
    if (hasC) z = randomTensor(c, 3);
    node = graph::Node();
    node.name = "gemm";
    node.opType = op;
    node.domain = op.rfind("Fused", 0) == 0 ? graph::kEdgeInferDomain : "";
    node.inputs = {"A", "B"};
    if (hasC) node.inputs.push_back("C");
    node.outputs = {"Y"};
    if (isGemm()) {
      node.attrs.set("transA", graph::Attribute::Int(transA));
      node.attrs.set("transB", graph::Attribute::Int(transB));
      if (setAlphaBeta) {
        node.attrs.set("alpha", graph::Attribute::Float(alpha));
        node.attrs.set("beta", graph::Attribute::Float(beta));
      }
    }
    if (op.rfind("Fused", 0) == 0) {
      node.attrs.set("activation", graph::Attribute::String(act));
      if (setActParams) {
        node.attrs.set("activation_alpha", graph::Attribute::Float(actAlpha));
        node.attrs.set("activation_beta", graph::Attribute::Float(actBeta));
      }
    }
    if (constB) g.value("B").constant = w;
    if (hasC && constC) g.value("C").constant = z;
  }
  std::vector<const Tensor*> inputs() {
    std::vector<const Tensor*> in{&x, &w};
    if (hasC) in.push_back(&z);
    return in;
  }
  ::testing::AssertionResult layer(builder::LayerContext* l) {
    build();
    const Status s = test::makeLayer(node, g, inputs(), l);
    if (!s.ok()) return ::testing::AssertionFailure() << s.message();
    return ::testing::AssertionSuccess();
  }
};

struct Counts {
  int fp16 = 0, fp32 = 0;
};

/// Runs every candidate of `c` at `precision` and compares it with the reference.
Counts checkAllCandidates(GemmCase& c, Precision precision) {
  Counts n;
  builder::LayerContext layer;
  EXPECT_TRUE(c.layer(&layer));
  if (::testing::Test::HasFailure()) return n;
  std::vector<Tensor> expected;
  const Status rs = ref::runNode(c.node, c.inputs(), expected);
  EXPECT_TRUE(rs.ok()) << rs.message();
  if (!rs.ok()) return n;
  CublasLtGemmProvider provider;
  auto cands = provider.candidates(layer, precision);
  std::printf("  %zu candidates (%s)\n", cands.size(), provider.lastReason().c_str());
  double worst16 = 0, worst32 = 0;
  for (auto& t : cands) {
    const Status is = t->initialize(layer);
    EXPECT_TRUE(is.ok()) << t->id() << ": " << is.message();
    if (!is.ok()) continue;
    auto r = test::runTactic(*t, layer, c.inputs());
    EXPECT_TRUE(r.ok()) << t->id() << ": " << r.status().message();
    if (!r.ok()) continue;
    EXPECT_EQ(r.value()[0].shape(), expected[0].shape()) << t->id();
    if (r.value()[0].shape() != expected[0].shape()) continue;
    const double err = test::relL2(r.value()[0], expected[0]);
    const bool half = t->outputFormat(0).dtype == DataType::kFloat16;
    EXPECT_LE(err, half ? 3e-3 : 1e-5) << t->id();
    EXPECT_EQ(t->id().rfind(half ? "cublaslt.fp16.a" : "cublaslt.fp32.a", 0), 0u) << t->id();
    std::printf("    %-62s ws %8zu  rel L2 %.2e\n", t->id().c_str(), t->workspaceBytes(), err);
    if (half) {
      ++n.fp16;
      worst16 = std::max(worst16, err);
    } else {
      ++n.fp32;
      worst32 = std::max(worst32, err);
    }
  }
  std::printf("  fp16 %d (worst rel L2 %.2e), fp32 %d (worst %.2e)\n", n.fp16, worst16, n.fp32,
              worst32);
  std::fflush(stdout);
  return n;
}

TEST(CublasLtGemm, GemmOddSizesTransBBiasN) {
  EI_SKIP_WITHOUT_GPU();
  GemmCase c;
  c.a = Shape{13, 37}, c.b = Shape{19, 37}, c.transB = 1;
  c.hasC = true, c.c = Shape{19};
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.fp16, 0);
  EXPECT_GT(n.fp32, 0);
}

TEST(CublasLtGemm, GemmTransAAlphaBetaRuntimeCMN) {
  EI_SKIP_WITHOUT_GPU();
  GemmCase c;
  c.a = Shape{37, 13}, c.b = Shape{37, 19}, c.transA = 1;
  c.setAlphaBeta = true, c.alpha = 0.5f, c.beta = 2.f;
  c.hasC = true, c.c = Shape{13, 19}, c.constC = false;  // a runtime C: the matmul's C input
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.fp16, 0);
  EXPECT_GT(n.fp32, 0);
}

TEST(CublasLtGemm, GemmConstantBroadcastC) {
  EI_SKIP_WITHOUT_GPU();
  struct B {
    Shape c;
    int64_t transA, transB;
  } shapes[] = {{Shape{13, 19}, 1, 1},  // constant [M, N]: stored once, matmul C
                {Shape{13, 1}, 0, 0},   // a column: broadcast to [M, N] once
                {Shape{19}, 0, 1},      // a row with beta != 1: bias = beta * C
                {Shape{}, 1, 0}};       // a scalar: a bias of N copies
  for (const B& s : shapes) {
    SCOPED_TRACE(s.c.toString());
    std::printf(" C %s:\n", s.c.toString().c_str());
    GemmCase c;
    c.transA = s.transA, c.transB = s.transB;
    c.a = s.transA ? Shape{37, 13} : Shape{13, 37};
    c.b = s.transB ? Shape{19, 37} : Shape{37, 19};
    c.setAlphaBeta = true, c.alpha = 1.5f, c.beta = 0.7f;
    c.hasC = true, c.c = s.c;
    const Counts n = checkAllCandidates(c, Precision::kFp16);
    EXPECT_GT(n.fp16 + n.fp32, 0);
  }
}

TEST(CublasLtGemm, MatMulBatchedAFoldsIntoM) {
  EI_SKIP_WITHOUT_GPU();
  GemmCase c;
  c.op = "MatMul", c.a = Shape{2, 3, 13, 37}, c.b = Shape{37, 19};
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.fp16, 0);
  EXPECT_GT(n.fp32, 0);
}

// Decision: a 1-D A is a row vector (M = 1, the result drops the dim) and is offered; a 1-D B
// is not (see OneDimB_n).
TEST(CublasLtGemm, MatMulOneDimA) {
  EI_SKIP_WITHOUT_GPU();
  GemmCase c;
  c.op = "MatMul", c.a = Shape{37}, c.b = Shape{1, 37, 19};
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.fp16 + n.fp32, 0);
}

TEST(CublasLtGemm, FusedGemmBiasRelu) {
  EI_SKIP_WITHOUT_GPU();
  GemmCase c;
  c.op = "FusedGemm", c.act = "Relu";
  c.a = Shape{13, 37}, c.b = Shape{19, 37}, c.transB = 1;
  c.hasC = true, c.c = Shape{1, 19};
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.fp16, 0);
  EXPECT_GT(n.fp32, 0);
}

TEST(CublasLtGemm, FusedGemmReluRuntimeC) {
  EI_SKIP_WITHOUT_GPU();
  GemmCase c;
  c.op = "FusedGemm", c.act = "Clip", c.setActParams = true, c.actAlpha = 0.f,
  c.actBeta = INFINITY;  // Clip(0, +inf) == Relu
  c.setAlphaBeta = true, c.alpha = 0.5f, c.beta = 2.f;
  c.hasC = true, c.c = Shape{13, 19}, c.constC = false;
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.fp16 + n.fp32, 0);
}

TEST(CublasLtGemm, FusedMatMulBiasRelu) {
  EI_SKIP_WITHOUT_GPU();
  GemmCase c;
  c.op = "FusedMatMul", c.act = "Relu";
  c.a = Shape{2, 13, 37}, c.b = Shape{37, 19};
  c.hasC = true, c.c = Shape{19};
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.fp16, 0);
  EXPECT_GT(n.fp32, 0);
}

TEST(CublasLtGemm, Fp32PrecisionOffersOnlyFp32) {
  EI_SKIP_WITHOUT_GPU();
  GemmCase c;
  c.a = Shape{13, 37}, c.b = Shape{19, 37}, c.transB = 1;
  c.hasC = true, c.c = Shape{19};
  const Counts n = checkAllCandidates(c, Precision::kFp32);
  EXPECT_EQ(n.fp16, 0);
  EXPECT_GT(n.fp32, 0);
}

// ---- Negative cases: no candidate, for a reason ------------------------------------------

std::string reasonFor(GemmCase& c, Precision p = Precision::kFp16) {
  builder::LayerContext layer;
  EXPECT_TRUE(c.layer(&layer));
  CublasLtGemmProvider provider;
  EXPECT_EQ(provider.candidates(layer, p).size(), 0u) << provider.lastReason();
  return provider.lastReason();
}

/// A layer context without shape inference (for inputs the shape functions refuse).
builder::LayerContext manualLayer(const graph::Node& node, const graph::Graph& g,
                                  std::vector<Shape> in, std::vector<DataType> types, Shape out,
                                  DataType outType) {
  builder::LayerContext l;
  l.node = &node;
  l.graph = &g;
  l.inputShapes = std::move(in);
  l.inputTypes = std::move(types);
  l.outputShapes = {std::move(out)};
  l.outputTypes = {outType};
  return l;
}

// Decision: B must be a constant. The tactic converts it once (K-major, tactic precision) in
// initialize(); a runtime B is a different tactic (left to other providers).
TEST(CublasLtGemm, NonConstantB_n) {
  GemmCase c;
  c.constB = false;
  EXPECT_NE(reasonFor(c).find("B is not a constant"), std::string::npos);
  GemmCase m;
  m.op = "MatMul", m.constB = false;
  EXPECT_NE(reasonFor(m).find("B is not a constant"), std::string::npos);
}

TEST(CublasLtGemm, UnsupportedActivations_n) {
  struct A {
    const char* name;
    float alpha, beta;
  } acts[] = {{"Sigmoid", 0, 0}, {"LeakyRelu", 0.1f, 0}, {"Clip", 0.f, 6.f}, {"Tanh", 0, 0}};
  for (const A& a : acts) {
    SCOPED_TRACE(a.name);
    GemmCase c;
    c.op = "FusedGemm", c.act = a.name, c.setActParams = true, c.actAlpha = a.alpha,
    c.actBeta = a.beta;
    c.hasC = true, c.c = Shape{19};
    EXPECT_NE(reasonFor(c).find("no exact cuBLASLt epilogue"), std::string::npos);
    GemmCase m;
    m.op = "FusedMatMul", m.act = a.name, m.setActParams = true, m.actAlpha = a.alpha,
    m.actBeta = a.beta;
    EXPECT_NE(reasonFor(m).find("no exact cuBLASLt epilogue"), std::string::npos);
  }
}

TEST(CublasLtGemm, Int8Input_n) {
  GemmCase c;
  c.build();
  builder::LayerContext layer =
      manualLayer(c.node, c.g, {Shape{13, 37}, Shape{37, 19}}, {DataType::kInt8, DataType::kInt8},
                  Shape{13, 19}, DataType::kInt32);
  CublasLtGemmProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("float32 or float16"), std::string::npos) << p.lastReason();
}

TEST(CublasLtGemm, Int8Precision_n) {
  GemmCase c;
  EXPECT_NE(reasonFor(c, Precision::kInt8).find("int8"), std::string::npos);
}

// Decision: a 1-D B (matrix-vector product; FusedMatMul's bias then follows the rows) gets no
// candidate; a 1-D A is offered (MatMulOneDimA).
TEST(CublasLtGemm, OneDimB_n) {
  GemmCase c;
  c.op = "MatMul", c.a = Shape{13, 37}, c.b = Shape{37};
  EXPECT_NE(reasonFor(c).find("1-D B"), std::string::npos);
}

TEST(CublasLtGemm, BatchedB_n) {
  GemmCase c;
  c.op = "MatMul", c.a = Shape{2, 13, 37}, c.b = Shape{2, 37, 19};
  EXPECT_NE(reasonFor(c).find("batch"), std::string::npos);
}

TEST(CublasLtGemm, DynamicShape_n) {
  GemmCase c;
  c.op = "MatMul";
  c.build();
  builder::LayerContext layer =
      manualLayer(c.node, c.g, {Shape{-1, 13, 37}, Shape{37, 19}},
                  {DataType::kFloat32, DataType::kFloat32}, Shape{-1, 13, 19}, DataType::kFloat32);
  CublasLtGemmProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("static"), std::string::npos) << p.lastReason();
}

TEST(CublasLtGemm, RuntimeBroadcastC_n) {
  GemmCase c;
  c.hasC = true, c.c = Shape{19}, c.constC = false;  // would need a broadcast per inference
  EXPECT_NE(reasonFor(c).find("runtime C"), std::string::npos);
}

TEST(CublasLtGemm, NonConstantBias_n) {
  GemmCase c;
  c.op = "FusedMatMul", c.act = "Relu", c.hasC = true, c.c = Shape{19}, c.constC = false;
  EXPECT_NE(reasonFor(c).find("bias is not a constant"), std::string::npos);
}

TEST(CublasLtGemm, NotAGemm_n) {
  GemmCase c;
  c.build();
  c.node.opType = "Conv";
  builder::LayerContext layer =
      manualLayer(c.node, c.g, {Shape{13, 37}, Shape{37, 19}},
                  {DataType::kFloat32, DataType::kFloat32}, Shape{13, 19}, DataType::kFloat32);
  CublasLtGemmProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  c.node.opType = "FusedGemm";  // right name, wrong (ONNX) domain
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("not a Gemm"), std::string::npos) << p.lastReason();
}

TEST(CublasLtGemm, ShapeMismatch_n) {
  GemmCase c;
  c.build();
  CublasLtGemmProvider p;
  builder::LayerContext inner =
      manualLayer(c.node, c.g, {Shape{13, 36}, Shape{37, 19}},
                  {DataType::kFloat32, DataType::kFloat32}, Shape{13, 19}, DataType::kFloat32);
  EXPECT_TRUE(p.candidates(inner, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("inner dimensions"), std::string::npos) << p.lastReason();
  builder::LayerContext out =
      manualLayer(c.node, c.g, {Shape{13, 37}, Shape{37, 19}},
                  {DataType::kFloat32, DataType::kFloat32}, Shape{13, 18}, DataType::kFloat32);
  EXPECT_TRUE(p.candidates(out, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("disagrees"), std::string::npos) << p.lastReason();
}

TEST(CublasLtGemm, EnqueueBeforeInitialize_n) {
  EI_SKIP_WITHOUT_GPU();
  GemmCase c;
  c.hasC = true, c.c = Shape{19};
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  CublasLtGemmProvider p;
  auto cands = p.candidates(layer, Precision::kFp32);
  ASSERT_FALSE(cands.empty()) << p.lastReason();
  builder::LaunchArgs args;
  args.inputs = {nullptr, nullptr, nullptr};
  args.outputs = {nullptr};
  const Status s = cands[0]->enqueue(args);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("before initialize"), std::string::npos) << s.message();
  ASSERT_TRUE(cands[0]->initialize(layer).ok());
  const Status s2 = cands[0]->enqueue(args);  // initialised, but null pointers
  EXPECT_FALSE(s2.ok());
  EXPECT_NE(s2.message().find("missing input"), std::string::npos) << s2.message();
}

TEST(CublasLtGemm, CheckMacroReportsCallAndLine_n) {
  const auto f = []() -> Status {
    EI_CUBLAS_CHECK(CUBLAS_STATUS_NOT_SUPPORTED);
    return Status::Ok();
  };
  const Status s = f();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("CUBLAS_STATUS_NOT_SUPPORTED"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("test_cublaslt_gemm.cpp:"), std::string::npos) << s.message();
}

// ---- Performance (printing only) ---------------------------------------------------------

/// ResNet-50's classifier: Gemm(A [M, 2048], B [1000, 2048], transB = 1, C [1000]).
void timeAllCandidates(int64_t M, int64_t K, int64_t N) {
  GemmCase c;
  c.a = Shape{M, K}, c.b = Shape{N, K}, c.transB = 1, c.hasC = true, c.c = Shape{N};
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  CublasLtGemmProvider provider;
  auto cands = provider.candidates(layer, Precision::kFp16);
  std::printf("gemm [%ld,%ld]x[%ld,%ld] + bias: %zu candidates (%s)\n", static_cast<long>(M),
              static_cast<long>(K), static_cast<long>(K), static_cast<long>(N), cands.size(),
              provider.lastReason().c_str());
  test::printTacticTimings(cands, layer, c.x);
}

TEST(CublasLtGemm, PerfTable) {
  EI_SKIP_WITHOUT_GPU();
  timeAllCandidates(64, 2048, 1000);
  timeAllCandidates(1, 2048, 1000);
}

}  // namespace
}  // namespace edgeinfer

#endif  // EDGEINFER_HAVE_CUDA

TEST(CublasLtGemm, Availability) {
#ifndef EDGEINFER_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  EI_SKIP_WITHOUT_GPU();
  edgeinfer::cuda::CublasLtGemmProvider p;
  EXPECT_EQ(p.name(), "cublaslt");
#endif
}
