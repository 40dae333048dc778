// Errors as values: every fallible SDK call returns a Status or an Expected<T>.
// Nothing in the public API throws; a Status says what failed and, for graph errors,
// where (node index, node name, op type), like TensorRT's ONNX parser errors.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <variant>

namespace edgeinfer {

enum class ErrorCode : int {
  kOk = 0,
  kInvalidArgument,  // the caller passed something that cannot be right
  kInvalidModel,     // the model is malformed (cycles, missing inputs, bad attributes)
  kUnsupported,      // valid, but this SDK (or this backend) does not implement it
  kNotFound,         // a file, tensor or option that was named does not exist
  kIoError,          // reading or writing a file failed
  kCorruptFile,      // a file exists but its contents are truncated or damaged
  kVersionMismatch,  // a file written by another (incompatible) SDK version
  kDeviceMismatch,   // an engine or cache built for another device
  kOutOfMemory,      // an allocation failed or a size limit was exceeded
  kCudaError,        // CUDA, cuDNN or cuBLAS returned an error
  kInternal,         // a bug in the SDK
};

/// Human-readable name of an error code ("InvalidModel" ...).
const char* errorCodeName(ErrorCode code);

/// Where in a graph an error happened; index -1 means "not tied to a node".
struct NodeLocation {
  int64_t index = -1;
  std::string name;
  std::string opType;
};

class Status {
 public:
  Status() = default;
  Status(ErrorCode code, std::string message) : code_(code), message_(std::move(message)) {}
  Status(ErrorCode code, std::string message, NodeLocation where)
      : code_(code), message_(std::move(message)), where_(std::move(where)) {}

  static Status Ok() { return Status(); }

  bool ok() const { return code_ == ErrorCode::kOk; }
  ErrorCode code() const { return code_; }
  const std::string& message() const { return message_; }
  const NodeLocation& where() const { return where_; }
  bool hasLocation() const { return where_.index >= 0 || !where_.name.empty(); }

  /// Returns a copy with the node location filled in (if it had none).
  Status at(const NodeLocation& where) const;
  /// Returns a copy whose message is prefixed with `context: `.
  Status withContext(const std::string& context) const;

  /// "InvalidModel: node #3 'conv1' (Conv): weight has 3 dims, expected 4".
  std::string toString() const;

 private:
  ErrorCode code_ = ErrorCode::kOk;
  std::string message_;
  NodeLocation where_;
};

/// A value or the Status that explains why there is none.
template <typename T>
class Expected {
 public:
  Expected(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  Expected(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (std::get<Status>(v_).ok())
      v_ = Status(ErrorCode::kInternal, "Expected built from OK status");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return ok(); }
  const Status& status() const {
    static const Status kOkStatus;
    return ok() ? kOkStatus : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace edgeinfer

#define EI_CONCAT_INNER_(a, b) a##b
#define EI_CONCAT_(a, b) EI_CONCAT_INNER_(a, b)

/// Returns the Status from the enclosing function if `expr` is not OK.
#define EI_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::edgeinfer::Status ei_status_ = (expr); \
    if (!ei_status_.ok()) return ei_status_; \
  } while (0)

#define EI_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

/// `EI_ASSIGN_OR_RETURN(auto x, makeX());` unwraps an Expected or returns its Status.
#define EI_ASSIGN_OR_RETURN(lhs, expr) \
  EI_ASSIGN_OR_RETURN_IMPL_(EI_CONCAT_(ei_expected_, __LINE__), lhs, expr)
