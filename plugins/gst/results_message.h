// The element message `edgeinfer` posts per frame when post-messages=true, for applications
// that watch the bus instead of reading the buffer meta:
//
//   edgeinfer-results, unique-id=(int)1, frame-number=(guint64)7, pts=(guint64)233333333,
//     width=(int)640, height=(int)480, inferred=(boolean)true,
//     detections=(GstValueArray)< detection, x1=(double)..., y1=..., x2=..., y2=...,
//        class-id=(int)0, score=(double)0.93, label=(string)face,
//        keypoints=(GstValueArray)< keypoint, x=..., y=..., score=... >,
//        classifications=(GstValueArray)< classification, unique-id=(int)2, class-id=(int)3,
//                                          score=(double)0.8, label=(string)... > >,
//     classifications=(GstValueArray)< classification, unique-id=(int)1, class-id=..., ... >
//
// pts is GST_CLOCK_TIME_NONE (G_MAXUINT64) for a buffer without one. Coordinates are frame
// pixels; an object's classifications come from secondary classifiers (their unique-id), the
// top-level ones from a classifier run on the whole frame. A secondary classifier posts the
// objects it classified (detections with their classifications), with its own unique-id and an
// extra field infer-on-id.
#pragma once

#include <gst/gst.h>

#include "edgeinfer/gst/edgeinfer_meta.h"

namespace edgeinfer::gst {

/// A new structure named "edgeinfer-results" describing `results` (the caller owns it).
GstStructure* resultsStructure(const Results& results, GstClockTime pts);

}  // namespace edgeinfer::gst
