// CPU reference kernels for the data-movement ops that do not pick elements by index:
// Identity, Dropout, Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Shape,
// Size, ConstantOfShape, Expand, Tile, Range, OneHot and CumSum. (Slice, Pad, Gather and
// GatherElements are in slice_pad_gather.cpp.) Output shapes come from shape inference;
// these kernels move bytes, so they work for every element type.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/ref/elementwise_common.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer::ref {
namespace {

/// Identity-like ops: the output holds the same bytes under (possibly) another shape.
Status copyKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  if (x.bytes() != y.bytes() || x.dtype() != y.dtype())
    return ctx.error(ErrorCode::kInvalidArgument,
                     "cannot view " + x.describe() + " as " + y.describe());
  copyElements(y.raw(), x.raw(), x.numel(), dataTypeSize(x.dtype()));
  return Status::Ok();
}

Status dropoutKernel(KernelContext& ctx) {
  EI_RETURN_IF_ERROR(copyKernel(ctx));
  if (ctx.outputs.size() > 1 && ctx.outputs[1]) {  // inference: nothing is dropped
    Tensor& mask = *ctx.outputs[1];
    if (mask.bytes()) std::memset(mask.raw(), 1, mask.bytes());
  }
  return Status::Ok();
}

Status transposeKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const size_t rank = x.shape().rank();
  std::vector<int64_t> perm = ctx.attrs().getInts("perm");
  if (!ctx.attrs().has("perm"))
    for (size_t i = 0; i < rank; ++i) perm.push_back(static_cast<int64_t>(rank - 1 - i));
  if (perm.size() != rank) return ctx.error(ErrorCode::kInvalidArgument, "bad perm");
  const std::vector<int64_t> inStrides = contiguousStrides(x.shape());
  std::vector<int64_t> strides(rank);
  for (size_t i = 0; i < rank; ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(rank))
      return ctx.error(ErrorCode::kInvalidArgument, "bad perm");
    strides[i] = inStrides[static_cast<size_t>(perm[i])];
  }
  return stridedCopy(x, y, strides, 0);
}

Status concatKernel(KernelContext& ctx) {
  Tensor& y = *ctx.outputs[0];
  const int64_t rank = static_cast<int64_t>(y.shape().rank());
  int64_t axis = ctx.attrs().getInt("axis", 0);
  if (axis < 0) axis += rank;
  const size_t a = static_cast<size_t>(axis);
  const size_t es = dataTypeSize(y.dtype());
  const int64_t outer = y.shape().span(0, a);
  const int64_t inner = y.shape().span(a + 1, y.shape().rank());
  const int64_t outRow = y.shape()[a] * inner;
  int64_t offset = 0;  // elements into each output row
  for (const Tensor* in : ctx.inputs) {
    if (!in || in->dtype() != y.dtype() || in->shape().rank() != y.shape().rank())
      return ctx.error(ErrorCode::kInvalidArgument, "Concat input does not match the output");
    const int64_t row = in->shape()[a] * inner;
    if (offset + row > outRow || in->numel() != outer * row)
      return ctx.error(ErrorCode::kInvalidArgument, "Concat input does not match the output");
    const char* src = static_cast<const char*>(in->raw());
    char* dst = static_cast<char*>(y.raw());
    for (int64_t o = 0; o < outer; ++o)
      copyElements(dst + static_cast<size_t>(o * outRow + offset) * es,
                   src + static_cast<size_t>(o * row) * es, row, es);
    offset += row;
  }
  return Status::Ok();
}

Status splitKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  const int64_t rank = static_cast<int64_t>(x.shape().rank());
  int64_t axis = ctx.attrs().getInt("axis", 0);
  if (axis < 0) axis += rank;
  const size_t a = static_cast<size_t>(axis);
  const size_t es = dataTypeSize(x.dtype());
  const int64_t outer = x.shape().span(0, a);
  const int64_t inner = x.shape().span(a + 1, x.shape().rank());
  const int64_t inRow = x.shape()[a] * inner;
  int64_t offset = 0;
  for (Tensor* out : ctx.outputs) {
    const int64_t row = out->shape()[a] * inner;
    if (offset + row > inRow || out->numel() != outer * row)
      return ctx.error(ErrorCode::kInvalidArgument, "Split output does not match the input");
    const char* src = static_cast<const char*>(x.raw());
    char* dst = static_cast<char*>(out->raw());
    for (int64_t o = 0; o < outer; ++o)
      copyElements(dst + static_cast<size_t>(o * row) * es,
                   src + static_cast<size_t>(o * inRow + offset) * es, row, es);
    offset += row;
  }
  return Status::Ok();
}

Status shapeKernel(KernelContext& ctx) {
  const Shape& s = ctx.inputs[0]->shape();
  Tensor& y = *ctx.outputs[0];
  const int64_t rank = static_cast<int64_t>(s.rank());
  int64_t start = ctx.attrs().getInt("start", 0);
  if (start < 0) start += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  for (int64_t i = 0; i < y.numel(); ++i) y.data<int64_t>()[i] = s[static_cast<size_t>(start + i)];
  return Status::Ok();
}

Status sizeKernel(KernelContext& ctx) {
  ctx.outputs[0]->data<int64_t>()[0] = ctx.inputs[0]->numel();
  return Status::Ok();
}

Status constantOfShapeKernel(KernelContext& ctx) {
  Tensor& y = *ctx.outputs[0];
  const Tensor* v = ctx.attrs().getTensor("value");
  if (!v) return Status::Ok();  // float 0: the output is already zero-filled
  if (v->dtype() != y.dtype() || v->numel() != 1)
    return ctx.error(ErrorCode::kInvalidArgument, "ConstantOfShape value does not match output");
  const size_t es = dataTypeSize(y.dtype());
  char* dst = static_cast<char*>(y.raw());
  for (int64_t i = 0; i < y.numel(); ++i)
    std::memcpy(dst + static_cast<size_t>(i) * es, v->raw(), es);
  return Status::Ok();
}

Status expandKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  if (!broadcastsTo(x.shape(), y.shape()))
    return ctx.error(ErrorCode::kInvalidArgument,
                     x.shape().toString() + " does not broadcast to " + y.shape().toString());
  const size_t lead = y.shape().rank() - x.shape().rank();
  const std::vector<int64_t> inStrides = contiguousStrides(x.shape());
  std::vector<int64_t> strides(y.shape().rank(), 0);
  for (size_t i = 0; i < x.shape().rank(); ++i)
    strides[lead + i] = x.shape()[i] == 1 ? 0 : inStrides[i];
  return stridedCopy(x, y, strides, 0);
}

template <typename U>
void tileLoop(const Tensor& x, Tensor& y) {
  const std::vector<int64_t>& od = y.shape().dims();
  const std::vector<int64_t>& id = x.shape().dims();
  const std::vector<int64_t> is = contiguousStrides(x.shape());
  const U* in = x.data<U>();
  U* out = y.data<U>();
  const int64_t n = y.numel();
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, off = 0;
    for (size_t d = od.size(); d-- > 0;) {
      const int64_t c = rem % od[d];
      rem /= od[d];
      off += (c % id[d]) * is[d];
    }
    out[i] = in[off];
  }
}

Status tileKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  if (x.shape().rank() != y.shape().rank())
    return ctx.error(ErrorCode::kInvalidArgument, "Tile output rank differs from input");
  if (y.numel() == 0) return Status::Ok();
  if (!dispatchBySize(y.dtype(), [&](auto u) { tileLoop<decltype(u)>(x, y); }))
    return ctx.error(ErrorCode::kUnsupported, "Tile: unsupported element type");
  return Status::Ok();
}

Status rangeKernel(KernelContext& ctx) {
  Tensor& y = *ctx.outputs[0];
  const DataType t = y.dtype();
  const int64_t n = y.numel();
  if (t == DataType::kFloat32) {
    const float start = ctx.inputs[0]->data<float>()[0];
    const float delta = ctx.inputs[2]->data<float>()[0];
    for (int64_t i = 0; i < n; ++i) y.data<float>()[i] = start + static_cast<float>(i) * delta;
    return Status::Ok();
  }
  const int64_t start = ctx.inputs[0]->getAsInt64(0);
  const int64_t delta = ctx.inputs[2]->getAsInt64(0);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(start) +
                                           static_cast<uint64_t>(i) * static_cast<uint64_t>(delta));
    if (t == DataType::kInt64)
      y.data<int64_t>()[i] = v;
    else if (t == DataType::kInt32)
      y.data<int32_t>()[i] = static_cast<int32_t>(v);
    else
      return ctx.error(ErrorCode::kUnsupported, "Range: unsupported type");
  }
  return Status::Ok();
}

Status oneHotKernel(KernelContext& ctx) {
  const Tensor& idx = *ctx.inputs[0];
  const Tensor& values = *ctx.inputs[2];
  Tensor& y = *ctx.outputs[0];
  if (values.numel() != 2 || values.dtype() != y.dtype())
    return ctx.error(ErrorCode::kInvalidArgument, "OneHot values must hold [off, on]");
  const int64_t depth = static_cast<int64_t>(ctx.inputs[1]->getAsDouble(0));
  const int64_t outRank = static_cast<int64_t>(y.shape().rank());
  int64_t axis = ctx.attrs().getInt("axis", -1);
  if (axis < 0) axis += outRank;
  if (axis < 0 || axis >= outRank || y.shape()[static_cast<size_t>(axis)] != depth)
    return ctx.error(ErrorCode::kInvalidArgument, "OneHot output does not match depth/axis");
  const int64_t outer = idx.shape().span(0, static_cast<size_t>(axis));
  const int64_t inner = idx.shape().span(static_cast<size_t>(axis), idx.shape().rank());
  const size_t es = dataTypeSize(y.dtype());
  const char* off = static_cast<const char*>(values.raw());
  const char* on = off + es;
  char* out = static_cast<char*>(y.raw());
  for (int64_t i = 0; i < y.numel(); ++i) std::memcpy(out + static_cast<size_t>(i) * es, off, es);
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      const double dv = idx.getAsDouble(o * inner + i);
      // NaN, or beyond what int64 holds (no depth is that large): the row stays `off`.
      if (std::isnan(dv) || std::fabs(dv) >= 9.2e18) continue;
      int64_t k = static_cast<int64_t>(dv);
      if (k < 0) k += depth;
      if (k < 0 || k >= depth) continue;  // out of range: the whole row stays `off`
      std::memcpy(out + static_cast<size_t>((o * depth + k) * inner + i) * es, on, es);
    }
  }
  return Status::Ok();
}

Status cumSumKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const int64_t rank = static_cast<int64_t>(x.shape().rank());
  int64_t axis = ctx.inputs[1]->getAsInt64(0);
  if (axis < -rank || axis >= rank)
    return ctx.error(ErrorCode::kInvalidArgument, "CumSum axis " + std::to_string(axis) +
                                                      " is out of range for rank " +
                                                      std::to_string(rank));
  if (axis < 0) axis += rank;
  const bool exclusive = ctx.attrs().getInt("exclusive", 0) != 0;
  const bool reverse = ctx.attrs().getInt("reverse", 0) != 0;
  const size_t a = static_cast<size_t>(axis);
  const int64_t outer = x.shape().span(0, a);
  const int64_t len = x.shape()[a];
  const int64_t inner = x.shape().span(a + 1, x.shape().rank());
  return dispatchType(x.dtype(), TypeSet::kNumeric, "CumSum", [&](auto tag) -> Status {
    constexpr DataType DT = decltype(tag)::value;
    using Tr = TypeTraits<DT>;
    using S = typename Tr::Storage;
    // Floats accumulate in double, integers in int64 with wrap-around.
    using Acc = std::conditional_t<kIsFloatType<DT>, double, uint64_t>;
    using AccOut = std::conditional_t<kIsFloatType<DT>, double, int64_t>;
    using C = typename Tr::Compute;
    const S* in = x.data<S>();
    S* out = y.data<S>();
    const int64_t n = outer * inner;
#pragma omp parallel for if (n * len > kParallelThreshold)
    for (int64_t oi = 0; oi < n; ++oi) {
      const int64_t o = oi / inner, i = oi % inner;
      Acc acc = 0;
      for (int64_t s = 0; s < len; ++s) {
        const int64_t k = reverse ? len - 1 - s : s;
        const int64_t pos = (o * len + k) * inner + i;
        const Acc v = static_cast<Acc>(Tr::load(in[pos]));
        if (!exclusive) acc += v;
        out[pos] = Tr::store(static_cast<C>(static_cast<AccOut>(acc)));
        if (exclusive) acc += v;
      }
    }
    return Status::Ok();
  });
}

}  // namespace

void registerSlicePadGatherKernels(KernelRegistry& r);  // slice_pad_gather.cpp

void registerTensorKernels(KernelRegistry& r) {
  for (const char* op : {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze"})
    r.add("", op, copyKernel);
  r.add("", "Dropout", dropoutKernel);
  r.add("", "Transpose", transposeKernel);
  r.add("", "Concat", concatKernel);
  r.add("", "Split", splitKernel);
  r.add("", "Shape", shapeKernel);
  r.add("", "Size", sizeKernel);
  r.add("", "ConstantOfShape", constantOfShapeKernel);
  r.add("", "Expand", expandKernel);
  r.add("", "Tile", tileKernel);
  r.add("", "Range", rangeKernel);
  r.add("", "OneHot", oneHotKernel);
  r.add("", "CumSum", cumSumKernel);
  registerSlicePadGatherKernels(r);
  registerDetectionKernels(r);
  registerScatterGatherKernels(r);
  registerMiscKernels(r);
}

}  // namespace edgeinfer::ref
