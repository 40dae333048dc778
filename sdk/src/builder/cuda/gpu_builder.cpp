// The GPU builder (docs/design/gpu-backend.md, "Choosing"): walks the optimised graph in
// topological order and, for every layer, asks every tactic provider for candidates, times
// them on this device through the timing cache (CUDA events: warm-up, then the median of
// several measurements), adds the cost of reformatting each input from the format its
// producer wrote into the one the candidate reads, and keeps the cheapest. Views (Reshape,
// Flatten, Squeeze, Unsqueeze) cost nothing: their output shares their input's memory. A layer
// no GPU tactic supports runs on the CPU reference when the config allows it.
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <limits>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "builder/engine_format.h"
#include "builder/timing_cache.h"
#include "core/device.h"
#include "edgeinfer/calibration.h"
#include "edgeinfer/logger.h"
#include "graph/partition.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/dependent_launch.cuh"
#include "kernels/cuda/library_handles.h"
#include "kernels/cuda/providers.h"
#include "kernels/cuda/reformat.h"
#include "kernels/cuda/timing_data.h"
#include "quant/qdq.h"
#include "quant/qdq_absorb.h"
#include "quant/smoothing.h"
#include "runtime/cuda/cuda_engine.h"
#include "runtime/cuda_backend.h"

namespace edgeinfer::runtime {

using builder::Layout;
using builder::Tactic;
using builder::TensorFormat;
using cuda::CudaEngine;
using cuda::ExecutionPlan;
using cuda::PlanStep;
using cuda::PlanTensor;
using cuda::StepKind;

bool cudaBackendUsable(int deviceId, std::string* why) {
  auto dev = queryCudaDevice(deviceId);
  if (!dev.ok()) {
    if (why) *why = dev.status().message();
    return false;
  }
  return true;
}

namespace {

constexpr double kInfinity = std::numeric_limits<double>::infinity();

bool isViewOp(const graph::Node& n) {
  return n.domain.empty() && (n.opType == "Reshape" || n.opType == "Flatten" ||
                              n.opType == "Squeeze" || n.opType == "Unsqueeze");
}

/// Device memory freed when it goes out of scope (timing scratch buffers).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(o.p_) { o.p_ = nullptr; }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  /// Zeroed on `stream`: the timing launches run on the builder's non-blocking stream, which a
  /// cudaMemset on the legacy stream would not be ordered with.
  Status allocZeroed(size_t bytes, cudaStream_t stream) {
    EI_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(bytes, 1)));
    EI_CUDA_CHECK(cudaMemsetAsync(p_, 0, std::max<size_t>(bytes, 1), stream));
    return Status::Ok();
  }
  /// `count` elements of `type`: pseudo-random activations where fillTimingData() has them
  /// (float, int8: written on `stream`, which the timing launches then use), zeros otherwise.
  Status allocTimingData(int64_t count, DataType type, uint32_t seed, cudaStream_t stream) {
    const size_t bytes = static_cast<size_t>(count) * dataTypeSize(type);
    if (!edgeinfer::cuda::fillsTimingData(type)) return allocZeroed(bytes, stream);
    EI_CUDA_CHECK(cudaMalloc(&p_, std::max<size_t>(bytes, 1)));
    return edgeinfer::cuda::fillTimingData(p_, type, count, seed, stream);
  }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
};

/// Time of one `launch` with CUDA events. First one untimed launch (lazy module loading,
/// caches) and one timed launch, the probe: above `pruneAboveMs` the probe is the result (the
/// caller's bound: far slower than the best so far). Otherwise `iterations` launches (fewer
/// for slow launches, TimingOptions::replayMs) are captured into a CUDA graph (the runtime
/// replays graphs, so host launch overhead must not decide between tactics whose kernels take
/// microseconds), the graph is replayed `warmup` times, then timed `repeats` times; the median
/// per launch is the result. A tactic that cannot be captured is timed with direct launches.
/// Without programmatic dependent launch (dependent_launch.cuh, DependentLaunchOff): a kernel
/// must not be timed overlapping its own previous launch.
Expected<double> timeLaunches(const std::function<Status()>& launch, const TimingOptions& o,
                              cudaStream_t stream, double pruneAboveMs = kInfinity) {
  const edgeinfer::cuda::DependentLaunchOff noOverlap;
  cudaEvent_t start = nullptr, stop = nullptr;
  const auto destroyEvents = [&] {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  };
  if (cudaEventCreate(&start) != cudaSuccess || cudaEventCreate(&stop) != cudaSuccess) {
    destroyEvents();
    return Status(ErrorCode::kCudaError, "cudaEventCreate failed");
  }
  float probe = 0.f;
  {
    Status s = launch();
    if (s.ok())
      s = edgeinfer::cuda::cudaStatus(cudaStreamSynchronize(stream), "cudaStreamSynchronize",
                                      __FILE__, __LINE__);
    if (s.ok()) {
      cudaEventRecord(start, stream);
      s = launch();
      cudaEventRecord(stop, stream);
      const cudaError_t se = cudaEventSynchronize(stop);
      if (s.ok() && se != cudaSuccess)
        s = edgeinfer::cuda::cudaStatus(se, "cudaEventSynchronize", __FILE__, __LINE__);
      if (s.ok()) cudaEventElapsedTime(&probe, start, stop);
    }
    if (!s.ok()) {
      destroyEvents();
      return s;
    }
  }
  if (static_cast<double>(probe) > pruneAboveMs) {
    destroyEvents();
    return static_cast<double>(probe);
  }
  int iters = std::max(o.iterations, 1);
  if (probe > 0.f && o.replayMs > 0.0)
    iters = std::clamp(static_cast<int>(std::ceil(o.replayMs / probe)), 1, iters);
  cudaGraphExec_t exec = nullptr;
  {
    cudaGraph_t graph = nullptr;
    Status captured;
    // As a context's capture: no cuDNN layer of another thread changes streams meanwhile.
    std::lock_guard<std::recursive_mutex> streams(edgeinfer::cuda::cudnnStreamMutex());
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
      for (int i = 0; i < iters && captured.ok(); ++i) captured = launch();
      if (cudaStreamEndCapture(stream, &graph) != cudaSuccess)
        captured = Status(ErrorCode::kCudaError, "capture");
      if (captured.ok() && graph && cudaGraphInstantiate(&exec, graph, 0) != cudaSuccess)
        exec = nullptr;
      if (graph) cudaGraphDestroy(graph);
    }
    cudaGetLastError();  // a failed capture leaves an error to clear; direct launches follow
  }
  const auto run = [&]() -> Status {
    if (exec) {
      EI_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      return Status::Ok();
    }
    for (int i = 0; i < iters; ++i) EI_RETURN_IF_ERROR(launch());
    return Status::Ok();
  };
  std::vector<double> samples;
  Status status;
  for (int i = 0; i < std::max(o.warmup, 0) && status.ok(); ++i) status = run();
  if (status.ok())
    status = edgeinfer::cuda::cudaStatus(cudaStreamSynchronize(stream), "cudaStreamSynchronize",
                                         __FILE__, __LINE__);
  for (int r = 0; r < std::max(o.repeats, 1) && status.ok(); ++r) {
    cudaEventRecord(start, stream);
    status = run();
    cudaEventRecord(stop, stream);
    const cudaError_t se = cudaEventSynchronize(stop);
    if (status.ok() && se != cudaSuccess)
      status = edgeinfer::cuda::cudaStatus(se, "cudaEventSynchronize", __FILE__, __LINE__);
    float ms = 0.f;
    if (status.ok()) cudaEventElapsedTime(&ms, start, stop);
    samples.push_back(static_cast<double>(ms) / iters);
  }
  destroyEvents();
  if (exec) cudaGraphExecDestroy(exec);
  EI_RETURN_IF_ERROR(status);
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

class GpuBuilder {
 public:
  GpuBuilder(const graph::Graph& g, const BuilderConfig& cfg, builder::TimingCache& cache,
             const builder::TacticOverrides& overrides,
             const std::map<std::string, std::string>* preferred)
      : g_(g),
        cfg_(cfg),
        cache_(cache),
        overrides_(overrides),
        preferred_(preferred),
        producers_(g.producers()) {}

  /// INT8: the scale of every calibrated float activation (amax / 127, or exactly the scale
  /// in `exactScales`: a model's own Q/DQ scales; a view's output takes its input's, since a
  /// view does not change values) and the cache's per-layer policy.
  void setCalibration(const CalibrationCache& calib,
                      const std::map<std::string, float>* exactScales = nullptr) {
    for (const auto& [name, amax] : calib.tensorAmax) {
      const graph::Value* v = g_.findValue(name);
      if (v && v->dtype == DataType::kFloat32 && !g_.isConstant(name))
        scales_[name] = quant::activationScale(amax);
    }
    if (exactScales)
      for (const auto& [name, s] : *exactScales)
        if (scales_.count(name)) scales_[name] = s;
    for (const auto& n : g_.nodes)
      if (isViewOp(n) && n.hasInput(0) && scales_.count(n.inputs[0]) && !n.outputs.empty())
        scales_[n.outputs[0]] = scales_[n.inputs[0]];
    // An input of node n that nothing else reads and that has no scale of its own takes the
    // output's, where both hold the same quantized values:
    const auto takeOutputScale = [&](const graph::Node& n) {
      const std::string& in = n.inputs[0];
      const auto out = scales_.find(n.outputs[0]);
      if (out == scales_.end() || scales_.count(in) || g_.isConstant(in) || g_.isGraphOutput(in) ||
          readerCount(in) != 1)
        return;
      const graph::Value* v = g_.findValue(in);
      if (v && v->dtype == DataType::kFloat32) scales_[in] = out->second;
    };
    // - a view's (back from its output: quantizing before or after the view gives the same
    //   bits): a classifier's pooled features, flattened for its INT8 Gemm, can so be written as
    //   int8 by the pool;
    for (auto it = g_.nodes.rbegin(); it != g_.nodes.rend(); ++it)
      if (isViewOp(*it) && it->hasInput(0) && !it->outputs.empty()) takeOutputScale(*it);
    // - a MaxPool's (calibration ranges only the inputs of quantized layers: ResNet's stem
    //   output has none). Quantization is monotone, so max(q(x)) = q(max(x)): the int8 pool of
    //   its input quantized with that scale gives exactly the output quantized, clipping
    //   included.
    for (const auto& n : g_.nodes)
      if (n.domain.empty() && n.opType == "MaxPool" && n.hasInput(0) && !n.outputs.empty() &&
          (n.outputs.size() == 1 || n.outputs[1].empty()))
        takeOutputScale(n);
    policy_ = calib.layerPrecision;
  }
  ~GpuBuilder() {
    if (stream_) {
      edgeinfer::cuda::releaseStream(stream_);  // the timing runs set cuDNN handles to it
      cudaStreamDestroy(stream_);
    }
  }

  Status run() {
    EI_CUDA_CHECK(cudaSetDevice(cfg_.deviceId));
    EI_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    providers_ = edgeinfer::cuda::makeCudaProviders();
    for (const auto& in : g_.inputs) {
      const graph::Value& v = *g_.findValue(in);
      plan_.graphInputs[in] = newTensor(in, cuda::logicalFormat(v.dtype, v.shape));
    }
    if (preferred_) preparePreferred();
    std::string cpuLayers;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const graph::Node& n = g_.nodes[i];
      for (const auto& o : n.outputs) {
        const graph::Value* v = g_.findValue(o);
        if (o.empty() || !v || v->shape.isStatic()) continue;
        // Static inputs and an unknown output: its size depends on the values (NonZero,
        // NonMaxSuppression), which no input dims can fix.
        bool inputsStatic = true;
        for (const auto& in : n.inputs) {
          const graph::Value* iv = in.empty() ? nullptr : g_.findValue(in);
          inputsStatic = inputsStatic && (!iv || iv->shape.isStatic());
        }
        if (inputsStatic)
          return Status(ErrorCode::kUnsupported,
                        "GPU engines need static shapes, but the size of '" + o + "' (output of '" +
                            n.name + "', " + n.opType + ") depends on the input values (" +
                            v->shape.toString() +
                            "): allow the CPU fallback (it and the layers after it then run on "
                            "the CPU, the rest on the GPU) or build for the CPU backend");
        return Status(ErrorCode::kInvalidArgument,
                      "GPU engines need static shapes, but '" + o + "' (output of '" + n.name +
                          "', " + n.opType + ") is " + v->shape.toString() +
                          ": set the input dims (--shapes or --dynamic-dim)");
      }
      if (isViewOp(n) && n.hasInput(0) && !g_.isConstant(n.inputs[0])) {
        EI_RETURN_IF_ERROR(addView(i));
        continue;
      }
      EI_ASSIGN_OR_RETURN(bool onGpu, addTacticStep(i));
      if (!onGpu) cpuLayers += (cpuLayers.empty() ? "" : ", ") + n.name + " (" + n.opType + ")";
    }
    // A ".chain" tactic forced for a layer none of whose readers could run in it.
    if (!forcedChains_.empty()) {
      const size_t node = forcedChains_.begin()->first;
      const auto why = chainRefusals_.find(node);
      return Status(ErrorCode::kInvalidArgument,
                    "tactic '" + forcedChains_.begin()->second + "' forced for layer '" +
                        g_.nodes[node].name +
                        "': no layer reading its output can be chained into it" +
                        (why != chainRefusals_.end() ? " (" + why->second + ")" : ""));
    }
    for (const auto& out : g_.outputs) {
      const graph::Value& v = *g_.findValue(out);
      const TensorFormat want = cuda::logicalFormat(v.dtype, v.shape);
      int t;
      if (g_.isConstant(out)) {
        t = constantTensor(out, want);
      } else {
        EI_ASSIGN_OR_RETURN(t, ensureVersion(out, want));
      }
      plan_.graphOutputs[out] = t;
    }
    if (!cpuLayers.empty())
      log(Severity::kWarning,
          "layers without a GPU kernel run on the CPU (slower, and no CUDA "
          "graphs): " +
              cpuLayers);
    return Status::Ok();
  }

  /// The plan and, per step, the initialised tactic the builder chose (null for other steps),
  /// taken together: the engine reuses these tactics instead of recreating them by id.
  std::pair<ExecutionPlan, std::vector<std::unique_ptr<Tactic>>> takePlanAndTactics() {
    tactics_.resize(plan_.steps.size());
    return {std::move(plan_), std::move(tactics_)};
  }
  std::vector<std::unique_ptr<builder::TacticProvider>> takeProviders() {
    return std::move(providers_);
  }
  int timedLayers() const { return timed_; }
  /// Candidates timed, how many were cut short (TimingOptions::pruneFactor), and the seconds
  /// spent initialising them (weights, cuDNN plans) and timing them: where a cold build goes.
  std::string timingSummary() const {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "%d candidates timed (%d cut short): %.1f s initialising them, %.1f s timing",
                  candidatesTimed_, candidatesPruned_, initSeconds_, timingSeconds_);
    return buf;
  }
  /// Tactic states (cuDNN plans) recorded in the timing cache by this build.
  int statesAdded() const { return statesAdded_; }
  /// Runner-ups of another tactic family, per timed-choice layer (runtime/cuda_backend.h).
  std::vector<runtime::TacticAlternative> takeAlternatives() { return std::move(alternatives_); }
  int cachedLayers() const { return cached_; }
  /// Layers that took their preferred tactic (no timing), and layers with a preferred tactic
  /// that was no candidate for them or failed to initialise.
  int preferredTaken() const { return preferredTaken_; }
  /// Seconds spent asking the providers for candidates (cuDNN's heuristics) and preparing
  /// the preferred tactics (preparePreferred()).
  double candidateSeconds() const { return candidateSeconds_; }
  double preparedSeconds() const { return preparedSeconds_; }
  int preferredMissed() const { return preferredMissed_; }

 private:
  int newTensor(const std::string& value, TensorFormat fmt, bool constant = false,
                int aliasOf = -1) {
    PlanTensor t;
    t.value = value;
    t.format = cuda::canonicalFormat(fmt, g_.findValue(value)->shape);
    t.constant = constant;
    t.aliasOf = aliasOf;
    if (t.format.dtype == DataType::kInt8 && g_.findValue(value)->dtype != DataType::kInt8)
      t.scale = scaleOf(value);  // a quantized float value
    plan_.tensors.push_back(t);
    const int id = static_cast<int>(plan_.tensors.size()) - 1;
    if (!constant) versions_[value].push_back(id);
    return id;
  }

  /// How many node inputs read `value`.
  size_t readerCount(const std::string& value) const {
    size_t n = 0;
    for (const auto& m : g_.nodes)
      for (const auto& in : m.inputs) n += in == value ? 1 : 0;
    return n;
  }

  float scaleOf(const std::string& value) const {
    const auto it = scales_.find(value);
    return it == scales_.end() ? 0.f : it->second;
  }

  /// True when `value` has a scale and every node reading it is a convolution or a
  /// Gemm/MatMul built at INT8, reading it as its data input (or a fused op's residual Z):
  /// those readers' INT8 tactics (cuda-i8, cublaslt-i8) want it as int8. A MaxPool built at
  /// INT8 counts as one when its own output has such readers (its int8 tactic pools the int8
  /// values: ResNet's stem -> MaxPool -> convolution stays in int8), and so does a view
  /// (Flatten, Reshape, ...: the same bytes under another shape) whose output has them.
  bool int8Readers(const std::string& value) {
    if (const auto it = int8Readers_.find(value); it != int8Readers_.end()) return it->second;
    bool all = scaleOf(value) > 0.f && !g_.isGraphOutput(value), any = false;
    for (const auto& m : g_.nodes) {
      for (size_t k = 0; all && k < m.inputs.size(); ++k) {
        if (m.inputs[k] != value) continue;
        any = true;
        const bool ours = m.domain == graph::kEdgeInferDomain, onnx = m.domain.empty();
        const bool fused = ours && (m.opType == "FusedConv" || m.opType == "FusedGemm" ||
                                    m.opType == "FusedMatMul");
        const bool int8Op =
            fused || (onnx && (m.opType == "Conv" || m.opType == "Gemm" || m.opType == "MatMul"));
        // X, or a fused op's residual Z (both have int8 variants when they have a scale).
        // (4-D: the int8 pool runs in NHWC; cuda_provider.cpp, int8MaxPoolRuns)
        const graph::Value* pooled = g_.findValue(value);
        const bool int8Pool = onnx && m.opType == "MaxPool" && k == 0 && !m.outputs.empty() &&
                              (m.outputs.size() == 1 || m.outputs[1].empty()) && pooled &&
                              pooled->shape.rank() == 4 && precisionOf(m) == Precision::kInt8 &&
                              int8Readers(m.outputs[0]);
        const bool int8View =
            isViewOp(m) && k == 0 && !m.outputs.empty() && int8Readers(m.outputs[0]);
        all = int8Pool || int8View ||
              (int8Op && (k == 0 || (fused && k == 3)) && precisionOf(m) == Precision::kInt8);
      }
    }
    return int8Readers_[value] = all && any;
  }

  /// Whether every node that reads `value` is a view of it (addView wants a row-major version).
  bool readOnlyByViews(const std::string& value) const {
    bool any = false;
    for (const auto& m : g_.nodes)
      for (size_t k = 0; k < m.inputs.size(); ++k) {
        if (m.inputs[k] != value) continue;
        if (!isViewOp(m) || k != 0) return false;
        any = true;
      }
    return any;
  }

  /// Can a reformat turn `value` stored as `src` into `dst`? Float <-> int8 needs its scale.
  bool convertible(const std::string& value, DataType src, DataType dst) const {
    if (edgeinfer::cuda::canReformatTypes(src, dst)) return true;
    return edgeinfer::cuda::isQuantizeReformat(src, dst) && scaleOf(value) > 0.f &&
           g_.findValue(value)->dtype != DataType::kInt8;
  }

  int constantTensor(const std::string& value, TensorFormat fmt) {
    fmt = cuda::canonicalFormat(fmt, g_.findValue(value)->shape);
    const std::string key = value + "|" + cuda::formatName(fmt);
    const auto it = constants_.find(key);
    if (it != constants_.end()) return it->second;
    return constants_[key] = newTensor(value, fmt, /*constant=*/true);
  }

  int findVersion(const std::string& value, TensorFormat fmt) const {
    fmt = cuda::canonicalFormat(fmt, g_.findValue(value)->shape);
    const auto it = versions_.find(value);
    if (it == versions_.end()) return -1;
    for (int t : it->second)
      if (plan_.tensors[static_cast<size_t>(t)].format == fmt) return t;
    return -1;
  }

  /// Time (ms) of the cheapest reformat from an existing version of `value` into `fmt`, and
  /// that version; 0 when the value already exists in `fmt`, infinity when none converts.
  Expected<std::pair<double, int>> reformatCost(const std::string& value, TensorFormat fmt) {
    fmt = cuda::canonicalFormat(fmt, g_.findValue(value)->shape);
    if (int t = findVersion(value, fmt); t >= 0) return std::make_pair(0.0, t);
    double best = kInfinity;
    int from = -1;
    const auto it = versions_.find(value);
    if (it == versions_.end())
      return Status(ErrorCode::kInternal, "value '" + value + "' has no producer in the plan");
    for (int t : it->second) {
      const TensorFormat src = plan_.tensors[static_cast<size_t>(t)].format;
      if (!convertible(value, src.dtype, fmt.dtype)) continue;
      EI_ASSIGN_OR_RETURN(double ms, timeReformat(value, src, fmt));
      if (ms < best) best = ms, from = t;
    }
    return std::make_pair(best, from);
  }

  Expected<double> timeReformat(const std::string& value, TensorFormat src, TensorFormat dst) {
    const graph::Value& v = *g_.findValue(value);
    const std::string sig = "reformat|" + v.shape.toString() + "|" + cuda::formatName(src) + "->" +
                            cuda::formatName(dst);
    const auto timer = [&](const std::string&) -> Expected<double> {
      const int64_t count = v.shape.numel();
      DeviceBuffer a, b;
      EI_RETURN_IF_ERROR(a.allocTimingData(count, src.dtype, 1, stream_));
      EI_RETURN_IF_ERROR(
          b.allocZeroed(static_cast<size_t>(count) * dataTypeSize(dst.dtype), stream_));
      int64_t n = 1, c = 1, hw = count;
      if (v.shape.rank() == 4) n = v.shape[0], c = v.shape[1], hw = v.shape[2] * v.shape[3];
      return timeLaunches(
          [&] {
            return edgeinfer::cuda::launchReformat(a.get(), src.dtype, src.layout == Layout::kNHWC,
                                                   b.get(), dst.dtype, dst.layout == Layout::kNHWC,
                                                   n, c, hw, stream_, scaleOf(value));
          },
          cfg_.timing, stream_);
    };
    EI_ASSIGN_OR_RETURN(
        builder::TimingEntry e,
        cache_.lookupOrTime(sig, {builder::TacticCandidate("cuda.reformat")}, timer));
    if (e.table.empty() || e.table[0].failed)
      return Status(ErrorCode::kUnsupported, "reformat " + sig + " failed");
    return e.table[0].medianMs;
  }

  /// The plan tensor holding `value` in `fmt`, adding a reformat step when needed.
  Expected<int> ensureVersion(const std::string& value, TensorFormat fmt) {
    EI_ASSIGN_OR_RETURN(auto cost, reformatCost(value, fmt));
    if (cost.first == 0.0 && findVersion(value, fmt) >= 0) return cost.second;
    if (cost.second < 0)
      return Status(ErrorCode::kUnsupported,
                    "no reformat turns '" + value + "' into " + cuda::formatName(fmt));
    const int out = newTensor(value, fmt);
    PlanStep s;
    s.kind = StepKind::kReformat;
    s.inputs = {cost.second};
    s.outputs = {out};
    s.timeMs = cost.first;
    plan_.steps.push_back(std::move(s));
    return out;
  }

  Status addView(size_t i) {
    const graph::Node& n = g_.nodes[i];
    const std::string& src = n.inputs[0];
    // Any row-major version will do (of any storage type); prefer one that exists.
    int in = -1;
    for (int t : versions_[src]) {
      const PlanTensor& pt = plan_.tensors[static_cast<size_t>(t)];
      if (pt.format.layout != Layout::kNHWC) {
        in = t;
        break;
      }
    }
    if (in < 0) {
      const TensorFormat have = plan_.tensors[static_cast<size_t>(versions_[src].front())].format;
      EI_ASSIGN_OR_RETURN(in, ensureVersion(src, {have.dtype, Layout::kLinear}));
    }
    PlanStep s;
    s.kind = StepKind::kView;
    s.node = static_cast<int>(i);
    s.inputs.assign(n.inputs.size(), -1);
    s.inputs[0] = in;
    const DataType storage = plan_.tensors[static_cast<size_t>(in)].format.dtype;
    s.outputs = {newTensor(n.outputs[0], {storage, Layout::kLinear}, false, in)};
    plan_.tensors.back().scale = plan_.tensors[static_cast<size_t>(in)].scale;  // same bits
    plan_.steps.push_back(std::move(s));
    return Status::Ok();
  }

  /// The config's per-layer override, else (INT8 builds) the calibration cache's policy for
  /// the layer (fp16 for the layers it keeps out of INT8), else the config's precision.
  Precision precisionOf(const graph::Node& n) const {
    const auto it = cfg_.layerPrecision.find(n.name);
    if (it != cfg_.layerPrecision.end()) return it->second;
    if (cfg_.precision == Precision::kInt8)
      if (const auto p = policy_.find(n.name); p != policy_.end()) return p->second;
    return cfg_.precision;
  }

  /// Runs prepare() of `tactics` on cfg_.timing.prepareThreads threads (the host part of
  /// initialising them, cuDNN plan finalization above all, which is most of a cold build).
  void prepareAll(const std::vector<Tactic*>& tactics, const builder::LayerContext& layer) {
    std::vector<std::pair<Tactic*, const builder::LayerContext*>> work;
    for (Tactic* t : tactics) work.emplace_back(t, &layer);
    prepareAll(work);
  }
  /// Same, each tactic for its own layer.
  void prepareAll(const std::vector<std::pair<Tactic*, const builder::LayerContext*>>& tactics) {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
    const int asked = cfg_.timing.prepareThreads;
    const size_t threads = std::min<size_t>(
        tactics.size(), asked > 0 ? static_cast<size_t>(asked) : std::min(8u, cores));
    std::atomic<size_t> next{0};
    int device = 0;
    const bool haveDevice = cudaGetDevice(&device) == cudaSuccess;
    const auto work = [&] {
      if (haveDevice) cudaSetDevice(device);  // (a new thread starts on device 0)
      for (size_t k = next++; k < tactics.size(); k = next++)
        tactics[k].first->prepare(*tactics[k].second);
    };
    std::vector<std::thread> pool;
    for (size_t t = 1; t < threads; ++t) {
      try {
        pool.emplace_back(work);
      } catch (const std::system_error&) {  // no more threads: the others do the work
        break;
      }
    }
    work();
    for (auto& t : pool) t.join();
    initSeconds_ += std::chrono::duration<double>(Clock::now() - t0).count();
  }

  /// Times one candidate: initialises it (weights to the device), then launches it on scratch
  /// inputs of pseudo-random values (timing_data.h; constants it reads as inputs: their real
  /// values).
  Expected<double> timeTactic(Tactic& t, const builder::LayerContext& layer, double pruneAboveMs) {
    using Clock = std::chrono::steady_clock;
    const auto t0 = Clock::now();
    const Status init = t.initialize(layer);
    const auto t1 = Clock::now();
    initSeconds_ += std::chrono::duration<double>(t1 - t0).count();
    EI_RETURN_IF_ERROR(init);
    const graph::Node& n = *layer.node;
    std::vector<DeviceBuffer> bufs;
    bufs.reserve(n.inputs.size() + layer.outputShapes.size() + 1);
    builder::LaunchArgs args;
    args.stream = stream_;
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      args.inputs.push_back(nullptr);
      if (!n.hasInput(k) || t.consumesInput(k)) continue;
      const TensorFormat f = t.inputFormat(k);
      bufs.emplace_back();
      // (A folded residual's tactic reads the folded layer's input at input 3.)
      const int64_t count = k == 3 && layer.foldedZ ? layer.foldedZ->inputShapes[0].numel()
                                                    : layer.inputShapes[k].numel();
      const Tensor* c = g_.constant(n.inputs[k]);
      if (c) {  // its real values, copied in stream order (pageable: staged before return)
        EI_RETURN_IF_ERROR(
            bufs.back().allocZeroed(static_cast<size_t>(count) * dataTypeSize(f.dtype), stream_));
        EI_ASSIGN_OR_RETURN(auto host, cuda::toStorageFormat(*c, f));
        EI_CUDA_CHECK(cudaMemcpyAsync(bufs.back().get(), host.data(), host.size(),
                                      cudaMemcpyHostToDevice, stream_));
      } else {  // activations: values like real ones, not zeros (timing_data.h)
        EI_RETURN_IF_ERROR(
            bufs.back().allocTimingData(count, f.dtype, static_cast<uint32_t>(k + 1), stream_));
      }
      args.inputs.back() = bufs.back().get();
    }
    // (A chained layer's output is the layer's last: LayerContext::chained.)
    for (size_t k = 0; k < layer.outputShapes.size(); ++k) {
      bufs.emplace_back();
      EI_RETURN_IF_ERROR(
          bufs.back().allocZeroed(static_cast<size_t>(layer.outputShapes[k].numel()) *
                                      dataTypeSize(t.outputFormat(k).dtype),
                                  stream_));
      args.outputs.push_back(bufs.back().get());
    }
    if (t.workspaceBytes() > 0) {
      bufs.emplace_back();
      EI_RETURN_IF_ERROR(bufs.back().allocZeroed(t.workspaceBytes(), stream_));
      args.workspace = bufs.back().get();
      args.workspaceBytes = t.workspaceBytes();
    }
    auto ms = timeLaunches([&] { return t.enqueue(args); }, cfg_.timing, stream_, pruneAboveMs);
    timingSeconds_ += std::chrono::duration<double>(Clock::now() - t1).count();
    ++candidatesTimed_;
    if (ms.ok() && *ms > pruneAboveMs) ++candidatesPruned_;
    return ms;
  }

  /// Adds the step of node i: the cheapest GPU tactic (true), or a CPU-fallback step (false).
  /// The layer of node i as its tactics see it at `precision` (INT8: with its scales).
  builder::LayerContext layerContext(size_t i, Precision precision) {
    const graph::Node& n = g_.nodes[i];
    builder::LayerContext layer = cuda::makeLayerContext(g_, i);
    if (precision == Precision::kInt8) {  // the scales the INT8 tactics quantize with
      layer.int8BitExact = cfg_.int8BitExact;
      for (const auto& in : n.inputs) layer.inputScales.push_back(in.empty() ? 0.f : scaleOf(in));
      // An INT8 layer writes int8 only for INT8 layers that read it as int8. Any other
      // reader (a float layer, data movement towards a graph output, the graph output itself)
      // would get values rounded to the int8 grid for nothing: BlazeFace's box regressors,
      // requantized, moved their boxes by steps of their whole range / 127.
      for (const auto& out : n.outputs)
        layer.outputScales.push_back(int8Readers(out) ? scaleOf(out) : 0.f);
    }
    return layer;
  }

  /// Node i's candidates at `precision` (INT8: and FP16, unless strict and INT8 has some).
  std::vector<std::unique_ptr<Tactic>> candidatesOf(const builder::LayerContext& layer,
                                                    Precision precision) {
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::unique_ptr<Tactic>> cands =
        edgeinfer::cuda::allCandidates(providers_, layer, precision);
    if (precision == Precision::kInt8) {
      // INT8 allows FP16 (as in TensorRT): the INT8 tactics compete with every FP16 and FP32
      // one, reformats (quantize / dequantize) included, and the fastest wins.
      if (cands.empty() || !cfg_.strictPrecision)
        for (auto& c : edgeinfer::cuda::allCandidates(providers_, layer, Precision::kFp16))
          cands.push_back(std::move(c));
    }
    keepWideValuesInFloat32(layer, cands);
    candidateSeconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return cands;
  }

  /// A float value cast from int32 / int64 (MatMulInteger's and ConvInteger's accumulators, on
  /// their way to being scaled): FP16 would turn values above 65504 into infinity.
  bool wideFromIntegers(const std::string& value) const {
    if (value.empty()) return false;
    const auto p = producers_.find(value);
    if (p == producers_.end()) return false;
    const graph::Node& n = g_.nodes[p->second];
    if (!n.domain.empty() || (n.opType != "Cast" && n.opType != "CastLike") || !n.hasInput(0))
      return false;
    const graph::Value* in = g_.findValue(n.inputs[0]);
    const graph::Value* out = g_.findValue(value);
    return in && out && (in->dtype == DataType::kInt32 || in->dtype == DataType::kInt64) &&
           isFloatingPoint(out->dtype);
  }

  /// Keeps float32 for such values: a cast from int32 / int64 writes float32 and its readers
  /// read float32 (they may write FP16: a scaled result fits). Candidates that would store one
  /// in FP16 are dropped, unless that would leave none.
  void keepWideValuesInFloat32(const builder::LayerContext& layer,
                               std::vector<std::unique_ptr<Tactic>>& cands) const {
    const graph::Node& n = *layer.node;
    std::vector<size_t> wideIn, wideOut;
    for (size_t k = 0; k < n.inputs.size(); ++k)
      if (wideFromIntegers(n.inputs[k])) wideIn.push_back(k);
    for (size_t k = 0; k < n.outputs.size(); ++k)
      if (wideFromIntegers(n.outputs[k])) wideOut.push_back(k);
    if (wideIn.empty() && wideOut.empty()) return;
    const auto narrow = [&](const std::unique_ptr<Tactic>& t) {
      for (size_t k : wideIn)
        if (!t->consumesInput(k) && t->inputFormat(k).dtype == DataType::kFloat16) return true;
      for (size_t k : wideOut)
        if (t->outputFormat(k).dtype == DataType::kFloat16) return true;
      return false;
    };
    if (std::all_of(cands.begin(), cands.end(), narrow)) return;
    cands.erase(std::remove_if(cands.begin(), cands.end(), narrow), cands.end());
  }

  /// Whether node i is a layer with a tactic (not a view, not a data-dependent shape).
  bool isTacticLayer(size_t i) const {
    const graph::Node& n = g_.nodes[i];
    if (isViewOp(n) && n.hasInput(0) && !g_.isConstant(n.inputs[0])) return false;
    for (const auto& o : n.outputs) {
      const graph::Value* v = g_.findValue(o);
      if (!o.empty() && (!v || !v->shape.isStatic())) return false;
    }
    return true;
  }

  /// Preferred tactics (a specialisation of an engine with shape ranges): the preferred
  /// candidate of every layer the timing cache has no entry for, created and prepared (cuDNN
  /// plans finalized) on the prepare threads at once, before the layers are built one by one.
  /// A specialisation would otherwise compile one plan after another (ResNet-50: about 7 s).
  void preparePreferred() {
    std::vector<std::pair<Tactic*, const builder::LayerContext*>> work;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const auto it = preferred_->find(g_.nodes[i].name);
      if (it == preferred_->end() || !isTacticLayer(i)) continue;
      const Precision precision = precisionOf(g_.nodes[i]);
      preparedLayers_.push_back(layerContext(i, precision));
      const builder::LayerContext& layer = preparedLayers_.back();
      std::vector<std::unique_ptr<Tactic>> cands = candidatesOf(layer, precision);
      // A choice the timing cache has for these shapes wins: nothing to prepare.
      if (!cache_.findFor(layer.signature(precision), candidateList(cands)))
        for (auto& c : cands)
          if (c->id() == it->second) work.emplace_back(c.get(), &layer);
      prepared_[i] = std::move(cands);  // addTacticStep takes them: no second query
    }
    if (!work.empty()) prepareAll(work);
    preparedSeconds_ = initSeconds_;
  }

  static std::vector<builder::TacticCandidate> candidateList(
      const std::vector<std::unique_ptr<Tactic>>& cands) {
    std::vector<builder::TacticCandidate> list;
    std::set<std::string> seen;
    for (const auto& c : cands)
      if (seen.insert(c->id()).second)
        list.emplace_back(c->id(), static_cast<int64_t>(c->workspaceBytes()));
    return list;
  }

  /// The first (in the providers' order: cuDNN's heuristic ranking) kClosest candidates of
  /// `list` whose ids share the most leading '.'-separated parts with `id`: the same cuDNN
  /// engine with other knobs where the list has one ("cudnn.conv.fp16.nhwc.e4." shared), else
  /// the same provider, precision and layout ("cudnn.conv.fp16.nhwc."), and so on; all of
  /// `list` when no candidate shares three parts.
  static std::vector<builder::TacticCandidate> closestTo(
      const std::vector<builder::TacticCandidate>& list, const std::string& id) {
    const auto parts = [](const std::string& s) {
      std::vector<std::string> v;
      size_t start = 0;
      for (size_t dot = s.find('.'); dot != std::string::npos; dot = s.find('.', start)) {
        v.push_back(s.substr(start, dot - start));
        start = dot + 1;
      }
      v.push_back(s.substr(start));
      return v;
    };
    const std::vector<std::string> want = parts(id);
    std::vector<size_t> shared;
    size_t best = 0;
    for (const auto& c : list) {
      const std::vector<std::string> p = parts(c.id);
      size_t k = 0;
      while (k < p.size() && k < want.size() && p[k] == want[k]) ++k;
      shared.push_back(k);
      best = std::max(best, k);
    }
    if (best < 3) return list;
    std::vector<builder::TacticCandidate> out;
    constexpr size_t kClosest = 4;
    for (size_t i = 0; i < list.size() && out.size() < kClosest; ++i)
      if (shared[i] == best) out.push_back(list[i]);
    return out;
  }

  Expected<bool> addTacticStep(size_t i) {
    const graph::Node& n = g_.nodes[i];
    const Precision precision = precisionOf(n);
    builder::LayerContext layer = layerContext(i, precision);
    std::vector<std::unique_ptr<Tactic>> cands;
    if (const auto p = prepared_.find(i); p != prepared_.end()) {
      cands = std::move(p->second);  // preparePreferred()'s, the preferred one prepared
      prepared_.erase(p);
    } else {
      cands = candidatesOf(layer, precision);
    }
    if (cands.empty()) {
      if (!cfg_.allowCpuFallback)
        return Status(ErrorCode::kUnsupported,
                      "layer '" + n.name + "' (" + n.opType + ") has no GPU implementation for " +
                          "these shapes and types, and CPU fallback is off");
      EI_RETURN_IF_ERROR(addCpuStep(i));
      return false;
    }
    std::map<std::string, Tactic*> byId;
    std::vector<builder::TacticCandidate> list;
    for (auto& c : cands) {
      if (byId.count(c->id())) continue;  // one provider offering an id twice: keep the first
      byId[c->id()] = c.get();
      list.emplace_back(c->id(), static_cast<int64_t>(c->workspaceBytes()));
    }
    std::set<std::string> initialized;
    const std::string sig = layer.signature(precision);
    bool fromCache = false;
    builder::TimingEntry entry;
    const std::string* forced = overrides_.find(n.name);
    // A forced ".chain" tactic is no candidate of the layer alone: the layer runs its plain
    // form until the layer reading it chains into it (tryChain).
    std::string forcedPlain;
    if (forced && cuda::isChainTactic(*forced)) {
      forcedChains_[i] = *forced;
      forcedPlain = forced->substr(0, forced->size() - (sizeof(cuda::kChainTacticSuffix) - 1));
      forced = &forcedPlain;
    }
    // A preferred tactic (the opt build's, when an engine with shape ranges specialises) is
    // taken without timing when the timing cache has no entry for these shapes (a choice
    // timed for them wins) and it is a candidate for them and initialises; otherwise the layer
    // is chosen as in any build.
    const std::string* preferred = nullptr;
    const std::string* preferredMissed = nullptr;
    if (!forced && preferred_ && !cache_.findFor(sig, list)) {
      const auto it = preferred_->find(n.name);
      if (it != preferred_->end()) {
        const auto c = byId.find(it->second);
        Status st = c == byId.end() ? Status(ErrorCode::kNotFound, "not a candidate")
                                    : c->second->initialize(layer);
        if (st.ok()) {
          preferred = &it->second;
          initialized.insert(it->second);
          ++preferredTaken_;
        } else {
          ++preferredMissed_;
          preferredMissed = &it->second;
          log(Severity::kVerbose, "layer '" + n.name + "': tactic '" + it->second +
                                      "' of the opt shapes not taken (" + st.message() + ")");
        }
      }
    }
    // A forced ".fold" tactic is no candidate of the layer alone: tryFold below offers it.
    const bool forcedFold = forced && forced->find(".fold") != std::string::npos;
    if (forced) {
      if (!byId.count(*forced) && !forcedFold) {
        std::string all;
        for (const auto& c : list) all += (all.empty() ? "" : ", ") + c.id;
        return Status(ErrorCode::kInvalidArgument, "tactic '" + *forced + "' forced for layer '" +
                                                       n.name + "' is not a candidate for it " +
                                                       "(candidates: " + all + ")");
      }
    } else if (!preferred) {
      // A specialisation whose preferred tactic is no candidate for these shapes times only
      // the candidates closest to it (the same engine with other knobs), in a scratch cache:
      // a first run waits for a few of them, not for every candidate, and the device's cache
      // keeps only complete tables.
      builder::TimingCache scratch(cache_.deviceKey());
      const bool closest = preferredMissed != nullptr;
      std::vector<builder::TacticCandidate> timedList = list;
      if (closest) {
        timedList = closestTo(list, *preferredMissed);
        log(Severity::kVerbose,
            "layer '" + n.name + "': timing the " + std::to_string(timedList.size()) + " of " +
                std::to_string(list.size()) + " candidates closest to the opt shapes' tactic");
      }
      // Candidates far slower than the fastest so far are cut short (TimingOptions).
      double fastest = kInfinity;
      bool prepared = false;
      const auto timer = [&](const std::string& id) -> Expected<double> {
        if (!prepared) {  // timing is needed (no usable cache entry): prepare them all at once
          std::vector<Tactic*> all;
          for (const auto& c : timedList) all.push_back(byId.at(c.id));
          prepareAll(all, layer);
          prepared = true;
        }
        initialized.insert(id);
        const double f = cfg_.timing.pruneFactor;
        const double bound =
            f > 0.0 && std::isfinite(fastest) ? std::max(f * fastest, 0.05) : kInfinity;
        auto ms = timeTactic(*byId.at(id), layer, bound);
        if (ms.ok()) fastest = std::min(fastest, *ms);
        return ms;
      };
      auto e = (closest ? scratch : cache_).lookupOrTime(sig, timedList, timer, &fromCache);
      if (!e.ok() && closest && timedList.size() < list.size()) {
        // None of the closest ran at these shapes: every candidate, as in any build.
        log(Severity::kVerbose, "layer '" + n.name +
                                    "': no candidate close to the opt shapes' "
                                    "tactic ran (" +
                                    e.status().message() + "); timing all");
        timedList = list;
        prepared = false;
        e = cache_.lookupOrTime(sig, timedList, timer, &fromCache);
      }
      if (!e.ok()) return e.status().withContext("layer '" + n.name + "' (" + n.opType + ")");
      entry = std::move(*e);
      (fromCache ? cached_ : timed_) += 1;
    }

    // The cheapest candidate once the reformats of its inputs (and of outputs it writes in a
    // format they will not stay in) are paid for.
    std::string best;
    double bestCost = kInfinity, bestTime = 0.0;
    const auto reformatTotal = [&](Tactic& t) -> Expected<double> {
      double sum = 0.0;
      for (size_t k = 0; k < n.inputs.size(); ++k) {
        if (!n.hasInput(k) || t.consumesInput(k) || g_.isConstant(n.inputs[k])) continue;
        EI_ASSIGN_OR_RETURN(auto c, reformatCost(n.inputs[k], t.inputFormat(k)));
        sum += c.first;
      }
      // Strict INT8: an output every reader of which is an INT8 layer will be wanted as int8
      // (NHWC for a convolution; the readers must take an INT8 tactic); a candidate writing another
      // format is charged the quantize reformat now, or layers would keep choosing a slightly
      // faster FP16 output that the next one requantizes. Not in a timed build: there the readers
      // may well choose FP16, and the charge made a 1x1 layer of ResNet-50 take INT8 that its
      // reader then dequantized (batch 64: 4 % slower than FP16).
      const bool chargeQuantize = precision == Precision::kInt8 && cfg_.strictPrecision;
      for (size_t k = 0; chargeQuantize && k < n.outputs.size(); ++k) {
        const graph::Value* v = g_.findValue(n.outputs[k]);
        if (!v || !int8Readers(n.outputs[k])) continue;
        // Views (a Flatten before a classifier) read row-major versions.
        const TensorFormat want{DataType::kInt8,
                                readOnlyByViews(n.outputs[k]) ? Layout::kLinear : Layout::kNHWC};
        const TensorFormat have = cuda::canonicalFormat(t.outputFormat(k), v->shape);
        if (have == cuda::canonicalFormat(want, v->shape)) continue;
        if (!convertible(n.outputs[k], have.dtype, want.dtype)) continue;
        EI_ASSIGN_OR_RETURN(double ms, timeReformat(n.outputs[k], have, want));
        sum += ms;
      }
      // A graph output is handed over in its logical format (its own type, row-major): a
      // candidate writing another one pays the reformat after it (at batch 1 a classifier writing
      // fp16 won its timing by less than the 1.2 us conversion to float32 that followed it).
      for (size_t k = 0; k < n.outputs.size(); ++k) {
        if (n.outputs[k].empty() || !g_.isGraphOutput(n.outputs[k])) continue;
        const graph::Value* v = g_.findValue(n.outputs[k]);
        if (!v || !v->shape.isStatic()) continue;
        const TensorFormat want =
            cuda::canonicalFormat(cuda::logicalFormat(v->dtype, v->shape), v->shape);
        const TensorFormat have = cuda::canonicalFormat(t.outputFormat(k), v->shape);
        if (have == want || !convertible(n.outputs[k], have.dtype, want.dtype)) continue;
        EI_ASSIGN_OR_RETURN(double ms, timeReformat(n.outputs[k], have, want));
        sum += ms;
      }
      return sum;
    };
    if (forced) {
      best = *forced;
      log(Severity::kInfo, "layer '" + n.name + "': tactic '" + best + "' forced");
    } else if (preferred) {
      best = *preferred;
    } else {
      std::vector<std::pair<std::string, double>> costs;
      for (const auto& tt : entry.table) {
        if (tt.failed || !byId.count(tt.tacticId)) continue;
        EI_ASSIGN_OR_RETURN(double r, reformatTotal(*byId.at(tt.tacticId)));
        const double cost = tt.medianMs + r;
        costs.emplace_back(tt.tacticId, cost);
        if (cost < bestCost || (cost == bestCost && tt.tacticId < best))
          best = tt.tacticId, bestCost = cost, bestTime = tt.medianMs;
      }
      if (best.empty() || !std::isfinite(bestCost))
        return Status(ErrorCode::kUnsupported,
                      "layer '" + n.name + "' (" + n.opType + "): every GPU candidate failed");
      // For the whole-engine trial (builder.cpp, tryRunnerUpsInEngine): the cheapest candidate
      // of another family (the id up to its first '.': cuda-i8, cublaslt-i8, cudnn...), and the
      // cheapest of another kernel of the same family (up to its second '.': cuda-i8.tmard128x
      // 128k128 against cuda-i8.tmard128x256k128). Kernels of one provider timed within noise
      // of each other alone differed in the engine: ResNet-50's layer3 3x3 layers at batch 64,
      // 0.0181 against 0.0184 ms alone, moved the engine by 0.03 ms (docs/performance.md).
      const auto family = [](const std::string& id) { return id.substr(0, id.find('.')); };
      const auto kernel = [](const std::string& id) {
        const size_t dot = id.find('.');
        return id.substr(0, dot == std::string::npos ? dot : id.find('.', dot + 1));
      };
      runtime::TacticAlternative alt{n.name, sig, best, "", bestCost, kInfinity};
      runtime::TacticAlternative sibling = alt;
      for (const auto& [id, cost] : costs) {
        runtime::TacticAlternative* a = family(id) != family(best)   ? &alt
                                        : kernel(id) != kernel(best) ? &sibling
                                                                     : nullptr;
        if (a && (cost < a->alternativeMs || (cost == a->alternativeMs && id < a->alternative)))
          a->alternative = id, a->alternativeMs = cost;
      }
      for (auto* a : {&alt, &sibling})
        if (!a->alternative.empty() && std::isfinite(a->alternativeMs))
          alternatives_.push_back(std::move(*a));
      if (getLogLevel() >= Severity::kVerbose)
        log(Severity::kVerbose,
            builder::formatTimingTable(entry, "layer '" + n.name + "' [" + sig + "] " +
                                                  (fromCache ? "(from cache)" : "(timed)")) +
                "  chosen: " + best + " (" + std::to_string(bestCost) +
                " ms with input reformats)");
    }

    // A residual whose producer folds into this layer (tryFold): that tactic, timed and
    // initialised, replaces the choice, and the producer's step becomes a view.
    std::unique_ptr<Tactic> chosen;
    if ((!forced || forcedFold) && !preferred && !preferred_) {
      EI_ASSIGN_OR_RETURN(Fold fold, tryFold(i, layer, bestCost, forcedFold ? forced : nullptr));
      if (forcedFold && !fold.tactic)
        return Status(ErrorCode::kInvalidArgument,
                      "tactic '" + *forced + "' forced for layer '" + n.name +
                          "': its residual's producer cannot be folded into it (a 1x1 INT8 "
                          "convolution read by this layer alone, both on pointwise kernels)");
      if (fold.tactic) {
        best = fold.tactic->id();
        bestTime = fold.ms;
        layer = std::move(fold.layer);
        chosen = std::move(fold.tactic);
        initialized.insert(best);
      }
    }

    // A 1x1 layer reading a pointwise layer's output may run inside that layer's kernel
    // (tryChain): the producer's step then writes this layer's output, and it gets no step.
    if (!chosen && !preferred && !preferred_) {
      EI_ASSIGN_OR_RETURN(const bool chainedIn, tryChain(i, layer, bestCost, forced != nullptr));
      if (chainedIn) return true;
    }

    // Materialise: inputs in the chosen tactic's formats, then the step. A tactic whose
    // state the cache kept (a cuDNN plan's JSON) is restored from it: no kernel compilation,
    // and the engine is bit-identical to the one built when the state was recorded.
    std::string cachedState;
    if (const auto st = entry.states.find(best); !forced && st != entry.states.end())
      cachedState = st->second;
    if (!chosen && !cachedState.empty() && !initialized.count(best)) {
      auto restored = edgeinfer::cuda::findTactic(providers_, layer, precision, best, cachedState);
      if (restored.ok()) chosen = std::move(*restored);
    }
    for (auto& c : cands)
      if (!chosen && c && c->id() == best) chosen = std::move(c);
    cands.clear();  // frees the other candidates' weights
    if (!initialized.count(best))
      EI_RETURN_IF_ERROR(
          chosen->initialize(layer).withContext("layer '" + n.name + "' tactic " + best));
    if (!forced && !preferred) {
      std::string state = chosen->serializedState();
      if (!state.empty() && state != cachedState && cache_.setState(sig, best, std::move(state)))
        ++statesAdded_;
    }
    PlanStep s;
    s.kind = StepKind::kTactic;
    s.node = static_cast<int>(i);
    s.tactic = best;
    s.precision = precision;
    if (precision == Precision::kInt8) {
      // Recorded as kInt8 only when the tactic reads or writes quantized tensors, or quantizes
      // inside (cuda-i8.gemv on float tensors): a load asks the providers at this precision,
      // and the FP16/FP32 tactics are offered at kFp16.
      bool quantized = chosen->quantizesInternally();
      const auto isQ = [&](const std::string& v, TensorFormat f) {
        return f.dtype == DataType::kInt8 && g_.findValue(v)->dtype != DataType::kInt8;
      };
      for (size_t k = 0; k < n.inputs.size(); ++k)
        quantized = quantized || (n.hasInput(k) && !chosen->consumesInput(k) &&
                                  isQ(n.inputs[k], chosen->inputFormat(k)));
      for (size_t k = 0; k < n.outputs.size(); ++k)
        quantized = quantized || isQ(n.outputs[k], chosen->outputFormat(k));
      s.precision = quantized ? Precision::kInt8 : Precision::kFp16;
    }
    s.timeMs = bestTime;
    s.inputs.assign(n.inputs.size(), -1);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (!n.hasInput(k) || chosen->consumesInput(k)) continue;
      if (g_.isConstant(n.inputs[k])) {
        s.inputs[k] = constantTensor(n.inputs[k], chosen->inputFormat(k));
      } else {
        EI_ASSIGN_OR_RETURN(s.inputs[k], ensureVersion(n.inputs[k], chosen->inputFormat(k)));
      }
    }
    for (size_t k = 0; k < n.outputs.size(); ++k)
      s.outputs.push_back(newTensor(n.outputs[k], chosen->outputFormat(k)));
    plan_.steps.push_back(std::move(s));
    tactics_.resize(plan_.steps.size());
    tactics_.back() = std::move(chosen);
    return true;
  }

  /// A folded residual (LayerContext::foldedZ): the tactic, the layer as it sees it, its time.
  struct Fold {
    std::unique_ptr<Tactic> tactic;
    builder::LayerContext layer;
    double ms = 0.0;
  };

  /// ResNet's downsample branch: a FusedConv (node i) whose residual Z is the int8 output of a
  /// 1x1 INT8 convolution that nothing else reads may compute Z itself, from that layer's
  /// input (cuda-i8's ".fold" tactics): Z is then never written or read. The folded tactics are
  /// timed like any candidate (the timing cache keys them by both layers) and one is taken when
  /// it beats this layer's choice (`bestCost`) plus the producer's step; that step then becomes
  /// a view whose output aliases its input, which the folded tactic reads at input 3.
  /// EDGEINFER_DISABLE_FOLD=1 turns this off (to measure without). No tactic: nothing folded.
  /// `forcedId`: that tactic, untimed (an override), or nothing.
  Expected<Fold> tryFold(size_t i, const builder::LayerContext& layer, double bestCost,
                         const std::string* forcedId) {
    Fold none;
    const char* off = std::getenv("EDGEINFER_DISABLE_FOLD");
    if (!forcedId && off && *off && std::string(off) != "0") return none;
    const graph::Node& n = g_.nodes[i];
    if (n.domain != graph::kEdgeInferDomain || n.opType != "FusedConv" || !n.hasInput(3) ||
        precisionOf(n) != Precision::kInt8)
      return none;
    const std::string& z = n.inputs[3];
    const auto prod = producers_.find(z);
    if (prod == producers_.end() || g_.isConstant(z) || g_.isGraphOutput(z) ||
        readerCount(z) != 1 || versions_[z].size() != 1)
      return none;
    const graph::Node& dn = g_.nodes[prod->second];
    if (overrides_.find(dn.name)) return none;  // a forced tactic stays
    int sd = -1;
    for (size_t k = plan_.steps.size(); k-- > 0;)
      if (plan_.steps[k].node == static_cast<int>(prod->second)) {
        sd = static_cast<int>(k);
        break;
      }
    if (sd < 0) return none;
    const PlanStep& ds = plan_.steps[static_cast<size_t>(sd)];
    if (ds.kind != StepKind::kTactic || ds.outputs.size() != 1 || ds.inputs.empty() ||
        ds.inputs[0] < 0)
      return none;
    const PlanTensor& zt = plan_.tensors[static_cast<size_t>(ds.outputs[0])];
    const PlanTensor& xt = plan_.tensors[static_cast<size_t>(ds.inputs[0])];
    const TensorFormat int8Nhwc{DataType::kInt8, Layout::kNHWC};
    if (!cuda::isQuantized(zt) || zt.format != int8Nhwc || !cuda::isQuantized(xt) ||
        xt.format != int8Nhwc)
      return none;
    builder::TacticProvider* i8 = nullptr;
    for (auto& p : providers_)
      if (p->name() == "cuda-i8") i8 = p.get();
    if (!i8) return none;

    Fold f;
    f.layer = layer;
    f.layer.foldedZ =
        std::make_shared<builder::LayerContext>(layerContext(prod->second, Precision::kInt8));
    auto cands = i8->candidates(f.layer, Precision::kInt8);
    if (cands.empty()) return none;
    std::map<std::string, Tactic*> byId;
    std::vector<builder::TacticCandidate> list;
    for (auto& c : cands) {
      byId[c->id()] = c.get();
      list.emplace_back(c->id(), static_cast<int64_t>(c->workspaceBytes()));
    }
    std::set<std::string> initialized;
    if (forcedId) {
      const auto it = byId.find(*forcedId);
      if (it == byId.end()) return none;
      for (auto& c : cands)
        if (c && c->id() == *forcedId) f.tactic = std::move(c);
      EI_RETURN_IF_ERROR(
          f.tactic->initialize(f.layer).withContext("layer '" + n.name + "' tactic " + *forcedId));
      foldStep(sd, n, dn, *forcedId);
      return f;
    }
    const auto timer = [&](const std::string& id) -> Expected<double> {
      initialized.insert(id);
      return timeTactic(*byId.at(id), f.layer, kInfinity);
    };
    bool fromCache = false;
    const std::string sig = f.layer.signature(Precision::kInt8);
    auto e = cache_.lookupOrTime(sig, list, timer, &fromCache);
    if (!e.ok()) {  // none ran: the layer's own choice stands
      log(Severity::kVerbose,
          "layer '" + n.name + "': folding '" + dn.name + "' into it: " + e.status().message());
      return none;
    }
    (fromCache ? cached_ : timed_) += 1;
    std::string best;
    double bestMs = kInfinity;
    for (const auto& t : e->table)
      if (!t.failed && byId.count(t.tacticId) && t.medianMs < bestMs)
        best = t.tacticId, bestMs = t.medianMs;
    if (best.empty()) return none;
    // Its input 0 may need a reformat the layer's own choice did not (the cost it was charged).
    EI_ASSIGN_OR_RETURN(auto r, reformatCost(n.inputs[0], byId.at(best)->inputFormat(0)));
    const double unfolded = bestCost + ds.timeMs;
    log(Severity::kVerbose, "layer '" + n.name + "': " + best + " folding '" + dn.name + "' " +
                                std::to_string(bestMs + r.first) + " ms against " +
                                std::to_string(unfolded) + " ms unfolded" +
                                (fromCache ? " (from cache)" : ""));
    if (!(bestMs + r.first < unfolded)) return none;
    for (auto& c : cands)
      if (c && c->id() == best) f.tactic = std::move(c);
    if (!initialized.count(best))
      EI_RETURN_IF_ERROR(
          f.tactic->initialize(f.layer).withContext("layer '" + n.name + "' tactic " + best));
    f.ms = bestMs;
    foldStep(sd, n, dn, best);
    return f;
  }

  /// The producer's step `sd` becomes a view of its input: its output's storage is its input's,
  /// which the folded tactic of node `n` reads at input 3.
  void foldStep(int sd, const graph::Node& n, const graph::Node& dn, const std::string& id) {
    PlanStep& view = plan_.steps[static_cast<size_t>(sd)];
    view.kind = StepKind::kView;
    view.tactic.clear();
    view.state.clear();
    view.timeMs = 0.0;
    view.precision = Precision::kFp32;
    for (size_t k = 1; k < view.inputs.size(); ++k) view.inputs[k] = -1;
    plan_.tensors[static_cast<size_t>(view.outputs[0])].aliasOf = view.inputs[0];
    tactics_.resize(plan_.steps.size());
    tactics_[static_cast<size_t>(sd)].reset();
    // Its runner-ups are no longer choices of this engine (a whole-engine trial forcing one
    // would undo the fold it is part of), nor is a chain of it into its input's producer.
    const auto prod = dn.inputs.empty() ? producers_.end() : producers_.find(dn.inputs[0]);
    const std::string producer = prod == producers_.end() ? "" : g_.nodes[prod->second].name;
    alternatives_.erase(
        std::remove_if(alternatives_.begin(), alternatives_.end(),
                       [&](const runtime::TacticAlternative& a) {
                         return a.layer == dn.name ||
                                (a.layer == producer && cuda::isChainTactic(a.alternative));
                       }),
        alternatives_.end());
    log(Severity::kVerbose, "layer '" + dn.name + "' folded into '" + n.name + "' (" + id + ")");
  }

  /// ResNet's block boundary: a 1x1 INT8 layer (node i, no residual) reading the int8 output
  /// of a layer on a pointwise kernel whose output channels fit one block may run inside that
  /// layer's kernel (cuda-i8's ".chain" tactics), from the tile's outputs in shared memory: its
  /// input is then not read back from memory (at batch 64, layer1's 51 MB). The chained
  /// tactics are timed like any candidate (the timing cache keys them by both layers) and one
  /// is taken when it beats the producer's step plus this layer's choice (`bestCost`): the
  /// producer's step then runs it and writes this layer's output as its output 1, and this
  /// layer gets no step. With whole-engine trials (BuilderConfig::tryRunnerUpsInEngine) the
  /// chained tactic is not taken here but offered to them as the producer's runner-up.
  /// EDGEINFER_DISABLE_CHAIN=1 turns this off. A ".chain" tactic forced for the producer
  /// (forcedChains_) is taken untimed, before a tactic forced for this layer (`forcedLayer`,
  /// which otherwise keeps the layer apart). Returns whether the layer was chained.
  Expected<bool> tryChain(size_t i, const builder::LayerContext& layer, double bestCost,
                          bool forcedLayer) {
    const graph::Node& n = g_.nodes[i];
    if (n.inputs.empty()) return false;
    const std::string& x = n.inputs[0];
    const auto prod = producers_.find(x);
    if (prod == producers_.end()) return false;
    const auto fc = forcedChains_.find(prod->second);
    const std::string* forcedId = fc == forcedChains_.end() ? nullptr : &fc->second;
    // (A forced chain's reader that cannot run in it: the next reader may; the build fails
    // when none did, with the reasons.)
    const auto refuseForced = [&](const std::string& why) -> Expected<bool> {
      if (forcedId) {
        std::string& r = chainRefusals_[prod->second];
        r += (r.empty() ? "" : "; ") + std::string("'") + n.name + "': " + why;
      }
      return false;
    };
    const char* off = std::getenv("EDGEINFER_DISABLE_CHAIN");
    if (!forcedId && ((off && *off && std::string(off) != "0") || forcedLayer)) return false;
    if (forcedId && forcedLayer)  // (a whole-engine trial forces every other layer's tactic)
      log(Severity::kInfo, "layer '" + n.name + "': its forced tactic gives way to '" + *forcedId +
                               "', forced for '" + g_.nodes[prod->second].name +
                               "', which runs it");
    const bool conv = (n.domain.empty() && n.opType == "Conv") ||
                      (n.domain == graph::kEdgeInferDomain && n.opType == "FusedConv");
    if (!conv || n.hasInput(3) || n.outputs.size() != 1 || precisionOf(n) != Precision::kInt8)
      return refuseForced("not an INT8 convolution without a residual");
    if (g_.isConstant(x) || versions_[x].size() != 1)
      return refuseForced("its input is read in more than one format");
    const graph::Node& pn = g_.nodes[prod->second];
    if (!forcedId && overrides_.find(pn.name)) return false;  // a forced tactic stays
    int sd = -1;
    for (size_t k = plan_.steps.size(); k-- > 0;)
      if (plan_.steps[k].node == static_cast<int>(prod->second)) {
        sd = static_cast<int>(k);
        break;
      }
    if (sd < 0) return refuseForced("the producer has no step");
    const PlanStep& ps = plan_.steps[static_cast<size_t>(sd)];
    if (ps.kind != StepKind::kTactic || ps.tactic.rfind("cuda-i8.pw", 0) != 0 ||
        ps.tactic.find(".fold") != std::string::npos || cuda::isChainTactic(ps.tactic) ||
        ps.outputs.size() != 1 || pn.outputs.size() != 1 || ps.outputs[0] != versions_[x][0])
      return refuseForced("the producer's step is not a plain pointwise INT8 tactic");
    const TensorFormat int8Nhwc{DataType::kInt8, Layout::kNHWC};
    if (!cuda::isQuantized(plan_.tensors[static_cast<size_t>(ps.outputs[0])]) ||
        plan_.tensors[static_cast<size_t>(ps.outputs[0])].format != int8Nhwc)
      return refuseForced("the producer's output is not int8 NHWC");
    builder::TacticProvider* i8 = nullptr;
    for (auto& p : providers_)
      if (p->name() == "cuda-i8") i8 = p.get();
    if (!i8) return refuseForced("no cuda-i8 provider");

    builder::LayerContext both = layerContext(prod->second, Precision::kInt8);
    both.chained = std::make_shared<builder::LayerContext>(layer);
    both.outputShapes.push_back(layer.outputShapes[0]);
    both.outputTypes.push_back(layer.outputTypes[0]);
    both.outputScales.resize(pn.outputs.size(), 0.f);
    both.outputScales.push_back(layer.outputScale(0));
    auto cands = i8->candidates(both, Precision::kInt8);
    std::map<std::string, Tactic*> byId;
    std::vector<builder::TacticCandidate> list;
    for (auto& c : cands) {
      byId[c->id()] = c.get();
      list.emplace_back(c->id(), static_cast<int64_t>(c->workspaceBytes()));
    }
    std::string best;
    double bestMs = 0.0;
    std::set<std::string> initialized;
    if (forcedId) {
      if (!byId.count(*forcedId)) return refuseForced("not a chained candidate of the two layers");
      best = *forcedId;
    } else {
      if (cands.empty()) return false;
      const auto timer = [&](const std::string& id) -> Expected<double> {
        initialized.insert(id);
        return timeTactic(*byId.at(id), both, kInfinity);
      };
      bool fromCache = false;
      auto e = cache_.lookupOrTime(both.signature(Precision::kInt8), list, timer, &fromCache);
      if (!e.ok()) {  // none ran: both layers' own choices stand
        log(Severity::kVerbose,
            "layer '" + n.name + "': chaining it into '" + pn.name + "': " + e.status().message());
        return false;
      }
      (fromCache ? cached_ : timed_) += 1;
      bestMs = kInfinity;
      for (const auto& t : e->table)
        if (!t.failed && byId.count(t.tacticId) && t.medianMs < bestMs)
          best = t.tacticId, bestMs = t.medianMs;
      if (best.empty()) return false;
      const double apart = ps.timeMs + bestCost;
      log(Severity::kVerbose, "layer '" + n.name + "': chained into '" + pn.name + "' by " + best +
                                  " " + std::to_string(bestMs) + " ms against " +
                                  std::to_string(apart) + " ms apart" +
                                  (fromCache ? " (from cache)" : ""));
      // Timed alone, the chained kernel cannot show what it changes around it: the reader's
      // input read back from the L2 cache rather than memory, the neighbours' blocks beside
      // its larger shared memory. On ResNet-50 at batch 64 (H200) it beat its two layers apart
      // by 0.9 % alone and made the engine 1.8 % slower (docs/performance.md). So the whole-engine
      // trial decides (BuilderConfig::tryRunnerUpsInEngine), forcing the chained tactic for the
      // producer; without trials, the timing alone. (One chain alternative a producer: a trial
      // forcing it chains the first reader that can run in it, this one.)
      if (cfg_.tryRunnerUpsInEngine) {
        const bool offered = std::any_of(
            alternatives_.begin(), alternatives_.end(), [&](const runtime::TacticAlternative& a) {
              return a.layer == pn.name && cuda::isChainTactic(a.alternative);
            });
        if (!offered)
          alternatives_.push_back(runtime::TacticAlternative{
              pn.name, both.signature(Precision::kInt8), ps.tactic, best, apart, bestMs});
        return false;
      }
      if (!(bestMs < apart)) return false;
    }
    std::unique_ptr<Tactic> t;
    for (auto& c : cands)
      if (c && c->id() == best) t = std::move(c);
    if (!initialized.count(best))
      EI_RETURN_IF_ERROR(t->initialize(both).withContext("layer '" + pn.name + "' tactic " + best));
    PlanStep& step = plan_.steps[static_cast<size_t>(sd)];
    step.tactic = best;
    step.state.clear();
    step.timeMs = bestMs;
    step.outputs.push_back(newTensor(n.outputs[0], t->outputFormat(1)));
    tactics_.resize(plan_.steps.size());
    tactics_[static_cast<size_t>(sd)] = std::move(t);
    // Neither layer's runner-ups are choices of this engine any more (a whole-engine trial
    // forcing one would undo the chain).
    alternatives_.erase(std::remove_if(alternatives_.begin(), alternatives_.end(),
                                       [&](const runtime::TacticAlternative& a) {
                                         return a.layer == pn.name || a.layer == n.name;
                                       }),
                        alternatives_.end());
    log(Severity::kVerbose, "layer '" + n.name + "' chained into '" + pn.name + "' (" + best + ")");
    forcedChains_.erase(prod->second);
    return true;
  }

  Status addCpuStep(size_t i) {
    const graph::Node& n = g_.nodes[i];
    PlanStep s;
    s.kind = StepKind::kCpu;
    s.node = static_cast<int>(i);
    s.inputs.assign(n.inputs.size(), -1);
    for (size_t k = 0; k < n.inputs.size(); ++k) {
      if (!n.hasInput(k) || g_.isConstant(n.inputs[k])) continue;
      const graph::Value& v = *g_.findValue(n.inputs[k]);
      EI_ASSIGN_OR_RETURN(s.inputs[k],
                          ensureVersion(n.inputs[k], cuda::logicalFormat(v.dtype, v.shape)));
    }
    for (const auto& o : n.outputs) {
      const graph::Value& v = *g_.findValue(o);
      s.outputs.push_back(newTensor(o, cuda::logicalFormat(v.dtype, v.shape)));
    }
    plan_.steps.push_back(std::move(s));
    return Status::Ok();
  }

  const graph::Graph& g_;
  const BuilderConfig& cfg_;
  builder::TimingCache& cache_;
  const builder::TacticOverrides& overrides_;
  /// Producers (node index) whose forced tactic is a ".chain" one, with its id (tryChain).
  std::map<size_t, std::string> forcedChains_;
  std::map<size_t, std::string> chainRefusals_;  ///< why their readers were not chained
  cudaStream_t stream_ = nullptr;
  std::vector<std::unique_ptr<builder::TacticProvider>> providers_;
  ExecutionPlan plan_;
  std::vector<std::unique_ptr<Tactic>> tactics_;             // per step
  std::map<std::string, std::vector<int>> versions_;         // value -> plan tensors
  std::map<std::string, int> constants_;                     // value|format -> plan tensor
  std::map<std::string, float> scales_;                      // INT8: float value -> its scale
  std::map<std::string, Precision> policy_;                  // INT8: calibration policy per layer
  std::map<std::string, bool> int8Readers_;                  // INT8: int8Readers() per value
  const std::map<std::string, std::string>* preferred_;      // layer -> tactic id, or null
  const std::unordered_map<std::string, size_t> producers_;  // value -> node producing it
  std::map<size_t, std::vector<std::unique_ptr<Tactic>>> prepared_;  // node -> its candidates
  double candidateSeconds_ = 0.0, preparedSeconds_ = 0.0;
  std::deque<builder::LayerContext> preparedLayers_;  // the layers they were prepared for
  int timed_ = 0, cached_ = 0, statesAdded_ = 0;
  std::vector<runtime::TacticAlternative> alternatives_;
  int preferredTaken_ = 0, preferredMissed_ = 0;
  int candidatesTimed_ = 0, candidatesPruned_ = 0;
  double initSeconds_ = 0.0, timingSeconds_ = 0.0;
};

std::string preferredTimes(const GpuBuilder& b) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%.2f s asking for candidates, %.2f s preparing the opt tactics",
                b.candidateSeconds(), b.preparedSeconds());
  return buf;
}

}  // namespace

Expected<std::unique_ptr<Engine>> buildCudaEngine(
    graph::Graph g, EngineInfo info, const BuilderConfig& cfg,
    const quant::ExplicitInt8* explicitInt8, const std::map<std::string, std::string>* preferred) {
  const auto t0 = std::chrono::steady_clock::now();
  EI_ASSIGN_OR_RETURN(CudaDeviceInfo dev, queryCudaDevice(cfg.deviceId));
  bool wantsInt8 = cfg.precision == Precision::kInt8;
  for (const auto& [layer, p] : cfg.layerPrecision) wantsInt8 = wantsInt8 || p == Precision::kInt8;
  const bool explicitQ = explicitInt8 && !explicitInt8->empty();
  CalibrationCache calib;
  if (wantsInt8) {
    if (cfg.calibrationCachePath.empty() && !explicitQ)
      return Status(ErrorCode::kInvalidArgument,
                    "INT8 needs a calibration cache: run `edgeinfer calibrate` on sample data and "
                    "pass its cache (--calibration-cache, BuilderConfig::calibrationCachePath), "
                    "or a model with its own QuantizeLinear/DequantizeLinear scales");
    if (!cfg.calibrationCachePath.empty()) {
      EI_ASSIGN_OR_RETURN(calib, CalibrationCache::load(cfg.calibrationCachePath));
      // The ranges are those of the smoothed graph (quant/smoothing.h).
      auto smoothed = quant::applySmoothing(g, calib.smoothing);
      if (!smoothed.ok())
        return smoothed.status().withContext("'" + cfg.calibrationCachePath + "'");
    }
  }
  if (wantsInt8 && explicitQ) {
    // Explicit quantization: the model's scales and INT8 layers win over a calibration cache,
    // which then serves only the tensors the model leaves without a scale and the layers it
    // does not quantize. Without a cache, those layers stay in FP16 (the model's policy).
    const bool hasCache = !cfg.calibrationCachePath.empty();
    for (const auto& [name, amax] : explicitInt8->calibration.tensorAmax)
      calib.tensorAmax[name] = amax;
    for (const auto& [layer, p] : explicitInt8->calibration.layerPrecision)
      if (p == Precision::kInt8 || !hasCache || !calib.layerPrecision.count(layer))
        calib.layerPrecision[layer] = p;
    log(Severity::kInfo, "INT8 with the model's Q/DQ scales (explicit quantization): " +
                             std::to_string(explicitInt8->int8Layers().size()) + " INT8 layers" +
                             (hasCache ? ", the calibration cache for the rest" : ""));
  }
  const builder::DeviceKey key = builder::DeviceKey::of(dev);
  info.deviceKey = key.toString();

  builder::TimingCacheOptions topts;
  topts.missIsError = cfg.timingCacheMissIsError;
  builder::TimingCache cache(info.deviceKey, topts);
  std::string cachePath;
  if (cfg.useTimingCache) {
    if (!cfg.timingCachePath.empty()) {
      cachePath = cfg.timingCachePath;
    } else {
      auto p = builder::defaultCachePath(info.deviceKey);
      if (p.ok())
        cachePath = *p;
      else
        log(Severity::kWarning, "no timing cache: " + p.status().message());
    }
    if (!cachePath.empty()) EI_RETURN_IF_ERROR(cache.loadOrIgnore(cachePath));
  } else if (cfg.timingCacheMissIsError) {
    return Status(ErrorCode::kInvalidArgument,
                  "cache misses are errors but the timing cache is switched off");
  }

  builder::TacticOverrides overrides;
  if (!cfg.forcedTacticsFile.empty()) {
    EI_ASSIGN_OR_RETURN(overrides, builder::TacticOverrides::loadFile(cfg.forcedTacticsFile));
  }
  for (const auto& [layer, id] : cfg.forcedTactics) overrides.set(layer, id);
  for (const auto& [layer, id] : overrides.all()) {
    bool found = false;
    for (const auto& n : g.nodes) found = found || n.name == layer;
    if (!found)
      return Status(ErrorCode::kInvalidArgument,
                    "a tactic is forced for layer '" + layer +
                        "', which the optimised graph "
                        "does not have (see `edgeinfer inspect` for the layer names)");
  }
  for (const auto& [layer, p] : cfg.layerPrecision) {
    (void)p;
    bool found = false;
    for (const auto& n : g.nodes) found = found || n.name == layer;
    if (!found)
      return Status(ErrorCode::kInvalidArgument, "a precision is set for layer '" + layer +
                                                     "', which the optimised graph "
                                                     "does not have");
  }

  GpuBuilder b(g, cfg, cache, overrides, preferred);
  if (wantsInt8) b.setCalibration(calib, explicitQ ? &explicitInt8->scales : nullptr);
  EI_RETURN_IF_ERROR(b.run());
  if (!cachePath.empty() && (b.timedLayers() > 0 || b.statesAdded() > 0)) {
    const Status s = cache.save(cachePath);
    if (!s.ok()) log(Severity::kWarning, "the timing cache was not saved: " + s.toString());
  }
  auto [plan, tactics] = b.takePlanAndTactics();
  auto providers = b.takeProviders();
  if (wantsInt8) {
    int layers = 0;  // (a chained step runs two layers)
    for (const auto& s : plan.steps)
      layers += s.kind != StepKind::kTactic ? 0 : cuda::isChainTactic(s.tactic) ? 2 : 1;
    const int int8Layers = cuda::countInt8Steps(plan);
    log(Severity::kInfo, "INT8: " + std::to_string(int8Layers) + " of " + std::to_string(layers) +
                             " GPU layers run INT8 tactics (the others were faster in FP16/FP32"
                             " or have no INT8 kernel; `edgeinfer inspect` lists them)");
    if (int8Layers == 0 && cfg.precision == Precision::kInt8) {
      // With the whole-engine choice to follow (builder.cpp, fasterInt8Engine), the warning
      // waits for its outcome: the all-INT8 engine may still be kept.
      if (cfg.int8WholeEngineChoice && !cfg.strictPrecision)
        log(Severity::kInfo, "INT8: the per-layer choice runs no layer in INT8");
      else
        log(Severity::kWarning, int8NowhereWarning());
      info.precision = Precision::kFp16;
    }
  }
  const int timed = b.timedLayers(), cached = b.cachedLayers();
  if (getLogLevel() >= Severity::kVerbose)
    log(Severity::kVerbose, "GPU plan:\n" + cuda::describePlan(plan, g));
  EI_ASSIGN_OR_RETURN(auto engine,
                      CudaEngine::create(std::move(g), std::move(info), std::move(plan),
                                         std::move(tactics), std::move(providers), cfg.deviceId));
  engine->setAlternatives(b.takeAlternatives());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f s", secs);
  log(Severity::kInfo,
      "GPU engine for " + dev.name + ": " + std::to_string(timed) + " layer signatures timed, " +
          std::to_string(cached) + " from the timing cache" +
          (cachePath.empty() ? std::string() : " (" + cachePath + ")") + ", " + buf +
          (timed > 0 ? "; " + b.timingSummary() : std::string()) +
          (preferred
               ? "; " + std::to_string(b.preferredTaken()) +
                     " layers took the opt shapes' tactic, " + std::to_string(b.preferredMissed()) +
                     " could not (" + preferredTimes(b) + ")"
               : std::string()));
  return std::unique_ptr<Engine>(std::move(engine));
}

std::map<std::string, std::string> cudaEngineTactics(const Engine& engine) {
  std::map<std::string, std::string> out;
  const auto* e = dynamic_cast<const CudaEngine*>(&engine);
  if (!e) return out;
  for (const auto& s : e->plan().steps)
    if (s.kind == StepKind::kTactic && s.node >= 0)
      out[e->graph().nodes[static_cast<size_t>(s.node)].name] = s.tactic;
  return out;
}

std::vector<TacticAlternative> cudaEngineAlternatives(const Engine& engine) {
  const auto* e = dynamic_cast<const CudaEngine*>(&engine);
  return e ? e->alternatives() : std::vector<TacticAlternative>{};
}

std::vector<std::vector<std::string>> cudaEngineInt8Stages(const Engine& engine) {
  std::vector<std::vector<std::string>> out;
  const auto* e = dynamic_cast<const CudaEngine*>(&engine);
  if (!e) return out;
  std::set<size_t> int8Nodes;
  const auto& steps = e->plan().steps;
  for (size_t i = 0; i < steps.size(); ++i) {
    const auto& s = steps[i];
    if (s.kind != StepKind::kTactic || s.node < 0 || s.precision != Precision::kInt8) continue;
    int8Nodes.insert(static_cast<size_t>(s.node));
    // A chained layer runs at INT8 in its producer's step (it has none of its own).
    if (const int c = cuda::chainedNode(e->plan(), e->graph(), i); c >= 0)
      int8Nodes.insert(static_cast<size_t>(c));
  }
  for (const auto& stage : graph::networkStages(e->graph())) {
    std::vector<std::string> layers;
    for (size_t i : stage)
      if (int8Nodes.count(i)) layers.push_back(e->graph().nodes[i].name);
    if (!layers.empty()) out.push_back(std::move(layers));
  }
  return out;
}

Expected<std::unique_ptr<Engine>> loadCudaEngine(graph::Graph g, EngineInfo info,
                                                 const std::string& planJson) {
  const auto t0 = std::chrono::steady_clock::now();
  std::string why;
  if (!cudaBackendUsable(0, &why))
    return Status(ErrorCode::kUnsupported, "this is a GPU engine and no GPU is usable: " + why);
  const auto t1 = std::chrono::steady_clock::now();
  EI_ASSIGN_OR_RETURN(ExecutionPlan plan, cuda::planFromJson(planJson, g));
  auto providers = edgeinfer::cuda::makeCudaProviders();
  const auto t2 = std::chrono::steady_clock::now();
  EI_ASSIGN_OR_RETURN(auto engine,
                      CudaEngine::create(std::move(g), std::move(info), std::move(plan), {},
                                         std::move(providers), 0));
  if (getLogLevel() >= Severity::kVerbose) {
    using Ms = std::chrono::duration<double, std::milli>;
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "GPU engine load: device check %.1f ms, plan + providers %.1f ms, engine %.1f ms",
                  Ms(t1 - t0).count(), Ms(t2 - t1).count(),
                  Ms(std::chrono::steady_clock::now() - t2).count());
    log(Severity::kVerbose, buf);
  }
  return std::unique_ptr<Engine>(std::move(engine));
}

}  // namespace edgeinfer::runtime
