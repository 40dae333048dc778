#include "kernels/cuda/conv2d_layer.h"

#include <utility>

#include "graph/ops/conv_geometry.h"
#include "kernels/cuda/cuda_tactic_base.h"

namespace edgeinfer::cuda {
using detail::fail;

bool parseConv2dLayer(const builder::LayerContext& layer, int maxElementsLog2, Conv2dLayer* out,
                      std::string* why) {
  const int64_t maxElements = int64_t{1} << maxElementsLog2;
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
  for (size_t i = 0; i < 4; ++i)
    if (xs[i] <= 0 || ys[i] <= 0) return fail(why, "shapes must be static and non-empty");
  if (xs.numel() >= maxElements || ys.numel() >= maxElements)
    return fail(why, "tensors of 2^" + std::to_string(maxElementsLog2) +
                         " elements or more are not supported");
  const Tensor* w = layer.constantInput(1);
  if (!w) return fail(why, "the weights are not a constant");
  const Shape& ws = w->shape();
  if ((w->dtype() != DataType::kFloat32 && w->dtype() != DataType::kFloat16) || ws.rank() != 4)
    return fail(why, "the weights must be a static 4-D float tensor");
  for (size_t i = 0; i < 4; ++i)
    if (ws[i] <= 0) return fail(why, "the weights must be a static 4-D float tensor");
  const int64_t K = ws[0];
  if (ys[1] != K || ys[0] != xs[0]) return fail(why, "inconsistent channel counts");
  if (ws[2] * ws[3] >= maxElements / K) return fail(why, "kernel too large");
  Conv2dLayer c;
  c.weights = w;
  c.weightsPerGroup = ws[1];
  c.group = node->attrs.getInt("group", 1);
  if (layer.hasInput(2)) {
    const Tensor* b = layer.constantInput(2);
    if (!b) return fail(why, "the bias is not a constant");
    if ((b->dtype() != DataType::kFloat32 && b->dtype() != DataType::kFloat16) || b->numel() != K)
      return fail(why, "the bias must be a float tensor of C_out elements");
    c.hasBias = true;
  }
  if (layer.hasInput(3)) {
    if (!fused) return fail(why, "Conv has no fourth input");
    if (layer.inputShapes[3] != ys || layer.constantInput(3))
      return fail(why, "the residual Z must be a computed tensor of the output's shape");
    c.hasZ = true;
  }
  graph::WindowAttrs wa;
  graph::WindowDims wd;
  if (!graph::readWindowAttrs(node->attrs, 2, {ws[2], ws[3]}, &wa).ok() ||
      !graph::computeWindowDims(wa, {xs[2], xs[3]}, &wd).ok())
    return fail(why, "invalid window attributes");
  if (wd.out[0] != ys[2] || wd.out[1] != ys[3])
    return fail(why, "output shape disagrees with the window attributes");
  // Window coordinates stay in int32: (out - 1) * stride + dilated extent + pads.
  for (size_t i = 0; i < 2; ++i)
    if ((wd.out[i] - 1) * wa.strides[i] + wa.effectiveKernel(i) + wd.padBegin[i] + wd.padEnd[i] >=
        (int64_t{1} << 30))
      return fail(why, "window coordinates exceed 2^30");
  c.N = static_cast<int32_t>(xs[0]);
  c.C = static_cast<int32_t>(xs[1]);
  c.H = static_cast<int32_t>(xs[2]);
  c.W = static_cast<int32_t>(xs[3]);
  c.K = static_cast<int32_t>(K);
  c.P = static_cast<int32_t>(ys[2]);
  c.Q = static_cast<int32_t>(ys[3]);
  c.R = static_cast<int32_t>(ws[2]);
  c.S = static_cast<int32_t>(ws[3]);
  c.strideH = static_cast<int32_t>(wa.strides[0]);
  c.strideW = static_cast<int32_t>(wa.strides[1]);
  c.dilH = static_cast<int32_t>(wa.dilations[0]);
  c.dilW = static_cast<int32_t>(wa.dilations[1]);
  c.padTop = static_cast<int32_t>(wd.padBegin[0]);
  c.padLeft = static_cast<int32_t>(wd.padBegin[1]);
  if (fused && !readFusedActivation(*node, &c.act, &c.alpha, &c.beta, why)) return false;
  *out = c;
  return true;
}

}  // namespace edgeinfer::cuda
