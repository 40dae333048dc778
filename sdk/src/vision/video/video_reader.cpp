// VideoReader: FFmpeg demuxing and decoding, in software or on NVDEC through FFmpeg's CUDA
// hwaccel (see edgeinfer/vision/video.h for the contract).
#include "edgeinfer/vision/video.h"

#if EDGEINFER_HAVE_FFMPEG

extern "C" {
#include <libavutil/hwcontext.h>
#include <libavutil/pixdesc.h>
}

#include <cctype>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "edgeinfer/logger.h"
#include "vision/video/ffmpeg_common.h"

#if EDGEINFER_HAVE_CUDA
#include <cuda_runtime.h>
#endif

namespace edgeinfer::vision {
namespace {

// AV_CUDA_USE_PRIMARY_CONTEXT from libavutil/hwcontext_cuda.h (that header includes cuda.h,
// which a build without the CUDA toolkit does not have; the value is part of FFmpeg's ABI).
constexpr int kCudaUsePrimaryContext = 1 << 0;

bool startsWithNoCase(const std::string& s, const char* prefix) {
  for (size_t i = 0; prefix[i]; ++i)
    if (i >= s.size() || std::tolower(static_cast<unsigned char>(s[i])) != prefix[i]) return false;
  return true;
}

// "scheme://..." (rtsp, http, udp ...) as opposed to a file path.
bool isUrl(const std::string& s) {
  return s.find("://") != std::string::npos;
}

// FFmpeg's CUDA device retains the primary context only with blocking-sync scheduling and
// refuses one the CUDA runtime already activated with other flags (EdgeInfer's engines, or the
// application, usually have). The runtime can change the flags of an active primary context
// (CUDA 12+; seen working on CUDA 13 / driver 580 with FFmpeg 5.1): do that, once, and say so.
// Returns whether it changed them. Without CUDA in this build there is nothing to align.
bool useBlockingSync(int deviceId) {
#if EDGEINFER_HAVE_CUDA
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return false;
  bool changed = false;
  unsigned flags = 0;
  // FFmpeg compares the context's flags with exactly CU_CTX_SCHED_BLOCKING_SYNC, so any other
  // flag (e.g. cudaDeviceMapHost, cudaDeviceLmemResizeToMax) must go too.
  if (cudaSetDevice(deviceId) == cudaSuccess && cudaGetDeviceFlags(&flags) == cudaSuccess &&
      (flags & ~cudaDeviceMapHost) != cudaDeviceScheduleBlockingSync) {
    changed = cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) == cudaSuccess;
  }
  cudaGetLastError();  // leave no sticky error behind for the application
  cudaSetDevice(previous);
  if (changed)
    log(Severity::kInfo, "VideoReader: GPU " + std::to_string(deviceId) +
                             ": switched the CUDA primary context to blocking-sync scheduling, "
                             "which FFmpeg's NVDEC decoding requires");
  return changed;
#else
  (void)deviceId;
  return false;
#endif
}

bool is8Bit420(int format) {
  return format == AV_PIX_FMT_YUV420P || format == AV_PIX_FMT_YUVJ420P || format == AV_PIX_FMT_NV12;
}

// A deadline for blocking FFmpeg I/O, polled by FFmpeg through AVIOInterruptCB: a stalled
// network stream makes the blocked call return AVERROR_EXIT instead of hanging.
struct IoDeadline {
  int timeoutMs = 0;  // 0: none
  std::chrono::steady_clock::time_point until;

  void arm() {
    if (timeoutMs > 0)
      until = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeoutMs);
  }
  bool expired() const { return timeoutMs > 0 && std::chrono::steady_clock::now() > until; }
  static int interrupt(void* opaque) { return static_cast<const IoDeadline*>(opaque)->expired(); }
};

// Points `view` at the planes of an FFmpeg frame in a PixelFormat's layout.
void viewOf(const AVFrame& f, PixelFormat format, MemoryLocation memory, FrameView& view) {
  view = FrameView();
  view.format = format;
  view.width = f.width;
  view.height = f.height;
  view.memory = memory;
  for (int p = 0; p < pixelFormatPlanes(format); ++p) {
    view.planes[p] = f.data[p];
    view.strides[p] = f.linesize[p];
  }
}

}  // namespace

struct VideoReader::Impl {
  std::string url;
  VideoReaderOptions options;
  VideoInfo info;
  AVFormatContext* format = nullptr;  // closed in ~Impl
  video::CodecContextPtr decoder;
  int streamIndex = -1;
  AVRational timeBase{0, 1};
  int64_t startPts = 0;
  // Why the CUDA hwaccel was not used (get_format found no AV_PIX_FMT_CUDA): the error for
  // kGpu, the logged reason for kAuto.
  std::string gpuRejected;
  video::PacketPtr packet{av_packet_alloc()};
  video::FramePtr frame{av_frame_alloc()};
  video::FramePtr converted{av_frame_alloc()};  // host frame in hostFormat, when converting
  video::FrameConverter converter;
  IoDeadline deadline;
  int64_t nextIndex = 0;
  bool draining = false;
  bool ended = false;
  bool badPacketLogged = false;
  int damagedInARow = 0;

  ~Impl() { avformat_close_input(&format); }

  Status error(ErrorCode code, const std::string& message) const {
    return Status(code, "'" + url + "': " + message);
  }
  // A failed FFmpeg I/O call: the timeout in words when the deadline passed (our interrupt makes
  // it AVERROR_EXIT; a protocol's own socket timeout may report something else, e.g. RTSP
  // "Invalid data"). Network failures are kIoError, never kCorruptFile.
  Status ffmpegError(const std::string& what, int err, ErrorCode otherwise) const {
    if (deadline.expired())
      return error(ErrorCode::kIoError,
                   what + " timed out after " + std::to_string(deadline.timeoutMs) +
                       " ms (VideoReaderOptions::timeoutMs): " + video::ffmpegErrorString(err));
    Status s = video::ffmpegStatus(url, what, err, otherwise);
    if (isUrl(url) && s.code() == ErrorCode::kCorruptFile)
      return Status(ErrorCode::kIoError, s.message());
    return s;
  }

  // A damaged packet (a truncated file, a lossy network) is skipped, as players do, and
  // logged once; a stream of nothing else fails after kMaxDamagedInARow.
  static constexpr int kMaxDamagedInARow = 1000;
  bool skipDamaged(int ret) {
    if (ret != AVERROR_INVALIDDATA || damagedInARow >= kMaxDamagedInARow) return false;
    if (options.decode == VideoReaderOptions::Decode::kGpu && !gpuRejected.empty()) return false;
    if (!badPacketLogged)
      log(Severity::kWarning, "VideoReader '" + url + "': skipping damaged data (first at frame " +
                                  std::to_string(nextIndex) + ")");
    badPacketLogged = true;
    ++damagedInARow;
    return true;
  }

  Status openInput();
  Status openDecoder();
  Status setupGpu(const AVCodec* codec);
  Status decodeError(const std::string& what, int err) const;
  Status makeView(VideoFrame& out);

  // AVCodecContext::get_format: NVDEC's AV_PIX_FMT_CUDA when FFmpeg offers it. FFmpeg drops
  // it from the list when the hwaccel fails to initialise for this stream (a profile or size
  // NVDEC does not take): kGpu then fails, kAuto continues in software.
  static AVPixelFormat getFormat(AVCodecContext* ctx, const AVPixelFormat* formats) {
    auto* self = static_cast<Impl*>(ctx->opaque);
    for (const AVPixelFormat* f = formats; *f != AV_PIX_FMT_NONE; ++f)
      if (*f == AV_PIX_FMT_CUDA) return *f;
    if (self->gpuRejected.empty()) {
      self->gpuRejected = "NVDEC cannot decode this " + self->info.codec + " stream (" +
                          video::avPixelFormatName(ctx->sw_pix_fmt) + ", " +
                          std::to_string(ctx->coded_width) + "x" +
                          std::to_string(ctx->coded_height) +
                          "): FFmpeg's CUDA hwaccel did not initialise (see its log at kInfo)";
      self->info.hardwareDecoding = false;
      if (self->options.decode != VideoReaderOptions::Decode::kGpu)
        log(Severity::kWarning,
            "VideoReader '" + self->url + "': " + self->gpuRejected + "; decoding in software");
    }
    if (self->options.decode == VideoReaderOptions::Decode::kGpu) return AV_PIX_FMT_NONE;
    for (const AVPixelFormat* f = formats; *f != AV_PIX_FMT_NONE; ++f) {
      const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(*f);
      if (desc && !(desc->flags & AV_PIX_FMT_FLAG_HWACCEL)) return *f;
    }
    return AV_PIX_FMT_NONE;
  }
};

Status VideoReader::Impl::openInput() {
  if (!isUrl(url)) {
    std::error_code ec;
    const auto st = std::filesystem::status(url, ec);
    if (!std::filesystem::exists(st))
      return Status(ErrorCode::kNotFound, "video file not found: '" + url + "'");
    if (std::filesystem::is_directory(st))
      return error(ErrorCode::kInvalidArgument, "is a directory, not a video file");
  }
  format = avformat_alloc_context();
  if (!format) return error(ErrorCode::kOutOfMemory, "avformat_alloc_context failed");
  format->interrupt_callback.callback = &IoDeadline::interrupt;
  format->interrupt_callback.opaque = &deadline;

  AVDictionary* opts = nullptr;
  const std::string timeoutUs = std::to_string(int64_t{options.timeoutMs} * 1000);
  if (startsWithNoCase(url, "rtsp://") || startsWithNoCase(url, "rtsps://")) {
    // TCP: no lost packets (UDP drops whole frames on a busy link) and it passes firewalls.
    av_dict_set(&opts, "rtsp_transport", "tcp", 0);
    if (options.timeoutMs > 0) av_dict_set(&opts, "timeout", timeoutUs.c_str(), 0);
  } else if (isUrl(url) && options.timeoutMs > 0) {
    av_dict_set(&opts, "rw_timeout", timeoutUs.c_str(), 0);
  }
  deadline.arm();
  int ret = avformat_open_input(&format, url.c_str(), nullptr, &opts);
  av_dict_free(&opts);
  if (ret == AVERROR_INVALIDDATA && !isUrl(url))
    return error(ErrorCode::kCorruptFile,
                 "not a video container FFmpeg recognises, or a damaged one "
                 "(avformat_open_input: " +
                     video::ffmpegErrorString(ret) + ")");
  if (ret < 0) return ffmpegError("avformat_open_input", ret, ErrorCode::kIoError);

  deadline.arm();
  ret = avformat_find_stream_info(format, nullptr);
  if (ret < 0) return ffmpegError("avformat_find_stream_info", ret, ErrorCode::kCorruptFile);
  return Status::Ok();
}

Status VideoReader::Impl::setupGpu(const AVCodec* codec) {
  const AVCodecParameters* par = format->streams[streamIndex]->codecpar;
  if (par->format != AV_PIX_FMT_NONE && !is8Bit420(par->format))
    return error(ErrorCode::kUnsupported, "GPU decoding takes 8-bit 4:2:0 video only; this " +
                                              info.codec + " stream is " +
                                              video::avPixelFormatName(par->format));
  bool hasCuda = false;
  for (int i = 0;; ++i) {
    const AVCodecHWConfig* config = avcodec_get_hw_config(codec, i);
    if (!config) break;
    if (config->device_type == AV_HWDEVICE_TYPE_CUDA &&
        (config->methods & AV_CODEC_HW_CONFIG_METHOD_HW_DEVICE_CTX))
      hasCuda = true;
  }
  if (!hasCuda)
    return error(ErrorCode::kUnsupported, "FFmpeg's " + std::string(codec->name) +
                                              " decoder has no CUDA (NVDEC) hwaccel in this "
                                              "FFmpeg build");
  AVBufferRef* device = nullptr;
  const std::string deviceName = std::to_string(options.deviceId);
  int ret = av_hwdevice_ctx_create(&device, AV_HWDEVICE_TYPE_CUDA, deviceName.c_str(), nullptr,
                                   kCudaUsePrimaryContext);
  if (ret == AVERROR(ENOTSUP) && useBlockingSync(options.deviceId))
    ret = av_hwdevice_ctx_create(&device, AV_HWDEVICE_TYPE_CUDA, deviceName.c_str(), nullptr,
                                 kCudaUsePrimaryContext);
  if (ret == AVERROR(ENOTSUP))
    return error(ErrorCode::kUnsupported,
                 "FFmpeg cannot use the primary CUDA context of GPU " + deviceName +
                     ": it is already active with scheduling flags other than blocking sync "
                     "(call cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) on that device "
                     "first)");
  if (ret < 0)
    return error(ErrorCode::kUnsupported,
                 "no usable GPU for NVDEC: av_hwdevice_ctx_create(CUDA, device " + deviceName +
                     ") failed: " + video::ffmpegErrorString(ret) +
                     " (no NVIDIA GPU, no CUDA driver libcuda.so.1, or no such device)");
  decoder->hw_device_ctx = device;  // the decoder owns this reference
  decoder->opaque = this;
  decoder->get_format = &Impl::getFormat;
  decoder->thread_count = 1;  // NVDEC decodes; CPU threads would only add latency
  info.hardwareDecoding = true;
  return Status::Ok();
}

Status VideoReader::Impl::openDecoder() {
  const AVCodec* codec = nullptr;
  int ret = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, &codec, 0);
  if (ret == AVERROR_STREAM_NOT_FOUND)
    return error(ErrorCode::kInvalidArgument,
                 "has no video stream (" + std::to_string(format->nb_streams) + " other stream" +
                     (format->nb_streams == 1 ? "" : "s") + ")");
  if (ret == AVERROR_DECODER_NOT_FOUND) {
    int first = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
    const char* name =
        first >= 0 ? avcodec_get_name(format->streams[first]->codecpar->codec_id) : "?";
    return error(ErrorCode::kUnsupported,
                 std::string("this FFmpeg has no decoder for its ") + name + " video");
  }
  if (ret < 0) return video::ffmpegStatus(url, "av_find_best_stream", ret, ErrorCode::kCorruptFile);
  streamIndex = ret;
  AVStream* stream = format->streams[streamIndex];
  for (unsigned i = 0; i < format->nb_streams; ++i)  // demux only the video
    if (static_cast<int>(i) != streamIndex) format->streams[i]->discard = AVDISCARD_ALL;
  const AVCodecParameters* par = stream->codecpar;
  info.codec = avcodec_get_name(par->codec_id);
  if (par->width <= 0 || par->height <= 0)
    return error(ErrorCode::kCorruptFile,
                 "its " + info.codec + " video stream has no picture size (damaged header?)");
  info.width = par->width;
  info.height = par->height;
  if (stream->avg_frame_rate.num > 0 && stream->avg_frame_rate.den > 0) {
    info.fps = av_q2d(stream->avg_frame_rate);
  } else {
    const AVRational guess = av_guess_frame_rate(format, stream, nullptr);
    if (guess.num > 0 && guess.den > 0) info.fps = av_q2d(guess);
  }
  info.frameCount = stream->nb_frames > 0 ? stream->nb_frames : -1;
  timeBase = stream->time_base;
  startPts = stream->start_time != AV_NOPTS_VALUE ? stream->start_time : 0;

  decoder.reset(avcodec_alloc_context3(codec));
  if (!decoder) return error(ErrorCode::kOutOfMemory, "avcodec_alloc_context3 failed");
  ret = avcodec_parameters_to_context(decoder.get(), par);
  if (ret < 0)
    return video::ffmpegStatus(url, "avcodec_parameters_to_context", ret, ErrorCode::kInternal);
  decoder->pkt_timebase = stream->time_base;

  using Decode = VideoReaderOptions::Decode;
#if EDGEINFER_HAVE_CUDA
  const bool tryGpu = options.decode != Decode::kSoftware;
#else
  // Device frames are of no use to a build without CUDA (preprocessCpu takes host frames):
  // kAuto means software here; kGpu still works for an application with its own CUDA code.
  const bool tryGpu = options.decode == Decode::kGpu;
#endif
  if (tryGpu) {
    Status gpu = setupGpu(codec);
    if (!gpu.ok()) {
      if (options.decode == Decode::kGpu) return gpu;
      log(Severity::kWarning,
          "VideoReader: GPU decoding unavailable, decoding in software: " + gpu.message());
    }
  }
  if (!info.hardwareDecoding) {
    decoder->thread_count = 0;  // one per core
    // Frame threads add one frame of latency each: files only, live streams use slices.
    decoder->thread_type = isUrl(url) ? FF_THREAD_SLICE : FF_THREAD_FRAME | FF_THREAD_SLICE;
  }
  ret = avcodec_open2(decoder.get(), codec, nullptr);
  if (ret < 0)
    return video::ffmpegStatus(url, "avcodec_open2(" + info.codec + ")", ret,
                               ErrorCode::kUnsupported);
  if (!packet || !frame || !converted)
    return error(ErrorCode::kOutOfMemory, "av_frame_alloc failed");
  return Status::Ok();
}

Status VideoReader::Impl::decodeError(const std::string& what, int err) const {
  if (options.decode == VideoReaderOptions::Decode::kGpu && !gpuRejected.empty())
    return error(ErrorCode::kUnsupported, gpuRejected);
  return video::ffmpegStatus(url, what + " (" + info.codec + ")", err, ErrorCode::kCorruptFile);
}

Status VideoReader::Impl::makeView(VideoFrame& out) {
  const AVFrame& f = *frame;
  out.index = nextIndex++;
  const int64_t pts = f.best_effort_timestamp;
  if (pts != AV_NOPTS_VALUE)
    out.timestampSeconds = static_cast<double>(pts - startPts) * av_q2d(timeBase);
  else
    out.timestampSeconds = info.fps > 0 ? static_cast<double>(out.index) / info.fps : 0.0;

  if (f.format == AV_PIX_FMT_CUDA) {
    const auto* frames = f.hw_frames_ctx
                             ? reinterpret_cast<const AVHWFramesContext*>(f.hw_frames_ctx->data)
                             : nullptr;
    if (!frames || frames->sw_format != AV_PIX_FMT_NV12)
      return error(ErrorCode::kUnsupported,
                   "NVDEC gave " +
                       video::avPixelFormatName(frames ? frames->sw_format : AV_PIX_FMT_NONE) +
                       " frames; only NV12 (8-bit 4:2:0) is supported");
    viewOf(f, PixelFormat::kNV12, MemoryLocation::kDevice, out.view);
    return Status::Ok();
  }
  const AVPixelFormat target = video::toAVPixelFormat(options.hostFormat);
  if (f.format == target) {  // the decoder's own buffer, no copy
    viewOf(f, options.hostFormat, MemoryLocation::kHost, out.view);
    return validateFrame(out.view);
  }
  AVFrame& dst = *converted;
  if (dst.width != f.width || dst.height != f.height || dst.format != target || !dst.data[0]) {
    av_frame_unref(&dst);
    dst.width = f.width;
    dst.height = f.height;
    dst.format = target;
    const int ret = av_frame_get_buffer(&dst, 0);
    if (ret < 0)
      return video::ffmpegStatus(url, "av_frame_get_buffer", ret, ErrorCode::kOutOfMemory);
  }
  EI_RETURN_IF_ERROR(converter.convert(f.data, f.linesize, static_cast<AVPixelFormat>(f.format),
                                       f.width, f.height, dst, url));
  viewOf(dst, options.hostFormat, MemoryLocation::kHost, out.view);
  return validateFrame(out.view);
}

Expected<std::unique_ptr<VideoReader>> VideoReader::open(const std::string& url,
                                                         const VideoReaderOptions& options) {
  if (video::toAVPixelFormat(options.hostFormat) == AV_PIX_FMT_NONE)
    return Status(ErrorCode::kInvalidArgument,
                  "VideoReader '" + url + "': hostFormat is not a PixelFormat (" +
                      std::to_string(static_cast<int>(options.hostFormat)) + ")");
  if (options.deviceId < 0 || options.timeoutMs < 0)
    return Status(ErrorCode::kInvalidArgument, "VideoReader '" + url +
                                                   "': deviceId and timeoutMs must be >= 0, got " +
                                                   std::to_string(options.deviceId) + " and " +
                                                   std::to_string(options.timeoutMs));
  video::installFfmpegLogBridge();
  auto impl = std::make_unique<Impl>();
  impl->url = url;
  impl->options = options;
  impl->deadline.timeoutMs = options.timeoutMs;
  EI_RETURN_IF_ERROR(impl->openInput());
  EI_RETURN_IF_ERROR(impl->openDecoder());
  return std::unique_ptr<VideoReader>(new VideoReader(std::move(impl)));
}

Expected<bool> VideoReader::read(VideoFrame& out) {
  Impl& d = *impl_;
  if (d.ended) return false;
  av_frame_unref(d.frame.get());
  for (;;) {
    int ret = avcodec_receive_frame(d.decoder.get(), d.frame.get());
    if (ret == 0) break;
    if (ret == AVERROR_EOF) {
      d.ended = true;
      return false;
    }
    if (d.skipDamaged(ret)) continue;  // frame threads report a damaged packet late
    if (ret != AVERROR(EAGAIN)) return d.decodeError("avcodec_receive_frame", ret);
    if (d.draining) {  // a flushed decoder answers EOF, not EAGAIN; do not loop on it
      d.ended = true;
      return false;
    }

    d.deadline.arm();
    ret = av_read_frame(d.format, d.packet.get());
    if (ret == AVERROR_EOF) {  // flush the frames the decoder still holds
      d.draining = true;
      ret = avcodec_send_packet(d.decoder.get(), nullptr);
      if (ret < 0 && ret != AVERROR_EOF) return d.decodeError("avcodec_send_packet", ret);
      continue;
    }
    if (ret < 0) return d.ffmpegError("av_read_frame", ret, ErrorCode::kIoError);
    if (d.packet->stream_index != d.streamIndex) {
      av_packet_unref(d.packet.get());
      continue;
    }
    ret = avcodec_send_packet(d.decoder.get(), d.packet.get());
    av_packet_unref(d.packet.get());
    if (d.skipDamaged(ret)) continue;
    if (ret < 0) return d.decodeError("avcodec_send_packet", ret);
  }
  d.damagedInARow = 0;
  EI_RETURN_IF_ERROR(d.makeView(out));
  return true;
}

}  // namespace edgeinfer::vision

#else  // !EDGEINFER_HAVE_FFMPEG

namespace edgeinfer::vision {

struct VideoReader::Impl {
  VideoInfo info;
};

Expected<std::unique_ptr<VideoReader>> VideoReader::open(const std::string& url,
                                                         const VideoReaderOptions&) {
  return Status(ErrorCode::kUnsupported,
                "VideoReader '" + url +
                    "': EdgeInfer was built without FFmpeg (install libavformat-dev "
                    "libavcodec-dev libswscale-dev and rebuild)");
}

Expected<bool> VideoReader::read(VideoFrame&) {
  return Status(ErrorCode::kUnsupported, "EdgeInfer was built without FFmpeg");
}

}  // namespace edgeinfer::vision

#endif  // EDGEINFER_HAVE_FFMPEG

namespace edgeinfer::vision {

VideoReader::VideoReader(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VideoReader::~VideoReader() = default;
const VideoInfo& VideoReader::info() const {
  return impl_->info;
}

}  // namespace edgeinfer::vision
