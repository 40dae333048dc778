// Device-side building blocks of the Hopper (sm_90a) kernels: warpgroup MMA (wgmma.mma_async
// s8 with both operands in shared memory), the K-major swizzled shared layouts wgmma reads and
// TMA writes, cp.async, mbarriers and TMA tensor copies. Include only from *_sm90a.cu files
// (compiled for sm_90a alone, sdk/CMakeLists.txt); outside sm_90a device code the instruction
// wrappers compile to nothing (EDGEINFER_WGMMA unset), and the kernels using them trap.
#pragma once

#include <cuda.h>  // CUtensorMap (a plain struct; nothing of the driver library is linked)
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kernel_attributes.h"  // allowSharedMemory

namespace edgeinfer::cuda::sm90 {

#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define EDGEINFER_WGMMA 1
#endif

__device__ __forceinline__ uint32_t smemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

/// A K step of BK bytes (64 or 128) a row, laid out with wgmma's K-major BK-byte swizzle: 8 rows
/// of BK bytes make an atom of 8 * BK bytes; chunk c (16 bytes) of row r sits at chunk position
/// c ^ ((r / 2) % 4) (64-byte swizzle) or c ^ (r % 8) (128-byte swizzle) of its row.
template <int BK>
struct Swizzled {
  static_assert(BK == 64 || BK == 128, "64- or 128-byte swizzle");

  /// Byte offset of (row, chunk `kc`) in a stage's A or B tile.
  __device__ static __forceinline__ int offset(int row, int kc) {
    const int sw = BK == 64 ? (row >> 1) & 3 : row & 7;
    return (row >> 3) * (8 * BK) + (row & 7) * BK + ((kc ^ sw) << 4);
  }

  /// The chunk a thread copies with its `i`-th instruction (0 .. BK / 32 - 1) of a step. Two
  /// neighbouring threads share a row and fetch one 32-byte sector of it per instruction; the
  /// rows a shared-memory phase writes (4 rows x 2 chunks) land on 8 different bank groups
  /// because each row takes its sectors in an order of its own.
  __device__ static __forceinline__ int copyChunk(int row, int lane2, int i) {
    if (BK == 64) return 2 * (i ^ ((row >> 1) & 1)) + lane2;
    const int slot = (i + row) & 3;  // the 32-byte slot of the row written: 4 rows, 4 slots
    return 2 * (slot ^ ((row & 7) >> 1)) + lane2;
  }

  /// wgmma's shared-memory matrix descriptor: start address, stride byte offset 8 * BK (the
  /// next 8 rows), leading byte offset unused (1), layout 2 (64-byte) or 1 (128-byte swizzle).
  /// The atoms start on 1024-byte boundaries (base offset 0); a start inside an atom (the next
  /// 32 bytes of K) is allowed, the swizzle being a function of the address.
  __device__ static __forceinline__ uint64_t desc(const void* p) {
    const uint64_t addr = (smemAddr(p) & 0x3FFFF) >> 4;
    return addr | (uint64_t{1} << 16) | (uint64_t{(8 * BK) >> 4} << 32) |
           (uint64_t{BK == 64 ? 2u : 1u} << 62);
  }
};

__device__ __forceinline__ void cpAsync16(void* dst, const void* src, bool valid) {
#ifdef EDGEINFER_WGMMA
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smemAddr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
#endif
}

#ifdef EDGEINFER_WGMMA
// The accumulator operands of the wgmma wrappers, 8 at a time: "[, ]%8k, ..., %8k+7" and the
// matching read-write register bindings d[8k .. 8k + 7].
#define EI_WG_OPS0 "%0, %1, %2, %3, %4, %5, %6, %7"
#define EI_WG_OPS1 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define EI_WG_OPS2 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define EI_WG_OPS3 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define EI_WG_OPS4 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define EI_WG_OPS5 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define EI_WG_OPS6 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define EI_WG_OPS7 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define EI_WG_OPS8 ", %64, %65, %66, %67, %68, %69, %70, %71"
#define EI_WG_OPS9 ", %72, %73, %74, %75, %76, %77, %78, %79"
#define EI_WG_OPS10 ", %80, %81, %82, %83, %84, %85, %86, %87"
#define EI_WG_OPS11 ", %88, %89, %90, %91, %92, %93, %94, %95"
#define EI_WG_OPS12 ", %96, %97, %98, %99, %100, %101, %102, %103"
#define EI_WG_OPS13 ", %104, %105, %106, %107, %108, %109, %110, %111"
#define EI_WG_OPS14 ", %112, %113, %114, %115, %116, %117, %118, %119"
#define EI_WG_OPS15 ", %120, %121, %122, %123, %124, %125, %126, %127"
#define EI_WG_D8(k)                                                                               \
  "+r"(d[8 * k]), "+r"(d[8 * k + 1]), "+r"(d[8 * k + 2]), "+r"(d[8 * k + 3]), "+r"(d[8 * k + 4]), \
      "+r"(d[8 * k + 5]), "+r"(d[8 * k + 6]), "+r"(d[8 * k + 7])

/// D[64 x 64] += A[64 x 32] * B[64 x 32]^T (s8, both K-major in shared memory).
__device__ __forceinline__ void wgmmaN64(int32_t (&d)[32], uint64_t descA, uint64_t descB) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {" EI_WG_OPS0 EI_WG_OPS1 EI_WG_OPS2
                   EI_WG_OPS3 "}, %32, %33, 1;\n"
               : EI_WG_D8(0), EI_WG_D8(1), EI_WG_D8(2), EI_WG_D8(3)
               : "l"(descA), "l"(descB));
}

/// D[64 x 64] += A[64 x 32] (registers: this thread's m16n8k32-layout fragment of its warp's 16
/// rows) * B[64 x 32]^T (K-major in shared memory).
__device__ __forceinline__ void wgmmaN64Rs(int32_t (&d)[32], const uint32_t (&a)[4],
                                           uint64_t descB) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 {" EI_WG_OPS0 EI_WG_OPS1 EI_WG_OPS2
                   EI_WG_OPS3 "}, {%32, %33, %34, %35}, %36, 1;\n"
               : EI_WG_D8(0), EI_WG_D8(1), EI_WG_D8(2), EI_WG_D8(3)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(descB));
}

/// D[64 x 128] += A[64 x 32] * B[128 x 32]^T (s8, both K-major in shared memory).
__device__ __forceinline__ void wgmmaN128(int32_t (&d)[64], uint64_t descA, uint64_t descB) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {" EI_WG_OPS0 EI_WG_OPS1
                   EI_WG_OPS2 EI_WG_OPS3 EI_WG_OPS4 EI_WG_OPS5 EI_WG_OPS6 EI_WG_OPS7
               "}, %64, %65, 1;\n"
               : EI_WG_D8(0), EI_WG_D8(1), EI_WG_D8(2), EI_WG_D8(3), EI_WG_D8(4), EI_WG_D8(5),
                 EI_WG_D8(6), EI_WG_D8(7)
               : "l"(descA), "l"(descB));
}

/// D[64 x 256] += A[64 x 32] * B[256 x 32]^T (s8, both K-major in shared memory).
__device__ __forceinline__ void wgmmaN256(int32_t (&d)[128], uint64_t descA, uint64_t descB) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 {" EI_WG_OPS0 EI_WG_OPS1 EI_WG_OPS2
          EI_WG_OPS3 EI_WG_OPS4 EI_WG_OPS5 EI_WG_OPS6 EI_WG_OPS7 EI_WG_OPS8 EI_WG_OPS9 EI_WG_OPS10
              EI_WG_OPS11 EI_WG_OPS12 EI_WG_OPS13 EI_WG_OPS14 EI_WG_OPS15 "}, %128, %129, 1;\n"
      : EI_WG_D8(0), EI_WG_D8(1), EI_WG_D8(2), EI_WG_D8(3), EI_WG_D8(4), EI_WG_D8(5), EI_WG_D8(6),
        EI_WG_D8(7), EI_WG_D8(8), EI_WG_D8(9), EI_WG_D8(10), EI_WG_D8(11), EI_WG_D8(12),
        EI_WG_D8(13), EI_WG_D8(14), EI_WG_D8(15)
      : "l"(descA), "l"(descB));
}

/// Keeps the compiler from moving register accesses of the accumulators across this point (into
/// a wgmma pipeline stage, which ptxas would then serialise).
template <int N>
__device__ __forceinline__ void fenceOperands(int32_t (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(d[i])::"memory");
}

template <int BN>
__device__ __forceinline__ void wgmma(int32_t (&d)[BN / 2], uint64_t descA, uint64_t descB) {
  if constexpr (BN == 64)
    wgmmaN64(d, descA, descB);
  else if constexpr (BN == 128)
    wgmmaN128(d, descA, descB);
  else
    wgmmaN256(d, descA, descB);
}
#endif  // EDGEINFER_WGMMA

/// mbarrier (a 64-bit word in shared memory) with `count` expected arrivals per phase.
__device__ __forceinline__ void mbarInit(uint64_t* bar, uint32_t count) {
#ifdef EDGEINFER_WGMMA
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smemAddr(bar)), "r"(count)
               : "memory");
#endif
}

/// Makes initialised mbarriers visible to the other threads and to the TMA unit (then a
/// __syncthreads).
__device__ __forceinline__ void mbarInitFence() {
#ifdef EDGEINFER_WGMMA
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
#endif
}

/// One arrival that also expects `bytes` of asynchronous copies to complete on `bar`.
__device__ __forceinline__ void mbarArriveExpectTx(uint64_t* bar, uint32_t bytes) {
#ifdef EDGEINFER_WGMMA
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smemAddr(bar)),
               "r"(bytes)
               : "memory");
#endif
}

/// One arrival on `bar`.
__device__ __forceinline__ void mbarArrive(uint64_t* bar) {
#ifdef EDGEINFER_WGMMA
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smemAddr(bar)) : "memory");
#endif
}

/// Waits until the phase of `bar` with parity `parity` has completed.
__device__ __forceinline__ void mbarWait(uint64_t* bar, uint32_t parity) {
#ifdef EDGEINFER_WGMMA
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
        " selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done)
        : "r"(smemAddr(bar)), "r"(parity)
        : "memory");
  } while (!done);
#endif
}

/// Fetches a tensor map (a __grid_constant__ kernel parameter) into the TMA unit's cache.
__device__ __forceinline__ void tmaPrefetch(const CUtensorMap* map) {
#ifdef EDGEINFER_WGMMA
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
#endif
}

/// TMA im2col load of a 4-D NHWC tensor: the map's pixelsPerColumn pixels x channelsPerPixel
/// channels, the pixels traversed from input pixel (n, h, w) through the map's bounding box,
/// each read at (h + offH, w + offW), channels from `c` on; outside the tensor zeros. Completes
/// its bytes on `bar`.
__device__ __forceinline__ void tmaLoadIm2col(void* dst, const CUtensorMap* map, uint64_t* bar,
                                              int c, int w, int h, int n, uint16_t offW,
                                              uint16_t offH) {
#ifdef EDGEINFER_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3, %4, %5}], [%6], {%7, %8};\n" ::"r"(smemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c), "r"(w), "r"(h), "r"(n), "r"(smemAddr(bar)),
      "h"(offW), "h"(offH)
      : "memory");
#endif
}

/// TMA tile load of a 2-D tensor: the map's box at (x, y) (x the contiguous dimension); outside
/// the tensor zeros. Completes its bytes on `bar`.
__device__ __forceinline__ void tmaLoadTile(void* dst, const CUtensorMap* map, uint64_t* bar, int x,
                                            int y) {
#ifdef EDGEINFER_WGMMA
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%2, %3}], [%4];\n" ::"r"(smemAddr(dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(x), "r"(y), "r"(smemAddr(bar))
      : "memory");
#endif
}

}  // namespace edgeinfer::cuda::sm90
