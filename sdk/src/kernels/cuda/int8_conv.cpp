// The `cuda-i8` tactic provider (int8_conv.h): which layers it runs, and the tactics that
// quantize the weights (initialize) and launch the kernels of int8_conv.cu (enqueue).
#include "kernels/cuda/int8_conv.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <regex>
#include <tuple>
#include <utility>

#include "kernels/cuda/conv2d_layer.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/device_weights.h"
#include "quant/qdq.h"

namespace edgeinfer::cuda {
namespace {

using detail::fail;

using builder::Layout;
using builder::TensorFormat;

bool positiveScale(float s) {
  return s > 0.f && std::isfinite(s);
}

/// The layer's geometry into `p` (kernel, vec and output formats left unset); false with `why`
/// when no INT8 kernel here runs it. `depthwise` says which kind it is.
bool parseLayer(const builder::LayerContext& layer, Int8ConvPlan* p, bool* depthwise, bool* hasBias,
                std::string* why) {
  if (!layer.node || layer.inputShapes.empty()) return fail(why, "no node");
  if (layer.chained && layer.outputShapes.size() == layer.node->outputs.size() + 1) {
    builder::LayerContext own = layer;  // the layer alone: its chained layer's output dropped
    own.chained = nullptr;
    own.outputShapes.pop_back();
    own.outputTypes.pop_back();
    if (own.outputScales.size() > own.outputShapes.size())
      own.outputScales.resize(own.outputShapes.size());
    return parseLayer(own, p, depthwise, hasBias, why);
  }
  if (!positiveScale(layer.inputScale(0)))
    return fail(why, "the input has no int8 scale (not calibrated, or not an INT8 layer)");
  Conv2dLayer c;
  if (!parseConv2dLayer(layer, 31, &c, why)) return false;
  if (layer.inputTypes[0] != DataType::kFloat32 || layer.outputTypes[0] != DataType::kFloat32)
    return fail(why, "the input and output must be float32 values");
  if (c.weights->dtype() != DataType::kFloat32)
    return fail(why, "the weights must be a constant 4-D float32 tensor");
  *depthwise = c.group > 1;
  if (c.group == 1) {
    if (c.weightsPerGroup != c.C) return fail(why, "weights disagree with the input channels");
    if (c.C % 4 != 0) return fail(why, "dense INT8 kernels need C_in % 4 == 0");
  } else if (c.group != c.C || c.K != c.C || c.weightsPerGroup != 1) {
    return fail(why, "only group 1 and depthwise (group == C_in == C_out) are supported");
  }
  if (int64_t{c.R} * c.S * c.C >= (int64_t{1} << 30)) return fail(why, "kernel too large");
  if (c.hasBias && layer.constantInput(2)->dtype() != DataType::kFloat32)
    return fail(why, "the bias must be a constant float32 tensor of C_out elements");
  if (c.hasZ && layer.inputTypes[3] != DataType::kFloat32)
    return fail(why, "the residual Z must be a computed float32 tensor of the output's shape");
  c.copyTo(p);
  p->hasZ = c.hasZ;
  *hasBias = c.hasBias;
  p->gemmK = p->R * p->S * p->C;
  p->gemmKPad = (p->gemmK + 63) / 64 * 64;  // the kernels' K step
  return true;
}

const char* kernelName(const Int8ConvPlan& p) {
  switch (p.kernel) {
    case Int8ConvKernel::kMma128x128:
      return p.vec == 16 ? "mma128x128v16" : "mma128x128v4";
    case Int8ConvKernel::kMma128x64:
      return p.vec == 16 ? "mma128x64v16" : "mma128x64v4";
    case Int8ConvKernel::kMma64x128:
      return p.vec == 16 ? "mma64x128v16" : "mma64x128v4";
    case Int8ConvKernel::kDepthwise:
      return p.vec == 4 ? "dw4" : "dw1";
    case Int8ConvKernel::kWgmma128x128:
      return "wg128x128";
    case Int8ConvKernel::kWgmma128x256:
      return "wg128x256";
    case Int8ConvKernel::kWgmma128x64:
      return "wg128x64";
    case Int8ConvKernel::kWgmma64x128:
      return "wg64x128";
    case Int8ConvKernel::kWgmma128x128k128:
      return "wg128x128k128";
    case Int8ConvKernel::kWgmma128x64k128:
      return "wg128x64k128";
    case Int8ConvKernel::kTma128x128:
      return "tma128x128";
    case Int8ConvKernel::kTma128x256:
      return "tma128x256";
    case Int8ConvKernel::kTma128x64:
      return "tma128x64";
    case Int8ConvKernel::kTma64x128:
      return "tma64x128";
    case Int8ConvKernel::kTma128x128k128:
      return "tma128x128k128";
    case Int8ConvKernel::kPw128x128:
      return "pw128x128";
    case Int8ConvKernel::kPw128x64:
      return "pw128x64";
    case Int8ConvKernel::kPw64x256:
      return "pw64x256";
    case Int8ConvKernel::kPw64x128:
      return "pw64x128";
    case Int8ConvKernel::kHalo128x64:
      return "halo128x64";
    case Int8ConvKernel::kHaloWg128x64:
      return "halowg128x64";
    case Int8ConvKernel::kTmaR128x128:
      return "tmar128x128";
    case Int8ConvKernel::kTmaR128x64:
      return "tmar128x64";
    case Int8ConvKernel::kTmaR128x128k128:
      return "tmar128x128k128";
    case Int8ConvKernel::kTmaRD128x128k128:
      return "tmard128x128k128";
    case Int8ConvKernel::kTmaRD128x256k128:
      return "tmard128x256k128";
    case Int8ConvKernel::kTmaRD192x128k128:
      return "tmard192x128k128";
    case Int8ConvKernel::kTmaP128x128k128:
      return "tmap128x128k128";
    case Int8ConvKernel::kTmaP128x64:
      return "tmap128x64";
  }
  return "?";
}

class Int8ConvTactic final : public builder::Tactic {
 public:
  /// `folded`: the residual is computed by the layer LayerContext::foldedZ names (a pointwise
  /// kernel's kPwFold; the id's residual field reads "fold"), from its input, read at input 3.
  /// `chained`: the 1x1 layer LayerContext::chained names runs in the same kernel, from this
  /// layer's outputs in shared memory, and its output is this tactic's output 1 (a pointwise
  /// kernel's kPwChain; the id ends in ".chain").
  Int8ConvTactic(const Int8ConvPlan& plan, bool hasBias, bool folded = false, bool chained = false)
      : plan_(plan), hasBias_(hasBias), folded_(folded), chained_(chained) {
    id_ = std::string("cuda-i8.") + kernelName(plan) +
          (plan.splitK > 1 ? "s" + std::to_string(plan.splitK) : std::string()) + "." +
          (plan.yScale > 0.f ? "i8" : "f16") + "." +
          (folded              ? "fold"
           : !plan.hasZ        ? "-"
           : plan.zScale > 0.f ? "i8"
                               : "f16") +
          (plan.exact ? "" : ".f") + (chained ? ".chain" : "");
  }

  std::string id() const override { return id_; }
  const Int8ConvPlan& plan() const { return plan_; }
  bool hasBias() const { return hasBias_; }
  TensorFormat inputFormat(size_t index) const override {
    if (index == 1 || index == 2) return TensorFormat{DataType::kFloat32, Layout::kLinear};
    if (index == 3)
      return {plan_.zScale > 0.f ? DataType::kInt8 : DataType::kFloat16, Layout::kNHWC};
    return {DataType::kInt8, Layout::kNHWC};
  }
  TensorFormat outputFormat(size_t) const override {
    return {plan_.yScale > 0.f ? DataType::kInt8 : DataType::kFloat16, Layout::kNHWC};
  }
  bool consumesInput(size_t index) const override { return index == 1 || index == 2; }
  size_t workspaceBytes() const override { return int8ConvWorkspaceBytes(plan_); }

  Status initialize(const builder::LayerContext& layer) override {
    if (folded_ != (layer.foldedZ != nullptr))
      return Status(ErrorCode::kInvalidArgument,
                    id_ + (folded_ ? ": the layer has no folded residual layer"
                                   : ": the layer's residual is folded, which this tactic is not"));
    if (chained_ != (layer.chained != nullptr))
      return Status(ErrorCode::kInvalidArgument,
                    id_ + (chained_ ? ": the layer has no chained layer"
                                    : ": the layer has a chained layer, which this tactic is not"));
    Int8ConvPlan p;
    bool depthwise = false, hasBias = false;
    std::string why;
    if (!parseLayer(layer, &p, &depthwise, &hasBias, &why))
      return Status(ErrorCode::kUnsupported, id_ + ": " + why);
    if (depthwise != (plan_.kernel == Int8ConvKernel::kDepthwise) || p.hasZ != plan_.hasZ)
      return Status(ErrorCode::kUnsupported, id_ + ": the layer changed");
    // The scales this tactic was offered for must still be there (an engine load gets them
    // from the plan's tensors).
    const float yScale = plan_.yScale > 0.f ? layer.outputScale(0) : 0.f;
    const float zScale = plan_.zScale > 0.f ? layer.inputScale(3) : 0.f;
    if ((plan_.yScale > 0.f && !positiveScale(yScale)) ||
        (plan_.zScale > 0.f && !positiveScale(zScale)))
      return Status(ErrorCode::kInvalidArgument,
                    id_ + ": an int8 tensor of the layer has no scale");
    p.kernel = plan_.kernel;
    p.vec = plan_.vec;
    p.splitK = plan_.splitK;
    if (int8ConvWorkspaceBytes(p) != int8ConvWorkspaceBytes(plan_))
      return Status(ErrorCode::kUnsupported, id_ + ": the layer changed");
    p.yScale = yScale;
    p.zScale = zScale;
    p.exact = plan_.exact;
    // The fast epilogue computes int8 outputs in output steps where the activation commutes
    // with the division by s_y (int8_conv.h).
    p.prescaled = !p.exact && yScale > 0.f &&
                  (p.act == DeviceActivation::kNone || p.act == DeviceActivation::kRelu ||
                   p.act == DeviceActivation::kLeakyRelu);
    const double outDiv = p.prescaled ? double{yScale} : 1.0;
    p.zMul = static_cast<float>((zScale > 0.f ? double{zScale} : 1.0) / outDiv);
    p.yInv = yScale > 0.f ? static_cast<float>(1.0 / double{yScale}) : 0.f;

    std::vector<int8_t> q;
    std::vector<float> ws;
    EI_RETURN_IF_ERROR(
        quant::quantizeWeights(*layer.constantInput(1), 0, &q, &ws).withContext(id_ + ": weights"));
    std::vector<int8_t> packed;
    const int64_t RS = int64_t{p.R} * p.S;
    if (depthwise) {  // [C][1][R][S] -> [R][S][C]
      packed.assign(static_cast<size_t>(RS * p.C), 0);
      for (int64_t c = 0; c < p.C; ++c)
        for (int64_t rs = 0; rs < RS; ++rs)
          packed[static_cast<size_t>(rs * p.C + c)] = q[static_cast<size_t>(c * RS + rs)];
    } else {  // [K][C][R][S] -> [K][(r * S + s) * C + c], rows padded to gemmKPad
      // (the register-epilogue TMA kernels: row j holds channel int8ConvPermutedChannel(j))
      const bool permuted = isInt8ConvTmaRegKernel(p.kernel);
      packed.assign(static_cast<size_t>(int64_t{p.K} * p.gemmKPad), 0);
      for (int64_t row = 0; row < p.K; ++row) {
        const int64_t k = permuted ? int8ConvPermutedChannel(static_cast<int>(row)) : row;
        for (int64_t c = 0; c < p.C; ++c)
          for (int64_t rs = 0; rs < RS; ++rs)
            packed[static_cast<size_t>(row * p.gemmKPad + rs * p.C + c)] =
                q[static_cast<size_t>((k * p.C + c) * RS + rs)];
      }
    }
    const float sx = layer.inputScale(0);
    std::vector<float> alpha(static_cast<size_t>(p.K)), bias(static_cast<size_t>(p.K), 0.f);
    for (size_t k = 0; k < alpha.size(); ++k)  // sx * ws[k] rounded as the host reference does
      alpha[k] = p.prescaled ? static_cast<float>(double{sx * ws[k]} / outDiv) : sx * ws[k];
    if (hasBias) {
      const Tensor* b = layer.constantInput(2);
      for (size_t k = 0; k < bias.size(); ++k)
        bias[k] = static_cast<float>(b->getAsDouble(static_cast<int64_t>(k)) / outDiv);
    }
    bool finite = std::isfinite(p.zMul) && std::isfinite(p.yInv);
    for (size_t k = 0; k < alpha.size(); ++k)
      finite = finite && std::isfinite(alpha[k]) && std::isfinite(bias[k]);
    p.nanToZero = (p.hasZ && !(zScale > 0.f)) || !finite;
    release();
    EI_RETURN_IF_ERROR(uploadWeights(packed.data(), packed.size(), &dW_));
    EI_RETURN_IF_ERROR(uploadWeights(alpha.data(), alpha.size() * sizeof(float), &dAlpha_));
    EI_RETURN_IF_ERROR(uploadWeights(bias.data(), bias.size() * sizeof(float), &dBias_));
    plan_ = p;
    hasBias_ = hasBias;
    if (folded_) return initializeFolded(layer);
    if (chained_) return initializeChained(layer);
    return Status::Ok();
  }

  Status enqueue(const builder::LaunchArgs& args) override {
    if (!dW_ || (folded_ && !fold_) || (chained_ && !chain_))
      return Status(ErrorCode::kInvalidArgument, id_ + ": enqueue before initialize");
    EI_RETURN_IF_ERROR(detail::checkConvLaunch(args, plan_.hasZ, id_));
    if (chained_ && (args.outputs.size() < 2 || !args.outputs[1]))
      return Status(ErrorCode::kInvalidArgument, id_ + ": missing the chained layer's output");
    Int8ConvPlan plan = plan_;  // the L2 hints of this step's reads
    plan.lastX = (args.lastReads & 1u) != 0;
    plan.lastZ = (args.lastReads & (1u << 3)) != 0;
    Int8ConvArgs a;
    a.x = args.inputs[0];
    a.w = dW_.get();
    a.alpha = static_cast<const float*>(dAlpha_.get());
    a.bias = static_cast<const float*>(dBias_.get());
    a.z = plan_.hasZ ? args.inputs[3] : nullptr;
    a.y = args.outputs[0];
    if (folded_) {  // input 3 holds the folded layer's input, not Z
      Int8ConvArgs d;
      d.x = args.inputs[3];
      d.w = fold_->dW_.get();
      d.alpha = static_cast<const float*>(fold_->dAlpha_.get());
      d.bias = static_cast<const float*>(fold_->dBias_.get());
      a.z = nullptr;
      return launchInt8ConvPointwiseFold(plan, a, fold_->plan_, d, args.stream);
    }
    if (chained_) {  // output 1: the chained layer's
      Int8ConvArgs c;
      c.w = chain_->dW_.get();
      c.alpha = static_cast<const float*>(chain_->dAlpha_.get());
      c.bias = static_cast<const float*>(chain_->dBias_.get());
      c.y = args.outputs[1];
      return launchInt8ConvPointwiseChain(plan, a, chain_->plan_, c, args.stream);
    }
    if (const size_t ws = int8ConvWorkspaceBytes(plan_); ws > 0) {
      if (!args.workspace || args.workspaceBytes < ws)
        return Status(ErrorCode::kInvalidArgument,
                      id_ + ": the workspace is missing or smaller than the " + std::to_string(ws) +
                          " bytes of the split-K partial sums");
      a.workspace = args.workspace;
    }
    return launchInt8Conv(plan, a, args.stream);
  }

 private:
  void release() {
    dW_.reset();
    dAlpha_.reset();
    dBias_.reset();
  }

  /// The folded layer's weights, alpha and bias as its own tactic of this kernel would make
  /// them (its output quantized with Z's scale), and the check that both layers fit the kernel.
  Status initializeFolded(const builder::LayerContext& layer) {
    const builder::LayerContext& d = *layer.foldedZ;
    if (d.outputScale(0) != plan_.zScale)
      return Status(ErrorCode::kInvalidArgument,
                    id_ + ": the folded layer's output scale is not the residual's");
    Int8ConvPlan dp;
    bool depthwise = false, hasBias = false;
    std::string why;
    if (!parseLayer(d, &dp, &depthwise, &hasBias, &why))
      return Status(ErrorCode::kUnsupported, id_ + ": folded layer '" + d.node->name + "': " + why);
    dp.kernel = plan_.kernel;
    dp.vec = 16;
    dp.yScale = plan_.zScale;
    dp.exact = false;
    auto t = std::make_unique<Int8ConvTactic>(dp, hasBias);
    EI_RETURN_IF_ERROR(t->initialize(d).withContext(id_ + ": folded layer '" + d.node->name + "'"));
    if (!int8ConvPointwiseFoldFits(plan_, t->plan_, &why))
      return Status(ErrorCode::kUnsupported, id_ + ": " + why);
    fold_ = std::move(t);
    return Status::Ok();
  }

  /// The chained layer's weights, alpha and bias as its own tactic of this kernel would make
  /// them (its input quantized with this layer's output scale), and the check that both layers
  /// fit the kernel.
  Status initializeChained(const builder::LayerContext& layer) {
    const builder::LayerContext& c = *layer.chained;
    if (c.inputScale(0) != plan_.yScale)
      return Status(ErrorCode::kInvalidArgument,
                    id_ + ": the chained layer's input scale is not the layer's output scale");
    if (layer.outputShapes.size() != layer.node->outputs.size() + 1 || c.outputShapes.empty() ||
        !(layer.outputShapes.back() == c.outputShapes[0]))
      return Status(ErrorCode::kInvalidArgument,
                    id_ + ": the layer's last output is not the chained layer's output");
    Int8ConvPlan cp;
    bool depthwise = false, hasBias = false;
    std::string why;
    if (!parseLayer(c, &cp, &depthwise, &hasBias, &why))
      return Status(ErrorCode::kUnsupported,
                    id_ + ": chained layer '" + c.node->name + "': " + why);
    cp.kernel = plan_.kernel;
    cp.vec = 16;
    cp.yScale = c.outputScale(0);
    cp.exact = false;
    auto t = std::make_unique<Int8ConvTactic>(cp, hasBias);
    EI_RETURN_IF_ERROR(
        t->initialize(c).withContext(id_ + ": chained layer '" + c.node->name + "'"));
    if (!int8ConvPointwiseChainFits(plan_, t->plan_, &why))
      return Status(ErrorCode::kUnsupported, id_ + ": " + why);
    chain_ = std::move(t);
    return Status::Ok();
  }

  std::string id_;
  Int8ConvPlan plan_;
  bool hasBias_ = false;
  bool folded_ = false;
  bool chained_ = false;
  std::unique_ptr<Int8ConvTactic> chain_;      // the chained layer's (chained_)
  std::unique_ptr<Int8ConvTactic> fold_;       // the folded layer's (folded_)
  std::shared_ptr<void> dW_, dAlpha_, dBias_;  // device_weights.h: shared with equal uploads
};

/// A plan's lean-epilogue flags as initialize() will set them (fast rounding): for the checks
/// made before the weights are seen (int8ConvPointwiseFoldFits).
Int8ConvPlan withFastEpilogue(Int8ConvPlan p, float yScale, float zScale) {
  p.yScale = yScale;
  p.zScale = zScale;
  p.exact = false;
  p.prescaled =
      yScale > 0.f && (p.act == DeviceActivation::kNone || p.act == DeviceActivation::kRelu ||
                       p.act == DeviceActivation::kLeakyRelu);
  p.nanToZero = p.hasZ && !(zScale > 0.f);
  return p;
}

/// The ".fold" candidates of a layer whose residual's producer is folded into it
/// (LayerContext::foldedZ): the pointwise kernels that run both layers.
std::vector<std::unique_ptr<builder::Tactic>> foldedCandidates(const builder::LayerContext& layer,
                                                               std::string* why) {
  std::vector<std::unique_ptr<builder::Tactic>> out;
  Int8ConvPlan plan, dp;
  bool depthwise = false, hasBias = false, dDepthwise = false, dHasBias = false;
  if (!parseLayer(layer, &plan, &depthwise, &hasBias, why)) return out;
  if (!parseLayer(*layer.foldedZ, &dp, &dDepthwise, &dHasBias, why)) {
    *why = "folded layer: " + *why;
    return out;
  }
  if (layer.int8BitExact) {
    *why = "a folded residual is computed in the fast rounding only";
    return out;
  }
  const float ys = layer.outputScale(0), zs = layer.inputScale(3);
  if (depthwise || dDepthwise || !plan.hasZ || !positiveScale(ys) || !positiveScale(zs) ||
      layer.foldedZ->outputScale(0) != zs) {
    *why =
        "a folded residual needs a dense layer with int8 output and residual, whose residual "
        "is the folded layer's int8 output";
    return out;
  }
  if (detail::deviceCapability() < 80) {
    *why = "the pointwise kernels use mma.sync s8 (sm_80 and newer)";
    return out;
  }
  dp = withFastEpilogue(dp, zs, 0.f);
  for (Int8ConvKernel k :
       {Int8ConvKernel::kPw128x64, Int8ConvKernel::kPw128x128, Int8ConvKernel::kPw64x256}) {
    if ((k == Int8ConvKernel::kPw128x128 && plan.K <= 64) ||
        (k == Int8ConvKernel::kPw64x256 && plan.K <= 128))
      continue;
    Int8ConvPlan p = withFastEpilogue(plan, ys, zs);
    p.kernel = k;
    p.vec = 16;
    dp.kernel = k;
    if (!int8ConvPointwiseFoldFits(p, dp, why)) continue;
    out.push_back(std::make_unique<Int8ConvTactic>(p, hasBias, true));
  }
  if (!out.empty()) why->clear();
  return out;
}

/// The ".chain" candidates of a layer with a chained layer (LayerContext::chained): the
/// pointwise kernels that run both layers.
std::vector<std::unique_ptr<builder::Tactic>> chainedCandidates(const builder::LayerContext& layer,
                                                                std::string* why) {
  std::vector<std::unique_ptr<builder::Tactic>> out;
  Int8ConvPlan plan, cp;
  bool depthwise = false, hasBias = false, cDepthwise = false, cHasBias = false;
  if (!parseLayer(layer, &plan, &depthwise, &hasBias, why)) return out;
  const builder::LayerContext& c = *layer.chained;
  if (!parseLayer(c, &cp, &cDepthwise, &cHasBias, why)) {
    *why = "chained layer: " + *why;
    return out;
  }
  if (layer.int8BitExact || c.int8BitExact) {
    *why = "a chained layer runs in the fast rounding only";
    return out;
  }
  if (layer.foldedZ) {
    *why = "a chained layer after a folded residual is not built";
    return out;
  }
  const float ys = layer.outputScale(0), zs = plan.hasZ ? layer.inputScale(3) : 0.f;
  const float cy = c.outputScale(0);
  if (depthwise || cDepthwise || !positiveScale(ys) || !positiveScale(cy) ||
      c.inputScale(0) != ys || (plan.hasZ && !positiveScale(zs)) ||
      layer.outputShapes.size() != layer.node->outputs.size() + 1) {
    *why =
        "a chained layer needs two dense layers with int8 outputs (and residual), the second "
        "reading the first's int8 output, whose output is the first's last output";
    return out;
  }
  if (detail::deviceCapability() < 80) {
    *why = "the pointwise kernels use mma.sync s8 (sm_80 and newer)";
    return out;
  }
  cp = withFastEpilogue(cp, cy, 0.f);
  for (Int8ConvKernel k : {Int8ConvKernel::kPw128x128, Int8ConvKernel::kPw64x256}) {
    Int8ConvPlan p = withFastEpilogue(plan, ys, zs);
    p.kernel = k;
    p.vec = 16;
    cp.kernel = k;
    if (!int8ConvPointwiseChainFits(p, cp, why)) continue;
    out.push_back(std::make_unique<Int8ConvTactic>(p, hasBias, false, true));
  }
  if (!out.empty()) why->clear();
  return out;
}

}  // namespace

size_t int8ConvWorkspaceBytes(const Int8ConvPlan& p) {
  if (p.splitK <= 1 || !isInt8ConvMmaKernel(p.kernel) || p.N <= 0 || p.P <= 0 || p.Q <= 0 ||
      p.K <= 0)
    return 0;
  const Int8ConvTile t = int8ConvTmaTile(p.kernel);
  const int64_t cols = (int64_t{p.K} + t.bn - 1) / t.bn * t.bn;  // whole tiles: no edge checks
  return static_cast<size_t>(int64_t{p.splitK} * p.N * p.P * p.Q * cols) * sizeof(int32_t);
}

bool int8ConvManyTiles(const Int8ConvPlan& p, int bn, int sms, int bm) {
  const int64_t rows = int64_t{p.N} * p.P * p.Q;
  if (bm <= 0 || bn <= 0) return false;
  const int64_t tiles = (rows + bm - 1) / bm * ((int64_t{p.K} + bn - 1) / bn);
  return sms > 0 && 2 * tiles >= sms;
}

std::vector<int> int8ConvSplits(const Int8ConvPlan& p, int sms) {
  std::vector<int> out;
  const Int8ConvTile t = int8ConvTmaTile(p.kernel);
  if (t.bm == 0 || t.bk == 0 || p.kernel == Int8ConvKernel::kTma128x256 ||
      isInt8ConvTmaRegKernel(p.kernel) || sms <= 0 || p.gemmKPad <= 0)
    return out;
  const int64_t rows = int64_t{p.N} * p.P * p.Q;
  const int64_t tiles = (rows + t.bm - 1) / t.bm * ((int64_t{p.K} + t.bn - 1) / t.bn);
  const int64_t steps = p.gemmKPad / t.bk;
  if (tiles >= sms) return out;
  for (int s : {16, 8, 4, 2})
    if (tiles * s <= 2 * int64_t{sms} && s <= steps && out.size() < 2) out.push_back(s);
  return out;
}

bool int8ConvBuildHasWgmma() {
#ifdef EDGEINFER_HAVE_SM90A
  return true;
#else
  return false;
#endif
}

bool int8ConvWgmmaAvailable() {
  return int8ConvBuildHasWgmma() && detail::deviceCapability() == 90;
}

std::vector<std::unique_ptr<builder::Tactic>> Int8ConvProvider::candidates(
    const builder::LayerContext& layer, Precision precision) {
  std::vector<std::unique_ptr<builder::Tactic>> out;
  if (precision != Precision::kInt8) {
    lastReason_ = "the cuda-i8 provider offers INT8 tactics only";
    return out;
  }
  if (layer.chained) return chainedCandidates(layer, &lastReason_);
  if (layer.foldedZ) return foldedCandidates(layer, &lastReason_);
  Int8ConvPlan plan;
  bool depthwise = false, hasBias = false;
  if (!parseLayer(layer, &plan, &depthwise, &hasBias, &lastReason_)) return out;
  const int cc = detail::deviceCapability();
  if (cc == 0) {
    lastReason_ = "no CUDA device";
    return out;
  }
  if (!depthwise && cc < 80) {
    lastReason_ = "dense INT8 kernels use mma.sync s8 (sm_80 and newer)";
    return out;
  }
  lastReason_.clear();
  std::vector<std::pair<Int8ConvKernel, int32_t>> kernels;
  if (depthwise) {
    kernels.emplace_back(Int8ConvKernel::kDepthwise, plan.C % 4 == 0 ? 4 : 1);
  } else {
    const int32_t vec = plan.C % 16 == 0 ? 16 : 4;
    kernels.emplace_back(Int8ConvKernel::kMma128x128, vec);
    kernels.emplace_back(Int8ConvKernel::kMma128x64, vec);
    kernels.emplace_back(Int8ConvKernel::kMma64x128, vec);
    if (vec == 16 && int8ConvPointwiseFits(plan)) {  // 1x1: persistent, epilogue from registers
      kernels.emplace_back(Int8ConvKernel::kPw128x64, 16);
      if (plan.K > 64) kernels.emplace_back(Int8ConvKernel::kPw128x128, 16);
      if (plan.K > 64) kernels.emplace_back(Int8ConvKernel::kPw64x128, 16);
      if (plan.K > 128) kernels.emplace_back(Int8ConvKernel::kPw64x256, 16);
    }
    if (vec == 16 && int8ConvHaloFits(plan) &&  // 3x3 of few channels: each input copied once
        int8ConvHaloSharedBytes(plan) <= detail::deviceSharedMemoryOptin())
      kernels.emplace_back(Int8ConvKernel::kHalo128x64, 16);
    if (vec == 16 && int8ConvWgmmaAvailable() && int8ConvHaloFits(plan) && plan.C % 64 == 0 &&
        int8ConvHaloWgSharedBytes(plan) <= detail::deviceSharedMemoryOptin())
      kernels.emplace_back(Int8ConvKernel::kHaloWg128x64, 16);
    if (vec == 16 && int8ConvWgmmaAvailable()) {
      // wgmma fed by TMA where the layer fits it (C % 64 == 0; C % 128 == 0 for 128-byte K
      // steps), by cp.async elsewhere: on every ResNet-50 layer the TMA kernel of a tile shape
      // was faster than the cp.async one (docs/performance.md), so the builder times one of
      // them.
      const bool tma = int8ConvTmaAvailable();
      const bool tma64 = tma && int8ConvTmaFits(plan, 64);
      const bool tma128 = tma && int8ConvTmaFits(plan, 128);
      kernels.emplace_back(tma64 ? Int8ConvKernel::kTma128x128 : Int8ConvKernel::kWgmma128x128, 16);
      if (plan.K > 128)
        kernels.emplace_back(tma64 ? Int8ConvKernel::kTma128x256 : Int8ConvKernel::kWgmma128x256,
                             16);
      kernels.emplace_back(tma64 ? Int8ConvKernel::kTma128x64 : Int8ConvKernel::kWgmma128x64, 16);
      kernels.emplace_back(tma64 ? Int8ConvKernel::kTma64x128 : Int8ConvKernel::kWgmma64x128, 16);
      // The persistent register-epilogue forms (whole groups of 32 output channels).
      // The one-block-an-SM forms (tmard, tmap) where the layer has at least half as many
      // tiles as the device has multiprocessors: with fewer, a block has one tile and nothing
      // to fetch ahead, and its shared memory keeps the neighbouring layers' blocks (programmatic
      // dependent launch) off the multiprocessor (batch 1: slower in the whole engine).
      const bool manyTiles = int8ConvManyTiles(plan, 64, detail::deviceSmCount());
      if (tma64 && plan.K % 32 == 0) {
        kernels.emplace_back(Int8ConvKernel::kTmaR128x128, 16);
        kernels.emplace_back(Int8ConvKernel::kTmaR128x64, 16);
        if (manyTiles) kernels.emplace_back(Int8ConvKernel::kTmaP128x64, 16);
      }
      if (tma128 && plan.K % 32 == 0) {
        kernels.emplace_back(Int8ConvKernel::kTmaR128x128k128, 16);
        if (int8ConvManyTiles(plan, 128, detail::deviceSmCount())) {
          kernels.emplace_back(Int8ConvKernel::kTmaRD128x128k128, 16);
          kernels.emplace_back(Int8ConvKernel::kTmaP128x128k128, 16);
        }
        if (plan.K > 128 && int8ConvManyTiles(plan, 256, detail::deviceSmCount()))
          kernels.emplace_back(Int8ConvKernel::kTmaRD128x256k128, 16);
        if (int8ConvManyTiles(plan, 128, detail::deviceSmCount(), 192))
          kernels.emplace_back(Int8ConvKernel::kTmaRD192x128k128, 16);
      }
      if (tma128) {
        kernels.emplace_back(Int8ConvKernel::kTma128x128k128, 16);
      } else if (plan.gemmK > 64) {  // one step of 128 bytes would be half zeros
        kernels.emplace_back(Int8ConvKernel::kWgmma128x128k128, 16);
        kernels.emplace_back(Int8ConvKernel::kWgmma128x64k128, 16);
      }
    }
  }
  std::vector<float> yScales{0.f};
  if (positiveScale(layer.outputScale(0))) yScales.push_back(layer.outputScale(0));
  std::vector<float> zScales{0.f};
  if (plan.hasZ && positiveScale(layer.inputScale(3))) zScales.push_back(layer.inputScale(3));
  // (kernel, vec, split-K): the TMA kernels also split K where the layer has few tiles, and
  // the mma.sync ones where no TMA kernel runs the layer (Orin; layers the TMA cannot describe):
  // beside the TMA kernels they would only add candidates to time.
  std::vector<std::tuple<Int8ConvKernel, int32_t, int32_t>> variants;
  const int sms = detail::deviceSmCount();
  const bool anyTma = std::any_of(kernels.begin(), kernels.end(),
                                  [](const auto& k) { return isInt8ConvTmaKernel(k.first); });
  for (const auto& [kernel, vec] : kernels) {
    variants.emplace_back(kernel, vec, 1);
    if (isInt8ConvMmaKernel(kernel) && anyTma) continue;
    Int8ConvPlan p = plan;
    p.kernel = kernel;
    for (int s : int8ConvSplits(p, sms))
      if (!isInt8ConvTmaKernel(kernel) || int8ConvTmaSplitRuns(kernel, s))
        variants.emplace_back(kernel, vec, s);
  }
  for (const auto& [kernel, vec, split] : variants)
    for (float ys : yScales)
      for (float zs : zScales) {
        Int8ConvPlan p = plan;
        p.kernel = kernel;
        p.vec = vec;
        p.splitK = split;
        p.yScale = ys;
        p.zScale = zs;
        p.exact = layer.int8BitExact;
        p.hasZ = plan.hasZ;
        if (isInt8ConvPointwiseKernel(kernel) &&
            int8ConvPointwiseSharedBytes(p) > detail::deviceSharedMemoryOptin())
          continue;  // this residual format's rows do not fit (Orin: fp16 rows of C = 256)
        out.push_back(std::make_unique<Int8ConvTactic>(p, hasBias));
      }
  return out;
}

std::unique_ptr<builder::Tactic> Int8ConvProvider::find(const builder::LayerContext& layer,
                                                        Precision precision,
                                                        const std::string& id) {
  builder::LayerContext l = layer;
  const auto endsWith = [&](const std::string& tail) {
    return id.size() > tail.size() && id.compare(id.size() - tail.size(), tail.size(), tail) == 0;
  };
  l.int8BitExact = !(endsWith(".f") || endsWith(".f.chain"));
  auto cands = candidates(l, precision);
  for (auto& t : cands)
    if (t->id() == id) return std::move(t);
  // A split mma.sync tactic the candidates do not list here (an engine built on a device of
  // another multiprocessor count, or where TMA kernels ran the layer): the split does not depend
  // on the device, so any 2 to 16 ways of at least one K step each is found.
  std::smatch m;
  static const std::regex kSplitMma("^(cuda-i8\\.mma[0-9]+x[0-9]+v[0-9]+)s([0-9]+)(\\..*)$");
  if (!std::regex_match(id, m, kSplitMma)) return nullptr;
  const std::string base = m[1].str() + m[3].str();
  const int split = std::atoi(m[2].str().c_str());
  for (auto& t : cands) {
    if (t->id() != base) continue;
    Int8ConvPlan p = static_cast<const Int8ConvTactic&>(*t).plan();
    p.splitK = split;
    if (split < 2 || split > kInt8ConvMaxSplitK || split > p.gemmKPad / 64) return nullptr;
    return std::make_unique<Int8ConvTactic>(p, static_cast<const Int8ConvTactic&>(*t).hasBias());
  }
  return nullptr;
}

}  // namespace edgeinfer::cuda
