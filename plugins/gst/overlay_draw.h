// What edgeoverlay draws, specified exactly (tests/gst compares frames pixel by pixel with a
// drawing made from this specification). The steps below become one list of primitives
// (overlayPrimitives: a cv::rectangle, a filled cv::circle or a cv::putText on one plane, with
// the bytes it writes), drawn two ways from that one list:
//   - host frames (drawResults): each primitive drawn on its plane with OpenCV;
//   - CUDA frames (overlayRuns, then overlay_cuda.h): each primitive drawn with the same OpenCV
//     call, moved by an integer offset, into a one-channel mask the size of the primitive's
//     bounding box (with a margin) clipped to the plane; the masks become horizontal runs
//     (plane, row, first and last column, the bytes), later primitives overwriting earlier
//     ones, and one kernel writes the runs into the frame on the GPU.
// The drawing does not read the frame (the colours are opaque), and OpenCV's rasterisers are
// integer code in which moving a primitive and its image by an integer offset moves its pixels
// by that offset; a mask has the plane's edges where the plane clips the primitive and a
// margin elsewhere (widened until the primitive leaves it empty), so the runs hold exactly the
// pixels the host drawing writes (tests/gst/test_cuda_overlay.cpp checks both on many frames).
// Shortcuts skip the mask (OverlayRunBuilder, OverlayRunOptions): a rectangle is the runs of
// one OpenCV drawing per thickness with its middle row and column repeated; a disc is drawn
// once per radius and label text once per (text, font scale), and their runs moved; all give
// the mask's runs exactly (the same tests compare them primitive by primitive).
//
// Colours: class c is drawn in classColour(c) = kPalette[c mod 12] (RGB); keypoints in
// kKeypointColour. On packed formats a colour is written in the frame's byte order, with 255 in
// the fourth byte of RGBA/BGRA/RGBx/BGRx. On NV12/I420 it is first converted to BT.601
// limited-range YUV with toYuv() (integers, rounded), the same function the test uses.
//
// Per object, in the meta's order (every meta of the frame, in the order they were added,
// unless the element's unique-id filter picks one):
//   1. The box: corners p1 = (lround(x1), lround(y1)), p2 = (lround(x2) - 1, lround(y2) - 1);
//      nothing is drawn when p2 lies left of or above p1. cv::rectangle(p1, p2, colour,
//      thickness, cv::LINE_8).
//   2. Keypoints (draw-keypoints): cv::circle(centre (lround(x), lround(y)), radius
//      thickness + 1, kKeypointColour, cv::FILLED, cv::LINE_8).
//   3. The label (draw-labels): labelText(object), cv::FONT_HERSHEY_SIMPLEX at font-scale,
//      font thickness 1, cv::LINE_8. cv::getTextSize gives (w, h) and baseline b; the label
//      bar is barW = w + 4 by barH = h + b + 4 pixels with its top-left at (p1.x, p1.y - barH),
//      or at (p1.x, p1.y) (inside the box) when p1.y - barH < 0. The bar is a filled
//      rectangle in the class colour from its top-left (bx, by) to (bx + barW - 1,
//      by + barH - 1); the text is written from (bx + 2, by + 2 + h) in textColour(colour):
//      black when the colour's BT.601 luma (integer Y of toYuv) is >= 128, else white.
// Whole-frame classifications (a classifier's results): one label per class, "label score",
// drawn as a label whose bar has its top-left at (0, i * barH) for line i, counted over every
// meta drawn (barH does not depend on the text: Hershey fonts have one height per scale).
//
// NV12 / I420: each step above is drawn on the Y plane (a one-channel image) with the colour's
// Y, and on the chroma plane(s) at half the coordinates: every point (x, y) becomes
// (floor(x / 2), floor(y / 2)), box line thickness max(1, thickness / 2), keypoint radius
// max(1, (thickness + 1) / 2), with (U, V) on NV12's interleaved plane (a two-channel image)
// or U and V on I420's planes. Label text is written on the Y plane only (Y 16 for black, 235
// for white); the label bar is drawn on every plane.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "edgeinfer/gst/edgeinfer_meta.h"
#include "edgeinfer/status.h"
#include "edgeinfer/vision/preprocess.h"
#include "overlay_runs.h"

namespace edgeinfer::gst {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};
struct Yuv {
  uint8_t y = 0, u = 0, v = 0;
};

constexpr int kPaletteSize = 12;
/// The class colours (RGB), distinct hues at mixed brightness.
extern const Rgb kPalette[kPaletteSize];
constexpr Rgb kKeypointColour{255, 0, 0};

Rgb classColour(int classId);
/// BT.601 limited range: Y = 16 + (66 R + 129 G + 25 B + 128) >> 8,
/// U = 128 + (-38 R - 74 G + 112 B + 128) >> 8, V = 128 + (112 R - 94 G - 18 B + 128) >> 8.
Yuv toYuv(Rgb c);
/// Black or white, whichever reads on `background`.
Rgb textColour(Rgb background);
/// "face 0.93", or "class 3 0.93" without a label; each secondary classification adds
/// " | label score" of its best class.
std::string labelText(const Object& object);
/// "label score" of a whole-frame classification.
std::string classText(const vision::Classification& c);

struct OverlayStyle {
  int thickness = 2;
  double fontScale = 0.5;
  bool labels = true;
  bool keypoints = true;
};

/// A frame in writable host memory (one to three planes as in vision::FrameView).
struct OverlayFrame {
  vision::PixelFormat format = vision::PixelFormat::kRGBA;
  int width = 0, height = 0;
  uint8_t* planes[3] = {nullptr, nullptr, nullptr};
  int strides[3] = {0, 0, 0};
};

/// One step of the specification on one plane, in the plane's coordinates.
struct OverlayPrimitive {
  enum class Kind : uint8_t {
    kRectangle,  // cv::rectangle((x1, y1), (x2, y2), thickness or cv::FILLED), cv::LINE_8
    kDisc,       // cv::circle(centre (x1, y1), radius, cv::FILLED, cv::LINE_8)
    kText,       // cv::putText(text, origin (x1, y1), Hershey simplex, fontScale, 1, LINE_8)
  };
  Kind kind = Kind::kRectangle;
  int plane = 0;
  int x1 = 0, y1 = 0, x2 = 0, y2 = 0;
  int thickness = 1;  // kRectangle: line thickness, or -1 (filled)
  int radius = 0;     // kDisc
  std::string text;   // kText
  double fontScale = 1.0;
  uint8_t value[4] = {0, 0, 0, 0};  // the bytes written per pixel (the plane's bytesPerPixel)
};

/// The primitives of `results` on a `format` frame, in drawing order (later ones overwrite
/// earlier ones); empty for GRAY8.
std::vector<OverlayPrimitive> overlayPrimitives(vision::PixelFormat format,
                                                const std::vector<const Results*>& results,
                                                const OverlayStyle& style);

/// Which shortcuts OverlayRunBuilder takes instead of drawing a primitive into a mask. Each
/// gives the runs the mask gives (tests/gst/test_cuda_overlay.cpp compares them); each can be
/// switched off.
struct OverlayRunOptions {
  /// A rectangle (outline or filled) at least its thickness's template size wide and high: its
  /// runs are the template's (one OpenCV drawing per thickness, kept), its middle row and
  /// column repeated to the rectangle's size. Smaller rectangles are drawn into a mask.
  bool directRectangles = true;
  /// Label text: the runs of one (text, font scale) drawn once, kept in a least-recently-used
  /// cache of kTextCacheEntries and moved to each origin; text reaching within 2 pixels of the
  /// plane's edge (where OpenCV clips its strokes) is drawn into a mask.
  bool textCache = true;
  /// A filled disc (radius up to kMaxTemplateThickness): the runs of one OpenCV drawing per
  /// radius, moved to the centre; a disc reaching within 2 pixels of the plane's edge is drawn
  /// into a mask.
  bool directDiscs = true;
  /// All off when the environment has EDGEINFER_OVERLAY_MASK_RUNS=1.
  static OverlayRunOptions fromEnvironment();
};

/// Turns primitives into runs, keeping what it can reuse between frames (the rectangle
/// templates, the text cache). One per element; not thread-safe.
class OverlayRunBuilder {
 public:
  static constexpr size_t kTextCacheEntries = 512;
  /// Rectangle templates are kept for thicknesses up to this (and filled), discs for radii up
  /// to this; thicker outlines and larger discs are drawn into a mask.
  static constexpr int kMaxTemplateThickness = 64;

  explicit OverlayRunBuilder(OverlayRunOptions options = {});
  ~OverlayRunBuilder();
  OverlayRunBuilder(OverlayRunBuilder&&) noexcept;
  OverlayRunBuilder& operator=(OverlayRunBuilder&&) noexcept;

  /// What drawing `primitives` on a `format` frame of width x height writes, as runs: inside
  /// the planes, none overlapping another (where primitives overlap, the later one's bytes),
  /// sorted by plane, row and column. Written in any order they give the host drawing's pixels.
  std::vector<OverlayRun> runs(vision::PixelFormat format, int width, int height,
                               const std::vector<OverlayPrimitive>& primitives);

  /// The runs one primitive writes in `plane` (sorted by row and column, each row's runs
  /// maximal), appended to `out`; the same runs as maskPrimitiveRuns gives.
  void primitiveRuns(const OverlayPrimitive& p, const OverlayPlane& plane,
                     std::vector<OverlayRun>& out);

  /// Texts in the cache now (at most kTextCacheEntries).
  size_t cachedTexts() const;
  /// Primitives turned into runs so far without a mask (`direct`) and with one (`masked`).
  struct Counts {
    size_t direct = 0, masked = 0;
  };
  Counts counts() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The runs of one primitive in `plane` found by drawing it into a mask with OpenCV (sorted by
/// row and column, each row's runs maximal), appended to `out`: the reference of the shortcuts.
void maskPrimitiveRuns(const OverlayPrimitive& p, const OverlayPlane& plane,
                       std::vector<OverlayRun>& out);

/// OverlayRunBuilder(options).runs(...): nothing kept between calls.
std::vector<OverlayRun> overlayRuns(vision::PixelFormat format, int width, int height,
                                    const std::vector<OverlayPrimitive>& primitives,
                                    const OverlayRunOptions& options = {});

/// Writes `runs` into a host frame (the reference of the CUDA kernel, for the tests).
/// kInvalidArgument, nothing written, when a run lies outside its plane.
Status applyOverlayRuns(const OverlayFrame& frame, const std::vector<OverlayRun>& runs);

/// Draws `results` on a host frame as specified above: overlayPrimitives drawn with OpenCV.
/// kUnsupported for GRAY8 (nothing drawn).
Status drawResults(const OverlayFrame& frame, const std::vector<const Results*>& results,
                   const OverlayStyle& style);

}  // namespace edgeinfer::gst
