#include "vision/postprocess/common.h"

#include "core/half.h"

namespace edgeinfer::vision::detail {

Status checkFloatTensor(const Tensor& t, const char* what, size_t rank) {
  if (t.empty()) return Status(ErrorCode::kInvalidArgument, std::string(what) + " is empty");
  if (!t.onHost())
    return Status(
        ErrorCode::kInvalidArgument,
        std::string(what) + " is in device memory; the CPU postprocessing needs a host tensor");
  if (t.dtype() != DataType::kFloat32 && t.dtype() != DataType::kFloat16)
    return Status(ErrorCode::kUnsupported,
                  std::string(what) + " " + t.describe() + ": dtype must be float32 or float16");
  if (t.shape().rank() != rank)
    return Status(ErrorCode::kInvalidArgument, std::string(what) + " " + t.describe() + ": rank " +
                                                   std::to_string(t.shape().rank()) +
                                                   ", expected " + std::to_string(rank));
  for (int64_t d : t.shape().dims())
    if (d <= 0)
      return Status(ErrorCode::kInvalidArgument,
                    std::string(what) + " " + t.describe() + " has an empty or unknown dimension");
  return Status::Ok();
}

std::vector<float> toFloats(const Tensor& t) {
  const int64_t n = t.numel();
  std::vector<float> out(static_cast<size_t>(n));
  if (t.dtype() == DataType::kFloat32) {
    const float* p = t.data<float>();
    out.assign(p, p + n);
  } else {
    const uint16_t* p = t.data<uint16_t>();
    for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = halfToFloat(p[i]);
  }
  return out;
}

FloatElements::FloatElements(const Tensor& t) {
  if (t.dtype() == DataType::kFloat32) {
    p_ = t.data<float>();
  } else {
    widened_ = toFloats(t);
    p_ = widened_.data();
  }
}

Status checkLabels(const std::vector<std::string>& labels, int numClasses, const char* what) {
  if (!labels.empty() && static_cast<int64_t>(labels.size()) != numClasses)
    return Status(ErrorCode::kInvalidArgument,
                  std::string(what) + ": " + std::to_string(labels.size()) + " labels given for " +
                      std::to_string(numClasses) + " classes");
  return Status::Ok();
}

Status checkTransforms(const std::vector<Transform>& transforms, int64_t batch) {
  if (transforms.size() > 1 && static_cast<int64_t>(transforms.size()) != batch)
    return Status(ErrorCode::kInvalidArgument,
                  std::to_string(transforms.size()) + " transforms for a batch of " +
                      std::to_string(batch) + " (give none, one, or one per image)");
  for (const Transform& t : transforms)
    if (!(t.scaleX > 0) || !(t.scaleY > 0) || !std::isfinite(t.scaleX) || !std::isfinite(t.scaleY))
      return Status(ErrorCode::kInvalidArgument, "transform scale must be finite and > 0 (scaleX " +
                                                     std::to_string(t.scaleX) + ", scaleY " +
                                                     std::to_string(t.scaleY) + ")");
  return Status::Ok();
}

void finishDetections(std::vector<Detection>& dets, const std::vector<std::string>& labels,
                      const std::vector<Transform>& transforms) {
  for (Detection& d : dets) {
    if (!labels.empty()) d.label = labels[static_cast<size_t>(d.classId)];
    if (transforms.empty()) continue;
    const Transform& t =
        transforms.size() == 1 ? transforms[0] : transforms[static_cast<size_t>(d.batchIndex)];
    d.box = t.toFrame(d.box);
    for (Keypoint& k : d.keypoints) {
      k.x = t.toFrameX(k.x);
      k.y = t.toFrameY(k.y);
    }
  }
}

}  // namespace edgeinfer::vision::detail
