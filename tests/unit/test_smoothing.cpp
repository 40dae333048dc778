// Activation smoothing before INT8 (quant/smoothing.h): which channels can be scaled together,
// that scaling them leaves the network's FP32 function as it was (generated graphs with
// depthwise-separable blocks, residual streams, channel padding and concatenation, and the
// real BlazeFace), the factors' formula, calibration with smoothing (the smoothed ranges, the
// cache's factors and the builders applying them), and every way a cache's factors can be
// wrong.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "builder/optimize.h"
#include "core/npy.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/calibration.h"
#include "quant/smoothing.h"
#include "ref_test_util.h"
#include "runtime/graph_engine.h"
#include "test_model.h"
#include "test_paths.h"

namespace edgeinfer {
namespace {

using test::TempDir;
using test::TestModel;

graph::Graph optimised(const std::string& bytes) {
  auto g = builder::importAndOptimize(bytes, BuilderConfig{}, "");
  EXPECT_TRUE(g.ok()) << g.status().toString();
  return g.ok() ? std::move(g).value() : graph::Graph{};
}

/// The graph's outputs in FP32 on the CPU reference for input `x` (its only input).
std::map<std::string, Tensor> run(const graph::Graph& g, const Tensor& x) {
  EngineInfo info;
  info.backend = Backend::kCpu;
  runtime::GraphEngine e(g, info);
  auto ctx = runtime::createCpuContext(e);
  EXPECT_TRUE(ctx.ok()) << ctx.status().toString();
  std::map<std::string, Tensor> out;
  if (!ctx.ok()) return out;
  EXPECT_TRUE((*ctx)->setInput(g.inputs[0], x).ok());
  const Status s = (*ctx)->execute();
  EXPECT_TRUE(s.ok()) << s.toString();
  for (const auto& name : g.outputs) {
    auto t = (*ctx)->getOutput(name);
    EXPECT_TRUE(t.ok()) << t.status().toString();
    if (t.ok()) out[name] = t->clone();
  }
  return out;
}

Tensor randomInput(const Shape& shape, uint32_t seed) {
  return test::randomF32(shape, seed, -1.f, 1.f);
}

/// Random factors in [1/16, 16] for every class of `g`.
std::map<std::string, std::vector<float>> randomFactors(const graph::Graph& g, uint32_t seed,
                                                        int* classes = nullptr) {
  const auto plan = quant::SmoothingPlan::analyze(g);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-4.f, 4.f);
  std::vector<float> f(static_cast<size_t>(plan.numClasses()));
  for (float& v : f) v = std::exp2(u(rng));
  if (classes) *classes = plan.numClasses();
  return plan.tensorFactors(f);
}

/// Largest |a - b| relative to the largest |a| over every output.
double relativeDifference(const std::map<std::string, Tensor>& a,
                          const std::map<std::string, Tensor>& b) {
  double diff = 0, top = 0;
  for (const auto& [name, t] : a) {
    const Tensor& u = b.at(name);
    EXPECT_EQ(t.numel(), u.numel()) << name;
    for (int64_t k = 0; k < t.numel() && k < u.numel(); ++k) {
      diff = std::max(diff, std::fabs(double(t.data<float>()[k]) - u.data<float>()[k]));
      top = std::max(top, std::fabs(double(t.data<float>()[k])));
    }
  }
  return top > 0 ? diff / top : diff;
}

/// x[1,8,10,10] -> Conv 3x3 (stem) + Relu -> r0, then two blocks
///   r_{i+1} = Relu(r_i + Conv1x1(DepthwiseConv3x3(r_i)))
/// then a zero Pad of 4 channels, a block on 12 channels, and a head Conv 1x1 -> y.
std::string blockModel(bool headReadsStream = true) {
  TestModel m;
  m.input("x", {1, 8, 10, 10}).output("y");
  m.randomInitializer("ws", {8, 8, 3, 3}, 1, -0.5f, 0.5f);
  m.randomInitializer("bs", {8}, 2, -0.1f, 0.1f);
  auto& stem = m.node("Conv", {"x", "ws", "bs"}, {"s"}, "stem");
  TestModel::attrInts(stem, "pads", {1, 1, 1, 1});
  m.node("Relu", {"s"}, {"r0"}, "relu0");
  std::string r = "r0";
  int64_t c = 8;
  for (int i = 0; i < 3; ++i) {
    if (i == 2) {  // channel padding 8 -> 12, as BlazeFace does between stages
      m.initializerI64("pads", {8}, {0, 1, 0, 0, 0, 3, 0, 0});  // 1 before, 3 after
      m.node("Pad", {r, "pads"}, {"p"}, "pad");
      r = "p";
      c = 12;
    }
    const std::string n = std::to_string(i);
    m.randomInitializer("wd" + n, {c, 1, 3, 3}, 10 + i, -1.f, 1.f);
    // Channels of very different size: the depthwise weights scaled per channel.
    auto& dw = m.node("Conv", {r, "wd" + n}, {"d" + n}, "dw" + n);
    TestModel::attrInts(dw, "pads", {1, 1, 1, 1});
    TestModel::attr(dw, "group", c);
    m.randomInitializer("wp" + n, {c, c, 1, 1}, 20 + i, -0.5f, 0.5f);
    m.randomInitializer("bp" + n, {c}, 30 + i, -0.1f, 0.1f);
    m.node("Conv", {"d" + n, "wp" + n, "bp" + n}, {"q" + n}, "pw" + n);
    m.node("Add", {r, "q" + n}, {"a" + n}, "add" + n);
    m.node("Relu", {"a" + n}, {"r" + std::to_string(i + 1)}, "relu" + std::to_string(i + 1));
    r = "r" + std::to_string(i + 1);
  }
  m.randomInitializer("wh", {4, c, 1, 1}, 40, -0.5f, 0.5f);
  if (headReadsStream) {
    m.node("Conv", {r, "wh"}, {"y"}, "head");
  } else {  // a Sigmoid reads the stream: nothing linked to it can be scaled
    m.node("Sigmoid", {r}, {"sg"}, "sigmoid");
    m.node("Conv", {"sg", "wh"}, {"y"}, "head");
  }
  return m.bytes();
}

// ---- Which channels can be scaled ------------------------------------------------------------

TEST(SmoothingPlan, ResidualStreamSharesItsClassesAcrossBlocksAndThePad) {
  const graph::Graph g = optimised(blockModel());
  const auto plan = quant::SmoothingPlan::analyze(g);
  // The stream: r0 (the stem's output), the blocks' outputs r1..r3 and the pad's output p.
  const auto r0 = plan.classes("r0"), r1 = plan.classes("r1"), r2 = plan.classes("r2");
  const auto p = plan.classes("p"), r3 = plan.classes("r3");
  ASSERT_EQ(r0.size(), 8u);
  ASSERT_EQ(p.size(), 12u);
  for (size_t c = 0; c < 8; ++c) {
    EXPECT_GE(r0[c], 0) << c;
    EXPECT_EQ(r0[c], r1[c]) << c;
    EXPECT_EQ(r1[c], r2[c]) << c;
    EXPECT_EQ(r2[c], p[c + 1]) << c;  // one zero channel before
    EXPECT_EQ(p[c + 1], r3[c + 1]) << c;
  }
  // Each depthwise output is a class system of its own (read by the pointwise conv alone).
  const auto d0 = plan.classes("d0");
  ASSERT_EQ(d0.size(), 8u);
  for (size_t c = 0; c < 8; ++c) {
    EXPECT_GE(d0[c], 0);
    EXPECT_NE(d0[c], r0[c]);
  }
  // The graph's input and output cannot be scaled.
  for (int k : plan.classes("x")) EXPECT_EQ(k, -1);
  for (int k : plan.classes(g.outputs[0])) EXPECT_EQ(k, -1);
}

TEST(SmoothingPlan, AnOpThatDoesNotCommuteWithAScalePoisonsEverythingLinked_n) {
  const graph::Graph g = optimised(blockModel(false));
  const auto plan = quant::SmoothingPlan::analyze(g);
  // The Sigmoid reads the stream's end: the whole stream, back to the stem, stays as it is.
  for (const char* t : {"r0", "r1", "r2", "p", "r3"})
    for (int k : plan.classes(t)) EXPECT_EQ(k, -1) << t;
  // The depthwise outputs are not linked to it and can still be scaled.
  for (int k : plan.classes("d1")) EXPECT_GE(k, 0);
}

// ---- Scaling keeps the FP32 function ---------------------------------------------------------

TEST(Smoothing, RandomFactorsKeepTheNetworksOutputs) {
  graph::Graph g = optimised(blockModel());
  const Tensor x = randomInput(Shape{1, 8, 10, 10}, 7);
  const auto before = run(g, x);
  int classes = 0;
  const auto f = randomFactors(g, 3, &classes);
  EXPECT_GT(classes, 8 * 3);
  auto n = quant::applySmoothing(g, f);
  ASSERT_TRUE(n.ok()) << n.status().toString();
  EXPECT_EQ(*n, static_cast<int>(f.size()));
  const auto after = run(g, x);
  EXPECT_LT(relativeDifference(before, after), 1e-5);
  // And the weights did change (so the comparison means something).
  const auto again = randomFactors(g, 4);
  graph::Graph h = optimised(blockModel());
  ASSERT_TRUE(quant::applySmoothing(h, again).ok());
  bool changed = false;
  for (const auto& node : h.nodes)
    if (node.inputs.size() > 1 && node.inputs[1].find("/smoothed") != std::string::npos)
      changed = true;
  EXPECT_TRUE(changed);
}

TEST(Smoothing, ConcatAlongTheChannelsMapsEachInputsChannels) {
  // a = Conv(x) [4], b = Conv(x) [6], c = Concat(a, b) [10] -> Conv 1x1 -> y.
  TestModel m;
  m.input("x", {1, 3, 6, 6}).output("y");
  m.randomInitializer("wa", {4, 3, 3, 3}, 1);
  m.randomInitializer("wb", {6, 3, 1, 1}, 2);
  m.randomInitializer("wy", {5, 10, 1, 1}, 3);
  auto& ca = m.node("Conv", {"x", "wa"}, {"a"}, "ca");
  TestModel::attrInts(ca, "pads", {1, 1, 1, 1});
  m.node("Conv", {"x", "wb"}, {"b"}, "cb");
  auto& cat = m.node("Concat", {"a", "b"}, {"c"}, "cat");
  TestModel::attr(cat, "axis", 1);
  m.node("Conv", {"c", "wy"}, {"y"}, "cy");
  graph::Graph g = optimised(m.bytes());
  const auto plan = quant::SmoothingPlan::analyze(g);
  const auto a = plan.classes("a"), b = plan.classes("b"), c = plan.classes("c");
  ASSERT_EQ(c.size(), 10u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(a[i], c[i]);
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(b[i], c[4 + i]);
  const Tensor x = randomInput(Shape{1, 3, 6, 6}, 8);
  const auto before = run(g, x);
  ASSERT_TRUE(quant::applySmoothing(g, randomFactors(g, 5)).ok());
  EXPECT_LT(relativeDifference(before, run(g, x)), 1e-5);
}

TEST(Smoothing, BlazeFaceKeepsItsOutputs) {
  const std::string path = test::modelsDir() + "/blazeface/blazeface_back_256.onnx";
  auto bytes = builder::readModelFile(path);
  if (!bytes.ok()) GTEST_SKIP() << path << " is absent: run models/fetch.sh blazeface";
  graph::Graph g = optimised(*bytes);
  const Tensor x = randomInput(Shape{1, 256, 256, 3}, 9);
  const auto before = run(g, x);
  int classes = 0;
  const auto f = randomFactors(g, 6, &classes);
  // The depthwise outputs and the residual streams of every stage.
  EXPECT_GT(classes, 1000);
  ASSERT_TRUE(quant::applySmoothing(g, f).ok());
  EXPECT_LT(relativeDifference(before, run(g, x)), 1e-4);
}

// ---- The factors -----------------------------------------------------------------------------

TEST(SmoothingFactors, EvenOutTheRangesAsTheFormulaSays) {
  // alpha 1: every scaled range equal (the largest a); alpha 0.5: (a w)^0.5, scaled.
  const std::vector<double> a = {100, 1, 10, 0}, w = {1, 1, 4, 2};
  const auto f1 = quant::smoothingFactors(a, w, {1, 1, 1, 1});
  for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(a[k] / f1[k], 100.0, 1e-3) << k;
  EXPECT_EQ(f1[3], 1.f);  // always 0: left alone
  const auto f5 = quant::smoothingFactors(a, w, {0.5, 0.5, 0.5, 0.5});
  const double top = std::sqrt(100.0 * 1), k = 100.0 / top;
  EXPECT_NEAR(a[0] / f5[0], std::sqrt(100.0) * k, 1e-3);
  EXPECT_NEAR(a[1] / f5[1], std::sqrt(1.0) * k, 1e-4);
  EXPECT_NEAR(a[2] / f5[2], std::sqrt(40.0) * k, 1e-3);
  // A class no reader weighs takes the smallest scaled range (its values matter to no one:
  // they must not set the tensor's range).
  const auto fw = quant::smoothingFactors({50, 5, 8}, {1, 4, 0}, {0.5, 0.5, 0.5});
  EXPECT_NEAR(5.0 / fw[1], std::sqrt(20.0) * 50.0 / std::sqrt(50.0), 1e-3);
  EXPECT_NEAR(8.0 / fw[2], 5.0 / fw[1], 1e-3);
  // Nothing measured: all 1.
  for (float v : quant::smoothingFactors({0, 0}, {1, 1}, {0.5, 0.5})) EXPECT_EQ(v, 1.f);
}

// ---- Bad factors ------------------------------------------------------------------------------

TEST(Smoothing, FactorsThatDoNotFitTheGraph_n) {
  const graph::Graph base = optimised(blockModel());
  const auto good = randomFactors(base, 3);
  ASSERT_TRUE(good.count("d0"));
  struct Case {
    const char* what;
    std::function<void(std::map<std::string, std::vector<float>>&)> spoil;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"too few factors", [](auto& f) { f["d0"].pop_back(); }, "channels"},
      {"a zero factor", [](auto& f) { f["d0"][2] = 0.f; }, "finite number > 0"},
      {"a NaN factor", [](auto& f) { f["d0"][1] = std::nanf(""); }, "finite number > 0"},
      {"the graph input", [](auto& f) { f["x"] = std::vector<float>(8, 2.f); }, "cannot scale"},
      {"linked channels that differ", [](auto& f) { f["r1"][3] *= 2.f; },
       "another smoothing factor"},
      {"a linked tensor left out", [](auto& f) { f.erase("r2"); }, "links to it"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto f = good;
    c.spoil(f);
    graph::Graph g = base;
    auto r = quant::applySmoothing(g, f);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.expect), std::string::npos) << r.status().toString();
  }
  // A tensor the graph does not have is a part of the graph elsewhere: skipped.
  graph::Graph g = base;
  auto f = good;
  f["elsewhere"] = {2.f, 3.f};
  EXPECT_TRUE(quant::applySmoothing(g, f).ok());
}

// ---- Calibration with smoothing, the cache and the builders ---------------------------------

/// Calibrates blockModel() with smoothing on random tensors; the cache (or an error).
Expected<CalibrationResult> calibrateBlocks(const TempDir& dir, bool smoothing) {
  const std::string model = dir.write("blocks.onnx", blockModel());
  mkdir(dir.file("data").c_str(), 0755);
  for (int i = 0; i < 4; ++i)
    EXPECT_TRUE(
        writeNpy(dir.file("data/s" + std::to_string(i) + ".npy"), randomInput({1, 8, 10, 10}, i))
            .ok());
  auto src = openCalibrationData(dir.file("data"), CalibrationDataOptions{});
  EXPECT_TRUE(src.ok()) << src.status().toString();
  if (!src.ok()) return src.status();
  CalibrationOptions opt;
  opt.calibrator.method = CalibrationMethod::kMinMax;
  opt.smoothing = smoothing;
  opt.report = true;
  opt.reportBatches = 2;
  return calibrate(model, **src, opt);
}

TEST(CalibrateWithSmoothing, FactorsReachTheCacheAndTheRangesAreTheSmoothedOnes) {
  TempDir dir;
  auto plain = calibrateBlocks(dir, false);
  ASSERT_TRUE(plain.ok()) << plain.status().toString();
  EXPECT_TRUE(plain->cache.smoothing.empty());
  TempDir dir2;
  auto r = calibrateBlocks(dir2, true);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_FALSE(r->cache.smoothing.empty()) << "the depthwise outputs can always be smoothed";
  // Every smoothed tensor's factors fit the graph: applying them to the optimised graph works,
  // and the FP32 outputs stay.
  graph::Graph g = optimised(blockModel());
  const Tensor x = randomInput({1, 8, 10, 10}, 11);
  const auto before = run(g, x);
  ASSERT_TRUE(quant::applySmoothing(g, r->cache.smoothing).ok());
  EXPECT_LT(relativeDifference(before, run(g, x)), 1e-5);
  // Every smoothed tensor that a layer reads has a range, at most the largest one measured
  // without smoothing (the factors never let a range grow beyond it).
  float largest = 0;
  for (const auto& [t, a] : plain->cache.tensorAmax) largest = std::max(largest, a);
  for (const auto& [t, f] : r->cache.smoothing) {
    if (!r->cache.tensorAmax.count(t)) continue;
    EXPECT_GT(r->cache.tensorAmax.at(t), 0.f) << t;
    EXPECT_LE(r->cache.tensorAmax.at(t), largest * 1.0001f) << t;
  }
  // Round trip through the file, factors bit for bit.
  ASSERT_TRUE(r->cache.save(dir2.file("s.calib")).ok());
  auto back = CalibrationCache::load(dir2.file("s.calib"));
  ASSERT_TRUE(back.ok()) << back.status().toString();
  EXPECT_EQ(back->smoothing, r->cache.smoothing);
  // The CPU INT8 build applies them (and says nothing is wrong).
  BuilderConfig bc;
  bc.backend = Backend::kCpu;
  bc.precision = Precision::kInt8;
  bc.calibrationCachePath = dir2.file("s.calib");
  auto e = Builder::buildFromFile(dir2.file("blocks.onnx"), bc);
  EXPECT_TRUE(e.ok()) << e.status().toString();
}

TEST(CalibrateWithSmoothing, DamagedSmoothingLinesAreNamed_n) {
  TempDir dir;
  auto r = calibrateBlocks(dir, true);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  const std::string text = r->cache.toText();
  const auto at = text.find("\nsmooth ");
  ASSERT_NE(at, std::string::npos);
  const auto eol = text.find('\n', at + 1);
  const std::string line = text.substr(at + 1, eol - at - 1);
  struct Case {
    const char* what;
    std::string text;
    const char* expect;
  };
  std::string zero = line;
  zero.replace(zero.find(' ', 7) + 1, zero.find(' ', zero.find(' ', 7) + 1) - zero.find(' ', 7) - 1,
               "0");
  const std::vector<Case> cases = {
      {"truncated in the smoothing lines", text.substr(0, at + 1), "truncated"},
      {"a factor of 0", text.substr(0, at + 1) + zero + text.substr(eol), "finite numbers > 0"},
      {"a count larger than the factors",
       text.substr(0, at + 1) + "smooth 999" + line.substr(line.find(' ', 7)) + text.substr(eol),
       "finite numbers > 0"},
      {"no tensor name",
       text.substr(0, at + 1) + line.substr(0, line.rfind(' ')) + text.substr(eol), ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    auto p = CalibrationCache::parse(c.text, "x.calib");
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), ErrorCode::kCorruptFile) << p.status().toString();
    EXPECT_NE(p.status().message().find(c.expect), std::string::npos) << p.status().toString();
  }
  // Version 1 caches (no smoothing section) still load.
  std::string v1 = text;
  v1.replace(v1.find(" 2\n"), 3, " 1\n");
  const auto s0 = v1.find("# activation smoothing");
  v1.erase(s0, v1.find("end\n") - s0);
  auto old = CalibrationCache::parse(v1, "v1.calib");
  ASSERT_TRUE(old.ok()) << old.status().toString();
  EXPECT_TRUE(old->smoothing.empty());
}

TEST(CalibrateWithSmoothing, ACacheSmoothingWhatTheGraphCannotFailsTheBuild_n) {
  TempDir dir;
  auto r = calibrateBlocks(dir, true);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  CalibrationCache bad = r->cache;
  bad.smoothing["x"] = std::vector<float>(8, 2.f);  // the graph input
  ASSERT_TRUE(bad.save(dir.file("bad.calib")).ok());
  BuilderConfig bc;
  bc.backend = Backend::kCpu;
  bc.precision = Precision::kInt8;
  bc.calibrationCachePath = dir.file("bad.calib");
  auto e = Builder::buildFromFile(dir.file("blocks.onnx"), bc);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("'x'"), std::string::npos) << e.status().toString();
  EXPECT_NE(e.status().message().find("bad.calib"), std::string::npos) << e.status().toString();
}

TEST(CalibrateWithSmoothing, StrengthOutsideZeroToOne_n) {
  TempDir dir;
  const std::string model = dir.write("blocks.onnx", blockModel());
  mkdir(dir.file("data").c_str(), 0755);
  ASSERT_TRUE(writeNpy(dir.file("data/s.npy"), randomInput({1, 8, 10, 10}, 1)).ok());
  for (double alpha : {-0.1, 1.5, std::nan("")}) {
    auto src = openCalibrationData(dir.file("data"), CalibrationDataOptions{});
    ASSERT_TRUE(src.ok());
    CalibrationOptions opt;
    opt.smoothing = true;
    opt.smoothingAlpha = alpha;
    auto r = calibrate(model, **src, opt);
    ASSERT_FALSE(r.ok()) << alpha;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("alpha"), std::string::npos) << r.status().toString();
  }
}

}  // namespace
}  // namespace edgeinfer
