// Device side of the symmetric int8 quantize every INT8 kernel ends with (ONNX QuantizeLinear,
// zero point 0): clamp(round_half_even(v / scale), -128, 127), NaN -> 0, with the division
// correctly rounded first, as the host reference (quant::fakeQuantize, the CPU backend) computes
// it. Shared by the INT8 convolutions' epilogue (int8_conv_epilogue.cuh), cuBLASLt's i32
// epilogue (cublaslt_int8.cu) and the quantize reformat (reformat.cu). Device code: include
// only from .cu files.
#pragma once

#include <cstdint>

namespace edgeinfer::cuda::dev {

/// Without the division where it cannot change the result: for |t| < 256, t = v * (1 / scale)
/// (both rounded) is within 2^-22 relative (3.1e-5 absolute) of v / scale, and the rounded
/// quotient within 1.6e-5 of it, so both round to the same integer unless t is within 1e-3 of a
/// half-integer; there, and for NaN, infinities, |t| >= 256 and a scale whose reciprocal
/// overflows, the exact division decides. (A reciprocal that is subnormal, scale > 2^126, is
/// still within 2^-22 relative; this assumes IEEE subnormals: no -ftz / --use_fast_math.)
__device__ __forceinline__ int8_t quantizeToInt8(float v, float scale) {
  const float t = __fmul_rn(v, __frcp_rn(scale));
  const float frac = fabsf(__fsub_rn(t, truncf(t)));
  const float q = fabsf(t) < 256.f && fabsf(__fsub_rn(frac, 0.5f)) > 1e-3f
                      ? rintf(t)
                      : rintf(__fdiv_rn(v, scale));
  if (q != q) return 0;
  return static_cast<int8_t>(fminf(fmaxf(q, -128.f), 127.f));
}

}  // namespace edgeinfer::cuda::dev
