// Int8GemmLayer (int8_gemm_layer.h): the layers the INT8 GEMM tactics take, parsed once for all.
#include "kernels/cuda/int8_gemm_layer.h"

#include <cmath>

#include "kernels/cuda/conv2d_layer.h"
#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/fused_activation.h"
#include "quant/qdq.h"

namespace edgeinfer::cuda {

using detail::allPositive;
using detail::fail;

bool positiveInt8Scale(float s) {
  return s > 0.f && std::isfinite(s);
}

namespace {

bool parseConvLayer(const builder::LayerContext& layer, Int8GemmLayer* g, std::string* why) {
  Conv2dLayer c;
  if (!parseConv2dLayer(layer, 40, &c, why)) return false;
  if (c.group != 1 || c.weightsPerGroup != c.C) return fail(why, "only group 1 is supported");
  if (c.R != 1 || c.S != 1) return fail(why, "only 1x1 convolutions are matrix products");
  if (c.strideH != 1 || c.strideW != 1 || c.padTop != 0 || c.padLeft != 0 || c.P != c.H ||
      c.Q != c.W)
    return fail(why, "only stride 1 without padding (an NHWC input is then the GEMM's A)");
  if (c.hasZ && layer.inputTypes[3] != DataType::kFloat32)
    return fail(why, "the residual Z must be a computed float32 tensor of the output's shape");
  g->conv = true;
  g->M = int64_t{c.N} * c.H * c.W;
  g->K = c.C;
  g->N = c.K;
  g->weights = c.weights;
  g->weightAxis = 0;  // [C_out][C_in][1][1] is [N][K]
  g->weightsKN = false;
  g->biasSource = c.hasBias ? layer.constantInput(2) : nullptr;
  g->act = c.act;
  g->actAlpha = c.alpha;
  g->actBeta = c.beta;
  g->hasZ = c.hasZ;
  return true;
}

bool parseGemmLayer(const builder::LayerContext& layer, Int8GemmLayer* g, std::string* why) {
  const graph::Node& node = *layer.node;
  const bool onnx = node.domain.empty(), ours = node.domain == graph::kEdgeInferDomain;
  const bool gemm = (onnx && node.opType == "Gemm") || (ours && node.opType == "FusedGemm");
  if (layer.inputShapes.size() < 2 || layer.inputTypes.size() != layer.inputShapes.size() ||
      layer.outputShapes.size() != 1 || layer.outputTypes.size() != 1)
    return fail(why, "unexpected input/output count");
  const Shape& as = layer.inputShapes[0];
  const Shape& ys = layer.outputShapes[0];
  if (as.rank() == 0 || !allPositive(as) || !allPositive(ys))
    return fail(why, "shapes must be static and non-empty");
  const Tensor* b = layer.constantInput(1);
  if (!b) return fail(why, "B is not a constant (two computed inputs are not offered)");
  if (!detail::isFloatStorage(b->dtype()) || !allPositive(b->shape()) || b->shape().rank() < 2)
    return fail(why, "B must be a constant float matrix");
  const Shape& bs = b->shape();
  for (size_t i = 0; i + 2 < bs.rank(); ++i)
    if (bs[i] != 1) return fail(why, "B has a batch; only a 2-D constant B is offered");
  const int r = static_cast<int>(bs.rank());
  if (gemm) {
    if (as.rank() != 2 || bs.rank() != 2) return fail(why, "Gemm operands must be 2-D");
    if (node.attrs.getInt("transA", 0) != 0) return fail(why, "Gemm transA = 1 is not offered");
    const bool transB = node.attrs.getInt("transB", 0) == 1;
    g->gemmAlpha = node.attrs.getFloat("alpha", 1.f);
    g->gemmBeta = node.attrs.getFloat("beta", 1.f);
    g->K = as[1];
    g->N = transB ? bs[0] : bs[1];
    if ((transB ? bs[1] : bs[0]) != g->K) return fail(why, "inner dimensions differ");
    g->weightAxis = transB ? 0 : 1;
    g->weightsKN = !transB;
  } else {
    g->K = as[as.rank() - 1];
    g->N = bs[static_cast<size_t>(r - 1)];
    if (bs[static_cast<size_t>(r - 2)] != g->K) return fail(why, "inner dimensions differ");
    g->weightAxis = r - 1;
    g->weightsKN = true;
  }
  g->M = as.numel() / g->K;
  if (ys.numel() != g->M * g->N || ys[ys.rank() - 1] != g->N)
    return fail(why, "output shape disagrees with A and B");
  if (layer.hasInput(2)) {
    const Tensor* c = layer.constantInput(2);
    if (!c) return fail(why, "a runtime C / bias is not offered");
    const Shape& cs = c->shape();
    const bool vector = (cs.rank() == 1 && cs[0] == g->N) ||
                        (gemm && cs.rank() == 2 && cs[0] == 1 && cs[1] == g->N);
    if (!detail::isFloatStorage(c->dtype()) || !vector)
      return fail(why, "only a constant bias of N elements ([N] or [1, N]) is offered");
    g->biasSource = c;
    if (!gemm) g->gemmBeta = 1.f;
  }
  if (ours && !readFusedActivation(node, &g->act, &g->actAlpha, &g->actBeta, why)) return false;
  g->conv = false;
  g->weights = b;
  return true;
}

}  // namespace

bool parseInt8GemmLayer(const builder::LayerContext& layer, Int8GemmLayer* g, std::string* why) {
  if (!layer.node || !layer.graph || layer.inputShapes.empty()) return fail(why, "no node");
  if (!positiveInt8Scale(layer.inputScale(0)))
    return fail(why, "the input has no int8 scale (not calibrated, or not an INT8 layer)");
  const graph::Node& n = *layer.node;
  const bool ours = n.domain == graph::kEdgeInferDomain;
  const bool isConv = (n.domain.empty() && n.opType == "Conv") || (ours && n.opType == "FusedConv");
  if (isConv) {
    if (!parseConvLayer(layer, g, why)) return false;
  } else if ((n.domain.empty() && (n.opType == "Gemm" || n.opType == "MatMul")) ||
             (ours && (n.opType == "FusedGemm" || n.opType == "FusedMatMul"))) {
    if (!parseGemmLayer(layer, g, why)) return false;
  } else {
    return fail(why, "not a Conv / FusedConv / Gemm / FusedGemm / MatMul / FusedMatMul node");
  }
  if (layer.inputTypes[0] != DataType::kFloat32 || layer.outputTypes[0] != DataType::kFloat32)
    return fail(why, "the input and output must be float32 values");
  if (!detail::isFloatStorage(g->weights->dtype()))
    return fail(why, "the weights must be a float constant");
  return true;
}

Status prepareInt8GemmWeights(const Int8GemmLayer& g, float sx, Int8GemmWeights* out) {
  std::vector<int8_t> q;
  std::vector<float> ws;
  EI_RETURN_IF_ERROR(quant::quantizeWeights(*g.weights, g.weightAxis, &q, &ws));
  out->packed.assign(static_cast<size_t>(g.N * g.K), 0);
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t k = 0; k < g.K; ++k)
      out->packed[static_cast<size_t>(n * g.K + k)] =
          q[static_cast<size_t>(g.weightsKN ? k * g.N + n : n * g.K + k)];
  out->alpha.assign(static_cast<size_t>(g.N), 0.f);
  out->bias.assign(static_cast<size_t>(g.N), 0.f);
  for (size_t n = 0; n < out->alpha.size(); ++n) {
    out->alpha[n] = sx * ws[n];
    if (g.gemmAlpha != 1.f) out->alpha[n] = out->alpha[n] * g.gemmAlpha;
  }
  if (g.biasSource)
    for (size_t n = 0; n < out->bias.size(); ++n) {
      out->bias[n] = static_cast<float>(g.biasSource->getAsDouble(static_cast<int64_t>(n)));
      if (!g.conv && g.gemmBeta != 1.f) out->bias[n] = g.gemmBeta * out->bias[n];
    }
  return Status::Ok();
}

}  // namespace edgeinfer::cuda
