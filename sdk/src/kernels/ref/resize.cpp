// Resize on the CPU (canonical opset-13 form: inputs X, [roi], [scales], [sizes]).
//
// Resize is separable: along every axis each output coordinate maps to an input coordinate
// (coordinate_transformation_mode) and from there to a few weighted input taps: 1 for
// nearest, 2 for linear, 4 for cubic. The taps of every axis are tabulated once; an output
// element is then the sum over the product of its axes' taps, which gives N-d nearest,
// (bi/tri)linear and (bi)cubic with one loop. Taps of weight exactly 0 are dropped, so axes
// that are not resized (scale 1) cost one tap.
//
// Numerics follow onnxruntime: coordinates are computed in float; with `sizes`, the scale of
// an axis is out / in in float. Linear taps clamp to the edge (the same as the ONNX
// reference's edge padding); cubic taps clamp too, after exclude_outside zeroed and
// renormalised the weights of taps outside the input. tf_crop_and_resize writes
// extrapolation_value wherever the input coordinate falls outside [0, in - 1].
#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/ref/nn_common.h"

namespace edgeinfer::ref::nn {
namespace {

constexpr size_t kMaxResizeRank = 8;

struct Tap {
  int64_t index;
  float weight;
};

/// The taps of every output coordinate along one axis.
struct AxisTaps {
  std::vector<std::array<Tap, 4>> taps;
  std::vector<int> count;
  std::vector<uint8_t> outside;  // tf_crop_and_resize: coordinate outside the input
};

struct ResizeAttrs {
  std::string mode, ctm, nearestMode;
  float cubicA = -0.75f;
  bool excludeOutside = false;
  float extrapolation = 0.f;
};

float originalCoordinate(const ResizeAttrs& a, float x, float scale, int64_t in, int64_t out,
                         float roiStart, float roiEnd) {
  const float inF = static_cast<float>(in);
  const float outF = static_cast<float>(out);
  if (a.ctm == "half_pixel") return (x + 0.5f) / scale - 0.5f;
  if (a.ctm == "pytorch_half_pixel") return out > 1 ? (x + 0.5f) / scale - 0.5f : 0.f;
  // align_corners maps corner to corner of the *unrounded* resized length in * scale (the ONNX
  // reference); with sizes given, scale = out / in and this is out itself.
  if (a.ctm == "align_corners") {
    const float resized = inF * scale;
    return out == 1 || resized <= 1.f ? 0.f : x * (inF - 1.f) / (resized - 1.f);
  }
  if (a.ctm == "asymmetric") return x / scale;
  if (a.ctm == "tf_half_pixel_for_nn") return (x + 0.5f) / scale;
  // tf_crop_and_resize
  return out > 1 ? roiStart * (inF - 1.f) + x * (roiEnd - roiStart) * (inF - 1.f) / (outF - 1.f)
                 : 0.5f * (roiStart + roiEnd) * (inF - 1.f);
}

int64_t nearestIndex(const std::string& mode, float x) {
  const float fl = std::floor(x);
  if (mode == "floor") return static_cast<int64_t>(fl);
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  if (x - fl == 0.5f)  // a tie
    return static_cast<int64_t>(mode == "round_prefer_ceil" ? fl + 1.f : fl);
  return static_cast<int64_t>(std::round(x));
}

/// Keys cubic convolution weights for the taps at offsets -1, 0, 1, 2 from floor(x).
std::array<float, 4> cubicWeights(float t, float a) {
  auto w = [a](float d) {  // d = |distance| in [0, 2]
    if (d <= 1.f) return ((a + 2.f) * d - (a + 3.f)) * d * d + 1.f;
    return ((a * d - 5.f * a) * d + 8.f * a) * d - 4.f * a;
  };
  return {w(t + 1.f), w(t), w(1.f - t), w(2.f - t)};
}

AxisTaps axisTaps(const ResizeAttrs& a, int64_t in, int64_t out, float scale, float roiStart,
                  float roiEnd) {
  AxisTaps t;
  t.taps.resize(static_cast<size_t>(out));
  t.count.assign(static_cast<size_t>(out), 0);
  t.outside.assign(static_cast<size_t>(out), 0);
  const auto clampIndex = [in](int64_t i) { return std::min(std::max<int64_t>(i, 0), in - 1); };
  for (int64_t o = 0; o < out; ++o) {
    float x = originalCoordinate(a, static_cast<float>(o), scale, in, out, roiStart, roiEnd);
    if (a.ctm == "tf_crop_and_resize" && (x < 0.f || x > static_cast<float>(in - 1)))
      t.outside[static_cast<size_t>(o)] = 1;
    // Beyond this range every tap is clamped to the edge (or excluded) anyway; clamping keeps
    // the float -> int conversions below defined.
    x = std::isfinite(x) ? std::min(std::max(x, -4.f), static_cast<float>(in) + 3.f) : 0.f;
    auto& taps = t.taps[static_cast<size_t>(o)];
    int& count = t.count[static_cast<size_t>(o)];
    auto add = [&](int64_t index, float weight) {
      if (weight != 0.f) taps[static_cast<size_t>(count++)] = Tap{clampIndex(index), weight};
    };
    if (a.mode == "nearest") {
      add(nearestIndex(a.nearestMode, x), 1.f);
    } else if (a.mode == "linear") {
      const float x0 = std::floor(x);
      const float lambda = x - x0;
      add(static_cast<int64_t>(x0), 1.f - lambda);
      add(static_cast<int64_t>(x0) + 1, lambda);
    } else {  // cubic
      const float x0 = std::floor(x);
      const int64_t i0 = static_cast<int64_t>(x0);
      std::array<float, 4> w = cubicWeights(x - x0, a.cubicA);
      if (a.excludeOutside) {
        float sum = 0.f;
        for (int k = 0; k < 4; ++k) {
          const int64_t idx = i0 - 1 + k;
          if (idx < 0 || idx >= in) w[static_cast<size_t>(k)] = 0.f;
          sum += w[static_cast<size_t>(k)];
        }
        for (float& v : w) v = sum != 0.f ? v / sum : 0.f;
      }
      for (int k = 0; k < 4; ++k) add(i0 - 1 + k, w[static_cast<size_t>(k)]);
    }
    if (count == 0) {  // every weight was zero (exclude_outside, no tap inside): output 0
      taps[0] = Tap{clampIndex(static_cast<int64_t>(std::floor(x))), 0.f};
      count = 1;
    }
  }
  return t;
}

}  // namespace

Status resize(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx, /*skipMask=*/1u << 3));  // sizes are int64
  const Shape& xs = ctx.inputs[0]->shape();
  const Shape& ys = ctx.outputs[0]->shape();
  const size_t rank = xs.rank();
  if (rank == 0 || rank > kMaxResizeRank || ys.rank() != rank)
    return ctx.error(ErrorCode::kUnsupported, "Resize supports ranks 1 to 8");
  ResizeAttrs a;
  a.mode = ctx.attrs().getString("mode", "nearest");
  a.ctm = ctx.attrs().getString("coordinate_transformation_mode", "half_pixel");
  a.nearestMode = ctx.attrs().getString("nearest_mode", "round_prefer_floor");
  a.cubicA = ctx.attrs().getFloat("cubic_coeff_a", -0.75f);
  a.excludeOutside = ctx.attrs().getInt("exclude_outside", 0) == 1;
  a.extrapolation = ctx.attrs().getFloat("extrapolation_value", 0.f);
  if (ys.numel() == 0) return Status::Ok();
  for (size_t d = 0; d < rank; ++d)
    if (xs[d] == 0) return ctx.error(ErrorCode::kInvalidModel, "cannot resize an empty input");

  const bool useScales = ctx.hasInput(2) && ctx.inputs[2]->numel() > 0;
  const bool cropResize = a.ctm == "tf_crop_and_resize";
  const Tensor* roi = ctx.hasInput(1) && ctx.inputs[1]->numel() > 0 ? ctx.inputs[1] : nullptr;
  if (cropResize && (!roi || roi->numel() != static_cast<int64_t>(2 * rank)))
    return ctx.error(ErrorCode::kInvalidModel, "tf_crop_and_resize needs roi with 2 * rank values");

  std::vector<AxisTaps> axes(rank);
  for (size_t d = 0; d < rank; ++d) {
    const float scale = useScales ? ctx.inputs[2]->data<float>()[d]
                                  : static_cast<float>(ys[d]) / static_cast<float>(xs[d]);
    const float roiStart = cropResize ? roi->data<float>()[d] : 0.f;
    const float roiEnd = cropResize ? roi->data<float>()[rank + d] : 1.f;
    axes[d] = axisTaps(a, xs[d], ys[d], scale, roiStart, roiEnd);
  }
  const std::vector<int64_t> inStrides = contiguousStrides(xs);
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  const int64_t total = ys.numel();
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < total; ++o) {
    size_t coord[kMaxResizeRank];
    bool outside = false;
    int64_t rest = o;
    for (size_t d = rank; d-- > 0;) {
      coord[d] = static_cast<size_t>(rest % ys[d]);
      rest /= ys[d];
      outside = outside || axes[d].outside[coord[d]];
    }
    if (outside) {
      y[o] = a.extrapolation;
      continue;
    }
    // Odometer over the taps of all axes.
    int tap[kMaxResizeRank] = {};
    float acc = 0.f;
    while (true) {
      int64_t offset = 0;
      float weight = 1.f;
      for (size_t d = 0; d < rank; ++d) {
        const Tap& t = axes[d].taps[coord[d]][static_cast<size_t>(tap[d])];
        offset += t.index * inStrides[d];
        weight *= t.weight;
      }
      acc += weight * x[offset];
      size_t d = rank;
      while (d-- > 0) {
        if (++tap[d] < axes[d].count[coord[d]]) break;
        tap[d] = 0;
      }
      if (d == static_cast<size_t>(-1)) break;
    }
    y[o] = acc;
  }
  return Status::Ok();
}

}  // namespace edgeinfer::ref::nn
