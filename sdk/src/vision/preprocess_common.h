// What the CPU reference and the CUDA kernel of frame preprocessing share: the checks of the
// batch tensor and step 1 of the arithmetic in edgeinfer/vision/preprocess.h (which part of
// the frame goes where in the tensor). The per-pixel arithmetic is NOT shared: the kernel is
// tested against preprocess_cpu.cpp.
#pragma once

#include <array>
#include <string>

#include "edgeinfer/vision/preprocess.h"

namespace edgeinfer::vision::detail {

/// Step 1: the source region of the frame and the destination rectangle in the tensor image.
struct PreprocessRegion {
  PixelRect src;  ///< frame pixels read (the ROI, narrowed by centre crop)
  PixelRect dst;  ///< tensor pixels written from it (the rest is letterbox padding)
};

/// Step 1 for `frame` (kInvalidArgument when the ROI is not inside the frame).
Expected<PreprocessRegion> preprocessRegion(const FrameView& frame, const PreprocessConfig& cfg);
/// The tensor-to-frame mapping of a region (see Transform).
Transform regionTransform(const PreprocessRegion& region, const FrameView& frame);
/// Step 5 applied to the padding values: what a padding pixel holds in each channel.
std::array<float, 3> normalisedPadding(const PreprocessConfig& cfg);

/// Checks that `tensor` can take images first .. first + count - 1: not empty, in `where`,
/// dtype cfg.dtype, shape preprocessTensorShape(cfg, N) with first + count <= N. `who` names
/// the caller in messages.
Status checkBatchTensor(const Tensor& tensor, const PreprocessConfig& cfg, MemoryLocation where,
                        int first, int count, const char* who);

const char* layoutName(TensorLayout layout);

}  // namespace edgeinfer::vision::detail
