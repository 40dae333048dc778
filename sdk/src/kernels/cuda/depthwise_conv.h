// The `cuda-dw` tactic provider: our own CUDA kernels for 2-D depthwise convolutions (Conv and
// ai.edgeinfer::FusedConv with group == C_in and C_out = multiplier * C_in), where cuDNN is weak
// (MobileNetV2 / EfficientNet-B0 at batch 1). One kernel computes
//
//   Y = act((conv(X, W) + B) + Z)      (the order of the CPU reference, kernels/ref/conv.cpp)
//
// with the bias, the residual Z and every activation the FusedConv schema allows fused in, for
// any kernel size, stride, dilation and (asymmetric) padding.
//
// Candidates, each a separate tactic the builder times, with ids
// "cuda-dw.<variant>.<fp32|fp16>.<nchw|nhwc>":
//   variant  "k3" (3x3 kernels only, fully unrolled), "k5" (5x5 only), "generic" (any size)
//   fp32     float storage and arithmetic; fp16: half storage, float accumulation
//   nchw     one output element per thread, consecutive threads along W
//   nhwc     one output pixel and a vector of channels per thread (16 bytes: 4 floats or 8
//            halves, or a half2 when C_out % 8 != 0; scalar when the multiplier is not 1)
// Precision::kFp32 offers the FP32 tactics, kFp16 the FP16 and the FP32 ones, kInt8 none.
//
// Inputs 1 (W) and 2 (B) are consumed: initialize() converts them once into the tactic's
// layout ([K][R][S] for NCHW, [R][S][K] for NHWC) and element type on the device; at enqueue
// their pointers are ignored. Their declared format is the logical one (float32, kLinear).
// Z (input 3) is read in the output's format. enqueue() only launches a kernel.
//
// Not offered (candidates() returns none, lastReason() says why): other ranks than 2-D,
// dynamic shapes, non-float tensors, weights or bias that are not constants, group != C_in,
// more than 2^31 elements in a tensor, Precision::kInt8.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "builder/tactic.h"
#include "edgeinfer/status.h"
#include "kernels/cuda/fused_activation.h"

namespace edgeinfer::cuda {

class DepthwiseConvProvider : public builder::TacticProvider {
 public:
  std::string name() const override { return "cuda-dw"; }
  std::vector<std::unique_ptr<builder::Tactic>> candidates(const builder::LayerContext& layer,
                                                           Precision precision) override;
  /// Why the last candidates() call offered nothing (empty when it offered tactics).
  const std::string& lastReason() const { return lastReason_; }

 private:
  std::string lastReason_;
};

// ---- Kernel launch interface (plain C++; the kernels are in depthwise_conv.cu) -------------

/// One depthwise convolution, logical sizes (every index fits in int32).
struct DepthwisePlan {
  int32_t N = 0, C = 0, H = 0, W = 0;  // input
  int32_t K = 0, M = 1;                // output channels, multiplier (K = M * C)
  int32_t P = 0, Q = 0;                // output spatial
  int32_t R = 0, S = 0;                // kernel
  int32_t strideH = 1, strideW = 1, dilH = 1, dilW = 1, padTop = 0, padLeft = 0;
  DeviceActivation act = DeviceActivation::kNone;
  float alpha = 0.f, beta = 0.f;
  int32_t kernelSize = 0;  // template specialisation: 3, 5, or 0 (runtime R x S)
  bool nhwc = false;
  bool fp16 = false;
};

/// Device pointers of one launch; weights are [K][R][S] (NCHW) or [R][S][K] (NHWC) in the
/// storage type, bias [K] or null, z (output's shape and format) or null.
struct DepthwiseArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;
  const void* z = nullptr;
  void* y = nullptr;
};

/// Enqueues the convolution on `stream` (cudaStream_t); never synchronises. NHWC launches use
/// the widest channel vector that C_out, the multiplier and the pointers' alignment allow.
Status launchDepthwiseConv(const DepthwisePlan& plan, const DepthwiseArgs& args, int maxBlocks,
                           void* stream);

}  // namespace edgeinfer::cuda
