// The `cuda-dw` tactic provider (depthwise_conv.h): which layers it runs, and the tactics that
// prepare the weights (initialize) and launch the kernels of depthwise_conv.cu (enqueue).
#include "kernels/cuda/depthwise_conv.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/half.h"
#include "kernels/cuda/conv2d_layer.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/device_weights.h"

namespace edgeinfer::cuda {
namespace {

using detail::fail;

using builder::Layout;
using builder::TensorFormat;

/// Reads the layer into `p` (format fields left unset); false (with `why`) when this provider
/// cannot run it.
bool parseLayer(const builder::LayerContext& layer, DepthwisePlan* p, bool* hasBias, bool* hasZ,
                std::string* why) {
  Conv2dLayer c;
  if (!parseConv2dLayer(layer, 30, &c, why)) return false;
  if (!detail::isFloatStorage(layer.inputTypes[0]) || !detail::isFloatStorage(layer.outputTypes[0]))
    return fail(why, "input and output must be float32 or float16");
  if (c.group != c.C) return fail(why, "not depthwise: group != C_in");
  if (c.weightsPerGroup != 1 || c.K % c.C != 0)
    return fail(why, "inconsistent depthwise channel counts");
  if (c.hasZ && !detail::isFloatStorage(layer.inputTypes[3]))
    return fail(why, "the residual Z must be a float tensor of the output's shape");
  c.copyTo(p);
  p->M = c.K / c.C;
  *hasBias = c.hasBias;
  *hasZ = c.hasZ;
  return true;
}

class DepthwiseTactic final : public builder::Tactic {
 public:
  DepthwiseTactic(std::string variant, const DepthwisePlan& plan, bool hasBias, bool hasZ)
      : plan_(plan), hasBias_(hasBias), hasZ_(hasZ) {
    id_ = "cuda-dw." + variant + "." + (plan.fp16 ? "fp16" : "fp32") + "." +
          (plan.nhwc ? "nhwc" : "nchw");
  }

  std::string id() const override { return id_; }
  TensorFormat inputFormat(size_t index) const override {
    if (index == 1 || index == 2) return TensorFormat{DataType::kFloat32, Layout::kLinear};
    return format();
  }
  TensorFormat outputFormat(size_t) const override { return format(); }
  bool consumesInput(size_t index) const override { return index == 1 || index == 2; }

  Status initialize(const builder::LayerContext& layer) override {
    DepthwisePlan p;
    bool hasBias = false, hasZ = false;
    std::string why;
    if (!parseLayer(layer, &p, &hasBias, &hasZ, &why))
      return Status(ErrorCode::kUnsupported, id_ + ": " + why);
    p.kernelSize = plan_.kernelSize;
    p.nhwc = plan_.nhwc;
    p.fp16 = plan_.fp16;
    if (p.kernelSize != 0 && (p.R != p.kernelSize || p.S != p.kernelSize))
      return Status(ErrorCode::kUnsupported, id_ + ": kernel size changed");
    const Tensor* w = layer.constantInput(1);
    const int64_t K = p.K, RS = int64_t{p.R} * p.S;
    // Weights [K, 1, R, S] -> [K][R][S] (NCHW) or [R][S][K] (NHWC), in the storage type.
    std::vector<uint8_t> hw(static_cast<size_t>(K * RS) * elemSize());
    for (int64_t i = 0; i < K * RS; ++i) {
      const int64_t k = i / RS, rs = i % RS;
      store(hw.data(), p.nhwc ? rs * K + k : i, static_cast<float>(w->getAsDouble(i)));
    }
    std::vector<uint8_t> hb;
    if (hasBias) {
      const Tensor* b = layer.constantInput(2);
      hb.resize(static_cast<size_t>(K) * elemSize());
      for (int64_t k = 0; k < K; ++k) store(hb.data(), k, static_cast<float>(b->getAsDouble(k)));
    }
    dB_.reset();
    EI_RETURN_IF_ERROR(uploadWeights(hw.data(), hw.size(), &dW_));
    if (hasBias) EI_RETURN_IF_ERROR(uploadWeights(hb.data(), hb.size(), &dB_));
    plan_ = p;
    hasBias_ = hasBias;
    hasZ_ = hasZ;
    maxBlocks_ = detail::maxBlocksForDevice();
    return Status::Ok();
  }

  Status enqueue(const builder::LaunchArgs& args) override {
    if (!dW_) return Status(ErrorCode::kInvalidArgument, id_ + ": enqueue before initialize");
    EI_RETURN_IF_ERROR(detail::checkConvLaunch(args, hasZ_, id_));
    DepthwiseArgs a;
    a.x = args.inputs[0];
    a.w = dW_.get();
    a.bias = hasBias_ ? dB_.get() : nullptr;
    a.z = hasZ_ ? args.inputs[3] : nullptr;
    a.y = args.outputs[0];
    return launchDepthwiseConv(plan_, a, maxBlocks_, args.stream);
  }

 private:
  TensorFormat format() const {
    return {plan_.fp16 ? DataType::kFloat16 : DataType::kFloat32,
            plan_.nhwc ? Layout::kNHWC : Layout::kNCHW};
  }
  size_t elemSize() const { return plan_.fp16 ? 2 : 4; }
  void store(uint8_t* base, int64_t j, float v) const {
    if (plan_.fp16)
      reinterpret_cast<uint16_t*>(base)[j] = floatToHalf(v);
    else
      reinterpret_cast<float*>(base)[j] = v;
  }

  std::string id_;
  DepthwisePlan plan_;
  bool hasBias_ = false, hasZ_ = false;
  std::shared_ptr<void> dW_, dB_;  // device_weights.h: shared with equal uploads
  int maxBlocks_ = 2048;
};

}  // namespace

std::vector<std::unique_ptr<builder::Tactic>> DepthwiseConvProvider::candidates(
    const builder::LayerContext& layer, Precision precision) {
  std::vector<std::unique_ptr<builder::Tactic>> out;
  if (precision == Precision::kInt8) {
    lastReason_ = "int8 precision is not offered by the cuda-dw provider";
    return out;
  }
  DepthwisePlan plan;
  bool hasBias = false, hasZ = false;
  if (!parseLayer(layer, &plan, &hasBias, &hasZ, &lastReason_)) return out;
  lastReason_.clear();
  std::vector<std::pair<std::string, int32_t>> variants;
  if (plan.R == 3 && plan.S == 3) variants.emplace_back("k3", 3);
  if (plan.R == 5 && plan.S == 5) variants.emplace_back("k5", 5);
  variants.emplace_back("generic", 0);
  std::vector<bool> halfs;
  if (precision == Precision::kFp16) halfs.push_back(true);
  halfs.push_back(false);
  for (const auto& [variant, size] : variants)
    for (bool fp16 : halfs)
      for (bool nhwc : {false, true}) {
        DepthwisePlan p = plan;
        p.kernelSize = size;
        p.fp16 = fp16;
        p.nhwc = nhwc;
        out.push_back(std::make_unique<DepthwiseTactic>(variant, p, hasBias, hasZ));
      }
  return out;
}

}  // namespace edgeinfer::cuda
