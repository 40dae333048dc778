#include "runtime/memory_planner.h"

#include <algorithm>
#include <numeric>

namespace edgeinfer::runtime {

Expected<MemoryPlan> planMemory(const std::vector<BufferRequest>& requests, int64_t alignment) {
  if (alignment <= 0 || (alignment & (alignment - 1)) != 0)
    return Status(ErrorCode::kInvalidArgument, "alignment must be a power of two");
  MemoryPlan plan;
  auto align = [&](int64_t v) { return (v + alignment - 1) / alignment * alignment; };
  for (const auto& r : requests) {
    if (r.bytes < 0 || r.firstUse > r.lastUse)
      return Status(ErrorCode::kInvalidArgument, "bad buffer request for '" + r.name + "'");
    plan.naiveBytes += align(r.bytes);
  }
  std::vector<size_t> order(requests.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return requests[a].bytes > requests[b].bytes; });
  struct Placed {
    int64_t offset, size, first, last;
  };
  std::vector<Placed> placed;
  for (size_t idx : order) {
    const BufferRequest& r = requests[idx];
    const int64_t size = align(std::max<int64_t>(r.bytes, 1));
    // Intervals taken by tensors live at the same time, sorted by offset.
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Placed& p : placed)
      if (p.first <= r.lastUse && r.firstUse <= p.last)
        busy.emplace_back(p.offset, p.offset + p.size);
    std::sort(busy.begin(), busy.end());
    int64_t offset = 0;
    for (const auto& [begin, end] : busy) {
      if (offset + size <= begin) break;  // fits in the gap before this one
      offset = std::max(offset, end);
    }
    placed.push_back({offset, size, r.firstUse, r.lastUse});
    plan.offsets[r.name] = offset;
    plan.arenaBytes = std::max(plan.arenaBytes, offset + size);
  }
  return plan;
}

}  // namespace edgeinfer::runtime
