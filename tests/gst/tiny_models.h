// Small generated models the GStreamer tests run through edgeinfer (besides the real BlazeFace).
#pragma once

#include <cstdint>
#include <string>

#include "test_model.h"

namespace eitest {

// A detector (YOLOv8 layout, 16x16 input; `batch` -1: a dynamic batch dimension): Conv 3->6
// (8x8, stride 8) -> rows 0-3 a box around the centre, rows 4-5 two class scores.
struct TinyDetector {
  edgeinfer::test::TempDir dir;
  std::string config;
  explicit TinyDetector(int64_t batch = 1) {
    edgeinfer::test::TestModel m;
    m.input("images", {batch, 3, 16, 16})
        .randomInitializer("w", {6, 3, 8, 8}, 5, -0.05f, 0.05f)
        .initializerI64("shape", {3}, {batch < 0 ? -1 : batch, 6, 4})
        .initializerI64("split", {2}, {4, 2})
        .initializer("half", {1}, {0.5f})
        .initializer("centre", {1, 4, 1}, {8.f, 8.f, 10.f, 10.f})
        .initializer("one", {1}, {1.f})
        .output("output0");
    auto& conv = m.node("Conv", {"images", "w"}, {"c"});
    edgeinfer::test::TestModel::attrInts(conv, "kernel_shape", {8, 8});
    edgeinfer::test::TestModel::attrInts(conv, "strides", {8, 8});
    m.node("Reshape", {"c", "shape"}, {"r"});
    auto& split = m.node("Split", {"r", "split"}, {"box", "cls"});
    edgeinfer::test::TestModel::attr(split, "axis", 1);
    m.node("Mul", {"box", "half"}, {"b1"});
    m.node("Add", {"b1", "centre"}, {"boxp"});
    m.node("Add", {"cls", "one"}, {"c1"});
    m.node("Sigmoid", {"c1"}, {"clsp"});
    auto& cat = m.node("Concat", {"boxp", "clsp"}, {"output0"});
    edgeinfer::test::TestModel::attr(cat, "axis", 1);
    dir.write("tiny.onnx", m.bytes());
    config = dir.write("tiny.json", R"({
      "name": "tiny-detector", "model": "tiny.onnx", "labels": ["a", "b"],
      "input": {"tensor": "images", "width": 16, "height": 16, "layout": "NCHW",
                "resize": "stretch", "channels": "RGB", "scale": 0.00392156862745098},
      "decoder": {"type": "yolov8", "output": "output0", "num_classes": 2,
                  "score_threshold": 0.25, "iou_threshold": 0.45}
    })");
  }
};

// A classifier with a dynamic batch (the secondary of the chain tests): [N,3,32,32] -> Conv 3->4
// (8x8, stride 8) -> GlobalAveragePool -> Flatten -> "output" [N,4]; config with four labels,
// top 3, softmax.
struct TinyClassifier {
  edgeinfer::test::TempDir dir;
  std::string config;
  TinyClassifier() {
    edgeinfer::test::TestModel m;
    m.input("input", {-1, 3, 32, 32}).randomInitializer("w", {4, 3, 8, 8}, 11).output("output");
    auto& conv = m.node("Conv", {"input", "w"}, {"c"});
    edgeinfer::test::TestModel::attrInts(conv, "kernel_shape", {8, 8});
    edgeinfer::test::TestModel::attrInts(conv, "strides", {8, 8});
    m.node("GlobalAveragePool", {"c"}, {"p"});
    m.node("Flatten", {"p"}, {"output"});
    dir.write("classifier.onnx", m.bytes());
    config = dir.write("classifier.json", R"({
      "name": "tiny-classifier", "model": "classifier.onnx",
      "labels": ["cat", "dog", "bird", "fish"],
      "input": {"tensor": "input", "width": 32, "height": 32, "layout": "NCHW",
                "resize": "stretch", "channels": "RGB", "scale": 0.00392156862745098},
      "decoder": {"type": "classification", "output": "output", "top_k": 3, "softmax": true}
    })");
  }
};

}  // namespace eitest
