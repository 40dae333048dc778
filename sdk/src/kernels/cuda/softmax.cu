// Softmax / LogSoftmax kernels of the `cuda` tactic family (softmax.h), and Hardmax and
// LpNormalization (axisKernel: one thread per column, as the CPU reference). The tensor is a
// stack of [outer, len, inner] slices normalised along len. One pass keeps a running max and
// the sum of exp(x - max) rescaled whenever the max grows (the "online" softmax), so each
// element is read twice: once for (max, sum), once to write the result. Sums are float.
//   inner == 1, len <= 1024: one warp per row (16-byte loads when the rows allow)
//   inner == 1, len > 1024:  one block per row
//   inner > 1:               one thread per column, threads adjacent along inner (coalesced)
#include <cuda_runtime.h>

#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_half.h"
#include "kernels/cuda/softmax.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kWarpRowMax = 1024;

struct MaxSum {
  float m, s;
};

__device__ __forceinline__ void onlineAdd(MaxSum& a, float v) {
  if (v > a.m) {
    a.s = a.s * expf(a.m - v) + 1.f;
    a.m = v;
  } else {
    a.s += expf(v - a.m);
  }
}

__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, a.s + b.s};
  const float sa = a.m == -INFINITY ? 0.f : a.s * expf(a.m - m);
  const float sb = b.m == -INFINITY ? 0.f : b.s * expf(b.m - m);
  return {m, sa + sb};
}

__device__ __forceinline__ MaxSum warpCombine(MaxSum a) {
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) {
    MaxSum o;
    o.m = __shfl_xor_sync(0xffffffffu, a.m, off);
    o.s = __shfl_xor_sync(0xffffffffu, a.s, off);
    a = combine(a, o);
  }
  return a;
}

template <bool kLog>
__device__ __forceinline__ float finish(float v, float m, float invSum, float logSum) {
  return kLog ? v - m - logSum : expf(v - m) * invSum;
}

/// Rows of length len, kRowThreads (32 or kThreads) threads per row.
template <typename T, int VEC, bool kLog, int kRowThreads>
__global__ void __launch_bounds__(kThreads)
    softmaxRowsKernel(const T* __restrict__ x, T* __restrict__ y, int64_t rows, int64_t len) {
  constexpr int kRowsPerBlock = kThreads / kRowThreads;
  __shared__ MaxSum partial[kThreads / 32];
  const int lane = threadIdx.x % kRowThreads;
  const int64_t base = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kRowsPerBlock;
  const int64_t rounds = (rows - base + step - 1) / step;  // uniform across the block
  int64_t row = base + threadIdx.x / kRowThreads;
  for (int64_t r = 0; r < rounds; ++r, row += step) {
    const bool live = row < rows;
    const T* xr = x + row * len;
    MaxSum a{-INFINITY, 0.f};
    if (live) {
      for (int64_t i = static_cast<int64_t>(lane) * VEC; i < len; i += kRowThreads * VEC) {
        float v[VEC];
        dev::loadN<T, VEC>(xr + i, v);
#pragma unroll
        for (int c = 0; c < VEC; ++c) onlineAdd(a, v[c]);
      }
    }
    a = warpCombine(a);
    if constexpr (kRowThreads > 32) {
      __syncthreads();
      if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = a;
      __syncthreads();
      a = partial[0];
      for (int w = 1; w < kThreads / 32; ++w) a = combine(a, partial[w]);
    }
    if (!live) continue;
    const float invSum = 1.f / a.s;
    const float logSum = logf(a.s);
    T* yr = y + row * len;
    for (int64_t i = static_cast<int64_t>(lane) * VEC; i < len; i += kRowThreads * VEC) {
      float v[VEC];
      dev::loadN<T, VEC>(xr + i, v);
#pragma unroll
      for (int c = 0; c < VEC; ++c) v[c] = finish<kLog>(v[c], a.m, invSum, logSum);
      dev::storeN<T, VEC>(yr + i, v);
    }
  }
}

/// Strided columns: one thread per (outer, inner) pair.
template <typename T, bool kLog>
__global__ void __launch_bounds__(kThreads)
    softmaxColumnsKernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t len,
                         int64_t inner) {
  const int64_t total = outer * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < total;
       t += step) {
    const int64_t o = t / inner;
    const int64_t base = o * len * inner + (t - o * inner);
    MaxSum a{-INFINITY, 0.f};
    for (int64_t k = 0; k < len; ++k) onlineAdd(a, dev::toFloat(x[base + k * inner]));
    const float invSum = 1.f / a.s;
    const float logSum = logf(a.s);
    for (int64_t k = 0; k < len; ++k) {
      const int64_t off = base + k * inner;
      y[off] = dev::fromFloat<T>(finish<kLog>(dev::toFloat(x[off]), a.m, invSum, logSum));
    }
  }
}

/// Hardmax / LpNormalization: one thread per (outer, inner) pair walks the axis twice.
template <typename T, AxisOp kOp>
__global__ void __launch_bounds__(kThreads) axisKernel(const T* __restrict__ x, T* __restrict__ y,
                                                       int64_t outer, int64_t len, int64_t inner) {
  const int64_t total = outer * inner;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < total;
       t += step) {
    const int64_t o = t / inner;
    const int64_t base = o * len * inner + (t - o * inner);
    if constexpr (kOp == AxisOp::kHardmax) {
      float best = -INFINITY;
      int64_t arg = 0;
      for (int64_t k = 0; k < len; ++k) {
        const float v = dev::toFloat(x[base + k * inner]);
        if (v > best) {  // the first maximum wins; NaN never compares greater
          best = v;
          arg = k;
        }
      }
      for (int64_t k = 0; k < len; ++k)
        y[base + k * inner] = dev::fromFloat<T>(k == arg ? 1.f : 0.f);
    } else {
      float norm = 0.f;
      for (int64_t k = 0; k < len; ++k) {
        const float v = dev::toFloat(x[base + k * inner]);
        norm += kOp == AxisOp::kLpNorm1 ? fabsf(v) : v * v;
      }
      if (kOp == AxisOp::kLpNorm2) norm = sqrtf(norm);
      const float inv = norm > 0.f ? 1.f / norm : 0.f;  // a zero vector stays zero
      for (int64_t k = 0; k < len; ++k) {
        const int64_t off = base + k * inner;
        y[off] = dev::fromFloat<T>(dev::toFloat(x[off]) * inv);
      }
    }
  }
}

template <typename T, AxisOp kOp>
Status launchAxis(const SoftmaxPlan& p, const void* in, void* out, int maxBlocks,
                  cudaStream_t stream) {
  const int grid = dev::gridFor(p.outer * p.inner, kThreads, maxBlocks);
  axisKernel<T, kOp><<<grid, kThreads, 0, stream>>>(static_cast<const T*>(in), static_cast<T*>(out),
                                                    p.outer, p.len, p.inner);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

template <typename T, bool kLog>
Status launchTyped(const SoftmaxPlan& p, const void* in, void* out, int maxBlocks,
                   cudaStream_t stream) {
  const T* x = static_cast<const T*>(in);
  T* y = static_cast<T*>(out);
  constexpr int V = dev::kVec16<T>;
  if (p.inner == 1) {
    const bool vec = p.len % V == 0 && dev::aligned16(in) && dev::aligned16(out);
    if (p.len <= kWarpRowMax) {
      const int grid = dev::gridFor(p.outer, kThreads / 32, maxBlocks);
      if (vec)
        softmaxRowsKernel<T, V, kLog, 32><<<grid, kThreads, 0, stream>>>(x, y, p.outer, p.len);
      else
        softmaxRowsKernel<T, 1, kLog, 32><<<grid, kThreads, 0, stream>>>(x, y, p.outer, p.len);
    } else {
      const int grid = dev::gridFor(p.outer, 1, maxBlocks);
      if (vec)
        softmaxRowsKernel<T, V, kLog, kThreads>
            <<<grid, kThreads, 0, stream>>>(x, y, p.outer, p.len);
      else
        softmaxRowsKernel<T, 1, kLog, kThreads>
            <<<grid, kThreads, 0, stream>>>(x, y, p.outer, p.len);
    }
  } else {
    const int grid = dev::gridFor(p.outer * p.inner, kThreads, maxBlocks);
    softmaxColumnsKernel<T, kLog><<<grid, kThreads, 0, stream>>>(x, y, p.outer, p.len, p.inner);
  }
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

template <typename T>
Status launchOp(const SoftmaxPlan& p, const void* in, void* out, int maxBlocks,
                cudaStream_t stream) {
  switch (p.op) {
    case AxisOp::kSoftmax:
      return launchTyped<T, false>(p, in, out, maxBlocks, stream);
    case AxisOp::kLogSoftmax:
      return launchTyped<T, true>(p, in, out, maxBlocks, stream);
    case AxisOp::kHardmax:
      return launchAxis<T, AxisOp::kHardmax>(p, in, out, maxBlocks, stream);
    case AxisOp::kLpNorm1:
      return launchAxis<T, AxisOp::kLpNorm1>(p, in, out, maxBlocks, stream);
    case AxisOp::kLpNorm2:
      return launchAxis<T, AxisOp::kLpNorm2>(p, in, out, maxBlocks, stream);
  }
  return Status(ErrorCode::kInternal, "launchSoftmax: unknown op");
}

}  // namespace

Status launchSoftmax(const SoftmaxPlan& plan, bool fp16, const void* input, void* output,
                     int maxBlocks, void* stream) {
  if (plan.outer * plan.len * plan.inner == 0) return Status::Ok();
  auto s = static_cast<cudaStream_t>(stream);
  return fp16 ? launchOp<__half>(plan, input, output, maxBlocks, s)
              : launchOp<float>(plan, input, output, maxBlocks, s);
}

}  // namespace edgeinfer::cuda
