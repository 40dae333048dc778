// Per-device library handles shared by the providers (library_handles.h).
#include "kernels/cuda/library_handles.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cublas_check.h"
#include "kernels/cuda/cudnn_check.h"

namespace edgeinfer::cuda {

Status CublasLtHandle::create() {
  return cublasStatus(cublasLtCreate(&handle), "cublasLtCreate", __FILE__, __LINE__);
}
CublasLtHandle::~CublasLtHandle() {
  if (handle) cublasLtDestroy(handle);
}

Status CudnnHandle::create() {
  return cudnnStatus(cudnnCreate(&handle), "cudnnCreate", __FILE__, __LINE__);
}
CudnnHandle::~CudnnHandle() {
  if (handle) cudnnDestroy(handle);
}

namespace {

bool currentDevice(int* device, std::string* why) {
  if (cudaGetDevice(device) == cudaSuccess) return true;
  cudaGetLastError();
  *why = "no CUDA device";
  return false;
}

}  // namespace

template <typename H>
std::shared_ptr<H> sharedDeviceHandle(std::string* why) {
  int device = 0;
  if (!currentDevice(&device, why)) return nullptr;
  // Never destroyed (a function-local static's destructor could run after a holder's).
  static std::mutex* mu = new std::mutex;
  static auto* registry = new std::map<int, std::weak_ptr<H>>;
  std::lock_guard<std::mutex> lock(*mu);
  if (std::shared_ptr<H> h = (*registry)[device].lock()) return h;
  auto h = std::make_shared<H>();
  const Status s = h->create();
  if (!s.ok()) {
    h->handle = nullptr;
    *why = s.message();
    return nullptr;
  }
  (*registry)[device] = h;
  return h;
}

template <typename H>
std::shared_ptr<H> DeviceHandles<H>::current(std::string* why) {
  int device = 0;
  if (!currentDevice(&device, why)) return nullptr;
  std::shared_ptr<H>& slot = byDevice_[device];
  if (!slot) slot = sharedDeviceHandle<H>(why);
  std::shared_ptr<H> h = slot;
  if (!h) byDevice_.erase(device);
  return h;
}

template std::shared_ptr<CublasLtHandle> sharedDeviceHandle<CublasLtHandle>(std::string*);
template std::shared_ptr<CudnnHandle> sharedDeviceHandle<CudnnHandle>(std::string*);
template class DeviceHandles<CublasLtHandle>;
template class DeviceHandles<CudnnHandle>;

}  // namespace edgeinfer::cuda
