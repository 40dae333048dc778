// Multi-stream batching: edgemux ! edgeinfer ! edgedemux on real photos (three appsrc streams of
// different sizes and formats; the real BlazeFace model, CPU backend). Every stream gets all its
// frames, in order, with its caps, timestamps and pixels unchanged, and each frame's
// EdgeInferMeta equals what VisionModel::infer returns on that frame alone. Then interval and
// the secondary classifier per stream, element messages with stream ids, a dynamic-batch
// model, batch-size smaller than the streams, a stream ending early, a stalled live stream,
// edgemetasink on batches; and every way it can fail (the _n tests): each posts an error naming
// the problem and the pipeline stops, under a deadline. GstLeaks.MuxDemux runs a few thousand
// frames for LeakSanitizer (ASan build).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "edgeinfer/gst/batch_meta.h"
#include "edgeinfer/vision/vision_model.h"
#include "gst_test_util.h"
#include "test_model.h"
#include "tiny_models.h"

namespace {

using namespace eitest;
namespace vision = edgeinfer::vision;
namespace eg = edgeinfer::gst;
using edgeinfer::test::TempDir;
using edgeinfer::test::TestModel;
using Clock = std::chrono::steady_clock;

// ---- Oracle and comparisons ----------------------------------------------------------------

vision::VisionModel& oracle(const std::string& config, int batch = 0) {
  static std::map<std::string, std::unique_ptr<vision::VisionModel>> models;
  auto& m = models[config + "#" + std::to_string(batch)];
  if (!m) {
    vision::VisionModelOptions o;
    o.backend = edgeinfer::Backend::kCpu;
    o.engineCacheDir = engineCacheDir();
    if (batch > 0) o.builder.dynamicDimDefault = batch;
    auto loaded = vision::VisionModel::load(config, o);
    EXPECT_TRUE(loaded.ok()) << loaded.status().toString();
    if (loaded.ok()) m = std::move(*loaded);
  }
  return *m;
}

// The photo with its left `part` (0..1) blacked out: a different frame of the same stream.
Image blackLeft(Image img, double part) {
  const int w = static_cast<int>(img.width * part);
  for (int y = 0; y < img.height; ++y)
    std::fill_n(img.rgb.begin() + static_cast<std::ptrdiff_t>(y) * img.width * 3, 3 * w, 0);
  return img;
}

std::string cpu(const std::string& config, const std::string& extra = "") {
  return "config=" + config + " backend=cpu engine-cache-dir=" + engineCacheDir() + " " + extra;
}

// ---- Small generated models -------------------------------------------------------------------

using Classifier = TinyClassifier;

// ---- Streams through a pipeline ----------------------------------------------------------------

struct Stream {
  std::vector<Frame> frames;
  std::vector<GstClockTime> pts;
};

// What came out: per stream the samples (buffer + caps + segment), and the order in which
// frames and EOS left edgedemux, and the streams of every batch edgemux pushed.
struct Collected {
  std::mutex m;
  std::map<unsigned, std::vector<GstSample*>> samples;
  std::map<unsigned, std::vector<Clock::time_point>> arrivals;
  std::vector<std::pair<unsigned, std::string>> order;  // (stream, "frame" | "eos")
  std::vector<std::vector<unsigned>> batches;
  std::vector<std::vector<unsigned>> ended;
  std::vector<GstMessage*> messages;  // element messages
  ~Collected() {
    for (auto& [id, v] : samples)
      for (GstSample* s : v) gst_sample_unref(s);
    for (GstMessage* msg : messages) gst_message_unref(msg);
  }
};

struct Tap {
  Collected* c;
  unsigned stream;
};

GstFlowReturn onSample(GstElement* sink, gpointer data) {
  auto* t = static_cast<Tap*>(data);
  GstSample* s = nullptr;
  g_signal_emit_by_name(sink, "pull-sample", &s);
  if (!s) return GST_FLOW_ERROR;
  std::lock_guard<std::mutex> lock(t->c->m);
  t->c->samples[t->stream].push_back(s);
  t->c->arrivals[t->stream].push_back(Clock::now());
  return GST_FLOW_OK;
}

// On edgedemux's src pads (its streaming thread): the order frames and EOS leave it in.
GstPadProbeReturn onDemuxOut(GstPad* /*pad*/, GstPadProbeInfo* info, gpointer data) {
  auto* t = static_cast<Tap*>(data);
  const bool buffer = (GST_PAD_PROBE_INFO_TYPE(info) & GST_PAD_PROBE_TYPE_BUFFER) != 0;
  if (buffer || GST_EVENT_TYPE(GST_PAD_PROBE_INFO_EVENT(info)) == GST_EVENT_EOS) {
    std::lock_guard<std::mutex> lock(t->c->m);
    t->c->order.emplace_back(t->stream, buffer ? "frame" : "eos");
  }
  return GST_PAD_PROBE_OK;
}

GstPadProbeReturn onBatch(GstPad* /*pad*/, GstPadProbeInfo* info, gpointer data) {
  auto* c = static_cast<Collected*>(data);
  if (const EdgeInferBatchMeta* m = eg::findBatchMeta(GST_PAD_PROBE_INFO_BUFFER(info))) {
    std::vector<unsigned> ids;
    for (const eg::BatchFrame& f : m->batch->frames) ids.push_back(f.streamId);
    std::lock_guard<std::mutex> lock(c->m);
    c->batches.push_back(ids);
    c->ended.push_back(m->batch->endedStreams);
  }
  return GST_PAD_PROBE_OK;
}

GstBusSyncReply onMessage(GstBus* /*bus*/, GstMessage* msg, gpointer data) {
  if (GST_MESSAGE_TYPE(msg) == GST_MESSAGE_ELEMENT) {
    auto* c = static_cast<Collected*>(data);
    std::lock_guard<std::mutex> lock(c->m);
    c->messages.push_back(gst_message_ref(msg));
  }
  return GST_BUS_PASS;
}

GstElement* byName(GstElement* pipeline, const std::string& name) {
  GstElement* e = gst_bin_get_by_name(GST_BIN(pipeline), name.c_str());
  EXPECT_NE(e, nullptr) << name;
  return e;
}

// appsrc name=src<i> ! m.sink_<i> for every stream, `middle` after edgemux name=m, and
// edgedemux name=d's d.src_<i> ! appsink name=out<i> (for the streams in `sinks`).
std::string multiPipeline(size_t streams, const std::string& mux, const std::string& middle,
                          const std::vector<unsigned>& sinks, const std::string& appsrc = "") {
  std::string d = "edgemux name=m " + mux + " ! " + middle + " edgedemux name=d ";
  for (size_t i = 0; i < streams; ++i)
    d += " appsrc name=src" + std::to_string(i) + " format=time " + appsrc + " ! m.sink_" +
         std::to_string(i);
  for (unsigned i : sinks)
    d += " d.src_" + std::to_string(i) + " ! queue ! appsink name=out" + std::to_string(i) +
         " sync=false emit-signals=true";
  return d;
}

// Connects the taps (appsinks, EOS probes, batch probe, element messages).
void tapPipeline(GstElement* pipeline, Collected& c, std::vector<std::unique_ptr<Tap>>& taps,
                 const std::vector<unsigned>& sinks) {
  for (unsigned i : sinks) {
    taps.push_back(std::make_unique<Tap>(Tap{&c, i}));
    GstElement* sink = byName(pipeline, "out" + std::to_string(i));
    g_signal_connect(sink, "new-sample", G_CALLBACK(onSample), taps.back().get());
    gst_object_unref(sink);
    GstElement* demux = byName(pipeline, "d");
    GstPad* pad = gst_element_get_static_pad(demux, ("src_" + std::to_string(i)).c_str());
    EXPECT_NE(pad, nullptr);
    if (pad) {
      gst_pad_add_probe(pad,
                        static_cast<GstPadProbeType>(GST_PAD_PROBE_TYPE_BUFFER |
                                                     GST_PAD_PROBE_TYPE_EVENT_DOWNSTREAM),
                        onDemuxOut, taps.back().get(), nullptr);
      gst_object_unref(pad);
    }
    gst_object_unref(demux);
  }
  GstElement* mux = byName(pipeline, "m");
  GstPad* src = gst_element_get_static_pad(mux, "src");
  gst_pad_add_probe(src, GST_PAD_PROBE_TYPE_BUFFER, onBatch, &c, nullptr);
  gst_object_unref(src);
  gst_object_unref(mux);
  GstBus* bus = gst_element_get_bus(pipeline);
  gst_bus_set_sync_handler(bus, onMessage, &c, nullptr);
  gst_object_unref(bus);
}

void pushFrames(GstElement* pipeline, unsigned i, const Stream& s, bool eos = true) {
  GstElement* src = byName(pipeline, "src" + std::to_string(i));
  GstCaps* caps = s.frames.front().caps();
  g_object_set(src, "caps", caps, nullptr);
  gst_caps_unref(caps);
  GstFlowReturn ret = GST_FLOW_OK;
  for (size_t k = 0; k < s.frames.size(); ++k) {
    GstBuffer* b = s.frames[k].buffer(s.pts[k]);
    g_signal_emit_by_name(src, "push-buffer", b, &ret);
    gst_buffer_unref(b);
  }
  if (eos) g_signal_emit_by_name(src, "end-of-stream", &ret);
  gst_object_unref(src);
}

// Runs the streams (non-live, everything queued before the pipeline plays) to EOS.
Outcome runStreams(const std::string& description, const std::vector<Stream>& streams, Collected& c,
                   const std::vector<unsigned>& sinks) {
  std::vector<std::unique_ptr<Tap>> taps;
  return runPipeline(description, std::chrono::seconds(120), [&](GstElement* pipeline) {
    tapPipeline(pipeline, c, taps, sinks);
    for (size_t i = 0; i < streams.size(); ++i)
      pushFrames(pipeline, static_cast<unsigned>(i), streams[i]);
  });
}

std::vector<unsigned> allStreams(size_t n) {
  std::vector<unsigned> v;
  for (size_t i = 0; i < n; ++i) v.push_back(static_cast<unsigned>(i));
  return v;
}

// Three streams of real photos: a portrait (RGBA, 400x600, 4 frames), a group photo with odd
// pitches and plane gaps (NV12, 499x373, 5 frames from 1 s), another group photo (I420,
// 400x500, 3 frames at 10 fps). Odd frames have part of the photo blacked out.
std::vector<Stream> photoStreams() {
  struct Spec {
    const char* photo;
    int w, h;
    GstVideoFormat format;
    bool padded;
    int count;
    GstClockTime start, step;
  };
  const Spec specs[] = {
      {"kphotoalbum/anne_helene.ppm", 0, 0, GST_VIDEO_FORMAT_RGBA, false, 4, 0, 33 * GST_MSECOND},
      {"faces/2008_002506.ppm", 499, 373, GST_VIDEO_FORMAT_NV12, true, 5, GST_SECOND,
       40 * GST_MSECOND},
      {"faces/2009_004587.ppm", 0, 0, GST_VIDEO_FORMAT_I420, false, 3, 0, 100 * GST_MSECOND},
  };
  std::vector<Stream> out;
  for (const Spec& sp : specs) {
    Image img = photo(sp.photo);
    if (sp.w) img = cropImage(img, sp.w, sp.h);
    Stream s;
    for (int k = 0; k < sp.count; ++k) {
      s.frames.push_back(makeFrame(k % 2 ? blackLeft(img, 0.3 * k) : img, sp.format, sp.padded));
      s.pts.push_back(sp.start + static_cast<GstClockTime>(k) * sp.step);
    }
    out.push_back(std::move(s));
  }
  return out;
}

// The stream's samples are its frames, in order, with its caps, PTS and pixels.
void expectStreamIntact(const Collected& c, unsigned i, const Stream& s) {
  ASSERT_EQ(c.samples.count(i), 1u) << "stream " << i << " received nothing";
  const auto& got = c.samples.at(i);
  ASSERT_EQ(got.size(), s.frames.size()) << "stream " << i;
  GstCaps* want = s.frames.front().caps();
  for (size_t k = 0; k < got.size(); ++k) {
    GstBuffer* b = gst_sample_get_buffer(got[k]);
    EXPECT_EQ(GST_BUFFER_PTS(b), s.pts[k]) << "stream " << i << " frame " << k;
    EXPECT_TRUE(gst_caps_is_equal(gst_sample_get_caps(got[k]), want))
        << "stream " << i << " frame " << k;
    const GstSegment* seg = gst_sample_get_segment(got[k]);
    ASSERT_NE(seg, nullptr);
    EXPECT_EQ(gst_segment_to_running_time(seg, GST_FORMAT_TIME, GST_BUFFER_PTS(b)), s.pts[k])
        << "the stream's own segment (appsrc's: running time = PTS)";
    EXPECT_TRUE(readBack(b, s.frames[k]).bytes == s.frames[k].bytes)
        << "stream " << i << " frame " << k << ": pixels changed";
  }
  gst_caps_unref(want);
}

// ---- Positive tests ---------------------------------------------------------------------------

// inFlight: edgeinfer's in-flight property (several batches in flight: the same results).
void everyStreamGetsItsFrames(const std::string& inFlight) {
  SCOPED_TRACE(inFlight);
  const std::vector<Stream> streams = photoStreams();
  const std::string config = blazeFace("model_back.json");
  Collected c;
  const Outcome o = runStreams(
      multiPipeline(3, "", "edgeinfer name=ei " + cpu(config, "batch-size=3 " + inFlight) + " !",
                    allStreams(3)),
      streams, c, allStreams(3));
  ASSERT_TRUE(o.eos) << describe(o);
  ASSERT_FALSE(o.error) << describe(o);
  size_t withFaces = 0;
  for (unsigned i = 0; i < 3; ++i) {
    expectStreamIntact(c, i, streams[i]);
    if (::testing::Test::HasFatalFailure()) return;
    for (size_t k = 0; k < streams[i].frames.size(); ++k) {
      GstBuffer* b = gst_sample_get_buffer(c.samples[i][k]);
      const auto metas = eg::bufferMetas(b);
      ASSERT_EQ(metas.size(), 1u) << "stream " << i << " frame " << k;
      const eg::Results& r = *metas[0]->results;
      EXPECT_EQ(r.frameNumber, k) << "frame numbers count each stream's frames";
      EXPECT_TRUE(r.inferred);
      EXPECT_EQ(r.width, GST_VIDEO_INFO_WIDTH(&streams[i].frames[k].info));
      EXPECT_EQ(r.height, GST_VIDEO_INFO_HEIGHT(&streams[i].frames[k].info));
      auto want = oracle(config).infer({streams[i].frames[k].view()});
      ASSERT_TRUE(want.ok()) << want.status().toString();
      expectSameDetections(r.objects, (*want)[0].detections,
                           "stream " + std::to_string(i) + " frame " + std::to_string(k));
      withFaces += !r.objects.empty();
    }
  }
  EXPECT_GE(withFaces, 6u) << "most frames should show faces (or the comparison is moot)";
  // One frame of every running stream per batch: 3, 3, 3, then 2 (stream 2 ended), then 1.
  const std::vector<std::vector<unsigned>> batches = {{0, 1, 2}, {0, 1, 2}, {0, 1, 2}, {0, 1}, {1}};
  EXPECT_EQ(c.batches, batches);
}

TEST(MultiStream, EveryStreamGetsItsFramesWithTheSdksResults) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  everyStreamGetsItsFrames("in-flight=1");
}

TEST(MultiStream, EveryStreamGetsItsFramesWithSeveralBatchesInFlight) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  everyStreamGetsItsFrames("in-flight=3");
}

TEST(MultiStream, MessagesCarryTheStreamId) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const std::vector<Stream> streams = photoStreams();
  Collected c;
  const Outcome o = runStreams(
      multiPipeline(3, "",
                    "edgeinfer " + cpu(blazeFace("model_back.json"), "post-messages=true") + " !",
                    allStreams(3)),
      streams, c, allStreams(3));
  ASSERT_TRUE(o.eos) << describe(o);
  std::map<unsigned, std::vector<std::pair<guint64, guint64>>> seen;  // (frame-number, pts)
  for (GstMessage* msg : c.messages) {
    const GstStructure* s = gst_message_get_structure(msg);
    if (!gst_structure_has_name(s, "edgeinfer-results")) continue;
    guint stream = 99;
    guint64 number = 0, pts = 0;
    ASSERT_TRUE(gst_structure_get_uint(s, "stream-id", &stream)) << gst_structure_to_string(s);
    ASSERT_TRUE(gst_structure_get_uint64(s, "frame-number", &number));
    ASSERT_TRUE(gst_structure_get_uint64(s, "pts", &pts));
    seen[stream].emplace_back(number, pts);
  }
  ASSERT_EQ(seen.size(), 3u);
  for (unsigned i = 0; i < 3; ++i) {
    ASSERT_EQ(seen[i].size(), streams[i].frames.size()) << "stream " << i;
    for (size_t k = 0; k < seen[i].size(); ++k) {
      EXPECT_EQ(seen[i][k].first, k);
      EXPECT_EQ(seen[i][k].second, streams[i].pts[k]);
    }
  }
}

// interval=2 counts each stream's frames: frames 0, 2, 4 of each stream are inferred, the others
// carry their own stream's last results (not another stream's).
// (With several batches in flight too: the carried results are those of the stream's last
// inferred frame, whose batch may still be running when the next arrives.)
TEST(MultiStream, IntervalIsPerStream) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  for (const std::string inFlight : {"in-flight=1", "in-flight=2"}) {
    SCOPED_TRACE(inFlight);
    const std::vector<Stream> streams = photoStreams();
    const std::string config = blazeFace("model_back.json");
    Collected c;
    const Outcome o =
        runStreams(multiPipeline(3, "", "edgeinfer " + cpu(config, "interval=2 " + inFlight) + " !",
                                 allStreams(3)),
                   streams, c, allStreams(3));
    ASSERT_TRUE(o.eos) << describe(o);
    for (unsigned i = 0; i < 3; ++i) {
      ASSERT_EQ(c.samples[i].size(), streams[i].frames.size());
      for (size_t k = 0; k < streams[i].frames.size(); ++k) {
        const EdgeInferMeta* m = eg::findMeta(gst_sample_get_buffer(c.samples[i][k]), 1);
        ASSERT_NE(m, nullptr);
        EXPECT_EQ(m->results->inferred, k % 2 == 0) << "stream " << i << " frame " << k;
        auto want = oracle(config).infer({streams[i].frames[k - k % 2].view()});
        ASSERT_TRUE(want.ok());
        expectSameDetections(m->results->objects, (*want)[0].detections,
                             "stream " + std::to_string(i) + " frame " + std::to_string(k));
      }
    }
  }
}

vision::PixelRect cropOf(const vision::Box& b, int w, int h) {
  const int x1 = std::max(0, static_cast<int>(std::floor(b.x1)));
  const int y1 = std::max(0, static_cast<int>(std::floor(b.y1)));
  const int x2 = std::min(w, static_cast<int>(std::ceil(b.x2)));
  const int y2 = std::min(h, static_cast<int>(std::ceil(b.y2)));
  return {x1, y1, x2 - x1, y2 - y1};
}

// BlazeFace then a classifier on its boxes (infer-on-id=1), both on batches: every face of
// every stream gets the classes VisionModel::infer gives on its crop.
// (And with several batches in flight in both elements.)
TEST(MultiStream, SecondaryClassifierRunsOnEveryStreamsBoxes) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  Classifier cls;
  for (const std::string inFlight : {"in-flight=1", "in-flight=3"}) {
    SCOPED_TRACE(inFlight);
    const std::vector<Stream> streams = photoStreams();
    const std::string config = blazeFace("model_back.json");
    Collected c;
    const Outcome o = runStreams(
        multiPipeline(3, "",
                      "edgeinfer " + cpu(config, "unique-id=1 " + inFlight) + " ! edgeinfer " +
                          cpu(cls.config, "unique-id=2 infer-on-id=1 batch-size=4 " + inFlight) +
                          " !",
                      allStreams(3)),
        streams, c, allStreams(3));
    ASSERT_TRUE(o.eos) << describe(o);
    size_t classified = 0;
    for (unsigned i = 0; i < 3; ++i) {
      ASSERT_EQ(c.samples[i].size(), streams[i].frames.size());
      for (size_t k = 0; k < streams[i].frames.size(); ++k) {
        const Frame& f = streams[i].frames[k];
        GstBuffer* b = gst_sample_get_buffer(c.samples[i][k]);
        ASSERT_EQ(eg::bufferMetas(b).size(), 1u);
        const EdgeInferMeta* m = eg::findMeta(b, 1);
        ASSERT_NE(m, nullptr);
        auto faces = oracle(config).infer({f.view()});
        ASSERT_TRUE(faces.ok());
        expectSameDetections(m->results->objects, (*faces)[0].detections, "detector");
        const int w = GST_VIDEO_INFO_WIDTH(&f.info), h = GST_VIDEO_INFO_HEIGHT(&f.info);
        for (size_t d = 0; d < m->results->objects.size(); ++d) {
          const eg::Object& obj = m->results->objects[d];
          ASSERT_EQ(obj.classifications.size(), 1u);
          EXPECT_EQ(obj.classifications[0].uniqueId, 2);
          auto want = oracle(cls.config, 4).infer({f.view()}, {cropOf(obj.detection.box, w, h)});
          ASSERT_TRUE(want.ok());
          const auto& got = obj.classifications[0].classes;
          ASSERT_EQ(got.size(), (*want)[0].classifications.size());
          for (size_t q = 0; q < got.size(); ++q) {
            EXPECT_EQ(got[q].classId, (*want)[0].classifications[q].classId);
            EXPECT_EQ(got[q].score, (*want)[0].classifications[q].score);
          }
          ++classified;
        }
      }
    }
    EXPECT_GE(classified, 6u) << "the comparison needs faces";
  }
}

// A model with a dynamic batch built for batch-size=3: a batch of three streams is one engine
// run, and each frame's result is still what the model gives on that frame alone.
TEST(MultiStream, DynamicBatchModelGivesEachFrameItsOwnResults) {
  TinyDetector model(-1);
  std::vector<Stream> streams(3);
  for (unsigned i = 0; i < 3; ++i)
    for (int k = 0; k < 6; ++k) {
      Image img;
      img.width = 48 + 8 * static_cast<int>(i);
      img.height = 32 + 4 * static_cast<int>(i);
      img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
      for (size_t p = 0; p < img.rgb.size(); ++p)
        img.rgb[p] = static_cast<uint8_t>((p * (5 + i) + static_cast<size_t>(k) * 31) & 255);
      streams[i].frames.push_back(
          makeFrame(img, i == 1 ? GST_VIDEO_FORMAT_NV12 : GST_VIDEO_FORMAT_BGR, i == 2));
      streams[i].pts.push_back(static_cast<GstClockTime>(k) * 50 * GST_MSECOND);
    }
  Collected c;
  const std::string ei = "config=" + model.config +
                         " backend=cpu engine-cache-dir=" + model.dir.path() + " batch-size=3 !";
  const Outcome o = runStreams(multiPipeline(3, "batch-size=3", "edgeinfer " + ei, allStreams(3)),
                               streams, c, allStreams(3));
  ASSERT_TRUE(o.eos) << describe(o);
  vision::VisionModelOptions opt;
  opt.backend = edgeinfer::Backend::kCpu;
  opt.engineCacheDir = model.dir.path();
  auto single = vision::VisionModel::load(model.config, opt);  // batch 1
  ASSERT_TRUE(single.ok()) << single.status().toString();
  size_t boxes = 0;
  for (unsigned i = 0; i < 3; ++i) {
    expectStreamIntact(c, i, streams[i]);
    if (::testing::Test::HasFatalFailure()) return;
    for (size_t k = 0; k < 6; ++k) {
      auto want = (*single)->infer({streams[i].frames[k].view()});
      ASSERT_TRUE(want.ok());
      const EdgeInferMeta* m = eg::findMeta(gst_sample_get_buffer(c.samples[i][k]), 1);
      ASSERT_NE(m, nullptr);
      expectSameDetections(m->results->objects, (*want)[0].detections,
                           "stream " + std::to_string(i) + " frame " + std::to_string(k));
      boxes += m->results->objects.size();
    }
  }
  EXPECT_GE(boxes, 18u);
  EXPECT_EQ(c.batches.size(), 6u);
  for (const auto& b : c.batches) EXPECT_EQ(b.size(), 3u);
}

// batch-size=2 with three streams: no batch holds more than two frames or two of one stream,
// no stream is left out, and every frame still arrives, in order.
TEST(MultiStream, BatchSizeSmallerThanTheStreams) {
  std::vector<Stream> streams(3);
  for (unsigned i = 0; i < 3; ++i)
    for (int k = 0; k < 5; ++k) {
      Image img;
      img.width = 32;
      img.height = 24;
      img.rgb.assign(32 * 24 * 3, static_cast<uint8_t>(40 * i + 7 * static_cast<unsigned>(k)));
      streams[i].frames.push_back(makeFrame(img, GST_VIDEO_FORMAT_RGB, false));
      streams[i].pts.push_back(static_cast<GstClockTime>(k) * GST_MSECOND);
    }
  Collected c;
  const Outcome o =
      runStreams(multiPipeline(3, "batch-size=2", "", allStreams(3)), streams, c, allStreams(3));
  ASSERT_TRUE(o.eos) << describe(o);
  for (unsigned i = 0; i < 3; ++i) expectStreamIntact(c, i, streams[i]);
  std::map<unsigned, size_t> served;
  for (const auto& b : c.batches) {
    EXPECT_LE(b.size(), 2u);
    EXPECT_GE(b.size(), 1u);
    for (size_t k = 1; k < b.size(); ++k) EXPECT_LT(b[k - 1], b[k]) << "one frame per stream";
    for (unsigned id : b) ++served[id];
  }
  EXPECT_EQ(served[0], 5u);
  EXPECT_EQ(served[1], 5u);
  EXPECT_EQ(served[2], 5u);
  // Which streams share a batch depends on which appsrc threads have a frame waiting, so the
  // count of batches does too: 8 when the three streams always keep up (7 pairs and one frame),
  // at most 10 when one stream lags behind the two others. What holds whatever the timing: a
  // batch of one frame only once a single stream is left, so every later batch is that
  // stream's, alone.
  EXPECT_GE(c.batches.size(), 8u) << "15 frames, 2 per batch";
  EXPECT_LE(c.batches.size(), 10u);
  for (size_t k = 0; k < c.batches.size(); ++k) {
    if (c.batches[k].size() != 1) continue;
    for (size_t j = k; j < c.batches.size(); ++j)
      EXPECT_EQ(c.batches[j], c.batches[k])
          << "batch " << j << ": a frame went alone while another stream still had frames";
    break;
  }
}

// Stream 0 ends after 2 frames, the others go on for 6: stream 0's EOS leaves edgedemux right
// after its last frame (not at the end), the other streams are not held up, and later batches
// no longer wait for stream 0.
TEST(MultiStream, OneStreamEndsTheOthersContinue) {
  std::vector<Stream> streams(3);
  const int counts[] = {2, 6, 6};
  for (unsigned i = 0; i < 3; ++i)
    for (int k = 0; k < counts[i]; ++k) {
      Image img;
      img.width = 40;
      img.height = 30;
      img.rgb.assign(40 * 30 * 3, static_cast<uint8_t>(50 * i + static_cast<unsigned>(k)));
      streams[i].frames.push_back(makeFrame(img, GST_VIDEO_FORMAT_I420, false));
      streams[i].pts.push_back(static_cast<GstClockTime>(k) * 40 * GST_MSECOND);
    }
  TinyDetector model;
  Collected c;
  const Outcome o =
      runStreams(multiPipeline(3, "",
                               "edgeinfer config=" + model.config +
                                   " backend=cpu engine-cache-dir=" + model.dir.path() + " !",
                               allStreams(3)),
                 streams, c, allStreams(3));
  ASSERT_TRUE(o.eos) << describe(o);
  for (unsigned i = 0; i < 3; ++i) expectStreamIntact(c, i, streams[i]);
  // The order frames and EOS left edgedemux in.
  size_t eos0 = c.order.size(), lastFrame1 = 0;
  for (size_t k = 0; k < c.order.size(); ++k) {
    if (c.order[k] == std::make_pair(0u, std::string("eos"))) eos0 = std::min(eos0, k);
    if (c.order[k] == std::make_pair(1u, std::string("frame"))) lastFrame1 = k;
  }
  ASSERT_LT(eos0, c.order.size()) << "stream 0 got no EOS";
  EXPECT_LT(eos0, lastFrame1) << "stream 0's EOS came only at the end";
  const std::vector<std::vector<unsigned>> batches = {{0, 1, 2}, {0, 1, 2}, {1, 2},
                                                      {1, 2},    {1, 2},    {1, 2}};
  EXPECT_EQ(c.batches, batches);
  ASSERT_GE(c.ended.size(), 3u);
  EXPECT_EQ(c.ended[2], std::vector<unsigned>{0}) << "the batch after stream 0's end says so";
}

// Two live streams (appsrc is-live, timestamped as they are pushed); stream 1 sends two frames
// and stalls, without EOS. Stream 0's frames keep coming out, each once edgemux's timeout has
// passed (not before: it waited for stream 1), while stream 1 is still stalled.
TEST(MultiStream, StalledLiveStreamDoesNotBlockTheOthers) {
  TinyDetector model;
  constexpr int kFrames = 12;
  constexpr auto kTimeout = std::chrono::milliseconds(150);
  Image img;
  img.width = 40;
  img.height = 30;
  img.rgb.assign(40 * 30 * 3, 90);
  const Frame frame = makeFrame(img, GST_VIDEO_FORMAT_RGBA, false);
  Collected c;
  std::vector<std::unique_ptr<Tap>> taps;
  std::vector<Clock::time_point> pushed;
  size_t arrivedWhileStalled = 0, stalledGot = 0;
  std::thread pusher;
  const std::string desc =
      multiPipeline(2, "timeout=" + std::to_string(std::chrono::nanoseconds(kTimeout).count()),
                    "edgeinfer config=" + model.config +
                        " backend=cpu engine-cache-dir=" + model.dir.path() + " !",
                    allStreams(2), "is-live=true do-timestamp=true");
  const Outcome o = runPipeline(desc, std::chrono::seconds(60), [&](GstElement* pipeline) {
    tapPipeline(pipeline, c, taps, allStreams(2));
    GstElement* src0 = byName(pipeline, "src0");
    GstElement* src1 = byName(pipeline, "src1");
    GstCaps* caps = frame.caps();
    g_object_set(src0, "caps", caps, nullptr);
    g_object_set(src1, "caps", caps, nullptr);
    gst_caps_unref(caps);
    pusher = std::thread([&, src0, src1] {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the pipeline plays
      GstFlowReturn ret = GST_FLOW_OK;
      for (int k = 0; k < kFrames; ++k) {
        pushed.push_back(Clock::now());
        GstBuffer* b = frame.buffer();
        g_signal_emit_by_name(src0, "push-buffer", b, &ret);
        if (k < 2) g_signal_emit_by_name(src1, "push-buffer", b, &ret);
        gst_buffer_unref(b);
        std::this_thread::sleep_for(std::chrono::milliseconds(30));
      }
      // Stream 1 is still stalled: wait (at most 20 s) for stream 0's frames.
      const auto deadline = Clock::now() + std::chrono::seconds(20);
      while (Clock::now() < deadline) {
        {
          std::lock_guard<std::mutex> lock(c.m);
          arrivedWhileStalled = c.samples[0].size();
          stalledGot = c.samples[1].size();
        }
        if (arrivedWhileStalled >= static_cast<size_t>(kFrames)) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      g_signal_emit_by_name(src0, "end-of-stream", &ret);
      g_signal_emit_by_name(src1, "end-of-stream", &ret);
      gst_object_unref(src0);
      gst_object_unref(src1);
    });
  });
  if (pusher.joinable()) pusher.join();
  EXPECT_TRUE(o.eos) << describe(o);
  EXPECT_FALSE(o.error) << describe(o);
  EXPECT_EQ(arrivedWhileStalled, static_cast<size_t>(kFrames))
      << "stream 0's frames did not come out while stream 1 was stalled";
  EXPECT_EQ(stalledGot, 2u);
  ASSERT_EQ(c.arrivals[0].size(), static_cast<size_t>(kFrames));
  // Frames 2.. waited for stream 1 until the timeout: never out before it, and out soon after
  // (generously: a loaded or sanitized machine is slow).
  for (int k = 2; k < kFrames; ++k) {
    const auto waited = c.arrivals[0][static_cast<size_t>(k)] - pushed[static_cast<size_t>(k)];
    EXPECT_GE(waited, kTimeout * 8 / 10) << "frame " << k << " did not wait for the timeout";
    EXPECT_LT(waited, kTimeout + std::chrono::seconds(3)) << "frame " << k;
  }
  for (size_t b = 2; b < c.batches.size(); ++b)
    EXPECT_EQ(c.batches[b], std::vector<unsigned>{0}) << "batch " << b;
}

// A stream without a src pad on edgedemux is dropped; the others come out whole.
TEST(MultiStream, StreamWithoutADemuxPadIsDropped) {
  std::vector<Stream> streams(2);
  for (unsigned i = 0; i < 2; ++i)
    for (int k = 0; k < 3; ++k) {
      Image img;
      img.width = 16;
      img.height = 16;
      img.rgb.assign(16 * 16 * 3, static_cast<uint8_t>(k + 10 * i));
      streams[i].frames.push_back(makeFrame(img, GST_VIDEO_FORMAT_GRAY8, false));
      streams[i].pts.push_back(static_cast<GstClockTime>(k) * GST_SECOND);
    }
  Collected c;
  const Outcome o = runStreams(multiPipeline(2, "", "", {1}), streams, c, {1});
  ASSERT_TRUE(o.eos) << describe(o);
  EXPECT_EQ(c.samples.count(0), 0u);
  expectStreamIntact(c, 1, streams[1]);
}

// edgemetasink on batches: one line per frame, with its stream id and per-stream frame count.
TEST(MultiStream, MetaSinkWritesALinePerFrameOfABatch) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const std::vector<Stream> streams = photoStreams();
  TempDir dir;
  const std::string json = dir.file("batches.jsonl");
  std::string desc = "edgemux name=m ! edgeinfer " + cpu(blazeFace("model_back.json")) +
                     " ! edgemetasink location=" + json;
  for (size_t i = 0; i < 3; ++i)
    desc += " appsrc name=src" + std::to_string(i) + " format=time ! m.sink_" + std::to_string(i);
  const Outcome o = runPipeline(desc, std::chrono::seconds(120), [&](GstElement* pipeline) {
    for (size_t i = 0; i < 3; ++i) pushFrames(pipeline, static_cast<unsigned>(i), streams[i]);
  });
  ASSERT_TRUE(o.eos) << describe(o);
  std::ifstream in(json);
  std::map<int, std::vector<nlohmann::json>> lines;
  for (std::string l; std::getline(in, l);) {
    auto j = nlohmann::json::parse(l);
    lines[j.at("stream").get<int>()].push_back(j);
  }
  ASSERT_EQ(lines.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const Stream& s = streams[static_cast<size_t>(i)];
    ASSERT_EQ(lines[i].size(), s.frames.size()) << "stream " << i;
    for (size_t k = 0; k < s.frames.size(); ++k) {
      const nlohmann::json& j = lines[i][k];
      EXPECT_EQ(j.at("frame").get<size_t>(), k);
      EXPECT_EQ(j.at("pts").get<uint64_t>(), s.pts[k]);
      EXPECT_EQ(j.at("width").get<int>(), GST_VIDEO_INFO_WIDTH(&s.frames[k].info));
      auto want = oracle(blazeFace("model_back.json")).infer({s.frames[k].view()});
      ASSERT_TRUE(want.ok());
      ASSERT_EQ(j.at("results").size(), 1u);
      EXPECT_EQ(j.at("results")[0].at("detections").size(), (*want)[0].detections.size());
    }
  }
}

// ---- Failures: an error naming the problem, the pipeline stops -------------------------------

void expectError(const Outcome& o, const std::string& source,
                 const std::vector<std::string>& needles) {
  EXPECT_FALSE(o.timedOut) << describe(o);
  ASSERT_TRUE(o.error) << describe(o);
  EXPECT_FALSE(o.eos);
  EXPECT_EQ(o.errorSource, source) << describe(o);
  for (const std::string& n : needles)
    EXPECT_NE(o.errorText.find(n), std::string::npos) << "'" << n << "' missing: " << describe(o);
  EXPECT_LT(o.stopSeconds, 5.0) << "stopping took too long";
}

void pushPlainFrames(GstElement* pipeline, const std::string& name, const std::string& caps,
                     gsize size, int n = 3) {
  GstElement* src = byName(pipeline, name);
  GstCaps* c = gst_caps_from_string(caps.c_str());
  g_object_set(src, "caps", c, nullptr);
  gst_caps_unref(c);
  GstFlowReturn ret = GST_FLOW_OK;
  for (int i = 0; i < n; ++i) {
    GstBuffer* b = gst_buffer_new_allocate(nullptr, size, nullptr);
    gst_buffer_memset(b, 0, 0x40, size);
    GST_BUFFER_PTS(b) = static_cast<GstClockTime>(i) * GST_MSECOND;
    g_signal_emit_by_name(src, "push-buffer", b, &ret);
    gst_buffer_unref(b);
  }
  g_signal_emit_by_name(src, "end-of-stream", &ret);
  gst_object_unref(src);
}

TEST(EdgeDemuxErrors, PlainVideoCannotBeLinked_n) {
  const Outcome o = runPipeline("videotestsrc num-buffers=3 ! edgedemux name=d d.src_0 ! fakesink",
                                std::chrono::seconds(30));
  EXPECT_FALSE(o.parsed) << describe(o);
  EXPECT_NE(o.errorText.find("could not link"), std::string::npos) << describe(o);
}

TEST(EdgeDemuxErrors, PlainVideoPushedAnyway_n) {
  const Outcome o = runPipeline(
      "appsrc name=src format=time ! edgedemux name=d d.src_0 ! fakesink", std::chrono::seconds(30),
      [](GstElement* p) {
        pushPlainFrames(p, "src", "video/x-raw,format=RGB,width=8,height=8,framerate=30/1",
                        8 * 8 * 3);
      });
  expectError(o, "d", {"edgedemux takes batches", "video/x-raw", "put edgemux"});
}

TEST(EdgeDemuxErrors, BatchCapsWithoutABatch_n) {
  const Outcome o = runPipeline(
      "appsrc name=src format=time ! edgedemux name=d d.src_0 ! fakesink", std::chrono::seconds(30),
      [](GstElement* p) { pushPlainFrames(p, "src", EDGEINFER_BATCH_CAPS, 16); });
  expectError(o, "d", {"without a batch", "EdgeInferBatchMeta"});
}

TEST(EdgeDemuxErrors, BadPadRequests_n) {
  GstElement* d = gst_element_factory_make("edgedemux", nullptr);
  ASSERT_NE(d, nullptr);
  GstPad* p0 = gst_element_request_pad_simple(d, "src_0");
  ASSERT_NE(p0, nullptr);
  EXPECT_EQ(gst_element_request_pad_simple(d, "src_0"), nullptr) << "the same stream twice";
  EXPECT_EQ(gst_element_request_pad_simple(d, "src_x"), nullptr);
  EXPECT_EQ(gst_element_request_pad_simple(d, "src_-1"), nullptr);
  GstPad* next = gst_element_request_pad_simple(d, "src_%u");
  ASSERT_NE(next, nullptr);
  EXPECT_STREQ(GST_PAD_NAME(next), "src_1") << "the next free stream";
  gst_element_release_request_pad(d, next);
  gst_object_unref(next);
  gst_element_release_request_pad(d, p0);
  gst_object_unref(p0);
  gst_object_unref(d);
}

TEST(EdgeMuxErrors, BadPadRequests_n) {
  GstElement* m = gst_element_factory_make("edgemux", nullptr);
  ASSERT_NE(m, nullptr);
  GstPad* p2 = gst_element_request_pad_simple(m, "sink_2");
  ASSERT_NE(p2, nullptr);
  EXPECT_EQ(gst_element_request_pad_simple(m, "sink_2"), nullptr) << "the same stream twice";
  EXPECT_EQ(gst_element_request_pad_simple(m, "sink_two"), nullptr);
  EXPECT_EQ(gst_element_request_pad_simple(m, "sink_"), nullptr);
  GstPad* next = gst_element_request_pad_simple(m, "sink_%u");
  ASSERT_NE(next, nullptr);
  EXPECT_STREQ(GST_PAD_NAME(next), "sink_3");
  gst_element_release_request_pad(m, next);
  gst_object_unref(next);
  gst_element_release_request_pad(m, p2);
  gst_object_unref(p2);
  gst_object_unref(m);
}

TEST(EdgeMuxErrors, NoSinkPads_n) {
  const Outcome o = runPipeline("edgemux name=m start-timeout=500000000 ! edgedemux name=d",
                                std::chrono::seconds(30));
  ASSERT_TRUE(o.parsed) << o.errorText;
  expectError(o, "m", {"edgemux has no sink pads", "0.5 s", "sink_%u", "m.sink_0"});
}

TEST(EdgeMuxErrors, UnlinkedSinkPad_n) {
  const Outcome o = runPipeline(
      "edgemux name=m start-timeout=500000000 ! edgedemux name=d d.src_0 ! fakesink "
      "appsrc name=src format=time ! m.sink_0",
      std::chrono::seconds(30), [](GstElement* p) {
        GstElement* m = byName(p, "m");
        GstPad* dangling = gst_element_request_pad_simple(m, "sink_1");  // nothing feeds it
        EXPECT_NE(dangling, nullptr);
        if (dangling) gst_object_unref(dangling);
        gst_object_unref(m);
        pushPlainFrames(p, "src", "video/x-raw,format=GRAY8,width=8,height=8,framerate=30/1", 64);
      });
  expectError(o, "m", {"sink_1 is not linked", "link a stream to it or release it"});
}

TEST(EdgeMuxErrors, Yuy2Refused_n) {
  const Outcome direct = runPipeline(
      "videotestsrc num-buffers=3 ! video/x-raw,format=YUY2 ! edgemux name=m ! fakesink",
      std::chrono::seconds(30));
  EXPECT_FALSE(direct.parsed) << describe(direct);
  const Outcome o = runPipeline(
      "appsrc name=src format=time ! edgemux name=m ! edgedemux name=d d.src_0 ! fakesink",
      std::chrono::seconds(30), [](GstElement* p) {
        pushPlainFrames(p, "src", "video/x-raw,format=YUY2,width=8,height=8,framerate=30/1",
                        8 * 8 * 2);
      });
  expectError(o, "m", {"edgemux cannot take video/x-raw format YUY2", "NV12", "videoconvert"});
}

// An element after edgemux that takes only video (here an appsink whose caps are set after the
// pipeline is linked, as an application does).
TEST(EdgeMuxErrors, DownstreamTakesNoBatches_n) {
  const Outcome direct =
      runPipeline("videotestsrc num-buffers=3 ! edgemux name=m ! videoconvert ! fakesink",
                  std::chrono::seconds(30));
  EXPECT_FALSE(direct.parsed) << describe(direct);
  const Outcome o = runPipeline(
      "appsrc name=src format=time ! edgemux name=m ! appsink name=sink", std::chrono::seconds(30),
      [](GstElement* p) {
        GstElement* sink = byName(p, "sink");
        GstCaps* video = gst_caps_from_string("video/x-raw");
        g_object_set(sink, "caps", video, nullptr);
        gst_caps_unref(video);
        gst_object_unref(sink);
        pushPlainFrames(p, "src", "video/x-raw,format=RGB,width=8,height=8,framerate=30/1",
                        8 * 8 * 3);
      });
  expectError(o, "m", {"does not take batches", "put edgeinfer and edgedemux"});
}

TEST(EdgeInferBatchErrors, MissingModel_n) {
  if (!exists(blazeFace("model.json"))) GTEST_SKIP() << "run models/fetch.sh blazeface";
  TempDir dir;
  std::ifstream in(blazeFace("model.json"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  text.replace(text.find("blazeface_front_128.onnx"), 24, "missing.onnx");
  const std::string config = dir.write("model.json", text);
  const Outcome o = runPipeline(
      multiPipeline(2, "",
                    "edgeinfer name=ei config=" + config + " backend=cpu no-engine-cache=true !",
                    {0, 1}),
      std::chrono::seconds(30), [](GstElement* p) {
        for (const char* src : {"src0", "src1"})
          pushPlainFrames(p, src, "video/x-raw,format=RGB,width=8,height=8,framerate=30/1",
                          8 * 8 * 3);
      });
  expectError(o, "ei", {"cannot load the model", "missing.onnx"});
}

// Batches handed to edgeinfer directly (an application may build them: the meta is public).
GstBus* pushBatch(const std::string& config, GstBuffer* batch, GstFlowReturn* ret) {
  GstBus* bus = gst_bus_new();
  GstHarness* h = harnessFor("edgeinfer", cpu(config), bus);
  if (!h) return bus;
  gst_harness_set_src_caps_str(h, EDGEINFER_BATCH_CAPS);
  *ret = gst_harness_push(h, batch);
  gst_harness_teardown(h);
  return bus;
}

std::string errorOn(GstBus* bus) {
  GstMessage* m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  if (!m) return "";
  GError* err = nullptr;
  gst_message_parse_error(m, &err, nullptr);
  std::string text = err->message;
  g_error_free(err);
  gst_message_unref(m);
  return text;
}

GstBuffer* batchOf(unsigned stream, const std::string& caps, gsize size) {
  GstCaps* c = gst_caps_from_string(caps.c_str());
  GstVideoInfo info;
  EXPECT_TRUE(gst_video_info_from_caps(&info, c));
  GstSegment segment;
  gst_segment_init(&segment, GST_FORMAT_TIME);
  eg::Batch batch;
  batch.frames.emplace_back(stream, gst_buffer_new_allocate(nullptr, size, nullptr), c, info,
                            segment);
  gst_caps_unref(c);
  GstBuffer* b = gst_buffer_new();
  eg::addBatchMeta(b, std::move(batch));
  return b;
}

TEST(EdgeInferBatchErrors, BatchCapsWithoutABatch_n) {
  if (!exists(blazeFace("model.json"))) GTEST_SKIP() << "run models/fetch.sh blazeface";
  GstFlowReturn ret = GST_FLOW_OK;
  GstBus* bus = pushBatch(blazeFace("model.json"), gst_buffer_new(), &ret);
  EXPECT_EQ(ret, GST_FLOW_ERROR);
  const std::string text = errorOn(bus);
  EXPECT_NE(text.find("has no EdgeInferBatchMeta: batches come from edgemux"), std::string::npos)
      << text;
  gst_object_unref(bus);
}

TEST(EdgeInferBatchErrors, FrameInAFormatTheSdkDoesNotTake_n) {
  if (!exists(blazeFace("model.json"))) GTEST_SKIP() << "run models/fetch.sh blazeface";
  GstFlowReturn ret = GST_FLOW_OK;
  GstBus* bus = pushBatch(
      blazeFace("model.json"),
      batchOf(4, "video/x-raw,format=YUY2,width=8,height=8,framerate=30/1", 8 * 8 * 2), &ret);
  EXPECT_EQ(ret, GST_FLOW_ERROR);
  const std::string text = errorOn(bus);
  EXPECT_NE(text.find("stream 4 frame 0"), std::string::npos) << text;
  EXPECT_NE(text.find("YUY2"), std::string::npos) << text;
  gst_object_unref(bus);
}

TEST(EdgeInferBatchErrors, FrameSmallerThanItsCaps_n) {
  if (!exists(blazeFace("model.json"))) GTEST_SKIP() << "run models/fetch.sh blazeface";
  GstFlowReturn ret = GST_FLOW_OK;
  GstBus* bus = pushBatch(
      blazeFace("model.json"),
      batchOf(2, "video/x-raw,format=RGBA,width=64,height=48,framerate=30/1", 64 * 47 * 4), &ret);
  EXPECT_EQ(ret, GST_FLOW_ERROR);
  const std::string text = errorOn(bus);
  EXPECT_NE(text.find("stream 2 frame 0: cannot map the buffer as a 64x48 RGBA frame"),
            std::string::npos)
      << text;
  gst_object_unref(bus);
}

TEST(EdgeMetaSinkErrors, BatchCapsWithoutABatch_n) {
  const Outcome o = runPipeline(
      "appsrc name=src format=time ! edgemetasink name=s location=-", std::chrono::seconds(30),
      [](GstElement* p) { pushPlainFrames(p, "src", EDGEINFER_BATCH_CAPS, 16); });
  expectError(o, "s", {"has no EdgeInferBatchMeta", "batches come from edgemux"});
}

// ---- Leaks: many frames through edgemux ! edgeinfer ! edgedemux (ASan build) -----------------

struct Feeder {
  Frame frame;
  int total = 0;
  std::atomic<int> sent{0};
};

void onNeedData(GstElement* src, guint /*length*/, gpointer data) {
  auto* f = static_cast<Feeder*>(data);
  GstFlowReturn ret = GST_FLOW_OK;
  const int k = f->sent++;
  if (k >= f->total) {
    if (k == f->total) g_signal_emit_by_name(src, "end-of-stream", &ret);
    return;
  }
  GstBuffer* b = f->frame.buffer(static_cast<GstClockTime>(k) * 10 * GST_MSECOND);
  g_signal_emit_by_name(src, "push-buffer", b, &ret);
  gst_buffer_unref(b);
}

struct Counter {
  std::atomic<int> frames{0}, withMeta{0};
};

GstFlowReturn countSample(GstElement* sink, gpointer data) {
  auto* c = static_cast<Counter*>(data);
  GstSample* s = nullptr;
  g_signal_emit_by_name(sink, "pull-sample", &s);
  if (!s) return GST_FLOW_ERROR;
  ++c->frames;
  if (eg::findMeta(gst_sample_get_buffer(s), 1)) ++c->withMeta;
  gst_sample_unref(s);
  return GST_FLOW_OK;
}

TEST(GstLeaks, MuxDemuxThousandsOfFrames) {
  int perStream = 2000;
  if (const char* e = std::getenv("EDGEINFER_GST_MUX_LEAK_FRAMES")) perStream = std::atoi(e);
  TinyDetector model;
  const GstVideoFormat formats[] = {GST_VIDEO_FORMAT_RGBA, GST_VIDEO_FORMAT_NV12,
                                    GST_VIDEO_FORMAT_I420};
  Feeder feeders[3];
  Counter counters[3];
  for (int i = 0; i < 3; ++i) {
    Image img;
    img.width = 40 + 8 * i;
    img.height = 30 + 2 * i;
    img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
    for (size_t p = 0; p < img.rgb.size(); ++p) img.rgb[p] = static_cast<uint8_t>(p * 13 + i);
    feeders[i].frame = makeFrame(img, formats[i], i == 1);
    feeders[i].total = perStream - 100 * i;  // streams end at different times
  }
  std::string desc = "edgemux name=m ! edgeinfer config=" + model.config +
                     " backend=cpu engine-cache-dir=" + model.dir.path() +
                     " ! tee name=t t. ! queue ! edgemetasink location=/dev/null t. ! queue ! "
                     "edgedemux name=d";
  for (int i = 0; i < 3; ++i) {
    const std::string n = std::to_string(i);
    desc += " appsrc name=src" + n + " format=time max-buffers=4 ! m.sink_" + n + " d.src_" + n +
            " ! queue ! appsink name=out" + n + " sync=false emit-signals=true";
  }
  const Outcome o = runPipeline(desc, std::chrono::seconds(280), [&](GstElement* pipeline) {
    for (int i = 0; i < 3; ++i) {
      GstElement* src = byName(pipeline, "src" + std::to_string(i));
      GstCaps* caps = feeders[i].frame.caps();
      g_object_set(src, "caps", caps, nullptr);
      gst_caps_unref(caps);
      g_signal_connect(src, "need-data", G_CALLBACK(onNeedData), &feeders[i]);
      gst_object_unref(src);
      GstElement* sink = byName(pipeline, "out" + std::to_string(i));
      g_signal_connect(sink, "new-sample", G_CALLBACK(countSample), &counters[i]);
      gst_object_unref(sink);
    }
  });
  ASSERT_TRUE(o.eos) << describe(o);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(counters[i].frames.load(), feeders[i].total) << "stream " << i;
    EXPECT_EQ(counters[i].withMeta.load(), feeders[i].total) << "stream " << i;
  }
}

}  // namespace
