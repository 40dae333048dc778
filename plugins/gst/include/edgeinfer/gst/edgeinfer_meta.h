// EdgeInferMeta: what an `edgeinfer` element found in a frame, attached to the frame's
// GstBuffer (issue 5). Applications read it from a pad probe or an appsink:
//
//   #include "edgeinfer/gst/edgeinfer_meta.h"          // link libedgeinfer-gstmeta
//   for (const EdgeInferMeta* m : edgeinfer::gst::bufferMetas(buffer)) {
//     const edgeinfer::gst::Results& r = *m->results;  // r.uniqueId: which element
//     for (const edgeinfer::gst::Object& o : r.objects)
//       use(o.detection.box, o.detection.label, o.detection.score, o.classifications);
//   }
//
// A buffer carries one meta per producing element (told apart by Results::uniqueId, the
// element's `unique-id` property). A secondary classifier (`edgeinfer infer-on-id=<detector's
// unique-id>`) adds no meta of its own for classifications: it appends an ObjectClassification
// to each object of the detector's meta it classified. Coordinates are in pixels of the buffer
// of the frame whose size Results::width/height record: when a buffer is copied the meta is
// copied, including by elements that copy frames without knowing the meta (cudadownload:
// the meta API has no tags, since GstBaseTransform's default drops tagged metas). An element
// that scales the frame (videoscale) copies the results unscaled, still recording the size
// they refer to: consumers scale them to the frame they get (edgeoverlay does). A
// transformation that asks for the scale transform gets them scaled.
//
// The meta lives in its own small shared library (libedgeinfer-gstmeta.so) so that the plugin
// and applications share one registration of the meta type.
#pragma once

#include <gst/gst.h>

#include <cstdint>
#include <vector>

#include "edgeinfer/vision/types.h"

namespace edgeinfer::gst {

/// What one secondary classifier said about an object.
struct ObjectClassification {
  int uniqueId = 0;                             ///< the classifier element's unique-id
  std::vector<vision::Classification> classes;  ///< best first (the model config's top_k)
};

/// A detection and what secondary classifiers said about it.
struct Object {
  vision::Detection detection;  ///< box, keypoints in frame pixels; label from the config
  std::vector<ObjectClassification> classifications;
};

/// Everything one element found in one frame.
struct Results {
  int uniqueId = 0;          ///< the producing element's unique-id property
  uint64_t frameNumber = 0;  ///< the frame's index at the producing element, from 0
  int width = 0;             ///< frame size the coordinates refer to
  int height = 0;
  /// false when the element did not run the model on this frame (interval > 1) and the
  /// results are the last inferred frame's, carried over.
  bool inferred = true;
  std::vector<Object> objects;                          ///< detectors
  std::vector<vision::Classification> classifications;  ///< classifiers on whole frames
};

}  // namespace edgeinfer::gst

/// The GstMeta. `results` is owned by the meta (never null while the meta is attached).
struct EdgeInferMeta {
  GstMeta meta;
  edgeinfer::gst::Results* results;
};

/// The meta API type ("EdgeInferMetaAPI", tags "video" and "size").
GType edgeinfer_meta_api_get_type(void);
#define EDGEINFER_META_API_TYPE (edgeinfer_meta_api_get_type())
/// The registered implementation ("EdgeInferMeta").
const GstMetaInfo* edgeinfer_meta_get_info(void);

namespace edgeinfer::gst {

/// Adds a meta holding `results` to a writable buffer.
EdgeInferMeta* addMeta(GstBuffer* buffer, Results results);
/// Every EdgeInferMeta of the buffer, in the order they were added.
std::vector<EdgeInferMeta*> bufferMetas(GstBuffer* buffer);
/// The meta of the producer with this unique-id (the first if there are several), or null.
EdgeInferMeta* findMeta(GstBuffer* buffer, int uniqueId);

}  // namespace edgeinfer::gst
