// MaxPool (with the optional Indices output), AveragePool, LpPool, GlobalAveragePool and
// GlobalMaxPool on the CPU, for 1 to 3 spatial dims (promoted to 3-D with leading dims of
// size 1, as in conv.cpp). Window geometry comes from graph/ops/conv_geometry.h, shared with
// the shape functions.
//
// Padding never contributes a value: MaxPool ignores it, LpPool treats it as zero, and
// AveragePool divides by the number of real elements in the window, or with
// count_include_pad by the number of window taps inside the padded input (taps that ceil_mode
// pushes past the end padding are not counted, as in onnxruntime).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "graph/ops/conv_geometry.h"
#include "kernels/ref/nn_common.h"

namespace edgeinfer::ref::nn {
namespace {

constexpr size_t kMaxSpatial = 3;

struct PoolPlan {
  int64_t planes = 0;  // N * C
  int64_t in[kMaxSpatial], out[kMaxSpatial], k[kMaxSpatial], s[kMaxSpatial], d[kMaxSpatial],
      padBegin[kMaxSpatial], padEnd[kMaxSpatial];
  size_t lead = 0;  // number of promoted (size-1) leading spatial dims

  int64_t inSize() const { return in[0] * in[1] * in[2]; }
  int64_t outSize() const { return out[0] * out[1] * out[2]; }
};

Status makePoolPlan(const KernelContext& ctx, PoolPlan* p) {
  const Shape& xs = ctx.inputs[0]->shape();
  const size_t rank = xs.rank();
  if (rank < 3) return ctx.error(ErrorCode::kInvalidModel, "pooling input must have rank >= 3");
  const size_t spatial = rank - 2;
  if (spatial > kMaxSpatial)
    return ctx.error(ErrorCode::kUnsupported, "the CPU reference pools over 1 to 3 spatial dims");
  graph::WindowAttrs wa;
  EI_RETURN_IF_ERROR(graph::readWindowAttrs(ctx.attrs(), spatial, {}, &wa));
  const std::vector<int64_t> xin(xs.dims().begin() + 2, xs.dims().end());
  graph::WindowDims dims;
  EI_RETURN_IF_ERROR(graph::computeWindowDims(wa, xin, &dims));
  p->planes = xs[0] * xs[1];
  p->lead = kMaxSpatial - spatial;
  for (size_t i = 0; i < kMaxSpatial; ++i) {
    if (i < p->lead) {
      p->in[i] = p->out[i] = p->k[i] = p->s[i] = p->d[i] = 1;
      p->padBegin[i] = p->padEnd[i] = 0;
      continue;
    }
    const size_t j = i - p->lead;
    p->in[i] = xin[j];
    p->out[i] = dims.out[j];
    p->k[i] = wa.kernel[j];
    p->s[i] = wa.strides[j];
    p->d[i] = wa.dilations[j];
    p->padBegin[i] = dims.padBegin[j];
    p->padEnd[i] = dims.padEnd[j];
  }
  for (size_t o = 0; o < ctx.outputs.size(); ++o)
    if (ctx.outputs[o]->numel() != p->planes * p->outSize())
      return ctx.error(ErrorCode::kInternal, "output shape does not match the pooling geometry");
  return Status::Ok();
}

/// Calls visit(inputOffset) for each window tap inside the input, and returns the number of
/// taps inside the padded input (for count_include_pad).
template <typename Visit>
int64_t forEachTap(const PoolPlan& p, int64_t od, int64_t oh, int64_t ow, Visit visit) {
  int64_t paddedCount = 0;
  for (int64_t kd = 0; kd < p.k[0]; ++kd) {
    const int64_t id = od * p.s[0] - p.padBegin[0] + kd * p.d[0];
    if (id < -p.padBegin[0] || id >= p.in[0] + p.padEnd[0]) continue;
    for (int64_t kh = 0; kh < p.k[1]; ++kh) {
      const int64_t ih = oh * p.s[1] - p.padBegin[1] + kh * p.d[1];
      if (ih < -p.padBegin[1] || ih >= p.in[1] + p.padEnd[1]) continue;
      for (int64_t kw = 0; kw < p.k[2]; ++kw) {
        const int64_t iw = ow * p.s[2] - p.padBegin[2] + kw * p.d[2];
        if (iw < -p.padBegin[2] || iw >= p.in[2] + p.padEnd[2]) continue;
        ++paddedCount;
        if (id < 0 || id >= p.in[0] || ih < 0 || ih >= p.in[1] || iw < 0 || iw >= p.in[2]) continue;
        visit(id, ih, iw);
      }
    }
  }
  return paddedCount;
}

/// Runs fn(plane, od, oh, ow, outIndexInPlane) over all outputs, planes in parallel.
template <typename Fn>
void forEachOutput(const PoolPlan& p, Fn fn) {
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < p.planes; ++plane) {
    int64_t o = 0;
    for (int64_t od = 0; od < p.out[0]; ++od)
      for (int64_t oh = 0; oh < p.out[1]; ++oh)
        for (int64_t ow = 0; ow < p.out[2]; ++ow) fn(plane, od, oh, ow, o++);
  }
}

}  // namespace

namespace {

/// MaxPool over element type T (float32, or the 8-bit integer types opset 12 allows).
template <typename T>
Status maxPoolTyped(KernelContext& ctx) {
  PoolPlan p;
  EI_RETURN_IF_ERROR(makePoolPlan(ctx, &p));
  const bool columnMajor = ctx.attrs().getInt("storage_order", 0) == 1;
  const T* x = ctx.inputs[0]->data<T>();
  T* y = ctx.outputs[0]->data<T>();
  int64_t* indices = ctx.outputs.size() > 1 ? ctx.outputs[1]->data<int64_t>() : nullptr;
  const int64_t inSize = p.inSize();
  const int64_t outSize = p.outSize();
  forEachOutput(p, [&](int64_t plane, int64_t od, int64_t oh, int64_t ow, int64_t o) {
    const T* xp = x + plane * inSize;
    T best = std::numeric_limits<T>::lowest();
    int64_t bestIndex = -1;
    forEachTap(p, od, oh, ow, [&](int64_t id, int64_t ih, int64_t iw) {
      const int64_t offset = (id * p.in[1] + ih) * p.in[2] + iw;
      if (bestIndex < 0 || xp[offset] > best) {
        best = xp[offset];
        // Indices flatten the whole input (N, C included); storage_order 1 orders the
        // spatial dims column-major.
        bestIndex = columnMajor ? id + ih * p.in[0] + iw * p.in[0] * p.in[1] : offset;
      }
    });
    y[plane * outSize + o] = best;
    if (indices) indices[plane * outSize + o] = bestIndex < 0 ? -1 : plane * inSize + bestIndex;
  });
  return Status::Ok();
}

}  // namespace

Status maxPool(KernelContext& ctx) {
  switch (ctx.inputs[0]->dtype()) {
    case DataType::kUInt8:
      return maxPoolTyped<uint8_t>(ctx);
    case DataType::kInt8:
      return maxPoolTyped<int8_t>(ctx);
    default:
      EI_RETURN_IF_ERROR(requireFloat32(ctx));
      return maxPoolTyped<float>(ctx);
  }
}

Status averagePool(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  PoolPlan p;
  EI_RETURN_IF_ERROR(makePoolPlan(ctx, &p));
  const bool includePad = ctx.attrs().getInt("count_include_pad", 0) == 1;
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  const int64_t inSize = p.inSize();
  const int64_t outSize = p.outSize();
  forEachOutput(p, [&](int64_t plane, int64_t od, int64_t oh, int64_t ow, int64_t o) {
    const float* xp = x + plane * inSize;
    double sum = 0.0;
    int64_t count = 0;
    const int64_t padded = forEachTap(p, od, oh, ow, [&](int64_t id, int64_t ih, int64_t iw) {
      sum += xp[(id * p.in[1] + ih) * p.in[2] + iw];
      ++count;
    });
    const int64_t divisor = includePad ? padded : count;
    y[plane * outSize + o] =
        divisor > 0 ? static_cast<float>(sum / static_cast<double>(divisor)) : 0.f;
  });
  return Status::Ok();
}

Status lpPool(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  PoolPlan p;
  EI_RETURN_IF_ERROR(makePoolPlan(ctx, &p));
  const int64_t pNorm = ctx.attrs().getInt("p", 2);
  if (pNorm < 1) return ctx.error(ErrorCode::kInvalidModel, "LpPool p must be >= 1");
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  const int64_t inSize = p.inSize();
  const int64_t outSize = p.outSize();
  forEachOutput(p, [&](int64_t plane, int64_t od, int64_t oh, int64_t ow, int64_t o) {
    const float* xp = x + plane * inSize;
    double sum = 0.0;
    forEachTap(p, od, oh, ow, [&](int64_t id, int64_t ih, int64_t iw) {
      const double v = std::fabs(static_cast<double>(xp[(id * p.in[1] + ih) * p.in[2] + iw]));
      sum += pNorm == 1 ? v : pNorm == 2 ? v * v : std::pow(v, static_cast<double>(pNorm));
    });
    const double r = pNorm == 1   ? sum
                     : pNorm == 2 ? std::sqrt(sum)
                                  : std::pow(sum, 1.0 / static_cast<double>(pNorm));
    y[plane * outSize + o] = static_cast<float>(r);
  });
  return Status::Ok();
}

Status globalAveragePool(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  const Shape& xs = ctx.inputs[0]->shape();
  const int64_t planes = xs[0] * xs[1];
  const int64_t size = xs.span(2, xs.rank());
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane) {
    double sum = 0.0;
    for (int64_t i = 0; i < size; ++i) sum += x[plane * size + i];
    y[plane] = size > 0 ? static_cast<float>(sum / static_cast<double>(size)) : 0.f;
  }
  return Status::Ok();
}

Status globalMaxPool(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  const Shape& xs = ctx.inputs[0]->shape();
  const int64_t planes = xs[0] * xs[1];
  const int64_t size = xs.span(2, xs.rank());
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
#pragma omp parallel for schedule(static)
  for (int64_t plane = 0; plane < planes; ++plane) {
    float best = std::numeric_limits<float>::lowest();
    for (int64_t i = 0; i < size; ++i) best = std::max(best, x[plane * size + i]);
    y[plane] = best;
  }
  return Status::Ok();
}

}  // namespace edgeinfer::ref::nn
