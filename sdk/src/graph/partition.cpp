#include "graph/partition.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_set>

namespace edgeinfer::graph {
namespace {

bool isStatic(const Graph& g, const std::string& name) {
  const Value* v = g.findValue(name);
  return v && v->shapeKnown && v->shape.isStatic();
}

/// `g` with only `keep` of its nodes, the given inputs and outputs, and only the values those
/// refer to (constants the kept nodes do not read are dropped).
Graph subgraph(const Graph& g, const std::vector<size_t>& keep,
               const std::vector<std::string>& inputs, const std::vector<std::string>& outputs,
               const std::string& suffix) {
  Graph sub;
  sub.name = g.name + suffix;
  sub.opset = g.opset;
  sub.inputs = inputs;
  sub.outputs = outputs;
  std::set<std::string> used(inputs.begin(), inputs.end());
  used.insert(outputs.begin(), outputs.end());
  for (size_t i : keep) {
    sub.nodes.push_back(g.nodes[i]);
    for (const auto& in : g.nodes[i].inputs)
      if (!in.empty()) used.insert(in);
    for (const auto& o : g.nodes[i].outputs)
      if (!o.empty()) used.insert(o);
  }
  for (const auto& name : used)
    if (const Value* v = g.findValue(name)) sub.value(name) = *v;
  return sub;
}

}  // namespace

std::vector<size_t> dataDependentNodes(const Graph& g) {
  std::vector<size_t> out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    bool inputsStatic = true, outputsStatic = true;
    for (const auto& in : n.inputs) inputsStatic = inputsStatic && (in.empty() || isStatic(g, in));
    for (const auto& o : n.outputs) outputsStatic = outputsStatic && (o.empty() || isStatic(g, o));
    if (inputsStatic && !outputsStatic) out.push_back(i);
  }
  return out;
}

std::optional<Node> boundedForm(const Graph& g, const Node& n) {
  if (!n.domain.empty() || n.outputs.size() != 1 || n.outputs[0].empty()) return std::nullopt;
  const auto staticShape = [&](size_t i) -> const Shape* {
    const Value* v = n.hasInput(i) ? g.findValue(n.inputs[i]) : nullptr;
    return v && v->shapeKnown && v->shape.isStatic() ? &v->shape : nullptr;
  };
  Node b = n;
  b.domain = kEdgeInferDomain;
  b.outputs = {n.outputs[0] + ":padded", n.outputs[0] + ":count"};
  if (n.opType == "NonZero") {
    const Shape* x = staticShape(0);
    if (!x || x->numel() < 1) return std::nullopt;
    b.opType = "BoundedNonZero";
    return b;
  }
  if (n.opType != "NonMaxSuppression") return std::nullopt;
  const Shape* scores = staticShape(1);
  if (!staticShape(0) || !scores || scores->rank() != 3 || scores->numel() < 1) return std::nullopt;
  for (size_t i = 2; i < n.inputs.size(); ++i)  // parameters: one element, constant or not
    if (n.hasInput(i) && (!staticShape(i) || staticShape(i)->numel() != 1)) return std::nullopt;
  const Tensor* maxOut = n.hasInput(2) ? g.constant(n.inputs[2]) : nullptr;
  if (!n.hasInput(2) || (maxOut && maxOut->getAsInt64(0) <= 0))
    return std::nullopt;  // no output at all: nothing to bound
  b.opType = "BoundedNonMaxSuppression";
  return b;
}

Expected<StaticHeadAndTail> splitStaticHead(const Graph& g, bool bound) {
  StaticHeadAndTail parts;
  const std::vector<size_t> roots = dataDependentNodes(g);
  if (roots.empty()) {
    parts.head = g;
    return parts;
  }
  // Bounded roots stay in the head (rewritten); the others start the tail.
  std::map<size_t, Node> boundedRoots;
  if (bound)
    for (size_t i : roots)
      if (auto b = boundedForm(g, g.nodes[i])) boundedRoots.emplace(i, std::move(*b));
  // The tail: the other data-dependent nodes and everything reading what the tail or a
  // bounded node computes.
  std::vector<bool> inTail(g.nodes.size(), false);
  std::unordered_set<std::string> tailValues, boundedValues;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    bool readsTail = false;
    for (const auto& in : n.inputs)
      readsTail = readsTail || (!in.empty() && (tailValues.count(in) || boundedValues.count(in)));
    if (boundedRoots.count(i)) {
      if (!readsTail) {  // its inputs come from the head: it stays there, bounded
        boundedValues.insert(n.outputs[0]);
        continue;
      }
      boundedRoots.erase(i);  // it reads what the tail computes: it runs in the tail
    }
    const bool tail = readsTail || std::find(roots.begin(), roots.end(), i) != roots.end();
    if (!tail) continue;
    inTail[i] = true;
    for (const auto& o : n.outputs)
      if (!o.empty()) tailValues.insert(o);
  }
  std::vector<std::string> tailOutputs;
  for (const auto& o : g.outputs)
    if (tailValues.count(o)) tailOutputs.push_back(o);
  std::vector<size_t> tailNodes;
  if (!tailOutputs.empty())  // else nothing the tail computes is an output: it is dead
    for (size_t i = 0; i < g.nodes.size(); ++i)
      if (inTail[i]) tailNodes.push_back(i);
  // The bounded values needed: graph outputs, or read by the tail.
  std::set<std::string> needed;
  for (const auto& o : g.outputs)
    if (boundedValues.count(o)) needed.insert(o);
  for (size_t i : tailNodes)
    for (const auto& in : g.nodes[i].inputs)
      if (boundedValues.count(in)) needed.insert(in);
  std::vector<size_t> headNodes;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const auto b = boundedRoots.find(i);
    if (b != boundedRoots.end() ? needed.count(g.nodes[i].outputs[0]) != 0 : !inTail[i])
      headNodes.push_back(i);
  }
  if (headNodes.empty()) {
    const Node& n = g.nodes[roots.front()];
    return Status(ErrorCode::kUnsupported,
                  "the size of what '" + n.name + "' (" + n.opType +
                      ") computes depends on the input values, and nothing comes before it to "
                      "run on the GPU: build this model for the CPU backend");
  }
  // What the head outputs: the graph's outputs it computes, each bounded value (padded, and
  // its size), and the values the tail reads from it; the tail also reads graph inputs (its
  // own inputs too) and bounded values; constants stay constants.
  std::vector<std::string> headOutputs, tailInputs;
  for (const auto& o : g.outputs)
    if (!tailValues.count(o) && !boundedValues.count(o)) headOutputs.push_back(o);
  for (const auto& [i, b] : boundedRoots) {
    if (!needed.count(g.nodes[i].outputs[0])) continue;
    headOutputs.push_back(b.outputs[0]);
    headOutputs.push_back(b.outputs[1]);
    parts.bounded.push_back(
        {g.nodes[i].outputs[0], b.outputs[0], b.outputs[1], b.opType == "BoundedNonZero" ? 1 : 0});
  }
  const std::set<std::string> graphInputs(g.inputs.begin(), g.inputs.end());
  for (size_t i : tailNodes)
    for (const auto& in : g.nodes[i].inputs) {
      if (in.empty() || tailValues.count(in) || g.isConstant(in)) continue;
      if (std::find(tailInputs.begin(), tailInputs.end(), in) != tailInputs.end()) continue;
      tailInputs.push_back(in);
      if (!graphInputs.count(in) && !boundedValues.count(in) &&
          std::find(headOutputs.begin(), headOutputs.end(), in) == headOutputs.end())
        headOutputs.push_back(in);
    }
  parts.head = subgraph(g, headNodes, g.inputs, headOutputs, "");
  for (size_t j = 0; j < headNodes.size(); ++j) {     // the bounded nodes (head node j is g's
    const auto it = boundedRoots.find(headNodes[j]);  // headNodes[j]), their outputs' shapes
    if (it == boundedRoots.end()) continue;
    Node& n = parts.head.nodes[j];
    parts.head.eraseValue(n.outputs[0]);  // the head computes it padded only
    n = it->second;
    const Shape x = g.findValue(n.inputs[n.opType == "BoundedNonZero" ? 0 : 1])->shape;
    Shape padded;
    if (n.opType == "BoundedNonZero") {
      padded = Shape({std::max<int64_t>(1, static_cast<int64_t>(x.rank())), x.numel()});
    } else {
      const Tensor* maxOut = g.constant(n.inputs[2]);  // at run time: at most every box
      const int64_t k = maxOut ? std::min(x[2], maxOut->getAsInt64(0)) : x[2];
      padded = Shape({x[0] * x[1] * k, 3});
    }
    for (const auto& [name, shape] :
         {std::pair<std::string, Shape>{n.outputs[0], padded}, {n.outputs[1], Shape({1})}}) {
      Value& v = parts.head.value(name);
      v.name = name;
      v.dtype = DataType::kInt64;
      v.shape = shape;
      v.shapeKnown = true;
    }
  }
  if (!tailNodes.empty()) parts.tail = subgraph(g, tailNodes, tailInputs, tailOutputs, "_tail");
  return parts;
}

}  // namespace edgeinfer::graph
