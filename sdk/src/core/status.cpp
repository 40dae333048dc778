#include "edgeinfer/status.h"

namespace edgeinfer {

const char* errorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kOk:
      return "OK";
    case ErrorCode::kInvalidArgument:
      return "InvalidArgument";
    case ErrorCode::kInvalidModel:
      return "InvalidModel";
    case ErrorCode::kUnsupported:
      return "Unsupported";
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kIoError:
      return "IoError";
    case ErrorCode::kCorruptFile:
      return "CorruptFile";
    case ErrorCode::kVersionMismatch:
      return "VersionMismatch";
    case ErrorCode::kDeviceMismatch:
      return "DeviceMismatch";
    case ErrorCode::kOutOfMemory:
      return "OutOfMemory";
    case ErrorCode::kCudaError:
      return "CudaError";
    case ErrorCode::kInternal:
      return "Internal";
  }
  return "Unknown";
}

Status Status::at(const NodeLocation& where) const {
  if (ok() || hasLocation()) return *this;
  Status s = *this;
  s.where_ = where;
  return s;
}

Status Status::withContext(const std::string& context) const {
  if (ok()) return *this;
  Status s = *this;
  s.message_ = context + ": " + message_;
  return s;
}

std::string Status::toString() const {
  if (ok()) return "OK";
  std::string out = errorCodeName(code_);
  out += ": ";
  if (hasLocation()) {
    out += "node";
    if (where_.index >= 0) out += " #" + std::to_string(where_.index);
    if (!where_.name.empty()) out += " '" + where_.name + "'";
    if (!where_.opType.empty()) out += " (" + where_.opType + ")";
    out += ": ";
  }
  out += message_;
  return out;
}

}  // namespace edgeinfer
