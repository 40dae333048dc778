// Seeking and flushing through edgemux ! edgeinfer ! edgedemux (videotestsrc streams, the tiny
// detector, CPU backend). A flushing seek on the pipeline reaches every source, each edgedemux
// pad forwards flush-start, flush-stop and its stream's new segment, and every stream's frames
// come out again from the seek position, with their own results (equal to a fresh run's from
// that position) and no pre-seek frame after the flush. A seek with a stalled live stream, three
// seeks in a row, a seek to the end, a seek on one stream only and a seek on live sources must
// neither hang nor corrupt the other streams; every wait has a deadline. A flush without a seek
// into one stream's branch (EdgeMuxFlush.*) flushes that stream alone: the others go on
// untouched, it resumes after the flush with its segment and frame numbers from 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "edgeinfer/gst/edgeinfer_meta.h"
#include "gst_test_util.h"
#include "tiny_models.h"

namespace {

using namespace eitest;
namespace eg = edgeinfer::gst;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr GstClockTime kFrame = 100 * GST_MSECOND;  // 10 frames/s

// What left one edgedemux pad, in order.
struct Item {
  enum Kind { kBuffer, kFlushStart, kFlushStop, kSegment, kEos } kind = kBuffer;
  GstClockTime pts = GST_CLOCK_TIME_NONE;
  GstSegment segment{};
  bool haveMeta = false;
  uint64_t frameNumber = 0;
  std::vector<float> boxes;  // x1 y1 x2 y2 score class of every detection
};

struct Record {
  std::mutex m;
  std::vector<Item> items;

  std::vector<Item> snapshot() {
    std::lock_guard<std::mutex> lock(m);
    return items;
  }
  size_t buffers() {
    std::lock_guard<std::mutex> lock(m);
    return static_cast<size_t>(std::count_if(
        items.begin(), items.end(), [](const Item& i) { return i.kind == Item::kBuffer; }));
  }
  bool has(Item::Kind k) {
    std::lock_guard<std::mutex> lock(m);
    return std::any_of(items.begin(), items.end(), [k](const Item& i) { return i.kind == k; });
  }
};

GstPadProbeReturn onDemuxPad(GstPad* /*pad*/, GstPadProbeInfo* info, gpointer data) {
  auto* r = static_cast<Record*>(data);
  Item it;
  it.kind = Item::kBuffer;
  if (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) {
    GstBuffer* b = GST_PAD_PROBE_INFO_BUFFER(info);
    it.pts = GST_BUFFER_PTS(b);
    const auto metas = eg::bufferMetas(b);
    if (!metas.empty()) {
      it.haveMeta = true;
      it.frameNumber = metas[0]->results->frameNumber;
      for (const eg::Object& o : metas[0]->results->objects) {
        const auto& d = o.detection;
        it.boxes.insert(it.boxes.end(), {d.box.x1, d.box.y1, d.box.x2, d.box.y2, d.score,
                                         static_cast<float>(d.classId)});
      }
    }
  } else {
    GstEvent* e = GST_PAD_PROBE_INFO_EVENT(info);
    switch (GST_EVENT_TYPE(e)) {
      case GST_EVENT_FLUSH_START:
        it.kind = Item::kFlushStart;
        break;
      case GST_EVENT_FLUSH_STOP:
        it.kind = Item::kFlushStop;
        break;
      case GST_EVENT_SEGMENT:
        it.kind = Item::kSegment;
        gst_event_copy_segment(e, &it.segment);
        break;
      case GST_EVENT_EOS:
        it.kind = Item::kEos;
        break;
      default:
        return GST_PAD_PROBE_OK;
    }
  }
  std::lock_guard<std::mutex> lock(r->m);
  r->items.push_back(std::move(it));
  return GST_PAD_PROBE_OK;
}

// `streams` sources (or the given ones) into edgemux name=m ! edgeinfer ! edgedemux name=d,
// each d.src_<i> ! queue ! fakesink; a Record per demux pad.
class SeekPipeline {
 public:
  // `sync`: the sinks play in real time (10 frames/s), so a seek comes before the streams end.
  // `inferProps`: more properties of edgeinfer (e.g. in-flight=3).
  SeekPipeline(const TinyDetector& model, const std::vector<std::string>& sources,
               const std::string& muxProps = "", bool sync = false,
               const std::string& inferProps = "") {
    std::string d = "edgemux name=m " + muxProps + " ! edgeinfer name=ei config=" + model.config +
                    " backend=cpu engine-cache-dir=" + model.dir.path() + " " + inferProps +
                    " ! edgedemux name=d";
    for (size_t i = 0; i < sources.size(); ++i) {
      const std::string n = std::to_string(i);
      d += " " + sources[i] + " ! m.sink_" + n + " d.src_" + n + " ! queue ! fakesink name=out" +
           n + " async=false sync=" + (sync ? "true" : "false");
    }
    GError* err = nullptr;
    pipeline_ = gst_parse_launch(d.c_str(), &err);
    EXPECT_TRUE(pipeline_ && !err) << d << ": " << (err ? err->message : "");
    if (err) g_error_free(err);
    records_.resize(sources.size());
    for (size_t i = 0; i < sources.size(); ++i) {
      records_[i] = std::make_unique<Record>();
      GstPad* pad = demuxPad(static_cast<unsigned>(i));
      if (!pad) continue;
      gst_pad_add_probe(pad,
                        static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER |
                                                     GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM |
                                                     GST_PAD_PROBE_TYPE_EVENT_FLUSH),
                        onDemuxPad, records_[i].get(), nullptr);
      gst_object_unref(pad);
    }
  }
  ~SeekPipeline() {
    if (!pipeline_) return;
    if (!hung_) gst_element_set_state(pipeline_, GST_STATE_NULL);
    if (!hung_) gst_object_unref(pipeline_);
  }
  SeekPipeline(const SeekPipeline&) = delete;
  SeekPipeline& operator=(const SeekPipeline&) = delete;

  GstElement* get() const { return pipeline_; }
  Record& record(unsigned i) { return *records_.at(i); }
  GstPad* demuxPad(unsigned i) const {
    GstElement* demux = gst_bin_get_by_name(GST_BIN(pipeline_), "d");
    if (!demux) return nullptr;
    GstPad* pad = gst_element_get_static_pad(demux, ("src_" + std::to_string(i)).c_str());
    gst_object_unref(demux);
    return pad;
  }
  GstElement* element(const std::string& name) const {
    return gst_bin_get_by_name(GST_BIN(pipeline_), name.c_str());
  }

  // Runs `f` with a deadline; a call that does not return marks the pipeline hung (it is then
  // left alone, not stopped: stopping it would hang too).
  bool within(std::chrono::milliseconds limit, const std::function<bool()>& f, bool* result) {
    auto task = std::make_shared<std::packaged_task<bool()>>(f);
    std::future<bool> done = task->get_future();
    std::thread([task] { (*task)(); }).detach();
    if (done.wait_for(limit) != std::future_status::ready) {
      hung_ = true;
      return false;
    }
    *result = done.get();
    return true;
  }
  // A flushing seek on the whole pipeline, under a deadline; false (and a failure) if it hangs.
  bool seek(GstClockTime start, GstClockTime stop, bool* accepted = nullptr) {
    bool ok = false;
    GstElement* p = pipeline_;
    const bool returned = within(
        5s,
        [p, start, stop] {
          return gst_element_seek(
                     p, 1.0, GST_FORMAT_TIME,
                     static_cast<GstSeekFlags>(GST_SEEK_FLAG_FLUSH | GST_SEEK_FLAG_ACCURATE),
                     GST_SEEK_TYPE_SET, static_cast<gint64>(start),
                     stop == GST_CLOCK_TIME_NONE ? GST_SEEK_TYPE_NONE : GST_SEEK_TYPE_SET,
                     stop == GST_CLOCK_TIME_NONE ? -1 : static_cast<gint64>(stop)) != FALSE;
        },
        &ok);
    EXPECT_TRUE(returned) << "the seek did not return within 5 s";
    if (accepted) *accepted = ok;
    return returned;
  }
  // Waits for EOS or an error on the bus; "eos", "error: ...", or "timeout".
  std::string waitEnd(std::chrono::milliseconds limit) {
    GstBus* bus = gst_element_get_bus(pipeline_);
    GstMessage* msg = gst_bus_timed_pop_filtered(
        bus, static_cast<GstClockTime>(std::chrono::nanoseconds(limit).count()),
        static_cast<GstMessageType>(GST_MESSAGE_EOS | GST_MESSAGE_ERROR));
    gst_object_unref(bus);
    if (!msg) return "timeout";
    std::string out = "eos";
    if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ERROR) {
      GError* e = nullptr;
      gst_message_parse_error(msg, &e, nullptr);
      out = std::string("error: ") + (e ? e->message : "?");
      if (e) g_error_free(e);
    }
    gst_message_unref(msg);
    return out;
  }
  // Waits until every stream in `streams` has at least `n` buffers.
  bool waitBuffers(const std::vector<unsigned>& streams, size_t n,
                   std::chrono::milliseconds limit = 5s) {
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      bool all = true;
      for (unsigned i : streams) all = all && records_[i]->buffers() >= n;
      if (all) return true;
      std::this_thread::sleep_for(5ms);
    }
    return false;
  }
  bool hung() const { return hung_; }

 private:
  GstElement* pipeline_ = nullptr;
  std::vector<std::unique_ptr<Record>> records_;
  bool hung_ = false;
};

std::string testSrc(unsigned i, const std::string& extra = "") {
  // Two different moving pictures, sizes and formats (the detector's boxes follow the pixels).
  static const char* const kSrc[] = {
      "videotestsrc name=src0 pattern=ball %s ! "
      "video/x-raw,format=RGBA,width=64,height=48,framerate=10/1 ! queue name=q0",
      "videotestsrc name=src1 pattern=ball motion=sweep %s ! "
      "video/x-raw,format=NV12,width=80,height=60,framerate=10/1 ! queue name=q1",
      "videotestsrc name=src2 pattern=ball motion=hsweep %s ! "
      "video/x-raw,format=I420,width=48,height=32,framerate=10/1 ! queue name=q2"};
  std::string s = kSrc[i];
  s.replace(s.find("%s"), 2, extra);
  return s;
}

// The items after the last flush-stop (all of them when there was none).
std::vector<Item> afterLastFlush(const std::vector<Item>& items) {
  auto it = std::find_if(items.rbegin(), items.rend(),
                         [](const Item& i) { return i.kind == Item::kFlushStop; });
  return std::vector<Item>(it.base(), items.end());
}

std::vector<Item> buffersOf(const std::vector<Item>& items) {
  std::vector<Item> out;
  for (const Item& i : items)
    if (i.kind == Item::kBuffer) out.push_back(i);
  return out;
}

// After the last flush: the stream's segment from `start`, then exactly the frames from `start`
// to `stop` (10 frames/s) with results, then EOS; flush-start came before flush-stop.
void expectRestartedAt(const std::vector<Item>& all, unsigned stream, GstClockTime start,
                       GstClockTime stop) {
  SCOPED_TRACE("stream " + std::to_string(stream));
  auto fs = std::find_if(all.begin(), all.end(),
                         [](const Item& i) { return i.kind == Item::kFlushStart; });
  auto fe = std::find_if(all.begin(), all.end(),
                         [](const Item& i) { return i.kind == Item::kFlushStop; });
  ASSERT_NE(fs, all.end()) << "no flush-start on the demux pad";
  ASSERT_NE(fe, all.end()) << "no flush-stop on the demux pad";
  EXPECT_LT(fs - all.begin(), fe - all.begin()) << "flush-start after flush-stop";
  const std::vector<Item> after = afterLastFlush(all);
  ASSERT_FALSE(after.empty());
  ASSERT_EQ(after.front().kind, Item::kSegment) << "the new segment first";
  const GstSegment& seg = after.front().segment;
  EXPECT_EQ(seg.format, GST_FORMAT_TIME);
  EXPECT_EQ(seg.start, start) << "the stream's own segment (from the seek position)";
  EXPECT_EQ(seg.base, 0u) << "a flushing seek restarts running time";
  const std::vector<Item> frames = buffersOf(after);
  ASSERT_EQ(frames.size(), (stop - start) / kFrame);
  for (size_t k = 0; k < frames.size(); ++k) {
    EXPECT_EQ(frames[k].pts, start + k * kFrame) << "frame " << k << " after the seek";
    EXPECT_TRUE(frames[k].haveMeta) << "frame " << k;
  }
  EXPECT_EQ(after.back().kind, Item::kEos) << "EOS last";
  for (size_t k = 1; k < after.size(); ++k)
    EXPECT_NE(after[k].kind, Item::kSegment) << "one segment after the flush";
}

// The results of the frames after the last flush of two runs, frame by frame.
void expectSameResults(const std::vector<Item>& got, const std::vector<Item>& fresh,
                       unsigned stream) {
  const std::vector<Item> a = buffersOf(afterLastFlush(got)), b = buffersOf(fresh);
  ASSERT_FALSE(a.empty()) << "stream " << stream;
  for (size_t k = 0; k < a.size(); ++k) {
    EXPECT_EQ(a[k].frameNumber, k)
        << "stream " << stream << " frame " << k << ": frame numbers restart after a flush";
    EXPECT_FALSE(a[k].boxes.empty()) << "the tiny detector finds a box in every frame";
    auto same = std::find_if(b.begin(), b.end(), [&](const Item& i) { return i.pts == a[k].pts; });
    ASSERT_NE(same, b.end()) << "stream " << stream << ": the fresh run has no frame at "
                             << a[k].pts;
    EXPECT_EQ(a[k].boxes, same->boxes) << "stream " << stream << " frame " << k;
  }
}

// A fresh run up to `stop`, no seek (its frames from `start` are the reference).
std::vector<std::vector<Item>> freshRun(const TinyDetector& model, size_t streams,
                                        GstClockTime start, GstClockTime stop) {
  std::vector<std::string> srcs;
  for (unsigned i = 0; i < streams; ++i) srcs.push_back(testSrc(i));
  SeekPipeline p(model, srcs);
  std::vector<std::vector<Item>> out(streams);
  if (!p.get()) return out;
  for (unsigned i = 0; i < streams; ++i) {
    GstElement* src = p.element("src" + std::to_string(i));
    g_object_set(src, "num-buffers", static_cast<gint>(stop / kFrame), nullptr);
    gst_object_unref(src);
  }
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  EXPECT_EQ(p.waitEnd(10s), "eos");
  for (unsigned i = 0; i < streams; ++i) out[i] = p.record(i).snapshot();
  return out;
}

// ---- Whole-pipeline seeks ----------------------------------------------------------------------

void midStreamSeek(const std::string& inferProps) {
  TinyDetector model;
  SeekPipeline p(model, {testSrc(0), testSrc(1)}, "", false, inferProps);
  ASSERT_NE(p.get(), nullptr);
  // First [0, 3 s), then, after a few frames, [1 s, 2 s).
  gst_element_set_state(p.get(), GST_STATE_PAUSED);
  gst_element_get_state(p.get(), nullptr, nullptr, 5 * GST_SECOND);
  ASSERT_TRUE(p.seek(0, 3 * GST_SECOND));
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  ASSERT_TRUE(p.waitBuffers({0, 1}, 4)) << "no frames before the seek";
  bool accepted = false;
  ASSERT_TRUE(p.seek(GST_SECOND, 2 * GST_SECOND, &accepted));
  EXPECT_TRUE(accepted);
  ASSERT_EQ(p.waitEnd(10s), "eos");
  const auto fresh = freshRun(model, 2, GST_SECOND, 2 * GST_SECOND);
  for (unsigned i = 0; i < 2; ++i) {
    const std::vector<Item> items = p.record(i).snapshot();
    expectRestartedAt(items, i, GST_SECOND, 2 * GST_SECOND);
    expectSameResults(items, fresh[i], i);
  }
}

TEST(EdgeMuxSeek, MidStreamSeekRestartsEveryStreamWithItsResults) {
  midStreamSeek("");
}

// The same with batches in flight in edgeinfer when the seek's flush comes: they are dropped.
TEST(EdgeMuxSeek, MidStreamSeekWithBatchesInFlight) {
  midStreamSeek("in-flight=3");
}

TEST(EdgeMuxSeek, ThreeSeeksInARowThenToTheEnd) {
  TinyDetector model;
  SeekPipeline p(model, {testSrc(0), testSrc(1), testSrc(2)});
  ASSERT_NE(p.get(), nullptr);
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  ASSERT_TRUE(p.waitBuffers({0, 1, 2}, 2));
  ASSERT_TRUE(p.seek(4 * GST_SECOND, GST_CLOCK_TIME_NONE));
  ASSERT_TRUE(p.seek(2 * GST_SECOND, GST_CLOCK_TIME_NONE));
  ASSERT_TRUE(p.seek(500 * GST_MSECOND, 1500 * GST_MSECOND));
  ASSERT_EQ(p.waitEnd(10s), "eos");
  for (unsigned i = 0; i < 3; ++i)
    expectRestartedAt(p.record(i).snapshot(), i, 500 * GST_MSECOND, 1500 * GST_MSECOND);

  // To the end: an empty segment, EOS on every pad and no frame after the flush but, at most,
  // the one at the position (videotestsrc makes it).
  bool accepted = false;
  ASSERT_TRUE(p.seek(1500 * GST_MSECOND, 1500 * GST_MSECOND, &accepted));
  EXPECT_TRUE(accepted);
  ASSERT_EQ(p.waitEnd(10s), "eos");
  for (unsigned i = 0; i < 3; ++i) {
    const std::vector<Item> after = afterLastFlush(p.record(i).snapshot());
    const std::vector<Item> left = buffersOf(after);
    EXPECT_LE(left.size(), 1u) << "stream " << i;
    for (const Item& f : left) EXPECT_EQ(f.pts, 1500 * GST_MSECOND) << "stream " << i;
    ASSERT_FALSE(after.empty()) << "stream " << i;
    EXPECT_EQ(after.back().kind, Item::kEos) << "stream " << i;
  }
}

// A partial batch (frames of stream 1 waiting for stream 0) when the seek comes: the waiting
// frames are dropped, never pushed after the flush.
TEST(EdgeMuxSeek, PartialBatchIsDroppedBySeek) {
  TinyDetector model;
  SeekPipeline p(model, {testSrc(0, "is-live=true"), testSrc(1)});
  ASSERT_NE(p.get(), nullptr);
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  // Stream 0 is live (10 frames/s): stream 1's frames wait in edgemux for it.
  ASSERT_TRUE(p.waitBuffers({0, 1}, 2));
  bool accepted = false;
  ASSERT_TRUE(p.seek(3 * GST_SECOND, GST_CLOCK_TIME_NONE, &accepted));
  ASSERT_TRUE(p.waitBuffers({1}, 6));
  const std::vector<Item> after = buffersOf(afterLastFlush(p.record(1).snapshot()));
  ASSERT_FALSE(after.empty());
  for (const Item& i : after) EXPECT_GE(i.pts, 3 * GST_SECOND) << "a pre-seek frame of stream 1";
  gst_element_send_event(p.get(), gst_event_new_eos());
  EXPECT_EQ(p.waitEnd(5s), "eos");
}

// ---- Stalled, one-stream and live cases -------------------------------------------------------

// Stream 1 is a live appsrc that never delivers: batches are pushed on the timeout. A seek on the
// pipeline must not wait for it, and stream 0 goes on.
TEST(EdgeMuxSeek, SeekWithAStalledLiveStream_n) {
  TinyDetector model;
  SeekPipeline p(model,
                 {testSrc(0, "is-live=true"),
                  "appsrc name=src1 is-live=true format=time "
                  "caps=video/x-raw,format=RGBA,width=32,height=32,framerate=10/1 ! queue"},
                 "timeout=50000000");
  ASSERT_NE(p.get(), nullptr);
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  ASSERT_TRUE(p.waitBuffers({0}, 3)) << "the stalled stream holds up stream 0";
  ASSERT_TRUE(p.seek(0, GST_CLOCK_TIME_NONE));
  const size_t before = p.record(0).buffers();
  EXPECT_TRUE(p.waitBuffers({0}, before + 5, 3s)) << "stream 0 stalled after the seek";
  EXPECT_TRUE(p.record(0).has(Item::kFlushStop)) << "the flush went through to stream 0";
  EXPECT_EQ(p.record(1).buffers(), 0u);
  gst_element_send_event(p.get(), gst_event_new_eos());
  EXPECT_EQ(p.waitEnd(5s), "eos");
}

// Live sources: whatever the seek returns, nothing hangs, frames keep coming, EOS still ends it.
TEST(EdgeMuxSeek, SeekOnLiveSources_n) {
  TinyDetector model;
  SeekPipeline p(model, {testSrc(0, "is-live=true"), testSrc(1, "is-live=true")});
  ASSERT_NE(p.get(), nullptr);
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  ASSERT_TRUE(p.waitBuffers({0, 1}, 2));
  // (Seeked ahead, a live videotestsrc waits on the clock until that time: back to 0 instead.)
  ASSERT_TRUE(p.seek(0, GST_CLOCK_TIME_NONE));
  const size_t before0 = p.record(0).buffers(), before1 = p.record(1).buffers();
  EXPECT_TRUE(p.waitBuffers({0}, before0 + 3, 3s));
  EXPECT_TRUE(p.waitBuffers({1}, before1 + 3, 3s));
  gst_element_send_event(p.get(), gst_event_new_eos());
  EXPECT_EQ(p.waitEnd(5s), "eos");
}

// A seek sent to one stream's source only: that stream restarts at the position (its waiting
// frames dropped), the other stream gets every frame, in order, with no flush.
TEST(EdgeMuxSeek, SeekOnOneStreamOnly_n) {
  TinyDetector model;
  SeekPipeline p(model, {testSrc(0), testSrc(1)}, "", true);
  ASSERT_NE(p.get(), nullptr);
  gst_element_set_state(p.get(), GST_STATE_PAUSED);
  gst_element_get_state(p.get(), nullptr, nullptr, 5 * GST_SECOND);
  ASSERT_TRUE(p.seek(0, 2 * GST_SECOND));
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  ASSERT_TRUE(p.waitBuffers({0, 1}, 3));
  GstElement* src1 = p.element("src1");
  ASSERT_NE(src1, nullptr);
  bool ok = false;
  const bool returned = p.within(
      5s,
      [src1] {
        return gst_element_seek(src1, 1.0, GST_FORMAT_TIME, GST_SEEK_FLAG_FLUSH, GST_SEEK_TYPE_SET,
                                static_cast<gint64>(GST_SECOND), GST_SEEK_TYPE_SET,
                                static_cast<gint64>(2 * GST_SECOND)) != FALSE;
      },
      &ok);
  gst_object_unref(src1);
  ASSERT_TRUE(returned) << "a seek on one source hung";
  EXPECT_TRUE(ok);
  ASSERT_EQ(p.waitEnd(10s), "eos");

  const std::vector<Item> s0 = p.record(0).snapshot();
  EXPECT_EQ(std::count_if(s0.begin(), s0.end(),
                          [](const Item& i) { return i.kind == Item::kFlushStart; }),
            1)
      << "stream 0 is flushed by the pipeline's seek only, not by stream 1's";
  // (Frames prerolled before the pipeline's seek may come out before its flush: counted from
  // the flush.)
  const std::vector<Item> f0 = buffersOf(afterLastFlush(s0));
  ASSERT_EQ(f0.size(), 20u) << "stream 0 lost frames";
  for (size_t k = 0; k < f0.size(); ++k) {
    EXPECT_EQ(f0[k].pts, k * kFrame);
    EXPECT_EQ(f0[k].frameNumber, k);
  }
  EXPECT_EQ(s0.back().kind, Item::kEos);
  // Stream 1: after the segment of the seek, frames 1.0 s .. 1.9 s only.
  const std::vector<Item> s1 = p.record(1).snapshot();
  auto seg = std::find_if(s1.begin(), s1.end(), [](const Item& i) {
    return i.kind == Item::kSegment && i.segment.start == GST_SECOND;
  });
  ASSERT_NE(seg, s1.end()) << "stream 1's new segment did not reach its pad";
  const std::vector<Item> f1 = buffersOf(std::vector<Item>(seg, s1.end()));
  ASSERT_EQ(f1.size(), 10u);
  for (size_t k = 0; k < f1.size(); ++k) EXPECT_EQ(f1[k].pts, GST_SECOND + k * kFrame);
  // Between the pipeline's seek (its flush-stop) and stream 1's own seek, from 0, in order.
  auto seekStop =
      std::find_if(s1.begin(), seg, [](const Item& i) { return i.kind == Item::kFlushStop; });
  ASSERT_NE(seekStop, seg) << "stream 1 did not get the pipeline's seek";
  const std::vector<Item> before = buffersOf(std::vector<Item>(seekStop, seg));
  for (size_t k = 0; k < before.size(); ++k)
    EXPECT_EQ(before[k].pts, k * kFrame) << "stream 1 before its seek";
  EXPECT_EQ(s1.back().kind, Item::kEos);
}

// ---- A flush into one stream, without a seek ---------------------------------------------------

// Flush-start and flush-stop sent into one stream's branch (to its source, which forwards them
// downstream and goes on from where it was), as an application or an element upstream does;
// false (and a failure) when it hangs.
bool flushStream(SeekPipeline& p, unsigned stream) {
  GstElement* src = p.element("src" + std::to_string(stream));
  EXPECT_NE(src, nullptr);
  if (!src) return false;
  bool ok = false;
  const bool returned = p.within(
      5s,
      [src] {
        const bool a = gst_element_send_event(src, gst_event_new_flush_start()) != FALSE;
        const bool b = gst_element_send_event(src, gst_event_new_flush_stop(TRUE)) != FALSE;
        return a && b;
      },
      &ok);
  gst_object_unref(src);
  EXPECT_TRUE(returned) << "a flush of stream " << stream << " did not return within 5 s";
  return returned;
}

size_t countOf(const std::vector<Item>& items, Item::Kind k) {
  return static_cast<size_t>(
      std::count_if(items.begin(), items.end(), [k](const Item& i) { return i.kind == k; }));
}

// Every frame of a stream that was not flushed, after the pipeline's seek, in order, 100 ms
// apart from 0, numbered from 0, no flush but the `seekFlushes` of the pipeline's seeks, EOS
// last.
void expectUntouched(const std::vector<Item>& items, unsigned stream, size_t frames,
                     size_t seekFlushes = 1) {
  SCOPED_TRACE("stream " + std::to_string(stream) + " (not flushed)");
  EXPECT_EQ(countOf(items, Item::kFlushStart), seekFlushes) << "another stream's flush reached it";
  EXPECT_EQ(countOf(items, Item::kFlushStop), seekFlushes);
  // (Frames prerolled before the seek may come out before its flush: counted from the flush.)
  const std::vector<Item> f = buffersOf(afterLastFlush(items));
  ASSERT_EQ(f.size(), frames) << "it lost frames";
  for (size_t k = 0; k < f.size(); ++k) {
    EXPECT_EQ(f[k].pts, k * kFrame);
    EXPECT_TRUE(f[k].haveMeta);
    EXPECT_EQ(f[k].frameNumber, k);
  }
  ASSERT_FALSE(items.empty());
  EXPECT_EQ(items.back().kind, Item::kEos);
}

// The flushed stream: before the flush, frames in order; on its pad flush-start, flush-stop,
// then its segment before any frame; after it, frames going on in order (none from before the
// flush), with results numbered from 0 again; EOS last. `flushes`: the pipeline's seek's and
// the stream's own.
void expectFlushedOnce(const std::vector<Item>& items, unsigned stream, size_t flushes = 2) {
  SCOPED_TRACE("stream " + std::to_string(stream) + " (flushed)");
  EXPECT_EQ(countOf(items, Item::kFlushStart), flushes);
  EXPECT_EQ(countOf(items, Item::kFlushStop), flushes);
  const std::vector<Item> after = afterLastFlush(items);
  ASSERT_FALSE(after.empty()) << "nothing after the flush";
  EXPECT_EQ(after.front().kind, Item::kSegment) << "the stream's segment first after a flush";
  const std::vector<Item> before = buffersOf(
      std::vector<Item>(items.begin(), items.end() - static_cast<std::ptrdiff_t>(after.size())));
  const std::vector<Item> f = buffersOf(after);
  ASSERT_FALSE(f.empty()) << "the stream did not resume after the flush";
  for (size_t k = 0; k < f.size(); ++k) {
    EXPECT_TRUE(f[k].haveMeta);
    EXPECT_EQ(f[k].frameNumber, k) << "frame numbers restart after a flush";
    if (k > 0) {
      EXPECT_GT(f[k].pts, f[k - 1].pts) << "frame " << k << " after the flush";
    }
  }
  if (!before.empty()) {
    EXPECT_GT(f.front().pts, before.back().pts) << "it went back in time";
  }
  EXPECT_EQ(after.back().kind, Item::kEos) << "EOS last";
}

// Plays `p` (sources of 2 s at 10 frames/s, sinks in real time) until each stream has 3 frames.
void playTwoSeconds(SeekPipeline& p, const std::vector<unsigned>& streams) {
  gst_element_set_state(p.get(), GST_STATE_PAUSED);
  gst_element_get_state(p.get(), nullptr, nullptr, 5 * GST_SECOND);
  ASSERT_TRUE(p.seek(0, 2 * GST_SECOND));
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  ASSERT_TRUE(p.waitBuffers(streams, 3));
}

// The issue: a flush (no seek) into one running stream of a non-live pipeline stalled it.
TEST(EdgeMuxFlush, FlushOfOneStreamLeavesTheOthersAlone) {
  TinyDetector model;
  SeekPipeline p(model, {testSrc(0), testSrc(1)}, "", true);
  ASSERT_NE(p.get(), nullptr);
  playTwoSeconds(p, {0, 1});
  ASSERT_TRUE(flushStream(p, 1));
  ASSERT_EQ(p.waitEnd(10s), "eos") << "the pipeline stalled after a flush of stream 1";
  expectUntouched(p.record(0).snapshot(), 0, 20);
  expectFlushedOnce(p.record(1).snapshot(), 1);
}

// Flushed twice in a row (the second before any frame of the first came out): one stream still
// resumes once, the other is untouched.
void flushTwiceInARow(const std::string& inferProps) {
  TinyDetector model;
  SeekPipeline p(model, {testSrc(0), testSrc(1)}, "", true, inferProps);
  ASSERT_NE(p.get(), nullptr);
  playTwoSeconds(p, {0, 1});
  ASSERT_TRUE(flushStream(p, 0));
  ASSERT_TRUE(flushStream(p, 0));
  ASSERT_EQ(p.waitEnd(10s), "eos") << "the pipeline stalled after two flushes of stream 0";
  const std::vector<Item> s0 = p.record(0).snapshot();
  const size_t n = countOf(s0, Item::kFlushStart);
  EXPECT_LE(n, 3u) << "a flush-start for each flush at most (the seek's and two)";
  EXPECT_GE(n, 2u) << "the seek's and at least one";
  expectFlushedOnce(s0, 0, n);
  expectUntouched(p.record(1).snapshot(), 1, 20);
}

TEST(EdgeMuxFlush, FlushTwiceInARow_n) {
  flushTwiceInARow("");
}

// (edgeinfer waits for the batches in flight before it restarts the flushed stream's count.)
TEST(EdgeMuxFlush, FlushTwiceInARowWithBatchesInFlight_n) {
  flushTwiceInARow("in-flight=2");
}

// A flush of a stream that has ended: its source sends EOS again, the other stream goes on, the
// pipeline ends.
TEST(EdgeMuxFlush, FlushOfAnEndedStream_n) {
  TinyDetector model;
  SeekPipeline p(model, {testSrc(0), testSrc(1, "num-buffers=5")}, "", true);
  ASSERT_NE(p.get(), nullptr);
  playTwoSeconds(p, {0});
  const auto deadline = Clock::now() + 5s;
  while (!p.record(1).has(Item::kEos) && Clock::now() < deadline) std::this_thread::sleep_for(5ms);
  ASSERT_TRUE(p.record(1).has(Item::kEos)) << "stream 1 did not end";
  ASSERT_TRUE(flushStream(p, 1));
  ASSERT_EQ(p.waitEnd(10s), "eos") << "the pipeline stalled after a flush of an ended stream";
  expectUntouched(p.record(0).snapshot(), 0, 20);
  const std::vector<Item> s1 = p.record(1).snapshot();
  EXPECT_EQ(countOf(s1, Item::kFlushStop), 2u) << "the seek's and the stream's own";
  const std::vector<Item> after = afterLastFlush(s1);
  EXPECT_TRUE(buffersOf(after).empty()) << "an ended stream has no frames to give after a flush";
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.back().kind, Item::kEos) << "it ends again";
}

// Live sources: a flush of one stream; both go on, EOS ends them.
TEST(EdgeMuxFlush, FlushOfALiveStream_n) {
  TinyDetector model;
  SeekPipeline p(model, {testSrc(0, "is-live=true"), testSrc(1, "is-live=true")});
  ASSERT_NE(p.get(), nullptr);
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  ASSERT_TRUE(p.waitBuffers({0, 1}, 3));
  ASSERT_TRUE(flushStream(p, 1));
  const size_t before0 = p.record(0).buffers(), before1 = p.record(1).buffers();
  EXPECT_TRUE(p.waitBuffers({0}, before0 + 5, 3s)) << "stream 0 stalled";
  EXPECT_TRUE(p.waitBuffers({1}, before1 + 5, 3s)) << "stream 1 did not resume";
  EXPECT_EQ(countOf(p.record(0).snapshot(), Item::kFlushStart), 0u);
  EXPECT_EQ(countOf(p.record(1).snapshot(), Item::kFlushStop), 1u);
  gst_element_send_event(p.get(), gst_event_new_eos());
  EXPECT_EQ(p.waitEnd(5s), "eos");
}

// Stream 1 is a live appsrc that never delivers: stream 0's frames wait for the timeout when
// stream 0 is flushed; its waiting frame is dropped, it goes on.
TEST(EdgeMuxFlush, FlushWhileABatchWaitsForTheTimeout_n) {
  TinyDetector model;
  SeekPipeline p(model,
                 {testSrc(0, "is-live=true"),
                  "appsrc name=src1 is-live=true format=time "
                  "caps=video/x-raw,format=RGBA,width=32,height=32,framerate=10/1 ! queue"},
                 "timeout=200000000");
  ASSERT_NE(p.get(), nullptr);
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  ASSERT_TRUE(p.waitBuffers({0}, 3)) << "the stalled stream holds up stream 0";
  ASSERT_TRUE(flushStream(p, 0));
  const size_t before = p.record(0).buffers();
  EXPECT_TRUE(p.waitBuffers({0}, before + 5, 5s)) << "stream 0 stalled after its flush";
  const std::vector<Item> s0 = p.record(0).snapshot();
  EXPECT_EQ(countOf(s0, Item::kFlushStop), 1u);
  const std::vector<Item> after = buffersOf(afterLastFlush(s0));
  for (size_t k = 1; k < after.size(); ++k) EXPECT_GT(after[k].pts, after[k - 1].pts);
  EXPECT_EQ(p.record(1).buffers(), 0u);
  gst_element_send_event(p.get(), gst_event_new_eos());
  EXPECT_EQ(p.waitEnd(5s), "eos");
}

// Flush-start and flush-stop sent straight to edgemux's sink_1, not into the branch upstream:
// while sink_1 is flushing, the queue before it gets GST_FLOW_FLUSHING for the frame it pushes
// and pauses its task (as queue and basesrc do), and nothing restarts it, since the flush never
// went through it. Stream 1 never delivers again, and a non-live edgemux waits for it: the
// pipeline stalls (GST_DEBUG=aggregator:5: "Pad is flushing, dropping buffer" on m:sink_1, then
// no frame on it). The same holds for any element whose sink pad is flushed this way
// (videotestsrc ! queue ! fakesink with the flush sent to fakesink's pad stops too); a flush
// must enter a branch upstream (FlushOfOneStreamLeavesTheOthersAlone). Disabled: it shows what
// edgemux cannot repair (the upstream element's paused task is not its own).
TEST(EdgeMuxFlush, DISABLED_FlushSentStraightToAMuxPad_n) {
  TinyDetector model;
  SeekPipeline p(model, {testSrc(0), testSrc(1)}, "", true);
  ASSERT_NE(p.get(), nullptr);
  playTwoSeconds(p, {0, 1});
  GstElement* mux = p.element("m");
  ASSERT_NE(mux, nullptr);
  GstPad* pad = gst_element_get_static_pad(mux, "sink_1");
  gst_object_unref(mux);
  ASSERT_NE(pad, nullptr);
  bool ok = false;
  const bool returned = p.within(
      5s,
      [pad] {
        const bool a = gst_pad_send_event(pad, gst_event_new_flush_start()) != FALSE;
        const bool b = gst_pad_send_event(pad, gst_event_new_flush_stop(TRUE)) != FALSE;
        return a && b;
      },
      &ok);
  gst_object_unref(pad);
  ASSERT_TRUE(returned);
  ASSERT_EQ(p.waitEnd(10s), "eos") << "the pipeline stalled";
}

// ---- Queries through edgedemux's pads ----------------------------------------------------------

TEST(EdgeMuxSeek, QueriesOnDemuxPadsAnswerForTheirStream) {
  TinyDetector model;
  SeekPipeline p(model, {testSrc(0), testSrc(1)});
  ASSERT_NE(p.get(), nullptr);
  gst_element_set_state(p.get(), GST_STATE_PAUSED);
  gst_element_get_state(p.get(), nullptr, nullptr, 5 * GST_SECOND);
  ASSERT_TRUE(p.seek(GST_SECOND, 3 * GST_SECOND));
  gst_element_set_state(p.get(), GST_STATE_PLAYING);
  ASSERT_EQ(p.waitEnd(10s), "eos");
  for (unsigned i = 0; i < 2; ++i) {
    SCOPED_TRACE("src_" + std::to_string(i));
    GstPad* pad = p.demuxPad(i);
    ASSERT_NE(pad, nullptr);
    GstQuery* q = gst_query_new_segment(GST_FORMAT_TIME);
    ASSERT_TRUE(gst_pad_query(pad, q)) << "segment query";
    gint64 start = -1, stop = -1;
    gst_query_parse_segment(q, nullptr, nullptr, &start, &stop);
    EXPECT_EQ(start, static_cast<gint64>(GST_SECOND)) << "the stream's segment";
    EXPECT_EQ(stop, static_cast<gint64>(3 * GST_SECOND));
    gst_query_unref(q);
    gint64 pos = -1;
    ASSERT_TRUE(gst_pad_query_position(pad, GST_FORMAT_TIME, &pos)) << "position query";
    EXPECT_EQ(pos, static_cast<gint64>(3 * GST_SECOND - kFrame)) << "the last frame's time";
    gst_object_unref(pad);
  }
}

TEST(EdgeMuxSeek, QueriesOnAnIdleDemuxPad_n) {
  GstElement* d = gst_element_factory_make("edgedemux", nullptr);
  ASSERT_NE(d, nullptr);
  GstPad* pad = gst_element_request_pad_simple(d, "src_0");
  ASSERT_NE(pad, nullptr);
  gint64 pos = 0;
  EXPECT_FALSE(gst_pad_query_position(pad, GST_FORMAT_TIME, &pos)) << "no frame yet";
  GstQuery* q = gst_query_new_segment(GST_FORMAT_TIME);
  EXPECT_FALSE(gst_pad_query(pad, q)) << "no segment yet";
  gst_query_unref(q);
  gint64 dur = 0;
  EXPECT_FALSE(gst_pad_query_duration(pad, GST_FORMAT_TIME, &dur)) << "nothing upstream";
  gst_element_release_request_pad(d, pad);
  gst_object_unref(pad);
  gst_object_unref(d);
}

}  // namespace
