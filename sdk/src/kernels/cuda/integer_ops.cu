// MatMulInteger and ConvInteger (integer_ops.h): a thread per output element, the products
// summed in unsigned 32-bit arithmetic (the int32 wrap-around of the reference's int64 sum
// narrowed to int32 is the same), operands read as int8 or uint8 by template.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/integer_ops.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kThreads = 256;

template <typename TA, typename TB>
__global__ void __launch_bounds__(kThreads)
    intMatMulKernel(const TA* __restrict__ a, const TB* __restrict__ b, const TA* __restrict__ aZp,
                    const TB* __restrict__ bZp, int32_t* __restrict__ y, const IntMatMulPlan p) {
  const int64_t total = p.batches * p.M * p.N;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += step) {
    const int64_t n = i % p.N, m = (i / p.N) % p.M;
    int64_t t = i / (p.N * p.M), ma = 0, mb = 0;
    for (int d = p.batchRank - 1; d >= 0; --d) {
      const int64_t c = t % p.batchDims[d];
      t /= p.batchDims[d];
      ma += c * p.aBatchStride[d];
      mb += c * p.bBatchStride[d];
    }
    const TA* ar = a + (ma * p.M + m) * p.K;
    const TB* bc = b + mb * p.K * p.N + n;
    const int32_t za = aZp ? static_cast<int32_t>(aZp[p.aZpPerRow ? m : 0]) : 0;
    const int32_t zb = bZp ? static_cast<int32_t>(bZp[p.bZpPerCol ? n : 0]) : 0;
    uint32_t acc = 0;
    for (int64_t k = 0; k < p.K; ++k)
      acc += static_cast<uint32_t>((static_cast<int32_t>(ar[k]) - za) *
                                   (static_cast<int32_t>(bc[k * p.N]) - zb));
    y[i] = static_cast<int32_t>(acc);
  }
}

template <typename TX, typename TW>
__global__ void __launch_bounds__(kThreads)
    intConvKernel(const TX* __restrict__ x, const TW* __restrict__ w, const TX* __restrict__ xZp,
                  const TW* __restrict__ wZp, int32_t* __restrict__ y, const IntConvPlan p) {
  const int32_t xz = xZp ? static_cast<int32_t>(*xZp) : 0;
  const int64_t outSize = p.out[0] * p.out[1] * p.out[2];
  const int64_t inSize = p.in[0] * p.in[1] * p.in[2];
  const int64_t kSize = p.kernel[0] * p.kernel[1] * p.kernel[2];
  const int64_t cPerGroup = p.C / p.group, mPerGroup = p.M / p.group;
  const int64_t total = p.N * p.M * outSize;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < total;
       i += step) {
    const int64_t o = i % outSize, m = (i / outSize) % p.M, n = i / (outSize * p.M);
    const int64_t o2 = o % p.out[2], o1 = (o / p.out[2]) % p.out[1], o0 = o / (p.out[2] * p.out[1]);
    const int64_t b0 = o0 * p.stride[0] - p.padBegin[0], b1 = o1 * p.stride[1] - p.padBegin[1],
                  b2 = o2 * p.stride[2] - p.padBegin[2];
    const int64_t g = m / mPerGroup;
    const int32_t wz = wZp ? static_cast<int32_t>(wZp[p.wZpPerChannel ? m : 0]) : 0;
    const TX* xg = x + (n * p.C + g * cPerGroup) * inSize;
    const TW* wm = w + m * cPerGroup * kSize;
    uint32_t acc = 0;
    for (int64_t c = 0; c < cPerGroup; ++c) {
      const TX* xc = xg + c * inSize;
      const TW* wc = wm + c * kSize;
      for (int64_t k0 = 0; k0 < p.kernel[0]; ++k0) {
        const int64_t i0 = b0 + k0 * p.dilation[0];
        if (i0 < 0 || i0 >= p.in[0]) continue;
        for (int64_t k1 = 0; k1 < p.kernel[1]; ++k1) {
          const int64_t i1 = b1 + k1 * p.dilation[1];
          if (i1 < 0 || i1 >= p.in[1]) continue;
          for (int64_t k2 = 0; k2 < p.kernel[2]; ++k2) {
            const int64_t i2 = b2 + k2 * p.dilation[2];
            if (i2 < 0 || i2 >= p.in[2]) continue;
            const int32_t xv = static_cast<int32_t>(xc[(i0 * p.in[1] + i1) * p.in[2] + i2]) - xz;
            const int32_t wv =
                static_cast<int32_t>(wc[(k0 * p.kernel[1] + k1) * p.kernel[2] + k2]) - wz;
            acc += static_cast<uint32_t>(xv * wv);
          }
        }
      }
    }
    y[i] = static_cast<int32_t>(acc);
  }
}

int gridFor(int64_t total, int maxBlocks) {
  return static_cast<int>(
      std::min<int64_t>((total + kThreads - 1) / kThreads, std::max(1, maxBlocks)));
}

/// Calls launch(TA{}, TB{}) with the int8 / uint8 types of the two operands.
template <typename Launch>
void bySignedness(bool aSigned, bool bSigned, Launch&& launch) {
  if (aSigned && bSigned)
    launch(int8_t{}, int8_t{});
  else if (aSigned)
    launch(int8_t{}, uint8_t{});
  else if (bSigned)
    launch(uint8_t{}, int8_t{});
  else
    launch(uint8_t{}, uint8_t{});
}

}  // namespace

Status launchIntMatMul(const IntMatMulPlan& plan, const void* a, const void* b, const void* aZp,
                       const void* bZp, int32_t* y, int maxBlocks, void* stream) {
  const int64_t total = plan.batches * plan.M * plan.N;
  if (total == 0) return Status::Ok();
  if (plan.batchRank < 0 || plan.batchRank > IntMatMulPlan::kMaxBatchDims)
    return Status(ErrorCode::kInvalidArgument, "MatMulInteger: bad plan");
  const auto s = static_cast<cudaStream_t>(stream);
  const int grid = gridFor(total, maxBlocks);
  bySignedness(plan.aSigned, plan.bSigned, [&](auto ta, auto tb) {
    using TA = decltype(ta);
    using TB = decltype(tb);
    intMatMulKernel<TA, TB><<<grid, kThreads, 0, s>>>(
        static_cast<const TA*>(a), static_cast<const TB*>(b), static_cast<const TA*>(aZp),
        static_cast<const TB*>(bZp), y, plan);
  });
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

Status launchIntConv(const IntConvPlan& plan, const void* x, const void* w, const void* xZp,
                     const void* wZp, int32_t* y, int maxBlocks, void* stream) {
  if (plan.spatial < 1 || plan.spatial > IntConvPlan::kMaxSpatial || plan.group < 1 ||
      plan.C % plan.group != 0 || plan.M % plan.group != 0)
    return Status(ErrorCode::kInvalidArgument, "ConvInteger: bad plan");
  const int64_t total = plan.N * plan.M * plan.out[0] * plan.out[1] * plan.out[2];
  if (total == 0) return Status::Ok();
  const auto s = static_cast<cudaStream_t>(stream);
  const int grid = gridFor(total, maxBlocks);
  bySignedness(plan.xSigned, plan.wSigned, [&](auto tx, auto tw) {
    using TX = decltype(tx);
    using TW = decltype(tw);
    intConvKernel<TX, TW><<<grid, kThreads, 0, s>>>(
        static_cast<const TX*>(x), static_cast<const TW*>(w), static_cast<const TX*>(xZp),
        static_cast<const TW*>(wZp), y, plan);
  });
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace edgeinfer::cuda
