#include "kernels/cuda/fused_activation.h"

#include <limits>

#include "kernels/ref/activation.h"

namespace edgeinfer::cuda {
namespace {

DeviceActivation toDevice(ref::Activation a) {
  switch (a) {
    case ref::Activation::kNone:
      return DeviceActivation::kNone;
    case ref::Activation::kRelu:
      return DeviceActivation::kRelu;
    case ref::Activation::kLeakyRelu:
      return DeviceActivation::kLeakyRelu;
    case ref::Activation::kClip:
      return DeviceActivation::kClip;
    case ref::Activation::kSigmoid:
      return DeviceActivation::kSigmoid;
    case ref::Activation::kHardSigmoid:
      return DeviceActivation::kHardSigmoid;
    case ref::Activation::kHardSwish:
      return DeviceActivation::kHardSwish;
    case ref::Activation::kTanh:
      return DeviceActivation::kTanh;
    case ref::Activation::kElu:
      return DeviceActivation::kElu;
    case ref::Activation::kSelu:
      return DeviceActivation::kSelu;
    case ref::Activation::kSoftplus:
      return DeviceActivation::kSoftplus;
    case ref::Activation::kSilu:
      return DeviceActivation::kSilu;
  }
  return DeviceActivation::kNone;
}

}  // namespace

bool readFusedActivation(const graph::Node& node, DeviceActivation* act, float* alpha, float* beta,
                         std::string* why) {
  const std::string name = node.attrs.getString("activation", "");
  ref::Activation a;
  if (!ref::parseActivation(name, &a)) {
    *why = "unknown activation '" + name + "'";
    return false;
  }
  float al = 0.f, be = 0.f;
  switch (a) {
    case ref::Activation::kLeakyRelu:
      al = 0.01f;
      break;
    case ref::Activation::kHardSigmoid:
      al = 0.2f;
      be = 0.5f;
      break;
    case ref::Activation::kElu:
      al = 1.f;
      break;
    case ref::Activation::kSelu:
      al = 1.67326319217681884765625f;
      be = 1.05070102214813232421875f;
      break;
    case ref::Activation::kClip:
      al = -std::numeric_limits<float>::infinity();
      be = std::numeric_limits<float>::infinity();
      break;
    default:
      break;
  }
  *act = toDevice(a);
  *alpha = node.attrs.getFloat("activation_alpha", al);
  *beta = node.attrs.getFloat("activation_beta", be);
  return true;
}

}  // namespace edgeinfer::cuda
