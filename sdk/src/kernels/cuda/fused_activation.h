// The activations our own CUDA kernels fuse into their epilogue (the FusedConv / FusedGemm
// `activation` attribute, graph/ops/fused_schemas.cpp), as plain codes a kernel argument can
// carry. fused_activation.cuh computes them on the device exactly as kernels/ref/activation.h
// does on the host. Plain C++.
#pragma once

#include <cstdint>
#include <string>

#include "edgeinfer/status.h"
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
  kSilu,
};

/// The `activation`, `activation_alpha` and `activation_beta` attributes of a fused node, with
/// the defaults of the CPU reference (kernels/ref/nn_common.h). False (with `why`) for an
/// unknown activation name.
bool readFusedActivation(const graph::Node& node, DeviceActivation* act, float* alpha, float* beta,
                         std::string* why);

/// y[i] = act(y[i]) for n elements (fp16 or fp32 storage, computing in float as the reference
/// does), in place on `stream`: the activation of a layer whose library kernel cannot apply it
/// in its epilogue (activation_epilogue.cu). Never synchronises; returns the launch error.
Status launchActivationInPlace(void* y, int64_t n, bool fp16, DeviceActivation act, float alpha,
                               float beta, int maxBlocks, void* stream);

}  // namespace edgeinfer::cuda
