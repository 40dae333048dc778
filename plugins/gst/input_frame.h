// The one place where an incoming GstBuffer becomes an SDK frame (edgeinfer::vision::FrameView)
// for VisionModel::infer. Everything about buffer memory (which memory, how it is mapped, where
// the planes are) is decided here and nowhere else in the elements.
#pragma once

#include <gst/gst.h>
#include <gst/video/video.h>

#include "edgeinfer/status.h"
#include "edgeinfer/vision/preprocess.h"

namespace edgeinfer::gst {

/// A buffer mapped for reading and described as a FrameView; unmapped when destroyed (or
/// re-mapped). Not copyable: the view points into the mapping.
class InputFrame {
 public:
  InputFrame() = default;
  InputFrame(const InputFrame&) = delete;
  InputFrame& operator=(const InputFrame&) = delete;
  ~InputFrame() { unmap(); }

  const vision::FrameView& view() const { return view_; }
  void unmap();

 private:
  friend Status mapInputFrame(GstBuffer* buffer, const GstVideoInfo& info, InputFrame& out,
                              bool onDevice);
  GstVideoFrame frame_{};
  bool mapped_ = false;
  vision::FrameView view_;
};

/// Maps `buffer`, negotiated as `info`, for reading and describes its planes as a FrameView:
/// the format from `info`, plane pointers and strides from the mapping (so from the buffer's
/// GstVideoMeta when it has one: padded or odd pitches and plane offsets are taken as they
/// are). `onDevice` (a CUDA buffer in the context the engine runs in, see cuda_context.h): the
/// buffer is mapped for CUDA and the view is a device frame, read in place; otherwise the
/// view is a host frame (GStreamer copies CUDA memory to the host for such a mapping). Errors (a
/// buffer too small for its caps, a format the SDK does not know, strides too small) are
/// kInvalidArgument naming the problem.
Status mapInputFrame(GstBuffer* buffer, const GstVideoInfo& info, InputFrame& out,
                     bool onDevice = false);

}  // namespace edgeinfer::gst
