// Shape inference for the fused ops the graph optimiser creates (domain "ai.edgeinfer").
// Each one computes exactly what the chain it replaces computes, so its shape function is
// the shape function of the chain's first op plus checks of the extra inputs:
//
//   FusedConv   (X, W, [B], [Z])  Y = act(Conv(X, W) + B + Z)    Z: residual of Y's shape,
//                                                                  added before the activation
//   FusedGemm   (A, B, [C])       Y = act(alpha * A' B' + beta * C)
//   FusedMatMul (A, B, [bias])    Y = act(A @ B + bias)           bias: [last dim of Y]
//
// Attributes: those of Conv / Gemm (MatMul has none) plus
//   activation        string, "" (none) or one of kActivationNames below ("SiLU" is
//                     x * Sigmoid(x), which ONNX writes as Mul(x, Sigmoid(x)))
//   activation_alpha  float, default: the ONNX default of the activation (LeakyRelu 0.01,
//                     HardSigmoid 0.2, Elu 1.0, Selu 1.67326319..., Clip -inf)
//   activation_beta   float, default: HardSigmoid 0.5, Selu 1.05070102..., Clip +inf
// The fusion pass always writes activation_alpha and activation_beta explicitly (taking Clip's
// bounds from its min/max inputs), so the defaults only matter for hand-written graphs.
#include <string>

#include "graph/op_schema.h"
#include "graph/ops/fused_elementwise.h"
#include "graph/ops/nn_shape_fns.h"
#include "graph/ops/schema_util.h"

namespace edgeinfer::graph {
namespace {

// The activations the fused kernels can apply. Keep in sync with parseActivation() in
// kernels/ref/activation.h (the graph layer does not include kernel headers; the unit tests
// check both agree).
const char* const kActivationNames[] = {"",        "Relu",        "LeakyRelu", "Clip",
                                        "Sigmoid", "HardSigmoid", "HardSwish", "Tanh",
                                        "Elu",     "Selu",        "Softplus",  "SiLU"};

Status checkActivation(const InferContext& ctx) {
  const std::string act = ctx.attrs().getString("activation", "");
  for (const char* name : kActivationNames)
    if (act == name) return Status::Ok();
  return Status(ErrorCode::kInvalidModel, "unknown fused activation '" + act + "'");
}

ShapeInferFn withActivation(Status (*infer)(InferContext&)) {
  return [infer](InferContext& ctx) {
    EI_RETURN_IF_ERROR(checkActivation(ctx));
    return infer(ctx);
  };
}

}  // namespace

void registerFusedSchemas(OpSchemaRegistry& r) {
  schema_util::addEdgeInferSchema(r, "FusedConv", 2, 4, withActivation(nn::inferConv));
  schema_util::addEdgeInferSchema(r, "FusedGemm", 2, 3, withActivation(nn::inferGemm));
  schema_util::addEdgeInferSchema(r, "FusedMatMul", 2, 3, withActivation(nn::inferMatMul));
  registerFusedElementwiseSchema(r);  // fused_elementwise_schema.cpp
}

}  // namespace edgeinfer::graph
