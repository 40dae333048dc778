// The runs edgeoverlay writes into a frame (overlay_draw.h makes them, overlay_cuda.h writes
// them on the GPU), and the planes they are written in. No GStreamer and no OpenCV here: the
// CUDA code includes it.
#pragma once

#include <cstdint>

#include "edgeinfer/vision/preprocess.h"

namespace edgeinfer::gst {

/// One plane drawn on: its size in pixels and bytes per pixel.
struct OverlayPlane {
  int width = 0, height = 0, bytesPerPixel = 0;
};
/// The planes of a `format` frame of width x height (packed: 1; NV12: Y and interleaved UV at
/// half size, rounded up; I420: Y, U, V); 0 for GRAY8 (not drawn on).
int overlayPlanes(vision::PixelFormat format, int width, int height, OverlayPlane planes[3]);

/// Pixels [x0, x1) of row y of a plane, set to `value` (the plane's bytesPerPixel bytes).
struct OverlayRun {
  int32_t y = 0, x0 = 0, x1 = 0;
  uint8_t plane = 0;
  uint8_t value[4] = {0, 0, 0, 0};
};
static_assert(sizeof(OverlayRun) == 20, "OverlayRun is copied to the GPU as it is");

}  // namespace edgeinfer::gst
