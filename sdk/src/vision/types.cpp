#include "edgeinfer/vision/types.h"

#include <algorithm>

namespace edgeinfer::vision {

float iou(const Box& a, const Box& b) {
  const Box inter{std::max(a.x1, b.x1), std::max(a.y1, b.y1), std::min(a.x2, b.x2),
                  std::min(a.y2, b.y2)};
  const float i = inter.area();
  const float u = a.area() + b.area() - i;
  return u > 0.f ? i / u : 0.f;
}

Box Transform::toFrame(const Box& b) const {
  Box r{toFrameX(b.x1), toFrameY(b.y1), toFrameX(b.x2), toFrameY(b.y2)};
  if (frameWidth > 0) {
    r.x1 = std::clamp(r.x1, 0.f, frameWidth);
    r.x2 = std::clamp(r.x2, 0.f, frameWidth);
  }
  if (frameHeight > 0) {
    r.y1 = std::clamp(r.y1, 0.f, frameHeight);
    r.y2 = std::clamp(r.y2, 0.f, frameHeight);
  }
  return r;
}

}  // namespace edgeinfer::vision
