// Data-movement kernels of the `cuda` tactic family (data_movement.h). Every kernel is a
// grid-stride loop with one thread per output access unit: writes are always coalesced; reads
// are coalesced wherever the source is contiguous along the output's innermost dim. The unit
// is the widest of 16/8/4/2/1 bytes that divides every contiguous run and every pointer, so
// FP16 and FP32 copies of aligned rows move 16 bytes per thread.
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_half.h"
#include "kernels/cuda/data_movement.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kThreads = 256;

/// Calls f(U{}) with the unsigned type of `bytes` (1, 2, 4, 8 or 16).
template <typename F>
Status dispatchUnit(int bytes, F&& f) {
  switch (bytes) {
    case 1:
      return f(uint8_t{});
    case 2:
      return f(uint16_t{});
    case 4:
      return f(uint32_t{});
    case 8:
      return f(uint2{});
    case 16:
      return f(uint4{});
    default:
      return Status(ErrorCode::kInternal, "data movement: bad unit size " + std::to_string(bytes));
  }
}

/// The widest unit (a multiple of elemBytes, at most 16) dividing every value in bytes.
int widestUnit(int elemBytes, std::initializer_list<int64_t> byteCounts,
               std::initializer_list<const void*> ptrs) {
  for (int u = 16; u > elemBytes; u /= 2) {
    bool ok = true;
    for (int64_t b : byteCounts) ok = ok && b % u == 0;
    for (const void* p : ptrs)
      ok = ok && reinterpret_cast<uintptr_t>(p) % static_cast<unsigned>(u) == 0;
    if (ok) return u;
  }
  return elemBytes;
}

bool fitsInt32(int64_t v) {
  return v >= -static_cast<int64_t>(INT_MAX) && v <= INT_MAX;
}

// ---- Strided copy ----------------------------------------------------------------------------

template <typename I>
struct CopyParams {
  int rank;
  I dims[kMoveMaxDims];
  I strides[kMoveMaxDims];
  I base;
  I numel;
};

template <typename U, typename I>
__global__ void __launch_bounds__(kThreads)
    stridedCopyKernel(const U* __restrict__ x, U* __restrict__ y, const CopyParams<I> p) {
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I o = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; o < p.numel; o += step) {
    I rem = o, off = p.base;
    for (int d = p.rank - 1; d > 0; --d) {
      const I c = rem % p.dims[d];
      rem /= p.dims[d];
      off += c * p.strides[d];
    }
    off += rem * p.strides[0];
    y[o] = x[off];
  }
}

template <typename U, typename I>
Status launchCopyT(const StridedCopyPlan& q, const void* x, void* y, int maxBlocks,
                   cudaStream_t stream) {
  CopyParams<I> p{};
  p.rank = q.rank;
  for (int d = 0; d < q.rank; ++d) {
    p.dims[d] = static_cast<I>(q.dims[d]);
    p.strides[d] = static_cast<I>(q.strides[d]);
  }
  p.base = static_cast<I>(q.base);
  p.numel = static_cast<I>(q.numel);
  stridedCopyKernel<U, I><<<dev::gridFor(q.numel, kThreads, maxBlocks), kThreads, 0, stream>>>(
      static_cast<const U*>(x), static_cast<U*>(y), p);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

// ---- Tiled transpose -------------------------------------------------------------------------
// When the output's innermost dim `a` is strided in the input but another output dim `j` is
// the input's contiguous one (NCHW <-> NHWC and the like), a 32 x 32 tile of (j, a) goes
// through shared memory: read coalesced along j, written coalesced along a.

constexpr int kTile = 32;
constexpr int kTileRows = 8;

template <typename I>
struct TileParams {
  int batchRank;
  I batchDims[kMoveMaxDims];
  I batchInStrides[kMoveMaxDims];
  I batchOutStrides[kMoveMaxDims];
  I dimJ, dimA;  // sizes of the two tiled dims
  I inStrideA;   // input stride of a (j has input stride 1)
  I outStrideJ;  // output stride of j (a has output stride 1)
  I base;
  I tilesJ, tilesA, tiles;  // tiles = batch * tilesJ * tilesA
};

template <typename U, typename I>
__global__ void __launch_bounds__(kTile* kTileRows)
    tiledTransposeKernel(const U* __restrict__ x, U* __restrict__ y, const TileParams<I> p) {
  __shared__ U tile[kTile][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (I t = blockIdx.x; t < p.tiles; t += gridDim.x) {
    const I ta = t % p.tilesA;
    I rest = t / p.tilesA;
    const I tj = rest % p.tilesJ;
    rest /= p.tilesJ;
    I inOff = p.base, outOff = 0;
    for (int d = p.batchRank - 1; d >= 0; --d) {
      const I c = rest % p.batchDims[d];
      rest /= p.batchDims[d];
      inOff += c * p.batchInStrides[d];
      outOff += c * p.batchOutStrides[d];
    }
    const I j0 = tj * kTile, a0 = ta * kTile;
    {
      const I j = j0 + tx;
#pragma unroll
      for (int k = 0; k < kTile; k += kTileRows) {
        const I a = a0 + ty + k;
        if (j < p.dimJ && a < p.dimA) tile[ty + k][tx] = x[inOff + j + a * p.inStrideA];
      }
    }
    __syncthreads();
    {
      const I a = a0 + tx;
#pragma unroll
      for (int k = 0; k < kTile; k += kTileRows) {
        const I j = j0 + ty + k;
        if (j < p.dimJ && a < p.dimA) y[outOff + j * p.outStrideJ + a] = tile[tx][ty + k];
      }
    }
    __syncthreads();
  }
}

/// Launches the tiled kernel; q.strides[j] == 1 and the output's innermost dim is strided.
template <typename U, typename I>
Status launchTiledT(const StridedCopyPlan& q, int j, const void* x, void* y, int maxBlocks,
                    cudaStream_t stream) {
  const int last = q.rank - 1;
  TileParams<I> p{};
  std::vector<int64_t> outStrides(static_cast<size_t>(q.rank), 1);
  for (int d = last; d-- > 0;)
    outStrides[static_cast<size_t>(d)] = outStrides[static_cast<size_t>(d) + 1] * q.dims[d + 1];
  int64_t batch = 1;
  p.batchRank = 0;
  for (int d = 0; d < last; ++d) {
    if (d == j) continue;
    p.batchDims[p.batchRank] = static_cast<I>(q.dims[d]);
    p.batchInStrides[p.batchRank] = static_cast<I>(q.strides[d]);
    p.batchOutStrides[p.batchRank] = static_cast<I>(outStrides[static_cast<size_t>(d)]);
    ++p.batchRank;
    batch *= q.dims[d];
  }
  p.dimJ = static_cast<I>(q.dims[j]);
  p.dimA = static_cast<I>(q.dims[last]);
  p.inStrideA = static_cast<I>(q.strides[last]);
  p.outStrideJ = static_cast<I>(outStrides[static_cast<size_t>(j)]);
  p.base = static_cast<I>(q.base);
  const int64_t tilesJ = (q.dims[j] + kTile - 1) / kTile,
                tilesA = (q.dims[last] + kTile - 1) / kTile;
  p.tilesJ = static_cast<I>(tilesJ);
  p.tilesA = static_cast<I>(tilesA);
  p.tiles = static_cast<I>(batch * tilesJ * tilesA);
  const int64_t grid = std::min<int64_t>(batch * tilesJ * tilesA, maxBlocks);
  tiledTransposeKernel<U, I><<<static_cast<int>(grid), dim3(kTile, kTileRows), 0, stream>>>(
      static_cast<const U*>(x), static_cast<U*>(y), p);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

// ---- Concat ----------------------------------------------------------------------------------

constexpr int kConcatBatch = 8;

template <typename I>
struct ConcatParams {
  const void* src[kConcatBatch];
  I rowUnits[kConcatBatch];
  I colBegin[kConcatBatch + 1];  // output columns of each input, in units
  int n;
  I outRowUnits;
  I width;  // colBegin[n] - colBegin[0]
  I total;  // outer * width
};

template <typename U, typename I>
__global__ void __launch_bounds__(kThreads)
    concatKernel(U* __restrict__ y, const ConcatParams<I> p) {
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I o = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; o < p.total; o += step) {
    const I row = o / p.width;
    const I col = p.colBegin[0] + o % p.width;
    int i = 0;
    while (i + 1 < p.n && col >= p.colBegin[i + 1]) ++i;
    const U* s = static_cast<const U*>(p.src[i]);
    y[row * p.outRowUnits + col] = s[row * p.rowUnits[i] + (col - p.colBegin[i])];
  }
}

template <typename U, typename I>
Status launchConcatT(const ConcatPlan& q, int unit, const void* const* inputs, void* y,
                     int maxBlocks, cudaStream_t stream) {
  const int64_t perUnit = unit / q.elemBytes;
  int64_t outRow = 0;
  for (int64_t r : q.rowElems) outRow += r / perUnit;
  int64_t col = 0;
  const size_t n = q.rowElems.size();
  for (size_t first = 0; first < n; first += kConcatBatch) {
    ConcatParams<I> p{};
    p.n = 0;
    p.colBegin[0] = static_cast<I>(col);
    for (size_t i = first; i < n && p.n < kConcatBatch; ++i) {
      const int64_t r = q.rowElems[i] / perUnit;
      p.src[p.n] = inputs[i];
      p.rowUnits[p.n] = static_cast<I>(r);
      col += r;
      ++p.n;
      p.colBegin[p.n] = static_cast<I>(col);
    }
    p.outRowUnits = static_cast<I>(outRow);
    p.width = p.colBegin[p.n] - p.colBegin[0];
    p.total = static_cast<I>(q.outer) * p.width;
    if (p.total == 0) continue;
    concatKernel<U, I>
        <<<dev::gridFor(static_cast<int64_t>(p.total), kThreads, maxBlocks), kThreads, 0, stream>>>(
            static_cast<U*>(y), p);
    EI_CUDA_CHECK(cudaGetLastError());
  }
  return Status::Ok();
}

// ---- Pad -------------------------------------------------------------------------------------

template <typename I>
struct PadParams {
  int rank;
  PadMode mode;
  I outDims[kMoveMaxDims];
  I inDims[kMoveMaxDims];
  I padBegin[kMoveMaxDims];
  I numel;
};

/// Source coordinate of padded coordinate c, or -1 for the constant (as kernels/ref).
template <typename I>
__device__ __forceinline__ I padSource(I c, I dim, PadMode mode) {
  if (c >= 0 && c < dim) return c;
  if (mode == PadMode::kConstant) return -1;
  if (mode == PadMode::kEdge) return c < 0 ? 0 : dim - 1;
  if (dim == 1) return 0;
  const I period = 2 * (dim - 1);
  c %= period;
  if (c < 0) c += period;
  return c < dim ? c : period - c;
}

template <typename U, typename I>
__global__ void __launch_bounds__(kThreads)
    padKernel(const U* __restrict__ x, U* __restrict__ y, const PadParams<I> p, const U value) {
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I o = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; o < p.numel; o += step) {
    I rem = o, off = 0, stride = 1;
    bool inside = true;
    for (int d = p.rank - 1; d >= 0; --d) {
      const I c = rem % p.outDims[d];
      rem /= p.outDims[d];
      const I s = padSource<I>(c - p.padBegin[d], p.inDims[d], p.mode);
      if (s < 0) {
        inside = false;
        break;
      }
      off += s * stride;
      stride *= p.inDims[d];
    }
    y[o] = inside ? x[off] : value;
  }
}

template <typename U, typename I>
Status launchPadT(const PadPlan& q, const void* x, void* y, int maxBlocks, cudaStream_t stream) {
  PadParams<I> p{};
  p.rank = q.rank;
  p.mode = q.mode;
  for (int d = 0; d < q.rank; ++d) {
    p.outDims[d] = static_cast<I>(q.outDims[d]);
    p.inDims[d] = static_cast<I>(q.inDims[d]);
    p.padBegin[d] = static_cast<I>(q.padBegin[d]);
  }
  p.numel = static_cast<I>(q.numel);
  U value;
  static_assert(sizeof(U) <= sizeof(uint64_t), "pad unit");
  std::memcpy(&value, &q.constantBits, sizeof(U));
  padKernel<U, I><<<dev::gridFor(q.numel, kThreads, maxBlocks), kThreads, 0, stream>>>(
      static_cast<const U*>(x), static_cast<U*>(y), p, value);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

// ---- Gather ----------------------------------------------------------------------------------

template <typename I>
struct GatherParams {
  I dim, count, inner, total;  // inner in units
};

template <typename U, typename Idx, typename I>
__global__ void __launch_bounds__(kThreads)
    gatherKernel(const U* __restrict__ x, const Idx* __restrict__ indices, U* __restrict__ y,
                 const GatherParams<I> p) {
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I o = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; o < p.total; o += step) {
    const I i = o % p.inner;
    const I t = o / p.inner;
    const I j = t % p.count;
    const I outer = t / p.count;
    int64_t k = static_cast<int64_t>(indices[j]);
    if (k < 0) k += p.dim;
    k = k < 0 ? 0 : (k >= p.dim ? p.dim - 1 : k);
    y[o] = x[(outer * p.dim + static_cast<I>(k)) * p.inner + i];
  }
}

template <typename U, typename I>
Status launchGatherT(const GatherPlan& q, int64_t innerUnits, const void* x, const void* idx,
                     void* y, int maxBlocks, cudaStream_t stream) {
  GatherParams<I> p{static_cast<I>(q.dim), static_cast<I>(q.count), static_cast<I>(innerUnits),
                    static_cast<I>(q.outer * q.count * innerUnits)};
  const int grid = dev::gridFor(q.outer * q.count * innerUnits, kThreads, maxBlocks);
  if (q.indices64)
    gatherKernel<U, int64_t, I><<<grid, kThreads, 0, stream>>>(
        static_cast<const U*>(x), static_cast<const int64_t*>(idx), static_cast<U*>(y), p);
  else
    gatherKernel<U, int32_t, I><<<grid, kThreads, 0, stream>>>(
        static_cast<const U*>(x), static_cast<const int32_t*>(idx), static_cast<U*>(y), p);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

template <typename I>
struct GatherNDParams {
  I count, sliceUnits, total, batchUnits;  // batchUnits: a batch of x in units
  int k;
  I dims[kMoveMaxDims];
};

/// One thread per output unit: its index tuple names the slice (row-major over dims).
template <typename U, typename Idx, typename I>
__global__ void __launch_bounds__(kThreads)
    gatherNDKernel(const U* __restrict__ x, const Idx* __restrict__ indices, U* __restrict__ y,
                   const GatherNDParams<I> p) {
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I o = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; o < p.total; o += step) {
    const I i = o % p.sliceUnits;
    const I t = o / p.sliceUnits;  // index tuple number over all batches
    const I batch = t / p.count;
    I off = 0;
    for (int j = 0; j < p.k; ++j) {
      int64_t v = static_cast<int64_t>(indices[static_cast<int64_t>(t) * p.k + j]);
      if (v < 0) v += p.dims[j];
      v = v < 0 ? 0 : (v >= p.dims[j] ? p.dims[j] - 1 : v);
      off = off * p.dims[j] + static_cast<I>(v);
    }
    y[o] = x[batch * p.batchUnits + off * p.sliceUnits + i];
  }
}

template <typename U, typename I>
Status launchGatherNDT(const GatherNDPlan& q, int64_t sliceUnits, const void* x, const void* idx,
                       void* y, int maxBlocks, cudaStream_t stream) {
  GatherNDParams<I> p{};
  p.count = static_cast<I>(q.count);
  p.sliceUnits = static_cast<I>(sliceUnits);
  p.total = static_cast<I>(q.batches * q.count * sliceUnits);
  int64_t tuples = 1;
  for (int j = 0; j < q.k; ++j) tuples *= q.dims[j];
  p.batchUnits = static_cast<I>(tuples * sliceUnits);
  p.k = q.k;
  for (int j = 0; j < q.k; ++j) p.dims[j] = static_cast<I>(q.dims[j]);
  const int grid = dev::gridFor(q.batches * q.count * sliceUnits, kThreads, maxBlocks);
  if (q.indices64)
    gatherNDKernel<U, int64_t, I><<<grid, kThreads, 0, stream>>>(
        static_cast<const U*>(x), static_cast<const int64_t*>(idx), static_cast<U*>(y), p);
  else
    gatherNDKernel<U, int32_t, I><<<grid, kThreads, 0, stream>>>(
        static_cast<const U*>(x), static_cast<const int32_t*>(idx), static_cast<U*>(y), p);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

template <typename I>
struct GatherElementsParams {
  I outDims[kMoveMaxDims];
  I xStrides[kMoveMaxDims];
  int rank, axis;
  I axisDim, numel;
};

template <typename U, typename IX, typename I>
__global__ void __launch_bounds__(kThreads)
    gatherElementsKernel(const U* __restrict__ x, const IX* __restrict__ idx, U* __restrict__ y,
                         const GatherElementsParams<I> p) {
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I o = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; o < p.numel; o += step) {
    I rem = o, off = 0;
    for (int d = p.rank - 1; d >= 0; --d) {
      const I c = rem % p.outDims[d];
      rem /= p.outDims[d];
      if (d != p.axis) off += c * p.xStrides[d];
    }
    // Normalised and clamped in 64 bits (an int64 index may not fit I).
    long long i = static_cast<long long>(idx[o]);
    const long long dim = static_cast<long long>(p.axisDim);
    if (i < 0) i += dim;
    i = i < 0 ? 0 : (i >= dim ? dim - 1 : i);
    y[o] = x[off + static_cast<I>(i) * p.xStrides[p.axis]];
  }
}

template <typename U, typename I>
Status launchGatherElementsT(const GatherElementsPlan& q, const void* x, const void* idx, void* y,
                             int maxBlocks, cudaStream_t s) {
  GatherElementsParams<I> p{};
  p.rank = q.rank;
  p.axis = q.axis;
  p.axisDim = static_cast<I>(q.axisDim);
  p.numel = static_cast<I>(q.numel);
  for (int d = 0; d < q.rank; ++d) {
    p.outDims[d] = static_cast<I>(q.outDims[d]);
    p.xStrides[d] = static_cast<I>(q.xStrides[d]);
  }
  const int grid = dev::gridFor(q.numel, kThreads, maxBlocks);
  if (q.indices64)
    gatherElementsKernel<U, int64_t, I><<<grid, kThreads, 0, s>>>(
        static_cast<const U*>(x), static_cast<const int64_t*>(idx), static_cast<U*>(y), p);
  else
    gatherElementsKernel<U, int32_t, I><<<grid, kThreads, 0, s>>>(
        static_cast<const U*>(x), static_cast<const int32_t*>(idx), static_cast<U*>(y), p);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

template <typename U, typename I>
__global__ void __launch_bounds__(kThreads)
    triluKernel(const U* __restrict__ x, U* __restrict__ y, I total, I rows, I cols, long long k,
                bool upper) {
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I e = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; e < total; e += step) {
    const long long j = static_cast<long long>(e % cols);
    const long long i = static_cast<long long>((e / cols) % rows);
    const bool keep = upper ? j - i >= k : j - i <= k;
    y[e] = keep ? x[e] : U{};
  }
}

template <typename U, typename I>
__global__ void __launch_bounds__(kThreads)
    eyeLikeKernel(U* __restrict__ y, I total, I cols, long long k, U one) {
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I e = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x; e < total; e += step) {
    const long long j = static_cast<long long>(e % cols), i = static_cast<long long>(e / cols);
    y[e] = j - i == k ? one : U{};
  }
}

/// The index a OneHot reads, or -1 for none (NaN, or beyond the int64 range).
template <typename T>
__device__ __forceinline__ long long oneHotIndex(T v) {
  return static_cast<long long>(v);
}
template <>
__device__ __forceinline__ long long oneHotIndex<float>(float v) {
  // Truncation as the reference's cast; beyond +-2^62 no index can match any depth.
  return isnan(v) || fabsf(v) >= 4.6e18f ? LLONG_MIN : static_cast<long long>(v);
}
template <>
__device__ __forceinline__ long long oneHotIndex<__half>(__half v) {
  return oneHotIndex(__half2float(v));
}

template <typename U, typename T>
__global__ void __launch_bounds__(kThreads)
    oneHotKernel(const T* __restrict__ indices, const U* __restrict__ values, U* __restrict__ y,
                 long long total, long long depth, long long inner) {
  const long long step = static_cast<long long>(gridDim.x) * kThreads;
  const U off = values[0], on = values[1];
  for (long long e = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x; e < total;
       e += step) {
    const long long i = e % inner, d = (e / inner) % depth, o = e / (inner * depth);
    long long k = oneHotIndex(indices[o * inner + i]);
    if (k < 0 && k != LLONG_MIN) k += depth;
    y[e] = k == d ? on : off;
  }
}

}  // namespace

Status launchGatherElements(const GatherElementsPlan& plan, const void* x, const void* indices,
                            void* y, int maxBlocks, void* stream) {
  if (plan.numel == 0) return Status::Ok();
  if (plan.rank < 1 || plan.rank > kMoveMaxDims || plan.axis < 0 || plan.axis >= plan.rank ||
      plan.axisDim < 1)
    return Status(ErrorCode::kInvalidArgument, "launchGatherElements: malformed plan");
  const bool small = fitsInt32(std::max(plan.numel, plan.xNumel));
  const auto s = static_cast<cudaStream_t>(stream);
  return dispatchUnit(plan.elemBytes, [&](auto u) -> Status {
    using U = decltype(u);
    // uint32_t below INT_MAX: the grid-stride index cannot wrap.
    return small ? launchGatherElementsT<U, uint32_t>(plan, x, indices, y, maxBlocks, s)
                 : launchGatherElementsT<U, int64_t>(plan, x, indices, y, maxBlocks, s);
  });
}

Status launchTrilu(const TriluPlan& plan, const void* x, void* y, int maxBlocks, void* stream) {
  const int64_t total = plan.batches * plan.rows * plan.cols;
  if (total == 0) return Status::Ok();
  const auto s = static_cast<cudaStream_t>(stream);
  const int grid = dev::gridFor(total, kThreads, maxBlocks);
  return dispatchUnit(plan.elemBytes, [&](auto u) -> Status {
    using U = decltype(u);
    const U* in = static_cast<const U*>(x);
    U* out = static_cast<U*>(y);
    if (fitsInt32(total))  // uint32_t: the grid-stride index cannot wrap
      triluKernel<U, uint32_t><<<grid, kThreads, 0, s>>>(
          in, out, static_cast<uint32_t>(total), static_cast<uint32_t>(plan.rows),
          static_cast<uint32_t>(plan.cols), plan.k, plan.upper);
    else
      triluKernel<U, int64_t>
          <<<grid, kThreads, 0, s>>>(in, out, total, plan.rows, plan.cols, plan.k, plan.upper);
    EI_CUDA_CHECK(cudaGetLastError());
    return Status::Ok();
  });
}

Status launchEyeLike(const EyeLikePlan& plan, void* y, int maxBlocks, void* stream) {
  const int64_t total = plan.rows * plan.cols;
  if (total == 0) return Status::Ok();
  const auto s = static_cast<cudaStream_t>(stream);
  const int grid = dev::gridFor(total, kThreads, maxBlocks);
  return dispatchUnit(plan.elemBytes, [&](auto u) -> Status {
    using U = decltype(u);
    if (sizeof(U) > sizeof(plan.one))
      return Status(ErrorCode::kInternal, "EyeLike: elements over 8 bytes");
    U one;
    std::memcpy(&one, &plan.one, sizeof(U));
    U* out = static_cast<U*>(y);
    if (fitsInt32(total))  // uint32_t: the grid-stride index cannot wrap
      eyeLikeKernel<U, uint32_t><<<grid, kThreads, 0, s>>>(
          out, static_cast<uint32_t>(total), static_cast<uint32_t>(plan.cols), plan.k, one);
    else
      eyeLikeKernel<U, int64_t><<<grid, kThreads, 0, s>>>(out, total, plan.cols, plan.k, one);
    EI_CUDA_CHECK(cudaGetLastError());
    return Status::Ok();
  });
}

Status launchOneHot(const OneHotPlan& plan, const void* indices, const void* values, void* y,
                    int maxBlocks, void* stream) {
  const int64_t total = plan.outer * plan.depth * plan.inner;
  if (total == 0) return Status::Ok();
  if (plan.depth < 1 || plan.inner < 1)
    return Status(ErrorCode::kInvalidArgument, "launchOneHot: malformed plan");
  const auto s = static_cast<cudaStream_t>(stream);
  const int grid = dev::gridFor(total, kThreads, maxBlocks);
  return dispatchUnit(plan.elemBytes, [&](auto u) -> Status {
    using U = decltype(u);
    const U* v = static_cast<const U*>(values);
    U* out = static_cast<U*>(y);
    const auto run = [&](const auto* idx) {
      oneHotKernel<<<grid, kThreads, 0, s>>>(idx, v, out, total, plan.depth, plan.inner);
    };
    switch (plan.indexType) {
      case DataType::kInt32:
        run(static_cast<const int32_t*>(indices));
        break;
      case DataType::kInt64:
        run(static_cast<const long long*>(indices));
        break;
      case DataType::kFloat32:
        run(static_cast<const float*>(indices));
        break;
      case DataType::kFloat16:
        run(static_cast<const __half*>(indices));
        break;
      default:
        return Status(ErrorCode::kInvalidArgument, "launchOneHot: unsupported index type");
    }
    EI_CUDA_CHECK(cudaGetLastError());
    return Status::Ok();
  });
}

StridedCopyPlan makeStridedCopyPlan(int elemBytes, const std::vector<int64_t>& dims,
                                    const std::vector<int64_t>& strides, int64_t base) {
  StridedCopyPlan p;
  p.elemBytes = elemBytes;
  p.base = base;
  p.rank = 0;
  p.numel = 1;
  for (int64_t d : dims) p.numel *= d;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (dims[d] == 1) continue;
    if (p.rank > 0 && p.strides[p.rank - 1] == strides[d] * dims[d]) {
      p.dims[p.rank - 1] *= dims[d];
      p.strides[p.rank - 1] = strides[d];
      continue;
    }
    p.dims[p.rank] = dims[d];
    p.strides[p.rank] = strides[d];
    ++p.rank;
  }
  if (p.rank == 0) {
    p.rank = 1;
    p.dims[0] = 1;
    p.strides[0] = 1;
  }
  return p;
}

Status launchStridedCopy(const StridedCopyPlan& plan, const void* x, void* y, int maxBlocks,
                         void* stream) {
  if (plan.numel == 0) return Status::Ok();
  const auto s = static_cast<cudaStream_t>(stream);
  // Widen the unit when the innermost dim is contiguous: every other stride, the base and
  // the innermost length must then be whole units.
  StridedCopyPlan q = plan;
  const int last = q.rank - 1;
  int unit = q.elemBytes;
  if (q.strides[last] == 1) {
    const int64_t eb = q.elemBytes;
    unit = widestUnit(q.elemBytes, {q.dims[last] * eb, q.base * eb}, {x, y});
    for (int d = 0; d < last && unit > q.elemBytes; ++d)
      while (unit > q.elemBytes && (q.strides[d] * eb) % unit != 0) unit /= 2;
    if (unit > q.elemBytes) {
      const int64_t k = unit / q.elemBytes;
      q.dims[last] /= k;
      q.base /= k;
      for (int d = 0; d < last; ++d) q.strides[d] /= k;
      q.numel /= k;
    }
  }
  // 32-bit index math when every index and offset fits.
  int64_t reach = std::abs(q.base) + q.numel;
  for (int d = 0; d < q.rank; ++d) reach += std::abs(q.strides[d]) * q.dims[d];
  const bool small = fitsInt32(reach);
  // A transpose of the innermost dim: tiles through shared memory when both tiled dims are
  // long enough to fill a good part of a tile.
  if (q.strides[last] != 1 && q.strides[last] != 0) {
    int j = -1;
    for (int d = 0; d < last; ++d)
      if (q.strides[d] == 1) j = d;
    if (j >= 0 && q.dims[j] >= 8 && q.dims[last] >= 8) {
      return dispatchUnit(unit, [&](auto u) -> Status {
        using U = decltype(u);
        if constexpr (sizeof(U) > sizeof(uint64_t)) {
          return Status(ErrorCode::kInternal, "transpose: bad unit");
        } else {
          return small ? launchTiledT<U, int32_t>(q, j, x, y, maxBlocks, s)
                       : launchTiledT<U, int64_t>(q, j, x, y, maxBlocks, s);
        }
      });
    }
  }
  return dispatchUnit(unit, [&](auto u) -> Status {
    using U = decltype(u);
    return small ? launchCopyT<U, int32_t>(q, x, y, maxBlocks, s)
                 : launchCopyT<U, int64_t>(q, x, y, maxBlocks, s);
  });
}

Status launchConcat(const ConcatPlan& plan, const void* const* inputs, void* y, int maxBlocks,
                    void* stream) {
  int64_t outRow = 0;
  for (int64_t r : plan.rowElems) outRow += r;
  if (plan.outer == 0 || outRow == 0) return Status::Ok();
  // The unit must divide every row and align every pointer.
  int unit = widestUnit(plan.elemBytes, {outRow * plan.elemBytes}, {y});
  for (size_t i = 0; i < plan.rowElems.size() && unit > plan.elemBytes; ++i)
    unit = std::min(unit, widestUnit(plan.elemBytes, {plan.rowElems[i] * plan.elemBytes},
                                     {plan.rowElems[i] ? inputs[i] : nullptr}));
  const bool small = fitsInt32(plan.outer * outRow);
  const auto s = static_cast<cudaStream_t>(stream);
  return dispatchUnit(unit, [&](auto u) -> Status {
    using U = decltype(u);
    return small ? launchConcatT<U, int32_t>(plan, unit, inputs, y, maxBlocks, s)
                 : launchConcatT<U, int64_t>(plan, unit, inputs, y, maxBlocks, s);
  });
}

Status launchPad(const PadPlan& plan, const void* x, void* y, int maxBlocks, void* stream) {
  if (plan.numel == 0) return Status::Ok();
  int64_t inNumel = 1;
  for (int d = 0; d < plan.rank; ++d) inNumel *= plan.inDims[d];
  const bool small = fitsInt32(std::max(plan.numel, inNumel) * 2 + 16);
  const auto s = static_cast<cudaStream_t>(stream);
  if (plan.elemBytes == 16) return Status(ErrorCode::kInternal, "Pad: bad element size");
  return dispatchUnit(plan.elemBytes, [&](auto u) -> Status {
    using U = decltype(u);
    if constexpr (sizeof(U) > sizeof(uint64_t)) {
      return Status(ErrorCode::kInternal, "Pad: bad element size");
    } else {
      return small ? launchPadT<U, int32_t>(plan, x, y, maxBlocks, s)
                   : launchPadT<U, int64_t>(plan, x, y, maxBlocks, s);
    }
  });
}

Status launchGatherND(const GatherNDPlan& plan, const void* x, const void* indices, void* y,
                      int maxBlocks, void* stream) {
  const int64_t total = plan.batches * plan.count * plan.slice;
  if (total == 0) return Status::Ok();
  if (plan.k < 1 || plan.k > kMoveMaxDims)
    return Status(ErrorCode::kInvalidArgument, "launchGatherND: bad index tuple length");
  int64_t xElems = plan.batches * plan.slice;
  for (int j = 0; j < plan.k; ++j) xElems *= plan.dims[j];
  const int unit = widestUnit(plan.elemBytes, {plan.slice * plan.elemBytes}, {x, y});
  const int64_t sliceUnits = plan.slice * plan.elemBytes / unit;
  const bool small = fitsInt32(std::max(total, xElems));
  const auto s = static_cast<cudaStream_t>(stream);
  return dispatchUnit(unit, [&](auto u) -> Status {
    using U = decltype(u);
    return small ? launchGatherNDT<U, int32_t>(plan, sliceUnits, x, indices, y, maxBlocks, s)
                 : launchGatherNDT<U, int64_t>(plan, sliceUnits, x, indices, y, maxBlocks, s);
  });
}

Status launchGather(const GatherPlan& plan, const void* x, const void* indices, void* y,
                    int maxBlocks, void* stream) {
  const int64_t total = plan.outer * plan.count * plan.inner;
  if (total == 0) return Status::Ok();
  const int unit = widestUnit(plan.elemBytes, {plan.inner * plan.elemBytes}, {x, y});
  const int64_t innerUnits = plan.inner * plan.elemBytes / unit;
  const bool small = fitsInt32(std::max(total, plan.outer * plan.dim * plan.inner));
  const auto s = static_cast<cudaStream_t>(stream);
  return dispatchUnit(unit, [&](auto u) -> Status {
    using U = decltype(u);
    return small ? launchGatherT<U, int32_t>(plan, innerUnits, x, indices, y, maxBlocks, s)
                 : launchGatherT<U, int64_t>(plan, innerUnits, x, indices, y, maxBlocks, s);
  });
}

}  // namespace edgeinfer::cuda
