#include "kernels/cuda/device_weights.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_check.h"

namespace edgeinfer::cuda {

namespace {

inline uint64_t rotl(uint64_t x, int r) {
  return (x << r) | (x >> (64 - r));
}

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;

inline uint64_t mix(uint64_t h, uint64_t w) {
  return rotl(h ^ (w * kPrime2), 31) * kPrime1;
}

/// A fresh device allocation holding the bytes, freed with its last holder.
Expected<std::shared_ptr<void>> allocate(const void* host, size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, std::max<size_t>(bytes, 16));  // (vector loads)
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // clear it: the caller may go on (e.g. another tactic)
    return Status(ErrorCode::kOutOfMemory,
                  "not enough GPU memory for " + std::to_string(bytes) + " bytes of weights");
  }
  EI_CUDA_CHECK(e);
  std::shared_ptr<void> block(p, [](void* q) { cudaFree(q); });
  if (bytes) EI_CUDA_CHECK(cudaMemcpy(p, host, bytes, cudaMemcpyHostToDevice));
  return block;
}

}  // namespace

uint64_t hashWeightBytes(const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t lane[4] = {kPrime1 ^ bytes, kPrime2, rotl(kPrime1, 17), rotl(kPrime2, 29)};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * k, 8);
      lane[k] = mix(lane[k], w);
    }
  uint64_t h = rotl(lane[0], 1) + rotl(lane[1], 7) + rotl(lane[2], 12) + rotl(lane[3], 18);
  for (; i < bytes; ++i) h = mix(h, p[i]);
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  return h;
}

DeviceWeightStore::DeviceWeightStore(HashFn hash, size_t minSharedBytes)
    : hash_(hash), minShared_(minSharedBytes) {}

DeviceWeightStore& DeviceWeightStore::process() {
  static DeviceWeightStore store;  // weak references only: its end frees nothing
  return store;
}

Expected<std::shared_ptr<void>> DeviceWeightStore::upload(const void* host, size_t bytes) {
  if (bytes < minShared_ || !host) return allocate(host, bytes);
  int device = 0;
  EI_CUDA_CHECK(cudaGetDevice(&device));
  const uint64_t key = hash_(host, bytes) ^ (static_cast<uint64_t>(bytes) * kPrime1);
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<uint8_t> onDevice;
  auto range = blocks_.equal_range(key);
  for (auto it = range.first; it != range.second;) {
    std::shared_ptr<void> live = it->second.memory.lock();
    if (!live) {  // freed by its last holder: forget it
      it = blocks_.erase(it);
      continue;
    }
    if (it->second.device == device && it->second.bytes == bytes) {
      onDevice.resize(bytes);
      EI_CUDA_CHECK(cudaMemcpy(onDevice.data(), live.get(), bytes, cudaMemcpyDeviceToHost));
      if (std::memcmp(onDevice.data(), host, bytes) == 0) {
        ++sharedUploads_;
        sharedBytes_ += static_cast<int64_t>(bytes);
        return live;
      }
      ++differed_;
    }
    ++it;
  }
  EI_ASSIGN_OR_RETURN(std::shared_ptr<void> block, allocate(host, bytes));
  blocks_.emplace(key, Block{device, bytes, block});
  // Now and then, forget every block that has been freed (lookups only prune their own key).
  if (blocks_.size() >= 2 * liveHint_ + 64) {
    for (auto it = blocks_.begin(); it != blocks_.end();)
      it = it->second.memory.expired() ? blocks_.erase(it) : std::next(it);
    liveHint_ = blocks_.size();
  }
  return block;
}

DeviceWeightStore::Stats DeviceWeightStore::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats s;
  for (const auto& [key, b] : blocks_)
    if (!b.memory.expired()) {
      ++s.liveBlocks;
      s.liveBytes += static_cast<int64_t>(b.bytes);
    }
  s.sharedUploads = sharedUploads_;
  s.sharedBytes = sharedBytes_;
  s.hashMatchesThatDiffered = differed_;
  return s;
}

Status uploadWeights(const void* host, size_t bytes, std::shared_ptr<void>* block) {
  block->reset();
  EI_ASSIGN_OR_RETURN(*block, DeviceWeightStore::process().upload(host, bytes));
  return Status::Ok();
}

}  // namespace edgeinfer::cuda
