// EdgeInferMeta registration, copy and scale (edgeinfer/gst/edgeinfer_meta.h).
#include "edgeinfer/gst/edgeinfer_meta.h"

#include <gst/video/video.h>

#include <new>
#include <utility>

namespace {

gboolean metaInit(GstMeta* meta, gpointer /*params*/, GstBuffer* /*buffer*/) {
  auto* m = reinterpret_cast<EdgeInferMeta*>(meta);
  m->results = new (std::nothrow) edgeinfer::gst::Results();
  return m->results != nullptr;
}

void metaFree(GstMeta* meta, GstBuffer* /*buffer*/) {
  auto* m = reinterpret_cast<EdgeInferMeta*>(meta);
  delete m->results;
  m->results = nullptr;
}

// Scales every coordinate of `r` from a frame of in (width x height) to one of out.
void scaleResults(edgeinfer::gst::Results& r, const GstVideoInfo* in, const GstVideoInfo* out) {
  const int inW = GST_VIDEO_INFO_WIDTH(in), inH = GST_VIDEO_INFO_HEIGHT(in);
  const int outW = GST_VIDEO_INFO_WIDTH(out), outH = GST_VIDEO_INFO_HEIGHT(out);
  if (inW <= 0 || inH <= 0) return;
  const float sx = static_cast<float>(outW) / static_cast<float>(inW);
  const float sy = static_cast<float>(outH) / static_cast<float>(inH);
  for (edgeinfer::gst::Object& o : r.objects) {
    edgeinfer::vision::Detection& d = o.detection;
    d.box.x1 *= sx, d.box.x2 *= sx;
    d.box.y1 *= sy, d.box.y2 *= sy;
    for (edgeinfer::vision::Keypoint& k : d.keypoints) k.x *= sx, k.y *= sy;
  }
  r.width = outW;
  r.height = outH;
}

gboolean metaTransform(GstBuffer* dest, GstMeta* meta, GstBuffer* /*src*/, GQuark type,
                       gpointer data) {
  const auto* src = reinterpret_cast<const EdgeInferMeta*>(meta);
  if (GST_META_TRANSFORM_IS_COPY(type)) {
    const auto* copy = static_cast<const GstMetaTransformCopy*>(data);
    if (copy->region) return TRUE;  // part of the buffer: the frame is gone, so is the meta
    return edgeinfer::gst::addMeta(dest, *src->results) != nullptr;
  }
  if (type == gst_video_meta_transform_scale_get_quark()) {
    const auto* trans = static_cast<const GstVideoMetaTransform*>(data);
    EdgeInferMeta* m = edgeinfer::gst::addMeta(dest, *src->results);
    if (!m) return FALSE;
    scaleResults(*m->results, trans->in_info, trans->out_info);
    return TRUE;
  }
  return FALSE;  // any other transformation: the results no longer describe the frame
}

}  // namespace

GType edgeinfer_meta_api_get_type(void) {
  static GType type = 0;
  // No tags: GstBaseTransform's default (cudadownload, and most elements that copy frames
  // without looking at metas) copies only metas without tags, and the results must survive
  // the download from CUDA memory. The results record the frame size they refer to, so a
  // consumer of a scaled frame fits them (edgeoverlay does); an element that asks for the
  // scale transform still gets the results scaled (metaTransform).
  static const gchar* tags[] = {nullptr};
  if (g_once_init_enter(&type)) {
    GType t = gst_meta_api_type_register("EdgeInferMetaAPI", tags);
    g_once_init_leave(&type, t);
  }
  return type;
}

const GstMetaInfo* edgeinfer_meta_get_info(void) {
  static const GstMetaInfo* info = nullptr;
  if (g_once_init_enter(&info)) {
    const GstMetaInfo* i =
        gst_meta_register(EDGEINFER_META_API_TYPE, "EdgeInferMeta", sizeof(EdgeInferMeta), metaInit,
                          metaFree, metaTransform);
    g_once_init_leave(&info, i);
  }
  return info;
}

namespace edgeinfer::gst {

EdgeInferMeta* addMeta(GstBuffer* buffer, Results results) {
  auto* m = reinterpret_cast<EdgeInferMeta*>(
      gst_buffer_add_meta(buffer, edgeinfer_meta_get_info(), nullptr));
  if (m) *m->results = std::move(results);
  return m;
}

std::vector<EdgeInferMeta*> bufferMetas(GstBuffer* buffer) {
  std::vector<EdgeInferMeta*> out;
  gpointer state = nullptr;
  while (GstMeta* m = gst_buffer_iterate_meta_filtered(buffer, &state, EDGEINFER_META_API_TYPE))
    out.push_back(reinterpret_cast<EdgeInferMeta*>(m));
  return out;
}

EdgeInferMeta* findMeta(GstBuffer* buffer, int uniqueId) {
  for (EdgeInferMeta* m : bufferMetas(buffer))
    if (m->results->uniqueId == uniqueId) return m;
  return nullptr;
}

}  // namespace edgeinfer::gst
