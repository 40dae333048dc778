// edgedemux: batches -> each stream's frames on its own pad (gstedgedemux.cpp documents it).
#pragma once

#include <gst/gst.h>

G_BEGIN_DECLS

#define GST_TYPE_EDGE_DEMUX (gst_edge_demux_get_type())
G_DECLARE_FINAL_TYPE(GstEdgeDemux, gst_edge_demux, GST, EDGE_DEMUX, GstElement)

G_END_DECLS
