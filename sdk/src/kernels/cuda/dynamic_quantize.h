// DynamicQuantizeLinear on the GPU: the range of x (min with 0, max with 0) found by a grid
// reduction, y_scale = (hi - lo) / 255 and y_zero_point = saturate(round((0 - lo) / y_scale))
// computed on the device, then y = saturate(round(x / y_scale) + y_zero_point) in uint8: exactly
// the CPU reference (kernels/ref/quant.cpp: IEEE float32 division, round half to even; NaNs
// are left out of the range and quantize to the zero point; an all-zero x gives scale 0,
// zero point 0, y 0). Three launches on one stream, no host synchronisation. Plain C++.
#pragma once

#include <cstddef>
#include <cstdint>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

/// Device scratch launchDynamicQuantize needs (per-block partial ranges, scale, zero point).
size_t dynamicQuantizeWorkspaceBytes();

/// x: `n` float32 values; y: n uint8; yScale (float32) and yZeroPoint (uint8) may be null when
/// nothing reads them. Never synchronises.
Status launchDynamicQuantize(const float* x, int64_t n, uint8_t* y, float* yScale,
                             uint8_t* yZeroPoint, void* workspace, size_t workspaceBytes,
                             int maxBlocks, void* stream);

}  // namespace edgeinfer::cuda
