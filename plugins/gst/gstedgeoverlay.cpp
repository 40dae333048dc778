/* edgeoverlay: draws what edgeinfer found (the buffer's EdgeInferMeta): boxes in a colour per
 * class, labels with scores (and the best class of each secondary classifier), keypoints, and
 * whole-frame classifications. In place, on RGBA, BGRA, RGBx, BGRx, RGB, BGR, NV12 or I420
 * frames (any pitch), in system memory or, in a build with GStreamer's CUDA library, in
 * video/x-raw(memory:CUDAMemory); frames without a meta pass untouched and unmapped. What is
 * drawn is specified exactly in overlay_draw.h, and is the same pixels in either memory.
 *
 *   GST_PLUGIN_PATH=build/release/plugins/gst gst-launch-1.0 \
 *     filesrc location=build/media/kphotoalbum/movie.avi ! decodebin ! videoconvert ! \
 *     edgeinfer config=models/blazeface/model.json ! edgeoverlay thickness=3 ! \
 *     videoconvert ! x264enc ! mp4mux ! filesink location=faces.mp4
 *
 * CUDA memory: the frame never goes to the host. What the host drawing would write is worked
 * out on the host from the meta alone (the colours are opaque: no pixel is read) as runs of
 * pixels, copied to the GPU in one asynchronous copy and written by one kernel launch on the
 * element's CUDA stream, in the CUDA context of the frame's memory; the stream is waited for
 * before the buffer is pushed. The element passes on a CUDA context it is given (a bin's
 * have-context, e.g. edgeinfer's) to neighbours that ask. Without a GPU the plugin loads as
 * ever: no CUDA buffers reach it then.
 *
 *   GST_PLUGIN_PATH=build/release/plugins/gst gst-launch-1.0 \
 *     filesrc location=clip.mp4 ! qtdemux ! h264parse ! nvh264dec ! \
 *     edgeinfer config=models/blazeface/model_back.json backend=gpu ! edgeoverlay ! \
 *     cudadownload ! videoconvert ! x264enc ! mp4mux ! filesink location=faces.mp4
 *
 * Results whose frame size differs from the frame's (an element between edgeinfer and
 * edgeoverlay scaled the frame without scaling the meta) are scaled to the frame first.
 */
#include "gstedgeoverlay.h"

#include <gst/video/video.h>

#include <string>
#include <vector>

#include "caps.h"
#include "cuda_context.h"
#include "edgeinfer/gst/edgeinfer_meta.h"
#include "overlay_draw.h"

#if EDGEINFER_GST_CUDA
#include <gst/cuda/gstcudacontext.h>
#include <gst/cuda/gstcudamemory.h>
#include <gst/cuda/gstcudautils.h>

#include "overlay_cuda.h"
#endif

GST_DEBUG_CATEGORY_STATIC(gst_edge_overlay_debug);
#define GST_CAT_DEFAULT gst_edge_overlay_debug

namespace {

namespace eg = edgeinfer::gst;

enum {
  PROP_0,
  PROP_THICKNESS,
  PROP_FONT_SCALE,
  PROP_DRAW_LABELS,
  PROP_DRAW_KEYPOINTS,
  PROP_UNIQUE_ID,
};

struct State {
  eg::OverlayStyle style;  // under the object lock
  int uniqueId = -1;
  GstVideoInfo info{};
  edgeinfer::vision::PixelFormat format{};
  uint64_t framesOnGpu = 0;   // frames in CUDA memory drawn on by the kernel
  uint64_t framesOnHost = 0;  // frames in system memory drawn on by OpenCV
#if EDGEINFER_GST_CUDA
  GstCudaContext* shared = nullptr;       // given by set_context, passed on; object lock
  GstCudaContext* drawContext = nullptr;  // the context `renderer` has its buffers in
  eg::CudaOverlayRenderer renderer;
  // Turns each frame's primitives into runs, keeping its templates and text cache from frame
  // to frame (streaming thread only; EDGEINFER_OVERLAY_MASK_RUNS=1 switches its shortcuts off).
  eg::OverlayRunBuilder runBuilder{eg::OverlayRunOptions::fromEnvironment()};
#endif
};

}  // namespace

struct _GstEdgeOverlay {
  GstBaseTransform parent;
  State* state;
};

G_DEFINE_TYPE(GstEdgeOverlay, gst_edge_overlay, GST_TYPE_BASE_TRANSFORM)

namespace {

// `r` in a frame of width x height (a copy, scaled when its frame size differs).
eg::Results fitted(const eg::Results& r, int width, int height) {
  eg::Results out = r;
  if (r.width <= 0 || r.height <= 0 || (r.width == width && r.height == height)) return out;
  const float sx = static_cast<float>(width) / static_cast<float>(r.width);
  const float sy = static_cast<float>(height) / static_cast<float>(r.height);
  for (eg::Object& o : out.objects) {
    auto& b = o.detection.box;
    b.x1 *= sx, b.x2 *= sx, b.y1 *= sy, b.y2 *= sy;
    for (auto& k : o.detection.keypoints) k.x *= sx, k.y *= sy;
  }
  out.width = width;
  out.height = height;
  return out;
}

#if EDGEINFER_GST_CUDA
// Frees the renderer's stream and buffers in the context they were made in.
void releaseRenderer(State& s) {
  if (!s.drawContext) return;
  if (gst_cuda_context_push(s.drawContext)) {
    s.renderer.release();
    gst_cuda_context_pop(nullptr);
  }
  gst_object_unref(s.drawContext);
  s.drawContext = nullptr;
}

// Writes `runs` into `buf`, a frame in CUDA memory, on the GPU in the memory's context.
GstFlowReturn drawInCudaMemory(GstEdgeOverlay* self, GstBuffer* buf,
                               const std::vector<eg::OverlayRun>& runs) {
  State& s = *self->state;
  GstCudaContext* ctx = GST_CUDA_MEMORY_CAST(gst_buffer_peek_memory(buf, 0))->context;
  if (ctx != s.drawContext) {  // the first frame, or upstream changed contexts
    releaseRenderer(s);
    s.drawContext = static_cast<GstCudaContext*>(gst_object_ref(ctx));
  }
  if (!gst_cuda_context_push(ctx)) {
    GST_ELEMENT_ERROR(self, RESOURCE, FAILED,
                      ("edgeoverlay: cannot make the frame's CUDA context current"), (nullptr));
    return GST_FLOW_ERROR;
  }
  eg::CudaContextShare::syncMemory(buf);
  GstVideoFrame frame;
  if (!gst_video_frame_map(&frame, &s.info, buf,
                           static_cast<GstMapFlags>(GST_MAP_READWRITE | GST_MAP_CUDA))) {
    gst_cuda_context_pop(nullptr);
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("edgeoverlay: cannot map the CUDA frame for writing"),
                      ("buffer of %" G_GSIZE_FORMAT " bytes", gst_buffer_get_size(buf)));
    return GST_FLOW_ERROR;
  }
  eg::DeviceOverlayFrame f;
  f.format = s.format;
  f.width = GST_VIDEO_INFO_WIDTH(&s.info);
  f.height = GST_VIDEO_INFO_HEIGHT(&s.info);
  for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES(&frame) && p < 3; ++p) {
    f.planes[p] = static_cast<uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&frame, p));
    f.strides[p] = GST_VIDEO_FRAME_PLANE_STRIDE(&frame, p);
  }
  const edgeinfer::Status st = s.renderer.draw(f, runs);  // waits for the stream
  gst_video_frame_unmap(&frame);
  gst_cuda_context_pop(nullptr);
  if (!st.ok()) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("%s", st.message().c_str()), (nullptr));
    return GST_FLOW_ERROR;
  }
  ++s.framesOnGpu;
  return GST_FLOW_OK;
}
#endif

gboolean edgeOverlaySetCaps(GstBaseTransform* trans, GstCaps* incaps, GstCaps* /*outcaps*/) {
  GstEdgeOverlay* self = GST_EDGE_OVERLAY(trans);
  State& s = *self->state;
  GstVideoInfo info;
  if (!gst_video_info_from_caps(&info, incaps) ||
      !eg::toPixelFormat(GST_VIDEO_INFO_FORMAT(&info), &s.format) ||
      s.format == edgeinfer::vision::PixelFormat::kGray8) {
    GST_ELEMENT_ERROR(self, STREAM, FORMAT, ("edgeoverlay cannot draw on these frames"),
                      ("%" GST_PTR_FORMAT, static_cast<void*>(incaps)));
    return FALSE;
  }
  s.info = info;
  return TRUE;
}

GstFlowReturn edgeOverlayTransformIp(GstBaseTransform* trans, GstBuffer* buf) {
  GstEdgeOverlay* self = GST_EDGE_OVERLAY(trans);
  State& s = *self->state;
  GST_OBJECT_LOCK(self);
  const eg::OverlayStyle style = s.style;
  const int uniqueId = s.uniqueId;
  GST_OBJECT_UNLOCK(self);
  const int w = GST_VIDEO_INFO_WIDTH(&s.info), h = GST_VIDEO_INFO_HEIGHT(&s.info);
  std::vector<eg::Results> results;
  for (const EdgeInferMeta* m : eg::bufferMetas(buf))
    if (uniqueId < 0 || m->results->uniqueId == uniqueId)
      results.push_back(fitted(*m->results, w, h));
  if (results.empty()) return GST_FLOW_OK;
  std::vector<const eg::Results*> drawn;
  for (const eg::Results& r : results) drawn.push_back(&r);

#if EDGEINFER_GST_CUDA
  if (eg::CudaContextShare::isCudaMemory(buf)) {
    const std::vector<eg::OverlayRun> runs =
        s.runBuilder.runs(s.format, w, h, eg::overlayPrimitives(s.format, drawn, style));
    if (runs.empty()) return GST_FLOW_OK;  // everything lies outside the frame
    return drawInCudaMemory(self, buf, runs);
  }
#endif
  GstVideoFrame frame;
  if (!gst_video_frame_map(&frame, &s.info, buf, GST_MAP_READWRITE)) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("edgeoverlay: cannot map the frame for writing"),
                      ("buffer of %" G_GSIZE_FORMAT " bytes", gst_buffer_get_size(buf)));
    return GST_FLOW_ERROR;
  }
  eg::OverlayFrame f;
  f.format = s.format;
  f.width = w;
  f.height = h;
  for (guint p = 0; p < GST_VIDEO_FRAME_N_PLANES(&frame) && p < 3; ++p) {
    f.planes[p] = static_cast<uint8_t*>(GST_VIDEO_FRAME_PLANE_DATA(&frame, p));
    f.strides[p] = GST_VIDEO_FRAME_PLANE_STRIDE(&frame, p);
  }
  const edgeinfer::Status st = eg::drawResults(f, drawn, style);
  gst_video_frame_unmap(&frame);
  if (!st.ok()) {
    GST_ELEMENT_ERROR(self, STREAM, FAILED, ("edgeoverlay: %s", st.message().c_str()), (nullptr));
    return GST_FLOW_ERROR;
  }
  ++s.framesOnHost;
  return GST_FLOW_OK;
}

gboolean edgeOverlayStart(GstBaseTransform* trans) {
  State& s = *GST_EDGE_OVERLAY(trans)->state;
  s.framesOnGpu = s.framesOnHost = 0;
  return TRUE;
}

gboolean edgeOverlayStop(GstBaseTransform* trans) {
  State& s = *GST_EDGE_OVERLAY(trans)->state;
  GST_INFO_OBJECT(trans,
                  "drawn on %llu frames in CUDA memory (on the GPU) and %llu in system "
                  "memory",
                  static_cast<unsigned long long>(s.framesOnGpu),
                  static_cast<unsigned long long>(s.framesOnHost));
#if EDGEINFER_GST_CUDA
  releaseRenderer(s);
#endif
  return TRUE;
}

// Context queries of GStreamer's CUDA elements: answered with the context this element was
// given, if any.
gboolean edgeOverlayQuery(GstBaseTransform* trans, GstPadDirection direction, GstQuery* query) {
#if EDGEINFER_GST_CUDA
  if (GST_QUERY_TYPE(query) == GST_QUERY_CONTEXT) {
    State& s = *GST_EDGE_OVERLAY(trans)->state;
    GST_OBJECT_LOCK(trans);
    GstCudaContext* ctx =
        s.shared ? static_cast<GstCudaContext*>(gst_object_ref(s.shared)) : nullptr;
    GST_OBJECT_UNLOCK(trans);
    const bool answered = ctx && gst_cuda_handle_context_query(GST_ELEMENT(trans), query, ctx);
    if (ctx) gst_object_unref(ctx);
    if (answered) return TRUE;
  }
#endif
  return GST_BASE_TRANSFORM_CLASS(gst_edge_overlay_parent_class)->query(trans, direction, query);
}

void edgeOverlaySetProperty(GObject* object, guint id, const GValue* value, GParamSpec* pspec) {
  GstEdgeOverlay* self = GST_EDGE_OVERLAY(object);
  State& s = *self->state;
  GST_OBJECT_LOCK(self);
  switch (id) {
    case PROP_THICKNESS:
      s.style.thickness = g_value_get_int(value);
      break;
    case PROP_FONT_SCALE:
      s.style.fontScale = g_value_get_double(value);
      break;
    case PROP_DRAW_LABELS:
      s.style.labels = g_value_get_boolean(value);
      break;
    case PROP_DRAW_KEYPOINTS:
      s.style.keypoints = g_value_get_boolean(value);
      break;
    case PROP_UNIQUE_ID:
      s.uniqueId = g_value_get_int(value);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK(self);
}

void edgeOverlayGetProperty(GObject* object, guint id, GValue* value, GParamSpec* pspec) {
  GstEdgeOverlay* self = GST_EDGE_OVERLAY(object);
  State& s = *self->state;
  GST_OBJECT_LOCK(self);
  switch (id) {
    case PROP_THICKNESS:
      g_value_set_int(value, s.style.thickness);
      break;
    case PROP_FONT_SCALE:
      g_value_set_double(value, s.style.fontScale);
      break;
    case PROP_DRAW_LABELS:
      g_value_set_boolean(value, s.style.labels);
      break;
    case PROP_DRAW_KEYPOINTS:
      g_value_set_boolean(value, s.style.keypoints);
      break;
    case PROP_UNIQUE_ID:
      g_value_set_int(value, s.uniqueId);
      break;
    default:
      G_OBJECT_WARN_INVALID_PROPERTY_ID(object, id, pspec);
      break;
  }
  GST_OBJECT_UNLOCK(self);
}

void edgeOverlayFinalize(GObject* object) {
  GstEdgeOverlay* self = GST_EDGE_OVERLAY(object);
#if EDGEINFER_GST_CUDA
  releaseRenderer(*self->state);
  if (self->state->shared) gst_object_unref(self->state->shared);
#endif
  delete self->state;
  self->state = nullptr;
  G_OBJECT_CLASS(gst_edge_overlay_parent_class)->finalize(object);
}

constexpr GParamFlags kFlags = static_cast<GParamFlags>(G_PARAM_READWRITE | G_PARAM_STATIC_STRINGS |
                                                        GST_PARAM_MUTABLE_PLAYING);

}  // namespace

// A CUDA context from the bin (an element's have-context), kept to pass on.
static void edgeOverlaySetContext(GstElement* element, GstContext* context) {
#if EDGEINFER_GST_CUDA
  State& s = *GST_EDGE_OVERLAY(element)->state;
  GstCudaContext* ctx = nullptr;
  GST_OBJECT_LOCK(element);
  ctx = s.shared;
  GST_OBJECT_UNLOCK(element);
  // gst_cuda_handle_set_context takes only a "gst.cuda.context" and keeps one already set.
  if (gst_cuda_handle_set_context(element, context, -1, &ctx)) {
    GST_OBJECT_LOCK(element);
    s.shared = ctx;
    GST_OBJECT_UNLOCK(element);
  }
#endif
  GST_ELEMENT_CLASS(gst_edge_overlay_parent_class)->set_context(element, context);
}

static void gst_edge_overlay_class_init(GstEdgeOverlayClass* klass) {
  GObjectClass* gobject = G_OBJECT_CLASS(klass);
  GstElementClass* element = GST_ELEMENT_CLASS(klass);
  GstBaseTransformClass* trans = GST_BASE_TRANSFORM_CLASS(klass);
  GST_DEBUG_CATEGORY_INIT(gst_edge_overlay_debug, "edgeoverlay", 0, "EdgeInfer overlay");

  gobject->set_property = edgeOverlaySetProperty;
  gobject->get_property = edgeOverlayGetProperty;
  gobject->finalize = edgeOverlayFinalize;
  const eg::OverlayStyle defaults;
  g_object_class_install_property(
      gobject, PROP_THICKNESS,
      g_param_spec_int("thickness", "Thickness",
                       "Box line thickness in pixels (keypoint radius: thickness + 1)", 1, 64,
                       defaults.thickness, kFlags));
  g_object_class_install_property(
      gobject, PROP_FONT_SCALE,
      g_param_spec_double("font-scale", "Font scale", "Label font scale (OpenCV Hershey simplex)",
                          0.1, 10.0, defaults.fontScale, kFlags));
  g_object_class_install_property(
      gobject, PROP_DRAW_LABELS,
      g_param_spec_boolean("draw-labels", "Draw labels",
                           "Label each box with its class and score (and secondary classes); "
                           "list whole-frame classifications at the top left",
                           defaults.labels, kFlags));
  g_object_class_install_property(
      gobject, PROP_DRAW_KEYPOINTS,
      g_param_spec_boolean("draw-keypoints", "Draw keypoints",
                           "Draw each detection's keypoints (e.g. face landmarks)",
                           defaults.keypoints, kFlags));
  g_object_class_install_property(
      gobject, PROP_UNIQUE_ID,
      g_param_spec_int("unique-id", "Unique ID",
                       "Draw only the results of the edgeinfer element with this unique-id "
                       "(-1: every element's)",
                       -1, G_MAXINT, -1, kFlags));

  gst_element_class_set_static_metadata(
      element, "EdgeInfer overlay", "Filter/Effect/Video",
      "Draws the boxes, labels and keypoints of EdgeInferMeta on the frames",
      "EdgeInfer developers");
  GstCaps* caps = gst_caps_from_string(EDGEINFER_OVERLAY_CAPS);
  gst_element_class_add_pad_template(
      element, gst_pad_template_new("sink", GST_PAD_SINK, GST_PAD_ALWAYS, caps));
  gst_element_class_add_pad_template(
      element, gst_pad_template_new("src", GST_PAD_SRC, GST_PAD_ALWAYS, caps));
  gst_caps_unref(caps);

  element->set_context = GST_DEBUG_FUNCPTR(edgeOverlaySetContext);
  trans->start = GST_DEBUG_FUNCPTR(edgeOverlayStart);
  trans->stop = GST_DEBUG_FUNCPTR(edgeOverlayStop);
  trans->query = GST_DEBUG_FUNCPTR(edgeOverlayQuery);
  trans->set_caps = GST_DEBUG_FUNCPTR(edgeOverlaySetCaps);
  trans->transform_ip = GST_DEBUG_FUNCPTR(edgeOverlayTransformIp);
  trans->passthrough_on_same_caps = FALSE;
}

static void gst_edge_overlay_init(GstEdgeOverlay* self) {
  self->state = new State();
  gst_base_transform_set_in_place(GST_BASE_TRANSFORM(self), TRUE);
}
