// Normalisation CUDA kernels of the `cuda` tactic family: LayerNormalization and
// InstanceNormalization (a mean and variance per row of contiguous elements, then an affine
// transform), MeanVarianceNormalization (a mean and variance over any axes) and LRN (a sum of
// squares over a window of channels). Plain C++ (no device
// syntax): cuda_provider_norm.cpp includes it.
#pragma once

#include <cstdint>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

/// y[r, i] = (x[r, i] - mean_r) / sqrt(var_r + epsilon) * scale[p] + bias[p] over `rows` rows
/// of `len` contiguous elements (biased variance, two passes: mean, then centred squares; float
/// arithmetic). p = i for LayerNormalization (scale/bias dense over the normalised dims), p =
/// r % channels for InstanceNormalization (channels > 0). scale/bias: device float arrays
/// (bias may be null).
struct RowNormPlan {
  int64_t rows = 0, len = 1;
  int64_t channels = 0;  // > 0: parameters per row (InstanceNormalization)
  float epsilon = 1e-5f;
  const float* scale = nullptr;
  const float* bias = nullptr;
};

/// Enqueues the normalisation (fp16: half storage, float arithmetic): a warp per short row, a
/// block per long one. Never synchronises.
Status launchRowNorm(const RowNormPlan& plan, bool fp16, const void* x, void* y, int maxBlocks,
                     void* stream);

/// LRN over a tensor [N, C, S] (S: the spatial dims' product), or [N, S, C] when nhwc:
/// y = x / (bias + alpha / size * sum of x^2 over channels [c - (size-1)/2, c + size/2])^beta.
struct LrnPlan {
  int64_t N = 1, C = 1, S = 1;
  int64_t size = 1;
  float alpha = 1e-4f, beta = 0.75f, bias = 1.f;
  bool nhwc = false;
};

Status launchLrn(const LrnPlan& plan, bool fp16, const void* x, void* y, int maxBlocks,
                 void* stream);

/// Inference BatchNormalization folded into a per-channel affine map over [N, C, S] (or
/// [N, S, C] when nhwc): y = x * scale[c] + shift[c], with scale = gamma / sqrt(var + eps) and
/// shift = beta - mean * scale computed on the host in double. scale/shift: device floats.
struct ChannelAffinePlan {
  int64_t N = 1, C = 1, S = 1;
  bool nhwc = false;
  const float* scale = nullptr;
  const float* shift = nullptr;
};

Status launchChannelAffine(const ChannelAffinePlan& plan, bool fp16, const void* x, void* y,
                           int maxBlocks, void* stream);

/// MeanVarianceNormalization: y = (x - mean) / (sqrt(var) + 1e-9) with the mean and biased
/// variance of each group of elements that share their coordinates along the kept (not
/// reduced) dims. Offsets of a group: its kept coordinates (`groups` of them, kept dims
/// innermost last) times keptStrides; of an element within it: its reduced coordinates times
/// redStrides. Float arithmetic, two passes (mean, then centred squares); a block per group.
struct MvnPlan {
  static constexpr int kMaxDims = 8;
  int kept = 0, reduced = 0;
  int64_t keptDims[kMaxDims] = {}, keptStrides[kMaxDims] = {};
  int64_t redDims[kMaxDims] = {}, redStrides[kMaxDims] = {};
  int64_t groups = 0, groupSize = 0;
};

Status launchMvn(const MvnPlan& plan, bool fp16, const void* x, void* y, int maxBlocks,
                 void* stream);

}  // namespace edgeinfer::cuda
