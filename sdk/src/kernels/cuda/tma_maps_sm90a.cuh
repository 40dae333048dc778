// Host side of the Tensor Memory Accelerator for the Hopper INT8 kernels (int8_conv_tma_sm90a.cu,
// int8_conv_pointwise_sm90a.cu): the driver's tensor-map encoders, looked up once through the
// runtime (no link to libcuda), and the maps the kernels read: an NHWC input walked as im2col
// (the convolution's window, strides and padding), and 2-D row-major tiles (weights, residuals).
// The maps hold the tensors' addresses: they are encoded at every launch (a few hundred
// nanoseconds, no call to the GPU) and passed as __grid_constant__ kernel parameters.
// Include only from *_sm90a.cu files.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeIm2col, PFN_cuTensorMapEncodeTiled
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "edgeinfer/status.h"
#include "kernels/cuda/int8_conv.h"

namespace edgeinfer::cuda::tma {

struct TensorMapEncoders {
  PFN_cuTensorMapEncodeIm2col_v12000 im2col = nullptr;
  PFN_cuTensorMapEncodeTiled_v12000 tiled = nullptr;
};

inline const TensorMapEncoders& encoders() {
  static const TensorMapEncoders e = [] {
    TensorMapEncoders r;
    const auto lookup = [](const char* name) -> void* {
      void* fn = nullptr;
      cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
      const cudaError_t err =
          cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q);
#else
      const cudaError_t err = cudaGetDriverEntryPoint(name, &fn, cudaEnableDefault, &q);
#endif
      if (err != cudaSuccess || q != cudaDriverEntryPointSuccess) {
        cudaGetLastError();
        return nullptr;
      }
      return fn;
    };
    r.im2col =
        reinterpret_cast<PFN_cuTensorMapEncodeIm2col_v12000>(lookup("cuTensorMapEncodeIm2col"));
    r.tiled = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(lookup("cuTensorMapEncodeTiled"));
    return r;
  }();
  return e;
}

/// The im2col bounding box of the input's H and W, as offsets from the tensor's corners: the
/// first input pixel of the window of output pixel (0, 0) and of (P - 1, Q - 1). The TMA walks
/// it with the convolution's strides, Q pixels a row, P rows an image.
struct Im2colBox {
  int lowerW, lowerH, upperW, upperH;
};

inline Im2colBox im2colBox(const Int8ConvPlan& p) {
  return {-p.padLeft, -p.padTop, (p.Q - 1) * p.strideW - p.padLeft - (p.W - 1),
          (p.P - 1) * p.strideH - p.padTop - (p.H - 1)};
}

inline Status encodeError(const std::string& what, CUresult r) {
  return Status(ErrorCode::kCudaError,
                "int8 conv: " + what + " failed (CUresult " + std::to_string(r) + ")");
}

/// The swizzle of rows of `bytes` (64 or 128) bytes: wgmma's K-major layouts (Swizzled<BK>).
inline CUtensorMapSwizzle swizzleOf(int bytes) {
  return bytes == 64 ? CU_TENSOR_MAP_SWIZZLE_64B : CU_TENSOR_MAP_SWIZZLE_128B;
}

/// The im2col map of the plan's int8 NHWC input `x`: `pixels` output pixels' windows at one
/// position a load, `channels` (64 or 128) channels each, swizzled as wgmma reads them.
inline Status encodeInputIm2col(const Int8ConvPlan& p, const void* x, int pixels, int channels,
                                CUtensorMap* map) {
  const TensorMapEncoders& enc = encoders();
  if (!enc.im2col)
    return Status(ErrorCode::kUnsupported,
                  "int8 conv: the CUDA driver has no tensor-map encoders (TMA)");
  const cuuint64_t dim[4] = {cuuint64_t(p.C), cuuint64_t(p.W), cuuint64_t(p.H), cuuint64_t(p.N)};
  const cuuint64_t stride[3] = {cuuint64_t(p.C), cuuint64_t(p.W) * p.C,
                                cuuint64_t(p.H) * p.W * p.C};
  const Im2colBox b = im2colBox(p);
  const int lower[2] = {b.lowerW, b.lowerH}, upper[2] = {b.upperW, b.upperH};
  const cuuint32_t elementStrides[4] = {1, cuuint32_t(p.strideW), cuuint32_t(p.strideH), 1};
  const CUresult r =
      enc.im2col(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 4, const_cast<void*>(x), dim, stride, lower,
                 upper, static_cast<cuuint32_t>(channels), static_cast<cuuint32_t>(pixels),
                 elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzleOf(channels),
                 CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? Status::Ok() : encodeError("cuTensorMapEncodeIm2col (the input)", r);
}

/// The tiled map of a 2-D int8 row-major tensor at `ptr` (`rows` rows of `cols` bytes, `pitch`
/// bytes apart): boxes of `boxRows` rows x `boxCols` (64 or 128) bytes, swizzled as wgmma reads
/// them; zeros outside the tensor.
inline Status encodeTiled2d(const void* ptr, int64_t cols, int64_t rows, int64_t pitch, int boxCols,
                            int boxRows, CUtensorMap* map, const char* what) {
  const TensorMapEncoders& enc = encoders();
  if (!enc.tiled)
    return Status(ErrorCode::kUnsupported,
                  "int8 conv: the CUDA driver has no tensor-map encoders (TMA)");
  const cuuint64_t dim[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  const cuuint64_t stride[1] = {cuuint64_t(pitch)};
  const cuuint32_t box[2] = {cuuint32_t(boxCols), cuuint32_t(boxRows)}, elementStrides[2] = {1, 1};
  const CUresult r =
      enc.tiled(map, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(ptr), dim, stride, box,
                elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzleOf(boxCols),
                CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS ? Status::Ok()
                           : encodeError(std::string("cuTensorMapEncodeTiled (") + what + ")", r);
}

inline bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

}  // namespace edgeinfer::cuda::tma
