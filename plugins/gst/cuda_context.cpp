#include "cuda_context.h"

#if EDGEINFER_GST_CUDA
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudaloader.h>
#include <gst/cuda/gstcudamemory.h>
#include <gst/cuda/gstcudautils.h>
#endif

namespace edgeinfer::gst {

#if EDGEINFER_GST_CUDA

bool CudaContextShare::open(GstElement* element, int deviceId, std::string* why) {
  if (context_) return true;
  if (!gst_cuda_load_library()) {
    *why = "GStreamer's CUDA library cannot load libcuda (no NVIDIA driver?)";
    return false;
  }
  gst_cuda_memory_init_once();
  // cudaFree(0) creates the runtime's primary context and makes it current on this thread;
  // popping it hands over its handle (and pushing it back restores the thread's state).
  cudaError_t e = cudaSetDevice(deviceId);
  if (e == cudaSuccess) e = cudaFree(nullptr);
  if (e != cudaSuccess) {
    *why = std::string("CUDA device ") + std::to_string(deviceId) + ": " + cudaGetErrorString(e);
    return false;
  }
  CUcontext handle = nullptr;
  CUdevice device = 0;
  if (CuCtxPopCurrent(&handle) != CUDA_SUCCESS || !handle) {
    *why = "the CUDA runtime's primary context is not current after cudaFree(0)";
    return false;
  }
  CuCtxPushCurrent(handle);
  if (CuDeviceGet(&device, deviceId) != CUDA_SUCCESS) {
    *why = "cuDeviceGet(" + std::to_string(deviceId) + ") failed";
    return false;
  }
  GstCudaContext* ctx = gst_cuda_context_new_wrapped(handle, device);
  if (!ctx) {
    *why = "gst_cuda_context_new_wrapped failed";
    return false;
  }
  context_ = GST_OBJECT(ctx);
  GstContext* gc = gst_context_new_cuda_context(ctx);
  gst_element_post_message(element, gst_message_new_have_context(GST_OBJECT(element), gc));
  return true;
}

void CudaContextShare::close() {
  if (context_) gst_object_unref(context_);
  context_ = nullptr;
}

bool CudaContextShare::answer(GstElement* element, GstQuery* query) const {
  return context_ && GST_QUERY_TYPE(query) == GST_QUERY_CONTEXT &&
         gst_cuda_handle_context_query(element, query, GST_CUDA_CONTEXT(context_));
}

bool CudaContextShare::isCudaMemory(GstBuffer* buffer) {
  return gst_buffer_n_memory(buffer) > 0 && gst_is_cuda_memory(gst_buffer_peek_memory(buffer, 0));
}

bool CudaContextShare::owns(GstBuffer* buffer) const {
  if (!context_ || !isCudaMemory(buffer)) return false;
  const GstCudaContext* mine = GST_CUDA_CONTEXT(context_);
  const GstCudaContext* theirs = GST_CUDA_MEMORY_CAST(gst_buffer_peek_memory(buffer, 0))->context;
  return theirs == mine || gst_cuda_context_get_handle(const_cast<GstCudaContext*>(theirs)) ==
                               gst_cuda_context_get_handle(const_cast<GstCudaContext*>(mine));
}

void CudaContextShare::syncMemory(GstBuffer* buffer) {
  using SyncFn = void (*)(GstCudaMemory*);
  // The library this plugin was linked with is loaded already (RTLD_NOLOAD): only look in it.
  static const SyncFn sync = [] {
    void* lib = dlopen("libgstcuda-1.0.so.0", RTLD_NOW | RTLD_NOLOAD);
    return lib ? reinterpret_cast<SyncFn>(dlsym(lib, "gst_cuda_memory_sync")) : nullptr;
  }();
  if (!sync) return;
  for (guint i = 0; i < gst_buffer_n_memory(buffer); ++i) {
    GstMemory* m = gst_buffer_peek_memory(buffer, i);
    if (gst_is_cuda_memory(m)) sync(GST_CUDA_MEMORY_CAST(m));
  }
}

#else  // without CUDA memory support

bool CudaContextShare::open(GstElement*, int, std::string* why) {
  *why = "this build of the plugin has no CUDA memory support";
  return false;
}
void CudaContextShare::close() {}
bool CudaContextShare::answer(GstElement*, GstQuery*) const {
  return false;
}
bool CudaContextShare::isCudaMemory(GstBuffer*) {
  return false;
}
bool CudaContextShare::owns(GstBuffer*) const {
  return false;
}
void CudaContextShare::syncMemory(GstBuffer*) {}

#endif

}  // namespace edgeinfer::gst
