// Typed elementwise kernels (typed_eltwise.h). One grid-stride kernel template per op class
// (cast, compare, logic, select, classify, integer arithmetic), instantiated per storage type
// (and per source/destination pair for Cast); offsets come from the broadcast plan, in 32-bit
// arithmetic when the tensors allow it. The conversions mirror the CPU reference
// (kernels/ref/cast.cpp, elementwise.cpp): float -> integer truncates toward zero, saturates
// and maps NaN to 0; anything -> bool is x != 0; integer -> narrower integer wraps.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_half.h"
#include "kernels/cuda/typed_eltwise.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kThreads = 256;

/// Storage kinds, one per template instantiation.
enum Kind : int { kF32, kF16, kI32, kI64, kI8, kU8, kB };

template <int K>
struct Tr;
template <>
struct Tr<kF32> {
  using S = float;
  static constexpr bool kFloat = true, kBool = false;
};
template <>
struct Tr<kF16> {
  using S = __half;
  static constexpr bool kFloat = true, kBool = false;
};
template <>
struct Tr<kI32> {
  using S = int32_t;
  static constexpr bool kFloat = false, kBool = false;
  static constexpr S kLowest = INT32_MIN, kMax = INT32_MAX;
};
template <>
struct Tr<kI64> {
  using S = int64_t;
  static constexpr bool kFloat = false, kBool = false;
  static constexpr S kLowest = INT64_MIN, kMax = INT64_MAX;
};
template <>
struct Tr<kI8> {
  using S = int8_t;
  static constexpr bool kFloat = false, kBool = false;
  static constexpr S kLowest = INT8_MIN, kMax = INT8_MAX;
};
template <>
struct Tr<kU8> {
  using S = uint8_t;
  static constexpr bool kFloat = false, kBool = false;
  static constexpr S kLowest = 0, kMax = UINT8_MAX;
};
template <>
struct Tr<kB> {
  using S = uint8_t;
  static constexpr bool kFloat = false, kBool = true;
};

bool kindOf(DataType t, int* k) {
  switch (t) {
    case DataType::kFloat32:
      *k = kF32;
      return true;
    case DataType::kFloat16:
      *k = kF16;
      return true;
    case DataType::kInt32:
      *k = kI32;
      return true;
    case DataType::kInt64:
      *k = kI64;
      return true;
    case DataType::kInt8:
      *k = kI8;
      return true;
    case DataType::kUInt8:
      *k = kU8;
      return true;
    case DataType::kBool:
      *k = kB;
      return true;
    default:
      return false;
  }
}

template <int K>
__device__ __forceinline__ float asFloat(typename Tr<K>::S v) {
  if constexpr (K == kF32)
    return v;
  else if constexpr (K == kF16)
    return __half2float(v);
  else
    return static_cast<float>(static_cast<long long>(v));
}

template <int K>
__device__ __forceinline__ long long asInt(typename Tr<K>::S v) {
  if constexpr (Tr<K>::kBool)
    return v != 0 ? 1 : 0;
  else
    return static_cast<long long>(v);
}

/// Saturating float -> integer conversion (NaN -> 0), truncating toward zero.
template <typename S>
__device__ __forceinline__ S saturate(double v, double lo, double hi) {
  if (v != v) return S(0);
  if (v <= lo) return static_cast<S>(lo);
  if (v >= hi) return static_cast<S>(hi);
  return static_cast<S>(v);
}

template <int KO>
__device__ __forceinline__ typename Tr<KO>::S fromDouble(double v) {
  using S = typename Tr<KO>::S;
  if constexpr (KO == kI32) return saturate<S>(v, -2147483648.0, 2147483647.0);
  if constexpr (KO == kI8) return saturate<S>(v, -128.0, 127.0);
  if constexpr (KO == kU8) return saturate<S>(v, 0.0, 255.0);
  if constexpr (KO == kI64) {
    if (v != v) return S(0);
    if (v <= -9223372036854775808.0) return LLONG_MIN;
    if (v >= 9223372036854775808.0) return LLONG_MAX;
    return static_cast<S>(v);
  }
  return S(0);
}

template <int KI, int KO>
__device__ __forceinline__ typename Tr<KO>::S convert(typename Tr<KI>::S v, bool roundToHalf) {
  using SO = typename Tr<KO>::S;
  if constexpr (Tr<KO>::kBool) {
    if constexpr (Tr<KI>::kFloat)
      return asFloat<KI>(v) != 0.f ? 1 : 0;  // NaN -> true
    else
      return v != 0 ? 1 : 0;
  } else if constexpr (Tr<KI>::kBool) {
    if constexpr (KO == kF16)
      return __float2half_rn(v ? 1.f : 0.f);
    else
      return static_cast<SO>(v ? 1 : 0);
  } else if constexpr (Tr<KO>::kFloat) {
    float f = Tr<KI>::kFloat ? asFloat<KI>(v) : static_cast<float>(asInt<KI>(v));
    if (roundToHalf) f = __half2float(__float2half_rn(f));
    if constexpr (KO == kF16)
      return __float2half_rn(f);
    else
      return f;
  } else if constexpr (!Tr<KI>::kFloat) {
    return static_cast<SO>(asInt<KI>(v));  // integer -> integer wraps
  } else {
    return fromDouble<KO>(static_cast<double>(asFloat<KI>(v)));
  }
}

template <typename I>
struct Params {
  I dims[kEltMaxDims];
  I strides[3][kEltMaxDims];
  int first;  // kEltMaxDims - rank
  I numel;
  TypedOp op;
  bool roundToHalf, detectNegative, detectPositive;
};

template <int NIN, typename I>
__device__ __forceinline__ void offsetsOf(const Params<I>& p, I e, I (&o)[3]) {
  o[0] = o[1] = o[2] = 0;
  I rem = e;
#pragma unroll
  for (int d = kEltMaxDims - 1; d >= 0; --d) {
    if (d < p.first) break;
    const I c = d == p.first ? rem : rem % p.dims[d];
    rem = d == p.first ? I(0) : rem / p.dims[d];
#pragma unroll
    for (int k = 0; k < NIN; ++k) o[k] += c * p.strides[k][d];
  }
}

/// Calls f(e, offsets) for every output element e of this thread's grid-stride share.
template <int NIN, typename I, typename F>
__device__ __forceinline__ void forEach(const Params<I>& p, F&& f) {
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I e = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; e < p.numel; e += step) {
    I o[3];
    offsetsOf<NIN>(p, e, o);
    f(e, o);
  }
}

template <int KI, int KO, typename I>
__global__ void __launch_bounds__(kThreads)
    castKernel(const typename Tr<KI>::S* __restrict__ x, typename Tr<KO>::S* __restrict__ y,
               const Params<I> p) {
  forEach<1>(p, [&](I e, const I(&o)[3]) { y[e] = convert<KI, KO>(x[o[0]], p.roundToHalf); });
}

template <int K, typename I>
__global__ void __launch_bounds__(kThreads)
    compareKernel(const typename Tr<K>::S* __restrict__ a, const typename Tr<K>::S* __restrict__ b,
                  uint8_t* __restrict__ y, const Params<I> p) {
  forEach<2>(p, [&](I e, const I(&o)[3]) {
    bool r = false;
    if constexpr (Tr<K>::kFloat) {
      const float u = asFloat<K>(a[o[0]]), v = asFloat<K>(b[o[1]]);
      switch (p.op) {
        case TypedOp::kEqual:
          r = u == v;
          break;
        case TypedOp::kGreater:
          r = u > v;
          break;
        case TypedOp::kGreaterOrEqual:
          r = u >= v;
          break;
        case TypedOp::kLess:
          r = u < v;
          break;
        default:
          r = u <= v;
          break;
      }
    } else {
      const long long u = asInt<K>(a[o[0]]), v = asInt<K>(b[o[1]]);
      switch (p.op) {
        case TypedOp::kEqual:
          r = u == v;
          break;
        case TypedOp::kGreater:
          r = u > v;
          break;
        case TypedOp::kGreaterOrEqual:
          r = u >= v;
          break;
        case TypedOp::kLess:
          r = u < v;
          break;
        default:
          r = u <= v;
          break;
      }
    }
    y[e] = r ? 1 : 0;
  });
}

template <int NIN, typename I>
__global__ void __launch_bounds__(kThreads)
    logicKernel(const uint8_t* __restrict__ a, const uint8_t* __restrict__ b,
                uint8_t* __restrict__ y, const Params<I> p) {
  forEach<NIN>(p, [&](I e, const I(&o)[3]) {
    const bool u = a[o[0]] != 0;
    bool r;
    if constexpr (NIN == 1) {
      r = !u;
    } else {
      const bool v = b[o[1]] != 0;
      r = p.op == TypedOp::kAnd ? (u && v) : p.op == TypedOp::kOr ? (u || v) : (u != v);
    }
    y[e] = r ? 1 : 0;
  });
}

/// Where on elements of sizeof(U) bytes (values are copied, never converted).
template <typename U, typename I>
__global__ void __launch_bounds__(kThreads)
    whereKernel(const uint8_t* __restrict__ c, const U* __restrict__ a, const U* __restrict__ b,
                U* __restrict__ y, const Params<I> p) {
  forEach<3>(p, [&](I e, const I(&o)[3]) { y[e] = c[o[0]] != 0 ? a[o[1]] : b[o[2]]; });
}

template <int K, typename I>
__global__ void __launch_bounds__(kThreads)
    classifyKernel(const typename Tr<K>::S* __restrict__ x, uint8_t* __restrict__ y,
                   const Params<I> p) {
  forEach<1>(p, [&](I e, const I(&o)[3]) {
    const float v = asFloat<K>(x[o[0]]);
    bool r;
    if (p.op == TypedOp::kIsNaN)
      r = v != v;
    else
      r = isinf(v) && ((v > 0.f && p.detectPositive) || (v < 0.f && p.detectNegative));
    y[e] = r ? 1 : 0;
  });
}

template <typename S>
__device__ __forceinline__ bool negative(S v) {
  if constexpr (std::is_signed<S>::value)
    return v < S(0);
  else
    return false;
}

template <int K, typename I>
__global__ void __launch_bounds__(kThreads)
    intArithKernel(const typename Tr<K>::S* __restrict__ a, const typename Tr<K>::S* __restrict__ b,
                   typename Tr<K>::S* __restrict__ y, const Params<I> p) {
  using S = typename Tr<K>::S;
  constexpr bool kSigned = K != kU8;
  forEach<2>(p, [&](I e, const I(&o)[3]) {
    const S u = a[o[0]], v = b[o[1]];
    // Wrap-around arithmetic in unsigned 64 bits, like the reference.
    const unsigned long long uu = static_cast<unsigned long long>(static_cast<long long>(u));
    const unsigned long long uv = static_cast<unsigned long long>(static_cast<long long>(v));
    S r = 0;
    switch (p.op) {
      case TypedOp::kIntAdd:
        r = static_cast<S>(uu + uv);
        break;
      case TypedOp::kIntSub:
        r = static_cast<S>(uu - uv);
        break;
      case TypedOp::kIntMul:
        r = static_cast<S>(uu * uv);
        break;
      case TypedOp::kIntDiv:
        if (v == 0)
          r = 0;
        else if (kSigned && v == S(-1))
          r = static_cast<S>(0ull - uu);
        else
          r = static_cast<S>(u / v);
        break;
      case TypedOp::kIntFMod:
        r = (v == 0 || (kSigned && v == S(-1))) ? S(0) : static_cast<S>(u % v);
        break;
      case TypedOp::kIntMin:
        r = u < v ? u : v;
        break;
      case TypedOp::kIntMax:
        r = u < v ? v : u;
        break;
      case TypedOp::kIntPow:
        if (!negative(v)) {  // square and multiply in 64 bits (the reference's intPow)
          unsigned long long result = 1, base = uu, e = static_cast<unsigned long long>(v);
          while (e) {
            if (e & 1) result *= base;
            base *= base;
            e >>= 1;
          }
          r = static_cast<S>(result);
        } else {  // the reference's saturateCast(pow(base, exponent))
          const double d = pow(static_cast<double>(u), static_cast<double>(v));
          if (d != d)
            r = 0;
          else if (d <= static_cast<double>(Tr<K>::kLowest))
            r = Tr<K>::kLowest;
          else if (d >= static_cast<double>(Tr<K>::kMax))
            r = Tr<K>::kMax;
          else
            r = static_cast<S>(d);
        }
        break;
      case TypedOp::kShiftLeft:
        r = uv >= 8 * sizeof(S) ? S(0) : static_cast<S>(uu << uv);
        break;
      case TypedOp::kShiftRight:
        r = uv >= 8 * sizeof(S) ? S(0) : static_cast<S>(uu >> uv);
        break;
      default:  // kIntMod
        if (v == 0 || (kSigned && v == S(-1))) {
          r = 0;
        } else {
          r = static_cast<S>(u % v);
          if constexpr (kSigned)
            if (r != 0 && ((r < 0) != (v < 0))) r = static_cast<S>(r + v);
        }
        break;
    }
    y[e] = r;
  });
}

/// QuantizeLinear (reference: kernels/ref/quant.cpp, in float): NaN gives the zero point.
template <int KX, int KQ, typename I>
__global__ void __launch_bounds__(kThreads)
    quantizeKernel(const typename Tr<KX>::S* __restrict__ x, typename Tr<KQ>::S* __restrict__ y,
                   const float* __restrict__ scale, const int32_t* __restrict__ zp, I channels,
                   I inner, const Params<I> p) {
  constexpr float lo = KQ == kU8 ? 0.f : -128.f, hi = KQ == kU8 ? 255.f : 127.f;
  forEach<1>(p, [&](I e, const I(&o)[3]) {
    const I c = channels == 1 ? I(0) : (e / inner) % channels;
    const float z = zp ? static_cast<float>(zp[c]) : 0.f;
    const float v = rintf(asFloat<KX>(x[o[0]]) / scale[c]) + z;
    y[e] = static_cast<typename Tr<KQ>::S>(v != v ? z : fminf(fmaxf(v, lo), hi));
  });
}

template <int KQ, int KY, typename I>
__global__ void __launch_bounds__(kThreads)
    dequantizeKernel(const typename Tr<KQ>::S* __restrict__ x, typename Tr<KY>::S* __restrict__ y,
                     const float* __restrict__ scale, const int32_t* __restrict__ zp, I channels,
                     I inner, bool roundToHalf, const Params<I> p) {
  forEach<1>(p, [&](I e, const I(&o)[3]) {
    const I c = channels == 1 ? I(0) : (e / inner) % channels;
    const long long z = zp ? zp[c] : 0;
    float v = static_cast<float>(static_cast<long long>(x[o[0]]) - z) * scale[c];
    if (roundToHalf) v = __half2float(__float2half_rn(v));
    if constexpr (KY == kF16)
      y[e] = __float2half_rn(v);
    else
      y[e] = v;
  });
}

template <typename I>
Params<I> paramsOf(const TypedEltPlan& plan) {
  Params<I> p{};
  p.first = kEltMaxDims - plan.rank;
  for (int d = 0; d < kEltMaxDims; ++d) {
    p.dims[d] = 1;
    p.strides[0][d] = p.strides[1][d] = p.strides[2][d] = 0;
  }
  for (int d = 0; d < plan.rank; ++d) {
    p.dims[p.first + d] = static_cast<I>(plan.dims[d]);
    for (int k = 0; k < plan.numInputs; ++k)
      p.strides[k][p.first + d] = static_cast<I>(plan.strides[k][d]);
  }
  p.numel = static_cast<I>(plan.numel);
  p.op = plan.op;
  p.roundToHalf = plan.roundToHalf;
  p.detectNegative = plan.detectNegative;
  p.detectPositive = plan.detectPositive;
  return p;
}

/// Calls f(std::integral_constant<int, K>) for the storage kind k (0 .. kB).
template <typename F>
Status withKind(int k, F&& f) {
  switch (k) {
    case kF32:
      return f(std::integral_constant<int, kF32>{});
    case kF16:
      return f(std::integral_constant<int, kF16>{});
    case kI32:
      return f(std::integral_constant<int, kI32>{});
    case kI64:
      return f(std::integral_constant<int, kI64>{});
    case kI8:
      return f(std::integral_constant<int, kI8>{});
    case kU8:
      return f(std::integral_constant<int, kU8>{});
    default:
      return f(std::integral_constant<int, kB>{});
  }
}

template <typename I>
Status launchWith(const TypedEltPlan& plan, int ki, int ko, const void* const* in, void* out,
                  int grid, cudaStream_t s) {
  const Params<I> p = paramsOf<I>(plan);
  const auto bad = [] { return Status(ErrorCode::kInternal, "typed elementwise: bad types"); };
  switch (plan.op) {
    case TypedOp::kCast:
      return withKind(ki, [&](auto a) {
        return withKind(ko, [&](auto b) {
          constexpr int KI = decltype(a)::value, KO = decltype(b)::value;
          castKernel<KI, KO, I>
              <<<grid, kThreads, 0, s>>>(static_cast<const typename Tr<KI>::S*>(in[0]),
                                         static_cast<typename Tr<KO>::S*>(out), p);
          return Status::Ok();
        });
      });
    case TypedOp::kEqual:
    case TypedOp::kGreater:
    case TypedOp::kGreaterOrEqual:
    case TypedOp::kLess:
    case TypedOp::kLessOrEqual:
      return withKind(ki, [&](auto a) {
        constexpr int K = decltype(a)::value;
        using S = typename Tr<K>::S;
        compareKernel<K, I><<<grid, kThreads, 0, s>>>(static_cast<const S*>(in[0]),
                                                      static_cast<const S*>(in[1]),
                                                      static_cast<uint8_t*>(out), p);
        return Status::Ok();
      });
    case TypedOp::kAnd:
    case TypedOp::kOr:
    case TypedOp::kXor:
      logicKernel<2, I><<<grid, kThreads, 0, s>>>(static_cast<const uint8_t*>(in[0]),
                                                  static_cast<const uint8_t*>(in[1]),
                                                  static_cast<uint8_t*>(out), p);
      return Status::Ok();
    case TypedOp::kNot:
      logicKernel<1, I><<<grid, kThreads, 0, s>>>(static_cast<const uint8_t*>(in[0]), nullptr,
                                                  static_cast<uint8_t*>(out), p);
      return Status::Ok();
    case TypedOp::kWhere: {
      const auto* c = static_cast<const uint8_t*>(in[0]);
      switch (dataTypeSize(plan.inType)) {
        case 1:
          whereKernel<uint8_t, I><<<grid, kThreads, 0, s>>>(c, static_cast<const uint8_t*>(in[1]),
                                                            static_cast<const uint8_t*>(in[2]),
                                                            static_cast<uint8_t*>(out), p);
          return Status::Ok();
        case 2:
          whereKernel<uint16_t, I><<<grid, kThreads, 0, s>>>(c, static_cast<const uint16_t*>(in[1]),
                                                             static_cast<const uint16_t*>(in[2]),
                                                             static_cast<uint16_t*>(out), p);
          return Status::Ok();
        case 4:
          whereKernel<uint32_t, I><<<grid, kThreads, 0, s>>>(c, static_cast<const uint32_t*>(in[1]),
                                                             static_cast<const uint32_t*>(in[2]),
                                                             static_cast<uint32_t*>(out), p);
          return Status::Ok();
        case 8:
          whereKernel<uint64_t, I><<<grid, kThreads, 0, s>>>(c, static_cast<const uint64_t*>(in[1]),
                                                             static_cast<const uint64_t*>(in[2]),
                                                             static_cast<uint64_t*>(out), p);
          return Status::Ok();
        default:
          return bad();
      }
    }
    case TypedOp::kIsNaN:
    case TypedOp::kIsInf:
      if (ki == kF32)
        classifyKernel<kF32, I><<<grid, kThreads, 0, s>>>(static_cast<const float*>(in[0]),
                                                          static_cast<uint8_t*>(out), p);
      else if (ki == kF16)
        classifyKernel<kF16, I><<<grid, kThreads, 0, s>>>(static_cast<const __half*>(in[0]),
                                                          static_cast<uint8_t*>(out), p);
      else
        return bad();
      return Status::Ok();
    case TypedOp::kQuantize:
      if (!plan.scale || (ki != kF32 && ki != kF16) || (ko != kI8 && ko != kU8)) return bad();
      return withKind(ki, [&](auto a) {
        return withKind(ko, [&](auto b) {
          constexpr int KX = decltype(a)::value, KQ = decltype(b)::value;
          if constexpr ((KX == kF32 || KX == kF16) && (KQ == kI8 || KQ == kU8)) {
            quantizeKernel<KX, KQ, I><<<grid, kThreads, 0, s>>>(
                static_cast<const typename Tr<KX>::S*>(in[0]),
                static_cast<typename Tr<KQ>::S*>(out), plan.scale, plan.zeroPoint,
                static_cast<I>(plan.channels), static_cast<I>(plan.inner), p);
            return Status::Ok();
          } else {
            return bad();
          }
        });
      });
    case TypedOp::kDequantize:
      if (!plan.scale || (ki != kI8 && ki != kU8 && ki != kI32) || (ko != kF32 && ko != kF16))
        return bad();
      return withKind(ki, [&](auto a) {
        return withKind(ko, [&](auto b) {
          constexpr int KQ = decltype(a)::value, KY = decltype(b)::value;
          if constexpr ((KQ == kI8 || KQ == kU8 || KQ == kI32) && (KY == kF32 || KY == kF16)) {
            dequantizeKernel<KQ, KY, I><<<grid, kThreads, 0, s>>>(
                static_cast<const typename Tr<KQ>::S*>(in[0]),
                static_cast<typename Tr<KY>::S*>(out), plan.scale, plan.zeroPoint,
                static_cast<I>(plan.channels), static_cast<I>(plan.inner), plan.roundToHalf, p);
            return Status::Ok();
          } else {
            return bad();
          }
        });
      });
    default:  // integer arithmetic
      if (ki == kF32 || ki == kF16 || ki == kB) return bad();
      return withKind(ki, [&](auto a) {
        constexpr int K = decltype(a)::value;
        if constexpr (Tr<K>::kFloat || Tr<K>::kBool) {
          return bad();
        } else {
          using S = typename Tr<K>::S;
          intArithKernel<K, I><<<grid, kThreads, 0, s>>>(
              static_cast<const S*>(in[0]), static_cast<const S*>(in[1]), static_cast<S*>(out), p);
          return Status::Ok();
        }
      });
  }
}

}  // namespace

Status launchTypedElt(const TypedEltPlan& plan, const void* const* inputs, void* output,
                      int maxBlocks, void* stream) {
  if (plan.numel == 0) return Status::Ok();
  int ki = 0, ko = 0;
  if (plan.rank < 1 || plan.rank > kEltMaxDims || plan.numInputs < 1 || plan.numInputs > 3 ||
      !kindOf(plan.inType, &ki) || !kindOf(plan.outType, &ko))
    return Status(ErrorCode::kInternal, "malformed typed elementwise plan");
  auto s = static_cast<cudaStream_t>(stream);
  const int grid = dev::gridFor(plan.numel, kThreads, maxBlocks);
  const Status st = plan.numel < INT_MAX
                        ? launchWith<uint32_t>(plan, ki, ko, inputs, output, grid, s)
                        : launchWith<int64_t>(plan, ki, ko, inputs, output, grid, s);
  EI_RETURN_IF_ERROR(st);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace edgeinfer::cuda
