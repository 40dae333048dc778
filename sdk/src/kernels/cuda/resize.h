// Resize CUDA kernels of the `cuda` tactic family for 4-D tensors (NCHW or NHWC storage). The
// host tabulates, per output coordinate of every axis, the input taps and weights (nearest: 1,
// linear: 2, cubic: 4) exactly as the CPU reference computes them for every mode it supports;
// the kernel then sums the products of the four axes' taps (N and C normally have one tap of
// weight 1, so the sum is over the spatial taps). Plain C++ (no device syntax):
// cuda_provider_data.cpp includes it.
#pragma once

#include <cstdint>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

/// The taps of one output coordinate along one axis.
struct ResizeAxisTaps {
  int32_t index[4] = {};
  float weight[4] = {};
  int32_t count = 0;
  int32_t outside = 0;  // tf_crop_and_resize: the output takes extrapolation_value
};

/// Logical (NCHW-order) sizes of one resize.
struct ResizePlan {
  bool nhwc = false;
  int64_t N = 0, C = 0, H = 0, W = 0;      // input
  int64_t ON = 0, OC = 0, OH = 0, OW = 0;  // output
  float extrapolation = 0.f;
  /// Device array of the ON, OC, OH and OW taps of the four axes, in that order (owned by
  /// the tactic).
  const ResizeAxisTaps* taps = nullptr;
};

/// Enqueues the resize (fp16: half storage, float arithmetic). Never synchronises.
Status launchResize(const ResizePlan& plan, bool fp16, const void* x, void* y, int maxBlocks,
                    void* stream);

}  // namespace edgeinfer::cuda
