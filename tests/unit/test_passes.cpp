// Graph passes: each rewrite happens where it should, not where it must not, and the
// optimised graph computes what the original computes (fused vs unfused outputs).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <random>

#include "edgeinfer/builder.h"
#include "runtime/graph_engine.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using test::TestModel;

std::unique_ptr<Engine> build(const TestModel& m, BuilderConfig cfg = {}) {
  cfg.backend = Backend::kCpu;
  const std::string bytes = m.bytes();
  auto e = Builder::buildFromBuffer(bytes.data(), bytes.size(), cfg);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  return e.ok() ? std::move(e).value() : nullptr;
}

BuilderConfig noOptimisation() {
  BuilderConfig c;
  c.passes.constantFolding = false;
  c.passes.eliminateIdentity = false;
  c.passes.foldBatchNorm = false;
  c.passes.fuseConvActivation = false;
  c.passes.fuseGemmActivation = false;
  return c;
}

/// -1 when the engine failed to build (the build() expectation reports why).
int countOps(const std::unique_ptr<Engine>& e, const std::string& op) {
  if (!e) return -1;
  int n = 0;
  for (const auto& node : static_cast<const runtime::GraphEngine&>(*e).graph().nodes)
    n += node.opType == op;
  return n;
}

size_t nodeCount(const std::unique_ptr<Engine>& e) {
  return e ? static_cast<const runtime::GraphEngine&>(*e).graph().nodes.size() : 0;
}

std::map<std::string, Tensor> runRandom(const Engine& e, uint32_t seed) {
  auto ctx = e.createExecutionContext();
  EXPECT_TRUE(ctx.ok());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::map<std::string, Tensor> in;
  for (const auto& d : e.inputs()) {
    std::vector<int64_t> dims = d.shape.dims();
    for (auto& x : dims)
      if (x < 0) x = 2;
    Tensor t = Tensor::zeros(DataType::kFloat32, Shape(dims));
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
    in[d.name] = t;
  }
  auto out = (*ctx)->run(in);
  EXPECT_TRUE(out.ok()) << out.status().toString();
  return out.ok() ? *out : std::map<std::string, Tensor>{};
}

/// Max |a-b| / (1 + |b|) over all outputs.
double maxRelDiff(const std::map<std::string, Tensor>& a, const std::map<std::string, Tensor>& b) {
  double worst = 0;
  EXPECT_EQ(a.size(), b.size());
  for (const auto& [name, ta] : a) {
    const Tensor& tb = b.at(name);
    EXPECT_EQ(ta.shape(), tb.shape()) << name;
    if (ta.shape() != tb.shape()) return 1e9;
    for (int64_t i = 0; i < ta.numel(); ++i) {
      const double x = ta.getAsDouble(i), y = tb.getAsDouble(i);
      worst = std::max(worst, std::fabs(x - y) / (1.0 + std::fabs(y)));
    }
  }
  return worst;
}

/// The same model with and without optimisation gives the same outputs.
void expectSameAsUnoptimised(const TestModel& m, double tol = 1e-5) {
  auto opt = build(m);
  auto ref = build(m, noOptimisation());
  ASSERT_TRUE(opt != nullptr && ref != nullptr);
  EXPECT_LE(maxRelDiff(runRandom(*opt, 7), runRandom(*ref, 7)), tol);
}

TestModel convBlock(bool bias, const std::string& act) {
  TestModel m(14);  // HardSwish needs opset 14
  m.input("x", {1, 5, 9, 7});
  m.randomInitializer("w", {6, 5, 3, 3}, 11);
  if (bias) m.randomInitializer("b", {6}, 12);
  auto& c = m.node(
      "Conv", bias ? std::vector<std::string>{"x", "w", "b"} : std::vector<std::string>{"x", "w"},
      {"c"});
  TestModel::attrInts(c, "pads", {1, 1, 1, 1});
  m.node(act, {"c"}, {"y"});
  m.output("y");
  return m;
}

TEST(PassFuseConv, ConvBiasReluBecomesOneNode) {
  auto e = build(convBlock(true, "Relu"));
  EXPECT_EQ(nodeCount(e), 1u);
  EXPECT_EQ(countOps(e, "FusedConv"), 1);
  expectSameAsUnoptimised(convBlock(true, "Relu"));
}

TEST(PassFuseConv, EveryFusableActivationMatches) {
  for (const char* act :
       {"Relu", "Sigmoid", "Tanh", "HardSwish", "LeakyRelu", "HardSigmoid", "Elu", "Softplus"}) {
    SCOPED_TRACE(act);
    auto m = convBlock(false, act);
    auto e = build(m);
    EXPECT_EQ(countOps(e, "FusedConv"), 1);
    expectSameAsUnoptimised(m);
  }
}

TEST(PassFuseConv, ClipWithConstantBoundsFuses) {
  TestModel m(13);
  m.input("x", {1, 3, 8, 8});
  m.randomInitializer("w", {4, 3, 1, 1}, 3);
  m.initializer("lo", {}, {0.f});
  m.initializer("hi", {}, {0.25f});
  m.node("Conv", {"x", "w"}, {"c"});
  m.node("Clip", {"c", "lo", "hi"}, {"y"});
  m.output("y");
  EXPECT_EQ(countOps(build(m), "FusedConv"), 1);
  expectSameAsUnoptimised(m);
}

TestModel residualBlock() {
  // ResNet basic block: y = relu(conv2(relu(conv1(x))) + x)
  TestModel m(13);
  m.input("x", {2, 4, 7, 7});
  m.randomInitializer("w1", {4, 4, 3, 3}, 21);
  m.randomInitializer("b1", {4}, 22);
  m.randomInitializer("w2", {4, 4, 3, 3}, 23);
  m.randomInitializer("b2", {4}, 24);
  auto& c1 = m.node("Conv", {"x", "w1", "b1"}, {"c1"});
  TestModel::attrInts(c1, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"});
  auto& c2 = m.node("Conv", {"r1", "w2", "b2"}, {"c2"});
  TestModel::attrInts(c2, "pads", {1, 1, 1, 1});
  m.node("Add", {"c2", "x"}, {"s"});
  m.node("Relu", {"s"}, {"y"});
  m.output("y");
  return m;
}

TEST(PassFuseConv, ResidualAddAndReluFuseIntoConv) {
  auto e = build(residualBlock());
  EXPECT_EQ(nodeCount(e), 2u);
  EXPECT_EQ(countOps(e, "FusedConv"), 2);
  expectSameAsUnoptimised(residualBlock());
}

TEST(PassFuseConv, ConstantPerChannelAddBecomesBias) {
  TestModel m(13);
  m.input("x", {1, 3, 6, 6});
  m.randomInitializer("w", {5, 3, 3, 3}, 5);
  m.randomInitializer("b", {5}, 6);
  m.randomInitializer("k", {1, 5, 1, 1}, 7);
  m.node("Conv", {"x", "w", "b"}, {"c"});
  m.node("Add", {"c", "k"}, {"y"});
  m.output("y");
  auto e = build(m);
  EXPECT_EQ(nodeCount(e), 1u);
  expectSameAsUnoptimised(m);
}

TEST(PassFuseConv, ConvOutputReadTwiceIsNotFused_n) {
  TestModel m(13);
  m.input("x", {1, 3, 6, 6});
  m.randomInitializer("w", {3, 3, 3, 3}, 5);
  m.node("Conv", {"x", "w"}, {"c"});
  m.node("Relu", {"c"}, {"y"});
  m.node("Sigmoid", {"c"}, {"z"});
  m.output("y");
  m.output("z");
  auto e = build(m);
  EXPECT_EQ(countOps(e, "FusedConv"), 0);
  EXPECT_EQ(countOps(e, "Conv"), 1);
  expectSameAsUnoptimised(m);
}

TEST(PassFuseConv, ConvThatIsGraphOutputIsNotFused_n) {
  TestModel m(13);
  m.input("x", {1, 3, 6, 6});
  m.randomInitializer("w", {3, 3, 3, 3}, 5);
  m.node("Conv", {"x", "w"}, {"c"});
  m.node("Relu", {"c"}, {"y"});
  m.output("c");
  m.output("y");
  EXPECT_EQ(countOps(build(m), "FusedConv"), 0);
}

TEST(PassFuseConv, BroadcastAddIsNotAResidual_n) {
  TestModel m(13);
  m.input("x", {1, 3, 6, 6});
  m.input("z", {1, 3, 1, 6});
  m.randomInitializer("w", {3, 3, 3, 3}, 5);
  auto& c = m.node("Conv", {"x", "w"}, {"c"});
  TestModel::attrInts(c, "pads", {1, 1, 1, 1});
  m.node("Add", {"c", "z"}, {"y"});
  m.output("y");
  auto e = build(m);
  EXPECT_EQ(countOps(e, "FusedConv"), 0);
  expectSameAsUnoptimised(m);
}

/// x -> Conv(+bias) -> [Add(per-channel constant)] -> SiLU as PyTorch exports it:
/// Mul(c, Sigmoid(c)) (`mulFirst`: Mul(Sigmoid(c), c)).
TestModel convSilu(bool constantAdd, bool mulFirst) {
  TestModel m(13);
  m.input("x", {2, 3, 7, 6});
  m.randomInitializer("w", {5, 3, 3, 3}, 41);
  m.randomInitializer("b", {5}, 42);
  auto& c = m.node("Conv", {"x", "w", "b"}, {"c"});
  TestModel::attrInts(c, "pads", {1, 1, 1, 1});
  std::string t = "c";
  if (constantAdd) {
    m.randomInitializer("shift", {1, 5, 1, 1}, 43);
    m.node("Add", {"c", "shift"}, {"a"});
    t = "a";
  }
  m.node("Sigmoid", {t}, {"s"});
  if (mulFirst)
    m.node("Mul", {"s", t}, {"y"});
  else
    m.node("Mul", {t, "s"}, {"y"});
  m.output("y");
  return m;
}

TEST(PassFuseConv, SiluBecomesTheConvsActivation) {
  for (bool constantAdd : {false, true})
    for (bool mulFirst : {false, true}) {
      SCOPED_TRACE(std::string(constantAdd ? "with" : "without") + " a constant Add, Mul " +
                   (mulFirst ? "(s, c)" : "(c, s)"));
      const TestModel m = convSilu(constantAdd, mulFirst);
      auto e = build(m);
      EXPECT_EQ(nodeCount(e), 1u);
      EXPECT_EQ(countOps(e, "FusedConv"), 1);
      expectSameAsUnoptimised(m, 1e-6);  // x * (1 / (1 + exp(-x))) either way
    }
}

TEST(PassFuseConv, SiluWhoseInputIsReadElsewhereIsNotFused_n) {
  TestModel m(13);
  m.input("x", {1, 3, 6, 6});
  m.randomInitializer("w", {3, 3, 3, 3}, 5);
  m.node("Conv", {"x", "w"}, {"c"});
  m.node("Sigmoid", {"c"}, {"s"});
  m.node("Mul", {"c", "s"}, {"y"});
  m.node("Relu", {"c"}, {"z"});  // a third reader of c
  m.output("y");
  m.output("z");
  auto e = build(m);
  EXPECT_EQ(countOps(e, "FusedConv"), 0);
  expectSameAsUnoptimised(m);
}

TEST(PassFuseConv, SigmoidTimesAnotherTensorIsNotSilu_n) {
  TestModel m(13);
  m.input("x", {1, 3, 6, 6});
  m.input("u", {1, 3, 6, 6});
  m.randomInitializer("w", {3, 3, 3, 3}, 5);
  auto& c = m.node("Conv", {"x", "w"}, {"c"});
  TestModel::attrInts(c, "pads", {1, 1, 1, 1});
  m.node("Sigmoid", {"c"}, {"s"});
  m.node("Mul", {"u", "s"}, {"y"});  // gating another tensor: not SiLU
  m.output("y");
  auto e = build(m);
  EXPECT_EQ(countOps(e, "FusedConv"), 1);  // Conv + Sigmoid fuse; the Mul stays
  EXPECT_EQ(nodeCount(e), 2u);
  expectSameAsUnoptimised(m);
}

TEST(PassFuseConv, SiluWhoseSigmoidIsAlsoAnOutputIsNotFused_n) {
  TestModel m(13);
  m.input("x", {1, 3, 6, 6});
  m.randomInitializer("w", {3, 3, 3, 3}, 5);
  m.node("Conv", {"x", "w"}, {"c"});
  m.node("Sigmoid", {"c"}, {"s"});
  m.node("Mul", {"c", "s"}, {"y"});
  m.output("y");
  m.output("s");
  auto e = build(m);
  EXPECT_EQ(countOps(e, "FusedConv"), 0);
  expectSameAsUnoptimised(m);
}

TEST(PassFuseConv, DisabledByOptionAndEnvironment) {
  BuilderConfig c;
  c.passes.fuseConvActivation = false;
  EXPECT_EQ(countOps(build(convBlock(true, "Relu"), c), "FusedConv"), 0);
  setenv("EDGEINFER_DISABLE_FUSION", "1", 1);
  auto e = build(convBlock(true, "Relu"));
  unsetenv("EDGEINFER_DISABLE_FUSION");
  EXPECT_EQ(countOps(e, "FusedConv"), 0);
}

TestModel convBn(bool bias) {
  TestModel m(13);
  m.input("x", {2, 3, 7, 9});
  m.randomInitializer("w", {6, 3, 3, 3}, 31);
  if (bias) m.randomInitializer("b", {6}, 32);
  m.randomInitializer("scale", {6}, 33, 0.5f, 1.5f);
  m.randomInitializer("shift", {6}, 34);
  m.randomInitializer("mean", {6}, 35);
  m.randomInitializer("var", {6}, 36, 0.1f, 2.f);
  m.node("Conv",
         bias ? std::vector<std::string>{"x", "w", "b"} : std::vector<std::string>{"x", "w"},
         {"c"});
  auto& bn = m.node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"n"});
  TestModel::attrF(bn, "epsilon", 1e-3f);
  m.node("Relu", {"n"}, {"y"});
  m.output("y");
  return m;
}

TEST(PassFoldBatchNorm, ConvBnReluBecomesOneFusedConv) {
  for (bool bias : {false, true}) {
    auto e = build(convBn(bias));
    EXPECT_EQ(countOps(e, "BatchNormalization"), 0);
    EXPECT_EQ(nodeCount(e), 1u);
    expectSameAsUnoptimised(convBn(bias), 1e-5);
  }
}

TEST(PassFoldBatchNorm, GemmBnFolds) {
  TestModel m(13);
  m.input("x", {3, 8});
  m.randomInitializer("w", {5, 8}, 41);
  m.randomInitializer("b", {5}, 42);
  m.randomInitializer("scale", {5}, 43, 0.5f, 1.5f);
  m.randomInitializer("shift", {5}, 44);
  m.randomInitializer("mean", {5}, 45);
  m.randomInitializer("var", {5}, 46, 0.1f, 2.f);
  auto& g = m.node("Gemm", {"x", "w", "b"}, {"g"});
  TestModel::attr(g, "transB", 1);
  m.node("BatchNormalization", {"g", "scale", "shift", "mean", "var"}, {"y"});
  m.output("y");
  EXPECT_EQ(countOps(build(m), "BatchNormalization"), 0);
  expectSameAsUnoptimised(m);
}

TEST(PassFoldBatchNorm, NonConstantStatisticsStay_n) {
  TestModel m(13);
  m.input("x", {1, 3, 4, 4});
  m.input("mean", {3});
  m.randomInitializer("w", {3, 3, 1, 1}, 51);
  m.randomInitializer("scale", {3}, 52);
  m.randomInitializer("shift", {3}, 53);
  m.randomInitializer("var", {3}, 54, 0.5f, 1.f);
  m.node("Conv", {"x", "w"}, {"c"});
  m.node("BatchNormalization", {"c", "scale", "shift", "mean", "var"}, {"y"});
  m.output("y");
  auto e = build(m);
  EXPECT_EQ(countOps(e, "BatchNormalization"), 1);
  expectSameAsUnoptimised(m);
}

TEST(PassFuseGemm, GemmReluAndMatMulBiasSigmoid) {
  TestModel m(13);
  m.input("x", {3, 7});
  m.randomInitializer("w", {7, 5}, 61);
  m.randomInitializer("c", {5}, 62);
  m.randomInitializer("w2", {5, 4}, 63);
  m.randomInitializer("b2", {4}, 64);
  m.node("Gemm", {"x", "w", "c"}, {"g"});
  m.node("Relu", {"g"}, {"r"});
  m.node("MatMul", {"r", "w2"}, {"mm"});
  m.node("Add", {"mm", "b2"}, {"a"});
  m.node("Sigmoid", {"a"}, {"y"});
  m.output("y");
  auto e = build(m);
  EXPECT_EQ(countOps(e, "FusedGemm"), 1);
  EXPECT_EQ(countOps(e, "FusedMatMul"), 1);
  EXPECT_EQ(nodeCount(e), 2u);
  expectSameAsUnoptimised(m);
}

TEST(PassFuseGemm, BatchedMatMulWithBias) {
  TestModel m(13);
  m.input("x", {2, 3, 6});
  m.randomInitializer("w", {6, 5}, 71);
  m.randomInitializer("b", {5}, 72);
  m.node("MatMul", {"x", "w"}, {"mm"});
  m.node("Add", {"b", "mm"}, {"y"});
  m.output("y");
  EXPECT_EQ(countOps(build(m), "FusedMatMul"), 1);
  expectSameAsUnoptimised(m);
}

TEST(PassFuseGemm, NonBiasAddIsNotFused_n) {
  TestModel m(13);
  m.input("x", {3, 6});
  m.input("z", {3, 5});
  m.randomInitializer("w", {6, 5}, 81);
  m.node("MatMul", {"x", "w"}, {"mm"});
  m.node("Add", {"mm", "z"}, {"y"});
  m.output("y");
  auto e = build(m);
  EXPECT_EQ(countOps(e, "FusedMatMul"), 0);
  expectSameAsUnoptimised(m);
}

TEST(PassConstantFolding, ShapeChainFoldsToConstant) {
  // x -> Shape -> Gather(0) -> Unsqueeze -> Concat([-1]) -> Reshape(x): a flatten as
  // exporters write it. With a static x the whole shape computation folds away.
  TestModel m(13);
  m.input("x", {2, 3, 4});
  m.initializerI64("idx", {}, {0});
  m.initializerI64("axes0", {1}, {0});
  m.initializerI64("minus1", {1}, {-1});
  m.node("Shape", {"x"}, {"s"});
  m.node("Gather", {"s", "idx"}, {"n"});
  m.node("Unsqueeze", {"n", "axes0"}, {"n1"});
  m.node("Concat", {"n1", "minus1"}, {"shape"}).add_attribute()->CopyFrom([] {
    onnx::AttributeProto a;
    a.set_name("axis");
    a.set_type(onnx::AttributeProto::INT);
    a.set_i(0);
    return a;
  }());
  m.node("Reshape", {"x", "shape"}, {"y"});
  m.output("y");
  auto e = build(m);
  EXPECT_EQ(nodeCount(e), 1u);
  EXPECT_EQ(countOps(e, "Reshape"), 1);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->outputs()[0].shape, (Shape{2, 12}));
  expectSameAsUnoptimised(m);
}

TEST(PassConstantFolding, DynamicBatchKeepsShapeComputation_n) {
  TestModel m(13);
  m.input("x", {-1, 3, 4});
  m.initializerI64("idx", {}, {0});
  m.node("Shape", {"x"}, {"s"});
  m.node("Gather", {"s", "idx"}, {"y"});
  m.output("y", onnx::TensorProto::INT64);
  auto e = build(m);
  ASSERT_TRUE(e);
  EXPECT_EQ(countOps(e, "Shape"), 1);
  auto ctx = e->createExecutionContext();
  Tensor x = Tensor::zeros(DataType::kFloat32, Shape{5, 3, 4});
  auto out = (*ctx)->run({{"x", x}});
  ASSERT_TRUE(out.ok()) << out.status().toString();
  EXPECT_EQ(out->at("y").getAsInt64(0), 5);
}

TEST(PassEliminateIdentity, IdentityAndDropoutRemovedEvenAsOutput) {
  TestModel m(13);
  m.input("x", {2, 3});
  m.node("Relu", {"x"}, {"r"});
  m.node("Dropout", {"r"}, {"d"});
  m.node("Identity", {"d"}, {"y"});
  m.output("y");
  auto e = build(m);
  EXPECT_EQ(nodeCount(e), 1u);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->outputs()[0].name, "y");
  expectSameAsUnoptimised(m);
}

TEST(PassEliminateIdentity, InputToOutputIdentityStays_n) {
  TestModel m(13);
  m.input("x", {2, 3});
  m.node("Identity", {"x"}, {"y"});
  m.output("y");
  auto e = build(m);
  EXPECT_EQ(nodeCount(e), 1u);
  expectSameAsUnoptimised(m);
}

TEST(PassDeadNodes, UnusedBranchRemoved) {
  TestModel m(13);
  m.input("x", {2, 3});
  m.node("Relu", {"x"}, {"y"});
  m.node("Sigmoid", {"x"}, {"unused"});
  m.output("y");
  EXPECT_EQ(nodeCount(build(m)), 1u);
}

TEST(PassInspect, PrintsBeforeAndAfterWithShapes) {
  test::TempDir dir;
  const std::string path = dir.write("m.onnx", residualBlock().bytes());
  auto text = Builder::inspect(path);
  ASSERT_TRUE(text.ok()) << text.status().toString();
  EXPECT_NE(text->find("=== before optimisation"), std::string::npos);
  EXPECT_NE(text->find("=== after optimisation"), std::string::npos);
  EXPECT_NE(text->find("FusedConv"), std::string::npos);
  EXPECT_NE(text->find("[2,4,7,7]"), std::string::npos);
}

}  // namespace
}  // namespace edgeinfer
