// Input shapes and shape profiles (BuilderConfig::inputShapes / shapeProfiles) on the CPU
// backend: the checks of the given shapes, profile selection at run time, the profile
// container file and every way it can be wrong. The GPU side is in test_cuda_profiles.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "builder/engine_format.h"
#include "builder/profile_format.h"
#include "core/byte_io.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "runtime/graph_engine.h"
#include "runtime/profile_engine.h"
#include "test_container.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using test::bytesOf;
using test::fixChecksum;
using test::loadError;
using test::TestModel;
using test::withContainerHeader;

/// x: [N, 3, 5, 5] -> Conv(4, 3x3, pad 1) -> Relu -> Conv(4, 1x1) -> y.
TestModel convModel(uint32_t seed = 1) {
  TestModel m(13);
  m.input("x", {-1, 3, 5, 5});
  m.randomInitializer("w", {4, 3, 3, 3}, seed);
  m.randomInitializer("b", {4}, seed + 1);
  m.randomInitializer("w2", {4, 4, 1, 1}, seed + 2);
  auto& conv = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  TestModel::attrInts(conv, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"}, "relu");
  m.node("Conv", {"r", "w2"}, {"y"}, "conv2");
  m.output("y");
  return m;
}

/// a: [N, 4], b: [N, 4] -> Add -> y (b broadcasts when its N is 1).
TestModel addModel() {
  TestModel m(13);
  m.input("a", {-1, 4});
  m.input("b", {-1, 4});
  m.node("Add", {"a", "b"}, {"y"}, "add");
  m.output("y");
  return m;
}

BuilderConfig cpuConfig() {
  BuilderConfig c;
  c.backend = Backend::kCpu;
  return c;
}

Expected<std::unique_ptr<Engine>> build(const TestModel& m, const BuilderConfig& c) {
  const std::string bytes = m.bytes();
  return Builder::buildFromBuffer(bytes.data(), bytes.size(), c);
}

std::unique_ptr<Engine> mustBuild(const TestModel& m, const BuilderConfig& c) {
  auto e = build(m, c);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  return e.ok() ? std::move(e).value() : nullptr;
}

/// The error of building `m` with `c`, which must fail with kInvalidArgument.
std::string buildError(const TestModel& m, const BuilderConfig& c) {
  auto e = build(m, c);
  EXPECT_FALSE(e.ok());
  if (e.ok()) return "";
  EXPECT_EQ(e.status().code(), ErrorCode::kInvalidArgument) << e.status().toString();
  return e.status().message();
}

#define EXPECT_HAS(text, part)                               \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "'" << (text) << "' lacks " << (part)

Tensor input(const Shape& s, int salt = 0) {
  Tensor t = Tensor::zeros(DataType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = static_cast<float>((i * 37 + salt * 11) % 23) / 23.f - 0.5f;
  return t;
}

/// y of `e` for input x of shape `s`, on a fresh context.
Tensor runX(const Engine& e, const Shape& s, int salt = 0) {
  auto ctx = e.createExecutionContext();
  EXPECT_TRUE(ctx.ok());
  if (!ctx.ok()) return Tensor();
  auto out = (*ctx)->run({{"x", input(s, salt)}});
  EXPECT_TRUE(out.ok()) << out.status().toString();
  return out.ok() ? out->at("y") : Tensor();
}

void expectSame(const Tensor& a, const Tensor& b) {
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.bytes()));
}

BuilderConfig twoBatches() {
  BuilderConfig c = cpuConfig();
  c.shapeProfiles = {{{"x", Shape{1, 3, 5, 5}}}, {{"x", Shape{4, 3, 5, 5}}}};
  return c;
}

// ---- inputShapes -------------------------------------------------------------------------------

TEST(ShapeProfiles, InputShapesFixTheDynamicDims) {
  BuilderConfig c = cpuConfig();
  c.inputShapes = {{"x", Shape{2, 3, 5, 5}}};
  auto e = mustBuild(convModel(), c);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->inputs()[0].shape, (Shape{2, 3, 5, 5}));
  EXPECT_EQ(e->outputs()[0].shape, (Shape{2, 4, 5, 5}));
  ASSERT_EQ(e->profiles().size(), 1u);
  EXPECT_EQ(e->profiles()[0].at("x"), (Shape{2, 3, 5, 5}));
  auto dynamic = mustBuild(convModel(), cpuConfig());
  expectSame(runX(*e, {2, 3, 5, 5}), runX(*dynamic, {2, 3, 5, 5}));
}

TEST(ShapeProfiles, InputShapesWinOverDynamicDimDefault) {
  BuilderConfig c = cpuConfig();
  c.dynamicDimDefault = 7;
  c.inputShapes = {{"x", Shape{3, 3, 5, 5}}};
  auto e = mustBuild(convModel(), c);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->inputs()[0].shape, (Shape{3, 3, 5, 5}));
}

TEST(ShapeProfiles, OneShapeKeepsTheSingleEngineFormatByteForByte) {
  // A fixed dynamic dim through --dynamic-dim (the code path engines were built with before
  // profiles existed), through inputShapes and through a single profile: the same file.
  BuilderConfig byDefault = cpuConfig();
  byDefault.dynamicDimDefault = 2;
  BuilderConfig byShape = cpuConfig();
  byShape.inputShapes = {{"x", Shape{2, 3, 5, 5}}};
  BuilderConfig byProfile = cpuConfig();
  byProfile.shapeProfiles = {{{"x", Shape{2, 3, 5, 5}}}};
  const auto a = bytesOf(*mustBuild(convModel(), byDefault));
  const auto b = bytesOf(*mustBuild(convModel(), byShape));
  const auto c = bytesOf(*mustBuild(convModel(), byProfile));
  ASSERT_GE(a.size(), 8u);
  EXPECT_EQ(0, std::memcmp(a.data(), "EIENGINE", 8));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a, c);
  // And without any shape option the engine stays dynamic in the single format.
  const auto d = bytesOf(*mustBuild(convModel(), cpuConfig()));
  EXPECT_EQ(0, std::memcmp(d.data(), "EIENGINE", 8));
  EXPECT_NE(a, d);
}

TEST(ShapeProfiles, UnknownInputName_n) {
  BuilderConfig c = cpuConfig();
  c.inputShapes = {{"images", Shape{1, 3, 5, 5}}};
  const std::string m = buildError(convModel(), c);
  EXPECT_HAS(m, "'images'");
  EXPECT_HAS(m, "not an input");
  EXPECT_HAS(m, "'x'");
}

TEST(ShapeProfiles, WrongRank_n) {
  BuilderConfig c = cpuConfig();
  c.inputShapes = {{"x", Shape{1, 3, 5}}};
  const std::string m = buildError(convModel(), c);
  EXPECT_HAS(m, "input 'x'");
  EXPECT_HAS(m, "1x3x5 has rank 3");
  EXPECT_HAS(m, "rank 4 (Nx3x5x5)");
}

TEST(ShapeProfiles, ContradictsAStaticDim_n) {
  BuilderConfig c = cpuConfig();
  c.inputShapes = {{"x", Shape{1, 8, 5, 5}}};
  const std::string m = buildError(convModel(), c);
  EXPECT_HAS(m, "input 'x' dim 1");
  EXPECT_HAS(m, "fixes it to 3");
  EXPECT_HAS(m, "gives 8");
}

TEST(ShapeProfiles, DimBelowOne_n) {
  for (int64_t bad : {int64_t{0}, int64_t{-1}, int64_t{-5}}) {
    BuilderConfig c = cpuConfig();
    c.inputShapes = {{"x", Shape{bad, 3, 5, 5}}};
    const std::string m = buildError(convModel(), c);
    EXPECT_HAS(m, "input 'x' dim 0: " + std::to_string(bad) + " is not a size");
    EXPECT_HAS(m, "the model has 'N'");
  }
  BuilderConfig c = cpuConfig();
  c.inputShapes = {{"x", Shape{1, 3, 0, 5}}};  // a static dim given as 0
  const std::string m = buildError(convModel(), c);
  EXPECT_HAS(m, "input 'x' dim 2: 0 is not a size");
  EXPECT_HAS(m, "the model has 5");
}

// ---- profiles --------------------------------------------------------------------------------

TEST(ShapeProfiles, TwoProfilesRunTheirShapes) {
  auto e = mustBuild(convModel(), twoBatches());
  ASSERT_TRUE(e);
  // The batch differs between the profiles: -1; the rest is fixed.
  EXPECT_EQ(e->inputs()[0].shape, (Shape{-1, 3, 5, 5}));
  EXPECT_EQ(e->outputs()[0].shape, (Shape{-1, 4, 5, 5}));
  const auto profiles = e->profiles();
  ASSERT_EQ(profiles.size(), 2u);
  EXPECT_EQ(profiles[0].at("x"), (Shape{1, 3, 5, 5}));
  EXPECT_EQ(profiles[1].at("x"), (Shape{4, 3, 5, 5}));
  EXPECT_EQ(formatShapeProfile(profiles[1]), "x:4x3x5x5");

  auto dynamic = mustBuild(convModel(), cpuConfig());
  auto ctx = e->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  // Alternate the shapes on one context: each run must give the dynamic engine's result.
  int salt = 0;
  for (int64_t batch : {1, 4, 1, 4, 4, 1}) {
    const Shape s{batch, 3, 5, 5};
    auto out = (*ctx)->run({{"x", input(s, ++salt)}});
    ASSERT_TRUE(out.ok()) << out.status().toString();
    expectSame(out->at("y"), runX(*dynamic, s, salt));
  }
  // Activation memory: the largest profile's (batch 4), as a batch-4 engine plans it.
  BuilderConfig four = cpuConfig();
  four.inputShapes = {{"x", Shape{4, 3, 5, 5}}};
  auto e4 = mustBuild(convModel(), four);
  auto c4 = e4->createExecutionContext();
  ASSERT_TRUE((*c4)->run({{"x", input({4, 3, 5, 5})}}).ok());
  EXPECT_GT((*ctx)->stats().activationNaiveBytes, 0);
  EXPECT_EQ((*ctx)->stats().activationNaiveBytes, (*c4)->stats().activationNaiveBytes);
  EXPECT_EQ((*ctx)->stats().activationArenaBytes, (*c4)->stats().activationArenaBytes);
}

TEST(ShapeProfiles, ProfilesShareTheHostCopyOfEqualConstants) {
  auto e = mustBuild(convModel(), twoBatches());
  ASSERT_TRUE(e);
  const auto* pe = dynamic_cast<const runtime::ProfileEngine*>(e.get());
  ASSERT_NE(pe, nullptr);
  const auto weightOf = [&](const Engine& sub) {
    const auto* g = dynamic_cast<const runtime::GraphEngine*>(&sub);
    return g ? g->graph().constant("w") : nullptr;
  };
  const auto shared = [&](const runtime::ProfileEngine& p) {
    const Tensor* w0 = weightOf(p.profileEngine(0));
    const Tensor* w1 = weightOf(p.profileEngine(1));
    return w0 && w1 && w0 != w1 && w0->raw() == w1->raw();
  };
  EXPECT_TRUE(shared(*pe));
  // The file holds a copy per profile; a load shares them again.
  auto loaded = Engine::deserialize(bytesOf(*e).data(), bytesOf(*e).size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  const auto* lpe = dynamic_cast<const runtime::ProfileEngine*>(loaded->get());
  ASSERT_NE(lpe, nullptr);
  EXPECT_TRUE(shared(*lpe));
  // Weights are reported per profile, summed.
  EXPECT_EQ(e->info().weightBytes, 2 * (4 * 3 * 3 * 3 + 4 + 4 * 4) * 4);
}

TEST(ShapeProfiles, ProfilesNameOnlyWhatVaries) {
  BuilderConfig c = cpuConfig();
  c.inputShapes = {{"b", Shape{1, 4}}};
  c.shapeProfiles = {{{"a", Shape{1, 4}}}, {{"a", Shape{3, 4}}}};
  auto e = mustBuild(addModel(), c);
  ASSERT_TRUE(e);
  const auto p = e->profiles();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(formatShapeProfile(p[0]), "a:1x4,b:1x4");
  EXPECT_EQ(formatShapeProfile(p[1]), "a:3x4,b:1x4");
  EXPECT_EQ(e->inputs()[1].shape, (Shape{1, 4}));  // b is the same in both
  auto ctx = e->createExecutionContext();
  Tensor a = input({3, 4}, 1), b = input({1, 4}, 2);
  auto out = (*ctx)->run({{"a", a}, {"b", b}});
  ASSERT_TRUE(out.ok()) << out.status().toString();
  const Tensor& y = out->at("y");
  ASSERT_EQ(y.shape(), (Shape{3, 4}));
  for (int64_t i = 0; i < 12; ++i)
    EXPECT_EQ(y.data<float>()[i], a.data<float>()[i] + b.data<float>()[i % 4]);
}

TEST(ShapeProfiles, ErrorsNameTheProfile_n) {
  BuilderConfig c = cpuConfig();
  c.shapeProfiles = {{{"x", Shape{1, 3, 5, 5}}}, {{"x", Shape{2, 3, 6, 5}}}};
  const std::string m = buildError(convModel(), c);
  EXPECT_HAS(m, "shape profile 1: input 'x' dim 2");
}

TEST(ShapeProfiles, DuplicateProfiles_n) {
  BuilderConfig c = cpuConfig();
  c.shapeProfiles = {
      {{"x", Shape{1, 3, 5, 5}}}, {{"x", Shape{2, 3, 5, 5}}}, {{"x", Shape{2, 3, 5, 5}}}};
  const std::string m = buildError(convModel(), c);
  EXPECT_HAS(m, "shape profiles 1 and 2 are the same (x:2x3x5x5)");
}

TEST(ShapeProfiles, ProfilesEqualOnceInputShapesApply_n) {
  BuilderConfig c = cpuConfig();
  c.inputShapes = {{"b", Shape{1, 4}}};
  c.shapeProfiles = {{{"a", Shape{1, 4}}}, {{"a", Shape{1, 4}}, {"b", Shape{1, 4}}}};
  const std::string m = buildError(addModel(), c);
  EXPECT_HAS(m, "shape profiles 0 and 1 are the same");
}

TEST(ShapeProfiles, ProfilesOfInconsistentRanks_n) {
  BuilderConfig c = cpuConfig();
  c.shapeProfiles = {{{"x", Shape{1, 3, 5, 5}}}, {{"x", Shape{4, 3, 5}}}};
  const std::string m = buildError(convModel(), c);
  EXPECT_HAS(m, "shape profile 1: input 'x'");
  EXPECT_HAS(m, "has rank 3");
}

TEST(ShapeProfiles, ProfileNamesAnUnknownInput_n) {
  BuilderConfig c = twoBatches();
  c.shapeProfiles[1]["y"] = Shape{4, 4, 5, 5};  // an output, not an input
  const std::string m = buildError(convModel(), c);
  EXPECT_HAS(m, "shape profile 1: a shape is given for 'y', which is not an input");
}

TEST(ShapeProfiles, ShapeInNoProfileListsTheProfiles_n) {
  auto e = mustBuild(convModel(), twoBatches());
  ASSERT_TRUE(e);
  auto ctx = e->createExecutionContext();
  const Status s = (*ctx)->setInput("x", input({2, 3, 5, 5}));
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_HAS(s.message(), "2x3x5x5");
  EXPECT_HAS(s.message(), "1x3x5x5, 4x3x5x5");
}

TEST(ShapeProfiles, CombinationInNoProfileListsTheProfiles_n) {
  BuilderConfig c = cpuConfig();
  c.shapeProfiles = {{{"a", Shape{1, 4}}, {"b", Shape{1, 4}}},
                     {{"a", Shape{3, 4}}, {"b", Shape{3, 4}}}};
  auto e = mustBuild(addModel(), c);
  ASSERT_TRUE(e);
  auto ctx = e->createExecutionContext();
  // Each shape is in a profile, the pair is in none.
  ASSERT_TRUE((*ctx)->setInput("a", input({1, 4})).ok());
  ASSERT_TRUE((*ctx)->setInput("b", input({3, 4})).ok());
  const Status s = (*ctx)->execute();
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_HAS(s.message(), "(a:1x4,b:3x4) are no shape profile");
  EXPECT_HAS(s.message(), "[0] a:1x4,b:1x4; [1] a:3x4,b:3x4");
  // The context is still usable with a shape of a profile.
  ASSERT_TRUE((*ctx)->setInput("b", input({1, 4})).ok());
  EXPECT_TRUE((*ctx)->execute().ok());
}

TEST(ShapeProfiles, ContextErrors_n) {
  auto e = mustBuild(convModel(), twoBatches());
  ASSERT_TRUE(e);
  auto ctx = e->createExecutionContext();
  EXPECT_EQ((*ctx)->execute().code(), ErrorCode::kInvalidArgument);                // nothing bound
  EXPECT_EQ((*ctx)->getOutput("y").status().code(), ErrorCode::kInvalidArgument);  // no run yet
  EXPECT_EQ((*ctx)->getOutput("nope").status().code(), ErrorCode::kNotFound);
  EXPECT_EQ((*ctx)->setInput("nope", input({1, 3, 5, 5})).code(), ErrorCode::kNotFound);
  EXPECT_EQ((*ctx)->setInput("x", Tensor::zeros(DataType::kInt64, Shape{1, 3, 5, 5})).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ((*ctx)->setInput("x", Tensor()).code(), ErrorCode::kInvalidArgument);
}

// ---- the container file ----------------------------------------------------------------------

std::vector<uint8_t> containerBytes() {
  auto e = mustBuild(convModel(), twoBatches());
  return e ? bytesOf(*e) : std::vector<uint8_t>();
}

/// The serialized single-shape engine of convModel(seed) at batch `batch`.
std::vector<uint8_t> subEngine(int64_t batch, uint32_t seed = 1) {
  BuilderConfig c = cpuConfig();
  c.inputShapes = {{"x", Shape{batch, 3, 5, 5}}};
  auto e = mustBuild(convModel(seed), c);
  return e ? bytesOf(*e) : std::vector<uint8_t>();
}

ShapeProfile batchProfile(int64_t batch) {
  return {{"x", Shape{batch, 3, 5, 5}}};
}

TEST(ShapeProfiles, ContainerRoundTrip) {
  auto e = mustBuild(convModel(), twoBatches());
  ASSERT_TRUE(e);
  const auto bytes = bytesOf(*e);
  ASSERT_GE(bytes.size(), 8u);
  EXPECT_EQ(0, std::memcmp(bytes.data(), "EIPROFLS", 8));
  auto loaded = Engine::deserialize(bytes.data(), bytes.size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_EQ((*loaded)->profiles(), e->profiles());
  EXPECT_EQ((*loaded)->inputs()[0].shape, (Shape{-1, 3, 5, 5}));
  EXPECT_EQ((*loaded)->info().modelHash, e->info().modelHash);
  for (int64_t batch : {4, 1})
    expectSame(runX(**loaded, {batch, 3, 5, 5}), runX(*e, {batch, 3, 5, 5}));
  // Deterministic: the loaded engine serializes to the same bytes, and so does a rebuild.
  EXPECT_EQ(bytesOf(**loaded), bytes);
  EXPECT_EQ(containerBytes(), bytes);
}

TEST(ShapeProfiles, ContainerSaveAndLoadFile) {
  test::TempDir dir;
  auto e = mustBuild(convModel(), twoBatches());
  ASSERT_TRUE(e->save(dir.file("p.engine")).ok());
  auto loaded = Engine::load(dir.file("p.engine"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_EQ((*loaded)->profiles().size(), 2u);
}

TEST(ShapeProfiles, ContainerTruncated_n) {
  const auto b = containerBytes();
  ASSERT_GT(b.size(), 100u);
  for (size_t len = 0; len < b.size(); len += std::max<size_t>(1, b.size() / 89)) {
    const std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(len));
    auto r = Engine::deserialize(cut.data(), cut.size());
    ASSERT_FALSE(r.ok()) << "truncated to " << len;
    EXPECT_EQ(r.status().code(), ErrorCode::kCorruptFile) << r.status().toString();
    if (len >= 8) {  // past the magic: the container names the truncation
      EXPECT_HAS(r.status().message(), "truncated");
    }
  }
  const std::vector<uint8_t> lastByteMissing(b.begin(), b.end() - 1);
  const std::string m = loadError(lastByteMissing);
  EXPECT_HAS(m, "truncated: " + std::to_string(b.size() - 1) + " bytes");
  EXPECT_HAS(m, std::to_string(b.size()));
}

TEST(ShapeProfiles, ContainerBitFlips_n) {
  const auto b = containerBytes();
  for (size_t pos : {size_t{40}, b.size() / 3, b.size() / 2, b.size() - 30, b.size() - 2}) {
    auto c = b;
    c[pos] ^= 0x10;
    const std::string m = loadError(c);
    // A flip in the header may also make it unreadable; either way the checksum fails first.
    EXPECT_HAS(m, "checksum mismatch") << " at " << pos;
  }
}

TEST(ShapeProfiles, ContainerTrailingBytes_n) {
  auto b = containerBytes();
  b.push_back(0);
  EXPECT_HAS(loadError(b), "1 bytes more than its header announces");
}

TEST(ShapeProfiles, ContainerOtherVersion_n) {
  auto b = containerBytes();
  b[8] = 42;
  EXPECT_HAS(loadError(b, ErrorCode::kVersionMismatch), "container version 42");
}

TEST(ShapeProfiles, ContainerCountMismatch_n) {
  auto c = builder::encodeProfileContainer({batchProfile(1), batchProfile(4), batchProfile(8)},
                                           {subEngine(1), subEngine(4)});
  ASSERT_TRUE(c.ok());
  EXPECT_HAS(loadError(*c), "lists 3 shape profiles but 2 sub-engines");
}

TEST(ShapeProfiles, ContainerOfOneProfile_n) {
  auto c = builder::encodeProfileContainer({batchProfile(1)}, {subEngine(1)});
  ASSERT_TRUE(c.ok());
  EXPECT_HAS(loadError(*c), "an engine of one shape is an ordinary engine file");
}

TEST(ShapeProfiles, ContainerProfileDoesNotMatchItsSubEngine_n) {
  auto c = builder::encodeProfileContainer({batchProfile(4), batchProfile(1)},
                                           {subEngine(1), subEngine(4)});
  ASSERT_TRUE(c.ok());
  EXPECT_HAS(loadError(*c),
             "profile 0 gives input 'x' the shape 4x3x5x5, but its sub-engine was built for "
             "1x3x5x5");
}

TEST(ShapeProfiles, ContainerDuplicateProfiles_n) {
  auto c = builder::encodeProfileContainer({batchProfile(1), batchProfile(1)},
                                           {subEngine(1), subEngine(1)});
  ASSERT_TRUE(c.ok());
  EXPECT_HAS(loadError(*c), "profiles 0 and 1 are the same (x:1x3x5x5)");
}

TEST(ShapeProfiles, ContainerInconsistentRanks_n) {
  // Profile 1's sub-engine has x of rank 2 (another model): caught before the shapes.
  TestModel m(13);
  m.input("x", {-1, 4});
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.output("y");
  BuilderConfig cfg = cpuConfig();
  cfg.inputShapes = {{"x", Shape{4, 4}}};
  auto other = mustBuild(m, cfg);
  auto c = builder::encodeProfileContainer({batchProfile(1), {{"x", Shape{4, 4}}}},
                                           {subEngine(1), bytesOf(*other)});
  ASSERT_TRUE(c.ok());
  EXPECT_HAS(loadError(*c),
             "sub-engine 1 does not match sub-engine 0: input 'x' has rank 2, not 4");
}

TEST(ShapeProfiles, ContainerSubEnginesOfAnotherModel_n) {
  auto c = builder::encodeProfileContainer({batchProfile(1), batchProfile(4)},
                                           {subEngine(1, 1), subEngine(4, 9)});
  ASSERT_TRUE(c.ok());
  EXPECT_HAS(loadError(*c), "sub-engine 1 was built from another model");
}

TEST(ShapeProfiles, ContainerDamagedSubEngine_n) {
  // The container's checksum is right, the sub-engine's own is not.
  auto sub = subEngine(4);
  sub[sub.size() / 2] ^= 0x01;
  auto c = builder::encodeProfileContainer({batchProfile(1), batchProfile(4)}, {subEngine(1), sub});
  ASSERT_TRUE(c.ok());
  const std::string m = loadError(*c);
  EXPECT_HAS(m, "sub-engine 1");
  EXPECT_HAS(m, "checksum mismatch");
}

TEST(ShapeProfiles, ContainerSizesDoNotAddUp_n) {
  // Rewrite the first sub-engine size in the header (same length).
  auto c = builder::encodeProfileContainer({batchProfile(1), batchProfile(4)},
                                           {subEngine(1), subEngine(4)});
  ASSERT_TRUE(c.ok());
  const auto b = withContainerHeader(*c, [](std::string& header) {
    const auto pos = header.find("\"engine_bytes\":[");
    ASSERT_NE(pos, std::string::npos);
    char& digit = header[pos + 16];
    digit = digit == '9' ? '8' : static_cast<char>(digit + 1);
  });
  EXPECT_HAS(loadError(b), "the sub-engines' sizes add up to");
}

// ---- the weights pool: each distinct initializer once in the file --------------------------

/// x: [N, 16, 6, 6] -> Conv(16, 3x3, pad 1) -> Relu -> y: 9 KiB of weights.
TestModel wideModel() {
  TestModel m(13);
  m.input("x", {-1, 16, 6, 6});
  m.randomInitializer("w", {16, 16, 3, 3}, 7);
  m.randomInitializer("b", {16}, 8);
  auto& conv = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  TestModel::attrInts(conv, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"y"}, "relu");
  m.output("y");
  return m;
}

BuilderConfig threeWideBatches() {
  BuilderConfig c = cpuConfig();
  for (int64_t n : {1, 2, 8}) c.shapeProfiles.push_back({{"x", Shape{n, 16, 6, 6}}});
  return c;
}

TEST(ShapeProfiles, TheFileHoldsEqualWeightsOnce) {
  auto e = mustBuild(wideModel(), threeWideBatches());
  ASSERT_TRUE(e);
  const auto bytes = bytesOf(*e);
  const size_t weightBytes = 16 * 16 * 3 * 3 * 4;
  // One engine of one shape holds the weights once; three profiles do not hold them thrice.
  BuilderConfig one = cpuConfig();
  one.inputShapes = {{"x", Shape{8, 16, 6, 6}}};
  auto single = mustBuild(wideModel(), one);
  ASSERT_TRUE(single);
  const size_t singleBytes = bytesOf(*single).size();
  ASSERT_GT(singleBytes, weightBytes);
  EXPECT_LT(bytes.size(), weightBytes * 3 / 2)
      << "a container of 3 profiles of " << singleBytes << "-byte engines";
  auto c = builder::decodeProfileContainer(bytes.data(), bytes.size());
  ASSERT_TRUE(c.ok()) << c.status().toString();
  EXPECT_GE(c->weights.second, weightBytes);
  EXPECT_LT(c->weights.second, weightBytes + 256);

  // Loaded, the profiles read one host copy, and run as the built engine does.
  auto loaded = Engine::deserialize(bytes.data(), bytes.size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  const auto* lpe = dynamic_cast<const runtime::ProfileEngine*>(loaded->get());
  ASSERT_NE(lpe, nullptr);
  const void* first = nullptr;
  for (size_t i = 0; i < 3; ++i) {
    const auto* g = dynamic_cast<const runtime::GraphEngine*>(&lpe->profileEngine(i));
    ASSERT_NE(g, nullptr);
    const Tensor* w = g->graph().constant("w");
    ASSERT_NE(w, nullptr);
    if (!first) first = w->raw();
    EXPECT_EQ(w->raw(), first) << "profile " << i;
  }
  for (int64_t n : {8, 1, 2}) {
    auto a = e->createExecutionContext();
    auto b = (*loaded)->createExecutionContext();
    ASSERT_TRUE(a.ok() && b.ok());
    auto ya = (*a)->run({{"x", input({n, 16, 6, 6}, 5)}});
    auto yb = (*b)->run({{"x", input({n, 16, 6, 6}, 5)}});
    ASSERT_TRUE(ya.ok() && yb.ok());
    expectSame(ya->at("y"), yb->at("y"));
  }
  EXPECT_EQ(bytesOf(**loaded), bytes);
}

/// The sub-engines of a container with a weights pool, and the pool.
struct PooledParts {
  std::vector<std::vector<uint8_t>> engines;
  std::vector<uint8_t> weights;
};

PooledParts pooledParts() {
  const auto bytes = [] {
    auto e = mustBuild(wideModel(), threeWideBatches());
    return e ? bytesOf(*e) : std::vector<uint8_t>();
  }();
  PooledParts parts;
  auto c = builder::decodeProfileContainer(bytes.data(), bytes.size());
  EXPECT_TRUE(c.ok());
  if (!c.ok()) return parts;
  for (const auto& [offset, size] : c->engines)
    parts.engines.emplace_back(bytes.begin() + static_cast<std::ptrdiff_t>(offset),
                               bytes.begin() + static_cast<std::ptrdiff_t>(offset + size));
  parts.weights.assign(
      bytes.begin() + static_cast<std::ptrdiff_t>(c->weights.first),
      bytes.begin() + static_cast<std::ptrdiff_t>(c->weights.first + c->weights.second));
  return parts;
}

std::vector<ShapeProfile> wideProfiles() {
  return threeWideBatches().shapeProfiles;
}

TEST(ShapeProfiles, ASubEngineReadOnItsOwnNamesTheContainer_n) {
  const PooledParts parts = pooledParts();
  ASSERT_EQ(parts.engines.size(), 3u);
  const std::string m = loadError(parts.engines[1]);
  EXPECT_HAS(m, "initializer 'w' is held in the weights of a container file");
  EXPECT_HAS(m, "load the whole file it came from");
}

TEST(ShapeProfiles, ContainerWithoutItsWeights_n) {
  const PooledParts parts = pooledParts();
  auto c = builder::encodeProfileContainer(wideProfiles(), parts.engines, {});
  ASSERT_TRUE(c.ok());
  const std::string m = loadError(*c);
  EXPECT_HAS(m, "sub-engine 0");
  EXPECT_HAS(m, "lie outside the container's weights (0 bytes)");
}

TEST(ShapeProfiles, ContainerWithTruncatedWeights_n) {
  PooledParts parts = pooledParts();
  ASSERT_GT(parts.weights.size(), 100u);
  parts.weights.resize(parts.weights.size() - 100);
  auto c = builder::encodeProfileContainer(wideProfiles(), parts.engines, parts.weights);
  ASSERT_TRUE(c.ok());
  EXPECT_HAS(loadError(*c), "lie outside the container's weights");
}

TEST(ShapeProfiles, ContainerWeightsLargerThanThePayload_n) {
  const PooledParts parts = pooledParts();
  auto c = builder::encodeProfileContainer(wideProfiles(), parts.engines, parts.weights);
  ASSERT_TRUE(c.ok());
  const std::string size = "\"weights_bytes\":" + std::to_string(parts.weights.size());
  const auto b = withContainerHeader(*c, [&](std::string& h) {
    const auto pos = h.find(size);
    ASSERT_NE(pos, std::string::npos) << h;
    h.replace(pos, size.size(), "\"weights_bytes\":99999999");
  });
  EXPECT_HAS(loadError(b), "the weights pool (99999999 bytes) is larger than the payload");
}

TEST(ShapeProfiles, ContainerWithoutAWeightsSize_n) {
  const auto b = withContainerHeader(containerBytes(), [](std::string& h) {
    const auto pos = h.find("\"weights_bytes\"");
    ASSERT_NE(pos, std::string::npos) << h;
    h.replace(pos, 15, "\"weights_bytez\"");
  });
  EXPECT_HAS(loadError(b), "the header has no size of the weights pool");
}

TEST(ShapeProfiles, ContainerOfVersion1WithoutAPoolStillLoads) {
  // Version 1 (before the pool): every sub-engine holds its own weights.
  auto c = builder::encodeProfileContainer({batchProfile(1), batchProfile(4)},
                                           {subEngine(1), subEngine(4)});
  ASSERT_TRUE(c.ok());
  std::vector<uint8_t> b = withContainerHeader(*c, [](std::string& h) {
    const std::string field = ",\"weights_bytes\":0";
    const auto pos = h.find(field);
    ASSERT_NE(pos, std::string::npos) << h;
    h.erase(pos, field.size());
  });
  b[8] = 1;
  fixChecksum(b);
  auto loaded = Engine::deserialize(b.data(), b.size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  auto built = mustBuild(convModel(), twoBatches());
  ASSERT_TRUE(built);
  expectSame(runX(**loaded, {4, 3, 5, 5}), runX(*built, {4, 3, 5, 5}));
}

TEST(ShapeProfiles, APoolReferenceThatIsNoNumber_n) {
  // A sub-engine whose reference names an offset that is not a number: rewritten in the
  // sub-engine's protobuf, where the text "offset" is followed by its value's length and value.
  PooledParts parts = pooledParts();
  std::vector<uint8_t>& sub = parts.engines[0];
  const std::string key = "offset";
  auto it = std::search(sub.begin(), sub.end(), key.begin(), key.end());
  ASSERT_NE(it, sub.end());
  it += static_cast<std::ptrdiff_t>(key.size()) + 2;  // the value's tag and length byte
  ASSERT_TRUE(*it >= '0' && *it <= '9');
  *it = 'x';
  fixChecksum(sub);
  auto c = builder::encodeProfileContainer(wideProfiles(), parts.engines, parts.weights);
  ASSERT_TRUE(c.ok());
  EXPECT_HAS(loadError(*c), "is not a number");
}

}  // namespace
}  // namespace edgeinfer
