// edgemetasink: every line is JSON, one per frame, and says exactly what the frame's metas say
// (every field, floats read back bit for bit); stdout when location is unset; an unwritable
// location is an error at start.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gst_test_util.h"
#include "test_model.h"

namespace {

using namespace eitest;
namespace vision = edgeinfer::vision;
namespace eg = edgeinfer::gst;

std::vector<eg::Results> frameResults(int i) {
  eg::Results det;
  det.uniqueId = 1;
  det.frameNumber = static_cast<uint64_t>(i);
  det.width = 320;
  det.height = 240;
  det.inferred = i % 2 == 0;
  for (int k = 0; k < i; ++k) {
    eg::Object o;
    o.detection.box = {1.1f * static_cast<float>(k), 2.25f, 100.0f / 3.0f + k, 77.7f};
    o.detection.classId = k;
    o.detection.score = 0.1f + 0.2f * static_cast<float>(k);
    o.detection.label = k % 2 ? "face" : "";
    o.detection.keypoints = {{1.5f, 2.5f, 0.9f}, {3.0f / 7.0f, 9.0f, 0.25f}};
    if (k == 1) o.classifications.push_back({2, {{5, 0.8f, "smile"}, {6, 0.15f, ""}}});
    det.objects.push_back(o);
  }
  eg::Results cls;
  cls.uniqueId = 7;
  cls.frameNumber = static_cast<uint64_t>(i);
  cls.width = 320;
  cls.height = 240;
  cls.classifications = {{3, 1.0f / 3.0f, "cat"}};
  return {det, cls};
}

float f(const nlohmann::json& j) {
  return j.get<float>();
}

void expectSame(const nlohmann::json& j, const eg::Results& r, const std::string& at) {
  EXPECT_EQ(j.at("unique_id").get<int>(), r.uniqueId) << at;
  EXPECT_EQ(j.at("frame_number").get<uint64_t>(), r.frameNumber) << at;
  EXPECT_EQ(j.at("inferred").get<bool>(), r.inferred) << at;
  const auto& dets = j.at("detections");
  ASSERT_EQ(dets.size(), r.objects.size()) << at;
  for (size_t k = 0; k < r.objects.size(); ++k) {
    const vision::Detection& d = r.objects[k].detection;
    const auto& jd = dets[k];
    EXPECT_EQ(f(jd.at("box")[0]), d.box.x1) << at;
    EXPECT_EQ(f(jd.at("box")[1]), d.box.y1) << at;
    EXPECT_EQ(f(jd.at("box")[2]), d.box.x2) << at;
    EXPECT_EQ(f(jd.at("box")[3]), d.box.y2) << at;
    EXPECT_EQ(f(jd.at("score")), d.score) << at;
    EXPECT_EQ(jd.at("class").get<int>(), d.classId) << at;
    EXPECT_EQ(jd.at("label").get<std::string>(), d.label) << at;
    ASSERT_EQ(jd.at("keypoints").size(), d.keypoints.size()) << at;
    for (size_t p = 0; p < d.keypoints.size(); ++p) {
      EXPECT_EQ(f(jd.at("keypoints")[p][0]), d.keypoints[p].x) << at;
      EXPECT_EQ(f(jd.at("keypoints")[p][1]), d.keypoints[p].y) << at;
      EXPECT_EQ(f(jd.at("keypoints")[p][2]), d.keypoints[p].score) << at;
    }
    const auto& oc = r.objects[k].classifications;
    ASSERT_EQ(jd.at("classifications").size(), oc.size()) << at;
    for (size_t c = 0; c < oc.size(); ++c) {
      EXPECT_EQ(jd["classifications"][c].at("unique_id").get<int>(), oc[c].uniqueId);
      ASSERT_EQ(jd["classifications"][c].at("classes").size(), oc[c].classes.size());
      for (size_t n = 0; n < oc[c].classes.size(); ++n) {
        const auto& jc = jd["classifications"][c]["classes"][n];
        EXPECT_EQ(jc.at("class").get<int>(), oc[c].classes[n].classId);
        EXPECT_EQ(f(jc.at("score")), oc[c].classes[n].score);
        EXPECT_EQ(jc.at("label").get<std::string>(), oc[c].classes[n].label);
      }
    }
  }
  ASSERT_EQ(j.at("classifications").size(), r.classifications.size()) << at;
  for (size_t c = 0; c < r.classifications.size(); ++c) {
    EXPECT_EQ(j["classifications"][c].at("class").get<int>(), r.classifications[c].classId);
    EXPECT_EQ(f(j["classifications"][c].at("score")), r.classifications[c].score);
    EXPECT_EQ(j["classifications"][c].at("label").get<std::string>(), r.classifications[c].label);
  }
}

std::vector<std::string> lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST(EdgeMetaSink, OneJsonLinePerFrameEqualToTheMetas) {
  edgeinfer::test::TempDir dir;
  const std::string path = dir.file("out.jsonl");
  GstHarness* h = harnessFor("edgemetasink", "location=" + path);
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps_str(h, "video/x-raw,format=RGBA,width=320,height=240,framerate=25/1");
  constexpr int kFrames = 4;
  for (int i = 0; i < kFrames; ++i) {
    GstBuffer* b = gst_buffer_new_allocate(nullptr, 320 * 240 * 4, nullptr);
    GST_BUFFER_PTS(b) =
        i == 2 ? GST_CLOCK_TIME_NONE : static_cast<GstClockTime>(i) * 40 * GST_MSECOND;
    if (i != 3)  // frame 3 has no meta
      for (const eg::Results& r : frameResults(i)) eg::addMeta(b, r);
    ASSERT_EQ(gst_harness_push(h, b), GST_FLOW_OK);
    // Each line is written (and flushed) as its frame arrives.
    EXPECT_EQ(lines(path).size(), static_cast<size_t>(i + 1)) << "after frame " << i;
  }
  gst_harness_teardown(h);
  const auto text = lines(path);
  ASSERT_EQ(text.size(), static_cast<size_t>(kFrames));
  for (int i = 0; i < kFrames; ++i) {
    const std::string at = "line " + std::to_string(i);
    nlohmann::json j;
    ASSERT_NO_THROW(j = nlohmann::json::parse(text[static_cast<size_t>(i)])) << at;
    EXPECT_EQ(j.at("frame").get<uint64_t>(), static_cast<uint64_t>(i)) << at;
    if (i == 2) {
      EXPECT_TRUE(j.at("pts").is_null()) << at;
    } else {
      EXPECT_EQ(j.at("pts").get<uint64_t>(), static_cast<uint64_t>(i) * 40 * GST_MSECOND) << at;
    }
    EXPECT_EQ(j.at("width").get<int>(), 320);
    EXPECT_EQ(j.at("height").get<int>(), 240);
    if (i == 3) {
      EXPECT_TRUE(j.at("results").empty()) << at;
      continue;
    }
    const auto want = frameResults(i);
    ASSERT_EQ(j.at("results").size(), want.size()) << at;
    for (size_t r = 0; r < want.size(); ++r)
      expectSame(j["results"][r], want[r], at + " result " + std::to_string(r));
  }
}

// The whole chain on a real photo: what edgeinfer attached is what the sink writes.
TEST(EdgeMetaSink, WritesWhatEdgeInferFound) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  edgeinfer::test::TempDir dir;
  const std::string path = dir.file("faces.jsonl");
  Image img;
  ASSERT_TRUE(readPpm(mediaDir() + "/faces/2008_002506.ppm", img));
  const Frame frame = makeFrame(img, GST_VIDEO_FORMAT_I420, true);
  GstHarness* h = gst_harness_new_parse(
      ("edgeinfer config=" + blazeFace("model_back.json") + " backend=cpu engine-cache-dir=" +
       engineCacheDir() + " ! tee name=t ! queue ! edgemetasink location=" + path + " t. ! queue")
          .c_str());
  gst_harness_set_src_caps(h, frame.caps());
  ASSERT_EQ(gst_harness_push(h, frame.buffer(123)), GST_FLOW_OK);
  GstBuffer* out = gst_harness_pull(h);
  ASSERT_NE(out, nullptr);
  const EdgeInferMeta* m = eg::findMeta(out, 1);
  ASSERT_NE(m, nullptr);
  ASSERT_EQ(m->results->objects.size(), 3u);
  // The sink's branch runs in its own thread: wait (bounded) for its line.
  for (int i = 0; i < 500 && lines(path).empty(); ++i) g_usleep(10000);
  const auto text = lines(path);
  ASSERT_EQ(text.size(), 1u);
  const nlohmann::json j = nlohmann::json::parse(text[0]);
  EXPECT_EQ(j.at("pts").get<uint64_t>(), 123u);
  EXPECT_EQ(j.at("width").get<int>(), 500);
  ASSERT_EQ(j.at("results").size(), 1u);
  expectSame(j["results"][0], *m->results, "edgeinfer");
  gst_buffer_unref(out);
  gst_harness_teardown(h);
}

TEST(EdgeMetaSinkErrors, UnwritableLocation_n) {
  const Outcome o = runPipeline(
      "videotestsrc num-buffers=3 ! video/x-raw,width=32,height=32 ! edgemetasink name=js "
      "location=/nonexistent-dir/out.jsonl",
      std::chrono::seconds(20));
  ASSERT_TRUE(o.error) << describe(o);
  EXPECT_FALSE(o.timedOut);
  EXPECT_EQ(o.errorSource, "js");
  EXPECT_EQ(o.errorDomain, GST_RESOURCE_ERROR);
  EXPECT_EQ(o.errorCode, GST_RESOURCE_ERROR_OPEN_WRITE);
  EXPECT_NE(o.errorText.find("cannot open '/nonexistent-dir/out.jsonl' for writing"),
            std::string::npos)
      << describe(o);
}

}  // namespace
