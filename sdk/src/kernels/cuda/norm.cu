// Normalisation kernels of the `cuda` tactic family (norm.h).
//   Row norms (LayerNormalization, InstanceNormalization): rows of up to kWarpRowMax elements
//     get a warp each, longer ones a block each; each row is read three times (sum, centred
//     squares, output), the later reads mostly from cache. Float sums, shuffle trees.
//   LRN: one thread per element, the window's squares summed in float.
//   BatchNormalization (inference, not folded into a convolution): a per-channel fmaf.
//   MeanVarianceNormalization: a block per group of elements (any reduced axes, strided
//     reads), float sums over the block, three reads as for the row norms.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_half.h"
#include "kernels/cuda/norm.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kWarp = 32;
constexpr int kThreads = 256;
constexpr int kRowBlock = 512;  // threads per row for long rows
constexpr int64_t kWarpRowMax = 1024;

__device__ __forceinline__ float warpSum(float v) {
#pragma unroll
  for (int off = kWarp / 2; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

/// Sum over the kThreadsPerRow threads of a row (a warp, or the whole block).
template <int kThreadsPerRow>
__device__ __forceinline__ float rowSum(float v, float* shared) {
  v = warpSum(v);
  if constexpr (kThreadsPerRow > kWarp) {
    const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
    __syncthreads();  // shared[] may still be read from the previous sum
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < kThreadsPerRow / kWarp ? shared[lane] : 0.f;
    v = warpSum(v);
  }
  return v;
}

template <typename T, int kThreadsPerRow>
__global__ void __launch_bounds__(kThreadsPerRow > kWarp ? kThreadsPerRow : kThreads)
    rowNormKernel(const T* __restrict__ x, T* __restrict__ y, RowNormPlan p) {
  __shared__ float shared[kRowBlock / kWarp];
  constexpr int kRowsPerBlock = kThreadsPerRow > kWarp ? 1 : kThreads / kWarp;
  const int lane = threadIdx.x % kThreadsPerRow;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kRowsPerBlock;
  const int64_t first =
      static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kThreadsPerRow;
  // Every thread of a block runs the same number of rounds (block-wide barriers inside).
  const int64_t rounds =
      (p.rows - static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + step - 1) / step;
  int64_t r = first;
  for (int64_t round = 0; round < rounds; ++round, r += step) {
    const bool live = r < p.rows;
    const T* xr = x + (live ? r : 0) * p.len;
    float s = 0.f;
    if (live)
      for (int64_t i = lane; i < p.len; i += kThreadsPerRow) s += dev::toFloat(xr[i]);
    const float mean = rowSum<kThreadsPerRow>(s, shared) / static_cast<float>(p.len);
    float q = 0.f;
    if (live)
      for (int64_t i = lane; i < p.len; i += kThreadsPerRow) {
        const float d = dev::toFloat(xr[i]) - mean;
        q += d * d;
      }
    const float var = rowSum<kThreadsPerRow>(q, shared) / static_cast<float>(p.len);
    if (!live) continue;
    const float inv = 1.f / sqrtf(var + p.epsilon);
    T* yr = y + r * p.len;
    if (p.channels > 0) {
      const int64_t c = r % p.channels;
      const float a = inv * p.scale[c];
      const float b = p.bias ? p.bias[c] : 0.f;
      for (int64_t i = lane; i < p.len; i += kThreadsPerRow)
        yr[i] = dev::fromFloat<T>((dev::toFloat(xr[i]) - mean) * a + b);
    } else {
      for (int64_t i = lane; i < p.len; i += kThreadsPerRow) {
        const float b = p.bias ? p.bias[i] : 0.f;
        yr[i] = dev::fromFloat<T>((dev::toFloat(xr[i]) - mean) * inv * p.scale[i] + b);
      }
    }
  }
}

template <typename T>
Status launchRowNormT(const RowNormPlan& p, const void* xv, void* yv, int maxBlocks,
                      cudaStream_t s) {
  const T* x = static_cast<const T*>(xv);
  T* y = static_cast<T*>(yv);
  if (p.len <= kWarpRowMax) {
    const int grid = dev::gridFor(p.rows, kThreads / kWarp, maxBlocks);
    rowNormKernel<T, kWarp><<<grid, kThreads, 0, s>>>(x, y, p);
  } else {
    const int grid = dev::gridFor(p.rows, 1, maxBlocks);
    rowNormKernel<T, kRowBlock><<<grid, kRowBlock, 0, s>>>(x, y, p);
  }
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    lrnKernel(const T* __restrict__ x, T* __restrict__ y, LrnPlan p) {
  const int64_t total = p.N * p.C * p.S;
  const int64_t before = (p.size - 1) / 2;
  const int64_t after = p.size - 1 - before;
  const float scale = p.alpha / static_cast<float>(p.size);
  const int64_t cStride = p.nhwc ? 1 : p.S;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t c = p.nhwc ? t % p.C : (t / p.S) % p.C;
    const int64_t c0 = c - before < 0 ? 0 : c - before;
    const int64_t c1 = c + after > p.C - 1 ? p.C - 1 : c + after;
    const int64_t base = t - c * cStride;
    float sq = 0.f;
    for (int64_t cc = c0; cc <= c1; ++cc) {
      const float v = dev::toFloat(x[base + cc * cStride]);
      sq += v * v;
    }
    const float v = dev::toFloat(x[t]);
    y[t] = dev::fromFloat<T>(v / powf(p.bias + scale * sq, p.beta));
  }
}

}  // namespace

Status launchRowNorm(const RowNormPlan& plan, bool fp16, const void* x, void* y, int maxBlocks,
                     void* stream) {
  if (plan.rows == 0) return Status::Ok();
  if (plan.len < 1 || !plan.scale)
    return Status(ErrorCode::kInvalidArgument, "normalisation: empty rows or no scale");
  const auto s = static_cast<cudaStream_t>(stream);
  return fp16 ? launchRowNormT<__half>(plan, x, y, maxBlocks, s)
              : launchRowNormT<float>(plan, x, y, maxBlocks, s);
}

Status launchLrn(const LrnPlan& plan, bool fp16, const void* x, void* y, int maxBlocks,
                 void* stream) {
  const int64_t total = plan.N * plan.C * plan.S;
  if (total == 0) return Status::Ok();
  const auto s = static_cast<cudaStream_t>(stream);
  const int grid = dev::gridFor(total, kThreads, maxBlocks);
  if (fp16)
    lrnKernel<__half>
        <<<grid, kThreads, 0, s>>>(static_cast<const __half*>(x), static_cast<__half*>(y), plan);
  else
    lrnKernel<float>
        <<<grid, kThreads, 0, s>>>(static_cast<const float*>(x), static_cast<float*>(y), plan);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

namespace {

template <typename T, typename I>
__global__ void __launch_bounds__(kThreads)
    channelAffineKernel(const T* __restrict__ x, T* __restrict__ y, const float* __restrict__ scale,
                        const float* __restrict__ shift, I total, I C, I S, bool nhwc) {
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I i = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; i < total; i += step) {
    const I c = nhwc ? i % C : (i / S) % C;
    y[i] = dev::fromFloat<T>(fmaf(dev::toFloat(x[i]), scale[c], shift[c]));
  }
}

template <typename T>
void launchAffineT(const ChannelAffinePlan& p, const void* x, void* y, int grid, cudaStream_t s) {
  const int64_t total = p.N * p.C * p.S;
  const T* in = static_cast<const T*>(x);
  T* out = static_cast<T*>(y);
  if (total < INT_MAX)
    channelAffineKernel<T, uint32_t>
        <<<grid, kThreads, 0, s>>>(in, out, p.scale, p.shift, static_cast<uint32_t>(total),
                                   static_cast<uint32_t>(p.C), static_cast<uint32_t>(p.S), p.nhwc);
  else
    channelAffineKernel<T, int64_t>
        <<<grid, kThreads, 0, s>>>(in, out, p.scale, p.shift, total, p.C, p.S, p.nhwc);
}

}  // namespace

namespace {

/// Offset of element `r` of a group: r's coordinates along the reduced dims (last innermost).
__device__ __forceinline__ int64_t mvnOffset(const MvnPlan& p, int64_t r) {
  int64_t off = 0;
  for (int d = p.reduced - 1; d >= 0; --d) {
    off += (r % p.redDims[d]) * p.redStrides[d];
    r /= p.redDims[d];
  }
  return off;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    mvnKernel(const T* __restrict__ x, T* __restrict__ y, const MvnPlan p) {
  __shared__ float shared[kThreads / kWarp];
  for (int64_t g = blockIdx.x; g < p.groups; g += gridDim.x) {
    int64_t base = 0, rest = g;
    for (int d = p.kept - 1; d >= 0; --d) {
      base += (rest % p.keptDims[d]) * p.keptStrides[d];
      rest /= p.keptDims[d];
    }
    float sum = 0.f;
    for (int64_t r = threadIdx.x; r < p.groupSize; r += kThreads)
      sum += dev::toFloat(x[base + mvnOffset(p, r)]);
    const float mean = rowSum<kThreads>(sum, shared) / static_cast<float>(p.groupSize);
    float sq = 0.f;
    for (int64_t r = threadIdx.x; r < p.groupSize; r += kThreads) {
      const float d = dev::toFloat(x[base + mvnOffset(p, r)]) - mean;
      sq = fmaf(d, d, sq);
    }
    const float var = rowSum<kThreads>(sq, shared) / static_cast<float>(p.groupSize);
    const float inv = 1.f / (sqrtf(var) + 1e-9f);
    for (int64_t r = threadIdx.x; r < p.groupSize; r += kThreads) {
      const int64_t o = base + mvnOffset(p, r);
      y[o] = dev::fromFloat<T>((dev::toFloat(x[o]) - mean) * inv);
    }
  }
}

}  // namespace

Status launchMvn(const MvnPlan& plan, bool fp16, const void* x, void* y, int maxBlocks,
                 void* stream) {
  if (plan.groups == 0 || plan.groupSize == 0) return Status::Ok();
  if (plan.kept > MvnPlan::kMaxDims || plan.reduced > MvnPlan::kMaxDims || plan.reduced < 1)
    return Status(ErrorCode::kInvalidArgument, "MeanVarianceNormalization: bad plan");
  const auto s = static_cast<cudaStream_t>(stream);
  const int grid = static_cast<int>(std::min<int64_t>(plan.groups, std::max(1, maxBlocks)));
  if (fp16)
    mvnKernel<__half>
        <<<grid, kThreads, 0, s>>>(static_cast<const __half*>(x), static_cast<__half*>(y), plan);
  else
    mvnKernel<float>
        <<<grid, kThreads, 0, s>>>(static_cast<const float*>(x), static_cast<float*>(y), plan);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status launchChannelAffine(const ChannelAffinePlan& plan, bool fp16, const void* x, void* y,
                           int maxBlocks, void* stream) {
  const int64_t total = plan.N * plan.C * plan.S;
  if (total == 0) return Status::Ok();
  if (!plan.scale || !plan.shift)
    return Status(ErrorCode::kInternal, "BatchNormalization: parameters not uploaded");
  const auto s = static_cast<cudaStream_t>(stream);
  const int grid = dev::gridFor(total, kThreads, maxBlocks);
  if (fp16)
    launchAffineT<__half>(plan, x, y, grid, s);
  else
    launchAffineT<float>(plan, x, y, grid, s);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace edgeinfer::cuda
