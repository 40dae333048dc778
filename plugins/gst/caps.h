// The frame formats the elements take, in one place: the SDK's PixelFormat set, named as
// GStreamer names them (vision/preprocess.h), and the messages for caps an element refuses.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include <string>

#include "edgeinfer/vision/preprocess.h"

namespace edgeinfer::gst {

#define EDGEINFER_INFER_FORMATS "{ NV12, I420, RGBA, BGRA, RGBx, BGRx, RGB, BGR, GRAY8 }"
/// edgeinfer: every PixelFormat of the SDK, in CUDA memory (GStreamer's CUDA library: read in
/// place on the GPU, see cuda_context.h) when the build has it, and in system memory.
#if EDGEINFER_GST_CUDA
#define EDGEINFER_INFER_CAPS                                                      \
  GST_VIDEO_CAPS_MAKE_WITH_FEATURES("memory:CUDAMemory", EDGEINFER_INFER_FORMATS) \
  "; " GST_VIDEO_CAPS_MAKE(EDGEINFER_INFER_FORMATS)
#else
#define EDGEINFER_INFER_CAPS GST_VIDEO_CAPS_MAKE(EDGEINFER_INFER_FORMATS)
#endif
#define EDGEINFER_OVERLAY_FORMATS "{ NV12, I420, RGBA, BGRA, RGBx, BGRx, RGB, BGR }"
/// edgeoverlay: the formats it draws on, in CUDA memory (drawn on the GPU, overlay_cuda.h) when
/// the build has GStreamer's CUDA library, and in system memory.
#if EDGEINFER_GST_CUDA
#define EDGEINFER_OVERLAY_CAPS                                                      \
  GST_VIDEO_CAPS_MAKE_WITH_FEATURES("memory:CUDAMemory", EDGEINFER_OVERLAY_FORMATS) \
  "; " GST_VIDEO_CAPS_MAKE(EDGEINFER_OVERLAY_FORMATS)
#else
#define EDGEINFER_OVERLAY_CAPS GST_VIDEO_CAPS_MAKE(EDGEINFER_OVERLAY_FORMATS)
#endif

/// The SDK's format for a GStreamer one; false for formats the SDK does not know.
bool toPixelFormat(GstVideoFormat format, vision::PixelFormat* out);

/// When `caps` cannot be taken by a pad with template `templ`, and the reason is the video
/// format or memory (the common mistake: a decoder's YUY2 or a GPU buffer straight into the
/// element), a message for the user saying what was offered, what is taken and what to do;
/// "" otherwise (e.g. the caps are fine, or are not raw video at all).
std::string unsupportedCapsMessage(const char* element, GstCaps* caps, GstCaps* templ);

}  // namespace edgeinfer::gst
