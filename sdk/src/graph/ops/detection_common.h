// Value-dependent computations shared by the detection shape functions
// (graph/ops/detection_schemas.cpp) and the CPU reference kernels (kernels/ref/detection.cpp):
// NonMaxSuppression and NonZero have outputs whose size depends on the input *values*, so the
// shape function (at run time, when the values are known) and the kernel must agree exactly on
// the selection. Header-only, no device code.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "edgeinfer/tensor.h"

namespace edgeinfer::graph {

/// NonMaxSuppression parameters (inputs 2-4 and the center_point_box attribute).
struct NmsParams {
  int64_t maxOutputPerClass = 0;  // absent input: 0, i.e. no output
  float iouThreshold = 0.f;
  bool hasScoreThreshold = false;
  float scoreThreshold = 0.f;
  bool centerPointBox = false;  // [xc, yc, w, h] instead of [y1, x1, y2, x2]
};

namespace detail {

struct NmsBox {
  float y1, x1, y2, x2;  // normalised so that y1 <= y2 and x1 <= x2
};

inline NmsBox nmsBox(const Tensor& boxes, int64_t base, bool center) {
  const float a = static_cast<float>(boxes.getAsDouble(base + 0));
  const float b = static_cast<float>(boxes.getAsDouble(base + 1));
  const float c = static_cast<float>(boxes.getAsDouble(base + 2));
  const float d = static_cast<float>(boxes.getAsDouble(base + 3));
  if (center) {  // [x_center, y_center, width, height]
    return {b - d / 2.f, a - c / 2.f, b + d / 2.f, a + c / 2.f};
  }
  // [y1, x1, y2, x2] with either diagonal pair
  return {std::min(a, c), std::min(b, d), std::max(a, c), std::max(b, d)};
}

/// True if the IoU of the two boxes is above the threshold (onnxruntime's SuppressByIOU).
inline bool suppressByIou(const NmsBox& p, const NmsBox& q, float threshold) {
  const float ix1 = std::max(p.x1, q.x1), iy1 = std::max(p.y1, q.y1);
  const float ix2 = std::min(p.x2, q.x2), iy2 = std::min(p.y2, q.y2);
  const float iw = ix2 - ix1, ih = iy2 - iy1;
  if (iw <= 0.f || ih <= 0.f) return false;
  const float inter = iw * ih;
  const float areaP = (p.x2 - p.x1) * (p.y2 - p.y1);
  const float areaQ = (q.x2 - q.x1) * (q.y2 - q.y1);
  const float uni = areaP + areaQ - inter;
  if (areaP <= 0.f || areaQ <= 0.f || uni <= 0.f) return false;
  return inter / uni > threshold;
}

}  // namespace detail

/// Runs NonMaxSuppression on boxes [B, N, 4] and scores [B, C, N] (shapes already checked).
/// Returns the selected (batch, class, box) triples in output order: batch-major, then class,
/// then by decreasing score (ties: lower box index first). A NaN score is never selected (ONNX
/// leaves it undefined; without this rule the sort would have no order).
inline std::vector<std::array<int64_t, 3>> nonMaxSuppression(const Tensor& boxes,
                                                             const Tensor& scores,
                                                             const NmsParams& p) {
  std::vector<std::array<int64_t, 3>> selected;
  const int64_t nb = scores.shape()[0], nc = scores.shape()[1], n = scores.shape()[2];
  if (p.maxOutputPerClass <= 0) return selected;
  std::vector<detail::NmsBox> bx(static_cast<size_t>(n));
  std::vector<int64_t> order;
  std::vector<size_t> kept;
  for (int64_t b = 0; b < nb; ++b) {
    for (int64_t i = 0; i < n; ++i)
      bx[static_cast<size_t>(i)] = detail::nmsBox(boxes, (b * n + i) * 4, p.centerPointBox);
    for (int64_t c = 0; c < nc; ++c) {
      const int64_t sBase = (b * nc + c) * n;
      order.clear();
      for (int64_t i = 0; i < n; ++i) {
        const double s = scores.getAsDouble(sBase + i);
        if (!std::isnan(s) && (!p.hasScoreThreshold || static_cast<float>(s) > p.scoreThreshold))
          order.push_back(i);
      }
      std::stable_sort(order.begin(), order.end(), [&](int64_t l, int64_t r) {
        return scores.getAsDouble(sBase + l) > scores.getAsDouble(sBase + r);
      });
      kept.clear();
      for (int64_t i : order) {
        if (static_cast<int64_t>(kept.size()) >= p.maxOutputPerClass) break;
        bool keep = true;
        for (size_t k : kept)
          if (detail::suppressByIou(bx[k], bx[static_cast<size_t>(i)], p.iouThreshold)) {
            keep = false;
            break;
          }
        if (!keep) continue;
        kept.push_back(static_cast<size_t>(i));
        selected.push_back({b, c, i});
      }
    }
  }
  return selected;
}

/// Number of non-zero elements of a host tensor (NaN counts as non-zero).
inline int64_t countNonZero(const Tensor& x) {
  int64_t count = 0;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (x.getAsDouble(i) != 0.0) ++count;
  return count;
}

}  // namespace edgeinfer::graph
