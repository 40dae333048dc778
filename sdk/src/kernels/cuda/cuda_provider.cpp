// The `cuda` tactic provider (cuda_provider.h): which layers its kernels support, and the
// tactics that plan (initialize) and enqueue them, for the elementwise, pooling and Softmax
// (with LogSoftmax, Hardmax, LpNormalization) families (kernels in eltwise.cu, pool.cu and
// softmax.cu); the data-movement, Resize and Reduce families are in cuda_provider_data.cpp. Host
// code only.
#include "kernels/cuda/cuda_provider.h"

#include <cuda_runtime.h>

#include <array>
#include <climits>
#include <cmath>
#include <limits>
#include <unordered_map>
#include <utility>

#include "graph/ops/conv_geometry.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/eltwise.h"
#include "kernels/cuda/pool.h"
#include "kernels/cuda/softmax.h"

namespace edgeinfer::cuda {
namespace {

using builder::LaunchArgs;
using builder::LayerContext;
using builder::Layout;
using builder::Tactic;
using builder::TensorFormat;

}  // namespace

// ---- Shared tactic base (cuda_tactic_base.h) -------------------------------------------------

namespace detail {

const char* storageName(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return "fp16";
    case DataType::kInt32:
      return "i32";
    case DataType::kInt64:
      return "i64";
    default:
      return "fp32";
  }
}

int maxBlocksForDevice() {
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess ||
      sms <= 0) {
    cudaGetLastError();
    return 2048;
  }
  return sms * 16;
}

int deviceCapability() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return major * 10 + minor;
}

CudaTactic::CudaTactic(const std::string& family, DataType dtype, Layout layout4d,
                       const LayerContext& layer)
    : dtype_(dtype), layout4d_(layout4d) {
  for (const Shape& s : layer.inputShapes) inputRanks_.push_back(s.rank());
  for (const Shape& s : layer.outputShapes) outputRanks_.push_back(s.rank());
  inputTypes_.assign(inputRanks_.size(), DataType::kUndefined);
  const bool out4d = !layer.outputShapes.empty() && layer.outputShapes[0].rank() == 4;
  id_ = "cuda." + family + "." + storageName(dtype) + "." +
        (out4d ? builder::layoutName(layout4d) : "linear");
}

TensorFormat CudaTactic::inputFormat(size_t i) const {
  const DataType t =
      i < inputTypes_.size() && inputTypes_[i] != DataType::kUndefined ? inputTypes_[i] : dtype_;
  return {t, formatFor(i < inputRanks_.size() ? inputRanks_[i] : 0)};
}

TensorFormat CudaTactic::outputFormat(size_t i) const {
  return {dtype_, formatFor(i < outputRanks_.size() ? outputRanks_[i] : 0)};
}

void CudaTactic::setInputType(size_t i, DataType t) {
  if (i >= inputTypes_.size()) inputTypes_.resize(i + 1, DataType::kUndefined);
  inputTypes_[i] = t;
}

Status CudaTactic::checkArgs(const LaunchArgs& args, size_t numInputs) const {
  if (!initialized_)
    return Status(ErrorCode::kInvalidArgument, id_ + ": enqueue before initialize");
  if (args.inputs.size() < numInputs || args.outputs.empty() || !args.outputs[0])
    return Status(ErrorCode::kInvalidArgument, id_ + ": missing input or output pointers");
  for (size_t i = 0; i < numInputs; ++i)
    if (!args.inputs[i])
      return Status(ErrorCode::kInvalidArgument,
                    id_ + ": input " + std::to_string(i) + " pointer is null");
  return Status::Ok();
}

}  // namespace detail

namespace {

using detail::CudaTactic;
using detail::isFloatStorage;
using detail::isStatic;
using detail::maxBlocksForDevice;
using detail::storageTypes;

// ---- Elementwise ----------------------------------------------------------------------------

struct EltSpec {
  EltOp op;
  float alpha = 0.f, beta = 0.f;
};

/// The elementwise op of a node, with its attributes; false when not an op of this family.
bool eltSpecFor(const graph::Node& node, EltSpec* spec) {
  static const std::unordered_map<std::string, EltOp> kOps = {
      {"Relu", EltOp::kRelu},
      {"LeakyRelu", EltOp::kLeakyRelu},
      {"Sigmoid", EltOp::kSigmoid},
      {"HardSigmoid", EltOp::kHardSigmoid},
      {"HardSwish", EltOp::kHardSwish},
      {"Tanh", EltOp::kTanh},
      {"Elu", EltOp::kElu},
      {"Selu", EltOp::kSelu},
      {"Softplus", EltOp::kSoftplus},
      {"Clip", EltOp::kClip},
      {"Abs", EltOp::kAbs},
      {"Neg", EltOp::kNeg},
      {"Exp", EltOp::kExp},
      {"Log", EltOp::kLog},
      {"Sqrt", EltOp::kSqrt},
      {"Reciprocal", EltOp::kReciprocal},
      {"Erf", EltOp::kErf},
      {"Floor", EltOp::kFloor},
      {"Ceil", EltOp::kCeil},
      {"Add", EltOp::kAdd},
      {"Sub", EltOp::kSub},
      {"Mul", EltOp::kMul},
      {"Div", EltOp::kDiv},
      {"Pow", EltOp::kPow},
      {"Max", EltOp::kMax},
      {"Min", EltOp::kMin},
      {"PRelu", EltOp::kPRelu},
  };
  if (!node.domain.empty()) return false;
  const auto it = kOps.find(node.opType);
  if (it == kOps.end()) return false;
  spec->op = it->second;
  const auto& a = node.attrs;
  // Defaults as in the CPU reference (kernels/ref/elementwise.cpp).
  switch (spec->op) {
    case EltOp::kLeakyRelu:
      spec->alpha = a.getFloat("alpha", 0.01f);
      break;
    case EltOp::kHardSigmoid:
      spec->alpha = a.getFloat("alpha", 0.2f);
      spec->beta = a.getFloat("beta", 0.5f);
      break;
    case EltOp::kElu:
      spec->alpha = a.getFloat("alpha", 1.f);
      break;
    case EltOp::kSelu:
      spec->alpha = a.getFloat("alpha", 1.67326319217681884765625f);
      spec->beta = a.getFloat("gamma", 1.05070102214813232421875f);
      break;
    default:
      break;
  }
  return true;
}

/// Can the kernels run this elementwise layer? (Clip bounds are read in initialize().)
bool eltSupported(const LayerContext& layer, const EltSpec& spec) {
  const graph::Node& node = *layer.node;
  const size_t n = layer.inputShapes.size();
  if (layer.outputShapes.size() != 1 || node.outputs.size() != 1 || n == 0 || !layer.hasInput(0))
    return false;
  const DataType t = layer.inputTypes[0];
  if (!isFloatStorage(t) || layer.outputTypes[0] != t) return false;
  const Shape& out = layer.outputShapes[0];
  if (!isStatic(out) || out.rank() > static_cast<size_t>(kEltMaxDims)) return false;
  const size_t operands = isBinaryEltOp(spec.op) ? 2 : 1;
  if (spec.op == EltOp::kClip) {
    if (n > 3) return false;
    for (size_t i = 1; i < n; ++i) {
      if (!layer.hasInput(i)) continue;
      const Tensor* c = layer.constantInput(i);
      if (!c || c->numel() != 1 || !isFloatStorage(c->dtype())) return false;
    }
  } else if (n != operands) {
    return false;
  }
  for (size_t i = 0; i < operands; ++i) {
    if (!layer.hasInput(i) || layer.inputTypes[i] != t) return false;
    const Shape& s = layer.inputShapes[i];
    if (!isStatic(s) || s.rank() > out.rank()) return false;
    for (size_t d = 0; d < s.rank(); ++d) {  // numpy broadcasting to the output
      const int64_t od = out[out.rank() - s.rank() + d];
      if (s[d] != od && s[d] != 1) return false;
    }
  }
  return true;
}

class EltwiseTactic final : public CudaTactic {
 public:
  EltwiseTactic(EltSpec spec, DataType dtype, Layout layout, const LayerContext& layer)
      : CudaTactic("eltwise", dtype, layout, layer), spec_(spec) {}
  bool consumesInput(size_t index) const override {
    return spec_.op == EltOp::kClip && index >= 1;  // the bounds, read in initialize()
  }

  Status initialize(const LayerContext& layer) override {
    EltwisePlan& p = plan_;
    p = EltwisePlan{};
    p.op = spec_.op;
    p.alpha = spec_.alpha;
    p.beta = spec_.beta;
    p.numInputs = isBinaryEltOp(spec_.op) ? 2 : 1;
    if (spec_.op == EltOp::kClip) {
      p.alpha = -std::numeric_limits<float>::infinity();
      p.beta = std::numeric_limits<float>::infinity();
      for (size_t i = 1; i < 3; ++i) {
        if (!layer.hasInput(i)) continue;
        const Tensor* c = layer.constantInput(i);
        if (!c || c->numel() != 1)
          return Status(ErrorCode::kUnsupported, id() + ": Clip bounds must be constant scalars");
        (i == 1 ? p.alpha : p.beta) = static_cast<float>(c->getAsDouble(0));
      }
    }
    const Shape& out = layer.outputShapes[0];
    const size_t rank = out.rank();
    if (rank > static_cast<size_t>(kEltMaxDims))
      return Status(ErrorCode::kUnsupported, id() + ": rank above 8");
    // Logical (NCHW-order) strides of each operand in its own storage, broadcast dims 0.
    std::array<std::array<int64_t, kEltMaxDims>, 2> logical{};
    for (int k = 0; k < p.numInputs; ++k) {
      const Shape& s = layer.inputShapes[static_cast<size_t>(k)];
      std::vector<int64_t> st(s.rank(), 1);
      if (s.rank() == 4 && nhwc()) {
        st = {s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
      } else {
        for (size_t d = s.rank(); d-- > 1;) st[d - 1] = st[d] * s[d];
      }
      for (size_t d = 0; d < rank; ++d) {
        const size_t lead = rank - s.rank();
        logical[k][d] = (d < lead || s[d - lead] == 1) ? 0 : st[d - lead];
      }
    }
    // Physical order of the output, dims of size 1 dropped, then adjacent dims merged where
    // every operand is contiguous across them.
    std::vector<size_t> order(rank);
    for (size_t d = 0; d < rank; ++d) order[d] = d;
    if (rank == 4 && nhwc()) order = {0, 2, 3, 1};
    p.rank = 0;
    p.numel = out.numel();
    for (size_t d : order) {
      const int64_t size = out[d];
      if (size == 1) continue;
      if (p.rank > 0) {
        const int last = p.rank - 1;
        bool merge = true;
        for (int k = 0; k < p.numInputs; ++k)
          merge = merge && p.strides[k][last] == logical[k][d] * size;
        if (merge) {
          p.dims[last] *= size;
          for (int k = 0; k < p.numInputs; ++k) p.strides[k][last] = logical[k][d];
          continue;
        }
      }
      p.dims[p.rank] = size;
      for (int k = 0; k < p.numInputs; ++k) p.strides[k][p.rank] = logical[k][d];
      ++p.rank;
    }
    if (p.rank == 0) {  // a single element
      p.rank = 1;
      p.dims[0] = 1;
    }
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }

  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, static_cast<size_t>(plan_.numInputs)));
    return launchEltwise(plan_, fp16(), args.inputs.data(), args.outputs[0], maxBlocks_,
                         args.stream);
  }

 private:
  EltSpec spec_;
  EltwisePlan plan_;
};

// ---- Pooling --------------------------------------------------------------------------------

bool poolKindFor(const graph::Node& node, PoolKind* kind) {
  if (!node.domain.empty()) return false;
  if (node.opType == "MaxPool")
    *kind = PoolKind::kMax;
  else if (node.opType == "AveragePool")
    *kind = PoolKind::kAverage;
  else if (node.opType == "GlobalAveragePool")
    *kind = PoolKind::kGlobalAverage;
  else if (node.opType == "GlobalMaxPool")
    *kind = PoolKind::kGlobalMax;
  else
    return false;
  return true;
}

/// The pooling plan (logical sizes, window) of a supported layer; false otherwise.
bool poolPlanFor(const LayerContext& layer, PoolKind kind, PoolPlan* p) {
  const graph::Node& node = *layer.node;
  // One input, one output: MaxPool's Indices output has no GPU kernel.
  if (layer.inputShapes.size() != 1 || !layer.hasInput(0) || layer.outputShapes.size() != 1)
    return false;
  for (size_t i = 1; i < node.outputs.size(); ++i)
    if (!node.outputs[i].empty()) return false;
  const DataType t = layer.inputTypes[0];
  const Shape& x = layer.inputShapes[0];
  const Shape& y = layer.outputShapes[0];
  if (!isFloatStorage(t) || layer.outputTypes[0] != t || x.rank() != 4 || y.rank() != 4 ||
      !isStatic(x) || !isStatic(y))
    return false;
  constexpr int64_t kLimit = int64_t{1} << 30;  // int arithmetic in the kernels
  if (x[1] * x[2] * x[3] >= kLimit || y[1] * y[2] * y[3] >= kLimit) return false;
  *p = PoolPlan{};
  p->kind = kind;
  p->N = x[0];
  p->C = x[1];
  p->H = x[2];
  p->W = x[3];
  if (kind == PoolKind::kGlobalAverage || kind == PoolKind::kGlobalMax)
    return y[0] == p->N && y[1] == p->C && y[2] == 1 && y[3] == 1;
  graph::WindowAttrs wa;
  graph::WindowDims dims;
  if (!graph::readWindowAttrs(node.attrs, 2, {}, &wa).ok() ||
      !graph::computeWindowDims(wa, {p->H, p->W}, &dims).ok())
    return false;
  if (kind == PoolKind::kAverage) {
    const int64_t cip = node.attrs.getInt("count_include_pad", 0);
    if (cip != 0 && cip != 1) return false;
    p->countIncludePad = cip == 1;
  }
  p->OH = dims.out[0];
  p->OW = dims.out[1];
  if (y[0] != p->N || y[1] != p->C || y[2] != p->OH || y[3] != p->OW) return false;
  p->kh = wa.kernel[0];
  p->kw = wa.kernel[1];
  p->sh = wa.strides[0];
  p->sw = wa.strides[1];
  p->dh = wa.dilations[0];
  p->dw = wa.dilations[1];
  p->padTop = dims.padBegin[0];
  p->padLeft = dims.padBegin[1];
  p->padBottom = dims.padEnd[0];
  p->padRight = dims.padEnd[1];
  // Window coordinates stay in int: (out - 1) * stride + extent within the limit.
  for (size_t i = 0; i < 2; ++i)
    if ((dims.out[i] - 1) * wa.strides[i] + wa.effectiveKernel(i) + dims.padBegin[i] +
            dims.padEnd[i] >=
        kLimit)
      return false;
  return true;
}

class PoolTactic final : public CudaTactic {
 public:
  PoolTactic(PoolPlan plan, DataType dtype, Layout layout, const LayerContext& layer)
      : CudaTactic("pool", dtype, layout, layer), plan_(plan) {
    plan_.nhwc = layout == Layout::kNHWC;
  }
  Status initialize(const LayerContext& layer) override {
    PoolPlan p;
    if (!poolKindFor(*layer.node, &p.kind) || !poolPlanFor(layer, p.kind, &p))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    p.nhwc = plan_.nhwc;
    plan_ = p;
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    return launchPool(plan_, fp16(), args.inputs[0], args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  PoolPlan plan_;
};

// ---- Softmax --------------------------------------------------------------------------------

/// The [outer, len, inner] view of a supported Softmax / LogSoftmax / Hardmax /
/// LpNormalization layer in `layout`.
bool softmaxPlanFor(const LayerContext& layer, Layout layout, SoftmaxPlan* p) {
  const graph::Node& node = *layer.node;
  if (!node.domain.empty()) return false;
  AxisOp op;
  if (node.opType == "Softmax") {
    op = AxisOp::kSoftmax;
  } else if (node.opType == "LogSoftmax") {
    op = AxisOp::kLogSoftmax;
  } else if (node.opType == "Hardmax") {
    op = AxisOp::kHardmax;
  } else if (node.opType == "LpNormalization") {
    const int64_t pn = node.attrs.getInt("p", 2);
    if (pn != 1 && pn != 2) return false;
    op = pn == 1 ? AxisOp::kLpNorm1 : AxisOp::kLpNorm2;
  } else {
    return false;
  }
  if (layer.inputShapes.size() != 1 || !layer.hasInput(0) || layer.outputShapes.size() != 1)
    return false;
  const DataType t = layer.inputTypes[0];
  const Shape& x = layer.inputShapes[0];
  if (!isFloatStorage(t) || layer.outputTypes[0] != t || !isStatic(x) || x.rank() == 0 ||
      layer.outputShapes[0] != x)
    return false;
  const int64_t rank = static_cast<int64_t>(x.rank());
  const int64_t coerce = node.attrs.getInt("coerce_2d", 0);
  if (coerce != 0 && coerce != 1) return false;
  int64_t axis = node.attrs.getInt("axis", coerce ? 1 : -1);
  if (axis < 0) axis += rank;
  *p = SoftmaxPlan{};
  p->op = op;
  if (coerce == 1) {  // rows of the 2-D view [prod(dims[:axis]), prod(dims[axis:])]
    if (axis < 0 || axis > rank || layout == Layout::kNHWC) return false;
    p->outer = x.span(0, static_cast<size_t>(axis));
    p->len = x.span(static_cast<size_t>(axis), x.rank());
    p->inner = 1;
    return true;
  }
  if (axis < 0 || axis >= rank) return false;
  std::vector<int64_t> phys = x.dims();
  size_t a = static_cast<size_t>(axis);
  if (layout == Layout::kNHWC) {
    if (rank != 4) return false;
    phys = {x[0], x[2], x[3], x[1]};
    static const size_t kToPhysical[4] = {0, 3, 1, 2};
    a = kToPhysical[a];
  }
  p->outer = 1;
  p->inner = 1;
  for (size_t d = 0; d < a; ++d) p->outer *= phys[d];
  p->len = phys[a];
  for (size_t d = a + 1; d < phys.size(); ++d) p->inner *= phys[d];
  return true;
}

class SoftmaxTactic final : public CudaTactic {
 public:
  SoftmaxTactic(SoftmaxPlan plan, DataType dtype, Layout layout, const LayerContext& layer)
      : CudaTactic(family(plan.op), dtype, layout, layer), plan_(plan) {}
  static const char* family(AxisOp op) {
    return op == AxisOp::kHardmax                             ? "hardmax"
           : op == AxisOp::kLpNorm1 || op == AxisOp::kLpNorm2 ? "lpnorm"
                                                              : "softmax";
  }
  Status initialize(const LayerContext& layer) override {
    if (!softmaxPlanFor(layer, layout4d_, &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    return launchSoftmax(plan_, fp16(), args.inputs[0], args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  SoftmaxPlan plan_;
};

}  // namespace

std::vector<std::unique_ptr<builder::Tactic>> CudaKernelProvider::candidates(
    const LayerContext& layer, Precision precision) {
  std::vector<std::unique_ptr<Tactic>> out;
  if (!layer.node || layer.inputShapes.size() != layer.inputTypes.size() ||
      layer.outputShapes.size() != layer.outputTypes.size() || layer.outputShapes.empty())
    return out;
  const bool out4d = layer.outputShapes[0].rank() == 4;
  const std::vector<Layout> layouts = out4d ? std::vector<Layout>{Layout::kNCHW, Layout::kNHWC}
                                            : std::vector<Layout>{Layout::kLinear};
  if (detail::dataCandidates(layer, precision, &out)) return out;
  if (detail::normSelectCandidates(layer, precision, &out)) return out;
  EltSpec spec;
  PoolKind kind;
  if (eltSpecFor(*layer.node, &spec)) {
    if (!eltSupported(layer, spec)) return out;
    for (DataType t : storageTypes(precision))
      for (Layout l : layouts) out.push_back(std::make_unique<EltwiseTactic>(spec, t, l, layer));
  } else if (poolKindFor(*layer.node, &kind)) {
    PoolPlan plan;
    if (!poolPlanFor(layer, kind, &plan)) return out;
    for (DataType t : storageTypes(precision))
      for (Layout l : layouts) out.push_back(std::make_unique<PoolTactic>(plan, t, l, layer));
  } else {
    for (DataType t : storageTypes(precision))
      for (Layout l : layouts) {
        SoftmaxPlan plan;
        if (softmaxPlanFor(layer, l, &plan))
          out.push_back(std::make_unique<SoftmaxTactic>(plan, t, l, layer));
      }
  }
  return out;
}

}  // namespace edgeinfer::cuda
