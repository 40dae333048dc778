// The `cuda` tactic provider: EdgeInfer's own CUDA kernels (docs/design/gpu-backend.md).
// First batch: elementwise unary/activation/binary ops with numpy broadcasting, 2-D pooling,
// Softmax/LogSoftmax. Every (storage type, layout) variant of a kernel family is its own
// tactic with a stable id, "cuda.<family>.<fp32|fp16>.<nchw|nhwc|linear>"; the layout part
// names the layout of the layer's 4-D tensors ("linear" when the output is not 4-D). FP16
// tactics store half and compute in float.
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
  /// and shapes the kernels fully support produce candidates (static shapes, float32/float16
  /// tensors; Clip bounds constant; MaxPool without its Indices output; 2-D pooling only).
  std::vector<std::unique_ptr<builder::Tactic>> candidates(const builder::LayerContext& layer,
                                                           Precision precision) override;
};

}  // namespace edgeinfer::cuda
