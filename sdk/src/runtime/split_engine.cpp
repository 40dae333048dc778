#include "runtime/split_engine.h"

#include <algorithm>
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

/// `padded` cut to the first `n` rows (axis 0) or columns (axis 1).
Tensor cutToSize(const Tensor& padded, int64_t n, int axis) {
  const int64_t rows = padded.shape()[0], cols = padded.shape()[1];
  Tensor out = Tensor::zeros(DataType::kInt64, axis == 0 ? Shape({n, cols}) : Shape({rows, n}));
  const int64_t* in = padded.data<int64_t>();
  int64_t* o = out.data<int64_t>();
  if (axis == 0) {
    std::copy(in, in + n * cols, o);
  } else {
    for (int64_t r = 0; r < rows; ++r) std::copy(in + r * cols, in + r * cols + n, o + r * n);
  }
  return out;
}

class SplitContext final : public ExecutionContext {
 public:
  SplitContext(const SplitEngine& engine, std::unique_ptr<ExecutionContext> head,
               std::unique_ptr<ExecutionContext> tail)
      : engine_(engine), head_(std::move(head)), tail_(std::move(tail)) {}

  const Engine& engine() const override { return engine_; }

  Status setInput(const std::string& name, const Tensor& tensor) override {
    EI_RETURN_IF_ERROR(head_->setInput(name, tensor));
    if (engine_.tail() && findDesc(engine_.tail()->inputs(), name)) {
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
    for (const auto& b : engine_.bounded()) {
      EI_ASSIGN_OR_RETURN(Tensor padded, head_->getOutput(b.padded));
      EI_ASSIGN_OR_RETURN(Tensor count, head_->getOutput(b.count));
      if (!padded.onHost() || !count.onHost() || count.numel() != 1)
        return Status(ErrorCode::kInternal, "'" + b.name + "': the head gave no host copy");
      const int64_t n = count.data<int64_t>()[0];
      const int64_t bound = padded.shape()[static_cast<size_t>(b.axis)];
      if (n < 0 || n > bound)
        return Status(ErrorCode::kInternal, "'" + b.name + "': the head counted " +
                                                std::to_string(n) + " of at most " +
                                                std::to_string(bound));
      bounded_[b.name] = cutToSize(padded, n, b.axis);
    }
    if (!tail_) return Status::Ok();
    for (const auto& d : engine_.tail()->inputs()) {
      Tensor t;
      if (const auto it = tailInputs_.find(d.name); it != tailInputs_.end()) {
        t = it->second;
      } else if (const auto bt = bounded_.find(d.name); bt != bounded_.end()) {
        t = bt->second;
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
    if (engine_.findBounded(name)) {
      const auto it = bounded_.find(name);
      if (it == bounded_.end())
        return Status(ErrorCode::kInvalidArgument, "output '" + name + "': run the engine first");
      return it->second;
    }
    return engine_.fromTail(name) ? tail_->getOutput(name) : head_->getOutput(name);
  }

  Status waitForEvent(void* cudaEvent) override { return head_->waitForEvent(cudaEvent); }

  ContextStats stats() const override {
    ContextStats s = head_->stats();
    if (!tail_) return s;
    const ContextStats t = tail_->stats();
    s.cpuFallbackLayers += engine_.tail()->info().nodeCount;
    s.activationArenaBytes += t.activationArenaBytes;
    s.activationNaiveBytes += t.activationNaiveBytes;
    return s;
  }

 private:
  const SplitEngine& engine_;
  std::unique_ptr<ExecutionContext> head_, tail_;
  std::map<std::string, Tensor> tailInputs_;  // graph inputs the tail reads
  std::map<std::string, Tensor> bounded_;     // the bounded values of the last run, cut to size
};

}  // namespace

Expected<std::unique_ptr<SplitEngine>> SplitEngine::create(std::unique_ptr<Engine> head,
                                                           std::unique_ptr<Engine> tail,
                                                           std::vector<std::string> outputs,
                                                           std::vector<graph::BoundedValue> bounded,
                                                           ErrorCode code) {
  const auto fail = [&](const std::string& what) {
    return Status(code, "engine with a CPU tail: " + what);
  };
  if (!head) return fail("the head is missing");
  if (!tail && bounded.empty())
    return fail("nothing follows the head (no CPU tail and no bounded output)");
  if (tail && tail->info().modelHash != head->info().modelHash)
    return fail("the tail was built from another model (hash " + tail->info().modelHash +
                ", the head's " + head->info().modelHash + ")");
  std::map<std::string, TensorDesc> boundedDescs;
  for (const auto& b : bounded) {
    const TensorDesc* padded = findDesc(head->outputs(), b.padded);
    const TensorDesc* count = findDesc(head->outputs(), b.count);
    if (b.name.empty() || (b.axis != 0 && b.axis != 1) || boundedDescs.count(b.name) != 0)
      return fail("bounded value '" + b.name + "' is malformed or listed twice");
    if (!padded || !count)
      return fail("the head does not compute '" + (padded ? b.count : b.padded) + "' (bounded '" +
                  b.name + "')");
    if (padded->dtype != DataType::kInt64 || padded->shape.rank() != 2 ||
        !padded->shape.isStatic() || count->dtype != DataType::kInt64 || count->shape != Shape({1}))
      return fail("bounded '" + b.name + "': the head gives " + dataTypeName(padded->dtype) + " " +
                  shapeText(padded->shape) + " and " + dataTypeName(count->dtype) + " " +
                  shapeText(count->shape) + ", not int64 [rows, cols] and int64 [1]");
    TensorDesc d = *padded;
    d.name = b.name;
    d.shape[static_cast<size_t>(b.axis)] = -1;
    boundedDescs[b.name] = d;
  }
  const auto descOf = [&](const std::string& name) -> const TensorDesc* {
    if (const auto it = boundedDescs.find(name); it != boundedDescs.end()) return &it->second;
    if (const TensorDesc* d = tail ? findDesc(tail->outputs(), name) : nullptr) return d;
    return findDesc(head->outputs(), name);
  };
  if (tail)
    for (const auto& d : tail->inputs()) {
      const TensorDesc* from =
          boundedDescs.count(d.name) ? &boundedDescs[d.name] : findDesc(head->outputs(), d.name);
      if (!from) from = findDesc(head->inputs(), d.name);
      if (!from)
        return fail("the tail reads '" + d.name + "', which the head neither computes nor takes");
      if (from->dtype != d.dtype)
        return fail("the tail reads '" + d.name + "' as " + dataTypeName(d.dtype) +
                    ", the head gives " + dataTypeName(from->dtype));
      if (d.shape.isStatic() && from->shape != d.shape)
        return fail("the tail reads '" + d.name + "' as " + shapeText(d.shape) +
                    ", the head gives " + shapeText(from->shape));
    }
  std::unique_ptr<SplitEngine> e(new SplitEngine());
  for (const auto& name : outputs) {
    const TensorDesc* d = descOf(name);
    if (!d) return fail("output '" + name + "' is computed by neither the head nor the tail");
    e->outputs_.push_back(*d);
  }
  if (e->outputs_.empty()) return fail("it has no outputs");
  e->info_ = head->info();
  if (tail) {
    e->info_.nodeCount += tail->info().nodeCount;
    e->info_.weightBytes += tail->info().weightBytes;
  }
  e->head_ = std::move(head);
  e->tail_ = std::move(tail);
  e->bounded_ = std::move(bounded);
  return e;
}

const graph::BoundedValue* SplitEngine::findBounded(const std::string& name) const {
  for (const auto& b : bounded_)
    if (b.name == name) return &b;
  return nullptr;
}

bool SplitEngine::fromTail(const std::string& name) const {
  return tail_ && findDesc(tail_->outputs(), name) != nullptr;
}

Expected<std::unique_ptr<ExecutionContext>> SplitEngine::createExecutionContext(
    const ContextOptions& options) const {
  auto head = head_->createExecutionContext(options);
  if (!head.ok()) return head.status().withContext("the GPU head");
  std::unique_ptr<ExecutionContext> tail;
  if (tail_) {
    auto t = tail_->createExecutionContext(options);
    if (!t.ok()) return t.status().withContext("the CPU tail");
    tail = std::move(t).value();
  }
  return std::unique_ptr<ExecutionContext>(
      new SplitContext(*this, std::move(head).value(), std::move(tail)));
}

Expected<std::vector<uint8_t>> SplitEngine::serialize() const {
  builder::WeightPool pool;
  auto head = head_->serialize();
  if (head.ok()) head = builder::moveWeightsToPool(*head, pool);
  if (!head.ok()) return head.status().withContext("engine with a CPU tail: the GPU head");
  std::vector<uint8_t> tailBytes;
  if (tail_) {
    auto tail = tail_->serialize();
    if (tail.ok()) tail = builder::moveWeightsToPool(*tail, pool);
    if (!tail.ok()) return tail.status().withContext("engine with a CPU tail: the CPU tail");
    tailBytes = std::move(tail).value();
  }
  std::vector<std::string> names;
  for (const auto& d : outputs_) names.push_back(d.name);
  return builder::encodeSplitContainer(names, bounded_, *head, tail_ ? &tailBytes : nullptr,
                                       pool.bytes());
}

Expected<std::unique_ptr<Engine>> loadSplitEngine(const void* data, size_t size) {
  EI_ASSIGN_OR_RETURN(builder::DecodedSplitContainer c, builder::decodeSplitContainer(data, size));
  const auto* bytes = static_cast<const uint8_t*>(data);
  EI_ASSIGN_OR_RETURN(builder::SharedWeights weights,
                      builder::SharedWeights::copyOf(bytes + c.weights.first, c.weights.second));
  std::unique_ptr<Engine> parts[2];
  const char* what[2] = {"the GPU head", "the CPU tail"};
  const std::pair<size_t, size_t> where[2] = {c.head, c.tail};
  for (int i = 0; i < (c.hasTail ? 2 : 1); ++i) {
    auto d = builder::decodeEngine(bytes + where[i].first, where[i].second, &weights);
    if (!d.ok()) return d.status().withContext(std::string("engine with a CPU tail: ") + what[i]);
    auto e = makeEngine(std::move(d->graph), std::move(d->info), d->plan);
    if (!e.ok()) return e.status().withContext(std::string("engine with a CPU tail: ") + what[i]);
    parts[i] = std::move(e).value();
  }
  if (parts[1] && parts[1]->info().backend != Backend::kCpu)
    return Status(ErrorCode::kCorruptFile, "engine with a CPU tail: the tail is not a CPU engine");
  EI_ASSIGN_OR_RETURN(
      auto e, SplitEngine::create(std::move(parts[0]), std::move(parts[1]), std::move(c.outputs),
                                  std::move(c.bounded), ErrorCode::kCorruptFile));
  return std::unique_ptr<Engine>(std::move(e));
}

}  // namespace edgeinfer::runtime
