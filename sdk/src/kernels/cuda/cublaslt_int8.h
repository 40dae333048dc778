// The `cublaslt-i8` tactic provider (issue 6): INT8 GEMMs through cuBLASLt's integer tensor-core
// (IMMA) kernels, for the layers of an INT8 engine that are plain matrix products:
//
//   - 1x1 convolutions, stride 1, no padding, group 1 (Conv / ai.edgeinfer::FusedConv) on an int8
//     NHWC input: an NHWC tensor is a row-major [M = N*H*W, C] matrix, so
//     Y[M, C_out] = X[M, C_in] * W^T;
//   - Gemm / FusedGemm (transA = 0, constant 2-D B, optional constant C of [N] or [1, N]) and
//     MatMul / FusedMatMul with a constant B (2-D, or leading dims of 1; optional constant bias
//     of N values) on an int8 row-major input.
//
// The tensor formats and scale conventions are those of the cuda-i8 provider (int8_conv.h), so
// int8 tensors flow between the two: activations int8 per tensor with the scales calibration gave
// them (LayerContext::inputScales / outputScales), weights quantized per output channel once, at
// initialize() (quant::quantizeWeights), into K-major [C_out][C_in].
//
// cuBLASLt sees the column-major "TN" problem D[C_out x M] = op(A)[C_out x C_in] * B[C_in x M]
// with A = the weights (col-major C_in x C_out, opA = T), B = the activations (col-major
// C_in x M: the NHWC rows), and D col-major C_out x M, which is NHWC again. IMMA with these
// ordinary layouts needs C_in % 4 == 0 and C_out % 4 == 0 (cuBLAS documents m, k and the leading
// dimensions as multiples of 4); other channel counts are not offered.
//
// Two modes, every algorithm cublasLtMatmulAlgoGetHeuristic returns for each (up to 8, workspace
// at most 32 MiB, accepted by cublasLtMatmulAlgoCheck) being one candidate:
//
//   "e8"  cuBLASLt's own int8 epilogue: CUBLAS_COMPUTE_32I, scale type CUDA_R_32F, D int8,
//         CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST with
//           alpha[k] = (s_x * s_w[k] * gemmAlpha) / s_y,   bias'[k] = B[k] / s_y (float bias),
//           C = the int8 residual Z with beta = s_z / s_y (beta = 0 without one),
//         epilogue BIAS / RELU_BIAS / RELU / DEFAULT:
//           Y = sat8(round(act(alpha[k] * acc + beta * Z_q + bias'[k]))).
//         Offered only for an int8 output, no residual or an int8 one, and an activation that is
//         none, Relu or Clip(0 | -inf, +inf) (ReLU commutes with the positive 1/s_y). The float
//         arithmetic is cuBLASLt's (the scaling by 1/s_y is folded into alpha and bias): the
//         result may differ from cuda-i8's by one quantization step where a value lies within
//         rounding error of a half step. Not offered to bit-exact builds
//         (LayerContext::int8BitExact).
//   "i32" cuBLASLt computes the exact int32 products (CUBLAS_COMPUTE_32I, scale CUDA_R_32I,
//         D int32 in the workspace, in row chunks of at most 32 MiB), and one kernel of ours
//         (cublaslt_int8.cu) applies cuda-i8's epilogue expression by expression:
//           v = act(((float(acc) * alpha[k]) + B[k]) + Z),  Y = sat8(rne(v / s_y)) or half(v),
//         so results equal the bit-exact cuda-i8 tactics' bit for bit (activations with exp/tanh
//         aside), which the CPU's INT8 emulation computes too. Any fused
//         activation, int8 or fp16 output, int8 or fp16 residual.
//
// Ids:
// "cublaslt-i8.<e8|i32>.a<algo>.t<tile>.s<stages>.sk<splitK>.r<reduction>.sw<swizzle>.c<custom>
// .in<inner>.cl<cluster>.<y>.<z>" with y "i8" | "f16" and z "-" | "i8" | "f16" as for cuda-i8.
//
// Not offered (candidates() returns none, lastReason() says why): precisions other than INT8; an
// input without a scale; other ops or shapes (kernels other than 1x1, strides, padding, groups,
// Gemm transA = 1, a runtime B or C, a C other than [N] / [1, N]); C_in or C_out not a multiple
// of 4; non-float32 values or weights; no device, or no algorithm from the heuristic.
// EDGEINFER_DISABLE_CUBLASLT_INT8=1 switches the provider off; =e8 only the "e8" mode.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "builder/tactic.h"
#include "edgeinfer/status.h"
#include "kernels/cuda/fused_activation.h"
#include "kernels/cuda/library_handles.h"

namespace edgeinfer::cuda {

class CublasLtInt8Provider : public builder::TacticProvider {
 public:
  CublasLtInt8Provider();
  ~CublasLtInt8Provider() override;
  std::string name() const override { return "cublaslt-i8"; }
  std::vector<std::unique_ptr<builder::Tactic>> candidates(const builder::LayerContext& layer,
                                                           Precision precision) override;
  /// Why the last candidates() call offered nothing, or per mode how many algorithms the
  /// heuristic returned and how many failed the check. For logs and tests.
  const std::string& lastReason() const { return lastReason_; }

 private:
  DeviceHandles<CublasLtHandle> handles_;  // per CUDA device, shared process-wide
  std::string lastReason_;
};

// ---- The i32 mode's epilogue kernel (cublaslt_int8.cu) -----------------------------------------

/// acc is int32 [rows][K] (row-major, K % 4 == 0); y, z the same elements at row offset `row0`
/// of the layer's [M][K] output (int8 when yScale > 0, else fp16; Z int8 when zScale > 0, else
/// fp16). alpha[K], bias[K] float.
struct Int8GemmEpilogue {
  int64_t rows = 0;
  int32_t K = 0;
  DeviceActivation act = DeviceActivation::kNone;
  float actAlpha = 0.f, actBeta = 0.f;
  float yScale = 0.f;
  bool hasZ = false;
  float zScale = 0.f;
};

/// Enqueues the epilogue on `stream` (cudaStream_t); kInvalidArgument for a K that is not a
/// multiple of 4 or pointers not aligned to their 4-element groups.
Status launchInt8GemmEpilogue(const Int8GemmEpilogue& e, const int32_t* acc, const float* alpha,
                              const float* bias, const void* z, void* y, void* stream);

}  // namespace edgeinfer::cuda
