// Data-dependent detection ops of the `cuda` tactic family, in their bounded forms
// (graph/ops/detection_schemas.cpp): the output padded with zeros to a static bound, and the
// number of valid rows or columns in an int64 count, all on the device (no synchronisation, so
// a layer is captured in the engine's CUDA graph like any other). Results match the CPU
// reference (kernels/ref/detection.cpp) exactly:
//
//   BoundedNonZero            x != 0 (NaN counts) per element, an exclusive scan of those
//                             flags (CUB) gives each one its column, a kernel writes the
//                             coordinates in row-major order.
//   BoundedNonMaxSuppression  boxes decoded once ([y1, x1, y2, x2], min / max per corner
//                             pair, or from the centre form) in float; the scores above the
//                             score threshold (all without one; NaN never, as in the reference)
//                             moved together by a scan, the candidates of each (batch, class)
//                             sorted descending by a stable
//                             segmented radix sort (CUB; -0 as +0, so equal scores keep box
//                             order as in the reference's stable sort); a block per (batch,
//                             class) runs the
//                             greedy selection, testing each candidate against the kept boxes
//                             in parallel with the reference's float operations in its order
//                             (no fused multiply-add); an exclusive scan of the per-class
//                             counts places the rows (batch-major, then class, then score).
//
// Plain C++ (no device syntax): cuda_provider_detection.cpp includes it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

inline constexpr int kNonZeroMaxDims = 8;

/// Input element types the NonZero kernel reads.
enum class NonZeroType { kFloat32, kFloat16, kInt8, kUInt8, kInt32, kInt64 };

struct NonZeroPlan {
  NonZeroType type = NonZeroType::kFloat32;
  int64_t numel = 1;  // at most INT32_MAX (CUB's scan counts in int32)
  int rank = 1;       // of the input; a scalar is one row
  int64_t dims[kNonZeroMaxDims] = {};
};

/// Workspace of a launch: the flags, their scan and CUB's temporary storage. 0 when CUB
/// cannot size it (then the tactic is not offered).
size_t nonZeroWorkspaceBytes(const NonZeroPlan& plan);

/// y: int64 [max(rank, 1), numel]; count: int64 [1]. Never synchronises.
Status launchNonZero(const NonZeroPlan& plan, const void* x, void* y, void* count, void* workspace,
                     size_t workspaceBytes, void* stream);

/// The parameters are constants of the plan, or (the *Input flags) read from the device at
/// each launch: max_output_boxes_per_class int64, the thresholds float32.
struct NmsPlan {
  int64_t batches = 1, classes = 1, boxes = 1;
  int64_t perClass = 1;  // K: min(boxes, max_output_boxes_per_class), boxes if read at run time
  bool centerPointBox = false;
  bool maxOutInput = false;
  float iouThreshold = 0.f;
  bool iouInput = false;
  bool hasScoreThreshold = false;
  float scoreThreshold = 0.f;
  bool scoreInput = false;
};

/// Device pointers of the parameters read at run time (null for the others).
struct NmsParamsOnDevice {
  const int64_t* maxOut = nullptr;
  const float* iou = nullptr;
  const float* score = nullptr;
};

/// Workspace of a launch: decoded boxes, sort keys and indices, the kept boxes and counts per
/// class, CUB's temporary storage. 0 when CUB cannot size it.
size_t nmsWorkspaceBytes(const NmsPlan& plan);

/// boxes: float [batches, boxes, 4]; scores: float [batches, classes, boxes]; y: int64
/// [batches * classes * perClass, 3]; count: int64 [1]. Never synchronises.
Status launchNms(const NmsPlan& plan, const NmsParamsOnDevice& params, const void* boxes,
                 const void* scores, void* y, void* count, void* workspace, size_t workspaceBytes,
                 void* stream);

}  // namespace edgeinfer::cuda
