// Programmatic dependent launch (compute 9.0 and newer): a kernel launched with it may be
// scheduled while the kernel before it in the stream is still running, once every block of
// that kernel has allowed it (allowDependentGrids) or exited. Its blocks then set up (shared
// memory, barriers, tensor maps, loads of their own constant weights) in the shadow of the
// kernel before, and wait for it (waitForPriorGrids) only where they touch what it writes. At
// batch 1 a layer is a few microseconds of work and about as much launch latency and
// prologue; this is how back-to-back kernels hide the second part. cuDNN and cuBLASLt take no
// such attribute: an edge into one of their kernels stays an ordinary one.
//
// The contract of a kernel launched with dependentLaunchAttributes(): every thread calls
// waitForPriorGrids() before it reads memory an earlier kernel may write and before it writes
// any global memory at all (its output may be a buffer the kernel before still reads: the
// planner reuses activation memory). Only constants (the tactic's own weights, bias, scales
// and tensor maps) may be read before. waitForPriorGrids() waits for the whole of the earlier
// kernel, its memory included, and that one waited for its own predecessor: the order of a
// stream holds transitively, as long as every block calls waitForPriorGrids() before it exits
// (a grid whose blocks all left without waiting could finish before its predecessor).
#pragma once

#include <cuda_runtime.h>

#include <utility>

namespace edgeinfer::cuda {

/// Whether kernels on the current device are launched as programmatic dependents: compute
/// 9.0 or newer, unless EDGEINFER_DISABLE_PDL=1 (to measure without) or a DependentLaunchOff
/// lives on this thread. Cached per device.
bool dependentLaunchEnabled();

/// Holds programmatic dependent launch off for the launches of this thread while it lives
/// (nestable). The builder times a candidate by launching it back to back: with the attribute,
/// each launch would set up in the shadow of its own previous one, a gain the engine does not
/// see when the kernel before is another one (a cuDNN or cuBLASLt kernel never allows it
/// early). Timed that way, the 1x1 INT8 kernels beat cuBLASLt's by a margin they did not keep
/// in the engine (ResNet-50 at batch 1, docs/performance.md): candidates are timed without it.
class DependentLaunchOff {
 public:
  DependentLaunchOff();
  ~DependentLaunchOff();
  DependentLaunchOff(const DependentLaunchOff&) = delete;
  DependentLaunchOff& operator=(const DependentLaunchOff&) = delete;
};

/// dependentLaunchEnabled() for launchAsDependent(), the small kernels (stem, pools, the INT8
/// epilogue and gemv): also off with EDGEINFER_DISABLE_PDL_SMALL=1 (to measure them apart from
/// the convolutions').
bool smallKernelDependentLaunchEnabled();

/// Adds the programmatic-stream-serialization attribute to `cfg` (whose attrs array has room
/// for one more) when dependentLaunchEnabled(); the kernel must keep the contract above.
inline void addDependentLaunch(cudaLaunchConfig_t* cfg, cudaLaunchAttribute* attrs) {
  if (!dependentLaunchEnabled()) return;
  cudaLaunchAttribute& a = attrs[cfg->numAttrs++];
  a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  a.val.programmaticStreamSerializationAllowed = 1;
  cfg->attrs = attrs;
}

/// The launch configuration of launchAsDependent(): `attrs` (room for one) holds the attribute.
inline cudaLaunchConfig_t dependentLaunchConfig(dim3 grid, dim3 block, size_t smem,
                                                cudaStream_t stream, cudaLaunchAttribute* attrs) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  if (smallKernelDependentLaunchEnabled()) addDependentLaunch(&cfg, attrs);
  return cfg;
}

/// Launches `kernel` (a __global__ function's address, its arguments as for cudaLaunchKernel)
/// with addDependentLaunch(): for kernels that keep the contract above.
inline cudaError_t launchAsDependent(const void* kernel, dim3 grid, dim3 block, size_t smem,
                                     cudaStream_t stream, void** args) {
  cudaLaunchAttribute attrs[1];
  const cudaLaunchConfig_t cfg = dependentLaunchConfig(grid, block, smem, stream, attrs);
  return cudaLaunchKernelExC(&cfg, kernel, args);
}

/// The same with the kernel's own parameter types (the arguments converted to them).
template <typename... Params, typename... Args>
cudaError_t launchAsDependent(void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                              cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attrs[1];
  const cudaLaunchConfig_t cfg = dependentLaunchConfig(grid, block, smem, stream, attrs);
  return cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...);
}

namespace dev {

/// Waits for the kernels this one depends on, their memory included (a no-op without them,
/// and before compute 9.0).
__device__ __forceinline__ void waitForPriorGrids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

/// Lets the next kernel's blocks be scheduled once every block of this one has called it (or
/// exited): they wait in waitForPriorGrids() for this kernel to finish.
__device__ __forceinline__ void allowDependentGrids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

/// The first statement of a small kernel launched with launchAsDependent() that reads nothing
/// constant worth loading early: waits for the kernels before it, then lets the next one's
/// blocks be scheduled (they wait for this one in turn).
__device__ __forceinline__ void dependentKernelStart() {
  waitForPriorGrids();
  allowDependentGrids();
}

}  // namespace dev
}  // namespace edgeinfer::cuda
