// Pooling kernels of the `cuda` tactic family (pool.h), 2-D spatial, NCHW and NHWC.
//
// Windowed pools: one thread per output element (NCHW) or per 16-byte vector of channels of
// one output pixel (NHWC: 4 floats / 8 halves, loads coalesced across the warp). The window
// walk is the reference's (kernels/ref/pool.cpp): taps outside the input are skipped, the
// first tap inside seeds the max, and AveragePool divides by the number of taps inside the
// input, or with count_include_pad by the number inside the padded input; LpPool sums |x|^p
// over the taps inside (padding counts as zero) and takes the p-th root.
// INT8 MaxPool (NHWC): a thread per 16, 4 or 1 channels of one output pixel, the max taken on
// the int8 values (four at a time, __vmaxs4), then requantized to the output's scale.
// Global pools: a warp (or a block, for large planes) per NCHW plane; for NHWC a warp per
// channel vector of an image for small batches of small planes, else a block per (image,
// channel slice), its rows splitting the pixels and reduced pairwise in shared memory; slices
// as narrow as it takes to give every multiprocessor about two blocks. Their result may
// be written as int8, quantized for an INT8 reader (launchGlobalPoolInt8Out).
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_half.h"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/pool.h"
#include "kernels/cuda/quantize.cuh"

namespace edgeinfer::cuda {
namespace {

constexpr int kThreads = 256;

struct WindowParams {
  int C, H, W, OH, OW;
  int kh, kw, sh, sw, dh, dw;
  int padTop, padLeft, padBottom, padRight;
  bool countIncludePad;
  int lpP;  // LpPool
};

// Windowed pooling modes (template argument of the window kernels).
constexpr int kModeMax = 0, kModeAverage = 1, kModeLp = 2;

__device__ __forceinline__ float refMax(float a, float b) {
  return a < b ? b : a;
}

/// A global pool's result as its output type O: the storage type, or int8 quantized with
/// `scale` (inv = __frcp_rn(scale)) as the quantize reformat rounds it.
template <typename O>
__device__ __forceinline__ O globalOut(float v, float scale, float inv) {
  if constexpr (std::is_same_v<O, int8_t>)
    return dev::quantizeToInt8(v, scale, inv);
  else
    return dev::fromFloat<O>(v);
}

/// Taps of one window dim inside the padded input [-padBegin, in + padEnd).
__device__ __forceinline__ int paddedTaps(int start, int k, int d, int padBegin, int in,
                                          int padEnd) {
  int n = 0;
  for (int i = 0; i < k; ++i) {
    const int p = start + i * d;
    n += (p >= -padBegin && p < in + padEnd) ? 1 : 0;
  }
  return n;
}

/// Calls visit(ih, iw) for each tap of output (oh, ow)'s window that lies inside the input,
/// row by row (the reference's order).
template <typename Visit>
__device__ __forceinline__ void forEachTap(const WindowParams& q, int oh, int ow, Visit&& visit) {
  const int hs = oh * q.sh - q.padTop, ws = ow * q.sw - q.padLeft;
  for (int i = 0; i < q.kh; ++i) {
    const int ih = hs + i * q.dh;
    if (ih < 0 || ih >= q.H) continue;
    for (int j = 0; j < q.kw; ++j) {
      const int iw = ws + j * q.dw;
      if (iw < 0 || iw >= q.W) continue;
      visit(ih, iw);
    }
  }
}

/// Pools one window over VEC channels; `tap(ih, iw)` is the element offset of a tap's first
/// channel, consecutive channels are consecutive elements.
template <typename T, int kMode, int VEC, typename TapOffset>
__device__ __forceinline__ void poolWindow(const T* __restrict__ x, const WindowParams& q, int oh,
                                           int ow, TapOffset tap, float (&acc)[VEC]) {
  const int hs = oh * q.sh - q.padTop;
  const int ws = ow * q.sw - q.padLeft;
  bool found = false;
  int count = 0;
#pragma unroll
  for (int c = 0; c < VEC; ++c) acc[c] = kMode == kModeMax ? -FLT_MAX : 0.f;
  forEachTap(q, oh, ow, [&](int ih, int iw) {
    float v[VEC];
    dev::loadN<T, VEC>(x + tap(ih, iw), v);
#pragma unroll
    for (int c = 0; c < VEC; ++c) {
      if constexpr (kMode == kModeMax) {
        if (!found || v[c] > acc[c]) acc[c] = v[c];
      } else if constexpr (kMode == kModeLp) {
        const float m = fabsf(v[c]);
        acc[c] += q.lpP == 1 ? m : q.lpP == 2 ? m * m : powf(m, static_cast<float>(q.lpP));
      } else {
        acc[c] += v[c];
      }
    }
    found = true;
    ++count;
  });
  if constexpr (kMode == kModeLp) {
#pragma unroll
    for (int c = 0; c < VEC; ++c)
      acc[c] = q.lpP == 1   ? acc[c]
               : q.lpP == 2 ? sqrtf(acc[c])
                            : powf(acc[c], 1.f / static_cast<float>(q.lpP));
  } else if constexpr (kMode == kModeAverage) {
    const int divisor = q.countIncludePad
                            ? paddedTaps(hs, q.kh, q.dh, q.padTop, q.H, q.padBottom) *
                                  paddedTaps(ws, q.kw, q.dw, q.padLeft, q.W, q.padRight)
                            : count;
#pragma unroll
    for (int c = 0; c < VEC; ++c) acc[c] = divisor > 0 ? acc[c] / static_cast<float>(divisor) : 0.f;
  }
}

template <typename T, int kMode, typename I>
__global__ void __launch_bounds__(kThreads)
    poolNchwKernel(const T* __restrict__ x, T* __restrict__ y, const WindowParams q, I total) {
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I o = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; o < total; o += step) {
    const int ow = static_cast<int>(o % q.OW);
    const I t = o / q.OW;
    const int oh = static_cast<int>(t % q.OH);
    const I plane = t / q.OH;
    const T* xp = x + plane * static_cast<I>(q.H) * q.W;
    const int W = q.W;
    float acc[1];
    poolWindow<T, kMode, 1>(
        xp, q, oh, ow, [W](int ih, int iw) { return ih * W + iw; }, acc);
    y[o] = dev::fromFloat<T>(acc[0]);
  }
}

/// Where NHWC channel vector `o` of the output lies (cv vectors of VEC channels per pixel):
/// image n, row oh, column ow, first channel c.
template <typename I>
struct NhwcPosition {
  I n;
  int oh, ow, c;
};
template <int VEC, typename I>
__device__ __forceinline__ NhwcPosition<I> nhwcPosition(I o, int cv, const WindowParams& q) {
  NhwcPosition<I> r;
  r.c = static_cast<int>(o % cv) * VEC;
  I t = o / cv;
  r.ow = static_cast<int>(t % q.OW);
  t /= q.OW;
  r.oh = static_cast<int>(t % q.OH);
  r.n = t / q.OH;
  return r;
}

template <typename T, int kMode, int VEC, typename I>
__global__ void __launch_bounds__(kThreads)
    poolNhwcKernel(const T* __restrict__ x, T* __restrict__ y, const WindowParams q, I total) {
  const int cv = q.C / VEC;  // channel vectors per pixel
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I o = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; o < total; o += step) {
    const auto [n, oh, ow, c] = nhwcPosition<VEC>(o, cv, q);
    const T* xp = x + n * static_cast<I>(q.H) * q.W * q.C + c;
    const int W = q.W, C = q.C;
    float acc[VEC];
    poolWindow<T, kMode, VEC>(
        xp, q, oh, ow, [W, C](int ih, int iw) { return (ih * W + iw) * C; }, acc);
    dev::storeN<T, VEC>(y + ((n * q.OH + oh) * static_cast<I>(q.OW) + ow) * q.C + c, acc);
  }
}

/// Global pooling over NCHW planes: kPlaneThreads (32 or 256) threads per plane.
template <typename T, typename O, bool kMax, int VEC, int kPlaneThreads>
__global__ void __launch_bounds__(kThreads)
    globalPoolNchwKernel(const T* __restrict__ x, O* __restrict__ y, int64_t planes, int64_t size,
                         float qScale, float qInv) {
  constexpr int kPlanesPerBlock = kThreads / kPlaneThreads;
  __shared__ float partial[kThreads / 32];
  const int lane = threadIdx.x % kPlaneThreads;
  const int64_t first =
      static_cast<int64_t>(blockIdx.x) * kPlanesPerBlock + threadIdx.x / kPlaneThreads;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kPlanesPerBlock;
  // Every thread runs the same number of iterations (block-wide barriers below).
  const int64_t rounds = (planes + step - 1 - (first - threadIdx.x / kPlaneThreads)) / step;
  int64_t plane = first;
  for (int64_t r = 0; r < rounds; ++r, plane += step) {
    float acc = kMax ? -FLT_MAX : 0.f;
    if (plane < planes) {
      const T* xp = x + plane * size;
      for (int64_t i = static_cast<int64_t>(lane) * VEC; i < size; i += kPlaneThreads * VEC) {
        float v[VEC];
        dev::loadN<T, VEC>(xp + i, v);
#pragma unroll
        for (int c = 0; c < VEC; ++c) acc = kMax ? refMax(acc, v[c]) : acc + v[c];
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const float o = __shfl_xor_sync(0xffffffffu, acc, off);
      acc = kMax ? refMax(acc, o) : acc + o;
    }
    if constexpr (kPlaneThreads > 32) {
      const int warp = threadIdx.x / 32;
      __syncthreads();
      if (threadIdx.x % 32 == 0) partial[warp] = acc;
      __syncthreads();
      acc = partial[0];
      for (int w = 1; w < kThreads / 32; ++w)
        acc = kMax ? refMax(acc, partial[w]) : acc + partial[w];
    }
    if (lane == 0 && plane < planes)
      y[plane] = globalOut<O>(kMax ? acc : acc / static_cast<float>(size), qScale, qInv);
  }
}

/// Global pooling over NHWC: block (tx, ty) covers tx channel vectors of image blockIdx.y,
/// its ty rows take every ty-th pixel.
template <typename T, typename O, bool kMax, int VEC>
__global__ void __launch_bounds__(kThreads)
    globalPoolNhwcKernel(const T* __restrict__ x, O* __restrict__ y, int C, int64_t size,
                         float qScale, float qInv) {
  __shared__ float partial[kThreads * VEC];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int c = (blockIdx.x * blockDim.x + tx) * VEC;
  const int64_t n = blockIdx.y;
  float acc[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = kMax ? -FLT_MAX : 0.f;
  if (c < C) {
    const T* xp = x + n * size * C + c;
    for (int64_t i = ty; i < size; i += blockDim.y) {
      float v[VEC];
      dev::loadN<T, VEC>(xp + i * C, v);
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k] = kMax ? refMax(acc[k], v[k]) : acc[k] + v[k];
    }
  }
  // The rows' partials, reduced pairwise (blockDim.y is a power of two): log2 steps, not one
  // thread walking every row (at batch 1 a block has up to 128 rows).
  const int slot = (ty * blockDim.x + tx) * VEC;
#pragma unroll
  for (int k = 0; k < VEC; ++k) partial[slot + k] = acc[k];
  __syncthreads();
  for (int half = static_cast<int>(blockDim.y) / 2; half > 0; half /= 2) {
    if (ty < half) {
      const int s = ((ty + half) * blockDim.x + tx) * VEC;
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        acc[k] = kMax ? refMax(acc[k], partial[s + k]) : acc[k] + partial[s + k];
        partial[slot + k] = acc[k];
      }
    }
    __syncthreads();
  }
  if (ty == 0 && c < C) {
    if constexpr (!kMax) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k] /= static_cast<float>(size);
    }
    if constexpr (std::is_same_v<O, int8_t>) {
#pragma unroll
      for (int k = 0; k < VEC; ++k) y[n * C + c + k] = globalOut<O>(acc[k], qScale, qInv);
    } else {
      dev::storeN<T, VEC>(y + n * C + c, acc);
    }
  }
}

/// The warp form of the NHWC global pool takes planes of up to 64 pixels and up to 8,192 warps
/// (a warp per channel vector of an image): the latency-bound small batches. Beyond, the
/// block form reads whole sectors and was faster (ResNet-50 at batch 64 on an H200: 5.6
/// against 8.0 us with two vectors a warp).
constexpr int64_t kWarpPoolMaxPixels = 64, kWarpPoolMaxWarps = 8192;

/// Global pooling over NHWC for small planes (a classifier's 7 x 7): a warp per TX channel
/// vectors of one image, its 32 / TX lane groups splitting the pixels, reduced by shuffles (no
/// shared memory, no barrier; each lane's loads are independent of each other).
template <typename T, typename O, bool kMax, int VEC, int TX>
__global__ void __launch_bounds__(kThreads)
    globalPoolNhwcWarpKernel(const T* __restrict__ x, O* __restrict__ y, int C, int64_t size,
                             int64_t images, float qScale, float qInv) {
  dev::dependentKernelStart();  // launched with launchAsDependent()
  constexpr int kGroups = 32 / TX;
  const int lane = threadIdx.x % 32;
  const int64_t vecs = C / VEC, warpsPerImage = (vecs + TX - 1) / TX;
  const int64_t warp = static_cast<int64_t>(blockIdx.x) * (kThreads / 32) + threadIdx.x / 32;
  const int64_t n = warp / warpsPerImage;
  if (n >= images) return;  // the whole warp: shuffles below need all its lanes
  const int64_t v = (warp % warpsPerImage) * TX + lane % TX;
  const int group = lane / TX;
  const bool valid = v < vecs;  // the same for every lane of a vector
  float acc[VEC];
#pragma unroll
  for (int k = 0; k < VEC; ++k) acc[k] = kMax ? -FLT_MAX : 0.f;
  if (valid) {
    const T* xp = x + n * size * C + v * VEC;
#pragma unroll 4
    for (int64_t i = group; i < size; i += kGroups) {
      float in[VEC];
      dev::loadN<T, VEC>(xp + i * C, in);
#pragma unroll
      for (int k = 0; k < VEC; ++k) acc[k] = kMax ? refMax(acc[k], in[k]) : acc[k] + in[k];
    }
  }
#pragma unroll
  for (int off = 16; off >= TX; off >>= 1)
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const float o = __shfl_xor_sync(0xffffffffu, acc[k], off);
      acc[k] = kMax ? refMax(acc[k], o) : acc[k] + o;
    }
  if (group != 0 || !valid) return;
  if constexpr (!kMax) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) acc[k] /= static_cast<float>(size);
  }
  O* yp = y + n * C + v * VEC;
  if constexpr (std::is_same_v<O, int8_t>) {
#pragma unroll
    for (int k = 0; k < VEC; ++k) yp[k] = globalOut<O>(acc[k], qScale, qInv);
  } else {
    dev::storeN<T, VEC>(yp, acc);
  }
}

/// VEC int8 channels as 32-bit words (VEC 16 or 4) or one byte (VEC 1).
template <int VEC>
struct I8Lanes {
  static constexpr int kWords = VEC >= 4 ? VEC / 4 : 1;
  uint32_t w[kWords];
  __device__ __forceinline__ void load(const int8_t* p) {
    if constexpr (VEC == 16) {
      const uint4 v = *reinterpret_cast<const uint4*>(p);
      w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
    } else if constexpr (VEC == 4) {
      w[0] = *reinterpret_cast<const uint32_t*>(p);
    } else {
      w[0] = static_cast<uint32_t>(static_cast<uint8_t>(*p));
    }
  }
  __device__ __forceinline__ void store(int8_t* p) const {
    if constexpr (VEC == 16)
      *reinterpret_cast<uint4*>(p) = make_uint4(w[0], w[1], w[2], w[3]);
    else if constexpr (VEC == 4)
      *reinterpret_cast<uint32_t*>(p) = w[0];
    else
      *p = static_cast<int8_t>(w[0] & 0xffu);
  }
  __device__ __forceinline__ void max(const I8Lanes& o) {
    if constexpr (VEC == 1) {
      const int a = static_cast<int8_t>(w[0] & 0xffu), b = static_cast<int8_t>(o.w[0] & 0xffu);
      w[0] = static_cast<uint32_t>(static_cast<uint8_t>(a < b ? b : a));
    } else {
#pragma unroll
      for (int k = 0; k < kWords; ++k) w[k] = __vmaxs4(w[k], o.w[k]);
    }
  }
  __device__ __forceinline__ int8_t byte(int e) const {
    return static_cast<int8_t>((w[e / 4] >> (8 * (e % 4))) & 0xffu);
  }
  __device__ __forceinline__ void setByte(int e, int8_t v) {
    const int s = 8 * (e % 4);
    w[e / 4] = (w[e / 4] & ~(0xffu << s)) | (static_cast<uint32_t>(static_cast<uint8_t>(v)) << s);
  }
};

/// KFIX: 0 for any window, or the side of a square window (3: ResNet's) whose taps are all
/// loaded before the first max, so that their loads are in flight together (in the walk of
/// forEachTap each load waits for the one before: at batch 1 nine round trips were the kernel).
template <int VEC, typename I, int KFIX>
__global__ void __launch_bounds__(kThreads)
    maxPoolInt8NhwcKernel(const int8_t* __restrict__ x, int8_t* __restrict__ y,
                          const WindowParams q, I total, float sIn, float sOut, float invOut,
                          bool requantize) {
  dev::dependentKernelStart();  // launched with launchAsDependent()
  const int cv = q.C / VEC;     // channel vectors per pixel
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I o = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; o < total; o += step) {
    const auto [n, oh, ow, c] = nhwcPosition<VEC>(o, cv, q);
    const int8_t* xp = x + n * static_cast<I>(q.H) * q.W * q.C + c;
    I8Lanes<VEC> acc;
    bool found = false;
    if constexpr (KFIX > 0) {
      const int hs = oh * q.sh - q.padTop, ws = ow * q.sw - q.padLeft;
      I8Lanes<VEC> v[KFIX * KFIX];
      bool inside[KFIX * KFIX];
#pragma unroll
      for (int i = 0; i < KFIX; ++i) {
        const int ih = hs + i * q.dh;
#pragma unroll
        for (int j = 0; j < KFIX; ++j) {
          const int iw = ws + j * q.dw, t = i * KFIX + j;
          inside[t] = ih >= 0 && ih < q.H && iw >= 0 && iw < q.W;
          if (inside[t]) v[t].load(xp + (static_cast<I>(ih) * q.W + iw) * q.C);
        }
      }
#pragma unroll
      for (int t = 0; t < KFIX * KFIX; ++t) {
        if (!inside[t]) continue;
        if (found)
          acc.max(v[t]);
        else
          acc = v[t];
        found = true;
      }
    } else {
      forEachTap(q, oh, ow, [&](int ih, int iw) {
        I8Lanes<VEC> v;
        v.load(xp + (static_cast<I>(ih) * q.W + iw) * q.C);
        if (found)
          acc.max(v);
        else
          acc = v;
        found = true;
      });
    }
    if (!found) {
#pragma unroll
      for (int k = 0; k < I8Lanes<VEC>::kWords; ++k) acc.w[k] = VEC == 1 ? 0x80u : 0x80808080u;
    } else if (requantize) {
#pragma unroll
      for (int e = 0; e < VEC; ++e)
        acc.setByte(
            e, dev::quantizeToInt8(__fmul_rn(static_cast<float>(acc.byte(e)), sIn), sOut, invOut));
    }
    acc.store(y + ((n * q.OH + oh) * static_cast<I>(q.OW) + ow) * q.C + c);
  }
}

/// ResNet's MaxPool (3x3, stride 2, no dilation) at large launches: a thread takes a 2 x 2
/// block of outputs, whose windows span 5 x 5 input pixels, and loads each of them once (25
/// loads for 4 outputs instead of 36): a row's five pixels give the maxima of the left and the
/// right window's columns, which go to the top outputs for rows 0-2 and the bottom ones for rows
/// 2-4. Taps outside the input are skipped, as in the general walk.
template <int VEC, typename I>
__global__ void __launch_bounds__(kThreads)
    maxPoolInt8Nhwc3x3s2Quads(const int8_t* __restrict__ x, int8_t* __restrict__ y,
                              const WindowParams q, I total, float sIn, float sOut, float invOut,
                              bool requantize) {
  dev::dependentKernelStart();  // launched with launchAsDependent()
  const int cv = q.C / VEC;     // channel vectors per pixel
  WindowParams quads = q;       // the grid of 2 x 2 output blocks
  quads.OH = (q.OH + 1) / 2;
  quads.OW = (q.OW + 1) / 2;
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I o = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; o < total; o += step) {
    const auto [n, qh, qw, c] = nhwcPosition<VEC>(o, cv, quads);
    const int oh0 = 2 * qh, ow0 = 2 * qw;
    const int hs = 2 * oh0 - q.padTop, ws = 2 * ow0 - q.padLeft;
    const int8_t* xp = x + n * static_cast<I>(q.H) * q.W * q.C + c;
    I8Lanes<VEC> acc[4];  // (top, bottom) x (left, right)
    bool found[4] = {false, false, false, false};
    const auto merge = [](I8Lanes<VEC>& into, bool& has, const I8Lanes<VEC>& v) {
      if (has)
        into.max(v);
      else
        into = v;
      has = true;
    };
#pragma unroll
    for (int i = 0; i < 5; ++i) {
      const int ih = hs + i;
      if (ih < 0 || ih >= q.H) continue;
      I8Lanes<VEC> v[5];
      bool in[5];
#pragma unroll
      for (int j = 0; j < 5; ++j) {
        const int iw = ws + j;
        in[j] = iw >= 0 && iw < q.W;
        if (in[j]) v[j].load(xp + (static_cast<I>(ih) * q.W + iw) * q.C);
      }
      I8Lanes<VEC> side[2];
      bool has[2] = {false, false};
#pragma unroll
      for (int j = 0; j < 5; ++j) {
        if (!in[j]) continue;
        if (j <= 2) merge(side[0], has[0], v[j]);
        if (j >= 2) merge(side[1], has[1], v[j]);
      }
#pragma unroll
      for (int b = 0; b < 2; ++b) {
        if (!has[b]) continue;
        if (i <= 2) merge(acc[b], found[b], side[b]);
        if (i >= 2) merge(acc[2 + b], found[2 + b], side[b]);
      }
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int oh = oh0 + k / 2, ow = ow0 + k % 2;
      if (oh >= q.OH || ow >= q.OW) continue;
      if (!found[k]) {
#pragma unroll
        for (int w = 0; w < I8Lanes<VEC>::kWords; ++w) acc[k].w[w] = VEC == 1 ? 0x80u : 0x80808080u;
      } else if (requantize) {
#pragma unroll
        for (int e = 0; e < VEC; ++e)
          acc[k].setByte(e, dev::quantizeToInt8(__fmul_rn(static_cast<float>(acc[k].byte(e)), sIn),
                                                sOut, invOut));
      }
      acc[k].store(y + ((n * q.OH + oh) * static_cast<I>(q.OW) + ow) * q.C + c);
    }
  }
}

WindowParams windowParams(const PoolPlan& p) {
  WindowParams q{};
  q.C = static_cast<int>(p.C);
  q.H = static_cast<int>(p.H);
  q.W = static_cast<int>(p.W);
  q.OH = static_cast<int>(p.OH);
  q.OW = static_cast<int>(p.OW);
  q.kh = static_cast<int>(p.kh);
  q.kw = static_cast<int>(p.kw);
  q.sh = static_cast<int>(p.sh);
  q.sw = static_cast<int>(p.sw);
  q.dh = static_cast<int>(p.dh);
  q.dw = static_cast<int>(p.dw);
  q.padTop = static_cast<int>(p.padTop);
  q.padLeft = static_cast<int>(p.padLeft);
  q.padBottom = static_cast<int>(p.padBottom);
  q.padRight = static_cast<int>(p.padRight);
  q.countIncludePad = p.countIncludePad;
  q.lpP = static_cast<int>(p.lpP);
  return q;
}

template <typename T, int kMode>
Status launchWindow(const PoolPlan& p, const void* in, void* out, int maxBlocks,
                    cudaStream_t stream) {
  const WindowParams q = windowParams(p);
  const T* x = static_cast<const T*>(in);
  T* y = static_cast<T*>(out);
  const bool small = p.N * p.C * p.H * p.W < INT_MAX && p.N * p.C * p.OH * p.OW < INT_MAX;
  if (!p.nhwc) {
    const int64_t total = p.N * p.C * p.OH * p.OW;
    const int grid = dev::gridFor(total, kThreads, maxBlocks);
    if (small)
      poolNchwKernel<T, kMode, uint32_t>
          <<<grid, kThreads, 0, stream>>>(x, y, q, static_cast<uint32_t>(total));
    else
      poolNchwKernel<T, kMode, int64_t><<<grid, kThreads, 0, stream>>>(x, y, q, total);
  } else {
    constexpr int V = dev::kVec16<T>;
    const bool vec = p.C % V == 0 && dev::aligned16(in) && dev::aligned16(out);
    const int64_t total = p.N * p.OH * p.OW * (vec ? p.C / V : p.C);
    const int grid = dev::gridFor(total, kThreads, maxBlocks);
    if (vec && small)
      poolNhwcKernel<T, kMode, V, uint32_t>
          <<<grid, kThreads, 0, stream>>>(x, y, q, static_cast<uint32_t>(total));
    else if (vec)
      poolNhwcKernel<T, kMode, V, int64_t><<<grid, kThreads, 0, stream>>>(x, y, q, total);
    else if (small)
      poolNhwcKernel<T, kMode, 1, uint32_t>
          <<<grid, kThreads, 0, stream>>>(x, y, q, static_cast<uint32_t>(total));
    else
      poolNhwcKernel<T, kMode, 1, int64_t><<<grid, kThreads, 0, stream>>>(x, y, q, total);
  }
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

/// O: T, or int8 quantized with qScale (qInv = 1 / qScale).
template <typename T, typename O, bool kMax>
Status launchGlobal(const PoolPlan& p, const void* in, void* out, int maxBlocks,
                    cudaStream_t stream, float qScale = 0.f, float qInv = 0.f) {
  constexpr int V = dev::kVec16<T>;
  const T* x = static_cast<const T*>(in);
  O* y = static_cast<O*>(out);
  const int64_t size = p.H * p.W;
  if (!p.nhwc) {
    const int64_t planes = p.N * p.C;
    const bool vec = size % V == 0 && dev::aligned16(in);
    if (size >= 2048) {  // a block per plane
      const int grid = dev::gridFor(planes, 1, maxBlocks);
      if (vec)
        globalPoolNchwKernel<T, O, kMax, V, kThreads>
            <<<grid, kThreads, 0, stream>>>(x, y, planes, size, qScale, qInv);
      else
        globalPoolNchwKernel<T, O, kMax, 1, kThreads>
            <<<grid, kThreads, 0, stream>>>(x, y, planes, size, qScale, qInv);
    } else {  // a warp per plane
      const int grid = dev::gridFor(planes, kThreads / 32, maxBlocks);
      if (vec)
        globalPoolNchwKernel<T, O, kMax, V, 32>
            <<<grid, kThreads, 0, stream>>>(x, y, planes, size, qScale, qInv);
      else
        globalPoolNchwKernel<T, O, kMax, 1, 32>
            <<<grid, kThreads, 0, stream>>>(x, y, planes, size, qScale, qInv);
    }
  } else {
    const bool vec = p.C % V == 0 && dev::aligned16(in) && dev::aligned16(out);
    const int64_t vecs = vec ? p.C / V : p.C;
    if (size <= kWarpPoolMaxPixels && vecs * p.N <= kWarpPoolMaxWarps) {
      const int64_t warps = vecs * p.N;
      const int grid = static_cast<int>((warps + kThreads / 32 - 1) / (kThreads / 32));
      const auto kernel = vec ? globalPoolNhwcWarpKernel<T, O, kMax, V, 1>
                              : globalPoolNhwcWarpKernel<T, O, kMax, 1, 1>;
      // A programmatic dependent: at batch 1 (a classifier's 7 x 7 planes) the launch and the
      // blocks' start are a good part of the kernel's time.
      EI_CUDA_CHECK(launchAsDependent(kernel, dim3(static_cast<unsigned>(grid)), dim3(kThreads), 0,
                                      stream, x, y, static_cast<int>(p.C), size, p.N, qScale,
                                      qInv));
      return Status::Ok();
    }
    int tx = 1;
    while (tx < 32 && tx < vecs) tx *= 2;
    // Narrower blocks (more of them, more rows each) until there are about two a
    // multiprocessor: at batch 1, 2048 fp16 channels made 8 blocks of 32 columns.
    const int64_t wanted = std::max(1, maxBlocks / 8);
    while (tx > 1 && (vecs + tx - 1) / tx * p.N < wanted) tx /= 2;
    // Rows: the rest of the block, but no more than the pixels rounded up to a power of two
    // (at batch 1, ResNet's 7 x 7 pixels had 256 rows, 207 of them idle through all eight
    // steps of the pairwise reduction).
    int ty = 1;
    while (ty < size && tx * ty < kThreads) ty *= 2;
    const dim3 block(tx, ty);
    const dim3 grid(static_cast<unsigned>((vecs + tx - 1) / tx), static_cast<unsigned>(p.N));
    if (vec)
      globalPoolNhwcKernel<T, O, kMax, V>
          <<<grid, block, 0, stream>>>(x, y, static_cast<int>(p.C), size, qScale, qInv);
    else
      globalPoolNhwcKernel<T, O, kMax, 1>
          <<<grid, block, 0, stream>>>(x, y, static_cast<int>(p.C), size, qScale, qInv);
  }
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

template <typename T>
Status launchKind(const PoolPlan& p, const void* in, void* out, int maxBlocks,
                  cudaStream_t stream) {
  switch (p.kind) {
    case PoolKind::kMax:
      return launchWindow<T, kModeMax>(p, in, out, maxBlocks, stream);
    case PoolKind::kAverage:
      return launchWindow<T, kModeAverage>(p, in, out, maxBlocks, stream);
    case PoolKind::kLp:
      return launchWindow<T, kModeLp>(p, in, out, maxBlocks, stream);
    case PoolKind::kGlobalMax:
      return launchGlobal<T, T, true>(p, in, out, maxBlocks, stream);
    case PoolKind::kGlobalAverage:
      return launchGlobal<T, T, false>(p, in, out, maxBlocks, stream);
  }
  return Status(ErrorCode::kInternal, "unknown pooling kind");
}

template <int VEC>
cudaError_t launchMaxPoolInt8Vec(const PoolPlan& p, float sIn, float sOut, const int8_t* x,
                                 int8_t* y, int maxBlocks, cudaStream_t stream) {
  const WindowParams q = windowParams(p);
  const int64_t total = p.N * p.OH * p.OW * (p.C / VEC);
  const int grid = dev::gridFor(total, kThreads, maxBlocks);
  const bool requantize = sIn != sOut;
  const float inv = 1.f / sOut;  // quantizeToInt8's __frcp_rn(scale): IEEE division, rounded
  // The 3x3 form where a launch is latency-bound (ResNet-50 at batch 1: 12,544 threads, 3.9 ->
  // 2.6 us on an H200); at batch 64 (802,816 threads) its registers cost more than it saves,
  // and a 3x3 window of stride 2 takes the 2 x 2 output blocks there instead.
  const bool three = p.kh == 3 && p.kw == 3 && total <= 65536;
  const bool quads =
      !three && p.kh == 3 && p.kw == 3 && p.sh == 2 && p.sw == 2 && p.dh == 1 && p.dw == 1;
  const bool narrow = p.N * p.C * p.H * p.W < INT_MAX && p.N * p.C * p.OH * p.OW < INT_MAX;
  if (quads) {
    const int64_t blocks = p.N * ((p.OH + 1) / 2) * ((p.OW + 1) / 2) * (p.C / VEC);
    const int g = dev::gridFor(blocks, kThreads, maxBlocks);
    if (narrow)
      return launchAsDependent(maxPoolInt8Nhwc3x3s2Quads<VEC, uint32_t>,
                               dim3(static_cast<unsigned>(g)), dim3(kThreads), 0, stream, x, y, q,
                               static_cast<uint32_t>(blocks), sIn, sOut, inv, requantize);
    return launchAsDependent(maxPoolInt8Nhwc3x3s2Quads<VEC, int64_t>,
                             dim3(static_cast<unsigned>(g)), dim3(kThreads), 0, stream, x, y, q,
                             blocks, sIn, sOut, inv, requantize);
  }
  if (narrow) {
    const auto kernel =
        three ? maxPoolInt8NhwcKernel<VEC, uint32_t, 3> : maxPoolInt8NhwcKernel<VEC, uint32_t, 0>;
    return launchAsDependent(kernel, dim3(static_cast<unsigned>(grid)), dim3(kThreads), 0, stream,
                             x, y, q, static_cast<uint32_t>(total), sIn, sOut, inv, requantize);
  } else {
    const auto kernel =
        three ? maxPoolInt8NhwcKernel<VEC, int64_t, 3> : maxPoolInt8NhwcKernel<VEC, int64_t, 0>;
    return launchAsDependent(kernel, dim3(static_cast<unsigned>(grid)), dim3(kThreads), 0, stream,
                             x, y, q, total, sIn, sOut, inv, requantize);
  }
}

}  // namespace

Status launchMaxPoolInt8(const PoolPlan& plan, float sIn, float sOut, const void* input,
                         void* output, int maxBlocks, void* stream) {
  if (plan.kind != PoolKind::kMax || !plan.nhwc)
    return Status(ErrorCode::kInvalidArgument, "int8 pooling: MaxPool in NHWC only");
  if (!(sIn > 0.f) || !(sOut > 0.f) || !std::isfinite(sIn) || !std::isfinite(sOut))
    return Status(ErrorCode::kInvalidArgument, "int8 pooling: the scales must be positive");
  if (plan.N * plan.C * plan.OH * plan.OW == 0) return Status::Ok();
  auto s = static_cast<cudaStream_t>(stream);
  const auto* x = static_cast<const int8_t*>(input);
  auto* y = static_cast<int8_t*>(output);
  const bool a16 = dev::aligned16(input) && dev::aligned16(output);
  if (plan.C % 16 == 0 && a16)
    EI_CUDA_CHECK(launchMaxPoolInt8Vec<16>(plan, sIn, sOut, x, y, maxBlocks, s));
  else if (plan.C % 4 == 0 && reinterpret_cast<uintptr_t>(input) % 4 == 0 &&
           reinterpret_cast<uintptr_t>(output) % 4 == 0)
    EI_CUDA_CHECK(launchMaxPoolInt8Vec<4>(plan, sIn, sOut, x, y, maxBlocks, s));
  else
    EI_CUDA_CHECK(launchMaxPoolInt8Vec<1>(plan, sIn, sOut, x, y, maxBlocks, s));
  return Status::Ok();
}

Status launchGlobalPoolInt8Out(const PoolPlan& plan, bool fp16, float sOut, const void* input,
                               void* output, int maxBlocks, void* stream) {
  if (plan.kind != PoolKind::kGlobalAverage && plan.kind != PoolKind::kGlobalMax)
    return Status(ErrorCode::kInvalidArgument,
                  "int8-output pooling: GlobalAveragePool and GlobalMaxPool only");
  if (!(sOut > 0.f) || !std::isfinite(sOut))
    return Status(ErrorCode::kInvalidArgument, "int8-output pooling: the scale must be positive");
  if (plan.N * plan.C == 0) return Status::Ok();
  auto s = static_cast<cudaStream_t>(stream);
  // The reciprocal as quantizeToInt8 takes it: __frcp_rn, the IEEE-rounded 1 / sOut.
  const float inv = 1.f / sOut;
  const bool mx = plan.kind == PoolKind::kGlobalMax;
  if (fp16)
    return mx ? launchGlobal<__half, int8_t, true>(plan, input, output, maxBlocks, s, sOut, inv)
              : launchGlobal<__half, int8_t, false>(plan, input, output, maxBlocks, s, sOut, inv);
  return mx ? launchGlobal<float, int8_t, true>(plan, input, output, maxBlocks, s, sOut, inv)
            : launchGlobal<float, int8_t, false>(plan, input, output, maxBlocks, s, sOut, inv);
}

Status launchPool(const PoolPlan& plan, bool fp16, const void* input, void* output, int maxBlocks,
                  void* stream) {
  if (plan.N * plan.C * plan.OH * plan.OW == 0) return Status::Ok();
  auto s = static_cast<cudaStream_t>(stream);
  return fp16 ? launchKind<__half>(plan, input, output, maxBlocks, s)
              : launchKind<float>(plan, input, output, maxBlocks, s);
}

}  // namespace edgeinfer::cuda
