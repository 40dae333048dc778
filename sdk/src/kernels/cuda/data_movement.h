// Data-movement CUDA kernels of the `cuda` tactic family: strided copies (Transpose, Slice,
// Expand), Concat, Pad, Gather and GatherND. They move elements without looking at them, so one
// kernel serves every storage type of the same size (FP16 = 2 bytes, FP32/INT32 = 4, INT64 = 8);
// the host picks the widest access unit (up to 16 bytes) that the plan and the pointers allow.
// Plain C++ (no device syntax): cuda_provider.cpp includes it.
#pragma once

#include <cstdint>
#include <vector>

#include "edgeinfer/status.h"
#include "edgeinfer/types.h"

namespace edgeinfer::cuda {

inline constexpr int kMoveMaxDims = 8;

/// y[i] = x[base + sum_d coord_d(i) * strides[d]] for the contiguous output `dims`, in elements
/// of `elemBytes`. Strides may be 0 (broadcast: Expand) or negative (Slice with negative
/// steps). Built by the host in PHYSICAL order with adjacent dims merged where possible.
struct StridedCopyPlan {
  int elemBytes = 4;  // 1, 2, 4 or 8
  int rank = 1;       // >= 1
  int64_t dims[kMoveMaxDims] = {};
  int64_t strides[kMoveMaxDims] = {};
  int64_t base = 0;
  int64_t numel = 0;
};

/// Merges adjacent dims of `p` where the input is contiguous across them and drops dims of
/// size 1 (keeps rank >= 1). `dims`/`strides` are given outermost first.
StridedCopyPlan makeStridedCopyPlan(int elemBytes, const std::vector<int64_t>& dims,
                                    const std::vector<int64_t>& strides, int64_t base);

/// Enqueues the strided copy; widens the access unit when the innermost dim is contiguous and
/// the pointers are aligned. Never synchronises.
Status launchStridedCopy(const StridedCopyPlan& plan, const void* x, void* y, int maxBlocks,
                         void* stream);

/// Concat along a physical axis: every input is [outer, rowElems[i]] (rowElems = axis length x
/// inner size), the output [outer, sum(rowElems)].
struct ConcatPlan {
  int elemBytes = 4;
  int64_t outer = 1;
  std::vector<int64_t> rowElems;  // one per input
};

Status launchConcat(const ConcatPlan& plan, const void* const* inputs, void* y, int maxBlocks,
                    void* stream);

enum class PadMode : int32_t { kConstant, kReflect, kEdge };

/// Pad in PHYSICAL order: y (contiguous outDims) from x (contiguous inDims) shifted by padBegin
/// per dim (negative pads crop); outside coordinates map by mode, or take `constantBits` (the
/// constant's raw bytes, little-endian in the low elemBytes).
struct PadPlan {
  int elemBytes = 4;
  int rank = 1;
  PadMode mode = PadMode::kConstant;
  int64_t outDims[kMoveMaxDims] = {};
  int64_t inDims[kMoveMaxDims] = {};
  int64_t padBegin[kMoveMaxDims] = {};
  uint64_t constantBits = 0;
  int64_t numel = 0;
};

Status launchPad(const PadPlan& plan, const void* x, void* y, int maxBlocks, void* stream);

/// Gather along one axis: x viewed as [outer, dim, inner], indices (int32 or int64, `count`
/// of them, negative ones counted from the end) give y [outer, count, inner]. Indices outside
/// [-dim, dim) are clamped into range (the reference rejects them; a kernel cannot).
struct GatherPlan {
  int elemBytes = 4;
  bool indices64 = true;
  int64_t outer = 1, dim = 1, count = 1, inner = 1;
};

Status launchGather(const GatherPlan& plan, const void* x, const void* indices, void* y,
                    int maxBlocks, void* stream);

/// GatherND (batch_dims b): x viewed as [batches, dims[0], ..., dims[k-1], slice], indices
/// (int32 or int64) as [batches, count, k]; y [batches, count, slice] takes, for each index
/// tuple, the slice it names. Negative indices count from the end; indices out of range are
/// clamped into it (the reference rejects them; a kernel cannot).
struct GatherNDPlan {
  int elemBytes = 4;
  bool indices64 = true;
  int k = 1;
  int64_t batches = 1, count = 1, slice = 1;
  int64_t dims[kMoveMaxDims] = {};
};

Status launchGatherND(const GatherNDPlan& plan, const void* x, const void* indices, void* y,
                      int maxBlocks, void* stream);

/// GatherElements along `axis`: y and the indices (int32 or int64) share the shape outDims
/// (row-major); y[..., i_axis, ...] = x[..., indices[...], ...], x's element strides in
/// xStrides. Negative indices count from the end; out-of-range ones are clamped (as Gather).
struct GatherElementsPlan {
  int elemBytes = 4;
  bool indices64 = true;
  int rank = 1, axis = 0;
  int64_t axisDim = 1;
  int64_t outDims[kMoveMaxDims] = {};
  int64_t xStrides[kMoveMaxDims] = {};
  int64_t numel = 0, xNumel = 0;
};

Status launchGatherElements(const GatherElementsPlan& plan, const void* x, const void* indices,
                            void* y, int maxBlocks, void* stream);

/// Trilu on a batch of [rows, cols] matrices (row-major): keeps the elements on and above
/// (upper) or on and below (lower) the k-th diagonal, zeroes the others.
struct TriluPlan {
  int elemBytes = 4;
  bool upper = true;
  int64_t k = 0;
  int64_t batches = 1, rows = 1, cols = 1;
};

Status launchTrilu(const TriluPlan& plan, const void* x, void* y, int maxBlocks, void* stream);

/// EyeLike: a [rows, cols] matrix holding `one` (the bits of 1 in the output's storage type) on
/// the k-th diagonal and zero elsewhere.
struct EyeLikePlan {
  int elemBytes = 4;
  uint64_t one = 0;
  int64_t rows = 1, cols = 1, k = 0;
};

Status launchEyeLike(const EyeLikePlan& plan, void* y, int maxBlocks, void* stream);

/// OneHot: y[o, d, i] = values[1] (on) where d is the index at [o, i] of `indices`, values[0]
/// (off) elsewhere; a negative index counts from the end of the depth, a NaN or out-of-range
/// one leaves its row off (as the CPU reference). `values` is a device array of two elements in
/// the output's storage type.
struct OneHotPlan {
  int elemBytes = 4;
  DataType indexType = DataType::kInt64;  // int32, int64, float32 or float16
  int64_t outer = 1, depth = 1, inner = 1;
};

Status launchOneHot(const OneHotPlan& plan, const void* indices, const void* values, void* y,
                    int maxBlocks, void* stream);

}  // namespace edgeinfer::cuda
