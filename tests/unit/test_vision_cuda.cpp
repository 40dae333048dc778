// GPU vision (CudaPreprocessor, CudaNms) against the CPU references (preprocessCpu,
// batchedNms). Both GPU paths promise bit-identical results, so the comparisons here have
// zero tolerance: every tensor value and every kept index must be equal.
//
// The GPU tests skip with a message where no GPU is usable; the "no GPU" tests check the
// error a user gets then (and skip where a GPU is present).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "edgeinfer/tensor.h"
#include "edgeinfer/vision/postprocess.h"
#include "edgeinfer/vision/preprocess.h"

#if EDGEINFER_HAVE_CUDA
#include <cuda_runtime.h>

#include "tactic_test_util.h"
#include "vision_test_util.h"
#endif

namespace edgeinfer::vision {
namespace {

bool gpuPresent() {
#if EDGEINFER_HAVE_CUDA
  std::string why;
  return edgeinfer::test::gpuAvailable(&why);
#else
  return false;
#endif
}

TEST(VisionCuda, PreprocessorWithoutGpuSaysSo_n) {
  if (gpuPresent()) GTEST_SKIP() << "a GPU is present: the no-GPU error cannot be seen here";
  PreprocessConfig cfg;
  cfg.outputWidth = cfg.outputHeight = 8;
  auto p = CudaPreprocessor::create(cfg);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(p.status().message().find("CudaPreprocessor"), std::string::npos)
      << p.status().toString();
}

TEST(VisionCuda, NmsWithoutGpuSaysSo_n) {
  if (gpuPresent()) GTEST_SKIP() << "a GPU is present: the no-GPU error cannot be seen here";
  auto n = CudaNms::create();
  ASSERT_FALSE(n.ok());
  EXPECT_EQ(n.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(n.status().message().find("CudaNms"), std::string::npos) << n.status().toString();
}

TEST(VisionCuda, PreprocessorRejectsBadConfigBeforeLookingForAGpu_n) {
  PreprocessConfig cfg;  // output size 0x0
  auto p = CudaPreprocessor::create(cfg);
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), ErrorCode::kInvalidArgument) << p.status().toString();
}

#if EDGEINFER_HAVE_CUDA

using test::kAllFormats;
using test::randomFrame;
using HostFrame = test::TestFrame;

// A device copy of a host frame (same strides), freed with the object.
struct DeviceFrame {
  void* mem = nullptr;
  FrameView view;
  explicit DeviceFrame(const HostFrame& h) {
    EXPECT_EQ(cudaMalloc(&mem, h.data.size()), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(mem, h.data.data(), h.data.size(), cudaMemcpyHostToDevice), cudaSuccess);
    view = h.view;
    for (int p = 0; p < pixelFormatPlanes(view.format); ++p)
      view.planes[p] = static_cast<const uint8_t*>(mem) + (h.view.planes[p] - h.data.data());
    view.memory = MemoryLocation::kDevice;
  }
  ~DeviceFrame() { cudaFree(mem); }
  DeviceFrame(const DeviceFrame&) = delete;
  DeviceFrame& operator=(const DeviceFrame&) = delete;
};

Tensor deviceTensor(DataType dtype, const Shape& shape) {
  Tensor host = Tensor::zeros(dtype, shape);
  auto d = copyToDevice(host);
  EXPECT_TRUE(d.ok()) << d.status().toString();
  return d.ok() ? *d : Tensor();
}

Tensor toHost(const Tensor& d) {
  Tensor h = Tensor::zeros(d.dtype(), d.shape());
  EXPECT_EQ(cudaMemcpy(h.raw(), d.raw(), d.bytes(), cudaMemcpyDeviceToHost), cudaSuccess);
  return h;
}

// Number of bytes that differ; prints the first difference.
int64_t differingValues(const Tensor& a, const Tensor& b, const std::string& what) {
  const size_t elem = dataTypeSize(a.dtype());
  const auto* pa = static_cast<const uint8_t*>(a.raw());
  const auto* pb = static_cast<const uint8_t*>(b.raw());
  int64_t bad = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    if (std::memcmp(pa + i * elem, pb + i * elem, elem) != 0) {
      if (bad == 0) {
        float va = 0, vb = 0;
        if (a.dtype() == DataType::kFloat32) {
          std::memcpy(&va, pa + i * elem, 4);
          std::memcpy(&vb, pb + i * elem, 4);
        }
        ADD_FAILURE() << what << ": first difference at element " << i << " (GPU " << va << ", CPU "
                      << vb << ")";
      }
      ++bad;
    }
  return bad;
}

bool sameTransform(const Transform& a, const Transform& b) {
  return a.scaleX == b.scaleX && a.scaleY == b.scaleY && a.offsetX == b.offsetX &&
         a.offsetY == b.offsetY && a.roiX == b.roiX && a.roiY == b.roiY &&
         a.frameWidth == b.frameWidth && a.frameHeight == b.frameHeight;
}

// Runs `frames` through the GPU (device copies, or the host frames staged by the
// preprocessor) and each through preprocessCpu; expects bit-identical tensors and transforms.
void expectGpuEqualsCpu(const std::vector<HostFrame*>& frames, const PreprocessConfig& cfg,
                        bool stageFromHost, const std::string& what) {
  const int n = static_cast<int>(frames.size());
  Tensor cpu = Tensor::zeros(cfg.dtype, preprocessTensorShape(cfg, n));
  std::vector<Transform> cpuT(frames.size());
  for (int i = 0; i < n; ++i)
    ASSERT_TRUE(preprocessCpu(frames[static_cast<size_t>(i)]->view, cfg, cpu, i,
                              &cpuT[static_cast<size_t>(i)])
                    .ok());
  std::vector<std::unique_ptr<DeviceFrame>> dev;
  std::vector<FrameView> views;
  for (HostFrame* f : frames) {
    if (stageFromHost) {
      views.push_back(f->view);
    } else {
      dev.push_back(std::make_unique<DeviceFrame>(*f));
      views.push_back(dev.back()->view);
    }
  }
  auto pre = CudaPreprocessor::create(cfg);
  ASSERT_TRUE(pre.ok()) << pre.status().toString();
  Tensor gpu = deviceTensor(cfg.dtype, preprocessTensorShape(cfg, n));
  std::vector<Transform> gpuT;
  Status st = (*pre)->run(views, gpu, 0, &gpuT, nullptr);
  ASSERT_TRUE(st.ok()) << what << ": " << st.toString();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(differingValues(toHost(gpu), cpu, what), 0) << what;
  ASSERT_EQ(gpuT.size(), cpuT.size());
  for (size_t i = 0; i < gpuT.size(); ++i) EXPECT_TRUE(sameTransform(gpuT[i], cpuT[i])) << what;
}

PreprocessConfig config(int w, int h) {
  PreprocessConfig cfg;
  cfg.outputWidth = w;
  cfg.outputHeight = h;
  return cfg;
}

// Every format, odd frame and tensor sizes, padded pitches, every resize mode and
// interpolation, both layouts and dtypes, RGB/BGR/GRAY, ImageNet-style normalisation.
TEST(VisionCuda, PreprocessMatchesCpuBitExactlyEverywhere) {
  EI_SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  const ResizeMode modes[] = {ResizeMode::kStretch, ResizeMode::kLetterbox,
                              ResizeMode::kCenterCrop};
  int combo = 0;
  for (PixelFormat fmt : kAllFormats) {
    HostFrame f = randomFrame(fmt, 37 + combo % 5, 23 + combo % 7, combo % 2 ? 13 : 0, rng);
    for (ResizeMode mode : modes)
      for (int variant = 0; variant < 4; ++variant, ++combo) {
        PreprocessConfig cfg = config(variant % 2 ? 19 : 64, variant % 2 ? 31 : 48);
        cfg.resize = mode;
        cfg.interpolation = variant == 3 ? Interpolation::kNearest : Interpolation::kBilinear;
        cfg.layout = variant % 2 ? TensorLayout::kNHWC : TensorLayout::kNCHW;
        cfg.dtype = variant >= 2 ? DataType::kFloat16 : DataType::kFloat32;
        cfg.channels = combo % 3 == 0   ? ChannelOrder::kBGR
                       : combo % 5 == 0 ? ChannelOrder::kGray
                                        : ChannelOrder::kRGB;
        cfg.mean = {123.675f / 255.f, 116.28f / 255.f, 103.53f / 255.f};
        cfg.std = {0.229f, 0.224f, 0.225f};
        cfg.padValue = {114.f, 100.f, 90.f};
        expectGpuEqualsCpu({&f}, cfg, false,
                           std::string(pixelFormatName(fmt)) + " combo " + std::to_string(combo));
      }
  }
}

TEST(VisionCuda, PreprocessRoiAndExtremeScales) {
  EI_SKIP_WITHOUT_GPU();
  std::mt19937 rng(11);
  HostFrame big = randomFrame(PixelFormat::kNV12, 641, 479, 64, rng);
  PreprocessConfig roi = config(33, 17);
  roi.useRoi = true;
  roi.roi = {101, 57, 211, 99};
  expectGpuEqualsCpu({&big}, roi, false, "ROI");
  PreprocessConfig down = config(7, 5);  // 90x downscale: aliasing like INTER_LINEAR
  expectGpuEqualsCpu({&big}, down, false, "downscale");
  HostFrame tiny = randomFrame(PixelFormat::kBGRx, 3, 2, 0, rng);
  PreprocessConfig up = config(300, 211);
  up.resize = ResizeMode::kLetterbox;
  expectGpuEqualsCpu({&tiny}, up, false, "upscale");
  HostFrame one = randomFrame(PixelFormat::kI420, 1, 1, 0, rng);
  expectGpuEqualsCpu({&one}, config(5, 3), false, "1x1 frame");
}

// A batch of 20 frames of different formats and sizes (two kernel launches of at most 16),
// from device memory and staged from host memory.
TEST(VisionCuda, PreprocessMixedBatchFromDeviceAndHost) {
  EI_SKIP_WITHOUT_GPU();
  std::mt19937 rng(3);
  std::vector<HostFrame> frames;
  for (int i = 0; i < 20; ++i)
    frames.push_back(randomFrame(kAllFormats[i % 9], 40 + 3 * i, 30 + i, i % 3 ? 0 : 9, rng));
  std::vector<HostFrame*> ptrs;
  for (HostFrame& f : frames) ptrs.push_back(&f);
  PreprocessConfig cfg = config(64, 64);
  cfg.resize = ResizeMode::kLetterbox;
  cfg.dtype = DataType::kFloat16;
  expectGpuEqualsCpu(ptrs, cfg, false, "device batch");
  expectGpuEqualsCpu(ptrs, cfg, true, "host batch");
}

TEST(VisionCuda, PreprocessWritesOnlyItsImages) {
  EI_SKIP_WITHOUT_GPU();
  std::mt19937 rng(5);
  HostFrame f = randomFrame(PixelFormat::kRGB, 20, 10, 0, rng);
  PreprocessConfig cfg = config(8, 8);
  Tensor host = Tensor::zeros(DataType::kFloat32, preprocessTensorShape(cfg, 3));
  for (int64_t i = 0; i < host.numel(); ++i) host.data<float>()[i] = -7.f;
  auto gpu = copyToDevice(host);
  ASSERT_TRUE(gpu.ok());
  auto pre = CudaPreprocessor::create(cfg);
  ASSERT_TRUE(pre.ok()) << pre.status().toString();
  ASSERT_TRUE((*pre)->run({f.view}, *gpu, 1, nullptr, nullptr).ok());
  Tensor back = toHost(*gpu);
  const int64_t per = 3 * 8 * 8;
  for (int64_t i = 0; i < per; ++i) {
    EXPECT_EQ(back.data<float>()[i], -7.f);
    EXPECT_EQ(back.data<float>()[2 * per + i], -7.f);
  }
  EXPECT_NE(back.data<float>()[per], -7.f);
}

TEST(VisionCuda, PreprocessRejectsBadInputAndWritesNothing_n) {
  EI_SKIP_WITHOUT_GPU();
  std::mt19937 rng(9);
  HostFrame f = randomFrame(PixelFormat::kNV12, 16, 16, 0, rng);
  PreprocessConfig cfg = config(8, 8);
  auto pre = CudaPreprocessor::create(cfg);
  ASSERT_TRUE(pre.ok()) << pre.status().toString();
  Tensor gpu = deviceTensor(DataType::kFloat32, preprocessTensorShape(cfg, 1));
  auto expectInvalid = [](const Status& st, const std::string& needle) {
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << st.toString();
    EXPECT_NE(st.message().find(needle), std::string::npos) << st.toString();
  };
  Tensor hostTensor = Tensor::zeros(DataType::kFloat32, preprocessTensorShape(cfg, 1));
  expectInvalid((*pre)->run({f.view}, hostTensor, 0, nullptr, nullptr), "device tensor");
  Tensor half = deviceTensor(DataType::kFloat16, preprocessTensorShape(cfg, 1));
  expectInvalid((*pre)->run({f.view}, half, 0, nullptr, nullptr), "config asks for float32");
  Tensor wrong = deviceTensor(DataType::kFloat32, {1, 3, 8, 9});
  expectInvalid((*pre)->run({f.view}, wrong, 0, nullptr, nullptr), "does not match");
  expectInvalid((*pre)->run({f.view, f.view}, gpu, 0, nullptr, nullptr), "outside the tensor");
  expectInvalid((*pre)->run({f.view}, gpu, -1, nullptr, nullptr), "batch index -1");
  FrameView broken = f.view;
  broken.planes[1] = nullptr;
  Tensor two = deviceTensor(DataType::kFloat32, preprocessTensorShape(cfg, 2));
  expectInvalid((*pre)->run({f.view, broken}, two, 0, nullptr, nullptr), "frame 1");
  PreprocessConfig roiCfg = cfg;
  roiCfg.useRoi = true;
  roiCfg.roi = {10, 10, 7, 7};
  auto roiPre = CudaPreprocessor::create(roiCfg);
  ASSERT_TRUE(roiPre.ok());
  expectInvalid((*roiPre)->run({f.view}, gpu, 0, nullptr, nullptr), "not inside");
  // Nothing was written by any of these.
  Tensor back = toHost(gpu);
  for (int64_t i = 0; i < back.numel(); ++i) ASSERT_EQ(back.data<float>()[i], 0.f);
  EXPECT_TRUE((*pre)->run({}, gpu, 0, nullptr, nullptr).ok()) << "an empty batch is a no-op";
}

TEST(VisionCuda, PreprocessCpuRefusesDeviceFrames_n) {
  EI_SKIP_WITHOUT_GPU();
  std::mt19937 rng(1);
  HostFrame f = randomFrame(PixelFormat::kRGB, 4, 4, 0, rng);
  DeviceFrame d(f);
  PreprocessConfig cfg = config(4, 4);
  Tensor t = Tensor::zeros(DataType::kFloat32, preprocessTensorShape(cfg, 1));
  Status st = preprocessCpu(d.view, cfg, t, 0, nullptr);
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(st.message().find("device memory"), std::string::npos) << st.toString();
}

// ---- NMS --------------------------------------------------------------------------------

struct NmsCase {
  int images = 1, boxes = 0;
  std::vector<float> box, score;
  std::vector<int32_t> cls;
};

Expected<std::vector<std::vector<int>>> gpuNms(const NmsCase& c, const NmsParams& p,
                                               bool withClasses) {
  auto nms = CudaNms::create();
  if (!nms.ok()) return nms.status();
  Tensor b =
      Tensor::wrap(const_cast<float*>(c.box.data()), DataType::kFloat32, {c.images, c.boxes, 4});
  Tensor s =
      Tensor::wrap(const_cast<float*>(c.score.data()), DataType::kFloat32, {c.images, c.boxes});
  auto db = copyToDevice(b), ds = copyToDevice(s);
  if (!db.ok()) return db.status();
  if (!ds.ok()) return ds.status();
  Tensor dc;
  if (withClasses) {
    Tensor h =
        Tensor::wrap(const_cast<int32_t*>(c.cls.data()), DataType::kInt32, {c.images, c.boxes});
    auto d = copyToDevice(h);
    if (!d.ok()) return d.status();
    dc = *d;
  }
  return (*nms)->run(*db, *ds, dc, p, nullptr);
}

std::vector<std::vector<int>> cpuNms(const NmsCase& c, const NmsParams& p, bool withClasses) {
  Tensor b =
      Tensor::wrap(const_cast<float*>(c.box.data()), DataType::kFloat32, {c.images, c.boxes, 4});
  Tensor s =
      Tensor::wrap(const_cast<float*>(c.score.data()), DataType::kFloat32, {c.images, c.boxes});
  Tensor cl = withClasses ? Tensor::wrap(const_cast<int32_t*>(c.cls.data()), DataType::kInt32,
                                         {c.images, c.boxes})
                          : Tensor();
  auto r = batchedNms(b, s, cl, p);
  EXPECT_TRUE(r.ok()) << r.status().toString();
  return r.ok() ? *r : std::vector<std::vector<int>>{};
}

// Clustered boxes like a detector's raw output: `objects` objects, each with jittered
// candidates, random classes and scores (some tied, some NaN, some boxes non-finite).
NmsCase clusteredCase(int images, int boxes, int objects, int classes, std::mt19937& rng) {
  NmsCase c;
  c.images = images;
  c.boxes = boxes;
  std::uniform_real_distribution<float> pos(0.f, 600.f), size(10.f, 120.f), jit(-6.f, 6.f),
      u(0.f, 1.f);
  for (int n = 0; n < images; ++n) {
    std::vector<std::array<float, 4>> centres(static_cast<size_t>(objects));
    for (auto& o : centres) o = {pos(rng), pos(rng), size(rng), size(rng)};
    for (int i = 0; i < boxes; ++i) {
      const auto& o = centres[static_cast<size_t>(rng() % static_cast<unsigned>(objects))];
      const float x = o[0] + jit(rng), y = o[1] + jit(rng);
      const float w = o[2] + jit(rng), h = o[3] + jit(rng);
      c.box.insert(c.box.end(), {x, y, x + w, y + h});
      float s = std::round(u(rng) * 200.f) / 200.f;  // many exact ties
      if (i % 97 == 5) s = std::nanf("");
      c.score.push_back(s);
      c.cls.push_back(static_cast<int32_t>(rng() % static_cast<unsigned>(classes)));
      if (i % 211 == 7) c.box[c.box.size() - 2] = INFINITY;
    }
  }
  return c;
}

TEST(VisionCuda, NmsHandComputed) {
  EI_SKIP_WITHOUT_GPU();
  // Box 1 overlaps box 0 by IoU 81/119 = 0.68 (suppressed), box 2 overlaps box 0 by exactly
  // 0.5 (kept: suppression needs IoU > threshold), box 3 is of another class.
  NmsCase c;
  c.boxes = 4;
  c.box = {0, 0, 10, 10, 1, 1, 11, 11, 0, 0, 10, 5, 0, 0, 10, 10};
  c.score = {0.9f, 0.8f, 0.7f, 0.6f};
  c.cls = {0, 0, 0, 1};
  NmsParams p;
  p.iouThreshold = 0.5f;
  auto r = gpuNms(c, p, true);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ((*r)[0], (std::vector<int>{0, 2, 3}));
  p.classAgnostic = true;
  r = gpuNms(c, p, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0], (std::vector<int>{0, 2}));
}

TEST(VisionCuda, NmsMatchesCpuOnRandomClusters) {
  EI_SKIP_WITHOUT_GPU();
  std::mt19937 rng(42);
  struct Shape3 {
    int images, boxes, objects, classes;
  };
  // Sizes around the walk's 64-candidate words and 256-candidate windows, the one-block sort's
  // capacities (1,024, 4,096, 16,384), rank-by-counting (larger images, few of them) and the
  // device-wide sort (2 x 16,385).
  const Shape3 shapes[] = {{1, 1, 1, 1},       {1, 63, 5, 2},      {1, 64, 5, 1},
                           {1, 65, 9, 3},      {1, 255, 20, 2},    {1, 256, 20, 1},
                           {2, 257, 20, 3},    {3, 1000, 40, 4},   {1, 1025, 900, 1},
                           {2, 4097, 300, 80}, {1, 10000, 200, 1}, {1, 16384, 400, 3},
                           {2, 16385, 500, 2}, {40, 2000, 30, 3},  {34, 5000, 60, 2}};
  for (const Shape3& sh : shapes) {
    NmsCase c = clusteredCase(sh.images, sh.boxes, sh.objects, sh.classes, rng);
    for (int v = 0; v < 4; ++v) {
      NmsParams p;
      p.iouThreshold = v % 2 ? 0.3f : 0.65f;
      p.scoreThreshold = v >= 2 ? 0.f : 0.25f;
      p.maxDetections = v == 3 ? 7 : 300;
      p.classAgnostic = v == 1;
      const bool classes = v != 2;
      auto gpu = gpuNms(c, p, classes);
      ASSERT_TRUE(gpu.ok()) << gpu.status().toString();
      EXPECT_EQ(*gpu, cpuNms(c, p, classes)) << sh.images << "x" << sh.boxes << " variant " << v;
    }
  }
}

// IoU threshold 1 suppresses nothing: every candidate that passes is kept, more than the
// walk lists in shared memory (8,192), through the one-block sort and the device-wide one.
TEST(VisionCuda, NmsKeepsThousandsWhenNothingIsSuppressed) {
  EI_SKIP_WITHOUT_GPU();
  std::mt19937 rng(7);
  for (int boxes : {9000, 17000}) {
    NmsCase c = clusteredCase(1, boxes, 50, 4, rng);
    NmsParams p;
    p.iouThreshold = 1.f;
    p.scoreThreshold = 0.f;
    p.maxDetections = 1 << 20;  // larger than the candidates: buffers follow the candidates
    auto gpu = gpuNms(c, p, true);
    ASSERT_TRUE(gpu.ok()) << gpu.status().toString();
    const auto cpu = cpuNms(c, p, true);
    EXPECT_GT(cpu[0].size(), 8192u);
    EXPECT_EQ(*gpu, cpu) << boxes;
    p.maxDetections = 8500;
    gpu = gpuNms(c, p, true);
    ASSERT_TRUE(gpu.ok()) << gpu.status().toString();
    EXPECT_EQ(*gpu, cpuNms(c, p, true)) << boxes << " capped";
  }
}

// One CudaNms replays a captured CUDA graph while shapes, parameters and buffers stay the same:
// new data in the same buffers, then new parameters, must each give the CPU's answer.
TEST(VisionCuda, NmsReusedAcrossCallsFollowsItsInputs) {
  EI_SKIP_WITHOUT_GPU();
  auto nms = CudaNms::create();
  ASSERT_TRUE(nms.ok()) << nms.status().toString();
  std::mt19937 rng(17);
  NmsCase first = clusteredCase(2, 700, 30, 3, rng);
  auto db = copyToDevice(Tensor::wrap(first.box.data(), DataType::kFloat32, {2, 700, 4}));
  auto ds = copyToDevice(Tensor::wrap(first.score.data(), DataType::kFloat32, {2, 700}));
  auto dc = copyToDevice(Tensor::wrap(first.cls.data(), DataType::kInt32, {2, 700}));
  ASSERT_TRUE(db.ok() && ds.ok() && dc.ok());
  for (int round = 0; round < 4; ++round) {
    NmsCase c = round == 0 ? first : clusteredCase(2, 700, 30 + round, 3, rng);
    ASSERT_EQ(cudaMemcpy(db->raw(), c.box.data(), db->bytes(), cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(ds->raw(), c.score.data(), ds->bytes(), cudaMemcpyHostToDevice),
              cudaSuccess);
    ASSERT_EQ(cudaMemcpy(dc->raw(), c.cls.data(), dc->bytes(), cudaMemcpyHostToDevice),
              cudaSuccess);
    NmsParams p;
    p.maxDetections = round == 3 ? 5 : 300;
    p.iouThreshold = round == 2 ? 0.2f : 0.45f;
    for (int again = 0; again < 2; ++again) {
      auto r = (*nms)->run(*db, *ds, *dc, p, nullptr);
      ASSERT_TRUE(r.ok()) << r.status().toString();
      EXPECT_EQ(*r, cpuNms(c, p, true)) << "round " << round << " call " << again;
    }
  }
}

TEST(VisionCuda, NmsNothingPassesTheThreshold) {
  EI_SKIP_WITHOUT_GPU();
  NmsCase c;
  c.images = 2;
  c.boxes = 3;
  c.box.assign(24, 1.f);
  c.score = {0.1f, std::nanf(""), 0.2f, 0.f, 0.1f, 0.05f};
  c.cls.assign(6, 0);
  NmsParams p;
  p.scoreThreshold = 0.5f;
  auto r = gpuNms(c, p, false);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(*r, (std::vector<std::vector<int>>{{}, {}}));
}

TEST(VisionCuda, NmsRejectsBadInput_n) {
  EI_SKIP_WITHOUT_GPU();
  auto nms = CudaNms::create();
  ASSERT_TRUE(nms.ok()) << nms.status().toString();
  Tensor hb = Tensor::zeros(DataType::kFloat32, {1, 5, 4});
  Tensor hs = Tensor::zeros(DataType::kFloat32, {1, 5});
  auto db = copyToDevice(hb), ds = copyToDevice(hs);
  ASSERT_TRUE(db.ok() && ds.ok());
  NmsParams p;
  auto expectError = [&](const Expected<std::vector<std::vector<int>>>& r, ErrorCode code,
                         const std::string& needle) {
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status().toString();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().toString();
  };
  expectError((*nms)->run(hb, *ds, Tensor(), p, nullptr), ErrorCode::kInvalidArgument,
              "host tensor");
  auto wrongScores = copyToDevice(Tensor::zeros(DataType::kFloat32, {1, 6}));
  expectError((*nms)->run(*db, *wrongScores, Tensor(), p, nullptr), ErrorCode::kInvalidArgument,
              "do not match");
  auto halfScores = copyToDevice(Tensor::zeros(DataType::kFloat16, {1, 5}));
  expectError((*nms)->run(*db, *halfScores, Tensor(), p, nullptr), ErrorCode::kUnsupported,
              "float32");
  auto badBoxes = copyToDevice(Tensor::zeros(DataType::kFloat32, {1, 5, 5}));
  expectError((*nms)->run(*badBoxes, *ds, Tensor(), p, nullptr), ErrorCode::kInvalidArgument,
              "last dimension must be 4");
  auto int64Ids = copyToDevice(Tensor::zeros(DataType::kInt64, {1, 5}));
  expectError((*nms)->run(*db, *ds, *int64Ids, p, nullptr), ErrorCode::kUnsupported, "int32");
  NmsParams weighted;
  weighted.method = NmsMethod::kWeighted;
  expectError((*nms)->run(*db, *ds, Tensor(), weighted, nullptr), ErrorCode::kInvalidArgument,
              "hard NMS only");
  NmsParams badIou;
  badIou.iouThreshold = 1.5f;
  expectError((*nms)->run(*db, *ds, Tensor(), badIou, nullptr), ErrorCode::kInvalidArgument,
              "iouThreshold");
}

#endif  // EDGEINFER_HAVE_CUDA

}  // namespace
}  // namespace edgeinfer::vision
