// The cuda-dw tactic provider (kernels/cuda/depthwise_conv.h): every candidate tactic of every
// case runs on the GPU and is compared with the CPU reference (FP32 rel. L2 <= 1e-5, FP16 <=
// 2e-3). Which candidates are offered, and the negative cases (_n: no candidate, for a reason),
// need no GPU. Without CUDA in the build only the availability test exists, and it skips.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/cuda/cudnn_conv.h"
#include "kernels/cuda/depthwise_conv.h"
#include "kernels/ref/ref_kernels.h"
#include "tactic_test_util.h"

namespace edgeinfer {
namespace {

using builder::Layout;
using cuda::DepthwiseConvProvider;

Tensor randomTensor(const Shape& s, uint32_t seed, float scale = 1.f) {
  Tensor t = Tensor::zeros(DataType::kFloat32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

/// One depthwise layer: a graph holding W (and B) as constants and the node. K = mult * C.
struct DwCase {
  std::string op = "Conv";  // or "FusedConv"
  int64_t N = 1, C = 8, H = 9, W = 9, mult = 1, R = 3, S = 3;
  int64_t group = -1;  // -1: C (depthwise)
  std::vector<int64_t> strides{1, 1}, dilations{1, 1}, pads{1, 1, 1, 1};
  std::string autoPad;
  bool bias = false, residual = false, constWeights = true, constBias = true;
  std::string act;
  float alpha = 0.f, beta = 0.f;

  graph::Graph g;
  graph::Node node;
  Tensor x, w, b, z;

  int64_t K() const { return C * mult; }
  void build() {
    const int64_t grp = group < 0 ? C : group;
    x = randomTensor(Shape{N, C, H, W}, 1);
    w = randomTensor(Shape{K(), C / grp, R, S}, 2, 0.5f);
    b = randomTensor(Shape{K()}, 3);
    node = graph::Node{};
    node.name = "dwconv";
    node.opType = op;
    node.domain = op == "FusedConv" ? graph::kEdgeInferDomain : "";
    node.inputs = {"X", "W"};
    if (bias || residual) node.inputs.push_back(bias ? "B" : "");
    if (residual) node.inputs.push_back("Z");
    node.outputs = {"Y"};
    node.attrs.set("group", graph::Attribute::Int(grp));
    node.attrs.set("strides", graph::Attribute::Ints(strides));
    node.attrs.set("dilations", graph::Attribute::Ints(dilations));
    if (autoPad.empty())
      node.attrs.set("pads", graph::Attribute::Ints(pads));
    else
      node.attrs.set("auto_pad", graph::Attribute::String(autoPad));
    if (op == "FusedConv") {
      node.attrs.set("activation", graph::Attribute::String(act));
      node.attrs.set("activation_alpha", graph::Attribute::Float(alpha));
      node.attrs.set("activation_beta", graph::Attribute::Float(beta));
    }
    if (constWeights) g.value("W").constant = w;
    if (bias && constBias) g.value("B").constant = b;
  }
  std::vector<const Tensor*> inputs() {
    std::vector<const Tensor*> in{&x, &w};
    if (bias || residual) in.push_back(bias ? &b : nullptr);
    if (residual) in.push_back(&z);
    return in;
  }
  /// Builds the graph and the layer; the residual gets the output's shape.
  ::testing::AssertionResult layer(builder::LayerContext* l) {
    build();
    if (residual) {
      builder::LayerContext tmp;
      graph::Node plain = node;
      plain.inputs.resize(2);
      graph::Graph g2;
      g2.value("W").constant = w;
      const Status s0 = test::makeLayer(plain, g2, {&x, &w}, &tmp);
      if (!s0.ok()) return ::testing::AssertionFailure() << s0.message();
      z = randomTensor(tmp.outputShapes[0], 4);
    }
    const Status s = test::makeLayer(node, g, inputs(), l);
    if (!s.ok()) return ::testing::AssertionFailure() << s.message();
    return ::testing::AssertionSuccess();
  }
};

std::vector<std::string> idsOf(DwCase& c, Precision p) {
  builder::LayerContext layer;
  EXPECT_TRUE(c.layer(&layer));
  DepthwiseConvProvider provider;
  std::vector<std::string> ids;
  for (const auto& t : provider.candidates(layer, p)) ids.push_back(t->id());
  return ids;
}

/// Runs every candidate of `c` at `precision` and compares it with the reference; returns the
/// number of tactics checked.
int checkAllCandidates(DwCase& c, Precision precision) {
  builder::LayerContext layer;
  EXPECT_TRUE(c.layer(&layer));
  if (::testing::Test::HasFailure()) return 0;
  std::vector<Tensor> expected;
  const Status rs = ref::runNode(c.node, c.inputs(), expected);
  EXPECT_TRUE(rs.ok()) << rs.message();
  if (!rs.ok()) return 0;
  DepthwiseConvProvider provider;
  auto cands = provider.candidates(layer, precision);
  EXPECT_FALSE(cands.empty()) << provider.lastReason();
  int checked = 0;
  double worst16 = 0, worst32 = 0;
  for (auto& t : cands) {
    const Status is = t->initialize(layer);
    EXPECT_TRUE(is.ok()) << t->id() << ": " << is.message();
    if (!is.ok()) continue;
    auto r = test::runTactic(*t, layer, c.inputs());
    EXPECT_TRUE(r.ok()) << t->id() << ": " << r.status().message();
    if (!r.ok()) continue;
    const double err = test::relL2(r.value()[0], expected[0]);
    const bool half = t->outputFormat(0).dtype == DataType::kFloat16;
    EXPECT_LE(err, half ? 2e-3 : 1e-5) << t->id();
    (half ? worst16 : worst32) = std::max(half ? worst16 : worst32, err);
    ++checked;
  }
  std::printf("  %d tactics, worst rel L2 fp16 %.2e, fp32 %.2e\n", checked, worst16, worst32);
  std::fflush(stdout);
  return checked;
}

// ---- Which candidates are offered (no GPU needed) ----------------------------------------

TEST(CudaDepthwise, Candidates3x3Fp16) {
  DwCase c;
  const std::vector<std::string> ids = idsOf(c, Precision::kFp16);
  const std::set<std::string> got(ids.begin(), ids.end());
  const std::set<std::string> want{"cuda-dw.k3.fp16.nchw",      "cuda-dw.k3.fp16.nhwc",
                                   "cuda-dw.k3.fp32.nchw",      "cuda-dw.k3.fp32.nhwc",
                                   "cuda-dw.generic.fp16.nchw", "cuda-dw.generic.fp16.nhwc",
                                   "cuda-dw.generic.fp32.nchw", "cuda-dw.generic.fp32.nhwc"};
  EXPECT_EQ(got, want);
  EXPECT_EQ(ids.size(), want.size());  // no duplicates
}

TEST(CudaDepthwise, CandidatesFp32PrecisionOnlyFp32) {
  DwCase c;
  c.R = c.S = 5, c.pads = {2, 2, 2, 2};
  const std::vector<std::string> ids = idsOf(c, Precision::kFp32);
  const std::set<std::string> got(ids.begin(), ids.end());
  const std::set<std::string> want{"cuda-dw.k5.fp32.nchw", "cuda-dw.k5.fp32.nhwc",
                                   "cuda-dw.generic.fp32.nchw", "cuda-dw.generic.fp32.nhwc"};
  EXPECT_EQ(got, want);
}

TEST(CudaDepthwise, CandidatesOtherSizesGenericOnly) {
  DwCase c;
  c.R = 3, c.S = 5, c.pads = {1, 2, 1, 2};
  for (const std::string& id : idsOf(c, Precision::kFp16))
    EXPECT_EQ(id.rfind("cuda-dw.generic.", 0), 0u) << id;
  DwCase c7;
  c7.R = c7.S = 7, c7.pads = {3, 3, 3, 3};
  EXPECT_EQ(idsOf(c7, Precision::kFp16).size(), 4u);
}

TEST(CudaDepthwise, CandidatesConsumeWeightsAndBias) {
  DwCase c;
  c.op = "FusedConv", c.bias = true, c.residual = true, c.act = "Relu";
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  DepthwiseConvProvider p;
  auto cands = p.candidates(layer, Precision::kFp16);
  ASSERT_FALSE(cands.empty()) << p.lastReason();
  for (const auto& t : cands) {
    EXPECT_FALSE(t->consumesInput(0)) << t->id();
    EXPECT_TRUE(t->consumesInput(1)) << t->id();
    EXPECT_TRUE(t->consumesInput(2)) << t->id();
    EXPECT_FALSE(t->consumesInput(3)) << t->id();
    EXPECT_EQ(t->inputFormat(3), t->outputFormat(0)) << t->id();
    EXPECT_EQ(t->workspaceBytes(), 0u);
  }
}

// ---- Every tactic against the CPU reference (GPU) -----------------------------------------

TEST(CudaDepthwise, Plain3x3OddSizes) {
  EI_SKIP_WITHOUT_GPU();
  DwCase c;
  c.N = 2, c.C = 24, c.H = 13, c.W = 11;
  EXPECT_EQ(checkAllCandidates(c, Precision::kFp16), 8);
}

TEST(CudaDepthwise, Stride2AsymmetricPadsOddChannelsBias) {
  EI_SKIP_WITHOUT_GPU();
  DwCase c;
  c.N = 1, c.C = 7, c.H = 15, c.W = 12, c.strides = {2, 2}, c.pads = {0, 1, 1, 0}, c.bias = true;
  EXPECT_EQ(checkAllCandidates(c, Precision::kFp16), 8);
}

TEST(CudaDepthwise, Fused5x5Stride2BiasHardSwish) {
  EI_SKIP_WITHOUT_GPU();
  DwCase c;
  c.op = "FusedConv", c.bias = true, c.act = "HardSwish";
  c.N = 1, c.C = 40, c.H = 17, c.W = 19, c.R = c.S = 5, c.strides = {2, 2}, c.pads = {2, 2, 2, 2};
  EXPECT_EQ(checkAllCandidates(c, Precision::kFp16), 8);
}

TEST(CudaDepthwise, FusedDilatedBiasResidualRelu) {
  EI_SKIP_WITHOUT_GPU();
  DwCase c;
  c.op = "FusedConv", c.bias = true, c.residual = true, c.act = "Relu";
  c.N = 2, c.C = 16, c.H = 11, c.W = 9, c.dilations = {2, 2}, c.pads = {2, 2, 2, 2};
  EXPECT_EQ(checkAllCandidates(c, Precision::kFp16), 8);
}

TEST(CudaDepthwise, FusedResidualWithoutBias) {
  EI_SKIP_WITHOUT_GPU();
  DwCase c;
  c.op = "FusedConv", c.residual = true, c.act = "";
  c.N = 1, c.C = 10, c.H = 7, c.W = 9;
  EXPECT_EQ(checkAllCandidates(c, Precision::kFp16), 8);
}

TEST(CudaDepthwise, Generic7x7MixedStrideDilationHalf2) {
  EI_SKIP_WITHOUT_GPU();
  DwCase c;  // C = 6: the fp16 NHWC kernel takes half2 vectors
  c.op = "FusedConv", c.bias = true, c.act = "Sigmoid";
  c.N = 1, c.C = 6, c.H = 21, c.W = 16, c.R = c.S = 7, c.strides = {1, 2}, c.dilations = {2, 1},
  c.pads = {6, 3, 5, 2};
  EXPECT_EQ(checkAllCandidates(c, Precision::kFp16), 4);
}

TEST(CudaDepthwise, GenericNonSquareKernel) {
  EI_SKIP_WITHOUT_GPU();
  DwCase c;
  c.N = 3, c.C = 9, c.H = 10, c.W = 13, c.R = 3, c.S = 1, c.pads = {1, 0, 1, 0};
  EXPECT_EQ(checkAllCandidates(c, Precision::kFp16), 4);
}

TEST(CudaDepthwise, Kernel1x1) {
  EI_SKIP_WITHOUT_GPU();
  DwCase c;
  c.N = 1, c.C = 32, c.H = 5, c.W = 7, c.R = c.S = 1, c.pads = {0, 0, 0, 0}, c.bias = true;
  EXPECT_EQ(checkAllCandidates(c, Precision::kFp16), 4);
}

TEST(CudaDepthwise, ChannelMultiplier2) {
  EI_SKIP_WITHOUT_GPU();
  DwCase c;
  c.op = "FusedConv", c.bias = true, c.act = "LeakyRelu", c.alpha = 0.1f;
  c.N = 2, c.C = 5, c.mult = 2, c.H = 9, c.W = 11, c.strides = {2, 1};
  EXPECT_EQ(checkAllCandidates(c, Precision::kFp16), 8);
}

TEST(CudaDepthwise, ChannelMultiplier3Generic) {
  EI_SKIP_WITHOUT_GPU();
  DwCase c;
  c.N = 1, c.C = 4, c.mult = 3, c.H = 8, c.W = 7, c.R = c.S = 4, c.pads = {1, 2, 2, 1};
  EXPECT_EQ(checkAllCandidates(c, Precision::kFp16), 4);
}

TEST(CudaDepthwise, AutoPadSameUpperStride2) {
  EI_SKIP_WITHOUT_GPU();
  DwCase c;
  c.N = 1, c.C = 16, c.H = 10, c.W = 7, c.strides = {2, 2}, c.autoPad = "SAME_UPPER", c.R = c.S = 5;
  EXPECT_EQ(checkAllCandidates(c, Precision::kFp16), 8);
}

TEST(CudaDepthwise, Fp32PrecisionOffersOnlyFp32) {
  EI_SKIP_WITHOUT_GPU();
  DwCase c;
  c.N = 2, c.C = 12, c.H = 13, c.W = 11, c.strides = {2, 2};
  EXPECT_EQ(checkAllCandidates(c, Precision::kFp32), 4);
}

TEST(CudaDepthwise, EveryActivationWithResidual) {
  EI_SKIP_WITHOUT_GPU();
  struct A {
    const char* name;
    float alpha, beta;
  } acts[] = {{"Relu", 0, 0},        {"LeakyRelu", 0.2f, 0},
              {"Clip", -0.5f, 0.7f}, {"Clip", -INFINITY, 6},
              {"Sigmoid", 0, 0},     {"HardSigmoid", 0.2f, 0.5f},
              {"HardSwish", 0, 0},   {"Tanh", 0, 0},
              {"Elu", 0.7f, 0},      {"Selu", 1.6732632f, 1.0507010f},
              {"Softplus", 0, 0}};
  for (const A& a : acts) {
    SCOPED_TRACE(a.name);
    std::printf(" %s(%g, %g):\n", a.name, a.alpha, a.beta);
    DwCase c;
    c.op = "FusedConv", c.bias = true, c.residual = true, c.act = a.name, c.alpha = a.alpha,
    c.beta = a.beta;
    c.N = 1, c.C = 16, c.H = 9, c.W = 7;
    EXPECT_EQ(checkAllCandidates(c, Precision::kFp16), 8);
  }
}

TEST(CudaDepthwise, EnqueueBeforeInitialize_n) {
  EI_SKIP_WITHOUT_GPU();
  DwCase c;
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  DepthwiseConvProvider p;
  auto cands = p.candidates(layer, Precision::kFp32);
  ASSERT_FALSE(cands.empty()) << p.lastReason();
  builder::LaunchArgs args;
  args.inputs = {nullptr, nullptr};
  args.outputs = {nullptr};
  const Status s = cands[0]->enqueue(args);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("before initialize"), std::string::npos) << s.message();
  ASSERT_TRUE(cands[0]->initialize(layer).ok());
  EXPECT_FALSE(cands[0]->enqueue(args).ok());  // initialised, but null pointers
}

TEST(CudaDepthwise, ResidualPointerMissing_n) {
  EI_SKIP_WITHOUT_GPU();
  DwCase c;
  c.op = "FusedConv", c.residual = true;
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  DepthwiseConvProvider p;
  auto cands = p.candidates(layer, Precision::kFp32);
  ASSERT_FALSE(cands.empty()) << p.lastReason();
  ASSERT_TRUE(cands[0]->initialize(layer).ok());
  builder::LaunchArgs args;
  int dummy = 0;
  args.inputs = {&dummy, nullptr, nullptr};  // no Z
  args.outputs = {&dummy};
  EXPECT_FALSE(cands[0]->enqueue(args).ok());
}

// ---- Negative cases: no candidate, for a reason (no GPU needed) -----------------------------

std::string reasonFor(DwCase& c, Precision p = Precision::kFp16) {
  builder::LayerContext layer;
  EXPECT_TRUE(c.layer(&layer));
  DepthwiseConvProvider provider;
  EXPECT_TRUE(provider.candidates(layer, p).empty()) << provider.lastReason();
  return provider.lastReason();
}

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

TEST(CudaDepthwise, RegularConv_n) {
  DwCase c;
  c.group = 1;
  EXPECT_NE(reasonFor(c).find("group != C_in"), std::string::npos);
}

TEST(CudaDepthwise, GroupedNotDepthwise_n) {
  DwCase c;
  c.C = 8, c.group = 4;
  EXPECT_NE(reasonFor(c).find("group != C_in"), std::string::npos);
}

TEST(CudaDepthwise, NonConstantWeights_n) {
  DwCase c;
  c.constWeights = false;
  EXPECT_NE(reasonFor(c).find("weights are not a constant"), std::string::npos);
}

TEST(CudaDepthwise, NonConstantBias_n) {
  DwCase c;
  c.op = "FusedConv", c.bias = true, c.constBias = false, c.act = "Relu";
  EXPECT_NE(reasonFor(c).find("bias is not a constant"), std::string::npos);
}

TEST(CudaDepthwise, DynamicShape_n) {
  DwCase c;
  c.build();
  builder::LayerContext layer =
      manualLayer(c.node, c.g, {Shape{-1, 8, 9, 9}, Shape{8, 1, 3, 3}},
                  {DataType::kFloat32, DataType::kFloat32}, Shape{-1, 8, 9, 9}, DataType::kFloat32);
  DepthwiseConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("static"), std::string::npos) << p.lastReason();
}

TEST(CudaDepthwise, Conv1D_n) {
  DwCase c;
  c.build();
  builder::LayerContext layer =
      manualLayer(c.node, c.g, {Shape{1, 8, 9}, Shape{8, 1, 3}},
                  {DataType::kFloat32, DataType::kFloat32}, Shape{1, 8, 9}, DataType::kFloat32);
  DepthwiseConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp32).empty());
  EXPECT_NE(p.lastReason().find("2-D"), std::string::npos) << p.lastReason();
}

TEST(CudaDepthwise, Conv3D_n) {
  DwCase c;
  c.build();
  c.x = randomTensor(Shape{1, 8, 5, 5, 5}, 1);
  c.w = randomTensor(Shape{8, 1, 3, 3, 3}, 2);
  c.g.value("W").constant = c.w;
  c.node.attrs.set("strides", graph::Attribute::Ints({1, 1, 1}));
  c.node.attrs.set("dilations", graph::Attribute::Ints({1, 1, 1}));
  c.node.attrs.set("pads", graph::Attribute::Ints({1, 1, 1, 1, 1, 1}));
  builder::LayerContext layer;
  const Status s = test::makeLayer(c.node, c.g, {&c.x, &c.w}, &layer);
  ASSERT_TRUE(s.ok()) << s.message();
  DepthwiseConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("2-D"), std::string::npos) << p.lastReason();
}

TEST(CudaDepthwise, Int8Precision_n) {
  DwCase c;
  EXPECT_NE(reasonFor(c, Precision::kInt8).find("int8"), std::string::npos);
}

TEST(CudaDepthwise, Int8Input_n) {
  DwCase c;
  c.build();
  builder::LayerContext layer =
      manualLayer(c.node, c.g, {Shape{1, 8, 9, 9}, Shape{8, 1, 3, 3}},
                  {DataType::kInt8, DataType::kFloat32}, Shape{1, 8, 9, 9}, DataType::kFloat32);
  DepthwiseConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("float32 or float16"), std::string::npos) << p.lastReason();
}

TEST(CudaDepthwise, NotAConv_n) {
  DwCase c;
  c.build();
  c.node.opType = "ConvTranspose";
  builder::LayerContext layer =
      manualLayer(c.node, c.g, {Shape{1, 8, 9, 9}, Shape{8, 1, 3, 3}},
                  {DataType::kFloat32, DataType::kFloat32}, Shape{1, 8, 9, 9}, DataType::kFloat32);
  DepthwiseConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  c.node.opType = "FusedConv";  // right name, wrong (ONNX) domain
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("not a Conv"), std::string::npos) << p.lastReason();
}

TEST(CudaDepthwise, UnknownActivation_n) {
  DwCase c;
  c.op = "FusedConv", c.act = "Relu";
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  c.node.attrs.set("activation", graph::Attribute::String("Swish"));
  DepthwiseConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("unknown activation"), std::string::npos) << p.lastReason();
}

TEST(CudaDepthwise, OutputShapeMismatch_n) {
  DwCase c;
  c.build();
  builder::LayerContext layer =
      manualLayer(c.node, c.g, {Shape{1, 8, 9, 9}, Shape{8, 1, 3, 3}},
                  {DataType::kFloat32, DataType::kFloat32}, Shape{1, 8, 8, 9}, DataType::kFloat32);
  DepthwiseConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("disagrees"), std::string::npos) << p.lastReason();
}

TEST(CudaDepthwise, WeightChannelsNotOne_n) {
  DwCase c;
  c.build();
  c.w = randomTensor(Shape{8, 2, 3, 3}, 2);  // group == C but W says 2 channels per group
  c.g.value("W").constant = c.w;
  builder::LayerContext layer =
      manualLayer(c.node, c.g, {Shape{1, 8, 9, 9}, Shape{8, 2, 3, 3}},
                  {DataType::kFloat32, DataType::kFloat32}, Shape{1, 8, 9, 9}, DataType::kFloat32);
  DepthwiseConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("channel counts"), std::string::npos) << p.lastReason();
}

TEST(CudaDepthwise, ResidualOfOtherShape_n) {
  DwCase c;
  c.op = "FusedConv";
  c.build();
  c.node.inputs = {"X", "W", "", "Z"};
  builder::LayerContext layer = manualLayer(
      c.node, c.g, {Shape{1, 8, 9, 9}, Shape{8, 1, 3, 3}, Shape(), Shape{1, 8, 9, 1}},
      {DataType::kFloat32, DataType::kFloat32, DataType::kUndefined, DataType::kFloat32},
      Shape{1, 8, 9, 9}, DataType::kFloat32);
  DepthwiseConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("residual"), std::string::npos) << p.lastReason();
}

TEST(CudaDepthwise, TooLarge_n) {
  DwCase c;
  c.C = 1024;
  c.build();
  builder::LayerContext layer = manualLayer(
      c.node, c.g, {Shape{1, 1024, 1024, 1024}, Shape{1024, 1, 3, 3}},
      {DataType::kFloat32, DataType::kFloat32}, Shape{1, 1024, 1024, 1024}, DataType::kFloat32);
  DepthwiseConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("2^30"), std::string::npos) << p.lastReason();
}

// ---- Performance (printing only): MobileNetV2 / EfficientNet-B0 layers, vs cuDNN --------

void timeLayer(int64_t C, int64_t HW, int64_t R, int64_t stride) {
  DwCase c;
  c.op = "FusedConv", c.bias = true, c.act = "Clip", c.alpha = 0.f, c.beta = 6.f;
  c.N = 1, c.C = C, c.H = c.W = HW, c.R = c.S = R, c.strides = {stride, stride};
  const int64_t p = R / 2;
  c.pads = {p, p, p, p};
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  DepthwiseConvProvider dw;
  cuda::CudnnConvProvider cudnn;
  auto cands = dw.candidates(layer, Precision::kFp16);
  for (auto& t : cudnn.candidates(layer, Precision::kFp16)) cands.push_back(std::move(t));
  std::printf("depthwise N=1 C=%ld %ldx%ld k%ld s%ld + bias + Clip(0,6): %zu candidates\n",
              static_cast<long>(C), static_cast<long>(HW), static_cast<long>(HW),
              static_cast<long>(R), static_cast<long>(stride), cands.size());
  test::printTacticTimings(cands, layer, c.x);
}

TEST(CudaDepthwise, PerfTable) {
  EI_SKIP_WITHOUT_GPU();
  timeLayer(144, 56, 3, 1);
  timeLayer(96, 112, 3, 2);
  timeLayer(672, 14, 5, 1);
  timeLayer(1152, 7, 5, 1);
}

}  // namespace
}  // namespace edgeinfer

#endif  // EDGEINFER_HAVE_CUDA

TEST(CudaDepthwise, Availability) {
#ifndef EDGEINFER_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  EI_SKIP_WITHOUT_GPU();
  edgeinfer::cuda::DepthwiseConvProvider p;
  EXPECT_EQ(p.name(), "cuda-dw");
#endif
}
