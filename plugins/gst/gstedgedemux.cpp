/* edgedemux: the other end of edgemux. Takes batches (video/x-edgeinfer-batch, an
 * EdgeInferBatchMeta on each buffer) and pushes each stream's frame on the request pad src_%u
 * of that stream (src_2 for the stream on edgemux's sink_2), with the stream's own caps,
 * segment and timestamps, and whatever edgeinfer attached (EdgeInferMeta), so that
 * edgeoverlay, edgemetasink or any other element downstream sees the stream as if it had never
 * been batched.
 *
 *   GST_PLUGIN_PATH=build/release/plugins/gst gst-launch-1.0 \
 *     edgemux name=m ! edgeinfer config=models/blazeface/model.json ! edgedemux name=d \
 *     videotestsrc num-buffers=30 ! video/x-raw,width=320,height=240 ! m.sink_0 \
 *     videotestsrc num-buffers=30 pattern=ball ! video/x-raw,width=640,height=480 ! m.sink_1 \
 *     d.src_0 ! queue ! edgemetasink location=s0.jsonl \
 *     d.src_1 ! queue ! edgemetasink location=s1.jsonl
 *
 * Put a queue after each src pad, as after any demuxer: edgedemux pushes every stream from one
 * thread, and a sink prerolling (or blocked) on one stream would hold up the others.
 *
 * Frames of a stream without a src pad are dropped (logged once per stream). Each pad gets
 * stream-start, then the stream's caps and segment (again whenever they change), its frames in
 * order, and EOS as soon as edgemux says the stream ended (or when the batches end). The frame
 * buffers are handed on as they are (no copy) when the batch buffer is not shared; after a tee
 * they are shared (downstream elements that write copy them as usual).
 *
 * Seeking: a seek on any src pad goes upstream to edgemux, which seeks every stream. A flush
 * (flush-start, flush-stop) goes to every src pad; after it each pad gets its stream's new
 * segment before its next frame. A stream flushed on its own before edgemux (a batch's
 * flushedStreams) gets flush-start and flush-stop (no reset-time) on its pad only, in order
 * with its frames, then its segment again; the other pads see nothing of it. Position and segment
 * queries on a src pad answer for that stream (its segment and last frame, in stream time); other
 * queries (duration, latency) go upstream through the batches, where edgemux answers them from its
 * first stream.
 *
 * Errors (GST_ELEMENT_ERROR, the pipeline stops): plain video or any other caps than batches
 * (put edgemux before it), a buffer without a batch meta. Pushing stops when every pad is
 * unlinked or flushing, or on the first error downstream (GstFlowCombiner).
 */
#include "gstedgedemux.h"

#include <gst/base/gstflowcombiner.h>
#include <gst/video/video.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "caps.h"
#include "edgeinfer/gst/batch_meta.h"

GST_DEBUG_CATEGORY_STATIC(gst_edge_demux_debug);
#define GST_CAT_DEFAULT gst_edge_demux_debug

namespace {

namespace eg = edgeinfer::gst;

// One stream's src pad and what it has been sent (streaming thread only, except at creation
// and in PAUSED->READY, when streaming has stopped).
struct StreamPad {
  GstPad* pad = nullptr;  // owned by the element
  unsigned stream = 0;
  bool started = false;  // stream-start sent
  GstCaps* caps = nullptr;
  bool haveSegment = false;
  GstSegment segment{};  // written under the object lock (position and segment queries)
  GstClockTime position = GST_CLOCK_TIME_NONE;  // the last frame's PTS, likewise
  bool eos = false;

  void reset() {
    started = false;
    if (caps) gst_caps_unref(caps);
    caps = nullptr;
    haveSegment = false;
    position = GST_CLOCK_TIME_NONE;
    eos = false;
  }
};

struct DemuxState {
  std::map<unsigned, StreamPad> pads;  // by stream id, under the object lock
  GstFlowCombiner* flows = nullptr;
  guint groupId = 0;
  bool haveGroupId = false;
  std::set<unsigned> warnedStreams;  // streams whose frames were dropped (no pad)
  uint64_t batches = 0;
};

}  // namespace

struct _GstEdgeDemux {
  GstElement parent;
  GstPad* sinkpad;
  DemuxState* state;
};

G_DEFINE_TYPE(GstEdgeDemux, gst_edge_demux, GST_TYPE_ELEMENT)

namespace {

StreamPad* padOf(GstEdgeDemux* self, GstPad* pad) {
  for (auto& [id, sp] : self->state->pads)
    if (sp.pad == pad) return &sp;
  return nullptr;
}

// Sends stream-start (once), then the caps and segment when they differ from what was sent.
void sendStickyEvents(GstEdgeDemux* self, StreamPad& sp, GstCaps* caps, const GstSegment* segment) {
  DemuxState& s = *self->state;
  if (!sp.started) {
    gchar* id = gst_pad_create_stream_id_printf(sp.pad, GST_ELEMENT(self), "%u", sp.stream);
    GstEvent* e = gst_event_new_stream_start(id);
    g_free(id);
    if (!s.haveGroupId) {
      s.groupId = gst_util_group_id_next();
      s.haveGroupId = true;
    }
    gst_event_set_group_id(e, s.groupId);
    gst_pad_push_event(sp.pad, e);
    sp.started = true;
  }
  if (caps && (!sp.caps || !gst_caps_is_equal(caps, sp.caps))) {
    gst_caps_replace(&sp.caps, caps);
    gst_pad_push_event(sp.pad, gst_event_new_caps(caps));
  }
  if (segment && (!sp.haveSegment || !gst_segment_is_equal(segment, &sp.segment))) {
    GST_OBJECT_LOCK(self);
    sp.segment = *segment;
    sp.haveSegment = true;
    GST_OBJECT_UNLOCK(self);
    gst_pad_push_event(sp.pad, gst_event_new_segment(segment));
  }
}

void sendEos(GstEdgeDemux* self, StreamPad& sp) {
  if (sp.eos) return;
  if (!sp.haveSegment) {
    // A stream that ended without a frame: downstream still gets a well-formed stream.
    GstSegment segment;
    gst_segment_init(&segment, GST_FORMAT_TIME);
    sendStickyEvents(self, sp, nullptr, &segment);
  }
  GST_DEBUG_OBJECT(sp.pad, "stream %u ended", sp.stream);
  gst_pad_push_event(sp.pad, gst_event_new_eos());
  sp.eos = true;
}

// A stream flushed on its own upstream (the batch says so): its pad alone is flushed, in order
// with its frames (flush-stop without reset-time: the other streams' running time goes on), and
// its segment goes again before its next frame.
void flushStream(GstEdgeDemux* self, unsigned stream) {
  DemuxState& s = *self->state;
  GST_OBJECT_LOCK(self);
  auto it = s.pads.find(stream);
  StreamPad* sp = it == s.pads.end() ? nullptr : &it->second;
  GstPad* pad = sp ? GST_PAD(gst_object_ref(sp->pad)) : nullptr;
  if (sp) {
    sp->haveSegment = false;
    sp->position = GST_CLOCK_TIME_NONE;
    sp->eos = false;
  }
  GST_OBJECT_UNLOCK(self);
  if (!pad) return;
  GST_DEBUG_OBJECT(pad, "stream %u was flushed", stream);
  gst_pad_push_event(pad, gst_event_new_flush_start());
  gst_pad_push_event(pad, gst_event_new_flush_stop(FALSE));
  gst_flow_combiner_update_pad_flow(s.flows, pad, GST_FLOW_OK);
  gst_object_unref(pad);
}

GstFlowReturn demuxChain(GstPad* /*pad*/, GstObject* parent, GstBuffer* buf) {
  GstEdgeDemux* self = GST_EDGE_DEMUX(parent);
  DemuxState& s = *self->state;
  EdgeInferBatchMeta* meta = eg::findBatchMeta(buf);
  if (!meta) {
    gst_buffer_unref(buf);
    GST_ELEMENT_ERROR(self, STREAM, FORMAT,
                      ("edgedemux: a buffer without a batch (no EdgeInferBatchMeta): edgedemux "
                       "takes the batches edgemux makes"),
                      (nullptr));
    return GST_FLOW_ERROR;
  }
  ++s.batches;
  // The only holder of the batch may hand its frames on; otherwise (a tee) they are shared.
  const bool mine = gst_buffer_is_writable(buf);
  for (unsigned stream : meta->batch->flushedStreams) flushStream(self, stream);
  GstFlowReturn combined = GST_FLOW_OK;
  for (eg::BatchFrame& f : meta->batch->frames) {
    GST_OBJECT_LOCK(self);
    auto it = s.pads.find(f.streamId);
    StreamPad* sp = it == s.pads.end() ? nullptr : &it->second;
    GstPad* pad = sp ? GST_PAD(gst_object_ref(sp->pad)) : nullptr;
    GST_OBJECT_UNLOCK(self);
    if (!sp) {
      if (s.warnedStreams.insert(f.streamId).second)
        GST_INFO_OBJECT(self, "no pad src_%u: the frames of stream %u are dropped", f.streamId,
                        f.streamId);
      continue;
    }
    if (!f.buffer) {
      gst_object_unref(pad);
      continue;
    }
    sendStickyEvents(self, *sp, f.caps, &f.segment);
    if (GST_BUFFER_PTS_IS_VALID(f.buffer)) {  // what a position query on the pad answers
      GST_OBJECT_LOCK(self);
      sp->position = GST_BUFFER_PTS(f.buffer);
      GST_OBJECT_UNLOCK(self);
    }
    GstBuffer* out = mine ? f.takeBuffer() : gst_buffer_ref(f.buffer);
    const GstFlowReturn ret = gst_pad_push(pad, out);
    combined = gst_flow_combiner_update_pad_flow(s.flows, pad, ret);
    gst_object_unref(pad);
    if (combined == GST_FLOW_FLUSHING || combined <= GST_FLOW_NOT_NEGOTIATED) break;
  }
  if (combined == GST_FLOW_OK || combined == GST_FLOW_NOT_LINKED) {
    for (unsigned stream : meta->batch->endedStreams) {
      GST_OBJECT_LOCK(self);
      auto it = s.pads.find(stream);
      StreamPad* sp = it == s.pads.end() ? nullptr : &it->second;
      GST_OBJECT_UNLOCK(self);
      if (sp) sendEos(self, *sp);
    }
  }
  gst_buffer_unref(buf);
  return combined;
}

// Caps that are not edgemux's batches: an error saying where edgedemux belongs.
void postNotABatch(GstEdgeDemux* self, GstCaps* caps) {
  gchar* text = gst_caps_to_string(caps);
  GST_ELEMENT_ERROR(self, STREAM, WRONG_TYPE,
                    ("edgedemux takes batches (" EDGEINFER_BATCH_CAPS
                     ") from edgemux, not %s: put edgemux (and edgeinfer) before it",
                     text),
                    (nullptr));
  g_free(text);
}

gboolean demuxSinkEvent(GstPad* pad, GstObject* parent, GstEvent* event) {
  GstEdgeDemux* self = GST_EDGE_DEMUX(parent);
  DemuxState& s = *self->state;
  switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_STREAM_START: {
      guint group = 0;
      if (gst_event_parse_group_id(event, &group)) {
        s.groupId = group;
        s.haveGroupId = true;
      }
      gst_event_unref(event);
      return TRUE;
    }
    case GST_EVENT_CAPS: {
      GstCaps* caps = nullptr;
      gst_event_parse_caps(event, &caps);
      const bool ok = eg::isBatchCaps(caps);
      if (!ok) {
        postNotABatch(self, caps);
      }
      gst_event_unref(event);
      return ok;
    }
    case GST_EVENT_SEGMENT:  // the batches' segment: each stream gets its own
    case GST_EVENT_GAP:
    case GST_EVENT_TAG:
      gst_event_unref(event);
      return TRUE;
    case GST_EVENT_EOS: {
      GST_OBJECT_LOCK(self);
      std::vector<StreamPad*> pads;
      for (auto& [id, sp] : s.pads) pads.push_back(&sp);
      GST_OBJECT_UNLOCK(self);
      for (StreamPad* sp : pads) sendEos(self, *sp);
      if (pads.empty())
        GST_ELEMENT_WARNING(self, CORE, PAD,
                            ("edgedemux has no src pads: every frame was dropped (request "
                             "src_%%u pads, e.g. d.src_0 in a launch line)"),
                            (nullptr));
      gst_event_unref(event);
      return TRUE;
    }
    case GST_EVENT_FLUSH_STOP: {
      GST_OBJECT_LOCK(self);
      for (auto& [id, sp] : s.pads) {
        sp.haveSegment = false;
        sp.position = GST_CLOCK_TIME_NONE;
        sp.eos = false;
      }
      gst_flow_combiner_reset(s.flows);
      GST_OBJECT_UNLOCK(self);
      return gst_pad_event_default(pad, parent, event);
    }
    default:
      return gst_pad_event_default(pad, parent, event);
  }
}

gboolean demuxSinkQuery(GstPad* pad, GstObject* parent, GstQuery* query) {
  GstEdgeDemux* self = GST_EDGE_DEMUX(parent);
  if (GST_QUERY_TYPE(query) == GST_QUERY_ACCEPT_CAPS) {
    GstCaps* caps = nullptr;
    gst_query_parse_accept_caps(query, &caps);
    const bool ok = eg::isBatchCaps(caps);
    if (!ok && gst_caps_is_fixed(caps)) {
      postNotABatch(self, caps);
    }
    gst_query_set_accept_caps_result(query, ok);
    return TRUE;
  }
  if (GST_QUERY_TYPE(query) == GST_QUERY_CAPS) {  // batches only, whatever is downstream
    GstCaps* filter = nullptr;
    gst_query_parse_caps(query, &filter);
    GstCaps* templ = gst_pad_get_pad_template_caps(pad);
    GstCaps* result =
        filter ? gst_caps_intersect_full(filter, templ, GST_CAPS_INTERSECT_FIRST) : templ;
    if (filter) gst_caps_unref(templ);
    gst_query_set_caps_result(query, result);
    gst_caps_unref(result);
    return TRUE;
  }
  return gst_pad_query_default(pad, parent, query);
}

gboolean demuxSrcQuery(GstPad* pad, GstObject* parent, GstQuery* query) {
  GstEdgeDemux* self = GST_EDGE_DEMUX(parent);
  if (GST_QUERY_TYPE(query) == GST_QUERY_CAPS) {  // the stream's caps, not the batches'
    GstCaps* filter = nullptr;
    gst_query_parse_caps(query, &filter);
    GST_OBJECT_LOCK(self);
    StreamPad* sp = padOf(self, pad);
    GstCaps* caps = sp && sp->caps ? gst_caps_ref(sp->caps) : gst_pad_get_pad_template_caps(pad);
    GST_OBJECT_UNLOCK(self);
    if (filter) {
      GstCaps* c = gst_caps_intersect_full(filter, caps, GST_CAPS_INTERSECT_FIRST);
      gst_caps_unref(caps);
      caps = c;
    }
    gst_query_set_caps_result(query, caps);
    gst_caps_unref(caps);
    return TRUE;
  }
  // Position and segment: the stream's own (in its segment), as it was last pushed on this
  // pad; upstream they would be answered by whichever stream edgemux asks first.
  if (GST_QUERY_TYPE(query) == GST_QUERY_POSITION || GST_QUERY_TYPE(query) == GST_QUERY_SEGMENT) {
    GST_OBJECT_LOCK(self);
    StreamPad* sp = padOf(self, pad);
    const bool have = sp && sp->haveSegment && sp->segment.format == GST_FORMAT_TIME;
    const GstSegment segment = have ? sp->segment : GstSegment{};
    const GstClockTime position = have ? sp->position : GST_CLOCK_TIME_NONE;
    GST_OBJECT_UNLOCK(self);
    if (!have) return FALSE;  // no frame yet (or since the last flush)
    if (GST_QUERY_TYPE(query) == GST_QUERY_SEGMENT) {
      gst_query_set_segment(
          query, segment.rate, GST_FORMAT_TIME, static_cast<gint64>(segment.start),
          GST_CLOCK_TIME_IS_VALID(segment.stop) ? static_cast<gint64>(segment.stop) : -1);
      return TRUE;
    }
    GstFormat format = GST_FORMAT_UNDEFINED;
    gst_query_parse_position(query, &format, nullptr);
    const GstClockTime t = GST_CLOCK_TIME_IS_VALID(position)
                               ? gst_segment_to_stream_time(&segment, GST_FORMAT_TIME, position)
                               : GST_CLOCK_TIME_NONE;
    if (format != GST_FORMAT_TIME || !GST_CLOCK_TIME_IS_VALID(t)) return FALSE;
    gst_query_set_position(query, GST_FORMAT_TIME, static_cast<gint64>(t));
    return TRUE;
  }
  // Latency, duration, seeking ...: upstream, through the batches.
  return gst_pad_query_default(pad, parent, query);
}

gboolean demuxSrcEvent(GstPad* pad, GstObject* parent, GstEvent* event) {
  switch (GST_EVENT_TYPE(event)) {
    case GST_EVENT_QOS:          // about one stream's frames, not the batches'
    case GST_EVENT_RECONFIGURE:  // the batches' caps do not depend on one stream
      gst_event_unref(event);
      return TRUE;
    default:
      return gst_pad_event_default(pad, parent, event);
  }
}

GstPad* demuxRequestNewPad(GstElement* element, GstPadTemplate* templ, const gchar* name,
                           const GstCaps* /*caps*/) {
  GstEdgeDemux* self = GST_EDGE_DEMUX(element);
  DemuxState& s = *self->state;
  unsigned stream = 0;
  GST_OBJECT_LOCK(self);
  if (name && !g_str_equal(name, "src_%u")) {
    char* end = nullptr;
    const bool digits = g_str_has_prefix(name, "src_") && g_ascii_isdigit(name[4]);
    const unsigned long v = digits ? std::strtoul(name + 4, &end, 10) : 0;
    if (!digits || *end != '\0' || v > G_MAXUINT) {
      GST_OBJECT_UNLOCK(self);
      GST_WARNING_OBJECT(self, "cannot make a pad named '%s': the names are src_<stream id>", name);
      return nullptr;
    }
    stream = static_cast<unsigned>(v);
    if (s.pads.count(stream)) {
      GST_OBJECT_UNLOCK(self);
      GST_WARNING_OBJECT(self, "%s was requested twice: each stream has one pad", name);
      return nullptr;
    }
  } else {
    while (s.pads.count(stream)) ++stream;
  }
  const std::string padName = "src_" + std::to_string(stream);
  GstPad* pad = gst_pad_new_from_template(templ, padName.c_str());
  StreamPad& sp = s.pads[stream];
  sp.pad = pad;
  sp.stream = stream;
  GST_OBJECT_UNLOCK(self);

  gst_pad_set_query_function(pad, GST_DEBUG_FUNCPTR(demuxSrcQuery));
  gst_pad_set_event_function(pad, GST_DEBUG_FUNCPTR(demuxSrcEvent));
  gst_pad_use_fixed_caps(pad);
  if (GST_STATE(element) > GST_STATE_READY || GST_STATE_TARGET(element) > GST_STATE_READY)
    gst_pad_set_active(pad, TRUE);
  gst_flow_combiner_add_pad(s.flows, pad);
  gst_element_add_pad(element, pad);
  return pad;
}

void demuxReleasePad(GstElement* element, GstPad* pad) {
  GstEdgeDemux* self = GST_EDGE_DEMUX(element);
  DemuxState& s = *self->state;
  // Streaming may be using the pad: take its stream lock (the sink pad's) before dropping it.
  GST_PAD_STREAM_LOCK(self->sinkpad);
  GST_OBJECT_LOCK(self);
  for (auto it = s.pads.begin(); it != s.pads.end(); ++it)
    if (it->second.pad == pad) {
      it->second.reset();
      s.pads.erase(it);
      break;
    }
  GST_OBJECT_UNLOCK(self);
  gst_flow_combiner_remove_pad(s.flows, pad);
  GST_PAD_STREAM_UNLOCK(self->sinkpad);
  gst_pad_set_active(pad, FALSE);
  gst_element_remove_pad(element, pad);
}

GstStateChangeReturn demuxChangeState(GstElement* element, GstStateChange change) {
  GstEdgeDemux* self = GST_EDGE_DEMUX(element);
  DemuxState& s = *self->state;
  const GstStateChangeReturn ret =
      GST_ELEMENT_CLASS(gst_edge_demux_parent_class)->change_state(element, change);
  if (change == GST_STATE_CHANGE_PAUSED_TO_READY) {
    GST_INFO_OBJECT(self, "%" G_GUINT64_FORMAT " batches", static_cast<guint64>(s.batches));
    GST_OBJECT_LOCK(self);
    for (auto& [id, sp] : s.pads) sp.reset();
    gst_flow_combiner_reset(s.flows);
    s.haveGroupId = false;
    s.warnedStreams.clear();
    s.batches = 0;
    GST_OBJECT_UNLOCK(self);
  }
  return ret;
}

void demuxFinalize(GObject* object) {
  GstEdgeDemux* self = GST_EDGE_DEMUX(object);
  for (auto& [id, sp] : self->state->pads) sp.reset();
  gst_flow_combiner_free(self->state->flows);
  delete self->state;
  self->state = nullptr;
  G_OBJECT_CLASS(gst_edge_demux_parent_class)->finalize(object);
}

}  // namespace

static void gst_edge_demux_class_init(GstEdgeDemuxClass* klass) {
  GObjectClass* gobject = G_OBJECT_CLASS(klass);
  GstElementClass* element = GST_ELEMENT_CLASS(klass);
  GST_DEBUG_CATEGORY_INIT(gst_edge_demux_debug, "edgedemux", 0, "EdgeInfer stream unbatcher");
  gobject->finalize = demuxFinalize;

  gst_element_class_set_static_metadata(
      element, "EdgeInfer stream unbatcher", "Demuxer/Video",
      "Splits edgemux's batches (video/x-edgeinfer-batch) back into the streams, each frame on "
      "its stream's pad src_%u with its caps, segment, timestamps and EdgeInferMeta",
      "EdgeInfer developers");
  GstCaps* sinkCaps = gst_caps_from_string(EDGEINFER_BATCH_CAPS);
  gst_element_class_add_pad_template(
      element, gst_pad_template_new("sink", GST_PAD_SINK, GST_PAD_ALWAYS, sinkCaps));
  gst_caps_unref(sinkCaps);
  GstCaps* srcCaps = gst_caps_from_string(EDGEINFER_INFER_CAPS);
  gst_element_class_add_pad_template(
      element, gst_pad_template_new("src_%u", GST_PAD_SRC, GST_PAD_REQUEST, srcCaps));
  gst_caps_unref(srcCaps);

  element->request_new_pad = GST_DEBUG_FUNCPTR(demuxRequestNewPad);
  element->release_pad = GST_DEBUG_FUNCPTR(demuxReleasePad);
  element->change_state = GST_DEBUG_FUNCPTR(demuxChangeState);
}

static void gst_edge_demux_init(GstEdgeDemux* self) {
  self->state = new DemuxState();
  self->state->flows = gst_flow_combiner_new();
  GstPadTemplate* templ = gst_element_class_get_pad_template(GST_ELEMENT_GET_CLASS(self), "sink");
  self->sinkpad = gst_pad_new_from_template(templ, "sink");
  gst_pad_set_chain_function(self->sinkpad, GST_DEBUG_FUNCPTR(demuxChain));
  gst_pad_set_event_function(self->sinkpad, GST_DEBUG_FUNCPTR(demuxSinkEvent));
  gst_pad_set_query_function(self->sinkpad, GST_DEBUG_FUNCPTR(demuxSinkQuery));
  gst_element_add_pad(GST_ELEMENT(self), self->sinkpad);
}
