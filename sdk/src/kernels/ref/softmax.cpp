// Softmax, LogSoftmax and Hardmax on the CPU.
//
// Canonical form (graph/op_schema.h): attribute `coerce_2d` = 1 selects the opset < 13
// semantics, where the input is viewed as a 2-D matrix [prod(dims[:axis]), prod(dims[axis:])]
// and each row is normalised (default axis 1). Otherwise the op normalises along the single
// dim `axis` (default -1). Both are a loop over (outer, inner) with a reduction of length
// `len` and stride `inner` in between.
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/ref/nn_common.h"

namespace edgeinfer::ref::nn {
namespace {

enum class SoftmaxKind { kSoftmax, kLogSoftmax, kHardmax };

struct SoftmaxView {
  int64_t outer = 1, len = 1, inner = 1;
};

Status softmaxView(const KernelContext& ctx, SoftmaxView* v) {
  const Shape& xs = ctx.inputs[0]->shape();
  const int64_t rank = static_cast<int64_t>(xs.rank());
  const bool coerce = ctx.attrs().getInt("coerce_2d", 0) == 1;
  int64_t axis = ctx.attrs().getInt("axis", coerce ? 1 : -1);
  if (axis < 0) axis += rank;
  if (coerce) {
    if (axis < 0 || axis > rank) return ctx.error(ErrorCode::kInvalidModel, "axis out of range");
    v->outer = xs.span(0, static_cast<size_t>(axis));
    v->len = xs.span(static_cast<size_t>(axis), xs.rank());
    v->inner = 1;
  } else {
    if (axis < 0 || axis >= rank) return ctx.error(ErrorCode::kInvalidModel, "axis out of range");
    v->outer = xs.span(0, static_cast<size_t>(axis));
    v->len = xs[static_cast<size_t>(axis)];
    v->inner = xs.span(static_cast<size_t>(axis) + 1, xs.rank());
  }
  return Status::Ok();
}

Status softmaxFamily(KernelContext& ctx, SoftmaxKind kind) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  SoftmaxView v;
  EI_RETURN_IF_ERROR(softmaxView(ctx, &v));
  const float* x = ctx.inputs[0]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  const int64_t len = v.len;
  const int64_t inner = v.inner;
#pragma omp parallel for schedule(static)
  for (int64_t oi = 0; oi < v.outer * inner; ++oi) {
    const int64_t base = (oi / inner) * len * inner + oi % inner;
    const float* xs = x + base;
    float* ys = y + base;
    float maxV = -std::numeric_limits<float>::infinity();
    int64_t argMax = 0;
    for (int64_t a = 0; a < len; ++a) {
      if (xs[a * inner] > maxV) {  // first occurrence wins (Hardmax)
        maxV = xs[a * inner];
        argMax = a;
      }
    }
    if (kind == SoftmaxKind::kHardmax) {
      for (int64_t a = 0; a < len; ++a) ys[a * inner] = a == argMax ? 1.f : 0.f;
      continue;
    }
    // Subtract the max for stability; sum the exponentials in double.
    double sum = 0.0;
    for (int64_t a = 0; a < len; ++a) sum += std::exp(static_cast<double>(xs[a * inner]) - maxV);
    if (kind == SoftmaxKind::kSoftmax) {
      for (int64_t a = 0; a < len; ++a)
        ys[a * inner] =
            static_cast<float>(std::exp(static_cast<double>(xs[a * inner]) - maxV) / sum);
    } else {
      const double logSum = std::log(sum);
      for (int64_t a = 0; a < len; ++a)
        ys[a * inner] = static_cast<float>(static_cast<double>(xs[a * inner]) - maxV - logSum);
    }
  }
  return Status::Ok();
}

}  // namespace

Status softmax(KernelContext& ctx) {
  return softmaxFamily(ctx, SoftmaxKind::kSoftmax);
}
Status logSoftmax(KernelContext& ctx) {
  return softmaxFamily(ctx, SoftmaxKind::kLogSoftmax);
}
Status hardmax(KernelContext& ctx) {
  return softmaxFamily(ctx, SoftmaxKind::kHardmax);
}

}  // namespace edgeinfer::ref::nn
