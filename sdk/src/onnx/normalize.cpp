// Rewrites version-specific op forms into the one canonical form per op that shape
// functions and kernels implement (the list is in graph/op_schema.h). Keeping this in one
// place means kernels never branch on opset.
#include <limits>

#include "onnx/importer.h"
#include "onnx/onnx_tensor.h"

namespace edgeinfer::onnx_import {
namespace {

using graph::Attribute;
using graph::Graph;
using graph::Node;

Status nodeError(const Node& n, ErrorCode code, const std::string& msg) {
  return Status(code, msg, n.location());
}

/// Adds an int64 constant value and returns its name.
std::string addInt64Constant(Graph& g, const std::string& hint, const std::vector<int64_t>& v) {
  const std::string name = g.uniqueName(hint);
  Tensor t = Tensor::zeros(DataType::kInt64, Shape{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<int64_t>()[i] = v[i];
  graph::Value& val = g.value(name);
  val.dtype = DataType::kInt64;
  val.shape = t.shape();
  val.shapeKnown = true;
  val.constant = t;
  return name;
}

std::string addScalarConstant(Graph& g, const std::string& hint, DataType dt, double value) {
  const std::string name = g.uniqueName(hint);
  Tensor t = Tensor::zeros(dt == DataType::kUndefined ? DataType::kFloat32 : dt, Shape{});
  switch (t.dtype()) {
    case DataType::kFloat32:
      *t.data<float>() = static_cast<float>(value);
      break;
    case DataType::kInt64:
      *t.data<int64_t>() = static_cast<int64_t>(value);
      break;
    case DataType::kInt32:
      *t.data<int32_t>() = static_cast<int32_t>(value);
      break;
    default: {
      Tensor f = Tensor::zeros(DataType::kFloat32, Shape{});
      *f.data<float>() = static_cast<float>(value);
      t = f;
    }
  }
  graph::Value& val = g.value(name);
  val.dtype = t.dtype();
  val.shape = t.shape();
  val.shapeKnown = true;
  val.constant = t;
  return name;
}

/// Moves a constant int64 input at `index` into attribute `attr` (and drops the input).
Status inputToIntsAttribute(Graph& g, Node& n, size_t index, const std::string& attr) {
  if (!n.hasInput(index)) {
    if (index < n.inputs.size()) n.inputs.resize(index);
    return Status::Ok();
  }
  const Tensor* t = g.constant(n.inputs[index]);
  if (!t)
    return nodeError(n, ErrorCode::kUnsupported,
                     "input '" + n.inputs[index] + "' (" + attr +
                         ") must be a constant: computed " + attr + " are not supported");
  std::vector<int64_t> v(static_cast<size_t>(t->numel()));
  for (int64_t i = 0; i < t->numel(); ++i) v[static_cast<size_t>(i)] = t->getAsInt64(i);
  n.attrs.set(attr, Attribute::Ints(std::move(v)));
  n.inputs.resize(index);
  return Status::Ok();
}

DataType inputType(const Graph& g, const Node& n, size_t i) {
  const graph::Value* v = n.hasInput(i) ? g.findValue(n.inputs[i]) : nullptr;
  return v ? v->dtype : DataType::kUndefined;
}

bool isReduce(const std::string& op) {
  return op.rfind("Reduce", 0) == 0;
}

}  // namespace

Status normalizeNode(Graph& g, Node& n, int64_t opset) {
  const std::string& op = n.opType;
  if (!n.domain.empty()) return Status::Ok();

  if (op == "Squeeze" || op == "Unsqueeze") {
    if (opset >= 13) return inputToIntsAttribute(g, n, 1, "axes");
    return Status::Ok();
  }
  if (isReduce(op)) {
    if (op == "ReduceSum" && opset >= 13) return inputToIntsAttribute(g, n, 1, "axes");
    return Status::Ok();
  }
  if (op == "Split") {
    if (opset >= 13) return inputToIntsAttribute(g, n, 1, "split");
    return Status::Ok();
  }
  if (op == "Slice" && opset < 10) {
    const auto starts = n.attrs.getInts("starts");
    const auto ends = n.attrs.getInts("ends");
    if (!n.attrs.has("starts") || !n.attrs.has("ends"))
      return nodeError(n, ErrorCode::kInvalidModel, "Slice needs attributes starts and ends");
    n.inputs.resize(1);
    n.inputs.push_back(addInt64Constant(g, n.name + "_starts", starts));
    n.inputs.push_back(addInt64Constant(g, n.name + "_ends", ends));
    if (n.attrs.has("axes"))
      n.inputs.push_back(addInt64Constant(g, n.name + "_axes", n.attrs.getInts("axes")));
    n.attrs.erase("starts");
    n.attrs.erase("ends");
    n.attrs.erase("axes");
    return Status::Ok();
  }
  if (op == "Clip" && opset < 11) {
    const DataType dt = inputType(g, n, 0);
    const float lo = n.attrs.getFloat("min", std::numeric_limits<float>::lowest());
    const float hi = n.attrs.getFloat("max", std::numeric_limits<float>::max());
    n.inputs.resize(1);
    n.inputs.push_back(addScalarConstant(g, n.name + "_min", dt, lo));
    n.inputs.push_back(addScalarConstant(g, n.name + "_max", dt, hi));
    n.attrs.erase("min");
    n.attrs.erase("max");
    return Status::Ok();
  }
  if (op == "Pad" && opset < 11) {
    if (!n.attrs.has("pads"))
      return nodeError(n, ErrorCode::kInvalidModel, "Pad needs attribute pads");
    const DataType dt = inputType(g, n, 0);
    n.inputs.resize(1);
    n.inputs.push_back(addInt64Constant(g, n.name + "_pads", n.attrs.getInts("pads")));
    n.inputs.push_back(addScalarConstant(g, n.name + "_value", dt, n.attrs.getFloat("value", 0.f)));
    n.attrs.erase("pads");
    n.attrs.erase("value");
    return Status::Ok();
  }
  if (op == "Upsample" || (op == "Resize" && opset < 11)) {
    std::string mode = n.attrs.getString("mode", "nearest");
    if (mode == "bilinear") mode = "linear";
    std::string scales;
    if (n.attrs.has("scales")) {  // Upsample-7: scales as attribute
      const auto f = n.attrs.getFloats("scales");
      scales = g.uniqueName(n.name + "_scales");
      Tensor t = Tensor::zeros(DataType::kFloat32, Shape{static_cast<int64_t>(f.size())});
      for (size_t i = 0; i < f.size(); ++i) t.data<float>()[i] = f[i];
      graph::Value& v = g.value(scales);
      v.dtype = DataType::kFloat32;
      v.shape = t.shape();
      v.shapeKnown = true;
      v.constant = t;
      n.attrs.erase("scales");
    } else if (n.hasInput(1)) {
      scales = n.inputs[1];
    } else {
      return nodeError(n, ErrorCode::kInvalidModel, op + " needs scales");
    }
    n.opType = "Resize";
    n.inputs = {n.inputs[0], "", scales};
    n.attrs.set("mode", Attribute::String(mode));
    n.attrs.set("coordinate_transformation_mode", Attribute::String("asymmetric"));
    n.attrs.set("nearest_mode", Attribute::String("floor"));
    n.attrs.set("cubic_coeff_a", Attribute::Float(-0.75f));
    n.attrs.set("exclude_outside", Attribute::Int(0));
    n.attrs.set("extrapolation_value", Attribute::Float(0.f));
    return Status::Ok();
  }
  if (op == "Resize") {
    // Opset 11/13: fill the defaults explicitly; an empty constant scales input means
    // "use sizes".
    if (!n.attrs.has("mode")) n.attrs.set("mode", Attribute::String("nearest"));
    if (!n.attrs.has("coordinate_transformation_mode"))
      n.attrs.set("coordinate_transformation_mode", Attribute::String("half_pixel"));
    if (!n.attrs.has("nearest_mode"))
      n.attrs.set("nearest_mode", Attribute::String("round_prefer_floor"));
    if (!n.attrs.has("cubic_coeff_a")) n.attrs.set("cubic_coeff_a", Attribute::Float(-0.75f));
    if (!n.attrs.has("exclude_outside")) n.attrs.set("exclude_outside", Attribute::Int(0));
    if (!n.attrs.has("extrapolation_value"))
      n.attrs.set("extrapolation_value", Attribute::Float(0.f));
    for (size_t i = 1; i < 3 && i < n.inputs.size(); ++i) {
      const Tensor* t = n.hasInput(i) ? g.constant(n.inputs[i]) : nullptr;
      if (t && t->numel() == 0) n.inputs[i].clear();
    }
    while (!n.inputs.empty() && n.inputs.back().empty()) n.inputs.pop_back();
    return Status::Ok();
  }
  if (op == "Softmax" || op == "LogSoftmax" || op == "Hardmax") {
    const bool legacy = opset < 13;
    n.attrs.set("coerce_2d", Attribute::Int(legacy ? 1 : 0));
    if (!n.attrs.has("axis")) n.attrs.set("axis", Attribute::Int(legacy ? 1 : -1));
    return Status::Ok();
  }
  if (op == "Cast") {
    const int64_t to = n.attrs.getInt("to", -1);
    const DataType dt = dataTypeFromOnnx(static_cast<int>(to));
    if (dt == DataType::kUndefined)
      return nodeError(n, ErrorCode::kUnsupported,
                       "Cast to " + onnxTypeName(static_cast<int>(to)) + " is not supported");
    n.attrs.set("to", Attribute::Int(static_cast<int64_t>(dt)));
    return Status::Ok();
  }
  return Status::Ok();
}

}  // namespace edgeinfer::onnx_import
