// The cudnn tactic provider (kernels/cuda/cudnn_conv.h), Conv and ConvTranspose: every
// candidate tactic of every case is run on the GPU and compared with the CPU reference (FP32
// rel. L2 <= 1e-4, FP16 <= 3e-3).
// Negative cases (_n) check which layers get no candidate; they need no GPU. Without CUDA in
// the build only the availability test exists, and it skips.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda/cudnn_conv.h"
#include "kernels/ref/ref_kernels.h"
#include "tactic_test_util.h"

namespace edgeinfer {
namespace {

using builder::Layout;
using cuda::CudnnConvProvider;

Tensor randomTensor(DataType dt, const Shape& s, uint32_t seed, float scale = 1.f) {
  Tensor t = Tensor::zeros(dt, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  if (dt == DataType::kFloat32) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  }
  return t;
}

/// One convolution layer: a graph holding W (and B) as constants and the node.
struct ConvCase {
  std::string op = "Conv";  // or "FusedConv", "ConvTranspose" (C in, K out: W [C, K/group, R, S])
  int64_t N = 1, C = 8, H = 9, W = 9, K = 8, R = 3, S = 3, group = 1;
  std::vector<int64_t> strides{1, 1}, dilations{1, 1}, pads{1, 1, 1, 1};
  std::vector<int64_t> outputPadding, outputShape;  // ConvTranspose
  std::string autoPad;
  bool bias = false, residual = false, constWeights = true, constBias = true;
  std::string act;
  float alpha = 0.f, beta = 0.f;
  DataType xType = DataType::kFloat32;

  graph::Graph g;
  graph::Node node;
  Tensor x, w, b, z;

  void build() {
    x = randomTensor(DataType::kFloat32, Shape{N, C, H, W}, 1);
    if (xType != DataType::kFloat32) x = Tensor::zeros(xType, Shape{N, C, H, W});
    w = op == "ConvTranspose"
            ? randomTensor(DataType::kFloat32, Shape{C, K / group, R, S}, 2, 0.5f)
            : randomTensor(DataType::kFloat32, Shape{K, C / group, R, S}, 2, 0.5f);
    b = randomTensor(DataType::kFloat32, Shape{K}, 3);
    node.name = "conv";
    node.opType = op;
    node.domain = op == "FusedConv" ? graph::kEdgeInferDomain : "";
    node.inputs = {"X", "W"};
    if (bias || residual) node.inputs.push_back(bias ? "B" : "");
    if (residual) node.inputs.push_back("Z");
    node.outputs = {"Y"};
    node.attrs.set("group", graph::Attribute::Int(group));
    node.attrs.set("strides", graph::Attribute::Ints(strides));
    node.attrs.set("dilations", graph::Attribute::Ints(dilations));
    if (autoPad.empty())
      node.attrs.set("pads", graph::Attribute::Ints(pads));
    else
      node.attrs.set("auto_pad", graph::Attribute::String(autoPad));
    if (!outputPadding.empty())
      node.attrs.set("output_padding", graph::Attribute::Ints(outputPadding));
    if (!outputShape.empty()) node.attrs.set("output_shape", graph::Attribute::Ints(outputShape));
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
      // Shape of Y first (without Z), then Z of that shape.
      builder::LayerContext tmp;
      graph::Node plain = node;
      plain.inputs.resize(2);
      graph::Graph g2;
      g2.value("W").constant = w;
      const Status s0 = test::makeLayer(plain, g2, {&x, &w}, &tmp);
      if (!s0.ok()) return ::testing::AssertionFailure() << s0.message();
      z = randomTensor(DataType::kFloat32, tmp.outputShapes[0], 4);
    }
    const Status s = test::makeLayer(node, g, inputs(), l);
    if (!s.ok()) return ::testing::AssertionFailure() << s.message();
    return ::testing::AssertionSuccess();
  }
};

struct Counts {
  int fp16 = 0, fp32nhwc = 0, fp32nchw = 0;
  int after = 0;  // of them, tactics applying the activation after cuDNN's kernel (".act.")
  int total() const { return fp16 + fp32nhwc + fp32nchw; }
};

/// Runs every candidate of `c` at `precision` and compares it with the reference.
Counts checkAllCandidates(ConvCase& c, Precision precision) {
  Counts n;
  builder::LayerContext layer;
  EXPECT_TRUE(c.layer(&layer));
  if (::testing::Test::HasFailure()) return n;
  std::vector<Tensor> expected;
  const Status rs = ref::runNode(c.node, c.inputs(), expected);
  EXPECT_TRUE(rs.ok()) << rs.message();
  if (!rs.ok()) return n;
  CudnnConvProvider provider;
  auto cands = provider.candidates(layer, precision);
  std::printf("  %zu candidates (%s)\n", cands.size(), provider.lastReason().c_str());
  double worst16 = 0, worst32 = 0;
  int unfinalized = 0;
  for (auto& t : cands) {
    const Status is = t->initialize(layer);
    if (!is.ok()) {  // an engine config whose plan cuDNN cannot finalize (the builder records
                     // it as a failed tactic); any other initialize error is a bug
      EXPECT_NE(is.message().find("did not finalize"), std::string::npos)
          << t->id() << ": " << is.message();
      ++unfinalized;
      continue;
    }
    auto r = test::runTactic(*t, layer, c.inputs());
    EXPECT_TRUE(r.ok()) << t->id() << ": " << r.status().message();
    if (!r.ok()) continue;
    const double err = test::relL2(r.value()[0], expected[0]);
    const builder::TensorFormat f = t->outputFormat(0);
    const bool half = f.dtype == DataType::kFloat16;
    EXPECT_LE(err, half ? 3e-3 : 1e-4) << t->id();
    const std::string family = c.op == "ConvTranspose" ? "cudnn.convt." : "cudnn.conv.";
    EXPECT_EQ(t->id().rfind(family + (half ? "fp16.nhwc." : "fp32."), 0), 0u) << t->id();
    if (t->id().find(".act.") != std::string::npos) ++n.after;
    if (half) {
      ++n.fp16;
      worst16 = std::max(worst16, err);
    } else {
      (f.layout == Layout::kNHWC ? n.fp32nhwc : n.fp32nchw)++;
      worst32 = std::max(worst32, err);
    }
  }
  std::printf(
      "  fp16.nhwc %d (worst rel L2 %.2e), fp32.nhwc %d, fp32.nchw %d (worst %.2e); "
      "%d did not finalize\n",
      n.fp16, worst16, n.fp32nhwc, n.fp32nchw, worst32, unfinalized);
  std::fflush(stdout);
  return n;
}

TEST(CudnnConv, PlainOddSizesStride2) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.N = 2, c.C = 3, c.K = 5, c.H = 13, c.W = 11, c.strides = {2, 2};
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.fp16, 0);
  EXPECT_GT(n.fp32nhwc + n.fp32nchw, 0);
}

TEST(CudnnConv, Fp32PrecisionOffersOnlyFp32) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.N = 2, c.C = 3, c.K = 5, c.H = 13, c.W = 11, c.strides = {2, 2};
  const Counts n = checkAllCandidates(c, Precision::kFp32);
  EXPECT_EQ(n.fp16, 0);
  EXPECT_GT(n.fp32nchw, 0);
}

TEST(CudnnConv, Pointwise1x1) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.N = 2, c.C = 16, c.K = 24, c.H = 7, c.W = 5, c.R = 1, c.S = 1, c.pads = {0, 0, 0, 0};
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.fp16, 0);
  EXPECT_GT(n.fp32nhwc + n.fp32nchw, 0);
}

TEST(CudnnConv, Depthwise3x3) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.N = 2, c.C = 8, c.K = 8, c.group = 8, c.H = 13, c.W = 11;
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.total(), 0);
}

TEST(CudnnConv, Dilated) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.N = 1, c.C = 8, c.K = 16, c.H = 15, c.W = 13, c.dilations = {2, 3}, c.pads = {2, 3, 2, 3};
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.total(), 0);
}

TEST(CudnnConv, Grouped2AsymmetricPads) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.N = 2, c.C = 8, c.K = 16, c.group = 2, c.H = 10, c.W = 9, c.pads = {0, 1, 1, 0};
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.total(), 0);
}

TEST(CudnnConv, AutoPadSameUpper) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.N = 1, c.C = 8, c.K = 8, c.H = 10, c.W = 7, c.strides = {2, 2}, c.autoPad = "SAME_UPPER";
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.total(), 0);
}

TEST(CudnnConv, FusedBiasRelu) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.op = "FusedConv", c.bias = true, c.act = "Relu";
  c.N = 2, c.C = 16, c.K = 32, c.H = 12, c.W = 10;
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.total(), 0);
}

TEST(CudnnConv, FusedBiasResidualRelu) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.op = "FusedConv", c.bias = true, c.residual = true, c.act = "Relu";
  c.N = 2, c.C = 16, c.K = 32, c.H = 12, c.W = 10;
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.total(), 0);
}

TEST(CudnnConv, FusedResidualNoBias) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.op = "FusedConv", c.residual = true, c.act = "";
  c.N = 1, c.C = 16, c.K = 16, c.H = 8, c.W = 8;
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  std::printf("  (conv + Z without bias: %d candidates)\n", n.total());
}

TEST(CudnnConv, FusedOtherActivations) {
  EI_SKIP_WITHOUT_GPU();
  struct A {
    const char* name;
    float alpha, beta;
  } acts[] = {{"Sigmoid", 0, 0},     {"Tanh", 0, 0},     {"Elu", 0.7f, 0}, {"LeakyRelu", 0.1f, 0},
              {"Clip", -0.5f, 0.7f}, {"Clip", 0.f, 6.f}, {"SiLU", 0, 0}};
  for (const A& a : acts) {
    SCOPED_TRACE(a.name);
    std::printf(" %s(%g, %g):\n", a.name, a.alpha, a.beta);
    ConvCase c;
    c.op = "FusedConv", c.bias = true, c.act = a.name, c.alpha = a.alpha, c.beta = a.beta;
    c.N = 1, c.C = 16, c.K = 16, c.H = 9, c.W = 7;
    const Counts n = checkAllCandidates(c, Precision::kFp16);
    EXPECT_GT(n.fp16, 0);
    EXPECT_GT(n.total() - n.after, 0) << "cuDNN fuses the activation in some candidates";
    EXPECT_GT(n.after, 0) << "and some apply it after the conv (the fallback)";
  }
}

// ---- Negative cases: no candidate, for a reason ------------------------------------------

std::string reasonFor(ConvCase& c, Precision p = Precision::kFp16, size_t* count = nullptr) {
  builder::LayerContext layer;
  EXPECT_TRUE(c.layer(&layer));
  CudnnConvProvider provider;
  const size_t n = provider.candidates(layer, p).size();
  if (count) *count = n;
  EXPECT_EQ(n, 0u) << provider.lastReason();
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

TEST(CudnnConv, Conv3D_n) {
  ConvCase c;
  c.build();
  c.x = randomTensor(DataType::kFloat32, Shape{1, 8, 5, 5, 5}, 1);
  c.w = randomTensor(DataType::kFloat32, Shape{8, 8, 3, 3, 3}, 2);
  c.g.value("W").constant = c.w;
  c.node.attrs.set("strides", graph::Attribute::Ints({1, 1, 1}));
  c.node.attrs.set("dilations", graph::Attribute::Ints({1, 1, 1}));
  c.node.attrs.set("pads", graph::Attribute::Ints({1, 1, 1, 1, 1, 1}));
  builder::LayerContext layer;
  const Status s = test::makeLayer(c.node, c.g, {&c.x, &c.w}, &layer);
  ASSERT_TRUE(s.ok()) << s.message();
  CudnnConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("2-D"), std::string::npos) << p.lastReason();
}

TEST(CudnnConv, Conv1D_n) {
  ConvCase c;
  c.build();
  builder::LayerContext layer =
      manualLayer(c.node, c.g, {Shape{1, 8, 9}, Shape{8, 8, 3}},
                  {DataType::kFloat32, DataType::kFloat32}, Shape{1, 8, 9}, DataType::kFloat32);
  CudnnConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp32).empty());
  EXPECT_NE(p.lastReason().find("2-D"), std::string::npos) << p.lastReason();
}

// Activations with no exact pointwise mode: every candidate leaves them out of cuDNN's graph
// and applies them with our kernel after cuDNN's (".act." ids), matching the reference.
TEST(CudnnConv, ActivationsWithoutPointwiseModeRunAfterTheConv) {
  EI_SKIP_WITHOUT_GPU();
  struct A {
    const char* name;
    float alpha, beta;
  } acts[] = {{"HardSigmoid", 0.2f, 0.5f},
              {"HardSwish", 0, 0},
              {"Selu", 1.6f, 1.05f},
              {"Softplus", 0, 0},
              {"Clip", -INFINITY, 6.f}};
  for (const A& a : acts) {
    SCOPED_TRACE(a.name);
    std::printf(" %s(%g, %g):\n", a.name, a.alpha, a.beta);
    ConvCase c;
    c.op = "FusedConv", c.bias = true, c.act = a.name, c.alpha = a.alpha, c.beta = a.beta;
    c.N = 2, c.C = 16, c.K = 24, c.H = 9, c.W = 7;
    const Counts n = checkAllCandidates(c, Precision::kFp16);
    EXPECT_GT(n.fp16, 0);
    EXPECT_GT(n.total(), 0);
    EXPECT_EQ(n.after, n.total()) << "all of them apply the activation after the conv";
  }
}

/// Up to three candidates of `c` whose id contains `marker` restore from their saved plan
/// (restore()) and from their id alone (find()) with the same id and output, bit for bit.
void restoresAsBefore(ConvCase& c, const std::string& marker) {
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  CudnnConvProvider provider;
  auto cands = provider.candidates(layer, Precision::kFp16);
  ASSERT_FALSE(cands.empty()) << provider.lastReason();
  int restored = 0;
  for (auto& t : cands) {
    if (restored == 3) break;
    if (t->id().find(marker) == std::string::npos) continue;
    if (!t->initialize(layer).ok() || t->serializedState().empty()) continue;
    auto before = test::runTactic(*t, layer, c.inputs());
    ASSERT_TRUE(before.ok()) << t->id() << ": " << before.status().message();
    CudnnConvProvider fresh;
    for (const bool fromState : {true, false}) {
      auto r = fromState ? fresh.restore(layer, Precision::kFp16, t->id(), t->serializedState())
                         : fresh.find(layer, Precision::kFp16, t->id());
      ASSERT_NE(r, nullptr) << t->id();
      EXPECT_EQ(r->id(), t->id());
      ASSERT_TRUE(r->initialize(layer).ok()) << t->id();
      EXPECT_EQ(r->workspaceBytes(), t->workspaceBytes()) << t->id();
      auto after = test::runTactic(*r, layer, c.inputs());
      ASSERT_TRUE(after.ok()) << t->id() << ": " << after.status().message();
      EXPECT_EQ(test::relL2(after.value()[0], before.value()[0]), 0.0) << t->id();
    }
    ++restored;
  }
  EXPECT_GT(restored, 0) << "no candidate with '" << marker << "' restored";
}

// ---- ConvTranspose: cuDNN's backward-data convolution, the bias added after it -------------

TEST(CudnnConvTranspose, SameSizeWithBias) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.op = "ConvTranspose", c.N = 2, c.C = 4, c.K = 6, c.H = 7, c.W = 5, c.bias = true;
  const Counts n = checkAllCandidates(c, Precision::kFp16);
  EXPECT_GT(n.fp16, 0);
  EXPECT_GT(n.fp32nhwc + n.fp32nchw, 0);
}

TEST(CudnnConvTranspose, Stride2WithOutputPadding) {  // a decoder's 2x upsampling
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.op = "ConvTranspose", c.C = 8, c.K = 5, c.H = 6, c.W = 9, c.strides = {2, 2};
  c.outputPadding = {1, 1}, c.bias = true;
  EXPECT_GT(checkAllCandidates(c, Precision::kFp16).total(), 0);
}

TEST(CudnnConvTranspose, Kernel2Stride2NoPads) {  // U-Net style
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.op = "ConvTranspose", c.C = 16, c.K = 8, c.H = 5, c.W = 6, c.R = 2, c.S = 2;
  c.strides = {2, 2}, c.pads = {0, 0, 0, 0}, c.bias = true;
  EXPECT_GT(checkAllCandidates(c, Precision::kFp16).total(), 0);
}

TEST(CudnnConvTranspose, GroupedDilatedAsymmetricPads) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.op = "ConvTranspose", c.C = 4, c.K = 6, c.group = 2, c.H = 6, c.W = 7;
  c.dilations = {2, 2}, c.pads = {0, 1, 1, 0}, c.strides = {1, 2};
  EXPECT_GT(checkAllCandidates(c, Precision::kFp16).total(), 0);
}

TEST(CudnnConvTranspose, OutputShapeAndSameUpper) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.op = "ConvTranspose", c.C = 3, c.K = 4, c.H = 5, c.W = 5, c.strides = {2, 2};
  c.outputShape = {10, 9}, c.bias = true;
  EXPECT_GT(checkAllCandidates(c, Precision::kFp16).total(), 0);
  ConvCase u;
  u.op = "ConvTranspose", u.C = 3, u.K = 4, u.H = 5, u.W = 6, u.strides = {2, 2};
  u.autoPad = "SAME_UPPER";
  EXPECT_GT(checkAllCandidates(u, Precision::kFp16).total(), 0);
}

TEST(CudnnConvTranspose, RestoresFromItsPlan) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.op = "ConvTranspose", c.C = 8, c.K = 4, c.strides = {2, 2}, c.outputPadding = {1, 1};
  c.bias = true;
  restoresAsBefore(c, "cudnn.convt.");
}

TEST(CudnnConvTranspose, OneDimensional_n) {
  ConvCase c;
  c.op = "ConvTranspose";
  c.build();
  graph::Node n = c.node;
  n.attrs.set("strides", graph::Attribute::Ints({1}));
  n.attrs.set("dilations", graph::Attribute::Ints({1}));
  n.attrs.set("pads", graph::Attribute::Ints({1, 1}));
  graph::Graph g;
  Tensor x = randomTensor(DataType::kFloat32, Shape{1, 8, 9}, 1);
  Tensor w = randomTensor(DataType::kFloat32, Shape{8, 8, 3}, 2);
  g.value("W").constant = w;
  builder::LayerContext layer;
  ASSERT_TRUE(test::makeLayer(n, g, {&x, &w}, &layer).ok());
  CudnnConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("2-D"), std::string::npos) << p.lastReason();
}

TEST(CudnnConvTranspose, NonConstantWeights_n) {
  ConvCase c;
  c.op = "ConvTranspose", c.constWeights = false;
  EXPECT_NE(reasonFor(c).find("weights are not a constant"), std::string::npos);
}

TEST(CudnnConvTranspose, OutputShapeBeyondTheFullResult_n) {
  ConvCase c;  // the full result has 2 * (5 - 1) + 3 = 11 rows: 12 needs negative pads
  c.op = "ConvTranspose", c.C = 3, c.K = 4, c.H = 5, c.W = 5, c.strides = {2, 2};
  c.outputShape = {12, 9};
  EXPECT_NE(reasonFor(c).find("negative pads"), std::string::npos);
}

/// A tactic applying its activation after the conv restores from its saved plan with the same
/// id and output (the id says the graph has no activation stage).
TEST(CudnnConv, ActivationAfterTheConvRestoresFromItsPlan) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.op = "FusedConv", c.bias = true, c.act = "HardSwish";
  restoresAsBefore(c, ".act.");
}

/// An ".act." id for a layer with no activation names nothing.
TEST(CudnnConv, ActivationAfterIdForALayerWithoutActivation_n) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  c.op = "FusedConv", c.bias = true, c.act = "";
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  CudnnConvProvider provider;
  auto cands = provider.candidates(layer, Precision::kFp16);
  ASSERT_FALSE(cands.empty()) << provider.lastReason();
  for (const auto& t : cands) EXPECT_EQ(t->id().find(".act."), std::string::npos) << t->id();
  std::string id = cands.front()->id();
  id.insert(std::string("cudnn.conv.fp16.nhwc.").size(), "act.");
  EXPECT_EQ(provider.find(layer, Precision::kFp16, id), nullptr) << id;
  // Nor does a saved plan under that id restore (it would skip no activation: there is none).
  ASSERT_TRUE(cands.front()->initialize(layer).ok());
  const std::string state = cands.front()->serializedState();
  ASSERT_FALSE(state.empty());
  EXPECT_EQ(provider.restore(layer, Precision::kFp16, id, state), nullptr) << id;
  // A fused id for an activation cuDNN cannot fuse does not restore a plan without it.
  ConvCase hs;
  hs.op = "FusedConv", hs.bias = true, hs.act = "HardSwish";
  builder::LayerContext hsLayer;
  ASSERT_TRUE(hs.layer(&hsLayer));
  const std::string fusedId = cands.front()->id();  // a plain id: no ".act."
  EXPECT_EQ(provider.restore(hsLayer, Precision::kFp16, fusedId, state), nullptr) << fusedId;
}

TEST(CudnnConv, UnknownActivation_n) {
  ConvCase c;
  c.op = "FusedConv", c.act = "Relu";
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  c.node.attrs.set("activation", graph::Attribute::String("Swish"));
  CudnnConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("unknown activation"), std::string::npos) << p.lastReason();
}

// Decision: weights that are not constants get no cuDNN candidate. The tactic converts W and B
// to its layout and precision once, in initialize(); a runtime weight would need a reformat per
// inference, which is a different tactic (left to other providers).
TEST(CudnnConv, NonConstantWeights_n) {
  ConvCase c;
  c.constWeights = false;
  EXPECT_NE(reasonFor(c).find("weights are not a constant"), std::string::npos);
}

TEST(CudnnConv, NonConstantBias_n) {
  ConvCase c;
  c.op = "FusedConv", c.bias = true, c.constBias = false, c.act = "Relu";
  EXPECT_NE(reasonFor(c).find("bias is not a constant"), std::string::npos);
}

TEST(CudnnConv, Int8Input_n) {
  ConvCase c;
  c.build();
  builder::LayerContext layer =
      manualLayer(c.node, c.g, {Shape{1, 8, 9, 9}, Shape{8, 8, 3, 3}},
                  {DataType::kInt8, DataType::kFloat32}, Shape{1, 8, 9, 9}, DataType::kFloat32);
  CudnnConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("float32 or float16"), std::string::npos) << p.lastReason();
}

TEST(CudnnConv, Int8Precision_n) {
  ConvCase c;
  EXPECT_NE(reasonFor(c, Precision::kInt8).find("int8"), std::string::npos);
}

TEST(CudnnConv, DynamicShape_n) {
  ConvCase c;
  c.build();
  builder::LayerContext layer =
      manualLayer(c.node, c.g, {Shape{-1, 8, 9, 9}, Shape{8, 8, 3, 3}},
                  {DataType::kFloat32, DataType::kFloat32}, Shape{-1, 8, 9, 9}, DataType::kFloat32);
  CudnnConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("static"), std::string::npos) << p.lastReason();
}

TEST(CudnnConv, NotAConv_n) {
  ConvCase c;
  c.build();
  c.node.opType = "ConvInteger";  // integer convolution: not this provider's
  builder::LayerContext layer =
      manualLayer(c.node, c.g, {Shape{1, 8, 9, 9}, Shape{8, 8, 3, 3}},
                  {DataType::kFloat32, DataType::kFloat32}, Shape{1, 8, 9, 9}, DataType::kFloat32);
  CudnnConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  c.node.opType = "FusedConv";  // right name, wrong (ONNX) domain
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("not a Conv"), std::string::npos) << p.lastReason();
}

TEST(CudnnConv, OutputShapeMismatch_n) {
  ConvCase c;
  c.build();
  builder::LayerContext layer =
      manualLayer(c.node, c.g, {Shape{1, 8, 9, 9}, Shape{8, 8, 3, 3}},
                  {DataType::kFloat32, DataType::kFloat32}, Shape{1, 8, 8, 9}, DataType::kFloat32);
  CudnnConvProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(p.lastReason().find("disagrees"), std::string::npos) << p.lastReason();
}

TEST(CudnnConv, EnqueueBeforeInitialize_n) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  CudnnConvProvider p;
  auto cands = p.candidates(layer, Precision::kFp32);
  ASSERT_FALSE(cands.empty()) << p.lastReason();
  builder::LaunchArgs args;
  args.inputs = {nullptr, nullptr};
  args.outputs = {nullptr};
  const Status s = cands[0]->enqueue(args);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("before initialize"), std::string::npos) << s.message();
  ASSERT_TRUE(cands[0]->initialize(layer).ok());
  const Status s2 = cands[0]->enqueue(args);  // initialised, but null pointers
  EXPECT_FALSE(s2.ok());
}

/// A depthwise FusedConv with bias and ReLU: the layers whose runtime-fused plans cost most to
/// finalize.
ConvCase depthwiseFusedRelu() {
  ConvCase c;
  c.op = "FusedConv";
  c.C = c.K = c.group = 24, c.H = c.W = 17, c.bias = true, c.act = "Relu";
  return c;
}

// ---- Preparing candidates on several threads (what the builder does for a cold build) ------

/// Every candidate of a depthwise FusedConv (runtime-fused plans, the costliest to finalize),
/// prepared on 8 threads at once against one handle, then initialised and run: the same
/// candidates finalize as when each is prepared alone, with the same workspace and output,
/// bit for bit.
TEST(CudnnConv, PreparedOnThreadsEqualsOneAtATime) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c = depthwiseFusedRelu();
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  CudnnConvProvider provider;
  auto together = provider.candidates(layer, Precision::kFp16);
  auto alone = provider.candidates(layer, Precision::kFp16);
  ASSERT_FALSE(together.empty()) << provider.lastReason();
  ASSERT_EQ(together.size(), alone.size());
  std::atomic<size_t> next{0};
  std::vector<std::thread> pool;
  for (int t = 0; t < 8; ++t)
    pool.emplace_back([&] {
      for (size_t k = next++; k < together.size(); k = next++) together[k]->prepare(layer);
    });
  for (auto& t : pool) t.join();
  int ran = 0;
  for (size_t k = 0; k < together.size(); ++k) {
    ASSERT_EQ(together[k]->id(), alone[k]->id());
    const Status a = alone[k]->initialize(layer), b = together[k]->initialize(layer);
    EXPECT_EQ(a.ok(), b.ok()) << together[k]->id() << ": " << a.message() << " / " << b.message();
    if (!a.ok() || !b.ok()) continue;
    EXPECT_EQ(together[k]->workspaceBytes(), alone[k]->workspaceBytes()) << together[k]->id();
    auto ra = test::runTactic(*alone[k], layer, c.inputs());
    auto rb = test::runTactic(*together[k], layer, c.inputs());
    ASSERT_TRUE(ra.ok() && rb.ok()) << together[k]->id();
    EXPECT_EQ(test::relL2(rb.value()[0], ra.value()[0]), 0.0) << together[k]->id();
    ++ran;
  }
  std::printf("  %d of %zu candidates ran, prepared on 8 threads\n", ran, together.size());
  EXPECT_GT(ran, 0);
}

/// prepare() with a layer whose weights are gone: initialize() reports it, and a second
/// prepare() does not hide the first one's failure.
TEST(CudnnConv, PrepareFailureIsInitializeFailure_n) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  CudnnConvProvider provider;
  auto cands = provider.candidates(layer, Precision::kFp32);
  ASSERT_FALSE(cands.empty()) << provider.lastReason();
  graph::Graph noWeights;
  builder::LayerContext broken = layer;
  broken.graph = &noWeights;
  cands[0]->prepare(broken);
  cands[0]->prepare(broken);
  const Status s = cands[0]->initialize(broken);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("weights missing"), std::string::npos) << s.message();
  builder::LaunchArgs args;
  EXPECT_FALSE(cands[0]->enqueue(args).ok()) << "it ran without weights";
}

// ---- Plan serialization (engine loads restore plans from their JSON) ----------------------

/// Every candidate of a depthwise FusedConv (the layers whose runtime-fused plans cost most to
/// finalize): each one that serializes must restore from its JSON to a tactic with the same
/// id, workspace and output, bit for bit.
TEST(CudnnConv, SerializedPlanRestores) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c = depthwiseFusedRelu();
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  CudnnConvProvider provider;
  auto cands = provider.candidates(layer, Precision::kFp16);
  ASSERT_FALSE(cands.empty()) << provider.lastReason();
  int serialized = 0;
  for (auto& t : cands) {
    if (!t->initialize(layer).ok()) continue;
    auto before = test::runTactic(*t, layer, c.inputs());  // as the builder: timed, then saved
    ASSERT_TRUE(before.ok()) << t->id() << ": " << before.status().message();
    const std::string state = t->serializedState();
    if (state.empty()) continue;
    ++serialized;
    CudnnConvProvider fresh;  // as a load: another provider, another handle
    auto r = fresh.restore(layer, Precision::kFp16, t->id(), state);
    ASSERT_NE(r, nullptr) << t->id();
    EXPECT_EQ(r->id(), t->id());
    ASSERT_TRUE(r->initialize(layer).ok()) << t->id();
    EXPECT_EQ(r->workspaceBytes(), t->workspaceBytes()) << t->id();
    EXPECT_EQ(r->serializedState().empty(), false) << t->id();
    auto after = test::runTactic(*r, layer, c.inputs());
    ASSERT_TRUE(after.ok()) << t->id() << ": " << after.status().message();
    EXPECT_EQ(test::relL2(after.value()[0], before.value()[0]), 0.0) << t->id();
  }
  std::printf("  %d of %zu candidates serialized their plan\n", serialized, cands.size());
  EXPECT_GT(serialized, 0) << "no cuDNN engine serialized its plan";
}

/// A state cuDNN cannot read (a damaged engine, another cuDNN) is not an error: the plan is
/// found again through the heuristics.
TEST(CudnnConv, UnreadablePlanStateFallsBackToHeuristics_n) {
  EI_SKIP_WITHOUT_GPU();
  ConvCase c;
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  CudnnConvProvider provider;
  auto cands = provider.candidates(layer, Precision::kFp32);
  ASSERT_FALSE(cands.empty()) << provider.lastReason();
  const std::string id = cands[0]->id();
  for (const std::string& bad :
       {std::string("{not json"), std::string("{}"), std::string(100, '\xff')}) {
    CudnnConvProvider fresh;
    auto r = fresh.restore(layer, Precision::kFp32, id, bad);
    ASSERT_NE(r, nullptr) << id;
    EXPECT_EQ(r->id(), id);
    EXPECT_TRUE(r->initialize(layer).ok());
  }
  CudnnConvProvider fresh;  // an id no heuristic offers, with a state: not found
  EXPECT_EQ(fresh.restore(layer, Precision::kFp32, "cudnn.conv.fp32.nchw.e99999.k", "{}"), nullptr);
}

// ---- Performance (printing only) ---------------------------------------------------------

void timeAllCandidates(int64_t N, int64_t C, int64_t K, int64_t HW, int64_t R) {
  ConvCase c;
  c.N = N, c.C = C, c.K = K, c.H = HW, c.W = HW, c.R = R, c.S = R;
  const int64_t p = R / 2;
  c.pads = {p, p, p, p};
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer));
  CudnnConvProvider provider;
  auto cands = provider.candidates(layer, Precision::kFp16);
  std::printf("conv N=%ld C=%ld K=%ld %ldx%ld %ldx%ld: %zu candidates (%s)\n", static_cast<long>(N),
              static_cast<long>(C), static_cast<long>(K), static_cast<long>(HW),
              static_cast<long>(HW), static_cast<long>(R), static_cast<long>(R), cands.size(),
              provider.lastReason().c_str());
  test::printTacticTimings(cands, layer, c.x);
}

TEST(CudnnConv, PerfTable) {
  EI_SKIP_WITHOUT_GPU();
  timeAllCandidates(1, 256, 256, 14, 3);
  timeAllCandidates(64, 1024, 256, 14, 1);
}

}  // namespace
}  // namespace edgeinfer

#endif  // EDGEINFER_HAVE_CUDA

TEST(CudnnConv, Availability) {
#ifndef EDGEINFER_HAVE_CUDA
  GTEST_SKIP() << "built without CUDA";
#else
  EI_SKIP_WITHOUT_GPU();
  edgeinfer::cuda::CudnnConvProvider p;
  EXPECT_EQ(p.name(), "cudnn");
#endif
}
