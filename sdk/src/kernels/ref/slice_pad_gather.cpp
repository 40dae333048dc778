// CPU reference kernels for the ops that address elements by computed index: Slice, Pad,
// Gather and GatherElements. Indices that come from tensors are validated before any memory
// is touched, so a bad index is an error status, never an out-of-bounds read.
#include <algorithm>
#include <cstring>
#include <string>

#include "kernels/ref/elementwise_common.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer::ref {
namespace {

// ---- Slice ----------------------------------------------------------------------------------

Status sliceKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const size_t rank = x.shape().rank();
  const std::vector<int64_t> starts = readInts(*ctx.inputs[1]);
  const std::vector<int64_t> ends = readInts(*ctx.inputs[2]);
  std::vector<int64_t> axes, steps;
  if (ctx.hasInput(3)) {
    axes = readInts(*ctx.inputs[3]);
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (ctx.hasInput(4))
    steps = readInts(*ctx.inputs[4]);
  else
    steps.assign(starts.size(), 1);
  if (ends.size() != starts.size() || axes.size() != starts.size() ||
      steps.size() != starts.size() || y.shape().rank() != rank)
    return ctx.error(ErrorCode::kInvalidArgument, "Slice parameters have different lengths");

  const std::vector<int64_t> inStrides = contiguousStrides(x.shape());
  std::vector<int64_t> strides = inStrides;
  int64_t base = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    int64_t a = axes[i];
    if (a < 0) a += static_cast<int64_t>(rank);
    if (a < 0 || a >= static_cast<int64_t>(rank) || steps[i] == 0)
      return ctx.error(ErrorCode::kInvalidArgument, "Slice axis or step is invalid");
    const size_t ax = static_cast<size_t>(a);
    const int64_t dim = x.shape()[ax];
    int64_t start = starts[i];
    if (start < 0) start += dim;
    start =
        steps[i] > 0 ? std::clamp<int64_t>(start, 0, dim) : std::clamp<int64_t>(start, 0, dim - 1);
    if (y.shape()[ax] > 0) base += start * inStrides[ax];
    strides[ax] = inStrides[ax] * steps[i];
  }
  return stridedCopy(x, y, strides, base);
}

// ---- Pad ------------------------------------------------------------------------------------

enum class PadMode { kConstant, kReflect, kEdge };

/// Maps a padded coordinate to a source coordinate, or -1 for "use the constant".
int64_t padSource(int64_t c, int64_t dim, PadMode mode) {
  if (c >= 0 && c < dim) return c;
  switch (mode) {
    case PadMode::kConstant:
      return -1;
    case PadMode::kEdge:
      return c < 0 ? 0 : dim - 1;
    case PadMode::kReflect: {
      if (dim == 1) return 0;
      const int64_t period = 2 * (dim - 1);
      c %= period;
      if (c < 0) c += period;
      return c < dim ? c : period - c;
    }
  }
  return -1;
}

template <typename U>
void padLoop(const Tensor& x, Tensor& y, const std::vector<int64_t>& padBegin, PadMode mode,
             U constant) {
  const std::vector<int64_t>& od = y.shape().dims();
  const std::vector<int64_t>& id = x.shape().dims();
  const std::vector<int64_t> is = contiguousStrides(x.shape());
  const U* in = x.data<U>();
  U* out = y.data<U>();
  const int64_t n = y.numel();
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, off = 0;
    bool inside = true;
    for (size_t d = od.size(); d-- > 0;) {
      const int64_t c = rem % od[d];
      rem /= od[d];
      const int64_t s = padSource(c - padBegin[d], id[d], mode);
      if (s < 0) {
        inside = false;
        break;
      }
      off += s * is[d];
    }
    out[i] = inside ? in[off] : constant;
  }
}

Status padKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const size_t rank = x.shape().rank();
  const std::vector<int64_t> pads = readInts(*ctx.inputs[1]);
  if (pads.size() != 2 * rank || y.shape().rank() != rank)
    return ctx.error(ErrorCode::kInvalidArgument, "Pad pads must have 2 * rank entries");
  const std::string m = ctx.attrs().getString("mode", "constant");
  const PadMode mode = m == "reflect" ? PadMode::kReflect
                       : m == "edge"  ? PadMode::kEdge
                                      : PadMode::kConstant;
  if (mode == PadMode::kConstant && m != "constant")
    return ctx.error(ErrorCode::kUnsupported, "Pad mode '" + m + "' is not supported");
  std::vector<int64_t> padBegin(pads.begin(), pads.begin() + static_cast<int64_t>(rank));
  for (size_t d = 0; d < rank; ++d)
    if (x.shape()[d] == 0 && y.shape()[d] > 0 && mode != PadMode::kConstant)
      return ctx.error(ErrorCode::kInvalidArgument, "cannot " + m + "-pad an empty dimension");
  if (y.numel() == 0) return Status::Ok();
  const size_t es = dataTypeSize(x.dtype());
  const bool hasConstant = ctx.hasInput(2) && ctx.inputs[2]->numel() == 1;
  if (hasConstant && ctx.inputs[2]->dtype() != x.dtype())
    return ctx.error(ErrorCode::kInvalidArgument, "Pad constant_value type differs from data");
  bool ok = dispatchBySize(x.dtype(), [&](auto u) {
    using U = decltype(u);
    U constant{};
    if (hasConstant) std::memcpy(&constant, ctx.inputs[2]->raw(), es);
    padLoop<U>(x, y, padBegin, mode, constant);
  });
  if (!ok) return ctx.error(ErrorCode::kUnsupported, "Pad: unsupported element type");
  return Status::Ok();
}

// ---- Gather, GatherElements -----------------------------------------------------------------

/// Reads indices, wraps negative ones and checks every one is within [0, dim).
Status readIndices(KernelContext& ctx, const Tensor& t, int64_t dim, std::vector<int64_t>* out) {
  if (t.dtype() != DataType::kInt32 && t.dtype() != DataType::kInt64)
    return ctx.error(ErrorCode::kInvalidArgument, "indices must be int32 or int64");
  *out = readInts(t);
  for (int64_t& i : *out) {
    if (i < -dim || i >= dim)
      return ctx.error(ErrorCode::kInvalidArgument, "index " + std::to_string(i) +
                                                        " is out of range for a dimension of "
                                                        "size " +
                                                        std::to_string(dim));
    if (i < 0) i += dim;
  }
  return Status::Ok();
}

Status gatherKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const int64_t rank = static_cast<int64_t>(x.shape().rank());
  int64_t axis = ctx.attrs().getInt("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank)
    return ctx.error(ErrorCode::kInvalidArgument, "Gather axis is out of range");
  const size_t a = static_cast<size_t>(axis);
  const int64_t dim = x.shape()[a];
  std::vector<int64_t> idx;
  EI_RETURN_IF_ERROR(readIndices(ctx, *ctx.inputs[1], dim, &idx));
  const int64_t outer = x.shape().span(0, a);
  const int64_t inner = x.shape().span(a + 1, x.shape().rank());
  const int64_t count = static_cast<int64_t>(idx.size());
  if (y.numel() != outer * count * inner)
    return ctx.error(ErrorCode::kInvalidArgument, "Gather output does not match its inputs");
  const size_t es = dataTypeSize(x.dtype());
  const char* src = static_cast<const char*>(x.raw());
  char* dst = static_cast<char*>(y.raw());
  const int64_t rows = outer * count;
#pragma omp parallel for if (rows * inner > kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r / count, j = r % count;
    copyElements(dst + static_cast<size_t>(r * inner) * es,
                 src + static_cast<size_t>((o * dim + idx[static_cast<size_t>(j)]) * inner) * es,
                 inner, es);
  }
  return Status::Ok();
}

template <typename U>
void gatherElementsLoop(const Tensor& x, const std::vector<int64_t>& idx, const Shape& idxShape,
                        size_t axis, Tensor& y) {
  const std::vector<int64_t>& od = idxShape.dims();
  const std::vector<int64_t> xs = contiguousStrides(x.shape());
  const U* in = x.data<U>();
  U* out = y.data<U>();
  const int64_t n = y.numel();
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, off = 0;
    for (size_t d = od.size(); d-- > 0;) {
      const int64_t c = rem % od[d];
      rem /= od[d];
      off += (d == axis ? idx[static_cast<size_t>(i)] : c) * xs[d];
    }
    out[i] = in[off];
  }
}

Status gatherElementsKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  const Tensor& ind = *ctx.inputs[1];
  Tensor& y = *ctx.outputs[0];
  const int64_t rank = static_cast<int64_t>(x.shape().rank());
  int64_t axis = ctx.attrs().getInt("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || ind.shape().rank() != x.shape().rank() ||
      y.shape() != ind.shape())
    return ctx.error(ErrorCode::kInvalidArgument, "GatherElements shapes or axis are invalid");
  for (size_t d = 0; d < x.shape().rank(); ++d)
    if (static_cast<int64_t>(d) != axis && ind.shape()[d] > x.shape()[d])
      return ctx.error(ErrorCode::kInvalidArgument, "GatherElements indices exceed the data");
  std::vector<int64_t> idx;
  EI_RETURN_IF_ERROR(readIndices(ctx, ind, x.shape()[static_cast<size_t>(axis)], &idx));
  if (y.numel() == 0) return Status::Ok();
  if (!dispatchBySize(x.dtype(), [&](auto u) {
        gatherElementsLoop<decltype(u)>(x, idx, ind.shape(), static_cast<size_t>(axis), y);
      }))
    return ctx.error(ErrorCode::kUnsupported, "GatherElements: unsupported element type");
  return Status::Ok();
}

}  // namespace

void registerSlicePadGatherKernels(KernelRegistry& r) {
  r.add("", "Slice", sliceKernel);
  r.add("", "Pad", padKernel);
  r.add("", "Gather", gatherKernel);
  r.add("", "GatherElements", gatherElementsKernel);
}

}  // namespace edgeinfer::ref
