// A kernel timeline for machines without Nsight Systems (the device tool's GPU machine has
// Nsight Compute only): a CUPTI injection library that records every kernel a program runs,
// CUDA graph replays included, node by node, with its GPU start and end, and writes them as
// CSV when the program exits. Nsight Compute serializes kernels and times each alone; this
// shows what a replayed engine does between its kernels (launch gaps, kernels overlapping
// under programmatic dependent launch or on concurrent streams).
//
// Build (here, where the CUDA toolkit is):
//   g++ -std=c++17 -O2 -shared -fPIC -Wall -Wextra -Werror -I/usr/local/cuda/include
//       scripts/gpu/kernel_trace.cpp -L/usr/local/cuda/lib -lcupti -o libkernel_trace.so
// Run:
//   KTRACE_OUT=trace.csv CUDA_INJECTION64_PATH=$PWD/libkernel_trace.so PROGRAM ARGS...
// (libcupti.so.13 on LD_LIBRARY_PATH). Columns: start_ns, end_ns, stream, graph, name
// (mangled; quoted). scripts/gpu/int8_check.sh's `trace` step runs and summarises it.
#include <cupti.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

FILE* gOut = nullptr;

void CUPTIAPI bufferRequested(uint8_t** buffer, size_t* size, size_t* maxRecords) {
  constexpr size_t kBytes = size_t{8} << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kBytes));
  *size = *buffer ? kBytes : 0;
  *maxRecords = 0;  // as many as fit
}

void CUPTIAPI bufferCompleted(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t validSize) {
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, validSize, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || !gOut) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    std::string name = k->name ? k->name : "?";
    for (char& c : name)
      if (c == '"') c = '\'';
    std::fprintf(gOut, "%llu,%llu,%u,%u,\"%s\"\n", static_cast<unsigned long long>(k->start),
                 static_cast<unsigned long long>(k->end), k->streamId, k->graphId, name.c_str());
  }
  std::free(buffer);
}

void flushAtExit() {
  cuptiActivityFlushAll(1);
  if (gOut) std::fclose(gOut);
  gOut = nullptr;
}

}  // namespace

/// Called by the CUDA driver when CUDA_INJECTION64_PATH names this library.
extern "C" int InitializeInjection() {
  const char* path = std::getenv("KTRACE_OUT");
  gOut = std::fopen(path && *path ? path : "ktrace.csv", "w");
  if (!gOut) {
    std::fprintf(stderr, "kernel_trace: cannot write %s\n", path ? path : "ktrace.csv");
    return 0;
  }
  std::fprintf(gOut, "start_ns,end_ns,stream,graph,name\n");
  if (cuptiActivityRegisterCallbacks(bufferRequested, bufferCompleted) != CUPTI_SUCCESS ||
      cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS) {
    std::fprintf(stderr, "kernel_trace: CUPTI refused the kernel activity\n");
    return 0;
  }
  std::atexit(flushAtExit);
  return 1;
}
