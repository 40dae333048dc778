// Hopper (sm_90a) INT8 convolutions fed by the Tensor Memory Accelerator: the `tma<BM>x<BN>`
// kernels of the `cuda-i8` tactic provider (int8_conv.h). The implicit GEMM and the wgmma
// mainloop of int8_conv_sm90a.cu, without its cost: there every thread computed the im2col
// addresses of its chunks, its validity and a cp.async per 16 bytes, about 200 instructions a
// K step for 2 wgmmas (Nsight Compute: bound by instruction issue). Here
//
//   - one producer thread (a warp of its own) issues, per K step, one TMA im2col load of the
//     A tile (BM output pixels x BK input channels at one window position (r, s): the TMA unit
//     walks the pixels, applies stride and padding, zero-fills outside the image and writes
//     wgmma's swizzled layout) and one TMA tile load of the B tile (BN rows of the weights);
//   - BM / 64 consumer warpgroups only wait for a stage, issue wgmmas and release the stage;
//   - stages are handed over through mbarriers: full[s] (the producer's arrival plus the TMA
//     bytes) and empty[s] (every consumer thread, once its wgmmas reading the stage are done),
//     so copies run as far ahead as there are stages, with no block-wide barrier per step.
//
// A step stays within one window position, so these kernels need C % BK == 0 (the weights'
// k = (r * S + s) * C + c order is then the TMA's: (r, s) from the step, c from the step's
// offset); int8ConvTmaFits() says which layers the im2col descriptor can describe. The
// epilogue is int8_conv_epilogue.cuh's, as for every other kernel, in either rounding.
//
// The tensor maps hold the input's and the weights' addresses: they are encoded on the host
// at every launch (a few hundred nanoseconds, no driver call to the GPU) and passed as
// __grid_constant__ parameters; a CUDA graph captured with them is captured again when an
// input moves (runtime/cuda/cuda_context.cpp).
#include <cooperative_groups.h>
#include <cuda.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeIm2col, PFN_cuTensorMapEncodeTiled
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"  // device attributes
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/int8_conv.h"
#include "kernels/cuda/int8_conv_epilogue.cuh"
#include "kernels/cuda/tma_maps_sm90a.cuh"
#include "kernels/cuda/wgmma_sm90a.cuh"

namespace edgeinfer::cuda {
namespace {

using namespace sm90;  // NOLINT(build/namespaces): the wgmma building blocks

/// Shared stages of a tile shape: as many as fit in 96 KiB (2 blocks an SM at the largest
/// tiles), 3 to 6.
__host__ __device__ constexpr int tmaStages(int bm, int bn, int bk) {
  const int n = 98304 / ((bm + bn) * bk);
  return n < 3 ? 3 : n > 6 ? 6 : n;
}

template <int BM, int BN, int BK>
constexpr int tmaSharedBytes() {
  // Stages, 1 KiB to align them to the swizzle atoms, two mbarriers a stage.
  return tmaStages(BM, BN, BK) * (BM + BN) * BK + 1024 + 2 * 8 * tmaStages(BM, BN, BK);
}

/// SPLIT (a kernel of its own: the unsplit one keeps its registers): the K steps split
/// p.splitK ways, block z of a cluster of p.splitK blocks (1 x 1 x splitK) adding up its share.
/// Each block leaves its int32 sums in its shared memory; after a cluster barrier block z adds
/// up rows [z BM / S, (z + 1) BM / S) of all S tiles through distributed shared memory (integer
/// sums: exact, the unsplit kernel's result bit for bit) and runs the epilogue on them.
template <int BM, int BN, int BK, bool SPLIT>
__global__ void __launch_bounds__(BM * 2 + 32, 1)
    i8ConvTma(const __grid_constant__ CUtensorMap mapX, const __grid_constant__ CUtensorMap mapW,
              const Int8ConvPlan p, const float* __restrict__ alpha, const float* __restrict__ bias,
              const void* __restrict__ z, void* __restrict__ y) {
#ifdef EDGEINFER_WGMMA
  constexpr int kStages = tmaStages(BM, BN, BK);
  constexpr int kConsumers = BM * 2;  // BM / 64 warpgroups
  constexpr int kThreads = kConsumers + 32;
  constexpr int kStageA = BM * BK, kStageB = BN * BK;
  extern __shared__ __align__(128) int8_t smemRaw[];
  // Stages on 1024-byte boundaries: the TMA's swizzle is a function of the address.
  int8_t* smem = smemRaw + ((1024 - (smemAddr(smemRaw) & 1023)) & 1023);
  int8_t* As = smem;                      // kStages x kStageA
  int8_t* Bs = smem + kStages * kStageA;  // kStages x kStageB
  uint64_t* full = reinterpret_cast<uint64_t*>(Bs + kStages * kStageB);
  uint64_t* empty = full + kStages;

  const int tid = static_cast<int>(threadIdx.x);
  const int rows = p.N * p.P * p.Q;
  const int m0 = static_cast<int>(blockIdx.x) * BM, n0 = static_cast<int>(blockIdx.y) * BN;
  // C % BK == 0: gemmKPad == R * S * C. Split K: block z adds up steps [kBegin, kBegin + steps).
  const int allSteps = p.gemmKPad / BK, split = SPLIT ? static_cast<int>(blockIdx.z) : 0;
  const int kBegin = SPLIT ? split * allSteps / p.splitK : 0;
  const int steps = SPLIT ? (split + 1) * allSteps / p.splitK - kBegin : allSteps;
  constexpr bool splitK = SPLIT;

  if (tid == kConsumers) {
    for (int s = 0; s < kStages; ++s) {
      mbarInit(&full[s], 1);
      mbarInit(&empty[s], kConsumers);
    }
    mbarInitFence();
    tmaPrefetch(&mapX);
    tmaPrefetch(&mapW);
  }
  __syncthreads();
  // Programmatic dependent launch (dependent_launch.cuh): the next layer's blocks may set up
  // now; the first stages' weights (this tactic's constants) load before this one waits for
  // the layer before.
  dev::allowDependentGrids();
  const int firstSteps = steps < kStages ? steps : kStages;
  if (tid == kConsumers)
    for (int kt = 0; kt < firstSteps; ++kt) {
      mbarArriveExpectTx(&full[kt], (BM + BN) * BK);
      tmaLoadTile(Bs + kt * kStageB, &mapW, &full[kt], (kBegin + kt) * BK, n0);
    }
  dev::waitForPriorGrids();

  // The residual this thread's epilogue steps add, requested now: its latency hides behind
  // the main loop (where the epilogue handles all rows at once).
  // Where that takes few registers: up to 4 steps of 16 bytes (the 128x64 tile).
  constexpr int kRows = dev::wgmmaEpilogueRows<BM, BN>(kStages * (kStageA + kStageB));
  static_assert(dev::wgmmaEpilogueFits<BM, BN>(kStages * (kStageA + kStageB)),
                "the accumulator tile fits in the stages");
  constexpr bool kPrefetchZ =
      kRows == BM && dev::WgmmaEpilogueWalk<BN, kRows, kThreads>::kSteps <= 4;
  uint4 zRaw[dev::WgmmaEpilogueWalk<BN, kRows, kThreads>::kSteps] = {};
  if constexpr (kPrefetchZ && !SPLIT)
    dev::i8LoadResidual<BN, kRows, kThreads>(p, z, m0, n0, rows, tid, zRaw);

  int32_t acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0;
  fenceOperands(acc);

  if (tid >= kConsumers) {
    // The producer: one thread. The block's first output pixel m0 = (n, oh, ow) reads its
    // window from input pixel (n, oh * strideH - padTop, ow * strideW - padLeft) on; the TMA
    // walks the next BM - 1 pixels from there as the output rows are ordered.
    if (tid == kConsumers) {
      const int ow = m0 % p.Q, t = m0 / p.Q;
      const int n = t / p.P, h = (t % p.P) * p.strideH - p.padTop, w = ow * p.strideW - p.padLeft;
      // The first step's window position (r, s) and first channel c.
      const int rs = kBegin * BK / p.C;
      int c = kBegin * BK - rs * p.C, r = rs / p.S, s = rs % p.S;
      for (int kt = 0; kt < steps; ++kt) {
        const int st = kt % kStages;
        if (kt >= firstSteps) {  // the first stages' weights are on their way
          mbarWait(&empty[st], ((kt / kStages) - 1) & 1);
          mbarArriveExpectTx(&full[st], (BM + BN) * BK);
          tmaLoadTile(Bs + st * kStageB, &mapW, &full[st], (kBegin + kt) * BK, n0);
        }
        tmaLoadIm2col(As + st * kStageA, &mapX, &full[st], c, w, h, n,
                      static_cast<uint16_t>(s * p.dilW), static_cast<uint16_t>(r * p.dilH));
        c += BK;
        if (c == p.C) {
          c = 0;
          if (++s == p.S) {
            s = 0;
            ++r;
          }
        }
      }
    }
  } else {
    // The consumers: warpgroup wg computes output rows [64 wg, 64 wg + 64) of the tile.
    const int wg = tid / 128;
    for (int kt = 0; kt < steps; ++kt) {
      const int st = kt % kStages;
      mbarWait(&full[st], (kt / kStages) & 1);
      fenceOperands(acc);
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
      for (int ks = 0; ks < BK / 32; ++ks)
        wgmma<BN>(acc, Swizzled<BK>::desc(As + st * kStageA + wg * 64 * BK + ks * 32),
                  Swizzled<BK>::desc(Bs + st * kStageB + ks * 32));
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      // Step kt - 1's wgmmas are done reading: its stage goes back to the producer.
      asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(1) : "memory");
      fenceOperands(acc);
      if (kt > 0) mbarArrive(&empty[(kt - 1) % kStages]);
    }
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(0) : "memory");
    fenceOperands(acc);
  }
  __syncthreads();  // every stage consumed and read: they hold the output tile now

  // The epilogue: the accumulators to shared memory (all rows, or one warpgroup's 64 at a
  // time where they do not fit), then every thread through them to y.
  int32_t* tile = reinterpret_cast<int32_t*>(smem);
  for (int part = 0; part < BM / kRows; ++part) {
    if (part > 0) __syncthreads();  // the previous rows are read
    if (tid < kConsumers && (kRows == BM || tid / 128 == part)) {
      // m64nN layout: warp v of warpgroup wg holds rows 16v + lane / 4 (+ 8) of its 64.
      const int wg = tid / 128, lane = tid & 31, v = (tid % 128) / 32;
      dev::i8StoreWgmmaAccumulators<BN>(acc, (kRows == BM ? wg * 64 : 0) + v * 16 + (lane >> 2),
                                        2 * (lane & 3), tile);
    }
    __syncthreads();
    if constexpr (splitK) {
      static_assert(!SPLIT || kRows == BM, "split K keeps the whole tile in shared memory");
      namespace cg = cooperative_groups;
      cg::cluster_group cluster = cg::this_cluster();
      cluster.sync();                  // every split's sums are in its shared memory
      constexpr int kPieces = BN / 4;  // of 4 int32 a row
      const int r0 = split * BM / p.splitK, r1 = (split + 1) * BM / p.splitK;
      for (int i = tid; i < (r1 - r0) * kPieces; i += kThreads) {
        const int off = (r0 + i / kPieces) * dev::kWgmmaAccPitch<BN> + (i % kPieces) * 4;
        int4 sum = make_int4(0, 0, 0, 0);
        for (int q = 0; q < p.splitK; ++q) {
          const int4 v = *reinterpret_cast<const int4*>(cluster.map_shared_rank(tile + off, q));
          sum.x += v.x;
          sum.y += v.y;
          sum.z += v.z;
          sum.w += v.w;
        }
        *reinterpret_cast<int4*>(tile + off) = sum;  // rows of this block's slice only
      }
      cluster.sync();  // no block reads another's shared memory from here on
      dev::i8WgmmaEpilogue<BN, BM, kThreads, false>(p, tile + r0 * dev::kWgmmaAccPitch<BN>, m0 + r0,
                                                    n0, min(rows, m0 + r1), alpha, bias, z, y, tid,
                                                    zRaw);
    } else {
      dev::i8WgmmaEpilogue<BN, kRows, kThreads, kPrefetchZ>(p, tile, m0 + part * kRows, n0, rows,
                                                            alpha, bias, z, y, tid, zRaw);
    }
  }
#else
  __trap();  // the provider offers these tactics on compute 9.0 devices only
#endif
}

/// The persistent form with the epilogue from registers: the `tmar<BM>x<BN>` kernels. The same
/// producer and consumers, stages and wgmmas, but
///   - a grid of as many blocks as fit at once, each taking every gridDim.x-th tile (output
///     channels fastest: neighbouring blocks share the input rows in L2); the producer goes on
///     to the next tile's stages while the consumers run this tile's epilogue (the stages are
///     a ring across tiles, their mbarrier phases counted by a step number across tiles);
///   - the weights' rows permuted within each group of 32 output channels (int8_conv.cpp packs
///     them so, int8ConvPermutedChannel), so that each consumer thread's accumulators of a row
///     are 8 consecutive channels a group: the epilogue runs from the registers (i8Lean8 where
///     the sums allow, the general path otherwise), 8 outputs a piece, with no shared tile and
///     no block barrier, while the other block of the multiprocessor multiplies;
///   - an int8 residual requested for the tile before its main loop, into registers.
/// K % 32 == 0 (whole groups of 32 channels), no split K.
/// LEAN: the instance for the plan's lean epilogue (i8LeanEpilogue: the fast rounding to int8,
/// no activation or Relu, an int8 residual or none), sums of any size: they start at
/// kRoundMagicBits, so that within 2^22 (startedSmallSums8, one operation a sum where gemmK >
/// 256) their bits are already floats of 1.5 * 2^23 + the sum (i8Lean8<true, true>), else the
/// same operations from an exact int32 -> float (i8Lean8<false>); the other instance runs the
/// general path (any rounding, activation and output) and takes more registers: one block a
/// multiprocessor for the 128-channel tile, where the lean one keeps two.
/// STAGES: the stage ring's depth; 0, tmaStages' (two blocks a multiprocessor of the 128x128
/// tiles); more (the `tmard` and `tmap` kernels), one block a multiprocessor whose copies run
/// that many steps ahead of its wgmmas.
/// PINGPONG (the `tmap` kernels): the two consumer warpgroups each own every other tile of the
/// block, all BM rows of it (BM / 64 wgmmas a K step), instead of sharing each tile: their main
/// loops take turns (named barriers 1 and 2: a warpgroup starts a tile's wgmmas once the other
/// has issued all of the previous tile's), so one warpgroup's epilogue runs while the other's
/// wgmmas keep the tensor cores busy. The turns also keep each warpgroup's waits on a stage's
/// mbarrier at most one phase ahead of it (a parity wait cannot tell two phases apart).
template <int BM, int BN, int BK, int STAGES>
__host__ __device__ constexpr int tmaRegStages() {
  return STAGES > 0 ? STAGES : tmaStages(BM, BN, BK);
}

template <int BM, int BN, int BK, int STAGES>
__host__ __device__ constexpr int tmaRegSharedBytes() {
  constexpr int kStages = tmaRegStages<BM, BN, BK, STAGES>();
  return kStages * (BM + BN) * BK + 1024 + 2 * 8 * kStages;
}

/// Consumer threads: BM / 64 warpgroups sharing a tile, or two of tiles of their own.
__host__ __device__ constexpr int tmaRegConsumers(int bm, bool pingpong) {
  return pingpong ? 256 : bm * 2;
}

template <int BM, int BN, int BK, bool LEAN, int STAGES, bool PINGPONG>
__host__ __device__ constexpr int tmaRegMinBlocks() {
  return PINGPONG || tmaRegSharedBytes<BM, BN, BK, STAGES>() > 112 * 1024 ? 1
         : LEAN || BN <= 64                                               ? 2
                                                                          : 1;
}

/// Threads of a block: the consumers and a producer warp, or, where one block runs on a
/// multiprocessor, a producer warpgroup that gives its registers to the consumers (setmaxnreg:
/// registers are allocated a warpgroup at a time to wgmma kernels, so a lone producer warp
/// would take a warpgroup's share anyway).
template <int BM, int BN, int BK, bool LEAN, int STAGES, bool PINGPONG>
__host__ __device__ constexpr int tmaRegThreads() {
  return tmaRegConsumers(BM, PINGPONG) +
         (tmaRegMinBlocks<BM, BN, BK, LEAN, STAGES, PINGPONG>() == 1 ? 128 : 32);
}

/// A named barrier of `threads` threads: wait for the rest (sync) or only count this warp in.
__device__ __forceinline__ void namedBarrierSync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void namedBarrierArrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

template <int BM, int BN, int BK, bool LEAN, int STAGES, bool PINGPONG>
__global__ void __launch_bounds__((tmaRegThreads<BM, BN, BK, LEAN, STAGES, PINGPONG>()),
                                  (tmaRegMinBlocks<BM, BN, BK, LEAN, STAGES, PINGPONG>()))
    i8ConvTmaReg(const __grid_constant__ CUtensorMap mapX, const __grid_constant__ CUtensorMap mapW,
                 const Int8ConvPlan p, const float* __restrict__ alpha,
                 const float* __restrict__ bias, const void* __restrict__ z, void* __restrict__ y) {
#ifdef EDGEINFER_WGMMA
  constexpr int kStages = tmaRegStages<BM, BN, BK, STAGES>();
  constexpr int kConsumers = tmaRegConsumers(BM, PINGPONG);
  constexpr int kStageA = BM * BK, kStageB = BN * BK;
  constexpr int kGroups = BN / 32;             // groups of 32 output channels a tile
  constexpr int kMw = PINGPONG ? BM / 64 : 1;  // m64 row blocks a warpgroup computes of a tile
  // The residual in registers before the main loop where they allow (the 64-channel tile of
  // two blocks a multiprocessor; the pingpong tiles of up to 4 pieces a thread), else read in
  // the epilogue.
  constexpr bool kPrefetchZ = PINGPONG ? kMw * kGroups <= 4 : BN == 64;
  extern __shared__ __align__(128) int8_t smemRaw[];
  int8_t* smem = smemRaw + ((1024 - (smemAddr(smemRaw) & 1023)) & 1023);
  int8_t* As = smem;
  int8_t* Bs = smem + kStages * kStageA;
  uint64_t* full = reinterpret_cast<uint64_t*>(Bs + kStages * kStageB);
  uint64_t* empty = full + kStages;

  const int tid = static_cast<int>(threadIdx.x);
  const int rows = p.N * p.P * p.Q;
  const int nTiles = (p.K + BN - 1) / BN;
  const int tiles = (rows + BM - 1) / BM * nTiles;
  const int steps = p.gemmKPad / BK;  // C % BK == 0: gemmKPad == R * S * C
  const int firstTile = static_cast<int>(blockIdx.x), tileStride = static_cast<int>(gridDim.x);

  if (tid == kConsumers) {
    for (int s = 0; s < kStages; ++s) {
      mbarInit(&full[s], 1);
      mbarInit(&empty[s], PINGPONG ? 128 : kConsumers);  // the warpgroups reading a stage
    }
    mbarInitFence();
    tmaPrefetch(&mapX);
    tmaPrefetch(&mapW);
  }
  __syncthreads();
  dev::allowDependentGrids();
  // The first tile's first weights (constants) before waiting for the layer before.
  const int firstSteps = firstTile < tiles ? (steps < kStages ? steps : kStages) : 0;
  if (tid == kConsumers)
    for (int kt = 0; kt < firstSteps; ++kt) {
      mbarArriveExpectTx(&full[kt], (BM + BN) * BK);
      tmaLoadTile(Bs + kt * kStageB, &mapW, &full[kt], kt * BK, firstTile % nTiles * BN);
    }
  dev::waitForPriorGrids();

  // A producer warpgroup keeps 40 registers a thread, the consumer warpgroups share the rest
  // in multiples of 8: two get 232 (128 x 40 + 256 x 232 <= 65,536), three 152.
  constexpr bool kProducerGroup =
      tmaRegThreads<BM, BN, BK, LEAN, STAGES, PINGPONG>() == kConsumers + 128;
  constexpr int kConsumerRegs = (65536 - 128 * 40) / kConsumers / 8 * 8;
  static_assert(
      !kProducerGroup || (kConsumers % 128 == 0 && kConsumerRegs >= 128 && kConsumerRegs <= 256 &&
                          128 * 40 + kConsumers * kConsumerRegs <= 65536),
      "setmaxnreg's budget");
  if (tid >= kConsumers) {
    if constexpr (kProducerGroup)
      asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (tid == kConsumers) {  // the producer: every tile's steps, one stage ring
      int step = 0;
      for (int tile = firstTile; tile < tiles; tile += tileStride) {
        const int m0 = tile / nTiles * BM, n0 = tile % nTiles * BN;
        const int ow = m0 % p.Q, t = m0 / p.Q;
        const int n = t / p.P, h = (t % p.P) * p.strideH - p.padTop, w = ow * p.strideW - p.padLeft;
        int c = 0, r = 0, s = 0;
        for (int kt = 0; kt < steps; ++kt, ++step) {
          const int st = step % kStages;
          if (step >= firstSteps) {
            if (step >= kStages) mbarWait(&empty[st], ((step / kStages) - 1) & 1);
            mbarArriveExpectTx(&full[st], (BM + BN) * BK);
            tmaLoadTile(Bs + st * kStageB, &mapW, &full[st], kt * BK, n0);
          }
          tmaLoadIm2col(As + st * kStageA, &mapX, &full[st], c, w, h, n,
                        static_cast<uint16_t>(s * p.dilW), static_cast<uint16_t>(r * p.dilH));
          c += BK;
          if (c == p.C) {
            c = 0;
            if (++s == p.S) {
              s = 0;
              ++r;
            }
          }
        }
      }
    }
    return;  // (no block barrier follows)
  }
  if constexpr (kProducerGroup)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kConsumerRegs) : "memory");

  // The consumers. Cooperative: warpgroup wg computes rows [64 wg, 64 wg + 64) of each tile;
  // pingpong: all rows of every other tile, m64 block mw its rows [64 mw, 64 mw + 64). This
  // thread's rows of a block: 16 v + g and + 8; channels 32 group + 8 t4 + (0..7) (register
  // 4 (4 group + b) + 2 h + e: column 8 (4 group + b) + 2 t4 + e, channel 32 group + 8 t4 + 2b +
  // e).
  const int wg = tid / 128, lane = tid & 31, v = (tid % 128) / 32;
  const int g = lane >> 2, t4 = lane & 3;
  const int rowOf = (PINGPONG ? 0 : wg * 64) + v * 16 + g;
  const int aOff = PINGPONG ? 0 : wg * 64 * BK;  // this warpgroup's rows of a stage's A tile
  const float inv = __frcp_rn(p.yScale);
  const float floor = p.act == DeviceActivation::kRelu ? 0.f : -128.f;
  const bool smallAcc = p.gemmK <= 256;  // every sum within 2^22 (i8SmallSums8), whatever the data
  const int zb = !p.hasZ ? 0 : p.zScale > 0.f ? 1 : 2;
  const auto* z8 = static_cast<const int8_t*>(z);
  constexpr int kTileStep = PINGPONG ? 2 : 1;  // the block's tiles this warpgroup takes
  for (int i = PINGPONG ? wg : 0; firstTile + i * tileStride < tiles; i += kTileStep) {
    const int tile = firstTile + i * tileStride;
    const int m0 = tile / nTiles * BM, n0 = tile % nTiles * BN;
    int step = i * steps;  // the ring's step of this tile's first K step
    uint2 zRaw[kMw][kGroups][2];
#pragma unroll
    for (int mw = 0; mw < kMw; ++mw)
#pragma unroll
      for (int grp = 0; grp < kGroups; ++grp)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int m = m0 + mw * 64 + rowOf + 8 * h, c0 = n0 + 32 * grp + 8 * t4;
          zRaw[mw][grp][h] =
              kPrefetchZ && zb == 1 && m < rows && c0 < p.K
                  ? __ldg(reinterpret_cast<const uint2*>(z8 + static_cast<int64_t>(m) * p.K + c0))
                  : make_uint2(0u, 0u);
        }

    int32_t acc[kMw][BN / 2];
#pragma unroll
    for (int mw = 0; mw < kMw; ++mw) {
#pragma unroll
      for (int j = 0; j < BN / 2; ++j) acc[mw][j] = LEAN ? dev::kRoundMagicBits : 0;
      fenceOperands(acc[mw]);
    }
    if (PINGPONG && i > 0) namedBarrierSync(1 + wg, 256);  // the other's previous tile issued
    for (int kt = 0; kt < steps; ++kt, ++step) {
      const int st = step % kStages;
      mbarWait(&full[st], (step / kStages) & 1);
#pragma unroll
      for (int mw = 0; mw < kMw; ++mw) fenceOperands(acc[mw]);
      asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
      for (int ks = 0; ks < BK / 32; ++ks)
#pragma unroll
        for (int mw = 0; mw < kMw; ++mw)
          wgmma<BN>(acc[mw], Swizzled<BK>::desc(As + st * kStageA + aOff + mw * 64 * BK + ks * 32),
                    Swizzled<BK>::desc(Bs + st * kStageB + ks * 32));
      asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(1) : "memory");
#pragma unroll
      for (int mw = 0; mw < kMw; ++mw) fenceOperands(acc[mw]);
      if (kt > 0) mbarArrive(&empty[(step - 1) % kStages]);
    }
    // The other warpgroup's next tile may start its wgmmas (where it has one).
    if (PINGPONG && firstTile + (i + 1) * tileStride < tiles) namedBarrierArrive(2 - wg, 256);
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(0) : "memory");
#pragma unroll
    for (int mw = 0; mw < kMw; ++mw) fenceOperands(acc[mw]);
    mbarArrive(&empty[(step - 1) % kStages]);  // the tile's last stage

#pragma unroll
    for (int grp = 0; grp < kGroups; ++grp) {
      const int c0 = n0 + 32 * grp + 8 * t4;
      if (c0 >= p.K) continue;  // K % 32 == 0: a group is in or out whole
      alignas(16) float av[8];
      alignas(16) float bv[8];
      *reinterpret_cast<float4*>(&av[0]) = __ldg(reinterpret_cast<const float4*>(alpha + c0));
      *reinterpret_cast<float4*>(&av[4]) = __ldg(reinterpret_cast<const float4*>(alpha + c0 + 4));
      *reinterpret_cast<float4*>(&bv[0]) = __ldg(reinterpret_cast<const float4*>(bias + c0));
      *reinterpret_cast<float4*>(&bv[4]) = __ldg(reinterpret_cast<const float4*>(bias + c0 + 4));
#pragma unroll
      for (int mw = 0; mw < kMw; ++mw)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int m = m0 + mw * 64 + rowOf + 8 * h;
          if (m >= rows) continue;
          int32_t q[8];
#pragma unroll
          for (int b = 0; b < 4; ++b) {
            q[2 * b] = acc[mw][4 * (4 * grp + b) + 2 * h];
            q[2 * b + 1] = acc[mw][4 * (4 * grp + b) + 2 * h + 1];
          }
          const int64_t base = static_cast<int64_t>(m) * p.K + c0;
          const uint2 zr = kPrefetchZ || zb != 1 ? zRaw[mw][grp][h]
                                                 : __ldg(reinterpret_cast<const uint2*>(z8 + base));
          if constexpr (LEAN) {  // (an int8 residual or none; the sums started at 1.5 * 2^23)
            uint2 out;
            if (smallAcc || dev::startedSmallSums8(q)) {
              out = dev::i8Lean8<true, true>(q, av, bv, zb == 1, zr, p.zMul, floor);
            } else {
#pragma unroll
              for (int e = 0; e < 8; ++e) q[e] -= dev::kRoundMagicBits;
              out = dev::i8Lean8<false>(q, av, bv, zb == 1, zr, p.zMul, floor);
            }
            *reinterpret_cast<uint2*>(static_cast<int8_t*>(y) + base) = out;
            continue;
          }
          float o[8];
          dev::i8Affine8(p, q, av, bv, false, o);
          if (zb == 1) {
            dev::i8AddResidual8(p, make_uint4(zr.x, zr.y, 0u, 0u), o);
          } else if (zb == 2) {
            dev::i8AddResidual8(
                p, __ldg(reinterpret_cast<const uint4*>(static_cast<const __half*>(z) + base)), o);
          }
          dev::activateAll(o, p.act, p.alpha, p.beta);
          dev::i8Store8(p, o, inv, y, base, true, 8);
        }
    }
  }
#else
  __trap();  // the provider offers these tactics on compute 9.0 devices only
#endif
}

/// The launch configuration: a programmatic dependent launch where the device has it
/// (dependent_launch.cuh: the kernel keeps its contract) and, for the split-K kernel, one
/// cluster of `split` blocks a tile along z (clusters of more than 8 blocks are a non-portable
/// size: allowSharedMemory allows them). `attrs` has room for two.
template <int BM, int BN, int BK>
cudaLaunchConfig_t tmaLaunch(dim3 grid, int split, cudaStream_t st, cudaLaunchAttribute* attrs) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(BM * 2 + 32);
  cfg.dynamicSmemBytes = tmaSharedBytes<BM, BN, BK>();
  cfg.stream = st;
  cfg.attrs = attrs;
  if (split > 1) {
    cudaLaunchAttribute& a = attrs[cfg.numAttrs++];
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = 1;
    a.val.clusterDim.y = 1;
    a.val.clusterDim.z = static_cast<unsigned>(split);
  }
  addDependentLaunch(&cfg, attrs);
  return cfg;
}

/// The tensor maps of a launch with tiles of BM x BN and K steps of BK bytes: the input's im2col
/// map (BM pixels x BK channels a load) and the weights' tiled map (BN rows x BK bytes).
template <int BM, int BN, int BK>
Status encodeMaps(const Int8ConvPlan& p, const Int8ConvArgs& a, CUtensorMap* mapX,
                  CUtensorMap* mapW) {
  EI_RETURN_IF_ERROR(tma::encodeInputIm2col(p, a.x, BM, BK, mapX));
  return tma::encodeTiled2d(a.w, p.gemmKPad, p.K, p.gemmKPad, BK, BN, mapW, "the weights");
}

template <int BM, int BN, int BK>
Status launchTma(const Int8ConvPlan& p, const Int8ConvArgs& a, cudaStream_t st) {
  CUtensorMap mapX, mapW;
  EI_RETURN_IF_ERROR((encodeMaps<BM, BN, BK>(p, a, &mapX, &mapW)));
  constexpr int kSmem = tmaSharedBytes<BM, BN, BK>();
  const int rows = p.N * p.P * p.Q;
  const dim3 grid(static_cast<unsigned>((rows + BM - 1) / BM),
                  static_cast<unsigned>((p.K + BN - 1) / BN), static_cast<unsigned>(p.splitK));
  if (p.splitK == 1) {
    const auto kernel = &i8ConvTma<BM, BN, BK, false>;
    EI_RETURN_IF_ERROR(allowSharedMemory(reinterpret_cast<const void*>(kernel), kSmem));
    cudaLaunchAttribute attrs[2];
    const cudaLaunchConfig_t cfg = tmaLaunch<BM, BN, BK>(grid, 1, st, attrs);
    EI_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, mapX, mapW, p, a.alpha, a.bias, a.z, a.y));
    return Status::Ok();
  }
  if constexpr (dev::wgmmaEpilogueRows<BM, BN>(tmaStages(BM, BN, BK) * (BM + BN) * BK) != BM) {
    return Status(ErrorCode::kInvalidArgument, "int8 TMA conv: this tile has no split-K kernel");
  } else {
    const auto kernel = &i8ConvTma<BM, BN, BK, true>;
    EI_RETURN_IF_ERROR(allowSharedMemory(reinterpret_cast<const void*>(kernel), kSmem,
                                         /*nonPortableClusters=*/true));
    cudaLaunchAttribute attrs[2];
    const cudaLaunchConfig_t cfg = tmaLaunch<BM, BN, BK>(grid, p.splitK, st, attrs);
    const cudaError_t err =
        cudaLaunchKernelEx(&cfg, kernel, mapX, mapW, p, a.alpha, a.bias, a.z, a.y);
    if (err != cudaSuccess) {
      cudaGetLastError();  // not left for the next launch to report
      return Status(ErrorCode::kCudaError,
                    std::string("int8 TMA conv: a cluster of ") + std::to_string(p.splitK) +
                        " blocks did not launch: " + cudaGetErrorString(err));
    }
    return Status::Ok();
  }
}

/// The persistent register-epilogue kernel's launch: as many blocks as fit at once
/// (tmaRegMinBlocks a multiprocessor where the shared memory allows), at most one a tile.
template <int BM, int BN, int BK, bool LEAN, int STAGES, bool PINGPONG>
Status launchTmaRegMode(const Int8ConvPlan& p, const Int8ConvArgs& a, cudaStream_t st) {
  CUtensorMap mapX, mapW;
  EI_RETURN_IF_ERROR((encodeMaps<BM, BN, BK>(p, a, &mapX, &mapW)));
  constexpr int kSmem = tmaRegSharedBytes<BM, BN, BK, STAGES>();
  constexpr int kThreads = tmaRegThreads<BM, BN, BK, LEAN, STAGES, PINGPONG>();
  const auto kernel = &i8ConvTmaReg<BM, BN, BK, LEAN, STAGES, PINGPONG>;
  EI_RETURN_IF_ERROR(allowSharedMemory(reinterpret_cast<const void*>(kernel), kSmem));
  const int64_t tiles = int64_t{(p.N * p.P * p.Q + BM - 1) / BM} * ((p.K + BN - 1) / BN);
  const int64_t resident =
      int64_t{residentBlocks(reinterpret_cast<const void*>(kernel), kThreads, kSmem)} *
      std::max(detail::deviceSmCount(), 1);
  cudaLaunchAttribute attrs[2];
  cudaLaunchConfig_t cfg = tmaLaunch<BM, BN, BK>(
      dim3(static_cast<unsigned>(std::max<int64_t>(1, std::min(tiles, resident)))), 1, st, attrs);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmem;
  EI_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, mapX, mapW, p, a.alpha, a.bias, a.z, a.y));
  return Status::Ok();
}

/// The instance for the plan's epilogue (i8LeanEpilogue with sums of any size, or the general).
template <int BM, int BN, int BK, int STAGES = 0, bool PINGPONG = false>
Status launchTmaReg(const Int8ConvPlan& p, const Int8ConvArgs& a, cudaStream_t st) {
  return dev::i8LeanEpilogue(p, true)
             ? launchTmaRegMode<BM, BN, BK, true, STAGES, PINGPONG>(p, a, st)
             : launchTmaRegMode<BM, BN, BK, false, STAGES, PINGPONG>(p, a, st);
}

/// Whether a cluster of `split` blocks of the split-K kernel of this tile can be resident on
/// the current device (cudaOccupancyMaxActiveClusters; a cluster of 16 needs 8 multiprocessors
/// of one GPC with room for two blocks each, which a partitioned GPU may not have).
template <int BM, int BN, int BK>
bool clusterRuns(int split) {
  if constexpr (dev::wgmmaEpilogueRows<BM, BN>(tmaStages(BM, BN, BK) * (BM + BN) * BK) != BM) {
    return false;
  } else {
    const auto kernel = &i8ConvTma<BM, BN, BK, true>;
    constexpr int kSmem = tmaSharedBytes<BM, BN, BK>();
    if (!allowSharedMemory(reinterpret_cast<const void*>(kernel), kSmem, true).ok()) {
      cudaGetLastError();
      return false;
    }
    cudaLaunchAttribute attrs[2];
    cudaLaunchConfig_t cfg =
        tmaLaunch<BM, BN, BK>(dim3(1, 1, static_cast<unsigned>(split)), split, nullptr, attrs);
    cfg.numAttrs = 1;  // the cluster's shape only: the launch order does not change residency
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &cfg) != cudaSuccess) {
      cudaGetLastError();
      return false;
    }
    return clusters > 0;
  }
}

}  // namespace

bool int8ConvTmaAvailable() {
  if (!int8ConvWgmmaAvailable()) return false;
  const tma::TensorMapEncoders& enc = tma::encoders();
  return enc.im2col && enc.tiled;
}

bool int8ConvTmaSplitRuns(Int8ConvKernel kernel, int split) {
  if (split <= 1) return true;
  if (!int8ConvTmaAvailable() || split > kInt8ConvMaxSplitK) return false;
  static std::mutex mu;
  static std::map<std::tuple<int, int, int>, bool> known;  // (device, kernel, split)
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  const auto key = std::make_tuple(dev, static_cast<int>(kernel), split);
  std::lock_guard<std::mutex> lock(mu);
  const auto it = known.find(key);
  if (it != known.end()) return it->second;
  bool runs = false;
  switch (kernel) {
    case Int8ConvKernel::kTma128x128:
      runs = clusterRuns<128, 128, 64>(split);
      break;
    case Int8ConvKernel::kTma128x64:
      runs = clusterRuns<128, 64, 64>(split);
      break;
    case Int8ConvKernel::kTma64x128:
      runs = clusterRuns<64, 128, 64>(split);
      break;
    case Int8ConvKernel::kTma128x128k128:
      runs = clusterRuns<128, 128, 128>(split);
      break;
    default:  // 128x256: no split-K kernel
      break;
  }
  known[key] = runs;
  return runs;
}

bool int8ConvTmaFits(const Int8ConvPlan& p, int bk) {
  if (p.C <= 0 || p.C % bk != 0 || p.gemmKPad != p.R * p.S * p.C) return false;
  if (p.strideH < 1 || p.strideH > 8 || p.strideW < 1 || p.strideW > 8) return false;
  const tma::Im2colBox b = tma::im2colBox(p);
  for (const int corner : {b.lowerW, b.lowerH, b.upperW, b.upperH})
    if (corner < -128 || corner > 127) return false;  // 4-D im2col maps: 8-bit corners
  // Window offsets are 16-bit; the input's strides below 2^40 bytes.
  return int64_t{p.R - 1} * p.dilH < 65536 && int64_t{p.S - 1} * p.dilW < 65536 &&
         int64_t{p.N} * p.H * p.W * p.C < (int64_t{1} << 40);
}

Status launchInt8ConvTma(const Int8ConvPlan& p, const Int8ConvArgs& a, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  const int bk = int8ConvTmaTile(p.kernel).bk;
  const bool reg = isInt8ConvTmaRegKernel(p.kernel);
  if (reg && (p.K % 32 != 0 || p.splitK != 1))
    return Status(ErrorCode::kInvalidArgument,
                  "int8 TMA conv: the register-epilogue kernels need K % 32 == 0 and no split K");
  if (p.vec != 16 || !int8ConvTmaFits(p, bk))
    return Status(ErrorCode::kInvalidArgument,
                  "int8 TMA conv: the layer does not fit the kernel (C % " + std::to_string(bk) +
                      ", strides, padding)");
  if (!tma::aligned16(a.x) || !tma::aligned16(a.w) ||
      (reg && (!tma::aligned16(a.y) || !tma::aligned16(a.alpha) || !tma::aligned16(a.bias) ||
               (p.hasZ && !tma::aligned16(a.z)))))
    return Status(ErrorCode::kInvalidArgument, "int8 TMA conv: tensors not 16-byte aligned");
  if (p.splitK < 1 || p.splitK > kInt8ConvMaxSplitK ||
      p.splitK > p.gemmKPad / int8ConvTmaTile(p.kernel).bk)
    return Status(ErrorCode::kInvalidArgument,
                  "int8 TMA conv: split K " + std::to_string(p.splitK) + " is not 1 to " +
                      std::to_string(kInt8ConvMaxSplitK) + " with a K step or more a split");
  switch (p.kernel) {
    case Int8ConvKernel::kTma128x128:
      return launchTma<128, 128, 64>(p, a, st);
    case Int8ConvKernel::kTma128x256:
      return launchTma<128, 256, 64>(p, a, st);
    case Int8ConvKernel::kTma128x64:
      return launchTma<128, 64, 64>(p, a, st);
    case Int8ConvKernel::kTma64x128:
      return launchTma<64, 128, 64>(p, a, st);
    case Int8ConvKernel::kTma128x128k128:
      return launchTma<128, 128, 128>(p, a, st);
    case Int8ConvKernel::kTmaR128x128:
      return launchTmaReg<128, 128, 64>(p, a, st);
    case Int8ConvKernel::kTmaR128x64:
      return launchTmaReg<128, 64, 64>(p, a, st);
    case Int8ConvKernel::kTmaR128x128k128:
      return launchTmaReg<128, 128, 128>(p, a, st);
    case Int8ConvKernel::kTmaRD128x128k128:
      return launchTmaReg<128, 128, 128, 6>(p, a, st);
    case Int8ConvKernel::kTmaRD128x256k128:
      return launchTmaReg<128, 256, 128, 4>(p, a, st);
    case Int8ConvKernel::kTmaRD192x128k128:
      return launchTmaReg<192, 128, 128, 5>(p, a, st);
    case Int8ConvKernel::kTmaP128x128k128:
      return launchTmaReg<128, 128, 128, 6, true>(p, a, st);
    case Int8ConvKernel::kTmaP128x64:
      return launchTmaReg<128, 64, 64, 10, true>(p, a, st);
    default:
      return Status(ErrorCode::kInvalidArgument, "int8 TMA conv: not a TMA kernel");
  }
}

}  // namespace edgeinfer::cuda
