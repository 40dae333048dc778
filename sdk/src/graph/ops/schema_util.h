// Small helpers for shape functions (detection, scatter/gather, misc and QLinear schemas).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/op_schema.h"

namespace edgeinfer::graph::schema_util {

inline constexpr int64_t kUnknown = Shape::kUnknown;

inline std::string str(int64_t v) {
  return std::to_string(v);
}

/// Contents of an integer input when known.
inline std::optional<std::vector<int64_t>> intValues(const InferValue& v) {
  if (!v.value || !(isInteger(v.dtype) || v.dtype == DataType::kBool)) return std::nullopt;
  std::vector<int64_t> out(static_cast<size_t>(v.value->numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = v.value->getAsInt64(static_cast<int64_t>(i));
  return out;
}

/// Sets output i to `dtype` with the given shape (or unknown rank).
inline void setOut(InferContext& ctx, size_t i, DataType dtype, std::optional<Shape> shape) {
  InferValue& o = ctx.outputs[i];
  o.dtype = dtype;
  o.value = nullptr;
  o.shapeKnown = shape.has_value();
  o.shape = shape ? *shape : Shape();
}

inline Shape unknownDims(size_t rank) {
  return Shape(std::vector<int64_t>(rank, kUnknown));
}

inline Status axisIn(const InferContext& ctx, int64_t axis, int64_t rank, int64_t* out) {
  auto a = normalizeAxis(axis, rank);
  if (!a.ok()) return ctx.error(ErrorCode::kInvalidModel, a.status().message());
  *out = *a;
  return Status::Ok();
}

inline Status needType(const InferContext& ctx, size_t i, bool ok, const std::string& what) {
  if (ok) return Status::Ok();
  return ctx.error(ErrorCode::kInvalidModel,
                   what + " has unsupported type " + dataTypeName(ctx.inputs[i].dtype));
}

inline bool isIndexType(DataType t) {
  return t == DataType::kInt32 || t == DataType::kInt64;
}

/// Fails unless input i is known to be (or may be) a single element.
inline Status checkScalar(const InferContext& ctx, size_t i, const std::string& what) {
  const InferValue& v = ctx.inputs[i];
  if (v.shapeKnown && v.shape.isStatic() && v.shape.numel() != 1)
    return ctx.error(ErrorCode::kInvalidModel,
                     what + " must have one element, got shape " + v.shape.toString());
  return Status::Ok();
}

inline void addSchema(OpSchemaRegistry& r, const std::string& op, int64_t minOpset, int minIn,
                      int maxIn, ShapeInferFn fn, int64_t maxOpset = 17) {
  OpSchema s;
  s.opType = op;
  s.minOpset = minOpset;
  s.maxOpset = maxOpset;
  s.minInputs = minIn;
  s.maxInputs = maxIn;
  s.infer = std::move(fn);
  r.add(std::move(s));
}

/// A schema of the SDK's own domain (kEdgeInferDomain): the ops the passes create.
inline void addEdgeInferSchema(OpSchemaRegistry& r, const std::string& op, int minIn, int maxIn,
                               ShapeInferFn fn) {
  OpSchema s;
  s.opType = op;
  s.domain = kEdgeInferDomain;
  s.minOpset = 7;
  s.maxOpset = 17;
  s.minInputs = minIn;
  s.maxInputs = maxIn;
  s.infer = std::move(fn);
  r.add(std::move(s));
}

}  // namespace edgeinfer::graph::schema_util
