// The CPU reference backend's execution context: runs the graph node by node through the
// reference kernels. Shapes are resolved per run from the bound inputs, so dynamic
// dimensions (batch) work; each activation is released after its last reader.
#include <unordered_map>

#include "edgeinfer/logger.h"
#include "kernels/ref/ref_kernels.h"
#include "runtime/graph_engine.h"

namespace edgeinfer::runtime {
namespace {

class CpuContext final : public ExecutionContext {
 public:
  explicit CpuContext(const GraphEngine& engine) : engine_(engine) {
    const graph::Graph& g = engine.graph();
    // For each node, the values whose last reader it is (freed right after it runs).
    std::unordered_map<std::string, size_t> lastUse;
    for (size_t i = 0; i < g.nodes.size(); ++i)
      for (const auto& in : g.nodes[i].inputs)
        if (!in.empty()) lastUse[in] = i;
    releaseAfter_.resize(g.nodes.size());
    for (const auto& [name, idx] : lastUse)
      if (!g.isConstant(name) && !g.isGraphOutput(name)) releaseAfter_[idx].push_back(name);
  }

  const Engine& engine() const override { return engine_; }

  Status setInput(const std::string& name, const Tensor& t) override {
    const TensorDesc* desc = nullptr;
    for (const auto& d : engine_.inputs())
      if (d.name == name) desc = &d;
    if (!desc) {
      std::string names;
      for (const auto& d : engine_.inputs()) names += (names.empty() ? "'" : ", '") + d.name + "'";
      return Status(ErrorCode::kNotFound,
                    "the engine has no input '" + name + "' (inputs: " + names + ")");
    }
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
      EI_RETURN_IF_ERROR(ref::runNode(n, in, out));
      for (size_t k = 0; k < n.outputs.size(); ++k)
        if (!n.outputs[k].empty()) values_[n.outputs[k]] = std::move(out[k]);
      for (const auto& name : releaseAfter_[i]) values_.erase(name);
    }
    return Status::Ok();
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
  const GraphEngine& engine_;
  std::vector<std::vector<std::string>> releaseAfter_;
  std::unordered_map<std::string, Tensor> inputs_;
  std::unordered_map<std::string, Tensor> values_;
};

}  // namespace

Expected<std::unique_ptr<ExecutionContext>> createCpuContext(const GraphEngine& engine) {
  return std::unique_ptr<ExecutionContext>(new CpuContext(engine));
}

}  // namespace edgeinfer::runtime
