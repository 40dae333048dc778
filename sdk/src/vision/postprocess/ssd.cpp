// SSD anchor generation and box decoding as MediaPipe's SsdAnchorsCalculator and
// TensorsToDetectionsCalculator do it (BlazeFace); see postprocess.h for the formulas.
#include <algorithm>
#include <cmath>

#include "vision/postprocess/common.h"

namespace edgeinfer::vision {
namespace {

float anchorScale(float minScale, float maxScale, size_t index, size_t count) {
  if (count == 1) return (minScale + maxScale) * 0.5f;
  return minScale +
         (maxScale - minScale) * static_cast<float>(index) / (static_cast<float>(count) - 1.0f);
}

}  // namespace

Expected<std::vector<Anchor>> generateSsdAnchors(const SsdAnchorOptions& o) {
  if (o.numLayers < 1 || static_cast<size_t>(o.numLayers) != o.strides.size())
    return Status(ErrorCode::kInvalidArgument,
                  "SSD anchors: numLayers is " + std::to_string(o.numLayers) + " but " +
                      std::to_string(o.strides.size()) + " strides are given");
  if (o.inputWidth < 1 || o.inputHeight < 1)
    return Status(ErrorCode::kInvalidArgument,
                  "SSD anchors: input size " + std::to_string(o.inputWidth) + "x" +
                      std::to_string(o.inputHeight) + " must be positive");
  for (int s : o.strides)
    if (s < 1)
      return Status(ErrorCode::kInvalidArgument,
                    "SSD anchors: stride " + std::to_string(s) + " must be >= 1");
  if (o.aspectRatios.empty() && o.interpolatedScaleAspectRatio <= 0.f)
    return Status(ErrorCode::kInvalidArgument,
                  "SSD anchors: no aspect ratios and no interpolated scale: no anchors per cell");
  for (float r : o.aspectRatios)
    if (!(r > 0.f) || !std::isfinite(r))
      return Status(ErrorCode::kInvalidArgument,
                    "SSD anchors: aspect ratio " + std::to_string(r) + " must be > 0");
  if (!(o.minScale > 0.f) || !(o.maxScale >= o.minScale) || !std::isfinite(o.maxScale))
    return Status(ErrorCode::kInvalidArgument,
                  "SSD anchors: scales must satisfy 0 < minScale <= maxScale (min " +
                      std::to_string(o.minScale) + ", max " + std::to_string(o.maxScale) + ")");

  std::vector<Anchor> anchors;
  const size_t numStrides = o.strides.size();
  size_t layer = 0;
  while (layer < numStrides) {
    std::vector<float> ratios, scales;
    size_t last = layer;
    while (last < numStrides && o.strides[last] == o.strides[layer]) {
      const float scale = anchorScale(o.minScale, o.maxScale, last, numStrides);
      if (last == 0 && o.reduceBoxesInLowestLayer) {
        ratios.insert(ratios.end(), {1.0f, 2.0f, 0.5f});
        scales.insert(scales.end(), {0.1f, scale, scale});
      } else {
        for (float r : o.aspectRatios) {
          ratios.push_back(r);
          scales.push_back(scale);
        }
        if (o.interpolatedScaleAspectRatio > 0.f) {
          const float next = last == numStrides - 1
                                 ? 1.0f
                                 : anchorScale(o.minScale, o.maxScale, last + 1, numStrides);
          scales.push_back(std::sqrt(scale * next));
          ratios.push_back(o.interpolatedScaleAspectRatio);
        }
      }
      ++last;
    }
    std::vector<float> aw(ratios.size()), ah(ratios.size());
    for (size_t i = 0; i < ratios.size(); ++i) {
      const float sq = std::sqrt(ratios[i]);
      ah[i] = scales[i] / sq;
      aw[i] = scales[i] * sq;
    }
    const int stride = o.strides[layer];
    const int fh = (o.inputHeight + stride - 1) / stride, fw = (o.inputWidth + stride - 1) / stride;
    for (int y = 0; y < fh; ++y)
      for (int x = 0; x < fw; ++x)
        for (size_t k = 0; k < ratios.size(); ++k) {
          Anchor a;
          a.xCenter = (static_cast<float>(x) + o.anchorOffsetX) / static_cast<float>(fw);
          a.yCenter = (static_cast<float>(y) + o.anchorOffsetY) / static_cast<float>(fh);
          a.w = o.fixedAnchorSize ? 1.0f : aw[k];
          a.h = o.fixedAnchorSize ? 1.0f : ah[k];
          anchors.push_back(a);
        }
    layer = last;
  }
  return anchors;
}

SsdParams blazeFaceFrontParams() {
  SsdParams p;
  p.anchors = SsdAnchorOptions{};  // the defaults are BlazeFace front's
  p.numClasses = 1;
  p.numCoords = 16;
  p.numKeypoints = 6;
  p.xScale = p.yScale = p.wScale = p.hScale = 128.f;
  p.sigmoidScore = true;
  p.scoreClippingThresh = 100.f;
  p.nms.scoreThreshold = 0.5f;
  p.nms.iouThreshold = 0.3f;
  p.nms.maxDetections = 100;
  p.nms.method = NmsMethod::kWeighted;
  p.nms.classAgnostic = true;
  p.boxOutputs = {"Identity_2:0", "Identity_3:0"};
  p.scoreOutputs = {"Identity:0", "Identity_1:0"};
  return p;
}

SsdParams blazeFaceBackParams() {
  SsdParams p = blazeFaceFrontParams();
  p.anchors.minScale = 0.15625f;
  p.anchors.inputWidth = p.anchors.inputHeight = 256;
  p.anchors.strides = {16, 32, 32, 32};
  p.xScale = p.yScale = p.wScale = p.hScale = 256.f;
  return p;
}

Expected<std::vector<Detection>> decodeSsd(const std::vector<Tensor>& boxes,
                                           const std::vector<Tensor>& scores, const SsdParams& p,
                                           const std::vector<Transform>& transforms) {
  EI_RETURN_IF_ERROR(validate(p.nms));
  if (boxes.empty() || boxes.size() != scores.size())
    return Status(ErrorCode::kInvalidArgument,
                  "SSD: " + std::to_string(boxes.size()) + " box tensors and " +
                      std::to_string(scores.size()) +
                      " score tensors (need the same number, at least one)");
  if (p.numClasses < 1 || p.numKeypoints < 0 || p.numCoords < 4 + 2 * p.numKeypoints)
    return Status(ErrorCode::kInvalidArgument,
                  "SSD: numClasses " + std::to_string(p.numClasses) +
                      " must be >= 1 and numCoords " + std::to_string(p.numCoords) +
                      " >= 4 + 2 * numKeypoints (" + std::to_string(p.numKeypoints) + ")");
  for (float s : {p.xScale, p.yScale, p.wScale, p.hScale})
    if (!(s > 0.f) || !std::isfinite(s))
      return Status(ErrorCode::kInvalidArgument,
                    "SSD: x/y/w/h scales must be finite and > 0 (got " + std::to_string(s) + ")");
  EI_RETURN_IF_ERROR(detail::checkLabels(p.labels, p.numClasses, "SSD"));
  EI_ASSIGN_OR_RETURN(std::vector<Anchor> anchors, generateSsdAnchors(p.anchors));

  int64_t n = -1, total = 0;
  for (size_t t = 0; t < boxes.size(); ++t) {
    const std::string bi = "SSD boxes[" + std::to_string(t) + "] [N, anchors, numCoords]";
    const std::string si = "SSD scores[" + std::to_string(t) + "] [N, anchors, numClasses]";
    EI_RETURN_IF_ERROR(detail::checkFloatTensor(boxes[t], bi.c_str(), 3));
    EI_RETURN_IF_ERROR(detail::checkFloatTensor(scores[t], si.c_str(), 3));
    const Shape& bs = boxes[t].shape();
    const Shape& ss = scores[t].shape();
    if (bs[2] != p.numCoords)
      return Status(ErrorCode::kInvalidArgument,
                    bi + " " + boxes[t].describe() + ": " + std::to_string(bs[2]) +
                        " coordinates, numCoords is " + std::to_string(p.numCoords));
    if (ss[2] != p.numClasses)
      return Status(ErrorCode::kInvalidArgument,
                    si + " " + scores[t].describe() + ": " + std::to_string(ss[2]) +
                        " classes, numClasses is " + std::to_string(p.numClasses));
    if (bs[0] != ss[0] || bs[1] != ss[1])
      return Status(ErrorCode::kInvalidArgument, "SSD: boxes[" + std::to_string(t) + "] " +
                                                     boxes[t].describe() + " and scores " +
                                                     scores[t].describe() +
                                                     " disagree on batch or anchor count");
    if (n >= 0 && bs[0] != n)
      return Status(ErrorCode::kInvalidArgument, "SSD: output tensors have different batch sizes");
    n = bs[0];
    total += bs[1];
  }
  if (total != static_cast<int64_t>(anchors.size()))
    return Status(ErrorCode::kInvalidArgument, "SSD: the outputs hold " + std::to_string(total) +
                                                   " anchors but the anchor options generate " +
                                                   std::to_string(anchors.size()) +
                                                   " (check strides and input size)");
  EI_RETURN_IF_ERROR(detail::checkTransforms(transforms, n));

  const float inW = static_cast<float>(p.anchors.inputWidth);
  const float inH = static_cast<float>(p.anchors.inputHeight);
  const float clip = p.scoreClippingThresh;
  std::vector<std::vector<float>> boxValues, scoreValues;
  for (size_t t = 0; t < boxes.size(); ++t) {
    boxValues.push_back(detail::toFloats(boxes[t]));
    scoreValues.push_back(detail::toFloats(scores[t]));
  }
  std::vector<Detection> cands;
  for (int64_t b = 0; b < n; ++b) {
    size_t anchorBase = 0;
    for (size_t t = 0; t < boxes.size(); ++t) {
      const std::vector<float>& bv = boxValues[t];
      const std::vector<float>& sv = scoreValues[t];
      const int64_t na = boxes[t].shape()[1];
      for (int64_t i = 0; i < na; ++i) {
        const Anchor& a = anchors[anchorBase + static_cast<size_t>(i)];
        const float* sc = sv.data() + (b * na + i) * p.numClasses;
        int best = -1;
        float bestS = 0.f;
        for (int c = 0; c < p.numClasses; ++c) {
          float s = sc[c];
          if (p.sigmoidScore) {
            if (clip > 0.f) s = s < -clip ? -clip : (s > clip ? clip : s);
            s = detail::sigmoid(s);
          }
          if (std::isnan(s)) continue;
          if (best < 0 || s > bestS) {
            best = c;
            bestS = s;
          }
        }
        if (best < 0 || !(bestS >= p.nms.scoreThreshold)) continue;
        const float* r = bv.data() + (b * na + i) * p.numCoords;
        const float cx = r[0] / p.xScale * a.w + a.xCenter;
        const float cy = r[1] / p.yScale * a.h + a.yCenter;
        const float w =
            p.applyExponentialOnBoxSize ? std::exp(r[2] / p.wScale) * a.w : r[2] / p.wScale * a.w;
        const float h =
            p.applyExponentialOnBoxSize ? std::exp(r[3] / p.hScale) * a.h : r[3] / p.hScale * a.h;
        Detection d;
        d.box = Box{(cx - w / 2.f) * inW, (cy - h / 2.f) * inH, (cx + w / 2.f) * inW,
                    (cy + h / 2.f) * inH};
        if (!detail::finiteBox(d.box)) continue;
        d.classId = best;
        d.score = bestS;
        d.batchIndex = static_cast<int>(b);
        for (int k = 0; k < p.numKeypoints; ++k) {
          Keypoint kp;
          kp.x = (r[4 + 2 * k] / p.xScale * a.w + a.xCenter) * inW;
          kp.y = (r[5 + 2 * k] / p.yScale * a.h + a.yCenter) * inH;
          kp.score = bestS;
          d.keypoints.push_back(kp);
        }
        cands.push_back(std::move(d));
      }
      anchorBase += static_cast<size_t>(na);
    }
  }
  EI_ASSIGN_OR_RETURN(std::vector<Detection> dets, nms(cands, p.nms));
  detail::finishDetections(dets, p.labels, transforms);
  return dets;
}

Expected<std::vector<Detection>> decodeSsdOutputs(const std::map<std::string, Tensor>& outputs,
                                                  const SsdParams& params,
                                                  const std::vector<Transform>& transforms) {
  std::vector<Tensor> boxes, scores;
  for (const auto& [names, dst] : {std::make_pair(&params.boxOutputs, &boxes),
                                   std::make_pair(&params.scoreOutputs, &scores)}) {
    for (const std::string& name : *names) {
      auto it = outputs.find(name);
      if (it == outputs.end())
        return Status(ErrorCode::kNotFound, "SSD: the model has no output named '" + name + "'");
      dst->push_back(it->second);
    }
  }
  return decodeSsd(boxes, scores, params, transforms);
}

Status ssdOutputView(const SsdParams& params, std::map<std::string, Tensor>& reference,
                     std::map<std::string, Tensor>& quantized) {
  if (params.boxOutputs.size() != params.scoreOutputs.size())
    return Status(ErrorCode::kInvalidArgument,
                  "SSD output view: " + std::to_string(params.boxOutputs.size()) +
                      " box outputs but " + std::to_string(params.scoreOutputs.size()) +
                      " score outputs (one of each a head)");
  const auto find = [](std::map<std::string, Tensor>& m,
                       const std::string& name) -> Expected<Tensor*> {
    auto it = m.find(name);
    if (it == m.end())
      return Status(ErrorCode::kNotFound, "SSD output view: no output named '" + name + "'");
    if (it->second.dtype() != DataType::kFloat32)
      return Status(ErrorCode::kInvalidArgument, "SSD output view: output '" + name + "' is " +
                                                     it->second.describe() + ", not float32");
    return &it->second;
  };
  const int classes = std::max(1, params.numClasses);
  for (size_t h = 0; h < params.scoreOutputs.size(); ++h) {
    EI_ASSIGN_OR_RETURN(Tensor * rs, find(reference, params.scoreOutputs[h]));
    EI_ASSIGN_OR_RETURN(Tensor * qs, find(quantized, params.scoreOutputs[h]));
    EI_ASSIGN_OR_RETURN(Tensor * rb, find(reference, params.boxOutputs[h]));
    EI_ASSIGN_OR_RETURN(Tensor * qb, find(quantized, params.boxOutputs[h]));
    const int64_t anchors = rs->numel() / classes;
    if (rs->numel() % classes || qs->numel() != rs->numel() || anchors == 0 ||
        rb->numel() % anchors || qb->numel() != rb->numel())
      return Status(ErrorCode::kInvalidArgument, "SSD output view: '" + params.scoreOutputs[h] +
                                                     "' (" + rs->describe() + ") and '" +
                                                     params.boxOutputs[h] + "' (" + rb->describe() +
                                                     ") do not hold the same anchors");
    const auto score = [&](float v) {
      if (params.scoreClippingThresh > 0)
        v = std::min(std::max(v, -params.scoreClippingThresh), params.scoreClippingThresh);
      return params.sigmoidScore ? 1.f / (1.f + std::exp(-v)) : v;
    };
    float* r = rs->data<float>();
    float* q = qs->data<float>();
    const int64_t per = rb->numel() / anchors;
    float* br = rb->data<float>();
    float* bq = qb->data<float>();
    for (int64_t a = 0; a < anchors; ++a) {
      float w = 0.f;
      for (int c = 0; c < classes; ++c) {
        const int64_t i = a * classes + c;
        r[i] = score(r[i]);
        q[i] = score(q[i]);
        w = std::max(w, r[i]);
      }
      for (int64_t k = 0; k < per; ++k) {
        br[a * per + k] *= w;
        bq[a * per + k] *= w;
      }
    }
  }
  return Status::Ok();
}

}  // namespace edgeinfer::vision
