// The CPU reference backend: one plain, readable kernel per op. It is the oracle every
// faster kernel is tested against, so clarity beats speed here; loops that are cheap to
// parallelise use OpenMP (`#pragma omp parallel for`), nothing cleverer.
//
// A kernel receives its inputs and outputs already allocated: the runtime runs the op's
// ShapeInferFn (graph/op_schema.h) on the concrete inputs first, so kernels never compute
// output shapes themselves. Kernels see the canonical op forms described in op_schema.h.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "graph/graph.h"

namespace edgeinfer::ref {

struct KernelContext {
  const graph::Node& node;
  std::vector<const Tensor*> inputs;  // nullptr for an absent optional input
  std::vector<Tensor*> outputs;       // allocated, zero-filled, shapes from shape inference

  bool hasInput(size_t i) const { return i < inputs.size() && inputs[i] != nullptr; }
  const graph::Attributes& attrs() const { return node.attrs; }
  Status error(ErrorCode code, const std::string& msg) const {
    return Status(code, msg, node.location());
  }
};

using KernelFn = Status (*)(KernelContext&);

class KernelRegistry {
 public:
  static KernelRegistry& instance();  // all built-in kernels registered on first use
  void add(const std::string& domain, const std::string& opType, KernelFn fn);
  KernelFn find(const std::string& domain, const std::string& opType) const;

 private:
  std::unordered_map<std::string, KernelFn> map_;
};

// Registration functions, one per op family (sdk/src/kernels/ref/*.cpp).
void registerElementwiseKernels(KernelRegistry& r);
void registerTensorKernels(KernelRegistry& r);
void registerReduceKernels(KernelRegistry& r);
void registerNnKernels(KernelRegistry& r);
void registerQuantKernels(KernelRegistry& r);
void registerFusedKernels(KernelRegistry& r);
// Families registered from inside the ones above (tensor: detection, scatter/gather, misc;
// quant: the integer / QLinear ops).
void registerDetectionKernels(KernelRegistry& r);      // TopK, NonMaxSuppression, NonZero
void registerScatterGatherKernels(KernelRegistry& r);  // ScatterND, ScatterElements, GatherND
void registerMiscKernels(KernelRegistry& r);           // Trilu, CastLike, EyeLike, Shrink, MVN
void registerQLinearKernels(KernelRegistry& r);        // ConvInteger, MatMulInteger, QLinear*
// Registered from registerFusedKernels: ai.edgeinfer::FusedElementwise (fused_elementwise.cpp).
void registerFusedElementwiseKernel(KernelRegistry& r);

/// Runs one node on host tensors: infers output shapes from the concrete inputs,
/// allocates the outputs and calls the kernel. Used by the CPU runtime and by constant
/// folding.
Status runNode(const graph::Node& node, const std::vector<const Tensor*>& inputs,
               std::vector<Tensor>& outputs);

/// Gives output `index` its memory: must return a zero-filled host tensor of `dtype` and
/// `shape` (kernels may accumulate into their outputs).
using OutputAllocator =
    std::function<Expected<Tensor>(size_t index, DataType dtype, const Shape& shape)>;

/// Same, with the outputs' memory coming from `allocate` (an activation arena, say).
Status runNode(const graph::Node& node, const std::vector<const Tensor*>& inputs,
               std::vector<Tensor>& outputs, const OutputAllocator& allocate);

}  // namespace edgeinfer::ref
