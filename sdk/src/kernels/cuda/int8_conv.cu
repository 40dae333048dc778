// INT8 convolution kernels of the `cuda-i8` tactic provider (int8_conv.h).
//
// Dense layers are an implicit GEMM: the output pixels (n, p, q) are the GEMM's M rows, the
// output channels its N columns, and (r, s, c) with c innermost its K dimension, so an NHWC
// input row of C channels is contiguous in K and the weights [K][R*S*C] are the "col" operand
// of mma.sync m16n8k32 as they are. A block of 8 warps computes BM x BN outputs (each warp 32
// rows); per K step of 64 bytes every thread issues cp.async copies of its part of the next A
// (input, gathered through the convolution window, zero-filled outside the image) and B
// (weights) tiles into the other shared-memory stage while the warps multiply the current one,
// reading their fragments with ldmatrix.x4.
//
// The fragment layouts are mma_sync.cuh's. The epilogue is int8_conv_epilogue.cuh's, in the
// plan's rounding.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/int8_conv.h"
#include "kernels/cuda/int8_conv_epilogue.cuh"
#include "kernels/cuda/mma_sync.cuh"

namespace edgeinfer::cuda {
namespace {

constexpr int kThreads = 256;   // dense kernels: 8 warps
constexpr int kBK = 64;         // K bytes per pipeline step: two mma k-steps
constexpr int kLds = kBK + 16;  // shared row stride in bytes (80)

using dev::cpAsync;
using dev::i8StageOutput;
using dev::i8StoreOutput;
using dev::i8StoreTile;
using dev::ldmatrixX4;

/// Dense INT8 convolution as an implicit GEMM (see the top of this file): 8 warps, a BM x BN
/// block tile, K steps of 64 bytes through a two-stage cp.async pipeline, fragments read with
/// ldmatrix. Rows of the shared tiles are 80 bytes apart: the 8 rows one ldmatrix phase reads
/// fall in 8 different 4-bank groups. SPLIT (a kernel of its own, so the unsplit one keeps its
/// registers): block z adds up its share of the K steps (p.splitK ways) and stores the int32
/// sums to `partial` (split z's tile of S x rows x gridDim.y * BN), for i8SplitKEpilogue.
template <int BM, int BN, int VEC, bool SPLIT>
__global__ void __launch_bounds__(kThreads, 2)
    i8ConvMma(const Int8ConvPlan p, const int8_t* __restrict__ x, const int8_t* __restrict__ w,
              const float* __restrict__ alpha, const float* __restrict__ bias,
              const void* __restrict__ z, void* __restrict__ y, int32_t* __restrict__ partial) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kWarpsM = BM / 32, kWarpsN = (kThreads / 32) / kWarpsM;
  constexpr int kWN = BN / kWarpsN;  // warp tile: 32 x kWN
  constexpr int kMT = 2, kNT = kWN / 8;
  static_assert(kNT % 2 == 0, "B fragments are loaded two n8 tiles at a time");
  constexpr int kAChunks = kBK / VEC;  // loads per A row and step
  constexpr int kALoads = BM * kAChunks / kThreads;
  constexpr int kARowStep = kThreads / kAChunks;
  constexpr int kBLoads = BN * (kBK / 16) / kThreads;
  static_assert(kALoads >= 1 && kBLoads >= 1, "tile too small for the block");
  // The A and B stages, and after the main loop the output tile (staged for 16-byte stores).
  __shared__ __align__(128) int8_t smem[2 * (BM + BN) * kLds];
  auto As = reinterpret_cast<int8_t(*)[BM][kLds]>(smem);
  auto Bs = reinterpret_cast<int8_t(*)[BN][kLds]>(smem + 2 * BM * kLds);

  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wm = warp % kWarpsM, wn = warp / kWarpsM;
  const int g = lane >> 2, t4 = lane & 3;
  const int rows = p.N * p.P * p.Q;
  const int m0 = static_cast<int>(blockIdx.x) * BM, n0 = static_cast<int>(blockIdx.y) * BN;

  // This thread's A rows (fixed for the whole K loop) and its chunk within a row.
  const int aChunk = tid % kAChunks;
  int aBase[kALoads], aH[kALoads], aW[kALoads];
#pragma unroll
  for (int i = 0; i < kALoads; ++i) {
    const int m = m0 + tid / kAChunks + i * kARowStep;
    if (m < rows) {
      const int q = m % p.Q, t = m / p.Q;
      aBase[i] = (t / p.P) * p.H;  // n * H
      aH[i] = (t % p.P) * p.strideH - p.padTop;
      aW[i] = q * p.strideW - p.padLeft;
    } else {
      aBase[i] = 0;
      aH[i] = -(1 << 29);  // never inside the image
      aW[i] = 0;
    }
  }
  const int bChunk = tid % (kBK / 16);

  const auto loadStage = [&](int kt, int st) {
    const int k = kt * kBK + aChunk * VEC;
    int dh = 0, dw = 0, c = 0;
    const bool kIn = k < p.gemmK;
    if (kIn) {
      c = k % p.C;
      const int rs = k / p.C;
      dh = (rs / p.S) * p.dilH;
      dw = (rs % p.S) * p.dilW;
    }
#pragma unroll
    for (int i = 0; i < kALoads; ++i) {
      const int ih = aH[i] + dh, iw = aW[i] + dw;
      const bool valid = kIn && ih >= 0 && ih < p.H && iw >= 0 && iw < p.W;
      const int8_t* src =
          valid ? x + (static_cast<int64_t>(aBase[i] + ih) * p.W + iw) * p.C + c : x;
      cpAsync<VEC>(&As[st][tid / kAChunks + i * kARowStep][aChunk * VEC], src, valid);
    }
#pragma unroll
    for (int i = 0; i < kBLoads; ++i) {
      const int row = tid / (kBK / 16) + i * (kThreads / (kBK / 16));
      const int n = n0 + row;
      const bool valid = n < p.K;
      const int8_t* src =
          valid ? w + static_cast<int64_t>(n) * p.gemmKPad + kt * kBK + bChunk * 16 : w;
      cpAsync<16>(&Bs[st][row][bChunk * 16], src, valid);
    }
    dev::cpAsyncCommit();
  };

  int32_t acc[kMT][kNT][4];
#pragma unroll
  for (int a = 0; a < kMT; ++a)
#pragma unroll
    for (int b = 0; b < kNT; ++b)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[a][b][e] = 0;

  // Split K: this block's steps [kBegin, kBegin + steps).
  const int allSteps = p.gemmKPad / kBK, split = SPLIT ? static_cast<int>(blockIdx.z) : 0;
  const int kBegin = SPLIT ? split * allSteps / p.splitK : 0;
  const int steps = SPLIT ? (split + 1) * allSteps / p.splitK - kBegin : allSteps;
  loadStage(kBegin, 0);
  for (int kt = 0; kt < steps; ++kt) {
    const int st = kt & 1;
    if (kt + 1 < steps) {
      loadStage(kBegin + kt + 1, st ^ 1);
      dev::cpAsyncWait<1>();
    } else {
      dev::cpAsyncWait<0>();
    }
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < kBK / 32; ++ks) {
      uint32_t af[kMT][4], bf[kNT][2];
#pragma unroll
      for (int a = 0; a < kMT; ++a)
        ldmatrixX4(af[a], &As[st][wm * 32 + a * 16 + (lane & 15)][ks * 32 + (lane >> 4) * 16]);
#pragma unroll
      for (int b = 0; b < kNT; b += 2) {
        uint32_t r[4];
        ldmatrixX4(r, &Bs[st][wn * kWN + b * 8 + (lane & 7) + ((lane >> 4) << 3)]
                         [ks * 32 + ((lane >> 3) & 1) * 16]);
        bf[b][0] = r[0];
        bf[b][1] = r[1];
        bf[b + 1][0] = r[2];
        bf[b + 1][1] = r[3];
      }
#pragma unroll
      for (int a = 0; a < kMT; ++a)
#pragma unroll
        for (int b = 0; b < kNT; ++b) dev::mmaS8(acc[a][b], af[a], bf[b]);
    }
    __syncthreads();  // the next iteration's loads overwrite this stage
  }

  if constexpr (SPLIT) {  // the int32 sums to this split's partial tile, two columns a store
    const int cols = static_cast<int>(gridDim.y) * BN;
    int32_t* part = partial + static_cast<int64_t>(split) * rows * cols;
#pragma unroll
    for (int a = 0; a < kMT; ++a)
#pragma unroll
      for (int b = 0; b < kNT; ++b)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int m = m0 + wm * 32 + a * 16 + g + 8 * h;
          const int col = n0 + wn * kWN + b * 8 + 2 * t4;
          if (m < rows)
            __stcg(reinterpret_cast<int2*>(part + static_cast<int64_t>(m) * cols + col),
                   make_int2(acc[a][b][2 * h], acc[a][b][2 * h + 1]));
        }
    return;
  }

  // Epilogue: each value into the shared output tile (rows of BN elements, 16 bytes of padding),
  // then whole 16-byte pieces of output rows to memory, coalesced. (The stages are free: the
  // loop ended with a barrier.)
  const int ldo = BN * (p.yScale > 0.f ? 1 : 2) + 16;
  static_assert(BM * (BN * 2 + 16) <= 2 * (BM + BN) * kLds, "the output tile fits the stages");
#pragma unroll
  for (int a = 0; a < kMT; ++a)
#pragma unroll
    for (int b = 0; b < kNT; ++b)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        i8StageOutput(p, acc[a][b][e], wm * 32 + a * 16 + g + (e >= 2 ? 8 : 0),
                      wn * kWN + b * 8 + 2 * t4 + (e & 1), m0, n0, rows, ldo, alpha, bias, z, smem);
  __syncthreads();
  i8StoreTile<BM, BN>(p, smem, ldo, m0, n0, rows, y, tid, kThreads);
#else
  __trap();  // the provider offers these tactics on sm_80 and newer only
#endif
}

/// Split K's second kernel (the mma.sync kernels'): a tile of kSplitRows output pixels x 64
/// channels a block, the int32 partial sums of p.splitK splits added up (exactly) into shared
/// memory, then the epilogue every kernel uses. `cols`: the partial tiles' row length.
constexpr int kSplitRows = 32, kSplitThreads = 256;

__global__ void __launch_bounds__(kSplitThreads)
    i8SplitKEpilogue(const Int8ConvPlan p, const int32_t* __restrict__ partial, int cols,
                     const float* __restrict__ alpha, const float* __restrict__ bias,
                     const void* __restrict__ z, void* __restrict__ y) {
  __shared__ __align__(16) int32_t tile[kSplitRows * dev::kWgmmaAccPitch<64>];
  const int tid = static_cast<int>(threadIdx.x);
  const int rows = p.N * p.P * p.Q;
  const int m0 = static_cast<int>(blockIdx.x) * kSplitRows, n0 = static_cast<int>(blockIdx.y) * 64;
  const int64_t splitStride = static_cast<int64_t>(rows) * cols;
  for (int i = tid; i < kSplitRows * 16; i += kSplitThreads) {  // 16 pieces of 4 a row
    const int r = i / 16, c = (i % 16) * 4;
    int4 sum = make_int4(0, 0, 0, 0);
    if (m0 + r < rows) {
      const int32_t* src = partial + static_cast<int64_t>(m0 + r) * cols + n0 + c;
      for (int k = 0; k < p.splitK; ++k) {
        const int4 v = __ldcg(reinterpret_cast<const int4*>(src + k * splitStride));
        sum.x += v.x;
        sum.y += v.y;
        sum.z += v.z;
        sum.w += v.w;
      }
    }
    *reinterpret_cast<int4*>(&tile[r * dev::kWgmmaAccPitch<64> + c]) = sum;
  }
  __syncthreads();
  const uint4 none[dev::WgmmaEpilogueWalk<64, kSplitRows, kSplitThreads>::kSteps] = {};
  dev::i8WgmmaEpilogue<64, kSplitRows, kSplitThreads, false>(p, tile, m0, n0, rows, alpha, bias, z,
                                                             y, tid, none);
}

/// Depthwise: one output pixel and V channels per thread, channels fastest (coalesced).
template <int V>
__global__ void __launch_bounds__(256)
    i8Depthwise(const Int8ConvPlan p, const int8_t* __restrict__ x, const int8_t* __restrict__ w,
                const float* __restrict__ alpha, const float* __restrict__ bias,
                const void* __restrict__ z, void* __restrict__ y, int64_t total) {
  const int groups = p.C / V;
  for (int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; e < total;
       e += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int cg = static_cast<int>(e % groups);
    const int64_t pix = e / groups;
    const int q = static_cast<int>(pix % p.Q);
    const int64_t t = pix / p.Q;
    const int oh = static_cast<int>(t % p.P);
    const int n = static_cast<int>(t / p.P);
    const int c0 = cg * V;
    int32_t acc[V];
#pragma unroll
    for (int v = 0; v < V; ++v) acc[v] = 0;
    for (int r = 0; r < p.R; ++r) {
      const int ih = oh * p.strideH - p.padTop + r * p.dilH;
      if (ih < 0 || ih >= p.H) continue;
      for (int s = 0; s < p.S; ++s) {
        const int iw = q * p.strideW - p.padLeft + s * p.dilW;
        if (iw < 0 || iw >= p.W) continue;
        const int8_t* xp = x + ((static_cast<int64_t>(n) * p.H + ih) * p.W + iw) * p.C + c0;
        const int8_t* wp = w + (r * p.S + s) * p.C + c0;
        if constexpr (V == 4) {
          const char4 xv = *reinterpret_cast<const char4*>(xp);
          const char4 wv = *reinterpret_cast<const char4*>(wp);
          acc[0] += xv.x * wv.x;
          acc[1] += xv.y * wv.y;
          acc[2] += xv.z * wv.z;
          acc[3] += xv.w * wv.w;
        } else {
#pragma unroll
          for (int v = 0; v < V; ++v) acc[v] += xp[v] * wp[v];
        }
      }
    }
#pragma unroll
    for (int v = 0; v < V; ++v)
      i8StoreOutput(p, acc[v], c0 + v, pix * p.C + c0 + v, alpha, bias, z, y);
  }
}

bool aligned(const void* ptr, int bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % static_cast<uintptr_t>(bytes) == 0;
}

template <int BM, int BN, int VEC>
void launchMma(const Int8ConvPlan& p, const Int8ConvArgs& a, cudaStream_t st) {
  const int rows = p.N * p.P * p.Q;
  const dim3 grid(static_cast<unsigned>((rows + BM - 1) / BM),
                  static_cast<unsigned>((p.K + BN - 1) / BN), static_cast<unsigned>(p.splitK));
  const auto* x = static_cast<const int8_t*>(a.x);
  const auto* w = static_cast<const int8_t*>(a.w);
  if (p.splitK == 1) {
    i8ConvMma<BM, BN, VEC, false>
        <<<grid, kThreads, 0, st>>>(p, x, w, a.alpha, a.bias, a.z, a.y, nullptr);
    return;
  }
  auto* partial = static_cast<int32_t*>(a.workspace);
  i8ConvMma<BM, BN, VEC, true>
      <<<grid, kThreads, 0, st>>>(p, x, w, a.alpha, a.bias, a.z, a.y, partial);
  const int cols = static_cast<int>(grid.y) * BN;
  const dim3 g2(static_cast<unsigned>((rows + kSplitRows - 1) / kSplitRows),
                static_cast<unsigned>((p.K + 63) / 64));  // no block past the last channel
  i8SplitKEpilogue<<<g2, kSplitThreads, 0, st>>>(p, partial, cols, a.alpha, a.bias, a.z, a.y);
}

/// Whether one launch of a dense kernel covers the layer: 2^31 - 1 blocks of BM output pixels,
/// 65535 of BN channels.
bool denseGridFits(const Int8ConvPlan& p) {
  int bm = 128, bn = 128;
  switch (p.kernel) {
    case Int8ConvKernel::kMma64x128:
    case Int8ConvKernel::kWgmma64x128:
    case Int8ConvKernel::kTma64x128:
      bm = 64;
      break;
    case Int8ConvKernel::kMma128x64:
    case Int8ConvKernel::kWgmma128x64:
    case Int8ConvKernel::kWgmma128x64k128:
    case Int8ConvKernel::kTma128x64:
      bn = 64;
      break;
    case Int8ConvKernel::kWgmma128x256:
    case Int8ConvKernel::kTma128x256:
      bn = 256;
      break;
    default:
      break;
  }
  const int64_t rows = int64_t{p.N} * p.P * p.Q;
  return (rows + bm - 1) / bm <= 0x7fffffff && (p.K + bn - 1) / bn <= 65535;
}

}  // namespace

Status launchInt8Conv(const Int8ConvPlan& p, const Int8ConvArgs& a, void* stream) {
  auto st = static_cast<cudaStream_t>(stream);
  if (!a.x || !a.w || !a.alpha || !a.bias || !a.y || (p.hasZ && !a.z))
    return Status(ErrorCode::kInvalidArgument, "int8 conv: missing pointer");
  if (!aligned(a.x, p.vec) || !aligned(a.w, 16))
    return Status(ErrorCode::kInvalidArgument,
                  "int8 conv: the input is not aligned to " + std::to_string(p.vec) + " bytes");
  if (p.N <= 0 || p.P <= 0 || p.Q <= 0 || p.K <= 0) return Status::Ok();
  // Split K: the TMA and mma.sync kernels only, 1 to 16 ways, a K step or more a split; the
  // mma.sync kernels' partial sums in a 16-byte aligned workspace.
  const bool splits = isInt8ConvTmaKernel(p.kernel) || isInt8ConvMmaKernel(p.kernel);
  if (p.splitK < 1 || p.splitK > kInt8ConvMaxSplitK || (p.splitK > 1 && !splits) ||
      (splits && p.splitK > p.gemmKPad / int8ConvTmaTile(p.kernel).bk))
    return Status(ErrorCode::kInvalidArgument,
                  "int8 conv: split K " + std::to_string(p.splitK) + " is not 1 to " +
                      std::to_string(kInt8ConvMaxSplitK) +
                      " for a TMA or mma.sync kernel, with a K step or more a split");
  if (int8ConvWorkspaceBytes(p) > 0 && (p.K + 63) / 64 > 65535)
    return Status(ErrorCode::kUnsupported, "int8 conv: too many channels to split K");
  if (int8ConvWorkspaceBytes(p) > 0 && (!a.workspace || !aligned(a.workspace, 16)))
    return Status(ErrorCode::kInvalidArgument,
                  "int8 conv: split K needs a 16-byte aligned workspace for its partial sums");
  if (p.kernel == Int8ConvKernel::kDepthwise) {
    const int64_t total = static_cast<int64_t>(p.N) * p.P * p.Q * (p.C / p.vec);
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((total + threads - 1) / threads, 65535 * 8);
    if (p.vec == 4)
      i8Depthwise<4><<<static_cast<unsigned>(blocks), threads, 0, st>>>(
          p, static_cast<const int8_t*>(a.x), static_cast<const int8_t*>(a.w), a.alpha, a.bias, a.z,
          a.y, total);
    else
      i8Depthwise<1><<<static_cast<unsigned>(blocks), threads, 0, st>>>(
          p, static_cast<const int8_t*>(a.x), static_cast<const int8_t*>(a.w), a.alpha, a.bias, a.z,
          a.y, total);
  } else if (isInt8ConvPointwiseKernel(p.kernel)) {
    return launchInt8ConvPointwise(p, a, stream);
  } else if (p.kernel == Int8ConvKernel::kHalo128x64) {
    return launchInt8ConvHalo(p, a, stream);
  } else if (p.kernel == Int8ConvKernel::kHaloWg128x64) {
    return launchInt8ConvHaloWg(p, a, stream);
  } else if (!denseGridFits(p)) {
    return Status(ErrorCode::kUnsupported, "int8 conv: too large for one launch");
  } else if (isInt8ConvTmaKernel(p.kernel) || isInt8ConvTmaRegKernel(p.kernel)) {
    return launchInt8ConvTma(p, a, stream);
  } else if (p.kernel != Int8ConvKernel::kMma128x128 && p.kernel != Int8ConvKernel::kMma128x64 &&
             p.kernel != Int8ConvKernel::kMma64x128) {
    return launchInt8ConvWgmma(p, a, stream);
  } else {
    switch (p.kernel) {
      case Int8ConvKernel::kMma128x128:
        p.vec == 16 ? launchMma<128, 128, 16>(p, a, st) : launchMma<128, 128, 4>(p, a, st);
        break;
      case Int8ConvKernel::kMma128x64:
        p.vec == 16 ? launchMma<128, 64, 16>(p, a, st) : launchMma<128, 64, 4>(p, a, st);
        break;
      default:
        p.vec == 16 ? launchMma<64, 128, 16>(p, a, st) : launchMma<64, 128, 4>(p, a, st);
        break;
    }
  }
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

#ifndef EDGEINFER_HAVE_SM90A
int int8ConvHaloWgSharedBytes(const Int8ConvPlan&) {
  return 0;
}

Status launchInt8ConvHaloWg(const Int8ConvPlan&, const Int8ConvArgs&, void*) {
  return Status(ErrorCode::kUnsupported, "int8 conv: this build has no sm_90a (wgmma) code");
}

Status launchInt8ConvWgmma(const Int8ConvPlan&, const Int8ConvArgs&, void*) {
  return Status(ErrorCode::kUnsupported, "int8 conv: this build has no sm_90a (wgmma) code");
}

Status launchInt8ConvTma(const Int8ConvPlan&, const Int8ConvArgs&, void*) {
  return Status(ErrorCode::kUnsupported, "int8 conv: this build has no sm_90a (TMA) code");
}

bool int8ConvTmaAvailable() {
  return false;
}

bool int8ConvTmaFits(const Int8ConvPlan&, int) {
  return false;
}

bool int8ConvTmaSplitRuns(Int8ConvKernel, int split) {
  return split <= 1;
}
#endif

}  // namespace edgeinfer::cuda
