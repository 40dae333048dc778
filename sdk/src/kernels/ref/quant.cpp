// CPU reference kernels for QuantizeLinear, DequantizeLinear and DynamicQuantizeLinear:
//   quantize:   y = saturate(round_half_even(x / scale) + zero_point)   (computed in float)
//   dequantize: y = (x - zero_point) * scale
//   dynamic:    lo = min(0, min x), hi = max(0, max x), scale = (hi - lo) / 255,
//               zero_point = saturate(round_half_even((0 - lo) / scale)), then quantize to
//               uint8, all in float32 as ONNX's reference; an all-zero x (scale 0) gives
//               scale 0, zero point 0 and y 0 (ONNX's formula divides 0 by 0 there).
// A one-element scale is per-tensor; a 1-D scale of length dim[axis] is per-axis.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/ref/elementwise_common.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer::ref {
namespace {

/// Which scale / zero-point element each data element uses: (i / inner) % channels.
struct Channels {
  int64_t channels = 1;
  int64_t inner = 1;
  int64_t of(int64_t i) const { return channels == 1 ? 0 : (i / inner) % channels; }
};

Status channelsFor(KernelContext& ctx, Channels* c) {
  const Tensor& x = *ctx.inputs[0];
  const Tensor& scale = *ctx.inputs[1];
  if (ctx.hasInput(2) && ctx.inputs[2]->numel() != scale.numel())
    return ctx.error(ErrorCode::kInvalidArgument, "zero point and scale sizes differ");
  if (scale.numel() == 1) return Status::Ok();
  const int64_t rank = static_cast<int64_t>(x.shape().rank());
  int64_t axis = ctx.attrs().getInt("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || scale.shape().rank() != 1 ||
      scale.numel() != x.shape()[static_cast<size_t>(axis)])
    return ctx.error(ErrorCode::kInvalidArgument,
                     "scale " + scale.shape().toString() + " does not match input " +
                         x.shape().toString() + " on axis " + std::to_string(axis));
  c->channels = scale.numel();
  c->inner = x.shape().span(static_cast<size_t>(axis) + 1, x.shape().rank());
  return Status::Ok();
}

template <typename Q>
void quantizeLoop(const Tensor& x, const Tensor& scale, const Tensor* zp, const Channels& ch,
                  Tensor& y) {
  Q* out = y.data<Q>();
  const int64_t n = x.numel();
  constexpr float lo = static_cast<float>(std::numeric_limits<Q>::lowest());
  constexpr float hi = static_cast<float>(std::numeric_limits<Q>::max());
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    const int64_t c = ch.of(i);
    const float s = static_cast<float>(scale.getAsDouble(c));
    const float z = zp ? static_cast<float>(zp->getAsInt64(c)) : 0.f;
    const float v = std::nearbyint(static_cast<float>(x.getAsDouble(i)) / s) + z;
    out[i] = std::isnan(v) ? static_cast<Q>(z) : static_cast<Q>(std::min(std::max(v, lo), hi));
  }
}

Status quantizeKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  const Tensor& scale = *ctx.inputs[1];
  const Tensor* zp = ctx.hasInput(2) ? ctx.inputs[2] : nullptr;
  Tensor& y = *ctx.outputs[0];
  Channels ch;
  EI_RETURN_IF_ERROR(channelsFor(ctx, &ch));
  if (y.dtype() == DataType::kUInt8)
    quantizeLoop<uint8_t>(x, scale, zp, ch, y);
  else if (y.dtype() == DataType::kInt8)
    quantizeLoop<int8_t>(x, scale, zp, ch, y);
  else
    return ctx.error(ErrorCode::kUnsupported,
                     std::string("cannot quantize to ") + dataTypeName(y.dtype()));
  return Status::Ok();
}

Status dequantizeKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  const Tensor& scale = *ctx.inputs[1];
  const Tensor* zp = ctx.hasInput(2) ? ctx.inputs[2] : nullptr;
  Tensor& y = *ctx.outputs[0];
  Channels ch;
  EI_RETURN_IF_ERROR(channelsFor(ctx, &ch));
  if (x.dtype() == DataType::kInt32 && zp)
    for (int64_t i = 0; i < zp->numel(); ++i)
      if (zp->getAsInt64(i) != 0)
        return ctx.error(ErrorCode::kInvalidArgument,
                         "DequantizeLinear of int32 requires a zero point of 0");
  return dispatchType(y.dtype(), TypeSet::kFloat, "DequantizeLinear", [&](auto tag) -> Status {
    constexpr DataType DT = decltype(tag)::value;
    if constexpr (kIsFloatType<DT>) {
      using Tr = TypeTraits<DT>;
      auto* out = y.data<typename Tr::Storage>();
      const int64_t n = x.numel();
#pragma omp parallel for if (n > kParallelThreshold)
      for (int64_t i = 0; i < n; ++i) {
        const int64_t c = ch.of(i);
        const int64_t z = zp ? zp->getAsInt64(c) : 0;
        const float s = static_cast<float>(scale.getAsDouble(c));
        out[i] = Tr::store(static_cast<float>(x.getAsInt64(i) - z) * s);
      }
    }
    return Status::Ok();
  });
}

Status dynamicQuantizeKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  if (x.dtype() != DataType::kFloat32 || ctx.outputs.size() < 3 || !ctx.outputs[1] ||
      !ctx.outputs[2])
    return ctx.error(ErrorCode::kInvalidArgument,
                     "DynamicQuantizeLinear needs a float32 input and three outputs");
  const float* in = x.data<float>();
  const int64_t n = x.numel();
  float lo = 0.f, hi = 0.f;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(in[i])) continue;
    lo = std::min(lo, in[i]);
    hi = std::max(hi, in[i]);
  }
  const float scale = (hi - lo) / 255.f;
  const float zp =
      scale == 0.f ? 0.f : std::min(std::max(std::nearbyint((0.f - lo) / scale), 0.f), 255.f);
  *ctx.outputs[1]->data<float>() = scale;
  *ctx.outputs[2]->data<uint8_t>() = static_cast<uint8_t>(zp);
  uint8_t* out = ctx.outputs[0]->data<uint8_t>();
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    const float v = scale == 0.f ? 0.f : std::nearbyint(in[i] / scale) + zp;
    out[i] = std::isnan(v) ? static_cast<uint8_t>(zp)
                           : static_cast<uint8_t>(std::min(std::max(v, 0.f), 255.f));
  }
  return Status::Ok();
}

}  // namespace

void registerQuantKernels(KernelRegistry& r) {
  r.add("", "DynamicQuantizeLinear", dynamicQuantizeKernel);
  r.add("", "QuantizeLinear", quantizeKernel);
  r.add("", "DequantizeLinear", dequantizeKernel);
  registerQLinearKernels(r);
}

}  // namespace edgeinfer::ref
