// 3x3 INT8 convolutions (stride 1, padding 1) of few input channels through persistent blocks
// that load each input pixel once a tile: the `cuda-i8.halo128x64` kernel (int8_conv.h), sm_80
// and newer (mma.sync: Orin, Hopper, Thor).
//
// The implicit-GEMM kernels (mma, wgmma, TMA) fetch a tile's input once per window position: nine
// times for a 3x3 layer, each a gather of 128 pixels' C bytes. With C = 64 (ResNet's layer1 at
// 56x56) the TMA kernel's consumers wait on those im2col loads (Nsight Compute: 30 % of their
// stall samples; 0.040 ms a layer at batch 64 on an H200, a fifth of the tensor cores' rate).
// These kernels instead:
//   - take whole output rows as a tile: RT = max(1, 128 / Q) rows of one image, RT * Q <= 128
//     output pixels (m16 row groups past them compute nothing that is stored);
//   - copy the tile's halo, RT + 2 input rows of Q + 2 pixels (zeros outside the image), into
//     shared memory once (cp.async, 2 to 8 stages: the next tiles' halos load while the current
//     one is multiplied), about 2x the tile's own input where im2col reads 9x;
//   - keep the block's 64 output channels' weights for all nine window positions (9 x 64 x C
//     bytes) and their alpha and bias in shared memory for the whole launch;
//   - for each window position (dy, dx), read the A fragments with ldmatrix at the halo pixel
//     (r + dy, q + dx) of each output pixel (r, q): one address a lane, computed once a launch,
//     plus the position's offset;
//   - run the epilogue from the accumulator registers as the pointwise kernels do (their
//     permuted weight rows: each thread holds 8 consecutive channels of a pixel), the lean path
//     (i8Lean8) for every 8 sums within 2^22 (i8SmallSums8), the general one otherwise.
// Results equal the other kernels' in the plan's rounding (the lean path: the fast rounding's).
//
// Offered (int8ConvHaloFits) for 3x3 convolutions of stride 1, dilation 1 and padding 1 on every
// side (P = H, Q = W), C % 32 == 0, C <= 128, K % 32 == 0, Q <= 128.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "kernels/cuda/int8_conv_halo.cuh"

namespace edgeinfer::cuda {
namespace {

constexpr int kHaloThreads = 256;  // 8 warps: 4 along the pixels (32 each), 2 along channels
constexpr int kHaloBN = 64;
constexpr int kHaloMaxC = 128, kHaloMaxQ = 128;

/// The dynamic shared memory of a launch: the weights (9 positions x 64 rows of C bytes, 16
/// bytes of padding a row so the 8 rows an ldmatrix phase reads fall on different banks), alpha
/// and bias (64 floats each), then the stages, each a halo of (RT + 2) x (Q + 2) pixels of the
/// same pitch.
struct HaloLayout {
  int pitch = 0, cols = 0, wBytes = 0, abBytes = 0, stageBytes = 0, total = 0;
};

__host__ __device__ inline HaloLayout haloLayout(int C, int Q, int stages) {
  HaloLayout l;
  l.pitch = C + 16;
  l.cols = Q + 2;
  l.wBytes = 9 * kHaloBN * l.pitch;
  l.abBytes = 2 * kHaloBN * static_cast<int>(sizeof(float));
  l.stageBytes = (halo::tileRows(Q) + 2) * l.cols * l.pitch;
  l.total = l.wBytes + l.abBytes + stages * l.stageBytes;
  return l;
}

__global__ void __launch_bounds__(kHaloThreads, 2)
    i8ConvHalo(const Int8ConvPlan p, const int8_t* __restrict__ x, const int8_t* __restrict__ w,
               const float* __restrict__ alpha, const float* __restrict__ bias,
               const void* __restrict__ z, void* __restrict__ y, int stages) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  constexpr int kWarpsM = 4, kWN = 32, kNT = kWN / 8;
  extern __shared__ __align__(128) int8_t smem[];
  dev::allowDependentGrids();
  const HaloLayout L = haloLayout(p.C, p.Q, stages);
  int8_t* Ws = smem;
  float* alphaS = reinterpret_cast<float*>(smem + L.wBytes);
  float* biasS = alphaS + kHaloBN;
  int8_t* stageMem = smem + L.wBytes + L.abBytes;

  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int wm = warp % kWarpsM, wn = warp / kWarpsM;
  const int g = lane >> 2, t4 = lane & 3;
  const int rt = halo::tileRows(p.Q), tileRows = (p.P + rt - 1) / rt;
  const int slices = (p.K + kHaloBN - 1) / kHaloBN;
  const int n0 = static_cast<int>(blockIdx.x) % slices * kHaloBN;
  const int mTiles = halo::tiles(p);
  const int tileStride = static_cast<int>(gridDim.x) / slices;
  const int chunks = p.C / 16;  // 16-byte pieces of a pixel: 2 to 8
  const int chunkDiv = (65536 + chunks - 1) / chunks;

  // The weights (constants: read before waiting for the kernel before): position t's rows at
  // Ws + t * 64 * pitch, permuted within each group of 32 channels as the pointwise kernels'
  // (row 8b + c of a group holds channel 8 (c / 2) + 2b + c % 2).
  for (int i = tid; i < 9 * kHaloBN * chunks; i += kHaloThreads) {
    const int rowAll = i / chunks, ch = i - rowAll * chunks;
    const int t = rowAll / kHaloBN, r = rowAll - t * kHaloBN;
    const int k = n0 + dev::permutedWeightChannel(r);
    const bool valid = k < p.K;
    dev::cpAsync<16>(Ws + rowAll * L.pitch + ch * 16,
                     valid ? w + static_cast<int64_t>(k) * p.gemmKPad + t * p.C + ch * 16 : w,
                     valid);
  }
  for (int i = tid; i < kHaloBN; i += kHaloThreads) {
    const bool valid = n0 + i < p.K;
    alphaS[i] = valid ? alpha[n0 + i] : 0.f;
    biasS[i] = valid ? bias[n0 + i] : 0.f;
  }
  dev::cpAsyncCommit();
  dev::waitForPriorGrids();  // the input, the residual and the output from here on

  const uint64_t policy = dev::l2ReadPolicy(p.lastX);  // (where every thread runs)
  const auto loadTile = [&](int tile, int8_t* stage) {
    halo::loadTile<kHaloThreads, true>(p, x, tile, stage, L.pitch, chunkDiv, tid, policy);
  };

  // Each lane's A rows (ldmatrix: row lane % 16 of its m16 group, K half lane / 16): the halo
  // pixel of output pixel (r, q) at window position (0, 0); rows past the tile read pixel 0.
  int aOff[2];
#pragma unroll
  for (int a = 0; a < 2; ++a) {
    const int m = wm * 32 + a * 16 + (lane & 15);
    aOff[a] = halo::pixelOffset(p, m, L.pitch) + (lane >> 4) * 16;
  }
  // Each thread's epilogue rows: 4 pixels (a, h), their row within the tile.
  const float inv = __frcp_rn(p.yScale);  // for the bit-exact quantize (int8 outputs)
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
    const int ahead = mt + (stages - 1) * tileStride;  // into the stage the last tile used
    if (ahead < mTiles) loadTile(ahead, stageMem + (st == 0 ? stages - 1 : st - 1) * L.stageBytes);
    dev::cpAsyncCommit();
    dev::cpAsyncWaitFor(stages - 1);  // the weights and this tile's halo have landed (mine)
    __syncthreads();                  // (everyone's)

    int32_t acc[2][kNT][4];
#pragma unroll
    for (int a = 0; a < 2; ++a)
#pragma unroll
      for (int b = 0; b < kNT; ++b)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[a][b][e] = 0;
#pragma unroll
    for (int t = 0; t < 9; ++t) {
      const int8_t* at = cur + ((t / 3) * L.cols + t % 3) * L.pitch;
      const int8_t* wt = Ws + t * kHaloBN * L.pitch;
#pragma unroll 2
      for (int k0 = 0; k0 < p.C; k0 += 32) {
        uint32_t af[2][4], bf[kNT][2];
#pragma unroll
        for (int a = 0; a < 2; ++a) dev::ldmatrixX4(af[a], at + aOff[a] + k0);
#pragma unroll
        for (int b = 0; b < kNT; b += 2)

          dev::ldmatrixB2(bf[b], bf[b + 1], wt + (wn * kWN + b * 8) * L.pitch, L.pitch, k0, lane);
#pragma unroll
        for (int a = 0; a < 2; ++a)
#pragma unroll
          for (int b = 0; b < kNT; ++b) dev::mmaS8(acc[a][b], af[a], bf[b]);
      }
    }

    // Epilogue: each thread's 8 consecutive channels (its group of 32: kWN == 32) for its 4
    // pixels, one piece each.
    const int n = mt / tileRows, r0 = (mt - n * tileRows) * rt;
    const int valid = min(rt, p.P - r0) * p.Q;  // output pixels of this tile
    const int64_t m0 = (static_cast<int64_t>(n) * p.P + r0) * p.Q;
    const int c0 = wn * kWN + 8 * t4;  // within the block's channels
    if (n0 + c0 < p.K) {
      alignas(16) float av[8];
      alignas(16) float bv[8];
      dev::load8(alphaS + c0, av);
      dev::load8(biasS + c0, bv);
#pragma unroll
      for (int a = 0; a < 2; ++a)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = wm * 32 + a * 16 + g + 8 * h;
          if (r >= valid) continue;
          int32_t q[8];
          dev::pixelSums8(acc[a], 0, h, q);
          const int64_t base = (m0 + r) * p.K + n0 + c0;
          dev::i8Output8(p, q, av, bv, lean, floor, zb,
                         static_cast<const int8_t*>(z) + (zb == 0 ? 0 : base * zb), inv, y, base);
        }
    }
    __syncthreads();  // the next iteration's copies overwrite the stage before this one
  }
  dev::cpAsyncWait<0>();  // no copy outlives the block (an empty last group)
#else
  __trap();  // the provider offers these tactics on sm_80 and newer only
#endif
}

}  // namespace

int int8ConvHaloSharedBytes(const Int8ConvPlan& p) {
  return haloLayout(p.C, p.Q, 2).total;
}

bool int8ConvHaloFits(const Int8ConvPlan& p) {
  return p.R == 3 && p.S == 3 && p.strideH == 1 && p.strideW == 1 && p.dilH == 1 && p.dilW == 1 &&
         p.padTop == 1 && p.padLeft == 1 && p.P == p.H && p.Q == p.W && p.C % 32 == 0 && p.C > 0 &&
         p.C <= kHaloMaxC && p.K % 32 == 0 && p.Q <= kHaloMaxQ && p.gemmKPad >= 9 * p.C;
}

Status launchInt8ConvHalo(const Int8ConvPlan& p, const Int8ConvArgs& a, void* stream) {
  EI_RETURN_IF_ERROR(
      halo::checkLaunch(p, a, int8ConvHaloFits(p), "int8 halo conv",
                        "a 3x3 convolution of stride 1 and padding 1 with C % 32 == 0 (at most " +
                            std::to_string(kHaloMaxC) + "), K % 32 == 0 and at most " +
                            std::to_string(kHaloMaxQ) + " output columns"));
  const int n = halo::stages([&](int s) { return haloLayout(p.C, p.Q, s).total; });
  return halo::launch<kHaloThreads>(&i8ConvHalo, p, a, haloLayout(p.C, p.Q, n).total, n, stream,
                                    "int8 halo conv");
}

}  // namespace edgeinfer::cuda
