/* edgemetasink: writes one JSON line per frame with what edgeinfer elements found in it (every
 * EdgeInferMeta of the buffer; the format is in results_json.h) to a file, or to stdout when
 * location is unset or "-". Each line is flushed when written, so a reader (tail -f, a pipe)
 * sees frames as they come and a crash loses at most the line being written. Frames without a
 * meta still get a line (with "results": []). Takes any video/x-raw (no pixels are read).
 * Unlike most sinks it does not sync to the clock by default (sync=false): it writes as fast
 * as frames arrive. It also takes edgemux's batches (video/x-edgeinfer-batch): one line per
 * frame of the batch, with "stream" (the stream id) and "frame" counted per stream.
 *
 *   GST_PLUGIN_PATH=build/release/plugins/gst gst-launch-1.0 \
 *     filesrc location=build/media/kphotoalbum/movie.avi ! decodebin ! videoconvert ! \
 *     edgeinfer config=models/blazeface/model.json ! edgemetasink location=faces.jsonl
 *
 *   GST_PLUGIN_PATH=build/release/plugins/gst gst-launch-1.0 \
 *     edgemux name=m ! edgeinfer config=models/blazeface/model.json ! \
 *       edgemetasink location=streams.jsonl \
 *     videotestsrc num-buffers=10 ! m.sink_0  videotestsrc num-buffers=10 ! m.sink_1
 */
#include "gstedgemetasink.h"

#include <gst/video/video.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "edgeinfer/gst/batch_meta.h"
#include "edgeinfer/gst/edgeinfer_meta.h"
#include "results_json.h"

GST_DEBUG_CATEGORY_STATIC(gst_edge_meta_sink_debug);
#define GST_CAT_DEFAULT gst_edge_meta_sink_debug

namespace {

enum { PROP_0, PROP_LOCATION };

struct State {
  std::string location;  // under the object lock
  FILE* out = nullptr;
  bool ownsFile = false;
  std::string openedAs;
  uint64_t frames = 0;
  int width = 0, height = 0;
  bool batches = false;                       // the caps are edgemux's batches
  std::map<unsigned, uint64_t> streamFrames;  // batches: frames written per stream
};

}  // namespace

struct _GstEdgeMetaSink {
  GstBaseSink parent;
  State* state;
};

G_DEFINE_TYPE(GstEdgeMetaSink, gst_edge_meta_sink, GST_TYPE_BASE_SINK)

namespace {

void closeOutput(State& s) {
  if (s.out && s.ownsFile) std::fclose(s.out);
  s.out = nullptr;
  s.ownsFile = false;
}

gboolean metaSinkStart(GstBaseSink* sink) {
  GstEdgeMetaSink* self = GST_EDGE_META_SINK(sink);
  State& s = *self->state;
  GST_OBJECT_LOCK(self);
  const std::string location = s.location;
  GST_OBJECT_UNLOCK(self);
  s.frames = 0;
  s.streamFrames.clear();
  if (location.empty() || location == "-") {
    s.out = stdout;
    s.ownsFile = false;
    s.openedAs = "stdout";
    return TRUE;
  }
  s.out = std::fopen(location.c_str(), "w");
  if (!s.out) {
    const int err = errno;
    GST_ELEMENT_ERROR(
        self, RESOURCE, OPEN_WRITE,
        ("edgemetasink: cannot open '%s' for writing: %s", location.c_str(), std::strerror(err)),
        (nullptr));
    return FALSE;
  }
  s.ownsFile = true;
  s.openedAs = location;
  return TRUE;
}

gboolean metaSinkStop(GstBaseSink* sink) {
  State& s = *GST_EDGE_META_SINK(sink)->state;
  closeOutput(s);
  return TRUE;
}

gboolean metaSinkSetCaps(GstBaseSink* sink, GstCaps* caps) {
  State& s = *GST_EDGE_META_SINK(sink)->state;
  s.batches = edgeinfer::gst::isBatchCaps(caps);
  if (s.batches) return TRUE;  // each frame of a batch has its own size
  const GstStructure* st = gst_caps_get_structure(caps, 0);
  int w = 0, h = 0;
  if (!gst_structure_get_int(st, "width", &w) || !gst_structure_get_int(st, "height", &h)) {
    GST_ELEMENT_ERROR(sink, STREAM, FORMAT, ("edgemetasink: caps without a frame size"),
                      ("%" GST_PTR_FORMAT, static_cast<void*>(caps)));
    return FALSE;
  }
  s.width = w;
  s.height = h;
  return TRUE;
}

// The JSON line of one frame (`stream` >= 0: a frame of a batch).
std::string lineOf(uint64_t frame, GstBuffer* buf, int width, int height, int stream) {
  std::vector<const edgeinfer::gst::Results*> results;
  for (const EdgeInferMeta* m : edgeinfer::gst::bufferMetas(buf)) results.push_back(m->results);
  return edgeinfer::gst::frameJson(frame, GST_BUFFER_PTS(buf), width, height, results, stream)
             .dump() +
         "\n";
}

GstFlowReturn metaSinkRender(GstBaseSink* sink, GstBuffer* buf) {
  GstEdgeMetaSink* self = GST_EDGE_META_SINK(sink);
  State& s = *self->state;
  std::string line;
  if (s.batches) {
    const EdgeInferBatchMeta* bm = edgeinfer::gst::findBatchMeta(buf);
    if (!bm) {
      GST_ELEMENT_ERROR(self, STREAM, FORMAT,
                        ("edgemetasink: a buffer with batch caps has no EdgeInferBatchMeta: "
                         "batches come from edgemux"),
                        (nullptr));
      return GST_FLOW_ERROR;
    }
    for (const edgeinfer::gst::BatchFrame& f : bm->batch->frames)
      if (f.buffer)
        line += lineOf(s.streamFrames[f.streamId]++, f.buffer, GST_VIDEO_INFO_WIDTH(&f.info),
                       GST_VIDEO_INFO_HEIGHT(&f.info), static_cast<int>(f.streamId));
    if (line.empty()) return GST_FLOW_OK;
  } else {
    line = lineOf(s.frames++, buf, s.width, s.height, -1);
  }
  if (std::fwrite(line.data(), 1, line.size(), s.out) != line.size() || std::fflush(s.out) != 0) {
    const int err = errno;
    GST_ELEMENT_ERROR(
        self, RESOURCE, WRITE,
        ("edgemetasink: cannot write to %s: %s", s.openedAs.c_str(), std::strerror(err)),
        (nullptr));
    return GST_FLOW_ERROR;
  }
  return GST_FLOW_OK;
}

void metaSinkSetProperty(GObject* object, guint id, const GValue* value, GParamSpec* pspec) {
  GstEdgeMetaSink* self = GST_EDGE_META_SINK(object);
  if (id != PROP_LOCATION) {
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
    return;
  }
  const gchar* v = g_value_get_string(value);
  GST_OBJECT_LOCK(self);
  self->state->location = v ? v : "";
  GST_OBJECT_UNLOCK(self);
}

void metaSinkGetProperty(GObject* object, guint id, GValue* value, GParamSpec* pspec) {
  GstEdgeMetaSink* self = GST_EDGE_META_SINK(object);
  if (id != PROP_LOCATION) {
    G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
    return;
  }
  GST_OBJECT_LOCK(self);
  g_value_set_string(value, self->state->location.c_str());
  GST_OBJECT_UNLOCK(self);
}

void metaSinkFinalize(GObject* object) {
  GstEdgeMetaSink* self = GST_EDGE_META_SINK(object);
  closeOutput(*self->state);
  delete self->state;
  self->state = nullptr;
  G_OBJECT_CLASS(gst_edge_meta_sink_parent_class)->finalize(object);
}

}  // namespace

static void gst_edge_meta_sink_class_init(GstEdgeMetaSinkClass* klass) {
  GObjectClass* gobject = G_OBJECT_CLASS(klass);
  GstElementClass* element = GST_ELEMENT_CLASS(klass);
  GstBaseSinkClass* base = GST_BASE_SINK_CLASS(klass);
  GST_DEBUG_CATEGORY_INIT(gst_edge_meta_sink_debug, "edgemetasink", 0, "EdgeInfer JSON sink");

  gobject->set_property = metaSinkSetProperty;
  gobject->get_property = metaSinkGetProperty;
  gobject->finalize = metaSinkFinalize;
  g_object_class_install_property(
      gobject, PROP_LOCATION,
      g_param_spec_string("location", "Location",
                          "File to write the JSON lines to (unset or \"-\": stdout); created or "
                          "truncated at start, each line flushed as it is written",
                          nullptr,
                          static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                                   GST_PARAM_MUTABLE_READY)));

  gst_element_class_set_static_metadata(
      element, "EdgeInfer JSON sink", "Sink/Analyzer/Video",
      "Writes one JSON line per frame (of a stream, or of each stream of edgemux's batches) with "
      "the detections and classifications of its EdgeInferMeta",
      "EdgeInfer developers");
  GstCaps* caps = gst_caps_from_string("video/x-raw(ANY); " EDGEINFER_BATCH_CAPS);
  gst_element_class_add_pad_template(
      element, gst_pad_template_new("sink", GST_PAD_SINK, GST_PAD_ALWAYS, caps));
  gst_caps_unref(caps);

  base->start = GST_DEBUG_FUNCPTR(metaSinkStart);
  base->stop = GST_DEBUG_FUNCPTR(metaSinkStop);
  base->set_caps = GST_DEBUG_FUNCPTR(metaSinkSetCaps);
  base->render = GST_DEBUG_FUNCPTR(metaSinkRender);
}

static void gst_edge_meta_sink_init(GstEdgeMetaSink* self) {
  self->state = new State();
  gst_base_sink_set_sync(GST_BASE_SINK(self), FALSE);
}
