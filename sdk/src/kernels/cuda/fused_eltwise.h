// The `cuda-fe` tactic provider: ai.edgeinfer::FusedElementwise (graph/ops/fused_elementwise.h)
// as ONE kernel. Each thread takes 4 consecutive output elements (or 1 where the broadcast
// pattern or alignment does not allow vectors), loads every input's values there (numpy
// broadcasting through per-input strides, 0 along broadcast dims), runs the node's register
// program with the register file held in hardware registers (every access is an unrolled
// select, never a dynamically indexed local array) and stores the result. Each opcode computes
// the expression of the CPU reference kernel (kernels/ref/fused_elementwise.cpp).
//
// Tactic ids "cuda-fe.<fp32|fp16>.<nchw|nhwc|linear>": FP32, or FP16 storage with float
// arithmetic; a 4-D output is offered in NCHW and NHWC (inputs of rank 4 in the same layout,
// other inputs kLinear), any other rank as kLinear. Precision::kFp32 offers the FP32 tactics,
// kFp16 the FP16 and FP32 ones, kInt8 none. No input is consumed: constant inputs are uploaded
// by the engine in the declared format. enqueue() only launches the kernel.
//
// Not offered (candidates() returns none, lastReason() says why): other nodes, programs that
// do not decode, non-float or mixed input types, dynamic shapes, ranks above 8, inputs that do
// not broadcast to the output.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "builder/tactic.h"
#include "edgeinfer/status.h"
#include "graph/ops/fused_elementwise.h"

namespace edgeinfer::cuda {

class FusedEltwiseProvider : public builder::TacticProvider {
 public:
  std::string name() const override { return "cuda-fe"; }
  std::vector<std::unique_ptr<builder::Tactic>> candidates(const builder::LayerContext& layer,
                                                           Precision precision) override;
  /// Why the last candidates() call offered nothing (empty when it offered tactics).
  const std::string& lastReason() const { return lastReason_; }

 private:
  std::string lastReason_;
};

// ---- Kernel launch interface (plain C++; the kernel is in fused_eltwise.cu) -----------------

inline constexpr int kFeMaxDims = 8;

/// One launch in PHYSICAL order: the output is contiguous with `dims` (outermost first, size-1
/// dims dropped, adjacent dims merged where every input allows), strides[k][d] is input k's
/// element stride along dim d (0 where broadcast).
struct FusedEltwisePlan {
  graph::FeProgram program;
  int rank = 1;
  int64_t dims[kFeMaxDims] = {};
  int64_t strides[graph::kFeMaxInputs][kFeMaxDims] = {};
  int64_t numel = 0;
};

/// Enqueues y = program(inputs...) on `stream` (cudaStream_t); fp16 selects half storage.
/// Never synchronises; returns the launch error, if any.
Status launchFusedEltwise(const FusedEltwisePlan& plan, bool fp16, const void* const* inputs,
                          void* output, int maxBlocks, void* stream);

}  // namespace edgeinfer::cuda
