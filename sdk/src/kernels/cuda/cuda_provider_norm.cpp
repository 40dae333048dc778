// The `cuda` provider's normalisation, selection, scan and scatter families:
// LayerNormalization, InstanceNormalization, MeanVarianceNormalization and LRN (norm.cu), ArgMax /
// ArgMin and TopK (select.cu), CumSum (scan.cu), ScatterElements / ScatterND with reduction "none"
// (scatter.cu). Which layers the kernels support, and the tactics that plan (initialize) and
// enqueue them. Host code only.
//
// Float layers get an FP16 and an FP32 tactic at FP16 precision (half storage, float
// arithmetic; CumSum accumulates in double); CumSum and the scatters on int32/int64 get one
// tactic of their own type. Constant operands (scale and bias, TopK's K, CumSum's axis) are read in
// initialize() and consumed. ArgMax/ArgMin and TopK write int64 indices exactly as the CPU
// reference.
#include <cuda_runtime.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/norm.h"
#include "kernels/cuda/scan.h"
#include "kernels/cuda/scatter.h"
#include "kernels/cuda/select.h"

namespace edgeinfer::cuda::detail {
namespace {

using builder::LaunchArgs;
using builder::LayerContext;
using builder::Layout;
using builder::Tactic;
using builder::TensorFormat;

bool normAxis(int64_t a, size_t rank, size_t* out) {
  const int64_t r = static_cast<int64_t>(rank);
  if (a < -r || a >= r) return false;
  *out = static_cast<size_t>(a < 0 ? a + r : a);
  return true;
}

bool isFlag(int64_t v) {
  return v == 0 || v == 1;
}

/// Input 0 present, every present input and every output static, output 0 non-empty.
bool staticShapes(const LayerContext& layer) {
  if (layer.inputShapes.empty() || !layer.hasInput(0)) return false;
  for (size_t i = 0; i < layer.inputShapes.size(); ++i)
    if (layer.hasInput(i) && !isStatic(layer.inputShapes[i])) return false;
  for (const Shape& s : layer.outputShapes)
    if (!isStatic(s)) return false;
  return layer.inputShapes[0].numel() > 0 && layer.outputShapes[0].numel() > 0;
}

/// Only output 0 is requested (the others absent or unnamed).
bool onlyFirstOutput(const graph::Node& n) {
  if (n.outputs.empty() || n.outputs[0].empty()) return false;
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (!n.outputs[i].empty()) return false;
  return true;
}

/// A constant float input broadcast (unidirectionally, numpy rules) to `target`, as floats.
bool expandConstant(const LayerContext& layer, size_t i, const std::vector<int64_t>& target,
                    std::vector<float>* out) {
  const Tensor* t = layer.constantInput(i);
  if (!t || !isFloatStorage(t->dtype())) return false;
  const std::vector<int64_t>& s = t->shape().dims();
  if (s.size() > target.size()) return false;
  const size_t lead = target.size() - s.size();
  std::vector<int64_t> strides(target.size(), 0);
  int64_t st = 1;
  for (size_t d = s.size(); d-- > 0;) {
    const int64_t td = target[lead + d];
    if (s[d] != td && s[d] != 1) return false;
    strides[lead + d] = s[d] == 1 ? 0 : st;
    st *= s[d];
  }
  if (!out) return true;
  int64_t n = 1;
  for (int64_t d : target) n *= d;
  out->assign(static_cast<size_t>(n), 0.f);
  for (int64_t k = 0; k < n; ++k) {
    int64_t rem = k, off = 0;
    for (size_t d = target.size(); d-- > 0;) {
      off += (rem % target[d]) * strides[d];
      rem /= target[d];
    }
    (*out)[static_cast<size_t>(k)] = static_cast<float>(t->getAsDouble(off));
  }
  return true;
}

// ---- LayerNormalization / InstanceNormalization ---------------------------------------------

/// The plan of a supported LayerNormalization / InstanceNormalization layer, with its scale
/// and bias as dense float vectors (when asked for); false otherwise.
bool rowNormPlan(const LayerContext& layer, RowNormPlan* p, std::vector<float>* scale,
                 std::vector<float>* bias) {
  const graph::Node& n = *layer.node;
  const Shape& x = layer.inputShapes[0];
  const DataType t = layer.inputTypes[0];
  if (!isFloatStorage(t) || layer.outputTypes[0] != t || layer.outputShapes[0] != x ||
      !onlyFirstOutput(n) || !layer.hasInput(1))
    return false;
  const float eps = n.attrs.getFloat("epsilon", 1e-5f);
  if (!std::isfinite(eps)) return false;
  *p = RowNormPlan{};
  p->epsilon = eps;
  if (n.opType == "LayerNormalization") {
    if (layer.inputShapes.size() > 3 || n.attrs.getInt("stash_type", 1) != 1) return false;
    size_t axis = 0;
    if (!normAxis(n.attrs.getInt("axis", -1), x.rank(), &axis)) return false;
    const std::vector<int64_t> normDims(x.dims().begin() + static_cast<int64_t>(axis),
                                        x.dims().end());
    p->rows = x.span(0, axis);
    p->len = x.span(axis, x.rank());
    if (!expandConstant(layer, 1, normDims, scale)) return false;
    if (layer.hasInput(2) && !expandConstant(layer, 2, normDims, bias)) return false;
    return true;
  }
  // InstanceNormalization: scale and B, one value per channel.
  if (layer.inputShapes.size() != 3 || x.rank() < 3 || !layer.hasInput(2)) return false;
  const std::vector<int64_t> channels = {x[1]};
  for (size_t i = 1; i < 3; ++i) {
    const Tensor* c = layer.constantInput(i);
    if (!c || c->numel() != x[1]) return false;
    if (!expandConstant(layer, i, channels, i == 1 ? scale : bias)) return false;
  }
  p->rows = x[0] * x[1];
  p->len = x.span(2, x.rank());
  p->channels = x[1];
  return true;
}

class RowNormTactic final : public CudaTactic {
 public:
  RowNormTactic(const std::string& family, DataType t, const LayerContext& layer)
      : CudaTactic(family, t, Layout::kNCHW, layer) {}
  ~RowNormTactic() override { cudaFree(params_); }
  bool consumesInput(size_t index) const override { return index >= 1; }  // scale, bias
  Status initialize(const LayerContext& layer) override {
    std::vector<float> scale, bias;
    if (!rowNormPlan(layer, &plan_, &scale, &bias))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    cudaFree(params_);
    params_ = nullptr;
    std::vector<float> all = scale;
    all.insert(all.end(), bias.begin(), bias.end());
    EI_CUDA_CHECK(cudaMalloc(&params_, all.size() * sizeof(float)));
    EI_CUDA_CHECK(
        cudaMemcpy(params_, all.data(), all.size() * sizeof(float), cudaMemcpyHostToDevice));
    plan_.scale = static_cast<const float*>(params_);
    plan_.bias = bias.empty() ? nullptr : plan_.scale + scale.size();
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    return launchRowNorm(plan_, fp16(), args.inputs[0], args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  RowNormPlan plan_;
  void* params_ = nullptr;
};

// ---- BatchNormalization (inference) ---------------------------------------------------------

/// A BatchNormalization the graph passes left standing (not after a convolution): constant
/// per-channel parameters, inference mode, one output. Fills the folded scale / shift.
bool batchNormPlan(const LayerContext& layer, bool nhwc, ChannelAffinePlan* p,
                   std::vector<float>* scale, std::vector<float>* shift) {
  const graph::Node& n = *layer.node;
  const Shape& x = layer.inputShapes[0];
  if (layer.inputShapes.size() != 5 || layer.outputShapes.size() != 1 || x.rank() < 2 ||
      !isFloatStorage(layer.inputTypes[0]) || n.attrs.getInt("training_mode", 0) != 0 ||
      (nhwc && x.rank() != 4))
    return false;
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (!n.outputs[i].empty()) return false;
  const int64_t c = x[1];
  const Tensor* t[4];
  for (size_t i = 0; i < 4; ++i) {
    t[i] = layer.constantInput(i + 1);
    if (!t[i] || t[i]->numel() != c || !isFloatStorage(t[i]->dtype())) return false;
  }
  *p = ChannelAffinePlan{};
  p->N = x[0];
  p->C = c;
  p->S = x.span(2, x.rank());
  p->nhwc = nhwc;
  if (scale) {
    const double eps = n.attrs.getFloat("epsilon", 1e-5f);
    scale->resize(static_cast<size_t>(c));
    shift->resize(static_cast<size_t>(c));
    for (int64_t k = 0; k < c; ++k) {
      const double inv = 1.0 / std::sqrt(t[3]->getAsDouble(k) + eps);
      const double a = inv * t[0]->getAsDouble(k);
      (*scale)[static_cast<size_t>(k)] = static_cast<float>(a);
      (*shift)[static_cast<size_t>(k)] =
          static_cast<float>(t[1]->getAsDouble(k) - t[2]->getAsDouble(k) * a);
    }
  }
  return true;
}

class BatchNormTactic final : public CudaTactic {
 public:
  BatchNormTactic(DataType t, Layout l, const LayerContext& layer)
      : CudaTactic("batchnorm", t, l, layer) {}
  ~BatchNormTactic() override { cudaFree(params_); }
  bool consumesInput(size_t index) const override { return index >= 1; }
  Status initialize(const LayerContext& layer) override {
    std::vector<float> scale, shift;
    if (!batchNormPlan(layer, nhwc(), &plan_, &scale, &shift))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    cudaFree(params_);
    params_ = nullptr;
    std::vector<float> all = scale;
    all.insert(all.end(), shift.begin(), shift.end());
    EI_CUDA_CHECK(cudaMalloc(&params_, all.size() * sizeof(float)));
    EI_CUDA_CHECK(
        cudaMemcpy(params_, all.data(), all.size() * sizeof(float), cudaMemcpyHostToDevice));
    plan_.scale = static_cast<const float*>(params_);
    plan_.shift = plan_.scale + scale.size();
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    return launchChannelAffine(plan_, fp16(), args.inputs[0], args.outputs[0], maxBlocks_,
                               args.stream);
  }

 private:
  ChannelAffinePlan plan_;
  void* params_ = nullptr;
};

// ---- MeanVarianceNormalization ----------------------------------------------------------------

/// The plan of a MeanVarianceNormalization over its `axes` (default 0, 2, 3) of a tensor of up
/// to MvnPlan::kMaxDims dims; false for a bad or repeated axis.
bool mvnPlan(const LayerContext& layer, MvnPlan* p) {
  const graph::Node& n = *layer.node;
  const Shape& x = layer.inputShapes[0];
  const DataType t = layer.inputTypes[0];
  if (layer.inputShapes.size() != 1 || !isFloatStorage(t) || layer.outputTypes[0] != t ||
      layer.outputShapes[0] != x || x.rank() == 0 ||
      x.rank() > static_cast<size_t>(MvnPlan::kMaxDims))
    return false;
  std::vector<bool> reduced(x.rank(), false);
  for (int64_t a : n.attrs.getInts("axes", {0, 2, 3})) {
    size_t axis = 0;
    if (!normAxis(a, x.rank(), &axis) || reduced[axis]) return false;
    reduced[axis] = true;
  }
  *p = MvnPlan{};
  p->groups = 1;
  p->groupSize = 1;
  int64_t stride = 1;
  std::vector<int64_t> strides(x.rank());
  for (size_t d = x.rank(); d-- > 0;) {
    strides[d] = stride;
    stride *= x[d];
  }
  for (size_t d = 0; d < x.rank(); ++d) {
    if (reduced[d]) {
      p->redDims[p->reduced] = x[d];
      p->redStrides[p->reduced++] = strides[d];
      p->groupSize *= x[d];
    } else {
      p->keptDims[p->kept] = x[d];
      p->keptStrides[p->kept++] = strides[d];
      p->groups *= x[d];
    }
  }
  return p->reduced > 0;
}

class MvnTactic final : public CudaTactic {
 public:
  MvnTactic(DataType t, const LayerContext& layer) : CudaTactic("mvn", t, Layout::kNCHW, layer) {}
  Status initialize(const LayerContext& layer) override {
    if (!mvnPlan(layer, &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    return launchMvn(plan_, fp16(), args.inputs[0], args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  MvnPlan plan_;
};

// ---- LRN ------------------------------------------------------------------------------------

bool lrnPlan(const LayerContext& layer, bool nhwc, LrnPlan* p) {
  const graph::Node& n = *layer.node;
  const Shape& x = layer.inputShapes[0];
  const DataType t = layer.inputTypes[0];
  if (layer.inputShapes.size() != 1 || !isFloatStorage(t) || layer.outputTypes[0] != t ||
      layer.outputShapes[0] != x || x.rank() < 3 || (nhwc && x.rank() != 4) || !n.attrs.has("size"))
    return false;
  *p = LrnPlan{};
  p->size = n.attrs.getInt("size", 0);
  p->alpha = n.attrs.getFloat("alpha", 1e-4f);
  p->beta = n.attrs.getFloat("beta", 0.75f);
  p->bias = n.attrs.getFloat("bias", 1.f);
  if (p->size < 1 || !std::isfinite(p->alpha) || !std::isfinite(p->beta) || !std::isfinite(p->bias))
    return false;
  p->N = x[0];
  p->C = x[1];
  p->S = x.span(2, x.rank());
  p->nhwc = nhwc;
  return true;
}

class LrnTactic final : public CudaTactic {
 public:
  LrnTactic(DataType t, Layout l, const LayerContext& layer) : CudaTactic("lrn", t, l, layer) {}
  Status initialize(const LayerContext& layer) override {
    if (!lrnPlan(layer, nhwc(), &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    return launchLrn(plan_, fp16(), args.inputs[0], args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  LrnPlan plan_;
};

// ---- ArgMax / ArgMin ------------------------------------------------------------------------

bool argPlan(const LayerContext& layer, ArgPlan* p) {
  const graph::Node& n = *layer.node;
  const Shape& x = layer.inputShapes[0];
  size_t axis = 0;
  if (layer.inputShapes.size() != 1 || !isFloatStorage(layer.inputTypes[0]) ||
      layer.outputTypes[0] != DataType::kInt64 || layer.outputShapes.size() != 1 || x.rank() == 0 ||
      !normAxis(n.attrs.getInt("axis", 0), x.rank(), &axis) ||
      !isFlag(n.attrs.getInt("keepdims", 1)) || !isFlag(n.attrs.getInt("select_last_index", 0)))
    return false;
  *p = ArgPlan{};
  p->isMax = n.opType == "ArgMax";
  p->selectLast = n.attrs.getInt("select_last_index", 0) == 1;
  p->outer = x.span(0, axis);
  p->len = x[axis];
  p->inner = x.span(axis + 1, x.rank());
  return p->len > 0 && layer.outputShapes[0].numel() == p->outer * p->inner;
}

class ArgTactic final : public CudaTactic {
 public:
  ArgTactic(const std::string& family, DataType t, const LayerContext& layer)
      : CudaTactic(family, t, Layout::kNCHW, layer) {}
  TensorFormat outputFormat(size_t i) const override {
    return {DataType::kInt64, CudaTactic::outputFormat(i).layout};
  }
  Status initialize(const LayerContext& layer) override {
    if (!argPlan(layer, &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    return launchArg(plan_, fp16(), args.inputs[0], args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  ArgPlan plan_;
};

// ---- TopK -----------------------------------------------------------------------------------

bool topKPlan(const LayerContext& layer, TopKPlan* p) {
  const graph::Node& n = *layer.node;
  const Shape& x = layer.inputShapes[0];
  const DataType t = layer.inputTypes[0];
  if (layer.inputShapes.size() > 2 || layer.outputShapes.size() != 2 || n.outputs.size() != 2 ||
      n.outputs[0].empty() || !isFloatStorage(t) || layer.outputTypes[0] != t ||
      layer.outputTypes[1] != DataType::kInt64 || x.rank() == 0)
    return false;
  int64_t k = -1;
  if (n.attrs.has("k")) {  // opset < 10; the attribute wins, as in the reference
    if (layer.hasInput(1) && !layer.constantInput(1)) return false;
    k = n.attrs.getInt("k", -1);
  } else {
    const Tensor* kt = layer.constantInput(1);
    if (!kt || kt->dtype() != DataType::kInt64 || kt->numel() != 1) return false;
    k = kt->getAsInt64(0);
  }
  size_t axis = 0;
  const int64_t largest = n.attrs.getInt("largest", 1);
  if (!normAxis(n.attrs.getInt("axis", -1), x.rank(), &axis) || !isFlag(largest) ||
      !isFlag(n.attrs.getInt("sorted", 1)))
    return false;
  *p = TopKPlan{};
  p->largest = largest == 1;
  p->outer = x.span(0, axis);
  p->len = x[axis];
  p->inner = x.span(axis + 1, x.rank());
  p->k = k;
  if (k < 1 || k > p->len || p->len > kTopKMaxLen) return false;
  Shape y = x;
  y[axis] = k;
  return layer.outputShapes[0] == y && layer.outputShapes[1] == y;
}

class TopKTactic final : public CudaTactic {
 public:
  TopKTactic(DataType t, const LayerContext& layer) : CudaTactic("topk", t, Layout::kNCHW, layer) {}
  bool consumesInput(size_t index) const override { return index >= 1; }  // K
  TensorFormat outputFormat(size_t i) const override {
    const TensorFormat f = CudaTactic::outputFormat(i);
    return i == 1 ? TensorFormat{DataType::kInt64, f.layout} : f;
  }
  Status initialize(const LayerContext& layer) override {
    if (!topKPlan(layer, &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    EI_RETURN_IF_ERROR(prepareTopK(plan_));
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    void* indices = args.outputs.size() > 1 ? args.outputs[1] : nullptr;
    return launchTopK(plan_, fp16(), args.inputs[0], args.outputs[0], indices, args.stream);
  }

 private:
  TopKPlan plan_;
};

// ---- CumSum ---------------------------------------------------------------------------------

bool cumSumPlan(const LayerContext& layer, CumSumPlan* p) {
  const graph::Node& n = *layer.node;
  const Shape& x = layer.inputShapes[0];
  const DataType t = layer.inputTypes[0];
  const bool typeOk = isFloatStorage(t) || t == DataType::kInt32 || t == DataType::kInt64;
  const int64_t exclusive = n.attrs.getInt("exclusive", 0);
  const int64_t reverse = n.attrs.getInt("reverse", 0);
  if (layer.inputShapes.size() != 2 || !typeOk || layer.outputTypes[0] != t ||
      layer.outputShapes.size() != 1 || layer.outputShapes[0] != x || x.rank() == 0 ||
      !isFlag(exclusive) || !isFlag(reverse))
    return false;
  const Tensor* a = layer.constantInput(1);
  size_t axis = 0;
  if (!a || (a->dtype() != DataType::kInt32 && a->dtype() != DataType::kInt64) || a->numel() != 1 ||
      a->shape().rank() > 1 || !normAxis(a->getAsInt64(0), x.rank(), &axis))
    return false;
  *p = CumSumPlan{};
  p->exclusive = exclusive == 1;
  p->reverse = reverse == 1;
  p->outer = x.span(0, axis);
  p->len = x[axis];
  p->inner = x.span(axis + 1, x.rank());
  return true;
}

class CumSumTactic final : public CudaTactic {
 public:
  CumSumTactic(DataType t, const LayerContext& layer)
      : CudaTactic("cumsum", t, Layout::kNCHW, layer) {}
  bool consumesInput(size_t index) const override { return index >= 1; }  // axis
  Status initialize(const LayerContext& layer) override {
    if (!cumSumPlan(layer, &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    return launchCumSum(plan_, dtype_, args.inputs[0], args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  CumSumPlan plan_;
};

// ---- ScatterElements / ScatterND (reduction none) --------------------------------------------

bool scatterPlan(const LayerContext& layer, DataType storage, ScatterPlan* p) {
  const graph::Node& n = *layer.node;
  const Shape& x = layer.inputShapes[0];
  const DataType t = layer.inputTypes[0];
  if (layer.inputShapes.size() != 3 || !layer.hasInput(1) || !layer.hasInput(2) ||
      layer.outputShapes.size() != 1 || layer.outputTypes[0] != t || layer.inputTypes[2] != t ||
      layer.outputShapes[0] != x || n.attrs.getString("reduction", "none") != "none" ||
      x.rank() == 0 || x.rank() > static_cast<size_t>(kScatterMaxDims))
    return false;
  const DataType it = layer.inputTypes[1];
  if (it != DataType::kInt32 && it != DataType::kInt64) return false;
  const Shape& is = layer.inputShapes[1];
  const Shape& us = layer.inputShapes[2];
  constexpr int64_t kMaxUpdates = int64_t{1} << 31;  // update numbers are int32
  *p = ScatterPlan{};
  p->elemBytes = static_cast<int>(dataTypeSize(storage));
  p->indices64 = it == DataType::kInt64;
  p->nd = n.opType == "ScatterND";
  p->numel = x.numel();
  p->rank = static_cast<int>(x.rank());
  int64_t stride = 1;
  for (size_t d = x.rank(); d-- > 0;) {
    p->dataDims[d] = x[d];
    p->dataStrides[d] = stride;
    stride *= x[d];
  }
  if (p->nd) {
    if (is.rank() == 0) return false;
    const int64_t m = is[is.rank() - 1];
    if (m < 1 || m > static_cast<int64_t>(x.rank())) return false;
    p->m = static_cast<int>(m);
    p->slice = x.span(static_cast<size_t>(m), x.rank());
    p->count = is.numel() / m;
    return p->count < kMaxUpdates && us.numel() == p->count * p->slice;
  }
  size_t axis = 0;
  if (!normAxis(n.attrs.getInt("axis", 0), x.rank(), &axis) || is.rank() != x.rank() || us != is)
    return false;
  for (size_t d = 0; d < x.rank(); ++d) {
    if (d != axis && is[d] > x[d]) return false;
    p->idxDims[d] = is[d];
  }
  p->axis = static_cast<int>(axis);
  p->count = is.numel();
  return p->count < kMaxUpdates;
}

class ScatterTactic final : public CudaTactic {
 public:
  ScatterTactic(const std::string& family, DataType t, const LayerContext& layer)
      : CudaTactic(family, t, Layout::kNCHW, layer) {
    setInputType(1, layer.inputTypes[1]);
    scatterPlan(layer, t, &plan_);  // for workspaceBytes() before initialize()
  }
  size_t workspaceBytes() const override { return scatterWorkspaceBytes(plan_); }
  Status initialize(const LayerContext& layer) override {
    if (!scatterPlan(layer, dtype_, &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 3));
    if (args.workspaceBytes < workspaceBytes())
      return Status(ErrorCode::kInvalidArgument, id() + ": workspace too small");
    return launchScatter(plan_, args.inputs[0], args.inputs[1], args.inputs[2], args.outputs[0],
                         args.workspace, maxBlocks_, args.stream);
  }

 private:
  ScatterPlan plan_;
};

}  // namespace

bool normSelectCandidates(const LayerContext& layer, Precision precision,
                          std::vector<std::unique_ptr<Tactic>>* out) {
  const graph::Node& node = *layer.node;
  const std::string& op = node.opType;
  const bool ours = op == "LayerNormalization" || op == "InstanceNormalization" || op == "LRN" ||
                    op == "BatchNormalization" || op == "ArgMax" || op == "ArgMin" ||
                    op == "TopK" || op == "CumSum" || op == "ScatterElements" || op == "Scatter" ||
                    op == "ScatterND" || op == "MeanVarianceNormalization";
  if (!node.domain.empty() || !ours) return false;
  if (!staticShapes(layer)) return true;
  const DataType t = layer.inputTypes[0];
  if (op == "LayerNormalization" || op == "InstanceNormalization") {
    RowNormPlan p;
    if (!rowNormPlan(layer, &p, nullptr, nullptr)) return true;
    const std::string family = op == "LayerNormalization" ? "layernorm" : "instancenorm";
    for (DataType s : storageTypes(precision))
      out->push_back(std::make_unique<RowNormTactic>(family, s, layer));
  } else if (op == "BatchNormalization") {
    const bool is4d = layer.inputShapes[0].rank() == 4;
    for (DataType s : storageTypes(precision))
      for (Layout l : is4d ? std::vector<Layout>{Layout::kNCHW, Layout::kNHWC}
                           : std::vector<Layout>{Layout::kNCHW}) {
        ChannelAffinePlan p;
        if (batchNormPlan(layer, l == Layout::kNHWC, &p, nullptr, nullptr))
          out->push_back(std::make_unique<BatchNormTactic>(s, l, layer));
      }
  } else if (op == "MeanVarianceNormalization") {
    MvnPlan p;
    if (!mvnPlan(layer, &p)) return true;
    for (DataType s : storageTypes(precision))
      out->push_back(std::make_unique<MvnTactic>(s, layer));
  } else if (op == "LRN") {
    const bool is4d = layer.inputShapes[0].rank() == 4;
    for (DataType s : storageTypes(precision))
      for (Layout l : is4d ? std::vector<Layout>{Layout::kNCHW, Layout::kNHWC}
                           : std::vector<Layout>{Layout::kNCHW}) {
        LrnPlan p;
        if (lrnPlan(layer, l == Layout::kNHWC, &p))
          out->push_back(std::make_unique<LrnTactic>(s, l, layer));
      }
  } else if (op == "ArgMax" || op == "ArgMin") {
    ArgPlan p;
    if (!argPlan(layer, &p)) return true;
    for (DataType s : storageTypes(precision))
      out->push_back(std::make_unique<ArgTactic>(op == "ArgMax" ? "argmax" : "argmin", s, layer));
  } else if (op == "TopK") {
    TopKPlan p;
    if (!topKPlan(layer, &p)) return true;
    for (DataType s : storageTypes(precision))
      out->push_back(std::make_unique<TopKTactic>(s, layer));
  } else if (op == "ScatterElements" || op == "Scatter" || op == "ScatterND") {
    const bool isInt = t == DataType::kInt32 || t == DataType::kInt64;
    if (!isFloatStorage(t) && !isInt) return true;
    const std::string family = op == "ScatterND" ? "scatternd" : "scatterelements";
    for (DataType s : isInt ? std::vector<DataType>{t} : storageTypes(precision)) {
      ScatterPlan p;
      if (scatterPlan(layer, s, &p))
        out->push_back(std::make_unique<ScatterTactic>(family, s, layer));
    }
  } else {  // CumSum
    CumSumPlan p;
    if (!cumSumPlan(layer, &p)) return true;
    const std::vector<DataType> types =
        isFloatStorage(t) ? storageTypes(precision) : std::vector<DataType>{t};
    for (DataType s : types) out->push_back(std::make_unique<CumSumTactic>(s, layer));
  }
  return true;
}

}  // namespace edgeinfer::cuda::detail
