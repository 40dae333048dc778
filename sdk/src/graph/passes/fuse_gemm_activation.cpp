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
    absorbActivation(g, c, &tail, &absorbed, &fusedNode);
    if (absorbed.empty()) continue;
    spliceFusedNode(g, k, std::move(absorbed), std::move(fusedNode), tail);
    k -= 1;  // revisit this index (unsigned wrap-around to the loop's ++k is well defined)
    ++fused;
  }
  return fused;
}

}  // namespace edgeinfer::graph
