// fillTimingData() (timing_data.h): a counter-based hash per element, one thread per element in
// a grid-stride loop.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/timing_data.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kThreads = 256;

/// A well-mixed 32-bit value of (i, seed) (the finaliser of MurmurHash3).
__device__ __forceinline__ uint32_t mix(uint64_t i, uint32_t seed) {
  uint32_t h = static_cast<uint32_t>(i) ^ static_cast<uint32_t>(i >> 32) * 0x9e3779b9u ^ seed;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

/// Uniform in [-1, 1) from the hash's top 24 bits.
__device__ __forceinline__ float unit(uint32_t h) {
  return static_cast<float>(h >> 8) * (2.f / 16777216.f) - 1.f;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    fillKernel(T* __restrict__ p, int64_t count, uint32_t seed) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < count;
       i += step) {
    const uint32_t h = mix(static_cast<uint64_t>(i), seed);
    if constexpr (std::is_same_v<T, int8_t>)
      p[i] = static_cast<int8_t>(static_cast<int>(h % 255u) - 127);
    else if constexpr (std::is_same_v<T, __half>)
      p[i] = __float2half_rn(unit(h));
    else
      p[i] = unit(h);
  }
}

template <typename T>
Status launch(void* p, int64_t count, uint32_t seed, cudaStream_t stream) {
  const int64_t blocks = std::min<int64_t>((count + kThreads - 1) / kThreads, 4096);
  fillKernel<T>
      <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<T*>(p), count, seed);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace

bool fillsTimingData(DataType type) {
  return type == DataType::kFloat32 || type == DataType::kFloat16 || type == DataType::kInt8;
}

Status fillTimingData(void* p, DataType type, int64_t count, uint32_t seed, void* stream) {
  if (count <= 0 || !fillsTimingData(type)) return Status::Ok();
  if (!p) return Status(ErrorCode::kInvalidArgument, "fillTimingData: no buffer");
  auto s = static_cast<cudaStream_t>(stream);
  switch (type) {
    case DataType::kFloat32:
      return launch<float>(p, count, seed, s);
    case DataType::kFloat16:
      return launch<__half>(p, count, seed, s);
    default:
      return launch<int8_t>(p, count, seed, s);
  }
}

}  // namespace edgeinfer::cuda
