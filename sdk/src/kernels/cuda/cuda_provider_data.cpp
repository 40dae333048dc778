// The `cuda` provider's data-movement (Concat, Transpose, Slice, Expand, Pad, Gather, GatherND,
// EyeLike, OneHot, ...), Resize and Reduce families: which layers the kernels support, and the
// tactics that plan (initialize) and enqueue them. Kernels: data_movement.cu, resize.cu, reduce.cu.
// Host code.
//
// Data movement copies bytes, so float tensors get an FP16 and an FP32 tactic (the builder
// times both) and int32/int64 tensors one tactic of their own type ("i32"/"i64"). Constant
// operands (Slice bounds, Expand shape, Pad pads and value, Resize roi/scales/sizes) are read
// in initialize() and consumed; Gather indices are a normal (runtime or uploaded) input in
// their own integer type.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "core/half.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/data_movement.h"
#include "kernels/cuda/reduce.h"
#include "kernels/cuda/resize.h"

namespace edgeinfer::cuda::detail {
namespace {

using builder::LaunchArgs;
using builder::LayerContext;
using builder::Layout;
using builder::Tactic;

constexpr int64_t kMaxTransposeRank = 6;

bool isIntStorage(DataType t) {
  return t == DataType::kInt32 || t == DataType::kInt64;
}

/// Storage types for an op that only moves elements of logical type t.
std::vector<DataType> moveTypes(DataType t, Precision p) {
  if (isFloatStorage(t)) return storageTypes(p);
  if (isIntStorage(t) || t == DataType::kInt8 || t == DataType::kUInt8 || t == DataType::kBool)
    return {t};
  return {};
}

/// Every present input and every output static and non-empty, one output, types known.
bool staticNonEmpty(const LayerContext& layer) {
  if (layer.outputShapes.size() != 1 || layer.node->outputs.size() != 1) return false;
  for (size_t i = 0; i < layer.inputShapes.size(); ++i) {
    if (!layer.hasInput(i)) continue;
    if (!isStatic(layer.inputShapes[i]) || layer.inputShapes[i].numel() == 0) return false;
  }
  return isStatic(layer.outputShapes[0]) && layer.outputShapes[0].numel() > 0;
}

/// Logical axes in storage order: NHWC for a 4-D tensor in kNHWC, row-major otherwise.
std::vector<size_t> physicalOrder(size_t rank, bool nhwc) {
  if (rank == 4 && nhwc) return {0, 2, 3, 1};
  std::vector<size_t> o(rank);
  std::iota(o.begin(), o.end(), size_t{0});
  return o;
}

/// Element stride of each logical axis of `s` in its storage.
std::vector<int64_t> storageStrides(const Shape& s, bool nhwc) {
  const std::vector<size_t> order = physicalOrder(s.rank(), nhwc);
  std::vector<int64_t> st(s.rank(), 1);
  int64_t acc = 1;
  for (size_t k = order.size(); k-- > 0;) {
    st[order[k]] = acc;
    acc *= s[order[k]];
  }
  return st;
}

/// A strided-copy plan from the logical output shape and the input's element stride per
/// output axis (enumerating the output in its storage order).
StridedCopyPlan copyPlan(DataType storage, const Shape& out, const std::vector<int64_t>& strides,
                         int64_t base, bool nhwc) {
  std::vector<int64_t> dims, st;
  for (size_t a : physicalOrder(out.rank(), nhwc)) {
    dims.push_back(out[a]);
    st.push_back(strides[a]);
  }
  return makeStridedCopyPlan(static_cast<int>(dataTypeSize(storage)), dims, st, base);
}

/// Integer values of a constant int32/int64 input, or false.
bool constInts(const LayerContext& layer, size_t i, std::vector<int64_t>* v) {
  const Tensor* t = layer.constantInput(i);
  if (!t || (t->dtype() != DataType::kInt32 && t->dtype() != DataType::kInt64)) return false;
  v->resize(static_cast<size_t>(t->numel()));
  for (int64_t k = 0; k < t->numel(); ++k) (*v)[static_cast<size_t>(k)] = t->getAsInt64(k);
  return true;
}

bool normAxis(int64_t a, size_t rank, size_t* out) {
  const int64_t r = static_cast<int64_t>(rank);
  if (a < -r || a >= r) return false;
  *out = static_cast<size_t>(a < 0 ? a + r : a);
  return true;
}

/// A strided copy (Transpose, Slice, Expand): planned by the op's function, enqueued alike.
class StridedCopyTactic final : public CudaTactic {
 public:
  using Planner = bool (*)(const LayerContext&, DataType, bool nhwc, StridedCopyPlan*);
  StridedCopyTactic(const std::string& family, Planner planner, size_t consumedFrom, DataType t,
                    Layout l, const LayerContext& layer)
      : CudaTactic(family, t, l, layer), planner_(planner), consumedFrom_(consumedFrom) {}
  bool consumesInput(size_t index) const override { return index >= consumedFrom_; }
  Status initialize(const LayerContext& layer) override {
    if (!planner_(layer, dtype_, nhwc(), &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    return launchStridedCopy(plan_, args.inputs[0], args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  Planner planner_;
  size_t consumedFrom_;
  StridedCopyPlan plan_;
};

// ---- Transpose ------------------------------------------------------------------------------

bool transposePlan(const LayerContext& layer, DataType storage, bool nhwc, StridedCopyPlan* p) {
  const Shape& x = layer.inputShapes[0];
  const Shape& y = layer.outputShapes[0];
  const size_t rank = x.rank();
  if (nhwc || rank == 0 || rank > static_cast<size_t>(kMaxTransposeRank) || y.rank() != rank)
    return false;
  std::vector<int64_t> perm = layer.node->attrs.getInts("perm");
  if (!layer.node->attrs.has("perm")) {
    perm.resize(rank);
    for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);
  }
  if (perm.size() != rank) return false;
  std::vector<bool> seen(rank, false);
  const std::vector<int64_t> in = storageStrides(x, false);
  std::vector<int64_t> strides(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (perm[d] < 0 || perm[d] >= static_cast<int64_t>(rank)) return false;
    const size_t a = static_cast<size_t>(perm[d]);
    if (seen[a] || y[d] != x[a]) return false;
    seen[a] = true;
    strides[d] = in[a];
  }
  *p = copyPlan(storage, y, strides, 0, false);
  return true;
}

// ---- Slice ----------------------------------------------------------------------------------

bool slicePlan(const LayerContext& layer, DataType storage, bool nhwc, StridedCopyPlan* p) {
  const Shape& x = layer.inputShapes[0];
  const Shape& y = layer.outputShapes[0];
  const size_t rank = x.rank();
  if (layer.inputShapes.size() < 3 || layer.inputShapes.size() > 5 || y.rank() != rank ||
      rank == 0 || rank > static_cast<size_t>(kMoveMaxDims))
    return false;
  std::vector<int64_t> starts, ends, axes, steps;
  if (!constInts(layer, 1, &starts) || !constInts(layer, 2, &ends)) return false;
  if (layer.hasInput(3)) {
    if (!constInts(layer, 3, &axes)) return false;
  } else {
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (layer.hasInput(4)) {
    if (!constInts(layer, 4, &steps)) return false;
  } else {
    steps.assign(starts.size(), 1);
  }
  if (ends.size() != starts.size() || axes.size() != starts.size() || steps.size() != starts.size())
    return false;
  const std::vector<int64_t> in = storageStrides(x, nhwc);
  std::vector<int64_t> strides = in;
  std::vector<bool> seen(rank, false);
  int64_t base = 0;
  for (size_t i = 0; i < axes.size(); ++i) {
    size_t a = 0;
    if (!normAxis(axes[i], rank, &a) || seen[a] || steps[i] == 0) return false;
    seen[a] = true;
    const int64_t dim = x[a];
    int64_t start = starts[i];
    if (start < 0) start += dim;
    // The reference's clamping (kernels/ref/slice_pad_gather.cpp).
    start =
        steps[i] > 0 ? std::clamp<int64_t>(start, 0, dim) : std::clamp<int64_t>(start, 0, dim - 1);
    // The output extent must stay inside the input (shape inference computed y[a]).
    const int64_t last = start + (y[a] - 1) * steps[i];
    if (y[a] > 0 && (last < 0 || last >= dim)) return false;
    base += start * in[a];
    strides[a] = in[a] * steps[i];
  }
  for (size_t a = 0; a < rank; ++a)
    if (!seen[a] && y[a] != x[a]) return false;
  *p = copyPlan(storage, y, strides, base, nhwc);
  return true;
}

// ---- Identity --------------------------------------------------------------------------------

/// Identity (and an inference-mode Dropout whose mask nothing reads) where the graph passes
/// could not remove it: a graph input, a constant or another output copied to an output.
bool identityPlan(const LayerContext& layer, DataType storage, bool nhwc, StridedCopyPlan* p) {
  const Shape& x = layer.inputShapes[0];
  const Shape& y = layer.outputShapes[0];
  const graph::Node& n = *layer.node;
  if (x != y || x.rank() > static_cast<size_t>(kMoveMaxDims)) return false;
  if (n.opType == "Dropout") {
    // Only inference mode copies (a training mode computed at run time may drop values); a
    // read mask is a second output.
    if (layer.inputShapes.size() > 2 && layer.hasInput(2)) {
      const Tensor* training = layer.constantInput(2);
      if (!training || training->numel() != 1 || training->getAsDouble(0) != 0.0) return false;
    }
    if (n.outputs.size() > 1 && !n.outputs[1].empty()) return false;
  }
  *p = copyPlan(storage, y, storageStrides(x, nhwc), 0, nhwc);
  return true;
}

// ---- Expand ---------------------------------------------------------------------------------

bool expandPlan(const LayerContext& layer, DataType storage, bool nhwc, StridedCopyPlan* p) {
  const Shape& x = layer.inputShapes[0];
  const Shape& y = layer.outputShapes[0];
  std::vector<int64_t> shape;
  if (nhwc || layer.inputShapes.size() != 2 || !constInts(layer, 1, &shape) ||
      x.rank() > y.rank() || y.rank() > static_cast<size_t>(kMoveMaxDims))
    return false;
  const std::vector<int64_t> in = storageStrides(x, false);
  const size_t lead = y.rank() - x.rank();
  std::vector<int64_t> strides(y.rank(), 0);
  for (size_t d = lead; d < y.rank(); ++d) {
    const int64_t xd = x[d - lead];
    if (xd != y[d] && xd != 1) return false;
    strides[d] = xd == 1 ? 0 : in[d - lead];
  }
  *p = copyPlan(storage, y, strides, 0, false);
  return true;
}

// ---- Tile -----------------------------------------------------------------------------------

/// Tile as an expand of a 2k-D view: output axis a of size r * x[a] is (repeat, i) with input
/// strides (0, stride of a).
bool tilePlan(const LayerContext& layer, DataType storage, bool nhwc, StridedCopyPlan* p) {
  const Shape& x = layer.inputShapes[0];
  const Shape& y = layer.outputShapes[0];
  std::vector<int64_t> repeats;
  if (nhwc || layer.inputShapes.size() != 2 || !constInts(layer, 1, &repeats) ||
      repeats.size() != x.rank() || y.rank() != x.rank() || x.rank() == 0)
    return false;
  const std::vector<int64_t> in = storageStrides(x, false);
  std::vector<int64_t> dims, strides;
  for (size_t a = 0; a < x.rank(); ++a) {
    if (repeats[a] < 1 || y[a] != x[a] * repeats[a]) return false;
    if (repeats[a] > 1 && x[a] > 1) {
      dims.push_back(repeats[a]);
      strides.push_back(0);
    }
    // An axis of one input element is all repeats (stride 0 either way).
    dims.push_back(x[a] > 1 ? x[a] : repeats[a]);
    strides.push_back(x[a] > 1 ? in[a] : 0);
  }
  std::vector<int64_t> d2, s2;  // size-1 dims dropped
  for (size_t k = 0; k < dims.size(); ++k)
    if (dims[k] != 1) {
      d2.push_back(dims[k]);
      s2.push_back(strides[k]);
    }
  if (d2.empty()) {
    d2.push_back(1);
    s2.push_back(0);
  }
  if (d2.size() > static_cast<size_t>(kMoveMaxDims)) return false;
  *p = makeStridedCopyPlan(static_cast<int>(dataTypeSize(storage)), d2, s2, 0);
  return true;
}

// ---- DepthToSpace / SpaceToDepth ------------------------------------------------------------

/// A 6-D view of the output, enumerated in its storage order, with the input's strides:
///   DepthToSpace DCR: y[n][c][h*b + i][w*b + j] = x[n][(i*b + j) * C' + c][h][w]
///   DepthToSpace CRD: y[n][c][h*b + i][w*b + j] = x[n][c * b*b + i*b + j][h][w]
///   SpaceToDepth:     y[n][(i*b + j) * C + c][h][w] = x[n][c][h*b + i][w*b + j]
bool spaceDepthPlan(const LayerContext& layer, DataType storage, bool nhwc, StridedCopyPlan* p) {
  const Shape& x = layer.inputShapes[0];
  const Shape& y = layer.outputShapes[0];
  const int64_t b = layer.node->attrs.getInt("blocksize", 0);
  if (layer.inputShapes.size() != 1 || x.rank() != 4 || y.rank() != 4 || b < 1) return false;
  const std::vector<int64_t> in = storageStrides(x, nhwc);  // n, c, h, w
  const int64_t sN = in[0], sC = in[1], sH = in[2], sW = in[3];
  std::vector<int64_t> dims, strides;
  if (layer.node->opType == "DepthToSpace") {
    const int64_t c = y[1];
    if (x[1] != c * b * b || y[2] != x[2] * b || y[3] != x[3] * b) return false;
    const bool crd = layer.node->attrs.getString("mode", "DCR") == "CRD";
    const int64_t stC = crd ? b * b * sC : sC;
    const int64_t stI = crd ? b * sC : b * c * sC;
    const int64_t stJ = crd ? sC : c * sC;
    // NCHW: (n, c, h, i, w, j); NHWC: (n, h, i, w, j, c).
    if (nhwc) {
      dims = {x[0], x[2], b, x[3], b, c};
      strides = {sN, sH, stI, sW, stJ, stC};
    } else {
      dims = {x[0], c, x[2], b, x[3], b};
      strides = {sN, stC, sH, stI, sW, stJ};
    }
  } else {
    const int64_t c = x[1];
    if (x[2] % b != 0 || x[3] % b != 0 || y[1] != c * b * b || y[2] != x[2] / b || y[3] != x[3] / b)
      return false;
    // Output channel (i*b + j) * C + c: NCHW (n, i, j, c, h, w); NHWC (n, h, w, i, j, c).
    if (nhwc) {
      dims = {x[0], y[2], y[3], b, b, c};
      strides = {sN, b * sH, b * sW, sH, sW, sC};
    } else {
      dims = {x[0], b, b, c, y[2], y[3]};
      strides = {sN, sH, sW, sC, b * sH, b * sW};
    }
  }
  *p = makeStridedCopyPlan(static_cast<int>(dataTypeSize(storage)), dims, strides, 0);
  return true;
}

// ---- Split ----------------------------------------------------------------------------------

/// One strided copy per output: the slice of the input along the axis at its running offset.
bool splitPlans(const LayerContext& layer, DataType storage, bool nhwc,
                std::vector<StridedCopyPlan>* plans) {
  const Shape& x = layer.inputShapes[0];
  const size_t rank = x.rank();
  size_t axis = 0;
  if (rank == 0 || rank > static_cast<size_t>(kMoveMaxDims) ||
      !normAxis(layer.node->attrs.getInt("axis", 0), rank, &axis) ||
      layer.outputShapes.size() != layer.node->outputs.size() || layer.outputShapes.empty())
    return false;
  if (layer.inputShapes.size() > 1 && layer.hasInput(1) && !layer.constantInput(1)) return false;
  const std::vector<int64_t> in = storageStrides(x, nhwc);
  plans->clear();
  int64_t offset = 0;
  for (size_t k = 0; k < layer.outputShapes.size(); ++k) {
    const Shape& y = layer.outputShapes[k];
    if (y.rank() != rank || layer.node->outputs[k].empty()) return false;
    for (size_t d = 0; d < rank; ++d)
      if (d != axis && y[d] != x[d]) return false;
    if (y.numel() == 0) return false;
    plans->push_back(copyPlan(storage, y, in, offset * in[axis], nhwc));
    offset += y[axis];
  }
  return offset == x[axis];
}

class SplitTactic final : public CudaTactic {
 public:
  SplitTactic(DataType t, Layout l, const LayerContext& layer) : CudaTactic("split", t, l, layer) {}
  bool consumesInput(size_t index) const override { return index >= 1; }  // the split sizes
  Status initialize(const LayerContext& layer) override {
    if (!splitPlans(layer, dtype_, nhwc(), &plans_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    if (args.outputs.size() < plans_.size())
      return Status(ErrorCode::kInvalidArgument, id() + ": missing output pointers");
    for (size_t k = 0; k < plans_.size(); ++k) {
      if (!args.outputs[k])
        return Status(ErrorCode::kInvalidArgument, id() + ": output pointer is null");
      EI_RETURN_IF_ERROR(
          launchStridedCopy(plans_[k], args.inputs[0], args.outputs[k], maxBlocks_, args.stream));
    }
    return Status::Ok();
  }

 private:
  std::vector<StridedCopyPlan> plans_;
};

// ---- Concat ---------------------------------------------------------------------------------

bool concatPlan(const LayerContext& layer, DataType storage, bool nhwc, ConcatPlan* p) {
  const Shape& y = layer.outputShapes[0];
  const size_t rank = y.rank();
  size_t axis = 0;
  if (!layer.node->attrs.has("axis") || !normAxis(layer.node->attrs.getInt("axis", 0), rank, &axis))
    return false;
  const std::vector<size_t> order = physicalOrder(rank, nhwc);
  const size_t pa =
      static_cast<size_t>(std::find(order.begin(), order.end(), axis) - order.begin());
  *p = ConcatPlan{};
  p->elemBytes = static_cast<int>(dataTypeSize(storage));
  p->outer = 1;
  for (size_t k = 0; k < pa; ++k) p->outer *= y[order[k]];
  int64_t axisTotal = 0;
  for (size_t i = 0; i < layer.inputShapes.size(); ++i) {
    const Shape& s = layer.inputShapes[i];
    if (!layer.hasInput(i) || s.rank() != rank) return false;
    for (size_t d = 0; d < rank; ++d)
      if (d != axis && s[d] != y[d]) return false;
    axisTotal += s[axis];
    int64_t row = 1;
    for (size_t k = pa; k < rank; ++k) row *= s[order[k]];
    p->rowElems.push_back(row);
  }
  return axisTotal == y[axis] && !p->rowElems.empty();
}

class ConcatTactic final : public CudaTactic {
 public:
  ConcatTactic(DataType t, Layout l, const LayerContext& layer)
      : CudaTactic("concat", t, l, layer) {}
  Status initialize(const LayerContext& layer) override {
    if (!concatPlan(layer, dtype_, nhwc(), &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, plan_.rowElems.size()));
    return launchConcat(plan_, args.inputs.data(), args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  ConcatPlan plan_;
};

// ---- Pad ------------------------------------------------------------------------------------

bool padPlan(const LayerContext& layer, DataType storage, bool nhwc, PadPlan* p) {
  const Shape& x = layer.inputShapes[0];
  const Shape& y = layer.outputShapes[0];
  const size_t rank = x.rank();
  std::vector<int64_t> pads;
  if (layer.inputShapes.size() < 2 || layer.inputShapes.size() > 3 || y.rank() != rank ||
      rank == 0 || rank > static_cast<size_t>(kMoveMaxDims) || !constInts(layer, 1, &pads) ||
      pads.size() != 2 * rank)
    return false;
  const std::string m = layer.node->attrs.getString("mode", "constant");
  *p = PadPlan{};
  if (m == "constant")
    p->mode = PadMode::kConstant;
  else if (m == "reflect")
    p->mode = PadMode::kReflect;
  else if (m == "edge")
    p->mode = PadMode::kEdge;
  else
    return false;
  p->elemBytes = static_cast<int>(dataTypeSize(storage));
  if (layer.hasInput(2)) {
    const Tensor* c = layer.constantInput(2);
    if (!c || c->numel() != 1 || c->dtype() != layer.inputTypes[0]) return false;
    if (storage == DataType::kFloat16 && c->dtype() == DataType::kFloat32) {
      const uint16_t h = floatToHalf(*c->data<float>());
      std::memcpy(&p->constantBits, &h, sizeof(h));
    } else if (dataTypeSize(c->dtype()) == dataTypeSize(storage)) {
      std::memcpy(&p->constantBits, c->raw(), dataTypeSize(storage));
    } else if (storage == DataType::kFloat32 && c->dtype() == DataType::kFloat16) {
      const float f = static_cast<float>(c->getAsDouble(0));
      std::memcpy(&p->constantBits, &f, sizeof(f));
    } else {
      return false;
    }
  }
  const std::vector<size_t> order = physicalOrder(rank, nhwc);
  p->rank = static_cast<int>(rank);
  p->numel = y.numel();
  for (size_t k = 0; k < rank; ++k) {
    const size_t a = order[k];
    if (y[a] != x[a] + pads[a] + pads[a + rank]) return false;
    p->outDims[k] = y[a];
    p->inDims[k] = x[a];
    p->padBegin[k] = pads[a];
  }
  return true;
}

class PadTactic final : public CudaTactic {
 public:
  PadTactic(DataType t, Layout l, const LayerContext& layer) : CudaTactic("pad", t, l, layer) {}
  bool consumesInput(size_t index) const override { return index >= 1; }  // pads, value
  Status initialize(const LayerContext& layer) override {
    if (!padPlan(layer, dtype_, nhwc(), &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    return launchPad(plan_, args.inputs[0], args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  PadPlan plan_;
};

// ---- Gather ---------------------------------------------------------------------------------

bool gatherPlan(const LayerContext& layer, DataType storage, GatherPlan* p) {
  const Shape& x = layer.inputShapes[0];
  if (layer.inputShapes.size() != 2 || !layer.hasInput(1) || x.rank() == 0) return false;
  const DataType it = layer.inputTypes[1];
  if (!isIntStorage(it)) return false;
  size_t axis = 0;
  if (!normAxis(layer.node->attrs.getInt("axis", 0), x.rank(), &axis)) return false;
  *p = GatherPlan{};
  p->elemBytes = static_cast<int>(dataTypeSize(storage));
  p->indices64 = it == DataType::kInt64;
  p->outer = x.span(0, axis);
  p->dim = x[axis];
  p->inner = x.span(axis + 1, x.rank());
  p->count = layer.inputShapes[1].numel();
  if (layer.outputShapes[0].numel() != p->outer * p->count * p->inner) return false;
  // Constant indices are checked here, as the reference checks them at run time.
  if (const Tensor* c = layer.constantInput(1)) {
    for (int64_t k = 0; k < c->numel(); ++k) {
      const int64_t v = c->getAsInt64(k);
      if (v < -p->dim || v >= p->dim) return false;
    }
  }
  return true;
}

// ---- GatherND -------------------------------------------------------------------------------

bool gatherNDPlan(const LayerContext& layer, DataType storage, GatherNDPlan* p) {
  if (layer.inputShapes.size() != 2 || !layer.hasInput(1)) return false;
  const Shape& x = layer.inputShapes[0];
  const Shape& idx = layer.inputShapes[1];
  const DataType it = layer.inputTypes[1];
  if (!isIntStorage(it) || x.rank() == 0 || idx.rank() == 0) return false;
  const int64_t b = layer.node->attrs.getInt("batch_dims", 0);
  const int64_t r = static_cast<int64_t>(x.rank()), q = static_cast<int64_t>(idx.rank());
  if (b < 0 || b >= std::min(r, q)) return false;
  const int64_t k = idx[static_cast<size_t>(q - 1)];
  if (k < 1 || k > r - b || k > kMoveMaxDims) return false;
  const size_t bs = static_cast<size_t>(b);
  if (idx.span(0, bs) != x.span(0, bs)) return false;
  *p = GatherNDPlan{};
  p->elemBytes = static_cast<int>(dataTypeSize(storage));
  p->indices64 = it == DataType::kInt64;
  p->k = static_cast<int>(k);
  p->batches = x.span(0, bs);
  p->count = idx.span(bs, static_cast<size_t>(q - 1));
  p->slice = x.span(bs + static_cast<size_t>(k), x.rank());
  for (int64_t j = 0; j < k; ++j) p->dims[j] = x[bs + static_cast<size_t>(j)];
  if (layer.outputShapes[0].numel() != p->batches * p->count * p->slice) return false;
  // Constant indices are checked here, as the reference checks them at run time.
  if (const Tensor* c = layer.constantInput(1)) {
    for (int64_t e = 0; e < c->numel(); ++e) {
      const int64_t v = c->getAsInt64(e), d = p->dims[e % k];
      if (v < -d || v >= d) return false;
    }
  }
  return true;
}

bool gatherElementsPlan(const LayerContext& layer, DataType storage, GatherElementsPlan* p) {
  if (layer.inputShapes.size() != 2 || !layer.hasInput(1)) return false;
  const Shape& x = layer.inputShapes[0];
  const Shape& idx = layer.inputShapes[1];
  const DataType it = layer.inputTypes[1];
  const size_t rank = x.rank();
  size_t axis = 0;
  if (!isIntStorage(it) || rank == 0 || rank > static_cast<size_t>(kMoveMaxDims) ||
      idx.rank() != rank || layer.outputShapes[0] != idx ||
      !normAxis(layer.node->attrs.getInt("axis", 0), rank, &axis))
    return false;
  for (size_t d = 0; d < rank; ++d)
    if (d != axis && idx[d] > x[d]) return false;
  *p = GatherElementsPlan{};
  p->elemBytes = static_cast<int>(dataTypeSize(storage));
  p->indices64 = it == DataType::kInt64;
  p->rank = static_cast<int>(rank);
  p->axis = static_cast<int>(axis);
  p->axisDim = x[axis];
  const std::vector<int64_t> st = storageStrides(x, false);
  for (size_t d = 0; d < rank; ++d) {
    p->outDims[d] = idx[d];
    p->xStrides[d] = st[d];
  }
  p->numel = idx.numel();
  p->xNumel = x.numel();
  if (const Tensor* c =
          layer.constantInput(1)) {  // checked here, as the reference does at run time
    for (int64_t e = 0; e < c->numel(); ++e) {
      const int64_t v = c->getAsInt64(e);
      if (v < -p->axisDim || v >= p->axisDim) return false;
    }
  }
  return true;
}

/// Gather and GatherND: x and the indices (a runtime input in their own integer type) through
/// `Launch` with the plan `PlanFor` makes of the layer.
template <typename Plan, bool (*PlanFor)(const LayerContext&, DataType, Plan*),
          Status (*Launch)(const Plan&, const void*, const void*, void*, int, void*)>
class IndexedGatherTactic final : public CudaTactic {
 public:
  IndexedGatherTactic(const char* family, DataType t, const LayerContext& layer)
      : CudaTactic(family, t, Layout::kNCHW, layer) {
    setInputType(1, layer.inputTypes[1]);
  }
  Status initialize(const LayerContext& layer) override {
    if (!PlanFor(layer, dtype_, &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 2));
    return Launch(plan_, args.inputs[0], args.inputs[1], args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  Plan plan_;
};

using GatherTactic = IndexedGatherTactic<GatherPlan, gatherPlan, launchGather>;
using GatherNDTactic = IndexedGatherTactic<GatherNDPlan, gatherNDPlan, launchGatherND>;
using GatherElementsTactic =
    IndexedGatherTactic<GatherElementsPlan, gatherElementsPlan, launchGatherElements>;

// ---- Trilu ----------------------------------------------------------------------------------

bool triluPlan(const LayerContext& layer, DataType storage, TriluPlan* p) {
  const Shape& x = layer.inputShapes[0];
  if (x.rank() < 2 || layer.inputShapes.size() > 2 || layer.outputShapes[0] != x) return false;
  *p = TriluPlan{};
  if (layer.inputShapes.size() == 2 && layer.hasInput(1)) {
    std::vector<int64_t> k;
    if (!constInts(layer, 1, &k) || k.size() != 1) return false;
    p->k = k[0];
  }
  p->elemBytes = static_cast<int>(dataTypeSize(storage));
  p->upper = layer.node->attrs.getInt("upper", 1) != 0;
  p->rows = x[x.rank() - 2];
  p->cols = x[x.rank() - 1];
  p->batches = x.span(0, x.rank() - 2);
  return true;
}

class TriluTactic final : public CudaTactic {
 public:
  TriluTactic(DataType t, const LayerContext& layer)
      : CudaTactic("trilu", t, Layout::kNCHW, layer) {}
  bool consumesInput(size_t index) const override { return index >= 1; }  // k
  Status initialize(const LayerContext& layer) override {
    if (!triluPlan(layer, dtype_, &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    return launchTrilu(plan_, args.inputs[0], args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  TriluPlan plan_;
};

// ---- EyeLike, OneHot -------------------------------------------------------------------------

/// The bits of 1 in storage type `t` (little-endian, in the low bytes).
uint64_t oneBits(DataType t) {
  uint64_t bits = 0;
  if (t == DataType::kFloat32) {
    const float f = 1.f;
    std::memcpy(&bits, &f, sizeof f);
  } else if (t == DataType::kFloat16) {
    bits = floatToHalf(1.f);
  } else {
    bits = 1;  // every integer type, bool
  }
  return bits;
}

bool eyeLikePlan(const LayerContext& layer, DataType storage, EyeLikePlan* p) {
  const Shape& y = layer.outputShapes[0];
  if (y.rank() != 2 || layer.inputShapes.size() != 1) return false;
  *p = EyeLikePlan{};
  p->elemBytes = static_cast<int>(dataTypeSize(storage));
  p->one = oneBits(storage);
  p->rows = y[0];
  p->cols = y[1];
  p->k = layer.node->attrs.getInt("k", 0);
  return p->elemBytes <= 8;
}

/// EyeLike writes its output from the input's shape alone (the input is not read).
class EyeLikeTactic final : public CudaTactic {
 public:
  EyeLikeTactic(DataType t, DataType inputStorage, const LayerContext& layer)
      : CudaTactic("eyelike", t, Layout::kNCHW, layer) {
    setInputType(0, inputStorage);
  }
  Status initialize(const LayerContext& layer) override {
    if (!eyeLikePlan(layer, dtype_, &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 0));
    return launchEyeLike(plan_, args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  EyeLikePlan plan_;
};

/// OneHot with a constant depth (the output's size depends on it) and indices of a type the
/// kernel reads; values [off, on] constant or computed.
bool oneHotPlan(const LayerContext& layer, DataType storage, OneHotPlan* p) {
  if (layer.inputShapes.size() != 3 || !layer.hasInput(1) || !layer.hasInput(2)) return false;
  const DataType it = layer.inputTypes[0];
  if (it != DataType::kInt32 && it != DataType::kInt64 && !isFloatStorage(it)) return false;
  const Tensor* depth = layer.constantInput(1);
  if (!depth || depth->numel() != 1) return false;
  const Shape& idx = layer.inputShapes[0];
  const Shape& y = layer.outputShapes[0];
  if (y.rank() != idx.rank() + 1 || layer.inputShapes[2].numel() != 2) return false;
  int64_t axis = layer.node->attrs.getInt("axis", -1);
  if (axis < 0) axis += static_cast<int64_t>(y.rank());
  if (axis < 0 || axis >= static_cast<int64_t>(y.rank())) return false;
  const size_t a = static_cast<size_t>(axis);
  *p = OneHotPlan{};
  p->elemBytes = static_cast<int>(dataTypeSize(storage));
  // Float indices are read in float32 (an FP16 copy would round indices above 2048).
  p->indexType = isFloatStorage(it) ? DataType::kFloat32 : it;
  p->outer = idx.span(0, a);
  p->inner = idx.span(a, idx.rank());
  p->depth = y[a];
  return static_cast<int64_t>(depth->getAsDouble(0)) == p->depth && p->elemBytes <= 8;
}

class OneHotTactic final : public CudaTactic {
 public:
  OneHotTactic(DataType t, const LayerContext& layer)
      : CudaTactic("onehot", t, Layout::kNCHW, layer) {
    const DataType it = layer.inputTypes[0];
    setInputType(0, isFloatStorage(it) ? DataType::kFloat32 : it);
  }
  bool consumesInput(size_t index) const override { return index == 1; }  // depth
  Status initialize(const LayerContext& layer) override {
    if (!oneHotPlan(layer, dtype_, &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    if (args.inputs.size() < 3 || !args.inputs[2])
      return Status(ErrorCode::kInvalidArgument, id() + ": no values input");
    return launchOneHot(plan_, args.inputs[0], args.inputs[2], args.outputs[0], maxBlocks_,
                        args.stream);
  }

 private:
  OneHotPlan plan_;
};

// ---- Resize ---------------------------------------------------------------------------------
// Every axis is tabulated (N and C too, which the common case leaves one to one), so every
// mode the reference supports on 4-D tensors runs, including the ones that move N or C.

/// The attributes of a canonical Resize (onnx/normalize.cpp fills every default).
struct ResizeAttrs {
  std::string mode, ctm, nearestMode;
  float cubicA = -0.75f;
  bool excludeOutside = false;
  float extrapolation = 0.f;
};

bool readResizeAttrs(const graph::Node& n, ResizeAttrs* a) {
  const auto& at = n.attrs;
  a->mode = at.getString("mode", "nearest");
  a->ctm = at.getString("coordinate_transformation_mode", "half_pixel");
  a->nearestMode = at.getString("nearest_mode", "round_prefer_floor");
  a->cubicA = at.getFloat("cubic_coeff_a", -0.75f);
  const int64_t eo = at.getInt("exclude_outside", 0);
  a->excludeOutside = eo == 1;
  a->extrapolation = at.getFloat("extrapolation_value", 0.f);
  static const std::array<const char*, 3> kModes = {"nearest", "linear", "cubic"};
  static const std::array<const char*, 6> kCtms = {"half_pixel",           "pytorch_half_pixel",
                                                   "align_corners",        "asymmetric",
                                                   "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  static const std::array<const char*, 4> kNearest = {"round_prefer_floor", "round_prefer_ceil",
                                                      "floor", "ceil"};
  auto in = [](const std::string& s, const auto& list) {
    return std::find(list.begin(), list.end(), s) != list.end();
  };
  // Opset-18 attributes the reference does not implement.
  if (at.getInt("antialias", 0) != 0 || at.has("axes") ||
      at.getString("keep_aspect_ratio_policy", "stretch") != "stretch")
    return false;
  return (eo == 0 || eo == 1) && in(a->mode, kModes) && in(a->ctm, kCtms) &&
         in(a->nearestMode, kNearest);
}

// The coordinate and tap arithmetic below follows kernels/ref/resize.cpp step for step (in
// float, as onnxruntime): the kernel must see the very taps and weights the reference uses.

float originalCoordinate(const ResizeAttrs& a, float x, float scale, int64_t in, int64_t out,
                         float roiStart, float roiEnd) {
  const float inF = static_cast<float>(in);
  const float outF = static_cast<float>(out);
  if (a.ctm == "half_pixel") return (x + 0.5f) / scale - 0.5f;
  if (a.ctm == "pytorch_half_pixel") return out > 1 ? (x + 0.5f) / scale - 0.5f : 0.f;
  if (a.ctm == "align_corners") {
    const float resized = inF * scale;
    return out == 1 || resized <= 1.f ? 0.f : x * (inF - 1.f) / (resized - 1.f);
  }
  if (a.ctm == "asymmetric") return x / scale;
  if (a.ctm == "tf_half_pixel_for_nn") return (x + 0.5f) / scale;
  return out > 1 ? roiStart * (inF - 1.f) + x * (roiEnd - roiStart) * (inF - 1.f) / (outF - 1.f)
                 : 0.5f * (roiStart + roiEnd) * (inF - 1.f);
}

int64_t nearestIndex(const std::string& mode, float x) {
  const float fl = std::floor(x);
  if (mode == "floor") return static_cast<int64_t>(fl);
  if (mode == "ceil") return static_cast<int64_t>(std::ceil(x));
  if (x - fl == 0.5f) return static_cast<int64_t>(mode == "round_prefer_ceil" ? fl + 1.f : fl);
  return static_cast<int64_t>(std::round(x));
}

std::array<float, 4> cubicWeights(float t, float a) {
  auto w = [a](float d) {
    if (d <= 1.f) return ((a + 2.f) * d - (a + 3.f)) * d * d + 1.f;
    return ((a * d - 5.f * a) * d + 8.f * a) * d - 4.f * a;
  };
  return {w(t + 1.f), w(t), w(1.f - t), w(2.f - t)};
}

std::vector<ResizeAxisTaps> axisTaps(const ResizeAttrs& a, int64_t in, int64_t out, float scale,
                                     float roiStart, float roiEnd) {
  std::vector<ResizeAxisTaps> taps(static_cast<size_t>(out));
  const auto clampIndex = [in](int64_t i) { return std::min(std::max<int64_t>(i, 0), in - 1); };
  for (int64_t o = 0; o < out; ++o) {
    ResizeAxisTaps& t = taps[static_cast<size_t>(o)];
    float x = originalCoordinate(a, static_cast<float>(o), scale, in, out, roiStart, roiEnd);
    if (a.ctm == "tf_crop_and_resize" && (x < 0.f || x > static_cast<float>(in - 1))) t.outside = 1;
    x = std::isfinite(x) ? std::min(std::max(x, -4.f), static_cast<float>(in) + 3.f) : 0.f;
    auto add = [&](int64_t index, float weight) {
      if (weight == 0.f) return;
      t.index[t.count] = static_cast<int32_t>(clampIndex(index));
      t.weight[t.count] = weight;
      ++t.count;
    };
    if (a.mode == "nearest") {
      add(nearestIndex(a.nearestMode, x), 1.f);
    } else if (a.mode == "linear") {
      const float x0 = std::floor(x);
      const float lambda = x - x0;
      add(static_cast<int64_t>(x0), 1.f - lambda);
      add(static_cast<int64_t>(x0) + 1, lambda);
    } else {
      const float x0 = std::floor(x);
      const int64_t i0 = static_cast<int64_t>(x0);
      std::array<float, 4> w = cubicWeights(x - x0, a.cubicA);
      if (a.excludeOutside) {
        float sum = 0.f;
        for (int k = 0; k < 4; ++k) {
          const int64_t idx = i0 - 1 + k;
          if (idx < 0 || idx >= in) w[static_cast<size_t>(k)] = 0.f;
          sum += w[static_cast<size_t>(k)];
        }
        for (float& v : w) v = sum != 0.f ? v / sum : 0.f;
      }
      for (int k = 0; k < 4; ++k) add(i0 - 1 + k, w[static_cast<size_t>(k)]);
    }
    if (t.count == 0) {
      t.index[0] = static_cast<int32_t>(clampIndex(static_cast<int64_t>(std::floor(x))));
      t.weight[0] = 0.f;
      t.count = 1;
    }
  }
  return taps;
}

/// The taps of the four axes (N, C, H, W, concatenated) of a supported 4-D Resize, and the
/// other plan fields; false otherwise.
bool resizePlan(const LayerContext& layer, ResizePlan* p, std::vector<ResizeAxisTaps>* taps) {
  const Shape& x = layer.inputShapes[0];
  const Shape& y = layer.outputShapes[0];
  if (layer.inputShapes.size() > 4 || x.rank() != 4 || y.rank() != 4) return false;
  for (size_t i = 1; i < layer.inputShapes.size(); ++i)
    if (layer.hasInput(i) && !layer.constantInput(i)) return false;  // roi/scales/sizes
  ResizeAttrs a;
  if (!readResizeAttrs(*layer.node, &a)) return false;
  const Tensor* scales = layer.hasInput(2) ? layer.constantInput(2) : nullptr;
  if (scales && scales->numel() == 0) scales = nullptr;
  if (scales && (scales->dtype() != DataType::kFloat32 || scales->numel() != 4)) return false;
  if (!scales && !layer.hasInput(3)) return false;
  const bool crop = a.ctm == "tf_crop_and_resize";
  const Tensor* roi = layer.hasInput(1) ? layer.constantInput(1) : nullptr;
  if (roi && roi->numel() == 0) roi = nullptr;
  if (crop && (!roi || roi->dtype() != DataType::kFloat32 || roi->numel() != 8)) return false;
  // int coordinates in the kernel; 32-bit element offsets unless 64-bit ones are chosen
  constexpr int64_t kLimit = int64_t{1} << 30;
  for (size_t d = 0; d < 4; ++d)
    if (x[d] >= kLimit || y[d] >= kLimit) return false;
  *p = ResizePlan{};
  p->N = x[0];
  p->C = x[1];
  p->H = x[2];
  p->W = x[3];
  p->ON = y[0];
  p->OC = y[1];
  p->OH = y[2];
  p->OW = y[3];
  p->extrapolation = a.extrapolation;
  if (taps) {
    taps->clear();
    for (size_t d = 0; d < 4; ++d) {
      const float scale =
          scales ? scales->data<float>()[d] : static_cast<float>(y[d]) / static_cast<float>(x[d]);
      const float rs = crop ? roi->data<float>()[d] : 0.f;
      const float re = crop ? roi->data<float>()[4 + d] : 1.f;
      const std::vector<ResizeAxisTaps> t = axisTaps(a, x[d], y[d], scale, rs, re);
      taps->insert(taps->end(), t.begin(), t.end());
    }
  }
  return true;
}

class ResizeTactic final : public CudaTactic {
 public:
  ResizeTactic(DataType t, Layout l, const LayerContext& layer)
      : CudaTactic("resize", t, l, layer) {}
  ~ResizeTactic() override { cudaFree(taps_); }
  bool consumesInput(size_t index) const override { return index >= 1; }  // roi, scales, sizes
  Status initialize(const LayerContext& layer) override {
    std::vector<ResizeAxisTaps> taps;
    if (!resizePlan(layer, &plan_, &taps))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    plan_.nhwc = nhwc();
    cudaFree(taps_);
    taps_ = nullptr;
    const size_t bytes = taps.size() * sizeof(ResizeAxisTaps);
    EI_CUDA_CHECK(cudaMalloc(&taps_, bytes));
    EI_CUDA_CHECK(cudaMemcpy(taps_, taps.data(), bytes, cudaMemcpyHostToDevice));
    plan_.taps = static_cast<const ResizeAxisTaps*>(taps_);
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    return launchResize(plan_, fp16(), args.inputs[0], args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  ResizePlan plan_;
  void* taps_ = nullptr;
};

// ---- Reduce ---------------------------------------------------------------------------------

bool reduceOpFor(const std::string& op, ReduceOp* r) {
  if (op == "ReduceSum")
    *r = ReduceOp::kSum;
  else if (op == "ReduceMean")
    *r = ReduceOp::kMean;
  else if (op == "ReduceMax")
    *r = ReduceOp::kMax;
  else if (op == "ReduceMin")
    *r = ReduceOp::kMin;
  else if (op == "ReduceProd")
    *r = ReduceOp::kProd;
  else if (op == "ReduceL1")
    *r = ReduceOp::kL1;
  else if (op == "ReduceL2")
    *r = ReduceOp::kL2;
  else if (op == "ReduceLogSum")
    *r = ReduceOp::kLogSum;
  else if (op == "ReduceLogSumExp")
    *r = ReduceOp::kLogSumExp;
  else if (op == "ReduceSumSquare")
    *r = ReduceOp::kSumSquare;
  else
    return false;
  return true;
}

/// The [outer, red, inner] view of a supported reduction: the reduced axes must be adjacent
/// once dims of size 1 are dropped. Axes come as the attribute (onnx/normalize.cpp).
bool reducePlan(const LayerContext& layer, ReducePlan* p) {
  const graph::Node& n = *layer.node;
  const Shape& x = layer.inputShapes[0];
  const size_t rank = x.rank();
  if (layer.inputShapes.size() != 1 || !reduceOpFor(n.opType, &p->op)) return false;
  const std::vector<int64_t> axes = n.attrs.getInts("axes");
  const int64_t keep = n.attrs.getInt("keepdims", 1);
  const int64_t noop = n.attrs.getInt("noop_with_empty_axes", 0);
  if ((keep != 0 && keep != 1) || (noop != 0 && noop != 1)) return false;
  // No axes with noop_with_empty_axes: the input unchanged (a sum over nothing reduced; the
  // other ops' pre- and post-steps, |x| or x^2 or log, must not run).
  if (axes.empty() && noop == 1) p->op = ReduceOp::kSum;
  std::vector<bool> reduced(rank, axes.empty() && noop == 0);
  for (int64_t a : axes) {
    size_t ax = 0;
    if (!normAxis(a, rank, &ax)) return false;
    reduced[ax] = true;
  }
  int64_t outNumel = 1;
  for (size_t d = 0; d < rank; ++d)
    if (!reduced[d]) outNumel *= x[d];
  if (layer.outputShapes[0].numel() != outNumel) return false;
  // Phases: 0 kept before, 1 reduced, 2 kept after; a reduced dim after phase 2 fails.
  p->outer = p->red = p->inner = 1;
  int phase = 0;
  for (size_t d = 0; d < rank; ++d) {
    if (x[d] == 1) continue;
    if (reduced[d]) {
      if (phase == 2) return false;
      phase = 1;
      p->red *= x[d];
    } else if (phase == 0) {
      p->outer *= x[d];
    } else {
      phase = 2;
      p->inner *= x[d];
    }
  }
  return true;
}

class ReduceTactic final : public CudaTactic {
 public:
  ReduceTactic(DataType t, const LayerContext& layer)
      : CudaTactic("reduce", t, Layout::kNCHW, layer) {}
  Status initialize(const LayerContext& layer) override {
    if (!reducePlan(layer, &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    return launchReduce(plan_, fp16(), args.inputs[0], args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  ReducePlan plan_;
};

}  // namespace

bool dataCandidates(const LayerContext& layer, Precision precision,
                    std::vector<std::unique_ptr<Tactic>>* out) {
  const graph::Node& node = *layer.node;
  if (node.domain.empty() && (node.opType == "EyeLike" || node.opType == "OneHot")) {
    // Their output type is not their first input's.
    if (!layer.hasInput(0) || !staticNonEmpty(layer)) return true;
    const DataType in = layer.inputTypes[0];
    for (DataType s : moveTypes(layer.outputTypes[0], precision)) {
      if (node.opType == "EyeLike") {
        EyeLikePlan p;
        const DataType inStorage = isFloatStorage(in) && isFloatStorage(s) ? s : in;
        if (eyeLikePlan(layer, s, &p))
          out->push_back(std::make_unique<EyeLikeTactic>(s, inStorage, layer));
      } else {
        OneHotPlan p;
        if (oneHotPlan(layer, s, &p)) out->push_back(std::make_unique<OneHotTactic>(s, layer));
      }
    }
    return true;
  }
  static const std::array<const char*, 26> kOps = {
      "Concat",       "Transpose",    "Slice",           "Expand",          "Pad",
      "Gather",       "GatherND",     "GatherElements",  "Resize",          "ReduceSum",
      "ReduceMean",   "ReduceMax",    "ReduceMin",       "ReduceProd",      "ReduceL1",
      "ReduceL2",     "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "Tile",
      "DepthToSpace", "SpaceToDepth", "Split",           "Trilu",           "Identity",
      "Dropout"};
  if (!node.domain.empty() || std::find(kOps.begin(), kOps.end(), node.opType) == kOps.end())
    return false;
  const std::string& op = node.opType;
  if (op == "Split") {  // several outputs
    if (layer.inputShapes.empty() || !layer.hasInput(0) || !isStatic(layer.inputShapes[0]))
      return true;
    const DataType t = layer.inputTypes[0];
    for (DataType o : layer.outputTypes)
      if (o != t) return true;
    const bool in4d = layer.inputShapes[0].rank() == 4;
    for (DataType s : moveTypes(t, precision))
      for (Layout l : in4d ? std::vector<Layout>{Layout::kNCHW, Layout::kNHWC}
                           : std::vector<Layout>{Layout::kNCHW}) {
        std::vector<StridedCopyPlan> plans;
        if (splitPlans(layer, s, l == Layout::kNHWC, &plans))
          out->push_back(std::make_unique<SplitTactic>(s, l, layer));
      }
    return true;
  }
  if (layer.inputShapes.empty() || !layer.hasInput(0) || !staticNonEmpty(layer)) return true;
  const DataType t = layer.inputTypes[0];
  if (layer.outputTypes[0] != t) return true;
  const bool all4d = layer.inputShapes[0].rank() == 4 && layer.outputShapes[0].rank() == 4;
  // NHWC where the op is natural on 4-D activations; NCHW (plain row-major) otherwise.
  const std::vector<Layout> layouts = all4d ? std::vector<Layout>{Layout::kNCHW, Layout::kNHWC}
                                            : std::vector<Layout>{Layout::kNCHW};
  const std::vector<Layout> plain = {Layout::kNCHW};

  if (op == "Tile" || op == "DepthToSpace" || op == "SpaceToDepth") {
    const bool tile = op == "Tile";
    const StridedCopyTactic::Planner planner = tile ? tilePlan : spaceDepthPlan;
    const std::string family = tile                   ? "tile"
                               : op == "DepthToSpace" ? "depthtospace"
                                                      : "spacetodepth";
    for (DataType s : moveTypes(t, precision))
      for (Layout l : tile ? plain : layouts) {
        StridedCopyPlan p;
        if (planner(layer, s, l == Layout::kNHWC, &p))
          out->push_back(std::make_unique<StridedCopyTactic>(family, planner, 1, s, l, layer));
      }
  } else if (op == "Concat") {
    for (size_t i = 0; i < layer.inputTypes.size(); ++i)
      if (layer.inputTypes[i] != t) return true;
    for (DataType s : moveTypes(t, precision))
      for (Layout l : layouts) {
        ConcatPlan p;
        if (concatPlan(layer, s, l == Layout::kNHWC, &p))
          out->push_back(std::make_unique<ConcatTactic>(s, l, layer));
      }
  } else if (op == "Transpose" || op == "Slice" || op == "Expand" || op == "Identity" ||
             op == "Dropout") {
    const bool identity = op == "Identity" || op == "Dropout";
    const StridedCopyTactic::Planner planner = op == "Transpose" ? transposePlan
                                               : op == "Slice"   ? slicePlan
                                               : identity        ? identityPlan
                                                                 : expandPlan;
    const std::string family = op == "Transpose" ? "transpose"
                               : op == "Slice"   ? "slice"
                               : identity        ? "identity"
                                                 : "expand";
    for (DataType s : moveTypes(t, precision))
      for (Layout l : op == "Slice" || identity ? layouts : plain) {
        StridedCopyPlan p;
        if (planner(layer, s, l == Layout::kNHWC, &p))
          out->push_back(std::make_unique<StridedCopyTactic>(family, planner, 1, s, l, layer));
      }
  } else if (op == "Pad") {
    for (DataType s : moveTypes(t, precision))
      for (Layout l : layouts) {
        PadPlan p;
        if (padPlan(layer, s, l == Layout::kNHWC, &p))
          out->push_back(std::make_unique<PadTactic>(s, l, layer));
      }
  } else if (op == "Gather") {
    for (DataType s : moveTypes(t, precision)) {
      GatherPlan p;
      if (gatherPlan(layer, s, &p))
        out->push_back(std::make_unique<GatherTactic>("gather", s, layer));
    }
  } else if (op == "GatherND") {
    for (DataType s : moveTypes(t, precision)) {
      GatherNDPlan p;
      if (gatherNDPlan(layer, s, &p))
        out->push_back(std::make_unique<GatherNDTactic>("gathernd", s, layer));
    }
  } else if (op == "GatherElements") {
    for (DataType s : moveTypes(t, precision)) {
      GatherElementsPlan p;
      if (gatherElementsPlan(layer, s, &p))
        out->push_back(std::make_unique<GatherElementsTactic>("gatherelements", s, layer));
    }
  } else if (op == "Trilu") {
    for (DataType s : moveTypes(t, precision)) {
      TriluPlan p;
      if (triluPlan(layer, s, &p)) out->push_back(std::make_unique<TriluTactic>(s, layer));
    }
  } else if (op == "Resize") {
    ResizePlan p;
    if (!isFloatStorage(t) || !resizePlan(layer, &p, nullptr)) return true;
    for (DataType s : storageTypes(precision))
      for (Layout l : layouts) out->push_back(std::make_unique<ResizeTactic>(s, l, layer));
  } else {  // Reduce*
    ReducePlan p;
    if (!isFloatStorage(t) || !reducePlan(layer, &p)) return true;
    for (DataType s : storageTypes(precision))
      out->push_back(std::make_unique<ReduceTactic>(s, layer));
  }
  return true;
}

}  // namespace edgeinfer::cuda::detail
