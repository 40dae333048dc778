// Splitting a graph where its shapes stop being static: the layers after a data-dependent
// output (NonZero, NonMaxSuppression: the output's size depends on the input values, not on
// the input shapes) cannot be planned ahead, so a backend that needs static shapes (the GPU)
// runs the head and hands the tail to one that does not (the CPU reference). Device-free.
//
// When asked, a data-dependent layer whose output has a static bound (NonZero: one column per
// input element; NonMaxSuppression: K = min(boxes, max_output_boxes_per_class) rows per batch
// and class, K = boxes when the limit is computed at run time) stays in the head in its bounded
// form (graph/ops/detection_schemas.cpp: the output padded to the bound, and its size); the runtime
// cuts it to size, and the tail starts after it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "edgeinfer/status.h"
#include "graph/graph.h"

namespace edgeinfer::graph {

/// The nodes whose outputs have a data-dependent size: every input of static shape (after
/// shape inference with static graph inputs), an output that is not static.
std::vector<size_t> dataDependentNodes(const Graph& g);

/// A data-dependent value the head computes in bounded form.
struct BoundedValue {
  std::string name;    ///< the value: [count, 3] (NonMaxSuppression), [rank, count] (NonZero)
  std::string padded;  ///< head output: the value padded to its bound
  std::string count;   ///< head output: int64 [1], its size along `axis`
  int axis = 0;        ///< 0: rows (NonMaxSuppression), 1: columns (NonZero)
};

struct StaticHeadAndTail {
  /// The nodes before the data-dependent ones and those not depending on them, in `g`'s
  /// order; its inputs are `g`'s, its outputs `g`'s outputs it computes (or passes through)
  /// followed by the values the tail reads from it. Static shapes throughout.
  Graph head;
  /// The data-dependent nodes and every node reading, directly or not, what they compute; its
  /// inputs are the values it reads from the head and the graph inputs it reads, its outputs
  /// `g`'s outputs it computes. Empty (no nodes) when there is nothing to split, or when the
  /// bounded values are all that follows the head.
  Graph tail;
  /// The values the head computes in bounded form (their padded form and size are head
  /// outputs), which the runtime cuts to size; the tail's inputs and `g`'s outputs may name
  /// them.
  std::vector<BoundedValue> bounded;
};

/// Splits `g` (shapes inferred, nodes in topological order) after its data-dependent nodes;
/// with `bound`, those that have a bounded form stay in the head in that form. A tail that
/// computes no graph output is dropped. kUnsupported when nothing precedes the data-dependent
/// nodes left in the tail (the head would compute nothing).
Expected<StaticHeadAndTail> splitStaticHead(const Graph& g, bool bound = false);

/// The bounded form of data-dependent node `n` of `g` (its outputs named `<output>:padded`
/// and `<output>:count`), or nullopt when it has none (another op, an input shape unknown, an
/// output that is always empty).
std::optional<Node> boundedForm(const Graph& g, const Node& n);

/// The stages of a network in `g` (nodes in topological order, shapes inferred), as runs of
/// node indices in order, together covering every node: the graph is cut after each node where
/// exactly one computed value is alive (written before the cut, read after it or a graph
/// output), as between two residual blocks of a ResNet, and consecutive pieces whose last values
/// (the one alive at their cut; for the last piece, the graph's output where it has one) have
/// the same shape are one stage (ResNet-50: the stem, its pool, layer1's three blocks, layer2's
/// four..., the global pool, the classifier). A graph with no such cut is one stage. Used to try
/// precisions stage by stage (builder.cpp).
std::vector<std::vector<size_t>> networkStages(const Graph& g);

}  // namespace edgeinfer::graph
