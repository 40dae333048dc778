// edgeinfer with several buffers in flight (in-flight > 1: worker threads run the engine, an
// output thread attaches the results and pushes, plugins/gst/inflight.h), through GstHarness on
// real photos: buffers leave in the order they came, each with the results the element gives
// with in-flight=1 (the same frames, frame numbers and carried results); EOS and other serialized
// events wait for the buffers in flight; a flush drops them; a teardown with buffers in flight
// neither hangs nor leaks; an error among buffers in flight stops the stream.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "gst_test_util.h"
#include "test_model.h"
#include "tiny_models.h"

namespace {

using namespace eitest;
namespace eg = edgeinfer::gst;

std::string props(const std::string& config, const std::string& extra) {
  return "config=" + config + " backend=cpu engine-cache-dir=" + engineCacheDir() + " " + extra;
}

// The frames of these tests: a portrait, black frames and the portrait half blacked out, in
// NV12 (odd pitches) so that frames differ in what BlazeFace finds.
std::vector<Frame> mixedFrames(size_t count) {
  const Image face = photo("kphotoalbum/anne_helene.ppm");
  Image half = face;
  for (int y = 0; y < half.height; ++y)
    for (int x = 0; x < half.width / 2; ++x)
      for (int c = 0; c < 3; ++c) half.rgb[(static_cast<size_t>(y) * half.width + x) * 3 + c] = 0;
  Image black = face;
  std::fill(black.rgb.begin(), black.rgb.end(), 0);
  const Image* kinds[] = {&face, &black, &half, &face, &half};
  std::vector<Frame> out;
  for (size_t i = 0; i < count; ++i)
    out.push_back(makeFrame(*kinds[i % 5], GST_VIDEO_FORMAT_NV12, true));
  return out;
}

struct Got {
  GstClockTime pts;
  uint64_t frameNumber;
  bool inferred;
  std::vector<eg::Object> objects;
};

// Pushes every frame (pts 40 ms apart) without pulling in between, then pulls them all.
std::vector<Got> pushAllThenPull(const std::string& elementProps,
                                 const std::vector<Frame>& frames) {
  std::vector<Got> got;
  GstHarness* h = harnessFor("edgeinfer", elementProps);
  EXPECT_NE(h, nullptr);
  if (!h) return got;
  gst_harness_set_src_caps(h, frames.front().caps());
  for (size_t i = 0; i < frames.size(); ++i)
    EXPECT_EQ(gst_harness_push(h, frames[i].buffer(i * 40 * GST_MSECOND)), GST_FLOW_OK) << i;
  for (size_t i = 0; i < frames.size(); ++i) {
    GstBuffer* out = gst_harness_pull(h);
    EXPECT_NE(out, nullptr) << "frame " << i << " never came out";
    if (!out) break;
    const EdgeInferMeta* m = eg::findMeta(out, 1);
    EXPECT_NE(m, nullptr) << "frame " << i;
    if (m)
      got.push_back({GST_BUFFER_PTS(out), m->results->frameNumber, m->results->inferred,
                     m->results->objects});
    gst_buffer_unref(out);
  }
  gst_harness_teardown(h);
  return got;
}

void expectSameOutput(const std::vector<Got>& got, const std::vector<Got>& want,
                      const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].pts, i * 40 * GST_MSECOND) << what << ": frame " << i << " out of order";
    EXPECT_EQ(got[i].frameNumber, want[i].frameNumber) << what << ": frame " << i;
    EXPECT_EQ(got[i].inferred, want[i].inferred) << what << ": frame " << i;
    ASSERT_EQ(got[i].objects.size(), want[i].objects.size()) << what << ": frame " << i;
    for (size_t k = 0; k < got[i].objects.size(); ++k) {
      const auto& a = got[i].objects[k].detection;
      const auto& b = want[i].objects[k].detection;
      EXPECT_EQ(a.score, b.score) << what << ": frame " << i;
      EXPECT_EQ(a.box.x1, b.box.x1) << what << ": frame " << i;
      EXPECT_EQ(a.box.y2, b.box.y2) << what << ": frame " << i;
      EXPECT_EQ(a.keypoints.size(), b.keypoints.size()) << what << ": frame " << i;
    }
  }
}

// 25 frames pushed before any is pulled: with 2 and 4 in flight, every buffer leaves in order
// with exactly the results (and, with interval=2, the carried ones) of in-flight=1.
TEST(EdgeInferInFlight, BuffersLeaveInOrderWithTheResultsOfOneInFlight) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const std::vector<Frame> frames = mixedFrames(25);
  for (const char* interval : {"interval=1", "interval=2"}) {
    const std::string base = props(blazeFace("model.json"), interval);
    const std::vector<Got> want = pushAllThenPull(base + " in-flight=1", frames);
    ASSERT_EQ(want.size(), frames.size());
    size_t withFaces = 0, without = 0;
    for (const Got& g : want) (g.objects.empty() ? without : withFaces)++;
    EXPECT_GT(withFaces, 0u);
    EXPECT_GT(without, 0u) << "frames should differ in what is found (or the test is moot)";
    for (const char* n : {"in-flight=2", "in-flight=4"})
      expectSameOutput(pushAllThenPull(base + " " + n, frames), want,
                       std::string(interval) + " " + n);
  }
}

// The streaming thread goes on while a buffer is being pushed: downstream holds the first
// buffer until the second has been accepted by edgeinfer (with in-flight=1 that push would have
// to wait for the first: the probe gives up after 10 s and the test fails instead of hanging).
struct Gate {
  std::mutex m;
  std::condition_variable cv;
  bool open = false;
  bool timedOut = false;
};
GstPadProbeReturn holdFirstBuffer(GstPad*, GstPadProbeInfo*, gpointer data) {
  auto* g = static_cast<Gate*>(data);
  std::unique_lock<std::mutex> lock(g->m);
  if (!g->cv.wait_for(lock, std::chrono::seconds(10), [&] { return g->open; })) g->timedOut = true;
  return GST_PAD_PROBE_REMOVE;
}

TEST(EdgeInferInFlight, StreamingThreadGoesOnWhileABufferIsPushed) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const std::vector<Frame> frames = mixedFrames(2);
  GstHarness* h = harnessFor("edgeinfer", props(blazeFace("model.json"), "in-flight=2"));
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps(h, frames.front().caps());
  Gate gate;
  gst_pad_add_probe(h->sinkpad, GST_PAD_PROBE_TYPE_BUFFER, holdFirstBuffer, &gate, nullptr);
  ASSERT_EQ(gst_harness_push(h, frames[0].buffer(0)), GST_FLOW_OK);
  ASSERT_EQ(gst_harness_push(h, frames[1].buffer(40 * GST_MSECOND)), GST_FLOW_OK);
  {
    std::lock_guard<std::mutex> lock(gate.m);
    gate.open = true;
  }
  gate.cv.notify_all();
  for (int i = 0; i < 2; ++i) {
    GstBuffer* out = gst_harness_pull(h);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(GST_BUFFER_PTS(out), static_cast<GstClockTime>(i) * 40 * GST_MSECOND);
    gst_buffer_unref(out);
  }
  EXPECT_FALSE(gate.timedOut) << "the second push waited for the first buffer's push";
  gst_harness_teardown(h);
}

// EOS is pushed downstream only after every buffer in flight: when pushing EOS returns, all the
// buffers are in the harness's queue already, and EOS after them.
TEST(EdgeInferInFlight, EosWaitsForTheBuffersInFlight) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const std::vector<Frame> frames = mixedFrames(6);
  GstHarness* h = harnessFor("edgeinfer", props(blazeFace("model.json"), "in-flight=3"));
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps(h, frames.front().caps());
  for (size_t i = 0; i < frames.size(); ++i)
    ASSERT_EQ(gst_harness_push(h, frames[i].buffer(i * 40 * GST_MSECOND)), GST_FLOW_OK);
  ASSERT_TRUE(gst_harness_push_event(h, gst_event_new_eos()));
  EXPECT_EQ(gst_harness_buffers_in_queue(h), frames.size())
      << "EOS was handled before the buffers in flight were out";
  for (size_t i = 0; i < frames.size(); ++i) {
    GstBuffer* out = gst_harness_try_pull(h);
    ASSERT_NE(out, nullptr);
    EXPECT_EQ(GST_BUFFER_PTS(out), i * 40 * GST_MSECOND);
    EXPECT_NE(eg::findMeta(out, 1), nullptr);
    gst_buffer_unref(out);
  }
  // The EOS event came last (after stream-start, caps and segment).
  GstEvent* ev = nullptr;
  GstEvent* last = nullptr;
  while ((ev = gst_harness_try_pull_event(h))) {
    if (last) gst_event_unref(last);
    last = ev;
  }
  ASSERT_NE(last, nullptr);
  EXPECT_EQ(GST_EVENT_TYPE(last), GST_EVENT_EOS);
  gst_event_unref(last);
  gst_harness_teardown(h);
}

// After a flush: a segment, three frames of the first kind and EOS; they come out numbered
// from 0 again (and nothing from before the flush comes after them).
void expectFreshStartAfterFlush(GstHarness* h, const Frame& frame) {
  GstSegment seg;
  gst_segment_init(&seg, GST_FORMAT_TIME);
  ASSERT_TRUE(gst_harness_push_event(h, gst_event_new_segment(&seg)));
  for (size_t i = 0; i < 3; ++i)
    ASSERT_EQ(gst_harness_push(h, frame.buffer((100 + i) * GST_MSECOND)), GST_FLOW_OK);
  ASSERT_TRUE(gst_harness_push_event(h, gst_event_new_eos()));
  ASSERT_EQ(gst_harness_buffers_in_queue(h), 3u)
      << "buffers from before the flush came out after it, or frames were lost";
  for (uint64_t i = 0; i < 3; ++i) {
    GstBuffer* out = gst_harness_pull(h);
    EXPECT_EQ(GST_BUFFER_PTS(out), (100 + i) * GST_MSECOND);
    const EdgeInferMeta* m = eg::findMeta(out, 1);
    ASSERT_NE(m, nullptr);
    EXPECT_EQ(m->results->frameNumber, i) << "frame numbers start again after a flush";
    EXPECT_FALSE(m->results->objects.empty());
    gst_buffer_unref(out);
  }
}

// A flush with buffers in flight: downstream holds the first buffer (so the others are surely
// in flight) until flush-start has been handled; then none of the others comes out, before or
// after flush-stop, and the frames that follow start from frame number 0 again.
TEST(EdgeInferInFlight, FlushDropsTheBuffersInFlight) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const std::vector<Frame> frames = mixedFrames(5);  // in-flight + 1: all accepted while held
  GstHarness* h = harnessFor("edgeinfer", props(blazeFace("model.json"), "in-flight=4"));
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps(h, frames.front().caps());
  Gate gate;
  gst_pad_add_probe(h->sinkpad, GST_PAD_PROBE_TYPE_BUFFER, holdFirstBuffer, &gate, nullptr);
  for (size_t i = 0; i < frames.size(); ++i)
    ASSERT_EQ(gst_harness_push(h, frames[i].buffer(i * 40 * GST_MSECOND)), GST_FLOW_OK);
  ASSERT_TRUE(gst_harness_push_event(h, gst_event_new_flush_start()));
  {
    std::lock_guard<std::mutex> lock(gate.m);
    gate.open = true;
  }
  gate.cv.notify_all();
  ASSERT_TRUE(gst_harness_push_event(h, gst_event_new_flush_stop(TRUE)));
  EXPECT_FALSE(gate.timedOut);
  // At most the held first buffer came out.
  const guint before = gst_harness_buffers_in_queue(h);
  EXPECT_LE(before, 1u) << "buffers in flight were pushed after flush-start";
  for (guint i = 0; i < before; ++i) gst_buffer_unref(gst_harness_pull(h));
  expectFreshStartAfterFlush(h, frames[0]);
  gst_harness_teardown(h);
}

// A flush sent back up from downstream while edgeinfer's output thread pushes (as a seek from
// an appsink callback or a pad probe does): flush-stop reaches edgeinfer on its own output
// thread, which must finish (drop) what is in flight itself instead of waiting for itself.
struct FlushFromDownstream {
  GstPad* inferSink = nullptr;
  bool sent = false;
};
GstPadProbeReturn flushFromDownstream(GstPad*, GstPadProbeInfo*, gpointer data) {
  auto* f = static_cast<FlushFromDownstream*>(data);
  if (f->sent) return GST_PAD_PROBE_OK;
  f->sent = true;
  gst_pad_send_event(f->inferSink, gst_event_new_flush_start());
  gst_pad_send_event(f->inferSink, gst_event_new_flush_stop(TRUE));
  return GST_PAD_PROBE_OK;
}

TEST(EdgeInferInFlight, FlushSentFromTheOutputThreadDoesNotHang_n) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const std::vector<Frame> frames = mixedFrames(6);
  GstHarness* h = harnessFor("edgeinfer", props(blazeFace("model.json"), "in-flight=3"));
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps(h, frames.front().caps());
  FlushFromDownstream f;
  f.inferSink = gst_element_get_static_pad(h->element, "sink");
  gst_pad_add_probe(h->sinkpad, GST_PAD_PROBE_TYPE_BUFFER, flushFromDownstream, &f, nullptr);
  for (size_t i = 0; i < frames.size(); ++i) {
    // Pushes during the flush are refused (flushing); the others are accepted.
    const GstFlowReturn ret = gst_harness_push(h, frames[i].buffer(i * 40 * GST_MSECOND));
    EXPECT_TRUE(ret == GST_FLOW_OK || ret == GST_FLOW_FLUSHING) << gst_flow_get_name(ret);
  }
  // Wait (at most 20 s) until the flush has been sent and everything before it is out.
  GstBuffer* first = gst_harness_pull(h);
  ASSERT_NE(first, nullptr) << "nothing came out: the output thread hung in the flush";
  EXPECT_TRUE(f.sent);
  gst_buffer_unref(first);
  // The buffers the streaming thread got in after the flush may still come; take them all.
  GstSegment seg;
  gst_segment_init(&seg, GST_FORMAT_TIME);
  ASSERT_TRUE(gst_harness_push_event(h, gst_event_new_segment(&seg)));
  ASSERT_TRUE(gst_harness_push_event(h, gst_event_new_eos()));  // drains
  while (GstBuffer* b = gst_harness_try_pull(h)) gst_buffer_unref(b);
  gst_object_unref(f.inferSink);
  gst_harness_teardown(h);
}

// A detector and a secondary classifier on its boxes, each with buffers in flight: the classes
// every face gets equal those of the chain with one in flight.
TEST(EdgeInferInFlight, SecondaryChainGivesTheResultsOfOneInFlight) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const TinyClassifier classifier;
  const std::string& cls = classifier.config;
  const Frame group = makeFrame(photo("faces/2008_002506.ppm"), GST_VIDEO_FORMAT_I420, true);
  const Frame face = makeFrame(photo("faces/2009_004587.ppm"), GST_VIDEO_FORMAT_I420, false);
  auto run = [&](const char* n) {
    std::vector<std::vector<eg::Object>> out;
    GstHarness* h = gst_harness_new_parse(
        ("edgeinfer " + props(blazeFace("model_back.json"), std::string("unique-id=1 ") + n) +
         " ! edgeinfer " + props(cls, std::string("unique-id=2 infer-on-id=1 batch-size=2 ") + n))
            .c_str());
    for (int i = 0; i < 6; ++i) {
      const Frame& f = i % 2 ? face : group;
      // Both photos have their own size: caps before each.
      gst_harness_set_src_caps(h, f.caps());
      EXPECT_EQ(gst_harness_push(h, f.buffer(i * GST_SECOND)), GST_FLOW_OK);
    }
    for (int i = 0; i < 6; ++i) {
      GstBuffer* b = gst_harness_pull(h);
      EXPECT_NE(b, nullptr);
      if (!b) break;
      const EdgeInferMeta* meta = eg::findMeta(b, 1);
      EXPECT_NE(meta, nullptr);
      if (meta) out.push_back(meta->results->objects);
      gst_buffer_unref(b);
    }
    gst_harness_teardown(h);
    return out;
  };
  const auto want = run("in-flight=1");
  const auto got = run("in-flight=3");
  ASSERT_EQ(want.size(), 6u);
  ASSERT_EQ(got.size(), want.size());
  size_t classified = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << "frame " << i;
    for (size_t k = 0; k < got[i].size(); ++k) {
      ASSERT_EQ(got[i][k].classifications.size(), 1u) << "frame " << i << " face " << k;
      ASSERT_EQ(want[i][k].classifications.size(), 1u);
      const auto& a = got[i][k].classifications[0].classes;
      const auto& b = want[i][k].classifications[0].classes;
      ASSERT_EQ(a.size(), b.size());
      for (size_t c = 0; c < a.size(); ++c) {
        EXPECT_EQ(a[c].classId, b[c].classId);
        EXPECT_EQ(a[c].label, b[c].label);
        EXPECT_EQ(a[c].score, b[c].score);
      }
      ++classified;
    }
  }
  EXPECT_GE(classified, 6u) << "the photos' faces should be classified (or the test is moot)";
}

// Teardown (PLAYING -> NULL) with buffers in flight and none pulled: no hang, and (in the
// sanitizer build) no leak of the buffers held.
TEST(EdgeInferInFlight, TeardownWithBuffersInFlight_n) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const std::vector<Frame> frames = mixedFrames(5);
  for (int round = 0; round < 3; ++round) {
    GstHarness* h = harnessFor("edgeinfer", props(blazeFace("model.json"), "in-flight=3"));
    ASSERT_NE(h, nullptr);
    gst_harness_set_src_caps(h, frames.front().caps());
    for (size_t i = 0; i < frames.size(); ++i)
      ASSERT_EQ(gst_harness_push(h, frames[i].buffer(i * 40 * GST_MSECOND)), GST_FLOW_OK);
    gst_harness_teardown(h);
  }
}

// A buffer that cannot be mapped among buffers in flight: the push fails with an error naming
// the problem, the buffers before it still come out, and nothing hangs.
TEST(EdgeInferInFlight, BadBufferAmongBuffersInFlight_n) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  GstBus* bus = gst_bus_new();
  GstHarness* h = harnessFor("edgeinfer", props(blazeFace("model.json"), "in-flight=2"), bus);
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps_str(h, "video/x-raw,format=RGBA,width=64,height=48,framerate=30/1");
  for (int i = 0; i < 3; ++i) {
    GstBuffer* good = gst_buffer_new_allocate(nullptr, 64 * 48 * 4, nullptr);
    gst_buffer_memset(good, 0, 0x40, 64 * 48 * 4);
    ASSERT_EQ(gst_harness_push(h, good), GST_FLOW_OK);
  }
  EXPECT_EQ(gst_harness_push(h, gst_buffer_new_allocate(nullptr, 64 * 47 * 4, nullptr)),
            GST_FLOW_ERROR);
  GstMessage* m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  ASSERT_NE(m, nullptr);
  GError* err = nullptr;
  gst_message_parse_error(m, &err, nullptr);
  EXPECT_NE(std::string(err->message).find("cannot map the buffer as a 64x48 RGBA frame"),
            std::string::npos)
      << err->message;
  g_error_free(err);
  gst_message_unref(m);
  for (int i = 0; i < 3; ++i) {
    GstBuffer* out = gst_harness_pull(h);
    ASSERT_NE(out, nullptr) << "good buffer " << i << " was lost";
    EXPECT_NE(eg::findMeta(out, 1), nullptr);
    gst_buffer_unref(out);
  }
  gst_harness_teardown(h);
  gst_object_unref(bus);
}

}  // namespace
