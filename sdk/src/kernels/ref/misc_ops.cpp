// CPU reference kernels for Trilu, EyeLike, Shrink and MeanVarianceNormalization (CastLike is
// in cast.cpp). MVN follows the ONNX function body: (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9),
// computed in double.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/ref/elementwise_common.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer::ref {
namespace {

Status triluKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const Shape& s = x.shape();
  if (s.rank() < 2 || y.shape() != s || y.dtype() != x.dtype())
    return ctx.error(ErrorCode::kInvalidArgument, "Trilu needs matching tensors of rank >= 2");
  const bool upper = ctx.attrs().getInt("upper", 1) != 0;
  const int64_t k = ctx.hasInput(1) ? ctx.inputs[1]->getAsInt64(0) : 0;
  const int64_t rows = s[s.rank() - 2], cols = s[s.rank() - 1];
  const int64_t mats = s.span(0, s.rank() - 2);
  const size_t es = dataTypeSize(x.dtype());
  const char* in = static_cast<const char*>(x.raw());
  char* out = static_cast<char*>(y.raw());  // zero-filled
  for (int64_t m = 0; m < mats; ++m)
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        const bool keep = upper ? j - i >= k : j - i <= k;
        if (!keep) continue;
        const size_t off = static_cast<size_t>((m * rows + i) * cols + j) * es;
        std::memcpy(out + off, in + off, es);
      }
  return Status::Ok();
}

Status eyeLikeKernel(KernelContext& ctx) {
  Tensor& y = *ctx.outputs[0];
  if (y.shape().rank() != 2)
    return ctx.error(ErrorCode::kInvalidArgument, "EyeLike needs a 2-D tensor");
  const int64_t k = ctx.attrs().getInt("k", 0);
  const int64_t rows = y.shape()[0], cols = y.shape()[1];
  return dispatchType(y.dtype(), TypeSet::kAll, "EyeLike", [&](auto tag) -> Status {
    constexpr DataType DT = decltype(tag)::value;
    using Tr = TypeTraits<DT>;
    using C = typename Tr::Compute;
    auto* out = y.data<typename Tr::Storage>();
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t j = i + k;
      if (j >= 0 && j < cols) out[i * cols + j] = Tr::store(static_cast<C>(1));
    }
    return Status::Ok();
  });
}

Status shrinkKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const double bias = ctx.attrs().getFloat("bias", 0.f);
  const double lambd = ctx.attrs().getFloat("lambd", 0.5f);
  return dispatchType(x.dtype(), TypeSet::kNumeric, "Shrink", [&](auto tag) -> Status {
    constexpr DataType DT = decltype(tag)::value;
    using Tr = TypeTraits<DT>;
    using C = typename Tr::Compute;
    const auto* in = x.data<typename Tr::Storage>();
    auto* out = y.data<typename Tr::Storage>();
    const int64_t n = x.numel();
#pragma omp parallel for if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) {
      const double v = static_cast<double>(Tr::load(in[i]));
      const double r = v < -lambd ? v + bias : v > lambd ? v - bias : 0.0;
      if constexpr (kIsFloatType<DT>)
        out[i] = Tr::store(static_cast<C>(r));
      else
        out[i] = Tr::store(saturateCast<C>(r));
    }
    return Status::Ok();
  });
}

Status mvnKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const Shape& s = x.shape();
  const int64_t rank = static_cast<int64_t>(s.rank());
  std::vector<bool> reduced(s.rank(), false);
  for (int64_t a : ctx.attrs().getInts("axes", {0, 2, 3})) {
    if (a < -rank || a >= rank)
      return ctx.error(ErrorCode::kInvalidArgument,
                       "MeanVarianceNormalization axis " + std::to_string(a) + " is out of range");
    reduced[static_cast<size_t>(a < 0 ? a + rank : a)] = true;
  }
  // Each element belongs to one group: its coordinates along the kept axes.
  int64_t groups = 1;
  std::vector<int64_t> groupStride(s.rank(), 0);
  for (size_t d = s.rank(); d-- > 0;)
    if (!reduced[d]) {
      groupStride[d] = groups;
      groups *= s[d];
    }
  auto groupOf = [&](int64_t i) {
    int64_t g = 0;
    for (size_t d = s.rank(); d-- > 0;) {
      g += (i % s[d]) * groupStride[d];
      i /= s[d];
    }
    return g;
  };
  const int64_t n = x.numel();
  std::vector<double> sum(static_cast<size_t>(groups), 0.0), sq(sum), cnt(sum);
  for (int64_t i = 0; i < n; ++i) {
    const double v = x.getAsDouble(i);
    const size_t g = static_cast<size_t>(groupOf(i));
    sum[g] += v;
    sq[g] += v * v;
    cnt[g] += 1;
  }
  return dispatchType(x.dtype(), TypeSet::kFloat, "MeanVarianceNormalization",
                      [&](auto tag) -> Status {
                        constexpr DataType DT = decltype(tag)::value;
                        if constexpr (kIsFloatType<DT>) {
                          using Tr = TypeTraits<DT>;
                          auto* out = y.data<typename Tr::Storage>();
                          for (int64_t i = 0; i < n; ++i) {
                            const size_t g = static_cast<size_t>(groupOf(i));
                            const double mean = sum[g] / cnt[g];
                            const double var = std::max(0.0, sq[g] / cnt[g] - mean * mean);
                            const double r = (x.getAsDouble(i) - mean) / (std::sqrt(var) + 1e-9);
                            out[i] = Tr::store(static_cast<float>(r));
                          }
                        }
                        return Status::Ok();
                      });
}

}  // namespace

void registerMiscKernels(KernelRegistry& r) {
  r.add("", "Trilu", triluKernel);
  r.add("", "EyeLike", eyeLikeKernel);
  r.add("", "Shrink", shrinkKernel);
  r.add("", "MeanVarianceNormalization", mvnKernel);
}

}  // namespace edgeinfer::ref
