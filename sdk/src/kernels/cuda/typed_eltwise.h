// Elementwise CUDA kernels over any storage type (the `cuda` provider's "typed" family): Cast,
// the comparisons, the logical ops, Where, IsNaN / IsInf, integer arithmetic, and
// QuantizeLinear / DequantizeLinear, BitShift. The float
// family (eltwise.h) is vectorised and computes in float; these kernels load each operand in
// its own type (float, half, int8/uint8/int32/int64, bool as one byte 0/1) and compare or
// compute exactly: integers as int64, floats as float. Broadcasting uses the same plan as the
// float family (planBroadcast). Plain C++ (no device syntax).
#pragma once

#include <cstdint>

#include "edgeinfer/status.h"
#include "edgeinfer/types.h"
#include "kernels/cuda/eltwise.h"

namespace edgeinfer::cuda {

enum class TypedOp : int32_t {
  kCast,  // input 0 (inType) -> outType
  // comparisons: inputs 0 and 1 (inType) -> bool
  kEqual,
  kGreater,
  kGreaterOrEqual,
  kLess,
  kLessOrEqual,
  // logical: bool inputs -> bool
  kAnd,
  kOr,
  kXor,
  kNot,
  kWhere,  // input 0 bool, inputs 1 and 2 (inType) -> inType
  kIsNaN,  // float input -> bool
  kIsInf,  // float input -> bool (detectNegative / detectPositive)
  // integer arithmetic, inType == outType (int32 / int64 / int8 / uint8); a zero divisor gives 0
  kIntAdd,
  kIntSub,
  kIntMul,
  kIntDiv,   // truncates toward zero; MIN / -1 wraps
  kIntMod,   // sign of the divisor (Python's %)
  kIntFMod,  // sign of the dividend (C's %)
  kIntMin,
  kIntMax,
  kIntPow,     // exponent >= 0: wraps like repeated multiplication; < 0: pow() saturated
  kShiftLeft,  // BitShift (uint8): a shift of 8 or more gives 0
  kShiftRight,
  // QuantizeLinear: float -> int8 / uint8, saturate(round_half_even(x / scale) + zero point);
  // DequantizeLinear: int8 / uint8 / int32 -> float, (q - zero point) * scale. Per tensor or
  // per channel: element e (physical index) uses channel (e / inner) % channels.
  kQuantize,
  kDequantize,
};

struct TypedEltPlan {
  TypedOp op = TypedOp::kCast;
  DataType inType = DataType::kFloat32;   // storage type of the value operands
  DataType outType = DataType::kFloat32;  // storage type of the output
  bool roundToHalf = false;               // Cast to a logical float16 kept in float32 storage
  bool detectNegative = true, detectPositive = true;
  const float* scale = nullptr;        // kQuantize / kDequantize: device array [channels]
  const int32_t* zeroPoint = nullptr;  // device array [channels], or null for 0
  int64_t channels = 1, inner = 1;
  int numInputs = 1;  // 1 to 3
  int rank = 1;
  int64_t dims[kEltMaxDims] = {};
  int64_t strides[3][kEltMaxDims] = {};
  int64_t numel = 0;
};

/// The storage types these kernels read and write.
inline bool isTypedEltStorage(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kInt32 ||
         t == DataType::kInt64 || t == DataType::kInt8 || t == DataType::kUInt8 ||
         t == DataType::kBool;
}

/// Enqueues the op on `stream`. Never synchronises; returns the launch error, if any, or
/// kInternal for a combination of op and types the kernels do not have.
Status launchTypedElt(const TypedEltPlan& plan, const void* const* inputs, void* output,
                      int maxBlocks, void* stream);

}  // namespace edgeinfer::cuda
