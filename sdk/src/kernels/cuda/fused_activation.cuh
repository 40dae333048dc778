// Device side of fused_activation.h: ref::applyActivation (kernels/ref/activation.h),
// expression by expression, so a fused GPU kernel rounds as the CPU reference does. Device
// code: include only from .cu files.
#pragma once

#include "kernels/cuda/fused_activation.h"

namespace edgeinfer::cuda::dev {

// std::max / std::min as the reference uses them (comparison based: NaN handling matches).
__device__ __forceinline__ float refMax(float a, float b) {
  return a < b ? b : a;
}
__device__ __forceinline__ float refMin(float a, float b) {
  return b < a ? b : a;
}

__device__ __forceinline__ float activate(float x, DeviceActivation act, float alpha, float beta) {
  switch (act) {
    case DeviceActivation::kNone:
      return x;
    case DeviceActivation::kRelu:
      return x > 0.f ? x : 0.f;
    case DeviceActivation::kLeakyRelu:
      return x >= 0.f ? x : alpha * x;
    case DeviceActivation::kClip:
      return refMin(refMax(x, alpha), beta);
    case DeviceActivation::kSigmoid:
      return 1.f / (1.f + expf(-x));
    case DeviceActivation::kHardSigmoid:
      return refMax(0.f, refMin(1.f, alpha * x + beta));
    case DeviceActivation::kHardSwish:
      return x * refMax(0.f, refMin(1.f, x / 6.f + 0.5f));
    case DeviceActivation::kTanh:
      return tanhf(x);
    case DeviceActivation::kElu:
      return x >= 0.f ? x : alpha * (expf(x) - 1.f);
    case DeviceActivation::kSelu:
      return x > 0.f ? beta * x : beta * (alpha * expf(x) - alpha);
    case DeviceActivation::kSoftplus:
      return x > 20.f ? x : log1pf(expf(x));
    case DeviceActivation::kSilu:
      return x * (1.f / (1.f + expf(-x)));
  }
  return x;
}

/// activate() on every element of `v`: one unrolled loop per activation, the choice made once,
/// so the code a tile's epilogue runs is one short stretch (not a switch per element, every
/// activation's code interleaved: a kernel of instruction-cache misses).
template <int N>
__device__ __forceinline__ void activateAll(float (&v)[N], DeviceActivation act, float alpha,
                                            float beta) {
#define EI_ACTIVATE_ALL(kind)                                \
  case DeviceActivation::kind:                               \
    _Pragma("unroll") for (int i = 0; i < N; ++i) v[i] =     \
        activate(v[i], DeviceActivation::kind, alpha, beta); \
    return;
  switch (act) {
    case DeviceActivation::kNone:
      return;
      EI_ACTIVATE_ALL(kRelu)
      EI_ACTIVATE_ALL(kLeakyRelu)
      EI_ACTIVATE_ALL(kClip)
      EI_ACTIVATE_ALL(kSigmoid)
      EI_ACTIVATE_ALL(kHardSigmoid)
      EI_ACTIVATE_ALL(kHardSwish)
      EI_ACTIVATE_ALL(kTanh)
      EI_ACTIVATE_ALL(kElu)
      EI_ACTIVATE_ALL(kSelu)
      EI_ACTIVATE_ALL(kSoftplus)
      EI_ACTIVATE_ALL(kSilu)
  }
#undef EI_ACTIVATE_ALL
}

}  // namespace edgeinfer::cuda::dev
