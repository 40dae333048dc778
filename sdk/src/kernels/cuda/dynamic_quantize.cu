// DynamicQuantizeLinear (dynamic_quantize.h): per-block ranges, one block that reduces them to
// the scale and zero point, then a grid-stride quantization that reads them from the device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dynamic_quantize.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxRangeBlocks = 1024;

/// Workspace layout: [lo, hi] per block, then the scale and the zero point (as a float).
struct Scratch {
  float ranges[2 * kMaxRangeBlocks];
  float scale;
  float zeroPoint;
};

/// The range of the block's values, both bounds starting at 0 (the range always holds 0);
/// fminf / fmaxf leave NaNs out.
__device__ void blockRange(float lo, float hi, float* outLo, float* outHi) {
  __shared__ float sLo[kThreads], sHi[kThreads];
  sLo[threadIdx.x] = lo;
  sHi[threadIdx.x] = hi;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s /= 2) {
    if (static_cast<int>(threadIdx.x) < s) {
      sLo[threadIdx.x] = fminf(sLo[threadIdx.x], sLo[threadIdx.x + s]);
      sHi[threadIdx.x] = fmaxf(sHi[threadIdx.x], sHi[threadIdx.x + s]);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    *outLo = sLo[0];
    *outHi = sHi[0];
  }
}

__global__ void __launch_bounds__(kThreads)
    rangeKernel(const float* __restrict__ x, long long n, Scratch* __restrict__ w) {
  float lo = 0.f, hi = 0.f;
  const long long step = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += step) {
    lo = fminf(lo, x[i]);
    hi = fmaxf(hi, x[i]);
  }
  blockRange(lo, hi, &w->ranges[2 * blockIdx.x], &w->ranges[2 * blockIdx.x + 1]);
}

__global__ void __launch_bounds__(kThreads)
    paramsKernel(int blocks, Scratch* __restrict__ w, float* __restrict__ yScale,
                 uint8_t* __restrict__ yZeroPoint) {
  float lo = 0.f, hi = 0.f;
  for (int b = static_cast<int>(threadIdx.x); b < blocks; b += kThreads) {
    lo = fminf(lo, w->ranges[2 * b]);
    hi = fmaxf(hi, w->ranges[2 * b + 1]);
  }
  __shared__ float rLo, rHi;
  blockRange(lo, hi, &rLo, &rHi);
  __syncthreads();
  if (threadIdx.x != 0) return;
  const float scale = __fdiv_rn(__fsub_rn(rHi, rLo), 255.f);
  const float zp =
      scale == 0.f ? 0.f : fminf(fmaxf(rintf(__fdiv_rn(__fsub_rn(0.f, rLo), scale)), 0.f), 255.f);
  w->scale = scale;
  w->zeroPoint = zp;
  if (yScale) *yScale = scale;
  if (yZeroPoint) *yZeroPoint = static_cast<uint8_t>(zp);
}

__global__ void __launch_bounds__(kThreads)
    quantizeKernel(const float* __restrict__ x, long long n, const Scratch* __restrict__ w,
                   uint8_t* __restrict__ y) {
  const float scale = w->scale, zp = w->zeroPoint;
  const long long step = static_cast<long long>(gridDim.x) * kThreads;
  for (long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += step) {
    const float v = scale == 0.f ? 0.f : __fadd_rn(rintf(__fdiv_rn(x[i], scale)), zp);
    y[i] = isnan(v) ? static_cast<uint8_t>(zp) : static_cast<uint8_t>(fminf(fmaxf(v, 0.f), 255.f));
  }
}

}  // namespace

size_t dynamicQuantizeWorkspaceBytes() {
  return sizeof(Scratch);
}

Status launchDynamicQuantize(const float* x, int64_t n, uint8_t* y, float* yScale,
                             uint8_t* yZeroPoint, void* workspace, size_t workspaceBytes,
                             int maxBlocks, void* stream) {
  if (!workspace || workspaceBytes < sizeof(Scratch))
    return Status(ErrorCode::kInvalidArgument, "DynamicQuantizeLinear: workspace too small");
  if (n < 0) return Status(ErrorCode::kInvalidArgument, "DynamicQuantizeLinear: bad size");
  const auto s = static_cast<cudaStream_t>(stream);
  auto* w = static_cast<Scratch*>(workspace);
  const int64_t wanted = std::max<int64_t>(1, (n + kThreads - 1) / kThreads);
  const int blocks = static_cast<int>(
      std::min<int64_t>(wanted, std::min(kMaxRangeBlocks, std::max(1, maxBlocks))));
  rangeKernel<<<blocks, kThreads, 0, s>>>(x, n, w);
  paramsKernel<<<1, kThreads, 0, s>>>(blocks, w, yScale, yZeroPoint);
  if (n > 0) quantizeKernel<<<blocks, kThreads, 0, s>>>(x, n, w, y);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace edgeinfer::cuda
