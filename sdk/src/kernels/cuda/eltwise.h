// Elementwise CUDA kernels (unary math, activations, binary arithmetic with numpy
// broadcasting; the variadic Sum/Mean/Max/Min run as a chain of binary launches) of the `cuda`
// tactic family: the plan the tactic computes at initialize() and the host-side launcher. Plain C++
// (no device syntax): cuda_provider.cpp includes it.
#pragma once

#include <cstdint>

#include "edgeinfer/status.h"
#include "edgeinfer/types.h"

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
  kSin,
  kCos,
  kTan,
  kAsin,
  kAcos,
  kAtan,
  kSinh,
  kCosh,
  kAsinh,
  kAcosh,
  kAtanh,
  kRound,  // half to even
  kSign,
  kSoftsign,
  kCelu,             // alpha
  kThresholdedRelu,  // alpha
  kShrink,           // alpha = lambd, beta = bias
  kAffine,           // alpha * x + beta (Sum of one input, Mean's division)
  // binary (inputs 0 and 1, broadcast)
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMax,
  kMin,
  kPRelu,  // input 1 is the slope
  kFMod,   // C's fmod (Mod with fmod=1)
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

/// The broadcast view shared by every elementwise family: the output `out` enumerated in its
/// storage order (NHWC for a 4-D tensor when `nhwc`; operands of rank 4 are then NHWC too),
/// dims of size 1 dropped and adjacent dims merged where every operand is contiguous across
/// them. Operand k (shape operands[k], right-aligned to `out`, numpy broadcasting) gets
/// strides[k][d], 0 where it is broadcast. Fills dims[0, *rank) (*rank >= 1); false when an
/// operand does not broadcast to `out` or the rank exceeds kEltMaxDims.
bool planBroadcast(const Shape& out, const Shape* operands, int numOperands, bool nhwc,
                   int64_t* dims, int64_t (*strides)[kEltMaxDims], int* rank);

/// Enqueues y = op(x0[, x1]) on `stream`; fp16 selects half storage (computing in float).
/// Picks 16-byte vector accesses when the innermost dim and every pointer allow them.
/// Never synchronises; returns the launch error, if any.
Status launchEltwise(const EltwisePlan& plan, bool fp16, const void* const* inputs, void* output,
                     int maxBlocks, void* stream);

}  // namespace edgeinfer::cuda
