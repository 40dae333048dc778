// edgemetasink: one JSON line per frame (gstedgemetasink.cpp documents it).
#pragma once

#include <gst/base/gstbasesink.h>

G_BEGIN_DECLS

#define GST_TYPE_EDGE_META_SINK (gst_edge_meta_sink_get_type())
G_DECLARE_FINAL_TYPE(GstEdgeMetaSink, gst_edge_meta_sink, GST, EDGE_META_SINK, GstBaseSink)

G_END_DECLS
