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
                                                    const std::vector<uint8_t>& head,
                                                    const std::vector<uint8_t>& tail,
                                                    const std::vector<uint8_t>& weights) {
  nlohmann::json h = nlohmann::json::object();
  h["outputs"] = outputs;
  return encodeContainer(kKind, std::move(h), {head, tail}, weights);
}

Expected<DecodedSplitContainer> decodeSplitContainer(const void* data, size_t size) {
  EI_ASSIGN_OR_RETURN(DecodedContainer c, decodeContainer(kKind, data, size));
  if (c.blobs.size() != 2)
    return corrupt("it holds " + std::to_string(c.blobs.size()) +
                   " engine files, not 2 (the GPU head and the CPU tail)");
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
  d.head = c.blobs[0];
  d.tail = c.blobs[1];
  d.weights = c.weights;
  return d;
}

}  // namespace edgeinfer::builder
