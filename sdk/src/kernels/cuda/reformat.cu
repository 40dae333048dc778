#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/quantize.cuh"
#include "kernels/cuda/reformat.h"

namespace edgeinfer::cuda {
namespace {

/// Element conversion; `scale` is used by the int8 quantize / dequantize conversions only.
template <typename Tin, typename Tout>
struct Conv {
  __device__ __forceinline__ static Tout run(Tin v, float) { return static_cast<Tout>(v); }
};
template <>
struct Conv<float, __half> {
  __device__ __forceinline__ static __half run(float v, float) { return __float2half_rn(v); }
};
template <>
struct Conv<__half, float> {
  __device__ __forceinline__ static float run(__half v, float) { return __half2float(v); }
};
/// QuantizeLinear with zero point 0 (quantize.cuh).
__device__ __forceinline__ int8_t quantize(float x, float scale) {
  return dev::quantizeToInt8(x, scale);
}
template <>
struct Conv<float, int8_t> {
  __device__ __forceinline__ static int8_t run(float v, float s) { return quantize(v, s); }
};
template <>
struct Conv<__half, int8_t> {
  __device__ __forceinline__ static int8_t run(__half v, float s) {
    return quantize(__half2float(v), s);
  }
};
template <>
struct Conv<int8_t, float> {
  __device__ __forceinline__ static float run(int8_t v, float s) {
    return __fmul_rn(static_cast<float>(v), s);
  }
};
template <>
struct Conv<int8_t, __half> {
  __device__ __forceinline__ static __half run(int8_t v, float s) {
    return __float2half_rn(__fmul_rn(static_cast<float>(v), s));
  }
};

/// Same layout: an elementwise copy with type conversion.
template <typename Tin, typename Tout>
__global__ void copyConvert(const Tin* __restrict__ src, Tout* __restrict__ dst, int64_t count,
                            float scale) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    dst[i] = Conv<Tin, Tout>::run(src[i], scale);
}

constexpr int kTile = 32;
constexpr int kRows = 8;

/// Per image, transposes a [rows][cols] matrix into [cols][rows] through a shared-memory
/// tile, so both the reads and the writes are coalesced. NCHW -> NHWC: rows = C, cols = HW;
/// NHWC -> NCHW: rows = HW, cols = C. grid: (ceil(cols/32), ceil(rows/32), n).
template <typename Tin, typename Tout>
__global__ void transposeConvert(const Tin* __restrict__ src, Tout* __restrict__ dst, int64_t rows,
                                 int64_t cols, float scale) {
  __shared__ Tin tile[kTile][kTile + 1];
  const int64_t img = blockIdx.z;
  const Tin* s = src + img * rows * cols;
  Tout* d = dst + img * rows * cols;
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * kTile;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * kTile;
  for (int j = threadIdx.y; j < kTile; j += kRows) {
    const int64_t r = r0 + j, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[j][threadIdx.x] = s[r * cols + c];
  }
  __syncthreads();
  for (int j = threadIdx.y; j < kTile; j += kRows) {
    const int64_t c = c0 + j, r = r0 + threadIdx.x;  // output row c, column r
    if (r < rows && c < cols) d[c * rows + r] = Conv<Tin, Tout>::run(tile[threadIdx.x][j], scale);
  }
}

/// Channels up to which a layout change runs one thread per pixel (narrowTranspose): a
/// 32x32 tile with C = 3 (an image input, NCHW -> NHWC) keeps 3 of 32 lanes busy and took
/// 0.24 ms for ResNet-50's 64x3x224x224 input on an H100.
constexpr int64_t kNarrowChannels = 8;

/// One thread per pixel of [n][c][hw] <-> [n][hw][c] with c <= kNarrowChannels: the c values of
/// a pixel are read (and written) at a stride of hw on the planar side, where neighbouring
/// threads touch neighbouring pixels, and contiguously on the interleaved side, so both sides
/// coalesce.
template <typename Tin, typename Tout>
__global__ void narrowTranspose(const Tin* __restrict__ src, Tout* __restrict__ dst, int64_t pixels,
                                int64_t c, int64_t hw, bool srcNhwc, float scale) {
  for (int64_t p = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; p < pixels;
       p += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t img = p / hw, q = p - img * hw;
    const int64_t planar = img * c * hw + q;  // element (img, 0, q) of the planar side
    const int64_t packed = p * c;             // element (img, q, 0) of the interleaved side
    for (int64_t k = 0; k < c; ++k) {
      if (srcNhwc)
        dst[planar + k * hw] = Conv<Tin, Tout>::run(src[packed + k], scale);
      else
        dst[packed + k] = Conv<Tin, Tout>::run(src[planar + k * hw], scale);
    }
  }
}

template <typename Tin, typename Tout>
Status launchTyped(const void* src, bool srcNhwc, void* dst, bool dstNhwc, int64_t n, int64_t c,
                   int64_t hw, cudaStream_t stream, float scale = 0.f) {
  const auto* s = static_cast<const Tin*>(src);
  auto* d = static_cast<Tout*>(dst);
  const int64_t count = n * c * hw;
  if (count == 0) return Status::Ok();
  if (srcNhwc == dstNhwc || c == 1 || hw == 1) {
    const int threads = 256;
    const int64_t blocks = std::min<int64_t>((count + threads - 1) / threads, 65535 * 4);
    copyConvert<Tin, Tout>
        <<<static_cast<unsigned>(blocks), threads, 0, stream>>>(s, d, count, scale);
  } else if (c <= kNarrowChannels) {
    const int threads = 256;
    const int64_t pixels = n * hw;
    const int64_t blocks = std::min<int64_t>((pixels + threads - 1) / threads, 65535 * 4);
    narrowTranspose<Tin, Tout><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(
        s, d, pixels, c, hw, srcNhwc, scale);
  } else {
    const int64_t rows = srcNhwc ? hw : c;
    const int64_t cols = srcNhwc ? c : hw;
    if (n > 65535 || (rows + kTile - 1) / kTile > 65535)
      return Status(ErrorCode::kUnsupported, "reformat: tensor too large for one launch");
    const dim3 grid(static_cast<unsigned>((cols + kTile - 1) / kTile),
                    static_cast<unsigned>((rows + kTile - 1) / kTile), static_cast<unsigned>(n));
    transposeConvert<Tin, Tout><<<grid, dim3(kTile, kRows), 0, stream>>>(s, d, rows, cols, scale);
  }
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

template <typename T>
Status launchSameType(const void* src, bool srcNhwc, void* dst, bool dstNhwc, int64_t n, int64_t c,
                      int64_t hw, cudaStream_t stream) {
  return launchTyped<T, T>(src, srcNhwc, dst, dstNhwc, n, c, hw, stream);
}

}  // namespace

bool canReformatTypes(DataType from, DataType to) {
  const auto isF = [](DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat16; };
  if (from == to)
    return dataTypeSize(from) == 1 || dataTypeSize(from) == 2 || dataTypeSize(from) == 4 ||
           dataTypeSize(from) == 8;
  return isF(from) && isF(to);
}

bool isQuantizeReformat(DataType from, DataType to) {
  const auto isF = [](DataType t) { return t == DataType::kFloat32 || t == DataType::kFloat16; };
  return (isF(from) && to == DataType::kInt8) || (from == DataType::kInt8 && isF(to));
}

Status launchReformat(const void* src, DataType srcType, bool srcNhwc, void* dst, DataType dstType,
                      bool dstNhwc, int64_t n, int64_t c, int64_t hw, void* stream, float scale) {
  auto st = static_cast<cudaStream_t>(stream);
  if (isQuantizeReformat(srcType, dstType)) {
    if (!(scale > 0.f) || !std::isfinite(scale))
      return Status(ErrorCode::kInvalidArgument, "reformat: an int8 tensor needs a positive scale");
    const bool i8in = srcType == DataType::kInt8;
    const bool half = (i8in ? dstType : srcType) == DataType::kFloat16;
    if (i8in && half)
      return launchTyped<int8_t, __half>(src, srcNhwc, dst, dstNhwc, n, c, hw, st, scale);
    if (i8in) return launchTyped<int8_t, float>(src, srcNhwc, dst, dstNhwc, n, c, hw, st, scale);
    if (half) return launchTyped<__half, int8_t>(src, srcNhwc, dst, dstNhwc, n, c, hw, st, scale);
    return launchTyped<float, int8_t>(src, srcNhwc, dst, dstNhwc, n, c, hw, st, scale);
  }
  const bool f32in = srcType == DataType::kFloat32, f16in = srcType == DataType::kFloat16;
  const bool f32out = dstType == DataType::kFloat32, f16out = dstType == DataType::kFloat16;
  if (f32in && f16out) return launchTyped<float, __half>(src, srcNhwc, dst, dstNhwc, n, c, hw, st);
  if (f16in && f32out) return launchTyped<__half, float>(src, srcNhwc, dst, dstNhwc, n, c, hw, st);
  if (srcType != dstType)
    return Status(ErrorCode::kUnsupported, std::string("reformat: cannot convert ") +
                                               dataTypeName(srcType) + " to " +
                                               dataTypeName(dstType));
  switch (dataTypeSize(srcType)) {  // same type: move bits
    case 1:
      return launchSameType<uint8_t>(src, srcNhwc, dst, dstNhwc, n, c, hw, st);
    case 2:
      return launchSameType<uint16_t>(src, srcNhwc, dst, dstNhwc, n, c, hw, st);
    case 4:
      return launchSameType<uint32_t>(src, srcNhwc, dst, dstNhwc, n, c, hw, st);
    case 8:
      return launchSameType<uint64_t>(src, srcNhwc, dst, dstNhwc, n, c, hw, st);
    default:
      return Status(ErrorCode::kUnsupported,
                    std::string("reformat: unsupported type ") + dataTypeName(srcType));
  }
}

}  // namespace edgeinfer::cuda
