// Per-device library handles shared by the providers (library_handles.h).
#include "kernels/cuda/library_handles.h"

#include <cuda_runtime.h>

#include <vector>

#include "kernels/cuda/cublas_check.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cudnn_check.h"

namespace edgeinfer::cuda {

Status CublasLtHandle::create() {
  return cublasStatus(cublasLtCreate(&handle), "cublasLtCreate", __FILE__, __LINE__);
}
CublasLtHandle::~CublasLtHandle() {
  if (handle) cublasLtDestroy(handle);
}

Status CudnnHandle::create() {
  EI_RETURN_IF_ERROR(cudnnStatus(cudnnCreate(&handle), "cudnnCreate", __FILE__, __LINE__));
  return cudaStatus(cudaStreamCreateWithFlags(&home, cudaStreamNonBlocking),
                    "cudaStreamCreateWithFlags", __FILE__, __LINE__);
}
CudnnHandle::~CudnnHandle() {
  if (handle) cudnnDestroy(handle);
  if (home) cudaStreamDestroy(home);
}

namespace {

bool currentDevice(int* device, std::string* why) {
  if (cudaGetDevice(device) == cudaSuccess) return true;
  cudaGetLastError();
  *why = "no CUDA device";
  return false;
}

}  // namespace

/// The process-wide registry of H handles by device, and its lock. Never destroyed (a
/// function-local static's destructor could run after a holder's).
template <typename H>
struct Registry {
  std::mutex mu;
  std::map<int, std::weak_ptr<H>> byDevice;
  static Registry& get() {
    static auto* r = new Registry;
    return *r;
  }
};

template <typename H>
std::shared_ptr<H> sharedDeviceHandle(std::string* why) {
  int device = 0;
  if (!currentDevice(&device, why)) return nullptr;
  auto& reg = Registry<H>::get();
  auto* mu = &reg.mu;
  auto* registry = &reg.byDevice;
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

std::recursive_mutex& cudnnStreamMutex() {
  static auto* mu = new std::recursive_mutex;  // never destroyed, as the registries
  return *mu;
}

void releaseStream(cudaStream_t stream) {
  if (!stream) return;
  std::vector<std::shared_ptr<CudnnHandle>> live;
  {
    auto& reg = Registry<CudnnHandle>::get();
    std::lock_guard<std::mutex> lock(reg.mu);
    for (const auto& [device, weak] : reg.byDevice)
      if (auto h = weak.lock()) live.push_back(std::move(h));
  }
  std::lock_guard<std::recursive_mutex> streams(cudnnStreamMutex());
  for (const auto& h : live) {
    std::lock_guard<std::shared_mutex> lock(h->mu);
    cudaStream_t current = nullptr;
    if (cudnnGetStream(h->handle, &current) == CUDNN_STATUS_SUCCESS && current == stream)
      cudnnSetStream(h->handle, h->home);
  }
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
