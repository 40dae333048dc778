// CPU reference kernels for ScatterND, ScatterElements / Scatter and GatherND (ONNX semantics;
// negative indices count from the end, as onnxruntime accepts). Scatters run serially in index
// order, so with reduction=none a duplicated index keeps its last update (ONNX leaves that
// case undefined) and add/mul accumulate every update.
#include <algorithm>
#include <string>
#include <vector>

#include "kernels/ref/elementwise_common.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer::ref {
namespace {

enum class Reduction { kNone, kAdd, kMul, kMax, kMin };

Status parseReduction(KernelContext& ctx, Reduction* r) {
  const std::string s = ctx.attrs().getString("reduction", "none");
  if (s == "none")
    *r = Reduction::kNone;
  else if (s == "add")
    *r = Reduction::kAdd;
  else if (s == "mul")
    *r = Reduction::kMul;
  else if (s == "max")
    *r = Reduction::kMax;
  else if (s == "min")
    *r = Reduction::kMin;
  else
    return ctx.error(ErrorCode::kInvalidArgument, "unknown reduction '" + s + "'");
  return Status::Ok();
}

/// Normalises index `i` for a dimension of size `dim`; fails when out of range.
Status wrapIndex(KernelContext& ctx, int64_t i, int64_t dim, int64_t* out) {
  if (i < -dim || i >= dim)
    return ctx.error(ErrorCode::kInvalidArgument, ctx.node.opType + " index " + std::to_string(i) +
                                                      " is out of range for a dimension of size " +
                                                      std::to_string(dim));
  *out = i < 0 ? i + dim : i;
  return Status::Ok();
}

/// Applies `apply(dstOffset, srcOffset)` for each (output, update) element pair, after the
/// output has been initialised with a copy of the data. Dispatches the element type once.
template <typename Fn>
Status scatterApply(KernelContext& ctx, Reduction red, Fn&& forEachPair) {
  const Tensor& data = *ctx.inputs[0];
  const Tensor& upd = *ctx.inputs[2];
  Tensor& y = *ctx.outputs[0];
  if (y.dtype() != data.dtype() || upd.dtype() != data.dtype() || y.shape() != data.shape())
    return ctx.error(ErrorCode::kInvalidArgument, ctx.node.opType + ": mismatched tensors");
  copyElements(y.raw(), data.raw(), data.numel(), dataTypeSize(data.dtype()));
  const TypeSet set = red == Reduction::kNone ? TypeSet::kAll : TypeSet::kNumeric;
  return dispatchType(data.dtype(), set, ctx.node.opType, [&](auto tag) -> Status {
    constexpr DataType DT = decltype(tag)::value;
    using Tr = TypeTraits<DT>;
    using S = typename Tr::Storage;
    S* out = y.data<S>();
    const S* u = upd.data<S>();
    return forEachPair([&](int64_t dst, int64_t src) {
      if (red == Reduction::kNone) {
        out[dst] = u[src];
        return;
      }
      if constexpr (DT != DataType::kBool) {
        const auto a = Tr::load(out[dst]);
        const auto b = Tr::load(u[src]);
        using C = typename Tr::Compute;
        C r = a;
        switch (red) {
          case Reduction::kAdd:
            r = static_cast<C>(a + b);
            break;
          case Reduction::kMul:
            r = static_cast<C>(a * b);
            break;
          case Reduction::kMax:
            r = std::max(a, b);
            break;
          case Reduction::kMin:
            r = std::min(a, b);
            break;
          case Reduction::kNone:
            break;
        }
        out[dst] = Tr::store(r);
      }
    });
  });
}

Status scatterNDKernel(KernelContext& ctx) {
  const Tensor& data = *ctx.inputs[0];
  const Tensor& idx = *ctx.inputs[1];
  const Tensor& upd = *ctx.inputs[2];
  Reduction red = Reduction::kNone;
  EI_RETURN_IF_ERROR(parseReduction(ctx, &red));
  const Shape& ds = data.shape();
  const size_t r = ds.rank();
  if (idx.shape().rank() == 0)
    return ctx.error(ErrorCode::kInvalidArgument, "ScatterND indices cannot be a scalar");
  const int64_t m = idx.shape()[idx.shape().rank() - 1];
  if (m < 1 || m > static_cast<int64_t>(r))
    return ctx.error(ErrorCode::kInvalidArgument, "ScatterND indices' last dim is out of range");
  const int64_t slice = ds.span(static_cast<size_t>(m), r);
  const int64_t count = m == 0 ? 0 : idx.numel() / m;
  if (upd.numel() != count * slice)
    return ctx.error(ErrorCode::kInvalidArgument, "ScatterND updates have the wrong size");
  const std::vector<int64_t> strides = contiguousStrides(ds);
  const std::vector<int64_t> iv = readInts(idx);
  return scatterApply(ctx, red, [&](auto&& apply) -> Status {
    for (int64_t n = 0; n < count; ++n) {
      int64_t off = 0;
      for (int64_t j = 0; j < m; ++j) {
        int64_t k = 0;
        EI_RETURN_IF_ERROR(
            wrapIndex(ctx, iv[static_cast<size_t>(n * m + j)], ds[static_cast<size_t>(j)], &k));
        off += k * strides[static_cast<size_t>(j)];
      }
      for (int64_t e = 0; e < slice; ++e) apply(off + e, n * slice + e);
    }
    return Status::Ok();
  });
}

Status scatterElementsKernel(KernelContext& ctx) {
  const Tensor& data = *ctx.inputs[0];
  const Tensor& idx = *ctx.inputs[1];
  const Tensor& upd = *ctx.inputs[2];
  Reduction red = Reduction::kNone;
  EI_RETURN_IF_ERROR(parseReduction(ctx, &red));
  const Shape& ds = data.shape();
  const Shape& is = idx.shape();
  const int64_t rank = static_cast<int64_t>(ds.rank());
  int64_t axis = ctx.attrs().getInt("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || is.rank() != ds.rank() || upd.shape() != is)
    return ctx.error(ErrorCode::kInvalidArgument,
                     ctx.node.opType + ": indices, updates and data do not match");
  for (size_t d = 0; d < is.rank(); ++d)
    if (static_cast<int64_t>(d) != axis && is[d] > ds[d])
      return ctx.error(ErrorCode::kInvalidArgument,
                       ctx.node.opType + ": indices exceed the data outside the axis");
  const std::vector<int64_t> strides = contiguousStrides(ds);
  const std::vector<int64_t> iv = readInts(idx);
  return scatterApply(ctx, red, [&](auto&& apply) -> Status {
    for (int64_t i = 0; i < idx.numel(); ++i) {
      int64_t rem = i, off = 0;
      for (size_t d = is.rank(); d-- > 0;) {
        int64_t c = rem % is[d];
        rem /= is[d];
        if (static_cast<int64_t>(d) == axis)
          EI_RETURN_IF_ERROR(wrapIndex(ctx, iv[static_cast<size_t>(i)], ds[d], &c));
        off += c * strides[d];
      }
      apply(off, i);
    }
    return Status::Ok();
  });
}

Status gatherNDKernel(KernelContext& ctx) {
  const Tensor& data = *ctx.inputs[0];
  const Tensor& idx = *ctx.inputs[1];
  Tensor& y = *ctx.outputs[0];
  const Shape& ds = data.shape();
  const Shape& is = idx.shape();
  const int64_t b = ctx.attrs().getInt("batch_dims", 0);
  const int64_t r = static_cast<int64_t>(ds.rank()), q = static_cast<int64_t>(is.rank());
  if (b < 0 || b >= std::min(r, q))
    return ctx.error(ErrorCode::kInvalidArgument, "GatherND batch_dims is out of range");
  const int64_t m = is[static_cast<size_t>(q - 1)];
  if (m < 1 || m > r - b)
    return ctx.error(ErrorCode::kInvalidArgument, "GatherND indices' last dim is out of range");
  const size_t bs = static_cast<size_t>(b);
  const int64_t batches = ds.span(0, bs);
  if (is.span(0, bs) != batches)
    return ctx.error(ErrorCode::kInvalidArgument, "GatherND batch dims differ");
  const int64_t perBatch = is.span(bs, static_cast<size_t>(q - 1));  // index tuples per batch
  const int64_t slice = ds.span(bs + static_cast<size_t>(m), ds.rank());
  const int64_t batchStride = ds.span(bs, ds.rank());
  if (y.numel() != batches * perBatch * slice || y.dtype() != data.dtype())
    return ctx.error(ErrorCode::kInvalidArgument, "GatherND output does not match");
  const std::vector<int64_t> strides = contiguousStrides(ds);
  const std::vector<int64_t> iv = readInts(idx);
  const size_t es = dataTypeSize(data.dtype());
  const char* in = static_cast<const char*>(data.raw());
  char* out = static_cast<char*>(y.raw());
  for (int64_t bi = 0; bi < batches; ++bi) {
    for (int64_t n = 0; n < perBatch; ++n) {
      const int64_t t = bi * perBatch + n;  // index tuple number
      int64_t off = bi * batchStride;
      for (int64_t j = 0; j < m; ++j) {
        const size_t d = bs + static_cast<size_t>(j);
        int64_t k = 0;
        EI_RETURN_IF_ERROR(wrapIndex(ctx, iv[static_cast<size_t>(t * m + j)], ds[d], &k));
        off += k * strides[d];
      }
      copyElements(out + static_cast<size_t>(t * slice) * es, in + static_cast<size_t>(off) * es,
                   slice, es);
    }
  }
  return Status::Ok();
}

}  // namespace

void registerScatterGatherKernels(KernelRegistry& r) {
  r.add("", "ScatterND", scatterNDKernel);
  r.add("", "ScatterElements", scatterElementsKernel);
  r.add("", "Scatter", scatterElementsKernel);
  r.add("", "GatherND", gatherNDKernel);
}

}  // namespace edgeinfer::ref
