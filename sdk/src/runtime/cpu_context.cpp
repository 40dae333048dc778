// The CPU reference backend's execution context: runs the graph node by node through the
// reference kernels. Shapes are resolved per run from the bound inputs, so dynamic
// dimensions (batch) work.
//
// Activation memory: the first run with a new set of input shapes allocates each activation
// separately and records its size and lifetime; from then on the activations of those shapes
// live in one arena planned by liveness (runtime/memory_planner.h), so tensors whose
// lifetimes do not overlap share memory and a run allocates nothing but its outputs. Graph
// outputs get their own memory, so tensors returned to the caller stay valid.
#include <cstdlib>
#include <cstring>
#include <map>
#include <unordered_map>

#include "edgeinfer/logger.h"
#include "kernels/ref/ref_kernels.h"
#include "runtime/graph_engine.h"
#include "runtime/memory_planner.h"

namespace edgeinfer::runtime {
namespace {

class CpuContext final : public ExecutionContext {
 public:
  CpuContext(const GraphEngine& engine, NodeObserver observer)
      : engine_(engine), observer_(std::move(observer)) {
    const graph::Graph& g = engine.graph();
    // For each node, the values whose last reader it is (freed right after it runs).
    std::unordered_map<std::string, size_t> lastUse;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (const auto& in : g.nodes[i].inputs)
        if (!in.empty()) lastUse[in] = i;
    lastUse_ = lastUse;
    releaseAfter_.resize(g.nodes.size());
    for (const auto& [name, idx] : lastUse)
      if (!g.isConstant(name) && !g.isGraphOutput(name)) releaseAfter_[idx].push_back(name);
  }

  const Engine& engine() const override { return engine_; }

  Status setInput(const std::string& name, const Tensor& t) override {
    EI_ASSIGN_OR_RETURN(const TensorDesc* desc, findInput(engine_, name));
    if (t.empty() || !t.onHost())
      return Status(ErrorCode::kInvalidArgument,
                    "input '" + name + "' must be a non-empty host tensor");
    if (t.dtype() != desc->dtype)
      return Status(ErrorCode::kInvalidArgument, "input '" + name + "' must be " +
                                                     dataTypeName(desc->dtype) + ", got " +
                                                     dataTypeName(t.dtype()));
    const Shape& want = desc->shape;
    bool match = want.rank() == t.shape().rank() || want.rank() == 0;
    for (size_t i = 0; match && i < want.rank(); ++i)
      if (want[i] >= 0 && want[i] != t.shape()[i]) match = false;
    if (!match && !(want.rank() == 0 && t.shape().rank() == 0))
      return Status(ErrorCode::kInvalidArgument, "input '" + name + "' must have shape " +
                                                     want.toString() + ", got " +
                                                     t.shape().toString());
    inputs_[name] = t;
    return Status::Ok();
  }

  Status execute() override {
    const graph::Graph& g = engine_.graph();
    for (const auto& d : engine_.inputs())
      if (!inputs_.count(d.name))
        return Status(ErrorCode::kInvalidArgument, "input '" + d.name + "' is not bound");
    values_.clear();
    for (const auto& [name, t] : inputs_) values_[name] = t;

    // The arena plan for these input shapes, if one was made.
    std::string key;
    for (const auto& d : engine_.inputs()) key += inputs_[d.name].shape().toString() + ";";
    ArenaPlan* plan = nullptr;
    auto pit = plans_.find(key);
    if (pit != plans_.end() && pit->second.usable) plan = &pit->second;
    std::vector<BufferRequest> recorded;  // filled when there is no plan yet

    std::vector<const Tensor*> in;
    std::vector<Tensor> out;
    for (size_t i = 0; i < g.nodes.size(); ++i) {
      const graph::Node& n = g.nodes[i];
      in.assign(n.inputs.size(), nullptr);
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        if (n.inputs[k].empty()) continue;
        if (const Tensor* c = g.constant(n.inputs[k])) {
          in[k] = c;
          continue;
        }
        auto it = values_.find(n.inputs[k]);
        if (it == values_.end())
          return Status(ErrorCode::kInternal, "value '" + n.inputs[k] + "' was not computed",
                        n.location());
        in[k] = &it->second;
      }
      const auto allocate = [&](size_t k, DataType dt, const Shape& shape) -> Expected<Tensor> {
        const std::string& name = n.outputs[k];
        if (!plan || !plan->plan.offsets.count(name)) return Tensor::create(dt, shape);
        const int64_t bytes = shape.numel() * static_cast<int64_t>(dataTypeSize(dt));
        if (bytes > plan->bytes.at(name)) {
          // A data-dependent size grew past the plan: separate memory now, a new plan next run.
          plan->usable = false;
          return Tensor::create(dt, shape);
        }
        Tensor t = Tensor::fromStorage(plan->arena, dt, shape,
                                       static_cast<size_t>(plan->plan.offsets.at(name)));
        std::memset(t.raw(), 0, static_cast<size_t>(bytes));
        return t;
      };
      EI_RETURN_IF_ERROR(ref::runNode(n, in, out, allocate));
      if (observer_) EI_RETURN_IF_ERROR(observer_(i, n, in, out));
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        if (n.outputs[k].empty()) continue;
        if (!plan && !g.isGraphOutput(n.outputs[k])) {
          auto lu = lastUse_.find(n.outputs[k]);  // absent: never read, live while written
          recorded.push_back(BufferRequest{
              n.outputs[k], static_cast<int64_t>(out[k].bytes()), static_cast<int64_t>(i),
              lu == lastUse_.end() ? static_cast<int64_t>(i) : static_cast<int64_t>(lu->second)});
        }
        values_[n.outputs[k]] = std::move(out[k]);
      }
      // Without an arena, free each activation after its last reader.
      if (!plan)
        for (const auto& name : releaseAfter_[i]) values_.erase(name);
    }
    if (!plan) makePlan(key, recorded);
    return Status::Ok();
  }

  ContextStats stats() const override {
    ContextStats s;
    for (const auto& [key, p] : plans_) {
      s.activationArenaBytes = std::max(s.activationArenaBytes, p.plan.arenaBytes);
      s.activationNaiveBytes = std::max(s.activationNaiveBytes, p.plan.naiveBytes);
    }
    return s;
  }

  Expected<Tensor> getOutput(const std::string& name) const override {
    const graph::Graph& g = engine_.graph();
    if (!g.isGraphOutput(name))
      return Status(ErrorCode::kNotFound, "the engine has no output '" + name + "'");
    if (const Tensor* c = g.constant(name)) return *c;
    auto it = values_.find(name);
    if (it == values_.end())
      return Status(ErrorCode::kInvalidArgument,
                    "output '" + name + "' is not available: call execute() first");
    return it->second;
  }

 private:
  struct ArenaPlan {
    MemoryPlan plan;
    std::unordered_map<std::string, int64_t> bytes;  // planned size of each activation
    std::shared_ptr<Storage> arena;
    bool usable = false;
  };

  void makePlan(const std::string& key, const std::vector<BufferRequest>& requests) {
    auto mp = planMemory(requests, kArenaAlignment);
    if (!mp.ok()) return;  // keep allocating per tensor
    ArenaPlan p;
    p.plan = std::move(mp).value();
    for (const auto& r : requests) p.bytes[r.name] = r.bytes;
    void* mem = std::calloc(static_cast<size_t>(std::max<int64_t>(p.plan.arenaBytes, 1)), 1);
    if (!mem) return;  // keep allocating per tensor
    p.arena = std::make_shared<Storage>(mem, static_cast<size_t>(p.plan.arenaBytes),
                                        MemoryLocation::kHost, [](void* q) { std::free(q); });
    p.usable = true;
    plans_[key] = std::move(p);
  }

  static constexpr int64_t kArenaAlignment = 64;
  const GraphEngine& engine_;
  NodeObserver observer_;
  std::unordered_map<std::string, size_t> lastUse_;
  std::vector<std::vector<std::string>> releaseAfter_;
  std::map<std::string, ArenaPlan> plans_;  // by input shapes
  std::unordered_map<std::string, Tensor> inputs_;
  std::unordered_map<std::string, Tensor> values_;
};

}  // namespace

Expected<std::unique_ptr<ExecutionContext>> createCpuContext(const GraphEngine& engine,
                                                             NodeObserver observer) {
  return std::unique_ptr<ExecutionContext>(new CpuContext(engine, std::move(observer)));
}

}  // namespace edgeinfer::runtime
