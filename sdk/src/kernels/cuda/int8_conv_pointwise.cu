// Pointwise (1x1, unpadded) INT8 convolutions streamed through persistent blocks: the
// `cuda-i8.pw<BM>x<BN>` kernels (int8_conv.h), sm_80 and newer (mma.sync: Orin, Hopper, Thor).
//
// A 1x1 layer of few input channels (ResNet's expansions, 64 -> 256 at 56x56) does a K loop of
// one or two steps per tile and is bound by memory: at batch 64 it reads 13 MB of input and 51
// MB of residual and writes 51 MB. The tiled kernels (mma, wgmma, TMA) load, multiply and store
// each tile in sequence, one tile a block, and reached about a quarter of the memory bandwidth
// there (docs/performance.md). These kernels instead:
//   - keep the weights of the block's BN output channels (BN x C bytes) and their alpha and bias
//     in shared memory for the whole launch;
//   - walk the output pixels in tiles of 128 (a grid of as many blocks as fit on the device at
//     once, each taking every gridDim.x / slices-th tile of its slice of channels);
//   - copy the input and residual rows of the next tiles into 2 to 8 shared-memory stages
//     (cp.async; as many as fit beside the blocks the registers allow on a multiprocessor) while
//     the current one is multiplied and written: with few input channels a tile is a few KiB,
//     and one tile ahead kept too few bytes in flight for the memory's latency;
//   - run the epilogue from the accumulator registers, without a round trip through shared
//     memory: the weights' rows are permuted within each group of 32 channels so that the four
//     m16n8 accumulator tiles of a group leave every thread the sums of 8 consecutive channels of
//     two pixels (tile b, column 2t + e holds channel 8t + 2b + e), stored as one 8-byte (int8)
//     or 16-byte (fp16) piece: a quad of threads writes 32 contiguous bytes of a pixel.
// The epilogue is int8_conv_epilogue.cuh's (i8Affine8, i8AddResidual8, i8Store8), in the plan's
// rounding, so a result equals the other kernels' bit for bit; in the lean case (fast rounding to
// int8, no activation or Relu: ResNet's 1x1 layers) an instance of its own runs dev::lean8, whose
// results differ from theirs by rounding noise at most (half-step ties).
//
// Offered (int8ConvPointwiseFits) for 1x1 layers without padding, any stride, C % 32 == 0 and
// C <= 256 (the weights and at least two stages of input rows in shared memory), K % 32 == 0.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"  // device attributes
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/int8_conv.h"
#include "kernels/cuda/int8_conv_epilogue.cuh"
#include "kernels/cuda/kernel_attributes.h"
#include "kernels/cuda/mma_sync.cuh"

namespace edgeinfer::cuda {
namespace {

constexpr int kPwThreads = 256;  // 8 warps, each 32 pixels x BN / (8 * 32 / BM) channels
constexpr int kPwMaxC = 256;

/// The dynamic shared memory of a launch: the block's weights (BN rows of C bytes, 16 bytes of
/// padding a row so the 8 rows an ldmatrix phase reads fall on different banks), alpha and bias
/// (BN floats each), then the stages, each BM input rows (the weights' pitch) and, with a
/// residual, BM residual rows of BN elements with 32 elements of padding (the 8-byte int8 and
/// 16-byte fp16 reads of a quarter warp fall on different banks). With a folded residual (`cd`
/// > 0, kPwFold): the folded convolution's weights (BN rows of cd bytes, padded the same way)
/// after the layer's, its alpha and bias after the layer's, and BM rows of its input after each
/// stage's input rows, instead of residual rows.
/// With a chained layer (`ck` > 0 output channels of `cc` = the layer's K input channels,
/// kPwChain): its weights (ck rows of cc bytes, padded the same way), alpha and bias after the
/// layer's alpha and bias; each stage keeps BM rows of BN + 32 bytes after its input rows, the
/// residual's where the layer has one, into which the epilogue writes the tile's int8 outputs
/// for the chained layer's sums.
struct PwLayout {
  int aPitch = 0, dPitch = 0, zPitch = 0, cPitch = 0, wBytes = 0, abBytes = 0, cBytes = 0,
      aBytes = 0, dBytes = 0, stageBytes = 0, total = 0;
};

__host__ __device__ inline PwLayout pwLayout(int BM, int BN, int C, int zBytes, int stages,
                                             int cd = 0, int ck = 0, int cc = 0) {
  PwLayout l;
  l.aPitch = C + 16;
  l.dPitch = cd > 0 ? cd + 16 : 0;
  l.zPitch = (BN + 32) * (ck > 0 ? 1 : zBytes);
  l.cPitch = ck > 0 ? cc + 16 : 0;
  l.wBytes = BN * (l.aPitch + l.dPitch);
  l.abBytes = (cd > 0 ? 4 : 2) * BN * static_cast<int>(sizeof(float));
  l.cBytes = ck * l.cPitch + 2 * ck * static_cast<int>(sizeof(float));
  l.aBytes = BM * l.aPitch;
  l.dBytes = BM * l.dPitch;
  l.stageBytes = l.aBytes + l.dBytes + BM * l.zPitch;
  l.total = l.wBytes + l.abBytes + l.cBytes + stages * l.stageBytes;
  return l;
}

/// What a kernel instance's epilogue handles (template argument MODE, bits): 0, the general
/// path (any rounding, activation and output); kPwLean, the lean case (i8LeanEpilogue: fast
/// rounding to int8, no activation or Relu, an int8 residual or none, sums below 2^22), with
/// kPwZ (a residual) and kPwRelu (Relu) fixed at compile time. The launch picks the instance from
/// the plan, so no epilogue tests the plan's options per element and each instance's code is only
/// its own path (Nsight Compute: the kernel was bound by instruction issue, 16 % of its stalls
/// waiting on the instruction cache).
/// kPwFold (with kPwLean and kPwZ): the residual is computed in the block, by the 1x1
/// convolution that produces it in the graph (PwFold), and never read from memory.
/// kPwChain (with kPwLean, the layer's K within one block's BN): the 1x1 layer reading the
/// layer's output runs in the block too (PwChain), from the tile's outputs in shared memory.
constexpr int kPwLean = 1, kPwZ = 2, kPwRelu = 4, kPwFold = 8, kPwChain = 16;

/// The convolution whose output is the layer's residual, folded into the layer (kPwFold): a 1x1
/// INT8 layer without padding or activation of the same output pixels and channels, in the lean
/// epilogue (its alpha and bias prescaled by the residual's scale). Each block computes the
/// residual of its own tile before the layer's sums, rounds it to int8 as that layer's own
/// kernel would (dev::lean8), and keeps it in registers: the residual tensor is never written or
/// read (ResNet's downsample branches: at batch 64 the first block's 51 MB each way).
struct PwFold {
  const int8_t* x = nullptr;  ///< its input, int8 NHWC [N][H][W][C]
  const int8_t* w = nullptr;  ///< its weights [K][wPitch] (the layer's rows, unpermuted)
  const float* alpha = nullptr;
  const float* bias = nullptr;
  int C = 0, H = 0, W = 0, strideH = 1, strideW = 1, wPitch = 0;
};

/// The 1x1 layer that reads the layer's output, chained into it (kPwChain): a 1x1 INT8 layer
/// of stride 1 without padding or residual, in the lean epilogue (Relu or no activation), whose
/// input channels are the layer's output channels. Each block writes its tile's int8 outputs to
/// memory as usual and keeps them in shared memory, where the chained layer's sums read them:
/// its input (ResNet's block output, at batch 64 in layer1 51 MB) is not read back from memory.
struct PwChain {
  const int8_t* w = nullptr;  ///< its weights [K][wPitch] (unpermuted rows)
  const float* alpha = nullptr;
  const float* bias = nullptr;
  int8_t* y = nullptr;  ///< its output, int8 NHWC [N][P][Q][K]
  int K = 0, wPitch = 0;
  bool relu = false;
};

/// Bytes of a residual element: 0 without one, 1 int8, 2 fp16.
__host__ __device__ inline int residualBytes(const Int8ConvPlan& p) {
  return !p.hasZ ? 0 : p.zScale > 0.f ? 1 : 2;
}

/// The most stages a launch uses: tiles in flight are stages - 1.
constexpr int kPwMaxStages = 8;

/// Row of piece `i` of a tile whose rows are BN elements of `bytes` (1 or 2) bytes, 16-byte
/// pieces (BN a power of two: a shift).
template <int BN>
__device__ __forceinline__ int pieceRow(int i, int bytes) {
  return bytes == 1 ? i / (BN / 16) : i / (BN / 8);
}

template <int BM, int BN, int MODE>
__global__ void __launch_bounds__(kPwThreads, BN == 64 ? 3 : 2)
    i8ConvPointwise(const Int8ConvPlan p, const int8_t* __restrict__ x,
                    const int8_t* __restrict__ w, const float* __restrict__ alpha,
                    const float* __restrict__ bias, const void* __restrict__ z,
                    void* __restrict__ y, int stages, const PwFold f, const PwChain c) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kWarpsM = BM / 32, kWarpsN = 8 / kWarpsM;
  constexpr int kWN = BN / kWarpsN, kNT = kWN / 8, kGroups = kWN / 32;
  static_assert(kWN % 32 == 0, "a warp's channels come in groups of 32");
  constexpr bool kLean = (MODE & kPwLean) != 0, kZ = (MODE & kPwZ) != 0;
  constexpr bool kRelu = (MODE & kPwRelu) != 0, kFold = (MODE & kPwFold) != 0;
  constexpr bool kChain = (MODE & kPwChain) != 0;
  static_assert(kLean || MODE == 0, "residual and Relu variants are lean ones");
  static_assert(!kFold || kZ, "a folded residual is a residual");
  static_assert(!(kChain && kFold), "a chained layer after a folded residual: not built");
  static_assert(BN * kPwMaxC / 16 <= 4096 && BM * kPwMaxC / 16 <= 4096,
                "divSmall's range: the 16-byte pieces of the weights and of an input tile");
  extern __shared__ __align__(128) int8_t smem[];
  dev::allowDependentGrids();
  // Residual rows in the stages: known to the lean instances (none where folded).
  const int zb = kLean ? (kZ && !kFold ? 1 : 0) : residualBytes(p);
  const PwLayout L = pwLayout(BM, BN, p.C, zb, stages, kFold ? f.C : 0, kChain ? c.K : 0, p.K);
  int8_t* Ws = smem;
  int8_t* Wd = smem + BN * L.aPitch;  // the folded convolution's weights (kFold)
  float* alphaS = reinterpret_cast<float*>(smem + L.wBytes);
  float* biasS = alphaS + BN;
  float* alphaD = biasS + BN;  // kFold
  float* biasD = alphaD + BN;
  int8_t* Wc = smem + L.wBytes + L.abBytes;  // the chained layer's weights (kChain)
  float* alphaC = reinterpret_cast<float*>(Wc + (kChain ? c.K * L.cPitch : 0));
  float* biasC = alphaC + (kChain ? c.K : 0);
  int8_t* stageMem = smem + L.wBytes + L.abBytes + L.cBytes;

  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wm = warp % kWarpsM, wn = warp / kWarpsM;
  const int g = lane >> 2, t4 = lane & 3;
  const int rows = p.N * p.P * p.Q;
  const int slices = (p.K + BN - 1) / BN;
  const int n0 = static_cast<int>(blockIdx.x) % slices * BN;
  const int mTiles = (rows + BM - 1) / BM;
  const int tileStride = static_cast<int>(gridDim.x) / slices;
  const int chunks = p.C / 16;  // 16-byte pieces of an input row: 2 to 16
  const int chunkDiv = (65536 + chunks - 1) / chunks;
  const int dChunks = kFold ? f.C / 16 : 1;  // the folded convolution's
  const int dChunkDiv = (65536 + dChunks - 1) / dChunks;
  // The L2 policies of the input's and the residual's (or the folded layer's input's) reads:
  // evict-first where this launch reads them last. Only the lean instances copy under a policy:
  // in the general one (and in the wgmma halo kernel) ptxas (CUDA 13.0) gave the copies'
  // cache-policy operand an odd uniform register, an illegal instruction on the H200 (the
  // SASS of every instance that copies under a policy was checked for it).
  const uint64_t xPolicy = dev::l2ReadPolicy(p.lastX), zPolicy = dev::l2ReadPolicy(p.lastZ);
  const auto copyIn = [&](void* dst, const void* src, bool valid, uint64_t policy) {
    if constexpr (kLean)
      dev::cpAsync16Hint(dst, src, valid, policy);
    else
      dev::cpAsync<16>(dst, src, valid);
  };

  // The weights (constants: read before waiting for the kernel before), their rows permuted
  // within each group of 32 channels: row 8b + c of a group holds channel 8 (c / 2) + 2b + c % 2.
  const auto loadWeights = [&](const int8_t* src, int rowBytes, int n, int div, int pitch,
                               int8_t* dst) {
    for (int i = tid; i < BN * n; i += kPwThreads) {
      const int r = dev::divSmall(i, div), ch = i - r * n;
      const int k = n0 + dev::permutedWeightChannel(r);
      const bool valid = k < p.K;
      dev::cpAsync<16>(dst + r * pitch + ch * 16,
                       valid ? src + static_cast<int64_t>(k) * rowBytes + ch * 16 : src, valid);
    }
  };
  for (int i = tid; i < BN * chunks; i += kPwThreads) {
    const int r = dev::divSmall(i, chunkDiv), ch = i - r * chunks;
    const int k = n0 + dev::permutedWeightChannel(r);
    const bool valid = k < p.K;
    dev::cpAsync<16>(Ws + r * L.aPitch + ch * 16,
                     valid ? w + static_cast<int64_t>(k) * p.gemmKPad + ch * 16 : w, valid);
  }
  if constexpr (kFold) loadWeights(f.w, f.wPitch, dChunks, dChunkDiv, L.dPitch, Wd);
  if constexpr (kChain) {  // all c.K rows (permuted as the layer's), p.K bytes each
    const int n = p.K / 16, div = (65536 + n - 1) / n;
    for (int i = tid; i < c.K * n; i += kPwThreads) {
      const int r = dev::divSmall(i, div), ch = i - r * n;
      dev::cpAsync<16>(
          Wc + r * L.cPitch + ch * 16,
          c.w + static_cast<int64_t>(dev::permutedWeightChannel(r)) * c.wPitch + ch * 16, true);
    }
    for (int i = tid; i < c.K; i += kPwThreads) {
      alphaC[i] = c.relu ? __fdiv_rn(c.alpha[i], 127.f) : c.alpha[i];
      biasC[i] = c.relu ? __fdiv_rn(c.bias[i], 127.f) : c.bias[i];
    }
  }
  for (int i = tid; i < BN; i += kPwThreads) {  // divided by 127 for lean8's Relu
    const bool valid = n0 + i < p.K;
    alphaS[i] = !valid ? 0.f : kRelu ? __fdiv_rn(alpha[n0 + i], 127.f) : alpha[n0 + i];
    biasS[i] = !valid ? 0.f : kRelu ? __fdiv_rn(bias[n0 + i], 127.f) : bias[n0 + i];
    if constexpr (kFold) {  // (no activation: as they are)
      alphaD[i] = valid ? f.alpha[n0 + i] : 0.f;
      biasD[i] = valid ? f.bias[n0 + i] : 0.f;
    }
  }
  dev::cpAsyncCommit();
  dev::waitForPriorGrids();  // the input, the residual and the output from here on

  // BM input rows of C bytes (n pieces) from `src` (an image of H x W pixels read with the
  // layer's strides) into `stage` (rows of C + 16 bytes) for the tile of output pixels from m0.
  const auto copyRows = [&](const int8_t* src, int C, int n, int div, int H, int W, int sh, int sw,
                            int m0, int8_t* stage, uint64_t policy) {
    if (kLean && sh == 1 && sw == 1) {  // output pixel m reads input pixel m
      // The tile's input rows are BM x C contiguous bytes: piece i is at byte 16 i of them and
      // at 16 (i + row) in the stage (rows of C + 16 bytes). (The general loop below computed
      // each piece's pixel and row anew: about 25 instructions a piece, a fifth of the kernel's.)
      const int8_t* from = src + static_cast<int64_t>(m0) * C;
      const int limit = (rows - m0) * n;  // the pieces of existing rows
      for (int i = tid; i < BM * n; i += kPwThreads) {
        const bool valid = i < limit;
        copyIn(stage + 16 * (i + dev::divSmall(i, div)), valid ? from + 16 * i : src, valid,
               policy);
      }
    } else {
      const bool contiguous = sh == 1 && sw == 1;
      for (int i = tid; i < BM * n; i += kPwThreads) {
        const int r = dev::divSmall(i, div), ch = i - r * n, m = m0 + r;
        const bool valid = m < rows;
        int64_t pixel = m;
        if (!contiguous && valid) {
          const int q = m % p.Q, t = m / p.Q;
          pixel = (static_cast<int64_t>(t / p.P) * H + (t % p.P) * sh) * W +
                  static_cast<int64_t>(q) * sw;
        }
        copyIn(stage + r * (C + 16) + ch * 16, valid ? src + pixel * C + ch * 16 : src, valid,
               policy);
      }
    }
  };
  const bool contiguous = p.strideH == 1 && p.strideW == 1;  // output pixel m reads input pixel m
  const auto loadTile = [&](int tile, int8_t* stage) {
    const int m0 = tile * BM;
    // The layer's input rows as copyRows() copies them, written out: through copyRows() the
    // 64x256 residual instances spilled 16 bytes (ptxas, 128 registers a thread).
    if (kLean && contiguous) {
      const int8_t* src = x + static_cast<int64_t>(m0) * p.C;
      const int limit = (rows - m0) * chunks;  // the pieces of existing rows
      for (int i = tid; i < BM * chunks; i += kPwThreads) {
        const bool valid = i < limit;
        copyIn(stage + 16 * (i + dev::divSmall(i, chunkDiv)), valid ? src + 16 * i : x, valid,
               xPolicy);
      }
    } else {
      for (int i = tid; i < BM * chunks; i += kPwThreads) {
        const int r = dev::divSmall(i, chunkDiv), ch = i - r * chunks, m = m0 + r;
        const bool valid = m < rows;
        int64_t pixel = m;
        if (!contiguous && valid) {
          const int q = m % p.Q, t = m / p.Q;
          pixel = (static_cast<int64_t>(t / p.P) * p.H + (t % p.P) * p.strideH) * p.W +
                  static_cast<int64_t>(q) * p.strideW;
        }
        copyIn(stage + r * L.aPitch + ch * 16, valid ? x + pixel * p.C + ch * 16 : x, valid,
               xPolicy);
      }
    }
    if constexpr (kFold)
      copyRows(f.x, f.C, dChunks, dChunkDiv, f.H, f.W, f.strideH, f.strideW, m0, stage + L.aBytes,
               zPolicy);
    if constexpr (kLean && kZ && !kFold) {
      // An int8 residual, BN / 16 pieces a row (a power of two): a thread keeps its column and
      // steps kPwThreads / (BN / 16) rows at a time, its source and destination by constants.
      constexpr int kZChunks = BN / 16, kRowStep = kPwThreads / kZChunks;
      const int ch = tid % kZChunks, rowsLeft = rows - m0;
      const bool colIn = n0 + ch * 16 < p.K;  // K % 32 == 0: a piece is in or out whole
      int r = tid / kZChunks;
      const auto* zp = static_cast<const int8_t*>(z);
      const int8_t* zsrc = zp + (static_cast<int64_t>(m0 + r) * p.K + n0 + ch * 16);
      int8_t* zdst = stage + L.aBytes + r * (BN + 32) + ch * 16;
      const int64_t srcStep = static_cast<int64_t>(kRowStep) * p.K;
#pragma unroll
      for (int pass = 0; pass < BM / kRowStep; ++pass) {
        const bool valid = colIn && r < rowsLeft;
        copyIn(zdst, valid ? zsrc : zp, valid, zPolicy);
        r += kRowStep, zsrc += srcStep, zdst += kRowStep * (BN + 32);
      }
    } else if (!kLean && zb != 0) {  // (zb: 1 or 2)
      int8_t* zs = stage + L.aBytes;
      const auto* zp = static_cast<const int8_t*>(z);
      const int zChunks = BN * zb / 16;
      for (int i = tid; i < BM * zChunks; i += kPwThreads) {
        const int r = pieceRow<BN>(i, zb), ch = i - r * zChunks, m = m0 + r;
        const int k = n0 + (zb == 1 ? ch * 16 : ch * 8);
        const bool valid = m < rows && k < p.K;  // K % 32 == 0: a piece is in or out whole
        dev::cpAsync<16>(zs + r * L.zPitch + ch * 16,
                         valid ? zp + (static_cast<int64_t>(m) * p.K + k) * zb : zp, valid);
      }
    }
  };

  // The lean epilogue's offsets of a thread's four pixels (rows 8 apart) in y.
  const int rowStep[4] = {0, 8 * p.K, 16 * p.K, 24 * p.K};
  const float inv = __frcp_rn(p.yScale);  // for the bit-exact quantize (int8 outputs)
  const bool smallAcc = p.gemmK <= 256;   // the fast epilogue's int32 -> float
  const float zMul = kRelu ? __fdiv_rn(p.zMul, 127.f) : p.zMul;
  // The lean instances start the sums at kRoundMagicBits (dev::lean8), the others at 0.
  constexpr int32_t kAccStart = kLean ? dev::kRoundMagicBits : 0;
  // Tiles in flight: stages - 1 ahead of the one multiplied, one commit group each (empty past
  // the last tile), so waiting until stages - 1 groups are pending means this tile has landed.
  int mt = static_cast<int>(blockIdx.x) / slices;
  for (int s = 0; s < stages - 1; ++s) {
    if (mt + s * tileStride < mTiles) loadTile(mt + s * tileStride, stageMem + s * L.stageBytes);
    dev::cpAsyncCommit();
  }
  for (int st = 0; mt < mTiles; mt += tileStride, st = st + 1 == stages ? 0 : st + 1) {
    int8_t* cur = stageMem + st * L.stageBytes;
    const int ahead = mt + (stages - 1) * tileStride;  // into the stage the last tile used
    if (ahead < mTiles) loadTile(ahead, stageMem + (st == 0 ? stages - 1 : st - 1) * L.stageBytes);
    dev::cpAsyncCommit();
    dev::cpAsyncWaitFor(stages -
                        1);  // the weights and this tile have landed (this thread's copies)
    __syncthreads();         // (everyone's)

    // The sums over a K step of 32 input channels: of the layer's input rows and weights, or
    // (`folded`) of the folded convolution's. The first step sets them (mmaS8From: no zeroing),
    // the others add to them.
    int32_t acc[2][kNT][4];
    const auto kStep = [&](int k0, auto first, auto folded) {
      constexpr bool kD = decltype(folded)::value;
      const int8_t* rowsA = kD ? cur + L.aBytes : cur;
      const int8_t* wts = kD ? Wd : Ws;
      const int pitch = kD ? L.dPitch : L.aPitch;
      uint32_t af[2][4], bf[kNT][2];
#pragma unroll
      for (int a = 0; a < 2; ++a)
        dev::ldmatrixX4(af[a],
                        rowsA + (wm * 32 + a * 16 + (lane & 15)) * pitch + k0 + (lane >> 4) * 16);
#pragma unroll
      for (int b = 0; b < kNT; b += 2)
        dev::ldmatrixB2(bf[b], bf[b + 1], wts + (wn * kWN + b * 8) * pitch, pitch, k0, lane);
#pragma unroll
      for (int a = 0; a < 2; ++a)
#pragma unroll
        for (int b = 0; b < kNT; ++b) {
          if constexpr (decltype(first)::value)
            dev::mmaS8From(acc[a][b], af[a], bf[b], kAccStart);
          else
            dev::mmaS8(acc[a][b], af[a], bf[b]);
        }
    };

    // A folded residual: the folded convolution's sums first, rounded to int8 in the residual's
    // scale as its own kernel would (dev::lean8 without residual or activation), each thread
    // keeping the 8 channels x 4 pixels of each of its groups that its epilogue below adds.
    uint2 zFolded[kGroups][4];
    if constexpr (kFold) {
      kStep(0, std::true_type{}, std::true_type{});
#pragma unroll 2
      for (int k0 = 32; k0 < f.C; k0 += 32) kStep(k0, std::false_type{}, std::true_type{});
#pragma unroll
      for (int grp = 0; grp < kGroups; ++grp) {
        const int c0 = wn * kWN + grp * 32 + 8 * t4;
        alignas(16) float av[8];
        alignas(16) float bv[8];
        dev::load8(alphaD + c0, av);
        dev::load8(biasD + c0, bv);
#pragma unroll
        for (int a = 0; a < 2; ++a)
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            int32_t q[8];
            dev::pixelSums8(acc[a], grp * 4, h, q);
            zFolded[grp][2 * a + h] = dev::lean8<false, false>(q, av, bv, make_uint2(0u, 0u), 0.f);
          }
      }
    }
    kStep(0, std::true_type{}, std::false_type{});
#pragma unroll 2
    for (int k0 = 32; k0 < p.C; k0 += 32) kStep(k0, std::false_type{}, std::false_type{});

    // Epilogue: each thread's 8 consecutive channels of a group, for each of its 4 pixels,
    // stored as one piece (a quad of threads: 32 contiguous bytes of a pixel). Staging the tile
    // in shared memory for whole-line stores was tried: more instructions, and slower (the
    // kernel is bound by its instructions, docs/performance.md).
    const int m0 = mt * BM;
    const int8_t* zs = cur + L.aBytes;
    // The lean instances address the thread's pixels from one pointer a tile (rows 8 apart:
    // offsets kept in registers), and store under a predicate instead of branching around each
    // pixel: the address arithmetic and the branches had cost as many instructions as the
    // epilogue's arithmetic (SASS: 86 an 8-output piece, 54 of them lean8's).
    const int r0 = wm * 32 + g;
    const int left = rows - m0 - r0;  // this thread's pixels r0 + 8j exist for 8j < left
    int8_t* yt =
        static_cast<int8_t*>(y) + (static_cast<int64_t>(m0 + r0) * p.K + n0 + wn * kWN + 8 * t4);
    // int8 residual rows (lean); with a chained layer, the tile's outputs in their place
    int8_t* zt = cur + L.aBytes + r0 * (BN + 32) + wn * kWN + 8 * t4;
#pragma unroll
    for (int grp = 0; grp < kGroups; ++grp) {
      const int c0 = wn * kWN + grp * 32 + 8 * t4;  // within the block's channels
      if (n0 + c0 >= p.K) continue;
      alignas(16) float av[8];
      alignas(16) float bv[8];
      dev::load8(alphaS + c0, av);
      dev::load8(biasS + c0, bv);
#pragma unroll
      for (int a = 0; a < 2; ++a)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int j = 2 * a + h;  // pixel r0 + 8j
          int32_t q[8];
          dev::pixelSums8(acc[a], grp * 4, h, q);
          if constexpr (kLean) {
            uint2 zRaw = make_uint2(0u, 0u);
            if constexpr (kFold)
              zRaw = zFolded[grp][j];
            else if constexpr (kZ)
              zRaw = *reinterpret_cast<const uint2*>(zt + 8 * j * (BN + 32) + grp * 32);
            const uint2 o = dev::lean8<kRelu, kZ>(q, av, bv, zRaw, zMul);
            if (8 * j < left) *reinterpret_cast<uint2*>(yt + rowStep[j] + grp * 32) = o;
            // (each thread overwrites the residual bytes it read itself)
            if constexpr (kChain) *reinterpret_cast<uint2*>(zt + 8 * j * (BN + 32) + grp * 32) = o;
          } else {  // the general epilogue
            const int r = r0 + 8 * j, m = m0 + r;
            if (m >= rows) continue;
            const int64_t base = static_cast<int64_t>(m) * p.K + n0 + c0;
            float v[8];
            dev::i8Affine8(p, q, av, bv, smallAcc, v);
            if (zb == 1) {
              const uint2 raw = *reinterpret_cast<const uint2*>(zs + r * L.zPitch + c0);
              dev::i8AddResidual8(p, make_uint4(raw.x, raw.y, 0u, 0u), v);
            } else if (zb == 2) {
              dev::i8AddResidual8(p, *reinterpret_cast<const uint4*>(zs + r * L.zPitch + 2 * c0),
                                  v);
            }
            dev::activateAll(v, p.act, p.alpha, p.beta);
            dev::i8Store8(p, v, inv, y, base, true, 8);
          }
        }
    }

    // The chained layer: its sums over the tile's BM x p.K int8 outputs (in the stage, rows of
    // BN + 32 bytes) in pieces of 16 pixels x 32 channels (ResNet's 64 x 64 tiles: one a warp),
    // and its lean epilogue, stored as the layer's.
    if constexpr (kChain) {
      __syncthreads();  // the tile's outputs are in shared memory
      const int8_t* tileOut = cur + L.aBytes;
      constexpr int kMBlocks = BM / 16;
      const int pieces = kMBlocks * (c.K / 32);
      for (int piece = warp; piece < pieces; piece += kPwThreads / 32) {
        const int pm = piece % kMBlocks, pn = piece / kMBlocks;
        int32_t cacc[4][4];
        const auto cStep = [&](int k0, auto first) {
          uint32_t af[4], bf[4][2];
          dev::ldmatrixX4(af,
                          tileOut + (pm * 16 + (lane & 15)) * (BN + 32) + k0 + (lane >> 4) * 16);
#pragma unroll
          for (int b = 0; b < 4; b += 2)
            dev::ldmatrixB2(bf[b], bf[b + 1], Wc + (pn * 32 + b * 8) * L.cPitch, L.cPitch, k0,
                            lane);
#pragma unroll
          for (int b = 0; b < 4; ++b) {
            if constexpr (decltype(first)::value)
              dev::mmaS8From(cacc[b], af, bf[b], dev::kRoundMagicBits);
            else
              dev::mmaS8(cacc[b], af, bf[b]);
          }
        };
        cStep(0, std::true_type{});
#pragma unroll 4
        for (int k0 = 32; k0 < p.K; k0 += 32) cStep(k0, std::false_type{});
        const int cc0 = pn * 32 + 8 * t4;
        alignas(16) float av[8];
        alignas(16) float bv[8];
        dev::load8(alphaC + cc0, av);
        dev::load8(biasC + cc0, bv);
        const int cr0 = pm * 16 + g, cleft = rows - m0 - cr0;
        int8_t* ct = c.y + (static_cast<int64_t>(m0 + cr0) * c.K + cc0);
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // pixel cr0 + 8h
          int32_t q[8];
          dev::pixelSums8(cacc, 0, h, q);
          const uint2 o = c.relu ? dev::lean8<true, false>(q, av, bv, make_uint2(0u, 0u), 0.f)
                                 : dev::lean8<false, false>(q, av, bv, make_uint2(0u, 0u), 0.f);
          if (8 * h < cleft) *reinterpret_cast<uint2*>(ct + 8 * h * c.K) = o;
        }
      }
    }
    __syncthreads();  // the next iteration's copies overwrite the stage before this one
  }
  dev::cpAsyncWait<0>();  // no copy outlives the block (an empty last group)
#else
  __trap();  // the provider offers these tactics on sm_80 and newer only
#endif
}

/// Stages of a launch: as many as fit (up to kPwMaxStages) in the shared memory a block may use
/// while as many blocks stay resident as the registers allow (3 of the 64-channel kernel, 2 of
/// the others, 1 KiB reserved a block), two at least. A tile of few input channels is a few KiB:
/// the stages keep enough bytes in flight for the memory's latency. `cd`: the folded
/// convolution's input channels (0: none); `ck`: the chained layer's output channels (0: none).
int pointwiseBudget(int BN) {
  const int blocks = BN == 64 ? 3 : 2;
  return std::min(detail::deviceSharedMemoryOptin(),
                  detail::deviceSharedMemoryPerSm() / blocks - 1024);
}

template <int BM, int BN>
int pointwiseStages(const Int8ConvPlan& p, int cd, int ck = 0) {
  const int budget = pointwiseBudget(BN);
  const int zb = cd > 0 ? 0 : residualBytes(p);
  int stages = 2;
  while (stages < kPwMaxStages &&
         pwLayout(BM, BN, p.C, zb, stages + 1, cd, ck, p.K).total <= budget)
    ++stages;
  return stages;
}

template <int BM, int BN, int MODE>
Status launchPointwiseMode(const Int8ConvPlan& p, const Int8ConvArgs& a, const PwFold& f,
                           cudaStream_t st, const PwChain& c = PwChain{}) {
  const auto kernel = &i8ConvPointwise<BM, BN, MODE>;
  const int cd = (MODE & kPwFold) != 0 ? f.C : 0;
  const int ck = (MODE & kPwChain) != 0 ? c.K : 0;
  const int stages = pointwiseStages<BM, BN>(p, cd, ck);
  const int smem = pwLayout(BM, BN, p.C, cd > 0 ? 0 : residualBytes(p), stages, cd, ck, p.K).total;
  const int optin = detail::deviceSharedMemoryOptin();
  if (smem > optin)
    return Status(ErrorCode::kUnsupported, "int8 pointwise conv: " + std::to_string(smem) +
                                               " bytes of shared memory, the device allows " +
                                               std::to_string(optin));
  EI_RETURN_IF_ERROR(allowSharedMemory(reinterpret_cast<const void*>(kernel), optin));
  const int rows = p.N * p.P * p.Q;
  const int slices = (p.K + BN - 1) / BN;
  const int64_t tiles = int64_t{(rows + BM - 1) / BM} * slices;
  const int64_t resident =
      int64_t{residentBlocks(reinterpret_cast<const void*>(kernel), kPwThreads, smem)} *
      std::max(detail::deviceSmCount(), 1);
  const int64_t blocks = persistentGrid(tiles, slices, resident);
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attrs[1];
  cfg.gridDim = dim3(static_cast<unsigned>(blocks));
  cfg.blockDim = dim3(kPwThreads);
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = st;
  addDependentLaunch(&cfg, attrs);
  EI_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, p, static_cast<const int8_t*>(a.x),
                                   static_cast<const int8_t*>(a.w), a.alpha, a.bias, a.z, a.y,
                                   stages, f, c));
  return Status::Ok();
}

/// The instance for the plan's epilogue (kPwLean and its variants where i8LeanEpilogue holds).
template <int BM, int BN>
Status launchPointwise(const Int8ConvPlan& p, const Int8ConvArgs& a, cudaStream_t st) {
  const PwFold none;
  if (!dev::i8LeanEpilogue(p, p.gemmK <= 256))
    return launchPointwiseMode<BM, BN, 0>(p, a, none, st);
  const bool relu = p.act == DeviceActivation::kRelu;
  if (p.hasZ)
    return relu ? launchPointwiseMode<BM, BN, kPwLean | kPwZ | kPwRelu>(p, a, none, st)
                : launchPointwiseMode<BM, BN, kPwLean | kPwZ>(p, a, none, st);
  return relu ? launchPointwiseMode<BM, BN, kPwLean | kPwRelu>(p, a, none, st)
              : launchPointwiseMode<BM, BN, kPwLean>(p, a, none, st);
}

/// The folded instances (int8ConvPointwiseFoldFits: both epilogues lean).
template <int BM, int BN>
Status launchPointwiseFold(const Int8ConvPlan& p, const Int8ConvArgs& a, const PwFold& f,
                           cudaStream_t st) {
  return p.act == DeviceActivation::kRelu
             ? launchPointwiseMode<BM, BN, kPwLean | kPwZ | kPwRelu | kPwFold>(p, a, f, st)
             : launchPointwiseMode<BM, BN, kPwLean | kPwZ | kPwFold>(p, a, f, st);
}

/// The chained instances (int8ConvPointwiseChainFits: both epilogues lean, no folded
/// residual).
template <int BM, int BN>
Status launchPointwiseChain(const Int8ConvPlan& p, const Int8ConvArgs& a, const PwChain& c,
                            cudaStream_t st) {
  const PwFold none;
  const bool relu = p.act == DeviceActivation::kRelu;
  if (p.hasZ)
    return relu
               ? launchPointwiseMode<BM, BN, kPwLean | kPwZ | kPwRelu | kPwChain>(p, a, none, st, c)
               : launchPointwiseMode<BM, BN, kPwLean | kPwZ | kPwChain>(p, a, none, st, c);
  return relu ? launchPointwiseMode<BM, BN, kPwLean | kPwRelu | kPwChain>(p, a, none, st, c)
              : launchPointwiseMode<BM, BN, kPwLean | kPwChain>(p, a, none, st, c);
}

}  // namespace

int int8ConvPointwiseChainSharedBytes(const Int8ConvPlan& p, const Int8ConvPlan& c) {
  const Int8ConvTile t = int8ConvTmaTile(p.kernel);
  return pwLayout(t.bm, t.bn, p.C, residualBytes(p), 2, 0, c.K, p.K).total;
}

bool int8ConvPointwiseChainFits(const Int8ConvPlan& p, const Int8ConvPlan& c, std::string* why) {
  const auto no = [&](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  if (p.kernel != Int8ConvKernel::kPw64x256 && p.kernel != Int8ConvKernel::kPw128x128)
    return no("the layer's kernel is not pw64x256 or pw128x128");
  if (!int8ConvPointwiseFits(p) || !int8ConvPointwiseFits(c))
    return no("both layers must be 1x1 layers the pointwise kernels run");
  const Int8ConvTile t = int8ConvTmaTile(p.kernel);
  if (p.K > t.bn) return no("the layer's output channels exceed one block's");
  if (c.C != p.K || c.N != p.N || c.H != p.P || c.W != p.Q || c.strideH != 1 || c.strideW != 1)
    return no("the chained layer does not read the layer's output pixel for pixel");
  if (c.hasZ) return no("the chained layer has a residual");
  if (c.K * (p.K / 16) > 4096)  // the weight copy's divSmall (the static_assert's range)
    return no("the chained layer's weights exceed 4096 pieces of 16 bytes");
  if (!dev::i8LeanEpilogue(p, p.gemmK <= 256) || !dev::i8LeanEpilogue(c, c.gemmK <= 256))
    return no(
        "both layers need the lean epilogue (fast rounding, int8 output and residual, "
        "no activation or Relu, sums within 2^22)");
  if (int8ConvPointwiseChainSharedBytes(p, c) > pointwiseBudget(t.bn))
    return no("the two layers' weights and two stages of the tile exceed the shared memory");
  return true;
}

Status launchInt8ConvPointwiseChain(const Int8ConvPlan& p, const Int8ConvArgs& a,
                                    const Int8ConvPlan& c, const Int8ConvArgs& ca, void* stream) {
  std::string why;
  if (!int8ConvPointwiseChainFits(p, c, &why))
    return Status(ErrorCode::kInvalidArgument, "int8 pointwise conv with a chained layer: " + why);
  const auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (!aligned16(a.x) || !aligned16(a.w) || !aligned16(a.y) || !aligned16(a.alpha) ||
      !aligned16(a.bias) || (p.hasZ && !aligned16(a.z)) || !aligned16(ca.w) || !aligned16(ca.y) ||
      !aligned16(ca.alpha) || !aligned16(ca.bias))
    return Status(ErrorCode::kInvalidArgument, "int8 pointwise conv: tensors not 16-byte aligned");
  PwChain c2;
  c2.w = static_cast<const int8_t*>(ca.w);
  c2.alpha = ca.alpha;
  c2.bias = ca.bias;
  c2.y = static_cast<int8_t*>(ca.y);
  c2.K = c.K;
  c2.wPitch = c.gemmKPad;
  c2.relu = c.act == DeviceActivation::kRelu;
  auto st = static_cast<cudaStream_t>(stream);
  if (p.kernel == Int8ConvKernel::kPw128x128) return launchPointwiseChain<128, 128>(p, a, c2, st);
  return launchPointwiseChain<64, 256>(p, a, c2, st);
}

int int8ConvPointwiseSharedBytes(const Int8ConvPlan& p) {
  const Int8ConvTile t = int8ConvTmaTile(p.kernel);
  return pwLayout(t.bm, t.bn, p.C, residualBytes(p), 2).total;
}

int int8ConvPointwiseFoldSharedBytes(const Int8ConvPlan& p, const Int8ConvPlan& d) {
  const Int8ConvTile t = int8ConvTmaTile(p.kernel);
  return pwLayout(t.bm, t.bn, p.C, 0, 2, d.C).total;
}

bool int8ConvPointwiseFoldFits(const Int8ConvPlan& p, const Int8ConvPlan& d, std::string* why) {
  const auto no = [&](const char* reason) {
    if (why) *why = reason;
    return false;
  };
  if (!isInt8ConvPointwiseKernel(p.kernel) || p.kernel == Int8ConvKernel::kPw64x128)
    return no("not a pointwise kernel of a folded form (pw128x64, pw128x128, pw64x256)");
  if (!int8ConvPointwiseFits(p) || !int8ConvPointwiseFits(d))
    return no("both layers must be 1x1 layers the pointwise kernels run");
  if (d.N != p.N || d.P != p.P || d.Q != p.Q || d.K != p.K)
    return no("the folded layer's output is not the residual's shape");
  if (!p.hasZ || d.hasZ) return no("the layer needs a residual, the folded layer none");
  if (!dev::i8LeanEpilogue(p, p.gemmK <= 256) || !dev::i8LeanEpilogue(d, d.gemmK <= 256))
    return no(
        "both layers need the lean epilogue (fast rounding, int8 output and residual, "
        "no activation or Relu, sums within 2^22)");
  if (d.act != DeviceActivation::kNone) return no("the folded layer has an activation");
  const Int8ConvTile t = int8ConvTmaTile(p.kernel);
  const int blocks = t.bn == 64 ? 3 : 2;
  const int budget = std::min(detail::deviceSharedMemoryOptin(),
                              detail::deviceSharedMemoryPerSm() / blocks - 1024);
  if (int8ConvPointwiseFoldSharedBytes(p, d) > budget)
    return no("the two layers' weights and two stages of both inputs exceed the shared memory");
  return true;
}

Status launchInt8ConvPointwiseFold(const Int8ConvPlan& p, const Int8ConvArgs& a,
                                   const Int8ConvPlan& d, const Int8ConvArgs& da, void* stream) {
  std::string why;
  if (!int8ConvPointwiseFoldFits(p, d, &why))
    return Status(ErrorCode::kInvalidArgument,
                  "int8 pointwise conv with a folded residual: " + why);
  const auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (!aligned16(a.x) || !aligned16(a.w) || !aligned16(a.y) || !aligned16(a.alpha) ||
      !aligned16(a.bias) || !aligned16(da.x) || !aligned16(da.w) || !aligned16(da.alpha) ||
      !aligned16(da.bias))
    return Status(ErrorCode::kInvalidArgument, "int8 pointwise conv: tensors not 16-byte aligned");
  PwFold f;
  f.x = static_cast<const int8_t*>(da.x);
  f.w = static_cast<const int8_t*>(da.w);
  f.alpha = da.alpha;
  f.bias = da.bias;
  f.C = d.C;
  f.H = d.H;
  f.W = d.W;
  f.strideH = d.strideH;
  f.strideW = d.strideW;
  f.wPitch = d.gemmKPad;
  auto st = static_cast<cudaStream_t>(stream);
  switch (p.kernel) {
    case Int8ConvKernel::kPw128x128:
      return launchPointwiseFold<128, 128>(p, a, f, st);
    case Int8ConvKernel::kPw128x64:
      return launchPointwiseFold<128, 64>(p, a, f, st);
    default:  // kPw64x256 (int8ConvPointwiseFoldFits)
      return launchPointwiseFold<64, 256>(p, a, f, st);
  }
}

bool int8ConvPointwiseFits(const Int8ConvPlan& p) {
  if (p.R != 1 || p.S != 1 || p.padTop != 0 || p.padLeft != 0) return false;
  if (p.strideH < 1 || p.strideW < 1) return false;
  // No padding at the far side either: the output covers exactly the strided input pixels.
  if (p.P != (p.H - 1) / p.strideH + 1 || p.Q != (p.W - 1) / p.strideW + 1) return false;
  return p.C % 32 == 0 && p.C <= kPwMaxC && p.K % 32 == 0 && p.gemmKPad >= p.C;
}

Status launchInt8ConvPointwise(const Int8ConvPlan& p, const Int8ConvArgs& a, void* stream) {
  if (!int8ConvPointwiseFits(p))
    return Status(ErrorCode::kInvalidArgument,
                  "int8 pointwise conv: the layer is not a 1x1 convolution without padding of "
                  "C % 32 == 0 (at most " +
                      std::to_string(kPwMaxC) + ") and K % 32 == 0 channels");
  const auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (!aligned16(a.x) || !aligned16(a.w) || !aligned16(a.y) || !aligned16(a.alpha) ||
      !aligned16(a.bias) || (p.hasZ && !aligned16(a.z)))
    return Status(ErrorCode::kInvalidArgument, "int8 pointwise conv: tensors not 16-byte aligned");
  auto st = static_cast<cudaStream_t>(stream);
  switch (p.kernel) {
    case Int8ConvKernel::kPw128x128:
      return launchPointwise<128, 128>(p, a, st);
    case Int8ConvKernel::kPw128x64:
      return launchPointwise<128, 64>(p, a, st);
    case Int8ConvKernel::kPw64x256:
      return launchPointwise<64, 256>(p, a, st);
    case Int8ConvKernel::kPw64x128:
      return launchPointwise<64, 128>(p, a, st);
    default:
      return Status(ErrorCode::kInvalidArgument, "int8 pointwise conv: not a pointwise kernel");
  }
}

}  // namespace edgeinfer::cuda
