// Schemas and shape inference for TopK, NonMaxSuppression and NonZero.
//
// TopK reaches the IR in either form (the importer does not normalise it): opset < 10 has the
// attribute `k`, opset 10+ the input `K`; an attribute `k` wins when both are present.
// NonMaxSuppression and NonZero have data-dependent output sizes: at build time the first
// (NMS) or second (NonZero) output dim is unknown; at run time, when every input value is
// known, the shape function runs the selection (graph/ops/detection_common.h) to size it.
//
// Their bounded forms (domain ai.edgeinfer), which graph/partition.h puts in an engine that
// needs static shapes, have static outputs: the selection padded to the most it can hold, and
// how much of it is valid.
//   BoundedNonZero (X) -> (Y, count)           Y: int64 [max(rank, 1), numel(X)], the first
//                                              `count` columns NonZero(X), the rest 0
//   BoundedNonMaxSuppression (as NonMaxSuppression) -> (Y, count)
//                                              Y: int64 [batches * classes * K, 3], K =
//                                              min(boxes, max_output_boxes_per_class) (boxes
//                                              when that is computed at run time); the first
//                                              `count` rows NonMaxSuppression's, the rest 0
//   count: int64 [1]
#include <algorithm>
#include <optional>
#include <string>

#include "graph/op_schema.h"
#include "graph/ops/detection_common.h"
#include "graph/ops/schema_util.h"

namespace edgeinfer::graph {
namespace {

using namespace schema_util;

/// The k of a TopK node when known; kUnknown otherwise.
Status topKValue(const InferContext& ctx, int64_t* k) {
  *k = kUnknown;
  if (ctx.attrs().has("k")) {
    *k = ctx.attrs().getInt("k", 0);
  } else {
    if (!ctx.hasInput(1))
      return ctx.error(ErrorCode::kInvalidModel, "TopK needs the attribute k or the input K");
    if (ctx.inputs[1].dtype != DataType::kInt64)
      return ctx.error(ErrorCode::kInvalidModel, std::string("TopK K must be int64, got ") +
                                                     dataTypeName(ctx.inputs[1].dtype));
    const InferValue& kv = ctx.inputs[1];
    if (kv.shapeKnown && (kv.shape.rank() > 1 || (kv.shape.isStatic() && kv.shape.numel() != 1)))
      return ctx.error(
          ErrorCode::kInvalidModel,
          "TopK K must be a 1-D tensor of one element, got shape " + kv.shape.toString());
    if (const auto v = intValues(kv)) *k = v->at(0);
  }
  if (*k != kUnknown && *k < 0)
    return ctx.error(ErrorCode::kInvalidModel, "TopK k must be >= 0, got " + str(*k));
  return Status::Ok();
}

Status inferTopK(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  EI_RETURN_IF_ERROR(
      needType(ctx, 0, isFloatingPoint(x.dtype) || isInteger(x.dtype), "TopK input"));
  if (ctx.outputs.size() != 2)
    return ctx.error(ErrorCode::kInvalidModel, "TopK must have two outputs (values, indices)");
  int64_t k = kUnknown;
  EI_RETURN_IF_ERROR(topKValue(ctx, &k));
  const int64_t sorted = ctx.attrs().getInt("sorted", 1);
  const int64_t largest = ctx.attrs().getInt("largest", 1);
  if ((sorted != 0 && sorted != 1) || (largest != 0 && largest != 1))
    return ctx.error(ErrorCode::kInvalidModel, "TopK sorted and largest must be 0 or 1");
  std::optional<Shape> out;
  if (x.shapeKnown) {
    const int64_t rank = static_cast<int64_t>(x.shape.rank());
    if (rank == 0) return ctx.error(ErrorCode::kInvalidModel, "TopK input cannot be a scalar");
    int64_t axis = 0;
    EI_RETURN_IF_ERROR(axisIn(ctx, ctx.attrs().getInt("axis", -1), rank, &axis));
    const int64_t dim = x.shape[static_cast<size_t>(axis)];
    if (k != kUnknown && dim >= 0 && k > dim)
      return ctx.error(ErrorCode::kInvalidModel, "TopK k = " + str(k) +
                                                     " is larger than the axis dimension " +
                                                     str(dim) + " of " + x.shape.toString());
    out = x.shape;
    (*out)[static_cast<size_t>(axis)] = k;
  }
  setOut(ctx, 0, x.dtype, out);
  setOut(ctx, 1, DataType::kInt64, out);
  return Status::Ok();
}

/// Reads the NonMaxSuppression parameters; `known` is false if a present one is not known.
Status nmsParams(const InferContext& ctx, NmsParams* p, bool* known) {
  *known = true;
  const int64_t cpb = ctx.attrs().getInt("center_point_box", 0);
  if (cpb != 0 && cpb != 1)
    return ctx.error(ErrorCode::kInvalidModel,
                     "NonMaxSuppression center_point_box must be 0 or 1, got " + str(cpb));
  p->centerPointBox = cpb == 1;
  if (ctx.hasInput(2)) {
    EI_RETURN_IF_ERROR(needType(ctx, 2, ctx.inputs[2].dtype == DataType::kInt64,
                                "NonMaxSuppression max_output_boxes_per_class"));
    EI_RETURN_IF_ERROR(checkScalar(ctx, 2, "NonMaxSuppression max_output_boxes_per_class"));
    if (const auto v = intValues(ctx.inputs[2]); v && v->size() == 1)
      p->maxOutputPerClass = (*v)[0];
    else
      *known = false;
  }
  for (size_t i = 3; i <= 4; ++i) {
    if (!ctx.hasInput(i)) continue;
    const char* what =
        i == 3 ? "NonMaxSuppression iou_threshold" : "NonMaxSuppression score_threshold";
    EI_RETURN_IF_ERROR(needType(ctx, i, isFloatingPoint(ctx.inputs[i].dtype), what));
    EI_RETURN_IF_ERROR(checkScalar(ctx, i, what));
    const Tensor* v = ctx.inputs[i].value;
    if (!v || v->numel() != 1) {
      *known = false;
      continue;
    }
    const float f = static_cast<float>(v->getAsDouble(0));
    if (i == 3) {
      if (!(f >= 0.f && f <= 1.f))
        return ctx.error(
            ErrorCode::kInvalidModel,
            "NonMaxSuppression iou_threshold must be in [0, 1], got " + std::to_string(f));
      p->iouThreshold = f;
    } else {
      p->hasScoreThreshold = true;
      p->scoreThreshold = f;
    }
  }
  return Status::Ok();
}

Status inferNonMaxSuppression(InferContext& ctx) {
  const InferValue& boxes = ctx.inputs[0];
  const InferValue& scores = ctx.inputs[1];
  EI_RETURN_IF_ERROR(needType(ctx, 0, isFloatingPoint(boxes.dtype), "NonMaxSuppression boxes"));
  EI_RETURN_IF_ERROR(
      needType(ctx, 1, scores.dtype == boxes.dtype, "NonMaxSuppression scores (must match boxes)"));
  if (boxes.shapeKnown && (boxes.shape.rank() != 3 || (boxes.shape[2] >= 0 && boxes.shape[2] != 4)))
    return ctx.error(
        ErrorCode::kInvalidModel,
        "NonMaxSuppression boxes must have shape [batch, boxes, 4], got " + boxes.shape.toString());
  if (scores.shapeKnown && scores.shape.rank() != 3)
    return ctx.error(ErrorCode::kInvalidModel,
                     "NonMaxSuppression scores must have shape [batch, classes, boxes], got " +
                         scores.shape.toString());
  if (boxes.shapeKnown && scores.shapeKnown) {
    for (auto [bd, sd] : {std::pair<size_t, size_t>{0, 0}, {1, 2}}) {
      const int64_t a = boxes.shape[bd], b = scores.shape[sd];
      if (a >= 0 && b >= 0 && a != b)
        return ctx.error(ErrorCode::kInvalidModel, "NonMaxSuppression boxes " +
                                                       boxes.shape.toString() + " and scores " +
                                                       scores.shape.toString() + " disagree");
    }
  }
  NmsParams p;
  bool known = false;
  EI_RETURN_IF_ERROR(nmsParams(ctx, &p, &known));
  int64_t count = kUnknown;
  if (known && boxes.value && scores.value)
    count = static_cast<int64_t>(nonMaxSuppression(*boxes.value, *scores.value, p).size());
  setOut(ctx, 0, DataType::kInt64, Shape({count, 3}));
  return Status::Ok();
}

Status inferNonZero(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  EI_RETURN_IF_ERROR(
      needType(ctx, 0, isFloatingPoint(x.dtype) || isInteger(x.dtype) || x.dtype == DataType::kBool,
               "NonZero input"));
  const int64_t count = x.value ? countNonZero(*x.value) : kUnknown;
  // A scalar is treated as a one-element 1-D tensor (as onnxruntime does).
  const int64_t rank = x.shapeKnown ? std::max<int64_t>(1, int64_t(x.shape.rank())) : kUnknown;
  setOut(ctx, 0, DataType::kInt64, Shape({rank, count}));
  return Status::Ok();
}

Status inferBoundedNonZero(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  EI_RETURN_IF_ERROR(
      needType(ctx, 0, isFloatingPoint(x.dtype) || isInteger(x.dtype) || x.dtype == DataType::kBool,
               "BoundedNonZero input"));
  Shape y({kUnknown, kUnknown});
  if (x.shapeKnown) {
    y[0] = std::max<int64_t>(1, int64_t(x.shape.rank()));
    if (x.shape.isStatic()) y[1] = x.shape.numel();
  }
  setOut(ctx, 0, DataType::kInt64, y);
  setOut(ctx, 1, DataType::kInt64, Shape({1}));
  return Status::Ok();
}

Status inferBoundedNonMaxSuppression(InferContext& ctx) {
  EI_RETURN_IF_ERROR(inferNonMaxSuppression(ctx));
  const InferValue& boxes = ctx.inputs[0];
  const InferValue& scores = ctx.inputs[1];
  if (!ctx.hasInput(2))
    return ctx.error(ErrorCode::kInvalidModel,
                     "BoundedNonMaxSuppression needs max_output_boxes_per_class");
  // K: at most the boxes, and at most max_output_boxes_per_class where that is known.
  const auto maxOut = intValues(ctx.inputs[2]);
  int64_t rows = kUnknown;
  if (boxes.shapeKnown && boxes.shape.isStatic() && scores.shapeKnown && scores.shape.isStatic()) {
    int64_t k = scores.shape[2];
    if (maxOut && maxOut->size() == 1) k = std::max<int64_t>(0, std::min(k, (*maxOut)[0]));
    rows = scores.shape[0] * scores.shape[1] * k;
  }
  setOut(ctx, 0, DataType::kInt64, Shape({rows, 3}));
  setOut(ctx, 1, DataType::kInt64, Shape({1}));
  return Status::Ok();
}

}  // namespace

void registerDetectionSchemas(OpSchemaRegistry& r) {
  addSchema(r, "TopK", 7, 1, 2, inferTopK);
  addSchema(r, "NonMaxSuppression", 10, 2, 5, inferNonMaxSuppression);
  addSchema(r, "NonZero", 9, 1, 1, inferNonZero);
  addEdgeInferSchema(r, "BoundedNonZero", 1, 1, inferBoundedNonZero);
  addEdgeInferSchema(r, "BoundedNonMaxSuppression", 3, 5, inferBoundedNonMaxSuppression);
}

}  // namespace edgeinfer::graph
