// Helpers VideoReader and VideoWriter share (see ffmpeg_common.h).
#include "vision/video/ffmpeg_common.h"

#include "edgeinfer/vision/video.h"

#if EDGEINFER_HAVE_FFMPEG

extern "C" {
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <libavutil/pixdesc.h>
}

#include <cerrno>
#include <cstdarg>
#include <mutex>

#include "edgeinfer/logger.h"

namespace edgeinfer::vision {

bool videoIoAvailable() {
  return true;
}

namespace video {

std::string ffmpegErrorString(int err) {
  char buf[AV_ERROR_MAX_STRING_SIZE] = {};
  if (av_strerror(err, buf, sizeof(buf)) < 0) return "FFmpeg error " + std::to_string(err);
  return buf;
}

ErrorCode errorCodeFor(int err, ErrorCode otherwise) {
  switch (err) {
    case AVERROR(ENOENT):
      return ErrorCode::kNotFound;
    case AVERROR(ENOMEM):
      return ErrorCode::kOutOfMemory;
    case AVERROR_INVALIDDATA:
      return ErrorCode::kCorruptFile;
    case AVERROR_DECODER_NOT_FOUND:
    case AVERROR_DEMUXER_NOT_FOUND:
    case AVERROR_ENCODER_NOT_FOUND:
    case AVERROR_MUXER_NOT_FOUND:
    case AVERROR_PROTOCOL_NOT_FOUND:
    case AVERROR_PATCHWELCOME:
      return ErrorCode::kUnsupported;
    case AVERROR(EIO):
    case AVERROR(EACCES):
    case AVERROR(EPERM):
    case AVERROR(ENOSPC):
    case AVERROR(ETIMEDOUT):
    case AVERROR(ECONNREFUSED):
    case AVERROR_EXIT:
    case AVERROR_EOF:
      return ErrorCode::kIoError;
    default:
      return otherwise;
  }
}

Status ffmpegStatus(const std::string& name, const std::string& what, int err,
                    ErrorCode otherwise) {
  return Status(errorCodeFor(err, otherwise),
                "'" + name + "': " + what + ": " + ffmpegErrorString(err));
}

AVPixelFormat toAVPixelFormat(PixelFormat format) {
  switch (format) {
    case PixelFormat::kNV12:
      return AV_PIX_FMT_NV12;
    case PixelFormat::kI420:
      return AV_PIX_FMT_YUV420P;
    case PixelFormat::kRGBA:
      return AV_PIX_FMT_RGBA;
    case PixelFormat::kBGRA:
      return AV_PIX_FMT_BGRA;
    case PixelFormat::kRGBx:
      return AV_PIX_FMT_RGB0;
    case PixelFormat::kBGRx:
      return AV_PIX_FMT_BGR0;
    case PixelFormat::kRGB:
      return AV_PIX_FMT_RGB24;
    case PixelFormat::kBGR:
      return AV_PIX_FMT_BGR24;
    case PixelFormat::kGray8:
      return AV_PIX_FMT_GRAY8;
  }
  return AV_PIX_FMT_NONE;
}

std::string avPixelFormatName(int format) {
  const char* name = av_get_pix_fmt_name(static_cast<AVPixelFormat>(format));
  return name ? name : "none";
}

namespace {

// FFmpeg may log a line in pieces (no '\n' yet): collect per thread until the line ends.
void logBridge(void* avcl, int level, const char* fmt, va_list args) {
  if (level > AV_LOG_VERBOSE) return;  // debug and trace: never
  const Severity severity = level <= AV_LOG_WARNING ? Severity::kInfo : Severity::kVerbose;
  if (static_cast<int>(severity) > static_cast<int>(getLogLevel())) return;
  thread_local std::string pending;
  thread_local int printPrefix = 1;
  char line[1024];
  va_list copy;
  va_copy(copy, args);
  av_log_format_line2(avcl, level, fmt, copy, line, sizeof(line), &printPrefix);
  va_end(copy);
  pending += line;
  if (pending.empty() || pending.back() != '\n') return;
  pending.pop_back();
  edgeinfer::log(severity, "ffmpeg: " + pending);
  pending.clear();
}

}  // namespace

void installFfmpegLogBridge() {
  static std::once_flag once;
  std::call_once(once, [] { av_log_set_callback(logBridge); });
}

FrameConverter::~FrameConverter() {
  sws_freeContext(sws_);
}

Status FrameConverter::convert(const uint8_t* const src[], const int srcStride[],
                               AVPixelFormat srcFormat, int width, int height, AVFrame& dst,
                               const std::string& name) {
  const auto dstFormat = static_cast<AVPixelFormat>(dst.format);
  sws_ = sws_getCachedContext(sws_, width, height, srcFormat, width, height, dstFormat, SWS_BICUBIC,
                              nullptr, nullptr, nullptr);
  if (!sws_)
    return Status(ErrorCode::kUnsupported,
                  "'" + name + "': libswscale cannot convert " + avPixelFormatName(srcFormat) +
                      " to " + avPixelFormatName(dstFormat) + " at " + std::to_string(width) + "x" +
                      std::to_string(height));
  const int rows = sws_scale(sws_, src, srcStride, 0, height, dst.data, dst.linesize);
  if (rows != height)
    return Status(ErrorCode::kInternal, "'" + name + "': sws_scale converted " +
                                            std::to_string(rows) + " of " + std::to_string(height) +
                                            " rows");
  return Status::Ok();
}

const AVPixelFormat* encoderPixelFormats(const AVCodecContext* ctx, const AVCodec* codec) {
#if LIBAVCODEC_VERSION_INT >= AV_VERSION_INT(61, 13, 100)
  // FFmpeg 7.1 deprecates AVCodec::pix_fmts for avcodec_get_supported_config().
  const void* formats = nullptr;
  int count = 0;
  if (avcodec_get_supported_config(ctx, codec, AV_CODEC_CONFIG_PIX_FORMAT, 0, &formats, &count) < 0)
    return nullptr;
  return static_cast<const AVPixelFormat*>(formats);
#else
  (void)ctx;
  return codec->pix_fmts;
#endif
}

}  // namespace video
}  // namespace edgeinfer::vision

#else  // !EDGEINFER_HAVE_FFMPEG

namespace edgeinfer::vision {
bool videoIoAvailable() {
  return false;
}
}  // namespace edgeinfer::vision

#endif  // EDGEINFER_HAVE_FFMPEG
