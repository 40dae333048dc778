// The `cublas` tactic provider: ONNX MatMul with a RUNTIME (non-constant) B, batched with numpy
// broadcasting of the leading dims, through cublasLtMatmul's strided batches (a constant B is
// the `cublaslt` provider's: it converts the weights once, see cublaslt_gemm.h).
//
//   Y[..., M, N] = A[..., M, K] @ B[..., K, N]   (a 1-D A is [1, K], a 1-D B is [K, 1])
//
// Row-major Y = A B is computed as its column-major transpose Y^T = B^T A^T, so A, B and Y are
// used in place, without transposes. The broadcast batch dims are merged where both operands
// step through them uniformly; the innermost merged group is cuBLASLt's batch (a broadcast
// operand has batch stride 0), the outer groups are a host loop of matmul calls at enqueue
// (no synchronisation, allocation or copy: CUDA-graph safe). A B shared by the whole batch
// with a contiguous A folds the batch into M: one plain GEMM.
//
// Precision: FP32 tactics (float data, CUBLAS_COMPUTE_32F, never TF32) and FP16 tactics (half
// data, compute and scale 32F). Precision::kFp32 asks for the FP32 tactics, kFp16 for both,
// kInt8 for none. Every algorithm cublasLtMatmulAlgoGetHeuristic returns (up to 8, workspace
// at most 32 MiB) that cublasLtMatmulAlgoCheck accepts is a candidate with the stable id
//   cublas.bmm.<fp32|fp16>.a<algoId>.t<tile>.s<stages>.sk<splitK>.r<reduction>.sw<swizzle>
//     .c<customOption>
// Formats: every input and the output kLinear (row-major) in the tactic's element type.
//
// Not offered: a constant B; non-float or mixed types; dynamic or empty shapes; batch dims that
// do not broadcast; Precision::kInt8. (Checked before any device call, so these answer without
// a GPU.)
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "builder/tactic.h"
#include "kernels/cuda/library_handles.h"

namespace edgeinfer::cuda {

class CublasBatchedMatMulProvider : public builder::TacticProvider {
 public:
  CublasBatchedMatMulProvider();
  ~CublasBatchedMatMulProvider() override;
  std::string name() const override { return "cublas"; }
  std::vector<std::unique_ptr<builder::Tactic>> candidates(const builder::LayerContext& layer,
                                                           Precision precision) override;
  /// Why the last candidates() call returned what it did (for logs and tests).
  const std::string& lastReason() const { return lastReason_; }

 private:
  DeviceHandles<CublasLtHandle> handles_;  // per CUDA device, shared process-wide
  std::string lastReason_;
};

}  // namespace edgeinfer::cuda
