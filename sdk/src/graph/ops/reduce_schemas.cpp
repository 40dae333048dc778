// Schemas and shape inference for the reductions: Reduce{Sum,Mean,Max,Min,Prod,L1,L2,
// LogSum,LogSumExp,SumSquare} (canonical attribute `axes`, keepdims, noop_with_empty_axes)
// and ArgMax / ArgMin (axis, keepdims, select_last_index; int64 output).
#include <string>
#include <vector>

#include "graph/op_schema.h"

namespace edgeinfer::graph {
namespace {

Status checkNumeric(const InferContext& ctx) {
  const DataType t = ctx.inputs[0].dtype;
  if (isFloatingPoint(t) || isInteger(t)) return Status::Ok();
  return ctx.error(ErrorCode::kInvalidModel,
                   std::string("input type ") + dataTypeName(t) + " is not numeric");
}

Status inferReduce(InferContext& ctx) {
  EI_RETURN_IF_ERROR(checkNumeric(ctx));
  const InferValue& x = ctx.inputs[0];
  InferValue& out = ctx.outputs[0];
  out.dtype = x.dtype;
  out.value = nullptr;
  const std::vector<int64_t> axes = ctx.attrs().getInts("axes");
  const bool keepDims = ctx.attrs().getInt("keepdims", 1) != 0;
  const bool noop = ctx.attrs().getInt("noop_with_empty_axes", 0) != 0;
  if (!x.shapeKnown) {
    out.shapeKnown = false;
    out.shape = Shape();
    return Status::Ok();
  }
  const int64_t rank = static_cast<int64_t>(x.shape.rank());
  std::vector<bool> reduced(x.shape.rank(), axes.empty() && !noop);
  for (int64_t a : axes) {
    auto na = normalizeAxis(a, rank);
    if (!na.ok() || rank == 0)
      return ctx.error(ErrorCode::kInvalidModel, "reduction axis " + std::to_string(a) +
                                                     " is out of range for rank " +
                                                     std::to_string(rank));
    if (reduced[static_cast<size_t>(*na)])
      return ctx.error(ErrorCode::kInvalidModel,
                       "reduction axis " + std::to_string(a) + " is listed twice");
    reduced[static_cast<size_t>(*na)] = true;
  }
  std::vector<int64_t> dims;
  for (size_t i = 0; i < x.shape.rank(); ++i) {
    if (!reduced[i])
      dims.push_back(x.shape[i]);
    else if (keepDims)
      dims.push_back(1);
  }
  out.shapeKnown = true;
  out.shape = Shape(dims);
  return Status::Ok();
}

Status inferArg(InferContext& ctx) {
  EI_RETURN_IF_ERROR(checkNumeric(ctx));
  const InferValue& x = ctx.inputs[0];
  InferValue& out = ctx.outputs[0];
  out.dtype = DataType::kInt64;
  out.value = nullptr;
  if (!x.shapeKnown) {
    out.shapeKnown = false;
    out.shape = Shape();
    return Status::Ok();
  }
  const int64_t rank = static_cast<int64_t>(x.shape.rank());
  const int64_t axisAttr = ctx.attrs().getInt("axis", 0);
  auto axis = normalizeAxis(axisAttr, rank);
  if (!axis.ok() || rank == 0)
    return ctx.error(
        ErrorCode::kInvalidModel,
        "axis " + std::to_string(axisAttr) + " is out of range for rank " + std::to_string(rank));
  const size_t a = static_cast<size_t>(*axis);
  if (x.shape[a] == 0)
    return ctx.error(ErrorCode::kInvalidModel, ctx.node.opType + " over an empty axis");
  std::vector<int64_t> dims = x.shape.dims();
  if (ctx.attrs().getInt("keepdims", 1) != 0)
    dims[a] = 1;
  else
    dims.erase(dims.begin() + static_cast<int64_t>(a));
  out.shapeKnown = true;
  out.shape = Shape(dims);
  return Status::Ok();
}

void add(OpSchemaRegistry& r, const std::string& op, int64_t minOpset, ShapeInferFn fn) {
  OpSchema s;
  s.opType = op;
  s.minOpset = minOpset;
  s.maxOpset = 17;
  s.minInputs = 1;
  s.maxInputs = 1;  // `axes` is canonicalised into an attribute
  s.infer = std::move(fn);
  r.add(std::move(s));
}

}  // namespace

void registerReduceSchemas(OpSchemaRegistry& r) {
  for (const char* op :
       {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
        "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})
    add(r, op, 7, inferReduce);
  add(r, "ArgMax", 7, inferArg);
  add(r, "ArgMin", 7, inferArg);
}

}  // namespace edgeinfer::graph
