// Hopper (sm_90a) form of the halo 3x3 kernel (int8_conv_halo.cu): `cuda-i8.halowg128x64`.
// The same persistent blocks, whole-row tiles and halos copied once a tile, with the warpgroup
// MMA in place of mma.sync:
//   - two warpgroups, 64 output pixels each, wgmma.mma_async m64n64k32 s8 with A from
//     registers (the ldmatrix fragments of the halo at each window position's offset: a wgmma
//     cannot read A from shared memory at an arbitrary pixel offset, its swizzled layout being
//     a function of the address) and B (the block's 64 channels' weights for the nine
//     positions, copied once a launch) from shared memory in wgmma's 64-byte swizzle;
//   - two window positions in flight: a position's A registers are kept alive (fenced) until
//     the wait that retires its wgmmas;
//   - the weight rows permuted so that each thread's accumulators of a row are 16 consecutive
//     channels (column 8j + 2t + e holds channel 16t + 2j + e), and the epilogue runs from the
//     registers, 8 channels a piece;
//   - an instance per epilogue: the lean ones (int8 output in the fast rounding, no residual,
//     Relu or none: ResNet's 3x3 layers) start the sums at kRoundMagicBits and take
//     dev::lean8 (4 operations an output, Relu as a saturated multiply-add) wherever a piece's
//     8 sums are within 2^22 (one operation a sum to check), the general path otherwise; the
//     general instance takes any epilogue (i8Output8). The lean epilogue had taken about 112
//     instructions a piece with the plan's options read and branched on at run time (Nsight
//     Compute, ResNet-50's layer1 3x3 at batch 64, H200).
// Offered (int8ConvHaloFits, C % 64 == 0) on compute 9.0 devices of builds with sm_90a code.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/int8_conv_halo.cuh"
#include "kernels/cuda/wgmma_sm90a.cuh"

namespace edgeinfer::cuda {
namespace {

using namespace sm90;  // NOLINT(build/namespaces): the wgmma building blocks

constexpr int kWgThreads = 256;  // two consumer warpgroups of 64 output pixels
constexpr int kWgBN = 64;

/// Shared memory: the weights (9 positions x C / 64 K chunks x 64 rows x 64 bytes, swizzled,
/// 1024-byte aligned), alpha and bias, the halo stages (pitch C + 16 a pixel).
struct WgLayout {
  int pitch = 0, cols = 0, wBytes = 0, abBytes = 0, stageBytes = 0, total = 0;
};

__host__ __device__ inline WgLayout wgLayout(int C, int Q, int stages) {
  WgLayout l;
  l.pitch = C + 16;
  l.cols = Q + 2;
  l.wBytes = 9 * (C / 64) * kWgBN * 64;
  l.abBytes = 2 * kWgBN * static_cast<int>(sizeof(float));
  l.stageBytes = (halo::tileRows(Q) + 2) * l.cols * l.pitch;
  l.total = 1024 + l.wBytes + l.abBytes + stages * l.stageBytes;
  return l;
}

#ifdef EDGEINFER_WGMMA
/// Keeps `a` alive (in its registers, unchanged) up to this point: after the wait that retires
/// the wgmmas reading it.
__device__ __forceinline__ void keepFragment(uint32_t (&a)[4]) {
  asm volatile("" : "+r"(a[0]), "+r"(a[1]), "+r"(a[2]), "+r"(a[3])::"memory");
}
#endif

/// The epilogue instances: any plan (kHaloGeneral), and the lean ones (int8 output in the fast
/// rounding, no residual) without activation or with Relu.
constexpr int kHaloGeneral = 0, kHaloLean = 1, kHaloLeanRelu = 2;

/// KCHUNKS: 64-byte K chunks a window position (C / 64: 1 or 2), so that the fragment buffers of
/// consecutive steps alternate at compile time. EPI: kHaloGeneral, kHaloLean or kHaloLeanRelu.
template <int KCHUNKS, int EPI>
__global__ void __launch_bounds__(kWgThreads, 2)
    i8ConvHaloWg(const Int8ConvPlan p, const int8_t* __restrict__ x, const int8_t* __restrict__ w,
                 const float* __restrict__ alpha, const float* __restrict__ bias,
                 const void* __restrict__ z, void* __restrict__ y, int stages) {
#ifdef EDGEINFER_WGMMA
  extern __shared__ __align__(128) int8_t smemRaw[];
  int8_t* smem = smemRaw + ((1024 - (smemAddr(smemRaw) & 1023)) & 1023);
  dev::allowDependentGrids();
  const WgLayout L = wgLayout(p.C, p.Q, stages);
  int8_t* Ws = smem;
  float* alphaS = reinterpret_cast<float*>(smem + L.wBytes);
  float* biasS = alphaS + kWgBN;
  int8_t* stageMem = smem + L.wBytes + L.abBytes;

  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wg = tid >> 7, wq = warp & 3;  // warpgroup; warp within it (16 rows each)
  const int g = lane >> 2, t4 = lane & 3;
  const int rt = halo::tileRows(p.Q), tileRows = (p.P + rt - 1) / rt;
  const int slices = (p.K + kWgBN - 1) / kWgBN;
  const int n0 = static_cast<int>(blockIdx.x) % slices * kWgBN;
  const int mTiles = halo::tiles(p);
  const int tileStride = static_cast<int>(gridDim.x) / slices;
  const int chunks = p.C / 16;
  constexpr int kChunks = KCHUNKS;
  const int chunkDiv = (65536 + chunks - 1) / chunks;

  // The weights, once: K chunk (position t, 64 bytes j) of row n at Ws + (t * kChunks + j) *
  // 4096 + Swizzled<64>::offset(n, c); row n = 8j' + 2t' + e holds channel 16t' + 2j' + e.
  for (int i = tid; i < 9 * kChunks * kWgBN * 4; i += kWgThreads) {
    const int c = i & 3, n = (i >> 2) & 63, tj = i >> 8;
    const int k = n0 + 16 * ((n >> 1) & 3) + 2 * (n >> 3) + (n & 1);
    const bool valid = k < p.K;
    const int t = tj / kChunks, j = tj - t * kChunks;
    cpAsync16(Ws + tj * 4096 + Swizzled<64>::offset(n, c),
              valid ? w + static_cast<int64_t>(k) * p.gemmKPad + t * p.C + j * 64 + c * 16 : w,
              valid);
  }
  for (int i = tid; i < kWgBN; i += kWgThreads) {  // divided by 127 for lean8's Relu
    const bool valid = n0 + i < p.K;
    alphaS[i] = !valid                 ? 0.f
                : EPI == kHaloLeanRelu ? __fdiv_rn(alpha[n0 + i], 127.f)
                                       : alpha[n0 + i];
    biasS[i] = !valid ? 0.f : EPI == kHaloLeanRelu ? __fdiv_rn(bias[n0 + i], 127.f) : bias[n0 + i];
  }
  dev::cpAsyncCommit();
  dev::waitForPriorGrids();

  const auto loadTile = [&](int tile, int8_t* stage) {  // (no L2 policy: int8_conv_halo.cuh)
    halo::loadTile<kWgThreads, false>(p, x, tile, stage, L.pitch, chunkDiv, tid, 0);
  };

  // This lane's A row (ldmatrix: row lane % 16 of its warp's 16, K half lane / 16).
  int aOff;
  {
    const int m = wg * 64 + wq * 16 + (lane & 15);
    aOff = halo::pixelOffset(p, m, L.pitch) + (lane >> 4) * 16;
  }
  const float inv = __frcp_rn(p.yScale);
  const bool lean = dev::i8LeanEpilogue(p, true);
  const float floor = p.act == DeviceActivation::kRelu ? 0.f : -128.f;
  const int zb = !p.hasZ ? 0 : p.zScale > 0.f ? 1 : 2;

  int mt = static_cast<int>(blockIdx.x) / slices;
  for (int s = 0; s < stages - 1; ++s) {
    if (mt + s * tileStride < mTiles) loadTile(mt + s * tileStride, stageMem + s * L.stageBytes);
    dev::cpAsyncCommit();
  }
  for (int st = 0; mt < mTiles; mt += tileStride, st = st + 1 == stages ? 0 : st + 1) {
    const int8_t* cur = stageMem + st * L.stageBytes;
    const int ahead = mt + (stages - 1) * tileStride;
    if (ahead < mTiles) loadTile(ahead, stageMem + (st == 0 ? stages - 1 : st - 1) * L.stageBytes);
    dev::cpAsyncCommit();
    dev::cpAsyncWaitFor(stages - 1);
    __syncthreads();

    // The lean instances start the sums at kRoundMagicBits (dev::lean8), the general one at 0.
    int32_t acc[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) acc[i] = EPI == kHaloGeneral ? 0 : dev::kRoundMagicBits;
    fenceOperands(acc);
    // Window position by position, its K in 64-byte chunks of two wgmmas (k32 each): the
    // fragments of consecutive chunks in two buffers, the one read by the wgmmas in flight kept
    // until the wait that retires them.
    uint32_t af[2][2][4] = {};  // [chunk parity][k32 half][fragment]
#pragma unroll
    for (int t = 0; t < 9; ++t) {
      const int8_t* at = cur + ((t / 3) * L.cols + t % 3) * L.pitch + aOff;
      const int8_t* bt = Ws + t * kChunks * 4096;
#pragma unroll
      for (int j = 0; j < kChunks; ++j) {
        const int buf = (t * kChunks + j) & 1;
        dev::ldmatrixX4(af[buf][0], at + j * 64);
        dev::ldmatrixX4(af[buf][1], at + j * 64 + 32);
        asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
        wgmmaN64Rs(acc, af[buf][0], Swizzled<64>::desc(bt + j * 4096));
        wgmmaN64Rs(acc, af[buf][1], Swizzled<64>::desc(bt + j * 4096 + 32));
        asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
        asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(1) : "memory");
        keepFragment(af[buf ^ 1][0]);  // the previous chunk's wgmmas are retired: free from here
        keepFragment(af[buf ^ 1][1]);
      }
    }
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(0) : "memory");
    fenceOperands(acc);
    keepFragment(af[0][0]);
    keepFragment(af[0][1]);
    keepFragment(af[1][0]);
    keepFragment(af[1][1]);

    // Epilogue: row 16 wq + g + 8h of this warpgroup's 64, channels 16 t4 + 8 piece + (0..7):
    // register 4j + 2h + e is column 8j + 2 t4 + e, channel 16 t4 + 2j + e.
    const int n = mt / tileRows, r0 = (mt - n * tileRows) * rt;
    const int valid = min(rt, p.P - r0) * p.Q;
    const int64_t m0 = (static_cast<int64_t>(n) * p.P + r0) * p.Q;
    int8_t* const yTile = static_cast<int8_t*>(y) + m0 * p.K + n0;  // the lean instances'
#pragma unroll
    for (int piece = 0; piece < 2; ++piece) {
      const int c0 = 16 * t4 + 8 * piece;
      if (n0 + c0 >= p.K) continue;
      alignas(16) float av[8];
      alignas(16) float bv[8];
      dev::load8(alphaS + c0, av);
      dev::load8(biasS + c0, bv);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = wg * 64 + wq * 16 + g + 8 * h;
        if (r >= valid) continue;
        int32_t q[8];
#pragma unroll
        for (int jj = 0; jj < 4; ++jj) {
          q[2 * jj] = acc[4 * (4 * piece + jj) + 2 * h];
          q[2 * jj + 1] = acc[4 * (4 * piece + jj) + 2 * h + 1];
        }
        if constexpr (EPI != kHaloGeneral) {
          if (dev::startedSmallSums8(q)) {
            *reinterpret_cast<uint2*>(yTile + r * p.K + c0) =
                dev::lean8<EPI == kHaloLeanRelu, false>(q, av, bv, make_uint2(0u, 0u), 0.f);
            continue;
          }
          // Sums beyond 2^22 (rare: inputs and weights near their extremes): the general path
          // from the sums themselves and the unscaled alpha and bias.
#pragma unroll
          for (int e = 0; e < 8; ++e) {
            q[e] -= dev::kRoundMagicBits;
            av[e] = alpha[n0 + c0 + e];
            bv[e] = bias[n0 + c0 + e];
          }
        }
        const int64_t base = (m0 + r) * p.K + n0 + c0;
        dev::i8Output8(p, q, av, bv, EPI == kHaloGeneral && lean, floor, zb,
                       static_cast<const int8_t*>(z) + (zb == 0 ? 0 : base * zb), inv, y, base);
        if constexpr (EPI != kHaloGeneral) {  // this piece's scaled alpha and bias again
          dev::load8(alphaS + c0, av);
          dev::load8(biasS + c0, bv);
        }
      }
    }
    __syncthreads();
  }
  dev::cpAsyncWait<0>();
#else
  __trap();  // the provider offers this tactic on compute 9.0 devices only
#endif
}

}  // namespace

int int8ConvHaloWgSharedBytes(const Int8ConvPlan& p) {
  return wgLayout(p.C, p.Q, 2).total;
}

Status launchInt8ConvHaloWg(const Int8ConvPlan& p, const Int8ConvArgs& a, void* stream) {
  EI_RETURN_IF_ERROR(halo::checkLaunch(p, a, int8ConvHaloFits(p) && p.C % 64 == 0,
                                       "int8 halo wgmma conv",
                                       "a 3x3 convolution of stride 1 and padding 1 with C % 64 "
                                       "== 0 (at most 128), K % 32 == 0 and at most 128 output "
                                       "columns"));
  const int n = halo::stages([&](int s) { return wgLayout(p.C, p.Q, s).total; });
  const int smem = wgLayout(p.C, p.Q, n).total;
  const auto go = [&](auto kernel) {
    return halo::launch<kWgThreads>(kernel, p, a, smem, n, stream, "int8 halo wgmma conv");
  };
  const int epi = !dev::i8LeanEpilogue(p, true) || p.hasZ ? kHaloGeneral
                  : p.act == DeviceActivation::kRelu      ? kHaloLeanRelu
                                                          : kHaloLean;
  if (p.C == 64) {
    return epi == kHaloLeanRelu ? go(&i8ConvHaloWg<1, kHaloLeanRelu>)
           : epi == kHaloLean   ? go(&i8ConvHaloWg<1, kHaloLean>)
                                : go(&i8ConvHaloWg<1, kHaloGeneral>);
  }
  return epi == kHaloLeanRelu ? go(&i8ConvHaloWg<2, kHaloLeanRelu>)
         : epi == kHaloLean   ? go(&i8ConvHaloWg<2, kHaloLean>)
                              : go(&i8ConvHaloWg<2, kHaloGeneral>);
}

}  // namespace edgeinfer::cuda
