// Weights shared by the engines of one container file (engines with shape profiles,
// profile_format.h; engines with shape ranges, range_format.h). The sub-engines of a container
// are complete engine files, and most of their initializers are equal (every profile of a
// model, the model and its opt build): the container holds each distinct initializer once, in
// its weights pool, and a sub-engine's initializer refers to it as ONNX external data:
//
//   data_location = EXTERNAL, external_data = {location: "edgeinfer:weight-pool",
//                                              offset: <bytes>, length: <bytes>}
//
// Blocks in the pool start at multiples of kWeightPoolAlignment. A decoder copies the pool
// into one host allocation, and the tensors that refer to it are views of that copy, so equal
// initializers of several sub-engines also share host memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"

namespace edgeinfer::builder {

/// ONNX external-data location of an initializer held in its container's weights pool.
inline constexpr char kWeightPoolLocation[] = "edgeinfer:weight-pool";
/// Where blocks start in the pool (and the alignment of the decoder's host copy).
inline constexpr size_t kWeightPoolAlignment = 64;
/// Initializers smaller than this stay in their engine's graph (shape operands, scalars).
inline constexpr size_t kMinPooledBytes = 256;

/// The pool a container's encoder fills: equal byte blocks are stored once.
class WeightPool {
 public:
  /// The offset of a block equal to `data` (`size` bytes), appended if the pool has none.
  uint64_t add(const void* data, size_t size);
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  /// Bytes that add() was given and found already in the pool.
  uint64_t sharedBytes() const { return shared_; }

 private:
  std::vector<uint8_t> bytes_;
  std::unordered_multimap<uint64_t, std::pair<uint64_t, uint64_t>> index_;  // hash -> block
  uint64_t shared_ = 0;
};

/// A decoded pool: one host copy that the tensors referring to it share.
struct SharedWeights {
  std::shared_ptr<Storage> storage;
  size_t size = 0;

  /// A 64-byte-aligned host copy of `size` bytes (kOutOfMemory if it cannot be allocated).
  static Expected<SharedWeights> copyOf(const uint8_t* data, size_t size);
};

}  // namespace edgeinfer::builder
