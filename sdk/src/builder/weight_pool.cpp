#include "builder/weight_pool.h"

#include "builder/engine_format.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

namespace edgeinfer::builder {

uint64_t WeightPool::add(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  const uint64_t h = fnv1a64(p, size);  // a bucket key: equal blocks are compared
  const auto [first, last] = index_.equal_range(h);
  for (auto it = first; it != last; ++it) {
    const auto [offset, n] = it->second;
    if (n == size && std::memcmp(bytes_.data() + offset, p, size) == 0) {
      shared_ += size;
      return offset;
    }
  }
  const uint64_t offset = bytes_.size();
  bytes_.insert(bytes_.end(), p, p + size);
  bytes_.resize((bytes_.size() + kWeightPoolAlignment - 1) / kWeightPoolAlignment *
                kWeightPoolAlignment);
  index_.emplace(h, std::make_pair(offset, static_cast<uint64_t>(size)));
  return offset;
}

Expected<SharedWeights> SharedWeights::copyOf(const uint8_t* data, size_t size) {
  const size_t rounded = (std::max<size_t>(size, 1) + kWeightPoolAlignment - 1) /
                         kWeightPoolAlignment * kWeightPoolAlignment;
  void* p = std::aligned_alloc(kWeightPoolAlignment, rounded);
  if (!p)
    return Status(ErrorCode::kOutOfMemory,
                  "cannot allocate " + std::to_string(size) + " bytes for the shared weights");
  if (size) std::memcpy(p, data, size);
  SharedWeights w;
  w.storage =
      std::make_shared<Storage>(p, size, MemoryLocation::kHost, [](void* q) { std::free(q); });
  w.size = size;
  return w;
}

}  // namespace edgeinfer::builder
