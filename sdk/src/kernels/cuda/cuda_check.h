// Error checking for CUDA, cuDNN and cuBLAS calls: every return code becomes a Status that
// names the call, the library's own message, and the file and line.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

inline Status cudaStatus(cudaError_t e, const char* expr, const char* file, int line) {
  if (e == cudaSuccess) return Status::Ok();
  return Status(ErrorCode::kCudaError, std::string(expr) + " failed: " + cudaGetErrorName(e) +
                                           " (" + cudaGetErrorString(e) + ") at " + file + ":" +
                                           std::to_string(line));
}

}  // namespace edgeinfer::cuda

/// Returns a kCudaError Status from the enclosing function if the CUDA call fails.
#define EI_CUDA_CHECK(expr)                                               \
  do {                                                                    \
    ::edgeinfer::Status ei_cuda_status_ =                                 \
        ::edgeinfer::cuda::cudaStatus((expr), #expr, __FILE__, __LINE__); \
    if (!ei_cuda_status_.ok()) return ei_cuda_status_;                    \
  } while (0)

/// The Status of a CUDA call (kCudaError naming it on failure), for code that must go on.
#define EI_CUDA_STATUS(expr) ::edgeinfer::cuda::cudaStatus((expr), #expr, __FILE__, __LINE__)
