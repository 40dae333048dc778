// GPU engines end to end: build (tactic selection through the timing cache), run against the
// CPU reference, serialise and load, CUDA graphs, several contexts, forced tactics and the
// errors of each. GPU tests skip without a GPU; the plan-file and no-GPU tests run anywhere.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include "data_dependent_models.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "engine_outputs.h"
#include "qoperator_models.h"
#include "test_model.h"

#ifdef EDGEINFER_HAVE_CUDA
#include <cuda_runtime.h>

#include "builder/engine_format.h"
#include "builder/timing_cache.h"
#include "kernels/cuda/library_handles.h"
#include "runtime/cuda/cuda_plan.h"
#include "tactic_test_util.h"
#endif

namespace edgeinfer {
namespace {

using test::allOutputs;
using test::expectSameTensor;
using test::TempDir;
using test::TestModel;

/// A small CNN touching the main GPU paths: cuDNN conv (+bias+ReLU, + residual), pooling,
/// depthwise conv, SiLU (x * sigmoid(x)), global pooling, a Flatten view, Gemm, Softmax.
TestModel smallCnn(int64_t batch) {
  TestModel m(13);
  m.input("x", {batch, 3, 17, 19});
  m.randomInitializer("w1", {8, 3, 3, 3}, 1, -0.5f, 0.5f);
  m.randomInitializer("b1", {8}, 2);
  m.randomInitializer("w2", {8, 8, 1, 1}, 3, -0.5f, 0.5f);
  m.randomInitializer("b2", {8}, 4);
  m.randomInitializer("w3", {8, 1, 3, 3}, 5, -0.5f, 0.5f);
  m.randomInitializer("w4", {5, 8}, 6, -0.5f, 0.5f);
  m.randomInitializer("b4", {5}, 7);
  auto& c1 = m.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  TestModel::attrInts(c1, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  auto& p = m.node("MaxPool", {"r1"}, {"p1"}, "pool1");
  TestModel::attrInts(p, "kernel_shape", {2, 2});
  TestModel::attrInts(p, "strides", {2, 2});
  m.node("Conv", {"p1", "w2", "b2"}, {"c2"}, "conv2");
  m.node("Add", {"c2", "p1"}, {"a2"}, "add2");
  m.node("Relu", {"a2"}, {"r2"}, "relu2");
  auto& dw = m.node("Conv", {"r2", "w3"}, {"c3"}, "dwconv");
  TestModel::attr(dw, "group", 8);
  TestModel::attrInts(dw, "pads", {1, 1, 1, 1});
  m.node("Sigmoid", {"c3"}, {"s3"}, "sigmoid3");
  m.node("Mul", {"c3", "s3"}, {"m3"}, "silu3");
  m.node("GlobalAveragePool", {"m3"}, {"g"}, "gap");
  m.node("Flatten", {"g"}, {"f"}, "flatten");
  auto& gemm = m.node("Gemm", {"f", "w4", "b4"}, {"l"}, "fc");
  TestModel::attr(gemm, "transB", 1);
  m.node("Softmax", {"l"}, {"y"}, "softmax");
  m.output("y");
  return m;
}

Expected<std::unique_ptr<Engine>> build(const TestModel& m, const BuilderConfig& cfg) {
  const std::string bytes = m.bytes();
  return Builder::buildFromBuffer(bytes.data(), bytes.size(), cfg);
}

bool haveGpu() {
  std::string why;
#ifdef EDGEINFER_HAVE_CUDA
  return test::gpuAvailable(&why);
#else
  return false;
#endif
}

// ---- Anywhere --------------------------------------------------------------------------------

TEST(CudaEngine, BackendCudaWithoutGpuIsAClearError_n) {
  if (haveGpu()) GTEST_SKIP() << "a GPU is present (this checks the message without one)";
  BuilderConfig c;
  c.backend = Backend::kCuda;
  auto e = build(smallCnn(1), c);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(e.status().message().find("no GPU is usable"), std::string::npos)
      << e.status().toString();
}

TEST(CudaEngine, AutoWithoutGpuBuildsForTheCpu) {
  if (haveGpu()) GTEST_SKIP() << "a GPU is present";
  auto e = build(smallCnn(1), BuilderConfig{});
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ((*e)->info().backend, Backend::kCpu);
}

// waitForEvent is for GPU contexts: a CPU context (plain, or one of several shape profiles)
// says so instead of ignoring the event.
TEST(CudaEngine, WaitForEventOnACpuContextIsUnsupported_n) {
  BuilderConfig c;
  c.backend = Backend::kCpu;
  for (bool profiles : {false, true}) {
    BuilderConfig pc = c;
    if (profiles) pc.shapeProfiles = {{{"x", Shape{1, 3, 17, 19}}}, {{"x", Shape{2, 3, 17, 19}}}};
    auto e = build(smallCnn(profiles ? -1 : 1), pc);
    ASSERT_TRUE(e.ok()) << e.status().toString();
    auto ctx = (*e)->createExecutionContext();
    ASSERT_TRUE(ctx.ok());
    int dummy = 0;
    const Status st = (*ctx)->waitForEvent(&dummy);
    EXPECT_EQ(st.code(), ErrorCode::kUnsupported) << st.toString();
    EXPECT_NE(st.message().find("does not run on a GPU"), std::string::npos) << st.toString();
  }
}

#ifdef EDGEINFER_HAVE_CUDA

Tensor randomInput(const Shape& s, uint32_t seed) {
  Tensor t = Tensor::zeros(DataType::kFloat32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

double relL2(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = a.data<float>()[i] - b.data<float>()[i];
    num += d * d;
    den += static_cast<double>(b.data<float>()[i]) * b.data<float>()[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

Tensor runEngine(const Engine& e, const Tensor& x, const ContextOptions& o = {}) {
  auto ctx = e.createExecutionContext(o);
  EXPECT_TRUE(ctx.ok()) << ctx.status().toString();
  if (!ctx.ok()) return Tensor();
  auto out = (*ctx)->run({{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().toString();
  return out.ok() ? out->at("y").clone() : Tensor();
}

Tensor cpuReference(const TestModel& m, const Tensor& x) {
  BuilderConfig c;
  c.backend = Backend::kCpu;
  auto e = build(m, c);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  return e.ok() ? runEngine(**e, x) : Tensor();
}

// ---- The plan stored in an engine file (no GPU needed) ---------------------------------------

/// A graph of two nodes and a valid plan for it.
struct PlanFixture {
  graph::Graph g;
  std::string json;
  PlanFixture() {
    g.inputs = {"x"};
    g.outputs = {"y"};
    g.value("x").dtype = DataType::kFloat32;
    g.value("x").shape = Shape{1, 4};
    g.value("r").dtype = DataType::kFloat32;
    g.value("r").shape = Shape{1, 4};
    g.value("y").dtype = DataType::kFloat32;
    g.value("y").shape = Shape{4};
    graph::Node relu;
    relu.name = "relu";
    relu.opType = "Relu";
    relu.inputs = {"x"};
    relu.outputs = {"r"};
    graph::Node fl;
    fl.name = "flat";
    fl.opType = "Flatten";
    fl.inputs = {"r"};
    fl.outputs = {"y"};
    g.nodes = {relu, fl};
    runtime::cuda::ExecutionPlan p;
    p.tensors = {{"x", {DataType::kFloat32, builder::Layout::kLinear}, false, -1},
                 {"r", {DataType::kFloat16, builder::Layout::kLinear}, false, -1},
                 {"r", {DataType::kFloat32, builder::Layout::kLinear}, false, -1},
                 {"y", {DataType::kFloat32, builder::Layout::kLinear}, false, 2}};
    runtime::cuda::PlanStep s0;
    s0.kind = runtime::cuda::StepKind::kTactic;
    s0.node = 0;
    s0.tactic = "cuda.eltwise.fp16.linear";
    s0.precision = Precision::kFp16;
    s0.state = "{\"opaque\": \"plan \\u00e9\"}";  // stored as a JSON string, verbatim
    s0.inputs = {0};
    s0.outputs = {1};
    runtime::cuda::PlanStep s1;
    s1.kind = runtime::cuda::StepKind::kReformat;
    s1.inputs = {1};
    s1.outputs = {2};
    runtime::cuda::PlanStep s2;
    s2.kind = runtime::cuda::StepKind::kView;
    s2.node = 1;
    s2.inputs = {2};
    s2.outputs = {3};
    p.steps = {s0, s1, s2};
    p.graphInputs = {{"x", 0}};
    p.graphOutputs = {{"y", 3}};
    json = runtime::cuda::planToJson(p, g);
  }
  Status parse(const std::string& text) { return runtime::cuda::planFromJson(text, g).status(); }
  /// The plan with the first occurrence of `from` replaced by `to`.
  std::string edited(const std::string& from, const std::string& to) const {
    std::string s = json;
    const auto pos = s.find(from);
    EXPECT_NE(pos, std::string::npos) << from << " not in " << s;
    if (pos != std::string::npos) s.replace(pos, from.size(), to);
    return s;
  }
};

TEST(CudaPlan, RoundTrip) {
  PlanFixture f;
  auto p = runtime::cuda::planFromJson(f.json, f.g);
  ASSERT_TRUE(p.ok()) << p.status().toString();
  EXPECT_EQ(p->steps.size(), 3u);
  EXPECT_EQ(p->tensors[1].format.dtype, DataType::kFloat16);
  EXPECT_EQ(p->tensors[3].aliasOf, 2);
  EXPECT_EQ(p->steps[0].tactic, "cuda.eltwise.fp16.linear");
  EXPECT_EQ(p->steps[0].state, "{\"opaque\": \"plan \\u00e9\"}");
  EXPECT_TRUE(p->steps[1].state.empty());
  EXPECT_EQ(runtime::cuda::planToJson(*p, f.g), f.json);  // canonical
}

TEST(CudaPlan, DamagedPlansAreRefusedWithTheReason_n) {
  PlanFixture f;
  const struct {
    std::string text, expect;
  } cases[] = {
      {"[1,2]", "not a JSON object"},
      {"{\"tensors\": 1}", "missing"},
      {f.edited("\"kind\":\"view\"", "\"kind\":\"teleport\""), "unknown step kind"},
      {f.edited("\"name\":\"relu\"", "\"name\":\"other\""), "but the graph has"},
      {f.edited("\"dtype\":\"float16\"", "\"dtype\":\"float128\""), "unknown element type"},
      {f.edited("\"layout\":\"linear\"", "\"layout\":\"diagonal\""), "unknown layout"},
      {f.edited("\"outputs\":[1]", "\"outputs\":[99]"), "out of range"},
      {f.edited("\"precision\":\"fp16\"", "\"precision\":\"fp8\""), "unknown precision"},
      {f.edited("\"tactic\":\"cuda.eltwise.fp16.linear\"", "\"tactic\":\"\""), "tactic id"},
      {f.edited("\"value\":\"r\"", "\"value\":\"nope\""), "unknown value"},
      {f.edited("\"inputs\":{\"x\":0}", "\"inputs\":{}"), "graph input 'x'"},
      {f.edited("\"node\":1", "\"node\":7"), "node index"},
      {f.edited("\"state\":\"", "\"state\":[\""), "not a JSON"},  // unbalanced: bad JSON
      {f.edited("\"state\":\"", "\"state\":7,\"x\":\""), "not a string"},
  };
  for (const auto& c : cases) {
    const Status s = f.parse(c.text);
    EXPECT_EQ(s.code(), ErrorCode::kCorruptFile) << c.text;
    EXPECT_NE(s.message().find(c.expect), std::string::npos)
        << "expected '" << c.expect << "' in: " << s.toString();
  }
}

/// A plan with a folded layer (LayerContext::foldedZ): the 1x1 Conv "ds" whose output z is
/// FusedConv "c3"'s residual, held as a view step (z aliases its input x) and read by c3's
/// ".fold" tactic at input 3.
struct FoldedPlanFixture {
  graph::Graph g;
  runtime::cuda::ExecutionPlan p;
  FoldedPlanFixture() {
    g.inputs = {"x", "y"};
    g.outputs = {"out"};
    for (const char* v : {"x", "y", "z", "out"}) {
      g.value(v).dtype = DataType::kFloat32;
      g.value(v).shape = Shape{1, 32, 4, 4};
    }
    graph::Node ds;
    ds.name = "ds";
    ds.opType = "Conv";
    ds.inputs = {"x", "wd"};
    ds.outputs = {"z"};
    graph::Node c3;
    c3.name = "c3";
    c3.opType = "FusedConv";
    c3.domain = graph::kEdgeInferDomain;
    c3.inputs = {"y", "w3", "", "z"};
    c3.outputs = {"out"};
    g.nodes = {ds, c3};
    const builder::TensorFormat q{DataType::kInt8, builder::Layout::kNHWC};
    p.tensors = {{"x", q, false, -1, 0.1f},
                 {"y", q, false, -1, 0.1f},
                 {"z", q, false, 0, 0.2f},
                 {"out", q, false, -1, 0.3f}};
    runtime::cuda::PlanStep view;
    view.kind = runtime::cuda::StepKind::kView;
    view.node = 0;
    view.inputs = {0, -1};
    view.outputs = {2};
    runtime::cuda::PlanStep reader;
    reader.kind = runtime::cuda::StepKind::kTactic;
    reader.node = 1;
    reader.tactic = "cuda-i8.pw64x256.i8.fold.f";
    reader.precision = Precision::kInt8;
    reader.inputs = {1, -1, -1, 2};
    reader.outputs = {3};
    p.steps = {view, reader};
    p.graphInputs = {{"x", 0}, {"y", 1}};
    p.graphOutputs = {{"out", 3}};
  }
  Status parse() const {
    return runtime::cuda::planFromJson(runtime::cuda::planToJson(p, g), g).status();
  }
};

TEST(CudaPlan, FoldedLayerRoundTrips) {
  FoldedPlanFixture f;
  auto p = runtime::cuda::planFromJson(runtime::cuda::planToJson(f.p, f.g), f.g);
  ASSERT_TRUE(p.ok()) << p.status().toString();
  EXPECT_TRUE(runtime::cuda::isFoldedStep(p->steps[0], f.g));
  EXPECT_EQ(runtime::cuda::foldedInto(*p, f.g, 1), 0);
  EXPECT_EQ(runtime::cuda::foldedInto(*p, f.g, 0), -1);
  EXPECT_NE(runtime::cuda::describePlan(*p, f.g).find("folded into its reader"), std::string::npos);
}

// A convolution held as a view step must be read only by the ".fold" tactic it is folded into,
// at input 3, and alias its input: any other reader would take the folded layer's input for its
// output (ResNet's downsample tensor is 4 times its input's size: reads past its end).
TEST(CudaPlan, FoldedLayerOnlyForItsFoldedReader_n) {
  const auto refused = [](const FoldedPlanFixture& f, const char* why) {
    const Status st = f.parse();
    EXPECT_EQ(st.code(), ErrorCode::kCorruptFile) << why << ": " << st.toString();
    EXPECT_NE(st.message().find("'ds'"), std::string::npos) << st.toString();
  };
  {
    FoldedPlanFixture f;
    f.p.steps[1].tactic = "cuda-i8.pw64x256.i8.i8.f";
    refused(f, "a reader that does not fold it");
  }
  {
    FoldedPlanFixture f;
    f.p.tensors[2].aliasOf = -1;
    refused(f, "no alias");
  }
  {
    FoldedPlanFixture f;
    f.p.steps[1].inputs = {2, -1, -1, 2};
    refused(f, "read at input 0 as well");
  }
  {
    FoldedPlanFixture f;
    f.g.outputs.push_back("z");
    f.p.graphOutputs["z"] = 2;
    refused(f, "a graph output");
  }
  {
    FoldedPlanFixture f;
    f.p.steps[1].inputs = {1, -1, -1, 1};
    refused(f, "no reader");
  }
}

/// A plan with a chained layer (LayerContext::chained): FusedConv "c3" writes "mid" and, by its
/// ".chain" tactic, "out", the output of the 1x1 Conv "c1" reading "mid", which has no step.
struct ChainedPlanFixture {
  graph::Graph g;
  runtime::cuda::ExecutionPlan p;
  ChainedPlanFixture() {
    g.inputs = {"x"};
    g.outputs = {"mid", "out"};
    for (const char* v : {"x", "mid", "out", "other"}) {
      g.value(v).dtype = DataType::kFloat32;
      g.value(v).shape = Shape{1, 32, 4, 4};
    }
    graph::Node c3;
    c3.name = "c3";
    c3.opType = "FusedConv";
    c3.domain = graph::kEdgeInferDomain;
    c3.inputs = {"x", "w3"};
    c3.outputs = {"mid"};
    graph::Node c1;
    c1.name = "c1";
    c1.opType = "Conv";
    c1.inputs = {"mid", "w1"};
    c1.outputs = {"out"};
    graph::Node relu;
    relu.name = "act";
    relu.opType = "Relu";
    relu.inputs = {"x"};
    relu.outputs = {"other"};
    g.nodes = {c3, c1, relu};
    const builder::TensorFormat q{DataType::kInt8, builder::Layout::kNHWC};
    p.tensors = {{"x", q, false, -1, 0.1f},
                 {"mid", q, false, -1, 0.2f},
                 {"out", q, false, -1, 0.3f},
                 {"other", q, false, -1, 0.1f}};
    runtime::cuda::PlanStep both;
    both.kind = runtime::cuda::StepKind::kTactic;
    both.node = 0;
    both.tactic = "cuda-i8.pw64x256.i8.-.f.chain";
    both.precision = Precision::kInt8;
    both.inputs = {0, -1};
    both.outputs = {1, 2};
    p.steps = {both};
    p.graphInputs = {{"x", 0}};
    p.graphOutputs = {{"mid", 1}, {"out", 2}};
  }
  Status parse() const {
    return runtime::cuda::planFromJson(runtime::cuda::planToJson(p, g), g).status();
  }
};

TEST(CudaPlan, ChainedLayerRoundTrips) {
  ChainedPlanFixture f;
  auto p = runtime::cuda::planFromJson(runtime::cuda::planToJson(f.p, f.g), f.g);
  ASSERT_TRUE(p.ok()) << p.status().toString();
  EXPECT_EQ(runtime::cuda::chainedNode(*p, f.g, 0), 1);
  EXPECT_EQ(runtime::cuda::countInt8Steps(*p), 2) << "the step and its chained layer";
  EXPECT_TRUE(runtime::cuda::isChainTactic(p->steps[0].tactic));
  EXPECT_FALSE(runtime::cuda::isChainTactic("cuda-i8.pw64x256.i8.-.f"));
  EXPECT_FALSE(runtime::cuda::isChainTactic(".chain"));
  EXPECT_NE(runtime::cuda::describePlan(*p, f.g).find("(chained: 'c1')"), std::string::npos);
}

// A ".chain" step's last output must be the output of a convolution that reads the step's
// output and has no step, and only a ".chain" tactic writes one output more than its node: an
// engine file edited or damaged otherwise is refused at load, naming the layer.
TEST(CudaPlan, ChainedLayerOnlyAsTheChainedTacticsOutput_n) {
  const auto refused = [](const ChainedPlanFixture& f, const char* name, const char* why,
                          const char* says = "") {
    const Status st = f.parse();
    EXPECT_EQ(st.code(), ErrorCode::kCorruptFile) << why << ": " << st.toString();
    EXPECT_NE(st.message().find(name), std::string::npos) << why << ": " << st.toString();
    EXPECT_NE(st.message().find(says), std::string::npos) << why << ": " << st.toString();
  };
  {
    ChainedPlanFixture f;
    f.p.steps[0].tactic = "cuda-i8.pw64x256.i8.-.f";
    refused(f, "'c3'", "two outputs without a chained tactic");
  }
  {
    ChainedPlanFixture f;
    f.p.steps[0].outputs = {1};
    refused(f, "'c3'", "a chained tactic without the chained output");
  }
  {
    ChainedPlanFixture f;
    f.p.steps[0].outputs = {1, 3};  // "other": a Relu's output
    refused(f, "'c3'", "the chained output is no convolution's");
  }
  {
    ChainedPlanFixture f;
    f.g.nodes[1].inputs = {"x", "w1"};
    refused(f, "'c1'", "the chained layer does not read the step's output");
  }
  {
    ChainedPlanFixture f;
    runtime::cuda::PlanStep own;
    own.kind = runtime::cuda::StepKind::kTactic;
    own.node = 1;
    own.tactic = "cuda-i8.pw128x64.i8.-.f";
    own.precision = Precision::kInt8;
    own.inputs = {1, -1};
    own.outputs = {2};
    f.p.steps.push_back(own);
    refused(f, "'c1'", "the chained layer has a step of its own");
  }
  // Another step (the Relu's) writes the chained output, or reads it before the chain's step;
  // the chained output is not int8.
  runtime::cuda::PlanStep act;
  act.kind = runtime::cuda::StepKind::kTactic;
  act.node = 2;
  act.tactic = "cuda.eltwise";
  act.precision = Precision::kFp16;
  {
    ChainedPlanFixture f;
    act.inputs = {0};
    act.outputs = {2};
    f.p.steps.push_back(act);
    refused(f, "'c3'", "another writer", "has another writer");
  }
  {
    ChainedPlanFixture f;
    act.inputs = {2};
    act.outputs = {3};
    f.p.steps.insert(f.p.steps.begin(), act);
    refused(f, "'c3'", "read before the chain's step", "is read before its step");
  }
  {
    ChainedPlanFixture f;
    f.p.tensors[2].format = {DataType::kFloat16, builder::Layout::kNHWC};
    f.p.tensors[2].scale = 0.f;
    refused(f, "'c3'", "a chained output that is not int8", "not a quantized int8");
  }
}

TEST(CudaPlan, CanonicalFormats) {
  using builder::Layout;
  using runtime::cuda::canonicalFormat;
  EXPECT_EQ(canonicalFormat({DataType::kFloat16, Layout::kNHWC}, Shape{2, 8, 1, 1}).layout,
            Layout::kNCHW);  // H*W == 1: the same bytes
  EXPECT_EQ(canonicalFormat({DataType::kFloat16, Layout::kNHWC}, Shape{2, 1, 5, 5}).layout,
            Layout::kNCHW);  // C == 1
  EXPECT_EQ(canonicalFormat({DataType::kFloat16, Layout::kNHWC}, Shape{2, 8, 5, 5}).layout,
            Layout::kNHWC);
  EXPECT_EQ(canonicalFormat({DataType::kFloat32, Layout::kNHWC}, Shape{2, 8}).layout,
            Layout::kLinear);
  EXPECT_EQ(canonicalFormat({DataType::kFloat32, Layout::kLinear}, Shape{2, 8, 3, 3}).layout,
            Layout::kNCHW);
}

// ---- On the GPU ----------------------------------------------------------------------------

BuilderConfig gpuConfig(const TempDir& dir, Precision p = Precision::kFp32) {
  return test::quickGpuConfig(dir.file("timing.cache"), p);
}

TEST(CudaEngine, MatchesTheCpuReferenceFp32AndFp16) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  const TestModel m = smallCnn(3);
  const Tensor x = randomInput(Shape{3, 3, 17, 19}, 11);
  const Tensor want = cpuReference(m, x);
  for (Precision p : {Precision::kFp32, Precision::kFp16}) {
    auto e = build(m, gpuConfig(dir, p));
    ASSERT_TRUE(e.ok()) << e.status().toString();
    EXPECT_EQ((*e)->info().backend, Backend::kCuda);
    const Tensor got = runEngine(**e, x);
    ASSERT_FALSE(got.empty());
    const double err = relL2(got, want);
    EXPECT_LT(err, p == Precision::kFp32 ? 1e-5 : 5e-3) << precisionName(p);
    std::printf("[          ] small CNN %s: rel L2 %.3g vs CPU\n", precisionName(p), err);
  }
}

TEST(CudaEngine, SerialisedEngineLoadsAndRunsTheSame) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  const TestModel m = smallCnn(2);
  const Tensor x = randomInput(Shape{2, 3, 17, 19}, 12);
  auto e = build(m, gpuConfig(dir, Precision::kFp16));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  auto bytes = (*e)->serialize();
  ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
  auto loaded = Engine::deserialize(bytes->data(), bytes->size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_EQ((*loaded)->info().deviceKey, (*e)->info().deviceKey);
  const Tensor a = runEngine(**e, x), b = runEngine(**loaded, x);
  ASSERT_EQ(a.numel(), b.numel());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.bytes()), 0) << "same tactics, same results";
  auto again = (*loaded)->serialize();
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *bytes) << "a loaded engine serialises to the same bytes";
  // Every cuDNN step carries its execution plan's JSON, which the load restored.
  auto parts = builder::decodeEngine(bytes->data(), bytes->size());
  ASSERT_TRUE(parts.ok()) << parts.status().toString();
  auto plan = runtime::cuda::planFromJson(parts->plan, parts->graph);
  ASSERT_TRUE(plan.ok()) << plan.status().toString();
  int cudnnSteps = 0;
  for (const auto& st : plan->steps) {
    if (st.tactic.rfind("cudnn.", 0) != 0) continue;
    ++cudnnSteps;
    EXPECT_FALSE(st.state.empty()) << st.tactic << " has no serialized plan";
  }
  EXPECT_GT(cudnnSteps, 0) << "the small CNN's convolutions ran on no cuDNN tactic";
}

TEST(CudaEngine, CachedRebuildIsBitIdenticalAndMissIsErrorHolds) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  const TestModel m = smallCnn(1);
  BuilderConfig c = gpuConfig(dir, Precision::kFp16);
  auto first = build(m, c);
  ASSERT_TRUE(first.ok()) << first.status().toString();
  c.timingCacheMissIsError = true;  // every layer must now come from the cache
  auto second = build(m, c);
  ASSERT_TRUE(second.ok()) << second.status().toString();
  EXPECT_EQ(*(*first)->serialize(), *(*second)->serialize());
  // Another cache file, empty: a miss is an error naming the layer.
  c.timingCachePath = dir.file("empty.cache");
  auto third = build(m, c);
  ASSERT_FALSE(third.ok());
  EXPECT_EQ(third.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(third.status().message().find("cache miss"), std::string::npos)
      << third.status().toString();
}

TEST(CudaEngine, CudaGraphCapturedOnceReplayedAndUpdatedForNewInputAddresses) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  const TestModel m = smallCnn(2);
  auto e = build(m, gpuConfig(dir));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  const Tensor x1 = randomInput(Shape{2, 3, 17, 19}, 21), x2 = randomInput(Shape{2, 3, 17, 19}, 22);
  const Tensor want1 = runEngine(**e, x1, ContextOptions{false});
  const Tensor want2 = runEngine(**e, x2, ContextOptions{false});
  auto ctx = (*e)->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  for (int i = 0; i < 3; ++i) {
    auto out = (*ctx)->run({{"x", x1}});
    ASSERT_TRUE(out.ok()) << out.status().toString();
    EXPECT_LT(relL2(out->at("y"), want1), 1e-6);
  }
  ContextStats st = (*ctx)->stats();
  EXPECT_TRUE(st.cudaGraphs);
  EXPECT_EQ(st.graphCaptures, 1);
  EXPECT_EQ(st.graphReplays, 2);  // the first run is the warm-up
  EXPECT_GT(st.lastGpuMs, 0.0);
  // Device-resident inputs at two addresses: the graph is patched, not re-instantiated.
  auto d1 = copyToDevice(x1), d2 = copyToDevice(x2);
  ASSERT_TRUE(d1.ok() && d2.ok());
  for (const auto* d : {&*d1, &*d2, &*d1}) {
    ASSERT_TRUE((*ctx)->setInput("x", *d).ok());
    ASSERT_TRUE((*ctx)->execute().ok());
    auto y = (*ctx)->getOutput("y");
    ASSERT_TRUE(y.ok());
    EXPECT_LT(relL2(*y, d == &*d2 ? want2 : want1), 1e-6);
  }
  st = (*ctx)->stats();
  EXPECT_EQ(st.graphCaptures, 1);
  EXPECT_EQ(st.graphUpdates, 3);
  EXPECT_EQ(st.graphReplays, 5);
}

TEST(CudaEngine, CudaGraphsSwitchOffByOptionAndEnvironment) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  auto e = build(smallCnn(1), gpuConfig(dir));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  const Tensor x = randomInput(Shape{1, 3, 17, 19}, 31);
  for (int way = 0; way < 2; ++way) {
    if (way == 1) setenv("EDGEINFER_DISABLE_CUDA_GRAPHS", "1", 1);
    auto ctx = (*e)->createExecutionContext(ContextOptions{way == 1});
    ASSERT_TRUE(ctx.ok());
    for (int i = 0; i < 3; ++i) ASSERT_TRUE((*ctx)->run({{"x", x}}).ok());
    EXPECT_FALSE((*ctx)->stats().cudaGraphs);
    EXPECT_EQ((*ctx)->stats().graphReplays, 0);
  }
  unsetenv("EDGEINFER_DISABLE_CUDA_GRAPHS");
}

/// Outputs the GPU writes straight into the context's pinned host buffer: the small one no
/// layer reads (y); not one another layer reads too (g, the pooled features the classifier
/// reads through the Flatten), nor one over 256 KB (big: 330 KB).
/// The same bits as with EDGEINFER_DISABLE_ZERO_COPY_OUTPUTS=1 (every output copied), in the
/// first run, the captured graph, its replays and its updates for new input addresses.
TEST(CudaEngine, SmallOutputsAreWrittenToTheHostByTheGpu) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  TestModel m(13);
  m.input("x", {1, 3, 17, 19});
  m.randomInitializer("w1", {8, 3, 3, 3}, 1, -0.5f, 0.5f);
  m.randomInitializer("w2", {256, 8, 1, 1}, 2, -0.5f, 0.5f);
  m.randomInitializer("w3", {5, 256}, 3, -0.5f, 0.5f);
  auto& c1 = m.node("Conv", {"x", "w1"}, {"c1"}, "conv1");
  TestModel::attrInts(c1, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  m.node("Conv", {"r1", "w2"}, {"c2"}, "conv2");
  m.node("Relu", {"c2"}, {"big"}, "relu2");
  m.node("GlobalAveragePool", {"c2"}, {"g"}, "gap");
  m.node("Flatten", {"g"}, {"f"}, "flatten");
  TestModel::attr(m.node("Gemm", {"f", "w3"}, {"y"}, "fc"), "transB", 1);
  m.output("y");
  m.output("g");
  m.output("big");
  auto e = build(m, gpuConfig(dir));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  const Tensor x1 = randomInput(Shape{1, 3, 17, 19}, 71), x2 = randomInput(Shape{1, 3, 17, 19}, 72);
  const auto outputsOf = [](ExecutionContext& ctx) {
    std::map<std::string, Tensor> o;
    for (const char* name : {"y", "g", "big"}) {
      auto t = ctx.getOutput(name);
      EXPECT_TRUE(t.ok()) << name;
      if (t.ok()) o[name] = t->clone();
    }
    return o;
  };
  auto d1 = copyToDevice(x1), d2 = copyToDevice(x2);
  ASSERT_TRUE(d1.ok() && d2.ok());
  // Runs: host x1 three times (warm-up, capture, replay), then device x1, x2, x1 (updates).
  const auto runAll = [&](ExecutionContext& ctx) {
    std::vector<std::map<std::string, Tensor>> all;
    for (int i = 0; i < 3; ++i) {
      EXPECT_TRUE(ctx.setInput("x", x1).ok());
      EXPECT_TRUE(ctx.execute().ok());
      all.push_back(outputsOf(ctx));
    }
    for (const auto* d : {&*d1, &*d2, &*d1}) {
      EXPECT_TRUE(ctx.setInput("x", *d).ok());
      EXPECT_TRUE(ctx.execute().ok());
      all.push_back(outputsOf(ctx));
    }
    return all;
  };
  auto ctx = (*e)->createExecutionContext();
  ASSERT_TRUE(ctx.ok()) << ctx.status().toString();
  EXPECT_EQ((*ctx)->stats().zeroCopyOutputs, 1);
  EXPECT_EQ((*ctx)->stats().zeroCopyOutputNames, std::vector<std::string>{"y"});
  const auto got = runAll(**ctx);
  EXPECT_EQ((*ctx)->stats().graphCaptures, 1);
  EXPECT_EQ((*ctx)->stats().graphUpdates, 3);
  setenv("EDGEINFER_DISABLE_ZERO_COPY_OUTPUTS", "1", 1);
  auto copied = (*e)->createExecutionContext();
  unsetenv("EDGEINFER_DISABLE_ZERO_COPY_OUTPUTS");
  ASSERT_TRUE(copied.ok()) << copied.status().toString();
  EXPECT_EQ((*copied)->stats().zeroCopyOutputs, 0);
  EXPECT_TRUE((*copied)->stats().zeroCopyOutputNames.empty());
  const auto want = runAll(**copied);
  ASSERT_EQ(got.size(), want.size());
  for (size_t r = 0; r < got.size(); ++r)
    for (const char* name : {"y", "g", "big"}) {
      const Tensor& a = got[r].at(name);
      const Tensor& b = want[r].at(name);
      ASSERT_EQ(a.bytes(), b.bytes()) << name;
      EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.bytes()), 0) << "run " << r << ", " << name;
    }
  // The two inputs give different logits: a stale host buffer would pass the check above.
  EXPECT_NE(std::memcmp(got[4].at("y").raw(), got[3].at("y").raw(), got[3].at("y").bytes()), 0);
}

/// Branches to run side by side: an Inception-style block (a 1x1, a 3x3, a 1x1 -> 3x3 and a
/// max-pool -> 1x1 tower off one input, concatenated) and a ResNet bottleneck whose
/// projection shortcut (a strided 1x1) runs beside its 1x1 -> 3x3 chain.
TestModel branchyCnn() {
  TestModel m(13);
  m.input("x", {1, 16, 20, 20});
  const auto conv = [&](const std::string& name, const std::string& in, int64_t cin, int64_t cout,
                        int64_t k, int64_t stride, uint32_t seed) -> std::string {
    m.randomInitializer("w_" + name, {cout, cin, k, k}, seed, -0.3f, 0.3f);
    m.randomInitializer("b_" + name, {cout}, seed + 100);
    auto& n = m.node("Conv", {in, "w_" + name, "b_" + name}, {name}, name);
    const int64_t pad = k / 2;
    TestModel::attrInts(n, "pads", {pad, pad, pad, pad});
    TestModel::attrInts(n, "strides", {stride, stride});
    m.node("Relu", {name}, {name + "_r"}, name + "_relu");
    return name + "_r";
  };
  const std::string t1 = conv("t1", "x", 16, 8, 1, 1, 1);
  const std::string t2 = conv("t2", "x", 16, 8, 3, 1, 2);
  const std::string t3 = conv("t3b", conv("t3a", "x", 16, 8, 1, 1, 3), 8, 8, 3, 1, 4);
  auto& pool = m.node("MaxPool", {"x"}, {"pool"}, "pool");
  TestModel::attrInts(pool, "kernel_shape", {3, 3});
  TestModel::attrInts(pool, "pads", {1, 1, 1, 1});
  const std::string t4 = conv("t4", "pool", 16, 8, 1, 1, 5);
  auto& cat = m.node("Concat", {t1, t2, t3, t4}, {"cat"}, "concat");
  TestModel::attr(cat, "axis", 1);
  // Bottleneck, 32 -> 64 channels at stride 2, the shortcut projected.
  const std::string a = conv("b_c1", "cat", 32, 16, 1, 1, 6);
  const std::string b = conv("b_c2", a, 16, 16, 3, 2, 7);
  m.randomInitializer("w_b_c3", {64, 16, 1, 1}, 8, -0.3f, 0.3f);
  m.node("Conv", {b, "w_b_c3"}, {"b_c3"}, "b_c3");
  m.randomInitializer("w_b_ds", {64, 32, 1, 1}, 9, -0.3f, 0.3f);
  auto& ds = m.node("Conv", {"cat", "w_b_ds"}, {"b_ds"}, "b_ds");
  TestModel::attrInts(ds, "strides", {2, 2});
  m.node("Add", {"b_c3", "b_ds"}, {"b_sum"}, "b_add");
  m.node("Relu", {"b_sum"}, {"y"}, "b_relu");
  m.output("y");
  return m;
}

// Independent branches run on streams of their own, in plain runs, in the CUDA graph captured
// from them and in its updates, with the same results bit for bit as the engine on one stream
// (the same engine file loaded twice: the same tactics) and close to the CPU's.
TEST(CudaEngine, BranchesRunSideBySideWithTheSameResults) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  const TestModel m = branchyCnn();
  const Tensor x = randomInput(Shape{1, 16, 20, 20}, 77),
               x2 = randomInput(Shape{1, 16, 20, 20}, 78);
  const Tensor want = cpuReference(m, x);
  for (Precision p : {Precision::kFp32, Precision::kFp16}) {
    SCOPED_TRACE(precisionName(p));
    auto built = build(m, gpuConfig(dir, p));
    ASSERT_TRUE(built.ok()) << built.status().toString();
    auto bytes = (*built)->serialize();
    ASSERT_TRUE(bytes.ok()) << bytes.status().toString();
    setenv("EDGEINFER_DISABLE_CONCURRENT_BRANCHES", "1", 1);
    auto serial = Engine::deserialize(bytes->data(), bytes->size());
    unsetenv("EDGEINFER_DISABLE_CONCURRENT_BRANCHES");
    auto branched = Engine::deserialize(bytes->data(), bytes->size());
    ASSERT_TRUE(serial.ok() && branched.ok());
    auto one = (*serial)->createExecutionContext();
    auto many = (*branched)->createExecutionContext();
    ASSERT_TRUE(one.ok() && many.ok());
    std::vector<Tensor> ref;
    for (int run = 0; run < 3; ++run) {  // plain, captured, replayed
      auto out = (*one)->run({{"x", x}});
      ASSERT_TRUE(out.ok()) << out.status().toString();
      ref.push_back(out->at("y").clone());
    }
    EXPECT_EQ((*one)->stats().streams, 1);
    EXPECT_LT(relL2(ref[0], want), p == Precision::kFp32 ? 1e-5 : 5e-3);
    for (int run = 0; run < 3; ++run) {
      auto out = (*many)->run({{"x", x}});
      ASSERT_TRUE(out.ok()) << out.status().toString();
      EXPECT_EQ(
          std::memcmp(out->at("y").raw(), ref[static_cast<size_t>(run)].raw(), ref[0].bytes()), 0)
          << "run " << run;
    }
    const ContextStats st = (*many)->stats();
    EXPECT_GE(st.streams, 2) << "the towers and the shortcut are independent branches";
    EXPECT_EQ(st.graphCaptures, 1);
    EXPECT_EQ(st.graphReplays, 2);
    // Device inputs at two addresses: the graph is patched with every branch in it.
    const Tensor want2 = runEngine(**serial, x2);
    auto d1 = copyToDevice(x), d2 = copyToDevice(x2);
    ASSERT_TRUE(d1.ok() && d2.ok());
    for (const auto* d : {&*d2, &*d1, &*d2}) {
      ASSERT_TRUE((*many)->setInput("x", *d).ok());
      ASSERT_TRUE((*many)->execute().ok());
      auto y = (*many)->getOutput("y");
      ASSERT_TRUE(y.ok());
      const Tensor& w = d == &*d2 ? want2 : ref[0];
      EXPECT_EQ(std::memcmp(y->raw(), w.raw(), w.bytes()), 0);
    }
    EXPECT_GE((*many)->stats().graphUpdates, 2);
    // The branches' bytes are apart in the arena: a little more memory than one stream needs.
    EXPECT_GE(st.activationArenaBytes, (*one)->stats().activationArenaBytes);
    std::printf(
        "[          ] branchy CNN %s: %lld streams, arena %lld KiB (one stream: %lld KiB)\n",
        precisionName(p), static_cast<long long>(st.streams),
        static_cast<long long>(st.activationArenaBytes / 1024),
        static_cast<long long>((*one)->stats().activationArenaBytes / 1024));
  }
}

TEST(CudaEngine, ContextsShareOneEngineAcrossThreads) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  auto e = build(smallCnn(2), gpuConfig(dir, Precision::kFp16));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  const Engine& engine = **e;
  std::vector<Tensor> xs, want;
  for (uint32_t t = 0; t < 4; ++t) {
    xs.push_back(randomInput(Shape{2, 3, 17, 19}, 40 + t));
    want.push_back(runEngine(engine, xs.back()));
  }
  std::vector<int> bad(4, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      auto ctx = engine.createExecutionContext();
      if (!ctx.ok()) {
        bad[t] = 1000;
        return;
      }
      for (int i = 0; i < 20; ++i) {
        auto out = (*ctx)->run({{"x", xs[t]}});
        if (!out.ok() || std::memcmp(out->at("y").raw(), want[t].raw(), want[t].bytes()) != 0)
          ++bad[t];
      }
    });
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < 4; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

/// Contexts created, run and destroyed on threads while others run: each destroys its stream,
/// which the shared cuDNN handle may have been set to last (cuDNN records an event on a
/// handle's previous stream at the next cudnnSetStream: a destroyed one crashed the process,
/// once in a few runs of CudaRanges.ContextsOnThreadsShareOneSpecialisation on an H200).
TEST(CudaEngine, ContextsComeAndGoOnThreads) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  auto e = build(smallCnn(2), gpuConfig(dir));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  const Engine& engine = **e;
  const Tensor x = randomInput(Shape{2, 3, 17, 19}, 60);
  const Tensor want = runEngine(engine, x);
  std::vector<int> bad(8, 0);
  std::vector<std::thread> threads;
  for (size_t t = 0; t < bad.size(); ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 12; ++i) {
        auto ctx = engine.createExecutionContext();
        auto out = ctx.ok() ? (*ctx)->run({{"x", x}}) : ctx.status();
        if (!out.ok() || std::memcmp(out->at("y").raw(), want.raw(), want.bytes()) != 0) ++bad[t];
      }
    });
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < bad.size(); ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

TEST(CudnnHandles, AStreamIsReleasedBeforeItIsDestroyed) {
  EI_SKIP_WITHOUT_GPU();
  std::string why;
  auto h = cuda::sharedDeviceHandle<cuda::CudnnHandle>(&why);
  ASSERT_TRUE(h) << why;
  cudaStream_t s = nullptr, other = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
  cudaStream_t current = nullptr;
  {
    std::lock_guard<std::shared_mutex> lock(h->mu);
    ASSERT_EQ(cudnnSetStream(h->handle, s), CUDNN_STATUS_SUCCESS);
  }
  cuda::releaseStream(other);  // not the handle's: nothing changes
  ASSERT_EQ(cudnnGetStream(h->handle, &current), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(current, s);
  cuda::releaseStream(s);
  ASSERT_EQ(cudnnGetStream(h->handle, &current), CUDNN_STATUS_SUCCESS);
  EXPECT_EQ(current, h->home);
  EXPECT_NE(current, nullptr);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
  {
    std::lock_guard<std::shared_mutex> lock(h->mu);
    EXPECT_EQ(cudnnSetStream(h->handle, other), CUDNN_STATUS_SUCCESS);
  }
  cuda::releaseStream(other);
  ASSERT_EQ(cudaStreamDestroy(other), cudaSuccess);
}

TEST(CudaEngine, LayerWithoutGpuKernelFallsBackToTheCpu) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  TestModel m(13);
  m.input("x", {2, 6});
  m.node("Relu", {"x"}, {"r"}, "relu");
  // A Clip whose bound is computed at run time: no GPU kernel (the GPU's Clip reads constants).
  auto& mx = m.node("ReduceMax", {"r"}, {"mx"}, "max");
  TestModel::attr(mx, "keepdims", 0);
  m.initializer("half", {}, {0.5f});
  m.node("Mul", {"mx", "half"}, {"bound"}, "bound");
  m.node("Clip", {"r", "", "bound"}, {"c"}, "clip_rt");
  m.node("Add", {"r", "c"}, {"s"}, "add");
  m.node("Sigmoid", {"s"}, {"y"}, "sigmoid");
  m.output("y");
  const Tensor x = randomInput(Shape{2, 6}, 51);
  const Tensor want = cpuReference(m, x);
  auto e = build(m, gpuConfig(dir));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  auto ctx = (*e)->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  for (int i = 0; i < 2; ++i) {
    auto out = (*ctx)->run({{"x", x}});
    ASSERT_TRUE(out.ok()) << out.status().toString();
    EXPECT_LT(relL2(out->at("y"), want), 1e-6);
  }
  EXPECT_EQ((*ctx)->stats().cpuFallbackLayers, 1);
  EXPECT_FALSE((*ctx)->stats().cudaGraphs) << "a CPU layer synchronises: no graphs";
  EXPECT_EQ((*ctx)->stats().zeroCopyOutputs, 0) << "CPU layers copy their results in";
  BuilderConfig strict = gpuConfig(dir);
  strict.allowCpuFallback = false;
  auto refused = build(m, strict);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("clip_rt"), std::string::npos)
      << refused.status().toString();
}

/// What onnxruntime's quantize_dynamic makes of a Conv and a MatMul (qoperator_models.h): the
/// activations quantized at run time (DynamicQuantizeLinear), the integer layers reading
/// their run-time zero points, the int32 results cast to float and scaled. Exact in FP32.
/// `m` built FP32 and FP16 with no CPU fallback runs every layer on the GPU in one CUDA graph
/// (three runs, the last ones replays) with output y within rel. L2 1e-6 (FP32) or `tol16`
/// (FP16) of `want`.
void expectWholeOnTheGpu(const TestModel& m, const Tensor& x, const Tensor& want,
                         const TempDir& dir, double tol16) {
  ASSERT_FALSE(want.empty());
  for (Precision p : {Precision::kFp32, Precision::kFp16}) {
    SCOPED_TRACE(precisionName(p));
    BuilderConfig cfg = gpuConfig(dir, p);
    cfg.allowCpuFallback = false;
    auto e = build(m, cfg);
    ASSERT_TRUE(e.ok()) << e.status().toString();
    auto ctx = (*e)->createExecutionContext();
    ASSERT_TRUE(ctx.ok());
    for (int i = 0; i < 3; ++i) {
      auto out = (*ctx)->run({{"x", x}});
      ASSERT_TRUE(out.ok()) << out.status().toString();
      EXPECT_LT(relL2(out->at("y"), want), p == Precision::kFp32 ? 1e-6 : tol16);
    }
    EXPECT_EQ((*ctx)->stats().cpuFallbackLayers, 0);
    EXPECT_TRUE((*ctx)->stats().cudaGraphs);
  }
}

TEST(CudaEngine, DynamicallyQuantizedConvAndMatMulRunWholeOnTheGpu) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  const TestModel m = test::dynamicQuantizedModel();
  const Tensor x = randomInput(Shape{4, 3, 6, 6}, 73);
  const Tensor want = cpuReference(m, x);
  ASSERT_FALSE(want.empty());
  // FP32: every step up to the scaling is exact. FP16: the casts of the int32 accumulators
  // and their readers keep float32 (in FP16 the accumulators, up to ~1e5 here, overflowed to
  // inf and the second quantization's scale became inf); later float tensors may be rounded.
  expectWholeOnTheGpu(m, x, want, dir, 1e-2);
}

TEST(CudaEngine, DataDependentOutputIsRefusedWithAClearError) {
  // ConstantOfShape of a shape given at run time has no static bound, and nothing comes
  // before it to run on the GPU.
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  TestModel m(13);
  m.input("shape", {2}, onnx::TensorProto::INT64);
  m.node("ConstantOfShape", {"shape"}, {"y"}, "fill");
  m.output("y");
  auto e = build(m, gpuConfig(dir));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kUnsupported) << e.status().toString();
  EXPECT_NE(e.status().message().find("depends on the input values"), std::string::npos)
      << e.status().toString();
  EXPECT_NE(e.status().message().find("'fill'"), std::string::npos) << e.status().toString();
}

/// Models whose output sizes depend on the input values: the layers before them and the
/// data-dependent layers themselves (bounded, test_cuda_detection.cpp) run on the GPU (one CUDA
/// graph), what follows them on the CPU, with the CPU reference's results; the file keeps
/// both; with the CPU fallback off, a model with such a tail is refused with a clear error.
TEST(CudaEngine, DataDependentLayersAndWhatFollowsRunOnTheCpuAfterTheGpu) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  const TestModel nz = test::nonZeroModel();
  const TestModel nms = test::nmsModel();
  struct Case {
    const TestModel* model;
    std::map<std::string, Tensor> inputs;
    int64_t tailLayers;
  };
  const std::vector<Case> cases = {
      {&nz, {{"x", randomInput(Shape{2, 6}, 81)}}, 2},  // Transpose and GatherND
      {&nms, {{"b", randomInput(Shape{1, 20, 4}, 82)}, {"s", randomInput(Shape{1, 1, 20}, 83)}}, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.model->proto.graph().node(c.model->proto.graph().node_size() - 1).op_type());
    BuilderConfig cpu;
    cpu.backend = Backend::kCpu;
    auto ref = build(*c.model, cpu);
    ASSERT_TRUE(ref.ok()) << ref.status().toString();
    const auto want = allOutputs(**ref, c.inputs);
    auto e = build(*c.model, gpuConfig(dir));
    ASSERT_TRUE(e.ok()) << e.status().toString();
    EXPECT_EQ((*e)->info().backend, Backend::kCuda);
    auto ctx = (*e)->createExecutionContext();
    ASSERT_TRUE(ctx.ok());
    for (int i = 0; i < 3; ++i) {  // the last runs replay the head's CUDA graph
      const auto got = allOutputs(**e, c.inputs, ctx->get());
      for (const auto& [name, t] : want) expectSameTensor(got.at(name), t, name);
    }
    EXPECT_EQ((*ctx)->stats().cpuFallbackLayers, c.tailLayers);
    EXPECT_TRUE((*ctx)->stats().cudaGraphs) << "the head has no CPU layer: one CUDA graph";
    EXPECT_GT((*ctx)->stats().graphReplays, 0);
    // Saved and loaded: the same results.
    ASSERT_TRUE((*e)->save(dir.file("split.engine")).ok());
    auto loaded = Engine::load(dir.file("split.engine"));
    ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
    const auto again = allOutputs(**loaded, c.inputs);
    for (const auto& [name, t] : want) expectSameTensor(again.at(name), t, "loaded " + name);
    // Without the CPU fallback: refused, saying what to do, when layers follow the bounded
    // one; built whole on the GPU when nothing does.
    BuilderConfig strict = gpuConfig(dir);
    strict.allowCpuFallback = false;
    auto refused = build(*c.model, strict);
    if (c.tailLayers == 0) {
      ASSERT_TRUE(refused.ok()) << refused.status().toString();
      const auto strictOut = allOutputs(**refused, c.inputs);
      for (const auto& [name, t] : want) expectSameTensor(strictOut.at(name), t, "strict " + name);
      continue;
    }
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), ErrorCode::kUnsupported) << refused.status().toString();
    EXPECT_NE(refused.status().message().find("allow the CPU fallback"), std::string::npos)
        << refused.status().toString();
  }
}

/// Ops that used to need the CPU fallback, chained so bool and float tensors flow between GPU
/// layers: Split, ReduceL2, Greater (bool mask), Cast, variadic Sum, Where, Tile,
/// SpaceToDepth, Sin.
TEST(CudaEngine, TypedAndDataMovementOpsRunWholeOnTheGpu) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  TestModel m(13);
  m.input("x", {2, 8, 6, 6});
  m.initializerI64("sizes", {2}, {3, 5});
  m.initializer("th", {}, {1.5f});
  auto& split = m.node("Split", {"x", "sizes"}, {"s0", "s1"}, "split");
  TestModel::attr(split, "axis", 1);
  auto& l2 = m.node("ReduceL2", {"s1"}, {"m0"}, "l2");
  TestModel::attrInts(l2, "axes", {1});
  m.node("Greater", {"m0", "th"}, {"mask"}, "greater");
  auto& cast = m.node("Cast", {"mask"}, {"mf"}, "cast");
  TestModel::attr(cast, "to", onnx::TensorProto::FLOAT);
  m.node("Sum", {"s0", "mf", "mf"}, {"z"}, "sum");
  m.node("Neg", {"z"}, {"nz"}, "neg");
  m.node("Where", {"mask", "z", "nz"}, {"w"}, "where");
  m.initializerI64("reps", {4}, {1, 1, 2, 1});
  m.node("Tile", {"w", "reps"}, {"t"}, "tile");
  auto& s2d = m.node("SpaceToDepth", {"t"}, {"d"}, "s2d");
  TestModel::attr(s2d, "blocksize", 2);
  m.node("Sin", {"d"}, {"sd"}, "sin");
  m.node("Mul", {"sd", "d"}, {"y"}, "mul");
  m.output("y");
  Tensor x = randomInput(Shape{2, 8, 6, 6}, 61);
  // No L2 norm near the threshold, so FP16 rounding never flips the mask.
  float* px = x.data<float>();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t hw = 0; hw < 36; ++hw) {
      double sq = 0;
      for (int64_t c = 3; c < 8; ++c) sq += px[(n * 8 + c) * 36 + hw] * px[(n * 8 + c) * 36 + hw];
      if (std::fabs(std::sqrt(sq) - 1.5) < 0.02)
        for (int64_t c = 3; c < 8; ++c) px[(n * 8 + c) * 36 + hw] *= 0.9f;
    }
  expectWholeOnTheGpu(m, x, cpuReference(m, x), dir, 3e-3);
}

/// x -> Conv 3x3 (16 -> 24, bias) -> activation -> y, with the activation as ONNX writes it
/// ("SiLU": Mul(c, Sigmoid(c))), for the activations cuDNN fuses (SiLU as SWISH) and those it
/// has no exact mode for (run by our kernel after cuDNN's): never on the CPU.
TestModel convAct(const std::string& act) {
  TestModel m(14);
  m.input("x", {2, 16, 11, 9});
  m.randomInitializer("w", {24, 16, 3, 3}, 61, -0.3f, 0.3f);
  m.randomInitializer("b", {24}, 62);
  auto& c = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  TestModel::attrInts(c, "pads", {1, 1, 1, 1});
  if (act == "SiLU") {
    m.node("Sigmoid", {"c"}, {"s"}, "sigmoid");
    m.node("Mul", {"c", "s"}, {"y"}, "mul");
  } else {
    m.node(act, {"c"}, {"y"}, "act");
  }
  m.output("y");
  return m;
}

TEST(CudaEngine, ConvActivationsRunOnTheGpuFusedOrAfterTheConv) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  const Tensor x = randomInput(Shape{2, 16, 11, 9}, 63);
  for (const char* act : {"SiLU", "HardSwish", "HardSigmoid", "Softplus"}) {
    SCOPED_TRACE(act);
    const TestModel m = convAct(act);
    const Tensor want = cpuReference(m, x);
    for (Precision p : {Precision::kFp32, Precision::kFp16}) {
      BuilderConfig c = gpuConfig(dir, p);
      c.allowCpuFallback = false;  // a layer without a GPU tactic fails the build
      auto e = build(m, c);
      ASSERT_TRUE(e.ok()) << e.status().toString();
      auto ctx = (*e)->createExecutionContext();
      ASSERT_TRUE(ctx.ok());
      for (int i = 0; i < 3; ++i) {  // warm-up, capture, replay
        auto out = (*ctx)->run({{"x", x}});
        ASSERT_TRUE(out.ok()) << out.status().toString();
        const double err = relL2(out->at("y"), want);
        EXPECT_LT(err, p == Precision::kFp32 ? 1e-5 : 5e-3) << precisionName(p) << " run " << i;
      }
      EXPECT_EQ((*ctx)->stats().cpuFallbackLayers, 0);
      std::printf("[          ] conv + %s %s: one layer, rel L2 %.3g\n", act, precisionName(p),
                  relL2(runEngine(**e, x), want));
    }
  }
}

TEST(CudaEngine, ForcedTacticsAndLayerPrecision) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  const TestModel m = smallCnn(1);
  BuilderConfig c = gpuConfig(dir, Precision::kFp16);
  c.forcedTactics["softmax"] = "cuda.softmax.fp32.linear";
  c.layerPrecision["fc"] = Precision::kFp32;
  auto e = build(m, c);
  ASSERT_TRUE(e.ok()) << e.status().toString();
  auto bytes = (*e)->serialize();
  ASSERT_TRUE(bytes.ok());
  const std::string text(bytes->begin(), bytes->end());
  EXPECT_NE(text.find("\"tactic\":\"cuda.softmax.fp32.linear\""), std::string::npos);
  const size_t fc = text.find("\"name\":\"fc\"");
  ASSERT_NE(fc, std::string::npos);
  const std::string fcStep = text.substr(fc, text.find('}', fc) - fc);
  EXPECT_NE(fcStep.find("\"precision\":\"fp32\""), std::string::npos) << fcStep;
  const Tensor x = randomInput(Shape{1, 3, 17, 19}, 61);
  EXPECT_LT(relL2(runEngine(**e, x), cpuReference(m, x)), 5e-3);
}

TEST(CudaEngine, ForcedTacticErrors_n) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  BuilderConfig c = gpuConfig(dir);
  c.forcedTactics["softmax"] = "cuda.softmax.fp99.linear";
  auto e = build(smallCnn(1), c);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("not a candidate"), std::string::npos)
      << e.status().toString();
  c.forcedTactics.clear();
  c.forcedTactics["no_such_layer"] = "cuda.softmax.fp32.linear";
  e = build(smallCnn(1), c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("no_such_layer"), std::string::npos);
  c.forcedTactics.clear();
  c.layerPrecision["nowhere"] = Precision::kFp32;
  e = build(smallCnn(1), c);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("nowhere"), std::string::npos);
  c.layerPrecision.clear();
  c.precision = Precision::kInt8;
  e = build(smallCnn(1), c);  // INT8 without a calibration cache: no scales to use
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kInvalidArgument) << "never a silent FP32 build";
  EXPECT_NE(e.status().message().find("calibration cache"), std::string::npos)
      << e.status().toString();
}

TEST(CudaEngine, WrongInputsAreRefused_n) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  auto e = build(smallCnn(2), gpuConfig(dir));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  auto ctx = (*e)->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  EXPECT_EQ((*ctx)->execute().code(), ErrorCode::kInvalidArgument) << "nothing bound";
  EXPECT_EQ((*ctx)->setInput("x", randomInput(Shape{3, 3, 17, 19}, 1)).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ((*ctx)->setInput("nope", randomInput(Shape{2, 3, 17, 19}, 1)).code(),
            ErrorCode::kNotFound);
  EXPECT_EQ((*ctx)->setInput("x", Tensor::zeros(DataType::kInt32, Shape{2, 3, 17, 19})).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ((*ctx)->getOutput("y").status().code(), ErrorCode::kInvalidArgument) << "no run yet";
}

TEST(CudaEngine, DynamicBatchIsBuiltStatic) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  BuilderConfig c = gpuConfig(dir);
  c.dynamicDimDefault = 4;
  auto e = build(smallCnn(-1), c);
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ((*e)->inputs()[0].shape, (Shape{4, 3, 17, 19}));
}

// waitForEvent orders execute() after work on another stream: the input's bytes are written by
// a device-to-device copy (asynchronous for the host, unlike a copy from pageable memory)
// queued on a stream of the test's own behind a 300 ms host callback; the engine, told to wait
// for the event recorded after the copy, reads the new bytes (it would read the old ones if it
// ran at once). Also with shape profiles (the event goes to the profile's sub-context).
void sleepOnStream(void*) {
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

TEST(CudaEngine, WaitForEventOrdersTheRunAfterAnotherStreamsWork) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  for (bool profiles : {false, true}) {
    BuilderConfig c = gpuConfig(dir);
    if (profiles) c.shapeProfiles = {{{"x", Shape{1, 3, 17, 19}}}, {{"x", Shape{2, 3, 17, 19}}}};
    auto e = build(smallCnn(profiles ? -1 : 2), c);
    ASSERT_TRUE(e.ok()) << e.status().toString();
    const Tensor oldX = randomInput(Shape{2, 3, 17, 19}, 31),
                 newX = randomInput(Shape{2, 3, 17, 19}, 32);
    const Tensor want = runEngine(**e, newX, ContextOptions{false});
    const Tensor wantOld = runEngine(**e, oldX, ContextOptions{false});
    ASSERT_GT(relL2(want, wantOld), 1e-3) << "the two inputs must give different outputs";
    auto ctx = (*e)->createExecutionContext();
    ASSERT_TRUE(ctx.ok());
    auto dev = copyToDevice(oldX);
    auto devNew = copyToDevice(newX);
    ASSERT_TRUE(dev.ok() && devNew.ok());
    ASSERT_TRUE((*ctx)->setInput("x", *dev).ok());
    // run -1, the control: no waitForEvent, so the engine reads the old bytes (the copy is still
    // behind the callback): the test can tell. Then the capture and two replays.
    for (int run = -1; run < 3; ++run) {
      ASSERT_TRUE(cudaMemcpy(dev->raw(), oldX.raw(), oldX.bytes(), cudaMemcpyHostToDevice) ==
                  cudaSuccess);
      cudaStream_t other = nullptr;
      cudaEvent_t written = nullptr;
      ASSERT_EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
      ASSERT_EQ(cudaEventCreateWithFlags(&written, cudaEventDisableTiming), cudaSuccess);
      ASSERT_EQ(cudaLaunchHostFunc(other, sleepOnStream, nullptr), cudaSuccess);
      ASSERT_EQ(
          cudaMemcpyAsync(dev->raw(), devNew->raw(), newX.bytes(), cudaMemcpyDeviceToDevice, other),
          cudaSuccess);
      ASSERT_EQ(cudaEventRecord(written, other), cudaSuccess);
      if (run >= 0) {
        ASSERT_TRUE((*ctx)->waitForEvent(written).ok());
      }
      ASSERT_TRUE((*ctx)->execute().ok());
      auto y = (*ctx)->getOutput("y");
      ASSERT_TRUE(y.ok());
      if (run < 0) {
        EXPECT_LT(relL2(*y, wantOld), 1e-6) << "control: the engine should not have waited";
      } else {
        EXPECT_LT(relL2(*y, want), 1e-6) << "run " << run << (profiles ? " (profiles)" : "")
                                         << ": the engine did not wait for the other stream";
      }
      cudaStreamSynchronize(other);
      cudaEventDestroy(written);
      cudaStreamDestroy(other);
    }
    EXPECT_EQ((*ctx)->waitForEvent(nullptr).code(), ErrorCode::kInvalidArgument);
  }
}

#endif  // EDGEINFER_HAVE_CUDA

}  // namespace
}  // namespace edgeinfer
