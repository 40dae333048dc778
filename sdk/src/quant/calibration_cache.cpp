// The calibration cache file (format in calibration.h and docs/design/int8-calibration.md):
// written atomically, read with every line checked.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "builder/engine_format.h"
#include "edgeinfer/calibration.h"

namespace edgeinfer {
namespace {

constexpr const char* kMagic = "EDGEINFER-CALIBRATION";

std::string fmtFloat(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

/// Parses a whole decimal number; false for anything else (trailing text, overflow).
bool parseDouble(const std::string& s, double* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (errno == ERANGE || end != s.c_str() + s.size()) return false;
  *out = v;
  return true;
}

bool parseInt(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE || end != s.c_str() + s.size()) return false;
  *out = v;
  return true;
}

/// Splits "key rest of line" at the first space.
void splitFirst(const std::string& line, std::string* key, std::string* rest) {
  const auto sp = line.find(' ');
  *key = line.substr(0, sp);
  *rest = sp == std::string::npos ? "" : line.substr(sp + 1);
}

class Reader {
 public:
  Reader(const std::string& text, std::string source) : source_(std::move(source)) {
    std::istringstream in(text);
    std::string line;
    int n = 0;
    while (std::getline(in, line)) {
      ++n;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.empty() || line[0] == '#') continue;
      lines_.push_back({n, line});
    }
    lastLine_ = n;
  }

  Status corrupt(const std::string& what) const {
    const int line = pos_ < lines_.size() ? lines_[pos_].number : lastLine_;
    return Status(ErrorCode::kCorruptFile,
                  "calibration cache '" + source_ + "' line " + std::to_string(line) + ": " + what);
  }

  bool atEnd() const { return pos_ >= lines_.size(); }
  const std::string& peek() const { return lines_[pos_].text; }
  int lineNumber() const { return pos_ < lines_.size() ? lines_[pos_].number : lastLine_; }

  /// The next line, which must be "<key> <value>"; the value is returned.
  Expected<std::string> field(const std::string& key) {
    if (atEnd()) return corrupt("the file ends before '" + key + "' (truncated?)");
    std::string k, rest;
    splitFirst(peek(), &k, &rest);
    if (k != key) return corrupt("expected '" + key + " ...', found '" + peek() + "'");
    ++pos_;
    return rest;
  }
  Expected<int64_t> count(const std::string& key, int64_t max) {
    EI_ASSIGN_OR_RETURN(std::string v, field(key));
    int64_t n = 0;
    if (!parseInt(v, &n) || n < 0 || n > max) {
      --pos_;
      return corrupt("'" + key + "' needs a count, got '" + v + "'");
    }
    return n;
  }
  void advance() { ++pos_; }

 private:
  struct Line {
    int number;
    std::string text;
  };
  std::string source_;
  std::vector<Line> lines_;
  size_t pos_ = 0;
  int lastLine_ = 0;
};

}  // namespace

std::string modelHashOf(const void* data, size_t size) {
  return builder::fnv1aHex(data, size);
}

std::string preprocessHash(const vision::PreprocessConfig& c) {
  std::ostringstream s;
  s << std::setprecision(9) << "w=" << c.outputWidth << " h=" << c.outputHeight
    << " layout=" << static_cast<int>(c.layout) << " dtype=" << dataTypeName(c.dtype)
    << " resize=" << static_cast<int>(c.resize) << " interp=" << static_cast<int>(c.interpolation)
    << " channels=" << static_cast<int>(c.channels) << " scale=" << c.scale;
  for (int i = 0; i < 3; ++i)
    s << " m" << i << "=" << c.mean[static_cast<size_t>(i)] << " s" << i << "="
      << c.std[static_cast<size_t>(i)] << " p" << i << "=" << c.padValue[static_cast<size_t>(i)];
  const std::string text = s.str();
  return builder::fnv1aHex(text.data(), text.size());
}

std::string CalibrationCache::toText() const {
  std::ostringstream s;
  s << kMagic << " " << kFormatVersion << "\n";
  s << "# written by edgeinfer calibrate; scale = amax / 127 (symmetric int8, per tensor)\n";
  s << "sdk " << sdkVersion << "\n";
  s << "model " << modelHash << "\n";
  s << "preprocess " << preprocessHash << "\n";
  s << "calibrator " << calibrationMethodName(calibrator.method);
  if (calibrator.method == CalibrationMethod::kPercentile)
    s << " " << fmtFloat(calibrator.percentile);
  s << "\n";
  s << "bins " << histogramBins << "\n";
  s << "images " << images << "\n";
  s << "tensors " << tensorAmax.size() << "\n";
  for (const auto& [name, amax] : tensorAmax)
    s << "tensor " << fmtFloat(amax) << " " << name << "\n";
  s << "# precision policy: layers kept out of INT8 are fp16\n";
  s << "layers " << layerPrecision.size() << "\n";
  for (const auto& [name, p] : layerPrecision)
    s << "layer " << precisionName(p) << " " << name << "\n";
  s << "# activation smoothing: a factor a channel, then the tensor\n";
  s << "smoothed " << smoothing.size() << "\n";
  for (const auto& [name, f] : smoothing) {
    s << "smooth " << f.size();
    for (float v : f) s << " " << fmtFloat(v);
    s << " " << name << "\n";
  }
  s << "end\n";
  return s.str();
}

Expected<CalibrationCache> CalibrationCache::parse(const std::string& text,
                                                   const std::string& source) {
  Reader r(text, source);
  CalibrationCache c;
  bool version1 = false;
  if (r.atEnd())
    return Status(ErrorCode::kCorruptFile, "calibration cache '" + source + "' is empty");
  {
    std::string magic, version;
    splitFirst(r.peek(), &magic, &version);
    if (magic != kMagic)
      return r.corrupt("not an EdgeInfer calibration cache (it does not start with '" +
                       std::string(kMagic) + "')");
    int64_t v = 0;
    if (!parseInt(version, &v)) return r.corrupt("bad format version '" + version + "'");
    version1 = v == 1;
    if (v != kFormatVersion && !version1)
      return Status(ErrorCode::kVersionMismatch,
                    "calibration cache '" + source + "' has format version " + version +
                        "; this SDK (" + edgeinfer::sdkVersion() + ") reads version " +
                        std::to_string(kFormatVersion) + ": calibrate again");
    r.advance();
  }
  EI_ASSIGN_OR_RETURN(c.sdkVersion, r.field("sdk"));
  EI_ASSIGN_OR_RETURN(c.modelHash, r.field("model"));
  if (c.modelHash.empty()) return r.corrupt("empty model hash");
  EI_ASSIGN_OR_RETURN(c.preprocessHash, r.field("preprocess"));
  if (c.preprocessHash.empty()) return r.corrupt("empty preprocessing hash");
  {
    EI_ASSIGN_OR_RETURN(std::string cal, r.field("calibrator"));
    std::string name, param;
    splitFirst(cal, &name, &param);
    auto m = parseCalibrationMethod(name);
    if (!m.ok()) return r.corrupt(m.status().message());
    c.calibrator.method = *m;
    if (*m == CalibrationMethod::kPercentile) {
      if (!parseDouble(param, &c.calibrator.percentile) || !validateCalibrator(c.calibrator).ok())
        return r.corrupt("bad percentile '" + param + "'");
    } else if (!param.empty()) {
      return r.corrupt("calibrator '" + name + "' takes no parameter, got '" + param + "'");
    }
  }
  {
    EI_ASSIGN_OR_RETURN(int64_t bins, r.count("bins", 1 << 24));
    if (bins < 1) return r.corrupt("bins must be positive");
    c.histogramBins = static_cast<int>(bins);
  }
  EI_ASSIGN_OR_RETURN(c.images, r.count("images", int64_t{1} << 40));
  EI_ASSIGN_OR_RETURN(int64_t tensors, r.count("tensors", int64_t{1} << 24));
  for (int64_t i = 0; i < tensors; ++i) {
    if (r.atEnd())
      return r.corrupt("the file ends after " + std::to_string(i) + " of " +
                       std::to_string(tensors) + " tensor lines (truncated?)");
    std::string key, rest, num, name;
    splitFirst(r.peek(), &key, &rest);
    if (key != "tensor")
      return r.corrupt("expected tensor line " + std::to_string(i + 1) + " of " +
                       std::to_string(tensors) + ", found '" + r.peek() + "'");
    splitFirst(rest, &num, &name);
    double amax = 0;
    if (!parseDouble(num, &amax) || !std::isfinite(amax) || amax < 0)
      return r.corrupt("amax '" + num + "' is not a finite number >= 0");
    if (name.empty()) return r.corrupt("tensor line without a name");
    if (!c.tensorAmax.emplace(name, static_cast<float>(amax)).second)
      return r.corrupt("tensor '" + name + "' appears twice");
    r.advance();
  }
  EI_ASSIGN_OR_RETURN(int64_t layers, r.count("layers", int64_t{1} << 24));
  for (int64_t i = 0; i < layers; ++i) {
    if (r.atEnd())
      return r.corrupt("the file ends after " + std::to_string(i) + " of " +
                       std::to_string(layers) + " layer lines (truncated?)");
    std::string key, rest, prec, name;
    splitFirst(r.peek(), &key, &rest);
    if (key != "layer")
      return r.corrupt("expected layer line " + std::to_string(i + 1) + " of " +
                       std::to_string(layers) + ", found '" + r.peek() + "'");
    splitFirst(rest, &prec, &name);
    Precision p = Precision::kInt8;
    if (prec == "int8")
      p = Precision::kInt8;
    else if (prec == "fp16")
      p = Precision::kFp16;
    else if (prec == "fp32")
      p = Precision::kFp32;
    else
      return r.corrupt("layer precision must be int8, fp16 or fp32, not '" + prec + "'");
    if (name.empty()) return r.corrupt("layer line without a name");
    if (!c.layerPrecision.emplace(name, p).second)
      return r.corrupt("layer '" + name + "' appears twice");
    r.advance();
  }
  if (!version1) {
    EI_ASSIGN_OR_RETURN(int64_t smoothed, r.count("smoothed", int64_t{1} << 24));
    for (int64_t i = 0; i < smoothed; ++i) {
      if (r.atEnd())
        return r.corrupt("the file ends after " + std::to_string(i) + " of " +
                         std::to_string(smoothed) + " smoothing lines (truncated?)");
      std::istringstream line(r.peek());
      std::string key;
      int64_t n = -1;
      line >> key >> n;
      if (key != "smooth")
        return r.corrupt("expected smoothing line " + std::to_string(i + 1) + " of " +
                         std::to_string(smoothed) + ", found '" + r.peek() + "'");
      if (!line || n < 1 || n > (int64_t{1} << 24))
        return r.corrupt("bad smoothing factor count in '" + r.peek() + "'");
      std::vector<float> f(static_cast<size_t>(n));
      for (float& v : f) {
        std::string num;
        double d = 0;
        if (!(line >> num) || !parseDouble(num, &d) || !std::isfinite(d) || d <= 0 ||
            !std::isfinite(static_cast<float>(d)) || static_cast<float>(d) <= 0.f)
          return r.corrupt("smoothing factors must be " + std::to_string(n) +
                           " finite numbers > 0, in '" + r.peek().substr(0, 80) + "'");
        v = static_cast<float>(d);
      }
      std::string name;
      std::getline(line >> std::ws, name);
      if (name.empty()) return r.corrupt("smoothing line without a tensor name");
      if (!c.smoothing.emplace(name, std::move(f)).second)
        return r.corrupt("tensor '" + name + "' is smoothed twice");
      r.advance();
    }
  }
  if (r.atEnd()) return r.corrupt("no 'end' line (truncated?)");
  if (r.peek() != "end") return r.corrupt("expected 'end', found '" + r.peek() + "'");
  r.advance();
  if (!r.atEnd()) return r.corrupt("unexpected text after 'end': '" + r.peek() + "'");
  return c;
}

Status CalibrationCache::save(const std::string& path) const {
  const std::string text = toText();
  // A temporary name of its own (two processes may write the same cache at once: each renames
  // a whole file over the path, the last one wins).
  std::string tmp = path + ".tmp.XXXXXX";
  const int fd = mkstemp(tmp.data());
  if (fd < 0)
    return Status(ErrorCode::kIoError,
                  "cannot open '" + path + ".tmp.*' for writing: " + std::strerror(errno));
  fchmod(fd, 0644);  // mkstemp's 0600 would make the cache private to its writer
  close(fd);
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) {
      std::remove(tmp.c_str());
      return Status(ErrorCode::kIoError, "cannot open '" + tmp + "' for writing");
    }
    f << text;
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      return Status(ErrorCode::kIoError, "writing '" + tmp + "' failed (disk full?)");
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(tmp.c_str());
    return Status(ErrorCode::kIoError, "cannot rename '" + tmp + "' to '" + path + "': " + why);
  }
  return Status::Ok();
}

Expected<CalibrationCache> CalibrationCache::load(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    const bool missing = errno == ENOENT;
    return Status(missing ? ErrorCode::kNotFound : ErrorCode::kIoError,
                  "cannot open calibration cache '" + path + "': " + std::strerror(errno));
  }
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad())
    return Status(ErrorCode::kIoError, "reading calibration cache '" + path + "' failed");
  return parse(ss.str(), path);
}

Status CalibrationCache::checkModel(const std::string& hash) const {
  if (hash == modelHash) return Status::Ok();
  return Status(ErrorCode::kInvalidArgument,
                "the calibration cache was made for another model (cache: model " + modelHash +
                    ", this model: " + hash + "): calibrate this model again");
}

std::vector<std::string> CalibrationCache::excludedLayers() const {
  std::vector<std::string> v;
  for (const auto& [name, p] : layerPrecision)
    if (p != Precision::kInt8) v.push_back(name);
  return v;
}

}  // namespace edgeinfer
