// Which layers of an optimised graph INT8 applies to, and the explicitly quantized (Q/DQ)
// graph that simulates INT8 on the CPU reference: for each chosen layer, every activation
// input goes through QuantizeLinear -> DequantizeLinear (per tensor, int8, zero point 0, scale
// amax / 127) and the weights are replaced by their per-channel fake-quantized values
// (quantize -> dequantize folded into a new constant). The rest of the graph is untouched, so
// the result runs in the ordinary CPU engine and differs from FP32 only by the quantization.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "graph/graph.h"

namespace edgeinfer::quant {

struct QuantLayer {
  size_t node = 0;  ///< index in the graph's node list
  std::string name;
  std::string opType;
  std::vector<size_t> activationSlots;  ///< inputs quantized per tensor
  /// Inputs calibrated too, and quantized per tensor where they have a range, but that a
  /// calibration cache may lack (FusedConv's residual Z: caches written before it was
  /// calibrated still build; without a range the GPU reads it in float).
  std::vector<size_t> optionalSlots;
  int weightSlot = -1;  ///< constant weight input, quantized per channel
  int weightAxis = 0;   ///< its output-channel axis
};

/// The inputs of layer `l` (node `n`) quantized per tensor with the ranges `amax`: its
/// activation slots, then the optional ones `amax` has a range for.
std::vector<size_t> quantizedSlots(const QuantLayer& l, const graph::Node& n,
                                   const std::map<std::string, float>& amax);

/// Conv / FusedConv (weights [M, C/group, k...], per channel on axis 0), Gemm / FusedGemm
/// (B constant: axis 0 with transB, else 1) and MatMul / FusedMatMul (B constant: its last
/// axis; B computed: quantized per tensor like A), with float32 activation inputs.
std::vector<QuantLayer> findQuantizableLayers(const graph::Graph& g);

/// The layers that compute the graph's outputs: indices into `layers` of the first quantizable
/// layer on each path back from a graph output, through nodes that are not quantizable layers
/// (data movement, activations, element-wise and other ops), ascending.
std::vector<size_t> findOutputLayers(const graph::Graph& g, const std::vector<QuantLayer>& layers);

/// Symmetric per-tensor int8 fake quantization as QuantizeLinear/DequantizeLinear compute it:
/// clamp(round_half_even(x / s), -128, 127) * s.
float fakeQuantize(float x, float scale);
/// The activation scale for a calibrated amax (amax / 127, never 0: a tensor of zeros gets a
/// tiny scale so that quantizing it is still defined and yields zeros).
float activationScale(double amax);
/// Weights quantized per channel along `axis` to [-127, 127]: the int8 values in the tensor's
/// element order, and the channel scales (perChannelWeightScales; 0 for a channel of zeros,
/// whose values are 0). INT8 tactics and fakeQuantizeWeights both use it.
Status quantizeWeights(const Tensor& weights, int axis, std::vector<int8_t>* values,
                       std::vector<float>* scales);
/// Weights quantized per channel along `axis` to [-127, 127] and dequantized again.
Expected<Tensor> fakeQuantizeWeights(const Tensor& weights, int axis);

/// The graph with the layers whose indices (into `layers`) are in `which` in INT8 as
/// described at the top. Every activation input of those layers must have an amax in `amax`.
Expected<graph::Graph> quantizeGraph(const graph::Graph& g, const std::vector<QuantLayer>& layers,
                                     const std::set<size_t>& which,
                                     const std::map<std::string, float>& amax);

}  // namespace edgeinfer::quant

namespace edgeinfer::quant {

/// Loads the calibration cache at `path` and checks it fits the optimised graph `g` of the
/// model with hash `modelHash`: the model hash, a range for every activation input of every
/// quantizable layer (but the tensors in `modelScales`, which an explicitly quantized model
/// gives itself: quant/qdq_absorb.h), a policy entry only for layers the graph has. Errors
/// name the cache and what does not fit.
Status checkCalibrationCache(const std::string& path, const std::string& modelHash,
                             const graph::Graph& g,
                             const std::map<std::string, float>* modelScales = nullptr);

}  // namespace edgeinfer::quant
