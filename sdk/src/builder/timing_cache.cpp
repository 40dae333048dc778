#include "builder/timing_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/byte_io.h"
#include "edgeinfer/engine.h"
#include "edgeinfer/logger.h"

namespace edgeinfer::builder {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kMagic[8] = {'E', 'I', 'T', 'C', 'A', 'C', 'H', 'E'};
constexpr size_t kFixedBytes = 8 + 4 + 4 + 4;           // magic, version, body length, CRC
constexpr uint64_t kMaxCacheBytes = uint64_t{1} << 30;  // far beyond any real cache

using bytes::crc32Of;
using bytes::getU32;
using bytes::putU32;

std::string errnoText(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

bool ranksBefore(const TacticTiming& a, const TacticTiming& b) {
  if (a.failed != b.failed) return !a.failed;
  if (!a.failed && a.medianMs != b.medianMs) return a.medianMs < b.medianMs;
  return a.tacticId < b.tacticId;
}

// ---- JSON <-> entries (no exceptions escape: every access is type-checked) ----

json entryToJson(const std::string& signature, const TimingEntry& e) {
  json tactics = json::array();
  for (const auto& t : e.table) {
    json jt;
    jt["id"] = t.tacticId;
    jt["workspace_bytes"] = t.workspaceBytes;
    jt["failed"] = t.failed;
    if (t.failed)
      jt["error"] = t.error;
    else
      jt["median_ms"] = t.medianMs;
    tactics.push_back(std::move(jt));
  }
  json j;
  j["signature"] = signature;
  j["chosen"] = e.chosen;
  j["tactics"] = std::move(tactics);
  if (!e.states.empty()) j["states"] = e.states;
  return j;
}

Status corrupt(const std::string& why) {
  return Status(ErrorCode::kCorruptFile, "the timing cache body is malformed: " + why);
}

Expected<TimingEntry> entryFromJson(const json& j, std::string* signature) {
  if (!j.is_object()) return corrupt("an entry is not an object");
  auto sig = j.find("signature");
  auto chosen = j.find("chosen");
  auto tactics = j.find("tactics");
  if (sig == j.end() || !sig->is_string()) return corrupt("an entry has no signature");
  *signature = sig->get<std::string>();
  const std::string where = " (signature '" + *signature + "')";
  if (chosen == j.end() || !chosen->is_string()) return corrupt("no chosen tactic" + where);
  if (tactics == j.end() || !tactics->is_array() || tactics->empty())
    return corrupt("no tactic table" + where);
  TimingEntry e;
  e.chosen = chosen->get<std::string>();
  std::set<std::string> ids;
  for (const auto& jt : *tactics) {
    if (!jt.is_object()) return corrupt("a tactic is not an object" + where);
    auto id = jt.find("id");
    auto ws = jt.find("workspace_bytes");
    auto failed = jt.find("failed");
    if (id == jt.end() || !id->is_string() || id->get<std::string>().empty())
      return corrupt("a tactic has no id" + where);
    if (ws == jt.end() || !ws->is_number_integer() || ws->get<int64_t>() < 0)
      return corrupt("bad workspace_bytes" + where);
    if (failed == jt.end() || !failed->is_boolean()) return corrupt("bad 'failed' flag" + where);
    TacticTiming t;
    t.tacticId = id->get<std::string>();
    t.workspaceBytes = ws->get<int64_t>();
    t.failed = failed->get<bool>();
    if (t.failed) {
      auto err = jt.find("error");
      if (err == jt.end() || !err->is_string())
        return corrupt("a failed tactic has no error" + where);
      t.error = err->get<std::string>();
    } else {
      auto ms = jt.find("median_ms");
      if (ms == jt.end() || !ms->is_number()) return corrupt("a tactic has no time" + where);
      t.medianMs = ms->get<double>();
      if (!std::isfinite(t.medianMs) || t.medianMs < 0) return corrupt("bad time" + where);
    }
    if (!ids.insert(t.tacticId).second)
      return corrupt("tactic '" + t.tacticId + "' is listed twice" + where);
    e.table.push_back(std::move(t));
  }
  sortTimingTable(e.table);
  // The chosen tactic must be the one the table says is fastest: anything else means the
  // file was edited or damaged in a way the checksum did not catch.
  if (e.chosen.empty() || e.chosen != fastestTactic(e.table))
    return corrupt("chosen tactic '" + e.chosen + "' is not the fastest in its table" + where);
  if (auto states = j.find("states"); states != j.end()) {
    if (!states->is_object()) return corrupt("'states' is not an object" + where);
    for (const auto& [id, state] : states->items()) {
      const auto row = std::find_if(e.table.begin(), e.table.end(),
                                    [&](const TacticTiming& t) { return t.tacticId == id; });
      if (row == e.table.end() || row->failed)
        return corrupt("a state for tactic '" + id + "', which is not a timed tactic" + where);
      if (!state.is_string() || state.get<std::string>().empty())
        return corrupt("the state of tactic '" + id + "' is not a string" + where);
      e.states[id] = state.get<std::string>();
    }
  }
  return e;
}

// ---- files ----

Expected<std::vector<uint8_t>> readAll(const std::string& path) {
  errno = 0;
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) {
    if (errno == ENOENT) return Status(ErrorCode::kNotFound, "no timing cache at '" + path + "'");
    return Status(ErrorCode::kIoError, errnoText("cannot open timing cache", path));
  }
  const std::streamoff size = f.tellg();
  if (size < 0) return Status(ErrorCode::kIoError, "cannot read timing cache '" + path + "'");
  if (static_cast<uint64_t>(size) > kMaxCacheBytes)
    return Status(ErrorCode::kCorruptFile, "the timing cache '" + path +
                                               "' is implausibly large (" + std::to_string(size) +
                                               " bytes)");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  f.seekg(0);
  if (size > 0 && !f.read(reinterpret_cast<char*>(bytes.data()), size))
    return Status(ErrorCode::kIoError, "cannot read timing cache '" + path + "'");
  return bytes;
}

/// An exclusive flock() on "<path>.lock", released on destruction. The sidecar is never
/// deleted: removing a lock file while another process waits on it would break the lock.
class FileLock {
 public:
  ~FileLock() {
    if (fd_ >= 0) ::close(fd_);  // closing releases the lock
  }
  Status acquire(const std::string& path, int op) {
    const std::string lockPath = path + ".lock";
    fd_ = ::open(lockPath.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) return Status(ErrorCode::kIoError, errnoText("cannot open lock file", lockPath));
    while (::flock(fd_, op) != 0) {
      if (errno == EINTR) continue;
      return Status(ErrorCode::kIoError, errnoText("cannot lock", lockPath));
    }
    return Status::Ok();
  }

 private:
  int fd_ = -1;
};

Status ensureParentDir(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  if (parent.empty()) return Status::Ok();
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec)
    return Status(ErrorCode::kIoError,
                  "cannot create directory '" + parent.string() + "': " + ec.message());
  return Status::Ok();
}

/// Writes `bytes` to a temporary file beside `path`, fsyncs it and renames it over `path`,
/// then fsyncs the directory so the rename itself survives a power cut.
Status writeAtomically(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::string tmpl = path + ".tmp.XXXXXX";
  const int fd = ::mkstemp(tmpl.data());
  if (fd < 0) return Status(ErrorCode::kIoError, errnoText("cannot create temporary file", tmpl));
  auto failWith = [&](const std::string& what) {
    Status s(ErrorCode::kIoError, errnoText(what, tmpl));
    ::close(fd);
    ::unlink(tmpl.c_str());
    return s;
  };
  if (::fchmod(fd, 0644) != 0) return failWith("cannot set permissions of");
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return failWith("cannot write");
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) return failWith("cannot fsync");
  if (::close(fd) != 0) {
    Status s(ErrorCode::kIoError, errnoText("cannot close", tmpl));
    ::unlink(tmpl.c_str());
    return s;
  }
  if (::rename(tmpl.c_str(), path.c_str()) != 0) {
    Status s(ErrorCode::kIoError, errnoText("cannot rename temporary file onto", path));
    ::unlink(tmpl.c_str());
    return s;
  }
  std::string dir = fs::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // best effort: some filesystems refuse fsync on directories
    ::close(dfd);
  }
  return Status::Ok();
}

bool isSafeKey(const std::string& key) {
  if (key.empty() || key == "." || key == ".." || key.size() > 200) return false;
  for (char c : key)
    if (c == '/' || c == '\\' || c == '\0' || static_cast<unsigned char>(c) < 0x20) return false;
  return true;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::string humanBytes(int64_t b) {
  char buf[32];
  if (b >= (int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else if (b >= 1024)
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(b));
  return buf;
}

}  // namespace

// ---------------------------------------------------------------------------------------
// DeviceKey, tables

std::string DeviceKey::toString() const {
  std::string safe;
  for (char c : gpuName) safe += (isalnum(static_cast<unsigned char>(c)) || c == '-') ? c : '_';
  if (safe.empty()) safe = "unknown-gpu";
  if (safe.size() > 64) safe.resize(64);
  // Library versions change kernels' timings and which tactics exist: hash them into the
  // key (FNV-1a, fields separated so "1"+"23" and "12"+"3" differ).
  uint32_t h = 2166136261u;
  for (const std::string* f : {&driver, &runtime, &cudnn, &cublas, &sdk}) {
    for (char c : *f + '\x1f') {
      h ^= static_cast<uint8_t>(c);
      h *= 16777619u;
    }
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "-sm%d%d-%dsm-%08x", ccMajor, ccMinor, smCount, h);
  return safe + buf;
}

DeviceKey DeviceKey::of(const CudaDeviceInfo& d) {
  DeviceKey k;
  k.gpuName = d.name;
  k.ccMajor = d.ccMajor;
  k.ccMinor = d.ccMinor;
  k.smCount = d.smCount;
  k.driver = std::to_string(d.driverVersion);
  k.runtime = std::to_string(d.runtimeVersion);
  k.cudnn = std::to_string(d.cudnnVersion);
  k.cublas = std::to_string(d.cublasVersion);
  k.sdk = sdkVersion();
  return k;
}

bool TacticTiming::operator==(const TacticTiming& o) const {
  return tacticId == o.tacticId && medianMs == o.medianMs && workspaceBytes == o.workspaceBytes &&
         failed == o.failed && error == o.error;
}

bool TimingEntry::operator==(const TimingEntry& o) const {
  return table == o.table && chosen == o.chosen && states == o.states;
}

void sortTimingTable(std::vector<TacticTiming>& table) {
  std::sort(table.begin(), table.end(), ranksBefore);
}

std::string fastestTactic(const std::vector<TacticTiming>& table) {
  const TacticTiming* best = nullptr;
  for (const auto& t : table)
    if (!t.failed && (!best || ranksBefore(t, *best))) best = &t;
  return best ? best->tacticId : std::string();
}

// ---------------------------------------------------------------------------------------
// Encoding

Expected<std::vector<uint8_t>> encodeTimingCache(const TimingCacheFile& file) {
  json body;
  body["device_key"] = file.deviceKey;
  body["sdk_version"] = file.sdkVersion;
  json entries = json::array();
  for (const auto& [sig, e] : file.entries) {  // std::map: sorted by signature
    for (const auto& t : e.table)
      if (!t.failed && (!std::isfinite(t.medianMs) || t.medianMs < 0))
        return Status(ErrorCode::kInvalidArgument, "tactic '" + t.tacticId + "' of '" + sig +
                                                       "' has a non-finite or negative time");
    TimingEntry sorted = e;
    sortTimingTable(sorted.table);
    entries.push_back(entryToJson(sig, sorted));
  }
  body["entries"] = std::move(entries);
  std::string text;
  try {
    text = body.dump(1);  // one space per level: diffable, and keys are sorted by nlohmann
  } catch (const json::exception& e) {
    return Status(ErrorCode::kInvalidArgument,
                  std::string("the timing cache cannot be serialised: ") + e.what());
  }
  std::vector<uint8_t> out;
  out.reserve(kFixedBytes + text.size());
  out.insert(out.end(), kMagic, kMagic + 8);
  putU32(out, kTimingCacheFormatVersion);
  putU32(out, static_cast<uint32_t>(text.size()));
  out.insert(out.end(), text.begin(), text.end());
  putU32(out, crc32Of(out.data(), out.size()));
  return out;
}

Expected<TimingCacheFile> decodeTimingCache(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (size == 0) return Status(ErrorCode::kCorruptFile, "the timing cache is empty");
  if (size < 8 && std::memcmp(p, kMagic, size) == 0)
    return Status(ErrorCode::kCorruptFile,
                  "the timing cache is truncated (" + std::to_string(size) + " bytes)");
  if (size < 8 || std::memcmp(p, kMagic, 8) != 0)
    return Status(ErrorCode::kCorruptFile, "not an EdgeInfer timing cache (bad magic bytes)");
  if (size < kFixedBytes)
    return Status(ErrorCode::kCorruptFile,
                  "the timing cache is truncated (" + std::to_string(size) + " bytes)");
  const uint32_t version = getU32(p + 8);
  if (version != kTimingCacheFormatVersion)
    return Status(ErrorCode::kVersionMismatch, "timing cache format version " +
                                                   std::to_string(version) + ", but this SDK (" +
                                                   sdkVersion() + ") reads version " +
                                                   std::to_string(kTimingCacheFormatVersion));
  const uint32_t bodyLen = getU32(p + 12);
  if (static_cast<uint64_t>(bodyLen) + kFixedBytes != size)
    return Status(ErrorCode::kCorruptFile, "the timing cache is truncated or has trailing bytes (" +
                                               std::to_string(size) + " bytes, body length " +
                                               std::to_string(bodyLen) + ")");
  if (crc32Of(p, size - 4) != getU32(p + size - 4))
    return Status(ErrorCode::kCorruptFile, "checksum mismatch: the timing cache is damaged");
  const json body = json::parse(p + 16, p + 16 + bodyLen, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object())
    return Status(ErrorCode::kCorruptFile, "the timing cache body is not valid JSON");
  TimingCacheFile f;
  f.formatVersion = version;
  auto key = body.find("device_key");
  auto sdk = body.find("sdk_version");
  auto entries = body.find("entries");
  if (key == body.end() || !key->is_string()) return corrupt("no device_key");
  if (sdk == body.end() || !sdk->is_string()) return corrupt("no sdk_version");
  if (entries == body.end() || !entries->is_array()) return corrupt("no entries array");
  f.deviceKey = key->get<std::string>();
  f.sdkVersion = sdk->get<std::string>();
  for (const auto& je : *entries) {
    std::string sig;
    EI_ASSIGN_OR_RETURN(TimingEntry e, entryFromJson(je, &sig));
    if (!f.entries.emplace(sig, std::move(e)).second)
      return corrupt("signature '" + sig + "' is listed twice");
  }
  return f;
}

Expected<TimingCacheFile> readTimingCacheFile(const std::string& path) {
  EI_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, readAll(path));
  auto f = decodeTimingCache(bytes.data(), bytes.size());
  if (!f.ok()) return f.status().withContext("timing cache '" + path + "'");
  return f;
}

Expected<std::string> defaultCacheRoot() {
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  if (xdg && xdg[0] == '/') return std::string(xdg) + "/edgeinfer";
  const char* home = std::getenv("HOME");
  if (home && home[0] != '\0') return std::string(home) + "/.cache/edgeinfer";
  return Status(ErrorCode::kNotFound,
                "neither XDG_CACHE_HOME nor HOME is set: give the timing cache a path");
}

Expected<std::string> defaultCachePath(const std::string& deviceKey) {
  if (!isSafeKey(deviceKey))
    return Status(ErrorCode::kInvalidArgument,
                  "device key '" + deviceKey + "' cannot name a cache directory");
  EI_ASSIGN_OR_RETURN(std::string root, defaultCacheRoot());
  return root + "/" + deviceKey + "/timing.cache";
}

// ---------------------------------------------------------------------------------------
// TimingCache

TimingCache::TimingCache(std::string deviceKey, TimingCacheOptions options)
    : deviceKey_(std::move(deviceKey)), options_(options) {}

Status TimingCache::checkCompatible(const TimingCacheFile& file, const std::string& path) const {
  if (file.deviceKey != deviceKey_)
    return Status(ErrorCode::kDeviceMismatch,
                  "timing cache '" + path + "' was recorded on device '" + file.deviceKey +
                      "', this device is '" + deviceKey_ +
                      "': timings from another device would pick the wrong tactics");
  if (file.sdkVersion != sdkVersion())
    return Status(ErrorCode::kVersionMismatch,
                  "timing cache '" + path + "' was written by EdgeInfer " + file.sdkVersion +
                      ", this is " + sdkVersion() + ": its kernels may have changed");
  return Status::Ok();
}

Status TimingCache::mergeFile(const TimingCacheFile& file, const std::string& path) {
  EI_RETURN_IF_ERROR(checkCompatible(file, path));
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [sig, e] : file.entries) entries_.emplace(sig, e);  // memory wins
  return Status::Ok();
}

Status TimingCache::load(const std::string& path) {
  auto f = readTimingCacheFile(path);
  Status s = f.ok() ? mergeFile(*f, path) : f.status();
  if (!s.ok()) log(Severity::kWarning, s.toString());
  return s;
}

Status TimingCache::loadOrIgnore(const std::string& path) {
  auto f = readTimingCacheFile(path);
  if (!f.ok() && f.status().code() == ErrorCode::kNotFound) {
    log(Severity::kInfo, "no timing cache at '" + path + "' yet: every layer will be timed");
    return Status::Ok();
  }
  if (!f.ok() && f.status().code() == ErrorCode::kIoError) {
    log(Severity::kWarning, f.status().toString());
    return f.status();
  }
  Status s = f.ok() ? mergeFile(*f, path) : f.status();
  if (s.ok()) {
    log(Severity::kInfo,
        "loaded " + std::to_string(f->entries.size()) + " timing(s) from '" + path + "'");
    return s;
  }
  if (options_.strict) {
    log(Severity::kWarning, s.toString());
    return s;
  }
  log(Severity::kWarning, s.toString() + " (ignoring it; every layer will be timed)");
  return Status::Ok();
}

Status TimingCache::save(const std::string& path) {
  EI_RETURN_IF_ERROR(ensureParentDir(path));
  FileLock lock;
  EI_RETURN_IF_ERROR(lock.acquire(path, LOCK_EX));
  auto disk = readTimingCacheFile(path);
  if (disk.ok()) {
    Status s = checkCompatible(*disk, path);
    if (s.code() == ErrorCode::kDeviceMismatch)
      return s.withContext("refusing to overwrite it (save to another path)");
    if (!s.ok()) {
      if (options_.strict) return s.withContext("refusing to overwrite it (strict)");
      log(Severity::kWarning, s.toString() + " (replacing it)");
    } else {
      std::lock_guard<std::mutex> g(mu_);
      for (const auto& [sig, e] : disk->entries) entries_.emplace(sig, e);  // memory wins
    }
  } else if (disk.status().code() != ErrorCode::kNotFound) {
    if (disk.status().code() == ErrorCode::kIoError || options_.strict)
      return disk.status().withContext("refusing to overwrite it");
    log(Severity::kWarning, disk.status().toString() + " (replacing it)");
  }
  EI_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, encodeTimingCache(snapshot()));
  return writeAtomically(path, bytes).withContext("saving timing cache");
}

std::optional<TimingEntry> TimingCache::find(const std::string& signature) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(signature);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

void TimingCache::insert(const std::string& signature, TimingEntry entry) {
  sortTimingTable(entry.table);
  entry.chosen = fastestTactic(entry.table);
  std::lock_guard<std::mutex> lock(mu_);
  entries_[signature] = std::move(entry);
}

bool TimingCache::setState(const std::string& signature, const std::string& tacticId,
                           std::string state) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = entries_.find(signature);
  if (it == entries_.end() || state.empty()) return false;
  const auto& table = it->second.table;
  const auto row = std::find_if(table.begin(), table.end(),
                                [&](const TacticTiming& t) { return t.tacticId == tacticId; });
  if (row == table.end() || row->failed) return false;
  it->second.states[tacticId] = std::move(state);
  return true;
}

size_t TimingCache::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

std::map<std::string, TimingEntry> TimingCache::entries() const {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_;
}

TimingCacheFile TimingCache::snapshot() const {
  TimingCacheFile f;
  f.deviceKey = deviceKey_;
  f.sdkVersion = sdkVersion();
  f.entries = entries();
  return f;
}

std::optional<TimingEntry> TimingCache::findFor(const std::string& signature,
                                                const std::vector<TacticCandidate>& candidates,
                                                std::string* stale) const {
  auto cached = find(signature);
  if (!cached) return std::nullopt;
  std::set<std::string> wanted, have;
  for (const auto& c : candidates) wanted.insert(c.id);
  for (const auto& t : cached->table) have.insert(t.tacticId);
  std::string why, missing;
  for (const auto& id : wanted)
    if (missing.empty() && !have.count(id))
      missing = "candidate '" + id + "' was never timed";  // it might be the fastest
  if (have == wanted) return cached;
  if (missing.empty()) {
    // Every candidate was timed, among others (a strict INT8 build after a timed one: its INT8
    // candidates without the FP16 ones): the fastest of these, from the same measurements.
    TimingEntry sub;
    for (const auto& t : cached->table)
      if (wanted.count(t.tacticId)) sub.table.push_back(t);
    for (const auto& [id, state] : cached->states)
      if (wanted.count(id)) sub.states[id] = state;
    sub.chosen = fastestTactic(sub.table);
    if (!sub.chosen.empty()) return sub;
    why = "none of the candidates ran when they were timed";
  }
  for (const auto& id : have)
    if (why.empty() && !wanted.count(id))
      why = "cached tactic '" + id + "' is no longer a candidate";
  if (why.empty()) why = missing;
  if (stale) *stale = why;
  return std::nullopt;
}

Expected<TimingEntry> TimingCache::lookupOrTime(const std::string& signature,
                                                const std::vector<TacticCandidate>& candidates,
                                                const TimerFn& timer, bool* fromCache) {
  if (fromCache) *fromCache = false;
  if (candidates.empty())
    return Status(ErrorCode::kInvalidArgument,
                  "no candidate tactics for layer signature '" + signature + "'");
  std::map<std::string, int64_t> wanted;  // id -> workspace, sorted, duplicates merged
  for (const auto& c : candidates) {
    if (c.id.empty())
      return Status(ErrorCode::kInvalidArgument,
                    "an empty tactic id among the candidates of '" + signature + "'");
    wanted.emplace(c.id, c.workspaceBytes);
  }

  std::string stale;  // why a cached entry cannot be used
  if (auto cached = findFor(signature, candidates, &stale)) {
    if (fromCache) *fromCache = true;
    return *cached;
  }
  if (options_.missIsError)
    return Status(ErrorCode::kNotFound, "timing cache miss for layer signature '" + signature +
                                            "'" +
                                            (stale.empty() ? std::string() : " (" + stale + ")") +
                                            " and cache misses are errors (reproducible build)");
  if (!stale.empty())
    log(Severity::kInfo, "re-timing layer signature '" + signature + "': " + stale);
  if (!timer)
    return Status(ErrorCode::kInvalidArgument, "no timer for layer signature '" + signature + "'");

  TimingEntry e;
  for (const auto& [id, ws] : wanted) {
    TacticTiming t;
    t.tacticId = id;
    t.workspaceBytes = ws;
    Expected<double> ms = timer(id);
    if (!ms.ok()) {
      t.failed = true;
      t.error = ms.status().toString();
    } else if (!std::isfinite(*ms) || *ms < 0) {
      t.failed = true;
      t.error = "the timer returned " + std::to_string(*ms) + " ms";
    } else {
      t.medianMs = *ms;
    }
    e.table.push_back(std::move(t));
  }
  sortTimingTable(e.table);
  e.chosen = fastestTactic(e.table);
  if (e.chosen.empty()) {
    std::string why;
    for (const auto& t : e.table) why += "\n  " + t.tacticId + ": " + t.error;
    return Status(ErrorCode::kUnsupported,
                  "no tactic could run for layer signature '" + signature + "':" + why);
  }
  {
    // Rows of other candidates an earlier entry holds stay (a strict INT8 build re-timing its
    // candidates must not drop the timed build's FP16 rows, or each would re-time the other).
    std::lock_guard<std::mutex> lock(mu_);
    TimingEntry merged = e;
    if (const auto old = entries_.find(signature); old != entries_.end()) {
      for (const auto& t : old->second.table)
        if (!wanted.count(t.tacticId)) merged.table.push_back(t);
      for (const auto& [id, state] : old->second.states)
        if (!wanted.count(id)) merged.states[id] = state;
      sortTimingTable(merged.table);
      merged.chosen = fastestTactic(merged.table);
    }
    entries_[signature] = std::move(merged);
  }
  return e;
}

// ---------------------------------------------------------------------------------------
// Overrides

Expected<TacticOverrides> TacticOverrides::loadFile(const std::string& path) {
  errno = 0;
  std::ifstream f(path, std::ios::binary);
  if (!f) {
    if (errno == ENOENT)
      return Status(ErrorCode::kNotFound, "no tactic overrides file '" + path + "'");
    return Status(ErrorCode::kIoError, errnoText("cannot open tactic overrides", path));
  }
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse(ss.str(), path);
}

Expected<TacticOverrides> TacticOverrides::parse(const std::string& text,
                                                 const std::string& sourceName) {
  TacticOverrides o;
  auto bad = [&](size_t line, const std::string& why) {
    return Status(ErrorCode::kInvalidArgument,
                  sourceName + (line ? ":" + std::to_string(line) : std::string()) + ": " + why);
  };
  const std::string body = trim(text);
  if (!body.empty() && body[0] == '{') {
    const json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object())
      return bad(0, "not a valid JSON object of \"layer-name\": \"tactic-id\"");
    for (const auto& [layer, tactic] : j.items()) {
      if (!tactic.is_string() || tactic.get<std::string>().empty())
        return bad(0, "the tactic for layer '" + layer + "' must be a non-empty string");
      if (layer.empty()) return bad(0, "an empty layer name");
      o.forced_[layer] = tactic.get<std::string>();
    }
    return o;
  }

  std::map<std::string, size_t> firstLine;
  std::istringstream in(text);
  std::string raw;
  for (size_t lineNo = 1; std::getline(in, raw); ++lineNo) {
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#') continue;
    std::string layer, rest;
    if (line[0] == '"') {
      const auto close = line.find('"', 1);
      if (close == std::string::npos) return bad(lineNo, "unterminated quoted layer name");
      layer = line.substr(1, close - 1);
      rest = trim(line.substr(close + 1));
      if (rest.empty() || rest[0] != '=')
        return bad(lineNo, "expected '=' after the quoted layer name, got '" + line + "'");
      rest = rest.substr(1);
    } else {
      const auto eq = line.find('=');
      if (eq == std::string::npos)
        return bad(lineNo, "expected 'layer-name = tactic-id', got '" + line + "'");
      layer = trim(line.substr(0, eq));
      rest = line.substr(eq + 1);
    }
    rest = trim(rest);
    const auto hash = rest.find('#');  // trailing comment
    if (hash != std::string::npos) rest = trim(rest.substr(0, hash));
    if (layer.empty()) return bad(lineNo, "empty layer name in '" + line + "'");
    if (rest.empty()) return bad(lineNo, "no tactic id for layer '" + layer + "'");
    if (rest.find_first_of(" \t=\"") != std::string::npos)
      return bad(lineNo, "tactic id '" + rest + "' for layer '" + layer +
                             "' holds a space, '=' or quote (quote the layer name if it has '=')");
    auto [it, inserted] = o.forced_.emplace(layer, rest);
    if (!inserted && it->second != rest)
      return bad(lineNo, "layer '" + layer + "' forced to '" + rest + "' but line " +
                             std::to_string(firstLine[layer]) + " forces '" + it->second + "'");
    if (inserted) firstLine[layer] = lineNo;
  }
  return o;
}

void TacticOverrides::set(const std::string& layerName, const std::string& tacticId) {
  forced_[layerName] = tacticId;
}

const std::string* TacticOverrides::find(const std::string& layerName) const {
  auto it = forced_.find(layerName);
  return it == forced_.end() ? nullptr : &it->second;
}

// ---------------------------------------------------------------------------------------
// Selection

Expected<TacticChoice> selectFastest(const std::string& signature,
                                     const std::vector<TacticCandidate>& candidates,
                                     TacticTimer& timer, TimingCache& cache,
                                     const TacticOverrides& overrides,
                                     const std::string& layerName) {
  TacticChoice choice;
  if (const std::string* forced = overrides.find(layerName)) {
    const bool known = std::any_of(candidates.begin(), candidates.end(),
                                   [&](const TacticCandidate& c) { return c.id == *forced; });
    if (!known) {
      std::string list;
      for (const auto& c : candidates) list += (list.empty() ? "" : ", ") + c.id;
      return Status(
          ErrorCode::kInvalidArgument,
          "tactic '" + *forced + "' forced for layer '" + layerName +
              "' is not a candidate for it (candidates: " + (list.empty() ? "none" : list) + ")");
    }
    log(Severity::kInfo, "layer '" + layerName + "': tactic '" + *forced + "' forced by override");
    choice.tacticId = *forced;
    choice.forced = true;
    if (auto cached = cache.find(signature)) {  // show the timings when we have them
      choice.entry = *cached;
      choice.fromCache = true;
    }
    return choice;
  }
  EI_ASSIGN_OR_RETURN(
      choice.entry,
      cache.lookupOrTime(
          signature, candidates, [&timer](const std::string& id) { return timer.timeMs(id); },
          &choice.fromCache));
  choice.tacticId = choice.entry.chosen;
  if (getLogLevel() >= Severity::kVerbose)  // formatting only when someone will read it
    log(Severity::kVerbose,
        formatTimingTable(choice.entry, "layer '" + layerName + "' [" + signature + "] " +
                                            (choice.fromCache ? "(from cache)" : "(timed)")));
  return choice;
}

std::string formatTimingTable(const TimingEntry& entry, const std::string& title) {
  size_t idWidth = 6;
  for (const auto& t : entry.table) idWidth = std::max(idWidth, t.tacticId.size());
  std::ostringstream os;
  if (!title.empty()) os << title << "\n";
  char line[96];
  os << "    " << std::string("tactic") << std::string(idWidth - 6, ' ');
  std::snprintf(line, sizeof line, " %12s %12s\n", "time (ms)", "workspace");
  os << line;
  for (const auto& t : entry.table) {
    os << "  " << (t.tacticId == entry.chosen ? "* " : "  ") << t.tacticId
       << std::string(idWidth - t.tacticId.size(), ' ');
    if (t.failed) {
      os << "       failed: " << t.error << "\n";
    } else {
      std::snprintf(line, sizeof line, " %12.4f %12s\n", t.medianMs,
                    humanBytes(t.workspaceBytes).c_str());
      os << line;
    }
  }
  return os.str();
}

// ---------------------------------------------------------------------------------------
// Tools

Status exportCache(const std::string& deviceKeyDirOrFile, const std::string& outPath) {
  std::error_code ec;
  const std::string src = fs::is_directory(deviceKeyDirOrFile, ec)
                              ? deviceKeyDirOrFile + "/timing.cache"
                              : deviceKeyDirOrFile;
  // No lock needed to read: saves replace the file by rename, so a reader sees a whole file.
  EI_ASSIGN_OR_RETURN(TimingCacheFile f, readTimingCacheFile(src));
  EI_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, encodeTimingCache(f));
  EI_RETURN_IF_ERROR(ensureParentDir(outPath));
  FileLock outLock;
  EI_RETURN_IF_ERROR(outLock.acquire(outPath, LOCK_EX));
  return writeAtomically(outPath, bytes).withContext("exporting timing cache");
}

Status mergeCacheFiles(const std::string& dst, const std::vector<std::string>& srcs, bool force) {
  if (srcs.empty()) return Status(ErrorCode::kInvalidArgument, "no timing caches to merge");
  std::vector<TimingCacheFile> files;
  for (const auto& s : srcs) {
    EI_ASSIGN_OR_RETURN(TimingCacheFile f, readTimingCacheFile(s));
    files.push_back(std::move(f));
  }
  // The device and SDK of the result: dst's when it exists, else the first source's.
  std::string key = files[0].deviceKey, sdk = files[0].sdkVersion, keyFrom = srcs[0];
  auto existing = readTimingCacheFile(dst);
  if (existing.ok()) {
    key = existing->deviceKey;
    sdk = existing->sdkVersion;
    keyFrom = dst;
  } else if (existing.status().code() != ErrorCode::kNotFound && !force) {
    return existing.status().withContext("merge destination (force, --force=1, replaces it)");
  }
  for (size_t i = 0; i < files.size(); ++i) {
    if (files[i].deviceKey != key) {
      Status s(ErrorCode::kDeviceMismatch, "'" + srcs[i] + "' is for device '" +
                                               files[i].deviceKey + "' but '" + keyFrom +
                                               "' is for '" + key + "'");
      if (!force) return s.withContext("refusing to mix devices (force, --force=1, merges anyway)");
      log(Severity::kWarning, s.toString() + ": merging anyway (forced)");
    }
    if (files[i].sdkVersion != sdk || sdk != sdkVersion()) {
      Status s(ErrorCode::kVersionMismatch, "'" + srcs[i] + "' was written by EdgeInfer " +
                                                files[i].sdkVersion + ", '" + keyFrom + "' by " +
                                                sdk + ", this is " + sdkVersion());
      if (!force)
        return s.withContext("refusing to mix SDK versions (force, --force=1, merges anyway)");
      log(Severity::kWarning, s.toString() + ": merging anyway (forced)");
    }
  }
  TimingCache cache(key);
  for (const auto& f : files)
    for (const auto& [sig, e] : f.entries) cache.insert(sig, e);  // later sources win
  if (force && existing.ok() && existing->sdkVersion != sdkVersion()) {
    // save() would replace an old file rather than merge it: fold its entries in first.
    TimingCache merged(key);
    for (const auto& [sig, e] : existing->entries) merged.insert(sig, e);
    for (const auto& [sig, e] : cache.entries()) merged.insert(sig, e);
    return merged.save(dst);
  }
  if (force && !existing.ok() && existing.status().code() != ErrorCode::kNotFound) {
    std::error_code ec;
    fs::remove(dst, ec);  // a damaged destination: replace it
  }
  return cache.save(dst);
}

Expected<std::vector<CacheListing>> listCacheDir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    return Status(ErrorCode::kNotFound, "no timing cache directory '" + dir + "'");
  std::vector<CacheListing> out;
  try {  // directory iteration can throw while advancing; nothing escapes the SDK
    for (const auto& d : fs::directory_iterator(dir, ec)) {
      if (!d.is_directory(ec)) continue;
      const std::string path = (d.path() / "timing.cache").string();
      if (!fs::exists(path, ec)) continue;
      CacheListing l;
      l.path = path;
      l.dirKey = d.path().filename().string();
      l.bytes = fs::file_size(path, ec);
      auto f = readTimingCacheFile(path);
      if (f.ok())
        l.file = std::move(f).value();
      else
        l.status = f.status();
      out.push_back(std::move(l));
    }
  } catch (const fs::filesystem_error& e) {
    return Status(ErrorCode::kIoError, "cannot list '" + dir + "': " + e.what());
  }
  if (ec) return Status(ErrorCode::kIoError, "cannot list '" + dir + "': " + ec.message());
  std::sort(out.begin(), out.end(),
            [](const CacheListing& a, const CacheListing& b) { return a.dirKey < b.dirKey; });
  return out;
}

}  // namespace edgeinfer::builder
