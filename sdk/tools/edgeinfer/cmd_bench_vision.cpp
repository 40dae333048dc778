// `edgeinfer bench-vision preprocess|nms`: GPU pre/post-processing benchmarks (the goals of
// docs/performance.md), CPU reference timings beside them.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <random>
#include <vector>

#include "cli.h"
#include "edgeinfer/vision/postprocess.h"
#include "edgeinfer/vision/preprocess.h"

#if EDGEINFER_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace edgeinfer::cli {
namespace {

const char* kBenchVisionHelp = R"(usage: edgeinfer bench-vision preprocess|nms [options]

  preprocess   frames -> network input on the GPU (CudaPreprocessor), one launch per batch
      --frame WxH        frame size (default 1920x1080)      --format F    frame format (NV12)
      --size WxH         tensor size (default 640x640)       --batch N     frames (default 8)
      --fp16             float16 tensor (default float32)    --layout NCHW|NHWC (NCHW)
      frames are in device memory (as NVDEC hands them over), letterboxed, bilinear
  nms          batched class-aware hard NMS on the GPU (CudaNms), results back on the host
      --boxes N          candidates (default 10000)          --seed S      (default 1)
      --objects K        objects the candidates cluster around (default 200)
  --warmup N (20), --iterations N (200), --json FILE
)";

#if EDGEINFER_HAVE_CUDA
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

bool parseSize(const std::string& s, int& w, int& h) {
  return std::sscanf(s.c_str(), "%dx%d", &w, &h) == 2 && w > 0 && h > 0;
}

int benchPreprocess(const Args& a, int warmup, int iters) {
  using namespace vision;
  int fw = 1920, fh = 1080, ow = 640, oh = 640;
  if (!parseSize(a.get("frame", "1920x1080"), fw, fh) ||
      !parseSize(a.get("size", "640x640"), ow, oh))
    return fail(Status(ErrorCode::kInvalidArgument, "--frame and --size take WxH"));
  auto fmt = parsePixelFormat(a.get("format", "NV12"));
  if (!fmt.ok()) return fail(fmt.status());
  const int batch = std::max(1, std::atoi(a.get("batch", "8").c_str()));
  PreprocessConfig cfg;
  cfg.outputWidth = ow;
  cfg.outputHeight = oh;
  cfg.resize = ResizeMode::kLetterbox;
  cfg.padValue = {114.f, 114.f, 114.f};
  cfg.dtype = a.has("fp16") ? DataType::kFloat16 : DataType::kFloat32;
  cfg.layout = a.get("layout", "NCHW") == "NHWC" ? TensorLayout::kNHWC : TensorLayout::kNCHW;
  auto pre = CudaPreprocessor::create(cfg);
  if (!pre.ok()) return fail(pre.status());
  // Device frames with random pixels and a decoder-like pitch (rows rounded up to 256 bytes).
  const int pitch = static_cast<int>((planeRowBytes(*fmt, fw, 0) + 255) / 256 * 256);
  const size_t bytes = frameBufferBytes(*fmt, fw, fh, pitch, 0);
  std::vector<uint8_t> host(bytes);
  std::mt19937 rng(1);
  for (auto& b : host) b = static_cast<uint8_t>(rng());
  std::vector<void*> mem(static_cast<size_t>(batch));
  std::vector<FrameView> frames;
  for (auto& m : mem) {
    if (cudaMalloc(&m, bytes) != cudaSuccess ||
        cudaMemcpy(m, host.data(), bytes, cudaMemcpyHostToDevice) != cudaSuccess)
      return fail(Status(ErrorCode::kCudaError, "bench-vision: frame allocation failed"));
    auto v = wrapFrame(*fmt, fw, fh, static_cast<const uint8_t*>(m), pitch, 0);
    if (!v.ok()) return fail(v.status());
    v->memory = MemoryLocation::kDevice;
    frames.push_back(*v);
  }
  auto out = copyToDevice(Tensor::zeros(cfg.dtype, preprocessTensorShape(cfg, batch)));
  if (!out.ok()) return fail(out.status());
  cudaStream_t s = nullptr;
  cudaStreamCreate(&s);
  for (int i = 0; i < warmup; ++i) {
    Status st = (*pre)->run(frames, *out, 0, nullptr, s);
    if (!st.ok()) return fail(st);
  }
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<double> perBatchUs;
  for (int i = 0; i < iters; ++i) {
    cudaEventRecord(e0, s);
    (void)(*pre)->run(frames, *out, 0, nullptr, s);
    cudaEventRecord(e1, s);
    cudaEventSynchronize(e1);
    float ms = 0;
    cudaEventElapsedTime(&ms, e0, e1);
    perBatchUs.push_back(ms * 1000.0);
  }
  const double us = median(perBatchUs);
  const double readBytes = static_cast<double>(frameBufferBytes(*fmt, fw, fh)) * batch;
  const double writeBytes = static_cast<double>(out->bytes());
  std::cout << "preprocess " << pixelFormatName(*fmt) << " " << fw << "x" << fh << " -> "
            << (cfg.layout == TensorLayout::kNCHW ? "NCHW " : "NHWC ") << dataTypeName(cfg.dtype)
            << " " << ow << "x" << oh << " letterbox, batch " << batch << ": " << us
            << " us per batch (GPU, median of " << iters << "), " << us / batch << " us per frame, "
            << (readBytes + writeBytes) / (us * 1e-6) / 1e9 << " GB/s of frame + tensor bytes\n";
  for (void* m : mem) cudaFree(m);
  cudaStreamDestroy(s);
  return 0;
}

int benchNms(const Args& a, int warmup, int iters) {
  using namespace vision;
  const int boxes = std::max(1, std::atoi(a.get("boxes", "10000").c_str()));
  const int objects = std::max(1, std::atoi(a.get("objects", "200").c_str()));
  std::mt19937 rng(static_cast<unsigned>(std::atoi(a.get("seed", "1").c_str())));
  std::uniform_real_distribution<float> pos(0.f, 600.f), size(10.f, 120.f), jit(-6.f, 6.f),
      u(0.f, 1.f);
  std::vector<std::array<float, 4>> centres(static_cast<size_t>(objects));
  for (auto& o : centres) o = {pos(rng), pos(rng), size(rng), size(rng)};
  Tensor hb = Tensor::zeros(DataType::kFloat32, {1, boxes, 4});
  Tensor hs = Tensor::zeros(DataType::kFloat32, {1, boxes});
  Tensor hc = Tensor::zeros(DataType::kInt32, {1, boxes});
  for (int i = 0; i < boxes; ++i) {
    const auto& o = centres[rng() % static_cast<unsigned>(objects)];
    float* b = hb.data<float>() + 4 * i;
    b[0] = o[0] + jit(rng), b[1] = o[1] + jit(rng);
    b[2] = b[0] + o[2] + jit(rng), b[3] = b[1] + o[3] + jit(rng);
    hs.data<float>()[i] = u(rng);
    hc.data<int32_t>()[i] = static_cast<int32_t>(rng() % 80);
  }
  auto db = copyToDevice(hb), ds = copyToDevice(hs), dc = copyToDevice(hc);
  if (!db.ok() || !ds.ok() || !dc.ok())
    return fail(Status(ErrorCode::kCudaError, "bench-vision: upload failed"));
  auto nms = CudaNms::create();
  if (!nms.ok()) return fail(nms.status());
  NmsParams p;
  p.scoreThreshold = 0.f;
  p.iouThreshold = 0.45f;
  p.maxDetections = 300;
  size_t kept = 0;
  std::vector<double> gpuUs, cpuUs;
  for (int i = 0; i < warmup + iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = (*nms)->run(*db, *ds, *dc, p, nullptr);
    const auto t1 = std::chrono::steady_clock::now();
    if (!r.ok()) return fail(r.status());
    kept = (*r)[0].size();
    if (i >= warmup) gpuUs.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  for (int i = 0; i < std::min(iters, 20); ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    auto r = batchedNms(hb, hs, hc, p);
    cpuUs.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (!r.ok()) return fail(r.status());
  }
  std::cout << "nms " << boxes << " candidates around " << objects
            << " objects, 80 classes, IoU 0.45, max 300: GPU " << median(gpuUs)
            << " us per call (wall clock, results on the host, median of " << iters
            << "), CPU reference " << median(cpuUs) << " us; kept " << kept << "\n";
  return 0;
}
#endif

}  // namespace

int cmdBenchVision(const Args& a) {
  if (a.has("help") || a.positional.size() != 1) {
    std::cout << kBenchVisionHelp;
    return a.has("help") ? 0 : 2;
  }
  const int warmup = std::max(0, std::atoi(a.get("warmup", "20").c_str()));
  const int iters = std::max(1, std::atoi(a.get("iterations", "200").c_str()));
  const std::string what = a.positional[0];
  if (what != "preprocess" && what != "nms")
    return fail(Status(ErrorCode::kInvalidArgument,
                       "bench-vision: unknown benchmark '" + what + "' (preprocess or nms)"));
#if EDGEINFER_HAVE_CUDA
  return what == "preprocess" ? benchPreprocess(a, warmup, iters) : benchNms(a, warmup, iters);
#else
  (void)warmup;
  (void)iters;
  return fail(Status(ErrorCode::kUnsupported,
                     "bench-vision: EdgeInfer was built without CUDA (GPU benchmarks only)"));
#endif
}

}  // namespace edgeinfer::cli
