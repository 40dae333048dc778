#include "edgeinfer/types.h"

namespace edgeinfer {

size_t dataTypeSize(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return 4;
    case DataType::kFloat16:
      return 2;
    case DataType::kBFloat16:
      return 2;
    case DataType::kInt8:
      return 1;
    case DataType::kUInt8:
      return 1;
    case DataType::kInt32:
      return 4;
    case DataType::kInt64:
      return 8;
    case DataType::kBool:
      return 1;
    case DataType::kUndefined:
      return 0;
  }
  return 0;
}

const char* dataTypeName(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return "float32";
    case DataType::kFloat16:
      return "float16";
    case DataType::kBFloat16:
      return "bfloat16";
    case DataType::kInt8:
      return "int8";
    case DataType::kUInt8:
      return "uint8";
    case DataType::kInt32:
      return "int32";
    case DataType::kInt64:
      return "int64";
    case DataType::kBool:
      return "bool";
    case DataType::kUndefined:
      return "undefined";
  }
  return "undefined";
}

bool isFloatingPoint(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16 || t == DataType::kBFloat16;
}

bool isInteger(DataType t) {
  return t == DataType::kInt8 || t == DataType::kUInt8 || t == DataType::kInt32 ||
         t == DataType::kInt64;
}

bool Shape::isStatic() const {
  for (int64_t d : dims_)
    if (d < 0) return false;
  return true;
}

int64_t Shape::numel() const {
  int64_t n = 1;
  for (int64_t d : dims_) {
    if (d < 0) return -1;
    n *= d;
  }
  return n;
}

int64_t Shape::span(size_t begin, size_t end) const {
  int64_t n = 1;
  for (size_t i = begin; i < end && i < dims_.size(); ++i) n *= dims_[i];
  return n;
}

std::string Shape::toString() const {
  std::string s = "[";
  for (size_t i = 0; i < dims_.size(); ++i) {
    if (i) s += ",";
    s += dims_[i] < 0 ? std::string("?") : std::to_string(dims_[i]);
  }
  return s + "]";
}

std::vector<int64_t> contiguousStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.rank(), 1);
  for (int64_t i = static_cast<int64_t>(shape.rank()) - 2; i >= 0; --i)
    strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

}  // namespace edgeinfer
