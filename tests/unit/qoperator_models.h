// Small QOperator-format models for the tests of the lowering pass (CPU) and of their GPU
// engines: x (float) -> QuantizeLinear (uint8, zero point 128) -> QLinearConv (int8 weights,
// per-channel scales, int32 bias) or QLinearMatMul -> DequantizeLinear -> y (float); and the
// dynamically quantized model onnxruntime's quantize_dynamic makes (DynamicQuantizeLinear ->
// ConvInteger / MatMulInteger -> Cast -> scale).
#pragma once

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "test_model.h"

namespace edgeinfer::test {

/// An initializer of `type` (UINT8, INT8 or INT32) holding `v` as raw data.
inline void rawInitializer(TestModel& m, const std::string& name, int type,
                           const std::vector<int64_t>& dims, const std::vector<int64_t>& v) {
  auto* t = m.proto.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (int64_t d : dims) t->add_dims(d);
  std::string raw;
  for (int64_t x : v) {
    if (type == onnx::TensorProto::INT32) {
      const int32_t i = static_cast<int32_t>(x);
      raw.append(reinterpret_cast<const char*>(&i), 4);
    } else {
      raw.push_back(static_cast<char>(static_cast<uint8_t>(x)));
    }
  }
  t->set_raw_data(raw);
}

inline std::vector<int64_t> randomValues(size_t n, int64_t lo, int64_t hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  std::vector<int64_t> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

/// x [1, 3, 9, 8] -> Q -> QLinearConv 3x3, 3 -> 5 channels, pads 1, bias -> DQ -> y.
/// `runtimeScale`: the output scale is a graph input (the pass must leave the layer alone).
inline TestModel qlinearConvModel(bool runtimeScale = false) {
  TestModel m(13);
  m.input("x", {1, 3, 9, 8});
  if (runtimeScale) m.input("ys", {});
  m.initializer("xs", {}, {0.02f});
  rawInitializer(m, "xz", onnx::TensorProto::UINT8, {}, {128});
  rawInitializer(m, "w", onnx::TensorProto::INT8, {5, 3, 3, 3}, randomValues(135, -127, 127, 7));
  m.initializer("ws", {5}, {0.004f, 0.003f, 0.005f, 0.0025f, 0.0041f});
  rawInitializer(m, "wz", onnx::TensorProto::INT8, {5}, {0, 0, 0, 0, 0});
  if (!runtimeScale) m.initializer("ys", {}, {0.05f});
  rawInitializer(m, "yz", onnx::TensorProto::UINT8, {}, {120});
  rawInitializer(m, "b", onnx::TensorProto::INT32, {5}, {300, -200, 0, 1000, -50});
  m.node("QuantizeLinear", {"x", "xs", "xz"}, {"xq"}, "quantize");
  auto& c =
      m.node("QLinearConv", {"xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"}, {"yq"}, "qconv");
  TestModel::attrInts(c, "pads", {1, 1, 1, 1});
  m.node("DequantizeLinear", {"yq", "ys", "yz"}, {"y"}, "dequantize");
  m.output("y");
  return m;
}

/// x [2, 6, 7] -> Q (int8) -> QLinearMatMul with b [7, 4] (uint8, per-column scales and zero
/// points) -> DQ -> y [2, 6, 4].
inline TestModel qlinearMatMulModel() {
  TestModel m(13);
  m.input("x", {2, 6, 7});
  m.initializer("as", {}, {0.03f});
  rawInitializer(m, "az", onnx::TensorProto::INT8, {}, {3});
  rawInitializer(m, "b", onnx::TensorProto::UINT8, {7, 4}, randomValues(28, 0, 255, 9));
  m.initializer("bs", {4}, {0.01f, 0.02f, 0.015f, 0.008f});
  rawInitializer(m, "bz", onnx::TensorProto::UINT8, {4}, {128, 120, 130, 127});
  m.initializer("ys", {}, {0.04f});
  rawInitializer(m, "yz", onnx::TensorProto::INT8, {}, {-5});
  m.node("QuantizeLinear", {"x", "as", "az"}, {"aq"}, "quantize");
  m.node("QLinearMatMul", {"aq", "as", "az", "b", "bs", "bz", "ys", "yz"}, {"yq"}, "qmatmul");
  m.node("DequantizeLinear", {"yq", "ys", "yz"}, {"y"}, "dequantize");
  m.output("y");
  return m;
}

/// x [4, 3, 6, 6] -> DynamicQuantizeLinear -> ConvInteger (5 int8 3x3 filters, pads 1, weight
/// zero point 0, weight scale 0.01) -> Cast -> * (x_scale * 0.01) -> c -> Reshape [4, 180] ->
/// DynamicQuantizeLinear -> MatMulInteger (int8 [180, 10], zero point 3, scale 0.02) -> Cast
/// -> * (c_scale * 0.02) -> y [4, 10]. With `asFloat`, the same network in float: Conv and
/// MatMul with the dequantized weights (what the quantized model approximates).
inline TestModel dynamicQuantizedModel(bool asFloat = false) {
  TestModel m(13);
  m.input("x", {4, 3, 6, 6});
  const std::vector<int64_t> wc = randomValues(5 * 3 * 3 * 3, -127, 127, 71);
  const std::vector<int64_t> wm = randomValues(180 * 10, -127, 127, 72);
  const float wcScale = 0.01f, wmScale = 0.02f;
  const int64_t wmZero = 3;
  m.initializerI64("flat", {2}, {4, 180});
  if (asFloat) {
    std::vector<float> fc, fm;
    for (int64_t v : wc) fc.push_back(static_cast<float>(v) * wcScale);
    for (int64_t v : wm) fm.push_back(static_cast<float>(v - wmZero) * wmScale);
    m.initializer("wc", {5, 3, 3, 3}, fc);
    m.initializer("wm", {180, 10}, fm);
    auto& conv = m.node("Conv", {"x", "wc"}, {"c"}, "conv");
    TestModel::attrInts(conv, "pads", {1, 1, 1, 1});
    m.node("Reshape", {"c", "flat"}, {"cf"}, "flatten");
    m.node("MatMul", {"cf", "wm"}, {"y"}, "matmul");
    m.output("y");
    return m;
  }
  rawInitializer(m, "wc", onnx::TensorProto::INT8, {5, 3, 3, 3}, wc);
  rawInitializer(m, "wm", onnx::TensorProto::INT8, {180, 10}, wm);
  rawInitializer(m, "wz", onnx::TensorProto::INT8, {}, {wmZero});
  m.initializer("wcs", {}, {wcScale});
  m.initializer("wms", {}, {wmScale});
  m.node("DynamicQuantizeLinear", {"x"}, {"xq", "xs", "xz"}, "dql_x");
  auto& conv = m.node("ConvInteger", {"xq", "wc", "xz"}, {"acc_c"}, "convint");
  TestModel::attrInts(conv, "pads", {1, 1, 1, 1});
  auto& castC = m.node("Cast", {"acc_c"}, {"accf_c"}, "cast_c");
  TestModel::attr(castC, "to", onnx::TensorProto::FLOAT);
  m.node("Mul", {"xs", "wcs"}, {"sc"}, "scale_c");
  m.node("Mul", {"accf_c", "sc"}, {"c"}, "dequant_c");
  m.node("Reshape", {"c", "flat"}, {"cf"}, "flatten");
  m.node("DynamicQuantizeLinear", {"cf"}, {"cq", "cs", "cz"}, "dql_c");
  m.node("MatMulInteger", {"cq", "wm", "cz", "wz"}, {"acc_m"}, "matmulint");
  auto& castM = m.node("Cast", {"acc_m"}, {"accf_m"}, "cast_m");
  TestModel::attr(castM, "to", onnx::TensorProto::FLOAT);
  m.node("Mul", {"cs", "wms"}, {"sm"}, "scale_m");
  m.node("Mul", {"accf_m", "sm"}, {"y"}, "dequant_m");
  m.output("y");
  return m;
}

}  // namespace edgeinfer::test
