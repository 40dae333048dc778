#include "results_message.h"

namespace edgeinfer::gst {
namespace {

// Appends `s` (taken) to the GstValueArray `array`.
void appendStructure(GValue* array, GstStructure* s) {
  GValue v = G_VALUE_INIT;
  g_value_init(&v, GST_TYPE_STRUCTURE);
  g_value_take_boxed(&v, s);
  gst_value_array_append_and_take_value(array, &v);
}

// Sets field `name` of `s` to the GstValueArray `array` (taken).
void takeArray(GstStructure* s, const char* name, GValue* array) {
  gst_structure_take_value(s, name, array);
}

GstStructure* classification(int uniqueId, const vision::Classification& c) {
  return gst_structure_new("classification", "unique-id", G_TYPE_INT, uniqueId, "class-id",
                           G_TYPE_INT, c.classId, "score", G_TYPE_DOUBLE,
                           static_cast<double>(c.score), "label", G_TYPE_STRING, c.label.c_str(),
                           nullptr);
}

GstStructure* detection(const Object& o) {
  const vision::Detection& d = o.detection;
  GstStructure* s = gst_structure_new(
      "detection", "x1", G_TYPE_DOUBLE, static_cast<double>(d.box.x1), "y1", G_TYPE_DOUBLE,
      static_cast<double>(d.box.y1), "x2", G_TYPE_DOUBLE, static_cast<double>(d.box.x2), "y2",
      G_TYPE_DOUBLE, static_cast<double>(d.box.y2), "class-id", G_TYPE_INT, d.classId, "score",
      G_TYPE_DOUBLE, static_cast<double>(d.score), "label", G_TYPE_STRING, d.label.c_str(),
      nullptr);
  GValue keypoints = G_VALUE_INIT;
  gst_value_array_init(&keypoints, static_cast<guint>(d.keypoints.size()));
  for (const vision::Keypoint& k : d.keypoints)
    appendStructure(&keypoints,
                    gst_structure_new("keypoint", "x", G_TYPE_DOUBLE, static_cast<double>(k.x), "y",
                                      G_TYPE_DOUBLE, static_cast<double>(k.y), "score",
                                      G_TYPE_DOUBLE, static_cast<double>(k.score), nullptr));
  takeArray(s, "keypoints", &keypoints);
  GValue classes = G_VALUE_INIT;
  gst_value_array_init(&classes, 0);
  for (const ObjectClassification& oc : o.classifications)
    for (const vision::Classification& c : oc.classes)
      appendStructure(&classes, classification(oc.uniqueId, c));
  takeArray(s, "classifications", &classes);
  return s;
}

}  // namespace

GstStructure* resultsStructure(const Results& r, GstClockTime pts) {
  GstStructure* s = gst_structure_new(
      "edgeinfer-results", "unique-id", G_TYPE_INT, r.uniqueId, "frame-number", G_TYPE_UINT64,
      static_cast<guint64>(r.frameNumber), "pts", G_TYPE_UINT64, static_cast<guint64>(pts), "width",
      G_TYPE_INT, r.width, "height", G_TYPE_INT, r.height, "inferred", G_TYPE_BOOLEAN,
      r.inferred ? TRUE : FALSE, nullptr);
  GValue dets = G_VALUE_INIT;
  gst_value_array_init(&dets, static_cast<guint>(r.objects.size()));
  for (const Object& o : r.objects) appendStructure(&dets, detection(o));
  takeArray(s, "detections", &dets);
  GValue classes = G_VALUE_INIT;
  gst_value_array_init(&classes, static_cast<guint>(r.classifications.size()));
  for (const vision::Classification& c : r.classifications)
    appendStructure(&classes, classification(r.uniqueId, c));
  takeArray(s, "classifications", &classes);
  return s;
}

}  // namespace edgeinfer::gst
