#include "graph/op_schema.h"
#include "graph/passes/passes.h"

namespace edgeinfer::graph {

Status inferShapes(Graph& g, int64_t maxTensorBytes) {
  for (const Node& n : g.nodes) {
    std::vector<InferValue> in(n.inputs.size());
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i].empty()) continue;
      const Value* v = g.findValue(n.inputs[i]);
      if (!v || v->dtype == DataType::kUndefined)
        return Status(ErrorCode::kInvalidModel,
                      "input '" + n.inputs[i] + "' has no known type (is it defined?)",
                      n.location());
      in[i].dtype = v->dtype;
      in[i].shape = v->shape;
      in[i].shapeKnown = v->shapeKnown;
      in[i].value = v->constant ? &*v->constant : nullptr;
    }
    InferContext ctx(n, std::move(in));
    EI_RETURN_IF_ERROR(inferNode(ctx));
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      if (n.outputs[i].empty()) continue;
      const InferValue& o = ctx.outputs[i];
      if (o.dtype == DataType::kUndefined)
        return Status(ErrorCode::kInternal,
                      "shape inference gave output " + std::to_string(i) + " no type",
                      n.location());
      if (o.shapeKnown && o.shape.isStatic()) {
        const double bytes = static_cast<double>(o.shape.numel()) * dataTypeSize(o.dtype);
        if (bytes > static_cast<double>(maxTensorBytes))
          return Status(ErrorCode::kInvalidModel,
                        "output '" + n.outputs[i] + "' would have shape " + o.shape.toString() +
                            ", above the tensor size limit",
                        n.location());
      }
      Value& v = g.value(n.outputs[i]);
      v.dtype = o.dtype;
      v.shape = o.shape;
      v.shapeKnown = o.shapeKnown;
    }
  }
  return Status::Ok();
}

}  // namespace edgeinfer::graph
