#include "onnx/importer.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include "core/half.h"
#include "edgeinfer/logger.h"
#include "onnx/onnx_tensor.h"

namespace edgeinfer::onnx_import {
namespace {

std::string dirOf(const std::string& path) {
  const auto pos = path.find_last_of('/');
  return pos == std::string::npos ? std::string(".") : path.substr(0, pos);
}

/// Checks a float initializer for NaN/Inf (a corrupt or badly exported weight file).
Status checkFinite(const Tensor& t, const std::string& name) {
  if (!isFloatingPoint(t.dtype())) return Status::Ok();
  for (int64_t i = 0; i < t.numel(); ++i) {
    const double v = t.getAsDouble(i);
    if (!std::isfinite(v))
      return Status(ErrorCode::kInvalidModel,
                    "initializer '" + name + "' holds " + (std::isnan(v) ? "NaN" : "Inf") +
                        " at element " + std::to_string(i) +
                        " (set BuilderConfig::allowNonFiniteWeights to accept it)");
  }
  return Status::Ok();
}

Status importValueInfo(const onnx::ValueInfoProto& vi, graph::Value& v, int64_t maxBytes) {
  if (!vi.type().has_tensor_type())
    return Status(ErrorCode::kUnsupported,
                  "graph input/output '" + vi.name() +
                      "' is not a tensor (sequences and maps are not supported)");
  const auto& tt = vi.type().tensor_type();
  v.dtype = dataTypeFromOnnx(tt.elem_type());
  if (v.dtype == DataType::kUndefined)
    return Status(ErrorCode::kUnsupported,
                  "graph input/output '" + vi.name() + "' has element type " +
                      onnxTypeName(tt.elem_type()) + ", which is not supported");
  if (!tt.has_shape()) {
    v.shapeKnown = false;
    return Status::Ok();
  }
  std::vector<int64_t> dims;
  std::vector<std::string> names;
  for (const auto& d : tt.shape().dim()) {
    if (d.has_dim_value()) {
      if (d.dim_value() < 0)
        return Status(ErrorCode::kInvalidModel, "graph input/output '" + vi.name() +
                                                    "' declares a negative dimension " +
                                                    std::to_string(d.dim_value()));
      dims.push_back(d.dim_value());
      names.emplace_back();
    } else {
      dims.push_back(Shape::kUnknown);
      names.push_back(d.dim_param());
    }
  }
  // Reject absurd declared sizes before anything tries to allocate them.
  double bytes = static_cast<double>(dataTypeSize(v.dtype));
  for (int64_t d : dims)
    if (d > 0) bytes *= static_cast<double>(d);
  if (bytes > static_cast<double>(maxBytes))
    return Status(
        ErrorCode::kInvalidModel,
        "graph input/output '" + vi.name() + "' declares shape " + Shape(dims).toString() + " (" +
            std::to_string(static_cast<long double>(bytes)) +
            " bytes), above the tensor size limit of " + std::to_string(maxBytes) + " bytes");
  v.shape = Shape(std::move(dims));
  v.dimNames = std::move(names);
  v.shapeKnown = true;
  return Status::Ok();
}

Expected<Tensor> constantNodeValue(const onnx::NodeProto& n, const ImportOptions& opt) {
  for (const auto& a : n.attribute()) {
    if (a.name() == "value") return tensorFromProto(a.t(), opt.externalDataDir, opt.maxTensorBytes);
    if (a.name() == "value_float") {
      Tensor t = Tensor::zeros(DataType::kFloat32, Shape{});
      *t.data<float>() = a.f();
      return t;
    }
    if (a.name() == "value_int") {
      Tensor t = Tensor::zeros(DataType::kInt64, Shape{});
      *t.data<int64_t>() = a.i();
      return t;
    }
    if (a.name() == "value_floats") {
      Tensor t = Tensor::zeros(DataType::kFloat32, Shape{static_cast<int64_t>(a.floats_size())});
      for (int i = 0; i < a.floats_size(); ++i) t.data<float>()[i] = a.floats(i);
      return t;
    }
    if (a.name() == "value_ints") {
      Tensor t = Tensor::zeros(DataType::kInt64, Shape{static_cast<int64_t>(a.ints_size())});
      for (int i = 0; i < a.ints_size(); ++i) t.data<int64_t>()[i] = a.ints(i);
      return t;
    }
    if (a.name() == "sparse_value" || a.name() == "value_string" || a.name() == "value_strings")
      return Status(ErrorCode::kUnsupported,
                    "Constant with attribute '" + a.name() + "' is not supported");
  }
  return Status(ErrorCode::kInvalidModel, "Constant node has no value attribute");
}

}  // namespace

Expected<graph::Attribute> attributeFromProto(const onnx::AttributeProto& a) {
  using AP = onnx::AttributeProto;
  switch (a.type()) {
    case AP::INT:
      return graph::Attribute::Int(a.i());
    case AP::FLOAT:
      return graph::Attribute::Float(a.f());
    case AP::STRING:
      return graph::Attribute::String(a.s());
    case AP::INTS:
      return graph::Attribute::Ints({a.ints().begin(), a.ints().end()});
    case AP::FLOATS:
      return graph::Attribute::Floats({a.floats().begin(), a.floats().end()});
    case AP::STRINGS:
      return graph::Attribute::Strings({a.strings().begin(), a.strings().end()});
    case AP::TENSOR: {
      EI_ASSIGN_OR_RETURN(Tensor t, tensorFromProto(a.t(), "", int64_t{1} << 30));
      return graph::Attribute::TensorValue(std::move(t));
    }
    default:
      break;
  }
  // Old models may omit the type field; infer it from what is set.
  if (a.type() == AP::UNDEFINED) {
    if (a.ints_size()) return graph::Attribute::Ints({a.ints().begin(), a.ints().end()});
    if (a.floats_size()) return graph::Attribute::Floats({a.floats().begin(), a.floats().end()});
    if (a.strings_size())
      return graph::Attribute::Strings({a.strings().begin(), a.strings().end()});
    if (a.has_i()) return graph::Attribute::Int(a.i());
    if (a.has_f()) return graph::Attribute::Float(a.f());
    if (a.has_s()) return graph::Attribute::String(a.s());
  }
  return Status(ErrorCode::kUnsupported,
                "attribute '" + a.name() + "' has type " + AP::AttributeType_Name(a.type()) +
                    ", which is not supported (subgraphs and sparse tensors are not)");
}

Status parseModel(const void* data, size_t size, onnx::ModelProto* model) {
  if (size == 0) return Status(ErrorCode::kCorruptFile, "the model is empty (0 bytes)");
  if (size > static_cast<size_t>(INT32_MAX))
    return Status(ErrorCode::kUnsupported, "models above 2 GiB must keep weights as external data");
  if (!model->ParseFromArray(data, static_cast<int>(size)))
    return Status(
        ErrorCode::kCorruptFile,
        "not a valid ONNX model: protobuf parsing failed (truncated or not an .onnx file)");
  if (!model->has_graph())
    return Status(ErrorCode::kCorruptFile, "not a valid ONNX model: it has no graph");
  if (model->ir_version() <= 0)
    return Status(ErrorCode::kCorruptFile, "not a valid ONNX model: ir_version is missing");
  return Status::Ok();
}

Expected<graph::Graph> importModel(const onnx::ModelProto& model, const ImportOptions& opt) {
  const onnx::GraphProto& gp = model.graph();
  // --- opset
  int64_t opset = -1;
  for (const auto& op : model.opset_import())
    if (op.domain().empty() || op.domain() == "ai.onnx") opset = op.version();
  if (opset < 0) {
    if (model.opset_import_size() == 0 && model.ir_version() <= 2) {
      opset = 1;
    } else if (model.opset_import_size() > 0) {
      std::string domains;
      for (const auto& op : model.opset_import())
        domains += (domains.empty() ? "'" : ", '") + op.domain() + "'";
      return Status(ErrorCode::kUnsupported, "the model uses only the op domains " + domains +
                                                 ", not the default ai.onnx domain");
    } else {
      return Status(ErrorCode::kInvalidModel, "the model imports no opset");
    }
  }
  if (opset < kMinOpset || opset > kMaxOpset)
    return Status(ErrorCode::kUnsupported,
                  "the model uses ai.onnx opset " + std::to_string(opset) + "; supported are " +
                      std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset) +
                      " (re-export it, or convert it with onnx.version_converter)");
  if (gp.node_size() == 0) return Status(ErrorCode::kInvalidModel, "the graph has no nodes");
  if (gp.output_size() == 0) return Status(ErrorCode::kInvalidModel, "the graph has no outputs");

  // --- every unsupported node, before any work
  EI_RETURN_IF_ERROR(checkModelSupport(model, opset));

  graph::Graph g;
  g.name = gp.name().empty() ? "model" : gp.name();
  g.opset = opset;

  // --- initializers
  std::unordered_set<std::string> initNames;
  for (const auto& init : gp.initializer()) {
    if (init.name().empty()) return Status(ErrorCode::kInvalidModel, "an initializer has no name");
    if (!initNames.insert(init.name()).second)
      return Status(ErrorCode::kInvalidModel, "initializer '" + init.name() + "' is defined twice");
    auto t = tensorFromProto(init, opt.externalDataDir, opt.maxTensorBytes);
    if (!t.ok()) return t.status().withContext("initializer '" + init.name() + "'");
    if (!opt.allowNonFiniteWeights) EI_RETURN_IF_ERROR(checkFinite(*t, init.name()));
    graph::Value& v = g.value(init.name());
    v.dtype = t->dtype();
    v.shape = t->shape();
    v.shapeKnown = true;
    v.constant = std::move(t).value();
  }
  if (gp.sparse_initializer_size() > 0)
    return Status(ErrorCode::kUnsupported, "sparse initializers are not supported");

  // --- graph inputs (those that are not initializers)
  std::unordered_set<std::string> defined(initNames.begin(), initNames.end());
  for (const auto& in : gp.input()) {
    if (initNames.count(in.name())) continue;  // IR < 4 lists initializers as inputs too
    if (in.name().empty()) return Status(ErrorCode::kInvalidModel, "a graph input has no name");
    if (!defined.insert(in.name()).second)
      return Status(ErrorCode::kInvalidModel, "graph input '" + in.name() + "' is declared twice");
    EI_RETURN_IF_ERROR(importValueInfo(in, g.value(in.name()), opt.maxTensorBytes));
    g.inputs.push_back(in.name());
  }

  // --- nodes
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    const NodeLocation where{i, np.name(), np.op_type()};
    for (const auto& o : np.output()) {
      if (o.empty()) continue;
      if (!defined.insert(o).second)
        return Status(ErrorCode::kInvalidModel,
                      "output '" + o +
                          "' is already defined by a graph input, an initializer or another node",
                      where);
    }
    if (np.op_type() == "Constant") {
      if (np.output_size() != 1)
        return Status(ErrorCode::kInvalidModel, "Constant must have one output", where);
      auto t = constantNodeValue(np, opt);
      if (!t.ok()) return t.status().at(where);
      if (!opt.allowNonFiniteWeights) {
        Status s = checkFinite(*t, np.output(0));
        if (!s.ok()) return s.at(where);
      }
      graph::Value& v = g.value(np.output(0));
      v.dtype = t->dtype();
      v.shape = t->shape();
      v.shapeKnown = true;
      v.constant = std::move(t).value();
      continue;
    }
    graph::Node n;
    n.name = np.name().empty() ? np.op_type() + "_" + std::to_string(i) : np.name();
    n.opType = np.op_type();
    n.domain = np.domain() == "ai.onnx" ? "" : np.domain();
    n.sourceIndex = i;
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    while (!n.inputs.empty() && n.inputs.back().empty()) n.inputs.pop_back();
    for (const auto& a : np.attribute()) {
      auto attr = attributeFromProto(a);
      if (!attr.ok()) return attr.status().at(where);
      n.attrs.set(a.name(), std::move(attr).value());
    }
    for (const auto& o : n.outputs)
      if (!o.empty()) g.value(o);
    g.nodes.push_back(std::move(n));
  }

  // --- outputs
  for (const auto& out : gp.output()) {
    if (!defined.count(out.name()))
      return Status(ErrorCode::kInvalidModel,
                    "graph output '" + out.name() + "' is not produced by any node");
    graph::Value& v = g.value(out.name());
    if (!v.constant && v.dtype == DataType::kUndefined) {
      graph::Value tmp;
      if (importValueInfo(out, tmp, opt.maxTensorBytes).ok()) {
        v.dtype = tmp.dtype;
        // keep declared output shapes only as a hint; shape inference decides
      }
    }
    g.outputs.push_back(out.name());
  }

  // --- canonical forms, then structure checks
  EI_RETURN_IF_ERROR(g.topologicalSort());
  for (auto& n : g.nodes) EI_RETURN_IF_ERROR(normalizeNode(g, n, opset));
  return g;
}

Expected<graph::Graph> importFromBuffer(const void* data, size_t size, const ImportOptions& opt) {
  onnx::ModelProto model;
  EI_RETURN_IF_ERROR(parseModel(data, size, &model));
  return importModel(model, opt);
}

Expected<graph::Graph> importFromFile(const std::string& path, ImportOptions opt) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(ErrorCode::kNotFound, "cannot open model file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string bytes = ss.str();
  if (opt.externalDataDir.empty()) opt.externalDataDir = dirOf(path);
  auto g = importFromBuffer(bytes.data(), bytes.size(), opt);
  if (!g.ok()) return g.status().withContext("'" + path + "'");
  return g;
}

}  // namespace edgeinfer::onnx_import
