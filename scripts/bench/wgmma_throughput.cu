// Hopper's INT8 warpgroup MMA throughput by instruction shape: wgmma.mma_async s8 m64nNk32 for
// N = 64, 128 and 256 with both operands in shared memory, and m64n64k32 with A from registers
// (the halo kernel's form), one to three blocks of two warpgroups a multiprocessor, four wgmmas
// a commit group. It answers whether a kernel's tile shape caps its tensor-core rate (for
// ResNet-50's layer1 3x3 layers it does not: docs/performance.md, "The halo kernel's lean
// epilogue ..."). Not part of the build (sm_90a only); on a compute 9.0 machine:
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -I sdk/src -I sdk/include \
//       -o wgmma_throughput scripts/bench/wgmma_throughput.cu && ./wgmma_throughput
//
// Prints TOP/s and multiply-adds a clock a multiprocessor (at the device's reported clock).
#include <cuda_runtime.h>

#include <cstdio>

#include "kernels/cuda/wgmma_sm90a.cuh"

using namespace edgeinfer::cuda::sm90;  // NOLINT(build/namespaces)

template <int BN, bool RS>
__global__ void __launch_bounds__(256) bench(int iters, int* sink) {
#ifdef EDGEINFER_WGMMA
  extern __shared__ __align__(1024) int8_t smem[];
  for (int i = threadIdx.x; i < 65536 / 4; i += blockDim.x)
    reinterpret_cast<uint32_t*>(smem)[i] = i * 2654435761u;
  __syncthreads();
  int32_t acc[BN / 2];
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0;
  fenceOperands(acc);
  const uint32_t a[4] = {threadIdx.x, threadIdx.x * 3u, 7u, 9u};
  const int8_t* A = smem + (threadIdx.x >> 7) * 8192;  // each warpgroup its own A
  const int8_t* B = smem + 16384;
  for (int it = 0; it < iters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      if constexpr (RS)
        wgmmaN64Rs(reinterpret_cast<int32_t(&)[32]>(acc), a, Swizzled<128>::desc(B + k * 32));
      else
        wgmma<BN>(acc, Swizzled<128>::desc(A + k * 32), Swizzled<128>::desc(B + k * 32));
    }
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  fenceOperands(acc);
  int s = 0;
  for (int i = 0; i < BN / 2; ++i) s += acc[i];
  if (s == 0x12345) sink[0] = s;  // keeps the sums live
#endif
}

template <int BN, bool RS>
bool run(const char* name, int blocksPerSm) {
  int sms = 0, khz = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, 0);
  auto* kernel = bench<BN, RS>;
  int* sink = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  const int iters = 4000, grid = sms * blocksPerSm, threads = 256, smem = 65536;
  float ms = 0.f;
  bool ok = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) ==
                cudaSuccess &&
            cudaMalloc(&sink, sizeof(int)) == cudaSuccess && cudaEventCreate(&e0) == cudaSuccess &&
            cudaEventCreate(&e1) == cudaSuccess;
  if (ok) {
    kernel<<<grid, threads, smem>>>(10, sink);  // warm-up
    cudaEventRecord(e0);
    kernel<<<grid, threads, smem>>>(iters, sink);
    cudaEventRecord(e1);
    ok =
        cudaEventSynchronize(e1) == cudaSuccess && cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess;
  }
  const cudaError_t err = cudaGetLastError();
  if (ok && err == cudaSuccess) {
    const double macs = double(grid) * (threads / 128) * iters * 4 * 64.0 * BN * 32;
    std::printf(
        "%-22s %d block(s) a multiprocessor: %7.1f TOP/s, %5.0f multiply-adds a clock a "
        "multiprocessor (%d MHz)\n",
        name, blocksPerSm, 2 * macs / ms * 1e-9, macs / (ms * 1e-3) / sms / (khz * 1e3),
        khz / 1000);
  } else {
    std::fprintf(stderr, "%s: %s\n", name, cudaGetErrorString(err));
  }
  if (sink) cudaFree(sink);
  if (e0) cudaEventDestroy(e0);
  if (e1) cudaEventDestroy(e1);
  return ok && err == cudaSuccess;
}

int main() {
  int dev = 0, major = 0, minor = 0;
  cudaGetDevice(&dev);
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev);
  if (major != 9 || minor != 0) {
    std::fprintf(stderr, "wgmma_throughput: needs a compute 9.0 GPU (this one is %d.%d)\n", major,
                 minor);
    return 2;
  }
  bool ok = true;
  for (int blocks : {1, 2, 3}) {
    ok = run<64, false>("m64n64k32, A in smem", blocks) && ok;
    ok = run<64, true>("m64n64k32, A in regs", blocks) && ok;
    ok = run<128, false>("m64n128k32", blocks) && ok;
    ok = run<256, false>("m64n256k32", blocks) && ok;
  }
  return ok ? 0 : 1;
}
