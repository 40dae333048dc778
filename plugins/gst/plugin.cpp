// The edgeinfer GStreamer plugin (libgstedgeinfer.so): registers edgeinfer, edgeoverlay,
// edgemetasink, edgemux and edgedemux, and routes the SDK's log into GStreamer's
// (sdk_logger.h). It loads on any machine: without a usable GPU it logs a warning once
// (GST_DEBUG=edgeinfer-plugin:2) and the elements run models on the CPU (backend=auto or cpu;
// backend=gpu fails at start, saying why).
//
//   GST_PLUGIN_PATH=build/release/plugins/gst gst-inspect-1.0 edgeinfer
#include <gst/gst.h>

#include <string>

#include "edgeinfer/engine.h"
#include "edgeinfer/gst/batch_meta.h"
#include "edgeinfer/gst/edgeinfer_meta.h"
#include "gstedgedemux.h"
#include "gstedgeinfer.h"
#include "gstedgemetasink.h"
#include "gstedgemux.h"
#include "gstedgeoverlay.h"
#include "sdk_logger.h"

GST_DEBUG_CATEGORY_STATIC(edgeinfer_plugin_debug);
#define GST_CAT_DEFAULT edgeinfer_plugin_debug

static gboolean plugin_init(GstPlugin* plugin) {
  GST_DEBUG_CATEGORY_INIT(edgeinfer_plugin_debug, "edgeinfer-plugin", 0,
                          "EdgeInfer plugin loading");
  edgeinfer::gst::installSdkLogger();
  std::string why;
  if (!edgeinfer::gpuUsable(0, &why))
    GST_WARNING("no usable GPU (%s): edgeinfer runs models on the CPU; backend=gpu will fail",
                why.c_str());
  edgeinfer_meta_get_info();  // register the metas with the plugin
  edgeinfer_batch_meta_get_info();
  return gst_element_register(plugin, "edgeinfer", GST_RANK_NONE, GST_TYPE_EDGE_INFER) &&
         gst_element_register(plugin, "edgeoverlay", GST_RANK_NONE, GST_TYPE_EDGE_OVERLAY) &&
         gst_element_register(plugin, "edgemetasink", GST_RANK_NONE, GST_TYPE_EDGE_META_SINK) &&
         gst_element_register(plugin, "edgemux", GST_RANK_NONE, GST_TYPE_EDGE_MUX) &&
         gst_element_register(plugin, "edgedemux", GST_RANK_NONE, GST_TYPE_EDGE_DEMUX);
}

#define PACKAGE "edgeinfer"
GST_PLUGIN_DEFINE(GST_VERSION_MAJOR, GST_VERSION_MINOR, edgeinfer,
                  "EdgeInfer: ONNX networks on video frames (inference, overlay, JSON results, "
                  "batching of streams)",
                  plugin_init, EDGEINFER_PLUGIN_VERSION,
                  "unknown",  // the repository states no licence yet
                  "EdgeInfer", "EdgeInfer repository (plugins/gst)")
