// calibrate(): the FP32 optimised graph on the CPU reference over the calibration data,
// activation statistics through the CPU context's node observer (pass 1: amax, pass 2:
// histograms) or, with CalibrationOptions::backend on the GPU, through the outputs of an FP32
// GPU engine of the same graph; the calibrator's thresholds, and the sensitivity report (Q/DQ
// graphs, qdq.h, always on the CPU reference).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include <unistd.h>

#include "builder/optimize.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/calibration.h"
#include "edgeinfer/logger.h"
#include "kernels/ref/ref_kernels.h"
#include "quant/qdq.h"
#include "quant/smoothing.h"
#include "runtime/cuda_backend.h"
#include "runtime/graph_engine.h"

namespace edgeinfer {
namespace {

using Clock = std::chrono::steady_clock;
using Batch = std::map<std::string, Tensor>;
using quant::QuantLayer;

double secondsSince(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Accumulates the error of quantized tensors against FP32 ones, per output name.
class ErrorAccumulator {
 public:
  void add(const std::string& name, const Tensor& ref, const Tensor& got) {
    if (ref.dtype() != DataType::kFloat32 || got.dtype() != DataType::kFloat32 ||
        ref.numel() != got.numel())
      return;
    Sums& s = sums_[name];
    const float* a = ref.data<float>();
    const float* b = got.data<float>();
    for (int64_t i = 0; i < ref.numel(); ++i) {
      if (!std::isfinite(a[i]) || !std::isfinite(b[i])) continue;
      s.dot += static_cast<double>(a[i]) * b[i];
      s.aa += static_cast<double>(a[i]) * a[i];
      s.bb += static_cast<double>(b[i]) * b[i];
      maxAbs_ = std::max(maxAbs_, std::fabs(static_cast<double>(a[i]) - b[i]));
    }
  }
  QuantError result() const {
    QuantError e;
    e.maxAbs = maxAbs_;
    for (const auto& [name, s] : sums_) {
      double c = 1.0;
      if (s.aa > 0 && s.bb > 0)
        c = s.dot / (std::sqrt(s.aa) * std::sqrt(s.bb));
      else if (s.aa > 0 || s.bb > 0)
        c = 0.0;
      if (e.worstOutput.empty() || c < e.cosine) {
        e.cosine = c;
        e.worstOutput = name;
      }
    }
    return e;
  }

 private:
  struct Sums {
    double dot = 0, aa = 0, bb = 0;
  };
  std::map<std::string, Sums> sums_;
  double maxAbs_ = 0;
};

/// Reads samples from the source and makes model batches of them.
class Batcher {
 public:
  Batcher(CalibrationSource& src, const std::vector<TensorDesc>& inputs, int64_t batch)
      : src_(src), inputs_(inputs), batch_(batch) {}

  Status rewind() {
    pending_.clear();
    samples_ = 0;
    return src_.rewind();
  }
  int64_t samples() const { return samples_; }
  int64_t batchSize() const { return batch_; }

  /// The next batch, or an empty map at the end. `images` receives the samples in it.
  Expected<Batch> next(int64_t* images) {
    *images = 0;
    while (true) {
      CalibrationSample s;
      EI_ASSIGN_OR_RETURN(bool got, src_.next(s));
      if (!got) break;
      EI_RETURN_IF_ERROR(bindNames(s));
      const int64_t n = leading(s);
      if (n == batch_ && pending_.empty()) {
        *images = n;
        samples_ += n;
        return std::move(s.inputs);
      }
      if (n != 1)
        return Status(ErrorCode::kInvalidArgument,
                      "calibration sample " + s.origin + " has batch " + std::to_string(n) +
                          "; samples must have batch 1 or the model's batch " +
                          std::to_string(batch_));
      pending_.push_back(std::move(s));
      if (static_cast<int64_t>(pending_.size()) == batch_) return flush(images);
    }
    if (pending_.empty()) return Batch{};
    if (!dynamicBatch()) {
      log(Severity::kWarning, "calibration: the last " + std::to_string(pending_.size()) +
                                  " sample(s) do not fill a batch of " + std::to_string(batch_) +
                                  " and are not used");
      pending_.clear();
      return Batch{};
    }
    return flush(images);
  }

 private:
  bool dynamicBatch() const {
    for (const auto& d : inputs_)
      if (d.shape.rank() == 0 || d.shape[0] >= 0) return false;
    return true;
  }
  /// Samples of a single-input model may leave the input name empty.
  Status bindNames(CalibrationSample& s) const {
    if (s.inputs.count("")) {
      if (inputs_.size() != 1) {
        std::string names;
        for (const auto& d : inputs_) names += (names.empty() ? "'" : ", '") + d.name + "'";
        return Status(ErrorCode::kInvalidArgument,
                      "the model has " + std::to_string(inputs_.size()) + " inputs (" + names +
                          "): name the one the calibration data feeds");
      }
      Tensor t = s.inputs.at("");
      s.inputs.erase("");
      s.inputs.emplace(inputs_[0].name, std::move(t));
    }
    for (const auto& d : inputs_)
      if (!s.inputs.count(d.name))
        return Status(
            ErrorCode::kInvalidArgument,
            "calibration sample " + s.origin + " has no value for model input '" + d.name + "'");
    for (const auto& [name, t] : s.inputs) {
      bool known = false;
      for (const auto& d : inputs_) known = known || d.name == name;
      if (!known)
        return Status(ErrorCode::kInvalidArgument,
                      "calibration data feeds '" + name + "', which is not an input of the model");
    }
    return Status::Ok();
  }
  static int64_t leading(const CalibrationSample& s) {
    const Tensor& t = s.inputs.begin()->second;
    return t.shape().rank() ? t.shape()[0] : 1;
  }
  Expected<Batch> flush(int64_t* images) {
    Batch b;
    for (const auto& d : inputs_) {
      const Tensor& first = pending_[0].inputs.at(d.name);
      std::vector<int64_t> dims = first.shape().dims();
      if (dims.empty())
        return Status(ErrorCode::kInvalidArgument,
                      "calibration input '" + d.name + "' is a scalar: it cannot be batched");
      dims[0] = static_cast<int64_t>(pending_.size());
      EI_ASSIGN_OR_RETURN(Tensor t, Tensor::create(first.dtype(), Shape(dims)));
      size_t off = 0;
      for (const auto& s : pending_) {
        const Tensor& x = s.inputs.at(d.name);
        if (x.shape() != first.shape() || x.dtype() != first.dtype())
          return Status(ErrorCode::kInvalidArgument, "calibration sample " + s.origin + " is " +
                                                         x.describe() + ", the first was " +
                                                         first.describe());
        std::memcpy(static_cast<char*>(t.raw()) + off, x.raw(), x.bytes());
        off += x.bytes();
      }
      b.emplace(d.name, std::move(t));
    }
    *images = static_cast<int64_t>(pending_.size());
    samples_ += *images;
    pending_.clear();
    return b;
  }

  CalibrationSource& src_;
  const std::vector<TensorDesc>& inputs_;
  int64_t batch_;
  std::vector<CalibrationSample> pending_;
  int64_t samples_ = 0;
};

/// Progress and ETA over the whole calibration, counted in model runs.
class Progress {
 public:
  Progress(const CalibrationProgressFn& fn, int passes) : fn_(fn), passes_(passes) {}
  void setPlan(int64_t totalRuns) { totalRuns_ = totalRuns; }
  void report(int pass, const char* what, int64_t done, int64_t total) {
    ++runs_;
    if (!fn_) return;
    CalibrationProgress p;
    p.pass = pass;
    p.passes = passes_;
    p.what = what;
    p.done = done;
    p.total = total;
    p.elapsedSeconds = secondsSince(t0_);
    if (totalRuns_ > 0 && runs_ > 0)
      p.etaSeconds =
          p.elapsedSeconds / runs_ * static_cast<double>(std::max<int64_t>(0, totalRuns_ - runs_));
    fn_(p);
  }
  void addRuns(int64_t n) {
    if (totalRuns_ >= 0) totalRuns_ += n;
  }

 private:
  const CalibrationProgressFn& fn_;
  int passes_;
  Clock::time_point t0_ = Clock::now();
  int64_t runs_ = 0;
  int64_t totalRuns_ = -1;
};

Expected<std::unique_ptr<ExecutionContext>> cpuContext(const runtime::GraphEngine& e,
                                                       runtime::NodeObserver obs = nullptr) {
  return runtime::createCpuContext(e, std::move(obs));
}

runtime::GraphEngine makeEngine(graph::Graph g) {
  EngineInfo info;
  info.sdkVersion = sdkVersion();
  info.backend = Backend::kCpu;
  info.modelName = g.name;
  return runtime::GraphEngine(std::move(g), std::move(info));
}

Status runBatch(ExecutionContext& ctx, const Batch& b) {
  for (const auto& [name, t] : b) EI_RETURN_IF_ERROR(ctx.setInput(name, t));
  return ctx.execute();
}

class Calibration {
 public:
  Calibration(CalibrationSource& data, const CalibrationOptions& opt) : data_(data), opt_(opt) {}

  Expected<CalibrationResult> run(const std::string& onnxPath) {
    const auto t0 = Clock::now();
    EI_RETURN_IF_ERROR(validateCalibrator(opt_.calibrator));
    if (opt_.histogramBins < 128 || opt_.histogramBins > (1 << 20))
      return Status(ErrorCode::kInvalidArgument, "histogram bins must be in [128, 1048576], not " +
                                                     std::to_string(opt_.histogramBins));
    if (opt_.reportBatches < 1)
      return Status(ErrorCode::kInvalidArgument, "the report needs at least one batch");
    if (opt_.agreementBatches < 1)
      return Status(ErrorCode::kInvalidArgument, "the agreement target needs at least one batch");
    const bool report = opt_.report || opt_.compareCalibrators || opt_.excludeWorst > 0 ||
                        opt_.excludeBelowCosine > 0 || opt_.minAgreement > 0;
    if (!(opt_.minAgreement >= 0 && opt_.minAgreement <= 1))
      return Status(ErrorCode::kInvalidArgument,
                    "the agreement target must be a share in [0, 1], not " +
                        std::to_string(opt_.minAgreement));
    if (opt_.minAgreement > 0 && !opt_.agreement)
      return Status(ErrorCode::kInvalidArgument,
                    "an agreement target needs a way to count agreement (CalibrationOptions::"
                    "agreement; `edgeinfer calibrate --config` with a decoder sets one)");
    if (opt_.excludeWorst < 0)
      return Status(ErrorCode::kInvalidArgument, "the number of layers to exclude must be >= 0");
    if (opt_.excludeBelowCosine > 1)
      return Status(ErrorCode::kInvalidArgument, "the cosine threshold must be at most 1");
    if (!(opt_.smoothingAlpha >= 0 && opt_.smoothingAlpha <= 1))
      return Status(ErrorCode::kInvalidArgument,
                    "the smoothing strength (alpha) must be in [0, 1], not " +
                        std::to_string(opt_.smoothingAlpha));

    EI_ASSIGN_OR_RETURN(std::string bytes, builder::readModelFile(onnxPath));
    EI_ASSIGN_OR_RETURN(bool onGpu, passesOnGpu());
    EI_ASSIGN_OR_RETURN(judgeOnGpu_, agreementOnGpu());
    onnxPath_ = onnxPath;
    modelHash_ = modelHashOf(bytes.data(), bytes.size());
    BuilderConfig cfg = opt_.builder;
    auto g = builder::importAndOptimize(bytes, cfg, builder::modelDir(onnxPath));
    if (!g.ok()) return g.status().withContext("'" + onnxPath + "'");
    graph_ = std::move(g).value();
    if (onGpu) {  // the GPU engine has static shapes
      Status fits = Status::Ok();
      BuilderConfig gpuCfg = cfg;
      if (staticBatchFor(graph_, &gpuCfg)) {
        auto sg = builder::importAndOptimize(bytes, gpuCfg, builder::modelDir(onnxPath));
        fits = sg.ok() ? checkStaticShapes(*sg) : sg.status().withContext("'" + onnxPath + "'");
        if (fits.ok()) graph_ = std::move(sg).value();
      } else {
        fits = checkStaticShapes(graph_);
      }
      if (!fits.ok() && opt_.backend != Backend::kAuto) return fits;
      if (fits.ok()) {
        cfg = gpuCfg;
      } else {  // auto: the CPU reference takes any shapes
        log(Severity::kWarning, fits.message() + "; the passes run on the CPU reference");
        onGpu = false;
      }
    }
    layers_ = quant::findQuantizableLayers(graph_);
    if (layers_.empty())
      return Status(ErrorCode::kUnsupported,
                    "'" + onnxPath +
                        "' has no quantizable layers (Conv, Gemm, MatMul with float inputs) after "
                        "optimisation: INT8 would change nothing, so no calibration cache is "
                        "written; build it in FP16 or FP32");
    if (opt_.outputLayers == CalibrationOptions::OutputLayers::kKeep) {
      for (size_t l : quant::findOutputLayers(graph_, layers_)) outputLayers_.insert(l);
      if (outputLayers_.size() == layers_.size())
        log(Severity::kWarning,
            "calibration: every quantizable layer of '" + onnxPath +
                "' computes a model output, and output layers are kept out of INT8: no layer "
                "is left in INT8 (an INT8 build with this cache runs none in INT8)");
    }
    collectTensors();
    findSmoothable();
    engine_ = std::make_unique<runtime::GraphEngine>(makeEngine(graph_));
    judgeCfg_ = cfg;
    if (judgeOnGpu_) staticBatchFor(graph_, &judgeCfg_);
    if (onGpu) {
      const Status built = buildGpuEngine(cfg, modelHashOf(bytes.data(), bytes.size()));
      if (!built.ok() && opt_.backend != Backend::kAuto) return built;
      if (!built.ok())  // auto: the CPU reference calibrates any model the importer takes
        log(Severity::kWarning, built.message() + "; the passes run on the CPU reference");
    }
    int64_t batch = opt_.batchSize;
    if (batch <= 0) {
      const auto& in = engine_->inputs();
      batch = !in.empty() && in[0].shape.rank() > 0 && in[0].shape[0] > 0 ? in[0].shape[0] : 1;
    }
    Batcher batcher(data_, engine_->inputs(), batch);

    const bool needHistograms =
        opt_.calibrator.method != CalibrationMethod::kMinMax || opt_.compareCalibrators;
    const int passes = (needHistograms ? 2 : 1) + (report ? 1 : 0);
    Progress progress(opt_.progress, passes);
    const int64_t expected = data_.expectedSamples();
    const int64_t expectedBatches = expected > 0 ? (expected + batch - 1) / batch : -1;
    if (expectedBatches > 0) progress.setPlan(expectedBatches * (needHistograms ? 2 : 1));

    // Pass 1: the largest magnitude of every observed tensor.
    amax_.assign(tensors_.size(), 0.0);
    nonFinite_.assign(tensors_.size(), 0);
    EI_RETURN_IF_ERROR(pass(batcher, 1, "ranges", progress, expected, true));
    const int64_t samples = batcher.samples();
    if (samples == 0)
      return Status(ErrorCode::kInvalidArgument,
                    "no calibration sample could be read from " + data_.describe() +
                        (data_.skipped() ? " (" + std::to_string(data_.skipped()) +
                                               " file(s) skipped: see the warnings)"
                                         : ""));
    if (data_.skipped())
      log(Severity::kWarning, "calibration: " + std::to_string(data_.skipped()) + " of " +
                                  data_.describe() + " could not be read and were skipped");
    for (size_t t = 0; t < tensors_.size(); ++t)
      if (nonFinite_[t])
        log(Severity::kWarning, "calibration: tensor '" + tensors_[t] + "' had " +
                                    std::to_string(nonFinite_[t]) +
                                    " NaN/Inf values; they are left out of its range");

    smoothingFactors();

    // Pass 2: histograms of |x| over [0, amax].
    if (needHistograms) {
      hists_.clear();
      for (double a : amax_) hists_.emplace_back(a, opt_.histogramBins);
      EI_RETURN_IF_ERROR(pass(batcher, 2, "histograms", progress, samples, false));
    }

    CalibrationResult result;
    result.samples = samples;
    EI_ASSIGN_OR_RETURN(result.cache.tensorAmax, thresholds(opt_.calibrator));
    result.cache.sdkVersion = sdkVersion();
    result.cache.modelHash = modelHash_;
    result.cache.preprocessHash = data_.preprocessKey();
    result.cache.calibrator = opt_.calibrator;
    result.cache.histogramBins = opt_.histogramBins;
    result.cache.images = samples;
    for (size_t l = 0; l < layers_.size(); ++l)
      result.cache.layerPrecision[layers_[l].name] =
          outputLayers_.count(l) ? Precision::kFp16 : Precision::kInt8;
    if (!outputLayers_.empty())
      log(Severity::kInfo, "calibration: " + std::to_string(outputLayers_.size()) +
                               " layer(s) computing the model's outputs kept out of INT8");
    if (!classFactors_.empty())  // the report and the builders quantize the smoothed graph
      result.cache.smoothing = plan_.tensorFactors(classFactors_);
    smoothing_ = result.cache.smoothing;
    if (!result.cache.smoothing.empty()) {
      EI_ASSIGN_OR_RETURN(int smoothed, quant::applySmoothing(graph_, result.cache.smoothing));
      engine_ = std::make_unique<runtime::GraphEngine>(makeEngine(graph_));
      log(Severity::kInfo, "calibration: " + std::to_string(smoothed) +
                               " tensor(s) smoothed per channel before INT8");
    }

    if (report) {
      progress.addRuns(reportRuns());
      EI_ASSIGN_OR_RETURN(result.report, sensitivity(result.cache.tensorAmax, progress, passes,
                                                     batcher.batchSize()));
      result.hasReport = true;
      for (const LayerSensitivity& l : result.report.layers)
        result.cache.layerPrecision[l.layer] = l.policy;
    }
    result.seconds = secondsSince(t0);
    return result;
  }

 private:
  /// Where passes 1 and 2 run (CalibrationOptions::backend): true for the GPU.
  Expected<bool> passesOnGpu() const {
    std::string why;
    switch (opt_.backend) {
      case Backend::kCpu:
        return false;
      case Backend::kAuto:
        if (runtime::cudaBackendUsable(opt_.builder.deviceId, &why)) return true;
        log(Severity::kInfo,
            "calibration: no usable GPU (" + why + "): the passes run on the CPU reference");
        return false;
      case Backend::kCuda:
        if (!runtime::cudaBackendUsable(opt_.builder.deviceId, &why))
          return Status(ErrorCode::kUnsupported,
                        "calibration on the GPU was requested, but no GPU is usable: " + why +
                            " (calibrate on the CPU: --backend cpu)");
        return true;
    }
    return false;
  }

  /// Where the agreement target judges a policy (CalibrationOptions::agreementBackend): true
  /// for the GPU engine. Only with a target: nothing is judged without one.
  Expected<bool> agreementOnGpu() const {
    if (opt_.minAgreement <= 0) return false;
    std::string why;
    switch (opt_.agreementBackend) {
      case Backend::kCpu:
        return false;
      case Backend::kAuto:
        if (runtime::cudaBackendUsable(opt_.builder.deviceId, &why)) return true;
        log(Severity::kInfo, "calibration: no usable GPU (" + why +
                                 "): the agreement target judges on the CPU simulation");
        return false;
      case Backend::kCuda:
        if (!runtime::cudaBackendUsable(opt_.builder.deviceId, &why))
          return Status(ErrorCode::kUnsupported,
                        "the agreement target was to be judged on the GPU engine, but no GPU is "
                        "usable: " +
                            why + " (judge on the CPU simulation: --agreement-backend cpu)");
        return true;
    }
    return false;
  }

  /// For the GPU: an input whose only dynamic dim is the first (the batch) gets the calibration
  /// batch (batchSize, or 1) through cfg->inputShapes; true when one did (the graph is made
  /// again with them).
  bool staticBatchFor(const graph::Graph& g, BuilderConfig* cfg) const {
    bool changed = false;
    for (const std::string& in : g.inputs) {
      const graph::Value* v = g.findValue(in);
      if (!v || !v->shapeKnown || v->shape.rank() == 0 || v->shape[0] >= 0) continue;
      std::vector<int64_t> dims = v->shape.dims();
      bool otherDynamic = false;
      for (size_t i = 1; i < dims.size(); ++i) otherDynamic = otherDynamic || dims[i] < 0;
      if (otherDynamic || cfg->inputShapes.count(in)) continue;  // checkStaticShapes names it
      dims[0] = opt_.batchSize > 0 ? opt_.batchSize : 1;
      cfg->inputShapes[in] = Shape(dims);
      changed = true;
    }
    return changed;
  }

  /// The GPU engine is built for one shape: every input dim must be known.
  static Status checkStaticShapes(const graph::Graph& g) {
    for (const std::string& in : g.inputs) {
      const graph::Value* v = g.findValue(in);
      bool known = v && v->shapeKnown;
      for (size_t i = 0; known && i < v->shape.rank(); ++i) known = v->shape[i] >= 0;
      if (!known)
        return Status(ErrorCode::kInvalidArgument,
                      "calibration on the GPU builds an engine of one input shape, and input '" +
                          in + "' has dynamic dims other than the batch (" +
                          (v ? v->shape.toString() : std::string("?")) +
                          "): give its shape (--shapes " + in +
                          ":...), or calibrate on the CPU (--backend cpu)");
    }
    return Status::Ok();
  }

  /// Passes 1 and 2 on the GPU: an FP32 engine of the calibration graph with every observed
  /// tensor as an output (a graph input is read from the batch instead), built with `cfg`'s
  /// timing cache.
  Status buildGpuEngine(BuilderConfig cfg, const std::string& modelHash) {
    const auto t0 = Clock::now();
    graph::Graph g = graph_;
    size_t added = 0;
    for (const std::string& t : tensors_) {
      if (std::find(g.inputs.begin(), g.inputs.end(), t) != g.inputs.end()) continue;
      if (!g.isGraphOutput(t)) {
        g.outputs.push_back(t);
        ++added;
      }
    }
    EngineInfo info;
    info.sdkVersion = sdkVersion();
    info.backend = Backend::kCuda;
    info.precision = Precision::kFp32;
    info.modelName = g.name;
    info.modelHash = modelHash;
    cfg.backend = Backend::kCuda;
    cfg.precision = Precision::kFp32;
    cfg.calibrationCachePath.clear();
    cfg.layerPrecision.clear();
    cfg.strictPrecision = false;
    // Settings of the INT8 build this cache is for, not of this FP32 engine: a forced INT8
    // tactic is no candidate here, and a timing cache filled by INT8 builds lacks its layers.
    cfg.forcedTactics.clear();
    cfg.forcedTacticsFile.clear();
    cfg.timingCacheMissIsError = false;
    cfg.tryRunnerUpsInEngine = false;
    auto e = runtime::buildCudaEngine(std::move(g), std::move(info), cfg);
    if (!e.ok()) return e.status().withContext("calibration on the GPU: the FP32 engine");
    gpuEngine_ = std::move(e).value();
    auto ctx = gpuEngine_->createExecutionContext();
    if (!ctx.ok()) {
      gpuEngine_.reset();
      return ctx.status().withContext("calibration on the GPU");
    }
    gpuContext_ = std::move(ctx).value();
    log(Severity::kInfo, "calibration: FP32 GPU engine built in " +
                             std::to_string(secondsSince(t0)).substr(0, 5) + " s; " +
                             std::to_string(tensors_.size()) + " tensors observed (" +
                             std::to_string(added) + " of them made outputs)");
    return Status::Ok();
  }

  /// The observed tensors smoothing can even out (CalibrationOptions::smoothing,
  /// quant/smoothing.h): their channels' ranges are measured in pass 1.
  void findSmoothable() {
    if (!opt_.smoothing) return;
    for (const auto& n : graph_.nodes)
      if (n.domain.empty() && (n.opType == "QuantizeLinear" || n.opType == "DequantizeLinear" ||
                               n.opType == "QLinearConv" || n.opType == "QLinearMatMul" ||
                               n.opType == "ConvInteger" || n.opType == "MatMulInteger")) {
        log(Severity::kInfo, "calibration: the model has its own quantization (" + n.opType +
                                 "): no activation smoothing");
        return;
      }
    plan_ = quant::SmoothingPlan::analyze(graph_);
    for (size_t t = 0; t < tensors_.size(); ++t) {
      std::vector<int> k = plan_.classes(tensors_[t]);
      if (std::none_of(k.begin(), k.end(), [](int c) { return c >= 0; })) continue;
      channelAmax_[t].assign(k.size(), 0.0);
      classes_[t] = std::move(k);
    }
  }

  /// After pass 1: the factors of every class of channels (SmoothingPlan::chooseFactors),
  /// each observed tensor's factors and its range once smoothed.
  void smoothingFactors() {
    if (classes_.empty()) return;
    std::map<std::string, std::vector<double>> ranges;
    for (const auto& [t, k] : classes_) ranges[tensors_[t]] = channelAmax_[t];
    int left = 0;
    classFactors_ = plan_.chooseFactors(graph_, ranges, opt_.smoothingAlpha, &left);
    if (left)
      log(Severity::kVerbose, "calibration: smoothing left out of " + std::to_string(left) +
                                  " linked group(s) of tensors it would not help");
    for (const auto& [t, k] : classes_) {
      std::vector<float> f(k.size(), 1.f);
      double a = 0;
      for (size_t c = 0; c < k.size(); ++c) {
        if (k[c] >= 0) f[c] = classFactors_[static_cast<size_t>(k[c])];
        a = std::max(a, channelAmax_[t][c] / f[c]);
      }
      amax_[t] = a;
      smooth_[t] = std::move(f);
    }
  }

  /// Pass 1 (amax, non-finite count) or pass 2 (histogram) of tensor `t` on the values `x`
  /// (a smoothed tensor's channels divided by their factors in pass 2).
  void observe(size_t t, const Tensor& x, int passNo) {
    const float* p = x.data<float>();
    const auto ch = channelAmax_.find(t);
    const bool perChannel = ch != channelAmax_.end() && x.numel() > 0 && x.shape().rank() >= 2 &&
                            x.shape()[1] == static_cast<int64_t>(ch->second.size());
    if (passNo == 1 && perChannel) {
      const int64_t c = x.shape()[1], inner = x.numel() / (x.shape()[0] * c);
      for (int64_t n = 0; n < x.shape()[0]; ++n)
        for (int64_t k = 0; k < c; ++k) {
          double& m = ch->second[static_cast<size_t>(k)];
          const float* q = p + (n * c + k) * inner;
          for (int64_t i = 0; i < inner; ++i)
            if (std::isfinite(q[i])) m = std::max(m, static_cast<double>(std::fabs(q[i])));
        }
    }
    if (passNo == 2 && perChannel && smooth_.count(t)) {
      const std::vector<float>& f = smooth_.at(t);
      std::vector<float> y(static_cast<size_t>(x.numel()));
      const int64_t c = x.shape()[1], inner = x.numel() / (x.shape()[0] * c);
      for (int64_t n = 0; n < x.shape()[0]; ++n)
        for (int64_t k = 0; k < c; ++k)
          for (int64_t i = 0; i < inner; ++i) {
            const int64_t j = (n * c + k) * inner + i;
            y[static_cast<size_t>(j)] = p[j] / f[static_cast<size_t>(k)];
          }
      hists_[t].add(y.data(), x.numel());
      return;
    }
    if (passNo == 1) {
      double m = amax_[t];
      for (int64_t k = 0; k < x.numel(); ++k) {
        if (!std::isfinite(p[k])) {
          ++nonFinite_[t];
          continue;
        }
        m = std::max(m, static_cast<double>(std::fabs(p[k])));
      }
      amax_[t] = m;
    } else {
      hists_[t].add(p, x.numel());
    }
  }

  /// One batch through the GPU engine, every observed tensor fetched and observed (the
  /// tensors on threads of their own: the statistics of ResNet-50's 54 tensors on one thread
  /// took longer than the engine).
  Status gpuBatch(const Batch& b, int passNo) {
    const auto t0 = Clock::now();
    EI_RETURN_IF_ERROR(runBatch(*gpuContext_, b));
    std::vector<Tensor> xs(tensors_.size());
    for (size_t t = 0; t < tensors_.size(); ++t) {
      if (auto in = b.find(tensors_[t]); in != b.end()) {
        xs[t] = in->second;
        continue;
      }
      EI_ASSIGN_OR_RETURN(xs[t], gpuContext_->getOutput(tensors_[t]));
      if (xs[t].dtype() != DataType::kFloat32)
        return Status(ErrorCode::kInternal, "calibration on the GPU: tensor '" + tensors_[t] +
                                                "' came back as " + xs[t].describe());
    }
    const auto t1 = Clock::now();
    const auto n = static_cast<int64_t>(xs.size());
#pragma omp parallel for schedule(dynamic)
    for (int64_t t = 0; t < n; ++t)
      observe(static_cast<size_t>(t), xs[static_cast<size_t>(t)], passNo);
    gpuSeconds_ += std::chrono::duration<double>(t1 - t0).count();
    statSeconds_ += secondsSince(t1);
    return Status::Ok();
  }

  /// The activation tensors to calibrate, and at which node each is observed (its first
  /// quantizable reader).
  void collectTensors() {
    std::map<std::string, size_t> index;
    for (const QuantLayer& l : layers_) {
      std::vector<size_t> slots = l.activationSlots;
      slots.insert(slots.end(), l.optionalSlots.begin(), l.optionalSlots.end());
      for (size_t slot : slots) {
        const std::string& name = graph_.nodes[l.node].inputs[slot];
        if (index.count(name)) continue;
        index[name] = tensors_.size();
        tensors_.push_back(name);
        observe_[l.node].push_back({slot, tensors_.size() - 1});
      }
    }
  }

  Status pass(Batcher& batcher, int passNo, const char* what, Progress& progress, int64_t total,
              bool keep) {
    EI_RETURN_IF_ERROR(batcher.rewind());
    runtime::NodeObserver obs = [this, passNo](size_t i, const graph::Node&,
                                               const std::vector<const Tensor*>& in,
                                               const std::vector<Tensor>&) -> Status {
      auto it = observe_.find(i);
      if (it == observe_.end()) return Status::Ok();
      for (const auto& [slot, t] : it->second) observe(t, *in[slot], passNo);
      return Status::Ok();
    };
    std::unique_ptr<ExecutionContext> ctx;
    if (!gpuContext_) {
      EI_ASSIGN_OR_RETURN(ctx, cpuContext(*engine_, obs));
    }
    if (keep) kept_.clear();
    while (true) {
      int64_t images = 0;
      EI_ASSIGN_OR_RETURN(Batch b, batcher.next(&images));
      if (b.empty()) break;
      const Status s = gpuContext_ ? gpuBatch(b, passNo) : runBatch(*ctx, b);
      if (!s.ok())
        return s.withContext("calibration batch ending at sample " +
                             std::to_string(batcher.samples()));
      if (keep && static_cast<int>(kept_.size()) < keptBatches())
        kept_.push_back({std::move(b), images});
      progress.report(passNo, what, batcher.samples(), total);
    }
    if (gpuContext_) {
      log(Severity::kInfo, "calibration pass " + std::to_string(passNo) +
                               " on the GPU: " + std::to_string(gpuSeconds_).substr(0, 5) +
                               " s running the engine and fetching tensors, " +
                               std::to_string(statSeconds_).substr(0, 5) + " s of statistics");
      gpuSeconds_ = statSeconds_ = 0;
    }
    return Status::Ok();
  }

  Expected<std::map<std::string, float>> thresholds(const CalibratorParams& p) const {
    std::map<std::string, float> out;
    for (size_t t = 0; t < tensors_.size(); ++t) {
      double a = amax_[t];
      if (p.method != CalibrationMethod::kMinMax) {
        EI_ASSIGN_OR_RETURN(a, computeAmax(hists_[t], p));
      }
      out[tensors_[t]] = static_cast<float>(a);
    }
    return out;
  }

  /// Batches kept for the report: reportBatches for the ranking (each layer alone, the
  /// calibrators), as many as agreementBatches for every layer INT8, the policy and the
  /// agreement target.
  int keptBatches() const {
    return opt_.minAgreement > 0 ? std::max(opt_.reportBatches, opt_.agreementBatches)
                                 : opt_.reportBatches;
  }

  /// Runs the report makes (at most): FP32 and every layer INT8 and the policy, and the
  /// agreement target's bisection, on every kept batch; each layer alone and the calibrators
  /// compared on the ranking's.
  int64_t reportRuns() const {
    const auto all = static_cast<int64_t>(std::min<size_t>(kept_.size(), keptBatches()));
    const auto rank = std::min<int64_t>(all, opt_.reportBatches);
    int64_t bisection = 0;
    for (size_t n = layers_.size(); opt_.minAgreement > 0 && n > 0; n /= 2) ++bisection;
    return all * (3 + (opt_.minAgreement > 0 ? bisection + 1 : 0)) +
           rank * static_cast<int64_t>(layers_.size() + (opt_.compareCalibrators ? 4 : 0));
  }

  /// Runs the first `batches` kept batches (all by default) through `g` and accumulates its
  /// outputs' error against FP32.
  Expected<QuantError> modelError(const graph::Graph& g, Progress& progress, int passes,
                                  size_t batches = SIZE_MAX) {
    runtime::GraphEngine e = makeEngine(g);
    EI_ASSIGN_OR_RETURN(auto ctx, cpuContext(e));
    return outputsError(*ctx, progress, passes, batches);
  }

  /// The policy that runs the layers `in` in INT8 (the others in FP16) as the GPU engine built
  /// with it gives its outputs (CalibrationOptions::agreementBackend): a calibration cache of
  /// `amax` and that policy in a temporary file, a strict INT8 engine of the model built with
  /// it, the kept batches run through it.
  Expected<QuantError> engineError(const std::set<size_t>& in,
                                   const std::map<std::string, float>& amax, Progress& progress,
                                   int passes) {
    CalibrationCache c;
    c.sdkVersion = sdkVersion();
    c.modelHash = modelHash_;
    c.preprocessHash = data_.preprocessKey();
    c.calibrator = opt_.calibrator;
    c.histogramBins = opt_.histogramBins;
    c.tensorAmax = amax;
    c.smoothing = smoothing_;
    for (size_t l = 0; l < layers_.size(); ++l)
      c.layerPrecision[layers_[l].name] = in.count(l) ? Precision::kInt8 : Precision::kFp16;
    const char* tmp = std::getenv("TMPDIR");
    std::string path = std::string(tmp && *tmp ? tmp : "/tmp") + "/edgeinfer-judge-XXXXXX";
    const int fd = mkstemp(path.data());
    if (fd < 0)
      return Status(ErrorCode::kIoError,
                    "agreement target: cannot create a temporary calibration cache in " +
                        path.substr(0, path.rfind('/')));
    close(fd);
    struct Remove {
      std::string path;
      ~Remove() { std::remove(path.c_str()); }
    } remove{path};
    EI_RETURN_IF_ERROR(c.save(path));
    BuilderConfig cfg = judgeCfg_;
    cfg.backend = Backend::kCuda;
    cfg.precision = in.empty() ? Precision::kFp16 : Precision::kInt8;  // every layer kept out
    cfg.strictPrecision = true;
    cfg.calibrationCachePath = in.empty() ? std::string() : path;
    cfg.tryRunnerUpsInEngine = false;
    cfg.int8WholeEngineChoice = false;
    cfg.timingCacheMissIsError = false;
    auto e = Builder::buildFromFile(onnxPath_, cfg);
    if (!e.ok())
      return e.status().withContext("agreement target: the GPU engine of a policy with " +
                                    std::to_string(in.size()) + " INT8 layer(s)");
    auto ctx = (*e)->createExecutionContext();
    if (!ctx.ok()) return ctx.status().withContext("agreement target: the GPU engine");
    return outputsError(**ctx, progress, passes, SIZE_MAX);
  }

  /// The first `batches` kept batches run on `ctx`, its outputs' error and agreement against
  /// FP32's.
  Expected<QuantError> outputsError(ExecutionContext& ctx, Progress& progress, int passes,
                                    size_t batches) {
    ExecutionContext* c = &ctx;
    ErrorAccumulator acc;
    Agreement agreement;
    for (size_t b = 0; b < kept_.size() && b < batches; ++b) {
      EI_RETURN_IF_ERROR(runBatch(*c, kept_[b].inputs));
      if (opt_.agreement) {
        std::map<std::string, Tensor> got;
        for (const auto& [name, r] : baseline_[b]) {
          EI_ASSIGN_OR_RETURN(Tensor out, c->getOutput(name));
          got.emplace(name, out);
        }
        auto a = opt_.agreement(baseline_[b], got);
        if (!a.ok())
          return a.status().withContext("the report's agreement (" + opt_.agreementName + ")");
        agreement.matched += a->matched;
        agreement.total += a->total;
      }
      if (opt_.outputView) {  // compared as the decoder reads them (copies: the view may write)
        std::map<std::string, Tensor> ref, got;
        for (const auto& [name, r] : baseline_[b]) {
          EI_ASSIGN_OR_RETURN(Tensor out, c->getOutput(name));
          ref.emplace(name, r.clone());
          got.emplace(name, out.clone());
        }
        const Status s = opt_.outputView(ref, got);
        if (!s.ok()) return s.withContext("the report's output view (" + opt_.outputViewName + ")");
        for (const auto& [name, r] : ref)
          if (auto g = got.find(name); g != got.end()) acc.add(name, r, g->second);
      } else {
        for (const auto& [name, ref] : baseline_[b]) {
          EI_ASSIGN_OR_RETURN(Tensor out, c->getOutput(name));
          acc.add(name, ref, out);
        }
      }
      progress.report(passes, "report", ++reportRuns_, reportTotal_);
    }
    QuantError error = acc.result();
    error.agreement = agreement;
    return error;
  }

  /// CalibrationOptions::minAgreement: the fewest of `candidates` (layers in INT8, worst
  /// first) to keep out of INT8 as well, besides `excluded`, for the target; `*error` the
  /// model's error with them out. Bisection: agreement grows (not strictly) with layers out.
  Expected<size_t> layersForAgreement(const std::set<size_t>& excluded,
                                      const std::vector<size_t>& candidates,
                                      const std::map<std::string, float>& amax, QuantError* error,
                                      Progress& progress, int passes) {
    const auto withOut = [&](size_t k) -> Expected<QuantError> {
      std::set<size_t> in;
      for (size_t l = 0; l < layers_.size(); ++l) in.insert(l);
      for (size_t l : excluded) in.erase(l);
      for (size_t i = 0; i < k; ++i) in.erase(candidates[i]);
      if (judgeOnGpu_) return engineError(in, amax, progress, passes);
      EI_ASSIGN_OR_RETURN(graph::Graph q, quant::quantizeGraph(graph_, layers_, in, amax));
      return modelError(q, progress, passes);
    };
    const double target = opt_.minAgreement;
    EI_ASSIGN_OR_RETURN(QuantError at0, withOut(0));
    if (at0.agreement.total == 0)
      log(Severity::kWarning,
          "agreement target: FP32 gives no results (" + opt_.agreementName + ") on the report's " +
              std::to_string(kept_.size()) +
              " batch(es), so it has nothing to judge; calibrate on data with objects in it");
    if (at0.agreement.share() >= target) {
      *error = at0;
      return 0;
    }
    size_t lo = 0, hi = candidates.size();  // lo misses the target
    QuantError atHi = at0;
    if (hi > 0) {
      auto e = withOut(hi);
      if (!e.ok()) return e.status();
      atHi = *e;
    }
    if (atHi.agreement.share() < target) {
      log(Severity::kWarning,
          "agreement target " + std::to_string(target) + " not reached even with every " +
              "quantizable layer out of INT8 (" + std::to_string(atHi.agreement.matched) + " of " +
              std::to_string(atHi.agreement.total) + ", " + opt_.agreementName +
              "): every layer is kept out");
      *error = atHi;
      return hi;
    }
    *error = atHi;
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      EI_ASSIGN_OR_RETURN(QuantError e, withOut(mid));
      if (e.agreement.share() >= target) {
        hi = mid;
        *error = e;
      } else {
        lo = mid;
      }
    }
    return hi;
  }

  Expected<SensitivityReport> sensitivity(const std::map<std::string, float>& amax,
                                          Progress& progress, int passes, int64_t batch) {
    SensitivityReport rep;
    rep.calibrator = opt_.calibrator;
    rep.outputView = opt_.outputViewName;
    rep.agreement = opt_.agreementName;
    rep.minAgreement = opt_.minAgreement;
    if (opt_.minAgreement > 0) rep.agreementJudge = judgeOnGpu_ ? "GPU engine" : "CPU simulation";
    while (static_cast<int>(kept_.size()) > keptBatches()) kept_.pop_back();
    const size_t rankBatches = std::min<size_t>(kept_.size(), opt_.reportBatches);
    for (size_t b = 0; b < rankBatches; ++b) rep.samples += kept_[b].images;
    for (const auto& k : kept_) rep.agreementSamples += k.images;
    reportTotal_ = reportRuns();
    (void)batch;

    // FP32 baseline; on the way, each layer quantized alone on its FP32 inputs.
    std::vector<Tensor> fqWeights(layers_.size());
    std::map<size_t, size_t> layerAt;  // node -> layer
    for (size_t l = 0; l < layers_.size(); ++l) {
      layerAt[layers_[l].node] = l;
      if (layers_[l].weightSlot >= 0) {
        const Tensor* w = graph_.constant(
            graph_.nodes[layers_[l].node].inputs[static_cast<size_t>(layers_[l].weightSlot)]);
        EI_ASSIGN_OR_RETURN(fqWeights[l], quant::fakeQuantizeWeights(*w, layers_[l].weightAxis));
      }
    }
    std::vector<ErrorAccumulator> layerAcc(layers_.size());
    bool ranking = true;  // the ranking's batches (the first rankBatches)
    runtime::NodeObserver obs = [&](size_t i, const graph::Node& n,
                                    const std::vector<const Tensor*>& in,
                                    const std::vector<Tensor>& out) -> Status {
      auto it = layerAt.find(i);
      if (!ranking || it == layerAt.end()) return Status::Ok();
      const QuantLayer& l = layers_[it->second];
      std::vector<Tensor> owned(in.size());
      std::vector<const Tensor*> qin = in;
      for (size_t slot : quant::quantizedSlots(l, n, amax)) {
        const float scale = quant::activationScale(amax.at(n.inputs[slot]));
        owned[slot] = in[slot]->clone();
        float* p = owned[slot].data<float>();
        for (int64_t k = 0; k < owned[slot].numel(); ++k) p[k] = quant::fakeQuantize(p[k], scale);
        qin[slot] = &owned[slot];
      }
      if (l.weightSlot >= 0) qin[static_cast<size_t>(l.weightSlot)] = &fqWeights[it->second];
      std::vector<Tensor> qout;
      EI_RETURN_IF_ERROR(ref::runNode(n, qin, qout));
      layerAcc[it->second].add(n.outputs[0], out[0], qout[0]);
      return Status::Ok();
    };
    {
      EI_ASSIGN_OR_RETURN(auto ctx, cpuContext(*engine_, obs));
      baseline_.clear();
      for (const auto& k : kept_) {
        ranking = baseline_.size() < rankBatches;
        EI_RETURN_IF_ERROR(runBatch(*ctx, k.inputs));
        std::map<std::string, Tensor> outs;
        for (const auto& d : engine_->outputs()) {
          EI_ASSIGN_OR_RETURN(Tensor t, ctx->getOutput(d.name));
          outs.emplace(d.name, t.clone());
        }
        baseline_.push_back(std::move(outs));
        progress.report(passes, "report", ++reportRuns_, reportTotal_);
      }
    }
    // An output that is 0 everywhere in FP32 on the ranking's samples (a detector's map with
    // nothing found: the sigmoid saturated) makes any change of it a cosine of 0: the ranking
    // and the cosine threshold then say nothing of the layers. Said, not hidden.
    for (const auto& d : engine_->outputs()) {
      bool zero = true;
      for (size_t b = 0; b < baseline_.size() && b < rankBatches && zero; ++b) {
        const auto it = baseline_[b].find(d.name);
        if (it == baseline_[b].end() || it->second.dtype() != DataType::kFloat32) {
          zero = false;
          break;
        }
        const float* v = it->second.data<float>();
        for (int64_t i = 0; i < it->second.numel() && zero; ++i) zero = v[i] == 0.f;
      }
      if (zero && !baseline_.empty())
        log(Severity::kWarning,
            "calibration report: the model's output '" + d.name +
                "' is 0 everywhere in FP32 on "
                "the " +
                std::to_string(std::min(baseline_.size(), rankBatches)) +
                " batch(es) the layers are ranked on (the data's first): any INT8 change of it "
                "gives a cosine of 0, so the ranking and --exclude-threshold say little; report on "
                "data where the model finds something");
    }

    // Each layer alone in INT8, the model outputs against FP32.
    for (size_t l = 0; l < layers_.size(); ++l) {
      LayerSensitivity s;
      s.layer = layers_[l].name;
      s.opType = layers_[l].opType;
      const graph::Node& node = graph_.nodes[layers_[l].node];
      for (size_t slot : quant::quantizedSlots(layers_[l], node, amax))
        s.inputs.push_back(node.inputs[slot]);
      s.layerError = layerAcc[l].result();
      EI_ASSIGN_OR_RETURN(graph::Graph q, quant::quantizeGraph(graph_, layers_, {l}, amax));
      EI_ASSIGN_OR_RETURN(s.modelError, modelError(q, progress, passes, rankBatches));
      rep.layers.push_back(std::move(s));
    }
    std::stable_sort(rep.layers.begin(), rep.layers.end(),
                     [](const LayerSensitivity& a, const LayerSensitivity& b) {
                       if (a.modelError.cosine != b.modelError.cosine)
                         return a.modelError.cosine < b.modelError.cosine;
                       return a.layerError.cosine < b.layerError.cosine;
                     });
    std::set<size_t> all, kept;
    for (size_t l = 0; l < layers_.size(); ++l) all.insert(l);
    std::map<std::string, size_t> layerNamed;
    for (size_t l = 0; l < layers_.size(); ++l) layerNamed[layers_[l].name] = l;
    for (size_t r = 0; r < rep.layers.size(); ++r) {
      LayerSensitivity& s = rep.layers[r];
      s.outputLayer = outputLayers_.count(layerNamed.at(s.layer)) > 0;
      rep.keptOutputLayers += s.outputLayer;
      if (s.outputLayer || static_cast<int>(r) < opt_.excludeWorst ||
          (opt_.excludeBelowCosine > 0 && s.modelError.cosine < opt_.excludeBelowCosine))
        s.policy = Precision::kFp16;
    }
    EI_ASSIGN_OR_RETURN(graph::Graph q, quant::quantizeGraph(graph_, layers_, all, amax));
    EI_ASSIGN_OR_RETURN(rep.allInt8, modelError(q, progress, passes));
    if (opt_.minAgreement > 0) {  // the next-ranked layers out of INT8 too, to reach the target
      std::set<size_t> excluded;
      std::vector<size_t> candidates;  // ranking order
      for (const auto& s : rep.layers) {
        if (s.policy != Precision::kInt8)
          excluded.insert(layerNamed.at(s.layer));
        else
          candidates.push_back(layerNamed.at(s.layer));
      }
      EI_ASSIGN_OR_RETURN(size_t k, layersForAgreement(excluded, candidates, amax, &rep.withPolicy,
                                                       progress, passes));
      rep.keptForAgreement = static_cast<int>(k);
      for (auto& s : rep.layers)
        if (k > 0 && s.policy == Precision::kInt8) {
          s.policy = Precision::kFp16;
          --k;
        }
    }
    for (const auto& s : rep.layers)
      if (s.policy == Precision::kInt8) kept.insert(layerNamed.at(s.layer));
    if (opt_.minAgreement <= 0) {
      EI_ASSIGN_OR_RETURN(graph::Graph qp, quant::quantizeGraph(graph_, layers_, kept, amax));
      EI_ASSIGN_OR_RETURN(rep.withPolicy, modelError(qp, progress, passes));
    }

    if (opt_.compareCalibrators) {
      CalibratorParams pct;
      pct.method = CalibrationMethod::kPercentile;
      pct.percentile = opt_.calibrator.method == CalibrationMethod::kPercentile
                           ? opt_.calibrator.percentile
                           : 99.99;
      for (CalibratorParams p : {CalibratorParams{CalibrationMethod::kEntropy, 99.99},
                                 CalibratorParams{CalibrationMethod::kMinMax, 99.99}, pct,
                                 CalibratorParams{CalibrationMethod::kMse, 99.99}}) {
        EI_ASSIGN_OR_RETURN(auto a, thresholds(p));
        EI_ASSIGN_OR_RETURN(graph::Graph qc, quant::quantizeGraph(graph_, layers_, all, a));
        CalibratorComparison c;
        c.calibrator = p;
        EI_ASSIGN_OR_RETURN(c.modelError, modelError(qc, progress, passes, rankBatches));
        rep.calibrators.push_back(c);
      }
    }
    return rep;
  }

  struct Kept {
    Batch inputs;
    int64_t images = 0;
  };

  CalibrationSource& data_;
  const CalibrationOptions& opt_;
  graph::Graph graph_;
  std::vector<QuantLayer> layers_;
  std::set<size_t> outputLayers_;  // kept out of INT8 (CalibrationOptions::outputLayers)
  std::vector<std::string> tensors_;
  std::map<size_t, std::vector<std::pair<size_t, size_t>>> observe_;  // node -> (slot, tensor)
  std::unique_ptr<runtime::GraphEngine> engine_;
  std::unique_ptr<Engine> gpuEngine_;  // passes 1 and 2 on the GPU (CalibrationOptions::backend)
  // The agreement target judged on GPU engines (CalibrationOptions::agreementBackend): the
  // model, its hash, the build settings (static shapes) and the smoothing factors.
  bool judgeOnGpu_ = false;
  std::string onnxPath_, modelHash_;
  BuilderConfig judgeCfg_;
  std::map<std::string, std::vector<float>> smoothing_;
  std::unique_ptr<ExecutionContext> gpuContext_;
  double gpuSeconds_ = 0, statSeconds_ = 0;  // GPU passes: engine runs and fetches, statistics
  std::vector<double> amax_;
  quant::SmoothingPlan plan_;                          // activation smoothing
  std::map<size_t, std::vector<int>> classes_;         // observed tensor -> its channels' classes
  std::map<size_t, std::vector<double>> channelAmax_;  // its channels' ranges (pass 1)
  std::map<size_t, std::vector<float>> smooth_;        // its factors
  std::vector<float> classFactors_;                    // per class of channels
  std::vector<int64_t> nonFinite_;
  std::vector<AbsHistogram> hists_;
  std::vector<Kept> kept_;
  std::vector<std::map<std::string, Tensor>> baseline_;
  int64_t reportRuns_ = 0, reportTotal_ = 0;
};

}  // namespace

Expected<CalibrationResult> calibrate(const std::string& onnxPath, CalibrationSource& data,
                                      const CalibrationOptions& options) {
  Calibration c(data, options);
  return c.run(onnxPath);
}

}  // namespace edgeinfer
