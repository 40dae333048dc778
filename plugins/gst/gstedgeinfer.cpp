/* edgeinfer: a network on video frames, thin over edgeinfer::vision::VisionModel. Each buffer
 * leaves with an EdgeInferMeta (edgeinfer/gst/edgeinfer_meta.h) holding what the model found;
 * the pixels pass through untouched (in place, nothing copied).
 *
 *   GST_PLUGIN_PATH=build/release/plugins/gst gst-launch-1.0 \
 *     filesrc location=build/media/kphotoalbum/movie.avi ! decodebin ! videoconvert ! \
 *     edgeinfer config=models/blazeface/model.json ! edgeoverlay ! videoconvert ! \
 *     x264enc ! mp4mux ! filesink location=faces.mp4
 *
 *   GST_PLUGIN_PATH=build/release/plugins/gst gst-launch-1.0 -m videotestsrc num-buffers=3 ! \
 *     edgeinfer config=models/blazeface/model.json backend=cpu post-messages=true ! fakesink
 *
 * Properties mirror VisionModelOptions / BuilderConfig (vision/vision_model.h, builder.h):
 * config, model, engine-cache-dir, no-engine-cache, engine, precision, calibration-cache,
 * calibration-data, calibration-min-agreement, batch-size, device-id, backend;
 * plus interval, unique-id, infer-on-id, infer-on-class, in-flight and post-messages. They take
 * effect when the element starts (READY -> PAUSED); post-messages also while playing.
 *
 * Start: reads the model config and builds the engine, or loads it from the engine cache
 * (keyed by the ONNX bytes, backend, precision and device; an engine built for another device
 * or SDK is rebuilt, as VisionModel does; a file given with `engine` is never rebuilt: one
 * from another device is an error naming both device keys), with progress in the log
 * (GST_DEBUG=edgeinfer:4, and edgeinfer-sdk:4 for the SDK's own messages). Every failure (no config
 * property, a config that cannot be read or is wrong, a missing or corrupt model, a config that
 * does not fit the model, backend=gpu without a usable GPU, a bad infer-on-class) posts
 * GST_ELEMENT_ERROR with the SDK's message and fails the state change, so the pipeline stops at
 * once. At stop it logs (edgeinfer:4) how busy it was between the first and the last buffer and
 * its time per engine run by stage (preprocess, engine, outputs, decode, its own work): what
 * limits a pipeline (scripts/bench/gst_streams.sh prints it).
 *
 * Frames: video/x-raw in system memory, NV12, I420, RGBA, BGRA, RGBx, BGRx, RGB, BGR or GRAY8,
 * any pitch (strides and plane offsets from the buffer's GstVideoMeta). Other formats fail
 * negotiation; when an upstream element offers only formats edgeinfer cannot take, edgeinfer
 * posts a warning saying which and what to do (put videoconvert before it), and when such caps
 * are pushed to it regardless, an error with that message.
 *
 * Interval: with interval=N the model runs on frames 0, N, 2N, ... (counted from start); the
 * frames in between carry a copy of the last inferred frame's results, marked inferred=false
 * (so overlays do not flicker). A secondary element attaches nothing on those frames.
 *
 * Secondary (infer-on-id >= 0): instead of whole frames the model runs on the boxes of the
 * meta whose unique-id is infer-on-id (optionally only boxes of the classes in infer-on-class),
 * all boxes of a frame in one call (batch-size crops per engine run for a dynamic-batch
 * model). A classifier's classes are appended to each object it ran on, as an
 * ObjectClassification with this element's unique-id; a detector's detections (in frame
 * pixels) go into a meta of this element's own.
 *
 * Batches (video/x-edgeinfer-batch from edgemux, edgeinfer/gst/batch_meta.h): all frames of a
 * batch go through the model in one VisionModel::infer call (batch-size of them per engine run,
 * so give a dynamic-batch model batch-size = the number of streams; a model with a fixed batch
 * of 1, like BlazeFace, runs them one after the other inside that call). Each frame's buffer
 * in the batch gets its EdgeInferMeta (made writable first: a shared buffer is replaced by a
 * copy that shares the pixel memory). interval counts each stream's frames and carries each
 * stream's own last results; a secondary (infer-on-id) runs on the boxes of every frame of the
 * batch in one call. Element messages get a field stream-id. Frame numbers in the results are
 * per stream. Not supported: a batch whose frames come from several edgemux elements with the
 * same stream ids (they would share one stream's state).
 *
 * A flush (a flushing seek) starts every stream afresh: frame numbers count from 0 again and
 * interval carries no results from before the flush. A stream flushed on its own before
 * edgemux (a batch's flushedStreams) starts afresh alone.
 *
 *   GST_PLUGIN_PATH=build/release/plugins/gst gst-launch-1.0 \
 *     edgemux name=m ! edgeinfer config=models/blazeface/model.json batch-size=2 ! \
 *       edgedemux name=d \
 *     videotestsrc num-buffers=30 ! video/x-raw,width=320,height=240 ! m.sink_0 \
 *     videotestsrc num-buffers=30 ! video/x-raw,width=640,height=480 ! m.sink_1 \
 *     d.src_0 ! queue ! edgemetasink location=s0.jsonl  d.src_1 ! queue ! fakesink
 *
 * In flight (in-flight, default 2 on the GPU, 1 on the CPU): with 2 or more, a buffer is
 * prepared (frames numbered and mapped) in the streaming thread and handed to InFlight
 * (inflight.h): its worker threads run the model, several buffers at once on execution
 * contexts of their own (VisionModelOptions::contexts, one engine), and its output thread
 * attaches the results and pushes the buffers downstream in the order they came. So the engine
 * run of one batch overlaps the output decoding (NMS) and the push of the one before, and the
 * streaming thread is free for the next batch: on an H100, about 100 streams of 1080p30 through
 * a ResNet-34 detector run in real time with 2 in flight, 64 with 1 (docs/performance.md).
 * Serialized events (caps, segment, EOS ...) and a batch that restarts a flushed stream wait
 * until the buffers in flight are out; a flush drops them; an error posted for one of them
 * fails the next push. With 1, everything happens in the streaming thread (transform_ip).
 *
 *   ... ! edgemux name=m ! edgeinfer config=detector.json batch-size=32 in-flight=2 ! \
 *     edgedemux name=d ...
 *
 * Threads: the VisionModel is created in start() (the thread that changes the state) and
 * destroyed in stop(), after InFlight's threads have been joined; infer() is called from the
 * streaming thread (in-flight 1) or InFlight's workers. The per-stream state (frame numbers,
 * carried results) is numbered in the streaming thread and read and carried in the output
 * thread (in order).
 */
#include "gstedgeinfer.h"

#include <gst/video/video.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

#include "caps.h"
#include "cuda_context.h"
#include "edgeinfer/engine.h"
#include "edgeinfer/gst/batch_meta.h"
#include "edgeinfer/gst/edgeinfer_meta.h"
#include "edgeinfer/vision/vision_model.h"
#include "inflight.h"
#include "input_frame.h"
#include "results_message.h"
#include "sdk_logger.h"

GST_DEBUG_CATEGORY_STATIC(gst_edge_infer_debug);
#define GST_CAT_DEFAULT gst_edge_infer_debug

namespace {

using edgeinfer::ErrorCode;
using edgeinfer::Status;
namespace vision = edgeinfer::vision;
namespace eg = edgeinfer::gst;

enum {
  PROP_0,
  PROP_CONFIG,
  PROP_MODEL,
  PROP_ENGINE_CACHE_DIR,
  PROP_ENGINE,
  PROP_NO_ENGINE_CACHE,
  PROP_PRECISION,
  PROP_BATCH_SIZE,
  PROP_INTERVAL,
  PROP_DEVICE_ID,
  PROP_BACKEND,
  PROP_UNIQUE_ID,
  PROP_INFER_ON_ID,
  PROP_INFER_ON_CLASS,
  PROP_POST_MESSAGES,
  PROP_IN_FLIGHT,
  PROP_CALIBRATION_CACHE,
  PROP_CALIBRATION_DATA,
  PROP_CALIBRATION_MIN_AGREEMENT,
};

// The enum values of the precision and backend properties.
enum { PRECISION_FP32 = 0, PRECISION_FP16 = 1, PRECISION_INT8 = 2 };
enum { BACKEND_AUTO = 0, BACKEND_GPU = 1, BACKEND_CPU = 2 };

GType precisionGetType() {
  static GType type = 0;
  static const GEnumValue values[] = {
      {PRECISION_FP32, "FP32 kernels", "fp32"},
      {PRECISION_FP16, "FP16 kernels on the GPU (the CPU computes in FP32)", "fp16"},
      {PRECISION_INT8,
       "INT8 kernels on the GPU where they are faster (the CPU emulates INT8 in FP32); needs "
       "calibration-cache or calibration-data, unless the model has its own Q/DQ scales",
       "int8"},
      {0, nullptr, nullptr},
  };
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstEdgeInferPrecision", values);
    g_once_init_leave(&type, t);
  }
  return type;
}

GType backendGetType() {
  static GType type = 0;
  static const GEnumValue values[] = {
      {BACKEND_AUTO, "The GPU when one is usable, else the CPU", "auto"},
      {BACKEND_GPU, "The GPU; starting fails when none is usable", "gpu"},
      {BACKEND_CPU, "The CPU reference backend", "cpu"},
      {0, nullptr, nullptr},
  };
  if (g_once_init_enter(&type)) {
    GType t = g_enum_register_static("GstEdgeInferBackend", values);
    g_once_init_leave(&type, t);
  }
  return type;
}

constexpr int kDefaultUniqueId = 1;

struct Settings {
  std::string config;
  std::string model;
  std::string engineCacheDir;
  std::string engine;  // a prebuilt engine file: no build, no cache
  bool noEngineCache = false;
  int precision = PRECISION_FP16;  // VisionModelOptions' default
  int batchSize = 0;
  guint interval = 1;
  int deviceId = 0;
  int backend = BACKEND_AUTO;
  int uniqueId = kDefaultUniqueId;
  int inferOnId = -1;
  std::string inferOnClass;
  guint inFlight = 0;  // 0: 2 on the GPU, 1 on the CPU
  std::string calibrationCache;
  std::string calibrationData;
  double calibrationMinAgreement = 0;  // CalibrationOptions::minAgreement (0: off)
};

// What the element keeps per stream: the only one, or one per stream of edgemux's batches.
struct StreamState {
  uint64_t frames = 0;
  int width = 0, height = 0;  // of the last frame: carried boxes must fit the frame
  bool haveLast = false;
  eg::Results last;  // primary with interval > 1: the last inferred frame's results
};

struct State {
  Settings settings;  // the properties, under the object lock
  std::atomic<bool> postMessages{false};

  // While started: set in start(), used by the streaming thread, cleared in stop().
  Settings active;
  std::unique_ptr<vision::VisionModel> model;
  std::vector<int> classFilter;  // secondary: classes to run on (empty: all)
  GstVideoInfo info{};
  bool haveInfo = false;
  bool batches = false;  // the caps are edgemux's batches (video/x-edgeinfer-batch)
  StreamState single;    // frames, when the caps are video
  std::map<unsigned, StreamState> streams;     // batches: by stream id
  std::atomic<bool> capsMessagePosted{false};  // queries come from any thread

  // CUDA memory (cuda_context.h): open from NULL->READY to READY->NULL when a GPU may be used.
  edgeinfer::gst::CudaContextShare cuda;
  uint64_t framesInPlace = 0;  // CUDA frames read in place by the GPU engine (zero copy)
  uint64_t framesCopied = 0;   // CUDA frames mapped to the host (another context, or CPU)
  uint64_t batchCount = 0;     // batches run (one VisionModel::infer call each)
  // Time in transform_ip, and from the first buffer to the end of the last (the log at stop
  // says how busy the element was and where its time went: what limits a pipeline).
  double busyMs = 0.0;
  std::chrono::steady_clock::time_point firstBuffer, lastBufferEnd;
  // in-flight > 1: the workers and the output thread (started with the model, stopped before
  // it goes); null: every buffer is run in place by the streaming thread.
  std::unique_ptr<edgeinfer::gst::InFlight> inflight;
  // Guards `inflight` between stop() and a FLUSH_START, which comes on another thread than the
  // streaming one (every other use is on the streaming thread, which stop() waits for).
  std::mutex inflightMutex;
};

// One frame to process: a buffer of its own, or one frame of a batch.
struct Job {
  GstBuffer* buf = nullptr;            // writable
  const GstVideoInfo* info = nullptr;  // its caps
  StreamState* stream = nullptr;
  uint64_t n = 0;     // its number in its stream
  bool run = false;   // interval: run the model on it
  int streamId = -1;  // -1: not from a batch
  std::string name() const {
    return (streamId >= 0 ? "stream " + std::to_string(streamId) + " " : std::string()) + "frame " +
           std::to_string(n);
  }
};

edgeinfer::Backend toBackend(int b) {
  return b == BACKEND_GPU   ? edgeinfer::Backend::kCuda
         : b == BACKEND_CPU ? edgeinfer::Backend::kCpu
                            : edgeinfer::Backend::kAuto;
}

const char* backendLabel(int b) {
  return b == BACKEND_GPU ? "gpu" : b == BACKEND_CPU ? "cpu" : "auto";
}

// "0, 2,5" -> {0, 2, 5}.
edgeinfer::Expected<std::vector<int>> parseClassFilter(const std::string& text) {
  std::vector<int> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    const size_t b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    const std::string token = b == std::string::npos ? "" : item.substr(b, e - b + 1);
    char* end = nullptr;
    const long v = token.empty() ? -1 : std::strtol(token.c_str(), &end, 10);
    if (token.empty() || *end != '\0' || v < 0 || v > G_MAXINT)
      return Status(ErrorCode::kInvalidArgument,
                    "infer-on-class: '" + token + "' in \"" + text +
                        "\" is not a class id (give class ids separated by commas, e.g. \"0,2\")");
    out.push_back(static_cast<int>(v));
  }
  return out;
}

}  // namespace

struct _GstEdgeInfer {
  GstBaseTransform parent;
  State* state;
};

G_DEFINE_TYPE(GstEdgeInfer, gst_edge_infer, GST_TYPE_BASE_TRANSFORM)

namespace {

// Posts GST_ELEMENT_ERROR with `what: <the SDK's message>` (and the error code and settings
// in the debug text), in the GStreamer domain that fits the error code.
void postError(GstEdgeInfer* self, GQuark domain, const Status& st, const std::string& what,
               const char* func, int line) {
  gint code = GST_RESOURCE_ERROR_FAILED;
  if (domain == GST_RESOURCE_ERROR) {
    switch (st.code()) {
      case ErrorCode::kNotFound:
        code = GST_RESOURCE_ERROR_NOT_FOUND;
        break;
      case ErrorCode::kIoError:
        code = GST_RESOURCE_ERROR_READ;
        break;
      case ErrorCode::kInvalidArgument:
        code = GST_RESOURCE_ERROR_SETTINGS;
        break;
      default:
        code = GST_RESOURCE_ERROR_FAILED;
        break;
    }
  } else if (domain == GST_STREAM_ERROR) {
    code = st.code() == ErrorCode::kInvalidArgument ? GST_STREAM_ERROR_FORMAT
                                                    : GST_STREAM_ERROR_FAILED;
  }
  const State& s = *self->state;
  const std::string text = what + ": " + st.message();
  const std::string debug = std::string("error ") + edgeinfer::errorCodeName(st.code()) +
                            "; config=" + s.active.config + " model=" + s.active.model +
                            " backend=" + backendLabel(s.active.backend) +
                            " device-id=" + std::to_string(s.active.deviceId);
  GST_ERROR_OBJECT(self, "%s", text.c_str());
  gst_element_message_full(GST_ELEMENT(self), GST_MESSAGE_ERROR, domain, code,
                           g_strdup(text.c_str()), g_strdup(debug.c_str()), __FILE__, func, line);
}
#define EI_POST_ERROR(self, domain, st, what) \
  postError(self, domain, st, what, GST_FUNCTION, __LINE__)

eg::Results toResults(vision::FrameResult&& fr) {
  eg::Results r;
  r.objects.reserve(fr.detections.size());
  for (vision::Detection& d : fr.detections) {
    eg::Object o;
    o.detection = std::move(d);
    r.objects.push_back(std::move(o));
  }
  r.classifications = std::move(fr.classifications);
  return r;
}

void startInFlight(GstEdgeInfer* self, int workers);

gboolean edgeInferStart(GstBaseTransform* trans) {
  GstEdgeInfer* self = GST_EDGE_INFER(trans);
  State& s = *self->state;
  GST_OBJECT_LOCK(self);
  s.active = s.settings;
  GST_OBJECT_UNLOCK(self);
  const Settings& cfg = s.active;
  s.single = StreamState{};
  s.streams.clear();
  s.framesInPlace = s.framesCopied = s.batchCount = 0;
  s.capsMessagePosted.store(false);
  edgeinfer::gst::syncSdkLogLevel();

  if (cfg.config.empty()) {
    EI_POST_ERROR(self, GST_RESOURCE_ERROR,
                  Status(ErrorCode::kNotFound,
                         "the 'config' property is not set: give the model config JSON, e.g. "
                         "config=models/blazeface/model.json"),
                  "edgeinfer: no model config");
    return FALSE;
  }
  auto filter = parseClassFilter(cfg.inferOnClass);
  if (!filter.ok()) {
    EI_POST_ERROR(self, GST_RESOURCE_ERROR, filter.status(), "edgeinfer: bad property");
    return FALSE;
  }
  s.classFilter = *filter;
  if (!s.classFilter.empty() && cfg.inferOnId < 0)
    GST_ELEMENT_WARNING(self, RESOURCE, SETTINGS,
                        ("infer-on-class has no effect without infer-on-id (this element runs on "
                         "whole frames)"),
                        (nullptr));

  GST_INFO_OBJECT(self, "reading model config %s", cfg.config.c_str());
  auto mc = vision::loadModelConfig(cfg.config);
  if (!mc.ok()) {
    EI_POST_ERROR(self, GST_RESOURCE_ERROR, mc.status(), "edgeinfer: cannot use model config");
    return FALSE;
  }
  if (!cfg.model.empty()) mc->modelPath = cfg.model;

  vision::VisionModelOptions o;
  o.backend = toBackend(cfg.backend);
  o.precision = cfg.precision == PRECISION_FP32   ? edgeinfer::Precision::kFp32
                : cfg.precision == PRECISION_INT8 ? edgeinfer::Precision::kInt8
                                                  : edgeinfer::Precision::kFp16;
  if (o.precision == edgeinfer::Precision::kInt8) {
    o.builder.calibrationCachePath = cfg.calibrationCache;
    o.calibrationData = cfg.calibrationData;
    o.calibration.minAgreement = cfg.calibrationMinAgreement;
  } else if (!cfg.calibrationCache.empty() || !cfg.calibrationData.empty()) {
    GST_WARNING_OBJECT(self,
                       "calibration-cache / calibration-data are for precision=int8; "
                       "precision %s does not use them",
                       edgeinfer::precisionName(o.precision));
  }
  o.deviceId = cfg.deviceId;
  o.engineCacheDir = cfg.engineCacheDir;
  o.enginePath = cfg.engine;
  o.noEngineCache = cfg.noEngineCache;
  if (cfg.batchSize > 0) o.builder.dynamicDimDefault = cfg.batchSize;
  // in-flight 0: two on the GPU (one engine run overlaps the decoding and pushing of the
  // last), one on the CPU (whose engine already uses every core).
  guint inFlight = cfg.inFlight;
  if (inFlight == 0) {
    const bool gpu = cfg.backend == BACKEND_GPU ||
                     (cfg.backend == BACKEND_AUTO && edgeinfer::gpuUsable(cfg.deviceId));
    inFlight = gpu ? 2 : 1;
  }
  o.contexts = static_cast<int>(inFlight);
  GST_INFO_OBJECT(self,
                  "%s: building the engine of %s (backend %s, precision %s, device %d), or "
                  "loading it from the engine cache %s ...",
                  mc->name.c_str(), mc->modelPath.c_str(), backendLabel(cfg.backend),
                  edgeinfer::precisionName(o.precision), cfg.deviceId,
                  cfg.noEngineCache            ? "(disabled)"
                  : cfg.engineCacheDir.empty() ? "(default directory)"
                                               : cfg.engineCacheDir.c_str());
  const auto t0 = std::chrono::steady_clock::now();
  auto model = vision::VisionModel::create(*mc, o);
  if (!model.ok()) {
    EI_POST_ERROR(self, GST_RESOURCE_ERROR, model.status(), "edgeinfer: cannot load the model");
    return FALSE;
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  GST_INFO_OBJECT(self, "%s ready on the %s in %.2f s: engine %s", mc->name.c_str(),
                  (*model)->onGpu() ? "GPU" : "CPU", secs, (*model)->engineSource().c_str());
  if (cfg.batchSize > 0) {
    for (const edgeinfer::TensorDesc& d : (*model)->engine().inputs())
      if (d.name == mc->inputTensor && d.shape.rank() > 0 && d.shape[0] != cfg.batchSize)
        GST_WARNING_OBJECT(self,
                           "batch-size=%d asked for, but the model's batch is fixed at %lld: "
                           "batch-size has no effect",
                           cfg.batchSize, static_cast<long long>(d.shape[0]));
  }
  s.model = std::move(*model);
  if (inFlight > 1) startInFlight(self, static_cast<int>(inFlight));
  GST_INFO_OBJECT(self, "%u engine run(s) in flight", inFlight);
  return TRUE;
}

gboolean edgeInferStop(GstBaseTransform* trans) {
  State& s = *GST_EDGE_INFER(trans)->state;
  // The streaming thread has left; the output thread's pushes fail now (the pads are inactive).
  const double waitedMs = s.inflight ? s.inflight->waitedMs() : 0.0;
  std::unique_ptr<edgeinfer::gst::InFlight> inflight;
  {
    std::lock_guard<std::mutex> lock(s.inflightMutex);
    inflight = std::move(s.inflight);
  }
  inflight.reset();  // joins its threads (outside the lock: a push may still be returning)
  uint64_t frames = s.single.frames;
  for (const auto& [id, st] : s.streams) frames += st.frames;
  GST_INFO_OBJECT(trans,
                  "%llu frames (%zu streams, %llu batches): %llu in CUDA memory read in place by "
                  "the GPU engine (zero copy), %llu in CUDA memory copied to the host, the rest in "
                  "system memory",
                  static_cast<unsigned long long>(frames), s.streams.size(),
                  static_cast<unsigned long long>(s.batchCount),
                  static_cast<unsigned long long>(s.framesInPlace),
                  static_cast<unsigned long long>(s.framesCopied));
  if (s.model && s.busyMs > 0.0) {
    const vision::VisionStageTimes t = s.model->stageTimes();
    const double span =
        std::chrono::duration<double, std::milli>(s.lastBufferEnd - s.firstBuffer).count();
    const double runs = static_cast<double>(std::max<int64_t>(t.batches, 1));
    const double busy = span > 0.0 ? 100.0 * s.busyMs / span : 100.0;
    if (s.model->contexts() == 1) {
      const double other = s.busyMs - t.preprocessMs - t.engineMs - t.outputMs - t.decodeMs;
      GST_INFO_OBJECT(trans,
                      "busy %.0f%% of %.2f s (the rest waiting for frames); per engine run (%lld, "
                      "%.1f frames each): preprocess %.3f ms, engine %.3f ms, outputs %.3f ms, "
                      "decode %.3f ms, element (mapping, metas, messages) %.3f ms",
                      busy, span / 1e3, static_cast<long long>(t.batches),
                      static_cast<double>(t.frames) / runs, t.preprocessMs / runs,
                      t.engineMs / runs, t.outputMs / runs, t.decodeMs / runs, other / runs);
    } else {
      // The runs overlap: their stages add up to more than the time that passed.
      GST_INFO_OBJECT(trans,
                      "busy %.0f%% of %.2f s (the rest waiting for frames), %.0f%% waiting for "
                      "one of the %d engine runs in flight to end (when high, the engine or the "
                      "output decoding is the bound, not the frames); per engine run (%lld, %.1f "
                      "frames each, %d at a time): preprocess %.3f ms, engine %.3f ms, outputs "
                      "%.3f ms, decode %.3f ms",
                      busy, span / 1e3, span > 0.0 ? 100.0 * waitedMs / span : 0.0,
                      s.model->contexts(), static_cast<long long>(t.batches),
                      static_cast<double>(t.frames) / runs, s.model->contexts(),
                      t.preprocessMs / runs, t.engineMs / runs, t.outputMs / runs,
                      t.decodeMs / runs);
    }
  }
  s.busyMs = 0.0;
  s.model.reset();
  s.haveInfo = false;
  s.batches = false;
  s.single = StreamState{};
  s.streams.clear();
  return TRUE;
}

gboolean edgeInferSetCaps(GstBaseTransform* trans, GstCaps* incaps, GstCaps* /*outcaps*/) {
  GstEdgeInfer* self = GST_EDGE_INFER(trans);
  State& s = *self->state;
  if (s.inflight) s.inflight->drain();  // buffers in flight point at the caps' video info
  if (eg::isBatchCaps(incaps)) {        // each frame of a batch carries its own caps
    s.batches = true;
    s.haveInfo = true;
    GST_DEBUG_OBJECT(self, "batches of frames from edgemux");
    return TRUE;
  }
  s.batches = false;
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, incaps)) {
    GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("edgeinfer: caps are not raw video"),
                      ("%" GST_PTR_FORMAT, static_cast<void*>(incaps)));
    return FALSE;
  }
  vision::PixelFormat format{};
  if (!edgeinfer::gst::toPixelFormat(GST_VIDEO_INFO_FORMAT(&info), &format)) {
    GST_ELEMENT_ERROR(self, STREAM, FORMAT,
                      ("edgeinfer cannot take video format %s",
                       gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&info))),
                      ("%" GST_PTR_FORMAT, static_cast<void*>(incaps)));
    return FALSE;
  }
  s.info = info;
  s.haveInfo = true;
  GST_DEBUG_OBJECT(self, "frames: %s %dx%d", vision::pixelFormatName(format),
                   GST_VIDEO_INFO_WIDTH(&info), GST_VIDEO_INFO_HEIGHT(&info));
  return TRUE;
}

// Caps it cannot take: a warning when an upstream element asks what it takes offering only
// formats it does not (that negotiation fails upstream, which posts its own "not-negotiated"
// error), an error when such caps are about to be pushed (an accept-caps query for fixed caps).
gboolean edgeInferQuery(GstBaseTransform* trans, GstPadDirection direction, GstQuery* query) {
  GstEdgeInfer* self = GST_EDGE_INFER(trans);
  State& s = *self->state;
  // nvh264dec & co ask their neighbours for a CUDA context: ours is the SDK's.
  if (s.cuda.answer(GST_ELEMENT(self), query)) return TRUE;
  // Serialized queries come on the streaming thread after the buffers before them: those in
  // flight go first (a drain query promises the buffers are released when it returns).
  if (direction == GST_PAD_SINK && GST_QUERY_IS_SERIALIZED(query) && s.inflight)
    s.inflight->drain();
  if (direction == GST_PAD_SINK &&
      (GST_QUERY_TYPE(query) == GST_QUERY_ACCEPT_CAPS || GST_QUERY_TYPE(query) == GST_QUERY_CAPS)) {
    const bool accept = GST_QUERY_TYPE(query) == GST_QUERY_ACCEPT_CAPS;
    GstCaps* caps = nullptr;
    if (accept) {
      gst_query_parse_accept_caps(query, &caps);
    } else {
      gst_query_parse_caps(query, &caps);  // the filter: what the asking element offers
    }
    GstCaps* templ = gst_pad_get_pad_template_caps(GST_BASE_TRANSFORM_SINK_PAD(trans));
    const std::string msg = edgeinfer::gst::unsupportedCapsMessage("edgeinfer", caps, templ);
    gst_caps_unref(templ);
    if (!msg.empty()) {
      gchar* offered = gst_caps_to_string(caps);
      if (accept && gst_caps_is_fixed(caps)) {
        GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("%s", msg.c_str()), ("offered caps: %s", offered));
        g_free(offered);
        gst_query_set_accept_caps_result(query, FALSE);
        return TRUE;
      }
      if (!accept && !s.capsMessagePosted.exchange(true)) {
        GST_ELEMENT_WARNING(self, STREAM, FORMAT, ("%s", msg.c_str()),
                            ("offered caps: %s", offered));
      }
      g_free(offered);
    }
  }
  const gboolean ret =
      GST_BASE_TRANSFORM_CLASS(gst_edge_infer_parent_class)->query(trans, direction, query);
  // Buffers held in flight come out of upstream's pool: ask for that many more.
  if (ret && direction == GST_PAD_SINK && GST_QUERY_TYPE(query) == GST_QUERY_ALLOCATION &&
      s.inflight && s.model) {
    const guint extra = static_cast<guint>(s.model->contexts()) + 1;
    for (guint i = 0; i < gst_query_get_n_allocation_pools(query); ++i) {
      GstBufferPool* pool = nullptr;
      guint size = 0, min = 0, max = 0;
      gst_query_parse_nth_allocation_pool(query, i, &pool, &size, &min, &max);
      gst_query_set_nth_allocation_pool(query, i, pool, size, min + extra,
                                        max == 0 ? 0 : std::max(max, min + extra));
      if (pool) gst_object_unref(pool);
    }
  }
  return ret;
}

// Whether `buf` is read in place on the GPU: CUDA memory of the context the engine runs in,
// and an engine on the GPU. Counts CUDA frames either way; warns once when one is copied.
bool readInPlace(GstEdgeInfer* self, GstBuffer* buf) {
  State& s = *self->state;
  if (!edgeinfer::gst::CudaContextShare::isCudaMemory(buf)) return false;
  if (s.model->onGpu() && s.cuda.owns(buf)) {
    ++s.framesInPlace;
    return true;
  }
  if (s.framesCopied++ == 0)
    GST_ELEMENT_WARNING(
        self, STREAM, NOT_IMPLEMENTED,
        ("edgeinfer: frames in CUDA memory are copied to the host (%s)",
         s.model->onGpu() ? "they come from another CUDA context than the engine's: "
                            "an element upstream created its own"
                          : "the engine runs on the CPU"),
        (nullptr));
  return false;
}

// Posts the element message of one frame's results (stream-id for a frame of a batch).
void postFrameResults(GstEdgeInfer* self, const Job& job, const eg::Results& r, int inferOnId) {
  GstStructure* st = eg::resultsStructure(r, GST_BUFFER_PTS(job.buf));
  if (inferOnId >= 0) gst_structure_set(st, "infer-on-id", G_TYPE_INT, inferOnId, nullptr);
  if (job.streamId >= 0)
    gst_structure_set(st, "stream-id", G_TYPE_UINT, static_cast<guint>(job.streamId), nullptr);
  gst_element_post_message(GST_ELEMENT(self), gst_message_new_element(GST_OBJECT(self), st));
}

// "frame 7" or "a batch of 3 frames (stream 0 frame 7, ...)".
std::string describeJobs(const std::vector<const Job*>& jobs) {
  if (jobs.size() == 1) return jobs[0]->name();
  std::string s = "a batch of " + std::to_string(jobs.size()) + " frames (";
  for (size_t i = 0; i < jobs.size(); ++i) s += (i ? ", " : "") + jobs[i]->name();
  return s + ")";
}

// One buffer's work (a frame, or a batch of edgemux), in three steps:
//   prepare  (streaming thread) number the frames, pick what runs, map the frames;
//   compute  (the model: the streaming thread, or an InFlight worker with in-flight > 1);
//   finish   (metas and messages, in buffer order: the streaming thread, or InFlight's
//            output thread, which then pushes the buffer).
struct Work final : edgeinfer::gst::InFlight::Item {
  struct Box {
    size_t job;
    size_t object;  // index in the parent meta's objects
    size_t frame;   // index in `frames`
  };
  GstBuffer* buf = nullptr;  // the buffer that goes downstream
  bool ownsBuf = false;      // in-flight: held here until pushed
  std::vector<Job> jobs;
  std::vector<const Job*> mapped;  // the jobs whose frames are in `frames`, in order
  std::vector<std::unique_ptr<edgeinfer::gst::InputFrame>> frames;
  std::vector<vision::FrameView> views;  // what the model runs on
  std::vector<vision::PixelRect> rois;   // secondary: one per view
  std::vector<Box> boxes;                // secondary: one per view
  std::vector<EdgeInferMeta*> parents;   // secondary: per job, the detector's meta
  // compute's outcome
  Status status;
  std::vector<vision::FrameResult> found;  // one per view

  ~Work() override {
    frames.clear();  // unmapped before the buffer goes
    if (ownsBuf) gst_buffer_unref(buf);
  }
  // The buffer, for the push (its frames unmapped first).
  GstBuffer* release() {
    frames.clear();
    ownsBuf = false;
    return buf;
  }
};

// Maps the frames of the jobs in `w.mapped` (all to be run); false after posting an error.
bool mapJobs(GstEdgeInfer* self, Work& w) {
  for (const Job* j : w.mapped) {
    w.frames.push_back(std::make_unique<edgeinfer::gst::InputFrame>());
    Status st = edgeinfer::gst::mapInputFrame(j->buf, *j->info, *w.frames.back(),
                                              readInPlace(self, j->buf));
    if (!st.ok()) {
      EI_POST_ERROR(self, GST_STREAM_ERROR, st, "edgeinfer: " + j->name());
      return false;
    }
  }
  return true;
}

bool classWanted(const State& s, int classId) {
  if (s.classFilter.empty()) return true;
  for (int c : s.classFilter)
    if (c == classId) return true;
  return false;
}

// Secondary: the boxes of the detector's meta (infer-on-id) of every frame to run.
void gatherBoxes(const State& s, Work& w) {
  w.parents.assign(w.jobs.size(), nullptr);
  for (size_t k = 0; k < w.jobs.size(); ++k) {
    const Job& j = w.jobs[k];
    EdgeInferMeta* parent = eg::findMeta(j.buf, s.active.inferOnId);
    if (!j.run || !parent) continue;
    w.parents[k] = parent;
    const int fw = GST_VIDEO_INFO_WIDTH(j.info), fh = GST_VIDEO_INFO_HEIGHT(j.info);
    bool any = false;
    for (size_t i = 0; i < parent->results->objects.size(); ++i) {
      const vision::Detection& d = parent->results->objects[i].detection;
      if (!classWanted(s, d.classId)) continue;
      // The box's pixels: from floor(x1) to ceil(x2), inside the frame.
      const int x1 = std::max(0, static_cast<int>(std::floor(d.box.x1)));
      const int y1 = std::max(0, static_cast<int>(std::floor(d.box.y1)));
      const int x2 = std::min(fw, static_cast<int>(std::ceil(d.box.x2)));
      const int y2 = std::min(fh, static_cast<int>(std::ceil(d.box.y2)));
      if (x2 - x1 < 1 || y2 - y1 < 1) continue;
      w.boxes.push_back({k, i, w.mapped.size()});
      w.rois.push_back({x1, y1, x2 - x1, y2 - y1});
      any = true;
    }
    if (any) w.mapped.push_back(&j);
  }
}

// Step 1: numbers the frames, picks what runs and maps it. False after posting an error.
bool prepareWork(GstEdgeInfer* self, Work& w) {
  State& s = *self->state;
  for (Job& j : w.jobs) {
    j.n = j.stream->frames++;
    j.run = j.n % s.active.interval == 0;
  }
  if (s.active.inferOnId < 0) {
    for (const Job& j : w.jobs)
      if (j.run) w.mapped.push_back(&j);
  } else {
    gatherBoxes(s, w);
  }
  if (!mapJobs(self, w)) return false;
  if (s.active.inferOnId < 0) {
    for (const auto& f : w.frames) w.views.push_back(f->view());
  } else {
    for (const Work::Box& b : w.boxes) w.views.push_back(w.frames[b.frame]->view());
  }
  return true;
}

// Step 2: the model on the views (thread-safe: VisionModel runs calls on contexts of their own).
void computeWork(vision::VisionModel& model, Work& w) {
  if (w.views.empty()) return;
  auto out = w.rois.empty() ? model.infer(w.views) : model.infer(w.views, w.rois);
  if (out.ok()) {
    w.found = std::move(*out);
  } else {
    w.status = out.status();
  }
}

// Step 3, whole frames: each frame gets its results or, with interval, its stream's last ones.
GstFlowReturn finishPrimary(GstEdgeInfer* self, Work& w) {
  State& s = *self->state;
  size_t next = 0;
  for (Job& j : w.jobs) {
    StreamState& st = *j.stream;
    const int fw = GST_VIDEO_INFO_WIDTH(j.info), fh = GST_VIDEO_INFO_HEIGHT(j.info);
    if (fw != st.width || fh != st.height) st.haveLast = false;  // boxes would not fit
    st.width = fw;
    st.height = fh;
    eg::Results r;
    if (j.run) {
      r = toResults(std::move(w.found[next++]));
      if (s.active.interval > 1) {
        st.last = r;
        st.haveLast = true;
      }
    } else if (st.haveLast) {
      r = st.last;
      r.inferred = false;
    } else {
      r.inferred = false;
    }
    r.uniqueId = s.active.uniqueId;
    r.frameNumber = j.n;
    r.width = fw;
    r.height = fh;
    EdgeInferMeta* meta = eg::addMeta(j.buf, std::move(r));
    if (!meta) {
      GST_ELEMENT_ERROR(self, CORE, FAILED, ("edgeinfer: cannot attach the results to the buffer"),
                        (nullptr));
      return GST_FLOW_ERROR;
    }
    if (s.postMessages.load()) postFrameResults(self, j, *meta->results, -1);
  }
  return GST_FLOW_OK;
}

// Step 3, secondary: classes appended to the detector's objects, detections in a meta of its own.
GstFlowReturn finishSecondary(GstEdgeInfer* self, Work& w) {
  State& s = *self->state;
  for (size_t f = 0; f < w.mapped.size(); ++f) {
    const Job& j = *w.mapped[f];
    const size_t k = static_cast<size_t>(&j - w.jobs.data());
    eg::Results own;  // detections of a secondary detector, and what this element posts
    own.uniqueId = s.active.uniqueId;
    own.frameNumber = j.n;
    own.width = GST_VIDEO_INFO_WIDTH(j.info);
    own.height = GST_VIDEO_INFO_HEIGHT(j.info);
    eg::Results posted = own;
    for (size_t b = 0; b < w.boxes.size(); ++b) {
      if (w.boxes[b].frame != f) continue;
      vision::FrameResult& fr = w.found[b];
      eg::Object& obj = w.parents[k]->results->objects[w.boxes[b].object];
      if (!fr.classifications.empty())
        obj.classifications.push_back({s.active.uniqueId, std::move(fr.classifications)});
      for (vision::Detection& d : fr.detections) {
        eg::Object o;
        o.detection = std::move(d);
        own.objects.push_back(std::move(o));
      }
      posted.objects.push_back(obj);
    }
    if (s.postMessages.load()) {
      for (const eg::Object& o : own.objects) posted.objects.push_back(o);
      postFrameResults(self, j, posted, s.active.inferOnId);
    }
    if (!own.objects.empty() && !eg::addMeta(j.buf, std::move(own))) {
      GST_ELEMENT_ERROR(self, CORE, FAILED, ("edgeinfer: cannot attach the results to the buffer"),
                        (nullptr));
      return GST_FLOW_ERROR;
    }
  }
  return GST_FLOW_OK;
}

// Step 3: compute's error, or the results attached.
GstFlowReturn finishWork(GstEdgeInfer* self, Work& w) {
  State& s = *self->state;
  // Unmapped first: a mapping holds a reference, and a buffer takes metas only while writable.
  w.frames.clear();
  w.views.clear();
  if (!w.status.ok()) {
    EI_POST_ERROR(
        self, GST_STREAM_ERROR, w.status,
        "edgeinfer: inference on " + (w.rois.empty() ? describeJobs(w.mapped)
                                                     : std::to_string(w.rois.size()) +
                                                           " boxes of " + describeJobs(w.mapped)));
    return GST_FLOW_ERROR;
  }
  return s.active.inferOnId < 0 ? finishPrimary(self, w) : finishSecondary(self, w);
}

// The jobs of a buffer: the frame itself, or every frame of an edgemux batch. The frame buffers
// of a batch are made writable to take the metas (a copy shares the pixel memory, nothing is
// copied). False after posting an error.
bool collectJobs(GstEdgeInfer* self, GstBuffer* buf, Work& w) {
  State& s = *self->state;
  w.buf = buf;
  if (!s.batches) {
    Job j;
    j.buf = buf;
    j.info = &s.info;
    j.stream = &s.single;
    w.jobs.push_back(j);
    return true;
  }
  EdgeInferBatchMeta* bm = eg::findBatchMeta(buf);
  if (!bm) {
    GST_ELEMENT_ERROR(self, STREAM, FORMAT,
                      ("edgeinfer: a buffer with batch caps (" EDGEINFER_BATCH_CAPS
                       ") has no EdgeInferBatchMeta: batches come from edgemux"),
                      (nullptr));
    return false;
  }
  // A stream flushed on its own (edgemux) starts afresh, as every stream does after a flush
  // (once the batches in flight, which may carry its state, are out).
  if (!bm->batch->flushedStreams.empty() && s.inflight) s.inflight->drain();
  for (unsigned stream : bm->batch->flushedStreams) s.streams[stream] = StreamState{};
  for (eg::BatchFrame& f : bm->batch->frames) {
    if (!f.buffer) continue;
    Job j;
    j.buf = f.writableBuffer();
    j.info = &f.info;
    j.stream = &s.streams[f.streamId];
    j.streamId = static_cast<int>(f.streamId);
    w.jobs.push_back(j);
  }
  if (!w.jobs.empty()) ++s.batchCount;  // (a batch may only say which streams ended)
  return true;
}

// A flush (flushing seek): the frames that follow start every stream afresh, as a new run
// would (frame numbers from 0, no results carried over from before the seek). The streaming
// thread is stopped while flush-stop is handled; buffers in flight are dropped, not pushed.
// Other serialized events (EOS, caps, segment ...) wait until the buffers in flight are out.
gboolean edgeInferSinkEvent(GstBaseTransform* trans, GstEvent* event) {
  State& s = *GST_EDGE_INFER(trans)->state;
  if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_START) {  // not on the streaming thread
    std::lock_guard<std::mutex> lock(s.inflightMutex);
    if (s.inflight) s.inflight->setFlushing(true);
  } else if (s.inflight) {
    if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP) {
      s.inflight->drain();
      s.inflight->setFlushing(false);
    } else if (GST_EVENT_IS_SERIALIZED(event)) {
      s.inflight->drain();
      // A new stream or segment: an EOS or error downstream returned for the last one is over.
      if (GST_EVENT_TYPE(event) == GST_EVENT_STREAM_START ||
          GST_EVENT_TYPE(event) == GST_EVENT_SEGMENT)
        s.inflight->resetFlow();
    }
  }
  if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP) {
    s.single = StreamState{};
    s.streams.clear();
  }
  return GST_BASE_TRANSFORM_CLASS(gst_edge_infer_parent_class)->sink_event(trans, event);
}

bool checkReady(GstEdgeInfer* self) {
  State& s = *self->state;
  if (s.model && s.haveInfo) return true;
  GST_ELEMENT_ERROR(self, CORE, NEGOTIATION, ("edgeinfer: a buffer arrived before the caps"),
                    (nullptr));
  return false;
}

// in-flight 1: the three steps in turn, in place.
GstFlowReturn edgeInferTransformIp(GstBaseTransform* trans, GstBuffer* buf) {
  GstEdgeInfer* self = GST_EDGE_INFER(trans);
  State& s = *self->state;
  if (!checkReady(self)) return GST_FLOW_NOT_NEGOTIATED;
  const auto t0 = std::chrono::steady_clock::now();
  if (s.busyMs == 0.0) s.firstBuffer = t0;
  GstFlowReturn ret = GST_FLOW_ERROR;
  Work w;
  if (collectJobs(self, buf, w) && prepareWork(self, w)) {
    computeWork(*s.model, w);
    ret = finishWork(self, w);
  }
  s.lastBufferEnd = std::chrono::steady_clock::now();
  s.busyMs +=
      std::max(1e-6, std::chrono::duration<double, std::milli>(s.lastBufferEnd - t0).count());
  return ret;
}

// in-flight > 1: the buffer is prepared here and handed to InFlight, whose workers compute it
// and whose output thread finishes and pushes it (the base class pushes nothing).
GstFlowReturn edgeInferGenerateOutput(GstBaseTransform* trans, GstBuffer** outbuf) {
  GstEdgeInfer* self = GST_EDGE_INFER(trans);
  State& s = *self->state;
  // (In pull mode downstream pulls each buffer from this call: no output thread to push.)
  if (!s.inflight || GST_PAD_MODE(GST_BASE_TRANSFORM_SRC_PAD(trans)) != GST_PAD_MODE_PUSH)
    return GST_BASE_TRANSFORM_CLASS(gst_edge_infer_parent_class)->generate_output(trans, outbuf);
  *outbuf = nullptr;
  GstBuffer* in = trans->queued_buf;
  trans->queued_buf = nullptr;
  if (!in) return GST_FLOW_OK;
  // What the base class does for a buffer it pushes itself: the position (position queries).
  if (trans->segment.format == GST_FORMAT_TIME && GST_BUFFER_PTS_IS_VALID(in))
    trans->segment.position =
        GST_BUFFER_PTS(in) + (GST_BUFFER_DURATION_IS_VALID(in) ? GST_BUFFER_DURATION(in) : 0);
  auto w = std::make_unique<Work>();
  w->ownsBuf = true;
  w->buf = in;
  if (!checkReady(self)) return GST_FLOW_NOT_NEGOTIATED;
  const auto t0 = std::chrono::steady_clock::now();
  if (s.busyMs == 0.0) s.firstBuffer = t0;
  // The metas go on the buffer: writable (a copy shares the memory, nothing is copied).
  w->buf = gst_buffer_make_writable(in);
  GstFlowReturn ret = GST_FLOW_ERROR;
  if (collectJobs(self, w->buf, *w) && prepareWork(self, *w))
    ret = s.inflight->submit(std::move(w));
  s.lastBufferEnd = std::chrono::steady_clock::now();
  s.busyMs +=
      std::max(1e-6, std::chrono::duration<double, std::milli>(s.lastBufferEnd - t0).count());
  return ret;
}

// InFlight's output thread: the results attached, the buffer pushed (or dropped).
GstFlowReturn finishInFlight(GstEdgeInfer* self, edgeinfer::gst::InFlight::Item& item, bool drop) {
  Work& w = static_cast<Work&>(item);
  if (drop) return GST_FLOW_OK;  // released with the item
  const GstFlowReturn ret = finishWork(self, w);
  if (ret != GST_FLOW_OK) return ret;
  const GstFlowReturn pushed = gst_pad_push(GST_BASE_TRANSFORM_SRC_PAD(self), w.release());
  // A fatal flow from downstream is an error here, as a queue's task posts it: no buffer may
  // come after it to carry it upstream.
  if (pushed == GST_FLOW_NOT_NEGOTIATED || pushed <= GST_FLOW_ERROR)
    GST_ELEMENT_FLOW_ERROR(self, pushed);
  return pushed;
}

void startInFlight(GstEdgeInfer* self, int workers) {
  State& s = *self->state;
  vision::VisionModel* m = s.model.get();
  s.inflight = std::make_unique<edgeinfer::gst::InFlight>(
      workers,
      [m](edgeinfer::gst::InFlight::Item& item) { computeWork(*m, static_cast<Work&>(item)); },
      [self](edgeinfer::gst::InFlight::Item& item, bool drop) {
        return finishInFlight(self, item, drop);
      });
}

void edgeInferSetProperty(GObject* object, guint id, const GValue* value, GParamSpec* pspec) {
  GstEdgeInfer* self = GST_EDGE_INFER(object);
  State& s = *self->state;
  auto str = [value] {
    const gchar* v = g_value_get_string(value);
    return std::string(v ? v : "");
  };
  GST_OBJECT_LOCK(self);
  Settings& p = s.settings;
  switch (id) {
    case PROP_CONFIG:
      p.config = str();
      break;
    case PROP_MODEL:
      p.model = str();
      break;
    case PROP_ENGINE_CACHE_DIR:
      p.engineCacheDir = str();
      break;
    case PROP_ENGINE:
      p.engine = str();
      break;
    case PROP_NO_ENGINE_CACHE:
      p.noEngineCache = g_value_get_boolean(value);
      break;
    case PROP_PRECISION:
      p.precision = g_value_get_enum(value);
      break;
    case PROP_CALIBRATION_CACHE:
      p.calibrationCache = str();
      break;
    case PROP_CALIBRATION_DATA:
      p.calibrationData = str();
      break;
    case PROP_CALIBRATION_MIN_AGREEMENT:
      p.calibrationMinAgreement = g_value_get_double(value);
      break;
    case PROP_BATCH_SIZE:
      p.batchSize = g_value_get_int(value);
      break;
    case PROP_INTERVAL:
      p.interval = g_value_get_uint(value);
      break;
    case PROP_DEVICE_ID:
      p.deviceId = g_value_get_int(value);
      break;
    case PROP_BACKEND:
      p.backend = g_value_get_enum(value);
      break;
    case PROP_UNIQUE_ID:
      p.uniqueId = g_value_get_int(value);
      break;
    case PROP_INFER_ON_ID:
      p.inferOnId = g_value_get_int(value);
      break;
    case PROP_INFER_ON_CLASS:
      p.inferOnClass = str();
      break;
    case PROP_POST_MESSAGES:
      s.postMessages.store(g_value_get_boolean(value));
      break;
    case PROP_IN_FLIGHT:
      p.inFlight = g_value_get_uint(value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK(self);
}

void edgeInferGetProperty(GObject* object, guint id, GValue* value, GParamSpec* pspec) {
  GstEdgeInfer* self = GST_EDGE_INFER(object);
  State& s = *self->state;
  GST_OBJECT_LOCK(self);
  const Settings& p = s.settings;
  switch (id) {
    case PROP_CONFIG:
      g_value_set_string(value, p.config.c_str());
      break;
    case PROP_MODEL:
      g_value_set_string(value, p.model.c_str());
      break;
    case PROP_ENGINE_CACHE_DIR:
      g_value_set_string(value, p.engineCacheDir.c_str());
      break;
    case PROP_ENGINE:
      g_value_set_string(value, p.engine.c_str());
      break;
    case PROP_NO_ENGINE_CACHE:
      g_value_set_boolean(value, p.noEngineCache);
      break;
    case PROP_PRECISION:
      g_value_set_enum(value, p.precision);
      break;
    case PROP_CALIBRATION_CACHE:
      g_value_set_string(value, p.calibrationCache.c_str());
      break;
    case PROP_CALIBRATION_DATA:
      g_value_set_string(value, p.calibrationData.c_str());
      break;
    case PROP_CALIBRATION_MIN_AGREEMENT:
      g_value_set_double(value, p.calibrationMinAgreement);
      break;
    case PROP_BATCH_SIZE:
      g_value_set_int(value, p.batchSize);
      break;
    case PROP_INTERVAL:
      g_value_set_uint(value, p.interval);
      break;
    case PROP_DEVICE_ID:
      g_value_set_int(value, p.deviceId);
      break;
    case PROP_BACKEND:
      g_value_set_enum(value, p.backend);
      break;
    case PROP_UNIQUE_ID:
      g_value_set_int(value, p.uniqueId);
      break;
    case PROP_INFER_ON_ID:
      g_value_set_int(value, p.inferOnId);
      break;
    case PROP_INFER_ON_CLASS:
      g_value_set_string(value, p.inferOnClass.c_str());
      break;
    case PROP_POST_MESSAGES:
      g_value_set_boolean(value, s.postMessages.load());
      break;
    case PROP_IN_FLIGHT:
      g_value_set_uint(value, p.inFlight);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK(self);
}

void edgeInferFinalize(GObject* object) {
  GstEdgeInfer* self = GST_EDGE_INFER(object);
  delete self->state;
  self->state = nullptr;
  G_OBJECT_CLASS(gst_edge_infer_parent_class)->finalize(object);
}

constexpr GParamFlags kReadyFlags =
    static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_READY);
constexpr GParamFlags kPlayingFlags = static_cast<GParamFlags>(
    G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS | GST_PARAM_MUTABLE_PLAYING);

}  // namespace

// NULL->READY: before the decoder upstream opens (a bin changes state from the sinks up),
// offer it the SDK's CUDA context, so that it decodes where the engine reads.
static GstStateChangeReturn edgeInferChangeState(GstElement* element, GstStateChange change) {
  GstEdgeInfer* self = GST_EDGE_INFER(element);
  State& s = *self->state;
  if (change == GST_STATE_CHANGE_NULL_TO_READY && edgeinfer::gst::kCudaMemorySupported) {
    GST_OBJECT_LOCK(self);
    const int backend = s.settings.backend, device = s.settings.deviceId;
    GST_OBJECT_UNLOCK(self);
    std::string why;
    if (backend != BACKEND_CPU && edgeinfer::gpuUsable(device, &why) &&
        !s.cuda.open(element, device, &why))
      GST_WARNING_OBJECT(self, "no CUDA context to share (%s): CUDA frames will be copied",
                         why.c_str());
  }
  const GstStateChangeReturn ret =
      GST_ELEMENT_CLASS(gst_edge_infer_parent_class)->change_state(element, change);
  if (change == GST_STATE_CHANGE_READY_TO_NULL) s.cuda.close();
  return ret;
}

static void gst_edge_infer_class_init(GstEdgeInferClass* klass) {
  GObjectClass* gobject = G_OBJECT_CLASS(klass);
  GstElementClass* element = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass* trans = GST_BASE_TRANSFORM_CLASS(klass);
  GST_DEBUG_CATEGORY_INIT(gst_edge_infer_debug, "edgeinfer", 0, "EdgeInfer inference element");

  gobject->set_property = edgeInferSetProperty;
  gobject->get_property = edgeInferGetProperty;
  gobject->finalize = edgeInferFinalize;

  g_object_class_install_property(
      gobject, PROP_CONFIG,
      g_param_spec_string("config", "Model config",
                          "Model config JSON (required): the ONNX model, its input tensor and "
                          "preprocessing, the output decoder and labels, e.g. "
                          "models/blazeface/model.json",
                          nullptr, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_MODEL,
      g_param_spec_string("model", "ONNX model",
                          "ONNX model file to use instead of the one the config names (empty: "
                          "the config's)",
                          nullptr, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_ENGINE_CACHE_DIR,
      g_param_spec_string("engine-cache-dir", "Engine cache directory",
                          "Where built engines are kept and reused, keyed by the model's bytes, "
                          "backend, precision and device (empty: $XDG_CACHE_HOME/edgeinfer/"
                          "engines or ~/.cache/edgeinfer/engines)",
                          nullptr, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_ENGINE,
      g_param_spec_string("engine", "Engine file",
                          "A prebuilt engine (edgeinfer build) to run instead of building one or "
                          "using the engine cache; an engine built for another device or SDK, "
                          "from another model, or damaged is an error, never rebuilt (empty: "
                          "build or use the cache)",
                          nullptr, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_NO_ENGINE_CACHE,
      g_param_spec_boolean("no-engine-cache", "No engine cache",
                           "Build the engine at every start; read and write no engine cache", FALSE,
                           kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_PRECISION,
      g_param_spec_enum("precision", "Precision",
                        "Kernel precision of a GPU engine (the CPU computes in FP32, and "
                        "emulates INT8 in FP32 for int8). int8 takes its ranges from "
                        "calibration-cache, else calibration-data, else the model's own Q/DQ "
                        "scales",
                        precisionGetType(), PRECISION_FP16, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_CALIBRATION_CACHE,
      g_param_spec_string("calibration-cache", "INT8 calibration cache",
                          "precision=int8: a calibration cache (edgeinfer calibrate) with the "
                          "INT8 ranges and per-layer policy; one made for another model is an "
                          "error (empty: none)",
                          nullptr, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_CALIBRATION_DATA,
      g_param_spec_string("calibration-data", "INT8 calibration data",
                          "precision=int8 without calibration-cache: a folder of images, a video "
                          "file or a folder of .npy tensors, calibrated once at the first start "
                          "through the config's preprocessing (min-max ranges, layers INT8 hurts "
                          "kept in FP16); the cache is kept with the engines and reused while "
                          "the data and the model stay the same (empty: none)",
                          nullptr, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_CALIBRATION_MIN_AGREEMENT,
      g_param_spec_double(
          "calibration-min-agreement", "INT8 agreement target",
          "With calibration-data: keep further layers out of INT8 (the next worst by the "
          "sensitivity report) until INT8 gives at least this share of FP32's results again on "
          "the data (the config's decoder's detections at IoU >= 0.9, top-1 classes, pixel "
          "classes); more layers in FP16, closer results (0: off, the report's cosine policy "
          "alone)",
          0.0, 1.0, 0.0, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_BATCH_SIZE,
      g_param_spec_int("batch-size", "Batch size",
                       "Images per engine run, for a model whose batch dimension is dynamic "
                       "(0: 1). With batches from edgemux, the frames of a batch go to the "
                       "model in one call, this many per engine run: set it to the number of "
                       "streams. Single frames are run one per buffer; a secondary element runs "
                       "up to this many boxes per engine run. A model with a fixed batch keeps "
                       "it (a warning says so)",
                       0, 1024, 0, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_INTERVAL,
      g_param_spec_uint("interval", "Interval",
                        "Run the model on every Nth frame (1: every frame). The frames in "
                        "between carry the last inferred frame's results, marked "
                        "inferred=false; a secondary element adds nothing to them",
                        1, G_MAXINT, 1, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_DEVICE_ID,
      g_param_spec_int("device-id", "Device ID", "CUDA device the engine is built for and runs on",
                       0, G_MAXINT, 0, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_BACKEND,
      g_param_spec_enum("backend", "Backend",
                        "Where the model runs: auto (the GPU when one is usable, else the CPU), "
                        "gpu (an error when no GPU is usable) or cpu",
                        backendGetType(), BACKEND_AUTO, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_UNIQUE_ID,
      g_param_spec_int("unique-id", "Unique ID",
                       "Tag written into this element's results (EdgeInferMeta, messages, "
                       "JSON) so that a secondary element can name this one in infer-on-id",
                       0, G_MAXINT, kDefaultUniqueId, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_INFER_ON_ID,
      g_param_spec_int("infer-on-id", "Infer on ID",
                       "-1: run on whole frames. Otherwise run on the boxes found by the element "
                       "whose unique-id this is (a secondary classifier), appending the classes "
                       "to each of its objects",
                       -1, G_MAXINT, -1, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_INFER_ON_CLASS,
      g_param_spec_string("infer-on-class", "Infer on classes",
                          "With infer-on-id: run only on boxes of these class ids, separated by "
                          "commas, e.g. \"0,2\" (empty: every box)",
                          nullptr, kReadyFlags));
  g_object_class_install_property(
      gobject, PROP_POST_MESSAGES,
      g_param_spec_boolean("post-messages", "Post messages",
                           "Post an element message \"edgeinfer-results\" per frame (frame "
                           "number, pts, size, detections, classifications) on the bus",
                           FALSE, kPlayingFlags));

  g_object_class_install_property(
      gobject, PROP_IN_FLIGHT,
      g_param_spec_uint("in-flight", "Engine runs in flight",
                        "How many buffers (frames or batches) are processed at once, each on an "
                        "execution context of its own sharing the engine: with 2 or more, the "
                        "engine runs on worker threads and an output thread attaches the results "
                        "and pushes the buffers downstream in order, so that one buffer's engine "
                        "run overlaps the decoding and pushing of another and the streaming "
                        "thread goes on with the next buffer. 1: every buffer is run in the "
                        "streaming thread. 0: 2 when the engine runs on the GPU, 1 on the CPU",
                        0, 16, 0, kReadyFlags));

  gst_element_class_set_static_metadata(
      element, "EdgeInfer inference", "Filter/Analyzer/Video",
      "Runs an ONNX network (built into an engine for the GPU or the CPU) on video frames and "
      "attaches the detections and classifications to each buffer as EdgeInferMeta",
      "EdgeInfer developers");
  // Frames, or edgemux's batches of frames (the same on both sides: in place).
  GstCaps* caps = gst_caps_from_string(EDGEINFER_INFER_CAPS "; " EDGEINFER_BATCH_CAPS);
  gst_element_class_add_pad_template(
      element, gst_pad_template_new("sink", GST_PAD_SINK, GST_PAD_ALWAYS, caps));
  gst_element_class_add_pad_template(
      element, gst_pad_template_new("src", GST_PAD_SRC, GST_PAD_ALWAYS, caps));
  gst_caps_unref(caps);

  element->change_state = GST_DEBUG_FUNCPTR(edgeInferChangeState);
  trans->start = GST_DEBUG_FUNCPTR(edgeInferStart);
  trans->stop = GST_DEBUG_FUNCPTR(edgeInferStop);
  trans->set_caps = GST_DEBUG_FUNCPTR(edgeInferSetCaps);
  trans->query = GST_DEBUG_FUNCPTR(edgeInferQuery);
  trans->transform_ip = GST_DEBUG_FUNCPTR(edgeInferTransformIp);
  trans->generate_output = GST_DEBUG_FUNCPTR(edgeInferGenerateOutput);
  trans->sink_event = GST_DEBUG_FUNCPTR(edgeInferSinkEvent);
  trans->passthrough_on_same_caps = FALSE;  // results are attached: buffers must be writable

  gst_type_mark_as_plugin_api(precisionGetType(), static_cast<GstPluginAPIFlags>(0));
  gst_type_mark_as_plugin_api(backendGetType(), static_cast<GstPluginAPIFlags>(0));
}

static void gst_edge_infer_init(GstEdgeInfer* self) {
  self->state = new State();
  gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
}
