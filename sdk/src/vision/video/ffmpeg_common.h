// What VideoReader and VideoWriter share: FFmpeg error codes as Status values, PixelFormat
// <-> AVPixelFormat, owning pointers for FFmpeg objects, the log bridge, and the places where
// FFmpeg versions differ (one compat section, so the readers/writers have no version #ifs).
// Only built with FFmpeg (EDGEINFER_HAVE_FFMPEG).
#pragma once

#if EDGEINFER_HAVE_FFMPEG

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/frame.h>
#include <libavutil/pixfmt.h>
#include <libswscale/swscale.h>
}

#include <memory>
#include <string>

#include "edgeinfer/status.h"
#include "edgeinfer/vision/preprocess.h"

namespace edgeinfer::vision::video {

/// av_strerror's text for `err` ("No such file or directory", "Invalid data found when
/// processing input" ...), or "FFmpeg error <n>".
std::string ffmpegErrorString(int err);

/// The ErrorCode for an FFmpeg error: ENOENT -> kNotFound, ENOMEM -> kOutOfMemory,
/// AVERROR_INVALIDDATA -> kCorruptFile, *_NOT_FOUND (no decoder/demuxer ...) -> kUnsupported,
/// EIO/EACCES/ENOSPC/ETIMEDOUT/AVERROR_EXIT -> kIoError; `otherwise` for the rest.
ErrorCode errorCodeFor(int err, ErrorCode otherwise);

/// "'<name>': <what>: <av_strerror(err)>" with errorCodeFor(err, otherwise).
Status ffmpegStatus(const std::string& name, const std::string& what, int err,
                    ErrorCode otherwise = ErrorCode::kIoError);

/// The AVPixelFormat of a PixelFormat (I420 = yuv420p, RGBx = rgb0 ...).
AVPixelFormat toAVPixelFormat(PixelFormat format);

/// FFmpeg's name of a pixel format ("yuv420p"), "none" for AV_PIX_FMT_NONE.
std::string avPixelFormatName(int format);

/// Routes FFmpeg's av_log into edgeinfer's logger (see video.h); idempotent, thread-safe.
void installFfmpegLogBridge();

// ---- Owning pointers ---------------------------------------------------------------------
struct AVFrameFree {
  void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct AVPacketFree {
  void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct AVCodecContextFree {
  void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct AVBufferRefUnref {
  void operator()(AVBufferRef* b) const { av_buffer_unref(&b); }
};
using FramePtr = std::unique_ptr<AVFrame, AVFrameFree>;
using PacketPtr = std::unique_ptr<AVPacket, AVPacketFree>;
using CodecContextPtr = std::unique_ptr<AVCodecContext, AVCodecContextFree>;
using BufferRefPtr = std::unique_ptr<AVBufferRef, AVBufferRefUnref>;

/// Converts whole frames of one size and pair of formats (libswscale, SWS_BICUBIC like
/// OpenCV's videoio, BT.601); re-creates its context when those change.
class FrameConverter {
 public:
  FrameConverter() = default;
  ~FrameConverter();
  FrameConverter(const FrameConverter&) = delete;
  FrameConverter& operator=(const FrameConverter&) = delete;

  /// Converts `src` (planes/strides as FFmpeg takes them) into `dst`, which must have its
  /// buffers allocated for (width, height, dstFormat).
  Status convert(const uint8_t* const src[], const int srcStride[], AVPixelFormat srcFormat,
                 int width, int height, AVFrame& dst, const std::string& name);

 private:
  SwsContext* sws_ = nullptr;  // owned; sws_getCachedContext reuses or replaces it
};

// ---- Version compat (FFmpeg 5.1 = libavcodec 59 is the oldest supported) -----------------
/// The pixel formats an encoder accepts, AV_PIX_FMT_NONE-terminated; nullptr if it did not say.
const AVPixelFormat* encoderPixelFormats(const AVCodecContext* ctx, const AVCodec* codec);

}  // namespace edgeinfer::vision::video

#endif  // EDGEINFER_HAVE_FFMPEG
