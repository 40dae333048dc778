#include "builder/split_format.h"

#include <set>

#include "builder/container_format.h"

namespace edgeinfer::builder {
namespace {

const ContainerKind kKind{kSplitMagic, kSplitFormatVersion, "engine with a CPU tail"};

Status corrupt(const std::string& what) {
  return Status(ErrorCode::kCorruptFile, std::string(kKind.name) + ": " + what);
}

}  // namespace

bool isSplitContainer(const void* data, size_t size) {
  return isContainer(kKind, data, size);
}

Expected<std::vector<uint8_t>> encodeSplitContainer(const std::vector<std::string>& outputs,
                                                    const std::vector<graph::BoundedValue>& bounded,
                                                    const std::vector<uint8_t>& head,
                                                    const std::vector<uint8_t>* tail,
                                                    const std::vector<uint8_t>& weights) {
  nlohmann::json h = nlohmann::json::object();
  h["outputs"] = outputs;
  if (!bounded.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& b : bounded)
      list.push_back(
          {{"name", b.name}, {"padded", b.padded}, {"count", b.count}, {"axis", b.axis}});
    h["bounded"] = std::move(list);
  }
  std::vector<std::vector<uint8_t>> blobs{head};
  if (tail) blobs.push_back(*tail);
  return encodeContainer(kKind, std::move(h), blobs, weights);
}

Expected<DecodedSplitContainer> decodeSplitContainer(const void* data, size_t size) {
  EI_ASSIGN_OR_RETURN(DecodedContainer c, decodeContainer(kKind, data, size));
  if (c.blobs.size() != 1 && c.blobs.size() != 2)
    return corrupt("it holds " + std::to_string(c.blobs.size()) +
                   " engine files, not 2 (the GPU head and the CPU tail) or 1 (the head)");
  const auto outputs = c.header.find("outputs");
  if (outputs == c.header.end() || !outputs->is_array() || outputs->empty())
    return corrupt("the header has no list of outputs");
  DecodedSplitContainer d;
  std::set<std::string> seen;
  for (const auto& o : *outputs) {
    if (!o.is_string() || o.get<std::string>().empty())
      return corrupt("the list of outputs holds something other than a name");
    if (!seen.insert(o.get<std::string>()).second)
      return corrupt("output '" + o.get<std::string>() + "' is listed twice");
    d.outputs.push_back(o.get<std::string>());
  }
  if (const auto b = c.header.find("bounded"); b != c.header.end()) {
    if (!b->is_array()) return corrupt("\"bounded\" is not a list");
    for (const auto& v : *b) {
      const auto text = [&](const char* key) -> std::string {
        const auto it = v.is_object() ? v.find(key) : v.end();
        return it != v.end() && it->is_string() ? it->get<std::string>() : std::string();
      };
      const auto axis = v.is_object() ? v.find("axis") : v.end();
      graph::BoundedValue bv{text("name"), text("padded"), text("count"), -1};
      if (axis != v.end() && axis->is_number_integer() &&
          (axis->get<int64_t>() == 0 || axis->get<int64_t>() == 1))
        bv.axis = static_cast<int>(axis->get<int64_t>());
      if (bv.name.empty() || bv.padded.empty() || bv.count.empty() ||
          (bv.axis != 0 && bv.axis != 1))
        return corrupt("a bounded value lacks its name, padded form, count or axis (0 or 1)");
      d.bounded.push_back(std::move(bv));
    }
  }
  d.head = c.blobs[0];
  d.hasTail = c.blobs.size() == 2;
  if (d.hasTail) d.tail = c.blobs[1];
  if (!d.hasTail && d.bounded.empty())
    return corrupt("it holds the head only, and no bounded value follows it");
  d.weights = c.weights;
  return d;
}

}  // namespace edgeinfer::builder
