// Softmax / LogSoftmax / Hardmax / LpNormalization CUDA kernels of the `cuda` tactic family.
// The tensor is viewed as [outer, len, inner] (physical order) and normalised along `len`.
// Plain C++ (no device syntax): cuda_provider.cpp includes it.
#pragma once

#include <cstdint>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

enum class AxisOp { kSoftmax, kLogSoftmax, kHardmax, kLpNorm1, kLpNorm2 };

struct SoftmaxPlan {
  AxisOp op = AxisOp::kSoftmax;
  int64_t outer = 1, len = 1, inner = 1;
};

/// Enqueues the normalisation on `stream`. Softmax / LogSoftmax: rows (inner == 1) get one warp
/// each (one block when long), strided columns one thread each; max-subtracted, sums in float.
/// Hardmax (1 at the first maximum along the axis, NaN never a maximum, 0 elsewhere) and
/// LpNormalization (x / the 1- or 2-norm along the axis, float sums; a zero vector stays zero)
/// as the CPU reference: one thread per (outer, inner) pair. Never synchronises; returns the
/// launch error, if any.
Status launchSoftmax(const SoftmaxPlan& plan, bool fp16, const void* input, void* output,
                     int maxBlocks, void* stream);

}  // namespace edgeinfer::cuda
