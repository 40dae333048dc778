// CUDA frame preprocessing: one kernel per batch of frames, each thread one tensor pixel. It
// converts the (up to) 4 source pixels it samples, interpolates, normalises and stores, so a
// frame is read once and the tensor written once, with no intermediate image.
//
// The arithmetic is edgeinfer/vision/preprocess.h's, step by step, and the results are
// bit-identical to preprocess_cpu.cpp: every float/double operation below is an explicitly
// rounded intrinsic (__fmul_rn, __dadd_rn, ...), which nvcc never contracts into a fused
// multiply-add, in the order the CPU reference evaluates it.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "runtime/cuda_backend.h"
#include "vision/preprocess_common.h"

namespace edgeinfer::vision {
namespace {

constexpr int kMaxFramesPerLaunch = 16;  // keeps the kernel parameters under 4 KiB

struct FrameJob {
  const uint8_t* planes[3];
  int strides[3];
  int format;  // PixelFormat
  int image;   // batch index written
  int srcX, srcY, srcW, srcH;
  int dstX, dstY, dstW, dstH;
  double scaleX, scaleY;      // srcW / dstW, srcH / dstH (bilinear)
  double nearestX, nearestY;  // 1 / (dstW / srcW), 1 / (dstH / srcH) (nearest)
};

struct LaunchParams {
  FrameJob jobs[kMaxFramesPerLaunch];
  float scale;
  float mean[3], stdv[3], pad[3];
  int outW, outH, channels;
  int order;  // ChannelOrder
  bool nchw, fp16, bilinear;
  void* out;
};

__device__ __forceinline__ int clamp255(int v) {
  return v < 0 ? 0 : (v > 255 ? 255 : v);
}

// Step 2: BT.601 limited range, OpenCV's integer YUV420 -> RGB.
__device__ __forceinline__ void yuvToRgb(int y, int u, int v, int rgb[3]) {
  const int yy = max(0, y - 16) * 1220542;
  const int uu = u - 128, vv = v - 128;
  constexpr int kHalf = 1 << 19;
  rgb[0] = clamp255((yy + kHalf + 1673527 * vv) >> 20);
  rgb[1] = clamp255((yy + kHalf - 852492 * vv - 409993 * uu) >> 20);
  rgb[2] = clamp255((yy + kHalf + 2116026 * uu) >> 20);
}

__device__ __forceinline__ void fetchRgb(const FrameJob& f, int x, int y, int rgb[3]) {
  const uint8_t* row = f.planes[0] + static_cast<int64_t>(y) * f.strides[0];
  switch (static_cast<PixelFormat>(f.format)) {
    case PixelFormat::kNV12: {
      const uint8_t* uv = f.planes[1] + static_cast<int64_t>(y / 2) * f.strides[1] + (x / 2) * 2;
      yuvToRgb(row[x], uv[0], uv[1], rgb);
      return;
    }
    case PixelFormat::kI420: {
      const int64_t r = y / 2;
      yuvToRgb(row[x], f.planes[1][r * f.strides[1] + x / 2], f.planes[2][r * f.strides[2] + x / 2],
               rgb);
      return;
    }
    case PixelFormat::kRGBA:
    case PixelFormat::kRGBx:
      rgb[0] = row[4 * x], rgb[1] = row[4 * x + 1], rgb[2] = row[4 * x + 2];
      return;
    case PixelFormat::kBGRA:
    case PixelFormat::kBGRx:
      rgb[0] = row[4 * x + 2], rgb[1] = row[4 * x + 1], rgb[2] = row[4 * x];
      return;
    case PixelFormat::kRGB:
      rgb[0] = row[3 * x], rgb[1] = row[3 * x + 1], rgb[2] = row[3 * x + 2];
      return;
    case PixelFormat::kBGR:
      rgb[0] = row[3 * x + 2], rgb[1] = row[3 * x + 1], rgb[2] = row[3 * x];
      return;
    case PixelFormat::kGray8:
      rgb[0] = rgb[1] = rgb[2] = row[x];
      return;
  }
}

// Steps 2 and 4: the tensor-order channel values of frame pixel (x, y).
__device__ __forceinline__ void fetchChannels(const FrameJob& f, int order, int x, int y,
                                              float out[3]) {
  if (order == static_cast<int>(ChannelOrder::kGray) &&
      f.format == static_cast<int>(PixelFormat::kGray8)) {
    out[0] = f.planes[0][static_cast<int64_t>(y) * f.strides[0] + x];
    return;
  }
  int rgb[3];
  fetchRgb(f, x, y, rgb);
  if (order == static_cast<int>(ChannelOrder::kRGB)) {
    out[0] = rgb[0], out[1] = rgb[1], out[2] = rgb[2];
  } else if (order == static_cast<int>(ChannelOrder::kBGR)) {
    out[0] = rgb[2], out[1] = rgb[1], out[2] = rgb[0];
  } else {
    out[0] = (9798 * rgb[0] + 19235 * rgb[1] + 3735 * rgb[2] + (1 << 14)) >> 15;
  }
}

// Step 3 along one axis for destination position d of a region: source indices and weight.
__device__ __forceinline__ void mapAxis(int d, int origin, int len, double s, double nearest,
                                        bool bilinear, int& i0, int& i1, float& w) {
  if (!bilinear) {
    i0 = min(static_cast<int>(floor(__dmul_rn(static_cast<double>(d), nearest))), len - 1);
    i1 = i0;
    w = 0.f;
  } else {
    const float f = __double2float_rn(__dsub_rn(__dmul_rn(__dadd_rn(d, 0.5), s), 0.5));
    i0 = static_cast<int>(floorf(f));
    w = __fsub_rn(f, static_cast<float>(i0));
    if (i0 < 0) i0 = 0, w = 0.f;
    if (i0 >= len - 1) i0 = len - 1, w = 0.f;
    i1 = min(i0 + 1, len - 1);
  }
  i0 += origin;
  i1 += origin;
}

__device__ __forceinline__ float normalise(float v, float scale, float mean, float stdv) {
  return __fdiv_rn(__fsub_rn(__fmul_rn(v, scale), mean), stdv);
}

__global__ void preprocessKernel(const LaunchParams p) {
  const int x = blockIdx.x * blockDim.x + threadIdx.x;
  const int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x >= p.outW || y >= p.outH) return;
  const FrameJob& f = p.jobs[blockIdx.z];
  const int channels = p.channels;
  float v[3];
  const int dx = x - f.dstX, dy = y - f.dstY;
  if (dx >= 0 && dx < f.dstW && dy >= 0 && dy < f.dstH) {
    int x0, x1, y0, y1;
    float a, b;
    mapAxis(dx, f.srcX, f.srcW, f.scaleX, f.nearestX, p.bilinear, x0, x1, a);
    mapAxis(dy, f.srcY, f.srcH, f.scaleY, f.nearestY, p.bilinear, y0, y1, b);
    float p00[3];
    fetchChannels(f, p.order, x0, y0, p00);
    if (p.bilinear) {
      float p01[3], p10[3], p11[3];
      fetchChannels(f, p.order, x1, y0, p01);
      fetchChannels(f, p.order, x0, y1, p10);
      fetchChannels(f, p.order, x1, y1, p11);
      const float ia = __fsub_rn(1.f, a), ib = __fsub_rn(1.f, b);
#pragma unroll
      for (int c = 0; c < 3; ++c) {
        if (c >= channels) break;
        const float top = __fadd_rn(__fmul_rn(p00[c], ia), __fmul_rn(p01[c], a));
        const float bottom = __fadd_rn(__fmul_rn(p10[c], ia), __fmul_rn(p11[c], a));
        const float value = __fadd_rn(__fmul_rn(top, ib), __fmul_rn(bottom, b));
        v[c] = normalise(value, p.scale, p.mean[c], p.stdv[c]);
      }
    } else {
#pragma unroll
      for (int c = 0; c < 3; ++c)
        if (c < channels) v[c] = normalise(p00[c], p.scale, p.mean[c], p.stdv[c]);
    }
  } else {
#pragma unroll
    for (int c = 0; c < 3; ++c) v[c] = p.pad[c];
  }
  // Step 6.
  const int64_t plane = static_cast<int64_t>(p.outW) * p.outH;
  const int64_t pix = static_cast<int64_t>(y) * p.outW + x;
  const int64_t base = static_cast<int64_t>(f.image) * plane * channels;
#pragma unroll
  for (int c = 0; c < 3; ++c) {
    if (c >= channels) break;
    const int64_t idx = base + (p.nchw ? c * plane + pix : pix * channels + c);
    if (p.fp16) {
      static_cast<__half*>(p.out)[idx] = __float2half_rn(v[c]);
    } else {
      static_cast<float*>(p.out)[idx] = v[c];
    }
  }
}

class CudaPreprocessorImpl final : public CudaPreprocessor {
 public:
  CudaPreprocessorImpl(const PreprocessConfig& cfg, int deviceId)
      : CudaPreprocessor(cfg), deviceId_(deviceId) {}
  ~CudaPreprocessorImpl() override {
    if (staging_) cudaFree(staging_);
    if (done_) cudaEventDestroy(done_);
  }

  Status init() {
    EI_CUDA_CHECK(cudaSetDevice(deviceId_));
    EI_CUDA_CHECK(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
    return Status::Ok();
  }

  Status run(const std::vector<FrameView>& frames, Tensor& batchTensor, int firstIndex,
             std::vector<Transform>* transforms, void* stream) override {
    const int count = static_cast<int>(frames.size());
    EI_RETURN_IF_ERROR(detail::checkBatchTensor(batchTensor, cfg_, MemoryLocation::kDevice,
                                                firstIndex, count, "CudaPreprocessor"));
    // Everything is checked before anything is queued.
    std::vector<detail::PreprocessRegion> regions(frames.size());
    size_t stagingBytes = 0;
    for (size_t i = 0; i < frames.size(); ++i) {
      const FrameView& f = frames[i];
      Status st = validateFrame(f);
      if (!st.ok()) return Status(st.code(), "frame " + std::to_string(i) + ": " + st.message());
      auto region = detail::preprocessRegion(f, cfg_);
      if (!region.ok())
        return Status(region.status().code(),
                      "frame " + std::to_string(i) + ": " + region.status().message());
      regions[i] = *region;
      if (f.memory == MemoryLocation::kHost)
        for (int p = 0; p < pixelFormatPlanes(f.format); ++p)
          stagingBytes += static_cast<size_t>(planeRowBytes(f.format, f.width, p)) *
                          static_cast<size_t>(planeRows(f.format, f.height, p));
    }
    if (transforms) {
      transforms->clear();
      for (size_t i = 0; i < frames.size(); ++i)
        transforms->push_back(detail::regionTransform(regions[i], frames[i]));
    }
    if (count == 0) return Status::Ok();

    EI_CUDA_CHECK(cudaSetDevice(deviceId_));
    auto s = static_cast<cudaStream_t>(stream);
    std::vector<FrameView> views = frames;
    if (stagingBytes > 0) EI_RETURN_IF_ERROR(stage(views, stagingBytes, s));

    LaunchParams lp{};
    lp.scale = cfg_.scale;
    const std::array<float, 3> pad = detail::normalisedPadding(cfg_);
    for (int c = 0; c < 3; ++c) {
      lp.mean[c] = cfg_.mean[static_cast<size_t>(c)];
      lp.stdv[c] = cfg_.std[static_cast<size_t>(c)];
      lp.pad[c] = pad[static_cast<size_t>(c)];
    }
    lp.outW = cfg_.outputWidth;
    lp.outH = cfg_.outputHeight;
    lp.channels = preprocessChannels(cfg_);
    lp.order = static_cast<int>(cfg_.channels);
    lp.nchw = cfg_.layout == TensorLayout::kNCHW;
    lp.fp16 = cfg_.dtype == DataType::kFloat16;
    lp.bilinear = cfg_.interpolation == Interpolation::kBilinear;
    lp.out = batchTensor.raw();
    const dim3 block(32, 8);
    for (int start = 0; start < count; start += kMaxFramesPerLaunch) {
      const int n = std::min(kMaxFramesPerLaunch, count - start);
      for (int j = 0; j < n; ++j) {
        const FrameView& f = views[static_cast<size_t>(start + j)];
        const detail::PreprocessRegion& r = regions[static_cast<size_t>(start + j)];
        FrameJob& job = lp.jobs[j];
        for (int p = 0; p < 3; ++p) job.planes[p] = f.planes[p], job.strides[p] = f.strides[p];
        job.format = static_cast<int>(f.format);
        job.image = firstIndex + start + j;
        job.srcX = r.src.x, job.srcY = r.src.y, job.srcW = r.src.width, job.srcH = r.src.height;
        job.dstX = r.dst.x, job.dstY = r.dst.y, job.dstW = r.dst.width, job.dstH = r.dst.height;
        // The same double expressions as the CPU reference's mapAxis().
        job.scaleX = static_cast<double>(r.src.width) / static_cast<double>(r.dst.width);
        job.scaleY = static_cast<double>(r.src.height) / static_cast<double>(r.dst.height);
        job.nearestX = 1.0 / (static_cast<double>(r.dst.width) / static_cast<double>(r.src.width));
        job.nearestY =
            1.0 / (static_cast<double>(r.dst.height) / static_cast<double>(r.src.height));
      }
      const dim3 grid((lp.outW + block.x - 1) / block.x, (lp.outH + block.y - 1) / block.y, n);
      preprocessKernel<<<grid, block, 0, s>>>(lp);
      EI_CUDA_CHECK(cudaGetLastError());
    }
    EI_CUDA_CHECK(cudaEventRecord(done_, s));
    recorded_ = true;
    return Status::Ok();
  }

  void* completionEvent() const override { return recorded_ ? done_ : nullptr; }

 private:
  // Copies host frames into the staging buffer (tight rows) and points their views at it.
  Status stage(std::vector<FrameView>& views, size_t bytes, cudaStream_t s) {
    // The previous run may still read the staging buffer (on another stream).
    EI_CUDA_CHECK(cudaStreamWaitEvent(s, done_, 0));
    if (bytes > stagingBytes_) {
      if (staging_) {
        EI_CUDA_CHECK(cudaEventSynchronize(done_));
        EI_CUDA_CHECK(cudaFree(staging_));
        staging_ = nullptr;
        stagingBytes_ = 0;
      }
      EI_CUDA_CHECK(cudaMalloc(&staging_, bytes));
      stagingBytes_ = bytes;
    }
    size_t offset = 0;
    for (FrameView& f : views) {
      if (f.memory != MemoryLocation::kHost) continue;
      for (int p = 0; p < pixelFormatPlanes(f.format); ++p) {
        const size_t row = static_cast<size_t>(planeRowBytes(f.format, f.width, p));
        const size_t rows = static_cast<size_t>(planeRows(f.format, f.height, p));
        uint8_t* dst = static_cast<uint8_t*>(staging_) + offset;
        EI_CUDA_CHECK(cudaMemcpy2DAsync(dst, row, f.planes[p], static_cast<size_t>(f.strides[p]),
                                        row, rows, cudaMemcpyHostToDevice, s));
        f.planes[p] = dst;
        f.strides[p] = static_cast<int>(row);
        offset += row * rows;
      }
      f.memory = MemoryLocation::kDevice;
    }
    return Status::Ok();
  }

  int deviceId_;
  void* staging_ = nullptr;
  size_t stagingBytes_ = 0;
  cudaEvent_t done_ = nullptr;
  bool recorded_ = false;  // done_ has been recorded by a run
};

}  // namespace

Expected<std::unique_ptr<CudaPreprocessor>> CudaPreprocessor::create(const PreprocessConfig& cfg,
                                                                     int deviceId) {
  EI_RETURN_IF_ERROR(validatePreprocessConfig(cfg));
  std::string why;
  if (!runtime::cudaBackendUsable(deviceId, &why))
    return Status(ErrorCode::kUnsupported, "CudaPreprocessor: " + why);
  auto p = std::make_unique<CudaPreprocessorImpl>(cfg, deviceId);
  EI_RETURN_IF_ERROR(p->init());
  return std::unique_ptr<CudaPreprocessor>(std::move(p));
}

}  // namespace edgeinfer::vision
