// The `cuda-dw` tactic provider (depthwise_conv.h): which layers it runs, and the tactics that
// prepare the weights (initialize) and launch the kernels of depthwise_conv.cu (enqueue).
#include "kernels/cuda/depthwise_conv.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/half.h"
#include "graph/ops/conv_geometry.h"
#include "kernels/cuda/cuda_check.h"

namespace edgeinfer::cuda {
namespace {

using builder::Layout;
using builder::TensorFormat;

/// Every tensor's element count stays below this, so the kernels index in int32 (with room for
/// the grid-stride increment).
constexpr int64_t kMaxElements = int64_t{1} << 30;

bool isFloatType(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16;
}

bool allPositive(const Shape& s) {
  for (size_t i = 0; i < s.rank(); ++i)
    if (s[i] <= 0) return false;
  return true;
}

bool fail(std::string* why, std::string msg) {
  *why = std::move(msg);
  return false;
}

/// Reads the layer into `p` (format fields left unset); false (with `why`) when this provider
/// cannot run it.
bool parseLayer(const builder::LayerContext& layer, DepthwisePlan* p, bool* hasBias, bool* hasZ,
                std::string* why) {
  const graph::Node* node = layer.node;
  if (!node || !layer.graph) return fail(why, "no node");
  const bool fused = node->opType == "FusedConv" && node->domain == graph::kEdgeInferDomain;
  const bool conv = node->opType == "Conv" && node->domain.empty();
  if (!fused && !conv) return fail(why, "not a Conv / FusedConv node");
  if (layer.inputShapes.size() < 2 || layer.inputTypes.size() != layer.inputShapes.size() ||
      layer.outputShapes.size() != 1 || layer.outputTypes.size() != 1)
    return fail(why, "unexpected input/output count");
  const Shape& xs = layer.inputShapes[0];
  const Shape& ys = layer.outputShapes[0];
  if (xs.rank() != 4 || ys.rank() != 4)
    return fail(why, "only 2-D convolutions (4-D tensors) are supported");
  if (!allPositive(xs) || !allPositive(ys)) return fail(why, "shapes must be static");
  if (!isFloatType(layer.inputTypes[0]) || !isFloatType(layer.outputTypes[0]))
    return fail(why, "input and output must be float32 or float16");
  if (xs.numel() >= kMaxElements || ys.numel() >= kMaxElements)
    return fail(why, "tensors of 2^30 elements or more are not supported");
  const int64_t C = xs[1];
  const int64_t group = node->attrs.getInt("group", 1);
  if (group != C) return fail(why, "not depthwise: group != C_in");
  const Tensor* w = layer.constantInput(1);
  if (!w) return fail(why, "the weights are not a constant");
  const Shape& wsh = w->shape();
  if (!isFloatType(w->dtype()) || wsh.rank() != 4 || !allPositive(wsh))
    return fail(why, "the weights must be a static 4-D float tensor");
  const int64_t K = wsh[0];
  if (wsh[1] != 1 || K % C != 0 || ys[1] != K || ys[0] != xs[0])
    return fail(why, "inconsistent depthwise channel counts");
  if (wsh[2] * wsh[3] >= kMaxElements / K) return fail(why, "kernel too large");
  *hasBias = false;
  if (layer.hasInput(2)) {
    const Tensor* b = layer.constantInput(2);
    if (!b) return fail(why, "the bias is not a constant");
    if (!isFloatType(b->dtype()) || b->numel() != K)
      return fail(why, "the bias must be a float tensor of K elements");
    *hasBias = true;
  }
  *hasZ = false;
  if (layer.hasInput(3)) {
    if (!fused) return fail(why, "Conv has no fourth input");
    if (layer.inputShapes.size() < 4 || layer.inputShapes[3] != ys ||
        !isFloatType(layer.inputTypes[3]))
      return fail(why, "the residual Z must be a float tensor of the output's shape");
    *hasZ = true;
  }
  graph::WindowAttrs wa;
  graph::WindowDims wd;
  if (!graph::readWindowAttrs(node->attrs, 2, {wsh[2], wsh[3]}, &wa).ok() ||
      !graph::computeWindowDims(wa, {xs[2], xs[3]}, &wd).ok())
    return fail(why, "invalid window attributes");
  if (wd.out[0] != ys[2] || wd.out[1] != ys[3])
    return fail(why, "output shape disagrees with the window attributes");
  // Window coordinates stay in int32: (out - 1) * stride + dilated extent + pads.
  for (size_t i = 0; i < 2; ++i)
    if ((wd.out[i] - 1) * wa.strides[i] + wa.effectiveKernel(i) + wd.padBegin[i] + wd.padEnd[i] >=
        kMaxElements)
      return fail(why, "window coordinates exceed 2^30");
  p->N = static_cast<int32_t>(xs[0]);
  p->C = static_cast<int32_t>(C);
  p->H = static_cast<int32_t>(xs[2]);
  p->W = static_cast<int32_t>(xs[3]);
  p->K = static_cast<int32_t>(K);
  p->M = static_cast<int32_t>(K / C);
  p->P = static_cast<int32_t>(ys[2]);
  p->Q = static_cast<int32_t>(ys[3]);
  p->R = static_cast<int32_t>(wsh[2]);
  p->S = static_cast<int32_t>(wsh[3]);
  p->strideH = static_cast<int32_t>(wa.strides[0]);
  p->strideW = static_cast<int32_t>(wa.strides[1]);
  p->dilH = static_cast<int32_t>(wa.dilations[0]);
  p->dilW = static_cast<int32_t>(wa.dilations[1]);
  p->padTop = static_cast<int32_t>(wd.padBegin[0]);
  p->padLeft = static_cast<int32_t>(wd.padBegin[1]);
  p->act = DeviceActivation::kNone;
  if (fused && !readFusedActivation(*node, &p->act, &p->alpha, &p->beta, why)) return false;
  return true;
}

/// Grid-size cap for the grid-stride kernels: 16 blocks of 256 threads per multiprocessor.
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

class DepthwiseTactic final : public builder::Tactic {
 public:
  DepthwiseTactic(std::string variant, const DepthwisePlan& plan, bool hasBias, bool hasZ)
      : plan_(plan), hasBias_(hasBias), hasZ_(hasZ) {
    id_ = "cuda-dw." + variant + "." + (plan.fp16 ? "fp16" : "fp32") + "." +
          (plan.nhwc ? "nhwc" : "nchw");
  }
  ~DepthwiseTactic() override { release(); }

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
    release();
    EI_RETURN_IF_ERROR(upload(hw, &dW_));
    if (hasBias) EI_RETURN_IF_ERROR(upload(hb, &dB_));
    plan_ = p;
    hasBias_ = hasBias;
    hasZ_ = hasZ;
    maxBlocks_ = maxBlocksForDevice();
    return Status::Ok();
  }

  Status enqueue(const builder::LaunchArgs& args) override {
    if (!dW_) return Status(ErrorCode::kInvalidArgument, id_ + ": enqueue before initialize");
    if (args.inputs.empty() || !args.inputs[0] || args.outputs.empty() || !args.outputs[0] ||
        (hasZ_ && (args.inputs.size() < 4 || !args.inputs[3])))
      return Status(ErrorCode::kInvalidArgument, id_ + ": missing input or output pointer");
    DepthwiseArgs a;
    a.x = args.inputs[0];
    a.w = dW_;
    a.bias = hasBias_ ? dB_ : nullptr;
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
  static Status upload(const std::vector<uint8_t>& host, void** dev) {
    EI_CUDA_CHECK(cudaMalloc(dev, std::max<size_t>(host.size(), 1)));
    EI_CUDA_CHECK(cudaMemcpy(*dev, host.data(), host.size(), cudaMemcpyHostToDevice));
    return Status::Ok();
  }
  void release() {
    if (dW_) cudaFree(dW_);
    if (dB_) cudaFree(dB_);
    dW_ = dB_ = nullptr;
  }

  std::string id_;
  DepthwisePlan plan_;
  bool hasBias_ = false, hasZ_ = false;
  void* dW_ = nullptr;
  void* dB_ = nullptr;
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
