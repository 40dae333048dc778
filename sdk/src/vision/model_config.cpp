#include "edgeinfer/vision/model_config.h"

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace edgeinfer::vision {
namespace {

using nlohmann::json;

/// Reads fields of one JSON object, remembering which keys were used so that any other key
/// (a typo) can be reported; every error names the source and the dotted field path.
class Reader {
 public:
  Reader(const json& obj, std::string source, std::string prefix)
      : obj_(obj), source_(std::move(source)), prefix_(std::move(prefix)) {}

  Status fail(const std::string& key, const std::string& what) const {
    return Status(ErrorCode::kInvalidArgument, source_ + ": " + prefix_ + key + ": " + what);
  }
  const json* get(const std::string& key) {
    used_.insert(key);
    const auto it = obj_.find(key);
    return it == obj_.end() ? nullptr : &*it;
  }
  Status str(const std::string& key, std::string* out, bool required = false) {
    const json* v = get(key);
    if (!v) return required ? fail(key, "required") : Status::Ok();
    if (!v->is_string() || v->get<std::string>().empty())
      return fail(key, "expected a non-empty string, got " + v->dump());
    *out = v->get<std::string>();
    return Status::Ok();
  }
  Status integer(const std::string& key, int* out, int lo, int hi, bool required = false) {
    const json* v = get(key);
    if (!v) return required ? fail(key, "required") : Status::Ok();
    if (!v->is_number_integer() || v->get<int64_t>() < lo || v->get<int64_t>() > hi)
      return fail(key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                           "], got " + v->dump());
    *out = static_cast<int>(v->get<int64_t>());
    return Status::Ok();
  }
  Status number(const std::string& key, float* out, double lo, double hi) {
    const json* v = get(key);
    if (!v) return Status::Ok();
    if (!v->is_number() || !std::isfinite(v->get<double>()) || v->get<double>() < lo ||
        v->get<double>() > hi) {
      std::ostringstream os;
      os << "expected a number in [" << lo << ", " << hi << "], got " << v->dump();
      return fail(key, os.str());
    }
    *out = static_cast<float>(v->get<double>());
    return Status::Ok();
  }
  Status boolean(const std::string& key, bool* out) {
    const json* v = get(key);
    if (!v) return Status::Ok();
    if (!v->is_boolean()) return fail(key, "expected true or false, got " + v->dump());
    *out = v->get<bool>();
    return Status::Ok();
  }
  Status triple(const std::string& key, std::array<float, 3>* out) {
    const json* v = get(key);
    if (!v) return Status::Ok();
    if (v->is_number() && std::isfinite(v->get<double>())) {
      out->fill(static_cast<float>(v->get<double>()));
      return Status::Ok();
    }
    if (!v->is_array() || v->size() != 3)
      return fail(key, "expected a number or 3 numbers, got " + v->dump());
    for (size_t i = 0; i < 3; ++i) {
      if (!(*v)[i].is_number() || !std::isfinite((*v)[i].get<double>()))
        return fail(key, "expected 3 finite numbers, got " + v->dump());
      (*out)[i] = static_cast<float>((*v)[i].get<double>());
    }
    return Status::Ok();
  }
  template <typename T>
  Status numbers(const std::string& key, std::vector<T>* out, double lo, double hi) {
    const json* v = get(key);
    if (!v) return Status::Ok();
    if (!v->is_array() || v->empty())
      return fail(key, "expected a non-empty array of numbers, got " + v->dump());
    std::vector<T> r;
    for (const auto& e : *v) {
      const bool ok = std::is_integral<T>::value ? e.is_number_integer() : e.is_number();
      if (!ok || e.get<double>() < lo || e.get<double>() > hi)
        return fail(key, "every element must be a number in range, got " + v->dump());
      r.push_back(e.get<T>());
    }
    *out = std::move(r);
    return Status::Ok();
  }
  Status strings(const std::string& key, std::vector<std::string>* out) {
    const json* v = get(key);
    if (!v) return Status::Ok();
    std::vector<std::string> r;
    if (v->is_string()) {
      r.push_back(v->get<std::string>());
    } else if (v->is_array() && !v->empty()) {
      for (const auto& e : *v) {
        if (!e.is_string()) return fail(key, "expected strings, got " + v->dump());
        r.push_back(e.get<std::string>());
      }
    } else {
      return fail(key, "expected a string or an array of strings, got " + v->dump());
    }
    *out = std::move(r);
    return Status::Ok();
  }
  /// One of `choices`, mapped to its value.
  template <typename E>
  Status choice(const std::string& key, E* out, const std::vector<std::pair<const char*, E>>& c) {
    const json* v = get(key);
    if (!v) return Status::Ok();
    std::string names;
    for (const auto& [n, e] : c) {
      names += (names.empty() ? "" : ", ") + std::string(n);
      if (v->is_string() && v->get<std::string>() == n) {
        *out = e;
        return Status::Ok();
      }
    }
    return fail(key, "expected one of " + names + ", got " + v->dump());
  }
  /// kInvalidArgument naming the first key that no reader asked for.
  Status noUnknownKeys() const {
    for (const auto& [k, v] : obj_.items()) {
      (void)v;
      if (!used_.count(k))
        return Status(ErrorCode::kInvalidArgument,
                      source_ + ": " + prefix_ + k + ": unknown key (a typo?)");
    }
    return Status::Ok();
  }

 private:
  const json& obj_;
  std::string source_, prefix_;
  std::set<std::string> used_;
};

std::string joinPath(const std::string& dir, const std::string& p) {
  if (p.empty() || p[0] == '/' || dir.empty()) return p;
  return dir + "/" + p;
}

Status readLabelsFile(const std::string& path, const std::string& field, const Reader& r,
                      std::vector<std::string>* out) {
  std::ifstream f(path);
  if (!f) return r.fail(field, "cannot read the labels file '" + path + "'");
  std::string line;
  out->clear();
  while (std::getline(f, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    out->push_back(line);
  }
  while (!out->empty() && out->back().empty()) out->pop_back();
  if (out->empty()) return r.fail(field, "the labels file '" + path + "' is empty");
  return Status::Ok();
}

Status readNms(Reader& r, NmsParams* n) {
  EI_RETURN_IF_ERROR(r.number("score_threshold", &n->scoreThreshold, 0, 1));
  EI_RETURN_IF_ERROR(r.number("iou_threshold", &n->iouThreshold, 0, 1));
  EI_RETURN_IF_ERROR(r.integer("max_detections", &n->maxDetections, 1, 1 << 20));
  EI_RETURN_IF_ERROR(r.boolean("class_agnostic", &n->classAgnostic));
  return r.choice<NmsMethod>("nms", &n->method,
                             {{"hard", NmsMethod::kHard}, {"weighted", NmsMethod::kWeighted}});
}

Status readInput(const json& j, const std::string& src, ModelConfig* c) {
  if (!j.is_object())
    return Status(ErrorCode::kInvalidArgument, src + ": input: expected an object");
  Reader r(j, src, "input.");
  PreprocessConfig& p = c->preprocess;
  EI_RETURN_IF_ERROR(r.str("tensor", &c->inputTensor, true));
  EI_RETURN_IF_ERROR(r.integer("width", &p.outputWidth, 1, kMaxFrameSide, true));
  EI_RETURN_IF_ERROR(r.integer("height", &p.outputHeight, 1, kMaxFrameSide, true));
  EI_RETURN_IF_ERROR(r.choice<TensorLayout>(
      "layout", &p.layout, {{"NCHW", TensorLayout::kNCHW}, {"NHWC", TensorLayout::kNHWC}}));
  EI_RETURN_IF_ERROR(r.choice<DataType>(
      "dtype", &p.dtype, {{"float32", DataType::kFloat32}, {"float16", DataType::kFloat16}}));
  EI_RETURN_IF_ERROR(r.choice<ResizeMode>("resize", &p.resize,
                                          {{"stretch", ResizeMode::kStretch},
                                           {"letterbox", ResizeMode::kLetterbox},
                                           {"center-crop", ResizeMode::kCenterCrop}}));
  EI_RETURN_IF_ERROR(r.choice<Interpolation>(
      "interpolation", &p.interpolation,
      {{"bilinear", Interpolation::kBilinear}, {"nearest", Interpolation::kNearest}}));
  EI_RETURN_IF_ERROR(r.choice<ChannelOrder>(
      "channels", &p.channels,
      {{"RGB", ChannelOrder::kRGB}, {"BGR", ChannelOrder::kBGR}, {"GRAY", ChannelOrder::kGray}}));
  EI_RETURN_IF_ERROR(r.number("scale", &p.scale, -1e9, 1e9));
  EI_RETURN_IF_ERROR(r.triple("mean", &p.mean));
  EI_RETURN_IF_ERROR(r.triple("std", &p.std));
  EI_RETURN_IF_ERROR(r.triple("pad", &p.padValue));
  EI_RETURN_IF_ERROR(r.noUnknownKeys());
  const Status v = validatePreprocessConfig(p);
  if (!v.ok()) return Status(ErrorCode::kInvalidArgument, src + ": input: " + v.message());
  return Status::Ok();
}

Status readAnchors(const json& j, const std::string& src, SsdAnchorOptions* a) {
  if (!j.is_object())
    return Status(ErrorCode::kInvalidArgument, src + ": decoder.anchors: expected an object");
  Reader r(j, src, "decoder.anchors.");
  EI_RETURN_IF_ERROR(r.integer("num_layers", &a->numLayers, 1, 16));
  EI_RETURN_IF_ERROR(r.number("min_scale", &a->minScale, 0, 10));
  EI_RETURN_IF_ERROR(r.number("max_scale", &a->maxScale, 0, 10));
  EI_RETURN_IF_ERROR(r.numbers("strides", &a->strides, 1, 1 << 12));
  EI_RETURN_IF_ERROR(r.numbers("aspect_ratios", &a->aspectRatios, 1e-3, 1e3));
  EI_RETURN_IF_ERROR(r.number("offset_x", &a->anchorOffsetX, 0, 1));
  EI_RETURN_IF_ERROR(r.number("offset_y", &a->anchorOffsetY, 0, 1));
  EI_RETURN_IF_ERROR(r.boolean("fixed_anchor_size", &a->fixedAnchorSize));
  EI_RETURN_IF_ERROR(r.boolean("reduce_boxes_in_lowest_layer", &a->reduceBoxesInLowestLayer));
  EI_RETURN_IF_ERROR(
      r.number("interpolated_scale_aspect_ratio", &a->interpolatedScaleAspectRatio, 0, 1e3));
  return r.noUnknownKeys();
}

Status readDecoder(const json& j, const std::string& src, ModelConfig* c) {
  if (!j.is_object())
    return Status(ErrorCode::kInvalidArgument, src + ": decoder: expected an object");
  Reader r(j, src, "decoder.");
  EI_RETURN_IF_ERROR(r.str("type", &c->decoderName, true));
  const std::string& t = c->decoderName;
  if (t == "classification") {
    c->decoder = DecoderType::kClassification;
    EI_RETURN_IF_ERROR(r.str("output", &c->outputTensor, true));
    EI_RETURN_IF_ERROR(r.integer("top_k", &c->classify.topK, 1, 1 << 20));
    EI_RETURN_IF_ERROR(r.boolean("softmax", &c->classify.applySoftmax));
  } else if (t == "yolov5") {
    c->decoder = DecoderType::kYoloV5;
    YoloV5Params& y = c->yolov5;
    EI_RETURN_IF_ERROR(r.str("output", &c->outputTensor, true));
    EI_RETURN_IF_ERROR(r.integer("num_classes", &y.numClasses, 1, 1 << 20, true));
    EI_RETURN_IF_ERROR(r.boolean("logits", &y.scoresAreLogits));
    EI_RETURN_IF_ERROR(r.boolean("multi_label", &y.multiLabel));
    EI_RETURN_IF_ERROR(readNms(r, &y.nms));
  } else if (t == "yolov8") {
    c->decoder = DecoderType::kYoloV8;
    YoloV8Params& y = c->yolov8;
    EI_RETURN_IF_ERROR(r.str("output", &c->outputTensor, true));
    EI_RETURN_IF_ERROR(r.integer("num_classes", &y.numClasses, 1, 1 << 20, true));
    EI_RETURN_IF_ERROR(r.boolean("logits", &y.scoresAreLogits));
    EI_RETURN_IF_ERROR(r.boolean("multi_label", &y.multiLabel));
    EI_RETURN_IF_ERROR(r.boolean("raw_dfl", &y.rawDfl));
    EI_RETURN_IF_ERROR(r.integer("reg_max", &y.regMax, 1, 256));
    EI_RETURN_IF_ERROR(r.numbers("strides", &y.strides, 1, 1 << 12));
    EI_RETURN_IF_ERROR(readNms(r, &y.nms));
    y.inputWidth = c->preprocess.outputWidth;
    y.inputHeight = c->preprocess.outputHeight;
  } else if (t == "ssd" || t == "blazeface-front" || t == "blazeface-back") {
    c->decoder = DecoderType::kSsd;
    SsdParams& s = c->ssd;
    if (t == "blazeface-front") s = blazeFaceFrontParams();
    if (t == "blazeface-back") s = blazeFaceBackParams();
    EI_RETURN_IF_ERROR(r.strings("box_outputs", &s.boxOutputs));
    EI_RETURN_IF_ERROR(r.strings("score_outputs", &s.scoreOutputs));
    if (s.boxOutputs.empty() || s.scoreOutputs.empty())
      return r.fail("box_outputs", "an ssd decoder needs box_outputs and score_outputs");
    EI_RETURN_IF_ERROR(r.integer("num_classes", &s.numClasses, 1, 1 << 20));
    EI_RETURN_IF_ERROR(r.integer("num_coords", &s.numCoords, 4, 1 << 12));
    EI_RETURN_IF_ERROR(r.integer("num_keypoints", &s.numKeypoints, 0, 1 << 10));
    EI_RETURN_IF_ERROR(r.number("x_scale", &s.xScale, 1e-6, 1e9));
    EI_RETURN_IF_ERROR(r.number("y_scale", &s.yScale, 1e-6, 1e9));
    EI_RETURN_IF_ERROR(r.number("w_scale", &s.wScale, 1e-6, 1e9));
    EI_RETURN_IF_ERROR(r.number("h_scale", &s.hScale, 1e-6, 1e9));
    EI_RETURN_IF_ERROR(r.boolean("sigmoid_score", &s.sigmoidScore));
    EI_RETURN_IF_ERROR(r.number("score_clipping", &s.scoreClippingThresh, -1e9, 1e9));
    if (const json* a = r.get("anchors")) EI_RETURN_IF_ERROR(readAnchors(*a, src, &s.anchors));
    s.anchors.inputWidth = c->preprocess.outputWidth;
    s.anchors.inputHeight = c->preprocess.outputHeight;
    EI_RETURN_IF_ERROR(readNms(r, &s.nms));
  } else if (t == "segmentation") {
    c->decoder = DecoderType::kSegmentation;
    EI_RETURN_IF_ERROR(r.str("output", &c->outputTensor, true));
    EI_RETURN_IF_ERROR(r.number("threshold", &c->segmentation.threshold, -1e9, 1e9));
  } else {
    return r.fail("type", "unknown decoder '" + t +
                              "' (classification, yolov5, yolov8, ssd, blazeface-front, "
                              "blazeface-back, segmentation)");
  }
  return r.noUnknownKeys();
}

}  // namespace

Expected<ModelConfig> parseModelConfig(const std::string& text, const std::string& sourceName,
                                       const std::string& baseDir) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status(ErrorCode::kInvalidArgument, sourceName + ": not valid JSON");
  if (!j.is_object())
    return Status(ErrorCode::kInvalidArgument, sourceName + ": expected a JSON object");
  ModelConfig c;
  Reader r(j, sourceName, "");
  EI_RETURN_IF_ERROR(r.str("name", &c.name));
  EI_RETURN_IF_ERROR(r.str("model", &c.modelPath, true));
  c.modelPath = joinPath(baseDir, c.modelPath);
  const json* input = r.get("input");
  if (!input) return r.fail("input", "required");
  EI_RETURN_IF_ERROR(readInput(*input, sourceName, &c));
  const json* decoder = r.get("decoder");
  if (!decoder) return r.fail("decoder", "required");
  EI_RETURN_IF_ERROR(readDecoder(*decoder, sourceName, &c));
  if (const json* l = r.get("labels")) {
    if (l->is_string()) {
      EI_RETURN_IF_ERROR(
          readLabelsFile(joinPath(baseDir, l->get<std::string>()), "labels", r, &c.labels));
    } else {
      EI_RETURN_IF_ERROR(r.strings("labels", &c.labels));
    }
  }
  EI_RETURN_IF_ERROR(r.noUnknownKeys());
  c.classify.labels = c.yolov5.labels = c.yolov8.labels = c.ssd.labels = c.labels;
  const int classes = c.decoder == DecoderType::kYoloV5   ? c.yolov5.numClasses
                      : c.decoder == DecoderType::kYoloV8 ? c.yolov8.numClasses
                      : c.decoder == DecoderType::kSsd    ? c.ssd.numClasses
                                                          : 0;
  if (classes > 0 && !c.labels.empty() && static_cast<int>(c.labels.size()) != classes)
    return r.fail("labels", std::to_string(c.labels.size()) + " labels for " +
                                std::to_string(classes) + " classes");
  return c;
}

Expected<ModelConfig> loadModelConfig(const std::string& path) {
  std::ifstream f(path);
  if (!f) return Status(ErrorCode::kNotFound, "cannot open model config '" + path + "'");
  std::stringstream ss;
  ss << f.rdbuf();
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? std::string(".") : path.substr(0, slash);
  EI_ASSIGN_OR_RETURN(ModelConfig c, parseModelConfig(ss.str(), path, dir));
  c.sourcePath = path;
  return c;
}

}  // namespace edgeinfer::vision
