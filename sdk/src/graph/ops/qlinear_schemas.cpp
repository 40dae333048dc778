// Schemas and shape inference for the integer / quantized linear ops (opsets 10-17):
//   MatMulInteger(A, B, [a_zp], [b_zp]) -> int32, numpy matmul shapes;
//   ConvInteger(X, W, [x_zp], [w_zp]) -> int32, Conv shapes;
//   QLinearMatMul(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp) -> y_zp's type;
//   QLinearConv(x, x_scale, x_zp, w, w_scale, w_zp, y_scale, y_zp, [B]) -> y_zp's type.
// Conv output sizes use graph/ops/conv_geometry.h, like Conv itself.
#include <string>

#include "graph/op_schema.h"
#include "graph/ops/conv_geometry.h"
#include "graph/ops/schema_util.h"

namespace edgeinfer::graph {
namespace {

using namespace schema_util;

bool isQuant8(DataType t) {
  return t == DataType::kInt8 || t == DataType::kUInt8;
}

/// Checks that input `i` is 8-bit and that its zero point (input `zp`, optional) matches it.
Status checkQuantInput(const InferContext& ctx, size_t i, size_t zp, const std::string& what) {
  EI_RETURN_IF_ERROR(needType(ctx, i, isQuant8(ctx.inputs[i].dtype), what + " (int8 or uint8)"));
  if (ctx.hasInput(zp) && ctx.inputs[zp].dtype != ctx.inputs[i].dtype)
    return ctx.error(ErrorCode::kInvalidModel,
                     what + " zero point type " + dataTypeName(ctx.inputs[zp].dtype) +
                         " differs from " + dataTypeName(ctx.inputs[i].dtype));
  return Status::Ok();
}

/// A scale (or zero point) must be a scalar or 1-D.
Status checkScaleRank(const InferContext& ctx, size_t i, const std::string& what) {
  const InferValue& v = ctx.inputs[i];
  if (v.shapeKnown && v.shape.rank() > 1 && v.shape.numel() != 1)
    return ctx.error(ErrorCode::kInvalidModel,
                     what + " must be a scalar or 1-D, got " + v.shape.toString());
  return Status::Ok();
}

Status checkFloatScale(const InferContext& ctx, size_t i, const std::string& what) {
  EI_RETURN_IF_ERROR(needType(ctx, i, ctx.inputs[i].dtype == DataType::kFloat32, what));
  return checkScaleRank(ctx, i, what);
}

/// numpy matmul output shape of a and b (1-D operands promoted and their dim removed).
Status matmulShape(const InferContext& ctx, const InferValue& a, const InferValue& b,
                   std::optional<Shape>* out) {
  if (!a.shapeKnown || !b.shapeKnown) return Status::Ok();
  if (a.shape.rank() == 0 || b.shape.rank() == 0)
    return ctx.error(ErrorCode::kInvalidModel, "matmul operands cannot be scalars");
  Shape sa = a.shape, sb = b.shape;
  if (sa.rank() == 1) sa = Shape({1, sa[0]});
  if (sb.rank() == 1) sb = Shape({sb[0], 1});
  const int64_t ka = sa[sa.rank() - 1], kb = sb[sb.rank() - 2];
  if (ka >= 0 && kb >= 0 && ka != kb)
    return ctx.error(ErrorCode::kInvalidModel, "matmul inner dims differ: " + a.shape.toString() +
                                                   " x " + b.shape.toString());
  Shape ba(std::vector<int64_t>(sa.dims().begin(), sa.dims().end() - 2));
  Shape bb(std::vector<int64_t>(sb.dims().begin(), sb.dims().end() - 2));
  auto batch = broadcastShapes(ba, bb);
  if (!batch.ok())
    return ctx.error(ErrorCode::kInvalidModel, "matmul batch dims: " + batch.status().message());
  std::vector<int64_t> dims = batch->dims();
  if (a.shape.rank() > 1) dims.push_back(sa[sa.rank() - 2]);
  if (b.shape.rank() > 1) dims.push_back(sb[sb.rank() - 1]);
  *out = Shape(dims);
  return Status::Ok();
}

Status inferMatMulInteger(InferContext& ctx) {
  EI_RETURN_IF_ERROR(checkQuantInput(ctx, 0, 2, "MatMulInteger A"));
  EI_RETURN_IF_ERROR(checkQuantInput(ctx, 1, 3, "MatMulInteger B"));
  std::optional<Shape> out;
  EI_RETURN_IF_ERROR(matmulShape(ctx, ctx.inputs[0], ctx.inputs[1], &out));
  setOut(ctx, 0, DataType::kInt32, out);
  return Status::Ok();
}

Status inferQLinearMatMul(InferContext& ctx) {
  EI_RETURN_IF_ERROR(checkQuantInput(ctx, 0, 2, "QLinearMatMul a"));
  EI_RETURN_IF_ERROR(checkQuantInput(ctx, 3, 5, "QLinearMatMul b"));
  EI_RETURN_IF_ERROR(needType(ctx, 7, isQuant8(ctx.inputs[7].dtype), "QLinearMatMul y_zero_point"));
  EI_RETURN_IF_ERROR(checkFloatScale(ctx, 1, "QLinearMatMul a_scale"));
  EI_RETURN_IF_ERROR(checkFloatScale(ctx, 4, "QLinearMatMul b_scale"));
  EI_RETURN_IF_ERROR(checkFloatScale(ctx, 6, "QLinearMatMul y_scale"));
  EI_RETURN_IF_ERROR(checkScalar(ctx, 6, "QLinearMatMul y_scale"));
  EI_RETURN_IF_ERROR(checkScalar(ctx, 7, "QLinearMatMul y_zero_point"));
  std::optional<Shape> out;
  EI_RETURN_IF_ERROR(matmulShape(ctx, ctx.inputs[0], ctx.inputs[3], &out));
  setOut(ctx, 0, ctx.inputs[7].dtype, out);
  return Status::Ok();
}

/// Conv output shape for data input `xi` and weight input `wi`.
Status convShape(InferContext& ctx, size_t xi, size_t wi, std::optional<Shape>* out) {
  const InferValue& x = ctx.inputs[xi];
  const InferValue& w = ctx.inputs[wi];
  const int64_t group = ctx.attrs().getInt("group", 1);
  if (group < 1) return ctx.error(ErrorCode::kInvalidModel, "group must be >= 1");
  if (!x.shapeKnown || !w.shapeKnown) return Status::Ok();
  if (x.shape.rank() < 3 || w.shape.rank() != x.shape.rank())
    return ctx.error(ErrorCode::kInvalidModel, "input " + x.shape.toString() + " and weight " +
                                                   w.shape.toString() +
                                                   " must have the same rank >= 3");
  const size_t sr = x.shape.rank() - 2;
  const int64_t c = x.shape[1], m = w.shape[0], cg = w.shape[1];
  if (c >= 0 && cg >= 0 && c != cg * group)
    return ctx.error(ErrorCode::kInvalidModel, "input channels " + str(c) + " != weight channels " +
                                                   str(cg) + " x group " + str(group));
  if (m >= 0 && m % group != 0)
    return ctx.error(ErrorCode::kInvalidModel,
                     "output channels " + str(m) + " are not divisible by group " + str(group));
  WindowAttrs wa;
  const std::vector<int64_t> kernel(w.shape.dims().begin() + 2, w.shape.dims().end());
  Status s = readWindowAttrs(ctx.attrs(), sr, kernel, &wa);
  if (!s.ok()) return ctx.error(ErrorCode::kInvalidModel, s.message());
  WindowDims d;
  s = computeWindowDims(wa, std::vector<int64_t>(x.shape.dims().begin() + 2, x.shape.dims().end()),
                        &d);
  if (!s.ok()) return ctx.error(ErrorCode::kInvalidModel, s.message());
  std::vector<int64_t> dims = {x.shape[0], m};
  dims.insert(dims.end(), d.out.begin(), d.out.end());
  *out = Shape(dims);
  return Status::Ok();
}

/// The weight zero point / scale must be a scalar or hold one value per output channel.
Status checkPerChannel(const InferContext& ctx, size_t i, size_t wi, const std::string& what) {
  EI_RETURN_IF_ERROR(checkScaleRank(ctx, i, what));
  const InferValue& v = ctx.inputs[i];
  const InferValue& w = ctx.inputs[wi];
  if (v.shapeKnown && w.shapeKnown && w.shape.rank() > 0 && v.shape.isStatic() &&
      v.shape.numel() != 1 && w.shape[0] >= 0 && v.shape.numel() != w.shape[0])
    return ctx.error(ErrorCode::kInvalidModel, what + " has " + str(v.shape.numel()) +
                                                   " values for " + str(w.shape[0]) +
                                                   " output channels");
  return Status::Ok();
}

Status inferConvInteger(InferContext& ctx) {
  EI_RETURN_IF_ERROR(checkQuantInput(ctx, 0, 2, "ConvInteger x"));
  EI_RETURN_IF_ERROR(checkQuantInput(ctx, 1, 3, "ConvInteger w"));
  if (ctx.hasInput(2)) EI_RETURN_IF_ERROR(checkScalar(ctx, 2, "ConvInteger x_zero_point"));
  if (ctx.hasInput(3)) EI_RETURN_IF_ERROR(checkPerChannel(ctx, 3, 1, "ConvInteger w_zero_point"));
  std::optional<Shape> out;
  EI_RETURN_IF_ERROR(convShape(ctx, 0, 1, &out));
  setOut(ctx, 0, DataType::kInt32, out);
  return Status::Ok();
}

Status inferQLinearConv(InferContext& ctx) {
  EI_RETURN_IF_ERROR(checkQuantInput(ctx, 0, 2, "QLinearConv x"));
  EI_RETURN_IF_ERROR(checkQuantInput(ctx, 3, 5, "QLinearConv w"));
  EI_RETURN_IF_ERROR(needType(ctx, 7, isQuant8(ctx.inputs[7].dtype), "QLinearConv y_zero_point"));
  EI_RETURN_IF_ERROR(checkFloatScale(ctx, 1, "QLinearConv x_scale"));
  EI_RETURN_IF_ERROR(checkScalar(ctx, 1, "QLinearConv x_scale"));
  EI_RETURN_IF_ERROR(checkScalar(ctx, 2, "QLinearConv x_zero_point"));
  EI_RETURN_IF_ERROR(checkFloatScale(ctx, 4, "QLinearConv w_scale"));
  EI_RETURN_IF_ERROR(checkPerChannel(ctx, 4, 3, "QLinearConv w_scale"));
  EI_RETURN_IF_ERROR(checkPerChannel(ctx, 5, 3, "QLinearConv w_zero_point"));
  EI_RETURN_IF_ERROR(checkFloatScale(ctx, 6, "QLinearConv y_scale"));
  EI_RETURN_IF_ERROR(checkScalar(ctx, 6, "QLinearConv y_scale"));
  EI_RETURN_IF_ERROR(checkScalar(ctx, 7, "QLinearConv y_zero_point"));
  if (ctx.hasInput(8)) {
    EI_RETURN_IF_ERROR(needType(ctx, 8, ctx.inputs[8].dtype == DataType::kInt32, "QLinearConv B"));
    const InferValue& b = ctx.inputs[8];
    const InferValue& w = ctx.inputs[3];
    if (b.shapeKnown &&
        (b.shape.rank() != 1 || (w.shapeKnown && w.shape.rank() > 0 && b.shape[0] >= 0 &&
                                 w.shape[0] >= 0 && b.shape[0] != w.shape[0])))
      return ctx.error(
          ErrorCode::kInvalidModel,
          "QLinearConv B must be 1-D with one value per output channel, got " + b.shape.toString());
  }
  std::optional<Shape> out;
  EI_RETURN_IF_ERROR(convShape(ctx, 0, 3, &out));
  setOut(ctx, 0, ctx.inputs[7].dtype, out);
  return Status::Ok();
}

}  // namespace

void registerQLinearSchemas(OpSchemaRegistry& r) {
  addSchema(r, "MatMulInteger", 10, 2, 4, inferMatMulInteger);
  addSchema(r, "ConvInteger", 10, 2, 4, inferConvInteger);
  addSchema(r, "QLinearMatMul", 10, 8, 8, inferQLinearMatMul);
  addSchema(r, "QLinearConv", 10, 8, 9, inferQLinearConv);
}

}  // namespace edgeinfer::graph
