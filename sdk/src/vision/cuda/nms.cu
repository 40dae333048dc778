// GPU batched hard NMS (CudaNms in edgeinfer/vision/postprocess.h), equal to the CPU
// batchedNms() in postprocess/nms.cpp:
//   1. prepare, one thread block per image: key = score if it passes the threshold and the box
//      is finite (else a key that sorts last), a block-wide stable radix sort in shared memory,
//      then the sorted order, boxes and classes of the candidates that pass. Images with more
//      than kPrepareCapacity candidates take a filter kernel, one CUB device radix sort of
//      (image, score) keys and a gather kernel instead;
//   2. the IoU > threshold bit matrix of pairs (i < j) in sorted order, 64 columns a thread;
//      pairs whose boxes do not intersect, or whose IoU is clearly away from the threshold,
//      skip the exact division;
//   3. one thread block per image walks the matrix 256 candidates (a window) at a time: one
//      warp decides the window from shared memory, while the other warps load the next
//      window's part of the matrix and OR the rows of the candidates kept so far into it.
// IoU uses explicitly rounded intrinsics in the CPU's order (vision/types.cpp), so the
// comparison with the threshold gives the same answer bit for bit.
#include <cuda_runtime.h>
#include <cub/block/block_radix_sort.cuh>
#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
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
constexpr unsigned kDropped = 0xffffffffu;

// Order-preserving sort key of a candidate's score: higher scores get smaller keys, so an
// ascending sort puts them first; kDropped marks a candidate that fails the threshold or has a
// non-finite box, sorted after every kept one. Scores that pass are >= 0, so their bits with
// the sign bit set are >= 0x80000000 and the flipped ones <= 0x7fffffff.
__device__ __forceinline__ unsigned scoreKey(const float4& b, float s, float threshold) {
  const bool keep = s >= threshold && isfinite(b.x) && isfinite(b.y) && isfinite(b.z) &&
                    isfinite(b.w);  // NaN fails >=
  // + 0.0f turns -0.0 into +0.0, which the CPU's comparison treats as equal.
  return keep ? ~(__float_as_uint(__fadd_rn(s, 0.0f)) | 0x80000000u) : kDropped;
}

// ---- 1. prepare: one thread block per image ----------------------------------------------

// Shared-memory slot of key i in the transposing buffer: one pad word per 32 makes both the
// striped writes and the blocked reads (thread t reads t * items + k) free of bank conflicts.
__device__ __forceinline__ int padded(int i) {
  return i + (i >> 5);
}

template <int kThreads, int kItems>
struct Prepare {
  static constexpr int kCapacity = kThreads * kItems;
  using Sort = cub::BlockRadixSort<unsigned, kThreads, kItems, int>;
  static constexpr size_t kKeyBytes = (kCapacity + kCapacity / 32) * sizeof(unsigned);
  static constexpr size_t kSharedBytes = kKeyBytes > sizeof(typename Sort::TempStorage)
                                             ? kKeyBytes
                                             : sizeof(typename Sort::TempStorage);
};

// Keys are computed with coalesced (striped) loads, transposed through shared memory to the
// blocked arrangement the stable sort expects (rank t * kItems + k is candidate t * kItems + k,
// so ties keep index order), sorted, and come out striped (rank k * kThreads + t) for coalesced
// stores of the order, boxes and classes.
template <int kThreads, int kItems>
__global__ void __launch_bounds__(kThreads)
    prepareKernel(const float4* boxes, const float* scores, const int* classIds, float threshold,
                  int perImage, int* order, float4* sortedBoxes, int* sortedClasses, int* counts) {
  using P = Prepare<kThreads, kItems>;
  extern __shared__ __align__(16) unsigned char prepareShared[];
  auto* keyBuffer = reinterpret_cast<unsigned*>(prepareShared);
  auto& sortStorage = *reinterpret_cast<typename P::Sort::TempStorage*>(prepareShared);
  __shared__ int keptShared;
  const int n = blockIdx.x, tid = threadIdx.x;
  const int64_t base = static_cast<int64_t>(n) * perImage;
  if (tid == 0) keptShared = 0;
  int kept = 0;
  for (int i = tid; i < P::kCapacity; i += kThreads) {
    unsigned key = kDropped;
    if (i < perImage) key = scoreKey(boxes[base + i], scores[base + i], threshold);
    kept += key != kDropped;
    keyBuffer[padded(i)] = key;
  }
  __syncthreads();  // keyBuffer complete, keptShared reset
  for (int step = 16; step > 0; step /= 2) kept += __shfl_xor_sync(0xffffffffu, kept, step);
  if ((tid & 31) == 0) atomicAdd(&keptShared, kept);
  unsigned keys[kItems];
  int values[kItems];
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    keys[k] = keyBuffer[padded(tid * kItems + k)];
    values[k] = tid * kItems + k;
  }
  __syncthreads();  // the sort reuses keyBuffer's memory; keptShared is complete
  const int count = keptShared;
  typename P::Sort(sortStorage).SortBlockedToStriped(keys, values);
#pragma unroll
  for (int k = 0; k < kItems; ++k) {
    const int r = k * kThreads + tid;
    if (r < count) {
      const int src = values[k];
      order[base + r] = src;
      sortedBoxes[base + r] = boxes[base + src];
      sortedClasses[base + r] = classIds ? classIds[base + src] : 0;
    }
  }
  if (tid == 0) counts[n] = count;
}

// ---- 1''. larger images: rank by counting, on the whole GPU --------------------------------
// A kept candidate's rank in the stable descending order is the number of kept candidates with
// a smaller key, plus those with the same key and a smaller index (dropped ones have the
// largest key and never count). Like the IoU matrix this is O(n^2) work, spread over a grid
// of (row tiles x column chunks x images) blocks that add their counts atomically; then one
// kernel scatters every kept candidate to its rank. Three kernels instead of CUB's
// multi-pass device sort, and no block limited to one SM.
constexpr int kRankTile = 256;

__global__ void __launch_bounds__(kRankTile)
    rankKernel(const float4* boxes, const float* scores, float threshold, int perImage, int chunk,
               int* ranks, int* counts) {
  const int n = blockIdx.z, tid = threadIdx.x;
  const int i = blockIdx.x * kRankTile + tid;
  const int64_t base = static_cast<int64_t>(n) * perImage;
  const unsigned key =
      i < perImage ? scoreKey(boxes[base + i], scores[base + i], threshold) : kDropped;
  if (blockIdx.y == 0) {  // one block per row tile counts its kept candidates
    int kept = key != kDropped;
    for (int step = 16; step > 0; step /= 2) kept += __shfl_xor_sync(0xffffffffu, kept, step);
    if ((tid & 31) == 0 && kept) atomicAdd(&counts[n], kept);
  }
  __shared__ unsigned tile[kRankTile];
  const int first = blockIdx.y * chunk, last = min(perImage, first + chunk);
  int rank = 0;
  for (int t0 = first; t0 < last; t0 += kRankTile) {
    const int j = t0 + tid;
    __syncthreads();
    tile[tid] = j < last ? scoreKey(boxes[base + j], scores[base + j], threshold) : kDropped;
    __syncthreads();
    const int m = min(kRankTile, last - t0);
#pragma unroll 8
    for (int k = 0; k < m; ++k) {
      const unsigned other = tile[k];
      rank += other < key || (other == key && t0 + k < i);
    }
  }
  if (key != kDropped && rank) atomicAdd(&ranks[base + i], rank);
}

__global__ void scatterKernel(const float4* boxes, const float* scores, const int* classIds,
                              float threshold, int perImage, const int* ranks, int* order,
                              float4* sortedBoxes, int* sortedClasses) {
  const int n = blockIdx.y;
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= perImage) return;
  const int64_t base = static_cast<int64_t>(n) * perImage;
  const float4 b = boxes[base + i];
  if (scoreKey(b, scores[base + i], threshold) == kDropped) return;
  const int r = ranks[base + i];
  order[base + r] = i;
  sortedBoxes[base + r] = b;
  sortedClasses[base + r] = classIds ? classIds[base + i] : 0;
}

// ---- 1'. images too large for one thread block: filter, CUB device sort, gather -----------

// Sort key of candidate i: image in the high 32 bits, then scoreKey().
__global__ void filterKernel(const float4* boxes, const float* scores, float threshold,
                             int64_t total, int perImage, unsigned long long* keys, int* values,
                             int* counts) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= total) return;
  const unsigned key = scoreKey(boxes[i], scores[i], threshold);
  const int64_t image = i / perImage;
  keys[i] = (static_cast<unsigned long long>(image) << 32) | key;
  values[i] = static_cast<int>(i - image * perImage);
  if (key != kDropped) atomicAdd(&counts[image], 1);
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

// ---- 2. the IoU bit matrix ----------------------------------------------------------------

__device__ __forceinline__ float area(float x1, float y1, float x2, float y2) {
  const float w = __fsub_rn(x2, x1), h = __fsub_rn(y2, y1);
  return w > 0.f && h > 0.f ? __fmul_rn(w, h) : 0.f;
}

// vision::iou(a, b) > threshold, with iou() of types.cpp rounding as it does. Most pairs do not
// intersect (IoU 0); for the others i * (1 / u), within 2 ulp (about 2.4e-7 relative) of the
// quotient, decides when it is more than 1e-5 (relative) away from the threshold, and the
// exactly rounded division decides the rest, so the answer always equals the CPU's.
__device__ __forceinline__ bool overlaps(const float4& a, const float4& b, float threshold) {
  const float i = area(fmaxf(a.x, b.x), fmaxf(a.y, b.y), fminf(a.z, b.z), fminf(a.w, b.w));
  if (!(i > 0.f)) return 0.f > threshold;
  const float u = __fsub_rn(__fadd_rn(area(a.x, a.y, a.z, a.w), area(b.x, b.y, b.z, b.w)), i);
  if (!(u > 0.f)) return 0.f > threshold;
  const float q = __fmul_rn(i, __frcp_rn(u));
  if (q > 1e-30f && u < 1e30f && fabsf(q - threshold) > 1e-5f * fmaxf(q, threshold))
    return q > threshold;
  return __fdiv_rn(i, u) > threshold;
}

// mask[n][row][word]: bit k of word w of row i is set when candidate j = 64 w + k (j > i)
// overlaps i by IoU > threshold and may suppress it (same class, or class-agnostic). A thread
// block covers kMaskRowBlocks row tiles of 64 against one column tile; only tiles with
// column >= row (and inside the image's count) are written: the walk never reads the others.
constexpr int kMaskRowBlocks = 4;

__global__ void __launch_bounds__(kBlockBits* kMaskRowBlocks)
    maskKernel(const float4* sortedBoxes, const int* sortedClasses, const int* counts, int perImage,
               int words, float threshold, bool agnostic, unsigned long long* mask) {
  const int n = blockIdx.z;
  const int count = counts[n];
  const int colBlock = blockIdx.x, firstRowBlock = blockIdx.y * kMaskRowBlocks;
  if (firstRowBlock > colBlock || colBlock * kBlockBits >= count) return;  // block-uniform
  const int64_t base = static_cast<int64_t>(n) * perImage;
  __shared__ float4 cols[kBlockBits];
  __shared__ int colClass[kBlockBits];
  const int t = threadIdx.x;
  const int c = colBlock * kBlockBits + t;
  if (t < kBlockBits && c < count) {
    cols[t] = sortedBoxes[base + c];
    colClass[t] = sortedClasses[base + c];
  }
  __syncthreads();
  const int rowBlock = firstRowBlock + t / kBlockBits, lane = t % kBlockBits;
  const int i = rowBlock * kBlockBits + lane;
  if (rowBlock > colBlock || i >= count) return;
  const float4 bi = sortedBoxes[base + i];
  const int ci = sortedClasses[base + i];
  const int ncols = min(kBlockBits, count - colBlock * kBlockBits);
  const int start = colBlock == rowBlock ? lane + 1 : 0;
  // First the columns that may suppress row i (later, same class unless class-agnostic):
  // independent shared-memory reads, no branches; then IoU only for those.
  const unsigned long long columns =
      ncols > start ? (~0ull >> (kBlockBits - (ncols - start))) << start : 0ull;
  unsigned long long candidates = columns;
  if (!agnostic) {
    candidates = 0;
#pragma unroll 16
    for (int k = 0; k < kBlockBits; ++k)
      candidates |= static_cast<unsigned long long>(colClass[k] == ci) << k;
    candidates &= columns;
  }
  unsigned long long bits = 0;
  while (candidates) {
    const int k = __ffsll(static_cast<long long>(candidates)) - 1;
    candidates &= candidates - 1;
    if (overlaps(bi, cols[k], threshold)) bits |= 1ull << k;
  }
  mask[(base + i) * words + colBlock] = bits;
}

// ---- 3. the greedy walk -------------------------------------------------------------------

// One thread block per image; windows of kWindow candidates (kWindowWords mask words).
// Iteration w:
//   - warp 0 decides window w from shared memory: `removed` = the rows kept before window
//     w - 1 ORed over this window's words (computed by the helpers in iteration w - 1) | the
//     rows kept in window w - 1 (ORed by warp 0 at the end of iteration w - 1); then the
//     window's survivors in a few parallel rounds (resolveWindow), or one at a time when
//     those do not settle;
//   - meanwhile warps 1.. (the helpers) load window w + 1's diagonal block and its
//     off-diagonal block (its rows, window w + 2's words) and OR the rows kept before window
//     w over window w + 1's words;
//   - warp 0 ORs the rows it kept in window w over window w + 1's words (from the
//     off-diagonal block loaded in iteration w - 1);
// then one barrier. Everything warp 0 reads to decide is in shared memory, and the memory
// latency of the helpers' loads overlaps the serial decisions.
constexpr int kWindowWords = 4;
constexpr int kWindow = kWindowWords * kBlockBits;
constexpr int kWalkThreads = 512;
// Kept rows are listed in shared memory when at most this many can be kept, else in global
// scratch.
constexpr int kSharedRowsMax = 8192;

struct WalkShared {
  unsigned long long diag[2][kWindow][kWindowWords];
  unsigned long long offDiag[2][kWindow][kWindowWords];
  unsigned long long partial[2][kWindowWords];
  unsigned long long carry[kWindowWords];
  int kept[2];  // rows kept before window w, in kept[w & 1]
};

__device__ __forceinline__ unsigned long long warpOr(unsigned long long v) {
  for (int step = 16; step > 0; step /= 2) v |= __shfl_xor_sync(0xffffffffu, v, step);
  return v;
}

// The survivors of one window, by one warp, in parallel: a candidate survives when no earlier
// candidate removes it and no earlier survivor of the window suppresses it. Starting from
// "every candidate not removed survives", each round recomputes the survivors from the last
// round's; whatever the start, after t rounds the first t candidates are right, and a round
// that changes nothing has reached the one consistent answer, the greedy one. Real detector
// output settles in two or three rounds (suppression chains are short); returns false if it
// has not settled after kResolveRounds, and the caller walks the window serially.
constexpr int kResolveRounds = 6;

__device__ __forceinline__ bool resolveWindow(
    const unsigned long long (&diag)[kWindow][kWindowWords],
    const unsigned long long (&removed)[kWindowWords], int lane,
    unsigned long long (&keep)[kWindowWords]) {
#pragma unroll
  for (int k = 0; k < kWindowWords; ++k) keep[k] = ~removed[k];
  for (int round = 0; round < kResolveRounds; ++round) {
    unsigned long long suppressed[kWindowWords] = {0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < kWindowWords; ++k)
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // this lane's rows: k * 64 + half * 32 + lane
        const int bit = half * 32 + lane;
        if ((keep[k] >> bit) & 1ull)
#pragma unroll
          for (int q = 0; q < kWindowWords; ++q) suppressed[q] |= diag[k * kBlockBits + bit][q];
      }
    bool same = true;
#pragma unroll
    for (int k = 0; k < kWindowWords; ++k) {
      const unsigned long long next = ~removed[k] & ~warpOr(suppressed[k]);
      same = same && next == keep[k];
      keep[k] = next;
    }
    if (same) return true;  // warp-uniform
  }
  return false;
}

__global__ void __launch_bounds__(kWalkThreads)
    walkKernel(const unsigned long long* mask, const int* counts, const int* order, int perImage,
               int words, int maxDetections, int* rowsScratch, int* kept, int* keptCounts) {
  extern __shared__ __align__(16) unsigned char walkShared[];
  auto& sh = *reinterpret_cast<WalkShared*>(walkShared);
  const int n = blockIdx.x, tid = threadIdx.x, lane = tid & 31;
  const int count = counts[n];
  const int usedWords = (count + kBlockBits - 1) / kBlockBits;
  const int windows = (count + kWindow - 1) / kWindow;
  const int64_t base = static_cast<int64_t>(n) * perImage;
  const unsigned long long* m = mask + base * words;
  int* rows = maxDetections <= kSharedRowsMax
                  ? reinterpret_cast<int*>(walkShared + sizeof(WalkShared))
                  : rowsScratch + static_cast<int64_t>(n) * maxDetections;
  int* keptOut = kept + static_cast<int64_t>(n) * maxDetections;

  // Word `word` of row `row`, 0 where the mask kernel wrote nothing (tiles below the
  // diagonal, beyond the count).
  auto maskWord = [&](int row, int word) -> unsigned long long {
    return row < count && word < usedWords && word >= row / kBlockBits
               ? m[static_cast<int64_t>(row) * words + word]
               : 0ull;
  };
  // Loads window v's diagonal and off-diagonal blocks into buffer v & 1, threads
  // [first, first + threads) sharing the work, 8 loads in flight each.
  auto loadWindow = [&](int v, int first, int threads) {
    const int b = v & 1;
    constexpr int kItems = 2 * kWindow * kWindowWords;
    constexpr int kUnroll = 8;
    for (int s = tid - first; s < kItems; s += threads * kUnroll) {
      unsigned long long val[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int item = s + u * threads;
        val[u] = 0;
        if (item < kItems) {
          const bool off = item >= kWindow * kWindowWords;
          const int e = off ? item - kWindow * kWindowWords : item;
          const int r = e / kWindowWords, k = e % kWindowWords;
          val[u] = maskWord(v * kWindow + r, (v + (off ? 1 : 0)) * kWindowWords + k);
        }
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int item = s + u * threads;
        if (item < kItems) {
          const bool off = item >= kWindow * kWindowWords;
          const int e = off ? item - kWindow * kWindowWords : item;
          (off ? sh.offDiag : sh.diag)[b][e / kWindowWords][e % kWindowWords] = val[u];
        }
      }
    }
  };

  if (tid < kWindowWords) {
    sh.partial[0][tid] = sh.partial[1][tid] = 0;
    sh.carry[tid] = 0;
  }
  if (tid == 0) sh.kept[0] = 0;
  int out = 0;  // rows kept so far (warp 0's count)
  if (windows > 0) loadWindow(0, 0, kWalkThreads);
  __syncthreads();

  for (int w = 0; w < windows; ++w) {
    const int cur = w & 1;
    const int keptBefore = sh.kept[cur];  // rows kept in windows < w
    if (tid < 32) {
      // ---- warp 0 decides window w ----
      const int valid = min(kWindow, count - w * kWindow);
      unsigned long long removed[kWindowWords];  // the same in every lane
#pragma unroll
      for (int k = 0; k < kWindowWords; ++k) {
        removed[k] = sh.partial[cur][k] | sh.carry[k];
        const int lo = k * kBlockBits;
        if (valid <= lo)
          removed[k] = ~0ull;
        else if (valid < lo + kBlockBits)
          removed[k] |= ~0ull << (valid - lo);
      }
      __syncwarp();
      if (lane < kWindowWords) sh.partial[cur][lane] = 0;  // free for iteration w + 1's helpers
      unsigned long long keep[kWindowWords];
      if (!resolveWindow(sh.diag[cur], removed, lane, keep)) {
        // A long chain of suppressions (rare): the greedy walk, one survivor at a time, the
        // same in every lane (shared-memory reads are broadcasts).
#pragma unroll
        for (int k = 0; k < kWindowWords; ++k) keep[k] = 0;
#pragma unroll
        for (int k = 0; k < kWindowWords; ++k)
          while (~removed[k]) {
            const int bit = __ffsll(static_cast<long long>(~removed[k])) - 1;
            keep[k] |= 1ull << bit;
            removed[k] |= 1ull << bit;
#pragma unroll
            for (int q = 0; q < kWindowWords; ++q)
              removed[q] |= sh.diag[cur][k * kBlockBits + bit][q];
          }
      }
      // At most maxDetections in all: the walk would have stopped there, and later decisions
      // never change earlier ones, so dropping the last survivors is exact.
      int allowed = maxDetections - keptBefore;
#pragma unroll
      for (int k = 0; k < kWindowWords; ++k) {
        const int c = __popcll(keep[k]);
        if (allowed <= 0) {
          keep[k] = 0;
        } else if (c > allowed) {  // keep the lowest `allowed` bits: cut above the allowed-th
          const unsigned lo = static_cast<unsigned>(keep[k]);
          const int inLo = __popc(lo);
          if (allowed <= inLo) {
            const int at = __fns(lo, 0, allowed);  // position of the allowed-th set bit
            keep[k] = lo & (at == 31 ? ~0u : (2u << at) - 1u);
          } else {
            const unsigned hi = static_cast<unsigned>(keep[k] >> 32);
            const int at = __fns(hi, 0, allowed - inLo);
            keep[k] =
                (static_cast<unsigned long long>(hi & (at == 31 ? ~0u : (2u << at) - 1u)) << 32) |
                lo;
          }
        }
        allowed -= __popcll(keep[k]);
      }
      // The kept rows, in order: their indices, the list the helpers read, and their rows
      // over window w + 1's words (the carry into iteration w + 1).
      unsigned long long acc[kWindowWords] = {0, 0, 0, 0};
      int before = keptBefore;
#pragma unroll
      for (int k = 0; k < kWindowWords; ++k) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int bit = half * 32 + lane, r = k * kBlockBits + bit;
          if ((keep[k] >> bit) & 1ull) {
            const int j = before + __popcll(keep[k] & ((1ull << bit) - 1));
            rows[j] = w * kWindow + r;
            keptOut[j] = order[base + w * kWindow + r];
#pragma unroll
            for (int q = 0; q < kWindowWords; ++q) acc[q] |= sh.offDiag[cur][r][q];
          }
        }
        before += __popcll(keep[k]);
      }
      out = before;
#pragma unroll
      for (int q = 0; q < kWindowWords; ++q) {
        acc[q] = warpOr(acc[q]);
        if (lane == 0) sh.carry[q] = acc[q];
      }
      if (lane == 0) sh.kept[cur ^ 1] = out;
    } else if (w + 1 < windows) {
      // ---- helpers: prepare window w + 1 ----
      const int helpers = kWalkThreads - 32;
      loadWindow(w + 1, 32, helpers);
      // Rows kept before window w, ORed over window w + 1's words: item = (row j, word q),
      // a warp's lanes over consecutive items so its partial ORs reduce per word.
      const int items = keptBefore * kWindowWords;
      const int word0 = (w + 1) * kWindowWords;
      constexpr int kUnroll = 4;
      unsigned long long acc = 0;  // of word (tid - 32) % kWindowWords: helpers is a multiple
      for (int s = tid - 32; s < items; s += helpers * kUnroll) {
        unsigned long long val[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) {
          const int item = s + u * helpers;
          val[u] = item < items ? maskWord(rows[item / kWindowWords], word0 + item % kWindowWords)
                                : 0ull;
        }
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) acc |= val[u];
      }
      // Lanes q, q + 4, ... hold word q: OR them within the warp, then across warps.
      for (int step = kWindowWords; step < 32; step *= 2)
        acc |= __shfl_down_sync(0xffffffffu, acc, step);
      if (lane < kWindowWords && acc) atomicOr(&sh.partial[cur ^ 1][lane], acc);
    }
    __syncthreads();
    if (sh.kept[cur ^ 1] >= maxDetections) break;  // block-uniform
  }
  if (tid == 0) keptCounts[n] = out;
}

// Keeps the GPU busy for `cycles` clock cycles, so the launches queued behind it start back to
// back and the profile's events time the GPU, not the host's launch rate.
__global__ void spinKernel(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {
  }
}

// With EDGEINFER_NMS_PROFILE=1, CUDA-event times of each stage are logged (for tuning).
class StageTimer {
 public:
  explicit StageTimer(cudaStream_t s) : stream_(s) {
    const char* e = std::getenv("EDGEINFER_NMS_PROFILE");
    on_ = e && *e && *e != '0';
    if (!on_) return;
    for (cudaEvent_t& ev : events_)
      if (cudaEventCreate(&ev) != cudaSuccess) on_ = false;
    if (on_) spinKernel<<<1, 1, 0, stream_>>>(2000000);  // about 1 ms
  }
  ~StageTimer() {
    for (cudaEvent_t e : events_)
      if (e) cudaEventDestroy(e);
  }
  bool on() const { return on_; }
  void mark() {
    if (on_ && used_ < kEvents) cudaEventRecord(events_[used_++], stream_);
  }
  void report(const std::vector<const char*>& names) {
    if (!on_ || used_ < 2 || cudaEventSynchronize(events_[used_ - 1]) != cudaSuccess) return;
    std::string line = "CudaNms stages (us):";
    for (int i = 1; i < used_ && static_cast<size_t>(i - 1) < names.size(); ++i) {
      float ms = 0;
      cudaEventElapsedTime(&ms, events_[i - 1], events_[i]);
      line +=
          std::string(" ") + names[static_cast<size_t>(i - 1)] + " " + std::to_string(ms * 1000.f);
    }
    log(Severity::kInfo, line);
  }

 private:
  static constexpr int kEvents = 8;
  cudaStream_t stream_;
  bool on_ = false;
  cudaEvent_t events_[kEvents] = {};
  int used_ = 0;
};

class CudaNmsImpl final : public CudaNms {
 public:
  explicit CudaNmsImpl(int deviceId) : deviceId_(deviceId) {
    // EDGEINFER_NMS_DEVICE_SORT=1: always the device-wide sort (for comparing the two).
    const char* e = std::getenv("EDGEINFER_NMS_DEVICE_SORT");
    deviceSortForced_ = e && *e && *e != '0';
  }
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
    EI_CUDA_CHECK(cudaDeviceGetAttribute(&smCount_, cudaDevAttrMultiProcessorCount, deviceId_));
    // The kernels' largest dynamic shared memory, allowed once.
    EI_RETURN_IF_ERROR(
        allowSharedMemory(walkKernel, sizeof(WalkShared) + kSharedRowsMax * sizeof(int)));
    EI_RETURN_IF_ERROR(allowSharedMemory(prepareKernel<1024, 16>, Prepare<1024, 16>::kSharedBytes));
    EI_RETURN_IF_ERROR(allowSharedMemory(prepareKernel<512, 8>, Prepare<512, 8>::kSharedBytes));
    EI_RETURN_IF_ERROR(allowSharedMemory(prepareKernel<256, 4>, Prepare<256, 4>::kSharedBytes));
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
    // No image keeps more than all its candidates: buffers are sized by that, not by a large
    // maxDetections.
    const int maxDet = static_cast<int>(std::min<int64_t>(params.maxDetections, per));
    EI_CUDA_CHECK(cudaSetDevice(deviceId_));
    auto s = static_cast<cudaStream_t>(stream);

    // Step 1 in one kernel per image when one thread block can sort it, else three kernels.
    using PrepareSmall = Prepare<256, 4>;
    using PrepareMedium = Prepare<512, 8>;
    using PrepareLarge = Prepare<1024, 16>;
    const bool blockSort = per <= PrepareLarge::kCapacity && !deviceSortForced_;
    // Rank by counting: for images too large to sort fast in one block (one SM) and small
    // enough that n^2 comparisons stay cheap.
    const int rowTiles = (per + kRankTile - 1) / kRankTile;
    // (With many images the one-block sorts already fill the GPU.)
    const bool rankSort = !deviceSortForced_ && per > PrepareSmall::kCapacity &&
                          images <= std::max(1, smCount_ / 4) &&
                          static_cast<double>(per) * per * images <= 4.5e8;
    // Column chunks: enough blocks for every SM a few times over.
    const int chunks =
        std::max(1, std::min(rowTiles, 4 * smCount_ / std::max(1, rowTiles * images)));
    const int chunk = (rowTiles + chunks - 1) / chunks * kRankTile;

    // Workspace: one allocation, carved up (256-byte aligned pieces).
    int imageBits = 0;
    while ((1ll << imageBits) < n) ++imageBits;
    const int endBit = 32 + imageBits;
    size_t sortBytes = 0;
    if (!blockSort)
      EI_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
          nullptr, sortBytes, static_cast<const unsigned long long*>(nullptr),
          static_cast<unsigned long long*>(nullptr), static_cast<const int*>(nullptr),
          static_cast<int*>(nullptr), total, 0, endBit, s));
    const size_t deviceSortItems = blockSort ? 0 : static_cast<size_t>(total);
    size_t offset = 0;
    auto carve = [&](size_t bytes) {
      const size_t at = offset;
      offset += (bytes + 255) / 256 * 256;
      return at;
    };
    const size_t oKeys = carve(deviceSortItems * sizeof(unsigned long long));
    const size_t oKeysOut = carve(deviceSortItems * sizeof(unsigned long long));
    const size_t oVals = carve(deviceSortItems * sizeof(int));
    const size_t oRanks = carve(rankSort ? total * sizeof(int) : 0);
    const size_t oSort = carve(sortBytes);
    const size_t oOrder = carve(total * sizeof(int));
    const size_t oCounts = carve(images * sizeof(int));
    const size_t oBoxes = carve(total * sizeof(float4)), oClasses = carve(total * sizeof(int));
    const size_t oMask = carve(static_cast<size_t>(total) * words * sizeof(unsigned long long));
    const bool rowsShared = maxDet <= kSharedRowsMax;
    const size_t oRows = carve(rowsShared ? 0 : static_cast<size_t>(images) * maxDet * sizeof(int));
    const size_t oKept = carve(static_cast<size_t>(images) * (maxDet + 1) * sizeof(int));
    EI_RETURN_IF_ERROR(reserve(offset, static_cast<size_t>(images) * (maxDet + 1) * sizeof(int)));
    char* ws = static_cast<char*>(device_);
    auto at = [&](size_t o) { return static_cast<void*>(ws + o); };
    auto* keys = static_cast<unsigned long long*>(at(oKeys));
    auto* keysOut = static_cast<unsigned long long*>(at(oKeysOut));
    int* vals = static_cast<int*>(at(oVals));
    int* ranks = static_cast<int*>(at(oRanks));
    int* order = static_cast<int*>(at(oOrder));
    int* counts = static_cast<int*>(at(oCounts));
    auto* sortedBoxes = static_cast<float4*>(at(oBoxes));
    int* sortedClasses = static_cast<int*>(at(oClasses));
    auto* mask = static_cast<unsigned long long*>(at(oMask));
    int* rowsScratch = static_cast<int*>(at(oRows));
    int* kept = static_cast<int*>(at(oKept));
    int* keptCounts = kept + static_cast<size_t>(images) * maxDet;

    const auto* bx = static_cast<const float4*>(boxes.raw());
    const float* sc = scores.data<float>();
    const int* cls = classIds.empty() ? nullptr : classIds.data<int>();
    const bool agnostic = params.classAgnostic || cls == nullptr;
    const size_t walkShared = sizeof(WalkShared) + (rowsShared ? maxDet * sizeof(int) : 0);
    const size_t resultBytes = static_cast<size_t>(images) * (maxDet + 1) * sizeof(int);
    // Everything from the first kernel to the copy of the results, on stream q.
    // The stages, each a function of the stream (rerunning one gives the same result).
    auto prepareStage = [&](cudaStream_t q) -> Status {
      if (rankSort) {
        EI_CUDA_CHECK(cudaMemsetAsync(ranks, 0, total * sizeof(int), q));
        EI_CUDA_CHECK(cudaMemsetAsync(counts, 0, images * sizeof(int), q));
        rankKernel<<<dim3(rowTiles, (per + chunk - 1) / chunk, images), kRankTile, 0, q>>>(
            bx, sc, params.scoreThreshold, per, chunk, ranks, counts);
        EI_CUDA_CHECK(cudaGetLastError());
        scatterKernel<<<dim3((per + 255) / 256, images), 256, 0, q>>>(
            bx, sc, cls, params.scoreThreshold, per, ranks, order, sortedBoxes, sortedClasses);
      } else if (per <= PrepareSmall::kCapacity) {
        prepareKernel<256, 4><<<images, 256, PrepareSmall::kSharedBytes, q>>>(
            bx, sc, cls, params.scoreThreshold, per, order, sortedBoxes, sortedClasses, counts);
      } else if (per <= PrepareMedium::kCapacity && blockSort) {
        prepareKernel<512, 8><<<images, 512, PrepareMedium::kSharedBytes, q>>>(
            bx, sc, cls, params.scoreThreshold, per, order, sortedBoxes, sortedClasses, counts);
      } else if (blockSort) {
        prepareKernel<1024, 16><<<images, 1024, PrepareLarge::kSharedBytes, q>>>(
            bx, sc, cls, params.scoreThreshold, per, order, sortedBoxes, sortedClasses, counts);
      } else {
        EI_CUDA_CHECK(cudaMemsetAsync(counts, 0, images * sizeof(int), q));
        filterKernel<<<static_cast<unsigned>((total + 255) / 256), 256, 0, q>>>(
            bx, sc, params.scoreThreshold, total, per, keys, vals, counts);
        EI_CUDA_CHECK(cudaGetLastError());
        EI_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(at(oSort), sortBytes, keys, keysOut, vals,
                                                      order, total, 0, endBit, q));
        gatherKernel<<<dim3((per + 255) / 256, images), 256, 0, q>>>(bx, cls, order, counts, per,
                                                                     sortedBoxes, sortedClasses);
      }
      EI_CUDA_CHECK(cudaGetLastError());
      return Status::Ok();
    };
    auto maskStage = [&](cudaStream_t q) -> Status {
      maskKernel<<<dim3(words, (words + kMaskRowBlocks - 1) / kMaskRowBlocks, images),
                   kBlockBits * kMaskRowBlocks, 0, q>>>(sortedBoxes, sortedClasses, counts, per,
                                                        words, params.iouThreshold, agnostic, mask);
      EI_CUDA_CHECK(cudaGetLastError());
      return Status::Ok();
    };
    auto walkStage = [&](cudaStream_t q) -> Status {
      walkKernel<<<images, kWalkThreads, walkShared, q>>>(mask, counts, order, per, words, maxDet,
                                                          rowsScratch, kept, keptCounts);
      EI_CUDA_CHECK(cudaGetLastError());
      return Status::Ok();
    };
    // Everything from the first kernel to the copy of the results, on stream q.
    auto enqueue = [&](cudaStream_t q, StageTimer* timer) -> Status {
      if (timer) timer->mark();
      EI_RETURN_IF_ERROR(prepareStage(q));
      if (timer) timer->mark();
      EI_RETURN_IF_ERROR(maskStage(q));
      if (timer) timer->mark();
      EI_RETURN_IF_ERROR(walkStage(q));
      if (timer) timer->mark();
      EI_CUDA_CHECK(cudaMemcpyAsync(host_, kept, resultBytes, cudaMemcpyDeviceToHost, q));
      return Status::Ok();
    };

    StageTimer timer(s);
    if (timer.on()) {
      // Profiling: direct launches, queued behind a spin kernel, events between the stages.
      EI_RETURN_IF_ERROR(enqueue(s, &timer));
      timer.mark();
      EI_CUDA_CHECK(cudaStreamSynchronize(s));
      timer.report({"prepare", "mask", "walk", "copy"});
      // Then each stage alone, 20 launches back to back: its time without launch gaps.
      StageTimer again(s);
      again.mark();
      for (int i = 0; i < 20; ++i) EI_RETURN_IF_ERROR(prepareStage(s));
      again.mark();
      for (int i = 0; i < 20; ++i) EI_RETURN_IF_ERROR(maskStage(s));
      again.mark();
      for (int i = 0; i < 20; ++i) EI_RETURN_IF_ERROR(walkStage(s));
      again.mark();
      EI_CUDA_CHECK(cudaStreamSynchronize(s));
      again.report({"20x prepare", "20x mask", "20x walk"});
    } else {
      // The fixed launch sequence replays as one CUDA graph (captured again when the shapes,
      // parameters or buffers change), on an internal stream ordered after `s`.
      const GraphKey key{
          n,   b,       maxDet, params.scoreThreshold, params.iouThreshold, agnostic, bx, sc,
          cls, device_, host_};
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

  // Lets `kernel` take `bytes` of dynamic shared memory (beyond the default 48 KiB).
  template <typename Kernel>
  static Status allowSharedMemory(Kernel kernel, size_t bytes) {
    if (bytes > 48 * 1024)
      EI_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                         static_cast<int>(bytes)));
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
  bool deviceSortForced_ = false;
  int smCount_ = 1;
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
