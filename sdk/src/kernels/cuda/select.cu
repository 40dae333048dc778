// Selection kernels of the `cuda` tactic family (select.h).
//   ArgMax/ArgMin: contiguous rows (inner == 1) get a warp each: every lane scans a strided
//     part, then (value, index) pairs combine in a shuffle tree under the reference's tie rule;
//     strided columns get a thread each that scans like the reference does.
//   TopK: a block per (outer, inner) pair loads the axis into shared memory as (value, index)
//     pairs and bitonic-sorts them under a total order (the reference's stable order), then
//     writes the first k.
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_half.h"
#include "kernels/cuda/select.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;
constexpr int kTopKMaxThreads = 1024;

// ---- ArgMax / ArgMin ------------------------------------------------------------------------

/// Does (v, k) replace (best, bestIdx)? bestIdx < 0: nothing yet. NaN never gets here.
__device__ __forceinline__ bool argBetter(float v, int64_t k, float best, int64_t bestIdx,
                                          bool isMax, bool last) {
  if (bestIdx < 0) return true;
  if (v != best) return isMax ? v > best : v < best;
  return last ? k > bestIdx : k < bestIdx;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    argRowsKernel(const T* __restrict__ x, int64_t* __restrict__ y, int64_t rows, int64_t len,
                  bool isMax, bool last) {
  const int lane = threadIdx.x % kWarp;
  const int64_t warpsPerGrid = static_cast<int64_t>(gridDim.x) * (kThreads / kWarp);
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * (kThreads / kWarp) + threadIdx.x / kWarp;
       r < rows; r += warpsPerGrid) {
    const T* xr = x + r * len;
    float best = 0.f;
    int64_t bestIdx = -1;
    for (int64_t k = lane; k < len; k += kWarp) {
      const float v = dev::toFloat(xr[k]);
      if (v == v && argBetter(v, k, best, bestIdx, isMax, last)) {
        best = v;
        bestIdx = k;
      }
    }
#pragma unroll
    for (int off = kWarp / 2; off > 0; off >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, best, off);
      const int64_t oi = __shfl_xor_sync(0xffffffffu, bestIdx, off);
      if (oi >= 0 && argBetter(ov, oi, best, bestIdx, isMax, last)) {
        best = ov;
        bestIdx = oi;
      }
    }
    if (lane == 0) {
      // The reference starts from element 0: a NaN there is never replaced.
      const float first = dev::toFloat(xr[0]);
      y[r] = first != first || bestIdx < 0 ? 0 : bestIdx;
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    argColumnsKernel(const T* __restrict__ x, int64_t* __restrict__ y, int64_t outer, int64_t len,
                     int64_t inner, bool isMax, bool last) {
  const int64_t total = outer * inner;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t o = t / inner;
    const T* xc = x + o * len * inner + (t - o * inner);
    // The reference's scan, comparison for comparison.
    float best = dev::toFloat(xc[0]);
    int64_t bestIdx = 0;
    for (int64_t k = 1; k < len; ++k) {
      const float v = dev::toFloat(xc[k * inner]);
      const bool better = isMax ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
      if (better) {
        best = v;
        bestIdx = k;
      }
    }
    y[t] = bestIdx;
  }
}

template <typename T>
Status launchArgT(const ArgPlan& p, const void* xv, void* yv, int maxBlocks, cudaStream_t s) {
  const T* x = static_cast<const T*>(xv);
  auto* y = static_cast<int64_t*>(yv);
  if (p.inner == 1) {
    argRowsKernel<T><<<dev::gridFor(p.outer, kThreads / kWarp, maxBlocks), kThreads, 0, s>>>(
        x, y, p.outer, p.len, p.isMax, p.selectLast);
  } else {
    argColumnsKernel<T><<<dev::gridFor(p.outer * p.inner, kThreads, maxBlocks), kThreads, 0, s>>>(
        x, y, p.outer, p.len, p.inner, p.isMax, p.selectLast);
  }
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

// ---- TopK -----------------------------------------------------------------------------------

int64_t sortLength(int64_t len) {
  int64_t n = 1;
  while (n < len) n <<= 1;
  return n < 2 ? 2 : n;
}

int topKThreads(int64_t n) {
  const int64_t t = n / 2;
  return static_cast<int>(t < kWarp ? kWarp : (t > kTopKMaxThreads ? kTopKMaxThreads : t));
}

/// Does (ka, ia) come before (kb, ib) in the output? Padding (index < 0) comes last.
__device__ __forceinline__ bool topKBefore(float ka, int ia, float kb, int ib, bool largest) {
  if (ia < 0) return false;
  if (ib < 0) return true;
  const bool an = ka != ka, bn = kb != kb;
  if (an != bn) return largest ? an : bn;  // NaN orders above every number
  if (!an && ka != kb) return largest ? ka > kb : ka < kb;
  return ia < ib;
}

template <typename T>
__global__ void topKKernel(const T* __restrict__ x, T* __restrict__ values,
                           int64_t* __restrict__ indices, TopKPlan p, int n) {
  extern __shared__ float smem[];
  float* key = smem;
  int* idx = reinterpret_cast<int*>(smem + n);
  const int64_t rows = p.outer * p.inner;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t o = r / p.inner, i = r - o * p.inner;
    const T* xr = x + o * p.len * p.inner + i;
    for (int j = threadIdx.x; j < n; j += blockDim.x) {
      const bool in = j < p.len;
      key[j] = in ? dev::toFloat(xr[static_cast<int64_t>(j) * p.inner]) : 0.f;
      idx[j] = in ? j : -1;
    }
    __syncthreads();
    for (int size = 2; size <= n; size <<= 1) {
      for (int stride = size >> 1; stride > 0; stride >>= 1) {
        for (int t = threadIdx.x; t < n / 2; t += blockDim.x) {
          const int lo = 2 * t - (t & (stride - 1));
          const int hi = lo + stride;
          const bool up = (lo & size) == 0;
          const float klo = key[lo], khi = key[hi];
          const int ilo = idx[lo], ihi = idx[hi];
          const bool swap = up ? topKBefore(khi, ihi, klo, ilo, p.largest)
                               : topKBefore(klo, ilo, khi, ihi, p.largest);
          if (swap) {
            key[lo] = khi;
            key[hi] = klo;
            idx[lo] = ihi;
            idx[hi] = ilo;
          }
        }
        __syncthreads();
      }
    }
    const int64_t ob = o * p.k * p.inner + i;
    for (int64_t j = threadIdx.x; j < p.k; j += blockDim.x) {
      values[ob + j * p.inner] = dev::fromFloat<T>(key[j]);  // exact: T -> float -> T
      if (indices) indices[ob + j * p.inner] = idx[j];
    }
    __syncthreads();  // key[]/idx[] are reloaded for the next row
  }
}

template <typename T>
Status launchTopKT(const TopKPlan& p, const void* x, void* values, void* indices, cudaStream_t s) {
  const int64_t n = sortLength(p.len);
  const int64_t rows = p.outer * p.inner;
  constexpr int64_t kMaxGrid = 65535;
  const int grid = static_cast<int>(rows < kMaxGrid ? rows : kMaxGrid);
  topKKernel<T><<<grid, topKThreads(n), topKSharedBytes(p), s>>>(
      static_cast<const T*>(x), static_cast<T*>(values), static_cast<int64_t*>(indices), p,
      static_cast<int>(n));
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

Status launchArg(const ArgPlan& plan, bool fp16, const void* x, void* y, int maxBlocks,
                 void* stream) {
  if (plan.outer * plan.inner == 0) return Status::Ok();
  if (plan.len < 1) return Status(ErrorCode::kInvalidArgument, "ArgMax/ArgMin over 0 elements");
  const auto s = static_cast<cudaStream_t>(stream);
  return fp16 ? launchArgT<__half>(plan, x, y, maxBlocks, s)
              : launchArgT<float>(plan, x, y, maxBlocks, s);
}

size_t topKSharedBytes(const TopKPlan& plan) {
  return static_cast<size_t>(sortLength(plan.len)) * (sizeof(float) + sizeof(int));
}

Status prepareTopK(const TopKPlan& plan) {
  if (plan.len < 1 || plan.len > kTopKMaxLen || plan.k < 1 || plan.k > plan.len)
    return Status(ErrorCode::kUnsupported, "TopK: axis length or k out of range");
  const size_t bytes = topKSharedBytes(plan);
  int dev = 0, optin = 0;
  EI_CUDA_CHECK(cudaGetDevice(&dev));
  EI_CUDA_CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
  if (bytes > static_cast<size_t>(optin))
    return Status(ErrorCode::kUnsupported, "TopK: the axis (" + std::to_string(plan.len) +
                                               ") needs more shared memory than the device has");
  // Always the same limit (what the longest axis needs, or all the device has), so that
  // preparing a short TopK never lowers what an earlier, longer one relies on.
  TopKPlan longest;
  longest.len = kTopKMaxLen;
  const size_t most = topKSharedBytes(longest);
  const int b = static_cast<int>(most < static_cast<size_t>(optin) ? most : optin);
  EI_CUDA_CHECK(
      cudaFuncSetAttribute(topKKernel<float>, cudaFuncAttributeMaxDynamicSharedMemorySize, b));
  EI_CUDA_CHECK(
      cudaFuncSetAttribute(topKKernel<__half>, cudaFuncAttributeMaxDynamicSharedMemorySize, b));
  return Status::Ok();
}

Status launchTopK(const TopKPlan& plan, bool fp16, const void* x, void* values, void* indices,
                  void* stream) {
  if (plan.outer * plan.inner == 0) return Status::Ok();
  if (plan.len < 1 || plan.len > kTopKMaxLen || plan.k < 1 || plan.k > plan.len)
    return Status(ErrorCode::kInvalidArgument, "TopK: axis length or k out of range");
  const auto s = static_cast<cudaStream_t>(stream);
  return fp16 ? launchTopKT<__half>(plan, x, values, indices, s)
              : launchTopKT<float>(plan, x, values, indices, s);
}

}  // namespace edgeinfer::cuda
