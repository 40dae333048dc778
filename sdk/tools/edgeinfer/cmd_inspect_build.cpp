#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "edgeinfer/engine.h"

namespace edgeinfer::cli {

namespace {

/// "512 bytes", "12.5 KiB", "97.81 MiB".
std::string humanBytes(double b) {
  char buf[32];
  if (b < 1024)
    std::snprintf(buf, sizeof buf, "%.0f bytes", b);
  else if (b < 1048576)
    std::snprintf(buf, sizeof buf, "%.1f KiB", b / 1024);
  else
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / 1048576);
  return buf;
}

/// What `inspect` prints for an engine file: its facts, inputs, outputs and shape profiles.
int inspectEngine(const std::string& path) {
  auto engine = Engine::load(path);
  if (!engine.ok()) return fail(engine.status());
  const Engine& e = **engine;
  const EngineInfo& info = e.info();
  const std::vector<ShapeProfile> profiles = e.profiles();
  std::printf("engine %s\n", path.c_str());
  std::printf("  backend %s, precision %s, device %s\n", backendName(info.backend),
              precisionName(info.precision), info.deviceKey.c_str());
  std::printf("  model '%s' (hash %s), %lld nodes, built by EdgeInfer %s\n", info.modelName.c_str(),
              info.modelHash.c_str(), static_cast<long long>(info.nodeCount),
              info.sdkVersion.c_str());
  const double weights = static_cast<double>(info.weightBytes);
  if (profiles.size() > 1)
    std::printf("  weights %s: %s per shape profile, each profile holds its own copy\n",
                humanBytes(weights).c_str(),
                humanBytes(weights / static_cast<double>(profiles.size())).c_str());
  else
    std::printf("  weights %s\n", humanBytes(weights).c_str());
  std::printf("inputs%s:\n", profiles.size() > 1        ? " (?: differs between profiles)"
                             : !e.shapeRanges().empty() ? " (?: varies within the shape ranges)"
                                                        : "");
  for (const auto& d : e.inputs())
    std::printf("  %s: %s\n", d.name.c_str(), describeTensor(d).c_str());
  std::printf("outputs:\n");
  for (const auto& d : e.outputs())
    std::printf("  %s: %s\n", d.name.c_str(), describeTensor(d).c_str());
  const ShapeRanges ranges = e.shapeRanges();
  if (!ranges.empty()) {
    std::printf(
        "shape ranges (min .. opt .. max; built for opt, other shapes specialised on "
        "their first run):\n");
    for (const auto& [name, r] : ranges)
      std::printf("  %s\n", formatShapeRanges({{name, r}}).c_str());
    return 0;
  }
  std::printf("shape profiles (%zu):\n", profiles.size());
  for (size_t i = 0; i < profiles.size(); ++i)
    std::printf("  [%zu] %s\n", i, formatShapeProfile(profiles[i]).c_str());
  return 0;
}

}  // namespace

int cmdInspect(const Args& a) {
  if (a.has("help") || a.positional.size() != 1) {
    std::cout << "usage: edgeinfer inspect MODEL.onnx|ENGINE [builder options]\n\n"
                 "A model: the graph before and after optimisation, with shapes (of the first\n"
                 "--shapes, when given). An engine: its facts, inputs, outputs and shape "
                 "profiles.\n\n"
              << kBuilderOptionsHelp;
    return a.has("help") ? 0 : 2;
  }
  if (isEngineFile(a.positional[0])) return inspectEngine(a.positional[0]);
  auto cfg = builderConfigFrom(a);
  if (!cfg.ok()) return fail(cfg.status());
  auto text = Builder::inspect(a.positional[0], *cfg);
  if (!text.ok()) return fail(text.status());
  std::cout << *text;
  return 0;
}

int cmdBuild(const Args& a) {
  if (a.has("help") || a.positional.size() != 1 || !a.has("output")) {
    std::cout << "usage: edgeinfer build MODEL.onnx -o ENGINE [--build-report FILE.json] "
                 "[builder options]\n\n"
              << kBuilderOptionsHelp;
    return a.has("help") ? 0 : 2;
  }
  auto cfg = builderConfigFrom(a);
  if (!cfg.ok()) return fail(cfg.status());
  if (Status s = calibrateFromData(a, a.positional[0], a.get("output") + ".calib", *cfg); !s.ok())
    return fail(s);
  const auto t0 = std::chrono::steady_clock::now();
  auto engine = Builder::buildFromFile(a.positional[0], *cfg);
  if (!engine.ok()) return fail(engine.status());
  const double buildS =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Status s = (*engine)->save(a.get("output"));
  if (!s.ok()) return fail(s);
  const EngineInfo& info = (*engine)->info();
  const std::vector<ShapeProfile> profiles = (*engine)->profiles();
  std::string profileText;
  nlohmann::json profileJson = nlohmann::json::array();
  for (size_t i = 0; i < profiles.size(); ++i) {
    profileText += (i ? "; [" : "[") + std::to_string(i) + "] " + formatShapeProfile(profiles[i]);
    profileJson.push_back(formatShapeProfile(profiles[i]));
  }
  if (a.has("build-report")) {
    std::ofstream f(a.get("build-report"));
    const nlohmann::json j = {{"model", a.positional[0]},
                              {"engine", a.get("output")},
                              {"backend", backendName(info.backend)},
                              {"precision", precisionName(info.precision)},
                              {"device", info.deviceKey},
                              {"nodes", info.nodeCount},
                              {"shape_profiles", profileJson},
                              {"shape_ranges", formatShapeRanges((*engine)->shapeRanges())},
                              {"weight_bytes", info.weightBytes},
                              {"build_seconds", buildS}};
    f << j.dump(1) << "\n";
    if (!f)
      return fail(Status(ErrorCode::kIoError, "cannot write '" + a.get("build-report") + "'"));
  }
  std::cout << "engine written to " << a.get("output") << " (backend " << backendName(info.backend)
            << ", " << info.nodeCount << " nodes, device " << info.deviceKey << ")\n";
  if (!(*engine)->shapeRanges().empty())
    std::cout << "shape ranges " << formatShapeRanges((*engine)->shapeRanges())
              << ": built for the opt shapes, other shapes specialised on their first run\n";
  if (profiles.size() > 1)
    std::cout << profiles.size() << " shape profiles, each with its own copy of the weights in "
              << "the file ("
              << humanBytes(static_cast<double>(info.weightBytes) /
                            static_cast<double>(profiles.size()))
              << " per profile"
              << (info.backend == Backend::kCuda ? "; weights converted alike held once on the GPU"
                                                 : "")
              << "): " << profileText << "\n";
  return 0;
}

}  // namespace edgeinfer::cli
