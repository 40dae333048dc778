// CPU reference of frame preprocessing. The arithmetic is specified in
// edgeinfer/vision/preprocess.h; the CUDA kernel is tested against this file, so change both
// (and the header) together.
#include "edgeinfer/vision/preprocess.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "vision/preprocess_common.h"

namespace edgeinfer::vision {
namespace {

struct FormatInfo {
  PixelFormat format;
  const char* name;
  int planes;
  int bytesPerPixel;  // plane 0
};

constexpr FormatInfo kFormats[] = {
    {PixelFormat::kNV12, "NV12", 2, 1},   {PixelFormat::kI420, "I420", 3, 1},
    {PixelFormat::kRGBA, "RGBA", 1, 4},   {PixelFormat::kBGRA, "BGRA", 1, 4},
    {PixelFormat::kRGBx, "RGBx", 1, 4},   {PixelFormat::kBGRx, "BGRx", 1, 4},
    {PixelFormat::kRGB, "RGB", 1, 3},     {PixelFormat::kBGR, "BGR", 1, 3},
    {PixelFormat::kGray8, "GRAY8", 1, 1},
};

const FormatInfo* findFormat(PixelFormat f) {
  for (const FormatInfo& info : kFormats)
    if (info.format == f) return &info;
  return nullptr;
}

std::string formatLabel(PixelFormat f) {
  const FormatInfo* info = findFormat(f);
  return info ? info->name : "pixel format #" + std::to_string(static_cast<int>(f));
}

const char* planeName(PixelFormat f, int plane) {
  if (f == PixelFormat::kNV12) return plane == 0 ? "Y" : "UV";
  if (f == PixelFormat::kI420) return plane == 0 ? "Y" : plane == 1 ? "U" : "V";
  return "packed";
}

Status invalid(std::string message) {
  return Status(ErrorCode::kInvalidArgument, std::move(message));
}

bool sideOk(int v) {
  return v >= 1 && v <= kMaxFrameSide;
}

uint8_t clamp255(int v) {
  return static_cast<uint8_t>(v < 0 ? 0 : v > 255 ? 255 : v);
}

// BT.601 limited range, bit-exact with OpenCV's YUV420 (NV12 / I420) to RGB.
void yuvToRgb(int y, int u, int v, int rgb[3]) {
  constexpr int kCY = 1220542, kCUB = 2116026, kCUG = -409993, kCVG = -852492, kCVR = 1673527;
  constexpr int kShift = 20, kHalf = 1 << (kShift - 1);
  const int yy = std::max(0, y - 16) * kCY;
  const int uu = u - 128, vv = v - 128;
  rgb[0] = clamp255((yy + kHalf + kCVR * vv) >> kShift);
  rgb[1] = clamp255((yy + kHalf + kCVG * vv + kCUG * uu) >> kShift);
  rgb[2] = clamp255((yy + kHalf + kCUB * uu) >> kShift);
}

// OpenCV 4's RGB2GRAY for 8-bit (BT.601 luma, 15-bit fixed point, rounded).
int rgbToGray(const int rgb[3]) {
  return (9798 * rgb[0] + 19235 * rgb[1] + 3735 * rgb[2] + (1 << 14)) >> 15;
}

// Step 2 of the header: the R, G, B of frame pixel (x, y).
void fetchRgb(const FrameView& f, int x, int y, int rgb[3]) {
  const uint8_t* row = f.planes[0] + static_cast<int64_t>(y) * f.strides[0];
  switch (f.format) {
    case PixelFormat::kNV12: {
      const uint8_t* uv = f.planes[1] + static_cast<int64_t>(y / 2) * f.strides[1] + (x / 2) * 2;
      yuvToRgb(row[x], uv[0], uv[1], rgb);
      return;
    }
    case PixelFormat::kI420: {
      const int64_t off = static_cast<int64_t>(y / 2);
      const uint8_t u = f.planes[1][off * f.strides[1] + x / 2];
      const uint8_t v = f.planes[2][off * f.strides[2] + x / 2];
      yuvToRgb(row[x], u, v, rgb);
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

// Channel values (tensor order) of frame pixel (x, y), as floats 0..255.
void fetchChannels(const FrameView& f, ChannelOrder order, int x, int y, float out[3]) {
  if (order == ChannelOrder::kGray && f.format == PixelFormat::kGray8) {
    out[0] = f.planes[0][static_cast<int64_t>(y) * f.strides[0] + x];
    return;
  }
  int rgb[3] = {0, 0, 0};
  fetchRgb(f, x, y, rgb);
  switch (order) {
    case ChannelOrder::kRGB:
      out[0] = static_cast<float>(rgb[0]), out[1] = static_cast<float>(rgb[1]),
      out[2] = static_cast<float>(rgb[2]);
      return;
    case ChannelOrder::kBGR:
      out[0] = static_cast<float>(rgb[2]), out[1] = static_cast<float>(rgb[1]),
      out[2] = static_cast<float>(rgb[0]);
      return;
    case ChannelOrder::kGray:
      out[0] = static_cast<float>(rgbToGray(rgb));
      return;
  }
}

// Source index/indices and weight of every destination position along one axis (step 3).
struct AxisMap {
  std::vector<int> i0, i1;  // absolute frame coordinates
  std::vector<float> w;     // weight of i1 (weight of i0 is 1 - w)
};

AxisMap mapAxis(int srcOrigin, int srcLen, int dstLen, Interpolation interp) {
  AxisMap m;
  m.i0.resize(static_cast<size_t>(dstLen));
  m.i1.resize(static_cast<size_t>(dstLen));
  m.w.assign(static_cast<size_t>(dstLen), 0.f);
  const double s = static_cast<double>(srcLen) / static_cast<double>(dstLen);
  const double nearestScale = 1.0 / (static_cast<double>(dstLen) / static_cast<double>(srcLen));
  for (int d = 0; d < dstLen; ++d) {
    int i0 = 0, i1 = 0;
    float a = 0.f;
    if (interp == Interpolation::kNearest) {
      i0 = std::min(static_cast<int>(std::floor(d * nearestScale)), srcLen - 1);
      i1 = i0;
    } else {
      const float f = static_cast<float>((d + 0.5) * s - 0.5);
      i0 = static_cast<int>(std::floor(f));
      a = f - static_cast<float>(i0);
      if (i0 < 0) i0 = 0, a = 0.f;
      if (i0 >= srcLen - 1) i0 = srcLen - 1, a = 0.f;
      i1 = std::min(i0 + 1, srcLen - 1);
    }
    m.i0[static_cast<size_t>(d)] = srcOrigin + i0;
    m.i1[static_cast<size_t>(d)] = srcOrigin + i1;
    m.w[static_cast<size_t>(d)] = a;
  }
  return m;
}

bool finite3(const std::array<float, 3>& v, int n) {
  for (int c = 0; c < n; ++c)
    if (!std::isfinite(v[static_cast<size_t>(c)])) return false;
  return true;
}

}  // namespace

const char* pixelFormatName(PixelFormat format) {
  const FormatInfo* info = findFormat(format);
  return info ? info->name : "unknown";
}

Expected<PixelFormat> parsePixelFormat(const std::string& name) {
  std::string known;
  for (const FormatInfo& info : kFormats) {
    if (name == info.name) return info.format;
    known += known.empty() ? "" : ", ";
    known += info.name;
  }
  return invalid("unknown pixel format '" + name +
                 "' (supported, spelled as in GStreamer caps: " + known + ")");
}

int pixelFormatPlanes(PixelFormat format) {
  const FormatInfo* info = findFormat(format);
  return info ? info->planes : 0;
}

int64_t planeRowBytes(PixelFormat format, int width, int plane) {
  const FormatInfo* info = findFormat(format);
  if (!info || plane < 0 || plane >= info->planes || width < 0) return 0;
  if (plane == 0) return static_cast<int64_t>(width) * info->bytesPerPixel;
  const int64_t chroma = (static_cast<int64_t>(width) + 1) / 2;
  return format == PixelFormat::kNV12 ? 2 * chroma : chroma;
}

int planeRows(PixelFormat format, int height, int plane) {
  const FormatInfo* info = findFormat(format);
  if (!info || plane < 0 || plane >= info->planes || height < 0) return 0;
  return plane == 0 ? height : (height + 1) / 2;
}

Status validateFrame(const FrameView& frame) {
  const FormatInfo* info = findFormat(frame.format);
  if (!info) return invalid("frame has an unknown " + formatLabel(frame.format));
  const std::string what = std::string(info->name) + " frame " + std::to_string(frame.width) + "x" +
                           std::to_string(frame.height);
  if (!sideOk(frame.width) || !sideOk(frame.height))
    return invalid(what + ": width and height must be 1.." + std::to_string(kMaxFrameSide));
  for (int p = 0; p < info->planes; ++p) {
    const std::string plane =
        "plane " + std::to_string(p) + " (" + planeName(frame.format, p) + ")";
    if (!frame.planes[p]) return invalid(what + ": " + plane + " pointer is null");
    const int64_t row = planeRowBytes(frame.format, frame.width, p);
    if (frame.strides[p] < row)
      return invalid(what + ": " + plane + " stride " + std::to_string(frame.strides[p]) +
                     " is smaller than its row of " + std::to_string(row) + " bytes");
  }
  return Status::Ok();
}

namespace {

// Fills strides and offsets for wrapFrame()/frameBufferBytes(); returns the total size.
Expected<size_t> bufferLayout(PixelFormat format, int width, int height, int lumaStride,
                              int chromaStride, int strides[3], size_t offsets[3]) {
  const FormatInfo* info = findFormat(format);
  if (!info) return invalid("unknown " + formatLabel(format));
  if (!sideOk(width) || !sideOk(height))
    return invalid(std::string(info->name) + " frame " + std::to_string(width) + "x" +
                   std::to_string(height) + ": width and height must be 1.." +
                   std::to_string(kMaxFrameSide));
  if (lumaStride < 0 || chromaStride < 0)
    return invalid("strides must not be negative (0 means tight)");
  strides[0] = lumaStride ? lumaStride : static_cast<int>(planeRowBytes(format, width, 0));
  for (int p = 1; p < info->planes; ++p) {
    if (chromaStride) {
      strides[p] = chromaStride;
    } else if (lumaStride == 0) {
      strides[p] = static_cast<int>(planeRowBytes(format, width, p));
    } else {
      strides[p] = format == PixelFormat::kNV12 ? lumaStride : (lumaStride + 1) / 2;
    }
  }
  size_t total = 0;
  for (int p = 0; p < info->planes; ++p) {
    offsets[p] = total;
    total += static_cast<size_t>(strides[p]) * static_cast<size_t>(planeRows(format, height, p));
  }
  return total;
}

}  // namespace

size_t frameBufferBytes(PixelFormat format, int width, int height, int lumaStride,
                        int chromaStride) {
  int strides[3] = {0, 0, 0};
  size_t offsets[3] = {0, 0, 0};
  auto total = bufferLayout(format, width, height, lumaStride, chromaStride, strides, offsets);
  return total.ok() ? *total : 0;
}

Expected<FrameView> wrapFrame(PixelFormat format, int width, int height, const uint8_t* data,
                              int lumaStride, int chromaStride) {
  FrameView view;
  view.format = format;
  view.width = width;
  view.height = height;
  size_t offsets[3] = {0, 0, 0};
  auto total = bufferLayout(format, width, height, lumaStride, chromaStride, view.strides, offsets);
  if (!total.ok()) return total.status();
  if (!data) return invalid(std::string(pixelFormatName(format)) + " frame: buffer is null");
  for (int p = 0; p < pixelFormatPlanes(format); ++p) view.planes[p] = data + offsets[p];
  EI_RETURN_IF_ERROR(validateFrame(view));
  return view;
}

Expected<FrameView> cropFrame(const FrameView& frame, const PixelRect& rect) {
  EI_RETURN_IF_ERROR(validateFrame(frame));
  const std::string what = "crop (x " + std::to_string(rect.x) + ", y " + std::to_string(rect.y) +
                           ", " + std::to_string(rect.width) + "x" + std::to_string(rect.height) +
                           ") of the " + pixelFormatName(frame.format) + " frame " +
                           std::to_string(frame.width) + "x" + std::to_string(frame.height);
  if (rect.width < 1 || rect.height < 1) return invalid(what + ": the rectangle is empty");
  if (rect.x < 0 || rect.y < 0 || static_cast<int64_t>(rect.x) + rect.width > frame.width ||
      static_cast<int64_t>(rect.y) + rect.height > frame.height)
    return invalid(what + ": the rectangle is not inside the frame");
  const bool yuv = frame.format == PixelFormat::kNV12 || frame.format == PixelFormat::kI420;
  if (yuv && (rect.x % 2 != 0 || rect.y % 2 != 0))
    return invalid(what +
                   ": x and y must be even (a crop of a 4:2:0 frame starts on a chroma "
                   "sample)");
  FrameView out = frame;
  out.width = rect.width;
  out.height = rect.height;
  const FormatInfo* info = findFormat(frame.format);
  for (int p = 0; p < info->planes; ++p) {
    // Bytes from the start of a row to column x, and rows to skip, in plane p.
    const int64_t column = p == 0 ? static_cast<int64_t>(rect.x) * info->bytesPerPixel
                                  : planeRowBytes(frame.format, rect.x, p);
    const int64_t row = p == 0 ? rect.y : rect.y / 2;
    out.planes[p] = frame.planes[p] + row * frame.strides[p] + column;
  }
  return out;
}

int preprocessChannels(const PreprocessConfig& cfg) {
  return cfg.channels == ChannelOrder::kGray ? 1 : 3;
}

Shape preprocessTensorShape(const PreprocessConfig& cfg, int64_t batch) {
  const int64_t c = preprocessChannels(cfg), h = cfg.outputHeight, w = cfg.outputWidth;
  return cfg.layout == TensorLayout::kNCHW ? Shape{batch, c, h, w} : Shape{batch, h, w, c};
}

Status validatePreprocessConfig(const PreprocessConfig& cfg) {
  if (!sideOk(cfg.outputWidth) || !sideOk(cfg.outputHeight))
    return invalid("preprocess: output size " + std::to_string(cfg.outputWidth) + "x" +
                   std::to_string(cfg.outputHeight) + " must be 1.." +
                   std::to_string(kMaxFrameSide) + " on each side");
  if (cfg.layout != TensorLayout::kNCHW && cfg.layout != TensorLayout::kNHWC)
    return invalid("preprocess: unknown tensor layout");
  if (cfg.dtype != DataType::kFloat32 && cfg.dtype != DataType::kFloat16)
    return invalid(std::string("preprocess: output dtype ") + dataTypeName(cfg.dtype) +
                   " is not supported (float32 or float16)");
  if (cfg.resize != ResizeMode::kStretch && cfg.resize != ResizeMode::kLetterbox &&
      cfg.resize != ResizeMode::kCenterCrop)
    return invalid("preprocess: unknown resize mode");
  if (cfg.interpolation != Interpolation::kBilinear && cfg.interpolation != Interpolation::kNearest)
    return invalid("preprocess: unknown interpolation");
  if (cfg.channels != ChannelOrder::kRGB && cfg.channels != ChannelOrder::kBGR &&
      cfg.channels != ChannelOrder::kGray)
    return invalid("preprocess: unknown channel order");
  const int n = preprocessChannels(cfg);
  if (!std::isfinite(cfg.scale)) return invalid("preprocess: scale must be finite");
  if (!finite3(cfg.mean, n)) return invalid("preprocess: mean must be finite");
  if (!finite3(cfg.padValue, n)) return invalid("preprocess: padValue must be finite");
  for (int c = 0; c < n; ++c) {
    const float s = cfg.std[static_cast<size_t>(c)];
    if (!std::isfinite(s) || s == 0.f)
      return invalid("preprocess: std[" + std::to_string(c) + "] = " + std::to_string(s) +
                     " must be finite and non-zero");
  }
  if (cfg.useRoi && (cfg.roi.width <= 0 || cfg.roi.height <= 0))
    return invalid("preprocess: ROI " + std::to_string(cfg.roi.width) + "x" +
                   std::to_string(cfg.roi.height) + " is empty");
  return Status::Ok();
}

Status preprocessCpu(const FrameView& frame, const PreprocessConfig& cfg, Tensor& batchTensor,
                     int batchIndex, Transform* transform) {
  EI_RETURN_IF_ERROR(validateFrame(frame));
  EI_RETURN_IF_ERROR(validatePreprocessConfig(cfg));
  if (frame.memory != MemoryLocation::kHost)
    return invalid("preprocess: preprocessCpu needs a frame in host memory, got a " +
                   std::string(pixelFormatName(frame.format)) +
                   " frame in device memory (use CudaPreprocessor)");

  EI_RETURN_IF_ERROR(detail::checkBatchTensor(batchTensor, cfg, MemoryLocation::kHost, batchIndex,
                                              1, "preprocessCpu"));
  auto region = detail::preprocessRegion(frame, cfg);
  if (!region.ok()) return region.status();
  const PixelRect src = region->src, dst = region->dst;
  const int outW = cfg.outputWidth, outH = cfg.outputHeight;
  if (transform) *transform = detail::regionTransform(*region, frame);

  // Step 3 tables, step 5 constants.
  const AxisMap mx = mapAxis(src.x, src.width, dst.width, cfg.interpolation);
  const AxisMap my = mapAxis(src.y, src.height, dst.height, cfg.interpolation);
  const int channels = preprocessChannels(cfg);
  float mean[3], stdv[3];
  const std::array<float, 3> pad = detail::normalisedPadding(cfg);
  for (int c = 0; c < channels; ++c) {
    mean[c] = cfg.mean[static_cast<size_t>(c)];
    stdv[c] = cfg.std[static_cast<size_t>(c)];
  }

  const int64_t plane = static_cast<int64_t>(outW) * outH;
  const int64_t base = static_cast<int64_t>(batchIndex) * plane * channels;
  const bool nchw = cfg.layout == TensorLayout::kNCHW;
  const bool fp16 = cfg.dtype == DataType::kFloat16;
  float* out32 = fp16 ? nullptr : batchTensor.data<float>();
  uint16_t* out16 = fp16 ? batchTensor.data<uint16_t>() : nullptr;
  const bool bilinear = cfg.interpolation == Interpolation::kBilinear;
  const ChannelOrder order = cfg.channels;

#pragma omp parallel for schedule(static)
  for (int y = 0; y < outH; ++y) {
    const bool rowInside = y >= dst.y && y < dst.y + dst.height;
    for (int x = 0; x < outW; ++x) {
      float v[3] = {0.f, 0.f, 0.f};
      if (rowInside && x >= dst.x && x < dst.x + dst.width) {
        const size_t ix = static_cast<size_t>(x - dst.x), iy = static_cast<size_t>(y - dst.y);
        const int x0 = mx.i0[ix], y0 = my.i0[iy];
        float p00[3] = {0.f, 0.f, 0.f};
        fetchChannels(frame, order, x0, y0, p00);
        if (bilinear) {
          const int x1 = mx.i1[ix], y1 = my.i1[iy];
          const float a = mx.w[ix], b = my.w[iy];
          const float ia = 1.f - a, ib = 1.f - b;
          float p01[3] = {}, p10[3] = {}, p11[3] = {};
          fetchChannels(frame, order, x1, y0, p01);
          fetchChannels(frame, order, x0, y1, p10);
          fetchChannels(frame, order, x1, y1, p11);
          for (int c = 0; c < channels; ++c) {
            const float top = p00[c] * ia + p01[c] * a;
            const float bottom = p10[c] * ia + p11[c] * a;
            const float value = top * ib + bottom * b;
            v[c] = (value * cfg.scale - mean[c]) / stdv[c];
          }
        } else {
          for (int c = 0; c < channels; ++c) v[c] = (p00[c] * cfg.scale - mean[c]) / stdv[c];
        }
      } else {
        for (int c = 0; c < channels; ++c) v[c] = pad[static_cast<size_t>(c)];
      }
      const int64_t pix = static_cast<int64_t>(y) * outW + x;
      for (int c = 0; c < channels; ++c) {
        const int64_t idx = base + (nchw ? c * plane + pix : pix * channels + c);
        if (fp16) {
          out16[idx] = floatToHalf(v[c]);
        } else {
          out32[idx] = v[c];
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace edgeinfer::vision
