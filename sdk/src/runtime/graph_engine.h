// The Engine implementation: an optimised graph plus the facts recorded about its build.
// Backends provide the ExecutionContext (cpu_context.cpp today; the CUDA backend next).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "edgeinfer/engine.h"
#include "graph/graph.h"

namespace edgeinfer::runtime {

class GraphEngine final : public Engine {
 public:
  GraphEngine(graph::Graph g, EngineInfo info);

  const std::vector<TensorDesc>& inputs() const override { return inputs_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  const EngineInfo& info() const override { return info_; }
  using Engine::createExecutionContext;
  Expected<std::unique_ptr<ExecutionContext>> createExecutionContext(
      const ContextOptions& options) const override;
  Expected<std::vector<uint8_t>> serialize() const override;

  const graph::Graph& graph() const { return graph_; }

 private:
  graph::Graph graph_;
  EngineInfo info_;
  std::vector<TensorDesc> inputs_;
  std::vector<TensorDesc> outputs_;
};

/// The engine-facing description of graph value `name` (type, shape, dim names).
TensorDesc describeValue(const graph::Graph& g, const std::string& name);
/// Bytes of the graph's constants (EngineInfo::weightBytes).
int64_t constantBytes(const graph::Graph& g);
/// "1x3x224x224", "scalar" for rank 0; a dynamic dim as its name in `names` (when given and
/// not empty), else "?".
std::string shapeText(const Shape& s, const std::vector<std::string>* names = nullptr);
/// The engine of the backend `info` names, from the parts of a decoded engine file.
Expected<std::unique_ptr<Engine>> makeEngine(graph::Graph g, EngineInfo info,
                                             const std::string& plan);
/// The input `name` of `engine`, or kNotFound listing the inputs it has.
Expected<const TensorDesc*> findInput(const Engine& engine, const std::string& name);
/// findInput(), then `t` checked against it: not empty, of the input's element type
/// (kInvalidArgument naming the input otherwise). The shape is the caller's to check.
Expected<const TensorDesc*> checkInput(const Engine& engine, const std::string& name,
                                       const Tensor& t);

/// Called by a CPU context after each node it runs, with the node's index, the node, its
/// inputs and its outputs (valid only during the call: activations live in a reused arena).
/// Calibration observes activations through it; a non-OK status stops the run and is returned
/// by execute().
using NodeObserver = std::function<Status(size_t index, const graph::Node& node,
                                          const std::vector<const Tensor*>& inputs,
                                          const std::vector<Tensor>& outputs)>;

/// The CPU reference backend's context; `observer` (optional) sees every node's tensors, at the
/// cost of one branch per node when it is empty.
Expected<std::unique_ptr<ExecutionContext>> createCpuContext(const GraphEngine& engine,
                                                             NodeObserver observer = nullptr);

}  // namespace edgeinfer::runtime
