// The `cublas` provider (MatMul with a runtime B, batched with broadcasting) against the CPU
// reference: plain, batched, B broadcast (folded into one GEMM), A broadcast, both broadcast in
// different dims (a host loop of strided batches), 1-D operands; every algorithm the heuristic
// offers, FP32 (no TF32: 1e-5) and FP16 (2e-3). Negative cases (_n) need no GPU: the provider
// checks the layer before any device call.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <set>
#include <string>
#include <vector>

#include "cuda_layer_case.h"
#include "kernels/cuda/batched_matmul.h"

namespace edgeinfer {
namespace {

using test::LayerCase;
using test::randomHalfExact;

TEST(CudaBatchedMatMul, BroadcastBatches) {
  EI_SKIP_WITHOUT_GPU();
  struct Case {
    Shape a, b;
  };
  const std::vector<Case> cases = {
      {Shape{13, 7}, Shape{7, 5}},
      {Shape{64, 128}, Shape{128, 96}},
      {Shape{2, 3, 5, 7}, Shape{2, 3, 7, 4}},  // one strided batch of 6
      {Shape{3, 5, 7}, Shape{7, 4}},           // B shared: one GEMM of 15 rows
      {Shape{5, 7}, Shape{2, 3, 7, 4}},        // A broadcast: stride 0
      {Shape{2, 1, 5, 7}, Shape{1, 3, 7, 4}},  // both broadcast: host loop over 2
      {Shape{2, 3, 1, 5, 7}, Shape{3, 4, 7, 6}},
      {Shape{7}, Shape{2, 7, 4}},  // 1-D A
      {Shape{2, 5, 7}, Shape{7}},  // 1-D B
      {Shape{4, 33, 40}, Shape{4, 40, 17}},
  };
  uint32_t seed = 1100;
  for (const auto& c : cases) {
    LayerCase lc("MatMul");
    lc.input(randomHalfExact(c.a, seed++, -1.f, 1.f));
    lc.input(randomHalfExact(c.b, seed++, -1.f, 1.f));
    cuda::CublasBatchedMatMulProvider provider;
    const auto ids = lc.runAll(provider, 1e-5, 2e-3);
    bool fp16 = false, fp32 = false;
    for (const auto& id : ids) {
      fp16 = fp16 || id.rfind("cublas.bmm.fp16.", 0) == 0;
      fp32 = fp32 || id.rfind("cublas.bmm.fp32.", 0) == 0;
    }
    EXPECT_TRUE(fp16 && fp32) << c.a.toString() << " x " << c.b.toString() << ": "
                              << provider.lastReason();
  }
}

TEST(CudaBatchedMatMul, ConstantB_n) {
  LayerCase lc("MatMul");
  lc.input(randomHalfExact(Shape{3, 4}, 1)).constant(randomHalfExact(Shape{4, 5}, 2));
  builder::LayerContext layer;
  ASSERT_TRUE(lc.layer(&layer).ok());
  cuda::CublasBatchedMatMulProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(provider.lastReason().find("constant"), std::string::npos) << provider.lastReason();
}

TEST(CudaBatchedMatMul, Int8Precision_n) {
  LayerCase lc("MatMul");
  lc.input(randomHalfExact(Shape{3, 4}, 1)).input(randomHalfExact(Shape{4, 5}, 2));
  builder::LayerContext layer;
  ASSERT_TRUE(lc.layer(&layer).ok());
  cuda::CublasBatchedMatMulProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kInt8).empty());
}

TEST(CudaBatchedMatMul, IntegerTypes_n) {
  LayerCase lc("MatMul");
  lc.input(randomHalfExact(Shape{3, 4}, 1));
  lc.input(randomHalfExact(Shape{4, 5}, 2));
  builder::LayerContext layer;
  ASSERT_TRUE(lc.layer(&layer).ok());
  layer.inputTypes = {DataType::kInt32, DataType::kInt32};
  layer.outputTypes = {DataType::kInt32};
  cuda::CublasBatchedMatMulProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaBatchedMatMul, DynamicShape_n) {
  LayerCase lc("MatMul");
  lc.input(randomHalfExact(Shape{2, 3, 4}, 1)).input(randomHalfExact(Shape{2, 4, 5}, 2));
  builder::LayerContext layer;
  ASSERT_TRUE(lc.layer(&layer).ok());
  layer.inputShapes[0][0] = -1;
  layer.outputShapes[0][0] = -1;
  cuda::CublasBatchedMatMulProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaBatchedMatMul, BatchesDoNotBroadcast_n) {
  // Shape inference rejects it too; the provider must not rely on that.
  LayerCase lc("MatMul");
  lc.input(randomHalfExact(Shape{2, 3, 4}, 1)).input(randomHalfExact(Shape{2, 4, 5}, 2));
  builder::LayerContext layer;
  ASSERT_TRUE(lc.layer(&layer).ok());
  layer.inputShapes[1] = Shape{3, 4, 5};
  cuda::CublasBatchedMatMulProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
  EXPECT_NE(provider.lastReason().find("broadcast"), std::string::npos) << provider.lastReason();
}

TEST(CudaBatchedMatMul, NotMatMul_n) {
  LayerCase lc("Gemm");
  lc.input(randomHalfExact(Shape{3, 4}, 1)).input(randomHalfExact(Shape{4, 5}, 2));
  builder::LayerContext layer;
  ASSERT_TRUE(lc.layer(&layer).ok());
  cuda::CublasBatchedMatMulProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

}  // namespace
}  // namespace edgeinfer

#else  // !EDGEINFER_HAVE_CUDA

TEST(CudaBatchedMatMul, BuiltWithoutCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif  // EDGEINFER_HAVE_CUDA
