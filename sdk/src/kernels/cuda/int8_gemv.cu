// The cuda-i8.gemv kernels (int8_gemv.h). One-row form: a block per 8 output channels of one
// row; the row is quantized (or copied) into shared memory once, then each warp takes one output
// channel: 16 bytes of weights a lane a step (a 512-byte stretch of the row a warp a step), dp4a
// against the row, a warp reduction, and the epilogue in the output's format. Row-tile form: a
// block per 8 C output channels of up to 16 rows; the rows go to shared memory, each warp reads
// its C channels' 16-byte weight pieces once and multiplies them with every row, and the warp's
// 16 C sums are reduced by halving exchanges.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/fused_activation.cuh"
#include "kernels/cuda/int8_gemv.h"
#include "kernels/cuda/quantize.cuh"

namespace edgeinfer::cuda {
namespace {

constexpr int kWarps = 8;  // output channels a block

/// 16 int8 values of row x at element k (a multiple of 16), quantized as the quantize
/// reformat does when x is float (quantize.cuh), as they are when x is int8.
template <GemvType X>
__device__ __forceinline__ int4 quantized16(const void* x, int64_t k, float scale, float inv) {
  if constexpr (X == GemvType::kInt8) {
    return *reinterpret_cast<const int4*>(static_cast<const int8_t*>(x) + k);
  } else {
    float v[16];
    if constexpr (X == GemvType::kFloat16) {
      const auto* h = reinterpret_cast<const uint4*>(static_cast<const __half*>(x) + k);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const uint4 raw = h[c];
        const uint32_t words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          const __half2 pair = *reinterpret_cast<const __half2*>(&words[i]);
          v[8 * c + 2 * i] = __low2float(pair);
          v[8 * c + 2 * i + 1] = __high2float(pair);
        }
      }
    } else {
      const auto* f = reinterpret_cast<const float4*>(static_cast<const float*>(x) + k);
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const float4 q = f[c];
        v[4 * c] = q.x;
        v[4 * c + 1] = q.y;
        v[4 * c + 2] = q.z;
        v[4 * c + 3] = q.w;
      }
    }
    alignas(16) int8_t q[16];
    dev::quantizeToInt8(v, scale, inv, q);
    return *reinterpret_cast<const int4*>(q);
  }
}

/// The epilogue of one sum: cublaslt-i8's "i32" expressions (no FMA contraction) into y[m][n].
template <GemvType Y>
__device__ __forceinline__ void storeSum(const Int8GemvPlan& p, int32_t acc, int m, int n,
                                         const float* __restrict__ alpha,
                                         const float* __restrict__ bias, void* __restrict__ y) {
  float v = __fadd_rn(__fmul_rn(static_cast<float>(acc), alpha[n]), bias[n]);
  v = dev::activate(v, p.act, p.actAlpha, p.actBeta);
  const int64_t at = static_cast<int64_t>(m) * p.N + n;
  if constexpr (Y == GemvType::kFloat32)
    static_cast<float*>(y)[at] = v;
  else if constexpr (Y == GemvType::kFloat16)
    static_cast<__half*>(y)[at] = __float2half_rn(v);
  else
    static_cast<int8_t*>(y)[at] = dev::quantizeToInt8(v, p.yScale);
}

template <GemvType X, GemvType Y>
__global__ void __launch_bounds__(kWarps * 32)
    i8Gemv(const Int8GemvPlan p, const void* __restrict__ x, const int8_t* __restrict__ w,
           const float* __restrict__ alpha, const float* __restrict__ bias, void* __restrict__ y) {
  dev::dependentKernelStart();  // launched with launchAsDependent()
  extern __shared__ __align__(16) int8_t row[];
  const int m = static_cast<int>(blockIdx.y);
  const int64_t xRow = static_cast<int64_t>(m) * p.K;
  const float inv = X == GemvType::kInt8 ? 0.f : __frcp_rn(p.xScale);
  const int pieces = p.K / 16;
  for (int i = static_cast<int>(threadIdx.x); i < pieces; i += kWarps * 32)
    reinterpret_cast<int4*>(row)[i] = quantized16<X>(x, xRow + 16 * i, p.xScale, inv);
  __syncthreads();

  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  const int n0 = static_cast<int>(blockIdx.x) * kWarps, n = n0 + warp;
  __shared__ int32_t sums[kWarps];
  if (n < p.N) {
    const int4* wr = reinterpret_cast<const int4*>(w + static_cast<int64_t>(n) * p.K);
    const int4* xr = reinterpret_cast<const int4*>(row);
    int32_t acc = 0;
    for (int i = lane; i < pieces; i += 32) {
      const int4 a = __ldg(wr + i), b = xr[i];
      acc = __dp4a(a.x, b.x, acc);
      acc = __dp4a(a.y, b.y, acc);
      acc = __dp4a(a.z, b.z, acc);
      acc = __dp4a(a.w, b.w, acc);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, o);
    if (lane == 0) sums[warp] = acc;
  }
  __syncthreads();
  // The block's outputs are adjacent: one warp stores them together (a graph output in mapped
  // host memory takes each store instruction's pieces across the bus).
  const int t = static_cast<int>(threadIdx.x);
  if (t < kWarps && n0 + t < p.N) storeSum<Y>(p, sums[t], m, n0 + t, alpha, bias, y);
}

/// Sums a warp's V partial sums a lane across its lanes: at each exchange distance O a lane
/// keeps one half of its values (the upper where its bit O is set) and adds its partner's copy
/// of that half; once one value is left, plain butterfly steps. For V = 64 lane L ends with the
/// sums of values 2L and 2L + 1 in v[0], v[1]; for V = 16 with value L / 2 in v[0].
template <int V, int O>
__device__ __forceinline__ void halvingSum(int32_t* v, int lane) {
  if constexpr (O > 0) {
    if constexpr (V > 1) {
      constexpr int H = V / 2;
      const bool upper = (lane & O) != 0;
#pragma unroll
      for (int j = 0; j < H; ++j) {
        const int32_t send = upper ? v[j] : v[j + H];
        const int32_t keep = upper ? v[j + H] : v[j];
        v[j] = keep + __shfl_xor_sync(0xffffffffu, send, O);
      }
      halvingSum<H, O / 2>(v, lane);
    } else {
      v[0] += __shfl_xor_sync(0xffffffffu, v[0], O);
      halvingSum<1, O / 2>(v, lane);
    }
  }
}

template <GemvType X, GemvType Y, int C>
__global__ void __launch_bounds__(kWarps * 32)
    i8GemvRows(const Int8GemvPlan p, const void* __restrict__ x, const int8_t* __restrict__ w,
               const float* __restrict__ alpha, const float* __restrict__ bias,
               void* __restrict__ y) {
  static_assert(C == 1 || C == 4, "the halving sum's lane mapping is for 16 or 64 values");
  constexpr int R = kInt8GemvRowTile;
  constexpr int V = R * C;
  dev::dependentKernelStart();  // launched with launchAsDependent()
  extern __shared__ __align__(16) int8_t tile[];
  const int m0 = static_cast<int>(blockIdx.y) * p.rowTile;
  const int rows = min(p.rowTile, p.M - m0);
  const float inv = X == GemvType::kInt8 ? 0.f : __frcp_rn(p.xScale);
  const int pieces = p.K / 16;
  // The tile's rows are contiguous in x: piece i is 16 i elements past row m0.
  const int64_t first = static_cast<int64_t>(m0) * p.K;
  for (int i = static_cast<int>(threadIdx.x); i < rows * pieces; i += kWarps * 32)
    reinterpret_cast<int4*>(tile)[i] = quantized16<X>(x, first + 16 * i, p.xScale, inv);
  __syncthreads();

  const int lane = static_cast<int>(threadIdx.x) & 31, warp = static_cast<int>(threadIdx.x) >> 5;
  constexpr int B = kWarps * C;  // the block's output channels
  const int nb = static_cast<int>(blockIdx.x) * B, n0 = nb + warp * C;
  __shared__ int32_t sums[R][B];
  if (n0 < p.N) {
    const int4* wr[C];
#pragma unroll
    for (int c = 0; c < C; ++c)  // a channel past N reads the last one's weights; never stored
      wr[c] = reinterpret_cast<const int4*>(w + static_cast<int64_t>(min(n0 + c, p.N - 1)) * p.K);
    const int4* xr = reinterpret_cast<const int4*>(tile);
    int32_t v[V];
#pragma unroll
    for (int j = 0; j < V; ++j) v[j] = 0;
    for (int i = lane; i < pieces; i += 32) {
      int4 a[C];
#pragma unroll
      for (int c = 0; c < C; ++c) a[c] = __ldg(wr[c] + i);
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if (r < rows) {
          const int4 b = xr[r * pieces + i];
#pragma unroll
          for (int c = 0; c < C; ++c) {
            int32_t s = v[r * C + c];
            s = __dp4a(a[c].x, b.x, s);
            s = __dp4a(a[c].y, b.y, s);
            s = __dp4a(a[c].z, b.z, s);
            v[r * C + c] = __dp4a(a[c].w, b.w, s);
          }
        }
      }
    }
    halvingSum<V, 16>(v, lane);
    if constexpr (C == 4) {  // lane L holds sums 2L and 2L + 1: row L / 2, channels 2 (L & 1) + j
      sums[lane >> 1][warp * C + 2 * (lane & 1)] = v[0];
      sums[lane >> 1][warp * C + 2 * (lane & 1) + 1] = v[1];
    } else if ((lane & 1) == 0) {  // lanes 2r and 2r + 1 hold row r's sum
      sums[lane >> 1][warp] = v[0];
    }
  }
  __syncthreads();
  // Stored a row's B adjacent channels at a time by adjacent threads (a graph output in mapped
  // host memory takes each store instruction's pieces across the bus: scattered, 64 x 1000
  // float32 logits cost 0.1 ms on an H200).
  for (int i = static_cast<int>(threadIdx.x); i < rows * B; i += kWarps * 32) {
    const int r = i / B, j = i % B;
    if (nb + j < p.N) storeSum<Y>(p, sums[r][j], m0 + r, nb + j, alpha, bias, y);
  }
}

template <GemvType X, GemvType Y>
void* formFor(const Int8GemvPlan& p) {
  if (p.rowTile == 0) return reinterpret_cast<void*>(&i8Gemv<X, Y>);
  return p.channelsPerWarp == 4 ? reinterpret_cast<void*>(&i8GemvRows<X, Y, 4>)
                                : reinterpret_cast<void*>(&i8GemvRows<X, Y, 1>);
}

template <GemvType X>
void* kernelFor(const Int8GemvPlan& p) {
  switch (p.y) {
    case GemvType::kInt8:
      return formFor<X, GemvType::kInt8>(p);
    case GemvType::kFloat16:
      return formFor<X, GemvType::kFloat16>(p);
    default:
      return formFor<X, GemvType::kFloat32>(p);
  }
}

bool aligned(const void* ptr, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(ptr) % bytes == 0;
}

uintptr_t elementBytes(GemvType t) {
  return t == GemvType::kInt8 ? 1 : t == GemvType::kFloat16 ? 2 : 4;
}

bool positive(float s) {
  return s > 0.f && s < INFINITY;
}

}  // namespace

Status launchInt8Gemv(const Int8GemvPlan& p, const void* x, const int8_t* w, const float* alpha,
                      const float* bias, void* y, void* stream) {
  const bool tiled = p.rowTile != 0;
  const int maxRows = tiled ? kInt8GemvMaxTiledRows : kInt8GemvMaxRows;
  if (p.M < 1 || p.M > maxRows || p.N < 1 || p.K < 16 || p.K % 16 != 0 || p.K > kInt8GemvMaxK)
    return Status(ErrorCode::kInvalidArgument,
                  "int8 gemv: M must be 1 to " + std::to_string(maxRows) +
                      ", K a multiple of 16 up to " + std::to_string(kInt8GemvMaxK) +
                      " and N at least 1 (M " + std::to_string(p.M) + ", K " + std::to_string(p.K) +
                      ", N " + std::to_string(p.N) + ")");
  if (tiled && (p.rowTile < 1 || p.rowTile > kInt8GemvRowTile ||
                static_cast<int64_t>(p.rowTile) * p.K > kInt8GemvRowTileBytes ||
                (p.channelsPerWarp != 1 && p.channelsPerWarp != 4)))
    return Status(ErrorCode::kInvalidArgument,
                  "int8 gemv: a row tile of 1 to " + std::to_string(kInt8GemvRowTile) +
                      " rows within " + std::to_string(kInt8GemvRowTileBytes) +
                      " bytes and 1 or 4 channels a warp (rows " + std::to_string(p.rowTile) +
                      ", channels " + std::to_string(p.channelsPerWarp) + ")");
  if ((p.x != GemvType::kInt8 && !positive(p.xScale)) ||
      (p.y == GemvType::kInt8 && !positive(p.yScale)))
    return Status(ErrorCode::kInvalidArgument,
                  "int8 gemv: a float input or an int8 output needs a scale above zero");
  if (!x || !w || !alpha || !bias || !y)
    return Status(ErrorCode::kInvalidArgument, "int8 gemv: missing pointer");
  if (!aligned(x, 16) || !aligned(w, 16) || !aligned(alpha, 4) || !aligned(bias, 4) ||
      !aligned(y, elementBytes(p.y)))
    return Status(ErrorCode::kInvalidArgument, "int8 gemv: misaligned pointer");
  void* kernel = p.x == GemvType::kInt8      ? kernelFor<GemvType::kInt8>(p)
                 : p.x == GemvType::kFloat16 ? kernelFor<GemvType::kFloat16>(p)
                                             : kernelFor<GemvType::kFloat32>(p);
  const int channels = tiled ? kWarps * p.channelsPerWarp : kWarps;  // a block's
  const int rowBlocks = tiled ? (p.M + p.rowTile - 1) / p.rowTile : p.M;
  const dim3 grid(static_cast<unsigned>((p.N + channels - 1) / channels),
                  static_cast<unsigned>(rowBlocks));
  // At most 46 KiB with the sums (a row of 16 KiB; a row tile within kInt8GemvRowTileBytes and
  // 2 KiB of sums): no opt-in.
  const size_t smem = static_cast<size_t>(p.K) * (tiled ? p.rowTile : 1);
  void* args[] = {const_cast<Int8GemvPlan*>(&p), const_cast<void**>(&x),
                  const_cast<int8_t**>(&w),      const_cast<float**>(&alpha),
                  const_cast<float**>(&bias),    &y};
  // A programmatic dependent: at batch 1 a classifier's launch and start are most of its time.
  EI_CUDA_CHECK(launchAsDependent(kernel, grid, dim3(kWarps * 32), smem,
                                  static_cast<cudaStream_t>(stream), args));
  return Status::Ok();
}

}  // namespace edgeinfer::cuda
