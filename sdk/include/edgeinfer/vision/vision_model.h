// A network as applications and the GStreamer element use it: frames in, results out. It
// reads a model config (vision/model_config.h), builds or loads the engine (cached on disk, keyed
// by the model, the backend, the precision and the device), preprocesses frames (on the GPU
// with one kernel per batch when the engine runs there, frames in host or device memory),
// runs the engine and decodes its outputs into Detection / Classification results in frame
// pixels.
//
//   auto model = edgeinfer::vision::VisionModel::load("models/blazeface/model.json");
//   auto results = (*model)->infer({frameView});   // one FrameResult per frame
//   for (const Detection& d : (*results)[0].detections) ...
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "edgeinfer/builder.h"
#include "edgeinfer/calibration.h"
#include "edgeinfer/engine.h"
#include "edgeinfer/status.h"
#include "edgeinfer/vision/model_config.h"
#include "edgeinfer/vision/preprocess.h"
#include "edgeinfer/vision/types.h"

namespace edgeinfer::vision {

/// Sets opt->outputView (unless it has one) to compare model outputs as `config`'s decoder
/// reads them: SSD-style detectors (BlazeFace) through ssdOutputView; other decoders keep the
/// raw outputs. Returns whether it set one. (BlazeFace back, docs/performance.md: the report
/// then ranks the score head worst, cosine 0.265 where the raw logits said 0.950, but the
/// policy at 0.999 keeps 24 layers in FP16 and matches 22 of 25 faces, 23 on raw outputs.)
bool setDecoderOutputView(const ModelConfig& config, CalibrationOptions* opt);

/// How many of the results `config`'s decoder reads from the FP32 outputs it reads again from
/// the quantized ones of the same batch (CalibrationOptions::agreement), in model-input
/// coordinates: detections (SSD, YOLO) of the same class matched one to one at IoU >=
/// `minIou` (matched: pairs; total: FP32's detections plus the quantized ones left over), a
/// classifier's top-1 class per image, a segmentation's class per pixel. Errors are the
/// decoder's (a missing output, shapes it does not take).
Expected<Agreement> resultAgreement(const ModelConfig& config,
                                    const std::map<std::string, Tensor>& reference,
                                    const std::map<std::string, Tensor>& quantized,
                                    float minIou = 0.9f);

/// Sets opt->agreement to resultAgreement() with `config` (detections at IoU >= 0.9, the
/// issue's measure of an INT8 detector), and opt->minAgreement to `minAgreement` (0: only
/// reported): the report then says how many of FP32's results INT8 keeps, and the policy keeps
/// layers out of INT8 until that share is reached on the report's batches.
void setResultAgreement(const ModelConfig& config, CalibrationOptions* opt,
                        double minAgreement = 0);

/// Resolves opt->outputLayers when it is kAuto: kKeep for a detection decoder (SSD / BlazeFace,
/// YOLO), whose score outputs meet a threshold where one INT8 step of a head's input turns
/// background anchors into detections; kInt8 for the others (a classifier's top-1 and a
/// segmentation's arg-max move little). Returns the policy it leaves.
CalibrationOptions::OutputLayers setOutputLayerPolicy(const ModelConfig& config,
                                                      CalibrationOptions* opt);

struct VisionModelOptions {
  /// kAuto: the GPU when one is usable, else the CPU.
  Backend backend = Backend::kAuto;
  /// Kernel precision on the GPU. The CPU computes in FP32 for kFp32 and kFp16, and emulates
  /// INT8 for kInt8 (the INT8 engine's values, in FP32 arithmetic: for accuracy checks).
  /// kInt8 needs ranges: builder.calibrationCachePath, calibrationData, or a model with its
  /// own Q/DQ scales.
  Precision precision = Precision::kFp16;
  int deviceId = 0;
  /// Where engines are kept between runs ("" = $XDG_CACHE_HOME/edgeinfer/engines, or
  /// ~/.cache/edgeinfer/engines). A cached engine is reused when it was built from the same
  /// ONNX bytes, backend, precision and SDK version for this device; otherwise it is rebuilt
  /// (and the reason logged).
  std::string engineCacheDir;
  /// Do not read or write the engine cache.
  bool noEngineCache = false;
  /// A prebuilt engine file (`edgeinfer build`) to run instead of building one or using the
  /// cache. Nothing is rebuilt for it: an engine built for another device (kDeviceMismatch,
  /// naming both device keys) or SDK, a damaged file, or an engine built from other ONNX bytes
  /// than the config's model (kInvalidArgument, naming both hashes; checked when the model
  /// file is there) fails the load.
  std::string enginePath;
  /// Builder settings besides backend/precision/deviceId (timing cache, passes ...).
  BuilderConfig builder;
  /// INT8 without builder.calibrationCachePath: calibration data (a folder of images, a video
  /// file, or a folder of .npy tensors: openCalibrationData), calibrated once through the
  /// config's own preprocessing with `calibration` into a calibration cache kept in the engine
  /// cache folder, named by the model, the preprocessing, the calibration options and the
  /// data (file names, sizes and times); later loads reuse it without reading the data.
  std::string calibrationData;
  /// How calibrationData is calibrated (its `builder` is set from `builder`). By default
  /// min-max ranges (entropy loses accuracy on detectors: TensorRT #3922, #1834) and the
  /// sensitivity report's policy, measured on 4 batches of the data: layers whose INT8 alone
  /// lowers the model-output cosine below 0.999 stay in FP16 (on the raw outputs;
  /// setDecoderOutputView() compares them as the decoder reads them instead). A detector's
  /// heads, the layers computing its outputs, stay out of INT8 too (outputLayers kAuto:
  /// setOutputLayerPolicy()). VisionModel counts the config's decoder's results INT8 gives
  /// again (setResultAgreement(), unless `agreement` is given) and logs it; minAgreement (off
  /// by default) keeps the next-ranked layers out of INT8 too until that share is reached on
  /// the data: BlazeFace back then keeps 47-63 of 69 layers in FP16, and the front model on
  /// photos of another kind than its own 34-36 of 37, so it is a choice of the user's
  /// (docs/performance.md).
  CalibrationOptions calibration = defaultCalibration();
  static CalibrationOptions defaultCalibration() {
    CalibrationOptions c;
    c.calibrator.method = CalibrationMethod::kMinMax;
    c.excludeBelowCosine = 0.999;
    c.reportBatches = 4;
    return c;
  }
  /// How many infer() calls may run at the same time, from different threads (1 to 64). Each
  /// runs on an execution context of its own (on the GPU: its own CUDA stream, activation
  /// memory, CUDA graph and preprocessor) sharing the engine's weights, so one call's engine
  /// run overlaps another's decoding and preprocessing. A call that finds every context busy
  /// waits for one.
  int contexts = 1;
};

/// What a model found in one frame.
struct FrameResult {
  std::vector<Detection> detections;            ///< detectors (yolov5/yolov8/ssd decoders)
  std::vector<Classification> classifications;  ///< classifiers, best first
  Tensor segmentation;                          ///< segmentation decoder: class per pixel (uint8)
  Transform transform;                          ///< tensor-to-frame mapping used
};

/// Where infer() has spent its time since the model was loaded (wall clock of the calling
/// thread, summed over batches): what limits a pipeline. GPU preprocessing is queued, not
/// waited for; the engine's time includes that wait.
struct VisionStageTimes {
  int64_t batches = 0;        ///< engine runs
  int64_t frames = 0;         ///< frames (or regions) given to infer()
  double preprocessMs = 0.0;  ///< frames -> input tensor
  double engineMs = 0.0;      ///< ExecutionContext::execute(), until the outputs are ready
  double outputMs = 0.0;      ///< fetching the outputs (device -> host copies on the GPU)
  double decodeMs = 0.0;      ///< the decoder (boxes, NMS, top-k) on the CPU
};

class VisionModel {
 public:
  /// Reads the config and builds (or loads the cached) engine. Errors name the config file
  /// and field, the model file, or the engine's mismatch with the config (input tensor name,
  /// shape, output names).
  static Expected<std::unique_ptr<VisionModel>> load(const std::string& configPath,
                                                     const VisionModelOptions& options = {});
  static Expected<std::unique_ptr<VisionModel>> create(const ModelConfig& config,
                                                       const VisionModelOptions& options = {});
  virtual ~VisionModel() = default;

  virtual const ModelConfig& config() const = 0;
  virtual const Engine& engine() const = 0;
  /// Whether the engine runs on the GPU.
  virtual bool onGpu() const = 0;
  /// "built in 12.3 s" or "loaded from <file>": how the engine came to be.
  virtual const std::string& engineSource() const = 0;

  /// Time spent per stage by infer() so far (summed over the calls, also over calls that ran
  /// at the same time).
  virtual VisionStageTimes stageTimes() const = 0;
  /// VisionModelOptions::contexts: how many infer() calls can run at the same time.
  virtual int contexts() const = 0;

  /// Runs frames (host or, with a GPU engine, device memory) through the model: one result per
  /// frame, in order. Batches larger than the engine's batch run in several passes. Thread-safe:
  /// up to contexts() calls run at once, others wait for a free context.
  Expected<std::vector<FrameResult>> infer(const std::vector<FrameView>& frames) {
    return infer(frames, {});
  }
  /// The same on regions of the frames: the model sees `rois[i]` of `frames[i]` (e.g. a
  /// detection's box, for a secondary classifier) instead of the whole frame, as if it were a
  /// frame of its own; results (boxes, keypoints, FrameResult::transform) are in pixels of the
  /// whole frame. `rois` is empty (whole frames) or has one rectangle per frame; a rectangle of
  /// width or height 0 also means the whole frame. The same frame may appear several times with
  /// different regions. For NV12/I420 frames a region's left and top edges are moved to even
  /// coordinates (at most one pixel left/up, the size growing by as much) so that it starts on
  /// a chroma sample (cropFrame); this is the same on the CPU and the GPU. A region not inside
  /// its frame is kInvalidArgument.
  virtual Expected<std::vector<FrameResult>> infer(const std::vector<FrameView>& frames,
                                                   const std::vector<PixelRect>& rois) = 0;
};

}  // namespace edgeinfer::vision
