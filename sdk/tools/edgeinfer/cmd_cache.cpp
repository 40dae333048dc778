// `edgeinfer cache`: list, merge and export the per-device timing caches.
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "builder/timing_cache.h"
#include "cli.h"

namespace edgeinfer::cli {
namespace {

namespace tc = edgeinfer::builder;

const char* kCacheUsage = R"(usage:
  edgeinfer cache list [FILE | --dir DIR] [--verbose]
      list the timing caches under DIR (default: $XDG_CACHE_HOME/edgeinfer, else
      ~/.cache/edgeinfer), or the entries of one cache FILE (--verbose: every tactic table)
  edgeinfer cache merge DST SRC... [--force]
      merge caches into DST (created when missing; later sources win on a conflict).
      Caches of different devices or SDK versions are refused unless --force
  edgeinfer cache export DEVICE_KEY_DIR|DEVICE_KEY OUT
      copy the cache of one device (a directory, or a key under the default root) to OUT,
      checked and in canonical form, e.g. to seed other boards of the same kind
)";

/// --force is a flag (no value); --force=0/1 is accepted too.
Expected<bool> forceOption(const Args& a) {
  if (!a.has("force")) return false;
  const std::string v = a.get("force");
  if (v == "1" || v == "true" || v == "yes") return true;
  if (v == "0" || v == "false" || v == "no") return false;
  return Status(ErrorCode::kInvalidArgument, "--force takes no value, or 0/1 (got '" + v + "')");
}

std::string bestTime(const tc::TimingEntry& e) {
  for (const auto& t : e.table)
    if (t.tacticId == e.chosen && !t.failed) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.4f ms", t.medianMs);
      return buf;
    }
  return "-";
}

int listFile(const std::string& path, bool verbose) {
  auto f = tc::readTimingCacheFile(path);
  if (!f.ok()) return fail(f.status());
  std::cout << path << "\n  device key  " << f->deviceKey << "\n  sdk version " << f->sdkVersion
            << "\n  entries     " << f->entries.size() << "\n";
  for (const auto& [sig, e] : f->entries) {
    size_t failed = 0;
    for (const auto& t : e.table) failed += t.failed ? 1 : 0;
    std::cout << "\n"
              << sig << "\n  chosen " << e.chosen << " (" << bestTime(e) << "), " << e.table.size()
              << " tactic(s) timed, " << failed << " failed\n";
    if (verbose) std::cout << tc::formatTimingTable(e);
  }
  return 0;
}

int listDir(const std::string& dir) {
  auto l = tc::listCacheDir(dir);
  if (!l.ok()) return fail(l.status());
  if (l->empty()) {
    std::cout << "no timing caches under " << dir << "\n";
    return 0;
  }
  int rc = 0;
  for (const auto& c : *l) {
    std::cout << c.dirKey << "\n  " << c.path << " (" << c.bytes << " bytes)\n";
    if (!c.status.ok()) {
      std::cout << "  unusable: " << c.status.toString() << "\n";
      rc = 1;
      continue;
    }
    std::cout << "  " << c.file.entries.size() << " entries, EdgeInfer " << c.file.sdkVersion
              << "\n";
    if (c.file.deviceKey != c.dirKey)
      std::cout << "  note: recorded for device '" << c.file.deviceKey
                << "', not the directory's key\n";
    if (c.file.sdkVersion != sdkVersion())
      std::cout << "  note: written by another SDK version (this is " << sdkVersion()
                << "): builds ignore it\n";
  }
  return rc;
}

}  // namespace

int cmdCache(const Args& a) {
  const std::string sub = a.positional.empty() ? "" : a.positional[0];
  if (a.has("help") || sub.empty()) {
    std::cout << kCacheUsage;
    return sub.empty() && !a.has("help") ? 2 : 0;
  }
  const std::vector<std::string> rest(a.positional.begin() + 1, a.positional.end());
  if (sub == "list") {
    if (rest.size() > 1 || (rest.size() == 1 && a.has("dir")))
      return fail(Status(ErrorCode::kInvalidArgument, "cache list takes one FILE or --dir DIR"));
    if (rest.size() == 1) return listFile(rest[0], a.has("verbose"));
    std::string dir = a.get("dir");
    if (dir.empty()) {
      auto root = tc::defaultCacheRoot();
      if (!root.ok()) return fail(root.status());
      dir = *root;
      std::error_code ec;
      if (!std::filesystem::exists(dir, ec)) {  // nothing built yet: not an error
        std::cout << "no timing caches under " << dir << "\n";
        return 0;
      }
    }
    return listDir(dir);
  }
  if (sub == "merge") {
    auto force = forceOption(a);
    if (!force.ok()) return fail(force.status());
    if (rest.size() < 2)
      return fail(Status(ErrorCode::kInvalidArgument, "cache merge needs DST and SRC..."));
    const std::vector<std::string> srcs(rest.begin() + 1, rest.end());
    Status s = tc::mergeCacheFiles(rest[0], srcs, *force);
    if (!s.ok()) return fail(s);
    auto f = tc::readTimingCacheFile(rest[0]);
    if (!f.ok()) return fail(f.status());
    std::cout << rest[0] << ": " << f->entries.size() << " entries for " << f->deviceKey << "\n";
    return 0;
  }
  if (sub == "export") {
    if (rest.size() != 2)
      return fail(Status(ErrorCode::kInvalidArgument, "cache export needs DEVICE_KEY_DIR and OUT"));
    std::string src = rest[0];
    std::error_code ec;
    if (!std::filesystem::exists(src, ec)) {  // a bare device key: look under the default root
      auto p = tc::defaultCachePath(src);
      if (p.ok() && std::filesystem::exists(*p, ec)) src = *p;
    }
    Status s = tc::exportCache(src, rest[1]);
    if (!s.ok()) return fail(s);
    std::cout << "exported " << src << " to " << rest[1] << "\n";
    return 0;
  }
  std::cerr << "error: unknown cache command '" << sub << "'\n\n" << kCacheUsage;
  return 2;
}

}  // namespace edgeinfer::cli
