// Device weights shared by equal uploads (kernels/cuda/device_weights.h): the store's sharing,
// its byte-for-byte check behind the hash, freeing with the last holder, and what it gives the
// engines: the shape profiles of one engine, and two engines loaded from one file, hold one
// copy of the weights they have in common on the GPU. The hash tests run anywhere; the rest
// skip without a GPU.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "int8_test_util.h"
#include "kernels/cuda/device_weights.h"
#include "tactic_test_util.h"
#include "test_model.h"

namespace edgeinfer::cuda {
namespace {

using test::TempDir;
using test::TestModel;

std::vector<uint8_t> randomBytes(size_t n, uint32_t seed) {
  std::vector<uint8_t> b(n);
  std::mt19937 rng(seed);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  return b;
}

std::vector<uint8_t> download(const std::shared_ptr<void>& block, size_t n) {
  std::vector<uint8_t> b(n);
  EXPECT_EQ(cudaMemcpy(b.data(), block.get(), n, cudaMemcpyDeviceToHost), cudaSuccess);
  return b;
}

uint64_t everythingCollides(const void*, size_t) {
  return 42;
}

TEST(DeviceWeightHash, EveryByteAndTheLengthCount) {
  const std::vector<uint8_t> a = randomBytes(1000, 1);
  const uint64_t h = hashWeightBytes(a.data(), a.size());
  EXPECT_EQ(h, hashWeightBytes(a.data(), a.size())) << "deterministic";
  for (size_t i : {size_t{0}, size_t{31}, size_t{32}, size_t{500}, size_t{999}}) {
    std::vector<uint8_t> b = a;
    b[i] ^= 1;  // one bit, in a full 32-byte stripe or in the tail
    EXPECT_NE(hashWeightBytes(b.data(), b.size()), h) << "byte " << i;
  }
  std::vector<uint8_t> zeros(64, 0);
  EXPECT_NE(hashWeightBytes(zeros.data(), 64), hashWeightBytes(zeros.data(), 63))
      << "trailing zeros change the hash";
  EXPECT_NE(hashWeightBytes(zeros.data(), 0), hashWeightBytes(zeros.data(), 32));
}

TEST(DeviceWeightStore, EqualBytesShareOneBlock) {
  EI_SKIP_WITHOUT_GPU();
  DeviceWeightStore store(hashWeightBytes, 0);
  const std::vector<uint8_t> w = randomBytes(100000, 2);
  auto a = store.upload(w.data(), w.size());
  ASSERT_TRUE(a.ok()) << a.status().toString();
  const std::vector<uint8_t> copy = w;  // another host buffer, the same bytes
  auto b = store.upload(copy.data(), copy.size());
  ASSERT_TRUE(b.ok()) << b.status().toString();
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(download(*a, w.size()), w);
  const DeviceWeightStore::Stats s = store.stats();
  EXPECT_EQ(s.liveBlocks, 1);
  EXPECT_EQ(s.liveBytes, 100000);
  EXPECT_EQ(s.sharedUploads, 1);
  EXPECT_EQ(s.sharedBytes, 100000);
}

TEST(DeviceWeightStore, SameHashDifferentBytesNeverShare_n) {
  EI_SKIP_WITHOUT_GPU();
  DeviceWeightStore store(everythingCollides, 0);
  const std::vector<uint8_t> w1 = randomBytes(4096, 3);
  std::vector<uint8_t> w2 = w1;
  w2[4095] ^= 0x80;  // the last bit differs
  auto a = store.upload(w1.data(), w1.size());
  auto b = store.upload(w2.data(), w2.size());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->get(), b->get());
  EXPECT_EQ(download(*a, w1.size()), w1);
  EXPECT_EQ(download(*b, w2.size()), w2);
  // A prefix of w1 (another size, the same hash) is not w1 either.
  auto c = store.upload(w1.data(), 2048);
  ASSERT_TRUE(c.ok());
  EXPECT_NE(c->get(), a->get());
  EXPECT_EQ(store.stats().hashMatchesThatDiffered, 1);
  EXPECT_EQ(store.stats().sharedUploads, 0);
  EXPECT_EQ(store.stats().liveBlocks, 3);
  // ... and each is still found for its own bytes.
  auto again = store.upload(w2.data(), w2.size());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->get(), b->get());
}

TEST(DeviceWeightStore, FreedWithItsLastHolder) {
  EI_SKIP_WITHOUT_GPU();
  DeviceWeightStore store(hashWeightBytes, 0);
  const std::vector<uint8_t> w = randomBytes(70000, 4);
  auto a = store.upload(w.data(), w.size());
  ASSERT_TRUE(a.ok());
  std::shared_ptr<void> held = std::move(a).value();
  std::weak_ptr<void> weak = held;
  {
    auto b = store.upload(w.data(), w.size());
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(held.use_count(), 2) << "the store keeps no strong reference";
  }
  held.reset();
  EXPECT_TRUE(weak.expired()) << "freed with the last holder";
  EXPECT_EQ(store.stats().liveBlocks, 0);
  auto c = store.upload(w.data(), w.size());  // a new block, the same bytes
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(download(*c, w.size()), w);
  EXPECT_EQ(store.stats().liveBlocks, 1);
}

TEST(DeviceWeightStore, SmallBlocksAreNotLookedUp) {
  EI_SKIP_WITHOUT_GPU();
  DeviceWeightStore store;  // the default threshold: 64 KiB
  const std::vector<uint8_t> bias = randomBytes(512, 5);
  auto a = store.upload(bias.data(), bias.size());
  auto b = store.upload(bias.data(), bias.size());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->get(), b->get());
  EXPECT_EQ(download(*b, bias.size()), bias);
  EXPECT_EQ(store.stats().liveBlocks, 0);
}

TEST(DeviceWeightStore, TooLargeIsOutOfMemoryNamingTheSize_n) {
  EI_SKIP_WITHOUT_GPU();
  DeviceWeightStore store(everythingCollides, 0);  // (the hash does not read the bytes)
  const uint8_t byte = 0;
  const size_t huge = size_t{1} << 52;  // 4 PiB
  auto a = store.upload(&byte, huge);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), ErrorCode::kOutOfMemory) << a.status().toString();
  EXPECT_NE(a.status().message().find(std::to_string(huge)), std::string::npos);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the failed allocation leaves no sticky error";
  const std::vector<uint8_t> w = randomBytes(1000, 6);
  auto b = store.upload(w.data(), w.size());  // the store still works
  ASSERT_TRUE(b.ok()) << b.status().toString();
}

/// x: [N, 2048, 5, 5] -> depthwise Conv 3x3 (pad 1) + bias -> y. Its weights (2048 x 9 floats,
/// 72 KiB) are over the store's threshold; its bias (8 KiB) is not.
TestModel depthwiseModel() {
  TestModel m(13);
  m.input("x", {-1, 2048, 5, 5});
  m.randomInitializer("w", {2048, 1, 3, 3}, 31, -0.5f, 0.5f);
  m.randomInitializer("b", {2048}, 32);
  auto& c = m.node("Conv", {"x", "w", "b"}, {"y"}, "dw");
  TestModel::attrInts(c, "pads", {1, 1, 1, 1});
  TestModel::attr(c, "group", 2048);
  m.output("y");
  return m;
}

double maxAbsDiff(const Tensor& a, const Tensor& b) {
  double m = 0;
  for (int64_t i = 0; i < a.numel(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a.data<float>()[i]) - b.data<float>()[i]));
  return m;
}

constexpr int64_t kDepthwiseWeightBytes = 2048 * 9 * 4;

TEST(DeviceWeightStore, ShapeProfilesHoldOneCopyOfTheirWeights) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  BuilderConfig c = test::quickGpuConfig(dir.file("timing.cache"));
  c.shapeProfiles = {{{"x", Shape{1, 2048, 5, 5}}}, {{"x", Shape{3, 2048, 5, 5}}}};
  c.forcedTactics["dw"] = "cuda-dw.k3.fp32.nchw";  // the same weight format in both profiles
  const std::string bytes = depthwiseModel().bytes();
  {
    auto built = Builder::buildFromBuffer(bytes.data(), bytes.size(), c);
    ASSERT_TRUE(built.ok()) << built.status().toString();
    ASSERT_TRUE((*built)->save(dir.file("p.engine")).ok());
  }  // (freed: the load below must upload its weights itself)
  DeviceWeightStore& store = DeviceWeightStore::process();
  const DeviceWeightStore::Stats before = store.stats();
  auto e = Engine::load(dir.file("p.engine"));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  ASSERT_EQ((*e)->profiles().size(), 2u);
  const DeviceWeightStore::Stats after = store.stats();
  EXPECT_EQ(after.liveBytes - before.liveBytes, kDepthwiseWeightBytes) << "one copy, not two";
  EXPECT_EQ(after.sharedUploads - before.sharedUploads, 1);
  EXPECT_EQ(after.sharedBytes - before.sharedBytes, kDepthwiseWeightBytes);

  // Both profiles compute with the shared weights: against the CPU reference.
  BuilderConfig cpuCfg;
  cpuCfg.backend = Backend::kCpu;
  auto cpu = Builder::buildFromBuffer(bytes.data(), bytes.size(), cpuCfg);
  ASSERT_TRUE(cpu.ok()) << cpu.status().toString();
  auto ctx = (*e)->createExecutionContext();
  auto cpuCtx = (*cpu)->createExecutionContext();
  ASSERT_TRUE(ctx.ok() && cpuCtx.ok());
  for (int64_t batch : {1, 3, 1}) {
    const Tensor x =
        test::randomTensor(Shape{batch, 2048, 5, 5}, static_cast<uint32_t>(batch), -1.f, 1.f);
    auto got = (*ctx)->run({{"x", x}});
    auto want = (*cpuCtx)->run({{"x", x}});
    ASSERT_TRUE(got.ok() && want.ok()) << got.status().toString();
    EXPECT_LT(maxAbsDiff(got->at("y"), want->at("y")), 1e-5) << "batch " << batch;
  }
}

TEST(DeviceWeightStore, TwoLoadsOfOneEngineShareTheirWeights) {
  EI_SKIP_WITHOUT_GPU();
  TempDir dir;
  BuilderConfig c = test::quickGpuConfig(dir.file("timing.cache"), Precision::kFp32);
  c.inputShapes = {{"x", Shape{2, 2048, 5, 5}}};
  const std::string bytes = depthwiseModel().bytes();
  {
    auto built = Builder::buildFromBuffer(bytes.data(), bytes.size(), c);
    ASSERT_TRUE(built.ok()) << built.status().toString();
    ASSERT_TRUE((*built)->save(dir.file("e.engine")).ok());
  }
  DeviceWeightStore& store = DeviceWeightStore::process();
  const DeviceWeightStore::Stats s0 = store.stats();
  auto first = Engine::load(dir.file("e.engine"));
  ASSERT_TRUE(first.ok()) << first.status().toString();
  const DeviceWeightStore::Stats s1 = store.stats();
  auto second = Engine::load(dir.file("e.engine"));
  ASSERT_TRUE(second.ok()) << second.status().toString();
  const DeviceWeightStore::Stats s2 = store.stats();
  // Whichever FP32 tactic the build chose, its converted weights are over the threshold.
  EXPECT_GE(s1.liveBytes - s0.liveBytes, kDepthwiseWeightBytes);
  EXPECT_EQ(s2.liveBytes, s1.liveBytes) << "the second load allocates no weights";
  EXPECT_EQ(s2.sharedBytes - s1.sharedBytes, s1.liveBytes - s0.liveBytes);
  // The first engine goes; the second still runs on the weights they shared.
  first->reset();
  const Tensor x = test::randomTensor(Shape{2, 2048, 5, 5}, 9, -1.f, 1.f);
  const Tensor a = test::runOnce(**second, x);
  EXPECT_EQ(a.shape(), (Shape{2, 2048, 5, 5}));
  auto third = Engine::load(dir.file("e.engine"));
  ASSERT_TRUE(third.ok()) << third.status().toString();
  const Tensor b = test::runOnce(**third, x);
  ASSERT_EQ(a.bytes(), b.bytes());
  EXPECT_EQ(std::memcmp(a.raw(), b.raw(), a.bytes()), 0);
}

}  // namespace
}  // namespace edgeinfer::cuda

#else

TEST(DeviceWeightStore, NeedsCuda) {
  GTEST_SKIP() << "this EdgeInfer was built without CUDA";
}

#endif
