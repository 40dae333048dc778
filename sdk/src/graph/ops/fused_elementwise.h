// ai.edgeinfer::FusedElementwise: a chain (or DAG piece) of elementwise ops that the
// fuseElementwise pass (graph/passes/fuse_elementwise.cpp) merged into one node, so a backend
// evaluates the whole chain per output element in registers, never writing the intermediates.
//
//   FusedElementwise (X0, ..., Xn-1)  1 <= n <= kFeMaxInputs, every Xi float32 or float16
//                                     (all the same type); Y has that type and the numpy
//                                     broadcast shape of all inputs.
// Attributes:
//   program    ints, a register program of kFeInstrInts ints per instruction:
//                {opcode, dst, a, b, c}
//              opcode  a FeOp value (below)
//              dst     the register written, 0 <= dst < kFeMaxRegisters
//              a, b, c operands: v >= 0 is register v, v < 0 is constants[-1 - v]; unary ops
//                      read a, binary ops a and b; unused operands are 0. The activations'
//                      parameters are operands too: LeakyRelu/Elu b = alpha; HardSigmoid
//                      b = alpha, c = beta; Selu b = alpha, c = gamma; Clip b = min, c = max.
//   constants  floats, the immediate values the operands refer to (scalar constants of the
//              chain and activation parameters).
// Evaluation, per output element: registers 0..n-1 start with the inputs' values at that
// element (broadcast); the other registers start undefined and must be written before they are
// read (the decoder checks). The instructions run in order; Y is the last instruction's dst.
// Each op computes in float exactly what the ONNX op's CPU reference computes (Pow through
// double, Max/Min propagating NaN, the activations through ref::applyActivation), so the
// fused node equals the unfused float32 chain bit for bit on the CPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "edgeinfer/status.h"
#include "graph/graph.h"

namespace edgeinfer::graph {

inline constexpr int kFeMaxInputs = 8;
inline constexpr int kFeMaxRegisters = 16;
inline constexpr int kFeMaxInstructions = 64;
inline constexpr int kFeMaxConstants = 64;
inline constexpr int kFeInstrInts = 5;

/// Opcodes of the program (values are part of the engine format: append only).
enum class FeOp : int32_t {
  // unary: a
  kRelu = 0,
  kLeakyRelu = 1,  // b = alpha
  kSigmoid = 2,
  kHardSigmoid = 3,  // b = alpha, c = beta
  kHardSwish = 4,
  kTanh = 5,
  kElu = 6,   // b = alpha
  kSelu = 7,  // b = alpha, c = gamma
  kSoftplus = 8,
  kClip = 9,  // b = min, c = max
  kAbs = 10,
  kNeg = 11,
  kExp = 12,
  kLog = 13,
  kSqrt = 14,
  kReciprocal = 15,
  kErf = 16,
  kFloor = 17,
  kCeil = 18,
  // binary: a op b
  kAdd = 32,
  kSub = 33,
  kMul = 34,
  kDiv = 35,
  kPow = 36,
  kMax = 37,
  kMin = 38,
};

/// Number of operands an opcode reads (1..3), or 0 for an unknown opcode.
int feOperandCount(int32_t opcode);
/// The ONNX op type an opcode comes from ("Relu", "Add", ...), or "" if unknown.
const char* feOpName(int32_t opcode);

struct FeInstr {
  FeOp op = FeOp::kRelu;
  int32_t dst = 0;
  int32_t a = 0, b = 0, c = 0;
};

struct FeProgram {
  std::vector<FeInstr> instrs;
  std::vector<float> constants;
  int numInputs = 0;
  int numRegisters = 0;  // highest register used + 1
  /// Register holding the result (the last instruction's dst).
  int32_t output() const { return instrs.empty() ? 0 : instrs.back().dst; }
};

/// Reads and validates the program of a FusedElementwise node with `numInputs` inputs:
/// instruction count and opcodes, operand ranges, every register written before it is read.
Status decodeFeProgram(const Attributes& attrs, int numInputs, FeProgram* out);

/// Writes `program` and `constants` attributes.
void encodeFeProgram(const FeProgram& p, Attributes* attrs);

/// Registered from registerFusedSchemas (fused_schemas.cpp).
class OpSchemaRegistry;
void registerFusedElementwiseSchema(OpSchemaRegistry& r);

}  // namespace edgeinfer::graph
