// EdgeInferBatchMeta registration and copy (edgeinfer/gst/batch_meta.h).
#include "edgeinfer/gst/batch_meta.h"

#include <new>
#include <utility>

namespace edgeinfer::gst {

BatchFrame::BatchFrame(unsigned stream, GstBuffer* buf, GstCaps* c, const GstVideoInfo& vi,
                       const GstSegment& seg)
    : streamId(stream),
      buffer(buf),
      caps(c ? gst_caps_ref(c) : nullptr),
      info(vi),
      segment(seg),
      pts(buf ? GST_BUFFER_PTS(buf) : GST_CLOCK_TIME_NONE) {}

BatchFrame::BatchFrame(const BatchFrame& o)
    : streamId(o.streamId),
      buffer(o.buffer ? gst_buffer_ref(o.buffer) : nullptr),
      caps(o.caps ? gst_caps_ref(o.caps) : nullptr),
      info(o.info),
      segment(o.segment),
      pts(o.pts) {}

BatchFrame::BatchFrame(BatchFrame&& o) noexcept
    : streamId(o.streamId),
      buffer(std::exchange(o.buffer, nullptr)),
      caps(std::exchange(o.caps, nullptr)),
      info(o.info),
      segment(o.segment),
      pts(o.pts) {}

BatchFrame& BatchFrame::operator=(BatchFrame o) noexcept {
  swap(*this, o);
  return *this;
}

BatchFrame::~BatchFrame() {
  if (buffer) gst_buffer_unref(buffer);
  if (caps) gst_caps_unref(caps);
}

void swap(BatchFrame& a, BatchFrame& b) noexcept {
  std::swap(a.streamId, b.streamId);
  std::swap(a.buffer, b.buffer);
  std::swap(a.caps, b.caps);
  std::swap(a.info, b.info);
  std::swap(a.segment, b.segment);
  std::swap(a.pts, b.pts);
}

GstBuffer* BatchFrame::takeBuffer() {
  return std::exchange(buffer, nullptr);
}

GstBuffer* BatchFrame::writableBuffer() {
  if (buffer) buffer = gst_buffer_make_writable(buffer);
  return buffer;
}

}  // namespace edgeinfer::gst

namespace {

gboolean batchMetaInit(GstMeta* meta, gpointer /*params*/, GstBuffer* /*buffer*/) {
  auto* m = reinterpret_cast<EdgeInferBatchMeta*>(meta);
  m->batch = new (std::nothrow) edgeinfer::gst::Batch();
  return m->batch != nullptr;
}

void batchMetaFree(GstMeta* meta, GstBuffer* /*buffer*/) {
  auto* m = reinterpret_cast<EdgeInferBatchMeta*>(meta);
  delete m->batch;
  m->batch = nullptr;
}

gboolean batchMetaTransform(GstBuffer* dest, GstMeta* meta, GstBuffer* /*src*/, GQuark type,
                            gpointer data) {
  const auto* src = reinterpret_cast<const EdgeInferBatchMeta*>(meta);
  if (GST_META_TRANSFORM_IS_COPY(type)) {
    const auto* copy = static_cast<const GstMetaTransformCopy*>(data);
    if (copy->region) return TRUE;  // part of a batch buffer (it has no memory): meaningless
    return edgeinfer::gst::addBatchMeta(dest, *src->batch) != nullptr;
  }
  return FALSE;
}

}  // namespace

GType edgeinfer_batch_meta_api_get_type(void) {
  static GType type = 0;
  static const gchar* tags[] = {nullptr};
  if (g_once_init_enter(&type)) {
    GType t = gst_meta_api_type_register("EdgeInferBatchMetaAPI", tags);
    g_once_init_leave(&type, t);
  }
  return type;
}

const GstMetaInfo* edgeinfer_batch_meta_get_info(void) {
  static const GstMetaInfo* info = nullptr;
  if (g_once_init_enter(&info)) {
    const GstMetaInfo* i = gst_meta_register(EDGEINFER_BATCH_META_API_TYPE, "EdgeInferBatchMeta",
                                             sizeof(EdgeInferBatchMeta), batchMetaInit,
                                             batchMetaFree, batchMetaTransform);
    g_once_init_leave(&info, i);
  }
  return info;
}

namespace edgeinfer::gst {

EdgeInferBatchMeta* addBatchMeta(GstBuffer* buffer, Batch batch) {
  auto* m = reinterpret_cast<EdgeInferBatchMeta*>(
      gst_buffer_add_meta(buffer, edgeinfer_batch_meta_get_info(), nullptr));
  if (m) *m->batch = std::move(batch);
  return m;
}

EdgeInferBatchMeta* findBatchMeta(GstBuffer* buffer) {
  return reinterpret_cast<EdgeInferBatchMeta*>(
      gst_buffer_get_meta(buffer, EDGEINFER_BATCH_META_API_TYPE));
}

bool isBatchCaps(const GstCaps* caps) {
  return caps && gst_caps_get_size(caps) == 1 &&
         gst_structure_has_name(gst_caps_get_structure(caps, 0), "video/x-edgeinfer-batch");
}

}  // namespace edgeinfer::gst
