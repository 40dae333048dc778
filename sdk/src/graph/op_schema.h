// What the SDK knows about each op independent of any backend: the opsets it accepts and
// how its output types and shapes follow from its inputs (shape inference). The ONNX
// checker asks this registry which ops are supported; shape inference, the runtime and
// constant folding all use the same ShapeInferFn so there is one source of truth.
//
// Canonical forms: the importer rewrites version differences so that every op reaches
// the IR in ONE form (see sdk/src/onnx/normalize.cpp). Shape functions and kernels only
// ever see that form:
//   - Squeeze, Unsqueeze, Reduce*: `axes` is an attribute (ints), never an input.
//   - Split: `split` is an attribute (ints, optional), never an input.
//   - Slice: inputs (data, starts, ends, [axes], [steps]) as in opset 13.
//   - Clip: inputs (x, [min], [max]) as in opset 13.
//   - Pad: inputs (data, pads, [constant_value]), attribute `mode`.
//   - Resize (and Upsample): inputs (X, [roi], [scales], [sizes]) as in opset 13, with the
//     opset-13 attributes filled in explicitly for older models.
//   - Softmax/LogSoftmax/Hardmax: attribute `axis` (normalised >= 0 not guaranteed) and
//     attribute `coerce_2d` = 1 for opset < 13 semantics (flatten to 2-D at `axis`).
//   - Cast: attribute `to` holds an edgeinfer::DataType value (not ONNX's enum).
//   - Constant nodes become initializers; Dropout/Identity stay (a pass removes them).
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "graph/graph.h"

namespace edgeinfer::graph {

/// What shape inference knows about one input or output.
struct InferValue {
  DataType dtype = DataType::kUndefined;  // kUndefined for an absent optional input
  Shape shape;
  bool shapeKnown = false;        // false: nothing is known, not even the rank
  const Tensor* value = nullptr;  // the contents, when known (constants, or at run time)

  bool present() const { return dtype != DataType::kUndefined; }
};

struct InferContext {
  const Node& node;
  std::vector<InferValue> inputs;
  std::vector<InferValue> outputs;  // sized to node.outputs; the ShapeInferFn fills them

  InferContext(const Node& n, std::vector<InferValue> in)
      : node(n), inputs(std::move(in)), outputs(n.outputs.size()) {}
  bool hasInput(size_t i) const { return i < inputs.size() && inputs[i].present(); }
  const Attributes& attrs() const { return node.attrs; }
  /// Builds an InvalidModel/Unsupported status located at this node.
  Status error(ErrorCode code, const std::string& msg) const;
};

/// Fills ctx.outputs. Must accept unknown dims (-1) and unknown ranks in its inputs and
/// propagate them; must fail with a clear status for inputs that can never be valid
/// (rank mismatch, incompatible broadcast, bad attribute values).
using ShapeInferFn = std::function<Status(InferContext&)>;

struct OpSchema {
  std::string opType;
  std::string domain;     // "" (ONNX) or kEdgeInferDomain
  int64_t minOpset = 7;   // first default-domain opset whose semantics we implement
  int64_t maxOpset = 17;  // last one we have checked
  int minInputs = 1;
  int maxInputs = 1;  // -1: variadic
  ShapeInferFn infer;
};

class OpSchemaRegistry {
 public:
  static OpSchemaRegistry& instance();  // all built-in schemas registered on first use
  void add(OpSchema schema);
  const OpSchema* find(const std::string& domain, const std::string& opType) const;
  std::vector<std::string> opTypes() const;  // sorted, default domain only

 private:
  std::unordered_map<std::string, OpSchema> map_;  // key: domain + "::" + opType
};

/// Runs the node's ShapeInferFn (after checking the input count).
Status inferNode(InferContext& ctx);

// Registration functions, one per op family (sdk/src/graph/ops/*.cpp).
void registerElementwiseSchemas(OpSchemaRegistry& r);
void registerTensorSchemas(OpSchemaRegistry& r);
void registerReduceSchemas(OpSchemaRegistry& r);
void registerNnSchemas(OpSchemaRegistry& r);
void registerQuantSchemas(OpSchemaRegistry& r);
void registerFusedSchemas(OpSchemaRegistry& r);
// Families registered from inside the ones above (tensor: detection, scatter/gather, misc;
// quant: the integer / QLinear ops).
void registerDetectionSchemas(OpSchemaRegistry& r);      // TopK, NonMaxSuppression, NonZero
void registerScatterGatherSchemas(OpSchemaRegistry& r);  // ScatterND, ScatterElements, GatherND
void registerMiscSchemas(OpSchemaRegistry& r);           // Trilu, CastLike, EyeLike, Shrink, MVN
void registerQLinearSchemas(OpSchemaRegistry& r);        // ConvInteger, MatMulInteger, QLinear*

// Helpers shared by shape functions.
/// Numpy-style broadcast of two shapes (unknown dims propagate).
Expected<Shape> broadcastShapes(const Shape& a, const Shape& b);
/// Normalises a possibly-negative axis for a tensor of `rank`; fails if out of range.
Expected<int64_t> normalizeAxis(int64_t axis, int64_t rank);

}  // namespace edgeinfer::graph
