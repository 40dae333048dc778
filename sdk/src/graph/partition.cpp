#include "graph/partition.h"

#include <algorithm>
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

Expected<StaticHeadAndTail> splitStaticHead(const Graph& g) {
  StaticHeadAndTail parts;
  const std::vector<size_t> roots = dataDependentNodes(g);
  if (roots.empty()) {
    parts.head = g;
    return parts;
  }
  // The tail: the data-dependent nodes and everything reading what the tail computes.
  std::vector<bool> inTail(g.nodes.size(), false);
  std::unordered_set<std::string> tailValues;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    bool tail = std::find(roots.begin(), roots.end(), i) != roots.end();
    for (const auto& in : n.inputs) tail = tail || (!in.empty() && tailValues.count(in));
    if (!tail) continue;
    inTail[i] = true;
    for (const auto& o : n.outputs)
      if (!o.empty()) tailValues.insert(o);
  }
  std::vector<std::string> tailOutputs;
  for (const auto& o : g.outputs)
    if (tailValues.count(o)) tailOutputs.push_back(o);
  std::vector<size_t> headNodes, tailNodes;
  for (size_t i = 0; i < g.nodes.size(); ++i) (inTail[i] ? tailNodes : headNodes).push_back(i);
  if (tailOutputs.empty()) {  // nothing the tail computes is an output: it is dead
    parts.head = subgraph(g, headNodes, g.inputs, g.outputs, "");
    return parts;
  }
  if (headNodes.empty()) {
    const Node& n = g.nodes[roots.front()];
    return Status(ErrorCode::kUnsupported,
                  "the size of what '" + n.name + "' (" + n.opType +
                      ") computes depends on the input values, and nothing comes before it to "
                      "run on the GPU: build this model for the CPU backend");
  }
  // What the tail reads from outside itself: the head's values (the head outputs them) and
  // graph inputs (the tail's own inputs too); constants stay constants.
  std::vector<std::string> headOutputs, tailInputs;
  for (const auto& o : g.outputs)
    if (!tailValues.count(o)) headOutputs.push_back(o);
  const std::set<std::string> graphInputs(g.inputs.begin(), g.inputs.end());
  for (size_t i : tailNodes)
    for (const auto& in : g.nodes[i].inputs) {
      if (in.empty() || tailValues.count(in) || g.isConstant(in)) continue;
      if (std::find(tailInputs.begin(), tailInputs.end(), in) != tailInputs.end()) continue;
      tailInputs.push_back(in);
      if (!graphInputs.count(in) &&
          std::find(headOutputs.begin(), headOutputs.end(), in) == headOutputs.end())
        headOutputs.push_back(in);
    }
  parts.head = subgraph(g, headNodes, g.inputs, headOutputs, "");
  parts.tail = subgraph(g, tailNodes, tailInputs, tailOutputs, "_tail");
  return parts;
}

}  // namespace edgeinfer::graph
