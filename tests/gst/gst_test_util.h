// Helpers of the GStreamer plugin tests: where the model and media are, real photos as frames in
// every format and layout (as GstBuffers and as SDK FrameViews over the same bytes), and
// pipelines run to an error or EOS under a timeout.
#pragma once

#include <gst/check/gstharness.h>
#include <gst/gst.h>
#include <gst/video/video.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "edgeinfer/gst/edgeinfer_meta.h"
#include "edgeinfer/vision/preprocess.h"

namespace eitest {

bool exists(const std::string& path);
std::string modelsDir();                           // <repo>/models, or $EDGEINFER_MODELS_DIR
std::string mediaDir();                            // <repo>/build/media, or $EDGEINFER_MEDIA_DIR
std::string blazeFace(const std::string& config);  // modelsDir()/blazeface/<config>
/// A directory of this test process for engine caches (so tests never touch ~/.cache).
std::string engineCacheDir();

/// Skips the test, saying what to run, when the BlazeFace model or the test photos are absent.
#define EI_SKIP_WITHOUT_MODEL_AND_MEDIA()                                                    \
  do {                                                                                       \
    if (!::eitest::exists(::eitest::blazeFace("blazeface_front_128.onnx")) ||                \
        !::eitest::exists(::eitest::blazeFace("blazeface_back_256.onnx")))                   \
      GTEST_SKIP() << "BlazeFace is absent from " << ::eitest::modelsDir()                   \
                   << "/blazeface: run models/fetch.sh blazeface";                           \
    if (!::eitest::exists(::eitest::mediaDir() + "/faces/2008_002506.ppm") ||                \
        !::eitest::exists(::eitest::mediaDir() + "/kphotoalbum/anne_helene.ppm"))            \
      GTEST_SKIP() << "test photos are absent from " << ::eitest::mediaDir()                 \
                   << ": run scripts/fetch_media.sh (Debian's libdlib19.1 and kphotoalbum)"; \
  } while (0)

/// An RGB photo (binary PPM).
struct Image {
  int width = 0, height = 0;
  std::vector<uint8_t> rgb;
};
bool readPpm(const std::string& path, Image& img);
/// A test photo, `path` relative to mediaDir() (a test failure when it cannot be read).
Image photo(const std::string& path);
/// Every field of every detection of a meta against what the SDK returned, bit for bit.
void expectSameDetections(const std::vector<edgeinfer::gst::Object>& got,
                          const std::vector<edgeinfer::vision::Detection>& want,
                          const std::string& what);
/// The top-left width x height part of an image.
Image cropImage(const Image& img, int width, int height);

/// A frame laid out as a GstBuffer holds it: `bytes` with planes at `offsets` and `strides`.
/// Default layout: GstVideoInfo's (no GstVideoMeta needed). Padded: odd strides larger than a
/// row and gaps between planes, described by a GstVideoMeta on the buffer.
struct Frame {
  GstVideoInfo info;
  std::vector<uint8_t> bytes;
  gsize offsets[GST_VIDEO_MAX_PLANES] = {};
  gint strides[GST_VIDEO_MAX_PLANES] = {};
  bool padded = false;

  /// The SDK's view of the same bytes.
  edgeinfer::vision::FrameView view() const;
  /// A new buffer holding a copy of the bytes (with a GstVideoMeta when padded).
  GstBuffer* buffer(GstClockTime pts = GST_CLOCK_TIME_NONE) const;
  GstCaps* caps() const;
};

/// `img` converted to `format` (BT.601 limited range for NV12/I420 with 2x2 chroma averages,
/// OpenCV's luma for GRAY8, 255 in the fourth byte of the 4-byte formats); padding bytes are
/// filled with 0xA5.
Frame makeFrame(const Image& img, GstVideoFormat format, bool padded);
/// Reads the planes of `buffer` back into a Frame of the same layout as `like`.
Frame readBack(GstBuffer* buffer, const Frame& like);
/// Where two frames of one layout differ: "n bytes differ, first in plane p row r byte b: got G
/// want W", or "identical".
std::string frameDifference(const Frame& got, const Frame& want);

/// A harness around one element (created from `factory` and `props`, e.g.
/// "config=... backend=cpu", before it starts), or null with a test failure.
GstHarness* harnessFor(const std::string& factory, const std::string& props, GstBus* bus = nullptr);

/// What running a pipeline came to.
struct Outcome {
  bool parsed = false;
  GstStateChangeReturn start = GST_STATE_CHANGE_FAILURE;  // set_state(PLAYING)
  bool eos = false;
  bool error = false;
  bool timedOut = false;
  std::string errorSource;  // element that posted the error
  std::string errorText;    // GError message
  std::string errorDebug;
  GQuark errorDomain = 0;
  int errorCode = 0;
  std::vector<std::string> warnings;  // "element: text"
  double stopSeconds = 0;             // set_state(NULL) after the error/EOS
};
/// Parses `description`, plays it and waits on the bus (never longer than `timeout`) for an
/// error or EOS, collecting warnings; then sets it to NULL, timing that.
/// `setup`, if given, runs on the pipeline before it is played.
Outcome runPipeline(const std::string& description,
                    std::chrono::milliseconds timeout = std::chrono::seconds(60),
                    const std::function<void(GstElement*)>& setup = nullptr);
std::string describe(const Outcome& o);

}  // namespace eitest
