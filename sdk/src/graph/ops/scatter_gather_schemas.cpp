// Schemas and shape inference for ScatterND, ScatterElements (and its opset-9/10 name
// Scatter) and GatherND.
//   ScatterND:       out = data with updates written at indices[..., :m] (m = indices' last dim);
//                    updates has shape indices.shape[:-1] + data.shape[m:].
//   ScatterElements: out = data with out[.., indices[i], ..] (along axis) = updates[i].
//   GatherND:        out shape indices.shape[:-1] + data.shape[batch_dims + m:].
// `reduction` is none/add/mul (opset 16; max/min from opset 18 are accepted too).
#include <string>

#include "graph/op_schema.h"
#include "graph/ops/schema_util.h"

namespace edgeinfer::graph {
namespace {

using namespace schema_util;

Status checkReduction(const InferContext& ctx) {
  const std::string r = ctx.attrs().getString("reduction", "none");
  if (r != "none" && r != "add" && r != "mul" && r != "max" && r != "min")
    return ctx.error(ErrorCode::kInvalidModel,
                     ctx.node.opType + " reduction '" + r + "' is not supported");
  if (r != "none" && ctx.inputs[0].dtype == DataType::kBool)
    return ctx.error(ErrorCode::kInvalidModel,
                     ctx.node.opType + " reduction '" + r + "' needs a numeric type, not bool");
  return Status::Ok();
}

/// Fails with a clear message if the known dims of `got` and `want` differ.
Status checkShapeMatches(const InferContext& ctx, const Shape& got, const Shape& want,
                         const std::string& what) {
  bool ok = got.rank() == want.rank();
  for (size_t i = 0; ok && i < got.rank(); ++i)
    if (got[i] >= 0 && want[i] >= 0 && got[i] != want[i]) ok = false;
  if (!ok)
    return ctx.error(ErrorCode::kInvalidModel,
                     what + " has shape " + got.toString() + ", expected " + want.toString());
  return Status::Ok();
}

/// Fails if a known index is out of [-dim, dim).
Status checkIndexRange(const InferContext& ctx, int64_t idx, int64_t dim) {
  if (dim >= 0 && (idx < -dim || idx >= dim))
    return ctx.error(ErrorCode::kInvalidModel, ctx.node.opType + " index " + str(idx) +
                                                   " is out of range for a dimension of size " +
                                                   str(dim));
  return Status::Ok();
}

Status inferScatterND(InferContext& ctx) {
  const InferValue& data = ctx.inputs[0];
  const InferValue& idx = ctx.inputs[1];
  const InferValue& upd = ctx.inputs[2];
  EI_RETURN_IF_ERROR(needType(ctx, 1, idx.dtype == DataType::kInt64, "ScatterND indices"));
  EI_RETURN_IF_ERROR(
      needType(ctx, 2, upd.dtype == data.dtype, "ScatterND updates (must match data)"));
  EI_RETURN_IF_ERROR(checkReduction(ctx));
  if (data.shapeKnown && data.shape.rank() == 0)
    return ctx.error(ErrorCode::kInvalidModel, "ScatterND data cannot be a scalar");
  if (idx.shapeKnown && idx.shape.rank() == 0)
    return ctx.error(ErrorCode::kInvalidModel, "ScatterND indices cannot be a scalar");
  if (data.shapeKnown && idx.shapeKnown) {
    const int64_t m = idx.shape[idx.shape.rank() - 1];
    const int64_t r = static_cast<int64_t>(data.shape.rank());
    if (m >= 0 && (m < 1 || m > r))
      return ctx.error(ErrorCode::kInvalidModel,
                       "ScatterND indices' last dim " + str(m) + " must be in [1, " + str(r) + "]");
    if (m >= 0 && upd.shapeKnown) {
      std::vector<int64_t> want(idx.shape.dims().begin(), idx.shape.dims().end() - 1);
      want.insert(want.end(), data.shape.dims().begin() + m, data.shape.dims().end());
      EI_RETURN_IF_ERROR(checkShapeMatches(ctx, upd.shape, Shape(want), "ScatterND updates"));
    }
    if (const auto v = intValues(idx); v && m > 0)
      for (size_t i = 0; i < v->size(); ++i)
        EI_RETURN_IF_ERROR(checkIndexRange(ctx, (*v)[i], data.shape[i % static_cast<size_t>(m)]));
  }
  setOut(ctx, 0, data.dtype, data.shapeKnown ? std::optional<Shape>(data.shape) : std::nullopt);
  return Status::Ok();
}

Status inferScatterElements(InferContext& ctx) {
  const InferValue& data = ctx.inputs[0];
  const InferValue& idx = ctx.inputs[1];
  const InferValue& upd = ctx.inputs[2];
  const std::string& op = ctx.node.opType;
  EI_RETURN_IF_ERROR(needType(ctx, 1, isIndexType(idx.dtype), op + " indices"));
  EI_RETURN_IF_ERROR(needType(ctx, 2, upd.dtype == data.dtype, op + " updates (must match data)"));
  EI_RETURN_IF_ERROR(checkReduction(ctx));
  if (idx.shapeKnown && upd.shapeKnown)
    EI_RETURN_IF_ERROR(checkShapeMatches(ctx, upd.shape, idx.shape, op + " updates"));
  if (data.shapeKnown) {
    const int64_t rank = static_cast<int64_t>(data.shape.rank());
    if (rank == 0) return ctx.error(ErrorCode::kInvalidModel, op + " data cannot be a scalar");
    int64_t axis = 0;
    EI_RETURN_IF_ERROR(axisIn(ctx, ctx.attrs().getInt("axis", 0), rank, &axis));
    if (idx.shapeKnown) {
      if (idx.shape.rank() != data.shape.rank())
        return ctx.error(ErrorCode::kInvalidModel, op + " indices " + idx.shape.toString() +
                                                       " and data " + data.shape.toString() +
                                                       " must have the same rank");
      for (size_t d = 0; d < idx.shape.rank(); ++d)
        if (static_cast<int64_t>(d) != axis && data.shape[d] >= 0 && idx.shape[d] > data.shape[d])
          return ctx.error(ErrorCode::kInvalidModel, op + " indices " + idx.shape.toString() +
                                                         " exceed data " + data.shape.toString() +
                                                         " outside the axis");
      if (const auto v = intValues(idx))
        for (int64_t i : *v)
          EI_RETURN_IF_ERROR(checkIndexRange(ctx, i, data.shape[static_cast<size_t>(axis)]));
    }
  }
  setOut(ctx, 0, data.dtype, data.shapeKnown ? std::optional<Shape>(data.shape) : std::nullopt);
  return Status::Ok();
}

Status inferGatherND(InferContext& ctx) {
  const InferValue& data = ctx.inputs[0];
  const InferValue& idx = ctx.inputs[1];
  EI_RETURN_IF_ERROR(needType(ctx, 1, idx.dtype == DataType::kInt64, "GatherND indices"));
  const int64_t b = ctx.attrs().getInt("batch_dims", 0);
  if (b < 0)
    return ctx.error(ErrorCode::kInvalidModel, "GatherND batch_dims must be >= 0, got " + str(b));
  if (!data.shapeKnown || !idx.shapeKnown) {
    setOut(ctx, 0, data.dtype, std::nullopt);
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(data.shape.rank());
  const int64_t q = static_cast<int64_t>(idx.shape.rank());
  if (r < 1 || q < 1)
    return ctx.error(ErrorCode::kInvalidModel, "GatherND data and indices must have rank >= 1");
  if (b >= std::min(r, q))
    return ctx.error(ErrorCode::kInvalidModel, "GatherND batch_dims " + str(b) +
                                                   " must be smaller than both ranks (" + str(r) +
                                                   ", " + str(q) + ")");
  for (size_t i = 0; i < static_cast<size_t>(b); ++i)
    if (data.shape[i] >= 0 && idx.shape[i] >= 0 && data.shape[i] != idx.shape[i])
      return ctx.error(ErrorCode::kInvalidModel, "GatherND batch dims of data " +
                                                     data.shape.toString() + " and indices " +
                                                     idx.shape.toString() + " differ");
  const int64_t m = idx.shape[static_cast<size_t>(q - 1)];
  std::vector<int64_t> out(idx.shape.dims().begin(), idx.shape.dims().end() - 1);
  if (m < 0) {
    setOut(ctx, 0, data.dtype, std::nullopt);
    return Status::Ok();
  }
  if (m < 1 || m > r - b)
    return ctx.error(ErrorCode::kInvalidModel, "GatherND indices' last dim " + str(m) +
                                                   " must be in [1, " + str(r - b) + "]");
  out.insert(out.end(), data.shape.dims().begin() + b + m, data.shape.dims().end());
  if (const auto v = intValues(idx))
    for (size_t i = 0; i < v->size(); ++i)
      EI_RETURN_IF_ERROR(checkIndexRange(
          ctx, (*v)[i], data.shape[static_cast<size_t>(b) + i % static_cast<size_t>(m)]));
  setOut(ctx, 0, data.dtype, Shape(out));
  return Status::Ok();
}

}  // namespace

void registerScatterGatherSchemas(OpSchemaRegistry& r) {
  addSchema(r, "ScatterND", 11, 3, 3, inferScatterND);
  addSchema(r, "ScatterElements", 11, 3, 3, inferScatterElements);
  addSchema(r, "Scatter", 9, 3, 3, inferScatterElements, 10);  // deprecated in opset 11
  addSchema(r, "GatherND", 11, 2, 2, inferGatherND);
}

}  // namespace edgeinfer::graph
