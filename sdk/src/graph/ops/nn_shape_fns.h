// Shape functions of the neural-network ops that the fused ops reuse (fused_schemas.cpp), so
// FusedConv / FusedGemm / FusedMatMul infer exactly the shapes of the chains they replace.
// Defined in nn_schemas.cpp.
#pragma once

#include "edgeinfer/status.h"
#include "graph/op_schema.h"

namespace edgeinfer::graph::nn {

/// Conv: inputs (X, W, [B]); also checks an optional residual Z at input 3 (FusedConv)
/// against the output shape.
Status inferConv(InferContext& ctx);
/// Gemm: inputs (A, B, [C]).
Status inferGemm(InferContext& ctx);
/// MatMul: inputs (A, B); also checks an optional bias of shape [N] at input 2 (FusedMatMul).
Status inferMatMul(InferContext& ctx);

}  // namespace edgeinfer::graph::nn
