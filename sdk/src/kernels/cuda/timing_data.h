// Values for the builder's timing launches (builder/cuda/gpu_builder.cpp): a tactic is timed on
// scratch inputs, and zeros flatter some kernels. Tensor cores draw less power on zeros (higher
// clocks), and data-dependent paths (a rounding's exact fallback, a branch on a value) are never
// taken: an int8 epilogue that took its exact division near half steps ran twice as long on a
// real image as on zeros, and the builder chose it (docs/performance.md). Float and int8
// scratch inputs are therefore filled with pseudo-random values in the range real activations
// have; other types (indices, masks, shapes) stay zero, which is always in range.
// Plain C++ (no device syntax).
#pragma once

#include <cstddef>
#include <cstdint>

#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"

namespace edgeinfer::cuda {

/// Whether fillTimingData() writes values for `type` (float32, float16, int8); other types are
/// left as they are.
bool fillsTimingData(DataType type);

/// Fills `count` elements of `type` at device pointer `p` on `stream` (cudaStream_t): float32
/// and float16 uniform in [-1, 1) (the scale of normalised activations), int8 uniform over
/// [-127, 127], the same values for the same `seed`. Other types: nothing. Never synchronises.
Status fillTimingData(void* p, DataType type, int64_t count, uint32_t seed, void* stream);

}  // namespace edgeinfer::cuda
