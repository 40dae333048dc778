// One JSON line per frame (edgemetasink): the frame and what every producer found in it.
//
//   {"frame": 0, "pts": 0, "width": 640, "height": 480,
//    "results": [{"unique_id": 1, "frame_number": 0, "inferred": true,
//                 "detections": [{"box": [x1, y1, x2, y2], "score": 0.93, "class": 0,
//                                 "label": "face", "keypoints": [[x, y, score], ...],
//                                 "classifications": [{"unique_id": 2, "classes":
//                                     [{"class": 3, "score": 0.8, "label": "..."}]}]}],
//                 "classifications": [{"class": 7, "score": 0.6, "label": "..."}]}]}
//
// "frame" counts the buffers the sink received, from 0 (for batches from edgemux: each stream's
// frames, and the line has a field "stream" with the stream id); "pts" is in nanoseconds (null when
// the buffer has none); "results" has one entry per EdgeInferMeta, in the order they were added.
// Floats are written exactly (the shortest text of the float's double), so they read back as the
// same float.
#pragma once

#include <gst/gst.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "edgeinfer/gst/edgeinfer_meta.h"

namespace edgeinfer::gst {

/// `stream` >= 0: a frame of that stream of a batch (the line gets "stream").
nlohmann::json frameJson(uint64_t frame, GstClockTime pts, int width, int height,
                         const std::vector<const Results*>& results, int stream = -1);

}  // namespace edgeinfer::gst
