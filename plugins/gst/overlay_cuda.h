// edgeoverlay on CUDA frames: the runs of overlay_draw.h (what the host drawing would write,
// computed on the host) written into the frame's planes on the GPU by one kernel launch. Built
// with the CUDA backend (EDGEINFER_HAVE_CUDA); no GStreamer here, so the tests use it directly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "edgeinfer/status.h"
#include "overlay_runs.h"

namespace edgeinfer::gst {

/// A frame in device memory: plane pointers and pitches, as overlayPlanes() describes them.
struct DeviceOverlayFrame {
  vision::PixelFormat format = vision::PixelFormat::kNV12;
  int width = 0, height = 0;
  uint8_t* planes[3] = {nullptr, nullptr, nullptr};  // device addresses
  int strides[3] = {0, 0, 0};
};

/// Writes runs into device frames in the CUDA context current on the calling thread (where it
/// first draws: a stream, a pinned host buffer and a device buffer for the runs, reused and
/// grown as needed). Not thread-safe; one per element.
class CudaOverlayRenderer {
 public:
  CudaOverlayRenderer() = default;
  CudaOverlayRenderer(const CudaOverlayRenderer&) = delete;
  CudaOverlayRenderer& operator=(const CudaOverlayRenderer&) = delete;
  /// Frees what release() frees: call release() first with the context current.
  ~CudaOverlayRenderer() { release(); }

  /// Copies `runs` to the GPU (one asynchronous copy from the pinned buffer on the renderer's
  /// stream), writes them into `frame` with one kernel launch on that stream and waits for
  /// the stream, so the frame is drawn when it returns. Nothing to do for no runs.
  /// kInvalidArgument, with nothing launched, for a run outside its plane or a frame the runs
  /// cannot be written into (GRAY8, null planes, pitches smaller than a row); kCudaError
  /// naming the call, file and line when CUDA fails.
  Status draw(const DeviceOverlayFrame& frame, const std::vector<OverlayRun>& runs);

  /// Frees the stream and buffers; the context they were made in must be current.
  void release();

 private:
  void* stream_ = nullptr;  // cudaStream_t
  OverlayRun* hostRuns_ = nullptr;
  OverlayRun* deviceRuns_ = nullptr;
  size_t capacity_ = 0;  // runs each buffer holds
};

}  // namespace edgeinfer::gst
