// Resize kernels of the `cuda` tactic family (resize.h): one thread per output element, NCHW
// or NHWC (channels fastest, so a warp reads consecutive channels of the same spatial taps).
// The sum runs over the taps of N, C, H and W in that order (the reference's odometer), each
// weight the product wN * wC * wH * wW in that order, with the reference's rounding (no fused
// multiply-add), so FP32 results match the CPU reference.
#include <cuda_runtime.h>

#include <climits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_half.h"
#include "kernels/cuda/resize.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kThreads = 256;

struct Params {
  int N, C, H, W, ON, OC, OH, OW;
  float extrapolation;
};

template <typename T, typename I, bool kNhwc>
__global__ void __launch_bounds__(kThreads)
    resizeKernel(const T* __restrict__ x, T* __restrict__ y,
                 const ResizeAxisTaps* __restrict__ taps, const Params p, I total) {
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I o = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; o < total; o += step) {
    int on, oc, oh, ow;
    if constexpr (kNhwc) {
      oc = static_cast<int>(o % p.OC);
      I t = o / p.OC;
      ow = static_cast<int>(t % p.OW);
      t /= p.OW;
      oh = static_cast<int>(t % p.OH);
      on = static_cast<int>(t / p.OH);
    } else {
      ow = static_cast<int>(o % p.OW);
      I t = o / p.OW;
      oh = static_cast<int>(t % p.OH);
      t /= p.OH;
      oc = static_cast<int>(t % p.OC);
      on = static_cast<int>(t / p.OC);
    }
    const ResizeAxisTaps& tn = taps[on];
    const ResizeAxisTaps& tc = taps[p.ON + oc];
    const ResizeAxisTaps& th = taps[p.ON + p.OC + oh];
    const ResizeAxisTaps& tw = taps[p.ON + p.OC + p.OH + ow];
    float acc = 0.f;
    if (tn.outside || tc.outside || th.outside || tw.outside) {
      acc = p.extrapolation;
    } else {
      for (int a = 0; a < tn.count; ++a) {
        const I n = tn.index[a];
        for (int b = 0; b < tc.count; ++b) {
          const I c = tc.index[b];
          const float wnc = __fmul_rn(tn.weight[a], tc.weight[b]);
          for (int i = 0; i < th.count; ++i) {
            const I h = th.index[i];
            const float wnch = __fmul_rn(wnc, th.weight[i]);
            for (int j = 0; j < tw.count; ++j) {
              const I w = tw.index[j];
              const I off =
                  kNhwc ? ((n * p.H + h) * p.W + w) * p.C + c : ((n * p.C + c) * p.H + h) * p.W + w;
              const float wt = __fmul_rn(wnch, tw.weight[j]);
              acc = __fadd_rn(acc, __fmul_rn(wt, dev::toFloat(x[off])));
            }
          }
        }
      }
    }
    y[o] = dev::fromFloat<T>(acc);
  }
}

template <typename T, typename I>
Status launchT(const ResizePlan& plan, const void* x, void* y, int maxBlocks, cudaStream_t s) {
  const auto i = [](int64_t v) { return static_cast<int>(v); };
  const Params p{i(plan.N),  i(plan.C),  i(plan.H),  i(plan.W),         i(plan.ON),
                 i(plan.OC), i(plan.OH), i(plan.OW), plan.extrapolation};
  const int64_t total = plan.ON * plan.OC * plan.OH * plan.OW;
  const int grid = dev::gridFor(total, kThreads, maxBlocks);
  if (plan.nhwc)
    resizeKernel<T, I, true><<<grid, kThreads, 0, s>>>(static_cast<const T*>(x), static_cast<T*>(y),
                                                       plan.taps, p, static_cast<I>(total));
  else
    resizeKernel<T, I, false><<<grid, kThreads, 0, s>>>(
        static_cast<const T*>(x), static_cast<T*>(y), plan.taps, p, static_cast<I>(total));
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

Status launchResize(const ResizePlan& plan, bool fp16, const void* x, void* y, int maxBlocks,
                    void* stream) {
  const int64_t total = plan.ON * plan.OC * plan.OH * plan.OW;
  if (total == 0) return Status::Ok();
  if (!plan.taps) return Status(ErrorCode::kInvalidArgument, "Resize: taps not prepared");
  const int64_t inTotal = plan.N * plan.C * plan.H * plan.W;
  const bool small = total < INT_MAX && inTotal < INT_MAX;
  const auto s = static_cast<cudaStream_t>(stream);
  if (fp16)
    return small ? launchT<__half, int32_t>(plan, x, y, maxBlocks, s)
                 : launchT<__half, int64_t>(plan, x, y, maxBlocks, s);
  return small ? launchT<float, int32_t>(plan, x, y, maxBlocks, s)
               : launchT<float, int64_t>(plan, x, y, maxBlocks, s);
}

}  // namespace edgeinfer::cuda
