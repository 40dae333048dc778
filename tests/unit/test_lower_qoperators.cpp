// The lower-qoperators pass (graph/passes/lower_qoperators.cpp): QLinearConv and QLinearMatMul
// with constant scales become DequantizeLinear -> Conv / MatMul -> QuantizeLinear, and the
// lowered graph, evaluated node by node on the CPU reference, stays within one quantization
// step of the integer QOperator layer. Negative cases (_n): layers it must leave alone. Also
// the dynamically quantized model (DynamicQuantizeLinear -> ConvInteger / MatMulInteger), whose
// CPU engine must track the float network it quantizes.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "graph/passes/passes.h"
#include "kernels/ref/ref_kernels.h"
#include "onnx/importer.h"
#include "qoperator_models.h"

namespace edgeinfer {
namespace {

graph::Graph imported(const test::TestModel& m) {
  const std::string bytes = m.bytes();
  auto g = onnx_import::importFromBuffer(bytes.data(), bytes.size(), {});
  EXPECT_TRUE(g.ok()) << g.status().toString();
  if (!g.ok()) return {};
  EXPECT_TRUE(graph::inferShapes(*g).ok());
  return std::move(*g);
}

/// Runs the graph node by node on the CPU reference; returns its first output.
Tensor evaluate(const graph::Graph& g, const std::map<std::string, Tensor>& inputs) {
  std::map<std::string, Tensor> values = inputs;
  for (const auto& n : g.nodes) {
    std::vector<const Tensor*> in;
    for (const auto& name : n.inputs) {
      if (name.empty()) {
        in.push_back(nullptr);
      } else if (const Tensor* c = g.constant(name)) {
        in.push_back(c);
      } else {
        in.push_back(&values.at(name));
      }
    }
    std::vector<Tensor> out;
    const Status s = ref::runNode(n, in, out);
    EXPECT_TRUE(s.ok()) << n.name << ": " << s.toString();
    if (!s.ok()) return {};
    for (size_t k = 0; k < out.size() && k < n.outputs.size(); ++k)
      values[n.outputs[k]] = std::move(out[k]);
  }
  return values.at(g.outputs.at(0));
}

Tensor randomInput(const Shape& s, uint32_t seed) {
  Tensor t = Tensor::zeros(DataType::kFloat32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

/// Lowers the model's graph, checks the ops that replace `op`, and compares outputs.
void lowerAndCompare(const test::TestModel& m, const std::string& op, const std::string& floatOp,
                     const Shape& xShape, float yScale) {
  graph::Graph original = imported(m);
  graph::Graph lowered = imported(m);
  auto n = graph::lowerQOperators(lowered);
  ASSERT_TRUE(n.ok()) << n.status().toString();
  EXPECT_EQ(*n, 1);
  ASSERT_TRUE(graph::inferShapes(lowered).ok());
  int floats = 0;
  for (const auto& node : lowered.nodes) {
    EXPECT_NE(node.opType, op) << "not lowered";
    if (node.opType == floatOp) {
      ++floats;
      EXPECT_EQ(node.name, original.nodes[1].name) << "the float layer keeps the layer's name";
    }
  }
  EXPECT_EQ(floats, 1);
  for (uint32_t seed = 1; seed <= 3; ++seed) {
    const Tensor x = randomInput(xShape, seed);
    const Tensor want = evaluate(original, {{"x", x}});
    const Tensor got = evaluate(lowered, {{"x", x}});
    ASSERT_EQ(got.shape(), want.shape());
    int64_t off = 0;
    for (int64_t i = 0; i < want.numel(); ++i) {
      const double d = std::fabs(got.getAsDouble(i) - want.getAsDouble(i));
      EXPECT_LE(d, yScale * 1.001) << "element " << i << ": more than one step";
      off += d > 0 ? 1 : 0;
    }
    EXPECT_LE(off, want.numel() / 20) << "more than 5 % of the elements off by a step";
  }
}

TEST(DynamicQuantization, CpuEngineTracksTheFloatModel) {
  // The quantized network (activations quantized per tensor at run time, int8 weights) on the
  // CPU engine against its float network: within the quantization error of 8 bits.
  const auto run = [](const test::TestModel& m, const Tensor& x) {
    BuilderConfig c;
    c.backend = Backend::kCpu;
    const std::string bytes = m.bytes();
    auto e = Builder::buildFromBuffer(bytes.data(), bytes.size(), c);
    EXPECT_TRUE(e.ok()) << e.status().toString();
    if (!e.ok()) return Tensor();
    auto ctx = (*e)->createExecutionContext();
    EXPECT_TRUE(ctx.ok());
    auto out = (*ctx)->run({{"x", x}});
    EXPECT_TRUE(out.ok()) << out.status().toString();
    return out.ok() ? out->at("y") : Tensor();
  };
  const Tensor x = randomInput(Shape{4, 3, 6, 6}, 73);
  const Tensor q = run(test::dynamicQuantizedModel(), x);
  const Tensor f = run(test::dynamicQuantizedModel(/*asFloat=*/true), x);
  ASSERT_FALSE(q.empty());
  ASSERT_FALSE(f.empty());
  ASSERT_EQ(q.shape(), (Shape{4, 10}));
  double num = 0, den = 0;
  for (int64_t i = 0; i < q.numel(); ++i) {
    const double d = q.data<float>()[i] - f.data<float>()[i];
    num += d * d;
    den += double(f.data<float>()[i]) * f.data<float>()[i];
  }
  const double rel = std::sqrt(num / den);
  EXPECT_LT(rel, 0.02) << "relative L2 error of the quantized model";
  EXPECT_GT(rel, 0.0) << "the quantized model must differ from the float one somewhere";
}

TEST(LowerQOperators, QLinearConvWithinOneStep) {
  lowerAndCompare(test::qlinearConvModel(), "QLinearConv", "Conv", Shape{1, 3, 9, 8}, 0.05f);
}

TEST(LowerQOperators, QLinearMatMulPerColumnWithinOneStep) {
  lowerAndCompare(test::qlinearMatMulModel(), "QLinearMatMul", "MatMul", Shape{2, 6, 7}, 0.04f);
}

TEST(LowerQOperators, RuntimeScale_n) {
  graph::Graph g = imported(test::qlinearConvModel(/*runtimeScale=*/true));
  auto n = graph::lowerQOperators(g);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
  bool kept = false;
  for (const auto& node : g.nodes) kept = kept || node.opType == "QLinearConv";
  EXPECT_TRUE(kept);
}

TEST(LowerQOperators, ModelWithoutQOperators_n) {
  test::TestModel m(13);
  m.input("x", {2, 3});
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.output("y");
  graph::Graph g = imported(m);
  auto n = graph::lowerQOperators(g);
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0);
  EXPECT_EQ(g.nodes.size(), 1u);
}

}  // namespace
}  // namespace edgeinfer
