// The file format of an engine with several shape profiles (BuilderConfig::shapeProfiles),
// version 2: a container (container_format.h) of complete single-shape engines, one per
// profile, and the weights pool they share (each distinct initializer once; version 1 had
// none and is still read).
//
//   magic      "EIPROFLS"
//   header     {"sdk_version", "profiles": [{input: [dims]}...], "engine_bytes": [size of each
//               sub-engine], "weights_bytes", "payload_bytes"}
//   blobs      the sub-engines, one per profile in the header's order, each a complete engine
//              file (engine_format.h: its own header, plan and checksum) whose larger
//              initializers are held in the weights pool (weight_pool.h)
//   weights    the pool
//
// A reader checks the container (container_format.h), then the count of profiles against the
// count of sub-engines; the runtime then checks each sub-engine against its profile
// (runtime/profile_engine.h). Every failure is kCorruptFile naming what is wrong, except another
// version (kVersionMismatch). An engine of one shape keeps the single-engine format.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "edgeinfer/engine.h"

namespace edgeinfer::builder {

inline constexpr char kProfileMagic[8] = {'E', 'I', 'P', 'R', 'O', 'F', 'L', 'S'};
inline constexpr uint32_t kProfileFormatVersion = 2;

/// Whether `data` starts like a profile container (magic only).
bool isProfileContainer(const void* data, size_t size);

/// The container of `engines` (serialized single-shape engines, their initializers in `weights`
/// where moveWeightsToPool() put them there), `profiles[i]` the input shapes of engines[i].
/// Writes what it is given: the runtime checks that they agree.
Expected<std::vector<uint8_t>> encodeProfileContainer(
    const std::vector<ShapeProfile>& profiles, const std::vector<std::vector<uint8_t>>& engines,
    const std::vector<uint8_t>& weights = {});

struct DecodedProfileContainer {
  std::vector<ShapeProfile> profiles;
  /// Per profile: offset and size of its sub-engine in the container's bytes.
  std::vector<std::pair<size_t, size_t>> engines;
  /// Offset and size of the weights pool (size 0: none).
  std::pair<size_t, size_t> weights{0, 0};
};

/// Checks and splits a container (the sub-engines are not decoded).
Expected<DecodedProfileContainer> decodeProfileContainer(const void* data, size_t size);

}  // namespace edgeinfer::builder
