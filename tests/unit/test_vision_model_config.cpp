// Model configs: the shipped configs parse to what they say, and every kind of mistake in a
// config is an error naming the file and the field.
#include <gtest/gtest.h>

#include <fstream>

#include "edgeinfer/vision/model_config.h"
#include "test_model.h"

namespace edgeinfer::vision {
namespace {

/// <repo>/models, from EDGEINFER_TEST_DATA_DIR = <repo>/tests/data (which need not exist).
std::string modelsDir() {
  std::string d = EDGEINFER_TEST_DATA_DIR;
  const std::string suffix = "/tests/data";
  if (d.size() >= suffix.size() && d.compare(d.size() - suffix.size(), suffix.size(), suffix) == 0)
    d.resize(d.size() - suffix.size());
  return d + "/models";
}

TEST(ModelConfig, ShippedBlazeFaceConfig) {
  auto c = loadModelConfig(modelsDir() + "/blazeface/model.json");
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(c->name, "blazeface-front");
  EXPECT_EQ(c->inputTensor, "input:0");
  EXPECT_EQ(c->modelPath, modelsDir() + "/blazeface/blazeface_front_128.onnx");
  EXPECT_EQ(c->preprocess.outputWidth, 128);
  EXPECT_EQ(c->preprocess.layout, TensorLayout::kNHWC);
  EXPECT_EQ(c->preprocess.resize, ResizeMode::kLetterbox);
  EXPECT_FLOAT_EQ(c->preprocess.mean[2], 1.f);
  EXPECT_EQ(c->decoder, DecoderType::kSsd);
  EXPECT_EQ(c->ssd.boxOutputs, (std::vector<std::string>{"Identity_2:0", "Identity_3:0"}));
  EXPECT_EQ(c->ssd.nms.method, NmsMethod::kWeighted) << "BlazeFace defaults kept";
  EXPECT_EQ(c->ssd.anchors.inputWidth, 128);
  EXPECT_EQ(c->ssd.labels, (std::vector<std::string>{"face"}));
  auto anchors = generateSsdAnchors(c->ssd.anchors);
  ASSERT_TRUE(anchors.ok());
  EXPECT_EQ(anchors->size(), 896u);
}

TEST(ModelConfig, ShippedTemplates) {
  auto y = loadModelConfig(modelsDir() + "/yolov8/model.json");
  ASSERT_TRUE(y.ok()) << y.status().toString();
  EXPECT_EQ(y->decoder, DecoderType::kYoloV8);
  EXPECT_EQ(y->yolov8.numClasses, 80);
  EXPECT_EQ(y->yolov8.inputWidth, 640);
  EXPECT_FLOAT_EQ(y->preprocess.padValue[1], 114.f);
  auto k = loadModelConfig(modelsDir() + "/imagenet-classifier/model.json");
  ASSERT_TRUE(k.ok()) << k.status().toString();
  EXPECT_EQ(k->decoder, DecoderType::kClassification);
  EXPECT_TRUE(k->classify.applySoftmax);
  EXPECT_EQ(k->preprocess.resize, ResizeMode::kCenterCrop);
  EXPECT_FLOAT_EQ(k->preprocess.std[0], 0.229f);
  auto d = loadModelConfig(modelsDir() + "/paddleocr/model.json");
  ASSERT_TRUE(d.ok()) << d.status().toString();
  EXPECT_EQ(d->decoder, DecoderType::kSegmentation);
  EXPECT_FLOAT_EQ(d->segmentation.threshold, 0.3f);
  EXPECT_EQ(d->outputTensor, "sigmoid_0.tmp_0");
}

TEST(ModelConfig, LabelsFileAndYoloV5) {
  test::TempDir dir;
  dir.write("labels.txt", "cat\ndog\r\n\n");
  dir.write("m.json", R"({"model": "y.onnx", "labels": "labels.txt",
    "input": {"tensor": "x", "width": 64, "height": 32},
    "decoder": {"type": "yolov5", "output": "out", "num_classes": 2, "logits": true,
                "nms": "hard", "class_agnostic": true}})");
  auto c = loadModelConfig(dir.file("m.json"));
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_EQ(c->labels, (std::vector<std::string>{"cat", "dog"}));
  EXPECT_EQ(c->yolov5.labels, c->labels);
  EXPECT_TRUE(c->yolov5.scoresAreLogits);
  EXPECT_TRUE(c->yolov5.nms.classAgnostic);
  EXPECT_EQ(c->modelPath, dir.file("y.onnx"));
}

/// The error of `text` must name `field` and contain `what`.
void expectError(const std::string& text, const std::string& field, const std::string& what) {
  auto c = parseModelConfig(text, "cfg.json", "/nowhere");
  ASSERT_FALSE(c.ok()) << text;
  EXPECT_EQ(c.status().code(), ErrorCode::kInvalidArgument);
  const std::string m = c.status().message();
  EXPECT_NE(m.find("cfg.json"), std::string::npos) << m;
  EXPECT_NE(m.find(field), std::string::npos) << "want field " << field << " in: " << m;
  EXPECT_NE(m.find(what), std::string::npos) << "want '" << what << "' in: " << m;
}

const char* kInput = R"("input": {"tensor": "x", "width": 8, "height": 8})";
const char* kDecoder = R"("decoder": {"type": "segmentation", "output": "y"})";

std::string cfg(const std::string& top, const std::string& input = kInput,
                const std::string& decoder = kDecoder) {
  return "{\"model\": \"m.onnx\", " + input + ", " + decoder + (top.empty() ? "" : ", " + top) +
         "}";
}

TEST(ModelConfig, SyntaxAndStructureErrors_n) {
  expectError("{", "", "not valid JSON");
  expectError("[1]", "", "expected a JSON object");
  expectError(R"({"input": {}, "decoder": {}})", "model", "required");
  expectError(R"({"model": "m.onnx", "decoder": {"type": "segmentation", "output": "y"}})", "input",
              "required");
  expectError(cfg("", kInput, R"("decoder": 3)"), "decoder", "expected an object");
}

TEST(ModelConfig, UnknownKeysAreTypos_n) {
  expectError(cfg("\"lables\": [\"a\"]"), "lables", "unknown key");
  expectError(cfg("", R"("input": {"tensor": "x", "width": 8, "height": 8, "widht": 3})"),
              "input.widht", "unknown key");
  expectError(cfg("", kInput, R"("decoder": {"type": "segmentation", "output": "y", "k": 1})"),
              "decoder.k", "unknown key");
}

TEST(ModelConfig, WrongTypesAndRanges_n) {
  expectError(cfg("", R"("input": {"tensor": "x", "width": "8", "height": 8})"), "input.width",
              "expected an integer");
  expectError(cfg("", R"("input": {"tensor": "x", "width": 0, "height": 8})"), "input.width",
              "expected an integer");
  expectError(cfg("", R"("input": {"tensor": 5, "width": 8, "height": 8})"), "input.tensor",
              "non-empty string");
  expectError(cfg("", R"("input": {"tensor": "x", "width": 8, "height": 8, "layout": "CHW"})"),
              "input.layout", "NCHW, NHWC");
  expectError(cfg("", R"("input": {"tensor": "x", "width": 8, "height": 8, "mean": [1, 2]})"),
              "input.mean", "3 numbers");
  expectError(cfg("", R"("input": {"tensor": "x", "width": 8, "height": 8, "std": 0})"), "input",
              "std");
  expectError(cfg("", kInput,
                  R"("decoder": {"type": "yolov8", "output": "y", "num_classes": 2,
                                 "iou_threshold": 1.5})"),
              "decoder.iou_threshold", "in [0, 1]");
  expectError(cfg("", kInput, R"("decoder": {"type": "yolov8", "output": "y"})"),
              "decoder.num_classes", "required");
  expectError(cfg("", kInput, R"("decoder": {"type": "yolo-nas", "output": "y"})"), "decoder.type",
              "unknown decoder");
  expectError(cfg("", kInput, R"("decoder": {"type": "ssd", "box_outputs": ["b"]})"),
              "decoder.box_outputs", "score_outputs");
  expectError(
      cfg("", kInput, R"("decoder": {"type": "blazeface-front", "anchors": {"min_scal": 1}})"),
      "decoder.anchors.min_scal", "unknown key");
}

TEST(ModelConfig, SegmentationThreshold) {
  auto c = parseModelConfig(cfg("", kInput, kDecoder), "cfg.json", "/nowhere");
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_FLOAT_EQ(c->segmentation.threshold, 0.5f);
  c = parseModelConfig(
      cfg("", kInput, R"("decoder": {"type": "segmentation", "output": "y", "threshold": -1.5})"),
      "cfg.json", "/nowhere");
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_FLOAT_EQ(c->segmentation.threshold, -1.5f);
  expectError(
      cfg("", kInput, R"("decoder": {"type": "segmentation", "output": "y", "threshold": "0.3"})"),
      "decoder.threshold", "number");
}

TEST(ModelConfig, LabelsErrors_n) {
  expectError(cfg("\"labels\": \"missing.txt\""), "labels", "cannot read the labels file");
  expectError(cfg("\"labels\": [\"a\", 2]"), "labels", "expected strings");
  expectError(cfg("\"labels\": [\"a\"]", kInput,
                  R"("decoder": {"type": "yolov5", "output": "y", "num_classes": 3})"),
              "labels", "1 labels for 3 classes");
  test::TempDir dir;
  dir.write("empty.txt", "\n\n");
  dir.write("m.json", cfg("\"labels\": \"empty.txt\""));
  auto c = loadModelConfig(dir.file("m.json"));
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("is empty"), std::string::npos) << c.status().toString();
}

TEST(ModelConfig, MissingFile_n) {
  auto c = loadModelConfig("/nonexistent/model.json");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(c.status().message().find("/nonexistent/model.json"), std::string::npos);
}

}  // namespace
}  // namespace edgeinfer::vision
