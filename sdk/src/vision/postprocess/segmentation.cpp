// Semantic segmentation: per-pixel argmax over the class channel, or a threshold on a map of
// one channel.
#include <cmath>
#include <cstdint>

#include "vision/postprocess/common.h"

namespace edgeinfer::vision {

Expected<Tensor> segmentationArgmax(const Tensor& scores, DataType outType) {
  EI_RETURN_IF_ERROR(detail::checkFloatTensor(scores, "segmentation scores [N, C, H, W]", 4));
  if (outType != DataType::kUInt8 && outType != DataType::kInt32)
    return Status(ErrorCode::kUnsupported, std::string("segmentation class map dtype ") +
                                               dataTypeName(outType) + ": must be uint8 or int32");
  const int64_t n = scores.shape()[0], c = scores.shape()[1], h = scores.shape()[2],
                w = scores.shape()[3];
  if (outType == DataType::kUInt8 && c > 256)
    return Status(
        ErrorCode::kInvalidArgument,
        "segmentation: " + std::to_string(c) + " classes do not fit a uint8 class map (use int32)");
  if (outType == DataType::kInt32 && c > INT32_MAX)
    return Status(ErrorCode::kInvalidArgument, "segmentation: too many classes");
  EI_ASSIGN_OR_RETURN(Tensor out, Tensor::create(outType, Shape{n, h, w}));
  const detail::FloatElements v(scores);
  const int64_t hw = h * w;
  for (int64_t b = 0; b < n; ++b) {
    const float* img = v.data() + b * c * hw;
    for (int64_t i = 0; i < hw; ++i) {
      int64_t best = 0;
      float bestV = img[i];
      for (int64_t k = 1; k < c; ++k) {
        const float x = img[k * hw + i];
        // NaN never wins; a NaN incumbent loses to any number.
        if (x > bestV || (std::isnan(bestV) && !std::isnan(x))) {
          best = k;
          bestV = x;
        }
      }
      if (outType == DataType::kUInt8)
        out.data<uint8_t>()[b * hw + i] = static_cast<uint8_t>(best);
      else
        out.data<int32_t>()[b * hw + i] = static_cast<int32_t>(best);
    }
  }
  return out;
}

Expected<Tensor> segmentationClasses(const Tensor& scores, const SegmentationParams& params,
                                     DataType outType) {
  EI_RETURN_IF_ERROR(detail::checkFloatTensor(scores, "segmentation scores [N, C, H, W]", 4));
  if (scores.shape()[1] != 1) return segmentationArgmax(scores, outType);
  if (outType != DataType::kUInt8 && outType != DataType::kInt32)
    return Status(ErrorCode::kUnsupported, std::string("segmentation class map dtype ") +
                                               dataTypeName(outType) + ": must be uint8 or int32");
  const int64_t n = scores.shape()[0], h = scores.shape()[2], w = scores.shape()[3];
  EI_ASSIGN_OR_RETURN(Tensor out, Tensor::create(outType, Shape{n, h, w}));
  const detail::FloatElements v(scores);
  for (int64_t i = 0; i < n * h * w; ++i) {
    const bool fg = v.data()[i] > params.threshold;  // NaN: false
    if (outType == DataType::kUInt8)
      out.data<uint8_t>()[i] = fg;
    else
      out.data<int32_t>()[i] = fg;
  }
  return out;
}

}  // namespace edgeinfer::vision
