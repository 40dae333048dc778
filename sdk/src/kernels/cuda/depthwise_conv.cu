// Depthwise convolution kernels of the `cuda-dw` tactic provider (depthwise_conv.h).
//
// Depthwise layers are memory-bound (R*S multiply-adds per output element), so the kernels aim
// at coalesced accesses and cheap index arithmetic rather than data reuse through shared
// memory; the few input rows a block touches stay in L1/L2:
//   - NCHW: one output element per thread, consecutive threads along W.
//   - NHWC: one output pixel and V consecutive channels per thread (one 16-byte access, or a
//     half2), consecutive threads along the channels.
// The kernel size is a template parameter (3, 5, or 0 = read at run time); with a fixed size the
// window loops unroll, and windows that lie wholly inside the image skip the bounds checks.
// Accumulation is in float in (r, s) order, then ((acc + B) + Z) and the activation, the
// expressions of the CPU reference (kernels/ref/conv.cpp, activation.h) one by one.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_half.h"
#include "kernels/cuda/depthwise_conv.h"
#include "kernels/cuda/fused_activation.cuh"

namespace edgeinfer::cuda {
namespace {

constexpr int kThreads = 256;

/// V consecutive elements as floats: a 16-byte access, a half2, or element by element.
template <typename T, int V>
__device__ __forceinline__ void loadVec(const T* __restrict__ p, float (&out)[V]) {
  if constexpr (V * sizeof(T) == 16) {
    dev::loadN<T, V>(p, out);
  } else if constexpr (V == 2 && sizeof(T) == 2) {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(p));
    out[0] = f.x;
    out[1] = f.y;
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) out[i] = dev::toFloat(p[i]);
  }
}

template <typename T, int V>
__device__ __forceinline__ void storeVec(T* __restrict__ p, const float (&v)[V]) {
  if constexpr (V * sizeof(T) == 16) {
    dev::storeN<T, V>(p, v);
  } else if constexpr (V == 2 && sizeof(T) == 2) {
    *reinterpret_cast<__half2*>(p) = __floats2half2_rn(v[0], v[1]);
  } else {
#pragma unroll
    for (int i = 0; i < V; ++i) p[i] = dev::fromFloat<T>(v[i]);
  }
}

/// NCHW: element e of Y (logical NCHW index) per thread, grid-stride.
template <typename T, int KSIZE>
__global__ void __launch_bounds__(kThreads)
    dwNchwKernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                 const T* __restrict__ z, T* __restrict__ y, const DepthwisePlan p, int total) {
  const int R = KSIZE > 0 ? KSIZE : p.R;
  const int S = KSIZE > 0 ? KSIZE : p.S;
  const int step = static_cast<int>(gridDim.x) * kThreads;
  for (int e = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x); e < total;
       e += step) {
    const int q = e % p.Q;
    int t = e / p.Q;
    const int oh = t % p.P;
    t /= p.P;
    const int k = t % p.K;
    const int n = t / p.K;
    const int c = k / p.M;
    const T* xc = x + (n * p.C + c) * p.H * p.W;
    const T* wk = w + k * R * S;
    const int ih0 = oh * p.strideH - p.padTop;
    const int iw0 = q * p.strideW - p.padLeft;
    float acc = 0.f;
    bool inside = false;
    if constexpr (KSIZE > 0)
      inside = ih0 >= 0 && ih0 + (R - 1) * p.dilH < p.H && iw0 >= 0 && iw0 + (S - 1) * p.dilW < p.W;
    if (inside) {
#pragma unroll
      for (int r = 0; r < (KSIZE > 0 ? KSIZE : 1); ++r) {
        const T* xr = xc + (ih0 + r * p.dilH) * p.W + iw0;
#pragma unroll
        for (int s = 0; s < (KSIZE > 0 ? KSIZE : 1); ++s)
          acc = fmaf(dev::toFloat(wk[r * S + s]), dev::toFloat(xr[s * p.dilW]), acc);
      }
    } else {
#pragma unroll
      for (int r = 0; r < (KSIZE > 0 ? KSIZE : R); ++r) {
        const int ih = ih0 + r * p.dilH;
        if (ih < 0 || ih >= p.H) continue;
        const T* xr = xc + ih * p.W;
#pragma unroll
        for (int s = 0; s < (KSIZE > 0 ? KSIZE : S); ++s) {
          const int iw = iw0 + s * p.dilW;
          if (iw < 0 || iw >= p.W) continue;
          acc = fmaf(dev::toFloat(wk[r * S + s]), dev::toFloat(xr[iw]), acc);
        }
      }
    }
    float v = acc + (bias ? dev::toFloat(bias[k]) : 0.f);
    if (z) v = v + dev::toFloat(z[e]);
    y[e] = dev::fromFloat<T>(dev::activate(v, p.act, p.alpha, p.beta));
  }
}

/// NHWC: one output pixel and V consecutive output channels per thread, grid-stride. V > 1
/// needs multiplier 1 (input channel == output channel) and K % V == 0.
template <typename T, int V, int KSIZE>
__global__ void __launch_bounds__(kThreads)
    dwNhwcKernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                 const T* __restrict__ z, T* __restrict__ y, const DepthwisePlan p, int total) {
  const int R = KSIZE > 0 ? KSIZE : p.R;
  const int S = KSIZE > 0 ? KSIZE : p.S;
  const int KV = p.K / V;
  const int step = static_cast<int>(gridDim.x) * kThreads;
  for (int e = static_cast<int>(blockIdx.x) * kThreads + static_cast<int>(threadIdx.x); e < total;
       e += step) {
    const int k = (e % KV) * V;
    int t = e / KV;
    const int q = t % p.Q;
    t /= p.Q;
    const int oh = t % p.P;
    const int n = t / p.P;
    const int c = V > 1 ? k : k / p.M;
    const T* xn = x + n * p.H * p.W * p.C + c;
    const int ih0 = oh * p.strideH - p.padTop;
    const int iw0 = q * p.strideW - p.padLeft;
    float acc[V];
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = 0.f;
    bool inside = false;
    if constexpr (KSIZE > 0)
      inside = ih0 >= 0 && ih0 + (R - 1) * p.dilH < p.H && iw0 >= 0 && iw0 + (S - 1) * p.dilW < p.W;
#pragma unroll
    for (int r = 0; r < (KSIZE > 0 ? KSIZE : R); ++r) {
      const int ih = ih0 + r * p.dilH;
      if (!inside && (ih < 0 || ih >= p.H)) continue;
#pragma unroll
      for (int s = 0; s < (KSIZE > 0 ? KSIZE : S); ++s) {
        const int iw = iw0 + s * p.dilW;
        if (!inside && (iw < 0 || iw >= p.W)) continue;
        float xv[V], wv[V];
        loadVec<T, V>(xn + (ih * p.W + iw) * p.C, xv);
        loadVec<T, V>(w + (r * S + s) * p.K + k, wv);
#pragma unroll
        for (int i = 0; i < V; ++i) acc[i] = fmaf(wv[i], xv[i], acc[i]);
      }
    }
    const int yo = ((n * p.P + oh) * p.Q + q) * p.K + k;
    float bv[V], zv[V];
    if (bias) {
      loadVec<T, V>(bias + k, bv);
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) bv[i] = 0.f;
    }
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = acc[i] + bv[i];
    if (z) {
      loadVec<T, V>(z + yo, zv);
#pragma unroll
      for (int i = 0; i < V; ++i) acc[i] = acc[i] + zv[i];
    }
#pragma unroll
    for (int i = 0; i < V; ++i) acc[i] = dev::activate(acc[i], p.act, p.alpha, p.beta);
    storeVec<T, V>(y + yo, acc);
  }
}

bool alignedTo(const void* ptr, uintptr_t bytes) {
  return (reinterpret_cast<uintptr_t>(ptr) & (bytes - 1)) == 0;
}

template <typename T, int V, int KSIZE>
void launchNhwc(const T* x, const T* w, const T* b, const T* z, T* y, const DepthwisePlan& p,
                int outElems, int maxBlocks, cudaStream_t stream) {
  const int grid = dev::gridFor(outElems / V, kThreads, maxBlocks);
  dwNhwcKernel<T, V, KSIZE><<<grid, kThreads, 0, stream>>>(x, w, b, z, y, p, outElems / V);
}

template <typename T, int KSIZE>
Status launchTyped(const DepthwisePlan& p, const DepthwiseArgs& a, int maxBlocks,
                   cudaStream_t stream) {
  const T* x = static_cast<const T*>(a.x);
  const T* w = static_cast<const T*>(a.w);
  const T* b = static_cast<const T*>(a.bias);
  const T* z = static_cast<const T*>(a.z);
  T* y = static_cast<T*>(a.y);
  const int outElems = p.N * p.K * p.P * p.Q;
  if (!p.nhwc) {
    const int grid = dev::gridFor(outElems, kThreads, maxBlocks);
    dwNchwKernel<T, KSIZE><<<grid, kThreads, 0, stream>>>(x, w, b, z, y, p, outElems);
  } else {
    // The widest channel vector every pointer and K allow (V > 1 needs multiplier 1).
    auto fits = [&](int v) {
      const uintptr_t bytes = static_cast<uintptr_t>(v) * sizeof(T);
      return p.M == 1 && p.K % v == 0 && alignedTo(x, bytes) && alignedTo(w, bytes) &&
             alignedTo(y, bytes) && (!b || alignedTo(b, bytes)) && (!z || alignedTo(z, bytes));
    };
    constexpr int kWide = dev::kVec16<T>;
    if (fits(kWide)) {
      launchNhwc<T, kWide, KSIZE>(x, w, b, z, y, p, outElems, maxBlocks, stream);
    } else if constexpr (sizeof(T) == 2) {
      if (fits(2))
        launchNhwc<T, 2, KSIZE>(x, w, b, z, y, p, outElems, maxBlocks, stream);
      else
        launchNhwc<T, 1, KSIZE>(x, w, b, z, y, p, outElems, maxBlocks, stream);
    } else {
      launchNhwc<T, 1, KSIZE>(x, w, b, z, y, p, outElems, maxBlocks, stream);
    }
  }
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

template <typename T>
Status launchSized(const DepthwisePlan& p, const DepthwiseArgs& a, int maxBlocks,
                   cudaStream_t stream) {
  switch (p.kernelSize) {
    case 3:
      return launchTyped<T, 3>(p, a, maxBlocks, stream);
    case 5:
      return launchTyped<T, 5>(p, a, maxBlocks, stream);
    default:
      return launchTyped<T, 0>(p, a, maxBlocks, stream);
  }
}

}  // namespace

Status launchDepthwiseConv(const DepthwisePlan& plan, const DepthwiseArgs& args, int maxBlocks,
                           void* stream) {
  if ((plan.kernelSize != 0 && (plan.R != plan.kernelSize || plan.S != plan.kernelSize)) ||
      plan.M < 1 || plan.K != plan.M * plan.C || plan.R < 1 || plan.S < 1)
    return Status(ErrorCode::kInternal, "malformed depthwise plan");
  if (static_cast<int64_t>(plan.N) * plan.K * plan.P * plan.Q == 0) return Status::Ok();
  auto s = static_cast<cudaStream_t>(stream);
  return plan.fp16 ? launchSized<__half>(plan, args, maxBlocks, s)
                   : launchSized<float>(plan, args, maxBlocks, s);
}

}  // namespace edgeinfer::cuda
