// graph::networkStages (graph/partition.h): the stages a timed INT8 GPU build tries in FP16 one
// at a time (builder.cpp). Device-free: a function of the graph alone.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "graph/partition.h"

namespace edgeinfer {
namespace {

using graph::Graph;
using graph::networkStages;

/// Graphs written node by node: every value gets a shape (4-D, [1, c, hw, hw]).
class GraphWriter {
 public:
  GraphWriter& input(const std::string& name, int64_t c, int64_t hw) {
    g.inputs.push_back(name);
    shape(name, c, hw);
    return *this;
  }
  GraphWriter& node(const std::string& op, std::vector<std::string> ins, const std::string& out,
                    int64_t c, int64_t hw) {
    graph::Node n;
    n.name = out + "/" + op;
    n.opType = op;
    n.inputs = std::move(ins);
    n.outputs = {out};
    g.nodes.push_back(std::move(n));
    shape(out, c, hw);
    return *this;
  }
  /// A constant (a weight): alive for the whole graph, yet no cut may count it.
  GraphWriter& weight(const std::string& name) {
    g.value(name).constant = Tensor::zeros(DataType::kFloat32, Shape({4}));
    g.value(name).shape = Shape({4});
    g.value(name).shapeKnown = true;
    return *this;
  }
  /// A bottleneck-like residual block: two convolutions on the main path, the sum with `in`
  /// (or with a 1x1 convolution of it where `project`), the output `out`.
  GraphWriter& block(const std::string& in, const std::string& out, int64_t c, int64_t hw,
                     bool project) {
    node("Conv", {in, "w"}, out + ".a", c / 2, hw);
    node("Conv", {out + ".a", "w"}, out + ".b", c, hw);
    std::string skip = in;
    if (project) {
      node("Conv", {in, "w"}, out + ".proj", c, hw);
      skip = out + ".proj";
    }
    return node("Add", {out + ".b", skip}, out, c, hw);
  }
  Graph g;

 private:
  void shape(const std::string& name, int64_t c, int64_t hw) {
    g.value(name).shape = Shape({1, c, hw, hw});
    g.value(name).shapeKnown = true;
  }
};

/// The first node of each stage, by the name of its output.
std::vector<std::string> stageStarts(const Graph& g) {
  std::vector<std::string> starts;
  for (const auto& st : networkStages(g)) starts.push_back(g.nodes[st.front()].outputs[0]);
  return starts;
}

/// Every node in exactly one stage, the stages in order and each a run of consecutive nodes.
void expectCoversInOrder(const Graph& g) {
  size_t next = 0;
  for (const auto& st : networkStages(g)) {
    ASSERT_FALSE(st.empty());
    for (size_t i : st) EXPECT_EQ(i, next++);
  }
  EXPECT_EQ(next, g.nodes.size());
}

/// A small ResNet: stem, pool, two blocks at 16 channels (the first projecting), two at 32
/// (the first projecting, at half the size), global pool, classifier.
GraphWriter resnetLike() {
  GraphWriter w;
  w.input("x", 3, 32).weight("w");
  w.node("Conv", {"x", "w"}, "stem", 8, 16).node("MaxPool", {"stem"}, "pool", 8, 8);
  w.block("pool", "l1.0", 16, 8, true).block("l1.0", "l1.1", 16, 8, false);
  w.block("l1.1", "l2.0", 32, 4, true).block("l2.0", "l2.1", 32, 4, false);
  w.node("GlobalAveragePool", {"l2.1"}, "gap", 32, 1).node("Gemm", {"gap", "w"}, "fc", 10, 1);
  w.g.outputs = {"fc"};
  return w;
}

TEST(NetworkStages, AResNetSplitsIntoStemPoolLayersAndHead) {
  const GraphWriter w = resnetLike();
  expectCoversInOrder(w.g);
  // Blocks of one output shape are one stage; the stem, its pool, the global pool and the
  // classifier each write a shape of their own.
  EXPECT_EQ(stageStarts(w.g),
            (std::vector<std::string>{"stem", "pool", "l1.0.a", "l2.0.a", "gap", "fc"}));
  EXPECT_EQ(networkStages(w.g)[2].size(), 7u);  // l1.0 (with its projection) and l1.1
}

TEST(NetworkStages, NoCutInsideABlock_n) {
  // Inside a block the skip tensor is alive beside the main path: two values, no cut. A block
  // whose shape differs from the one before starts a stage even where it follows one of its
  // kind (l2.0 after l1.1).
  const GraphWriter w = resnetLike();
  for (const auto& st : networkStages(w.g))
    for (size_t i : st) {
      const std::string& out = w.g.nodes[i].outputs[0];
      if (out == "l1.0.b" || out == "l1.0.proj") {
        EXPECT_EQ(st.front(), 2u) << out;
      }
    }
}

TEST(NetworkStages, ConcurrentBranchesToTheEndAreOneStage_n) {
  GraphWriter w;
  w.input("x", 8, 8).weight("w");
  w.node("Conv", {"x", "w"}, "a", 8, 8).node("Conv", {"x", "w"}, "b", 8, 8);
  w.node("Relu", {"a"}, "a2", 8, 8).node("Relu", {"b"}, "b2", 8, 8);
  w.g.outputs = {"a2", "b2"};
  ASSERT_EQ(networkStages(w.g).size(), 1u);
  expectCoversInOrder(w.g);
}

TEST(NetworkStages, AGraphOutputInTheMiddleStaysAliveToTheEnd_n) {
  GraphWriter w;
  w.input("x", 8, 8).weight("w");
  w.node("Conv", {"x", "w"}, "a", 8, 8).node("Conv", {"a", "w"}, "b", 4, 8);
  w.node("Conv", {"b", "w"}, "c", 2, 8);
  w.g.outputs = {"a", "c"};  // `a` is read by the user too: alive beside b, so no cut after b
  EXPECT_EQ(stageStarts(w.g), (std::vector<std::string>{"a", "b"}));
}

TEST(NetworkStages, EmptyAndOneNodeGraphs_n) {
  EXPECT_TRUE(networkStages(Graph()).empty());
  GraphWriter w;
  w.input("x", 8, 8).node("Relu", {"x"}, "y", 8, 8);
  w.g.outputs = {"y"};
  ASSERT_EQ(networkStages(w.g).size(), 1u);
  EXPECT_EQ(networkStages(w.g)[0], std::vector<size_t>{0});
}

TEST(NetworkStages, AnUnknownShapeEndsAStageOfItsOwn) {
  // A value without a shape compares equal to no other (not even another unknown one).
  GraphWriter w;
  w.input("x", 8, 8).node("Relu", {"x"}, "a", 8, 8).node("Relu", {"a"}, "b", 8, 8);
  w.node("Relu", {"b"}, "c", 8, 8).node("Relu", {"c"}, "d", 8, 8);
  w.g.value("b").shapeKnown = false;
  w.g.value("c").shapeKnown = false;
  w.g.outputs = {"d"};
  EXPECT_EQ(stageStarts(w.g), (std::vector<std::string>{"a", "b", "c", "d"}));
}

TEST(NetworkStages, TheLastBlocksJoinTheirStage) {
  GraphWriter w;
  w.input("x", 16, 8).weight("w");
  w.node("Conv", {"x", "w"}, "stem", 16, 8);
  w.block("stem", "b0", 32, 8, true).block("b0", "b1", 32, 8, false);
  w.block("b1", "b2", 32, 8, false);
  w.g.outputs = {"b2"};
  EXPECT_EQ(stageStarts(w.g), (std::vector<std::string>{"stem", "b0.a"}));
  expectCoversInOrder(w.g);
}

TEST(NetworkStages, RandomGraphsAreCoveredInOrder) {
  std::mt19937 rng(7);
  for (int round = 0; round < 50; ++round) {
    GraphWriter w;
    w.input("x", 4, 4).weight("w");
    std::vector<std::string> values = {"x"};
    const int n = 1 + static_cast<int>(rng() % 30);
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> ins = {values[rng() % values.size()]};
      if (rng() % 2) ins.push_back(values[rng() % values.size()]);
      if (rng() % 3 == 0) ins.push_back("w");
      const std::string out = "v" + std::to_string(i);
      w.node("Add", ins, out, 4, static_cast<int64_t>(1 + rng() % 2));
      values.push_back(out);
    }
    w.g.outputs = {values.back()};
    expectCoversInOrder(w.g);
    // Counted the slow way: one computed value alive after every stage but the last.
    const auto stages = networkStages(w.g);
    for (size_t s = 0; s + 1 < stages.size(); ++s) {
      const size_t cut = stages[s].back();
      int alive = 0;
      for (const std::string& v : values) {
        bool writtenBefore = v == "x", readAfter = w.g.isGraphOutput(v);  // x: a graph input
        for (size_t k = 0; k < w.g.nodes.size(); ++k) {
          const auto& node = w.g.nodes[k];
          if (node.outputs[0] == v) writtenBefore = k <= cut;
          for (const auto& in : node.inputs) readAfter = readAfter || (in == v && k > cut);
        }
        alive += writtenBefore && readAfter;
      }
      EXPECT_EQ(alive, 1) << "round " << round << ", after node " << cut;
    }
  }
}

}  // namespace
}  // namespace edgeinfer
