// MatMulInteger (integer_matmul.h): a thread per output element, the K products summed in
// unsigned 32-bit arithmetic (the int32 wrap-around of the reference's int64 sum narrowed to
// int32 is the same), operands read as int8 or uint8 by template.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/integer_matmul.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kThreads = 256;

template <typename TA, typename TB>
__global__ void __launch_bounds__(kThreads)
    intMatMulKernel(const TA* __restrict__ a, const TB* __restrict__ b, int32_t* __restrict__ y,
                    const IntMatMulPlan p) {
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
    const int32_t za = p.aZp ? p.aZp[p.aZpPerRow ? m : 0] : 0;
    const int32_t zb = p.bZp ? p.bZp[p.bZpPerCol ? n : 0] : 0;
    uint32_t acc = 0;
    for (int64_t k = 0; k < p.K; ++k)
      acc += static_cast<uint32_t>((static_cast<int32_t>(ar[k]) - za) *
                                   (static_cast<int32_t>(bc[k * p.N]) - zb));
    y[i] = static_cast<int32_t>(acc);
  }
}

template <typename TA, typename TB>
void launchT(const IntMatMulPlan& p, const void* a, const void* b, int32_t* y, int grid,
             cudaStream_t s) {
  intMatMulKernel<TA, TB>
      <<<grid, kThreads, 0, s>>>(static_cast<const TA*>(a), static_cast<const TB*>(b), y, p);
}

}  // namespace

Status launchIntMatMul(const IntMatMulPlan& plan, const void* a, const void* b, int32_t* y,
                       int maxBlocks, void* stream) {
  const int64_t total = plan.batches * plan.M * plan.N;
  if (total == 0) return Status::Ok();
  if (plan.batchRank < 0 || plan.batchRank > IntMatMulPlan::kMaxBatchDims)
    return Status(ErrorCode::kInvalidArgument, "MatMulInteger: bad plan");
  const auto s = static_cast<cudaStream_t>(stream);
  const int grid = static_cast<int>(
      std::min<int64_t>((total + kThreads - 1) / kThreads, std::max(1, maxBlocks)));
  if (plan.aSigned && plan.bSigned)
    launchT<int8_t, int8_t>(plan, a, b, y, grid, s);
  else if (plan.aSigned)
    launchT<int8_t, uint8_t>(plan, a, b, y, grid, s);
  else if (plan.bSigned)
    launchT<uint8_t, int8_t>(plan, a, b, y, grid, s);
  else
    launchT<uint8_t, uint8_t>(plan, a, b, y, grid, s);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace edgeinfer::cuda
