// Frame preprocessing: a video frame (NV12, I420, packed RGB/BGR variants or GRAY8, any row
// pitch) becomes one image of a network's input batch tensor, resized, letterboxed or
// cropped, normalised, in NCHW or NHWC, float32 or float16.
//
// preprocessCpu() is the reference: the CUDA kernel must produce the same values (to float
// rounding), so every step below is specified exactly.
//
// ## Arithmetic, in order
// 1. Region. The source region is the ROI (PreprocessConfig::roi, whole frame if unset). With
//    kCenterCrop it is narrowed to the largest centred sub-rectangle of the output aspect
//    (integer sizes, rounded to nearest; offset floor((roi - crop) / 2)). With kLetterbox the
//    region is resized to (newW, newH) = the output size scaled by
//    min(outW / srcW, outH / srcH), the non-limiting side rounded to nearest (at least 1), and
//    placed at (floor((outW - newW) / 2), floor((outH - newH) / 2)); the rest is padding.
// 2. Colour, per SOURCE pixel, in integers, bit-exact with OpenCV 4's cv::cvtColor:
//    - YUV (NV12, I420; BT.601 limited range; chroma of pixel (x, y) is sample (x/2, y/2), no
//      chroma interpolation; chroma planes are ceil(w/2) x ceil(h/2) as in GStreamer, so odd
//      sizes are allowed) like COLOR_YUV2RGB_NV12 / COLOR_YUV2RGB_I420:
//        y' = max(0, Y - 16) * 1220542;  u = U - 128;  v = V - 128
//        R = clamp255((y' + 1673527 * v + (1 << 19)) >> 20)
//        G = clamp255((y' - 852492 * v - 409993 * u + (1 << 19)) >> 20)
//        B = clamp255((y' + 2116026 * u + (1 << 19)) >> 20)
//      (1220542 / 2^20 = 1.164 = 255/219, 1673527 = 1.596, 852492 = 0.813, 409993 = 0.391,
//      2116026 = 2.018; >> is an arithmetic shift, clamp255 saturates to 0..255.)
//    - Packed RGB/BGR/RGBA/BGRA/RGBx/BGRx: the bytes as they are (alpha / x ignored).
//    - GRAY8 to RGB/BGR: R = G = B = gray (COLOR_GRAY2RGB).
//    - To one GRAY channel (ChannelOrder::kGray) from any colour format: from the R, G, B above,
//      gray = (9798 * R + 19235 * G + 3735 * B + 16384) >> 15 (COLOR_RGB2GRAY, BT.601 luma,
//      full-range); GRAY8 input is taken as it is. So a YUV frame gives the same gray as the
//      RGB frame OpenCV converts it to (not the raw, limited-range Y plane).
// 3. Resize, in float32, of the uint8 values of step 2 (as cv::resize of the converted image
//    after convertTo(CV_32F)), separately per axis. Per output column dx of the region:
//      s  = double(srcW) / double(dstW)
//      kBilinear (cv::INTER_LINEAR, half-pixel centres, align_corners = false):
//        f  = float((dx + 0.5) * s - 0.5)      computed in double, then rounded to float
//        x0 = floor(f);  a = f - x0;
//        if x0 < 0:         x0 = 0, a = 0
//        if x0 >= srcW - 1: x0 = srcW - 1, a = 0
//        x1 = min(x0 + 1, srcW - 1);  weights (1 - a, a) as float
//      kNearest (cv::INTER_NEAREST, NOT half-pixel):
//        x0 = min(floor(dx * (1.0 / (double(dstW) / srcW))), srcW - 1)    in double
//    and likewise for rows (y0, y1, b). A bilinear output pixel converts its 4 source pixels
//    (step 2), interpolates along x within each row, then along y (cv::resize's order):
//        top = P(x0,y0) * (1 - a) + P(x1,y0) * a;  bottom = P(x0,y1) * (1 - a) + P(x1,y1) * a
//        value = top * (1 - b) + bottom * b        (float32; 1 - a, 1 - b rounded to float)
//    This equals "cvtColor, then resize" because colour conversion happens at source pixels.
//    The GPU kernel does the same per output pixel (computes the two axis tables or the same
//    expressions, samples the 4 source pixels, converts each, interpolates), so it needs no
//    intermediate RGB image. Large downscales therefore alias exactly like INTER_LINEAR.
// 4. Channel order: the tensor's channel c is R,G,B (kRGB), B,G,R (kBGR) or gray (kGray).
// 5. Normalise, float32: out = (value * scale - mean[c]) / std[c], with an IEEE division
//    (CUDA: not -use_fast_math). Padding pixels (letterbox) use value = padValue[c] (in pixel
//    units, 0..255, of the tensor's channel order) through the same formula.
// 6. Store: float32 as is; float16 rounded to nearest even (edgeinfer's floatToHalf).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "edgeinfer/types.h"
#include "edgeinfer/vision/types.h"

namespace edgeinfer::vision {

/// Frame pixel formats, named as GStreamer's video/x-raw "format" field names them.
enum class PixelFormat : uint8_t {
  kNV12,   ///< Y plane, then interleaved U,V plane at half resolution (rounded up)
  kI420,   ///< Y plane, U plane, V plane; U and V at half resolution (rounded up)
  kRGBA,   ///< 4 bytes per pixel R,G,B,A
  kBGRA,   ///< 4 bytes per pixel B,G,R,A
  kRGBx,   ///< 4 bytes per pixel R,G,B,unused
  kBGRx,   ///< 4 bytes per pixel B,G,R,unused
  kRGB,    ///< 3 bytes per pixel R,G,B
  kBGR,    ///< 3 bytes per pixel B,G,R
  kGray8,  ///< 1 byte per pixel
};

/// GStreamer's name: "NV12", "I420", "RGBA", "BGRA", "RGBx", "BGRx", "RGB", "BGR", "GRAY8".
const char* pixelFormatName(PixelFormat format);
/// Parses a GStreamer format name (exact spelling, as in caps); kInvalidArgument listing the
/// supported names otherwise.
Expected<PixelFormat> parsePixelFormat(const std::string& name);
/// Number of planes (2 for NV12, 3 for I420, 1 otherwise).
int pixelFormatPlanes(PixelFormat format);

/// A frame in memory the caller owns: host memory (preprocessCpu) or CUDA device memory
/// (preprocessCuda; e.g. a frame NVDEC decoded). Plane p's row r starts at planes[p] + r *
/// strides[p]; strides are in bytes and may exceed the row (padding). Chroma planes of
/// NV12/I420 have ceil(width/2) samples (NV12: pairs) by ceil(height/2) rows.
struct FrameView {
  PixelFormat format = PixelFormat::kRGB;
  int width = 0;
  int height = 0;
  const uint8_t* planes[3] = {nullptr, nullptr, nullptr};
  int strides[3] = {0, 0, 0};
  MemoryLocation memory = MemoryLocation::kHost;  ///< where the planes are
};

/// Bytes in one row of plane `plane` of a frame `width` pixels wide (the least stride).
int64_t planeRowBytes(PixelFormat format, int width, int plane);
/// Rows in plane `plane` of a frame `height` pixels high.
int planeRows(PixelFormat format, int height, int plane);

/// Describes a frame stored in one buffer, planes back to back: plane p at `data +
/// offset(p)`, offset(p + 1) = offset(p) + strides[p] * planeRows(p). `lumaStride` is the
/// stride of plane 0 (0: tight, the row size); `chromaStride` that of the chroma plane(s)
/// (0: the row size when lumaStride is 0, else lumaStride for NV12 and ceil(lumaStride / 2)
/// for I420, as hardware decoders pitch them). Validates the result (see validateFrame).
/// For GStreamer buffers take the strides and offsets from GstVideoInfo instead.
Expected<FrameView> wrapFrame(PixelFormat format, int width, int height, const uint8_t* data,
                              int lumaStride = 0, int chromaStride = 0);
/// Total bytes wrapFrame() expects at `data` for these arguments (0 if they are invalid).
size_t frameBufferBytes(PixelFormat format, int width, int height, int lumaStride = 0,
                        int chromaStride = 0);

/// OK, or kInvalidArgument saying what is wrong: a size outside 1..kMaxFrameSide, a null plane
/// pointer, a stride smaller than its plane's row.
Status validateFrame(const FrameView& frame);
constexpr int kMaxFrameSide = 1 << 15;

enum class TensorLayout : uint8_t { kNCHW, kNHWC };
enum class ResizeMode : uint8_t {
  kStretch,     ///< resize the region to the output size, aspect not kept
  kLetterbox,   ///< keep aspect, centre, pad the rest with padValue
  kCenterCrop,  ///< crop the largest centred part of the output aspect, then resize
};
enum class Interpolation : uint8_t {
  kBilinear,  ///< cv::INTER_LINEAR
  kNearest,   ///< cv::INTER_NEAREST
};
enum class ChannelOrder : uint8_t {
  kRGB,   ///< 3 channels R, G, B
  kBGR,   ///< 3 channels B, G, R
  kGray,  ///< 1 channel, BT.601 luma (see the header comment)
};

/// A rectangle in frame pixels: columns x .. x + width - 1, rows y .. y + height - 1.
struct PixelRect {
  int x = 0, y = 0, width = 0, height = 0;
};

/// The part `rect` of `frame` as a frame of its own: plane pointers moved, strides kept, nothing
/// copied, so it works for host and device frames alike. kInvalidArgument (saying why) for an
/// invalid frame, an empty rectangle, one not inside the frame, or, for NV12/I420, an odd x or
/// y (a crop of a 4:2:0 frame must start on a chroma sample to keep every pixel's chroma).
Expected<FrameView> cropFrame(const FrameView& frame, const PixelRect& rect);

/// What to make of a frame. Defaults: RGB, NCHW, float32, stretch, bilinear, values in 0..1.
struct PreprocessConfig {
  int outputWidth = 0;   ///< tensor W (required, > 0)
  int outputHeight = 0;  ///< tensor H (required, > 0)
  TensorLayout layout = TensorLayout::kNCHW;
  DataType dtype = DataType::kFloat32;  ///< kFloat32 or kFloat16
  ResizeMode resize = ResizeMode::kStretch;
  Interpolation interpolation = Interpolation::kBilinear;
  ChannelOrder channels = ChannelOrder::kRGB;
  /// out = (pixel * scale - mean[c]) / std[c]; pixel in 0..255, c the tensor channel (only
  /// [0] is used for kGray). E.g. ImageNet: scale 1/255, mean {0.485, 0.456, 0.406},
  /// std {0.229, 0.224, 0.225}. std must be finite and non-zero.
  float scale = 1.f / 255.f;
  std::array<float, 3> mean{0.f, 0.f, 0.f};
  std::array<float, 3> std{1.f, 1.f, 1.f};
  /// Letterbox padding per tensor channel, in pixel units (0..255) before normalisation
  /// (e.g. 114 for YOLO).
  std::array<float, 3> padValue{0.f, 0.f, 0.f};
  /// Crop this frame rectangle first (e.g. a detection, for a secondary classifier); it must
  /// lie inside the frame. Unset: the whole frame.
  bool useRoi = false;
  PixelRect roi;
};

/// Channels of the tensor for a config (1 for kGray, else 3).
int preprocessChannels(const PreprocessConfig& cfg);
/// The shape preprocessCpu() expects for a batch of `batch`: [N,C,H,W] or [N,H,W,C].
Shape preprocessTensorShape(const PreprocessConfig& cfg, int64_t batch);
/// OK, or kInvalidArgument naming the bad field.
Status validatePreprocessConfig(const PreprocessConfig& cfg);

/// Writes image `batchIndex` of `batchTensor` (host, dtype cfg.dtype, shape
/// preprocessTensorShape(cfg, N)) from `frame`, as specified at the top of this file. Other
/// batch images are left alone. If `transform` is not null it receives the mapping from tensor
/// pixels to frame pixels (continuous coordinates: tensor (0, 0) is the region's top-left
/// corner, tensor (W, H) its bottom-right corner). Never throws; on error the tensor is not
/// written.
Status preprocessCpu(const FrameView& frame, const PreprocessConfig& cfg, Tensor& batchTensor,
                     int batchIndex, Transform* transform);

}  // namespace edgeinfer::vision

namespace edgeinfer::vision {

/// GPU preprocessing: the same arithmetic as preprocessCpu() (the results are bit-identical:
/// the kernel rounds every step as the CPU does and never contracts a multiply-add), for a
/// batch of frames in ONE kernel launch that reads each frame once and writes the tensor once.
/// No intermediate RGB or resized image is made.
///
///   auto pre = CudaPreprocessor::create(cfg);            // once
///   (*pre)->run(frames, deviceBatch, 0, &transforms, stream);
///
/// Frames in device memory (FrameView::memory == kDevice, e.g. NVDEC output) are read in
/// place. Frames in host memory are first copied to a device staging buffer the preprocessor
/// owns (one cudaMemcpy2DAsync per plane; pinned host memory makes that copy asynchronous).
/// A preprocessor is not thread-safe: use one per thread or per stream.
class CudaPreprocessor {
 public:
  /// kUnsupported in a build without CUDA or when no GPU is usable; kInvalidArgument for a
  /// bad config (validatePreprocessConfig).
  static Expected<std::unique_ptr<CudaPreprocessor>> create(const PreprocessConfig& cfg,
                                                            int deviceId = 0);
  virtual ~CudaPreprocessor() = default;

  const PreprocessConfig& config() const { return cfg_; }

  /// Writes images firstIndex .. firstIndex + frames.size() - 1 of `batchTensor` (a device
  /// tensor of dtype cfg.dtype and shape preprocessTensorShape(cfg, N)), frame i into image
  /// firstIndex + i; frames may differ in format and size. `transforms`, if not null, receives
  /// one Transform per frame. Work is queued on `stream` (a cudaStream_t; null: the legacy
  /// default stream) and this call returns without waiting for it, unless host frames had to
  /// be staged from pageable memory. Errors (bad frame, ROI outside a frame, tensor mismatch)
  /// are reported before anything is queued.
  virtual Status run(const std::vector<FrameView>& frames, Tensor& batchTensor, int firstIndex,
                     std::vector<Transform>* transforms, void* stream) = 0;
  /// A cudaEvent_t recorded after the work the last run() queued (null before a run that
  /// queued any): hand it to ExecutionContext::waitForEvent so that an engine on another stream
  /// reads the batch tensor only once it is written.
  virtual void* completionEvent() const = 0;

 protected:
  explicit CudaPreprocessor(const PreprocessConfig& cfg) : cfg_(cfg) {}
  PreprocessConfig cfg_;
};

}  // namespace edgeinfer::vision
