#include "runtime/graph_engine.h"

#include <fstream>
#include <iterator>

#include "builder/engine_format.h"
#include "builder/profile_format.h"
#include "builder/range_format.h"
#include "builder/split_format.h"
#include "runtime/cuda_backend.h"
#include "runtime/profile_engine.h"
#include "runtime/range_engine.h"
#include "runtime/split_engine.h"

namespace edgeinfer {

const char* backendName(Backend b) {
  switch (b) {
    case Backend::kAuto:
      return "auto";
    case Backend::kCpu:
      return "cpu";
    case Backend::kCuda:
      return "cuda";
  }
  return "?";
}

const char* precisionName(Precision p) {
  switch (p) {
    case Precision::kFp32:
      return "fp32";
    case Precision::kFp16:
      return "fp16";
    case Precision::kInt8:
      return "int8";
  }
  return "?";
}

const char* sdkVersion() {
  return EDGEINFER_VERSION;
}

Status Engine::save(const std::string& path) const {
  EI_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, serialize());
  // Write to a temporary file and rename, so a crash never leaves a half-written engine.
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return Status(ErrorCode::kIoError, "cannot open '" + tmp + "' for writing");
    f.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
    if (!f) return Status(ErrorCode::kIoError, "writing '" + tmp + "' failed (disk full?)");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return Status(ErrorCode::kIoError, "cannot rename '" + tmp + "' to '" + path + "'");
  }
  return Status::Ok();
}

Expected<std::unique_ptr<Engine>> Engine::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(ErrorCode::kNotFound, "cannot open engine file '" + path + "'");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  auto e = deserialize(bytes.data(), bytes.size());
  if (!e.ok()) return e.status().withContext("engine '" + path + "'");
  return e;
}

Expected<std::unique_ptr<Engine>> Engine::deserialize(const void* data, size_t size) {
  if (builder::isProfileContainer(data, size)) return runtime::loadProfileEngine(data, size);
  if (builder::isRangeContainer(data, size)) return runtime::loadRangeEngine(data, size);
  if (builder::isSplitContainer(data, size)) return runtime::loadSplitEngine(data, size);
  EI_ASSIGN_OR_RETURN(auto parts, builder::decodeEngine(data, size));
  return runtime::makeEngine(std::move(parts.graph), std::move(parts.info), parts.plan);
}

std::vector<ShapeProfile> Engine::profiles() const {
  ShapeProfile p;
  for (const auto& d : inputs()) p[d.name] = d.shape;
  return {p};
}

std::string formatShapeRanges(const ShapeRanges& ranges) {
  std::string s;
  for (const auto& [name, r] : ranges)
    s += (s.empty() ? "" : ",") + name + ":[" + runtime::shapeText(r.min) + " .. " +
         runtime::shapeText(r.opt) + " .. " + runtime::shapeText(r.max) + "]";
  return s;
}

std::string formatShapeProfile(const ShapeProfile& profile) {
  std::string s;
  for (const auto& [name, shape] : profile)
    s += (s.empty() ? "" : ",") + name + ":" + runtime::shapeText(shape);
  return s;
}

Status ExecutionContext::waitForEvent(void* /*cudaEvent*/) {
  return Status(ErrorCode::kUnsupported,
                "waitForEvent: this context does not run on a GPU (it has no stream to wait on)");
}

Expected<std::map<std::string, Tensor>> ExecutionContext::run(
    const std::map<std::string, Tensor>& inputs) {
  for (const auto& [name, t] : inputs) EI_RETURN_IF_ERROR(setInput(name, t));
  EI_RETURN_IF_ERROR(execute());
  std::map<std::string, Tensor> out;
  for (const auto& d : engine().outputs()) {
    EI_ASSIGN_OR_RETURN(Tensor t, getOutput(d.name));
    out.emplace(d.name, std::move(t));
  }
  return out;
}

namespace runtime {

#ifndef EDGEINFER_HAVE_CUDA
// A build without the CUDA backend: GPU engines can be neither built nor loaded.
bool cudaBackendUsable(int, std::string* why) {
  if (why) *why = "this EdgeInfer was built without CUDA";
  return false;
}
Expected<std::unique_ptr<Engine>> buildCudaEngine(graph::Graph, EngineInfo, const BuilderConfig&,
                                                  const quant::ExplicitInt8*,
                                                  const std::map<std::string, std::string>*) {
  return Status(ErrorCode::kUnsupported, "this EdgeInfer was built without CUDA");
}
std::map<std::string, std::string> cudaEngineTactics(const Engine&) {
  return {};
}
std::vector<TacticAlternative> cudaEngineAlternatives(const Engine&) {
  return {};
}
std::vector<std::vector<std::string>> cudaEngineInt8Stages(const Engine&) {
  return {};
}
Expected<std::unique_ptr<Engine>> loadCudaEngine(graph::Graph, EngineInfo, const std::string&) {
  return Status(ErrorCode::kUnsupported,
                "this is a GPU engine and this EdgeInfer was built without CUDA");
}
}  // namespace runtime
Expected<Tensor> copyToDevice(const Tensor&, int) {
  return Status(ErrorCode::kUnsupported, "this EdgeInfer was built without CUDA");
}
namespace runtime {
#endif

TensorDesc describeValue(const graph::Graph& g, const std::string& name) {
  TensorDesc d;
  d.name = name;
  if (const graph::Value* v = g.findValue(name)) {
    d.dtype = v->dtype;
    d.shape = v->shape;
    d.dimNames = v->dimNames;
    d.dimNames.resize(d.shape.rank());
  }
  return d;
}

int64_t constantBytes(const graph::Graph& g) {
  int64_t n = 0;
  for (const auto& [name, v] : g.values())
    if (v.constant) n += static_cast<int64_t>(v.constant->bytes());
  return n;
}

std::string shapeText(const Shape& s, const std::vector<std::string>* names) {
  if (s.rank() == 0) return "scalar";
  std::string t;
  for (size_t i = 0; i < s.rank(); ++i) {
    if (i) t += "x";
    if (s[i] >= 0)
      t += std::to_string(s[i]);
    else if (names && i < names->size() && !(*names)[i].empty())
      t += (*names)[i];
    else
      t += "?";
  }
  return t;
}

Expected<std::unique_ptr<Engine>> makeEngine(graph::Graph g, EngineInfo info,
                                             const std::string& plan) {
  if (info.backend == Backend::kCuda) return loadCudaEngine(std::move(g), std::move(info), plan);
  return std::unique_ptr<Engine>(new GraphEngine(std::move(g), std::move(info)));
}

Expected<const TensorDesc*> findInput(const Engine& engine, const std::string& name) {
  for (const auto& d : engine.inputs())
    if (d.name == name) return &d;
  std::string names;
  for (const auto& d : engine.inputs()) names += (names.empty() ? "'" : ", '") + d.name + "'";
  return Status(ErrorCode::kNotFound,
                "the engine has no input '" + name + "' (inputs: " + names + ")");
}

Expected<const TensorDesc*> checkInput(const Engine& engine, const std::string& name,
                                       const Tensor& t) {
  EI_ASSIGN_OR_RETURN(const TensorDesc* desc, findInput(engine, name));
  if (t.empty()) return Status(ErrorCode::kInvalidArgument, "input '" + name + "' is empty");
  if (t.dtype() != desc->dtype)
    return Status(ErrorCode::kInvalidArgument, "input '" + name + "' must be " +
                                                   dataTypeName(desc->dtype) + ", got " +
                                                   dataTypeName(t.dtype()));
  return desc;
}

GraphEngine::GraphEngine(graph::Graph g, EngineInfo info)
    : graph_(std::move(g)), info_(std::move(info)) {
  for (const auto& n : graph_.inputs) inputs_.push_back(describeValue(graph_, n));
  for (const auto& n : graph_.outputs) outputs_.push_back(describeValue(graph_, n));
  info_.nodeCount = static_cast<int64_t>(graph_.nodes.size());
  info_.weightBytes = constantBytes(graph_);
}

Expected<std::unique_ptr<ExecutionContext>> GraphEngine::createExecutionContext(
    const ContextOptions&) const {
  switch (info_.backend) {
    case Backend::kCpu:
      return createCpuContext(*this);
    default:
      return Status(ErrorCode::kUnsupported,
                    std::string("this build cannot run engines for backend '") +
                        backendName(info_.backend) + "'");
  }
}

Expected<std::vector<uint8_t>> GraphEngine::serialize() const {
  return builder::encodeEngine(graph_, info_);
}

}  // namespace runtime

bool gpuUsable(int deviceId, std::string* why) {
  return runtime::cudaBackendUsable(deviceId, why);
}

}  // namespace edgeinfer
