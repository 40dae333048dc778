#include "runtime/profile_engine.h"

#include <algorithm>
#include <cstring>

#include "builder/engine_format.h"
#include "builder/profile_format.h"
#include "runtime/graph_engine.h"
#include "runtime/shape_dispatch.h"

namespace edgeinfer::runtime {
namespace {

/// Does `profile` (an input's shape in a profile, -1: any size) accept `shape`?
bool shapeMatches(const Shape& profile, const Shape& shape) {
  if (profile.rank() != shape.rank()) return false;
  for (size_t d = 0; d < profile.rank(); ++d)
    if (profile[d] >= 0 && profile[d] != shape[d]) return false;
  return true;
}

/// The descriptions of `per[0]` with -1 for the dims that differ in any of the others (the
/// caller checked that names, types and ranks agree).
std::vector<TensorDesc> mergeDescs(const std::vector<const std::vector<TensorDesc>*>& per) {
  std::vector<TensorDesc> out = *per.front();
  for (size_t e = 1; e < per.size(); ++e)
    for (size_t k = 0; k < out.size(); ++k)
      for (size_t d = 0; d < out[k].shape.rank(); ++d)
        if (out[k].shape[d] != (*per[e])[k].shape[d]) out[k].shape[d] = Shape::kUnknown;
  return out;
}

/// Do the descriptions of two sub-engines agree in names, types and ranks? `what` says where
/// they do not.
bool sameDescs(const std::vector<TensorDesc>& a, const std::vector<TensorDesc>& b, const char* kind,
               std::string* what) {
  if (a.size() != b.size()) {
    *what = std::to_string(b.size()) + " " + kind + "s instead of " + std::to_string(a.size());
    return false;
  }
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].name != b[k].name) {
      *what = std::string(kind) + " " + std::to_string(k) + " is '" + b[k].name + "', not '" +
              a[k].name + "'";
      return false;
    }
    if (a[k].dtype != b[k].dtype) {
      *what = std::string(kind) + " '" + a[k].name + "' is " + dataTypeName(b[k].dtype) + ", not " +
              dataTypeName(a[k].dtype);
      return false;
    }
    if (a[k].shape.rank() != b[k].shape.rank()) {
      *what = std::string(kind) + " '" + a[k].name + "' has rank " +
              std::to_string(b[k].shape.rank()) + ", not " + std::to_string(a[k].shape.rank());
      return false;
    }
  }
  return true;
}

}  // namespace

Expected<std::unique_ptr<ProfileEngine>> ProfileEngine::create(
    std::vector<ShapeProfile> profiles, std::vector<std::unique_ptr<Engine>> engines,
    ErrorCode code) {
  const auto error = [&](const std::string& what) {
    return Status(code, "engine with shape profiles: " + what);
  };
  if (profiles.size() != engines.size())
    return error(std::to_string(profiles.size()) + " shape profiles but " +
                 std::to_string(engines.size()) + " sub-engines");
  if (engines.size() < 2)
    return error("it needs at least 2 profiles, it has " + std::to_string(engines.size()));
  for (const auto& e : engines)
    if (!e) return error("a sub-engine is missing");
  const Engine& first = *engines.front();
  for (size_t i = 0; i < engines.size(); ++i) {
    const Engine& e = *engines[i];
    const std::string sub = "sub-engine " + std::to_string(i);
    if (e.info().backend != first.info().backend || e.info().deviceKey != first.info().deviceKey)
      return error(sub + " is for " + backendName(e.info().backend) + " device '" +
                   e.info().deviceKey + "', sub-engine 0 for " + backendName(first.info().backend) +
                   " device '" + first.info().deviceKey + "'");
    std::string what;
    if (!sameDescs(first.inputs(), e.inputs(), "input", &what) ||
        !sameDescs(first.outputs(), e.outputs(), "output", &what))
      return error(sub + " does not match sub-engine 0: " + what);
    if (e.info().modelHash != first.info().modelHash)
      return error(sub + " was built from another model (hash " + e.info().modelHash +
                   ", sub-engine 0: " + first.info().modelHash + ")");
    const ShapeProfile& p = profiles[i];
    if (p.size() != profiles.front().size())
      return error("profile " + std::to_string(i) + " names " + std::to_string(p.size()) +
                   " inputs, profile 0 names " + std::to_string(profiles.front().size()));
    for (const auto& [name, shape] : p) {
      if (!profiles.front().count(name))
        return error("profile " + std::to_string(i) + " names input '" + name +
                     "', which profile 0 does not");
      const TensorDesc* d = nullptr;
      for (const auto& in : e.inputs())
        if (in.name == name) d = &in;
      if (!d)
        return error("profile " + std::to_string(i) + " names '" + name +
                     "', which is not an input of its sub-engine");
      if (d->shape != shape)
        return error("profile " + std::to_string(i) + " gives input '" + name + "' the shape " +
                     shapeText(shape) + ", but its sub-engine was built for " +
                     shapeText(d->shape));
    }
    for (size_t j = 0; j < i; ++j)
      if (profiles[j] == p)
        return error("profiles " + std::to_string(j) + " and " + std::to_string(i) +
                     " are the same (" + formatShapeProfile(p) + ")");
  }

  std::unique_ptr<ProfileEngine> pe(new ProfileEngine());
  std::vector<const std::vector<TensorDesc>*> ins, outs;
  for (const auto& e : engines) {
    ins.push_back(&e->inputs());
    outs.push_back(&e->outputs());
  }
  pe->inputs_ = mergeDescs(ins);
  pe->outputs_ = mergeDescs(outs);
  pe->info_ = first.info();
  pe->info_.weightBytes = 0;
  for (const auto& e : engines) pe->info_.weightBytes += e->info().weightBytes;
  pe->profiles_ = std::move(profiles);
  pe->engines_ = std::move(engines);
  return pe;
}

int64_t ProfileEngine::deviceWeightBytes() const {
  int64_t sum = 0;
  for (const auto& e : engines_) sum += e->deviceWeightBytes();
  return sum;
}

int ProfileEngine::findProfile(const std::map<std::string, Shape>& shapes) const {
  for (size_t i = 0; i < profiles_.size(); ++i) {
    bool match = true;
    for (const auto& [name, shape] : profiles_[i]) {
      const auto it = shapes.find(name);
      match = match && it != shapes.end() && shapeMatches(shape, it->second);
    }
    if (match) return static_cast<int>(i);
  }
  return -1;
}

std::string ProfileEngine::describeProfiles() const {
  std::string s;
  for (size_t i = 0; i < profiles_.size(); ++i)
    s += (i ? "; [" : "[") + std::to_string(i) + "] " + formatShapeProfile(profiles_[i]);
  return s;
}

Status ProfileEngine::acceptsInput(const std::string& name, const Shape& shape) const {
  std::string shapes;
  for (const auto& p : profiles_) {
    const auto it = p.find(name);
    if (it == p.end() || shapeMatches(it->second, shape)) return Status::Ok();
    shapes += (shapes.empty() ? "" : ", ") + shapeText(it->second);
  }
  return Status(ErrorCode::kInvalidArgument,
                "input '" + name + "' has shape " + shapeText(shape) +
                    ", which no shape profile of the engine has (its profiles give " + shapes +
                    "; build with --shapes for each shape to run)");
}

Expected<const Engine*> ProfileEngine::engineFor(const ShapeProfile& shapes, int64_t* /*built*/,
                                                 double* /*builtMs*/) const {
  const int p = findProfile(shapes);
  if (p < 0)
    return Status(ErrorCode::kInvalidArgument,
                  "the bound input shapes (" + formatShapeProfile(shapes) +
                      ") are no shape profile of the engine; its profiles: " + describeProfiles());
  return engines_[static_cast<size_t>(p)].get();
}

Expected<std::unique_ptr<ExecutionContext>> ProfileEngine::createExecutionContext(
    const ContextOptions& options) const {
  return makeShapeDispatchContext(*this, *this, options);
}

Expected<std::vector<uint8_t>> ProfileEngine::serialize() const {
  std::vector<std::vector<uint8_t>> blobs;
  builder::WeightPool pool;
  for (size_t i = 0; i < engines_.size(); ++i) {
    auto b = engines_[i]->serialize();
    if (b.ok()) b = builder::moveWeightsToPool(*b, pool);
    if (!b.ok()) return b.status().withContext("shape profile " + std::to_string(i));
    blobs.push_back(std::move(b).value());
  }
  return builder::encodeProfileContainer(profiles_, blobs, pool.bytes());
}

Expected<std::unique_ptr<Engine>> loadProfileEngine(const void* data, size_t size) {
  EI_ASSIGN_OR_RETURN(builder::DecodedProfileContainer c,
                      builder::decodeProfileContainer(data, size));
  const auto* bytes = static_cast<const uint8_t*>(data);
  EI_ASSIGN_OR_RETURN(builder::SharedWeights weights,
                      builder::SharedWeights::copyOf(bytes + c.weights.first, c.weights.second));
  std::vector<builder::DecodedEngine> parts;
  for (size_t i = 0; i < c.engines.size(); ++i) {
    auto d = builder::decodeEngine(bytes + c.engines[i].first, c.engines[i].second, &weights);
    if (!d.ok())
      return d.status().withContext("engine with shape profiles: sub-engine " + std::to_string(i));
    parts.push_back(std::move(d).value());
  }
  std::map<std::string, Tensor> pool;
  for (auto& part : parts) shareConstants(part.graph, pool);
  std::vector<std::unique_ptr<Engine>> engines;
  for (size_t i = 0; i < parts.size(); ++i) {
    auto e = makeEngine(std::move(parts[i].graph), std::move(parts[i].info), parts[i].plan);
    if (!e.ok())
      return e.status().withContext("engine with shape profiles: sub-engine " + std::to_string(i));
    engines.push_back(std::move(e).value());
  }
  EI_ASSIGN_OR_RETURN(auto pe, ProfileEngine::create(std::move(c.profiles), std::move(engines),
                                                     ErrorCode::kCorruptFile));
  return std::unique_ptr<Engine>(std::move(pe));
}

int64_t shareConstants(graph::Graph& g, std::map<std::string, Tensor>& pool) {
  int64_t shared = 0;
  std::vector<std::string> names;
  for (const auto& [name, v] : g.values())
    if (v.constant) names.push_back(name);
  for (const auto& name : names) {
    Tensor& t = *g.value(name).constant;
    if (!t.onHost() || t.empty()) continue;
    const auto it = pool.find(name);
    if (it == pool.end()) {
      pool.emplace(name, t);
      continue;
    }
    const Tensor& p = it->second;
    if (p.dtype() == t.dtype() && p.shape() == t.shape() && p.raw() != t.raw() &&
        std::memcmp(p.raw(), t.raw(), t.bytes()) == 0) {
      shared += static_cast<int64_t>(t.bytes());
      t = p;
    }
  }
  return shared;
}

}  // namespace edgeinfer::runtime
