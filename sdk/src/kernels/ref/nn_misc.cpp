// PRelu on the CPU: y = x < 0 ? slope * x : x, with the slope broadcast unidirectionally to
// x (numpy rules, e.g. a per-channel slope of shape [C, 1, 1]).
#include <vector>

#include "kernels/ref/nn_common.h"

namespace edgeinfer::ref::nn {

Status prelu(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  const Shape& xs = ctx.inputs[0]->shape();
  const Shape& ss = ctx.inputs[1]->shape();
  if (ss.rank() > xs.rank())
    return ctx.error(ErrorCode::kInvalidModel, "slope has a higher rank than the input");
  const std::vector<int64_t> strides = broadcastStrides(ss, xs);
  const float* x = ctx.inputs[0]->data<float>();
  const float* slope = ctx.inputs[1]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  const int64_t total = xs.numel();
  // Rows along the last dim share their slope offset except along that dim.
  const int64_t last = xs.rank() ? xs[xs.rank() - 1] : 1;
  const int64_t lastStride = xs.rank() ? strides.back() : 0;
  const int64_t rows = last > 0 ? total / last : 0;
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t base = broadcastOffset(r * last, xs, strides);
    for (int64_t i = 0; i < last; ++i) {
      const float v = x[r * last + i];
      y[r * last + i] = v < 0.f ? slope[base + i * lastStride] * v : v;
    }
  }
  return Status::Ok();
}

}  // namespace edgeinfer::ref::nn
