// Video I/O (edgeinfer/vision/video.h): VideoReader on a real camera clip, against ffprobe's
// frame count and OpenCV's cv::VideoCapture; VideoWriter -> VideoReader round trips; errors
// (missing, wrong, truncated, damaged files; bad writer use; network timeouts; GPU decoding
// without a GPU); and, in CUDA builds on a GPU, NVDEC against the software decoder.
//
// The clip: /usr/share/forensics-samples/original-files/movie1/VID_20191220_170832.mp4 from the
// Debian package forensics-samples-files (scripts/setup.sh installs it): a phone camera's
// H.264 High (level 4.0) 1920x1080 yuv420p video, 41 frames in 1.517 s (mean 369000/13657 =
// 27.02 fps, variable frame rate), with an AAC audio track, moov atom at the front. 41 is what
// `ffprobe -count_frames` counts and what the MP4 header says. Tests that need it skip, naming
// the package, where it is absent; without FFmpeg (the cross build) every test here skips.
//
// Tolerances:
// - VideoReader (hostFormat BGR) vs cv::VideoCapture: both decode with FFmpeg's H.264 decoder
//   (bit-exact by the standard) and convert with libswscale (SWS_BICUBIC, BT.601), so they
//   should agree exactly; we allow a mean absolute difference of 0.5 and a maximum of 8 per
//   channel in case OpenCV's build converts through another libswscale path (e.g. SIMD vs C
//   rounding), which differs by at most a few levels.
// - Round trips through libx264 (CRF 23) on smooth synthetic frames: PSNR > 30 dB per frame.
// - NVDEC vs software decoding: exact (H.264 decoding is bit-exact; NVDEC conforms).
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "edgeinfer/vision/preprocess.h"
#include "edgeinfer/vision/video.h"

#if EDGEINFER_TEST_HAVE_OPENCV_VIDEOIO
#include <opencv2/core.hpp>
#include <opencv2/videoio.hpp>
#endif
#ifdef EDGEINFER_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace edgeinfer::vision {
namespace {

namespace fs = std::filesystem;

const char* const kClip =
    "/usr/share/forensics-samples/original-files/movie1/VID_20191220_170832.mp4";
const char* const kAudioOnly = "/usr/share/forensics-samples/original-files/audio1/debian.wav";
const char* const kClipPackage = "forensics-samples-files";
constexpr int kClipFrames = 41;
constexpr int kClipWidth = 1920;
constexpr int kClipHeight = 1080;
constexpr double kClipFps = 369000.0 / 13657.0;  // the MP4's avg_frame_rate

#define SKIP_WITHOUT_FFMPEG() \
  if (!videoIoAvailable()) GTEST_SKIP() << "EdgeInfer was built without FFmpeg"
#define SKIP_WITHOUT_CLIP()                                                        \
  SKIP_WITHOUT_FFMPEG();                                                           \
  if (!fs::exists(kClip))                                                          \
  GTEST_SKIP() << "needs " << kClip << " from the Debian package " << kClipPackage \
               << " (scripts/setup.sh installs it)"

// A fresh directory under the test temp dir, removed at the end of the test.
class TempDir {
 public:
  TempDir() {
    std::string pattern = ::testing::TempDir() + "ei_video_XXXXXX";
    std::vector<char> buf(pattern.begin(), pattern.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data())) path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  bool ok() const { return !path_.empty(); }

 private:
  std::string path_;
};

std::vector<char> readBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<char>(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void writeBytes(const std::string& path, const char* data, size_t n) {
  std::ofstream out(path, std::ios::binary);
  out.write(data, static_cast<std::streamsize>(n));
}

// Copies a frame's planes (host) into one tight buffer, plane after plane.
std::vector<uint8_t> tightCopy(const FrameView& v) {
  std::vector<uint8_t> out;
  for (int p = 0; p < pixelFormatPlanes(v.format); ++p) {
    const int64_t row = planeRowBytes(v.format, v.width, p);
    for (int r = 0; r < planeRows(v.format, v.height, p); ++r)
      out.insert(out.end(), v.planes[p] + static_cast<int64_t>(r) * v.strides[p],
                 v.planes[p] + static_cast<int64_t>(r) * v.strides[p] + row);
  }
  return out;
}

double psnr(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b) {
  if (a.size() != b.size() || a.empty()) return 0;
  double se = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    se += d * d;
  }
  const double mse = se / double(a.size());
  return mse == 0 ? 99.0 : 10.0 * std::log10(255.0 * 255.0 / mse);
}

// Frame t of a smooth moving test pattern (compresses well, so PSNR measures the codec, not
// noise): sine waves drifting right and down plus a grey square moving diagonally.
uint8_t patternValue(int x, int y, int t, int channel) {
  const double phase = 0.7 * channel;
  double v = 128 + 60 * std::sin((x + 3 * t) / 17.0 + phase) + 50 * std::cos((y + 2 * t) / 23.0);
  const int sx = (5 * t) % 200, sy = (3 * t) % 150;
  if (x >= sx && x < sx + 40 && y >= sy && y < sy + 40) v = 200;
  return static_cast<uint8_t>(std::clamp(v, 0.0, 255.0));
}

std::vector<uint8_t> patternBgr(int w, int h, int t) {
  std::vector<uint8_t> img(static_cast<size_t>(w) * h * 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x)
      for (int c = 0; c < 3; ++c)
        img[(static_cast<size_t>(y) * w + x) * 3 + c] = patternValue(x, y, t, c);
  return img;
}

// The same pattern as tight I420 planes (Y full size; U, V at half size, channels 1 and 2).
std::vector<uint8_t> patternI420(int w, int h, int t) {
  const int cw = (w + 1) / 2, ch = (h + 1) / 2;
  std::vector<uint8_t> img(static_cast<size_t>(w) * h + 2 * static_cast<size_t>(cw) * ch);
  size_t i = 0;
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) img[i++] = patternValue(x, y, t, 0);
  for (int c = 1; c <= 2; ++c)
    for (int y = 0; y < ch; ++y)
      for (int x = 0; x < cw; ++x) img[i++] = patternValue(2 * x, 2 * y, t, c);
  return img;
}

std::vector<uint8_t> i420ToNv12(const std::vector<uint8_t>& i420, int w, int h) {
  const size_t luma = static_cast<size_t>(w) * h, chroma = size_t((w + 1) / 2) * ((h + 1) / 2);
  std::vector<uint8_t> nv12(i420.begin(), i420.begin() + static_cast<std::ptrdiff_t>(luma));
  for (size_t k = 0; k < chroma; ++k) {
    nv12.push_back(i420[luma + k]);
    nv12.push_back(i420[luma + chroma + k]);
  }
  return nv12;
}

// Reads every frame as tight buffers; stops at the end or the first error.
struct ReadResult {
  std::vector<std::vector<uint8_t>> frames;
  Status status;
};
ReadResult readAll(const std::string& path, PixelFormat format) {
  ReadResult r;
  VideoReaderOptions opt;
  opt.decode = VideoReaderOptions::Decode::kSoftware;
  opt.hostFormat = format;
  auto reader = VideoReader::open(path, opt);
  if (!reader.ok()) {
    r.status = reader.status();
    return r;
  }
  VideoFrame f;
  for (;;) {
    auto more = (*reader)->read(f);
    if (!more.ok()) {
      r.status = more.status();
      break;
    }
    if (!*more) break;
    r.frames.push_back(tightCopy(f.view));
  }
  return r;
}

bool gpuPresent() {
#ifdef EDGEINFER_HAVE_CUDA
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
#else
  return fs::exists("/dev/nvidiactl");
#endif
}

// ---- Reading the real clip ----------------------------------------------------------------

TEST(VisionVideo, ReadsCameraClipInSoftware) {
  SKIP_WITHOUT_CLIP();
  VideoReaderOptions opt;
  opt.decode = VideoReaderOptions::Decode::kSoftware;
  auto reader = VideoReader::open(kClip, opt);
  ASSERT_TRUE(reader.ok()) << reader.status().toString();
  const VideoInfo& info = (*reader)->info();
  EXPECT_EQ(info.width, kClipWidth);
  EXPECT_EQ(info.height, kClipHeight);
  EXPECT_NEAR(info.fps, kClipFps, 1e-9);
  EXPECT_EQ(info.frameCount, kClipFrames);
  EXPECT_EQ(info.codec, "h264");
  EXPECT_FALSE(info.hardwareDecoding);

  VideoFrame f;
  int n = 0;
  double lastTime = -1;
  for (;;) {
    auto more = (*reader)->read(f);
    ASSERT_TRUE(more.ok()) << more.status().toString();
    if (!*more) break;
    EXPECT_EQ(f.index, n);
    EXPECT_GT(f.timestampSeconds, lastTime);
    lastTime = f.timestampSeconds;
    EXPECT_EQ(f.view.format, PixelFormat::kNV12);
    EXPECT_EQ(f.view.memory, MemoryLocation::kHost);
    EXPECT_EQ(f.view.width, kClipWidth);
    EXPECT_EQ(f.view.height, kClipHeight);
    EXPECT_TRUE(validateFrame(f.view).ok()) << validateFrame(f.view).toString();
    if (n == 20) {  // a real picture: luma and chroma vary
      const uint8_t* y = f.view.planes[0] + 540 * f.view.strides[0];
      EXPECT_GT(*std::max_element(y, y + kClipWidth) - *std::min_element(y, y + kClipWidth), 50);
      const uint8_t* uv = f.view.planes[1] + 270 * f.view.strides[1];
      EXPECT_NE(*std::max_element(uv, uv + kClipWidth), *std::min_element(uv, uv + kClipWidth));
    }
    ++n;
  }
  EXPECT_EQ(n, kClipFrames);
  EXPECT_NEAR(lastTime, 1.517444 - 1.0 / 30, 0.02);  // ffprobe: duration 1.517 s
  auto again = (*reader)->read(f);                   // stays at the end
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

// Every hostFormat gives a valid frame; the YUV ones agree with each other exactly (I420 is the
// decoder's own buffer, NV12 its interleaved copy) and GRAY8/RGB/BGR are consistent.
TEST(VisionVideo, EveryHostFormat) {
  SKIP_WITHOUT_CLIP();
  const PixelFormat formats[] = {PixelFormat::kNV12, PixelFormat::kI420, PixelFormat::kRGBA,
                                 PixelFormat::kBGRA, PixelFormat::kRGBx, PixelFormat::kBGRx,
                                 PixelFormat::kRGB,  PixelFormat::kBGR,  PixelFormat::kGray8};
  std::vector<std::vector<uint8_t>> first;
  for (PixelFormat fmt : formats) {
    VideoReaderOptions opt;
    opt.decode = VideoReaderOptions::Decode::kSoftware;
    opt.hostFormat = fmt;
    auto reader = VideoReader::open(kClip, opt);
    ASSERT_TRUE(reader.ok()) << pixelFormatName(fmt) << ": " << reader.status().toString();
    VideoFrame f;
    auto more = (*reader)->read(f);
    ASSERT_TRUE(more.ok() && *more) << pixelFormatName(fmt);
    EXPECT_EQ(f.view.format, fmt);
    EXPECT_TRUE(validateFrame(f.view).ok()) << pixelFormatName(fmt);
    first.push_back(tightCopy(f.view));
  }
  const size_t luma = size_t{kClipWidth} * kClipHeight, chroma = luma / 4;
  const std::vector<uint8_t>& nv12 = first[0];
  const std::vector<uint8_t>& i420 = first[1];
  ASSERT_EQ(nv12.size(), luma + 2 * chroma);
  ASSERT_EQ(i420.size(), luma + 2 * chroma);
  EXPECT_TRUE(std::equal(nv12.begin(), nv12.begin() + luma, i420.begin()));
  for (size_t k = 0; k < chroma; k += 997) {
    EXPECT_EQ(nv12[luma + 2 * k], i420[luma + k]);
    EXPECT_EQ(nv12[luma + 2 * k + 1], i420[luma + chroma + k]);
  }
  const std::vector<uint8_t>&rgba = first[2], &bgra = first[3], &rgb = first[6], &bgr = first[7];
  for (size_t p = 0; p < luma; p += 1013) {
    EXPECT_EQ(rgb[3 * p], bgr[3 * p + 2]);
    EXPECT_EQ(rgb[3 * p + 1], rgba[4 * p + 1]);
    EXPECT_EQ(bgr[3 * p], bgra[4 * p]);
  }
}

TEST(VisionVideo, MatchesOpenCvVideoCapture) {
  SKIP_WITHOUT_CLIP();
#if !EDGEINFER_TEST_HAVE_OPENCV_VIDEOIO
  GTEST_SKIP() << "built without OpenCV's videoio";
#else
  cv::VideoCapture cap(kClip, cv::CAP_FFMPEG);
  ASSERT_TRUE(cap.isOpened());
  EXPECT_EQ(static_cast<int>(cap.get(cv::CAP_PROP_FRAME_COUNT)), kClipFrames);
  VideoReaderOptions opt;
  opt.decode = VideoReaderOptions::Decode::kSoftware;
  opt.hostFormat = PixelFormat::kBGR;
  auto reader = VideoReader::open(kClip, opt);
  ASSERT_TRUE(reader.ok()) << reader.status().toString();
  int compared = 0;
  for (int i = 0; i < kClipFrames; ++i) {
    cv::Mat ref;
    ASSERT_TRUE(cap.read(ref)) << "OpenCV frame " << i;
    VideoFrame f;
    auto more = (*reader)->read(f);
    ASSERT_TRUE(more.ok() && *more) << "frame " << i;
    if (i % 10 != 0) continue;
    ASSERT_EQ(ref.cols, f.view.width);
    ASSERT_EQ(ref.rows, f.view.height);
    ASSERT_EQ(ref.type(), CV_8UC3);
    double sum = 0;
    int maxDiff = 0;
    for (int y = 0; y < ref.rows; ++y) {
      const uint8_t* a = ref.ptr<uint8_t>(y);
      const uint8_t* b = f.view.planes[0] + static_cast<int64_t>(y) * f.view.strides[0];
      for (int x = 0; x < ref.cols * 3; ++x) {
        const int d = std::abs(int(a[x]) - int(b[x]));
        sum += d;
        maxDiff = std::max(maxDiff, d);
      }
    }
    const double mean = sum / (double(ref.rows) * ref.cols * 3);
    EXPECT_LE(mean, 0.5) << "frame " << i;
    EXPECT_LE(maxDiff, 8) << "frame " << i;
    ++compared;
  }
  EXPECT_EQ(compared, 5);
#endif
}

// ---- Writing ----------------------------------------------------------------------------

TEST(VisionVideo, WriteReadRoundTripH264) {
  SKIP_WITHOUT_FFMPEG();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.file("pattern.mp4");
  constexpr int kW = 320, kH = 240, kFrames = 30;
  std::vector<std::vector<uint8_t>> originals;
  {
    auto writer = VideoWriter::open(path, kW, kH);
    ASSERT_TRUE(writer.ok()) << writer.status().toString();
    for (int t = 0; t < kFrames; ++t) {
      originals.push_back(patternBgr(kW, kH, t));
      auto view = wrapFrame(PixelFormat::kBGR, kW, kH, originals.back().data());
      ASSERT_TRUE(view.ok());
      ASSERT_TRUE((*writer)->write(*view).ok());
    }
    EXPECT_EQ((*writer)->framesWritten(), kFrames);
    EXPECT_FALSE(fs::exists(path)) << "the output must appear only at close()";
    Status closed = (*writer)->close();
    ASSERT_TRUE(closed.ok()) << closed.toString();
    EXPECT_TRUE((*writer)->close().ok());  // idempotent
  }
  EXPECT_FALSE(fs::exists(path + ".part"));

  VideoReaderOptions opt;
  opt.decode = VideoReaderOptions::Decode::kSoftware;
  auto reader = VideoReader::open(path, opt);
  ASSERT_TRUE(reader.ok()) << reader.status().toString();
  EXPECT_EQ((*reader)->info().codec, "h264");
  EXPECT_EQ((*reader)->info().width, kW);
  EXPECT_EQ((*reader)->info().height, kH);
  EXPECT_NEAR((*reader)->info().fps, 30.0, 1e-6);
  ReadResult back = readAll(path, PixelFormat::kBGR);
  ASSERT_TRUE(back.status.ok()) << back.status.toString();
  ASSERT_EQ(back.frames.size(), size_t{kFrames});
  for (int t = 0; t < kFrames; ++t)
    EXPECT_GT(psnr(back.frames[t], originals[t]), 30.0) << "frame " << t;
}

// NV12, I420 and RGBA inputs (other containers and the mpeg4 encoder too): compared in I420.
TEST(VisionVideo, WritesYuvAndRgbaInputs) {
  SKIP_WITHOUT_FFMPEG();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  constexpr int kW = 176, kH = 144, kFrames = 12;
  struct Case {
    PixelFormat format;
    const char* file;
    const char* codec;
  };
  const Case cases[] = {{PixelFormat::kNV12, "nv12.mkv", "libx264"},
                        {PixelFormat::kI420, "i420.mp4", "libx264"},
                        {PixelFormat::kI420, "i420.avi", "mpeg4"},
                        {PixelFormat::kRGBA, "rgba.mov", "libx264"}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string path = dir.file(c.file);
    std::vector<std::vector<uint8_t>> originals;  // I420
    VideoWriterOptions wo;
    wo.codec = c.codec;
    wo.fps = 25;
    auto writer = VideoWriter::open(path, kW, kH, wo);
    ASSERT_TRUE(writer.ok()) << writer.status().toString();
    for (int t = 0; t < kFrames; ++t) {
      originals.push_back(patternI420(kW, kH, t));
      std::vector<uint8_t> input = originals.back();
      if (c.format == PixelFormat::kNV12) input = i420ToNv12(input, kW, kH);
      if (c.format == PixelFormat::kRGBA) {  // RGBA from BGR, then compare in BGR below
        const std::vector<uint8_t> bgr = patternBgr(kW, kH, t);
        input.assign(size_t{kW} * kH * 4, 255);
        for (size_t p = 0; p < size_t{kW} * kH; ++p)
          for (int k = 0; k < 3; ++k) input[4 * p + k] = bgr[3 * p + 2 - k];
        originals.back() = bgr;
      }
      auto view = wrapFrame(c.format, kW, kH, input.data());
      ASSERT_TRUE(view.ok());
      Status s = (*writer)->write(*view);
      ASSERT_TRUE(s.ok()) << s.toString();
    }
    ASSERT_TRUE((*writer)->close().ok());
    const PixelFormat readAs =
        c.format == PixelFormat::kRGBA ? PixelFormat::kBGR : PixelFormat::kI420;
    ReadResult back = readAll(path, readAs);
    ASSERT_TRUE(back.status.ok()) << back.status.toString();
    ASSERT_EQ(back.frames.size(), size_t{kFrames});
    for (int t = 0; t < kFrames; ++t)
      EXPECT_GT(psnr(back.frames[t], originals[t]), 30.0) << "frame " << t;
  }
}

// The destructor closes: the file is complete without an explicit close().
TEST(VisionVideo, WriterDestructorFinishesTheFile) {
  SKIP_WITHOUT_FFMPEG();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.file("dtor.mkv");
  {
    auto writer = VideoWriter::open(path, 64, 48);
    ASSERT_TRUE(writer.ok()) << writer.status().toString();
    std::vector<uint8_t> gray(64 * 48);
    for (int t = 0; t < 5; ++t) {
      std::fill(gray.begin(), gray.end(), static_cast<uint8_t>(40 * t));
      ASSERT_TRUE((*writer)->write(*wrapFrame(PixelFormat::kGray8, 64, 48, gray.data())).ok());
    }
  }
  ReadResult back = readAll(path, PixelFormat::kGray8);
  ASSERT_TRUE(back.status.ok()) << back.status.toString();
  ASSERT_EQ(back.frames.size(), 5u);
  EXPECT_NEAR(back.frames[4][100], 160, 3);
}

// ---- Reader errors ------------------------------------------------------------------------

TEST(VisionVideo, MissingFile_n) {
  SKIP_WITHOUT_FFMPEG();
  const std::string path = "/nonexistent/dir/camera.mp4";
  auto reader = VideoReader::open(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(reader.status().message().find(path), std::string::npos) << reader.status().message();
}

TEST(VisionVideo, TextFileNamedMp4_n) {
  SKIP_WITHOUT_FFMPEG();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string path = dir.file("notes.mp4");
  const std::string text = "These are meeting notes, not a video.\nLine two.\n";
  writeBytes(path, text.data(), text.size());
  auto reader = VideoReader::open(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), ErrorCode::kCorruptFile) << reader.status().toString();
  EXPECT_NE(reader.status().message().find(path), std::string::npos);
  EXPECT_NE(reader.status().message().find("Invalid data"), std::string::npos)
      << "names FFmpeg's error: " << reader.status().message();
}

TEST(VisionVideo, TruncatedHeader_n) {
  SKIP_WITHOUT_CLIP();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::vector<char> bytes = readBytes(kClip);
  const std::string path = dir.file("first1000.mp4");
  writeBytes(path, bytes.data(), 1000);  // cuts the moov atom (bytes 24..1793)
  auto reader = VideoReader::open(path);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), ErrorCode::kCorruptFile) << reader.status().toString();
  EXPECT_NE(reader.status().message().find(path), std::string::npos);
}

// Half the file: the index is complete, the media data ends early. Reads what is there, then
// ends (or reports an error), never crashes or loops.
TEST(VisionVideo, TruncatedHalf_n) {
  SKIP_WITHOUT_CLIP();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::vector<char> bytes = readBytes(kClip);
  const std::string path = dir.file("half.mp4");
  writeBytes(path, bytes.data(), bytes.size() / 2);
  VideoReaderOptions opt;
  opt.decode = VideoReaderOptions::Decode::kSoftware;
  auto reader = VideoReader::open(path, opt);
  ASSERT_TRUE(reader.ok()) << reader.status().toString();
  EXPECT_EQ((*reader)->info().frameCount, kClipFrames);  // what the (intact) header says
  VideoFrame f;
  int n = 0;
  for (int i = 0; i < 2 * kClipFrames; ++i) {
    auto more = (*reader)->read(f);
    if (!more.ok()) {
      EXPECT_NE(more.status().message().find(path), std::string::npos);
      break;
    }
    if (!*more) break;
    ASSERT_TRUE(validateFrame(f.view).ok());
    ++n;
  }
  EXPECT_GT(n, 5);
  EXPECT_LT(n, kClipFrames);
}

// Damaged media data in the middle: the decoder conceals or skips; no crash, the stream ends.
TEST(VisionVideo, DamagedPayload_n) {
  SKIP_WITHOUT_CLIP();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  std::vector<char> bytes = readBytes(kClip);
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 200000; ++i)
    bytes[i] = static_cast<char>((i * 2654435761u) >> 13);
  const std::string path = dir.file("damaged.mp4");
  writeBytes(path, bytes.data(), bytes.size());
  ReadResult r = readAll(path, PixelFormat::kNV12);
  EXPECT_GT(r.frames.size(), 5u) << r.status.toString();
  EXPECT_LE(r.frames.size(), size_t{kClipFrames});
}

TEST(VisionVideo, DirectoryAndAudioOnly_n) {
  SKIP_WITHOUT_FFMPEG();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  const std::string d = dir.file("");
  auto reader = VideoReader::open(d);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(reader.status().message().find("directory"), std::string::npos);
  if (!fs::exists(kAudioOnly))
    GTEST_SKIP() << "needs " << kAudioOnly << " (" << kClipPackage << ")";
  auto audio = VideoReader::open(kAudioOnly);
  ASSERT_FALSE(audio.ok());
  EXPECT_EQ(audio.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(audio.status().message().find("no video stream"), std::string::npos)
      << audio.status().message();
}

TEST(VisionVideo, BadReaderOptions_n) {
  SKIP_WITHOUT_FFMPEG();
  VideoReaderOptions opt;
  opt.hostFormat = static_cast<PixelFormat>(42);
  EXPECT_EQ(VideoReader::open(kClip, opt).status().code(), ErrorCode::kInvalidArgument);
  opt = VideoReaderOptions();
  opt.deviceId = -1;
  EXPECT_EQ(VideoReader::open(kClip, opt).status().code(), ErrorCode::kInvalidArgument);
  opt = VideoReaderOptions();
  opt.timeoutMs = -5;
  EXPECT_EQ(VideoReader::open(kClip, opt).status().code(), ErrorCode::kInvalidArgument);
}

// Network streams never hang: an RTSP server that accepts the connection and never answers
// times out after timeoutMs; a closed port and an unknown protocol fail at once.
TEST(VisionVideo, NetworkStreamsTimeOut_n) {
  SKIP_WITHOUT_FFMPEG();
  const int server = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(server, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  ASSERT_EQ(bind(server, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(server, 4), 0);  // the kernel completes the handshake; nobody answers
  socklen_t len = sizeof(addr);
  ASSERT_EQ(getsockname(server, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const std::string url = "rtsp://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/cam";

  VideoReaderOptions opt;
  opt.timeoutMs = 500;
  const auto start = std::chrono::steady_clock::now();
  auto reader = VideoReader::open(url, opt);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  close(server);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), ErrorCode::kIoError) << reader.status().toString();
  EXPECT_NE(reader.status().message().find(url), std::string::npos);
  EXPECT_LT(seconds, 5.0) << reader.status().toString();

  // The port is closed now: connection refused.
  auto refused = VideoReader::open(url, opt);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), ErrorCode::kIoError) << refused.status().toString();

  auto unknown = VideoReader::open("nosuchproto://camera/1", opt);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), ErrorCode::kUnsupported) << unknown.status().toString();
}

// Decode::kGpu without a usable GPU: a clear error, no silent fallback.
TEST(VisionVideo, GpuDecodeWithoutGpu_n) {
  SKIP_WITHOUT_CLIP();
  if (gpuPresent()) GTEST_SKIP() << "a GPU is present (NvdecMatchesSoftwareDecode covers it)";
  VideoReaderOptions opt;
  opt.decode = VideoReaderOptions::Decode::kGpu;
  auto reader = VideoReader::open(kClip, opt);
  ASSERT_FALSE(reader.ok());
  EXPECT_EQ(reader.status().code(), ErrorCode::kUnsupported) << reader.status().toString();
  EXPECT_NE(reader.status().message().find("GPU"), std::string::npos) << reader.status().message();
  EXPECT_NE(reader.status().message().find(kClip), std::string::npos);
  // kAuto falls back to software (with one warning in a CUDA build).
  opt.decode = VideoReaderOptions::Decode::kAuto;
  auto fallback = VideoReader::open(kClip, opt);
  ASSERT_TRUE(fallback.ok()) << fallback.status().toString();
  EXPECT_FALSE((*fallback)->info().hardwareDecoding);
  VideoFrame f;
  auto more = (*fallback)->read(f);
  ASSERT_TRUE(more.ok() && *more);
  EXPECT_EQ(f.view.memory, MemoryLocation::kHost);
}

// ---- Writer errors ------------------------------------------------------------------------

TEST(VisionVideo, WriteWrongFrame_n) {
  SKIP_WITHOUT_FFMPEG();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  auto writer = VideoWriter::open(dir.file("w.mp4"), 64, 48);
  ASSERT_TRUE(writer.ok()) << writer.status().toString();
  std::vector<uint8_t> buf(128 * 96 * 4);
  Status s = (*writer)->write(*wrapFrame(PixelFormat::kBGR, 128, 96, buf.data()));
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("128x96"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("64x48"), std::string::npos) << s.message();
  FrameView device = *wrapFrame(PixelFormat::kNV12, 64, 48, buf.data());
  device.memory = MemoryLocation::kDevice;
  EXPECT_EQ((*writer)->write(device).code(), ErrorCode::kInvalidArgument);
  FrameView broken = *wrapFrame(PixelFormat::kI420, 64, 48, buf.data());
  broken.planes[2] = nullptr;
  EXPECT_EQ((*writer)->write(broken).code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ((*writer)->framesWritten(), 0);
}

TEST(VisionVideo, WriteAfterClose_n) {
  SKIP_WITHOUT_FFMPEG();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  auto writer = VideoWriter::open(dir.file("closed.mkv"), 32, 32);
  ASSERT_TRUE(writer.ok()) << writer.status().toString();
  std::vector<uint8_t> buf(32 * 32 * 3, 77);
  const FrameView frame = *wrapFrame(PixelFormat::kRGB, 32, 32, buf.data());
  ASSERT_TRUE((*writer)->write(frame).ok());
  ASSERT_TRUE((*writer)->close().ok());
  Status s = (*writer)->write(frame);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("after close"), std::string::npos) << s.message();
  EXPECT_EQ((*writer)->framesWritten(), 1);
}

TEST(VisionVideo, WriterInMissingDirectory_n) {
  SKIP_WITHOUT_FFMPEG();
  auto writer = VideoWriter::open("/nonexistent/dir/out.mp4", 64, 48);
  ASSERT_FALSE(writer.ok());
  EXPECT_EQ(writer.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(writer.status().message().find("/nonexistent/dir"), std::string::npos);
}

TEST(VisionVideo, WriterBadCodec_n) {
  SKIP_WITHOUT_FFMPEG();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  VideoWriterOptions opt;
  opt.codec = "no_such_codec";
  auto unknown = VideoWriter::open(dir.file("a.mp4"), 64, 48, opt);
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(unknown.status().message().find("no_such_codec"), std::string::npos);
  opt.codec = "aac";  // an encoder, but not for video
  EXPECT_EQ(VideoWriter::open(dir.file("b.mp4"), 64, 48, opt).status().code(),
            ErrorCode::kInvalidArgument);
  opt.codec = "mpeg4";  // WebM holds VP8/VP9/AV1 only
  EXPECT_EQ(VideoWriter::open(dir.file("c.webm"), 64, 48, opt).status().code(),
            ErrorCode::kUnsupported);
  EXPECT_TRUE(fs::is_empty(dir.file(""))) << "failed opens leave no files";
}

TEST(VisionVideo, WriterBadArguments_n) {
  SKIP_WITHOUT_FFMPEG();
  TempDir dir;
  ASSERT_TRUE(dir.ok());
  EXPECT_EQ(VideoWriter::open(dir.file("a.mp4"), 0, 48).status().code(),
            ErrorCode::kInvalidArgument);
  auto odd = VideoWriter::open(dir.file("odd.mp4"), 63, 48);  // yuv420p needs even sizes
  ASSERT_FALSE(odd.ok());
  EXPECT_EQ(odd.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(odd.status().message().find("63x48"), std::string::npos) << odd.status().message();
  VideoWriterOptions opt;
  opt.fps = 0;
  EXPECT_EQ(VideoWriter::open(dir.file("b.mp4"), 64, 48, opt).status().code(),
            ErrorCode::kInvalidArgument);
  opt.fps = std::nan("");
  EXPECT_EQ(VideoWriter::open(dir.file("c.mp4"), 64, 48, opt).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(VideoWriter::open(dir.file("d.unknownext"), 64, 48).status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(VideoWriter::open(dir.file(""), 64, 48).status().code(),
            ErrorCode::kInvalidArgument);  // a directory
  EXPECT_TRUE(fs::is_empty(dir.file("")));
}

// ---- NVDEC (CUDA builds, on a GPU) ---------------------------------------------------------
#ifdef EDGEINFER_HAVE_CUDA

TEST(VisionVideo, NvdecMatchesSoftwareDecode) {
  SKIP_WITHOUT_CLIP();
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0)
    GTEST_SKIP() << "NVDEC test needs a GPU: "
                 << (e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
  // FFmpeg's CUDA device shares the primary context and wants blocking-sync scheduling (see
  // video.h). Activate the context with other flags first, as an application that ran an
  // engine would: the reader must switch them and decode on the GPU all the same.
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  ASSERT_EQ(cudaSetDeviceFlags(cudaDeviceScheduleSpin), cudaSuccess);
  ASSERT_EQ(cudaFree(nullptr), cudaSuccess);

  VideoReaderOptions gpuOpt;
  gpuOpt.decode = VideoReaderOptions::Decode::kGpu;
  auto gpu = VideoReader::open(kClip, gpuOpt);
  ASSERT_TRUE(gpu.ok()) << gpu.status().toString();
  EXPECT_TRUE((*gpu)->info().hardwareDecoding);
  unsigned flags = 0;
  ASSERT_EQ(cudaGetDeviceFlags(&flags), cudaSuccess);
  EXPECT_EQ(flags & cudaDeviceScheduleMask, unsigned{cudaDeviceScheduleBlockingSync});
  VideoReaderOptions swOpt;
  swOpt.decode = VideoReaderOptions::Decode::kSoftware;
  swOpt.hostFormat = PixelFormat::kNV12;
  auto sw = VideoReader::open(kClip, swOpt);
  ASSERT_TRUE(sw.ok()) << sw.status().toString();

  int n = 0;
  for (;;) {
    VideoFrame g, s;
    auto moreG = (*gpu)->read(g);
    auto moreS = (*sw)->read(s);
    ASSERT_TRUE(moreG.ok()) << moreG.status().toString();
    ASSERT_TRUE(moreS.ok()) << moreS.status().toString();
    ASSERT_EQ(*moreG, *moreS) << "frame " << n;
    if (!*moreG) break;
    ASSERT_EQ(g.view.memory, MemoryLocation::kDevice);
    ASSERT_EQ(g.view.format, PixelFormat::kNV12);
    ASSERT_EQ(g.view.width, s.view.width);
    ASSERT_EQ(g.view.height, s.view.height);
    cudaPointerAttributes attr{};
    ASSERT_EQ(cudaPointerGetAttributes(&attr, g.view.planes[0]), cudaSuccess);
    EXPECT_EQ(attr.type, cudaMemoryTypeDevice);
    for (int p = 0; p < 2; ++p) {
      const size_t row = static_cast<size_t>(planeRowBytes(PixelFormat::kNV12, g.view.width, p));
      const int rows = planeRows(PixelFormat::kNV12, g.view.height, p);
      std::vector<uint8_t> host(row * rows);
      ASSERT_EQ(cudaMemcpy2D(host.data(), row, g.view.planes[p], g.view.strides[p], row, rows,
                             cudaMemcpyDeviceToHost),
                cudaSuccess);
      int diffs = 0;
      for (int r = 0; r < rows; ++r)
        for (size_t x = 0; x < row; ++x)
          diffs += host[r * row + x] !=
                   s.view.planes[p][static_cast<int64_t>(r) * s.view.strides[p] + x];
      EXPECT_EQ(diffs, 0) << "frame " << n << " plane " << p;
    }
    ++n;
  }
  EXPECT_EQ(n, kClipFrames);

  // kAuto picks the GPU here.
  auto autoReader = VideoReader::open(kClip);
  ASSERT_TRUE(autoReader.ok()) << autoReader.status().toString();
  EXPECT_TRUE((*autoReader)->info().hardwareDecoding);
}

#endif  // EDGEINFER_HAVE_CUDA

}  // namespace
}  // namespace edgeinfer::vision
