// Kernel of the `cuda-stem` tactic provider (stem_conv.h).
//
// An implicit GEMM: a block's rows are the output pixels of its tile (TILE_H rows of 16 pixels
// of one image), its columns BN output channels, and its K the window taps in the order of
// stemTap() (stem_conv.h), so the packed weights [K][gemmKPad] are the "col" operand of
// mma.sync as they are. Per tile the block holds the input patch the tile reads (patchH x
// patchW x C values as half, zeros outside the image) in shared memory as pairs: word i holds
// patch values i and i + 1. stemTap() keeps every pair of K positions (2j, 2j + 1) side by
// side in the patch, so one 32-bit load at pairs[base(m) + off(2j)] is an A register: base(m)
// is the patch offset of pixel m's window, off(k) that of tap k in it (the table
// stemPairOffsets() makes on the host). B fragments come from the block's weights in shared
// memory through ldmatrix.x4.
//
// The patch is built in two steps: the input rows it covers are copied as they are stored
// (16-byte cp.async pieces where every row starts 16-byte aligned), one tile ahead, so the copy
// of the next tile's rows is in flight while this one computes; at the tile's start the block
// turns them into the pairs (a few operations a value, no division per value). The int8
// epilogue of ReLU or no activation takes two or three operations a value.
//
// Fragment layouts (PTX ISA, mma.m16n8k16 .f16 row.col): with g = lane / 4 and t = lane % 4,
//   A regs 0..3 (half2): (row g, k 2t..2t+1), (g + 8, 2t..), (g, 8 + 2t..), (g + 8, 8 + 2t..)
//   B regs 0..1 (half2): (k 2t..2t+1, col g), (k 8 + 2t.., col g)
//   C regs 0..3 (float): (row g, col 2t), (g, 2t + 1), (g + 8, 2t), (g + 8, 2t + 1)
// Warp w owns tile rows 2w and 2w + 1, one m16 fragment each; fragment rows g and g + 8 are
// the pixels in columns g and g + 8.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/fast_div.h"
#include "kernels/cuda/fused_activation.cuh"
#include "kernels/cuda/mma_sync.cuh"
#include "kernels/cuda/quantize.cuh"
#include "kernels/cuda/stem_conv.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kTileW = 16;  // output pixels per tile row

/// e / d for 0 <= e < 2^22 and 0 < d < 2^12, `inv` = 1 / d: the float quotient truncated,
/// then corrected by one step (its error is under one), without an integer division.
__device__ __forceinline__ int divSmall(int e, int d, float inv) {
  int q = __float2int_rz(__int2float_rn(e) * inv);
  const int r = e - q * d;
  return q + (r >= d) - (r < 0);
}

/// The input rows a tile's patch reads, as the input stores them: NCHW, C * patchH rows of
/// patchW values (channel-major); NHWC, patchH rows of patchW * C values. The copy of a row
/// starts at the 16-byte piece of the input row that holds its first value and takes
/// rowChunks pieces, so `off` values of the copy come before the patch's.
struct PatchRows {
  int rows, rowChunks, rowLen, off, a0;  // rowLen: values of an input row; a0: first copied
};

template <StemInput XF>
__host__ __device__ constexpr int valueBytes() {
  return XF == StemInput::kFloatNchw ? 4 : 2;
}

__host__ __device__ inline int valueBytes(StemInput in) {
  return in == StemInput::kFloatNchw ? 4 : 2;
}

/// Rows and pieces a row of the raw patch copy (the most over every alignment of its start).
__host__ __device__ inline void rawPatchShape(StemInput in, int C, int patchH, int patchW,
                                              int* rows, int* rowChunks) {
  const bool nchw = in != StemInput::kHalfNhwc;
  const int v = 16 / valueBytes(in), seg = nchw ? patchW : patchW * C;
  *rows = nchw ? C * patchH : patchH;
  *rowChunks = (seg + 2 * v - 2) / v;
}

template <StemInput XF>
__device__ __forceinline__ PatchRows patchRows(const StemConvPlan& p, int patchH, int patchW,
                                               int w0) {
  constexpr bool kNchw = XF != StemInput::kHalfNhwc;
  constexpr int V = 16 / valueBytes<XF>();
  PatchRows r;
  rawPatchShape(XF, p.C, patchH, patchW, &r.rows, &r.rowChunks);
  r.rowLen = kNchw ? p.W : p.W * p.C;
  const int start = kNchw ? w0 : w0 * p.C;                         // may be negative (padding)
  r.a0 = start >= 0 ? start / V * V : -((V - 1 - start) / V) * V;  // floor to a piece
  r.off = start - r.a0;
  return r;
}

/// Copies the rows of the patch of image n with top-left input coordinate (h0, w0) into
/// `raw` (row j at j * rowChunks pieces), zeros outside the image. `async`: every input row
/// starts on a 16-byte boundary (the tensor's address and row length allow it), so each piece
/// is wholly inside or outside a row and goes by one cp.async (zero-filled outside), which the
/// caller waits for, under the L2 policy `policy`; otherwise value by value, loaded and stored
/// now.
template <StemInput XF, int kThreads>
__device__ __forceinline__ void copyPatchRows(const StemConvPlan& p, const void* __restrict__ x,
                                              unsigned char* raw, const PatchRows& pr, int n,
                                              int h0, int patchH, bool async, uint64_t policy) {
  constexpr bool kNchw = XF != StemInput::kHalfNhwc;
  constexpr int E = valueBytes<XF>(), V = 16 / E;
  const int tid = static_cast<int>(threadIdx.x);
  // A unit is one piece position q of one channel c's rows (NCHW; NHWC rows hold every channel:
  // one "channel"): G units, and the rows of a unit are one row length apart in x and rowChunks
  // pieces apart in `raw`. The block's threads take the units `phases` times over, thread tid
  // unit tid % G in rows tid / G, + phases, ...: a piece then costs an address step, two bounds
  // and the copy. (One piece index stepped through pieces, rows and channels took about 55
  // instructions a piece, 13 % of ResNet-50's stem at batch 64, Nsight Compute.)
  const int G = (kNchw ? p.C : 1) * pr.rowChunks;
  const int phases = G < kThreads ? kThreads / G : 1;
  const int phase = G < kThreads ? divSmall(tid, G, __frcp_rn(static_cast<float>(G))) : 0;
  if (phase >= phases) return;  // (kThreads % G threads idle)
  const float invChunks = __frcp_rn(static_cast<float>(pr.rowChunks));
  using T = std::conditional_t<E == 4, float, uint16_t>;
  const T* xt = static_cast<const T*>(x);
  for (int unit = tid - phase * G; unit < G; unit += kThreads) {
    const int c = kNchw ? divSmall(unit, pr.rowChunks, invChunks) : 0;
    const int q = unit - c * pr.rowChunks, e0 = pr.a0 + q * V;
    const bool colIn = e0 >= 0 && e0 < pr.rowLen;  // (the async pieces: in or out whole)
    // Row ph of the unit: input row h0 + ph of channel c, stepped along by pointers (rows above
    // or below the image only dereferenced inside it).
    const T* rowSrc = xt +
                      (kNchw ? (int64_t{n} * p.C + c) * p.H * p.W : int64_t{n} * p.H * pr.rowLen) +
                      e0 + static_cast<int64_t>(h0 + phase) * pr.rowLen;
    const int64_t srcStep = static_cast<int64_t>(phases) * pr.rowLen;
    unsigned char* d = raw + ((c * patchH + phase) * pr.rowChunks + q) * 16;
    const int dstStep = phases * pr.rowChunks * 16;
    int h = h0 + phase;
    if (async) {
      for (int ph = phase; ph < patchH;
           ph += phases, h += phases, rowSrc += srcStep, d += dstStep) {
        const bool in = colIn && h >= 0 && h < p.H;
        dev::cpAsync16Hint(d, in ? rowSrc : xt, in, policy);
      }
    } else {
      for (int ph = phase; ph < patchH;
           ph += phases, h += phases, rowSrc += srcStep, d += dstStep) {
        const bool rowIn = h >= 0 && h < p.H;
#pragma unroll
        for (int e = 0; e < V; ++e) {
          const bool in = rowIn && e0 + e >= 0 && e0 + e < pr.rowLen;
          reinterpret_cast<T*>(d)[e] = in ? rowSrc[e] : T{0};
        }
      }
    }
  }
}

/// convertPatch() for C channels (C = 0: `channels`, not unrolled).
template <int C, StemInput XF, int kThreads>
__device__ __forceinline__ void convertPatchC(int channels, const unsigned char* raw,
                                              const PatchRows& pr, uint32_t* pairs, int patchH,
                                              int patchW) {
  constexpr bool kNchw = XF != StemInput::kHalfNhwc;
  constexpr int V = 16 / valueBytes<XF>();
  const int rowElems = pr.rowChunks * V, nc = C > 0 ? C : channels;
  // Raw index of value (c, ph, pw): ph * rowElems + off + pw * wStep + c * cStep.
  const int cStep = kNchw ? patchH * rowElems : 1, wStep = kNchw ? 1 : nc;
  const int tid = static_cast<int>(threadIdx.x);
  int ph = divSmall(tid, patchW, __frcp_rn(static_cast<float>(patchW))), pw = tid - ph * patchW;
  const int dh = kThreads / patchW, dw = kThreads - dh * patchW;
  int idx = ph * rowElems + pr.off + pw * wStep;
  const int dIdx = dh * rowElems + dw * wStep, wrap = rowElems - patchW * wStep;
  const auto at = [&](int i) -> uint32_t {  // raw value i as half bits
    if constexpr (XF == StemInput::kFloatNchw)
      return __half_as_ushort(__float2half_rn(reinterpret_cast<const float*>(raw)[i]));
    else
      return reinterpret_cast<const uint16_t*>(raw)[i];
  };
  uint32_t* dst = pairs + tid * nc;
  for (int u = tid; u < patchH * patchW; u += kThreads) {
    uint32_t cur = at(idx);
#pragma unroll
    for (int c = 0; c < nc; ++c) {  // unrolled where C is known
      const uint32_t next = c + 1 < nc        ? at(idx + (c + 1) * cStep)
                            : pw + 1 < patchW ? at(idx + wStep)
                                              : 0u;
      dst[c] = cur | (next << 16);
      cur = next;
    }
    dst += kThreads * nc;
    pw += dw, ph += dh, idx += dIdx;
    if (pw >= patchW) pw -= patchW, ++ph, idx += wrap;
  }
}

/// The raw rows into the patch the main loop reads: values as half, in [row][column][C] order,
/// value i in the low half of word i and the high half of word i - 1 (pairs). The value after
/// a patch row's last is taken as zero: only a padding position of K (weight zero) pairs
/// across rows. Three channels (an RGB image) unrolled.
template <StemInput XF, int kThreads>
__device__ __forceinline__ void convertPatch(const StemConvPlan& p, const unsigned char* raw,
                                             const PatchRows& pr, uint32_t* pairs, int patchH,
                                             int patchW) {
  if (p.C == 3)
    convertPatchC<3, XF, kThreads>(3, raw, pr, pairs, patchH, patchW);
  else
    convertPatchC<0, XF, kThreads>(p.C, raw, pr, pairs, patchH, patchW);
}

__device__ __forceinline__ void ldmatrixX4(uint32_t (&r)[4], const void* ptr) {
  const auto a = static_cast<uint32_t>(__cvta_generic_to_shared(ptr));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

__device__ __forceinline__ void mmaF16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                       uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// mmaF16 with the sums starting at zero (d is written, not read).
__device__ __forceinline__ void mmaF16From0(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                            uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%10,%10,%10,%10};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "f"(0.f));
}

/// Bias, residual and activation of one output pair, as the CPU reference orders them.
/// ACT: 0 none, 1 ReLU, 2 any (the plan's).
template <int ACT, bool HAS_Z>
__device__ __forceinline__ float epilogueValue(const StemConvPlan& p, float acc, float b, float z) {
  float v = acc + b;
  if constexpr (HAS_Z) v += z;
  if constexpr (ACT == 1) return v > 0.f ? v : 0.f;
  if constexpr (ACT == 2) return dev::activate(v, p.act, p.alpha, p.beta);
  return v;
}

/// Output stage row: BN + 8 halves (fp16) or BN + 16 bytes (int8): 16-byte rows, and the rows
/// a warp's stores touch fall in different banks.
template <int BN, bool I8>
__host__ __device__ constexpr int stageRowBytes() {
  return I8 ? BN + 16 : (BN + 8) * 2;
}

/// The epilogue of a block's tile into the output stage Os ([BM] rows of stageRowBytes()):
/// fp16, or int8 quantized with the plan's yScale (`inv` = 1 / yScale).
template <int ACT, bool HAS_Z, int RPW, int BN, bool I8>
__device__ __forceinline__ void epilogueTile(const StemConvPlan& p,
                                             const float (&acc)[RPW][BN / 8][4], const float* Bs,
                                             const __half* __restrict__ z, unsigned char* Os,
                                             float inv, int n, int p0, int q0, int n0) {
  constexpr int NT = BN / 8, ldo = stageRowBytes<BN, I8>();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int a = 0; a < RPW; ++a) {
    const int prow = p0 + RPW * warp + a;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int pcol = q0 + g + 8 * h;
      const bool inside = prow < p.P && pcol < p.Q;
      const int m = (RPW * warp + a) * kTileW + g + 8 * h;
      const __half* zrow =
          HAS_Z ? z + ((static_cast<int64_t>(n) * p.P + prow) * p.Q + pcol) * p.K : nullptr;
      float v[2 * NT];  // this pixel's channels b * 8 + 2t and + 1, b = 0 .. NT - 1
#pragma unroll
      for (int b = 0; b < NT; ++b) {
        const int col = b * 8 + 2 * t, k = n0 + col;
        float z0 = 0.f, z1 = 0.f;
        if (HAS_Z && inside) {  // Z exists where the output does
          if (k < p.K) z0 = __half2float(zrow[k]);
          if (k + 1 < p.K) z1 = __half2float(zrow[k + 1]);
        }
        const float2 bias = *reinterpret_cast<const float2*>(Bs + col);
        v[2 * b] = epilogueValue<ACT, HAS_Z>(p, acc[a][b][2 * h], bias.x, z0);
        v[2 * b + 1] = epilogueValue<ACT, HAS_Z>(p, acc[a][b][2 * h + 1], bias.y, z1);
        if constexpr (!I8)  // stored at once: fewer live registers
          *reinterpret_cast<__half2*>(Os + m * ldo + col * 2) =
              __floats2half2_rn(v[2 * b], v[2 * b + 1]);
      }
      if constexpr (I8) {
        // round(y / scale) as round(y * (1 / scale)), clamped: no branch on the data (an exact
        // division where y / scale lies within rounding of a half step made the warps take a
        // slow path often enough on real images to double the kernel's time).
#pragma unroll
        for (int b = 0; b < NT; ++b) {
          const uint32_t lo = dev::quantizeStepsFast(__fmul_rn(v[2 * b], inv), true) & 0xffu;
          const uint32_t hi = dev::quantizeStepsFast(__fmul_rn(v[2 * b + 1], inv), true) & 0xffu;
          *reinterpret_cast<uint16_t*>(Os + m * ldo + b * 8 + 2 * t) =
              static_cast<uint16_t>(lo | (hi << 8));
        }
      }
    }
  }
}

/// The int8 epilogue of ReLU or no activation (no Z) in two or three operations a value:
/// `Bq` holds bias / yScale, for ReLU divided by 127 as `sc` is 1 / (127 yScale), so that
/// ReLU and the clamp to 127 are one saturated multiply-add to [0, 1] and a multiply-add by 127
/// onto kRoundMagic rounds (half to even) into the low byte; without an activation the value in
/// steps is clamped to [-128, 127] and rounded so (NaN -> 0 in both, as quantizeStepsFast).
/// Within one step of the general epilogue's quantize (the products' rounding differs by a few
/// units in the last place, which moves only values within that of a half step).
template <bool RELU, int RPW, int BN>
__device__ __forceinline__ void epilogueTileInt8Lean(const float (&acc)[RPW][BN / 8][4],
                                                     const float* Bq, float sc, unsigned char* Os) {
  constexpr int NT = BN / 8, ldo = stageRowBytes<BN, true>();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  unsigned char* row = Os + (RPW * warp * kTileW + g) * ldo + 2 * t;  // pixel (a, h) = (0, 0)
#pragma unroll
  for (int b = 0; b < NT; ++b) {
    const float2 bq = *reinterpret_cast<const float2*>(Bq + b * 8 + 2 * t);
#pragma unroll
    for (int a = 0; a < RPW; ++a)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t lo, hi;
        if constexpr (RELU) {
          const float t0 = __saturatef(__fmaf_rn(acc[a][b][2 * h], sc, bq.x));
          const float t1 = __saturatef(__fmaf_rn(acc[a][b][2 * h + 1], sc, bq.y));
          lo = __float_as_uint(__fmaf_rn(t0, 127.f, dev::kRoundMagic));
          hi = __float_as_uint(__fmaf_rn(t1, 127.f, dev::kRoundMagic));
        } else {
          lo = dev::quantizeStepsFast(__fmaf_rn(acc[a][b][2 * h], sc, bq.x), true);
          hi = dev::quantizeStepsFast(__fmaf_rn(acc[a][b][2 * h + 1], sc, bq.y), true);
        }
        *reinterpret_cast<uint16_t*>(row + (a * kTileW + 8 * h) * ldo + b * 8) =
            static_cast<uint16_t>(__byte_perm(lo, hi, 0x0040));
      }
  }
}

/// epilogueTile() specialised for the activation (none, ReLU, any other).
template <bool HAS_Z, int RPW, int BN, bool I8>
__device__ __forceinline__ void epilogueFor(int act, const StemConvPlan& p,
                                            const float (&acc)[RPW][BN / 8][4], const float* Bs,
                                            const __half* __restrict__ z, unsigned char* Os,
                                            float inv, int n, int p0, int q0, int n0) {
  if (act == 0)
    epilogueTile<0, HAS_Z, RPW, BN, I8>(p, acc, Bs, z, Os, inv, n, p0, q0, n0);
  else if (act == 1)
    epilogueTile<1, HAS_Z, RPW, BN, I8>(p, acc, Bs, z, Os, inv, n, p0, q0, n0);
  else
    epilogueTile<2, HAS_Z, RPW, BN, I8>(p, acc, Bs, z, Os, inv, n, p0, q0, n0);
}

/// Shared memory of a block, in bytes from its start: the weights [BN][gemmKPad + 8] half, the
/// tap offsets, the output stage [BM] rows of stageRowBytes(), the bias [BN] float and the bias
/// scaled for the lean int8 epilogue [BN], the patch (pairs), the raw copy of its input rows.
struct StemSmem {
  int offs, os, bias, biasQ, pairs, raw, total;
};

__host__ __device__ inline int align16(int v) {
  return (v + 15) / 16 * 16;
}

__host__ __device__ inline StemSmem stemSmem(const StemConvPlan& p) {
  const int bm = p.warps * 16 * p.rowsPerWarp, tileRows = p.warps * p.rowsPerWarp;
  const int patchW = (kTileW - 1) * p.strideW + (p.S - 1) * p.dilW + 1;
  const int patchH = (tileRows - 1) * p.strideH + (p.R - 1) * p.dilH + 1;
  int rows = 0, rowChunks = 0;
  rawPatchShape(p.input, p.C, patchH, patchW, &rows, &rowChunks);
  const int stageRow = p.int8Out ? p.blockN + 16 : (p.blockN + 8) * 2;
  StemSmem m;
  m.offs = p.blockN * (p.gemmKPad + 8) * 2;
  m.os = align16(m.offs + p.gemmKPad / 2 * 4);
  m.bias = align16(m.os + bm * stageRow);
  m.biasQ = m.bias + p.blockN * 4;
  m.pairs = align16(m.biasQ + p.blockN * 4);
  m.raw = align16(m.pairs + patchH * patchW * p.C * 4);
  m.total = m.raw + rows * rowChunks * 16;
  return m;
}

// At most 128 registers a thread: 16 warps a multiprocessor stay resident.
// RPW: output rows of a warp (2, or 1 with twice the warps: at batch 1 a warp's instruction
// count is the kernel's time, and the patch load and the epilogue spread over more threads).
// A tile's input rows are copied while the tile before it computes (copyPatchRows, a tile
// ahead), then turned into the patch of half pairs at the tile's start (convertPatch): the
// block's threads compute only while a copy is in flight.
template <int WARPS, int RPW, int BN, StemInput XF, bool I8>
__global__ void __launch_bounds__(WARPS * 32, 16 / WARPS)
    stemConvKernel(const StemConvPlan p, const void* __restrict__ x, const __half* __restrict__ w,
                   const int* __restrict__ pairOffsets, const float* __restrict__ bias,
                   const __half* __restrict__ z, void* __restrict__ y, const FastDiv tilesQ,
                   const FastDiv tilesP, int numTiles, bool asyncRows) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kThreads = WARPS * 32, BM = WARPS * 16 * RPW, TILE_H = WARPS * RPW, NT = BN / 8;
  constexpr int ldo = stageRowBytes<BN, I8>();  // output stage row (bytes)
  constexpr int kPiece = I8 ? 16 : 8;           // channels of a 16-byte store
  static_assert(NT % 2 == 0, "ldmatrix.x4 loads two n8 tiles");
  extern __shared__ __align__(16) unsigned char smem[];
  const StemSmem sm = stemSmem(p);
  // Weight rows of gemmKPad + 8 halves: 16-byte aligned, and the 8 rows one ldmatrix phase
  // reads fall in 8 different 16-byte bank groups.
  const int ldw = p.gemmKPad + 8;
  auto* Ws = reinterpret_cast<__half*>(smem);                  // [BN][ldw]
  auto* offs = reinterpret_cast<int*>(smem + sm.offs);         // [gemmKPad / 2]
  auto* Os = smem + sm.os;                                     // [BM][ldo] bytes
  auto* Bs = reinterpret_cast<float*>(smem + sm.bias);         // [BN]
  auto* Bq = reinterpret_cast<float*>(smem + sm.biasQ);        // [BN]
  auto* pairs = reinterpret_cast<uint32_t*>(smem + sm.pairs);  // [patchH * patchW * C]
  auto* raw = smem + sm.raw;
  const unsigned char* pairBytes = smem + sm.pairs;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int n0 = blockIdx.y * BN;
  const int patchW = (kTileW - 1) * p.strideW + (p.S - 1) * p.dilW + 1;
  const int patchH = (TILE_H - 1) * p.strideH + (p.R - 1) * p.dilH + 1;

  // The block's weights, bias and tap offsets by cp.async: every copy in flight at once (a
  // loop of loads and stores into shared memory waits for each load in turn, which at batch 1,
  // where a block has one tile, is on the kernel's critical path), landing while the first
  // patch loads.
  // (Row and piece stepped along, not divided out per copy.)
  const int chunks = p.gemmKPad / 8;  // 16-byte pieces of a weight row
  {
    const int dr = kThreads / chunks, dc = kThreads - dr * chunks;
    int r = tid / chunks, c = tid - r * chunks;
    for (int i = tid; i < BN * chunks; i += kThreads) {
      dev::cpAsync<16>(Ws + r * ldw + c * 8, w + static_cast<int64_t>(n0 + r) * p.gemmKPad + c * 8,
                       true);
      r += dr, c += dc;
      if (c >= chunks) c -= chunks, ++r;
    }
  }
  for (int k = tid; k < BN; k += kThreads) dev::cpAsync<4>(Bs + k, bias + n0 + k, true);
  for (int k = tid; k < p.gemmKPad / 2; k += kThreads)
    dev::cpAsync<4>(offs + k, pairOffsets + k, true);
  // Launched with launchAsDependent(): the weights above are the tactic's own constants; the
  // input comes from the kernel before, and the output may be memory it still reads.
  dev::dependentKernelStart();
  // The input rows' L2 policy: evict-first where this launch reads them last (made here, where
  // every thread runs: see int8_conv_pointwise.cu).
  const uint64_t readPolicy = dev::l2ReadPolicy(p.lastX);
  // The tile's origin: image n, first output row p0 and column q0.
  const auto origin = [&](int tile, int* n, int* p0, int* q0) {
    const int rest = divide(tilesQ, tile), img = divide(tilesP, rest);
    *n = img, *p0 = (rest - img * tilesP.d) * TILE_H, *q0 = (tile - rest * tilesQ.d) * kTileW;
  };
  if (blockIdx.x < numTiles) {
    int n, p0, q0;
    origin(blockIdx.x, &n, &p0, &q0);
    const PatchRows pr = patchRows<XF>(p, patchH, patchW, q0 * p.strideW - p.padLeft);
    copyPatchRows<XF, kThreads>(p, x, raw, pr, n, p0 * p.strideH - p.padTop, patchH, asyncRows,
                                readPolicy);
  }
  dev::cpAsyncCommit();
  // Patch offsets (bytes) of this thread's four pixels: fragment a (tile row 2 * warp + a),
  // column g (h = 0) or g + 8 (h = 1).
  int base[RPW][2];
#pragma unroll
  for (int a = 0; a < RPW; ++a)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      base[a][h] = ((RPW * warp + a) * p.strideH * patchW + (g + 8 * h) * p.strideW) * p.C * 4;
  const bool vecStore = p.K % kPiece == 0;
  const float inv = I8 ? __frcp_rn(p.yScale) : 0.f;
  const int act = p.act == DeviceActivation::kNone ? 0 : p.act == DeviceActivation::kRelu ? 1 : 2;
  // The lean int8 epilogue's scale (ReLU: also divided by 127) and scaled bias.
  const bool lean = I8 && act < 2;
  const float sc = act == 1 ? __fdiv_rn(inv, 127.f) : inv;
  bool first = true;

  for (int tile = blockIdx.x; tile < numTiles; tile += gridDim.x) {
    int n, p0, q0;
    origin(tile, &n, &p0, &q0);
    dev::cpAsyncWait<0>();  // this thread's copies of the tile's rows (and of the weights)
    __syncthreads();        // everyone's; the previous tile is out of the patch and the stage
    if (first) {  // the tap offsets in bytes (one add an A load); the lean epilogue's bias
      for (int k = tid; k < p.gemmKPad / 2; k += kThreads) offs[k] *= 4;
      if (lean)
        for (int k = tid; k < BN; k += kThreads) Bq[k] = __fmul_rn(Bs[k], sc);
    }
    first = false;
    convertPatch<XF, kThreads>(p, raw, patchRows<XF>(p, patchH, patchW, q0 * p.strideW - p.padLeft),
                               pairs, patchH, patchW);
    __syncthreads();  // the patch is complete, the raw rows free
    {
      const int next = tile + gridDim.x;
      if (next < numTiles) {
        int nn, np0, nq0;
        origin(next, &nn, &np0, &nq0);
        const PatchRows pr = patchRows<XF>(p, patchH, patchW, nq0 * p.strideW - p.padLeft);
        copyPatchRows<XF, kThreads>(p, x, raw, pr, nn, np0 * p.strideH - p.padTop, patchH,
                                    asyncRows, readPolicy);
      }
      dev::cpAsyncCommit();
    }

    // The first K step starts the sums from zero in the MMA itself (mmaF16From0): zeroing the
    // 64 accumulators first took 32 instructions a tile.
    float acc[RPW][NT][4];
    const int mi = lane >> 3;  // which 8x8 matrix this lane addresses in ldmatrix
    const auto kStep = [&](int ks, auto first) {
      const int o0 = offs[ks / 2 + t], o1 = offs[ks / 2 + 4 + t];  // K 2t and 8 + 2t
      uint32_t af[RPW][4];
#pragma unroll
      for (int a = 0; a < RPW; ++a) {
        af[a][0] = *reinterpret_cast<const uint32_t*>(pairBytes + base[a][0] + o0);
        af[a][1] = *reinterpret_cast<const uint32_t*>(pairBytes + base[a][1] + o0);
        af[a][2] = *reinterpret_cast<const uint32_t*>(pairBytes + base[a][0] + o1);
        af[a][3] = *reinterpret_cast<const uint32_t*>(pairBytes + base[a][1] + o1);
      }
#pragma unroll
      for (int b = 0; b < NT; b += 2) {
        uint32_t r[4];
        ldmatrixX4(r, Ws + ((b + (mi >> 1)) * 8 + (lane & 7)) * ldw + ks + (mi & 1) * 8);
#pragma unroll
        for (int a = 0; a < RPW; ++a) {
          if constexpr (decltype(first)::value) {
            mmaF16From0(acc[a][b], af[a], r[0], r[1]);
            mmaF16From0(acc[a][b + 1], af[a], r[2], r[3]);
          } else {
            mmaF16(acc[a][b], af[a], r[0], r[1]);
            mmaF16(acc[a][b + 1], af[a], r[2], r[3]);
          }
        }
      }
    };
    kStep(0, std::true_type{});  // (gemmKPad >= 16)
    for (int ks = 16; ks < p.gemmKPad; ks += 16) kStep(ks, std::false_type{});

    // Epilogue: act((acc + B) + Z) into the output stage, then whole 16-byte pieces of output
    // rows to memory.
    if (lean) {
      if (act == 1)
        epilogueTileInt8Lean<true, RPW, BN>(acc, Bq, sc, Os);
      else
        epilogueTileInt8Lean<false, RPW, BN>(acc, Bq, sc, Os);
    } else if (!I8 && p.hasZ) {
      epilogueFor<true, RPW, BN, I8>(act, p, acc, Bs, z, Os, inv, n, p0, q0, n0);
    } else {
      epilogueFor<false, RPW, BN, I8>(act, p, acc, Bs, z, Os, inv, n, p0, q0, n0);
    }
    __syncthreads();
    // The tile's outputs, 16-byte pieces from the stage: thread tid stores piece kq of pixels
    // m0t, m0t + kPixStep, ... (compile-time steps), addressed from the tile's first pixel. (A
    // piece index divided into pixel, row and column per piece took about 43 instructions a
    // piece, 9 % of ResNet-50's stem at batch 64, Nsight Compute. Not unrolled: unrolled, the
    // passes' addresses spilled 20 bytes of the int8 instance's 128 registers.)
    using Out = std::conditional_t<I8, int8_t, __half>;
    constexpr int kPP = BN / kPiece;          // pieces of a pixel
    constexpr int kPixStep = kThreads / kPP;  // pixels a pass
    static_assert(kThreads % kPP == 0 && (BM * kPP) % kThreads == 0, "whole passes");
    const int kq = tid % kPP, m0t = tid / kPP;
    const int k = n0 + kq * kPiece;
    Out* yTile = static_cast<Out*>(y) + ((static_cast<int64_t>(n) * p.P + p0) * p.Q + q0) * p.K + k;
#pragma unroll 1
    for (int pass = 0; pass < BM * kPP / kThreads; ++pass) {
      const int m = m0t + pass * kPixStep, r = m / kTileW, col = m % kTileW;
      if (p0 + r >= p.P || q0 + col >= p.Q || k >= p.K) continue;
      Out* dst = yTile + (static_cast<int64_t>(r) * p.Q + col) * p.K;
      const Out* src = reinterpret_cast<const Out*>(Os + m * ldo) + kq * kPiece;
      if (vecStore) {
        *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src);
      } else {
        for (int j = 0; j < kPiece && k + j < p.K; ++j) dst[j] = src[j];
      }
    }
  }
#else
  __trap();  // the provider offers these tactics on sm_80 and newer only
#endif
}

using StemKernel = void (*)(StemConvPlan, const void*, const __half*, const int*, const float*,
                            const __half*, void*, FastDiv, FastDiv, int, bool);

template <int WARPS, int RPW, int BN, bool I8>
StemKernel kernelFor(StemInput in) {
  switch (in) {
    case StemInput::kHalfNchw:
      return stemConvKernel<WARPS, RPW, BN, StemInput::kHalfNchw, I8>;
    case StemInput::kFloatNchw:
      return stemConvKernel<WARPS, RPW, BN, StemInput::kFloatNchw, I8>;
    default:
      return stemConvKernel<WARPS, RPW, BN, StemInput::kHalfNhwc, I8>;
  }
}

template <int WARPS, int RPW, bool I8>
StemKernel kernelForTile(const StemConvPlan& p) {
  return p.blockN == 32 ? kernelFor<WARPS, RPW, 32, I8>(p.input)
                        : kernelFor<WARPS, RPW, 64, I8>(p.input);
}

template <bool I8>
StemKernel kernelFor(const StemConvPlan& p) {
  if (p.warps == 8) return kernelForTile<8, 1, I8>(p);
  return p.warps == 2 ? kernelForTile<2, 2, I8>(p) : kernelForTile<4, 2, I8>(p);
}

StemKernel kernelFor(const StemConvPlan& p) {
  return p.int8Out ? kernelFor<true>(p) : kernelFor<false>(p);
}

bool validPlan(const StemConvPlan& p) {
  return ((p.warps == 8 && p.rowsPerWarp == 1) ||
          ((p.warps == 2 || p.warps == 4) && p.rowsPerWarp == 2)) &&
         (p.blockN == 32 || p.blockN == 64) && p.C > 0 && p.R > 0 && p.S > 0 &&
         p.gemmK == stemGemmK(p) && p.gemmKPad % 16 == 0 && p.gemmKPad >= p.gemmK &&
         p.gemmKPad <= kStemMaxGemmK && stemPatchBytes(p) <= kStemMaxPatchBytes &&
         (!p.int8Out ||
          (!p.hasZ && p.yScale > 0.f && std::isfinite(p.yScale) && std::isfinite(1.f / p.yScale)));
}

int64_t patchWidth(const StemConvPlan& p) {
  return int64_t{kTileW - 1} * p.strideW + int64_t{p.S - 1} * p.dilW + 1;
}

}  // namespace

int32_t stemUnitLength(const StemConvPlan& p) {
  return p.dilW == 1 ? p.S * p.C : p.C;
}

int32_t stemGemmK(const StemConvPlan& p) {
  const int32_t len = stemUnitLength(p);
  return p.R * (p.dilW == 1 ? 1 : p.S) * (len + len % 2);
}

bool stemTap(const StemConvPlan& p, int32_t k, int32_t* r, int32_t* s, int32_t* c) {
  const int32_t len = stemUnitLength(p), padded = len + len % 2;
  if (k < 0 || k >= stemGemmK(p) || k % padded >= len) return false;
  const int32_t unit = k / padded, j = k % padded;
  if (p.dilW == 1) {
    *r = unit, *s = j / p.C, *c = j % p.C;
  } else {
    *r = unit / p.S, *s = unit % p.S, *c = j;
  }
  return true;
}

std::vector<int32_t> stemPairOffsets(const StemConvPlan& p) {
  std::vector<int32_t> offsets(static_cast<size_t>(std::max(p.gemmKPad, 0) / 2), 0);
  const int64_t patchW = patchWidth(p);
  for (size_t j = 0; j < offsets.size(); ++j) {
    int32_t r = 0, s = 0, c = 0;
    if (stemTap(p, static_cast<int32_t>(2 * j), &r, &s, &c))
      offsets[j] = static_cast<int32_t>((r * p.dilH * patchW + int64_t{s} * p.dilW) * p.C + c);
  }
  return offsets;
}

int64_t stemPatchBytes(const StemConvPlan& p) {
  const int64_t patchH = int64_t{stemTileRows(p) - 1} * p.strideH + int64_t{p.R - 1} * p.dilH + 1;
  return patchH * patchWidth(p) * p.C * 4;  // a word (two halves) per value
}

int64_t stemSharedBytes(const StemConvPlan& p) {
  return stemSmem(p).total;  // after validPlan(): the patch (at most 32 KiB) bounds every part
}

Expected<int> prepareStemConv(const StemConvPlan& p) {
  if (!validPlan(p)) return Status(ErrorCode::kInvalidArgument, "stem conv: invalid plan");
  const StemKernel fn = kernelFor(p);
  const int smemBytes = static_cast<int>(stemSharedBytes(p));
  int dev = 0, sms = 0, optin = 0;
  EI_CUDA_CHECK(cudaGetDevice(&dev));
  EI_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  EI_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (smemBytes > optin)
    return Status(ErrorCode::kUnsupported, "stem conv: " + std::to_string(smemBytes) +
                                               " bytes of shared memory per block, the device "
                                               "allows " +
                                               std::to_string(optin));
  {
    // The limit is the kernel's, process-wide, shared by every layer that uses this kernel
    // version: it is only ever raised, or a smaller layer initialised later would make the
    // launches of a larger one fail.
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    cudaFuncAttributes attr{};
    EI_CUDA_CHECK(cudaFuncGetAttributes(&attr, fn));
    if (attr.maxDynamicSharedSizeBytes < smemBytes)
      EI_CUDA_CHECK(
          cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, smemBytes));
  }
  int perSm = 0;
  EI_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&perSm, fn, p.warps * 32, smemBytes));
  if (perSm <= 0)
    return Status(ErrorCode::kUnsupported, "stem conv: no block of this plan fits on the device");
  return perSm * sms;
}

Status launchStemConv(const StemConvPlan& p, const StemConvArgs& a, int maxBlocks, void* stream) {
  if (!validPlan(p)) return Status(ErrorCode::kInvalidArgument, "stem conv: invalid plan");
  if (!a.x || !a.w || !a.offsets || !a.bias || !a.y || (p.hasZ && !a.z))
    return Status(ErrorCode::kInvalidArgument, "stem conv: missing pointer");
  if (reinterpret_cast<uintptr_t>(a.w) % 16 != 0 || reinterpret_cast<uintptr_t>(a.y) % 16 != 0)
    return Status(ErrorCode::kInvalidArgument,
                  "stem conv: the weights and the output must be 16-byte aligned");
  if (p.N <= 0 || p.P <= 0 || p.Q <= 0 || p.K <= 0) return Status::Ok();
  const int tilesQ = (p.Q + kTileW - 1) / kTileW;
  const int tilesP = (p.P + stemTileRows(p) - 1) / stemTileRows(p);
  const int64_t numTiles = int64_t{tilesQ} * tilesP * p.N;
  const int channelBlocks = (p.K + p.blockN - 1) / p.blockN;
  if (numTiles > 0x7fffffff || channelBlocks > 65535)
    return Status(ErrorCode::kUnsupported, "stem conv: too large for one launch");
  const int64_t perChannelBlock = std::max<int64_t>(1, maxBlocks / channelBlocks);
  const dim3 grid(static_cast<unsigned>(std::min<int64_t>(numTiles, perChannelBlock)),
                  static_cast<unsigned>(channelBlocks));
  // Input rows copied a 16-byte piece at a time by cp.async where every row starts on a 16-byte
  // boundary, else value by value.
  const int64_t rowBytes =
      int64_t{p.input == StemInput::kHalfNhwc ? p.W * p.C : p.W} * valueBytes(p.input);
  const bool asyncRows = reinterpret_cast<uintptr_t>(a.x) % 16 == 0 && rowBytes % 16 == 0;
  EI_CUDA_CHECK(launchAsDependent(
      kernelFor(p), grid, dim3(p.warps * 32), static_cast<size_t>(stemSharedBytes(p)),
      static_cast<cudaStream_t>(stream), p, a.x, static_cast<const __half*>(a.w), a.offsets, a.bias,
      static_cast<const __half*>(a.z), a.y, fastDivisor(tilesQ), fastDivisor(tilesP),
      static_cast<int>(numTiles), asyncRows));
  return Status::Ok();
}

}  // namespace edgeinfer::cuda
