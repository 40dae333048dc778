#include "overlay_draw.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <opencv2/imgproc.hpp>
#include <unordered_map>

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
using Kind = OverlayPrimitive::Kind;

bool isYuv(vision::PixelFormat f) {
  return f == vision::PixelFormat::kNV12 || f == vision::PixelFormat::kI420;
}

int floorHalf(int v) {
  return v >= 0 ? v / 2 : -((-v + 1) / 2);
}

// Turns the specification's steps into primitives, one per plane drawn on.
class PrimitiveList {
 public:
  explicit PrimitiveList(vision::PixelFormat format) : format_(format) {}

  void rectangle(cv::Point p1, cv::Point p2, Rgb c, int thickness) {
    if (!isYuv(format_)) {
      add(Kind::kRectangle, 0, p1, p2, packed(c)).thickness = thickness;
      return;
    }
    const Yuv y = toYuv(c);
    add(Kind::kRectangle, 0, p1, p2, {y.y}).thickness = thickness;
    const int ct = thickness < 0 ? thickness : std::max(1, thickness / 2);
    eachChroma(y, [&](int plane, std::vector<uint8_t> v) {
      add(Kind::kRectangle, plane, half(p1), half(p2), v).thickness = ct;
    });
  }

  void disc(cv::Point centre, int radius, Rgb c) {
    if (!isYuv(format_)) {
      add(Kind::kDisc, 0, centre, centre, packed(c)).radius = radius;
      return;
    }
    const Yuv y = toYuv(c);
    add(Kind::kDisc, 0, centre, centre, {y.y}).radius = radius;
    eachChroma(y, [&](int plane, std::vector<uint8_t> v) {
      add(Kind::kDisc, plane, half(centre), half(centre), v).radius = std::max(1, radius / 2);
    });
  }

  void text(const std::string& s, cv::Point origin, double scale, Rgb c) {
    // NV12/I420: the Y plane only, textColour()'s black or white as Y.
    const std::vector<uint8_t> v =
        isYuv(format_) ? std::vector<uint8_t>{static_cast<uint8_t>(c.r == 0 ? 16 : 235)}
                       : packed(c);
    OverlayPrimitive& p = add(Kind::kText, 0, origin, origin, v);
    p.text = s;
    p.fontScale = scale;
  }

  std::vector<OverlayPrimitive> take() { return std::move(list_); }

 private:
  static cv::Point half(cv::Point p) { return {floorHalf(p.x), floorHalf(p.y)}; }

  // A packed colour in the frame's byte order (255 in a fourth byte).
  std::vector<uint8_t> packed(Rgb c) const {
    using vision::PixelFormat;
    const bool bgr = format_ == PixelFormat::kBGRA || format_ == PixelFormat::kBGRx ||
                     format_ == PixelFormat::kBGR;
    std::vector<uint8_t> v =
        bgr ? std::vector<uint8_t>{c.b, c.g, c.r, 255} : std::vector<uint8_t>{c.r, c.g, c.b, 255};
    if (format_ == PixelFormat::kRGB || format_ == PixelFormat::kBGR) v.pop_back();
    return v;
  }

  template <typename F>
  void eachChroma(const Yuv& y, F&& draw) {
    if (format_ == vision::PixelFormat::kNV12) {
      draw(1, {y.u, y.v});
    } else {
      draw(1, {y.u});
      draw(2, {y.v});
    }
  }

  OverlayPrimitive& add(Kind kind, int plane, cv::Point a, cv::Point b,
                        const std::vector<uint8_t>& value) {
    OverlayPrimitive p;
    p.kind = kind;
    p.plane = plane;
    p.x1 = a.x, p.y1 = a.y, p.x2 = b.x, p.y2 = b.y;
    for (size_t i = 0; i < value.size() && i < 4; ++i) p.value[i] = value[i];
    list_.push_back(std::move(p));
    return list_.back();
  }

  vision::PixelFormat format_;
  std::vector<OverlayPrimitive> list_;
};

// The label bar and its text, the bar's top-left at (x, y) or above (x, anchorY).
void label(PrimitiveList& list, const std::string& text, int x, int anchorY, bool above, Rgb colour,
           double scale) {
  int baseline = 0;
  const cv::Size size = cv::getTextSize(text, kFont, scale, 1, &baseline);
  const int barW = size.width + 4, barH = size.height + baseline + 4;
  int top = anchorY;
  if (above && anchorY - barH >= 0) top = anchorY - barH;
  list.rectangle({x, top}, {x + barW - 1, top + barH - 1}, colour, cv::FILLED);
  list.text(text, {x + 2, top + 2 + size.height}, scale, textColour(colour));
}

// The one place a primitive becomes pixels: drawn on `img` (a plane, or a mask whose top-left
// is the plane's `origin`) in `colour`.
void drawPrimitive(cv::Mat& img, const OverlayPrimitive& p, cv::Point origin,
                   const cv::Scalar& colour) {
  const cv::Point a(p.x1 - origin.x, p.y1 - origin.y), b(p.x2 - origin.x, p.y2 - origin.y);
  switch (p.kind) {
    case Kind::kRectangle:
      cv::rectangle(img, a, b, colour, p.thickness, cv::LINE_8);
      break;
    case Kind::kDisc:
      cv::circle(img, a, p.radius, colour, cv::FILLED, cv::LINE_8);
      break;
    case Kind::kText:
      cv::putText(img, p.text, a, kFont, p.fontScale, colour, 1, cv::LINE_8);
      break;
  }
}

// A rectangle around every pixel `p` can draw, with `margin` pixels more on every side.
cv::Rect reach(const OverlayPrimitive& p, int margin) {
  int x0 = std::min(p.x1, p.x2), x1 = std::max(p.x1, p.x2);
  int y0 = std::min(p.y1, p.y2), y1 = std::max(p.y1, p.y2);
  int extra = 0;
  switch (p.kind) {
    case Kind::kRectangle:
      extra = p.thickness < 0 ? 0 : p.thickness;
      break;
    case Kind::kDisc:
      extra = p.radius;
      break;
    case Kind::kText: {
      int baseline = 0;
      const cv::Size size = cv::getTextSize(p.text, kFont, p.fontScale, 1, &baseline);
      x1 += size.width;
      y0 -= size.height;
      y1 += baseline;
      extra = size.height;  // glyphs reach a little past the advance box
      break;
    }
  }
  const int64_t m = static_cast<int64_t>(extra) + margin;
  auto clampInt = [](int64_t v) {
    return static_cast<int>(std::max<int64_t>(INT32_MIN / 4, std::min<int64_t>(INT32_MAX / 4, v)));
  };
  const int left = clampInt(x0 - m), top = clampInt(y0 - m);
  return {left, top, clampInt(x1 + m + 1) - left, clampInt(y1 + m + 1) - top};
}

// Whether a mask edge that lies inside the plane (not on the plane's own edge) was drawn on:
// the primitive may reach past it, so the mask is too small.
bool touchesInnerEdge(const cv::Mat& mask, const cv::Rect& box, const OverlayPlane& plane) {
  if (box.x > 0 && cv::countNonZero(mask.col(0)) > 0) return true;
  if (box.x + box.width < plane.width && cv::countNonZero(mask.col(mask.cols - 1)) > 0) return true;
  if (box.y > 0 && cv::countNonZero(mask.row(0)) > 0) return true;
  return box.y + box.height < plane.height && cv::countNonZero(mask.row(mask.rows - 1)) > 0;
}

// Appends the runs of `mask` (whose top-left is the plane's `origin`) to `out`.
void maskRuns(const cv::Mat& mask, cv::Point origin, const OverlayPrimitive& p,
              std::vector<OverlayRun>& out) {
  for (int y = 0; y < mask.rows; ++y) {
    const uint8_t* row = mask.ptr<uint8_t>(y);
    int x = 0;
    while (x < mask.cols) {
      // Skip zeros eight at a time: most of a box's mask is its empty inside.
      while (x + 8 <= mask.cols) {
        uint64_t word;
        std::memcpy(&word, row + x, sizeof word);
        if (word != 0) break;
        x += 8;
      }
      while (x < mask.cols && row[x] == 0) ++x;
      if (x >= mask.cols) break;
      const int start = x;
      while (x < mask.cols && row[x] != 0) ++x;
      OverlayRun r;
      r.y = origin.y + y;
      r.x0 = origin.x + start;
      r.x1 = origin.x + x;
      r.plane = static_cast<uint8_t>(p.plane);
      std::memcpy(r.value, p.value, sizeof r.value);
      out.push_back(r);
    }
  }
}

// The runs one primitive writes in `plane`, drawn into a mask (`scratch`), appended to `out`.
void drawnRuns(const OverlayPrimitive& p, const OverlayPlane& plane, cv::Mat& scratch,
               std::vector<OverlayRun>& out) {
  const cv::Rect planeRect(0, 0, plane.width, plane.height);
  for (int margin = 2;; margin *= 2) {
    const cv::Rect box = reach(p, margin) & planeRect;
    if (box.width <= 0 || box.height <= 0) return;  // wholly outside the plane
    scratch.create(box.height, box.width, CV_8UC1);
    scratch.setTo(0);
    drawPrimitive(scratch, p, box.tl(), cv::Scalar(255));
    // A mask as large as the plane has no inner edge: always final.
    if (!touchesInnerEdge(scratch, box, plane) || box == planeRect) {
      maskRuns(scratch, box.tl(), p, out);
      return;
    }
  }
}

// Runs relative to a reference point, row by row: `rows[i]` holds the [x0, x1) of row top + i.
struct RelativeRuns {
  int top = 0;
  std::vector<std::vector<std::pair<int, int>>> rows;
};

// The runs of a one-channel `mask` relative to its pixel `ref` (rows from the first drawn one).
RelativeRuns relativeRuns(const cv::Mat& mask, cv::Point ref) {
  OverlayPrimitive none;
  std::vector<OverlayRun> runs;
  maskRuns(mask, {0, 0}, none, runs);
  RelativeRuns out;
  if (runs.empty()) return out;
  out.top = runs.front().y - ref.y;
  out.rows.resize(static_cast<size_t>(runs.back().y - runs.front().y + 1));
  for (const OverlayRun& r : runs)
    out.rows[static_cast<size_t>(r.y - runs.front().y)].emplace_back(r.x0 - ref.x, r.x1 - ref.x);
  return out;
}

// A rectangle of one thickness (or filled) drawn once by OpenCV from (0, 0) to (size, size),
// its runs relative to (0, 0). cv::rectangle draws four edges (for thickness > 1 a band each,
// with a disc at each corner) whose pixels within `reach` of a corner depend on that corner
// only: between the corners every row (column) is the middle one, so a rectangle of
// width, height >= size has this template's runs with the middle row and column repeated.
struct RectangleTemplate {
  bool usable = false;
  int size = 0, mid = 0;
  RelativeRuns runs;
};

RelativeRuns drawnRectangle(int thickness, int width, int height, int margin) {
  cv::Mat mask(height + 2 * margin + 1, width + 2 * margin + 1, CV_8UC1, cv::Scalar(0));
  cv::rectangle(mask, {margin, margin}, {margin + width, margin + height}, cv::Scalar(255),
                thickness, cv::LINE_8);
  // The margin must hold the whole drawing: an empty border.
  const bool inside =
      cv::countNonZero(mask.row(0)) == 0 && cv::countNonZero(mask.row(mask.rows - 1)) == 0 &&
      cv::countNonZero(mask.col(0)) == 0 && cv::countNonZero(mask.col(mask.cols - 1)) == 0;
  if (!inside) return {};
  return relativeRuns(mask, {margin, margin});
}

// The runs of a template-built rectangle of width x height (>= the template's size), relative
// to its top-left corner, in rows [from, to] (relative; only those the rectangle draws): `f(y,
// x0, x1)` for each, row by row, left to right.
template <typename F>
void eachStretchedRun(const RectangleTemplate& t, int width, int height, int from, int to, F&& f) {
  const RelativeRuns& ref = t.runs;
  const int grow = width - t.size;
  const int bottom =
      std::min(to, ref.top + static_cast<int>(ref.rows.size()) - 1 + (height - t.size));
  for (int y = std::max(from, ref.top); y <= bottom; ++y) {
    const int r = y < t.mid ? y : y > height - t.size + t.mid ? y - (height - t.size) : t.mid;
    for (const auto& [a, b] : ref.rows[static_cast<size_t>(r - ref.top)]) {
      if (b <= t.mid)
        f(y, a, b);
      else if (a > t.mid)
        f(y, a + grow, b + grow);
      else
        f(y, a, b + grow);
    }
  }
}

RelativeRuns stretched(const RectangleTemplate& t, int width, int height) {
  RelativeRuns out;
  out.top = t.runs.top;
  eachStretchedRun(t, width, height, INT_MIN, INT_MAX, [&out](int y, int a, int b) {
    out.rows.resize(static_cast<size_t>(y - out.top + 1));
    out.rows.back().emplace_back(a, b);
  });
  return out;
}

bool sameRuns(const RelativeRuns& a, const RelativeRuns& b) {
  return a.top == b.top && a.rows == b.rows;
}

RectangleTemplate makeTemplate(int thickness) {
  // Everything a corner draws lies within `reach` of it (a band of half-width ceil(t / 2) and
  // a disc of radius (t + 1) / 2; a filled rectangle's corner is one pixel).
  const int reach = thickness < 0 ? 2 : thickness + 2;
  RectangleTemplate t;
  t.size = 2 * reach + 2;
  t.mid = t.size / 2;
  const int margin = reach + 4;
  t.runs = drawnRectangle(thickness, t.size, t.size, margin);
  if (t.runs.rows.empty()) return t;
  // Checked once against OpenCV: the template stretched by one and by several pixels (each way)
  // is what OpenCV draws at those sizes; otherwise the mask path is taken.
  for (const auto& [w, h] : {std::pair<int, int>{t.size + 1, t.size + 2}, {t.size + 7, t.size}})
    if (!sameRuns(stretched(t, w, h), drawnRectangle(thickness, w, h, margin))) return t;
  t.usable = true;
  return t;
}

// The largest coordinate a shortcut takes (OpenCV works in 16.16 fixed point; beyond this the
// mask path's clamping decides).
constexpr int kDirectLimit = 1 << 20;

bool withinLimit(int v) {
  return v > -kDirectLimit && v < kDirectLimit;
}

// Appends `rel` moved to `origin`, clipped to `plane`, as runs of `p` to `out`.
void placeRuns(const RelativeRuns& rel, cv::Point origin, const OverlayPrimitive& p,
               const OverlayPlane& plane, std::vector<OverlayRun>& out) {
  const int first = std::max(0, origin.y + rel.top) - origin.y - rel.top;
  const int last = std::min(static_cast<int>(rel.rows.size()), plane.height - origin.y - rel.top);
  OverlayRun r;
  r.plane = static_cast<uint8_t>(p.plane);
  std::memcpy(r.value, p.value, sizeof r.value);
  for (int i = first; i < last; ++i) {
    r.y = origin.y + rel.top + i;
    for (const auto& [a, b] : rel.rows[static_cast<size_t>(i)]) {
      r.x0 = std::max(0, origin.x + a);
      r.x1 = std::min(plane.width, origin.x + b);
      if (r.x0 < r.x1) out.push_back(r);
    }
  }
}

// A shape drawn once (label text, a disc): its runs relative to a reference point (the text's
// origin, the disc's centre) and the columns [x0, x1) they span (x0 == x1: nothing drawn).
struct CachedShape {
  RelativeRuns runs;
  int x0 = 0, x1 = 0;
};

// `draw(mask, ref)` on a mask of `size` (the shape's extent, `ref` inside it) with a margin on
// every side, widened until the drawing leaves the mask's border empty.
template <typename Draw>
CachedShape drawnShape(cv::Size size, cv::Point ref, int margin, Draw&& draw) {
  for (;; margin *= 2) {
    cv::Mat mask(size.height + 2 * margin, size.width + 2 * margin, CV_8UC1, cv::Scalar(0));
    const cv::Point origin(margin + ref.x, margin + ref.y);
    draw(mask, origin);
    const bool inside =
        cv::countNonZero(mask.row(0)) == 0 && cv::countNonZero(mask.row(mask.rows - 1)) == 0 &&
        cv::countNonZero(mask.col(0)) == 0 && cv::countNonZero(mask.col(mask.cols - 1)) == 0;
    if (!inside) continue;
    CachedShape out;
    out.runs = relativeRuns(mask, origin);
    if (out.runs.rows.empty()) return out;
    out.x0 = INT_MAX, out.x1 = INT_MIN;
    for (const auto& row : out.runs.rows)
      for (const auto& [a, b] : row) out.x0 = std::min(out.x0, a), out.x1 = std::max(out.x1, b);
    return out;
  }
}

CachedShape drawnText(const std::string& text, double fontScale) {
  int baseline = 0;
  const cv::Size size = cv::getTextSize(text, kFont, fontScale, 1, &baseline);
  return drawnShape({size.width, size.height + baseline}, {0, size.height}, size.height + 4,
                    [&](cv::Mat& mask, cv::Point origin) {
                      cv::putText(mask, text, origin, kFont, fontScale, cv::Scalar(255), 1,
                                  cv::LINE_8);
                    });
}

CachedShape drawnDisc(int radius) {
  return drawnShape({2 * radius + 1, 2 * radius + 1}, {radius, radius}, 4,
                    [&](cv::Mat& mask, cv::Point centre) {
                      cv::circle(mask, centre, radius, cv::Scalar(255), cv::FILLED, cv::LINE_8);
                    });
}

// Appends `shape` placed at `at` as runs of `p` to `out`, unless it reaches within 2 pixels of
// the plane's edge, where OpenCV clips what it draws (strokes, spans): then false, nothing
// appended. A shape that draws nothing is placed anywhere.
bool placeInside(const CachedShape& shape, cv::Point at, const OverlayPrimitive& p,
                 const OverlayPlane& plane, std::vector<OverlayRun>& out) {
  if (shape.runs.rows.empty()) return true;
  const int top = at.y + shape.runs.top, bottom = top + static_cast<int>(shape.runs.rows.size());
  if (at.x + shape.x0 < 2 || at.x + shape.x1 > plane.width - 2 || top < 2 ||
      bottom > plane.height - 2)
    return false;
  placeRuns(shape.runs, at, p, plane, out);
  return true;
}

// Buffers resolveRow reuses from row to row and frame to frame.
struct RowScratch {
  std::vector<std::pair<int, int>> covered, merged;  // sorted, disjoint [x0, x1)
  std::vector<OverlayRun> row;
};

// The runs of one row of one plane, in drawing order, as non-overlapping runs with the bytes
// of the last one covering each pixel, appended to `out` sorted by column.
void resolveRow(const OverlayRun* first, const OverlayRun* last, RowScratch& s,
                std::vector<OverlayRun>& out) {
  if (last - first == 1) {
    out.push_back(*first);
    return;
  }
  auto byColumn = [](const OverlayRun& a, const OverlayRun& b) { return a.x0 < b.x0; };
  // Most rows hold runs that do not overlap (a box's two sides, a disc, text strokes): sorted,
  // they are the answer.
  std::vector<OverlayRun>& row = s.row;
  row.assign(first, last);
  std::sort(row.begin(), row.end(), byColumn);
  bool disjoint = true;
  for (size_t i = 1; i < row.size() && disjoint; ++i) disjoint = row[i - 1].x1 <= row[i].x0;
  if (disjoint) {
    out.insert(out.end(), row.begin(), row.end());
    return;
  }
  std::vector<std::pair<int, int>>&covered = s.covered, &merged = s.merged;
  covered.clear();
  row.clear();
  auto emit = [&row](const OverlayRun& r, int x0, int x1) {
    OverlayRun part = r;
    part.x0 = x0;
    part.x1 = x1;
    row.push_back(part);
  };
  for (const OverlayRun* r = last; r-- != first;) {  // the last drawn wins
    int x = r->x0;
    for (const auto& c : covered) {
      if (c.second <= x) continue;
      if (c.first >= r->x1) break;
      if (c.first > x) emit(*r, x, c.first);
      x = std::max(x, c.second);
      if (x >= r->x1) break;
    }
    if (x < r->x1) emit(*r, x, r->x1);
    // [x0, x1) joins the covered intervals.
    merged.clear();
    std::pair<int, int> cur(r->x0, r->x1);
    bool placed = false;
    for (const auto& c : covered) {
      if (c.second < cur.first) {
        merged.push_back(c);
      } else if (c.first > cur.second) {
        if (!placed) merged.push_back(cur), placed = true;
        merged.push_back(c);
      } else {
        cur = {std::min(cur.first, c.first), std::max(cur.second, c.second)};
      }
    }
    if (!placed) merged.push_back(cur);
    covered.swap(merged);
  }
  std::sort(row.begin(), row.end(), byColumn);
  out.insert(out.end(), row.begin(), row.end());
}

}  // namespace

int overlayPlanes(vision::PixelFormat format, int width, int height, OverlayPlane planes[3]) {
  using vision::PixelFormat;
  const int cw = (width + 1) / 2, ch = (height + 1) / 2;
  switch (format) {
    case PixelFormat::kRGBA:
    case PixelFormat::kBGRA:
    case PixelFormat::kRGBx:
    case PixelFormat::kBGRx:
      planes[0] = {width, height, 4};
      return 1;
    case PixelFormat::kRGB:
    case PixelFormat::kBGR:
      planes[0] = {width, height, 3};
      return 1;
    case PixelFormat::kNV12:
      planes[0] = {width, height, 1};
      planes[1] = {cw, ch, 2};
      return 2;
    case PixelFormat::kI420:
      planes[0] = {width, height, 1};
      planes[1] = {cw, ch, 1};
      planes[2] = {cw, ch, 1};
      return 3;
    case PixelFormat::kGray8:
      break;
  }
  return 0;
}

std::vector<OverlayPrimitive> overlayPrimitives(vision::PixelFormat format,
                                                const std::vector<const Results*>& results,
                                                const OverlayStyle& style) {
  if (format == vision::PixelFormat::kGray8) return {};
  PrimitiveList list(format);
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
      list.rectangle(p1, p2, colour, style.thickness);
      if (style.keypoints)
        for (const vision::Keypoint& k : d.keypoints)
          list.disc({static_cast<int>(std::lround(k.x)), static_cast<int>(std::lround(k.y))},
                    style.thickness + 1, kKeypointColour);
      if (style.labels) label(list, labelText(o), p1.x, p1.y, true, colour, style.fontScale);
    }
    if (style.labels)
      for (const vision::Classification& c : r->classifications)
        label(list, classText(c), 0, line++ * lineH, false, classColour(c.classId),
              style.fontScale);
  }
  return list.take();
}

OverlayRunOptions OverlayRunOptions::fromEnvironment() {
  OverlayRunOptions o;
  const char* v = std::getenv("EDGEINFER_OVERLAY_MASK_RUNS");
  if (v && std::strcmp(v, "1") == 0) o.directRectangles = o.directDiscs = o.textCache = false;
  return o;
}

struct OverlayRunBuilder::Impl {
  OverlayRunOptions options;
  cv::Mat scratch;
  std::vector<OverlayRun> drawn, grouped;  // runs() keeps its buffers between frames
  std::vector<size_t> rowStart, rowNext;
  RowScratch rowScratch;
  Counts counts;
  // By thickness + 1 (0: filled), made on first use.
  std::vector<std::unique_ptr<RectangleTemplate>> templates =
      std::vector<std::unique_ptr<RectangleTemplate>>(kMaxTemplateThickness + 2);
  // By radius, made on first use.
  std::vector<std::unique_ptr<CachedShape>> discs =
      std::vector<std::unique_ptr<CachedShape>>(kMaxTemplateThickness + 1);
  // Texts, the most recently used first; `index` finds them by textKey.
  std::list<std::pair<std::string, CachedShape>> texts;
  std::unordered_map<std::string, std::list<std::pair<std::string, CachedShape>>::iterator> index;

  const RectangleTemplate* rectangle(int thickness) {
    if (thickness < -1 || thickness == 0 || thickness > kMaxTemplateThickness) return nullptr;
    std::unique_ptr<RectangleTemplate>& t = templates[static_cast<size_t>(thickness + 1)];
    if (!t) t = std::make_unique<RectangleTemplate>(makeTemplate(thickness));
    return t->usable ? t.get() : nullptr;
  }

  static std::string textKey(const std::string& text, double scale) {
    std::string key(sizeof scale, '\0');
    std::memcpy(&key[0], &scale, sizeof scale);
    return key + text;
  }

  const CachedShape& text(const std::string& text, double scale) {
    const std::string key = textKey(text, scale);
    const auto it = index.find(key);
    if (it != index.end()) {
      texts.splice(texts.begin(), texts, it->second);  // now the most recently used
      return it->second->second;
    }
    if (texts.size() >= kTextCacheEntries) {
      index.erase(texts.back().first);
      texts.pop_back();
    }
    texts.emplace_front(key, drawnText(text, scale));
    index.emplace(key, texts.begin());
    return texts.front().second;
  }

  // Whether `p` was turned into runs without a mask.
  bool direct(const OverlayPrimitive& p, const OverlayPlane& plane, std::vector<OverlayRun>& out) {
    for (int v : {p.x1, p.y1, p.x2, p.y2})
      if (!withinLimit(v)) return false;
    if (p.kind == Kind::kRectangle && options.directRectangles) {
      const int w = p.x2 - p.x1, h = p.y2 - p.y1;
      const RectangleTemplate* t = rectangle(p.thickness);
      if (!t || w < t->size || h < t->size) return false;
      // Only the rows inside the plane: a box may reach far past it.
      OverlayRun r;
      r.plane = static_cast<uint8_t>(p.plane);
      std::memcpy(r.value, p.value, sizeof r.value);
      eachStretchedRun(*t, w, h, -p.y1, plane.height - 1 - p.y1, [&](int y, int a, int b) {
        r.y = p.y1 + y;
        r.x0 = std::max(0, p.x1 + a);
        r.x1 = std::min(plane.width, p.x1 + b);
        if (r.x0 < r.x1) out.push_back(r);
      });
      return true;
    }
    if (p.kind == Kind::kText && options.textCache)
      return placeInside(text(p.text, p.fontScale), {p.x1, p.y1}, p, plane, out);
    if (p.kind == Kind::kDisc && options.directDiscs && p.radius >= 0 &&
        p.radius <= kMaxTemplateThickness) {
      std::unique_ptr<CachedShape>& d = discs[static_cast<size_t>(p.radius)];
      if (!d) d = std::make_unique<CachedShape>(drawnDisc(p.radius));
      return placeInside(*d, {p.x1, p.y1}, p, plane, out);
    }
    return false;
  }
};

OverlayRunBuilder::OverlayRunBuilder(OverlayRunOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}
OverlayRunBuilder::~OverlayRunBuilder() = default;
OverlayRunBuilder::OverlayRunBuilder(OverlayRunBuilder&&) noexcept = default;
OverlayRunBuilder& OverlayRunBuilder::operator=(OverlayRunBuilder&&) noexcept = default;

OverlayRunBuilder::Counts OverlayRunBuilder::counts() const {
  return impl_->counts;
}

size_t OverlayRunBuilder::cachedTexts() const {
  return impl_->texts.size();
}

void OverlayRunBuilder::primitiveRuns(const OverlayPrimitive& p, const OverlayPlane& plane,
                                      std::vector<OverlayRun>& out) {
  if (impl_->direct(p, plane, out)) {
    ++impl_->counts.direct;
  } else {
    ++impl_->counts.masked;
    drawnRuns(p, plane, impl_->scratch, out);
  }
}

void maskPrimitiveRuns(const OverlayPrimitive& p, const OverlayPlane& plane,
                       std::vector<OverlayRun>& out) {
  cv::Mat scratch;
  drawnRuns(p, plane, scratch, out);
}

std::vector<OverlayRun> OverlayRunBuilder::runs(vision::PixelFormat format, int width, int height,
                                                const std::vector<OverlayPrimitive>& primitives) {
  OverlayPlane planes[3];
  const int n = overlayPlanes(format, width, height, planes);
  Impl& m = *impl_;
  std::vector<OverlayRun>& drawn = m.drawn;  // in drawing order, overlapping
  drawn.clear();
  for (const OverlayPrimitive& p : primitives)
    if (p.plane >= 0 && p.plane < n) primitiveRuns(p, planes[p.plane], drawn);
  // Grouped by plane and row, keeping the drawing order within a row (a counting sort: one
  // bucket per row of every plane); then overlaps are resolved row by row.
  int rowBase[3] = {0, 0, 0};
  for (int i = 1; i < n; ++i) rowBase[i] = rowBase[i - 1] + planes[i - 1].height;
  const size_t rows = static_cast<size_t>(n > 0 ? rowBase[n - 1] + planes[n - 1].height : 0);
  std::vector<size_t>& start = m.rowStart;
  start.assign(rows + 1, 0);
  for (const OverlayRun& r : drawn) ++start[static_cast<size_t>(rowBase[r.plane] + r.y) + 1];
  for (size_t i = 1; i <= rows; ++i) start[i] += start[i - 1];
  std::vector<OverlayRun>& grouped = m.grouped;
  grouped.resize(drawn.size());
  {
    std::vector<size_t>& next = m.rowNext;
    next.assign(start.begin(), start.end() - 1);
    for (const OverlayRun& r : drawn)
      grouped[next[static_cast<size_t>(rowBase[r.plane] + r.y)]++] = r;
  }
  std::vector<OverlayRun> out;
  out.reserve(drawn.size());
  for (size_t i = 0; i < rows; ++i)
    if (start[i] < start[i + 1])
      resolveRow(grouped.data() + start[i], grouped.data() + start[i + 1], m.rowScratch, out);
  return out;
}

std::vector<OverlayRun> overlayRuns(vision::PixelFormat format, int width, int height,
                                    const std::vector<OverlayPrimitive>& primitives,
                                    const OverlayRunOptions& options) {
  return OverlayRunBuilder(options).runs(format, width, height, primitives);
}

Status applyOverlayRuns(const OverlayFrame& frame, const std::vector<OverlayRun>& runs) {
  OverlayPlane planes[3];
  const int n = overlayPlanes(frame.format, frame.width, frame.height, planes);
  for (const OverlayRun& r : runs)
    if (r.plane >= n || r.y < 0 || r.y >= planes[r.plane].height || r.x0 < 0 || r.x0 > r.x1 ||
        r.x1 > planes[r.plane].width)
      return Status(ErrorCode::kInvalidArgument,
                    "overlay run (plane " + std::to_string(r.plane) + ", row " +
                        std::to_string(r.y) + ", columns " + std::to_string(r.x0) + ".." +
                        std::to_string(r.x1) + ") lies outside the frame");
  for (const OverlayRun& r : runs) {
    const int bpp = planes[r.plane].bytesPerPixel;
    uint8_t* row = frame.planes[r.plane] + static_cast<ptrdiff_t>(r.y) * frame.strides[r.plane];
    for (int x = r.x0; x < r.x1; ++x)
      std::memcpy(row + static_cast<ptrdiff_t>(x) * bpp, r.value, bpp);
  }
  return Status::Ok();
}

Status drawResults(const OverlayFrame& frame, const std::vector<const Results*>& results,
                   const OverlayStyle& style) {
  OverlayPlane planes[3];
  const int n = overlayPlanes(frame.format, frame.width, frame.height, planes);
  if (n == 0) return Status(ErrorCode::kUnsupported, "edgeoverlay does not draw on GRAY8 frames");
  cv::Mat mats[3];
  for (int p = 0; p < n; ++p)
    mats[p] = cv::Mat(planes[p].height, planes[p].width, CV_8UC(planes[p].bytesPerPixel),
                      frame.planes[p], static_cast<size_t>(frame.strides[p]));
  for (const OverlayPrimitive& p : overlayPrimitives(frame.format, results, style)) {
    cv::Scalar colour;
    for (int i = 0; i < planes[p.plane].bytesPerPixel; ++i) colour[i] = p.value[i];
    drawPrimitive(mats[p.plane], p, {0, 0}, colour);
  }
  return Status::Ok();
}

}  // namespace edgeinfer::gst
