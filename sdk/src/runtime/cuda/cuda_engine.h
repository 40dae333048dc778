// A GPU engine: the optimised graph, its execution plan (cuda_plan.h), one initialised tactic
// per GPU layer (weights already converted and on the device, shared by every context, and
// with every other engine of the process holding the same bytes: kernels/cuda/device_weights.h),
// the constants the tactics read as inputs, the streams of its steps (stream_schedule.h) and the
// activation memory plan. Contexts (cuda_context.cpp) add the streams, an arena, a workspace a
// stream and the CUDA graphs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "builder/tactic.h"
#include "edgeinfer/engine.h"
#include "graph/graph.h"
#include "runtime/cuda/cuda_plan.h"
#include "runtime/cuda/stream_schedule.h"
#include "runtime/cuda_backend.h"
#include "runtime/memory_planner.h"

namespace edgeinfer::runtime::cuda {

class CudaEngine final : public Engine {
 public:
  /// `tactics[i]`: the already initialised tactic of step i, or nullptr to create it from the
  /// plan's id (engine load). Takes ownership of the providers the tactics came from.
  static Expected<std::unique_ptr<CudaEngine>> create(
      graph::Graph g, EngineInfo info, ExecutionPlan plan,
      std::vector<std::unique_ptr<builder::Tactic>> tactics,
      std::vector<std::unique_ptr<builder::TacticProvider>> providers, int deviceId);
  ~CudaEngine() override;

  const std::vector<TensorDesc>& inputs() const override { return inputs_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  const EngineInfo& info() const override { return info_; }
  using Engine::createExecutionContext;
  Expected<std::unique_ptr<ExecutionContext>> createExecutionContext(
      const ContextOptions& options) const override;
  Expected<std::vector<uint8_t>> serialize() const override;
  int64_t deviceWeightBytes() const override { return weightBytes_; }

  // For the contexts.
  const graph::Graph& graph() const { return *graph_; }
  const ExecutionPlan& plan() const { return plan_; }
  builder::Tactic* tactic(size_t step) const { return tactics_[step].get(); }
  const builder::LayerContext& layer(size_t step) const { return layers_[step]; }
  /// Device pointer of a constant plan tensor.
  const void* constantData(int tensor) const {
    return constants_[static_cast<size_t>(tensor)].get();
  }
  /// The tensor whose storage `tensor` uses (itself unless it is a view).
  int storageRoot(int tensor) const { return roots_[static_cast<size_t>(tensor)]; }
  int64_t tensorBytes(int tensor) const { return bytes_[static_cast<size_t>(tensor)]; }
  const Shape& tensorShape(int tensor) const;
  /// Byte offset of a (root, non-constant) tensor in a context's arena.
  int64_t arenaOffset(int tensor) const { return offsets_[static_cast<size_t>(tensor)]; }
  const MemoryPlan& memoryPlan() const { return memory_; }
  /// Which stream each step runs on and what it waits for (EDGEINFER_DISABLE_CONCURRENT_BRANCHES=1
  /// or a CPU-fallback layer: one stream).
  const StreamSchedule& streams() const { return schedule_; }
  size_t workspaceBytes() const { return workspace_; }
  /// Bit k: step `step` is the last to read its input k (builder::LaunchArgs::lastReads).
  uint32_t lastReads(size_t step) const { return lastReads_[step]; }
  int64_t weightBytes() const { return weightBytes_; }
  int deviceId() const { return deviceId_; }
  bool hasCpuSteps() const { return cpuSteps_ > 0; }
  /// The build's runner-up tactics (runtime/cuda_backend.h); not part of the file.
  const std::vector<runtime::TacticAlternative>& alternatives() const { return alternatives_; }
  void setAlternatives(std::vector<runtime::TacticAlternative> a) { alternatives_ = std::move(a); }
  int64_t cpuSteps() const { return cpuSteps_; }

 private:
  CudaEngine() = default;
  Status materialize(std::vector<std::unique_ptr<builder::Tactic>> tactics);

  std::unique_ptr<graph::Graph> graph_;  // stable address: layers_ point into it
  EngineInfo info_;
  ExecutionPlan plan_;
  std::vector<TensorDesc> inputs_, outputs_;
  std::vector<std::unique_ptr<builder::TacticProvider>> providers_;
  std::vector<std::unique_ptr<builder::Tactic>> tactics_;  // per step (nullptr: not a tactic)
  std::vector<builder::LayerContext> layers_;              // per step
  std::vector<std::shared_ptr<void>> constants_;  // per tensor (device, or null; device_weights.h)
  std::vector<runtime::TacticAlternative> alternatives_;
  std::vector<int> roots_;
  std::vector<int64_t> bytes_;
  std::vector<int64_t> offsets_;
  std::vector<uint32_t> lastReads_;  // per step
  MemoryPlan memory_;
  StreamSchedule schedule_;
  size_t workspace_ = 0;
  int64_t weightBytes_ = 0;
  int64_t cpuSteps_ = 0;
  int deviceId_ = 0;
};

/// Fills the LayerContext of node `node` from the graph's (static) value shapes and types.
builder::LayerContext makeLayerContext(const graph::Graph& g, size_t node);

/// Host conversion of a logical tensor into `fmt` (float32 -> float16, NCHW -> NHWC).
Expected<std::vector<uint8_t>> toStorageFormat(const Tensor& t, builder::TensorFormat fmt);

}  // namespace edgeinfer::runtime::cuda
