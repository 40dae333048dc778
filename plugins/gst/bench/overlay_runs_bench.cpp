// edgeinfer_overlay_bench: what edgeoverlay costs on the host per frame. For a 1080p frame
// (NV12 and RGBA) with N detections (box, label, 6 keypoints: BlazeFace-like), the median time
// of:
//   host drawing   drawResults() on a host frame (the system-memory path)
//   runs           overlayPrimitives() + OverlayRunBuilder::runs(), one builder for every
//                  frame as in the element: the host part of the CUDA-memory path (the kernel
//                  that writes the runs is not timed here); EDGEINFER_OVERLAY_MASK_RUNS=1 times
//                  the mask path alone
//   cold           the same with a new builder every frame (no template or text drawn before:
//                  the first frame's cost, or labels that never repeat)
// Usage: edgeinfer_overlay_bench [ITERATIONS]. Figures go to docs/performance.md.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "overlay_draw.h"

namespace eg = edgeinfer::gst;
using edgeinfer::vision::PixelFormat;

namespace {

eg::Results faces(int n, int w, int h) {
  eg::Results r;
  r.uniqueId = 1;
  r.width = w;
  r.height = h;
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> ux(0.f, w * 0.9f), uy(0.f, h * 0.9f), us(40.f, 160.f);
  for (int i = 0; i < n; ++i) {
    eg::Object o;
    const float x = ux(rng), y = uy(rng), s = us(rng);
    o.detection.box = {x, y, x + s, y + s};
    o.detection.classId = 0;
    o.detection.score = 0.9f;
    o.detection.label = "face";
    for (int k = 0; k < 6; ++k)
      o.detection.keypoints.push_back({x + s * (0.2f + 0.12f * k), y + s * 0.4f, 1.f});
    r.objects.push_back(o);
  }
  return r;
}

double medianUs(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = argc > 1 ? std::max(1, std::atoi(argv[1])) : 50;
  const int w = 1920, h = 1080;
  eg::OverlayStyle style;
  std::printf("1080p frame, BlazeFace-like detections (box, label, 6 keypoints), median of %d\n",
              iters);
  std::printf("%-6s %-4s %16s %22s %10s %10s\n", "format", "N", "host drawing (us)",
              "runs for CUDA (us)", "cold (us)", "runs");
  for (PixelFormat f : {PixelFormat::kNV12, PixelFormat::kRGBA}) {
    const bool nv12 = f == PixelFormat::kNV12;
    std::vector<uint8_t> frame(static_cast<size_t>(w) * h * (nv12 ? 3 : 8) / 2);
    eg::OverlayFrame of;
    of.format = f;
    of.width = w;
    of.height = h;
    of.planes[0] = frame.data();
    of.strides[0] = nv12 ? w : 4 * w;
    if (nv12) {
      of.planes[1] = frame.data() + static_cast<size_t>(w) * h;
      of.strides[1] = w;
    }
    for (int n : {1, 5, 20, 50}) {
      const eg::Results r = faces(n, w, h);
      const std::vector<const eg::Results*> all{&r};
      std::vector<double> draw, runs, cold;
      size_t count = 0;
      eg::OverlayRunBuilder builder(eg::OverlayRunOptions::fromEnvironment());
      for (int i = 0; i < iters; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        if (!eg::drawResults(of, all, style).ok()) return 1;
        auto t1 = std::chrono::steady_clock::now();
        const auto prims = eg::overlayPrimitives(f, all, style);
        count = builder.runs(f, w, h, prims).size();
        auto t2 = std::chrono::steady_clock::now();
        draw.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
        runs.push_back(std::chrono::duration<double, std::micro>(t2 - t1).count());
      }
      for (int i = 0; i < iters; ++i) {  // apart, not to disturb the loop above's caches
        auto t0 = std::chrono::steady_clock::now();
        eg::OverlayRunBuilder fresh(eg::OverlayRunOptions::fromEnvironment());
        if (fresh.runs(f, w, h, eg::overlayPrimitives(f, all, style)).size() != count) return 1;
        auto t1 = std::chrono::steady_clock::now();
        cold.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
      std::printf("%-6s %-4d %16.1f %22.1f %10.1f %10zu\n", nv12 ? "NV12" : "RGBA", n,
                  medianUs(draw), medianUs(runs), medianUs(cold), count);
    }
  }
  return 0;
}
