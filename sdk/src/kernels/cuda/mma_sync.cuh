// Device-side building blocks of the mma.sync INT8 kernels (sm_80 and newer: Orin, Hopper,
// Thor): cp.async copies into shared memory, ldmatrix fragment loads and the m16n8k32 s8
// tensor-core MMA. Fragment layouts (PTX ISA, mma.m16n8k32 .s8), with g = lane / 4 and
// t = lane % 4:
//   A regs 0..3: (row g, k 4t..4t+3), (g + 8, 4t..), (g, 16 + 4t..), (g + 8, 16 + 4t..)
//   B regs 0..1: (k 4t..4t+3, col g), (k 16 + 4t.., col g)
//   C regs 0..3: (row g, col 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)
// Below sm_80 the wrappers compile to nothing (the provider offers these kernels on sm_80 and
// newer only). Device code: include only from .cu files.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace edgeinfer::cuda::dev {

__device__ __forceinline__ uint32_t smemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// cp.async of VEC (16 or 4) bytes, zero-filled when !valid (src-size 0 reads nothing).
template <int VEC>
__device__ __forceinline__ void cpAsync(void* dst, const void* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int n = valid ? VEC : 0;
  if constexpr (VEC == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smemAddr(dst)), "l"(src),
                 "r"(n));
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smemAddr(dst)), "l"(src),
                 "r"(n));
#endif
}

/// An L2 cache policy for a kernel's reads (PTX createpolicy): evict-first where the kernel is
/// the last to read the tensor (its lines are the first the L2 gives up, so that it keeps more
/// of what the kernel writes for the kernel after), evict-normal (the default) otherwise.
__device__ __forceinline__ uint64_t l2ReadPolicy(bool lastRead) {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (lastRead)
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(policy));
  else
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;\n" : "=l"(policy));
#endif
  return policy;
}

/// cpAsync<16> under the L2 cache policy `policy` (l2ReadPolicy).
__device__ __forceinline__ void cpAsync16Hint(void* dst, const void* src, bool valid,
                                              uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;\n" ::"r"(smemAddr(dst)),
      "l"(src), "r"(valid ? 16 : 0), "l"(policy));
#endif
}

/// Closes this thread's group of cp.async copies issued since the last commit.
__device__ __forceinline__ void cpAsyncCommit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}

/// Waits until at most N of this thread's committed cp.async groups are still in flight.
template <int N>
__device__ __forceinline__ void cpAsyncWait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
#endif
}

/// cp.async.wait_group with a count known at run time (1 to 7; more waits for 7).
__device__ __forceinline__ void cpAsyncWaitFor(int pending) {
  switch (pending) {
    case 1:
      cpAsyncWait<1>();
      break;
    case 2:
      cpAsyncWait<2>();
      break;
    case 3:
      cpAsyncWait<3>();
      break;
    case 4:
      cpAsyncWait<4>();
      break;
    case 5:
      cpAsyncWait<5>();
      break;
    case 6:
      cpAsyncWait<6>();
      break;
    default:
      cpAsyncWait<7>();
      break;
  }
}

/// i / d for 0 <= i < 4096 and 1 <= d <= 16 as a multiply and a shift, with m = ceil(2^16 / d):
/// i * m / 2^16 exceeds i / d by less than 4096 / 2^16 = 1/16, which never reaches the next
/// integer (i / d's fraction is at most 15/16).
__device__ __forceinline__ int divSmall(int i, int m) {
  return (i * m) >> 16;
}

__device__ __forceinline__ void ldmatrixX4(uint32_t (&r)[4], const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smemAddr(p)));
#endif
}

/// acc += A (16 x 32, row) * B (32 x 8, col), s8 inputs, s32 sums.
__device__ __forceinline__ void mmaS8(int32_t (&acc)[4], const uint32_t (&a)[4],
                                      const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}

/// acc = A (16 x 32, row) * B (32 x 8, col) + c in every element: a K loop's first step with
/// the sums started at `c` (the pointwise kernels' lean epilogue starts them at
/// kRoundMagicBits: no zeroing, and no add to reinterpret them as floats afterwards).
__device__ __forceinline__ void mmaS8From(int32_t (&acc)[4], const uint32_t (&a)[4],
                                          const uint32_t (&b)[2], int32_t c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%10,%10,%10};\n"
      : "=r"(acc[0]), "=r"(acc[1]), "=r"(acc[2]), "=r"(acc[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "r"(c));
#endif
}

/// The channel held by row `r` of a block's permuted weight rows (the pointwise and halo
/// kernels' register epilogue): within each group of 32, row 8b + c holds channel
/// 8 (c / 2) + 2b + c % 2, so that the four m16n8 accumulator tiles of a group leave each thread
/// the sums of 8 consecutive channels of a pixel (tile b, column 2t + e: channel 8t + 2b + e).
__host__ __device__ inline int permutedWeightChannel(int r) {
  const int b = (r & 31) >> 3, c = r & 7;
  return (r & ~31) + 8 * (c >> 1) + 2 * b + (c & 1);
}

/// Two neighbouring m16n8k32 B fragments, columns `rows` .. `rows` + 15 (weight rows `pitch`
/// bytes apart), K bytes k0 .. k0 + 31, in one ldmatrix.x4.
__device__ __forceinline__ void ldmatrixB2(uint32_t (&b0)[2], uint32_t (&b1)[2], const int8_t* rows,
                                           int pitch, int k0, int lane) {
  uint32_t r[4];
  ldmatrixX4(r, rows + ((lane & 7) + ((lane >> 4) << 3)) * pitch + k0 + ((lane >> 3) & 1) * 16);
  b0[0] = r[0];
  b0[1] = r[1];
  b1[0] = r[2];
  b1[1] = r[3];
}

/// Eight floats from 16-byte aligned memory, in two 16-byte loads.
__device__ __forceinline__ void load8(const float* p, float (&v)[8]) {
  *reinterpret_cast<float4*>(&v[0]) = *reinterpret_cast<const float4*>(p);
  *reinterpret_cast<float4*>(&v[4]) = *reinterpret_cast<const float4*>(p + 4);
}

/// The sums of one pixel's 8 consecutive output channels from a warp's m16n8 accumulator tiles
/// `first` .. first + 3 (a group of 32 channels of the permuted weights: tile b, column 2t + e
/// holds channel 8t + 2b + e), fragment row g (h = 0) or g + 8 (h = 1).
template <int N>
__device__ __forceinline__ void pixelSums8(const int32_t (&acc)[N][4], int first, int h,
                                           int32_t (&q)[8]) {
#pragma unroll
  for (int b = 0; b < 4; ++b) {
    q[2 * b] = acc[first + b][2 * h];
    q[2 * b + 1] = acc[first + b][2 * h + 1];
  }
}

}  // namespace edgeinfer::cuda::dev
