// The epilogue of the cublaslt-i8 provider's "i32" mode (cublaslt_int8.h): the int32 products
// cuBLASLt wrote, through cuda-i8's epilogue (int8_conv.h) expression by expression with
// __fmul_rn / __fadd_rn (no FMA contraction) and quantize.cuh's quantize, so the results equal
// cuda-i8's and the host reference's bit for bit. Each thread takes 4 consecutive channels: 16-byte
// loads of the products, 4- or 8-byte stores.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cublaslt_int8.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/fused_activation.cuh"
#include "kernels/cuda/quantize.cuh"

namespace edgeinfer::cuda {
namespace {

using dev::quantizeToInt8;

__global__ void __launch_bounds__(256)
    i8GemmEpilogue(const Int8GemmEpilogue e, const int4* __restrict__ acc,
                   const float4* __restrict__ alpha, const float4* __restrict__ bias,
                   const void* __restrict__ z, void* __restrict__ y, int64_t groups) {
  dev::dependentKernelStart();  // launched with launchAsDependent()
  const int32_t kg = e.K / 4;
  for (int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int32_t c4 = static_cast<int32_t>(g % kg);
    const int4 a = acc[g];
    const float4 al = alpha[c4], b = bias[c4];
    float v[4] = {__fadd_rn(__fmul_rn(static_cast<float>(a.x), al.x), b.x),
                  __fadd_rn(__fmul_rn(static_cast<float>(a.y), al.y), b.y),
                  __fadd_rn(__fmul_rn(static_cast<float>(a.z), al.z), b.z),
                  __fadd_rn(__fmul_rn(static_cast<float>(a.w), al.w), b.w)};
    if (e.hasZ) {
      float zv[4];
      if (e.zScale > 0.f) {
        const char4 q = static_cast<const char4*>(z)[g];
        zv[0] = __fmul_rn(static_cast<float>(q.x), e.zScale);
        zv[1] = __fmul_rn(static_cast<float>(q.y), e.zScale);
        zv[2] = __fmul_rn(static_cast<float>(q.z), e.zScale);
        zv[3] = __fmul_rn(static_cast<float>(q.w), e.zScale);
      } else {
        const uint2 raw = static_cast<const uint2*>(z)[g];
        const __half2 h0 = *reinterpret_cast<const __half2*>(&raw.x);
        const __half2 h1 = *reinterpret_cast<const __half2*>(&raw.y);
        zv[0] = __low2float(h0);
        zv[1] = __high2float(h0);
        zv[2] = __low2float(h1);
        zv[3] = __high2float(h1);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i) v[i] = __fadd_rn(v[i], zv[i]);
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) v[i] = dev::activate(v[i], e.act, e.actAlpha, e.actBeta);
    if (e.yScale > 0.f) {
      char4 q;
      q.x = quantizeToInt8(v[0], e.yScale);
      q.y = quantizeToInt8(v[1], e.yScale);
      q.z = quantizeToInt8(v[2], e.yScale);
      q.w = quantizeToInt8(v[3], e.yScale);
      static_cast<char4*>(y)[g] = q;
    } else {
      const __half2 h0 = __floats2half2_rn(v[0], v[1]), h1 = __floats2half2_rn(v[2], v[3]);
      uint2 raw;
      raw.x = *reinterpret_cast<const uint32_t*>(&h0);
      raw.y = *reinterpret_cast<const uint32_t*>(&h1);
      static_cast<uint2*>(y)[g] = raw;
    }
  }
}

bool aligned(const void* p, uintptr_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

}  // namespace

Status launchInt8GemmEpilogue(const Int8GemmEpilogue& e, const int32_t* acc, const float* alpha,
                              const float* bias, const void* z, void* y, void* stream) {
  if (e.K <= 0 || e.K % 4 != 0)
    return Status(ErrorCode::kInvalidArgument, "int8 gemm epilogue: K must be a multiple of 4");
  if (!acc || !alpha || !bias || !y || (e.hasZ && !z))
    return Status(ErrorCode::kInvalidArgument, "int8 gemm epilogue: missing pointer");
  const uintptr_t ys = e.yScale > 0.f ? 4 : 8, zs = e.zScale > 0.f ? 4 : 8;
  if (!aligned(acc, 16) || !aligned(alpha, 16) || !aligned(bias, 16) || !aligned(y, ys) ||
      (e.hasZ && !aligned(z, zs)))
    return Status(ErrorCode::kInvalidArgument, "int8 gemm epilogue: misaligned pointer");
  if (e.rows <= 0) return Status::Ok();
  const int64_t groups = e.rows * (e.K / 4);
  const int threads = 256;
  const int64_t blocks = std::min<int64_t>((groups + threads - 1) / threads, 65535 * 16);
  // __floats2half2_rn rounds each float to half with round-to-nearest-even, as __float2half_rn.
  // A programmatic dependent of cuBLASLt's GEMM (its kernels let dependents start early): the
  // epilogue's blocks are scheduled while the GEMM finishes, then wait for its sums.
  EI_CUDA_CHECK(launchAsDependent(
      i8GemmEpilogue, dim3(static_cast<unsigned>(blocks)), dim3(threads), 0,
      static_cast<cudaStream_t>(stream), e, reinterpret_cast<const int4*>(acc),
      reinterpret_cast<const float4*>(alpha), reinterpret_cast<const float4*>(bias), z, y, groups));
  return Status::Ok();
}

}  // namespace edgeinfer::cuda
