// Elementwise CUDA kernels (unary math, activations, binary arithmetic with numpy
// broadcasting) of the `cuda` tactic family: the plan the tactic computes at initialize()
// and the host-side launcher. Plain C++ (no device syntax): cuda_provider.cpp includes it.
#pragma once

#include <cstdint>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

/// Every elementwise op the kernels implement (values of EltwisePlan::op).
enum class EltOp : int32_t {
  // unary (input 0)
  kRelu,
  kLeakyRelu,  // alpha
  kSigmoid,
  kHardSigmoid,  // alpha, beta
  kHardSwish,
  kTanh,
  kElu,   // alpha
  kSelu,  // alpha, beta (= gamma)
  kSoftplus,
  kClip,  // alpha = min, beta = max
  kAbs,
  kNeg,
  kExp,
  kLog,
  kSqrt,
  kReciprocal,
  kErf,
  kFloor,
  kCeil,
  // binary (inputs 0 and 1, broadcast)
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMax,
  kMin,
  kPRelu,  // input 1 is the slope
};

inline bool isBinaryEltOp(EltOp op) {
  return static_cast<int32_t>(op) >= static_cast<int32_t>(EltOp::kAdd);
}

inline constexpr int kEltMaxDims = 8;

/// One elementwise launch, in PHYSICAL order: the output is contiguous with `dims`
/// (outermost first, adjacent dims already merged where every operand allows it), and
/// strides[k][d] is input k's element stride along dim d (0 where it is broadcast).
struct EltwisePlan {
  EltOp op = EltOp::kRelu;
  float alpha = 0.f, beta = 0.f;
  int numInputs = 1;  // 1 or 2
  int rank = 1;       // >= 1
  int64_t dims[kEltMaxDims] = {};
  int64_t strides[2][kEltMaxDims] = {};
  int64_t numel = 0;
};

/// Enqueues y = op(x0[, x1]) on `stream`; fp16 selects half storage (computing in float).
/// Picks 16-byte vector accesses when the innermost dim and every pointer allow them.
/// Never synchronises; returns the launch error, if any.
Status launchEltwise(const EltwisePlan& plan, bool fp16, const void* const* inputs, void* output,
                     int maxBlocks, void* stream);

}  // namespace edgeinfer::cuda
