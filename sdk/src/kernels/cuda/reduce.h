// Reduction CUDA kernels (ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1,
// ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare) of the `cuda` tactic
// family. The host merges the reduced axes into one [outer, red, inner] view (the reduced
// axes must be adjacent once dims of size 1 are dropped). Plain C++ (no device syntax):
// cuda_provider.cpp includes it.
#pragma once

#include <cstdint>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

enum class ReduceOp : int32_t {
  kSum,
  kMean,
  kMax,
  kMin,
  kProd,
  kL1,
  kL2,
  kLogSum,
  kLogSumExp,  // combined pairwise as log-sums (no overflow for large inputs)
  kSumSquare,
};

/// y[o, i] = reduce over r of x[o, r, i] (red >= 1). Accumulates in float; Max/Min propagate
/// NaN as the reference does.
struct ReducePlan {
  ReduceOp op = ReduceOp::kSum;
  int64_t outer = 1, red = 1, inner = 1;
};

/// Enqueues the reduction (fp16: half storage, float arithmetic). Never synchronises.
Status launchReduce(const ReducePlan& plan, bool fp16, const void* x, void* y, int maxBlocks,
                    void* stream);

}  // namespace edgeinfer::cuda
