// edgeinfer calibrate: INT8 calibration from real data into a calibration cache, with the
// sensitivity report (edgeinfer/calibration.h).
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "cli.h"
#include "edgeinfer/calibration.h"
#include "edgeinfer/vision/model_config.h"
#include "edgeinfer/vision/vision_model.h"

namespace edgeinfer::cli {
namespace {

const char* kCalibrateHelp =
    R"(usage: edgeinfer calibrate [MODEL.onnx] --data PATH -o CACHE [options]

Runs the model in FP32 over real data (on the CPU reference, or on the GPU with --backend cuda),
observes every activation that feeds a quantizable layer (Conv, Gemm, MatMul) and writes a
calibration cache (per-tensor INT8 ranges and the per-layer precision policy) that builds
reuse without the data (--calibration-cache).

  --data PATH               a folder of images (.jpg .png .ppm ...), a video file, or a folder
                            of .npy tensors (one sample each, for the model's only input)
  --config FILE             model config (models/<name>/model.json): the preprocessing of
                            images and video frames, and the model when MODEL.onnx is not given
  -o, --output CACHE        the calibration cache to write
  --method M                entropy (default) | minmax | percentile | mse
  --percentile P            percentile of |x| for --method percentile (default 99.99)
  --max-images N            calibrate on at most N images / frames / tensors
  --batch N                 images per run (default: the model's batch, 1 if dynamic)
  --bins N                  histogram bins (default 2048)
  --report                  print the per-layer sensitivity report (INT8 error against FP32)
  --report-json FILE        also write the report as JSON (implies --report)
  --report-images N         batches the report runs (default 16)
  --compare-calibrators     the whole-model error of every calibrator (implies --report)
  --exclude-worst N         keep the N layers INT8 hurts most in FP16 (implies --report)
  --exclude-threshold C     keep layers whose model-output cosine is below C in FP16
  --output-layers P         the layers that compute the model's outputs (the heads): keep
                            (out of INT8, in FP16), int8, or auto (default: keep for a
                            detector's --config, whose scores meet a threshold where one INT8
                            step of a head's input makes false detections; int8 otherwise)
  --decoder-view            compare the model outputs as the config's decoder reads them (SSD
                            detectors: scores after the sigmoid, boxes weighted by their
                            anchor's FP32 score), not as raw values; needs --config
  --min-agreement S         keep further layers (the next worst) out of INT8 until the
                            report's batches give at least this share, in (0, 1], of FP32's
                            results again: detections of the same class at IoU >= 0.9, top-1
                            classes, pixel classes (needs --config; with --config the report
                            always shows this agreement)
  --agreement-images N      batches the agreement target judges, every layer INT8 and the
                            policy are measured on (default 64; the ranking: --report-images)
  --agreement-backend B     what judges the agreement target: cpu (default: the report's
                            simulation, FP32 where the policy keeps a layer out of INT8), cuda
                            (the GPU engine each policy gives: its INT8 kernels and FP16
                            layers, one build a step) or auto (the GPU if usable)
  --smoothing               even out the channels' ranges of activations carried from
                            convolutions to convolutions before quantizing them per tensor
                            (the factors taken back by the readers' weights; compare with
                            --report)
  --smoothing-alpha A       how far smoothing moves a channel's range into the readers'
                            weights, in [0, 1] (default 0.5)
  --backend B               where the ranges and histograms are measured: cpu (default: the
                            CPU reference, nothing to build), cuda (an FP32 GPU engine, built
                            first: for large models and many images) or auto (the GPU if usable);
                            the report always runs on the CPU
)";

/// Progress on stderr: one line redrawn on a terminal, a line every 10 % otherwise.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(isatty(STDERR_FILENO) != 0) {}
  ~ProgressPrinter() { finish(); }

  void operator()(const CalibrationProgress& p) {
    char line[200];
    const std::string total = p.total >= 0 ? std::to_string(p.total) : "?";
    const char* unit = std::string(p.what) == "report" ? "runs" : "images";
    std::snprintf(line, sizeof line, "calibrate: pass %d/%d %s: %lld/%s %s, %.1f s", p.pass,
                  p.passes, p.what, static_cast<long long>(p.done), total.c_str(), unit,
                  p.elapsedSeconds);
    std::string s = line;
    if (p.etaSeconds >= 0) {
      std::snprintf(line, sizeof line, ", ETA %.0f s", p.etaSeconds);
      s += line;
    }
    if (tty_) {
      std::cerr << "\r" << s << "\x1b[K" << std::flush;
      open_ = true;
      return;
    }
    const int decile = p.total > 0 ? static_cast<int>(10 * p.done / p.total) : -1;
    if (p.pass != lastPass_ || decile != lastDecile_ || p.done == p.total) {
      std::cerr << s << "\n";
      lastPass_ = p.pass;
      lastDecile_ = decile;
    }
  }
  void finish() {
    if (open_) std::cerr << "\n";
    open_ = false;
  }

 private:
  bool tty_;
  bool open_ = false;
  int lastPass_ = -1, lastDecile_ = -1;
};

Expected<int64_t> positiveInt(const Args& a, const std::string& key, int64_t min) {
  const std::string v = a.get(key);
  char* end = nullptr;
  const long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || !end || *end || n < min)
    return Status(ErrorCode::kInvalidArgument,
                  "--" + key + " needs an integer >= " + std::to_string(min) + ", got '" + v + "'");
  return static_cast<int64_t>(n);
}

Expected<double> number(const Args& a, const std::string& key) {
  const std::string v = a.get(key);
  char* end = nullptr;
  const double d = std::strtod(v.c_str(), &end);
  if (v.empty() || !end || *end || !std::isfinite(d))
    return Status(ErrorCode::kInvalidArgument, "--" + key + " needs a number, got '" + v + "'");
  return d;
}

}  // namespace

int cmdCalibrate(const Args& a) {
  if (a.has("help") || a.positional.size() > 1 || !a.has("data") ||
      (!a.has("output") && !a.has("report") && !a.has("report-json") &&
       !a.has("compare-calibrators")) ||
      (a.positional.empty() && !a.has("config"))) {
    std::cout << kCalibrateHelp << "\n" << kBuilderOptionsHelp;
    return a.has("help") ? 0 : 2;
  }
  CalibrationOptions opt;
  {
    auto cfg = builderConfigFrom(a);
    if (!cfg.ok()) return fail(cfg.status());
    opt.builder = *cfg;
    opt.backend = a.has("backend") ? cfg->backend : Backend::kCpu;
  }
  if (a.has("method")) {
    auto m = parseCalibrationMethod(a.get("method"));
    if (!m.ok()) return fail(m.status());
    opt.calibrator.method = *m;
  }
  if (a.has("percentile")) {
    auto p = number(a, "percentile");
    if (!p.ok()) return fail(p.status());
    opt.calibrator.percentile = *p;
    if (opt.calibrator.method != CalibrationMethod::kPercentile)
      std::cerr << "warning: --percentile is used by --method percentile only\n";
  }
  if (Status s = validateCalibrator(opt.calibrator); !s.ok()) return fail(s);
  CalibrationDataOptions data;
  if (a.has("max-images")) {
    auto n = positiveInt(a, "max-images", 1);
    if (!n.ok()) return fail(n.status());
    data.maxImages = *n;
  }
  if (a.has("batch")) {
    auto n = positiveInt(a, "batch", 1);
    if (!n.ok()) return fail(n.status());
    opt.batchSize = *n;
  }
  if (a.has("bins")) {
    auto n = positiveInt(a, "bins", 128);
    if (!n.ok()) return fail(n.status());
    opt.histogramBins = static_cast<int>(*n);
  }
  if (a.has("report-images")) {
    auto n = positiveInt(a, "report-images", 1);
    if (!n.ok()) return fail(n.status());
    opt.reportBatches = static_cast<int>(*n);
  }
  if (a.has("agreement-images")) {
    auto n = positiveInt(a, "agreement-images", 1);
    if (!n.ok()) return fail(n.status());
    opt.agreementBatches = static_cast<int>(*n);
  }
  if (a.has("exclude-worst")) {
    auto n = positiveInt(a, "exclude-worst", 0);
    if (!n.ok()) return fail(n.status());
    opt.excludeWorst = static_cast<int>(*n);
  }
  if (a.has("exclude-threshold")) {
    auto c = number(a, "exclude-threshold");
    if (!c.ok()) return fail(c.status());
    if (*c <= 0 || *c > 1)
      return fail(Status(
          ErrorCode::kInvalidArgument,
          "--exclude-threshold needs a cosine in (0, 1], got " + a.get("exclude-threshold")));
    opt.excludeBelowCosine = *c;
  }
  opt.smoothing = a.has("smoothing");
  if (a.has("smoothing-alpha")) {
    auto v = number(a, "smoothing-alpha");
    if (!v.ok()) return fail(v.status());
    if (*v < 0 || *v > 1)
      return fail(
          Status(ErrorCode::kInvalidArgument,
                 "--smoothing-alpha needs a number in [0, 1], got " + a.get("smoothing-alpha")));
    if (!opt.smoothing)
      std::cerr << "warning: --smoothing-alpha has no effect without --smoothing\n";
    opt.smoothingAlpha = *v;
  }
  double minAgreement = 0;
  if (a.has("min-agreement")) {
    auto v = number(a, "min-agreement");
    if (!v.ok()) return fail(v.status());
    if (*v <= 0 || *v > 1)
      return fail(Status(
          ErrorCode::kInvalidArgument,
          "--min-agreement needs a share in (0, 1], e.g. 0.98, got " + a.get("min-agreement")));
    minAgreement = *v;
  }
  if (a.has("output-layers")) {
    const std::string v = a.get("output-layers");
    if (v == "keep")
      opt.outputLayers = CalibrationOptions::OutputLayers::kKeep;
    else if (v == "int8")
      opt.outputLayers = CalibrationOptions::OutputLayers::kInt8;
    else if (v != "auto")
      return fail(Status(ErrorCode::kInvalidArgument,
                         "--output-layers must be keep, int8 or auto, not '" + v + "'"));
  }
  opt.compareCalibrators = a.has("compare-calibrators");
  opt.report = a.has("report") || a.has("report-json") || opt.compareCalibrators ||
               opt.excludeWorst > 0 || opt.excludeBelowCosine > 0 || minAgreement > 0;

  std::string model = a.positional.empty() ? "" : a.positional[0];
  bool haveConfig = false;
  if (a.has("config")) {
    auto cfg = vision::loadModelConfig(a.get("config"));
    if (!cfg.ok()) return fail(cfg.status());
    if (model.empty()) model = cfg->modelPath;
    data.inputTensor = cfg->inputTensor;
    data.tensorInput = cfg->inputTensor;
    data.preprocess = cfg->preprocess;
    if (a.has("decoder-view") && !vision::setDecoderOutputView(*cfg, &opt))
      return fail(Status(ErrorCode::kInvalidArgument,
                         "--decoder-view needs a config with an SSD-style decoder; '" +
                             a.get("config") + "' has another"));
    vision::setResultAgreement(*cfg, &opt, minAgreement);
    vision::setOutputLayerPolicy(*cfg, &opt);
    haveConfig = true;
  }
  if (a.has("agreement-backend")) {
    const std::string b = a.get("agreement-backend");
    if (b == "cpu")
      opt.agreementBackend = Backend::kCpu;
    else if (b == "cuda" || b == "gpu")
      opt.agreementBackend = Backend::kCuda;
    else if (b == "auto")
      opt.agreementBackend = Backend::kAuto;
    else
      return fail(Status(ErrorCode::kInvalidArgument,
                         "--agreement-backend must be cpu, cuda or auto, not '" + b + "'"));
    if (minAgreement <= 0)
      std::cerr << "warning: --agreement-backend has no effect without --min-agreement\n";
  }
  for (const char* needs : {"decoder-view", "min-agreement"})
    if (a.has(needs) && !haveConfig)
      return fail(Status(ErrorCode::kInvalidArgument, std::string("--") + needs +
                                                          " needs --config MODEL.json (its "
                                                          "decoder section)"));
  if (!haveConfig) {
    // Only raw tensors can do without a config; this placeholder lets images and video be
    // recognised (and refused below) instead of failing on an empty preprocessing section.
    data.preprocess.outputWidth = data.preprocess.outputHeight = 1;
  }
  auto source = openCalibrationData(a.get("data"), data);
  if (!source.ok()) return fail(source.status());
  if (!haveConfig && (*source)->preprocessKey() != "raw")
    return fail(Status(ErrorCode::kInvalidArgument,
                       "images and video need --config MODEL.json: its input section says how "
                       "frames become the model's input tensor"));

  std::cerr << "calibrate: " << model << " on " << (*source)->describe() << ", calibrator "
            << describeCalibrator(opt.calibrator) << "\n";
  ProgressPrinter printer;
  opt.progress = [&printer](const CalibrationProgress& p) { printer(p); };
  auto result = calibrate(model, **source, opt);
  printer.finish();
  if (!result.ok()) return fail(result.status());
  if (result->hasReport) {
    std::cout << result->report.toText();
    if (a.has("report-json")) {
      std::ofstream f(a.get("report-json"));
      f << result->report.toJson();
      if (!f)
        return fail(Status(ErrorCode::kIoError, "cannot write '" + a.get("report-json") + "'"));
    }
  }
  const auto excluded = result->cache.excludedLayers();
  std::printf(
      "calibrated %lld image(s) in %.1f s: %zu activation tensor(s), %zu layer(s) INT8, %zu kept "
      "in FP16\n",
      static_cast<long long>(result->samples), result->seconds, result->cache.tensorAmax.size(),
      result->cache.layerPrecision.size() - excluded.size(), excluded.size());
  if (a.has("output")) {
    Status s = result->cache.save(a.get("output"));
    if (!s.ok()) return fail(s);
    std::printf("calibration cache written to %s (model %s, preprocessing %s)\n",
                a.get("output").c_str(), result->cache.modelHash.c_str(),
                result->cache.preprocessHash.c_str());
  } else {
    std::cerr << "warning: no -o CACHE given: no calibration cache written\n";
  }
  return 0;
}

}  // namespace edgeinfer::cli
