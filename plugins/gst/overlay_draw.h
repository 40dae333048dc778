// What edgeoverlay draws, specified exactly (tests/gst compares frames pixel by pixel with a
// drawing made from this specification). CPU drawing on host frames with OpenCV.
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

#include <cstdint>
#include <string>
#include <vector>

#include "edgeinfer/gst/edgeinfer_meta.h"
#include "edgeinfer/status.h"
#include "edgeinfer/vision/preprocess.h"

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

/// Draws `results` on `frame` as specified above. kUnsupported for GRAY8 (nothing drawn).
Status drawResults(const OverlayFrame& frame, const std::vector<const Results*>& results,
                   const OverlayStyle& style);

}  // namespace edgeinfer::gst
