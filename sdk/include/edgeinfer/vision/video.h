// Video I/O for camera applications, through FFmpeg (libavformat, libavcodec, libswscale),
// without GStreamer: VideoReader decodes a file or a network stream (rtsp://, http://) into
// FrameViews that preprocessCpu / the CUDA preprocessing take as they are; VideoWriter encodes
// host frames into a file (MP4, MKV, AVI ..., chosen by the extension).
//
// GPU decoding (VideoReaderOptions::Decode::kGpu) uses NVDEC through FFmpeg's CUDA hwaccel:
// frames stay in GPU memory as NV12 (FrameView::memory == MemoryLocation::kDevice), with no
// host copy. FFmpeg's CUDA device uses the GPU's *primary* context, the one the CUDA runtime
// (and so EdgeInfer's kernels) uses, so the decoded planes can be read by those kernels
// directly. FFmpeg requires that context to run with blocking-sync scheduling
// (cudaDeviceScheduleBlockingSync: a thread waiting for the GPU sleeps instead of spinning) and
// refuses a primary context already active with other flags. In a CUDA build of EdgeInfer the
// reader then switches the context to blocking sync through the CUDA runtime (logged at
// Severity::kInfo) and retries; a build without CUDA reports the error, and the application
// calls cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) itself.
//
// Colour: YUV <-> RGB conversions (hostFormat RGB/BGR/..., writing RGB/BGR frames) are
// libswscale's BT.601 conversion (bicubic chroma), as OpenCV's cv::VideoCapture /
// cv::VideoWriter and preprocessCpu assume, whatever matrix the stream is tagged with.
//
// FFmpeg's own log messages go through edgeinfer's logger (setLogger) at Severity::kInfo
// (errors and warnings; they are hidden at the default level because every failure also
// comes back as a Status) and kVerbose (the rest), prefixed "ffmpeg: ". The callback is
// installed when the first reader or writer opens (FFmpeg's av_log_set_callback is
// process-wide; an application that wants FFmpeg's messages elsewhere sets its own after that).
//
// Without FFmpeg at build time (EDGEINFER_HAVE_FFMPEG undefined, e.g. the aarch64 cross build)
// the API is still there and open() returns ErrorCode::kUnsupported.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "edgeinfer/status.h"
#include "edgeinfer/vision/preprocess.h"

namespace edgeinfer::vision {

/// True when this build of EdgeInfer has FFmpeg (VideoReader / VideoWriter work).
bool videoIoAvailable();

/// What VideoReader::open() found out about the video stream.
struct VideoInfo {
  int width = 0;   ///< coded picture size, pixels (frames carry their own size too)
  int height = 0;  ///< (a network stream may change it; see VideoFrame::view)
  /// Mean frame rate (frames / duration, from the container), or the nominal rate where the
  /// container does not give a mean; 0 if unknown.
  double fps = 0;
  int64_t frameCount = -1;        ///< from the container header; -1 if unknown (live streams)
  std::string codec;              ///< FFmpeg's codec name: "h264", "hevc", "mpeg4" ...
  bool hardwareDecoding = false;  ///< frames come from NVDEC, in device memory
};

/// How VideoReader decodes. Defaults: software decoding unless CUDA is usable (kAuto), NV12.
struct VideoReaderOptions {
  enum class Decode : uint8_t {
    /// GPU decoding if this EdgeInfer build has CUDA and NVDEC can decode the stream, else
    /// software decoding; the reason for a fallback is logged once (Severity::kWarning). In a
    /// build without CUDA, software decoding straight away.
    kAuto,
    kSoftware,  ///< FFmpeg's software decoder, frames in host memory as `hostFormat`
    /// NVDEC through FFmpeg's CUDA hwaccel; frames stay in device memory as NV12 (`hostFormat`
    /// is not used). Only 8-bit 4:2:0 streams. open() (or, for a stream NVDEC turns down at
    /// its first frame, read()) fails with a Status saying why if it cannot be used: no GPU,
    /// no CUDA driver, no NVDEC for the codec, another pixel format.
    kGpu,
  };
  Decode decode = Decode::kAuto;
  int deviceId = 0;  ///< CUDA device for kGpu / kAuto
  /// Format of host frames (software decoding): any PixelFormat. Converted with libswscale
  /// when the decoder's format differs; when it is the same (e.g. I420 from an H.264 decoder
  /// giving yuv420p) the view points into the decoder's frame, no copy.
  PixelFormat hostFormat = PixelFormat::kNV12;
  /// Longest wait, in milliseconds, for any single I/O step (opening, probing, reading one
  /// packet) before open()/read() fail with kIoError; 0 waits for ever. For rtsp:// it is also
  /// the socket timeout (RTSP runs over TCP: rtsp_transport=tcp).
  int timeoutMs = 10000;
};

/// One decoded frame.
struct VideoFrame {
  /// The pixels: host memory in VideoReaderOptions::hostFormat, or device memory (NV12,
  /// planes[0] = luma, planes[1] = interleaved chroma, strides = FFmpeg's pitches).
  FrameView view;
  int64_t index = -1;           ///< 0, 1, 2 ... in decoding output order
  double timestampSeconds = 0;  ///< presentation time from the stream start
};

/// Decodes a video file or network stream frame by frame. Not thread-safe; one reader per
/// thread (readers are independent of each other).
class VideoReader {
 public:
  /// Opens `url`: a file path or a URL FFmpeg understands (rtsp://, rtsps://, http://,
  /// file:...). Errors: kNotFound (no such file), kInvalidArgument (a directory, no video
  /// stream, bad options), kCorruptFile (not a video container or a damaged one), kUnsupported
  /// (no decoder for the codec; kGpu that cannot be used; no FFmpeg in this build), kIoError
  /// (network failure, timeout). Every message names `url` and, where FFmpeg failed, its error
  /// string.
  static Expected<std::unique_ptr<VideoReader>> open(const std::string& url,
                                                     const VideoReaderOptions& options = {});
  ~VideoReader();
  VideoReader(const VideoReader&) = delete;
  VideoReader& operator=(const VideoReader&) = delete;

  const VideoInfo& info() const;

  /// Decodes the next frame into `frame`: true, or false at the end of the stream (and on
  /// every call after it). The frame's planes stay valid until the next read() or the
  /// reader's destruction. Damaged packets are skipped (logged once); errors the stream
  /// cannot recover from (I/O, timeout, a decoder failure) return a Status naming the url.
  Expected<bool> read(VideoFrame& frame);

 private:
  struct Impl;
  explicit VideoReader(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

/// How VideoWriter encodes. Defaults: H.264 (libx264, CRF 23), 30 frames per second.
struct VideoWriterOptions {
  /// FFmpeg encoder name ("libx264", "mpeg4", "libx265", "mjpeg" ...). "libx264" falls back to
  /// "mpeg4" (logged once) where FFmpeg was built without it; any other name that FFmpeg does
  /// not know is kNotFound.
  std::string codec = "libx264";
  /// Bits per second; 0 = the encoder's own quality default (CRF 23 for libx264), except for
  /// FFmpeg's MPEG-family encoders (mpeg4, mpeg1/2video, mjpeg, h263p), whose 200 kbit/s
  /// default is far too low for camera footage: those get constant quantiser 3 instead.
  int64_t bitRate = 0;
  double fps = 30;  ///< frame rate written into the file (frame i is at i / fps seconds)
};

/// Encodes host frames into a video file. The container follows the extension of `path`
/// (.mp4, .mkv, .avi, .mov ...). The file is written as `path + ".part"` and renamed to `path`
/// by close(), so a crash never leaves a half-written file under the output's name. Not
/// thread-safe.
class VideoWriter {
 public:
  /// Creates the file. Errors: kInvalidArgument (bad size or fps, odd width/height for a 4:2:0
  /// encoder, an extension FFmpeg does not know, `path` is a directory), kNotFound (the
  /// directory does not exist; unknown encoder name), kUnsupported (the container cannot hold
  /// the codec; no FFmpeg in this build), kIoError (cannot create the file).
  static Expected<std::unique_ptr<VideoWriter>> open(const std::string& path, int width, int height,
                                                     const VideoWriterOptions& options = {});
  /// Closes (see close()) if close() was not called; an error is logged.
  ~VideoWriter();
  VideoWriter(const VideoWriter&) = delete;
  VideoWriter& operator=(const VideoWriter&) = delete;

  /// Encodes one frame: host memory, any PixelFormat, the size given to open(); converted to
  /// the encoder's format (yuv420p for the defaults) with libswscale. kInvalidArgument for a
  /// frame of another size (naming both), in device memory, invalid (validateFrame), or after
  /// close().
  Status write(const FrameView& frame);
  /// Flushes the encoder, writes the container trailer and renames the file to its final
  /// name. Reports every failure (the partial file is then left as `path + ".part"`). A second
  /// call returns the first call's result.
  Status close();
  /// Frames accepted by write().
  int64_t framesWritten() const;

 private:
  struct Impl;
  explicit VideoWriter(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace edgeinfer::vision
