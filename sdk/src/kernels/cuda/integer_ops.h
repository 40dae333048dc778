// MatMulInteger and ConvInteger on the GPU: int8 / uint8 operands, their zero points (constant
// or computed at run time, as DynamicQuantizeLinear gives them) subtracted (MatMulInteger: per
// tensor, A's per row, B's per column; ConvInteger: X's per tensor, W's per tensor or output
// channel), products summed into an int32 output that wraps as int32
// arithmetic does: exactly the CPU reference (kernels/ref/qlinear.cpp). A thread per output
// element (correct, not fast: the fast INT8 layers are the INT8 builds' tactics); MatMulInteger
// broadcasts batches as numpy does, ConvInteger takes 1 to 3 spatial dims, groups, strides,
// dilations and pads (padded positions add nothing). Plain C++ (no device syntax).
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
  // Whether A's zero points run along its rows ([M]) and B's along its columns ([N]) rather
  // than being one value.
  bool aZpPerRow = false, bZpPerCol = false;
};

/// Enqueues y = (a - aZp) x (b - bZp) on `stream`; never synchronises. The zero points are
/// device arrays of their operand's type (constant or computed at run time), or null for 0.
Status launchIntMatMul(const IntMatMulPlan& plan, const void* a, const void* b, const void* aZp,
                       const void* bZp, int32_t* y, int maxBlocks, void* stream);

struct IntConvPlan {
  static constexpr int kMaxSpatial = 3;
  bool xSigned = true, wSigned = true;  // int8 (true) or uint8
  int spatial = 2;                      // 1 to kMaxSpatial; unused dims have size 1
  int64_t N = 1, C = 1, M = 1, group = 1;
  int64_t in[kMaxSpatial] = {1, 1, 1}, out[kMaxSpatial] = {1, 1, 1};
  int64_t kernel[kMaxSpatial] = {1, 1, 1}, stride[kMaxSpatial] = {1, 1, 1};
  int64_t dilation[kMaxSpatial] = {1, 1, 1}, padBegin[kMaxSpatial] = {0, 0, 0};
  bool wZpPerChannel = false;  // W's zero points: [M] (per output channel) or one value
};

/// Enqueues y = conv(x - xZp, w - wZp) (NCHW, int32 output) on `stream`; never synchronises.
/// xZp (one value) and wZp are device arrays of their operand's type, or null for 0.
Status launchIntConv(const IntConvPlan& plan, const void* x, const void* w, const void* xZp,
                     const void* wZp, int32_t* y, int maxBlocks, void* stream);

}  // namespace edgeinfer::cuda
