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

std::vector<std::vector<size_t>> networkStages(const Graph& g) {
  const size_t n = g.nodes.size();
  std::vector<std::vector<size_t>> stages;
  if (n == 0) return stages;
  // Each computed value (not a constant) is alive from the node that writes it (a graph input:
  // from the start) to the last node that reads it (a graph output: to the end).
  std::unordered_map<std::string, std::pair<long, long>> span;  // written at, last read at
  const long end = static_cast<long>(n);
  for (const auto& in : g.inputs) span[in] = {-1, -1};
  for (size_t i = 0; i < n; ++i) {
    for (const auto& in : g.nodes[i].inputs)
      if (auto it = span.find(in); !in.empty() && it != span.end())
        it->second.second = std::max(it->second.second, static_cast<long>(i));
    for (const auto& out : g.nodes[i].outputs)
      if (!out.empty() && !g.isConstant(out)) span[out] = {static_cast<long>(i), -1};
  }
  for (const auto& out : g.outputs)
    if (auto it = span.find(out); it != span.end()) it->second.second = end;
  // Alive across the cut after node i when written at w <= i and read last at r > i.
  std::vector<int> delta(n + 1, 0);
  for (const auto& [name, s] : span) {
    const long w = s.first, r = s.second;
    if (r <= w) continue;  // never read
    ++delta[static_cast<size_t>(std::max(w, 0L))];
    --delta[static_cast<size_t>(r)];
  }
  std::vector<std::pair<size_t, std::string>> cuts;  // after node i, the value alive there
  int alive = 0;
  for (size_t i = 0; i + 1 < n; ++i) {
    alive += delta[i];
    if (alive == 1) cuts.emplace_back(i, std::string());
  }
  for (auto& [i, value] : cuts)
    for (const auto& [name, s] : span)
      if (s.first <= static_cast<long>(i) && s.second > static_cast<long>(i)) value = name;
  const auto shapeOf = [&](const std::string& v) {
    const Value* val = g.findValue(v);
    return val && val->shapeKnown ? val->shape.toString() : "?" + v;  // unknown: its own
  };
  size_t start = 0;
  std::string lastShape;
  for (const auto& [i, value] : cuts) {
    std::vector<size_t> piece;
    for (size_t k = start; k <= i; ++k) piece.push_back(k);
    const std::string shape = shapeOf(value);
    if (!stages.empty() && shape == lastShape)
      stages.back().insert(stages.back().end(), piece.begin(), piece.end());
    else
      stages.push_back(std::move(piece));
    lastShape = shape;
    start = i + 1;
  }
  // The piece after the last cut ends at the graph's output: with one, its shape decides as
  // a cut's value would (a run of equal blocks ending the graph stays one stage).
  std::vector<size_t> rest;
  for (size_t k = start; k < n; ++k) rest.push_back(k);
  if (!stages.empty() && g.outputs.size() == 1 && shapeOf(g.outputs[0]) == lastShape)
    stages.back().insert(stages.back().end(), rest.begin(), rest.end());
  else if (!rest.empty())
    stages.push_back(std::move(rest));
  return stages;
}

}  // namespace edgeinfer::graph
