// The timing cache and tactic selection: round trip, concurrent writers (threads and
// processes), every way a file can be damaged, foreign/old caches, overrides, determinism.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <thread>

#include "builder/tactic.h"
#include "builder/timing_cache.h"
#include "edgeinfer/engine.h"
#include "edgeinfer/logger.h"
#include "graph/graph.h"
#include "log_capture.h"
#include "test_model.h"

namespace edgeinfer::builder {
namespace {

const char* kKey = "Test_GPU-sm87-16sm-00000000";
const char* kOtherKey = "Other_GPU-sm90-132sm-11111111";

using test::LogCapture;

/// A timer that answers from a table and counts calls; ids missing from the table fail.
class FakeTimer : public TacticTimer {
 public:
  explicit FakeTimer(std::map<std::string, double> ms) : ms_(std::move(ms)) {}
  Expected<double> timeMs(const std::string& id) override {
    ++calls;
    auto it = ms_.find(id);
    if (it == ms_.end()) return Status(ErrorCode::kUnsupported, "tactic " + id + " cannot run");
    return it->second;
  }
  int calls = 0;

 private:
  std::map<std::string, double> ms_;
};

TimingEntry entry(std::map<std::string, double> ms) {
  TimingEntry e;
  for (const auto& [id, t] : ms) {
    TacticTiming tt;
    tt.tacticId = id;
    tt.medianMs = t;
    tt.workspaceBytes = 1024;
    e.table.push_back(tt);
  }
  sortTimingTable(e.table);
  e.chosen = fastestTactic(e.table);
  return e;
}

std::vector<uint8_t> readBytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}
void writeBytes(const std::string& path, const std::vector<uint8_t>& b) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// A valid file for `key` with two entries.
std::vector<uint8_t> sampleFile(const std::string& key = kKey,
                                const std::string& sdk = sdkVersion()) {
  TimingCacheFile f;
  f.deviceKey = key;
  f.sdkVersion = sdk;
  f.entries["Conv|3x3|fp16|NCHW|1x64x56x56"] = entry({{"implicit_gemm", 0.25}, {"winograd", 0.5}});
  f.entries["Gemm|fp16|256x256"] = entry({{"cublaslt_1", 0.125}});
  auto b = encodeTimingCache(f);
  EXPECT_TRUE(b.ok()) << b.status().toString();
  return b.ok() ? *b : std::vector<uint8_t>();
}

/// Frames `body` as a cache file with a valid checksum (to reach the JSON checks).
std::vector<uint8_t> frame(const std::string& body, uint32_t version = kTimingCacheFormatVersion) {
  std::vector<uint8_t> b = {'E', 'I', 'T', 'C', 'A', 'C', 'H', 'E'};
  auto put = [&](uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
  };
  put(version);
  put(static_cast<uint32_t>(body.size()));
  b.insert(b.end(), body.begin(), body.end());
  put(static_cast<uint32_t>(crc32(0L, b.data(), static_cast<uInt>(b.size()))));
  return b;
}

// ---------------------------------------------------------------------------------------
// Positive

// The layer signature keys timings: an INT8 layer's two epilogue roundings are timed apart,
// the bit-exact one under the signature INT8 layers had before the fast rounding existed, and
// other precisions ignore the option.
TEST(TimingCache, Int8RoundingsHaveTheirOwnSignatures) {
  graph::Graph g;
  graph::Node n;
  n.name = "conv";
  n.opType = "Conv";
  n.inputs = {"X"};
  n.outputs = {"Y"};
  LayerContext l;
  l.node = &n;
  l.graph = &g;
  l.inputShapes = {Shape{1, 8, 4, 4}};
  l.inputTypes = {DataType::kFloat32};
  l.outputShapes = {Shape{1, 8, 4, 4}};
  l.outputTypes = {DataType::kFloat32};
  l.inputScales = {0.1f};
  const std::string exactBefore = l.signature(Precision::kInt8);
  l.int8BitExact = true;
  const std::string exact = l.signature(Precision::kInt8);
  l.int8BitExact = false;
  const std::string fast = l.signature(Precision::kInt8);
  EXPECT_NE(fast, exact);
  EXPECT_EQ(exactBefore, fast);  // the default is the fast rounding
  EXPECT_EQ(exact.find("int8-fast"), std::string::npos) << exact;
  EXPECT_NE(fast.find("int8-fast"), std::string::npos) << fast;
  for (Precision p : {Precision::kFp16, Precision::kFp32}) {
    const std::string a = l.signature(p);
    l.int8BitExact = true;
    EXPECT_EQ(l.signature(p), a) << precisionName(p);
    l.int8BitExact = false;
  }
}

TEST(TimingCache, RoundTripSaveLoad) {
  test::TempDir dir;
  const std::string path = dir.file("dev/timing.cache");  // parent created by save
  TimingCache a(kKey);
  a.insert("sigA", entry({{"t1", 1.5}, {"t2", 0.75}}));
  TimingEntry withFail = entry({{"ok", 2.0}});
  withFail.table.push_back({"broken", 0, 4096, true, "Unsupported: no fp16"});
  a.insert("sigB", withFail);
  ASSERT_TRUE(a.save(path).ok());

  TimingCache b(kKey);
  Status s = b.load(path);
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(b.entries(), a.entries());
  ASSERT_TRUE(b.find("sigA").has_value());
  EXPECT_EQ(b.find("sigA")->chosen, "t2");
  EXPECT_EQ(b.find("sigB")->table.back().tacticId, "broken");
  EXPECT_TRUE(b.find("sigB")->table.back().failed);
  EXPECT_EQ(b.find("sigB")->table.back().error, "Unsupported: no fp16");
}

TEST(TimingCache, TacticStatesRoundTripAndBelongToTimedTactics) {
  test::TempDir dir;
  const std::string path = dir.file("timing.cache");
  TimingCache a(kKey);
  TimingEntry e = entry({{"t1", 1.5}, {"t2", 0.75}});
  e.table.push_back({"broken", 0, 0, true, "no"});
  a.insert("sig", e);
  EXPECT_TRUE(a.setState("sig", "t2", "{\"plan\": \"\\u0000 binary-ish \xc3\xa9\"}"));
  EXPECT_FALSE(a.setState("sig", "broken", "x")) << "a failed tactic has no state";
  EXPECT_FALSE(a.setState("sig", "t9", "x")) << "not in the table";
  EXPECT_FALSE(a.setState("other", "t2", "x")) << "no such entry";
  EXPECT_FALSE(a.setState("sig", "t1", "")) << "an empty state is no state";
  ASSERT_TRUE(a.save(path).ok());
  TimingCache b(kKey);
  ASSERT_TRUE(b.load(path).ok());
  EXPECT_EQ(b.entries(), a.entries());
  ASSERT_EQ(b.find("sig")->states.size(), 1u);
  EXPECT_EQ(b.find("sig")->states.at("t2"), a.find("sig")->states.at("t2"));
  // Saving again without changes writes the same bytes.
  auto first = readTimingCacheFile(path);
  ASSERT_TRUE(b.save(path).ok());
  auto second = readTimingCacheFile(path);
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(encodeTimingCache(*first).value(), encodeTimingCache(*second).value());
}

void saveManyDisjoint(const std::string& path, const std::string& worker, int n, bool* ok) {
  *ok = true;
  for (int i = 0; i < n; ++i) {
    // A fresh cache holding only this one entry: without the merge under the lock, every
    // save would wipe what the other writer added.
    TimingCache c(kKey);
    c.insert(worker + "-" + std::to_string(i), entry({{"t", 0.001 * (i + 1)}}));
    if (!c.save(path).ok()) *ok = false;
  }
}

TEST(TimingCache, ConcurrentThreadsMergeDisjointEntries) {
  test::TempDir dir;
  const std::string path = dir.file("timing.cache");
  constexpr int kN = 40;
  bool ok1 = false, ok2 = false;
  std::thread t1(saveManyDisjoint, path, "threadA", kN, &ok1);
  std::thread t2(saveManyDisjoint, path, "threadB", kN, &ok2);
  t1.join();
  t2.join();
  EXPECT_TRUE(ok1 && ok2);
  auto f = readTimingCacheFile(path);
  ASSERT_TRUE(f.ok()) << f.status().toString();
  EXPECT_EQ(f->entries.size(), 2u * kN);
  for (int i = 0; i < kN; ++i) {
    EXPECT_TRUE(f->entries.count("threadA-" + std::to_string(i)));
    EXPECT_TRUE(f->entries.count("threadB-" + std::to_string(i)));
  }
  // Nothing left behind but the cache and its lock.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    ++files;
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == "timing.cache" || name == "timing.cache.lock") << name;
  }
  EXPECT_EQ(files, 2);
}

TEST(TimingCache, ConcurrentProcessesMergeDisjointEntries) {
  test::TempDir dir;
  const std::string path = dir.file("timing.cache");
  constexpr int kN = 40;
  std::vector<pid_t> kids;
  for (const char* worker : {"procA", "procB"}) {
    const pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      bool ok = false;
      saveManyDisjoint(path, worker, kN, &ok);
      _exit(ok ? 0 : 1);
    }
    kids.push_back(pid);
  }
  for (pid_t pid : kids) {
    int st = 0;
    ASSERT_EQ(waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  auto f = readTimingCacheFile(path);
  ASSERT_TRUE(f.ok()) << f.status().toString();
  EXPECT_EQ(f->entries.size(), 2u * kN);
  for (int i = 0; i < kN; ++i) {
    EXPECT_TRUE(f->entries.count("procA-" + std::to_string(i)));
    EXPECT_TRUE(f->entries.count("procB-" + std::to_string(i)));
  }
}

TEST(TimingCache, FullyCachedRebuildIsBitIdentical) {
  test::TempDir dir;
  const std::string path = dir.file("timing.cache");
  FakeTimer timer({{"a", 0.3}, {"b", 0.1}, {"c", 0.1}, {"d", 1.0 / 3.0}});
  TacticOverrides none;
  {
    TimingCache c(kKey);
    // Inserted out of order: the file must come out sorted anyway.
    for (const char* sig : {"zeta", "alpha", "mid"})
      ASSERT_TRUE(selectFastest(sig, {"d", "c", "b", "a"}, timer, c, none, sig).ok());
    ASSERT_TRUE(c.save(path).ok());
  }
  const auto first = readBytes(path);
  timer.calls = 0;
  {
    TimingCache c(kKey);
    ASSERT_TRUE(c.loadOrIgnore(path).ok());
    for (const char* sig : {"mid", "zeta", "alpha"}) {
      auto r = selectFastest(sig, {"a", "b", "c", "d"}, timer, c, none, sig);
      ASSERT_TRUE(r.ok());
      EXPECT_TRUE(r->fromCache);
      EXPECT_EQ(r->tacticId, "b");  // equal time with "c": the lower id wins
    }
    ASSERT_TRUE(c.save(path).ok());
  }
  EXPECT_EQ(timer.calls, 0);
  EXPECT_EQ(readBytes(path), first);
  // Encoding a decoded file gives the same bytes, too.
  auto f = decodeTimingCache(first.data(), first.size());
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*encodeTimingCache(*f), first);
}

TEST(TimingCache, DefaultPathUsesXdgThenHome) {
  const char* oldXdg = std::getenv("XDG_CACHE_HOME");
  const char* oldHome = std::getenv("HOME");
  const std::string savedXdg = oldXdg ? oldXdg : "", savedHome = oldHome ? oldHome : "";
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("HOME", "/home/u", 1);
  EXPECT_EQ(*defaultCachePath(kKey), std::string("/xdg/edgeinfer/") + kKey + "/timing.cache");
  setenv("XDG_CACHE_HOME", "relative/ignored", 1);  // the XDG spec: only absolute paths
  EXPECT_EQ(*defaultCachePath(kKey),
            std::string("/home/u/.cache/edgeinfer/") + kKey + "/timing.cache");
  unsetenv("XDG_CACHE_HOME");
  EXPECT_EQ(*defaultCacheRoot(), "/home/u/.cache/edgeinfer");
  unsetenv("HOME");
  EXPECT_EQ(defaultCacheRoot().status().code(), ErrorCode::kNotFound);
  if (oldXdg) setenv("XDG_CACHE_HOME", savedXdg.c_str(), 1);
  if (oldHome) setenv("HOME", savedHome.c_str(), 1);
}

TEST(TimingCache, DeviceKeyIsStableAndFilesystemSafe) {
  DeviceKey k{"NVIDIA Jetson AGX Orin/64GB", 8, 7, 16, "540.4", "12.6", "9.3.0", "12.6.1", "0.1.0"};
  const std::string s = k.toString();
  EXPECT_EQ(s, k.toString());
  EXPECT_EQ(s.rfind("NVIDIA_Jetson_AGX_Orin_64GB-sm87-16sm-", 0), 0u) << s;
  EXPECT_EQ(s.find('/'), std::string::npos);
  EXPECT_TRUE(defaultCachePath(s).ok() ||
              defaultCacheRoot().status().code() == ErrorCode::kNotFound);
  DeviceKey newerCudnn = k;
  newerCudnn.cudnn = "9.4.0";
  EXPECT_NE(newerCudnn.toString(), s);
  DeviceKey shifted = k;  // "540.4"+"12.6" vs "540.41"+"2.6": fields must not run together
  shifted.driver = "540.41";
  shifted.runtime = "2.6";
  EXPECT_NE(shifted.toString(), s);
  EXPECT_EQ(DeviceKey{}.toString().rfind("unknown-gpu-sm00-0sm-", 0), 0u);
}

TEST(Tactic, FakeTimerPicksFastest) {
  TimingCache c(kKey);
  FakeTimer timer({{"slow", 3.0}, {"fast", 0.5}, {"mid", 1.0}, {"fast2", 0.5}});
  auto r = selectFastest("sig", {"slow", "mid", "fast2", "fast"}, timer, c, {}, "conv1");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->tacticId, "fast");  // ties broken by id: "fast" < "fast2"
  EXPECT_FALSE(r->fromCache);
  EXPECT_FALSE(r->forced);
  ASSERT_EQ(r->entry.table.size(), 4u);
  EXPECT_EQ(r->entry.table[0].tacticId, "fast");
  EXPECT_EQ(r->entry.table[1].tacticId, "fast2");
  EXPECT_EQ(r->entry.table[2].tacticId, "mid");
  EXPECT_EQ(r->entry.table[3].tacticId, "slow");
  EXPECT_EQ(timer.calls, 4);
  ASSERT_TRUE(c.find("sig").has_value());
  EXPECT_EQ(*c.find("sig"), r->entry);
}

TEST(Tactic, CacheHitSkipsTiming) {
  TimingCache c(kKey);
  FakeTimer timer({{"a", 1.0}, {"b", 2.0}});
  ASSERT_TRUE(selectFastest("sig", {"a", "b"}, timer, c, {}, "l").ok());
  timer.calls = 0;
  auto r = selectFastest("sig", {"b", "a"}, timer, c, {}, "l");  // order does not matter
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->fromCache);
  EXPECT_EQ(r->tacticId, "a");
  EXPECT_EQ(timer.calls, 0);
}

TEST(Tactic, FailedTacticsRecorded) {
  TimingCache c(kKey);
  FakeTimer timer({{"ok", 2.0}});  // "bad" and "worse" fail
  auto r = selectFastest("sig", {"worse", {"ok", 512}, "bad"}, timer, c, {}, "l");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tacticId, "ok");
  ASSERT_EQ(r->entry.table.size(), 3u);
  EXPECT_EQ(r->entry.table[0].tacticId, "ok");
  EXPECT_EQ(r->entry.table[0].workspaceBytes, 512);
  EXPECT_TRUE(r->entry.table[1].failed);
  EXPECT_EQ(r->entry.table[1].tacticId, "bad");
  EXPECT_NE(r->entry.table[1].error.find("bad cannot run"), std::string::npos);
  EXPECT_TRUE(r->entry.table[2].failed);
  // A non-finite time is a failure too, not a winner.
  TimingCache c2(kKey);
  auto nan = c2.lookupOrTime("s", {"x", "y"}, [](const std::string& id) -> Expected<double> {
    return id == "x" ? std::nan("") : 5.0;
  });
  ASSERT_TRUE(nan.ok());
  EXPECT_EQ(nan->chosen, "y");
  EXPECT_TRUE(nan->table[1].failed);
}

TEST(Tactic, ForcedTacticPresent) {
  TimingCache c(kKey);
  FakeTimer timer({{"a", 1.0}, {"b", 2.0}});
  TacticOverrides o;
  o.set("conv1", "b");
  LogCapture log;
  auto r = selectFastest("sig", {"a", "b"}, timer, c, o, "conv1");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tacticId, "b");
  EXPECT_TRUE(r->forced);
  EXPECT_EQ(timer.calls, 0);  // forcing skips timing
  EXPECT_EQ(log.count(Severity::kInfo, "forced"), 1);
  // Another layer of the same signature is not forced.
  auto other = selectFastest("sig", {"a", "b"}, timer, c, o, "conv2");
  ASSERT_TRUE(other.ok());
  EXPECT_EQ(other->tacticId, "a");
}

TEST(Tactic, RetimeWhenCachedTacticNoLongerCandidate) {
  TimingCache c(kKey);
  c.insert("sig", entry({{"old", 0.1}, {"b", 1.0}}));
  FakeTimer timer({{"b", 1.0}, {"c", 0.5}});
  LogCapture log;
  auto r = selectFastest("sig", {"b", "c"}, timer, c, {}, "l");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->fromCache);
  EXPECT_EQ(r->tacticId, "c");
  EXPECT_EQ(timer.calls, 2);
  EXPECT_EQ(log.count(Severity::kInfo, "'old' is no longer a candidate"), 1) << log.all();
  // Once re-timed, the entry is current: no second re-time, no second message.
  auto again = selectFastest("sig", {"b", "c"}, timer, c, {}, "l");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->fromCache);
  EXPECT_EQ(timer.calls, 2);
  EXPECT_EQ(log.count(Severity::kInfo, "re-timing"), 1);
  // A new candidate that was never timed also forces a re-time (it might be the fastest).
  FakeTimer timer2({{"b", 1.0}, {"c", 0.5}, {"new", 0.01}});
  auto withNew = selectFastest("sig", {"b", "c", "new"}, timer2, c, {}, "l");
  ASSERT_TRUE(withNew.ok());
  EXPECT_EQ(withNew->tacticId, "new");
}

TEST(Tactic, FewerCandidatesThanTimedTakeTheFastestOfThemWithoutRetiming) {
  // A strict INT8 build after a timed one: its INT8 candidates without the FP16 ones.
  TimingCache c(kKey);
  TimingEntry full = entry({{"fp16", 0.1}, {"i8a", 0.5}, {"i8b", 0.3}});
  full.states["i8b"] = "state-b";
  full.states["fp16"] = "state-f";
  c.insert("sig", full);
  FakeTimer timer({{"i8a", 9.0}, {"i8b", 9.0}});
  LogCapture log;
  auto r = selectFastest("sig", {"i8a", "i8b"}, timer, c, {}, "l");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->fromCache);
  EXPECT_EQ(r->tacticId, "i8b");
  EXPECT_EQ(timer.calls, 0);
  EXPECT_EQ(log.count(Severity::kInfo, "re-timing"), 0) << log.all();
  auto sub = c.findFor("sig", {"i8a", "i8b"});
  ASSERT_TRUE(sub.has_value());
  EXPECT_EQ(sub->chosen, "i8b");
  EXPECT_EQ(sub->table.size(), 2u);
  EXPECT_EQ(sub->states.size(), 1u);  // only the candidates' states
  // The cache keeps every row: the timed build's next lookup is still a hit.
  auto again = c.findFor("sig", {"fp16", "i8a", "i8b"});
  ASSERT_TRUE(again.has_value());
  EXPECT_EQ(again->chosen, "fp16");
}

TEST(Tactic, FewerCandidatesThatAllFailedAreRetimed_n) {
  TimingCache c(kKey);
  TimingEntry e = entry({{"ok", 0.1}});
  e.table.push_back({"broken", 0, 0, true, "Unsupported: nope"});
  c.insert("sig", e);
  std::string stale;
  EXPECT_FALSE(c.findFor("sig", {"broken"}, &stale).has_value());
  EXPECT_NE(stale.find("none of the candidates ran"), std::string::npos) << stale;
  // A candidate never timed is a miss however many others were.
  EXPECT_FALSE(c.findFor("sig", {"ok", "broken", "new"}, &stale).has_value());
  EXPECT_NE(stale.find("'new' was never timed"), std::string::npos) << stale;
  // Re-timing the failed one keeps the rows of the others (the entry still serves them).
  FakeTimer timer({{"broken", 0.5}});
  auto r = selectFastest("sig", {"broken"}, timer, c, {}, "l");
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(timer.calls, 1);
  auto both = c.findFor("sig", {"ok", "broken"});
  ASSERT_TRUE(both.has_value());
  EXPECT_EQ(both->chosen, "ok");
}

TEST(Tactic, FormatTimingTableSorted) {
  TimingEntry e = entry({{"slow_one", 2.0}, {"fast", 0.5}});
  e.table.push_back({"broken", 0, 0, true, "Unsupported: nope"});
  const std::string s = formatTimingTable(e, "layer conv1");
  EXPECT_EQ(s.rfind("layer conv1\n", 0), 0u);
  const auto fast = s.find("* fast"), slow = s.find("slow_one"), broken = s.find("broken");
  ASSERT_NE(fast, std::string::npos) << s;
  EXPECT_LT(fast, slow);
  EXPECT_LT(slow, broken);
  EXPECT_NE(s.find("0.5000"), std::string::npos);
  EXPECT_NE(s.find("failed: Unsupported: nope"), std::string::npos);
  EXPECT_NE(s.find("1.0 KiB"), std::string::npos);
}

TEST(Tactic, VerboseLogShowsSortedTable) {
  TimingCache c(kKey);
  FakeTimer timer({{"b", 2.0}, {"a", 1.0}});
  LogCapture log;
  setLogLevel(Severity::kVerbose);
  ASSERT_TRUE(selectFastest("Conv|sig", {"a", "b"}, timer, c, {}, "conv7").ok());
  ASSERT_TRUE(selectFastest("Conv|sig", {"a", "b"}, timer, c, {}, "conv7").ok());
  EXPECT_EQ(log.count(Severity::kVerbose, "layer 'conv7' [Conv|sig] (timed)\n"), 1) << log.all();
  EXPECT_EQ(log.count(Severity::kVerbose, "layer 'conv7' [Conv|sig] (from cache)\n"), 1);
  EXPECT_EQ(log.count(Severity::kVerbose, "* a"), 2);
}

TEST(TacticOverrides, ParsesTextAndJson) {
  auto t = TacticOverrides::parse(
      "# forced tactics\n\n  conv1 = implicit_gemm   # measured by hand\n"
      "\"block/with = sign\" = winograd\nconv1=implicit_gemm\r\n");
  ASSERT_TRUE(t.ok()) << t.status().toString();
  EXPECT_EQ(t->size(), 2u);
  ASSERT_NE(t->find("conv1"), nullptr);
  EXPECT_EQ(*t->find("conv1"), "implicit_gemm");
  ASSERT_NE(t->find("block/with = sign"), nullptr);
  EXPECT_EQ(*t->find("block/with = sign"), "winograd");
  EXPECT_EQ(t->find("conv2"), nullptr);

  auto j = TacticOverrides::parse(R"({"a=b": "t1", "c": "t2"})");
  ASSERT_TRUE(j.ok()) << j.status().toString();
  EXPECT_EQ(*j->find("a=b"), "t1");
  EXPECT_EQ(*j->find("c"), "t2");

  test::TempDir dir;
  auto f = TacticOverrides::loadFile(dir.write("o.txt", "x = y\n"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(*f->find("x"), "y");
  EXPECT_TRUE(TacticOverrides::parse("").ok());
}

TEST(TimingCache, MergeCacheFilesAndExport) {
  test::TempDir dir;
  TimingCache a(kKey), b(kKey);
  a.insert("s1", entry({{"x", 1.0}}));
  a.insert("shared", entry({{"x", 1.0}, {"y", 2.0}}));
  b.insert("s2", entry({{"y", 1.0}}));
  b.insert("shared", entry({{"x", 3.0}, {"y", 2.0}}));
  ASSERT_TRUE(a.save(dir.file("a.cache")).ok());
  ASSERT_TRUE(b.save(dir.file("b.cache")).ok());
  Status s =
      mergeCacheFiles(dir.file("out/merged.cache"), {dir.file("a.cache"), dir.file("b.cache")});
  ASSERT_TRUE(s.ok()) << s.toString();
  auto m = readTimingCacheFile(dir.file("out/merged.cache"));
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->deviceKey, kKey);
  EXPECT_EQ(m->entries.size(), 3u);
  EXPECT_EQ(m->entries.at("shared").chosen, "y");  // the later source wins

  // Export from a device-key directory.
  ASSERT_TRUE(a.save(dir.file(std::string("root/") + kKey + "/timing.cache")).ok());
  s = exportCache(dir.file(std::string("root/") + kKey), dir.file("exported.cache"));
  ASSERT_TRUE(s.ok()) << s.toString();
  EXPECT_EQ(readBytes(dir.file("exported.cache")),
            readBytes(dir.file(std::string("root/") + kKey + "/timing.cache")));

  // Listing the root finds it, and a damaged one beside it is reported, not fatal.
  std::filesystem::create_directories(dir.file("root/broken"));
  dir.write("root/broken/timing.cache", "garbage");
  auto l = listCacheDir(dir.file("root"));
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 2u);
  EXPECT_EQ((*l)[0].dirKey, kKey);
  EXPECT_TRUE((*l)[0].status.ok());
  EXPECT_EQ((*l)[0].file.entries.size(), 2u);
  EXPECT_EQ((*l)[1].dirKey, "broken");
  EXPECT_EQ((*l)[1].status.code(), ErrorCode::kCorruptFile);
}

TEST(TimingCache, LoadKeepsEntriesInMemoryAndSaveKeepsUnion) {
  test::TempDir dir;
  const std::string path = dir.file("timing.cache");
  TimingCache disk(kKey);
  disk.insert("s", entry({{"old", 1.0}}));
  disk.insert("onlyDisk", entry({{"t", 1.0}}));
  ASSERT_TRUE(disk.save(path).ok());
  TimingCache mem(kKey);
  mem.insert("s", entry({{"new", 0.5}}));
  ASSERT_TRUE(mem.save(path).ok());
  EXPECT_EQ(mem.size(), 2u);  // the union is kept in memory too
  auto f = readTimingCacheFile(path);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->entries.at("s").chosen, "new");  // memory wins over disk
  EXPECT_TRUE(f->entries.count("onlyDisk"));
}

// ---------------------------------------------------------------------------------------
// Negative

TEST(TimingCache, TruncatedAtEveryLength_n) {
  const auto good = sampleFile();
  ASSERT_GT(good.size(), 100u);
  for (size_t n = 0; n < good.size(); ++n) {
    auto r = decodeTimingCache(good.data(), n);
    ASSERT_FALSE(r.ok()) << "length " << n;
    EXPECT_EQ(r.status().code(), ErrorCode::kCorruptFile) << n << ": " << r.status().toString();
  }
  // And through a load, which warns and returns the error.
  test::TempDir dir;
  std::vector<uint8_t> half(good.begin(), good.begin() + static_cast<long>(good.size() / 2));
  writeBytes(dir.file("t.cache"), half);
  LogCapture log;
  TimingCache c(kKey);
  EXPECT_EQ(c.load(dir.file("t.cache")).code(), ErrorCode::kCorruptFile);
  EXPECT_EQ(log.count(Severity::kWarning, "truncated"), 1) << log.all();
  EXPECT_EQ(c.size(), 0u);
}

TEST(TimingCache, FlippedByteIsCorrupt_n) {
  const auto good = sampleFile();
  for (size_t i = 0; i < good.size(); ++i) {
    auto bad = good;
    bad[i] ^= 0x20;
    auto r = decodeTimingCache(bad.data(), bad.size());
    ASSERT_FALSE(r.ok()) << "byte " << i;
    // A flipped version number is reported as a version problem; anything else as damage.
    const ErrorCode want =
        (i >= 8 && i < 12) ? ErrorCode::kVersionMismatch : ErrorCode::kCorruptFile;
    EXPECT_EQ(r.status().code(), want) << "byte " << i << ": " << r.status().toString();
  }
}

TEST(TimingCache, GarbageAndEmpty_n) {
  test::TempDir dir;
  LogCapture log;
  for (const std::string& content :
       {std::string(), std::string("garbage"), std::string(4096, '\xff'), std::string("EITCACHE"),
        std::string("EITCACHE\x01\0\0\0", 12)}) {
    const std::string path = dir.write("g.cache", content);
    TimingCache c(kKey);
    const Status s = c.load(path);
    EXPECT_EQ(s.code(), ErrorCode::kCorruptFile) << content.size() << ": " << s.toString();
    EXPECT_EQ(c.size(), 0u);
    EXPECT_TRUE(c.loadOrIgnore(path).ok());  // a build goes on without it
  }
  EXPECT_EQ(log.count(Severity::kWarning, "ignoring it"), 5) << log.all();
}

TEST(TimingCache, BadJsonWithValidChecksum_n) {
  const std::vector<std::string> bodies = {
      "{not json",
      "[1,2,3]",
      R"({"device_key": 5, "sdk_version": "x", "entries": []})",
      R"({"device_key": "k", "sdk_version": "x"})",
      R"({"device_key": "k", "sdk_version": "x", "entries": [1]})",
      R"({"device_key": "k", "sdk_version": "x", "entries": [{"signature": "s", "chosen": "a",
         "tactics": [{"id": "a", "workspace_bytes": 0, "failed": false, "median_ms": -1}]}]})",
      R"({"device_key": "k", "sdk_version": "x", "entries": [{"signature": "s", "chosen": "b",
         "tactics": [{"id": "a", "workspace_bytes": 0, "failed": false, "median_ms": 1},
                     {"id": "b", "workspace_bytes": 0, "failed": false, "median_ms": 2}]}]})",
      R"({"device_key": "k", "sdk_version": "x", "entries": [{"signature": "s", "chosen": "a",
         "tactics": [{"id": "a", "workspace_bytes": 0, "failed": false, "median_ms": 1},
                     {"id": "a", "workspace_bytes": 0, "failed": false, "median_ms": 2}]}]})",
      R"({"device_key": "k", "sdk_version": "x", "entries": [{"signature": "s", "chosen": "a",
         "tactics": [{"id": "a", "workspace_bytes": "big", "failed": false, "median_ms": 1}]}]})",
      "{\"device_key\": \"\xff\xfe\", \"sdk_version\": \"x\", \"entries\": []}",
      // States: not an object, for a tactic not in the table, for a failed one, not a string.
      R"({"device_key": "k", "sdk_version": "x", "entries": [{"signature": "s", "chosen": "a",
         "tactics": [{"id": "a", "workspace_bytes": 0, "failed": false, "median_ms": 1}],
         "states": ["plan"]}]})",
      R"({"device_key": "k", "sdk_version": "x", "entries": [{"signature": "s", "chosen": "a",
         "tactics": [{"id": "a", "workspace_bytes": 0, "failed": false, "median_ms": 1}],
         "states": {"zz": "plan"}}]})",
      R"({"device_key": "k", "sdk_version": "x", "entries": [{"signature": "s", "chosen": "a",
         "tactics": [{"id": "a", "workspace_bytes": 0, "failed": false, "median_ms": 1},
                     {"id": "b", "workspace_bytes": 0, "failed": true, "error": "e"}],
         "states": {"b": "plan"}}]})",
      R"({"device_key": "k", "sdk_version": "x", "entries": [{"signature": "s", "chosen": "a",
         "tactics": [{"id": "a", "workspace_bytes": 0, "failed": false, "median_ms": 1}],
         "states": {"a": 5}}]})",
  };
  for (const auto& body : bodies) {
    const auto b = frame(body);
    auto r = decodeTimingCache(b.data(), b.size());
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), ErrorCode::kCorruptFile) << body;
  }
}

TEST(TimingCache, ForeignDeviceIgnoredWithWarning_n) {
  test::TempDir dir;
  const std::string path = dir.file("timing.cache");
  writeBytes(path, sampleFile(kOtherKey));
  LogCapture log;
  TimingCache c(kKey);
  EXPECT_TRUE(c.loadOrIgnore(path).ok());
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(log.count(Severity::kWarning, std::string("recorded on device '") + kOtherKey), 1)
      << log.all();
  EXPECT_EQ(log.count(Severity::kWarning, std::string("this device is '") + kKey), 1);
  EXPECT_EQ(c.load(path).code(), ErrorCode::kDeviceMismatch);
}

TEST(TimingCache, OlderFormatVersionIgnoredWithWarning_n) {
  test::TempDir dir;
  const std::string path = dir.file("timing.cache");
  auto b = sampleFile();
  // The same body framed as format versions 0 and 1 (timings of zeroed inputs, kernels
  // overlapping their own previous launch), each with a valid checksum.
  const std::string body(b.begin() + 16, b.end() - 4);
  ASSERT_EQ(kTimingCacheFormatVersion, 2u);
  for (uint32_t version : {0u, 1u}) {
    writeBytes(path, frame(body, version));
    LogCapture log;
    TimingCache c(kKey);
    EXPECT_TRUE(c.loadOrIgnore(path).ok());
    EXPECT_EQ(c.size(), 0u);
    EXPECT_EQ(log.count(Severity::kWarning, "format version " + std::to_string(version)), 1)
        << log.all();
    EXPECT_EQ(c.load(path).code(), ErrorCode::kVersionMismatch);
  }
}

TEST(TimingCache, OlderSdkVersionIgnoredWithWarning_n) {
  test::TempDir dir;
  const std::string path = dir.file("timing.cache");
  writeBytes(path, sampleFile(kKey, "0.0.0-old"));
  LogCapture log;
  TimingCache c(kKey);
  EXPECT_TRUE(c.loadOrIgnore(path).ok());
  EXPECT_EQ(c.size(), 0u);
  EXPECT_EQ(log.count(Severity::kWarning, "written by EdgeInfer 0.0.0-old"), 1) << log.all();
  // A save replaces the obsolete file (with a warning) rather than merging it.
  c.insert("fresh", entry({{"t", 1.0}}));
  ASSERT_TRUE(c.save(path).ok());
  auto f = readTimingCacheFile(path);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->sdkVersion, sdkVersion());
  EXPECT_EQ(f->entries.size(), 1u);
  EXPECT_EQ(log.count(Severity::kWarning, "replacing it"), 1) << log.all();
}

TEST(TimingCache, StrictLoadReturnsError_n) {
  test::TempDir dir;
  TimingCacheOptions strict;
  strict.strict = true;
  LogCapture log;
  writeBytes(dir.file("foreign.cache"), sampleFile(kOtherKey));
  writeBytes(dir.file("old.cache"), sampleFile(kKey, "0.0.0-old"));
  writeBytes(dir.file("corrupt.cache"), frame("{broken json"));
  TimingCache c(kKey, strict);
  EXPECT_EQ(c.loadOrIgnore(dir.file("foreign.cache")).code(), ErrorCode::kDeviceMismatch);
  EXPECT_EQ(c.loadOrIgnore(dir.file("old.cache")).code(), ErrorCode::kVersionMismatch);
  EXPECT_EQ(c.loadOrIgnore(dir.file("corrupt.cache")).code(), ErrorCode::kCorruptFile);
  EXPECT_TRUE(c.loadOrIgnore(dir.file("missing.cache")).ok());  // first build: fine
  EXPECT_EQ(log.count(Severity::kWarning, ""), 3);
  // Strict save refuses to replace the damaged or old file.
  c.insert("s", entry({{"t", 1.0}}));
  EXPECT_EQ(c.save(dir.file("corrupt.cache")).code(), ErrorCode::kCorruptFile);
  EXPECT_EQ(c.save(dir.file("old.cache")).code(), ErrorCode::kVersionMismatch);
  EXPECT_EQ(readBytes(dir.file("old.cache")), sampleFile(kKey, "0.0.0-old"));
}

TEST(TimingCache, CorruptFileReplacedOnSave_n) {
  test::TempDir dir;
  const std::string path = dir.write("timing.cache", "EITCACHE torn write");
  LogCapture log;
  TimingCache c(kKey);
  c.insert("s", entry({{"t", 1.0}}));
  ASSERT_TRUE(c.save(path).ok());
  EXPECT_EQ(log.count(Severity::kWarning, "replacing it"), 1) << log.all();
  EXPECT_TRUE(readTimingCacheFile(path).ok());
}

TEST(TimingCache, SaveRefusesForeignDeviceFile_n) {
  test::TempDir dir;
  const std::string path = dir.file("timing.cache");
  writeBytes(path, sampleFile(kOtherKey));
  TimingCache c(kKey);
  c.insert("s", entry({{"t", 1.0}}));
  EXPECT_EQ(c.save(path).code(), ErrorCode::kDeviceMismatch);
  EXPECT_EQ(readBytes(path), sampleFile(kOtherKey));  // untouched
}

TEST(TimingCache, MissIsError_n) {
  TimingCacheOptions o;
  o.missIsError = true;
  TimingCache c(kKey, o);
  FakeTimer timer({{"a", 1.0}});
  auto r = selectFastest("Conv|3x3|fp16", {"a"}, timer, c, {}, "conv1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find("Conv|3x3|fp16"), std::string::npos);
  EXPECT_EQ(timer.calls, 0);
  // A stale entry is a miss too, and the message says why.
  c.insert("Conv|3x3|fp16", entry({{"gone", 1.0}}));
  r = selectFastest("Conv|3x3|fp16", {"a"}, timer, c, {}, "conv1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
  EXPECT_NE(r.status().message().find("'gone' is no longer a candidate"), std::string::npos);
  // A current entry is a hit.
  c.insert("Conv|3x3|fp16", entry({{"a", 1.0}}));
  EXPECT_TRUE(selectFastest("Conv|3x3|fp16", {"a"}, timer, c, {}, "conv1").ok());
}

TEST(Tactic, ForcedTacticNotCandidate_n) {
  TimingCache c(kKey);
  FakeTimer timer({{"a", 1.0}});
  TacticOverrides o;
  o.set("conv1", "nonexistent");
  auto r = selectFastest("sig", {"a", "b"}, timer, c, o, "conv1");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("'nonexistent'"), std::string::npos);
  EXPECT_NE(r.status().message().find("'conv1'"), std::string::npos);
  EXPECT_NE(r.status().message().find("candidates: a, b"), std::string::npos);
  EXPECT_EQ(timer.calls, 0);
}

TEST(Tactic, AllTacticsFail_n) {
  TimingCache c(kKey);
  FakeTimer timer({});
  auto r = selectFastest("sig", {"a", "b"}, timer, c, {}, "l");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kUnsupported);
  EXPECT_NE(r.status().message().find("a cannot run"), std::string::npos);
  EXPECT_FALSE(c.find("sig").has_value());  // a failure-only result is not cached
}

TEST(Tactic, NoCandidates_n) {
  TimingCache c(kKey);
  FakeTimer timer({{"a", 1.0}});
  EXPECT_EQ(selectFastest("sig", {}, timer, c, {}, "l").status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(selectFastest("sig", {""}, timer, c, {}, "l").status().code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(c.lookupOrTime("sig", {"a"}, nullptr).status().code(), ErrorCode::kInvalidArgument);
}

TEST(TacticOverrides, BadLines_n) {
  struct Case {
    std::string text;
    std::string want;
  };
  const std::vector<Case> cases = {
      {"conv1 implicit_gemm\n", "f.txt:1: expected 'layer-name = tactic-id'"},
      {"ok = t\n = t2\n", "f.txt:2: empty layer name"},
      {"conv1 =\n", "f.txt:1: no tactic id for layer 'conv1'"},
      {"conv1 = two words\n", "f.txt:1: tactic id 'two words'"},
      {"a = t1\nb = t\na = t2\n", "f.txt:3: layer 'a' forced to 't2' but line 1 forces 't1'"},
      {"\"unterminated = t\n", "f.txt:1: unterminated quoted layer name"},
      {"\"quoted\" t\n", "f.txt:1: expected '=' after the quoted layer name"},
      {"{\"a\": 1}", "f.txt: the tactic for layer 'a' must be a non-empty string"},
      {"{\"a\": ", "f.txt: not a valid JSON object"},
  };
  for (const auto& c : cases) {
    auto r = TacticOverrides::parse(c.text, "f.txt");
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(c.want), std::string::npos)
        << c.text << " -> " << r.status().message();
  }
}

TEST(TacticOverrides, MissingFile_n) {
  auto r = TacticOverrides::loadFile("/nonexistent/dir/overrides.txt");
  EXPECT_EQ(r.status().code(), ErrorCode::kNotFound);
}

TEST(TimingCache, MergeRefusesMixedDevices_n) {
  test::TempDir dir;
  writeBytes(dir.file("a.cache"), sampleFile(kKey));
  writeBytes(dir.file("b.cache"), sampleFile(kOtherKey));
  writeBytes(dir.file("old.cache"), sampleFile(kKey, "0.0.0-old"));
  dir.write("bad.cache", "garbage");
  const std::string dst = dir.file("m.cache");
  EXPECT_EQ(mergeCacheFiles(dst, {dir.file("a.cache"), dir.file("b.cache")}).code(),
            ErrorCode::kDeviceMismatch);
  EXPECT_EQ(mergeCacheFiles(dst, {dir.file("a.cache"), dir.file("old.cache")}).code(),
            ErrorCode::kVersionMismatch);
  const Status bad = mergeCacheFiles(dst, {dir.file("a.cache"), dir.file("bad.cache")});
  EXPECT_EQ(bad.code(), ErrorCode::kCorruptFile);
  EXPECT_NE(bad.message().find("bad.cache"), std::string::npos) << bad.toString();
  EXPECT_EQ(mergeCacheFiles(dst, {}).code(), ErrorCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(dst));  // nothing written on refusal
  // Forced, it merges (with a warning) into the first source's device.
  LogCapture log;
  ASSERT_TRUE(mergeCacheFiles(dst, {dir.file("a.cache"), dir.file("b.cache")}, true).ok());
  EXPECT_EQ(readTimingCacheFile(dst)->deviceKey, kKey);
  EXPECT_EQ(log.count(Severity::kWarning, "merging anyway"), 1);
}

TEST(TimingCache, ExportMissing_n) {
  test::TempDir dir;
  EXPECT_EQ(exportCache(dir.file("nope"), dir.file("out.cache")).code(), ErrorCode::kNotFound);
  std::filesystem::create_directories(dir.file("emptykey"));
  EXPECT_EQ(exportCache(dir.file("emptykey"), dir.file("out.cache")).code(), ErrorCode::kNotFound);
  EXPECT_FALSE(std::filesystem::exists(dir.file("out.cache")));
  EXPECT_EQ(listCacheDir(dir.file("nope")).status().code(), ErrorCode::kNotFound);
  EXPECT_EQ(defaultCachePath("../escape").status().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(defaultCachePath("").status().code(), ErrorCode::kInvalidArgument);
}

TEST(TimingCache, UnwritableLocation_n) {
  test::TempDir dir;
  dir.write("file", "x");
  TimingCache c(kKey);
  c.insert("s", entry({{"t", 1.0}}));
  // The parent "directory" is a file: save fails with an I/O error, no crash.
  EXPECT_EQ(c.save(dir.file("file/sub/timing.cache")).code(), ErrorCode::kIoError);
}

TEST(TimingCache, EncodeRejectsNonFiniteTime_n) {
  TimingCacheFile f;
  f.deviceKey = kKey;
  TimingEntry e;
  e.table.push_back({"t", std::numeric_limits<double>::infinity(), 0, false, ""});
  e.chosen = "t";
  f.entries["s"] = e;
  EXPECT_EQ(encodeTimingCache(f).status().code(), ErrorCode::kInvalidArgument);
  TimingCacheFile g;
  g.deviceKey = "\xff\xfe bad utf-8";
  EXPECT_EQ(encodeTimingCache(g).status().code(), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace edgeinfer::builder
