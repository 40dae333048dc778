// Library handles (cuBLASLt, cuDNN) shared per CUDA device by every provider and tactic of the
// process: created on first use on a device, held (shared_ptr) by the providers and the tactics
// made with them, and freed with the last holder. The process-wide registry keeps only weak
// references, so nothing outlives the engines that use it (no handle is destroyed after the CUDA
// runtime at exit).
//
//   DeviceHandles<CudnnHandle> handles_;                 // a provider's member
//   std::shared_ptr<CudnnHandle> h = handles_.current(&why);
#pragma once

#include <cublasLt.h>
#include <cudnn.h>

#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

struct CublasLtHandle {
  cublasLtHandle_t handle = nullptr;
  Status create();
  ~CublasLtHandle();
};

struct CudnnHandle {
  cudnnHandle_t handle = nullptr;
  // Held exclusively around cudnnSetStream + cudnnBackendExecute and descriptor building,
  // shared by threads finalizing execution plans (which cuDNN builds concurrently).
  std::shared_mutex mu;
  Status create();
  ~CudnnHandle();
};

/// The current CUDA device's shared handle of type H (created on first use in the process);
/// null, with `why` set, when there is no device or the library cannot create one (its words).
template <typename H>
std::shared_ptr<H> sharedDeviceHandle(std::string* why);

/// A provider's handles, one per CUDA device it has worked on: the provider keeps them alive
/// between layers (creating a cuDNN handle takes milliseconds).
template <typename H>
class DeviceHandles {
 public:
  std::shared_ptr<H> current(std::string* why);

 private:
  std::map<int, std::shared_ptr<H>> byDevice_;
};

extern template std::shared_ptr<CublasLtHandle> sharedDeviceHandle<CublasLtHandle>(std::string*);
extern template std::shared_ptr<CudnnHandle> sharedDeviceHandle<CudnnHandle>(std::string*);
extern template class DeviceHandles<CublasLtHandle>;
extern template class DeviceHandles<CudnnHandle>;

}  // namespace edgeinfer::cuda
