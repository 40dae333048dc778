// A GPU engine whose model has data-dependent outputs (NonZero, NonMaxSuppression: their size
// depends on the input values): the head, every layer before them and those not depending on
// them, is an ordinary GPU engine with static shapes (tactics, memory plan, CUDA graphs); the
// tail, the data-dependent layers and everything after them, runs on the CPU reference, which
// sizes its tensors at run time (graph/partition.h splits the model).
//
// A data-dependent layer with a bounded form (NonZero, NonMaxSuppression with known
// parameters) runs in the head instead, writing its output padded to a static bound and its
// size (graph/partition.h); the context cuts it to size on the host. Then the tail starts
// after it, and there may be no tail at all.
//
// A context runs the head, cuts the bounded values, hands the tail the head's outputs it
// reads (host copies, which every GPU context makes of its outputs), the bounded values and
// the graph inputs it reads (bound on the host), runs the tail and returns the model's
// outputs from all three. Files: builder/split_format.h.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "edgeinfer/engine.h"
#include "graph/partition.h"

namespace edgeinfer::runtime {

class SplitEngine final : public Engine {
 public:
  /// `outputs`: the model's outputs in order, each an output of `head`, of `tail` (null for
  /// none) or a bounded value. Checks that each bounded value's padded form and size are int64
  /// outputs of the head of the right ranks, that every input of the tail is an output or an
  /// input of the head or a bounded value, of the same type (and shape, where the tail's is
  /// static), that both engines come from one model, that every output is found and that
  /// something follows the head; a failure is a `code` error naming what differs
  /// (kCorruptFile for a file).
  static Expected<std::unique_ptr<SplitEngine>> create(std::unique_ptr<Engine> head,
                                                       std::unique_ptr<Engine> tail,
                                                       std::vector<std::string> outputs,
                                                       std::vector<graph::BoundedValue> bounded,
                                                       ErrorCode code);

  /// The head's inputs (the model's).
  const std::vector<TensorDesc>& inputs() const override { return head_->inputs(); }
  /// The model's outputs: the tail's have the dims it sizes at run time as -1.
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  /// The head's facts (backend, precision, device); nodes and weight bytes of both.
  const EngineInfo& info() const override { return info_; }
  std::vector<ShapeProfile> profiles() const override { return head_->profiles(); }
  int64_t deviceWeightBytes() const override { return head_->deviceWeightBytes(); }
  using Engine::createExecutionContext;
  Expected<std::unique_ptr<ExecutionContext>> createExecutionContext(
      const ContextOptions& options) const override;
  Expected<std::vector<uint8_t>> serialize() const override;

  const Engine& head() const { return *head_; }
  /// Null when the bounded values are all that follows the head.
  const Engine* tail() const { return tail_.get(); }
  const std::vector<graph::BoundedValue>& bounded() const { return bounded_; }
  /// Is `name` an output of the tail?
  bool fromTail(const std::string& name) const;
  /// The bounded value of that name, or null.
  const graph::BoundedValue* findBounded(const std::string& name) const;

 private:
  SplitEngine() = default;

  std::unique_ptr<Engine> head_, tail_;
  std::vector<graph::BoundedValue> bounded_;
  std::vector<TensorDesc> outputs_;
  EngineInfo info_;
};

/// Loads a split container (builder/split_format.h): the container's checks, each engine's
/// (errors name the head or the tail), then SplitEngine::create's, as kCorruptFile.
Expected<std::unique_ptr<Engine>> loadSplitEngine(const void* data, size_t size);

}  // namespace edgeinfer::runtime
