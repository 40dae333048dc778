// edgeinfer: build, inspect and run engines from the command line (like trtexec).
#include <cstring>
#include <iostream>

#include "cli.h"
#include "edgeinfer/engine.h"
#include "edgeinfer/logger.h"
#include "edgeinfer/tensor.h"
#include "edgeinfer/types.h"

namespace {

const char* kUsage = R"(usage: edgeinfer <command> [options]

commands:
  inspect MODEL.onnx|ENGINE     a model: the graph before and after optimisation, with shapes;
                                an engine: its facts, inputs, outputs and shape profiles
  build   MODEL.onnx -o FILE    build an engine and save it (--shapes NAME:1x3x224x224, repeated
                                for one shape profile each)
  run     MODEL.onnx|FILE       run a model or a saved engine and print its outputs
  bench   MODEL.onnx|FILE       latency percentiles, throughput and memory of a model or engine
  bench-vision preprocess|nms   GPU frame preprocessing and NMS benchmarks
  device                        print the GPU, its device key and whether this binary has SASS for it
  cache   list|merge|export     list, merge or export the per-device timing caches
  calibrate MODEL --data PATH   INT8 calibration from real data: a calibration cache and a
                                per-layer sensitivity report (--report), for `build --int8`
  version                       print the SDK version

Run `edgeinfer <command> --help` for the options of a command.
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace edgeinfer::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "version" || cmd == "--version") {
    std::cout << "edgeinfer " << edgeinfer::sdkVersion() << "\n";
    return 0;
  }
  const std::vector<std::string> flags = {"fp16",
                                          "force",
                                          "verbose",
                                          "help",
                                          "no-fusion",
                                          "no-constant-folding",
                                          "no-batchnorm-folding",
                                          "allow-non-finite-weights",
                                          "no-timing-cache",
                                          "cache-miss-error",
                                          "no-cpu-fallback",
                                          "int8",
                                          "strict-precision",
                                          "int8-bit-exact",
                                          "int8-per-layer-only",
                                          "try-runner-ups",
                                          "no-runner-up-trials",
                                          "no-stage-search",
                                          "device-inputs",
                                          "no-cuda-graphs",
                                          "report",
                                          "compare-calibrators",
                                          "smoothing",
                                          "decoder-view"};
  // Options that take a value (any command); anything else is a typo, reported, not ignored.
  const std::vector<std::string> valued = {"backend",
                                           "min-agreement",
                                           "output-layers",
                                           "agreement-images",
                                           "agreement-backend",
                                           "batch",
                                           "boxes",
                                           "build-report",
                                           "device",
                                           "dim",
                                           "dir",
                                           "dynamic-dim",
                                           "format",
                                           "frame",
                                           "index",
                                           "input",
                                           "inputs",
                                           "iterations",
                                           "json",
                                           "layer-precision",
                                           "layout",
                                           "objects",
                                           "output",
                                           "outputs",
                                           "seed",
                                           "shapes",
                                           "min-shapes",
                                           "opt-shapes",
                                           "max-shapes",
                                           "size",
                                           "tactic",
                                           "tactics",
                                           "timing-cache",
                                           "timing-iterations",
                                           "timing-prune",
                                           "build-threads",
                                           "warmup",
                                           "contexts",
                                           "config",
                                           "data",
                                           "method",
                                           "percentile",
                                           "max-images",
                                           "bins",
                                           "report-json",
                                           "report-images",
                                           "exclude-worst",
                                           "exclude-threshold",
                                           "smoothing-alpha",
                                           "calibration-cache",
                                           "calibration-data"};
  auto args = parseArgs(argc, argv, 2, flags, valued);
  if (!args.ok()) return fail(args.status());
  if (args->has("verbose")) edgeinfer::setLogLevel(edgeinfer::Severity::kVerbose);
  if (cmd == "inspect") return cmdInspect(*args);
  if (cmd == "build") return cmdBuild(*args);
  if (cmd == "run") return cmdRun(*args);
  if (cmd == "device") return cmdDevice(*args);
  if (cmd == "bench") return cmdBench(*args);
  if (cmd == "bench-vision") return cmdBenchVision(*args);
  if (cmd == "cache") return cmdCache(*args);
  if (cmd == "calibrate") return cmdCalibrate(*args);
  std::cerr << "error: unknown command '" << cmd << "'\n\n" << kUsage;
  return 2;
}
