// The SDK's log inside GStreamer's: messages of edgeinfer::log (engine builds, cache misses,
// fallbacks) go to the debug category "edgeinfer-sdk" (GST_DEBUG=edgeinfer-sdk:4 shows the
// build progress), errors at ERROR, warnings at WARNING, info at INFO, verbose at DEBUG.
#pragma once

#include <gst/gst.h>

namespace edgeinfer::gst {

/// Installs the GStreamer logger as the SDK's logger (edgeinfer::setLogger), once. Called when
/// the plugin loads. An application that wants the SDK's messages elsewhere can install its
/// own logger after the plugin has loaded.
void installSdkLogger();

/// Lets the SDK format messages up to what the "edgeinfer-sdk" category shows (the SDK drops
/// messages above its level before formatting them), unless EDGEINFER_LOG_LEVEL chose a level.
/// Never lowers the level below warnings. Called when an element starts.
void syncSdkLogLevel();

}  // namespace edgeinfer::gst
