// QLinearConv and QLinearMatMul (onnxruntime's "QOperator" format) lowered to the Q/DQ form
// for GPU builds:
//   QLinearConv(x, xs, xz, w, ws, wz, ys, yz, B)
//     -> QuantizeLinear(Conv(DequantizeLinear(x, xs, xz), DequantizeLinear(w, ws, wz, axis 0),
//                            DequantizeLinear(B, xs * ws, axis 0)), ys, yz)
//   QLinearMatMul(a, as, az, b, bs, bz, ys, yz)
//     -> QuantizeLinear(MatMul(DequantizeLinear(a, as, az, axis -2),
//                              DequantizeLinear(b, bs, bz, axis -1)), ys, yz)
// The dequantized weights are constants the folding pass computes; the GPU runs the float
// convolution / GEMM (or, in INT8 builds, the Q/DQ pairs are absorbed like any explicitly
// quantized model's). The result differs from the integer reference only where the float sum
// lands within rounding of a half step: at most one quantization step.
// Lowered only when the scales are constants (the bias scale is computed here) and every
// parameter has a shape DequantizeLinear takes: per tensor, or 1-D along one axis.
#include <string>
#include <vector>

#include "graph/passes/passes.h"

namespace edgeinfer::graph {
namespace {

/// A positive per-tensor or 1-D scale constant, as floats; empty when it is neither.
std::vector<float> scaleValues(const Graph& g, const std::string& name) {
  const Tensor* t = name.empty() ? nullptr : g.constant(name);
  std::vector<float> v;
  if (!t || (t->dtype() != DataType::kFloat32 && t->dtype() != DataType::kFloat16) ||
      t->shape().rank() > 1 || t->numel() < 1)
    return {};
  for (int64_t i = 0; i < t->numel(); ++i) {
    const double s = t->getAsDouble(i);
    if (!(s > 0.0)) return {};
    v.push_back(static_cast<float>(s));
  }
  return v;
}

/// The parameter (scale or zero point) is absent, per tensor, or 1-D of `len` elements.
bool paramFits(const Graph& g, const std::string& name, int64_t len) {
  if (name.empty()) return true;
  const Value* v = g.findValue(name);
  if (!v || !v->shapeKnown) return false;
  if (v->shape.isStatic() && v->shape.numel() == 1 && v->shape.rank() <= 1) return true;
  return v->shape.rank() == 1 && v->shape[0] == len;
}

int64_t dimOf(const Graph& g, const std::string& value, int64_t axis) {
  const Value* v = g.findValue(value);
  if (!v || !v->shapeKnown || v->shape.rank() == 0) return -1;
  const int64_t r = static_cast<int64_t>(v->shape.rank());
  if (axis < 0) axis += r;
  return axis < 0 || axis >= r ? -1 : v->shape[static_cast<size_t>(axis)];
}

Node dequantize(Graph& g, const std::string& name, const std::string& x, const std::string& scale,
                const std::string& zp, int64_t axis, const std::string& out) {
  Node n;
  n.name = g.uniqueName(name);
  n.opType = "DequantizeLinear";
  n.inputs = {x, scale};
  if (!zp.empty()) n.inputs.push_back(zp);
  n.outputs = {out};
  n.attrs.set("axis", Attribute::Int(axis));
  return n;
}

/// QuantizeLinear of the float result `yf` into the QOperator node's output, with its y_scale
/// and y_zero_point (inputs 6 and 7 of both ops).
Node quantizeOutput(Graph& g, const std::string& base, const Node& n, const std::string& yf) {
  Node q;
  q.name = g.uniqueName(base + "/quantize_y");
  q.opType = "QuantizeLinear";
  q.inputs = {yf, n.input(6)};
  if (n.hasInput(7)) q.inputs.push_back(n.input(7));
  q.outputs = n.outputs;
  return q;
}

/// The nodes replacing QLinearConv `n`, or none when it cannot be lowered.
std::vector<Node> lowerConv(Graph& g, const Node& n) {
  if (n.inputs.size() < 8 || !n.hasInput(0) || !n.hasInput(3) || n.outputs.size() != 1) return {};
  const std::vector<float> xs = scaleValues(g, n.input(1)), ws = scaleValues(g, n.input(4));
  if (xs.size() != 1 || ws.empty() || scaleValues(g, n.input(6)).size() != 1) return {};
  const int64_t m = dimOf(g, n.input(3), 0);  // output channels
  if (m < 1 || !paramFits(g, n.input(4), m) || !paramFits(g, n.input(5), m) ||
      !paramFits(g, n.input(2), 1) || !paramFits(g, n.input(7), 1))
    return {};
  const std::string base = n.name.empty() ? "qlinearconv" : n.name;
  std::vector<Node> out;
  const std::string xf = g.uniqueName(base + "/x_float"), wf = g.uniqueName(base + "/w_float");
  out.push_back(dequantize(g, base + "/dequantize_x", n.input(0), n.input(1), n.input(2), 1, xf));
  out.push_back(dequantize(g, base + "/dequantize_w", n.input(3), n.input(4), n.input(5), 0, wf));
  Node conv;
  conv.name = n.name;  // the layer keeps its name (precision policies, forced tactics)
  conv.opType = "Conv";
  conv.attrs = n.attrs;
  conv.sourceIndex = n.sourceIndex;
  conv.inputs = {xf, wf};
  if (n.hasInput(8)) {  // int32 bias in units of xs * ws
    const std::string bs = g.uniqueName(base + "/bias_scale"), bf = g.uniqueName(base + "/b_float");
    Tensor t = Tensor::zeros(DataType::kFloat32, ws.size() == 1 ? Shape{} : Shape{m});
    for (size_t i = 0; i < ws.size(); ++i) t.data<float>()[i] = xs[0] * ws[i];
    Value& v = g.value(bs);
    v.dtype = DataType::kFloat32;
    v.shape = t.shape();
    v.shapeKnown = true;
    v.constant = std::move(t);
    out.push_back(dequantize(g, base + "/dequantize_b", n.input(8), bs, "", 0, bf));
    conv.inputs.push_back(bf);
  }
  const std::string yf = g.uniqueName(base + "/y_float");
  conv.outputs = {yf};
  out.push_back(std::move(conv));
  out.push_back(quantizeOutput(g, base, n, yf));
  return out;
}

/// The nodes replacing QLinearMatMul `n`, or none when it cannot be lowered.
std::vector<Node> lowerMatMul(Graph& g, const Node& n) {
  if (n.inputs.size() < 8 || !n.hasInput(0) || !n.hasInput(3) || n.outputs.size() != 1) return {};
  if (scaleValues(g, n.input(1)).empty() || scaleValues(g, n.input(4)).empty() ||
      scaleValues(g, n.input(6)).size() != 1)
    return {};
  // a's parameters per tensor or per row ([M]), b's per tensor or per column ([N]).
  const int64_t rows = dimOf(g, n.input(0), -2), cols = dimOf(g, n.input(3), -1);
  if (rows < 1 || cols < 1 || !paramFits(g, n.input(1), rows) || !paramFits(g, n.input(2), rows) ||
      !paramFits(g, n.input(4), cols) || !paramFits(g, n.input(5), cols) ||
      !paramFits(g, n.input(7), 1))
    return {};
  const std::string base = n.name.empty() ? "qlinearmatmul" : n.name;
  std::vector<Node> out;
  const std::string af = g.uniqueName(base + "/a_float"), bf = g.uniqueName(base + "/b_float");
  out.push_back(dequantize(g, base + "/dequantize_a", n.input(0), n.input(1), n.input(2), -2, af));
  out.push_back(dequantize(g, base + "/dequantize_b", n.input(3), n.input(4), n.input(5), -1, bf));
  Node mm;
  mm.name = n.name;
  mm.opType = "MatMul";
  mm.sourceIndex = n.sourceIndex;
  mm.inputs = {af, bf};
  const std::string yf = g.uniqueName(base + "/y_float");
  mm.outputs = {yf};
  out.push_back(std::move(mm));
  out.push_back(quantizeOutput(g, base, n, yf));
  return out;
}

}  // namespace

Expected<int> lowerQOperators(Graph& g) {
  int lowered = 0;
  std::vector<Node> result;
  result.reserve(g.nodes.size());
  for (Node& n : g.nodes) {
    std::vector<Node> repl;
    if (n.domain.empty() && n.opType == "QLinearConv") repl = lowerConv(g, n);
    if (n.domain.empty() && n.opType == "QLinearMatMul") repl = lowerMatMul(g, n);
    if (repl.empty()) {
      result.push_back(std::move(n));
      continue;
    }
    for (Node& r : repl) result.push_back(std::move(r));
    ++lowered;
  }
  g.nodes = std::move(result);
  return lowered;
}

}  // namespace edgeinfer::graph
