// BoundedNonZero and BoundedNonMaxSuppression kernels of the `cuda` tactic family
// (detection.h). The selections must equal the CPU reference's (kernels/ref/detection.cpp,
// graph/ops/detection_common.h) bit for bit, so the float arithmetic of the IoU test uses the
// round-to-nearest intrinsics (nvcc would otherwise fuse a multiply and an add) and min / max
// are written as std::min / std::max are.
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cub/device/device_scan.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/detection.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kThreads = 256;
constexpr size_t kAlign = 256;

size_t alignUp(size_t n) {
  return (n + kAlign - 1) / kAlign * kAlign;
}

/// Carves aligned pieces out of a workspace (or, with a null base, only adds up their sizes).
class Carve {
 public:
  explicit Carve(void* base) : base_(static_cast<char*>(base)) {}
  template <typename T>
  T* take(size_t count) {
    T* p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += alignUp(count * sizeof(T));
    return p;
  }
  size_t used() const { return used_; }

 private:
  char* base_;
  size_t used_ = 0;
};

int gridFor(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 1 ? 1 : (blocks > 4096 ? 4096 : blocks));
}

// ---- NonZero ---------------------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ bool nonZero(T v) {
  return v != T(0);  // NaN != 0: counts, as in the reference
}
template <>
__device__ __forceinline__ bool nonZero<__half>(__half v) {
  return __half2float(v) != 0.f;
}

template <typename T>
__global__ void __launch_bounds__(kThreads)
    nonZeroFlags(const T* __restrict__ x, int* __restrict__ flags, int64_t n) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads)
    flags[i] = nonZero(x[i]) ? 1 : 0;
}

__global__ void __launch_bounds__(kThreads)
    nonZeroWrite(NonZeroPlan p, const int* __restrict__ flags, const int* __restrict__ pos,
                 int64_t* __restrict__ y, int64_t* __restrict__ count) {
  const int64_t n = p.numel;
  const int64_t total = static_cast<int64_t>(pos[n - 1]) + flags[n - 1];
  const int rows = p.rank < 1 ? 1 : p.rank;
  if (blockIdx.x == 0 && threadIdx.x == 0) *count = total;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * kThreads) {
    if (flags[i]) {  // the coordinates of element i, in column pos[i]
      const int64_t col = pos[i];
      int64_t rem = i;
      for (int d = p.rank - 1; d >= 0; --d) {
        y[d * n + col] = rem % p.dims[d];
        rem /= p.dims[d];
      }
      if (p.rank == 0) y[col] = 0;
    }
    if (i >= total)  // padding
      for (int d = 0; d < rows; ++d) y[d * n + i] = 0;
  }
}

template <typename T>
void launchFlags(const void* x, int* flags, int64_t n, cudaStream_t s) {
  nonZeroFlags<T><<<gridFor(n), kThreads, 0, s>>>(static_cast<const T*>(x), flags, n);
}

// ---- NonMaxSuppression -------------------------------------------------------------------------

// std::min / std::max as the reference calls them (NaN handling included).
__device__ __forceinline__ float stdMin(float a, float b) {
  return b < a ? b : a;
}
__device__ __forceinline__ float stdMax(float a, float b) {
  return a < b ? b : a;
}

/// The reference's NmsBox: {y1, x1, y2, x2} in x, y, z, w.
__device__ __forceinline__ float4 decodeBox(const float* b, bool center) {
  const float a = b[0], bb = b[1], c = b[2], d = b[3];
  if (center) {
    const float hd = __fdiv_rn(d, 2.f), hc = __fdiv_rn(c, 2.f);
    return make_float4(__fsub_rn(bb, hd), __fsub_rn(a, hc), __fadd_rn(bb, hd), __fadd_rn(a, hc));
  }
  return make_float4(stdMin(a, c), stdMin(bb, d), stdMax(a, c), stdMax(bb, d));
}

/// detail::suppressByIou(p, q, threshold) of the reference, operation for operation.
__device__ __forceinline__ bool suppressByIou(float4 p, float4 q, float threshold) {
  const float ix1 = stdMax(p.y, q.y), iy1 = stdMax(p.x, q.x);
  const float ix2 = stdMin(p.w, q.w), iy2 = stdMin(p.z, q.z);
  const float iw = __fsub_rn(ix2, ix1), ih = __fsub_rn(iy2, iy1);
  if (iw <= 0.f || ih <= 0.f) return false;
  const float inter = __fmul_rn(iw, ih);
  const float areaP = __fmul_rn(__fsub_rn(p.w, p.y), __fsub_rn(p.z, p.x));
  const float areaQ = __fmul_rn(__fsub_rn(q.w, q.y), __fsub_rn(q.z, q.x));
  const float uni = __fsub_rn(__fadd_rn(areaP, areaQ), inter);
  if (areaP <= 0.f || areaQ <= 0.f || uni <= 0.f) return false;
  return __fdiv_rn(inter, uni) > threshold;
}

struct NmsBuffers {
  float4* decoded;
  float *keysIn, *keysSel, *keysOut;
  int *valsIn, *valsSel, *valsOut;
  int *flags, *pos, *offsets;
  float4* keptBoxes;
  int *keptIdx, *segCount, *segOffset;
  void* temp;
  size_t tempBytes;
};

/// Decodes the boxes, and flags the candidates: scores above the threshold (every score
/// without one), never NaN (as the reference), with their keys and box numbers.
__global__ void __launch_bounds__(kThreads)
    nmsPrepare(NmsPlan p, NmsParamsOnDevice params, const float* __restrict__ boxes,
               const float* __restrict__ scores, NmsBuffers w) {
  const int64_t nBoxes = p.batches * p.boxes, nScores = nBoxes * p.classes;
  const float threshold = params.score ? *params.score : p.scoreThreshold;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < nScores;
       t += static_cast<int64_t>(gridDim.x) * kThreads) {
    if (t < nBoxes) w.decoded[t] = decodeBox(boxes + t * 4, p.centerPointBox);
    const float s = scores[t];
    w.keysIn[t] = s == 0.f ? 0.f : s;  // -0 sorts as +0: equal scores keep box order
    w.valsIn[t] = static_cast<int>(t % p.boxes);
    w.flags[t] = !isnan(s) && (!p.hasScoreThreshold || s > threshold) ? 1 : 0;  // NaN: never
  }
}

/// Moves the candidates together (in order, so each (batch, class) stays one segment) and
/// records where each segment starts.
__global__ void __launch_bounds__(kThreads) nmsCompact(NmsPlan p, NmsBuffers w) {
  const int64_t nScores = p.batches * p.classes * p.boxes;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; t < nScores;
       t += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int at = w.pos[t];
    if (w.flags[t]) {
      w.keysSel[at] = w.keysIn[t];
      w.valsSel[at] = w.valsIn[t];
    }
    if (t % p.boxes == 0) w.offsets[t / p.boxes] = at;
    if (t == nScores - 1) w.offsets[p.batches * p.classes] = at + w.flags[t];
  }
}

/// A block per (batch, class): the reference's greedy loop over the sorted candidates, each
/// tested against the boxes kept so far by all threads at once.
__global__ void __launch_bounds__(kThreads)
    nmsGreedy(NmsPlan p, NmsParamsOnDevice params, NmsBuffers w) {
  int64_t limit = p.perClass;
  if (params.maxOut && *params.maxOut < limit) limit = *params.maxOut;  // <= 0: nothing
  const float iouThreshold = params.iou ? *params.iou : p.iouThreshold;
  const float scoreThreshold = params.score ? *params.score : p.scoreThreshold;
  const int64_t seg = blockIdx.x;
  const int64_t b = seg / p.classes;
  const int64_t begin = w.offsets[seg], candidates = w.offsets[seg + 1] - begin;
  const float* keys = w.keysOut + begin;
  const int* idx = w.valsOut + begin;
  float4* kept = w.keptBoxes + seg * p.perClass;
  int* keptIdx = w.keptIdx + seg * p.perClass;
  int count = 0;
  for (int64_t pos = 0; pos < candidates && count < limit; ++pos) {
    const float s = keys[pos];
    if (p.hasScoreThreshold && !(s > scoreThreshold))
      break;  // (candidates all pass it) sorted: every later score is at most this one
    const int i = idx[pos];
    const float4 q = w.decoded[b * p.boxes + i];
    int suppressed = 0;
    for (int k = threadIdx.x; k < count && !suppressed; k += blockDim.x)
      suppressed = suppressByIou(kept[k], q, iouThreshold) ? 1 : 0;
    if (__syncthreads_or(suppressed)) continue;
    if (threadIdx.x == 0) {
      kept[count] = q;
      keptIdx[count] = i;
    }
    ++count;
    __syncthreads();  // the new kept box is visible to the whole block
  }
  if (threadIdx.x == 0) w.segCount[seg] = count;
}

__global__ void __launch_bounds__(kThreads)
    nmsWrite(NmsPlan p, NmsBuffers w, int64_t* __restrict__ y, int64_t* __restrict__ count) {
  const int64_t segments = p.batches * p.classes;
  const int64_t rows = segments * p.perClass;
  const int64_t total = static_cast<int64_t>(w.segOffset[segments - 1]) + w.segCount[segments - 1];
  if (blockIdx.x == 0 && threadIdx.x == 0) *count = total;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kThreads + threadIdx.x; r < rows;
       r += static_cast<int64_t>(gridDim.x) * kThreads) {
    const int64_t seg = r / p.perClass, j = r % p.perClass;
    if (j < w.segCount[seg]) {
      int64_t* out = y + (static_cast<int64_t>(w.segOffset[seg]) + j) * 3;
      out[0] = seg / p.classes;
      out[1] = seg % p.classes;
      out[2] = w.keptIdx[r];
    }
    if (r >= total) {  // padding
      y[r * 3 + 0] = 0;
      y[r * 3 + 1] = 0;
      y[r * 3 + 2] = 0;
    }
  }
}

/// The workspace pieces of an NMS launch at `base` (null: sizes only). False when CUB cannot
/// size its storage.
bool nmsCarve(const NmsPlan& p, void* base, NmsBuffers* w, size_t* bytes) {
  const int64_t segments = p.batches * p.classes;
  const int64_t scores = segments * p.boxes;
  if (scores > INT_MAX || segments * p.perClass > INT_MAX) return false;
  Carve c(base);
  w->decoded = c.take<float4>(static_cast<size_t>(p.batches * p.boxes));
  w->keysIn = c.take<float>(static_cast<size_t>(scores));
  w->keysSel = c.take<float>(static_cast<size_t>(scores));
  w->keysOut = c.take<float>(static_cast<size_t>(scores));
  w->valsIn = c.take<int>(static_cast<size_t>(scores));
  w->valsSel = c.take<int>(static_cast<size_t>(scores));
  w->valsOut = c.take<int>(static_cast<size_t>(scores));
  w->flags = c.take<int>(static_cast<size_t>(scores));
  w->pos = c.take<int>(static_cast<size_t>(scores));
  w->offsets = c.take<int>(static_cast<size_t>(segments + 1));
  w->keptBoxes = c.take<float4>(static_cast<size_t>(segments * p.perClass));
  w->keptIdx = c.take<int>(static_cast<size_t>(segments * p.perClass));
  w->segCount = c.take<int>(static_cast<size_t>(segments));
  w->segOffset = c.take<int>(static_cast<size_t>(segments));
  // The sort is given every score as its item count (an upper bound of the candidates, which
  // the host does not know): only the segments' ranges are sorted.
  size_t sortBytes = 0, flagScanBytes = 0, countScanBytes = 0;
  if (cub::DeviceSegmentedRadixSort::SortPairsDescending(
          nullptr, sortBytes, w->keysSel, w->keysOut, w->valsSel, w->valsOut,
          static_cast<int>(scores), static_cast<int>(segments), w->offsets,
          w->offsets + 1) != cudaSuccess ||
      cub::DeviceScan::ExclusiveSum(nullptr, flagScanBytes, w->flags, w->pos,
                                    static_cast<int>(scores)) != cudaSuccess ||
      cub::DeviceScan::ExclusiveSum(nullptr, countScanBytes, w->segCount, w->segOffset,
                                    static_cast<int>(segments)) != cudaSuccess)
    return false;
  w->tempBytes = std::max(sortBytes, std::max(flagScanBytes, countScanBytes));
  w->temp = c.take<char>(w->tempBytes);
  *bytes = c.used();
  return true;
}

bool nonZeroCarve(const NonZeroPlan& p, void* base, int** flags, int** pos, void** temp,
                  size_t* tempBytes, size_t* bytes) {
  if (p.numel < 1 || p.numel > INT_MAX) return false;
  Carve c(base);
  *flags = c.take<int>(static_cast<size_t>(p.numel));
  *pos = c.take<int>(static_cast<size_t>(p.numel));
  *tempBytes = 0;
  if (cub::DeviceScan::ExclusiveSum(nullptr, *tempBytes, *flags, *pos, static_cast<int>(p.numel)) !=
      cudaSuccess)
    return false;
  *temp = c.take<char>(*tempBytes);
  *bytes = c.used();
  return true;
}

}  // namespace

size_t nonZeroWorkspaceBytes(const NonZeroPlan& plan) {
  int *flags = nullptr, *pos = nullptr;
  void* temp = nullptr;
  size_t tempBytes = 0, bytes = 0;
  return nonZeroCarve(plan, nullptr, &flags, &pos, &temp, &tempBytes, &bytes) ? bytes : 0;
}

Status launchNonZero(const NonZeroPlan& plan, const void* x, void* y, void* count, void* workspace,
                     size_t workspaceBytes, void* stream) {
  int *flags = nullptr, *pos = nullptr;
  void* temp = nullptr;
  size_t tempBytes = 0, bytes = 0;
  if (!x || !y || !count || !workspace ||
      !nonZeroCarve(plan, workspace, &flags, &pos, &temp, &tempBytes, &bytes) ||
      workspaceBytes < bytes)
    return Status(ErrorCode::kInvalidArgument, "BoundedNonZero: bad launch arguments");
  auto s = static_cast<cudaStream_t>(stream);
  switch (plan.type) {
    case NonZeroType::kFloat32:
      launchFlags<float>(x, flags, plan.numel, s);
      break;
    case NonZeroType::kFloat16:
      launchFlags<__half>(x, flags, plan.numel, s);
      break;
    case NonZeroType::kInt8:
      launchFlags<int8_t>(x, flags, plan.numel, s);
      break;
    case NonZeroType::kUInt8:
      launchFlags<uint8_t>(x, flags, plan.numel, s);
      break;
    case NonZeroType::kInt32:
      launchFlags<int32_t>(x, flags, plan.numel, s);
      break;
    case NonZeroType::kInt64:
      launchFlags<int64_t>(x, flags, plan.numel, s);
      break;
  }
  EI_CUDA_CHECK(cudaGetLastError());
  EI_CUDA_CHECK(
      cub::DeviceScan::ExclusiveSum(temp, tempBytes, flags, pos, static_cast<int>(plan.numel), s));
  nonZeroWrite<<<gridFor(plan.numel), kThreads, 0, s>>>(plan, flags, pos, static_cast<int64_t*>(y),
                                                        static_cast<int64_t*>(count));
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

size_t nmsWorkspaceBytes(const NmsPlan& plan) {
  NmsBuffers w{};
  size_t bytes = 0;
  return nmsCarve(plan, nullptr, &w, &bytes) ? bytes : 0;
}

Status launchNms(const NmsPlan& plan, const NmsParamsOnDevice& params, const void* boxes,
                 const void* scores, void* y, void* count, void* workspace, size_t workspaceBytes,
                 void* stream) {
  NmsBuffers w{};
  size_t bytes = 0;
  if (!boxes || !scores || !y || !count || !workspace || !nmsCarve(plan, workspace, &w, &bytes) ||
      workspaceBytes < bytes || plan.maxOutInput != (params.maxOut != nullptr) ||
      plan.iouInput != (params.iou != nullptr) || plan.scoreInput != (params.score != nullptr))
    return Status(ErrorCode::kInvalidArgument, "BoundedNonMaxSuppression: bad launch arguments");
  auto s = static_cast<cudaStream_t>(stream);
  const int64_t segments = plan.batches * plan.classes;
  const int64_t scoresN = segments * plan.boxes;
  nmsPrepare<<<gridFor(scoresN), kThreads, 0, s>>>(plan, params, static_cast<const float*>(boxes),
                                                   static_cast<const float*>(scores), w);
  EI_CUDA_CHECK(cudaGetLastError());
  size_t tempBytes = w.tempBytes;
  EI_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(w.temp, tempBytes, w.flags, w.pos,
                                              static_cast<int>(scoresN), s));
  nmsCompact<<<gridFor(scoresN), kThreads, 0, s>>>(plan, w);
  EI_CUDA_CHECK(cudaGetLastError());
  tempBytes = w.tempBytes;
  EI_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairsDescending(
      w.temp, tempBytes, w.keysSel, w.keysOut, w.valsSel, w.valsOut, static_cast<int>(scoresN),
      static_cast<int>(segments), w.offsets, w.offsets + 1, 0, 32, s));
  nmsGreedy<<<static_cast<unsigned>(segments), kThreads, 0, s>>>(plan, params, w);
  EI_CUDA_CHECK(cudaGetLastError());
  tempBytes = w.tempBytes;
  EI_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(w.temp, tempBytes, w.segCount, w.segOffset,
                                              static_cast<int>(segments), s));
  nmsWrite<<<gridFor(segments * plan.perClass), kThreads, 0, s>>>(plan, w, static_cast<int64_t*>(y),
                                                                  static_cast<int64_t*>(count));
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

}  // namespace edgeinfer::cuda
