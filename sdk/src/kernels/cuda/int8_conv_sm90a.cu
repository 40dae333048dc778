// Hopper (sm_90a) INT8 convolution kernels of the `cuda-i8` tactic provider (int8_conv.h):
// the implicit GEMM of int8_conv.cu with warpgroup MMA, wgmma.mma_async m64nNk32 s8, instead of
// mma.sync. Compiled for sm_90a only (sdk/CMakeLists.txt builds this file on its own when 90 is
// among the SASS architectures); the provider offers its tactics only on a compute 9.0 device.
//
// A block has BM / 64 warpgroups (128 threads each); warpgroup w computes output rows
// [64w, 64w + 64) of the block's BM x BN tile with one wgmma m64nBNk32 per 32 bytes of K, both
// operands read by the tensor cores straight from shared memory (no ldmatrix, no fragments in
// registers but the int32 accumulators). Every thread also copies: per K step of BK bytes
// (64, or 128 for the "k128" kernels) its part of the next A (input pixels gathered through the
// convolution window, zero-filled outside the image) and B (weights) tiles, with cp.async, two
// steps ahead of the MMAs, over four shared stages: one may still be read by the wgmmas of the
// step before, one is read, two are being filled.
//
// Shared layout of a stage (wgmma's K-major canonical layout with the BK-byte swizzle, Swizzled
// below): a row's BK bytes of a step are contiguous, 8 rows make an atom, and the 16-byte chunks
// of a row are permuted by its row number, so the tensor cores read 8 rows of one chunk from 8
// different bank groups. Copies: two neighbouring threads fetch one 32-byte sector of a row per
// instruction (whole sectors from L2), and each row takes its sectors in an order of its own,
// so the 8 threads of a shared-memory phase write 8 different bank groups too.
//
// Measured (docs/performance.md, "wgmma INT8 convolutions"): a first version without swizzle
// was slower than the mma.sync kernels (Nsight Compute: 69 % of shared wavefronts excessive);
// the swizzle made it faster than them; more than four stages did not help.
//
// The epilogue (int8_conv_epilogue.cuh) is int8_conv.cu's, in both its roundings: bit-exact
// with the host computation, or the fast one within a quantization step of it.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/int8_conv.h"
#include "kernels/cuda/int8_conv_epilogue.cuh"
#include "kernels/cuda/wgmma_sm90a.cuh"

namespace edgeinfer::cuda {
namespace {

using namespace sm90;  // NOLINT(build/namespaces): the wgmma building blocks

constexpr int kStages = 4;  // shared stages: read by steps t - 1, t; filled for t + 1, t + 2
constexpr int kAhead = kStages - 2;

/// Where one thread's 16-byte chunk of the A tile comes from: its output pixel (fixed for the
/// whole K loop) and its position (r, s, c) in the convolution window, advanced a step (BK).
struct AChunk {
  int base = 0, h0 = 0, w0 = 0;  // n * H, first input row and column of the window
  int r = 0, s = 0, c = 0;

  __device__ __forceinline__ void advance(const Int8ConvPlan& p, int bk) {
    c += bk;
    while (c >= p.C) {  // C % 16 == 0; C < BK crosses several window positions
      c -= p.C;
      if (++s == p.S) {
        s = 0;
        ++r;
      }
    }
  }
};

template <int BM, int BN, int BK>
__global__ void __launch_bounds__(BM * 2, 1)
    i8ConvWgmma(const Int8ConvPlan p, const int8_t* __restrict__ x, const int8_t* __restrict__ w,
                const float* __restrict__ alpha, const float* __restrict__ bias,
                const void* __restrict__ z, void* __restrict__ y) {
#ifdef EDGEINFER_WGMMA
  using Sw = Swizzled<BK>;
  constexpr int kThreads = BM * 2;  // BM / 64 warpgroups
  constexpr int kStageA = BM * BK, kStageB = BN * BK;
  constexpr int kALoads = BK / 32;            // a row of a step: 2 threads x BK / 32 chunks
  constexpr int kBRows = (BN + BM - 1) / BM;  // B rows per thread pair: 1 or 2
  extern __shared__ __align__(128) int8_t smemRaw[];
  // Atoms on 1024-byte boundaries (the launch asks for 1 KiB more than the stages).
  int8_t* smem = smemRaw + ((1024 - (smemAddr(smemRaw) & 1023)) & 1023);
  int8_t* As = smem;                      // kStages x kStageA
  int8_t* Bs = smem + kStages * kStageA;  // kStages x kStageB

  const int tid = static_cast<int>(threadIdx.x);
  const int rows = p.N * p.P * p.Q;
  const int m0 = static_cast<int>(blockIdx.x) * BM, n0 = static_cast<int>(blockIdx.y) * BN;

  // This thread's A row (one output pixel, shared with its neighbour thread) and its two
  // chunks of each step (copyChunk).
  const int aRow = tid >> 1, lane2 = tid & 1;
  AChunk a[kALoads];
  {
    const int m = m0 + aRow;
    int base = 0, h0 = -(1 << 29), w0 = 0;  // a row past the output: never inside the image
    if (m < rows) {
      const int q = m % p.Q, t = m / p.Q;
      base = (t / p.P) * p.H;
      h0 = (t % p.P) * p.strideH - p.padTop;
      w0 = q * p.strideW - p.padLeft;
    }
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int k = Sw::copyChunk(aRow, lane2, i) * 16;
      a[i].base = base;
      a[i].h0 = h0;
      a[i].w0 = w0;
      a[i].c = k % p.C;
      const int rs = k / p.C;
      a[i].r = rs / p.S;
      a[i].s = rs % p.S;
    }
  }

  const auto loadStage = [&](int kt, int st) {
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int ih = a[i].h0 + a[i].r * p.dilH, iw = a[i].w0 + a[i].s * p.dilW;
      const bool valid = a[i].r < p.R && ih >= 0 && ih < p.H && iw >= 0 && iw < p.W;
      const int8_t* src =
          valid ? x + (static_cast<int64_t>(a[i].base + ih) * p.W + iw) * p.C + a[i].c : x;
      cpAsync16(As + st * kStageA + Sw::offset(aRow, Sw::copyChunk(aRow, lane2, i)), src, valid);
      a[i].advance(p, BK);
    }
#pragma unroll
    for (int j = 0; j < kBRows; ++j) {
      const int row = aRow + j * BM;
      if (row >= BN) break;
      const int n = n0 + row;
#pragma unroll
      for (int i = 0; i < BK / 32; ++i) {
        const int kc = Sw::copyChunk(row, lane2, i);
        const int k = kt * BK + kc * 16;  // past gemmKPad (BK = 128): zeros
        const bool valid = n < p.K && k < p.gemmKPad;
        const int8_t* src = valid ? w + static_cast<int64_t>(n) * p.gemmKPad + k : w;
        cpAsync16(Bs + st * kStageB + Sw::offset(row, kc), src, valid);
      }
    }
  };

  int32_t acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0;
  fenceOperands(acc);

  const int steps = (p.gemmKPad + BK - 1) / BK;
#pragma unroll
  for (int s = 0; s < kAhead; ++s) {
    if (s < steps) loadStage(s, s);
    asm volatile("cp.async.commit_group;\n" ::);
  }
  const int wg = tid / 128;
  for (int kt = 0; kt < steps; ++kt) {
    const int st = kt % kStages;
    // Step kt's copies (this thread's) have landed; made visible to the tensor cores (the
    // async proxy), then to every thread. After the barrier every warpgroup has also waited
    // for its wgmmas of step kt - 2, whose stage the copies below refill.
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kAhead - 1));
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    __syncthreads();
    if (kt + kAhead < steps) loadStage(kt + kAhead, (kt + kAhead) % kStages);
    asm volatile("cp.async.commit_group;\n" ::);

    fenceOperands(acc);
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int ks = 0; ks < BK / 32; ++ks)
      wgmma<BN>(acc, Sw::desc(As + st * kStageA + wg * 64 * BK + ks * 32),
                Sw::desc(Bs + st * kStageB + ks * 32));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(1) : "memory");
    fenceOperands(acc);
  }
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(0) : "memory");
  fenceOperands(acc);
  asm volatile("cp.async.wait_group 0;\n" ::);
  __syncthreads();  // every warpgroup is done with the stages: they hold the output tile now

  // The epilogue: the accumulators to shared memory (all rows, or one warpgroup's 64 at a
  // time where they do not fit), then every thread through them to y.
  constexpr int kRows = dev::wgmmaEpilogueRows<BM, BN>(kStages * (kStageA + kStageB));
  static_assert(dev::wgmmaEpilogueFits<BM, BN>(kStages * (kStageA + kStageB)),
                "the accumulator tile fits in the stages");
  int32_t* tile = reinterpret_cast<int32_t*>(smem);
  for (int part = 0; part < BM / kRows; ++part) {
    if (part > 0) __syncthreads();    // the previous rows are read
    if (kRows == BM || wg == part) {  // m64nN layout: warp v holds rows 16v + lane / 4 (+ 8)
      const int lane = tid & 31, v = (tid % 128) / 32;
      dev::i8StoreWgmmaAccumulators<BN>(acc, (kRows == BM ? wg * 64 : 0) + v * 16 + (lane >> 2),
                                        2 * (lane & 3), tile);
    }
    __syncthreads();
    const uint4 none[dev::WgmmaEpilogueWalk<BN, kRows, kThreads>::kSteps] = {};
    dev::i8WgmmaEpilogue<BN, kRows, kThreads, false>(p, tile, m0 + part * kRows, n0, rows, alpha,
                                                     bias, z, y, tid, none);
  }
#else
  __trap();  // the provider offers these tactics on compute 9.0 devices only
#endif
}

template <int BM, int BN, int BK>
Status launch(const Int8ConvPlan& p, const Int8ConvArgs& a, cudaStream_t st) {
  constexpr int kSmem = kStages * (BM + BN) * BK + 1024;  // + alignment of the atoms
  EI_RETURN_IF_ERROR(
      allowSharedMemory(reinterpret_cast<const void*>(&i8ConvWgmma<BM, BN, BK>), kSmem));
  const int rows = p.N * p.P * p.Q;
  const dim3 grid(static_cast<unsigned>((rows + BM - 1) / BM),
                  static_cast<unsigned>((p.K + BN - 1) / BN));
  i8ConvWgmma<BM, BN, BK><<<grid, BM * 2, kSmem, st>>>(p, static_cast<const int8_t*>(a.x),
                                                       static_cast<const int8_t*>(a.w), a.alpha,
                                                       a.bias, a.z, a.y);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

Status launchInt8ConvWgmma(const Int8ConvPlan& p, const Int8ConvArgs& a, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (p.vec != 16 || p.C % 16 != 0 || p.gemmKPad % 64 != 0)
    return Status(ErrorCode::kInvalidArgument, "int8 wgmma conv: needs C % 16 == 0");
  switch (p.kernel) {
    case Int8ConvKernel::kWgmma128x128:
      return launch<128, 128, 64>(p, a, st);
    case Int8ConvKernel::kWgmma128x256:
      return launch<128, 256, 64>(p, a, st);
    case Int8ConvKernel::kWgmma128x64:
      return launch<128, 64, 64>(p, a, st);
    case Int8ConvKernel::kWgmma64x128:
      return launch<64, 128, 64>(p, a, st);
    case Int8ConvKernel::kWgmma128x128k128:
      return launch<128, 128, 128>(p, a, st);
    case Int8ConvKernel::kWgmma128x64k128:
      return launch<128, 64, 128>(p, a, st);
    default:
      return Status(ErrorCode::kInvalidArgument, "int8 wgmma conv: not a wgmma kernel");
  }
}

}  // namespace edgeinfer::cuda
