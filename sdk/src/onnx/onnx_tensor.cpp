#include "onnx/onnx_tensor.h"

#include <cstring>
#include <fstream>

#include "core/half.h"

namespace edgeinfer::onnx_import {

using onnx::TensorProto;

DataType dataTypeFromOnnx(int t) {
  switch (t) {
    case TensorProto::FLOAT:
      return DataType::kFloat32;
    case TensorProto::FLOAT16:
      return DataType::kFloat16;
    case TensorProto::BFLOAT16:
      return DataType::kBFloat16;
    case TensorProto::INT8:
      return DataType::kInt8;
    case TensorProto::UINT8:
      return DataType::kUInt8;
    case TensorProto::INT32:
      return DataType::kInt32;
    case TensorProto::INT64:
      return DataType::kInt64;
    case TensorProto::BOOL:
      return DataType::kBool;
    default:
      return DataType::kUndefined;
  }
}

int dataTypeToOnnx(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return TensorProto::FLOAT;
    case DataType::kFloat16:
      return TensorProto::FLOAT16;
    case DataType::kBFloat16:
      return TensorProto::BFLOAT16;
    case DataType::kInt8:
      return TensorProto::INT8;
    case DataType::kUInt8:
      return TensorProto::UINT8;
    case DataType::kInt32:
      return TensorProto::INT32;
    case DataType::kInt64:
      return TensorProto::INT64;
    case DataType::kBool:
      return TensorProto::BOOL;
    case DataType::kUndefined:
      break;
  }
  return TensorProto::UNDEFINED;
}

std::string onnxTypeName(int t) {
  if (onnx::TensorProto_DataType_IsValid(t))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(t));
  return "type#" + std::to_string(t);
}

namespace {

std::string tensorLabel(const TensorProto& p) {
  return p.name().empty() ? std::string("tensor") : "tensor '" + p.name() + "'";
}

Status readExternal(const TensorProto& p, const std::string& dir, size_t expectBytes,
                    std::string* out) {
  std::string location;
  int64_t offset = 0;
  int64_t length = -1;
  for (const auto& kv : p.external_data()) {
    try {
      if (kv.key() == "location")
        location = kv.value();
      else if (kv.key() == "offset")
        offset = std::stoll(kv.value());
      else if (kv.key() == "length")
        length = std::stoll(kv.value());
    } catch (...) {
      return Status(ErrorCode::kInvalidModel, tensorLabel(p) + ": external_data '" + kv.key() +
                                                  "' is not a number: '" + kv.value() + "'");
    }
  }
  if (location.empty())
    return Status(ErrorCode::kInvalidModel, tensorLabel(p) + ": external data without a location");
  if (location[0] == '/' || location.find("..") != std::string::npos)
    return Status(ErrorCode::kInvalidModel,
                  tensorLabel(p) + ": external data location '" + location +
                      "' must be a relative path inside the model's directory");
  if (offset < 0 || (length >= 0 && static_cast<size_t>(length) != expectBytes))
    return Status(ErrorCode::kInvalidModel, tensorLabel(p) + ": external data length " +
                                                std::to_string(length) + " does not match the " +
                                                std::to_string(expectBytes) +
                                                " bytes its shape needs");
  const std::string path = (dir.empty() ? std::string(".") : dir) + "/" + location;
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return Status(ErrorCode::kNotFound,
                  tensorLabel(p) + ": external data file '" + path + "' cannot be opened");
  f.seekg(0, std::ios::end);
  const int64_t fileSize = static_cast<int64_t>(f.tellg());
  // Compare without adding: a huge offset must not overflow.
  if (fileSize < static_cast<int64_t>(expectBytes) ||
      offset > fileSize - static_cast<int64_t>(expectBytes))
    return Status(ErrorCode::kCorruptFile,
                  tensorLabel(p) + ": external data file '" + path + "' has " +
                      std::to_string(fileSize) + " bytes, but the tensor needs " +
                      std::to_string(expectBytes) + " bytes at offset " + std::to_string(offset));
  out->resize(expectBytes);
  f.seekg(offset);
  f.read(out->data(), static_cast<std::streamsize>(expectBytes));
  if (!f) return Status(ErrorCode::kIoError, tensorLabel(p) + ": reading '" + path + "' failed");
  return Status::Ok();
}

template <typename Dst, typename Src>
void copyConvert(const Src& src, Dst* dst) {
  for (int i = 0; i < src.size(); ++i) dst[i] = static_cast<Dst>(src.Get(i));
}

}  // namespace

Expected<Tensor> tensorFromProto(const TensorProto& p, const std::string& externalDataDir,
                                 int64_t maxBytes) {
  const DataType dt = dataTypeFromOnnx(p.data_type());
  if (dt == DataType::kUndefined)
    return Status(ErrorCode::kUnsupported, tensorLabel(p) + " has element type " +
                                               onnxTypeName(p.data_type()) +
                                               ", which is not supported");
  if (p.has_segment())
    return Status(ErrorCode::kUnsupported,
                  tensorLabel(p) + " is segmented, which is not supported");
  std::vector<int64_t> dims(p.dims().begin(), p.dims().end());
  int64_t n = 1;
  for (int64_t d : dims) {
    if (d < 0)
      return Status(ErrorCode::kInvalidModel, tensorLabel(p) + " has a negative dimension");
    if (d != 0 && n > maxBytes / d)
      return Status(ErrorCode::kOutOfMemory, tensorLabel(p) + " shape " + Shape(dims).toString() +
                                                 " exceeds the size limit");
    n *= d;
  }
  const size_t bytes = static_cast<size_t>(n) * dataTypeSize(dt);
  if (static_cast<int64_t>(bytes) > maxBytes)
    return Status(ErrorCode::kOutOfMemory, tensorLabel(p) + " needs " + std::to_string(bytes) +
                                               " bytes, above the limit of " +
                                               std::to_string(maxBytes));
  EI_ASSIGN_OR_RETURN(Tensor t, Tensor::create(dt, Shape(dims)));
  auto sizeError = [&](int64_t got) {
    return Status(ErrorCode::kInvalidModel,
                  tensorLabel(p) + " holds " + std::to_string(got) + " elements but its shape " +
                      Shape(dims).toString() + " needs " + std::to_string(n));
  };
  if (p.data_location() == TensorProto::EXTERNAL) {
    std::string buf;
    EI_RETURN_IF_ERROR(readExternal(p, externalDataDir, bytes, &buf));
    std::memcpy(t.raw(), buf.data(), bytes);
    return t;
  }
  if (p.has_raw_data()) {
    if (p.raw_data().size() != bytes)
      return Status(ErrorCode::kInvalidModel, tensorLabel(p) + " raw_data has " +
                                                  std::to_string(p.raw_data().size()) +
                                                  " bytes, expected " + std::to_string(bytes));
    if (bytes) std::memcpy(t.raw(), p.raw_data().data(), bytes);
    return t;
  }
  switch (dt) {
    case DataType::kFloat32:
      if (p.float_data_size() != n) return sizeError(p.float_data_size());
      copyConvert(p.float_data(), t.data<float>());
      break;
    case DataType::kInt64:
      if (p.int64_data_size() != n) return sizeError(p.int64_data_size());
      copyConvert(p.int64_data(), t.data<int64_t>());
      break;
    case DataType::kInt32:
      if (p.int32_data_size() != n) return sizeError(p.int32_data_size());
      copyConvert(p.int32_data(), t.data<int32_t>());
      break;
    case DataType::kInt8:
      if (p.int32_data_size() != n) return sizeError(p.int32_data_size());
      copyConvert(p.int32_data(), t.data<int8_t>());
      break;
    case DataType::kUInt8:
    case DataType::kBool:
      if (p.int32_data_size() != n) return sizeError(p.int32_data_size());
      copyConvert(p.int32_data(), t.data<uint8_t>());
      break;
    case DataType::kFloat16:
    case DataType::kBFloat16:  // stored as the raw 16 bits in int32_data
      if (p.int32_data_size() != n) return sizeError(p.int32_data_size());
      copyConvert(p.int32_data(), t.data<uint16_t>());
      break;
    case DataType::kUndefined:
      break;
  }
  return t;
}

void tensorToProto(const Tensor& t, const std::string& name, TensorProto* proto) {
  proto->Clear();
  proto->set_name(name);
  proto->set_data_type(dataTypeToOnnx(t.dtype()));
  for (int64_t d : t.shape().dims()) proto->add_dims(d);
  proto->set_raw_data(t.raw(), t.bytes());
}

}  // namespace edgeinfer::onnx_import
