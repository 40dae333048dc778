#include "builder/stage_search.h"

#include <algorithm>
#include <numeric>

namespace edgeinfer::builder {

StageSearchOutcome searchStages(const std::vector<size_t>& stageLayers, double currentMs,
                                const StageTrialFn& trial, const std::function<void()>& keep,
                                const StageSearchOptions& options) {
  StageSearchOutcome out;
  const size_t n = stageLayers.size();
  out.inFp16.assign(n, false);
  out.ms = currentMs;
  size_t int8Left = std::accumulate(stageLayers.begin(), stageLayers.end(), size_t{0});
  size_t tried = 0;
  struct Run {
    size_t begin = 0, end = 0, layers = 0;
    double ms = 0.0;
    bool extended = false;
  };
  while (tried < options.maxTrials && !out.failed) {
    std::vector<Run> runs;
    double bestMs = 0.0;
    size_t best = 0;
    // Tries the stages [begin, end] in FP16 (with those kept before); records the run.
    const auto tryRun = [&](size_t begin, size_t end, size_t layers) {
      ++tried;
      std::vector<bool> fp16 = out.inFp16;
      for (size_t k = begin; k <= end; ++k) fp16[k] = true;
      StageTrial t;
      t.begin = begin;
      t.end = end;
      t.layers = layers;
      t.againstMs = out.ms;
      auto times = trial(fp16, runs.empty() ? 0.0 : bestMs);
      if (!times.ok()) {
        t.error = times.status().message();
        out.trials.push_back(std::move(t));
        out.failed = true;
        return;
      }
      out.ms = std::min(out.ms, times->currentMs);
      t.ms = times->trialMs;
      t.againstMs = out.ms;
      out.trials.push_back(t);
      if (runs.empty() || t.ms < bestMs) {
        bestMs = t.ms;
        best = runs.size();
      }
      runs.push_back(Run{begin, end, layers, t.ms, false});
    };
    for (size_t i = 0; i < n && tried < options.maxTrials && !out.failed; ++i)
      if (!out.inFp16[i] && stageLayers[i] < int8Left) tryRun(i, i, stageLayers[i]);
    while (tried < options.maxTrials && !out.failed) {
      Run* next = nullptr;
      for (Run& r : runs)
        if (!r.extended && r.ms < (1.0 + options.extend) * out.ms && (!next || r.ms < next->ms))
          next = &r;
      if (!next) break;
      next->extended = true;
      const size_t j = next->end + 1;
      if (j >= n || out.inFp16[j] || next->layers + stageLayers[j] >= int8Left) continue;
      const Run from = *next;  // tryRun appends to `runs`
      tryRun(from.begin, j, from.layers + stageLayers[j]);
    }
    if (runs.empty() || !(bestMs < (1.0 - options.gain) * out.ms)) break;
    const Run& kept = runs[best];
    for (size_t k = kept.begin; k <= kept.end; ++k) out.inFp16[k] = true;
    out.kept.emplace_back(kept.begin, kept.end);
    out.moved += kept.layers;
    int8Left -= kept.layers;
    out.ms = kept.ms;
    keep();
  }
  return out;
}

}  // namespace edgeinfer::builder
