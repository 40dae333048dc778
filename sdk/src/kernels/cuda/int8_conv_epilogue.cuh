// Device side of int8_conv.h's epilogue, shared by the mma.sync kernels (int8_conv.cu) and the
// Hopper wgmma kernels (int8_conv_sm90a.cu): the same expressions, rounded one operation at a
// time (__fmul_rn / __fadd_rn: no FMA contraction; the quantize of quantize.cuh), so every kernel
// equals the host computation bit for bit. Device code: include only from .cu files.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/cuda/fused_activation.cuh"
#include "kernels/cuda/int8_conv.h"
#include "kernels/cuda/quantize.cuh"

namespace edgeinfer::cuda::dev {

/// The epilogue for one output element at NHWC index `idx`, channel `k`: the value before it
/// is stored (quantized or rounded to half).
__device__ __forceinline__ float i8Epilogue(const Int8ConvPlan& p, int32_t acc, int k, int64_t idx,
                                            const float* __restrict__ alpha,
                                            const float* __restrict__ bias, const void* z) {
  float v = __fmul_rn(static_cast<float>(acc), alpha[k]);
  v = __fadd_rn(v, bias[k]);
  if (p.hasZ) {
    const float zv =
        p.zScale > 0.f ? __fmul_rn(static_cast<float>(static_cast<const int8_t*>(z)[idx]), p.zScale)
                       : __half2float(static_cast<const __half*>(z)[idx]);
    v = __fadd_rn(v, zv);
  }
  return activate(v, p.act, p.alpha, p.beta);
}

/// The epilogue written to y[idx] (int8 or fp16, as the plan says).
__device__ __forceinline__ void i8StoreOutput(const Int8ConvPlan& p, int32_t acc, int k,
                                              int64_t idx, const float* __restrict__ alpha,
                                              const float* __restrict__ bias, const void* z,
                                              void* y) {
  const float v = i8Epilogue(p, acc, k, idx, alpha, bias, z);
  if (p.yScale > 0.f)
    static_cast<int8_t*>(y)[idx] = quantizeToInt8(v, p.yScale);
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
  const float v = i8Epilogue(p, acc, k, static_cast<int64_t>(m) * p.K + k, alpha, bias, z);
  if (p.yScale > 0.f)
    tile[r * ldo + cl] = quantizeToInt8(v, p.yScale);
  else
    *reinterpret_cast<__half*>(&tile[r * ldo + 2 * cl]) = __float2half_rn(v);
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
