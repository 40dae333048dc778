// Helpers for the tests of engine files: serializing an engine, loading bytes that must fail,
// and rewriting the SDK's container files (engines with shape profiles, ranges or a CPU tail,
// builder/container_format.h).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/byte_io.h"
#include "edgeinfer/engine.h"

namespace edgeinfer::test {

/// The engine's file bytes (empty, with a test failure, when it cannot be serialized).
inline std::vector<uint8_t> bytesOf(const Engine& e) {
  auto b = e.serialize();
  EXPECT_TRUE(b.ok()) << b.status().toString();
  return b.ok() ? *b : std::vector<uint8_t>();
}

/// Loads `bytes`, which must fail with `code`; returns the message.
inline std::string loadError(const std::vector<uint8_t>& bytes,
                             ErrorCode code = ErrorCode::kCorruptFile) {
  auto r = Engine::deserialize(bytes.data(), bytes.size());
  EXPECT_FALSE(r.ok());
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), code) << r.status().toString();
  return r.status().message();
}

/// Container bytes `b` with the header's JSON text rewritten by `edit` and the checksum fixed.
inline std::vector<uint8_t> withContainerHeader(const std::vector<uint8_t>& b,
                                                const std::function<void(std::string&)>& edit) {
  const uint32_t headerLen = bytes::getU32(b.data() + 12);
  std::string header(b.begin() + 16, b.begin() + 16 + headerLen);
  edit(header);
  std::vector<uint8_t> out(b.begin(), b.begin() + 12);
  bytes::putU32(out, static_cast<uint32_t>(header.size()));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), b.begin() + 16 + headerLen, b.end() - 4);
  bytes::putU32(out, bytes::crc32Of(out.data(), out.size()));
  return out;
}

/// `b` with its last 4 bytes replaced by the CRC-32 of the others.
inline void fixChecksum(std::vector<uint8_t>& b) {
  b.resize(b.size() - 4);
  bytes::putU32(b, bytes::crc32Of(b.data(), b.size()));
}

}  // namespace edgeinfer::test
