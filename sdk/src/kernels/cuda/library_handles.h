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
#include <cuda_runtime.h>
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
  /// A stream of the handle's own, which it is set to when the stream it last ran on is
  /// destroyed (releaseStream()).
  cudaStream_t home = nullptr;
  // Held exclusively around cudnnSetStream + cudnnBackendExecute and descriptor building,
  // shared by threads finalizing execution plans (which cuDNN builds concurrently).
  std::shared_mutex mu;
  Status create();
  ~CudnnHandle();
};

/// Call before destroying a CUDA stream that cuDNN layers may have run on (a context's, the
/// builder's): every shared cuDNN handle still set to `stream` is set to its own stream. The
/// next cudnnSetStream records an event on the handle's previous stream, which must therefore
/// still exist (a destroyed one crashed contexts used from several threads, each destroying its
/// stream while another set the handle to its own).
void releaseStream(cudaStream_t stream);

/// Held by every cuDNN layer run (around cudnnSetStream + cudnnBackendExecute) and for the
/// whole of each CUDA-graph capture of a context (recursive: the capture's layers take it
/// again). cudnnSetStream ties a handle's previous stream to the new one, so a handle must never
/// be set to a stream while another thread is capturing on the stream it was set to last: two
/// contexts capturing at once on different threads crashed in cudaStreamEndCapture or
/// cuEventRecord (a few times in a hundred runs of contexts starting together, H200). Replays
/// of captured graphs take no lock.
std::recursive_mutex& cudnnStreamMutex();

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
