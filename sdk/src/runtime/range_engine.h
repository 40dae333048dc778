// An engine built for shape ranges (BuilderConfig::shapeRanges: min/opt/max per input, like a
// TensorRT optimisation profile). It holds the engine built for the opt shapes and the model's
// graph before optimisation; given other shapes within the ranges, it specialises: the graph is
// optimised for them (constant folding of shape arithmetic, fusions) and built on the same
// backend, each GPU layer taking the device timing cache's choice for its new shapes if the
// cache has one, else the opt build's tactic where that is a candidate (its cuDNN plans
// finalized on the build threads at once), else timing. A specialisation is built once per
// shape and engine, on the first run that needs it, and shared by the engine's contexts
// (shape_dispatch.h); a context waiting for one does not hold up contexts running other shapes.
// Files: builder/range_format.h.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "builder/range_format.h"
#include "edgeinfer/engine.h"
#include "graph/graph.h"
#include "runtime/shape_dispatch.h"

namespace edgeinfer::runtime {

/// Where a specialisation keeps the timing cache it reads and writes: the building process's
/// choice (an engine built here), or the device's default cache (a loaded engine).
struct SpecializeOptions {
  int deviceId = 0;
  std::string timingCachePath;  ///< "" = $XDG_CACHE_HOME/edgeinfer/<device-key>/timing.cache
  bool useTimingCache = true;
};

class RangeEngine final : public Engine, public ShapeDispatcher {
 public:
  /// `opt` was built from `source` for `spec.optShapes`. Checks the ranges, that `opt`'s inputs
  /// have the opt shapes and its outputs `spec.outputShapes` (where those are static), and
  /// infers the model's shapes (dynamic dims kept); failures are `code` errors.
  static Expected<std::unique_ptr<RangeEngine>> create(builder::RangeSpec spec, graph::Graph source,
                                                       std::unique_ptr<Engine> opt,
                                                       SpecializeOptions options, ErrorCode code);

  /// The opt engine's, with -1 for the dims that vary within the ranges (inputs) or between
  /// the ranges' min, opt and max (outputs).
  const std::vector<TensorDesc>& inputs() const override { return inputs_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  const EngineInfo& info() const override { return opt_->info(); }
  std::vector<ShapeProfile> profiles() const override { return {spec_.optShapes}; }
  ShapeRanges shapeRanges() const override { return spec_.ranges; }
  /// The opt engine's and every specialisation's.
  int64_t deviceWeightBytes() const override;
  using Engine::createExecutionContext;
  Expected<std::unique_ptr<ExecutionContext>> createExecutionContext(
      const ContextOptions& options) const override;
  Expected<std::vector<uint8_t>> serialize() const override;

  // ShapeDispatcher: any shape within the ranges.
  Status acceptsInput(const std::string& name, const Shape& shape) const override;
  Expected<const Engine*> engineFor(const ShapeProfile& shapes, int64_t* built,
                                    double* builtMs) const override;

  /// Shapes specialised so far (not counting the opt shapes).
  size_t specializationCount() const;

 private:
  RangeEngine() = default;
  struct Slot {
    std::mutex building;  // held while the specialisation is built
    bool done = false;
    Status error;  // a failed specialisation, reported again to later runs of the shape
    std::unique_ptr<Engine> engine;
    std::atomic<const Engine*> ready{nullptr};  // engine, once built (read without `building`)
  };

  builder::RangeSpec spec_;
  graph::Graph source_;
  std::unique_ptr<Engine> opt_;
  SpecializeOptions options_;
  std::vector<TensorDesc> inputs_, outputs_;
  mutable std::mutex mu_;  // guards slots_ (the map, not the slots' contents)
  mutable std::map<std::string, std::unique_ptr<Slot>> slots_;  // by formatShapeProfile()
};

/// Loads a range container (builder/range_format.h): the container's checks, the model's and
/// the opt engine's, then RangeEngine::create's, as kCorruptFile.
Expected<std::unique_ptr<Engine>> loadRangeEngine(const void* data, size_t size);

}  // namespace edgeinfer::runtime
