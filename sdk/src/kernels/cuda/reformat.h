// Reformat kernels: copy a tensor between two storage formats (element type float32 <->
// float16, float <-> int8 quantized with the tensor's scale, layout NCHW <-> NHWC) on the GPU. The
// builder inserts one where a layer's tactic wants its input in another format than the producer
// wrote it, and times it like a tactic (docs/design/gpu-backend.md). Plain C++ (no CUDA headers).
#pragma once

#include <cstdint>

#include "edgeinfer/status.h"
#include "edgeinfer/types.h"

namespace edgeinfer::cuda {

/// Can `launchReformat` convert between these element types without a scale? (float32 <->
/// float16, or the same type: then only the layout changes.)
bool canReformatTypes(DataType from, DataType to);
/// Float32/float16 <-> int8 with a scale (INT8 engines, issue 6): quantizing computes
/// clamp(round_half_even(x / scale), -128, 127), as QuantizeLinear with zero point 0 does;
/// dequantizing q * scale.
bool isQuantizeReformat(DataType from, DataType to);

/// Copies `count` = n * c * hw elements. `srcNhwc` / `dstNhwc` say whether each side is
/// stored [n][hw][c] instead of [n][c][hw] (use c = 1, hw = numel for non-4-D tensors).
/// `scale` (> 0) is the int8 side's scale for a quantize reformat, unused otherwise.
/// Enqueues on `stream` (a cudaStream_t); no synchronisation, capturable.
Status launchReformat(const void* src, DataType srcType, bool srcNhwc, void* dst, DataType dstType,
                      bool dstNhwc, int64_t n, int64_t c, int64_t hw, void* stream,
                      float scale = 0.f);

}  // namespace edgeinfer::cuda
