// MatMulInteger on the GPU: int8 / uint8 operands, their zero points subtracted (per tensor, A's
// per row, B's per column), products summed into an int32 output that wraps as int32
// arithmetic does: exactly the CPU reference (kernels/ref/qlinear.cpp). A thread per output
// element; numpy batch broadcasting. Plain C++ (no device syntax).
#pragma once

#include <cstdint>

#include "edgeinfer/status.h"
#include "edgeinfer/types.h"

namespace edgeinfer::cuda {

struct IntMatMulPlan {
  static constexpr int kMaxBatchDims = 6;
  bool aSigned = true, bSigned = true;  // int8 (true) or uint8
  int64_t M = 1, K = 1, N = 1;
  int batchRank = 0;
  int64_t batchDims[kMaxBatchDims] = {};
  // Per batch dim: the step, in matrices, of A's and B's matrix (0 where that operand
  // broadcasts along it).
  int64_t aBatchStride[kMaxBatchDims] = {}, bBatchStride[kMaxBatchDims] = {};
  int64_t batches = 1;
  // Zero points (device int32 arrays) or null for 0: A's [1] or [M] (per row), B's [1] or [N]
  // (per column).
  const int32_t* aZp = nullptr;
  const int32_t* bZp = nullptr;
  bool aZpPerRow = false, bZpPerCol = false;
};

/// Enqueues y = (a - aZp) x (b - bZp) on `stream`; never synchronises.
Status launchIntMatMul(const IntMatMulPlan& plan, const void* a, const void* b, int32_t* y,
                       int maxBlocks, void* stream);

}  // namespace edgeinfer::cuda
