// Non-maximum suppression: greedy (hard) and MediaPipe's weighted variant (postprocess.h).
#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "vision/postprocess/common.h"

namespace edgeinfer::vision {
namespace {

// Indices of the candidates passing the score threshold, sorted by score desc, index asc.
std::vector<int> sortedCandidates(const std::vector<float>& scores, float threshold) {
  std::vector<int> order;
  for (size_t i = 0; i < scores.size(); ++i)
    if (scores[i] >= threshold) order.push_back(static_cast<int>(i));  // NaN fails
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    const float sa = scores[static_cast<size_t>(a)], sb = scores[static_cast<size_t>(b)];
    return sa > sb || (sa == sb && a < b);
  });
  return order;
}

std::vector<int> hardNms(const std::vector<Box>& boxes, const std::vector<float>& scores,
                         const std::vector<int>& classIds, const NmsParams& p) {
  std::vector<int> kept;
  for (int i : sortedCandidates(scores, p.scoreThreshold)) {
    if (static_cast<int>(kept.size()) >= p.maxDetections) break;
    const Box& bi = boxes[static_cast<size_t>(i)];
    if (!detail::finiteBox(bi)) continue;
    bool suppressed = false;
    for (int k : kept) {
      if (!p.classAgnostic && !classIds.empty() &&
          classIds[static_cast<size_t>(k)] != classIds[static_cast<size_t>(i)])
        continue;
      if (iou(boxes[static_cast<size_t>(k)], bi) > p.iouThreshold) {
        suppressed = true;
        break;
      }
    }
    if (!suppressed) kept.push_back(i);
  }
  return kept;
}

// Weighted NMS over the detections of one image (see NmsMethod::kWeighted).
std::vector<Detection> weightedNms(const std::vector<Detection>& dets, const NmsParams& p) {
  std::vector<float> scores(dets.size());
  for (size_t i = 0; i < dets.size(); ++i)
    scores[i] = detail::finiteBox(dets[i].box) ? dets[i].score : std::nanf("");
  std::vector<int> remaining = sortedCandidates(scores, p.scoreThreshold);
  std::vector<Detection> out;
  std::vector<int> cluster, rest;
  while (!remaining.empty() && static_cast<int>(out.size()) < p.maxDetections) {
    const Detection& lead = dets[static_cast<size_t>(remaining[0])];
    cluster.clear();
    rest.clear();
    for (int i : remaining) {
      const Detection& d = dets[static_cast<size_t>(i)];
      const bool sameGroup = p.classAgnostic || d.classId == lead.classId;
      // The leader is always in its own cluster (even with iouThreshold 1).
      if (i == remaining[0] || (sameGroup && iou(d.box, lead.box) > p.iouThreshold))
        cluster.push_back(i);
      else
        rest.push_back(i);
    }
    Detection w = lead;
    float total = 0.f, x1 = 0.f, y1 = 0.f, x2 = 0.f, y2 = 0.f;
    std::vector<float> kx(lead.keypoints.size(), 0.f), ky(lead.keypoints.size(), 0.f);
    for (int i : cluster) {
      const Detection& d = dets[static_cast<size_t>(i)];
      const float s = d.score;
      total += s;
      x1 += d.box.x1 * s;
      y1 += d.box.y1 * s;
      x2 += d.box.x2 * s;
      y2 += d.box.y2 * s;
      for (size_t k = 0; k < kx.size(); ++k) {
        kx[k] += d.keypoints[k].x * s;
        ky[k] += d.keypoints[k].y * s;
      }
    }
    if (total > 0.f) {
      w.box = Box{x1 / total, y1 / total, x2 / total, y2 / total};
      for (size_t k = 0; k < kx.size(); ++k) {
        w.keypoints[k].x = kx[k] / total;
        w.keypoints[k].y = ky[k] / total;
      }
    }
    out.push_back(std::move(w));
    remaining.swap(rest);
  }
  return out;
}

}  // namespace

Status validate(const NmsParams& p) {
  if (!(p.iouThreshold >= 0.f && p.iouThreshold <= 1.f))
    return Status(ErrorCode::kInvalidArgument,
                  "NMS iouThreshold " + std::to_string(p.iouThreshold) + " is outside [0, 1]");
  if (!(p.scoreThreshold >= 0.f && p.scoreThreshold <= 1.f))
    return Status(ErrorCode::kInvalidArgument,
                  "NMS scoreThreshold " + std::to_string(p.scoreThreshold) + " is outside [0, 1]");
  if (p.maxDetections < 1)
    return Status(ErrorCode::kInvalidArgument,
                  "NMS maxDetections " + std::to_string(p.maxDetections) + " must be >= 1");
  if (p.method != NmsMethod::kHard && p.method != NmsMethod::kWeighted)
    return Status(ErrorCode::kInvalidArgument, "NMS method is not kHard or kWeighted");
  return Status::Ok();
}

Expected<std::vector<int>> nmsIndices(const std::vector<Box>& boxes,
                                      const std::vector<float>& scores,
                                      const std::vector<int>& classIds, const NmsParams& params) {
  EI_RETURN_IF_ERROR(validate(params));
  if (params.method != NmsMethod::kHard)
    return Status(ErrorCode::kInvalidArgument,
                  "nmsIndices does hard NMS only; use nms() on detections for weighted NMS");
  if (scores.size() != boxes.size() || (!classIds.empty() && classIds.size() != boxes.size()))
    return Status(ErrorCode::kInvalidArgument, "nmsIndices: " + std::to_string(boxes.size()) +
                                                   " boxes, " + std::to_string(scores.size()) +
                                                   " scores, " + std::to_string(classIds.size()) +
                                                   " class ids (must be equal, or no ids)");
  return hardNms(boxes, scores, classIds, params);
}

Expected<std::vector<Detection>> nms(const std::vector<Detection>& candidates,
                                     const NmsParams& params) {
  EI_RETURN_IF_ERROR(validate(params));
  std::map<int, std::vector<size_t>> byImage;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (candidates[i].batchIndex < 0)
      return Status(ErrorCode::kInvalidArgument, "NMS: candidate " + std::to_string(i) +
                                                     " has batchIndex " +
                                                     std::to_string(candidates[i].batchIndex));
    byImage[candidates[i].batchIndex].push_back(i);
  }
  std::vector<Detection> out;
  for (const auto& [image, idx] : byImage) {
    (void)image;
    std::vector<Detection> dets;
    dets.reserve(idx.size());
    for (size_t i : idx) dets.push_back(candidates[i]);
    if (params.method == NmsMethod::kWeighted) {
      for (const Detection& d : dets)
        if (d.keypoints.size() != dets[0].keypoints.size())
          return Status(ErrorCode::kInvalidArgument,
                        "weighted NMS: candidates of one image have different keypoint counts (" +
                            std::to_string(d.keypoints.size()) + " and " +
                            std::to_string(dets[0].keypoints.size()) + ")");
      for (Detection& d : weightedNms(dets, params)) out.push_back(std::move(d));
    } else {
      std::vector<Box> boxes(dets.size());
      std::vector<float> scores(dets.size());
      std::vector<int> ids(dets.size());
      for (size_t i = 0; i < dets.size(); ++i) {
        boxes[i] = dets[i].box;
        scores[i] = dets[i].score;
        ids[i] = dets[i].classId;
      }
      for (int k : hardNms(boxes, scores, ids, params)) out.push_back(dets[static_cast<size_t>(k)]);
    }
  }
  return out;
}

Expected<std::vector<std::vector<int>>> batchedNms(const Tensor& boxes, const Tensor& scores,
                                                   const Tensor& classIds,
                                                   const NmsParams& params) {
  EI_RETURN_IF_ERROR(validate(params));
  EI_RETURN_IF_ERROR(detail::checkFloatTensor(boxes, "batchedNms boxes [N, B, 4]", 3));
  EI_RETURN_IF_ERROR(detail::checkFloatTensor(scores, "batchedNms scores [N, B]", 2));
  const int64_t n = boxes.shape()[0], b = boxes.shape()[1];
  if (boxes.shape()[2] != 4)
    return Status(ErrorCode::kInvalidArgument,
                  "batchedNms boxes " + boxes.describe() + ": last dimension must be 4");
  if (scores.shape() != Shape{n, b})
    return Status(ErrorCode::kInvalidArgument, "batchedNms scores " + scores.describe() +
                                                   " do not match boxes " + boxes.describe());
  if (!classIds.empty()) {
    if (classIds.dtype() != DataType::kInt32 && classIds.dtype() != DataType::kInt64)
      return Status(ErrorCode::kUnsupported, "batchedNms classIds " + classIds.describe() +
                                                 ": dtype must be int32 or int64");
    if (!classIds.onHost() || classIds.shape() != Shape{n, b})
      return Status(ErrorCode::kInvalidArgument,
                    "batchedNms classIds " + classIds.describe() + " must be a host tensor [" +
                        std::to_string(n) + "," + std::to_string(b) + "]");
  }
  const std::vector<float> bv = detail::toFloats(boxes), sv = detail::toFloats(scores);
  std::vector<std::vector<int>> out(static_cast<size_t>(n));
  std::vector<Box> bx(static_cast<size_t>(b));
  std::vector<float> sc(static_cast<size_t>(b));
  std::vector<int> ids;
  for (int64_t img = 0; img < n; ++img) {
    ids.clear();
    for (int64_t i = 0; i < b; ++i) {
      const float* r = bv.data() + (img * b + i) * 4;
      bx[static_cast<size_t>(i)] = Box{r[0], r[1], r[2], r[3]};
      sc[static_cast<size_t>(i)] = sv[static_cast<size_t>(img * b + i)];
      if (!classIds.empty()) ids.push_back(static_cast<int>(classIds.getAsInt64(img * b + i)));
    }
    out[static_cast<size_t>(img)] = hardNms(bx, sc, ids, params);
  }
  return out;
}

}  // namespace edgeinfer::vision
