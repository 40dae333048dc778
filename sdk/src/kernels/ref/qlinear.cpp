// CPU reference kernels for MatMulInteger, ConvInteger, QLinearMatMul and QLinearConv, in exact
// integer arithmetic: operands are widened to int32 and their zero points subtracted, products
// are accumulated in int64 (then wrapped to int32 for the *Integer ops' int32 output).
// The QLinear ops requantise as the ONNX reference does:
//   y = saturate(round_half_even(acc * float32(x_scale * w_scale / y_scale)) + y_zero_point)
// with the product computed in double. Zero points and scales are per tensor (one element) or:
//   MatMul: A's per row ([M] or [..., M, 1]), B's per column ([N] or [..., 1, N]);
//   Conv:   W's per output channel ([M]); X's per tensor only.
// Conv geometry (output size, pads) comes from graph/ops/conv_geometry.h, as for Conv; padded
// positions contribute nothing (they hold the zero point).
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "graph/ops/conv_geometry.h"
#include "kernels/ref/elementwise_common.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer::ref {
namespace {

/// The value of an optional per-tensor / per-row / per-column parameter `p` for every element
/// of a tensor of shape `s` (p broadcast to s; a 1-D p of length s[-2] != s[-1] runs along rows
/// when `rows` is true).
Status expandParam(KernelContext& ctx, const Tensor* p, const Shape& s, bool rows,
                   std::vector<double>* out, const std::string& what) {
  const int64_t n = s.numel();
  out->assign(static_cast<size_t>(n), 0.0);
  if (!p) return Status::Ok();
  if (p->numel() == 1) {
    out->assign(static_cast<size_t>(n), p->getAsDouble(0));
    return Status::Ok();
  }
  Shape ps = p->shape();
  if (rows && ps.rank() == 1 && s.rank() >= 2) ps = Shape({ps[0], 1});
  if (!broadcastsTo(ps, s))
    return ctx.error(ErrorCode::kInvalidArgument,
                     what + " of shape " + p->shape().toString() + " does not fit " + s.toString());
  const BroadcastIndexer bi(ps, s);
  for (int64_t i = 0; i < n; ++i) (*out)[static_cast<size_t>(i)] = p->getAsDouble(bi(i));
  return Status::Ok();
}

/// The requantisation shared by QLinearMatMul and QLinearConv.
template <typename Q>
Q requantize(int64_t acc, float multiplier, int64_t zeroPoint) {
  const double v = std::nearbyint(static_cast<double>(acc) * static_cast<double>(multiplier)) +
                   static_cast<double>(zeroPoint);
  const double lo = std::numeric_limits<Q>::lowest(), hi = std::numeric_limits<Q>::max();
  return static_cast<Q>(std::min(std::max(v, lo), hi));
}

Status storeRequantized(KernelContext& ctx, Tensor& y, int64_t i, int64_t acc, float multiplier,
                        int64_t zp) {
  if (y.dtype() == DataType::kUInt8)
    y.data<uint8_t>()[i] = requantize<uint8_t>(acc, multiplier, zp);
  else if (y.dtype() == DataType::kInt8)
    y.data<int8_t>()[i] = requantize<int8_t>(acc, multiplier, zp);
  else
    return ctx.error(ErrorCode::kUnsupported, "requantize to an unsupported type");
  return Status::Ok();
}

// ---- MatMulInteger, QLinearMatMul -----------------------------------------------------------

/// Integer matmul of a - aZp and b - bZp with numpy broadcasting. Calls
/// store(outIndex, acc, aElem, bElem) with the flat indices of A[.., m, 0] and B[.., 0, n] (for
/// per-row / per-column scales).
template <typename Store>
Status integerMatMul(KernelContext& ctx, const Tensor& a, const Tensor* aZp, const Tensor& b,
                     const Tensor* bZp, const Tensor& y, Store&& store) {
  Shape sa = a.shape(), sb = b.shape();
  if (sa.rank() == 0 || sb.rank() == 0)
    return ctx.error(ErrorCode::kInvalidArgument, "matmul operands cannot be scalars");
  if (sa.rank() == 1) sa = Shape({1, sa[0]});
  if (sb.rank() == 1) sb = Shape({sb[0], 1});
  const int64_t M = sa[sa.rank() - 2], K = sa[sa.rank() - 1], N = sb[sb.rank() - 1];
  if (sb[sb.rank() - 2] != K)
    return ctx.error(ErrorCode::kInvalidArgument, "matmul inner dims differ");
  const Shape ba(std::vector<int64_t>(sa.dims().begin(), sa.dims().end() - 2));
  const Shape bb(std::vector<int64_t>(sb.dims().begin(), sb.dims().end() - 2));
  std::vector<int64_t> bdims(std::max(ba.rank(), bb.rank()), 1);
  for (size_t i = 0; i < bdims.size(); ++i) {
    const int64_t x = i + ba.rank() >= bdims.size() ? ba[i + ba.rank() - bdims.size()] : 1;
    const int64_t z = i + bb.rank() >= bdims.size() ? bb[i + bb.rank() - bdims.size()] : 1;
    if (x != z && x != 1 && z != 1)
      return ctx.error(ErrorCode::kInvalidArgument, "matmul batch dims do not broadcast");
    bdims[i] = x == 1 ? z : x;
  }
  const Shape batch(bdims);
  const int64_t batches = batch.numel();
  if (y.numel() != batches * M * N)
    return ctx.error(ErrorCode::kInvalidArgument, "matmul output has the wrong size");
  std::vector<double> za, zb;
  EI_RETURN_IF_ERROR(expandParam(ctx, aZp, sa, true, &za, "a_zero_point"));
  EI_RETURN_IF_ERROR(expandParam(ctx, bZp, sb, false, &zb, "b_zero_point"));
  const BroadcastIndexer ia(ba, batch), ib(bb, batch);
  for (int64_t t = 0; t < batches; ++t) {
    const int64_t oa = ia(t) * M * K, ob = ib(t) * K * N;
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n) {
        int64_t acc = 0;
        for (int64_t k = 0; k < K; ++k) {
          const int64_t pa = oa + m * K + k, pb = ob + k * N + n;
          acc += (a.getAsInt64(pa) - static_cast<int64_t>(za[static_cast<size_t>(pa)])) *
                 (b.getAsInt64(pb) - static_cast<int64_t>(zb[static_cast<size_t>(pb)]));
        }
        EI_RETURN_IF_ERROR(store((t * M + m) * N + n, acc, oa + m * K, ob + n));
      }
  }
  return Status::Ok();
}

Status matMulIntegerKernel(KernelContext& ctx) {
  Tensor& y = *ctx.outputs[0];
  int32_t* out = y.data<int32_t>();
  return integerMatMul(ctx, *ctx.inputs[0], ctx.hasInput(2) ? ctx.inputs[2] : nullptr,
                       *ctx.inputs[1], ctx.hasInput(3) ? ctx.inputs[3] : nullptr, y,
                       [&](int64_t i, int64_t acc, int64_t, int64_t) {
                         out[i] = static_cast<int32_t>(acc);  // int32 wrap, as int32 math
                         return Status::Ok();
                       });
}

Status qlinearMatMulKernel(KernelContext& ctx) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[3];
  Tensor& y = *ctx.outputs[0];
  Shape sa = a.shape(), sb = b.shape();
  if (sa.rank() == 1) sa = Shape({1, sa[0]});
  if (sb.rank() == 1) sb = Shape({sb[0], 1});
  std::vector<double> scaleA, scaleB;
  EI_RETURN_IF_ERROR(expandParam(ctx, ctx.inputs[1], sa, true, &scaleA, "a_scale"));
  EI_RETURN_IF_ERROR(expandParam(ctx, ctx.inputs[4], sb, false, &scaleB, "b_scale"));
  const float ys = static_cast<float>(ctx.inputs[6]->getAsDouble(0));
  const int64_t yzp = ctx.inputs[7]->getAsInt64(0);
  return integerMatMul(ctx, a, ctx.inputs[2], b, ctx.inputs[5], y,
                       [&](int64_t i, int64_t acc, int64_t ea, int64_t eb) {
                         const float mult = static_cast<float>(scaleA[static_cast<size_t>(ea)]) *
                                            static_cast<float>(scaleB[static_cast<size_t>(eb)]) /
                                            ys;
                         return storeRequantized(ctx, y, i, acc, mult, yzp);
                       });
}

// ---- ConvInteger, QLinearConv --------------------------------------------------------------

/// Integer convolution of (x - xZp) with (w - wZp[m]) plus bias[m]; calls store(outIndex, acc,
/// outChannel).
template <typename Store>
Status integerConv(KernelContext& ctx, const Tensor& x, const Tensor* xZp, const Tensor& w,
                   const Tensor* wZp, const Tensor* bias, const Tensor& y, Store&& store) {
  const Shape& xs = x.shape();
  const Shape& ws = w.shape();
  if (xs.rank() < 3 || ws.rank() != xs.rank())
    return ctx.error(ErrorCode::kInvalidArgument, "conv input and weight ranks differ");
  const size_t sr = xs.rank() - 2;
  const int64_t group = ctx.attrs().getInt("group", 1);
  const int64_t N = xs[0], C = xs[1], M = ws[0], CG = ws[1];
  if (group < 1 || C != CG * group || M % group != 0)
    return ctx.error(ErrorCode::kInvalidArgument, "conv channels do not match group");
  graph::WindowAttrs wa;
  const std::vector<int64_t> kernel(ws.dims().begin() + 2, ws.dims().end());
  EI_RETURN_IF_ERROR(graph::readWindowAttrs(ctx.attrs(), sr, kernel, &wa));
  graph::WindowDims d;
  EI_RETURN_IF_ERROR(graph::computeWindowDims(
      wa, std::vector<int64_t>(xs.dims().begin() + 2, xs.dims().end()), &d));
  std::vector<int64_t> yd = {N, M};
  yd.insert(yd.end(), d.out.begin(), d.out.end());
  if (y.shape() != Shape(yd))
    return ctx.error(ErrorCode::kInvalidArgument, "conv output shape disagrees");
  if (wZp && wZp->numel() != 1 && wZp->numel() != M)
    return ctx.error(ErrorCode::kInvalidArgument, "w_zero_point must be per tensor or channel");
  if (bias && bias->numel() != M)
    return ctx.error(ErrorCode::kInvalidArgument, "bias must have one value per channel");
  if (xZp && xZp->numel() != 1)
    return ctx.error(ErrorCode::kInvalidArgument, "x_zero_point must be per tensor");
  const int64_t xz = xZp ? xZp->getAsInt64(0) : 0;
  const Shape outSp(d.out), inSp(d.in), kSp(kernel);
  const int64_t outSize = outSp.numel(), inSize = inSp.numel(), kSize = kSp.numel();
  // Kernel offsets per spatial dim, as coordinate tables.
  std::vector<std::vector<int64_t>> kCoord(static_cast<size_t>(kSize), std::vector<int64_t>(sr));
  for (int64_t k = 0; k < kSize; ++k) {
    int64_t rem = k;
    for (size_t s = sr; s-- > 0;) {
      kCoord[static_cast<size_t>(k)][s] = rem % kernel[s];
      rem /= kernel[s];
    }
  }
  const std::vector<int64_t> inStrides = contiguousStrides(inSp);
  const int64_t mPerGroup = M / group;
  std::vector<int64_t> pos(sr);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m) {
      const int64_t g = m / mPerGroup;
      const int64_t wz = wZp ? wZp->getAsInt64(wZp->numel() == 1 ? 0 : m) : 0;
      for (int64_t o = 0; o < outSize; ++o) {
        int64_t rem = o;
        for (size_t s = sr; s-- > 0;) {
          pos[s] = (rem % d.out[s]) * wa.strides[s] - d.padBegin[s];
          rem /= d.out[s];
        }
        int64_t acc = bias ? bias->getAsInt64(m) : 0;
        for (int64_t k = 0; k < kSize; ++k) {
          int64_t off = 0;
          bool inside = true;
          for (size_t s = 0; s < sr && inside; ++s) {
            const int64_t p = pos[s] + kCoord[static_cast<size_t>(k)][s] * wa.dilations[s];
            inside = p >= 0 && p < d.in[s];
            off += p * inStrides[s];
          }
          if (!inside) continue;  // padding holds the zero point: contributes 0
          for (int64_t c = 0; c < CG; ++c) {
            const int64_t xi = (n * C + g * CG + c) * inSize + off;
            const int64_t wi = (m * CG + c) * kSize + k;
            acc += (x.getAsInt64(xi) - xz) * (w.getAsInt64(wi) - wz);
          }
        }
        EI_RETURN_IF_ERROR(store((n * M + m) * outSize + o, acc, m));
      }
    }
  return Status::Ok();
}

Status convIntegerKernel(KernelContext& ctx) {
  Tensor& y = *ctx.outputs[0];
  int32_t* out = y.data<int32_t>();
  return integerConv(ctx, *ctx.inputs[0], ctx.hasInput(2) ? ctx.inputs[2] : nullptr, *ctx.inputs[1],
                     ctx.hasInput(3) ? ctx.inputs[3] : nullptr, nullptr, y,
                     [&](int64_t i, int64_t acc, int64_t) {
                       out[i] = static_cast<int32_t>(acc);
                       return Status::Ok();
                     });
}

Status qlinearConvKernel(KernelContext& ctx) {
  Tensor& y = *ctx.outputs[0];
  const Tensor& wScale = *ctx.inputs[4];
  const int64_t M = ctx.inputs[3]->shape().rank() > 0 ? ctx.inputs[3]->shape()[0] : 0;
  if (wScale.numel() != 1 && wScale.numel() != M)
    return ctx.error(ErrorCode::kInvalidArgument, "w_scale must be per tensor or channel");
  const float xs = static_cast<float>(ctx.inputs[1]->getAsDouble(0));
  const float ys = static_cast<float>(ctx.inputs[6]->getAsDouble(0));
  const int64_t yzp = ctx.inputs[7]->getAsInt64(0);
  return integerConv(
      ctx, *ctx.inputs[0], ctx.inputs[2], *ctx.inputs[3], ctx.inputs[5],
      ctx.hasInput(8) ? ctx.inputs[8] : nullptr, y, [&](int64_t i, int64_t acc, int64_t m) {
        const float ws = static_cast<float>(wScale.getAsDouble(wScale.numel() == 1 ? 0 : m));
        return storeRequantized(ctx, y, i, acc, xs * ws / ys, yzp);
      });
}

}  // namespace

void registerQLinearKernels(KernelRegistry& r) {
  r.add("", "MatMulInteger", matMulIntegerKernel);
  r.add("", "ConvInteger", convIntegerKernel);
  r.add("", "QLinearMatMul", qlinearMatMulKernel);
  r.add("", "QLinearConv", qlinearConvKernel);
}

}  // namespace edgeinfer::ref
