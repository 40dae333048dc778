// Graph optimisation passes, one file each. Every pass works on the IR alone (no device,
// no tactic) and returns how many rewrites it made, so the builder can log what happened.
// Each pass is switchable through PassOptions / environment variables (builder.h).
#pragma once

#include <functional>
#include <vector>

#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "graph/graph.h"

namespace edgeinfer::graph {

/// Evaluates one node on constant host tensors (the builder passes the CPU reference).
using ConstantEvaluator =
    std::function<Status(const Node&, const std::vector<const Tensor*>&, std::vector<Tensor>&)>;

/// Fills dtype and shape of every value from the graph inputs and constants; fails on the
/// first node whose inputs can never be valid. Rejects inferred tensors above maxBytes.
Status inferShapes(Graph& g, int64_t maxTensorBytes = int64_t{4} << 30);

/// Replaces nodes whose inputs are all constant (and Shape/Size of statically shaped
/// values) by their computed outputs.
Expected<int> foldConstants(Graph& g, const ConstantEvaluator& eval);

/// Removes nodes none of whose outputs is used, and constants nothing reads.
Expected<int> eliminateDeadNodes(Graph& g);

/// QLinearConv / QLinearMatMul with constant scales into DequantizeLinear -> Conv / MatMul ->
/// QuantizeLinear (GPU builds: the float layer runs on the GPU; lower_qoperators.cpp).
Expected<int> lowerQOperators(Graph& g);

/// Removes Identity and inference-time Dropout nodes by rewiring their consumers.
Expected<int> eliminateIdentity(Graph& g);

/// Folds an inference BatchNormalization into the preceding Conv or Gemm weights.
Expected<int> foldBatchNorm(Graph& g);

/// Conv + bias + activation, and Conv + Add(residual) + activation, into one FusedConv.
/// A constant per-channel Add after a Conv becomes its bias.
Expected<int> fuseConvActivation(Graph& g);

/// Gemm + activation into FusedGemm; MatMul + bias Add + activation into FusedMatMul.
Expected<int> fuseGemmActivation(Graph& g);

/// Chains and DAG pieces of float32 elementwise nodes (activations, unary math, Add/Sub/Mul/
/// Div/Pow/Max/Min with broadcasting) whose intermediates nothing outside reads, into one
/// ai.edgeinfer::FusedElementwise evaluating a register program per element
/// (graph/ops/fused_elementwise.h). Run it after fuseConvActivation / fuseGemmActivation, so
/// those absorb their activations first. Returns the number of fused nodes created.
Expected<int> fuseElementwise(Graph& g);

// Shared helpers for the fusion passes (pass_utils.cpp).
/// Index of the single node reading `value`, or -1 if it has 0 or several readers or is a
/// graph output.
int soleConsumer(const Graph& g, const std::string& value);
/// If `node` is an activation the fused kernels implement (with constant parameters),
/// fills name/alpha/beta and returns true.
bool matchActivation(const Graph& g, const Node& node, std::string* name, float* alpha,
                     float* beta);
/// The activation step of every fusion: if node `consumer` is an activation reading `*tail`,
/// records it in `absorbed` and moves `*tail` to its output. Either way writes the fused
/// node's activation attributes ("" when there is none).
void absorbActivation(const Graph& g, int consumer, std::string* tail,
                      std::vector<size_t>* absorbed, Node* fused);
/// Replaces the chain's head (node `head`) and the `absorbed` nodes by `fused`, which then
/// writes `tail`; the chain's intermediate values disappear. The fused node takes the place of
/// the last absorbed node, where all of its inputs are defined.
void spliceFusedNode(Graph& g, size_t head, std::vector<size_t> absorbed, Node fused,
                     const std::string& tail);

}  // namespace edgeinfer::graph
