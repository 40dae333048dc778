// edgeoverlay, pixel by pixel: a real photo with hand-made EdgeInferMetas goes through the
// element in every format it draws on (odd sizes, odd pitches, gaps between planes) and must
// come out exactly as the drawing this file makes from the specification in
// plugins/gst/overlay_draw.h, with its own palette, colour conversion and label text (so the
// element's code is not its own oracle). Padding bytes must be untouched.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

#include "gst_test_util.h"

namespace {

using namespace eitest;
namespace vision = edgeinfer::vision;
namespace eg = edgeinfer::gst;

// ---- The specification, written out again -------------------------------------------------

const int kPalette[12][3] = {
    {0, 255, 0},   {255, 128, 0}, {0, 160, 255}, {255, 0, 255}, {255, 255, 0}, {0, 255, 255},
    {128, 0, 255}, {255, 0, 64},  {128, 255, 0}, {0, 96, 160},  {160, 96, 64}, {255, 192, 203},
};
const int kKeypoint[3] = {255, 0, 0};

struct Colour {
  int r, g, b;
};
Colour classColour(int c) {
  const int i = ((c % 12) + 12) % 12;
  return {kPalette[i][0], kPalette[i][1], kPalette[i][2]};
}
int lumaOf(Colour c) {
  return 16 + ((66 * c.r + 129 * c.g + 25 * c.b + 128) >> 8);
}
int uOf(Colour c) {
  return 128 + ((-38 * c.r - 74 * c.g + 112 * c.b + 128) >> 8);
}
int vOf(Colour c) {
  return 128 + ((112 * c.r - 94 * c.g - 18 * c.b + 128) >> 8);
}
Colour textOn(Colour c) {
  return lumaOf(c) >= 128 ? Colour{0, 0, 0} : Colour{255, 255, 255};
}
std::string withScore(const std::string& name, float score) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s %.2f", name.c_str(), static_cast<double>(score));
  return buf;
}

struct Style {
  int thickness = 2;
  double fontScale = 0.5;
};

// The planes of the expected frame and the drawing primitives of the specification.
struct Expected {
  GstVideoFormat format;
  cv::Mat packed, y, uv, u, v;

  explicit Expected(Frame& f) : format(GST_VIDEO_INFO_FORMAT(&f.info)) {
    const int w = GST_VIDEO_INFO_WIDTH(&f.info), h = GST_VIDEO_INFO_HEIGHT(&f.info);
    auto plane = [&](int p, int rows, int cols, int type) {
      return cv::Mat(rows, cols, type, f.bytes.data() + f.offsets[p],
                     static_cast<size_t>(f.strides[p]));
    };
    switch (format) {
      case GST_VIDEO_FORMAT_RGB:
      case GST_VIDEO_FORMAT_BGR:
        packed = plane(0, h, w, CV_8UC3);
        break;
      case GST_VIDEO_FORMAT_NV12:
        y = plane(0, h, w, CV_8UC1);
        uv = plane(1, (h + 1) / 2, (w + 1) / 2, CV_8UC2);
        break;
      case GST_VIDEO_FORMAT_I420:
        y = plane(0, h, w, CV_8UC1);
        u = plane(1, (h + 1) / 2, (w + 1) / 2, CV_8UC1);
        v = plane(2, (h + 1) / 2, (w + 1) / 2, CV_8UC1);
        break;
      default:
        packed = plane(0, h, w, CV_8UC4);
    }
  }
  bool yuv() const { return format == GST_VIDEO_FORMAT_NV12 || format == GST_VIDEO_FORMAT_I420; }
  cv::Scalar bytes(Colour c) const {
    const bool bgr = format == GST_VIDEO_FORMAT_BGRA || format == GST_VIDEO_FORMAT_BGRx ||
                     format == GST_VIDEO_FORMAT_BGR;
    return bgr ? cv::Scalar(c.b, c.g, c.r, 255) : cv::Scalar(c.r, c.g, c.b, 255);
  }
  static cv::Point halfOf(cv::Point p) {
    return {static_cast<int>(std::floor(p.x / 2.0)), static_cast<int>(std::floor(p.y / 2.0))};
  }
  void chroma(Colour c, const std::function<void(cv::Mat&, cv::Scalar)>& draw) {
    if (format == GST_VIDEO_FORMAT_NV12) {
      draw(uv, cv::Scalar(uOf(c), vOf(c)));
    } else {
      draw(u, cv::Scalar(uOf(c)));
      draw(v, cv::Scalar(vOf(c)));
    }
  }
  void rect(cv::Point a, cv::Point b, Colour c, int t) {
    if (!yuv()) {
      cv::rectangle(packed, a, b, bytes(c), t, cv::LINE_8);
      return;
    }
    cv::rectangle(y, a, b, cv::Scalar(lumaOf(c)), t, cv::LINE_8);
    const int ct = t < 0 ? t : std::max(1, t / 2);
    chroma(c, [&](cv::Mat& m, cv::Scalar s) {
      cv::rectangle(m, halfOf(a), halfOf(b), s, ct, cv::LINE_8);
    });
  }
  void disc(cv::Point centre, int r, Colour c) {
    if (!yuv()) {
      cv::circle(packed, centre, r, bytes(c), cv::FILLED, cv::LINE_8);
      return;
    }
    cv::circle(y, centre, r, cv::Scalar(lumaOf(c)), cv::FILLED, cv::LINE_8);
    chroma(c, [&](cv::Mat& m, cv::Scalar s) {
      cv::circle(m, halfOf(centre), std::max(1, r / 2), s, cv::FILLED, cv::LINE_8);
    });
  }
  void text(const std::string& s, cv::Point at, double scale, Colour c) {
    if (!yuv()) {
      cv::putText(packed, s, at, cv::FONT_HERSHEY_SIMPLEX, scale, bytes(c), 1, cv::LINE_8);
    } else {
      cv::putText(y, s, at, cv::FONT_HERSHEY_SIMPLEX, scale, cv::Scalar(c.r == 0 ? 16 : 235), 1,
                  cv::LINE_8);
    }
  }
  void label(const std::string& s, int x, int anchorY, bool above, Colour c, double scale) {
    int baseline = 0;
    const cv::Size size = cv::getTextSize(s, cv::FONT_HERSHEY_SIMPLEX, scale, 1, &baseline);
    const int barW = size.width + 4, barH = size.height + baseline + 4;
    const int top = above && anchorY - barH >= 0 ? anchorY - barH : anchorY;
    rect({x, top}, {x + barW - 1, top + barH - 1}, c, cv::FILLED);
    text(s, {x + 2, top + 2 + size.height}, scale, textOn(c));
  }

  void draw(const std::vector<const eg::Results*>& all, const Style& st) {
    int baseline = 0;
    const int lineH =
        cv::getTextSize("Ag", cv::FONT_HERSHEY_SIMPLEX, st.fontScale, 1, &baseline).height +
        baseline + 4;
    int line = 0;
    for (const eg::Results* r : all) {
      for (const eg::Object& o : r->objects) {
        const vision::Detection& d = o.detection;
        const cv::Point a(static_cast<int>(std::lround(d.box.x1)),
                          static_cast<int>(std::lround(d.box.y1)));
        const cv::Point b(static_cast<int>(std::lround(d.box.x2)) - 1,
                          static_cast<int>(std::lround(d.box.y2)) - 1);
        if (b.x < a.x || b.y < a.y) continue;
        const Colour c = classColour(d.classId);
        rect(a, b, c, st.thickness);
        for (const vision::Keypoint& k : d.keypoints)
          disc({static_cast<int>(std::lround(k.x)), static_cast<int>(std::lround(k.y))},
               st.thickness + 1, {kKeypoint[0], kKeypoint[1], kKeypoint[2]});
        std::string s =
            withScore(d.label.empty() ? "class " + std::to_string(d.classId) : d.label, d.score);
        for (const eg::ObjectClassification& oc : o.classifications)
          if (!oc.classes.empty())
            s += " | " + withScore(oc.classes[0].label.empty()
                                       ? "class " + std::to_string(oc.classes[0].classId)
                                       : oc.classes[0].label,
                                   oc.classes[0].score);
        label(s, a.x, a.y, true, c, st.fontScale);
      }
      for (const vision::Classification& cl : r->classifications)
        label(withScore(cl.label.empty() ? "class " + std::to_string(cl.classId) : cl.label,
                        cl.score),
              0, line++ * lineH, false, classColour(cl.classId), st.fontScale);
    }
  }
};

// ---- Test data --------------------------------------------------------------------------------

eg::Object object(int cls, vision::Box box, float score, const std::string& label,
                  std::vector<vision::Keypoint> kps = {}) {
  eg::Object o;
  o.detection.classId = cls;
  o.detection.box = box;
  o.detection.score = score;
  o.detection.label = label;
  o.detection.keypoints = std::move(kps);
  return o;
}

// A detector's meta (a labelled face with keypoints and a secondary class; an unlabelled box at
// the top edge, whose label goes inside; an empty box, not drawn; a box partly outside) and a
// classifier's (two whole-frame classes).
std::vector<eg::Results> sampleResults(int w, int h) {
  eg::Results det;
  det.uniqueId = 1;
  det.width = w;
  det.height = h;
  det.objects.push_back(object(0, {10.4f, 30.6f, 80.5f, 100.2f}, 0.913f, "face",
                               {{30.2f, 50.7f, 1.f}, {60.5f, 49.4f, 1.f}}));
  det.objects.back().classifications.push_back({2, {{3, 0.75f, "dog"}, {1, 0.2f, "cat"}}});
  det.objects.push_back(object(7, {100.f, 5.f, 140.f, 60.f}, 0.5f, ""));
  det.objects.push_back(object(2, {50.f, 50.f, 50.2f, 50.2f}, 0.4f, "dot"));
  det.objects.push_back(object(13,
                               {static_cast<float>(w) - 20.f, static_cast<float>(h) - 15.f,
                                static_cast<float>(w) + 10.f, static_cast<float>(h)},
                               0.66f, "edge"));
  eg::Results cls;
  cls.uniqueId = 9;
  cls.width = w;
  cls.height = h;
  cls.classifications = {{1, 0.66f, "cat"}, {4, 0.25f, ""}};
  return {det, cls};
}

Frame photoFrame(GstVideoFormat format, bool padded) {
  Image img;
  EXPECT_TRUE(readPpm(mediaDir() + "/kphotoalbum/anne_helene.ppm", img));
  // Odd sizes around the face (the photo's face is near (139..227, 151..239)).
  Image part;
  part.width = 181;
  part.height = 147;
  for (int y = 0; y < part.height; ++y) {
    const uint8_t* row = img.rgb.data() + (static_cast<size_t>(y + 120) * img.width + 100) * 3;
    part.rgb.insert(part.rgb.end(), row, row + 3 * part.width);
  }
  return makeFrame(part, format, padded);
}

#define EI_SKIP_WITHOUT_PHOTO()                                                           \
  do {                                                                                    \
    if (!exists(mediaDir() + "/kphotoalbum/anne_helene.ppm"))                             \
      GTEST_SKIP() << mediaDir() << "/kphotoalbum is absent: run scripts/fetch_media.sh"; \
  } while (0)

// Pushes `frame` with `results` attached through edgeoverlay (with `props`), returns the output.
Frame overlay(const Frame& frame, const std::vector<eg::Results>& results,
              const std::string& props = "") {
  GstHarness* h = harnessFor("edgeoverlay", props);
  EXPECT_NE(h, nullptr);
  if (!h) return frame;
  gst_harness_set_src_caps(h, frame.caps());
  GstBuffer* in = frame.buffer(0);
  for (const eg::Results& r : results) eg::addMeta(in, r);
  EXPECT_EQ(gst_harness_push(h, in), GST_FLOW_OK);
  GstBuffer* out = gst_harness_pull(h);
  Frame got = out ? readBack(out, frame) : frame;
  if (out) gst_buffer_unref(out);
  gst_harness_teardown(h);
  return got;
}

using OverlayCase = std::tuple<GstVideoFormat, bool>;
class OverlayFormats : public ::testing::TestWithParam<OverlayCase> {};

TEST_P(OverlayFormats, DrawsExactlyTheSpecifiedPixels) {
  EI_SKIP_WITHOUT_PHOTO();
  const auto [format, padded] = GetParam();
  const Frame frame = photoFrame(format, padded);
  const auto results =
      sampleResults(GST_VIDEO_INFO_WIDTH(&frame.info), GST_VIDEO_INFO_HEIGHT(&frame.info));
  for (const Style& st : {Style{2, 0.5}, Style{3, 0.4}}) {
    Frame want = frame;
    Expected(want).draw({&results[0], &results[1]}, st);
    ASSERT_FALSE(want.bytes == frame.bytes) << "the expected drawing draws nothing";
    const Frame got = overlay(frame, results,
                              "thickness=" + std::to_string(st.thickness) +
                                  " font-scale=" + std::to_string(st.fontScale));
    EXPECT_TRUE(got.bytes == want.bytes) << gst_video_format_to_string(format) << " thickness "
                                         << st.thickness << ": " << frameDifference(got, want);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Formats, OverlayFormats,
    ::testing::Combine(::testing::Values(GST_VIDEO_FORMAT_RGBA, GST_VIDEO_FORMAT_BGRA,
                                         GST_VIDEO_FORMAT_RGBx, GST_VIDEO_FORMAT_BGRx,
                                         GST_VIDEO_FORMAT_RGB, GST_VIDEO_FORMAT_BGR,
                                         GST_VIDEO_FORMAT_NV12, GST_VIDEO_FORMAT_I420),
                       ::testing::Bool()),
    [](const ::testing::TestParamInfo<OverlayCase>& info) {
      return std::string(gst_video_format_to_string(std::get<0>(info.param))) +
             (std::get<1>(info.param) ? "_padded" : "_default");
    });

// unique-id picks one producer; labels and keypoints can be switched off.
TEST(EdgeOverlay, PropertiesPickWhatIsDrawn) {
  EI_SKIP_WITHOUT_PHOTO();
  const Frame frame = photoFrame(GST_VIDEO_FORMAT_RGBA, true);
  auto results =
      sampleResults(GST_VIDEO_INFO_WIDTH(&frame.info), GST_VIDEO_INFO_HEIGHT(&frame.info));
  {
    Frame want = frame;
    Expected(want).draw({&results[1]}, Style{});
    const Frame got = overlay(frame, results, "unique-id=9");
    EXPECT_TRUE(got.bytes == want.bytes) << frameDifference(got, want);
  }
  {
    // Without labels and keypoints only the boxes remain: the same as drawing results whose
    // objects have no keypoints, with the label step skipped. Draw boxes by hand.
    Frame want = frame;
    Expected e(want);
    for (const eg::Object& o : results[0].objects) {
      const auto& b = o.detection.box;
      const cv::Point p1(static_cast<int>(std::lround(b.x1)), static_cast<int>(std::lround(b.y1)));
      const cv::Point p2(static_cast<int>(std::lround(b.x2)) - 1,
                         static_cast<int>(std::lround(b.y2)) - 1);
      if (p2.x >= p1.x && p2.y >= p1.y) e.rect(p1, p2, classColour(o.detection.classId), 2);
    }
    const Frame got = overlay(frame, {results[0]}, "draw-labels=false draw-keypoints=false");
    EXPECT_TRUE(got.bytes == want.bytes) << frameDifference(got, want);
  }
}

// A frame without a meta passes untouched; results for a larger frame are scaled to this one.
TEST(EdgeOverlay, NoMetaNoChangeAndResultsFittedToTheFrame) {
  EI_SKIP_WITHOUT_PHOTO();
  const Frame frame = photoFrame(GST_VIDEO_FORMAT_NV12, true);
  const int w = GST_VIDEO_INFO_WIDTH(&frame.info), h = GST_VIDEO_INFO_HEIGHT(&frame.info);
  EXPECT_TRUE(overlay(frame, {}).bytes == frame.bytes);

  auto results = sampleResults(w, h);
  eg::Results doubled = results[0];
  doubled.width = 2 * w;
  doubled.height = 2 * h;
  for (eg::Object& o : doubled.objects) {
    auto& b = o.detection.box;
    b.x1 *= 2, b.y1 *= 2, b.x2 *= 2, b.y2 *= 2;
    for (auto& k : o.detection.keypoints) k.x *= 2, k.y *= 2;
  }
  Frame want = frame;
  Expected(want).draw({&results[0]}, Style{});
  const Frame got = overlay(frame, {doubled});
  EXPECT_TRUE(got.bytes == want.bytes) << frameDifference(got, want);
}

TEST(EdgeOverlayErrors, Gray8IsNotDrawnOn_n) {
  GstHarness* h = harnessFor("edgeoverlay", "");
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps_str(h, "video/x-raw,format=GRAY8,width=64,height=48,framerate=30/1");
  EXPECT_EQ(gst_harness_push(h, gst_buffer_new_allocate(nullptr, 64 * 48, nullptr)),
            GST_FLOW_NOT_NEGOTIATED);
  gst_harness_teardown(h);
}

TEST(EdgeOverlayErrors, BufferSmallerThanItsCaps_n) {
  GstBus* bus = gst_bus_new();
  GstHarness* h = harnessFor("edgeoverlay", "", bus);
  ASSERT_NE(h, nullptr);
  gst_harness_set_src_caps_str(h, "video/x-raw,format=RGB,width=64,height=48,framerate=30/1");
  GstBuffer* small = gst_buffer_new_allocate(nullptr, 100, nullptr);
  eg::Results r;
  r.objects.push_back(object(0, {1, 1, 10, 10}, 0.9f, "x"));
  eg::addMeta(small, r);
  EXPECT_EQ(gst_harness_push(h, small), GST_FLOW_ERROR);
  GstMessage* m = gst_bus_pop_filtered(bus, GST_MESSAGE_ERROR);
  ASSERT_NE(m, nullptr);
  GError* err = nullptr;
  gst_message_parse_error(m, &err, nullptr);
  EXPECT_NE(std::string(err->message).find("cannot map the frame"), std::string::npos)
      << err->message;
  g_error_free(err);
  gst_message_unref(m);
  gst_harness_teardown(h);
  gst_object_unref(bus);
}

}  // namespace
