// GPU frames from GStreamer's CUDA elements (nvh264dec, cudaupload, ...) in the one CUDA context
// the SDK runs in. GStreamer's CUDA elements share a GstCudaContext through GstContext
// ("gst.cuda.context"); the SDK runs in the CUDA runtime's primary context of its device. A
// device pointer is only usable in the context that allocated it, so edgeinfer offers the
// decoder a GstCudaContext that wraps the primary context: the decoder then writes its frames
// where the engine reads them, and no frame is copied. Frames from another context (an element
// upstream set up its own before edgeinfer could offer one) are mapped to the host instead,
// with one warning. Built only with CUDA and GStreamer's CUDA library (EDGEINFER_GST_CUDA).
#pragma once

#include <gst/gst.h>

#include <string>

namespace edgeinfer::gst {

/// Whether this build reads video/x-raw(memory:CUDAMemory) in place.
constexpr bool kCudaMemorySupported =
#if EDGEINFER_GST_CUDA
    true;
#else
    false;
#endif

/// One element's share in the CUDA context: the primary context of its device, wrapped as a
/// GstCudaContext for GStreamer's CUDA elements. All methods are no-ops without CUDA support.
class CudaContextShare {
 public:
  CudaContextShare() = default;
  CudaContextShare(const CudaContextShare&) = delete;
  CudaContextShare& operator=(const CudaContextShare&) = delete;
  ~CudaContextShare() { close(); }

  /// Wraps the primary context of `deviceId` (made current on this thread by the CUDA
  /// runtime) and announces it to the pipeline (a have-context message); false with the reason
  /// when there is no usable GPU or GStreamer cannot load libcuda.
  bool open(GstElement* element, int deviceId, std::string* why);
  void close();

  /// Answers a context query for "gst.cuda.context" with the wrapped context; false for other
  /// queries or when closed.
  bool answer(GstElement* element, GstQuery* query) const;

  /// Whether `buffer`'s first memory is CUDA memory, and whether it lives in this context.
  static bool isCudaMemory(GstBuffer* buffer);
  bool owns(GstBuffer* buffer) const;

  /// Waits for what the producer of `buffer`'s CUDA memory left queued on the memory's own
  /// stream (gst_cuda_memory_sync, GStreamer >= 1.24, looked up at run time: this build's
  /// headers may be older; with older GStreamer producers synchronise before pushing). Call
  /// with the memory's context current, before writing the memory from another stream.
  static void syncMemory(GstBuffer* buffer);

 private:
  GstObject* context_ = nullptr;  // GstCudaContext*
};

}  // namespace edgeinfer::gst
