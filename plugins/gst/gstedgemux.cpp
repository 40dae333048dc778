/* edgemux: collects the frames of N video streams into batches, so that one `edgeinfer` runs one
 * inference call per batch instead of one per frame per stream (what DeepStream's nvstreammux
 * does). Each stream is linked to a request pad sink_%u (the number is the stream id); the src
 * pad pushes batch buffers, caps "video/x-edgeinfer-batch", each carrying an EdgeInferBatchMeta
 * (edgeinfer/gst/batch_meta.h) with, per stream that delivered a frame, a reference to the
 * frame's buffer (no pixels are copied), its caps and video info, its segment and PTS.
 * `edgeinfer` takes batches; `edgedemux` gives each stream its frames back, with results.
 *
 *   GST_PLUGIN_PATH=build/release/plugins/gst gst-launch-1.0 \
 *     edgemux name=m ! edgeinfer config=models/blazeface/model.json batch-size=2 ! \
 *       edgedemux name=d \
 *     filesrc location=a.mp4 ! decodebin ! videoconvert ! m.sink_0 \
 *     filesrc location=b.mp4 ! decodebin ! videoconvert ! m.sink_1 \
 *     d.src_0 ! queue ! edgeoverlay ! videoconvert ! x264enc ! mp4mux ! filesink location=a-out.mp4
 * \ d.src_1 ! queue ! edgeoverlay ! videoconvert ! x264enc ! mp4mux ! filesink location=b-out.mp4
 *
 * (pipelines/multi_stream.sh is a ready one; the queue after each edgedemux pad is needed, as
 * after any demuxer.)
 *
 * Frames: video/x-raw in the formats edgeinfer takes (NV12, I420, RGBA, BGRA, RGBx, BGRx, RGB,
 * BGR, GRAY8), in system memory or, in a build with GStreamer's CUDA library, CUDA memory (the
 * buffers are only referenced). Streams may differ in size, format and frame rate, and may
 * change caps: each frame carries its own.
 *
 * What a batch holds: at most one frame per stream and at most batch-size frames (default: as
 * many as there are streams). When more streams have a frame waiting than batch-size allows, the
 * streams take turns (round robin), so none is starved.
 *
 * When a batch is pushed:
 *  - Non-live sources (files): when every stream that has not ended has a frame waiting, so
 *    each batch holds one frame of every running stream.
 *  - Live sources (cameras, RTSP; appsrc is-live=true): as soon as every running stream has a
 *    frame (or batch-size are there), and at the latest `timeout` after the first waiting
 *    frame was due (its running time plus the upstream latency): then the batch holds what has
 *    arrived, so a stalled camera never holds up the others. `timeout` is added to the latency
 *    edgemux reports. Live frames need timestamps (appsrc: do-timestamp=true).
 *  - A stream that ends (EOS) leaves the batches; the next batch tells edgedemux, which sends
 *    EOS on that stream's pad. When every stream has ended, edgemux sends EOS.
 *
 * Batch buffers have no memory of their own; their PTS is the running time of the earliest
 * frame in them (the src segment is in running time, also after a seek).
 *
 * Seeking (tests/gst/test_edgemux_seek.cpp): a seek is sent to every stream (GstAggregator's
 * behaviour). A flushing seek drops every frame waiting in edgemux (a partial batch never comes
 * out after the flush), sends one flush-start/flush-stop downstream (edgedemux gives them to
 * every stream, then each stream's new segment), and batches start again from the seek
 * position. A stream that cannot seek or does not flush (a live or stalled source) is flushed
 * by edgemux itself, so the seek does not wait for it.
 *
 * A flush of one stream (flush-start/flush-stop that reach one sink pad only: a seek sent to
 * one stream's source, or a flush sent into one branch upstream) flushes that stream alone:
 * its waiting frames are dropped, the batches go on with the other streams (nothing after
 * edgemux is flushed as a whole, so the other streams' branches keep their frames), and the
 * next batch names the stream in Batch::flushedStreams, before any frame that followed the
 * flush: edgeinfer starts that stream afresh (frame numbers from 0), edgedemux sends
 * flush-start/flush-stop (without reset-time) on that stream's pad only, then its segment
 * again. A flushed stream that had ended runs again until its next EOS. The flush must enter
 * the branch upstream (at the source or an element before edgemux): sent straight to a sink
 * pad of edgemux, the element before it gets GST_FLOW_FLUSHING meanwhile, pauses and is never
 * restarted, and a non-live edgemux then waits for that stream for good. A frame that the
 * streaming thread took from a pad while a flush of it began (on another thread) is dropped
 * with the frames the flush dropped: it never comes out after that flush.
 *
 * Errors (GST_ELEMENT_ERROR, the pipeline stops): caps edgemux cannot take (it says which
 * formats it takes; put videoconvert before it), an element after edgemux that does not take
 * batches, a frame without caps, and a pipeline where edgemux still has no sink pads, or has an
 * unlinked one, `start-timeout` after it started without having pushed a batch (a request pad
 * that nothing feeds would block every batch of non-live streams).
 */
#include "gstedgemux.h"

#include <gst/video/video.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "caps.h"
#include "edgeinfer/gst/batch_meta.h"

GST_DEBUG_CATEGORY_STATIC(gst_edge_mux_debug);
#define GST_CAT_DEFAULT gst_edge_mux_debug

namespace {

namespace eg = edgeinfer::gst;

enum { PROP_0, PROP_BATCH_SIZE, PROP_TIMEOUT, PROP_START_TIMEOUT };

constexpr guint64 kDefaultTimeout = 40 * GST_MSECOND;
constexpr guint64 kDefaultStartTimeout = 10 * GST_SECOND;

// A sink pad's stream, as the streaming (src) thread sees it.
struct PadState {
  unsigned stream = 0;
  GstCaps* caps = nullptr;  // the caps of the frames now at the head of the queue
  GstVideoInfo info{};
  bool eosAnnounced = false;  // a batch said this stream ended
  // Flushed (flush-stop) since the last batch that said so; cleared by a flush of every stream.
  std::atomic<bool> flushed{false};
  // The seqnums of the last flush-start and flush-stop that reached the pad (any thread).
  std::atomic<guint32> flushStartSeqnum{GST_SEQNUM_INVALID};
  std::atomic<guint32> flushStopSeqnum{GST_SEQNUM_INVALID};
  // Flush-starts that GstAggregator has handled (its queue emptied, the pad flushing): a frame
  // popped while this changed may be from before the flush (any thread).
  std::atomic<uint32_t> flushStarts{0};
};

struct MuxState {
  // Properties, under the object lock.
  guint batchSize = 0;
  guint64 timeout = kDefaultTimeout;
  guint64 startTimeout = kDefaultStartTimeout;

  // Streaming (src pad task).
  uint64_t batches = 0;
  unsigned nextStream = 0;  // round robin when batch-size is smaller than the streams waiting
  std::atomic<bool> pushed{false};
  std::atomic<bool> downstreamChecked{false};
  GstClockID startCheck = nullptr;  // under the object lock
};

}  // namespace

struct _GstEdgeMuxPad {
  GstAggregatorPad parent;
  PadState* state;
};

struct _GstEdgeMux {
  GstAggregator parent;
  MuxState* state;
};

G_DEFINE_TYPE(GstEdgeMuxPad, gst_edge_mux_pad, GST_TYPE_AGGREGATOR_PAD)
G_DEFINE_TYPE(GstEdgeMux, gst_edge_mux, GST_TYPE_AGGREGATOR)

// ---- The pad --------------------------------------------------------------------------------

static GstFlowReturn edgeMuxPadFlush(GstAggregatorPad* pad, GstAggregator* /*agg*/) {
  GST_EDGE_MUX_PAD(pad)->state->eosAnnounced = false;
  return GST_FLOW_OK;
}

static void edgeMuxPadFinalize(GObject* object) {
  GstEdgeMuxPad* pad = GST_EDGE_MUX_PAD(object);
  if (pad->state->caps) gst_caps_unref(pad->state->caps);
  delete pad->state;
  pad->state = nullptr;
  G_OBJECT_CLASS(gst_edge_mux_pad_parent_class)->finalize(object);
}

static void gst_edge_mux_pad_class_init(GstEdgeMuxPadClass* klass) {
  G_OBJECT_CLASS(klass)->finalize = edgeMuxPadFinalize;
  GST_AGGREGATOR_PAD_CLASS(klass)->flush = GST_DEBUG_FUNCPTR(edgeMuxPadFlush);
}

static void gst_edge_mux_pad_init(GstEdgeMuxPad* pad) {
  pad->state = new PadState();
}

// ---- The element ----------------------------------------------------------------------------

namespace {

// The sink pads (references), by stream id.
class SinkPads {
 public:
  explicit SinkPads(GstEdgeMux* self) {
    GST_OBJECT_LOCK(self);
    for (GList* l = GST_ELEMENT(self)->sinkpads; l; l = l->next)
      pads_.push_back(GST_EDGE_MUX_PAD(gst_object_ref(l->data)));
    GST_OBJECT_UNLOCK(self);
    std::sort(pads_.begin(), pads_.end(), [](GstEdgeMuxPad* a, GstEdgeMuxPad* b) {
      return a->state->stream < b->state->stream;
    });
  }
  ~SinkPads() {
    for (GstEdgeMuxPad* p : pads_) gst_object_unref(p);
  }
  SinkPads(const SinkPads&) = delete;
  SinkPads& operator=(const SinkPads&) = delete;
  const std::vector<GstEdgeMuxPad*>& get() const { return pads_; }

 private:
  std::vector<GstEdgeMuxPad*> pads_;
};

GstAggregatorPad* aggPad(GstEdgeMuxPad* p) {
  return GST_AGGREGATOR_PAD(p);
}

// The running time of `buf` in `segment`, or GST_CLOCK_TIME_NONE.
GstClockTime runningTime(const GstSegment& segment, GstBuffer* buf) {
  GstClockTime t = GST_BUFFER_PTS(buf);
  if (!GST_CLOCK_TIME_IS_VALID(t)) t = GST_BUFFER_DTS(buf);
  if (!GST_CLOCK_TIME_IS_VALID(t) || segment.format != GST_FORMAT_TIME) return GST_CLOCK_TIME_NONE;
  return gst_segment_to_running_time(&segment, GST_FORMAT_TIME, t);
}

// The running time of `buf` at the head of `pad`, or GST_CLOCK_TIME_NONE.
GstClockTime runningTime(GstAggregatorPad* pad, GstBuffer* buf) {
  GST_OBJECT_LOCK(pad);
  const GstSegment segment = pad->segment;
  GST_OBJECT_UNLOCK(pad);
  return runningTime(segment, buf);
}

// Whether the stream id in a pad name ("sink_12") is well formed; sets `stream`.
bool parseStream(const char* name, const char* prefix, unsigned* stream) {
  const size_t n = std::char_traits<char>::length(prefix);
  if (!name || std::string(name).compare(0, n, prefix) != 0 || name[n] == '\0') return false;
  char* end = nullptr;
  const unsigned long v = std::strtoul(name + n, &end, 10);
  if (*end != '\0' || v > G_MAXUINT || name[n] == '-' || name[n] == '+') return false;
  *stream = static_cast<unsigned>(v);
  return true;
}

GstAggregatorPad* edgeMuxCreateNewPad(GstAggregator* agg, GstPadTemplate* templ,
                                      const gchar* reqName, const GstCaps* caps) {
  unsigned stream = 0;
  if (reqName && !g_str_equal(reqName, "sink_%u")) {
    if (!parseStream(reqName, "sink_", &stream)) {
      GST_WARNING_OBJECT(agg, "cannot make a sink pad named '%s': the names are sink_<stream id>",
                         reqName);
      return nullptr;
    }
    if (GstPad* existing = gst_element_get_static_pad(GST_ELEMENT(agg), reqName)) {
      gst_object_unref(existing);
      GST_WARNING_OBJECT(agg, "%s was requested twice: each stream takes its own pad", reqName);
      return nullptr;
    }
  } else {
    reqName = nullptr;  // the next free number
  }
  GstAggregatorPad* pad =
      GST_AGGREGATOR_CLASS(gst_edge_mux_parent_class)->create_new_pad(agg, templ, reqName, caps);
  if (pad && !parseStream(GST_PAD_NAME(pad), "sink_", &GST_EDGE_MUX_PAD(pad)->state->stream)) {
    gst_object_unref(pad);
    return nullptr;
  }
  return pad;
}

// The element after edgemux must take batches; said once, clearly, before anything is pushed.
bool checkDownstream(GstEdgeMux* self) {
  MuxState& s = *self->state;
  if (s.downstreamChecked.load()) return true;
  GstCaps* batch = gst_caps_from_string(EDGEINFER_BATCH_CAPS);
  GstCaps* peer = gst_pad_peer_query_caps(GST_AGGREGATOR_SRC_PAD(self), batch);
  const bool ok = peer && !gst_caps_is_empty(peer);
  if (peer) gst_caps_unref(peer);
  gst_caps_unref(batch);
  if (!ok) {
    GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                      ("edgemux: the element after edgemux does not take batches "
                       "(" EDGEINFER_BATCH_CAPS "): put edgeinfer and edgedemux (or "
                       "edgemetasink) after edgemux"),
                      (nullptr));
    return false;
  }
  s.downstreamChecked.store(true);
  return true;
}

gboolean edgeMuxSinkEvent(GstAggregator* agg, GstAggregatorPad* pad, GstEvent* event) {
  GstEdgeMux* self = GST_EDGE_MUX(agg);
  PadState& ps = *GST_EDGE_MUX_PAD(pad)->state;
  if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_START)
    ps.flushStartSeqnum.store(gst_event_get_seqnum(event));
  if (GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_STOP) {
    ps.flushStopSeqnum.store(gst_event_get_seqnum(event));
    // GstAggregator forwards no flush of one pad (only one every pad had: edgeMuxFlush); the
    // next batch says so, before the frames that follow it.
    ps.flushed.store(true);
  }
  // Serialized events reach this in order with the buffers (from the src pad task), so the
  // caps kept here are those of the frames that follow.
  if (GST_EVENT_TYPE(event) == GST_EVENT_CAPS) {
    GstCaps* caps = nullptr;
    gst_event_parse_caps(event, &caps);
    GstVideoInfo info;
    if (!gst_video_info_from_caps(&info, caps)) {
      GST_ELEMENT_ERROR(self, STREAM, FORMAT,
                        ("edgemux: %s: caps are not raw video", GST_PAD_NAME(pad)),
                        ("%" GST_PTR_FORMAT, static_cast<void*>(caps)));
      gst_event_unref(event);
      return FALSE;
    }
    if (!checkDownstream(self)) {
      gst_event_unref(event);
      return FALSE;
    }
    gst_caps_replace(&ps.caps, caps);
    ps.info = info;
    GST_DEBUG_OBJECT(pad, "stream %u: %" GST_PTR_FORMAT, ps.stream, static_cast<void*>(caps));
  }
  const bool flushStart = GST_EVENT_TYPE(event) == GST_EVENT_FLUSH_START;
  const gboolean ret = GST_AGGREGATOR_CLASS(gst_edge_mux_parent_class)->sink_event(agg, pad, event);
  if (flushStart) ps.flushStarts.fetch_add(1);
  return ret;
}

// A flushing seek: GstAggregator forwards it to every stream and resumes only when every sink
// pad has had the seek's flush-start and flush-stop. A stream that cannot seek (a live camera,
// appsrc) or has stalled sends none, and the batches would stop for good; so when at least one
// stream flushed, edgemux flushes the others itself (their waiting frames are dropped; their
// next frames join the batches as before).
gboolean edgeMuxSrcEvent(GstAggregator* agg, GstEvent* event) {
  GstSeekFlags flags = GST_SEEK_FLAG_NONE;
  if (GST_EVENT_TYPE(event) == GST_EVENT_SEEK)
    gst_event_parse_seek(event, nullptr, nullptr, &flags, nullptr, nullptr, nullptr, nullptr);
  const bool flushingSeek =
      GST_EVENT_TYPE(event) == GST_EVENT_SEEK && (flags & GST_SEEK_FLAG_FLUSH);
  const guint32 seqnum = gst_event_get_seqnum(event);
  const gboolean ret = GST_AGGREGATOR_CLASS(gst_edge_mux_parent_class)->src_event(agg, event);
  if (!flushingSeek) return ret;
  SinkPads pads(GST_EDGE_MUX(agg));
  const bool anyFlushed = std::any_of(pads.get().begin(), pads.get().end(), [&](GstEdgeMuxPad* p) {
    return p->state->flushStopSeqnum.load() == seqnum;
  });
  if (!anyFlushed) return ret;
  for (GstEdgeMuxPad* p : pads.get()) {
    if (p->state->flushStopSeqnum.load() == seqnum) continue;
    GST_INFO_OBJECT(p, "stream %u did not flush for the seek: flushing it here", p->state->stream);
    if (p->state->flushStartSeqnum.load() != seqnum) {
      GstEvent* start = gst_event_new_flush_start();
      gst_event_set_seqnum(start, seqnum);
      gst_pad_send_event(GST_PAD(p), start);
    }
    GstEvent* stop = gst_event_new_flush_stop(TRUE);
    gst_event_set_seqnum(stop, seqnum);
    gst_pad_send_event(GST_PAD(p), stop);
  }
  return ret;
}

// Caps it cannot take: as edgeinfer does (a warning when asked, an error when pushed).
gboolean edgeMuxSinkQuery(GstAggregator* agg, GstAggregatorPad* pad, GstQuery* query) {
  if (GST_QUERY_TYPE(query) == GST_QUERY_ACCEPT_CAPS) {
    GstCaps* caps = nullptr;
    gst_query_parse_accept_caps(query, &caps);
    GstCaps* templ = gst_pad_get_pad_template_caps(GST_PAD(pad));
    const std::string msg = edgeinfer::gst::unsupportedCapsMessage("edgemux", caps, templ);
    gst_caps_unref(templ);
    if (!msg.empty() && gst_caps_is_fixed(caps)) {
      gchar* offered = gst_caps_to_string(caps);
      GST_ELEMENT_ERROR(agg, STREAM, FORMAT, ("%s", msg.c_str()),
                        ("%s: offered caps %s", GST_PAD_NAME(pad), offered));
      g_free(offered);
      gst_query_set_accept_caps_result(query, FALSE);
      return TRUE;
    }
  }
  return GST_AGGREGATOR_CLASS(gst_edge_mux_parent_class)->sink_query(agg, pad, query);
}

// Live: the running time of the earliest waiting frame; the base class waits until the clock
// passes it plus the latency (upstream's + timeout), then calls aggregate(timeout=TRUE).
GstClockTime edgeMuxGetNextTime(GstAggregator* agg) {
  GstClockTime next = GST_CLOCK_TIME_NONE;
  SinkPads pads(GST_EDGE_MUX(agg));
  for (GstEdgeMuxPad* p : pads.get()) {
    GstBuffer* b = gst_aggregator_pad_peek_buffer(aggPad(p));
    if (!b) continue;
    const GstClockTime t = runningTime(aggPad(p), b);
    gst_buffer_unref(b);
    if (GST_CLOCK_TIME_IS_VALID(t) && (!GST_CLOCK_TIME_IS_VALID(next) || t < next)) next = t;
  }
  return next;
}

GstFlowReturn pushBatch(GstEdgeMux* self, eg::Batch batch, GstClockTime pts) {
  GstAggregator* agg = GST_AGGREGATOR(self);
  batch.number = self->state->batches++;
  GST_LOG_OBJECT(self, "batch %" G_GUINT64_FORMAT ": %zu frames, %zu streams ended",
                 static_cast<guint64>(batch.number), batch.frames.size(),
                 batch.endedStreams.size());
  GstBuffer* out = gst_buffer_new();
  GST_BUFFER_PTS(out) = pts;
  if (!eg::addBatchMeta(out, std::move(batch))) {
    gst_buffer_unref(out);
    GST_ELEMENT_ERROR(self, CORE, FAILED, ("edgemux: cannot attach the batch meta"), (nullptr));
    return GST_FLOW_ERROR;
  }
  if (GST_CLOCK_TIME_IS_VALID(pts)) {
    GST_OBJECT_LOCK(self);
    GST_AGGREGATOR_PAD(agg->srcpad)->segment.position = pts;
    GST_OBJECT_UNLOCK(self);
  }
  self->state->pushed.store(true);
  return gst_aggregator_finish_buffer(agg, out);
}

// A frame popped from a sink pad, with the count of flush-starts its pad had handled before.
struct Taken {
  unsigned stream;
  uint32_t flushStarts;
  GstClockTime runningTime;
};

// The streams flushed on their own since the last batch that said so (marks cleared).
void takeFlushed(const SinkPads& pads, std::vector<unsigned>& streams) {
  for (GstEdgeMuxPad* p : pads.get())
    if (p->state->flushed.exchange(false)) {
      GST_DEBUG_OBJECT(p, "stream %u was flushed on its own", p->state->stream);
      streams.push_back(p->state->stream);
    }
}

// Drops from `batch` the frames whose pad has begun a flush since they were popped (a flush
// from another thread, of that stream or of every stream, raced the pop): they belong before
// that flush, and would come out after it (the batch's flush news goes before its frames, and
// a seek's flush may be over before the batch is pushed). Called after takeFlushed(): a flush
// whose news the batch carries counted its flush-start before that news was marked.
void dropStale(const SinkPads& pads, eg::Batch& batch, std::vector<Taken>& taken) {
  for (GstEdgeMuxPad* p : pads.get()) {
    const uint32_t starts = p->state->flushStarts.load();
    for (size_t k = 0; k < taken.size(); ++k)
      if (taken[k].stream == p->state->stream && taken[k].flushStarts != starts) {
        GST_DEBUG_OBJECT(p, "stream %u: a frame from before a flush is dropped", p->state->stream);
        batch.frames.erase(batch.frames.begin() + static_cast<std::ptrdiff_t>(k));
        taken.erase(taken.begin() + static_cast<std::ptrdiff_t>(k));
        break;
      }
  }
}

GstFlowReturn edgeMuxAggregate(GstAggregator* agg, gboolean timeout) {
  GstEdgeMux* self = GST_EDGE_MUX(agg);
  MuxState& s = *self->state;
  GST_OBJECT_LOCK(self);
  const guint batchSize = s.batchSize;
  GST_OBJECT_UNLOCK(self);
  SinkPads pads(self);

  // Streams that ended since the last batch.
  std::vector<unsigned> ended;
  size_t running = 0;
  for (GstEdgeMuxPad* p : pads.get()) {
    if (!gst_aggregator_pad_is_eos(aggPad(p))) {
      ++running;
    } else if (!p->state->eosAnnounced) {
      p->state->eosAnnounced = true;
      ended.push_back(p->state->stream);
    }
  }
  if (running == 0 && !pads.get().empty()) return GST_FLOW_EOS;  // edgedemux ends every stream

  // Batches while they are full: a frame from every running stream, or batch-size frames. On a
  // timeout (live), the first batch takes what has arrived.
  bool first = true;
  for (;;) {
    std::vector<size_t> ready;
    for (size_t i = 0; i < pads.get().size(); ++i)
      if (gst_aggregator_pad_has_buffer(aggPad(pads.get()[i]))) ready.push_back(i);
    const size_t cap = batchSize > 0 ? batchSize : pads.get().size();
    const size_t full = std::min(cap, running);
    if (ready.empty() || (ready.size() < full && !(timeout && first))) break;
    // Round robin from the stream after the last one served.
    std::rotate(
        ready.begin(),
        std::find_if(ready.begin(), ready.end(),
                     [&](size_t i) { return pads.get()[i]->state->stream >= s.nextStream; }),
        ready.end());
    if (ready.size() > cap) ready.resize(cap);
    std::sort(ready.begin(), ready.end());

    eg::Batch batch;
    std::vector<Taken> taken;
    for (size_t i : ready) {
      GstEdgeMuxPad* p = pads.get()[i];
      const uint32_t flushStarts = p->state->flushStarts.load();
      GstBuffer* buf = gst_aggregator_pad_pop_buffer(aggPad(p));
      if (!buf) continue;
      if (!p->state->caps) {
        gst_buffer_unref(buf);
        GST_ELEMENT_ERROR(self, CORE, NEGOTIATION,
                          ("edgemux: %s: a frame arrived before its caps", GST_PAD_NAME(p)),
                          (nullptr));
        return GST_FLOW_NOT_NEGOTIATED;
      }
      GST_OBJECT_LOCK(p);
      const GstSegment segment = aggPad(p)->segment;
      GST_OBJECT_UNLOCK(p);
      s.nextStream = p->state->stream + 1;
      // A flush of this pad alone (from another thread) while the frame was being taken: the
      // frame may be from before it, and its segment already reset. A flush drops frames.
      if (p->state->flushStarts.load() != flushStarts || segment.format == GST_FORMAT_UNDEFINED) {
        GST_DEBUG_OBJECT(p, "stream %u: a frame taken as the stream was flushed is dropped",
                         p->state->stream);
        gst_buffer_unref(buf);
        continue;
      }
      taken.push_back({p->state->stream, flushStarts, runningTime(segment, buf)});
      batch.frames.emplace_back(p->state->stream, buf, p->state->caps, p->state->info, segment);
    }
    if (first) batch.endedStreams = std::move(ended);
    ended.clear();
    first = false;
    // Read after the frames were taken: a frame that came after a flush is never pushed
    // before the news of that flush.
    takeFlushed(pads, batch.flushedStreams);
    dropStale(pads, batch, taken);
    if (batch.frames.empty() && batch.endedStreams.empty() && batch.flushedStreams.empty())
      continue;
    GstClockTime pts = GST_CLOCK_TIME_NONE;
    for (const Taken& t : taken)
      if (GST_CLOCK_TIME_IS_VALID(t.runningTime) &&
          (!GST_CLOCK_TIME_IS_VALID(pts) || t.runningTime < pts))
        pts = t.runningTime;
    const GstFlowReturn ret = pushBatch(self, std::move(batch), pts);
    if (ret != GST_FLOW_OK) return ret;
  }
  // Only news of ended or flushed streams: a batch without frames carries it.
  eg::Batch news;
  takeFlushed(pads, news.flushedStreams);
  if (!ended.empty() || !news.flushedStreams.empty()) {
    news.endedStreams = std::move(ended);
    return pushBatch(self, std::move(news), GST_CLOCK_TIME_NONE);
  }
  return GST_FLOW_OK;
}

// After a flushing seek (every stream flushed): the queued frames are gone (GstAggregator
// dropped them with the pads' queues) and the batches' segment is running time again, not the
// seek's (GstAggregator gives the src pad the seek's segment; the batches' PTS are running time,
// so an element after edgemux that clips, e.g. a sink, would drop them).
GstFlowReturn edgeMuxFlush(GstAggregator* agg) {
  // Every stream flushed, and the flush goes downstream as it is: no stream's own flush to tell.
  SinkPads pads(GST_EDGE_MUX(agg));
  for (GstEdgeMuxPad* p : pads.get()) p->state->flushed.store(false);
  GstSegment segment;
  gst_segment_init(&segment, GST_FORMAT_TIME);
  gst_aggregator_update_segment(agg, &segment);
  return GST_FLOW_OK;
}

// Runs on the system clock's thread start-timeout after start: a mux that has pushed nothing
// and still has no sink pads, or an unlinked one, would wait forever.
gboolean startCheck(GstClock* /*clock*/, GstClockTime /*time*/, GstClockID /*id*/, gpointer data) {
  GstEdgeMux* self = GST_EDGE_MUX(data);
  MuxState& s = *self->state;
  if (s.pushed.load()) return TRUE;
  GST_OBJECT_LOCK(self);
  const double secs = static_cast<double>(s.startTimeout) / GST_SECOND;
  GST_OBJECT_UNLOCK(self);
  SinkPads pads(self);
  if (pads.get().empty()) {
    GST_ELEMENT_ERROR(self, CORE, PAD,
                      ("edgemux has no sink pads %.1f s after it started: link each stream to a "
                       "request pad sink_%%u (in a launch line: edgemux name=m ... src ! m.sink_0)",
                       secs),
                      (nullptr));
    return TRUE;
  }
  for (GstEdgeMuxPad* p : pads.get())
    if (!gst_pad_is_linked(GST_PAD(p))) {
      GST_ELEMENT_ERROR(self, CORE, PAD,
                        ("edgemux: %s is not linked %.1f s after edgemux started, and no batch "
                         "can be made without it: link a stream to it or release it",
                         GST_PAD_NAME(p), secs),
                        (nullptr));
      return TRUE;
    }
  return TRUE;
}

void cancelStartCheck(GstEdgeMux* self) {
  GST_OBJECT_LOCK(self);
  GstClockID id = std::exchange(self->state->startCheck, nullptr);
  GST_OBJECT_UNLOCK(self);
  if (id) {
    gst_clock_id_unschedule(id);
    gst_clock_id_unref(id);
  }
}

gboolean edgeMuxStart(GstAggregator* agg) {
  GstEdgeMux* self = GST_EDGE_MUX(agg);
  MuxState& s = *self->state;
  s.batches = 0;
  s.nextStream = 0;
  s.pushed.store(false);
  s.downstreamChecked.store(false);
  GST_OBJECT_LOCK(self);
  const guint64 wait = s.startTimeout;
  GST_OBJECT_UNLOCK(self);
  if (wait > 0) {
    GstClock* clock = gst_system_clock_obtain();
    GstClockID id = gst_clock_new_single_shot_id(clock, gst_clock_get_time(clock) + wait);
    gst_object_unref(clock);
    gst_clock_id_wait_async(id, startCheck, gst_object_ref(self), gst_object_unref);
    GST_OBJECT_LOCK(self);
    s.startCheck = id;
    GST_OBJECT_UNLOCK(self);
  }
  return TRUE;
}

gboolean edgeMuxStop(GstAggregator* agg) {
  GstEdgeMux* self = GST_EDGE_MUX(agg);
  cancelStartCheck(self);
  GST_INFO_OBJECT(self, "%" G_GUINT64_FORMAT " batches",
                  static_cast<guint64>(self->state->batches));
  SinkPads pads(self);
  for (GstEdgeMuxPad* p : pads.get()) {
    p->state->eosAnnounced = false;
    p->state->flushed.store(false);
    if (p->state->caps) gst_caps_unref(p->state->caps);
    p->state->caps = nullptr;
  }
  return TRUE;
}

void edgeMuxSetProperty(GObject* object, guint id, const GValue* value, GParamSpec* pspec) {
  GstEdgeMux* self = GST_EDGE_MUX(object);
  MuxState& s = *self->state;
  switch (id) {
    case PROP_BATCH_SIZE:
      GST_OBJECT_LOCK(self);
      s.batchSize = g_value_get_uint(value);
      GST_OBJECT_UNLOCK(self);
      break;
    case PROP_TIMEOUT: {
      const guint64 t = g_value_get_uint64(value);
      GST_OBJECT_LOCK(self);
      s.timeout = t;
      GST_OBJECT_UNLOCK(self);
      // The frames of a batch may wait this long: part of the latency edgemux adds.
      gst_aggregator_set_latency(GST_AGGREGATOR(self), t, t);
      break;
    }
    case PROP_START_TIMEOUT:
      GST_OBJECT_LOCK(self);
      s.startTimeout = g_value_get_uint64(value);
      GST_OBJECT_UNLOCK(self);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
      break;
  }
}

void edgeMuxGetProperty(GObject* object, guint id, GValue* value, GParamSpec* pspec) {
  GstEdgeMux* self = GST_EDGE_MUX(object);
  MuxState& s = *self->state;
  GST_OBJECT_LOCK(self);
  switch (id) {
    case PROP_BATCH_SIZE:
      g_value_set_uint(value, s.batchSize);
      break;
    case PROP_TIMEOUT:
      g_value_set_uint64(value, s.timeout);
      break;
    case PROP_START_TIMEOUT:
      g_value_set_uint64(value, s.startTimeout);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK(self);
}

void edgeMuxFinalize(GObject* object) {
  GstEdgeMux* self = GST_EDGE_MUX(object);
  cancelStartCheck(self);
  delete self->state;
  self->state = nullptr;
  G_OBJECT_CLASS(gst_edge_mux_parent_class)->finalize(object);
}

}  // namespace

static void gst_edge_mux_class_init(GstEdgeMuxClass* klass) {
  GObjectClass* gobject = G_OBJECT_CLASS(klass);
  GstElementClass* element = GST_ELEMENT_CLASS(klass);
  GstAggregatorClass* agg = GST_AGGREGATOR_CLASS(klass);
  GST_DEBUG_CATEGORY_INIT(gst_edge_mux_debug, "edgemux", 0, "EdgeInfer stream batcher");

  gobject->set_property = edgeMuxSetProperty;
  gobject->get_property = edgeMuxGetProperty;
  gobject->finalize = edgeMuxFinalize;

  const auto playing = static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                                GST_PARAM_MUTABLE_PLAYING);
  g_object_class_install_property(
      gobject, PROP_BATCH_SIZE,
      g_param_spec_uint("batch-size", "Batch size",
                        "Most frames in a batch, one per stream at most (0: as many as there are "
                        "streams). With fewer than the streams, the streams take turns. Give "
                        "edgeinfer the same batch-size so that a batch is one engine run",
                        0, 1024, 0, playing));
  g_object_class_install_property(
      gobject, PROP_TIMEOUT,
      g_param_spec_uint64(
          "timeout", "Timeout (ns)",
          "Live sources: how long (in nanoseconds) a batch waits for the streams' frames after "
          "its first frame was due (its running time plus the upstream latency); then it is "
          "pushed with the frames that arrived, so a stalled camera never holds up the others. "
          "Added to the pipeline latency. Non-live sources (files) wait for every running stream",
          0, G_MAXUINT64, kDefaultTimeout, playing));
  g_object_class_install_property(
      gobject, PROP_START_TIMEOUT,
      g_param_spec_uint64(
          "start-timeout", "Start timeout (ns)",
          "When edgemux has pushed no batch this long (in nanoseconds) after it started and "
          "has no sink pad, or an unlinked one, it posts an error instead of waiting forever "
          "(sources with dynamic pads, e.g. decodebin ! m.sink_0, get theirs late). 0: wait "
          "forever",
          0, G_MAXUINT64, kDefaultStartTimeout,
          static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                   GST_PARAM_MUTABLE_READY)));

  gst_element_class_set_static_metadata(
      element, "EdgeInfer stream batcher", "Muxer/Video",
      "Collects the frames of several video streams into batches (video/x-edgeinfer-batch) for "
      "one edgeinfer inference call per batch, with a timeout for live streams",
      "EdgeInfer developers");
  GstCaps* sinkCaps = gst_caps_from_string(EDGEINFER_INFER_CAPS);
  gst_element_class_add_pad_template(
      element, gst_pad_template_new_with_gtype("sink_%u", GST_PAD_SINK, GST_PAD_REQUEST, sinkCaps,
                                               GST_TYPE_EDGE_MUX_PAD));
  gst_caps_unref(sinkCaps);
  GstCaps* srcCaps = gst_caps_from_string(EDGEINFER_BATCH_CAPS);
  gst_element_class_add_pad_template(
      element, gst_pad_template_new_with_gtype("src", GST_PAD_SRC, GST_PAD_ALWAYS, srcCaps,
                                               GST_TYPE_AGGREGATOR_PAD));
  gst_caps_unref(srcCaps);

  agg->create_new_pad = GST_DEBUG_FUNCPTR(edgeMuxCreateNewPad);
  agg->sink_event = GST_DEBUG_FUNCPTR(edgeMuxSinkEvent);
  agg->sink_query = GST_DEBUG_FUNCPTR(edgeMuxSinkQuery);
  agg->get_next_time = GST_DEBUG_FUNCPTR(edgeMuxGetNextTime);
  agg->aggregate = GST_DEBUG_FUNCPTR(edgeMuxAggregate);
  agg->start = GST_DEBUG_FUNCPTR(edgeMuxStart);
  agg->stop = GST_DEBUG_FUNCPTR(edgeMuxStop);
  agg->flush = GST_DEBUG_FUNCPTR(edgeMuxFlush);
  agg->src_event = GST_DEBUG_FUNCPTR(edgeMuxSrcEvent);

  gst_type_mark_as_plugin_api(GST_TYPE_EDGE_MUX_PAD, static_cast<GstPluginAPIFlags>(0));
}

static void gst_edge_mux_init(GstEdgeMux* self) {
  self->state = new MuxState();
  gst_aggregator_set_latency(GST_AGGREGATOR(self), kDefaultTimeout, kDefaultTimeout);
}
