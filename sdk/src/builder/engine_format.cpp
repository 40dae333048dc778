#include "builder/engine_format.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "builder/timing_cache.h"
#include "core/byte_io.h"
#include "core/device.h"
#include "graph/passes/passes.h"
#include "onnx/importer.h"
#include "onnx/onnx_tensor.h"
#include "runtime/graph_engine.h"

namespace edgeinfer::builder {
namespace {

constexpr char kMagic[8] = {'E', 'I', 'E', 'N', 'G', 'I', 'N', 'E'};

using bytes::crc32Of;
using bytes::getU32;
using bytes::putU32;

void attributeToProto(const std::string& name, const graph::Attribute& a, onnx::AttributeProto* p) {
  using K = graph::Attribute::Kind;
  p->set_name(name);
  switch (a.kind) {
    case K::kInt:
      p->set_type(onnx::AttributeProto::INT);
      p->set_i(a.i);
      break;
    case K::kFloat:
      p->set_type(onnx::AttributeProto::FLOAT);
      p->set_f(a.f);
      break;
    case K::kString:
      p->set_type(onnx::AttributeProto::STRING);
      p->set_s(a.s);
      break;
    case K::kTensor:
      p->set_type(onnx::AttributeProto::TENSOR);
      onnx_import::tensorToProto(a.t, "", p->mutable_t());
      break;
    case K::kInts:
      p->set_type(onnx::AttributeProto::INTS);
      for (auto v : a.ints) p->add_ints(v);
      break;
    case K::kFloats:
      p->set_type(onnx::AttributeProto::FLOATS);
      for (auto v : a.floats) p->add_floats(v);
      break;
    case K::kStrings:
      p->set_type(onnx::AttributeProto::STRINGS);
      for (const auto& v : a.strings) p->add_strings(v);
      break;
  }
}

void valueInfoToProto(const graph::Value& v, onnx::ValueInfoProto* p) {
  p->set_name(v.name);
  auto* tt = p->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx_import::dataTypeToOnnx(v.dtype));
  if (!v.shapeKnown) return;
  auto* shape = tt->mutable_shape();
  for (size_t i = 0; i < v.shape.rank(); ++i) {
    auto* d = shape->add_dim();
    if (v.shape[i] >= 0)
      d->set_dim_value(v.shape[i]);
    else
      d->set_dim_param(i < v.dimNames.size() ? v.dimNames[i] : "");
  }
}

bool inWeightPool(const onnx::TensorProto& p) {
  if (p.data_location() != onnx::TensorProto::EXTERNAL) return false;
  for (const auto& kv : p.external_data())
    if (kv.key() == "location") return kv.value() == kWeightPoolLocation;
  return false;
}

/// An initializer held in the container's weights pool: a view of its host copy.
Expected<Tensor> tensorFromPool(const onnx::TensorProto& p, const SharedWeights* weights) {
  const std::string what = "initializer '" + p.name() + "'";
  if (!weights)
    return Status(ErrorCode::kCorruptFile,
                  what +
                      " is held in the weights of a container file (an engine with shape "
                      "profiles or ranges), but this engine was read on its own: load the "
                      "whole file it came from");
  const DataType dtype = onnx_import::dataTypeFromOnnx(p.data_type());
  if (dtype == DataType::kUndefined)
    return Status(ErrorCode::kCorruptFile, what + " has an element type the pool cannot hold");
  std::vector<int64_t> dims(p.dims().begin(), p.dims().end());
  for (int64_t d : dims)
    if (d < 0 || d > (int64_t{1} << 40))
      return Status(ErrorCode::kCorruptFile, what + " has a bad dim " + std::to_string(d));
  const Shape shape(std::move(dims));
  uint64_t offset = UINT64_MAX, length = UINT64_MAX;
  for (const auto& kv : p.external_data()) {
    uint64_t* field = kv.key() == "offset" ? &offset : kv.key() == "length" ? &length : nullptr;
    if (!field) continue;
    const std::string& v = kv.value();
    if (v.empty() || v.size() > 19 || v.find_first_not_of("0123456789") != std::string::npos)
      return Status(ErrorCode::kCorruptFile,
                    what + ": pool " + kv.key() + " '" + v + "' is not a number");
    *field = std::stoull(v);
  }
  const uint64_t bytes = static_cast<uint64_t>(shape.numel()) * dataTypeSize(dtype);
  if (offset == UINT64_MAX || length != bytes)
    return Status(ErrorCode::kCorruptFile, what +
                                               ": its pool reference gives no offset, or a "
                                               "length other than the " +
                                               std::to_string(bytes) + " bytes its shape needs");
  if (offset % kWeightPoolAlignment != 0 || offset > weights->size ||
      bytes > weights->size - offset)
    return Status(ErrorCode::kCorruptFile,
                  what + ": " + std::to_string(bytes) + " bytes at offset " +
                      std::to_string(offset) + " lie outside the container's weights (" +
                      std::to_string(weights->size) + " bytes) or off their alignment");
  return Tensor::fromStorage(weights->storage, dtype, shape, static_cast<size_t>(offset));
}

Status graphFromProto(const onnx::ModelProto& m, const SharedWeights* weights, graph::Graph* g) {
  const auto& gp = m.graph();
  g->name = gp.name();
  for (const auto& op : m.opset_import())
    if (op.domain().empty()) g->opset = op.version();
  for (const auto& init : gp.initializer()) {
    EI_ASSIGN_OR_RETURN(Tensor t, inWeightPool(init)
                                      ? tensorFromPool(init, weights)
                                      : onnx_import::tensorFromProto(init, "", INT64_MAX));
    graph::Value& v = g->value(init.name());
    v.dtype = t.dtype();
    v.shape = t.shape();
    v.shapeKnown = true;
    v.constant = std::move(t);
  }
  for (const auto& in : gp.input()) {
    graph::Value& v = g->value(in.name());
    const auto& tt = in.type().tensor_type();
    v.dtype = onnx_import::dataTypeFromOnnx(tt.elem_type());
    v.shapeKnown = tt.has_shape();
    for (const auto& d : tt.shape().dim()) {
      v.shape.dims().push_back(d.has_dim_value() ? d.dim_value() : Shape::kUnknown);
      v.dimNames.push_back(d.dim_param());
    }
    g->inputs.push_back(in.name());
  }
  for (int i = 0; i < gp.node_size(); ++i) {
    const auto& np = gp.node(i);
    graph::Node n;
    n.name = np.name();
    n.opType = np.op_type();
    n.domain = np.domain();
    n.sourceIndex = i;
    n.inputs.assign(np.input().begin(), np.input().end());
    n.outputs.assign(np.output().begin(), np.output().end());
    for (const auto& a : np.attribute()) {
      EI_ASSIGN_OR_RETURN(graph::Attribute attr, onnx_import::attributeFromProto(a));
      n.attrs.set(a.name(), std::move(attr));
    }
    for (const auto& o : n.outputs)
      if (!o.empty()) g->value(o);
    g->nodes.push_back(std::move(n));
  }
  for (const auto& out : gp.output()) g->outputs.push_back(out.name());
  return Status::Ok();
}

/// The engine file of header `h` and `payload`.
std::vector<uint8_t> frameEngine(const nlohmann::json& h, const std::string& payload) {
  const std::string header = h.dump();
  // Sized once and filled with memcpy (GCC 12 misreads a chain of vector inserts here as an
  // overflow).
  std::vector<uint8_t> out(8);
  std::memcpy(out.data(), kMagic, 8);
  putU32(out, kEngineFormatVersion);
  putU32(out, static_cast<uint32_t>(header.size()));
  out.resize(16 + header.size() + payload.size());
  std::memcpy(out.data() + 16, header.data(), header.size());
  if (!payload.empty())
    std::memcpy(out.data() + 16 + header.size(), payload.data(), payload.size());
  putU32(out, crc32Of(out.data(), out.size()));
  return out;
}

/// An engine file's parts, its framing checked: size, magic, version, checksum, header JSON,
/// payload length.
struct EngineFrame {
  nlohmann::json header;
  const uint8_t* payload = nullptr;
  size_t payloadLen = 0;
};

Expected<EngineFrame> readFrame(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (size < 20)
    return Status(ErrorCode::kCorruptFile,
                  "the engine is truncated (" + std::to_string(size) + " bytes)");
  if (std::memcmp(p, kMagic, 8) != 0)
    return Status(ErrorCode::kCorruptFile, "not an EdgeInfer engine (bad magic bytes)");
  const uint32_t version = getU32(p + 8);
  if (version != kEngineFormatVersion)
    return Status(ErrorCode::kVersionMismatch,
                  "engine format version " + std::to_string(version) + ", but this SDK (" +
                      sdkVersion() + ") reads version " + std::to_string(kEngineFormatVersion) +
                      ": rebuild the engine");
  const uint32_t headerLen = getU32(p + 12);
  if (static_cast<uint64_t>(headerLen) + 20 > size)
    return Status(ErrorCode::kCorruptFile, "the engine is truncated (header runs past the end)");
  const uint32_t stored = getU32(p + size - 4);
  if (crc32Of(p, size - 4) != stored)
    return Status(ErrorCode::kCorruptFile,
                  "checksum mismatch: the engine file is damaged or truncated");
  const std::string headerText(reinterpret_cast<const char*>(p + 16), headerLen);
  EngineFrame f;
  f.header = nlohmann::json::parse(headerText, nullptr, /*allow_exceptions=*/false);
  if (f.header.is_discarded() || !f.header.is_object())
    return Status(ErrorCode::kCorruptFile, "the engine header is not valid JSON");
  f.payload = p + 16 + headerLen;
  f.payloadLen = size - 4 - 16 - headerLen;
  auto pl = f.header.find("payload_bytes");
  if (pl == f.header.end() || !pl->is_number_unsigned() || pl->get<uint64_t>() != f.payloadLen)
    return Status(ErrorCode::kCorruptFile, "the engine payload length does not match its header");
  return f;
}

Status parsePayload(const EngineFrame& f, onnx::ModelProto* m) {
  if (f.payloadLen > static_cast<size_t>(INT32_MAX) ||
      !m->ParseFromArray(f.payload, static_cast<int>(f.payloadLen)))
    return Status(ErrorCode::kCorruptFile, "the engine payload cannot be parsed");
  return Status::Ok();
}

}  // namespace

std::string currentDeviceKey(Backend backend) {
  // CPU reference engines are portable across CPUs of one architecture; GPU engines are
  // keyed by GPU model, SM count and library versions (DeviceKey, timing_cache.h).
  if (backend == Backend::kCuda) {
    auto dev = queryCudaDevice(0);
    return dev.ok() ? DeviceKey::of(*dev).toString() : std::string("cuda-unavailable");
  }
  return cpuDeviceKey();
}

Expected<std::vector<uint8_t>> encodeEngine(const graph::Graph& g, const EngineInfo& info,
                                            const std::string& plan) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.set_producer_name("edgeinfer");
  m.set_producer_version(sdkVersion());
  auto* op = m.add_opset_import();
  op->set_domain("");
  op->set_version(g.opset);
  auto* opEi = m.add_opset_import();
  opEi->set_domain(graph::kEdgeInferDomain);
  opEi->set_version(1);
  auto* gp = m.mutable_graph();
  gp->set_name(g.name);
  // Initializers in name order, so identical graphs give identical bytes.
  std::vector<std::string> constants;
  for (const auto& [name, v] : g.values())
    if (v.constant) constants.push_back(name);
  std::sort(constants.begin(), constants.end());
  for (const auto& name : constants)
    onnx_import::tensorToProto(*g.constant(name), name, gp->add_initializer());
  for (const auto& in : g.inputs) valueInfoToProto(*g.findValue(in), gp->add_input());
  for (const auto& out : g.outputs) valueInfoToProto(*g.findValue(out), gp->add_output());
  for (const auto& n : g.nodes) {
    auto* np = gp->add_node();
    np->set_name(n.name);
    np->set_op_type(n.opType);
    np->set_domain(n.domain);
    for (const auto& in : n.inputs) np->add_input(in);
    for (const auto& o : n.outputs) np->add_output(o);
    for (const auto& [k, a] : n.attrs.all()) attributeToProto(k, a, np->add_attribute());
  }
  std::string payload;
  if (!m.SerializeToString(&payload))
    return Status(ErrorCode::kInternal, "serialising the engine graph failed (over 2 GiB?)");

  nlohmann::json h;
  h["sdk_version"] = info.sdkVersion;
  h["backend"] = backendName(info.backend);
  h["precision"] = precisionName(info.precision);
  h["device_key"] = info.deviceKey;
  h["model_name"] = info.modelName;
  h["model_hash"] = info.modelHash;
  h["payload_bytes"] = payload.size();
  if (!plan.empty()) {
    nlohmann::json pj = nlohmann::json::parse(plan, nullptr, /*allow_exceptions=*/false);
    if (pj.is_discarded() || !pj.is_object())
      return Status(ErrorCode::kInternal, "the engine plan is not a JSON object");
    h["plan"] = std::move(pj);
  }
  return frameEngine(h, payload);
}

Expected<DecodedEngine> decodeEngine(const void* data, size_t size, const SharedWeights* weights) {
  EI_ASSIGN_OR_RETURN(EngineFrame f, readFrame(data, size));
  const nlohmann::json& h = f.header;
  DecodedEngine d;
  auto str = [&](const char* key) {
    auto it = h.find(key);
    return it != h.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  d.info.sdkVersion = str("sdk_version");
  d.info.deviceKey = str("device_key");
  d.info.modelName = str("model_name");
  d.info.modelHash = str("model_hash");
  const std::string backend = str("backend");
  const std::string precision = str("precision");
  if (backend == "cpu")
    d.info.backend = Backend::kCpu;
  else if (backend == "cuda")
    d.info.backend = Backend::kCuda;
  else
    return Status(ErrorCode::kCorruptFile,
                  "the engine header names unknown backend '" + backend + "'");
  if (precision == "fp32")
    d.info.precision = Precision::kFp32;
  else if (precision == "fp16")
    d.info.precision = Precision::kFp16;
  else if (precision == "int8")
    d.info.precision = Precision::kInt8;
  else
    return Status(ErrorCode::kCorruptFile,
                  "the engine header names unknown precision '" + precision + "'");

  // Same major.minor SDK version: the kernels an engine names must mean the same thing.
  auto majorMinor = [](const std::string& v) { return v.substr(0, v.find('.', v.find('.') + 1)); };
  if (majorMinor(d.info.sdkVersion) != majorMinor(sdkVersion()))
    return Status(ErrorCode::kVersionMismatch, "the engine was built by EdgeInfer " +
                                                   d.info.sdkVersion + ", this is " + sdkVersion() +
                                                   ": rebuild the engine");
  const std::string here = currentDeviceKey(d.info.backend);
  if (d.info.deviceKey != here)
    return Status(ErrorCode::kDeviceMismatch, "the engine was built for device '" +
                                                  d.info.deviceKey + "' but this device is '" +
                                                  here + "': rebuild it here");

  onnx::ModelProto m;
  EI_RETURN_IF_ERROR(parsePayload(f, &m));
  EI_RETURN_IF_ERROR(graphFromProto(m, weights, &d.graph).withContext("engine payload"));
  EI_RETURN_IF_ERROR(d.graph.topologicalSort().withContext("engine payload"));
  EI_RETURN_IF_ERROR(graph::inferShapes(d.graph).withContext("engine payload"));
  if (auto pit = h.find("plan"); pit != h.end()) {
    if (!pit->is_object())
      return Status(ErrorCode::kCorruptFile, "the engine plan is not an object");
    d.plan = pit->dump();
  } else if (d.info.backend == Backend::kCuda) {
    return Status(ErrorCode::kCorruptFile, "the GPU engine has no plan in its header");
  }
  return d;
}

Expected<std::vector<uint8_t>> moveWeightsToPool(const std::vector<uint8_t>& engine,
                                                 WeightPool& pool) {
  EI_ASSIGN_OR_RETURN(EngineFrame f, readFrame(engine.data(), engine.size()));
  onnx::ModelProto m;
  EI_RETURN_IF_ERROR(parsePayload(f, &m));
  for (auto& init : *m.mutable_graph()->mutable_initializer()) {
    if (init.data_location() == onnx::TensorProto::EXTERNAL || !init.has_raw_data() ||
        init.raw_data().size() < kMinPooledBytes)
      continue;
    const std::string& raw = init.raw_data();
    const uint64_t offset = pool.add(raw.data(), raw.size());
    const size_t length = raw.size();
    init.clear_raw_data();
    init.set_data_location(onnx::TensorProto::EXTERNAL);
    for (const auto& [key, value] :
         {std::pair<const char*, std::string>{"location", kWeightPoolLocation},
          {"offset", std::to_string(offset)},
          {"length", std::to_string(length)}}) {
      auto* kv = init.add_external_data();
      kv->set_key(key);
      kv->set_value(value);
    }
  }
  std::string payload;
  if (!m.SerializeToString(&payload))
    return Status(ErrorCode::kInternal, "serialising the engine graph failed");
  f.header["payload_bytes"] = payload.size();
  return frameEngine(f.header, payload);
}

}  // namespace edgeinfer::builder
