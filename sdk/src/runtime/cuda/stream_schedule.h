// Concurrent branches of a GPU engine: which CUDA stream each plan step runs on, and which
// steps of other streams it waits for. At batch 1 most layers fill a fraction of the GPU and
// are a few microseconds long, so independent branches (ResNet's downsample beside its
// bottleneck, Inception's towers, a detector's heads) can run side by side instead of one
// after another, as TensorRT's auxiliary streams do.
//
// Steps depend on each other through the storage they touch: a step reading a tensor waits
// for its writer, and one writing a tensor for its earlier writer and readers. Two tensors that
// share arena bytes are kept apart by the memory plan instead: lifetimes are stretched over
// each step's window (the steps it may run beside), so the planner never lets bytes one step
// uses be reused by a step that may run at the same time (cuda_engine.cpp).
//
// Plain C++ (no CUDA headers): the schedule is a function of the plan, tested on the host.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace edgeinfer::runtime::cuda {

/// What a plan step touches: the storage (a tensor's root, see CudaEngine::storageRoot) it
/// reads and writes. Steps that launch nothing (views) have `work` false.
struct StepAccess {
  bool work = false;
  std::vector<int> reads, writes;
};

struct StreamSchedule {
  int streams = 1;  ///< streams used; stream 0 is the context's own
  /// Per step: its stream (-1: no work), the steps of other streams it waits for (their
  /// events), whether an event is recorded after it (a later step waits for it), and the
  /// first and last step index it may run beside (itself when it runs beside none).
  std::vector<int> stream;
  std::vector<std::vector<int>> waits;
  std::vector<bool> record;
  std::vector<std::pair<int, int>> window;
  /// happensBefore[i][j]: step j finishes before step i starts (same stream or waited for,
  /// directly or through others). Kept for the tests and the windows.
  std::vector<std::vector<bool>> happensBefore;
};

/// Streams for `steps` in plan order, at most `maxStreams` (< 2: one stream, every step in
/// order, no waits). A step continues the stream of the dependency it follows, else takes a
/// stream whose last step it depends on anyway, else a new stream, else the stream idle the
/// longest; it waits for every dependency its stream does not already order before it.
StreamSchedule scheduleStreams(const std::vector<StepAccess>& steps, int maxStreams);

/// Stretches the liveness of storage for a memory planner working in step order: `last[root]`
/// (the last step index at which the root is live) goes on to the end of the window of every
/// step that touches it. Two roots whose stretched lifetimes do not overlap then have every
/// pair of their accessors ordered by the schedule, so they may share bytes.
void stretchLifetimes(const std::vector<StepAccess>& steps, const StreamSchedule& schedule,
                      std::vector<int64_t>* last);

}  // namespace edgeinfer::runtime::cuda
