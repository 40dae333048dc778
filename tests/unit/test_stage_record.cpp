// builder/stage_record.h: the INT8 stage search's outcome as a timing-cache entry (what a rebuild
// reads instead of searching again). Device-free; the search itself runs on a GPU
// (CudaInt8Engine.TimedBuildTriesNetworkStagesInFp16).
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "builder/stage_record.h"
#include "builder/timing_cache.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using builder::stageSearchEntry;
using builder::stageSearchLayers;
using builder::stageSearchSignature;
using builder::TimingCache;
using builder::TimingEntry;

const char* kDevice = "Test_GPU-sm90-132sm-00000000";

TEST(StageRecord, LayersRoundTripThroughASavedCache) {
  test::TempDir dir;
  const std::string path = dir.file("timing.cache");
  const std::map<std::string, std::string> tactics = {{"/layer1/conv1", "cuda-i8.pw128x64.i8.i8.f"},
                                                      {"/layer1/conv2", "cudnn.conv.fp16.nhwc.e4"}};
  const std::string sig = stageSearchSignature("abc123", {{"x", "[1,3,224,224]"}}, tactics, {});
  const std::vector<std::string> moved = {"/layer1/conv1", "/layer1/conv2", "name with spaces"};
  {
    TimingCache c(kDevice);
    c.insert(sig, stageSearchEntry(moved, 0.268));
    c.insert("none", stageSearchEntry({}, 0.285));
    ASSERT_TRUE(c.save(path).ok());
  }
  TimingCache c(kDevice);
  ASSERT_TRUE(c.load(path).ok());
  const auto e = c.find(sig);
  ASSERT_TRUE(e.has_value());
  const auto layers = stageSearchLayers(*e);
  ASSERT_TRUE(layers.has_value());
  EXPECT_EQ(*layers, moved);
  EXPECT_DOUBLE_EQ(e->table[0].medianMs, 0.268);
  const auto none = c.find("none");
  ASSERT_TRUE(none.has_value());
  ASSERT_TRUE(stageSearchLayers(*none).has_value());
  EXPECT_TRUE(stageSearchLayers(*none)->empty());  // recorded: no run pays
}

TEST(StageRecord, TheSignatureChangesWithTheEngineAndTheFixedLayers) {
  const std::map<std::string, std::string> a = {{"l1", "cuda-i8.x"}, {"l2", "cublaslt-i8.y"}};
  std::map<std::string, std::string> b = a;
  b["l2"] = "cuda-i8.z";  // another timing, calibration or shape: another tactic somewhere
  const std::map<std::string, std::string> b1 = {{"x", "[1,3,224,224]"}};
  const std::map<std::string, std::string> b2 = {{"x", "[2,3,224,224]"}};
  const std::string sa = stageSearchSignature("m", b1, a, {});
  EXPECT_EQ(sa, stageSearchSignature("m", b1, a, {}));
  EXPECT_EQ(sa.rfind("int8-stage-search|m|", 0), 0u) << sa;
  EXPECT_NE(sa, stageSearchSignature("m", b1, b, {}));
  EXPECT_NE(sa, stageSearchSignature("other-model", b1, a, {}));
  EXPECT_NE(sa, stageSearchSignature("m", b1, a, {"l1"}));
  // Another batch with the same tactics (ids need not name the shape) is another engine.
  EXPECT_NE(sa, stageSearchSignature("m", b2, a, {}));
  // Not fooled by names that run together.
  EXPECT_NE(stageSearchSignature("m", b1, {{"ab", "c"}}, {}),
            stageSearchSignature("m", b1, {{"a", "bc"}}, {}));
}

TEST(StageRecord, OtherEntriesAreNotRecords_n) {
  // An ordinary layer entry, a failed row, two rows, an empty layer name: none reads as one.
  TimingEntry layer;
  layer.table.push_back({"cuda-i8.pw128x64", 0.004, 0, false, ""});
  layer.chosen = "cuda-i8.pw128x64";
  EXPECT_FALSE(stageSearchLayers(layer).has_value());
  TimingEntry failed = stageSearchEntry({"a"}, 0.1);
  failed.table[0].failed = true;
  EXPECT_FALSE(stageSearchLayers(failed).has_value());
  TimingEntry two = stageSearchEntry({"a"}, 0.1);
  two.table.push_back(stageSearchEntry({"b"}, 0.2).table[0]);
  EXPECT_FALSE(stageSearchLayers(two).has_value());
  EXPECT_FALSE(stageSearchLayers(stageSearchEntry({"a", ""}, 0.1)).has_value());
  EXPECT_FALSE(stageSearchLayers(TimingEntry()).has_value());
}

}  // namespace
}  // namespace edgeinfer
