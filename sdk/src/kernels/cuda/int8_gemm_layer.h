// An INT8 layer that is a matrix product, as the GEMM tactics see it (the cublaslt-i8 and
// cuda-i8.gemv providers): Y[M, N] = act(alpha * X[M, K] W^T + bias (+ Z)) with constant
// float weights quantized per output channel, for
//   - 1x1 convolutions, stride 1, no padding, group 1 (Conv / ai.edgeinfer::FusedConv) on an
//     NHWC input: an NHWC tensor is a row-major [M = N*H*W, C] matrix;
//   - Gemm / FusedGemm (transA = 0, constant 2-D B, optional constant C of [N] or [1, N]) and
//     MatMul / FusedMatMul with a constant B (2-D, or leading dims of 1; optional constant bias
//     of N values) on a row-major input.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "builder/tactic.h"
#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "kernels/cuda/fused_activation.h"

namespace edgeinfer::cuda {

/// One layer as a GEMM.
struct Int8GemmLayer {
  bool conv = false;                ///< 1x1 convolution (NHWC tensors) or Gemm/MatMul (linear)
  int64_t M = 0, K = 0, N = 0;      ///< rows (pixels), inner (C_in), output channels
  const Tensor* weights = nullptr;  ///< as the graph holds them
  int weightAxis = 0;               ///< the output-channel axis (quant::quantizeWeights)
  bool weightsKN = false;           ///< [K, N] (else [N, K]): packing transposes
  const Tensor* biasSource = nullptr;
  float gemmAlpha = 1.f, gemmBeta = 1.f;  ///< Gemm's alpha and beta (bias = beta * C)
  DeviceActivation act = DeviceActivation::kNone;
  float actAlpha = 0.f, actBeta = 0.f;
  bool hasZ = false;  ///< FusedConv's residual
};

/// A finite scale above zero: the tensor is int8 with it.
bool positiveInt8Scale(float s);

/// The layer as a GEMM: an input with an int8 scale, float32 input and output values, float
/// weights; false with `why` otherwise (the provider then offers nothing).
bool parseInt8GemmLayer(const builder::LayerContext& layer, Int8GemmLayer* g, std::string* why);

/// The layer's weights quantized per output channel (quant::quantizeWeights) and packed
/// K-major [N][K], and the epilogue constants of cuda-i8 and cublaslt-i8's "i32" mode for an
/// input of scale `sx`: alpha[n] = s_x * s_w[n] (times Gemm's alpha), bias[n] (times Gemm's
/// beta; 0 without a bias).
struct Int8GemmWeights {
  std::vector<int8_t> packed;
  std::vector<float> alpha, bias;
};
Status prepareInt8GemmWeights(const Int8GemmLayer& g, float sx, Int8GemmWeights* out);

}  // namespace edgeinfer::cuda
