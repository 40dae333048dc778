// Reduction kernels of the `cuda` tactic family (reduce.h).
//   inner == 1 (the reduced elements of an output are contiguous): a warp per output row for
//     short rows, a block per row for long ones; lanes stride the row, then a shuffle tree.
//   inner > 1: a 32 x 8 block per (outer, 32 consecutive inner) tile; the 32 columns are read
//     coalesced, the 8 rows of threads split the reduced length and combine in shared memory.
#include <cuda_runtime.h>

#include <cfloat>
#include <climits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_half.h"
#include "kernels/cuda/reduce.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kBlockRows = 8;     // inner > 1: threads splitting the reduced length
constexpr int kRowThreads = 256;  // inner == 1, long rows: threads per row

template <ReduceOp OP>
__device__ __forceinline__ float identity() {
  if constexpr (OP == ReduceOp::kMax) return -INFINITY;
  if constexpr (OP == ReduceOp::kMin) return INFINITY;
  if constexpr (OP == ReduceOp::kLogSumExp) return -INFINITY;
  if constexpr (OP == ReduceOp::kProd) return 1.f;
  return 0.f;
}

/// Each input value as the reduction consumes it (|x| for L1, x^2 for L2 / SumSquare).
template <ReduceOp OP>
__device__ __forceinline__ float premap(float v) {
  if constexpr (OP == ReduceOp::kL1) return fabsf(v);
  if constexpr (OP == ReduceOp::kL2 || OP == ReduceOp::kSumSquare) return v * v;
  return v;
}

/// Combines two partial results; a NaN on either side wins for Max/Min (numpy semantics).
/// LogSumExp combines two log-sums: max + log1p(exp(min - max)), exact for infinities.
template <ReduceOp OP>
__device__ __forceinline__ float combine(float a, float b) {
  if constexpr (OP == ReduceOp::kMax || OP == ReduceOp::kMin) {
    if (a != a) return a;
    if (b != b) return b;
    return OP == ReduceOp::kMax ? (b > a ? b : a) : (b < a ? b : a);
  } else if constexpr (OP == ReduceOp::kProd) {
    return a * b;
  } else if constexpr (OP == ReduceOp::kLogSumExp) {
    if (a != a || b != b) return a + b;  // NaN
    const float hi = a > b ? a : b, lo = a > b ? b : a;
    if (lo == -INFINITY || hi == INFINITY) return hi;
    return hi + log1pf(expf(lo - hi));
  } else {
    return a + b;
  }
}

template <ReduceOp OP>
__device__ __forceinline__ float finish(float acc, int64_t red) {
  if constexpr (OP == ReduceOp::kMean) return acc / static_cast<float>(red);
  if constexpr (OP == ReduceOp::kL2) return sqrtf(acc);
  if constexpr (OP == ReduceOp::kLogSum) return logf(acc);
  return acc;
}

template <ReduceOp OP>
__device__ __forceinline__ float warpReduce(float v) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off /= 2)
    v = combine<OP>(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

template <typename T, ReduceOp OP>
__global__ void warpRowKernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                              int64_t red) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warpsPerGrid = static_cast<int64_t>(gridDim.x) * (blockDim.x / kWarp);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (blockDim.x / kWarp) + threadIdx.x / kWarp;
       r < rows; r += warpsPerGrid) {
    const T* xr = x + r * red;
    float acc = identity<OP>();
    for (int64_t i = lane; i < red; i += kWarp)
      acc = combine<OP>(acc, premap<OP>(dev::toFloat(xr[i])));
    acc = warpReduce<OP>(acc);
    if (lane == 0) y[r] = dev::fromFloat<T>(finish<OP>(acc, red));
  }
}

template <typename T, ReduceOp OP>
__global__ void __launch_bounds__(kRowThreads)
    blockRowKernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t red) {
  __shared__ float partial[kRowThreads / kWarp];
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * red;
    float acc = identity<OP>();
    for (int64_t i = threadIdx.x; i < red; i += kRowThreads)
      acc = combine<OP>(acc, premap<OP>(dev::toFloat(xr[i])));
    acc = warpReduce<OP>(acc);
    if (lane == 0) partial[warp] = acc;
    __syncthreads();
    if (warp == 0) {
      acc = lane < kRowThreads / kWarp ? partial[lane] : identity<OP>();
      acc = warpReduce<OP>(acc);
      if (lane == 0) y[r] = dev::fromFloat<T>(finish<OP>(acc, red));
    }
    __syncthreads();  // partial[] is reused by the next row
  }
}

template <typename T, ReduceOp OP>
__global__ void __launch_bounds__(kWarp* kBlockRows)
    columnKernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t red,
                 int64_t inner) {
  __shared__ float partial[kBlockRows][kWarp + 1];
  const int64_t colTiles = (inner + kWarp - 1) / kWarp;
  const int64_t tiles = outer * colTiles;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const int64_t o = t / colTiles;
    const int64_t col = (t % colTiles) * kWarp + threadIdx.x;
    float acc = identity<OP>();
    if (col < inner) {
      const T* xc = x + o * red * inner + col;
      for (int64_t r = threadIdx.y; r < red; r += kBlockRows)
        acc = combine<OP>(acc, premap<OP>(dev::toFloat(xc[r * inner])));
    }
    partial[threadIdx.y][threadIdx.x] = acc;
    __syncthreads();
    if (threadIdx.y == 0 && col < inner) {
      for (int k = 1; k < kBlockRows; ++k) acc = combine<OP>(acc, partial[k][threadIdx.x]);
      y[o * inner + col] = dev::fromFloat<T>(finish<OP>(acc, red));
    }
    __syncthreads();
  }
}

int clampGrid(int64_t work, int maxBlocks) {
  return static_cast<int>(work < 1 ? 1 : (work > maxBlocks ? maxBlocks : work));
}

template <typename T, ReduceOp OP>
Status launchT(const ReducePlan& p, const void* xv, void* yv, int maxBlocks, cudaStream_t s) {
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  if (p.inner == 1) {
    const int64_t rows = p.outer;
    // Long rows with few of them: a block per row keeps the GPU busy.
    if (p.red >= 2048 && rows < static_cast<int64_t>(maxBlocks) * 4) {
      blockRowKernel<T, OP><<<clampGrid(rows, maxBlocks), kRowThreads, 0, s>>>(x, y, rows, p.red);
    } else {
      constexpr int kWarpsPerBlock = 8;
      warpRowKernel<T, OP><<<clampGrid((rows + kWarpsPerBlock - 1) / kWarpsPerBlock, maxBlocks),
                             kWarpsPerBlock * kWarp, 0, s>>>(x, y, rows, p.red);
    }
  } else {
    const int64_t tiles = p.outer * ((p.inner + kWarp - 1) / kWarp);
    columnKernel<T, OP><<<clampGrid(tiles, maxBlocks), dim3(kWarp, kBlockRows), 0, s>>>(
        x, y, p.outer, p.red, p.inner);
  }
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

template <typename T>
Status launchOp(const ReducePlan& p, const void* x, void* y, int maxBlocks, cudaStream_t s) {
  switch (p.op) {
    case ReduceOp::kSum:
      return launchT<T, ReduceOp::kSum>(p, x, y, maxBlocks, s);
    case ReduceOp::kMean:
      return launchT<T, ReduceOp::kMean>(p, x, y, maxBlocks, s);
    case ReduceOp::kMax:
      return launchT<T, ReduceOp::kMax>(p, x, y, maxBlocks, s);
    case ReduceOp::kMin:
      return launchT<T, ReduceOp::kMin>(p, x, y, maxBlocks, s);
    case ReduceOp::kProd:
      return launchT<T, ReduceOp::kProd>(p, x, y, maxBlocks, s);
    case ReduceOp::kL1:
      return launchT<T, ReduceOp::kL1>(p, x, y, maxBlocks, s);
    case ReduceOp::kL2:
      return launchT<T, ReduceOp::kL2>(p, x, y, maxBlocks, s);
    case ReduceOp::kLogSum:
      return launchT<T, ReduceOp::kLogSum>(p, x, y, maxBlocks, s);
    case ReduceOp::kLogSumExp:
      return launchT<T, ReduceOp::kLogSumExp>(p, x, y, maxBlocks, s);
    case ReduceOp::kSumSquare:
      return launchT<T, ReduceOp::kSumSquare>(p, x, y, maxBlocks, s);
  }
  return Status(ErrorCode::kInternal, "Reduce: unknown op");
}

}  // namespace

Status launchReduce(const ReducePlan& plan, bool fp16, const void* x, void* y, int maxBlocks,
                    void* stream) {
  if (plan.outer * plan.inner == 0) return Status::Ok();
  if (plan.red < 1) return Status(ErrorCode::kInvalidArgument, "Reduce: empty reduction");
  const auto s = static_cast<cudaStream_t>(stream);
  return fp16 ? launchOp<__half>(plan, x, y, maxBlocks, s)
              : launchOp<float>(plan, x, y, maxBlocks, s);
}

}  // namespace edgeinfer::cuda
