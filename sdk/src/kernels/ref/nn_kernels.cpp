// Registers the CPU reference kernels of the neural-network ops and of the fused ops.
//
// The kernels compute in float32. Every float kernel is registered through withFloat32<>,
// which converts float16 / bfloat16 inputs to float32, runs the kernel and rounds the float
// outputs back, so half-precision models run (slowly, but with float32 accuracy) on the CPU.
#include <vector>

#include "core/half.h"
#include "kernels/ref/nn_common.h"

namespace edgeinfer::ref {
namespace {

bool isHalfType(DataType t) {
  return t == DataType::kFloat16 || t == DataType::kBFloat16;
}

Status toFloat32(const Tensor& src, Tensor* dst) {
  EI_ASSIGN_OR_RETURN(*dst, Tensor::create(DataType::kFloat32, src.shape()));
  const uint16_t* s = src.data<uint16_t>();
  float* d = dst->data<float>();
  const bool half = src.dtype() == DataType::kFloat16;
  for (int64_t i = 0; i < src.numel(); ++i) d[i] = half ? halfToFloat(s[i]) : bf16ToFloat(s[i]);
  return Status::Ok();
}

void fromFloat32(const Tensor& src, Tensor* dst) {
  const float* s = src.data<float>();
  uint16_t* d = dst->data<uint16_t>();
  const bool half = dst->dtype() == DataType::kFloat16;
  for (int64_t i = 0; i < src.numel(); ++i) d[i] = half ? floatToHalf(s[i]) : floatToBf16(s[i]);
}

/// Runs a float32 kernel on float16 / bfloat16 tensors by converting around it.
template <KernelFn Fn>
Status withFloat32(KernelContext& ctx) {
  bool convert = false;
  for (const Tensor* t : ctx.inputs) convert = convert || (t && isHalfType(t->dtype()));
  for (const Tensor* t : ctx.outputs) convert = convert || isHalfType(t->dtype());
  if (!convert) return Fn(ctx);
  for (const Tensor* t : ctx.inputs)
    if (t && !t->onHost())
      return ctx.error(ErrorCode::kInvalidArgument, "input is not on the host");
  std::vector<Tensor> inTmp(ctx.inputs.size()), outTmp(ctx.outputs.size());
  KernelContext inner{ctx.node, ctx.inputs, ctx.outputs};
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (!ctx.inputs[i] || !isHalfType(ctx.inputs[i]->dtype())) continue;
    EI_RETURN_IF_ERROR(toFloat32(*ctx.inputs[i], &inTmp[i]));
    inner.inputs[i] = &inTmp[i];
  }
  for (size_t i = 0; i < ctx.outputs.size(); ++i) {
    if (!isHalfType(ctx.outputs[i]->dtype())) continue;
    EI_ASSIGN_OR_RETURN(outTmp[i], Tensor::create(DataType::kFloat32, ctx.outputs[i]->shape()));
    inner.outputs[i] = &outTmp[i];
  }
  EI_RETURN_IF_ERROR(Fn(inner));
  for (size_t i = 0; i < ctx.outputs.size(); ++i)
    if (isHalfType(ctx.outputs[i]->dtype())) fromFloat32(outTmp[i], ctx.outputs[i]);
  return Status::Ok();
}

}  // namespace

void registerNnKernels(KernelRegistry& r) {
  r.add("", "Conv", withFloat32<nn::conv>);
  r.add("", "ConvTranspose", withFloat32<nn::convTranspose>);
  r.add("", "MaxPool", withFloat32<nn::maxPool>);
  r.add("", "AveragePool", withFloat32<nn::averagePool>);
  r.add("", "LpPool", withFloat32<nn::lpPool>);
  r.add("", "GlobalAveragePool", withFloat32<nn::globalAveragePool>);
  r.add("", "GlobalMaxPool", withFloat32<nn::globalMaxPool>);
  r.add("", "BatchNormalization", withFloat32<nn::batchNormalization>);
  r.add("", "InstanceNormalization", withFloat32<nn::instanceNormalization>);
  r.add("", "LayerNormalization", withFloat32<nn::layerNormalization>);
  r.add("", "LRN", withFloat32<nn::lrn>);
  r.add("", "LpNormalization", withFloat32<nn::lpNormalization>);
  r.add("", "Gemm", withFloat32<nn::gemm>);
  r.add("", "MatMul", withFloat32<nn::matMul>);
  r.add("", "Softmax", withFloat32<nn::softmax>);
  r.add("", "LogSoftmax", withFloat32<nn::logSoftmax>);
  r.add("", "Hardmax", withFloat32<nn::hardmax>);
  r.add("", "Resize", withFloat32<nn::resize>);
  r.add("", "PRelu", withFloat32<nn::prelu>);
  r.add("", "DepthToSpace", nn::depthToSpace);  // data movement: any element type
  r.add("", "SpaceToDepth", nn::spaceToDepth);
}

void registerFusedKernels(KernelRegistry& r) {
  r.add(graph::kEdgeInferDomain, "FusedConv", withFloat32<nn::fusedConv>);
  r.add(graph::kEdgeInferDomain, "FusedGemm", withFloat32<nn::fusedGemm>);
  r.add(graph::kEdgeInferDomain, "FusedMatMul", withFloat32<nn::fusedMatMul>);
  registerFusedElementwiseKernel(r);  // fused_elementwise.cpp
}

}  // namespace edgeinfer::ref
