// Device copies of converted weights, shared by every tactic of the process that uploads the
// same bytes to the same device: the shape profiles of one engine (whose layers keep the same
// weights in the same format at every batch size), two engines loaded from one file (two
// pipelines on one model), and, during a build, the candidates of a layer that convert its
// weights alike (every cuDNN engine configuration of an FP16 NHWC convolution).
//
// Like the library handles (library_handles.h), the process-wide store keeps only weak
// references: a block is freed with its last holder, and nothing outlives the engines that
// use it. A block is found by its size and a hash of its bytes, then compared byte for byte
// with the device copy before it is shared, so two different weights never share memory
// whatever the hash says. Blocks under `minSharedBytes` (biases, scales) are not looked up.
//
//   std::shared_ptr<void> w;
//   EI_RETURN_IF_ERROR(uploadWeights(host.data(), host.size(), &w));   // in initialize()
//   kernelArgs.w = w.get();
//
// Weights must be read-only on the device once uploaded: a tactic that rewrote its block would
// change every other holder's. Host code only (cuda_runtime in the .cpp).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

/// A fast 64-bit hash of `bytes` bytes (eight-byte words, four lanes); not cryptographic.
uint64_t hashWeightBytes(const void* data, size_t bytes);

class DeviceWeightStore {
 public:
  using HashFn = uint64_t (*)(const void*, size_t);
  /// `hash` picks the candidates to compare (tests pass a constant one to force collisions).
  explicit DeviceWeightStore(HashFn hash = hashWeightBytes, size_t minSharedBytes = 64 * 1024);

  /// The store the tactics use: one per process, for every device.
  static DeviceWeightStore& process();

  /// A device copy of [host, host + bytes) on the current CUDA device: a live block with the
  /// same bytes on that device when there is one, else a new allocation (freed with its last
  /// holder). kOutOfMemory naming the size when the device is full, kCudaError otherwise.
  Expected<std::shared_ptr<void>> upload(const void* host, size_t bytes);

  struct Stats {
    int64_t liveBlocks = 0;               ///< blocks held now (shareable ones only)
    int64_t liveBytes = 0;                ///< their bytes
    int64_t sharedUploads = 0;            ///< uploads answered with a live block (no new memory)
    int64_t sharedBytes = 0;              ///< their bytes
    int64_t hashMatchesThatDiffered = 0;  ///< same size and hash, different bytes
  };
  Stats stats() const;

 private:
  struct Block {
    int device;
    size_t bytes;
    std::weak_ptr<void> memory;
  };
  HashFn hash_;
  size_t minShared_;
  mutable std::mutex mu_;
  std::unordered_multimap<uint64_t, Block> blocks_;  // by hash (of the bytes and the size)
  size_t liveHint_ = 0;                              // blocks after the last sweep of freed ones
  int64_t sharedUploads_ = 0, sharedBytes_ = 0, differed_ = 0;
};

/// Uploads through the process-wide store into `*block` (replacing what it held).
Status uploadWeights(const void* host, size_t bytes, std::shared_ptr<void>* block);

}  // namespace edgeinfer::cuda
