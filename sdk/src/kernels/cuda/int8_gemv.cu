// The cuda-i8.gemv kernel (int8_gemv.h): a block per 8 output channels of one row; the row is
// quantized (or copied) into shared memory once, then each warp takes one output channel: 16
// bytes of weights a lane a step (a 512-byte stretch of the row a warp a step), dp4a against
// the row, a warp reduction, and the epilogue in the output's format.
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

  const int lane = static_cast<int>(threadIdx.x) & 31;
  const int n = static_cast<int>(blockIdx.x) * kWarps + (static_cast<int>(threadIdx.x) >> 5);
  if (n >= p.N) return;
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
  if (lane != 0) return;
  // cublaslt-i8's "i32" epilogue, expression by expression (no FMA contraction).
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

template <GemvType X>
void* kernelFor(GemvType y) {
  switch (y) {
    case GemvType::kInt8:
      return reinterpret_cast<void*>(&i8Gemv<X, GemvType::kInt8>);
    case GemvType::kFloat16:
      return reinterpret_cast<void*>(&i8Gemv<X, GemvType::kFloat16>);
    default:
      return reinterpret_cast<void*>(&i8Gemv<X, GemvType::kFloat32>);
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
  if (p.M < 1 || p.M > kInt8GemvMaxRows || p.N < 1 || p.K < 16 || p.K % 16 != 0 ||
      p.K > kInt8GemvMaxK)
    return Status(ErrorCode::kInvalidArgument,
                  "int8 gemv: M must be 1 to " + std::to_string(kInt8GemvMaxRows) +
                      ", K a multiple of 16 up to " + std::to_string(kInt8GemvMaxK) +
                      " and N at least 1 (M " + std::to_string(p.M) + ", K " + std::to_string(p.K) +
                      ", N " + std::to_string(p.N) + ")");
  if ((p.x != GemvType::kInt8 && !positive(p.xScale)) ||
      (p.y == GemvType::kInt8 && !positive(p.yScale)))
    return Status(ErrorCode::kInvalidArgument,
                  "int8 gemv: a float input or an int8 output needs a scale above zero");
  if (!x || !w || !alpha || !bias || !y)
    return Status(ErrorCode::kInvalidArgument, "int8 gemv: missing pointer");
  if (!aligned(x, 16) || !aligned(w, 16) || !aligned(alpha, 4) || !aligned(bias, 4) ||
      !aligned(y, elementBytes(p.y)))
    return Status(ErrorCode::kInvalidArgument, "int8 gemv: misaligned pointer");
  void* kernel = p.x == GemvType::kInt8      ? kernelFor<GemvType::kInt8>(p.y)
                 : p.x == GemvType::kFloat16 ? kernelFor<GemvType::kFloat16>(p.y)
                                             : kernelFor<GemvType::kFloat32>(p.y);
  const dim3 grid(static_cast<unsigned>((p.N + kWarps - 1) / kWarps), static_cast<unsigned>(p.M));
  const size_t smem = static_cast<size_t>(p.K);  // at most 16 KiB: no opt-in needed
  void* args[] = {const_cast<Int8GemvPlan*>(&p), const_cast<void**>(&x),
                  const_cast<int8_t**>(&w),      const_cast<float**>(&alpha),
                  const_cast<float**>(&bias),    &y};
  // A programmatic dependent: at batch 1 a classifier's launch and start are most of its time.
  EI_CUDA_CHECK(launchAsDependent(kernel, grid, dim3(kWarps * 32), smem,
                                  static_cast<cudaStream_t>(stream), args));
  return Status::Ok();
}

}  // namespace edgeinfer::cuda
