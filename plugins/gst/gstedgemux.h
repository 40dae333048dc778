// edgemux: frames of N streams -> batches (gstedgemux.cpp documents the element).
#pragma once

#include <gst/base/gstaggregator.h>

G_BEGIN_DECLS

#define GST_TYPE_EDGE_MUX (gst_edge_mux_get_type())
G_DECLARE_FINAL_TYPE(GstEdgeMux, gst_edge_mux, GST, EDGE_MUX, GstAggregator)

#define GST_TYPE_EDGE_MUX_PAD (gst_edge_mux_pad_get_type())
G_DECLARE_FINAL_TYPE(GstEdgeMuxPad, gst_edge_mux_pad, GST, EDGE_MUX_PAD, GstAggregatorPad)

G_END_DECLS
