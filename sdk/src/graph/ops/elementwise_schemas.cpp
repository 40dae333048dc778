// Schemas and shape inference for the elementwise ops: unary math and activations, Clip,
// binary ops with numpy broadcasting, variadic Min/Max/Sum/Mean, Where and Cast.
#include <string>
#include <vector>

#include "graph/op_schema.h"

namespace edgeinfer::graph {
namespace {

enum class Types { kFloat, kInt, kNumeric, kAll, kBool };

bool typeAllowed(DataType t, Types set) {
  switch (set) {
    case Types::kFloat:
      return isFloatingPoint(t);
    case Types::kInt:
      return isInteger(t);
    case Types::kNumeric:
      return isFloatingPoint(t) || isInteger(t);
    case Types::kAll:
      return t != DataType::kUndefined;
    case Types::kBool:
      return t == DataType::kBool;
  }
  return false;
}

const char* typesName(Types set) {
  switch (set) {
    case Types::kFloat:
      return "a floating-point type";
    case Types::kInt:
      return "an integer type";
    case Types::kNumeric:
      return "a numeric type";
    case Types::kAll:
      return "a defined type";
    case Types::kBool:
      return "bool";
  }
  return "?";
}

Status checkType(const InferContext& ctx, size_t i, Types set) {
  const DataType t = ctx.inputs[i].dtype;
  if (typeAllowed(t, set)) return Status::Ok();
  return ctx.error(ErrorCode::kInvalidModel, "input " + std::to_string(i) + " has type " +
                                                 dataTypeName(t) + ", expected " + typesName(set));
}

Status checkSameType(const InferContext& ctx, size_t a, size_t b) {
  if (ctx.inputs[a].dtype == ctx.inputs[b].dtype) return Status::Ok();
  return ctx.error(ErrorCode::kInvalidModel,
                   "inputs " + std::to_string(a) + " (" + dataTypeName(ctx.inputs[a].dtype) +
                       ") and " + std::to_string(b) + " (" + dataTypeName(ctx.inputs[b].dtype) +
                       ") must have the same type");
}

/// Output shape of the numpy broadcast of inputs [first, first + count); the rank is
/// unknown if any input's rank is.
Status broadcastInputs(const InferContext& ctx, size_t first, size_t count, InferValue& out) {
  out.shapeKnown = true;
  out.shape = Shape();
  for (size_t i = first; i < first + count; ++i) {
    const InferValue& in = ctx.inputs[i];
    if (!in.shapeKnown) {
      out.shapeKnown = false;
      continue;
    }
    if (!out.shapeKnown) continue;
    auto s = broadcastShapes(out.shape, in.shape);
    if (!s.ok()) return ctx.error(ErrorCode::kInvalidModel, s.status().message());
    out.shape = std::move(s).value();
  }
  if (!out.shapeKnown) out.shape = Shape();
  return Status::Ok();
}

// ---- Shape functions -------------------------------------------------------------------------

ShapeInferFn unary(Types set) {
  return [set](InferContext& ctx) -> Status {
    EI_RETURN_IF_ERROR(checkType(ctx, 0, set));
    ctx.outputs[0] = ctx.inputs[0];
    ctx.outputs[0].value = nullptr;
    return Status::Ok();
  };
}

Status inferIsNanInf(InferContext& ctx) {
  EI_RETURN_IF_ERROR(checkType(ctx, 0, Types::kFloat));
  ctx.outputs[0] = ctx.inputs[0];
  ctx.outputs[0].value = nullptr;
  ctx.outputs[0].dtype = DataType::kBool;
  return Status::Ok();
}

Status inferClip(InferContext& ctx) {
  EI_RETURN_IF_ERROR(checkType(ctx, 0, Types::kNumeric));
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.hasInput(i)) continue;
    EI_RETURN_IF_ERROR(checkSameType(ctx, 0, i));
    const InferValue& v = ctx.inputs[i];
    if (v.shapeKnown && v.shape.numel() >= 0 && v.shape.numel() != 1)
      return ctx.error(ErrorCode::kInvalidModel, std::string(i == 1 ? "min" : "max") +
                                                     " must be a scalar, got shape " +
                                                     v.shape.toString());
  }
  ctx.outputs[0] = ctx.inputs[0];
  ctx.outputs[0].value = nullptr;
  return Status::Ok();
}

/// Binary op: both inputs of one type in `set`; output of `outType` (kUndefined: input type).
ShapeInferFn binary(Types set, DataType outType) {
  return [set, outType](InferContext& ctx) -> Status {
    EI_RETURN_IF_ERROR(checkType(ctx, 0, set));
    EI_RETURN_IF_ERROR(checkSameType(ctx, 0, 1));
    InferValue& out = ctx.outputs[0];
    EI_RETURN_IF_ERROR(broadcastInputs(ctx, 0, 2, out));
    out.dtype = outType == DataType::kUndefined ? ctx.inputs[0].dtype : outType;
    return Status::Ok();
  };
}

Status inferMod(InferContext& ctx) {
  EI_RETURN_IF_ERROR(binary(Types::kNumeric, DataType::kUndefined)(ctx));
  if (isFloatingPoint(ctx.inputs[0].dtype) && ctx.attrs().getInt("fmod", 0) == 0)
    return ctx.error(ErrorCode::kInvalidModel, "Mod on floating-point inputs requires fmod=1");
  return Status::Ok();
}

Status inferBitShift(InferContext& ctx) {
  const std::string dir = ctx.attrs().getString("direction", "");
  if (dir != "LEFT" && dir != "RIGHT")
    return ctx.error(ErrorCode::kInvalidModel,
                     "BitShift direction must be LEFT or RIGHT, got '" + dir + "'");
  if (ctx.inputs[0].dtype != DataType::kUInt8)
    return ctx.error(
        ErrorCode::kInvalidModel,
        std::string("BitShift needs unsigned integers, got ") + dataTypeName(ctx.inputs[0].dtype));
  return binary(Types::kInt, DataType::kUndefined)(ctx);
}

Status inferPow(InferContext& ctx) {
  EI_RETURN_IF_ERROR(checkType(ctx, 0, Types::kNumeric));
  EI_RETURN_IF_ERROR(checkType(ctx, 1, Types::kNumeric));
  InferValue& out = ctx.outputs[0];
  EI_RETURN_IF_ERROR(broadcastInputs(ctx, 0, 2, out));
  out.dtype = ctx.inputs[0].dtype;
  return Status::Ok();
}

ShapeInferFn variadic(Types set) {
  return [set](InferContext& ctx) -> Status {
    const size_t n = ctx.inputs.size();
    if (n == 0) return ctx.error(ErrorCode::kInvalidModel, "needs at least one input");
    for (size_t i = 0; i < n; ++i) {
      if (!ctx.hasInput(i))
        return ctx.error(ErrorCode::kInvalidModel, "input " + std::to_string(i) + " is absent");
      EI_RETURN_IF_ERROR(checkType(ctx, i, set));
      EI_RETURN_IF_ERROR(checkSameType(ctx, 0, i));
    }
    InferValue& out = ctx.outputs[0];
    EI_RETURN_IF_ERROR(broadcastInputs(ctx, 0, n, out));
    out.dtype = ctx.inputs[0].dtype;
    return Status::Ok();
  };
}

Status inferWhere(InferContext& ctx) {
  EI_RETURN_IF_ERROR(checkType(ctx, 0, Types::kBool));
  EI_RETURN_IF_ERROR(checkSameType(ctx, 1, 2));
  InferValue& out = ctx.outputs[0];
  EI_RETURN_IF_ERROR(broadcastInputs(ctx, 0, 3, out));
  out.dtype = ctx.inputs[1].dtype;
  return Status::Ok();
}

Status inferCast(InferContext& ctx) {
  const int64_t to = ctx.attrs().getInt("to", -1);
  if (to <= static_cast<int64_t>(DataType::kUndefined) ||
      to > static_cast<int64_t>(DataType::kBool))
    return ctx.error(ErrorCode::kInvalidModel,
                     "Cast attribute `to` = " + std::to_string(to) + " is not a supported type");
  ctx.outputs[0] = ctx.inputs[0];
  ctx.outputs[0].value = nullptr;
  ctx.outputs[0].dtype = static_cast<DataType>(to);
  return Status::Ok();
}

void add(OpSchemaRegistry& r, const std::string& op, int64_t minOpset, int minIn, int maxIn,
         ShapeInferFn fn) {
  OpSchema s;
  s.opType = op;
  s.minOpset = minOpset;
  s.maxOpset = 17;
  s.minInputs = minIn;
  s.maxInputs = maxIn;
  s.infer = std::move(fn);
  r.add(std::move(s));
}

}  // namespace

void registerElementwiseSchemas(OpSchemaRegistry& r) {
  struct UnaryOp {
    const char* name;
    int64_t minOpset;
    Types types;
  };
  const UnaryOp kUnary[] = {
      {"Abs", 7, Types::kNumeric},
      {"Neg", 7, Types::kNumeric},
      {"Reciprocal", 7, Types::kFloat},
      {"Floor", 7, Types::kFloat},
      {"Ceil", 7, Types::kFloat},
      {"Round", 11, Types::kFloat},
      {"Sign", 9, Types::kNumeric},
      {"Sqrt", 7, Types::kFloat},
      {"Exp", 7, Types::kFloat},
      {"Log", 7, Types::kFloat},
      {"Sin", 7, Types::kFloat},
      {"Cos", 7, Types::kFloat},
      {"Tan", 7, Types::kFloat},
      {"Asin", 7, Types::kFloat},
      {"Acos", 7, Types::kFloat},
      {"Atan", 7, Types::kFloat},
      {"Sinh", 9, Types::kFloat},
      {"Cosh", 9, Types::kFloat},
      {"Asinh", 9, Types::kFloat},
      {"Acosh", 9, Types::kFloat},
      {"Atanh", 9, Types::kFloat},
      {"Erf", 9, Types::kFloat},
      {"Not", 7, Types::kBool},
      {"Relu", 7, Types::kNumeric},
      {"LeakyRelu", 7, Types::kFloat},
      {"Sigmoid", 7, Types::kFloat},
      {"HardSigmoid", 7, Types::kFloat},
      {"HardSwish", 14, Types::kFloat},
      {"Tanh", 7, Types::kFloat},
      {"Elu", 7, Types::kFloat},
      {"Selu", 7, Types::kFloat},
      {"Celu", 12, Types::kFloat},
      {"Softplus", 7, Types::kFloat},
      {"Softsign", 7, Types::kFloat},
      {"ThresholdedRelu", 10, Types::kFloat},
  };
  for (const auto& u : kUnary) add(r, u.name, u.minOpset, 1, 1, unary(u.types));
  add(r, "IsNaN", 9, 1, 1, inferIsNanInf);
  add(r, "IsInf", 10, 1, 1, inferIsNanInf);
  add(r, "Clip", 7, 1, 3, inferClip);

  for (const char* op : {"Add", "Sub", "Mul", "Div"})
    add(r, op, 7, 2, 2, binary(Types::kNumeric, DataType::kUndefined));
  add(r, "Pow", 7, 2, 2, inferPow);
  add(r, "Mod", 10, 2, 2, inferMod);
  add(r, "BitShift", 11, 2, 2, inferBitShift);
  for (const char* op : {"And", "Or", "Xor"})
    add(r, op, 7, 2, 2, binary(Types::kBool, DataType::kBool));
  add(r, "Equal", 7, 2, 2, binary(Types::kAll, DataType::kBool));
  add(r, "Less", 7, 2, 2, binary(Types::kNumeric, DataType::kBool));
  add(r, "Greater", 7, 2, 2, binary(Types::kNumeric, DataType::kBool));
  add(r, "LessOrEqual", 12, 2, 2, binary(Types::kNumeric, DataType::kBool));
  add(r, "GreaterOrEqual", 12, 2, 2, binary(Types::kNumeric, DataType::kBool));

  add(r, "Min", 7, 1, -1, variadic(Types::kNumeric));
  add(r, "Max", 7, 1, -1, variadic(Types::kNumeric));
  add(r, "Sum", 7, 1, -1, variadic(Types::kFloat));
  add(r, "Mean", 7, 1, -1, variadic(Types::kFloat));
  add(r, "Where", 9, 3, 3, inferWhere);
  add(r, "Cast", 7, 1, 1, inferCast);
}

}  // namespace edgeinfer::graph
