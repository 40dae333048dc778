// Gemm [+ activation] ==> FusedGemm; MatMul [+ Add(constant [N] bias)] [+ activation] ==>
// FusedMatMul. One kernel, no intermediate tensors.
#include <algorithm>

#include "graph/passes/passes.h"

namespace edgeinfer::graph {

Expected<int> fuseGemmActivation(Graph& g) {
  int fused = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const Node& head = g.nodes[k];
    const bool isGemm = head.opType == "Gemm";
    if ((!isGemm && head.opType != "MatMul") || !head.domain.empty() || head.outputs.size() != 1)
      continue;
    const Value* outV = g.findValue(head.outputs[0]);
    if (!outV || outV->dtype != DataType::kFloat32 || !outV->shapeKnown || outV->shape.rank() < 1)
      continue;
    Node fusedNode = head;
    fusedNode.opType = isGemm ? "FusedGemm" : "FusedMatMul";
    fusedNode.domain = kEdgeInferDomain;
    std::vector<size_t> absorbed;
    std::string tail = head.outputs[0];
    int c = soleConsumer(g, tail);
    // MatMul + Add(constant bias over the last dim)
    if (!isGemm && c >= 0) {
      const Node& add = g.nodes[static_cast<size_t>(c)];
      if (add.opType == "Add" && add.domain.empty() && add.inputs.size() == 2) {
        const std::string other = add.inputs[0] == tail ? add.inputs[1] : add.inputs[0];
        const Tensor* b = g.constant(other);
        const int64_t n = outV->shape[outV->shape.rank() - 1];
        if (b && other != tail && b->dtype() == DataType::kFloat32 && n > 0 && b->numel() == n &&
            b->shape().rank() >= 1 && b->shape()[b->shape().rank() - 1] == n &&
            b->shape().rank() <= outV->shape.rank()) {
          fusedNode.inputs.resize(2);
          fusedNode.inputs.push_back(other);
          absorbed.push_back(static_cast<size_t>(c));
          tail = add.outputs[0];
          c = soleConsumer(g, tail);
        }
      }
    }
    std::string act;
    float alpha = 0.f, beta = 0.f;
    if (c >= 0 && g.nodes[static_cast<size_t>(c)].input(0) == tail &&
        matchActivation(g, g.nodes[static_cast<size_t>(c)], &act, &alpha, &beta)) {
      absorbed.push_back(static_cast<size_t>(c));
      tail = g.nodes[static_cast<size_t>(c)].outputs[0];
    }
    if (absorbed.empty()) continue;
    fusedNode.attrs.set("activation", Attribute::String(act));
    fusedNode.attrs.set("activation_alpha", Attribute::Float(alpha));
    fusedNode.attrs.set("activation_beta", Attribute::Float(beta));
    g.eraseValue(head.outputs[0]);
    for (size_t i = 0; i + 1 < absorbed.size(); ++i) g.eraseValue(g.nodes[absorbed[i]].outputs[0]);
    fusedNode.outputs = {tail};
    const size_t last = absorbed.back();
    g.nodes[last] = std::move(fusedNode);
    absorbed.pop_back();
    absorbed.push_back(k);
    std::sort(absorbed.rbegin(), absorbed.rend());
    for (size_t idx : absorbed) g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(idx));
    k -= 1;  // revisit this index (unsigned wrap-around to the loop's ++k is well defined)
    ++fused;
  }
  return fused;
}

}  // namespace edgeinfer::graph
