// A typed, shaped block of memory on the host or on a device. Copies share the storage
// (like a shared_ptr); clone() makes a deep copy.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "edgeinfer/status.h"
#include "edgeinfer/types.h"

namespace edgeinfer {

enum class MemoryLocation : uint8_t { kHost = 0, kDevice = 1 };

/// Owns (or borrows) a byte range. Device storage is freed through the deleter
/// that the backend which allocated it installed.
class Storage {
 public:
  using Deleter = std::function<void(void*)>;
  Storage(void* ptr, size_t bytes, MemoryLocation loc, Deleter deleter)
      : ptr_(ptr), bytes_(bytes), loc_(loc), deleter_(std::move(deleter)) {}
  ~Storage() {
    if (deleter_ && ptr_) deleter_(ptr_);
  }
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  MemoryLocation location() const { return loc_; }

 private:
  void* ptr_;
  size_t bytes_;
  MemoryLocation loc_;
  Deleter deleter_;
};

class Tensor {
 public:
  Tensor() = default;

  /// Allocates a zero-filled host tensor. Fails (kOutOfMemory / kInvalidArgument) instead of
  /// throwing when the shape is not static or the allocation is too large.
  static Expected<Tensor> create(DataType dtype, const Shape& shape);
  /// Like create(), but aborts on failure: for tests and small, known-good sizes only.
  static Tensor zeros(DataType dtype, const Shape& shape);
  /// Wraps memory the caller owns; the caller keeps it alive as long as the tensor is used.
  static Tensor wrap(void* data, DataType dtype, const Shape& shape,
                     MemoryLocation loc = MemoryLocation::kHost);
  /// Wraps shared storage (used by backends that allocate device memory).
  static Tensor fromStorage(std::shared_ptr<Storage> storage, DataType dtype, const Shape& shape,
                            size_t byteOffset = 0);

  bool empty() const { return storage_ == nullptr; }
  DataType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t numel() const { return shape_.numel(); }
  size_t bytes() const { return static_cast<size_t>(numel()) * dataTypeSize(dtype_); }
  MemoryLocation location() const {
    return storage_ ? storage_->location() : MemoryLocation::kHost;
  }
  bool onHost() const { return location() == MemoryLocation::kHost; }

  void* raw() { return storage_ ? static_cast<char*>(storage_->data()) + offset_ : nullptr; }
  const void* raw() const {
    return storage_ ? static_cast<const char*>(storage_->data()) + offset_ : nullptr;
  }
  template <typename T>
  T* data() {
    return static_cast<T*>(raw());
  }
  template <typename T>
  const T* data() const {
    return static_cast<const T*>(raw());
  }

  /// Same storage, another shape with the same element count.
  Expected<Tensor> reshaped(const Shape& shape) const;
  /// Deep copy into new host memory (host tensors only).
  Tensor clone() const;
  /// Reads element i of any numeric type as double / int64 (host tensors only; for
  /// shape computations and tests, not for hot loops).
  double getAsDouble(int64_t i) const;
  int64_t getAsInt64(int64_t i) const;

  std::string describe() const;  // "float32[1,3,224,224]"

 private:
  std::shared_ptr<Storage> storage_;
  size_t offset_ = 0;
  DataType dtype_ = DataType::kUndefined;
  Shape shape_;
};

}  // namespace edgeinfer
