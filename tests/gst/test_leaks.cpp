// Many frames through edgeinfer (CPU) ! edgeoverlay, for LeakSanitizer: in the ASan build
// (scripts/test.sh: -DEDGEINFER_SANITIZE=address,undefined) the process exits with a leak report
// if any frame leaked (a meta's results, a mapping, a message). The model is a tiny generated
// detector (YOLOv8 layout, 16x16 input) so that 10,000 frames take seconds, not minutes, and
// every frame carries boxes for the overlay to draw. EDGEINFER_GST_LEAK_FRAMES overrides the
// count.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "gst_test_util.h"
#include "test_model.h"
#include "tiny_models.h"

namespace {

using namespace eitest;
namespace eg = edgeinfer::gst;
using edgeinfer::test::TestModel;

int frameCount() {
  if (const char* e = std::getenv("EDGEINFER_GST_LEAK_FRAMES")) return std::atoi(e);
  return 10000;
}

TEST(GstLeaks, TenThousandFramesThroughInferenceAndOverlay) {
  TinyDetector model;
  const int frames = frameCount();
  GstHarness* h = gst_harness_new_parse(("edgeinfer config=" + model.config +
                                         " backend=cpu engine-cache-dir=" + model.dir.path() +
                                         " post-messages=true ! edgeoverlay")
                                            .c_str());
  gst_harness_set_src_caps_str(h, "video/x-raw,format=RGBA,width=64,height=48,framerate=30/1");
  Image img;
  img.width = 64;
  img.height = 48;
  img.rgb.resize(64 * 48 * 3);
  int drawn = 0, boxes = 0;
  for (int i = 0; i < frames; ++i) {
    for (size_t k = 0; k < img.rgb.size(); ++k)
      img.rgb[k] = static_cast<uint8_t>((k * 7 + i) & 255);
    const Frame frame = makeFrame(img, GST_VIDEO_FORMAT_RGBA, i % 2 == 1);
    ASSERT_EQ(gst_harness_push(h, frame.buffer(static_cast<GstClockTime>(i) * GST_MSECOND)),
              GST_FLOW_OK)
        << "frame " << i;
    GstBuffer* out = gst_harness_pull(h);
    ASSERT_NE(out, nullptr) << "frame " << i;
    const EdgeInferMeta* m = eg::findMeta(out, 1);
    ASSERT_NE(m, nullptr) << "frame " << i;
    boxes += static_cast<int>(m->results->objects.size());
    if (i % 500 == 0) drawn += readBack(out, frame).bytes != frame.bytes;
    gst_buffer_unref(out);
  }
  EXPECT_GE(boxes, frames) << "every frame should carry a box for the overlay";
  EXPECT_EQ(drawn, (frames + 499) / 500) << "the overlay should draw on every checked frame";
  gst_harness_teardown(h);
}

}  // namespace
