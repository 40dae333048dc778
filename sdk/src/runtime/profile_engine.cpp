#include "runtime/profile_engine.h"

#include <algorithm>
#include <cstring>

#include "builder/engine_format.h"
#include "builder/profile_format.h"
#include "runtime/graph_engine.h"

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

/// A context of a ProfileEngine: the bound inputs, and one sub-context per profile, created on
/// the first run of the profile's shapes.
class ProfileContext final : public ExecutionContext {
 public:
  ProfileContext(const ProfileEngine& engine, const ContextOptions& options)
      : engine_(engine), options_(options), subs_(engine.profileCount()) {}

  const Engine& engine() const override { return engine_; }

  Status setInput(const std::string& name, const Tensor& t) override {
    EI_RETURN_IF_ERROR(checkInput(engine_, name, t).status());
    // Only the shapes some profile has for this input (the combination is checked at run).
    bool known = false;
    std::string shapes;
    for (const auto& p : engine_.profileShapes()) {
      const auto it = p.find(name);
      if (it == p.end() || shapeMatches(it->second, t.shape())) {
        known = true;
        break;
      }
      shapes += (shapes.empty() ? "" : ", ") + shapeText(it->second);
    }
    if (!known)
      return Status(ErrorCode::kInvalidArgument,
                    "input '" + name + "' has shape " + shapeText(t.shape()) +
                        ", which no shape profile of the engine has (its profiles give " + shapes +
                        "; build with --shapes for each shape to run)");
    bound_[name] = Bound{t, ++generation_};
    return Status::Ok();
  }

  /// Passed on to the sub-context of the profile the next execute() runs.
  Status waitForEvent(void* cudaEvent) override {
    if (engine_.info().backend != Backend::kCuda) return ExecutionContext::waitForEvent(cudaEvent);
    if (!cudaEvent) return Status(ErrorCode::kInvalidArgument, "waitForEvent: the event is null");
    waitEvent_ = cudaEvent;
    return Status::Ok();
  }

  Status execute() override {
    // The event applies to this run only, whether it gets to its sub-context or fails first.
    void* waitEvent = waitEvent_;
    waitEvent_ = nullptr;
    std::map<std::string, Shape> shapes;
    for (const auto& d : engine_.inputs()) {
      const auto it = bound_.find(d.name);
      if (it == bound_.end())
        return Status(ErrorCode::kInvalidArgument, "input '" + d.name + "' is not bound");
      shapes[d.name] = it->second.tensor.shape();
    }
    const int p = engine_.findProfile(shapes);
    if (p < 0) {
      ShapeProfile bound(shapes.begin(), shapes.end());
      return Status(
          ErrorCode::kInvalidArgument,
          "the bound input shapes (" + formatShapeProfile(bound) +
              ") are no shape profile of the engine; its profiles: " + engine_.describeProfiles());
    }
    Sub& sub = subs_[static_cast<size_t>(p)];
    if (!sub.ctx) {
      auto ctx = engine_.profileEngine(static_cast<size_t>(p)).createExecutionContext(options_);
      if (!ctx.ok()) return ctx.status().withContext("shape profile " + std::to_string(p));
      sub.ctx = std::move(ctx).value();
    }
    // Bind on the sub-context what changed since its last run.
    for (const auto& [name, b] : bound_) {
      uint64_t& seen = sub.generations[name];
      if (seen == b.generation) continue;
      EI_RETURN_IF_ERROR(sub.ctx->setInput(name, b.tensor));
      seen = b.generation;
    }
    if (waitEvent) EI_RETURN_IF_ERROR(sub.ctx->waitForEvent(waitEvent));
    current_ = -1;
    EI_RETURN_IF_ERROR(sub.ctx->execute());
    current_ = p;
    return Status::Ok();
  }

  Expected<Tensor> getOutput(const std::string& name) const override {
    bool known = false;
    for (const auto& d : engine_.outputs()) known = known || d.name == name;
    if (!known) return Status(ErrorCode::kNotFound, "the engine has no output '" + name + "'");
    if (current_ < 0)
      return Status(ErrorCode::kInvalidArgument,
                    "output '" + name + "' is not computed: call execute() first");
    return subs_[static_cast<size_t>(current_)].ctx->getOutput(name);
  }

  /// Memory: the largest of the profiles run; launch counts: summed over them; weights: every
  /// profile's (all are loaded, run or not).
  ContextStats stats() const override {
    ContextStats s;
    for (const Sub& sub : subs_) {
      if (!sub.ctx) continue;
      const ContextStats c = sub.ctx->stats();
      s.activationArenaBytes = std::max(s.activationArenaBytes, c.activationArenaBytes);
      s.activationNaiveBytes = std::max(s.activationNaiveBytes, c.activationNaiveBytes);
      s.workspaceBytes = std::max(s.workspaceBytes, c.workspaceBytes);
      s.cudaGraphs = s.cudaGraphs || c.cudaGraphs;
      s.graphCaptures += c.graphCaptures;
      s.graphUpdates += c.graphUpdates;
      s.graphReplays += c.graphReplays;
      s.cpuFallbackLayers = std::max(s.cpuFallbackLayers, c.cpuFallbackLayers);
    }
    s.weightBytes = engine_.deviceWeightBytes();
    if (current_ >= 0) s.lastGpuMs = subs_[static_cast<size_t>(current_)].ctx->stats().lastGpuMs;
    return s;
  }

 private:
  struct Bound {
    Tensor tensor;
    uint64_t generation = 0;
  };
  struct Sub {
    std::unique_ptr<ExecutionContext> ctx;
    std::map<std::string, uint64_t> generations;  // of the inputs bound on ctx
  };

  const ProfileEngine& engine_;
  const ContextOptions options_;
  std::map<std::string, Bound> bound_;
  uint64_t generation_ = 0;
  std::vector<Sub> subs_;
  int current_ = -1;           // the profile of the last successful execute()
  void* waitEvent_ = nullptr;  // waitForEvent: for the next execute()'s sub-context
};

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

Expected<std::unique_ptr<ExecutionContext>> ProfileEngine::createExecutionContext(
    const ContextOptions& options) const {
  return std::unique_ptr<ExecutionContext>(new ProfileContext(*this, options));
}

Expected<std::vector<uint8_t>> ProfileEngine::serialize() const {
  std::vector<std::vector<uint8_t>> blobs;
  for (size_t i = 0; i < engines_.size(); ++i) {
    auto b = engines_[i]->serialize();
    if (!b.ok()) return b.status().withContext("shape profile " + std::to_string(i));
    blobs.push_back(std::move(b).value());
  }
  return builder::encodeProfileContainer(profiles_, blobs);
}

Expected<std::unique_ptr<Engine>> loadProfileEngine(const void* data, size_t size) {
  EI_ASSIGN_OR_RETURN(builder::DecodedProfileContainer c,
                      builder::decodeProfileContainer(data, size));
  const auto* bytes = static_cast<const uint8_t*>(data);
  std::vector<builder::DecodedEngine> parts;
  for (size_t i = 0; i < c.engines.size(); ++i) {
    auto d = builder::decodeEngine(bytes + c.engines[i].first, c.engines[i].second);
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
