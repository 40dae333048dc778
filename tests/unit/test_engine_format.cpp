// Engine serialisation: round trip, and every way a file can be wrong.
#include <gtest/gtest.h>

#include <zlib.h>

#include <cstring>

#include "builder/engine_format.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

std::unique_ptr<Engine> smallEngine() {
  test::TestModel m(13);
  m.input("x", {-1, 3, 5, 5});
  m.randomInitializer("w", {4, 3, 3, 3}, 1);
  m.randomInitializer("b", {4}, 2);
  auto& conv = m.node("Conv", {"x", "w", "b"}, {"c"});
  test::TestModel::attrInts(conv, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"y"});
  m.output("y");
  const std::string bytes = m.bytes();
  BuilderConfig cfg;
  cfg.backend = Backend::kCpu;
  auto e = Builder::buildFromBuffer(bytes.data(), bytes.size(), cfg);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  return e.ok() ? std::move(e).value() : nullptr;
}

Tensor runOnce(const Engine& e, int64_t batch) {
  auto ctx = e.createExecutionContext();
  EXPECT_TRUE(ctx.ok());
  Tensor x = Tensor::zeros(DataType::kFloat32, Shape{batch, 3, 5, 5});
  for (int64_t i = 0; i < x.numel(); ++i)
    x.data<float>()[i] = static_cast<float>((i * 37) % 11) / 11.f - 0.5f;
  auto out = (*ctx)->run({{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().toString();
  return out.ok() ? out->at("y") : Tensor();
}

std::vector<uint8_t> serialized() {
  auto e = smallEngine();
  auto bytes = e->serialize();
  EXPECT_TRUE(bytes.ok());
  return *bytes;
}

TEST(EngineFormat, RoundTripGivesSameOutputs) {
  auto e = smallEngine();
  ASSERT_TRUE(e);
  auto bytes = e->serialize();
  ASSERT_TRUE(bytes.ok());
  auto loaded = Engine::deserialize(bytes->data(), bytes->size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_EQ((*loaded)->info().deviceKey, e->info().deviceKey);
  EXPECT_EQ((*loaded)->info().modelHash, e->info().modelHash);
  ASSERT_EQ((*loaded)->inputs().size(), 1u);
  EXPECT_EQ((*loaded)->inputs()[0].dimNames[0], "N");
  for (int64_t batch : {1, 3}) {
    Tensor a = runOnce(*e, batch), b = runOnce(**loaded, batch);
    ASSERT_EQ(a.shape(), b.shape());
    EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.bytes()));
  }
}

TEST(EngineFormat, SerialisationIsDeterministic) {
  EXPECT_EQ(serialized(), serialized());
}

TEST(EngineFormat, SaveAndLoadFile) {
  test::TempDir dir;
  auto e = smallEngine();
  ASSERT_TRUE(e->save(dir.file("m.engine")).ok());
  auto loaded = Engine::load(dir.file("m.engine"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
}

TEST(EngineFormat, EmptyFile_n) {
  auto r = Engine::deserialize("", 0);
  EXPECT_EQ(r.status().code(), ErrorCode::kCorruptFile);
}

TEST(EngineFormat, MissingFile_n) {
  EXPECT_EQ(Engine::load("/nonexistent/x.engine").status().code(), ErrorCode::kNotFound);
}

TEST(EngineFormat, BadMagic_n) {
  auto b = serialized();
  b[0] = 'X';
  auto r = Engine::deserialize(b.data(), b.size());
  EXPECT_EQ(r.status().code(), ErrorCode::kCorruptFile);
  EXPECT_NE(r.status().message().find("not an EdgeInfer engine"), std::string::npos);
}

TEST(EngineFormat, EveryTruncationIsReported_n) {
  auto b = serialized();
  for (size_t len = 0; len < b.size(); len += std::max<size_t>(1, b.size() / 97)) {
    auto r = Engine::deserialize(b.data(), len);
    ASSERT_FALSE(r.ok()) << "truncated to " << len;
    EXPECT_EQ(r.status().code(), ErrorCode::kCorruptFile) << r.status().toString();
  }
}

TEST(EngineFormat, FlippedByteFailsChecksum_n) {
  auto b = serialized();
  for (size_t pos : {size_t{20}, b.size() / 2, b.size() - 5}) {
    auto c = b;
    c[pos] ^= 0x5a;
    auto r = Engine::deserialize(c.data(), c.size());
    EXPECT_EQ(r.status().code(), ErrorCode::kCorruptFile) << pos;
  }
}

TEST(EngineFormat, OtherFormatVersion_n) {
  auto b = serialized();
  b[8] = 99;
  auto r = Engine::deserialize(b.data(), b.size());
  EXPECT_EQ(r.status().code(), ErrorCode::kVersionMismatch);
  EXPECT_NE(r.status().message().find("99"), std::string::npos);
}

/// Rewrites one header field and fixes the checksum, as a file from elsewhere would be.
std::vector<uint8_t> withHeaderField(const std::string& from, const std::string& to) {
  auto b = serialized();
  std::string s(b.begin(), b.end() - 4);
  const auto pos = s.find(from);
  EXPECT_NE(pos, std::string::npos);
  const uint32_t headerLen = static_cast<uint32_t>(b[12] | b[13] << 8 | b[14] << 16 | b[15] << 24) +
                             static_cast<uint32_t>(to.size()) - static_cast<uint32_t>(from.size());
  s.replace(pos, from.size(), to);
  for (int i = 0; i < 4; ++i) s[12 + i] = static_cast<char>(headerLen >> (8 * i));
  std::vector<uint8_t> out(s.begin(), s.end());
  // The decoder's CRC is zlib's crc32: recompute it through a round trip of the API.
  uLong crc = crc32(0L, Z_NULL, 0);
  crc = crc32(crc, out.data(), static_cast<uInt>(out.size()));
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(crc >> (8 * i)));
  return out;
}

TEST(EngineFormat, OtherDeviceNamesBothKeys_n) {
  const std::string here = builder::currentDeviceKey(Backend::kCpu);
  auto b = withHeaderField("\"" + here + "\"", "\"cpu-riscv64\"");
  auto r = Engine::deserialize(b.data(), b.size());
  EXPECT_EQ(r.status().code(), ErrorCode::kDeviceMismatch);
  EXPECT_NE(r.status().message().find("cpu-riscv64"), std::string::npos);
  EXPECT_NE(r.status().message().find(here), std::string::npos);
}

TEST(EngineFormat, OtherSdkVersion_n) {
  auto b = withHeaderField(std::string("\"sdk_version\":\"") + sdkVersion() + "\"",
                           "\"sdk_version\":\"7.3.0\"");
  auto r = Engine::deserialize(b.data(), b.size());
  EXPECT_EQ(r.status().code(), ErrorCode::kVersionMismatch);
  EXPECT_NE(r.status().message().find("7.3.0"), std::string::npos);
}

TEST(EngineFormat, UnknownBackendInHeader_n) {
  auto b = withHeaderField("\"backend\":\"cpu\"", "\"backend\":\"tpu\"");
  EXPECT_EQ(Engine::deserialize(b.data(), b.size()).status().code(), ErrorCode::kCorruptFile);
}

}  // namespace
}  // namespace edgeinfer
