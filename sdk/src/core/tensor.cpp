#include "edgeinfer/tensor.h"

#include <cstdlib>
#include <cstring>
#include <new>

#include "core/half.h"

namespace edgeinfer {

Expected<Tensor> Tensor::create(DataType dtype, const Shape& shape) {
  if (dtype == DataType::kUndefined)
    return Status(ErrorCode::kInvalidArgument, "cannot allocate a tensor of undefined type");
  if (!shape.isStatic())
    return Status(ErrorCode::kInvalidArgument,
                  "cannot allocate a tensor of non-static shape " + shape.toString());
  // Guard the multiplication against overflow before trusting numel().
  int64_t n = 1;
  for (int64_t d : shape.dims()) {
    if (d != 0 && n > (int64_t{1} << 50) / d)
      return Status(ErrorCode::kOutOfMemory, "tensor shape " + shape.toString() + " is too large");
    n *= d;
  }
  const size_t bytes = static_cast<size_t>(n) * dataTypeSize(dtype);
  void* p = std::calloc(bytes ? bytes : 1, 1);
  if (!p)
    return Status(ErrorCode::kOutOfMemory, "cannot allocate " + std::to_string(bytes) +
                                               " bytes for tensor " + shape.toString());
  Tensor t;
  t.storage_ =
      std::make_shared<Storage>(p, bytes, MemoryLocation::kHost, [](void* q) { std::free(q); });
  t.dtype_ = dtype;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::zeros(DataType dtype, const Shape& shape) {
  auto t = create(dtype, shape);
  if (!t.ok()) std::abort();
  return std::move(t).value();
}

Tensor Tensor::wrap(void* data, DataType dtype, const Shape& shape, MemoryLocation loc) {
  Tensor t;
  t.storage_ = std::make_shared<Storage>(
      data, static_cast<size_t>(shape.numel()) * dataTypeSize(dtype), loc, nullptr);
  t.dtype_ = dtype;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::fromStorage(std::shared_ptr<Storage> storage, DataType dtype, const Shape& shape,
                           size_t byteOffset) {
  Tensor t;
  t.storage_ = std::move(storage);
  t.offset_ = byteOffset;
  t.dtype_ = dtype;
  t.shape_ = shape;
  return t;
}

Expected<Tensor> Tensor::reshaped(const Shape& shape) const {
  if (shape.numel() != numel())
    return Status(ErrorCode::kInvalidArgument,
                  "cannot reshape " + shape_.toString() + " to " + shape.toString());
  Tensor t = *this;
  t.shape_ = shape;
  return t;
}

Tensor Tensor::clone() const {
  if (empty()) return Tensor();
  Tensor t = zeros(dtype_, shape_);
  if (bytes()) std::memcpy(t.raw(), raw(), bytes());
  return t;
}

double Tensor::getAsDouble(int64_t i) const {
  switch (dtype_) {
    case DataType::kFloat32:
      return data<float>()[i];
    case DataType::kFloat16:
      return halfToFloat(data<uint16_t>()[i]);
    case DataType::kBFloat16:
      return bf16ToFloat(data<uint16_t>()[i]);
    case DataType::kInt8:
      return data<int8_t>()[i];
    case DataType::kUInt8:
      return data<uint8_t>()[i];
    case DataType::kInt32:
      return data<int32_t>()[i];
    case DataType::kInt64:
      return static_cast<double>(data<int64_t>()[i]);
    case DataType::kBool:
      return data<uint8_t>()[i] ? 1.0 : 0.0;
    case DataType::kUndefined:
      break;
  }
  return 0.0;
}

int64_t Tensor::getAsInt64(int64_t i) const {
  switch (dtype_) {
    case DataType::kInt64:
      return data<int64_t>()[i];
    case DataType::kInt32:
      return data<int32_t>()[i];
    case DataType::kInt8:
      return data<int8_t>()[i];
    case DataType::kUInt8:
      return data<uint8_t>()[i];
    case DataType::kBool:
      return data<uint8_t>()[i] ? 1 : 0;
    default:
      return static_cast<int64_t>(getAsDouble(i));
  }
}

std::string Tensor::describe() const {
  return std::string(dataTypeName(dtype_)) + shape_.toString();
}

}  // namespace edgeinfer
