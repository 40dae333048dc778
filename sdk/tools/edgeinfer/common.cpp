#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "cli.h"
#include "edgeinfer/calibration.h"
#include "edgeinfer/vision/model_config.h"
#include "edgeinfer/vision/vision_model.h"

namespace edgeinfer::cli {

std::vector<std::string> Args::all(const std::string& k) const {
  std::vector<std::string> v;
  auto range = options.equal_range(k);
  for (auto it = range.first; it != range.second; ++it) v.push_back(it->second);
  return v;
}

Expected<Args> parseArgs(int argc, char** argv, int first, const std::vector<std::string>& flags,
                         const std::vector<std::string>& valued) {
  Args a;
  for (int i = first; i < argc; ++i) {
    std::string s = argv[i];
    if (s == "-o") s = "--output";
    if (s.rfind("--", 0) != 0) {
      a.positional.push_back(s);
      continue;
    }
    s = s.substr(2);
    const auto eq = s.find('=');
    const std::string key = s.substr(0, eq);
    const bool isFlag = std::find(flags.begin(), flags.end(), key) != flags.end();
    if (!isFlag && std::find(valued.begin(), valued.end(), key) == valued.end())
      return Status(ErrorCode::kInvalidArgument,
                    "unknown option --" + key + " (see `edgeinfer " +
                        std::string(first > 1 ? argv[first - 1] : "<command>") + " --help`)");
    if (eq != std::string::npos) {
      a.options.emplace(s.substr(0, eq), s.substr(eq + 1));
    } else if (std::find(flags.begin(), flags.end(), s) != flags.end()) {
      a.options.emplace(s, "1");
    } else if (i + 1 < argc) {
      a.options.emplace(s, argv[++i]);
    } else {
      return Status(ErrorCode::kInvalidArgument, "option --" + s + " needs a value");
    }
  }
  return a;
}

const char* kBuilderOptionsHelp = R"(builder options:
  --backend auto|cpu|cuda       where the engine runs (default auto)
  --fp16                        allow FP16 kernels (GPU backends)
  --int8                        allow INT8 kernels (needs --calibration-cache or
                                --calibration-data, unless the model has its own Q/DQ scales):
                                on the GPU each INT8 layer takes the fastest of its INT8, FP16
                                and FP32 tactics; the CPU emulates INT8 in FP32 (accuracy checks)
  --strict-precision            INT8 layers use an INT8 tactic wherever one exists, even slower
                                (without it, a GPU build also builds that engine and keeps the
                                faster of the two, unless --int8-per-layer-only)
  --int8-per-layer-only         a timed INT8 build keeps its per-layer choice without building
                                and running the all-INT8 engine against it
  --no-stage-search             a timed INT8 build compares the all-INT8 engine as it is, without
                                trying its network stages (ResNet's layer1, layer2...) in FP16
                                in the whole engine first
  --no-runner-up-trials         GPU: keep each layer's fastest tactic as timed alone, without
                                trying close runner-up tactics of another family or kernel
                                (within 15 %, up to 10 groups of equal layers) in the whole
                                engine, which a build does by default for engines of 0.1 ms
                                and more (a build and a run per trial; the outcome is kept in
                                the timing cache, so a rebuild repeats none)
  --try-runner-ups              try them in engines of any speed
  --int8-bit-exact              INT8 kernels round bit for bit as the CPU's INT8 emulation does
                                (default: fused multiply-adds, within one quantization step,
                                faster on layers bound by their outputs)
  --no-fusion                   switch off every fusion pass
  --no-constant-folding         switch off constant folding
  --no-batchnorm-folding        keep BatchNormalization nodes
  --dynamic-dim N               value for every dynamic input dimension at build time
  --shapes NAME:DxDx..[,NAME:..] input shapes to build for (fix their dynamic dims; win over
                                --dynamic-dim). Repeat for an engine of several shape profiles,
                                one complete build per profile (each holds its own weights);
                                a run picks the profile of the bound input shapes
  --min-shapes / --opt-shapes / --max-shapes NAME:DxDx..[,..]
                                shape ranges (all three, for the same inputs): the engine runs
                                any shape from min to max in every dim; it is timed and planned
                                for opt, and specialises for another shape on its first run of
                                it, once per shape: the timing cache's tactics for that shape,
                                else the opt build's (a few candidates timed where that one does
                                not fit the shape)
  --allow-non-finite-weights    accept NaN/Inf in weights
  --calibration-cache FILE      INT8 calibration cache (edgeinfer calibrate): the int8 scales and
                                the per-layer policy (checked against the model)
  --calibration-data PATH       INT8 without a cache: calibrate first on a folder of images, a
                                video (through --config's preprocessing) or .npy tensors, with
                                min-max ranges and the sensitivity policy (layers whose INT8
                                lowers the output cosine below 0.999 stay in FP16); build writes
                                the cache to ENGINE.calib for later builds
  --min-agreement S             with --calibration-data and --config: also keep the next worst
                                layers out of INT8 until INT8 gives this share, in (0, 1], of
                                FP32's results again on the data (detections at IoU >= 0.9,
                                top-1 classes)
  --verbose                     log every pass and decision (GPU: each layer's timing table)
GPU builder options:
  --device N                    CUDA device to build for (default 0)
  --timing-cache FILE           timing cache (default $XDG_CACHE_HOME/edgeinfer/<device-key>/timing.cache)
  --no-timing-cache             time every layer; read and write no cache
  --cache-miss-error            a layer missing from the timing cache is an error (reproducible builds)
  --tactic LAYER=ID             force a tactic for a layer (repeatable)
  --tactics FILE                forced tactics, "layer = tactic-id" per line or a JSON object
  --layer-precision LAYER=P     per-layer precision fp32|fp16|int8 (repeatable)
  --no-cpu-fallback             a layer without a GPU kernel is an error, not run on the CPU
  --timing-iterations N         launches per timing measurement (default 8; median of 5)
  --timing-prune F              stop timing a tactic whose first launch is F times slower than
                                the layer's fastest so far (default 8; 0 times every one fully)
  --build-threads N             threads preparing a layer's candidates (cuDNN plans) at once
                                before they are timed (default 0: the cores, at most 8)
)";

Expected<ShapeProfile> parseShapes(const std::string& text) {
  ShapeProfile p;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const size_t colon = item.rfind(':');
    const auto bad = [&](const std::string& why) {
      return Status(ErrorCode::kInvalidArgument,
                    "--shapes needs NAME:1x3x224x224[,NAME2:...]; '" + item + "' " + why);
    };
    if (colon == std::string::npos || colon == 0) return bad("has no NAME:");
    const std::string name = item.substr(0, colon), dims = item.substr(colon + 1);
    std::vector<int64_t> v;
    if (dims != "scalar") {
      size_t d = 0;
      while (true) {
        const size_t x = std::min(dims.find('x', d), dims.size());
        const std::string num = dims.substr(d, x - d);
        char* end = nullptr;
        const long long n = std::strtoll(num.c_str(), &end, 10);
        if (num.empty() || !end || *end || n < 1)
          return bad("has '" + num + "' where a size (>= 1) belongs");
        v.push_back(n);
        if (x == dims.size()) break;
        d = x + 1;
      }
    }
    if (p.count(name)) return bad("names '" + name + "' twice");
    p[name] = Shape(std::move(v));
    start = comma + 1;
  }
  return p;
}

Status calibrateFromData(const Args& a, const std::string& modelPath, const std::string& cachePath,
                         BuilderConfig& cfg) {
  if (!a.has("calibration-data"))
    return a.has("min-agreement")
               ? Status(ErrorCode::kInvalidArgument,
                        "--min-agreement is for --calibration-data (or edgeinfer calibrate)")
               : Status::Ok();
  if (cfg.precision != Precision::kInt8)
    return Status(ErrorCode::kInvalidArgument, "--calibration-data is for INT8: add --int8");
  if (!cfg.calibrationCachePath.empty())
    return Status(ErrorCode::kInvalidArgument,
                  "give --calibration-cache or --calibration-data, not both");
  CalibrationDataOptions data;
  CalibrationOptions opt = vision::VisionModelOptions::defaultCalibration();
  if (a.has("config")) {
    EI_ASSIGN_OR_RETURN(vision::ModelConfig mc, vision::loadModelConfig(a.get("config")));
    data.inputTensor = mc.inputTensor;
    data.preprocess = mc.preprocess;
    double target = 0;
    if (a.has("min-agreement")) {
      char* end = nullptr;
      const std::string v = a.get("min-agreement");
      target = std::strtod(v.c_str(), &end);
      if (v.empty() || !end || *end || !(target > 0 && target <= 1))
        return Status(ErrorCode::kInvalidArgument,
                      "--min-agreement needs a share in (0, 1], e.g. 0.98, got '" + v + "'");
    }
    vision::setResultAgreement(mc, &opt, target);
    vision::setOutputLayerPolicy(mc, &opt);
  } else if (a.has("min-agreement")) {
    return Status(ErrorCode::kInvalidArgument,
                  "--min-agreement needs --config MODEL.json (its decoder counts the results)");
  }
  EI_ASSIGN_OR_RETURN(auto src, openCalibrationData(a.get("calibration-data"), data));
  opt.builder = cfg;
  // The agreement target judges the engine this build makes: on the GPU, its INT8 kernels and
  // FP16 layers (a GPU engine a step); on the CPU, the simulation the CPU engine runs.
  opt.agreementBackend = cfg.backend;
  std::cerr << "calibrating INT8 on " << src->describe() << " (min-max, sensitivity policy) ...\n";
  auto r = calibrate(modelPath, *src, opt);
  if (!r.ok()) return r.status().withContext("--calibration-data " + a.get("calibration-data"));
  EI_RETURN_IF_ERROR(r->cache.save(cachePath));
  std::cerr << "calibrated on " << r->samples
            << " sample(s): " << r->cache.layerPrecision.size() - r->cache.excludedLayers().size()
            << " of " << r->cache.layerPrecision.size() << " layers INT8; calibration cache "
            << cachePath << "\n";
  if (r->hasReport && !r->report.agreement.empty()) {
    const Agreement& got = r->report.withPolicy.agreement;
    std::fprintf(stderr, "with that policy INT8 gives %lld of %lld of FP32's results again (%s)",
                 static_cast<long long>(got.matched), static_cast<long long>(got.total),
                 r->report.agreement.c_str());
    if (r->report.minAgreement > 0)
      std::fprintf(stderr, "; target %.1f %%, %d layer(s) kept out of INT8 for it",
                   100.0 * r->report.minAgreement, r->report.keptForAgreement);
    std::fprintf(stderr, "\n");
  }
  cfg.calibrationCachePath = cachePath;
  return Status::Ok();
}

Expected<BuilderConfig> builderConfigFrom(const Args& a) {
  BuilderConfig c;
  const std::string backend = a.get("backend", "auto");
  if (backend == "auto")
    c.backend = Backend::kAuto;
  else if (backend == "cpu")
    c.backend = Backend::kCpu;
  else if (backend == "cuda" || backend == "gpu")
    c.backend = Backend::kCuda;
  else
    return Status(ErrorCode::kInvalidArgument,
                  "--backend must be auto, cpu or cuda, not '" + backend + "'");
  if (a.has("fp16")) c.precision = Precision::kFp16;
  if (a.has("int8")) c.precision = Precision::kInt8;
  if (a.has("strict-precision")) c.strictPrecision = true;
  if (a.has("int8-bit-exact")) c.int8BitExact = true;
  if (a.has("int8-per-layer-only")) c.int8WholeEngineChoice = false;
  if (a.has("try-runner-ups") && a.has("no-runner-up-trials"))
    return Status(ErrorCode::kInvalidArgument,
                  "--try-runner-ups and --no-runner-up-trials contradict each other");
  if (a.has("try-runner-ups")) {
    c.tryRunnerUpsInEngine = true;
    c.runnerUpTrialsMinEngineMs = 0.0;
  }
  if (a.has("no-runner-up-trials")) c.tryRunnerUpsInEngine = false;
  if (a.has("no-stage-search")) c.int8StageSearch = false;
  if (a.has("no-fusion")) {
    c.passes.fuseConvActivation = false;
    c.passes.fuseGemmActivation = false;
    c.passes.fuseElementwise = false;
  }
  if (a.has("no-constant-folding")) c.passes.constantFolding = false;
  if (a.has("no-batchnorm-folding")) c.passes.foldBatchNorm = false;
  if (a.has("allow-non-finite-weights")) c.allowNonFiniteWeights = true;
  if (a.has("calibration-cache")) c.calibrationCachePath = a.get("calibration-cache");
  if (a.has("device")) c.deviceId = std::atoi(a.get("device").c_str());
  if (a.has("timing-cache")) c.timingCachePath = a.get("timing-cache");
  if (a.has("no-timing-cache")) c.useTimingCache = false;
  if (a.has("cache-miss-error")) c.timingCacheMissIsError = true;
  if (a.has("tactics")) c.forcedTacticsFile = a.get("tactics");
  if (a.has("no-cpu-fallback")) c.allowCpuFallback = false;
  if (a.has("timing-iterations")) {
    c.timing.iterations = std::atoi(a.get("timing-iterations").c_str());
    if (c.timing.iterations < 1)
      return Status(ErrorCode::kInvalidArgument, "--timing-iterations needs a positive integer");
  }
  if (a.has("timing-prune")) {
    const std::string text = a.get("timing-prune");  // strtod's end points into it
    char* end = nullptr;
    c.timing.pruneFactor = std::strtod(text.c_str(), &end);
    if (!end || *end || !(c.timing.pruneFactor == 0.0 || c.timing.pruneFactor >= 1.0))
      return Status(ErrorCode::kInvalidArgument,
                    "--timing-prune needs 0 (off) or a factor of at least 1, not '" +
                        a.get("timing-prune") + "'");
  }
  if (a.has("build-threads")) {
    const std::string text = a.get("build-threads");
    char* end = nullptr;
    const long n = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || !end || *end || n < 0 || n > 256)
      return Status(ErrorCode::kInvalidArgument,
                    "--build-threads needs a number of threads from 1 to 256 (0: the cores, at "
                    "most 8), not '" +
                        text + "'");
    c.timing.prepareThreads = static_cast<int>(n);
  }
  for (const std::string& kv : a.all("tactic")) {
    const auto eq = kv.rfind('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == kv.size())
      return Status(ErrorCode::kInvalidArgument,
                    "--tactic needs LAYER=TACTIC-ID, got '" + kv + "'");
    c.forcedTactics[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const std::string& kv : a.all("layer-precision")) {
    const auto eq = kv.rfind('=');
    const std::string p = eq == std::string::npos ? "" : kv.substr(eq + 1);
    if (eq == std::string::npos || eq == 0 || (p != "fp32" && p != "fp16" && p != "int8"))
      return Status(ErrorCode::kInvalidArgument,
                    "--layer-precision needs LAYER=fp32, fp16 or int8, got '" + kv + "'");
    c.layerPrecision[kv.substr(0, eq)] = p == "int8"   ? Precision::kInt8
                                         : p == "fp16" ? Precision::kFp16
                                                       : Precision::kFp32;
  }
  const std::vector<std::string> shapes = a.all("shapes");
  for (const std::string& text : shapes) {
    EI_ASSIGN_OR_RETURN(ShapeProfile p, parseShapes(text));
    if (shapes.size() == 1)
      c.inputShapes = std::move(p);
    else
      c.shapeProfiles.push_back(std::move(p));
  }
  if (a.has("min-shapes") || a.has("opt-shapes") || a.has("max-shapes")) {
    ShapeProfile parts[3];
    const char* keys[3] = {"min-shapes", "opt-shapes", "max-shapes"};
    for (int i = 0; i < 3; ++i) {
      if (a.all(keys[i]).size() != 1)
        return Status(ErrorCode::kInvalidArgument,
                      "shape ranges need --min-shapes, --opt-shapes and --max-shapes, once each "
                      "(--" +
                          std::string(keys[i]) + " is given " +
                          std::to_string(a.all(keys[i]).size()) + " times)");
      EI_ASSIGN_OR_RETURN(parts[i], parseShapes(a.get(keys[i])));
    }
    for (int i = 1; i < 3; ++i)
      for (const auto& [name, shape] : parts[i])
        if (!parts[0].count(name))
          return Status(ErrorCode::kInvalidArgument, "--" + std::string(keys[i]) + " names '" +
                                                         name + "', which --min-shapes does not");
    for (const auto& [name, shape] : parts[0]) {
      if (!parts[1].count(name) || !parts[2].count(name))
        return Status(
            ErrorCode::kInvalidArgument,
            "--min-shapes names '" + name + "': give it in --opt-shapes and --max-shapes as well");
      c.shapeRanges[name] = ShapeRange{shape, parts[1][name], parts[2][name]};
    }
  }
  if (a.has("dynamic-dim")) {
    const std::string text = a.get("dynamic-dim");  // strtoll's end points into it
    char* end = nullptr;
    c.dynamicDimDefault = std::strtoll(text.c_str(), &end, 10);
    if (!end || *end || c.dynamicDimDefault < 1)
      return Status(ErrorCode::kInvalidArgument, "--dynamic-dim needs a positive integer");
  }
  return c;
}

int fail(const Status& s) {
  std::cerr << "error: " << s.toString() << "\n";
  switch (s.code()) {
    case ErrorCode::kInvalidArgument:
      return 2;
    case ErrorCode::kNotFound:
      return 3;
    default:
      return 1;
  }
}

}  // namespace edgeinfer::cli
