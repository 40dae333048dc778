#include "builder/profile_format.h"

#include <cstring>
#include <nlohmann/json.hpp>

#include "builder/engine_format.h"
#include "core/byte_io.h"

namespace edgeinfer::builder {
namespace {

using bytes::crc32Of;
using bytes::getU32;
using bytes::putU32;

Status corrupt(const std::string& what) {
  return Status(ErrorCode::kCorruptFile, "engine with shape profiles: " + what);
}

}  // namespace

bool isProfileContainer(const void* data, size_t size) {
  return size >= 8 && std::memcmp(data, kProfileMagic, 8) == 0;
}

Expected<std::vector<uint8_t>> encodeProfileContainer(
    const std::vector<ShapeProfile>& profiles, const std::vector<std::vector<uint8_t>>& engines) {
  nlohmann::json h;
  h["sdk_version"] = sdkVersion();
  nlohmann::json pj = nlohmann::json::array();
  for (const auto& p : profiles) {
    nlohmann::json o = nlohmann::json::object();
    for (const auto& [name, shape] : p) o[name] = shape.dims();
    pj.push_back(std::move(o));
  }
  h["profiles"] = std::move(pj);
  nlohmann::json sizes = nlohmann::json::array();
  uint64_t payload = 0;
  for (const auto& e : engines) {
    sizes.push_back(e.size());
    payload += e.size();
  }
  h["engine_bytes"] = std::move(sizes);
  h["payload_bytes"] = payload;
  const std::string header = h.dump();
  if (header.size() > UINT32_MAX)
    return Status(ErrorCode::kInternal, "the profile container header is over 4 GiB");

  std::vector<uint8_t> out;
  out.reserve(16 + header.size() + payload + 4);
  out.insert(out.end(), kProfileMagic, kProfileMagic + 8);
  putU32(out, kProfileFormatVersion);
  putU32(out, static_cast<uint32_t>(header.size()));
  out.insert(out.end(), header.begin(), header.end());
  for (const auto& e : engines) out.insert(out.end(), e.begin(), e.end());
  putU32(out, crc32Of(out.data(), out.size()));
  return out;
}

Expected<DecodedProfileContainer> decodeProfileContainer(const void* data, size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (size < 20) return corrupt("the file is truncated (" + std::to_string(size) + " bytes)");
  if (!isProfileContainer(data, size)) return corrupt("bad magic bytes");
  const uint32_t version = getU32(p + 8);
  if (version != kProfileFormatVersion)
    return Status(ErrorCode::kVersionMismatch,
                  "engine with shape profiles: container version " + std::to_string(version) +
                      ", but this SDK (" + sdkVersion() + ") reads version " +
                      std::to_string(kProfileFormatVersion) + ": rebuild the engine");
  const uint32_t headerLen = getU32(p + 12);
  if (static_cast<uint64_t>(headerLen) + 20 > size)
    return corrupt("the file is truncated (its header runs past the end: " + std::to_string(size) +
                   " bytes, the header alone needs " +
                   std::to_string(static_cast<uint64_t>(headerLen) + 20) + ")");
  // The header is read before the checksum is checked, so that a truncated file is reported as
  // truncated (with both sizes) rather than as a checksum mismatch; nothing in it is trusted
  // before the checksum matches.
  const std::string headerText(reinterpret_cast<const char*>(p + 16), headerLen);
  const nlohmann::json h = nlohmann::json::parse(headerText, nullptr, /*allow_exceptions=*/false);
  const bool headerOk = !h.is_discarded() && h.is_object();
  if (headerOk) {
    const auto pl = h.find("payload_bytes");
    if (pl != h.end() && pl->is_number_unsigned()) {
      const uint64_t want = 16 + static_cast<uint64_t>(headerLen) + pl->get<uint64_t>() + 4;
      if (size < want)
        return corrupt("the file is truncated: " + std::to_string(size) +
                       " bytes, its header announces " + std::to_string(want));
      if (size > want)
        return corrupt("the file has " + std::to_string(size - want) +
                       " bytes more than its header announces (" + std::to_string(want) + ")");
    }
  }
  if (crc32Of(p, size - 4) != getU32(p + size - 4))
    return corrupt("checksum mismatch: the engine file is damaged");
  if (!headerOk) return corrupt("the header is not a JSON object");

  const auto profiles = h.find("profiles");
  const auto sizes = h.find("engine_bytes");
  const auto payload = h.find("payload_bytes");
  if (profiles == h.end() || !profiles->is_array())
    return corrupt("the header has no list of profiles");
  if (sizes == h.end() || !sizes->is_array())
    return corrupt("the header has no list of sub-engine sizes");
  if (payload == h.end() || !payload->is_number_unsigned())
    return corrupt("the header has no payload size");
  if (profiles->size() != sizes->size())
    return corrupt("the header lists " + std::to_string(profiles->size()) + " shape profiles but " +
                   std::to_string(sizes->size()) + " sub-engines");
  if (profiles->size() < 2)
    return corrupt("it holds " + std::to_string(profiles->size()) +
                   " profile(s); an engine of one shape is an ordinary engine file");

  DecodedProfileContainer d;
  for (size_t i = 0; i < profiles->size(); ++i) {
    const nlohmann::json& pj = (*profiles)[i];
    if (!pj.is_object()) return corrupt("profile " + std::to_string(i) + " is not an object");
    ShapeProfile profile;
    for (const auto& [name, dims] : pj.items()) {
      if (!dims.is_array())
        return corrupt("profile " + std::to_string(i) + ": the shape of '" + name +
                       "' is not a list");
      std::vector<int64_t> v;
      for (const auto& x : dims) {
        if (!x.is_number_integer() || x.get<int64_t>() < -1)
          return corrupt("profile " + std::to_string(i) + ": the shape of '" + name +
                         "' holds something other than a size");
        v.push_back(x.get<int64_t>());
      }
      profile[name] = Shape(std::move(v));
    }
    d.profiles.push_back(std::move(profile));
  }
  const size_t payloadLen = size - 4 - 16 - headerLen;
  if (payload->get<uint64_t>() != payloadLen)
    return corrupt("the payload is " + std::to_string(payloadLen) + " bytes, the header says " +
                   std::to_string(payload->get<uint64_t>()));
  size_t offset = 16 + headerLen;
  uint64_t sum = 0;
  for (size_t i = 0; i < sizes->size(); ++i) {
    const nlohmann::json& s = (*sizes)[i];
    if (!s.is_number_unsigned())
      return corrupt("the size of sub-engine " + std::to_string(i) + " is not a number");
    const uint64_t n = s.get<uint64_t>();
    sum += n;
    if (sum > payloadLen)
      return corrupt("the sub-engines' sizes add up to more than the payload (" +
                     std::to_string(payloadLen) + " bytes)");
    d.engines.emplace_back(offset, static_cast<size_t>(n));
    offset += static_cast<size_t>(n);
  }
  if (sum != payloadLen)
    return corrupt("the sub-engines' sizes add up to " + std::to_string(sum) +
                   " bytes, the payload is " + std::to_string(payloadLen));
  return d;
}

}  // namespace edgeinfer::builder
