// YOLOv5 (anchor-based, decoded) and YOLOv8 (anchor-free, decoded or raw DFL) decoders.
// The arithmetic is spelled out in postprocess.h; keep the two in step.
#include <algorithm>
#include <cmath>

#include "vision/postprocess/common.h"

namespace edgeinfer::vision {
namespace {

// Adds the candidates of one box: the best class (lowest id on ties), or every class over the
// threshold with multiLabel. `score(c)` returns the final score of class c.
template <typename ScoreFn>
void addCandidates(std::vector<Detection>& out, const Box& box, int numClasses, bool multiLabel,
                   float threshold, int batch, ScoreFn score) {
  if (!detail::finiteBox(box)) return;
  if (multiLabel) {
    for (int c = 0; c < numClasses; ++c) {
      const float s = score(c);
      if (s >= threshold) {
        Detection d;
        d.box = box;
        d.classId = c;
        d.score = s;
        d.batchIndex = batch;
        out.push_back(std::move(d));
      }
    }
    return;
  }
  int best = -1;
  float bestS = 0.f;
  for (int c = 0; c < numClasses; ++c) {
    const float s = score(c);
    if (std::isnan(s)) continue;
    if (best < 0 || s > bestS) {
      best = c;
      bestS = s;
    }
  }
  if (best < 0 || !(bestS >= threshold)) return;
  Detection d;
  d.box = box;
  d.classId = best;
  d.score = bestS;
  d.batchIndex = batch;
  out.push_back(std::move(d));
}

Box centreBox(float cx, float cy, float w, float h) {
  return Box{cx - w * 0.5f, cy - h * 0.5f, cx + w * 0.5f, cy + h * 0.5f};
}

Status checkClasses(int numClasses, int64_t fromTensor, const char* what, const Tensor& t) {
  if (numClasses < 1)
    return Status(ErrorCode::kInvalidArgument, std::string(what) + ": numClasses " +
                                                   std::to_string(numClasses) + " must be >= 1");
  if (fromTensor != numClasses)
    return Status(ErrorCode::kInvalidArgument,
                  std::string(what) + " " + t.describe() + " holds " + std::to_string(fromTensor) +
                      " classes but numClasses is " + std::to_string(numClasses));
  return Status::Ok();
}

}  // namespace

Expected<std::vector<Detection>> decodeYoloV5(const Tensor& output, const YoloV5Params& p,
                                              const std::vector<Transform>& transforms) {
  const char* what = "YOLOv5 output [N, boxes, 5 + classes]";
  EI_RETURN_IF_ERROR(detail::checkFloatTensor(output, what, 3));
  EI_RETURN_IF_ERROR(validate(p.nms));
  const int64_t n = output.shape()[0], nb = output.shape()[1], row = output.shape()[2];
  if (row < 6)
    return Status(ErrorCode::kInvalidArgument, std::string(what) + " " + output.describe() +
                                                   ": last dimension must be at least 6");
  EI_RETURN_IF_ERROR(checkClasses(p.numClasses, row - 5, what, output));
  EI_RETURN_IF_ERROR(detail::checkLabels(p.labels, p.numClasses, "YOLOv5"));
  EI_RETURN_IF_ERROR(detail::checkTransforms(transforms, n));
  const detail::FloatElements v(output);
  std::vector<Detection> cands;
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < nb; ++i) {
      const float* r = v.data() + (b * nb + i) * row;
      const float obj = p.scoresAreLogits ? detail::sigmoid(r[4]) : r[4];
      addCandidates(cands, centreBox(r[0], r[1], r[2], r[3]), p.numClasses, p.multiLabel,
                    p.nms.scoreThreshold, static_cast<int>(b), [&](int c) {
                      const float cls = p.scoresAreLogits ? detail::sigmoid(r[5 + c]) : r[5 + c];
                      return obj * cls;
                    });
    }
  }
  EI_ASSIGN_OR_RETURN(std::vector<Detection> dets, nms(cands, p.nms));
  detail::finishDetections(dets, p.labels, transforms);
  return dets;
}

Expected<std::vector<Detection>> decodeYoloV8(const Tensor& output, const YoloV8Params& p,
                                              const std::vector<Transform>& transforms) {
  const char* what = p.rawDfl ? "YOLOv8 raw head [N, 4 * regMax + classes, anchors]"
                              : "YOLOv8 output [N, 4 + classes, anchors]";
  EI_RETURN_IF_ERROR(detail::checkFloatTensor(output, what, 3));
  EI_RETURN_IF_ERROR(validate(p.nms));
  const int64_t n = output.shape()[0], ch = output.shape()[1], na = output.shape()[2];
  if (p.rawDfl && p.regMax < 1)
    return Status(ErrorCode::kInvalidArgument,
                  "YOLOv8 regMax " + std::to_string(p.regMax) + " must be >= 1");
  const int64_t boxCh = p.rawDfl ? 4 * static_cast<int64_t>(p.regMax) : 4;
  if (ch <= boxCh)
    return Status(ErrorCode::kInvalidArgument, std::string(what) + " " + output.describe() +
                                                   ": needs more than " + std::to_string(boxCh) +
                                                   " channels (box + at least one class)");
  EI_RETURN_IF_ERROR(checkClasses(p.numClasses, ch - boxCh, what, output));
  EI_RETURN_IF_ERROR(detail::checkLabels(p.labels, p.numClasses, "YOLOv8"));
  EI_RETURN_IF_ERROR(detail::checkTransforms(transforms, n));

  // Anchor points (grid units) and strides for the raw DFL head.
  std::vector<float> ax, ay, as;
  if (p.rawDfl) {
    if (p.strides.empty())
      return Status(ErrorCode::kInvalidArgument, "YOLOv8 raw DFL: strides are empty");
    if (p.inputWidth < 1 || p.inputHeight < 1)
      return Status(ErrorCode::kInvalidArgument,
                    "YOLOv8 raw DFL: input size " + std::to_string(p.inputWidth) + "x" +
                        std::to_string(p.inputHeight) + " must be positive");
    for (int s : p.strides) {
      if (s < 1)
        return Status(ErrorCode::kInvalidArgument,
                      "YOLOv8 raw DFL: stride " + std::to_string(s) + " must be >= 1");
      const int gh = (p.inputHeight + s - 1) / s, gw = (p.inputWidth + s - 1) / s;
      for (int y = 0; y < gh; ++y)
        for (int x = 0; x < gw; ++x) {
          ax.push_back(static_cast<float>(x) + 0.5f);
          ay.push_back(static_cast<float>(y) + 0.5f);
          as.push_back(static_cast<float>(s));
        }
    }
    if (static_cast<int64_t>(ax.size()) != na)
      return Status(ErrorCode::kInvalidArgument,
                    std::string(what) + " " + output.describe() + " has " + std::to_string(na) +
                        " anchors, but strides and input size " + std::to_string(p.inputWidth) +
                        "x" + std::to_string(p.inputHeight) + " give " + std::to_string(ax.size()));
  }

  const detail::FloatElements v(output);
  std::vector<Detection> cands;
  for (int64_t b = 0; b < n; ++b) {
    const float* img = v.data() + b * ch * na;
    auto at = [&](int64_t channel, int64_t a) { return img[channel * na + a]; };
    for (int64_t a = 0; a < na; ++a) {
      Box box;
      if (p.rawDfl) {
        float d[4];
        for (int k = 0; k < 4; ++k) {
          float m = at(k * p.regMax, a);
          for (int i = 1; i < p.regMax; ++i) m = std::max(m, at(k * p.regMax + i, a));
          float num = 0.f, den = 0.f;
          for (int i = 0; i < p.regMax; ++i) {
            const float ei = std::exp(at(k * p.regMax + i, a) - m);
            num += static_cast<float>(i) * ei;
            den += ei;
          }
          d[k] = num / den;
        }
        const size_t ai = static_cast<size_t>(a);
        box = Box{(ax[ai] - d[0]) * as[ai], (ay[ai] - d[1]) * as[ai], (ax[ai] + d[2]) * as[ai],
                  (ay[ai] + d[3]) * as[ai]};
      } else {
        box = centreBox(at(0, a), at(1, a), at(2, a), at(3, a));
      }
      addCandidates(cands, box, p.numClasses, p.multiLabel, p.nms.scoreThreshold,
                    static_cast<int>(b), [&](int c) {
                      const float s = at(boxCh + c, a);
                      return p.scoresAreLogits ? detail::sigmoid(s) : s;
                    });
    }
  }
  EI_ASSIGN_OR_RETURN(std::vector<Detection> dets, nms(cands, p.nms));
  detail::finishDetections(dets, p.labels, transforms);
  return dets;
}

}  // namespace edgeinfer::vision
