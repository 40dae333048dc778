// Schemas and shape inference for Trilu, CastLike, EyeLike, Shrink and
// MeanVarianceNormalization: all produce the input's shape.
//   Trilu:     the upper (upper=1) or lower triangle of the last two dims, shifted by input k.
//   CastLike:  Cast of input 0 to the element type of input 1.
//   EyeLike:   a 2-D identity (diagonal k) of the input's shape; `dtype` is ONNX's enum.
//   Shrink:    x < -lambd ? x + bias : x > lambd ? x - bias : 0.
//   MVN:       (x - mean) / (std + 1e-9) over `axes` (default [0, 2, 3]).
#include <set>
#include <string>

#include "graph/op_schema.h"
#include "graph/ops/schema_util.h"
#include "onnx/onnx_tensor.h"

namespace edgeinfer::graph {
namespace {

using namespace schema_util;

void sameAsInput(InferContext& ctx, DataType dtype) {
  const InferValue& x = ctx.inputs[0];
  setOut(ctx, 0, dtype, x.shapeKnown ? std::optional<Shape>(x.shape) : std::nullopt);
}

Status inferTrilu(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  if (x.shapeKnown && x.shape.rank() < 2)
    return ctx.error(ErrorCode::kInvalidModel,
                     "Trilu input must have rank >= 2, got " + x.shape.toString());
  const int64_t upper = ctx.attrs().getInt("upper", 1);
  if (upper != 0 && upper != 1)
    return ctx.error(ErrorCode::kInvalidModel, "Trilu upper must be 0 or 1");
  if (ctx.hasInput(1)) {
    EI_RETURN_IF_ERROR(needType(ctx, 1, ctx.inputs[1].dtype == DataType::kInt64, "Trilu k"));
    EI_RETURN_IF_ERROR(checkScalar(ctx, 1, "Trilu k"));
  }
  sameAsInput(ctx, x.dtype);
  return Status::Ok();
}

Status inferCastLike(InferContext& ctx) {
  sameAsInput(ctx, ctx.inputs[1].dtype);
  return Status::Ok();
}

Status inferEyeLike(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  if (x.shapeKnown && x.shape.rank() != 2)
    return ctx.error(ErrorCode::kInvalidModel,
                     "EyeLike input must be 2-D, got " + x.shape.toString());
  DataType dt = x.dtype;
  if (ctx.attrs().has("dtype")) {
    const int64_t onnxType = ctx.attrs().getInt("dtype", 0);
    dt = onnx_import::dataTypeFromOnnx(static_cast<int>(onnxType));
    if (dt == DataType::kUndefined)
      return ctx.error(ErrorCode::kUnsupported,
                       "EyeLike dtype " + onnx_import::onnxTypeName(static_cast<int>(onnxType)) +
                           " is not supported");
  }
  sameAsInput(ctx, dt);
  return Status::Ok();
}

Status inferShrink(InferContext& ctx) {
  const DataType t = ctx.inputs[0].dtype;
  EI_RETURN_IF_ERROR(needType(ctx, 0, isFloatingPoint(t) || isInteger(t), "Shrink input"));
  if (ctx.attrs().getFloat("lambd", 0.5f) < 0)
    return ctx.error(ErrorCode::kInvalidModel, "Shrink lambd must be >= 0");
  sameAsInput(ctx, t);
  return Status::Ok();
}

Status inferMvn(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  EI_RETURN_IF_ERROR(needType(ctx, 0, isFloatingPoint(x.dtype), "MeanVarianceNormalization input"));
  if (x.shapeKnown) {
    const int64_t rank = static_cast<int64_t>(x.shape.rank());
    std::set<int64_t> seen;
    for (int64_t a : ctx.attrs().getInts("axes", {0, 2, 3})) {
      int64_t n = 0;
      EI_RETURN_IF_ERROR(axisIn(ctx, a, rank, &n));
      if (!seen.insert(n).second)
        return ctx.error(ErrorCode::kInvalidModel,
                         "MeanVarianceNormalization axes repeat axis " + str(n));
    }
  }
  sameAsInput(ctx, x.dtype);
  return Status::Ok();
}

}  // namespace

void registerMiscSchemas(OpSchemaRegistry& r) {
  addSchema(r, "Trilu", 14, 1, 2, inferTrilu);
  addSchema(r, "CastLike", 15, 2, 2, inferCastLike);
  addSchema(r, "EyeLike", 9, 1, 1, inferEyeLike);
  addSchema(r, "Shrink", 9, 1, 1, inferShrink);
  addSchema(r, "MeanVarianceNormalization", 9, 1, 1, inferMvn);
}

}  // namespace edgeinfer::graph
