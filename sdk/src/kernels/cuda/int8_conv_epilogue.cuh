// Device side of int8_conv.h's epilogue, shared by the mma.sync kernels (int8_conv.cu) and the
// Hopper wgmma kernels (int8_conv_sm90a.cu, int8_conv_tma_sm90a.cu), in its two roundings
// (Int8ConvPlan::exact): bit-exact, the same expressions as the host's rounded one operation at a
// time (__fmul_rn / __fadd_rn: no FMA contraction; quantize.cuh's quantizeToInt8), so every
// kernel equals the host computation bit for bit; or fast, fused multiply-adds and
// quantizeStepsFast, within one step of it. Device code: include only from .cu files.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/fused_activation.cuh"
#include "kernels/cuda/int8_conv.h"
#include "kernels/cuda/quantize.cuh"

namespace edgeinfer::cuda::dev {

/// The residual Z at NHWC index `idx` as a float (int8 dequantized with its scale, or fp16).
__device__ __forceinline__ float i8Residual(const Int8ConvPlan& p, const void* z, int64_t idx) {
  return p.zScale > 0.f
             ? __fmul_rn(static_cast<float>(static_cast<const int8_t*>(z)[idx]), p.zScale)
             : __half2float(static_cast<const __half*>(z)[idx]);
}

/// The epilogue up to the activation for one accumulator with its channel's alpha `a` and bias
/// `b`, the output element at NHWC index `idx` (the residual's).
__device__ __forceinline__ float i8Affine(const Int8ConvPlan& p, int32_t acc, float a, float b,
                                          int64_t idx, const void* z) {
  float v = __fmul_rn(static_cast<float>(acc), a);
  v = __fadd_rn(v, b);
  if (p.hasZ) v = __fadd_rn(v, i8Residual(p, z, idx));
  return v;
}

/// i8Affine of the fast epilogue: fused multiply-adds (with the plan's prescaled alpha and bias,
/// v in output steps).
__device__ __forceinline__ float i8AffineFast(const Int8ConvPlan& p, int32_t acc, float a, float b,
                                              int64_t idx, const void* z) {
  float v = fmaf(static_cast<float>(acc), a, b);
  if (p.hasZ)
    v = p.zScale > 0.f ? fmaf(static_cast<float>(static_cast<const int8_t*>(z)[idx]), p.zMul, v)
                       : fmaf(__half2float(static_cast<const __half*>(z)[idx]), p.zMul, v);
  return v;
}

/// The epilogue for one output element at NHWC index `idx`, channel `k`, up to the quantize.
__device__ __forceinline__ float i8Epilogue(const Int8ConvPlan& p, int32_t acc, int k, int64_t idx,
                                            const float* __restrict__ alpha,
                                            const float* __restrict__ bias, const void* z) {
  return activate(p.exact ? i8Affine(p, acc, alpha[k], bias[k], idx, z)
                          : i8AffineFast(p, acc, alpha[k], bias[k], idx, z),
                  p.act, p.alpha, p.beta);
}

/// i8Epilogue's `v` quantized to the output's int8 as the plan's rounding says.
__device__ __forceinline__ int8_t i8Quantize(const Int8ConvPlan& p, float v) {
  if (p.exact) return quantizeToInt8(v, p.yScale);
  return static_cast<int8_t>(
      quantizeStepsFast(p.prescaled ? v : __fmul_rn(v, p.yInv), p.nanToZero) & 0xffu);
}

/// `v` into the shared output tile at (row `r`, column `cl`), int8 or fp16 as the plan says.
__device__ __forceinline__ void i8StageValue(const Int8ConvPlan& p, float v, int r, int cl, int ldo,
                                             int8_t* tile) {
  if (p.yScale > 0.f)
    tile[r * ldo + cl] = i8Quantize(p, v);
  else
    *reinterpret_cast<__half*>(&tile[r * ldo + 2 * cl]) = __float2half_rn(v);
}

/// The epilogue written to y[idx] (int8 or fp16, as the plan says).
__device__ __forceinline__ void i8StoreOutput(const Int8ConvPlan& p, int32_t acc, int k,
                                              int64_t idx, const float* __restrict__ alpha,
                                              const float* __restrict__ bias, const void* z,
                                              void* y) {
  const float v = i8Epilogue(p, acc, k, idx, alpha, bias, z);
  if (p.yScale > 0.f)
    static_cast<int8_t*>(y)[idx] = i8Quantize(p, v);
  else
    static_cast<__half*>(y)[idx] = __float2half_rn(v);
}

/// One accumulator of a block's BM x BN output tile (row `r`, column `cl` of the tile, whose
/// first element is output pixel m0, channel n0) through the epilogue into the shared output
/// tile `tile` (rows `ldo` bytes apart, int8 or fp16 elements). Outside the output: nothing.
__device__ __forceinline__ void i8StageOutput(const Int8ConvPlan& p, int32_t acc, int r, int cl,
                                              int m0, int n0, int rows, int ldo,
                                              const float* __restrict__ alpha,
                                              const float* __restrict__ bias, const void* z,
                                              int8_t* tile) {
  const int m = m0 + r, k = n0 + cl;
  if (m >= rows || k >= p.K) return;
  i8StageValue(p, i8Epilogue(p, acc, k, static_cast<int64_t>(m) * p.K + k, alpha, bias, z), r, cl,
               ldo, tile);
}

/// Row pitch (32-bit words) of the shared accumulator tile of the wgmma kernels' epilogue: 8
/// words of padding put the 8 rows a warp stores on different banks.
template <int BN>
constexpr int kWgmmaAccPitch = BN + 8;

/// Rows of the wgmma accumulators staged at once: all BM when they fit in `smemBytes`, else the
/// 64 of one warpgroup at a time.
template <int BM, int BN>
__host__ __device__ constexpr int wgmmaEpilogueRows(int smemBytes) {
  return BM * kWgmmaAccPitch<BN> * 4 <= smemBytes ? BM : 64;
}

/// Whether the rows wgmmaEpilogueRows stages fit in `smemBytes` at all.
template <int BM, int BN>
__host__ __device__ constexpr bool wgmmaEpilogueFits(int smemBytes) {
  return wgmmaEpilogueRows<BM, BN>(smemBytes) * kWgmmaAccPitch<BN> * 4 <= smemBytes;
}

/// One thread's wgmma accumulators (m64nBN s32) into the shared int32 tile (rows
/// kWgmmaAccPitch<BN> words apart): register 4j + 2h + e is row `row0` + 8h, column
/// 8j + `col0` + e (row0 = 16 warp + lane / 4 within the warpgroup's 64 rows, col0 =
/// 2 (lane % 4)); two neighbouring columns per 8-byte store.
template <int BN>
__device__ __forceinline__ void i8StoreWgmmaAccumulators(const int32_t (&acc)[BN / 2], int row0,
                                                         int col0, int32_t* tile) {
#pragma unroll
  for (int j = 0; j < BN / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *reinterpret_cast<int2*>(&tile[(row0 + 8 * h) * kWgmmaAccPitch<BN> + 8 * j + col0]) =
          make_int2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
}

/// How the wgmma kernels' epilogue walks a tile of NROWS rows x BN channels with THREADS
/// threads: 8 channels of one pixel a step, step `it` of a thread is group tid + it * THREADS.
template <int BN, int NROWS, int THREADS>
struct WgmmaEpilogueWalk {
  static constexpr int kGroups = BN / 8;  // 8-channel groups of a row
  static constexpr int kSteps = (NROWS * kGroups + THREADS - 1) / THREADS;
};

/// Whether the epilogue reads the residual 8 values at a time (K % 8 == 0, 16-byte aligned).
__device__ __forceinline__ bool i8VectorResidual(const Int8ConvPlan& p, const void* z) {
  return p.hasZ && p.K % 8 == 0 && (reinterpret_cast<uintptr_t>(z) & 15) == 0;
}

/// The residual of a thread's epilogue steps (i8WgmmaEpilogue), 16 raw bytes a step (8 int8 or
/// 8 fp16), loaded early: a kernel issues these loads before its main loop, so the epilogue of
/// a layer with a residual and few K steps (ResNet's 1x1 expansions) does not wait for memory
/// once per step. Nothing without a residual or where it is not read 8 values at a time.
template <int BN, int NROWS, int THREADS>
__device__ __forceinline__ void i8LoadResidual(
    const Int8ConvPlan& p, const void* z, int m0, int n0, int rows, int tid,
    uint4 (&raw)[WgmmaEpilogueWalk<BN, NROWS, THREADS>::kSteps]) {
  using Walk = WgmmaEpilogueWalk<BN, NROWS, THREADS>;
  if (!i8VectorResidual(p, z)) return;
#pragma unroll
  for (int it = 0; it < Walk::kSteps; ++it) {
    const int i = tid + it * THREADS;
    const int m = m0 + i / Walk::kGroups, k0 = n0 + (i % Walk::kGroups) * 8;
    if (i >= NROWS * Walk::kGroups || m >= rows || k0 >= p.K) continue;
    const int64_t base = static_cast<int64_t>(m) * p.K + k0;
    if (p.zScale > 0.f) {
      const uint2 v = *reinterpret_cast<const uint2*>(static_cast<const int8_t*>(z) + base);
      raw[it] = make_uint4(v.x, v.y, 0u, 0u);
    } else {
      raw[it] = *reinterpret_cast<const uint4*>(static_cast<const __half*>(z) + base);
    }
  }
}

/// Eight accumulators `q` of one pixel's consecutive channels through their alpha `a` and bias
/// `b` into `v` (the first part of i8Epilogue, eight at a time): bit-exact, one rounding an
/// operation; fast, fused multiply-adds, the int32 -> float in two full-rate operations where
/// `smallAcc` (|acc| < 2^22: R * S * C <= 256).
__device__ __forceinline__ void i8Affine8(const Int8ConvPlan& p, const int32_t (&q)[8],
                                          const float (&a)[8], const float (&b)[8], bool smallAcc,
                                          float (&v)[8]) {
  if (p.exact) {
    intsToFloats(q, v);
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = __fadd_rn(__fmul_rn(v[e], a[e]), b[e]);
    return;
  }
  if (smallAcc) {  // |acc| <= 256 * 128 * 127 < 2^22: two full-rate operations
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = __int_as_float(q[e] + kRoundMagicBits) - kRoundMagic;
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e) v[e] = static_cast<float>(q[e]);
  }
#pragma unroll
  for (int e = 0; e < 8; ++e) v[e] = fmaf(v[e], a[e], b[e]);
}

/// The residual's eight values added to `v`: `raw` holds them as 8 int8 (its first 8 bytes,
/// when the plan's Z has a scale) or 8 fp16.
__device__ __forceinline__ void i8AddResidual8(const Int8ConvPlan& p, const uint4& raw,
                                               float (&v)[8]) {
  const int8_t* zq = reinterpret_cast<const int8_t*>(&raw);
  const __half* zh = reinterpret_cast<const __half*>(&raw);
  if (p.zScale > 0.f) {
#pragma unroll
    for (int e = 0; e < 8; ++e)  // float(zq) exactly, without a conversion
      v[e] = p.exact ? __fadd_rn(v[e], __fmul_rn(__fsub_rn(__int_as_float(zq[e] + kRoundMagicBits),
                                                           kRoundMagic),
                                                 p.zScale))
                     : fmaf(__int_as_float(zq[e] + kRoundMagicBits) - kRoundMagic, p.zMul, v[e]);
  } else {
#pragma unroll
    for (int e = 0; e < 8; ++e)
      v[e] =
          p.exact ? __fadd_rn(v[e], __half2float(zh[e])) : fmaf(__half2float(zh[e]), p.zMul, v[e]);
  }
}

/// Eight activated values `v` of consecutive channels to the output at element `base` of y:
/// quantized (int8 outputs: the plan's rounding; `inv` = __frcp_rn(s_y) for the bit-exact one)
/// or converted to fp16, stored as one 8- or 16-byte piece where `whole` (the 8 channels exist
/// and y + base is aligned for it), else the first `n` one by one.
__device__ __forceinline__ void i8Store8(const Int8ConvPlan& p, float (&v)[8], float inv, void* y,
                                         int64_t base, bool whole, int n) {
  if (p.yScale > 0.f) {
    alignas(8) int8_t o[8];
    if (p.exact) {
      quantizeToInt8(v, p.yScale, inv, o);
    } else {
      if (!p.prescaled) {
#pragma unroll
        for (int e = 0; e < 8; ++e) v[e] = __fmul_rn(v[e], p.yInv);
      }
      *reinterpret_cast<uint2*>(o) = quantizeStepsFast8(v, p.nanToZero);
    }
    int8_t* dst = static_cast<int8_t*>(y) + base;
    if (whole) {
      *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(o);
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (e < n) dst[e] = o[e];
    }
  } else {
    alignas(16) __half2 o[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) o[e] = __floats2half2_rn(v[2 * e], v[2 * e + 1]);
    __half* dst = static_cast<__half*>(y) + base;
    if (whole) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(o);
    } else {
      const __half* oh = reinterpret_cast<const __half*>(o);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        if (e < n) dst[e] = oh[e];
    }
  }
}

/// Whether the plan's epilogue takes the lean path (i8Lean8): the fast rounding of an int8 output
/// in output steps (prescaled) from sums below 2^22 (`smallAcc`), no residual or an int8 one, no
/// activation or Relu, no NaN to map. The common case of CNN layers (ResNet's).
__host__ __device__ inline bool i8LeanEpilogue(const Int8ConvPlan& p, bool smallAcc) {
  return !p.exact && p.prescaled && p.yScale > 0.f && (!p.hasZ || p.zScale > 0.f) && smallAcc &&
         !p.nanToZero && (p.act == DeviceActivation::kNone || p.act == DeviceActivation::kRelu);
}

/// The lean path's 8 int8 outputs (in the returned 8 bytes): the same operations as i8Affine8,
/// i8AddResidual8 (with the residual's 8 int8 in `zRaw` where `hasZ`), activateAll and
/// quantizeStepsFast8, with Relu and the clamp to [-128, 127] merged into one clamp to
/// [`floor`, 127] (floor 0 with Relu, -128 without: the same results), and no branch on the
/// plan's options. About 6 operations an element, 9 with a residual; the generic path took
/// about twice as many, which bounded the write-heavy 1x1 layers (docs/performance.md).
/// SMALL (the sums within 2^22, i8SmallSums8): the int32 -> float as an addition to 1.5 * 2^23's
/// bits; !SMALL, sums of any size: an exact conversion (I2F, quarter rate), the general path's
/// results for the lean plans. STARTED (with SMALL): the sums started at kRoundMagicBits
/// (startedSmallSums8), so their bits are already 1.5 * 2^23 + the sum.
template <bool SMALL = true, bool STARTED = false>
__device__ __forceinline__ uint2 i8Lean8(const int32_t (&q)[8], const float (&a)[8],
                                         const float (&b)[8], bool hasZ, uint2 zRaw, float zMul,
                                         float floor) {
  const uint32_t zx[2] = {zRaw.x ^ 0x80808080u, zRaw.y ^ 0x80808080u};  // flippedByteToFloat
  uint32_t o[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const float sum = STARTED ? __int_as_float(q[e]) - kRoundMagic
                      : SMALL ? __int_as_float(q[e] + kRoundMagicBits) - kRoundMagic
                              : static_cast<float>(q[e]);
    float v = fmaf(sum, a[e], b[e]);
    if (hasZ) v = fmaf(flippedByteToFloat(zx[e >> 2], e & 3), zMul, v);
    o[e] = static_cast<uint32_t>(__float_as_int(fminf(fmaxf(v, floor), 127.f) + kRoundMagic));
  }
  return make_uint2(
      __byte_perm(__byte_perm(o[0], o[1], 0x0040), __byte_perm(o[2], o[3], 0x0040), 0x5410),
      __byte_perm(__byte_perm(o[4], o[5], 0x0040), __byte_perm(o[6], o[7], 0x0040), 0x5410));
}

/// fma(x, y, z) clamped to [0, 1] in the same instruction (FFMA.SAT).
__device__ __forceinline__ float fmaSat(float x, float y, float z) {
  float r;
  asm("fma.rn.sat.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(x), "f"(y), "f"(z));
  return r;
}

/// The lean epilogue of 8 outputs of a pixel (8 consecutive channels) to 8 int8 in 8 bytes,
/// from sums that the K loop started at kRoundMagicBits (mmaS8From; wgmma accumulators set to
/// it): q's bits as a float are 1.5 * 2^23 + the sum exactly (|sum| < 2^22: guaranteed for a K
/// of 256 bytes at most, else checked by startedSmallSums8), so one subtraction gives the sum
/// as a float.
///   - The residual's int8 z become floats without a conversion or a sign extension: each byte
///     xor 0x80 (z + 128 unsigned) is placed by one byte permute under the exponent of 2^23, a
///     float of 2^23 + z + 128, from which one subtraction leaves z.
///   - Relu: `a`, `b` and `zMul` come divided by 127, so the clamp to [0, 127] is the
///     saturation of a fused multiply-add to [0, 1] (FFMA.SAT), and one more (t * 127 + 1.5 *
///     2^23) rounds to the integer in the low byte; without: the clamp to [-128, 127], then the
///     add.
/// About 3.75 operations an output without a residual, 7 with one (i8Lean8: 6.75 and 11). The
/// results are the fast rounding's (the test's rounding noise: the scaled constants add a
/// relative error of a few 2^-24 of the terms).
template <bool RELU, bool Z>
__device__ __forceinline__ uint2 lean8(const int32_t (&q)[8], const float (&a)[8],
                                       const float (&b)[8], uint2 zRaw, float zMul) {
  const uint32_t zx[2] = {zRaw.x ^ 0x80808080u, zRaw.y ^ 0x80808080u};
  uint32_t o[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const float s = __int_as_float(q[e]) - kRoundMagic;
    float zf = 0.f;
    if constexpr (Z) zf = flippedByteToFloat(zx[e >> 2], e & 3);
    if constexpr (RELU) {
      const float t = Z ? fmaSat(zf, zMul, fmaf(s, a[e], b[e])) : fmaSat(s, a[e], b[e]);
      o[e] = __float_as_uint(fmaf(t, 127.f, kRoundMagic));
    } else {
      float v = fmaf(s, a[e], b[e]);
      if constexpr (Z) v = fmaf(zf, zMul, v);
      o[e] = __float_as_uint(fminf(fmaxf(v, -128.f), 127.f) + kRoundMagic);
    }
  }
  return make_uint2(
      __byte_perm(__byte_perm(o[0], o[1], 0x0040), __byte_perm(o[2], o[3], 0x0040), 0x5410),
      __byte_perm(__byte_perm(o[4], o[5], 0x0040), __byte_perm(o[6], o[7], 0x0040), 0x5410));
}

/// Whether the 8 sums that started at kRoundMagicBits (lean8's) are all within [-2^22, 2^22):
/// their values then lie in [0x4B000000, 0x4B800000), whose every member has the same 9 top
/// bits. One operation a sum (the xor and the or in one LOP3).
__device__ __forceinline__ bool startedSmallSums8(const int32_t (&q)[8]) {
  uint32_t m = 0;
#pragma unroll
  for (int e = 0; e < 8; ++e) m |= static_cast<uint32_t>(q[e]) ^ 0x4B000000u;
  return m < (1u << 23);
}

/// Whether the 8 sums are all within [-2^22, 2^22): the range where i8Lean8's int32 -> float (the
/// sum added to 1.5 * 2^23's bits) is exact. Two operations a sum.
__device__ __forceinline__ bool i8SmallSums8(const int32_t (&q)[8]) {
  uint32_t m = 0;
#pragma unroll
  for (int e = 0; e < 8; ++e) m |= static_cast<uint32_t>(q[e] ^ (q[e] >> 31));  // |q| or |q| - 1
  return m < (1u << 22);
}

/// The epilogue of NROWS rows of a shared int32 accumulator tile (i8StoreWgmmaAccumulators;
/// output pixel m0 and channel n0 at its origin) straight to y, by THREADS threads: 8 channels
/// of one pixel per step, read from shared memory in 16-byte pieces, alpha and bias in 16-byte
/// pieces, the residual 8 values at a time (PRE: from `zRaw`, i8LoadResidual's), the 8 outputs
/// stored as one 8-byte (int8) or 16-byte (fp16) piece where K % 8 == 0 and the pointers allow,
/// element by element at the tile's edges. The activation is chosen once a step
/// (activateAll), not once an element. The steps are a rolled loop (short code, few registers)
/// unless PRE (then unrolled: zRaw stays in registers).
template <int BN, int NROWS, int THREADS, bool PRE>
__device__ __forceinline__ void i8WgmmaEpilogue(
    const Int8ConvPlan& p, const int32_t* tile, int m0, int n0, int rows,
    const float* __restrict__ alpha, const float* __restrict__ bias, const void* z, void* y,
    int tid, const uint4 (&zRaw)[WgmmaEpilogueWalk<BN, NROWS, THREADS>::kSteps]) {
  using Walk = WgmmaEpilogueWalk<BN, NROWS, THREADS>;
  constexpr int kUnroll = PRE ? Walk::kSteps : 1;
  const bool vec = p.K % 8 == 0 && (reinterpret_cast<uintptr_t>(y) & 15) == 0 &&
                   (reinterpret_cast<uintptr_t>(alpha) & 15) == 0 &&
                   (reinterpret_cast<uintptr_t>(bias) & 15) == 0;
  const bool vecZ = vec && i8VectorResidual(p, z);
  const float inv = __frcp_rn(p.yScale);  // for the bit-exact quantize (int8 outputs)
  const bool smallAcc = p.gemmK <= 256;   // every sum within 2^22, whatever the data
  // The lean path also where larger sums are possible (a 3x3 layer of 64 channels and more:
  // gemmK 576 and up), for the steps whose 8 sums are within 2^22 (i8SmallSums8: in practice
  // all of them); the others take the general path. (With the general path for the whole
  // layer, about 45 instructions an output: ResNet's 3x3 layers, Nsight Compute, H200.)
  const bool lean = vec && i8LeanEpilogue(p, true);
  const float floor = p.act == DeviceActivation::kRelu ? 0.f : -128.f;
#pragma unroll kUnroll
  for (int it = 0; it < Walk::kSteps; ++it) {
    const int i = tid + it * THREADS;
    const int r = i / Walk::kGroups, c = (i % Walk::kGroups) * 8;
    const int m = m0 + r, k0 = n0 + c;
    if (i >= NROWS * Walk::kGroups || m >= rows || k0 >= p.K) continue;
    const int n = min(8, p.K - k0);
    const int4 lo = *reinterpret_cast<const int4*>(&tile[r * kWgmmaAccPitch<BN> + c]);
    const int4 hi = *reinterpret_cast<const int4*>(&tile[r * kWgmmaAccPitch<BN> + c + 4]);
    const int32_t q[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
    alignas(16) float a[8];
    alignas(16) float b[8];
    if (vec) {  // n == 8
      *reinterpret_cast<float4*>(&a[0]) = __ldg(reinterpret_cast<const float4*>(alpha + k0));
      *reinterpret_cast<float4*>(&a[4]) = __ldg(reinterpret_cast<const float4*>(alpha + k0 + 4));
      *reinterpret_cast<float4*>(&b[0]) = __ldg(reinterpret_cast<const float4*>(bias + k0));
      *reinterpret_cast<float4*>(&b[4]) = __ldg(reinterpret_cast<const float4*>(bias + k0 + 4));
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        a[e] = e < n ? __ldg(alpha + k0 + e) : 0.f;
        b[e] = e < n ? __ldg(bias + k0 + e) : 0.f;
      }
    }
    const int64_t base = static_cast<int64_t>(m) * p.K + k0;
    // n == 8; an int8 residual read 8 values at a time
    if (lean && (vecZ || !p.hasZ) && (smallAcc || i8SmallSums8(q))) {
      uint2 z8 = make_uint2(0u, 0u);
      if (p.hasZ) {
        if constexpr (PRE) {
          z8 = make_uint2(zRaw[it].x, zRaw[it].y);
        } else {
          z8 = *reinterpret_cast<const uint2*>(static_cast<const int8_t*>(z) + base);
        }
      }
      *reinterpret_cast<uint2*>(static_cast<int8_t*>(y) + base) =
          i8Lean8(q, a, b, p.hasZ, z8, p.zMul, floor);
      continue;
    }
    float v[8];
    i8Affine8(p, q, a, b, smallAcc, v);
    if (p.hasZ) {
      if (vecZ) {  // 8 values in one 8- or 16-byte load
        alignas(16) uint4 raw;
        if constexpr (PRE) {
          raw = zRaw[it];
        } else if (p.zScale > 0.f) {
          const uint2 v2 = *reinterpret_cast<const uint2*>(static_cast<const int8_t*>(z) + base);
          raw = make_uint4(v2.x, v2.y, 0u, 0u);
        } else {
          raw = *reinterpret_cast<const uint4*>(static_cast<const __half*>(z) + base);
        }
        i8AddResidual8(p, raw, v);
      } else {
#pragma unroll
        for (int e = 0; e < 8; ++e)
          if (e < n) {
            if (p.exact) {
              v[e] = __fadd_rn(v[e], i8Residual(p, z, base + e));
            } else {
              const float zf = p.zScale > 0.f
                                   ? static_cast<float>(static_cast<const int8_t*>(z)[base + e])
                                   : __half2float(static_cast<const __half*>(z)[base + e]);
              v[e] = fmaf(zf, p.zMul, v[e]);
            }
          }
      }
    }
    activateAll(v, p.act, p.alpha, p.beta);
    i8Store8(p, v, inv, y, base, vec, n);
  }
}

/// The shared output tile (BM rows of BN elements, `ldo` bytes apart) to y in whole 16-byte
/// pieces of output rows (coalesced), by `threads` threads; partial pieces byte by byte.
template <int BM, int BN>
__device__ __forceinline__ void i8StoreTile(const Int8ConvPlan& p, const int8_t* tile, int ldo,
                                            int m0, int n0, int rows, void* y, int tid,
                                            int threads) {
  const int es = p.yScale > 0.f ? 1 : 2;
  const int rowBytes = min(BN, p.K - n0) * es;  // this block's part of an output row
  const bool vec = (static_cast<int64_t>(p.K) * es) % 16 == 0;
  auto* out = static_cast<int8_t*>(y);
  const int pieces = BN * es / 16;  // 16-byte pieces of a tile row
  for (int i = tid; i < BM * pieces; i += threads) {
    const int r = i / pieces, off = (i - r * pieces) * 16;
    if (m0 + r >= rows || off >= rowBytes) continue;
    int8_t* dst = out + (static_cast<int64_t>(m0 + r) * p.K + n0) * es + off;
    const int8_t* src = &tile[r * ldo + off];
    if (vec && off + 16 <= rowBytes) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
    } else {
      for (int j = 0; j < 16 && off + j < rowBytes; ++j) dst[j] = src[j];
    }
  }
}

}  // namespace edgeinfer::cuda::dev
