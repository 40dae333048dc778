// The rule of the INT8 stage search (builder.cpp, searchInt8Stages): which runs of an all-INT8
// engine's network stages to try in FP16, in which order, and which to keep, apart from the
// builds and the device. The builder passes a function that builds and measures a trial; the
// rule itself is device-free, so it is tested on the host with made-up timings
// (tests/unit/test_stage_search.cpp).
//
// Rounds: each round tries every stage not yet in FP16 alone, then extends runs best first (the
// fastest run measured and not yet extended, while within `extend` of the current engine, is
// tried with its next stage too), and keeps the round's fastest run when it beats the current
// engine by `gain`; the next round starts from that engine. A run's two ends pay a reformat
// each, which a longer run can earn back: ResNet-50 at batch 1 on an H200, layer1 alone in
// FP16 0.5-2.5 % slower than all-INT8, layer1 and layer2 together 2-6 % faster
// (docs/performance.md). No run takes the last INT8 layers; at most `maxTrials` trials; a
// failed trial ends the search (what was kept before stays).
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "edgeinfer/status.h"

namespace edgeinfer::builder {

struct StageSearchOptions {
  double gain = 0.005;    ///< a round's best run is kept when the engine runs this much faster
  double extend = 0.05;   ///< a run is extended while within this of the current engine
  size_t maxTrials = 24;  ///< trial builds in all
};

/// What a trial measured: the engine with the run in FP16, and the current engine measured in
/// turn with it (the search keeps the better of the current engine's measurements).
struct StageTrialTimes {
  double trialMs = 0.0;
  double currentMs = 0.0;
};

/// One trial, in the order tried.
struct StageTrial {
  size_t begin = 0, end = 0;  ///< stages [begin, end] in FP16, with the runs kept before
  size_t layers = 0;          ///< INT8 layers the run moves
  double ms = 0.0;            ///< the trial engine's time
  double againstMs = 0.0;     ///< the current engine's time then
  std::string error;          ///< non-empty: the trial failed, and the search stopped there
};

struct StageSearchOutcome {
  std::vector<StageTrial> trials;
  std::vector<std::pair<size_t, size_t>> kept;  ///< runs kept, [begin, end], in order
  std::vector<bool> inFp16;                     ///< per stage: moved to FP16
  size_t moved = 0;                             ///< layers moved
  double ms = 0.0;                              ///< the final engine's time
  bool failed = false;                          ///< a trial failed
};

/// Called for each trial with the stages to run in FP16 (the runs kept and the one tried) and
/// the fastest time of the round's trials so far (0 for its first): a caller holding only one
/// trial engine at a time keeps this one's when it is faster, as the round may keep it.
using StageTrialFn =
    std::function<Expected<StageTrialTimes>(const std::vector<bool>& inFp16, double roundBestMs)>;

/// The search over stages whose INT8 layer counts are `stageLayers` (every one above 0) from a
/// current engine running in `currentMs`. `keep` is called when a round keeps its fastest trial:
/// the caller's engine of that trial becomes the current one.
StageSearchOutcome searchStages(const std::vector<size_t>& stageLayers, double currentMs,
                                const StageTrialFn& trial, const std::function<void()>& keep,
                                const StageSearchOptions& options = {});

}  // namespace edgeinfer::builder
