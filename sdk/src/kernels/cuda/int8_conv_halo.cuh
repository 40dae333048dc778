// What the two halo 3x3 kernels share (int8_conv_halo.cu: mma.sync; int8_conv_halo_sm90a.cu:
// wgmma): whole-row tiles, the halo copy of a tile, the stages a launch takes, the persistent
// launch; and the register epilogue of 8 outputs they share with the pointwise kernels.
// Device code: include only from .cu files.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"  // device attributes
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/int8_conv.h"
#include "kernels/cuda/int8_conv_epilogue.cuh"
#include "kernels/cuda/kernel_attributes.h"
#include "kernels/cuda/mma_sync.cuh"

namespace edgeinfer::cuda {

namespace halo {

constexpr int kTilePixels = 128;  // a tile's output pixels at most (its M)
constexpr int kMaxStages = 8;

/// Output rows a tile: whole rows, at most kTilePixels pixels.
__host__ __device__ inline int tileRows(int Q) {
  return Q >= kTilePixels ? 1 : kTilePixels / Q;
}

/// Tiles of the layer: images x tiles of rows an image.
__host__ __device__ inline int tiles(const Int8ConvPlan& p) {
  return p.N * ((p.P + tileRows(p.Q) - 1) / tileRows(p.Q));
}

/// The halo of tile `tile` (image n, output rows [tr * rt, tr * rt + rt)) into `stage` by
/// THREADS threads: input rows tr * rt - 1 to tr * rt + rt, columns -1 to Q, each pixel's C
/// bytes at `pitch` bytes a pixel, (Q + 2) pixels a row; zeros outside the image (cp.async,
/// committed by the caller). `chunkDiv`: dev::divSmall's multiplier for C / 16; HINT: the reads
/// under the L2 policy `policy` (dev::l2ReadPolicy; the mma.sync kernel: in the wgmma one ptxas
/// gave the copies' policy operand an odd uniform register, an illegal instruction).
template <int THREADS, bool HINT>
__device__ __forceinline__ void loadTile(const Int8ConvPlan& p, const int8_t* __restrict__ x,
                                         int tile, int8_t* stage, int pitch, int chunkDiv, int tid,
                                         uint64_t policy) {
  const int rt = tileRows(p.Q), perImage = (p.P + rt - 1) / rt;
  const int cols = p.Q + 2, chunks = p.C / 16, rowPieces = cols * chunks;
  const int n = tile / perImage, h0 = (tile - n * perImage) * rt - 1;
  for (int hr = 0; hr < rt + 2; ++hr) {
    const int ih = h0 + hr;
    const bool rowIn = ih >= 0 && ih < p.H;
    const int8_t* src = x + (static_cast<int64_t>(n) * p.H + ih) * p.W * p.C;
    int8_t* dst = stage + hr * cols * pitch;
    for (int i = tid; i < rowPieces; i += THREADS) {
      const int hc = dev::divSmall(i, chunkDiv), ch = i - hc * chunks, iw = hc - 1;
      const bool valid = rowIn && iw >= 0 && iw < p.W;
      if constexpr (HINT)
        dev::cpAsync16Hint(dst + hc * pitch + ch * 16, valid ? src + iw * p.C + ch * 16 : x, valid,
                           policy);
      else
        dev::cpAsync<16>(dst + hc * pitch + ch * 16, valid ? src + iw * p.C + ch * 16 : x, valid);
    }
  }
}

/// The byte offset in a halo of output pixel m's window at position (0, 0) (rows past the tile:
/// 0, a valid address whose results are not stored).
__device__ __forceinline__ int pixelOffset(const Int8ConvPlan& p, int m, int pitch) {
  return m < tileRows(p.Q) * p.Q ? ((m / p.Q) * (p.Q + 2) + m % p.Q) * pitch : 0;
}

/// Stages of a launch whose shared memory is `total(stages)`: as many as fit (up to kMaxStages)
/// beside a second block a multiprocessor (1 KiB reserved a block: 8 warps alone leave the
/// tensor cores waiting on their fragment loads), or beside none where two stages of two blocks
/// do not fit; two at least.
template <typename Total>
int stages(Total total) {
  const int perSm = detail::deviceSharedMemoryPerSm();
  int budget = std::min(detail::deviceSharedMemoryOptin(), perSm / 2 - 1024);
  if (total(2) > budget) budget = std::min(detail::deviceSharedMemoryOptin(), perSm - 1024);
  int n = 2;
  while (n < kMaxStages && total(n + 1) <= budget) ++n;
  return n;
}

/// The persistent launch of `kernel` (THREADS a block, `smem` bytes, the last argument its
/// stages) over the layer's tiles and slices of 64 channels.
template <int THREADS, typename Kernel>
Status launch(Kernel kernel, const Int8ConvPlan& p, const Int8ConvArgs& a, int smem, int nStages,
              void* stream, const char* what) {
  const int optin = detail::deviceSharedMemoryOptin();
  if (smem > optin)
    return Status(ErrorCode::kUnsupported, std::string(what) + ": " + std::to_string(smem) +
                                               " bytes of shared memory, the device allows " +
                                               std::to_string(optin));
  EI_RETURN_IF_ERROR(allowSharedMemory(reinterpret_cast<const void*>(kernel), optin));
  const int slices = (p.K + 63) / 64;
  const int64_t resident =
      int64_t{residentBlocks(reinterpret_cast<const void*>(kernel), THREADS, smem)} *
      std::max(detail::deviceSmCount(), 1);
  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attrs[1];
  cfg.gridDim =
      dim3(static_cast<unsigned>(persistentGrid(int64_t{tiles(p)} * slices, slices, resident)));
  cfg.blockDim = dim3(THREADS);
  cfg.dynamicSmemBytes = static_cast<size_t>(smem);
  cfg.stream = static_cast<cudaStream_t>(stream);
  addDependentLaunch(&cfg, attrs);
  EI_CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, p, static_cast<const int8_t*>(a.x),
                                   static_cast<const int8_t*>(a.w), a.alpha, a.bias, a.z, a.y,
                                   nStages));
  return Status::Ok();
}

/// Refusals of a launch before anything reaches the device: `fits`, 16-byte aligned tensors.
inline Status checkLaunch(const Int8ConvPlan& p, const Int8ConvArgs& a, bool fits,
                          const std::string& what, const std::string& layers) {
  if (!fits) return Status(ErrorCode::kInvalidArgument, what + ": the layer is not " + layers);
  const auto aligned16 = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (!aligned16(a.x) || !aligned16(a.w) || !aligned16(a.y) || !aligned16(a.alpha) ||
      !aligned16(a.bias) || (p.hasZ && !aligned16(a.z)))
    return Status(ErrorCode::kInvalidArgument, what + ": tensors not 16-byte aligned");
  return Status::Ok();
}

}  // namespace halo

namespace dev {

/// Eight sums `q` of a pixel's consecutive channels (alpha `a`, bias `b`) to the output at
/// element `base` of y: the lean path (i8Lean8) where `lean` (i8LeanEpilogue) and the sums are
/// within 2^22, the general one otherwise. `z8`: the residual's 8 values (zb 1: int8, 2: fp16,
/// 0: none), in shared or global memory.
__device__ __forceinline__ void i8Output8(const Int8ConvPlan& p, const int32_t (&q)[8],
                                          const float (&a)[8], const float (&b)[8], bool lean,
                                          float floor, int zb, const void* z8, float inv, void* y,
                                          int64_t base) {
  if (lean && i8SmallSums8(q)) {
    const uint2 zRaw = zb == 1 ? *static_cast<const uint2*>(z8) : make_uint2(0u, 0u);
    *reinterpret_cast<uint2*>(static_cast<int8_t*>(y) + base) =
        i8Lean8(q, a, b, zb == 1, zRaw, p.zMul, floor);
    return;
  }
  float v[8];
  i8Affine8(p, q, a, b, false, v);
  if (zb == 1) {
    const uint2 raw = *static_cast<const uint2*>(z8);
    i8AddResidual8(p, make_uint4(raw.x, raw.y, 0u, 0u), v);
  } else if (zb == 2) {
    i8AddResidual8(p, *static_cast<const uint4*>(z8), v);
  }
  activateAll(v, p.act, p.alpha, p.beta);
  i8Store8(p, v, inv, y, base, true, 8);
}

}  // namespace dev
}  // namespace edgeinfer::cuda
