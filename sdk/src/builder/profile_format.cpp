#include "builder/profile_format.h"

#include "builder/container_format.h"

namespace edgeinfer::builder {
namespace {

const ContainerKind kKind{kProfileMagic, kProfileFormatVersion, "engine with shape profiles"};

Status corrupt(const std::string& what) {
  return Status(ErrorCode::kCorruptFile, std::string(kKind.name) + ": " + what);
}

}  // namespace

bool isProfileContainer(const void* data, size_t size) {
  return isContainer(kKind, data, size);
}

Expected<std::vector<uint8_t>> encodeProfileContainer(
    const std::vector<ShapeProfile>& profiles, const std::vector<std::vector<uint8_t>>& engines,
    const std::vector<uint8_t>& weights) {
  nlohmann::json h = nlohmann::json::object();
  nlohmann::json pj = nlohmann::json::array();
  for (const auto& p : profiles) pj.push_back(shapesToJson(p));
  h["profiles"] = std::move(pj);
  return encodeContainer(kKind, std::move(h), engines, weights);
}

Expected<DecodedProfileContainer> decodeProfileContainer(const void* data, size_t size) {
  EI_ASSIGN_OR_RETURN(DecodedContainer c, decodeContainer(kKind, data, size));
  const auto profiles = c.header.find("profiles");
  if (profiles == c.header.end() || !profiles->is_array())
    return corrupt("the header has no list of profiles");
  if (profiles->size() != c.blobs.size())
    return corrupt("the header lists " + std::to_string(profiles->size()) + " shape profiles but " +
                   std::to_string(c.blobs.size()) + " sub-engines");
  if (profiles->size() < 2)
    return corrupt("it holds " + std::to_string(profiles->size()) +
                   " profile(s); an engine of one shape is an ordinary engine file");
  DecodedProfileContainer d;
  for (size_t i = 0; i < profiles->size(); ++i) {
    EI_ASSIGN_OR_RETURN(ShapeProfile p,
                        shapesFromJson(kKind, (*profiles)[i], "profile " + std::to_string(i)));
    d.profiles.push_back(std::move(p));
  }
  d.engines = std::move(c.blobs);
  d.weights = c.weights;
  return d;
}

}  // namespace edgeinfer::builder
