// The graph the builder compiles: import plus the optimisation pipeline, shared with
// calibration (quant/), which must observe the very layers and tensors an engine will have.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "edgeinfer/builder.h"
#include "graph/graph.h"

namespace edgeinfer::quant {
struct ExplicitInt8;
}

namespace edgeinfer::builder {

/// Imports `onnxBytes` (external data resolved against config.externalDataDir, or `defaultDir`)
/// and optimises the graph as Builder::build does for the CPU backend (dynamic dims take
/// config.dynamicDimDefault when it is set). With `explicitInt8`, as a GPU INT8 build does: the
/// model's Q/DQ pairs are absorbed and their scales and layer policy returned there
/// (quant/qdq_absorb.h; empty for a model without them).
Expected<graph::Graph> importAndOptimize(const std::string& onnxBytes, const BuilderConfig& config,
                                         const std::string& defaultDir,
                                         quant::ExplicitInt8* explicitInt8 = nullptr);

/// Builds the engine of `source` (an imported graph, not yet optimised; its constants are
/// shared, never written) for the input shapes `shapes` (every input, static) on `backend`,
/// as one profile of Builder::build is built. `preferred` (GPU): layer name -> tactic id taken
/// without timing where it is a candidate (runtime/range_engine.h specialising for a shape).
Expected<std::unique_ptr<Engine>> buildForShapes(
    graph::Graph source, const std::string& modelHash, const BuilderConfig& config, Backend backend,
    const ShapeProfile& shapes, const std::map<std::string, std::string>* preferred = nullptr);

/// The bytes of a model file: kNotFound when it cannot be opened, kIoError when reading fails.
Expected<std::string> readModelFile(const std::string& path);
/// The folder of a model file (".", for a bare name): where its external data lives.
std::string modelDir(const std::string& path);

}  // namespace edgeinfer::builder
