// Helpers shared by the CPU reference kernels: compile-time dispatch over the SDK's element
// types, float conversion for FP16/BF16 storage, numpy broadcasting by strides and small
// readers for shape-like tensors. Header-only and free of anything device-specific.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "edgeinfer/types.h"

namespace edgeinfer::ref {

/// Loops with more elements than this run under OpenMP; smaller ones (shape tensors) stay
/// serial because starting a thread team costs more than the work.
inline constexpr int64_t kParallelThreshold = 32768;

/// Storage and compute types of one DataType. FP16/BF16 are stored as uint16_t bit patterns
/// and computed in float; bool is stored as uint8_t 0/1 and computed as bool.
template <DataType DT>
struct TypeTraits;

template <>
struct TypeTraits<DataType::kFloat32> {
  using Storage = float;
  using Compute = float;
  static float load(float v) { return v; }
  static float store(float v) { return v; }
};
template <>
struct TypeTraits<DataType::kFloat16> {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t v) { return halfToFloat(v); }
  static uint16_t store(float v) { return floatToHalf(v); }
};
template <>
struct TypeTraits<DataType::kBFloat16> {
  using Storage = uint16_t;
  using Compute = float;
  static float load(uint16_t v) { return bf16ToFloat(v); }
  static uint16_t store(float v) { return floatToBf16(v); }
};
template <>
struct TypeTraits<DataType::kBool> {
  using Storage = uint8_t;
  using Compute = bool;
  static bool load(uint8_t v) { return v != 0; }
  static uint8_t store(bool v) { return v ? 1 : 0; }
};
#define EI_REF_INT_TRAITS_(DT, T)     \
  template <>                         \
  struct TypeTraits<DT> {             \
    using Storage = T;                \
    using Compute = T;                \
    static T load(T v) { return v; }  \
    static T store(T v) { return v; } \
  };
EI_REF_INT_TRAITS_(DataType::kInt8, int8_t)
EI_REF_INT_TRAITS_(DataType::kUInt8, uint8_t)
EI_REF_INT_TRAITS_(DataType::kInt32, int32_t)
EI_REF_INT_TRAITS_(DataType::kInt64, int64_t)
#undef EI_REF_INT_TRAITS_

/// The tag a dispatch helper passes to its callback; `decltype(tag)::value` is the DataType.
template <DataType DT>
using TypeTag = std::integral_constant<DataType, DT>;

template <DataType DT>
inline constexpr bool kIsFloatType =
    DT == DataType::kFloat32 || DT == DataType::kFloat16 || DT == DataType::kBFloat16;
template <DataType DT>
inline constexpr bool kIsIntType = DT == DataType::kInt8 || DT == DataType::kUInt8 ||
                                   DT == DataType::kInt32 || DT == DataType::kInt64;

/// Which types a dispatch accepts.
enum class TypeSet : uint8_t {
  kFloat,    // float32, float16, bfloat16
  kInt,      // int8, uint8, int32, int64
  kNumeric,  // kFloat + kInt
  kAll,      // kNumeric + bool
};

inline bool typeInSet(DataType t, TypeSet set) {
  const bool f = isFloatingPoint(t), i = isInteger(t);
  switch (set) {
    case TypeSet::kFloat:
      return f;
    case TypeSet::kInt:
      return i;
    case TypeSet::kNumeric:
      return f || i;
    case TypeSet::kAll:
      return f || i || t == DataType::kBool;
  }
  return false;
}

/// Calls `fn(TypeTag<DT>{})` for the runtime type `t` if it is in `set`; otherwise returns an
/// Unsupported status naming `what` (usually the op type). The callback returns a Status.
/// Every branch is instantiated, so callbacks use `if constexpr` on the tag to skip types they
/// cannot handle.
template <typename Fn>
Status dispatchType(DataType t, TypeSet set, const std::string& what, Fn&& fn) {
  if (!typeInSet(t, set))
    return Status(ErrorCode::kUnsupported,
                  what + " does not support element type " + dataTypeName(t));
  switch (t) {
    case DataType::kFloat32:
      return fn(TypeTag<DataType::kFloat32>{});
    case DataType::kFloat16:
      return fn(TypeTag<DataType::kFloat16>{});
    case DataType::kBFloat16:
      return fn(TypeTag<DataType::kBFloat16>{});
    case DataType::kInt8:
      return fn(TypeTag<DataType::kInt8>{});
    case DataType::kUInt8:
      return fn(TypeTag<DataType::kUInt8>{});
    case DataType::kInt32:
      return fn(TypeTag<DataType::kInt32>{});
    case DataType::kInt64:
      return fn(TypeTag<DataType::kInt64>{});
    case DataType::kBool:
      return fn(TypeTag<DataType::kBool>{});
    case DataType::kUndefined:
      break;
  }
  return Status(ErrorCode::kUnsupported, what + ": undefined element type");
}

/// Reads element i of a tensor of type DT in its compute type.
template <DataType DT>
typename TypeTraits<DT>::Compute loadAt(const Tensor& t, int64_t i) {
  return TypeTraits<DT>::load(t.data<typename TypeTraits<DT>::Storage>()[i]);
}

/// Converts a double to an integer type, saturating and mapping NaN to 0 (a plain C cast
/// is undefined behaviour out of range; ONNX leaves the result unspecified there).
template <typename I>
I saturateCast(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<I>::lowest()))
    return std::numeric_limits<I>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
  return static_cast<I>(v);
}

/// Maps flat indices of a broadcast output to flat offsets in one input (numpy rules): the
/// input's shape is right-aligned to the output's and its broadcast dimensions get stride 0.
class BroadcastIndexer {
 public:
  BroadcastIndexer() = default;
  BroadcastIndexer(const Shape& in, const Shape& out) {
    identity_ = in == out;
    scalar_ = in.numel() == 1;
    const size_t rank = out.rank();
    dims_ = out.dims();
    strides_.assign(rank, 0);
    const std::vector<int64_t> inStrides = contiguousStrides(in);
    const size_t lead = rank - in.rank();
    for (size_t i = 0; i < in.rank(); ++i) strides_[lead + i] = in[i] == 1 ? 0 : inStrides[i];
  }
  /// Offset in the input of output element `i`.
  int64_t operator()(int64_t i) const {
    if (identity_) return i;
    if (scalar_) return 0;
    int64_t off = 0;
    for (size_t d = dims_.size(); d-- > 0;) {
      const int64_t q = i / dims_[d];
      off += (i - q * dims_[d]) * strides_[d];
      i = q;
    }
    return off;
  }

 private:
  bool identity_ = true;
  bool scalar_ = false;
  std::vector<int64_t> dims_;
  std::vector<int64_t> strides_;
};

/// True if `in` broadcasts to exactly `out` (used by kernels to double-check shapes).
inline bool broadcastsTo(const Shape& in, const Shape& out) {
  if (in.rank() > out.rank()) return false;
  const size_t lead = out.rank() - in.rank();
  for (size_t i = 0; i < in.rank(); ++i)
    if (in[i] != 1 && in[i] != out[lead + i]) return false;
  return true;
}

/// Reads an integer tensor (int32/int64/int8/uint8) as int64 values.
inline std::vector<int64_t> readInts(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.getAsInt64(i);
  return v;
}

/// Copies `count` elements of `elemSize` bytes each; no type interpretation.
inline void copyElements(void* dst, const void* src, int64_t count, size_t elemSize) {
  if (count > 0) std::memcpy(dst, src, static_cast<size_t>(count) * elemSize);
}

/// Calls `fn(U{})` with the unsigned integer type U as wide as one element of `t`, for kernels
/// that only move elements. Returns false for a type of no supported width.
template <typename Fn>
bool dispatchBySize(DataType t, Fn&& fn) {
  switch (dataTypeSize(t)) {
    case 1:
      fn(uint8_t{});
      return true;
    case 2:
      fn(uint16_t{});
      return true;
    case 4:
      fn(uint32_t{});
      return true;
    case 8:
      fn(uint64_t{});
      return true;
    default:
      return false;
  }
}

/// y[i] = x[base + sum_d c_d * strides[d]] where c is the multi-index of i in y's shape.
/// Transpose, Slice and Expand are all this copy with different strides.
template <typename U>
void stridedCopyT(const Tensor& x, Tensor& y, const std::vector<int64_t>& strides, int64_t base) {
  const std::vector<int64_t>& dims = y.shape().dims();
  const U* in = x.data<U>();
  U* out = y.data<U>();
  const int64_t n = y.numel();
#pragma omp parallel for if (n > kParallelThreshold)
  for (int64_t i = 0; i < n; ++i) {
    int64_t rem = i, off = base;
    for (size_t d = dims.size(); d-- > 0;) {
      const int64_t q = rem / dims[d];
      off += (rem - q * dims[d]) * strides[d];
      rem = q;
    }
    out[i] = in[off];
  }
}

inline Status stridedCopy(const Tensor& x, Tensor& y, const std::vector<int64_t>& strides,
                          int64_t base) {
  if (strides.size() != y.shape().rank())
    return Status(ErrorCode::kInternal, "stridedCopy: stride count does not match the output");
  if (y.numel() == 0) return Status::Ok();
  if (!dispatchBySize(y.dtype(), [&](auto u) { stridedCopyT<decltype(u)>(x, y, strides, base); }))
    return Status(ErrorCode::kUnsupported,
                  std::string("unsupported element type ") + dataTypeName(y.dtype()));
  return Status::Ok();
}

}  // namespace edgeinfer::ref
