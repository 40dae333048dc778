// Conv, FusedConv and ConvTranspose on the CPU, for 1, 2 and 3 spatial dims.
//
// 1-D and 2-D problems are promoted to 3-D with leading spatial dims of size 1 (kernel 1,
// stride 1, no padding), so one set of loops serves all three ranks.
//   - Depthwise (group == C_in == C_out): a direct loop per channel.
//   - Everything else: per group, im2col into a [C/g * k, out] matrix, then a GEMM in i-k-j
//     order (the inner loop runs along a contiguous output row, so it vectorises). 1x1
//     convolutions with stride 1 and no padding use the input as the matrix directly.
//   - ConvTranspose: per group, col = W^T X (the same GEMM), then col2im scatters col into
//     the output.
// The bias, the FusedConv residual Z and the activation are applied to each output row once
// the convolution sum is complete, so FusedConv computes act((conv + B) + Z) exactly as the
// unfused Conv -> Add -> activation chain does.
#include <algorithm>
#include <vector>

#include "graph/ops/conv_geometry.h"
#include "kernels/ref/nn_common.h"

namespace edgeinfer::ref::nn {
namespace {

constexpr size_t kMaxSpatial = 3;

/// A convolution problem with exactly three spatial dims.
struct ConvPlan {
  int64_t batch = 0, inC = 0, outC = 0, group = 1;
  int64_t in[kMaxSpatial], out[kMaxSpatial], k[kMaxSpatial], s[kMaxSpatial], d[kMaxSpatial],
      pad[kMaxSpatial];  // pad: begin padding (the end padding is implied by `out`)

  int64_t inSize() const { return in[0] * in[1] * in[2]; }
  int64_t outSize() const { return out[0] * out[1] * out[2]; }
  int64_t kernelSize() const { return k[0] * k[1] * k[2]; }
};

Status makePlan(const KernelContext& ctx, bool transpose, ConvPlan* p) {
  const Shape& xs = ctx.inputs[0]->shape();
  const Shape& ws = ctx.inputs[1]->shape();
  const Shape& ys = ctx.outputs[0]->shape();
  const size_t rank = xs.rank();
  if (rank < 3 || ws.rank() != rank || ys.rank() != rank)
    return ctx.error(ErrorCode::kInvalidModel, "X " + xs.toString() + " and W " + ws.toString() +
                                                   " must have the same rank >= 3");
  const size_t spatial = rank - 2;
  if (spatial > kMaxSpatial)
    return ctx.error(
        ErrorCode::kUnsupported,
        "the CPU reference supports 1 to 3 spatial dims, got " + std::to_string(spatial));
  graph::WindowAttrs wa;
  const std::vector<int64_t> wk(ws.dims().begin() + 2, ws.dims().end());
  const std::vector<int64_t> xin(xs.dims().begin() + 2, xs.dims().end());
  EI_RETURN_IF_ERROR(graph::readWindowAttrs(ctx.attrs(), spatial, wk, &wa).at(ctx.node.location()));
  wa.ceilMode = false;
  graph::WindowDims dims;
  if (transpose) {
    graph::ConvTransposeAttrs ta;
    EI_RETURN_IF_ERROR(graph::readConvTransposeAttrs(ctx.attrs(), wa, &ta));
    EI_RETURN_IF_ERROR(graph::computeConvTransposeDims(wa, ta, xin, &dims));
  } else {
    EI_RETURN_IF_ERROR(graph::computeWindowDims(wa, xin, &dims));
  }
  p->batch = xs[0];
  p->inC = xs[1];
  p->outC = ys[1];
  p->group = ctx.attrs().getInt("group", 1);
  if (p->group < 1 || p->inC % p->group != 0 || p->outC % p->group != 0)
    return ctx.error(ErrorCode::kInvalidModel, "group does not divide the channels");
  const size_t lead = kMaxSpatial - spatial;
  for (size_t i = 0; i < kMaxSpatial; ++i) {
    if (i < lead) {
      p->in[i] = p->out[i] = p->k[i] = p->s[i] = p->d[i] = 1;
      p->pad[i] = 0;
      continue;
    }
    const size_t j = i - lead;
    p->in[i] = xin[j];
    p->out[i] = dims.out[j];
    p->k[i] = wk[j];
    p->s[i] = wa.strides[j];
    p->d[i] = wa.dilations[j];
    p->pad[i] = dims.padBegin[j];
    if (p->out[i] != ys[j + 2])
      return ctx.error(ErrorCode::kInternal, "output shape does not match the conv geometry");
  }
  return Status::Ok();
}

/// Adds the bias and the residual to one output channel and applies the activation.
void finishChannel(float* y, int64_t size, float bias, const float* z, const FusedActivation& act) {
  if (z) {
    for (int64_t i = 0; i < size; ++i) y[i] = (y[i] + bias) + z[i];
  } else {
    for (int64_t i = 0; i < size; ++i) y[i] = y[i] + bias;
  }
  activateInPlace(y, size, act);
}

/// Unfolds the input windows of one group: col[r][p] with r = (c, kd, kh, kw) and p the
/// output position; positions in the padding are zero.
void im2col(const ConvPlan& p, const float* x, int64_t channels, float* col) {
  const int64_t ks = p.kernelSize();
  const int64_t outSize = p.outSize();
#pragma omp parallel for schedule(static)
  for (int64_t r = 0; r < channels * ks; ++r) {
    const int64_t c = r / ks;
    const int64_t kd = (r / (p.k[1] * p.k[2])) % p.k[0];
    const int64_t kh = (r / p.k[2]) % p.k[1];
    const int64_t kw = r % p.k[2];
    const float* xc = x + c * p.inSize();
    float* dst = col + r * outSize;
    for (int64_t od = 0; od < p.out[0]; ++od) {
      const int64_t id = od * p.s[0] - p.pad[0] + kd * p.d[0];
      for (int64_t oh = 0; oh < p.out[1]; ++oh) {
        const int64_t ih = oh * p.s[1] - p.pad[1] + kh * p.d[1];
        float* drow = dst + (od * p.out[1] + oh) * p.out[2];
        if (id < 0 || id >= p.in[0] || ih < 0 || ih >= p.in[1]) {
          std::fill(drow, drow + p.out[2], 0.f);
          continue;
        }
        const float* srow = xc + (id * p.in[1] + ih) * p.in[2];
        for (int64_t ow = 0; ow < p.out[2]; ++ow) {
          const int64_t iw = ow * p.s[2] - p.pad[2] + kw * p.d[2];
          drow[ow] = (iw >= 0 && iw < p.in[2]) ? srow[iw] : 0.f;
        }
      }
    }
  }
}

/// Depthwise convolution (one filter per channel): a direct loop, one output row at a time
/// (so the row and the few input rows it reads stay in L1). For each kernel column the range
/// of output columns whose input column lies inside the image is computed up front, so the
/// innermost loop has no bounds checks.
void depthwiseConv(const ConvPlan& p, const float* x, const float* w, float* y) {
  const int64_t planes = p.batch * p.inC;
  const int64_t inSize = p.inSize();
  const int64_t outSize = p.outSize();
  const int64_t ks = p.kernelSize();
  std::vector<int64_t> owBegin(static_cast<size_t>(p.k[2])), owEnd(static_cast<size_t>(p.k[2]));
  for (int64_t kw = 0; kw < p.k[2]; ++kw) {
    const int64_t off = kw * p.d[2] - p.pad[2];  // iw = ow * s + off
    owBegin[static_cast<size_t>(kw)] = std::max<int64_t>(0, ceilDivInt(-off, p.s[2]));
    owEnd[static_cast<size_t>(kw)] = std::min(p.out[2], floorDiv(p.in[2] - 1 - off, p.s[2]) + 1);
  }
#pragma omp parallel for schedule(static)
  for (int64_t nc = 0; nc < planes; ++nc) {
    const int64_t c = nc % p.inC;
    const float* xc = x + nc * inSize;
    const float* wc = w + c * ks;
    float* yc = y + nc * outSize;
    for (int64_t od = 0; od < p.out[0]; ++od) {
      for (int64_t oh = 0; oh < p.out[1]; ++oh) {
        float* yrow = yc + (od * p.out[1] + oh) * p.out[2];
        std::fill(yrow, yrow + p.out[2], 0.f);
        for (int64_t kd = 0; kd < p.k[0]; ++kd) {
          const int64_t id = od * p.s[0] - p.pad[0] + kd * p.d[0];
          if (id < 0 || id >= p.in[0]) continue;
          for (int64_t kh = 0; kh < p.k[1]; ++kh) {
            const int64_t ih = oh * p.s[1] - p.pad[1] + kh * p.d[1];
            if (ih < 0 || ih >= p.in[1]) continue;
            const float* xrow = xc + (id * p.in[1] + ih) * p.in[2];
            for (int64_t kw = 0; kw < p.k[2]; ++kw) {
              const float wv = wc[(kd * p.k[1] + kh) * p.k[2] + kw];
              const int64_t off = kw * p.d[2] - p.pad[2];
              const int64_t end = owEnd[static_cast<size_t>(kw)];
              for (int64_t ow = owBegin[static_cast<size_t>(kw)]; ow < end; ++ow)
                yrow[ow] += wv * xrow[ow * p.s[2] + off];
            }
          }
        }
      }
    }
  }
}

/// Y = act(conv(X, W) + B + Z); Z and B may be null.
Status convForward(KernelContext& ctx, const float* bias, const float* z,
                   const FusedActivation& act) {
  ConvPlan p;
  EI_RETURN_IF_ERROR(makePlan(ctx, /*transpose=*/false, &p));
  const float* x = ctx.inputs[0]->data<float>();
  const float* w = ctx.inputs[1]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  const int64_t inSize = p.inSize();
  const int64_t outSize = p.outSize();
  const int64_t cg = p.inC / p.group;   // input channels per group
  const int64_t mg = p.outC / p.group;  // output channels per group
  const int64_t kRows = cg * p.kernelSize();

  if (p.group == p.inC && p.group == p.outC) {
    depthwiseConv(p, x, w, y);
  } else {
    const bool pointwise = p.kernelSize() == 1 && p.s[0] == 1 && p.s[1] == 1 && p.s[2] == 1 &&
                           p.pad[0] == 0 && p.pad[1] == 0 && p.pad[2] == 0;
    std::vector<float> col;
    if (!pointwise) col.resize(static_cast<size_t>(kRows * outSize));
    for (int64_t n = 0; n < p.batch; ++n) {
      for (int64_t g = 0; g < p.group; ++g) {
        const float* xg = x + (n * p.inC + g * cg) * inSize;
        const float* matrix = xg;
        if (!pointwise) {
          im2col(p, xg, cg, col.data());
          matrix = col.data();
        }
        gemmRowMajor(w + g * mg * kRows, matrix, y + (n * p.outC + g * mg) * outSize, mg, kRows,
                     outSize);
      }
    }
  }
  const int64_t planes = p.batch * p.outC;
#pragma omp parallel for schedule(static)
  for (int64_t nm = 0; nm < planes; ++nm) {
    const float b = bias ? bias[nm % p.outC] : 0.f;
    finishChannel(y + nm * outSize, outSize, b, z ? z + nm * outSize : nullptr, act);
  }
  return Status::Ok();
}

}  // namespace

Status conv(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  const float* bias = ctx.hasInput(2) ? ctx.inputs[2]->data<float>() : nullptr;
  return convForward(ctx, bias, nullptr, FusedActivation{});
}

Status fusedConv(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  FusedActivation act;
  EI_RETURN_IF_ERROR(readFusedActivation(ctx, &act));
  const float* bias = ctx.hasInput(2) ? ctx.inputs[2]->data<float>() : nullptr;
  const float* z = nullptr;
  if (ctx.hasInput(3)) {
    if (ctx.inputs[3]->shape() != ctx.outputs[0]->shape())
      return ctx.error(ErrorCode::kInvalidModel, "residual Z " + ctx.inputs[3]->shape().toString() +
                                                     " must have the output shape " +
                                                     ctx.outputs[0]->shape().toString());
    z = ctx.inputs[3]->data<float>();
  }
  return convForward(ctx, bias, z, act);
}

Status convTranspose(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  ConvPlan p;
  EI_RETURN_IF_ERROR(makePlan(ctx, /*transpose=*/true, &p));
  const float* x = ctx.inputs[0]->data<float>();
  const float* w = ctx.inputs[1]->data<float>();  // [C, M / group, k...]
  const float* bias = ctx.hasInput(2) ? ctx.inputs[2]->data<float>() : nullptr;
  float* y = ctx.outputs[0]->data<float>();
  const int64_t inSize = p.inSize();
  const int64_t outSize = p.outSize();
  const int64_t ks = p.kernelSize();
  const int64_t cg = p.inC / p.group;
  const int64_t mg = p.outC / p.group;
  const int64_t kRows = mg * ks;  // rows of col: (m, kd, kh, kw)
  std::vector<float> col(static_cast<size_t>(kRows * inSize));

  for (int64_t n = 0; n < p.batch; ++n) {
    for (int64_t g = 0; g < p.group; ++g) {
      const float* xg = x + (n * p.inC + g * cg) * inSize;  // [cg][inSize]
      const float* wg = w + g * cg * kRows;                 // [cg][kRows]
                                                            // col[r][i] = sum_c wg[c][r] * xg[c][i]
#pragma omp parallel for schedule(static)
      for (int64_t r = 0; r < kRows; ++r) {
        float* crow = col.data() + r * inSize;
        std::fill(crow, crow + inSize, 0.f);
        for (int64_t c = 0; c < cg; ++c) {
          const float wv = wg[c * kRows + r];
          const float* xrow = xg + c * inSize;
          for (int64_t i = 0; i < inSize; ++i) crow[i] += wv * xrow[i];
        }
      }
      // col2im: every input position scatters its kernel window into the output.
#pragma omp parallel for schedule(static)
      for (int64_t m = 0; m < mg; ++m) {
        float* ym = y + (n * p.outC + g * mg + m) * outSize;
        for (int64_t kd = 0; kd < p.k[0]; ++kd)
          for (int64_t kh = 0; kh < p.k[1]; ++kh)
            for (int64_t kw = 0; kw < p.k[2]; ++kw) {
              const float* crow =
                  col.data() + ((m * p.k[0] + kd) * p.k[1] + kh) * p.k[2] * inSize + kw * inSize;
              for (int64_t id = 0; id < p.in[0]; ++id) {
                const int64_t od = id * p.s[0] - p.pad[0] + kd * p.d[0];
                if (od < 0 || od >= p.out[0]) continue;
                for (int64_t ih = 0; ih < p.in[1]; ++ih) {
                  const int64_t oh = ih * p.s[1] - p.pad[1] + kh * p.d[1];
                  if (oh < 0 || oh >= p.out[1]) continue;
                  const float* src = crow + (id * p.in[1] + ih) * p.in[2];
                  float* dst = ym + (od * p.out[1] + oh) * p.out[2];
                  for (int64_t iw = 0; iw < p.in[2]; ++iw) {
                    const int64_t ow = iw * p.s[2] - p.pad[2] + kw * p.d[2];
                    if (ow >= 0 && ow < p.out[2]) dst[ow] += src[iw];
                  }
                }
              }
            }
      }
    }
  }
  if (bias) {
    const int64_t planes = p.batch * p.outC;
#pragma omp parallel for schedule(static)
    for (int64_t nm = 0; nm < planes; ++nm) {
      float* ym = y + nm * outSize;
      for (int64_t i = 0; i < outSize; ++i) ym[i] += bias[nm % p.outC];
    }
  }
  return Status::Ok();
}

}  // namespace edgeinfer::ref::nn
