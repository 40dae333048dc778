// Explicit quantization (issue 6, point 4): an ONNX model that carries its own
// QuantizeLinear / DequantizeLinear nodes (QAT exports, onnxruntime's Q/DQ format) is built
// for INT8 on the GPU with the scales it carries, the way TensorRT treats explicitly quantized
// networks, instead of running its Q/DQ nodes as plain ops.
//
// absorbQdq() rewrites the graph (before the fusion passes, so that fusion sees Conv -> Relu
// and not Conv -> Q -> DQ -> Relu) and returns the scales:
//   activations  x -> QuantizeLinear(s, 0) -> DequantizeLinear(s, 0) -> readers
//                with s a positive finite per-tensor scale and an int8 zero point 0 on both:
//                the pair goes, the readers read x, and x gets the scale s. Only when every
//                reader of x goes through such a pair with the same scale (so that in the
//                model x is only ever seen quantized, and one scale per tensor, as the GPU
//                builder keeps, says it all) and x is no graph output.
//   weights      W (int8 constant) -> DequantizeLinear(s_w per tensor or per axis, 0), and
//                W (float constant) -> QuantizeLinear -> DequantizeLinear, read by Conv, Gemm
//                or MatMul (an int32 bias -> DequantizeLinear likewise): replaced by the
//                dequantized float constant, computed as DequantizeLinear does.
//   propagation  the output of a Relu or MaxPool reading a tensor with a scale takes that scale
//                when it has none of its own: both commute exactly with symmetric
//                quantization (relu(fq(x)) == fq(relu(x)), max of quantized == quantized max).
// Everything else stays in place and runs as ops: uint8 or non-zero zero points (asymmetric),
// per-axis activation scales, a Q without a matching DQ, Q and DQ with different scales, a
// tensor read both through Q/DQ and directly, or through pairs of different scales.
//
// explicitInt8For() then states the result in the optimised graph's terms, which the GPU
// builder consumes like a calibration cache: the scale of every float activation the graph
// still has (a value fusion removed drops its scale), the same as amax = scale * 127, and the
// layer policy: a quantizable layer (findQuantizableLayers) whose activation inputs all have a
// scale is INT8, any other is FP16. Fused nodes keep the name of the node they grew from (a
// FusedConv is named as its Conv), so the policy is keyed by the layer names of the engine.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "edgeinfer/calibration.h"
#include "edgeinfer/status.h"
#include "graph/graph.h"

namespace edgeinfer::quant {

struct QdqAbsorbResult {
  /// Activation value -> the scale the model quantizes it with (absorbed and propagated).
  std::map<std::string, float> scales;
  int pairsAbsorbed = 0;     ///< QuantizeLinear -> DequantizeLinear pairs removed
  int weightsFolded = 0;     ///< weight / bias DequantizeLinear (and QuantizeLinear) folded
  int scalesPropagated = 0;  ///< Relu / MaxPool outputs given their input's scale
  /// One line per Q/DQ node left in place and why ("QuantizeLinear 'q1': zero point is
  /// uint8 (asymmetric)"), for the build log.
  std::vector<std::string> leftInPlace;
};

/// The pass described at the top. Needs dtypes and shapes (run after shape inference).
/// Errors only for an inconsistent graph (kInternal); a pattern it does not take is left alone.
Expected<QdqAbsorbResult> absorbQdq(graph::Graph& g);

/// The model's INT8 in the terms the GPU builder consumes (top of this file).
struct ExplicitInt8 {
  /// The exact model scales of the float activations the graph has (the builder uses these,
  /// not amax / 127, which does not round-trip every float scale).
  std::map<std::string, float> scales;
  /// tensorAmax = scale * 127 and layerPrecision (kInt8 / kFp16 for every quantizable layer);
  /// the other fields are left empty.
  CalibrationCache calibration;
  /// Values that had a scale but are gone from the optimised graph (fused away).
  std::vector<std::string> droppedScales;
  bool empty() const { return scales.empty(); }
  /// Layers the policy puts in INT8.
  std::vector<std::string> int8Layers() const;
};

/// `scales` (absorbQdq's) restricted to the float activations of `g` (the optimised graph),
/// with the layer policy of g's quantizable layers.
ExplicitInt8 explicitInt8For(const graph::Graph& g, const std::map<std::string, float>& scales);

}  // namespace edgeinfer::quant
