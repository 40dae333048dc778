// Normalisation ops on the CPU: BatchNormalization (inference), InstanceNormalization,
// LayerNormalization, LRN and LpNormalization. Means and variances are accumulated in double
// (two passes: mean first, then the centred sum of squares) so large planes stay accurate.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ref/nn_common.h"

namespace edgeinfer::ref::nn {
namespace {

/// The values of `t` broadcast to `target` (unidirectionally), as a dense vector.
std::vector<float> expandTo(const Tensor& t, const Shape& target) {
  const std::vector<int64_t> strides = broadcastStrides(t.shape(), target);
  const float* src = t.data<float>();
  std::vector<float> out(static_cast<size_t>(target.numel()));
  for (int64_t i = 0; i < target.numel(); ++i)
    out[static_cast<size_t>(i)] = src[broadcastOffset(i, target, strides)];
  return out;
}

}  // namespace

Status batchNormalization(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  const Shape& xs = ctx.inputs[0]->shape();
  const int64_t batch = xs[0];
  const int64_t channels = xs[1];
  const int64_t size = xs.span(2, xs.rank());
  const double eps = ctx.attrs().getFloat("epsilon", 1e-5f);
  // Parameters are per channel ([C]), or per element ([C, D1, ...], opset 7-8 spatial = 0).
  const bool perElement = ctx.inputs[1]->numel() != channels;
  for (size_t i = 1; i < 5; ++i)
    if (ctx.inputs[i]->numel() != (perElement ? channels * size : channels))
      return ctx.error(ErrorCode::kInvalidModel,
                       "BatchNormalization parameter " + std::to_string(i) + " has the wrong size");
  const float* x = ctx.inputs[0]->data<float>();
  const float* scale = ctx.inputs[1]->data<float>();
  const float* bias = ctx.inputs[2]->data<float>();
  const float* mean = ctx.inputs[3]->data<float>();
  const float* var = ctx.inputs[4]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  const int64_t planes = batch * channels;
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const int64_t c = plane % channels;
    const float* xp = x + plane * size;
    float* yp = y + plane * size;
    for (int64_t i = 0; i < size; ++i) {
      const int64_t p = perElement ? c * size + i : c;
      // y = (x - mean) / sqrt(var + eps) * scale + B
      const double inv = 1.0 / std::sqrt(static_cast<double>(var[p]) + eps);
      yp[i] = static_cast<float>((xp[i] - static_cast<double>(mean[p])) * inv * scale[p] + bias[p]);
    }
  }
  return Status::Ok();
}

Status instanceNormalization(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  const Shape& xs = ctx.inputs[0]->shape();
  const int64_t channels = xs[1];
  const int64_t planes = xs[0] * channels;
  const int64_t size = xs.span(2, xs.rank());
  if (ctx.inputs[1]->numel() != channels || ctx.inputs[2]->numel() != channels)
    return ctx.error(ErrorCode::kInvalidModel, "scale and B must have one value per channel");
  const double eps = ctx.attrs().getFloat("epsilon", 1e-5f);
  const float* x = ctx.inputs[0]->data<float>();
  const float* scale = ctx.inputs[1]->data<float>();
  const float* bias = ctx.inputs[2]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const int64_t c = plane % channels;
    const float* xp = x + plane * size;
    float* yp = y + plane * size;
    double sum = 0.0;
    for (int64_t i = 0; i < size; ++i) sum += xp[i];
    const double mean = size > 0 ? sum / static_cast<double>(size) : 0.0;
    double sq = 0.0;
    for (int64_t i = 0; i < size; ++i) sq += (xp[i] - mean) * (xp[i] - mean);
    const double var = size > 0 ? sq / static_cast<double>(size) : 0.0;
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < size; ++i)
      yp[i] = static_cast<float>((xp[i] - mean) * inv * scale[c] + bias[c]);
  }
  return Status::Ok();
}

Status layerNormalization(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  const Shape& xs = ctx.inputs[0]->shape();
  const int64_t rank = static_cast<int64_t>(xs.rank());
  int64_t axis = ctx.attrs().getInt("axis", -1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return ctx.error(ErrorCode::kInvalidModel, "axis out of range");
  const int64_t outer = xs.span(0, static_cast<size_t>(axis));
  const int64_t inner = xs.span(static_cast<size_t>(axis), xs.rank());
  const Shape normShape(std::vector<int64_t>(xs.dims().begin() + axis, xs.dims().end()));
  const std::vector<float> scale = expandTo(*ctx.inputs[1], normShape);
  const std::vector<float> bias = ctx.hasInput(2)
                                      ? expandTo(*ctx.inputs[2], normShape)
                                      : std::vector<float>(static_cast<size_t>(inner), 0.f);
  const double eps = ctx.attrs().getFloat("epsilon", 1e-5f);
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  float* meanOut = ctx.outputs.size() > 1 ? ctx.outputs[1]->data<float>() : nullptr;
  float* invStdOut = ctx.outputs.size() > 2 ? ctx.outputs[2]->data<float>() : nullptr;
#pragma omp parallel for schedule(static)
  for (int64_t o = 0; o < outer; ++o) {
    const float* xr = x + o * inner;
    float* yr = y + o * inner;
    double sum = 0.0;
    for (int64_t i = 0; i < inner; ++i) sum += xr[i];
    const double mean = inner > 0 ? sum / static_cast<double>(inner) : 0.0;
    double sq = 0.0;
    for (int64_t i = 0; i < inner; ++i) sq += (xr[i] - mean) * (xr[i] - mean);
    const double var = inner > 0 ? sq / static_cast<double>(inner) : 0.0;
    const double inv = 1.0 / std::sqrt(var + eps);
    for (int64_t i = 0; i < inner; ++i)
      yr[i] = static_cast<float>((xr[i] - mean) * inv * scale[static_cast<size_t>(i)] +
                                 bias[static_cast<size_t>(i)]);
    if (meanOut) meanOut[o] = static_cast<float>(mean);
    if (invStdOut) invStdOut[o] = static_cast<float>(inv);
  }
  return Status::Ok();
}

Status lrn(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  const Shape& xs = ctx.inputs[0]->shape();
  const int64_t channels = xs[1];
  const int64_t planes = xs[0] * channels;
  const int64_t size = xs.span(2, xs.rank());
  const int64_t window = ctx.attrs().getInt("size", 1);
  const double alpha = ctx.attrs().getFloat("alpha", 1e-4f);
  const double beta = ctx.attrs().getFloat("beta", 0.75f);
  const double bias = ctx.attrs().getFloat("bias", 1.0f);
  // Channels [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)], clipped.
  const int64_t before = (window - 1) / 2;
  const int64_t after = window - 1 - before;
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane) {
    const int64_t n = plane / channels;
    const int64_t c = plane % channels;
    const int64_t cBegin = std::max<int64_t>(0, c - before);
    const int64_t cEnd = std::min<int64_t>(channels - 1, c + after);
    for (int64_t i = 0; i < size; ++i) {
      double sq = 0.0;
      for (int64_t cc = cBegin; cc <= cEnd; ++cc) {
        const double v = x[(n * channels + cc) * size + i];
        sq += v * v;
      }
      const double v = x[plane * size + i];
      y[plane * size + i] =
          static_cast<float>(v / std::pow(bias + alpha / static_cast<double>(window) * sq, beta));
    }
  }
  return Status::Ok();
}

Status lpNormalization(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  const Shape& xs = ctx.inputs[0]->shape();
  const int64_t rank = static_cast<int64_t>(xs.rank());
  int64_t axis = ctx.attrs().getInt("axis", -1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return ctx.error(ErrorCode::kInvalidModel, "axis out of range");
  const int64_t p = ctx.attrs().getInt("p", 2);
  const int64_t outer = xs.span(0, static_cast<size_t>(axis));
  const int64_t len = xs[static_cast<size_t>(axis)];
  const int64_t inner = xs.span(static_cast<size_t>(axis) + 1, xs.rank());
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t oi = 0; oi < outer * inner; ++oi) {
    const int64_t base = (oi / inner) * len * inner + oi % inner;
    double norm = 0.0;
    for (int64_t a = 0; a < len; ++a) {
      const double v = x[base + a * inner];
      norm += p == 1 ? std::fabs(v) : v * v;
    }
    if (p == 2) norm = std::sqrt(norm);
    // A zero vector stays zero (as onnxruntime does) instead of becoming NaN.
    for (int64_t a = 0; a < len; ++a)
      y[base + a * inner] = norm > 0.0 ? static_cast<float>(x[base + a * inner] / norm) : 0.f;
  }
  return Status::Ok();
}

}  // namespace edgeinfer::ref::nn
