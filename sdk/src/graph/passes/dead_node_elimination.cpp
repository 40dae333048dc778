#include <unordered_set>

#include "graph/passes/passes.h"

namespace edgeinfer::graph {

Expected<int> eliminateDeadNodes(Graph& g) {
  // Walk backwards from the graph outputs, marking what is needed.
  std::unordered_set<std::string> live(g.outputs.begin(), g.outputs.end());
  std::vector<bool> keep(g.nodes.size(), false);
  for (size_t k = g.nodes.size(); k-- > 0;) {
    const Node& n = g.nodes[k];
    for (const auto& o : n.outputs) {
      if (!o.empty() && live.count(o)) {
        keep[k] = true;
        break;
      }
    }
    if (!keep[k]) continue;
    for (const auto& in : n.inputs)
      if (!in.empty()) live.insert(in);
  }
  int removed = 0;
  std::vector<Node> kept;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    if (keep[k]) {
      kept.push_back(std::move(g.nodes[k]));
    } else {
      for (const auto& o : g.nodes[k].outputs)
        if (!o.empty()) g.eraseValue(o);
      ++removed;
    }
  }
  g.nodes = std::move(kept);
  // Drop constants nothing reads any more (they would bloat the engine file).
  std::vector<std::string> unusedConstants;
  for (const auto& [name, v] : g.values())
    if (v.constant && !live.count(name)) unusedConstants.push_back(name);
  for (const auto& name : unusedConstants) g.eraseValue(name);
  return removed;
}

}  // namespace edgeinfer::graph
