#include <algorithm>
#include <limits>

#include "graph/passes/passes.h"

namespace edgeinfer::graph {

int soleConsumer(const Graph& g, const std::string& value) {
  if (g.isGraphOutput(value)) return -1;
  int found = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (const auto& in : g.nodes[i].inputs) {
      if (in != value) continue;
      if (found >= 0) return -1;  // a second reader (or the same node reading twice)
      found = static_cast<int>(i);
    }
  }
  return found;
}

namespace {
bool scalarConstant(const Graph& g, const Node& n, size_t i, float* out) {
  if (!n.hasInput(i)) return false;
  const Tensor* t = g.constant(n.inputs[i]);
  if (!t || t->numel() != 1 || !isFloatingPoint(t->dtype())) return false;
  *out = static_cast<float>(t->getAsDouble(0));
  return true;
}
}  // namespace

bool matchActivation(const Graph& g, const Node& n, std::string* name, float* alpha, float* beta) {
  if (!n.domain.empty() || n.outputs.size() != 1) return false;
  const std::string& op = n.opType;
  *alpha = 0.f;
  *beta = 0.f;
  if (op == "Relu" || op == "Sigmoid" || op == "Tanh" || op == "HardSwish" || op == "Softplus") {
  } else if (op == "LeakyRelu") {
    *alpha = n.attrs.getFloat("alpha", 0.01f);
  } else if (op == "HardSigmoid") {
    *alpha = n.attrs.getFloat("alpha", 0.2f);
    *beta = n.attrs.getFloat("beta", 0.5f);
  } else if (op == "Elu") {
    *alpha = n.attrs.getFloat("alpha", 1.f);
  } else if (op == "Selu") {
    *alpha = n.attrs.getFloat("alpha", 1.67326319217681884765625f);
    *beta = n.attrs.getFloat("gamma", 1.05070102214813232421875f);
  } else if (op == "Clip") {
    *alpha = -std::numeric_limits<float>::infinity();
    *beta = std::numeric_limits<float>::infinity();
    if (n.hasInput(1) && !scalarConstant(g, n, 1, alpha)) return false;
    if (n.hasInput(2) && !scalarConstant(g, n, 2, beta)) return false;
  } else {
    return false;
  }
  *name = op;
  return true;
}

void absorbActivation(const Graph& g, int consumer, std::string* tail,
                      std::vector<size_t>* absorbed, Node* fused) {
  std::string act;
  float alpha = 0.f, beta = 0.f;
  if (consumer >= 0 && g.nodes[static_cast<size_t>(consumer)].input(0) == *tail &&
      matchActivation(g, g.nodes[static_cast<size_t>(consumer)], &act, &alpha, &beta)) {
    absorbed->push_back(static_cast<size_t>(consumer));
    *tail = g.nodes[static_cast<size_t>(consumer)].outputs[0];
  }
  fused->attrs.set("activation", Attribute::String(act));
  fused->attrs.set("activation_alpha", Attribute::Float(alpha));
  fused->attrs.set("activation_beta", Attribute::Float(beta));
}

void spliceFusedNode(Graph& g, size_t head, std::vector<size_t> absorbed, Node fused,
                     const std::string& tail) {
  g.eraseValue(g.nodes[head].outputs[0]);
  for (size_t i = 0; i + 1 < absorbed.size(); ++i) g.eraseValue(g.nodes[absorbed[i]].outputs[0]);
  fused.outputs = {tail};
  g.nodes[absorbed.back()] = std::move(fused);
  absorbed.back() = head;
  std::sort(absorbed.rbegin(), absorbed.rend());
  for (size_t idx : absorbed) g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(idx));
}

}  // namespace edgeinfer::graph
