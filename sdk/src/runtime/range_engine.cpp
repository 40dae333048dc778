#include "runtime/range_engine.h"

#include <chrono>
#include <cstdio>

#include "builder/engine_format.h"
#include "builder/optimize.h"
#include "edgeinfer/logger.h"
#include "graph/passes/passes.h"
#include "runtime/graph_engine.h"
#include "runtime/profile_engine.h"

namespace edgeinfer::runtime {
namespace {}  // namespace

Expected<std::unique_ptr<RangeEngine>> RangeEngine::create(builder::RangeSpec spec,
                                                           graph::Graph source,
                                                           std::unique_ptr<Engine> opt,
                                                           SpecializeOptions options,
                                                           ErrorCode code) {
  const auto error = [&](const std::string& what) {
    return Status(code, "engine with shape ranges: " + what);
  };
  if (!opt) return error("the opt engine is missing");
  if (spec.ranges.empty()) return error("it has no shape ranges");
  EI_RETURN_IF_ERROR(builder::checkShapeRanges(spec.ranges, code));
  for (const auto& [name, r] : spec.ranges)
    if (std::find(source.inputs.begin(), source.inputs.end(), name) == source.inputs.end())
      return error("a range is given for '" + name + "', which is not an input of the model");
  for (const auto& in : source.inputs)
    if (!spec.optShapes.count(in)) return error("the opt shapes lack input '" + in + "'");
  if (opt->inputs().size() != source.inputs.size())
    return error("the opt engine has " + std::to_string(opt->inputs().size()) +
                 " inputs, the model " + std::to_string(source.inputs.size()));
  for (const auto& d : opt->inputs()) {
    const auto it = spec.optShapes.find(d.name);
    if (it == spec.optShapes.end() || it->second != d.shape)
      return error("the opt engine's input '" + d.name + "' is " + shapeText(d.shape) +
                   ", not the opt shape " +
                   (it == spec.optShapes.end() ? std::string("(none)") : shapeText(it->second)));
  }
  // The model's own shapes (dynamic dims stay dynamic): the file then holds what a load sees.
  const Status inferred = graph::inferShapes(source, spec.build.maxTensorBytes);
  if (!inferred.ok()) return error("the model: " + inferred.message());
  std::vector<TensorDesc> outputs = opt->outputs();
  if (outputs.size() != spec.outputShapes.size())
    return error("it lists " + std::to_string(spec.outputShapes.size()) +
                 " output shapes, the opt engine has " + std::to_string(outputs.size()) +
                 " outputs");
  for (auto& d : outputs) {
    const auto it = spec.outputShapes.find(d.name);
    bool fits = it != spec.outputShapes.end() && it->second.rank() == d.shape.rank();
    for (size_t k = 0; fits && k < d.shape.rank(); ++k)
      fits = it->second[k] < 0 || it->second[k] == d.shape[k];
    if (!fits)
      return error(
          "the output shapes give '" + d.name + "' " +
          (it == spec.outputShapes.end() ? std::string("no shape") : shapeText(it->second)) +
          ", the opt engine " + shapeText(d.shape));
    d.shape = it->second;
  }

  std::unique_ptr<RangeEngine> e(new RangeEngine());
  e->inputs_ = opt->inputs();
  for (auto& d : e->inputs_) {
    const auto it = spec.ranges.find(d.name);
    if (it == spec.ranges.end()) continue;
    for (size_t k = 0; k < d.shape.rank(); ++k)
      if (it->second.min[k] != it->second.max[k]) d.shape[k] = Shape::kUnknown;
  }
  e->outputs_ = std::move(outputs);
  e->spec_ = std::move(spec);
  e->source_ = std::move(source);
  e->opt_ = std::move(opt);
  e->options_ = std::move(options);
  return e;
}

Status RangeEngine::acceptsInput(const std::string& name, const Shape& shape) const {
  const auto it = spec_.ranges.find(name);
  if (it == spec_.ranges.end()) {
    const auto opt = spec_.optShapes.find(name);
    if (opt == spec_.optShapes.end() || opt->second == shape) return Status::Ok();
    return Status(ErrorCode::kInvalidArgument,
                  "input '" + name + "' has shape " + shapeText(shape) +
                      "; the engine has no shape range for it and was built for " +
                      shapeText(opt->second));
  }
  const ShapeRange& r = it->second;
  bool inside = shape.rank() == r.min.rank();
  for (size_t d = 0; inside && d < shape.rank(); ++d)
    inside = shape[d] >= r.min[d] && shape[d] <= r.max[d];
  if (inside) return Status::Ok();
  return Status(ErrorCode::kInvalidArgument, "input '" + name + "' has shape " + shapeText(shape) +
                                                 ", outside the engine's shape range " +
                                                 shapeText(r.min) + " .. " + shapeText(r.max) +
                                                 " (rebuild with wider --min-shapes/--max-shapes)");
}

Expected<const Engine*> RangeEngine::engineFor(const ShapeProfile& shapes, int64_t* built,
                                               double* builtMs) const {
  for (const auto& [name, shape] : shapes) EI_RETURN_IF_ERROR(acceptsInput(name, shape));
  if (shapes == spec_.optShapes) return opt_.get();
  Slot* slot = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::unique_ptr<Slot>& s = slots_[formatShapeProfile(shapes)];
    if (!s) s = std::make_unique<Slot>();
    slot = s.get();
  }
  std::lock_guard<std::mutex> building(slot->building);
  if (!slot->done) {
    const auto t0 = std::chrono::steady_clock::now();
    BuilderConfig cfg = spec_.build;
    cfg.backend = info().backend;
    cfg.deviceId = options_.deviceId;
    cfg.timingCachePath = options_.timingCachePath;
    cfg.useTimingCache = options_.useTimingCache;
    auto e = builder::buildForShapes(source_, info().modelHash, cfg, info().backend, shapes,
                                     &spec_.tactics);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    // A failure the same build would repeat (the model cannot take the shape, a layer has
    // no kernel for it) is kept and reported again; any other (out of memory while other
    // contexts run, a driver error) is tried again on the next run of the shape.
    const ErrorCode code = e.ok() ? ErrorCode::kOk : e.status().code();
    slot->done = e.ok() || code == ErrorCode::kInvalidArgument ||
                 code == ErrorCode::kInvalidModel || code == ErrorCode::kUnsupported;
    if (e.ok()) {
      slot->engine = std::move(e).value();
      slot->ready = slot->engine.get();
      if (built) *built += 1;
      if (builtMs) *builtMs += ms;
      char buf[64];
      std::snprintf(buf, sizeof buf, "%.1f ms", ms);
      log(Severity::kInfo,
          "engine with shape ranges: specialised for " + formatShapeProfile(shapes) + " in " + buf);
    } else {
      slot->error = e.status().withContext("engine with shape ranges: specialising for " +
                                           formatShapeProfile(shapes));
      if (!slot->done) return slot->error;  // tried again next time
    }
  }
  if (!slot->engine) return slot->error;
  return slot->engine.get();
}

size_t RangeEngine::specializationCount() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const auto& [shapes, slot] : slots_) n += slot->ready != nullptr;
  return n;
}

int64_t RangeEngine::deviceWeightBytes() const {
  int64_t sum = opt_->deviceWeightBytes();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [shapes, slot] : slots_)
    if (const Engine* e = slot->ready) sum += e->deviceWeightBytes();
  return sum;
}

Expected<std::unique_ptr<ExecutionContext>> RangeEngine::createExecutionContext(
    const ContextOptions& options) const {
  return makeShapeDispatchContext(*this, *this, options);
}

Expected<std::vector<uint8_t>> RangeEngine::serialize() const {
  EngineInfo sourceInfo;
  sourceInfo.sdkVersion = sdkVersion();
  sourceInfo.backend = Backend::kCpu;
  sourceInfo.precision = Precision::kFp32;
  sourceInfo.deviceKey = builder::currentDeviceKey(Backend::kCpu);
  sourceInfo.modelName = source_.name;
  sourceInfo.modelHash = info().modelHash;
  builder::WeightPool pool;
  auto source = builder::encodeEngine(source_, sourceInfo);
  if (source.ok()) source = builder::moveWeightsToPool(*source, pool);
  if (!source.ok()) return source.status().withContext("engine with shape ranges: the model");
  auto opt = opt_->serialize();
  if (opt.ok()) opt = builder::moveWeightsToPool(*opt, pool);
  if (!opt.ok()) return opt.status().withContext("engine with shape ranges: the opt engine");
  return builder::encodeRangeContainer(spec_, *source, *opt, pool.bytes());
}

Expected<std::unique_ptr<Engine>> loadRangeEngine(const void* data, size_t size) {
  EI_ASSIGN_OR_RETURN(builder::DecodedRangeContainer c, builder::decodeRangeContainer(data, size));
  const auto* bytes = static_cast<const uint8_t*>(data);
  EI_ASSIGN_OR_RETURN(builder::SharedWeights weights,
                      builder::SharedWeights::copyOf(bytes + c.weights.first, c.weights.second));
  auto source = builder::decodeEngine(bytes + c.source.first, c.source.second, &weights);
  if (!source.ok()) return source.status().withContext("engine with shape ranges: the model");
  auto opt = builder::decodeEngine(bytes + c.opt.first, c.opt.second, &weights);
  if (!opt.ok()) return opt.status().withContext("engine with shape ranges: the opt engine");
  if (source->info.modelHash != opt->info.modelHash)
    return Status(ErrorCode::kCorruptFile, "engine with shape ranges: the model (hash " +
                                               source->info.modelHash +
                                               ") is not the one the opt engine was built from (" +
                                               opt->info.modelHash + ")");
  // The model's constants and the opt engine's equal ones share host memory.
  std::map<std::string, Tensor> pool;
  shareConstants(source->graph, pool);
  shareConstants(opt->graph, pool);
  auto engine = makeEngine(std::move(opt->graph), std::move(opt->info), opt->plan);
  if (!engine.ok()) return engine.status().withContext("engine with shape ranges: the opt engine");
  EI_ASSIGN_OR_RETURN(auto re, RangeEngine::create(std::move(c.spec), std::move(source->graph),
                                                   std::move(engine).value(), SpecializeOptions{},
                                                   ErrorCode::kCorruptFile));
  return std::unique_ptr<Engine>(std::move(re));
}

}  // namespace edgeinfer::runtime
