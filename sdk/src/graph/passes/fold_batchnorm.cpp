// Conv(X, W, B) -> BatchNormalization(scale, bias, mean, var)  ==>  Conv(X, W', B') with
//   W'[o] = W[o] * s[o],  B'[o] = (B[o] - mean[o]) * s[o] + bias[o],  s = scale / sqrt(var + eps)
// and the same for Gemm whose output columns are BN channels ([N, C] input to BN).
#include <cmath>

#include "graph/passes/passes.h"

namespace edgeinfer::graph {
namespace {

bool constFloat(const Graph& g, const Node& n, size_t i, const Tensor** out, int64_t numel) {
  if (!n.hasInput(i)) return false;
  const Tensor* t = g.constant(n.inputs[i]);
  if (!t || t->dtype() != DataType::kFloat32 || (numel >= 0 && t->numel() != numel)) return false;
  *out = t;
  return true;
}

std::string newConstant(Graph& g, const std::string& hint, Tensor t) {
  const std::string name = g.uniqueName(hint);
  Value& v = g.value(name);
  v.dtype = t.dtype();
  v.shape = t.shape();
  v.shapeKnown = true;
  v.constant = std::move(t);
  return name;
}

/// Folds BN node `bn` into producer `p` (Conv or Gemm). Returns false if not foldable.
bool foldInto(Graph& g, Node& p, const Node& bn) {
  const bool isConv = p.opType == "Conv";
  const Tensor* w = nullptr;
  if (!constFloat(g, p, 1, &w, -1)) return false;
  int64_t channels = 0;
  int64_t perChannel = 0;  // elements of W per output channel, contiguous when isConv
  if (isConv) {
    if (w->shape().rank() < 3) return false;
    channels = w->shape()[0];
    perChannel = w->numel() / channels;
  } else {  // Gemm: output channel j is column j of op(B)
    if (p.attrs.getFloat("alpha", 1.f) != 1.f || p.attrs.getInt("transA", 0) != 0) return false;
    if (w->shape().rank() != 2) return false;
    channels = p.attrs.getInt("transB", 0) ? w->shape()[0] : w->shape()[1];
    if (p.hasInput(2)) {
      const Tensor* c = g.constant(p.inputs[2]);
      if (!c || c->numel() != channels || p.attrs.getFloat("beta", 1.f) != 1.f) return false;
    }
  }
  const Tensor *scale, *bias, *mean, *var;
  if (!constFloat(g, bn, 1, &scale, channels) || !constFloat(g, bn, 2, &bias, channels) ||
      !constFloat(g, bn, 3, &mean, channels) || !constFloat(g, bn, 4, &var, channels))
    return false;
  const Tensor* b = nullptr;
  if (p.hasInput(2) && !constFloat(g, p, 2, &b, channels)) return false;
  const float eps = bn.attrs.getFloat("epsilon", 1e-5f);

  Tensor w2 = w->clone();
  Tensor b2 = Tensor::zeros(DataType::kFloat32, Shape{channels});
  float* wd = w2.data<float>();
  const int64_t rows = w->shape()[0], cols = w->shape().rank() == 2 ? w->shape()[1] : 0;
  for (int64_t c = 0; c < channels; ++c) {
    const double s =
        scale->data<float>()[c] / std::sqrt(static_cast<double>(var->data<float>()[c]) + eps);
    if (isConv) {
      for (int64_t k = 0; k < perChannel; ++k)
        wd[c * perChannel + k] = static_cast<float>(wd[c * perChannel + k] * s);
    } else if (p.attrs.getInt("transB", 0)) {
      for (int64_t k = 0; k < cols; ++k)
        wd[c * cols + k] = static_cast<float>(wd[c * cols + k] * s);
    } else {
      for (int64_t k = 0; k < rows; ++k)
        wd[k * cols + c] = static_cast<float>(wd[k * cols + c] * s);
    }
    const double b0 = b ? b->data<float>()[c] : 0.0;
    b2.data<float>()[c] =
        static_cast<float>((b0 - mean->data<float>()[c]) * s + bias->data<float>()[c]);
  }
  p.inputs.resize(3);
  p.inputs[1] = newConstant(g, p.name + "_bnfolded_W", std::move(w2));
  p.inputs[2] = newConstant(g, p.name + "_bnfolded_B", std::move(b2));
  if (!isConv) p.attrs.set("beta", Attribute::Float(1.f));
  return true;
}

}  // namespace

Expected<int> foldBatchNorm(Graph& g) {
  int folded = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    Node& p = g.nodes[k];
    if (!p.domain.empty() || (p.opType != "Conv" && p.opType != "Gemm") || p.outputs.size() != 1)
      continue;
    const int c = soleConsumer(g, p.outputs[0]);
    if (c < 0) continue;
    Node& bn = g.nodes[static_cast<size_t>(c)];
    if (bn.opType != "BatchNormalization" || !bn.domain.empty() || bn.input(0) != p.outputs[0])
      continue;
    if (bn.outputs.size() > 1 && !bn.outputs[1].empty()) continue;  // training outputs in use
    if (!foldInto(g, p, bn)) continue;
    // The producer now writes the BN's output directly.
    g.eraseValue(p.outputs[0]);
    p.outputs[0] = bn.outputs[0];
    g.nodes.erase(g.nodes.begin() + c);
    if (static_cast<size_t>(c) < k) --k;
    ++folded;
  }
  return folded;
}

}  // namespace edgeinfer::graph
