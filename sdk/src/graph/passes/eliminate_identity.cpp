#include <algorithm>

#include "graph/passes/passes.h"

namespace edgeinfer::graph {
namespace {

void renameInputs(Graph& g, const std::string& from, const std::string& to) {
  for (Node& n : g.nodes)
    for (auto& in : n.inputs)
      if (in == from) in = to;
}

bool isGraphInput(const Graph& g, const std::string& name) {
  return std::find(g.inputs.begin(), g.inputs.end(), name) != g.inputs.end();
}

}  // namespace

Expected<int> eliminateIdentity(Graph& g) {
  int removed = 0;
  for (size_t k = 0; k < g.nodes.size();) {
    Node& n = g.nodes[k];
    const bool identity = n.domain.empty() && (n.opType == "Identity" || n.opType == "Dropout");
    // A Dropout whose mask output is used must stay.
    const bool maskUsed = n.opType == "Dropout" && n.outputs.size() > 1 && !n.outputs[1].empty() &&
                          g.consumerCounts().count(n.outputs[1]);
    if (!identity || maskUsed || n.outputs.empty() || !n.hasInput(0)) {
      ++k;
      continue;
    }
    const std::string in = n.inputs[0];
    const std::string out = n.outputs[0];
    if (!g.isGraphOutput(out)) {
      renameInputs(g, out, in);
    } else {
      // The output name must survive: make the producer of `in` write `out` directly, if
      // `in` is an ordinary intermediate value.
      const auto prod = g.producers();
      auto it = prod.find(in);
      if (it == prod.end() || g.isGraphOutput(in) || isGraphInput(g, in)) {
        ++k;
        continue;
      }
      Node& p = g.nodes[it->second];
      for (auto& o : p.outputs)
        if (o == in) o = out;
      renameInputs(g, in, out);
      g.eraseValue(in);
    }
    for (const auto& o : n.outputs)
      if (!o.empty() && o != in && !g.isGraphOutput(o)) g.eraseValue(o);
    g.nodes.erase(g.nodes.begin() + static_cast<std::ptrdiff_t>(k));
    ++removed;
  }
  return removed;
}

}  // namespace edgeinfer::graph
