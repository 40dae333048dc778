// GPU batched hard NMS (CudaNms in edgeinfer/vision/postprocess.h), equal to the CPU
// batchedNms() in postprocess/nms.cpp:
//   1. filter: key = score if score >= threshold and the box is finite, else -1 (sorts last);
//   2. one CUB radix sort of (image, score) keys, stable (ties keep index order);
//   3. gather the sorted boxes and classes;
//   4. the IoU > threshold bit matrix of pairs (i < j) in sorted order, 64 columns a thread;
//   5. one thread block per image walks the matrix 64 candidates at a time: one warp decides
//      (a shuffle per survivor, a bit test per suppressed candidate), all threads OR the
//      survivors' rows into the later blocks.
// IoU uses explicitly rounded intrinsics in the CPU's order (vision/types.cpp), so the
// comparison with the threshold gives the same answer bit for bit.
#include <cuda_runtime.h>
#include <cub/device/device_radix_sort.cuh>

#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "edgeinfer/logger.h"
#include "edgeinfer/vision/postprocess.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/cuda_backend.h"

namespace edgeinfer::vision {
namespace {

constexpr int kBlockBits = 64;

// Sort key of candidate i: image in the high 32 bits, then the score's bits flipped so that an
// ascending sort puts higher scores first (scores that pass are >= 0, so their order-preserving
// bits are >= 0x80000000 and the flipped ones <= 0x7fffffff); 0xffffffff marks a dropped
// candidate, sorted after every kept one of its image.
__global__ void filterKernel(const float4* boxes, const float* scores, float threshold,
                             int64_t total, int perImage, unsigned long long* keys, int* values,
                             int* counts) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const float s = scores[i];
  const float4 b = boxes[i];
  const bool keep = s >= threshold && isfinite(b.x) && isfinite(b.y) && isfinite(b.z) &&
                    isfinite(b.w);  // NaN fails >=
  const int64_t image = i / perImage;
  // + 0.0f turns -0.0 into +0.0, which the CPU's comparison treats as equal.
  const unsigned bits = __float_as_uint(__fadd_rn(s, 0.0f)) | 0x80000000u;
  keys[i] = (static_cast<unsigned long long>(image) << 32) | (keep ? ~bits : 0xffffffffu);
  values[i] = static_cast<int>(i - image * perImage);
  if (keep) atomicAdd(&counts[image], 1);
}

__global__ void gatherKernel(const float4* boxes, const int* classIds, const int* order,
                             const int* counts, int perImage, float4* sortedBoxes,
                             int* sortedClasses) {
  const int n = blockIdx.y;
  const int r = blockIdx.x * blockDim.x + threadIdx.x;
  if (r >= counts[n]) return;
  const int64_t base = static_cast<int64_t>(n) * perImage;
  const int src = order[base + r];
  sortedBoxes[base + r] = boxes[base + src];
  sortedClasses[base + r] = classIds ? classIds[base + src] : 0;
}

__device__ __forceinline__ float area(float x1, float y1, float x2, float y2) {
  const float w = __fsub_rn(x2, x1), h = __fsub_rn(y2, y1);
  return w > 0.f && h > 0.f ? __fmul_rn(w, h) : 0.f;
}

// vision::iou() of types.cpp, rounding as it does.
__device__ __forceinline__ float iou(const float4& a, const float4& b) {
  const float i = area(fmaxf(a.x, b.x), fmaxf(a.y, b.y), fminf(a.z, b.z), fminf(a.w, b.w));
  const float u = __fsub_rn(__fadd_rn(area(a.x, a.y, a.z, a.w), area(b.x, b.y, b.z, b.w)), i);
  return u > 0.f ? __fdiv_rn(i, u) : 0.f;
}

// mask[n][row][word]: bit k of word w of row i is set when candidate j = 64 w + k (j > i)
// overlaps i by IoU > threshold and may suppress it (same class, or class-agnostic).
__global__ void maskKernel(const float4* sortedBoxes, const int* sortedClasses, const int* counts,
                           int perImage, int words, float threshold, bool agnostic,
                           unsigned long long* mask) {
  const int n = blockIdx.z;
  const int count = counts[n];
  const int rowBlock = blockIdx.y, colBlock = blockIdx.x;
  if (colBlock < rowBlock || rowBlock * kBlockBits >= count || colBlock * kBlockBits >= count)
    return;
  const int64_t base = static_cast<int64_t>(n) * perImage;
  __shared__ float4 cols[kBlockBits];
  __shared__ int colClass[kBlockBits];
  const int t = threadIdx.x;
  const int c = colBlock * kBlockBits + t;
  if (c < count) {
    cols[t] = sortedBoxes[base + c];
    colClass[t] = sortedClasses[base + c];
  }
  __syncthreads();
  const int i = rowBlock * kBlockBits + t;
  if (i >= count) return;
  const float4 bi = sortedBoxes[base + i];
  const int ci = sortedClasses[base + i];
  const int ncols = min(kBlockBits, count - colBlock * kBlockBits);
  const int start = colBlock == rowBlock ? t + 1 : 0;
  unsigned long long bits = 0;
  for (int k = start; k < ncols; ++k)
    if ((agnostic || colClass[k] == ci) && iou(bi, cols[k]) > threshold) bits |= 1ull << k;
  mask[(base + i) * words + colBlock] = bits;
}

// One thread block per image: the greedy walk over the sorted candidates, 64 at a time.
// Warp 0 decides which candidates of the block survive (registers and shuffles only: the
// serial part); then every thread of the block ORs the mask rows of the survivors into the
// `removed` bits of later blocks (independent loads, spread over kScanThreads threads, so their
// memory latency overlaps instead of adding up).
constexpr int kScanThreads = 512;

__global__ void __launch_bounds__(kScanThreads)
    scanKernel(const unsigned long long* mask, const int* counts, const int* order, int perImage,
               int words, int maxDetections, int* kept, int* keptCounts) {
  extern __shared__ unsigned long long removed[];
  __shared__ int rows[kBlockBits];
  __shared__ int keptRows, outShared;
  const int n = blockIdx.x, tid = threadIdx.x, lane = tid & 31;
  const bool resolver = tid < 32;
  const unsigned full = 0xffffffffu;
  const int count = counts[n];
  const int blocks = (count + kBlockBits - 1) / kBlockBits;
  for (int j = tid; j < blocks; j += blockDim.x) removed[j] = 0;
  if (tid == 0) outShared = 0;
  __syncthreads();
  const int64_t base = static_cast<int64_t>(n) * perImage;
  const unsigned long long* m = mask + base * words;
  // Rows of the diagonal word of block w: lane l holds rows 64 w + l and 64 w + 32 + l. They
  // do not depend on the walk, so the next block's are loaded while this one is walked.
  auto diag = [&](int w, int row) -> unsigned long long {
    const int i = w * kBlockBits + row;
    return i < count ? m[static_cast<int64_t>(i) * words + w] : 0ull;
  };
  unsigned long long d0 = 0, d1 = 0;
  if (resolver && blocks > 0) d0 = diag(0, lane), d1 = diag(0, lane + 32);
  int out = 0;  // meaningful in the resolver warp
  for (int w = 0; w < blocks; ++w) {
    if (resolver) {
      unsigned long long n0 = 0, n1 = 0;
      if (w + 1 < blocks) n0 = diag(w + 1, lane), n1 = diag(w + 1, lane + 32);
      const int rowsHere = min(kBlockBits, count - w * kBlockBits);
      const unsigned long long valid = rowsHere == kBlockBits ? ~0ull : (1ull << rowsHere) - 1;
      unsigned long long cur = removed[w];
      unsigned long long keptBits = 0;
      unsigned long long todo = ~cur & valid;
      const int first = out;
      while (todo) {  // warp-uniform
        const int b = __ffsll(static_cast<long long>(todo)) - 1;
        keptBits |= 1ull << b;
        if (++out == maxDetections) break;
        cur |= __shfl_sync(full, b < 32 ? d0 : d1, b & 31);
        todo = ~cur & valid & ~((2ull << b) - 1);  // b == 63: 2 << 63 == 0, mask all ones
      }
      // The block's survivors, written in parallel: lane l takes bits l and l + 32.
      for (int b = lane; b < kBlockBits; b += 32)
        if ((keptBits >> b) & 1ull) {
          const int rank = __popcll(keptBits & ((1ull << b) - 1));
          kept[static_cast<int64_t>(n) * maxDetections + first + rank] = order[base + w * 64 + b];
          rows[rank] = w * kBlockBits + b;
        }
      if (lane == 0) keptRows = __popcll(keptBits), outShared = out;
      d0 = n0, d1 = n1;
    }
    __syncthreads();
    if (outShared >= maxDetections) break;  // block-uniform
    const int later = blocks - w - 1, items = keptRows * later;
    // kUnroll loads in flight per thread before their ORs (each load waits on memory).
    constexpr int kUnroll = 8;
    const int stride = static_cast<int>(blockDim.x);
    for (int start = tid; start < items; start += stride * kUnroll) {
      unsigned long long v[kUnroll];
      int at[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int item = start + u * stride;
        at[u] = -1;
        if (item < items) {
          const int r = item / later, j = w + 1 + item % later;  // consecutive threads: one row
          at[u] = j;
          v[u] = m[static_cast<int64_t>(rows[r]) * words + j];
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (at[u] >= 0) atomicOr(&removed[at[u]], v[u]);
    }
    __syncthreads();
  }
  if (tid == 0) keptCounts[n] = outShared;
}

// With EDGEINFER_NMS_PROFILE=1, CUDA-event times of each stage are logged (for tuning).
class StageTimer {
 public:
  explicit StageTimer(cudaStream_t s) : stream_(s) {
    const char* e = std::getenv("EDGEINFER_NMS_PROFILE");
    on_ = e && *e && *e != '0';
  }
  ~StageTimer() {
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }
  bool on() const { return on_; }
  void mark() {
    if (!on_) return;
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) return;
    events_.push_back(e);
    cudaEventRecord(e, stream_);
  }
  void report(const std::vector<const char*>& names) {
    if (!on_ || events_.size() < 2) return;
    std::string line = "CudaNms stages (us):";
    for (size_t i = 1; i < events_.size() && i - 1 < names.size(); ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, events_[i - 1], events_[i]);
      line += std::string(" ") + names[i - 1] + " " + std::to_string(ms * 1000.f);
    }
    log(Severity::kInfo, line);
  }

 private:
  cudaStream_t stream_;
  bool on_ = false;
  std::vector<cudaEvent_t> events_;
};

class CudaNmsImpl final : public CudaNms {
 public:
  explicit CudaNmsImpl(int deviceId) : deviceId_(deviceId) {}
  ~CudaNmsImpl() override {
    if (graph_) cudaGraphExecDestroy(graph_);
    if (ready_) cudaEventDestroy(ready_);
    if (own_) cudaStreamDestroy(own_);
    if (device_) cudaFree(device_);
    if (host_) cudaFreeHost(host_);
  }

  Status init() {
    EI_CUDA_CHECK(cudaSetDevice(deviceId_));
    EI_CUDA_CHECK(cudaStreamCreateWithFlags(&own_, cudaStreamNonBlocking));
    EI_CUDA_CHECK(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming));
    return Status::Ok();
  }

  Expected<std::vector<std::vector<int>>> run(const Tensor& boxes, const Tensor& scores,
                                              const Tensor& classIds, const NmsParams& params,
                                              void* stream) override {
    EI_RETURN_IF_ERROR(validate(params));
    if (params.method != NmsMethod::kHard)
      return Status(ErrorCode::kInvalidArgument,
                    "CudaNms does hard NMS only; use nms() on detections for weighted NMS");
    EI_RETURN_IF_ERROR(checkTensor(boxes, "boxes [N, B, 4]", DataType::kFloat32, 3));
    EI_RETURN_IF_ERROR(checkTensor(scores, "scores [N, B]", DataType::kFloat32, 2));
    const int64_t n = boxes.shape()[0], b = boxes.shape()[1];
    if (boxes.shape()[2] != 4)
      return Status(ErrorCode::kInvalidArgument,
                    "CudaNms boxes " + boxes.describe() + ": last dimension must be 4");
    if (scores.shape() != Shape{n, b})
      return Status(ErrorCode::kInvalidArgument, "CudaNms scores " + scores.describe() +
                                                     " do not match boxes " + boxes.describe());
    if (!classIds.empty()) {
      EI_RETURN_IF_ERROR(checkTensor(classIds, "classIds [N, B]", DataType::kInt32, 2));
      if (classIds.shape() != Shape{n, b})
        return Status(ErrorCode::kInvalidArgument, "CudaNms classIds " + classIds.describe() +
                                                       " do not match boxes " + boxes.describe());
    }
    if (n > 65535 || b > 65536)
      return Status(ErrorCode::kUnsupported, "CudaNms: " + boxes.describe() +
                                                 " is too large (at most 65535 images of 65536 "
                                                 "candidates)");
    const int images = static_cast<int>(n), per = static_cast<int>(b);
    const int words = (per + kBlockBits - 1) / kBlockBits;
    const int64_t total = n * b;
    const int maxDet = params.maxDetections;
    EI_CUDA_CHECK(cudaSetDevice(deviceId_));
    auto s = static_cast<cudaStream_t>(stream);

    // Workspace: one allocation, carved up (256-byte aligned pieces).
    int imageBits = 0;
    while ((1ll << imageBits) < n) ++imageBits;
    const int endBit = 32 + imageBits;
    size_t sortBytes = 0;
    EI_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
        nullptr, sortBytes, static_cast<const unsigned long long*>(nullptr),
        static_cast<unsigned long long*>(nullptr), static_cast<const int*>(nullptr),
        static_cast<int*>(nullptr), total, 0, endBit, s));
    size_t offset = 0;
    auto carve = [&](size_t bytes) {
      const size_t at = offset;
      offset += (bytes + 255) / 256 * 256;
      return at;
    };
    const size_t oKeys = carve(total * sizeof(unsigned long long));
    const size_t oKeysOut = carve(total * sizeof(unsigned long long));
    const size_t oVals = carve(total * sizeof(int)), oOrder = carve(total * sizeof(int));
    const size_t oCounts = carve(images * sizeof(int));
    const size_t oBoxes = carve(total * sizeof(float4)), oClasses = carve(total * sizeof(int));
    const size_t oMask = carve(static_cast<size_t>(total) * words * sizeof(unsigned long long));
    const size_t oKept = carve(static_cast<size_t>(images) * (maxDet + 1) * sizeof(int));
    const size_t oSort = carve(sortBytes);
    EI_RETURN_IF_ERROR(reserve(offset, static_cast<size_t>(images) * (maxDet + 1) * sizeof(int)));
    char* ws = static_cast<char*>(device_);
    auto at = [&](size_t o) { return static_cast<void*>(ws + o); };
    auto* keys = static_cast<unsigned long long*>(at(oKeys));
    auto* keysOut = static_cast<unsigned long long*>(at(oKeysOut));
    int* vals = static_cast<int*>(at(oVals));
    int* order = static_cast<int*>(at(oOrder));
    int* counts = static_cast<int*>(at(oCounts));
    auto* sortedBoxes = static_cast<float4*>(at(oBoxes));
    int* sortedClasses = static_cast<int*>(at(oClasses));
    auto* mask = static_cast<unsigned long long*>(at(oMask));
    int* kept = static_cast<int*>(at(oKept));
    int* keptCounts = kept + static_cast<size_t>(images) * maxDet;

    const auto* bx = static_cast<const float4*>(boxes.raw());
    const int* cls = classIds.empty() ? nullptr : classIds.data<int>();
    const size_t scanShared = static_cast<size_t>(words) * sizeof(unsigned long long);
    if (scanShared > 48 * 1024)
      EI_CUDA_CHECK(cudaFuncSetAttribute(scanKernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(scanShared)));
    const size_t resultBytes = static_cast<size_t>(images) * (maxDet + 1) * sizeof(int);
    // Everything from the counter reset to the copy of the results, on stream q.
    auto enqueue = [&](cudaStream_t q, StageTimer* timer) -> Status {
      if (timer) timer->mark();
      EI_CUDA_CHECK(cudaMemsetAsync(counts, 0, images * sizeof(int), q));
      filterKernel<<<static_cast<unsigned>((total + 255) / 256), 256, 0, q>>>(
          bx, scores.data<float>(), params.scoreThreshold, total, per, keys, vals, counts);
      EI_CUDA_CHECK(cudaGetLastError());
      if (timer) timer->mark();
      EI_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(at(oSort), sortBytes, keys, keysOut, vals,
                                                    order, total, 0, endBit, q));
      if (timer) timer->mark();
      gatherKernel<<<dim3((per + 255) / 256, images), 256, 0, q>>>(bx, cls, order, counts, per,
                                                                   sortedBoxes, sortedClasses);
      if (timer) timer->mark();
      maskKernel<<<dim3(words, words, images), kBlockBits, 0, q>>>(
          sortedBoxes, sortedClasses, counts, per, words, params.iouThreshold,
          params.classAgnostic || classIds.empty(), mask);
      if (timer) timer->mark();
      scanKernel<<<images, kScanThreads, scanShared, q>>>(mask, counts, order, per, words, maxDet,
                                                          kept, keptCounts);
      EI_CUDA_CHECK(cudaGetLastError());
      if (timer) timer->mark();
      EI_CUDA_CHECK(cudaMemcpyAsync(host_, kept, resultBytes, cudaMemcpyDeviceToHost, q));
      return Status::Ok();
    };

    StageTimer timer(s);
    if (timer.on()) {
      // Profiling: direct launches with events between the stages.
      EI_RETURN_IF_ERROR(enqueue(s, &timer));
      EI_CUDA_CHECK(cudaStreamSynchronize(s));
      timer.mark();
      timer.report({"filter", "sort", "gather", "mask", "walk", "copy"});
    } else {
      // The fixed launch sequence replays as one CUDA graph (captured again when the shapes,
      // parameters or buffers change), on an internal stream ordered after `s`.
      const GraphKey key{n,
                         b,
                         maxDet,
                         params.scoreThreshold,
                         params.iouThreshold,
                         params.classAgnostic || cls == nullptr,
                         bx,
                         scores.raw(),
                         cls,
                         device_,
                         host_};
      if (!graph_ || !(key == graphKey_)) {
        if (graph_) cudaGraphExecDestroy(graph_);
        graph_ = nullptr;
        EI_CUDA_CHECK(cudaStreamBeginCapture(own_, cudaStreamCaptureModeThreadLocal));
        Status st = enqueue(own_, nullptr);
        cudaGraph_t g = nullptr;
        const cudaError_t e = cudaStreamEndCapture(own_, &g);
        if (!st.ok()) {
          if (g) cudaGraphDestroy(g);
          return st;
        }
        EI_CUDA_CHECK(e);
        const cudaError_t ie = cudaGraphInstantiate(&graph_, g, 0);
        cudaGraphDestroy(g);
        EI_CUDA_CHECK(ie);
        graphKey_ = key;
      }
      EI_CUDA_CHECK(cudaEventRecord(ready_, s));
      EI_CUDA_CHECK(cudaStreamWaitEvent(own_, ready_, 0));
      EI_CUDA_CHECK(cudaGraphLaunch(graph_, own_));
      EI_CUDA_CHECK(cudaStreamSynchronize(own_));
    }
    const int* hk = static_cast<const int*>(host_);
    const int* hc = hk + static_cast<size_t>(images) * maxDet;
    std::vector<std::vector<int>> result(static_cast<size_t>(images));
    for (int i = 0; i < images; ++i)
      result[static_cast<size_t>(i)].assign(hk + static_cast<size_t>(i) * maxDet,
                                            hk + static_cast<size_t>(i) * maxDet + hc[i]);
    return result;
  }

 private:
  Status checkTensor(const Tensor& t, const char* what, DataType dtype, size_t rank) const {
    const std::string name = std::string("CudaNms ") + what + " ";
    if (t.empty()) return Status(ErrorCode::kInvalidArgument, name + "is empty");
    if (t.onHost())
      return Status(ErrorCode::kInvalidArgument,
                    name + t.describe() +
                        " is a host tensor (CudaNms takes device tensors; "
                        "batchedNms runs on the CPU)");
    if (t.dtype() != dtype)
      return Status(ErrorCode::kUnsupported,
                    name + t.describe() + ": dtype must be " + dataTypeName(dtype));
    if (t.shape().rank() != rank || t.numel() <= 0)
      return Status(ErrorCode::kInvalidArgument, name + t.describe() + ": expected rank " +
                                                     std::to_string(rank) +
                                                     " with no zero or unknown dimension");
    return Status::Ok();
  }

  Status reserve(size_t deviceBytes, size_t hostBytes) {
    if (deviceBytes > deviceBytes_) {
      if (device_) EI_CUDA_CHECK(cudaFree(device_));
      device_ = nullptr;
      deviceBytes_ = 0;
      EI_CUDA_CHECK(cudaMalloc(&device_, deviceBytes));
      deviceBytes_ = deviceBytes;
    }
    if (hostBytes > hostBytes_) {
      if (host_) EI_CUDA_CHECK(cudaFreeHost(host_));
      host_ = nullptr;
      hostBytes_ = 0;
      EI_CUDA_CHECK(cudaMallocHost(&host_, hostBytes));
      hostBytes_ = hostBytes;
    }
    return Status::Ok();
  }

  // What a captured graph was made for: a change in any field captures it again.
  struct GraphKey {
    int64_t n, b;
    int maxDet;
    float score, iou;
    bool agnostic;
    const void *boxes, *scores, *classes, *device, *host;
    bool operator==(const GraphKey& o) const {
      return n == o.n && b == o.b && maxDet == o.maxDet && score == o.score && iou == o.iou &&
             agnostic == o.agnostic && boxes == o.boxes && scores == o.scores &&
             classes == o.classes && device == o.device && host == o.host;
    }
  };

  int deviceId_;
  cudaStream_t own_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  cudaGraphExec_t graph_ = nullptr;
  GraphKey graphKey_{};
  void* device_ = nullptr;
  size_t deviceBytes_ = 0;
  void* host_ = nullptr;
  size_t hostBytes_ = 0;
};

}  // namespace

Expected<std::unique_ptr<CudaNms>> CudaNms::create(int deviceId) {
  std::string why;
  if (!runtime::cudaBackendUsable(deviceId, &why))
    return Status(ErrorCode::kUnsupported, "CudaNms: " + why);
  EI_CUDA_CHECK(cudaSetDevice(deviceId));
  auto nms = std::make_unique<CudaNmsImpl>(deviceId);
  EI_RETURN_IF_ERROR(nms->init());
  return std::unique_ptr<CudaNms>(std::move(nms));
}

}  // namespace edgeinfer::vision
