#include "results_json.h"

namespace edgeinfer::gst {
namespace {

nlohmann::json classJson(const vision::Classification& c) {
  return {{"class", c.classId}, {"score", c.score}, {"label", c.label}};
}

nlohmann::json objectJson(const Object& o) {
  const vision::Detection& d = o.detection;
  nlohmann::json j = {{"box", {d.box.x1, d.box.y1, d.box.x2, d.box.y2}},
                      {"score", d.score},
                      {"class", d.classId},
                      {"label", d.label}};
  j["keypoints"] = nlohmann::json::array();
  for (const vision::Keypoint& k : d.keypoints) j["keypoints"].push_back({k.x, k.y, k.score});
  j["classifications"] = nlohmann::json::array();
  for (const ObjectClassification& oc : o.classifications) {
    nlohmann::json classes = nlohmann::json::array();
    for (const vision::Classification& c : oc.classes) classes.push_back(classJson(c));
    j["classifications"].push_back({{"unique_id", oc.uniqueId}, {"classes", classes}});
  }
  return j;
}

}  // namespace

nlohmann::json frameJson(uint64_t frame, GstClockTime pts, int width, int height,
                         const std::vector<const Results*>& results, int stream) {
  nlohmann::json line = {{"frame", frame}};
  if (stream >= 0) line["stream"] = stream;
  line["pts"] = GST_CLOCK_TIME_IS_VALID(pts) ? nlohmann::json(static_cast<uint64_t>(pts))
                                             : nlohmann::json(nullptr);
  line["width"] = width;
  line["height"] = height;
  line["results"] = nlohmann::json::array();
  for (const Results* r : results) {
    nlohmann::json j = {
        {"unique_id", r->uniqueId}, {"frame_number", r->frameNumber}, {"inferred", r->inferred}};
    j["detections"] = nlohmann::json::array();
    for (const Object& o : r->objects) j["detections"].push_back(objectJson(o));
    j["classifications"] = nlohmann::json::array();
    for (const vision::Classification& c : r->classifications)
      j["classifications"].push_back(classJson(c));
    line["results"].push_back(std::move(j));
  }
  return line;
}

}  // namespace edgeinfer::gst
