#include "edgeinfer/builder.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "builder/engine_format.h"
#include "builder/optimize.h"
#include "builder/range_format.h"
#include "builder/stage_record.h"
#include "builder/stage_search.h"
#include "builder/timing_cache.h"
#include "edgeinfer/calibration.h"
#include "edgeinfer/logger.h"
#include "graph/partition.h"
#include "graph/passes/passes.h"
#include "kernels/ref/ref_kernels.h"
#include "onnx/importer.h"
#include "quant/qdq.h"
#include "quant/qdq_absorb.h"
#include "quant/smoothing.h"
#include "runtime/cuda_backend.h"
#include "runtime/graph_engine.h"
#include "runtime/profile_engine.h"
#include "runtime/range_engine.h"
#include "runtime/split_engine.h"

namespace edgeinfer {
namespace {

bool envDisabled(const char* name) {
  const char* v = std::getenv(name);
  return v && *v && std::strcmp(v, "0") != 0;
}

/// The options after applying the environment overrides.
PassOptions effectivePasses(const PassOptions& in) {
  PassOptions p = in;
  if (envDisabled("EDGEINFER_DISABLE_CONSTANT_FOLDING")) p.constantFolding = false;
  if (envDisabled("EDGEINFER_DISABLE_ELIMINATE_IDENTITY")) p.eliminateIdentity = false;
  if (envDisabled("EDGEINFER_DISABLE_DEAD_NODE_ELIMINATION")) p.eliminateDeadNodes = false;
  if (envDisabled("EDGEINFER_DISABLE_FOLD_BATCHNORM")) p.foldBatchNorm = false;
  if (envDisabled("EDGEINFER_DISABLE_FUSE_CONV")) p.fuseConvActivation = false;
  if (envDisabled("EDGEINFER_DISABLE_FUSE_GEMM")) p.fuseGemmActivation = false;
  if (envDisabled("EDGEINFER_DISABLE_FUSE_ELEMENTWISE")) p.fuseElementwise = false;
  if (envDisabled("EDGEINFER_DISABLE_EXPLICIT_QUANTIZATION")) p.explicitQuantization = false;
  if (envDisabled("EDGEINFER_DISABLE_LOWER_QOPERATORS")) p.lowerQOperators = false;
  if (envDisabled("EDGEINFER_DISABLE_FUSION")) {
    p.fuseConvActivation = false;
    p.fuseGemmActivation = false;
    p.fuseElementwise = false;
  }
  return p;
}

Status runPass(const char* name, bool enabled, graph::Graph& g,
               const std::function<Expected<int>(graph::Graph&)>& pass) {
  if (!enabled) {
    log(Severity::kInfo, std::string("pass ") + name + ": disabled");
    return Status::Ok();
  }
  auto r = pass(g);
  if (!r.ok()) return r.status().withContext(std::string("pass ") + name);
  log(Severity::kVerbose, std::string("pass ") + name + ": " + std::to_string(*r) + " rewrites");
  return Status::Ok();
}

/// The optimisation pipeline. Shape inference runs first (so every error in the model is
/// found before anything is rewritten) and again after the rewrites. With `explicitInt8` (GPU
/// INT8 builds) the Q/DQ pairs of an explicitly quantized model are absorbed first, before
/// constant folding and fusion rewrite the graph (quant/qdq_absorb.h), and their scales and
/// layer policy are stated in the optimised graph's names at the end.
Status optimize(graph::Graph& g, const BuilderConfig& cfg,
                quant::ExplicitInt8* explicitInt8 = nullptr, bool gpu = false) {
  const PassOptions p = effectivePasses(cfg.passes);
  const graph::ConstantEvaluator eval =
      [](const graph::Node& n, const std::vector<const Tensor*>& in, std::vector<Tensor>& out) {
        return ref::runNode(n, in, out);
      };
  EI_RETURN_IF_ERROR(graph::inferShapes(g, cfg.maxTensorBytes));
  EI_RETURN_IF_ERROR(
      runPass("eliminate-identity", p.eliminateIdentity, g, graph::eliminateIdentity));
  if (gpu) {  // QOperator layers as Q/DQ around float ones, which the GPU runs
    EI_RETURN_IF_ERROR(runPass("lower-qoperators", p.lowerQOperators, g, graph::lowerQOperators));
    EI_RETURN_IF_ERROR(graph::inferShapes(g, cfg.maxTensorBytes));
  }
  quant::QdqAbsorbResult qdq;
  if (explicitInt8)
    EI_RETURN_IF_ERROR(runPass("explicit-quantization", p.explicitQuantization, g,
                               [&](graph::Graph& gg) -> Expected<int> {
                                 EI_ASSIGN_OR_RETURN(qdq, quant::absorbQdq(gg));
                                 return qdq.pairsAbsorbed + qdq.weightsFolded;
                               }));
  EI_RETURN_IF_ERROR(runPass("constant-folding", p.constantFolding, g,
                             [&](graph::Graph& gg) { return graph::foldConstants(gg, eval); }));
  EI_RETURN_IF_ERROR(
      runPass("dead-node-elimination", p.eliminateDeadNodes, g, graph::eliminateDeadNodes));
  EI_RETURN_IF_ERROR(graph::inferShapes(g, cfg.maxTensorBytes));
  EI_RETURN_IF_ERROR(runPass("fold-batchnorm", p.foldBatchNorm, g, graph::foldBatchNorm));
  EI_RETURN_IF_ERROR(
      runPass("fuse-conv-activation", p.fuseConvActivation, g, graph::fuseConvActivation));
  EI_RETURN_IF_ERROR(
      runPass("fuse-gemm-activation", p.fuseGemmActivation, g, graph::fuseGemmActivation));
  EI_RETURN_IF_ERROR(runPass("fuse-elementwise", p.fuseElementwise, g, graph::fuseElementwise));
  EI_RETURN_IF_ERROR(
      runPass("dead-node-elimination", p.eliminateDeadNodes, g, graph::eliminateDeadNodes));
  EI_RETURN_IF_ERROR(g.topologicalSort());
  EI_RETURN_IF_ERROR(graph::inferShapes(g, cfg.maxTensorBytes));
  if (explicitInt8) {
    *explicitInt8 = quant::explicitInt8For(g, qdq.scales);
    for (const auto& why : qdq.leftInPlace)
      log(Severity::kInfo, "explicit quantization: " + why + "; left in place (runs as ops)");
    if (!qdq.scales.empty())
      log(Severity::kInfo,
          "explicit quantization: " + std::to_string(qdq.pairsAbsorbed) + " Q/DQ pairs absorbed, " +
              std::to_string(qdq.weightsFolded) + " weight DequantizeLinear folded, " +
              std::to_string(explicitInt8->scales.size()) + " tensor scales (" +
              std::to_string(explicitInt8->droppedScales.size()) + " fused away), " +
              std::to_string(explicitInt8->int8Layers().size()) + " INT8 layers");
  }
  return Status::Ok();
}

/// Every graph input and output must have a known element type after optimisation; the
/// first-dimension dynamic default is applied here.
void applyDynamicDefault(graph::Graph& g, int64_t value) {
  if (value < 0) return;
  for (const auto& in : g.inputs) {
    graph::Value& v = g.value(in);
    for (auto& d : v.shape.dims())
      if (d < 0) d = value;
  }
}

Expected<Backend> resolveBackend(const BuilderConfig& cfg) {
  std::string why;
  switch (cfg.backend) {
    case Backend::kCpu:
      return Backend::kCpu;
    case Backend::kAuto:
      if (runtime::cudaBackendUsable(cfg.deviceId, &why)) return Backend::kCuda;
      log(Severity::kInfo, "no usable GPU (" + why + "): building for the CPU");
      return Backend::kCpu;
    case Backend::kCuda:
      if (!runtime::cudaBackendUsable(cfg.deviceId, &why))
        return Status(ErrorCode::kUnsupported,
                      "backend cuda was requested but no GPU is usable: " + why);
      return Backend::kCuda;
  }
  return Backend::kCpu;
}

/// GPU engines are planned for static shapes: dynamic input dims take the configured default,
/// or 1 with a warning.
void applyGpuStaticShapes(graph::Graph& g, const BuilderConfig& cfg) {
  if (cfg.dynamicDimDefault >= 0) return;
  std::string dyn;
  for (const auto& in : g.inputs) {
    graph::Value& v = g.value(in);
    for (auto& d : v.shape.dims())
      if (d < 0) {
        d = 1;
        dyn += (dyn.empty() ? "'" : ", '") + in + "'";
      }
  }
  if (!dyn.empty())
    log(Severity::kWarning, "GPU engines are built for static shapes: the dynamic dims of " + dyn +
                                " are set to 1 (choose with --shapes or --dynamic-dim N)");
}

/// The shape profiles to build (BuilderConfig::inputShapes / shapeProfiles), each naming every
/// input whose shape is known, checked against the model's inputs: none when neither option is
/// set (the model's shapes, as always). The dims no shape sets take dynamicDimDefault, and on
/// the GPU 1 (with a warning), so that equal profiles are found before anything is built.
Expected<std::vector<ShapeProfile>> resolveProfiles(const graph::Graph& g, const BuilderConfig& cfg,
                                                    Backend backend) {
  std::vector<std::map<std::string, Shape>> given;
  if (cfg.shapeProfiles.empty()) {
    if (!cfg.inputShapes.empty()) given.push_back(cfg.inputShapes);
  } else {
    for (const auto& p : cfg.shapeProfiles) {
      std::map<std::string, Shape> merged = cfg.inputShapes;
      for (const auto& [name, shape] : p) merged[name] = shape;
      given.push_back(std::move(merged));
    }
  }
  std::string inputNames;
  for (const auto& in : g.inputs) inputNames += (inputNames.empty() ? "'" : ", '") + in + "'";
  std::vector<ShapeProfile> out;
  std::set<std::string> filledWithOne;
  for (size_t i = 0; i < given.size(); ++i) {
    const std::string where =
        cfg.shapeProfiles.empty() ? std::string() : "shape profile " + std::to_string(i) + ": ";
    const auto error = [&](const std::string& what) {
      return Status(ErrorCode::kInvalidArgument, where + what);
    };
    for (const auto& [name, shape] : given[i])
      if (std::find(g.inputs.begin(), g.inputs.end(), name) == g.inputs.end())
        return error("a shape is given for '" + name + "', which is not an input of the model (" +
                     (inputNames.empty() ? std::string("it has none") : "inputs: " + inputNames) +
                     ")");
    ShapeProfile full;
    for (const auto& in : g.inputs) {
      const graph::Value& v = *g.findValue(in);
      const auto it = given[i].find(in);
      if (it == given[i].end() && !v.shapeKnown) continue;  // any shape, as in the model
      Shape s = v.shape;
      if (it != given[i].end()) {
        const Shape& want = it->second;
        const std::string model = runtime::shapeText(v.shape, &v.dimNames);
        if (v.shapeKnown && want.rank() != v.shape.rank())
          return error("input '" + in + "': the shape " + runtime::shapeText(want) + " has rank " +
                       std::to_string(want.rank()) + ", but the model's input has rank " +
                       std::to_string(v.shape.rank()) + " (" + model + ")");
        for (size_t d = 0; d < want.rank(); ++d) {
          const std::string modelDim =
              !v.shapeKnown ? std::string("no shape")
              : v.shape[d] >= 0
                  ? std::to_string(v.shape[d])
                  : (d < v.dimNames.size() && !v.dimNames[d].empty() ? "'" + v.dimNames[d] + "'"
                                                                     : std::string("'?'"));
          if (want[d] < 1)
            return error("input '" + in + "' dim " + std::to_string(d) + ": " +
                         std::to_string(want[d]) +
                         " is not a size (sizes are >= 1; the model has " + modelDim + ")");
          if (v.shapeKnown && v.shape[d] >= 0 && v.shape[d] != want[d])
            return error("input '" + in + "' dim " + std::to_string(d) +
                         ": the model fixes it to " + std::to_string(v.shape[d]) +
                         ", the shape gives " + std::to_string(want[d]) + " (" + model + " vs " +
                         runtime::shapeText(want) + ")");
        }
        s = want;
      }
      for (auto& d : s.dims()) {
        if (d >= 0) continue;
        if (cfg.dynamicDimDefault >= 0) {
          d = cfg.dynamicDimDefault;
        } else if (backend == Backend::kCuda) {
          d = 1;
          filledWithOne.insert(in);
        }
      }
      full[in] = s;
    }
    for (size_t j = 0; j < out.size(); ++j)
      if (out[j] == full)
        return Status(ErrorCode::kInvalidArgument, "shape profiles " + std::to_string(j) + " and " +
                                                       std::to_string(i) + " are the same (" +
                                                       formatShapeProfile(full) +
                                                       "): give each profile its own shapes");
    out.push_back(std::move(full));
  }
  if (!filledWithOne.empty()) {
    std::string names;
    for (const auto& n : filledWithOne) names += (names.empty() ? "'" : ", '") + n + "'";
    log(Severity::kWarning, "GPU engines are built for static shapes: the dynamic dims of " +
                                names +
                                " that no shape sets are 1 (choose with --shapes or "
                                "--dynamic-dim N)");
  }
  return out;
}

/// Sets the graph's input shapes to the profile's.
void applyProfile(graph::Graph& g, const ShapeProfile& profile) {
  for (const auto& [name, shape] : profile) {
    graph::Value& v = g.value(name);
    v.shape = shape;
    v.shapeKnown = true;
    v.dimNames.resize(shape.rank());
  }
}

/// The importer's options from the builder's: external data next to the model (`defaultDir`)
/// unless the config names a folder.
onnx_import::ImportOptions importOptions(const BuilderConfig& cfg, const std::string& defaultDir) {
  onnx_import::ImportOptions io;
  io.externalDataDir = cfg.externalDataDir.empty() ? defaultDir : cfg.externalDataDir;
  io.maxTensorBytes = cfg.maxTensorBytes;
  io.allowNonFiniteWeights = cfg.allowNonFiniteWeights;
  return io;
}

/// The GPU engine of the optimised graph `g` (static input shapes) whose data-dependent layers
/// (NonZero, NonMaxSuppression) run on the GPU padded to a bound where they have a bounded
/// form, and whose other data-dependent layers and everything after them run on the CPU
/// (runtime/split_engine.h); a plain GPU engine when splitting leaves nothing after the head.
Expected<std::unique_ptr<Engine>> buildWithCpuTail(graph::Graph g, EngineInfo info,
                                                   const BuilderConfig& cfg,
                                                   const quant::ExplicitInt8* explicitInt8) {
  auto split = graph::splitStaticHead(g, /*bound=*/true);
  if (!cfg.allowCpuFallback && (!split.ok() || !split->tail.nodes.empty()))
    // Refused by the GPU builder, naming the first data-dependent layer and what to allow.
    return runtime::buildCudaEngine(std::move(g), std::move(info), cfg, explicitInt8);
  if (!split.ok()) return split.status();
  graph::StaticHeadAndTail parts = std::move(split).value();
  if (parts.tail.nodes.empty() && parts.bounded.empty())
    return runtime::buildCudaEngine(std::move(parts.head), std::move(info), cfg, explicitInt8);
  std::string ops;
  for (size_t i : graph::dataDependentNodes(g))
    ops += (ops.empty() ? "" : ", ") + g.nodes[i].name + " (" + g.nodes[i].opType + ")";
  if (!parts.tail.nodes.empty())
    log(Severity::kWarning, std::to_string(parts.tail.nodes.size()) + " of " +
                                std::to_string(g.nodes.size()) +
                                " layers run on the CPU after the GPU: the size of what " + ops +
                                " computes depends on the input values");
  for (const auto& b : parts.bounded)
    log(Severity::kInfo, "'" + b.name +
                             "' (data-dependent size) is computed on the GPU padded to its bound "
                             "and cut to size after each run");
  EngineInfo tailInfo = info;
  tailInfo.backend = Backend::kCpu;
  tailInfo.precision = Precision::kFp32;
  tailInfo.deviceKey = builder::currentDeviceKey(Backend::kCpu);
  auto head = runtime::buildCudaEngine(std::move(parts.head), std::move(info), cfg, explicitInt8);
  if (!head.ok()) return head.status().withContext("the GPU part (before " + ops + ")");
  std::unique_ptr<Engine> tail;
  if (!parts.tail.nodes.empty())
    tail.reset(new runtime::GraphEngine(std::move(parts.tail), tailInfo));
  EI_ASSIGN_OR_RETURN(
      auto engine, runtime::SplitEngine::create(std::move(head).value(), std::move(tail), g.outputs,
                                                std::move(parts.bounded), ErrorCode::kInternal));
  return std::unique_ptr<Engine>(std::move(engine));
}

/// The activation tensors a model quantizes itself (outputs of its DequantizeLinear nodes, on
/// the CPU, where its Q/DQ nodes run as ops): they need no calibrated range and are not
/// quantized again.
std::map<std::string, float> modelQuantizedTensors(const graph::Graph& g) {
  std::map<std::string, float> out;
  for (const auto& n : g.nodes)
    if (n.domain.empty() && n.opType == "DequantizeLinear" && !n.outputs.empty())
      out[n.outputs[0]] = 0.f;
  return out;
}

/// INT8 on the CPU backend: the layers in INT8 (the config's per-layer overrides, else the
/// calibration cache's policy, else INT8) get their activation inputs quantized per tensor with
/// the cache's ranges and their weights per channel (quant/qdq.h): the int8 values and the
/// rounding of the GPU's INT8 kernels, computed in FP32, for accuracy checks on a machine
/// without a GPU; it is not faster than FP32. It is the GPU's strict INT8 engine where every
/// such layer gets an INT8 kernel (within a step: the integer sums are the same, the FP32
/// epilogue rounds in another order); the GPU keeps in FP16 the layers no INT8 kernel takes
/// (input channels not a multiple of 4, as an RGB model's first convolution; grouped, not
/// depthwise, convolutions; a MatMul of two computed tensors) and, in a timed build, those
/// FP16 is faster for, so there the CPU is the more pessimistic. A model with its own Q/DQ
/// nodes runs them as ops; its layers whose inputs it quantizes are left as they are, the
/// cache (optional then) serves the others. Returns the precision the engine records: kInt8
/// when any layer is quantized (by the cache or by the model).
Expected<Precision> emulateInt8OnCpu(graph::Graph& g, const BuilderConfig& cfg) {
  const std::map<std::string, float> own = modelQuantizedTensors(g);
  bool explicitQ = !own.empty();
  for (const auto& n : g.nodes)
    explicitQ = explicitQ ||
                (n.domain.empty() && (n.opType == "QLinearConv" || n.opType == "QLinearMatMul"));
  for (const auto& [layer, p] : cfg.layerPrecision) {
    (void)p;
    bool found = false;
    for (const auto& n : g.nodes) found = found || n.name == layer;
    if (!found)
      return Status(ErrorCode::kInvalidArgument,
                    "a precision is set for layer '" + layer +
                        "', which the optimised graph does not have (see `edgeinfer inspect` for "
                        "the layer names)");
  }
  if (cfg.calibrationCachePath.empty()) {
    if (explicitQ) {
      log(Severity::kInfo,
          "INT8 on the CPU: the model's own QuantizeLinear/DequantizeLinear nodes run as ops "
          "(int8 values, FP32 arithmetic)");
      return Precision::kInt8;
    }
    return Status(ErrorCode::kInvalidArgument,
                  "INT8 needs a calibration cache: run `edgeinfer calibrate` on sample data and "
                  "pass its cache (--calibration-cache, BuilderConfig::calibrationCachePath), "
                  "or give calibration data (--calibration-data, the element's calibration-data, "
                  "VisionModelOptions::calibrationData), or use a model with its own "
                  "QuantizeLinear/DequantizeLinear scales");
  }
  EI_ASSIGN_OR_RETURN(CalibrationCache cache, CalibrationCache::load(cfg.calibrationCachePath));
  {
    auto smoothed = quant::applySmoothing(g, cache.smoothing);
    if (!smoothed.ok()) return smoothed.status().withContext("'" + cfg.calibrationCachePath + "'");
  }
  const std::vector<quant::QuantLayer> layers = quant::findQuantizableLayers(g);
  std::set<size_t> which;
  size_t modelOwn = 0;
  for (size_t l = 0; l < layers.size(); ++l) {
    const graph::Node& n = g.nodes[layers[l].node];
    bool quantizedByModel = false;
    for (size_t slot : layers[l].activationSlots)
      quantizedByModel = quantizedByModel || own.count(n.inputs[slot]);
    if (quantizedByModel) {
      ++modelOwn;
      continue;
    }
    Precision p = Precision::kInt8;
    if (auto c = cache.layerPrecision.find(layers[l].name); c != cache.layerPrecision.end())
      p = c->second;
    if (auto o = cfg.layerPrecision.find(layers[l].name); o != cfg.layerPrecision.end())
      p = o->second;
    if (p == Precision::kInt8) which.insert(l);
  }
  if (which.empty()) {
    if (explicitQ) {
      log(Severity::kInfo, "INT8 on the CPU: the model quantizes " + std::to_string(modelOwn) +
                               " layer(s) itself; the cache's policy keeps the other " +
                               std::to_string(layers.size() - modelOwn) + " out of INT8");
      return Precision::kInt8;
    }
    log(Severity::kWarning, "INT8 on the CPU: the policy keeps all " +
                                std::to_string(layers.size()) +
                                " quantizable layers out of INT8; the engine is FP32 and "
                                "recorded as fp32");
    return Precision::kFp32;
  }
  EI_ASSIGN_OR_RETURN(g, quant::quantizeGraph(g, layers, which, cache.tensorAmax));
  EI_RETURN_IF_ERROR(g.topologicalSort());
  log(Severity::kInfo, "INT8 on the CPU: " + std::to_string(which.size()) + " of " +
                           std::to_string(layers.size()) +
                           " quantizable layers in INT8 with the cache's ranges" +
                           (modelOwn ? ", " + std::to_string(modelOwn) + " by the model's own Q/DQ"
                                     : std::string()) +
                           " (emulated: int8 values, FP32 arithmetic; for accuracy, not speed)");
  return Precision::kInt8;
}

/// `cfg` for a build that no whole-engine INT8 choice follows (several profiles, shape ranges
/// and their specialisations): the GPU builder then warns at once of an INT8 build that runs no
/// layer in INT8 (runtime/cuda_backend.h).
BuilderConfig withoutWholeEngineChoice(BuilderConfig cfg) {
  cfg.int8WholeEngineChoice = false;
  return cfg;
}

/// Builds one engine (one input shape, or dynamic dims on the CPU) from the imported graph
/// `g`: the profile's input shapes (when given), the passes, the backend's build. `pool`
/// (optional) shares equal constants with earlier profiles (shareConstants). `cpuTail`: a GPU
/// build may run data-dependent layers and what follows on the CPU (an engine of one shape:
/// profiles and ranges hold plain GPU engines).
Expected<std::unique_ptr<Engine>> buildOne(
    graph::Graph g, const std::string& modelHash, const BuilderConfig& cfg, Backend backend,
    const ShapeProfile* profile, std::map<std::string, Tensor>* pool,
    const std::map<std::string, std::string>* preferred = nullptr, bool cpuTail = false) {
  if (profile) applyProfile(g, *profile);
  applyDynamicDefault(g, cfg.dynamicDimDefault);
  if (backend == Backend::kCuda) applyGpuStaticShapes(g, cfg);
  // GPU INT8 builds of a model with its own Q/DQ nodes take the model's scales (explicit
  // quantization); the CPU, and FP16/FP32 builds, run the Q/DQ nodes as ops (fake quantization).
  quant::ExplicitInt8 explicitInt8;
  const bool gpuInt8 = backend == Backend::kCuda && cfg.precision == Precision::kInt8;
  EI_RETURN_IF_ERROR(
      optimize(g, cfg, gpuInt8 ? &explicitInt8 : nullptr, backend == Backend::kCuda));
  if (pool) runtime::shareConstants(g, *pool);
  // A calibration cache is checked against the model before anything is built (the GPU
  // builder takes its int8 scales from it; the CPU computes in FP32): a cache from another
  // model, or one that misses layers of this graph, is an error now, not later. Tensors the
  // model quantizes itself need no range in it.
  // (On the CPU, an INT8 build leaves the tensors the model's own DequantizeLinear nodes
  // give as they are.)
  const std::map<std::string, float> cpuOwn =
      backend == Backend::kCpu && cfg.precision == Precision::kInt8
          ? modelQuantizedTensors(g)
          : std::map<std::string, float>{};
  if (!cfg.calibrationCachePath.empty())
    EI_RETURN_IF_ERROR(quant::checkCalibrationCache(cfg.calibrationCachePath, modelHash, g,
                                                    !explicitInt8.empty() ? &explicitInt8.scales
                                                    : cpuOwn.empty()      ? nullptr
                                                                          : &cpuOwn));
  EngineInfo info;
  info.sdkVersion = sdkVersion();
  info.backend = backend;
  info.precision = backend == Backend::kCpu ? Precision::kFp32 : cfg.precision;
  if (backend == Backend::kCpu && cfg.precision == Precision::kInt8) {
    EI_ASSIGN_OR_RETURN(info.precision, emulateInt8OnCpu(g, cfg));
  }
  info.modelName = g.name;
  info.modelHash = modelHash;
  if (backend == Backend::kCuda) {
    const quant::ExplicitInt8* ei8 = explicitInt8.empty() ? nullptr : &explicitInt8;
    if (cpuTail && !graph::dataDependentNodes(g).empty())
      return buildWithCpuTail(std::move(g), std::move(info), cfg, ei8);
    return runtime::buildCudaEngine(std::move(g), std::move(info), cfg, ei8, preferred);
  }
  info.deviceKey = builder::currentDeviceKey(backend);
  log(Severity::kInfo, "built engine for '" + g.name + "': " + std::to_string(g.nodes.size()) +
                           " nodes, backend " + backendName(backend));
  return std::unique_ptr<Engine>(new runtime::GraphEngine(std::move(g), std::move(info)));
}

/// An engine with shape ranges (BuilderConfig::shapeRanges): the ranges checked against the
/// model (and its shapes inferred at their min and max), the opt shapes built as one profile,
/// the unoptimised graph kept for specialising at run time (runtime/range_engine.h).
Expected<std::unique_ptr<Engine>> buildRanged(graph::Graph g, const std::string& modelHash,
                                              const BuilderConfig& cfg, Backend backend) {
  if (!cfg.shapeProfiles.empty())
    return Status(ErrorCode::kInvalidArgument,
                  "shape ranges (--min/--opt/--max-shapes) and shape profiles (several --shapes) "
                  "cannot be combined: give one or the other");
  if (!cfg.calibrationCachePath.empty())
    return Status(ErrorCode::kUnsupported,
                  "shape ranges cannot be combined with a calibration cache yet: build one "
                  "profile per shape (--shapes, repeated) for INT8 with a cache");
  EI_RETURN_IF_ERROR(builder::checkShapeRanges(cfg.shapeRanges));
  for (const auto& [name, r] : cfg.shapeRanges)
    if (cfg.inputShapes.count(name))
      return Status(ErrorCode::kInvalidArgument,
                    "input '" + name + "' has both a shape (--shapes) and a shape range: give one");
  // Each of min, opt and max as a profile, checked against the model like any --shapes.
  std::vector<ShapeProfile> atMinOptMax;
  for (Shape ShapeRange::*field : {&ShapeRange::min, &ShapeRange::opt, &ShapeRange::max}) {
    BuilderConfig one = cfg;
    for (const auto& [name, r] : cfg.shapeRanges) one.inputShapes[name] = r.*field;
    auto p = resolveProfiles(g, one, backend);
    if (!p.ok()) return p.status().withContext("shape ranges");
    atMinOptMax.push_back(p->front());
  }
  builder::RangeSpec spec;
  spec.ranges = cfg.shapeRanges;
  spec.optShapes = atMinOptMax[1];
  for (const auto& [name, shape] : spec.optShapes)
    if (!shape.isStatic())
      return Status(ErrorCode::kInvalidArgument,
                    "shape ranges: input '" + name + "' keeps dynamic dims (" +
                        runtime::shapeText(shape) + "): give it a range or a shape");
  for (const auto& in : g.inputs)
    if (!spec.optShapes.count(in))
      return Status(ErrorCode::kInvalidArgument,
                    "shape ranges: input '" + in +
                        "' has no shape in the model: give it a range or a shape (--shapes)");
  // What a specialisation builds with: the options the engine file keeps, so that an engine
  // built here and one loaded from its file specialise alike (forced tactics, timing and
  // cache options are not kept; specialisations use the running process's timing cache).
  spec.build = builder::rangeBuildOptions(cfg);
  // The model optimised at the ranges' min and max, as a specialisation would be: a model that
  // cannot take them fails now, not on a device later. Their output shapes tell which output
  // dims vary.
  std::vector<std::vector<Shape>> outputShapes;
  for (size_t k : {size_t{0}, size_t{2}}) {
    graph::Graph at = g;
    applyProfile(at, atMinOptMax[k]);
    // As buildOne optimises: GPU INT8 absorbs the model's own Q/DQ pairs first.
    quant::ExplicitInt8 explicitInt8;
    const bool gpuInt8 = backend == Backend::kCuda && cfg.precision == Precision::kInt8;
    const Status s =
        optimize(at, cfg, gpuInt8 ? &explicitInt8 : nullptr, backend == Backend::kCuda);
    if (!s.ok())
      return Status(ErrorCode::kInvalidArgument,
                    std::string("shape ranges: the model cannot take the ranges' ") +
                        (k == 0 ? "min" : "max") + " shapes (" +
                        formatShapeProfile(atMinOptMax[k]) + "): " + s.message());
    std::vector<Shape> outs;
    for (const auto& o : at.outputs) outs.push_back(at.findValue(o)->shape);
    outputShapes.push_back(std::move(outs));
  }
  log(Severity::kInfo, "shape ranges " + formatShapeRanges(cfg.shapeRanges) +
                           ": building for the opt shapes " + formatShapeProfile(spec.optShapes));
  graph::Graph source = g;  // shares the constants, which the passes never write
  auto opt = buildOne(std::move(g), modelHash, withoutWholeEngineChoice(cfg), backend,
                      &spec.optShapes, nullptr);
  if (!opt.ok()) return opt.status().withContext("shape ranges: the opt shapes");
  spec.tactics = runtime::cudaEngineTactics(**opt);
  const std::vector<TensorDesc>& optOutputs = (*opt)->outputs();
  for (size_t i = 0; i < optOutputs.size(); ++i) {
    Shape s = optOutputs[i].shape;
    for (const auto& at : outputShapes)
      for (size_t d = 0; d < s.rank(); ++d)
        if (i >= at.size() || at[i].rank() != s.rank() || at[i][d] != s[d]) s[d] = Shape::kUnknown;
    spec.outputShapes[optOutputs[i].name] = s;
  }
  runtime::SpecializeOptions so;
  so.deviceId = cfg.deviceId;
  so.timingCachePath = cfg.timingCachePath;
  so.useTimingCache = cfg.useTimingCache;
  EI_ASSIGN_OR_RETURN(auto engine, runtime::RangeEngine::create(
                                       std::move(spec), std::move(source), std::move(opt).value(),
                                       std::move(so), ErrorCode::kInvalidArgument));
  return std::unique_ptr<Engine>(std::move(engine));
}

/// The median GPU time (ms, CUDA events around the layers: no copies) of 10 runs of `engine`,
/// after 3 warm-up runs (they capture its CUDA graph). Float inputs hold fixed pseudo-random
/// values in [-1, 1] (zeros would idle the tensor cores' data paths and flatter some kernels);
/// other inputs zeros.
Expected<double> medianGpuMs(const Engine& engine) {
  EI_ASSIGN_OR_RETURN(auto ctx, engine.createExecutionContext());
  uint32_t state = 12345u;
  for (const TensorDesc& d : engine.inputs()) {
    for (int64_t dim : d.shape.dims())
      if (dim < 0) return Status(ErrorCode::kUnsupported, "input '" + d.name + "' is dynamic");
    Tensor t = Tensor::zeros(d.dtype, d.shape);
    if (d.dtype == DataType::kFloat32)
      for (int64_t i = 0; i < t.numel(); ++i) {
        state = state * 1664525u + 1013904223u;  // a fixed LCG: the same values every build
        t.data<float>()[i] = static_cast<float>(state >> 8) / 8388608.f - 1.f;
      }
    EI_RETURN_IF_ERROR(ctx->setInput(d.name, t));
  }
  std::vector<double> ms;
  for (int i = 0; i < 13; ++i) {
    EI_RETURN_IF_ERROR(ctx->execute());
    if (i >= 3) ms.push_back(ctx->stats().lastGpuMs);
  }
  std::sort(ms.begin(), ms.end());
  if (!(ms[ms.size() / 2] > 0.0))
    return Status(ErrorCode::kUnsupported, "the engine reports no GPU time");
  return ms[ms.size() / 2];
}

/// The timing cache file where a whole-engine search records its outcome (stage_record.h): the
/// configured one, else the device's default; empty where there is none.
std::string recordCachePath(const Engine& e, const BuilderConfig& cfg) {
  if (!cfg.timingCachePath.empty()) return cfg.timingCachePath;
  auto p = builder::defaultCachePath(e.info().deviceKey);
  return p.ok() ? *p : std::string();
}

/// An engine's input shapes as text, by name (a record's signature).
std::map<std::string, std::string> inputShapesOf(const Engine& e) {
  std::map<std::string, std::string> shapes;
  for (const TensorDesc& d : e.inputs()) shapes[d.name] = d.shape.toString();
  return shapes;
}

/// BuilderConfig::int8StageSearch, after the all-INT8 engine `strict` (built with `strictCfg`,
/// measured at `*strictMs`): runs of consecutive network stages that have INT8 layers
/// (runtime::cudaEngineInt8Stages: ResNet's stem, pool, layer1, layer2...) get those layers in
/// FP16 in trial builds of the whole engine, by the rule of builder/stage_search.h (rounds of
/// each stage alone, then the closest runs extended best first; a round's best run kept when
/// the engine's GPU time, the better of two medians of 10 runs measured in turn with the
/// current engine, is at least kGain lower; never the last INT8 layers; at most kMaxTrials
/// builds). The trials read the timing cache; a layer's FP16 tactics are timed under its FP16
/// signature (no scales), so the first trial that puts a layer shape in FP16 times it there, later
/// builds read it. Layer by layer, INT8 competes with FP16 by the time of each layer alone,
/// reformats included; in the engine a run of layers behaves otherwise (ResNet-50 at batch 1 on an
/// H200: every layer INT8 0.285 ms of GPU time, layer1 and layer2 in FP16 0.268 ms:
/// docs/performance.md). Only layers the engine runs at INT8 move, and only to FP16: the accuracy
/// policy's FP16 layers stay, and so does a layer the configuration sets a precision or a tactic
/// for. Any failure keeps the engine as it is. Updates `strict`, `*strictMs` (the best trial's
/// time) and `strictCfg` (its layerPrecision); returns how many layers moved to FP16.
size_t searchInt8Stages(std::unique_ptr<Engine>& strict, double* strictMs, BuilderConfig& strictCfg,
                        const std::string& bytes, const onnx_import::ImportOptions& io,
                        const std::string& modelHash, Backend backend,
                        const ShapeProfile* profile) {
  constexpr double kGain = 0.005;
  constexpr size_t kMaxTrials = 24;
  const auto t0 = std::chrono::steady_clock::now();
  // Layers the configuration sets a precision or a tactic for stay as they are (an INT8 tactic
  // forced on a layer is no candidate of it in FP16).
  std::set<std::string> fixed;
  for (const auto& [layer, p] : strictCfg.layerPrecision) fixed.insert(layer);
  for (const auto& [layer, id] : strictCfg.forcedTactics) fixed.insert(layer);
  if (!strictCfg.forcedTacticsFile.empty()) {
    auto file = builder::TacticOverrides::loadFile(strictCfg.forcedTacticsFile);
    if (!file.ok()) return 0;  // the builds before read it: not expected
    for (const auto& [layer, id] : file->all()) fixed.insert(layer);
  }
  std::vector<std::vector<std::string>> stages;
  for (auto& st : runtime::cudaEngineInt8Stages(*strict)) {
    std::vector<std::string> free;
    for (auto& l : st)
      if (!fixed.count(l)) free.push_back(std::move(l));
    if (!free.empty()) stages.push_back(std::move(free));
  }
  size_t int8Left = 0, moved = 0;
  std::set<std::string> stageLayers;
  for (const auto& st : stages) {
    int8Left += st.size();
    stageLayers.insert(st.begin(), st.end());
  }
  // A trial: the engine with `c`'s precisions, its GPU time (the better of two medians, measured
  // in turn with the current engine, whose time *strictMs takes the better of). An error when
  // the build or a measurement fails.
  const auto trialOf = [&](const BuilderConfig& c, std::unique_ptr<Engine>* out,
                           double* ms) -> Status {
    EI_ASSIGN_OR_RETURN(graph::Graph g,
                        onnx_import::importFromBuffer(bytes.data(), bytes.size(), io));
    auto trial = buildOne(std::move(g), modelHash, c, backend, profile, nullptr, nullptr,
                          /*cpuTail=*/true);
    if (!trial.ok()) return trial.status().withContext("the build failed");
    EI_ASSIGN_OR_RETURN(double t1, medianGpuMs(**trial));
    EI_ASSIGN_OR_RETURN(double b2, medianGpuMs(*strict));
    EI_ASSIGN_OR_RETURN(double t2, medianGpuMs(**trial));
    *strictMs = std::min(*strictMs, b2);
    *ms = std::min(t1, t2);
    *out = std::move(trial).value();
    return Status::Ok();
  };

  // The outcome of an earlier search of this very all-INT8 engine, from the timing cache: its
  // run is built and measured once instead of searching again (if it still gains).
  const std::string deviceKey = strict->info().deviceKey;
  const std::string cachePath = recordCachePath(*strict, strictCfg);
  const std::string signature = builder::stageSearchSignature(
      modelHash, inputShapesOf(*strict), runtime::cudaEngineTactics(*strict), fixed);
  builder::TimingCache record(deviceKey);
  const bool recordable = !cachePath.empty() && record.loadOrIgnore(cachePath).ok();
  if (recordable)
    if (const auto entry = record.find(signature))
      if (const auto layers = builder::stageSearchLayers(*entry)) {
        bool valid = layers->size() < int8Left;
        for (const auto& l : *layers) valid = valid && stageLayers.count(l);
        // "None paid" holds while the device runs the all-INT8 engine as it did then (a search
        // on a busy device may have found nothing for that reason alone).
        const double then = entry->table[0].medianMs;
        if (valid && layers->empty() && std::fabs(*strictMs - then) <= 0.03 * then) {
          log(Severity::kInfo,
              "INT8: network stages in FP16: none pays for this engine (the "
              "timing cache's record of an earlier search)");
          return 0;
        }
        if (valid && layers->empty())
          log(Severity::kInfo, "INT8: network stages: the all-INT8 engine runs in " +
                                   std::to_string(*strictMs) + " ms, " + std::to_string(then) +
                                   " when a search found none pays: searching again");
        if (valid && !layers->empty()) {
          BuilderConfig c = strictCfg;
          for (const auto& l : *layers) c.layerPrecision[l] = Precision::kFp16;
          std::unique_ptr<Engine> trial;
          double t = 0.0;
          const Status st = trialOf(c, &trial, &t);
          char buf[160];
          std::snprintf(buf, sizeof buf,
                        "%zu layers in FP16 as an earlier search kept them: %.5f "
                        "against %.5f ms",
                        layers->size(), t, *strictMs);
          if (st.ok() && t < (1.0 - kGain) * *strictMs) {
            log(Severity::kInfo, std::string("INT8: network stages: ") + buf +
                                     " (the timing cache's record; no search)");
            strict = std::move(trial);
            *strictMs = t;
            strictCfg = c;
            return layers->size();
          }
          log(Severity::kInfo, std::string("INT8: network stages: ") +
                                   (st.ok() ? std::string(buf) + ", no longer a gain"
                                            : "the recorded run failed (" + st.message() + ")") +
                                   ": searching again");
        }
      }

  // The search (builder/stage_search.h: each stage alone, then runs extended best first, in
  // rounds); only the fastest trial of a round is held (device memory).
  const BuilderConfig before = strictCfg;
  std::vector<size_t> counts;
  for (const auto& st : stages) counts.push_back(st.size());
  std::unique_ptr<Engine> roundBest;
  BuilderConfig roundBestCfg;
  double roundBestMs = 0.0;
  const auto trialFn = [&](const std::vector<bool>& fp16,
                           double fastest) -> Expected<builder::StageTrialTimes> {
    BuilderConfig c = before;
    for (size_t i = 0; i < stages.size(); ++i)
      if (fp16[i])
        for (const std::string& l : stages[i]) c.layerPrecision[l] = Precision::kFp16;
    std::unique_ptr<Engine> trial;
    double t = 0.0;
    EI_RETURN_IF_ERROR(trialOf(c, &trial, &t));
    if (fastest <= 0.0 || t < fastest) {
      roundBest = std::move(trial);
      roundBestCfg = std::move(c);
      roundBestMs = t;
    }
    return builder::StageTrialTimes{t, *strictMs};
  };
  const auto keep = [&] {
    strict = std::move(roundBest);
    strictCfg = roundBestCfg;
    *strictMs = roundBestMs;
  };
  builder::StageSearchOptions so;
  so.gain = kGain;
  so.maxTrials = kMaxTrials;
  const builder::StageSearchOutcome found =
      builder::searchStages(counts, *strictMs, trialFn, keep, so);
  *strictMs = found.ms;
  std::vector<std::string> movedLayers;
  std::string report, keptRuns;
  for (const auto& [b, e] : found.kept) {
    keptRuns += (keptRuns.empty() ? "" : ", ") +
                ("'" + stages[b].front() + "' .. '" + stages[e].back() + "'");
    for (size_t k = b; k <= e; ++k)
      movedLayers.insert(movedLayers.end(), stages[k].begin(), stages[k].end());
  }
  for (const builder::StageTrial& t : found.trials) {
    std::string what = "'" + stages[t.begin].front() + "'" +
                       (t.layers > 1 ? " .. '" + stages[t.end].back() + "'" : std::string()) +
                       " (" + std::to_string(t.layers) + " layers) in FP16";
    char buf[64];
    std::snprintf(buf, sizeof buf, ": %.5f against %.5f ms", t.ms, t.againstMs);
    report += (report.empty() ? "" : "; ") + what + (t.error.empty() ? buf : ": " + t.error);
  }
  const size_t tried = found.trials.size();
  const bool failed = found.failed;
  moved = found.moved;
  // A search that ran its course is recorded, alone in a cache of its own: saving merges it
  // into the file, where the trial builds may have updated entries `record` holds older copies
  // of.
  if (recordable && tried > 0 && !failed) {
    builder::TimingCache out(deviceKey);
    out.insert(signature, builder::stageSearchEntry(movedLayers, *strictMs));
    if (const Status st = out.save(cachePath); !st.ok())
      log(Severity::kWarning, "the stage search's outcome was not saved: " + st.toString());
  }
  if (!report.empty()) {
    char secs[64];
    std::snprintf(secs, sizeof secs, " (%.1f s)",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    log(Severity::kInfo, "INT8: network stages tried in FP16 in the whole engine (GPU time): " +
                             report + "; kept: " + (keptRuns.empty() ? "none" : keptRuns) + secs);
  }
  return moved;
}

/// BuilderConfig::int8WholeEngineChoice: `timed` (a timed INT8 GPU build) against the build of
/// the same model with strictPrecision (and, with int8StageSearch, its stages tried in FP16:
/// searchInt8Stages), both run on the device, each twice in turn (the faster of its two medians
/// counts); the strict engine is kept only if it is at least 1 % faster, so run-to-run noise
/// does not flip the choice between builds. Any failure on the strict side keeps `timed`, said
/// in a warning. `*keptCfg`: the configuration the kept engine was built with.
Expected<std::unique_ptr<Engine>> fasterInt8Engine(
    std::unique_ptr<Engine> timed, const std::string& bytes, const onnx_import::ImportOptions& io,
    const std::string& modelHash, const BuilderConfig& cfg, Backend backend,
    const ShapeProfile* profile, BuilderConfig* keptCfg) {
  *keptCfg = cfg;
  // The GPU builder left this warning to the choice (runtime/cuda_backend.h).
  const auto keep = [&]() {
    if (timed->info().precision != Precision::kInt8)
      log(Severity::kWarning, runtime::int8NowhereWarning());
    return Expected<std::unique_ptr<Engine>>(std::move(timed));
  };
  const auto keepTimed = [&](const Status& why) {
    log(Severity::kWarning,
        "INT8: the engine with every INT8-capable layer in INT8 was not compared (" +
            why.message() + "): the per-layer choice is kept");
    return keep();
  };
  // Measured before the second build, whose timing would otherwise share the device with this
  // engine's first context.
  auto timedMs = medianGpuMs(*timed);
  if (!timedMs.ok()) return keepTimed(timedMs.status());
  BuilderConfig strictCfg = cfg;
  strictCfg.strictPrecision = true;
  auto g = onnx_import::importFromBuffer(bytes.data(), bytes.size(), io);
  if (!g.ok()) return keepTimed(g.status());
  auto strict = buildOne(std::move(g).value(), modelHash, strictCfg, backend, profile, nullptr,
                         nullptr, /*cpuTail=*/true);
  if (!strict.ok()) return keepTimed(strict.status());
  std::unique_ptr<Engine> s = std::move(strict).value();
  const auto timedTactics = runtime::cudaEngineTactics(*timed);
  const bool same = timedTactics == runtime::cudaEngineTactics(*s);
  double tMs = *timedMs, sMs = tMs;
  if (!same) {
    auto strictMs = medianGpuMs(*s);
    if (!strictMs.ok()) return keepTimed(strictMs.status());
    auto timedMs2 = medianGpuMs(*timed);
    if (!timedMs2.ok()) return keepTimed(timedMs2.status());
    auto strictMs2 = medianGpuMs(*s);
    if (!strictMs2.ok()) return keepTimed(strictMs2.status());
    tMs = std::min(*timedMs, *timedMs2);
    sMs = std::min(*strictMs, *strictMs2);
  }
  size_t inFp16 = 0;
  // The trials need the timing cache (without it each would time the whole network again; with
  // misses as errors, a stage's FP16 layers, timed under their own signatures, may miss).
  if (cfg.int8StageSearch && cfg.useTimingCache && !cfg.timingCacheMissIsError)
    inFp16 = searchInt8Stages(s, &sMs, strictCfg, bytes, io, modelHash, backend, profile);
  if (runtime::cudaEngineTactics(*s) == timedTactics) {
    log(Severity::kInfo, inFp16 ? "INT8: the per-layer choice is the engine the stage search found"
                                : "INT8: the per-layer choice is the all-INT8 engine");
    return keep();
  }
  if (inFp16) {
    // The search's figure is the best of its trials: both engines measured again, in turn, so
    // neither side has the pick of more samples.
    auto s1 = medianGpuMs(*s);
    auto t1 = medianGpuMs(*timed);
    auto s2 = medianGpuMs(*s);
    auto t2 = medianGpuMs(*timed);
    if (!s1.ok() || !t1.ok() || !s2.ok() || !t2.ok()) {
      const Status why = !s1.ok()   ? s1.status()
                         : !t1.ok() ? t1.status()
                         : !s2.ok() ? s2.status()
                                    : t2.status();
      return keepTimed(why);
    }
    sMs = std::min(*s1, *s2);
    tMs = std::min(*t1, *t2);
  }
  const bool strictWins = sMs < 0.99 * tMs;
  const auto int8Layers = [](const Engine& e) {  // layers on cuda-i8 / cublaslt-i8 tactics
    int n = 0;
    for (const auto& [layer, id] : runtime::cudaEngineTactics(e)) {
      const bool i8 = id.rfind("cuda-i8.", 0) == 0 || id.rfind("cublaslt-i8.", 0) == 0;
      const bool chain = id.size() > 6 && id.compare(id.size() - 6, 6, ".chain") == 0;
      n += i8 ? (chain ? 2 : 1) : 0;  // (a chained tactic runs two layers)
    }
    return n;
  };
  const std::string but =
      inFp16 ? " but the " + std::to_string(inFp16) + " of the network stages kept in FP16" : "";
  char buf[400];
  std::snprintf(buf, sizeof buf,
                "INT8: every INT8-capable layer in INT8%s (%d layers on INT8 kernels) runs in "
                "%.5f ms, the per-layer choice (%d) in %.5f ms (GPU time, the better of two "
                "medians of 10 runs): the %s is kept",
                but.c_str(), int8Layers(*s), sMs, int8Layers(*timed), tMs,
                strictWins ? "former" : "latter");
  log(Severity::kInfo, buf);
  if (strictWins) {
    *keptCfg = strictCfg;
    return s;
  }
  return keep();
}

/// BuilderConfig::tryRunnerUpsInEngine (GPU builds of one shape): layers whose chosen tactic had a
/// close runner-up of another family or of another kernel of its family
/// (runtime::TacticAlternative: within kCloseCall of its timed cost) get that runner-up in a
/// trial build of the whole engine, one group of equal layers (one timing signature) at a time,
/// the closest calls first, at most kMaxTrials. The candidates were timed alone; in the engine a
/// kernel follows another one, chained by programmatic dependent launch or not, and a close call
/// can go the other way there (ResNet-50 at batch 1 on an H200: its three 64 -> 256 residual
/// layers timed 4.6 us on cuda-i8.pw128x64 against 5.0 on cuBLASLt, yet the engine ran 7 us
/// faster with cuBLASLt's). A trial is kept when the engine's GPU time (the better of two
/// medians of 10 runs each, measured in turn with the current engine) is at least kGain lower;
/// later trials build on it. The trial builds read the timing cache the first build wrote (no
/// timing). The outcome is recorded in the timing cache (builder/stage_record.h): a rebuild of
/// the same first engine builds the recorded choices once and keeps them if they still gain,
/// instead of trying again. Engines faster than cfg.runnerUpTrialsMinEngineMs are not tried.
/// Any failure keeps the engine as it is.
Expected<std::unique_ptr<Engine>> tryRunnerUpsInEngine(
    std::unique_ptr<Engine> engine, const std::string& bytes, const onnx_import::ImportOptions& io,
    const std::string& modelHash, BuilderConfig cfg, Backend backend, const ShapeProfile* profile) {
  constexpr double kCloseCall = 0.15, kGain = 0.005;
  constexpr size_t kMaxTrials = 10;
  const auto t0 = std::chrono::steady_clock::now();
  const auto seconds = [&t0] {
    char buf[32];
    std::snprintf(buf, sizeof buf, " (%.1f s)",
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    return std::string(buf);
  };
  struct Group {
    std::vector<std::string> layers;
    std::string alternative;
    double gap = 0.0;
  };
  std::map<std::pair<std::string, std::string>, Group> bySignature;
  for (const runtime::TacticAlternative& a : runtime::cudaEngineAlternatives(*engine)) {
    if (!(a.chosenMs > 0.0) || a.alternativeMs > (1.0 + kCloseCall) * a.chosenMs) continue;
    Group& grp = bySignature[{a.signature, a.alternative}];
    grp.layers.push_back(a.layer);
    grp.alternative = a.alternative;
    grp.gap = std::max(grp.gap, a.alternativeMs / a.chosenMs - 1.0);
  }
  std::vector<Group> groups;
  for (auto& [key, grp] : bySignature) groups.push_back(std::move(grp));
  std::stable_sort(groups.begin(), groups.end(),
                   [](const Group& a, const Group& b) { return a.gap < b.gap; });
  if (groups.size() > kMaxTrials) groups.resize(kMaxTrials);
  if (groups.empty()) return engine;

  const auto measure = [](const Engine& e) -> Expected<double> { return medianGpuMs(e); };
  auto baseMs = measure(*engine);
  if (!baseMs.ok()) {
    log(Severity::kInfo, "runner-up tactics not tried: " + baseMs.status().message());
    return engine;
  }
  if (*baseMs < cfg.runnerUpTrialsMinEngineMs) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "runner-up tactics not tried: the engine runs in %.5f ms, under the %.3f ms "
                  "below which a gain of %.1f %% is not measurable",
                  *baseMs, cfg.runnerUpTrialsMinEngineMs, 100.0 * kGain);
    log(Severity::kVerbose, buf);
    return engine;
  }
  double current = *baseMs;
  const std::map<std::string, std::string> first = runtime::cudaEngineTactics(*engine);
  cfg.tryRunnerUpsInEngine = false;
  BuilderConfig trialCfg = withoutWholeEngineChoice(cfg);
  // A trial: every other layer keeps the engine's tactic (its choice could otherwise move with
  // the formats the new tactics read and write), `choices` (layer -> tactic) replace theirs.
  const auto trialBuild =
      [&](const std::map<std::string, std::string>& tactics,
          const std::map<std::string, std::string>& choices) -> Expected<std::unique_ptr<Engine>> {
    BuilderConfig c = trialCfg;
    for (const auto& [layer, id] : tactics) c.forcedTactics.emplace(layer, id);
    for (const auto& [layer, id] : choices) c.forcedTactics[layer] = id;
    EI_ASSIGN_OR_RETURN(graph::Graph g,
                        onnx_import::importFromBuffer(bytes.data(), bytes.size(), io));
    return buildOne(std::move(g), modelHash, c, backend, profile, nullptr, nullptr,
                    /*cpuTail=*/true);
  };

  // The outcome of earlier trials on this very engine, from the timing cache.
  const std::string deviceKey = engine->info().deviceKey;
  const std::string cachePath = recordCachePath(*engine, cfg);
  std::set<std::string> fixed;
  for (const auto& [layer, id] : cfg.forcedTactics) fixed.insert(layer);
  for (const auto& [layer, p] : cfg.layerPrecision) fixed.insert(layer);
  const std::string signature =
      builder::runnerUpSignature(modelHash, inputShapesOf(*engine), first, fixed);
  builder::TimingCache record(deviceKey);
  const bool recordable = cfg.useTimingCache && !cfg.timingCacheMissIsError && !cachePath.empty() &&
                          record.loadOrIgnore(cachePath).ok();
  if (recordable)
    if (const auto entry = record.find(signature))
      if (const auto choices = builder::runnerUpChoices(*entry)) {
        bool valid = true;
        for (const auto& [layer, id] : *choices)
          valid = valid && first.count(layer) && first.at(layer) != id;
        const double then = entry->table[0].medianMs;
        if (valid && choices->empty() && std::fabs(current - then) <= 0.03 * then) {
          log(Severity::kInfo,
              "runner-up tactics: none pays in this engine (the timing cache's record of "
              "earlier trials)");
          return engine;
        }
        if (valid && !choices->empty()) {
          auto trial = trialBuild(first, *choices);
          Expected<double> t1 = trial.ok() ? measure(**trial) : Expected<double>(trial.status());
          auto b2 = measure(*engine);
          Expected<double> t2 = trial.ok() ? measure(**trial) : Expected<double>(trial.status());
          if (b2.ok()) current = std::min(current, *b2);
          char buf[160];
          std::snprintf(buf, sizeof buf,
                        "%zu layer(s) on the runner-ups earlier trials kept: ", choices->size());
          if (t1.ok() && t2.ok() && std::min(*t1, *t2) < (1.0 - kGain) * current) {
            char ms[96];
            std::snprintf(ms, sizeof ms, "%.5f against %.5f ms", std::min(*t1, *t2), current);
            log(Severity::kInfo, std::string("runner-up tactics: ") + buf + ms +
                                     " (the timing cache's record; no trials)" + seconds());
            return trial;
          }
          log(Severity::kInfo,
              std::string("runner-up tactics: ") + buf +
                  (t1.ok() && t2.ok() ? "no longer a gain" : "the recorded choice failed") +
                  ": trying again");
        }
      }

  int kept = 0;
  bool measured = true;
  std::map<std::string, std::string> keptChoices;
  std::string report;
  for (const Group& grp : groups) {
    std::map<std::string, std::string> choices = keptChoices;
    for (const std::string& l : grp.layers) choices[l] = grp.alternative;
    auto trial = trialBuild(first, choices);
    if (!trial.ok()) {
      report += (report.empty() ? "" : "; ") + std::to_string(grp.layers.size()) + " x " +
                grp.alternative + ": the trial build failed (" + trial.status().message() + ")";
      continue;
    }
    auto t1 = measure(**trial);
    auto b2 = measure(*engine);
    auto t2 = measure(**trial);
    if (!t1.ok() || !b2.ok() || !t2.ok()) {
      measured = false;
      continue;
    }
    current = std::min(current, *b2);
    const double t = std::min(*t1, *t2);
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s%zu x %s: %.5f against %.5f ms (%s)",
                  report.empty() ? "" : "; ", grp.layers.size(), grp.alternative.c_str(), t,
                  current, t < (1.0 - kGain) * current ? "kept" : "not kept");
    report += buf;
    if (t < (1.0 - kGain) * current) {
      engine = std::move(trial).value();
      current = t;
      keptChoices = std::move(choices);
      ++kept;
    }
  }
  // Trials that ran their course are recorded, alone in a cache of their own: saving merges
  // it into the file (as the stage search's record).
  if (recordable && measured) {
    if (const auto entry = builder::runnerUpEntry(keptChoices, current)) {
      builder::TimingCache out(deviceKey);
      out.insert(signature, *entry);
      if (const Status st = out.save(cachePath); !st.ok())
        log(Severity::kWarning, "the runner-up trials' outcome was not saved: " + st.toString());
    }
  }
  log(Severity::kInfo, "runner-up tactics tried in the engine (GPU time): " + report + "; " +
                           std::to_string(kept) + " group(s) kept" + seconds());
  return engine;
}

Expected<std::unique_ptr<Engine>> buildFromBytes(const std::string& bytes, const BuilderConfig& cfg,
                                                 const std::string& defaultDir) {
  EI_ASSIGN_OR_RETURN(Backend backend, resolveBackend(cfg));
  if (cfg.precision == Precision::kFp16 && backend == Backend::kCpu)
    log(Severity::kWarning, "the CPU backend computes in fp32; precision fp16 is ignored");
  const onnx_import::ImportOptions io = importOptions(cfg, defaultDir);
  EI_ASSIGN_OR_RETURN(graph::Graph g,
                      onnx_import::importFromBuffer(bytes.data(), bytes.size(), io));
  const std::string modelHash = builder::fnv1aHex(bytes.data(), bytes.size());
  if (!cfg.shapeRanges.empty()) return buildRanged(std::move(g), modelHash, cfg, backend);
  EI_ASSIGN_OR_RETURN(std::vector<ShapeProfile> profiles, resolveProfiles(g, cfg, backend));
  if (profiles.size() <= 1) {  // one shape: an ordinary engine (file format unchanged)
    const ShapeProfile* profile = profiles.empty() ? nullptr : &profiles[0];
    auto e = buildOne(std::move(g), modelHash, cfg, backend, profile, nullptr, nullptr,
                      /*cpuTail=*/true);
    if (!e.ok() || backend != Backend::kCuda) return e;
    BuilderConfig kept = cfg;  // the configuration the engine kept was built with
    if (cfg.precision == Precision::kInt8 && !cfg.strictPrecision && cfg.int8WholeEngineChoice) {
      e = fasterInt8Engine(std::move(e).value(), bytes, io, modelHash, cfg, backend, profile,
                           &kept);
      if (!e.ok()) return e;
    }
    if (!cfg.tryRunnerUpsInEngine) return e;
    return tryRunnerUpsInEngine(std::move(e).value(), bytes, io, modelHash, kept, backend, profile);
  }

  // Several profiles: one complete build each (passes, GPU tactic timing and memory plan for
  // its shapes), from a fresh import, since the passes rewrite the graph for its shapes. The
  // timing cache is read and written by each build in turn: its entries are keyed by shape.
  std::vector<std::unique_ptr<Engine>> engines;
  std::map<std::string, Tensor> pool;
  for (size_t i = 0; i < profiles.size(); ++i) {
    log(Severity::kInfo, "shape profile " + std::to_string(i) + " of " +
                             std::to_string(profiles.size()) + ": " +
                             formatShapeProfile(profiles[i]));
    if (i > 0) {
      EI_ASSIGN_OR_RETURN(g, onnx_import::importFromBuffer(bytes.data(), bytes.size(), io));
    }
    auto e = buildOne(std::move(g), modelHash, withoutWholeEngineChoice(cfg), backend, &profiles[i],
                      &pool);
    if (!e.ok()) return e.status().withContext("shape profile " + std::to_string(i));
    engines.push_back(std::move(e).value());
  }
  EI_ASSIGN_OR_RETURN(auto engine, runtime::ProfileEngine::create(profiles, std::move(engines),
                                                                  ErrorCode::kInternal));
  const EngineInfo& info = engine->info();
  char buf[96];
  std::snprintf(
      buf, sizeof buf, "%.2f MiB per profile, %.2f MiB in all",
      static_cast<double>(info.weightBytes) / static_cast<double>(profiles.size()) / 1048576.0,
      static_cast<double>(info.weightBytes) / 1048576.0);
  log(Severity::kInfo,
      "engine with " + std::to_string(profiles.size()) +
          " shape profiles (the file holds each distinct weight once; " + buf +
          (backend == Backend::kCuda
               ? std::string("); on the GPU, layers that store their weights alike in several "
                             "profiles share one copy")
               : std::string("); the CPU shares the host copy of equal constants")));
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace

Expected<std::unique_ptr<Engine>> Builder::buildFromFile(const std::string& path,
                                                         const BuilderConfig& cfg) {
  EI_ASSIGN_OR_RETURN(std::string bytes, builder::readModelFile(path));
  auto e = buildFromBytes(bytes, cfg, builder::modelDir(path));
  if (!e.ok()) return e.status().withContext("'" + path + "'");
  return e;
}

Expected<std::unique_ptr<Engine>> Builder::buildFromBuffer(const void* data, size_t size,
                                                           const BuilderConfig& cfg) {
  return buildFromBytes(std::string(static_cast<const char*>(data), size), cfg, ".");
}

Expected<std::string> Builder::inspect(const std::string& path, const BuilderConfig& cfg) {
  const onnx_import::ImportOptions io = importOptions(cfg, builder::modelDir(path));
  EI_ASSIGN_OR_RETURN(graph::Graph g, onnx_import::importFromFile(path, io));
  // The graph of the first shape profile (of inputShapes when no profiles are given).
  auto profiles = resolveProfiles(g, cfg, Backend::kCpu);
  if (!profiles.ok()) return profiles.status().withContext("'" + path + "'");
  std::string out;
  if (!profiles->empty()) {
    applyProfile(g, profiles->front());
    out += "=== input shapes" +
           std::string(profiles->size() > 1
                           ? " (shape profile 0 of " + std::to_string(profiles->size()) + ")"
                           : "") +
           ": " + formatShapeProfile(profiles->front()) + "\n";
  }
  applyDynamicDefault(g, cfg.dynamicDimDefault);
  EI_RETURN_IF_ERROR(graph::inferShapes(g, cfg.maxTensorBytes).withContext("'" + path + "'"));
  out += "=== before optimisation\n" + g.toString();
  EI_RETURN_IF_ERROR(optimize(g, cfg).withContext("'" + path + "'"));
  out += "\n=== after optimisation\n" + g.toString();
  return out;
}

}  // namespace edgeinfer

namespace edgeinfer::builder {

Expected<std::string> readModelFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(ErrorCode::kNotFound, "cannot open model file '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return Status(ErrorCode::kIoError, "reading '" + path + "' failed");
  return ss.str();
}

std::string modelDir(const std::string& path) {
  const auto pos = path.find_last_of('/');
  return pos == std::string::npos ? std::string(".") : path.substr(0, pos);
}

Expected<std::unique_ptr<Engine>> buildForShapes(
    graph::Graph source, const std::string& modelHash, const BuilderConfig& config, Backend backend,
    const ShapeProfile& shapes, const std::map<std::string, std::string>* preferred) {
  return buildOne(std::move(source), modelHash, withoutWholeEngineChoice(config), backend, &shapes,
                  nullptr, preferred);
}

Expected<graph::Graph> importAndOptimize(const std::string& bytes, const BuilderConfig& cfg,
                                         const std::string& defaultDir,
                                         quant::ExplicitInt8* explicitInt8) {
  const onnx_import::ImportOptions io = importOptions(cfg, defaultDir);
  EI_ASSIGN_OR_RETURN(graph::Graph g,
                      onnx_import::importFromBuffer(bytes.data(), bytes.size(), io));
  // The first shape profile's shapes (inputShapes when no profiles are given).
  EI_ASSIGN_OR_RETURN(std::vector<ShapeProfile> profiles, resolveProfiles(g, cfg, Backend::kCpu));
  if (!profiles.empty()) applyProfile(g, profiles.front());
  applyDynamicDefault(g, cfg.dynamicDimDefault);
  EI_RETURN_IF_ERROR(optimize(g, cfg, explicitInt8));
  return g;
}

uint64_t fnv1a64(const void* data, size_t size) {
  uint64_t h = 1469598103934665603ull;
  const auto* p = static_cast<const uint8_t*>(data);
  for (size_t i = 0; i < size; ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

std::string fnv1aHex(const void* data, size_t size) {
  const uint64_t h = fnv1a64(data, size);
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

}  // namespace edgeinfer::builder
