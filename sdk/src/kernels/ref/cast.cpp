// CPU reference kernels for Cast and CastLike (the same conversion, to input 1's type). The
// canonical `to` attribute holds an edgeinfer::DataType value. Each value converts from the
// source compute type (float for FP16/BF16) to the destination's:
//   - float -> integer truncates toward zero; out-of-range values saturate and NaN becomes 0
//     (ONNX leaves those undefined; saturating keeps the oracle free of undefined behaviour);
//   - anything -> bool is `x != 0` (NaN -> true); bool -> anything is 0 or 1;
//   - integer -> narrower integer wraps (two's complement, like numpy);
//   - float32 <-> float16 / bfloat16 rounds to nearest even.
#include <cstring>

#include "kernels/ref/elementwise_common.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer::ref {
namespace {

template <DataType DI, DataType DO>
void castLoop(const Tensor& x, Tensor& y) {
  using TI = TypeTraits<DI>;
  using TO = TypeTraits<DO>;
  using CI = typename TI::Compute;
  using CO = typename TO::Compute;
  const auto* in = x.data<typename TI::Storage>();
  auto* out = y.data<typename TO::Storage>();
  const int64_t n = x.numel();
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    const CI v = TI::load(in[i]);
    CO r;
    if constexpr (std::is_same_v<CO, bool>) {
      r = v != CI(0);
    } else if constexpr (std::is_same_v<CI, bool>) {
      r = static_cast<CO>(v ? 1 : 0);
    } else if constexpr (std::is_floating_point_v<CO>) {
      r = static_cast<CO>(v);
    } else if constexpr (std::is_integral_v<CI>) {
      r = static_cast<CO>(v);  // integer -> integer wraps (two's complement), as numpy
    } else {
      r = saturateCast<CO>(static_cast<double>(v));
    }
    out[i] = TO::store(r);
  }
}

/// Converts every element of x into y's element type (shapes already match).
Status castTensor(const Tensor& x, Tensor& y) {
  if (x.dtype() == y.dtype()) {
    copyElements(y.raw(), x.raw(), x.numel(), dataTypeSize(x.dtype()));
    return Status::Ok();
  }
  return dispatchType(x.dtype(), TypeSet::kAll, "Cast", [&](auto ti) -> Status {
    return dispatchType(y.dtype(), TypeSet::kAll, "Cast", [&](auto to) -> Status {
      castLoop<decltype(ti)::value, decltype(to)::value>(x, y);
      return Status::Ok();
    });
  });
}

Status castKernel(KernelContext& ctx) {
  if (ctx.outputs[0]->dtype() != static_cast<DataType>(ctx.attrs().getInt("to", 0)))
    return ctx.error(ErrorCode::kInternal, "Cast output type does not match `to`");
  return castTensor(*ctx.inputs[0], *ctx.outputs[0]);
}

/// CastLike: Cast to the element type of input 1 (its values are not read).
Status castLikeKernel(KernelContext& ctx) {
  if (ctx.outputs[0]->dtype() != ctx.inputs[1]->dtype())
    return ctx.error(ErrorCode::kInternal, "CastLike output type does not match input 1");
  return castTensor(*ctx.inputs[0], *ctx.outputs[0]);
}

}  // namespace

void registerCastKernel(KernelRegistry& r) {
  r.add("", "Cast", castKernel);
  r.add("", "CastLike", castLikeKernel);
}

}  // namespace edgeinfer::ref
