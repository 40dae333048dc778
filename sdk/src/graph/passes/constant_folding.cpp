#include "graph/passes/passes.h"

namespace edgeinfer::graph {
namespace {

/// Shape and Size only need the input's shape; fold them when it is static.
bool foldShapeOf(Graph& g, const Node& n) {
  if (!n.domain.empty() || (n.opType != "Shape" && n.opType != "Size")) return false;
  const Value* in = g.findValue(n.input(0));
  if (!in || !in->shapeKnown || !in->shape.isStatic() || n.outputs.size() != 1) return false;
  Tensor t;
  if (n.opType == "Size") {
    t = Tensor::zeros(DataType::kInt64, Shape{});
    *t.data<int64_t>() = in->shape.numel();
  } else {
    const int64_t rank = static_cast<int64_t>(in->shape.rank());
    int64_t start = n.attrs.getInt("start", 0);
    int64_t end = n.attrs.getInt("end", rank);
    if (start < 0) start += rank;
    if (end < 0) end += rank;
    start = std::max<int64_t>(0, std::min(start, rank));
    end = std::max<int64_t>(start, std::min(end, rank));
    t = Tensor::zeros(DataType::kInt64, Shape{end - start});
    for (int64_t i = start; i < end; ++i)
      t.data<int64_t>()[i - start] = in->shape[static_cast<size_t>(i)];
  }
  Value& out = g.value(n.outputs[0]);
  out.dtype = t.dtype();
  out.shape = t.shape();
  out.shapeKnown = true;
  out.constant = std::move(t);
  return true;
}

}  // namespace

Expected<int> foldConstants(Graph& g, const ConstantEvaluator& eval) {
  int folded = 0;
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (Node& n : g.nodes) {
    if (foldShapeOf(g, n)) {
      ++folded;
      continue;
    }
    bool allConst = n.domain.empty() && !n.inputs.empty();
    std::vector<const Tensor*> in(n.inputs.size(), nullptr);
    for (size_t i = 0; i < n.inputs.size() && allConst; ++i) {
      if (n.inputs[i].empty()) continue;
      in[i] = g.constant(n.inputs[i]);
      if (!in[i]) allConst = false;
    }
    // Graph-output-producing nodes are folded too: the runtime returns constant outputs.
    if (!allConst) {
      kept.push_back(std::move(n));
      continue;
    }
    std::vector<Tensor> out;
    Status s = eval(n, in, out);
    if (!s.ok()) return s.at(n.location());
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i].empty()) continue;
      Value& v = g.value(n.outputs[i]);
      v.dtype = out[i].dtype();
      v.shape = out[i].shape();
      v.shapeKnown = true;
      v.constant = std::move(out[i]);
    }
    ++folded;
  }
  g.nodes = std::move(kept);
  return folded;
}

}  // namespace edgeinfer::graph
