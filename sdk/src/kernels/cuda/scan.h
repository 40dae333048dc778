// CumSum CUDA kernels of the `cuda` tactic family: a prefix sum along one axis of a tensor
// viewed as [outer, len, inner]. Float storage (fp32/fp16) accumulates in double, as the CPU
// reference does (kernels/ref/tensor_ops.cpp); int32/int64 in 64-bit integers with
// wrap-around. Plain C++ (no device syntax): cuda_provider_norm.cpp includes it.
#pragma once

#include <cstdint>

#include "edgeinfer/status.h"
#include "edgeinfer/types.h"

namespace edgeinfer::cuda {

/// y[o, k, i] = sum of x[o, k', i] over k' <= k (k' < k when exclusive; k' >= k / k' > k
/// when reverse).
struct CumSumPlan {
  int64_t outer = 1, len = 1, inner = 1;
  bool exclusive = false, reverse = false;
};

/// storage: kFloat32, kFloat16, kInt32 or kInt64. Never synchronises.
Status launchCumSum(const CumSumPlan& plan, DataType storage, const void* x, void* y, int maxBlocks,
                    void* stream);

}  // namespace edgeinfer::cuda
