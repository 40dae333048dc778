// INT8 on the CPU backend (issue 6): a build with precision kInt8 and a calibration cache gives
// the INT8 engine's numbers on a machine without a GPU (int8 activations per tensor, int8
// weights per channel, FP32 arithmetic: quant/qdq.h). Checked against the same arithmetic done
// by hand with the reference kernels; the cache's policy and the config's per-layer overrides;
// the engine file round trip; the model's own Q/DQ scales; and every way the build is refused.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "core/npy.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/calibration.h"
#include "edgeinfer/engine.h"
#include "kernels/ref/ref_kernels.h"
#include "log_capture.h"
#include "quant/qdq.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using test::TempDir;
using test::TestModel;

constexpr uint32_t kSeedA = 41, kSeedB = 42;

/// x[1,3,8,8] -> convA (3 -> 4, 3x3) -> Relu -> convB (4 -> 4, 3x3) -> y, unfused (the builder
/// and the calibration run without the fusion passes, so the layers keep these names).
std::string twoConvModel() {
  TestModel m;
  m.input("x", {1, 3, 8, 8}).output("y");
  m.randomInitializer("wa", {4, 3, 3, 3}, kSeedA, -0.5f, 0.5f);
  m.randomInitializer("wb", {4, 4, 3, 3}, kSeedB, -0.5f, 0.5f);
  auto& ca = m.node("Conv", {"x", "wa"}, {"a"}, "convA");
  TestModel::attrInts(ca, "pads", {1, 1, 1, 1});
  m.node("Relu", {"a"}, {"r"}, "relu");
  auto& cb = m.node("Conv", {"r", "wb"}, {"y"}, "convB");
  TestModel::attrInts(cb, "pads", {1, 1, 1, 1});
  return m.bytes();
}

Tensor uniformTensor(const Shape& shape, uint32_t seed, float lo, float hi) {
  Tensor t = Tensor::zeros(DataType::kFloat32, shape);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = u(rng);
  return t;
}

Tensor normalTensor(const Shape& shape, uint32_t seed) {
  Tensor t = Tensor::zeros(DataType::kFloat32, shape);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  for (int64_t k = 0; k < t.numel(); ++k) t.data<float>()[k] = d(rng);
  return t;
}

BuilderConfig unfused() {
  BuilderConfig c;
  c.backend = Backend::kCpu;
  c.passes.fuseConvActivation = false;
  c.passes.fuseGemmActivation = false;
  c.passes.fuseElementwise = false;
  return c;
}

Tensor fakeQuantized(const Tensor& x, float amax) {
  Tensor q = x.clone();
  for (int64_t k = 0; k < q.numel(); ++k)
    q.data<float>()[k] = quant::fakeQuantize(q.data<float>()[k], quant::activationScale(amax));
  return q;
}

Tensor runConv(const Tensor& x, const Tensor& w) {
  graph::Node conv;
  conv.opType = "Conv";
  conv.name = "conv";
  conv.inputs = {"x", "w"};
  conv.outputs = {"y"};
  conv.attrs.set("pads", graph::Attribute::Ints({1, 1, 1, 1}));
  std::vector<Tensor> out;
  EXPECT_TRUE(ref::runNode(conv, {&x, &w}, out).ok());
  return out.empty() ? Tensor() : std::move(out[0]);
}

double maxAbsDiff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t k = 0; k < a.numel(); ++k)
    m = std::max(m, std::fabs(static_cast<double>(a.data<float>()[k]) - b.data<float>()[k]));
  return m;
}

class CpuInt8 : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.write("m.onnx", twoConvModel());
    mkdir(dir_.file("data").c_str(), 0755);
    for (uint32_t i = 0; i < 3; ++i)
      ASSERT_TRUE(writeNpy(dir_.file("data/s" + std::to_string(i) + ".npy"),
                           normalTensor(Shape{1, 3, 8, 8}, 100 + i))
                      .ok());
    auto src = openCalibrationData(dir_.file("data"), CalibrationDataOptions{});
    ASSERT_TRUE(src.ok()) << src.status().toString();
    CalibrationOptions opt;
    opt.calibrator.method = CalibrationMethod::kMinMax;
    opt.builder = unfused();
    auto r = calibrate(model_, **src, opt);
    ASSERT_TRUE(r.ok()) << r.status().toString();
    cache_ = r->cache;
    ASSERT_EQ(cache_.tensorAmax.size(), 2u);  // x and r
    ASSERT_TRUE(cache_.save(dir_.file("m.calib")).ok());
    x_ = normalTensor(Shape{1, 3, 8, 8}, 7);
  }

  Expected<std::unique_ptr<Engine>> build(const std::string& cachePath,
                                          Precision precision = Precision::kInt8) {
    BuilderConfig cfg = unfused();
    cfg.precision = precision;
    cfg.calibrationCachePath = cachePath;
    return Builder::buildFromFile(model_, cfg);
  }

  Tensor run(Engine& e) {
    auto ctx = e.createExecutionContext();
    EXPECT_TRUE(ctx.ok()) << ctx.status().toString();
    if (!ctx.ok()) return Tensor();
    EXPECT_TRUE((*ctx)->setInput("x", x_).ok());
    EXPECT_TRUE((*ctx)->execute().ok());
    auto y = (*ctx)->getOutput("y");
    EXPECT_TRUE(y.ok()) << y.status().toString();
    return y.ok() ? y->clone() : Tensor();
  }

  /// The two layers by hand: each Conv on its input fake-quantized with the cache's range (when
  /// `quantA` / `quantB`) and its weights fake-quantized per output channel.
  Tensor byHand(bool quantA, bool quantB) {
    const Tensor wa = uniformTensor(Shape{4, 3, 3, 3}, kSeedA, -0.5f, 0.5f);
    const Tensor wb = uniformTensor(Shape{4, 4, 3, 3}, kSeedB, -0.5f, 0.5f);
    auto wqa = quant::fakeQuantizeWeights(wa, 0);
    auto wqb = quant::fakeQuantizeWeights(wb, 0);
    EXPECT_TRUE(wqa.ok() && wqb.ok());
    Tensor a =
        runConv(quantA ? fakeQuantized(x_, cache_.tensorAmax.at("x")) : x_, quantA ? *wqa : wa);
    for (int64_t k = 0; k < a.numel(); ++k) a.data<float>()[k] = std::max(a.data<float>()[k], 0.f);
    return runConv(quantB ? fakeQuantized(a, cache_.tensorAmax.at("r")) : a, quantB ? *wqb : wb);
  }

  TempDir dir_;
  std::string model_;
  CalibrationCache cache_;
  Tensor x_;
};

TEST_F(CpuInt8, EngineComputesTheInt8ArithmeticNotFp32) {
  auto e = build(dir_.file("m.calib"));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ((*e)->info().precision, Precision::kInt8);
  EXPECT_EQ((*e)->info().backend, Backend::kCpu);
  const Tensor got = run(**e);
  const Tensor want = byHand(true, true), fp32 = byHand(false, false);
  ASSERT_EQ(got.numel(), want.numel());
  const double quantError = maxAbsDiff(fp32, want);
  EXPECT_LE(maxAbsDiff(got, want), 1e-5) << "not the INT8 arithmetic";
  EXPECT_GT(quantError, 1e-3) << "quantization changed nothing: the test would prove nothing";
  // And the FP32 engine of the same model with the same cache is FP32.
  auto f = build(dir_.file("m.calib"), Precision::kFp32);
  ASSERT_TRUE(f.ok()) << f.status().toString();
  EXPECT_EQ((*f)->info().precision, Precision::kFp32);
  EXPECT_LE(maxAbsDiff(run(**f), fp32), 1e-5);
}

// The GPU's INT8 options (the epilogue's rounding, the whole-engine choice of a timed build)
// change nothing on the CPU, which emulates the bit-exact arithmetic: same outputs, and no
// second engine built or compared.
TEST_F(CpuInt8, GpuInt8OptionsChangeNothingOnTheCpu) {
  auto e = build(dir_.file("m.calib"));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  const Tensor want = run(**e);
  for (const bool bitExact : {false, true})
    for (const bool wholeEngine : {false, true}) {
      test::LogCapture log;
      BuilderConfig cfg = unfused();
      cfg.precision = Precision::kInt8;
      cfg.calibrationCachePath = dir_.file("m.calib");
      cfg.int8BitExact = bitExact;
      cfg.int8WholeEngineChoice = wholeEngine;
      auto o = Builder::buildFromFile(model_, cfg);
      ASSERT_TRUE(o.ok()) << o.status().toString();
      EXPECT_EQ((*o)->info().precision, Precision::kInt8);
      EXPECT_EQ(maxAbsDiff(run(**o), want), 0.0);
      EXPECT_EQ(log.count(Severity::kInfo, "every INT8-capable layer") +
                    log.count(Severity::kInfo, "the per-layer choice") +
                    log.count(Severity::kWarning, "INT8: "),
                0)
          << log.all();
    }
}

TEST_F(CpuInt8, PolicyAndOverridesKeepLayersInFloat) {
  CalibrationCache c = cache_;
  c.layerPrecision["convB"] = Precision::kFp16;  // the cache's policy: convB out of INT8
  ASSERT_TRUE(c.save(dir_.file("policy.calib")).ok());
  auto e = build(dir_.file("policy.calib"));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ((*e)->info().precision, Precision::kInt8);
  EXPECT_LE(maxAbsDiff(run(**e), byHand(true, false)), 1e-5);
  // The config's override wins over the cache: convA out, convB back in.
  BuilderConfig cfg = unfused();
  cfg.precision = Precision::kInt8;
  cfg.calibrationCachePath = dir_.file("policy.calib");
  cfg.layerPrecision["convA"] = Precision::kFp32;
  cfg.layerPrecision["convB"] = Precision::kInt8;
  auto o = Builder::buildFromFile(model_, cfg);
  ASSERT_TRUE(o.ok()) << o.status().toString();
  EXPECT_LE(maxAbsDiff(run(**o), byHand(false, true)), 1e-5);
}

TEST_F(CpuInt8, EngineFileKeepsTheInt8Graph) {
  auto e = build(dir_.file("m.calib"));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  ASSERT_TRUE((*e)->save(dir_.file("m.engine")).ok());
  auto l = Engine::load(dir_.file("m.engine"));
  ASSERT_TRUE(l.ok()) << l.status().toString();
  EXPECT_EQ((*l)->info().precision, Precision::kInt8);
  const Tensor a = run(**e), b = run(**l);
  EXPECT_EQ(maxAbsDiff(a, b), 0.0);
}

TEST_F(CpuInt8, EveryLayerKeptOutIsAnFp32EngineSaidSo) {
  CalibrationCache c = cache_;
  for (auto& [layer, p] : c.layerPrecision) p = Precision::kFp16;
  ASSERT_TRUE(c.save(dir_.file("none.calib")).ok());
  auto e = build(dir_.file("none.calib"));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ((*e)->info().precision, Precision::kFp32) << "never an FP32 engine labelled INT8";
  EXPECT_LE(maxAbsDiff(run(**e), byHand(false, false)), 1e-5);
}

TEST_F(CpuInt8, WithoutACalibrationCache_n) {
  auto e = build("");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(e.status().message().find("calibration cache"), std::string::npos)
      << e.status().toString();
}

TEST_F(CpuInt8, CacheOfAnotherModelOrDamaged_n) {
  CalibrationCache other = cache_;
  other.modelHash = "00000000deadbeef";
  ASSERT_TRUE(other.save(dir_.file("other.calib")).ok());
  auto e = build(dir_.file("other.calib"));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("00000000deadbeef"), std::string::npos);
  const std::string t = cache_.toText();
  dir_.write("cut.calib", t.substr(0, t.size() / 2));
  EXPECT_EQ(build(dir_.file("cut.calib")).status().code(), ErrorCode::kCorruptFile);
  EXPECT_EQ(build(dir_.file("missing.calib")).status().code(), ErrorCode::kNotFound);
}

// A model with its own QuantizeLinear/DequantizeLinear pair (scale 0.05) before one Conv: INT8
// on the CPU needs no cache, runs the pair as ops and says INT8.
TEST(CpuInt8Explicit, ModelScalesNeedNoCache) {
  TempDir dir;
  TestModel m;
  m.input("x", {1, 2, 4, 4}).output("y");
  m.initializer("s", {}, {0.05f});
  m.randomInitializer("w", {2, 2, 1, 1}, 3);
  m.node("QuantizeLinear", {"x", "s"}, {"q"}, "quantize");
  m.node("DequantizeLinear", {"q", "s"}, {"dq"}, "dequantize");
  m.node("Conv", {"dq", "w"}, {"y"}, "conv");
  const std::string path = dir.write("qdq.onnx", m.bytes());
  BuilderConfig cfg;
  cfg.backend = Backend::kCpu;
  cfg.precision = Precision::kInt8;
  auto e = Builder::buildFromFile(path, cfg);
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ((*e)->info().precision, Precision::kInt8);
  auto ctx = (*e)->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  Tensor x = Tensor::zeros(DataType::kFloat32, Shape{1, 2, 4, 4});
  x.data<float>()[0] = 0.123f;  // quantized to 0.10 (2 steps of 0.05, round half to even)
  ASSERT_TRUE((*ctx)->setInput("x", x).ok());
  ASSERT_TRUE((*ctx)->execute().ok());
  auto y = (*ctx)->getOutput("y");
  ASSERT_TRUE(y.ok());
  const Tensor w = uniformTensor(Shape{2, 2, 1, 1}, 3, -1.f, 1.f);
  EXPECT_FLOAT_EQ(y->template data<float>()[0], 0.1f * w.data<float>()[0]);
}

TEST_F(CpuInt8, OverrideForAnUnknownLayer_n) {
  BuilderConfig cfg = unfused();
  cfg.precision = Precision::kInt8;
  cfg.calibrationCachePath = dir_.file("m.calib");
  cfg.layerPrecision["nowhere"] = Precision::kFp32;
  auto e = Builder::buildFromFile(model_, cfg);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("'nowhere'"), std::string::npos) << e.status().toString();
}

// A model that quantizes its first layer's input itself (QuantizeLinear/DequantizeLinear, uint8,
// scale 0.05) and a calibration cache for the rest: the CPU runs the model's pair as ops, leaves
// that layer as it is (no second quantization with the cache's range) and quantizes the second
// layer with the cache.
TEST(CpuInt8Explicit, ModelScalesAndACacheForTheRest) {
  TempDir dir;
  TestModel m;
  m.input("x", {1, 3, 8, 8}).output("y");
  m.initializer("s", {}, {0.05f});
  m.randomInitializer("wa", {4, 3, 3, 3}, kSeedA, -0.5f, 0.5f);
  m.randomInitializer("wb", {4, 4, 3, 3}, kSeedB, -0.5f, 0.5f);
  m.node("QuantizeLinear", {"x", "s"}, {"q"}, "quantize");
  m.node("DequantizeLinear", {"q", "s"}, {"dq"}, "dequantize");
  auto& ca = m.node("Conv", {"dq", "wa"}, {"a"}, "convA");
  TestModel::attrInts(ca, "pads", {1, 1, 1, 1});
  m.node("Relu", {"a"}, {"r"}, "relu");
  auto& cb = m.node("Conv", {"r", "wb"}, {"y"}, "convB");
  TestModel::attrInts(cb, "pads", {1, 1, 1, 1});
  const std::string path = dir.write("qdq2.onnx", m.bytes());
  mkdir(dir.file("d").c_str(), 0755);
  for (uint32_t i = 0; i < 3; ++i)
    ASSERT_TRUE(writeNpy(dir.file("d/s" + std::to_string(i) + ".npy"),
                         uniformTensor(Shape{1, 3, 8, 8}, 200 + i, 0.f, 2.f))
                    .ok());
  auto src = openCalibrationData(dir.file("d"), CalibrationDataOptions{});
  ASSERT_TRUE(src.ok());
  CalibrationOptions opt;
  opt.calibrator.method = CalibrationMethod::kMinMax;
  opt.builder = unfused();
  auto r = calibrate(path, **src, opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_TRUE(r->cache.save(dir.file("c.calib")).ok());
  BuilderConfig cfg = unfused();
  cfg.precision = Precision::kInt8;
  cfg.calibrationCachePath = dir.file("c.calib");
  auto e = Builder::buildFromFile(path, cfg);
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ((*e)->info().precision, Precision::kInt8);
  const Tensor x = uniformTensor(Shape{1, 3, 8, 8}, 7, 0.f, 2.f);
  auto ctx = (*e)->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  ASSERT_TRUE((*ctx)->setInput("x", x).ok());
  ASSERT_TRUE((*ctx)->execute().ok());
  auto y = (*ctx)->getOutput("y");
  ASSERT_TRUE(y.ok());
  // By hand: the model's pair (0.05 steps), convA in float, convB quantized with the cache.
  Tensor a = runConv(fakeQuantized(x, 0.05f * 127.f),
                     uniformTensor(Shape{4, 3, 3, 3}, kSeedA, -0.5f, 0.5f));
  for (int64_t k = 0; k < a.numel(); ++k) a.data<float>()[k] = std::max(a.data<float>()[k], 0.f);
  auto wqb = quant::fakeQuantizeWeights(uniformTensor(Shape{4, 4, 3, 3}, kSeedB, -0.5f, 0.5f), 0);
  ASSERT_TRUE(wqb.ok());
  const Tensor want = runConv(fakeQuantized(a, r->cache.tensorAmax.at("r")), *wqb);
  EXPECT_LE(maxAbsDiff(*y, want), 1e-5);
}

// A model with nothing to quantize: INT8 is refused on the CPU as on the GPU, not built as FP32
// under the INT8 label.
TEST(CpuInt8Explicit, NothingToQuantize_n) {
  TempDir dir;
  TestModel m;
  m.input("x", {1, 3, 4, 4}).output("y");
  m.node("Relu", {"x"}, {"y"});
  const std::string path = dir.write("relu.onnx", m.bytes());
  mkdir(dir.file("d").c_str(), 0755);
  ASSERT_TRUE(writeNpy(dir.file("d/s.npy"), normalTensor(Shape{1, 3, 4, 4}, 1)).ok());
  auto src = openCalibrationData(dir.file("d"), CalibrationDataOptions{});
  ASSERT_TRUE(src.ok());
  auto r = calibrate(path, **src);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  BuilderConfig cfg;
  cfg.backend = Backend::kCpu;
  cfg.precision = Precision::kInt8;
  auto e = Builder::buildFromFile(path, cfg);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("calibration cache"), std::string::npos);
}

}  // namespace
}  // namespace edgeinfer
