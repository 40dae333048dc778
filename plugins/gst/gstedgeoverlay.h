// edgeoverlay: draws the EdgeInferMeta of each frame (gstedgeoverlay.cpp documents it).
#pragma once

#include <gst/base/gstbasetransform.h>

G_BEGIN_DECLS

#define GST_TYPE_EDGE_OVERLAY (gst_edge_overlay_get_type())
G_DECLARE_FINAL_TYPE(GstEdgeOverlay, gst_edge_overlay, GST, EDGE_OVERLAY, GstBaseTransform)

G_END_DECLS
