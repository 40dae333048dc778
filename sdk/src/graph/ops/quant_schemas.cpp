// Schemas and shape inference for QuantizeLinear and DequantizeLinear (opsets 10-17):
// per-tensor (scalar or one-element scale) or per-axis (1-D scale along `axis`, opset 13); and
// DynamicQuantizeLinear (opset 11): float32 x -> uint8 y of x's shape, float32 scalar y_scale,
// uint8 scalar y_zero_point.
#include <string>

#include "graph/op_schema.h"

namespace edgeinfer::graph {
namespace {

/// Validates scale (input 1) and zero point (input 2) against the data (input 0).
Status checkScaleAndZeroPoint(const InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  const InferValue& scale = ctx.inputs[1];
  if (!isFloatingPoint(scale.dtype))
    return ctx.error(ErrorCode::kInvalidModel,
                     std::string("scale must be floating point, got ") + dataTypeName(scale.dtype));
  if (ctx.hasInput(2)) {
    const InferValue& zp = ctx.inputs[2];
    if (zp.shapeKnown && scale.shapeKnown && zp.shape != scale.shape &&
        !(zp.shape.numel() == 1 && scale.shape.numel() == 1))
      return ctx.error(ErrorCode::kInvalidModel, "zero point shape " + zp.shape.toString() +
                                                     " differs from scale shape " +
                                                     scale.shape.toString());
  }
  if (!scale.shapeKnown) return Status::Ok();
  if (scale.shape.rank() > 1)
    return ctx.error(ErrorCode::kInvalidModel,
                     "scale must be a scalar or 1-D, got " + scale.shape.toString());
  const int64_t n = scale.shape.numel();
  if (scale.shape.rank() == 0 || n == 1 || !x.shapeKnown) return Status::Ok();
  // Per-axis: the scale runs along `axis`.
  const int64_t rank = static_cast<int64_t>(x.shape.rank());
  const int64_t axisAttr = ctx.attrs().getInt("axis", 1);
  auto axis = normalizeAxis(axisAttr, rank);
  if (!axis.ok() || rank == 0)
    return ctx.error(
        ErrorCode::kInvalidModel,
        "axis " + std::to_string(axisAttr) + " is out of range for rank " + std::to_string(rank));
  const int64_t dim = x.shape[static_cast<size_t>(*axis)];
  if (n >= 0 && dim >= 0 && n != dim)
    return ctx.error(ErrorCode::kInvalidModel,
                     "per-axis scale has " + std::to_string(n) + " elements but axis " +
                         std::to_string(axisAttr) + " has " + std::to_string(dim));
  return Status::Ok();
}

Status inferQuantize(InferContext& ctx) {
  const DataType t = ctx.inputs[0].dtype;
  if (!isFloatingPoint(t) && t != DataType::kInt32)
    return ctx.error(
        ErrorCode::kInvalidModel,
        std::string("QuantizeLinear input must be float or int32, got ") + dataTypeName(t));
  DataType outType = DataType::kUInt8;
  if (ctx.hasInput(2)) {
    outType = ctx.inputs[2].dtype;
    if (outType != DataType::kUInt8 && outType != DataType::kInt8)
      return ctx.error(ErrorCode::kInvalidModel,
                       std::string("QuantizeLinear zero point must be int8 or uint8, got ") +
                           dataTypeName(outType));
  }
  EI_RETURN_IF_ERROR(checkScaleAndZeroPoint(ctx));
  ctx.outputs[0] = ctx.inputs[0];
  ctx.outputs[0].value = nullptr;
  ctx.outputs[0].dtype = outType;
  return Status::Ok();
}

Status inferDequantize(InferContext& ctx) {
  const DataType t = ctx.inputs[0].dtype;
  if (t != DataType::kInt8 && t != DataType::kUInt8 && t != DataType::kInt32)
    return ctx.error(
        ErrorCode::kInvalidModel,
        std::string("DequantizeLinear input must be int8, uint8 or int32, got ") + dataTypeName(t));
  if (ctx.hasInput(2) && ctx.inputs[2].dtype != t)
    return ctx.error(ErrorCode::kInvalidModel, "DequantizeLinear zero point type " +
                                                   std::string(dataTypeName(ctx.inputs[2].dtype)) +
                                                   " differs from input type " + dataTypeName(t));
  EI_RETURN_IF_ERROR(checkScaleAndZeroPoint(ctx));
  ctx.outputs[0] = ctx.inputs[0];
  ctx.outputs[0].value = nullptr;
  // Opsets <= 17 define a float32 scale and output; a float16/bfloat16 scale (a later-opset
  // extension) gives an output of the scale's type.
  ctx.outputs[0].dtype = ctx.inputs[1].dtype;
  return Status::Ok();
}

Status inferDynamicQuantize(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  if (x.dtype != DataType::kFloat32)
    return ctx.error(
        ErrorCode::kInvalidModel,
        std::string("DynamicQuantizeLinear input must be float32, got ") + dataTypeName(x.dtype));
  ctx.outputs[0] = x;
  ctx.outputs[0].value = nullptr;
  ctx.outputs[0].dtype = DataType::kUInt8;
  for (size_t i = 1; i < ctx.outputs.size() && i < 3; ++i) {
    InferValue& o = ctx.outputs[i];
    o.dtype = i == 1 ? DataType::kFloat32 : DataType::kUInt8;
    o.value = nullptr;
    o.shapeKnown = true;
    o.shape = Shape{};
  }
  return Status::Ok();
}

void add(OpSchemaRegistry& r, const std::string& op, ShapeInferFn fn) {
  OpSchema s;
  s.opType = op;
  s.minOpset = 10;
  s.maxOpset = 17;
  s.minInputs = 2;
  s.maxInputs = 3;
  s.infer = std::move(fn);
  r.add(std::move(s));
}

}  // namespace

void registerQuantSchemas(OpSchemaRegistry& r) {
  add(r, "QuantizeLinear", inferQuantize);
  add(r, "DequantizeLinear", inferDequantize);
  OpSchema dq;
  dq.opType = "DynamicQuantizeLinear";
  dq.minOpset = 11;
  dq.minInputs = dq.maxInputs = 1;
  dq.infer = inferDynamicQuantize;
  r.add(std::move(dq));
  registerQLinearSchemas(r);
}

}  // namespace edgeinfer::graph
