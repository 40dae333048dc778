// The activations our own CUDA kernels fuse into their epilogue (the FusedConv / FusedGemm
// `activation` attribute, graph/ops/fused_schemas.cpp), as plain codes a kernel argument can
// carry. fused_activation.cuh computes them on the device exactly as kernels/ref/activation.h
// does on the host. Plain C++.
#pragma once

#include <cstdint>
#include <string>

#include "graph/graph.h"

namespace edgeinfer::cuda {

enum class DeviceActivation : int32_t {
  kNone,
  kRelu,
  kLeakyRelu,
  kClip,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kTanh,
  kElu,
  kSelu,
  kSoftplus,
};

/// The `activation`, `activation_alpha` and `activation_beta` attributes of a fused node, with
/// the defaults of the CPU reference (kernels/ref/nn_common.h). False (with `why`) for an
/// unknown activation name.
bool readFusedActivation(const graph::Node& node, DeviceActivation* act, float* alpha, float* beta,
                         std::string* why);

}  // namespace edgeinfer::cuda
