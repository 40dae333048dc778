#include <chrono>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "edgeinfer/engine.h"

namespace edgeinfer::cli {

int cmdInspect(const Args& a) {
  if (a.has("help") || a.positional.size() != 1) {
    std::cout << "usage: edgeinfer inspect MODEL.onnx [builder options]\n\n" << kBuilderOptionsHelp;
    return a.has("help") ? 0 : 2;
  }
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
  const auto t0 = std::chrono::steady_clock::now();
  auto engine = Builder::buildFromFile(a.positional[0], *cfg);
  if (!engine.ok()) return fail(engine.status());
  const double buildS =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  Status s = (*engine)->save(a.get("output"));
  if (!s.ok()) return fail(s);
  const EngineInfo& info = (*engine)->info();
  if (a.has("build-report")) {
    std::ofstream f(a.get("build-report"));
    const nlohmann::json j = {{"model", a.positional[0]},
                              {"engine", a.get("output")},
                              {"backend", backendName(info.backend)},
                              {"precision", precisionName(info.precision)},
                              {"device", info.deviceKey},
                              {"nodes", info.nodeCount},
                              {"build_seconds", buildS}};
    f << j.dump(1) << "\n";
    if (!f)
      return fail(Status(ErrorCode::kIoError, "cannot write '" + a.get("build-report") + "'"));
  }
  std::cout << "engine written to " << a.get("output") << " (backend " << backendName(info.backend)
            << ", " << info.nodeCount << " nodes, device " << info.deviceKey << ")\n";
  return 0;
}

}  // namespace edgeinfer::cli
