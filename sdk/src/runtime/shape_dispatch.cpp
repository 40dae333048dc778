#include "runtime/shape_dispatch.h"

#include <algorithm>
#include <map>

#include "runtime/graph_engine.h"

namespace edgeinfer::runtime {
namespace {

/// The bound inputs, and one sub-context per sub-engine run.
class ShapeDispatchContext final : public ExecutionContext {
 public:
  ShapeDispatchContext(const Engine& engine, const ShapeDispatcher& dispatcher,
                       const ContextOptions& options)
      : engine_(engine), dispatcher_(dispatcher), options_(options) {}

  const Engine& engine() const override { return engine_; }

  Status setInput(const std::string& name, const Tensor& t) override {
    EI_RETURN_IF_ERROR(checkInput(engine_, name, t).status());
    EI_RETURN_IF_ERROR(dispatcher_.acceptsInput(name, t.shape()));
    bound_[name] = Bound{t, ++generation_};
    return Status::Ok();
  }

  /// Passed on to the sub-context the next execute() runs.
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
    ShapeProfile shapes;
    for (const auto& d : engine_.inputs()) {
      const auto it = bound_.find(d.name);
      if (it == bound_.end())
        return Status(ErrorCode::kInvalidArgument, "input '" + d.name + "' is not bound");
      shapes[d.name] = it->second.tensor.shape();
    }
    EI_ASSIGN_OR_RETURN(const Engine* sub,
                        dispatcher_.engineFor(shapes, &specializations_, &specializationMs_));
    Sub& s = subs_[sub];
    if (!s.ctx) {
      auto ctx = sub->createExecutionContext(options_);
      if (!ctx.ok())
        return ctx.status().withContext("the sub-engine of shapes " + formatShapeProfile(shapes));
      s.ctx = std::move(ctx).value();
    }
    // Bind on the sub-context what changed since its last run.
    for (const auto& [name, b] : bound_) {
      uint64_t& seen = s.generations[name];
      if (seen == b.generation) continue;
      EI_RETURN_IF_ERROR(s.ctx->setInput(name, b.tensor));
      seen = b.generation;
    }
    if (waitEvent) EI_RETURN_IF_ERROR(s.ctx->waitForEvent(waitEvent));
    current_ = nullptr;
    EI_RETURN_IF_ERROR(s.ctx->execute());
    current_ = s.ctx.get();
    return Status::Ok();
  }

  Expected<Tensor> getOutput(const std::string& name) const override {
    bool known = false;
    for (const auto& d : engine_.outputs()) known = known || d.name == name;
    if (!known) return Status(ErrorCode::kNotFound, "the engine has no output '" + name + "'");
    if (!current_)
      return Status(ErrorCode::kInvalidArgument,
                    "output '" + name + "' is not computed: call execute() first");
    return current_->getOutput(name);
  }

  /// Memory: the largest of the sub-engines run; launch counts: summed over them; zero-copy
  /// outputs: those any of them writes to the host; weights: the engine's.
  ContextStats stats() const override {
    ContextStats s;
    for (const auto& [sub, state] : subs_) {
      if (!state.ctx) continue;
      const ContextStats c = state.ctx->stats();
      s.activationArenaBytes = std::max(s.activationArenaBytes, c.activationArenaBytes);
      s.activationNaiveBytes = std::max(s.activationNaiveBytes, c.activationNaiveBytes);
      s.workspaceBytes = std::max(s.workspaceBytes, c.workspaceBytes);
      s.cudaGraphs = s.cudaGraphs || c.cudaGraphs;
      s.graphCaptures += c.graphCaptures;
      s.graphUpdates += c.graphUpdates;
      s.graphReplays += c.graphReplays;
      s.cpuFallbackLayers = std::max(s.cpuFallbackLayers, c.cpuFallbackLayers);
      for (const std::string& name : c.zeroCopyOutputNames)  // per output, in any sub-engine
        if (std::find(s.zeroCopyOutputNames.begin(), s.zeroCopyOutputNames.end(), name) ==
            s.zeroCopyOutputNames.end())
          s.zeroCopyOutputNames.push_back(name);
    }
    s.zeroCopyOutputs = static_cast<int64_t>(s.zeroCopyOutputNames.size());
    s.weightBytes = engine_.deviceWeightBytes();
    if (current_) s.lastGpuMs = current_->stats().lastGpuMs;
    s.shapeSpecializations = specializations_;
    s.specializationMs = specializationMs_;
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

  const Engine& engine_;
  const ShapeDispatcher& dispatcher_;
  const ContextOptions options_;
  std::map<std::string, Bound> bound_;
  uint64_t generation_ = 0;
  std::map<const Engine*, Sub> subs_;
  const ExecutionContext* current_ = nullptr;  // the sub-context of the last successful run
  void* waitEvent_ = nullptr;                  // waitForEvent: for the next execute()
  int64_t specializations_ = 0;
  double specializationMs_ = 0.0;
};

}  // namespace

std::unique_ptr<ExecutionContext> makeShapeDispatchContext(const Engine& engine,
                                                           const ShapeDispatcher& dispatcher,
                                                           const ContextOptions& options) {
  return std::unique_ptr<ExecutionContext>(new ShapeDispatchContext(engine, dispatcher, options));
}

}  // namespace edgeinfer::runtime
