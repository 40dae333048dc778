#include "sdk_logger.h"

#include <cstdlib>
#include <mutex>

#include "edgeinfer/logger.h"

GST_DEBUG_CATEGORY_STATIC(edgeinfer_sdk_debug);
#define GST_CAT_DEFAULT edgeinfer_sdk_debug

namespace edgeinfer::gst {
namespace {

class GstLogger final : public ILogger {
 public:
  void log(Severity severity, const char* message) noexcept override {
    GstDebugLevel level = GST_LEVEL_DEBUG;
    switch (severity) {
      case Severity::kError:
        level = GST_LEVEL_ERROR;
        break;
      case Severity::kWarning:
        level = GST_LEVEL_WARNING;
        break;
      case Severity::kInfo:
        level = GST_LEVEL_INFO;
        break;
      case Severity::kVerbose:
        level = GST_LEVEL_DEBUG;
        break;
    }
    GST_CAT_LEVEL_LOG(edgeinfer_sdk_debug, level, nullptr, "%s", message);
  }
};

GstLogger& logger() {
  static GstLogger instance;  // trivially destructible state; lives as long as the process
  return instance;
}

}  // namespace

void installSdkLogger() {
  static std::once_flag once;
  std::call_once(once, [] {
    GST_DEBUG_CATEGORY_INIT(edgeinfer_sdk_debug, "edgeinfer-sdk", 0,
                            "EdgeInfer SDK messages (engine builds, caches, fallbacks)");
    setLogger(&logger());
  });
}

void syncSdkLogLevel() {
  if (const char* env = std::getenv("EDGEINFER_LOG_LEVEL"); env && *env) return;
  const GstDebugLevel shown = gst_debug_category_get_threshold(edgeinfer_sdk_debug);
  Severity want = Severity::kWarning;
  if (shown >= GST_LEVEL_DEBUG) {
    want = Severity::kVerbose;
  } else if (shown >= GST_LEVEL_INFO) {
    want = Severity::kInfo;
  }
  if (want > getLogLevel()) setLogLevel(want);
}

}  // namespace edgeinfer::gst
