#include "builder/tactic.h"

#include <sstream>

namespace edgeinfer::builder {

const char* layoutName(Layout l) {
  switch (l) {
    case Layout::kLinear:
      return "linear";
    case Layout::kNCHW:
      return "nchw";
    case Layout::kNHWC:
      return "nhwc";
  }
  return "?";
}

std::string LayerContext::signature(Precision precision) const {
  std::ostringstream os;
  os << (node->domain.empty() ? "" : node->domain + "::") << node->opType << "|"
     << precisionName(precision) << "|in";
  for (size_t i = 0; i < inputShapes.size(); ++i) {
    os << (i ? "," : ":");
    if (!hasInput(i)) {
      os << "-";
      continue;
    }
    os << dataTypeName(inputTypes[i]) << inputShapes[i].toString();
    if (constantInput(i)) os << "c";     // weights: their values do not change timings
    if (inputScale(i) > 0.f) os << "q";  // may be read as int8 (which tactics exist)
  }
  os << "|out";
  for (size_t i = 0; i < outputShapes.size(); ++i) {
    os << (i ? "," : ":") << dataTypeName(outputTypes[i]) << outputShapes[i].toString();
    if (outputScale(i) > 0.f) os << "q";
  }
  os << "|";
  for (const auto& [k, a] : node->attrs.all()) os << k << "=" << a.toString() << ";";
  // INT8 layers in the fast epilogue rounding: their own timings (the bit-exact ones keep the
  // signature they had before the fast rounding existed, and the timings recorded under it).
  if (precision == Precision::kInt8 && !int8BitExact) os << "|int8-fast";
  // A folded residual: its layer's signature too (its weights' shape, strides, input).
  if (foldedZ) os << "|fold{" << foldedZ->signature(precision) << "}";
  // A chained layer: its signature too (its output is this layer's last output above).
  if (chained) os << "|chain{" << chained->signature(precision) << "}";
  return os.str();
}

}  // namespace edgeinfer::builder
