#include "builder/container_format.h"

#include <cstring>

#include "core/byte_io.h"

namespace edgeinfer::builder {
namespace {

using bytes::crc32Of;
using bytes::getU32;
using bytes::putU32;

Status corrupt(const ContainerKind& kind, const std::string& what) {
  return Status(ErrorCode::kCorruptFile, std::string(kind.name) + ": " + what);
}

}  // namespace

bool isContainer(const ContainerKind& kind, const void* data, size_t size) {
  return size >= 8 && std::memcmp(data, kind.magic, 8) == 0;
}

Expected<std::vector<uint8_t>> encodeContainer(const ContainerKind& kind, nlohmann::json header,
                                               const std::vector<std::vector<uint8_t>>& blobs,
                                               const std::vector<uint8_t>& weights) {
  header["sdk_version"] = sdkVersion();
  nlohmann::json sizes = nlohmann::json::array();
  uint64_t payload = weights.size();
  for (const auto& b : blobs) {
    sizes.push_back(b.size());
    payload += b.size();
  }
  header["engine_bytes"] = std::move(sizes);
  header["weights_bytes"] = weights.size();
  header["payload_bytes"] = payload;
  const std::string text = header.dump();
  if (text.size() > UINT32_MAX)
    return Status(ErrorCode::kInternal, std::string(kind.name) + ": the header is over 4 GiB");

  std::vector<uint8_t> out;
  out.reserve(16 + text.size() + payload + 4);
  out.insert(out.end(), kind.magic, kind.magic + 8);
  putU32(out, kind.version);
  putU32(out, static_cast<uint32_t>(text.size()));
  out.insert(out.end(), text.begin(), text.end());
  for (const auto& b : blobs) out.insert(out.end(), b.begin(), b.end());
  out.insert(out.end(), weights.begin(), weights.end());
  putU32(out, crc32Of(out.data(), out.size()));
  return out;
}

Expected<DecodedContainer> decodeContainer(const ContainerKind& kind, const void* data,
                                           size_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  if (size < 20) return corrupt(kind, "the file is truncated (" + std::to_string(size) + " bytes)");
  if (!isContainer(kind, data, size)) return corrupt(kind, "bad magic bytes");
  const uint32_t version = getU32(p + 8);
  if (version < 1 || version > kind.version)
    return Status(ErrorCode::kVersionMismatch,
                  std::string(kind.name) + ": container version " + std::to_string(version) +
                      ", but this SDK (" + sdkVersion() + ") reads versions 1 to " +
                      std::to_string(kind.version) + ": rebuild the engine");
  const uint32_t headerLen = getU32(p + 12);
  if (static_cast<uint64_t>(headerLen) + 20 > size)
    return corrupt(kind, "the file is truncated (its header runs past the end: " +
                             std::to_string(size) + " bytes, the header alone needs " +
                             std::to_string(static_cast<uint64_t>(headerLen) + 20) + ")");
  // The header is read before the checksum is checked, so that a truncated file is reported as
  // truncated (with both sizes) rather than as a checksum mismatch; nothing in it is trusted
  // before the checksum matches.
  const std::string headerText(reinterpret_cast<const char*>(p + 16), headerLen);
  nlohmann::json h = nlohmann::json::parse(headerText, nullptr, /*allow_exceptions=*/false);
  const bool headerOk = !h.is_discarded() && h.is_object();
  if (headerOk) {
    const auto pl = h.find("payload_bytes");
    if (pl != h.end() && pl->is_number_unsigned()) {
      const uint64_t want = 16 + static_cast<uint64_t>(headerLen) + pl->get<uint64_t>() + 4;
      if (size < want)
        return corrupt(kind, "the file is truncated: " + std::to_string(size) +
                                 " bytes, its header announces " + std::to_string(want));
      if (size > want)
        return corrupt(kind, "the file has " + std::to_string(size - want) +
                                 " bytes more than its header announces (" + std::to_string(want) +
                                 ")");
    }
  }
  if (crc32Of(p, size - 4) != getU32(p + size - 4))
    return corrupt(kind, "checksum mismatch: the engine file is damaged");
  if (!headerOk) return corrupt(kind, "the header is not a JSON object");

  const auto sizes = h.find("engine_bytes");
  const auto payload = h.find("payload_bytes");
  if (sizes == h.end() || !sizes->is_array())
    return corrupt(kind, "the header has no list of sub-engine sizes");
  if (payload == h.end() || !payload->is_number_unsigned())
    return corrupt(kind, "the header has no payload size");
  const size_t payloadLen = size - 4 - 16 - headerLen;
  if (payload->get<uint64_t>() != payloadLen)
    return corrupt(kind, "the payload is " + std::to_string(payloadLen) +
                             " bytes, the header says " + std::to_string(payload->get<uint64_t>()));
  uint64_t weightsLen = 0;
  if (version >= 2) {
    const auto w = h.find("weights_bytes");
    if (w == h.end() || !w->is_number_unsigned())
      return corrupt(kind, "the header has no size of the weights pool");
    weightsLen = w->get<uint64_t>();
    if (weightsLen > payloadLen)
      return corrupt(kind, "the weights pool (" + std::to_string(weightsLen) +
                               " bytes) is larger than the payload (" + std::to_string(payloadLen) +
                               ")");
  }
  const uint64_t enginesLen = payloadLen - weightsLen;
  DecodedContainer d;
  size_t offset = 16 + headerLen;
  uint64_t sum = 0;
  for (size_t i = 0; i < sizes->size(); ++i) {
    const nlohmann::json& s = (*sizes)[i];
    if (!s.is_number_unsigned())
      return corrupt(kind, "the size of sub-engine " + std::to_string(i) + " is not a number");
    const uint64_t n = s.get<uint64_t>();
    if (n > enginesLen - sum)  // (sum <= enginesLen here: no wrap-around)
      return corrupt(kind, "the sub-engines' sizes add up to more than the payload (" +
                               std::to_string(enginesLen) + " bytes without the weights)");
    sum += n;
    d.blobs.emplace_back(offset, static_cast<size_t>(n));
    offset += static_cast<size_t>(n);
  }
  if (sum != enginesLen)
    return corrupt(kind, "the sub-engines' sizes add up to " + std::to_string(sum) +
                             " bytes, the payload is " + std::to_string(enginesLen) +
                             " without the weights");
  d.weights = {offset, static_cast<size_t>(weightsLen)};
  d.header = std::move(h);
  return d;
}

nlohmann::json shapesToJson(const ShapeProfile& shapes) {
  nlohmann::json o = nlohmann::json::object();
  for (const auto& [name, shape] : shapes) o[name] = shape.dims();
  return o;
}

Expected<ShapeProfile> shapesFromJson(const ContainerKind& kind, const nlohmann::json& j,
                                      const std::string& where) {
  if (!j.is_object()) return corrupt(kind, where + " is not an object");
  ShapeProfile out;
  for (const auto& [name, dims] : j.items()) {
    if (!dims.is_array())
      return corrupt(kind, where + ": the shape of '" + name + "' is not a list");
    std::vector<int64_t> v;
    for (const auto& x : dims) {
      if (!x.is_number_integer() || x.get<int64_t>() < -1)
        return corrupt(kind,
                       where + ": the shape of '" + name + "' holds something other than a size");
      v.push_back(x.get<int64_t>());
    }
    out[name] = Shape(std::move(v));
  }
  return out;
}

}  // namespace edgeinfer::builder
