// Calibration data sources: a folder of images, a video, a folder of .npy tensors. Images and
// frames go through the model config's preprocessing (vision/preprocess.h), exactly as
// VisionModel feeds the engine, so the ranges calibrated are those of the real inputs.
//
// A file that cannot be read or decoded is skipped with one warning per file and counted
// (CalibrationSource::skipped()); calibrate() fails when no sample at all could be read. A
// data set with a few broken files is common and should not stop a long calibration, but it
// must never pass silently.
#include <dirent.h>
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "core/npy.h"
#include "edgeinfer/calibration.h"
#include "edgeinfer/logger.h"
#include "edgeinfer/vision/video.h"

namespace edgeinfer {
namespace {

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string extensionOf(const std::string& name) {
  const auto dot = name.find_last_of('.');
  return dot == std::string::npos ? "" : lower(name.substr(dot + 1));
}

bool isImageExtension(const std::string& ext) {
  static const std::set<std::string> kExt = {"jpg", "jpeg", "png", "bmp", "webp",
                                             "tif", "tiff", "ppm", "pgm"};
  return kExt.count(ext) != 0;
}

/// The regular files of `dir`, sorted by name.
Expected<std::vector<std::string>> listFiles(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) {
    const int e = errno;
    const ErrorCode code = e == ENOENT    ? ErrorCode::kNotFound
                           : e == ENOTDIR ? ErrorCode::kInvalidArgument
                                          : ErrorCode::kIoError;
    return Status(code, "cannot read calibration folder '" + dir + "': " + std::strerror(e));
  }
  std::vector<std::string> names;
  while (dirent* ent = readdir(d)) {
    const std::string n = ent->d_name;
    if (n == "." || n == "..") continue;
    struct stat st {};
    if (stat((dir + "/" + n).c_str(), &st) == 0 && S_ISREG(st.st_mode)) names.push_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

/// A decoded image in host memory (RGB or GRAY8).
struct HostImage {
  int width = 0, height = 0;
  vision::PixelFormat format = vision::PixelFormat::kRGB;
  std::vector<uint8_t> pixels;
};

/// Binary PPM (P6) / PGM (P5) with maxval 255.
Expected<HostImage> readPnm(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status(ErrorCode::kIoError, std::string("cannot open: ") + std::strerror(errno));
  std::string magic;
  HostImage img;
  int maxval = 0;
  f >> magic;
  // Header fields may be separated by comments.
  auto readInt = [&f](int* v) {
    while (f >> std::ws && f.peek() == '#') f.ignore(1 << 20, '\n');
    return static_cast<bool>(f >> *v);
  };
  if ((magic != "P6" && magic != "P5") || !readInt(&img.width) || !readInt(&img.height) ||
      !readInt(&maxval))
    return Status(ErrorCode::kCorruptFile, "not a binary PPM/PGM (P6/P5) file");
  if (maxval != 255 || img.width <= 0 || img.height <= 0 || img.width > vision::kMaxFrameSide ||
      img.height > vision::kMaxFrameSide)
    return Status(ErrorCode::kUnsupported, "only 8-bit PPM/PGM of sane size is read");
  f.get();
  const int channels = magic == "P6" ? 3 : 1;
  img.format = channels == 3 ? vision::PixelFormat::kRGB : vision::PixelFormat::kGray8;
  img.pixels.resize(static_cast<size_t>(img.width) * img.height * channels);
  if (!f.read(reinterpret_cast<char*>(img.pixels.data()),
              static_cast<std::streamsize>(img.pixels.size())))
    return Status(ErrorCode::kCorruptFile, "truncated pixel data");
  return img;
}

/// Preprocesses one frame into a new [1, ...] tensor.
Expected<Tensor> preprocessOne(const vision::FrameView& frame,
                               const vision::PreprocessConfig& cfg) {
  EI_ASSIGN_OR_RETURN(Tensor t, Tensor::create(cfg.dtype, vision::preprocessTensorShape(cfg, 1)));
  EI_RETURN_IF_ERROR(vision::preprocessCpu(frame, cfg, t, 0, nullptr));
  return t;
}

/// Decodes an image file and preprocesses it.
Expected<Tensor> loadImage(const std::string& path, const vision::PreprocessConfig& cfg) {
  const std::string ext = extensionOf(path);
  if (ext == "ppm" || ext == "pgm") {
    EI_ASSIGN_OR_RETURN(HostImage img, readPnm(path));
    EI_ASSIGN_OR_RETURN(vision::FrameView v,
                        vision::wrapFrame(img.format, img.width, img.height, img.pixels.data()));
    return preprocessOne(v, cfg);
  }
  // Everything else through FFmpeg (its image2 demuxer and image decoders).
  vision::VideoReaderOptions o;
  o.decode = vision::VideoReaderOptions::Decode::kSoftware;
  o.hostFormat = vision::PixelFormat::kRGB;
  EI_ASSIGN_OR_RETURN(auto reader, vision::VideoReader::open(path, o));
  vision::VideoFrame frame;
  EI_ASSIGN_OR_RETURN(bool got, reader->read(frame));
  if (!got) return Status(ErrorCode::kCorruptFile, "no picture could be decoded");
  return preprocessOne(frame.view, cfg);
}

/// A folder of sample files, one sample each: images through the model's preprocessing, or
/// raw .npy tensors. A file that does not load is skipped with one warning.
class FolderSource final : public CalibrationSource {
 public:
  enum class Kind { kImages, kTensors };
  FolderSource(Kind kind, std::string dir, std::vector<std::string> files,
               CalibrationDataOptions opt)
      : kind_(kind), dir_(std::move(dir)), files_(std::move(files)), opt_(std::move(opt)) {}

  std::string describe() const override {
    return std::to_string(files_.size()) +
           (kind_ == Kind::kImages ? " image file(s) in '" : " .npy file(s) in '") + dir_ + "'";
  }
  int64_t expectedSamples() const override {
    const auto n = static_cast<int64_t>(files_.size());
    return opt_.maxImages >= 0 ? std::min(n, opt_.maxImages) : n;
  }
  std::string preprocessKey() const override {
    return kind_ == Kind::kImages ? preprocessHash(opt_.preprocess) : "raw";
  }
  Status rewind() override {
    pos_ = 0;
    yielded_ = 0;
    skipped_ = 0;
    return Status::Ok();
  }
  int64_t skipped() const override { return skipped_; }

  Expected<bool> next(CalibrationSample& sample) override {
    while (pos_ < files_.size() && (opt_.maxImages < 0 || yielded_ < opt_.maxImages)) {
      const std::string path = dir_ + "/" + files_[pos_++];
      auto t = kind_ == Kind::kImages ? loadImage(path, opt_.preprocess) : readNpy(path);
      if (!t.ok()) {
        ++skipped_;
        if (warned_.insert(path).second)
          log(Severity::kWarning, "calibration: skipping '" + path + "': " + t.status().toString());
        continue;
      }
      sample.inputs.clear();
      sample.inputs.emplace(kind_ == Kind::kImages ? opt_.inputTensor : opt_.tensorInput,
                            std::move(t).value());
      sample.origin = path;
      ++yielded_;
      return true;
    }
    return false;
  }

 private:
  Kind kind_;
  std::string dir_;
  std::vector<std::string> files_;
  CalibrationDataOptions opt_;
  size_t pos_ = 0;
  int64_t yielded_ = 0, skipped_ = 0;
  std::set<std::string> warned_;
};

class VideoSource final : public CalibrationSource {
 public:
  VideoSource(std::string path, CalibrationDataOptions opt)
      : path_(std::move(path)), opt_(std::move(opt)) {}

  Status open() {
    vision::VideoReaderOptions o;
    o.decode = vision::VideoReaderOptions::Decode::kSoftware;
    o.hostFormat = vision::PixelFormat::kRGB;
    auto r = vision::VideoReader::open(path_, o);
    if (!r.ok()) return r.status();
    reader_ = std::move(r).value();
    yielded_ = 0;
    return Status::Ok();
  }

  std::string describe() const override { return "video '" + path_ + "'"; }
  int64_t expectedSamples() const override {
    const int64_t n = reader_ ? reader_->info().frameCount : -1;
    if (opt_.maxImages < 0) return n;
    return n < 0 ? opt_.maxImages : std::min(n, opt_.maxImages);
  }
  std::string preprocessKey() const override { return preprocessHash(opt_.preprocess); }
  Status rewind() override { return open(); }
  int64_t skipped() const override { return 0; }

  Expected<bool> next(CalibrationSample& sample) override {
    if (!reader_ || (opt_.maxImages >= 0 && yielded_ >= opt_.maxImages)) return false;
    vision::VideoFrame frame;
    EI_ASSIGN_OR_RETURN(bool got, reader_->read(frame));
    if (!got) return false;
    auto t = preprocessOne(frame.view, opt_.preprocess);
    if (!t.ok())
      return t.status().withContext("video '" + path_ + "' frame " + std::to_string(frame.index));
    sample.inputs.clear();
    sample.inputs.emplace(opt_.inputTensor, std::move(t).value());
    sample.origin = "'" + path_ + "' frame " + std::to_string(frame.index);
    ++yielded_;
    return true;
  }

 private:
  std::string path_;
  CalibrationDataOptions opt_;
  std::unique_ptr<vision::VideoReader> reader_;
  int64_t yielded_ = 0;
};

}  // namespace

Expected<std::unique_ptr<CalibrationSource>> openImageFolder(const std::string& dir,
                                                             const CalibrationDataOptions& opt) {
  EI_ASSIGN_OR_RETURN(std::vector<std::string> names, listFiles(dir));
  std::vector<std::string> images;
  for (const auto& n : names)
    if (isImageExtension(extensionOf(n))) images.push_back(n);
  if (images.empty())
    return Status(ErrorCode::kInvalidArgument,
                  "calibration folder '" + dir + "' holds no image files (" +
                      std::to_string(names.size()) +
                      " other file(s); images: .jpg .jpeg .png .bmp .webp .tif .tiff .ppm .pgm)");
  EI_RETURN_IF_ERROR(vision::validatePreprocessConfig(opt.preprocess));
  return std::unique_ptr<CalibrationSource>(
      new FolderSource(FolderSource::Kind::kImages, dir, std::move(images), opt));
}

Expected<std::unique_ptr<CalibrationSource>> openVideoFile(const std::string& path,
                                                           const CalibrationDataOptions& opt) {
  EI_RETURN_IF_ERROR(vision::validatePreprocessConfig(opt.preprocess));
  auto src = std::make_unique<VideoSource>(path, opt);
  EI_RETURN_IF_ERROR(src->open());
  return std::unique_ptr<CalibrationSource>(std::move(src));
}

Expected<std::unique_ptr<CalibrationSource>> openTensorFolder(const std::string& dir,
                                                              const CalibrationDataOptions& opt) {
  EI_ASSIGN_OR_RETURN(std::vector<std::string> names, listFiles(dir));
  std::vector<std::string> npy;
  for (const auto& n : names)
    if (extensionOf(n) == "npy") npy.push_back(n);
  if (npy.empty())
    return Status(ErrorCode::kInvalidArgument,
                  "calibration folder '" + dir + "' holds no .npy files");
  return std::unique_ptr<CalibrationSource>(
      new FolderSource(FolderSource::Kind::kTensors, dir, std::move(npy), opt));
}

Expected<std::unique_ptr<CalibrationSource>> openCalibrationData(
    const std::string& path, const CalibrationDataOptions& opt) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    return Status(errno == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIoError,
                  "calibration data '" + path + "': " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return openVideoFile(path, opt);
  EI_ASSIGN_OR_RETURN(std::vector<std::string> names, listFiles(path));
  bool anyNpy = false, anyImage = false;
  for (const auto& n : names) {
    anyNpy = anyNpy || extensionOf(n) == "npy";
    anyImage = anyImage || isImageExtension(extensionOf(n));
  }
  if (anyNpy && !anyImage) return openTensorFolder(path, opt);
  return openImageFolder(path, opt);
}

}  // namespace edgeinfer
