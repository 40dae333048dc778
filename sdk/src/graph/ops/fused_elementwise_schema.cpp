// ai.edgeinfer::FusedElementwise: program decoding/encoding and the shape function
// (graph/ops/fused_elementwise.h).
#include <algorithm>
#include <cstdint>
#include <string>

#include "graph/op_schema.h"
#include "graph/ops/fused_elementwise.h"
#include "graph/ops/schema_util.h"

namespace edgeinfer::graph {

int feOperandCount(int32_t opcode) {
  switch (static_cast<FeOp>(opcode)) {
    case FeOp::kRelu:
    case FeOp::kSigmoid:
    case FeOp::kHardSwish:
    case FeOp::kTanh:
    case FeOp::kSoftplus:
    case FeOp::kAbs:
    case FeOp::kNeg:
    case FeOp::kExp:
    case FeOp::kLog:
    case FeOp::kSqrt:
    case FeOp::kReciprocal:
    case FeOp::kErf:
    case FeOp::kFloor:
    case FeOp::kCeil:
      return 1;
    case FeOp::kLeakyRelu:
    case FeOp::kElu:
    case FeOp::kAdd:
    case FeOp::kSub:
    case FeOp::kMul:
    case FeOp::kDiv:
    case FeOp::kPow:
    case FeOp::kMax:
    case FeOp::kMin:
      return 2;
    case FeOp::kHardSigmoid:
    case FeOp::kSelu:
    case FeOp::kClip:
      return 3;
  }
  return 0;
}

const char* feOpName(int32_t opcode) {
  switch (static_cast<FeOp>(opcode)) {
    case FeOp::kRelu:
      return "Relu";
    case FeOp::kLeakyRelu:
      return "LeakyRelu";
    case FeOp::kSigmoid:
      return "Sigmoid";
    case FeOp::kHardSigmoid:
      return "HardSigmoid";
    case FeOp::kHardSwish:
      return "HardSwish";
    case FeOp::kTanh:
      return "Tanh";
    case FeOp::kElu:
      return "Elu";
    case FeOp::kSelu:
      return "Selu";
    case FeOp::kSoftplus:
      return "Softplus";
    case FeOp::kClip:
      return "Clip";
    case FeOp::kAbs:
      return "Abs";
    case FeOp::kNeg:
      return "Neg";
    case FeOp::kExp:
      return "Exp";
    case FeOp::kLog:
      return "Log";
    case FeOp::kSqrt:
      return "Sqrt";
    case FeOp::kReciprocal:
      return "Reciprocal";
    case FeOp::kErf:
      return "Erf";
    case FeOp::kFloor:
      return "Floor";
    case FeOp::kCeil:
      return "Ceil";
    case FeOp::kAdd:
      return "Add";
    case FeOp::kSub:
      return "Sub";
    case FeOp::kMul:
      return "Mul";
    case FeOp::kDiv:
      return "Div";
    case FeOp::kPow:
      return "Pow";
    case FeOp::kMax:
      return "Max";
    case FeOp::kMin:
      return "Min";
  }
  return "";
}

Status decodeFeProgram(const Attributes& attrs, int numInputs, FeProgram* out) {
  auto bad = [](const std::string& msg) {
    return Status(ErrorCode::kInvalidModel, "FusedElementwise: " + msg);
  };
  if (numInputs < 1 || numInputs > kFeMaxInputs)
    return bad("needs 1 to " + std::to_string(kFeMaxInputs) + " inputs, got " +
               std::to_string(numInputs));
  const Attribute* pa = attrs.find("program");
  if (!pa || pa->kind != Attribute::Kind::kInts) return bad("missing ints attribute 'program'");
  const Attribute* ca = attrs.find("constants");
  if (ca && ca->kind != Attribute::Kind::kFloats) return bad("'constants' must be floats");
  const std::vector<int64_t>& code = pa->ints;
  FeProgram p;
  p.numInputs = numInputs;
  if (ca) p.constants = ca->floats;
  if (p.constants.size() > static_cast<size_t>(kFeMaxConstants))
    return bad("more than " + std::to_string(kFeMaxConstants) + " constants");
  if (code.empty() || code.size() % kFeInstrInts != 0)
    return bad("'program' must hold a positive multiple of " + std::to_string(kFeInstrInts) +
               " ints");
  const size_t count = code.size() / kFeInstrInts;
  if (count > static_cast<size_t>(kFeMaxInstructions))
    return bad("more than " + std::to_string(kFeMaxInstructions) + " instructions");
  std::vector<bool> written(kFeMaxRegisters, false);
  for (int i = 0; i < numInputs; ++i) written[static_cast<size_t>(i)] = true;
  p.numRegisters = numInputs;
  const int64_t nConst = static_cast<int64_t>(p.constants.size());
  for (size_t i = 0; i < count; ++i) {
    const int64_t* w = &code[i * kFeInstrInts];
    const std::string where = "instruction " + std::to_string(i) + ": ";
    if (w[0] < INT32_MIN || w[0] > INT32_MAX || feOperandCount(static_cast<int32_t>(w[0])) == 0)
      return bad(where + "unknown opcode " + std::to_string(w[0]));
    const int operands = feOperandCount(static_cast<int32_t>(w[0]));
    if (w[1] < 0 || w[1] >= kFeMaxRegisters) return bad(where + "destination out of range");
    for (int k = 0; k < 3; ++k) {
      const int64_t v = w[2 + k];
      if (k >= operands) {
        if (v != 0) return bad(where + "unused operand must be 0");
        continue;
      }
      if (v < 0) {
        if (-1 - v >= nConst) return bad(where + "constant operand out of range");
      } else if (v >= kFeMaxRegisters || !written[static_cast<size_t>(v)]) {
        return bad(where + "reads register " + std::to_string(v) + " before it is written");
      }
    }
    FeInstr ins;
    ins.op = static_cast<FeOp>(w[0]);
    ins.dst = static_cast<int32_t>(w[1]);
    ins.a = static_cast<int32_t>(w[2]);
    ins.b = static_cast<int32_t>(w[3]);
    ins.c = static_cast<int32_t>(w[4]);
    written[static_cast<size_t>(ins.dst)] = true;
    p.numRegisters = std::max(p.numRegisters, ins.dst + 1);
    p.instrs.push_back(ins);
  }
  *out = std::move(p);
  return Status::Ok();
}

void encodeFeProgram(const FeProgram& p, Attributes* attrs) {
  std::vector<int64_t> code;
  code.reserve(p.instrs.size() * kFeInstrInts);
  for (const FeInstr& i : p.instrs)
    code.insert(code.end(), {static_cast<int64_t>(i.op), i.dst, i.a, i.b, i.c});
  attrs->set("program", Attribute::Ints(std::move(code)));
  attrs->set("constants", Attribute::Floats(p.constants));
}

namespace {

Status inferFusedElementwise(InferContext& ctx) {
  const int n = static_cast<int>(ctx.inputs.size());
  FeProgram prog;
  Status s = decodeFeProgram(ctx.attrs(), n, &prog);
  if (!s.ok()) return ctx.error(ErrorCode::kInvalidModel, s.message());
  const DataType t = ctx.inputs[0].dtype;
  Shape shape;
  bool known = true;
  for (int i = 0; i < n; ++i) {
    const InferValue& in = ctx.inputs[static_cast<size_t>(i)];
    if (!in.present())
      return ctx.error(ErrorCode::kInvalidModel,
                       "FusedElementwise input " + std::to_string(i) + " is absent");
    if (in.dtype != t || (t != DataType::kFloat32 && t != DataType::kFloat16))
      return ctx.error(ErrorCode::kInvalidModel,
                       "FusedElementwise inputs must all be float32 or all float16");
    if (!in.shapeKnown) {
      known = false;
      continue;
    }
    if (i == 0 || !known) {
      if (i == 0) shape = in.shape;
      continue;
    }
    auto b = broadcastShapes(shape, in.shape);
    if (!b.ok()) return ctx.error(ErrorCode::kInvalidModel, b.status().message());
    shape = *b;
  }
  ctx.outputs[0].dtype = t;
  ctx.outputs[0].shapeKnown = known;
  if (known) ctx.outputs[0].shape = shape;
  return Status::Ok();
}

}  // namespace

void registerFusedElementwiseSchema(OpSchemaRegistry& r) {
  schema_util::addEdgeInferSchema(r, "FusedElementwise", 1, kFeMaxInputs, inferFusedElementwise);
}

}  // namespace edgeinfer::graph
