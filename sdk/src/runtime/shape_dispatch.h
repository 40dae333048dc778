// Contexts of engines that hold one sub-engine per input shape (shape profiles:
// profile_engine.h; shape ranges: range_engine.h): each execute() asks the engine for the
// sub-engine of the bound inputs' shapes and runs a sub-context of it, created on the first run
// of that sub-engine (GPU: its own stream, arena and CUDA graph, so a context replays one CUDA
// graph per shape).
#pragma once

#include <memory>
#include <string>

#include "edgeinfer/engine.h"

namespace edgeinfer::runtime {

/// What a multi-shape engine tells its contexts.
class ShapeDispatcher {
 public:
  virtual ~ShapeDispatcher() = default;
  /// Whether input `name` may have `shape` (the combination of inputs is checked at run); the
  /// error says which shapes it may have.
  virtual Status acceptsInput(const std::string& name, const Shape& shape) const = 0;
  /// The sub-engine to run for `shapes` (every input's); it lives as long as the engine. A
  /// call that had to build it adds one to `*built` and its milliseconds to `*builtMs`.
  virtual Expected<const Engine*> engineFor(const ShapeProfile& shapes, int64_t* built,
                                            double* builtMs) const = 0;
};

/// A context of `engine` (which is `dispatcher`).
std::unique_ptr<ExecutionContext> makeShapeDispatchContext(const Engine& engine,
                                                           const ShapeDispatcher& dispatcher,
                                                           const ContextOptions& options);

}  // namespace edgeinfer::runtime
