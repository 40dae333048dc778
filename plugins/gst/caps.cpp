#include "caps.h"

#include <vector>

namespace edgeinfer::gst {

bool toPixelFormat(GstVideoFormat format, vision::PixelFormat* out) {
  using vision::PixelFormat;
  switch (format) {
    case GST_VIDEO_FORMAT_NV12:
      *out = PixelFormat::kNV12;
      return true;
    case GST_VIDEO_FORMAT_I420:
      *out = PixelFormat::kI420;
      return true;
    case GST_VIDEO_FORMAT_RGBA:
      *out = PixelFormat::kRGBA;
      return true;
    case GST_VIDEO_FORMAT_BGRA:
      *out = PixelFormat::kBGRA;
      return true;
    case GST_VIDEO_FORMAT_RGBx:
      *out = PixelFormat::kRGBx;
      return true;
    case GST_VIDEO_FORMAT_BGRx:
      *out = PixelFormat::kBGRx;
      return true;
    case GST_VIDEO_FORMAT_RGB:
      *out = PixelFormat::kRGB;
      return true;
    case GST_VIDEO_FORMAT_BGR:
      *out = PixelFormat::kBGR;
      return true;
    case GST_VIDEO_FORMAT_GRAY8:
      *out = PixelFormat::kGray8;
      return true;
    default:
      return false;
  }
}

namespace {

// The formats named in a structure's "format" field (a string or a list of strings).
std::vector<std::string> formatsOf(const GstStructure* s) {
  std::vector<std::string> out;
  const GValue* v = gst_structure_get_value(s, "format");
  if (!v) return out;
  if (G_VALUE_HOLDS_STRING(v)) {
    out.emplace_back(g_value_get_string(v));
  } else if (GST_VALUE_HOLDS_LIST(v)) {
    for (guint i = 0; i < gst_value_list_get_size(v); ++i) {
      const GValue* f = gst_value_list_get_value(v, i);
      if (G_VALUE_HOLDS_STRING(f)) out.emplace_back(g_value_get_string(f));
    }
  }
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// The formats of the template's system-memory video/x-raw structures.
std::vector<std::string> templateFormats(GstCaps* templ) {
  std::vector<std::string> out;
  for (guint i = 0; i < gst_caps_get_size(templ); ++i) {
    GstCapsFeatures* f = gst_caps_get_features(templ, i);
    if (f && !gst_caps_features_is_any(f) &&
        !gst_caps_features_contains(f, GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY))
      continue;
    for (const std::string& fmt : formatsOf(gst_caps_get_structure(templ, i))) out.push_back(fmt);
  }
  return out;
}

}  // namespace

std::string unsupportedCapsMessage(const char* element, GstCaps* caps, GstCaps* templ) {
  if (!caps || !templ || gst_caps_is_empty(caps) || gst_caps_is_any(caps) ||
      gst_caps_can_intersect(caps, templ))
    return "";
  std::vector<std::string> formats, memories;
  for (guint i = 0; i < gst_caps_get_size(caps); ++i) {
    const GstStructure* s = gst_caps_get_structure(caps, i);
    if (!gst_structure_has_name(s, "video/x-raw")) return "";  // not raw video: not our call
    GstCapsFeatures* f = gst_caps_get_features(caps, i);
    if (f && !gst_caps_features_is_any(f) &&
        !gst_caps_features_contains(f, GST_CAPS_FEATURE_MEMORY_SYSTEM_MEMORY)) {
      gchar* text = gst_caps_features_to_string(f);
      memories.emplace_back(text);
      g_free(text);
      continue;
    }
    for (const std::string& fmt : formatsOf(s)) formats.push_back(fmt);
  }
  const std::vector<std::string> takenFormats = templateFormats(templ);
  for (const std::string& fmt : formats)
    for (const std::string& t : takenFormats)
      if (fmt == t) return "";  // a format it takes: something else does not fit
  const std::string taken = join(takenFormats);
  std::string msg = std::string(element) + " cannot take ";
  if (!formats.empty()) {
    msg += "video/x-raw format " + join(formats);
  } else if (!memories.empty()) {
    msg += "video/x-raw(" + join(memories) + ")";
  } else {
    return "";  // some other field (e.g. a size) does not fit: not a format problem
  }
  msg += ": it takes video/x-raw in system memory in the formats " + taken +
         " (put videoconvert before it)";
  return msg;
}

}  // namespace edgeinfer::gst
