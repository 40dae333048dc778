// ScatterElements / ScatterND kernels of the `cuda` tactic family (scatter.h): the data is
// copied to the output, the workspace set to -1, then two passes over the updates (a thread
// per update element): the first keeps the highest update number per destination
// (atomicMax), the second writes the updates that won.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_half.h"
#include "kernels/cuda/scatter.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kThreads = 256;

template <typename I>
__device__ __forceinline__ bool wrap(I v, int64_t dim, int64_t* out) {
  const int64_t i = static_cast<int64_t>(v);
  if (i < -dim || i >= dim) return false;
  *out = i < 0 ? i + dim : i;
  return true;
}

/// Destination element and update number of update element t; false when its index is out
/// of range.
template <typename I>
__device__ __forceinline__ bool destination(const ScatterPlan& p, const I* __restrict__ idx,
                                            int64_t t, int64_t* dst, int* number) {
  if (p.nd) {
    const int64_t n = t / p.slice;
    int64_t off = 0;
    for (int j = 0; j < p.m; ++j) {
      int64_t k = 0;
      if (!wrap(idx[n * p.m + j], p.dataDims[j], &k)) return false;
      off += k * p.dataStrides[j];
    }
    *dst = off + (t - n * p.slice);
    *number = static_cast<int>(n);
    return true;
  }
  int64_t rem = t, off = 0;
  for (int d = p.rank - 1; d >= 0; --d) {
    int64_t c = rem % p.idxDims[d];
    rem /= p.idxDims[d];
    if (d == p.axis && !wrap(idx[t], p.dataDims[d], &c)) return false;
    off += c * p.dataStrides[d];
  }
  *dst = off;
  *number = static_cast<int>(t);
  return true;
}

template <typename I>
__global__ void __launch_bounds__(kThreads)
    markKernel(ScatterPlan p, const I* __restrict__ idx, int* __restrict__ winner, int64_t total) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * kThreads) {
    int64_t dst = 0;
    int number = 0;
    if (destination(p, idx, t, &dst, &number)) atomicMax(winner + dst, number);
  }
}

template <typename I, typename E>
__global__ void __launch_bounds__(kThreads)
    writeKernel(ScatterPlan p, const I* __restrict__ idx, const E* __restrict__ upd,
                const int* __restrict__ winner, E* __restrict__ out, int64_t total) {
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * kThreads) {
    int64_t dst = 0;
    int number = 0;
    if (destination(p, idx, t, &dst, &number) && winner[dst] == number) out[dst] = upd[t];
  }
}

template <typename I, typename E>
Status launchT(const ScatterPlan& p, const void* idx, const void* upd, void* out, int* winner,
               int maxBlocks, cudaStream_t s) {
  const int64_t total = p.nd ? p.count * p.slice : p.count;
  if (total == 0) return Status::Ok();
  const int grid = dev::gridFor(total, kThreads, maxBlocks);
  const I* ix = static_cast<const I*>(idx);
  markKernel<I><<<grid, kThreads, 0, s>>>(p, ix, winner, total);
  EI_CUDA_CHECK(cudaGetLastError());
  writeKernel<I, E><<<grid, kThreads, 0, s>>>(p, ix, static_cast<const E*>(upd), winner,
                                              static_cast<E*>(out), total);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

template <typename I>
Status launchI(const ScatterPlan& p, const void* idx, const void* upd, void* out, int* winner,
               int maxBlocks, cudaStream_t s) {
  switch (p.elemBytes) {
    case 2:
      return launchT<I, uint16_t>(p, idx, upd, out, winner, maxBlocks, s);
    case 4:
      return launchT<I, uint32_t>(p, idx, upd, out, winner, maxBlocks, s);
    case 8:
      return launchT<I, unsigned long long>(p, idx, upd, out, winner, maxBlocks, s);
    default:
      return Status(ErrorCode::kUnsupported, "Scatter: unsupported element size");
  }
}

}  // namespace

size_t scatterWorkspaceBytes(const ScatterPlan& plan) {
  return static_cast<size_t>(plan.numel) * sizeof(int);
}

Status launchScatter(const ScatterPlan& plan, const void* data, const void* indices,
                     const void* updates, void* out, void* workspace, int maxBlocks, void* stream) {
  if (plan.numel == 0) return Status::Ok();
  if (!workspace) return Status(ErrorCode::kInvalidArgument, "Scatter: no workspace");
  const auto s = static_cast<cudaStream_t>(stream);
  if (out != data)
    EI_CUDA_CHECK(cudaMemcpyAsync(out, data, static_cast<size_t>(plan.numel) * plan.elemBytes,
                                  cudaMemcpyDefault, s));
  auto* winner = static_cast<int*>(workspace);
  EI_CUDA_CHECK(cudaMemsetAsync(winner, 0xff, scatterWorkspaceBytes(plan), s));
  return plan.indices64 ? launchI<int64_t>(plan, indices, updates, out, winner, maxBlocks, s)
                        : launchI<int32_t>(plan, indices, updates, out, winner, maxBlocks, s);
}

}  // namespace edgeinfer::cuda
