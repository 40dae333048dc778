// Element types and shapes shared by the whole SDK.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace edgeinfer {

enum class DataType : uint8_t {
  kUndefined = 0,
  kFloat32,
  kFloat16,
  kBFloat16,
  kInt8,
  kUInt8,
  kInt32,
  kInt64,
  kBool,
};

/// Bytes per element (0 for kUndefined).
size_t dataTypeSize(DataType t);
/// "float32", "float16", ...
const char* dataTypeName(DataType t);
bool isFloatingPoint(DataType t);
bool isInteger(DataType t);

/// A tensor shape. A dimension below zero is unknown at build time (for example a
/// dynamic batch); concrete tensors never have one.
class Shape {
 public:
  static constexpr int64_t kUnknown = -1;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) : dims_(dims) {}
  explicit Shape(std::vector<int64_t> dims) : dims_(std::move(dims)) {}

  size_t rank() const { return dims_.size(); }
  int64_t operator[](size_t i) const { return dims_[i]; }
  int64_t& operator[](size_t i) { return dims_[i]; }
  const std::vector<int64_t>& dims() const { return dims_; }
  std::vector<int64_t>& dims() { return dims_; }
  bool isStatic() const;
  /// Product of the dimensions (1 for a scalar); -1 if any dimension is unknown.
  int64_t numel() const;
  /// Product of dims [begin, end).
  int64_t span(size_t begin, size_t end) const;
  std::string toString() const;  // "[1,3,224,224]" with "?" for unknown dims

  bool operator==(const Shape& o) const { return dims_ == o.dims_; }
  bool operator!=(const Shape& o) const { return dims_ != o.dims_; }

 private:
  std::vector<int64_t> dims_;
};

/// Row-major strides of a static shape, in elements.
std::vector<int64_t> contiguousStrides(const Shape& shape);

}  // namespace edgeinfer
