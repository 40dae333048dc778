// Chains and DAG pieces of float32 elementwise nodes ==> one ai.edgeinfer::FusedElementwise
// whose register program (graph/ops/fused_elementwise.h) a backend evaluates per element, so
// the intermediates are never written to memory: x * Sigmoid(x) (SiLU), x * Clip(x + 3, 0, 6)
// / 6 (HardSwish), x * 0.5 * (1 + Erf(x / sqrt 2)) (GELU), scale-and-shift chains...
//
// Fusible nodes: the unary activations (Relu, LeakyRelu, Sigmoid, HardSigmoid, HardSwish, Tanh,
// Elu, Selu, Softplus, Clip with constant bounds), Abs, Neg, Exp, Log, Sqrt, Reciprocal, Erf,
// Floor, Ceil, and the binary Add, Sub, Mul, Div, Pow, Max, Min (Max/Min with two inputs),
// with a float32 output of static shape and float32 operands.
//
// Groups grow from a root (the last node of the group; its output is the group's output)
// towards the producers: a producer joins when it is fusible and every reader of its output is
// already in the group and the output is not a graph output. So no intermediate is needed
// outside the group, and the group is a DAG with one sink. Operands from outside become the
// fused node's inputs (scalar float32 constants become immediates of the program instead).
// A group of one node stays as it is; a group that needs more than kFeMaxInputs inputs,
// kFeMaxRegisters registers or kFeMaxConstants immediates is left unfused.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "graph/op_schema.h"
#include "graph/ops/fused_elementwise.h"
#include "graph/passes/passes.h"

namespace edgeinfer::graph {
namespace {

/// What one fusible node computes: the opcode, how many tensor operands it reads (inputs
/// 0..n-1) and the parameters that become immediates (operands b, c).
struct FusibleOp {
  FeOp op = FeOp::kRelu;
  int tensorOperands = 1;
  std::vector<float> params;
};

bool isStaticFloat32(const Graph& g, const std::string& name) {
  const Value* v = g.findValue(name);
  return v && v->dtype == DataType::kFloat32 && v->shapeKnown && v->shape.isStatic();
}

bool matchFusible(const Graph& g, const Node& n, FusibleOp* out) {
  if (!n.domain.empty() || n.outputs.size() != 1 || !isStaticFloat32(g, n.outputs[0])) return false;
  static const std::unordered_map<std::string, FeOp> kActivations = {
      {"Relu", FeOp::kRelu},
      {"LeakyRelu", FeOp::kLeakyRelu},
      {"Sigmoid", FeOp::kSigmoid},
      {"HardSigmoid", FeOp::kHardSigmoid},
      {"HardSwish", FeOp::kHardSwish},
      {"Tanh", FeOp::kTanh},
      {"Elu", FeOp::kElu},
      {"Selu", FeOp::kSelu},
      {"Softplus", FeOp::kSoftplus},
      {"Clip", FeOp::kClip}};
  static const std::unordered_map<std::string, FeOp> kMath = {
      {"Abs", FeOp::kAbs}, {"Neg", FeOp::kNeg},     {"Exp", FeOp::kExp},
      {"Log", FeOp::kLog}, {"Sqrt", FeOp::kSqrt},   {"Reciprocal", FeOp::kReciprocal},
      {"Erf", FeOp::kErf}, {"Floor", FeOp::kFloor}, {"Ceil", FeOp::kCeil}};
  static const std::unordered_map<std::string, FeOp> kBinary = {
      {"Add", FeOp::kAdd}, {"Sub", FeOp::kSub}, {"Mul", FeOp::kMul}, {"Div", FeOp::kDiv},
      {"Pow", FeOp::kPow}, {"Max", FeOp::kMax}, {"Min", FeOp::kMin}};
  *out = FusibleOp{};
  if (auto it = kActivations.find(n.opType); it != kActivations.end()) {
    std::string name;
    float alpha = 0.f, beta = 0.f;
    if (!matchActivation(g, n, &name, &alpha, &beta)) return false;
    if (n.opType != "Clip" && n.inputs.size() != 1) return false;
    if (!n.hasInput(0) || !isStaticFloat32(g, n.inputs[0])) return false;
    out->op = it->second;
    const int operands = feOperandCount(static_cast<int32_t>(out->op));
    if (operands > 1) out->params.push_back(alpha);
    if (operands > 2) out->params.push_back(beta);
    return true;
  }
  if (auto it = kMath.find(n.opType); it != kMath.end()) {
    if (n.inputs.size() != 1 || !n.hasInput(0) || !isStaticFloat32(g, n.inputs[0])) return false;
    out->op = it->second;
    return true;
  }
  if (auto it = kBinary.find(n.opType); it != kBinary.end()) {
    if (n.inputs.size() != 2 || !n.hasInput(0) || !n.hasInput(1) ||
        !isStaticFloat32(g, n.inputs[0]) || !isStaticFloat32(g, n.inputs[1]))
      return false;
    out->op = it->second;
    out->tensorOperands = 2;
    return true;
  }
  return false;
}

/// Immediates of one program, deduplicated by bit pattern.
struct ConstantPool {
  std::vector<float> values;
  int32_t operand(float v) {
    for (size_t i = 0; i < values.size(); ++i)
      if (std::memcmp(&values[i], &v, sizeof v) == 0) return -1 - static_cast<int32_t>(i);
    values.push_back(v);
    return -static_cast<int32_t>(values.size());
  }
};

/// A scalar float32 constant operand (becomes an immediate), or false.
bool scalarConstant(const Graph& g, const std::string& name, float* v) {
  const Tensor* t = g.constant(name);
  if (!t || t->numel() != 1 || t->dtype() != DataType::kFloat32) return false;
  *v = t->data<float>()[0];
  return true;
}

/// Builds the fused node of a group (members in topological order, the root last). False
/// when a limit of the program format is exceeded.
bool buildFusedNode(const Graph& g, const std::vector<size_t>& order,
                    const std::vector<FusibleOp>& ops, Node* fused) {
  std::unordered_map<std::string, size_t> memberOf;  // member output -> position in `order`
  for (size_t i = 0; i < order.size(); ++i) memberOf[g.nodes[order[i]].outputs[0]] = i;
  // External inputs, in order of first use.
  std::vector<std::string> inputs;
  std::map<std::string, int32_t> inputReg;
  for (size_t i = 0; i < order.size(); ++i) {
    const Node& n = g.nodes[order[i]];
    for (int k = 0; k < ops[order[i]].tensorOperands; ++k) {
      const std::string& v = n.inputs[static_cast<size_t>(k)];
      float imm;
      if (memberOf.count(v) || inputReg.count(v) || scalarConstant(g, v, &imm)) continue;
      inputReg[v] = static_cast<int32_t>(inputs.size());
      inputs.push_back(v);
    }
  }
  if (inputs.empty() || inputs.size() > static_cast<size_t>(kFeMaxInputs)) return false;
  // The broadcast of the inputs must be the root's output shape.
  Shape shape = g.findValue(inputs[0])->shape;
  for (size_t i = 1; i < inputs.size(); ++i) {
    auto b = broadcastShapes(shape, g.findValue(inputs[i])->shape);
    if (!b.ok()) return false;
    shape = *b;
  }
  if (shape != g.findValue(g.nodes[order.back()].outputs[0])->shape) return false;

  // Last instruction reading each register-held value (inputs and member outputs).
  std::unordered_map<std::string, size_t> lastUse;
  for (size_t i = 0; i < order.size(); ++i) {
    const Node& n = g.nodes[order[i]];
    for (int k = 0; k < ops[order[i]].tensorOperands; ++k)
      lastUse[n.inputs[static_cast<size_t>(k)]] = i;
  }
  std::set<int32_t> freeRegs;
  for (int32_t r = static_cast<int32_t>(inputs.size()); r < kFeMaxRegisters; ++r)
    freeRegs.insert(r);
  std::unordered_map<std::string, int32_t> reg(inputReg.begin(), inputReg.end());
  ConstantPool pool;
  FeProgram prog;
  prog.numInputs = static_cast<int>(inputs.size());
  for (size_t i = 0; i < order.size(); ++i) {
    const Node& n = g.nodes[order[i]];
    const FusibleOp& op = ops[order[i]];
    FeInstr ins;
    ins.op = op.op;
    int32_t* slots[3] = {&ins.a, &ins.b, &ins.c};
    int slot = 0;
    for (int k = 0; k < op.tensorOperands; ++k) {
      const std::string& v = n.inputs[static_cast<size_t>(k)];
      float imm;
      auto it = reg.find(v);
      *slots[slot++] =
          it != reg.end() ? it->second : (scalarConstant(g, v, &imm) ? pool.operand(imm) : 0);
    }
    for (float p : op.params) *slots[slot++] = pool.operand(p);
    // Operands read for the last time free their registers before dst is chosen (an
    // instruction reads its operands before it writes).
    for (int k = 0; k < op.tensorOperands; ++k) {
      const std::string& v = n.inputs[static_cast<size_t>(k)];
      auto it = reg.find(v);
      if (it != reg.end() && lastUse[v] == i) {
        freeRegs.insert(it->second);
        reg.erase(it);
      }
    }
    if (freeRegs.empty()) return false;
    ins.dst = *freeRegs.begin();
    freeRegs.erase(freeRegs.begin());
    reg[n.outputs[0]] = ins.dst;
    prog.instrs.push_back(ins);
  }
  prog.constants = pool.values;
  if (prog.constants.size() > static_cast<size_t>(kFeMaxConstants)) return false;
  const Node& root = g.nodes[order.back()];
  *fused = Node{};
  fused->name = root.name;
  fused->opType = "FusedElementwise";
  fused->domain = kEdgeInferDomain;
  fused->inputs = inputs;
  fused->outputs = root.outputs;
  fused->sourceIndex = root.sourceIndex;
  encodeFeProgram(prog, &fused->attrs);
  FeProgram check;  // the encoding must decode (limits, operands written before read)
  return decodeFeProgram(fused->attrs, prog.numInputs, &check).ok();
}

}  // namespace

Expected<int> fuseElementwise(Graph& g) {
  const size_t count = g.nodes.size();
  std::vector<FusibleOp> ops(count);
  std::vector<bool> fusible(count, false);
  for (size_t i = 0; i < count; ++i) fusible[i] = matchFusible(g, g.nodes[i], &ops[i]);
  const auto producers = g.producers();
  std::unordered_map<std::string, std::vector<size_t>> readers;
  for (size_t i = 0; i < count; ++i)
    for (const std::string& in : g.nodes[i].inputs)
      if (!in.empty()) readers[in].push_back(i);

  std::vector<int> groupOf(count, -1);
  struct Group {
    std::vector<size_t> order;  // topological, root last
    Node fused;
  };
  std::vector<Group> groups;
  int nextGroup = 0;
  for (size_t r = count; r-- > 0;) {
    if (!fusible[r] || groupOf[r] >= 0) continue;
    const int gid = nextGroup++;
    groupOf[r] = gid;
    std::vector<size_t> members{r};
    for (size_t q = 0; q < members.size(); ++q) {
      const Node& m = g.nodes[members[q]];
      for (int k = 0; k < ops[members[q]].tensorOperands; ++k) {
        const std::string& v = m.inputs[static_cast<size_t>(k)];
        auto p = producers.find(v);
        if (p == producers.end() || !fusible[p->second] || groupOf[p->second] >= 0 ||
            g.isGraphOutput(v) || members.size() >= static_cast<size_t>(kFeMaxInstructions))
          continue;
        bool allInside = true;
        for (size_t reader : readers[v]) allInside = allInside && groupOf[reader] == gid;
        if (!allInside) continue;
        groupOf[p->second] = gid;
        members.push_back(p->second);
      }
    }
    if (members.size() < 2) continue;
    // Topological order inside the group: depth-first from the root, producers first.
    std::vector<size_t> order;
    std::unordered_set<size_t> done;
    std::function<void(size_t)> visit = [&](size_t idx) {
      if (done.count(idx)) return;
      done.insert(idx);
      for (int k = 0; k < ops[idx].tensorOperands; ++k) {
        auto p = producers.find(g.nodes[idx].inputs[static_cast<size_t>(k)]);
        if (p != producers.end() && groupOf[p->second] == gid) visit(p->second);
      }
      order.push_back(idx);
    };
    visit(r);
    Group grp;
    grp.order = std::move(order);
    if (buildFusedNode(g, grp.order, ops, &grp.fused)) groups.push_back(std::move(grp));
  }
  if (groups.empty()) return 0;

  // Splice: each fused node replaces its root; the other members and their outputs go.
  std::vector<bool> erase(count, false);
  for (Group& grp : groups) {
    for (size_t i = 0; i + 1 < grp.order.size(); ++i) {
      erase[grp.order[i]] = true;
      g.eraseValue(g.nodes[grp.order[i]].outputs[0]);
    }
    g.nodes[grp.order.back()] = std::move(grp.fused);
  }
  std::vector<Node> kept;
  kept.reserve(count);
  for (size_t i = 0; i < count; ++i)
    if (!erase[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
  return static_cast<int>(groups.size());
}

}  // namespace edgeinfer::graph
