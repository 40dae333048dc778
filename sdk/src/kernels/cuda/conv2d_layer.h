// What our own 2-D convolution providers (cuda-dw, cuda-stem, cuda-i8) read from a Conv or
// ai.edgeinfer::FusedConv layer, checked once: static 4-D shapes, constant 4-D weights, an
// optional constant bias of C_out values, an optional residual Z of the output's shape, the
// window (strides, dilations, pads, auto_pad) and the fused activation. Element types and
// groups are each provider's own business. Plain C++, host code.
#pragma once

#include <cstdint>
#include <string>

#include "builder/tactic.h"
#include "kernels/cuda/fused_activation.h"

namespace edgeinfer::cuda {

struct Conv2dLayer {
  int32_t N = 0, C = 0, H = 0, W = 0;  ///< input
  int32_t K = 0, P = 0, Q = 0;         ///< output channels and spatial size
  int32_t R = 0, S = 0;                ///< kernel
  int32_t strideH = 1, strideW = 1, dilH = 1, dilW = 1, padTop = 0, padLeft = 0;
  int64_t group = 1;
  int64_t weightsPerGroup = 0;  ///< the weights' dim 1 (C_in / group)
  const Tensor* weights = nullptr;
  bool hasBias = false, hasZ = false;
  DeviceActivation act = DeviceActivation::kNone;
  float alpha = 0.f, beta = 0.f;

  /// Copies the geometry and the activation into a kernel plan with the same field names.
  template <typename Plan>
  void copyTo(Plan* p) const {
    p->N = N, p->C = C, p->H = H, p->W = W, p->K = K, p->P = P, p->Q = Q, p->R = R, p->S = S;
    p->strideH = strideH, p->strideW = strideW, p->dilH = dilH, p->dilW = dilW;
    p->padTop = padTop, p->padLeft = padLeft;
    p->act = act, p->alpha = alpha, p->beta = beta;
  }
};

/// Fills `out` from the layer; false with `why` when the layer is not such a convolution, or
/// a tensor has 2^maxElementsLog2 elements or more (the kernels index in int32), or a window
/// coordinate could reach 2^30.
bool parseConv2dLayer(const builder::LayerContext& layer, int maxElementsLog2, Conv2dLayer* out,
                      std::string* why);

}  // namespace edgeinfer::cuda
