// Selection CUDA kernels of the `cuda` tactic family: ArgMax / ArgMin and TopK along one axis
// of a tensor viewed as [outer, len, inner]. Results match the CPU reference exactly
// (kernels/ref/reduce.cpp, kernels/ref/detection.cpp), ties and NaN included. Plain C++ (no
// device syntax): cuda_provider_norm.cpp includes it.
#pragma once

#include <cstdint>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

/// y[o, i] (int64) = the index along len of the largest (isMax) or smallest x[o, :, i], as
/// the reference's sequential scan finds it: the first such index (the last one with
/// selectLast); NaN never wins except at index 0, where nothing replaces it.
struct ArgPlan {
  bool isMax = true, selectLast = false;
  int64_t outer = 1, len = 1, inner = 1;
};

Status launchArg(const ArgPlan& plan, bool fp16, const void* x, void* y, int maxBlocks,
                 void* stream);

/// Longest axis TopK handles: the whole axis is sorted in shared memory (8 bytes an element).
inline constexpr int64_t kTopKMaxLen = 16384;

/// values[o, j, i] and indices[o, j, i] (int64), j < k: the elements of x[o, :, i] in the
/// reference's order (largest: descending, NaN first; otherwise ascending, NaN last; equal
/// values by increasing index): a block per (o, i) bitonic-sorts (value, index) pairs.
struct TopKPlan {
  bool largest = true;
  int64_t outer = 1, len = 1, inner = 1, k = 1;
};

/// Dynamic shared memory a TopK launch of this plan needs, in bytes.
size_t topKSharedBytes(const TopKPlan& plan);

/// Allows the kernels the plan's shared memory on the current device (once, at initialize);
/// kUnsupported when the device has less.
Status prepareTopK(const TopKPlan& plan);

/// indices may be null (the output is not used).
Status launchTopK(const TopKPlan& plan, bool fp16, const void* x, void* values, void* indices,
                  void* stream);

}  // namespace edgeinfer::cuda
