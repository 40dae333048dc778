// The timing cache: how long every candidate implementation ("tactic") of a layer took on
// one kind of device, so that a rebuild on the same kind of board skips the timing.
//
// Entries are keyed by the layer's signature (a canonical string the builder computes:
// op, attributes, shapes, dtypes, layouts) within a cache that belongs to ONE device key
// (GPU, compute capability, SM count, driver/runtime/cuDNN/cuBLAS and SDK versions). A
// cache recorded on another device, by another SDK version or in another format version
// is ignored with a warning that says why (TensorRT #2144: a hard error there annoys
// users); a damaged cache is always reported, never silently dropped (TensorRT #3566).
//
// File format (version 2), written like the engine format:
//
//   offset 0   "EITCACHE"                 8-byte magic
//   offset 8   u32 format version         (kTimingCacheFormatVersion)
//   offset 12  u32 body length B
//   offset 16  body: B bytes of JSON      {"device_key", "sdk_version", "entries": [...]}
//              (an entry: "signature", "chosen", "tactics" (the table) and, optionally,
//              "states": {tactic id: serialized state}; see TimingEntry)
//   last 4     u32 CRC-32 (zlib) of every byte before it
//
// All integers little-endian. Entries are written sorted by signature and every table
// sorted (fastest first, ties by tactic id, failed tactics last), so a rebuild whose every
// layer came from the cache writes a bit-identical file (TensorRT #4798).
//
// Saving merges with what is on disk under an flock() on "<file>.lock", then writes a
// temporary file in the same directory, fsyncs it and renames it over the cache: two
// builders on one board never lose each other's entries, and a reader never sees half a
// file.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "edgeinfer/status.h"

namespace edgeinfer::builder {

/// 2: candidates timed on pseudo-random activations and without programmatic dependent launch
/// (version 1's timings came from zeroed inputs, and from kernels overlapping their own
/// previous launch: they favoured some tactics; a version-1 cache is ignored with a warning).
inline constexpr uint32_t kTimingCacheFormatVersion = 2;

/// What a timing cache is filed under. The CUDA backend fills it from the device query.
struct DeviceKey {
  std::string gpuName;  ///< "NVIDIA Jetson AGX Orin"
  int ccMajor = 0, ccMinor = 0;
  int smCount = 0;
  std::string driver, runtime, cudnn, cublas, sdk;  ///< version strings

  /// A stable, filesystem-safe id: the sanitised GPU name, compute capability and SM count
  /// (readable, so `edgeinfer cache list` says which board a cache is for), then a short
  /// hash of the library and SDK versions, e.g. "NVIDIA_Jetson_AGX_Orin-sm87-16sm-1a2b3c4d".
  std::string toString() const;

  /// The key of a queried GPU, with this SDK's version.
  static DeviceKey of(const CudaDeviceInfo& device);
};

/// One tactic's measurement.
struct TacticTiming {
  std::string tacticId;
  double medianMs = 0.0;       ///< meaningless when failed
  int64_t workspaceBytes = 0;  ///< scratch memory the tactic needs
  bool failed = false;         ///< the tactic failed or is unsupported for this layer
  std::string error;           ///< why it failed (empty otherwise)

  bool operator==(const TacticTiming& o) const;
};

/// What the cache stores per layer signature.
struct TimingEntry {
  /// Sorted: successful tactics by (time, id), then failed ones by id.
  std::vector<TacticTiming> table;
  std::string chosen;  ///< the fastest successful tactic
  /// Tactic id -> Tactic::serializedState() of a tactic an engine was built with (a cuDNN
  /// execution plan's JSON). A rebuild restores the tactic from it instead of preparing it
  /// again: faster (no kernel compilation) and bit-identical (cuDNN's JSON of a freshly
  /// finalized plan differs from build to build). Only ids of successful table rows.
  std::map<std::string, std::string> states;

  bool operator==(const TimingEntry& o) const;
};

/// Sorts a table into the canonical order (see TimingEntry::table).
void sortTimingTable(std::vector<TacticTiming>& table);
/// The fastest successful tactic of a sorted table (ties: lower tactic id), or "" if none.
std::string fastestTactic(const std::vector<TacticTiming>& table);

/// A tactic the builder may pick for a layer. Converts from a plain id for convenience.
struct TacticCandidate {
  TacticCandidate(std::string tacticId,
                  int64_t workspace = 0)  // NOLINT(google-explicit-constructor)
      : id(std::move(tacticId)), workspaceBytes(workspace) {}
  TacticCandidate(const char* tacticId)  // NOLINT(google-explicit-constructor)
      : id(tacticId) {}
  std::string id;
  int64_t workspaceBytes = 0;
};

/// Times one tactic: returns its median time in milliseconds, or an error when the tactic
/// cannot run for this layer (that tactic is then recorded as failed, not chosen).
using TimerFn = std::function<Expected<double>(const std::string& tacticId)>;

struct TimingCacheOptions {
  /// A lookup that finds no usable entry fails with kNotFound naming the layer signature
  /// instead of timing (reproducible builds: every tactic must come from the cache).
  bool missIsError = false;
  /// loadOrIgnore() returns the problem with a foreign, old or damaged file instead of
  /// ignoring it, and save() refuses to replace an old or damaged file.
  bool strict = false;
};

/// The decoded contents of a cache file, whatever device it was recorded on.
struct TimingCacheFile {
  uint32_t formatVersion = kTimingCacheFormatVersion;
  std::string sdkVersion;
  std::string deviceKey;
  std::map<std::string, TimingEntry> entries;  ///< by layer signature
};

/// Serialises `file` (its formatVersion is ignored: always the current one). Fails with
/// kInvalidArgument when a string is not valid UTF-8 or a time is not finite.
Expected<std::vector<uint8_t>> encodeTimingCache(const TimingCacheFile& file);
/// Checks, in order: size, magic, format version, checksum, JSON, schema. Does not check
/// the device or SDK version (the caller decides; see TimingCache::load).
Expected<TimingCacheFile> decodeTimingCache(const void* data, size_t size);
/// Reads and decodes `path`: kNotFound when it does not exist, kIoError when unreadable.
Expected<TimingCacheFile> readTimingCacheFile(const std::string& path);

/// "$XDG_CACHE_HOME/edgeinfer" (an absolute XDG_CACHE_HOME only, per the XDG spec), else
/// "$HOME/.cache/edgeinfer"; kNotFound when neither variable is usable.
Expected<std::string> defaultCacheRoot();
/// "<defaultCacheRoot()>/<deviceKey>/timing.cache"; kInvalidArgument for a key that is not
/// a single safe path component.
Expected<std::string> defaultCachePath(const std::string& deviceKey);

/// The timings of one device. Lookups, inserts, load and save may be called from several
/// threads (entries are guarded by a mutex); set the options before sharing it.
class TimingCache {
 public:
  explicit TimingCache(std::string deviceKey, TimingCacheOptions options = {});
  TimingCache(const TimingCache&) = delete;
  TimingCache& operator=(const TimingCache&) = delete;

  const std::string& deviceKey() const { return deviceKey_; }
  const TimingCacheOptions& options() const { return options_; }
  void setOptions(const TimingCacheOptions& o) { options_ = o; }

  /// Explicit load: merges the entries of `path` into this cache (entries already in memory
  /// win). Any problem is logged as a warning AND returned: kNotFound (no file), kIoError,
  /// kCorruptFile, kVersionMismatch (format or SDK version), kDeviceMismatch. On error
  /// nothing is merged.
  Status load(const std::string& path);
  /// What a build calls: a missing file is fine (first build), and a foreign, old or damaged
  /// file is ignored with a warning that says why, unless options().strict, in which case the
  /// problem is returned. An unreadable file is always an error.
  Status loadOrIgnore(const std::string& path);
  /// Merges this cache with the file on disk (entries in memory win on conflict) under a
  /// file lock, writes the result atomically and keeps the union in memory. Creates missing
  /// directories. Refuses (kDeviceMismatch) to replace a file of another device; replaces an
  /// old or damaged file with a warning (strict: refuses).
  Status save(const std::string& path);

  std::optional<TimingEntry> find(const std::string& signature) const;
  /// The entry of `signature` when it was timed over `candidates` (what lookupOrTime would
  /// return without timing): over exactly these, or over more (the entry cut down to these
  /// rows, its fastest among them chosen: a strict INT8 build reuses the timed build's INT8
  /// rows); otherwise none (a candidate never timed, or none of them ran), and `stale`
  /// (optional) says why an entry that exists cannot be used.
  std::optional<TimingEntry> findFor(const std::string& signature,
                                     const std::vector<TacticCandidate>& candidates,
                                     std::string* stale = nullptr) const;
  /// Adds or replaces an entry; the table is sorted and `chosen` recomputed if empty.
  void insert(const std::string& signature, TimingEntry entry);
  /// Records the serialized state of a tactic of an existing entry (see TimingEntry::states);
  /// false when there is no such entry or the tactic is not a successful row of its table.
  bool setState(const std::string& signature, const std::string& tacticId, std::string state);
  size_t size() const;
  /// A snapshot of every entry, by signature.
  std::map<std::string, TimingEntry> entries() const;
  /// The entries as a file of this device and SDK (what save() would write, before merging).
  TimingCacheFile snapshot() const;

  /// Returns the cached entry for `signature` when it exists and was timed over exactly
  /// `candidates`; otherwise (a miss, or a stale entry: logged once with the reason) times
  /// every candidate with `timer`, stores the entry and returns it. Candidates whose timer
  /// fails are recorded as failed. Errors: kNotFound naming the signature when
  /// options().missIsError and there is no usable entry; kUnsupported when every candidate
  /// failed; kInvalidArgument for no candidates. `fromCache` (optional) says which.
  Expected<TimingEntry> lookupOrTime(const std::string& signature,
                                     const std::vector<TacticCandidate>& candidates,
                                     const TimerFn& timer, bool* fromCache = nullptr);

 private:
  Status mergeFile(const TimingCacheFile& file, const std::string& path);
  Status checkCompatible(const TimingCacheFile& file, const std::string& path) const;

  std::string deviceKey_;
  TimingCacheOptions options_;
  mutable std::mutex mu_;
  std::map<std::string, TimingEntry> entries_;
};

/// Tactics the user forces per layer name, read from a simple file:
///
///   # comment
///   conv1 = cudnn_implicit_gemm
///   "layer/with = sign" = winograd_4x4      (quotes around a name that holds '=' or '#')
///
/// or a JSON object {"conv1": "cudnn_implicit_gemm", ...} when the file starts with '{'.
class TacticOverrides {
 public:
  /// kNotFound when the file is missing; kInvalidArgument "FILE:LINE: ..." for a bad line or
  /// a layer forced twice to different tactics.
  static Expected<TacticOverrides> loadFile(const std::string& path);
  static Expected<TacticOverrides> parse(const std::string& text,
                                         const std::string& sourceName = "<overrides>");

  void set(const std::string& layerName, const std::string& tacticId);
  /// The forced tactic for `layerName`, or nullptr.
  const std::string* find(const std::string& layerName) const;
  bool empty() const { return forced_.empty(); }
  size_t size() const { return forced_.size(); }
  const std::map<std::string, std::string>& all() const { return forced_; }

 private:
  std::map<std::string, std::string> forced_;
};

/// Times one candidate on the device. The CUDA backend implements it with events around
/// repeated launches; tests substitute a fake.
class TacticTimer {
 public:
  virtual ~TacticTimer() = default;
  /// Median time of `tacticId` in milliseconds, or why it cannot run for this layer.
  virtual Expected<double> timeMs(const std::string& tacticId) = 0;
};

/// The outcome of selectFastest().
struct TacticChoice {
  std::string tacticId;
  TimingEntry entry;  ///< the sorted table (empty when forced with no cached timings)
  bool forced = false;
  bool fromCache = false;
};

/// Picks the tactic for one layer: a tactic forced for `layerName` in `overrides` wins (an
/// error, kInvalidArgument, if it is not among `candidates`); else the cached entry when it
/// is still valid; else every candidate is timed and the result stored in `cache`.
Expected<TacticChoice> selectFastest(const std::string& signature,
                                     const std::vector<TacticCandidate>& candidates,
                                     TacticTimer& timer, TimingCache& cache,
                                     const TacticOverrides& overrides,
                                     const std::string& layerName);

/// The sorted table of one layer for verbose build logs, chosen tactic marked with '*'.
std::string formatTimingTable(const TimingEntry& entry, const std::string& title = "");

/// Copies the cache of a device-key directory (or a cache file) to `outPath`, after checking
/// it decodes; the copy is re-encoded, so it is canonical.
Status exportCache(const std::string& deviceKeyDirOrFile, const std::string& outPath);

/// Merges the caches `srcs` into `dst` (created when missing), later sources winning on
/// conflicts. Refuses (kDeviceMismatch / kVersionMismatch) to mix device keys or SDK versions
/// unless `force`; a damaged source is an error naming the file.
Status mergeCacheFiles(const std::string& dst, const std::vector<std::string>& srcs,
                       bool force = false);

/// One cache found under a cache root.
struct CacheListing {
  std::string path;
  std::string dirKey;  ///< the device-key directory it sits in
  Status status;       ///< why it cannot be read, if so
  TimingCacheFile file;
  uint64_t bytes = 0;
};
/// Every "<dir>/<key>/timing.cache", sorted by key. kNotFound when `dir` does not exist.
Expected<std::vector<CacheListing>> listCacheDir(const std::string& dir);

}  // namespace edgeinfer::builder
