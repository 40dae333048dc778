// The `cuda` tactic provider: EdgeInfer's own CUDA kernels (docs/design/gpu-backend.md).
// Ops (family in the id):
//   eltwise    unary/activation/binary ops with numpy broadcasting (Clip bounds constant)
//   pool       MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool (2-D)
//   softmax    Softmax, LogSoftmax
//   concat     Concat, any axis and number of inputs (NCHW/NHWC on 4-D)
//   transpose  Transpose, rank <= 6
//   slice      Slice with constant starts/ends/axes/steps, negative steps too (NCHW/NHWC on 4-D)
//   expand     Expand with a constant shape
//   pad        Pad (constant, reflect, edge; constant pads and value; NCHW/NHWC on 4-D)
//   gather     Gather with runtime or constant int32/int64 indices, negative ones too
//   resize     Resize of a 4-D tensor (canonical form of Resize/Upsample): nearest (every
//              nearest_mode), linear and cubic, every coordinate mode the CPU reference
//              supports; constant roi/scales/sizes (NCHW/NHWC)
//   reduce     ReduceSum, ReduceMean, ReduceMax, ReduceMin (axes adjacent once size-1 dims
//              are dropped)
//   layernorm  LayerNormalization (any axis; constant Scale/B broadcast to the normalised
//              dims; only the Y output: a layer asking for Mean/InvStdDev gets no candidate)
//   instancenorm InstanceNormalization (constant scale/B)
//   lrn        LRN (NCHW/NHWC on 4-D)
//   argmax, argmin  ArgMax/ArgMin (any axis, keepdims, select_last_index; int64 output)
//   topk       TopK with k constant (attribute or input), axis up to 16384 long, int64 indices
//   cumsum     CumSum with a constant axis, exclusive/reverse (float, int32, int64)
//   scatterelements, scatternd  ScatterElements (and opset-9 Scatter) / ScatterND, reduction
//              "none", runtime or constant int32/int64 indices; the last of duplicate updates
//              wins, as in the reference (float, int32, int64)
// (cuda_provider_norm.cpp: the last eight families; cuda_provider_data.cpp: data movement,
// Resize and Reduce; cuda_provider.cpp: the rest.)
// Every (storage type, layout) variant of a kernel family is its own tactic with a stable id,
// "cuda.<family>.<fp32|fp16|i32|i64>.<nchw|nhwc|linear>"; the layout part names the layout of
// the layer's 4-D tensors ("linear" when the output is not 4-D). FP16 tactics store half and
// compute in float; the integer types (data movement, CumSum, scatters) are stored as they are.
//
// Plain C++ (no CUDA headers): the builder and the tests include it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "builder/tactic.h"

namespace edgeinfer::cuda {

class CudaKernelProvider : public builder::TacticProvider {
 public:
  std::string name() const override { return "cuda"; }
  /// kFp32: the FP32 tactics; kFp16 (and kInt8, for layers without an integer form): the
  /// FP16 and the FP32 tactics, for the builder to time. Only ops, attributes, element types
  /// and shapes the kernels fully support produce candidates (static shapes, non-empty for the
  /// families after softmax; float32/float16 tensors, int32/int64 too for data movement (an
  /// integer layer gets its one integer tactic at any precision); Clip bounds, Slice bounds,
  /// Expand shape, Pad pads, Resize scales constant; MaxPool without its Indices output; 2-D
  /// pooling only).
  std::vector<std::unique_ptr<builder::Tactic>> candidates(const builder::LayerContext& layer,
                                                           Precision precision) override;
};

}  // namespace edgeinfer::cuda
