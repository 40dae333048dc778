// Activation memory planning by liveness: every intermediate tensor gets an offset in one
// arena, and tensors whose lifetimes do not overlap share bytes. Used by every backend's
// execution context (the CPU reference today, the CUDA backend next); the plan depends only
// on the graph order and the tensor sizes.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "edgeinfer/status.h"

namespace edgeinfer::runtime {

/// One tensor to place: its size and the first and last step (node index) it is live.
struct BufferRequest {
  std::string name;
  int64_t bytes = 0;
  int64_t firstUse = 0;  // step that writes it
  int64_t lastUse = 0;   // last step that reads it (inclusive)
};

struct MemoryPlan {
  std::unordered_map<std::string, int64_t> offsets;  // byte offset of each tensor in the arena
  int64_t arenaBytes = 0;                            // peak: what the arena needs
  int64_t naiveBytes = 0;                            // what one buffer per tensor would need
};

/// Places every request at the lowest aligned offset that overlaps no placed tensor whose
/// lifetime intersects its own, largest tensors first ("greedy by size", as TFLite's and
/// TensorRT's planners do). Deterministic for equal inputs.
Expected<MemoryPlan> planMemory(const std::vector<BufferRequest>& requests,
                                int64_t alignment = 256);

}  // namespace edgeinfer::runtime
