// `edgeinfer bench`: the numbers speed goals are checked against (docs/performance.md) —
// latency percentiles, throughput and activation memory of one model or engine.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <system_error>
#include <thread>

#include "cli.h"

namespace edgeinfer::cli {
namespace {

const char* kBenchHelp = R"(usage: edgeinfer bench MODEL.onnx|ENGINE [options]

  --iterations N      timed runs (default 200)
  --warmup N          untimed runs first (default 20)
  --json FILE         also write the results as JSON (for scripts/bench)
  --device-inputs     GPU engines: inputs stay on the GPU (copied there once), as a camera
                      pipeline with GPU decode has them; default: copied from the host each run
  --no-cuda-graphs    GPU engines: launch layer by layer instead of replaying a CUDA graph
  --contexts N        N execution contexts of the one engine (1 to 64, default 1), each run
                      by a thread of its own, all at once (GPU: a stream each, so one's kernels
                      fill the GPU where another's leave it idle, as in a server or an
                      offline throughput run); each runs --iterations times, and throughput
                      is all the runs' inferences over the wall time of the timed runs
  --shapes NAME:DxDx..[,..] input shapes: an engine's shape profile to feed (default: its
                      first); for a model, as in build (repeated: one profile each, the first
                      is run)
  --input / --inputs / --dim / --seed    inputs, as for `edgeinfer run` (default random)
)";

double percentile(const std::vector<double>& sorted, double p) {
  const double pos = p * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - static_cast<double>(lo));
}

/// --contexts: 1 without it; an error for anything but a number from 1 to 64.
Expected<int> contextCount(const Args& a) {
  if (!a.has("contexts")) return 1;
  const std::string text = a.get("contexts");
  char* end = nullptr;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || !end || *end || n < 1 || n > 64)
    return Status(
        ErrorCode::kInvalidArgument,
        "--contexts needs a number of execution contexts from 1 to 64, not '" + text + "'");
  return static_cast<int>(n);
}

/// Runs every context `iters` times, each on a thread of its own, all starting together:
/// each run's latency (ms) and, on the GPU, its layers' GPU time to the vectors, and the wall
/// time from the start to the last run's end. The first failing run's status, if any.
Status runConcurrently(std::vector<std::unique_ptr<ExecutionContext>>& ctxs, int iters, bool gpu,
                       std::vector<double>& ms, std::vector<double>& gpuMs, double& wallMs) {
  const size_t n = ctxs.size();
  std::vector<std::vector<double>> lat(n), gpuLat(n);
  std::vector<Status> status(n);
  std::atomic<size_t> ready{0};
  std::atomic<bool> go{false}, abandon{false};
  std::vector<std::thread> threads;
  threads.reserve(n);
  for (size_t c = 0; c < n; ++c) {
    const auto body = [&, c] {
      lat[c].reserve(static_cast<size_t>(iters));
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      if (abandon.load()) return;
      for (int i = 0; i < iters; ++i) {
        const auto t = std::chrono::steady_clock::now();
        Status s = ctxs[c]->execute();
        if (!s.ok()) {
          status[c] = s;
          return;
        }
        lat[c].push_back(
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t)
                .count());
        if (gpu) gpuLat[c].push_back(ctxs[c]->stats().lastGpuMs);
      }
    };
    try {
      threads.emplace_back(body);
    } catch (const std::system_error& e) {  // no thread to be had: release those started
      abandon.store(true);
      go.store(true, std::memory_order_release);
      for (auto& t : threads) t.join();
      return Status(ErrorCode::kOutOfMemory, "cannot start the thread of context " +
                                                 std::to_string(c + 1) + " of " +
                                                 std::to_string(n) + ": " + e.what());
    }
  }
  while (ready.load() < n) std::this_thread::yield();
  const auto start = std::chrono::steady_clock::now();
  go.store(true, std::memory_order_release);
  for (auto& t : threads) t.join();
  wallMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (size_t c = 0; c < n; ++c) {
    if (!status[c].ok())
      return status[c].withContext("context " + std::to_string(c + 1) + " of " + std::to_string(n));
    ms.insert(ms.end(), lat[c].begin(), lat[c].end());
    gpuMs.insert(gpuMs.end(), gpuLat[c].begin(), gpuLat[c].end());
  }
  return Status::Ok();
}

}  // namespace

int cmdBench(const Args& a) {
  std::vector<Tensor> deviceInputs;  // keeps --device-inputs copies alive
  if (a.has("help") || a.positional.size() != 1) {
    std::cout << kBenchHelp << "\n" << kBuilderOptionsHelp;
    return a.has("help") ? 0 : 2;
  }
  const int warmup = std::max(0, std::atoi(a.get("warmup", "20").c_str()));
  const int iters = std::max(1, std::atoi(a.get("iterations", "200").c_str()));
  const auto contexts = contextCount(a);
  if (!contexts.ok()) return fail(contexts.status());
  const auto t0 = std::chrono::steady_clock::now();
  auto engine = loadEngine(a.positional[0], a);
  if (!engine.ok()) return fail(engine.status());
  const double loadMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ContextOptions copts;
  if (a.has("no-cuda-graphs")) copts.cudaGraphs = false;
  // Every context reads the same inputs (bound once per context; device copies made once).
  std::vector<std::unique_ptr<ExecutionContext>> ctxs;
  for (int c = 0; c < *contexts; ++c) {
    auto made = (*engine)->createExecutionContext(copts);
    if (!made.ok()) return fail(made.status());
    ctxs.push_back(std::move(*made));
  }
  auto& ctx = ctxs.front();
  auto inputs = bindInputs(**engine, *ctx, a);
  if (!inputs.ok()) return fail(inputs.status());
  const bool gpu = (*engine)->info().backend == Backend::kCuda;
  if (a.has("device-inputs")) {
    if (!gpu)
      return fail(Status(ErrorCode::kInvalidArgument, "--device-inputs needs a GPU engine"));
    for (const auto& [name, t] : *inputs) {
      auto d = copyToDevice(t);
      if (!d.ok()) return fail(d.status());
      deviceInputs.push_back(*d);
    }
  }
  for (auto& c : ctxs) {
    size_t i = 0;
    for (const auto& [name, t] : *inputs) {
      Status s = c->setInput(name, a.has("device-inputs") ? deviceInputs[i++] : t);
      if (!s.ok()) return fail(s);
    }
  }
  // Batch = the first dimension of the first input (1 for scalars).
  const Shape& s0 = inputs->begin()->second.shape();
  const int64_t batch = s0.rank() > 0 ? s0[0] : 1;

  for (auto& c : ctxs)
    for (int i = 0; i < warmup; ++i) {
      Status s = c->execute();
      if (!s.ok()) return fail(s);
    }
  std::vector<double> ms, gpuMs;
  double wallMs = 0;
  ms.reserve(static_cast<size_t>(iters) * ctxs.size());
  if (ctxs.size() == 1) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < iters; ++i) {
      const auto s0t = std::chrono::steady_clock::now();
      Status s = ctx->execute();
      if (!s.ok()) return fail(s);
      ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0t)
                       .count());
      if (gpu) gpuMs.push_back(ctx->stats().lastGpuMs);
    }
    wallMs =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  } else {
    Status s = runConcurrently(ctxs, iters, gpu, ms, gpuMs, wallMs);
    if (!s.ok()) return fail(s);
  }
  // One context: batch / median latency; several: every run's inferences over the wall time.
  const double throughput = ctxs.size() == 1 ? 0.0
                                             : 1000.0 * static_cast<double>(batch) *
                                                   static_cast<double>(ms.size()) / wallMs;
  std::sort(ms.begin(), ms.end());
  std::sort(gpuMs.begin(), gpuMs.end());
  const double gpuP50 = gpuMs.empty() ? 0.0 : percentile(gpuMs, 0.5);
  double mean = 0;
  for (double v : ms) mean += v;
  mean /= static_cast<double>(ms.size());
  const double p50 = percentile(ms, 0.5), p90 = percentile(ms, 0.9), p99 = percentile(ms, 0.99);
  const ContextStats st = ctx->stats();
  const EngineInfo& info = (*engine)->info();

  std::printf("model: %s (backend %s, precision %s, %lld nodes, device %s)\n",
              a.positional[0].c_str(), backendName(info.backend), precisionName(info.precision),
              static_cast<long long>(info.nodeCount), info.deviceKey.c_str());
  ShapeProfile bound;
  for (const auto& [name, t] : *inputs) bound[name] = t.shape();
  const size_t profileCount = (*engine)->profiles().size();
  std::printf("build/load: %.1f ms; batch %lld; %d runs after %d warm-up runs\n", loadMs,
              static_cast<long long>(batch), iters, warmup);
  std::printf("input shapes: %s%s\n", formatShapeProfile(bound).c_str(),
              profileCount > 1
                  ? (" (one of " + std::to_string(profileCount) + " shape profiles)").c_str()
                  : "");
  if (!(*engine)->shapeRanges().empty())
    std::printf(
        "shape ranges %s: %lld specialisation(s) for these shapes, %.1f ms (in the first run: "
        "--warmup 0 counts it in the latency)\n",
        formatShapeRanges((*engine)->shapeRanges()).c_str(),
        static_cast<long long>(st.shapeSpecializations), st.specializationMs);
  std::printf("latency (ms): mean %.3f  p50 %.3f  p90 %.3f  p99 %.3f  min %.3f  max %.3f\n", mean,
              p50, p90, p99, ms.front(), ms.back());
  const double perSecond =
      ctxs.size() == 1 ? 1000.0 * static_cast<double>(batch) / p50 : throughput;
  if (ctxs.size() == 1)
    std::printf("throughput: %.1f inferences/s (batch %lld / median latency)\n", perSecond,
                static_cast<long long>(batch));
  else
    std::printf(
        "throughput: %.1f inferences/s (%zu contexts at once: %zu runs of batch %lld in %.1f ms "
        "of wall time)\n",
        perSecond, ctxs.size(), ms.size(), static_cast<long long>(batch), wallMs);
  std::printf("activation memory: %.1f KiB planned (%.1f KiB without reuse)%s\n",
              static_cast<double>(st.activationArenaBytes) / 1024.0,
              static_cast<double>(st.activationNaiveBytes) / 1024.0,
              ctxs.size() > 1 ? " per context" : "");
  if (gpu) {
    if (ctxs.size() == 1)
      std::printf(
          "GPU time (layers, CUDA events): p50 %.4f ms -> %.1f inferences/s; host overhead "
          "(latency - GPU, incl. copies) p50 %.4f ms\n",
          gpuP50, gpuP50 > 0 ? 1000.0 * static_cast<double>(batch) / gpuP50 : 0.0, p50 - gpuP50);
    else  // a run's span on the GPU shares the GPU with the other contexts' runs
      std::printf(
          "GPU time of a run (layers, CUDA events; the GPU shared with %zu other contexts): "
          "p50 %.4f ms\n",
          ctxs.size() - 1, gpuP50);
    std::printf(
        "inputs %s; outputs written to the host by the GPU %lld (the others copied); CUDA "
        "graphs %s (%lld captured, %lld updated, %lld replays); streams %lld; workspace %.1f "
        "KiB; CPU-fallback layers %lld%s\n",
        a.has("device-inputs") ? "on the GPU" : "copied from the host",
        static_cast<long long>(st.zeroCopyOutputs), st.cudaGraphs ? "on" : "off",
        static_cast<long long>(st.graphCaptures), static_cast<long long>(st.graphUpdates),
        static_cast<long long>(st.graphReplays), static_cast<long long>(st.streams),
        static_cast<double>(st.workspaceBytes) / 1024.0,
        static_cast<long long>(st.cpuFallbackLayers),
        ctxs.size() > 1 ? " (the first context's; each has its own)" : "");
    std::printf(
        "device memory of the engine (weights, constants, plans; equal weights held once): "
        "%.1f MiB%s\n",
        static_cast<double>((*engine)->deviceWeightBytes()) / 1048576.0,
        profileCount > 1 ? (" for its " + std::to_string(profileCount) + " shape profiles").c_str()
                         : "");
  }
  if (a.has("json")) {
    std::ofstream f(a.get("json"));
    if (!f) return fail(Status(ErrorCode::kIoError, "cannot write '" + a.get("json") + "'"));
    nlohmann::json j = {
        {"model", a.positional[0]},
        {"backend", backendName(info.backend)},
        {"precision", precisionName(info.precision)},
        {"device", info.deviceKey},
        {"batch", batch},
        {"input_shapes", formatShapeProfile(bound)},
        {"shape_profiles", profileCount},
        {"iterations", iters},
        {"mean_ms", mean},
        {"p50_ms", p50},
        {"p90_ms", p90},
        {"p99_ms", p99},
        {"min_ms", ms.front()},
        {"max_ms", ms.back()},
        {"contexts", ctxs.size()},
        {"wall_ms", wallMs},
        {"throughput_per_s", perSecond},
        {"activation_bytes", st.activationArenaBytes},
        {"activation_naive_bytes", st.activationNaiveBytes},
        {"workspace_bytes", st.workspaceBytes},
        {"device_weight_bytes", (*engine)->deviceWeightBytes()},
        {"gpu_p50_ms", gpuP50},
        {"gpu_throughput_per_s",
         gpuP50 > 0 && ctxs.size() == 1 ? 1000.0 * static_cast<double>(batch) / gpuP50 : 0.0},
        {"host_overhead_p50_ms", gpu && ctxs.size() == 1 ? p50 - gpuP50 : 0.0},
        {"device_inputs", a.has("device-inputs")},
        {"cuda_graphs", st.cudaGraphs},
        {"graph_replays", st.graphReplays},
        {"streams", st.streams},
        {"zero_copy_outputs", st.zeroCopyOutputs},
        {"cpu_fallback_layers", st.cpuFallbackLayers},
        {"load_ms", loadMs},
        {"shape_ranges", formatShapeRanges((*engine)->shapeRanges())},
        {"shape_specializations", st.shapeSpecializations},
        {"specialization_ms", st.specializationMs}};
    f << j.dump(1) << "\n";
  }
  return 0;
}

}  // namespace edgeinfer::cli
