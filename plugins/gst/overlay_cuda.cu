#include <cuda_runtime.h>

#include <cstring>
#include <string>

#include "overlay_cuda.h"

namespace edgeinfer::gst {

namespace {

struct Planes {
  uint8_t* data[3];
  int stride[3];
  int bytesPerPixel[3];
};

constexpr int kRunsPerBlock = 8;  // one warp per run

// Each warp writes one run, its lanes striding over the run's pixels. The runs never overlap
// (overlayRuns), so the order of the writes does not matter.
__global__ void writeRuns(const OverlayRun* __restrict__ runs, int count, Planes planes) {
  const int run = blockIdx.x * kRunsPerBlock + static_cast<int>(threadIdx.x) / 32;
  if (run >= count) return;
  const OverlayRun r = runs[run];
  const int bpp = planes.bytesPerPixel[r.plane];
  uint8_t* row = planes.data[r.plane] + static_cast<ptrdiff_t>(r.y) * planes.stride[r.plane];
  for (int x = r.x0 + static_cast<int>(threadIdx.x % 32); x < r.x1; x += 32) {
    uint8_t* px = row + static_cast<ptrdiff_t>(x) * bpp;
    for (int b = 0; b < bpp; ++b) px[b] = r.value[b];
  }
}

Status cudaFailure(cudaError_t e, const char* call, int line) {
  return Status(ErrorCode::kCudaError, std::string("edgeoverlay: ") + call + ": " +
                                           cudaGetErrorString(e) + " (" + __FILE__ + ":" +
                                           std::to_string(line) + ")");
}

}  // namespace

#define EI_OVERLAY_CUDA(call)                                       \
  do {                                                              \
    const cudaError_t e_ = (call);                                  \
    if (e_ != cudaSuccess) return cudaFailure(e_, #call, __LINE__); \
  } while (0)

Status CudaOverlayRenderer::draw(const DeviceOverlayFrame& frame,
                                 const std::vector<OverlayRun>& runs) {
  OverlayPlane planes[3];
  const int n = overlayPlanes(frame.format, frame.width, frame.height, planes);
  if (n == 0) return Status(ErrorCode::kInvalidArgument, "edgeoverlay: no drawing on GRAY8 frames");
  Planes p{};
  for (int i = 0; i < n; ++i) {
    if (!frame.planes[i] || frame.strides[i] < planes[i].width * planes[i].bytesPerPixel)
      return Status(ErrorCode::kInvalidArgument,
                    "edgeoverlay: plane " + std::to_string(i) + " of the CUDA frame is missing " +
                        "or its pitch " + std::to_string(frame.strides[i]) +
                        " is smaller than a row");
    p.data[i] = frame.planes[i];
    p.stride[i] = frame.strides[i];
    p.bytesPerPixel[i] = planes[i].bytesPerPixel;
  }
  for (const OverlayRun& r : runs)
    if (r.plane >= n || r.y < 0 || r.y >= planes[r.plane].height || r.x0 < 0 || r.x0 > r.x1 ||
        r.x1 > planes[r.plane].width)
      return Status(ErrorCode::kInvalidArgument,
                    "edgeoverlay: run (plane " + std::to_string(r.plane) + ", row " +
                        std::to_string(r.y) + ", columns " + std::to_string(r.x0) + ".." +
                        std::to_string(r.x1) + ") lies outside the frame");
  if (runs.empty()) return Status::Ok();

  if (!stream_) {
    cudaStream_t s = nullptr;
    // A blocking stream: ordered after work on the legacy default stream (producers that
    // write frames there).
    EI_OVERLAY_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamDefault));
    stream_ = s;
  }
  if (runs.size() > capacity_) {
    size_t grown = capacity_ ? capacity_ : 4096;
    while (grown < runs.size()) grown *= 2;
    if (hostRuns_) EI_OVERLAY_CUDA(cudaFreeHost(hostRuns_));
    if (deviceRuns_) EI_OVERLAY_CUDA(cudaFree(deviceRuns_));
    hostRuns_ = deviceRuns_ = nullptr;
    capacity_ = 0;
    EI_OVERLAY_CUDA(cudaMallocHost(&hostRuns_, grown * sizeof(OverlayRun)));
    EI_OVERLAY_CUDA(cudaMalloc(&deviceRuns_, grown * sizeof(OverlayRun)));
    capacity_ = grown;
  }
  const auto stream = static_cast<cudaStream_t>(stream_);
  // The previous frame's copy has finished (draw() waits for its stream): the pinned buffer
  // is free.
  std::memcpy(hostRuns_, runs.data(), runs.size() * sizeof(OverlayRun));
  EI_OVERLAY_CUDA(cudaMemcpyAsync(deviceRuns_, hostRuns_, runs.size() * sizeof(OverlayRun),
                                  cudaMemcpyHostToDevice, stream));
  const int count = static_cast<int>(runs.size());
  const unsigned blocks = static_cast<unsigned>((count + kRunsPerBlock - 1) / kRunsPerBlock);
  writeRuns<<<blocks, kRunsPerBlock * 32, 0, stream>>>(deviceRuns_, count, p);
  EI_OVERLAY_CUDA(cudaGetLastError());
  EI_OVERLAY_CUDA(cudaStreamSynchronize(stream));
  return Status::Ok();
}

void CudaOverlayRenderer::release() {
  // Errors are ignored: this frees, and a context in error frees nothing anyway.
  if (hostRuns_) cudaFreeHost(hostRuns_);
  if (deviceRuns_) cudaFree(deviceRuns_);
  if (stream_) cudaStreamDestroy(static_cast<cudaStream_t>(stream_));
  hostRuns_ = deviceRuns_ = nullptr;
  stream_ = nullptr;
  capacity_ = 0;
}

}  // namespace edgeinfer::gst
