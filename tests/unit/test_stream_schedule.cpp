// Concurrent branches of GPU engines (runtime/cuda/stream_schedule.h): which stream each plan
// step runs on and what it waits for. Host-only: the schedule is a function of the plan.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA
#include <random>
#include <vector>

#include "runtime/cuda/stream_schedule.h"
#include "runtime/memory_planner.h"

namespace edgeinfer {
namespace {

using runtime::cuda::scheduleStreams;
using runtime::cuda::StepAccess;
using runtime::cuda::StreamSchedule;

StepAccess step(std::vector<int> reads, std::vector<int> writes) {
  StepAccess a;
  a.work = true;
  a.reads = std::move(reads);
  a.writes = std::move(writes);
  return a;
}

/// What the streams and waits order, recomputed from them alone: a step follows the previous
/// step of its stream and the steps it waits for, and what those follow.
std::vector<std::vector<bool>> orderOf(const std::vector<StepAccess>& steps,
                                       const StreamSchedule& r) {
  const size_t n = steps.size();
  std::vector<std::vector<bool>> before(n, std::vector<bool>(n, false));
  std::vector<int> tail(static_cast<size_t>(r.streams), -1);
  for (size_t i = 0; i < n; ++i) {
    if (!steps[i].work) continue;
    std::vector<int> direct = r.waits[i];
    const int s = r.stream[i];
    EXPECT_GE(s, 0);
    EXPECT_LT(s, r.streams);
    if (tail[static_cast<size_t>(s)] >= 0) direct.push_back(tail[static_cast<size_t>(s)]);
    for (int d : direct) {
      EXPECT_LT(d, static_cast<int>(i)) << "step " << i << " waits for a later step";
      EXPECT_TRUE(r.record[static_cast<size_t>(d)] || d == tail[static_cast<size_t>(s)])
          << "step " << i << " waits for step " << d << ", which records no event";
      before[i][static_cast<size_t>(d)] = true;
      for (size_t j = 0; j < n; ++j)
        if (before[static_cast<size_t>(d)][j]) before[i][j] = true;
    }
    tail[static_cast<size_t>(s)] = static_cast<int>(i);
  }
  return before;
}

/// Every pair of steps touching the same storage with at least one write is ordered, the
/// schedule's own order is what its streams and waits give, and a step outside another's
/// window is ordered with it.
void expectSafe(const std::vector<StepAccess>& steps, const StreamSchedule& r) {
  const size_t n = steps.size();
  ASSERT_EQ(r.stream.size(), n);
  const auto order = orderOf(steps, r);
  EXPECT_EQ(order, r.happensBefore);
  const auto touches = [](const std::vector<int>& v, int root) {
    for (int x : v)
      if (x == root) return true;
    return false;
  };
  for (size_t i = 0; i < n; ++i) {
    if (!steps[i].work) {
      EXPECT_EQ(r.stream[i], -1);
      continue;
    }
    for (size_t j = 0; j < i; ++j) {
      if (!steps[j].work) continue;
      bool conflict = false;
      for (int w : steps[j].writes)
        conflict = conflict || touches(steps[i].reads, w) || touches(steps[i].writes, w);
      for (int w : steps[i].writes) conflict = conflict || touches(steps[j].reads, w);
      if (conflict) {
        EXPECT_TRUE(order[i][j]) << "step " << i << " is not ordered after " << j;
      }
      const bool inWindow =
          static_cast<int>(j) >= r.window[i].first && static_cast<int>(j) <= r.window[i].second;
      if (!order[i][j]) {  // unordered: each in the other's window
        EXPECT_TRUE(inWindow) << j << " may run beside " << i;
        EXPECT_GE(r.window[j].second, static_cast<int>(i)) << i << " may run beside " << j;
      }
    }
  }
}

TEST(StreamSchedule, ChainStaysOnOneStream) {
  const std::vector<StepAccess> s = {step({0}, {1}), step({1}, {2}), step({2}, {3})};
  const StreamSchedule r = scheduleStreams(s, 4);
  EXPECT_EQ(r.streams, 1);
  for (size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(r.stream[i], 0);
    EXPECT_TRUE(r.waits[i].empty());
    EXPECT_FALSE(r.record[i]);
    EXPECT_EQ(r.window[i], std::make_pair(static_cast<int>(i), static_cast<int>(i)));
  }
  expectSafe(s, r);
}

// A ResNet bottleneck with a projection shortcut: P -> A -> B, P -> D, (B, D) -> C.
TEST(StreamSchedule, ShortcutRunsBesideTheBottleneck) {
  const std::vector<StepAccess> s = {step({9}, {0}), step({0}, {1}), step({1}, {2}), step({0}, {3}),
                                     step({2, 3}, {4})};
  const StreamSchedule r = scheduleStreams(s, 4);
  EXPECT_EQ(r.streams, 2);
  EXPECT_EQ(r.stream[1], r.stream[0]);
  EXPECT_EQ(r.stream[2], r.stream[0]);
  EXPECT_NE(r.stream[3], r.stream[0]);
  EXPECT_EQ(r.waits[3], std::vector<int>{0});
  EXPECT_TRUE(r.record[0]);
  EXPECT_EQ(r.waits[4].size(), 1u);  // the branch C does not continue
  EXPECT_EQ(r.window[3], std::make_pair(1, 3));
  EXPECT_EQ(r.window[1], std::make_pair(1, 3));
  EXPECT_EQ(r.window[4], std::make_pair(4, 4));
  expectSafe(s, r);
}

TEST(StreamSchedule, OneStreamWhenAskedKeepsPlanOrder) {
  const std::vector<StepAccess> s = {step({9}, {0}), step({0}, {1}), step({1}, {2}), step({0}, {3}),
                                     step({2, 3}, {4})};
  for (int maxStreams : {1, 0, -3}) {
    const StreamSchedule r = scheduleStreams(s, maxStreams);
    EXPECT_EQ(r.streams, 1);
    for (size_t i = 0; i < s.size(); ++i) {
      EXPECT_EQ(r.stream[i], 0);
      EXPECT_TRUE(r.waits[i].empty());
      EXPECT_EQ(r.window[i], std::make_pair(static_cast<int>(i), static_cast<int>(i)));
    }
    expectSafe(s, r);
  }
}

// A step overwriting storage an earlier step still reads waits for that reader.
TEST(StreamSchedule, WriteAfterReadIsOrdered) {
  const std::vector<StepAccess> s = {step({}, {0}), step({0}, {1}), step({}, {0}), step({0}, {2})};
  const StreamSchedule r = scheduleStreams(s, 4);
  EXPECT_TRUE(r.happensBefore[2][1]);
  EXPECT_TRUE(r.happensBefore[3][2]);
  expectSafe(s, r);
}

TEST(StreamSchedule, StepsWithoutWorkGetNoStream) {
  std::vector<StepAccess> s = {step({9}, {0}), StepAccess{}, step({0}, {1})};
  const StreamSchedule r = scheduleStreams(s, 4);
  EXPECT_EQ(r.stream[1], -1);
  EXPECT_EQ(r.window[1], std::make_pair(1, 1));
  expectSafe(s, r);
  EXPECT_EQ(scheduleStreams({}, 4).streams, 1);
}

// Six branches off one tensor on at most three streams, joined by one step.
TEST(StreamSchedule, MoreBranchesThanStreams) {
  std::vector<StepAccess> s = {step({9}, {0})};
  std::vector<int> joined;
  for (int b = 0; b < 6; ++b) {
    s.push_back(step({0}, {10 + b}));
    joined.push_back(10 + b);
  }
  s.push_back(step(joined, {20}));
  const StreamSchedule r = scheduleStreams(s, 3);
  EXPECT_EQ(r.streams, 3);
  expectSafe(s, r);
  for (size_t i = 1; i <= 6; ++i) EXPECT_TRUE(r.happensBefore[7][i]);
}

// Random plans over a few storage roots, reads and writes mixed, views between.
TEST(StreamSchedule, RandomPlansKeepEveryDependency) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 40), roots = 1 + static_cast<int>(rng() % 12);
    std::vector<StepAccess> s(static_cast<size_t>(n));
    for (auto& a : s) {
      a.work = rng() % 8 != 0;
      for (int k = static_cast<int>(rng() % 4); k > 0; --k)
        a.reads.push_back(static_cast<int>(rng() % static_cast<unsigned>(roots)));
      for (int k = 1 + static_cast<int>(rng() % 2); k > 0; --k)
        a.writes.push_back(static_cast<int>(rng() % static_cast<unsigned>(roots)));
    }
    const StreamSchedule r = scheduleStreams(s, 1 + trial % 5);
    SCOPED_TRACE("trial " + std::to_string(trial));
    expectSafe(s, r);
    EXPECT_LE(r.streams, 1 + trial % 5);
  }
}

// Random plans (every tensor written once, read by later steps) through the schedule, the
// stretched lifetimes and the memory planner: two tensors given overlapping bytes never have
// accessors that may run at the same time. Without the stretch some plans break that, so the
// check can fail.
TEST(StreamSchedule, SharedBytesAreNeverTouchedAtTheSameTime) {
  std::mt19937 rng(11);
  int brokenWithoutStretch = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int n = 2 + static_cast<int>(rng() % 30);
    std::vector<StepAccess> s(static_cast<size_t>(n));
    std::vector<std::vector<int>> accessors(static_cast<size_t>(n));  // per root = its writer
    for (int i = 0; i < n; ++i) {
      StepAccess& a = s[static_cast<size_t>(i)];
      a.work = true;
      a.writes = {i};
      accessors[static_cast<size_t>(i)].push_back(i);
      for (int k = i == 0 ? 0 : 1 + static_cast<int>(rng() % 2); k > 0; --k) {
        const int r = static_cast<int>(rng() % static_cast<unsigned>(i));
        a.reads.push_back(r);
        accessors[static_cast<size_t>(r)].push_back(i);
      }
    }
    const StreamSchedule r = scheduleStreams(s, 4);
    std::vector<int64_t> last(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t)
      for (int a : accessors[static_cast<size_t>(t)])
        last[static_cast<size_t>(t)] = std::max<int64_t>(last[static_cast<size_t>(t)], a);
    for (bool stretch : {false, true}) {
      std::vector<int64_t> l = last;
      if (stretch) runtime::cuda::stretchLifetimes(s, r, &l);
      std::vector<runtime::BufferRequest> req;
      for (int t = 0; t < n; ++t)
        req.push_back({std::to_string(t), 1 + static_cast<int64_t>(rng() % 64), t,
                       l[static_cast<size_t>(t)]});
      auto plan = runtime::planMemory(req, 1);
      ASSERT_TRUE(plan.ok()) << plan.status().toString();
      int broken = 0;
      for (int t1 = 0; t1 < n; ++t1)
        for (int t2 = t1 + 1; t2 < n; ++t2) {
          const int64_t o1 = plan->offsets.at(req[static_cast<size_t>(t1)].name),
                        o2 = plan->offsets.at(req[static_cast<size_t>(t2)].name);
          if (o1 + req[static_cast<size_t>(t1)].bytes <= o2 ||
              o2 + req[static_cast<size_t>(t2)].bytes <= o1)
            continue;  // apart
          for (int a : accessors[static_cast<size_t>(t1)])
            for (int b : accessors[static_cast<size_t>(t2)])
              if (a != b && !r.happensBefore[static_cast<size_t>(a)][static_cast<size_t>(b)] &&
                  !r.happensBefore[static_cast<size_t>(b)][static_cast<size_t>(a)])
                ++broken;
        }
      if (stretch) {
        EXPECT_EQ(broken, 0) << "trial " << trial;
      } else {
        brokenWithoutStretch += broken > 0;
      }
    }
  }
  EXPECT_GT(brokenWithoutStretch, 0) << "no plan needed the stretch: the check proves nothing";
}

}  // namespace
}  // namespace edgeinfer
#endif  // EDGEINFER_HAVE_CUDA
