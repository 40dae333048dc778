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

}  // namespace edgeinfer::cuda::dev
