// DepthToSpace and SpaceToDepth on the CPU (NCHW, block size b).
//   DepthToSpace DCR: y[n][c][h*b + i][w*b + j] = x[n][(i*b + j) * C' + c][h][w]
//   DepthToSpace CRD: y[n][c][h*b + i][w*b + j] = x[n][c * b*b + i*b + j][h][w]
//   SpaceToDepth:     y[n][(i*b + j) * C + c][h][w] = x[n][c][h*b + i][w*b + j]
// (C' = C / b^2 is the output channel count of DepthToSpace.) Pure data movement, so any
// element type is handled by copying bytes.
#include <cstring>

#include "kernels/ref/nn_common.h"

namespace edgeinfer::ref::nn {

Status depthToSpace(KernelContext& ctx) {
  const Tensor& xt = *ctx.inputs[0];
  const Shape& xs = xt.shape();
  const int64_t b = ctx.attrs().getInt("blocksize", 1);
  const bool crd = ctx.attrs().getString("mode", "DCR") == "CRD";
  if (xs.rank() != 4 || b < 1 || xs[1] % (b * b) != 0)
    return ctx.error(ErrorCode::kInvalidModel,
                     "DepthToSpace needs a 4-D input with C divisible by b^2");
  const int64_t n = xs[0], c = xs[1] / (b * b), h = xs[2], w = xs[3];
  const size_t elem = dataTypeSize(xt.dtype());
  const char* x = static_cast<const char*>(xt.raw());
  char* y = static_cast<char*>(ctx.outputs[0]->raw());
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < n * c; ++nc) {
    const int64_t in = nc / c, ic = nc % c;
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < b; ++j) {
        const int64_t srcC = crd ? ic * b * b + i * b + j : (i * b + j) * c + ic;
        for (int64_t hh = 0; hh < h; ++hh)
          for (int64_t ww = 0; ww < w; ++ww) {
            const int64_t src = ((in * c * b * b + srcC) * h + hh) * w + ww;
            const int64_t dst = ((in * c + ic) * h * b + hh * b + i) * w * b + ww * b + j;
            std::memcpy(y + dst * static_cast<int64_t>(elem), x + src * static_cast<int64_t>(elem),
                        elem);
          }
      }
  }
  return Status::Ok();
}

Status spaceToDepth(KernelContext& ctx) {
  const Tensor& xt = *ctx.inputs[0];
  const Shape& xs = xt.shape();
  const int64_t b = ctx.attrs().getInt("blocksize", 1);
  if (xs.rank() != 4 || b < 1 || xs[2] % b != 0 || xs[3] % b != 0)
    return ctx.error(ErrorCode::kInvalidModel,
                     "SpaceToDepth needs a 4-D input with H, W divisible by b");
  const int64_t n = xs[0], c = xs[1], h = xs[2] / b, w = xs[3] / b;
  const size_t elem = dataTypeSize(xt.dtype());
  const char* x = static_cast<const char*>(xt.raw());
  char* y = static_cast<char*>(ctx.outputs[0]->raw());
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < n * c; ++nc) {
    const int64_t in = nc / c, ic = nc % c;
    for (int64_t i = 0; i < b; ++i)
      for (int64_t j = 0; j < b; ++j) {
        const int64_t dstC = (i * b + j) * c + ic;
        for (int64_t hh = 0; hh < h; ++hh)
          for (int64_t ww = 0; ww < w; ++ww) {
            const int64_t src = ((in * c + ic) * h * b + hh * b + i) * w * b + ww * b + j;
            const int64_t dst = ((in * c * b * b + dstC) * h + hh) * w + ww;
            std::memcpy(y + dst * static_cast<int64_t>(elem), x + src * static_cast<int64_t>(elem),
                        elem);
          }
      }
  }
  return Status::Ok();
}

}  // namespace edgeinfer::ref::nn
