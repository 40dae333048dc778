// VisionModel (config -> engine -> preprocess -> run -> decode) on real data: the BlazeFace
// face detector (models/fetch.sh) on real photographs with hand-labelled faces (Debian's
// libdlib19.1, scripts/fetch_media.sh), on the CPU and, where a GPU is usable, on the GPU
// against the CPU; and the errors a user gets for a config that does not fit the model.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "edgeinfer/vision/vision_model.h"

#if EDGEINFER_HAVE_CUDA
#include "tactic_test_util.h"
#endif

namespace edgeinfer::vision {
namespace {

bool exists(const std::string& p) {
  struct stat st {};
  return stat(p.c_str(), &st) == 0;
}

std::string repoRoot() {
  std::string root = EDGEINFER_TEST_DATA_DIR;  // <repo>/tests/data
  return root.substr(0, root.size() - std::string("/tests/data").size());
}

std::string mediaDir() {
  if (const char* e = std::getenv("EDGEINFER_MEDIA_DIR")) return e;
  return EDGEINFER_TEST_MEDIA_DIR;
}

std::string modelsDir() {
  if (const char* e = std::getenv("EDGEINFER_MODELS_DIR")) return e;
  return repoRoot() + "/models";
}

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

// A new, empty directory for this test process.
std::string tempDir(const std::string& name) {
  std::string d = ::testing::TempDir() + "edgeinfer_vm_" + name + "_XXXXXX";
  EXPECT_NE(mkdtemp(d.data()), nullptr) << d;
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
#endif

}  // namespace
}  // namespace edgeinfer::vision
