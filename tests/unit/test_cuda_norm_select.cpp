// The `cuda` provider's normalisation, selection and scan tactics against the CPU reference:
// LayerNormalization (every axis, negative ones, broadcast Scale/B, no B, short rows (a warp)
// and long ones (a block)), InstanceNormalization (3-D to 5-D), MeanVarianceNormalization (the
// default and other axes, 2-D to 5-D), LRN (even and odd windows,
// windows wider than C, NCHW and NHWC), ArgMax/ArgMin (every axis, keepdims 0/1,
// select_last_index 0/1, ties and NaN), TopK (every axis, largest/smallest, k from the input or
// the attribute, ties, NaN, long axes), CumSum (every axis, exclusive/reverse, float and
// integer, long rows scanned by a block) and ScatterElements / ScatterND (reduction none,
// runtime and constant int32/int64 indices, negative and duplicate ones). Every output is compared,
// the integer ones (and TopK's values, which are copies) exactly. Inputs are FP16-representable so
// every tactic sees the reference's inputs. Negative cases (_n): layers the provider must not offer
// tactics for (they need no GPU).
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "cuda_layer_case.h"

namespace edgeinfer {
namespace {

using builder::LayerContext;
using graph::Attribute;
using test::ids;
using test::intTensor;
using test::LayerCase;
using test::randomHalfExact;

const std::vector<std::string> kFloat = {"fp16", "fp32"};
const float kNaN = std::numeric_limits<float>::quiet_NaN();

/// Float tensor of small integers in [lo, hi]: many ties, exact in FP16.
Tensor smallInts(const Shape& s, uint32_t seed, int64_t lo = -2, int64_t hi = 2) {
  const Tensor i = test::randomInts(s, DataType::kInt32, seed, lo, hi);
  Tensor t = Tensor::zeros(DataType::kFloat32, s);
  for (int64_t k = 0; k < t.numel(); ++k)
    t.data<float>()[k] = static_cast<float>(i.data<int32_t>()[k]);
  return t;
}

bool sameValue(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || a == b;
}

/// Runs every candidate (FP16 precision: FP16 and FP32 tactics) against the reference and
/// compares every output: integer outputs, and every output when `exact`, element by element
/// (NaN equals NaN); float ones by rel. L2 (tol32 / tol16 by the output's storage). Returns
/// the candidates' ids.
std::set<std::string> runCase(LayerCase& c, double tol32, double tol16, bool exact = false) {
  std::set<std::string> seen;
  const graph::Node& node = c.node();
  LayerContext layer;
  const Status ls = c.layer(&layer);
  EXPECT_TRUE(ls.ok()) << ls.toString();
  if (!ls.ok()) return seen;
  std::vector<Tensor> ref;
  const Status rs = ref::runNode(node, c.inputs(), ref);
  EXPECT_TRUE(rs.ok()) << rs.toString();
  if (!rs.ok()) return seen;
  cuda::CudaKernelProvider provider;
  auto cands = provider.candidates(layer, Precision::kFp16);
  for (auto& t : cands) {
    EXPECT_TRUE(seen.insert(t->id()).second) << "duplicate id " << t->id();
    const Status is = t->initialize(layer);
    EXPECT_TRUE(is.ok()) << t->id() << ": " << is.toString();
    if (!is.ok()) continue;
    std::vector<const Tensor*> in = c.inputs();
    for (size_t i = 0; i < in.size(); ++i) {
      if (!t->consumesInput(i)) continue;
      EXPECT_NE(layer.constantInput(i), nullptr) << t->id() << " consumes activation " << i;
      in[i] = nullptr;
    }
    auto outs = test::runTactic(*t, layer, in);
    EXPECT_TRUE(outs.ok()) << t->id() << ": " << outs.status().toString();
    if (!outs.ok()) continue;
    for (size_t k = 0; k < ref.size() && k < outs->size(); ++k) {
      const Tensor& got = (*outs)[k];
      SCOPED_TRACE(t->id() + " output " + std::to_string(k));
      EXPECT_EQ(got.shape(), ref[k].shape());
      if (got.shape() != ref[k].shape()) continue;
      const DataType st = t->outputFormat(k).dtype;
      if (exact || (st != DataType::kFloat32 && st != DataType::kFloat16)) {
        int64_t bad = 0, firstBad = -1;
        for (int64_t i = 0; i < ref[k].numel(); ++i)
          if (!sameValue(got.getAsDouble(i), ref[k].getAsDouble(i))) {
            if (firstBad < 0) firstBad = i;
            ++bad;
          }
        EXPECT_EQ(bad, 0) << "first mismatch at " << firstBad << ": "
                          << (firstBad >= 0 ? got.getAsDouble(firstBad) : 0.0) << " vs "
                          << (firstBad >= 0 ? ref[k].getAsDouble(firstBad) : 0.0);
      } else {
        EXPECT_LE(test::relL2(got, ref[k]), st == DataType::kFloat16 ? tol16 : tol32);
      }
    }
  }
  return seen;
}

/// The layout part of an id for an output of this rank.
std::string lay(size_t rank) {
  return rank == 4 ? "nchw" : "linear";
}

// ---- LayerNormalization / InstanceNormalization ---------------------------------------------

struct LayerNormCase {
  Shape x;
  int64_t axis;
  Shape scale;  // the normalised dims, or a shape that broadcasts to them
  bool bias;
};

TEST(CudaNormSelect, LayerNormalization) {
  EI_SKIP_WITHOUT_GPU();
  const std::vector<LayerNormCase> cases = {
      {Shape{3, 5, 7}, -1, Shape{7}, true},
      {Shape{3, 5, 7}, 1, Shape{5, 7}, true},
      {Shape{3, 5, 7}, -2, Shape{1, 7}, true},  // broadcast over the middle dim
      {Shape{3, 5, 7}, 0, Shape{3, 5, 7}, false},
      {Shape{2, 3, 4, 5}, 1, Shape{3, 4, 5}, true},
      {Shape{2, 3, 4, 5}, -1, Shape{5}, false},
      {Shape{4, 2000}, -1, Shape{2000}, true},  // long rows: a block each
      {Shape{5, 3, 1111}, 1, Shape{1, 1111}, true},
      {Shape{37, 1}, 1, Shape{1}, true},  // a single element per row
      {Shape{300, 64}, -1, Shape{64}, true},
  };
  uint32_t seed = 100;
  for (const auto& k : cases) {
    for (float eps : {1e-5f, 1e-2f}) {
      LayerCase c("LayerNormalization");
      c.attr("axis", Attribute::Int(k.axis)).attr("epsilon", Attribute::Float(eps));
      c.input(randomHalfExact(k.x, seed++, -4.f, 6.f));
      c.constant(randomHalfExact(k.scale, seed++, 0.5f, 2.f));
      if (k.bias) c.constant(randomHalfExact(k.scale, seed++));
      SCOPED_TRACE(k.x.toString() + " axis " + std::to_string(k.axis));
      EXPECT_EQ(runCase(c, 1e-5, 2e-3), ids("layernorm", kFloat, {lay(k.x.rank())}));
    }
  }
}

TEST(CudaNormSelect, LayerNormalizationDefaultAxisAndFp32Precision) {
  EI_SKIP_WITHOUT_GPU();
  LayerCase c("LayerNormalization");  // axis -1, epsilon 1e-5 by default
  c.input(randomHalfExact(Shape{6, 9, 13}, 7)).constant(randomHalfExact(Shape{13}, 8));
  EXPECT_EQ(runCase(c, 1e-5, 2e-3), ids("layernorm", kFloat, {"linear"}));
  auto fp32 = c.candidates(Precision::kFp32);
  ASSERT_EQ(fp32.size(), 1u);
  EXPECT_EQ(fp32[0]->id(), "cuda.layernorm.fp32.linear");
}

TEST(CudaNormSelect, InstanceNormalization) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 200;
  for (const Shape& s : {Shape{2, 3, 7, 5}, Shape{2, 4, 11}, Shape{1, 3, 40, 50},
                         Shape{2, 2, 3, 4, 5}, Shape{3, 16, 1, 1}, Shape{1, 5, 3000}}) {
    for (float eps : {1e-5f, 0.1f}) {
      LayerCase c("InstanceNormalization");
      c.attr("epsilon", Attribute::Float(eps));
      c.input(randomHalfExact(s, seed++, -2.f, 5.f));
      c.constant(randomHalfExact(Shape{s[1]}, seed++, 0.5f, 2.f));
      c.constant(randomHalfExact(Shape{s[1]}, seed++));
      SCOPED_TRACE(s.toString());
      EXPECT_EQ(runCase(c, 1e-5, 2e-3), ids("instancenorm", kFloat, {lay(s.rank())}));
    }
  }
}

TEST(CudaNormSelect, MeanVarianceNormalization) {
  EI_SKIP_WITHOUT_GPU();
  struct MvnCase {
    Shape x;
    std::vector<int64_t> axes;  // empty: the default (0, 2, 3)
  };
  const std::vector<MvnCase> cases = {
      {Shape{2, 3, 7, 5}, {}},           {Shape{2, 3, 7, 5}, {2, 3}}, {Shape{2, 3, 7, 5}, {1}},
      {Shape{2, 3, 7, 5}, {-1, 0}},      {Shape{4, 6}, {0}},          {Shape{4, 6}, {-1}},
      {Shape{2, 3, 4, 5, 6}, {0, 2, 4}}, {Shape{1, 3, 40, 50}, {}},   {Shape{3, 1000}, {0, 1}},
  };
  uint32_t seed = 900;
  for (const MvnCase& mc : cases) {
    LayerCase c("MeanVarianceNormalization");
    if (!mc.axes.empty()) c.attr("axes", Attribute::Ints(mc.axes));
    c.input(randomHalfExact(mc.x, seed++, -2.f, 5.f));
    SCOPED_TRACE(mc.x.toString());
    EXPECT_EQ(runCase(c, 1e-5, 2e-3), ids("mvn", kFloat, {lay(mc.x.rank())}));
  }
}

TEST(CudaNormSelect, MeanVarianceNormalizationOfNineDims_n) {
  // More dims than the kernel's plan holds (8): the CPU runs it.
  LayerCase c("MeanVarianceNormalization");
  c.input(randomHalfExact(Shape{1, 2, 1, 2, 1, 2, 1, 2, 3}, 1));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

// ---- BatchNormalization (one the graph passes did not fold) ---------------------------------

TEST(CudaNormSelect, BatchNormalization) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 250;
  for (const Shape& s : {Shape{2, 3, 7, 5}, Shape{2, 16, 9, 8}, Shape{3, 5}, Shape{2, 4, 11},
                         Shape{1, 3, 2, 3, 4}}) {
    for (float eps : {1e-5f, 0.1f}) {
      LayerCase c("BatchNormalization");
      c.attr("epsilon", Attribute::Float(eps));
      c.input(randomHalfExact(s, seed++, -2.f, 5.f));
      c.constant(randomHalfExact(Shape{s[1]}, seed++, 0.5f, 2.f));  // scale
      c.constant(randomHalfExact(Shape{s[1]}, seed++));             // B
      c.constant(randomHalfExact(Shape{s[1]}, seed++));             // mean
      c.constant(randomHalfExact(Shape{s[1]}, seed++, 0.1f, 3.f));  // var
      SCOPED_TRACE(s.toString());
      const auto expected = s.rank() == 4 ? ids("batchnorm", kFloat, {"nchw", "nhwc"})
                                          : ids("batchnorm", kFloat, {"linear"});
      EXPECT_EQ(runCase(c, 1e-5, 2e-3), expected);
    }
  }
}

TEST(CudaNormSelect, BatchNormalizationRuntimeStatistics_n) {
  LayerCase c("BatchNormalization");
  c.input(randomHalfExact(Shape{2, 3, 4, 5}, 1));
  c.constant(randomHalfExact(Shape{3}, 2)).constant(randomHalfExact(Shape{3}, 3));
  c.input(randomHalfExact(Shape{3}, 4));  // the mean arrives at run time
  c.constant(randomHalfExact(Shape{3}, 5, 0.1f, 1.f));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaNormSelect, BatchNormalizationTrainingMode_n) {
  LayerCase c("BatchNormalization");
  c.input(randomHalfExact(Shape{2, 3, 4, 5}, 1));
  for (uint32_t k = 0; k < 4; ++k) c.constant(randomHalfExact(Shape{3}, 2 + k, 0.1f, 1.f));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  cuda::CudaKernelProvider provider;
  EXPECT_FALSE(provider.candidates(layer, Precision::kFp16).empty());
  // Shape inference refuses training mode; the provider must not rely on that.
  c.node().attrs.set("training_mode", Attribute::Int(1));
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

// ---- LRN ------------------------------------------------------------------------------------

TEST(CudaNormSelect, Lrn) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 300;
  for (const Shape& s :
       {Shape{2, 7, 5, 3}, Shape{1, 16, 9, 8}, Shape{2, 6, 9}, Shape{1, 5, 2, 3, 2}}) {
    for (int64_t size : {1, 3, 4, 5, 9}) {
      LayerCase c("LRN");
      c.attr("size", Attribute::Int(size))
          .attr("alpha", Attribute::Float(size == 4 ? 0.02f : 1e-4f))
          .attr("beta", Attribute::Float(size == 5 ? 0.5f : 0.75f))
          .attr("bias", Attribute::Float(size == 3 ? 2.f : 1.f));
      c.input(randomHalfExact(s, seed++, -5.f, 5.f));
      SCOPED_TRACE(s.toString() + " size " + std::to_string(size));
      const auto expected =
          s.rank() == 4 ? ids("lrn", kFloat, {"nchw", "nhwc"}) : ids("lrn", kFloat, {"linear"});
      EXPECT_EQ(runCase(c, 1e-5, 2e-3), expected);
    }
  }
}

// ---- ArgMax / ArgMin ------------------------------------------------------------------------

TEST(CudaNormSelect, ArgMaxArgMinEveryAxis) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 400;
  for (const char* op : {"ArgMax", "ArgMin"}) {
    const std::string family = std::string(op) == "ArgMax" ? "argmax" : "argmin";
    for (const Shape& s : {Shape{3, 5, 7}, Shape{2, 3, 4, 5}, Shape{13}}) {
      const int64_t rank = static_cast<int64_t>(s.rank());
      for (int64_t axis = -rank; axis < rank; ++axis)
        for (int64_t keep : {0, 1})
          for (int64_t last : {0, 1})
            for (bool ties : {false, true}) {
              LayerCase c(op);
              c.attr("axis", Attribute::Int(axis))
                  .attr("keepdims", Attribute::Int(keep))
                  .attr("select_last_index", Attribute::Int(last));
              c.input(ties ? smallInts(s, seed++) : randomHalfExact(s, seed++));
              SCOPED_TRACE(std::string(op) + " " + s.toString() + " axis " + std::to_string(axis) +
                           " keepdims " + std::to_string(keep) + " last " + std::to_string(last) +
                           (ties ? " ties" : ""));
              const size_t outRank = keep ? s.rank() : s.rank() - 1;
              EXPECT_EQ(runCase(c, 0, 0), ids(family, kFloat, {lay(outRank)}));
            }
    }
  }
}

TEST(CudaNormSelect, ArgMaxLongRowsTiesAndNaN) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 500;
  for (const char* op : {"ArgMax", "ArgMin"}) {
    for (int64_t last : {0, 1}) {
      // Long rows (a warp each, every lane scanning a strided part), few distinct values.
      LayerCase a(op);
      a.attr("axis", Attribute::Int(-1)).attr("select_last_index", Attribute::Int(last));
      a.input(smallInts(Shape{4, 3001}, seed++, -3, 3));
      runCase(a, 0, 0);
      // NaN: at index 0 it stays the answer; elsewhere it never wins. Rows and columns.
      for (int64_t axis : {0, 1}) {
        Tensor x = smallInts(Shape{6, 40}, seed++, -3, 3);
        float* p = x.data<float>();
        if (axis == 1) {
          p[0 * 40 + 0] = kNaN;                                   // row 0: NaN first
          p[1 * 40 + 7] = kNaN;                                   // row 1: NaN inside
          for (int64_t j = 0; j < 40; ++j) p[2 * 40 + j] = kNaN;  // row 2: all NaN
          p[3 * 40 + 39] = kNaN;
        } else {
          p[0] = kNaN;           // column 0, first element
          p[3 * 40 + 5] = kNaN;  // column 5, inside
          for (int64_t i = 0; i < 6; ++i) p[i * 40 + 9] = kNaN;
        }
        LayerCase c(op);
        c.attr("axis", Attribute::Int(axis)).attr("select_last_index", Attribute::Int(last));
        c.input(x);
        SCOPED_TRACE(std::string(op) + " NaN axis " + std::to_string(axis));
        EXPECT_EQ(runCase(c, 0, 0).size(), 2u);
      }
      // Signed zeros compare equal: ties.
      Tensor z = Tensor::zeros(DataType::kFloat32, Shape{2, 6});
      for (int64_t i = 0; i < 12; ++i) z.data<float>()[i] = i % 2 ? -0.f : 0.f;
      LayerCase c(op);
      c.attr("select_last_index", Attribute::Int(last)).attr("axis", Attribute::Int(1));
      c.input(z);
      runCase(c, 0, 0);
    }
  }
}

// ---- TopK -----------------------------------------------------------------------------------

LayerCase topKCase(const Tensor& x, int64_t k, int64_t axis, int64_t largest, bool kAttr = false,
                   int64_t sorted = 1) {
  LayerCase c("TopK");
  c.node().outputs = {"values", "indices"};
  c.attr("axis", Attribute::Int(axis))
      .attr("largest", Attribute::Int(largest))
      .attr("sorted", Attribute::Int(sorted));
  c.input(x);
  if (kAttr)
    c.attr("k", Attribute::Int(k));
  else
    c.constant(intTensor(DataType::kInt64, {k}));
  return c;
}

TEST(CudaNormSelect, TopKEveryAxis) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 600;
  for (const Shape& s : {Shape{3, 5, 7}, Shape{2, 3, 4, 5}, Shape{17}}) {
    const int64_t rank = static_cast<int64_t>(s.rank());
    for (int64_t axis = -rank; axis < rank; ++axis) {
      const int64_t len = s[static_cast<size_t>(axis < 0 ? axis + rank : axis)];
      for (int64_t k : {int64_t{1}, (len + 1) / 2, len})
        for (int64_t largest : {0, 1})
          for (bool ties : {false, true}) {
            const Tensor x = ties ? smallInts(s, seed++, -1, 1) : randomHalfExact(s, seed++);
            LayerCase c = topKCase(x, k, axis, largest, seed % 3 == 0, seed % 5 == 0 ? 0 : 1);
            SCOPED_TRACE(s.toString() + " axis " + std::to_string(axis) + " k " +
                         std::to_string(k) + " largest " + std::to_string(largest) +
                         (ties ? " ties" : ""));
            EXPECT_EQ(runCase(c, 0, 0, true), ids("topk", kFloat, {lay(s.rank())}));
          }
    }
  }
}

TEST(CudaNormSelect, TopKLongAxesNaNAndZeros) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 700;
  for (int64_t largest : {0, 1}) {
    // Long axes: several sort passes per thread; a non-power-of-two length pads.
    for (const Shape& s : {Shape{2, 5000}, Shape{1, 16384}, Shape{3, 1025}}) {
      LayerCase c = topKCase(smallInts(s, seed++, -50, 50), 100, -1, largest);
      SCOPED_TRACE(s.toString());
      EXPECT_EQ(runCase(c, 0, 0, true).size(), 2u);
    }
    // Strided axis (inner > 1) with many rows.
    LayerCase strided = topKCase(randomHalfExact(Shape{4, 300, 9}, seed++), 17, 1, largest);
    EXPECT_EQ(runCase(strided, 0, 0, true).size(), 2u);
    // NaN orders above every number; signed zeros tie.
    Tensor x = smallInts(Shape{3, 12}, seed++, -2, 2);
    float* p = x.data<float>();
    p[0] = kNaN;
    p[5] = kNaN;
    p[14] = kNaN;
    p[13] = -0.f;
    p[16] = 0.f;
    p[20] = -0.f;
    for (int64_t j = 24; j < 36; ++j) p[j] = j % 3 ? kNaN : -0.f;
    for (int64_t k : {1, 4, 12}) {
      LayerCase c = topKCase(x, k, 1, largest);
      SCOPED_TRACE("NaN k " + std::to_string(k));
      EXPECT_EQ(runCase(c, 0, 0, true).size(), 2u);
    }
  }
}

// ---- CumSum ---------------------------------------------------------------------------------

LayerCase cumSumCase(const Tensor& x, int64_t axis, int64_t exclusive, int64_t reverse,
                     DataType axisType = DataType::kInt64) {
  LayerCase c("CumSum");
  c.attr("exclusive", Attribute::Int(exclusive)).attr("reverse", Attribute::Int(reverse));
  c.input(x);
  Tensor a = Tensor::zeros(axisType, Shape{});
  if (axisType == DataType::kInt64)
    *a.data<int64_t>() = axis;
  else
    *a.data<int32_t>() = static_cast<int32_t>(axis);
  c.constant(a);
  return c;
}

TEST(CudaNormSelect, CumSumFloat) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 800;
  for (const Shape& s : {Shape{3, 5, 7}, Shape{2, 3, 4, 5}, Shape{2, 3001}, Shape{1, 513},
                         Shape{3, 2048}, Shape{19}}) {
    const int64_t rank = static_cast<int64_t>(s.rank());
    for (int64_t axis = -rank; axis < rank; ++axis)
      for (int64_t exclusive : {0, 1})
        for (int64_t reverse : {0, 1}) {
          const DataType axisType = seed % 2 ? DataType::kInt32 : DataType::kInt64;
          LayerCase c = cumSumCase(randomHalfExact(s, seed++), axis, exclusive, reverse, axisType);
          SCOPED_TRACE(s.toString() + " axis " + std::to_string(axis) + " exclusive " +
                       std::to_string(exclusive) + " reverse " + std::to_string(reverse));
          EXPECT_EQ(runCase(c, 1e-5, 2e-3), ids("cumsum", kFloat, {lay(s.rank())}));
        }
  }
}

TEST(CudaNormSelect, CumSumInteger) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 900;
  for (DataType t : {DataType::kInt32, DataType::kInt64}) {
    const std::string type = t == DataType::kInt32 ? "i32" : "i64";
    for (const Shape& s : {Shape{3, 5, 7}, Shape{2, 4097}}) {
      const int64_t rank = static_cast<int64_t>(s.rank());
      for (int64_t axis = -rank; axis < rank; ++axis)
        for (int64_t exclusive : {0, 1})
          for (int64_t reverse : {0, 1}) {
            // Large values: int32 sums wrap around, as in the reference.
            LayerCase c = cumSumCase(test::randomInts(s, t, seed++, -2000000000, 2000000000), axis,
                                     exclusive, reverse);
            SCOPED_TRACE(type + " " + s.toString() + " axis " + std::to_string(axis));
            EXPECT_EQ(runCase(c, 0, 0), ids("cumsum", {type}, {"linear"}));
          }
    }
  }
}

// ---- ScatterElements / ScatterND -------------------------------------------------------------

/// Random indices in [-dim, dim) for the dim each position addresses: dims[k % dims.size()].
Tensor indicesFor(const Shape& s, DataType t, const std::vector<int64_t>& dims, uint32_t seed) {
  std::mt19937 rng(seed);
  Tensor v = Tensor::zeros(t, s);
  for (int64_t i = 0; i < v.numel(); ++i) {
    const int64_t dim = dims[static_cast<size_t>(i) % dims.size()];
    const int64_t k = std::uniform_int_distribution<int64_t>(-dim, dim - 1)(rng);
    if (t == DataType::kInt64)
      v.data<int64_t>()[i] = k;
    else
      v.data<int32_t>()[i] = static_cast<int32_t>(k);
  }
  return v;
}

Tensor dataOf(DataType t, const Shape& s, uint32_t seed) {
  return t == DataType::kFloat32 ? randomHalfExact(s, seed) : test::randomInts(s, t, seed);
}

std::set<std::string> typeIds(const std::string& family, DataType t, size_t rank) {
  return t == DataType::kFloat32
             ? ids(family, kFloat, {lay(rank)})
             : ids(family, {t == DataType::kInt32 ? "i32" : "i64"}, {lay(rank)});
}

TEST(CudaNormSelect, ScatterElements) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 1000;
  struct Case {
    Shape data, idx;
  };
  // Index shapes no larger than the data outside the axis; along it, more updates than the
  // dim (duplicates: the last one wins) or fewer.
  for (const auto& [data, idx] : std::vector<Case>{{Shape{3, 5, 7}, Shape{2, 4, 6}},
                                                   {Shape{3, 5, 7}, Shape{3, 5, 7}},
                                                   {Shape{2, 3, 4, 5}, Shape{2, 2, 4, 3}},
                                                   {Shape{40}, Shape{100}}}) {
    const int64_t rank = static_cast<int64_t>(data.rank());
    for (int64_t axis = -rank; axis < rank; ++axis) {
      Shape is = idx;
      const size_t a = static_cast<size_t>(axis < 0 ? axis + rank : axis);
      is[a] = data[a] * 2 + 1;  // many duplicates
      if (axis == -1) is[a] = 1;
      for (DataType dt : {DataType::kFloat32, DataType::kInt32, DataType::kInt64})
        for (DataType it : {DataType::kInt64, DataType::kInt32})
          for (bool constIdx : {false, true}) {
            LayerCase c(seed % 7 == 0 && rank == 3 ? "Scatter" : "ScatterElements");
            c.attr("axis", Attribute::Int(axis));
            c.input(dataOf(dt, data, seed++));
            Tensor ix = indicesFor(is, it, {data[a]}, seed++);
            if (constIdx)
              c.constant(ix);
            else
              c.input(ix);
            c.input(dataOf(dt, is, seed++));
            SCOPED_TRACE(c.node().opType + " " + data.toString() + " idx " + is.toString() +
                         " axis " + std::to_string(axis) + " " + dataTypeName(dt) + " " +
                         dataTypeName(it) + (constIdx ? " constant" : ""));
            EXPECT_EQ(runCase(c, 0, 0, true), typeIds("scatterelements", dt, data.rank()));
          }
    }
  }
}

TEST(CudaNormSelect, ScatterND) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 1100;
  const Shape data{4, 5, 6};
  // m = 1 (rows), 2 (rows of the last dim), 3 (elements); batched tuples; duplicates.
  for (const Shape& is : {Shape{3, 1}, Shape{9, 1}, Shape{2, 2}, Shape{12, 2}, Shape{4, 3},
                          Shape{50, 3}, Shape{2, 3, 1}, Shape{1, 3}}) {
    const size_t m = static_cast<size_t>(is[is.rank() - 1]);
    std::vector<int64_t> us(is.dims().begin(), is.dims().end() - 1);
    us.insert(us.end(), data.dims().begin() + static_cast<int64_t>(m), data.dims().end());
    const std::vector<int64_t> dims(data.dims().begin(),
                                    data.dims().begin() + static_cast<int64_t>(m));
    for (DataType dt : {DataType::kFloat32, DataType::kInt64})
      for (bool constIdx : {false, true}) {
        LayerCase c("ScatterND");
        c.input(dataOf(dt, data, seed++));
        Tensor ix = indicesFor(is, DataType::kInt64, dims, seed++);
        if (constIdx)
          c.constant(ix);
        else
          c.input(ix);
        c.input(dataOf(dt, Shape(us), seed++));
        SCOPED_TRACE("idx " + is.toString() + " " + dataTypeName(dt) +
                     (constIdx ? " constant" : ""));
        EXPECT_EQ(runCase(c, 0, 0, true), typeIds("scatternd", dt, data.rank()));
      }
  }
  // 4-D data, whole 3-D slices.
  LayerCase c("ScatterND");
  c.input(randomHalfExact(Shape{3, 2, 4, 5}, seed++));
  c.input(indicesFor(Shape{4, 1}, DataType::kInt64, {3}, seed++));
  c.input(randomHalfExact(Shape{4, 2, 4, 5}, seed++));
  EXPECT_EQ(runCase(c, 0, 0, true), ids("scatternd", kFloat, {"nchw"}));
}

// ---- Negative cases: no candidates ---------------------------------------------------------

LayerCase layerNorm(const Shape& x, int64_t axis = -1) {
  LayerCase c("LayerNormalization");
  c.attr("axis", Attribute::Int(axis));
  c.input(randomHalfExact(x, 1));
  const size_t a = static_cast<size_t>(axis < 0 ? axis + static_cast<int64_t>(x.rank()) : axis);
  const Shape norm(
      std::vector<int64_t>(x.dims().begin() + static_cast<int64_t>(a), x.dims().end()));
  c.constant(randomHalfExact(norm, 2)).constant(randomHalfExact(norm, 3));
  return c;
}

TEST(CudaNormSelect, LayerNormOffered_n) {
  // The baseline of the cases below: the same layer without the defect has candidates.
  LayerCase c = layerNorm(Shape{3, 5, 7});
  EXPECT_EQ(c.candidates().size(), 2u);
}

TEST(CudaNormSelect, LayerNormMeanOutput_n) {
  LayerCase c = layerNorm(Shape{3, 5, 7});
  c.node().outputs = {"y", "mean"};
  EXPECT_TRUE(c.candidates().empty());
  c.node().outputs = {"y", "", "inv_std_dev"};
  EXPECT_TRUE(c.candidates().empty());
  c.node().outputs = {"y", "", ""};  // unnamed optional outputs: not requested
  EXPECT_EQ(c.candidates().size(), 2u);
}

TEST(CudaNormSelect, LayerNormRuntimeScale_n) {
  LayerCase c("LayerNormalization");
  c.input(randomHalfExact(Shape{3, 5, 7}, 1)).input(randomHalfExact(Shape{7}, 2));
  EXPECT_TRUE(c.candidates().empty());
  LayerCase b("LayerNormalization");
  b.input(randomHalfExact(Shape{3, 5, 7}, 1))
      .constant(randomHalfExact(Shape{7}, 2))
      .input(randomHalfExact(Shape{7}, 3));
  EXPECT_TRUE(b.candidates().empty());
}

TEST(CudaNormSelect, LayerNormBadAttributes_n) {
  LayerCase c = layerNorm(Shape{3, 5, 7});
  LayerContext layer;
  ASSERT_EQ(c.candidates(Precision::kFp16, &layer).size(), 2u);
  cuda::CudaKernelProvider provider;
  // Shape inference rejects these too; the provider must not rely on that.
  for (const auto& [name, attr] : std::vector<std::pair<std::string, Attribute>>{
           {"stash_type", Attribute::Int(0)},
           {"axis", Attribute::Int(3)},
           {"axis", Attribute::Int(-4)},
           {"epsilon", Attribute::Float(std::numeric_limits<float>::infinity())}}) {
    graph::Node bad = c.node();
    bad.attrs.set(name, attr);
    layer.node = &bad;
    EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty()) << name;
  }
}

TEST(CudaNormSelect, LayerNormDynamicShapeAndIntType_n) {
  LayerCase c = layerNorm(Shape{3, 5, 7});
  LayerContext layer;
  ASSERT_EQ(c.candidates(Precision::kFp16, &layer).size(), 2u);
  cuda::CudaKernelProvider provider;
  LayerContext dyn = layer;
  dyn.inputShapes[0][0] = -1;
  dyn.outputShapes[0][0] = -1;
  EXPECT_TRUE(provider.candidates(dyn, Precision::kFp16).empty());
  LayerContext ints = layer;
  ints.inputTypes[0] = ints.outputTypes[0] = DataType::kInt32;
  EXPECT_TRUE(provider.candidates(ints, Precision::kFp16).empty());
}

TEST(CudaNormSelect, InstanceNormRuntimeScale_n) {
  LayerCase c("InstanceNormalization");
  c.input(randomHalfExact(Shape{2, 3, 4, 5}, 1))
      .input(randomHalfExact(Shape{3}, 2))
      .constant(randomHalfExact(Shape{3}, 3));
  EXPECT_TRUE(c.candidates().empty());
  LayerCase ok("InstanceNormalization");
  ok.input(randomHalfExact(Shape{2, 3, 4, 5}, 1))
      .constant(randomHalfExact(Shape{3}, 2))
      .constant(randomHalfExact(Shape{3}, 3));
  EXPECT_EQ(ok.candidates().size(), 2u);
}

TEST(CudaNormSelect, LrnNoSizeOrNhwcOffRank4_n) {
  LayerCase c("LRN");
  c.attr("size", Attribute::Int(3)).input(randomHalfExact(Shape{2, 6, 9}, 1));
  LayerContext layer;
  auto cands = c.candidates(Precision::kFp16, &layer);
  ASSERT_EQ(cands.size(), 2u);  // rank 3: no NHWC variant
  for (auto& t : cands) {
    EXPECT_EQ(t->id().find("nhwc"), std::string::npos) << t->id();
  }
  graph::Node bad = c.node();
  bad.attrs = graph::Attributes();  // size is required
  layer.node = &bad;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
  bad.attrs.set("size", Attribute::Int(0));
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaNormSelect, ArgMaxIntegerInput_n) {
  LayerCase c("ArgMax");
  c.input(test::randomInts(Shape{3, 5}, DataType::kInt32, 1));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaNormSelect, ArgMaxBadAttributes_n) {
  LayerCase c("ArgMin");
  c.input(randomHalfExact(Shape{3, 5, 7}, 1));
  LayerContext layer;
  ASSERT_EQ(c.candidates(Precision::kFp16, &layer).size(), 2u);
  cuda::CudaKernelProvider provider;
  for (const auto& [name, v] : std::vector<std::pair<std::string, int64_t>>{
           {"keepdims", 2}, {"select_last_index", -1}, {"axis", 3}, {"axis", -4}}) {
    graph::Node bad = c.node();
    bad.attrs.set(name, Attribute::Int(v));
    layer.node = &bad;
    EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty()) << name << " " << v;
  }
}

TEST(CudaNormSelect, ArgMaxDynamicShape_n) {
  LayerCase c("ArgMax");
  c.input(randomHalfExact(Shape{3, 5, 7}, 1));
  LayerContext layer;
  ASSERT_EQ(c.candidates(Precision::kFp16, &layer).size(), 2u);
  layer.inputShapes[0][2] = -1;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaNormSelect, TopKRuntimeK_n) {
  LayerCase c("TopK");
  c.node().outputs = {"values", "indices"};
  c.input(randomHalfExact(Shape{3, 20}, 1)).input(intTensor(DataType::kInt64, {5}));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaNormSelect, TopKTooLongOrEmpty_n) {
  LayerCase longAxis = topKCase(randomHalfExact(Shape{1, 16385}, 1), 10, -1, 1);
  EXPECT_TRUE(longAxis.candidates().empty());
  LayerCase fits = topKCase(randomHalfExact(Shape{1, 16384}, 1), 10, -1, 1);
  EXPECT_EQ(fits.candidates().size(), 2u);
  LayerCase none = topKCase(randomHalfExact(Shape{3, 20}, 1), 0, -1, 1);  // k = 0
  EXPECT_TRUE(none.candidates().empty());
}

TEST(CudaNormSelect, TopKIntegerInputAndBadFlags_n) {
  LayerCase ints = topKCase(test::randomInts(Shape{3, 20}, DataType::kInt64, 1), 4, -1, 1);
  EXPECT_TRUE(ints.candidates().empty());
  LayerCase c = topKCase(randomHalfExact(Shape{3, 20}, 1), 4, -1, 1);
  LayerContext layer;
  ASSERT_EQ(c.candidates(Precision::kFp16, &layer).size(), 2u);
  cuda::CudaKernelProvider provider;
  for (const char* name : {"largest", "sorted"}) {
    graph::Node bad = c.node();
    bad.attrs.set(name, Attribute::Int(2));
    layer.node = &bad;
    EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty()) << name;
  }
  graph::Node noValues = c.node();
  noValues.outputs[0].clear();  // values unused: not supported
  layer.node = &noValues;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaNormSelect, CumSumRuntimeAxis_n) {
  LayerCase c("CumSum");
  c.input(randomHalfExact(Shape{3, 5}, 1)).input(intTensor(DataType::kInt64, {1}));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaNormSelect, CumSumBadFlagsAndTypes_n) {
  LayerCase c = cumSumCase(randomHalfExact(Shape{3, 5}, 1), 1, 0, 0);
  LayerContext layer;
  ASSERT_EQ(c.candidates(Precision::kFp16, &layer).size(), 2u);
  cuda::CudaKernelProvider provider;
  for (const char* name : {"exclusive", "reverse"}) {
    graph::Node bad = c.node();
    bad.attrs.set(name, Attribute::Int(3));
    layer.node = &bad;
    EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty()) << name;
  }
  layer.node = &c.node();
  LayerContext u8 = layer;
  u8.inputTypes[0] = u8.outputTypes[0] = DataType::kUInt8;
  EXPECT_TRUE(provider.candidates(u8, Precision::kFp16).empty());
  // An integer CumSum gets its own type only, at any precision.
  LayerCase i64 = cumSumCase(test::randomInts(Shape{3, 5}, DataType::kInt64, 1), 0, 0, 0);
  auto cands = i64.candidates(Precision::kFp16);
  ASSERT_EQ(cands.size(), 1u);
  EXPECT_EQ(cands[0]->id(), "cuda.cumsum.i64.linear");
}

LayerCase scatterElements(const std::string& reduction = "") {
  LayerCase c("ScatterElements");
  if (!reduction.empty()) c.attr("reduction", Attribute::String(reduction));
  c.attr("axis", Attribute::Int(1));
  c.input(randomHalfExact(Shape{3, 5}, 1));
  c.input(indicesFor(Shape{3, 2}, DataType::kInt64, {5}, 2));
  c.input(randomHalfExact(Shape{3, 2}, 3));
  return c;
}

TEST(CudaNormSelect, ScatterReductions_n) {
  EXPECT_EQ(scatterElements().candidates().size(), 2u);
  EXPECT_EQ(scatterElements("none").candidates().size(), 2u);
  for (const char* r : {"add", "mul", "max", "min"}) {
    EXPECT_TRUE(scatterElements(r).candidates().empty()) << r;
  }
  LayerCase nd("ScatterND");
  nd.attr("reduction", Attribute::String("add"));
  nd.input(randomHalfExact(Shape{4, 5}, 1))
      .input(indicesFor(Shape{2, 1}, DataType::kInt64, {4}, 2))
      .input(randomHalfExact(Shape{2, 5}, 3));
  EXPECT_TRUE(nd.candidates().empty());
}

TEST(CudaNormSelect, ScatterDynamicShapeAndByteData_n) {
  LayerCase c = scatterElements();
  LayerContext layer;
  ASSERT_EQ(c.candidates(Precision::kFp16, &layer).size(), 2u);
  cuda::CudaKernelProvider provider;
  LayerContext dyn = layer;
  dyn.inputShapes[1][0] = -1;
  dyn.inputShapes[2][0] = -1;
  EXPECT_TRUE(provider.candidates(dyn, Precision::kFp16).empty());
  LayerContext bytes = layer;
  bytes.inputTypes[0] = bytes.inputTypes[2] = bytes.outputTypes[0] = DataType::kUInt8;
  EXPECT_TRUE(provider.candidates(bytes, Precision::kFp16).empty());
  // The workspace holds one int32 per output element.
  auto cands = c.candidates();
  ASSERT_FALSE(cands.empty());
  EXPECT_EQ(cands[0]->workspaceBytes(), 15 * sizeof(int32_t));
}

TEST(CudaNormSelect, EnqueueBeforeInitialize_n) {
  std::vector<LayerCase> cases;
  cases.push_back(layerNorm(Shape{3, 5, 7}));
  cases.push_back(topKCase(randomHalfExact(Shape{3, 20}, 1), 4, -1, 1));
  cases.push_back(cumSumCase(randomHalfExact(Shape{3, 5}, 1), 1, 0, 0));
  cases.push_back(scatterElements());
  for (auto& c : cases) {
    auto cands = c.candidates();
    ASSERT_FALSE(cands.empty());
    builder::LaunchArgs args;
    EXPECT_FALSE(cands[0]->enqueue(args).ok()) << cands[0]->id();
  }
}

}  // namespace
}  // namespace edgeinfer

#else  // !EDGEINFER_HAVE_CUDA

TEST(CudaNormSelect, BuiltWithoutCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif  // EDGEINFER_HAVE_CUDA
