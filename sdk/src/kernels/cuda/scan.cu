// CumSum kernels of the `cuda` tactic family (scan.h).
//   Strided columns (inner > 1) and short rows: a thread per (outer, inner) pair walks the axis
//     in order, as the reference does (reads coalesced across inner).
//   Long contiguous rows: a block per row scans tiles of kThreads * kPerThread elements: each
//     thread sums its kPerThread consecutive elements, a block-wide exclusive scan of those
//     sums (warp shuffles, then the warp totals) gives each thread its offset, and the carry
//     goes from tile to tile.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_half.h"
#include "kernels/cuda/scan.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;
constexpr int kPerThread = 4;
constexpr int64_t kBlockRowMin = 512;  // contiguous rows at least this long: a block each

/// Accumulation and conversion per storage type: double for floats, uint64 (wrapping) for
/// integers, as the reference.
template <typename T>
struct ScanTraits;
template <>
struct ScanTraits<float> {
  using Acc = double;
  static __device__ Acc load(float v) { return v; }
  static __device__ float store(Acc a) { return static_cast<float>(a); }
};
template <>
struct ScanTraits<__half> {
  using Acc = double;
  static __device__ Acc load(__half v) { return __half2float(v); }
  static __device__ __half store(Acc a) { return __double2half(a); }
};
template <>
struct ScanTraits<int32_t> {
  using Acc = unsigned long long;
  static __device__ Acc load(int32_t v) { return static_cast<Acc>(static_cast<long long>(v)); }
  static __device__ int32_t store(Acc a) {
    return static_cast<int32_t>(static_cast<uint32_t>(a & 0xffffffffull));
  }
};
template <>
struct ScanTraits<int64_t> {
  using Acc = unsigned long long;
  static __device__ Acc load(int64_t v) { return static_cast<Acc>(v); }
  static __device__ int64_t store(Acc a) { return static_cast<int64_t>(a); }
};

template <typename T>
__global__ void __launch_bounds__(kThreads)
    cumSumColumnsKernel(const T* __restrict__ x, T* __restrict__ y, CumSumPlan p) {
  using Tr = ScanTraits<T>;
  const int64_t total = p.outer * p.inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t o = t / p.inner;
    const int64_t base = o * p.len * p.inner + (t - o * p.inner);
    typename Tr::Acc acc = 0;
    for (int64_t s = 0; s < p.len; ++s) {
      const int64_t pos = base + (p.reverse ? p.len - 1 - s : s) * p.inner;
      const typename Tr::Acc v = Tr::load(x[pos]);
      if (!p.exclusive) acc += v;
      y[pos] = Tr::store(acc);
      if (p.exclusive) acc += v;
    }
  }
}

template <typename A>
__device__ __forceinline__ A warpInclusiveScan(A v, int lane) {
#pragma unroll
  for (int off = 1; off < kWarp; off <<= 1) {
    const A o = __shfl_up_sync(0xffffffffu, v, off);
    if (lane >= off) v += o;
  }
  return v;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    cumSumRowsKernel(const T* __restrict__ x, T* __restrict__ y, CumSumPlan p) {
  using Tr = ScanTraits<T>;
  using A = typename Tr::Acc;
  __shared__ A warpTotals[kThreads / kWarp];
  __shared__ A tileTotal;
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  constexpr int64_t kTile = static_cast<int64_t>(kThreads) * kPerThread;
  for (int64_t r = blockIdx.x; r < p.outer; r += gridDim.x) {
    const T* xr = x + r * p.len;
    T* yr = y + r * p.len;
    A carry = 0;
    for (int64_t t0 = 0; t0 < p.len; t0 += kTile) {
      // Scan positions s (the order of the sum); element k = s, or len - 1 - s when reverse.
      const int64_t s0 = t0 + static_cast<int64_t>(threadIdx.x) * kPerThread;
      A v[kPerThread];
      A mine = 0;
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const int64_t s = s0 + j;
        v[j] = s < p.len ? Tr::load(xr[p.reverse ? p.len - 1 - s : s]) : A(0);
        mine += v[j];
      }
      const A incl = warpInclusiveScan(mine, lane);
      if (lane == kWarp - 1) warpTotals[warp] = incl;
      __syncthreads();
      if (warp == 0) {
        const A w = lane < kThreads / kWarp ? warpTotals[lane] : A(0);
        const A wIncl = warpInclusiveScan(w, lane);
        if (lane < kThreads / kWarp) warpTotals[lane] = wIncl - w;  // exclusive
        if (lane == kWarp - 1) tileTotal = wIncl;
      }
      __syncthreads();
      A acc = carry + warpTotals[warp] + (incl - mine);
#pragma unroll
      for (int j = 0; j < kPerThread; ++j) {
        const int64_t s = s0 + j;
        if (!p.exclusive) acc += v[j];
        if (s < p.len) yr[p.reverse ? p.len - 1 - s : s] = Tr::store(acc);
        if (p.exclusive) acc += v[j];
      }
      carry += tileTotal;
      __syncthreads();  // warpTotals/tileTotal are rewritten by the next tile
    }
  }
}

template <typename T>
Status launchT(const CumSumPlan& p, const void* xv, void* yv, int maxBlocks, cudaStream_t s) {
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  if (p.inner == 1 && p.len >= kBlockRowMin) {
    cumSumRowsKernel<T><<<dev::gridFor(p.outer, 1, maxBlocks), kThreads, 0, s>>>(x, y, p);
  } else {
    cumSumColumnsKernel<T>
        <<<dev::gridFor(p.outer * p.inner, kThreads, maxBlocks), kThreads, 0, s>>>(x, y, p);
  }
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

Status launchCumSum(const CumSumPlan& plan, DataType storage, const void* x, void* y, int maxBlocks,
                    void* stream) {
  if (plan.outer * plan.len * plan.inner == 0) return Status::Ok();
  const auto s = static_cast<cudaStream_t>(stream);
  switch (storage) {
    case DataType::kFloat32:
      return launchT<float>(plan, x, y, maxBlocks, s);
    case DataType::kFloat16:
      return launchT<__half>(plan, x, y, maxBlocks, s);
    case DataType::kInt32:
      return launchT<int32_t>(plan, x, y, maxBlocks, s);
    case DataType::kInt64:
      return launchT<int64_t>(plan, x, y, maxBlocks, s);
    default:
      return Status(ErrorCode::kUnsupported, "CumSum: unsupported storage type");
  }
}

}  // namespace edgeinfer::cuda
