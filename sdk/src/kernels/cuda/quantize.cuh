// Device side of the symmetric int8 quantize every INT8 kernel ends with (ONNX QuantizeLinear,
// zero point 0): clamp(round_half_even(v / scale), -128, 127), NaN -> 0, with the division
// correctly rounded first, as the host reference (quant::fakeQuantize, the CPU backend) computes
// it. Shared by the INT8 convolutions' epilogue (int8_conv_epilogue.cuh), cuBLASLt's i32
// epilogue (cublaslt_int8.cu) and the quantize reformat (reformat.cu). Device code: include
// only from .cu files.
#pragma once

#include <cstdint>

namespace edgeinfer::cuda::dev {

/// 1.5 * 2^23: adding it to a float of magnitude below 2^22 rounds that to an integer (to
/// nearest, ties to even: the FP32 add's own rounding, one unit being the last place there), and
/// the sum's bits minus this constant's bits are that integer; adding an int32 of magnitude
/// below 2^22 to its bits gives the float of that integer plus it. Full-rate FP32 and integer
/// operations instead of the conversion unit's (I2F, F2I, FRND: a quarter of the rate on sm_90,
/// which bounded the int8 epilogues of write-heavy layers).
constexpr float kRoundMagic = 12582912.f;
constexpr int32_t kRoundMagicBits = 0x4B400000;

/// Byte `i` (0..3, known at compile time) of `w` under the exponent of 2^23: the bits of the
/// float 2^23 + byte, in one byte permute. Written with the constant as the permute's first
/// operand, so that the selector is the instruction's immediate (with the constant second, the
/// compiler kept the selector in a register, set again before each use).
__device__ __forceinline__ uint32_t byteUnder2p23(uint32_t w, int i) {
  return __byte_perm(0x4B000000u, w, 0x3104u + static_cast<uint32_t>(i));
}

/// Signed byte `i` of a word as a float, exactly, given the word with its bytes' sign bits
/// flipped (w ^ 0x80808080, once for its four bytes): (2^23 + byte + 128) - (2^23 + 128), no
/// sign extension and no conversion.
__device__ __forceinline__ float flippedByteToFloat(uint32_t flipped, int i) {
  return __int_as_float(byteUnder2p23(flipped, i)) - 8388736.f;
}

/// float(x[e]) for N values, exact for every int32 (as the conversion): two full-rate
/// operations each when all |x[e]| < 2^22 (accumulators almost always are), the conversion
/// unit's I2F otherwise (one branch for the N).
template <int N>
__device__ __forceinline__ void intsToFloats(const int32_t (&x)[N], float (&f)[N]) {
  bool small = true;
#pragma unroll
  for (int e = 0; e < N; ++e) small &= static_cast<uint32_t>(x[e]) + (1u << 22) < (1u << 23);
  if (small) {
#pragma unroll
    for (int e = 0; e < N; ++e)
      f[e] = __fsub_rn(__int_as_float(x[e] + kRoundMagicBits), kRoundMagic);
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) f[e] = static_cast<float>(x[e]);
  }
}

/// Without the division where it cannot change the result: for |t| < 256, t = v * (1 / scale)
/// (both rounded) is within 2^-22 relative (3.1e-5 absolute) of v / scale, and the rounded
/// quotient within 1.6e-5 of it, so both round to the same integer unless t is within 1e-3 of a
/// half-integer (|t - rint(t)| >= 0.499); there, and for NaN, infinities, |t| >= 256 and a scale
/// whose reciprocal overflows, the exact division decides. (A reciprocal that is subnormal,
/// scale > 2^126, is still within 2^-22 relative; this assumes IEEE subnormals: no -ftz /
/// --use_fast_math.) `inv` is __frcp_rn(scale).
__device__ __forceinline__ int8_t quantizeToInt8(float v, float scale, float inv) {
  const float t = __fmul_rn(v, inv);
  const float q = fabsf(t) < 256.f && fabsf(__fsub_rn(t, rintf(t))) < 0.499f
                      ? rintf(t)
                      : rintf(__fdiv_rn(v, scale));
  if (q != q) return 0;
  return static_cast<int8_t>(fminf(fmaxf(q, -128.f), 127.f));
}

__device__ __forceinline__ int8_t quantizeToInt8(float v, float scale) {
  return quantizeToInt8(v, scale, __frcp_rn(scale));
}

/// quantizeToInt8 of N values, the same results: where every one takes the fast path, the
/// rounding and the conversion to an integer in full-rate operations (kRoundMagic), else
/// quantizeToInt8 one by one (one branch for the N).
template <int N>
__device__ __forceinline__ void quantizeToInt8(const float (&v)[N], float scale, float inv,
                                               int8_t (&o)[N]) {
  bool fast = true;
  int32_t q[N];
#pragma unroll
  for (int e = 0; e < N; ++e) {
    const float t = __fmul_rn(v[e], inv);
    const float big = __fadd_rn(t, kRoundMagic);  // rint(t) + 1.5 * 2^23 for |t| < 2^22
    fast &= fabsf(t) < 256.f && fabsf(__fsub_rn(t, __fsub_rn(big, kRoundMagic))) < 0.499f;
    q[e] = __float_as_int(big) - kRoundMagicBits;
  }
  if (fast) {
#pragma unroll
    for (int e = 0; e < N; ++e) o[e] = static_cast<int8_t>(min(max(q[e], -128), 127));
  } else {
#pragma unroll
    for (int e = 0; e < N; ++e) o[e] = quantizeToInt8(v[e], scale, inv);
  }
}

/// The fast INT8 epilogue's quantize (int8_conv.h): `t`, the value in output steps (v / s_y,
/// rounded), clamped to [-128, 127] and rounded half to even by adding kRoundMagic, whose sum's
/// low byte is then the int8 (the sum's bits are kRoundMagicBits plus the integer, and that
/// constant's low byte is 0). Returned in the low byte of an int32. NaN gives -128 (fmaxf), or
/// 0 as the bit-exact quantize gives it with `nanToZero` (two more operations: only an fp16
/// residual, or non-finite weights, bias or scales, can bring a NaN into an epilogue of int32
/// accumulators; Int8ConvPlan::nanToZero says when).
__device__ __forceinline__ uint32_t quantizeStepsFast(float t, bool nanToZero) {
  float c = fminf(fmaxf(t, -128.f), 127.f);
  if (nanToZero && t != t) c = 0.f;
  return static_cast<uint32_t>(__float_as_int(__fadd_rn(c, kRoundMagic)));
}

/// quantizeStepsFast of 8 values, packed into 8 bytes: three byte permutes per 4 values.
__device__ __forceinline__ uint2 quantizeStepsFast8(const float (&t)[8], bool nanToZero) {
  uint32_t b[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) b[e] = quantizeStepsFast(t[e], nanToZero);
  const uint32_t lo =
      __byte_perm(__byte_perm(b[0], b[1], 0x0040), __byte_perm(b[2], b[3], 0x0040), 0x5410);
  const uint32_t hi =
      __byte_perm(__byte_perm(b[4], b[5], 0x0040), __byte_perm(b[6], b[7], 0x0040), 0x5410);
  return make_uint2(lo, hi);
}

}  // namespace edgeinfer::cuda::dev
