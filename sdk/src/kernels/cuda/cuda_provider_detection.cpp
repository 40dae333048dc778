// The `cuda` provider's detection family (kernels in detection.cu): the bounded forms of
// NonZero and NonMaxSuppression (domain ai.edgeinfer), which graph/partition.h puts in a GPU
// engine in place of the data-dependent ops. Both write int64 outputs and read their input
// in float32 (NonMaxSuppression's boxes and scores, so the selection is the float model's) or
// in the input's own type (NonZero). NonMaxSuppression's parameters are constants read here,
// or inputs the kernel reads on the device (int64 limit, float32 thresholds).
// Host code only.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/detection.h"

namespace edgeinfer::cuda::detail {
namespace {

using builder::LaunchArgs;
using builder::LayerContext;
using builder::Layout;
using builder::Tactic;
using builder::TensorFormat;

bool nonZeroType(DataType t, NonZeroType* out) {
  switch (t) {
    case DataType::kFloat32:
      *out = NonZeroType::kFloat32;
      return true;
    case DataType::kFloat16:
      *out = NonZeroType::kFloat16;
      return true;
    case DataType::kInt8:
      *out = NonZeroType::kInt8;
      return true;
    case DataType::kUInt8:
    case DataType::kBool:
      *out = NonZeroType::kUInt8;
      return true;
    case DataType::kInt32:
      *out = NonZeroType::kInt32;
      return true;
    case DataType::kInt64:
      *out = NonZeroType::kInt64;
      return true;
    default:
      return false;
  }
}

bool boundedOutputs(const LayerContext& layer, const Shape& padded) {
  return layer.outputShapes.size() == 2 && layer.outputShapes[0] == padded &&
         layer.outputShapes[1] == Shape({1}) && layer.outputTypes[0] == DataType::kInt64 &&
         layer.outputTypes[1] == DataType::kInt64;
}

bool nonZeroPlan(const LayerContext& layer, DataType storage, NonZeroPlan* p) {
  if (layer.inputShapes.size() != 1) return false;
  const Shape& x = layer.inputShapes[0];
  *p = NonZeroPlan{};
  if (!nonZeroType(storage, &p->type) || !isStatic(x) || x.rank() > kNonZeroMaxDims ||
      x.numel() < 1)
    return false;
  p->numel = x.numel();
  p->rank = static_cast<int>(x.rank());
  for (size_t d = 0; d < x.rank(); ++d) p->dims[d] = x[d];
  const int64_t rows = x.rank() < 1 ? 1 : static_cast<int64_t>(x.rank());
  return boundedOutputs(layer, Shape({rows, x.numel()}));
}

/// Parameter input i of NonMaxSuppression: absent, a constant (its value in `*v`) or one
/// element computed at run time of type `runTime` (`*input` true); false otherwise.
bool nmsParam(const LayerContext& layer, size_t i, DataType runTime, bool* present, bool* input,
              const Tensor** v) {
  *present = layer.hasInput(i);
  *input = false;
  *v = nullptr;
  if (!*present) return true;
  *v = layer.constantInput(i);
  if (*v) return (*v)->numel() == 1;
  *input = true;
  return layer.inputShapes[i].numel() == 1 && layer.inputTypes[i] == runTime;
}

bool nmsPlan(const LayerContext& layer, NmsPlan* p) {
  const graph::Node& n = *layer.node;
  if (layer.inputShapes.size() < 3 || layer.inputTypes[0] != DataType::kFloat32 ||
      layer.inputTypes[1] != DataType::kFloat32)
    return false;
  const Shape& b = layer.inputShapes[0];
  const Shape& s = layer.inputShapes[1];
  if (b.rank() != 3 || s.rank() != 3 || b[2] != 4 || b[0] != s[0] || b[1] != s[2] ||
      !allPositive(s) || !isStatic(b))
    return false;
  const int64_t cpb = n.attrs.getInt("center_point_box", 0);
  if (cpb != 0 && cpb != 1) return false;
  *p = NmsPlan{};
  bool present = false;
  const Tensor *maxOut = nullptr, *iou = nullptr, *score = nullptr;
  if (!nmsParam(layer, 2, DataType::kInt64, &present, &p->maxOutInput, &maxOut) || !present ||
      (maxOut && (maxOut->dtype() != DataType::kInt64 || maxOut->getAsInt64(0) < 1)) ||
      !nmsParam(layer, 3, DataType::kFloat32, &present, &p->iouInput, &iou) ||
      !nmsParam(layer, 4, DataType::kFloat32, &p->hasScoreThreshold, &p->scoreInput, &score))
    return false;
  if (iou) p->iouThreshold = static_cast<float>(iou->getAsDouble(0));
  if (score) p->scoreThreshold = static_cast<float>(score->getAsDouble(0));
  p->batches = s[0];
  p->classes = s[1];
  p->boxes = s[2];
  p->perClass = maxOut ? std::min(s[2], maxOut->getAsInt64(0)) : s[2];
  // A limit read at run time bounds K by the boxes; the output's rows say K where the limit
  // was known when the layer was shaped (the kernel still reads it).
  const int64_t rows = layer.outputShapes.empty() ? 0 : layer.outputShapes[0][0];
  if (!maxOut && rows > 0 && rows % (p->batches * p->classes) == 0)
    p->perClass = std::min(p->perClass, rows / (p->batches * p->classes));
  p->centerPointBox = cpb == 1;
  return boundedOutputs(layer, Shape({p->batches * p->classes * p->perClass, 3}));
}

/// Outputs int64.
class DetectionTactic : public CudaTactic {
 public:
  DetectionTactic(const std::string& family, DataType t, const LayerContext& layer)
      : CudaTactic(family, t, Layout::kNCHW, layer) {}
  TensorFormat outputFormat(size_t i) const override {
    return {DataType::kInt64, formatFor(i < outputRanks_.size() ? outputRanks_[i] : 0)};
  }
  size_t workspaceBytes() const override { return workspace_; }

 protected:
  Status checkLaunch(const LaunchArgs& args, size_t numInputs) const {
    EI_RETURN_IF_ERROR(checkArgs(args, numInputs));
    if (args.outputs.size() < 2 || !args.outputs[1] || !args.workspace ||
        args.workspaceBytes < workspace_)
      return Status(ErrorCode::kInvalidArgument, id() + ": missing count or workspace");
    return Status::Ok();
  }
  size_t workspace_ = 0;
};

class NonZeroTactic final : public DetectionTactic {
 public:
  NonZeroTactic(DataType t, const LayerContext& layer) : DetectionTactic("nonzero", t, layer) {
    if (nonZeroPlan(layer, t, &plan_)) workspace_ = nonZeroWorkspaceBytes(plan_);
  }
  Status initialize(const LayerContext& layer) override {
    if (!nonZeroPlan(layer, dtype_, &plan_) || workspace_ == 0)
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkLaunch(args, 1));
    return launchNonZero(plan_, args.inputs[0], args.outputs[0], args.outputs[1], args.workspace,
                         args.workspaceBytes, args.stream);
  }

 private:
  NonZeroPlan plan_;
};

class NmsTactic final : public DetectionTactic {
 public:
  explicit NmsTactic(const LayerContext& layer)
      : DetectionTactic("nms", DataType::kFloat32, layer) {
    setInputType(2, DataType::kInt64);
    if (nmsPlan(layer, &plan_)) workspace_ = nmsWorkspaceBytes(plan_);
  }
  /// The constant parameters, read into the plan.
  bool consumesInput(size_t index) const override {
    return (index == 2 && !plan_.maxOutInput) || (index == 3 && !plan_.iouInput) ||
           (index == 4 && !plan_.scoreInput);
  }
  Status initialize(const LayerContext& layer) override {
    if (!nmsPlan(layer, &plan_) || workspace_ == 0)
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkLaunch(args, 2));
    NmsParamsOnDevice params;
    const auto at = [&](size_t i) { return i < args.inputs.size() ? args.inputs[i] : nullptr; };
    if (plan_.maxOutInput) params.maxOut = static_cast<const int64_t*>(at(2));
    if (plan_.iouInput) params.iou = static_cast<const float*>(at(3));
    if (plan_.scoreInput) params.score = static_cast<const float*>(at(4));
    if ((plan_.maxOutInput && !params.maxOut) || (plan_.iouInput && !params.iou) ||
        (plan_.scoreInput && !params.score))
      return Status(ErrorCode::kInvalidArgument, id() + ": missing parameter input");
    return launchNms(plan_, params, args.inputs[0], args.inputs[1], args.outputs[0],
                     args.outputs[1], args.workspace, args.workspaceBytes, args.stream);
  }

 private:
  NmsPlan plan_;
};

}  // namespace

bool detectionCandidates(const LayerContext& layer, Precision precision,
                         std::vector<std::unique_ptr<Tactic>>* out) {
  (void)precision;  // the selection is exact: float inputs are read in float32 at any precision
  const graph::Node& node = *layer.node;
  if (node.domain != graph::kEdgeInferDomain ||
      (node.opType != "BoundedNonZero" && node.opType != "BoundedNonMaxSuppression"))
    return false;
  if (node.opType == "BoundedNonZero") {
    if (layer.inputTypes.empty()) return true;
    const DataType t = layer.inputTypes[0];
    NonZeroPlan p;
    if (nonZeroPlan(layer, t, &p)) out->push_back(std::make_unique<NonZeroTactic>(t, layer));
  } else {
    NmsPlan p;
    if (nmsPlan(layer, &p)) out->push_back(std::make_unique<NmsTactic>(layer));
  }
  return true;
}

}  // namespace edgeinfer::cuda::detail
