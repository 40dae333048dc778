// CPU reference kernels for the reductions and ArgMax/ArgMin. Float types accumulate in
// double; integer types accumulate in int64 with wrap-around (ReduceMean truncates,
// ReduceL2 / LogSum / LogSumExp go through double). Each output element loops over its
// reduced elements, so the outer loop parallelises without atomics.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "kernels/ref/elementwise_common.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer::ref {
namespace {

enum class Reduce { kSum, kMean, kMax, kMin, kProd, kL1, kL2, kLogSum, kLogSumExp, kSumSquare };

Reduce reduceFor(const std::string& op) {
  if (op == "ReduceMean") return Reduce::kMean;
  if (op == "ReduceMax") return Reduce::kMax;
  if (op == "ReduceMin") return Reduce::kMin;
  if (op == "ReduceProd") return Reduce::kProd;
  if (op == "ReduceL1") return Reduce::kL1;
  if (op == "ReduceL2") return Reduce::kL2;
  if (op == "ReduceLogSum") return Reduce::kLogSum;
  if (op == "ReduceLogSumExp") return Reduce::kLogSumExp;
  if (op == "ReduceSumSquare") return Reduce::kSumSquare;
  return Reduce::kSum;
}

/// Reduces the values `get(0..count)` in double (float inputs).
template <typename Get>
double reduceDouble(Reduce op, int64_t count, Get get) {
  double acc = 0;
  switch (op) {
    case Reduce::kMax:
    case Reduce::kMin: {
      const bool isMax = op == Reduce::kMax;
      acc = isMax ? -std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::infinity();
      for (int64_t r = 0; r < count; ++r) {
        const double v = get(r);
        if (std::isnan(v)) return v;  // NaN propagates, as in numpy
        acc = isMax ? std::max(acc, v) : std::min(acc, v);
      }
      return acc;
    }
    case Reduce::kProd:
      acc = 1;
      for (int64_t r = 0; r < count; ++r) acc *= get(r);
      return acc;
    case Reduce::kLogSumExp: {
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t r = 0; r < count; ++r) m = std::max(m, get(r));
      if (!std::isfinite(m)) {  // empty, all -inf, or +inf somewhere: no shift needed
        for (int64_t r = 0; r < count; ++r) acc += std::exp(get(r));
        return std::log(acc);
      }
      for (int64_t r = 0; r < count; ++r) acc += std::exp(get(r) - m);
      return m + std::log(acc);
    }
    default:
      break;
  }
  for (int64_t r = 0; r < count; ++r) {
    const double v = get(r);
    acc += op == Reduce::kL1                                 ? std::fabs(v)
           : (op == Reduce::kL2 || op == Reduce::kSumSquare) ? v * v
                                                             : v;
  }
  if (op == Reduce::kMean) return acc / static_cast<double>(count);
  if (op == Reduce::kL2) return std::sqrt(acc);
  if (op == Reduce::kLogSum) return std::log(acc);
  return acc;
}

/// Integer reductions: exact in int64 (wrapping) where ONNX's result is an integer formula.
template <typename Get>
int64_t reduceInt(Reduce op, int64_t count, Get get, int64_t lowest, int64_t highest) {
  switch (op) {
    case Reduce::kMax: {
      int64_t acc = lowest;
      for (int64_t r = 0; r < count; ++r) acc = std::max(acc, get(r));
      return acc;
    }
    case Reduce::kMin: {
      int64_t acc = highest;
      for (int64_t r = 0; r < count; ++r) acc = std::min(acc, get(r));
      return acc;
    }
    case Reduce::kProd: {
      uint64_t acc = 1;
      for (int64_t r = 0; r < count; ++r) acc *= static_cast<uint64_t>(get(r));
      return static_cast<int64_t>(acc);
    }
    case Reduce::kL2:
    case Reduce::kLogSum:
    case Reduce::kLogSumExp:
      return 0;  // handled in double by the caller
    default:
      break;
  }
  uint64_t acc = 0;
  for (int64_t r = 0; r < count; ++r) {
    const int64_t v = get(r);
    if (op == Reduce::kL1)
      acc += v < 0 ? uint64_t{0} - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
    else if (op == Reduce::kSumSquare)
      acc += static_cast<uint64_t>(v) * static_cast<uint64_t>(v);
    else
      acc += static_cast<uint64_t>(v);
  }
  const int64_t sum = static_cast<int64_t>(acc);
  if (op == Reduce::kMean) return count ? sum / count : 0;
  return sum;
}

Status reduceKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const size_t rank = x.shape().rank();
  const Reduce op = reduceFor(ctx.node.opType);
  const std::vector<int64_t> axes = ctx.attrs().getInts("axes");
  const bool noop = ctx.attrs().getInt("noop_with_empty_axes", 0) != 0;
  if (axes.empty() && noop) {  // identity
    copyElements(y.raw(), x.raw(), x.numel(), dataTypeSize(x.dtype()));
    return Status::Ok();
  }
  std::vector<bool> reduced(rank, axes.empty());
  for (int64_t a : axes) {
    if (a < 0) a += static_cast<int64_t>(rank);
    if (a < 0 || a >= static_cast<int64_t>(rank))
      return ctx.error(ErrorCode::kInvalidArgument, "reduction axis is out of range");
    reduced[static_cast<size_t>(a)] = true;
  }
  // Kept and reduced dims with their input strides; output elements enumerate the kept dims
  // in order (the same order with or without keepdims).
  const std::vector<int64_t> strides = contiguousStrides(x.shape());
  std::vector<int64_t> keptDims, keptStrides, redDims, redStrides;
  for (size_t d = 0; d < rank; ++d) {
    (reduced[d] ? redDims : keptDims).push_back(x.shape()[d]);
    (reduced[d] ? redStrides : keptStrides).push_back(strides[d]);
  }
  int64_t redCount = 1;
  for (int64_t d : redDims) redCount *= d;
  const int64_t outCount = y.numel();
  auto offsetOf = [](int64_t i, const std::vector<int64_t>& dims, const std::vector<int64_t>& st) {
    int64_t off = 0;
    for (size_t d = dims.size(); d-- > 0;) {
      off += (i % dims[d]) * st[d];
      i /= dims[d];
    }
    return off;
  };
  return dispatchType(x.dtype(), TypeSet::kNumeric, ctx.node.opType, [&](auto tag) -> Status {
    constexpr DataType DT = decltype(tag)::value;
    using Tr = TypeTraits<DT>;
    using S = typename Tr::Storage;
    using C = typename Tr::Compute;
    const S* in = x.data<S>();
    S* out = y.data<S>();
#pragma omp parallel for if (outCount * redCount > kParallelThreshold)
    for (int64_t o = 0; o < outCount; ++o) {
      const int64_t base = offsetOf(o, keptDims, keptStrides);
      auto at = [&](int64_t r) { return Tr::load(in[base + offsetOf(r, redDims, redStrides)]); };
      if constexpr (kIsFloatType<DT>) {
        out[o] = Tr::store(static_cast<float>(
            reduceDouble(op, redCount, [&](int64_t r) { return static_cast<double>(at(r)); })));
      } else if constexpr (kIsIntType<DT>) {
        if (op == Reduce::kL2 || op == Reduce::kLogSum || op == Reduce::kLogSumExp) {
          out[o] = saturateCast<C>(
              reduceDouble(op, redCount, [&](int64_t r) { return static_cast<double>(at(r)); }));
        } else {
          out[o] = static_cast<C>(reduceInt(
              op, redCount, [&](int64_t r) { return static_cast<int64_t>(at(r)); },
              static_cast<int64_t>(std::numeric_limits<C>::lowest()),
              static_cast<int64_t>(std::numeric_limits<C>::max())));
        }
      }
    }
    return Status::Ok();
  });
}

Status argKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const int64_t rank = static_cast<int64_t>(x.shape().rank());
  int64_t axis = ctx.attrs().getInt("axis", 0);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank)
    return ctx.error(ErrorCode::kInvalidArgument, "axis is out of range");
  const size_t a = static_cast<size_t>(axis);
  const int64_t len = x.shape()[a];
  if (len == 0) return ctx.error(ErrorCode::kInvalidArgument, "cannot take an arg over 0 elements");
  const int64_t outer = x.shape().span(0, a);
  const int64_t inner = x.shape().span(a + 1, x.shape().rank());
  const bool isMax = ctx.node.opType == "ArgMax";
  const bool last = ctx.attrs().getInt("select_last_index", 0) != 0;
  int64_t* out = y.data<int64_t>();
  return dispatchType(x.dtype(), TypeSet::kNumeric, ctx.node.opType, [&](auto tag) -> Status {
    constexpr DataType DT = decltype(tag)::value;
    const int64_t n = outer * inner;
#pragma omp parallel for if (n * len > kParallelThreshold)
    for (int64_t oi = 0; oi < n; ++oi) {
      const int64_t o = oi / inner, i = oi % inner;
      auto best = loadAt<DT>(x, o * len * inner + i);
      int64_t bestIdx = 0;
      for (int64_t k = 1; k < len; ++k) {
        const auto v = loadAt<DT>(x, (o * len + k) * inner + i);
        const bool better = isMax ? (last ? v >= best : v > best) : (last ? v <= best : v < best);
        if (better) {
          best = v;
          bestIdx = k;
        }
      }
      out[oi] = bestIdx;
    }
    return Status::Ok();
  });
}

}  // namespace

void registerReduceKernels(KernelRegistry& r) {
  for (const char* op :
       {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
        "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
    r.add("", op, reduceKernel);
  r.add("", "ArgMax", argKernel);
  r.add("", "ArgMin", argKernel);
}

}  // namespace edgeinfer::ref
