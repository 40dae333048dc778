// edgeinfer: runs a model on every frame (or every Nth) and attaches what it found as an
// EdgeInferMeta (gstedgeinfer.cpp documents the element).
#pragma once

#include <gst/base/gstbasetransform.h>

G_BEGIN_DECLS

#define GST_TYPE_EDGE_INFER (gst_edge_infer_get_type())
G_DECLARE_FINAL_TYPE(GstEdgeInfer, gst_edge_infer, GST, EDGE_INFER, GstBaseTransform)

G_END_DECLS
