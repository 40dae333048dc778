// Scalar activation functions shared by the elementwise kernels and the fused kernels
// (FusedConv / FusedGemm / FusedMatMul), so a fused node computes exactly what the
// unfused chain computes.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>

namespace edgeinfer::ref {

enum class Activation {
  kNone,
  kRelu,
  kLeakyRelu,  // alpha
  kClip,       // alpha = min, beta = max
  kSigmoid,
  kHardSigmoid,  // alpha, beta
  kHardSwish,
  kTanh,
  kElu,   // alpha
  kSelu,  // alpha, beta (= gamma)
  kSoftplus,
  kSilu,  // x * Sigmoid(x), as the Mul(x, Sigmoid(x)) it replaces computes it
};

/// Parses the `activation` attribute of a fused node ("" means kNone). Returns false for an
/// unknown name.
inline bool parseActivation(const std::string& name, Activation* out) {
  *out = Activation::kNone;
  static const struct {
    const char* name;
    Activation act;
  } kTable[] = {{"", Activation::kNone},
                {"Relu", Activation::kRelu},
                {"LeakyRelu", Activation::kLeakyRelu},
                {"Clip", Activation::kClip},
                {"Sigmoid", Activation::kSigmoid},
                {"HardSigmoid", Activation::kHardSigmoid},
                {"HardSwish", Activation::kHardSwish},
                {"Tanh", Activation::kTanh},
                {"Elu", Activation::kElu},
                {"Selu", Activation::kSelu},
                {"Softplus", Activation::kSoftplus},
                {"SiLU", Activation::kSilu}};
  for (const auto& e : kTable) {
    if (name == e.name) {
      *out = e.act;
      return true;
    }
  }
  return false;
}

inline float applyActivation(float x, Activation act, float alpha, float beta) {
  switch (act) {
    case Activation::kNone:
      return x;
    case Activation::kRelu:
      return x > 0.f ? x : 0.f;
    case Activation::kLeakyRelu:
      return x >= 0.f ? x : alpha * x;
    case Activation::kClip:
      return std::min(std::max(x, alpha), beta);
    case Activation::kSigmoid:
      return 1.f / (1.f + std::exp(-x));
    case Activation::kHardSigmoid:
      return std::max(0.f, std::min(1.f, alpha * x + beta));
    case Activation::kHardSwish:
      return x * std::max(0.f, std::min(1.f, x / 6.f + 0.5f));
    case Activation::kTanh:
      return std::tanh(x);
    case Activation::kElu:
      return x >= 0.f ? x : alpha * (std::exp(x) - 1.f);
    case Activation::kSelu:
      return x > 0.f ? beta * x : beta * (alpha * std::exp(x) - alpha);
    case Activation::kSoftplus:
      return x > 20.f ? x : std::log1p(std::exp(x));
    case Activation::kSilu:
      return x * (1.f / (1.f + std::exp(-x)));
  }
  return x;
}

}  // namespace edgeinfer::ref
