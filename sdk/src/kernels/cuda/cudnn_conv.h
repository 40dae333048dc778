// The `cudnn` tactic provider: 2-D Conv and ai.edgeinfer::FusedConv through cuDNN's graph
// (backend) API. For each layer it builds the operation graph
//
//   conv_fprop(X, W) [-> ADD B (broadcast [1,K,1,1])] [-> ADD Z] [-> activation] -> Y
//
// (intermediates virtual, float) once per tensor format it offers, asks the engine heuristics
// (CUDNN_HEUR_MODE_A, then CUDNN_HEUR_MODE_FALLBACK) for engine configurations, and turns
// every configuration whose execution plan finalizes into a separate candidate tactic with a
// stable id "cudnn.conv.<fp32|fp16>.<nhwc|nchw>.e<engine>.k<knob=value,...>".
//
// Candidates that leave the activation out of the graph and apply it with our kernel right
// after cuDNN's, in place on Y (launchActivationInPlace, one more launch; ids
// "cudnn.conv.<format>.act.e<engine>..."): all engine configurations for an activation with no
// exact pointwise mode (HardSigmoid, HardSwish, Selu, Softplus; Clip with an infinite lower
// bound), the first four per format for the others but ReLU (a fallback when no fused plan
// finalizes, and an alternative the builder times). SiLU (x * Sigmoid(x)) maps to SWISH_FWD
// with beta 1.
//
// Formats: FP16 (io half, compute float) NHWC; FP32 (io and compute float) NHWC and NCHW.
// Precision::kFp32 asks for the FP32 tactics, kFp16 for the FP16 and the FP32 ones. FP32
// tactics never use TF32: engine configurations noted DOWN_CONVERT_INPUTS or TENSOR_CORE are
// left out for FP32, and REDUCED_PRECISION_REDUCTION ones for both precisions.
//
// Not offered (candidates() returns none and lastReason() says why): other ranks than 2-D,
// non-float inputs, weights or bias that are not constants (the tactic converts them once in
// initialize(); a runtime weight is left to other providers), Precision::kInt8.
//
// Execution plans are finalized in initialize() and serialize as cuDNN's JSON
// (Tactic::serializedState, stored in the engine plan); an engine load rebuilds them from it
// with restore(), which skips the heuristics and the run-time compilation of fused kernels
// (about 0.25 s per depthwise layer on an H100), and falls back to find() when the JSON no
// longer loads (another cuDNN).
//
// Inputs 1 (W) and 2 (B) are consumed in initialize() and ignored at enqueue; their declared
// format is the logical one (float32, kLinear). One cudnnHandle_t per device is shared by the
// tactics of a provider; enqueue serialises cudnnSetStream + cudnnBackendExecute on it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "builder/tactic.h"
#include "kernels/cuda/library_handles.h"

namespace edgeinfer::cuda {

class CudnnConvProvider : public builder::TacticProvider {
 public:
  CudnnConvProvider();
  ~CudnnConvProvider() override;
  std::string name() const override { return "cudnn"; }
  std::vector<std::unique_ptr<builder::Tactic>> candidates(const builder::LayerContext& layer,
                                                           Precision precision) override;
  /// Builds only the operation graph of the id's format and stops at the first heuristic
  /// result with that id (an engine load: not every format and heuristic mode per layer).
  std::unique_ptr<builder::Tactic> find(const builder::LayerContext& layer, Precision precision,
                                        const std::string& id) override;
  /// Rebuilds the execution plan from the JSON the tactic serialized at build time (no
  /// heuristics, no kernel compilation); falls back to find() when cuDNN cannot read it.
  std::unique_ptr<builder::Tactic> restore(const builder::LayerContext& layer, Precision precision,
                                           const std::string& id,
                                           const std::string& state) override;
  /// Why the last candidates() call returned what it did: the reason a layer is not
  /// supported, or per format how many engine configurations were offered, filtered and
  /// failed to finalize. For logs and tests.
  const std::string& lastReason() const { return lastReason_; }

 private:
  // candidates() and find(): every candidate, or (wanted != null) only the one with that id.
  std::vector<std::unique_ptr<builder::Tactic>> enumerate(const builder::LayerContext& layer,
                                                          Precision precision,
                                                          const std::string* wanted);
  DeviceHandles<CudnnHandle> handles_;  // per CUDA device, shared process-wide
  std::string lastReason_;
};

}  // namespace edgeinfer::cuda
