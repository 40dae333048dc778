// Error checking for cuBLAS and cuBLASLt calls: every cublasStatus_t that is not
// CUBLAS_STATUS_SUCCESS becomes a kCudaError Status naming the call, the status code's name and
// number, cuBLAS's own message and the file and line (the cuBLAS counterpart of EI_CUDA_CHECK in
// cuda_check.h and EI_CUDNN_CHECK in cudnn_check.h). cuBLASLt returns the same cublasStatus_t.
#pragma once

#include <cublas_api.h>

#include <string>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

inline Status cublasStatus(cublasStatus_t s, const char* expr, const char* file, int line) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return Status(ErrorCode::kCudaError, std::string(expr) + " failed: " + cublasGetStatusName(s) +
                                           " (" + std::to_string(static_cast<int>(s)) + ", " +
                                           cublasGetStatusString(s) + ") at " + file + ":" +
                                           std::to_string(line));
}

}  // namespace edgeinfer::cuda

/// Returns a kCudaError Status from the enclosing function if the cuBLAS / cuBLASLt call fails.
#define EI_CUBLAS_CHECK(expr)                                               \
  do {                                                                      \
    ::edgeinfer::Status ei_cublas_status_ =                                 \
        ::edgeinfer::cuda::cublasStatus((expr), #expr, __FILE__, __LINE__); \
    if (!ei_cublas_status_.ok()) return ei_cublas_status_;                  \
  } while (0)
