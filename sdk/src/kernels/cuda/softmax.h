// Softmax / LogSoftmax CUDA kernels of the `cuda` tactic family. The tensor is viewed as
// [outer, len, inner] (physical order) and normalised along `len`. Plain C++ (no device
// syntax): cuda_provider.cpp includes it.
#pragma once

#include <cstdint>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

struct SoftmaxPlan {
  bool logSoftmax = false;
  int64_t outer = 1, len = 1, inner = 1;
};

/// Enqueues the normalisation on `stream`: rows (inner == 1) get one warp each (one block
/// when long), strided columns one thread each; max-subtracted, sums in float. Never
/// synchronises; returns the launch error, if any.
Status launchSoftmax(const SoftmaxPlan& plan, bool fp16, const void* input, void* output,
                     int maxBlocks, void* stream);

}  // namespace edgeinfer::cuda
