// The `cublaslt` tactic provider: Gemm, MatMul, ai.edgeinfer::FusedGemm and
// ai.edgeinfer::FusedMatMul with a CONSTANT B (weights) through cublasLtMatmul.
//
//   Gemm / FusedGemm      Y = act(alpha * A' B' + beta * C)      A' = transA ? A^T : A, same for B
//   MatMul / FusedMatMul  Y = act(A @ B + bias[N])               A [..., M, K] folds into [rows, K]
//
// Row-major Y[rows, N] is computed as its column-major transpose Y^T[N, rows] = W * A^T, where
// W is B converted ONCE in initialize() to K-major [N, K] (the layout of a Linear weight) in the
// tactic's element type, so both operands are K-contiguous ("TN" in cuBLAS terms: transa = T on
// W; transb = N, or T for Gemm's transA = 1). The epilogue does the rest, exactly:
//   - a constant C of shape [N] or [1, N] (Gemm), or FusedMatMul's constant bias, becomes the
//     bias vector of CUBLASLT_EPILOGUE_BIAS (Gemm's beta is folded into it: bias = beta * C);
//   - any other constant C (scalar, [M, 1], [M, N], ...) is broadcast once to [M, N] on the
//     device and passed as the matmul's C with beta; a runtime C must already be [M, N];
//   - activation Relu (also Clip(0, +inf)) -> CUBLASLT_EPILOGUE_RELU / RELU_BIAS; Clip(-inf, +inf)
//     is the identity. Other activations have no exact epilogue: no candidate. (GELU_BIAS would
//     apply, but the fused schemas have no Gelu activation.)
//
// Precision: FP32 tactics (A, B, C, D float; CUBLAS_COMPUTE_32F, never TF32) and FP16 tactics
// (A, B, C, D half, bias half as cuBLASLt requires for a half D; compute and scale 32F).
// Precision::kFp32 asks for the FP32 tactics, kFp16 for the FP16 and the FP32 ones, kInt8 for none.
// Every algorithm cublasLtMatmulAlgoGetHeuristic returns (up to 16, workspace at most 32 MiB)
// that cublasLtMatmulAlgoCheck accepts is a separate candidate, with the stable id
//   cublaslt.<fp32|fp16>.a<algoId>.t<tile>.s<stages>.sk<splitK>.r<reduction>.sw<swizzle>
//     .c<customOption>.in<innerShape>.cl<clusterShape>
// (the algorithm's whole configuration, so cublasLtMatmulAlgoInit + ConfigSetAttribute can
// recreate it) and the workspace that algorithm needs.
//
// Formats: input 0 (A), output 0 (Y) and a runtime C are kLinear (row-major) in the tactic's
// element type. Inputs 1 (B) and 2 when constant are consumed in initialize() and ignored at
// enqueue; their declared format is the logical one (float32, kLinear).
//
// Not offered (candidates() returns none and lastReason() says why): a B that is not a constant;
// B with a batch (leading dims other than 1); a 1-D B (MatMul's matrix-vector case, whose bias
// follows the rows; a 1-D A is supported: M = 1); a non-constant FusedMatMul bias; a runtime
// Gemm C that is not [M, N]; non-float types; dynamic or empty shapes; Precision::kInt8.
//
// One cublasLtHandle_t per device is shared by the tactics of a provider (cublasLtMatmul takes
// the stream per call, so enqueue needs no lock).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "builder/tactic.h"
#include "kernels/cuda/library_handles.h"

namespace edgeinfer::cuda {

class CublasLtGemmProvider : public builder::TacticProvider {
 public:
  CublasLtGemmProvider();
  ~CublasLtGemmProvider() override;
  std::string name() const override { return "cublaslt"; }
  std::vector<std::unique_ptr<builder::Tactic>> candidates(const builder::LayerContext& layer,
                                                           Precision precision) override;
  /// Why the last candidates() call returned what it did: the reason a layer is not supported,
  /// or per precision how many algorithms the heuristic offered and how many failed the check.
  /// For logs and tests.
  const std::string& lastReason() const { return lastReason_; }

 private:
  DeviceHandles<CublasLtHandle> handles_;  // per CUDA device, shared process-wide
  std::string lastReason_;
};

}  // namespace edgeinfer::cuda
