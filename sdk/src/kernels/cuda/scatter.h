// ScatterElements / ScatterND CUDA kernels of the `cuda` tactic family (reduction "none").
// The output is the data with updates written at the indexed places; where several updates
// hit one element the last one (in index order) wins, as in the CPU reference's serial loop
// (kernels/ref/scatter_gather.cpp): a first pass records the highest update number per
// element (atomicMax in the workspace), a second writes only those. Negative indices count
// from the end; an index out of range (the reference's run-time error) writes nothing. Plain
// C++ (no device syntax): cuda_provider_norm.cpp includes it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "edgeinfer/status.h"

namespace edgeinfer::cuda {

inline constexpr int kScatterMaxDims = 8;

struct ScatterPlan {
  int elemBytes = 4;  // 2, 4 or 8
  bool indices64 = true;
  bool nd = false;    // ScatterND; otherwise ScatterElements
  int64_t numel = 0;  // data (and output) elements
  int64_t count = 0;  // updates: index elements (Elements) or index tuples (ND)
  int rank = 1;       // data rank
  int64_t dataDims[kScatterMaxDims] = {};
  int64_t dataStrides[kScatterMaxDims] = {};
  // ScatterElements: the indices' shape (rank dims) and the axis.
  int64_t idxDims[kScatterMaxDims] = {};
  int axis = 0;
  // ScatterND: the index tuple length m and the elements per slice.
  int m = 1;
  int64_t slice = 1;
};

/// The workspace a launch needs: one int32 per output element.
size_t scatterWorkspaceBytes(const ScatterPlan& plan);

/// Enqueues copy, marking and writing on `stream`. Never synchronises.
Status launchScatter(const ScatterPlan& plan, const void* data, const void* indices,
                     const void* updates, void* out, void* workspace, int maxBlocks, void* stream);

}  // namespace edgeinfer::cuda
