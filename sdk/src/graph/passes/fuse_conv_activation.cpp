// Conv [+ per-channel constant Add (becomes the bias)] [+ Add(residual)] [+ activation]
// ==> one ai.edgeinfer FusedConv(X, W, [B], [Z]) computing act(conv(X, W) + B + Z), so the
// intermediate tensors are never written to memory. The activation is a single node
// (absorbActivation), or SiLU: Sigmoid(t) and Mul(t, Sigmoid(t)) reading the chain's tail t
// and nothing else (how PyTorch exports nn.SiLU: EfficientNet, YOLOv5/v8).
#include <algorithm>

#include "graph/passes/passes.h"

namespace edgeinfer::graph {
namespace {

/// The other operand of a binary Add that reads `value`, or "" if not an Add.
std::string addOtherOperand(const Node& add, const std::string& value) {
  if (add.opType != "Add" || !add.domain.empty() || add.inputs.size() != 2) return "";
  if (add.inputs[0] == value && add.inputs[1] != value) return add.inputs[1];
  if (add.inputs[1] == value && add.inputs[0] != value) return add.inputs[0];
  return "";
}

/// A constant that broadcasts as one value per output channel of a rank-`rank` NCHW tensor:
/// shape [C,1,...,1] or [1,C,1,...,1]. Returns it flattened to [C], or an empty tensor.
Tensor perChannelBias(const Graph& g, const std::string& name, int64_t channels, size_t rank) {
  const Tensor* t = g.constant(name);
  if (!t || t->dtype() != DataType::kFloat32 || t->numel() != channels) return Tensor();
  const auto& d = t->shape().dims();
  if (d.size() != rank && d.size() != rank - 1) return Tensor();
  const size_t cAxis = d.size() == rank ? 1 : 0;
  if (d.size() == rank && d[0] != 1) return Tensor();
  for (size_t i = cAxis + 1; i < d.size(); ++i)
    if (d[i] != 1) return Tensor();
  auto r = t->clone().reshaped(Shape{channels});
  return r.ok() ? *r : Tensor();
}

/// SiLU after the chain's tail t: t's readers are exactly a Sigmoid(t) and a Mul of t and the
/// Sigmoid's output (either order), and the Sigmoid's output is read by that Mul alone.
/// Returns true and absorbs both (tail = the Mul's output, activation "SiLU").
bool absorbSilu(const Graph& g, std::string* tail, std::vector<size_t>* absorbed, Node* fused) {
  if (g.isGraphOutput(*tail)) return false;
  int sig = -1, mul = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const auto reads = std::count(n.inputs.begin(), n.inputs.end(), *tail);
    if (reads == 0) continue;
    if (!n.domain.empty() || n.outputs.size() != 1) return false;
    if (n.opType == "Sigmoid" && n.inputs.size() == 1 && sig < 0)
      sig = static_cast<int>(i);
    else if (n.opType == "Mul" && n.inputs.size() == 2 && reads == 1 && mul < 0)
      mul = static_cast<int>(i);
    else
      return false;  // another reader: t must stay
  }
  if (sig < 0 || mul < 0) return false;
  const std::string& s = g.nodes[static_cast<size_t>(sig)].outputs[0];
  const Node& m = g.nodes[static_cast<size_t>(mul)];
  if (!(m.inputs[0] == s || m.inputs[1] == s) || soleConsumer(g, s) != mul) return false;
  absorbed->push_back(static_cast<size_t>(sig));
  absorbed->push_back(static_cast<size_t>(mul));
  *tail = m.outputs[0];
  fused->attrs.set("activation", Attribute::String("SiLU"));
  fused->attrs.set("activation_alpha", Attribute::Float(0.f));
  fused->attrs.set("activation_beta", Attribute::Float(0.f));
  return true;
}

}  // namespace

Expected<int> fuseConvActivation(Graph& g) {
  int fused = 0;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (g.nodes[k].opType != "Conv" || !g.nodes[k].domain.empty() || g.nodes[k].outputs.size() != 1)
      continue;
    const Value* outV = g.findValue(g.nodes[k].outputs[0]);
    const Tensor* w = g.constant(g.nodes[k].input(1));
    if (!outV || !outV->shapeKnown || outV->dtype != DataType::kFloat32 || !w) continue;
    const int64_t channels = w->shape()[0];
    const size_t rank = outV->shape.rank();

    Node fusedNode = g.nodes[k];
    fusedNode.opType = "FusedConv";
    fusedNode.domain = kEdgeInferDomain;
    fusedNode.inputs.resize(4);    // X, W, B, Z
    std::vector<size_t> absorbed;  // nodes merged into the fused node
    std::string tail = g.nodes[k].outputs[0];

    // (1) constant per-channel Add => bias
    int c = soleConsumer(g, tail);
    if (c >= 0) {
      const Node& add = g.nodes[static_cast<size_t>(c)];
      const std::string other = addOtherOperand(add, tail);
      Tensor bias = other.empty() ? Tensor() : perChannelBias(g, other, channels, rank);
      if (!bias.empty()) {
        if (fusedNode.hasInput(2)) {
          const Tensor* b0 = g.constant(fusedNode.inputs[2]);
          if (!b0 || b0->dtype() != DataType::kFloat32)
            bias = Tensor();
          else
            for (int64_t i = 0; i < channels; ++i) bias.data<float>()[i] += b0->data<float>()[i];
        }
        if (!bias.empty()) {
          const std::string bname = g.uniqueName(fusedNode.name + "_bias");
          Value& bv = g.value(bname);
          bv.dtype = DataType::kFloat32;
          bv.shape = bias.shape();
          bv.shapeKnown = true;
          bv.constant = bias;
          fusedNode.inputs[2] = bname;
          absorbed.push_back(static_cast<size_t>(c));
          tail = add.outputs[0];
          c = soleConsumer(g, tail);
        }
      }
    }
    // (2) residual Add of a same-shape tensor
    if (c >= 0) {
      const Node& add = g.nodes[static_cast<size_t>(c)];
      const std::string other = addOtherOperand(add, tail);
      const Value* ov = other.empty() ? nullptr : g.findValue(other);
      if (ov && ov->shapeKnown && ov->shape == outV->shape && outV->shape.isStatic() &&
          ov->dtype == DataType::kFloat32) {
        fusedNode.inputs[3] = other;
        absorbed.push_back(static_cast<size_t>(c));
        tail = add.outputs[0];
        c = soleConsumer(g, tail);
      }
    }
    // (3) activation: SiLU (two nodes reading the tail), or one activation node
    if (!absorbSilu(g, &tail, &absorbed, &fusedNode))
      absorbActivation(g, c, &tail, &absorbed, &fusedNode);
    // A bare Conv (nothing absorbed) stays a Conv.
    if (absorbed.empty()) continue;
    while (!fusedNode.inputs.empty() && fusedNode.inputs.back().empty())
      fusedNode.inputs.pop_back();
    spliceFusedNode(g, k, std::move(absorbed), std::move(fusedNode), tail);
    k -= 1;  // revisit this index (unsigned wrap-around to the loop's ++k is well defined)
    ++fused;
  }
  return fused;
}

}  // namespace edgeinfer::graph
