// The `cuda-stem` tactic provider (stem_conv.h): which layers it runs, and the tactics that
// prepare the weights (initialize) and launch the kernel of stem_conv.cu (enqueue).
#include "kernels/cuda/stem_conv.h"

#include <cuda_runtime.h>

#include <cmath>
#include <utility>

#include "core/half.h"
#include "kernels/cuda/conv2d_layer.h"
#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/device_weights.h"

namespace edgeinfer::cuda {
namespace {

using builder::Layout;
using builder::TensorFormat;
using detail::fail;

/// The layer's geometry into `p` (tile and input format left unset); false with `why` when
/// the kernel cannot run it.
bool parseLayer(const builder::LayerContext& layer, StemConvPlan* p, bool* hasBias,
                std::string* why) {
  Conv2dLayer c;
  if (!parseConv2dLayer(layer, 31, &c, why)) return false;
  if (!detail::isFloatStorage(layer.inputTypes[0]) || !detail::isFloatStorage(layer.outputTypes[0]))
    return fail(why, "input and output must be float32 or float16");
  if (c.group != 1 || c.weightsPerGroup != c.C)
    return fail(why, "only dense convolutions (group 1) are supported");
  if (c.hasZ && !detail::isFloatStorage(layer.inputTypes[3]))
    return fail(why, "the residual Z must be a float tensor of the output's shape");
  if (c.C > kStemMaxInputChannels)
    return fail(why, "C_in = " + std::to_string(c.C) + " is over " +
                         std::to_string(kStemMaxInputChannels) + " (not a stem: cuDNN's business)");
  if (int64_t{c.R} * c.S * c.C > kStemMaxGemmK)
    return fail(why, "R * S * C_in = " + std::to_string(int64_t{c.R} * c.S * c.C) + " is over " +
                         std::to_string(kStemMaxGemmK));
  c.copyTo(p);
  p->hasZ = c.hasZ;
  p->gemmK = stemGemmK(*p);
  p->gemmKPad = (p->gemmK + 15) / 16 * 16;
  if (p->gemmKPad > kStemMaxGemmK)
    return fail(why, "R * S * C_in = " + std::to_string(int64_t{c.R} * c.S * c.C) +
                         " products per output (" + std::to_string(p->gemmKPad) +
                         " with padding) is over " + std::to_string(kStemMaxGemmK));
  p->blockN = p->K <= 32 ? 32 : 64;
  *hasBias = c.hasBias;
  return true;
}

const char* inputName(StemInput in) {
  switch (in) {
    case StemInput::kHalfNchw:
      return "f16nchw";
    case StemInput::kFloatNchw:
      return "f32nchw";
    default:
      return "f16nhwc";
  }
}

class StemConvTactic final : public builder::Tactic {
 public:
  StemConvTactic(const StemConvPlan& plan, bool hasBias) : plan_(plan), hasBias_(hasBias) {
    // "n32": blocks of 32 output channels where the layer has more (twice the blocks, each
    // with half the products and the epilogue: at batch 1 a block's instruction count is the
    // kernel's time).
    id_ = std::string("cuda-stem.m") + std::to_string(plan.warps * 16 * plan.rowsPerWarp) +
          (plan.rowsPerWarp == 1 ? "w" + std::to_string(plan.warps) : "") +
          (plan.blockN == 32 && plan.K > 32 ? "n32" : "") + "." + inputName(plan.input) +
          (plan.int8Out ? ".i8" : "");
  }

  std::string id() const override { return id_; }
  TensorFormat inputFormat(size_t index) const override {
    if (index == 1 || index == 2) return TensorFormat{DataType::kFloat32, Layout::kLinear};
    if (index == 3) return outputFormat(0);
    switch (plan_.input) {
      case StemInput::kHalfNchw:
        return {DataType::kFloat16, Layout::kNCHW};
      case StemInput::kFloatNchw:
        return {DataType::kFloat32, Layout::kNCHW};
      default:
        return {DataType::kFloat16, Layout::kNHWC};
    }
  }
  TensorFormat outputFormat(size_t) const override {
    return {plan_.int8Out ? DataType::kInt8 : DataType::kFloat16, Layout::kNHWC};
  }
  bool consumesInput(size_t index) const override { return index == 1 || index == 2; }

  Status initialize(const builder::LayerContext& layer) override {
    StemConvPlan p;
    bool hasBias = false;
    std::string why;
    if (!parseLayer(layer, &p, &hasBias, &why))
      return Status(ErrorCode::kUnsupported, id_ + ": " + why);
    if (p.hasZ != plan_.hasZ) return Status(ErrorCode::kUnsupported, id_ + ": the layer changed");
    p.warps = plan_.warps;
    p.rowsPerWarp = plan_.rowsPerWarp;
    p.input = plan_.input;
    if (plan_.blockN == 32) p.blockN = 32;
    if (plan_.int8Out) {
      p.int8Out = true;
      p.yScale = layer.outputScale(0);
      if (!(p.yScale > 0.f) || !std::isfinite(p.yScale))
        return Status(ErrorCode::kUnsupported, id_ + ": the output has no int8 scale");
    }
    // Weights [K][C][R][S] -> rows of gemmKPad half values in stemTap()'s order, as many
    // rows as the channel blocks cover (zeros past K and at padding positions); bias likewise,
    // float.
    const int64_t rows = (int64_t{p.K} + p.blockN - 1) / p.blockN * p.blockN;
    const Tensor* w = layer.constantInput(1);
    std::vector<uint16_t> hw(static_cast<size_t>(rows * p.gemmKPad), floatToHalf(0.f));
    for (int32_t k = 0; k < p.gemmK; ++k) {
      int32_t r = 0, s = 0, c = 0;
      if (!stemTap(p, k, &r, &s, &c)) continue;
      for (int64_t n = 0; n < p.K; ++n)
        hw[static_cast<size_t>(n * p.gemmKPad + k)] =
            floatToHalf(static_cast<float>(w->getAsDouble(((n * p.C + c) * p.R + r) * p.S + s)));
    }
    const std::vector<int32_t> offsets = stemPairOffsets(p);
    std::vector<float> hb(static_cast<size_t>(rows), 0.f);
    if (hasBias) {
      const Tensor* b = layer.constantInput(2);
      for (int64_t k = 0; k < p.K; ++k)
        hb[static_cast<size_t>(k)] = static_cast<float>(b->getAsDouble(k));
    }
    auto blocks = prepareStemConv(p);
    if (!blocks.ok()) return blocks.status().withContext(id_);
    dW_.reset();
    dB_.reset();
    dOffsets_.reset();
    EI_RETURN_IF_ERROR(uploadWeights(hw.data(), hw.size() * sizeof(uint16_t), &dW_));
    EI_RETURN_IF_ERROR(uploadWeights(offsets.data(), offsets.size() * sizeof(int32_t), &dOffsets_));
    EI_RETURN_IF_ERROR(uploadWeights(hb.data(), hb.size() * sizeof(float), &dB_));
    plan_ = p;
    hasBias_ = hasBias;
    maxBlocks_ = *blocks;
    return Status::Ok();
  }

  Status enqueue(const builder::LaunchArgs& args) override {
    if (!dW_) return Status(ErrorCode::kInvalidArgument, id_ + ": enqueue before initialize");
    EI_RETURN_IF_ERROR(detail::checkConvLaunch(args, plan_.hasZ, id_));
    StemConvArgs a;
    a.x = args.inputs[0];
    a.w = dW_.get();
    a.offsets = static_cast<const int32_t*>(dOffsets_.get());
    a.bias = static_cast<const float*>(dB_.get());
    a.z = plan_.hasZ ? args.inputs[3] : nullptr;
    a.y = args.outputs[0];
    StemConvPlan plan = plan_;
    plan.lastX = (args.lastReads & 1u) != 0;
    return launchStemConv(plan, a, maxBlocks_, args.stream);
  }

 private:
  std::string id_;
  StemConvPlan plan_;
  bool hasBias_ = false;
  std::shared_ptr<void> dW_, dB_, dOffsets_;  // device_weights.h: shared with equal uploads
  int maxBlocks_ = 1;
};

}  // namespace

std::vector<std::unique_ptr<builder::Tactic>> StemConvProvider::candidates(
    const builder::LayerContext& layer, Precision precision) {
  std::vector<std::unique_ptr<builder::Tactic>> out;
  if (precision != Precision::kFp16 && precision != Precision::kInt8) {
    lastReason_ =
        "the cuda-stem provider offers FP16 and INT8 (FP16 arithmetic, int8 output) "
        "tactics only";
    return out;
  }
  StemConvPlan plan;
  bool hasBias = false;
  if (!parseLayer(layer, &plan, &hasBias, &lastReason_)) return out;
  if (precision == Precision::kInt8) {
    // The INT8 tactics write int8 for INT8 readers; otherwise the FP16 ones (which the builder
    // adds when no INT8 tactic runs a layer) are the layer's.
    const float ys = layer.outputScale(0);
    if (!(ys > 0.f) || !std::isfinite(ys)) {
      lastReason_ = "INT8: the output has no int8 scale (its readers do not read int8)";
      return out;
    }
    if (!std::isfinite(1.f / ys)) {
      lastReason_ = "INT8: the output's int8 scale " + std::to_string(ys) +
                    " is too small (its reciprocal overflows)";
      return out;
    }
    if (plan.hasZ) {
      lastReason_ = "INT8: no int8 output with a residual Z";
      return out;
    }
    if (layer.int8BitExact) {  // the layer stays FP16 (an FP16 tactic and a quantize reformat)
      lastReason_ =
          "INT8: bit-exact builds match the CPU's INT8 emulation, which FP16 "
          "arithmetic cannot";
      return out;
    }
    plan.int8Out = true;
    plan.yScale = ys;
  }
  std::vector<std::unique_ptr<builder::Tactic>> offered;
  std::vector<int32_t> blockNs{plan.blockN};  // 64, and 32 ("n32") where C_out is over 32
  if (plan.blockN != 32) blockNs.push_back(32);
  for (int32_t blockN : blockNs) {
    // (warps, rows a warp): m128, m64, m128w8
    for (const auto& [warps, rows] : {std::pair{4, 2}, std::pair{2, 2}, std::pair{8, 1}}) {
      StemConvPlan p = plan;
      p.warps = warps;
      p.rowsPerWarp = rows;
      p.blockN = blockN;
      if (stemPatchBytes(p) > kStemMaxPatchBytes) continue;
      for (StemInput in : {StemInput::kFloatNchw, StemInput::kHalfNhwc, StemInput::kHalfNchw}) {
        p.input = in;
        offered.push_back(std::make_unique<StemConvTactic>(p, hasBias));
      }
    }
  }
  if (offered.empty()) {
    lastReason_ = "the input patch of a tile is over " + std::to_string(kStemMaxPatchBytes) +
                  " bytes (large strides or dilations)";
    return out;
  }
  const int cc = detail::deviceCapability();
  if (cc == 0) {
    lastReason_ = "no CUDA device";
    return out;
  }
  if (cc < 80) {
    lastReason_ = "the kernel uses mma.sync m16n8k16 f16 (sm_80 and newer)";
    return out;
  }
  lastReason_.clear();
  return offered;
}

}  // namespace edgeinfer::cuda
