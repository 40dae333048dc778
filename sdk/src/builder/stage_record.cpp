#include "builder/stage_record.h"

#include "builder/engine_format.h"

namespace edgeinfer::builder {
namespace {
constexpr char kPrefix[] = "fp16:";
constexpr char kSep = '\t';
constexpr char kRunnerUpPrefix[] = "runner-ups:";

std::string engineDigest(const std::map<std::string, std::string>& inputs,
                         const std::map<std::string, std::string>& tactics,
                         const std::set<std::string>& fixed) {
  std::string text = "inputs:\n";
  for (const auto& [name, shape] : inputs) text += name + '=' + shape + '\n';
  text += "tactics:\n";
  for (const auto& [layer, id] : tactics) text += layer + '=' + id + '\n';
  text += "fixed:\n";
  for (const auto& layer : fixed) text += layer + '\n';
  return fnv1aHex(text.data(), text.size());
}

TimingEntry oneRowEntry(const std::string& id, double ms) {
  TimingEntry e;
  TacticTiming t;
  t.tacticId = id;
  t.medianMs = ms;
  e.table.push_back(t);
  e.chosen = id;
  return e;
}
}  // namespace

std::string stageSearchSignature(const std::string& modelHash,
                                 const std::map<std::string, std::string>& inputs,
                                 const std::map<std::string, std::string>& tactics,
                                 const std::set<std::string>& fixed) {
  return "int8-stage-search|" + modelHash + "|" + engineDigest(inputs, tactics, fixed);
}

std::string runnerUpSignature(const std::string& modelHash,
                              const std::map<std::string, std::string>& inputs,
                              const std::map<std::string, std::string>& tactics,
                              const std::set<std::string>& fixed) {
  return "runner-up-trials|" + modelHash + "|" + engineDigest(inputs, tactics, fixed);
}

std::optional<TimingEntry> runnerUpEntry(const std::map<std::string, std::string>& choices,
                                         double ms) {
  std::string id = kRunnerUpPrefix;
  bool first = true;
  for (const auto& [layer, tactic] : choices) {
    for (const std::string* s : {&layer, &tactic})
      if (s->empty() || s->find_first_of("\t\n") != std::string::npos) return std::nullopt;
    id += (first ? "" : "\n") + layer + '\t' + tactic;
    first = false;
  }
  return oneRowEntry(id, ms);
}

std::optional<std::map<std::string, std::string>> runnerUpChoices(const TimingEntry& entry) {
  if (entry.table.size() != 1 || entry.table[0].failed) return std::nullopt;
  const std::string& id = entry.table[0].tacticId;
  if (id.rfind(kRunnerUpPrefix, 0) != 0) return std::nullopt;
  std::map<std::string, std::string> choices;
  const std::string rest = id.substr(sizeof(kRunnerUpPrefix) - 1);
  if (rest.empty()) return choices;
  for (size_t p = 0;;) {
    const size_t q = rest.find('\n', p);
    const std::string pair = rest.substr(p, q == std::string::npos ? q : q - p);
    const size_t tab = pair.find('\t');
    if (tab == std::string::npos || tab == 0 || tab + 1 == pair.size() ||
        pair.find('\t', tab + 1) != std::string::npos)
      return std::nullopt;
    if (!choices.emplace(pair.substr(0, tab), pair.substr(tab + 1)).second) return std::nullopt;
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return choices;
}

TimingEntry stageSearchEntry(const std::vector<std::string>& fp16Layers, double ms) {
  std::string id = kPrefix;
  for (size_t i = 0; i < fp16Layers.size(); ++i)
    id += (i ? std::string(1, kSep) : "") + fp16Layers[i];
  return oneRowEntry(id, ms);
}

std::optional<std::vector<std::string>> stageSearchLayers(const TimingEntry& entry) {
  if (entry.table.size() != 1 || entry.table[0].failed) return std::nullopt;
  const std::string& id = entry.table[0].tacticId;
  if (id.rfind(kPrefix, 0) != 0) return std::nullopt;
  std::vector<std::string> layers;
  const std::string rest = id.substr(sizeof(kPrefix) - 1);
  if (rest.empty()) return layers;
  for (size_t p = 0;;) {
    const size_t q = rest.find(kSep, p);
    layers.push_back(rest.substr(p, q == std::string::npos ? q : q - p));
    if (layers.back().empty()) return std::nullopt;
    if (q == std::string::npos) break;
    p = q + 1;
  }
  return layers;
}

}  // namespace edgeinfer::builder
