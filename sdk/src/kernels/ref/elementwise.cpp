// CPU reference kernels for the elementwise ops: unary math and activations, Clip, binary
// arithmetic / logic / comparison with numpy broadcasting, the variadic Min/Max/Sum/Mean
// and Where. Float types compute in float (FP16/BF16 convert through float); integer types
// compute in their own type with two's-complement wrap-around.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <unordered_map>

#include "kernels/ref/activation.h"
#include "kernels/ref/elementwise_common.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer::ref {
namespace {

// ---- Unary ----------------------------------------------------------------------------------

using FloatFn = std::function<float(float)>;

/// The float function of a unary op (activations go through applyActivation so fused kernels
/// compute the same values). Returns an empty function for an op without a float form.
FloatFn floatUnary(const graph::Node& node) {
  const auto& a = node.attrs;
  const std::string& op = node.opType;
  auto act = [](Activation k, float alpha, float beta) -> FloatFn {
    return [=](float x) { return applyActivation(x, k, alpha, beta); };
  };
  if (op == "Relu") return act(Activation::kRelu, 0.f, 0.f);
  if (op == "LeakyRelu") return act(Activation::kLeakyRelu, a.getFloat("alpha", 0.01f), 0.f);
  if (op == "Sigmoid") return act(Activation::kSigmoid, 0.f, 0.f);
  if (op == "HardSigmoid")
    return act(Activation::kHardSigmoid, a.getFloat("alpha", 0.2f), a.getFloat("beta", 0.5f));
  if (op == "HardSwish") return act(Activation::kHardSwish, 0.f, 0.f);
  if (op == "Tanh") return act(Activation::kTanh, 0.f, 0.f);
  if (op == "Elu") return act(Activation::kElu, a.getFloat("alpha", 1.f), 0.f);
  if (op == "Selu")
    return act(Activation::kSelu, a.getFloat("alpha", 1.67326319217681884765625f),
               a.getFloat("gamma", 1.05070102214813232421875f));
  if (op == "Softplus") return act(Activation::kSoftplus, 0.f, 0.f);
  if (op == "Celu") {
    const float alpha = a.getFloat("alpha", 1.f);
    return [alpha](float x) {
      return std::max(0.f, x) + std::min(0.f, alpha * (std::exp(x / alpha) - 1.f));
    };
  }
  if (op == "ThresholdedRelu") {
    const float alpha = a.getFloat("alpha", 1.f);
    return [alpha](float x) { return x > alpha ? x : 0.f; };
  }
  if (op == "Softsign") return [](float x) { return x / (1.f + std::fabs(x)); };
  static const std::unordered_map<std::string, float (*)(float)> kMath = {
      {"Abs", [](float x) { return std::fabs(x); }},
      {"Neg", [](float x) { return -x; }},
      {"Reciprocal", [](float x) { return 1.f / x; }},
      {"Floor", [](float x) { return std::floor(x); }},
      {"Ceil", [](float x) { return std::ceil(x); }},
      // nearbyint rounds half to even in the default rounding mode, as ONNX Round requires.
      {"Round", [](float x) { return std::nearbyint(x); }},
      {"Sign",
       [](float x) { return std::isnan(x) ? x : (x > 0.f ? 1.f : (x < 0.f ? -1.f : 0.f)); }},
      {"Sqrt", [](float x) { return std::sqrt(x); }},
      {"Exp", [](float x) { return std::exp(x); }},
      {"Log", [](float x) { return std::log(x); }},
      {"Sin", [](float x) { return std::sin(x); }},
      {"Cos", [](float x) { return std::cos(x); }},
      {"Tan", [](float x) { return std::tan(x); }},
      {"Asin", [](float x) { return std::asin(x); }},
      {"Acos", [](float x) { return std::acos(x); }},
      {"Atan", [](float x) { return std::atan(x); }},
      {"Sinh", [](float x) { return std::sinh(x); }},
      {"Cosh", [](float x) { return std::cosh(x); }},
      {"Asinh", [](float x) { return std::asinh(x); }},
      {"Acosh", [](float x) { return std::acosh(x); }},
      {"Atanh", [](float x) { return std::atanh(x); }},
      {"Erf", [](float x) { return std::erf(x); }},
  };
  auto it = kMath.find(op);
  if (it != kMath.end()) return it->second;
  return {};
}

/// Integer forms of the unary ops ONNX defines on integers (computed in int64, wrapped back).
enum class IntUnary { kNone, kAbs, kNeg, kSign, kRelu };

IntUnary intUnary(const std::string& op) {
  if (op == "Abs") return IntUnary::kAbs;
  if (op == "Neg") return IntUnary::kNeg;
  if (op == "Sign") return IntUnary::kSign;
  if (op == "Relu") return IntUnary::kRelu;
  return IntUnary::kNone;
}

template <DataType DI, DataType DO, typename F>
void mapUnary(const Tensor& x, Tensor& y, F f) {
  using TI = TypeTraits<DI>;
  using TO = TypeTraits<DO>;
  const auto* in = x.data<typename TI::Storage>();
  auto* out = y.data<typename TO::Storage>();
  const int64_t n = x.numel();
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) out[i] = TO::store(f(TI::load(in[i])));
}

Status unaryKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  const std::string& op = ctx.node.opType;
  if (op == "Not") {
    if (x.dtype() != DataType::kBool) return ctx.error(ErrorCode::kUnsupported, "Not needs bool");
    mapUnary<DataType::kBool, DataType::kBool>(x, y, [](bool v) { return !v; });
    return Status::Ok();
  }
  if (op == "IsNaN" || op == "IsInf") {
    const bool isNan = op == "IsNaN";
    const bool neg = ctx.attrs().getInt("detect_negative", 1) != 0;
    const bool pos = ctx.attrs().getInt("detect_positive", 1) != 0;
    return dispatchType(x.dtype(), TypeSet::kFloat, op, [&](auto tag) -> Status {
      constexpr DataType DT = decltype(tag)::value;
      mapUnary<DT, DataType::kBool>(x, y, [=](float v) {
        if (isNan) return std::isnan(v);
        return std::isinf(v) && ((v > 0 && pos) || (v < 0 && neg));
      });
      return Status::Ok();
    });
  }
  const FloatFn ff = floatUnary(ctx.node);
  const IntUnary iu = intUnary(op);
  return dispatchType(x.dtype(), TypeSet::kNumeric, op, [&](auto tag) -> Status {
    constexpr DataType DT = decltype(tag)::value;
    if constexpr (kIsFloatType<DT>) {
      if (!ff) return ctx.error(ErrorCode::kUnsupported, "no float kernel for " + op);
      mapUnary<DT, DT>(x, y, ff);
    } else if constexpr (kIsIntType<DT>) {
      using C = typename TypeTraits<DT>::Compute;
      if (iu == IntUnary::kNone)
        return ctx.error(ErrorCode::kUnsupported, op + " is not defined on integer tensors");
      mapUnary<DT, DT>(x, y, [iu](C v) -> C {
        const int64_t w = static_cast<int64_t>(v);
        switch (iu) {
          case IntUnary::kAbs:
            return static_cast<C>(w < 0 ? uint64_t{0} - uint64_t(w) : w);
          case IntUnary::kNeg:
            return static_cast<C>(uint64_t{0} - static_cast<uint64_t>(w));
          case IntUnary::kSign:
            return static_cast<C>(w > 0 ? 1 : (w < 0 ? -1 : 0));
          case IntUnary::kRelu:
            return static_cast<C>(w > 0 ? w : 0);
          case IntUnary::kNone:
            break;
        }
        return v;
      });
    }
    return Status::Ok();
  });
}

// ---- Clip -----------------------------------------------------------------------------------

Status clipKernel(KernelContext& ctx) {
  const Tensor& x = *ctx.inputs[0];
  Tensor& y = *ctx.outputs[0];
  for (size_t i = 1; i < 3; ++i)
    if (ctx.hasInput(i) && ctx.inputs[i]->numel() != 1)
      return ctx.error(ErrorCode::kInvalidArgument,
                       std::string(i == 1 ? "min" : "max") + " must be a scalar");
  return dispatchType(x.dtype(), TypeSet::kNumeric, "Clip", [&](auto tag) -> Status {
    constexpr DataType DT = decltype(tag)::value;
    using C = typename TypeTraits<DT>::Compute;
    C lo =
        kIsFloatType<DT> ? -std::numeric_limits<C>::infinity() : std::numeric_limits<C>::lowest();
    C hi = kIsFloatType<DT> ? std::numeric_limits<C>::infinity() : std::numeric_limits<C>::max();
    if (ctx.hasInput(1)) lo = loadAt<DT>(*ctx.inputs[1], 0);
    if (ctx.hasInput(2)) hi = loadAt<DT>(*ctx.inputs[2], 0);
    if constexpr (kIsFloatType<DT>) {
      mapUnary<DT, DT>(x, y,
                       [=](float v) { return applyActivation(v, Activation::kClip, lo, hi); });
    } else {
      mapUnary<DT, DT>(x, y, [=](C v) { return std::min(std::max(v, lo), hi); });
    }
    return Status::Ok();
  });
}

// ---- Binary ---------------------------------------------------------------------------------

enum class BinOp {
  kAdd,
  kSub,
  kMul,
  kDiv,
  kMod,
  kFMod,
  kShl,
  kShr,
  kAnd,
  kOr,
  kXor,
  kEq,
  kLt,
  kGt,
  kLe,
  kGe,
};

bool isComparison(BinOp op) {
  return op == BinOp::kEq || op == BinOp::kLt || op == BinOp::kGt || op == BinOp::kLe ||
         op == BinOp::kGe;
}

/// Float arithmetic (Div by zero gives inf/nan as IEEE says).
float floatBinary(BinOp op, float a, float b) {
  switch (op) {
    case BinOp::kAdd:
      return a + b;
    case BinOp::kSub:
      return a - b;
    case BinOp::kMul:
      return a * b;
    case BinOp::kDiv:
      return a / b;
    case BinOp::kFMod:
      return std::fmod(a, b);
    default:
      return 0.f;
  }
}

/// Integer arithmetic with wrap-around. The caller has rejected zero divisors.
template <typename T>
T intBinary(BinOp op, T a, T b) {
  const uint64_t ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
  switch (op) {
    case BinOp::kAdd:
      return static_cast<T>(ua + ub);
    case BinOp::kSub:
      return static_cast<T>(ua - ub);
    case BinOp::kMul:
      return static_cast<T>(ua * ub);
    case BinOp::kDiv:  // C division truncates toward zero; MIN / -1 wraps to MIN
      if (std::is_signed_v<T> && b == T(-1)) return static_cast<T>(uint64_t{0} - ua);
      return static_cast<T>(a / b);
    case BinOp::kFMod:  // sign of the dividend, like C's %
      if (std::is_signed_v<T> && b == T(-1)) return 0;
      return static_cast<T>(a % b);
    case BinOp::kMod: {  // sign of the divisor, like Python's %
      if (std::is_signed_v<T> && b == T(-1)) return 0;
      T r = static_cast<T>(a % b);
      if (r != 0 && ((r < 0) != (b < 0))) r = static_cast<T>(r + b);
      return r;
    }
    case BinOp::kShl:
      return ub >= sizeof(T) * 8 ? T(0) : static_cast<T>(ua << ub);
    case BinOp::kShr:
      return ub >= sizeof(T) * 8 ? T(0) : static_cast<T>(ua >> ub);
    default:
      return 0;
  }
}

template <typename C>
bool compare(BinOp op, C a, C b) {
  switch (op) {
    case BinOp::kEq:
      return a == b;
    case BinOp::kLt:
      return a < b;
    case BinOp::kGt:
      return a > b;
    case BinOp::kLe:
      return a <= b;
    case BinOp::kGe:
      return a >= b;
    default:
      return false;
  }
}

template <DataType DA, DataType DB, DataType DO, typename F>
void mapBinary(const Tensor& a, const Tensor& b, Tensor& y, F f) {
  using TA = TypeTraits<DA>;
  using TB = TypeTraits<DB>;
  using TO = TypeTraits<DO>;
  const BroadcastIndexer ia(a.shape(), y.shape()), ib(b.shape(), y.shape());
  const auto* pa = a.data<typename TA::Storage>();
  const auto* pb = b.data<typename TB::Storage>();
  auto* out = y.data<typename TO::Storage>();
  const int64_t n = y.numel();
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) out[i] = TO::store(f(TA::load(pa[ia(i)]), TB::load(pb[ib(i)])));
}

BinOp binOpFor(const graph::Node& node) {
  static const std::unordered_map<std::string, BinOp> kOps = {
      {"Add", BinOp::kAdd},    {"Sub", BinOp::kSub},        {"Mul", BinOp::kMul},
      {"Div", BinOp::kDiv},    {"And", BinOp::kAnd},        {"Or", BinOp::kOr},
      {"Xor", BinOp::kXor},    {"Equal", BinOp::kEq},       {"Less", BinOp::kLt},
      {"Greater", BinOp::kGt}, {"LessOrEqual", BinOp::kLe}, {"GreaterOrEqual", BinOp::kGe},
  };
  const std::string& op = node.opType;
  if (op == "Mod") return node.attrs.getInt("fmod", 0) ? BinOp::kFMod : BinOp::kMod;
  if (op == "BitShift")
    return node.attrs.getString("direction", "") == "LEFT" ? BinOp::kShl : BinOp::kShr;
  return kOps.at(op);
}

Status checkBroadcast(KernelContext& ctx, size_t count) {
  for (size_t i = 0; i < count; ++i)
    if (!broadcastsTo(ctx.inputs[i]->shape(), ctx.outputs[0]->shape()))
      return ctx.error(ErrorCode::kInvalidArgument,
                       "input " + std::to_string(i) + " " + ctx.inputs[i]->shape().toString() +
                           " does not broadcast to " + ctx.outputs[0]->shape().toString());
  return Status::Ok();
}

Status binaryKernel(KernelContext& ctx) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  Tensor& y = *ctx.outputs[0];
  EI_RETURN_IF_ERROR(checkBroadcast(ctx, 2));
  if (a.dtype() != b.dtype()) return ctx.error(ErrorCode::kInvalidArgument, "input types differ");
  const BinOp op = binOpFor(ctx.node);
  const std::string& name = ctx.node.opType;
  if (op == BinOp::kAnd || op == BinOp::kOr || op == BinOp::kXor) {
    if (a.dtype() != DataType::kBool)
      return ctx.error(ErrorCode::kUnsupported, name + " needs bool inputs");
    mapBinary<DataType::kBool, DataType::kBool, DataType::kBool>(a, b, y, [op](bool p, bool q) {
      return op == BinOp::kAnd ? (p && q) : op == BinOp::kOr ? (p || q) : (p != q);
    });
    return Status::Ok();
  }
  if (isComparison(op)) {
    const TypeSet set = op == BinOp::kEq ? TypeSet::kAll : TypeSet::kNumeric;
    return dispatchType(a.dtype(), set, name, [&](auto tag) -> Status {
      constexpr DataType DT = decltype(tag)::value;
      using C = typename TypeTraits<DT>::Compute;
      mapBinary<DT, DT, DataType::kBool>(a, b, y, [op](C p, C q) { return compare(op, p, q); });
      return Status::Ok();
    });
  }
  const TypeSet set = (op == BinOp::kShl || op == BinOp::kShr || op == BinOp::kMod)
                          ? TypeSet::kInt
                          : TypeSet::kNumeric;
  if (op == BinOp::kMod && isFloatingPoint(a.dtype()))
    return ctx.error(ErrorCode::kInvalidModel, "Mod on floating-point inputs requires fmod=1");
  return dispatchType(a.dtype(), set, name, [&](auto tag) -> Status {
    constexpr DataType DT = decltype(tag)::value;
    using C = typename TypeTraits<DT>::Compute;
    if constexpr (kIsFloatType<DT>) {
      mapBinary<DT, DT, DT>(a, b, y, [op](float p, float q) { return floatBinary(op, p, q); });
    } else if constexpr (kIsIntType<DT>) {
      if (op == BinOp::kDiv || op == BinOp::kMod || op == BinOp::kFMod) {
        const C* pb = b.data<C>();
        for (int64_t i = 0; i < b.numel(); ++i)
          if (pb[i] == 0) return ctx.error(ErrorCode::kInvalidArgument, "integer division by zero");
      }
      mapBinary<DT, DT, DT>(a, b, y, [op](C p, C q) { return intBinary<C>(op, p, q); });
    }
    return Status::Ok();
  });
}

/// Integer power by squaring with wrap-around, for a non-negative integral exponent.
template <typename T>
T intPow(T base, uint64_t e) {
  uint64_t result = 1, b = static_cast<uint64_t>(base);
  while (e) {
    if (e & 1) result *= b;
    b *= b;
    e >>= 1;
  }
  return static_cast<T>(result);
}

Status powKernel(KernelContext& ctx) {
  const Tensor& a = *ctx.inputs[0];
  const Tensor& b = *ctx.inputs[1];
  Tensor& y = *ctx.outputs[0];
  EI_RETURN_IF_ERROR(checkBroadcast(ctx, 2));
  return dispatchType(a.dtype(), TypeSet::kNumeric, "Pow", [&](auto ta) -> Status {
    constexpr DataType DA = decltype(ta)::value;
    return dispatchType(b.dtype(), TypeSet::kNumeric, "Pow", [&](auto tb) -> Status {
      constexpr DataType DB = decltype(tb)::value;
      using CA = typename TypeTraits<DA>::Compute;
      using CB = typename TypeTraits<DB>::Compute;
      mapBinary<DA, DB, DA>(a, b, y, [](CA p, CB q) -> CA {
        if constexpr (std::is_floating_point_v<CA>) {
          return static_cast<float>(std::pow(static_cast<double>(p), static_cast<double>(q)));
        } else {
          const double qd = static_cast<double>(q);
          if (qd >= 0 && qd == std::floor(qd) && qd < 1e19)
            return intPow<CA>(p, static_cast<uint64_t>(qd));
          return saturateCast<CA>(std::pow(static_cast<double>(p), qd));
        }
      });
      return Status::Ok();
    });
  });
}

// ---- Variadic and Where -------------------------------------------------------------------

Status variadicKernel(KernelContext& ctx) {
  Tensor& y = *ctx.outputs[0];
  const std::string& op = ctx.node.opType;
  const size_t count = ctx.inputs.size();
  for (size_t i = 0; i < count; ++i) {
    if (!ctx.inputs[i]) return ctx.error(ErrorCode::kInvalidModel, op + " inputs cannot be absent");
    if (ctx.inputs[i]->dtype() != ctx.inputs[0]->dtype())
      return ctx.error(ErrorCode::kInvalidArgument, "input types differ");
  }
  EI_RETURN_IF_ERROR(checkBroadcast(ctx, count));
  const TypeSet set = (op == "Sum" || op == "Mean") ? TypeSet::kFloat : TypeSet::kNumeric;
  return dispatchType(y.dtype(), set, op, [&](auto tag) -> Status {
    constexpr DataType DT = decltype(tag)::value;
    using Tr = TypeTraits<DT>;
    using S = typename Tr::Storage;
    using C = typename Tr::Compute;
    std::vector<BroadcastIndexer> idx;
    std::vector<const S*> ptr;
    for (size_t i = 0; i < count; ++i) {
      idx.emplace_back(ctx.inputs[i]->shape(), y.shape());
      ptr.push_back(ctx.inputs[i]->template data<S>());
    }
    const int mode = op == "Max" ? 0 : op == "Min" ? 1 : op == "Sum" ? 2 : 3;
    S* out = y.data<S>();
    const int64_t n = y.numel();
#pragma omp parallel for if (n > kParallelThreshold)
    for (int64_t i = 0; i < n; ++i) {
      C acc = Tr::load(ptr[0][idx[0](i)]);
      for (size_t k = 1; k < count; ++k) {
        const C v = Tr::load(ptr[k][idx[k](i)]);
        if (mode >= 2) {
          acc = static_cast<C>(acc + v);
        } else if constexpr (kIsFloatType<DT>) {  // NaN propagates, like numpy.maximum
          if (std::isnan(v) || std::isnan(acc))
            acc = std::numeric_limits<float>::quiet_NaN();
          else
            acc = mode == 0 ? std::max(acc, v) : std::min(acc, v);
        } else {
          acc = mode == 0 ? std::max(acc, v) : std::min(acc, v);
        }
      }
      if (mode == 3) acc = static_cast<C>(acc / static_cast<C>(count));
      out[i] = Tr::store(acc);
    }
    return Status::Ok();
  });
}

/// Copies elements of `size` bytes by selecting between two broadcast sources.
template <typename U>
void whereCopy(const Tensor& c, const Tensor& x, const Tensor& yIn, Tensor& out) {
  const BroadcastIndexer ic(c.shape(), out.shape()), ix(x.shape(), out.shape()),
      iy(yIn.shape(), out.shape());
  const uint8_t* pc = c.data<uint8_t>();
  const U* px = x.data<U>();
  const U* py = yIn.data<U>();
  U* po = out.data<U>();
  const int64_t n = out.numel();
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) po[i] = pc[ic(i)] ? px[ix(i)] : py[iy(i)];
}

Status whereKernel(KernelContext& ctx) {
  const Tensor& c = *ctx.inputs[0];
  const Tensor& x = *ctx.inputs[1];
  const Tensor& yIn = *ctx.inputs[2];
  Tensor& out = *ctx.outputs[0];
  if (c.dtype() != DataType::kBool)
    return ctx.error(ErrorCode::kInvalidArgument, "Where condition must be bool");
  if (x.dtype() != yIn.dtype() || x.dtype() != out.dtype())
    return ctx.error(ErrorCode::kInvalidArgument, "Where X and Y types differ");
  EI_RETURN_IF_ERROR(checkBroadcast(ctx, 3));
  switch (dataTypeSize(x.dtype())) {
    case 1:
      whereCopy<uint8_t>(c, x, yIn, out);
      break;
    case 2:
      whereCopy<uint16_t>(c, x, yIn, out);
      break;
    case 4:
      whereCopy<uint32_t>(c, x, yIn, out);
      break;
    case 8:
      whereCopy<uint64_t>(c, x, yIn, out);
      break;
    default:
      return ctx.error(ErrorCode::kUnsupported, "Where: unsupported element type");
  }
  return Status::Ok();
}

}  // namespace

void registerCastKernel(KernelRegistry& r);

void registerElementwiseKernels(KernelRegistry& r) {
  for (const char* op : {"Abs",
                         "Neg",
                         "Reciprocal",
                         "Floor",
                         "Ceil",
                         "Round",
                         "Sign",
                         "Sqrt",
                         "Exp",
                         "Log",
                         "Sin",
                         "Cos",
                         "Tan",
                         "Asin",
                         "Acos",
                         "Atan",
                         "Sinh",
                         "Cosh",
                         "Asinh",
                         "Acosh",
                         "Atanh",
                         "Erf",
                         "Not",
                         "IsNaN",
                         "IsInf",
                         "Relu",
                         "LeakyRelu",
                         "Sigmoid",
                         "HardSigmoid",
                         "HardSwish",
                         "Tanh",
                         "Elu",
                         "Selu",
                         "Celu",
                         "Softplus",
                         "Softsign",
                         "ThresholdedRelu"})
    r.add("", op, unaryKernel);
  r.add("", "Clip", clipKernel);
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod", "BitShift", "And", "Or", "Xor", "Equal",
                         "Less", "Greater", "LessOrEqual", "GreaterOrEqual"})
    r.add("", op, binaryKernel);
  r.add("", "Pow", powKernel);
  for (const char* op : {"Min", "Max", "Sum", "Mean"}) r.add("", op, variadicKernel);
  r.add("", "Where", whereKernel);
  registerCastKernel(r);  // cast.cpp
}

}  // namespace edgeinfer::ref
