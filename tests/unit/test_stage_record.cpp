// builder/stage_record.h: the INT8 stage search's and the runner-up trials' outcomes as
// timing-cache entries (what a rebuild reads instead of trying again). Device-free; the trials
// themselves run on a GPU (CudaInt8Engine.TimedBuildTriesNetworkStagesInFp16,
// CudaInt8Engine.CloseRunnerUpsAreTriedInTheWholeEngine).
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

using builder::runnerUpChoices;
using builder::runnerUpEntry;
using builder::runnerUpSignature;
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

TEST(RunnerUpRecord, ChoicesRoundTripThroughASavedCache) {
  test::TempDir dir;
  const std::string path = dir.file("timing.cache");
  const std::map<std::string, std::string> tactics = {
      {"/layer3/conv2", "cuda-i8.tmard128x256k128.i8.-.f"}, {"/fc", "cublaslt-i8.i32.a39"}};
  const std::map<std::string, std::string> inputs = {{"x", "[64,3,224,224]"}};
  const std::string sig = runnerUpSignature("abc123", inputs, tactics, {});
  EXPECT_EQ(sig.rfind("runner-up-trials|abc123|", 0), 0u) << sig;
  // Not the stage search's record of the same engine.
  EXPECT_NE(sig, stageSearchSignature("abc123", inputs, tactics, {}));
  const std::map<std::string, std::string> kept = {
      {"/layer3/conv2", "cuda-i8.tmard128x128k128.i8.-.f"}, {"name with spaces = x", "cudnn.e4"}};
  {
    TimingCache c(kDevice);
    const auto entry = runnerUpEntry(kept, 1.2305);
    ASSERT_TRUE(entry.has_value());
    c.insert(sig, *entry);
    const auto none = runnerUpEntry({}, 1.27);
    ASSERT_TRUE(none.has_value());
    c.insert("none", *none);
    ASSERT_TRUE(c.save(path).ok());
  }
  TimingCache c(kDevice);
  ASSERT_TRUE(c.load(path).ok());
  const auto e = c.find(sig);
  ASSERT_TRUE(e.has_value());
  const auto choices = runnerUpChoices(*e);
  ASSERT_TRUE(choices.has_value());
  EXPECT_EQ(*choices, kept);
  EXPECT_DOUBLE_EQ(e->table[0].medianMs, 1.2305);
  const auto none = c.find("none");
  ASSERT_TRUE(none.has_value());
  ASSERT_TRUE(runnerUpChoices(*none).has_value());
  EXPECT_TRUE(runnerUpChoices(*none)->empty());  // recorded: no runner-up pays
}

TEST(RunnerUpRecord, NamesItCannotHoldAndOtherEntriesAreRefused_n) {
  // A tab or a newline in a name, or an empty one: not recordable.
  EXPECT_FALSE(runnerUpEntry({{"a\tb", "t"}}, 0.1).has_value());
  EXPECT_FALSE(runnerUpEntry({{"a", "t\nu"}}, 0.1).has_value());
  EXPECT_FALSE(runnerUpEntry({{"", "t"}}, 0.1).has_value());
  EXPECT_FALSE(runnerUpEntry({{"a", ""}}, 0.1).has_value());
  // The stage search's record, an ordinary layer entry, a failed row, two rows, a choice
  // without its tactic or with two tabs, a layer twice: none reads as a record.
  EXPECT_FALSE(runnerUpChoices(stageSearchEntry({"a"}, 0.1)).has_value());
  TimingEntry layer;
  layer.table.push_back({"cuda-i8.pw128x64", 0.004, 0, false, ""});
  layer.chosen = "cuda-i8.pw128x64";
  EXPECT_FALSE(runnerUpChoices(layer).has_value());
  TimingEntry failed = *runnerUpEntry({{"a", "t"}}, 0.1);
  failed.table[0].failed = true;
  EXPECT_FALSE(runnerUpChoices(failed).has_value());
  TimingEntry two = *runnerUpEntry({{"a", "t"}}, 0.1);
  two.table.push_back(runnerUpEntry({{"b", "u"}}, 0.2)->table[0]);
  EXPECT_FALSE(runnerUpChoices(two).has_value());
  for (const char* id : {"runner-ups:a", "runner-ups:a\t", "runner-ups:\tt", "runner-ups:a\tt\tu",
                         "runner-ups:a\tt\n", "runner-ups:a\tt\na\tu"}) {
    SCOPED_TRACE(id);
    TimingEntry bad = *runnerUpEntry({}, 0.1);
    bad.table[0].tacticId = id;
    bad.chosen = id;
    EXPECT_FALSE(runnerUpChoices(bad).has_value());
  }
  EXPECT_FALSE(runnerUpChoices(TimingEntry()).has_value());
}

}  // namespace
}  // namespace edgeinfer
