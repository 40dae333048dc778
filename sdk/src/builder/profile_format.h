// The file format of an engine with several shape profiles (BuilderConfig::shapeProfiles),
// version 1: a container of complete single-shape engines, one per profile.
//
//   offset 0   "EIPROFLS"                 8-byte magic
//   offset 8   u32 container version      (kProfileFormatVersion)
//   offset 12  u32 header length H
//   offset 16  header: H bytes of JSON     {"sdk_version", "profiles": [{input: [dims]}...],
//                                           "engine_bytes": [size of each sub-engine],
//                                           "payload_bytes": their sum}
//   then       the sub-engines, one per profile in the header's order, each a complete
//              engine file (engine_format.h: its own header, plan, weights and checksum)
//   last 4     u32 CRC-32 (zlib) of every byte before it
//
// All integers little-endian. A reader checks, in order: size, magic, version, header length,
// the size the header announces (truncation), checksum, header fields, the count of profiles
// against the count of sub-engines; the runtime then checks each sub-engine against its profile
// (runtime/profile_engine.h). Every failure is kCorruptFile naming what is wrong, except another
// version (kVersionMismatch). An engine of one shape keeps the single-engine format.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "edgeinfer/engine.h"

namespace edgeinfer::builder {

inline constexpr char kProfileMagic[8] = {'E', 'I', 'P', 'R', 'O', 'F', 'L', 'S'};
inline constexpr uint32_t kProfileFormatVersion = 1;

/// Whether `data` starts like a profile container (magic only).
bool isProfileContainer(const void* data, size_t size);

/// The container of `engines` (serialized single-shape engines), `profiles[i]` the input shapes
/// of engines[i]. Writes what it is given: the runtime checks that they agree.
Expected<std::vector<uint8_t>> encodeProfileContainer(
    const std::vector<ShapeProfile>& profiles, const std::vector<std::vector<uint8_t>>& engines);

struct DecodedProfileContainer {
  std::vector<ShapeProfile> profiles;
  /// Per profile: offset and size of its sub-engine in the container's bytes.
  std::vector<std::pair<size_t, size_t>> engines;
};

/// Checks and splits a container (the sub-engines are not decoded).
Expected<DecodedProfileContainer> decodeProfileContainer(const void* data, size_t size);

}  // namespace edgeinfer::builder
