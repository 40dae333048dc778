// Model configs (issue 4): everything an application or the GStreamer element needs to know
// about a network besides its weights — which input tensor takes the frame and how frames are
// preprocessed, which decoder turns the outputs into results, and the class labels. No network
// is hard-coded in C++: adding a YOLO variant is a new config file.
//
// Format: JSON (parsed with nlohmann-json), e.g. models/blazeface/model.json:
//
//   {
//     "name": "blazeface-front",
//     "model": "blazeface_front_128.onnx",          relative to the config's directory
//     "labels": ["face"],                          or "labels": "labels.txt" (one per line)
//     "input": {
//       "tensor": "input:0", "width": 128, "height": 128,
//       "layout": "NHWC",                          NCHW | NHWC
//       "dtype": "float32",                        float32 | float16
//       "resize": "letterbox",                     stretch | letterbox | center-crop
//       "interpolation": "bilinear",               bilinear | nearest
//       "channels": "RGB",                         RGB | BGR | GRAY
//       "scale": 0.00784313725, "mean": [1, 1, 1], "std": [1, 1, 1], "pad": [0, 0, 0]
//     },
//     "decoder": { "type": "blazeface-front" }     see DecoderType for every type and its keys
//   }
//
// Every key is checked: an unknown key (a typo), a value of the wrong type or out of range, a
// missing required key, or a labels file that cannot be read is an error naming the file and
// the field ("model.json: input.width: expected a positive integer, got \"128\"").
#pragma once

#include <string>
#include <vector>

#include "edgeinfer/status.h"
#include "edgeinfer/vision/postprocess.h"
#include "edgeinfer/vision/preprocess.h"

namespace edgeinfer::vision {

enum class DecoderType : uint8_t {
  /// "classification": keys output, top_k, softmax.
  kClassification,
  /// "yolov5": keys output, num_classes, logits, multi_label + NMS keys.
  kYoloV5,
  /// "yolov8": keys output, num_classes, logits, multi_label, raw_dfl, reg_max, strides
  /// + NMS keys.
  kYoloV8,
  /// "ssd": keys box_outputs, score_outputs, num_classes, num_coords, num_keypoints,
  /// x_scale/y_scale/w_scale/h_scale, sigmoid_score, score_clipping, and "anchors": {num_layers,
  /// min_scale, max_scale, strides, aspect_ratios, offset_x, offset_y, fixed_anchor_size,
  /// reduce_boxes_in_lowest_layer, interpolated_scale_aspect_ratio} + NMS keys.
  /// "blazeface-front" / "blazeface-back" start from MediaPipe's BlazeFace settings
  /// (blazeFaceFrontParams / blazeFaceBackParams) and take the same keys as overrides.
  kSsd,
  /// "segmentation": keys output, threshold (a map of one channel: foreground above it).
  kSegmentation,
};
/// NMS keys of the detection decoders: score_threshold, iou_threshold, max_detections,
/// class_agnostic, nms ("hard" | "weighted").

struct ModelConfig {
  std::string sourcePath;  ///< the file it was read from ("" when parsed from text)
  std::string name;
  std::string modelPath;    ///< the ONNX model, resolved against the config's directory
  std::string inputTensor;  ///< the input that takes the preprocessed frame
  PreprocessConfig preprocess;
  DecoderType decoder = DecoderType::kClassification;
  std::string decoderName;   ///< as written ("blazeface-front", "yolov8", ...)
  std::string outputTensor;  ///< classification / yolo / segmentation: the output decoded
  ClassifyParams classify;
  YoloV5Params yolov5;
  YoloV8Params yolov8;
  SsdParams ssd;
  SegmentationParams segmentation;
  std::vector<std::string> labels;  ///< also copied into the decoder's params
};

/// Reads and checks a config file: kNotFound when it does not exist, kInvalidArgument naming
/// the file and field for anything wrong in it.
Expected<ModelConfig> loadModelConfig(const std::string& path);
/// Parses config text; `sourceName` prefixes error messages, relative paths (model, labels
/// file) resolve against `baseDir`.
Expected<ModelConfig> parseModelConfig(const std::string& text, const std::string& sourceName,
                                       const std::string& baseDir);

}  // namespace edgeinfer::vision
