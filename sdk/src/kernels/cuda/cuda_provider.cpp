// The `cuda` tactic provider (cuda_provider.h): which layers its kernels support, and the
// tactics that plan (initialize) and enqueue them, for the elementwise, pooling and Softmax
// (with LogSoftmax, Hardmax, LpNormalization) families (kernels in eltwise.cu, pool.cu and
// softmax.cu); the data-movement, Resize and Reduce families are in cuda_provider_data.cpp. Host
// code only.
#include "kernels/cuda/cuda_provider.h"

#include <cuda_runtime.h>

#include <array>
#include <atomic>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <unordered_map>
#include <utility>

#include "graph/ops/conv_geometry.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/dependent_launch.cuh"
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
    case DataType::kInt8:
      return "i8";
    case DataType::kUInt8:
      return "u8";
    case DataType::kBool:
      return "bool";
    default:
      return "fp32";
  }
}

namespace {
int deviceAttribute(cudaDeviceAttr attr) {
  int dev = 0, value = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&value, attr, dev) != cudaSuccess || value <= 0) {
    cudaGetLastError();
    return 0;
  }
  return value;
}
}  // namespace

int deviceSmCount() {
  return deviceAttribute(cudaDevAttrMultiProcessorCount);
}

int deviceSharedMemoryOptin() {
  return deviceAttribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
}

int deviceSharedMemoryPerSm() {
  return deviceAttribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
}

int maxBlocksForDevice() {
  const int sms = deviceSmCount();
  return sms > 0 ? sms * 16 : 2048;
}

}  // namespace detail

namespace {
thread_local int tDependentLaunchOff = 0;  // live DependentLaunchOff objects of this thread
}  // namespace

DependentLaunchOff::DependentLaunchOff() {
  ++tDependentLaunchOff;
}

DependentLaunchOff::~DependentLaunchOff() {
  --tDependentLaunchOff;
}

bool dependentLaunchEnabled() {
  if (tDependentLaunchOff > 0) return false;
  static const bool off = [] {
    const char* e = std::getenv("EDGEINFER_DISABLE_PDL");
    return e && *e && std::string(e) != "0";
  }();
  if (off) return false;
  constexpr int kDevices = 64;
  static std::array<std::atomic<int>, kDevices> known{};  // 0 unknown, 1 no, 2 yes
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kDevices) {
    cudaGetLastError();
    return false;
  }
  int k = known[static_cast<size_t>(dev)].load(std::memory_order_relaxed);
  if (k == 0) {
    k = detail::deviceCapability() >= 90 ? 2 : 1;
    known[static_cast<size_t>(dev)].store(k, std::memory_order_relaxed);
  }
  return k == 2;
}

bool smallKernelDependentLaunchEnabled() {
  static const bool off = [] {
    const char* e = std::getenv("EDGEINFER_DISABLE_PDL_SMALL");
    return e && *e && std::string(e) != "0";
  }();
  return !off && dependentLaunchEnabled();
}

namespace detail {

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

bool planBroadcast(const Shape& out, const Shape* operands, int numOperands, bool nhwc,
                   int64_t* dims, int64_t (*strides)[kEltMaxDims], int* rank) {
  const size_t r = out.rank();
  if (r > static_cast<size_t>(kEltMaxDims) || numOperands < 1) return false;
  const bool nhwc4 = nhwc && r == 4;
  // Logical (NCHW-order) strides of each operand in its own storage, broadcast dims 0.
  std::vector<std::array<int64_t, kEltMaxDims>> logical(static_cast<size_t>(numOperands));
  for (int k = 0; k < numOperands; ++k) {
    const Shape& s = operands[k];
    if (s.rank() > r) return false;
    std::vector<int64_t> st(s.rank(), 1);
    if (s.rank() == 4 && nhwc4) {
      st = {s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
    } else {
      for (size_t d = s.rank(); d-- > 1;) st[d - 1] = st[d] * s[d];
    }
    const size_t lead = r - s.rank();
    for (size_t d = 0; d < r; ++d) {
      if (d >= lead && s[d - lead] != out[d] && s[d - lead] != 1) return false;
      logical[static_cast<size_t>(k)][d] = (d < lead || s[d - lead] == 1) ? 0 : st[d - lead];
    }
  }
  // Physical order of the output, dims of size 1 dropped, then adjacent dims merged where
  // every operand is contiguous across them.
  std::vector<size_t> order(r);
  for (size_t d = 0; d < r; ++d) order[d] = d;
  if (nhwc4) order = {0, 2, 3, 1};
  int n = 0;
  for (size_t d : order) {
    const int64_t size = out[d];
    if (size == 1) continue;
    if (n > 0) {
      bool merge = true;
      for (int k = 0; k < numOperands; ++k)
        merge = merge && strides[k][n - 1] == logical[static_cast<size_t>(k)][d] * size;
      if (merge) {
        dims[n - 1] *= size;
        for (int k = 0; k < numOperands; ++k)
          strides[k][n - 1] = logical[static_cast<size_t>(k)][d];
        continue;
      }
    }
    dims[n] = size;
    for (int k = 0; k < numOperands; ++k) strides[k][n] = logical[static_cast<size_t>(k)][d];
    ++n;
  }
  if (n == 0) {  // a single element
    n = 1;
    dims[0] = 1;
    for (int k = 0; k < numOperands; ++k) strides[k][0] = 0;
  }
  *rank = n;
  return true;
}

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
      {"Sin", EltOp::kSin},
      {"Cos", EltOp::kCos},
      {"Tan", EltOp::kTan},
      {"Asin", EltOp::kAsin},
      {"Acos", EltOp::kAcos},
      {"Atan", EltOp::kAtan},
      {"Sinh", EltOp::kSinh},
      {"Cosh", EltOp::kCosh},
      {"Asinh", EltOp::kAsinh},
      {"Acosh", EltOp::kAcosh},
      {"Atanh", EltOp::kAtanh},
      {"Round", EltOp::kRound},
      {"Sign", EltOp::kSign},
      {"Softsign", EltOp::kSoftsign},
      {"Celu", EltOp::kCelu},
      {"ThresholdedRelu", EltOp::kThresholdedRelu},
      {"Shrink", EltOp::kShrink},
      {"Mod", EltOp::kFMod},  // fmod=1 only (Mod on floats requires it)
      {"Sum", EltOp::kAdd},   // variadic: a chain of binary launches (VariadicTactic)
      {"Mean", EltOp::kAdd},
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
    case EltOp::kCelu:
    case EltOp::kThresholdedRelu:
      spec->alpha = a.getFloat("alpha", 1.f);
      break;
    case EltOp::kShrink:
      spec->alpha = a.getFloat("lambd", 0.5f);
      spec->beta = a.getFloat("bias", 0.f);
      break;
    case EltOp::kFMod:
      if (a.getInt("fmod", 0) != 1) return false;
      break;
    default:
      break;
  }
  return true;
}

/// Sum and Mean (any input count), Max and Min with other than two inputs: a chain of launches.
bool isVariadic(const graph::Node& node, size_t numInputs) {
  return node.opType == "Sum" || node.opType == "Mean" ||
         ((node.opType == "Max" || node.opType == "Min") && numInputs != 2);
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
  const size_t operands = isVariadic(node, n) ? n : isBinaryEltOp(spec.op) ? 2 : 1;
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
    const Shape ops[2] = {layer.inputShapes[0],
                          p.numInputs > 1 ? layer.inputShapes[1] : layer.inputShapes[0]};
    if (!planBroadcast(out, ops, p.numInputs, nhwc(), p.dims, p.strides, &p.rank))
      return Status(ErrorCode::kUnsupported, id() + ": operands do not broadcast to the output");
    p.numel = out.numel();
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

/// Sum / Mean / Max / Min of any number of inputs: y = x0 op x1, then y = y op xk for each
/// further input (every launch planned against the output shape; the reference accumulates
/// left to right too), and Mean's division by the count; one input is a copy.
class VariadicTactic final : public CudaTactic {
 public:
  VariadicTactic(EltSpec spec, DataType dtype, Layout layout, const LayerContext& layer)
      : CudaTactic("variadic", dtype, layout, layer), spec_(spec) {}

  Status initialize(const LayerContext& layer) override {
    steps_.clear();
    const Shape& out = layer.outputShapes[0];
    const size_t n = layer.inputShapes.size();
    const auto add = [&](EltOp op, const Shape& a, const Shape* b, float alpha) -> Status {
      EltwisePlan p;
      p.op = op;
      p.alpha = alpha;
      p.numInputs = b ? 2 : 1;
      const Shape ops[2] = {a, b ? *b : a};
      if (!planBroadcast(out, ops, p.numInputs, nhwc(), p.dims, p.strides, &p.rank))
        return Status(ErrorCode::kUnsupported, id() + ": inputs do not broadcast to the output");
      p.numel = out.numel();
      steps_.push_back(p);
      return Status::Ok();
    };
    if (n == 1) {
      EI_RETURN_IF_ERROR(add(EltOp::kAffine, layer.inputShapes[0], nullptr, 1.f));
    } else {
      EI_RETURN_IF_ERROR(add(spec_.op, layer.inputShapes[0], &layer.inputShapes[1], 0.f));
      for (size_t k = 2; k < n; ++k)
        EI_RETURN_IF_ERROR(add(spec_.op, out, &layer.inputShapes[k], 0.f));
    }
    if (layer.node->opType == "Mean" && n > 1)
      EI_RETURN_IF_ERROR(add(EltOp::kAffine, out, nullptr, 1.f / static_cast<float>(n)));
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }

  Status enqueue(const LaunchArgs& args) override {
    const size_t n = inputRanks_.size();
    EI_RETURN_IF_ERROR(checkArgs(args, n));
    void* y = args.outputs[0];
    for (size_t i = 0; i < steps_.size(); ++i) {
      // Step 0 reads x0 (and x1); step k reads y and x(k + 1); Mean's last step reads y.
      const void* ins[2] = {
          i == 0 ? args.inputs[0] : y,
          i == 0 ? (n > 1 ? args.inputs[1] : nullptr) : (i + 1 < n ? args.inputs[i + 1] : nullptr)};
      EI_RETURN_IF_ERROR(launchEltwise(steps_[i], fp16(), ins, y, maxBlocks_, args.stream));
    }
    return Status::Ok();
  }

 private:
  EltSpec spec_;
  std::vector<EltwisePlan> steps_;
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
  else if (node.opType == "LpPool")
    *kind = PoolKind::kLp;
  else
    return false;
  return true;
}

/// The pooling plan (logical sizes, window) of a supported layer; false otherwise. 1-D pools
/// ([N, C, W] tensors) run as 2-D ones over [N, C, 1, W].
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
  const size_t rank = x.rank();
  if (!isFloatStorage(t) || layer.outputTypes[0] != t || (rank != 4 && rank != 3) ||
      y.rank() != rank || !isStatic(x) || !isStatic(y))
    return false;
  const bool oneD = rank == 3;
  constexpr int64_t kLimit = int64_t{1} << 30;  // int arithmetic in the kernels
  if (x.span(1, rank) >= kLimit || y.span(1, rank) >= kLimit) return false;
  *p = PoolPlan{};
  p->kind = kind;
  p->N = x[0];
  p->C = x[1];
  p->H = oneD ? 1 : x[2];
  p->W = x[rank - 1];
  if (kind == PoolKind::kGlobalAverage || kind == PoolKind::kGlobalMax)
    return y[0] == p->N && y[1] == p->C && y.span(2, rank) == 1;
  const size_t sr = rank - 2;  // spatial dims
  graph::WindowAttrs wa;
  graph::WindowDims dims;
  if (!graph::readWindowAttrs(node.attrs, sr, {}, &wa).ok() ||
      !graph::computeWindowDims(
           wa, oneD ? std::vector<int64_t>{p->W} : std::vector<int64_t>{p->H, p->W}, &dims)
           .ok())
    return false;
  if (kind == PoolKind::kAverage) {
    const int64_t cip = node.attrs.getInt("count_include_pad", 0);
    if (cip != 0 && cip != 1) return false;
    p->countIncludePad = cip == 1;
  }
  if (kind == PoolKind::kLp) {
    p->lpP = node.attrs.getInt("p", 2);
    if (p->lpP < 1 || p->lpP > 64) return false;
  }
  // Spatial dim i of the 2-D window (0: H, 1: W) from dim j of the op's own (1-D: H is 1).
  const auto at = [&](const std::vector<int64_t>& v, size_t i, int64_t unit) {
    return oneD ? (i == 0 ? unit : v[0]) : v[i];
  };
  p->OH = at(dims.out, 0, 1);
  p->OW = at(dims.out, 1, 1);
  if (y[0] != p->N || y[1] != p->C || (!oneD && y[2] != p->OH) || y[rank - 1] != p->OW)
    return false;
  p->kh = at(wa.kernel, 0, 1);
  p->kw = at(wa.kernel, 1, 1);
  p->sh = at(wa.strides, 0, 1);
  p->sw = at(wa.strides, 1, 1);
  p->dh = at(wa.dilations, 0, 1);
  p->dw = at(wa.dilations, 1, 1);
  p->padTop = at(dims.padBegin, 0, 0);
  p->padLeft = at(dims.padBegin, 1, 0);
  p->padBottom = at(dims.padEnd, 0, 0);
  p->padRight = at(dims.padEnd, 1, 0);
  // Window coordinates stay in int: (out - 1) * stride + extent within the limit.
  for (size_t i = 0; i < sr; ++i)
    if ((dims.out[i] - 1) * wa.strides[i] + wa.effectiveKernel(i) + dims.padBegin[i] +
            dims.padEnd[i] >=
        kLimit)
      return false;
  return true;
}

class PoolTactic final : public CudaTactic {
 public:
  /// dtype: the storage type of input and output (int8: the INT8 MaxPool); int8Out: a global
  /// pool of a dtype input that writes int8 for INT8 readers (id suffix ".i8").
  PoolTactic(PoolPlan plan, DataType dtype, Layout layout, const LayerContext& layer,
             bool int8Out = false)
      : CudaTactic("pool", dtype, layout, layer), plan_(plan), int8Out_(int8Out) {
    plan_.nhwc = layout == Layout::kNHWC;
    if (int8Out_) id_ += ".i8";
  }
  TensorFormat outputFormat(size_t i) const override {
    TensorFormat f = CudaTactic::outputFormat(i);
    if (int8Out_) f.dtype = DataType::kInt8;
    return f;
  }
  Status initialize(const LayerContext& layer) override {
    PoolPlan p;
    if (!poolKindFor(*layer.node, &p.kind) || !poolPlanFor(layer, p.kind, &p))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    p.nhwc = plan_.nhwc;
    if (dtype_ == DataType::kInt8 || int8Out_) {
      sIn_ = layer.inputScale(0);
      sOut_ = layer.outputScale(0);
      if (int8Out_ ? !int8OutGlobalPoolRuns(layer, p) : !int8MaxPoolRuns(layer, p))
        return Status(ErrorCode::kUnsupported, id() + ": the layer's tensors have no int8 scales");
    }
    plan_ = p;
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    if (int8Out_)
      return launchGlobalPoolInt8Out(plan_, fp16(), sOut_, args.inputs[0], args.outputs[0],
                                     maxBlocks_, args.stream);
    if (dtype_ == DataType::kInt8)
      return launchMaxPoolInt8(plan_, sIn_, sOut_, args.inputs[0], args.outputs[0], maxBlocks_,
                               args.stream);
    return launchPool(plan_, fp16(), args.inputs[0], args.outputs[0], maxBlocks_, args.stream);
  }

  /// INT8 (issue 6): a GlobalAveragePool or GlobalMaxPool whose output has an int8 scale (its
  /// readers are INT8 layers: a classifier's Gemm, through a Flatten) pools its float input and
  /// quantizes the result itself, in place of a quantize reformat after it.
  static bool int8OutGlobalPoolRuns(const LayerContext& layer, const PoolPlan& p) {
    const float s = layer.outputScale(0);
    return (p.kind == PoolKind::kGlobalAverage || p.kind == PoolKind::kGlobalMax) && s > 0.f &&
           std::isfinite(s);
  }

  /// INT8 (issue 6): a MaxPool of a 4-D float tensor whose input and output both have an
  /// int8 scale (the output one only when its readers are INT8 layers) runs on the int8 values,
  /// in NHWC, the format the INT8 convolutions read and write.
  static bool int8MaxPoolRuns(const LayerContext& layer, const PoolPlan& p) {
    const auto positive = [](float s) { return s > 0.f && std::isfinite(s); };
    return p.kind == PoolKind::kMax && layer.inputShapes[0].rank() == 4 &&
           positive(layer.inputScale(0)) && positive(layer.outputScale(0));
  }

 private:
  PoolPlan plan_;
  bool int8Out_ = false;
  float sIn_ = 0.f, sOut_ = 0.f;  // INT8
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
  if (detail::typedCandidates(layer, precision, &out)) return out;
  if (detail::detectionCandidates(layer, precision, &out)) return out;
  EltSpec spec;
  PoolKind kind;
  if (eltSpecFor(*layer.node, &spec)) {
    if (!eltSupported(layer, spec)) return out;
    const bool variadic = isVariadic(*layer.node, layer.inputShapes.size());
    // A Sum / Mean keeps its partial sums in the output: float32 only, or an FP16 partial sum
    // could overflow (or lose what later inputs cancel) where the reference adds in float.
    const bool sums = variadic && (layer.node->opType == "Sum" || layer.node->opType == "Mean");
    for (DataType t : storageTypes(precision))
      for (Layout l : layouts) {
        if (sums && t != DataType::kFloat32) continue;
        if (variadic)
          out.push_back(std::make_unique<VariadicTactic>(spec, t, l, layer));
        else
          out.push_back(std::make_unique<EltwiseTactic>(spec, t, l, layer));
      }
  } else if (poolKindFor(*layer.node, &kind)) {
    PoolPlan plan;
    if (!poolPlanFor(layer, kind, &plan)) return out;
    for (DataType t : storageTypes(precision))
      for (Layout l : layouts) out.push_back(std::make_unique<PoolTactic>(plan, t, l, layer));
    if (precision == Precision::kInt8 && PoolTactic::int8MaxPoolRuns(layer, plan))
      out.push_back(std::make_unique<PoolTactic>(plan, DataType::kInt8, Layout::kNHWC, layer));
    if (precision == Precision::kInt8 && PoolTactic::int8OutGlobalPoolRuns(layer, plan))
      for (DataType t : storageTypes(precision))
        for (Layout l : layouts)
          out.push_back(std::make_unique<PoolTactic>(plan, t, l, layer, /*int8Out=*/true));
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
