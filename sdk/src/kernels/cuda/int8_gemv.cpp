// The cuda-i8.gemv provider (int8_gemv.h): which layers it runs, the weights it quantizes
// (initialize) and the kernel it launches (enqueue).
#include "kernels/cuda/int8_gemv.h"

#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/device_weights.h"
#include "kernels/cuda/int8_gemm_layer.h"

namespace edgeinfer::cuda {

using builder::Layout;
using builder::TensorFormat;

namespace {

const char* typeName(GemvType t) {
  return t == GemvType::kInt8 ? "i8" : t == GemvType::kFloat16 ? "f16" : "f32";
}

DataType dataTypeOf(GemvType t) {
  return t == GemvType::kInt8      ? DataType::kInt8
         : t == GemvType::kFloat16 ? DataType::kFloat16
                                   : DataType::kFloat32;
}

/// The layer as this provider runs it; false with `why` otherwise.
bool parseGemvLayer(const builder::LayerContext& layer, Int8GemmLayer* g, std::string* why) {
  if (!parseInt8GemmLayer(layer, g, why)) return false;
  if (g->conv) return detail::fail(why, "convolutions are not offered (cuda-i8 and cublaslt-i8)");
  if (g->hasZ) return detail::fail(why, "a residual input is not offered");
  if (g->M > kInt8GemvMaxTiledRows)
    return detail::fail(why, "more than " + std::to_string(kInt8GemvMaxTiledRows) + " rows (" +
                                 std::to_string(g->M) + "): a GEMM's work, not a GEMV's");
  if (g->K % 16 != 0 || g->K > kInt8GemvMaxK)
    return detail::fail(why, "K must be a multiple of 16 up to " + std::to_string(kInt8GemvMaxK) +
                                 " (here " + std::to_string(g->K) + ")");
  if (g->N > (int64_t{1} << 30)) return detail::fail(why, "too many output channels");
  return true;
}

/// The serialized state: the input's and output's scales as float bits. An engine's plan keeps
/// scales for its int8 tensors only, and a float input is quantized with the layer's scale
/// here, so a reload takes it from the state.
std::string scalesState(float sx, float sy) {
  uint32_t a = 0, b = 0;
  std::memcpy(&a, &sx, 4);
  std::memcpy(&b, &sy, 4);
  return "scales " + std::to_string(a) + " " + std::to_string(b);
}

bool parseScalesState(const std::string& state, float* sx, float* sy) {
  unsigned long a = 0, b = 0;
  char tail = 0;
  if (std::sscanf(state.c_str(), "scales %lu %lu%c", &a, &b, &tail) != 2 || a > 0xffffffffu ||
      b > 0xffffffffu)
    return false;
  const uint32_t ua = static_cast<uint32_t>(a), ub = static_cast<uint32_t>(b);
  std::memcpy(sx, &ua, 4);
  std::memcpy(sy, &ub, 4);
  return positiveInt8Scale(*sx) && (*sy == 0.f || positiveInt8Scale(*sy));
}

/// `layer` with scales sx and sy (sy 0: none) where it has none for its input and output.
builder::LayerContext withScales(const builder::LayerContext& layer, float sx, float sy) {
  builder::LayerContext l = layer;
  if (l.inputScales.empty()) l.inputScales.push_back(0.f);
  if (l.outputScales.empty()) l.outputScales.push_back(0.f);
  if (!positiveInt8Scale(l.inputScales[0])) l.inputScales[0] = sx;
  if (!positiveInt8Scale(l.outputScales[0])) l.outputScales[0] = sy;
  return l;
}

class Int8GemvTactic final : public builder::Tactic {
 public:
  /// sx, sy: the layer's input and output scales when it was offered (sy 0: none). channels:
  /// 0 for the one-row form, else the row-tile form's channels a warp (1 or 4).
  Int8GemvTactic(const Int8GemmLayer& g, GemvType x, GemvType y, float sx, float sy, int channels)
      : g_(g), x_(x), y_(y), sx_(sx), sy_(sy), channels_(channels) {
    id_ = std::string("cuda-i8.gemv.") +
          (channels ? "m" + std::to_string(kInt8GemvRowTile) + "c" + std::to_string(channels) + "."
                    : std::string()) +
          typeName(x) + "." + typeName(y);
  }

  std::string id() const override { return id_; }
  TensorFormat inputFormat(size_t index) const override {
    if (index == 0) return {dataTypeOf(x_), Layout::kLinear};
    return {DataType::kFloat32, Layout::kLinear};
  }
  TensorFormat outputFormat(size_t) const override { return {dataTypeOf(y_), Layout::kLinear}; }
  bool consumesInput(size_t index) const override { return index == 1 || index == 2; }
  std::string serializedState() const override { return scalesState(sx_, sy_); }
  bool quantizesInternally() const override { return true; }

  Status initialize(const builder::LayerContext& loaded) override {
    // A loaded engine's layer has scales for its int8 tensors only: the others are the
    // candidate's (the state it was restored with).
    const builder::LayerContext layer = withScales(loaded, sx_, sy_);
    Int8GemmLayer g;
    std::string why;
    if (!parseGemvLayer(layer, &g, &why)) return Status(ErrorCode::kUnsupported, id_ + ": " + why);
    if (channels_ == 0 && g.M > kInt8GemvMaxRows)
      return Status(ErrorCode::kUnsupported,
                    id_ + ": more than " + std::to_string(kInt8GemvMaxRows) + " rows a block");
    if (g.M != g_.M || g.K != g_.K || g.N != g_.N ||
        (g.biasSource != nullptr) != (g_.biasSource != nullptr) || g.act != g_.act)
      return Status(ErrorCode::kUnsupported, id_ + ": the layer changed");
    const float sx = layer.inputScale(0);
    const float sy = y_ == GemvType::kInt8 ? layer.outputScale(0) : 0.f;
    if (!positiveInt8Scale(sx) || (y_ == GemvType::kInt8 && !positiveInt8Scale(sy)))
      return Status(ErrorCode::kInvalidArgument,
                    id_ + ": an int8 tensor of the layer has no scale");
    Int8GemmWeights wts;
    EI_RETURN_IF_ERROR(prepareInt8GemmWeights(g, sx, &wts).withContext(id_ + ": weights"));
    dW_.reset();
    dAlpha_.reset();
    dBias_.reset();
    EI_RETURN_IF_ERROR(uploadWeights(wts.packed.data(), wts.packed.size(), &dW_));
    EI_RETURN_IF_ERROR(uploadWeights(wts.alpha.data(), wts.alpha.size() * sizeof(float), &dAlpha_));
    EI_RETURN_IF_ERROR(uploadWeights(wts.bias.data(), wts.bias.size() * sizeof(float), &dBias_));
    g_ = g;
    plan_ = Int8GemvPlan{};
    plan_.M = static_cast<int32_t>(g.M);
    plan_.K = static_cast<int32_t>(g.K);
    plan_.N = static_cast<int32_t>(g.N);
    plan_.x = x_;
    plan_.y = y_;
    plan_.xScale = x_ == GemvType::kInt8 ? 0.f : sx;
    plan_.yScale = sy;
    plan_.act = g.act;
    plan_.actAlpha = g.actAlpha;
    plan_.actBeta = g.actBeta;
    plan_.rowTile = channels_ ? int8GemvRowTile(g.M, g.K) : 0;
    plan_.channelsPerWarp = channels_ ? channels_ : 1;
    return Status::Ok();
  }

  Status enqueue(const builder::LaunchArgs& args) override {
    if (!dW_) return Status(ErrorCode::kInvalidArgument, id_ + ": enqueue before initialize");
    if (args.inputs.empty() || !args.inputs[0] || args.outputs.empty() || !args.outputs[0])
      return Status(ErrorCode::kInvalidArgument, id_ + ": missing input or output pointer");
    return launchInt8Gemv(plan_, args.inputs[0], static_cast<const int8_t*>(dW_.get()),
                          static_cast<const float*>(dAlpha_.get()),
                          static_cast<const float*>(dBias_.get()), args.outputs[0], args.stream)
        .withContext(id_);
  }

 private:
  Int8GemmLayer g_;
  GemvType x_, y_;
  std::string id_;
  float sx_, sy_;
  int channels_;
  Int8GemvPlan plan_;
  std::shared_ptr<void> dW_, dAlpha_, dBias_;  // device_weights.h: shared with equal uploads
};

}  // namespace

std::vector<std::unique_ptr<builder::Tactic>> Int8GemvProvider::candidates(
    const builder::LayerContext& layer, Precision precision) {
  std::vector<std::unique_ptr<builder::Tactic>> out;
  if (precision != Precision::kInt8) {
    lastReason_ = "the cuda-i8.gemv provider offers INT8 tactics only";
    return out;
  }
  if (const char* env = std::getenv("EDGEINFER_DISABLE_INT8_GEMV");
      env && std::string(env) == "1") {
    lastReason_ = "switched off by EDGEINFER_DISABLE_INT8_GEMV=1";
    return out;
  }
  Int8GemmLayer g;
  if (!parseGemvLayer(layer, &g, &lastReason_)) return out;
  if (detail::deviceCapability() <= 0) {
    lastReason_ = "no CUDA device";
    return out;
  }
  lastReason_.clear();
  std::vector<GemvType> ys{GemvType::kFloat32, GemvType::kFloat16};
  if (positiveInt8Scale(layer.outputScale(0))) ys.push_back(GemvType::kInt8);
  std::vector<int> forms{1, 4};  // the row-tile form's channels a warp
  if (g.M <= kInt8GemvMaxRows) forms.insert(forms.begin(), 0);  // and the one-row form
  for (int channels : forms)
    for (GemvType x : {GemvType::kInt8, GemvType::kFloat16, GemvType::kFloat32})
      for (GemvType y : ys)
        out.push_back(std::make_unique<Int8GemvTactic>(
            g, x, y, layer.inputScale(0),
            positiveInt8Scale(layer.outputScale(0)) ? layer.outputScale(0) : 0.f, channels));
  return out;
}

std::unique_ptr<builder::Tactic> Int8GemvProvider::restore(const builder::LayerContext& layer,
                                                           Precision precision,
                                                           const std::string& id,
                                                           const std::string& state) {
  float sx = 0.f, sy = 0.f;
  if (!parseScalesState(state, &sx, &sy)) return find(layer, precision, id);
  return find(withScales(layer, sx, sy), precision, id);
}

}  // namespace edgeinfer::cuda
