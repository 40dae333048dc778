// Models with data-dependent outputs (NonZero, NonMaxSuppression) in engines that need static
// shapes: the split of the optimised graph into a static head and the tail after the
// data-dependent layers (graph/partition.h), the engine that runs the two
// (runtime/split_engine.h) and its file (builder/split_format.h), on the CPU: here both parts
// are CPU engines; a GPU build makes the head a GPU engine (test_cuda_engine.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "builder/engine_format.h"
#include "builder/optimize.h"
#include "builder/split_format.h"
#include "data_dependent_models.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "graph/partition.h"
#include "runtime/graph_engine.h"
#include "runtime/split_engine.h"
#include "test_container.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using test::bytesOf;
using test::loadError;
using test::nonZeroModel;
using test::TestModel;

#define EXPECT_HAS(text, part)                               \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "'" << (text) << "' lacks " << (part)

graph::Graph optimized(const TestModel& m) {
  BuilderConfig c;
  c.backend = Backend::kCpu;
  auto g = builder::importAndOptimize(m.bytes(), c, ".");
  EXPECT_TRUE(g.ok()) << g.status().toString();
  return g.ok() ? std::move(*g) : graph::Graph();
}

std::vector<std::string> opsOf(const graph::Graph& g) {
  std::vector<std::string> ops;
  for (const auto& n : g.nodes) ops.push_back(n.opType);
  return ops;
}

Tensor input(int salt = 0) {
  Tensor t = Tensor::zeros(DataType::kFloat32, Shape{2, 6});
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = static_cast<float>((i * 7 + salt * 5) % 11) / 11.f - 0.45f;
  return t;
}

EngineInfo cpuInfo(const std::string& hash = "0123456789abcdef") {
  EngineInfo info;
  info.sdkVersion = sdkVersion();
  info.backend = Backend::kCpu;
  info.deviceKey = builder::currentDeviceKey(Backend::kCpu);
  info.modelName = "split-test";
  info.modelHash = hash;
  return info;
}

/// The split engine of `m` with both parts on the CPU.
std::unique_ptr<Engine> splitOnCpu(const TestModel& m,
                                   const std::string& hash = "0123456789abcdef") {
  const graph::Graph g = optimized(m);
  auto parts = graph::splitStaticHead(g);
  EXPECT_TRUE(parts.ok()) << parts.status().toString();
  if (!parts.ok()) return nullptr;
  auto e = runtime::SplitEngine::create(
      std::make_unique<runtime::GraphEngine>(std::move(parts->head), cpuInfo(hash)),
      std::make_unique<runtime::GraphEngine>(std::move(parts->tail), cpuInfo(hash)), g.outputs,
      ErrorCode::kInternal);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  return e.ok() ? std::unique_ptr<Engine>(std::move(e).value()) : nullptr;
}

std::map<std::string, Tensor> runAll(const Engine& e, const Tensor& x) {
  auto ctx = e.createExecutionContext();
  EXPECT_TRUE(ctx.ok()) << ctx.status().toString();
  if (!ctx.ok()) return {};
  auto out = (*ctx)->run({{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().toString();
  return out.ok() ? *out : std::map<std::string, Tensor>();
}

void expectSame(const Tensor& a, const Tensor& b) {
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  ASSERT_EQ(a.dtype(), b.dtype());
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.bytes()));
}

/// Every output of the model's CPU engine.
std::map<std::string, Tensor> wholeOnCpu(const TestModel& m, const Tensor& x) {
  BuilderConfig c;
  c.backend = Backend::kCpu;
  const std::string bytes = m.bytes();
  auto e = Builder::buildFromBuffer(bytes.data(), bytes.size(), c);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  return e.ok() ? runAll(**e, x) : std::map<std::string, Tensor>();
}

// ---- the partition ---------------------------------------------------------------------------

TEST(StaticHeadAndTail, SplitsAfterTheDataDependentLayer) {
  const graph::Graph g = optimized(nonZeroModel());
  const auto dd = graph::dataDependentNodes(g);
  ASSERT_EQ(dd.size(), 1u);
  EXPECT_EQ(g.nodes[dd[0]].opType, "NonZero");
  auto parts = graph::splitStaticHead(g);
  ASSERT_TRUE(parts.ok()) << parts.status().toString();
  EXPECT_EQ(opsOf(parts->head), (std::vector<std::string>{"Relu", "Abs"}));
  EXPECT_EQ(opsOf(parts->tail), (std::vector<std::string>{"NonZero", "Transpose", "GatherND"}));
  EXPECT_EQ(parts->head.inputs, (std::vector<std::string>{"x"}));
  EXPECT_EQ(parts->head.outputs, (std::vector<std::string>{"y", "r"}));  // its own, then the tail's
  EXPECT_EQ(parts->tail.inputs, (std::vector<std::string>{"r", "x"}));
  EXPECT_EQ(parts->tail.outputs, (std::vector<std::string>{"picked", "idx"}));
  for (const auto& name : parts->head.outputs)
    EXPECT_TRUE(parts->head.findValue(name)->shape.isStatic()) << name;
}

TEST(StaticHeadAndTail, AModelWithoutDataDependentLayersStaysWhole) {
  TestModel m(13);
  m.input("x", {2, 6});
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.output("y");
  const graph::Graph g = optimized(m);
  EXPECT_TRUE(graph::dataDependentNodes(g).empty());
  auto parts = graph::splitStaticHead(g);
  ASSERT_TRUE(parts.ok());
  EXPECT_TRUE(parts->tail.nodes.empty());
  EXPECT_EQ(opsOf(parts->head), opsOf(g));
}

TEST(StaticHeadAndTail, ATailThatComputesNoOutputIsDropped) {
  graph::Graph g = optimized(nonZeroModel());
  g.outputs = {"y"};  // picked and idx no longer wanted
  auto parts = graph::splitStaticHead(g);
  ASSERT_TRUE(parts.ok());
  EXPECT_TRUE(parts->tail.nodes.empty());
  EXPECT_EQ(opsOf(parts->head), (std::vector<std::string>{"Relu", "Abs"}));
  EXPECT_EQ(parts->head.outputs, (std::vector<std::string>{"y"}));
}

TEST(StaticHeadAndTail, NothingBeforeTheDataDependentLayer_n) {
  TestModel m(13);
  m.input("x", {2, 3});
  m.node("NonZero", {"x"}, {"y"}, "nonzero");
  m.output("y", onnx::TensorProto::INT64);
  auto parts = graph::splitStaticHead(optimized(m));
  ASSERT_FALSE(parts.ok());
  EXPECT_EQ(parts.status().code(), ErrorCode::kUnsupported);
  EXPECT_HAS(parts.status().message(), "'nonzero' (NonZero)");
  EXPECT_HAS(parts.status().message(), "build this model for the CPU backend");
}

// ---- the engine ------------------------------------------------------------------------------

TEST(SplitEngine, RunsAsTheWholeModelDoes) {
  auto e = splitOnCpu(nonZeroModel());
  ASSERT_TRUE(e);
  ASSERT_EQ(e->outputs().size(), 3u);
  EXPECT_EQ(e->outputs()[0].name, "picked");
  EXPECT_EQ(e->outputs()[1].name, "y");
  EXPECT_EQ(e->outputs()[2].name, "idx");
  EXPECT_EQ(e->outputs()[1].shape, (Shape{2, 6}));
  EXPECT_FALSE(e->outputs()[0].shape.isStatic()) << "the tail sizes it at run time";
  for (int salt : {0, 3, 8}) {
    const Tensor x = input(salt);
    const auto want = wholeOnCpu(nonZeroModel(), x);
    const auto got = runAll(*e, x);
    for (const char* name : {"picked", "y", "idx"}) {
      SCOPED_TRACE(name);
      expectSame(got.at(name), want.at(name));
    }
  }
  auto ctx = e->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  ASSERT_TRUE((*ctx)->run({{"x", input()}}).ok());
  EXPECT_EQ((*ctx)->stats().cpuFallbackLayers, 3);
  EXPECT_EQ(e->info().nodeCount, 5);
}

TEST(SplitEngine, SavedAndLoadedRunsTheSameAndWritesTheSameBytes) {
  auto e = splitOnCpu(nonZeroModel());
  ASSERT_TRUE(e);
  const auto bytes = bytesOf(*e);
  ASSERT_GE(bytes.size(), 8u);
  EXPECT_EQ(0, std::memcmp(bytes.data(), "EISPLITS", 8));
  auto loaded = Engine::deserialize(bytes.data(), bytes.size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  ASSERT_NE(dynamic_cast<const runtime::SplitEngine*>(loaded->get()), nullptr);
  const Tensor x = input(5);
  const auto a = runAll(*e, x), b = runAll(**loaded, x);
  for (const char* name : {"picked", "y", "idx"}) expectSame(a.at(name), b.at(name));
  EXPECT_EQ(bytesOf(**loaded), bytes);
}

TEST(SplitEngine, AnOutputNeitherPartComputes_n) {
  const graph::Graph g = optimized(nonZeroModel());
  auto parts = graph::splitStaticHead(g);
  ASSERT_TRUE(parts.ok());
  auto e = runtime::SplitEngine::create(
      std::make_unique<runtime::GraphEngine>(std::move(parts->head), cpuInfo()),
      std::make_unique<runtime::GraphEngine>(std::move(parts->tail), cpuInfo()), {"y", "zz"},
      ErrorCode::kInvalidArgument);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_HAS(e.status().message(), "output 'zz' is computed by neither the head nor the tail");
}

TEST(SplitEngine, ATailReadingWhatTheHeadLacks_n) {
  const graph::Graph g = optimized(nonZeroModel());
  auto parts = graph::splitStaticHead(g);
  ASSERT_TRUE(parts.ok());
  parts->head.outputs = {"y"};  // r no longer leaves the head
  auto e = runtime::SplitEngine::create(
      std::make_unique<runtime::GraphEngine>(std::move(parts->head), cpuInfo()),
      std::make_unique<runtime::GraphEngine>(std::move(parts->tail), cpuInfo()), g.outputs,
      ErrorCode::kCorruptFile);
  ASSERT_FALSE(e.ok());
  EXPECT_HAS(e.status().message(), "the tail reads 'r', which the head neither computes nor takes");
}

// ---- the file ---------------------------------------------------------------------------------

std::vector<uint8_t> splitBytes() {
  auto e = splitOnCpu(nonZeroModel());
  return e ? bytesOf(*e) : std::vector<uint8_t>();
}

TEST(SplitEngine, FileTruncated_n) {
  const auto b = splitBytes();
  ASSERT_GT(b.size(), 100u);
  for (size_t len = 0; len < b.size(); len += std::max<size_t>(1, b.size() / 53)) {
    const std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(len));
    auto r = Engine::deserialize(cut.data(), cut.size());
    ASSERT_FALSE(r.ok()) << "truncated to " << len;
    EXPECT_EQ(r.status().code(), ErrorCode::kCorruptFile) << r.status().toString();
  }
}

TEST(SplitEngine, FileBitFlip_n) {
  auto b = splitBytes();
  ASSERT_GT(b.size(), 100u);
  b[b.size() / 2] ^= 0x04;
  EXPECT_HAS(loadError(b), "checksum mismatch");
}

TEST(SplitEngine, FileOfAnotherVersion_n) {
  auto b = splitBytes();
  b[8] = 9;
  EXPECT_HAS(loadError(b, ErrorCode::kVersionMismatch),
             "engine with a CPU tail: container version 9");
}

TEST(SplitEngine, FileWithoutOutputs_n) {
  const auto b = test::withContainerHeader(splitBytes(), [](std::string& h) {
    const auto pos = h.find("\"outputs\":[");
    ASSERT_NE(pos, std::string::npos) << h;
    h.replace(pos, 11, "\"outputz\":[");
  });
  EXPECT_HAS(loadError(b), "the header has no list of outputs");
}

TEST(SplitEngine, FileListingAnOutputTwice_n) {
  const auto b = test::withContainerHeader(splitBytes(), [](std::string& h) {
    const std::string from = "\"outputs\":[\"picked\",\"y\",\"idx\"]";
    const auto pos = h.find(from);
    ASSERT_NE(pos, std::string::npos) << h;
    h.replace(pos, from.size(), "\"outputs\":[\"picked\",\"y\",\"y\"]");
  });
  EXPECT_HAS(loadError(b), "output 'y' is listed twice");
}

TEST(SplitEngine, FileWithAnEmptyTail_n) {
  auto e = splitOnCpu(nonZeroModel());
  ASSERT_TRUE(e);
  const auto* se = dynamic_cast<const runtime::SplitEngine*>(e.get());
  ASSERT_TRUE(se);
  auto c = builder::encodeSplitContainer({"y"}, bytesOf(se->head()), {}, {});
  ASSERT_TRUE(c.ok());
  const std::string m = loadError(*c);
  EXPECT_HAS(m, "engine with a CPU tail: the CPU tail");
  EXPECT_HAS(m, "truncated");
}

TEST(SplitEngine, FileWhoseTailIsOfAnotherModel_n) {
  // The head of one model beside the tail of a model with another hash.
  auto e = splitOnCpu(nonZeroModel());
  auto other = splitOnCpu(nonZeroModel(), "fedcba9876543210");
  ASSERT_TRUE(e && other);
  const auto* se = dynamic_cast<const runtime::SplitEngine*>(e.get());
  const auto* so = dynamic_cast<const runtime::SplitEngine*>(other.get());
  ASSERT_TRUE(se && so);
  auto c = builder::encodeSplitContainer({"picked", "y", "idx"}, bytesOf(se->head()),
                                         bytesOf(so->tail()), {});
  ASSERT_TRUE(c.ok());
  EXPECT_HAS(loadError(*c), "the tail was built from another model");
}

TEST(SplitEngine, TheTailReadOnItsOwnIsAnOrdinaryCpuEngine) {
  // Each part is a complete engine: the tail alone runs from the values it reads.
  auto e = splitOnCpu(nonZeroModel());
  ASSERT_TRUE(e);
  const auto* se = dynamic_cast<const runtime::SplitEngine*>(e.get());
  ASSERT_TRUE(se);
  const auto tailBytes = bytesOf(se->tail());
  auto tail = Engine::deserialize(tailBytes.data(), tailBytes.size());
  ASSERT_TRUE(tail.ok()) << tail.status().toString();
  EXPECT_EQ((*tail)->inputs().size(), 2u);
}

}  // namespace
}  // namespace edgeinfer
