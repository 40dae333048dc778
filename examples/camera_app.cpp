// camera_app: the SDK embedded in a camera application, without GStreamer.
// Reads a video file or an RTSP stream, runs a model from its config (e.g. BlazeFace) on every
// frame, draws the results, writes an annotated video and one JSON line per frame.
//
//   camera_app models/blazeface/model.json input.mp4 out.mp4 [out.jsonl] [--cpu]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>

#include "edgeinfer/logger.h"
#include "edgeinfer/vision/video.h"
#include "edgeinfer/vision/vision_model.h"

using namespace edgeinfer;
using namespace edgeinfer::vision;

static int fail(const Status& s) {
  std::cerr << "camera_app: " << s.toString() << "\n";
  return 1;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::cerr << "usage: camera_app MODEL.json VIDEO|rtsp://... OUT.mp4 [OUT.jsonl] [--cpu]\n";
    return 2;
  }
  VisionModelOptions options;
  for (int i = 1; i < argc; ++i)
    if (!std::strcmp(argv[i], "--cpu")) options.backend = Backend::kCpu;
  auto model = VisionModel::load(argv[1], options);  // builds the engine once, then reuses it
  if (!model.ok()) return fail(model.status());
  std::cout << "model " << (*model)->config().name << " on the "
            << ((*model)->onGpu() ? "GPU" : "CPU") << " (engine " << (*model)->engineSource()
            << ")\n";

  VideoReaderOptions ropts;
  ropts.decode = VideoReaderOptions::Decode::kSoftware;  // frames on the host, to draw on
  ropts.hostFormat = PixelFormat::kBGR;                  // OpenCV's order
  auto reader = VideoReader::open(argv[2], ropts);
  if (!reader.ok()) return fail(reader.status());
  const VideoInfo& info = (*reader)->info();
  VideoWriterOptions wopts;
  wopts.fps = info.fps > 0 ? info.fps : 30;
  auto writer = VideoWriter::open(argv[3], info.width, info.height, wopts);
  if (!writer.ok()) return fail(writer.status());
  std::ofstream json;
  if (argc > 4 && argv[4][0] != '-') json.open(argv[4]);

  int64_t frames = 0, framesWithResults = 0, results = 0;
  double inferSeconds = 0;
  const auto start = std::chrono::steady_clock::now();
  VideoFrame frame;
  for (;;) {
    auto more = (*reader)->read(frame);
    if (!more.ok()) return fail(more.status());
    if (!*more) break;
    const auto t0 = std::chrono::steady_clock::now();
    auto r = (*model)->infer({frame.view});
    inferSeconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!r.ok()) return fail(r.status());
    const FrameResult& res = (*r)[0];

    // Draw on a copy of the decoded frame (the reader owns its buffer).
    cv::Mat view(frame.view.height, frame.view.width, CV_8UC3,
                 const_cast<uint8_t*>(frame.view.planes[0]), frame.view.strides[0]);
    cv::Mat canvas = view.clone();
    nlohmann::json line = {{"frame", frame.index}, {"time", frame.timestampSeconds}};
    line["detections"] = nlohmann::json::array();
    for (const Detection& d : res.detections) {
      cv::rectangle(canvas, cv::Point(int(d.box.x1), int(d.box.y1)),
                    cv::Point(int(d.box.x2), int(d.box.y2)), cv::Scalar(0, 255, 0), 2);
      for (const Keypoint& k : d.keypoints)
        cv::circle(canvas, cv::Point(int(k.x), int(k.y)), 2, cv::Scalar(0, 0, 255), -1);
      char label[64];
      std::snprintf(label, sizeof label, "%s %.2f", d.label.c_str(), d.score);
      cv::putText(canvas, label, cv::Point(int(d.box.x1), std::max(10, int(d.box.y1) - 3)),
                  cv::FONT_HERSHEY_SIMPLEX, 0.4, cv::Scalar(0, 255, 0), 1);
      line["detections"].push_back({{"label", d.label},
                                    {"class", d.classId},
                                    {"score", d.score},
                                    {"box", {d.box.x1, d.box.y1, d.box.x2, d.box.y2}}});
    }
    for (const Classification& c : res.classifications)
      line["classes"].push_back({{"label", c.label}, {"class", c.classId}, {"score", c.score}});
    const size_t found = res.detections.size() + res.classifications.size();
    results += static_cast<int64_t>(found);
    framesWithResults += found > 0;
    if (json.is_open()) json << line.dump() << "\n";

    FrameView out = frame.view;
    out.planes[0] = canvas.data;
    out.strides[0] = static_cast<int>(canvas.step);
    Status st = (*writer)->write(out);
    if (!st.ok()) return fail(st);
    ++frames;
  }
  Status st = (*writer)->close();
  if (!st.ok()) return fail(st);
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "%lld frames (%dx%d) in %.2f s: %.1f FPS end to end, inference %.2f ms/frame; "
      "results in %lld frames (%lld in all)\nwrote %s%s%s\n",
      static_cast<long long>(frames), info.width, info.height, total,
      frames / std::max(total, 1e-9), 1e3 * inferSeconds / std::max<int64_t>(frames, 1),
      static_cast<long long>(framesWithResults), static_cast<long long>(results), argv[3],
      json.is_open() ? " and " : "", json.is_open() ? argv[4] : "");
  return frames > 0 ? 0 : 1;
}
