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

/// The tensor's elements as float32 without a copy when they are float32 already (a decoder's
/// usual case: the output of a batch can be megabytes, and a fresh copy per batch costs more
/// than the decoding), else widened into its own buffer (float16 exactly). The tensor must
/// outlive it. Not copyable (it may point into itself).
class FloatElements {
 public:
  explicit FloatElements(const Tensor& t);
  FloatElements(const FloatElements&) = delete;
  FloatElements& operator=(const FloatElements&) = delete;
  const float* data() const { return p_; }

 private:
  std::vector<float> widened_;
  const float* p_ = nullptr;
};

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
