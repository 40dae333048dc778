#include "runtime/split_engine.h"

#include <map>

#include "builder/engine_format.h"
#include "builder/split_format.h"
#include "runtime/graph_engine.h"

namespace edgeinfer::runtime {
namespace {

const TensorDesc* findDesc(const std::vector<TensorDesc>& descs, const std::string& name) {
  for (const auto& d : descs)
    if (d.name == name) return &d;
  return nullptr;
}

class SplitContext final : public ExecutionContext {
 public:
  SplitContext(const SplitEngine& engine, std::unique_ptr<ExecutionContext> head,
               std::unique_ptr<ExecutionContext> tail)
      : engine_(engine), head_(std::move(head)), tail_(std::move(tail)) {}

  const Engine& engine() const override { return engine_; }

  Status setInput(const std::string& name, const Tensor& tensor) override {
    EI_RETURN_IF_ERROR(head_->setInput(name, tensor));
    if (findDesc(engine_.tail().inputs(), name)) {
      if (!tensor.onHost())
        return Status(ErrorCode::kInvalidArgument,
                      "input '" + name +
                          "' is also read by the engine's CPU tail (the layers after a "
                          "data-dependent output): bind it on the host");
      tailInputs_[name] = tensor;
    }
    return Status::Ok();
  }

  Status execute() override {
    EI_RETURN_IF_ERROR(head_->execute());
    for (const auto& d : engine_.tail().inputs()) {
      Tensor t;
      if (const auto it = tailInputs_.find(d.name); it != tailInputs_.end()) {
        t = it->second;
      } else {
        EI_ASSIGN_OR_RETURN(t, head_->getOutput(d.name));
      }
      EI_RETURN_IF_ERROR(tail_->setInput(d.name, t).withContext("the CPU tail"));
    }
    return tail_->execute().withContext("the CPU tail");
  }

  Expected<Tensor> getOutput(const std::string& name) const override {
    if (!findDesc(engine_.outputs(), name))
      return Status(ErrorCode::kNotFound, "the engine has no output '" + name + "'");
    return engine_.fromTail(name) ? tail_->getOutput(name) : head_->getOutput(name);
  }

  Status waitForEvent(void* cudaEvent) override { return head_->waitForEvent(cudaEvent); }

  ContextStats stats() const override {
    ContextStats s = head_->stats();
    const ContextStats t = tail_->stats();
    s.cpuFallbackLayers += engine_.tail().info().nodeCount;
    s.activationArenaBytes += t.activationArenaBytes;
    s.activationNaiveBytes += t.activationNaiveBytes;
    return s;
  }

 private:
  const SplitEngine& engine_;
  std::unique_ptr<ExecutionContext> head_, tail_;
  std::map<std::string, Tensor> tailInputs_;  // graph inputs the tail reads
};

}  // namespace

Expected<std::unique_ptr<SplitEngine>> SplitEngine::create(std::unique_ptr<Engine> head,
                                                           std::unique_ptr<Engine> tail,
                                                           std::vector<std::string> outputs,
                                                           ErrorCode code) {
  const auto fail = [&](const std::string& what) {
    return Status(code, "engine with a CPU tail: " + what);
  };
  if (!head || !tail) return fail("the head or the tail is missing");
  if (tail->info().modelHash != head->info().modelHash)
    return fail("the tail was built from another model (hash " + tail->info().modelHash +
                ", the head's " + head->info().modelHash + ")");
  for (const auto& d : tail->inputs()) {
    const TensorDesc* from = findDesc(head->outputs(), d.name);
    if (!from) from = findDesc(head->inputs(), d.name);
    if (!from)
      return fail("the tail reads '" + d.name + "', which the head neither computes nor takes");
    if (from->dtype != d.dtype)
      return fail("the tail reads '" + d.name + "' as " + dataTypeName(d.dtype) +
                  ", the head gives " + dataTypeName(from->dtype));
    if (d.shape.isStatic() && from->shape != d.shape)
      return fail("the tail reads '" + d.name + "' as " + shapeText(d.shape) + ", the head gives " +
                  shapeText(from->shape));
  }
  std::unique_ptr<SplitEngine> e(new SplitEngine());
  for (const auto& name : outputs) {
    const TensorDesc* d = findDesc(tail->outputs(), name);
    if (!d) d = findDesc(head->outputs(), name);
    if (!d) return fail("output '" + name + "' is computed by neither the head nor the tail");
    e->outputs_.push_back(*d);
  }
  if (e->outputs_.empty()) return fail("it has no outputs");
  e->info_ = head->info();
  e->info_.nodeCount += tail->info().nodeCount;
  e->info_.weightBytes += tail->info().weightBytes;
  e->head_ = std::move(head);
  e->tail_ = std::move(tail);
  return e;
}

bool SplitEngine::fromTail(const std::string& name) const {
  return findDesc(tail_->outputs(), name) != nullptr;
}

Expected<std::unique_ptr<ExecutionContext>> SplitEngine::createExecutionContext(
    const ContextOptions& options) const {
  auto head = head_->createExecutionContext(options);
  if (!head.ok()) return head.status().withContext("the GPU head");
  auto tail = tail_->createExecutionContext(options);
  if (!tail.ok()) return tail.status().withContext("the CPU tail");
  return std::unique_ptr<ExecutionContext>(
      new SplitContext(*this, std::move(head).value(), std::move(tail).value()));
}

Expected<std::vector<uint8_t>> SplitEngine::serialize() const {
  builder::WeightPool pool;
  auto head = head_->serialize();
  if (head.ok()) head = builder::moveWeightsToPool(*head, pool);
  if (!head.ok()) return head.status().withContext("engine with a CPU tail: the GPU head");
  auto tail = tail_->serialize();
  if (tail.ok()) tail = builder::moveWeightsToPool(*tail, pool);
  if (!tail.ok()) return tail.status().withContext("engine with a CPU tail: the CPU tail");
  std::vector<std::string> names;
  for (const auto& d : outputs_) names.push_back(d.name);
  return builder::encodeSplitContainer(names, *head, *tail, pool.bytes());
}

Expected<std::unique_ptr<Engine>> loadSplitEngine(const void* data, size_t size) {
  EI_ASSIGN_OR_RETURN(builder::DecodedSplitContainer c, builder::decodeSplitContainer(data, size));
  const auto* bytes = static_cast<const uint8_t*>(data);
  EI_ASSIGN_OR_RETURN(builder::SharedWeights weights,
                      builder::SharedWeights::copyOf(bytes + c.weights.first, c.weights.second));
  std::unique_ptr<Engine> parts[2];
  const char* what[2] = {"the GPU head", "the CPU tail"};
  const std::pair<size_t, size_t> where[2] = {c.head, c.tail};
  for (int i = 0; i < 2; ++i) {
    auto d = builder::decodeEngine(bytes + where[i].first, where[i].second, &weights);
    if (!d.ok()) return d.status().withContext(std::string("engine with a CPU tail: ") + what[i]);
    auto e = makeEngine(std::move(d->graph), std::move(d->info), d->plan);
    if (!e.ok()) return e.status().withContext(std::string("engine with a CPU tail: ") + what[i]);
    parts[i] = std::move(e).value();
  }
  if (parts[1]->info().backend != Backend::kCpu)
    return Status(ErrorCode::kCorruptFile, "engine with a CPU tail: the tail is not a CPU engine");
  EI_ASSIGN_OR_RETURN(auto e, SplitEngine::create(std::move(parts[0]), std::move(parts[1]),
                                                  std::move(c.outputs), ErrorCode::kCorruptFile));
  return std::unique_ptr<Engine>(std::move(e));
}

}  // namespace edgeinfer::runtime
