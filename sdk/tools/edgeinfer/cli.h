// Shared pieces of the `edgeinfer` command-line tool: argument parsing and reporting.
#pragma once

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "edgeinfer/status.h"

namespace edgeinfer::cli {

/// Parsed command line: positional arguments and --key[=value] / --key value options.
struct Args {
  std::vector<std::string> positional;
  std::multimap<std::string, std::string> options;

  bool has(const std::string& k) const { return options.count(k) != 0; }
  std::string get(const std::string& k, const std::string& def = "") const {
    auto it = options.find(k);
    return it == options.end() ? def : it->second;
  }
  std::vector<std::string> all(const std::string& k) const;
};

/// `flagOptions` take no value (e.g. "fp16", "verbose"), `valueOptions` take one; any other
/// option is an error (kInvalidArgument naming it).
Expected<Args> parseArgs(int argc, char** argv, int first,
                         const std::vector<std::string>& flagOptions,
                         const std::vector<std::string>& valueOptions);

/// One --shapes value: "NAME:1x3x224x224[,NAME2:...]" (a name may hold ':', the last one
/// separates the dims; "NAME:scalar" is a rank-0 shape).
Expected<ShapeProfile> parseShapes(const std::string& text);

/// Applies the builder options shared by build/run/inspect (--backend, --fp16, --no-fusion ...):
/// one --shapes sets BuilderConfig::inputShapes, several make one shape profile each.
Expected<BuilderConfig> builderConfigFrom(const Args& a);
extern const char* kBuilderOptionsHelp;

/// --calibration-data PATH (with --int8, without --calibration-cache): calibrates the model at
/// `modelPath` on that data (images and video through --config's preprocessing, else .npy
/// tensors; min-max ranges and the sensitivity policy, as VisionModel does) into `cachePath`
/// and points cfg.calibrationCachePath at it. Nothing to do without the option.
Status calibrateFromData(const Args& a, const std::string& modelPath, const std::string& cachePath,
                         BuilderConfig& cfg);

/// Is `path` a saved engine (of one shape or several shape profiles)?
bool isEngineFile(const std::string& path);
/// Builds the model (ONNX, with the builder options in `a`) or loads the engine file at `path`.
Expected<std::unique_ptr<Engine>> loadEngine(const std::string& path, const Args& a);
/// The input shapes to run: the first --shapes (its inputs; the others from the profile it
/// matches), or the engine's first shape profile; kInvalidArgument listing the profiles when
/// --shapes matches none.
Expected<ShapeProfile> shapesToRun(const Engine& engine, const Args& a);
/// Binds every input of `engine` on `ctx`: from --input NAME=FILE.npy, --inputs DIR, or
/// random in the shapes of shapesToRun() (--seed; --dim NAME=VALUE for dims still dynamic).
/// Returns the bound tensors.
Expected<std::map<std::string, Tensor>> bindInputs(const Engine& engine, ExecutionContext& ctx,
                                                   const Args& a);
/// "float32 [Nx3x224x224]" (dynamic dims by name, or "?").
std::string describeTensor(const TensorDesc& d);
/// A file name for a tensor name (graph names may contain '/' or ':').
std::string safeName(std::string name);

/// Prints "error: <status>" to stderr and returns the process exit code for it.
int fail(const Status& s);

int cmdInspect(const Args& a);
int cmdBuild(const Args& a);
int cmdRun(const Args& a);
int cmdDevice(const Args& a);
int cmdBench(const Args& a);
int cmdBenchVision(const Args& a);
int cmdCache(const Args& a);
int cmdCalibrate(const Args& a);

}  // namespace edgeinfer::cli
