// CPU reference kernels for TopK, NonMaxSuppression and NonZero.
//   TopK: the k largest (or smallest) elements along `axis`, always sorted (sorted=0 leaves the
//         order unspecified, so sorted output is valid); ties keep the lower index first.
//         k comes from the attribute `k` (opset < 10) or the input K (opset 10+).
//   NonMaxSuppression / NonZero: the selection is shared with the shape function
//         (graph/ops/detection_common.h) so the output size and contents always agree.
//   BoundedNonMaxSuppression / BoundedNonZero (ai.edgeinfer, graph/ops/detection_schemas.cpp):
//         the same selection, padded with zeros to the static output, and its size.
#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "graph/ops/detection_common.h"
#include "kernels/ref/elementwise_common.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer::ref {
namespace {

Status topKKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& values = *ctx.outputs[0];
  Tensor& indices = *ctx.outputs[1];
  const int64_t rank = static_cast<int64_t>(x.shape().rank());
  int64_t axis = ctx.attrs().getInt("axis", -1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank)
    return ctx.error(ErrorCode::kInvalidArgument, "TopK axis is out of range");
  const size_t a = static_cast<size_t>(axis);
  const int64_t k = ctx.attrs().has("k") ? ctx.attrs().getInt("k", 0)
                    : ctx.hasInput(1)    ? ctx.inputs[1]->getAsInt64(0)
                                         : -1;
  const int64_t len = x.shape()[a];
  if (k < 0 || k > len || values.shape()[a] != k || indices.dtype() != DataType::kInt64)
    return ctx.error(ErrorCode::kInvalidArgument, "TopK k does not match the outputs");
  const bool largest = ctx.attrs().getInt("largest", 1) != 0;
  const int64_t outer = x.shape().span(0, a);
  const int64_t inner = x.shape().span(a + 1, x.shape().rank());
  return dispatchType(x.dtype(), TypeSet::kNumeric, "TopK", [&](auto tag) -> Status {
    constexpr DataType DT = decltype(tag)::value;
    using S = typename TypeTraits<DT>::Storage;
    const S* in = x.data<S>();
    S* outV = values.data<S>();
    int64_t* outI = indices.data<int64_t>();
    const int64_t rows = outer * inner;
#pragma omp parallel for if (rows * len > kParallelThreshold)
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t o = r / inner, i = r % inner;
      const int64_t base = o * len * inner + i;
      std::vector<int64_t> idx(static_cast<size_t>(len));
      std::iota(idx.begin(), idx.end(), int64_t{0});
      auto val = [&](int64_t j) { return TypeTraits<DT>::load(in[base + j * inner]); };
      // NaN orders above every number (a strict weak order, as numpy's sort); the stable sort
      // keeps equal values in index order.
      auto isNan = [](auto v) {
        if constexpr (kIsFloatType<DT>) return std::isnan(v);
        return false;
      };
      auto less = [&](auto l, auto rr) {
        if (isNan(l) || isNan(rr)) return !isNan(l) && isNan(rr);
        return l < rr;
      };
      std::stable_sort(idx.begin(), idx.end(), [&](int64_t l, int64_t rr) {
        return largest ? less(val(rr), val(l)) : less(val(l), val(rr));
      });
      const int64_t ob = o * k * inner + i;
      for (int64_t j = 0; j < k; ++j) {
        outV[ob + j * inner] = in[base + idx[static_cast<size_t>(j)] * inner];
        outI[ob + j * inner] = idx[static_cast<size_t>(j)];
      }
    }
    return Status::Ok();
  });
}

/// The NonMaxSuppression selection of the node's inputs (plain or bounded form).
std::vector<std::array<int64_t, 3>> nmsSelection(KernelContext& ctx) {
  graph::NmsParams p;
  p.centerPointBox = ctx.attrs().getInt("center_point_box", 0) == 1;
  if (ctx.hasInput(2)) p.maxOutputPerClass = ctx.inputs[2]->getAsInt64(0);
  if (ctx.hasInput(3)) p.iouThreshold = static_cast<float>(ctx.inputs[3]->getAsDouble(0));
  if (ctx.hasInput(4)) {
    p.hasScoreThreshold = true;
    p.scoreThreshold = static_cast<float>(ctx.inputs[4]->getAsDouble(0));
  }
  return graph::nonMaxSuppression(*ctx.inputs[0], *ctx.inputs[1], p);
}

bool nmsShapesOk(const KernelContext& ctx) {
  const Shape& b = ctx.inputs[0]->shape();
  const Shape& s = ctx.inputs[1]->shape();
  return b.rank() == 3 && s.rank() == 3 && b[2] == 4 && b[0] == s[0] && b[1] == s[2];
}

/// Writes `selected` as rows of 3 into `y` (int64, at least that many rows), zeros after.
void writeRows(const std::vector<std::array<int64_t, 3>>& selected, Tensor& y) {
  int64_t* out = y.data<int64_t>();
  std::fill(out, out + y.numel(), int64_t{0});
  for (size_t i = 0; i < selected.size(); ++i)
    for (size_t j = 0; j < 3; ++j) out[i * 3 + j] = selected[i][j];
}

Status nmsKernel(KernelContext& ctx) {
  Tensor& y = *ctx.outputs[0];
  if (!nmsShapesOk(ctx))
    return ctx.error(ErrorCode::kInvalidArgument, "NonMaxSuppression: bad boxes/scores shapes");
  const auto selected = nmsSelection(ctx);
  if (y.shape() != Shape({static_cast<int64_t>(selected.size()), 3}))
    return ctx.error(ErrorCode::kInternal, "NonMaxSuppression output size disagrees");
  writeRows(selected, y);
  return Status::Ok();
}

Status boundedNmsKernel(KernelContext& ctx) {
  Tensor& y = *ctx.outputs[0];
  Tensor& count = *ctx.outputs[1];
  if (!nmsShapesOk(ctx))
    return ctx.error(ErrorCode::kInvalidArgument,
                     "BoundedNonMaxSuppression: bad boxes/scores shapes");
  const auto selected = nmsSelection(ctx);
  if (y.shape().rank() != 2 || y.shape()[1] != 3 ||
      y.shape()[0] < static_cast<int64_t>(selected.size()) || count.numel() != 1)
    return ctx.error(ErrorCode::kInternal, "BoundedNonMaxSuppression: the output is too small");
  writeRows(selected, y);
  count.data<int64_t>()[0] = static_cast<int64_t>(selected.size());
  return Status::Ok();
}

/// Writes the coordinates of x's non-zero elements as the first columns of y ([rank, cols],
/// cols >= their number; zeros after); returns their number.
int64_t writeNonZero(const Tensor& x, Tensor& y) {
  const int64_t rank = static_cast<int64_t>(x.shape().rank());
  const int64_t cols = y.shape()[1];
  int64_t* out = y.data<int64_t>();
  std::fill(out, out + y.numel(), int64_t{0});
  int64_t col = 0;
  for (int64_t i = 0; i < x.numel(); ++i) {
    if (x.getAsDouble(i) == 0.0) continue;
    int64_t rem = i;
    for (int64_t d = rank; d-- > 0;) {
      const int64_t dim = x.shape()[static_cast<size_t>(d)];
      out[d * cols + col] = rem % dim;
      rem /= dim;
    }
    ++col;  // a scalar's single row stays 0
  }
  return col;
}

Status nonZeroKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const int64_t count = graph::countNonZero(x);
  const int64_t rank = static_cast<int64_t>(x.shape().rank());
  if (y.shape() != Shape({std::max<int64_t>(rank, 1), count}))
    return ctx.error(ErrorCode::kInternal, "NonZero output size disagrees");
  writeNonZero(x, y);
  return Status::Ok();
}

Status boundedNonZeroKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  Tensor& count = *ctx.outputs[1];
  const int64_t rank = static_cast<int64_t>(x.shape().rank());
  if (y.shape() != Shape({std::max<int64_t>(rank, 1), x.numel()}) || count.numel() != 1)
    return ctx.error(ErrorCode::kInternal, "BoundedNonZero: the output does not fit the input");
  count.data<int64_t>()[0] = writeNonZero(x, y);
  return Status::Ok();
}

}  // namespace

void registerDetectionKernels(KernelRegistry& r) {
  r.add("", "TopK", topKKernel);
  r.add("", "NonMaxSuppression", nmsKernel);
  r.add("", "NonZero", nonZeroKernel);
  r.add(graph::kEdgeInferDomain, "BoundedNonMaxSuppression", boundedNmsKernel);
  r.add(graph::kEdgeInferDomain, "BoundedNonZero", boundedNonZeroKernel);
}

}  // namespace edgeinfer::ref
