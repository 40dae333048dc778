// edgeinfer through GstHarness on real photos (Debian's kphotoalbum portraits and dlib's group
// photos; the real BlazeFace model): in every frame format the SDK takes, in GStreamer's
// default layout and with odd pitches and plane gaps, the EdgeInferMeta equals what
// VisionModel::infer returns on the same bytes, field for field. Then interval, the secondary
// classifier chain, element messages, the meta through copies and videoscale, the engine cache;
// and every way starting or streaming can fail (the _n tests): each posts an error naming the
// problem and the pipeline stops, under a timeout.
#include <gst/base/gstbasesink.h>
#include <gst/base/gstbasetransform.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "builder/engine_format.h"
#include "edgeinfer/calibration.h"
#include "edgeinfer/engine.h"
#include "edgeinfer/vision/vision_model.h"
#include "gst_test_util.h"
#include "test_model.h"
#include "tiny_models.h"

namespace {

using namespace eitest;
namespace vision = edgeinfer::vision;
namespace eg = edgeinfer::gst;

constexpr GstVideoFormat kFormats[] = {
    GST_VIDEO_FORMAT_NV12, GST_VIDEO_FORMAT_I420, GST_VIDEO_FORMAT_RGBA,
    GST_VIDEO_FORMAT_BGRA, GST_VIDEO_FORMAT_RGBx, GST_VIDEO_FORMAT_BGRx,
    GST_VIDEO_FORMAT_RGB,  GST_VIDEO_FORMAT_BGR,  GST_VIDEO_FORMAT_GRAY8,
};

std::string props(const std::string& config, const std::string& extra = "") {
  return "config=" + config + " backend=cpu engine-cache-dir=" + engineCacheDir() + " " + extra;
}

vision::VisionModelOptions cpuOptions() {
  vision::VisionModelOptions o;
  o.backend = edgeinfer::Backend::kCpu;
  o.engineCacheDir = engineCacheDir();
  return o;
}

// One VisionModel per config for the whole test program (the oracle).
vision::VisionModel& sdkModel(const std::string& config, int batch = 0) {
  static std::map<std::string, std::unique_ptr<vision::VisionModel>> models;
  const std::string key = config + "#" + std::to_string(batch);
  auto& m = models[key];
  if (!m) {
    vision::VisionModelOptions o = cpuOptions();
    if (batch > 0) o.builder.dynamicDimDefault = batch;
    auto loaded = vision::VisionModel::load(config, o);
    EXPECT_TRUE(loaded.ok()) << loaded.status().toString();
    if (loaded.ok()) m = std::move(*loaded);
  }
  return *m;
}

// A frame of one colour (black) of the photo's size.
Image blank(int width, int height) {
  Image img;
  img.width = width;
  img.height = height;
  img.rgb.assign(static_cast<size_t>(width) * height * 3, 0);
  return img;
}

// Pushes `frame` through `h` and returns the output buffer (the caller unrefs it).
GstBuffer* pushPull(GstHarness* h, const Frame& frame, GstClockTime pts = 0) {
  EXPECT_EQ(gst_harness_push(h, frame.buffer(pts)), GST_FLOW_OK);
  return gst_harness_pull(h);
}

// ---- Every format, both layouts, real photos: the meta equals the SDK ----------------------

struct PhotoCase {
  const char* photo;
  const char* config;
  int width, height;  // 0: the photo's size; else the top-left part (odd sizes)
};
const PhotoCase kPhotoCases[] = {
    {"kphotoalbum/anne_helene.ppm", "model.json", 0, 0},     // a portrait, front model
    {"faces/2008_002506.ppm", "model_back.json", 499, 373},  // three faces, odd size
};

using FormatCase = std::tuple<GstVideoFormat, bool, int>;  // format, padded, photo case

class EveryFormat : public ::testing::TestWithParam<FormatCase> {};

TEST_P(EveryFormat, MetaEqualsTheSdk) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const auto [format, padded, which] = GetParam();
  const PhotoCase& pc = kPhotoCases[which];
  Image img = photo(pc.photo);
  if (pc.width) img = cropImage(img, pc.width, pc.height);
  const Frame frame = makeFrame(img, format, padded);
  const std::string config = blazeFace(pc.config);

  auto want = sdkModel(config).infer({frame.view()});
  ASSERT_TRUE(want.ok()) << want.status().toString();
  const auto& dets = (*want)[0].detections;
  EXPECT_FALSE(dets.empty()) << "the photo's face(s) should be found (or the comparison is moot)";

  GstHarness* h = harnessFor("edgeinfer", props(config));
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps(h, frame.caps());
  GstBuffer* out = pushPull(h, frame, 40 * GST_MSECOND);
  ASSERT_NE(out, nullptr);
  const auto metas = eg::bufferMetas(out);
  ASSERT_EQ(metas.size(), 1u);
  const eg::Results& r = *metas[0]->results;
  EXPECT_EQ(r.uniqueId, 1);
  EXPECT_EQ(r.frameNumber, 0u);
  EXPECT_EQ(r.width, img.width);
  EXPECT_EQ(r.height, img.height);
  EXPECT_TRUE(r.inferred);
  EXPECT_TRUE(r.classifications.empty());
  expectSameDetections(r.objects, dets, gst_video_format_to_string(format));
  // The pixels (and padding) pass untouched.
  EXPECT_TRUE(readBack(out, frame).bytes == frame.bytes) << "edgeinfer changed the frame";
  gst_buffer_unref(out);
  gst_harness_teardown(h);
}

std::string formatCaseName(const ::testing::TestParamInfo<FormatCase>& info) {
  const auto [format, padded, which] = info.param;
  return std::string(gst_video_format_to_string(format)) + (padded ? "_padded" : "_default") +
         "_photo" + std::to_string(which);
}

INSTANTIATE_TEST_SUITE_P(Formats, EveryFormat,
                         ::testing::Combine(::testing::ValuesIn(kFormats), ::testing::Bool(),
                                            ::testing::Values(0, 1)),
                         formatCaseName);

// ---- Interval --------------------------------------------------------------------------------

// interval=3: frames 0 and 3 are inferred; 1 and 2 carry frame 0's faces although they are
// black; 4 carries frame 3's nothing although it shows a face.
TEST(EdgeInfer, IntervalCarriesTheLastInferredResults) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const Image face = photo("kphotoalbum/anne_helene.ppm");
  const Frame faceFrame = makeFrame(face, GST_VIDEO_FORMAT_RGBA, false);
  const Frame blackFrame = makeFrame(blank(face.width, face.height), GST_VIDEO_FORMAT_RGBA, false);
  auto want = sdkModel(blazeFace("model.json")).infer({faceFrame.view()});
  ASSERT_TRUE(want.ok());
  ASSERT_FALSE((*want)[0].detections.empty());

  GstHarness* h = harnessFor("edgeinfer", props(blazeFace("model.json"), "interval=3"));
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps(h, faceFrame.caps());
  const Frame* frames[] = {&faceFrame, &blackFrame, &blackFrame, &blackFrame, &faceFrame};
  const bool inferred[] = {true, false, false, true, false};
  const bool faces[] = {true, true, true, false, false};
  for (int i = 0; i < 5; ++i) {
    GstBuffer* out = pushPull(h, *frames[i]);
    ASSERT_NE(out, nullptr);
    const EdgeInferMeta* m = eg::findMeta(out, 1);
    ASSERT_NE(m, nullptr) << "frame " << i;
    EXPECT_EQ(m->results->frameNumber, static_cast<uint64_t>(i));
    EXPECT_EQ(m->results->inferred, inferred[i]) << "frame " << i;
    if (faces[i]) {
      expectSameDetections(m->results->objects, (*want)[0].detections,
                           "frame " + std::to_string(i));
    } else {
      EXPECT_TRUE(m->results->objects.empty()) << "frame " << i;
    }
    gst_buffer_unref(out);
  }
  gst_harness_teardown(h);
}

// ---- Secondary classifier on the detector's boxes --------------------------------------------

using Classifier = TinyClassifier;

// The pixel rectangle edgeinfer crops for a box (from floor to ceil, inside the frame).
vision::PixelRect cropOf(const vision::Box& b, int w, int h) {
  const int x1 = std::max(0, static_cast<int>(std::floor(b.x1)));
  const int y1 = std::max(0, static_cast<int>(std::floor(b.y1)));
  const int x2 = std::min(w, static_cast<int>(std::ceil(b.x2)));
  const int y2 = std::min(h, static_cast<int>(std::ceil(b.y2)));
  return {x1, y1, x2 - x1, y2 - y1};
}

// BlazeFace (unique-id 1) ! the classifier (unique-id 2, infer-on-id 1, batch-size 4): each
// face gets the classifier's top 3 on its crop, exactly what VisionModel::infer gives on that
// region; the classifier adds no meta of its own.
TEST(EdgeInfer, SecondaryClassifierRunsOnTheDetectorsBoxes) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  Classifier cls;
  const std::string detector = blazeFace("model_back.json");
  for (GstVideoFormat format : {GST_VIDEO_FORMAT_RGB, GST_VIDEO_FORMAT_NV12}) {
    const Frame frame = makeFrame(photo("faces/2008_002506.ppm"), format, true);
    const int w = GST_VIDEO_INFO_WIDTH(&frame.info), h = GST_VIDEO_INFO_HEIGHT(&frame.info);
    auto faces = sdkModel(detector).infer({frame.view()});
    ASSERT_TRUE(faces.ok());
    const auto& dets = (*faces)[0].detections;
    ASSERT_EQ(dets.size(), 3u);
    std::vector<vision::PixelRect> rois;
    for (const vision::Detection& d : dets) rois.push_back(cropOf(d.box, w, h));
    auto classes = sdkModel(cls.config, 4)
                       .infer(std::vector<vision::FrameView>(rois.size(), frame.view()), rois);
    ASSERT_TRUE(classes.ok()) << classes.status().toString();

    GstHarness* hs =
        gst_harness_new_parse(("edgeinfer " + props(detector, "unique-id=1") + " ! edgeinfer " +
                               props(cls.config, "unique-id=2 infer-on-id=1 batch-size=4"))
                                  .c_str());
    gst_harness_set_src_caps(hs, frame.caps());
    GstBuffer* out = pushPull(hs, frame);
    ASSERT_NE(out, nullptr);
    ASSERT_EQ(eg::bufferMetas(out).size(), 1u) << "a classifier adds no meta of its own";
    const EdgeInferMeta* m = eg::findMeta(out, 1);
    ASSERT_NE(m, nullptr);
    expectSameDetections(m->results->objects, dets, "detector");
    for (size_t i = 0; i < dets.size(); ++i) {
      const eg::Object& o = m->results->objects[i];
      ASSERT_EQ(o.classifications.size(), 1u) << "face " << i;
      EXPECT_EQ(o.classifications[0].uniqueId, 2);
      const auto& want = (*classes)[i].classifications;
      const auto& got = o.classifications[0].classes;
      ASSERT_EQ(got.size(), 3u);
      ASSERT_EQ(got.size(), want.size());
      for (size_t k = 0; k < want.size(); ++k) {
        EXPECT_EQ(got[k].classId, want[k].classId) << "face " << i << " class " << k;
        EXPECT_EQ(got[k].score, want[k].score) << "face " << i << " class " << k;
        EXPECT_EQ(got[k].label, want[k].label);
      }
    }
    // The three crops differ, so their classes should too (a classifier run on the whole frame
    // three times would give one answer).
    EXPECT_FALSE((*classes)[0].classifications[0].score == (*classes)[1].classifications[0].score &&
                 (*classes)[1].classifications[0].score == (*classes)[2].classifications[0].score);
    gst_buffer_unref(out);
    gst_harness_teardown(hs);
  }
}

// infer-on-class picks boxes by class: BlazeFace's faces are class 0, so "1" runs on none and
// "0" on all; a secondary whose detector is absent (infer-on-id 9) adds nothing.
TEST(EdgeInfer, InferOnClassAndIdPickTheBoxes) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  Classifier cls;
  const Frame frame = makeFrame(photo("faces/2008_002506.ppm"), GST_VIDEO_FORMAT_BGRx, false);
  struct Case {
    std::string secondary;
    size_t classified;
  };
  const Case cases[] = {{"infer-on-id=1 infer-on-class=1", 0},
                        {"infer-on-id=1 infer-on-class=\"2, 0\"", 3},
                        {"infer-on-id=9", 0}};
  for (const Case& c : cases) {
    GstHarness* h =
        gst_harness_new_parse(("edgeinfer " + props(blazeFace("model_back.json")) +
                               " ! edgeinfer " + props(cls.config, "unique-id=2 " + c.secondary))
                                  .c_str());
    gst_harness_set_src_caps(h, frame.caps());
    GstBuffer* out = pushPull(h, frame);
    ASSERT_NE(out, nullptr);
    const EdgeInferMeta* m = eg::findMeta(out, 1);
    ASSERT_NE(m, nullptr);
    ASSERT_EQ(m->results->objects.size(), 3u);
    size_t classified = 0;
    for (const eg::Object& o : m->results->objects) classified += o.classifications.size();
    EXPECT_EQ(classified, c.classified) << c.secondary;
    gst_buffer_unref(out);
    gst_harness_teardown(h);
  }
}

// ---- Element messages -----------------------------------------------------------------------

double field(const GstStructure* s, const char* name) {
  double v = -1;
  EXPECT_TRUE(gst_structure_get_double(s, name, &v)) << name;
  return v;
}

TEST(EdgeInfer, MessagesCarryTheResults) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const Frame frame = makeFrame(photo("faces/2008_002506.ppm"), GST_VIDEO_FORMAT_I420, true);
  GstBus* bus = gst_bus_new();
  GstHarness* h = harnessFor(
      "edgeinfer", props(blazeFace("model_back.json"), "post-messages=true unique-id=5"), bus);
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps(h, frame.caps());
  for (int i = 0; i < 2; ++i) {
    GstBuffer* out = pushPull(h, frame, static_cast<GstClockTime>(i) * 40 * GST_MSECOND);
    ASSERT_NE(out, nullptr);
    const EdgeInferMeta* meta = eg::findMeta(out, 5);
    ASSERT_NE(meta, nullptr);
    GstMessage* msg = gst_bus_pop_filtered(bus, GST_MESSAGE_ELEMENT);
    ASSERT_NE(msg, nullptr) << "no element message for frame " << i;
    const GstStructure* s = gst_message_get_structure(msg);
    EXPECT_TRUE(gst_structure_has_name(s, "edgeinfer-results"));
    guint64 number = 99, pts = 0;
    int uid = 0, width = 0, height = 0;
    gboolean inferred = FALSE;
    EXPECT_TRUE(gst_structure_get_uint64(s, "frame-number", &number));
    EXPECT_TRUE(gst_structure_get_uint64(s, "pts", &pts));
    EXPECT_TRUE(gst_structure_get_int(s, "unique-id", &uid));
    EXPECT_TRUE(gst_structure_get_int(s, "width", &width));
    EXPECT_TRUE(gst_structure_get_int(s, "height", &height));
    EXPECT_TRUE(gst_structure_get_boolean(s, "inferred", &inferred));
    EXPECT_EQ(number, static_cast<guint64>(i));
    EXPECT_EQ(pts, static_cast<guint64>(i) * 40 * GST_MSECOND);
    EXPECT_EQ(uid, 5);
    EXPECT_EQ(width, 500);
    EXPECT_EQ(height, 375);
    EXPECT_TRUE(inferred);
    const GValue* dets = gst_structure_get_value(s, "detections");
    ASSERT_NE(dets, nullptr);
    ASSERT_TRUE(GST_VALUE_HOLDS_ARRAY(dets));
    const auto& objects = meta->results->objects;
    ASSERT_EQ(gst_value_array_get_size(dets), objects.size());
    ASSERT_EQ(objects.size(), 3u);
    for (guint k = 0; k < objects.size(); ++k) {
      const GstStructure* d = gst_value_get_structure(gst_value_array_get_value(dets, k));
      const vision::Detection& want = objects[k].detection;
      EXPECT_EQ(field(d, "x1"), static_cast<double>(want.box.x1));
      EXPECT_EQ(field(d, "y2"), static_cast<double>(want.box.y2));
      EXPECT_EQ(field(d, "score"), static_cast<double>(want.score));
      EXPECT_STREQ(gst_structure_get_string(d, "label"), "face");
      const GValue* kps = gst_structure_get_value(d, "keypoints");
      ASSERT_NE(kps, nullptr);
      ASSERT_EQ(gst_value_array_get_size(kps), 6u);
      const GstStructure* kp = gst_value_get_structure(gst_value_array_get_value(kps, 5));
      EXPECT_EQ(field(kp, "x"), static_cast<double>(want.keypoints[5].x));
    }
    gst_message_unref(msg);
    gst_buffer_unref(out);
  }
  gst_harness_teardown(h);
  gst_object_unref(bus);
}

TEST(EdgeInfer, NoMessagesByDefault) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const Frame frame = makeFrame(photo("kphotoalbum/anne_helene.ppm"), GST_VIDEO_FORMAT_RGB, false);
  GstBus* bus = gst_bus_new();
  GstHarness* h = harnessFor("edgeinfer", props(blazeFace("model.json")), bus);
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps(h, frame.caps());
  GstBuffer* out = pushPull(h, frame);
  ASSERT_NE(out, nullptr);
  EXPECT_NE(eg::findMeta(out, 1), nullptr);
  GstMessage* msg = gst_bus_pop_filtered(bus, GST_MESSAGE_ELEMENT);
  EXPECT_EQ(msg, nullptr) << "post-messages is off by default";
  if (msg) gst_message_unref(msg);
  gst_buffer_unref(out);
  gst_harness_teardown(h);
  gst_object_unref(bus);
}

// ---- The meta through copies and scaling ----------------------------------------------------

TEST(EdgeInfer, MetaIsCopiedThroughScalingWithItsFrameSize) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const Frame frame = makeFrame(photo("kphotoalbum/anne_helene.ppm"), GST_VIDEO_FORMAT_RGBA, false);
  auto want = sdkModel(blazeFace("model.json")).infer({frame.view()});
  ASSERT_TRUE(want.ok());
  ASSERT_FALSE((*want)[0].detections.empty());

  GstHarness* h =
      gst_harness_new_parse(("edgeinfer " + props(blazeFace("model.json")) +
                             " ! videoscale ! capsfilter caps=video/x-raw,width=200,height=150")
                                .c_str());
  gst_harness_set_src_caps(h, frame.caps());
  GstBuffer* out = pushPull(h, frame);
  ASSERT_NE(out, nullptr);
  const EdgeInferMeta* m = eg::findMeta(out, 1);
  ASSERT_NE(m, nullptr) << "videoscale dropped the meta";
  // The results still describe the 400x600 frame they were found in (consumers scale them).
  EXPECT_EQ(m->results->width, 400);
  EXPECT_EQ(m->results->height, 600);
  const std::vector<vision::Detection>& scaled = (*want)[0].detections;
  expectSameDetections(m->results->objects, scaled, "through videoscale");

  // A copy of the buffer has its own copy of the results.
  GstBuffer* copy = gst_buffer_copy(out);
  EdgeInferMeta* mc = eg::findMeta(copy, 1);
  ASSERT_NE(mc, nullptr);
  ASSERT_NE(mc->results, m->results);
  expectSameDetections(mc->results->objects, scaled, "copy");
  mc->results->objects.clear();
  EXPECT_EQ(m->results->objects.size(), scaled.size());
  gst_buffer_unref(copy);
  gst_buffer_unref(out);
  gst_harness_teardown(h);
}

// An element that copies each frame into a new buffer with GstBaseTransform's default meta
// policy (copy the metas without tags), as cudadownload does after `nvh264dec ! edgeinfer`.
struct CopyTransform {
  GstBaseTransform parent;
};
struct CopyTransformClass {
  GstBaseTransformClass parent;
};
G_DEFINE_TYPE(CopyTransform, copy_transform, GST_TYPE_BASE_TRANSFORM)
GstFlowReturn copyTransformFrame(GstBaseTransform*, GstBuffer* in, GstBuffer* out) {
  GstMapInfo a, b;
  if (!gst_buffer_map(in, &a, GST_MAP_READ)) return GST_FLOW_ERROR;
  if (!gst_buffer_map(out, &b, GST_MAP_WRITE)) {
    gst_buffer_unmap(in, &a);
    return GST_FLOW_ERROR;
  }
  memcpy(b.data, a.data, std::min(a.size, b.size));
  gst_buffer_unmap(out, &b);
  gst_buffer_unmap(in, &a);
  return GST_FLOW_OK;
}
gboolean copyTransformSize(GstBaseTransform*, GstPadDirection, GstCaps*, gsize size, GstCaps*,
                           gsize* othersize) {
  *othersize = size;
  return TRUE;
}
void copy_transform_class_init(CopyTransformClass* klass) {
  auto* element = GST_ELEMENT_CLASS(klass);
  static GstStaticPadTemplate sink =
      GST_STATIC_PAD_TEMPLATE("sink", GST_PAD_SINK, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
  static GstStaticPadTemplate src =
      GST_STATIC_PAD_TEMPLATE("src", GST_PAD_SRC, GST_PAD_ALWAYS, GST_STATIC_CAPS_ANY);
  gst_element_class_add_static_pad_template(element, &sink);
  gst_element_class_add_static_pad_template(element, &src);
  gst_element_class_set_static_metadata(element, "copy", "Filter", "copies frames", "tests");
  auto* bt = GST_BASE_TRANSFORM_CLASS(klass);
  bt->transform = copyTransformFrame;
  bt->transform_size = copyTransformSize;  // transform_meta: GstBaseTransform's default
}
void copy_transform_init(CopyTransform*) {}

TEST(EdgeInfer, MetaSurvivesAFrameCopyWithTheDefaultMetaPolicy) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  gst_element_register(nullptr, "edgeinfertestcopy", GST_RANK_NONE, copy_transform_get_type());
  const Frame frame = makeFrame(photo("kphotoalbum/anne_helene.ppm"), GST_VIDEO_FORMAT_NV12, false);
  auto want = sdkModel(blazeFace("model.json")).infer({frame.view()});
  ASSERT_TRUE(want.ok());
  ASSERT_FALSE((*want)[0].detections.empty());
  GstHarness* h = gst_harness_new_parse(
      ("edgeinfer " + props(blazeFace("model.json")) + " ! edgeinfertestcopy").c_str());
  gst_harness_set_src_caps(h, frame.caps());
  GstBuffer* out = pushPull(h, frame);
  ASSERT_NE(out, nullptr);
  const EdgeInferMeta* m = eg::findMeta(out, 1);
  ASSERT_NE(m, nullptr) << "a frame copy with GstBaseTransform's default policy dropped the meta "
                           "(as cudadownload would)";
  expectSameDetections(m->results->objects, (*want)[0].detections, "after the copy");
  gst_buffer_unref(out);
  gst_harness_teardown(h);
}

// Two producers on one buffer: two metas, told apart by unique-id.
TEST(EdgeInfer, SeveralMetasPerBuffer) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  const Frame frame = makeFrame(photo("faces/2008_002506.ppm"), GST_VIDEO_FORMAT_NV12, false);
  GstHarness* h =
      gst_harness_new_parse(("edgeinfer " + props(blazeFace("model.json"), "unique-id=3") +
                             " ! edgeinfer " + props(blazeFace("model_back.json"), "unique-id=4"))
                                .c_str());
  gst_harness_set_src_caps(h, frame.caps());
  GstBuffer* out = pushPull(h, frame);
  ASSERT_NE(out, nullptr);
  const auto metas = eg::bufferMetas(out);
  ASSERT_EQ(metas.size(), 2u);
  EXPECT_EQ(metas[0]->results->uniqueId, 3);
  EXPECT_EQ(metas[1]->results->uniqueId, 4);
  auto back = sdkModel(blazeFace("model_back.json")).infer({frame.view()});
  ASSERT_TRUE(back.ok());
  expectSameDetections(metas[1]->results->objects, (*back)[0].detections, "second producer");
  gst_buffer_unref(out);
  gst_harness_teardown(h);
}

// ---- Model and engine cache ----------------------------------------------------------------

size_t filesIn(const std::string& dir) {
  size_t n = 0;
  if (GDir* d = g_dir_open(dir.c_str(), 0, nullptr)) {
    while (g_dir_read_name(d)) ++n;
    g_dir_close(d);
  }
  return n;
}

// A config whose model file is missing works with model= naming the real one.
TEST(EdgeInfer, ModelPropertyOverridesTheConfigsModel) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  edgeinfer::test::TempDir dir;
  std::ifstream in(blazeFace("model.json"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  text.replace(text.find("blazeface_front_128.onnx"), 24, "elsewhere.onnx");
  const std::string config = dir.write("model.json", text);
  const Frame frame = makeFrame(photo("kphotoalbum/anne_helene.ppm"), GST_VIDEO_FORMAT_BGR, false);
  GstHarness* h =
      harnessFor("edgeinfer", props(config, "model=" + blazeFace("blazeface_front_128.onnx")));
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps(h, frame.caps());
  GstBuffer* out = pushPull(h, frame);
  ASSERT_NE(out, nullptr);
  auto want = sdkModel(blazeFace("model.json")).infer({frame.view()});
  ASSERT_TRUE(want.ok());
  expectSameDetections(eg::findMeta(out, 1)->results->objects, (*want)[0].detections, "model=");
  gst_buffer_unref(out);
  gst_harness_teardown(h);
}

// The first start builds the engine into engine-cache-dir, the next loads it (the file is not
// rewritten); a damaged cache file is rebuilt, never trusted, and the results stay the same.
TEST(EdgeInfer, EngineIsCachedReusedAndRebuiltWhenDamaged) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  edgeinfer::test::TempDir cache;
  const Frame frame = makeFrame(photo("kphotoalbum/anne_helene.ppm"), GST_VIDEO_FORMAT_RGBx, false);
  auto want = sdkModel(blazeFace("model.json")).infer({frame.view()});
  ASSERT_TRUE(want.ok());
  const std::string p =
      "config=" + blazeFace("model.json") + " backend=cpu engine-cache-dir=" + cache.path();
  std::string engineFile;
  struct stat built {};
  for (int run = 0; run < 3; ++run) {
    if (run == 2) {
      std::ofstream(engineFile, std::ios::binary | std::ios::trunc) << "EDGE damaged";
    }
    if (run == 1) g_usleep(20000);  // a rewrite would have a later modification time
    GstHarness* h = harnessFor("edgeinfer", p);
    ASSERT_NE(h, nullptr);
    gst_harness_set_src_caps(h, frame.caps());
    GstBuffer* out = pushPull(h, frame);
    ASSERT_NE(out, nullptr);
    expectSameDetections(eg::findMeta(out, 1)->results->objects, (*want)[0].detections,
                         "run " + std::to_string(run));
    gst_buffer_unref(out);
    gst_harness_teardown(h);
    ASSERT_EQ(filesIn(cache.path()), 1u) << "one engine file";
    if (run == 0) {
      GDir* d = g_dir_open(cache.path().c_str(), 0, nullptr);
      engineFile = cache.file(g_dir_read_name(d));
      g_dir_close(d);
    }
    struct stat st {};
    ASSERT_EQ(stat(engineFile.c_str(), &st), 0);
    // Run 2: the 12-byte damaged file was replaced by a rebuilt engine.
    EXPECT_GT(st.st_size, 100) << "run " << run << ": the engine file is whole";
    if (run == 0) built = st;
    const bool same =
        st.st_mtim.tv_sec == built.st_mtim.tv_sec && st.st_mtim.tv_nsec == built.st_mtim.tv_nsec;
    if (run == 1) {
      EXPECT_TRUE(same) << "the second start rewrote the cached engine";
    }
  }
}

// precision=int8 with calibration-data on the CPU (INT8 emulated): the element calibrates at
// its first start into engine-cache-dir, and its metas equal VisionModel's with the same options
// (which then finds that calibration cache and engine there). The INT8 faces are not the FP32
// ones bit for bit, so the meta must follow the INT8 engine, not an FP32 one.
TEST(EdgeInfer, Int8FromCalibrationDataOnTheCpuEqualsTheSdk) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  edgeinfer::test::TempDir cache, data;
  for (const char* p : {"2008_002506", "2009_004587", "2008_001009"}) {
    std::ifstream in(mediaDir() + "/faces/" + p + ".ppm", std::ios::binary);
    std::ofstream out(data.file(std::string(p) + ".ppm"), std::ios::binary);
    out << in.rdbuf();
  }
  const Frame frame = makeFrame(photo("faces/2008_002506.ppm"), GST_VIDEO_FORMAT_RGBA, false);
  GstHarness* h =
      harnessFor("edgeinfer", "config=" + blazeFace("model.json") +
                                  " backend=cpu precision=int8 calibration-data=" + data.path() +
                                  " engine-cache-dir=" + cache.path());
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps(h, frame.caps());
  GstBuffer* out = pushPull(h, frame);
  ASSERT_NE(out, nullptr);
  gst_harness_teardown(h);
  size_t calibs = 0;
  if (GDir* d = g_dir_open(cache.path().c_str(), 0, nullptr)) {
    while (const char* n = g_dir_read_name(d)) calibs += g_str_has_suffix(n, ".calib");
    g_dir_close(d);
  }
  EXPECT_EQ(calibs, 1u) << "the calibration cache is kept with the engines";
  vision::VisionModelOptions o;
  o.backend = edgeinfer::Backend::kCpu;
  o.engineCacheDir = cache.path();
  o.precision = edgeinfer::Precision::kInt8;
  o.calibrationData = data.path();
  auto int8 = vision::VisionModel::load(blazeFace("model.json"), o);
  ASSERT_TRUE(int8.ok()) << int8.status().toString();
  EXPECT_NE((*int8)->engineSource().find("loaded from"), std::string::npos)
      << (*int8)->engineSource();
  EXPECT_EQ((*int8)->engine().info().precision, edgeinfer::Precision::kInt8);
  auto want = (*int8)->infer({frame.view()});
  ASSERT_TRUE(want.ok());
  ASSERT_FALSE((*want)[0].detections.empty());
  expectSameDetections(eg::findMeta(out, 1)->results->objects, (*want)[0].detections, "int8");
  auto fp32 = sdkModel(blazeFace("model.json")).infer({frame.view()});
  ASSERT_TRUE(fp32.ok());
  bool differs = (*fp32)[0].detections.size() != (*want)[0].detections.size();
  for (size_t i = 0; !differs && i < (*want)[0].detections.size(); ++i)
    differs = (*fp32)[0].detections[i].score != (*want)[0].detections[i].score;
  EXPECT_TRUE(differs) << "the INT8 engine gave the FP32 scores";
  gst_buffer_unref(out);
}

// calibration-min-agreement reaches the calibration: the cache the element writes is the one
// VisionModel finds with the same agreement target (the target is part of its name), and it
// keeps layers out of INT8 for it where the report's counts show INT8 losing results.
TEST(EdgeInfer, Int8AgreementTargetReachesTheCalibration) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  edgeinfer::test::TempDir cache, data;
  for (const char* p : {"2008_002506", "2009_004587"}) {
    std::ifstream in(mediaDir() + "/faces/" + p + ".ppm", std::ios::binary);
    std::ofstream out(data.file(std::string(p) + ".ppm"), std::ios::binary);
    out << in.rdbuf();
  }
  const Frame frame = makeFrame(photo("faces/2008_002506.ppm"), GST_VIDEO_FORMAT_RGBA, false);
  GstHarness* h = harnessFor(
      "edgeinfer", "config=" + blazeFace("model.json") +
                       " backend=cpu precision=int8 calibration-data=" + data.path() +
                       " calibration-min-agreement=1" + " engine-cache-dir=" + cache.path());
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps(h, frame.caps());
  GstBuffer* out = pushPull(h, frame);
  ASSERT_NE(out, nullptr);
  gst_buffer_unref(out);
  gst_harness_teardown(h);
  const auto calibs = [&] {
    std::vector<std::string> found;
    if (GDir* d = g_dir_open(cache.path().c_str(), 0, nullptr)) {
      while (const char* n = g_dir_read_name(d))
        if (g_str_has_suffix(n, ".calib")) found.push_back(cache.path() + "/" + n);
      g_dir_close(d);
    }
    return found;
  };
  ASSERT_EQ(calibs().size(), 1u);
  vision::VisionModelOptions o;
  o.backend = edgeinfer::Backend::kCpu;
  o.engineCacheDir = cache.path();
  o.precision = edgeinfer::Precision::kInt8;
  o.calibrationData = data.path();
  o.calibration.minAgreement = 1;
  auto int8 = vision::VisionModel::load(blazeFace("model.json"), o);
  ASSERT_TRUE(int8.ok()) << int8.status().toString();
  EXPECT_NE((*int8)->engineSource().find("loaded from"), std::string::npos)
      << (*int8)->engineSource() << ": the element calibrated with another target";
  EXPECT_EQ(calibs().size(), 1u) << "VisionModel calibrated again: the element's cache differs";
}

// ---- Failures: each posts an error naming the problem, the pipeline stops -------------------

// Expects `description` to fail with an error from `source` whose message contains every
// needle, with the pipeline stopped (well) within the timeout.
void expectFails(const std::string& description, const std::string& source,
                 const std::vector<std::string>& needles) {
  const Outcome o = runPipeline(description, std::chrono::seconds(30));
  ASSERT_TRUE(o.parsed) << description << ": " << o.errorText;
  EXPECT_FALSE(o.timedOut) << describe(o);
  ASSERT_TRUE(o.error) << describe(o);
  EXPECT_FALSE(o.eos);
  EXPECT_EQ(o.errorSource, source) << describe(o);
  for (const std::string& n : needles)
    EXPECT_NE(o.errorText.find(n), std::string::npos) << "'" << n << "' missing: " << describe(o);
  EXPECT_LT(o.stopSeconds, 5.0) << "stopping took too long";
}

std::string pipe(const std::string& edgeinferProps) {
  return "videotestsrc num-buffers=5 ! video/x-raw,width=64,height=48,format=RGB ! "
         "edgeinfer name=ei " +
         edgeinferProps + " ! fakesink";
}

TEST(EdgeInferErrors, MissingConfigProperty_n) {
  const Outcome o = runPipeline(pipe("backend=cpu"), std::chrono::seconds(30));
  EXPECT_EQ(o.start, GST_STATE_CHANGE_FAILURE);
  ASSERT_TRUE(o.error) << describe(o);
  EXPECT_EQ(o.errorSource, "ei");
  EXPECT_EQ(o.errorDomain, GST_RESOURCE_ERROR);
  EXPECT_EQ(o.errorCode, GST_RESOURCE_ERROR_NOT_FOUND);
  EXPECT_NE(o.errorText.find("the 'config' property is not set"), std::string::npos) << describe(o);
  EXPECT_FALSE(o.timedOut);
}

TEST(EdgeInferErrors, ConfigFileDoesNotExist_n) {
  expectFails(pipe("config=/nonexistent/edgeinfer/model.json backend=cpu"), "ei",
              {"cannot use model config", "/nonexistent/edgeinfer/model.json"});
}

TEST(EdgeInferErrors, ConfigIsNotJson_n) {
  edgeinfer::test::TempDir dir;
  const std::string config = dir.write("broken.json", "{\"name\": \"x\", \"model\": ");
  expectFails(pipe("config=" + config + " backend=cpu"), "ei",
              {"cannot use model config", "broken.json"});
}

TEST(EdgeInferErrors, ConfigIsADirectory_n) {
  edgeinfer::test::TempDir dir;
  expectFails(pipe("config=" + dir.path() + " backend=cpu"), "ei",
              {"cannot use model config", dir.path()});
}

TEST(EdgeInferErrors, ConfigNamesAMissingModel_n) {
  if (!exists(blazeFace("model.json"))) GTEST_SKIP() << "run models/fetch.sh blazeface";
  edgeinfer::test::TempDir dir;
  std::ifstream in(blazeFace("model.json"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  text.replace(text.find("blazeface_front_128.onnx"), 24, "missing.onnx");
  const std::string config = dir.write("model.json", text);
  expectFails(pipe("config=" + config + " backend=cpu no-engine-cache=true"), "ei",
              {"cannot load the model", "missing.onnx"});
}

TEST(EdgeInferErrors, ModelPropertyNamesAMissingFile_n) {
  if (!exists(blazeFace("model.json"))) GTEST_SKIP() << "run models/fetch.sh blazeface";
  expectFails(pipe("config=" + blazeFace("model.json") +
                   " model=/nonexistent/other.onnx backend=cpu no-engine-cache=true"),
              "ei", {"cannot load the model", "/nonexistent/other.onnx"});
}

TEST(EdgeInferErrors, CorruptOnnx_n) {
  if (!exists(blazeFace("model.json"))) GTEST_SKIP() << "run models/fetch.sh blazeface";
  edgeinfer::test::TempDir dir;
  std::ifstream in(blazeFace("blazeface_front_128.onnx"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  bytes.resize(bytes.size() / 3);  // truncated
  const std::string model = dir.write("cut.onnx", bytes);
  expectFails(pipe("config=" + blazeFace("model.json") + " model=" + model +
                   " backend=cpu engine-cache-dir=" + dir.path()),
              "ei", {"cannot load the model", "cut.onnx", "building the engine failed"});
}

TEST(EdgeInferErrors, ConfigDoesNotFitTheModel_n) {
  if (!exists(blazeFace("model.json"))) GTEST_SKIP() << "run models/fetch.sh blazeface";
  edgeinfer::test::TempDir dir;
  std::ifstream in(blazeFace("model.json"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  text.replace(text.find("\"input:0\""), 9, "\"image\"");
  text.replace(text.find("blazeface_front_128.onnx"), 24, blazeFace("blazeface_front_128.onnx"));
  const std::string config = dir.write("wrong-input.json", text);
  expectFails(pipe("config=" + config + " backend=cpu engine-cache-dir=" + dir.path()), "ei",
              {"cannot load the model", "'image' is not an input of the model", "input:0"});
}

// precision=int8 without ranges, with calibration data that is not there, or with the
// calibration cache of another model: the start fails naming the problem.
TEST(EdgeInferErrors, Int8WithoutUsableRanges_n) {
  TinyDetector model;
  const std::string base =
      "config=" + model.config + " backend=cpu precision=int8 engine-cache-dir=" + model.dir.path();
  expectFails(pipe(base), "ei", {"cannot load the model", "INT8 needs a calibration cache"});
  expectFails(pipe(base + " calibration-data=/nonexistent/frames"), "ei",
              {"cannot load the model", "calibration data", "/nonexistent/frames"});
  edgeinfer::CalibrationCache other;
  other.sdkVersion = "0";
  other.modelHash = "00000000deadbeef";
  other.preprocessHash = "raw";
  other.images = 1;
  other.tensorAmax["images"] = 1.f;
  const std::string cachePath = model.dir.file("other.calib");
  ASSERT_TRUE(other.save(cachePath).ok());
  expectFails(pipe(base + " calibration-cache=" + cachePath), "ei",
              {"cannot load the model", "00000000deadbeef"});
}

TEST(EdgeInferErrors, GpuBackendWithoutAGpu_n) {
  if (!exists(blazeFace("model.json"))) GTEST_SKIP() << "run models/fetch.sh blazeface";
  std::string why;
  if (edgeinfer::gpuUsable(0, &why)) GTEST_SKIP() << "a GPU is usable here";
  expectFails(pipe("config=" + blazeFace("model.json") + " backend=gpu no-engine-cache=true"), "ei",
              {"cannot load the model", "no GPU is usable", why});
}

/// An engine file of `config` (CPU), built into `dir` through the SDK's engine cache.
std::string engineFileOf(const std::string& config, const std::string& dir) {
  vision::VisionModelOptions o;
  o.backend = edgeinfer::Backend::kCpu;
  o.engineCacheDir = dir;
  auto m = vision::VisionModel::load(config, o);
  EXPECT_TRUE(m.ok()) << m.status().toString();
  if (!m.ok()) return {};
  const std::string src = (*m)->engineSource();
  const size_t at = src.find("saved to ");
  return at == std::string::npos ? std::string() : src.substr(at + 9);
}

TEST(EdgeInfer, EnginePropertyRunsThatEngine) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  edgeinfer::test::TempDir dir;
  const std::string engine = engineFileOf(blazeFace("model.json"), dir.path());
  ASSERT_FALSE(engine.empty());
  const Frame frame = makeFrame(photo("kphotoalbum/anne_helene.ppm"), GST_VIDEO_FORMAT_RGBA, false);
  auto want = sdkModel(blazeFace("model.json")).infer({frame.view()});
  ASSERT_TRUE(want.ok());
  GstHarness* h = harnessFor("edgeinfer", "config=" + blazeFace("model.json") +
                                              " engine=" + engine + " no-engine-cache=true");
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps(h, frame.caps());
  GstBuffer* out = pushPull(h, frame);
  ASSERT_NE(out, nullptr);
  expectSameDetections(eg::findMeta(out, 1)->results->objects, (*want)[0].detections, "engine");
  gst_buffer_unref(out);
  gst_harness_teardown(h);
}

TEST(EdgeInferErrors, EngineOfAnotherDevice_n) {
  if (!exists(blazeFace("model.json"))) GTEST_SKIP() << "run models/fetch.sh blazeface";
  edgeinfer::test::TempDir dir;
  const std::string engine = engineFileOf(blazeFace("model.json"), dir.path());
  ASSERT_FALSE(engine.empty());
  std::ifstream in(engine, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  auto parts = edgeinfer::builder::decodeEngine(bytes.data(), bytes.size());
  ASSERT_TRUE(parts.ok()) << parts.status().toString();
  edgeinfer::EngineInfo info = parts->info;
  info.deviceKey = "NVIDIA_Jetson_AGX_Orin-sm87-16sm-0badc0de";
  auto foreign = edgeinfer::builder::encodeEngine(parts->graph, info, parts->plan);
  ASSERT_TRUE(foreign.ok());
  const std::string path =
      dir.write("foreign.engine", std::string(foreign->begin(), foreign->end()));
  expectFails(pipe("config=" + blazeFace("model.json") + " engine=" + path), "ei",
              {"cannot load the model", "foreign.engine", "built for device",
               "NVIDIA_Jetson_AGX_Orin-sm87-16sm-0badc0de"});
}

TEST(EdgeInferErrors, EngineFileMissingOrDamaged_n) {
  if (!exists(blazeFace("model.json"))) GTEST_SKIP() << "run models/fetch.sh blazeface";
  edgeinfer::test::TempDir dir;
  expectFails(pipe("config=" + blazeFace("model.json") + " engine=" + dir.file("none.engine")),
              "ei", {"cannot load the model", "none.engine"});
  const std::string cut = dir.write("cut.engine", "EIENGINE\x01\x00");
  expectFails(pipe("config=" + blazeFace("model.json") + " engine=" + cut), "ei",
              {"cannot load the model", "cut.engine"});
}

TEST(EdgeInferErrors, BadInferOnClass_n) {
  if (!exists(blazeFace("model.json"))) GTEST_SKIP() << "run models/fetch.sh blazeface";
  expectFails(pipe("config=" + blazeFace("model.json") +
                   " backend=cpu infer-on-id=1 infer-on-class=\"0,face\""),
              "ei", {"infer-on-class", "'face'", "is not a class id"});
}

// An upstream element that produces only YUY2. Linked directly in a launch line, the pipeline
// cannot even be built (gst_parse_launch / gst-launch-1.0: "could not link"). When the format
// is only known at run time (a camera, an application's appsrc), negotiation fails and
// edgeinfer's message says what it takes and what to do; the pipeline stops with an error.
TEST(EdgeInferErrors, Yuy2FailsNegotiationWithAClearMessage_n) {
  if (!exists(blazeFace("model.json"))) GTEST_SKIP() << "run models/fetch.sh blazeface";
  const std::string ei = " ! edgeinfer name=ei config=" + blazeFace("model.json") +
                         " backend=cpu engine-cache-dir=" + engineCacheDir() + " ! fakesink";
  const Outcome direct =
      runPipeline("videotestsrc num-buffers=5 ! video/x-raw,format=YUY2,width=64,height=48" + ei,
                  std::chrono::seconds(30));
  EXPECT_FALSE(direct.parsed) << describe(direct);
  EXPECT_NE(direct.errorText.find("could not link"), std::string::npos) << describe(direct);

  const Outcome o = runPipeline(
      "appsrc name=src format=time" + ei, std::chrono::seconds(30), [](GstElement* pipeline) {
        GstElement* src = gst_bin_get_by_name(GST_BIN(pipeline), "src");
        GstCaps* caps =
            gst_caps_from_string("video/x-raw,format=YUY2,width=64,height=48,framerate=30/1");
        g_object_set(src, "caps", caps, nullptr);
        gst_caps_unref(caps);
        GstFlowReturn ret = GST_FLOW_OK;
        for (int i = 0; i < 3; ++i) {
          GstBuffer* b = gst_buffer_new_allocate(nullptr, 64 * 48 * 2, nullptr);
          g_signal_emit_by_name(src, "push-buffer", b, &ret);
          gst_buffer_unref(b);
        }
        g_signal_emit_by_name(src, "end-of-stream", &ret);
        gst_object_unref(src);
      });
  ASSERT_TRUE(o.parsed) << o.errorText;
  ASSERT_TRUE(o.error) << describe(o);
  EXPECT_FALSE(o.timedOut);
  EXPECT_FALSE(o.eos);
  std::vector<std::string> messages = o.warnings;
  messages.push_back(o.errorSource + ": " + o.errorText);
  bool clear = false;
  for (const std::string& m : messages)
    clear = clear ||
            (m.rfind("ei: ", 0) == 0 &&
             m.find("edgeinfer cannot take video/x-raw format YUY2") != std::string::npos &&
             m.find("NV12, I420, RGBA, BGRA, RGBx, BGRx, RGB, BGR, GRAY8") != std::string::npos &&
             m.find("videoconvert") != std::string::npos);
  EXPECT_TRUE(clear) << describe(o);
  EXPECT_LT(o.stopSeconds, 5.0);
  std::cout << "appsrc with YUY2: " << describe(o) << "\n";
}

// Caps pushed without asking first (here by the harness): edgeinfer refuses them with an error
// saying why, and the push fails as not-negotiated.
void expectCapsRefused(const std::string& caps, const std::string& needle) {
  GstBus* bus = gst_bus_new();
  GstHarness* h = harnessFor("edgeinfer", props(blazeFace("model.json")), bus);
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps_str(h, caps.c_str());
  GstBuffer* b = gst_buffer_new_allocate(nullptr, 64 * 48 * 4, nullptr);
  EXPECT_EQ(gst_harness_push(h, b), GST_FLOW_NOT_NEGOTIATED);
  GstMessage* m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  ASSERT_NE(m, nullptr) << "no error posted for " << caps;
  GError* err = nullptr;
  gst_message_parse_error(m, &err, nullptr);
  EXPECT_NE(std::string(err->message).find(needle), std::string::npos) << err->message;
  EXPECT_NE(std::string(err->message).find("it takes video/x-raw in system memory"),
            std::string::npos)
      << err->message;
  g_error_free(err);
  gst_message_unref(m);
  gst_harness_teardown(h);
  gst_object_unref(bus);
}

TEST(EdgeInferErrors, Yuy2CapsPushedAnyway_n) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  expectCapsRefused("video/x-raw,format=YUY2,width=64,height=48,framerate=30/1",
                    "edgeinfer cannot take video/x-raw format YUY2");
}

TEST(EdgeInferErrors, GlMemoryRefused_n) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  expectCapsRefused("video/x-raw(memory:GLMemory),format=RGBA,width=64,height=48,framerate=30/1",
                    "edgeinfer cannot take video/x-raw(memory:GLMemory)");
}

// A buffer smaller than its caps say: an error naming the sizes, GST_FLOW_ERROR, no crash.
TEST(EdgeInferErrors, BufferSmallerThanItsCaps_n) {
  EI_SKIP_WITHOUT_MODEL_AND_MEDIA();
  GstBus* bus = gst_bus_new();
  GstHarness* h = harnessFor("edgeinfer", props(blazeFace("model.json")), bus);
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps_str(h, "video/x-raw,format=RGBA,width=64,height=48,framerate=30/1");
  EXPECT_EQ(gst_harness_push(h, gst_buffer_new_allocate(nullptr, 64 * 47 * 4, nullptr)),
            GST_FLOW_ERROR);
  GstMessage* m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  ASSERT_NE(m, nullptr);
  GError* err = nullptr;
  gst_message_parse_error(m, &err, nullptr);
  EXPECT_NE(
      std::string(err->message).find("cannot map the buffer as a 64x48 RGBA frame (12032 bytes"),
      std::string::npos)
      << err->message;
  g_error_free(err);
  gst_message_unref(m);
  gst_harness_teardown(h);
  gst_object_unref(bus);
}

}  // namespace
