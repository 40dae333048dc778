// VideoWriter: host frames -> libswscale -> an FFmpeg encoder -> a container file (see
// edgeinfer/vision/video.h for the contract).
#include "edgeinfer/vision/video.h"

#include "edgeinfer/logger.h"

#if EDGEINFER_HAVE_FFMPEG

extern "C" {
#include <libavutil/pixdesc.h>
}

#include <atomic>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "vision/video/ffmpeg_common.h"

namespace edgeinfer::vision {
namespace {

// FFmpeg's own MPEG-family encoders default to 200 kbit/s, far too low for camera footage; a
// constant quantiser keeps quality whatever the resolution.
bool needsQuantiserDefault(AVCodecID id) {
  return id == AV_CODEC_ID_MPEG4 || id == AV_CODEC_ID_MPEG1VIDEO || id == AV_CODEC_ID_MPEG2VIDEO ||
         id == AV_CODEC_ID_MJPEG || id == AV_CODEC_ID_H263P;
}
constexpr int kDefaultQuantiser = 3;

}  // namespace

struct VideoWriter::Impl {
  std::string path;
  std::string partPath;  // written here, renamed to `path` by close()
  int width = 0;
  int height = 0;
  AVFormatContext* output = nullptr;
  video::CodecContextPtr encoder;
  AVStream* stream = nullptr;
  video::FramePtr frame{av_frame_alloc()};
  video::PacketPtr packet{av_packet_alloc()};
  video::FrameConverter converter;
  int64_t written = 0;
  bool headerWritten = false;
  bool removePart = false;  // open() failed after creating the file
  bool closed = false;
  Status closeStatus;

  ~Impl() {
    release();
    if (removePart) {
      std::error_code ec;
      std::filesystem::remove(partPath, ec);
    }
  }

  void release() {
    if (output) {
      if (!(output->oformat->flags & AVFMT_NOFILE)) avio_closep(&output->pb);
      avformat_free_context(output);
      output = nullptr;
    }
    encoder.reset();
  }

  Status error(ErrorCode code, const std::string& message) const {
    return Status(code, "'" + path + "': " + message);
  }

  Status open(const VideoWriterOptions& options);
  Status encode(const AVFrame* f);
};

Status VideoWriter::Impl::open(const VideoWriterOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return error(ErrorCode::kInvalidArgument, "is a directory; VideoWriter needs a file name");
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
    return error(ErrorCode::kNotFound, "directory '" + parent.string() + "' does not exist");

  int ret = avformat_alloc_output_context2(&output, nullptr, nullptr, path.c_str());
  if (ret < 0 || !output)
    return error(ErrorCode::kInvalidArgument,
                 "FFmpeg cannot tell the container from the file name (use .mp4, .mkv, .avi, "
                 ".mov ...): " +
                     video::ffmpegErrorString(ret < 0 ? ret : AVERROR_MUXER_NOT_FOUND));

  const AVCodec* codec = avcodec_find_encoder_by_name(options.codec.c_str());
  if (!codec && options.codec == "libx264") {
    codec = avcodec_find_encoder_by_name("mpeg4");
    static std::atomic<bool> logged{false};
    if (codec && !logged.exchange(true))
      log(Severity::kWarning,
          "VideoWriter: this FFmpeg has no libx264 encoder; writing MPEG-4 Part 2 (mpeg4)");
  }
  if (!codec)
    return error(ErrorCode::kNotFound, "this FFmpeg has no encoder named '" + options.codec +
                                           "' (`ffmpeg -encoders` lists them)");
  if (codec->type != AVMEDIA_TYPE_VIDEO)
    return error(ErrorCode::kInvalidArgument, "'" + options.codec + "' is not a video encoder");
  if (avformat_query_codec(output->oformat, codec->id, FF_COMPLIANCE_NORMAL) == 0)
    return error(ErrorCode::kUnsupported, std::string("the ") + output->oformat->name +
                                              " container cannot hold " + codec->name + " video");

  encoder.reset(avcodec_alloc_context3(codec));
  if (!encoder || !frame || !packet)
    return error(ErrorCode::kOutOfMemory, "FFmpeg allocation failed");
  AVCodecContext& enc = *encoder;
  enc.width = width;
  enc.height = height;
  const AVRational rate = av_d2q(options.fps, 100000);
  enc.time_base = av_inv_q(rate);
  enc.framerate = rate;
  const AVPixelFormat* formats = video::encoderPixelFormats(&enc, codec);
  enc.pix_fmt = AV_PIX_FMT_YUV420P;
  if (formats) {
    bool has420 = false;
    for (const AVPixelFormat* f = formats; *f != AV_PIX_FMT_NONE; ++f)
      has420 = has420 || *f == AV_PIX_FMT_YUV420P;
    if (!has420)
      enc.pix_fmt = avcodec_find_best_pix_fmt_of_list(formats, AV_PIX_FMT_YUV420P, 0, nullptr);
  }
  const AVPixFmtDescriptor* desc = av_pix_fmt_desc_get(enc.pix_fmt);
  if (!desc)
    return error(ErrorCode::kUnsupported,
                 std::string("no usable pixel format for the ") + codec->name + " encoder");
  const int xAlign = 1 << desc->log2_chroma_w, yAlign = 1 << desc->log2_chroma_h;
  if (width % xAlign || height % yAlign)
    return error(ErrorCode::kInvalidArgument,
                 std::string(codec->name) + " encodes " + desc->name + ", which needs " +
                     (xAlign > 1 || yAlign > 1 ? "an even" : "a") + " width and height; got " +
                     std::to_string(width) + "x" + std::to_string(height));
  enc.colorspace = AVCOL_SPC_SMPTE170M;  // BT.601: what libswscale's RGB -> YUV uses
  if (options.bitRate > 0) {
    enc.bit_rate = options.bitRate;
  } else if (needsQuantiserDefault(codec->id)) {
    enc.flags |= AV_CODEC_FLAG_QSCALE;
    enc.global_quality = FF_QP2LAMBDA * kDefaultQuantiser;
  }
  enc.thread_count = 0;  // one per core
  if (output->oformat->flags & AVFMT_GLOBALHEADER) enc.flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
  ret = avcodec_open2(&enc, codec, nullptr);
  if (ret < 0)
    return video::ffmpegStatus(path, std::string("avcodec_open2(") + codec->name + ")", ret,
                               ErrorCode::kInvalidArgument);

  stream = avformat_new_stream(output, nullptr);
  if (!stream) return error(ErrorCode::kOutOfMemory, "avformat_new_stream failed");
  stream->time_base = enc.time_base;
  stream->avg_frame_rate = rate;
  ret = avcodec_parameters_from_context(stream->codecpar, &enc);
  if (ret < 0) return video::ffmpegStatus(path, "avcodec_parameters_from_context", ret);

  frame->format = enc.pix_fmt;
  frame->width = width;
  frame->height = height;
  ret = av_frame_get_buffer(frame.get(), 0);
  if (ret < 0) return video::ffmpegStatus(path, "av_frame_get_buffer", ret);

  partPath = path + ".part";
  if (!(output->oformat->flags & AVFMT_NOFILE)) {
    ret = avio_open2(&output->pb, partPath.c_str(), AVIO_FLAG_WRITE, nullptr, nullptr);
    if (ret < 0) return video::ffmpegStatus(partPath, "cannot create the file", ret);
    removePart = true;
  }
  ret = avformat_write_header(output, nullptr);
  if (ret < 0) return video::ffmpegStatus(path, "avformat_write_header", ret);
  headerWritten = true;
  return Status::Ok();
}

Status VideoWriter::Impl::encode(const AVFrame* f) {
  int ret = avcodec_send_frame(encoder.get(), f);
  if (ret < 0) return video::ffmpegStatus(path, "avcodec_send_frame", ret, ErrorCode::kIoError);
  for (;;) {
    ret = avcodec_receive_packet(encoder.get(), packet.get());
    if (ret == AVERROR(EAGAIN) || ret == AVERROR_EOF) return Status::Ok();
    if (ret < 0) return video::ffmpegStatus(path, "avcodec_receive_packet", ret);
    av_packet_rescale_ts(packet.get(), encoder->time_base, stream->time_base);
    packet->stream_index = stream->index;
    ret = av_interleaved_write_frame(output, packet.get());  // takes the packet's data
    if (ret < 0) return video::ffmpegStatus(partPath, "av_interleaved_write_frame", ret);
  }
}

Expected<std::unique_ptr<VideoWriter>> VideoWriter::open(const std::string& path, int width,
                                                         int height,
                                                         const VideoWriterOptions& options) {
  if (path.empty()) return Status(ErrorCode::kInvalidArgument, "VideoWriter: empty path");
  if (width < 1 || height < 1 || width > kMaxFrameSide || height > kMaxFrameSide)
    return Status(ErrorCode::kInvalidArgument,
                  "VideoWriter '" + path + "': size " + std::to_string(width) + "x" +
                      std::to_string(height) + " is outside 1.." + std::to_string(kMaxFrameSide));
  if (!std::isfinite(options.fps) || options.fps <= 0 || options.fps > 1000)
    return Status(
        ErrorCode::kInvalidArgument,
        "VideoWriter '" + path + "': fps " + std::to_string(options.fps) + " is outside (0, 1000]");
  if (options.bitRate < 0)
    return Status(ErrorCode::kInvalidArgument, "VideoWriter '" + path + "': negative bitRate");
  video::installFfmpegLogBridge();
  auto impl = std::make_unique<Impl>();
  impl->path = path;
  impl->width = width;
  impl->height = height;
  EI_RETURN_IF_ERROR(impl->open(options));
  impl->removePart = false;
  return std::unique_ptr<VideoWriter>(new VideoWriter(std::move(impl)));
}

Status VideoWriter::write(const FrameView& f) {
  Impl& d = *impl_;
  if (d.closed) return d.error(ErrorCode::kInvalidArgument, "write() after close()");
  if (f.memory != MemoryLocation::kHost)
    return d.error(ErrorCode::kInvalidArgument,
                   "write() takes frames in host memory, got a device frame");
  Status valid = validateFrame(f);
  if (!valid.ok()) return valid.withContext("VideoWriter '" + d.path + "'");
  if (f.width != d.width || f.height != d.height)
    return d.error(ErrorCode::kInvalidArgument,
                   "frame is " + std::to_string(f.width) + "x" + std::to_string(f.height) +
                       " but the writer was opened for " + std::to_string(d.width) + "x" +
                       std::to_string(d.height));
  // The encoder may still reference the previous frame's buffer (lookahead).
  int ret = av_frame_make_writable(d.frame.get());
  if (ret < 0) return video::ffmpegStatus(d.path, "av_frame_make_writable", ret);
  const uint8_t* src[4] = {f.planes[0], f.planes[1], f.planes[2], nullptr};
  const int strides[4] = {f.strides[0], f.strides[1], f.strides[2], 0};
  EI_RETURN_IF_ERROR(d.converter.convert(src, strides, video::toAVPixelFormat(f.format), f.width,
                                         f.height, *d.frame, d.path));
  d.frame->pts = d.written;
  EI_RETURN_IF_ERROR(d.encode(d.frame.get()));
  ++d.written;
  return Status::Ok();
}

Status VideoWriter::close() {
  Impl& d = *impl_;
  if (d.closed) return d.closeStatus;
  d.closed = true;
  Status s = d.encode(nullptr);  // flush: the encoder's delayed frames
  if (d.headerWritten) {
    const int ret = av_write_trailer(d.output);
    if (ret < 0 && s.ok()) s = video::ffmpegStatus(d.partPath, "av_write_trailer", ret);
  }
  if (d.output && !(d.output->oformat->flags & AVFMT_NOFILE)) {
    const int ret = avio_closep(&d.output->pb);
    if (ret < 0 && s.ok()) s = video::ffmpegStatus(d.partPath, "closing the file", ret);
  }
  d.release();
  if (s.ok()) {
    std::error_code ec;
    std::filesystem::rename(d.partPath, d.path, ec);
    if (ec)
      s = d.error(ErrorCode::kIoError, "cannot rename '" + d.partPath + "' to it: " + ec.message());
  } else {
    s = Status(s.code(), s.message() + " (the partial file is left as '" + d.partPath + "')");
  }
  d.closeStatus = s;
  return s;
}

}  // namespace edgeinfer::vision

#else  // !EDGEINFER_HAVE_FFMPEG

namespace edgeinfer::vision {

struct VideoWriter::Impl {
  int64_t written = 0;
  bool closed = true;
};

Expected<std::unique_ptr<VideoWriter>> VideoWriter::open(const std::string& path, int, int,
                                                         const VideoWriterOptions&) {
  return Status(ErrorCode::kUnsupported,
                "VideoWriter '" + path +
                    "': EdgeInfer was built without FFmpeg (install libavformat-dev "
                    "libavcodec-dev libswscale-dev and rebuild)");
}

Status VideoWriter::write(const FrameView&) {
  return Status(ErrorCode::kUnsupported, "EdgeInfer was built without FFmpeg");
}

Status VideoWriter::close() {
  return Status::Ok();
}

}  // namespace edgeinfer::vision

#endif  // EDGEINFER_HAVE_FFMPEG

namespace edgeinfer::vision {

VideoWriter::VideoWriter(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

VideoWriter::~VideoWriter() {
  if (impl_->closed) return;
  const Status s = close();
  if (!s.ok()) log(Severity::kError, "VideoWriter: close() in the destructor: " + s.toString());
}

int64_t VideoWriter::framesWritten() const {
  return impl_->written;
}

}  // namespace edgeinfer::vision
