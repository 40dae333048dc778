// Helpers shared by the postprocessing decoders (internal).
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "edgeinfer/vision/postprocess.h"
#include "edgeinfer/vision/types.h"

namespace edgeinfer::vision::detail {

/// Checks that `t` is a non-empty host float32/float16 tensor of the given rank;
/// `what` names it in the message ("YOLOv5 output").
Status checkFloatTensor(const Tensor& t, const char* what, size_t rank);

/// The tensor's elements widened to float32 (float16 exactly).
std::vector<float> toFloats(const Tensor& t);

inline float sigmoid(float v) {
  return 1.f / (1.f + std::exp(-v));
}

/// Checks that `labels` is empty or has numClasses entries.
Status checkLabels(const std::vector<std::string>& labels, int numClasses, const char* what);

/// Checks a transform list against the batch size (empty, 1 or N entries).
Status checkTransforms(const std::vector<Transform>& transforms, int64_t batch);

/// Fills labels, maps boxes and keypoints to frame pixels through the image's transform.
void finishDetections(std::vector<Detection>& dets, const std::vector<std::string>& labels,
                      const std::vector<Transform>& transforms);

inline bool finiteBox(const Box& b) {
  return std::isfinite(b.x1) && std::isfinite(b.y1) && std::isfinite(b.x2) && std::isfinite(b.y2);
}

}  // namespace edgeinfer::vision::detail
