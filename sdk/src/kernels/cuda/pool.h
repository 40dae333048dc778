// 2-D pooling CUDA kernels (MaxPool, AveragePool, LpPool, GlobalAveragePool, GlobalMaxPool) of the
// `cuda` tactic family: the plan the tactic fills from conv_geometry.h and the launcher.
// Plain C++ (no device syntax): cuda_provider.cpp includes it.
#pragma once

#include <cstdint>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

enum class PoolKind : int32_t { kMax, kAverage, kGlobalAverage, kGlobalMax, kLp };

/// Logical sizes (NCHW order) and the window of one pooling launch.
struct PoolPlan {
  PoolKind kind = PoolKind::kMax;
  bool nhwc = false;
  bool countIncludePad = false;  // AveragePool
  int64_t lpP = 2;               // LpPool
  int64_t N = 0, C = 0, H = 0, W = 0, OH = 1, OW = 1;
  int64_t kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1;
  int64_t padTop = 0, padLeft = 0, padBottom = 0, padRight = 0;
};

/// Enqueues the pooling on `stream` (fp16: half storage, float arithmetic). Never
/// synchronises; returns the launch error, if any.
Status launchPool(const PoolPlan& plan, bool fp16, const void* input, void* output, int maxBlocks,
                  void* stream);

/// Enqueues an INT8 MaxPool (kind kMax, nhwc): x and y int8 NHWC, x quantized with scale `sIn`,
/// y with `sOut` (both > 0). y = quantize(max(x) * sIn, sOut) with quantize.cuh's rounding: the
/// result of dequantizing x, pooling in float and quantizing (max commutes with a positive
/// scale), without the float tensor in between; max(x) itself where the scales are equal. A
/// window with no tap inside the input gives -128. Never synchronises.
Status launchMaxPoolInt8(const PoolPlan& plan, float sIn, float sOut, const void* input,
                         void* output, int maxBlocks, void* stream);

/// Enqueues a GlobalAveragePool or GlobalMaxPool (NCHW or NHWC, as plan.nhwc) of a float
/// input (fp16: half, else float32) whose result is written as int8 [N, C], quantized with
/// `sOut` (> 0) as the quantize reformat rounds it (quantize.cuh), from the float result: the
/// same bits as a float32-output pool followed by that reformat (an fp16-output pool would
/// round the result to half first), without the float tensor and the launch in between (an
/// INT8 classifier after the pool reads it as it is). Never synchronises.
Status launchGlobalPoolInt8Out(const PoolPlan& plan, bool fp16, float sOut, const void* input,
                               void* output, int maxBlocks, void* stream);

}  // namespace edgeinfer::cuda
