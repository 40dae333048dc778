// The CUDA backend as the rest of the SDK sees it: plain C++, no CUDA headers. In a build
// without CUDA these report kUnsupported (graph_engine.cpp).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "graph/graph.h"

namespace edgeinfer::quant {
struct ExplicitInt8;
}

namespace edgeinfer::runtime {

/// Is a GPU usable for building and running engines here? `why` says why not.
bool cudaBackendUsable(int deviceId, std::string* why);

/// Chooses a tactic for every layer of the optimised graph `g` by timing on the device
/// (docs/design/gpu-backend.md) and returns the engine. INT8 takes its scales and layer policy
/// from `explicitInt8` (the model's own Q/DQ scales, quant/qdq_absorb.h) and/or the config's
/// calibration cache; where both give one, the model's wins.
/// `preferred` (layer name -> tactic id): a layer whose preferred tactic is a candidate and
/// initialises takes it without timing (an engine with shape ranges specialising for a shape:
/// runtime/range_engine.h).
/// An INT8 build (precision int8) in which no layer runs an INT8 tactic is recorded as fp16, with
/// int8NowhereWarning(); where config.int8WholeEngineChoice is on (and strictPrecision off) the
/// caller compares the all-INT8 engine next (builder.cpp) and warns if it keeps this one: callers
/// that make no such comparison pass the option off.
Expected<std::unique_ptr<Engine>> buildCudaEngine(
    graph::Graph g, EngineInfo info, const BuilderConfig& config,
    const quant::ExplicitInt8* explicitInt8 = nullptr,
    const std::map<std::string, std::string>* preferred = nullptr);

/// The tactic id of every GPU layer of a GPU engine (layer name -> id); empty for others.
std::map<std::string, std::string> cudaEngineTactics(const Engine& engine);

/// A layer whose chosen tactic had a runner-up of another family (the id up to its first '.':
/// cuda-i8, cublaslt-i8, cudnn, cuda-dw...), or of another kernel of its family (the id up to its
/// second '.': cuda-i8.tmard128x128k128, cuda-i8.tmard128x256k128), when it was built (a layer
/// may have one of each), with both timed costs (the layer's
/// time and the reformats it causes). The timing is of each candidate alone; in the engine a
/// kernel runs after another one (chained by programmatic dependent launch, or not), which can
/// reverse a close call: the builder tries such runner-ups in the whole engine (builder.cpp).
struct TacticAlternative {
  std::string layer;
  std::string signature;  ///< the layer's timing-cache key: equal layers share it
  std::string chosen, alternative;
  double chosenMs = 0.0, alternativeMs = 0.0;
};

/// The runner-ups the build of GPU engine `engine` recorded, in plan order (empty for loaded
/// engines and other backends).
std::vector<TacticAlternative> cudaEngineAlternatives(const Engine& engine);

/// The layers of GPU engine `engine` that run at INT8, by network stage (graph::networkStages of
/// its optimised graph: ResNet's stem, layer1, layer2...), stages without such a layer left
/// out; empty for other backends. The builder tries stages in FP16 in the whole engine
/// (builder.cpp).
std::vector<std::vector<std::string>> cudaEngineInt8Stages(const Engine& engine);

/// Recreates a GPU engine from its file: the graph, the facts and the plan (JSON).
Expected<std::unique_ptr<Engine>> loadCudaEngine(graph::Graph g, EngineInfo info,
                                                 const std::string& plan);

/// The warning of an INT8 build that runs no layer in INT8.
inline std::string int8NowhereWarning() {
  return "precision int8 was asked for, but no layer runs in INT8 (no quantizable layer with an "
         "INT8 kernel, or INT8 was slower everywhere): the engine is recorded as fp16";
}

}  // namespace edgeinfer::runtime
