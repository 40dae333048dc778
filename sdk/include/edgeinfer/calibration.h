// INT8 calibration (issue 6, first part): from real data to per-tensor activation ranges, a
// calibration cache that later builds reuse without the data, and a sensitivity report that
// says which layers INT8 hurts.
//
//   auto data = edgeinfer::openCalibrationData("photos/", sourceOptions);   // images, video, .npy
//   edgeinfer::CalibrationOptions opt;
//   opt.calibrator.method = edgeinfer::CalibrationMethod::kMinMax;
//   opt.report = true;
//   auto result = edgeinfer::calibrate("model.onnx", **data, opt);
//   result->cache.save("model.calib");
//   std::cout << result->report.toText();
//
// What is calibrated: the optimised graph the builder makes from the model (the same import
// and passes, so FusedConv/FusedGemm/FusedMatMul are the layers the engine will have), run in
// FP32 on the CPU reference. Quantizable layers are Conv (depthwise and grouped included),
// Gemm and MatMul and their fused forms. Every activation tensor that feeds one of them is
// observed: pass 1 takes its largest magnitude (amax), pass 2 a histogram of |x| in
// `histogramBins` bins over [0, amax] (as TensorRT does); the calibrator picks the clipping
// threshold from the histogram. Activations are quantized per tensor (scale = amax / 127),
// weights symmetric per output channel (scale = max |w| of the channel / 127), both int8.
//
// The sensitivity report simulates INT8 exactly with fake quantization on the CPU reference
// (quantize -> dequantize of the layer's activation inputs per tensor, round half to even,
// saturated to [-128, 127], and of its weights per channel to [-127, 127], then the FP32 op).
//
// GPU INT8 builds take their per-tensor scales (amax / 127) and the per-layer policy from the
// cache (BuilderConfig::calibrationCachePath, docs/design/int8-calibration.md); the CPU
// reference computes in FP32 and only checks the cache against the model.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "edgeinfer/vision/preprocess.h"

namespace edgeinfer {

// ---- Calibrators ----------------------------------------------------------------------------

enum class CalibrationMethod : uint8_t {
  /// TensorRT's entropy calibrator: the threshold whose 128-level quantized distribution is
  /// closest (KL divergence) to the observed one. Clips rare outliers; known to lose accuracy
  /// on some detectors (YOLO: TensorRT issues #3922, #1834): compare with the report.
  kEntropy,
  kMinMax,      ///< the largest magnitude seen: nothing clipped
  kPercentile,  ///< the given percentile of |x| (CalibratorParams::percentile)
  kMse,         ///< the threshold that minimises the expected squared quantization error
};

/// "entropy", "minmax", "percentile", "mse".
const char* calibrationMethodName(CalibrationMethod method);
/// Parses one of the names above; kInvalidArgument listing them otherwise.
Expected<CalibrationMethod> parseCalibrationMethod(const std::string& name);

struct CalibratorParams {
  CalibrationMethod method = CalibrationMethod::kEntropy;
  /// kPercentile: which percentile of |x| becomes the threshold, in (0, 100].
  double percentile = 99.99;
};
/// "entropy", "minmax", "mse" or "percentile(99.99)".
std::string describeCalibrator(const CalibratorParams& params);
/// OK, or kInvalidArgument (a percentile outside (0, 100]).
Status validateCalibrator(const CalibratorParams& params);

/// Histogram of |x| over [0, range] in equal bins; values above the range count in the last
/// bin, NaN/Inf are counted apart and not binned. maxAbs() is the exact largest finite |x|.
class AbsHistogram {
 public:
  static constexpr int kDefaultBins = 2048;
  AbsHistogram() = default;
  /// `range` >= 0 (0: every value falls into bin 0), `bins` >= 1.
  explicit AbsHistogram(double range, int bins = kDefaultBins);

  void add(const float* values, int64_t count);
  /// Adds `count` values of magnitude `value` (for tests and synthetic histograms).
  void addRepeated(double value, double count);

  double range() const { return range_; }
  int bins() const { return static_cast<int>(counts_.size()); }
  double binWidth() const { return bins() ? range_ / bins() : 0.0; }
  const std::vector<double>& counts() const { return counts_; }
  double total() const { return total_; }
  double maxAbs() const { return maxAbs_; }
  int64_t nonFinite() const { return nonFinite_; }

 private:
  double range_ = 0;
  std::vector<double> counts_;
  double total_ = 0;
  double maxAbs_ = 0;
  int64_t nonFinite_ = 0;
};

/// The clipping threshold (amax; scale = amax / 127) `params` picks from `hist`. 0 for an empty
/// histogram or one of zeros only. kInvalidArgument for bad parameters, or for kEntropy on a
/// histogram of fewer than 128 bins.
Expected<double> computeAmax(const AbsHistogram& hist, const CalibratorParams& params);

/// Per-output-channel symmetric weight scales: max |w| over every element of channel c along
/// `axis`, divided by 127 (a channel of zeros gets scale 0).
Expected<std::vector<float>> perChannelWeightScales(const Tensor& weights, int axis);

// ---- Calibration cache ----------------------------------------------------------------------

/// The result of a calibration, as a versioned text file later builds reuse without the data.
/// Format (docs/design/int8-calibration.md): one record per line, '#' comments allowed,
///   EDGEINFER-CALIBRATION 1
///   sdk 0.1.0
///   model <fnv1a of the ONNX bytes>        (EngineInfo::modelHash of an engine built from it)
///   preprocess <hash> | raw                (preprocessHash() of the model config, or raw tensors)
///   calibrator entropy | minmax | mse | percentile 99.99
///   bins 2048
///   images 13
///   tensors <N>
///   tensor <amax> <name>                   N lines; scale = amax / 127
///   layers <M>
///   layer int8|fp16 <name>                 M lines: the precision policy of every quantizable
///   layer end
/// The file is plain text so a user can move a layer to fp16 by hand; it has no checksum for
/// that reason, but every count, number and name is checked when it is read.
struct CalibrationCache {
  /// 2: smoothing factors. Version 1 (no smoothing) is read too.
  static constexpr int kFormatVersion = 2;

  std::string sdkVersion;
  std::string modelHash;
  std::string preprocessHash;  ///< preprocessHash(config) or "raw"
  CalibratorParams calibrator;
  int histogramBins = AbsHistogram::kDefaultBins;
  int64_t images = 0;                               ///< calibration images (or tensor samples)
  std::map<std::string, float> tensorAmax;          ///< activation tensor -> amax (>= 0)
  std::map<std::string, Precision> layerPrecision;  ///< quantizable layer -> kInt8 or kFp16
  /// Activation smoothing (CalibrationOptions::smoothing): tensor -> one factor a channel; its
  /// producer writes channel c divided by the factor, its readers' weights take it back. The
  /// ranges in tensorAmax are those of the smoothed tensors.
  std::map<std::string, std::vector<float>> smoothing;

  std::string toText() const;
  /// Parses cache text. kVersionMismatch for another format version; kCorruptFile naming
  /// `sourceName` and the line for anything truncated, damaged or inconsistent.
  static Expected<CalibrationCache> parse(const std::string& text, const std::string& sourceName);
  /// Writes atomically (a temporary file renamed over `path`).
  Status save(const std::string& path) const;
  /// kNotFound (no such file), kIoError (unreadable), or parse()'s errors naming `path`.
  static Expected<CalibrationCache> load(const std::string& path);
  /// OK when the cache was made from the model with hash `modelHash`; kInvalidArgument naming
  /// both hashes otherwise.
  Status checkModel(const std::string& modelHash) const;
  /// Layers the policy keeps out of INT8.
  std::vector<std::string> excludedLayers() const;
};

/// The model hash a cache is keyed by: the same FNV-1a digest of the ONNX bytes that
/// EngineInfo::modelHash records.
std::string modelHashOf(const void* onnxBytes, size_t size);
/// Digest of every preprocessing field that changes the tensor (size, layout, dtype, resize,
/// interpolation, channels, scale, mean, std, pad), so a cache calibrated with other
/// preprocessing is recognised.
std::string preprocessHash(const vision::PreprocessConfig& cfg);

// ---- Calibration data -----------------------------------------------------------------------

/// One calibration sample: a value for every model input, batch dimension 1 (images) or the
/// model's whole input (tensors).
struct CalibrationSample {
  std::map<std::string, Tensor> inputs;
  std::string origin;  ///< file or "video frame 12", for messages
};

/// Where calibration samples come from. Calibration reads the data twice (ranges, then
/// histograms), so a source can be rewound.
class CalibrationSource {
 public:
  virtual ~CalibrationSource() = default;
  /// "13 images in photos/", "video in.mp4", "8 tensors in calib/".
  virtual std::string describe() const = 0;
  /// Samples one pass yields at most (after maxImages); -1 if unknown (a video without a frame
  /// count).
  virtual int64_t expectedSamples() const = 0;
  /// preprocessHash() of the preprocessing used, or "raw".
  virtual std::string preprocessKey() const = 0;
  /// Back to the first sample.
  virtual Status rewind() = 0;
  /// The next sample: true, or false at the end. Files that cannot be decoded are skipped with
  /// a warning (once per file); an error is returned only for failures the source cannot go
  /// on after.
  virtual Expected<bool> next(CalibrationSample& sample) = 0;
  /// Files skipped in the last pass (unreadable or not decodable).
  virtual int64_t skipped() const = 0;
};

struct CalibrationDataOptions {
  /// Images and video: the input tensor that takes the preprocessed frame, and how frames
  /// become tensors (a model config's input section: vision::loadModelConfig()).
  std::string inputTensor;
  vision::PreprocessConfig preprocess;
  /// Tensors: the input each .npy file binds (empty: the model's only input).
  std::string tensorInput;
  /// Read at most this many images / frames / files per pass (-1: all).
  int64_t maxImages = -1;
};

/// A folder of images: .jpg .jpeg .png .bmp .webp .tif .tiff (decoded by FFmpeg) and binary
/// .ppm/.pgm (read directly), in name order; other files are ignored. kNotFound (no such
/// folder), kIoError (cannot be listed), kInvalidArgument (no image files in it).
Expected<std::unique_ptr<CalibrationSource>> openImageFolder(const std::string& dir,
                                                             const CalibrationDataOptions& opt);
/// A video file (FFmpeg, software decoding): every frame is one image.
Expected<std::unique_ptr<CalibrationSource>> openVideoFile(const std::string& path,
                                                           const CalibrationDataOptions& opt);
/// A folder of .npy files, each one sample of `opt.tensorInput` (float32, the model's input
/// shape or its shape with batch 1). kInvalidArgument when it holds no .npy file.
Expected<std::unique_ptr<CalibrationSource>> openTensorFolder(const std::string& dir,
                                                              const CalibrationDataOptions& opt);
/// Picks by what `path` is: a folder holding .npy files -> tensors, another folder -> images,
/// a file -> video.
Expected<std::unique_ptr<CalibrationSource>> openCalibrationData(const std::string& path,
                                                                 const CalibrationDataOptions& opt);

// ---- Calibration and the sensitivity report ------------------------------------------------

struct CalibrationProgress {
  int pass = 1;    ///< 1: ranges, 2: histograms, 3: sensitivity report
  int passes = 2;  ///< passes this calibration makes
  const char* what = "";
  int64_t done = 0;    ///< samples (pass 1, 2) or report runs (pass 3) done in this pass
  int64_t total = -1;  ///< of this pass; -1 if unknown
  double elapsedSeconds = 0;
  double etaSeconds = -1;  ///< whole calibration; -1 if unknown
};
using CalibrationProgressFn = std::function<void(const CalibrationProgress&)>;

/// Results of FP32 the quantized model gives again (CalibrationOptions::agreement), summed over
/// batches.
struct Agreement {
  int64_t matched = 0;  ///< results both give
  int64_t total = 0;    ///< results either gives (FP32's, and those only the quantized one gives)
  double share() const { return total > 0 ? static_cast<double>(matched) / total : 1.0; }
};

/// Error of a quantized result against FP32, over every float output element of the report's
/// batches: the lowest cosine similarity of any output (and which), the largest |difference|;
/// with CalibrationOptions::agreement, how many of FP32's results it gives again.
struct QuantError {
  double cosine = 1.0;
  double maxAbs = 0.0;
  std::string worstOutput;
  Agreement agreement;  ///< 0 of 0 without CalibrationOptions::agreement
};

struct CalibrationOptions {
  CalibratorParams calibrator;
  int histogramBins = AbsHistogram::kDefaultBins;
  /// Images per run: 0 takes the model's static batch dimension (1 if it is dynamic).
  int64_t batchSize = 0;
  /// Import and passes: the same settings the engine will be built with, so the layers and
  /// tensors calibrated are the engine's (backend and precision are not used; the GPU engine
  /// of `backend` takes its device, timing cache and tactic settings).
  BuilderConfig builder;
  /// Where passes 1 and 2 (ranges, histograms) run. kCpu (the default): the FP32 graph on the
  /// CPU reference, no engine to build, fast for small models and few images. kCuda: an FP32
  /// engine of the same graph on the GPU (FP32 kernels only, no TF32), every calibrated tensor
  /// one of its outputs: for large models and datasets, where the CPU takes minutes; the
  /// engine's build takes seconds to a minute, less with the device's timing cache. Its
  /// shapes are static: a dynamic batch takes batchSize (or 1), other dynamic dims must come
  /// from builder.inputShapes. kAuto: the GPU when one is usable. The sensitivity report always
  /// runs on the CPU reference (it simulates INT8 exactly there).
  Backend backend = Backend::kCpu;

  /// Activation smoothing (quant/smoothing.h; off by default): activations carried from
  /// convolutions to convolutions have their channels' ranges evened out before they are
  /// quantized per tensor (channel c carried divided by a factor s_c that the reading
  /// convolutions' weights take back: the same function in FP32). Depthwise outputs, whose
  /// channels span 100x and more in depthwise-separable networks, lose the most to one scale
  /// per tensor. It raises BlazeFace's whole-model INT8 cosine (0.914 -> 0.950) but not its
  /// detections' match (docs/performance.md), so it is an option to compare with the report,
  /// not the default. Not for models with their own Q/DQ scales.
  bool smoothing = false;
  /// How far smoothing moves a channel's range into the readers' weights, in [0, 1]:
  /// s_c = a_c^alpha / w_c^(1 - alpha) (SmoothQuant's migration strength; 0.5 by default).
  /// Where every reader is depthwise, its per-channel weights pay nothing and 1 is taken.
  double smoothingAlpha = 0.5;

  /// Make the sensitivity report (implied by the exclusion options and compareCalibrators).
  bool report = false;
  /// Batches of the calibration data the report runs (the first ones).
  int reportBatches = 16;
  /// Also report the whole-model error of every calibrator (the amax of each from the same
  /// histograms), so one can be picked per model.
  bool compareCalibrators = false;
  /// Keep the N layers whose INT8 hurts the model output most out of INT8 (FP16 in the policy).
  int excludeWorst = 0;
  /// Keep layers whose model-output cosine similarity, quantized alone, is below this out of
  /// INT8 (<= 0: off).
  double excludeBelowCosine = 0;

  /// The layers that compute the model's outputs: on each path back from a graph output, the
  /// first quantizable layer (through data movement, activations and other layers that are not
  /// quantizable). kKeep keeps them out of INT8 (FP16 in the policy, before the ranking's and
  /// the agreement target's exclusions), with or without the report. A detector compares its
  /// score outputs with a threshold, where one step of the head's per-tensor INT8 input moves
  /// background anchors over it: BlazeFace back with the sensitivity policy made 13 false
  /// detections on 20 real frames where FP32 made 3, and 2 with its four heads (1x1
  /// convolutions) kept out (docs/performance.md). kAuto is kInt8 here; the vision helpers
  /// (setOutputLayerPolicy) make it kKeep for a detection decoder, as VisionModel, `edgeinfer
  /// calibrate --config` and `edgeinfer build --calibration-data --config` do.
  enum class OutputLayers : uint8_t { kAuto, kInt8, kKeep };
  OutputLayers outputLayers = OutputLayers::kAuto;

  /// How the report compares the model's outputs with FP32's (the model-output errors: the
  /// per-layer ranking, the policy, the calibrator comparison): called on the FP32 outputs
  /// and the quantized ones of the same batch (copies), it may replace both with what a
  /// decoder reads of them, so that errors on values the decoder ignores (the scores of
  /// background anchors, far below its threshold) do not hide those it uses. Empty: the raw
  /// outputs. VisionModel and `edgeinfer calibrate --config` set it for SSD-style detectors
  /// (vision::ssdOutputView). A non-OK status stops the report.
  std::function<Status(std::map<std::string, Tensor>& reference,
                       std::map<std::string, Tensor>& quantized)>
      outputView;
  std::string outputViewName;  ///< for the report, e.g. "as the SSD decoder reads them"

  /// How many of FP32's results the quantized model gives again, on one report batch (the
  /// outputs of both, as the engines return them): e.g. a detector's boxes found again at
  /// IoU >= 0.9 and none added, a classifier's top-1 class (vision::setResultAgreement).
  /// Empty: none. The report then gives it for every layer in INT8 and for the policy.
  std::function<Expected<Agreement>(const std::map<std::string, Tensor>& reference,
                                    const std::map<std::string, Tensor>& quantized)>
      agreement;
  std::string agreementName;  ///< for the report, e.g. "detections at IoU >= 0.9"
  /// With `agreement`: the policy also keeps out of INT8 the fewest next-ranked layers (after
  /// those of excludeWorst / excludeBelowCosine, worst first) that bring the agreement on the
  /// report batches to at least this share, e.g. 0.98 (0: off). Found by bisection over the
  /// ranking, about log2(layers) more report runs; if even every layer out of INT8 cannot reach
  /// it (the FP16 kernels are not what the CPU report simulates), all are kept out and a
  /// warning says so. Judged on agreementBatches of the data: give it the results that
  /// matter, e.g. images with objects near the decoder's threshold.
  double minAgreement = 0;
  /// Batches the agreement target judges, every layer INT8 and the policy are measured on
  /// (the first of the data; at least reportBatches): results near a decoder's threshold are
  /// rare, so more than the ranking needs.
  int agreementBatches = 64;
  /// Where the agreement target judges a policy: kCpu (the default) on the report's simulation
  /// (INT8 layers fake-quantized, the others in FP32, on the CPU reference); kCuda on the GPU
  /// engine the policy gives (strict INT8 where it says INT8, FP16 elsewhere; `builder`'s
  /// device, timing cache and tactic settings), so that the target holds for what will run:
  /// the GPU's FP16 layers and its INT8 kernels' rounding move results near a decoder's
  /// threshold that the simulation does not. One engine build a step of the bisection (about
  /// log2(layers) + 2). kAuto: the GPU when one is usable. VisionModel sets its own backend.
  Backend agreementBackend = Backend::kCpu;

  CalibrationProgressFn progress;  ///< called after every sample / report run
};

struct LayerSensitivity {
  std::string layer;  ///< node name in the optimised graph (`edgeinfer inspect`)
  std::string opType;
  std::vector<std::string> inputs;      ///< the activation tensors quantized per tensor
  QuantError layerError;                ///< this layer's output, quantized alone, on FP32 inputs
  QuantError modelError;                ///< the model outputs with only this layer in INT8
  Precision policy = Precision::kInt8;  ///< kFp16 when the exclusion options keep it out
  bool outputLayer = false;  ///< computes a model output (CalibrationOptions::outputLayers)
};

struct CalibratorComparison {
  CalibratorParams calibrator;
  QuantError modelError;  ///< every layer in INT8 with this calibrator's ranges
};

struct SensitivityReport {
  CalibratorParams calibrator;
  std::string outputView;   ///< CalibrationOptions::outputViewName ("" for the raw outputs)
  std::string agreement;    ///< CalibrationOptions::agreementName ("": none)
  double minAgreement = 0;  ///< CalibrationOptions::minAgreement
  /// Layers the agreement target kept out of INT8 beyond excludeWorst / excludeBelowCosine.
  int keptForAgreement = 0;
  /// Layers kept out of INT8 because they compute an output (CalibrationOptions::outputLayers).
  int keptOutputLayers = 0;
  /// What judged the policy's agreement (CalibrationOptions::agreementBackend): "CPU simulation"
  /// or "GPU engine"; every layer INT8 and each layer alone are always the CPU's simulation.
  std::string agreementJudge;
  /// Samples every layer INT8, the policy and the agreement target were measured on (the
  /// ranking: `samples`).
  int64_t agreementSamples = 0;
  int64_t samples = 0;  ///< images (or tensor samples) the ranking ran (each layer alone)
  std::vector<LayerSensitivity> layers;           ///< worst model-output cosine first
  QuantError allInt8;                             ///< every quantizable layer in INT8
  QuantError withPolicy;                          ///< excluded layers kept out of INT8
  std::vector<CalibratorComparison> calibrators;  ///< compareCalibrators only

  /// The table `edgeinfer calibrate --report` prints.
  std::string toText() const;
  std::string toJson() const;
};

struct CalibrationResult {
  CalibrationCache cache;
  bool hasReport = false;
  SensitivityReport report;
  int64_t samples = 0;  ///< samples calibrated (per pass)
  double seconds = 0;
};

/// Calibrates the model at `onnxPath` on `data` (see the top of this file). Errors: the
/// model's (import, shapes), kInvalidArgument for bad options or data that does not fit the
/// model (naming the sample), kInvalidArgument when no sample could be read, and
/// kUnsupported for a model without quantizable layers (INT8 would change nothing, so no
/// cache is made).
Expected<CalibrationResult> calibrate(const std::string& onnxPath, CalibrationSource& data,
                                      const CalibrationOptions& options = {});

}  // namespace edgeinfer
