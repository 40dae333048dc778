// Models with data-dependent outputs (NonZero, NonMaxSuppression) in engines that need static
// shapes: the split of the optimised graph into a static head and the tail after the
// data-dependent layers (graph/partition.h), the engine that runs the two
// (runtime/split_engine.h) and its file (builder/split_format.h), on the CPU: here both parts
// are CPU engines; a GPU build makes the head a GPU engine (test_cuda_engine.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>

#include "builder/engine_format.h"
#include "builder/optimize.h"
#include "builder/split_format.h"
#include "data_dependent_models.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "engine_outputs.h"
#include "graph/partition.h"
#include "runtime/graph_engine.h"
#include "runtime/split_engine.h"
#include "test_container.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using test::bytesOf;
using test::expectSameTensor;
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

/// The split engine of `m` with both parts on the CPU; `bound`: the data-dependent layers
/// that can stay in the head in their bounded form.
std::unique_ptr<Engine> splitOnCpu(const TestModel& m, const std::string& hash = "0123456789abcdef",
                                   bool bound = false) {
  const graph::Graph g = optimized(m);
  auto parts = graph::splitStaticHead(g, bound);
  EXPECT_TRUE(parts.ok()) << parts.status().toString();
  if (!parts.ok()) return nullptr;
  std::unique_ptr<Engine> tail;
  if (!parts->tail.nodes.empty())
    tail = std::make_unique<runtime::GraphEngine>(std::move(parts->tail), cpuInfo(hash));
  auto e = runtime::SplitEngine::create(
      std::make_unique<runtime::GraphEngine>(std::move(parts->head), cpuInfo(hash)),
      std::move(tail), g.outputs, parts->bounded, ErrorCode::kInternal);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  return e.ok() ? std::unique_ptr<Engine>(std::move(e).value()) : nullptr;
}

std::map<std::string, Tensor> runAll(const Engine& e, const std::map<std::string, Tensor>& in) {
  return test::allOutputs(e, in);
}

std::map<std::string, Tensor> runAll(const Engine& e, const Tensor& x) {
  return runAll(e, std::map<std::string, Tensor>{{"x", x}});
}

/// Every output of the model's CPU engine.
std::map<std::string, Tensor> wholeOnCpu(const TestModel& m,
                                         const std::map<std::string, Tensor>& in) {
  BuilderConfig c;
  c.backend = Backend::kCpu;
  const std::string bytes = m.bytes();
  auto e = Builder::buildFromBuffer(bytes.data(), bytes.size(), c);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  return e.ok() ? runAll(**e, in) : std::map<std::string, Tensor>();
}

std::map<std::string, Tensor> wholeOnCpu(const TestModel& m, const Tensor& x) {
  return wholeOnCpu(m, std::map<std::string, Tensor>{{"x", x}});
}

/// `e` (of nonZeroModel()) gives the whole model's outputs on several inputs, and runs
/// `tailLayers` layers in its tail.
void expectTheWholeNonZeroModel(const Engine& e, int64_t tailLayers) {
  for (int salt : {0, 3, 8, 10}) {
    const Tensor x = input(salt);
    const auto want = wholeOnCpu(nonZeroModel(), x);
    const auto got = runAll(e, x);
    for (const char* name : {"picked", "y", "idx"}) {
      SCOPED_TRACE(name);
      expectSameTensor(got.at(name), want.at(name));
    }
  }
  auto ctx = e.createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  ASSERT_TRUE((*ctx)->run({{"x", input()}}).ok());
  EXPECT_EQ((*ctx)->stats().cpuFallbackLayers, tailLayers);
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
  expectTheWholeNonZeroModel(*e, 3);
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
  for (const char* name : {"picked", "y", "idx"}) expectSameTensor(a.at(name), b.at(name));
  EXPECT_EQ(bytesOf(**loaded), bytes);
}

TEST(SplitEngine, AnOutputNeitherPartComputes_n) {
  const graph::Graph g = optimized(nonZeroModel());
  auto parts = graph::splitStaticHead(g);
  ASSERT_TRUE(parts.ok());
  auto e = runtime::SplitEngine::create(
      std::make_unique<runtime::GraphEngine>(std::move(parts->head), cpuInfo()),
      std::make_unique<runtime::GraphEngine>(std::move(parts->tail), cpuInfo()), {"y", "zz"}, {},
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
      std::make_unique<runtime::GraphEngine>(std::move(parts->tail), cpuInfo()), g.outputs, {},
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
  const std::vector<uint8_t> empty;
  auto c = builder::encodeSplitContainer({"y"}, {}, bytesOf(se->head()), &empty, {});
  ASSERT_TRUE(c.ok());
  const std::string m = loadError(*c);
  EXPECT_HAS(m, "engine with a CPU tail: the CPU tail");
  EXPECT_HAS(m, "truncated");
}

TEST(SplitEngine, FileWithTheHeadOnly_n) {
  // No tail and no bounded value: nothing follows the head.
  auto e = splitOnCpu(nonZeroModel());
  ASSERT_TRUE(e);
  const auto* se = dynamic_cast<const runtime::SplitEngine*>(e.get());
  ASSERT_TRUE(se);
  auto c = builder::encodeSplitContainer({"y"}, {}, bytesOf(se->head()), nullptr, {});
  ASSERT_TRUE(c.ok());
  EXPECT_HAS(loadError(*c), "it holds the head only, and no bounded value follows it");
}

TEST(SplitEngine, FileWhoseTailIsOfAnotherModel_n) {
  // The head of one model beside the tail of a model with another hash.
  auto e = splitOnCpu(nonZeroModel());
  auto other = splitOnCpu(nonZeroModel(), "fedcba9876543210");
  ASSERT_TRUE(e && other);
  const auto* se = dynamic_cast<const runtime::SplitEngine*>(e.get());
  const auto* so = dynamic_cast<const runtime::SplitEngine*>(other.get());
  ASSERT_TRUE(se && so);
  const auto otherTail = bytesOf(*so->tail());
  auto c = builder::encodeSplitContainer({"picked", "y", "idx"}, {}, bytesOf(se->head()),
                                         &otherTail, {});
  ASSERT_TRUE(c.ok());
  EXPECT_HAS(loadError(*c), "the tail was built from another model");
}

TEST(SplitEngine, TheTailReadOnItsOwnIsAnOrdinaryCpuEngine) {
  // Each part is a complete engine: the tail alone runs from the values it reads.
  auto e = splitOnCpu(nonZeroModel());
  ASSERT_TRUE(e);
  const auto* se = dynamic_cast<const runtime::SplitEngine*>(e.get());
  ASSERT_TRUE(se);
  ASSERT_TRUE(se->tail());
  const auto tailBytes = bytesOf(*se->tail());
  auto tail = Engine::deserialize(tailBytes.data(), tailBytes.size());
  ASSERT_TRUE(tail.ok()) << tail.status().toString();
  EXPECT_EQ((*tail)->inputs().size(), 2u);
}

// ---- bounded data-dependent layers -------------------------------------------------------------
// With `bound`, NonZero and NonMaxSuppression (known parameters) stay in the head padded to a
// static bound; the engine cuts them to size. Here the head is a CPU engine running the CPU
// reference's bounded kernels; a GPU build runs them on the GPU (test_cuda_detection.cpp).

/// Random boxes [1, n, 4] (corner form, either diagonal) and scores [1, 1, n] with ties.
std::map<std::string, Tensor> nmsInputs(uint32_t seed) {
  Tensor b = Tensor::zeros(DataType::kFloat32, Shape{1, 20, 4});
  Tensor s = Tensor::zeros(DataType::kFloat32, Shape{1, 1, 20});
  uint32_t r = seed * 2654435761u + 1;
  const auto next = [&r] {
    r = r * 1664525u + 1013904223u;
    return static_cast<float>((r >> 8) % 1000) / 1000.f;
  };
  for (int64_t i = 0; i < b.numel(); ++i) b.data<float>()[i] = next() * 2.f - 1.f;
  for (int64_t i = 0; i < s.numel(); ++i)
    s.data<float>()[i] = static_cast<float>(static_cast<int>(next() * 8.f)) / 8.f - 0.2f;
  return {{"b", b}, {"s", s}};
}

TEST(StaticHeadAndTail, BoundedNonZeroStaysInTheHead) {
  const graph::Graph g = optimized(nonZeroModel());
  auto parts = graph::splitStaticHead(g, /*bound=*/true);
  ASSERT_TRUE(parts.ok()) << parts.status().toString();
  EXPECT_EQ(opsOf(parts->head), (std::vector<std::string>{"Relu", "BoundedNonZero", "Abs"}));
  EXPECT_EQ(opsOf(parts->tail), (std::vector<std::string>{"Transpose", "GatherND"}));
  ASSERT_EQ(parts->bounded.size(), 1u);
  const graph::BoundedValue& b = parts->bounded[0];
  EXPECT_EQ(b.name, "nz");
  EXPECT_EQ(b.axis, 1);
  EXPECT_EQ(parts->head.outputs, (std::vector<std::string>{"y", b.padded, b.count}));
  EXPECT_EQ(parts->head.findValue(b.padded)->shape, (Shape{2, 12}));
  EXPECT_EQ(parts->head.findValue(b.count)->shape, (Shape{1}));
  EXPECT_FALSE(parts->head.hasValue("nz")) << "the head computes it padded only";
  EXPECT_EQ(parts->tail.inputs, (std::vector<std::string>{"nz", "x"}));
}

TEST(StaticHeadAndTail, BoundedNmsLeavesNoTail) {
  const graph::Graph g = optimized(test::nmsModel());
  auto parts = graph::splitStaticHead(g, /*bound=*/true);
  ASSERT_TRUE(parts.ok()) << parts.status().toString();
  EXPECT_TRUE(parts->tail.nodes.empty());
  ASSERT_EQ(parts->bounded.size(), 1u);
  EXPECT_EQ(parts->bounded[0].name, "sel");
  EXPECT_EQ(parts->bounded[0].axis, 0);
  // At most 5 boxes for each of 1 batch x 1 class.
  EXPECT_EQ(parts->head.findValue(parts->bounded[0].padded)->shape, (Shape{5, 3}));
}

/// NonMaxSuppression whose limit, IoU and score thresholds are graph inputs (as in ONNX's own
/// node tests).
TestModel nmsWithRunTimeParameters() {
  TestModel m(13);
  m.input("b", {1, 20, 4});
  m.input("s", {1, 1, 20});
  m.input("max_out", {1}, onnx::TensorProto::INT64);
  m.input("iou", {1});
  m.input("score", {1});
  m.node("Abs", {"b"}, {"ab"}, "abs_b");
  m.node("NonMaxSuppression", {"ab", "s", "max_out", "iou", "score"}, {"sel"}, "nms");
  m.output("sel", onnx::TensorProto::INT64);
  return m;
}

TEST(StaticHeadAndTail, NmsWithARunTimeLimitIsBoundedByTheBoxCount) {
  const graph::Graph g = optimized(nmsWithRunTimeParameters());
  auto parts = graph::splitStaticHead(g, /*bound=*/true);
  ASSERT_TRUE(parts.ok()) << parts.status().toString();
  ASSERT_EQ(parts->bounded.size(), 1u);
  EXPECT_TRUE(parts->tail.nodes.empty());
  EXPECT_EQ(parts->head.findValue(parts->bounded[0].padded)->shape, (Shape{20, 3}));
}

TEST(SplitEngine, BoundedNmsWithRunTimeParametersRunsAsTheWholeModelDoes) {
  const TestModel m = nmsWithRunTimeParameters();
  auto e = splitOnCpu(m, "0123456789abcdef", /*bound=*/true);
  ASSERT_TRUE(e);
  const auto scalar = [](DataType t, double v) {
    Tensor x = Tensor::zeros(t, Shape{1});
    if (t == DataType::kInt64)
      x.data<int64_t>()[0] = static_cast<int64_t>(v);
    else
      x.data<float>()[0] = static_cast<float>(v);
    return x;
  };
  for (int64_t maxOut : {0, 1, 3, 100})
    for (float iou : {0.f, 0.4f, 1.f}) {
      auto in = nmsInputs(static_cast<uint32_t>(maxOut + 7));
      in["max_out"] = scalar(DataType::kInt64, static_cast<double>(maxOut));
      in["iou"] = scalar(DataType::kFloat32, iou);
      in["score"] = scalar(DataType::kFloat32, 0.1);
      expectSameTensor(runAll(*e, in).at("sel"), wholeOnCpu(m, in).at("sel"));
    }
}

TEST(StaticHeadAndTail, NmsWithoutALimitHasNoBoundedForm) {
  // No max_output_boxes_per_class: the output is always empty, nothing to bound.
  TestModel m(13);
  m.input("b", {1, 20, 4});
  m.input("s", {1, 1, 20});
  m.node("Abs", {"b"}, {"ab"}, "abs_b");
  m.node("NonMaxSuppression", {"ab", "s"}, {"sel"}, "nms");
  m.output("sel", onnx::TensorProto::INT64);
  const graph::Graph g = optimized(m);
  for (const auto& n : g.nodes) {
    if (n.opType == "NonMaxSuppression") {
      EXPECT_FALSE(graph::boundedForm(g, n));
    }
  }
  auto parts = graph::splitStaticHead(g, /*bound=*/true);
  ASSERT_TRUE(parts.ok()) << parts.status().toString();
  EXPECT_TRUE(parts->bounded.empty());
  EXPECT_EQ(opsOf(parts->tail), (std::vector<std::string>{"NonMaxSuppression"}));
}

TEST(StaticHeadAndTail, ADataDependentLayerReadingTheTailStaysInTheTail) {
  // NonMaxSuppression's inputs have static shapes, but its scores are computed after a
  // NonZero (Size -> Cast -> Mul): it cannot run in the head, bounded or not.
  TestModel m(13);
  m.input("x", {2, 6});
  m.input("b", {1, 20, 4});
  m.input("s", {1, 1, 20});
  m.node("Relu", {"x"}, {"r"}, "relu");
  m.node("NonZero", {"r"}, {"nz"}, "nonzero");
  m.node("Size", {"nz"}, {"c"}, "size");
  auto& cast = m.node("Cast", {"c"}, {"cf"}, "cast");
  TestModel::attr(cast, "to", static_cast<int64_t>(onnx::TensorProto::FLOAT));
  m.node("Mul", {"s", "cf"}, {"s2"}, "scale");
  m.node("Abs", {"b"}, {"ab"}, "abs_b");
  m.initializerI64("max_out", {1}, {5});
  m.initializer("iou", {1}, {0.5f});
  m.node("NonMaxSuppression", {"ab", "s2", "max_out", "iou"}, {"sel"}, "nms");
  m.output("sel", onnx::TensorProto::INT64);
  const graph::Graph g = optimized(m);
  auto parts = graph::splitStaticHead(g, /*bound=*/true);
  ASSERT_TRUE(parts.ok()) << parts.status().toString();
  ASSERT_EQ(parts->bounded.size(), 1u);
  EXPECT_EQ(parts->bounded[0].name, "nz");
  const auto tailOps = opsOf(parts->tail);
  EXPECT_NE(std::find(tailOps.begin(), tailOps.end(), "NonMaxSuppression"), tailOps.end());
  for (const auto& n : parts->head.nodes) EXPECT_NE(n.opType, "BoundedNonMaxSuppression");
  auto e = splitOnCpu(m, "0123456789abcdef", /*bound=*/true);
  ASSERT_TRUE(e);
  for (uint32_t seed : {1u, 2u}) {
    auto in = nmsInputs(seed);
    in["x"] = input(static_cast<int>(seed));
    expectSameTensor(runAll(*e, in).at("sel"), wholeOnCpu(m, in).at("sel"));
  }
}

TEST(StaticHeadAndTail, BoundedLayersAreFoundByPositionNotByName) {
  // Node names need not be unique: a bounded NonZero and an Abs both named "dup".
  TestModel m(13);
  m.input("x", {2, 6});
  m.node("Relu", {"x"}, {"r"}, "relu");
  m.node("NonZero", {"r"}, {"nz"}, "dup");
  m.node("Abs", {"x"}, {"y"}, "dup");
  m.output("nz", onnx::TensorProto::INT64);
  m.output("y");
  auto e = splitOnCpu(m, "0123456789abcdef", /*bound=*/true);
  ASSERT_TRUE(e);
  for (int salt : {0, 3}) {
    const Tensor x = input(salt);
    const auto want = wholeOnCpu(m, x);
    const auto got = runAll(*e, x);
    for (const char* name : {"nz", "y"}) {
      SCOPED_TRACE(name);
      expectSameTensor(got.at(name), want.at(name));
    }
  }
}

TEST(SplitEngine, BoundedNonZeroRunsAsTheWholeModelDoes) {
  auto e = splitOnCpu(nonZeroModel(), "0123456789abcdef", /*bound=*/true);
  ASSERT_TRUE(e);
  ASSERT_EQ(e->outputs().size(), 3u);
  EXPECT_EQ(e->outputs()[2].shape, (Shape{-1, 2})) << "idx, computed by the tail";
  expectTheWholeNonZeroModel(*e, 2);  // Transpose and GatherND in the tail
}

TEST(SplitEngine, BoundedNmsAloneRunsAsTheWholeModelDoesAndRoundTrips) {
  auto e = splitOnCpu(test::nmsModel(), "0123456789abcdef", /*bound=*/true);
  ASSERT_TRUE(e);
  const auto* se = dynamic_cast<const runtime::SplitEngine*>(e.get());
  ASSERT_TRUE(se);
  EXPECT_EQ(se->tail(), nullptr);
  ASSERT_EQ(e->outputs().size(), 2u);
  EXPECT_EQ(e->outputs()[0].shape, (Shape{-1, 3}));
  const auto bytes = bytesOf(*e);
  auto loaded = Engine::deserialize(bytes.data(), bytes.size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_EQ(bytesOf(**loaded), bytes);
  int64_t selectedSomething = 0;
  for (uint32_t seed : {1u, 2u, 3u, 4u, 5u}) {
    const auto in = nmsInputs(seed);
    const auto want = wholeOnCpu(test::nmsModel(), in);
    for (const Engine* engine : {e.get(), loaded->get()}) {
      const auto got = runAll(*engine, in);
      for (const char* name : {"sel", "as"}) {
        SCOPED_TRACE(name);
        expectSameTensor(got.at(name), want.at(name));
      }
    }
    selectedSomething += want.at("sel").shape()[0];
  }
  EXPECT_GT(selectedSomething, 0) << "the inputs select boxes";
}

/// SplitEngine::create's error for the bounded NMS model's head (no tail) with its bounded
/// value altered by `alter`.
std::string boundedCreateError(const std::function<void(graph::BoundedValue&)>& alter) {
  const graph::Graph g = optimized(test::nmsModel());
  auto parts = graph::splitStaticHead(g, /*bound=*/true);
  EXPECT_TRUE(parts.ok());
  if (!parts.ok() || parts->bounded.empty()) return "";
  auto bounded = parts->bounded;
  alter(bounded[0]);
  auto e = runtime::SplitEngine::create(
      std::make_unique<runtime::GraphEngine>(std::move(parts->head), cpuInfo()), nullptr, g.outputs,
      bounded, ErrorCode::kCorruptFile);
  EXPECT_FALSE(e.ok());
  return e.ok() ? "" : e.status().message();
}

TEST(SplitEngine, BoundedValueTheHeadLacks_n) {
  EXPECT_HAS(boundedCreateError([](graph::BoundedValue& b) { b.count = "nothing"; }),
             "the head does not compute 'nothing' (bounded 'sel')");
}

TEST(SplitEngine, BoundedValueOfTheWrongType_n) {
  // The padded form names a float head output.
  EXPECT_HAS(boundedCreateError([](graph::BoundedValue& b) { b.padded = "as"; }),
             "not int64 [rows, cols] and int64 [1]");
}

TEST(SplitEngine, BoundedValueOfAnotherAxis_n) {
  EXPECT_HAS(boundedCreateError([](graph::BoundedValue& b) { b.axis = 2; }),
             "bounded value 'sel' is malformed or listed twice");
}

TEST(SplitEngine, NothingFollowsTheHead_n) {
  const graph::Graph g = optimized(test::nmsModel());
  auto parts = graph::splitStaticHead(g, /*bound=*/true);
  ASSERT_TRUE(parts.ok());
  auto e = runtime::SplitEngine::create(
      std::make_unique<runtime::GraphEngine>(std::move(parts->head), cpuInfo()), nullptr, {"as"},
      {}, ErrorCode::kInternal);
  ASSERT_FALSE(e.ok());
  EXPECT_HAS(e.status().message(), "nothing follows the head");
}

std::vector<uint8_t> boundedNmsBytes() {
  auto e = splitOnCpu(test::nmsModel(), "0123456789abcdef", /*bound=*/true);
  return e ? bytesOf(*e) : std::vector<uint8_t>();
}

TEST(SplitEngine, FileWithABadBoundedAxis_n) {
  const auto b = test::withContainerHeader(boundedNmsBytes(), [](std::string& h) {
    const auto pos = h.find("\"axis\":0");
    ASSERT_NE(pos, std::string::npos) << h;
    h.replace(pos, 8, "\"axis\":7");
  });
  EXPECT_HAS(loadError(b), "a bounded value lacks its name, padded form, count or axis");
}

TEST(SplitEngine, FileWhoseBoundedListIsNotAList_n) {
  const auto b = test::withContainerHeader(boundedNmsBytes(), [](std::string& h) {
    const auto pos = h.find("\"bounded\":[");
    ASSERT_NE(pos, std::string::npos) << h;
    h.replace(pos, 11, "\"bounded\":{\"x\":[");
    const auto end = h.find("]", pos);
    ASSERT_NE(end, std::string::npos);
    h.insert(end + 1, "}");
  });
  EXPECT_HAS(loadError(b), "\"bounded\" is not a list");
}

TEST(SplitEngine, FileWhoseBoundedValueNamesNoHeadOutput_n) {
  const auto b = test::withContainerHeader(boundedNmsBytes(), [](std::string& h) {
    const auto pos = h.find("sel:count");
    ASSERT_NE(pos, std::string::npos) << h;
    h.replace(pos, 9, "sel:cnt__");
  });
  EXPECT_HAS(loadError(b), "the head does not compute 'sel:cnt__'");
}

TEST(SplitEngine, LargeWeightsInThePoolRoundTrip) {
  // Weights of 256 bytes or more go to the shared pool (container version 2): a split
  // engine with such a weight loads and runs as before.
  TestModel m(13);
  m.input("x", {2, 6});
  m.randomInitializer("w", {6, 16}, 7);
  m.node("MatMul", {"x", "w"}, {"mm"}, "matmul");
  m.node("Relu", {"mm"}, {"r"}, "relu");
  m.node("NonZero", {"r"}, {"nz"}, "nonzero");
  m.node("Transpose", {"nz"}, {"idx"}, "transpose");
  m.node("GatherND", {"mm", "idx"}, {"picked"}, "gathernd");
  m.output("picked");
  for (bool bound : {false, true}) {
    SCOPED_TRACE(bound ? "bounded" : "in the tail");
    auto e = splitOnCpu(m, "0123456789abcdef", bound);
    ASSERT_TRUE(e);
    const auto bytes = bytesOf(*e);
    auto loaded = Engine::deserialize(bytes.data(), bytes.size());
    ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
    const Tensor x = input(4);
    expectSameTensor(runAll(**loaded, x).at("picked"), wholeOnCpu(m, x).at("picked"));
  }
}

TEST(RefBoundedKernels, PaddedWithZerosAndCounted) {
  // The head of the bounded NonZero split alone (a CPU engine): padding and count.
  const graph::Graph g = optimized(nonZeroModel());
  auto parts = graph::splitStaticHead(g, /*bound=*/true);
  ASSERT_TRUE(parts.ok());
  const graph::BoundedValue b = parts->bounded[0];
  runtime::GraphEngine head(std::move(parts->head), cpuInfo());
  Tensor x = Tensor::zeros(DataType::kFloat32, Shape{2, 6});
  x.data<float>()[1] = 0.5f;
  x.data<float>()[7] = -3.f;  // Relu: 0
  x.data<float>()[8] = -0.f;
  x.data<float>()[9] = 1e-30f;
  x.data<float>()[11] = 2.f;
  const auto out = runAll(head, x);
  const Tensor& padded = out.at(b.padded);
  ASSERT_EQ(padded.shape(), (Shape{2, 12}));
  EXPECT_EQ(out.at(b.count).data<int64_t>()[0], 3) << "0.5, 1e-30 and 2";
  const int64_t want[2][12] = {{0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0},
                               {1, 3, 5, 0, 0, 0, 0, 0, 0, 0, 0, 0}};
  for (int r = 0; r < 2; ++r)
    for (int c = 0; c < 12; ++c)
      EXPECT_EQ(padded.data<int64_t>()[r * 12 + c], want[r][c]) << r << "," << c;
}

}  // namespace
}  // namespace edgeinfer
