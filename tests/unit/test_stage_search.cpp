// The INT8 stage search's rule (builder/stage_search.h) on made-up timings: which runs of
// stages it tries, in which order, which it keeps, and where it stops. The GPU side (trial
// builds measured on the device) is CudaInt8Engine.TimedBuildTriesNetworkStagesInFp16.
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "builder/stage_search.h"

namespace edgeinfer::builder {
namespace {

/// A made-up device: the engine's time for each set of stages in FP16 ("0110": stages 1 and 2),
/// `other` for any set not listed; each trial's call is logged.
struct FakeDevice {
  std::map<std::string, double> times;
  double other = 1.10;
  double current = 1.0;  // what a trial reports for the current engine
  std::vector<std::string> calls;
  std::vector<double> roundBest;
  std::string failOn;                                // a set whose trial fails
  std::function<double(const std::string&)> timeOf;  // if set: the time of any set

  Expected<StageTrialTimes> operator()(const std::vector<bool>& fp16, double fastest) {
    std::string key;
    for (bool b : fp16) key += b ? '1' : '0';
    calls.push_back(key);
    roundBest.push_back(fastest);
    if (key == failOn) return Status(ErrorCode::kInternal, "out of memory");
    if (timeOf) return StageTrialTimes{timeOf(key), current};
    const auto it = times.find(key);
    return StageTrialTimes{it == times.end() ? other : it->second, current};
  }
};

StageSearchOutcome run(FakeDevice& d, const std::vector<size_t>& layers, int* keeps,
                       StageSearchOptions o = {}) {
  *keeps = 0;
  return searchStages(
      layers, 1.0, [&](const std::vector<bool>& f, double b) { return d(f, b); }, [&] { ++*keeps; },
      o);
}

// ResNet-50 at batch 1 as one H200 session measured it: every stage alone slower than
// all-INT8 (layer1 by 2.5 %), layer1 and layer2 together faster. The search finds the pair.
TEST(StageSearch, APairFasterThanEitherStageAloneIsFound) {
  FakeDevice d;
  // stages: 0 stem, 1 pool, 2 layer1, 3 layer2, 4 layer3, 5 layer4, 6 gap, 7 fc
  d.times = {{"10000000", 1.06}, {"01000000", 1.04}, {"00100000", 1.025},
             {"00010000", 1.03}, {"00001000", 1.08}, {"00000100", 1.11},
             {"00000010", 1.03}, {"00000001", 1.04}, {"00110000", 0.95}};
  int keeps = 0;
  const auto out = run(d, {1, 1, 10, 13, 19, 10, 1, 1}, &keeps);
  ASSERT_FALSE(out.failed);
  ASSERT_EQ(out.kept.size(), 1u);
  EXPECT_EQ(out.kept[0], std::make_pair(size_t{2}, size_t{3}));
  EXPECT_EQ(out.moved, 23u);
  EXPECT_EQ(keeps, 1);
  EXPECT_DOUBLE_EQ(out.ms, 0.95);
  // Every stage alone first, in order; then runs extended best first while within 5 %:
  // layer1 (1.025) with layer2, that pair (0.95) with layer3, layer2 with layer3, the global
  // pool with the classifier, the pool with layer1 (the classifier has no next stage; the stem
  // at 1.06 and layer4 at 1.11 are beyond 5 %).
  ASSERT_EQ(d.calls.size(), 19u);
  for (size_t i = 0; i < 8; ++i) EXPECT_EQ(d.calls[i], std::string(8, '0').replace(i, 1, "1"));
  const std::vector<std::string> extended(d.calls.begin() + 8, d.calls.begin() + 13);
  EXPECT_EQ(extended,
            (std::vector<std::string>{"00110000", "00111000", "00011000", "00000011", "01100000"}));
  // The second round starts from the kept run: the six other stages alone, none within 5 %.
  for (size_t i = 13; i < d.calls.size(); ++i)
    EXPECT_EQ(d.calls[i].substr(2, 2), "11") << d.calls[i];
  // The caller is told each round's fastest time so far (0 first), to hold that engine only.
  EXPECT_DOUBLE_EQ(d.roundBest[0], 0.0);
  EXPECT_DOUBLE_EQ(d.roundBest[1], 1.06);
  EXPECT_DOUBLE_EQ(d.roundBest[2], 1.04);
}

// The earlier rule (extend from every start while within 2 %) missed the pair above; so does a
// run that is never extended because every stage alone is beyond `extend`.
TEST(StageSearch, RunsBeyondTheExtensionLimitAreNotExtended_n) {
  FakeDevice d;
  d.times = {{"0011", 0.90}};
  d.other = 1.20;  // every stage alone 20 % slower
  int keeps = 0;
  const auto out = run(d, {3, 3, 3, 3}, &keeps);
  EXPECT_EQ(d.calls.size(), 4u);  // the four stages alone, nothing extended
  EXPECT_TRUE(out.kept.empty());
  EXPECT_EQ(keeps, 0);
  EXPECT_EQ(out.moved, 0u);
  EXPECT_DOUBLE_EQ(out.ms, 1.0);
}

// A run must gain `gain` (0.5 %) over the current engine to be kept.
TEST(StageSearch, AGainBelowTheThresholdKeepsNothing_n) {
  FakeDevice d;
  d.times = {{"10", 0.996}};
  int keeps = 0;
  const auto out = run(d, {2, 2}, &keeps);
  EXPECT_TRUE(out.kept.empty());
  EXPECT_EQ(keeps, 0);
  d.calls.clear();
  d.times = {{"10", 0.99}};
  const auto out2 = run(d, {2, 2}, &keeps);
  ASSERT_EQ(out2.kept.size(), 1u);
  EXPECT_EQ(keeps, 1);
}

// No run takes the last INT8 layers: with two stages, each alone, never both; a single stage
// is never tried at all.
TEST(StageSearch, NeverTheLastInt8Layers_n) {
  FakeDevice d;
  d.other = 0.5;  // everything would pay
  int keeps = 0;
  const auto two = run(d, {4, 5}, &keeps);
  for (const auto& c : d.calls) EXPECT_NE(c, "11");
  ASSERT_EQ(two.kept.size(), 1u);  // the first of the equally fast stages
  EXPECT_EQ(two.kept[0], std::make_pair(size_t{0}, size_t{0}));
  EXPECT_EQ(d.calls, (std::vector<std::string>{"10", "01"}));  // the second round: none left
  d.calls.clear();
  const auto one = run(d, {7}, &keeps);
  EXPECT_TRUE(d.calls.empty());
  EXPECT_TRUE(one.trials.empty());
  EXPECT_EQ(keeps, 0);
}

// The trial budget holds within a round and across rounds.
TEST(StageSearch, AtMostMaxTrials) {
  FakeDevice d;
  d.other = 1.01;  // everything within `extend`: every run would be extended
  StageSearchOptions o;
  o.maxTrials = 10;
  int keeps = 0;
  const auto out = run(d, std::vector<size_t>(12, 1), &keeps, o);
  EXPECT_EQ(d.calls.size(), 10u);
  EXPECT_EQ(out.trials.size(), 10u);
  EXPECT_TRUE(out.kept.empty());
  // Each stage in FP16 gains 2 %, two neighbours together lose: round 1 tries the 4 stages
  // alone and extends 3 of them (slow), keeps the first stage; round 2 has 2 trials left.
  FakeDevice g;
  g.timeOf = [](const std::string& key) {
    double t = 1.0;
    for (char c : key) t -= c == '1' ? 0.02 : 0.0;
    return key.find("11") != std::string::npos ? t + 0.5 : t;
  };
  o.maxTrials = 9;
  const auto two = run(g, {1, 1, 1, 1}, &keeps, o);
  EXPECT_EQ(g.calls, (std::vector<std::string>{"1000", "0100", "0010", "0001", "1100", "0110",
                                               "0011", "1100", "1010"}));
  ASSERT_EQ(two.kept.size(), 2u);
  EXPECT_EQ(two.kept[1], std::make_pair(size_t{2}, size_t{2}));
  EXPECT_EQ(keeps, 2);
  EXPECT_DOUBLE_EQ(two.ms, 0.96);
}

// A failed trial ends the search: what a round measured before may still be kept, the failure
// is reported with its message, and no further trial runs.
TEST(StageSearch, AFailedTrialEndsTheSearch_n) {
  FakeDevice d;
  d.times = {{"100", 0.9}};
  d.failOn = "010";
  int keeps = 0;
  const auto out = run(d, {2, 2, 2}, &keeps);
  EXPECT_TRUE(out.failed);
  EXPECT_EQ(d.calls, (std::vector<std::string>{"100", "010"}));
  ASSERT_EQ(out.trials.size(), 2u);
  EXPECT_EQ(out.trials[1].error, "out of memory");
  ASSERT_EQ(out.kept.size(), 1u);
  EXPECT_EQ(keeps, 1);
}

// The current engine's time is the best of its measurements: a trial that finds it faster
// lowers the bar the others must beat.
TEST(StageSearch, TheCurrentEngineKeepsItsBestMeasurement) {
  FakeDevice d;
  d.times = {{"10", 0.985}};
  d.current = 0.98;  // measured in turn with the trials: faster than the 1.0 given at the start
  int keeps = 0;
  const auto out = run(d, {2, 2}, &keeps);
  EXPECT_TRUE(out.kept.empty());  // 0.985 is not 0.5 % under 0.98
  EXPECT_DOUBLE_EQ(out.ms, 0.98);
  ASSERT_FALSE(out.trials.empty());
  EXPECT_DOUBLE_EQ(out.trials[0].againstMs, 0.98);
}

}  // namespace
}  // namespace edgeinfer::builder
