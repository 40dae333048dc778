// Device helpers shared by the `cuda` tactic kernels: float <-> storage conversion (FP32 or
// FP16 storage, float arithmetic) and 16-byte vector loads/stores. Device code: include only
// from .cu files.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace edgeinfer::cuda::dev {

template <typename T>
__device__ __forceinline__ float toFloat(T v);
template <>
__device__ __forceinline__ float toFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ float toFloat<__half>(__half v) {
  return __half2float(v);
}

template <typename T>
__device__ __forceinline__ T fromFloat(float v);
template <>
__device__ __forceinline__ float fromFloat<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __half fromFloat<__half>(float v) {
  return __float2half_rn(v);
}

/// Elements of T in one 16-byte access.
template <typename T>
inline constexpr int kVec16 = static_cast<int>(16 / sizeof(T));

/// Loads N consecutive elements as floats: one 16-byte load when N * sizeof(T) == 16 (p must
/// be 16-byte aligned), element by element otherwise.
template <typename T, int N>
__device__ __forceinline__ void loadN(const T* __restrict__ p, float (&out)[N]) {
  if constexpr (N * sizeof(T) == 16) {
    const uint4 u = *reinterpret_cast<const uint4*>(p);
    if constexpr (sizeof(T) == 4) {
      out[0] = __uint_as_float(u.x);
      out[1] = __uint_as_float(u.y);
      out[2] = __uint_as_float(u.z);
      out[3] = __uint_as_float(u.w);
    } else {
      const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const __half2 h = *reinterpret_cast<const __half2*>(&w[i]);
        const float2 f = __half22float2(h);
        out[2 * i] = f.x;
        out[2 * i + 1] = f.y;
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = toFloat(p[i]);
  }
}

/// Stores N floats as consecutive elements of T (one 16-byte store when N * sizeof(T) == 16).
template <typename T, int N>
__device__ __forceinline__ void storeN(T* __restrict__ p, const float (&v)[N]) {
  if constexpr (N * sizeof(T) == 16) {
    uint4 u;
    if constexpr (sizeof(T) == 4) {
      u.x = __float_as_uint(v[0]);
      u.y = __float_as_uint(v[1]);
      u.z = __float_as_uint(v[2]);
      u.w = __float_as_uint(v[3]);
    } else {
      uint32_t w[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const __half2 h = __floats2half2_rn(v[2 * i], v[2 * i + 1]);
        w[i] = *reinterpret_cast<const uint32_t*>(&h);
      }
      u = make_uint4(w[0], w[1], w[2], w[3]);
    }
    *reinterpret_cast<uint4*>(p) = u;
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) p[i] = fromFloat<T>(v[i]);
  }
}

inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

/// Grid size for a grid-stride loop over `work` items with `threads` per block.
inline int gridFor(int64_t work, int threads, int maxBlocks) {
  const int64_t blocks = (work + threads - 1) / threads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > maxBlocks ? maxBlocks : blocks));
}

}  // namespace edgeinfer::cuda::dev
