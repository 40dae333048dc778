#include "runtime/cuda/cuda_engine.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "builder/engine_format.h"
#include "core/half.h"
#include "edgeinfer/logger.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_weights.h"
#include "kernels/cuda/providers.h"
#include "runtime/graph_engine.h"

namespace edgeinfer::runtime::cuda {

using builder::Layout;
using builder::TensorFormat;

namespace {

constexpr int64_t kArenaAlignment = 256;
/// Streams a context runs independent branches on (stream_schedule.h).
constexpr int kMaxStreams = 4;

bool concurrencyDisabledByEnv() {
  const char* v = std::getenv("EDGEINFER_DISABLE_CONCURRENT_BRANCHES");
  return v && *v && std::strcmp(v, "0") != 0;
}

using Clock = std::chrono::steady_clock;

double msSince(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

/// Where an engine load spent its time, per step (find = recreating the tactic by id,
/// init = initialize(): plans, weights to the device). Logged at verbose level.
struct LoadProfile {
  struct Entry {
    size_t step;
    double findMs, initMs;
  };
  std::vector<Entry> entries;
  double findMs = 0, initMs = 0;

  void add(size_t step, double f, double i) {
    entries.push_back({step, f, i});
    findMs += f;
    initMs += i;
  }
  void log(const ExecutionPlan& plan, const std::vector<builder::LayerContext>& layers,
           double constantsMs, double totalMs) {
    if (getLogLevel() < Severity::kVerbose) return;
    std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
      return a.findMs + a.initMs > b.findMs + b.initMs;
    });
    char buf[256];
    size_t states = 0, stateBytes = 0;
    for (const PlanStep& s : plan.steps)
      if (!s.state.empty()) ++states, stateBytes += s.state.size();
    std::snprintf(buf, sizeof buf,
                  "engine load: %.1f ms (%zu tactics, %zu restored from %zu bytes of state: "
                  "find %.1f ms, initialize %.1f ms; constants %.1f ms); slowest steps:",
                  totalMs, entries.size(), states, stateBytes, findMs, initMs, constantsMs);
    std::string text = buf;
    for (size_t k = 0; k < entries.size() && k < 12; ++k) {
      const Entry& e = entries[k];
      std::snprintf(buf, sizeof buf, "\n  %8.1f ms find %8.1f ms init  %s  ", e.findMs, e.initMs,
                    layers[e.step].node ? layers[e.step].node->name.c_str() : "?");
      text += buf + plan.steps[e.step].tactic;
    }
    edgeinfer::log(Severity::kVerbose, text);
  }
};

}  // namespace

builder::LayerContext makeLayerContext(const graph::Graph& g, size_t node) {
  builder::LayerContext l;
  const graph::Node& n = g.nodes[node];
  l.node = &n;
  l.graph = &g;
  for (const auto& in : n.inputs) {
    const graph::Value* v = in.empty() ? nullptr : g.findValue(in);
    l.inputShapes.push_back(v ? v->shape : Shape());
    l.inputTypes.push_back(v ? v->dtype : DataType::kUndefined);
  }
  for (const auto& out : n.outputs) {
    const graph::Value* v = g.findValue(out);
    l.outputShapes.push_back(v ? v->shape : Shape());
    l.outputTypes.push_back(v ? v->dtype : DataType::kUndefined);
  }
  return l;
}

Expected<std::vector<uint8_t>> toStorageFormat(const Tensor& t, TensorFormat fmt) {
  const Shape& s = t.shape();
  const bool nhwc = fmt.layout == Layout::kNHWC && s.rank() == 4;
  const bool toHalf = fmt.dtype == DataType::kFloat16 && t.dtype() == DataType::kFloat32;
  const bool toFloat = fmt.dtype == DataType::kFloat32 && t.dtype() == DataType::kFloat16;
  if (fmt.dtype != t.dtype() && !toHalf && !toFloat)
    return Status(ErrorCode::kUnsupported, std::string("cannot store a ") +
                                               dataTypeName(t.dtype()) + " constant as " +
                                               dataTypeName(fmt.dtype));
  const int64_t n = t.numel();
  const size_t es = dataTypeSize(fmt.dtype), ies = dataTypeSize(t.dtype());
  std::vector<uint8_t> out(static_cast<size_t>(n) * es);
  const auto* src = static_cast<const uint8_t*>(t.raw());
  for (int64_t i = 0; i < n; ++i) {
    int64_t j = i;
    if (nhwc) {
      const int64_t C = s[1], H = s[2], W = s[3];
      const int64_t w = i % W, h = (i / W) % H, c = (i / (W * H)) % C, b = i / (W * H * C);
      j = ((b * H + h) * W + w) * C + c;
    }
    uint8_t* d = out.data() + static_cast<size_t>(j) * es;
    if (toHalf) {
      float v;
      std::memcpy(&v, src + static_cast<size_t>(i) * ies, 4);
      const uint16_t h = floatToHalf(v);
      std::memcpy(d, &h, 2);
    } else if (toFloat) {
      uint16_t h;
      std::memcpy(&h, src + static_cast<size_t>(i) * ies, 2);
      const float v = halfToFloat(h);
      std::memcpy(d, &v, 4);
    } else {
      std::memcpy(d, src + static_cast<size_t>(i) * ies, es);
    }
  }
  return out;
}

Expected<std::unique_ptr<CudaEngine>> CudaEngine::create(
    graph::Graph g, EngineInfo info, ExecutionPlan plan,
    std::vector<std::unique_ptr<builder::Tactic>> tactics,
    std::vector<std::unique_ptr<builder::TacticProvider>> providers, int deviceId) {
  std::unique_ptr<CudaEngine> e(new CudaEngine());
  e->graph_ = std::make_unique<graph::Graph>(std::move(g));
  e->info_ = std::move(info);
  e->info_.nodeCount = static_cast<int64_t>(e->graph_->nodes.size());
  e->info_.weightBytes = constantBytes(*e->graph_);
  e->plan_ = std::move(plan);
  e->providers_ = std::move(providers);
  e->deviceId_ = deviceId;
  for (const auto& n : e->graph_->inputs) e->inputs_.push_back(describeValue(*e->graph_, n));
  for (const auto& n : e->graph_->outputs) e->outputs_.push_back(describeValue(*e->graph_, n));
  tactics.resize(e->plan_.steps.size());
  EI_RETURN_IF_ERROR(e->materialize(std::move(tactics)));
  return e;
}

CudaEngine::~CudaEngine() {
  tactics_.clear();
  constants_.clear();
}

const Shape& CudaEngine::tensorShape(int tensor) const {
  return graph_->findValue(plan_.tensors[static_cast<size_t>(tensor)].value)->shape;
}

Status CudaEngine::materialize(std::vector<std::unique_ptr<builder::Tactic>> tactics) {
  const graph::Graph& g = *graph_;
  const Clock::time_point t0 = Clock::now();
  LoadProfile profile;
  EI_CUDA_CHECK(cudaSetDevice(deviceId_));
  size_t freeBefore = 0, total = 0;
  EI_CUDA_CHECK(cudaMemGetInfo(&freeBefore, &total));
  const size_t numTensors = plan_.tensors.size();
  const size_t numSteps = plan_.steps.size();

  // Tensors: sizes, storage roots.
  bytes_.resize(numTensors);
  roots_.resize(numTensors);
  for (size_t t = 0; t < numTensors; ++t) {
    const PlanTensor& pt = plan_.tensors[t];
    const Shape& s = g.findValue(pt.value)->shape;
    for (int64_t d : s.dims())
      if (d < 0)
        return Status(ErrorCode::kInvalidArgument,
                      "GPU engines need static shapes; '" + pt.value + "' is " + s.toString());
    bytes_[t] = s.numel() * static_cast<int64_t>(dataTypeSize(pt.format.dtype));
    int r = static_cast<int>(t);
    for (int hops = 0; plan_.tensors[static_cast<size_t>(r)].aliasOf >= 0; ++hops) {
      r = plan_.tensors[static_cast<size_t>(r)].aliasOf;
      if (hops > static_cast<int>(numTensors))
        return Status(ErrorCode::kCorruptFile, "engine plan: circular tensor aliases");
    }
    roots_[t] = r;
  }

  // Tactics: created by id where not handed over, then initialised (weights to the device).
  tactics_.resize(numSteps);
  layers_.resize(numSteps);
  for (size_t i = 0; i < numSteps; ++i) {
    const PlanStep& s = plan_.steps[i];
    if (s.node >= 0) {
      layers_[i] = makeLayerContext(g, static_cast<size_t>(s.node));
      // INT8 tactics quantize their weights for the scales of the tensors they read and write.
      const auto scaleOf = [&](int t) {
        return t >= 0 ? plan_.tensors[static_cast<size_t>(t)].scale : 0.f;
      };
      for (int t : s.inputs) layers_[i].inputScales.push_back(scaleOf(t));
      for (int t : s.outputs) layers_[i].outputScales.push_back(scaleOf(t));
      // A folded residual: the folded layer with its scales (its view step's input and output).
      if (const int f = foldedInto(plan_, g, i); f >= 0) {
        const PlanStep& v = plan_.steps[static_cast<size_t>(f)];
        auto d = std::make_shared<builder::LayerContext>(
            makeLayerContext(g, static_cast<size_t>(v.node)));
        d->inputScales.assign(d->inputShapes.size(), 0.f);
        d->inputScales[0] = scaleOf(v.inputs[0]);
        d->outputScales.assign(d->outputShapes.size(), 0.f);
        d->outputScales[0] = scaleOf(v.outputs[0]);
        layers_[i].foldedZ = std::move(d);
      }
      // A chained layer: its context with its scales (the step's output 0 and last output),
      // and its output as the layer's last.
      if (const int c = chainedNode(plan_, g, i); c >= 0) {
        auto cl =
            std::make_shared<builder::LayerContext>(makeLayerContext(g, static_cast<size_t>(c)));
        cl->inputScales.assign(cl->inputShapes.size(), 0.f);
        cl->inputScales[0] = scaleOf(s.outputs[0]);
        cl->outputScales.assign(cl->outputShapes.size(), 0.f);
        cl->outputScales[0] = scaleOf(s.outputs.back());
        layers_[i].outputShapes.push_back(cl->outputShapes[0]);
        layers_[i].outputTypes.push_back(cl->outputTypes[0]);
        layers_[i].chained = std::move(cl);
      }
    }
    if (s.kind == StepKind::kCpu) ++cpuSteps_;
    if (s.kind != StepKind::kTactic) continue;
    if (tactics[i]) {  // from the builder, initialised: keep its state for serialize()
      tactics_[i] = std::move(tactics[i]);
      plan_.steps[i].state = tactics_[i]->serializedState();
      continue;
    }
    const Clock::time_point tf = Clock::now();
    EI_ASSIGN_OR_RETURN(tactics_[i], edgeinfer::cuda::findTactic(providers_, layers_[i],
                                                                 s.precision, s.tactic, s.state));
    const Clock::time_point ti = Clock::now();
    EI_RETURN_IF_ERROR(
        tactics_[i]
            ->initialize(layers_[i])
            .withContext("layer '" + layers_[i].node->name + "' tactic " + s.tactic));
    profile.add(i, std::chrono::duration<double, std::milli>(ti - tf).count(), msSince(ti));
  }
  for (size_t i = 0; i < numSteps; ++i)
    if (tactics_[i]) workspace_ = std::max(workspace_, tactics_[i]->workspaceBytes());

  // Constants the tactics read as inputs, uploaded once in the format they want.
  const Clock::time_point tc = Clock::now();
  constants_.assign(numTensors, nullptr);
  for (size_t t = 0; t < numTensors; ++t) {
    const PlanTensor& pt = plan_.tensors[t];
    if (!pt.constant) continue;
    const Tensor* c = g.constant(pt.value);
    if (!c) return Status(ErrorCode::kCorruptFile, "constant '" + pt.value + "' is missing");
    EI_ASSIGN_OR_RETURN(std::vector<uint8_t> host, toStorageFormat(*c, pt.format));
    EI_RETURN_IF_ERROR(edgeinfer::cuda::uploadWeights(host.data(), host.size(), &constants_[t]));
  }
  const double constantsMs = msSince(tc);

  // Streams (stream_schedule.h): steps touching no common storage may run side by side.
  std::vector<StepAccess> access(numSteps);
  for (size_t i = 0; i < numSteps; ++i) {
    const PlanStep& s = plan_.steps[i];
    StepAccess& a = access[i];
    a.work = s.kind == StepKind::kTactic || s.kind == StepKind::kReformat;
    const auto root = [&](int t) { return roots_[static_cast<size_t>(t)]; };
    for (int t : s.inputs)
      if (t >= 0 && !plan_.tensors[static_cast<size_t>(t)].constant) a.reads.push_back(root(t));
    for (int t : s.outputs)
      if (t >= 0) a.writes.push_back(root(t));
  }
  schedule_ =
      scheduleStreams(access, cpuSteps_ > 0 || concurrencyDisabledByEnv() ? 1 : kMaxStreams);

  // Activation memory: one arena per context, offsets by liveness. A root lives from the step
  // that writes it (graph inputs: before the first) to the last step reading it or any of its
  // views (graph outputs: to the end), and on over every step that may run beside one of
  // those (the schedule's windows): bytes a step uses are never reused by a step running at
  // the same time.
  std::vector<int64_t> first(numTensors, -1), last(numTensors, -1);
  const int64_t end = static_cast<int64_t>(numSteps);
  for (const auto& [name, t] : plan_.graphInputs) first[static_cast<size_t>(roots_[t])] = 0;
  for (size_t i = 0; i < numSteps; ++i) {
    const PlanStep& s = plan_.steps[i];
    for (int t : s.outputs) {
      auto& f = first[static_cast<size_t>(roots_[static_cast<size_t>(t)])];
      if (f < 0) f = static_cast<int64_t>(i);
    }
    for (int t : s.inputs)
      if (t >= 0)
        last[static_cast<size_t>(roots_[static_cast<size_t>(t)])] = static_cast<int64_t>(i);
    for (int t : s.outputs) {  // written: live at least at this step
      auto& l = last[static_cast<size_t>(roots_[static_cast<size_t>(t)])];
      l = std::max(l, static_cast<int64_t>(i));
    }
  }
  // The last step to read each root (graph outputs: none, the user reads them): its reads of
  // that input may leave the L2 first (builder::LaunchArgs::lastReads).
  {
    std::vector<int64_t> lastRead(numTensors, -1);
    for (size_t i = 0; i < numSteps; ++i)
      for (int t : plan_.steps[i].inputs)
        if (t >= 0)
          lastRead[static_cast<size_t>(roots_[static_cast<size_t>(t)])] = static_cast<int64_t>(i);
    for (const auto& [name, t] : plan_.graphOutputs) lastRead[static_cast<size_t>(roots_[t])] = -1;
    lastReads_.assign(numSteps, 0u);
    const char* off = std::getenv("EDGEINFER_DISABLE_L2_HINTS");  // to measure without
    for (size_t i = 0; i < numSteps && !(off && off[0] == '1'); ++i) {
      const auto& in = plan_.steps[i].inputs;
      for (size_t k = 0; k < in.size() && k < 32; ++k)
        if (in[k] >= 0 && !plan_.tensors[static_cast<size_t>(in[k])].constant &&
            lastRead[static_cast<size_t>(roots_[static_cast<size_t>(in[k])])] ==
                static_cast<int64_t>(i))
          lastReads_[i] |= 1u << k;
    }
  }
  stretchLifetimes(access, schedule_, &last);
  for (const auto& [name, t] : plan_.graphOutputs) last[static_cast<size_t>(roots_[t])] = end;
  for (const auto& [name, t] : plan_.graphInputs) {
    auto& l = last[static_cast<size_t>(roots_[t])];
    l = std::max<int64_t>(l, 0);
  }
  std::vector<BufferRequest> requests;
  for (size_t t = 0; t < numTensors; ++t) {
    if (roots_[t] != static_cast<int>(t) || plan_.tensors[t].constant || first[t] < 0) continue;
    requests.push_back(BufferRequest{std::to_string(t), std::max<int64_t>(bytes_[t], 1), first[t],
                                     std::max(last[t], first[t])});
  }
  EI_ASSIGN_OR_RETURN(memory_, planMemory(requests, kArenaAlignment));
  offsets_.assign(numTensors, -1);
  for (const auto& r : requests)
    offsets_[static_cast<size_t>(std::stoll(r.name))] = memory_.offsets.at(r.name);

  size_t freeAfter = 0;
  EI_CUDA_CHECK(cudaMemGetInfo(&freeAfter, &total));
  weightBytes_ = freeBefore > freeAfter ? static_cast<int64_t>(freeBefore - freeAfter) : 0;
  profile.log(plan_, layers_, constantsMs, msSince(t0));
  return Status::Ok();
}

Expected<std::vector<uint8_t>> CudaEngine::serialize() const {
  return builder::encodeEngine(*graph_, info_, planToJson(plan_, *graph_));
}

}  // namespace edgeinfer::runtime::cuda
