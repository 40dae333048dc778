// The `cuda` provider's Resize and Reduce tactics against the CPU reference. Resize: the
// canonical form (onnx/normalize.cpp) on 4-D tensors, nearest with every nearest_mode, linear
// and cubic, every coordinate_transformation_mode, scales and sizes, up- and downsampling,
// NCHW and NHWC, batch and channels resized or shifted too. Reduce: ReduceSum/Mean/Max/Min,
// ReduceProd/L1/L2/LogSum/LogSumExp/SumSquare (LogSumExp also on huge and infinite values)
// over leading, middle, trailing and all axes, keepdims 0/1, short rows (a warp), long rows (a
// block) and strided columns. Negative cases (_n): layers the provider must not offer tactics
// for (they need no GPU).
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <cmath>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "cuda_layer_case.h"

namespace edgeinfer {
namespace {

using graph::Attribute;
using test::floatTensor;
using test::ids;
using test::intTensor;
using test::LayerCase;
using test::randomHalfExact;

const std::vector<std::string> kFloat = {"fp16", "fp32"};
const std::vector<std::string> kBoth = {"nchw", "nhwc"};

/// A canonical Resize node: every attribute set, as the importer leaves it.
LayerCase resizeCase(const std::string& mode, const std::string& ctm, const std::string& nearest,
                     int64_t excludeOutside = 0) {
  LayerCase c("Resize");
  c.attr("mode", Attribute::String(mode))
      .attr("coordinate_transformation_mode", Attribute::String(ctm))
      .attr("nearest_mode", Attribute::String(nearest))
      .attr("cubic_coeff_a", Attribute::Float(-0.75f))
      .attr("exclude_outside", Attribute::Int(excludeOutside))
      .attr("extrapolation_value", Attribute::Float(-2.5f));
  return c;
}

struct ResizeTarget {
  Shape x;
  std::vector<float> scales;   // empty: sizes
  std::vector<int64_t> sizes;  // used when scales is empty
};

const std::vector<ResizeTarget>& resizeTargets() {
  static const std::vector<ResizeTarget> kTargets = {
      {Shape{2, 3, 7, 5}, {1.f, 1.f, 2.f, 2.f}, {}},
      {Shape{1, 4, 9, 13}, {1.f, 1.f, 0.6f, 1.5f}, {}},
      {Shape{2, 3, 7, 5}, {}, {2, 3, 12, 3}},
      {Shape{1, 8, 6, 6}, {}, {1, 8, 1, 11}},  // a single output row
  };
  return kTargets;
}

void addResizeInputs(LayerCase& c, const ResizeTarget& t, uint32_t seed, bool crop) {
  c.input(randomHalfExact(t.x, seed));
  if (crop)
    c.constant(floatTensor({0.f, 0.f, 0.1f, -0.2f, 1.f, 1.f, 0.8f, 1.3f}));  // roi
  else
    c.absent();
  if (!t.scales.empty()) {
    c.constant(floatTensor(t.scales));
  } else {
    c.absent();
    c.constant(intTensor(DataType::kInt64, t.sizes));
  }
}

const std::vector<std::string> kCtms = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                                        "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};

TEST(CudaResize, NearestEveryMode) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 800;
  for (const std::string& ctm : kCtms) {
    for (const char* nearest : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"}) {
      for (const auto& t : resizeTargets()) {
        SCOPED_TRACE(ctm + " " + nearest + " " + t.x.toString());
        LayerCase c = resizeCase("nearest", ctm, nearest);
        addResizeInputs(c, t, seed++, ctm == "tf_crop_and_resize");
        c.check(ids("resize", kFloat, kBoth), 0, 0);  // picks inputs: exact
      }
    }
  }
}

TEST(CudaResize, LinearAndCubic) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 900;
  for (const std::string& ctm : kCtms) {
    for (const char* mode : {"linear", "cubic"}) {
      for (int64_t exclude : {0, 1}) {
        if (exclude && std::string(mode) == "linear") continue;
        for (const auto& t : resizeTargets()) {
          SCOPED_TRACE(ctm + " " + mode + " " + t.x.toString());
          LayerCase c = resizeCase(mode, ctm, "round_prefer_floor", exclude);
          addResizeInputs(c, t, seed++, ctm == "tf_crop_and_resize");
          // FP32: the reference's taps and rounding (1e-6 leaves room for its compiler's
          // choices); FP16: one rounding of the output.
          c.check(ids("resize", kFloat, kBoth), 1e-6, 2e-3);
        }
      }
    }
  }
}

TEST(CudaResize, UpsampleCanonicalForm) {
  EI_SKIP_WITHOUT_GPU();
  // Upsample-9 / Resize-10 after normalisation: asymmetric, floor, inputs {X, "", scales}.
  for (const char* mode : {"nearest", "linear"}) {
    LayerCase c = resizeCase(mode, "asymmetric", "floor");
    c.input(randomHalfExact(Shape{1, 16, 10, 10}, 1)).absent().constant(floatTensor({1, 1, 2, 2}));
    c.check(ids("resize", kFloat, kBoth), std::string(mode) == "nearest" ? 0 : 1e-6,
            std::string(mode) == "nearest" ? 0 : 2e-3);
  }
}

TEST(CudaResize, MovesBatchAndChannels) {
  EI_SKIP_WITHOUT_GPU();
  {  // channels and batch resized too
    LayerCase c = resizeCase("nearest", "asymmetric", "floor");
    c.input(randomHalfExact(Shape{2, 3, 4, 5}, 1))
        .absent()
        .constant(floatTensor({1.5f, 2, 2, 0.5f}));
    c.check(ids("resize", kFloat, kBoth), 0, 0);
  }
  {  // a roi that crops the batch, linear
    LayerCase c = resizeCase("linear", "tf_crop_and_resize", "floor");
    c.input(randomHalfExact(Shape{3, 2, 4, 4}, 2))
        .constant(floatTensor({0.5f, 0, 0, 0, 1, 1, 1, 1}))
        .constant(floatTensor({1, 1, 2, 2}));
    c.check(ids("resize", kFloat, kBoth), 1e-6, 2e-3);
  }
  {  // tf_half_pixel_for_nn with a ceiling rounding shifts N and C by one (clamped)
    LayerCase c = resizeCase("nearest", "tf_half_pixel_for_nn", "ceil");
    c.input(randomHalfExact(Shape{2, 3, 5, 5}, 3)).absent().constant(floatTensor({1, 1, 2, 2}));
    c.check(ids("resize", kFloat, kBoth), 0, 0);
  }
}

// ---- Reduce ---------------------------------------------------------------------------------

struct ReduceCase {
  Shape x;
  std::vector<int64_t> axes;  // empty: every axis
  int64_t keepdims;
};

TEST(CudaReduce, SumMeanMaxMin) {
  EI_SKIP_WITHOUT_GPU();
  const std::vector<ReduceCase> cases = {
      {Shape{2, 3, 7, 5}, {1}, 1},  {Shape{2, 3, 7, 5}, {2, 3}, 1},
      {Shape{2, 3, 7, 5}, {-1}, 0}, {Shape{2, 3, 7, 5}, {0}, 0},
      {Shape{2, 3, 7, 5}, {}, 1},   {Shape{2, 3, 7, 5}, {0, 1}, 0},
      {Shape{4, 1000}, {1}, 1},     {Shape{3, 5000}, {-1}, 0},
      {Shape{5000, 3}, {0}, 1},     {Shape{2, 1, 7}, {1}, 1},
      {Shape{2, 1, 7}, {0, 2}, 0},  // adjacent once 1 is dropped
      {Shape{3, 70, 40}, {1}, 0},   {Shape{77}, {0}, 1},
  };
  uint32_t seed = 1000;
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin"}) {
    const bool exact = std::string(op) == "ReduceMax" || std::string(op) == "ReduceMin";
    for (const auto& rc : cases) {
      LayerCase c(op);
      if (!rc.axes.empty()) c.attr("axes", Attribute::Ints(rc.axes));
      c.attr("keepdims", Attribute::Int(rc.keepdims));
      c.input(randomHalfExact(rc.x, seed++));
      const size_t outRank = rc.keepdims
                                 ? rc.x.rank()
                                 : rc.x.rank() - (rc.axes.empty() ? rc.x.rank() : rc.axes.size());
      // Sums accumulate in float (the reference in double): 1e-5 for FP32.
      c.check(ids("reduce", kFloat, {outRank == 4 ? "nchw" : "linear"}), exact ? 0 : 1e-5,
              exact ? 0 : 2e-3);
    }
  }
}

// ReduceProd / L1 / L2 / LogSum / LogSumExp / SumSquare: the same views, on input ranges where
// the results stay finite (products of values near 1, positive sums for LogSum).
TEST(CudaReduce, ProdNormsAndLogSums) {
  EI_SKIP_WITHOUT_GPU();
  const std::vector<ReduceCase> cases = {
      {Shape{2, 3, 7, 5}, {1}, 1}, {Shape{2, 3, 7, 5}, {2, 3}, 1}, {Shape{2, 3, 7, 5}, {0}, 0},
      {Shape{2, 3, 7, 5}, {}, 1},  {Shape{4, 1000}, {1}, 1},       {Shape{3, 5000}, {-1}, 0},
      {Shape{5000, 3}, {0}, 1},    {Shape{3, 70, 40}, {1}, 0},     {Shape{77}, {0}, 1},
  };
  struct OpCase {
    const char* op;
    float lo, hi;
    double tol32;
  };
  // Products and LogSumExp's pairwise log1p(exp()) accumulate float rounding in sequence.
  const std::vector<OpCase> ops = {
      {"ReduceProd", 0.9f, 1.1f, 1e-4},     {"ReduceL1", -3.f, 3.f, 1e-5},
      {"ReduceL2", -3.f, 3.f, 1e-5},        {"ReduceLogSum", 0.1f, 3.f, 1e-5},
      {"ReduceLogSumExp", -8.f, 8.f, 1e-4}, {"ReduceSumSquare", -3.f, 3.f, 1e-5},
  };
  uint32_t seed = 2000;
  for (const auto& oc : ops) {
    for (const auto& rc : cases) {
      LayerCase c(oc.op);
      if (!rc.axes.empty()) c.attr("axes", Attribute::Ints(rc.axes));
      c.attr("keepdims", Attribute::Int(rc.keepdims));
      c.input(randomHalfExact(rc.x, seed++, oc.lo, oc.hi));
      const size_t outRank = rc.keepdims
                                 ? rc.x.rank()
                                 : rc.x.rank() - (rc.axes.empty() ? rc.x.rank() : rc.axes.size());
      c.check(ids("reduce", kFloat, {outRank == 4 ? "nchw" : "linear"}), oc.tol32, 2e-3);
    }
  }
}

// LogSumExp of large values (no overflow), of -inf rows and with +inf.
TEST(CudaReduce, LogSumExpExtremes) {
  EI_SKIP_WITHOUT_GPU();
  Tensor x = Tensor::zeros(DataType::kFloat32, Shape{4, 6});
  const float inf = std::numeric_limits<float>::infinity();
  const float v[4][6] = {{80.f, 85.f, 88.f, 70.f, 60.f, 87.5f},
                         {-inf, -inf, -inf, -inf, -inf, -inf},
                         {1.f, inf, 2.f, 3.f, -inf, 0.f},
                         {-1.f, -2.f, -inf, -3.f, -4.f, -5.f}};
  for (int r = 0; r < 4; ++r)
    for (int k = 0; k < 6; ++k) x.data<float>()[r * 6 + k] = v[r][k];
  LayerCase c("ReduceLogSumExp");
  c.attr("axes", Attribute::Ints({1}));
  c.attr("keepdims", Attribute::Int(0));
  c.input(x);
  // FP32 tactics: exp(88) overflows float, the pairwise log-sums must not.
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  std::vector<Tensor> ref;
  ASSERT_TRUE(ref::runNode(c.node(), c.inputs(), ref).ok());
  cuda::CudaKernelProvider provider;
  int ran = 0;
  for (auto& t : provider.candidates(layer, Precision::kFp32)) {
    ASSERT_TRUE(t->initialize(layer).ok());
    auto out = test::runTactic(*t, layer, c.inputs());
    ASSERT_TRUE(out.ok()) << out.status().toString();
    for (int r = 0; r < 4; ++r) {
      const double got = (*out)[0].getAsDouble(r), want = ref[0].getAsDouble(r);
      if (std::isinf(want)) {
        EXPECT_EQ(got, want) << "row " << r;
      } else {
        EXPECT_NEAR(got, want, 1e-5 * std::fabs(want) + 1e-6) << "row " << r;
      }
    }
    ++ran;
  }
  EXPECT_EQ(ran, 1);
}

TEST(CudaReduce, NoopWithEmptyAxes) {
  EI_SKIP_WITHOUT_GPU();
  // The input unchanged, for every reduction (none of |x|, x^2, log x applied).
  for (const char* op : {"ReduceMean", "ReduceL1", "ReduceL2", "ReduceSumSquare", "ReduceLogSum",
                         "ReduceLogSumExp", "ReduceProd", "ReduceMax"}) {
    LayerCase c(op);
    c.attr("noop_with_empty_axes", Attribute::Int(1));
    c.input(randomHalfExact(Shape{3, 4, 5}, 7));
    SCOPED_TRACE(op);
    c.check(ids("reduce", kFloat, {"linear"}), 0, 0);
  }
}

// ---- Negative cases: no candidates (no GPU needed) -----------------------------------------

TEST(CudaResize, ThreeDimensional_n) {
  LayerCase c = resizeCase("nearest", "asymmetric", "floor");
  c.input(randomHalfExact(Shape{2, 3, 8}, 1)).absent().constant(floatTensor({1, 1, 2}));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaResize, RuntimeScales_n) {
  LayerCase c = resizeCase("nearest", "asymmetric", "floor");
  c.input(randomHalfExact(Shape{1, 3, 4, 4}, 1)).absent().input(floatTensor({1, 1, 2, 2}));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaResize, UnknownModes_n) {
  LayerCase c = resizeCase("nearest", "asymmetric", "floor");
  c.input(randomHalfExact(Shape{1, 3, 4, 4}, 1)).absent().constant(floatTensor({1, 1, 2, 2}));
  builder::LayerContext layer;
  ASSERT_EQ(c.candidates(Precision::kFp16, &layer).size(), 4u);
  for (const auto& [name, value] : std::vector<std::pair<std::string, std::string>>{
           {"mode", "bicubic"},
           {"coordinate_transformation_mode", "half_pixel_symmetric"},
           {"nearest_mode", "round"}}) {
    graph::Node bad = c.node();
    bad.attrs.set(name, Attribute::String(value));
    layer.node = &bad;
    cuda::CudaKernelProvider provider;
    EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty()) << name << "=" << value;
  }
  graph::Node bad = c.node();
  bad.attrs.set("antialias", Attribute::Int(1));
  layer.node = &bad;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaResize, ConsumesRoiScalesSizes_n) {
  LayerCase c = resizeCase("linear", "half_pixel", "floor");
  c.input(randomHalfExact(Shape{1, 3, 4, 4}, 1))
      .absent()
      .absent()
      .constant(intTensor(DataType::kInt64, {1, 3, 8, 8}));
  const auto cands = c.candidates();
  ASSERT_EQ(cands.size(), 4u);
  for (const auto& t : cands) {
    EXPECT_FALSE(t->consumesInput(0)) << t->id();
    EXPECT_TRUE(t->consumesInput(3)) << t->id();
  }
}

TEST(CudaReduce, NonAdjacentAxes_n) {
  LayerCase c("ReduceSum");
  c.attr("axes", Attribute::Ints({0, 2}));
  c.input(randomHalfExact(Shape{2, 3, 4, 5}, 1));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaReduce, NonAdjacentAxesOfTheNewReductions_n) {
  for (const char* op : {"ReduceProd", "ReduceL2", "ReduceLogSumExp", "ReduceSumSquare"}) {
    LayerCase c(op);
    c.attr("axes", Attribute::Ints({0, 2}));
    c.input(randomHalfExact(Shape{2, 3, 4}, 1));
    EXPECT_TRUE(c.candidates().empty()) << op;
  }
}

TEST(CudaReduce, Int32_n) {
  LayerCase c("ReduceSum");
  c.attr("axes", Attribute::Ints({1}));
  c.input(test::randomInts(Shape{2, 3}, DataType::kInt32, 1));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaReduce, DynamicShape_n) {
  LayerCase c("ReduceMax");
  c.attr("axes", Attribute::Ints({1}));
  c.input(randomHalfExact(Shape{2, 3}, 1));
  builder::LayerContext layer;
  ASSERT_FALSE(c.candidates(Precision::kFp16, &layer).empty());
  layer.inputShapes[0][0] = -1;
  layer.outputShapes[0][0] = -1;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

}  // namespace
}  // namespace edgeinfer

#else  // !EDGEINFER_HAVE_CUDA

TEST(CudaResizeReduce, BuiltWithoutCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif  // EDGEINFER_HAVE_CUDA
