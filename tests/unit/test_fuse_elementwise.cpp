// The fuseElementwise pass (graph/passes/fuse_elementwise.cpp), the FusedElementwise schema
// and program format (graph/ops/fused_elementwise.h), its CPU reference kernel, and the
// cuda-fe tactics (kernels/cuda/fused_eltwise.h):
//   - which graphs fuse and which must not (multi-consumer intermediates, graph outputs,
//     non-elementwise ops, other types, format limits);
//   - the fused graph, run on the CPU reference, equals the unfused one (max |diff| <= 1e-6,
//     in practice bit for bit);
//   - every cuda-fe tactic against the CPU reference (GPU only; FP32 rel. L2 <= 1e-5, FP16
//     <= 2e-3), and the layers it refuses (no GPU needed);
//   - malformed programs are rejected by the schema and the kernel (_n).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "graph/op_schema.h"
#include "graph/ops/fused_elementwise.h"
#include "graph/passes/passes.h"
#include "kernels/ref/ref_kernels.h"
#include "runtime/graph_engine.h"
#include "test_model.h"

#ifdef EDGEINFER_HAVE_CUDA
#include "kernels/cuda/cuda_provider.h"
#include "kernels/cuda/fused_eltwise.h"
#include "tactic_test_util.h"
#endif

namespace edgeinfer {
namespace {

using graph::Attribute;
using graph::FeOp;

Tensor randomTensor(const Shape& s, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  Tensor t = Tensor::zeros(DataType::kFloat32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

/// A small graph built node by node (in topological order), shapes inferred on demand.
struct TestGraph {
  graph::Graph g;
  std::map<std::string, Tensor> feeds;  // random values for the graph inputs
  uint32_t seed = 100;

  void input(const std::string& name, const Shape& shape, float lo = -2.f, float hi = 2.f) {
    g.inputs.push_back(name);
    graph::Value& v = g.value(name);
    v.dtype = DataType::kFloat32;
    v.shape = shape;
    v.shapeKnown = true;
    feeds[name] = randomTensor(shape, seed++, lo, hi);
  }
  void constant(const std::string& name, Tensor t) {
    graph::Value& v = g.value(name);
    v.dtype = t.dtype();
    v.shape = t.shape();
    v.shapeKnown = true;
    v.constant = std::move(t);
  }
  void scalar(const std::string& name, float x) {
    Tensor t = Tensor::zeros(DataType::kFloat32, Shape{});
    t.data<float>()[0] = x;
    constant(name, t);
  }
  graph::Node& node(const std::string& op, std::vector<std::string> in,
                    std::vector<std::string> out) {
    graph::Node n;
    n.name = op + "_" + std::to_string(g.nodes.size());
    n.opType = op;
    n.inputs = std::move(in);
    n.outputs = std::move(out);
    n.sourceIndex = static_cast<int64_t>(g.nodes.size());
    g.nodes.push_back(std::move(n));
    return g.nodes.back();
  }
  void output(const std::string& name) { g.outputs.push_back(name); }
  ::testing::AssertionResult infer() {
    const Status s = graph::inferShapes(g);
    if (!s.ok()) return ::testing::AssertionFailure() << s.toString();
    return ::testing::AssertionSuccess();
  }
};

/// Runs a graph on the CPU reference, node by node; returns its outputs.
std::map<std::string, Tensor> runGraph(const graph::Graph& g,
                                       const std::map<std::string, Tensor>& feeds) {
  std::map<std::string, Tensor> env = feeds;
  for (const graph::Node& n : g.nodes) {
    std::vector<const Tensor*> in;
    for (const std::string& name : n.inputs) {
      if (name.empty()) {
        in.push_back(nullptr);
        continue;
      }
      const Tensor* c = g.constant(name);
      auto it = env.find(name);
      in.push_back(c ? c : (it != env.end() ? &it->second : nullptr));
      EXPECT_TRUE(in.back() != nullptr) << name;
      if (!in.back()) return {};
    }
    std::vector<Tensor> out;
    const Status s = ref::runNode(n, in, out);
    EXPECT_TRUE(s.ok()) << s.toString();
    if (!s.ok()) return {};
    for (size_t i = 0; i < n.outputs.size(); ++i) env[n.outputs[i]] = out[i];
  }
  std::map<std::string, Tensor> result;
  for (const std::string& o : g.outputs) result[o] = env[o];
  return result;
}

int countOp(const graph::Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes) n += node.opType == op;
  return n;
}

/// Fuses a copy of t.g; expects `fusedNodes` FusedElementwise nodes, `totalNodes` nodes in all,
/// and the same outputs as the unfused graph (max |diff| <= 1e-6). Returns the fused graph.
graph::Graph fuseAndCompare(TestGraph& t, int fusedNodes, size_t totalNodes) {
  EXPECT_TRUE(t.infer());
  graph::Graph fused = t.g;
  auto n = graph::fuseElementwise(fused);
  EXPECT_TRUE(n.ok()) << n.status().toString();
  if (!n.ok()) return fused;
  EXPECT_EQ(*n, fusedNodes);
  EXPECT_EQ(countOp(fused, "FusedElementwise"), fusedNodes);
  EXPECT_EQ(fused.nodes.size(), totalNodes);
  // The fused graph is still consistent: shapes infer, and outputs keep their shapes.
  graph::Graph reinferred = fused;
  const Status s = graph::inferShapes(reinferred);
  EXPECT_TRUE(s.ok()) << s.toString();
  for (const std::string& o : t.g.outputs)
    EXPECT_EQ(reinferred.findValue(o)->shape, t.g.findValue(o)->shape) << o;
  const auto want = runGraph(t.g, t.feeds);
  const auto got = runGraph(fused, t.feeds);
  EXPECT_EQ(want.size(), got.size());
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    if (it == got.end()) {
      ADD_FAILURE() << "missing output " << name;
      continue;
    }
    EXPECT_EQ(it->second.shape(), w.shape()) << name;
    if (it->second.shape() != w.shape()) continue;
    double worst = 0;
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double a = it->second.getAsDouble(i), b = w.getAsDouble(i);
      if (std::isnan(a) && std::isnan(b)) continue;
      worst = std::max(worst, std::fabs(a - b) / std::max(1.0, std::fabs(b)));
    }
    EXPECT_LE(worst, 1e-6) << name;
  }
  return fused;
}

const graph::Node* findOp(const graph::Graph& g, const std::string& op) {
  for (const auto& n : g.nodes)
    if (n.opType == op) return &n;
  return nullptr;
}

// ---- Graphs that fuse ------------------------------------------------------------------------

TestGraph silu() {
  TestGraph t;
  t.input("x", Shape{2, 3, 5, 7});
  t.node("Sigmoid", {"x"}, {"s"});
  t.node("Mul", {"x", "s"}, {"y"});
  t.output("y");
  return t;
}

TEST(FuseElementwise, SiluIsOneNodeWithOneInput) {
  TestGraph t = silu();
  graph::Graph f = fuseAndCompare(t, 1, 1);
  const graph::Node* n = findOp(f, "FusedElementwise");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->domain, graph::kEdgeInferDomain);
  EXPECT_EQ(n->inputs, std::vector<std::string>{"x"});
  EXPECT_EQ(n->outputs, std::vector<std::string>{"y"});
  graph::FeProgram p;
  ASSERT_TRUE(graph::decodeFeProgram(n->attrs, 1, &p).ok());
  ASSERT_EQ(p.instrs.size(), 2u);
  EXPECT_EQ(p.instrs[0].op, FeOp::kSigmoid);
  EXPECT_EQ(p.instrs[1].op, FeOp::kMul);
  EXPECT_FALSE(f.hasValue("s"));  // the intermediate is gone
}

TestGraph hardSwishPattern() {  // x * Clip(x + 3, 0, 6) / 6, as exporters write it
  TestGraph t;
  t.input("x", Shape{1, 8, 9, 11}, -5.f, 5.f);
  t.scalar("three", 3.f);
  t.scalar("zero", 0.f);
  t.scalar("six", 6.f);
  t.node("Add", {"x", "three"}, {"a"});
  t.node("Clip", {"a", "zero", "six"}, {"c"});
  t.node("Mul", {"x", "c"}, {"m"});
  t.node("Div", {"m", "six"}, {"y"});
  t.output("y");
  return t;
}

TEST(FuseElementwise, HardSwishPatternScalarsBecomeImmediates) {
  TestGraph t = hardSwishPattern();
  graph::Graph f = fuseAndCompare(t, 1, 1);
  const graph::Node* n = findOp(f, "FusedElementwise");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->inputs, std::vector<std::string>{"x"});
  graph::FeProgram p;
  ASSERT_TRUE(graph::decodeFeProgram(n->attrs, 1, &p).ok());
  EXPECT_EQ(p.instrs.size(), 4u);
  EXPECT_EQ(p.constants.size(), 3u);  // 3, 0, 6 (deduplicated)
}

TestGraph gelu() {  // x * 0.5 * (1 + erf(x / sqrt(2)))
  TestGraph t;
  t.input("x", Shape{3, 17, 13});
  t.scalar("sqrt2", 1.4142135623730951f);
  t.scalar("one", 1.f);
  t.scalar("half", 0.5f);
  t.node("Div", {"x", "sqrt2"}, {"d"});
  t.node("Erf", {"d"}, {"e"});
  t.node("Add", {"e", "one"}, {"a"});
  t.node("Mul", {"x", "a"}, {"m"});
  t.node("Mul", {"m", "half"}, {"y"});
  t.output("y");
  return t;
}

TEST(FuseElementwise, GeluIsOneNode) {
  TestGraph t = gelu();
  fuseAndCompare(t, 1, 1);
}

TestGraph broadcastScaleShift() {
  TestGraph t;
  t.input("x", Shape{2, 3, 5, 7});
  t.constant("scale", randomTensor(Shape{1, 3, 1, 1}, 7));
  t.constant("shift", randomTensor(Shape{3, 1, 1}, 8));
  t.node("Mul", {"x", "scale"}, {"m"});
  t.node("Add", {"m", "shift"}, {"a"});
  t.node("Relu", {"a"}, {"y"});
  t.output("y");
  return t;
}

TEST(FuseElementwise, BroadcastConstantsBecomeInputs) {
  TestGraph t = broadcastScaleShift();
  graph::Graph f = fuseAndCompare(t, 1, 1);
  const graph::Node* n = findOp(f, "FusedElementwise");
  ASSERT_NE(n, nullptr);
  EXPECT_EQ(n->inputs, (std::vector<std::string>{"x", "scale", "shift"}));
}

TestGraph broadcastGrowsShape() {  // [2,1,5] + [1,4,1] -> [2,4,5]
  TestGraph t;
  t.input("a", Shape{2, 1, 5});
  t.input("b", Shape{1, 4, 1});
  t.node("Add", {"a", "b"}, {"s"});
  t.node("Tanh", {"s"}, {"th"});
  t.node("Max", {"th", "a"}, {"y"});
  t.output("y");
  return t;
}

TEST(FuseElementwise, BroadcastOfTwoActivationsGrowsTheShape) {
  TestGraph t = broadcastGrowsShape();
  graph::Graph f = fuseAndCompare(t, 1, 1);
  EXPECT_EQ(f.findValue("y")->shape, (Shape{2, 4, 5}));
}

TestGraph dagWithSharedIntermediate() {  // t = a - b; y = t * Sigmoid(t)
  TestGraph t;
  t.input("a", Shape{4, 6});
  t.input("b", Shape{6});
  t.node("Sub", {"a", "b"}, {"t"});
  t.node("Sigmoid", {"t"}, {"s"});
  t.node("Mul", {"t", "s"}, {"y"});
  t.output("y");
  return t;
}

TEST(FuseElementwise, IntermediateReadTwiceInsideTheGroupFuses) {
  TestGraph t = dagWithSharedIntermediate();
  graph::Graph f = fuseAndCompare(t, 1, 1);
  EXPECT_EQ(findOp(f, "FusedElementwise")->inputs, (std::vector<std::string>{"a", "b"}));
}

TEST(FuseElementwise, EveryFusibleOpMatchesTheUnfusedGraph) {
  TestGraph t;
  t.input("x", Shape{5, 9, 3});
  t.input("w", Shape{9, 1});
  t.scalar("one", 1.f);
  t.scalar("mn", -0.75f);
  t.scalar("mx", 1.25f);
  t.scalar("p", 1.5f);
  auto& lr = t.node("LeakyRelu", {"x"}, {"v0"});
  lr.attrs.set("alpha", Attribute::Float(0.2f));
  auto& hs = t.node("HardSigmoid", {"v0"}, {"v1"});
  hs.attrs.set("alpha", Attribute::Float(0.3f));
  hs.attrs.set("beta", Attribute::Float(0.4f));
  t.node("Add", {"v1", "x"}, {"v2"});
  auto& elu = t.node("Elu", {"v2"}, {"v3"});
  elu.attrs.set("alpha", Attribute::Float(0.7f));
  t.node("Selu", {"v3"}, {"v4"});
  t.node("Softplus", {"v4"}, {"v5"});
  t.node("Sub", {"v5", "w"}, {"v6"});
  t.node("Clip", {"v6", "mn", "mx"}, {"v7"});
  t.node("HardSwish", {"v7"}, {"v8"});
  t.node("Tanh", {"v8"}, {"v9"});
  t.node("Relu", {"v9"}, {"v10"});
  t.node("Neg", {"v10"}, {"v11"});
  t.node("Exp", {"v11"}, {"v12"});  // in (0, 1]
  t.node("Abs", {"x"}, {"ax"});
  t.node("Add", {"ax", "one"}, {"ax1"});  // >= 1
  t.node("Log", {"ax1"}, {"lg"});
  t.node("Sqrt", {"ax1"}, {"sq"});
  t.node("Reciprocal", {"sq"}, {"rc"});
  t.node("Pow", {"ax1", "p"}, {"pw"});
  t.node("Floor", {"pw"}, {"fl"});
  t.node("Ceil", {"lg"}, {"ce"});
  t.node("Max", {"fl", "rc"}, {"m1"});
  t.node("Min", {"ce", "v12"}, {"m2"});
  t.node("Div", {"m1", "ax1"}, {"d"});
  t.node("Mul", {"d", "m2"}, {"e1"});
  t.node("Erf", {"e1"}, {"e2"});
  t.node("Add", {"e2", "v12"}, {"y"});
  t.output("y");
  graph::Graph f = fuseAndCompare(t, 1, 1);
  EXPECT_EQ(findOp(f, "FusedElementwise")->inputs, (std::vector<std::string>{"x", "w"}));
}

TEST(FuseElementwise, LongChainReusesRegisters) {
  TestGraph t;
  t.input("x", Shape{33});
  std::string prev = "x";
  for (int i = 0; i < 40; ++i) {
    const std::string out = i == 39 ? "y" : "t" + std::to_string(i);
    t.node(i % 2 ? "Tanh" : "Neg", {prev}, {out});
    prev = out;
  }
  t.output("y");
  graph::Graph f = fuseAndCompare(t, 1, 1);
  graph::FeProgram p;
  ASSERT_TRUE(graph::decodeFeProgram(findOp(f, "FusedElementwise")->attrs, 1, &p).ok());
  EXPECT_EQ(p.instrs.size(), 40u);
  EXPECT_LE(p.numRegisters, 2);
}

TEST(FuseElementwise, TwoChainsAroundANonElementwiseNode) {
  TestGraph t;
  t.input("x", Shape{2, 3, 4});
  t.scalar("two", 2.f);
  t.node("Mul", {"x", "two"}, {"a"});
  t.node("Relu", {"a"}, {"b"});
  auto& tr = t.node("Transpose", {"b"}, {"c"});
  tr.attrs.set("perm", Attribute::Ints({0, 2, 1}));
  t.node("Sigmoid", {"c"}, {"d"});
  t.node("Mul", {"c", "d"}, {"y"});
  t.output("y");
  graph::Graph f = fuseAndCompare(t, 2, 3);
  EXPECT_EQ(f.nodes[1].opType, "Transpose");  // order kept: producer, Transpose, consumer
  EXPECT_EQ(f.nodes[0].outputs, std::vector<std::string>{"b"});
  EXPECT_EQ(f.nodes[2].outputs, std::vector<std::string>{"y"});
}

TEST(FuseElementwise, GraphOutputIntermediateEndsTheGroup) {
  TestGraph t;
  t.input("x", Shape{7, 5});
  t.scalar("one", 1.f);
  t.node("Add", {"x", "one"}, {"a"});
  t.node("Relu", {"a"}, {"b"});
  t.node("Mul", {"b", "b"}, {"y"});
  t.output("a");  // a is needed outside: Add stays, Relu + Mul fuse
  t.output("y");
  graph::Graph f = fuseAndCompare(t, 1, 2);
  EXPECT_EQ(f.nodes[0].opType, "Add");
  EXPECT_EQ(findOp(f, "FusedElementwise")->inputs, std::vector<std::string>{"a"});
}

// ---- Graphs that must not fuse ---------------------------------------------------------------

/// The pass makes no rewrite and leaves the graph as it was.
void expectUnchanged(TestGraph& t) {
  ASSERT_TRUE(t.infer());
  graph::Graph g = t.g;
  auto n = graph::fuseElementwise(g);
  ASSERT_TRUE(n.ok()) << n.status().toString();
  EXPECT_EQ(*n, 0);
  ASSERT_EQ(g.nodes.size(), t.g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    EXPECT_EQ(g.nodes[i].opType, t.g.nodes[i].opType);
    EXPECT_EQ(g.nodes[i].inputs, t.g.nodes[i].inputs);
    EXPECT_EQ(g.nodes[i].outputs, t.g.nodes[i].outputs);
  }
}

TEST(FuseElementwise, MultiConsumerIntermediate_n) {
  TestGraph t;  // s feeds Mul and Relu, which end in different outputs
  t.input("x", Shape{3, 4});
  t.node("Sigmoid", {"x"}, {"s"});
  t.node("Mul", {"x", "s"}, {"y1"});
  t.node("Relu", {"s"}, {"y2"});
  t.output("y1");
  t.output("y2");
  expectUnchanged(t);
}

TEST(FuseElementwise, GraphOutputIntermediate_n) {
  TestGraph t;
  t.input("x", Shape{3, 4});
  t.node("Exp", {"x"}, {"e"});
  t.node("Neg", {"e"}, {"y"});
  t.output("e");
  t.output("y");
  expectUnchanged(t);
}

TEST(FuseElementwise, NonElementwiseBetween_n) {
  TestGraph t;
  t.input("x", Shape{2, 5});
  t.node("Relu", {"x"}, {"r"});
  auto& sm = t.node("Softmax", {"r"}, {"s"});
  sm.attrs.set("axis", Attribute::Int(1));
  t.node("Sigmoid", {"s"}, {"y"});
  t.output("y");
  expectUnchanged(t);
}

TEST(FuseElementwise, SingleNode_n) {
  TestGraph t;
  t.input("x", Shape{2, 5});
  t.node("Relu", {"x"}, {"y"});
  t.output("y");
  expectUnchanged(t);
}

TEST(FuseElementwise, IntegerChain_n) {
  TestGraph t;
  t.g.inputs.push_back("i");
  graph::Value& v = t.g.value("i");
  v.dtype = DataType::kInt64;
  v.shape = Shape{4};
  v.shapeKnown = true;
  t.node("Neg", {"i"}, {"n"});
  t.node("Abs", {"n"}, {"y"});
  t.output("y");
  ASSERT_TRUE(t.infer());
  graph::Graph g = t.g;
  auto r = graph::fuseElementwise(g);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, 0);
  EXPECT_EQ(g.nodes.size(), 2u);
}

TEST(FuseElementwise, UnknownShape_n) {
  TestGraph t;
  t.g.inputs.push_back("x");
  graph::Value& v = t.g.value("x");
  v.dtype = DataType::kFloat32;
  v.shape = Shape{-1, 5};
  v.shapeKnown = true;
  t.node("Relu", {"x"}, {"r"});
  t.node("Neg", {"r"}, {"y"});
  t.output("y");
  expectUnchanged(t);
}

TEST(FuseElementwise, ClipWithRuntimeBound_n) {
  TestGraph t;  // Clip's max is a graph input: not a fusible activation
  t.input("x", Shape{6});
  t.input("hi", Shape{});
  t.node("Clip", {"x", "", "hi"}, {"c"});
  t.node("Neg", {"c"}, {"y"});
  t.output("y");
  expectUnchanged(t);
}

TEST(FuseElementwise, VariadicMax_n) {
  TestGraph t;  // Max of three inputs is not a binary op
  t.input("a", Shape{6});
  t.input("b", Shape{6});
  t.input("c", Shape{6});
  t.node("Max", {"a", "b", "c"}, {"m"});
  t.node("Neg", {"m"}, {"y"});
  t.output("y");
  expectUnchanged(t);
}

TEST(FuseElementwise, TooManyInputs_n) {
  TestGraph t;  // a sum of 10 inputs needs more than kFeMaxInputs: left unfused
  std::string prev = "x0";
  t.input("x0", Shape{3});
  for (int i = 1; i < 10; ++i) {
    const std::string in = "x" + std::to_string(i), out = i == 9 ? "y" : "s" + std::to_string(i);
    t.input(in, Shape{3});
    t.node("Add", {prev, in}, {out});
    prev = out;
  }
  t.output("y");
  expectUnchanged(t);
}

// ---- Through the builder: Conv -> SiLU -> GELU-like tail, CPU engine, engine file -----------

std::string siluModel() {
  test::TestModel m(13);
  m.input("x", {1, 8, 7, 5});
  m.randomInitializer("w", {8, 8, 3, 3}, 21, -0.3f, 0.3f);
  m.randomInitializer("b", {8}, 22);
  m.initializer("half", {}, {0.5f});
  m.initializer("one", {}, {1.f});
  auto& conv = m.node("Conv", {"x", "w", "b"}, {"c"});
  test::TestModel::attrInts(conv, "pads", {1, 1, 1, 1});
  m.node("Sigmoid", {"c"}, {"s"});  // c has two readers: the Conv keeps it, SiLU fuses
  m.node("Mul", {"c", "s"}, {"silu"});
  m.node("Erf", {"silu"}, {"e"});
  m.node("Add", {"e", "one"}, {"a"});
  m.node("Mul", {"a", "half"}, {"y"});
  m.output("y");
  return m.bytes();
}

std::unique_ptr<Engine> buildCpu(const std::string& bytes, bool fuse) {
  BuilderConfig cfg;
  cfg.backend = Backend::kCpu;
  cfg.passes.fuseElementwise = fuse;
  auto e = Builder::buildFromBuffer(bytes.data(), bytes.size(), cfg);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  return e.ok() ? std::move(e).value() : nullptr;
}

Tensor runEngine(const Engine& e) {
  auto ctx = e.createExecutionContext();
  EXPECT_TRUE(ctx.ok());
  if (!ctx.ok()) return Tensor();
  auto out = (*ctx)->run({{"x", randomTensor(Shape{1, 8, 7, 5}, 9)}});
  EXPECT_TRUE(out.ok()) << out.status().toString();
  return out.ok() ? out->at("y") : Tensor();
}

TEST(FuseElementwise, BuilderFusesAndEngineFileKeepsTheProgram) {
  const std::string model = siluModel();
  auto fused = buildCpu(model, true);
  auto plain = buildCpu(model, false);
  ASSERT_TRUE(fused && plain);
  const auto& g = static_cast<const runtime::GraphEngine&>(*fused).graph();
  EXPECT_EQ(countOp(g, "FusedElementwise"), 1);
  EXPECT_EQ(g.nodes.size(), 2u);  // Conv, FusedElementwise
  EXPECT_EQ(countOp(static_cast<const runtime::GraphEngine&>(*plain).graph(), "FusedElementwise"),
            0);
  const Tensor a = runEngine(*fused), b = runEngine(*plain);
  ASSERT_EQ(a.shape(), b.shape());
  for (int64_t i = 0; i < a.numel(); ++i)
    EXPECT_NEAR(a.data<float>()[i], b.data<float>()[i], 1e-6) << i;
  auto bytes = fused->serialize();
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  auto loaded = Engine::deserialize(bytes->data(), bytes->size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  const Tensor c = runEngine(**loaded);
  ASSERT_EQ(c.shape(), a.shape());
  EXPECT_EQ(0, std::memcmp(c.raw(), a.raw(), a.bytes()));
}

// ---- Program format, schema and reference kernel ---------------------------------------------

graph::Node feNode(std::vector<int64_t> program, std::vector<float> constants, size_t inputs) {
  graph::Node n;
  n.name = "fe";
  n.opType = "FusedElementwise";
  n.domain = graph::kEdgeInferDomain;
  for (size_t i = 0; i < inputs; ++i) n.inputs.push_back("x" + std::to_string(i));
  n.outputs = {"y"};
  n.attrs.set("program", Attribute::Ints(std::move(program)));
  n.attrs.set("constants", Attribute::Floats(std::move(constants)));
  return n;
}

TEST(FusedElementwiseOp, RefKernelBroadcastsAndUsesImmediates) {
  // y = (x0 + x1) * 2.5, x0 [2,3], x1 [3]
  const graph::Node n = feNode({32, 2, 0, 1, 0, 34, 2, 2, -1, 0}, {2.5f}, 2);
  Tensor a = randomTensor(Shape{2, 3}, 1), b = randomTensor(Shape{3}, 2);
  std::vector<Tensor> out;
  const Status s = ref::runNode(n, {&a, &b}, out);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(out[0].shape(), (Shape{2, 3}));
  for (int64_t i = 0; i < 6; ++i)
    EXPECT_EQ(out[0].data<float>()[i], (a.data<float>()[i] + b.data<float>()[i % 3]) * 2.5f);
}

TEST(FusedElementwiseOp, RefKernelFloat16) {
  const graph::Node n = feNode({static_cast<int64_t>(FeOp::kSigmoid), 0, 0, 0, 0}, {}, 1);
  Tensor x = Tensor::zeros(DataType::kFloat16, Shape{5});
  Tensor xf = randomTensor(Shape{5}, 3);
  for (int64_t i = 0; i < 5; ++i)
    reinterpret_cast<uint16_t*>(x.raw())[i] = floatToHalf(xf.data<float>()[i]);
  std::vector<Tensor> out;
  const Status s = ref::runNode(n, {&x}, out);
  ASSERT_TRUE(s.ok()) << s.toString();
  ASSERT_EQ(out[0].dtype(), DataType::kFloat16);
  for (int64_t i = 0; i < 5; ++i) {
    const float v = halfToFloat(reinterpret_cast<const uint16_t*>(x.raw())[i]);
    EXPECT_EQ(reinterpret_cast<const uint16_t*>(out[0].raw())[i],
              floatToHalf(1.f / (1.f + std::exp(-v))));
  }
}

/// The node's shape inference and its reference kernel both reject it; returns the message.
std::string rejection(const graph::Node& n, std::vector<const Tensor*> in) {
  std::vector<Tensor> out;
  const Status s = ref::runNode(n, in, out);
  EXPECT_FALSE(s.ok());
  return s.message();
}

TEST(FusedElementwiseOp, MissingProgram_n) {
  graph::Node n = feNode({}, {}, 1);
  n.attrs.erase("program");
  Tensor x = randomTensor(Shape{3}, 1);
  EXPECT_NE(rejection(n, {&x}).find("program"), std::string::npos);
}

TEST(FusedElementwiseOp, UnknownOpcode_n) {
  Tensor x = randomTensor(Shape{3}, 1);
  EXPECT_NE(rejection(feNode({99, 1, 0, 0, 0}, {}, 1), {&x}).find("opcode"), std::string::npos);
}

TEST(FusedElementwiseOp, ReadBeforeWrite_n) {
  Tensor x = randomTensor(Shape{3}, 1);
  EXPECT_NE(rejection(feNode({32, 2, 0, 1, 0}, {}, 1), {&x}).find("before it is written"),
            std::string::npos);
}

TEST(FusedElementwiseOp, ConstantOutOfRange_n) {
  Tensor x = randomTensor(Shape{3}, 1);
  EXPECT_NE(rejection(feNode({32, 1, 0, -2, 0}, {1.f}, 1), {&x}).find("constant"),
            std::string::npos);
}

TEST(FusedElementwiseOp, UnusedOperandNotZero_n) {
  Tensor x = randomTensor(Shape{3}, 1);
  EXPECT_NE(rejection(feNode({0, 1, 0, 5, 0}, {}, 1), {&x}).find("unused"), std::string::npos);
}

TEST(FusedElementwiseOp, RegisterOutOfRange_n) {
  Tensor x = randomTensor(Shape{3}, 1);
  EXPECT_NE(
      rejection(feNode({0, graph::kFeMaxRegisters, 0, 0, 0}, {}, 1), {&x}).find("destination"),
      std::string::npos);
}

TEST(FusedElementwiseOp, TruncatedProgram_n) {
  Tensor x = randomTensor(Shape{3}, 1);
  EXPECT_NE(rejection(feNode({0, 1, 0, 0}, {}, 1), {&x}).find("multiple"), std::string::npos);
}

TEST(FusedElementwiseOp, TooManyInstructions_n) {
  std::vector<int64_t> code;
  for (int i = 0; i <= graph::kFeMaxInstructions; ++i) code.insert(code.end(), {11, 0, 0, 0, 0});
  Tensor x = randomTensor(Shape{3}, 1);
  EXPECT_NE(rejection(feNode(code, {}, 1), {&x}).find("instructions"), std::string::npos);
}

TEST(FusedElementwiseOp, TooManyInputs_n) {
  std::vector<Tensor> xs(graph::kFeMaxInputs + 1, randomTensor(Shape{3}, 1));
  std::vector<const Tensor*> in;
  for (const Tensor& x : xs) in.push_back(&x);
  EXPECT_NE(rejection(feNode({0, 0, 0, 0, 0}, {}, xs.size()), in).find("inputs"),
            std::string::npos);
}

TEST(FusedElementwiseOp, MixedTypes_n) {
  Tensor a = randomTensor(Shape{3}, 1);
  Tensor b = Tensor::zeros(DataType::kFloat16, Shape{3});
  EXPECT_NE(rejection(feNode({32, 0, 0, 1, 0}, {}, 2), {&a, &b}).find("float"), std::string::npos);
}

TEST(FusedElementwiseOp, IntegerInputs_n) {
  Tensor a = Tensor::zeros(DataType::kInt32, Shape{3});
  EXPECT_NE(rejection(feNode({0, 0, 0, 0, 0}, {}, 1), {&a}).find("float"), std::string::npos);
}

TEST(FusedElementwiseOp, ShapesDoNotBroadcast_n) {
  Tensor a = randomTensor(Shape{2, 3}, 1), b = randomTensor(Shape{4}, 2);
  rejection(feNode({32, 0, 0, 1, 0}, {}, 2), {&a, &b});
}

TEST(FusedElementwiseOp, EncodeDecodeRoundTrip) {
  graph::FeProgram p;
  p.numInputs = 2;
  p.constants = {0.25f, -3.f};
  p.instrs.push_back({FeOp::kHardSigmoid, 2, 0, -1, -2});
  p.instrs.push_back({FeOp::kPow, 0, 2, 1, 0});
  graph::Attributes a;
  graph::encodeFeProgram(p, &a);
  graph::FeProgram q;
  ASSERT_TRUE(graph::decodeFeProgram(a, 2, &q).ok());
  ASSERT_EQ(q.instrs.size(), 2u);
  EXPECT_EQ(q.instrs[0].op, FeOp::kHardSigmoid);
  EXPECT_EQ(q.instrs[0].c, -2);
  EXPECT_EQ(q.output(), 0);
  EXPECT_EQ(q.numRegisters, 3);
  EXPECT_EQ(q.constants, p.constants);
  for (int32_t op = -1; op < 64; ++op)  // names exactly for the opcodes with operands
    EXPECT_EQ(std::string(graph::feOpName(op)).empty(), graph::feOperandCount(op) == 0) << op;
}

// ---- cuda-fe tactics -------------------------------------------------------------------------

#ifdef EDGEINFER_HAVE_CUDA

using cuda::FusedEltwiseProvider;

/// The FusedElementwise node of a fused test graph, its inputs (graph inputs or constants).
struct FusedLayer {
  graph::Graph g;
  graph::Node node;
  std::vector<Tensor> values;
};

::testing::AssertionResult fusedLayer(TestGraph& t, FusedLayer* out) {
  if (!t.infer()) return ::testing::AssertionFailure() << "shape inference failed";
  out->g = t.g;
  auto n = graph::fuseElementwise(out->g);
  if (!n.ok() || *n != 1) return ::testing::AssertionFailure() << "expected one fused node";
  const graph::Node* fe = findOp(out->g, "FusedElementwise");
  if (!fe) return ::testing::AssertionFailure() << "no fused node";
  out->node = *fe;
  for (const std::string& in : fe->inputs) {
    const Tensor* c = out->g.constant(in);
    out->values.push_back(c ? *c : t.feeds.at(in));
  }
  return ::testing::AssertionSuccess();
}

int checkAllCandidates(TestGraph& t, Precision precision) {
  FusedLayer fl;
  EXPECT_TRUE(fusedLayer(t, &fl));
  if (::testing::Test::HasFailure()) return 0;
  std::vector<const Tensor*> in;
  for (const Tensor& v : fl.values) in.push_back(&v);
  builder::LayerContext layer;
  const Status ls = test::makeLayer(fl.node, fl.g, in, &layer);
  EXPECT_TRUE(ls.ok()) << ls.message();
  std::vector<Tensor> expected;
  const Status rs = ref::runNode(fl.node, in, expected);
  EXPECT_TRUE(rs.ok()) << rs.message();
  if (!ls.ok() || !rs.ok()) return 0;
  FusedEltwiseProvider provider;
  auto cands = provider.candidates(layer, precision);
  EXPECT_FALSE(cands.empty()) << provider.lastReason();
  int checked = 0;
  for (auto& tac : cands) {
    const Status is = tac->initialize(layer);
    EXPECT_TRUE(is.ok()) << tac->id() << ": " << is.message();
    if (!is.ok()) continue;
    auto r = test::runTactic(*tac, layer, in);
    EXPECT_TRUE(r.ok()) << tac->id() << ": " << r.status().message();
    if (!r.ok()) continue;
    const double err = test::relL2(r.value()[0], expected[0]);
    const bool half = tac->outputFormat(0).dtype == DataType::kFloat16;
    EXPECT_LE(err, half ? 2e-3 : 1e-5) << tac->id();
    std::printf("  %-24s rel L2 %.2e\n", tac->id().c_str(), err);
    ++checked;
  }
  return checked;
}

TEST(CudaFusedEltwise, Silu4DEveryLayout) {
  EI_SKIP_WITHOUT_GPU();
  TestGraph t = silu();
  EXPECT_EQ(checkAllCandidates(t, Precision::kFp16), 4);
}

TEST(CudaFusedEltwise, HardSwishPattern) {
  EI_SKIP_WITHOUT_GPU();
  TestGraph t = hardSwishPattern();
  EXPECT_EQ(checkAllCandidates(t, Precision::kFp16), 4);
}

TEST(CudaFusedEltwise, GeluLinear) {
  EI_SKIP_WITHOUT_GPU();
  TestGraph t = gelu();
  EXPECT_EQ(checkAllCandidates(t, Precision::kFp16), 2);
}

TEST(CudaFusedEltwise, BroadcastConstantsNhwc) {
  EI_SKIP_WITHOUT_GPU();
  TestGraph t = broadcastScaleShift();
  EXPECT_EQ(checkAllCandidates(t, Precision::kFp16), 4);
}

TEST(CudaFusedEltwise, BroadcastGrowsShape) {
  EI_SKIP_WITHOUT_GPU();
  TestGraph t = broadcastGrowsShape();
  EXPECT_EQ(checkAllCandidates(t, Precision::kFp32), 1);
}

TEST(CudaFusedEltwise, SharedIntermediate) {
  EI_SKIP_WITHOUT_GPU();
  TestGraph t = dagWithSharedIntermediate();
  EXPECT_EQ(checkAllCandidates(t, Precision::kFp16), 2);
}

TEST(CudaFusedEltwise, EnqueueBeforeInitialize_n) {
  EI_SKIP_WITHOUT_GPU();
  TestGraph t = silu();
  FusedLayer fl;
  ASSERT_TRUE(fusedLayer(t, &fl));
  std::vector<const Tensor*> in{&fl.values[0]};
  builder::LayerContext layer;
  ASSERT_TRUE(test::makeLayer(fl.node, fl.g, in, &layer).ok());
  FusedEltwiseProvider p;
  auto cands = p.candidates(layer, Precision::kFp32);
  ASSERT_FALSE(cands.empty());
  builder::LaunchArgs args;
  args.inputs = {nullptr};
  args.outputs = {nullptr};
  EXPECT_FALSE(cands[0]->enqueue(args).ok());
  ASSERT_TRUE(cands[0]->initialize(layer).ok());
  EXPECT_FALSE(cands[0]->enqueue(args).ok());  // initialised, but null pointers
}

// Which layers get candidates (no GPU needed).

TEST(CudaFusedEltwise, CandidateIds) {
  TestGraph t = silu();
  FusedLayer fl;
  ASSERT_TRUE(fusedLayer(t, &fl));
  builder::LayerContext layer;
  ASSERT_TRUE(test::makeLayer(fl.node, fl.g, {&fl.values[0]}, &layer).ok());
  FusedEltwiseProvider p;
  std::vector<std::string> ids;
  for (const auto& c : p.candidates(layer, Precision::kFp16)) {
    ids.push_back(c->id());
    EXPECT_FALSE(c->consumesInput(0));
  }
  EXPECT_EQ(ids, (std::vector<std::string>{"cuda-fe.fp16.nchw", "cuda-fe.fp16.nhwc",
                                           "cuda-fe.fp32.nchw", "cuda-fe.fp32.nhwc"}));
  EXPECT_EQ(p.candidates(layer, Precision::kFp32).size(), 2u);
  EXPECT_TRUE(p.candidates(layer, Precision::kInt8).empty());
  EXPECT_NE(p.lastReason().find("int8"), std::string::npos);
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

std::string providerReason(const builder::LayerContext& layer) {
  FusedEltwiseProvider p;
  EXPECT_TRUE(p.candidates(layer, Precision::kFp16).empty());
  return p.lastReason();
}

TEST(CudaFusedEltwise, NotAFusedElementwise_n) {
  graph::Graph g;
  graph::Node n = feNode({0, 0, 0, 0, 0}, {}, 1);
  n.domain = "";
  EXPECT_NE(providerReason(
                manualLayer(n, g, {Shape{3}}, {DataType::kFloat32}, Shape{3}, DataType::kFloat32))
                .find("not a FusedElementwise"),
            std::string::npos);
}

TEST(CudaFusedEltwise, BadProgram_n) {
  graph::Graph g;
  const graph::Node n = feNode({32, 1, 0, 3, 0}, {}, 1);
  EXPECT_NE(providerReason(
                manualLayer(n, g, {Shape{3}}, {DataType::kFloat32}, Shape{3}, DataType::kFloat32))
                .find("before it is written"),
            std::string::npos);
}

TEST(CudaFusedEltwise, DynamicShape_n) {
  graph::Graph g;
  const graph::Node n = feNode({0, 0, 0, 0, 0}, {}, 1);
  EXPECT_NE(providerReason(manualLayer(n, g, {Shape{-1, 3}}, {DataType::kFloat32}, Shape{-1, 3},
                                       DataType::kFloat32))
                .find("static"),
            std::string::npos);
}

TEST(CudaFusedEltwise, IntegerTypes_n) {
  graph::Graph g;
  const graph::Node n = feNode({0, 0, 0, 0, 0}, {}, 1);
  EXPECT_NE(
      providerReason(manualLayer(n, g, {Shape{3}}, {DataType::kInt32}, Shape{3}, DataType::kInt32))
          .find("float"),
      std::string::npos);
}

TEST(CudaFusedEltwise, NotBroadcastable_n) {
  graph::Graph g;
  const graph::Node n = feNode({32, 0, 0, 1, 0}, {}, 2);
  EXPECT_NE(providerReason(manualLayer(n, g, {Shape{2, 3}, Shape{4}},
                                       {DataType::kFloat32, DataType::kFloat32}, Shape{2, 3},
                                       DataType::kFloat32))
                .find("broadcast"),
            std::string::npos);
}

TEST(CudaFusedEltwise, RankAbove8_n) {
  graph::Graph g;
  const graph::Node n = feNode({0, 0, 0, 0, 0}, {}, 1);
  const Shape s{1, 2, 1, 2, 1, 2, 1, 2, 3};
  EXPECT_NE(providerReason(manualLayer(n, g, {s}, {DataType::kFloat32}, s, DataType::kFloat32))
                .find("rank"),
            std::string::npos);
}

// ---- Performance (printing only): one fused kernel vs one plain elementwise op -------------

/// Times every cuda-fe candidate of the fused graph `t` (one graph input), then the `cuda`
/// provider's Relu on the same input: one read and one write, the floor for any chain.
void timeFused(TestGraph& t, const char* what) {
  FusedLayer fl;
  ASSERT_TRUE(fusedLayer(t, &fl));
  ASSERT_EQ(fl.values.size(), 1u);
  builder::LayerContext layer;
  ASSERT_TRUE(test::makeLayer(fl.node, fl.g, {&fl.values[0]}, &layer).ok());
  FusedEltwiseProvider fe;
  auto cands = fe.candidates(layer, Precision::kFp16);
  graph::Node relu;
  relu.name = "relu";
  relu.opType = "Relu";
  relu.inputs = {fl.node.inputs[0]};
  relu.outputs = {"r"};
  builder::LayerContext reluLayer;
  ASSERT_TRUE(test::makeLayer(relu, fl.g, {&fl.values[0]}, &reluLayer).ok());
  cuda::CudaKernelProvider plain;
  auto reluCands = plain.candidates(reluLayer, Precision::kFp16);
  std::printf("%s on %s (%zu instructions):\n", what, fl.values[0].shape().toString().c_str(),
              fl.node.attrs.getInts("program").size() / graph::kFeInstrInts);
  test::printTacticTimings(cands, layer, fl.values[0]);
  std::printf(" plain Relu, for comparison:\n");
  test::printTacticTimings(reluCands, reluLayer, fl.values[0]);
}

TEST(CudaFusedEltwise, PerfTable) {
  EI_SKIP_WITHOUT_GPU();
  TestGraph s;
  s.input("x", Shape{8, 256, 56, 56});
  s.node("Sigmoid", {"x"}, {"s"});
  s.node("Mul", {"x", "s"}, {"y"});
  s.output("y");
  timeFused(s, "SiLU");
  TestGraph g = gelu();
  g.g.value("x").shape = Shape{8, 197, 3072};
  g.feeds["x"] = randomTensor(Shape{8, 197, 3072}, 5);
  timeFused(g, "GELU");
}

#endif  // EDGEINFER_HAVE_CUDA

}  // namespace
}  // namespace edgeinfer
