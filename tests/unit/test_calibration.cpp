// INT8 calibration (issue 6): the calibrators on distributions whose answer is known, per-channel
// weight scales, Q/DQ fake quantization against the reference op, the calibration cache (round
// trip and every way it can be wrong), the data sources and their bad inputs, calibration and
// the sensitivity report on generated models, the builder's cache check, and BlazeFace on real
// photos.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/npy.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/calibration.h"
#include "edgeinfer/logger.h"
#include "edgeinfer/vision/model_config.h"
#include "edgeinfer/vision/video.h"
#include "edgeinfer/vision/vision_model.h"
#include "kernels/ref/ref_kernels.h"
#include "log_capture.h"
#include "quant/qdq.h"
#include "runtime/cuda_backend.h"
#include "test_model.h"
#include "test_paths.h"

namespace edgeinfer {
namespace {

using test::TempDir;
using test::TestModel;

CalibratorParams method(CalibrationMethod m, double pct = 99.99) {
  CalibratorParams p;
  p.method = m;
  p.percentile = pct;
  return p;
}

double amaxOf(const AbsHistogram& h, CalibrationMethod m, double pct = 99.99) {
  auto a = computeAmax(h, method(m, pct));
  EXPECT_TRUE(a.ok()) << a.status().toString();
  return a.ok() ? *a : -1.0;
}

/// Values of a standard normal distribution (fixed seed) plus `outliers` values of `at`.
std::vector<float> normalWithOutliers(int n, int outliers, float at, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  for (int i = 0; i < outliers; ++i) v[static_cast<size_t>(i) * 997 % v.size()] = i % 2 ? at : -at;
  return v;
}

AbsHistogram histogramOf(const std::vector<float>& v, int bins = AbsHistogram::kDefaultBins) {
  float m = 0;
  for (float x : v) m = std::max(m, std::fabs(x));
  AbsHistogram h(m, bins);
  h.add(v.data(), static_cast<int64_t>(v.size()));
  return h;
}

// ---- Calibrators ---------------------------------------------------------------------------

TEST(Calibrators, MinMaxOfUniformDataIsItsLargestMagnitude) {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-2.5f, 2.5f);
  std::vector<float> v(100000);
  float m = 0;
  for (auto& x : v) {
    x = u(rng);
    m = std::max(m, std::fabs(x));
  }
  const AbsHistogram h = histogramOf(v);
  EXPECT_EQ(amaxOf(h, CalibrationMethod::kMinMax), static_cast<double>(m));
  EXPECT_EQ(h.total(), 100000);
  // Uniform data has no outliers: entropy and MSE keep (nearly) the whole range.
  EXPECT_GT(amaxOf(h, CalibrationMethod::kEntropy), 0.9 * m);
  EXPECT_GT(amaxOf(h, CalibrationMethod::kMse), 0.9 * m);
}

TEST(Calibrators, PercentileOfAKnownHistogram) {
  // 10,000 values 0.0005, 0.0015, ..., 9.9995: the p-th percentile of |x| is p / 10.
  AbsHistogram h(10.0, 2000);
  for (int i = 0; i < 10000; ++i) h.addRepeated(i * 0.001 + 0.0005, 1);
  for (double p : {50.0, 90.0, 99.0, 99.99}) {
    EXPECT_NEAR(amaxOf(h, CalibrationMethod::kPercentile, p), p / 10.0, h.binWidth()) << p;
  }
  EXPECT_NEAR(amaxOf(h, CalibrationMethod::kPercentile, 100.0), h.maxAbs(), 1e-12);
}

TEST(Calibrators, EntropyClipsRareOutliersAndMinMaxDoesNot) {
  const std::vector<float> v = normalWithOutliers(400000, 8, 60.f, 11);
  const AbsHistogram h = histogramOf(v);
  const double minmax = amaxOf(h, CalibrationMethod::kMinMax);
  const double entropy = amaxOf(h, CalibrationMethod::kEntropy);
  EXPECT_EQ(minmax, 60.0);
  // The threshold lands in the body of the normal distribution (|x| up to ~5), not at 60.
  EXPECT_LT(entropy, 10.0);
  EXPECT_GT(entropy, 2.0);
}

TEST(Calibrators, MseLiesBetweenTheBodyAndTheMaximum) {
  const std::vector<float> v = normalWithOutliers(400000, 8, 60.f, 12);
  const AbsHistogram h = histogramOf(v);
  const double median = amaxOf(h, CalibrationMethod::kPercentile, 50.0);
  const double mse = amaxOf(h, CalibrationMethod::kMse);
  EXPECT_GT(mse, median);
  EXPECT_LT(mse, h.maxAbs());
  // MSE is what it minimises: its threshold's error is no larger than min-max's or the
  // 99.99th percentile's, measured on the data itself.
  auto err = [&v](double t) {
    double e = 0;
    const float s = quant::activationScale(t);
    for (float x : v) e += std::pow(static_cast<double>(x) - quant::fakeQuantize(x, s), 2);
    return e;
  };
  EXPECT_LE(err(mse), err(h.maxAbs()));
}

TEST(Calibrators, AllZerosGiveZeroAndNonFiniteValuesAreCountedApart) {
  std::vector<float> z(100, 0.f);
  z[3] = std::nanf("");
  z[4] = INFINITY;
  AbsHistogram h(0.0, 2048);
  h.add(z.data(), static_cast<int64_t>(z.size()));
  EXPECT_EQ(h.nonFinite(), 2);
  EXPECT_EQ(h.total(), 98);
  for (auto m : {CalibrationMethod::kEntropy, CalibrationMethod::kMinMax,
                 CalibrationMethod::kPercentile, CalibrationMethod::kMse})
    EXPECT_EQ(amaxOf(h, m), 0.0);
}

TEST(Calibrators, BadParameters_n) {
  AbsHistogram h(1.0, 2048);
  h.addRepeated(0.5, 10);
  EXPECT_EQ(computeAmax(h, method(CalibrationMethod::kPercentile, 0.0)).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(computeAmax(h, method(CalibrationMethod::kPercentile, 100.5)).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(computeAmax(h, method(CalibrationMethod::kPercentile, NAN)).status().code(),
            ErrorCode::kInvalidArgument);
  AbsHistogram small(1.0, 64);
  small.addRepeated(0.5, 10);
  EXPECT_EQ(computeAmax(small, method(CalibrationMethod::kEntropy)).status().code(),
            ErrorCode::kInvalidArgument);
}

TEST(Calibrators, MethodNames) {
  for (auto m : {CalibrationMethod::kEntropy, CalibrationMethod::kMinMax,
                 CalibrationMethod::kPercentile, CalibrationMethod::kMse}) {
    auto p = parseCalibrationMethod(calibrationMethodName(m));
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(*p, m);
  }
}

TEST(Calibrators, UnknownMethodName_n) {
  auto p = parseCalibrationMethod("kl");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("entropy, minmax, percentile or mse"), std::string::npos);
}

TEST(Calibrators, PerChannelWeightScales) {
  // [2, 3]: rows are output channels on axis 0, columns on axis 1.
  Tensor w = Tensor::zeros(DataType::kFloat32, Shape{2, 3});
  const float vals[] = {1.f, -4.f, 2.f, 0.5f, 0.25f, -0.75f};
  std::copy(vals, vals + 6, w.data<float>());
  auto s0 = perChannelWeightScales(w, 0);
  ASSERT_TRUE(s0.ok());
  EXPECT_FLOAT_EQ((*s0)[0], 4.f / 127.f);
  EXPECT_FLOAT_EQ((*s0)[1], 0.75f / 127.f);
  auto s1 = perChannelWeightScales(w, 1);
  ASSERT_TRUE(s1.ok());
  ASSERT_EQ(s1->size(), 3u);
  EXPECT_FLOAT_EQ((*s1)[0], 1.f / 127.f);
  EXPECT_FLOAT_EQ((*s1)[1], 4.f / 127.f);
  EXPECT_FLOAT_EQ((*s1)[2], 2.f / 127.f);
  // The channel's largest weight is exactly representable after fake quantization.
  auto fq = quant::fakeQuantizeWeights(w, 0);
  ASSERT_TRUE(fq.ok());
  EXPECT_FLOAT_EQ(fq->data<float>()[1], -4.f);
  EXPECT_EQ(perChannelWeightScales(w, 2).status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(perChannelWeightScales(Tensor::zeros(DataType::kInt32, Shape{2}), 0).status().code(),
            ErrorCode::kInvalidArgument);
}

// ---- Models for calibration ----------------------------------------------------------------

/// x[1,3,8,8] -> ConvA(4) -> Relu -> + outlier (one element of 1000) -> ConvB(4) -> y.
/// The activation feeding ConvB has one huge value among small ones.
std::string outlierModel() {
  TestModel m;
  m.input("x", {1, 3, 8, 8}).output("y");
  m.randomInitializer("wa", {4, 3, 3, 3}, 1, -0.5f, 0.5f);
  m.randomInitializer("wb", {4, 4, 3, 3}, 2, -0.5f, 0.5f);
  std::vector<float> o(4 * 8 * 8, 0.f);
  o[77] = 1000.f;
  m.initializer("o", {1, 4, 8, 8}, o);
  auto& ca = m.node("Conv", {"x", "wa"}, {"a"}, "convA");
  TestModel::attrInts(ca, "pads", {1, 1, 1, 1});
  m.node("Relu", {"a"}, {"r"}, "relu");
  m.node("Add", {"r", "o"}, {"b"}, "addOutlier");
  auto& cb = m.node("Conv", {"b", "wb"}, {"y"}, "convB");
  TestModel::attrInts(cb, "pads", {1, 1, 1, 1});
  return m.bytes();
}

/// A residual block: y = Relu(ConvB(x) + ConvA(x)). After the fusion pass ConvB is a FusedConv
/// whose residual Z is ConvA's output "a", read by no other quantizable layer.
std::string residualModel() {
  TestModel m;
  m.input("x", {1, 3, 8, 8}).output("y");
  m.randomInitializer("wa", {4, 3, 1, 1}, 3, -0.5f, 0.5f);
  m.randomInitializer("wb", {4, 3, 3, 3}, 4, -0.5f, 0.5f);
  auto& cb = m.node("Conv", {"x", "wb"}, {"b"}, "convB");  // first: the fusion pass takes it
  TestModel::attrInts(cb, "pads", {1, 1, 1, 1});           // (with "a" as its residual)
  m.node("Conv", {"x", "wa"}, {"a"}, "convA");
  m.node("Add", {"b", "a"}, {"s"}, "add");
  m.node("Relu", {"s"}, {"y"}, "relu");
  return m.bytes();
}

/// A detector in small: x[1,3,8,8] -> ConvA+Relu -> ConvC+Relu -> r, then two heads on r:
/// ConvS -> Transpose -> Reshape -> Sigmoid -> "scores", ConvB -> Reshape -> "boxes". ConvS and
/// ConvB compute the outputs; ConvA and ConvC do not.
std::string headsModel() {
  TestModel m;
  m.input("x", {1, 3, 8, 8}).output("scores").output("boxes");
  m.randomInitializer("wa", {4, 3, 3, 3}, 5, -0.5f, 0.5f);
  m.randomInitializer("wc", {4, 4, 3, 3}, 6, -0.5f, 0.5f);
  m.randomInitializer("ws", {2, 4, 1, 1}, 7, -0.5f, 0.5f);
  m.randomInitializer("wb", {4, 4, 1, 1}, 8, -0.5f, 0.5f);
  m.initializerI64("shapeS", {3}, {1, 128, 1});
  m.initializerI64("shapeB", {3}, {1, 64, 4});
  auto& ca = m.node("Conv", {"x", "wa"}, {"a"}, "convA");
  TestModel::attrInts(ca, "pads", {1, 1, 1, 1});
  m.node("Relu", {"a"}, {"ra"}, "reluA");
  auto& cc = m.node("Conv", {"ra", "wc"}, {"c"}, "convC");
  TestModel::attrInts(cc, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"}, "reluC");
  m.node("Conv", {"r", "ws"}, {"s"}, "convS");
  auto& t = m.node("Transpose", {"s"}, {"st"}, "transposeS");
  TestModel::attrInts(t, "perm", {0, 2, 3, 1});
  m.node("Reshape", {"st", "shapeS"}, {"sr"}, "reshapeS");
  m.node("Sigmoid", {"sr"}, {"scores"}, "sigmoidS");
  m.node("Conv", {"r", "wb"}, {"b"}, "convB");
  m.node("Reshape", {"b", "shapeB"}, {"boxes"}, "reshapeB");
  return m.bytes();
}

/// One convolution, x -> Conv -> y: its only layer computes the output.
std::string oneConvModel() {
  TestModel m;
  m.input("x", {1, 3, 8, 8}).output("y");
  m.randomInitializer("w", {4, 3, 3, 3}, 9, -0.5f, 0.5f);
  auto& c = m.node("Conv", {"x", "w"}, {"y"}, "conv");
  TestModel::attrInts(c, "pads", {1, 1, 1, 1});
  return m.bytes();
}

/// Only elementwise ops: nothing to quantize.
std::string noQuantizableModel() {
  TestModel m;
  m.input("x", {1, 3, 8, 8}).output("y");
  m.node("Relu", {"x"}, {"r"});
  m.node("Sigmoid", {"r"}, {"y"});
  return m.bytes();
}

/// Writes `n` random normal [1,3,8,8] samples as .npy files; returns the largest |x|.
float writeSamples(const TempDir& dir, const std::string& sub, int n, uint32_t seed) {
  mkdir(dir.file(sub).c_str(), 0755);
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.f, 1.f);
  float m = 0;
  for (int i = 0; i < n; ++i) {
    Tensor t = Tensor::zeros(DataType::kFloat32, Shape{1, 3, 8, 8});
    for (int64_t k = 0; k < t.numel(); ++k) {
      t.data<float>()[k] = d(rng);
      m = std::max(m, std::fabs(t.data<float>()[k]));
    }
    EXPECT_TRUE(writeNpy(dir.file(sub + "/s" + std::to_string(i) + ".npy"), t).ok());
  }
  return m;
}

std::unique_ptr<CalibrationSource> tensorSource(const std::string& dir) {
  auto s = openCalibrationData(dir, CalibrationDataOptions{});
  EXPECT_TRUE(s.ok()) << s.status().toString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// ---- Q/DQ ------------------------------------------------------------------------------------

TEST(QuantizeGraph, QdqLayerEqualsTheOpOnFakeQuantizedInputs) {
  TempDir dir;
  // A one-layer model, quantized by calibration, against the Conv kernel run on inputs and
  // weights fake-quantized by hand.
  TestModel m;
  m.input("x", {1, 2, 5, 7}).output("y");
  m.randomInitializer("w", {3, 2, 3, 3}, 5);
  auto& c = m.node("Conv", {"x", "w"}, {"y"}, "conv");
  TestModel::attrInts(c, "pads", {1, 1, 1, 1});
  const std::string one = dir.write("one.onnx", m.bytes());
  mkdir(dir.file("d").c_str(), 0755);
  Tensor x = Tensor::zeros(DataType::kFloat32, Shape{1, 2, 5, 7});
  std::mt19937 rng(9);
  std::normal_distribution<float> d(0.f, 2.f);
  for (int64_t k = 0; k < x.numel(); ++k) x.data<float>()[k] = d(rng);
  ASSERT_TRUE(writeNpy(dir.file("d/x.npy"), x).ok());
  auto src = tensorSource(dir.file("d"));
  ASSERT_TRUE(src);
  CalibrationOptions opt;
  opt.calibrator.method = CalibrationMethod::kMinMax;
  opt.report = true;
  auto r = calibrate(one, *src, opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->report.layers.size(), 1u);
  const float amax = r->cache.tensorAmax.at("x");

  // By hand: fake-quantize x per tensor and w per channel, run the reference Conv.
  Tensor xq = x.clone();
  for (int64_t k = 0; k < xq.numel(); ++k)
    xq.data<float>()[k] = quant::fakeQuantize(xq.data<float>()[k], quant::activationScale(amax));
  std::mt19937 wr(5);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  Tensor w = Tensor::zeros(DataType::kFloat32, Shape{3, 2, 3, 3});
  for (int64_t k = 0; k < w.numel(); ++k) w.data<float>()[k] = u(wr);
  auto wq = quant::fakeQuantizeWeights(w, 0);
  ASSERT_TRUE(wq.ok());
  graph::Node conv;
  conv.opType = "Conv";
  conv.name = "conv";
  conv.inputs = {"x", "w"};
  conv.outputs = {"y"};
  conv.attrs.set("pads", graph::Attribute::Ints({1, 1, 1, 1}));
  std::vector<Tensor> fp, q;
  ASSERT_TRUE(ref::runNode(conv, {&x, &w}, fp).ok());
  ASSERT_TRUE(ref::runNode(conv, {&xq, &*wq}, q).ok());
  double dot = 0, aa = 0, bb = 0, maxAbs = 0;
  for (int64_t k = 0; k < fp[0].numel(); ++k) {
    const double a = fp[0].data<float>()[k], b = q[0].data<float>()[k];
    dot += a * b;
    aa += a * a;
    bb += b * b;
    maxAbs = std::max(maxAbs, std::fabs(a - b));
  }
  const LayerSensitivity& l = r->report.layers[0];
  EXPECT_NEAR(l.layerError.cosine, dot / std::sqrt(aa * bb), 1e-9);
  EXPECT_NEAR(l.layerError.maxAbs, maxAbs, 1e-5);
  // The model is that one layer, so the Q/DQ graph's output error is the same.
  EXPECT_NEAR(l.modelError.cosine, l.layerError.cosine, 1e-9);
  EXPECT_NEAR(l.modelError.maxAbs, l.layerError.maxAbs, 1e-5);
  EXPECT_GT(maxAbs, 0.0) << "quantization changed nothing: the test would prove nothing";
}

// ---- Calibration on generated models ---------------------------------------------------------

TEST(Calibrate, MinMaxRangeOfTheGraphInputIsTheDataMaximum) {
  TempDir dir;
  const std::string model = dir.write("m.onnx", outlierModel());
  const float m = writeSamples(dir, "data", 5, 21);
  auto src = tensorSource(dir.file("data"));
  ASSERT_TRUE(src);
  CalibrationOptions opt;
  opt.calibrator.method = CalibrationMethod::kMinMax;
  std::vector<CalibrationProgress> seen;
  opt.progress = [&seen](const CalibrationProgress& p) { seen.push_back(p); };
  auto r = calibrate(model, *src, opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->samples, 5);
  EXPECT_FLOAT_EQ(r->cache.tensorAmax.at("x"), m);
  // ConvB's input (after the fusion pass: the Add's output) holds the outlier.
  EXPECT_EQ(r->cache.tensorAmax.size(), 2u);
  float other = 0;
  for (const auto& [name, a] : r->cache.tensorAmax)
    if (name != "x") other = a;
  EXPECT_GE(other, 1000.f);
  EXPECT_EQ(r->cache.preprocessHash, "raw");
  std::string bytes = outlierModel();
  EXPECT_EQ(r->cache.modelHash, modelHashOf(bytes.data(), bytes.size()));
  ASSERT_EQ(seen.size(), 5u) << "one progress report per sample (min-max: one pass)";
  EXPECT_EQ(seen.back().done, 5);
  EXPECT_EQ(seen.back().total, 5);
  EXPECT_EQ(r->cache.layerPrecision.size(), 2u);
}

TEST(Calibrate, ResidualInputOfAFusedConvIsCalibratedAndReported) {
  TempDir dir;
  const std::string model = dir.write("r.onnx", residualModel());
  writeSamples(dir, "data", 3, 23);
  auto src = tensorSource(dir.file("data"));
  ASSERT_TRUE(src);
  CalibrationOptions opt;
  opt.calibrator.method = CalibrationMethod::kMinMax;
  opt.report = true;
  auto r = calibrate(model, *src, opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->cache.tensorAmax.count("a"), 1u) << "the residual Z of the fused convB";
  EXPECT_GT(r->cache.tensorAmax.at("a"), 0.f);
  EXPECT_EQ(r->cache.tensorAmax.size(), 2u);  // x (both convolutions' input) and a
  bool reported = false;
  for (const LayerSensitivity& l : r->report.layers)
    if (l.layer == "convB") {
      reported = std::find(l.inputs.begin(), l.inputs.end(), "a") != l.inputs.end();
      EXPECT_LT(l.layerError.cosine, 1.0) << "Z quantized too: the layer's output changes";
    }
  EXPECT_TRUE(reported) << "the report lists Z among the fused layer's quantized inputs";
}

// CalibrationOptions::outputView: the model-output errors compare what the view makes of the
// outputs. A view that sets every value to 0 leaves no error to measure (cosine 1, max |error|
// 0, where the raw outputs have some), and the report names the view.
TEST(Calibrate, OutputViewDecidesWhatTheModelErrorsCompare) {
  TempDir dir;
  const std::string model = dir.write("r.onnx", residualModel());
  writeSamples(dir, "data", 3, 23);
  CalibrationOptions opt;
  opt.calibrator.method = CalibrationMethod::kMinMax;
  opt.report = true;
  auto src = tensorSource(dir.file("data"));
  ASSERT_TRUE(src);
  auto raw = calibrate(model, *src, opt);
  ASSERT_TRUE(raw.ok()) << raw.status().toString();
  EXPECT_LT(raw->report.allInt8.cosine, 1.0);
  EXPECT_GT(raw->report.allInt8.maxAbs, 0.0);
  int calls = 0;
  opt.outputView = [&calls](std::map<std::string, Tensor>& ref, std::map<std::string, Tensor>& q) {
    ++calls;
    for (auto* m : {&ref, &q})
      for (auto& [name, t] : *m)
        for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = 0.f;
    return Status::Ok();
  };
  opt.outputViewName = "as zeros";
  auto src2 = tensorSource(dir.file("data"));
  ASSERT_TRUE(src2);
  auto viewed = calibrate(model, *src2, opt);
  ASSERT_TRUE(viewed.ok()) << viewed.status().toString();
  EXPECT_GT(calls, 0);
  EXPECT_EQ(viewed->report.outputView, "as zeros");
  EXPECT_NE(viewed->report.toText().find("compared as zeros"), std::string::npos);
  EXPECT_EQ(viewed->report.allInt8.cosine, 1.0);
  EXPECT_EQ(viewed->report.allInt8.maxAbs, 0.0);
  for (const LayerSensitivity& l : viewed->report.layers) EXPECT_EQ(l.modelError.maxAbs, 0.0);
  // The FP32 baseline is not changed by the view (it gets copies): the ranges and the layers'
  // own errors are those of the raw report.
  EXPECT_EQ(viewed->cache.tensorAmax, raw->cache.tensorAmax);
  ASSERT_EQ(viewed->report.layers.size(), raw->report.layers.size());
}

TEST(Calibrate, AFailingOutputViewStopsTheReport_n) {
  TempDir dir;
  const std::string model = dir.write("r.onnx", residualModel());
  writeSamples(dir, "data", 2, 24);
  auto src = tensorSource(dir.file("data"));
  ASSERT_TRUE(src);
  CalibrationOptions opt;
  opt.report = true;
  opt.outputView = [](std::map<std::string, Tensor>&, std::map<std::string, Tensor>&) {
    return Status(ErrorCode::kNotFound, "no output named 'scores'");
  };
  opt.outputViewName = "as a decoder reads them";
  auto r = calibrate(model, *src, opt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find("'scores'"), std::string::npos) << r.status().toString();
  EXPECT_NE(r.status().message().find("output view"), std::string::npos) << r.status().toString();
}

// residualModel() and `samples` random tensors (`seed`) in `dir`: a function calibrating them
// with the options given (a new source each call).
std::function<Expected<CalibrationResult>(const CalibrationOptions&)> residualCalibration(
    const TempDir& dir, int samples, uint32_t seed) {
  const std::string model = dir.write("r.onnx", residualModel());
  writeSamples(dir, "data", samples, seed);
  const std::string data = dir.file("data");
  return [model, data](const CalibrationOptions& opt) -> Expected<CalibrationResult> {
    auto src = tensorSource(data);
    if (!src) return Status(ErrorCode::kInternal, "test: no tensor source for " + data);
    return calibrate(model, *src, opt);
  };
}

// Agreement for the tests below: the output elements the quantized model gives within `tol`
// of FP32 (relative to the output's largest magnitude): all of them only where no layer is
// INT8 (the CPU report's FP16 layers compute in FP32).
std::function<Expected<Agreement>(const std::map<std::string, Tensor>&,
                                  const std::map<std::string, Tensor>&)>
elementsWithin(double tol, int* calls = nullptr) {
  return [tol, calls](const std::map<std::string, Tensor>& ref,
                      const std::map<std::string, Tensor>& q) -> Expected<Agreement> {
    if (calls) ++*calls;
    Agreement a;
    for (const auto& [name, r] : ref) {
      const Tensor& t = q.at(name);
      double peak = 0;
      for (int64_t i = 0; i < r.numel(); ++i)
        peak = std::max(peak, std::fabs(static_cast<double>(r.data<float>()[i])));
      for (int64_t i = 0; i < r.numel(); ++i) {
        ++a.total;
        a.matched += std::fabs(r.data<float>()[i] - t.data<float>()[i]) <= tol * peak;
      }
    }
    return a;
  };
}

// A counter that gives `a` whatever the outputs.
std::function<Expected<Agreement>(const std::map<std::string, Tensor>&,
                                  const std::map<std::string, Tensor>&)>
always(Agreement a) {
  return [a](const std::map<std::string, Tensor>&,
             const std::map<std::string, Tensor>&) -> Expected<Agreement> { return a; };
}

TEST(Calibrate, AgreementIsReportedForEveryLayerAndThePolicy) {
  TempDir dir;
  const auto calib = residualCalibration(dir, 3, 31);
  CalibrationOptions opt;
  opt.calibrator.method = CalibrationMethod::kMinMax;
  opt.report = true;
  opt.compareCalibrators = true;  // each calibrator's agreement too (entropy's trap, per model)
  int calls = 0;
  opt.agreement = elementsWithin(0.01, &calls);
  opt.agreementName = "elements within 1 %";
  auto r = calib(opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_GT(calls, 0);
  const SensitivityReport& rep = r->report;
  EXPECT_EQ(rep.agreement, "elements within 1 %");
  EXPECT_EQ(rep.keptForAgreement, 0);
  EXPECT_EQ(rep.allInt8.agreement.total, 3 * 4 * 8 * 8);  // every output element of 3 samples
  EXPECT_LE(rep.allInt8.agreement.matched, rep.allInt8.agreement.total);
  EXPECT_EQ(rep.withPolicy.agreement.total, rep.allInt8.agreement.total);
  EXPECT_EQ(rep.agreementSamples, 3);
  const std::string text = rep.toText();
  EXPECT_NE(text.find("agreement with FP32: elements within 1 %"), std::string::npos) << text;
  EXPECT_NE(text.find("agreement " + std::to_string(rep.allInt8.agreement.matched) + " of 768"),
            std::string::npos)
      << text;
  EXPECT_NE(rep.toJson().find("\"kept_for_agreement\": 0"), std::string::npos);
  ASSERT_EQ(rep.calibrators.size(), 4u);
  for (const CalibratorComparison& c : rep.calibrators)
    EXPECT_EQ(c.modelError.agreement.total, 768) << describeCalibrator(c.calibrator);
  EXPECT_NE(text.find("pick the one with the highest agreement"), std::string::npos) << text;
}

// The target keeps the next-ranked layers out of INT8, a prefix of the ranking, the fewest the
// bisection finds; the policy reaches it, the cache holds it.
TEST(Calibrate, AgreementTargetKeepsTheNextRankedLayersOutOfInt8) {
  TempDir dir;
  const auto calib = residualCalibration(dir, 4, 32);
  for (double target : {1.0, 0.9}) {
    SCOPED_TRACE(target);
    CalibrationOptions opt;
    opt.calibrator.method = CalibrationMethod::kMinMax;
    opt.agreement = elementsWithin(1e-3);
    opt.agreementName = "elements within 0.1 %";
    opt.minAgreement = target;
    auto r = calib(opt);
    ASSERT_TRUE(r.ok()) << r.status().toString();
    const SensitivityReport& rep = r->report;
    ASSERT_TRUE(r->hasReport) << "an agreement target implies the report";
    ASSERT_LT(rep.allInt8.agreement.share(), target) << "the test needs INT8 to miss the target";
    EXPECT_GE(rep.withPolicy.agreement.share(), target);
    EXPECT_GT(rep.keptForAgreement, 0);
    for (size_t i = 0; i < rep.layers.size(); ++i)
      EXPECT_EQ(rep.layers[i].policy,
                static_cast<int>(i) < rep.keptForAgreement ? Precision::kFp16 : Precision::kInt8)
          << rep.layers[i].layer;
    EXPECT_EQ(r->cache.excludedLayers().size(), static_cast<size_t>(rep.keptForAgreement));
    if (target == 1.0) {  // only FP32 everywhere gives every element within 0.1 %
      EXPECT_EQ(rep.keptForAgreement, static_cast<int>(rep.layers.size()));
    }
    EXPECT_NE(rep.toText().find("layer(s) kept out of INT8 for it"), std::string::npos);
    EXPECT_EQ(rep.agreementJudge, "CPU simulation");
  }
}

TEST(Calibrate, AgreementTargetOnTopOfTheCosineThreshold) {
  TempDir dir;
  const auto calib = residualCalibration(dir, 3, 33);
  CalibrationOptions opt;
  opt.calibrator.method = CalibrationMethod::kMinMax;
  opt.excludeWorst = 1;
  opt.agreement = elementsWithin(1e-3);
  opt.minAgreement = 1.0;
  auto r = calib(opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->report.keptForAgreement, static_cast<int>(r->report.layers.size()) - 1);
  EXPECT_EQ(r->cache.excludedLayers().size(), r->report.layers.size());
}

TEST(Calibrate, AgreementTargetAlreadyMetKeepsThePolicy) {
  TempDir dir;
  const auto calib = residualCalibration(dir, 3, 34);
  CalibrationOptions opt;
  opt.calibrator.method = CalibrationMethod::kMinMax;
  opt.agreement = elementsWithin(10.0);  // everything agrees
  opt.minAgreement = 0.98;
  auto r = calib(opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->report.keptForAgreement, 0);
  EXPECT_TRUE(r->cache.excludedLayers().empty());
  EXPECT_EQ(r->report.withPolicy.agreement.share(), 1.0);
}

// Nothing to compare (no results in FP32 or INT8): the target holds trivially, with a warning.
TEST(Calibrate, AgreementWithNoResultsHasNothingToJudge_n) {
  TempDir dir;
  const auto calib = residualCalibration(dir, 2, 35);
  CalibrationOptions opt;
  opt.agreement = always(Agreement{});
  opt.minAgreement = 0.98;
  test::LogCapture log;
  auto r = calib(opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->report.keptForAgreement, 0);
  EXPECT_EQ(log.count(Severity::kWarning, "nothing to judge"), 1) << log.all();
}

TEST(Calibrate, UnreachableAgreementTargetKeepsEveryLayerOutAndWarns_n) {
  TempDir dir;
  const auto calib = residualCalibration(dir, 2, 36);
  CalibrationOptions opt;
  opt.agreement = always(Agreement{0, 5});
  opt.minAgreement = 0.5;
  test::LogCapture log;
  auto r = calib(opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->report.keptForAgreement, static_cast<int>(r->report.layers.size()));
  EXPECT_EQ(r->cache.excludedLayers().size(), r->report.layers.size());
  EXPECT_EQ(log.count(Severity::kWarning, "not reached"), 1) << log.all();
  // Every layer already out of INT8 by the threshold option: still said.
  opt.excludeWorst = 100;
  test::LogCapture log2;
  auto r2 = calib(opt);
  ASSERT_TRUE(r2.ok()) << r2.status().toString();
  EXPECT_EQ(r2->report.keptForAgreement, 0);
  EXPECT_EQ(log2.count(Severity::kWarning, "not reached"), 1) << log2.all();
}

TEST(Calibrate, BadAgreementOptions_n) {
  TempDir dir;
  const auto calib = residualCalibration(dir, 2, 37);
  const auto run = [&](const CalibrationOptions& opt) { return calib(opt).status(); };
  CalibrationOptions noCounter;
  noCounter.minAgreement = 0.98;  // but nothing to count agreement with
  Status s = run(noCounter);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("a way to count agreement"), std::string::npos) << s.toString();
  for (double bad : {-0.1, 1.5, std::nan("")}) {
    CalibrationOptions o;
    o.agreement = elementsWithin(0.1);
    o.minAgreement = bad;
    s = run(o);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find("agreement target"), std::string::npos) << s.toString();
  }
  CalibrationOptions noBatches;
  noBatches.agreementBatches = 0;
  s = run(noBatches);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  // A failing counter stops the report, saying where.
  CalibrationOptions failing;
  failing.report = true;
  failing.agreement = [](const std::map<std::string, Tensor>&,
                         const std::map<std::string, Tensor>&) -> Expected<Agreement> {
    return Status(ErrorCode::kNotFound, "no output named 'scores'");
  };
  failing.agreementName = "detections";
  s = run(failing);
  EXPECT_EQ(s.code(), ErrorCode::kNotFound);
  EXPECT_NE(s.message().find("the report's agreement (detections)"), std::string::npos)
      << s.toString();
}

/// A cache written before residual inputs were calibrated (no range for Z) still builds.
TEST(Calibrate, CacheWithoutTheResidualRangeStillBuilds) {
  TempDir dir;
  const std::string model = dir.write("r.onnx", residualModel());
  writeSamples(dir, "data", 2, 29);
  auto src = tensorSource(dir.file("data"));
  ASSERT_TRUE(src);
  CalibrationOptions opt;
  opt.calibrator.method = CalibrationMethod::kMinMax;
  auto r = calibrate(model, *src, opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  CalibrationCache old = r->cache;
  ASSERT_EQ(old.tensorAmax.erase("a"), 1u);
  ASSERT_TRUE(old.save(dir.file("old.calib")).ok());
  BuilderConfig cfg;
  cfg.backend = Backend::kCpu;
  cfg.calibrationCachePath = dir.file("old.calib");
  auto e = Builder::buildFromFile(model, cfg);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  // Without x's range (a required input), the same cache is refused, naming it.
  CalibrationCache noX = r->cache;
  noX.tensorAmax.erase("x");
  ASSERT_TRUE(noX.save(dir.file("nox.calib")).ok());
  cfg.calibrationCachePath = dir.file("nox.calib");
  auto bad = Builder::buildFromFile(model, cfg);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'x'"), std::string::npos) << bad.status().toString();
}

// ---- Passes 1 and 2 on the GPU (CalibrationOptions::backend) -------------------------------

/// x[N,3,8,8] -> ConvA(8) -> Relu (r) -> ConvB(8) + r -> Relu -> GlobalAveragePool -> Flatten
/// (f) -> Gemm(4) -> y: a graph input, a fused residual block's input and residual, and a
/// Gemm's input are calibrated. `batch` < 0: a dynamic batch.
std::string gpuCalibrationModel(int64_t batch) {
  TestModel m;
  m.input("x", {batch, 3, 8, 8}).output("y");
  m.randomInitializer("wa", {8, 3, 3, 3}, 31, -0.6f, 0.6f);
  m.randomInitializer("ba", {8}, 32, -0.2f, 0.4f);
  m.randomInitializer("wb", {8, 8, 3, 3}, 33, -0.3f, 0.3f);
  m.randomInitializer("wg", {4, 8}, 34);
  auto& ca = m.node("Conv", {"x", "wa", "ba"}, {"a"}, "convA");
  TestModel::attrInts(ca, "pads", {1, 1, 1, 1});
  m.node("Relu", {"a"}, {"r"}, "reluA");
  auto& cb = m.node("Conv", {"r", "wb"}, {"b"}, "convB");
  TestModel::attrInts(cb, "pads", {1, 1, 1, 1});
  m.node("Add", {"b", "r"}, {"s"}, "add");
  m.node("Relu", {"s"}, {"t"}, "reluB");
  m.node("GlobalAveragePool", {"t"}, {"p"}, "pool");
  m.node("Flatten", {"p"}, {"f"}, "flatten");
  auto& g = m.node("Gemm", {"f", "wg"}, {"y"}, "fc");
  TestModel::attr(g, "transB", 1);
  return m.bytes();
}

Expected<CalibrationResult> calibrateOn(Backend backend, const std::string& model,
                                        const std::string& data, CalibrationMethod method,
                                        int64_t batch = 0) {
  auto src = tensorSource(data);
  if (!src) return Status(ErrorCode::kInternal, "no calibration data");
  CalibrationOptions opt;
  opt.calibrator.method = method;
  opt.backend = backend;
  opt.batchSize = batch;
  return calibrate(model, *src, opt);
}

/// The ranges of the GPU's FP32 passes against the CPU reference's: min-max within float
/// rounding (the kernels sum in another order), the histogram calibrators within a few of
/// the 2048 bins (their bins span [0, amax], which moves with it).
TEST(CalibrateOnTheGpu, RangesAndHistogramsAreTheCpus) {
  std::string why;
  if (!runtime::cudaBackendUsable(0, &why)) GTEST_SKIP() << why;
  TempDir dir;
  writeSamples(dir, "data", 6, 41);
  for (const int64_t batch : {int64_t{1}, int64_t{-1}}) {
    const std::string model =
        dir.write("m" + std::to_string(batch) + ".onnx", gpuCalibrationModel(batch));
    const int64_t runBatch = batch < 0 ? 2 : 0;  // the dynamic one: batches of 2 on both
    std::map<std::string, float> amax;           // min-max's, for the histograms' bin width
    for (CalibrationMethod method : {CalibrationMethod::kMinMax, CalibrationMethod::kEntropy,
                                     CalibrationMethod::kPercentile, CalibrationMethod::kMse}) {
      SCOPED_TRACE(std::string(calibrationMethodName(method)) + ", model batch " +
                   std::to_string(batch));
      auto cpu = calibrateOn(Backend::kCpu, model, dir.file("data"), method, runBatch);
      auto gpu = calibrateOn(Backend::kCuda, model, dir.file("data"), method, runBatch);
      ASSERT_TRUE(cpu.ok()) << cpu.status().toString();
      ASSERT_TRUE(gpu.ok()) << gpu.status().toString();
      EXPECT_EQ(gpu->samples, 6);
      EXPECT_EQ(gpu->cache.images, cpu->cache.images);
      EXPECT_EQ(gpu->cache.layerPrecision, cpu->cache.layerPrecision);
      ASSERT_EQ(gpu->cache.tensorAmax.size(), cpu->cache.tensorAmax.size());
      ASSERT_EQ(cpu->cache.tensorAmax.size(), 3u) << "x, r (convB's input and residual), f";
      for (const auto& [name, want] : cpu->cache.tensorAmax) {
        ASSERT_EQ(gpu->cache.tensorAmax.count(name), 1u) << name;
        const float got = gpu->cache.tensorAmax.at(name);
        EXPECT_GT(want, 0.f) << name;
        if (method == CalibrationMethod::kMinMax) amax[name] = want;
        const double tol =
            method == CalibrationMethod::kMinMax ? 1e-5 * want : 4.0 * amax.at(name) / 2048;
        EXPECT_NEAR(got, want, tol) << name;
      }
    }
  }
}

TEST(CalibrateOnTheGpu, DynamicDimsOtherThanTheBatchNeedAShape_n) {
  std::string why;
  if (!runtime::cudaBackendUsable(0, &why)) GTEST_SKIP() << why;
  TempDir dir;
  TestModel m;
  m.input("x", {-1, 3, -1, -1}).output("y");
  m.randomInitializer("w", {4, 3, 3, 3}, 5);
  m.node("Conv", {"x", "w"}, {"y"}, "conv");
  const std::string model = dir.write("d.onnx", m.bytes());
  writeSamples(dir, "data", 2, 43);
  auto r = calibrateOn(Backend::kCuda, model, dir.file("data"), CalibrationMethod::kMinMax);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("input 'x'"), std::string::npos) << r.status().toString();
  EXPECT_NE(r.status().message().find("--shapes"), std::string::npos) << r.status().toString();
  // On the CPU the same model calibrates (its shapes come from the data), and auto falls back
  // to it with the same ranges.
  auto cpu = calibrateOn(Backend::kCpu, model, dir.file("data"), CalibrationMethod::kMinMax);
  ASSERT_TRUE(cpu.ok()) << cpu.status().toString();
  auto aut = calibrateOn(Backend::kAuto, model, dir.file("data"), CalibrationMethod::kMinMax);
  ASSERT_TRUE(aut.ok()) << aut.status().toString();
  EXPECT_EQ(aut->cache.tensorAmax, cpu->cache.tensorAmax);
}

/// The agreement target judged on the GPU engine each policy gives (agreementBackend kCuda).
/// Counting only outputs exactly FP32's: the CPU's simulation reaches every one with every layer
/// out of INT8 (FP32 there), the GPU engine never (its FP16 layers round), so the target is
/// reported as not reached: the judge ran the GPU engines. A target within reach holds for them.
TEST(CalibrateOnTheGpu, AgreementTargetJudgedOnTheGpuEngine) {
  std::string why;
  if (!runtime::cudaBackendUsable(0, &why)) GTEST_SKIP() << why;
  TempDir dir;
  const std::string model = dir.write("m.onnx", gpuCalibrationModel(1));
  writeSamples(dir, "data", 4, 48);
  const auto run = [&](Backend judge, double tol, double target) {
    auto src = tensorSource(dir.file("data"));
    CalibrationOptions opt;
    opt.calibrator.method = CalibrationMethod::kMinMax;
    opt.agreement = elementsWithin(tol);
    opt.agreementName = "outputs within " + std::to_string(tol);
    opt.minAgreement = target;
    opt.agreementBackend = judge;
    return src ? calibrate(model, *src, opt)
               : Expected<CalibrationResult>(Status(ErrorCode::kInternal, "no data"));
  };
  {
    test::LogCapture log;
    auto cpu = run(Backend::kCpu, 0.0, 1.0);
    ASSERT_TRUE(cpu.ok()) << cpu.status().toString();
    EXPECT_EQ(cpu->report.agreementJudge, "CPU simulation");
    EXPECT_EQ(cpu->report.withPolicy.agreement.share(), 1.0);
    EXPECT_EQ(log.count(Severity::kWarning, "not reached"), 0) << log.all();
  }
  {
    test::LogCapture log;
    auto gpu = run(Backend::kCuda, 0.0, 1.0);
    ASSERT_TRUE(gpu.ok()) << gpu.status().toString();
    EXPECT_EQ(gpu->report.agreementJudge, "GPU engine");
    EXPECT_GT(gpu->report.withPolicy.agreement.total, 0);
    EXPECT_LT(gpu->report.withPolicy.agreement.share(), 1.0) << "the GPU's FP16 layers round";
    EXPECT_EQ(log.count(Severity::kWarning, "not reached"), 1) << log.all();
    EXPECT_EQ(gpu->cache.excludedLayers().size(), gpu->cache.layerPrecision.size());
    EXPECT_NE(gpu->report.toText().find("the policy judged on the GPU engine"), std::string::npos);
    EXPECT_NE(gpu->report.toJson().find("\"agreement_judge\": \"GPU engine\""), std::string::npos);
  }
  auto within = run(Backend::kCuda, 0.05, 0.9);
  ASSERT_TRUE(within.ok()) << within.status().toString();
  EXPECT_GE(within->report.withPolicy.agreement.share(), 0.9);
  std::cout << "GPU-judged policy: " << within->cache.excludedLayers().size() << " of "
            << within->cache.layerPrecision.size() << " layers out of INT8, agreement "
            << within->report.withPolicy.agreement.matched << " of "
            << within->report.withPolicy.agreement.total << "\n";
}

/// Without a GPU: the agreement target judged on the GPU engine is an error that says so
/// (before any pass runs); kAuto judges on the CPU's simulation.
TEST(Calibrate, AgreementJudgedOnTheGpuWithoutAGpu_n) {
  std::string why;
  if (runtime::cudaBackendUsable(0, &why)) GTEST_SKIP() << "a GPU is usable here";
  TempDir dir;
  const auto calib = residualCalibration(dir, 2, 49);
  CalibrationOptions opt;
  opt.agreement = elementsWithin(0.05);
  opt.minAgreement = 0.9;
  opt.agreementBackend = Backend::kCuda;
  auto r = calib(opt);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(r.status().message().find("judged on the GPU engine"), std::string::npos)
      << r.status().toString();
  EXPECT_NE(r.status().message().find("--agreement-backend cpu"), std::string::npos);
  opt.agreementBackend = Backend::kAuto;
  auto a = calib(opt);
  ASSERT_TRUE(a.ok()) << a.status().toString();
  EXPECT_EQ(a->report.agreementJudge, "CPU simulation");
  // Without a target nothing is judged: a GPU judge asked for is no error then.
  opt.minAgreement = 0;
  opt.agreementBackend = Backend::kCuda;
  EXPECT_TRUE(calib(opt).ok());
}

/// Without a GPU: kCuda is an error that says so; kAuto calibrates on the CPU, as kCpu does.
TEST(Calibrate, OnTheGpuWithoutAGpu_n) {
  std::string why;
  if (runtime::cudaBackendUsable(0, &why)) GTEST_SKIP() << "a GPU is usable here";
  TempDir dir;
  const std::string model = dir.write("m.onnx", gpuCalibrationModel(1));
  writeSamples(dir, "data", 2, 47);
  auto gpu = calibrateOn(Backend::kCuda, model, dir.file("data"), CalibrationMethod::kMinMax);
  ASSERT_FALSE(gpu.ok());
  EXPECT_EQ(gpu.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(gpu.status().message().find("no GPU is usable"), std::string::npos)
      << gpu.status().toString();
  auto cpu = calibrateOn(Backend::kCpu, model, dir.file("data"), CalibrationMethod::kMinMax);
  auto aut = calibrateOn(Backend::kAuto, model, dir.file("data"), CalibrationMethod::kMinMax);
  ASSERT_TRUE(cpu.ok()) << cpu.status().toString();
  ASSERT_TRUE(aut.ok()) << aut.status().toString();
  EXPECT_EQ(aut->cache.tensorAmax, cpu->cache.tensorAmax);
}

TEST(Calibrate, EntropyClipsTheOutlierTensorBelowMinMax) {
  TempDir dir;
  const std::string model = dir.write("m.onnx", outlierModel());
  writeSamples(dir, "data", 6, 22);
  CalibrationOptions opt;
  auto mm = [&] {
    auto s = tensorSource(dir.file("data"));
    opt.calibrator.method = CalibrationMethod::kMinMax;
    return calibrate(model, *s, opt);
  }();
  auto ent = [&] {
    auto s = tensorSource(dir.file("data"));
    opt.calibrator.method = CalibrationMethod::kEntropy;
    return calibrate(model, *s, opt);
  }();
  ASSERT_TRUE(mm.ok() && ent.ok());
  for (const auto& [name, a] : mm->cache.tensorAmax) {
    EXPECT_LE(ent->cache.tensorAmax.at(name), a) << name;
    if (name != "x") {
      EXPECT_LT(ent->cache.tensorAmax.at(name), 0.2f * a) << name;  // candidates start at 1/16
    }
  }
}

TEST(Calibrate, ReportRanksTheOutlierLayerWorstAndExcludesIt) {
  TempDir dir;
  const std::string model = dir.write("m.onnx", outlierModel());
  writeSamples(dir, "data", 4, 23);
  auto src = tensorSource(dir.file("data"));
  ASSERT_TRUE(src);
  CalibrationOptions opt;
  opt.calibrator.method = CalibrationMethod::kMinMax;  // keeps the outlier: the worst case
  opt.excludeWorst = 1;
  opt.compareCalibrators = true;
  auto r = calibrate(model, *src, opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_TRUE(r->hasReport);
  const SensitivityReport& rep = r->report;
  ASSERT_EQ(rep.layers.size(), 2u);
  EXPECT_EQ(rep.layers[0].layer, "convB");
  EXPECT_LT(rep.layers[0].modelError.cosine, rep.layers[1].modelError.cosine);
  EXPECT_LT(rep.layers[0].layerError.cosine, rep.layers[1].layerError.cosine);
  EXPECT_EQ(rep.layers[0].policy, Precision::kFp16);
  EXPECT_EQ(rep.layers[1].policy, Precision::kInt8);
  EXPECT_EQ(r->cache.layerPrecision.at("convB"), Precision::kFp16);
  EXPECT_EQ(r->cache.excludedLayers(), std::vector<std::string>{"convB"});
  // Keeping the worst layer out of INT8 helps; every layer in INT8 is no better than the
  // worst layer alone.
  EXPECT_GT(rep.withPolicy.cosine, rep.allInt8.cosine);
  EXPECT_LE(rep.allInt8.cosine, rep.layers[0].modelError.cosine + 1e-9);
  EXPECT_EQ(rep.samples, 4);
  // Compared calibrators: all four, from the same histograms; min-max's is the run above.
  ASSERT_EQ(rep.calibrators.size(), 4u);
  std::set<CalibrationMethod> methods;
  for (const auto& c : rep.calibrators) {
    methods.insert(c.calibrator.method);
    if (c.calibrator.method == CalibrationMethod::kMinMax) {
      EXPECT_EQ(c.modelError.cosine, rep.allInt8.cosine);
    }
  }
  EXPECT_EQ(methods.size(), 4u);
  const std::string text = rep.toText();
  EXPECT_NE(text.find("convB"), std::string::npos);
  EXPECT_NE(text.find("calibrators compared"), std::string::npos);
  EXPECT_NE(rep.toJson().find("\"policy\": \"fp16\""), std::string::npos);
}

TEST(Calibrate, ExcludeThresholdKeepsLayersBelowTheCosine) {
  TempDir dir;
  const std::string model = dir.write("m.onnx", outlierModel());
  writeSamples(dir, "data", 3, 24);
  auto src = tensorSource(dir.file("data"));
  CalibrationOptions opt;
  opt.calibrator.method = CalibrationMethod::kMinMax;
  opt.excludeBelowCosine = 1.0;  // every layer that changes the output at all
  auto r = calibrate(model, *src, opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  for (const auto& l : r->report.layers)
    EXPECT_EQ(l.policy, l.modelError.cosine < 1.0 ? Precision::kFp16 : Precision::kInt8);
  EXPECT_EQ(r->report.withPolicy.cosine, 1.0) << "nothing in INT8: FP32 exactly";
}

// Min-max calibration options, the output layers kept out of INT8 (the tests below).
CalibrationOptions keepingOutputLayers() {
  CalibrationOptions opt;
  opt.calibrator.method = CalibrationMethod::kMinMax;
  opt.outputLayers = CalibrationOptions::OutputLayers::kKeep;
  return opt;
}

// `bytes` written into `dir` as m.onnx with `n` random samples in `dir`/data: the model's path.
std::string modelWithSamples(const TempDir& dir, const std::string& bytes, int n, uint32_t seed) {
  writeSamples(dir, "data", n, seed);
  return dir.write("m.onnx", bytes);
}

// The heads (the layers computing the outputs, found back through Sigmoid, Reshape,
// Transpose) kept out of INT8, with and without the report; the body stays INT8. Off by default.
TEST(Calibrate, OutputLayersAreKeptOutOfInt8WhenAsked) {
  TempDir dir;
  const std::string model = modelWithSamples(dir, headsModel(), 3, 31);
  for (const bool report : {false, true}) {
    SCOPED_TRACE(report ? "with the report" : "without the report");
    auto src = tensorSource(dir.file("data"));
    ASSERT_TRUE(src);
    CalibrationOptions opt = keepingOutputLayers();
    opt.report = report;
    test::LogCapture logs;
    auto r = calibrate(model, *src, opt);
    ASSERT_TRUE(r.ok()) << r.status().toString();
    ASSERT_EQ(r->cache.layerPrecision.size(), 4u);
    for (const auto& [name, p] : r->cache.layerPrecision) {
      const bool head =
          name.find("convS") != std::string::npos || name.find("convB") != std::string::npos;
      EXPECT_EQ(p, head ? Precision::kFp16 : Precision::kInt8) << name;
    }
    EXPECT_EQ(r->cache.excludedLayers().size(), 2u);
    EXPECT_EQ(logs.count(Severity::kInfo, "2 layer(s) computing the model's outputs"), 1)
        << logs.all();
    EXPECT_EQ(logs.count(Severity::kWarning, "0 everywhere"), 0) << logs.all();
    EXPECT_EQ(r->hasReport, report);
    if (report) {
      EXPECT_EQ(r->report.keptOutputLayers, 2);
      for (const LayerSensitivity& l : r->report.layers) {
        const bool head = l.layer.find("convS") != std::string::npos ||
                          l.layer.find("convB") != std::string::npos;
        EXPECT_EQ(l.outputLayer, head) << l.layer;
        EXPECT_EQ(l.policy, head ? Precision::kFp16 : Precision::kInt8) << l.layer;
      }
      EXPECT_NE(r->report.toText().find("2 layer(s) computing the model's outputs"),
                std::string::npos);
      EXPECT_NE(r->report.toJson().find("\"output_layer\": true"), std::string::npos);
      EXPECT_GT(r->report.withPolicy.cosine, r->report.allInt8.cosine);
    }
  }
  // kAuto (the default, no decoder known) and kInt8: every layer INT8.
  for (const auto p :
       {CalibrationOptions::OutputLayers::kAuto, CalibrationOptions::OutputLayers::kInt8}) {
    auto src = tensorSource(dir.file("data"));
    CalibrationOptions opt = keepingOutputLayers();
    opt.outputLayers = p;
    auto r = calibrate(model, *src, opt);
    ASSERT_TRUE(r.ok()) << r.status().toString();
    EXPECT_TRUE(r->cache.excludedLayers().empty());
  }
}

// The agreement target's bisection starts from the heads kept out: they are not counted among
// the layers it keeps.
TEST(Calibrate, AgreementTargetStartsFromTheOutputLayersKeptOut) {
  TempDir dir;
  const std::string model = modelWithSamples(dir, headsModel(), 2, 32);
  auto src = tensorSource(dir.file("data"));
  CalibrationOptions opt = keepingOutputLayers();
  opt.agreement = [](const std::map<std::string, Tensor>&,
                     const std::map<std::string, Tensor>&) -> Expected<Agreement> {
    return Agreement{1, 1};
  };
  opt.agreementName = "always";
  opt.minAgreement = 0.5;
  auto r = calibrate(model, *src, opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->report.keptOutputLayers, 2);
  EXPECT_EQ(r->report.keptForAgreement, 0);
  EXPECT_EQ(r->cache.excludedLayers().size(), 2u);
}

// A model whose output is 0 on the report's data (a ReLU after a bias far below the values:
// a detector that finds nothing): the report says its ranking is empty of meaning.
TEST(Calibrate, ReportWarnsOfAnOutputThatIsZeroEverywhere_n) {
  TempDir dir;
  TestModel m;
  m.input("x", {1, 3, 8, 8}).output("y");
  m.randomInitializer("wa", {4, 3, 3, 3}, 10, -0.5f, 0.5f);
  m.randomInitializer("wb", {4, 4, 1, 1}, 11, -0.5f, 0.5f);
  m.initializer("bb", {4}, {-1000.f, -1000.f, -1000.f, -1000.f});
  auto& ca = m.node("Conv", {"x", "wa"}, {"a"}, "convA");
  TestModel::attrInts(ca, "pads", {1, 1, 1, 1});
  m.node("Relu", {"a"}, {"r"}, "relu");
  m.node("Conv", {"r", "wb", "bb"}, {"b"}, "convB");
  m.node("Relu", {"b"}, {"y"}, "reluOut");
  const std::string model = modelWithSamples(dir, m.bytes(), 2, 34);
  auto src = tensorSource(dir.file("data"));
  CalibrationOptions opt = keepingOutputLayers();
  opt.outputLayers = CalibrationOptions::OutputLayers::kInt8;
  opt.report = true;
  test::LogCapture logs;
  auto r = calibrate(model, *src, opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(logs.count(Severity::kWarning, "output 'y' is 0 everywhere in FP32"), 1) << logs.all();
}

// A model whose every quantizable layer computes an output: kept out, nothing is left in INT8;
// the calibration says so, and an INT8 build of it is recorded as what it is, not INT8.
TEST(Calibrate, OutputLayersKeptLeavingNoInt8LayerWarns_n) {
  TempDir dir;
  const std::string model = modelWithSamples(dir, oneConvModel(), 2, 33);
  auto src = tensorSource(dir.file("data"));
  const CalibrationOptions opt = keepingOutputLayers();
  test::LogCapture logs;
  auto r = calibrate(model, *src, opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(logs.count(Severity::kWarning, "no layer is left in INT8"), 1) << logs.all();
  EXPECT_EQ(r->cache.excludedLayers().size(), r->cache.layerPrecision.size());
  ASSERT_TRUE(r->cache.save(dir.file("c.calib")).ok());
  BuilderConfig cfg;
  cfg.backend = Backend::kCpu;
  cfg.precision = Precision::kInt8;
  cfg.calibrationCachePath = dir.file("c.calib");
  auto e = Builder::buildFromFile(model, cfg);
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_NE((*e)->info().precision, Precision::kInt8);
  EXPECT_EQ(logs.count(Severity::kWarning, "quantizable layers out of INT8"), 1) << logs.all();
}

// The vision helper: detectors keep their heads out of INT8, classifiers and segmentations do
// not; a choice already made is left as it is.
TEST(Calibrate, OutputLayerPolicyFollowsTheDecoder) {
  using OutputLayers = CalibrationOptions::OutputLayers;
  using vision::DecoderType;
  for (const auto& [decoder, want] : std::vector<std::pair<DecoderType, OutputLayers>>{
           {DecoderType::kSsd, OutputLayers::kKeep},
           {DecoderType::kYoloV5, OutputLayers::kKeep},
           {DecoderType::kYoloV8, OutputLayers::kKeep},
           {DecoderType::kClassification, OutputLayers::kInt8},
           {DecoderType::kSegmentation, OutputLayers::kInt8}}) {
    vision::ModelConfig c;
    c.decoder = decoder;
    CalibrationOptions opt;
    EXPECT_EQ(vision::setOutputLayerPolicy(c, &opt), want) << static_cast<int>(decoder);
    EXPECT_EQ(opt.outputLayers, want);
    CalibrationOptions chosen;
    chosen.outputLayers = want == OutputLayers::kKeep ? OutputLayers::kInt8 : OutputLayers::kKeep;
    const OutputLayers before = chosen.outputLayers;
    EXPECT_EQ(vision::setOutputLayerPolicy(c, &chosen), before);
  }
}

TEST(Calibrate, ModelWithoutQuantizableLayers_n) {
  TempDir dir;
  const std::string model = dir.write("m.onnx", noQuantizableModel());
  writeSamples(dir, "data", 2, 25);
  auto src = tensorSource(dir.file("data"));
  auto r = calibrate(model, *src, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(r.status().message().find("no quantizable layers"), std::string::npos);
}

TEST(Calibrate, MissingModel_n) {
  TempDir dir;
  writeSamples(dir, "data", 1, 26);
  auto src = tensorSource(dir.file("data"));
  auto r = calibrate(dir.file("none.onnx"), *src, {});
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
}

TEST(Calibrate, SampleOfTheWrongShape_n) {
  TempDir dir;
  const std::string model = dir.write("m.onnx", outlierModel());
  mkdir(dir.file("data").c_str(), 0755);
  ASSERT_TRUE(
      writeNpy(dir.file("data/bad.npy"), Tensor::zeros(DataType::kFloat32, Shape{1, 3, 9, 8}))
          .ok());
  auto src = tensorSource(dir.file("data"));
  auto r = calibrate(model, *src, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().toString().find("shape"), std::string::npos) << r.status().toString();
}

TEST(Calibrate, BadOptions_n) {
  TempDir dir;
  const std::string model = dir.write("m.onnx", outlierModel());
  writeSamples(dir, "data", 1, 27);
  auto src = tensorSource(dir.file("data"));
  CalibrationOptions opt;
  opt.histogramBins = 64;
  EXPECT_EQ(calibrate(model, *src, opt).status().code(), ErrorCode::kInvalidArgument);
  opt = {};
  opt.calibrator = method(CalibrationMethod::kPercentile, 0.0);
  EXPECT_EQ(calibrate(model, *src, opt).status().code(), ErrorCode::kInvalidArgument);
  opt = {};
  opt.excludeWorst = -1;
  EXPECT_EQ(calibrate(model, *src, opt).status().code(), ErrorCode::kInvalidArgument);
}

using test::exists;
using test::mediaDir;
using test::modelsDir;
using test::repoRoot;

// ---- Data sources ----------------------------------------------------------------------------

vision::PreprocessConfig smallPreprocess() {
  vision::PreprocessConfig p;
  p.outputWidth = 8;
  p.outputHeight = 8;
  return p;
}

void writePpm(const std::string& path, int w, int h, uint8_t seed) {
  std::ofstream f(path, std::ios::binary);
  f << "P6\n" << w << " " << h << "\n255\n";
  for (int i = 0; i < w * h * 3; ++i) f.put(static_cast<char>((i * 7 + seed) & 0xff));
}

TEST(CalibrationData, ImageFolderPreprocessesEveryImage) {
  TempDir dir;
  mkdir(dir.file("img").c_str(), 0755);
  writePpm(dir.file("img/a.ppm"), 20, 10, 1);
  writePpm(dir.file("img/b.ppm"), 9, 17, 2);
  dir.write("img/notes.txt", "not an image");
  CalibrationDataOptions o;
  o.preprocess = smallPreprocess();
  auto src = openCalibrationData(dir.file("img"), o);
  ASSERT_TRUE(src.ok()) << src.status().toString();
  EXPECT_EQ((*src)->expectedSamples(), 2);
  EXPECT_EQ((*src)->preprocessKey(), preprocessHash(o.preprocess));
  int n = 0;
  CalibrationSample s;
  while (true) {
    auto got = (*src)->next(s);
    ASSERT_TRUE(got.ok());
    if (!*got) break;
    ++n;
    EXPECT_EQ(s.inputs.at("").shape(), (Shape{1, 3, 8, 8}));
  }
  EXPECT_EQ(n, 2);
  ASSERT_TRUE((*src)->rewind().ok());
  auto again = (*src)->next(s);
  ASSERT_TRUE(again.ok() && *again) << "rewind starts over";
}

TEST(CalibrationData, UnreadableImageAmongGoodOnesIsSkippedWithAWarning_n) {
  TempDir dir;
  const std::string model = dir.write("m.onnx", outlierModel());
  mkdir(dir.file("img").c_str(), 0755);
  writePpm(dir.file("img/a.ppm"), 20, 10, 1);
  dir.write("img/broken.jpg", "this is not a JPEG");
  dir.write("img/cut.ppm", "P6\n20 10\n255\nabc");
  writePpm(dir.file("img/c.ppm"), 12, 12, 3);
  CalibrationDataOptions o;
  o.preprocess = smallPreprocess();
  auto src = openCalibrationData(dir.file("img"), o);
  ASSERT_TRUE(src.ok());
  auto r = calibrate(model, **src, {});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->samples, 2);
  EXPECT_EQ((*src)->skipped(), 2);
}

TEST(CalibrationData, NoReadableImage_n) {
  TempDir dir;
  const std::string model = dir.write("m.onnx", outlierModel());
  mkdir(dir.file("img").c_str(), 0755);
  dir.write("img/broken.jpg", "this is not a JPEG");
  CalibrationDataOptions o;
  o.preprocess = smallPreprocess();
  auto src = openCalibrationData(dir.file("img"), o);
  ASSERT_TRUE(src.ok());
  auto r = calibrate(model, **src, {});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("no calibration sample could be read"), std::string::npos);
}

TEST(CalibrationData, EmptyFolder_n) {
  TempDir dir;
  mkdir(dir.file("empty").c_str(), 0755);
  CalibrationDataOptions o;
  o.preprocess = smallPreprocess();
  auto src = openCalibrationData(dir.file("empty"), o);
  ASSERT_FALSE(src.ok());
  EXPECT_EQ(src.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(src.status().message().find("no image files"), std::string::npos);
  EXPECT_EQ(openTensorFolder(dir.file("empty"), o).status().code(), ErrorCode::kInvalidArgument);
}

TEST(CalibrationData, MissingFolder_n) {
  CalibrationDataOptions o;
  o.preprocess = smallPreprocess();
  EXPECT_EQ(openCalibrationData("/nonexistent/calib", o).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(openImageFolder("/nonexistent/calib", o).status().code(), ErrorCode::kNotFound);
}

TEST(CalibrationData, NotAVideo_n) {
  TempDir dir;
  const std::string f = dir.write("clip.mp4", "not a video at all");
  CalibrationDataOptions o;
  o.preprocess = smallPreprocess();
  auto src = openCalibrationData(f, o);
  EXPECT_FALSE(src.ok());
}

TEST(CalibrationData, MaxImagesLimitsEveryPass) {
  TempDir dir;
  const std::string model = dir.write("m.onnx", outlierModel());
  writeSamples(dir, "data", 6, 28);
  CalibrationDataOptions o;
  o.maxImages = 4;
  auto src = openCalibrationData(dir.file("data"), o);
  ASSERT_TRUE(src.ok());
  EXPECT_EQ((*src)->expectedSamples(), 4);
  auto r = calibrate(model, **src, {});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->samples, 4);
  EXPECT_EQ(r->cache.images, 4);
}

TEST(CalibrationData, VideoFramesAreSamples) {
  const std::string movie = mediaDir() + "/kphotoalbum/movie.avi";
  if (!vision::videoIoAvailable()) GTEST_SKIP() << "this build has no FFmpeg";
  if (!exists(movie)) GTEST_SKIP() << movie << " is absent: run scripts/fetch_media.sh";
  CalibrationDataOptions o;
  o.preprocess = smallPreprocess();
  o.maxImages = 5;
  auto src = openCalibrationData(movie, o);
  ASSERT_TRUE(src.ok()) << src.status().toString();
  EXPECT_EQ((*src)->expectedSamples(), 5);
  for (int pass = 0; pass < 2; ++pass) {
    ASSERT_TRUE((*src)->rewind().ok());
    CalibrationSample s;
    int n = 0;
    while (true) {
      auto got = (*src)->next(s);
      ASSERT_TRUE(got.ok()) << got.status().toString();
      if (!*got) break;
      EXPECT_EQ(s.inputs.at("").shape(), (Shape{1, 3, 8, 8}));
      ++n;
    }
    EXPECT_EQ(n, 5) << "pass " << pass;
  }
}

// ---- The calibration cache ---------------------------------------------------------------------

CalibrationCache sampleCache() {
  CalibrationCache c;
  c.sdkVersion = sdkVersion();
  c.modelHash = "0123456789abcdef";
  c.preprocessHash = "fedcba9876543210";
  c.calibrator = method(CalibrationMethod::kPercentile, 99.9);
  c.histogramBins = 2048;
  c.images = 13;
  c.tensorAmax["input:0"] = 1.0f;
  c.tensorAmax["a name with spaces"] = 3.14159274f;
  c.tensorAmax["zeros"] = 0.f;
  c.layerPrecision["conv one"] = Precision::kInt8;
  c.layerPrecision["conv2"] = Precision::kFp16;
  return c;
}

TEST(CalibrationCacheFile, RoundTrip) {
  TempDir dir;
  const CalibrationCache c = sampleCache();
  ASSERT_TRUE(c.save(dir.file("c.calib")).ok());
  struct stat st {};
  EXPECT_NE(stat(dir.file("c.calib.tmp").c_str(), &st), 0) << "temporary file left behind";
  auto l = CalibrationCache::load(dir.file("c.calib"));
  ASSERT_TRUE(l.ok()) << l.status().toString();
  EXPECT_EQ(l->sdkVersion, c.sdkVersion);
  EXPECT_EQ(l->modelHash, c.modelHash);
  EXPECT_EQ(l->preprocessHash, c.preprocessHash);
  EXPECT_EQ(l->calibrator.method, c.calibrator.method);
  EXPECT_EQ(l->calibrator.percentile, c.calibrator.percentile);
  EXPECT_EQ(l->images, c.images);
  EXPECT_EQ(l->tensorAmax, c.tensorAmax);
  EXPECT_EQ(l->layerPrecision, c.layerPrecision);
  EXPECT_EQ(l->toText(), c.toText());
  EXPECT_TRUE(l->checkModel("0123456789abcdef").ok());
}

/// The cache text with `from` replaced by `to` (which must occur).
std::string edited(const std::string& from, const std::string& to) {
  std::string t = sampleCache().toText();
  const auto pos = t.find(from);
  EXPECT_NE(pos, std::string::npos) << from;
  if (pos != std::string::npos) t.replace(pos, from.size(), to);
  return t;
}

Status parseError(const std::string& text) {
  return CalibrationCache::parse(text, "test.calib").status();
}

TEST(CalibrationCacheFile, OtherModel_n) {
  const Status s = sampleCache().checkModel("1111111111111111");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("0123456789abcdef"), std::string::npos);
  EXPECT_NE(s.message().find("1111111111111111"), std::string::npos);
}

TEST(CalibrationCacheFile, Truncated_n) {
  const std::string t = sampleCache().toText();
  // Every prefix that cuts a record off is an error, never a smaller valid cache.
  for (size_t cut : {t.size() / 4, t.size() / 2, t.size() - 5, t.find("tensor ") + 9}) {
    const Status s = parseError(t.substr(0, cut));
    EXPECT_EQ(s.code(), ErrorCode::kCorruptFile) << cut << ": " << s.toString();
    EXPECT_NE(s.message().find("line"), std::string::npos) << s.toString();
  }
}

TEST(CalibrationCacheFile, CorruptNumber_n) {
  const Status s = parseError(edited("tensor 1 input:0", "tensor 1.x input:0"));
  EXPECT_EQ(s.code(), ErrorCode::kCorruptFile);
  EXPECT_NE(s.message().find("'1.x'"), std::string::npos) << s.toString();
  // The line number of the bad record.
  const std::string t = edited("tensor 1 input:0", "tensor 1.x input:0");
  const int line = 1 + static_cast<int>(std::count(
                           t.begin(), t.begin() + static_cast<long>(t.find("1.x")), '\n'));
  EXPECT_NE(s.message().find("line " + std::to_string(line) + ":"), std::string::npos)
      << s.toString();
  EXPECT_EQ(parseError(edited("tensor 1 input:0", "tensor -1 input:0")).code(),
            ErrorCode::kCorruptFile);
  EXPECT_EQ(parseError(edited("tensor 1 input:0", "tensor nan input:0")).code(),
            ErrorCode::kCorruptFile);
  EXPECT_EQ(parseError(edited("tensor 1 input:0", "tensor 1e999 input:0")).code(),
            ErrorCode::kCorruptFile);
  EXPECT_EQ(parseError(edited("images 13", "images 13abc")).code(), ErrorCode::kCorruptFile);
}

TEST(CalibrationCacheFile, WrongVersion_n) {
  const Status s = parseError(edited("EDGEINFER-CALIBRATION 2", "EDGEINFER-CALIBRATION 7"));
  EXPECT_EQ(s.code(), ErrorCode::kVersionMismatch);
  EXPECT_NE(s.message().find("version 7"), std::string::npos) << s.toString();
}

TEST(CalibrationCacheFile, MissingFile_n) {
  EXPECT_EQ(CalibrationCache::load("/nonexistent/x.calib").status().code(), ErrorCode::kNotFound);
}

TEST(CalibrationCacheFile, EmptyOrForeignFile_n) {
  EXPECT_EQ(parseError("").code(), ErrorCode::kCorruptFile);
  EXPECT_EQ(parseError("EIENGINE\x01\x00\x00\x00 binary").code(), ErrorCode::kCorruptFile);
  EXPECT_EQ(parseError("{\"json\": true}\n").code(), ErrorCode::kCorruptFile);
}

TEST(CalibrationCacheFile, InconsistentRecords_n) {
  // A count that does not match the records.
  EXPECT_EQ(parseError(edited("tensors 3", "tensors 4")).code(), ErrorCode::kCorruptFile);
  EXPECT_EQ(parseError(edited("tensors 3", "tensors 2")).code(), ErrorCode::kCorruptFile);
  // The same tensor twice.
  EXPECT_EQ(parseError(edited("tensor 0 zeros", "tensor 0 input:0")).code(),
            ErrorCode::kCorruptFile);
  // Unknown precision, unknown calibrator, percentile out of range.
  EXPECT_EQ(parseError(edited("layer fp16 conv2", "layer int4 conv2")).code(),
            ErrorCode::kCorruptFile);
  EXPECT_EQ(parseError(edited("calibrator percentile 99.9", "calibrator kl")).code(),
            ErrorCode::kCorruptFile);
  EXPECT_EQ(parseError(edited("calibrator percentile 99.9", "calibrator percentile 120")).code(),
            ErrorCode::kCorruptFile);
  // Text after the end.
  EXPECT_EQ(parseError(sampleCache().toText() + "tensor 1 late\n").code(), ErrorCode::kCorruptFile);
}

TEST(CalibrationCacheFile, HandEditedPolicyIsAccepted) {
  // The file is meant to be edited: comments, blank lines and a layer moved to fp16 by hand.
  auto c = CalibrationCache::parse(
      "# my cache\n" + edited("layer int8 conv one", "\n# too lossy\nlayer fp16 conv one"), "t");
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(c->layerPrecision.at("conv one"), Precision::kFp16);
  EXPECT_EQ(c->excludedLayers().size(), 2u);
}

TEST(CalibrationCacheFile, PreprocessHashFollowsEveryField) {
  vision::PreprocessConfig a = smallPreprocess(), b = a;
  EXPECT_EQ(preprocessHash(a), preprocessHash(b));
  b.mean[2] = 0.5f;
  EXPECT_NE(preprocessHash(a), preprocessHash(b));
  b = a;
  b.resize = vision::ResizeMode::kLetterbox;
  EXPECT_NE(preprocessHash(a), preprocessHash(b));
  b = a;
  b.layout = vision::TensorLayout::kNHWC;
  EXPECT_NE(preprocessHash(a), preprocessHash(b));
}

// ---- The builder's cache check -----------------------------------------------------------------

class BuilderCacheCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = dir_.write("m.onnx", outlierModel());
    writeSamples(dir_, "data", 2, 31);
    auto src = tensorSource(dir_.file("data"));
    CalibrationOptions opt;
    opt.calibrator.method = CalibrationMethod::kMinMax;
    auto r = calibrate(model_, *src, opt);
    ASSERT_TRUE(r.ok()) << r.status().toString();
    cache_ = r->cache;
    ASSERT_TRUE(cache_.save(dir_.file("m.calib")).ok());
  }
  Expected<std::unique_ptr<Engine>> build(const std::string& cachePath) {
    BuilderConfig cfg;
    cfg.backend = Backend::kCpu;
    cfg.calibrationCachePath = cachePath;
    return Builder::buildFromFile(model_, cfg);
  }
  TempDir dir_;
  std::string model_;
  CalibrationCache cache_;
};

TEST_F(BuilderCacheCheck, TheModelsOwnCacheIsAccepted) {
  auto e = build(dir_.file("m.calib"));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ((*e)->info().precision, Precision::kFp32) << "the CPU computes in FP32: never INT8";
}

TEST_F(BuilderCacheCheck, CacheOfAnotherModel_n) {
  CalibrationCache other = cache_;
  other.modelHash = "00000000deadbeef";
  ASSERT_TRUE(other.save(dir_.file("other.calib")).ok());
  auto e = build(dir_.file("other.calib"));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("00000000deadbeef"), std::string::npos);
  EXPECT_NE(e.status().message().find(cache_.modelHash), std::string::npos);
}

TEST_F(BuilderCacheCheck, CacheMissingATensor_n) {
  CalibrationCache c = cache_;
  c.tensorAmax.erase("x");
  ASSERT_TRUE(c.save(dir_.file("short.calib")).ok());
  auto e = build(dir_.file("short.calib"));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("'x'"), std::string::npos) << e.status().toString();
}

TEST_F(BuilderCacheCheck, CachePolicyForAnUnknownLayer_n) {
  CalibrationCache c = cache_;
  c.layerPrecision["nowhere"] = Precision::kFp16;
  ASSERT_TRUE(c.save(dir_.file("policy.calib")).ok());
  auto e = build(dir_.file("policy.calib"));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("nowhere"), std::string::npos);
}

TEST_F(BuilderCacheCheck, MissingOrCorruptCache_n) {
  EXPECT_EQ(build(dir_.file("none.calib")).status().code(), ErrorCode::kNotFound);
  std::string t = cache_.toText();
  dir_.write("cut.calib", t.substr(0, t.size() / 2));
  EXPECT_EQ(build(dir_.file("cut.calib")).status().code(), ErrorCode::kCorruptFile);
}

TEST_F(BuilderCacheCheck, ModelWithoutQuantizableLayers_n) {
  const std::string plain = dir_.write("plain.onnx", noQuantizableModel());
  CalibrationCache c = cache_;
  const std::string bytes = noQuantizableModel();
  c.modelHash = modelHashOf(bytes.data(), bytes.size());
  ASSERT_TRUE(c.save(dir_.file("plain.calib")).ok());
  BuilderConfig cfg;
  cfg.backend = Backend::kCpu;
  cfg.calibrationCachePath = dir_.file("plain.calib");
  auto e = Builder::buildFromFile(plain, cfg);
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kUnsupported);
}

// ---- BlazeFace on real photos
// --------------------------------------------------------------------

TEST(CalibrateBlazeFace, RealPhotosGiveACacheTheBuilderAccepts) {
  const std::string cfgPath = modelsDir() + "/blazeface/model.json";
  if (!exists(modelsDir() + "/blazeface/blazeface_front_128.onnx"))
    GTEST_SKIP() << "BlazeFace is absent: run models/fetch.sh blazeface";
  if (!exists(mediaDir() + "/faces/2008_002506.ppm"))
    GTEST_SKIP() << "photos absent: run scripts/fetch_media.sh";
  auto cfg = vision::loadModelConfig(cfgPath);
  ASSERT_TRUE(cfg.ok()) << cfg.status().toString();
  // The PPM copies of dlib's photos (decoded without FFmpeg).
  TempDir dir;
  mkdir(dir.file("photos").c_str(), 0755);
  for (const char* p : {"2008_002506", "2009_004587", "2008_001009"}) {
    std::ifstream in(mediaDir() + "/faces/" + p + ".ppm", std::ios::binary);
    std::ofstream out(dir.file(std::string("photos/") + p + ".ppm"), std::ios::binary);
    out << in.rdbuf();
  }
  CalibrationDataOptions d;
  d.inputTensor = cfg->inputTensor;
  d.preprocess = cfg->preprocess;
  auto src = openCalibrationData(dir.file("photos"), d);
  ASSERT_TRUE(src.ok()) << src.status().toString();
  CalibrationOptions opt;
  opt.calibrator.method = CalibrationMethod::kEntropy;
  opt.report = true;
  opt.reportBatches = 1;
  auto r = calibrate(cfg->modelPath, **src, opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->samples, 3);
  EXPECT_EQ(r->cache.preprocessHash, preprocessHash(cfg->preprocess));
  // Every Conv of the optimised graph is a layer of the report and of the policy.
  auto text = Builder::inspect(cfg->modelPath);
  ASSERT_TRUE(text.ok());
  const std::string after = text->substr(text->find("=== after optimisation"));
  size_t convs = 0;
  for (size_t p = after.find("Conv"); p != std::string::npos; p = after.find("Conv", p + 1))
    ++convs;
  EXPECT_EQ(r->report.layers.size(), r->cache.layerPrecision.size());
  EXPECT_GT(r->report.layers.size(), 10u);
  EXPECT_LE(r->report.layers.size(), convs);
  // Min-max on the same photos: nothing clipped, so every entropy range is at most its
  // min-max range, and no observed tensor is all zeros.
  ASSERT_TRUE((*src)->rewind().ok());
  CalibrationOptions mmOpt;
  mmOpt.calibrator.method = CalibrationMethod::kMinMax;
  auto mm = calibrate(cfg->modelPath, **src, mmOpt);
  ASSERT_TRUE(mm.ok()) << mm.status().toString();
  ASSERT_EQ(mm->cache.tensorAmax.size(), r->cache.tensorAmax.size());
  for (const auto& [name, a] : mm->cache.tensorAmax) {
    EXPECT_GT(a, 0.f) << name;
    EXPECT_LE(r->cache.tensorAmax.at(name), a) << name;
  }
  for (size_t i = 1; i < r->report.layers.size(); ++i)
    EXPECT_LE(r->report.layers[i - 1].modelError.cosine, r->report.layers[i].modelError.cosine);
  ASSERT_TRUE(r->cache.save(dir.file("bf.calib")).ok());
  BuilderConfig b;
  b.backend = Backend::kCpu;
  b.calibrationCachePath = dir.file("bf.calib");
  auto e = Builder::buildFromFile(cfg->modelPath, b);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  // The back-camera model is another model: its build refuses this cache.
  auto other = Builder::buildFromFile(modelsDir() + "/blazeface/blazeface_back_256.onnx", b);
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("another model"), std::string::npos);
}

}  // namespace
}  // namespace edgeinfer
