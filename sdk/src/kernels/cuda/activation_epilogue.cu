// launchActivationInPlace (fused_activation.h): a layer's activation applied after a library
// kernel that cannot apply it in its own epilogue (a cuDNN convolution whose activation has no
// exact pointwise mode, or none of whose engines fuses it), one grid-stride pass in place.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_half.h"
#include "kernels/cuda/fused_activation.cuh"
#include "kernels/cuda/fused_activation.h"

namespace edgeinfer::cuda {
namespace {

template <typename T>
__global__ void activateInPlace(T* __restrict__ y, int64_t n, DeviceActivation act, float alpha,
                                float beta) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride)
    y[i] = dev::fromFloat<T>(dev::activate(dev::toFloat<T>(y[i]), act, alpha, beta));
}

}  // namespace

Status launchActivationInPlace(void* y, int64_t n, bool fp16, DeviceActivation act, float alpha,
                               float beta, int maxBlocks, void* stream) {
  if (n <= 0 || act == DeviceActivation::kNone) return Status::Ok();
  if (!y) return Status(ErrorCode::kInvalidArgument, "activation: no output pointer");
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((n + kThreads - 1) / kThreads, std::max(maxBlocks, 1));
  auto s = static_cast<cudaStream_t>(stream);
  if (fp16)
    activateInPlace<__half><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(
        static_cast<__half*>(y), n, act, alpha, beta);
  else
    activateInPlace<float><<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(
        static_cast<float*>(y), n, act, alpha, beta);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace edgeinfer::cuda
