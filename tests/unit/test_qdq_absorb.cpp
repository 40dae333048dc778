// Explicit quantization (quant/qdq_absorb.h): which QuantizeLinear/DequantizeLinear pairs the
// GPU INT8 build absorbs into per-tensor scales and which it leaves to run as ops, weight
// DequantizeLinear folded into float constants, scales through Relu/MaxPool, the layer policy
// in the optimised graph's names (after fusion), and the calibration-cache check that an
// explicitly quantized model relaxes. All on the CPU; the GPU engines are in
// test_cuda_qdq.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "builder/optimize.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/calibration.h"
#include "graph/passes/passes.h"
#include "onnx/importer.h"
#include "quant/qdq.h"
#include "quant/qdq_absorb.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using test::TestModel;

/// An integer initializer (int8, uint8 or int32; stored as int32_data as ONNX does).
void intInitializer(TestModel& m, const std::string& name, std::vector<int64_t> dims,
                    const std::vector<int>& data, int type = onnx::TensorProto::INT8) {
  auto* t = m.proto.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (auto d : dims) t->add_dims(d);
  for (int v : data) t->add_int32_data(v);
}

struct PairSpec {
  float qScale = 0.05f, dqScale = 0.05f;
  int zeroPoint = 0;
  int zpType = onnx::TensorProto::INT8;  // 0: no zero point input (uint8 output)
};

/// x -> QuantizeLinear -> DequantizeLinear -> out, with its own scale / zero point constants.
void qdq(TestModel& m, const std::string& x, const std::string& out, const std::string& tag,
         const PairSpec& p = {}) {
  m.initializer(tag + "_qs", {}, {p.qScale});
  m.initializer(tag + "_ds", {}, {p.dqScale});
  std::vector<std::string> qin = {x, tag + "_qs"}, din = {tag + "_q", tag + "_ds"};
  if (p.zpType != 0) {
    intInitializer(m, tag + "_zp", {}, {p.zeroPoint}, p.zpType);
    qin.push_back(tag + "_zp");
    din.push_back(tag + "_zp");
  }
  m.node("QuantizeLinear", qin, {tag + "_q"}, tag + "_quantize");
  m.node("DequantizeLinear", din, {out}, tag + "_dequantize");
}

/// x [1,4,5,5] -> Q/DQ (spec) -> conv (float weights) -> y.
TestModel pairBeforeConv(const PairSpec& spec) {
  TestModel m(13);
  m.input("x", {1, 4, 5, 5});
  qdq(m, "x", "xq", "in", spec);
  m.randomInitializer("w", {8, 4, 3, 3}, 1, -0.5f, 0.5f);
  m.node("Conv", {"xq", "w"}, {"y"}, "conv");
  m.output("y");
  return m;
}

Expected<graph::Graph> importModel(const TestModel& m) {
  const std::string b = m.bytes();
  EI_ASSIGN_OR_RETURN(graph::Graph g, onnx_import::importFromBuffer(b.data(), b.size(),
                                                                    onnx_import::ImportOptions{}));
  EI_RETURN_IF_ERROR(graph::inferShapes(g));
  return g;
}

int countOps(const graph::Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes) n += node.opType == op;
  return n;
}

const graph::Node* findNode(const graph::Graph& g, const std::string& name) {
  for (const auto& n : g.nodes)
    if (n.name == name) return &n;
  return nullptr;
}

/// Runs the pass on `m` and expects it to leave every Q/DQ node in place, with a reason
/// containing `why`.
void expectLeftAlone(const TestModel& m, const std::string& why) {
  auto g = importModel(m);
  ASSERT_TRUE(g.ok()) << g.status().toString();
  const int q = countOps(*g, "QuantizeLinear"), dq = countOps(*g, "DequantizeLinear");
  auto r = quant::absorbQdq(*g);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_TRUE(r->scales.empty());
  EXPECT_EQ(r->pairsAbsorbed, 0);
  EXPECT_EQ(countOps(*g, "QuantizeLinear"), q);
  EXPECT_EQ(countOps(*g, "DequantizeLinear"), dq);
  ASSERT_FALSE(r->leftInPlace.empty());
  EXPECT_NE(r->leftInPlace[0].find(why), std::string::npos) << r->leftInPlace[0];
  // The policy has no INT8 layer.
  EXPECT_TRUE(quant::explicitInt8For(*g, r->scales).int8Layers().empty());
}

// ---- activation pairs ------------------------------------------------------------------------

TEST(QdqAbsorb, SymmetricPairIsAbsorbedWithItsScale) {
  auto g = importModel(pairBeforeConv({}));
  ASSERT_TRUE(g.ok()) << g.status().toString();
  auto r = quant::absorbQdq(*g);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->pairsAbsorbed, 1);
  EXPECT_TRUE(r->leftInPlace.empty());
  ASSERT_EQ(r->scales.size(), 1u);
  EXPECT_EQ(r->scales.at("x"), 0.05f);
  EXPECT_EQ(countOps(*g, "QuantizeLinear") + countOps(*g, "DequantizeLinear"), 0);
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_EQ(g->nodes[0].inputs[0], "x");  // the conv reads x directly
  EXPECT_FALSE(g->hasValue("xq"));        // the pair's values are gone
  EXPECT_FALSE(g->hasValue("in_q"));
  EXPECT_TRUE(graph::inferShapes(*g).ok());

  const quant::ExplicitInt8 e = quant::explicitInt8For(*g, r->scales);
  EXPECT_EQ(e.scales.at("x"), 0.05f);
  EXPECT_FLOAT_EQ(e.calibration.tensorAmax.at("x"), 0.05f * 127.f);
  EXPECT_EQ(e.int8Layers(), std::vector<std::string>{"conv"});
  EXPECT_TRUE(e.droppedScales.empty());
}

TEST(QdqAbsorb, OneQuantizeReadByTwoDequantizesIsAbsorbed) {
  TestModel m(13);
  m.input("x", {1, 4, 5, 5});
  m.initializer("s", {}, {0.02f});
  intInitializer(m, "zp", {}, {0});
  m.node("QuantizeLinear", {"x", "s", "zp"}, {"xq8"}, "q");
  m.node("DequantizeLinear", {"xq8", "s", "zp"}, {"a"}, "dq_a");
  m.node("DequantizeLinear", {"xq8", "s"}, {"b"}, "dq_b");  // int8 data: zero point optional
  m.randomInitializer("w", {4, 4, 1, 1}, 2);
  m.node("Conv", {"a", "w"}, {"c"}, "conv");
  m.node("Add", {"c", "b"}, {"y"}, "add");
  m.output("y");
  auto g = importModel(m);
  ASSERT_TRUE(g.ok()) << g.status().toString();
  auto r = quant::absorbQdq(*g);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->pairsAbsorbed, 2);
  EXPECT_EQ(r->scales.at("x"), 0.02f);
  EXPECT_EQ(findNode(*g, "conv")->inputs[0], "x");
  EXPECT_EQ(findNode(*g, "add")->inputs[1], "x");
}

TEST(QdqAbsorb, Uint8PairIsLeftAlone_n) {
  PairSpec p;
  p.zpType = onnx::TensorProto::UINT8;
  p.zeroPoint = 128;
  expectLeftAlone(pairBeforeConv(p), "uint8");
}

TEST(QdqAbsorb, QuantizeWithoutZeroPointIsUint8AndLeftAlone_n) {
  PairSpec p;
  p.zpType = 0;
  expectLeftAlone(pairBeforeConv(p), "no zero point");
}

TEST(QdqAbsorb, NonZeroInt8ZeroPointIsLeftAlone_n) {
  PairSpec p;
  p.zeroPoint = 3;
  expectLeftAlone(pairBeforeConv(p), "not 0");
}

TEST(QdqAbsorb, MismatchedQuantizeAndDequantizeScalesAreLeftAlone_n) {
  PairSpec p;
  p.dqScale = 0.1f;
  expectLeftAlone(pairBeforeConv(p), "another scale");
}

TEST(QdqAbsorb, PerAxisActivationScaleIsLeftAlone_n) {
  TestModel m(13);
  m.input("x", {1, 4, 5, 5});
  m.initializer("s", {4}, {0.1f, 0.2f, 0.3f, 0.4f});
  intInitializer(m, "zp", {4}, {0, 0, 0, 0});
  auto& q = m.node("QuantizeLinear", {"x", "s", "zp"}, {"xq8"}, "q");
  TestModel::attr(q, "axis", 1);
  auto& dq = m.node("DequantizeLinear", {"xq8", "s", "zp"}, {"xq"}, "dq");
  TestModel::attr(dq, "axis", 1);
  m.randomInitializer("w", {8, 4, 3, 3}, 1);
  m.node("Conv", {"xq", "w"}, {"y"}, "conv");
  m.output("y");
  expectLeftAlone(m, "per-axis");
}

TEST(QdqAbsorb, QuantizeWithoutDequantizeIsLeftAlone_n) {
  TestModel m(13);
  m.input("x", {1, 4, 5, 5});
  m.initializer("s", {}, {0.05f});
  intInitializer(m, "zp", {}, {0});
  m.node("QuantizeLinear", {"x", "s", "zp"}, {"y"}, "q");  // the int8 tensor is the output
  m.output("y", onnx::TensorProto::INT8);
  expectLeftAlone(m, "not read by a DequantizeLinear");
}

TEST(QdqAbsorb, QuantizeReadByAnotherOpIsLeftAlone_n) {
  TestModel m(13);
  m.input("x", {1, 4, 5, 5});
  m.initializer("s", {}, {0.05f});
  intInitializer(m, "zp", {}, {0});
  m.node("QuantizeLinear", {"x", "s", "zp"}, {"xq8"}, "q");
  m.node("DequantizeLinear", {"xq8", "s", "zp"}, {"xq"}, "dq");
  auto& cast = m.node("Cast", {"xq8"}, {"y2"}, "cast");
  TestModel::attr(cast, "to", onnx::TensorProto::FLOAT);
  m.node("Relu", {"xq"}, {"y"}, "relu");
  m.output("y");
  m.output("y2");
  expectLeftAlone(m, "Cast");
}

TEST(QdqAbsorb, TensorAlsoReadWithoutQdqIsLeftAlone_n) {
  // x feeds the Q/DQ of the conv and, unquantized, the Add: in the model the Add sees the
  // float x, so x cannot be given one scale for every reader.
  TestModel m = pairBeforeConv({});
  m.proto.mutable_graph()->clear_output();
  m.node("Add", {"x", "x"}, {"x2"}, "add");
  m.output("y");
  m.output("x2");
  expectLeftAlone(m, "also read without Q/DQ");
}

TEST(QdqAbsorb, TensorQuantizedWithTwoScalesIsLeftAlone_n) {
  TestModel m = pairBeforeConv({});
  PairSpec other;
  other.qScale = other.dqScale = 0.07f;
  qdq(m, "x", "xq2", "in2", other);
  m.node("Relu", {"xq2"}, {"r"}, "relu");
  m.output("r");
  expectLeftAlone(m, "different scales");
}

// ---- weights ---------------------------------------------------------------------------------

TEST(QdqAbsorb, WeightDequantizeIsFoldedToTheRightFloats) {
  // Per-channel int8 weights [3, 2, 1, 1] on axis 0, zero points 0.
  TestModel m(13);
  m.input("x", {1, 2, 4, 4});
  qdq(m, "x", "xq", "in");
  const std::vector<int> q = {127, -64, 5, -127, 0, 100};
  const std::vector<float> s = {0.01f, 0.002f, 0.5f};
  intInitializer(m, "wq", {3, 2, 1, 1}, q);
  m.initializer("ws", {3}, s);
  intInitializer(m, "wzp", {3}, {0, 0, 0});
  auto& dq = m.node("DequantizeLinear", {"wq", "ws", "wzp"}, {"w"}, "w_dequantize");
  TestModel::attr(dq, "axis", 0);
  // An int32 bias through DequantizeLinear (per tensor), as onnxruntime's Q/DQ format has it.
  intInitializer(m, "bq", {3}, {1000, -7, 0}, onnx::TensorProto::INT32);
  m.initializer("bs", {}, {0.0001f});
  m.node("DequantizeLinear", {"bq", "bs"}, {"b"}, "b_dequantize");
  m.node("Conv", {"xq", "w", "b"}, {"y"}, "conv");
  m.output("y");
  auto g = importModel(m);
  ASSERT_TRUE(g.ok()) << g.status().toString();
  auto r = quant::absorbQdq(*g);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->weightsFolded, 2);
  EXPECT_EQ(r->pairsAbsorbed, 1);
  ASSERT_EQ(g->nodes.size(), 1u);
  const Tensor* w = g->constant("w");
  ASSERT_NE(w, nullptr);
  ASSERT_EQ(w->dtype(), DataType::kFloat32);
  EXPECT_EQ(w->shape(), Shape({3, 2, 1, 1}));
  for (int i = 0; i < 6; ++i)
    EXPECT_EQ(w->data<float>()[i],
              static_cast<float>(q[static_cast<size_t>(i)]) * s[static_cast<size_t>(i / 2)])
        << i;
  const Tensor* b = g->constant("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->data<float>()[0], 1000.f * 0.0001f);
  EXPECT_EQ(b->data<float>()[1], -7.f * 0.0001f);
  EXPECT_EQ(quant::explicitInt8For(*g, r->scales).int8Layers(), std::vector<std::string>{"conv"});
}

TEST(QdqAbsorb, FloatWeightsThroughQuantizeAndDequantizeAreFakeQuantized) {
  TestModel m(13);
  m.input("x", {1, 2, 4, 4});
  m.initializer("wf", {2, 2, 1, 1}, {0.30f, -0.26f, 0.049f, 1.0f});
  m.initializer("ws", {}, {0.1f});
  intInitializer(m, "wzp", {}, {0});
  m.node("QuantizeLinear", {"wf", "ws", "wzp"}, {"wq"}, "w_quantize");
  m.node("DequantizeLinear", {"wq", "ws", "wzp"}, {"w"}, "w_dequantize");
  m.node("Conv", {"x", "w"}, {"y"}, "conv");
  m.output("y");
  auto g = importModel(m);
  ASSERT_TRUE(g.ok()) << g.status().toString();
  auto r = quant::absorbQdq(*g);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->weightsFolded, 1);
  ASSERT_EQ(g->nodes.size(), 1u);
  EXPECT_FALSE(g->hasValue("wq"));
  const Tensor* w = g->constant("w");
  ASSERT_NE(w, nullptr);
  // round-half-even(w / 0.1) * 0.1: 3, -3 (-2.6), 0 (0.49), 10
  const float want[4] = {3.f * 0.1f, -3.f * 0.1f, 0.f, 10.f * 0.1f};
  for (int i = 0; i < 4; ++i) EXPECT_EQ(w->data<float>()[i], want[i]) << i;
  // No activation scale: the conv is not an INT8 layer of the model.
  const quant::ExplicitInt8 e = quant::explicitInt8For(*g, r->scales);
  EXPECT_TRUE(e.empty());
  EXPECT_EQ(e.calibration.layerPrecision.at("conv"), Precision::kFp16);
}

TEST(QdqAbsorb, AsymmetricWeightDequantizeIsNotFolded_n) {
  TestModel m(13);
  m.input("x", {1, 2, 4, 4});
  intInitializer(m, "wq", {2, 2, 1, 1}, {1, 2, 3, 4});
  m.initializer("ws", {}, {0.1f});
  intInitializer(m, "wzp", {}, {2});
  m.node("DequantizeLinear", {"wq", "ws", "wzp"}, {"w"}, "w_dequantize");
  m.node("Conv", {"x", "w"}, {"y"}, "conv");
  m.output("y");
  auto g = importModel(m);
  ASSERT_TRUE(g.ok()) << g.status().toString();
  auto r = quant::absorbQdq(*g);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->weightsFolded, 0);
  EXPECT_EQ(countOps(*g, "DequantizeLinear"), 1);
}

TEST(QdqAbsorb, DequantizeOfAConstantReadByAnotherOpIsNotFolded_n) {
  TestModel m(13);
  m.input("x", {4});
  intInitializer(m, "cq", {4}, {1, 2, 3, 4});
  m.initializer("cs", {}, {0.1f});
  m.node("DequantizeLinear", {"cq", "cs"}, {"c"}, "c_dequantize");
  m.node("Add", {"x", "c"}, {"y"}, "add");
  m.output("y");
  auto g = importModel(m);
  ASSERT_TRUE(g.ok()) << g.status().toString();
  auto r = quant::absorbQdq(*g);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->weightsFolded, 0);
  EXPECT_EQ(countOps(*g, "DequantizeLinear"), 1);
}

// ---- policy and fusion ---------------------------------------------------------------------

/// x -> Q/DQ -> conv1 -> Q/DQ -> relu1 -> conv2 -> relu2 -> Q/DQ -> conv3 -> conv5 -> y:
/// conv2 reads relu1's output, quantized through the Relu; conv5 reads conv3's unquantized
/// output.
TestModel policyModel() {
  TestModel m(13);
  m.input("x", {1, 4, 6, 6});
  qdq(m, "x", "xq", "in", {});
  m.randomInitializer("w1", {8, 4, 3, 3}, 1);
  m.randomInitializer("w2", {8, 8, 1, 1}, 2);
  m.randomInitializer("w3", {8, 8, 1, 1}, 3);
  m.randomInitializer("w5", {8, 8, 1, 1}, 5);
  auto& c1 = m.node("Conv", {"xq", "w1"}, {"c1"}, "conv1");
  TestModel::attrInts(c1, "pads", {1, 1, 1, 1});
  PairSpec p1;
  p1.qScale = p1.dqScale = 0.125f;
  qdq(m, "c1", "c1q", "c1", p1);  // before the Relu: fusion removes c1
  m.node("Relu", {"c1q"}, {"r1"}, "relu1");
  m.node("Conv", {"r1", "w2"}, {"c2"}, "conv2");
  m.node("Relu", {"c2"}, {"r2"}, "relu2");
  PairSpec p2;
  p2.qScale = p2.dqScale = 0.25f;
  qdq(m, "r2", "r2q", "r2", p2);
  m.node("Conv", {"r2q", "w3"}, {"c3"}, "conv3");
  m.node("Conv", {"c3", "w5"}, {"y"}, "conv5");
  m.output("y");
  return m;
}

TEST(QdqAbsorb, PolicyNamesTheLayersWhoseInputsTheModelQuantizes) {
  auto g = importModel(policyModel());
  ASSERT_TRUE(g.ok()) << g.status().toString();
  auto r = quant::absorbQdq(*g);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->pairsAbsorbed, 3);
  EXPECT_EQ(r->scalesPropagated, 1);  // relu1's output takes c1's scale
  EXPECT_EQ(r->scales.at("r1"), 0.125f);
  const quant::ExplicitInt8 e = quant::explicitInt8For(*g, r->scales);
  EXPECT_EQ(e.int8Layers(), (std::vector<std::string>{"conv1", "conv2", "conv3"}));
  EXPECT_EQ(e.calibration.layerPrecision.at("conv5"), Precision::kFp16);
}

TEST(QdqAbsorb, ThroughTheBuilderPassesScalesAndPolicyUseTheFusedGraphsNames) {
  BuilderConfig cfg;
  quant::ExplicitInt8 e;
  auto g = builder::importAndOptimize(policyModel().bytes(), cfg, ".", &e);
  ASSERT_TRUE(g.ok()) << g.status().toString();
  EXPECT_EQ(countOps(*g, "QuantizeLinear") + countOps(*g, "DequantizeLinear"), 0);
  // conv1 + relu1 and conv2 + relu2 are FusedConv nodes named as their Conv.
  ASSERT_NE(findNode(*g, "conv1"), nullptr);
  EXPECT_EQ(findNode(*g, "conv1")->opType, "FusedConv");
  EXPECT_EQ(findNode(*g, "conv2")->opType, "FusedConv");
  // c1 was fused away: its scale is dropped, not left dangling; every kept scale names a
  // float activation of the optimised graph.
  EXPECT_EQ(e.droppedScales, std::vector<std::string>{"c1"});
  for (const auto& [name, s] : e.scales) {
    const graph::Value* v = g->findValue(name);
    ASSERT_NE(v, nullptr) << name;
    EXPECT_FALSE(g->isConstant(name));
  }
  EXPECT_EQ(e.scales.at("x"), 0.05f);
  EXPECT_EQ(e.scales.at("r1"), 0.125f);
  EXPECT_EQ(e.scales.at("r2"), 0.25f);
  EXPECT_EQ(e.int8Layers(), (std::vector<std::string>{"conv1", "conv2", "conv3"}));
  for (const auto& [layer, p] : e.calibration.layerPrecision) {
    (void)p;
    EXPECT_NE(findNode(*g, layer), nullptr) << layer;
  }
}

TEST(QdqAbsorb, WithoutTheExplicitResultOrWhenSwitchedOffTheQdqNodesStay_n) {
  // The CPU reference (and FP16/FP32 builds) run the Q/DQ graph as it is.
  BuilderConfig cfg;
  auto g = builder::importAndOptimize(policyModel().bytes(), cfg, ".");
  ASSERT_TRUE(g.ok()) << g.status().toString();
  EXPECT_EQ(countOps(*g, "QuantizeLinear"), 3);
  EXPECT_EQ(countOps(*g, "DequantizeLinear"), 3);
  cfg.passes.explicitQuantization = false;
  quant::ExplicitInt8 e;
  g = builder::importAndOptimize(policyModel().bytes(), cfg, ".", &e);
  ASSERT_TRUE(g.ok()) << g.status().toString();
  EXPECT_EQ(countOps(*g, "QuantizeLinear"), 3);
  EXPECT_TRUE(e.empty());
  EXPECT_TRUE(e.int8Layers().empty());
}

TEST(QdqAbsorb, CalibrationCacheNeedsNoRangeForTensorsTheModelQuantizes) {
  BuilderConfig cfg;
  quant::ExplicitInt8 e;
  const std::string bytes = policyModel().bytes();
  auto g = builder::importAndOptimize(bytes, cfg, ".", &e);
  ASSERT_TRUE(g.ok()) << g.status().toString();
  test::TempDir dir;
  CalibrationCache c;
  c.sdkVersion = "test";
  c.modelHash = modelHashOf(bytes.data(), bytes.size());
  c.preprocessHash = "raw";
  c.tensorAmax["c3"] = 4.f;  // conv5's input, which the model leaves unquantized
  const std::string path = dir.file("m.calib");
  ASSERT_TRUE(c.save(path).ok());
  EXPECT_TRUE(quant::checkCalibrationCache(path, c.modelHash, *g, &e.scales).ok());
  // Without the model's scales the same cache misses x, r1 and r2.
  const Status s = quant::checkCalibrationCache(path, c.modelHash, *g);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("no range for 3"), std::string::npos) << s.toString();
}

TEST(QdqAbsorb, CalibrationCacheStillNeedsRangesForTheOtherLayers_n) {
  BuilderConfig cfg;
  quant::ExplicitInt8 e;
  const std::string bytes = policyModel().bytes();
  auto g = builder::importAndOptimize(bytes, cfg, ".", &e);
  ASSERT_TRUE(g.ok()) << g.status().toString();
  test::TempDir dir;
  CalibrationCache c;
  c.sdkVersion = "test";
  c.modelHash = modelHashOf(bytes.data(), bytes.size());
  c.preprocessHash = "raw";
  const std::string path = dir.file("m.calib");
  ASSERT_TRUE(c.save(path).ok());
  const Status s = quant::checkCalibrationCache(path, c.modelHash, *g, &e.scales);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("'c3'"), std::string::npos) << s.toString();
}

}  // namespace
}  // namespace edgeinfer
