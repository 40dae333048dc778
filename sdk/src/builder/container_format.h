// The layout shared by the SDK's container files, which hold several complete engine files
// (engines with shape profiles: profile_format.h; engines with shape ranges: range_format.h):
//
//   offset 0   8-byte magic                (one per kind of container)
//   offset 8   u32 container version
//   offset 12  u32 header length H
//   offset 16  header: H bytes of JSON     (the kind's own fields, plus "sdk_version",
//                                           "engine_bytes": [size of each blob],
//                                           "weights_bytes": size of the weights pool and
//                                           "payload_bytes": the sum of all)
//   then       the blobs, in the header's order
//   then       the weights pool (weight_pool.h): the initializers of the blobs, each distinct
//              one once; the blobs refer to it
//   last 4     u32 CRC-32 (zlib) of every byte before it
//
// All integers little-endian. A reader checks, in order: size, magic, version, header length,
// the size the header announces (truncation), checksum, the header's sizes against the
// payload. Every failure is kCorruptFile naming what is wrong and prefixed with the kind's
// name, except another version (kVersionMismatch). Version 1 of a kind had no weights pool
// (every blob held its own weights) and is still read.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "edgeinfer/engine.h"

namespace edgeinfer::builder {

/// What tells one kind of container from another.
struct ContainerKind {
  const char* magic;  ///< 8 bytes, not NUL-terminated
  uint32_t version;   ///< the version written; versions 1 to it are read
  const char* name;   ///< prefix of every error: "engine with shape profiles"
};

/// Whether `data` starts with `kind`'s magic.
bool isContainer(const ContainerKind& kind, const void* data, size_t size);

/// The container of `blobs` and the weights pool they refer to (`weights`, empty for none),
/// with `header` (a JSON object of the kind's fields; the sizes and the SDK version are added
/// here).
Expected<std::vector<uint8_t>> encodeContainer(const ContainerKind& kind, nlohmann::json header,
                                               const std::vector<std::vector<uint8_t>>& blobs,
                                               const std::vector<uint8_t>& weights = {});

struct DecodedContainer {
  nlohmann::json header;  ///< a JSON object (checksum verified)
  /// Per blob: offset and size in the container's bytes.
  std::vector<std::pair<size_t, size_t>> blobs;
  /// Offset and size of the weights pool (size 0: none).
  std::pair<size_t, size_t> weights{0, 0};
};

/// Checks and splits a container; the blobs are not decoded.
Expected<DecodedContainer> decodeContainer(const ContainerKind& kind, const void* data,
                                           size_t size);

/// Shapes in a container header: {"input": [dims]} (dims >= -1). `where` names the object in
/// errors ("profile 1"). kCorruptFile through `kind`'s name.
nlohmann::json shapesToJson(const ShapeProfile& shapes);
Expected<ShapeProfile> shapesFromJson(const ContainerKind& kind, const nlohmann::json& j,
                                      const std::string& where);

}  // namespace edgeinfer::builder
