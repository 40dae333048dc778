// Shape ranges (BuilderConfig::shapeRanges: min/opt/max per input) on the CPU backend: the
// checks of the ranges, specialisation for shapes other than opt at run time (once per shape,
// shared by contexts and threads), the range container file and every way it can be wrong. The
// GPU side (opt tactics reused, CUDA graphs per shape) is in test_cuda_profiles.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <thread>

#include "builder/engine_format.h"
#include "builder/profile_format.h"
#include "builder/range_format.h"
#include "core/byte_io.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "runtime/graph_engine.h"
#include "runtime/range_engine.h"
#include "test_container.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using test::bytesOf;
using test::loadError;
using test::TestModel;
using test::withContainerHeader;

#define EXPECT_HAS(text, part)                               \
  EXPECT_NE(std::string(text).find(part), std::string::npos) \
      << "'" << (text) << "' lacks " << (part)

/// x: [N, 3, H, W] -> Conv(4, 3x3, pad 1) -> Relu -> r; y = Reshape(r, [Shape(r)[0], -1]), the
/// flatten PyTorch exports: constant folding turns the target shape into a constant of the
/// batch it was built for, so a specialisation must optimise the graph again.
TestModel flattenModel(uint32_t seed = 1) {
  TestModel m(13);
  m.input("x", {-1, 3, -1, -1});
  m.randomInitializer("w", {4, 3, 3, 3}, seed);
  m.randomInitializer("b", {4}, seed + 1);
  m.initializerI64("zero", {1}, {0});
  m.initializerI64("minus1", {1}, {-1});
  auto& conv = m.node("Conv", {"x", "w", "b"}, {"c"}, "conv");
  TestModel::attrInts(conv, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c"}, {"r"}, "relu");
  m.node("Shape", {"r"}, {"s"}, "shape");
  m.node("Gather", {"s", "zero"}, {"n"}, "gather");
  auto& cat = m.node("Concat", {"n", "minus1"}, {"target"}, "concat");
  TestModel::attr(cat, "axis", 0);
  m.node("Reshape", {"r", "target"}, {"y"}, "flatten");
  m.output("y");
  return m;
}

BuilderConfig cpuConfig() {
  BuilderConfig c;
  c.backend = Backend::kCpu;
  return c;
}

BuilderConfig rangeConfig() {
  BuilderConfig c = cpuConfig();
  c.shapeRanges = {{"x", ShapeRange{Shape{1, 3, 4, 4}, Shape{2, 3, 5, 5}, Shape{4, 3, 8, 8}}}};
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

/// The error of building `m` with `c`, which must fail with `code`.
std::string buildError(const TestModel& m, const BuilderConfig& c,
                       ErrorCode code = ErrorCode::kInvalidArgument) {
  auto e = build(m, c);
  EXPECT_FALSE(e.ok());
  if (e.ok()) return "";
  EXPECT_EQ(e.status().code(), code) << e.status().toString();
  return e.status().message();
}

Tensor input(const Shape& s, int salt = 0) {
  Tensor t = Tensor::zeros(DataType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.data<float>()[i] = static_cast<float>((i * 37 + salt * 11) % 23) / 23.f - 0.5f;
  return t;
}

Tensor runOn(ExecutionContext& ctx, const Shape& s, int salt = 0) {
  auto out = ctx.run({{"x", input(s, salt)}});
  EXPECT_TRUE(out.ok()) << out.status().toString();
  return out.ok() ? out->at("y") : Tensor();
}

/// y of an engine built for exactly the shape `s` (the reference of a specialisation).
Tensor reference(const Shape& s, int salt = 0) {
  BuilderConfig c = cpuConfig();
  c.inputShapes = {{"x", s}};
  auto e = mustBuild(flattenModel(), c);
  if (!e) return Tensor();
  auto ctx = e->createExecutionContext();
  EXPECT_TRUE(ctx.ok());
  return ctx.ok() ? runOn(**ctx, s, salt) : Tensor();
}

void expectSame(const Tensor& a, const Tensor& b) {
  ASSERT_FALSE(a.empty());
  ASSERT_FALSE(b.empty());
  ASSERT_EQ(a.shape(), b.shape());
  EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.bytes()));
}

const std::vector<Shape> kShapes = {{2, 3, 5, 5}, {1, 3, 4, 4}, {3, 3, 7, 6},
                                    {4, 3, 8, 8}, {2, 3, 5, 5}, {3, 3, 7, 6}};

// ---- building and running ----------------------------------------------------------------------

TEST(ShapeRanges, EveryShapeOfTheRangeRunsAsAnEngineBuiltForIt) {
  auto e = mustBuild(flattenModel(), rangeConfig());
  ASSERT_TRUE(e);
  EXPECT_EQ(e->shapeRanges(), rangeConfig().shapeRanges);
  ASSERT_EQ(e->profiles().size(), 1u);
  EXPECT_EQ(e->profiles()[0].at("x"), (Shape{2, 3, 5, 5}));
  EXPECT_EQ(e->inputs()[0].shape, (Shape{-1, 3, -1, -1}));
  EXPECT_EQ(e->outputs()[0].shape, (Shape{-1, -1}));
  auto ctx = e->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  int salt = 0;
  for (const Shape& s : kShapes) {
    SCOPED_TRACE(s.toString());
    expectSame(runOn(**ctx, s, salt), reference(s, salt));
    ++salt;
  }
  // Specialised once per shape other than opt: 1x3x4x4, 3x3x7x6, 4x3x8x8.
  EXPECT_EQ((*ctx)->stats().shapeSpecializations, 3);
  EXPECT_GT((*ctx)->stats().specializationMs, 0.0);
  EXPECT_EQ(dynamic_cast<const runtime::RangeEngine&>(*e).specializationCount(), 3u);
}

TEST(ShapeRanges, SpecialisationsAreSharedByContextsAndThreads) {
  auto e = mustBuild(flattenModel(), rangeConfig());
  ASSERT_TRUE(e);
  const Shape s{3, 3, 6, 7};
  const Tensor want = reference(s, 5);
  std::vector<Tensor> got(6);
  std::vector<ContextStats> stats(6);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      auto ctx = e->createExecutionContext();
      if (!ctx.ok()) return;
      for (int k = 0; k < 3; ++k) got[i] = runOn(**ctx, s, 5);
      stats[i] = (*ctx)->stats();
    });
  for (auto& t : threads) t.join();
  int64_t built = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    expectSame(got[i], want);
    built += stats[i].shapeSpecializations;
  }
  EXPECT_EQ(built, 1);  // one context built it, the others waited for it
  EXPECT_EQ(dynamic_cast<const runtime::RangeEngine&>(*e).specializationCount(), 1u);
}

/// flattenModel() with a BatchNormalization (folded into the convolution's weights and bias)
/// and a per-channel Add (fused into the bias) after the convolution: the passes that make new
/// constants from the model's.
TestModel foldingModel() {
  TestModel m = flattenModel();
  auto* g = m.proto.mutable_graph();
  g->mutable_node(1)->set_input(0, "bn");  // Relu reads the Add's output
  m.randomInitializer("gamma", {4}, 31, 0.5f, 1.5f);
  m.randomInitializer("beta", {4}, 32);
  m.randomInitializer("mean", {4}, 33);
  m.randomInitializer("var", {4}, 34, 0.5f, 2.f);
  m.randomInitializer("shift", {1, 4, 1, 1}, 35);
  m.node("BatchNormalization", {"c", "gamma", "beta", "mean", "var"}, {"bn0"}, "bn");
  m.node("Add", {"bn0", "shift"}, {"bn"}, "add");
  return m;
}

TEST(ShapeRanges, SpecialisingLeavesTheModelUntouched) {
  // The kept model shares its constants with every specialisation: the passes must never write
  // them (the model's bytes in the engine file stay the same after specialising), also where
  // they fold a BatchNormalization and fuse a bias.
  auto e = mustBuild(foldingModel(), rangeConfig());
  ASSERT_TRUE(e);
  const auto before = bytesOf(*e);
  auto ctx = e->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  for (const Shape& s : kShapes) runOn(**ctx, s);
  EXPECT_EQ(bytesOf(*e), before);
}

TEST(ShapeRanges, ARangeOfTheBatchOnlyKeepsTheOtherDims) {
  BuilderConfig c = cpuConfig();
  c.shapeRanges = {{"x", ShapeRange{Shape{1, 3, 6, 6}, Shape{1, 3, 6, 6}, Shape{8, 3, 6, 6}}}};
  auto e = mustBuild(flattenModel(), c);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->inputs()[0].shape, (Shape{-1, 3, 6, 6}));
  EXPECT_EQ(e->outputs()[0].shape, (Shape{-1, 144}));
  auto ctx = e->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  for (int64_t n : {1, 8, 5}) expectSame(runOn(**ctx, {n, 3, 6, 6}), reference({n, 3, 6, 6}));
}

TEST(ShapeRanges, SerializedAndLoadedRunsEveryShape) {
  auto e = mustBuild(flattenModel(), rangeConfig());
  ASSERT_TRUE(e);
  const auto bytes = bytesOf(*e);
  ASSERT_TRUE(builder::isRangeContainer(bytes.data(), bytes.size()));
  auto loaded = Engine::deserialize(bytes.data(), bytes.size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_EQ((*loaded)->shapeRanges(), e->shapeRanges());
  EXPECT_EQ((*loaded)->inputs()[0].shape, (Shape{-1, 3, -1, -1}));
  EXPECT_EQ((*loaded)->info().modelHash, e->info().modelHash);
  auto ctx = (*loaded)->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  for (const Shape& s : kShapes) expectSame(runOn(**ctx, s), reference(s));
  // Deterministic: the loaded engine serializes to the same bytes, and so does a rebuild.
  EXPECT_EQ(bytesOf(**loaded), bytes);
  auto again = mustBuild(flattenModel(), rangeConfig());
  ASSERT_TRUE(again);
  EXPECT_EQ(bytesOf(*again), bytes);
}

TEST(ShapeRanges, TheFileHoldsTheModelsWeightsOnce) {
  // x: [N, 16, 6, 6] -> Conv(16, 3x3) -> y: the model and the opt build hold the same 9 KiB
  // of weights; the file holds them once.
  TestModel m(13);
  m.input("x", {-1, 16, 6, 6});
  m.randomInitializer("w", {16, 16, 3, 3}, 3);
  auto& conv = m.node("Conv", {"x", "w"}, {"y"}, "conv");
  TestModel::attrInts(conv, "pads", {1, 1, 1, 1});
  m.output("y");
  BuilderConfig c = cpuConfig();
  c.shapeRanges = {{"x", ShapeRange{Shape{1, 16, 6, 6}, Shape{2, 16, 6, 6}, Shape{8, 16, 6, 6}}}};
  auto e = mustBuild(m, c);
  ASSERT_TRUE(e);
  const auto bytes = bytesOf(*e);
  const size_t weightBytes = 16 * 16 * 3 * 3 * 4;
  EXPECT_GT(bytes.size(), weightBytes);
  EXPECT_LT(bytes.size(), weightBytes + weightBytes / 2) << "the weights are held twice";
  auto d = builder::decodeRangeContainer(bytes.data(), bytes.size());
  ASSERT_TRUE(d.ok()) << d.status().toString();
  EXPECT_EQ(d->weights.second, weightBytes);
  // Loaded, it runs every shape as the built engine does, and writes the same bytes.
  auto loaded = Engine::deserialize(bytes.data(), bytes.size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  auto a = e->createExecutionContext();
  auto b = (*loaded)->createExecutionContext();
  ASSERT_TRUE(a.ok() && b.ok());
  for (int64_t n : {2, 1, 8, 5}) {
    auto ya = (*a)->run({{"x", input(Shape{n, 16, 6, 6}, 2)}});
    auto yb = (*b)->run({{"x", input(Shape{n, 16, 6, 6}, 2)}});
    ASSERT_TRUE(ya.ok() && yb.ok()) << "batch " << n;
    expectSame(ya->at("y"), yb->at("y"));
  }
  EXPECT_EQ(bytesOf(**loaded), bytes);
}

TEST(ShapeRanges, SaveAndLoadFile) {
  test::TempDir dir;
  auto e = mustBuild(flattenModel(), rangeConfig());
  ASSERT_TRUE(e);
  ASSERT_TRUE(e->save(dir.file("r.engine")).ok());
  auto loaded = Engine::load(dir.file("r.engine"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_EQ(formatShapeRanges((*loaded)->shapeRanges()), "x:[1x3x4x4 .. 2x3x5x5 .. 4x3x8x8]");
}

// ---- shapes outside the range, and shapes the model cannot take
// ----------------------------------

TEST(ShapeRanges, AShapeOutsideTheRangeIsAClearError_n) {
  auto e = mustBuild(flattenModel(), rangeConfig());
  ASSERT_TRUE(e);
  auto ctx = e->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  for (const Shape& s : {Shape{5, 3, 5, 5}, Shape{2, 3, 3, 5}, Shape{2, 3, 5, 9}}) {
    const Status st = (*ctx)->setInput("x", input(s));
    EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument) << s.toString();
    EXPECT_HAS(st.message(), "outside the engine's shape range 1x3x4x4 .. 4x3x8x8");
    EXPECT_HAS(st.message(), "has shape " + runtime::shapeText(s));
  }
  const Status rank = (*ctx)->setInput("x", input(Shape{2, 3, 5}));
  EXPECT_FALSE(rank.ok());
  // Nothing was specialised, and the engine still runs.
  EXPECT_EQ(dynamic_cast<const runtime::RangeEngine&>(*e).specializationCount(), 0u);
  expectSame(runOn(**ctx, {1, 3, 4, 4}), reference({1, 3, 4, 4}));
}

TEST(ShapeRanges, AShapeTheModelCannotTakeFailsOnceAndAgainWithTheSameError_n) {
  // y = Reshape(x, [0, -1, 4]) needs a multiple of 4 in x's second dim: 4 and 8 (min, max)
  // work, 6 does not.
  TestModel m(13);
  m.input("x", {1, -1});
  m.initializerI64("s", {3}, {0, -1, 4});
  m.node("Reshape", {"x", "s"}, {"y"}, "reshape");
  m.output("y");
  BuilderConfig c = cpuConfig();
  c.shapeRanges = {{"x", ShapeRange{Shape{1, 4}, Shape{1, 8}, Shape{1, 8}}}};
  auto e = mustBuild(m, c);
  ASSERT_TRUE(e);
  auto ctx = e->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  std::string first;
  for (int k = 0; k < 2; ++k) {
    auto out = (*ctx)->run({{"x", input(Shape{1, 6})}});
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), ErrorCode::kInvalidModel);
    EXPECT_HAS(out.status().message(), "specialising for x:1x6");
    if (k == 0) first = out.status().toString();
    if (k == 1) {
      EXPECT_EQ(out.status().toString(), first);  // the same, kept
    }
  }
  auto ok = (*ctx)->run({{"x", input(Shape{1, 4})}});
  ASSERT_TRUE(ok.ok()) << ok.status().toString();
  EXPECT_EQ(ok->at("y").shape(), (Shape{1, 1, 4}));
  EXPECT_EQ((*ctx)->stats().shapeSpecializations, 1);
}

TEST(ShapeRanges, AMaxTheModelCannotTakeIsABuildError_n) {
  TestModel m(13);
  m.input("x", {-1, 4});
  m.initializerI64("s", {2}, {2, 4});
  m.node("Reshape", {"x", "s"}, {"y"}, "reshape");
  m.output("y");
  BuilderConfig c = cpuConfig();
  c.shapeRanges = {{"x", ShapeRange{Shape{2, 4}, Shape{2, 4}, Shape{3, 4}}}};
  const std::string msg = buildError(m, c);
  EXPECT_HAS(msg, "cannot take the ranges' max shapes (x:3x4)");
}

TEST(ShapeRanges, AnInputWithoutAShape_n) {
  TestModel m(13);
  m.input("a", {-1, 4});
  m.input("b", {-1, 4});
  m.proto.mutable_graph()->mutable_input(1)->mutable_type()->mutable_tensor_type()->clear_shape();
  m.node("Add", {"a", "b"}, {"y"}, "add");
  m.output("y");
  BuilderConfig c = cpuConfig();
  c.shapeRanges = {{"a", ShapeRange{Shape{1, 4}, Shape{2, 4}, Shape{6, 4}}}};
  EXPECT_HAS(buildError(m, c), "input 'b' has no shape in the model: give it a range or a shape");
}

// ---- the ranges' checks
// --------------------------------------------------------------------------

TEST(ShapeRanges, MinOptMaxOutOfOrder_n) {
  BuilderConfig c = cpuConfig();
  c.shapeRanges = {{"x", ShapeRange{Shape{2, 3, 5, 5}, Shape{1, 3, 5, 5}, Shape{4, 3, 5, 5}}}};
  EXPECT_HAS(buildError(flattenModel(), c), "dim 0 is 2 .. 1 .. 4: it needs min <= opt <= max");
  c.shapeRanges = {{"x", ShapeRange{Shape{1, 3, 5, 5}, Shape{2, 3, 9, 5}, Shape{4, 3, 8, 8}}}};
  EXPECT_HAS(buildError(flattenModel(), c), "dim 2 is 5 .. 9 .. 8");
}

TEST(ShapeRanges, RanksDiffer_n) {
  BuilderConfig c = cpuConfig();
  c.shapeRanges = {{"x", ShapeRange{Shape{1, 3, 5}, Shape{1, 3, 5, 5}, Shape{4, 3, 5, 5}}}};
  EXPECT_HAS(buildError(flattenModel(), c), "ranks 3, 4 and 4");
  c.shapeRanges = {{"x", ShapeRange{Shape{1, 3, 5}, Shape{1, 3, 5}, Shape{4, 3, 5}}}};
  EXPECT_HAS(buildError(flattenModel(), c), "has rank 3, but the model's input has rank 4");
}

TEST(ShapeRanges, ZeroSizedMin_n) {
  BuilderConfig c = cpuConfig();
  c.shapeRanges = {{"x", ShapeRange{Shape{0, 3, 5, 5}, Shape{1, 3, 5, 5}, Shape{4, 3, 5, 5}}}};
  EXPECT_HAS(buildError(flattenModel(), c), "dim 0 of min is 0, not a size");
}

TEST(ShapeRanges, RangeOfAnUnknownInput_n) {
  BuilderConfig c = cpuConfig();
  c.shapeRanges = {{"images", ShapeRange{Shape{1, 3}, Shape{1, 3}, Shape{2, 3}}}};
  EXPECT_HAS(buildError(flattenModel(), c), "'images', which is not an input of the model");
}

TEST(ShapeRanges, RangeAgainstAStaticDim_n) {
  BuilderConfig c = cpuConfig();
  c.shapeRanges = {{"x", ShapeRange{Shape{1, 3, 5, 5}, Shape{1, 3, 5, 5}, Shape{1, 4, 5, 5}}}};
  EXPECT_HAS(buildError(flattenModel(), c), "the model fixes it to 3, the shape gives 4");
}

TEST(ShapeRanges, CombinedWithShapeProfiles_n) {
  BuilderConfig c = rangeConfig();
  c.shapeProfiles = {{{"x", Shape{1, 3, 5, 5}}}, {{"x", Shape{2, 3, 5, 5}}}};
  EXPECT_HAS(buildError(flattenModel(), c), "cannot be combined");
}

TEST(ShapeRanges, AShapeAndARangeForOneInput_n) {
  BuilderConfig c = rangeConfig();
  c.inputShapes = {{"x", Shape{2, 3, 5, 5}}};
  EXPECT_HAS(buildError(flattenModel(), c), "has both a shape (--shapes) and a shape range");
}

TEST(ShapeRanges, WithACalibrationCacheIsUnsupported_n) {
  BuilderConfig c = rangeConfig();
  c.calibrationCachePath = "/nonexistent/calib.cache";
  EXPECT_HAS(buildError(flattenModel(), c, ErrorCode::kUnsupported),
             "cannot be combined with a calibration cache yet");
}

TEST(ShapeRanges, AnInputWithoutARangeKeepsItsShape_n) {
  // a: ranged batch; b: fixed by --shapes. A run with another shape of b is refused.
  TestModel m(13);
  m.input("a", {-1, 4});
  m.input("b", {-1, 4});
  m.node("Add", {"a", "b"}, {"y"}, "add");
  m.output("y");
  BuilderConfig c = cpuConfig();
  c.inputShapes = {{"b", Shape{1, 4}}};
  c.shapeRanges = {{"a", ShapeRange{Shape{1, 4}, Shape{2, 4}, Shape{6, 4}}}};
  auto e = mustBuild(m, c);
  ASSERT_TRUE(e);
  auto ctx = e->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  auto out = (*ctx)->run({{"a", input(Shape{5, 4})}, {"b", input(Shape{1, 4}, 3)}});
  ASSERT_TRUE(out.ok()) << out.status().toString();
  EXPECT_EQ(out->at("y").shape(), (Shape{5, 4}));
  const Status st = (*ctx)->setInput("b", input(Shape{2, 4}));
  EXPECT_EQ(st.code(), ErrorCode::kInvalidArgument);
  EXPECT_HAS(st.message(), "no shape range for it and was built for 1x4");
}

// ---- the range container
// -------------------------------------------------------------------------

std::vector<uint8_t> containerBytes() {
  auto e = mustBuild(flattenModel(), rangeConfig());
  return e ? bytesOf(*e) : std::vector<uint8_t>();
}

/// The model hash of a range container's engine.
std::string containerHash(const std::vector<uint8_t>& b) {
  auto e = Engine::deserialize(b.data(), b.size());
  EXPECT_TRUE(e.ok()) << e.status().toString();
  return e.ok() ? (*e)->info().modelHash : std::string();
}

void replaceIn(std::string& s, const std::string& from, const std::string& to) {
  const auto pos = s.find(from);
  ASSERT_NE(pos, std::string::npos) << from << " not in " << s;
  s.replace(pos, from.size(), to);
}

TEST(ShapeRanges, ContainerTruncated_n) {
  const auto b = containerBytes();
  ASSERT_GT(b.size(), 100u);
  for (size_t len = 0; len < b.size(); len += std::max<size_t>(1, b.size() / 61)) {
    const std::vector<uint8_t> cut(b.begin(), b.begin() + static_cast<std::ptrdiff_t>(len));
    auto r = Engine::deserialize(cut.data(), cut.size());
    ASSERT_FALSE(r.ok()) << "truncated to " << len;
    EXPECT_EQ(r.status().code(), ErrorCode::kCorruptFile) << r.status().toString();
    if (len >= 8) {
      EXPECT_HAS(r.status().message(), "truncated");
    }
  }
}

TEST(ShapeRanges, ContainerBitFlips_n) {
  const auto b = containerBytes();
  for (size_t pos : {size_t{40}, b.size() / 3, b.size() / 2, b.size() - 30, b.size() - 2}) {
    auto c = b;
    c[pos] ^= 0x10;
    EXPECT_HAS(loadError(c), "checksum mismatch") << " at " << pos;
  }
}

TEST(ShapeRanges, ContainerOtherVersion_n) {
  auto b = containerBytes();
  b[8] = 7;
  EXPECT_HAS(loadError(b, ErrorCode::kVersionMismatch),
             "engine with shape ranges: container version 7");
}

TEST(ShapeRanges, ContainerRangeOutOfOrder_n) {
  auto b = withContainerHeader(containerBytes(), [](std::string& h) {
    replaceIn(h, "\"max\":[4,3,8,8]", "\"max\":[1,3,8,8]");
  });
  EXPECT_HAS(loadError(b), "dim 0 is 1 .. 2 .. 1");
}

TEST(ShapeRanges, ContainerOptShapesDisagree_n) {
  auto b = withContainerHeader(containerBytes(), [](std::string& h) {
    replaceIn(h, "\"opt_shapes\":{\"x\":[2,3,5,5]}", "\"opt_shapes\":{\"x\":[3,3,5,5]}");
  });
  EXPECT_HAS(loadError(b), "the opt shapes do not give input 'x' its range's opt shape 2x3x5x5");
}

TEST(ShapeRanges, ContainerOutputShapesDisagree_n) {
  auto b = withContainerHeader(containerBytes(), [](std::string& h) {
    replaceIn(h, "\"output_shapes\":{\"y\":[-1,-1]}", "\"output_shapes\":{\"y\":[-1]}");
  });
  EXPECT_HAS(loadError(b), "the output shapes give 'y' ?, the opt engine 2x100");
}

TEST(ShapeRanges, ContainerUnknownPrecision_n) {
  auto b = withContainerHeader(containerBytes(), [](std::string& h) {
    replaceIn(h, "\"precision\":\"fp32\"", "\"precision\":\"fp8\"");
  });
  EXPECT_HAS(loadError(b), "the precision is not a precision");
}

TEST(ShapeRanges, ContainerWithoutRanges_n) {
  auto b = withContainerHeader(containerBytes(),
                               [](std::string& h) { replaceIn(h, "\"ranges\"", "\"rangez\""); });
  EXPECT_HAS(loadError(b), "the header has no shape ranges");
}

TEST(ShapeRanges, ContainerSizesThatWrapAround_n) {
  // Sizes whose sum wraps around 2^64 back to the payload's size (the codec shared with shape
  // profiles): refused, never read past the end.
  const std::vector<uint8_t> blob = {1};
  ShapeProfile p1{{"x", Shape{1}}}, p2{{"x", Shape{2}}}, p3{{"x", Shape{3}}};
  auto c = builder::encodeProfileContainer({p1, p2, p3}, {blob, blob, blob});
  ASSERT_TRUE(c.ok());
  auto b = withContainerHeader(*c, [](std::string& h) {
    replaceIn(h, "\"engine_bytes\":[1,1,1]", "\"engine_bytes\":[3,18446744073709551615,1]");
  });
  EXPECT_HAS(loadError(b), "the sub-engines' sizes add up to more than the payload");
}

TEST(ShapeRanges, TheInt8RoundingTravelsInTheFile) {
  // The specialisations of a bit-exact INT8 range engine build bit-exact too: the option is in
  // the header; a header written before it existed reads as bit-exact (the only rounding then).
  const auto b = containerBytes();
  ASSERT_GT(b.size(), 100u);
  auto with = withContainerHeader(b, [](std::string& h) {
    replaceIn(h, "\"int8_bit_exact\":false", "\"int8_bit_exact\":true");
  });
  auto d = builder::decodeRangeContainer(with.data(), with.size());
  ASSERT_TRUE(d.ok()) << d.status().toString();
  EXPECT_TRUE(d->spec.build.int8BitExact);
  auto without =
      withContainerHeader(b, [](std::string& h) { replaceIn(h, "\"int8_bit_exact\":false,", ""); });
  d = builder::decodeRangeContainer(without.data(), without.size());
  ASSERT_TRUE(d.ok()) << d.status().toString();
  EXPECT_TRUE(d->spec.build.int8BitExact);
  auto as = builder::decodeRangeContainer(b.data(), b.size());  // as written: the default
  ASSERT_TRUE(as.ok()) << as.status().toString();
  EXPECT_FALSE(as->spec.build.int8BitExact);
  auto bad = withContainerHeader(b, [](std::string& h) {
    replaceIn(h, "\"int8_bit_exact\":false", "\"int8_bit_exact\":\"yes\"");
  });
  EXPECT_HAS(loadError(bad), "int8_bit_exact");
}

TEST(ShapeRanges, ContainerOfAnotherModel_n) {
  // The opt engine names another model (another hash) than the model beside it.
  const auto b = containerBytes();
  auto c = builder::decodeRangeContainer(b.data(), b.size());
  ASSERT_TRUE(c.ok()) << c.status().toString();
  auto other = mustBuild(flattenModel(9), rangeConfig());
  ASSERT_TRUE(other);
  const std::string mine = "\"model_hash\":\"" + containerHash(b) + "\"";
  const std::string theirs = "\"model_hash\":\"" + (*other).info().modelHash + "\"";
  ASSERT_EQ(mine.size(), theirs.size());
  ASSERT_NE(mine, theirs);
  std::vector<uint8_t> bad = b;
  auto* opt = bad.data() + c->opt.first;
  auto* at = std::search(opt, opt + c->opt.second, mine.begin(), mine.end());
  ASSERT_NE(at, opt + c->opt.second);
  std::copy(theirs.begin(), theirs.end(), at);
  std::vector<uint8_t> optBytes(opt, opt + c->opt.second);
  test::fixChecksum(optBytes);
  std::copy(optBytes.begin(), optBytes.end(), opt);
  test::fixChecksum(bad);
  EXPECT_HAS(loadError(bad), "is not the one the opt engine was built from");
  // And the file as written loads.
  EXPECT_TRUE(Engine::deserialize(b.data(), b.size()).ok());
}

}  // namespace
}  // namespace edgeinfer
