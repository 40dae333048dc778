#include <sys/stat.h>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>

#include "cli.h"
#include "core/npy.h"
#include "edgeinfer/engine.h"

namespace edgeinfer::cli {
namespace {

const char* kRunHelp = R"(usage: edgeinfer run MODEL.onnx|ENGINE [options]

  --input NAME=FILE.npy     bind an input from a .npy file (repeatable)
  --inputs DIR              bind every input from DIR/<input name>.npy
  --outputs DIR             write every output as DIR/<output name>.npy
  --shapes NAME:DxDx..[,..] input shapes to run: an engine's shape profile to feed (default:
                            its first); for a model, as in build (repeated: one profile each,
                            the first is run)
  --dim NAME=VALUE          value of a named dynamic dimension for random inputs (default 1)
  --seed N                  seed of the random inputs (default 0)
  --iterations N            timed runs (default 1)
  --warmup N                untimed runs first (default 0)
)";

void printSummary(const std::string& name, const Tensor& t) {
  std::cout << "  " << name << ": " << t.describe();
  const int64_t n = t.numel();
  if (n > 0) {
    double mn = t.getAsDouble(0), mx = mn, sum = 0;
    int64_t nonFinite = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double v = t.getAsDouble(i);
      if (!std::isfinite(v)) {
        ++nonFinite;
        continue;
      }
      mn = std::min(mn, v);
      mx = std::max(mx, v);
      sum += v;
    }
    std::cout << std::setprecision(6) << "  min " << mn << "  max " << mx << "  mean " << sum / n;
    if (nonFinite) std::cout << "  (" << nonFinite << " NaN/Inf)";
    std::cout << "\n    first:";
    for (int64_t i = 0; i < std::min<int64_t>(n, 8); ++i) std::cout << " " << t.getAsDouble(i);
  }
  std::cout << "\n";
}

}  // namespace

int cmdRun(const Args& a) {
  if (a.has("help") || a.positional.size() != 1) {
    std::cout << kRunHelp << "\n" << kBuilderOptionsHelp;
    return a.has("help") ? 0 : 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto engine = loadEngine(a.positional[0], a);
  if (!engine.ok()) return fail(engine.status());
  const double loadMs =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ContextOptions copts;
  if (a.has("no-cuda-graphs")) copts.cudaGraphs = false;
  auto ctx = (*engine)->createExecutionContext(copts);
  if (!ctx.ok()) return fail(ctx.status());
  std::cout << "inputs:\n";
  auto inputs = bindInputs(**engine, **ctx, a);
  if (!inputs.ok()) return fail(inputs.status());
  for (const auto& d : (*engine)->inputs()) printSummary(d.name, inputs->at(d.name));
  if ((*engine)->profiles().size() > 1) {
    ShapeProfile bound;
    for (const auto& [name, t] : *inputs) bound[name] = t.shape();
    std::cout << "shape profile: " << formatShapeProfile(bound) << " (of "
              << (*engine)->profiles().size() << ")\n";
  }
  if (!(*engine)->shapeRanges().empty()) {
    ShapeProfile bound;
    for (const auto& [name, t] : *inputs) bound[name] = t.shape();
    std::cout << "input shapes " << formatShapeProfile(bound) << " within the shape ranges "
              << formatShapeRanges((*engine)->shapeRanges()) << "\n";
  }
  const int warmup = std::max(0, std::atoi(a.get("warmup", "0").c_str()));
  const int iters = std::max(1, std::atoi(a.get("iterations", "1").c_str()));
  for (int i = 0; i < warmup; ++i) {
    Status s = (*ctx)->execute();
    if (!s.ok()) return fail(s);
  }
  std::vector<double> ms;
  for (int i = 0; i < iters; ++i) {
    const auto s0 = std::chrono::steady_clock::now();
    Status s = (*ctx)->execute();
    if (!s.ok()) return fail(s);
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s0).count());
  }
  std::cout << "outputs:\n";
  if (a.has("outputs")) ::mkdir(a.get("outputs").c_str(), 0755);
  for (const auto& d : (*engine)->outputs()) {
    auto t = (*ctx)->getOutput(d.name);
    if (!t.ok()) return fail(t.status());
    printSummary(d.name, *t);
    if (a.has("outputs")) {
      const std::string file = a.get("outputs") + "/" + safeName(d.name) + ".npy";
      Status s = writeNpy(file, *t);
      if (!s.ok()) return fail(s);
      std::cout << "    written to " << file << "\n";
    }
  }
  const ContextStats st = (*ctx)->stats();
  if (st.activationArenaBytes > 0)
    std::cout << "memory: activations " << st.activationArenaBytes / 1024
              << " KiB after liveness planning (" << st.activationNaiveBytes / 1024
              << " KiB without reuse)\n";
  std::sort(ms.begin(), ms.end());
  double mean = 0;
  for (double v : ms) mean += v;
  mean /= static_cast<double>(ms.size());
  std::cout << std::fixed << std::setprecision(3) << "timing: build/load " << loadMs << " ms; "
            << iters << " run(s): mean " << mean << " ms, median " << ms[ms.size() / 2]
            << " ms, min " << ms.front() << " ms, max " << ms.back() << " ms (backend "
            << backendName((*engine)->info().backend) << ")\n";
  return 0;
}

}  // namespace edgeinfer::cli
