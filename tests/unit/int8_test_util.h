// INT8 GPU test helpers shared by the cuda-i8 (test_cuda_int8.cpp), cublaslt-i8
// (test_cublaslt_int8.cpp) and cuda-i8.gemv (test_cuda_int8_gemv.cpp) tests: one INT8
// convolution layer and one INT8 Gemm / MatMul layer with the host computation of the integer
// arithmetic and epilogue the providers implement (int8_conv.h), and a fixture that
// writes a model, calibrates it (min-max) and makes INT8 GPU build configurations.
#pragma once

#ifdef EDGEINFER_HAVE_CUDA

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "core/npy.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/calibration.h"
#include "edgeinfer/engine.h"
#include "kernels/ref/activation.h"
#include "quant/qdq.h"
#include "tactic_test_util.h"
#include "test_model.h"

namespace edgeinfer::test {

inline Tensor randomTensor(const Shape& s, uint32_t seed, float lo, float hi) {
  Tensor t = Tensor::zeros(DataType::kFloat32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

/// One INT8 Gemm / MatMul layer (constant B, optional constant bias) and its host reference,
/// the arithmetic of cublaslt-i8's "i32" mode and cuda-i8.gemv (cublaslt_int8.h, int8_gemv.h).
struct GemmI8Case {
  std::string op = "FusedGemm";  // Gemm, FusedGemm, MatMul, FusedMatMul
  Shape a{37, 44};               // A; Gemm: [M, K]
  int64_t N = 20;
  bool transB = true, bias = true;
  float alpha = 1.f, beta = 1.f;
  std::string act = "Relu";
  float sx = 0.02f, sy = 0.05f;

  graph::Graph g;
  graph::Node node;
  Tensor x, w, b;
  builder::LayerContext layer;

  bool gemm() const { return op == "Gemm" || op == "FusedGemm"; }
  bool ours() const { return op.rfind("Fused", 0) == 0; }
  int64_t K() const { return a[a.rank() - 1]; }
  void build() {
    x = randomTensor(a, 11, -2.6f, 2.6f);
    w = randomTensor(gemm() && transB ? Shape{N, K()} : Shape{K(), N}, 12, -0.5f, 0.5f);
    b = randomTensor(Shape{N}, 13, -1.f, 1.f);
    node = graph::Node{};
    node.name = "i8gemm";
    node.opType = op;
    node.domain = ours() ? graph::kEdgeInferDomain : "";
    node.inputs = {"A", "B"};
    if (bias) node.inputs.push_back("C");
    node.outputs = {"Y"};
    if (gemm()) {
      node.attrs.set("transB", graph::Attribute::Int(transB ? 1 : 0));
      node.attrs.set("alpha", graph::Attribute::Float(alpha));
      node.attrs.set("beta", graph::Attribute::Float(beta));
    }
    if (ours()) node.attrs.set("activation", graph::Attribute::String(act));
    g.value("B").constant = w;
    if (bias) g.value("C").constant = b;
    layer = builder::LayerContext{};
    ASSERT_TRUE(test::makeLayer(node, g, inputs(), &layer).ok());
    layer.inputScales.assign(node.inputs.size(), 0.f);
    layer.inputScales[0] = sx;
    layer.outputScales = {sy};
  }
  std::vector<const Tensor*> inputs() const {
    std::vector<const Tensor*> in = {&x, &w};
    if (bias) in.push_back(&b);
    return in;
  }
  /// The result as the test harness reads it back (an int8 output dequantized, fp16 widened)
  /// for an input given as `xType` (fp16: its fp16 copy is quantized; int8 or float32: the
  /// float value) and an output of `yType`.
  Tensor reference(DataType xType, DataType yType) const {
    const int64_t K = this->K(), M = x.numel() / K;
    const bool kn = !(gemm() && transB);
    std::vector<int8_t> wq;
    std::vector<float> ws;
    EXPECT_TRUE(quant::quantizeWeights(w, kn ? 1 : 0, &wq, &ws).ok());
    ref::Activation ac = ref::Activation::kNone;
    if (ours()) ref::parseActivation(act, &ac);
    Tensor y = Tensor::zeros(DataType::kFloat32, layer.outputShapes[0]);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          float xv = x.data<float>()[m * K + k];
          if (xType == DataType::kFloat16) xv = halfToFloat(floatToHalf(xv));
          acc += int64_t{test::quantizeHost(xv, sx)} *
                 wq[static_cast<size_t>(kn ? k * N + n : n * K + k)];
        }
        float al = sx * ws[static_cast<size_t>(n)];
        if (gemm() && alpha != 1.f) al = al * alpha;
        float bv = bias ? b.data<float>()[n] : 0.f;
        if (gemm() && bias && beta != 1.f) bv = beta * bv;
        float v = static_cast<float>(static_cast<int32_t>(acc)) * al;
        v = v + bv;
        v = ref::applyActivation(v, ac, 0.f, 0.f);
        y.data<float>()[m * N + n] = yType == DataType::kInt8
                                         ? static_cast<float>(test::quantizeHost(v, sy)) * sy
                                     : yType == DataType::kFloat16 ? halfToFloat(floatToHalf(v))
                                                                   : v;
      }
    return y;
  }
};

/// One INT8 convolution layer: the node, a graph holding W and B, the inputs and the scales.
struct I8Case {
  std::string op = "Conv";  // or "FusedConv"
  int64_t N = 1, C = 16, H = 9, W = 9, K = 24, R = 3, S = 3, group = 1;
  std::vector<int64_t> strides{1, 1}, dilations{1, 1}, pads{1, 1, 1, 1};
  bool bias = true, residual = false;
  std::string act;
  float actAlpha = 0.f, actBeta = 0.f;       // Clip: min, max (activation_alpha / _beta)
  float sx = 0.02f, sy = 0.05f, sz = 0.03f;  // input, output, residual scales (0: none)
  bool saturate = false;  // x and w constant at their int8 extremes: the largest accumulators

  graph::Graph g;
  graph::Node node;
  Tensor x, w, b, z;
  builder::LayerContext layer;

  void build() {
    x = randomTensor(Shape{N, C, H, W}, 1, -2.6f, 2.6f);  // beyond 127 * sx: saturates
    w = randomTensor(Shape{K, C / group, R, S}, 2, -0.5f, 0.5f);
    if (saturate) {  // 127 * 127 per product
      for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = 2.6f;
      for (int64_t i = 0; i < w.numel(); ++i) w.data<float>()[i] = 0.5f;
    }
    b = randomTensor(Shape{K}, 3, -1.f, 1.f);
    node = graph::Node{};
    node.name = "i8conv";
    node.opType = op;
    node.domain = op == "FusedConv" ? graph::kEdgeInferDomain : "";
    node.inputs = {"X", "W"};
    if (bias || residual) node.inputs.push_back(bias ? "B" : "");
    node.outputs = {"Y"};
    node.attrs.set("group", graph::Attribute::Int(group));
    node.attrs.set("strides", graph::Attribute::Ints(strides));
    node.attrs.set("dilations", graph::Attribute::Ints(dilations));
    node.attrs.set("pads", graph::Attribute::Ints(pads));
    if (op == "FusedConv") {
      node.attrs.set("activation", graph::Attribute::String(act));
      if (act == "Clip") {
        node.attrs.set("activation_alpha", graph::Attribute::Float(actAlpha));
        node.attrs.set("activation_beta", graph::Attribute::Float(actBeta));
      }
    }
    g.value("W").constant = w;
    if (bias) g.value("B").constant = b;
    layer = builder::LayerContext{};
    std::vector<const Tensor*> in = {&x, &w};
    if (bias || residual) in.push_back(bias ? &b : nullptr);
    ASSERT_TRUE(makeLayer(node, g, in, &layer).ok());
    if (residual) {  // Z has the output's shape: known once the layer without it is inferred
      z = randomTensor(layer.outputShapes[0], 4, -3.f, 3.f);
      node.inputs.push_back("Z");
      in.push_back(&z);
      layer = builder::LayerContext{};
      ASSERT_TRUE(makeLayer(node, g, in, &layer).ok());
    }
    layer.inputScales.assign(node.inputs.size(), 0.f);
    layer.inputScales[0] = sx;
    if (residual) layer.inputScales[3] = sz;
    layer.outputScales = {sy};
  }

  std::vector<const Tensor*> inputs() const {
    std::vector<const Tensor*> in = {&x, &w};
    if (bias || residual) in.push_back(bias ? &b : nullptr);
    if (residual) in.push_back(&z);
    return in;
  }

  /// int8_conv.h's arithmetic on the host for a tactic reading Z as `zInt8` and writing int8
  /// (`yInt8`, dequantized here) or fp16, in its bit-exact rounding. `pre`: each output's value
  /// before the quantize / fp16 rounding (v); `terms`: the magnitude of the terms summed into it
  /// (|acc * alpha| + |B| + |Z| + |v|), which bounds how far another rounding of the same sum
  /// (the fast epilogue's fused multiply-adds) can land from v.
  Tensor reference(bool yInt8, bool zInt8, std::vector<float>* pre = nullptr,
                   std::vector<float>* terms = nullptr) const {
    std::vector<int8_t> wq;
    std::vector<float> ws;
    EXPECT_TRUE(quant::quantizeWeights(w, 0, &wq, &ws).ok());
    const Shape& ys = layer.outputShapes[0];
    const int64_t P = ys[2], Q = ys[3], cpg = C / group, kpg = K / group;
    ref::Activation a = ref::Activation::kNone;
    ref::parseActivation(act, &a);
    const float al = a == ref::Activation::kLeakyRelu ? 0.01f
                     : a == ref::Activation::kClip    ? actAlpha
                                                      : 0.f;
    const float be = a == ref::Activation::kClip ? actBeta : 0.f;
    Tensor y = Tensor::zeros(DataType::kFloat32, ys);
    std::vector<int8_t> xq(static_cast<size_t>(x.numel()));  // quantized once, not per use
    for (size_t i = 0; i < xq.size(); ++i) xq[i] = quantizeHost(x.data<float>()[i], sx);
    if (pre) pre->assign(static_cast<size_t>(y.numel()), 0.f);
    if (terms) terms->assign(static_cast<size_t>(y.numel()), 0.f);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k)
        for (int64_t p = 0; p < P; ++p)
          for (int64_t q = 0; q < Q; ++q) {
            int64_t acc = 0;
            const int64_t grp = k / kpg;
            for (int64_t c = 0; c < cpg; ++c)
              for (int64_t r = 0; r < R; ++r)
                for (int64_t s = 0; s < S; ++s) {
                  const int64_t ih = p * strides[0] - pads[0] + r * dilations[0];
                  const int64_t iw = q * strides[1] - pads[1] + s * dilations[1];
                  if (ih < 0 || ih >= H || iw < 0 || iw >= W) continue;
                  const int64_t ci = grp * cpg + c;
                  acc += int64_t{xq[static_cast<size_t>(((n * C + ci) * H + ih) * W + iw)]} *
                         wq[static_cast<size_t>(((k * cpg + c) * R + r) * S + s)];
                }
            const float alpha = sx * ws[static_cast<size_t>(k)];
            float v = static_cast<float>(static_cast<int32_t>(acc)) * alpha;
            float sum = std::fabs(v);
            v = v + (bias ? b.data<float>()[k] : 0.f);
            sum += bias ? std::fabs(b.data<float>()[k]) : 0.f;
            const int64_t idx = ((n * K + k) * P + p) * Q + q;
            if (residual) {
              const float zv = z.data<float>()[idx];
              const float zd = zInt8 ? static_cast<float>(quantizeHost(zv, sz)) * sz
                                     : halfToFloat(floatToHalf(zv));
              v = v + zd;
              sum += std::fabs(zd);
            }
            v = ref::applyActivation(v, a, al, be);
            if (pre) (*pre)[static_cast<size_t>(idx)] = v;
            if (terms) (*terms)[static_cast<size_t>(idx)] = sum + std::fabs(v);
            y.data<float>()[idx] =
                yInt8 ? static_cast<float>(quantizeHost(v, sy)) * sy : halfToFloat(floatToHalf(v));
          }
    return y;
  }
};

struct Int8Fixture {
  TempDir dir;
  std::string model, cache;
  Tensor sample;
  size_t smoothed = 0;             ///< tensors the cache smooths
  Shape inputShape{2, 8, 20, 18};  ///< of the model's input "x"
  bool smoothing = false;          ///< CalibrationOptions::smoothing

  /// Writes the model and calibrates it (min-max) on 8 random samples.
  Status prepare(const TestModel& m) {
    model = dir.write("int8cnn.onnx", m.bytes());
    EI_RETURN_IF_ERROR(mkdirOk(dir.file("data")));
    for (int i = 0; i < 8; ++i) {
      Tensor t = randomTensor(inputShape, 100 + static_cast<uint32_t>(i), -1.f, 1.f);
      if (i == 0) sample = t.clone();
      EI_RETURN_IF_ERROR(writeNpy(dir.file("data/s" + std::to_string(i) + ".npy"), t));
    }
    CalibrationDataOptions dopt;
    EI_ASSIGN_OR_RETURN(auto src, openTensorFolder(dir.file("data"), dopt));
    CalibrationOptions opt;
    opt.calibrator.method = CalibrationMethod::kMinMax;
    opt.smoothing = smoothing;
    EI_ASSIGN_OR_RETURN(CalibrationResult r, calibrate(model, *src, opt));
    smoothed = r.cache.smoothing.size();
    cache = dir.file("int8cnn.calib");
    return r.cache.save(cache);
  }
  static Status mkdirOk(const std::string& p) {
    return std::system(("mkdir -p '" + p + "'").c_str()) == 0
               ? Status::Ok()
               : Status(ErrorCode::kIoError, "mkdir " + p);
  }
  /// The model on the CPU backend: FP32, or (`int8`) its INT8 emulation with the cache.
  Expected<std::unique_ptr<Engine>> cpuEngine(bool int8) const {
    BuilderConfig c;
    c.backend = Backend::kCpu;
    if (int8) {
      c.precision = Precision::kInt8;
      c.calibrationCachePath = cache;
    }
    return Builder::buildFromFile(model, c);
  }
  BuilderConfig config(bool strict) const {
    BuilderConfig c = quickGpuConfig(dir.file("timing.cache"), Precision::kInt8);
    c.calibrationCachePath = cache;
    c.strictPrecision = strict;
    return c;
  }
};

inline Tensor runOnce(Engine& e, const Tensor& x) {
  auto ctx = e.createExecutionContext();
  EXPECT_TRUE(ctx.ok()) << ctx.status().toString();
  if (!ctx.ok()) return Tensor();
  EXPECT_TRUE((*ctx)->setInput("x", x).ok());
  const Status s = (*ctx)->execute();
  EXPECT_TRUE(s.ok()) << s.toString();
  auto y = (*ctx)->getOutput("y");
  return y.ok() ? std::move(*y) : Tensor();
}

inline double cosine(const Tensor& a, const Tensor& b) {
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double x = a.getAsDouble(i), y = b.getAsDouble(i);
    ab += x * y;
    aa += x * x;
    bb += y * y;
  }
  return ab / std::sqrt(aa * bb + 1e-30);
}

}  // namespace edgeinfer::test

#endif  // EDGEINFER_HAVE_CUDA
