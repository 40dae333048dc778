// Stream assignment of plan steps (stream_schedule.h).
#include "runtime/cuda/stream_schedule.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace edgeinfer::runtime::cuda {

StreamSchedule scheduleStreams(const std::vector<StepAccess>& steps, int maxStreams) {
  const int n = static_cast<int>(steps.size());
  maxStreams = std::max(1, maxStreams);
  StreamSchedule r;
  r.stream.assign(static_cast<size_t>(n), -1);
  r.waits.assign(static_cast<size_t>(n), {});
  r.record.assign(static_cast<size_t>(n), false);
  r.window.resize(static_cast<size_t>(n));
  r.happensBefore.assign(static_cast<size_t>(n), std::vector<bool>(static_cast<size_t>(n), false));
  auto& hb = r.happensBefore;

  // Dependencies through storage: read after write, write after write, write after read.
  std::vector<std::vector<int>> deps(static_cast<size_t>(n));
  std::map<int, int> lastWriter;
  std::map<int, std::vector<int>> readersSinceWrite;
  for (int i = 0; i < n; ++i) {
    const StepAccess& a = steps[static_cast<size_t>(i)];
    if (!a.work) continue;
    std::set<int, std::greater<int>> d;
    for (int root : a.reads) {
      const auto w = lastWriter.find(root);
      if (w != lastWriter.end()) d.insert(w->second);
    }
    for (int root : a.writes) {
      const auto w = lastWriter.find(root);
      if (w != lastWriter.end()) d.insert(w->second);
      for (int reader : readersSinceWrite[root])
        if (reader != i) d.insert(reader);
    }
    for (int root : a.reads) readersSinceWrite[root].push_back(i);
    for (int root : a.writes) {
      lastWriter[root] = i;
      readersSinceWrite[root].clear();
    }
    deps[static_cast<size_t>(i)].assign(d.begin(), d.end());  // latest first
  }

  std::vector<int> tail(static_cast<size_t>(maxStreams), -1);
  int used = 0;
  for (int i = 0; i < n; ++i) {
    if (!steps[static_cast<size_t>(i)].work) continue;
    const std::vector<int>& di = deps[static_cast<size_t>(i)];
    // Everything the step is ordered after anyway: its dependencies and what precedes them.
    std::vector<bool> closure(static_cast<size_t>(n), false);
    for (int d : di) {
      closure[static_cast<size_t>(d)] = true;
      for (int j = 0; j < d; ++j)
        if (hb[static_cast<size_t>(d)][static_cast<size_t>(j)])
          closure[static_cast<size_t>(j)] = true;
    }
    int s = -1;
    if (maxStreams == 1) {
      s = 0;
      used = 1;
    } else {
      const int latest = di.empty() ? -1 : di.front();
      if (latest >= 0 && tail[static_cast<size_t>(r.stream[static_cast<size_t>(latest)])] == latest)
        s = r.stream[static_cast<size_t>(latest)];  // continues the branch it follows
      for (int t = 0; s < 0 && t < used; ++t) {     // a stream whose last step it follows anyway
        const int last = tail[static_cast<size_t>(t)];
        if (last >= 0 && closure[static_cast<size_t>(last)]) s = t;
      }
      if (s < 0 && used < maxStreams) s = used++;  // a new branch
      if (s < 0) {                                 // the stream idle the longest
        s = 0;
        for (int t = 1; t < used; ++t)
          if (tail[static_cast<size_t>(t)] < tail[static_cast<size_t>(s)]) s = t;
      }
    }
    std::vector<bool> before(static_cast<size_t>(n), false);
    const int last = tail[static_cast<size_t>(s)];
    if (last >= 0) {
      before = hb[static_cast<size_t>(last)];
      before[static_cast<size_t>(last)] = true;
    }
    for (int d : di) {
      if (before[static_cast<size_t>(d)]) continue;
      r.waits[static_cast<size_t>(i)].push_back(d);
      r.record[static_cast<size_t>(d)] = true;
      before[static_cast<size_t>(d)] = true;
      for (int j = 0; j < d; ++j)
        if (hb[static_cast<size_t>(d)][static_cast<size_t>(j)])
          before[static_cast<size_t>(j)] = true;
    }
    hb[static_cast<size_t>(i)] = std::move(before);
    r.stream[static_cast<size_t>(i)] = s;
    tail[static_cast<size_t>(s)] = i;
  }
  r.streams = std::max(used, 1);

  for (int i = 0; i < n; ++i) {
    int lo = i, hi = i;
    if (steps[static_cast<size_t>(i)].work)
      for (int j = 0; j < n; ++j)
        if (j != i && steps[static_cast<size_t>(j)].work &&
            !hb[static_cast<size_t>(i)][static_cast<size_t>(j)] &&
            !hb[static_cast<size_t>(j)][static_cast<size_t>(i)]) {
          lo = std::min(lo, j);
          hi = std::max(hi, j);
        }
    r.window[static_cast<size_t>(i)] = {lo, hi};
  }
  return r;
}

void stretchLifetimes(const std::vector<StepAccess>& steps, const StreamSchedule& schedule,
                      std::vector<int64_t>* last) {
  for (size_t i = 0; i < steps.size() && i < schedule.window.size(); ++i) {
    const int64_t hi = schedule.window[i].second;
    if (!steps[i].work || hi <= static_cast<int64_t>(i)) continue;
    for (const std::vector<int>* roots : {&steps[i].reads, &steps[i].writes})
      for (int r : *roots)
        if (r >= 0 && static_cast<size_t>(r) < last->size())
          (*last)[static_cast<size_t>(r)] = std::max((*last)[static_cast<size_t>(r)], hi);
  }
}

}  // namespace edgeinfer::runtime::cuda
