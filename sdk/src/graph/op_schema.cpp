#include "graph/op_schema.h"

#include <algorithm>

namespace edgeinfer::graph {

Status InferContext::error(ErrorCode code, const std::string& msg) const {
  return Status(code, msg, node.location());
}

OpSchemaRegistry& OpSchemaRegistry::instance() {
  static OpSchemaRegistry* registry = [] {
    auto* r = new OpSchemaRegistry();
    registerElementwiseSchemas(*r);
    registerTensorSchemas(*r);
    registerReduceSchemas(*r);
    registerNnSchemas(*r);
    registerQuantSchemas(*r);
    registerFusedSchemas(*r);
    return r;
  }();
  return *registry;
}

void OpSchemaRegistry::add(OpSchema schema) {
  std::string key = schema.domain + "::" + schema.opType;
  map_[key] = std::move(schema);
}

const OpSchema* OpSchemaRegistry::find(const std::string& domain, const std::string& opType) const {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = map_.find(d + "::" + opType);
  return it == map_.end() ? nullptr : &it->second;
}

std::vector<std::string> OpSchemaRegistry::opTypes() const {
  std::vector<std::string> out;
  for (const auto& [k, s] : map_)
    if (s.domain.empty()) out.push_back(s.opType);
  std::sort(out.begin(), out.end());
  return out;
}

Status inferNode(InferContext& ctx) {
  const Node& n = ctx.node;
  const OpSchema* schema = OpSchemaRegistry::instance().find(n.domain, n.opType);
  if (!schema) return ctx.error(ErrorCode::kUnsupported, "no schema registered for op " + n.opType);
  int present = 0;
  for (size_t i = 0; i < n.inputs.size(); ++i)
    if (!n.inputs[i].empty()) present = static_cast<int>(i) + 1;
  if (present < schema->minInputs || (schema->maxInputs >= 0 && present > schema->maxInputs))
    return ctx.error(
        ErrorCode::kInvalidModel,
        "has " + std::to_string(present) + " inputs, expected " +
            std::to_string(schema->minInputs) +
            (schema->maxInputs < 0 ? " or more" : " to " + std::to_string(schema->maxInputs)));
  for (int i = 0; i < schema->minInputs; ++i)
    if (!ctx.hasInput(static_cast<size_t>(i)))
      return ctx.error(ErrorCode::kInvalidModel,
                       "required input " + std::to_string(i) + " is missing");
  Status s = schema->infer(ctx);
  return s.at(n.location());
}

Expected<Shape> broadcastShapes(const Shape& a, const Shape& b) {
  const size_t rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.rank() ? 1 : a[i - (rank - a.rank())];
    const int64_t db = i < rank - b.rank() ? 1 : b[i - (rank - b.rank())];
    if (da == db) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else if (db == 1) {
      out[i] = da;
    } else if (da < 0) {
      out[i] = db;
    } else if (db < 0) {
      out[i] = da;
    } else {
      return Status(ErrorCode::kInvalidModel, "shapes " + a.toString() + " and " + b.toString() +
                                                  " cannot be broadcast together");
    }
  }
  return Shape(std::move(out));
}

Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank || (rank == 0 && axis != 0 && axis != -1))
    return Status(
        ErrorCode::kInvalidModel,
        "axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

}  // namespace edgeinfer::graph
