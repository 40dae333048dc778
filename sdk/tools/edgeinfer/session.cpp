// Loading a model or engine and binding its inputs: shared by `run` and `bench`.
#include <unistd.h>
#include <cstring>
#include <fstream>
#include <random>

#include "builder/profile_format.h"
#include "builder/range_format.h"
#include "cli.h"
#include "core/npy.h"

namespace edgeinfer::cli {
namespace {

/// A random tensor of `shape` (the dims still dynamic: --dim NAME=VALUE, else 1).
Expected<Tensor> randomInput(const TensorDesc& d, const Shape& shape, const Args& a,
                             std::mt19937& rng) {
  std::vector<int64_t> dims = shape.dims();
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= 0) continue;
    dims[i] = 1;
    for (const auto& kv : a.all("dim")) {
      const auto eq = kv.find('=');
      if (eq != std::string::npos && i < d.dimNames.size() && kv.substr(0, eq) == d.dimNames[i])
        dims[i] = std::atoll(kv.c_str() + eq + 1);
    }
  }
  EI_ASSIGN_OR_RETURN(Tensor t, Tensor::create(d.dtype, Shape(dims)));
  std::uniform_real_distribution<float> uni(0.f, 1.f);
  if (d.dtype == DataType::kFloat32) {
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = uni(rng);
  } else if (d.dtype == DataType::kUInt8) {
    for (int64_t i = 0; i < t.numel(); ++i)
      t.data<uint8_t>()[i] = static_cast<uint8_t>(rng() & 0xff);
  }  // other types stay zero: random indices or flags are rarely meaningful
  return t;
}

}  // namespace

bool isEngineFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  char magic[8] = {};
  f.read(magic, 8);
  return f && (std::memcmp(magic, "EIENGINE", 8) == 0 ||
               builder::isProfileContainer(magic, sizeof magic) ||
               builder::isRangeContainer(magic, sizeof magic));
}

std::string describeTensor(const TensorDesc& d) {
  std::string s = std::string(dataTypeName(d.dtype)) + " [";
  for (size_t i = 0; i < d.shape.rank(); ++i) {
    if (i) s += "x";
    if (d.shape[i] >= 0)
      s += std::to_string(d.shape[i]);
    else
      s += i < d.dimNames.size() && !d.dimNames[i].empty() ? d.dimNames[i] : "?";
  }
  return s + "]";
}

Expected<ShapeProfile> shapesToRun(const Engine& engine, const Args& a) {
  const std::vector<ShapeProfile> profiles = engine.profiles();
  const std::vector<std::string> given = a.all("shapes");
  if (given.empty()) return profiles.front();
  EI_ASSIGN_OR_RETURN(ShapeProfile want, parseShapes(given.front()));
  for (const auto& [name, shape] : want) {
    bool known = false;
    for (const auto& d : engine.inputs()) known = known || d.name == name;
    if (!known)
      return Status(ErrorCode::kNotFound,
                    "--shapes names '" + name + "', which is not an input of the engine");
  }
  if (!engine.shapeRanges().empty()) {  // any shape of the ranges (checked when bound)
    ShapeProfile run = profiles.front();
    for (const auto& [name, shape] : want) run[name] = shape;
    return run;
  }
  for (const auto& p : profiles) {
    bool match = true;
    for (const auto& [name, shape] : want) {
      const auto it = p.find(name);
      if (it == p.end()) continue;  // an input of unknown shape: any
      match = match && it->second.rank() == shape.rank();
      for (size_t d = 0; match && d < shape.rank(); ++d)
        match = it->second[d] < 0 || it->second[d] == shape[d];
    }
    if (!match) continue;
    ShapeProfile run = p;
    for (const auto& [name, shape] : want) run[name] = shape;
    return run;
  }
  std::string list;
  for (size_t i = 0; i < profiles.size(); ++i)
    list += (i ? "; [" : "[") + std::to_string(i) + "] " + formatShapeProfile(profiles[i]);
  return Status(ErrorCode::kInvalidArgument, "--shapes " + given.front() +
                                                 " is no shape profile of the engine; its "
                                                 "profiles: " +
                                                 list);
}

std::string safeName(std::string n) {
  for (char& c : n)
    if (c == '/' || c == '\\' || c == ':' || c == ' ') c = '_';
  return n;
}

Expected<std::unique_ptr<Engine>> loadEngine(const std::string& path, const Args& a) {
  if (isEngineFile(path)) {
    if (a.all("shapes").size() > 1)
      return Status(ErrorCode::kInvalidArgument,
                    "'" + path +
                        "' is an engine: its shape profiles were fixed when it was built; give "
                        "one --shapes to choose the shape to run");
    for (const std::string& text : a.all("shapes")) EI_RETURN_IF_ERROR(parseShapes(text).status());
    return Engine::load(path);
  }
  EI_ASSIGN_OR_RETURN(BuilderConfig cfg, builderConfigFrom(a));
  if (a.has("calibration-data")) {  // a cache for this build only
    char tmpl[] = "/tmp/edgeinfer-calib-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) return Status(ErrorCode::kIoError, "cannot create a temporary calibration cache");
    close(fd);
    const std::string cache = tmpl;
    Status s = calibrateFromData(a, path, cache, cfg);
    auto e = s.ok() ? Builder::buildFromFile(path, cfg) : Expected<std::unique_ptr<Engine>>(s);
    unlink(cache.c_str());
    return e;
  }
  return Builder::buildFromFile(path, cfg);
}

Expected<std::map<std::string, Tensor>> bindInputs(const Engine& engine, ExecutionContext& ctx,
                                                   const Args& a) {
  std::mt19937 rng(static_cast<unsigned>(std::atoi(a.get("seed", "0").c_str())));
  EI_ASSIGN_OR_RETURN(const ShapeProfile shapes, shapesToRun(engine, a));
  std::map<std::string, std::string> files;
  for (const auto& kv : a.all("input")) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos)
      return Status(ErrorCode::kInvalidArgument, "--input needs NAME=FILE.npy");
    files[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [name, file] : files) {
    bool known = false;
    for (const auto& d : engine.inputs()) known |= d.name == name;
    if (!known)
      return Status(ErrorCode::kNotFound,
                    "--input names '" + name + "', which is not an input of the model");
  }
  std::map<std::string, Tensor> bound;
  for (const auto& d : engine.inputs()) {
    Expected<Tensor> t = Status(ErrorCode::kInternal, "unset");
    if (files.count(d.name)) {
      t = readNpy(files[d.name]);
    } else if (a.has("inputs")) {
      t = readNpy(a.get("inputs") + "/" + safeName(d.name) + ".npy");
    } else {
      const auto it = shapes.find(d.name);
      t = randomInput(d, it != shapes.end() ? it->second : d.shape, a, rng);
    }
    if (!t.ok()) return t.status().withContext("input '" + d.name + "'");
    EI_RETURN_IF_ERROR(ctx.setInput(d.name, *t));
    bound.emplace(d.name, *t);
  }
  return bound;
}

}  // namespace edgeinfer::cli
