// Activation memory planning: no two live tensors overlap, memory is reused, and a context
// running from its arena computes exactly what per-tensor allocation computes.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "edgeinfer/builder.h"
#include "runtime/memory_planner.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using runtime::BufferRequest;
using runtime::planMemory;

void expectNoLiveOverlap(const std::vector<BufferRequest>& reqs, const runtime::MemoryPlan& p) {
  for (size_t a = 0; a < reqs.size(); ++a)
    for (size_t b = a + 1; b < reqs.size(); ++b) {
      const auto &ra = reqs[a], &rb = reqs[b];
      if (ra.lastUse < rb.firstUse || rb.lastUse < ra.firstUse) continue;
      const int64_t a0 = p.offsets.at(ra.name), b0 = p.offsets.at(rb.name);
      EXPECT_TRUE(a0 + ra.bytes <= b0 || b0 + rb.bytes <= a0) << ra.name << " overlaps " << rb.name;
    }
}

TEST(MemoryPlanner, ChainReusesMemory) {
  // a -> b -> c -> d: only two are live at once.
  std::vector<BufferRequest> r = {
      {"a", 1000, 0, 1}, {"b", 1000, 1, 2}, {"c", 1000, 2, 3}, {"d", 1000, 3, 4}};
  auto p = planMemory(r, 256);
  ASSERT_TRUE(p.ok());
  expectNoLiveOverlap(r, *p);
  EXPECT_EQ(p->arenaBytes, 2048);
  EXPECT_EQ(p->naiveBytes, 4096);
}

TEST(MemoryPlanner, RandomLifetimesNeverOverlap) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<BufferRequest> r;
    for (int i = 0; i < 40; ++i) {
      const int64_t first = rng() % 30;
      r.push_back({"t" + std::to_string(i), 1 + static_cast<int64_t>(rng() % 5000), first,
                   first + static_cast<int64_t>(rng() % 8)});
    }
    auto p = planMemory(r, 64);
    ASSERT_TRUE(p.ok());
    expectNoLiveOverlap(r, *p);
    EXPECT_LE(p->arenaBytes, p->naiveBytes);
    for (const auto& [name, off] : p->offsets) EXPECT_EQ(off % 64, 0) << name;
  }
}

TEST(MemoryPlanner, BadAlignment_n) {
  EXPECT_FALSE(planMemory({{"a", 10, 0, 1}}, 48).ok());
  EXPECT_FALSE(planMemory({{"a", 10, 0, 1}}, 0).ok());
}

TEST(MemoryPlanner, BadRequest_n) {
  EXPECT_FALSE(planMemory({{"a", -1, 0, 1}}, 64).ok());
  EXPECT_FALSE(planMemory({{"a", 10, 5, 1}}, 64).ok());
}

TEST(MemoryPlanner, ContextFromArenaMatchesFirstRun) {
  // A small conv net: run 1 allocates per tensor and plans, runs 2-3 use the arena; the
  // outputs must be bit-identical and the arena smaller than the sum of activations.
  test::TestModel m(13);
  m.input("x", {-1, 3, 16, 16});
  m.randomInitializer("w1", {8, 3, 3, 3}, 1);
  m.randomInitializer("w2", {8, 8, 3, 3}, 2);
  m.randomInitializer("w3", {8, 8, 3, 3}, 3);
  auto& c1 = m.node("Conv", {"x", "w1"}, {"c1"});
  test::TestModel::attrInts(c1, "pads", {1, 1, 1, 1});
  m.node("Sigmoid", {"c1"}, {"s1"});
  auto& c2 = m.node("Conv", {"s1", "w2"}, {"c2"});
  test::TestModel::attrInts(c2, "pads", {1, 1, 1, 1});
  m.node("Tanh", {"c2"}, {"s2"});
  auto& c3 = m.node("Conv", {"s2", "w3"}, {"c3"});
  test::TestModel::attrInts(c3, "pads", {1, 1, 1, 1});
  m.node("Add", {"c3", "s1"}, {"y"});
  m.output("y");
  const std::string bytes = m.bytes();
  BuilderConfig cfg;
  cfg.backend = Backend::kCpu;
  cfg.passes.fuseConvActivation = false;  // keep several activations alive
  auto e = Builder::buildFromBuffer(bytes.data(), bytes.size(), cfg);
  ASSERT_TRUE(e.ok()) << e.status().toString();
  auto ctx = (*e)->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  for (int64_t batch : {2, 1, 2}) {
    Tensor x = Tensor::zeros(DataType::kFloat32, Shape{batch, 3, 16, 16});
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = static_cast<float>(i % 17) / 17.f;
    auto first = (*ctx)->run({{"x", x}});
    ASSERT_TRUE(first.ok()) << first.status().toString();
    const Tensor y1 = first->at("y").clone();
    for (int rep = 0; rep < 2; ++rep) {
      auto again = (*ctx)->run({{"x", x}});
      ASSERT_TRUE(again.ok()) << again.status().toString();
      ASSERT_EQ(again->at("y").shape(), y1.shape());
      EXPECT_EQ(0, std::memcmp(again->at("y").raw(), y1.raw(), y1.bytes())) << "batch " << batch;
    }
  }
  const ContextStats st = (*ctx)->stats();
  EXPECT_GT(st.activationArenaBytes, 0);
  EXPECT_LT(st.activationArenaBytes, st.activationNaiveBytes);
}

}  // namespace
}  // namespace edgeinfer
