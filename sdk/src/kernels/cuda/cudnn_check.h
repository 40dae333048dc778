// Error checking for cuDNN calls: every cudnnStatus_t that is not CUDNN_STATUS_SUCCESS becomes
// a kCudaError Status naming the call, cuDNN's own message and the file and line (the cuDNN
// counterpart of EI_CUDA_CHECK in cuda_check.h).
#pragma once

#include <cudnn.h>

#include <string>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

inline Status cudnnStatus(cudnnStatus_t s, const char* expr, const char* file, int line) {
  if (s == CUDNN_STATUS_SUCCESS) return Status::Ok();
  return Status(ErrorCode::kCudaError, std::string(expr) + " failed: " + cudnnGetErrorString(s) +
                                           " (" + std::to_string(static_cast<int>(s)) + ") at " +
                                           file + ":" + std::to_string(line));
}

}  // namespace edgeinfer::cuda

/// Returns a kCudaError Status from the enclosing function if the cuDNN call fails.
#define EI_CUDNN_CHECK(expr)                                               \
  do {                                                                     \
    ::edgeinfer::Status ei_cudnn_status_ =                                 \
        ::edgeinfer::cuda::cudnnStatus((expr), #expr, __FILE__, __LINE__); \
    if (!ei_cudnn_status_.ok()) return ei_cudnn_status_;                   \
  } while (0)
