#include "gst_test_util.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace eitest {

bool exists(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0;
}

std::string modelsDir() {
  if (const char* e = std::getenv("EDGEINFER_MODELS_DIR")) return e;
  return std::string(EDGEINFER_TEST_REPO_DIR) + "/models";
}

std::string mediaDir() {
  if (const char* e = std::getenv("EDGEINFER_MEDIA_DIR")) return e;
  return EDGEINFER_TEST_MEDIA_DIR;
}

std::string blazeFace(const std::string& config) {
  return modelsDir() + "/blazeface/" + config;
}

std::string engineCacheDir() {
  // Made once a process and removed with its engines when the process ends.
  struct Made {
    std::string dir;
    Made() {
      std::string d = ::testing::TempDir() + "edgeinfer_gst_engines_XXXXXX";
      if (mkdtemp(d.data())) dir = d;
    }
    ~Made() {
      std::error_code ec;
      if (!dir.empty()) std::filesystem::remove_all(dir, ec);
    }
  };
  static const Made made;
  return made.dir.empty() ? std::string("/tmp") : made.dir;
}

bool readPpm(const std::string& path, Image& img) {
  std::ifstream f(path, std::ios::binary);
  std::string magic;
  int maxval = 0;
  if (!(f >> magic >> img.width >> img.height >> maxval) || magic != "P6" || maxval != 255)
    return false;
  f.get();
  img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
  return static_cast<bool>(f.read(reinterpret_cast<char*>(img.rgb.data()),
                                  static_cast<std::streamsize>(img.rgb.size())));
}

Image cropImage(const Image& img, int width, int height) {
  Image out;
  out.width = width;
  out.height = height;
  for (int y = 0; y < height; ++y) {
    const uint8_t* row = img.rgb.data() + static_cast<size_t>(y) * img.width * 3;
    out.rgb.insert(out.rgb.end(), row, row + 3 * width);
  }
  return out;
}

edgeinfer::vision::FrameView Frame::view() const {
  edgeinfer::vision::FrameView v;
  edgeinfer::vision::PixelFormat f{};
  const std::string name = gst_video_format_to_string(GST_VIDEO_INFO_FORMAT(&info));
  auto parsed = edgeinfer::vision::parsePixelFormat(name);
  EXPECT_TRUE(parsed.ok()) << name;
  if (parsed.ok()) f = *parsed;
  v.format = f;
  v.width = GST_VIDEO_INFO_WIDTH(&info);
  v.height = GST_VIDEO_INFO_HEIGHT(&info);
  for (guint p = 0; p < GST_VIDEO_INFO_N_PLANES(&info); ++p) {
    v.planes[p] = bytes.data() + offsets[p];
    v.strides[p] = strides[p];
  }
  return v;
}

GstBuffer* Frame::buffer(GstClockTime pts) const {
  GstBuffer* b = gst_buffer_new_allocate(nullptr, bytes.size(), nullptr);
  gst_buffer_fill(b, 0, bytes.data(), bytes.size());
  if (padded)
    gst_buffer_add_video_meta_full(b, GST_VIDEO_FRAME_FLAG_NONE, GST_VIDEO_INFO_FORMAT(&info),
                                   GST_VIDEO_INFO_WIDTH(&info), GST_VIDEO_INFO_HEIGHT(&info),
                                   GST_VIDEO_INFO_N_PLANES(&info), const_cast<gsize*>(offsets),
                                   const_cast<gint*>(strides));
  GST_BUFFER_PTS(b) = pts;
  return b;
}

GstCaps* Frame::caps() const {
  GstCaps* c = gst_video_info_to_caps(&info);
  gst_caps_set_simple(c, "framerate", GST_TYPE_FRACTION, 30, 1, nullptr);
  return c;
}

namespace {

struct Yuv {
  int y, u, v;
};
// BT.601 limited range, integers.
Yuv toYuv(int r, int g, int b) {
  return {16 + ((66 * r + 129 * g + 25 * b + 128) >> 8),
          128 + ((-38 * r - 74 * g + 112 * b + 128) >> 8),
          128 + ((112 * r - 94 * g - 18 * b + 128) >> 8)};
}

}  // namespace

Frame makeFrame(const Image& img, GstVideoFormat format, bool padded) {
  Frame f;
  f.padded = padded;
  gst_video_info_set_format(&f.info, format, static_cast<guint>(img.width),
                            static_cast<guint>(img.height));
  const guint planes = GST_VIDEO_INFO_N_PLANES(&f.info);
  if (!padded) {
    for (guint p = 0; p < planes; ++p) {
      f.offsets[p] = GST_VIDEO_INFO_PLANE_OFFSET(&f.info, p);
      f.strides[p] = GST_VIDEO_INFO_PLANE_STRIDE(&f.info, p);
    }
    f.bytes.assign(GST_VIDEO_INFO_SIZE(&f.info), 0xA5);
  } else {
    // Odd strides (row + 3 for plane 0, row + 5 for chroma) and a 7-byte gap between planes.
    gsize offset = 0;
    for (guint p = 0; p < planes; ++p) {
      const int comp = static_cast<int>(p);  // plane p starts with component p in these formats
      const int rowBytes =
          GST_VIDEO_INFO_COMP_WIDTH(&f.info, comp) * GST_VIDEO_INFO_COMP_PSTRIDE(&f.info, comp);
      const int rows = GST_VIDEO_INFO_COMP_HEIGHT(&f.info, comp);
      f.offsets[p] = offset;
      f.strides[p] = rowBytes + (p == 0 ? 3 : 5);
      offset += static_cast<gsize>(f.strides[p]) * static_cast<gsize>(rows) + 7;
    }
    f.bytes.assign(offset, 0xA5);
  }
  const int w = img.width, h = img.height;
  auto px = [&](int x, int y, int c) {
    return static_cast<int>(img.rgb[(static_cast<size_t>(y) * w + x) * 3 + static_cast<size_t>(c)]);
  };
  auto row = [&](guint p, int y) {
    return f.bytes.data() + f.offsets[p] + static_cast<size_t>(y) * f.strides[p];
  };
  switch (format) {
    case GST_VIDEO_FORMAT_RGBA:
    case GST_VIDEO_FORMAT_BGRA:
    case GST_VIDEO_FORMAT_RGBx:
    case GST_VIDEO_FORMAT_BGRx:
    case GST_VIDEO_FORMAT_RGB:
    case GST_VIDEO_FORMAT_BGR: {
      const bool bgr = format == GST_VIDEO_FORMAT_BGRA || format == GST_VIDEO_FORMAT_BGRx ||
                       format == GST_VIDEO_FORMAT_BGR;
      const int bpp = format == GST_VIDEO_FORMAT_RGB || format == GST_VIDEO_FORMAT_BGR ? 3 : 4;
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
          uint8_t* d = row(0, y) + x * bpp;
          for (int c = 0; c < 3; ++c) d[c] = static_cast<uint8_t>(px(x, y, bgr ? 2 - c : c));
          if (bpp == 4) d[3] = 255;
        }
      break;
    }
    case GST_VIDEO_FORMAT_GRAY8:
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          row(0, y)[x] = static_cast<uint8_t>(
              (9798 * px(x, y, 0) + 19235 * px(x, y, 1) + 3735 * px(x, y, 2) + (1 << 14)) >> 15);
      break;
    case GST_VIDEO_FORMAT_NV12:
    case GST_VIDEO_FORMAT_I420: {
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
          row(0, y)[x] = static_cast<uint8_t>(toYuv(px(x, y, 0), px(x, y, 1), px(x, y, 2)).y);
      for (int cy = 0; cy < (h + 1) / 2; ++cy)
        for (int cx = 0; cx < (w + 1) / 2; ++cx) {
          int sum[3] = {0, 0, 0}, n = 0;
          for (int dy = 0; dy < 2; ++dy)
            for (int dx = 0; dx < 2; ++dx) {
              const int x = 2 * cx + dx, y = 2 * cy + dy;
              if (x >= w || y >= h) continue;
              for (int c = 0; c < 3; ++c) sum[c] += px(x, y, c);
              ++n;
            }
          const Yuv c = toYuv(sum[0] / n, sum[1] / n, sum[2] / n);
          if (format == GST_VIDEO_FORMAT_NV12) {
            row(1, cy)[2 * cx] = static_cast<uint8_t>(c.u);
            row(1, cy)[2 * cx + 1] = static_cast<uint8_t>(c.v);
          } else {
            row(1, cy)[cx] = static_cast<uint8_t>(c.u);
            row(2, cy)[cx] = static_cast<uint8_t>(c.v);
          }
        }
      break;
    }
    default:
      ADD_FAILURE() << "makeFrame: no conversion to " << gst_video_format_to_string(format);
  }
  return f;
}

Frame readBack(GstBuffer* buffer, const Frame& like) {
  Frame out = like;
  out.bytes.assign(like.bytes.size(), 0);
  EXPECT_EQ(gst_buffer_get_size(buffer), like.bytes.size());
  gst_buffer_extract(buffer, 0, out.bytes.data(), out.bytes.size());
  return out;
}

std::string frameDifference(const Frame& got, const Frame& want) {
  size_t n = 0, first = 0;
  for (size_t i = 0; i < want.bytes.size() && i < got.bytes.size(); ++i)
    if (got.bytes[i] != want.bytes[i] && n++ == 0) first = i;
  if (n == 0) return "identical";
  guint plane = 0;
  for (guint p = 0; p < GST_VIDEO_INFO_N_PLANES(&want.info); ++p)
    if (first >= want.offsets[p]) plane = p;
  const size_t rel = first - want.offsets[plane];
  return std::to_string(n) + " bytes differ, first in plane " + std::to_string(plane) + " row " +
         std::to_string(rel / static_cast<size_t>(want.strides[plane])) + " byte " +
         std::to_string(rel % static_cast<size_t>(want.strides[plane])) + ": got " +
         std::to_string(got.bytes[first]) + " want " + std::to_string(want.bytes[first]);
}

GstHarness* harnessFor(const std::string& factory, const std::string& props, GstBus* bus) {
  const std::string desc = factory + " " + props;
  GError* err = nullptr;
  GstElement* e = gst_parse_launch(desc.c_str(), &err);
  if (!e) {
    ADD_FAILURE() << "cannot make '" << desc << "': " << (err ? err->message : "?");
    if (err) g_error_free(err);
    return nullptr;
  }
  if (bus) gst_element_set_bus(e, bus);
  const bool sink = GST_IS_BASE_SINK(e);
  GstHarness* h = gst_harness_new_with_element(e, "sink", sink ? nullptr : "src");
  gst_object_unref(e);
  return h;
}

Outcome runPipeline(const std::string& description, std::chrono::milliseconds timeout,
                    const std::function<void(GstElement*)>& setup) {
  Outcome o;
  GError* err = nullptr;
  GstElement* pipeline = gst_parse_launch(description.c_str(), &err);
  if (!pipeline || err) {
    o.errorText = err ? err->message : "parse failed";
    if (err) g_error_free(err);
    if (pipeline) gst_object_unref(pipeline);
    return o;
  }
  o.parsed = true;
  GstBus* bus = gst_element_get_bus(pipeline);
  if (setup) setup(pipeline);
  o.start = gst_element_set_state(pipeline, GST_STATE_PLAYING);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::nanoseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      o.timedOut = true;
      break;
    }
    GstMessage* m = gst_bus_timed_pop_filtered(
        bus, static_cast<GstClockTime>(left.count()),
        static_cast<GstMessageType>(GST_MESSAGE_ERROR | GST_MESSAGE_EOS | GST_MESSAGE_WARNING));
    if (!m) {
      o.timedOut = true;
      break;
    }
    const std::string src = GST_MESSAGE_SRC_NAME(m) ? GST_MESSAGE_SRC_NAME(m) : "?";
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_WARNING) {
      GError* w = nullptr;
      gchar* debug = nullptr;
      gst_message_parse_warning(m, &w, &debug);
      o.warnings.push_back(src + ": " + (w ? w->message : ""));
      if (w) g_error_free(w);
      g_free(debug);
      gst_message_unref(m);
      continue;
    }
    if (GST_MESSAGE_TYPE(m) == GST_MESSAGE_EOS) {
      o.eos = true;
    } else {
      GError* e = nullptr;
      gchar* debug = nullptr;
      gst_message_parse_error(m, &e, &debug);
      o.error = true;
      o.errorSource = src;
      o.errorText = e ? e->message : "";
      o.errorDomain = e ? e->domain : 0;
      o.errorCode = e ? e->code : 0;
      o.errorDebug = debug ? debug : "";
      if (e) g_error_free(e);
      g_free(debug);
    }
    gst_message_unref(m);
    break;
  }
  const auto t0 = std::chrono::steady_clock::now();
  gst_element_set_state(pipeline, GST_STATE_NULL);
  o.stopSeconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  gst_object_unref(bus);
  gst_object_unref(pipeline);
  return o;
}

std::string describe(const Outcome& o) {
  std::string s = std::string("parsed=") + (o.parsed ? "yes" : "no") +
                  " start=" + gst_element_state_change_return_get_name(o.start) +
                  " eos=" + (o.eos ? "yes" : "no") + " timedOut=" + (o.timedOut ? "yes" : "no");
  if (o.error) s += " error from " + o.errorSource + ": " + o.errorText + " [" + o.errorDebug + "]";
  for (const std::string& w : o.warnings) s += " warning " + w;
  return s;
}

void expectSameDetections(const std::vector<edgeinfer::gst::Object>& got,
                          const std::vector<edgeinfer::vision::Detection>& want,
                          const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    const edgeinfer::vision::Detection& g = got[i].detection;
    const edgeinfer::vision::Detection& w = want[i];
    const std::string at = what + " detection " + std::to_string(i);
    EXPECT_EQ(g.box.x1, w.box.x1) << at;
    EXPECT_EQ(g.box.y1, w.box.y1) << at;
    EXPECT_EQ(g.box.x2, w.box.x2) << at;
    EXPECT_EQ(g.box.y2, w.box.y2) << at;
    EXPECT_EQ(g.score, w.score) << at;
    EXPECT_EQ(g.classId, w.classId) << at;
    EXPECT_EQ(g.label, w.label) << at;
    ASSERT_EQ(g.keypoints.size(), w.keypoints.size()) << at;
    for (size_t k = 0; k < w.keypoints.size(); ++k) {
      EXPECT_EQ(g.keypoints[k].x, w.keypoints[k].x) << at << " keypoint " << k;
      EXPECT_EQ(g.keypoints[k].y, w.keypoints[k].y) << at << " keypoint " << k;
      EXPECT_EQ(g.keypoints[k].score, w.keypoints[k].score) << at << " keypoint " << k;
    }
  }
}

Image photo(const std::string& path) {
  Image img;
  EXPECT_TRUE(readPpm(mediaDir() + "/" + path, img)) << path;
  return img;
}

}  // namespace eitest

// LeakSanitizer's defaults for this binary, read when a sanitizer build starts (LSAN_OPTIONS in
// the environment adds to them): GLib's one-time allocations are suppressed (lsan.supp says
// which and why; the plugin's and the SDK's memory never is). GLib is built without frame
// pointers, so the fast unwinder stops inside it and every allocation made through g_malloc
// would show the same two-frame stack; the slow unwinder gives whole stacks, so that a
// suppression can tell GLib's own allocations from the plugin's (the 10,000-frame run takes
// about 30 s instead of 3 s on 2 cores). Unused in builds without sanitizers.
extern "C" __attribute__((visibility("default"), used)) const char* __lsan_default_options() {
  return "suppressions=" EDGEINFER_GST_LSAN_SUPPRESSIONS
         ":print_suppressions=0:fast_unwind_on_malloc=0";
}

namespace {

// GStreamer is initialised once, for the tests (not when the tests are only listed), whatever
// the environment says: with the plugin of this build, as system plugins only the few the
// tests use (tests/gst/CMakeLists.txt links them into one directory), and a registry file of
// its own in the build directory, so that neither another build's plugin nor a stale user
// registry is ever used. (GStreamer reads the _1_0 names first.) Plugins are scanned in this
// process, not in gst-plugin-scanner: in a sanitizer build the plugin can only be loaded into
// an instrumented process.
class GstEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    for (const char* suffix : {"", "_1_0"}) {
      setenv((std::string("GST_PLUGIN_PATH") + suffix).c_str(), EDGEINFER_GST_PLUGIN_DIR, 1);
      setenv((std::string("GST_PLUGIN_SYSTEM_PATH") + suffix).c_str(), EDGEINFER_GST_TEST_PLUGINS,
             1);
      setenv((std::string("GST_REGISTRY") + suffix).c_str(), EDGEINFER_GST_REGISTRY, 1);
    }
    setenv("GST_REGISTRY_FORK", "no", 1);
    gst_init(nullptr, nullptr);
    GstElementFactory* f = gst_element_factory_find("edgeinfer");
    ASSERT_NE(f, nullptr) << "the edgeinfer plugin was not found in GST_PLUGIN_PATH="
                          << std::getenv("GST_PLUGIN_PATH");
    gst_object_unref(f);
  }
};

[[maybe_unused]] const auto* const kEnvironment =
    ::testing::AddGlobalTestEnvironment(new GstEnvironment);

}  // namespace
