// Shape profiles on the GPU: one engine built for batch 1 and batch 4, runs of both shapes
// alternating on one context against the CPU reference, one CUDA graph per shape, a save/load
// round trip, and the timing cache serving every profile. Skips without a GPU; the CPU side
// of profiles (checks, selection, the container file) is in test_shape_profiles.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>

#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "test_model.h"

#ifdef EDGEINFER_HAVE_CUDA
#include "runtime/cuda_backend.h"
#include "runtime/range_engine.h"
#include "tactic_test_util.h"
#endif

namespace edgeinfer {
namespace {

#ifdef EDGEINFER_HAVE_CUDA

using test::TempDir;
using test::TestModel;

/// x: [N, 3, 9, 11] -> Conv(8, 3x3, pad 1) + bias -> Relu -> MaxPool 2x2 -> Conv(4, 1x1) -> y.
TestModel convModel() {
  TestModel m(13);
  m.input("x", {-1, 3, 9, 11});
  m.randomInitializer("w1", {8, 3, 3, 3}, 21, -0.5f, 0.5f);
  m.randomInitializer("b1", {8}, 22);
  m.randomInitializer("w2", {4, 8, 1, 1}, 23, -0.5f, 0.5f);
  auto& c1 = m.node("Conv", {"x", "w1", "b1"}, {"c1"}, "conv1");
  TestModel::attrInts(c1, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  auto& p = m.node("MaxPool", {"r1"}, {"p1"}, "pool1");
  TestModel::attrInts(p, "kernel_shape", {2, 2});
  TestModel::attrInts(p, "strides", {2, 2});
  m.node("Conv", {"p1", "w2"}, {"y"}, "conv2");
  m.output("y");
  return m;
}

Expected<std::unique_ptr<Engine>> build(const TestModel& m, const BuilderConfig& cfg) {
  const std::string bytes = m.bytes();
  return Builder::buildFromBuffer(bytes.data(), bytes.size(), cfg);
}

BuilderConfig profilesConfig(const TempDir& dir) {
  BuilderConfig c = test::quickGpuConfig(dir.file("timing.cache"));
  c.shapeProfiles = {{{"x", Shape{1, 3, 9, 11}}}, {{"x", Shape{4, 3, 9, 11}}}};
  return c;
}

Tensor randomInput(const Shape& s, uint32_t seed) {
  Tensor t = Tensor::zeros(DataType::kFloat32, s);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

double relL2(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const double d = a.data<float>()[i] - b.data<float>()[i];
    num += d * d;
    den += static_cast<double>(b.data<float>()[i]) * b.data<float>()[i];
  }
  return std::sqrt(num / std::max(den, 1e-30));
}

/// The CPU reference engine of the model (dynamic batch).
std::unique_ptr<Engine> cpuEngine() {
  BuilderConfig c;
  c.backend = Backend::kCpu;
  auto e = build(convModel(), c);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  return e.ok() ? std::move(e).value() : nullptr;
}

Tensor runOn(ExecutionContext& ctx, const Tensor& x) {
  auto out = ctx.run({{"x", x}});
  EXPECT_TRUE(out.ok()) << out.status().toString();
  return out.ok() ? out->at("y").clone() : Tensor();
}

/// Runs batch 1, 4, 1, 4, 1, 4 on `ctx`, each against the CPU; returns the outputs.
std::vector<Tensor> alternate(ExecutionContext& ctx) {
  auto cpu = cpuEngine();
  auto cpuCtx = cpu->createExecutionContext();
  std::vector<Tensor> outs;
  uint32_t seed = 100;
  for (int64_t batch : {1, 4, 1, 4, 1, 4}) {
    const Tensor x = randomInput(Shape{batch, 3, 9, 11}, ++seed);
    const Tensor got = runOn(ctx, x);
    const Tensor want = runOn(**cpuCtx, x);
    EXPECT_EQ(got.shape(), (Shape{batch, 4, 4, 5}));
    if (got.shape() == want.shape()) {
      const double err = relL2(got, want);
      EXPECT_LT(err, 1e-5) << "batch " << batch;
      std::printf("[          ] batch %lld: rel L2 %.3g vs CPU\n", static_cast<long long>(batch),
                  err);
    }
    outs.push_back(got);
  }
  return outs;
}

TEST(CudaProfiles, AlternatingShapesMatchTheCpuWithOneCudaGraphPerShape) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  auto e = build(convModel(), profilesConfig(dir));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ((*e)->info().backend, Backend::kCuda);
  EXPECT_EQ((*e)->inputs()[0].shape, (Shape{-1, 3, 9, 11}));
  ASSERT_EQ((*e)->profiles().size(), 2u);

  auto ctx = (*e)->createExecutionContext();
  ASSERT_TRUE(ctx.ok()) << ctx.status().toString();
  EXPECT_EQ((*ctx)->stats().graphCaptures, 0);  // no profile run yet: nothing created
  alternate(**ctx);
  const ContextStats st = (*ctx)->stats();
  // Per shape: a warm-up run, a capture + replay, a replay.
  EXPECT_TRUE(st.cudaGraphs);
  EXPECT_EQ(st.graphCaptures, 2);
  EXPECT_EQ(st.graphReplays, 4);
  EXPECT_EQ(st.graphUpdates, 0);  // host inputs: the arena addresses never change
  // More runs of known shapes capture nothing new.
  for (int i = 0; i < 3; ++i)
    for (int64_t batch : {4, 1}) runOn(**ctx, randomInput(Shape{batch, 3, 9, 11}, 7));
  EXPECT_EQ((*ctx)->stats().graphCaptures, 2);
  EXPECT_EQ((*ctx)->stats().graphReplays, 10);

  // Activation memory: the larger profile's; a context that only ran batch 1 has only its own.
  auto one = (*e)->createExecutionContext();
  runOn(**one, randomInput(Shape{1, 3, 9, 11}, 1));
  auto four = (*e)->createExecutionContext();
  runOn(**four, randomInput(Shape{4, 3, 9, 11}, 1));
  const int64_t a1 = (*one)->stats().activationArenaBytes;
  const int64_t a4 = (*four)->stats().activationArenaBytes;
  EXPECT_GT(a1, 0);
  EXPECT_GT(a4, a1);
  EXPECT_EQ(st.activationArenaBytes, a4);
  EXPECT_EQ((*one)->stats().graphCaptures, 0);  // one run: the warm-up, no graph yet

  // A shape in no profile: a clear error naming the shapes there are.
  const Status bad = (*ctx)->setInput("x", randomInput(Shape{2, 3, 9, 11}, 3));
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("1x3x9x11, 4x3x9x11"), std::string::npos) << bad.toString();
}

TEST(CudaProfiles, SaveAndLoadRunsBothShapes) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  auto e = build(convModel(), profilesConfig(dir));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  ASSERT_TRUE((*e)->save(dir.file("p.engine")).ok());
  auto loaded = Engine::load(dir.file("p.engine"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_EQ((*loaded)->profiles(), (*e)->profiles());
  auto ctxBuilt = (*e)->createExecutionContext();
  auto ctxLoaded = (*loaded)->createExecutionContext();
  ASSERT_TRUE(ctxBuilt.ok() && ctxLoaded.ok());
  const std::vector<Tensor> a = alternate(**ctxBuilt);
  const std::vector<Tensor> b = alternate(**ctxLoaded);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape());
    EXPECT_EQ(std::memcmp(a[i].raw(), b[i].raw(), a[i].bytes()), 0) << "same tactics, run " << i;
  }
  EXPECT_EQ((*ctxLoaded)->stats().graphCaptures, 2);
  EXPECT_EQ((*ctxLoaded)->stats().graphReplays, 4);
  auto again = (*loaded)->serialize();
  auto bytes = (*e)->serialize();
  ASSERT_TRUE(again.ok() && bytes.ok());
  EXPECT_EQ(*again, *bytes) << "a loaded engine serialises to the same bytes";
}

TEST(CudaProfiles, TimingCacheServesEveryProfile) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  BuilderConfig c = profilesConfig(dir);
  auto first = build(convModel(), c);
  ASSERT_TRUE(first.ok()) << first.status().toString();
  // Every layer of both profiles must now come from the cache, and the rebuild is identical.
  c.timingCacheMissIsError = true;
  auto second = build(convModel(), c);
  ASSERT_TRUE(second.ok()) << second.status().toString();
  EXPECT_EQ(*(*first)->serialize(), *(*second)->serialize());
  // A batch-2 profile is in no cache: a miss, named.
  c.shapeProfiles.push_back({{"x", Shape{2, 3, 9, 11}}});
  auto third = build(convModel(), c);
  ASSERT_FALSE(third.ok());
  EXPECT_NE(third.status().message().find("shape profile 2"), std::string::npos)
      << third.status().toString();
}

// ---- shape ranges ------------------------------------------------------------------------------

/// convModel() with a dynamic batch, height and width.
TestModel dynModel() {
  TestModel m = convModel();
  auto* dims = m.proto.mutable_graph()
                   ->mutable_input(0)
                   ->mutable_type()
                   ->mutable_tensor_type()
                   ->mutable_shape();
  for (int d : {2, 3}) dims->mutable_dim(d)->set_dim_param(d == 2 ? "H" : "W");
  return m;
}

BuilderConfig rangesConfig(const TempDir& dir, Precision p = Precision::kFp32) {
  BuilderConfig c = test::quickGpuConfig(dir.file("timing.cache"), p);
  c.shapeRanges = {{"x", ShapeRange{Shape{1, 3, 8, 8}, Shape{4, 3, 9, 11}, Shape{8, 3, 16, 16}}}};
  return c;
}

/// The CPU reference engine of dynModel() (every dim dynamic).
std::unique_ptr<Engine> cpuDynEngine() {
  BuilderConfig c;
  c.backend = Backend::kCpu;
  auto e = build(dynModel(), c);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  return e.ok() ? std::move(e).value() : nullptr;
}

const std::vector<Shape> kRangeShapes = {{4, 3, 9, 11},  {1, 3, 8, 8}, {8, 3, 16, 16},
                                         {3, 3, 12, 10}, {1, 3, 8, 8}, {4, 3, 9, 11}};

/// Runs kRangeShapes, each three times (warm-up, capture, replay), against the CPU reference
/// within `tol`; returns the last output of each.
std::vector<Tensor> runRangeShapes(ExecutionContext& ctx, double tol) {
  auto cpu = cpuDynEngine();
  auto cpuCtx = cpu->createExecutionContext();
  std::vector<Tensor> outs;
  uint32_t seed = 300;
  for (const Shape& s : kRangeShapes) {
    const Tensor x = randomInput(s, ++seed);
    const Tensor want = runOn(**cpuCtx, x);
    Tensor got;
    for (int k = 0; k < 3; ++k) got = runOn(ctx, x);
    EXPECT_EQ(got.shape(), want.shape()) << s.toString();
    if (got.shape() == want.shape()) {
      const double err = relL2(got, want);
      EXPECT_LT(err, tol) << s.toString();
      std::printf("[          ] %s: rel L2 %.3g vs CPU\n", s.toString().c_str(), err);
    }
    outs.push_back(got);
  }
  return outs;
}

TEST(CudaRanges, EveryShapeOfTheRangeMatchesTheCpuAndTakesTheOptTactics) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  auto e = build(dynModel(), rangesConfig(dir));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ((*e)->info().backend, Backend::kCuda);
  EXPECT_EQ((*e)->inputs()[0].shape, (Shape{-1, 3, -1, -1}));
  EXPECT_EQ((*e)->outputs()[0].shape, (Shape{-1, 4, -1, -1}));
  auto ctx = (*e)->createExecutionContext();
  ASSERT_TRUE(ctx.ok()) << ctx.status().toString();
  runRangeShapes(**ctx, 1e-5);
  const ContextStats st = (*ctx)->stats();
  EXPECT_EQ(st.shapeSpecializations, 3);  // 1x3x8x8, 8x3x16x16, 3x3x12x10
  std::printf("[          ] 3 specialisations: %.1f ms\n", st.specializationMs);
  EXPECT_TRUE(st.cudaGraphs);
  EXPECT_EQ(st.graphCaptures, 4);  // one per shape, a shape run again replays its graph
  EXPECT_EQ(st.cpuFallbackLayers, 0);

  // The specialisations run the opt build's tactics wherever they are candidates: here every
  // layer's (the 1x1 and 3x3 convolutions' cuDNN engines and the pool kernel take any batch
  // and size of this range).
  const auto& re = dynamic_cast<const runtime::RangeEngine&>(**e);
  auto opt = re.engineFor({{"x", Shape{4, 3, 9, 11}}}, nullptr, nullptr);
  auto big = re.engineFor({{"x", Shape{8, 3, 16, 16}}}, nullptr, nullptr);
  ASSERT_TRUE(opt.ok() && big.ok());
  const auto optTactics = runtime::cudaEngineTactics(**opt);
  const auto bigTactics = runtime::cudaEngineTactics(**big);
  ASSERT_FALSE(optTactics.empty());
  int same = 0;
  for (const auto& [layer, id] : bigTactics) {
    const auto it = optTactics.find(layer);
    same += it != optTactics.end() && it->second == id;
    std::printf("[          ] %s: opt %s, 8x3x16x16 %s\n", layer.c_str(),
                it == optTactics.end() ? "-" : it->second.c_str(), id.c_str());
  }
  EXPECT_GE(2 * same, static_cast<int>(bigTactics.size()));
  EXPECT_EQ(re.specializationCount(), 3u);
}

TEST(CudaRanges, Fp16SaveAndLoadRunsEveryShape) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  // A loaded engine specialises with the device's default timing cache: the test's own.
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  struct Restore {
    std::string v;
    bool had;
    ~Restore() {
      if (had)
        setenv("XDG_CACHE_HOME", v.c_str(), 1);
      else
        unsetenv("XDG_CACHE_HOME");
    }
  } restore{xdg ? xdg : "", xdg != nullptr};
  setenv("XDG_CACHE_HOME", dir.path().c_str(), 1);
  auto e = build(dynModel(), rangesConfig(dir, Precision::kFp16));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  ASSERT_TRUE((*e)->save(dir.file("r.engine")).ok());
  auto loaded = Engine::load(dir.file("r.engine"));
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  EXPECT_EQ((*loaded)->shapeRanges(), (*e)->shapeRanges());
  EXPECT_EQ((*loaded)->info().precision, Precision::kFp16);
  auto ctxBuilt = (*e)->createExecutionContext();
  auto ctxLoaded = (*loaded)->createExecutionContext();
  ASSERT_TRUE(ctxBuilt.ok() && ctxLoaded.ok());
  const std::vector<Tensor> a = runRangeShapes(**ctxBuilt, 3e-3);
  const std::vector<Tensor> b = runRangeShapes(**ctxLoaded, 3e-3);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_EQ(a[i].shape(), b[i].shape());
    // The opt shapes run the same engine; the others may take other tactics (the timing
    // caches differ), each checked against the CPU above.
    if (kRangeShapes[i] == Shape{4, 3, 9, 11}) {
      EXPECT_EQ(std::memcmp(a[i].raw(), b[i].raw(), a[i].bytes()), 0) << "opt shapes, run " << i;
    }
  }
  auto again = (*loaded)->serialize();
  auto bytes = (*e)->serialize();
  ASSERT_TRUE(again.ok() && bytes.ok());
  EXPECT_EQ(*again, *bytes) << "a loaded engine serialises to the same bytes";
}

TEST(CudaRanges, ContextsOnThreadsShareOneSpecialisation) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  auto e = build(dynModel(), rangesConfig(dir));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  const Tensor x = randomInput(Shape{6, 3, 13, 9}, 77);
  std::vector<Tensor> got(4);
  std::vector<int64_t> built(4, -1);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i)
    threads.emplace_back([&, i] {
      auto ctx = (*e)->createExecutionContext();
      if (!ctx.ok()) return;
      for (int k = 0; k < 4; ++k) got[i] = runOn(**ctx, x);
      built[i] = (*ctx)->stats().shapeSpecializations;
    });
  for (auto& t : threads) t.join();
  int64_t sum = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_FALSE(got[i].empty()) << "thread " << i;
    ASSERT_EQ(got[i].shape(), got[0].shape());
    EXPECT_EQ(std::memcmp(got[i].raw(), got[0].raw(), got[0].bytes()), 0) << "thread " << i;
    sum += built[i];
  }
  EXPECT_EQ(sum, 1);
  auto cpu = cpuDynEngine();
  auto cpuCtx = cpu->createExecutionContext();
  EXPECT_LT(relL2(got[0], runOn(**cpuCtx, x)), 1e-5);
}

TEST(CudaRanges, AShapeOutsideTheRangeIsAClearError_n) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  auto e = build(dynModel(), rangesConfig(dir));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  auto ctx = (*e)->createExecutionContext();
  ASSERT_TRUE(ctx.ok());
  const Status bad = (*ctx)->setInput("x", randomInput(Shape{9, 3, 9, 11}, 1));
  EXPECT_EQ(bad.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("outside the engine's shape range 1x3x8x8 .. 8x3x16x16"),
            std::string::npos)
      << bad.toString();
  // Still runs a shape inside.
  auto cpu = cpuDynEngine();
  auto cpuCtx = cpu->createExecutionContext();
  const Tensor x = randomInput(Shape{2, 3, 8, 16}, 2);
  EXPECT_LT(relL2(runOn(**ctx, x), runOn(**cpuCtx, x)), 1e-5);
}

#else

TEST(CudaProfiles, NeedsCuda) {
  GTEST_SKIP() << "this EdgeInfer was built without CUDA";
}

#endif

}  // namespace
}  // namespace edgeinfer
