#include "vision/preprocess_common.h"

#include <algorithm>

namespace edgeinfer::vision::detail {
namespace {

Status invalid(std::string message) {
  return Status(ErrorCode::kInvalidArgument, std::move(message));
}

// round(num / den) for positive operands, at least 1.
int roundedRatio(int64_t num, int64_t den) {
  return static_cast<int>(std::max<int64_t>(1, (2 * num + den) / (2 * den)));
}

}  // namespace

const char* layoutName(TensorLayout layout) {
  return layout == TensorLayout::kNCHW ? "NCHW" : "NHWC";
}

Status checkBatchTensor(const Tensor& tensor, const PreprocessConfig& cfg, MemoryLocation where,
                        int first, int count, const char* who) {
  const std::string me = std::string("preprocess (") + who + "): ";
  if (tensor.empty())
    return invalid(me + "the batch tensor is empty (allocate it with shape " +
                   preprocessTensorShape(cfg, count).toString() + " or a larger batch)");
  if (tensor.location() != where)
    return invalid(me + "needs a " + (where == MemoryLocation::kHost ? "host" : "device") +
                   " tensor, got " + (tensor.onHost() ? "host" : "device") + " tensor " +
                   tensor.describe());
  if (tensor.dtype() != cfg.dtype)
    return invalid(me + "tensor is " + tensor.describe() + " but the config asks for " +
                   dataTypeName(cfg.dtype));
  const Shape& shape = tensor.shape();
  const int64_t batch = shape.rank() == 4 ? shape[0] : 0;
  if (shape.rank() != 4 || batch < 1 || shape != preprocessTensorShape(cfg, batch))
    return invalid(me + "tensor shape " + shape.toString() + " does not match " +
                   layoutName(cfg.layout) + " " + preprocessTensorShape(cfg, batch).toString() +
                   " for " + std::to_string(preprocessChannels(cfg)) + " channel(s) of " +
                   std::to_string(cfg.outputWidth) + "x" + std::to_string(cfg.outputHeight));
  if (!tensor.raw()) return invalid(me + "tensor " + tensor.describe() + " has no memory");
  if (first < 0 || count < 0 || static_cast<int64_t>(first) + count > batch)
    return invalid(me + "batch index " + std::to_string(first) +
                   (count > 1 ? ".." + std::to_string(first + count - 1) : std::string()) +
                   " is outside the tensor's batch of " + std::to_string(batch));
  return Status::Ok();
}

Expected<PreprocessRegion> preprocessRegion(const FrameView& frame, const PreprocessConfig& cfg) {
  PixelRect src{0, 0, frame.width, frame.height};
  if (cfg.useRoi) {
    const PixelRect& r = cfg.roi;
    if (r.x < 0 || r.y < 0 || static_cast<int64_t>(r.x) + r.width > frame.width ||
        static_cast<int64_t>(r.y) + r.height > frame.height)
      return invalid("preprocess: ROI (x " + std::to_string(r.x) + ", y " + std::to_string(r.y) +
                     ", " + std::to_string(r.width) + "x" + std::to_string(r.height) +
                     ") is not inside the " + std::to_string(frame.width) + "x" +
                     std::to_string(frame.height) + " frame");
    src = r;
  }
  const int outW = cfg.outputWidth, outH = cfg.outputHeight;
  PixelRect dst{0, 0, outW, outH};
  const int64_t srcWxOutH = static_cast<int64_t>(src.width) * outH;
  const int64_t srcHxOutW = static_cast<int64_t>(src.height) * outW;
  if (cfg.resize == ResizeMode::kCenterCrop) {
    if (srcWxOutH > srcHxOutW) {  // region wider than the output: crop columns
      const int w = std::min(src.width, roundedRatio(srcHxOutW, outH));
      src.x += (src.width - w) / 2;
      src.width = w;
    } else if (srcWxOutH < srcHxOutW) {
      const int h = std::min(src.height, roundedRatio(srcWxOutH, outW));
      src.y += (src.height - h) / 2;
      src.height = h;
    }
  } else if (cfg.resize == ResizeMode::kLetterbox) {
    if (srcWxOutH >= srcHxOutW) {  // width-limited
      dst.height = std::min(outH, roundedRatio(srcHxOutW, src.width));
    } else {
      dst.width = std::min(outW, roundedRatio(srcWxOutH, src.height));
    }
    dst.x = (outW - dst.width) / 2;
    dst.y = (outH - dst.height) / 2;
  }
  return PreprocessRegion{src, dst};
}

Transform regionTransform(const PreprocessRegion& region, const FrameView& frame) {
  Transform t;
  t.scaleX = static_cast<float>(static_cast<double>(region.dst.width) / region.src.width);
  t.scaleY = static_cast<float>(static_cast<double>(region.dst.height) / region.src.height);
  t.offsetX = static_cast<float>(region.dst.x);
  t.offsetY = static_cast<float>(region.dst.y);
  t.roiX = static_cast<float>(region.src.x);
  t.roiY = static_cast<float>(region.src.y);
  t.frameWidth = static_cast<float>(frame.width);
  t.frameHeight = static_cast<float>(frame.height);
  return t;
}

std::array<float, 3> normalisedPadding(const PreprocessConfig& cfg) {
  std::array<float, 3> pad{0.f, 0.f, 0.f};
  for (int c = 0; c < preprocessChannels(cfg); ++c) {
    const size_t i = static_cast<size_t>(c);
    pad[i] = (cfg.padValue[i] * cfg.scale - cfg.mean[i]) / cfg.std[i];
  }
  return pad;
}

}  // namespace edgeinfer::vision::detail
