// VisionModel: config -> engine (cached) -> preprocess -> run -> decode (vision_model.h).
#include "edgeinfer/vision/vision_model.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <google/protobuf/io/coded_stream.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <mutex>
#include <system_error>
#include <thread>

#include "builder/engine_format.h"
#include "edgeinfer/logger.h"
#include "edgeinfer/vision/postprocess.h"
#include "onnx/importer.h"
#include "runtime/cuda_backend.h"

namespace edgeinfer::vision {
namespace {

Status invalid(std::string message) {
  return Status(ErrorCode::kInvalidArgument, std::move(message));
}

std::string defaultCacheDir() {
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/edgeinfer/engines";
  if (const char* h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/edgeinfer/engines";
  return ".edgeinfer-engines";
}

Status makeDirs(const std::string& dir) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i < dir.size() && dir[i] != '/') continue;
    const std::string part = dir.substr(0, i);
    struct stat st {};
    if (stat(part.c_str(), &st) == 0) {
      if (!S_ISDIR(st.st_mode))
        return Status(ErrorCode::kIoError, "engine cache: '" + part + "' is not a directory");
      continue;
    }
    if (mkdir(part.c_str(), 0755) != 0 && errno != EEXIST)
      return Status(ErrorCode::kIoError, "engine cache: cannot create directory '" + part + "'");
  }
  return Status::Ok();
}

std::string fileSafe(std::string s) {
  for (char& c : s)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return s.empty() ? "model" : s;
}

/// What identifies calibration data without reading it: for a folder, its entries' names,
/// sizes and modification times (in name order); for a file, its size and time.
std::string calibrationDataKey(const std::string& path) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return "missing:" + path;
  const auto stamp = [](const struct stat& s) {
    return std::to_string(static_cast<long long>(s.st_size)) + ":" +
           std::to_string(static_cast<long long>(s.st_mtim.tv_sec)) + "." +
           std::to_string(static_cast<long long>(s.st_mtim.tv_nsec)) + ":" +
           std::to_string(static_cast<unsigned long long>(s.st_ino)) + ";";
  };
  if (!S_ISDIR(st.st_mode)) return "file:" + stamp(st);
  std::vector<std::string> names;
  if (DIR* d = opendir(path.c_str())) {
    while (const dirent* e = readdir(d))
      if (e->d_name[0] != '.') names.emplace_back(e->d_name);
    closedir(d);
  }
  std::sort(names.begin(), names.end());
  std::string key = "dir:";
  for (const std::string& n : names) {
    struct stat f {};
    key += n + "=" + (stat((path + "/" + n).c_str(), &f) == 0 ? stamp(f) : std::string("?;"));
  }
  return key;
}

/// What decides the optimised graph a calibration cache names: the passes (options and their
/// environment switches), the input shapes and the dynamic default.
std::string graphKey(const BuilderConfig& bc) {
  const PassOptions& p = bc.passes;
  std::string key;
  for (bool b : {p.constantFolding, p.eliminateIdentity, p.eliminateDeadNodes, p.foldBatchNorm,
                 p.fuseConvActivation, p.fuseGemmActivation, p.fuseElementwise,
                 p.explicitQuantization, p.lowerQOperators})
    key += b ? '1' : '0';
  for (const char* env :
       {"EDGEINFER_DISABLE_CONSTANT_FOLDING", "EDGEINFER_DISABLE_ELIMINATE_IDENTITY",
        "EDGEINFER_DISABLE_DEAD_NODE_ELIMINATION", "EDGEINFER_DISABLE_FOLD_BATCHNORM",
        "EDGEINFER_DISABLE_FUSE_CONV", "EDGEINFER_DISABLE_FUSE_GEMM",
        "EDGEINFER_DISABLE_FUSE_ELEMENTWISE", "EDGEINFER_DISABLE_EXPLICIT_QUANTIZATION",
        "EDGEINFER_DISABLE_LOWER_QOPERATORS", "EDGEINFER_DISABLE_FUSION"}) {
    const char* v = std::getenv(env);
    key += std::string(";") + (v ? v : "");
  }
  key += ";" + std::to_string(bc.dynamicDimDefault) + ";" + formatShapeProfile(bc.inputShapes) +
         ";" + std::to_string(bc.maxTensorBytes);
  return key;
}

}  // namespace

bool setDecoderOutputView(const ModelConfig& config, CalibrationOptions* opt) {
  if (opt->outputView || config.decoder != DecoderType::kSsd) return false;
  const SsdParams ssd = config.ssd;
  opt->outputView = [ssd](std::map<std::string, Tensor>& ref, std::map<std::string, Tensor>& q) {
    return ssdOutputView(ssd, ref, q);
  };
  opt->outputViewName =
      "as the SSD decoder reads them (scores after its sigmoid, boxes weighted by their "
      "anchor's FP32 score)";
  return true;
}

namespace {

/// Detections of `ref` and `q` (both over the batch, batchIndex set) of the same image and
/// class matched one to one, best IoU first, at IoU >= minIou.
Agreement detectionAgreement(const std::vector<Detection>& ref, const std::vector<Detection>& q,
                             float minIou) {
  struct Pair {
    float iou;
    size_t r, q;
  };
  std::vector<Pair> pairs;
  for (size_t i = 0; i < ref.size(); ++i)
    for (size_t j = 0; j < q.size(); ++j) {
      if (ref[i].batchIndex != q[j].batchIndex || ref[i].classId != q[j].classId) continue;
      const float o = iou(ref[i].box, q[j].box);
      if (o >= minIou) pairs.push_back({o, i, j});
    }
  std::stable_sort(pairs.begin(), pairs.end(),
                   [](const Pair& a, const Pair& b) { return a.iou > b.iou; });
  std::vector<bool> usedR(ref.size()), usedQ(q.size());
  Agreement a;
  for (const Pair& p : pairs) {
    if (usedR[p.r] || usedQ[p.q]) continue;
    usedR[p.r] = usedQ[p.q] = true;
    ++a.matched;
  }
  a.total = static_cast<int64_t>(ref.size() + q.size()) - a.matched;
  return a;
}

Expected<std::vector<Detection>> decodeForAgreement(const ModelConfig& c,
                                                    const std::map<std::string, Tensor>& out) {
  const auto output = [&](const std::string& name) -> Expected<Tensor> {
    auto it = out.find(name);
    if (it == out.end())
      return Status(ErrorCode::kNotFound, "no output named '" + name + "' to decode");
    return it->second;
  };
  if (c.decoder == DecoderType::kSsd) return decodeSsdOutputs(out, c.ssd);
  EI_ASSIGN_OR_RETURN(Tensor t, output(c.outputTensor));
  return c.decoder == DecoderType::kYoloV5 ? decodeYoloV5(t, c.yolov5) : decodeYoloV8(t, c.yolov8);
}

}  // namespace

Expected<Agreement> resultAgreement(const ModelConfig& config,
                                    const std::map<std::string, Tensor>& reference,
                                    const std::map<std::string, Tensor>& quantized, float minIou) {
  if (!(minIou > 0.f && minIou <= 1.f))
    return Status(
        ErrorCode::kInvalidArgument,
        "agreement: the IoU for a match must be in (0, 1], not " + std::to_string(minIou));
  const auto output = [](const std::map<std::string, Tensor>& m,
                         const std::string& name) -> Expected<Tensor> {
    auto it = m.find(name);
    if (it == m.end())
      return Status(ErrorCode::kNotFound, "agreement: no output named '" + name + "'");
    return it->second;
  };
  switch (config.decoder) {
    case DecoderType::kSsd:
    case DecoderType::kYoloV5:
    case DecoderType::kYoloV8: {
      EI_ASSIGN_OR_RETURN(auto r, decodeForAgreement(config, reference));
      EI_ASSIGN_OR_RETURN(auto q, decodeForAgreement(config, quantized));
      return detectionAgreement(r, q, minIou);
    }
    case DecoderType::kClassification: {
      EI_ASSIGN_OR_RETURN(Tensor rt, output(reference, config.outputTensor));
      EI_ASSIGN_OR_RETURN(Tensor qt, output(quantized, config.outputTensor));
      ClassifyParams top1 = config.classify;
      top1.topK = 1;
      EI_ASSIGN_OR_RETURN(auto r, classify(rt, top1));
      EI_ASSIGN_OR_RETURN(auto q, classify(qt, top1));
      Agreement a;
      for (size_t i = 0; i < r.size(); ++i) {
        ++a.total;
        a.matched +=
            i < q.size() && !r[i].empty() && !q[i].empty() && r[i][0].classId == q[i][0].classId;
      }
      return a;
    }
    case DecoderType::kSegmentation: {
      EI_ASSIGN_OR_RETURN(Tensor rt, output(reference, config.outputTensor));
      EI_ASSIGN_OR_RETURN(Tensor qt, output(quantized, config.outputTensor));
      EI_ASSIGN_OR_RETURN(Tensor r, segmentationClasses(rt, config.segmentation, DataType::kInt32));
      EI_ASSIGN_OR_RETURN(Tensor q, segmentationClasses(qt, config.segmentation, DataType::kInt32));
      if (r.shape() != q.shape())
        return Status(ErrorCode::kInvalidArgument, "agreement: segmentation maps " + r.describe() +
                                                       " and " + q.describe() + " differ in shape");
      Agreement a;
      a.total = r.numel();
      for (int64_t i = 0; i < r.numel(); ++i)
        a.matched += r.data<int32_t>()[i] == q.data<int32_t>()[i];
      return a;
    }
  }
  return Status(ErrorCode::kInternal, "agreement: unknown decoder");
}

void setResultAgreement(const ModelConfig& config, CalibrationOptions* opt, double minAgreement) {
  opt->agreement = [config](const std::map<std::string, Tensor>& r,
                            const std::map<std::string, Tensor>& q) {
    return resultAgreement(config, r, q);
  };
  switch (config.decoder) {
    case DecoderType::kClassification:
      opt->agreementName = "top-1 class per image";
      break;
    case DecoderType::kSegmentation:
      opt->agreementName = "class per pixel";
      break;
    default:
      opt->agreementName = "the decoder's detections, same class and IoU >= 0.9";
  }
  opt->minAgreement = minAgreement;
}

CalibrationOptions::OutputLayers setOutputLayerPolicy(const ModelConfig& config,
                                                      CalibrationOptions* opt) {
  using OutputLayers = CalibrationOptions::OutputLayers;
  if (opt->outputLayers == OutputLayers::kAuto) {
    const bool detector = config.decoder == DecoderType::kSsd ||
                          config.decoder == DecoderType::kYoloV5 ||
                          config.decoder == DecoderType::kYoloV8;
    opt->outputLayers = detector ? OutputLayers::kKeep : OutputLayers::kInt8;
  }
  return opt->outputLayers;
}

namespace {

/// What the calibration's report says of the policy's agreement with FP32, for the log.
std::string agreementNote(const SensitivityReport& r) {
  if (r.agreement.empty()) return "no agreement counted";
  const Agreement& a = r.withPolicy.agreement;
  char share[32];
  std::snprintf(share, sizeof share, "%.1f", 100.0 * a.share());
  return std::to_string(a.matched) + " of " + std::to_string(a.total) + " results as FP32's (" +
         share + " %, " + r.agreement + ") on " + std::to_string(r.agreementSamples) +
         " sample(s)" +
         (r.minAgreement > 0
              ? ", " + std::to_string(r.keptForAgreement) + " layer(s) for the target"
              : std::string());
}

/// A model whose image input has dynamic dims besides the batch (any height and width: text
/// detectors, segmentation nets) is built for the config's input size: the input's shape in
/// `bc->inputShapes` (the batch: the model's, else dynamicDimDefault), unless one is given.
/// Models with a static image size are left as they are (their shape is checked at init).
/// Skips the field of `tag` in `in` (false for groups, unused by ONNX, or a truncated stream).
bool skipField(google::protobuf::io::CodedInputStream& in, uint32_t tag) {
  uint64_t v = 0;
  uint32_t len = 0;
  switch (tag & 7) {
    case 0:
      return in.ReadVarint64(&v);
    case 1:
      return in.Skip(8);
    case 2:
      return in.ReadVarint32(&len) && in.Skip(static_cast<int>(len));
    case 5:
      return in.Skip(4);
    default:
      return false;
  }
}

/// The graph inputs of a serialized ModelProto (field 7, the graph; its field 11, input), read
/// past every other field: the weights are skipped, not copied (a whole parse of a 100 MB model
/// takes ~37 ms, at every load). False when the bytes are no such message.
bool graphInputs(const std::vector<uint8_t>& bytes, std::vector<onnx::ValueInfoProto>* out) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) return false;
  google::protobuf::io::CodedInputStream in(bytes.data(), static_cast<int>(bytes.size()));
  for (uint32_t tag = in.ReadTag(); tag != 0; tag = in.ReadTag()) {
    if (tag != ((7u << 3) | 2u)) {
      if (!skipField(in, tag)) return false;
      continue;
    }
    uint32_t len = 0;
    if (!in.ReadVarint32(&len)) return false;
    const auto graph = in.PushLimit(static_cast<int>(len));
    for (uint32_t g = in.ReadTag(); g != 0; g = in.ReadTag()) {
      if (g != ((11u << 3) | 2u)) {
        if (!skipField(in, g)) return false;
        continue;
      }
      uint32_t n = 0;
      if (!in.ReadVarint32(&n)) return false;
      const auto vi = in.PushLimit(static_cast<int>(n));
      out->emplace_back();
      if (!out->back().ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) return false;
      in.PopLimit(vi);
    }
    in.PopLimit(graph);
  }
  return in.ConsumedEntireMessage();
}

void fillInputShapeFromConfig(const ModelConfig& config, const std::vector<uint8_t>& bytes,
                              BuilderConfig* bc) {
  if (bc->inputShapes.count(config.inputTensor)) return;
  std::vector<onnx::ValueInfoProto> inputs;
  if (!graphInputs(bytes, &inputs)) return;  // the build says what is wrong with the model
  for (const auto& in : inputs) {
    if (in.name() != config.inputTensor || !in.type().has_tensor_type() ||
        !in.type().tensor_type().has_shape())
      continue;
    const auto& dims = in.type().tensor_type().shape().dim();
    if (dims.size() != 4) return;
    bool dynamic = false;
    for (int k = 1; k < 4; ++k)
      dynamic = dynamic || !dims[k].has_dim_value() || dims[k].dim_value() <= 0;
    if (!dynamic) return;
    const int64_t batch = dims[0].has_dim_value() && dims[0].dim_value() > 0
                              ? dims[0].dim_value()
                              : std::max<int64_t>(1, bc->dynamicDimDefault);
    const Shape shape = preprocessTensorShape(config.preprocess, batch);
    bc->inputShapes[config.inputTensor] = shape;
    log(Severity::kInfo, config.name + ": input '" + config.inputTensor +
                             "' has dynamic dims; built for the config's " + shape.toString());
    return;
  }
}

/// VisionModelOptions::calibrationData: the calibration cache for it, reused from `dir` when
/// one with the same key is there, else calibrated now (through the config's preprocessing)
/// and saved to `dir` (to `tempPath`, removed by the caller after the build, when the engine
/// cache is off: `dir` empty).
Expected<std::string> calibrationCacheFor(const ModelConfig& config,
                                          const VisionModelOptions& options,
                                          const BuilderConfig& bc, const std::string& hash,
                                          const std::string& dir, std::string* tempPath) {
  CalibrationOptions c = options.calibration;
  setOutputLayerPolicy(config, &c);
  const std::string key = hash + ";" + preprocessHash(config.preprocess) + ";" +
                          describeCalibrator(c.calibrator) + ";" + std::to_string(c.histogramBins) +
                          ";" + std::to_string(c.batchSize) + ";" + std::to_string(c.excludeWorst) +
                          ";" + std::to_string(c.excludeBelowCosine) + ";" +
                          std::to_string(c.reportBatches) + ";" + std::to_string(c.smoothing) +
                          ";" + std::to_string(c.smoothingAlpha) + ";view=" + c.outputViewName +
                          ";agreement=" + c.agreementName + ";" + std::to_string(c.minAgreement) +
                          ";judge=" + backendName(c.minAgreement > 0 ? bc.backend : Backend::kCpu) +
                          ";outputs=" + std::to_string(static_cast<int>(c.outputLayers)) + ";" +
                          graphKey(bc) + ";" + calibrationDataKey(options.calibrationData);
  std::string path;
  if (!dir.empty()) {
    path = dir + "/" + fileSafe(config.name) + "-" + hash + "-" +
           builder::fnv1aHex(key.data(), key.size()) + ".calib";
    struct stat st {};
    if (stat(path.c_str(), &st) == 0) {
      auto cached = CalibrationCache::load(path);
      if (cached.ok() && cached->checkModel(hash).ok()) {
        log(Severity::kInfo, config.name + ": INT8 ranges from " + path +
                                 " (calibrated earlier on " + options.calibrationData + ")");
        return path;
      }
      log(Severity::kWarning,
          config.name + ": calibrating again, '" + path + "' cannot be used" +
              (cached.ok() ? std::string() : ": " + cached.status().toString()));
    }
  } else {
    char tmpl[] = "/tmp/edgeinfer-calib-XXXXXX";
    const int fd = mkstemp(tmpl);
    if (fd < 0) return Status(ErrorCode::kIoError, "cannot create a temporary calibration cache");
    close(fd);
    path = *tempPath = tmpl;
  }
  CalibrationDataOptions d;
  d.inputTensor = config.inputTensor;
  d.preprocess = config.preprocess;
  auto src = openCalibrationData(options.calibrationData, d);
  if (!src.ok())
    return Status(src.status().code(),
                  config.name + ": INT8 calibration data: " + src.status().message());
  CalibrationOptions opt = c;
  opt.builder = bc;
  // The agreement target judges the engine this model will run: on the GPU, its INT8 kernels
  // and FP16 layers, whose rounding moves results near a decoder's threshold that the CPU's
  // simulation does not.
  opt.agreementBackend = bc.backend;
  if (!opt.agreement) setResultAgreement(config, &opt, opt.minAgreement);
  log(Severity::kInfo, config.name + ": calibrating INT8 (" + describeCalibrator(c.calibrator) +
                           ") on " + (*src)->describe() + " ...");
  auto r = calibrate(config.modelPath, **src, opt);
  if (!r.ok())
    return Status(r.status().code(), config.name + ": INT8 calibration on " +
                                         options.calibrationData +
                                         " failed: " + r.status().message());
  EI_RETURN_IF_ERROR(r->cache.save(path));
  log(Severity::kInfo, config.name + ": calibrated on " + std::to_string(r->samples) +
                           " sample(s) in " + std::to_string(r->seconds).substr(0, 4) + " s, " +
                           std::to_string(r->cache.excludedLayers().size()) + " of " +
                           std::to_string(r->cache.layerPrecision.size()) +
                           " layers kept out of INT8 (" + agreementNote(r->report) + "); cache " +
                           path);
  return path;
}

class VisionModelImpl final : public VisionModel {
 public:
  VisionModelImpl(ModelConfig cfg, std::unique_ptr<Engine> engine, std::string source)
      : cfg_(std::move(cfg)), engine_(std::move(engine)), source_(std::move(source)) {}

  Status init(const VisionModelOptions& opt) {
    const TensorDesc* in = nullptr;
    std::string names;
    for (const TensorDesc& d : engine_->inputs()) {
      names += (names.empty() ? "" : ", ") + d.name;
      if (d.name == cfg_.inputTensor) in = &d;
    }
    const std::string where = cfg_.sourcePath.empty() ? cfg_.name : cfg_.sourcePath;
    if (!in)
      return invalid(where + ": input.tensor '" + cfg_.inputTensor +
                     "' is not an input of the model (its inputs: " + names + ")");
    if (engine_->inputs().size() != 1)
      return Status(ErrorCode::kUnsupported,
                    where + ": the model has " + std::to_string(engine_->inputs().size()) +
                        " inputs (" + names + "); VisionModel feeds one image input");
    const Shape& s = in->shape;
    batch_ = s.rank() == 4 && s[0] > 0 ? s[0] : 0;
    if (batch_ == 0 || s != preprocessTensorShape(cfg_.preprocess, batch_))
      return invalid(where + ": input '" + in->name + "' of the model is " + s.toString() +
                     " but the config's input (" + std::to_string(cfg_.preprocess.outputWidth) +
                     "x" + std::to_string(cfg_.preprocess.outputHeight) + ", " +
                     (cfg_.preprocess.layout == TensorLayout::kNCHW ? "NCHW" : "NHWC") +
                     ") makes " + preprocessTensorShape(cfg_.preprocess, 1).toString() +
                     " per image");
    if (in->dtype != cfg_.preprocess.dtype)
      return invalid(where + ": input.dtype is " + dataTypeName(cfg_.preprocess.dtype) +
                     " but the model's input '" + in->name + "' is " + dataTypeName(in->dtype));
    // Every output the decoder reads must exist.
    std::vector<std::string> wanted;
    if (cfg_.decoder == DecoderType::kSsd) {
      wanted = cfg_.ssd.boxOutputs;
      wanted.insert(wanted.end(), cfg_.ssd.scoreOutputs.begin(), cfg_.ssd.scoreOutputs.end());
    } else {
      wanted.push_back(cfg_.outputTensor);
    }
    std::string outs;
    for (const TensorDesc& d : engine_->outputs()) outs += (outs.empty() ? "" : ", ") + d.name;
    for (const std::string& w : wanted) {
      bool found = false;
      for (const TensorDesc& d : engine_->outputs()) found = found || d.name == w;
      if (!found)
        return invalid(where + ": decoder output '" + w +
                       "' is not an output of the model (its outputs: " + outs + ")");
    }
    gpu_ = engine_->info().backend == Backend::kCuda;
    for (int i = 0; i < opt.contexts; ++i) {
      auto lane = std::make_unique<Lane>();
      EI_RETURN_IF_ERROR(initLane(*lane, opt.deviceId));
      free_.push_back(lane.get());
      lanes_.push_back(std::move(lane));
    }
    return Status::Ok();
  }

  const ModelConfig& config() const override { return cfg_; }
  const Engine& engine() const override { return *engine_; }
  bool onGpu() const override { return gpu_; }
  const std::string& engineSource() const override { return source_; }
  VisionStageTimes stageTimes() const override {
    std::lock_guard<std::mutex> lock(mutex_);
    return times_;
  }
  int contexts() const override { return static_cast<int>(lanes_.size()); }

  Expected<std::vector<FrameResult>> infer(const std::vector<FrameView>& wholeFrames,
                                           const std::vector<PixelRect>& rois) override {
    if (!rois.empty() && rois.size() != wholeFrames.size())
      return invalid("infer: " + std::to_string(rois.size()) + " regions for " +
                     std::to_string(wholeFrames.size()) + " frames (give none or one per frame)");
    // Regions become frames of their own (cropFrame: no copy, host or device memory); their
    // transforms are moved back into the whole frame before decoding.
    std::vector<FrameView> cropped;
    std::vector<PixelRect> regions;
    if (!rois.empty()) {
      cropped.reserve(wholeFrames.size());
      for (size_t i = 0; i < wholeFrames.size(); ++i) {
        const FrameView& f = wholeFrames[i];
        PixelRect r = rois[i];
        if (r.width == 0 || r.height == 0) r = PixelRect{0, 0, f.width, f.height};
        if (f.format == PixelFormat::kNV12 || f.format == PixelFormat::kI420) {
          r.width += r.x & 1, r.x -= r.x & 1;
          r.height += r.y & 1, r.y -= r.y & 1;
        }
        auto view = cropFrame(f, r);
        if (!view.ok())
          return Status(view.status().code(),
                        "frame " + std::to_string(i) + ": " + view.status().message());
        cropped.push_back(*view);
        regions.push_back(r);
      }
    }
    const std::vector<FrameView>& frames = rois.empty() ? wholeFrames : cropped;
    LaneGuard lane(*this);
    return run(lane, frames, wholeFrames, regions);
  }

 private:
  /// What one infer() call at a time uses: see VisionModelOptions::contexts.
  struct Lane {
    std::unique_ptr<ExecutionContext> ctx;
    std::unique_ptr<CudaPreprocessor> pre;  // GPU engines
    Tensor input;                           // bound to ctx
  };

  /// A free lane for the life of the guard (waits for one); its times go to times_ at the end.
  struct LaneGuard {
    explicit LaneGuard(VisionModelImpl& m) : model(m) {
      std::unique_lock<std::mutex> lock(m.mutex_);
      m.laneFreed_.wait(lock, [&] { return !m.free_.empty(); });
      lane = m.free_.back();
      m.free_.pop_back();
    }
    ~LaneGuard() {
      {
        std::lock_guard<std::mutex> lock(model.mutex_);
        model.free_.push_back(lane);
        VisionStageTimes& t = model.times_;
        t.batches += times.batches;
        t.frames += times.frames;
        t.preprocessMs += times.preprocessMs;
        t.engineMs += times.engineMs;
        t.outputMs += times.outputMs;
        t.decodeMs += times.decodeMs;
      }
      model.laneFreed_.notify_one();
    }
    LaneGuard(const LaneGuard&) = delete;
    LaneGuard& operator=(const LaneGuard&) = delete;
    VisionModelImpl& model;
    Lane* lane = nullptr;
    VisionStageTimes times;
  };

  Status initLane(Lane& lane, int deviceId) {
    auto ctx = engine_->createExecutionContext();
    if (!ctx.ok()) return ctx.status();
    lane.ctx = std::move(*ctx);
    const Shape shape = preprocessTensorShape(cfg_.preprocess, batch_);
    auto host = Tensor::create(cfg_.preprocess.dtype, shape);
    if (!host.ok()) return host.status();
    if (gpu_) {
      auto pre = CudaPreprocessor::create(cfg_.preprocess, deviceId);
      if (!pre.ok()) return pre.status();
      lane.pre = std::move(*pre);
      auto dev = copyToDevice(*host, deviceId);
      if (!dev.ok()) return dev.status();
      lane.input = *dev;
    } else {
      lane.input = *host;
    }
    return lane.ctx->setInput(cfg_.inputTensor, lane.input);
  }

  /// infer() on one lane: `frames` are the whole frames or the regions cut out of them.
  Expected<std::vector<FrameResult>> run(LaneGuard& guard, const std::vector<FrameView>& frames,
                                         const std::vector<FrameView>& wholeFrames,
                                         const std::vector<PixelRect>& regions) {
    Lane& lane = *guard.lane;
    VisionStageTimes& times = guard.times;
    std::vector<FrameResult> results;
    results.reserve(frames.size());
    using Clock = std::chrono::steady_clock;
    const auto msSince = [](Clock::time_point t0) {
      return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    };
    times.frames += static_cast<int64_t>(frames.size());
    for (size_t start = 0; start < frames.size(); start += static_cast<size_t>(batch_)) {
      const size_t n = std::min(frames.size() - start, static_cast<size_t>(batch_));
      std::vector<Transform> transforms(n);
      auto t0 = Clock::now();
      if (gpu_) {
        const std::vector<FrameView> part(frames.begin() + static_cast<std::ptrdiff_t>(start),
                                          frames.begin() + static_cast<std::ptrdiff_t>(start + n));
        // Preprocessing is queued on the legacy default stream, the engine on its context's
        // own (non-blocking) stream, which waits for the preprocessing's event.
        EI_RETURN_IF_ERROR(lane.pre->run(part, lane.input, 0, &transforms, nullptr));
        if (void* ev = lane.pre->completionEvent()) EI_RETURN_IF_ERROR(lane.ctx->waitForEvent(ev));
      } else {
        for (size_t i = 0; i < n; ++i) {
          Status st = preprocessCpu(frames[start + i], cfg_.preprocess, lane.input,
                                    static_cast<int>(i), &transforms[i]);
          if (!st.ok())
            return Status(st.code(), "frame " + std::to_string(start + i) + ": " + st.message());
        }
      }
      if (!regions.empty()) {
        for (size_t i = 0; i < n; ++i) {
          const PixelRect& r = regions[start + i];
          const FrameView& whole = wholeFrames[start + i];
          transforms[i].roiX += static_cast<float>(r.x);
          transforms[i].roiY += static_cast<float>(r.y);
          transforms[i].frameWidth = static_cast<float>(whole.width);
          transforms[i].frameHeight = static_cast<float>(whole.height);
        }
      }
      times.preprocessMs += msSince(t0);
      t0 = Clock::now();
      EI_RETURN_IF_ERROR(lane.ctx->execute());
      times.engineMs += msSince(t0);
      ++times.batches;
      t0 = Clock::now();
      std::map<std::string, Tensor> outputs;
      for (const TensorDesc& d : engine_->outputs()) {
        auto t = lane.ctx->getOutput(d.name);
        if (!t.ok()) return t.status();
        outputs[d.name] = *t;
      }
      times.outputMs += msSince(t0);
      t0 = Clock::now();
      // Images beyond n (a partial last batch) are decoded too and dropped here.
      std::vector<Transform> all(static_cast<size_t>(batch_), transforms.back());
      for (size_t i = 0; i < n; ++i) all[i] = transforms[i];
      std::vector<FrameResult> part(static_cast<size_t>(batch_));
      EI_RETURN_IF_ERROR(decode(outputs, all, part));
      times.decodeMs += msSince(t0);
      for (size_t i = 0; i < n; ++i) {
        part[i].transform = transforms[i];
        results.push_back(std::move(part[i]));
      }
    }
    return results;
  }

  Status decode(const std::map<std::string, Tensor>& outputs, const std::vector<Transform>& tf,
                std::vector<FrameResult>& out) {
    auto addDetections = [&](Expected<std::vector<Detection>> dets) -> Status {
      if (!dets.ok()) return dets.status();
      for (Detection& d : *dets)
        if (d.batchIndex >= 0 && d.batchIndex < static_cast<int>(out.size()))
          out[static_cast<size_t>(d.batchIndex)].detections.push_back(std::move(d));
      return Status::Ok();
    };
    switch (cfg_.decoder) {
      case DecoderType::kSsd:
      case DecoderType::kYoloV5:
      case DecoderType::kYoloV8:
        return addDetections(decodeDetections(outputs, tf));
      case DecoderType::kClassification: {
        auto c = classify(outputs.at(cfg_.outputTensor), cfg_.classify);
        if (!c.ok()) return c.status();
        for (size_t i = 0; i < out.size() && i < c->size(); ++i)
          out[i].classifications = std::move((*c)[i]);
        return Status::Ok();
      }
      case DecoderType::kSegmentation: {
        auto m = segmentationClasses(outputs.at(cfg_.outputTensor), cfg_.segmentation);
        if (!m.ok()) return m.status();
        const Shape& s = m->shape();  // [N, H, W]
        const int64_t per = s.numel() / std::max<int64_t>(1, s[0]);
        for (size_t i = 0; i < out.size() && static_cast<int64_t>(i) < s[0]; ++i) {
          Tensor one = Tensor::zeros(m->dtype(), {s[1], s[2]});
          std::copy_n(m->data<uint8_t>() + static_cast<int64_t>(i) * per, per, one.data<uint8_t>());
          out[i].segmentation = one;
        }
        return Status::Ok();
      }
    }
    return Status(ErrorCode::kInternal, "unknown decoder");
  }

  /// The detection decoder on images [b0, b1) of the batch: the outputs sliced along their
  /// batch dim (no copy), batch indices moved back to the whole batch.
  Expected<std::vector<Detection>> decodeImages(const std::map<std::string, Tensor>& outputs,
                                                const std::vector<Transform>& tf, int64_t b0,
                                                int64_t b1) const {
    std::map<std::string, Tensor> part;
    for (const auto& [name, t] : outputs) {
      const Shape& sh = t.shape();
      if (sh.rank() < 1 || sh[0] != batch_) {
        part[name] = t;  // not batched: every image reads all of it
        continue;
      }
      Shape slice = sh;
      slice[0] = b1 - b0;
      const size_t perImage = static_cast<size_t>(sh.numel() / batch_) * dataTypeSize(t.dtype());
      part[name] = Tensor::wrap(
          const_cast<char*>(static_cast<const char*>(t.raw())) + static_cast<size_t>(b0) * perImage,
          t.dtype(), slice);
    }
    const std::vector<Transform> ptf(tf.begin() + b0, tf.begin() + b1);
    Expected<std::vector<Detection>> dets =
        cfg_.decoder == DecoderType::kSsd ? decodeSsdOutputs(part, cfg_.ssd, ptf)
        : cfg_.decoder == DecoderType::kYoloV5
            ? decodeYoloV5(part.at(cfg_.outputTensor), cfg_.yolov5, ptf)
            : decodeYoloV8(part.at(cfg_.outputTensor), cfg_.yolov8, ptf);
    if (dets.ok())
      for (Detection& d : *dets) d.batchIndex += static_cast<int>(b0);
    return dets;
  }

  /// Detection decoders work image by image (NMS and max_detections are per image), so a batch
  /// with large outputs is split over threads, a few images each: at 32 images of a 960x544
  /// detector the decoder took longer than the CPU part of everything else.
  Expected<std::vector<Detection>> decodeDetections(const std::map<std::string, Tensor>& outputs,
                                                    const std::vector<Transform>& tf) const {
    int64_t elements = 0;
    for (const auto& [name, t] : outputs) elements += t.numel();
    constexpr int64_t kElementsPerThread = int64_t{1} << 16;
    const int64_t hw = std::max(1u, std::thread::hardware_concurrency());
    const int64_t threads = std::min(
        {batch_, std::min<int64_t>(hw, 8), std::max<int64_t>(1, elements / kElementsPerThread)});
    if (threads <= 1 || static_cast<int64_t>(tf.size()) != batch_)
      return decodeImages(outputs, tf, 0, batch_);
    std::vector<Expected<std::vector<Detection>>> parts(
        static_cast<size_t>(threads), Status(ErrorCode::kInternal, "decoder thread did not run"));
    const auto run = [&](int64_t i) {
      const int64_t b0 = batch_ * i / threads, b1 = batch_ * (i + 1) / threads;
      parts[static_cast<size_t>(i)] = decodeImages(outputs, tf, b0, b1);
    };
    std::vector<std::thread> pool;
    for (int64_t i = 1; i < threads; ++i) {
      try {
        pool.emplace_back(run, i);
      } catch (const std::system_error&) {  // no thread to be had: decode it here
        run(i);
      }
    }
    run(0);
    for (std::thread& t : pool) t.join();
    std::vector<Detection> all;
    for (auto& p : parts) {
      if (!p.ok()) return p.status();
      for (Detection& d : *p) all.push_back(std::move(d));
    }
    return all;
  }

  ModelConfig cfg_;
  std::unique_ptr<Engine> engine_;
  std::string source_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  int64_t batch_ = 1;
  bool gpu_ = false;
  mutable std::mutex mutex_;  // guards free_ and times_
  std::condition_variable laneFreed_;
  std::vector<Lane*> free_;  // lanes no infer() call is using
  VisionStageTimes times_;
};

Expected<std::vector<uint8_t>> readFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(ErrorCode::kNotFound, "cannot open model '" + path + "'");
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

// The cached engine for these bytes and options, or null (with the reason logged) when there
// is none that fits.
std::unique_ptr<Engine> loadCached(const std::string& path, const std::string& hash,
                                   Precision precision) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return nullptr;
  auto e = Engine::load(path);
  if (!e.ok()) {
    log(Severity::kWarning,
        "engine cache: rebuilding, '" + path + "' cannot be used: " + e.status().toString());
    return nullptr;
  }
  const EngineInfo& info = (*e)->info();
  if (info.modelHash != hash) {
    log(Severity::kInfo, "engine cache: rebuilding, the model changed since '" + path +
                             "' was built (hash " + info.modelHash + ", now " + hash + ")");
    return nullptr;
  }
  // An INT8 build may record fp16 or fp32 (no layer was faster, or the policy kept every layer
  // out of INT8): the cache file's name already says what was asked for.
  if (info.precision != precision && precision != Precision::kInt8 &&
      (info.backend == Backend::kCuda || info.precision == Precision::kInt8)) {
    log(Severity::kInfo, "engine cache: rebuilding, '" + path + "' is " +
                             precisionName(info.precision) + ", " + precisionName(precision) +
                             " was asked for");
    return nullptr;
  }
  return std::move(*e);
}

/// VisionModelOptions::enginePath: that engine or an error, never a rebuild.
Expected<std::unique_ptr<VisionModel>> fromEngineFile(
    const ModelConfig& config, const VisionModelOptions& options,
    const Expected<std::vector<uint8_t>>& modelBytes) {
  EI_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::load(options.enginePath));
  if (options.backend != Backend::kAuto && options.backend != engine->info().backend)
    return Status(ErrorCode::kInvalidArgument, "engine '" + options.enginePath + "' runs on the " +
                                                   backendName(engine->info().backend) +
                                                   " backend, but backend " +
                                                   backendName(options.backend) + " was asked for");
  if (modelBytes.ok()) {
    const std::string hash = builder::fnv1aHex(modelBytes->data(), modelBytes->size());
    if (engine->info().modelHash != hash)
      return Status(ErrorCode::kInvalidArgument,
                    "engine '" + options.enginePath + "' was built from other ONNX bytes (model " +
                        "hash " + engine->info().modelHash + ") than " + config.modelPath +
                        " (hash " + hash + "): build it from this model");
  } else {
    log(Severity::kInfo, config.name + ": " + config.modelPath +
                             " is not readable; the engine's model is not checked against it");
  }
  const std::string source = "loaded from " + options.enginePath;
  log(Severity::kInfo, config.name + ": engine " + source);
  auto model = std::make_unique<VisionModelImpl>(config, std::move(engine), source);
  EI_RETURN_IF_ERROR(model->init(options));
  return std::unique_ptr<VisionModel>(std::move(model));
}

}  // namespace

Expected<std::unique_ptr<VisionModel>> VisionModel::load(const std::string& configPath,
                                                         const VisionModelOptions& options) {
  auto cfg = loadModelConfig(configPath);
  if (!cfg.ok()) return cfg.status();
  return create(*cfg, options);
}

Expected<std::unique_ptr<VisionModel>> VisionModel::create(const ModelConfig& config,
                                                           const VisionModelOptions& options) {
  if (options.contexts < 1 || options.contexts > 64)
    return invalid("VisionModelOptions::contexts is " + std::to_string(options.contexts) +
                   "; give 1 to 64 (how many infer() calls may run at the same time)");
  BuilderConfig bc = options.builder;
  bc.backend = options.backend;
  bc.precision = options.precision;
  bc.deviceId = options.deviceId;
  if (bc.dynamicDimDefault < 0) bc.dynamicDimDefault = 1;  // e.g. a dynamic batch: 1
  auto bytes = readFile(config.modelPath);
  if (!options.enginePath.empty()) return fromEngineFile(config, options, bytes);
  if (!bytes.ok())
    return Status(bytes.status().code(),
                  (config.sourcePath.empty() ? config.name : config.sourcePath) +
                      ": model: " + bytes.status().message());
  const std::string hash = builder::fnv1aHex(bytes->data(), bytes->size());
  // The backend decides the cache file, so resolve kAuto first.
  Backend backend = bc.backend;
  if (backend == Backend::kAuto) {
    std::string why;
    backend = runtime::cudaBackendUsable(bc.deviceId, &why) ? Backend::kCuda : Backend::kCpu;
  }
  // What the CPU computes in: FP32, or INT8 emulated in FP32 (the builder's INT8 on the CPU).
  if (backend == Backend::kCpu && bc.precision == Precision::kFp16) bc.precision = Precision::kFp32;
  if (backend == Backend::kCpu && bc.precision == Precision::kInt8 &&
      options.backend == Backend::kAuto)
    log(Severity::kWarning, config.name +
                                ": no usable GPU, so INT8 runs on the CPU, emulated in FP32 (the "
                                "INT8 engine's results, not its speed); precision fp32 is faster "
                                "there");
  if (bc.externalDataDir.empty()) {
    const size_t slash = config.modelPath.rfind('/');
    bc.externalDataDir = slash == std::string::npos ? "." : config.modelPath.substr(0, slash);
  }
  fillInputShapeFromConfig(config, *bytes, &bc);
  std::string cachePath;
  std::unique_ptr<Engine> engine;
  std::string source;
  std::string dir;
  if (!options.noEngineCache) {
    dir = options.engineCacheDir.empty() ? defaultCacheDir() : options.engineCacheDir;
    EI_RETURN_IF_ERROR(makeDirs(dir));
  }
  // INT8 ranges from calibration data (kept in the engine cache folder).
  std::string tempCalib;
  struct RemoveTemp {
    std::string& path;
    ~RemoveTemp() {
      if (!path.empty()) unlink(path.c_str());
    }
  } removeTemp{tempCalib};
  if (!options.calibrationData.empty()) {
    if (bc.precision != Precision::kInt8) {
      log(Severity::kWarning, config.name + ": calibration data is for INT8; precision " +
                                  precisionName(bc.precision) + " does not use it");
    } else if (!bc.calibrationCachePath.empty()) {
      log(Severity::kInfo, config.name + ": the calibration cache " + bc.calibrationCachePath +
                               " is used, not the calibration data");
    } else {
      EI_ASSIGN_OR_RETURN(bc.calibrationCachePath,
                          calibrationCacheFor(config, options, bc, hash, dir, &tempCalib));
    }
  }
  if (!options.noEngineCache) {
    // A dynamic dimension's value (e.g. the batch) is planned into the engine, so it is part
    // of the key when it is not the default 1; so are input shapes and shape profiles.
    std::string shapes;
    if (!bc.inputShapes.empty()) shapes += formatShapeProfile(bc.inputShapes) + ";";
    for (const auto& p : bc.shapeProfiles) shapes += formatShapeProfile(p) + "|";
    // INT8: the calibration cache's bytes and the INT8 options decide the engine too, so an
    // engine built with another cache (or policy) is not taken for this one.
    std::string int8;
    if (bc.precision == Precision::kInt8) {
      std::string key = bc.strictPrecision ? "strict;" : "timed;";
      // (Engines cached before the fast rounding existed were bit-exact: their key has neither.)
      if (!bc.int8BitExact) key += "fast-rounding;";
      if (!bc.strictPrecision && !bc.int8WholeEngineChoice) key += "per-layer-only;";
      // (Engines cached before the stage search existed were built without it: their key has
      // not this.)
      if (!bc.strictPrecision && bc.int8WholeEngineChoice && bc.int8StageSearch)
        key += "stage-search;";
      for (const auto& [layer, p] : bc.layerPrecision) key += layer + "=" + precisionName(p) + ";";
      if (!bc.calibrationCachePath.empty()) {
        auto calib = readFile(bc.calibrationCachePath);
        if (calib.ok())
          key.append(calib->begin(), calib->end());
        else  // no engine has this key: the build says what is wrong with the file
          key += "unreadable:" + bc.calibrationCachePath;
      }
      int8 = "-c" + builder::fnv1aHex(key.data(), key.size());
    }
    cachePath =
        dir + "/" + fileSafe(config.name) + "-" + hash + "-" + backendName(backend) +
        (backend == Backend::kCuda || bc.precision == Precision::kInt8
             ? std::string("-") + precisionName(bc.precision)
             : "") +
        int8 + (bc.dynamicDimDefault != 1 ? "-d" + std::to_string(bc.dynamicDimDefault) : "") +
        (shapes.empty() ? "" : "-s" + builder::fnv1aHex(shapes.data(), shapes.size())) + ".engine";
    engine = loadCached(cachePath, hash, bc.precision);
    if (engine) source = "loaded from " + cachePath;
  }
  if (!engine) {
    log(Severity::kInfo, "building the engine of " + config.name + " from " + config.modelPath +
                             " (" + backendName(backend) + ") ...");
    const auto t0 = std::chrono::steady_clock::now();
    bc.backend = backend;
    auto built = Builder::buildFromBuffer(bytes->data(), bytes->size(), bc);
    if (!built.ok())
      return Status(built.status().code(),
                    config.modelPath + ": building the engine failed: " + built.status().message());
    engine = std::move(*built);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    source = "built in " + std::to_string(s).substr(0, std::to_string(s).find('.') + 2) + " s";
    if (!cachePath.empty()) {
      Status st = engine->save(cachePath);
      if (st.ok()) {
        source += ", saved to " + cachePath;
      } else {
        log(Severity::kWarning, "engine cache: not saved: " + st.toString());
      }
    }
    log(Severity::kInfo, config.name + ": engine " + source);
  }
  auto model = std::make_unique<VisionModelImpl>(config, std::move(engine), source);
  EI_RETURN_IF_ERROR(model->init(options));
  return std::unique_ptr<VisionModel>(std::move(model));
}

}  // namespace edgeinfer::vision
