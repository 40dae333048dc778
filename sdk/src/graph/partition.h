// Splitting a graph where its shapes stop being static: the layers after a data-dependent
// output (NonZero, NonMaxSuppression: the output's size depends on the input values, not on
// the input shapes) cannot be planned ahead, so a backend that needs static shapes (the GPU)
// runs the head and hands the tail to one that does not (the CPU reference). Device-free.
#pragma once

#include <string>
#include <vector>

#include "edgeinfer/status.h"
#include "graph/graph.h"

namespace edgeinfer::graph {

/// The nodes whose outputs have a data-dependent size: every input of static shape (after
/// shape inference with static graph inputs), an output that is not static.
std::vector<size_t> dataDependentNodes(const Graph& g);

struct StaticHeadAndTail {
  /// The nodes before the data-dependent ones and those not depending on them, in `g`'s
  /// order; its inputs are `g`'s, its outputs `g`'s outputs it computes (or passes through)
  /// followed by the values the tail reads from it. Static shapes throughout.
  Graph head;
  /// The data-dependent nodes and every node reading, directly or not, what they compute; its
  /// inputs are the values it reads from the head and the graph inputs it reads, its outputs
  /// `g`'s outputs it computes. Empty (no nodes) when there is nothing to split.
  Graph tail;
};

/// Splits `g` (shapes inferred, nodes in topological order) after its data-dependent nodes.
/// A tail that computes no graph output is dropped. kUnsupported when nothing precedes the
/// data-dependent nodes (the head would compute nothing).
Expected<StaticHeadAndTail> splitStaticHead(const Graph& g);

}  // namespace edgeinfer::graph
