// The GPU engine's execution context: CUDA streams (the context's own, and one more for each
// further branch the engine's schedule runs side by side: stream_schedule.h), one activation
// arena (offsets planned by liveness and the schedule in the engine), one workspace a stream
// (a stream's layers run one after another), pinned host buffers for the outputs (small ones
// mapped, for the last kernel to write them there: zeroCopyOutputs()). A run
// forks the other streams off the context's stream after its input copies and joins them
// back before its output copies; within, events order a step after the steps of other
// streams it waits for.
//
// CUDA graphs: the first run of a context runs the layers one by one (warm-up: lazy module
// loads, cuDNN/cuBLAS first-call work); the second captures them into one CUDA graph and
// every later run replays it. Buffer addresses are fixed by the arena, except inputs bound as
// device tensors (zero-copy): when one of those moves, the layers are captured again and the
// instantiated graph is patched with cudaGraphExecUpdate instead of instantiated anew.
// Engines with CPU-fallback layers never use graphs (a CPU layer synchronises the stream).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "edgeinfer/logger.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/library_handles.h"
#include "kernels/cuda/reformat.h"
#include "kernels/ref/ref_kernels.h"
#include "runtime/cuda/cuda_engine.h"
#include "runtime/graph_engine.h"

namespace edgeinfer::runtime::cuda {
namespace {

using builder::Layout;

bool graphsDisabledByEnv() {
  const char* v = std::getenv("EDGEINFER_DISABLE_CUDA_GRAPHS");
  return v && *v && std::strcmp(v, "0") != 0;
}

/// (n, c, hw) of a tensor for the reformat kernel.
void reformatDims(const Shape& s, int64_t* n, int64_t* c, int64_t* hw) {
  if (s.rank() == 4) {
    *n = s[0];
    *c = s[1];
    *hw = s[2] * s[3];
  } else {
    *n = 1;
    *c = 1;
    *hw = s.numel();
  }
}

class CudaContext final : public ExecutionContext {
 public:
  CudaContext(const CudaEngine& engine, const ContextOptions& options)
      : engine_(engine),
        useGraphs_(options.cudaGraphs && !graphsDisabledByEnv() && !engine.hasCpuSteps()) {}

  ~CudaContext() override {
    cudaSetDevice(engine_.deviceId());
    if (exec_) cudaGraphExecDestroy(exec_);
    if (evStart_) cudaEventDestroy(evStart_);
    if (evStop_) cudaEventDestroy(evStop_);
    for (cudaEvent_t e : stepEvents_)
      if (e) cudaEventDestroy(e);
    for (cudaEvent_t e : joinEvents_)
      if (e) cudaEventDestroy(e);
    if (forkEvent_) cudaEventDestroy(forkEvent_);
    for (cudaStream_t s : streams_) {     // streams_[0] is stream_
      if (!s) continue;                   // init() failed before creating it
      edgeinfer::cuda::releaseStream(s);  // no cuDNN handle may be left on it
      cudaStreamDestroy(s);
    }
    if (arena_) cudaFree(arena_);
    if (workspace_) cudaFree(workspace_);
  }

  Status init() {
    EI_CUDA_CHECK(cudaSetDevice(engine_.deviceId()));
    const StreamSchedule& sched = engine_.streams();
    streams_.assign(static_cast<size_t>(sched.streams), nullptr);
    for (cudaStream_t& st : streams_)
      EI_CUDA_CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    stream_ = streams_[0];
    EI_CUDA_CHECK(cudaEventCreate(&evStart_));
    EI_CUDA_CHECK(cudaEventCreate(&evStop_));
    if (sched.streams > 1) {
      EI_CUDA_CHECK(cudaEventCreateWithFlags(&forkEvent_, cudaEventDisableTiming));
      joinEvents_.assign(streams_.size(), nullptr);
      for (size_t k = 1; k < streams_.size(); ++k)
        EI_CUDA_CHECK(cudaEventCreateWithFlags(&joinEvents_[k], cudaEventDisableTiming));
    }
    stepEvents_.assign(sched.record.size(), nullptr);
    for (size_t i = 0; i < sched.record.size(); ++i)
      if (sched.record[i])
        EI_CUDA_CHECK(cudaEventCreateWithFlags(&stepEvents_[i], cudaEventDisableTiming));
    const int64_t arenaBytes = engine_.memoryPlan().arenaBytes;
    if (arenaBytes > 0) EI_CUDA_CHECK(cudaMalloc(&arena_, static_cast<size_t>(arenaBytes)));
    // One workspace a stream, each on a 256-byte boundary (cuBLASLt's alignment).
    workspaceStride_ = (engine_.workspaceBytes() + 255) / 256 * 256;
    if (engine_.workspaceBytes() > 0)
      EI_CUDA_CHECK(cudaMalloc(&workspace_, workspaceStride_ * streams_.size()));
    const auto& plan = engine_.plan();
    const std::vector<int> zeroCopy = zeroCopyOutputs();
    zeroCopyRoot_.assign(plan.tensors.size(), nullptr);
    for (const auto& d : engine_.outputs()) {
      const int t = plan.graphOutputs.at(d.name);
      const size_t bytes = static_cast<size_t>(engine_.tensorBytes(t));
      bool mapped = std::find(zeroCopy.begin(), zeroCopy.end(), t) != zeroCopy.end();
      void* host = nullptr;
      void* dev = nullptr;
      if (mapped &&
          (cudaHostAlloc(&host, std::max<size_t>(bytes, 1), cudaHostAllocMapped) != cudaSuccess ||
           cudaHostGetDevicePointer(&dev, host, 0) != cudaSuccess)) {
        cudaGetLastError();  // not mapped after all: copied like the others
        if (host) cudaFreeHost(host);
        host = nullptr;
        mapped = false;
      }
      if (!mapped)
        EI_CUDA_CHECK(cudaHostAlloc(&host, std::max<size_t>(bytes, 1), cudaHostAllocDefault));
      auto storage = std::make_shared<Storage>(host, bytes, MemoryLocation::kHost,
                                               [](void* p) { cudaFreeHost(p); });
      outputs_[d.name] = Tensor::fromStorage(storage, d.dtype, d.shape);
      if (mapped) {
        zeroCopyRoot_[static_cast<size_t>(engine_.storageRoot(t))] = dev;
        ++stats_.zeroCopyOutputs;
        stats_.zeroCopyOutputNames.push_back(d.name);
      }
    }
    ptrs_.assign(plan.tensors.size(), nullptr);
    stats_.activationArenaBytes = engine_.memoryPlan().arenaBytes;
    stats_.activationNaiveBytes = engine_.memoryPlan().naiveBytes;
    stats_.workspaceBytes =
        static_cast<int64_t>(engine_.workspaceBytes() > 0 ? workspaceStride_ * streams_.size() : 0);
    stats_.streams = static_cast<int64_t>(streams_.size());
    stats_.weightBytes = engine_.weightBytes();
    stats_.cudaGraphs = useGraphs_;
    stats_.cpuFallbackLayers = engine_.cpuSteps();
    return Status::Ok();
  }

  const Engine& engine() const override { return engine_; }

  Status setInput(const std::string& name, const Tensor& t) override {
    EI_ASSIGN_OR_RETURN(const TensorDesc* desc, checkInput(engine_, name, t));
    if (t.shape() != desc->shape)
      return Status(ErrorCode::kInvalidArgument,
                    "input '" + name + "' must have shape " + desc->shape.toString() + ", got " +
                        t.shape().toString() +
                        " (GPU engines are built for static shapes: rebuild with --shapes, one "
                        "shape profile per shape to run)");
    if (!t.onHost()) {
      cudaPointerAttributes attr{};
      if (cudaPointerGetAttributes(&attr, t.raw()) != cudaSuccess ||
          attr.type != cudaMemoryTypeDevice || attr.device != engine_.deviceId()) {
        cudaGetLastError();
        return Status(ErrorCode::kInvalidArgument, "input '" + name +
                                                       "' is not device memory of GPU " +
                                                       std::to_string(engine_.deviceId()));
      }
    }
    bound_[name] = t;
    ptrsValid_ = false;
    return Status::Ok();
  }

  Status waitForEvent(void* cudaEvent) override {
    if (!cudaEvent) return Status(ErrorCode::kInvalidArgument, "waitForEvent: the event is null");
    waitEvent_ = static_cast<cudaEvent_t>(cudaEvent);
    return Status::Ok();
  }

  Status execute() override {
    EI_CUDA_CHECK(cudaSetDevice(engine_.deviceId()));
    // waitForEvent: before anything of this run is queued (and outside a graph capture).
    if (waitEvent_) {
      const cudaEvent_t ev = waitEvent_;
      waitEvent_ = nullptr;
      EI_CUDA_CHECK(cudaStreamWaitEvent(stream_, ev, 0));
    }
    const auto& plan = engine_.plan();
    // Pointers: constants from the engine, device-bound inputs in place, the rest in the arena;
    // worked out again only after a setInput() (at batch 1 the walk over every tensor was a
    // visible part of the host's share of a run).
    if (!ptrsValid_) {
      std::vector<const void*> deviceInputs(plan.tensors.size(), nullptr);
      for (const auto& d : engine_.inputs()) {
        const auto it = bound_.find(d.name);
        if (it == bound_.end())
          return Status(ErrorCode::kInvalidArgument, "input '" + d.name + "' is not bound");
        if (!it->second.onHost())
          deviceInputs[static_cast<size_t>(plan.graphInputs.at(d.name))] = it->second.raw();
      }
      auto* arena = static_cast<uint8_t*>(arena_);
      ptrs_.assign(plan.tensors.size(), nullptr);
      for (size_t t = 0; t < plan.tensors.size(); ++t) {
        const int r = engine_.storageRoot(static_cast<int>(t));
        if (plan.tensors[static_cast<size_t>(r)].constant)
          ptrs_[t] = const_cast<void*>(engine_.constantData(r));
        else if (deviceInputs[static_cast<size_t>(r)])
          ptrs_[t] = const_cast<void*>(deviceInputs[static_cast<size_t>(r)]);
        else if (zeroCopyRoot_[static_cast<size_t>(r)])
          ptrs_[t] = zeroCopyRoot_[static_cast<size_t>(r)];
        else if (engine_.arenaOffset(r) >= 0)
          ptrs_[t] = arena + engine_.arenaOffset(r);
      }
      ptrsValid_ = true;
    }
    const std::vector<void*>& ptrs = ptrs_;
    for (const auto& d : engine_.inputs()) {
      const Tensor& t = bound_.at(d.name);
      if (!t.onHost()) continue;
      const int pt = plan.graphInputs.at(d.name);
      EI_CUDA_CHECK(cudaMemcpyAsync(ptrs[static_cast<size_t>(pt)], t.raw(), t.bytes(),
                                    cudaMemcpyHostToDevice, stream_));
    }

    const bool replay = useGraphs_ && runs_ > 0;
    if (replay && (!exec_ || ptrs != capturedPtrs_)) EI_RETURN_IF_ERROR(captureGraph(ptrs));
    EI_CUDA_CHECK(cudaEventRecord(evStart_, stream_));
    if (replay) {
      EI_CUDA_CHECK(cudaGraphLaunch(exec_, stream_));
      ++stats_.graphReplays;
    } else {
      EI_RETURN_IF_ERROR(enqueueSteps(ptrs));
    }
    EI_CUDA_CHECK(cudaEventRecord(evStop_, stream_));

    for (const auto& d : engine_.outputs()) {
      const int t = plan.graphOutputs.at(d.name);
      if (zeroCopyRoot_[static_cast<size_t>(engine_.storageRoot(t))]) continue;  // written there
      Tensor& out = outputs_.at(d.name);
      EI_CUDA_CHECK(cudaMemcpyAsync(out.raw(), ptrs[static_cast<size_t>(t)], out.bytes(),
                                    cudaMemcpyDeviceToHost, stream_));
    }
    EI_CUDA_CHECK(cudaStreamSynchronize(stream_));
    float ms = 0.f;
    if (cudaEventElapsedTime(&ms, evStart_, evStop_) == cudaSuccess) stats_.lastGpuMs = ms;
    ++runs_;
    return Status::Ok();
  }

  Expected<Tensor> getOutput(const std::string& name) const override {
    const auto it = outputs_.find(name);
    if (it == outputs_.end())
      return Status(ErrorCode::kNotFound, "the engine has no output '" + name + "'");
    if (runs_ == 0)
      return Status(ErrorCode::kInvalidArgument,
                    "output '" + name + "' is not computed yet: call execute() first");
    return it->second;
  }

  ContextStats stats() const override { return stats_; }

 private:
  /// The graph outputs the GPU writes straight into this context's pinned host buffer (mapped
  /// into the device's address space), with no copy after the run: at batch 1 a classifier's
  /// 4 KB of logits took a copy-engine transfer of a few microseconds after the last kernel.
  /// Only small outputs (up to kZeroCopyMaxBytes: a kernel's stores cross the bus one by one)
  /// that no step reads (nothing on the GPU reads them back over the bus), that are neither an
  /// input nor a constant nor share their storage with another output, in engines without CPU
  /// layers (those copy their results in with cudaMemcpyAsync); not on devices that cannot map
  /// host memory, nor with EDGEINFER_DISABLE_ZERO_COPY_OUTPUTS=1.
  std::vector<int> zeroCopyOutputs() const {
    static constexpr int64_t kZeroCopyMaxBytes = 256 << 10;
    std::vector<int> out;
    const char* env = std::getenv("EDGEINFER_DISABLE_ZERO_COPY_OUTPUTS");
    if ((env && *env && std::strcmp(env, "0") != 0) || engine_.hasCpuSteps()) return out;
    int canMap = 0;
    if (cudaDeviceGetAttribute(&canMap, cudaDevAttrCanMapHostMemory, engine_.deviceId()) !=
            cudaSuccess ||
        !canMap) {
      cudaGetLastError();
      return out;
    }
    const auto& plan = engine_.plan();
    std::vector<int> uses(plan.tensors.size(), 0);  // per storage root: reads, inputs, outputs
    for (const auto& step : plan.steps)
      for (int t : step.inputs)
        if (t >= 0) uses[static_cast<size_t>(engine_.storageRoot(t))] += 2;
    for (const auto& [name, t] : plan.graphInputs)
      uses[static_cast<size_t>(engine_.storageRoot(t))] += 2;
    for (const auto& [name, t] : plan.graphOutputs)
      uses[static_cast<size_t>(engine_.storageRoot(t))] += 1;
    for (const auto& d : engine_.outputs()) {
      const int t = plan.graphOutputs.at(d.name), r = engine_.storageRoot(t);
      if (uses[static_cast<size_t>(r)] == 1 && !plan.tensors[static_cast<size_t>(r)].constant &&
          engine_.arenaOffset(r) >= 0 && engine_.tensorBytes(t) <= kZeroCopyMaxBytes &&
          engine_.tensorBytes(t) == engine_.tensorBytes(r))
        out.push_back(t);
    }
    return out;
  }

  Status captureGraph(const std::vector<void*>& ptrs) {
    cudaGraph_t graph = nullptr;
    // No cuDNN layer of another thread changes streams during the capture (library_handles.h).
    std::unique_lock<std::recursive_mutex> one(edgeinfer::cuda::cudnnStreamMutex());
    EI_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    const Status s = enqueueSteps(ptrs);
    const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
    one.unlock();
    if (!s.ok()) {
      if (graph) cudaGraphDestroy(graph);
      return s.withContext("capturing the CUDA graph");
    }
    EI_CUDA_CHECK(end);
    bool updated = false;
    if (exec_) {
      cudaGraphExecUpdateResultInfo info{};
      if (cudaGraphExecUpdate(exec_, graph, &info) == cudaSuccess) {
        updated = true;
        ++stats_.graphUpdates;
      } else {
        cudaGetLastError();  // topology changed: instantiate anew
        cudaGraphExecDestroy(exec_);
        exec_ = nullptr;
      }
    }
    if (!updated) {
      const cudaError_t e = cudaGraphInstantiate(&exec_, graph, 0);
      if (e != cudaSuccess) {
        cudaGraphDestroy(graph);
        exec_ = nullptr;
        EI_CUDA_CHECK(e);
      }
      ++stats_.graphCaptures;
    }
    cudaGraphDestroy(graph);
    capturedPtrs_ = ptrs;
    return Status::Ok();
  }

  Status enqueueSteps(const std::vector<void*>& ptrs) {
    const auto& plan = engine_.plan();
    const StreamSchedule& sched = engine_.streams();
    // Fork: the other streams start after what the context's stream holds so far (the input
    // copies; in a capture, this is what draws them into the graph).
    Status st = Status::Ok();
    if (streams_.size() > 1) {
      st = EI_CUDA_STATUS(cudaEventRecord(forkEvent_, stream_));
      for (size_t k = 1; k < streams_.size() && st.ok(); ++k)
        st = EI_CUDA_STATUS(cudaStreamWaitEvent(streams_[k], forkEvent_, 0));
    }
    builder::LaunchArgs args;
    args.workspaceBytes = engine_.workspaceBytes();
    for (size_t i = 0; i < plan.steps.size() && st.ok(); ++i) {
      const int k = sched.stream[i] < 0 ? 0 : sched.stream[i];
      const cudaStream_t stream = streams_[static_cast<size_t>(k)];
      for (int w : sched.waits[i])
        if (st.ok())
          st = EI_CUDA_STATUS(cudaStreamWaitEvent(stream, stepEvents_[static_cast<size_t>(w)], 0));
      args.stream = stream;
      args.workspace =
          workspace_ ? static_cast<uint8_t*>(workspace_) + static_cast<size_t>(k) * workspaceStride_
                     : nullptr;
      if (st.ok()) st = enqueueStep(i, ptrs, args, stream);
      if (st.ok() && sched.record[i]) st = EI_CUDA_STATUS(cudaEventRecord(stepEvents_[i], stream));
    }
    // Join, after an error too and every stream even if one fails (a capture must end with
    // every stream joined): the context's stream goes on after every other stream's last step.
    // The first error is the one returned.
    for (size_t k = 1; k < streams_.size(); ++k) {
      Status j = EI_CUDA_STATUS(cudaEventRecord(joinEvents_[k], streams_[k]));
      if (j.ok()) j = EI_CUDA_STATUS(cudaStreamWaitEvent(stream_, joinEvents_[k], 0));
      if (st.ok() && !j.ok()) st = j;
    }
    return st;
  }

  Status enqueueStep(size_t i, const std::vector<void*>& ptrs, builder::LaunchArgs& args,
                     cudaStream_t stream) {
    const auto& plan = engine_.plan();
    const PlanStep& s = plan.steps[i];
    switch (s.kind) {
      case StepKind::kView:
        break;
      case StepKind::kReformat: {
        const int in = s.inputs[0], out = s.outputs[0];
        const auto& ti = plan.tensors[static_cast<size_t>(in)];
        const auto& to = plan.tensors[static_cast<size_t>(out)];
        const auto& fi = ti.format;
        const auto& fo = to.format;
        int64_t n, c, hw;
        reformatDims(engine_.tensorShape(in), &n, &c, &hw);
        EI_RETURN_IF_ERROR(edgeinfer::cuda::launchReformat(
            ptrs[static_cast<size_t>(in)], fi.dtype, fi.layout == Layout::kNHWC,
            ptrs[static_cast<size_t>(out)], fo.dtype, fo.layout == Layout::kNHWC, n, c, hw, stream,
            std::max(ti.scale, to.scale)));
        break;
      }
      case StepKind::kTactic: {
        args.inputs.assign(s.inputs.size(), nullptr);
        args.outputs.assign(s.outputs.size(), nullptr);
        for (size_t k = 0; k < s.inputs.size(); ++k)
          if (s.inputs[k] >= 0) args.inputs[k] = ptrs[static_cast<size_t>(s.inputs[k])];
        for (size_t k = 0; k < s.outputs.size(); ++k)
          args.outputs[k] = ptrs[static_cast<size_t>(s.outputs[k])];
        args.lastReads = engine_.lastReads(i);
        EI_RETURN_IF_ERROR(engine_.tactic(i)->enqueue(args).withContext(
            "layer '" + engine_.layer(i).node->name + "' (" + s.tactic + ")"));
        break;
      }
      case StepKind::kCpu:
        EI_RETURN_IF_ERROR(runCpuStep(i, ptrs).withContext("layer '" + engine_.layer(i).node->name +
                                                           "' on the CPU"));
        break;
    }
    return Status::Ok();
  }

  /// A layer no GPU tactic supports: its inputs to the host, the reference kernel, its
  /// outputs back. Inputs and outputs are in their logical format (the builder saw to it).
  Status runCpuStep(size_t i, const std::vector<void*>& ptrs) {
    const auto& plan = engine_.plan();
    const PlanStep& s = plan.steps[i];
    const graph::Graph& g = engine_.graph();
    const graph::Node& node = *engine_.layer(i).node;
    auto& host = cpuInputs_[i];
    host.resize(s.inputs.size());
    std::vector<const Tensor*> in(s.inputs.size(), nullptr);
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      if (!node.hasInput(k)) continue;
      if (const Tensor* c = g.constant(node.inputs[k])) {
        in[k] = c;
        continue;
      }
      const int t = s.inputs[k];
      if (t < 0) continue;
      const graph::Value& v = *g.findValue(node.inputs[k]);
      if (host[k].empty()) {
        EI_ASSIGN_OR_RETURN(host[k], Tensor::create(v.dtype, v.shape));
      }
      EI_CUDA_CHECK(cudaMemcpyAsync(host[k].raw(), ptrs[static_cast<size_t>(t)], host[k].bytes(),
                                    cudaMemcpyDeviceToHost, stream_));
      in[k] = &host[k];
    }
    EI_CUDA_CHECK(cudaStreamSynchronize(stream_));
    std::vector<Tensor> out;
    EI_RETURN_IF_ERROR(ref::runNode(node, in, out));
    if (out.size() < s.outputs.size())
      return Status(ErrorCode::kInternal, "the reference kernel returned too few outputs");
    for (size_t k = 0; k < s.outputs.size(); ++k) {
      const int t = s.outputs[k];
      if (out[k].bytes() != static_cast<size_t>(engine_.tensorBytes(t)) ||
          out[k].dtype() != plan.tensors[static_cast<size_t>(t)].format.dtype)
        return Status(ErrorCode::kUnsupported,
                      "output " + std::to_string(k) + " is " + out[k].describe() +
                          ", not the static shape the engine was built for");
      EI_CUDA_CHECK(cudaMemcpyAsync(ptrs[static_cast<size_t>(t)], out[k].raw(), out[k].bytes(),
                                    cudaMemcpyHostToDevice, stream_));
    }
    // The host outputs must outlive the asynchronous copies.
    EI_CUDA_CHECK(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }

  const CudaEngine& engine_;
  const bool useGraphs_;
  std::vector<void*> zeroCopyRoot_;    // per storage root: the mapped host buffer's device address
  std::vector<cudaStream_t> streams_;  // per stream of the engine's schedule
  cudaStream_t stream_ = nullptr;      // streams_[0]: inputs, outputs, CPU layers, events
  std::vector<cudaEvent_t> stepEvents_;  // per step the schedule records an event after
  std::vector<cudaEvent_t> joinEvents_;  // per stream (not 0): its last step of a run
  cudaEvent_t forkEvent_ = nullptr;
  cudaEvent_t waitEvent_ = nullptr;  // waitForEvent: the next execute() waits for it
  void* arena_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspaceStride_ = 0;  // bytes from one stream's workspace to the next
  std::map<std::string, Tensor> bound_;
  std::map<std::string, Tensor> outputs_;
  std::map<size_t, std::vector<Tensor>> cpuInputs_;
  std::vector<void*> ptrs_;  // every tensor's address in a run: execute() keeps it up to date
  bool ptrsValid_ = false;   // false after a setInput()
  std::vector<void*> capturedPtrs_;
  cudaGraphExec_t exec_ = nullptr;
  cudaEvent_t evStart_ = nullptr, evStop_ = nullptr;
  int64_t runs_ = 0;
  ContextStats stats_;
};

}  // namespace

Expected<std::unique_ptr<ExecutionContext>> CudaEngine::createExecutionContext(
    const ContextOptions& options) const {
  auto ctx = std::make_unique<CudaContext>(*this, options);
  EI_RETURN_IF_ERROR(ctx->init().withContext("creating a GPU execution context"));
  return std::unique_ptr<ExecutionContext>(std::move(ctx));
}

}  // namespace edgeinfer::runtime::cuda

namespace edgeinfer {

Expected<Tensor> copyToDevice(const Tensor& host, int deviceId) {
  if (host.empty() || !host.onHost())
    return Status(ErrorCode::kInvalidArgument, "copyToDevice needs a non-empty host tensor");
  EI_CUDA_CHECK(cudaSetDevice(deviceId));
  void* p = nullptr;
  EI_CUDA_CHECK(cudaMalloc(&p, std::max<size_t>(host.bytes(), 1)));
  auto storage = std::make_shared<Storage>(p, host.bytes(), MemoryLocation::kDevice,
                                           [](void* q) { cudaFree(q); });
  EI_CUDA_CHECK(cudaMemcpy(p, host.raw(), host.bytes(), cudaMemcpyHostToDevice));
  return Tensor::fromStorage(storage, host.dtype(), host.shape());
}

}  // namespace edgeinfer
