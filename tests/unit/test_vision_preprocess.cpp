// Frame preprocessing (edgeinfer/vision/preprocess.h): the CPU reference against OpenCV, and
// its error handling.
//
// The oracle is cv::cvtColor (YUV/RGB/BGR/GRAY conversions) on the frame, cv::Mat ROI/crop,
// convertTo(CV_32F), cv::resize (INTER_LINEAR / INTER_NEAREST) and a hand-written letterbox
// canvas and normalisation here.
//
// Tolerance: 1e-3 in pixel units (0..255, before scale/mean/std), for every pixel format. It
// is this tight for YUV formats too because preprocessCpu reproduces OpenCV's fixed-point
// BT.601 conversion bit for bit (YuvConversionIsBitExact checks that with zero tolerance);
// what is left is float32 rounding in the bilinear weights (cv::resize's float path).
// float16 outputs also allow half an ulp of fp16 (|ref| * 2^-11).
//
// Without OpenCV (the aarch64 cross build) only the self-contained and negative tests build.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "edgeinfer/tensor.h"
#include "edgeinfer/vision/preprocess.h"
#include "vision_test_util.h"

#if EDGEINFER_TEST_HAVE_OPENCV
#include <opencv2/core.hpp>
#include <opencv2/core/utility.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#endif

namespace edgeinfer::vision {
namespace {

using test::isYuv;
using test::kAllFormats;
using test::randomFrame;
using test::TestFrame;

// Value i of image n of a [N,C,H,W] / [N,H,W,C] tensor, as float, for channel c at (x, y).
float tensorAt(const Tensor& t, const PreprocessConfig& cfg, int n, int c, int x, int y) {
  const int64_t C = preprocessChannels(cfg), H = cfg.outputHeight, W = cfg.outputWidth;
  const int64_t idx = cfg.layout == TensorLayout::kNCHW ? ((n * C + c) * H + y) * W + x
                                                        : ((n * H + y) * W + x) * C + c;
  return t.dtype() == DataType::kFloat16 ? halfToFloat(t.data<uint16_t>()[idx])
                                         : t.data<float>()[idx];
}

PreprocessConfig basicConfig(int w, int h) {
  PreprocessConfig cfg;
  cfg.outputWidth = w;
  cfg.outputHeight = h;
  return cfg;
}

// ---- Self-contained positive tests ------------------------------------------------------

TEST(VisionPreprocess, FormatNamesRoundTrip) {
  for (PixelFormat f : kAllFormats) {
    auto parsed = parsePixelFormat(pixelFormatName(f));
    ASSERT_TRUE(parsed.ok()) << pixelFormatName(f);
    EXPECT_EQ(*parsed, f);
  }
  EXPECT_STREQ(pixelFormatName(PixelFormat::kRGBx), "RGBx");
  EXPECT_STREQ(pixelFormatName(PixelFormat::kGray8), "GRAY8");
  EXPECT_EQ(pixelFormatPlanes(PixelFormat::kNV12), 2);
  EXPECT_EQ(pixelFormatPlanes(PixelFormat::kI420), 3);
  EXPECT_EQ(pixelFormatPlanes(PixelFormat::kBGRx), 1);
}

TEST(VisionPreprocess, WrapFrameComputesPlanes) {
  std::vector<uint8_t> buf(100000);
  // Odd NV12: chroma is ceil(37/2) = 19 pairs (38 bytes) by ceil(23/2) = 12 rows.
  auto nv12 = wrapFrame(PixelFormat::kNV12, 37, 23, buf.data());
  ASSERT_TRUE(nv12.ok()) << nv12.status().toString();
  EXPECT_EQ(nv12->strides[0], 37);
  EXPECT_EQ(nv12->strides[1], 38);
  EXPECT_EQ(nv12->planes[1], buf.data() + 37 * 23);
  EXPECT_EQ(frameBufferBytes(PixelFormat::kNV12, 37, 23), size_t{37 * 23 + 38 * 12});
  // Pitched I420: chroma stride defaults to ceil(luma / 2).
  auto i420 = wrapFrame(PixelFormat::kI420, 37, 23, buf.data(), 65);
  ASSERT_TRUE(i420.ok()) << i420.status().toString();
  EXPECT_EQ(i420->strides[1], 33);
  EXPECT_EQ(i420->strides[2], 33);
  EXPECT_EQ(i420->planes[1], buf.data() + 65 * 23);
  EXPECT_EQ(i420->planes[2], buf.data() + 65 * 23 + 33 * 12);
  // Pitched NV12: the UV plane takes the luma pitch unless told otherwise.
  auto nv12p = wrapFrame(PixelFormat::kNV12, 37, 23, buf.data(), 64);
  ASSERT_TRUE(nv12p.ok());
  EXPECT_EQ(nv12p->strides[1], 64);
  auto rgbx = wrapFrame(PixelFormat::kRGBx, 5, 3, buf.data(), 0);
  ASSERT_TRUE(rgbx.ok());
  EXPECT_EQ(rgbx->strides[0], 20);
  EXPECT_EQ(frameBufferBytes(PixelFormat::kRGB, 5, 3, 17), size_t{51});
}

TEST(VisionPreprocess, TransformMapsTensorCornersToFrame) {
  std::vector<uint8_t> buf(640 * 480 * 3, 128);
  auto frame = wrapFrame(PixelFormat::kRGB, 640, 480, buf.data());
  ASSERT_TRUE(frame.ok());
  struct Case {
    ResizeMode mode;
    bool roi;
    int outW, outH;
    float tx0, ty0, tx1, ty1;  // tensor corners of the content
    float fx0, fy0, fx1, fy1;  // where they land in the frame
  };
  const Case cases[] = {
      // 640x480 -> 320x320 letterbox: 320x240 content at y 40.
      {ResizeMode::kLetterbox, false, 320, 320, 0, 40, 320, 280, 0, 0, 640, 480},
      // Tall output: 300x225 content at x 0, y 37 ((300 - 225) / 2 = 37).
      {ResizeMode::kLetterbox, false, 300, 300, 0, 37, 300, 262, 0, 0, 640, 480},
      // Centre crop to square: the middle 480x480 (x 80..560).
      {ResizeMode::kCenterCrop, false, 224, 224, 0, 0, 224, 224, 80, 0, 560, 480},
      {ResizeMode::kStretch, false, 64, 32, 0, 0, 64, 32, 0, 0, 640, 480},
      // ROI (100, 50, 200x100) stretched.
      {ResizeMode::kStretch, true, 64, 32, 0, 0, 64, 32, 100, 50, 300, 150},
      // ROI 200x100 letterboxed into 100x100: 100x50 content at y 25.
      {ResizeMode::kLetterbox, true, 100, 100, 0, 25, 100, 75, 100, 50, 300, 150},
      // ROI 200x100 centre-cropped to square: ROI columns 50..150.
      {ResizeMode::kCenterCrop, true, 32, 32, 0, 0, 32, 32, 150, 50, 250, 150},
  };
  for (const Case& c : cases) {
    PreprocessConfig cfg = basicConfig(c.outW, c.outH);
    cfg.resize = c.mode;
    cfg.useRoi = c.roi;
    cfg.roi = {100, 50, 200, 100};
    Tensor t = Tensor::zeros(DataType::kFloat32, preprocessTensorShape(cfg, 1));
    Transform tr;
    ASSERT_TRUE(preprocessCpu(*frame, cfg, t, 0, &tr).ok());
    SCOPED_TRACE("mode " + std::to_string(static_cast<int>(c.mode)) + " roi " +
                 std::to_string(c.roi));
    EXPECT_NEAR(tr.toFrameX(c.tx0), c.fx0, 1e-3);
    EXPECT_NEAR(tr.toFrameY(c.ty0), c.fy0, 1e-3);
    EXPECT_NEAR(tr.toFrameX(c.tx1), c.fx1, 1e-3);
    EXPECT_NEAR(tr.toFrameY(c.ty1), c.fy1, 1e-3);
    EXPECT_EQ(tr.frameWidth, 640.f);
    EXPECT_EQ(tr.frameHeight, 480.f);
  }
}

TEST(VisionPreprocess, LetterboxPadsWithNormalisedPadValue) {
  std::vector<uint8_t> buf(8 * 4 * 3, 200);
  auto frame = wrapFrame(PixelFormat::kRGB, 8, 4, buf.data());
  ASSERT_TRUE(frame.ok());
  PreprocessConfig cfg = basicConfig(8, 8);
  cfg.resize = ResizeMode::kLetterbox;
  cfg.padValue = {114.f, 10.f, 0.f};
  cfg.mean = {0.5f, 0.25f, 0.f};
  cfg.std = {2.f, 0.5f, 1.f};
  Tensor t = Tensor::zeros(DataType::kFloat32, preprocessTensorShape(cfg, 1));
  ASSERT_TRUE(preprocessCpu(*frame, cfg, t, 0, nullptr).ok());
  for (int c = 0; c < 3; ++c) {
    const float pad = (cfg.padValue[c] * (1.f / 255.f) - cfg.mean[c]) / cfg.std[c];
    const float content = (200.f * (1.f / 255.f) - cfg.mean[c]) / cfg.std[c];
    EXPECT_FLOAT_EQ(tensorAt(t, cfg, 0, c, 3, 0), pad);  // rows 0, 1 and 6, 7 are padding
    EXPECT_FLOAT_EQ(tensorAt(t, cfg, 0, c, 5, 7), pad);
    EXPECT_FLOAT_EQ(tensorAt(t, cfg, 0, c, 0, 2), content);
    EXPECT_FLOAT_EQ(tensorAt(t, cfg, 0, c, 7, 5), content);
  }
}

TEST(VisionPreprocess, WritesOnlyItsBatchImageInBothLayouts) {
  std::mt19937 rng(7);
  TestFrame f = randomFrame(PixelFormat::kNV12, 33, 17, 5, rng);
  for (TensorLayout layout : {TensorLayout::kNCHW, TensorLayout::kNHWC}) {
    PreprocessConfig cfg = basicConfig(11, 9);
    cfg.layout = layout;
    Tensor t = Tensor::zeros(DataType::kFloat32, preprocessTensorShape(cfg, 3));
    std::fill(t.data<float>(), t.data<float>() + t.numel(), -7.f);
    ASSERT_TRUE(preprocessCpu(f.view, cfg, t, 1, nullptr).ok());
    const int64_t per = t.numel() / 3;
    for (int64_t i = 0; i < per; ++i) {
      ASSERT_EQ(t.data<float>()[i], -7.f);
      ASSERT_EQ(t.data<float>()[2 * per + i], -7.f);
      ASSERT_GE(t.data<float>()[per + i], 0.f);
      ASSERT_LE(t.data<float>()[per + i], 1.f);
    }
  }
  // NCHW and NHWC hold the same values.
  PreprocessConfig a = basicConfig(11, 9), b = basicConfig(11, 9);
  b.layout = TensorLayout::kNHWC;
  Tensor ta = Tensor::zeros(DataType::kFloat32, preprocessTensorShape(a, 1));
  Tensor tb = Tensor::zeros(DataType::kFloat32, preprocessTensorShape(b, 1));
  ASSERT_TRUE(preprocessCpu(f.view, a, ta, 0, nullptr).ok());
  ASSERT_TRUE(preprocessCpu(f.view, b, tb, 0, nullptr).ok());
  for (int c = 0; c < 3; ++c)
    for (int y = 0; y < 9; ++y)
      for (int x = 0; x < 11; ++x)
        ASSERT_EQ(tensorAt(ta, a, 0, c, x, y), tensorAt(tb, b, 0, c, x, y));
}

// ---- Against OpenCV -----------------------------------------------------------------------
#if EDGEINFER_TEST_HAVE_OPENCV

// The frame as OpenCV's 8-bit RGB. OpenCV's YUV420 conversions need even sizes; an odd frame
// is padded by repeating its last row/column (no output pixel uses those) and cropped after.
cv::Mat referenceRgb(const FrameView& f) {
  const int w = f.width, h = f.height;
  cv::Mat rgb;
  auto plane = [&](int type, int p) {
    return cv::Mat(h, w, type, const_cast<uint8_t*>(f.planes[p]),
                   static_cast<size_t>(f.strides[p]));
  };
  switch (f.format) {
    case PixelFormat::kNV12:
    case PixelFormat::kI420: {
      const int w2 = w + w % 2, h2 = h + h % 2, cw = w2 / 2, ch = h2 / 2;
      cv::Mat yuv(h2 * 3 / 2, w2, CV_8UC1);
      uint8_t* d = yuv.ptr<uint8_t>();
      for (int y = 0; y < h2; ++y)
        for (int x = 0; x < w2; ++x)
          d[y * w2 + x] = f.planes[0][std::min(y, h - 1) * f.strides[0] + std::min(x, w - 1)];
      uint8_t* c = d + h2 * w2;
      for (int y = 0; y < ch; ++y)
        for (int x = 0; x < cw; ++x) {
          if (f.format == PixelFormat::kNV12) {
            c[y * w2 + 2 * x] = f.planes[1][y * f.strides[1] + 2 * x];
            c[y * w2 + 2 * x + 1] = f.planes[1][y * f.strides[1] + 2 * x + 1];
          } else {
            c[y * cw + x] = f.planes[1][y * f.strides[1] + x];
            c[cw * ch + y * cw + x] = f.planes[2][y * f.strides[2] + x];
          }
        }
      cv::Mat full;
      cv::cvtColor(
          yuv, full,
          f.format == PixelFormat::kNV12 ? cv::COLOR_YUV2RGB_NV12 : cv::COLOR_YUV2RGB_I420);
      rgb = full(cv::Rect(0, 0, w, h)).clone();
      break;
    }
    case PixelFormat::kRGBA:
    case PixelFormat::kRGBx:
      cv::cvtColor(plane(CV_8UC4, 0), rgb, cv::COLOR_RGBA2RGB);
      break;
    case PixelFormat::kBGRA:
    case PixelFormat::kBGRx:
      cv::cvtColor(plane(CV_8UC4, 0), rgb, cv::COLOR_BGRA2RGB);
      break;
    case PixelFormat::kRGB:
      rgb = plane(CV_8UC3, 0).clone();
      break;
    case PixelFormat::kBGR:
      cv::cvtColor(plane(CV_8UC3, 0), rgb, cv::COLOR_BGR2RGB);
      break;
    case PixelFormat::kGray8:
      cv::cvtColor(plane(CV_8UC1, 0), rgb, cv::COLOR_GRAY2RGB);
      break;
  }
  return rgb;
}

cv::Mat referenceChannels(const FrameView& f, ChannelOrder order) {
  if (order == ChannelOrder::kGray && f.format == PixelFormat::kGray8)
    return cv::Mat(f.height, f.width, CV_8UC1, const_cast<uint8_t*>(f.planes[0]),
                   static_cast<size_t>(f.strides[0]))
        .clone();
  cv::Mat rgb = referenceRgb(f), out;
  if (order == ChannelOrder::kRGB) return rgb;
  cv::cvtColor(rgb, out, order == ChannelOrder::kBGR ? cv::COLOR_RGB2BGR : cv::COLOR_RGB2GRAY);
  return out;
}

// The expected image (HWC, normalised) with OpenCV, and the region / content rectangle.
struct Reference {
  std::vector<float> hwc;
  cv::Rect region, content;
};

Reference referenceTensor(const FrameView& f, const PreprocessConfig& cfg) {
  const cv::Mat img = referenceChannels(f, cfg.channels);
  const int outW = cfg.outputWidth, outH = cfg.outputHeight, C = img.channels();
  Reference r;
  r.region = cfg.useRoi ? cv::Rect(cfg.roi.x, cfg.roi.y, cfg.roi.width, cfg.roi.height)
                        : cv::Rect(0, 0, f.width, f.height);
  r.content = cv::Rect(0, 0, outW, outH);
  const double rw = r.region.width, rh = r.region.height;
  if (cfg.resize == ResizeMode::kCenterCrop) {
    const double target = static_cast<double>(outW) / outH;
    if (rw / rh > target) {
      const int w = std::max(1, static_cast<int>(std::lround(rh * target)));
      r.region.x += (r.region.width - w) / 2;
      r.region.width = w;
    } else if (rw / rh < target) {
      const int h = std::max(1, static_cast<int>(std::lround(rw / target)));
      r.region.y += (r.region.height - h) / 2;
      r.region.height = h;
    }
  } else if (cfg.resize == ResizeMode::kLetterbox) {
    const double s = std::min(outW / rw, outH / rh);
    r.content.width = std::clamp(static_cast<int>(std::lround(rw * s)), 1, outW);
    r.content.height = std::clamp(static_cast<int>(std::lround(rh * s)), 1, outH);
    r.content.x = (outW - r.content.width) / 2;
    r.content.y = (outH - r.content.height) / 2;
  }
  cv::Mat region32, resized;
  img(r.region).convertTo(region32, CV_32F);
  cv::resize(region32, resized, r.content.size(), 0, 0,
             cfg.interpolation == Interpolation::kBilinear ? cv::INTER_LINEAR : cv::INTER_NEAREST);
  r.hwc.assign(static_cast<size_t>(outW) * outH * C, 0.f);
  for (int y = 0; y < outH; ++y)
    for (int x = 0; x < outW; ++x)
      for (int c = 0; c < C; ++c) {
        const bool inside = r.content.contains(cv::Point(x, y));
        const float v = inside ? resized.ptr<float>(y - r.content.y)[(x - r.content.x) * C + c]
                               : cfg.padValue[c];
        r.hwc[(static_cast<size_t>(y) * outW + x) * C + c] =
            (v * cfg.scale - cfg.mean[c]) / cfg.std[c];
      }
  return r;
}

// Runs preprocessCpu into image 1 of a batch of 2 and compares with OpenCV (tolerance in pixel
// units, see the top of the file), and the transform with the reference's rectangles.
::testing::AssertionResult matchesOpenCv(const FrameView& f, const PreprocessConfig& cfg,
                                         double pixelTol = 1e-3) {
  Tensor t = Tensor::zeros(cfg.dtype, preprocessTensorShape(cfg, 2));
  Transform tr;
  Status s = preprocessCpu(f, cfg, t, 1, &tr);
  if (!s.ok()) return ::testing::AssertionFailure() << s.toString();
  const Reference ref = referenceTensor(f, cfg);
  const int C = preprocessChannels(cfg);
  double worst = 0;
  for (int y = 0; y < cfg.outputHeight; ++y)
    for (int x = 0; x < cfg.outputWidth; ++x)
      for (int c = 0; c < C; ++c) {
        const float want = ref.hwc[(static_cast<size_t>(y) * cfg.outputWidth + x) * C + c];
        const float got = tensorAt(t, cfg, 1, c, x, y);
        double tol = pixelTol * std::abs(cfg.scale / cfg.std[c]) + 1e-6 * std::abs(want);
        if (cfg.dtype == DataType::kFloat16) tol += std::abs(want) * std::ldexp(1.0, -11) + 1e-7;
        const double err = std::abs(static_cast<double>(got) - want);
        worst = std::max(worst, err / tol);
        if (!(err <= tol))
          return ::testing::AssertionFailure()
                 << pixelFormatName(f.format) << " " << f.width << "x" << f.height << ": at (x "
                 << x << ", y " << y << ", c " << c << ") got " << got << ", OpenCV " << want
                 << " (tolerance " << tol << ")";
      }
  const cv::Rect& rg = ref.region;
  const cv::Rect& ct = ref.content;
  const double e =
      std::max({std::abs(tr.toFrameX(static_cast<float>(ct.x)) - rg.x),
                std::abs(tr.toFrameY(static_cast<float>(ct.y)) - rg.y),
                std::abs(tr.toFrameX(static_cast<float>(ct.x + ct.width)) - (rg.x + rg.width)),
                std::abs(tr.toFrameY(static_cast<float>(ct.y + ct.height)) - (rg.y + rg.height))});
  if (e > 1e-3 * std::max(f.width, f.height))
    return ::testing::AssertionFailure()
           << "transform maps the content corners " << e << " pixels away from the region corners";
  return ::testing::AssertionSuccess() << "worst error " << worst << " of tolerance";
}

class OpenCvOracle : public ::testing::Test {
 protected:
  void SetUp() override { cv::ipp::setUseIPP(false); }  // deterministic plain-C++ paths
};

TEST_F(OpenCvOracle, YuvConversionIsBitExact) {
  // Identity size, scale 1: the tensor holds the converted bytes. Chroma covers all
  // 256 x 256 (U, V) pairs, each with four different Y values across the range.
  const int w = 512, h = 512;
  PreprocessConfig cfg = basicConfig(w, h);
  cfg.scale = 1.f;
  for (PixelFormat fmt : {PixelFormat::kNV12, PixelFormat::kI420}) {
    std::vector<uint8_t> buf(frameBufferBytes(fmt, w, h));
    auto view = wrapFrame(fmt, w, h, buf.data());
    ASSERT_TRUE(view.ok());
    uint8_t* yp = const_cast<uint8_t*>(view->planes[0]);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        yp[y * w + x] = static_cast<uint8_t>((x % 2 + 2 * (y % 2)) * 64 + (x / 2 + y / 2) % 64);
    for (int y = 0; y < h / 2; ++y)
      for (int x = 0; x < w / 2; ++x) {
        if (fmt == PixelFormat::kNV12) {
          uint8_t* uv = const_cast<uint8_t*>(view->planes[1]) + y * view->strides[1] + 2 * x;
          uv[0] = static_cast<uint8_t>(x), uv[1] = static_cast<uint8_t>(y);
        } else {
          const_cast<uint8_t*>(view->planes[1])[y * view->strides[1] + x] = static_cast<uint8_t>(x);
          const_cast<uint8_t*>(view->planes[2])[y * view->strides[2] + x] = static_cast<uint8_t>(y);
        }
      }
    for (ChannelOrder order : {ChannelOrder::kRGB, ChannelOrder::kGray}) {
      cfg.channels = order;
      EXPECT_TRUE(matchesOpenCv(*view, cfg, 0.0)) << pixelFormatName(fmt);
    }
  }
}

// Every format x odd / tiny / large-odd sizes x tight / padded pitches, each with three of
// the configurations below in turn (layouts, dtypes, modes, interpolations, orders, ROI).
TEST_F(OpenCvOracle, AllFormatsSizesPitchesAndModes) {
  std::vector<PreprocessConfig> configs;
  auto add = [&](int w, int h, TensorLayout l, DataType d, ResizeMode m, Interpolation i,
                 ChannelOrder o, bool roi) {
    PreprocessConfig cfg = basicConfig(w, h);
    cfg.layout = l, cfg.dtype = d, cfg.resize = m, cfg.interpolation = i, cfg.channels = o;
    cfg.useRoi = roi;
    cfg.mean = {0.485f, 0.456f, 0.406f};
    cfg.std = {0.229f, 0.224f, 0.225f};
    cfg.padValue = {114.f, 20.f, 250.f};
    configs.push_back(cfg);
  };
  using L = TensorLayout;
  using M = ResizeMode;
  using I = Interpolation;
  using O = ChannelOrder;
  const DataType f32 = DataType::kFloat32, f16 = DataType::kFloat16;
  add(64, 48, L::kNCHW, f32, M::kStretch, I::kBilinear, O::kRGB, false);
  add(17, 31, L::kNHWC, f16, M::kLetterbox, I::kBilinear, O::kBGR, false);
  add(40, 40, L::kNCHW, f16, M::kCenterCrop, I::kNearest, O::kRGB, true);
  add(96, 80, L::kNHWC, f32, M::kStretch, I::kNearest, O::kGray, false);
  add(33, 21, L::kNCHW, f32, M::kLetterbox, I::kNearest, O::kRGB, true);
  add(25, 50, L::kNHWC, f32, M::kCenterCrop, I::kBilinear, O::kGray, false);
  add(128, 96, L::kNCHW, f16, M::kStretch, I::kBilinear, O::kBGR, true);
  add(200, 120, L::kNHWC, f32, M::kLetterbox, I::kBilinear, O::kRGB, true);

  std::mt19937 rng(2024);
  const int sizes[][2] = {{37, 23}, {1, 1}, {641, 479}, {2, 3}};
  size_t next = 0;
  int cases = 0;
  for (PixelFormat fmt : kAllFormats)
    for (const auto& sz : sizes)
      for (int pad : {0, 13}) {
        TestFrame f = randomFrame(fmt, sz[0], sz[1], pad, rng);
        for (int k = 0; k < 3; ++k, ++next) {
          PreprocessConfig cfg = configs[next % configs.size()];
          cfg.roi = {sz[0] / 4, sz[1] / 3, std::max(1, sz[0] / 2), std::max(1, sz[1] / 2)};
          EXPECT_TRUE(matchesOpenCv(f.view, cfg))
              << "config #" << next % configs.size() << ", pitch pad " << pad;
          ++cases;
        }
      }
  EXPECT_EQ(cases, 9 * 4 * 2 * 3);
}

// Fills a frame of format `fmt` from an 8-bit RGB image (even size), with a padded pitch.
TestFrame frameFromRgb(const cv::Mat& rgb, PixelFormat fmt) {
  const int w = rgb.cols, h = rgb.rows, pad = 24;
  cv::Mat conv;
  switch (fmt) {
    case PixelFormat::kRGBA:
    case PixelFormat::kRGBx:
      cv::cvtColor(rgb, conv, cv::COLOR_RGB2RGBA);
      break;
    case PixelFormat::kBGRA:
    case PixelFormat::kBGRx:
      cv::cvtColor(rgb, conv, cv::COLOR_RGB2BGRA);
      break;
    case PixelFormat::kBGR:
      cv::cvtColor(rgb, conv, cv::COLOR_RGB2BGR);
      break;
    case PixelFormat::kGray8:
      cv::cvtColor(rgb, conv, cv::COLOR_RGB2GRAY);
      break;
    case PixelFormat::kRGB:
      conv = rgb;
      break;
    case PixelFormat::kNV12:
    case PixelFormat::kI420:
      cv::cvtColor(rgb, conv, cv::COLOR_RGB2YUV_I420);  // Y, then U, then V, tightly
      break;
  }
  TestFrame t;
  const int luma = static_cast<int>(planeRowBytes(fmt, w, 0)) + pad;
  t.data.assign(frameBufferBytes(fmt, w, h, luma), 0xAB);
  auto view = wrapFrame(fmt, w, h, t.data.data(), luma);
  EXPECT_TRUE(view.ok()) << view.status().toString();
  t.view = *view;
  const uint8_t* src = conv.ptr<uint8_t>();
  for (int y = 0; y < h; ++y)
    std::memcpy(t.data.data() + static_cast<size_t>(y) * luma, conv.ptr<uint8_t>(y),
                static_cast<size_t>(planeRowBytes(fmt, w, 0)));
  if (isYuv(fmt)) {
    const uint8_t* u = src + w * h;
    const uint8_t* v = u + (w / 2) * (h / 2);
    for (int y = 0; y < h / 2; ++y)
      for (int x = 0; x < w / 2; ++x) {
        if (fmt == PixelFormat::kNV12) {
          uint8_t* uv = const_cast<uint8_t*>(t.view.planes[1]) + y * t.view.strides[1] + 2 * x;
          uv[0] = u[y * (w / 2) + x], uv[1] = v[y * (w / 2) + x];
        } else {
          const_cast<uint8_t*>(t.view.planes[1])[y * t.view.strides[1] + x] = u[y * (w / 2) + x];
          const_cast<uint8_t*>(t.view.planes[2])[y * t.view.strides[2] + x] = v[y * (w / 2) + x];
        }
      }
  }
  return t;
}

// A real photograph from Debian's lomiri-wallpapers-16.04 (scripts/setup.sh installs it),
// read at a quarter of its size, in every format, through a detector-style letterbox, a
// classifier-style centre crop and a secondary-classifier ROI.
TEST_F(OpenCvOracle, RealPhotoInEveryFormat) {
  const std::string path = "/usr/share/backgrounds/Bridge_by_Sander_Klootwijk.jpg";
  cv::Mat bgr = cv::imread(path, cv::IMREAD_REDUCED_COLOR_4);
  ASSERT_FALSE(bgr.empty()) << path
                            << " is missing: run scripts/setup.sh (lomiri-wallpapers-16.04)";
  cv::Mat rgb;
  cv::cvtColor(bgr(cv::Rect(0, 0, bgr.cols & ~1, bgr.rows & ~1)), rgb, cv::COLOR_BGR2RGB);
  cv::Scalar mean, stddev;
  cv::meanStdDev(rgb, mean, stddev);
  ASSERT_GT(stddev[0], 20.0) << "not a photograph?";
  for (PixelFormat fmt : kAllFormats) {
    TestFrame f = frameFromRgb(rgb, fmt);
    PreprocessConfig det = basicConfig(320, 320);
    det.resize = ResizeMode::kLetterbox;
    det.padValue = {114.f, 114.f, 114.f};
    EXPECT_TRUE(matchesOpenCv(f.view, det)) << "letterbox";
    PreprocessConfig cls = basicConfig(224, 224);
    cls.resize = ResizeMode::kCenterCrop;
    cls.layout = TensorLayout::kNHWC;
    cls.dtype = DataType::kFloat16;
    cls.channels = ChannelOrder::kBGR;
    cls.mean = {103.53f, 116.28f, 123.675f};
    cls.std = {57.375f, 57.12f, 58.395f};
    cls.scale = 1.f;
    EXPECT_TRUE(matchesOpenCv(f.view, cls)) << "centre crop";
    PreprocessConfig roi = basicConfig(64, 64);
    roi.useRoi = true;
    roi.roi = {rgb.cols / 3 + 1, rgb.rows / 5 + 1, rgb.cols / 4 + 1, rgb.rows / 3};
    roi.interpolation = Interpolation::kNearest;
    EXPECT_TRUE(matchesOpenCv(f.view, roi)) << "ROI";
  }
}

TEST_F(OpenCvOracle, UpscaleAndDownscaleExtremes) {
  std::mt19937 rng(99);
  TestFrame small = randomFrame(PixelFormat::kI420, 3, 5, 1, rng);
  PreprocessConfig up = basicConfig(301, 257);  // ~100x upscale, odd
  EXPECT_TRUE(matchesOpenCv(small.view, up));
  up.interpolation = Interpolation::kNearest;
  EXPECT_TRUE(matchesOpenCv(small.view, up));
  TestFrame big = randomFrame(PixelFormat::kBGRx, 641, 479, 0, rng);
  PreprocessConfig down = basicConfig(7, 5);  // heavy downscale: INTER_LINEAR's 4 taps
  EXPECT_TRUE(matchesOpenCv(big.view, down));
  PreprocessConfig half = basicConfig(320, 239);  // ~2x (OpenCV's area fast path for 2x)
  EXPECT_TRUE(matchesOpenCv(big.view, half));
}

#endif  // EDGEINFER_TEST_HAVE_OPENCV

// ---- Negative tests -----------------------------------------------------------------------

// Expects kInvalidArgument whose message contains `needle`.
::testing::AssertionResult invalidWith(const Status& s, const std::string& needle) {
  if (s.ok()) return ::testing::AssertionFailure() << "unexpectedly OK (wanted '" << needle << "')";
  if (s.code() != ErrorCode::kInvalidArgument)
    return ::testing::AssertionFailure() << "wrong code: " << s.toString();
  if (s.message().find(needle) == std::string::npos)
    return ::testing::AssertionFailure() << "'" << s.message() << "' lacks '" << needle << "'";
  return ::testing::AssertionSuccess();
}

struct NegativeFixture {
  std::vector<uint8_t> buf = std::vector<uint8_t>(64 * 64 * 4, 50);
  FrameView frame;
  PreprocessConfig cfg = basicConfig(8, 6);
  Tensor tensor;
  NegativeFixture() {
    frame = *wrapFrame(PixelFormat::kRGBA, 64, 48, buf.data());
    tensor = Tensor::zeros(DataType::kFloat32, preprocessTensorShape(cfg, 2));
  }
  Status run(int batchIndex = 0) { return preprocessCpu(frame, cfg, tensor, batchIndex, nullptr); }
};

TEST(VisionPreprocess, NullPlane_n) {
  NegativeFixture n;
  n.frame.planes[0] = nullptr;
  EXPECT_TRUE(invalidWith(n.run(), "plane 0 (packed) pointer is null"));
  EXPECT_TRUE(invalidWith(wrapFrame(PixelFormat::kRGB, 4, 4, nullptr).status(), "buffer is null"));
}

TEST(VisionPreprocess, NullChromaPlane_n) {
  std::vector<uint8_t> buf(4096);
  FrameView nv12 = *wrapFrame(PixelFormat::kNV12, 16, 8, buf.data());
  nv12.planes[1] = nullptr;
  EXPECT_TRUE(invalidWith(validateFrame(nv12), "plane 1 (UV) pointer is null"));
  FrameView i420 = *wrapFrame(PixelFormat::kI420, 16, 8, buf.data());
  i420.planes[2] = nullptr;
  EXPECT_TRUE(invalidWith(validateFrame(i420), "plane 2 (V) pointer is null"));
}

TEST(VisionPreprocess, StrideSmallerThanRow_n) {
  NegativeFixture n;
  n.frame.strides[0] = 64 * 4 - 1;
  EXPECT_TRUE(invalidWith(n.run(), "stride 255 is smaller than its row of 256 bytes"));
  std::vector<uint8_t> buf(4096);
  EXPECT_TRUE(invalidWith(wrapFrame(PixelFormat::kRGB, 10, 4, buf.data(), 29).status(),
                          "smaller than its row of 30"));
  EXPECT_TRUE(invalidWith(wrapFrame(PixelFormat::kRGB, 10, 4, buf.data(), -1).status(),
                          "must not be negative"));
}

TEST(VisionPreprocess, ChromaStrideSmallerThanRow_n) {
  // Odd NV12 width 37: the UV row holds 19 pairs = 38 bytes, so stride 37 is too small.
  std::vector<uint8_t> buf(8192);
  EXPECT_TRUE(invalidWith(wrapFrame(PixelFormat::kNV12, 37, 23, buf.data(), 37, 37).status(),
                          "plane 1 (UV) stride 37 is smaller than its row of 38 bytes"));
  EXPECT_TRUE(invalidWith(wrapFrame(PixelFormat::kI420, 37, 23, buf.data(), 40, 18).status(),
                          "plane 1 (U) stride 18 is smaller than its row of 19 bytes"));
}

TEST(VisionPreprocess, BadFrameSize_n) {
  NegativeFixture n;
  n.frame.width = 0;
  EXPECT_TRUE(invalidWith(n.run(), "RGBA frame 0x48: width and height must be 1..32768"));
  n.frame.width = 64;
  n.frame.height = -2;
  EXPECT_TRUE(invalidWith(n.run(), "width and height must be"));
  std::vector<uint8_t> buf(16);
  EXPECT_TRUE(
      invalidWith(wrapFrame(PixelFormat::kNV12, 0, 0, buf.data()).status(), "NV12 frame 0x0"));
  EXPECT_TRUE(invalidWith(wrapFrame(PixelFormat::kGray8, kMaxFrameSide + 1, 1, buf.data()).status(),
                          "must be 1..32768"));
  EXPECT_EQ(frameBufferBytes(PixelFormat::kI420, 0, 5), size_t{0});
}

TEST(VisionPreprocess, UnknownPixelFormat_n) {
  for (const char* name : {"nv12", "", "YUY2", "RGBX", "GRAY16_LE", "I420 "}) {
    auto f = parsePixelFormat(name);
    ASSERT_FALSE(f.ok()) << name;
    EXPECT_TRUE(invalidWith(f.status(), std::string("unknown pixel format '") + name + "'"));
    EXPECT_TRUE(invalidWith(f.status(), "NV12, I420, RGBA, BGRA, RGBx, BGRx, RGB, BGR, GRAY8"));
  }
  NegativeFixture n;
  n.frame.format = static_cast<PixelFormat>(42);
  EXPECT_TRUE(invalidWith(n.run(), "unknown pixel format #42"));
  EXPECT_STREQ(pixelFormatName(static_cast<PixelFormat>(42)), "unknown");
  EXPECT_EQ(pixelFormatPlanes(static_cast<PixelFormat>(42)), 0);
}

TEST(VisionPreprocess, BadOutputSize_n) {
  NegativeFixture n;
  n.cfg.outputWidth = 0;
  EXPECT_TRUE(invalidWith(n.run(), "output size 0x6 must be 1..32768"));
  n.cfg.outputWidth = 8;
  n.cfg.outputHeight = -1;
  EXPECT_TRUE(invalidWith(n.run(), "output size 8x-1"));
}

TEST(VisionPreprocess, WrongTensorShape_n) {
  NegativeFixture n;
  n.tensor = Tensor::zeros(DataType::kFloat32, Shape{2, 3, 6, 9});
  EXPECT_TRUE(invalidWith(n.run(), "tensor shape [2,3,6,9] does not match NCHW [2,3,6,8]"));
  n.tensor = Tensor::zeros(DataType::kFloat32, Shape{1, 6, 8, 3});  // NHWC given, NCHW asked
  EXPECT_TRUE(invalidWith(n.run(), "does not match NCHW [1,3,6,8]"));
  n.tensor = Tensor::zeros(DataType::kFloat32, Shape{3, 6, 8});
  EXPECT_TRUE(invalidWith(n.run(), "tensor shape [3,6,8] does not match"));
  n.cfg.channels = ChannelOrder::kGray;
  n.tensor = Tensor::zeros(DataType::kFloat32, Shape{1, 3, 6, 8});
  EXPECT_TRUE(invalidWith(n.run(), "for 1 channel(s) of 8x6"));
  n.cfg.channels = ChannelOrder::kRGB;
  n.tensor = Tensor::zeros(DataType::kFloat32, Shape{0, 3, 6, 8});
  EXPECT_TRUE(invalidWith(n.run(), "tensor shape [0,3,6,8]"));
}

TEST(VisionPreprocess, WrongTensorDtype_n) {
  NegativeFixture n;
  n.tensor = Tensor::zeros(DataType::kFloat16, preprocessTensorShape(n.cfg, 1));
  EXPECT_TRUE(invalidWith(n.run(), "tensor is float16[1,3,6,8] but the config asks for float32"));
  n.cfg.dtype = DataType::kUInt8;
  EXPECT_TRUE(invalidWith(n.run(), "output dtype uint8 is not supported"));
}

TEST(VisionPreprocess, EmptyOrDeviceTensor_n) {
  NegativeFixture n;
  n.tensor = Tensor();
  EXPECT_TRUE(invalidWith(n.run(), "the batch tensor is empty"));
  std::vector<float> mem(3 * 6 * 8);
  n.tensor = Tensor::wrap(mem.data(), DataType::kFloat32, preprocessTensorShape(n.cfg, 1),
                          MemoryLocation::kDevice);
  EXPECT_TRUE(invalidWith(n.run(), "needs a host tensor"));
}

TEST(VisionPreprocess, BatchIndexOutOfRange_n) {
  NegativeFixture n;
  EXPECT_TRUE(invalidWith(n.run(2), "batch index 2 is outside the tensor's batch of 2"));
  EXPECT_TRUE(invalidWith(n.run(-1), "batch index -1"));
}

TEST(VisionPreprocess, RoiOutsideFrame_n) {
  NegativeFixture n;
  n.cfg.useRoi = true;
  const PixelRect bad[] = {{-1, 0, 10, 10}, {0, -3, 10, 10}, {60, 0, 5, 10},
                           {0, 40, 10, 9},  {64, 48, 1, 1},  {2147483000, 0, 1000, 1}};
  for (const PixelRect& r : bad) {
    n.cfg.roi = r;
    EXPECT_TRUE(invalidWith(n.run(), "is not inside the 64x48 frame"))
        << r.x << "," << r.y << " " << r.width << "x" << r.height;
  }
  n.cfg.roi = {0, 0, 64, 48};  // the whole frame is fine
  EXPECT_TRUE(n.run().ok());
}

TEST(VisionPreprocess, EmptyRoi_n) {
  NegativeFixture n;
  n.cfg.useRoi = true;
  n.cfg.roi = {3, 3, 0, 5};
  EXPECT_TRUE(invalidWith(n.run(), "ROI 0x5 is empty"));
  n.cfg.roi = {3, 3, 5, -1};
  EXPECT_TRUE(invalidWith(n.run(), "ROI 5x-1 is empty"));
}

TEST(VisionPreprocess, BadNormalisation_n) {
  NegativeFixture n;
  n.cfg.std = {1.f, 0.f, 1.f};
  EXPECT_TRUE(invalidWith(n.run(), "std[1]"));
  n.cfg.std = {1.f, 1.f, std::nanf("")};
  EXPECT_TRUE(invalidWith(n.run(), "std[2]"));
  n.cfg.std = {1.f, 1.f, 1.f};
  n.cfg.mean[0] = INFINITY;
  EXPECT_TRUE(invalidWith(n.run(), "mean must be finite"));
  n.cfg.mean[0] = 0.f;
  n.cfg.scale = std::nanf("");
  EXPECT_TRUE(invalidWith(n.run(), "scale must be finite"));
  n.cfg.scale = 1.f;
  n.cfg.padValue[2] = -INFINITY;
  EXPECT_TRUE(invalidWith(n.run(), "padValue must be finite"));
}

TEST(VisionPreprocess, UnknownEnumsInConfig_n) {
  NegativeFixture n;
  n.cfg.resize = static_cast<ResizeMode>(9);
  EXPECT_TRUE(invalidWith(n.run(), "unknown resize mode"));
  n.cfg.resize = ResizeMode::kStretch;
  n.cfg.interpolation = static_cast<Interpolation>(9);
  EXPECT_TRUE(invalidWith(n.run(), "unknown interpolation"));
  n.cfg.interpolation = Interpolation::kBilinear;
  n.cfg.channels = static_cast<ChannelOrder>(9);
  EXPECT_TRUE(invalidWith(n.run(), "unknown channel order"));
  n.cfg.channels = ChannelOrder::kRGB;
  n.cfg.layout = static_cast<TensorLayout>(9);
  EXPECT_TRUE(invalidWith(n.run(), "unknown tensor layout"));
}

TEST(VisionPreprocess, TensorUntouchedOnError_n) {
  NegativeFixture n;
  std::fill(n.tensor.data<float>(), n.tensor.data<float>() + n.tensor.numel(), 3.5f);
  n.cfg.useRoi = true;
  n.cfg.roi = {60, 40, 10, 10};
  Transform tr;
  tr.scaleX = 42.f;
  EXPECT_FALSE(preprocessCpu(n.frame, n.cfg, n.tensor, 0, &tr).ok());
  for (int64_t i = 0; i < n.tensor.numel(); ++i) ASSERT_EQ(n.tensor.data<float>()[i], 3.5f);
  EXPECT_EQ(tr.scaleX, 42.f);
}

// ---- cropFrame ------------------------------------------------------------------------

// A crop is a view: preprocessing it equals preprocessing the whole frame with the same ROI,
// in every format, with padded pitches (transforms differ only by the ROI origin).
TEST(VisionPreprocess, CropEqualsRoiInEveryFormat) {
  std::mt19937 rng(7);
  for (PixelFormat f : kAllFormats) {
    TestFrame frame = randomFrame(f, 53, 41, 5, rng);
    const PixelRect rect{isYuv(f) ? 10 : 7, isYuv(f) ? 4 : 3, 29, 33};
    auto crop = cropFrame(frame.view, rect);
    ASSERT_TRUE(crop.ok()) << pixelFormatName(f) << ": " << crop.status().toString();
    EXPECT_EQ(crop->width, 29);
    EXPECT_EQ(crop->height, 33);
    EXPECT_TRUE(validateFrame(*crop).ok());
    PreprocessConfig cfg = basicConfig(16, 12);
    cfg.resize = ResizeMode::kLetterbox;
    Tensor a = Tensor::zeros(DataType::kFloat32, preprocessTensorShape(cfg, 1));
    Tensor b = Tensor::zeros(DataType::kFloat32, preprocessTensorShape(cfg, 1));
    Transform ta, tb;
    ASSERT_TRUE(preprocessCpu(*crop, cfg, a, 0, &ta).ok());
    cfg.useRoi = true;
    cfg.roi = rect;
    ASSERT_TRUE(preprocessCpu(frame.view, cfg, b, 0, &tb).ok());
    for (int64_t i = 0; i < a.numel(); ++i)
      ASSERT_EQ(a.data<float>()[i], b.data<float>()[i]) << pixelFormatName(f) << " value " << i;
    EXPECT_EQ(ta.roiX + static_cast<float>(rect.x), tb.roiX);
    EXPECT_EQ(ta.roiY + static_cast<float>(rect.y), tb.roiY);
    EXPECT_EQ(ta.scaleX, tb.scaleX);
    EXPECT_EQ(ta.offsetY, tb.offsetY);
  }
}

TEST(VisionPreprocess, CropOutsideOrEmpty_n) {
  std::vector<uint8_t> buf(64 * 48 * 4);
  const FrameView frame = *wrapFrame(PixelFormat::kRGBA, 64, 48, buf.data());
  const PixelRect outside[] = {{-1, 0, 10, 10}, {0, -2, 10, 10}, {60, 0, 5, 10},
                               {0, 40, 10, 9},  {64, 48, 1, 1},  {2147483000, 0, 1000, 1}};
  for (const PixelRect& r : outside)
    EXPECT_TRUE(invalidWith(cropFrame(frame, r).status(), "is not inside the frame"))
        << r.x << "," << r.y << " " << r.width << "x" << r.height;
  EXPECT_TRUE(invalidWith(cropFrame(frame, {3, 3, 0, 5}).status(), "the rectangle is empty"));
  EXPECT_TRUE(invalidWith(cropFrame(frame, {3, 3, 5, -1}).status(), "the rectangle is empty"));
  FrameView broken = frame;
  broken.planes[0] = nullptr;
  EXPECT_TRUE(invalidWith(cropFrame(broken, {0, 0, 4, 4}).status(), "pointer is null"));
}

TEST(VisionPreprocess, CropOfYuvAtOddOrigin_n) {
  std::vector<uint8_t> buf(4096);
  for (PixelFormat f : {PixelFormat::kNV12, PixelFormat::kI420}) {
    const FrameView frame = *wrapFrame(f, 32, 16, buf.data());
    EXPECT_TRUE(invalidWith(cropFrame(frame, {1, 0, 8, 8}).status(), "must be even"));
    EXPECT_TRUE(invalidWith(cropFrame(frame, {2, 3, 8, 8}).status(), "must be even"));
    EXPECT_TRUE(cropFrame(frame, {2, 4, 7, 5}).ok()) << pixelFormatName(f);  // odd sizes are fine
  }
}

}  // namespace
}  // namespace edgeinfer::vision
