// The sensitivity report as text (edgeinfer calibrate --report) and JSON.
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

#include "edgeinfer/calibration.h"

namespace edgeinfer {
namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string describeError(const QuantError& e) {
  return "cosine " + fmt("%.6f", e.cosine) + ", max |error| " + fmt("%.4g", e.maxAbs) +
         (e.worstOutput.empty() ? "" : " (worst output '" + e.worstOutput + "')");
}

std::string describeAgreement(const Agreement& a) {
  return std::to_string(a.matched) + " of " + std::to_string(a.total) + " (" +
         fmt("%.1f", 100.0 * a.share()) + " %)";
}

nlohmann::json errorJson(const QuantError& e) {
  return {{"cosine", e.cosine},
          {"max_abs", e.maxAbs},
          {"worst_output", e.worstOutput},
          {"agreement", {{"matched", e.agreement.matched}, {"total", e.agreement.total}}}};
}

}  // namespace

std::string SensitivityReport::toText() const {
  std::ostringstream s;
  size_t excluded = 0;
  for (const auto& l : layers) excluded += l.policy != Precision::kInt8;
  s << "INT8 sensitivity (fake quantization on the CPU reference, against FP32), calibrator "
    << describeCalibrator(calibrator) << ", " << samples << " sample(s), " << layers.size()
    << " quantizable layer(s)\n";
  if (agreementSamples > samples)
    s << "every layer INT8, the policy and the agreement on " << agreementSamples
      << " sample(s); each layer alone on the first " << samples << "\n";
  if (!outputView.empty()) s << "model outputs compared " << outputView << "\n";
  if (!agreement.empty()) {
    s << "agreement with FP32: " << agreement;
    if (minAgreement > 0)
      s << "; target " << fmt("%.1f", 100.0 * minAgreement) << " %, " << keptForAgreement
        << " layer(s) kept out of INT8 for it";
    if (!agreementJudge.empty()) s << "; the policy judged on the " << agreementJudge;
    s << "\n";
  }
  if (keptOutputLayers > 0)
    s << keptOutputLayers
      << " layer(s) computing the model's outputs kept out of INT8 (policy marked *)\n";
  char label[64];
  std::snprintf(label, sizeof label, "with the policy (%zu FP16):", excluded);
  char row[96];
  std::snprintf(row, sizeof row, "  %-29s ", "every layer INT8:");
  s << row << describeError(allInt8)
    << (agreement.empty() ? "" : ", agreement " + describeAgreement(allInt8.agreement)) << "\n";
  std::snprintf(row, sizeof row, "  %-29s ", label);
  s << row << describeError(withPolicy)
    << (agreement.empty() ? "" : ", agreement " + describeAgreement(withPolicy.agreement)) << "\n";
  if (!calibrators.empty()) {
    s << "calibrators compared (every layer INT8; pick the one with the highest "
      << (agreement.empty() ? "cosine" : "agreement") << "):\n";
    for (const auto& c : calibrators) {
      char line[160];
      std::snprintf(line, sizeof line, "  %-18s cosine %.6f  max |error| %.4g",
                    describeCalibrator(c.calibrator).c_str(), c.modelError.cosine,
                    c.modelError.maxAbs);
      s << line
        << (agreement.empty() ? "" : "  agreement " + describeAgreement(c.modelError.agreement))
        << "\n";
    }
  }
  s << "layers, worst first (model: outputs with only this layer INT8; layer: its own output):\n";
  char head[200];
  std::snprintf(head, sizeof head, "  %4s  %-12s %-12s %-12s %-12s %-12s %-6s %s\n", "rank", "op",
                "model cos", "model max|e|", "layer cos", "layer max|e|", "policy", "layer");
  s << head;
  for (size_t i = 0; i < layers.size(); ++i) {
    const LayerSensitivity& l = layers[i];
    char line[256];
    const std::string policy = std::string(precisionName(l.policy)) + (l.outputLayer ? "*" : "");
    std::snprintf(line, sizeof line, "  %4zu  %-12s %-12.6f %-12.4g %-12.6f %-12.4g %-6s %s\n",
                  i + 1, l.opType.c_str(), l.modelError.cosine, l.modelError.maxAbs,
                  l.layerError.cosine, l.layerError.maxAbs, policy.c_str(), l.layer.c_str());
    s << line;
  }
  return s.str();
}

std::string SensitivityReport::toJson() const {
  nlohmann::json j;
  j["calibrator"] = describeCalibrator(calibrator);
  j["output_view"] = outputView;
  j["agreement"] = agreement;
  j["min_agreement"] = minAgreement;
  j["kept_for_agreement"] = keptForAgreement;
  j["kept_output_layers"] = keptOutputLayers;
  j["agreement_judge"] = agreementJudge;
  j["samples"] = samples;
  j["agreement_samples"] = agreementSamples;
  j["all_int8"] = errorJson(allInt8);
  j["with_policy"] = errorJson(withPolicy);
  j["layers"] = nlohmann::json::array();
  for (const auto& l : layers)
    j["layers"].push_back({{"layer", l.layer},
                           {"op", l.opType},
                           {"inputs", l.inputs},
                           {"layer_error", errorJson(l.layerError)},
                           {"model_error", errorJson(l.modelError)},
                           {"policy", precisionName(l.policy)},
                           {"output_layer", l.outputLayer}});
  j["calibrators"] = nlohmann::json::array();
  for (const auto& c : calibrators)
    j["calibrators"].push_back({{"calibrator", describeCalibrator(c.calibrator)},
                                {"model_error", errorJson(c.modelError)}});
  return j.dump(1) + "\n";
}

}  // namespace edgeinfer
