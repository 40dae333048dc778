// The `cuda` provider's detection tactics (BoundedNonZero, BoundedNonMaxSuppression) against
// the CPU reference, which they must match exactly (the outputs are indices): every element
// type NonZero reads, odd shapes, NaN / -0 / tiny values, empty and full selections; NMS with
// both box forms, ties in the scores, every parameter present or not, many classes and boxes.
// The outputs start poisoned, so the padding must be written too. Then whole engines: a
// detector's NMS on the GPU (no CPU layer, one CUDA graph, FP32 and FP16 builds), saved and
// loaded. Negative cases (_n): layers the provider must not offer a tactic for.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "cuda_layer_case.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "engine_outputs.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using graph::Attribute;
using test::allOutputs;
using test::expectSameTensor;
using test::LayerCase;
using test::randomInts;
using test::TempDir;
using test::TestModel;

LayerCase boundedCase(const std::string& op) {
  LayerCase c(op);
  c.node().domain = graph::kEdgeInferDomain;
  c.outputs(2);
  return c;
}

// ---- BoundedNonZero ----------------------------------------------------------------------------

/// Random floats where about a third are zero (either sign), some NaN, some tiny.
Tensor sparseFloats(const Shape& s, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> kind(0, 9);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  Tensor t = Tensor::zeros(DataType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) {
    const int k = kind(rng);
    t.data<float>()[i] = k < 2   ? 0.f
                         : k < 3 ? -0.f
                         : k < 4 ? (i % 7 == 0 ? std::numeric_limits<float>::quiet_NaN() : 1e-40f)
                                 : u(rng);
  }
  return t;
}

TEST(CudaDetection, BoundedNonZeroFloatOddShapes) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 10;
  for (const Shape& s :
       {Shape{7}, Shape{3, 5, 11}, Shape{2, 1, 1, 4, 3}, Shape{1}, Shape{}, Shape{4, 257, 1031}}) {
    LayerCase c = boundedCase("BoundedNonZero");
    c.input(sparseFloats(s, seed++));
    c.check({"cuda.nonzero.fp32.linear"}, 0, 0);
  }
}

TEST(CudaDetection, BoundedNonZeroNoneAndAll) {
  EI_SKIP_WITHOUT_GPU();
  for (float v : {0.f, -0.f, 1.f}) {
    LayerCase c = boundedCase("BoundedNonZero");
    Tensor t = Tensor::zeros(DataType::kFloat32, Shape{3, 333});
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = v;
    c.input(t);
    c.check({"cuda.nonzero.fp32.linear"}, 0, 0);
  }
}

TEST(CudaDetection, BoundedNonZeroIntegerAndBoolTypes) {
  EI_SKIP_WITHOUT_GPU();
  const std::map<DataType, std::string> ids = {{DataType::kInt32, "i32"},
                                               {DataType::kInt64, "i64"},
                                               {DataType::kInt8, "i8"},
                                               {DataType::kUInt8, "u8"},
                                               {DataType::kBool, "bool"}};
  uint32_t seed = 40;
  for (const auto& [dt, name] : ids)
    for (const Shape& s : {Shape{13}, Shape{2, 3, 37}}) {
      SCOPED_TRACE(name);
      LayerCase c = boundedCase("BoundedNonZero");
      c.input(randomInts(s, dt, seed++, -2, 2));  // many zeros
      c.check({"cuda.nonzero." + name + ".linear"}, 0, 0);
    }
}

// ---- BoundedNonMaxSuppression -----------------------------------------------------------------

struct NmsCase {
  int64_t batches, classes, boxes, maxOut;
  bool center;
  float iou;
  bool hasScore;
  float score;
  bool ties;  // scores on a coarse grid (many equal), zeros of either sign
};

/// Boxes that overlap often: centres in [0, 1], sides in [0.02, 0.4]; the corner form takes
/// either diagonal.
Tensor nmsBoxes(const NmsCase& k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> c(0.f, 1.f), side(0.02f, 0.4f);
  std::bernoulli_distribution flip(0.3);
  Tensor t = Tensor::zeros(DataType::kFloat32, Shape{k.batches, k.boxes, 4});
  float* p = t.data<float>();
  for (int64_t i = 0; i < k.batches * k.boxes; ++i) {
    const float xc = c(rng), yc = c(rng), w = side(rng), h = side(rng);
    if (k.center) {
      p[i * 4 + 0] = xc;
      p[i * 4 + 1] = yc;
      p[i * 4 + 2] = w;
      p[i * 4 + 3] = h;
    } else {
      const bool f = flip(rng);
      p[i * 4 + 0] = f ? yc + h / 2 : yc - h / 2;
      p[i * 4 + 1] = xc - w / 2;
      p[i * 4 + 2] = f ? yc - h / 2 : yc + h / 2;
      p[i * 4 + 3] = xc + w / 2;
    }
  }
  return t;
}

Tensor nmsScores(const NmsCase& k, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  Tensor t = Tensor::zeros(DataType::kFloat32, Shape{k.batches, k.classes, k.boxes});
  for (int64_t i = 0; i < t.numel(); ++i) {
    float v = u(rng);
    if (k.ties) {
      v = std::floor(v * 8.f) / 8.f;
      if (v == 0.f && i % 2) v = -0.f;
    }
    t.data<float>()[i] = v;
  }
  return t;
}

void checkNms(const NmsCase& k, uint32_t seed) {
  SCOPED_TRACE(std::to_string(k.batches) + "x" + std::to_string(k.classes) + "x" +
               std::to_string(k.boxes) + " max " + std::to_string(k.maxOut) +
               (k.center ? " centre" : " corner"));
  LayerCase c = boundedCase("BoundedNonMaxSuppression");
  if (k.center) c.attr("center_point_box", Attribute::Int(1));
  c.input(nmsBoxes(k, seed));
  c.input(nmsScores(k, seed + 1));
  c.constant(test::intTensor(DataType::kInt64, {k.maxOut}));
  c.constant(test::floatTensor({k.iou}));
  if (k.hasScore) c.constant(test::floatTensor({k.score}));
  c.check({"cuda.nms.fp32.linear"}, 0, 0);
}

TEST(CudaDetection, BoundedNmsMatchesTheReference) {
  EI_SKIP_WITHOUT_GPU();
  const std::vector<NmsCase> cases = {
      {2, 3, 257, 10, false, 0.5f, true, 0.2f, false},
      {1, 1, 1, 1, false, 0.5f, false, 0.f, false},
      {3, 2, 1000, 5000, false, 0.7f, false, 0.f, false},   // limit above the box count
      {2, 4, 300, 50, true, 0.3f, true, 0.5f, true},        // ties and -0
      {1, 5, 129, 129, false, 0.f, true, -0.1f, true},      // IoU threshold 0: any overlap
      {1, 2, 64, 64, true, 1.f, false, 0.f, false},         // IoU threshold 1: none suppressed
      {1, 80, 8400, 100, true, 0.45f, true, 0.25f, false},  // a YOLOv8 head at 640x640
  };
  uint32_t seed = 100;
  for (const NmsCase& k : cases) checkNms(k, seed += 10);
}

TEST(CudaDetection, BoundedNmsNeverSelectsNaNScores) {
  EI_SKIP_WITHOUT_GPU();
  for (bool score : {false, true}) {
    NmsCase k{2, 3, 150, 20, false, 0.4f, score, 0.2f, true};
    Tensor s = nmsScores(k, 70);
    for (int64_t i = 0; i < s.numel(); i += 7)
      s.data<float>()[i] = i % 2 ? std::nanf("") : -std::nanf("");
    LayerCase c = boundedCase("BoundedNonMaxSuppression");
    c.input(nmsBoxes(k, 71));
    c.input(s);
    c.constant(test::intTensor(DataType::kInt64, {k.maxOut}));
    c.constant(test::floatTensor({k.iou}));
    if (score) c.constant(test::floatTensor({k.score}));
    c.check({"cuda.nms.fp32.linear"}, 0, 0);
  }
}

TEST(CudaDetection, BoundedNmsWithoutAScoreThresholdOrIouInput) {
  EI_SKIP_WITHOUT_GPU();
  NmsCase k{2, 2, 77, 7, false, 0.f, false, 0.f, true};
  LayerCase c = boundedCase("BoundedNonMaxSuppression");
  c.input(nmsBoxes(k, 5));
  c.input(nmsScores(k, 6));
  c.constant(test::intTensor(DataType::kInt64, {k.maxOut}));
  c.check({"cuda.nms.fp32.linear"}, 0, 0);
}

TEST(CudaDetection, BoundedNmsWithParametersComputedAtRunTime) {
  // The limit and the thresholds as device inputs: K is the box count, the kernel reads them.
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 300;
  for (int64_t maxOut : {1, 6, 1000})
    for (bool score : {false, true}) {
      SCOPED_TRACE("max " + std::to_string(maxOut) + (score ? " with a score threshold" : ""));
      NmsCase k{2, 3, 97, maxOut, maxOut % 2 == 0, 0.35f, score, 0.3f, true};
      LayerCase c = boundedCase("BoundedNonMaxSuppression");
      if (k.center) c.attr("center_point_box", Attribute::Int(1));
      c.input(nmsBoxes(k, seed++));
      c.input(nmsScores(k, seed++));
      c.input(test::intTensor(DataType::kInt64, {maxOut}));
      c.input(test::floatTensor({k.iou}));
      if (score) c.input(test::floatTensor({k.score}));
      c.check({"cuda.nms.fp32.linear"}, 0, 0);
    }
}

TEST(CudaDetection, NoTacticForOtherTypes_n) {
  // Boxes and scores in float16, NonZero of bfloat16: types the kernels do not read.
  NmsCase k{1, 2, 16, 4, false, 0.5f, true, 0.1f, false};
  {
    LayerCase c = boundedCase("BoundedNonMaxSuppression");
    Tensor b = Tensor::zeros(DataType::kFloat16, Shape{1, 16, 4});
    Tensor s = Tensor::zeros(DataType::kFloat16, Shape{1, 2, 16});
    c.input(b);
    c.input(s);
    c.constant(test::intTensor(DataType::kInt64, {k.maxOut}));
    EXPECT_TRUE(c.candidates().empty());
  }
  {
    LayerCase c = boundedCase("BoundedNonZero");
    c.input(Tensor::zeros(DataType::kBFloat16, Shape{4}));
    EXPECT_TRUE(c.candidates().empty()) << "the kernel does not read bfloat16";
  }
}

// ---- whole engines -----------------------------------------------------------------------------

/// A detector's last stage: boxes [2, 2100, 4] (centre form) and class scores [2, 80, 2100]
/// through exact layers (Abs, Relu), NonMaxSuppression (100 a class, IoU 0.45, score 0.25),
/// and the selected rows' boxes gathered by the CPU tail when `gather`.
TestModel detectorModel(bool gather) {
  TestModel m(13);
  m.input("b", {2, 2100, 4});
  m.input("s", {2, 80, 2100});
  m.node("Abs", {"b"}, {"ab"}, "abs");
  m.node("Relu", {"s"}, {"rs"}, "relu");
  m.initializerI64("max_out", {1}, {100});
  m.initializer("iou", {1}, {0.45f});
  m.initializer("score", {1}, {0.25f});
  auto& nms = m.node("NonMaxSuppression", {"ab", "rs", "max_out", "iou", "score"}, {"sel"}, "nms");
  TestModel::attr(nms, "center_point_box", 1);
  m.output("sel", onnx::TensorProto::INT64);
  if (gather) {
    m.initializerI64("two", {1}, {2});
    m.initializerI64("axis1", {1}, {1});
    auto& column = m.node("Gather", {"sel", "two"}, {"boxIdx"}, "box_index");  // [?, 1]
    TestModel::attr(column, "axis", 1);
    m.node("Squeeze", {"boxIdx", "axis1"}, {"bi"}, "squeeze");
    auto& boxes = m.node("Gather", {"ab", "bi"}, {"picked"}, "gather_boxes");  // [2, ?, 4]
    TestModel::attr(boxes, "axis", 1);
    m.output("picked");
  }
  return m;
}

std::map<std::string, Tensor> detectorInputs(uint32_t seed) {
  const NmsCase k{2, 80, 2100, 100, true, 0.45f, true, 0.25f, false};
  Tensor s = nmsScores(k, seed + 1);
  for (int64_t i = 0; i < s.numel(); ++i) s.data<float>()[i] -= 0.5f;  // Relu zeroes half
  return {{"b", nmsBoxes(k, seed)}, {"s", s}};
}

Expected<std::unique_ptr<Engine>> buildModel(const TestModel& m, const BuilderConfig& cfg) {
  const std::string bytes = m.bytes();
  return Builder::buildFromBuffer(bytes.data(), bytes.size(), cfg);
}

/// The model's CPU reference engine (null, with a test failure, on error).
std::unique_ptr<Engine> cpuEngine(const TestModel& m) {
  BuilderConfig cpu;
  cpu.backend = Backend::kCpu;
  auto e = buildModel(m, cpu);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  return e.ok() ? std::move(e).value() : nullptr;
}

/// The model's GPU engine; `cpuFallback` false: every layer on the GPU.
std::unique_ptr<Engine> gpuEngine(const TestModel& m, const TempDir& dir,
                                  Precision p = Precision::kFp32, bool cpuFallback = false) {
  BuilderConfig cfg = test::quickGpuConfig(dir.file("timing.cache"), p);
  cfg.allowCpuFallback = cpuFallback;
  auto e = buildModel(m, cfg);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  return e.ok() ? std::move(e).value() : nullptr;
}

TEST(CudaDetection, DetectorNmsRunsWholeOnTheGpu) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  const TestModel m = detectorModel(false);
  auto ref = cpuEngine(m);
  ASSERT_TRUE(ref);
  for (Precision p : {Precision::kFp32, Precision::kFp16}) {
    SCOPED_TRACE(p == Precision::kFp32 ? "fp32" : "fp16");
    auto e = gpuEngine(m, dir, p);  // nothing runs on the CPU
    ASSERT_TRUE(e);
    auto ctx = e->createExecutionContext();
    ASSERT_TRUE(ctx.ok());
    int64_t rows = 0;
    for (uint32_t seed : {1u, 2u, 3u}) {  // new inputs each run; later runs replay the graph
      const auto in = detectorInputs(seed);
      const auto want = allOutputs(*ref, in);
      const auto got = allOutputs(*e, in, ctx->get());
      expectSameTensor(got.at("sel"), want.at("sel"), "sel");
      rows += want.at("sel").shape()[0];
    }
    EXPECT_GT(rows, 100) << "the inputs select many boxes";
    EXPECT_EQ((*ctx)->stats().cpuFallbackLayers, 0);
    EXPECT_TRUE((*ctx)->stats().cudaGraphs);
    EXPECT_GT((*ctx)->stats().graphReplays, 0);
    ASSERT_TRUE(e->save(dir.file("nms.engine")).ok());
    auto loaded = Engine::load(dir.file("nms.engine"));
    ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
    const auto in = detectorInputs(9);
    expectSameTensor(allOutputs(**loaded, in).at("sel"), allOutputs(*ref, in).at("sel"), "loaded");
  }
}

TEST(CudaDetection, DetectorNmsThenACpuTail) {
  // The rows NMS selects index the boxes: Gather / Squeeze / Gather run on the CPU after it.
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  const TestModel m = detectorModel(true);
  auto ref = cpuEngine(m);
  ASSERT_TRUE(ref);
  auto e = gpuEngine(m, dir, Precision::kFp32, /*cpuFallback=*/true);
  ASSERT_TRUE(e);
  auto ctx = e->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  for (uint32_t seed : {4u, 5u}) {
    const auto in = detectorInputs(seed);
    const auto want = allOutputs(*ref, in);
    const auto got = allOutputs(*e, in, ctx->get());
    for (const char* name : {"sel", "picked"}) expectSameTensor(got.at(name), want.at(name), name);
  }
  EXPECT_EQ((*ctx)->stats().cpuFallbackLayers, 3);
}

TEST(CudaDetection, NmsWithRunTimeParametersInAnEngine) {
  // The limit and the thresholds are graph inputs: K is the box count; each run's values are
  // read on the device, also when the CUDA graph is replayed.
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  TestModel m(13);
  m.input("b", {2, 300, 4});
  m.input("s", {2, 3, 300});
  m.input("max_out", {1}, onnx::TensorProto::INT64);
  m.input("iou", {1});
  m.input("score", {1});
  m.node("NonMaxSuppression", {"b", "s", "max_out", "iou", "score"}, {"sel"}, "nms");
  m.output("sel", onnx::TensorProto::INT64);
  auto ref = cpuEngine(m);
  ASSERT_TRUE(ref);
  auto e = gpuEngine(m, dir);
  ASSERT_TRUE(e);
  auto ctx = e->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  const NmsCase k{2, 3, 300, 0, false, 0.f, true, 0.f, true};
  uint32_t seed = 500;
  for (int64_t maxOut : {0, 4, 40, 1000})
    for (float iou : {0.2f, 0.6f}) {
      SCOPED_TRACE("max " + std::to_string(maxOut) + " iou " + std::to_string(iou));
      std::map<std::string, Tensor> in = {{"b", nmsBoxes(k, seed)}, {"s", nmsScores(k, seed + 1)}};
      seed += 2;
      in["max_out"] = test::intTensor(DataType::kInt64, {maxOut});
      in["iou"] = test::floatTensor({iou});
      in["score"] = test::floatTensor({0.3f});
      expectSameTensor(allOutputs(*e, in, ctx->get()).at("sel"), allOutputs(*ref, in).at("sel"),
                       "sel");
    }
  EXPECT_EQ((*ctx)->stats().cpuFallbackLayers, 0);
  EXPECT_GT((*ctx)->stats().graphReplays, 0);
}

TEST(CudaDetection, NonZeroAloneRunsOnTheGpu) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  TestModel m(13);
  m.input("x", {3, 50, 7});
  m.node("NonZero", {"x"}, {"y"}, "nonzero");
  m.output("y", onnx::TensorProto::INT64);
  auto ref = cpuEngine(m);
  ASSERT_TRUE(ref);
  auto e = gpuEngine(m, dir);
  ASSERT_TRUE(e);
  for (uint32_t seed : {7u, 8u}) {
    const std::map<std::string, Tensor> in = {{"x", sparseFloats(Shape{3, 50, 7}, seed)}};
    expectSameTensor(allOutputs(*e, in).at("y"), allOutputs(*ref, in).at("y"), "y");
  }
}

}  // namespace
}  // namespace edgeinfer

#endif  // EDGEINFER_HAVE_CUDA
