#include "overlay_draw.h"

#include <cmath>
#include <cstdio>
#include <opencv2/imgproc.hpp>

namespace edgeinfer::gst {

const Rgb kPalette[kPaletteSize] = {
    {0, 255, 0},   {255, 128, 0}, {0, 160, 255}, {255, 0, 255}, {255, 255, 0}, {0, 255, 255},
    {128, 0, 255}, {255, 0, 64},  {128, 255, 0}, {0, 96, 160},  {160, 96, 64}, {255, 192, 203},
};

Rgb classColour(int classId) {
  const int i = ((classId % kPaletteSize) + kPaletteSize) % kPaletteSize;
  return kPalette[i];
}

Yuv toYuv(Rgb c) {
  const int r = c.r, g = c.g, b = c.b;
  Yuv out;
  out.y = static_cast<uint8_t>(16 + ((66 * r + 129 * g + 25 * b + 128) >> 8));
  out.u = static_cast<uint8_t>(128 + ((-38 * r - 74 * g + 112 * b + 128) >> 8));
  out.v = static_cast<uint8_t>(128 + ((112 * r - 94 * g - 18 * b + 128) >> 8));
  return out;
}

Rgb textColour(Rgb background) {
  return toYuv(background).y >= 128 ? Rgb{0, 0, 0} : Rgb{255, 255, 255};
}

namespace {

std::string scored(const std::string& name, float score) {
  char buf[32];
  std::snprintf(buf, sizeof buf, " %.2f", static_cast<double>(score));
  return name + buf;
}

}  // namespace

std::string classText(const vision::Classification& c) {
  return scored(c.label.empty() ? "class " + std::to_string(c.classId) : c.label, c.score);
}

std::string labelText(const Object& o) {
  const vision::Detection& d = o.detection;
  std::string text =
      scored(d.label.empty() ? "class " + std::to_string(d.classId) : d.label, d.score);
  for (const ObjectClassification& oc : o.classifications)
    if (!oc.classes.empty()) text += " | " + classText(oc.classes.front());
  return text;
}

namespace {

constexpr int kFont = cv::FONT_HERSHEY_SIMPLEX;

bool isYuv(vision::PixelFormat f) {
  return f == vision::PixelFormat::kNV12 || f == vision::PixelFormat::kI420;
}

int floorHalf(int v) {
  return v >= 0 ? v / 2 : -((-v + 1) / 2);
}
cv::Point half(cv::Point p) {
  return {floorHalf(p.x), floorHalf(p.y)};
}

// The planes of a frame as OpenCV images (no copies) and how to draw on them.
class Canvas {
 public:
  explicit Canvas(const OverlayFrame& f) : format_(f.format) {
    using vision::PixelFormat;
    switch (f.format) {
      case PixelFormat::kRGBA:
      case PixelFormat::kBGRA:
      case PixelFormat::kRGBx:
      case PixelFormat::kBGRx:
        packed_ =
            cv::Mat(f.height, f.width, CV_8UC4, f.planes[0], static_cast<size_t>(f.strides[0]));
        break;
      case PixelFormat::kRGB:
      case PixelFormat::kBGR:
        packed_ =
            cv::Mat(f.height, f.width, CV_8UC3, f.planes[0], static_cast<size_t>(f.strides[0]));
        break;
      case PixelFormat::kNV12:
      case PixelFormat::kI420: {
        luma_ = cv::Mat(f.height, f.width, CV_8UC1, f.planes[0], static_cast<size_t>(f.strides[0]));
        const int cw = (f.width + 1) / 2, ch = (f.height + 1) / 2;
        if (f.format == PixelFormat::kNV12) {
          uv_ = cv::Mat(ch, cw, CV_8UC2, f.planes[1], static_cast<size_t>(f.strides[1]));
        } else {
          u_ = cv::Mat(ch, cw, CV_8UC1, f.planes[1], static_cast<size_t>(f.strides[1]));
          v_ = cv::Mat(ch, cw, CV_8UC1, f.planes[2], static_cast<size_t>(f.strides[2]));
        }
        break;
      }
      case PixelFormat::kGray8:
        break;
    }
  }

  // A packed colour in the frame's byte order.
  cv::Scalar packed(Rgb c) const {
    using vision::PixelFormat;
    const bool bgr = format_ == PixelFormat::kBGRA || format_ == PixelFormat::kBGRx ||
                     format_ == PixelFormat::kBGR;
    return bgr ? cv::Scalar(c.b, c.g, c.r, 255) : cv::Scalar(c.r, c.g, c.b, 255);
  }

  // cv::rectangle from p1 to p2 (thickness, or cv::FILLED).
  void rectangle(cv::Point p1, cv::Point p2, Rgb c, int thickness) {
    if (!isYuv(format_)) {
      cv::rectangle(packed_, p1, p2, packed(c), thickness, cv::LINE_8);
      return;
    }
    const Yuv y = toYuv(c);
    cv::rectangle(luma_, p1, p2, cv::Scalar(y.y), thickness, cv::LINE_8);
    const int ct = thickness < 0 ? thickness : std::max(1, thickness / 2);
    eachChroma(y, [&](cv::Mat& plane, const cv::Scalar& s) {
      cv::rectangle(plane, half(p1), half(p2), s, ct, cv::LINE_8);
    });
  }

  void disc(cv::Point centre, int radius, Rgb c) {
    if (!isYuv(format_)) {
      cv::circle(packed_, centre, radius, packed(c), cv::FILLED, cv::LINE_8);
      return;
    }
    const Yuv y = toYuv(c);
    cv::circle(luma_, centre, radius, cv::Scalar(y.y), cv::FILLED, cv::LINE_8);
    eachChroma(y, [&](cv::Mat& plane, const cv::Scalar& s) {
      cv::circle(plane, half(centre), std::max(1, radius / 2), s, cv::FILLED, cv::LINE_8);
    });
  }

  void text(const std::string& s, cv::Point origin, double scale, Rgb c) {
    if (!isYuv(format_)) {
      cv::putText(packed_, s, origin, kFont, scale, packed(c), 1, cv::LINE_8);
      return;
    }
    const uint8_t y = c.r == 0 ? 16 : 235;  // textColour(): black or white
    cv::putText(luma_, s, origin, kFont, scale, cv::Scalar(y), 1, cv::LINE_8);
  }

 private:
  template <typename F>
  void eachChroma(const Yuv& y, F&& draw) {
    if (format_ == vision::PixelFormat::kNV12) {
      draw(uv_, cv::Scalar(y.u, y.v));
    } else {
      draw(u_, cv::Scalar(y.u));
      draw(v_, cv::Scalar(y.v));
    }
  }

  vision::PixelFormat format_;
  cv::Mat packed_, luma_, uv_, u_, v_;
};

// The label bar and its text, the bar's top-left at (x, y) or above (x, anchorY).
void label(Canvas& canvas, const std::string& text, int x, int anchorY, bool above, Rgb colour,
           double scale) {
  int baseline = 0;
  const cv::Size size = cv::getTextSize(text, kFont, scale, 1, &baseline);
  const int barW = size.width + 4, barH = size.height + baseline + 4;
  int top = anchorY;
  if (above && anchorY - barH >= 0) top = anchorY - barH;
  canvas.rectangle({x, top}, {x + barW - 1, top + barH - 1}, colour, cv::FILLED);
  canvas.text(text, {x + 2, top + 2 + size.height}, scale, textColour(colour));
}

}  // namespace

Status drawResults(const OverlayFrame& frame, const std::vector<const Results*>& results,
                   const OverlayStyle& style) {
  if (frame.format == vision::PixelFormat::kGray8)
    return Status(ErrorCode::kUnsupported, "edgeoverlay does not draw on GRAY8 frames");
  Canvas canvas(frame);
  int baseline = 0;
  const int lineH =
      cv::getTextSize("Ag", kFont, style.fontScale, 1, &baseline).height + baseline + 4;
  int line = 0;  // whole-frame classification lines, over every meta
  for (const Results* r : results) {
    for (const Object& o : r->objects) {
      const vision::Detection& d = o.detection;
      const Rgb colour = classColour(d.classId);
      const cv::Point p1(static_cast<int>(std::lround(d.box.x1)),
                         static_cast<int>(std::lround(d.box.y1)));
      const cv::Point p2(static_cast<int>(std::lround(d.box.x2)) - 1,
                         static_cast<int>(std::lround(d.box.y2)) - 1);
      if (p2.x < p1.x || p2.y < p1.y) continue;
      canvas.rectangle(p1, p2, colour, style.thickness);
      if (style.keypoints)
        for (const vision::Keypoint& k : d.keypoints)
          canvas.disc({static_cast<int>(std::lround(k.x)), static_cast<int>(std::lround(k.y))},
                      style.thickness + 1, kKeypointColour);
      if (style.labels) label(canvas, labelText(o), p1.x, p1.y, true, colour, style.fontScale);
    }
    if (style.labels)
      for (const vision::Classification& c : r->classifications)
        label(canvas, classText(c), 0, line++ * lineH, false, classColour(c.classId),
              style.fontScale);
  }
  return Status::Ok();
}

}  // namespace edgeinfer::gst
