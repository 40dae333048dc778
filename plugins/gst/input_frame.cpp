#include "input_frame.h"

#include <string>

#include "caps.h"

#if EDGEINFER_GST_CUDA
#include <gst/cuda/gstcudamemory.h>
#endif

namespace edgeinfer::gst {

void InputFrame::unmap() {
  if (mapped_) gst_video_frame_unmap(&frame_);
  mapped_ = false;
  view_ = vision::FrameView{};
}

Status mapInputFrame(GstBuffer* buffer, const GstVideoInfo& info, InputFrame& out, bool onDevice) {
  out.unmap();
  vision::PixelFormat format{};
  if (!toPixelFormat(GST_VIDEO_INFO_FORMAT(&info), &format))
    return Status(ErrorCode::kInvalidArgument,
                  std::string("video format ") +
                      gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&info)) +
                      " is not one the SDK takes");
  // gst_video_frame_map() takes the strides and plane offsets of the buffer's GstVideoMeta
  // when there is one, else those of `info`, and checks the buffer is large enough.
  // GST_MAP_CUDA: the plane pointers are device addresses (CUdeviceptr).
  int flags = GST_MAP_READ;
#if EDGEINFER_GST_CUDA
  if (onDevice) flags |= GST_MAP_CUDA;
#else
  onDevice = false;
#endif
  if (!gst_video_frame_map(&out.frame_, const_cast<GstVideoInfo*>(&info), buffer,
                           static_cast<GstMapFlags>(flags)))
    return Status(ErrorCode::kInvalidArgument,
                  "cannot map the buffer as a " + std::to_string(GST_VIDEO_INFO_WIDTH(&info)) +
                      "x" + std::to_string(GST_VIDEO_INFO_HEIGHT(&info)) + " " +
                      gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&info)) + " frame (" +
                      std::to_string(gst_buffer_get_size(buffer)) +
                      " bytes; too small, or unreadable memory)");
  out.mapped_ = true;
  vision::FrameView& v = out.view_;
  v.format = format;
  v.width = GST_VIDEO_FRAME_WIDTH(&out.frame_);
  v.height = GST_VIDEO_FRAME_HEIGHT(&out.frame_);
  v.memory = onDevice ? MemoryLocation::kDevice : MemoryLocation::kHost;
  for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES(&out.frame_) && p < 3; ++p) {
    v.planes[p] = static_cast<const uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&out.frame_, p));
    v.strides[p] = GST_VIDEO_FRAME_PLANE_STRIDE(&out.frame_, p);
  }
  Status st = vision::validateFrame(v);
  if (!st.ok()) {
    out.unmap();
    return st;
  }
  return Status::Ok();
}

}  // namespace edgeinfer::gst
