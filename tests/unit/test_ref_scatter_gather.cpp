// CPU reference kernels and shape inference for ScatterND, ScatterElements / Scatter and
// GatherND: the ONNX examples, random inputs against brute-force loops (fixed seeds) and
// negative cases (suffix _n).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "graph/op_schema.h"
#include "kernels/ref/ref_kernels.h"
#include "ref_test_util.h"

namespace edgeinfer {
namespace {

using namespace test;

std::vector<float> seq(int64_t n, float start = 0.f) {
  std::vector<float> v(static_cast<size_t>(n));
  for (size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<float>(i);
  return v;
}

// ---- ScatterND -----------------------------------------------------------------------------

TEST(RefScatterND, OnnxExample) {
  graph::Node n = makeNode("ScatterND", 3);
  Tensor data = f32({8}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor idx = i64({4, 1}, {4, 3, 1, 7});
  Tensor upd = f32({4}, {9, 10, 11, 12});
  EXPECT_EQ(vals(run1(n, {&data, &idx, &upd})), V({1, 11, 3, 10, 9, 6, 7, 12}));
}

TEST(RefScatterND, SliceUpdatesWithAddAndMulReductions) {
  Tensor data = f32({2, 2, 2}, seq(8, 1));
  Tensor idx = i64({2, 1}, {1, 1});  // the same slice twice
  Tensor upd = f32({2, 2, 2}, {1, 1, 1, 1, 2, 2, 2, 2});
  graph::Node add = makeNode("ScatterND", 3);
  add.attrs.set("reduction", graph::Attribute::String("add"));
  EXPECT_EQ(vals(run1(add, {&data, &idx, &upd})), V({1, 2, 3, 4, 8, 9, 10, 11}));
  graph::Node mul = makeNode("ScatterND", 3);
  mul.attrs.set("reduction", graph::Attribute::String("mul"));
  EXPECT_EQ(vals(run1(mul, {&data, &idx, &upd})), V({1, 2, 3, 4, 10, 12, 14, 16}));
  Tensor neg = i64({1, 2}, {-1, 0});  // negative indices count from the end
  Tensor upd2 = f32({1, 2}, {-5, -6});
  graph::Node none = makeNode("ScatterND", 3);
  EXPECT_EQ(vals(run1(none, {&data, &neg, &upd2})), V({1, 2, 3, 4, -5, -6, 7, 8}));
}

TEST(RefScatterND, RandomAgainstBruteForce) {
  std::mt19937 rng(3);
  const Shape ds({5, 4, 3});
  for (int64_t m = 1; m <= 3; ++m) {
    const int64_t count = 6;
    std::vector<int64_t> iv;
    for (int64_t i = 0; i < count; ++i)
      for (int64_t j = 0; j < m; ++j)
        iv.push_back(static_cast<int64_t>(rng() % ds[static_cast<size_t>(j)]));
    const int64_t slice = ds.span(static_cast<size_t>(m), 3);
    std::vector<int64_t> us = {count};
    for (size_t d = static_cast<size_t>(m); d < 3; ++d) us.push_back(ds[d]);
    Tensor data = randomF32(ds, 100 + static_cast<uint32_t>(m));
    Tensor upd = randomF32(Shape(us), 200 + static_cast<uint32_t>(m));
    Tensor idx = i64({count, m}, iv);
    graph::Node n = makeNode("ScatterND", 3);
    n.attrs.set("reduction", graph::Attribute::String("add"));
    Tensor y = run1(n, {&data, &idx, &upd});
    std::vector<double> want = vals(data);
    const std::vector<int64_t> st = contiguousStrides(ds);
    for (int64_t i = 0; i < count; ++i) {
      int64_t off = 0;
      for (int64_t j = 0; j < m; ++j)
        off += iv[static_cast<size_t>(i * m + j)] * st[static_cast<size_t>(j)];
      for (int64_t e = 0; e < slice; ++e)
        want[static_cast<size_t>(off + e)] =
            static_cast<float>(static_cast<float>(want[static_cast<size_t>(off + e)]) +
                               static_cast<float>(upd.getAsDouble(i * slice + e)));
    }
    EXPECT_EQ(vals(y), want) << "m = " << m;
  }
}

TEST(RefScatterND, IndexOutOfRange_n) {
  graph::Node n = makeNode("ScatterND", 3);
  Tensor data = f32({4}, {1, 2, 3, 4});
  Tensor idx = i64({1, 1}, {4});
  Tensor upd = f32({1}, {9});
  EXPECT_FALSE(runStatus(n, {&data, &idx, &upd}).ok());
}

TEST(RefScatterND, UpdatesShapeMismatch_n) {
  graph::Node n = makeNode("ScatterND", 3);
  Tensor data = f32({2, 2}, {1, 2, 3, 4});
  Tensor idx = i64({1, 1}, {0});
  Tensor upd = f32({1, 3}, {9, 9, 9});
  EXPECT_EQ(runStatus(n, {&data, &idx, &upd}).code(), ErrorCode::kInvalidModel);
}

TEST(RefScatterND, IndicesTooDeep_n) {
  graph::Node n = makeNode("ScatterND", 3);
  Tensor data = f32({2}, {1, 2});
  Tensor idx = i64({1, 2}, {0, 0});
  Tensor upd = f32({1}, {9});
  EXPECT_EQ(runStatus(n, {&data, &idx, &upd}).code(), ErrorCode::kInvalidModel);
}

TEST(RefScatterND, Int32Indices_n) {
  graph::Node n = makeNode("ScatterND", 3);
  Tensor data = f32({2}, {1, 2});
  Tensor idx = i32({1, 1}, {0});
  Tensor upd = f32({1}, {9});
  EXPECT_EQ(runStatus(n, {&data, &idx, &upd}).code(), ErrorCode::kInvalidModel);
}

TEST(RefScatterND, UnknownReduction_n) {
  graph::Node n = makeNode("ScatterND", 3);
  n.attrs.set("reduction", graph::Attribute::String("sub"));
  Tensor data = f32({2}, {1, 2});
  Tensor idx = i64({1, 1}, {0});
  Tensor upd = f32({1}, {9});
  EXPECT_EQ(runStatus(n, {&data, &idx, &upd}).code(), ErrorCode::kInvalidModel);
}

// ---- ScatterElements / Scatter -------------------------------------------------------------

TEST(RefScatterElements, OnnxExamples) {
  graph::Node n = makeNode("ScatterElements", 3);
  n.attrs.set("axis", graph::Attribute::Int(1));
  Tensor data = f32({1, 5}, {1, 2, 3, 4, 5});
  Tensor idx = i64({1, 2}, {1, 3});
  Tensor upd = f32({1, 2}, {1.1f, 2.1f});
  EXPECT_EQ(vals(run1(n, {&data, &idx, &upd})),
            V({1, static_cast<double>(1.1f), 3, static_cast<double>(2.1f), 5}));
  Tensor neg = i64({1, 2}, {1, -3});
  EXPECT_EQ(vals(run1(n, {&data, &neg, &upd})),
            V({1, static_cast<double>(1.1f), static_cast<double>(2.1f), 4, 5}));
  graph::Node add = makeNode("ScatterElements", 3);
  add.attrs.set("axis", graph::Attribute::Int(1));
  add.attrs.set("reduction", graph::Attribute::String("add"));
  Tensor dup = i64({1, 2}, {1, 1});
  EXPECT_EQ(vals(run1(add, {&data, &dup, &upd})),
            V({1, static_cast<double>(2.f + 1.1f + 2.1f), 3, 4, 5}));
  graph::Node old = makeNode("Scatter", 3);  // opset 9/10 name, axis 0
  Tensor d2 = f32({3, 3}, std::vector<float>(9, 0.f));
  Tensor i2 = i64({2, 3}, {1, 0, 2, 0, 2, 1});
  Tensor u2 = f32({2, 3}, {1.0f, 1.1f, 1.2f, 2.0f, 2.1f, 2.2f});
  EXPECT_EQ(vals(run1(old, {&d2, &i2, &u2})), V({2.0, 1.1f, 0, 1.0, 0, 2.2f, 0, 2.1f, 1.2f}));
}

TEST(RefScatterElements, RandomAgainstBruteForce) {
  std::mt19937 rng(5);
  const Shape ds({4, 5, 3});
  for (int64_t axis = 0; axis < 3; ++axis) {
    for (const char* red : {"none", "mul", "max"}) {
      Shape is({3, 4, 2});
      std::vector<int64_t> iv(static_cast<size_t>(is.numel()));
      std::vector<bool> used(static_cast<size_t>(ds.numel()), false);
      const std::vector<int64_t> dst = contiguousStrides(ds);
      Tensor data = randomF32(ds, 300 + static_cast<uint32_t>(axis));
      Tensor upd = randomF32(is, 400 + static_cast<uint32_t>(axis));
      std::vector<double> want = vals(data);
      for (int64_t i = 0; i < is.numel(); ++i) {
        const int64_t c0 = i / 8, c1 = (i / 2) % 4, c2 = i % 2;
        const int64_t k = static_cast<int64_t>(rng() % ds[static_cast<size_t>(axis)]);
        iv[static_cast<size_t>(i)] = (rng() % 2) ? k - ds[static_cast<size_t>(axis)] : k;
        int64_t c[3] = {c0, c1, c2};
        c[axis] = k;
        const size_t off = static_cast<size_t>(c[0] * dst[0] + c[1] * dst[1] + c[2] * dst[2]);
        const float u = static_cast<float>(upd.getAsDouble(i)), w = static_cast<float>(want[off]);
        const std::string r = red;
        want[off] = r == "none" ? u : r == "mul" ? w * u : std::max(w, u);
      }
      Tensor idx = i64(is, iv);
      graph::Node n = makeNode("ScatterElements", 3);
      n.attrs.set("axis", graph::Attribute::Int(axis));
      n.attrs.set("reduction", graph::Attribute::String(red));
      EXPECT_EQ(vals(run1(n, {&data, &idx, &upd})), want) << "axis " << axis << " " << red;
    }
  }
}

TEST(RefScatterElements, RankMismatch_n) {
  graph::Node n = makeNode("ScatterElements", 3);
  Tensor data = f32({2, 2}, {1, 2, 3, 4});
  Tensor idx = i64({2}, {0, 1});
  Tensor upd = f32({2}, {9, 9});
  EXPECT_EQ(runStatus(n, {&data, &idx, &upd}).code(), ErrorCode::kInvalidModel);
}

TEST(RefScatterElements, UpdatesShapeDiffersFromIndices_n) {
  graph::Node n = makeNode("ScatterElements", 3);
  Tensor data = f32({2, 2}, {1, 2, 3, 4});
  Tensor idx = i64({1, 2}, {0, 1});
  Tensor upd = f32({2, 1}, {9, 9});
  EXPECT_EQ(runStatus(n, {&data, &idx, &upd}).code(), ErrorCode::kInvalidModel);
}

TEST(RefScatterElements, IndexOutOfRange_n) {
  graph::Node n = makeNode("ScatterElements", 3);
  Tensor data = f32({3}, {1, 2, 3});
  Tensor idx = i64({1}, {-4});
  Tensor upd = f32({1}, {9});
  EXPECT_FALSE(runStatus(n, {&data, &idx, &upd}).ok());
}

TEST(RefScatterElements, BoolWithAddReduction_n) {
  graph::Node n = makeNode("ScatterElements", 3);
  n.attrs.set("reduction", graph::Attribute::String("add"));
  Tensor data = make<uint8_t>(DataType::kBool, {2}, {0, 1});
  Tensor idx = i64({1}, {0});
  Tensor upd = make<uint8_t>(DataType::kBool, {1}, {1});
  EXPECT_EQ(runStatus(n, {&data, &idx, &upd}).code(), ErrorCode::kInvalidModel);
}

TEST(RefScatterElements, UpdatesTypeDiffers_n) {
  graph::Node n = makeNode("ScatterElements", 3);
  Tensor data = f32({2}, {1, 2});
  Tensor idx = i64({1}, {0});
  Tensor upd = i32({1}, {1});
  EXPECT_EQ(runStatus(n, {&data, &idx, &upd}).code(), ErrorCode::kInvalidModel);
}

TEST(RefScatterElements, AxisOutOfRange_n) {
  graph::Node n = makeNode("ScatterElements", 3);
  n.attrs.set("axis", graph::Attribute::Int(1));
  Tensor data = f32({2}, {1, 2});
  Tensor idx = i64({1}, {0});
  Tensor upd = f32({1}, {1});
  EXPECT_EQ(runStatus(n, {&data, &idx, &upd}).code(), ErrorCode::kInvalidModel);
}

// ---- GatherND ------------------------------------------------------------------------------

TEST(RefGatherND, OnnxExamples) {
  graph::Node n = makeNode("GatherND", 2);
  Tensor d = i32({2, 2}, {0, 1, 2, 3});
  Tensor idx = i64({2, 2}, {0, 0, 1, 1});
  EXPECT_EQ(vals(run1(n, {&d, &idx})), V({0, 3}));
  Tensor idx2 = i64({2, 1}, {1, 0});
  Tensor y2 = run1(n, {&d, &idx2});
  EXPECT_EQ(y2.shape(), Shape({2, 2}));
  EXPECT_EQ(vals(y2), V({2, 3, 0, 1}));
  Tensor d3 = f32({2, 2, 2}, seq(8));
  Tensor idx3 = i64({2, 1, 2}, {0, 1, 1, 0});
  Tensor y3 = run1(n, {&d3, &idx3});
  EXPECT_EQ(y3.shape(), Shape({2, 1, 2}));
  EXPECT_EQ(vals(y3), V({2, 3, 4, 5}));
  graph::Node b = makeNode("GatherND", 2);
  b.attrs.set("batch_dims", graph::Attribute::Int(1));
  Tensor idx4 = i64({2, 1}, {1, 0});
  Tensor y4 = run1(b, {&d3, &idx4});
  EXPECT_EQ(y4.shape(), Shape({2, 2}));
  EXPECT_EQ(vals(y4), V({2, 3, 4, 5}));
}

TEST(RefGatherND, RandomAgainstBruteForce) {
  std::mt19937 rng(9);
  const Shape ds({3, 4, 5, 2});
  const std::vector<int64_t> st = contiguousStrides(ds);
  for (int64_t b = 0; b <= 2; ++b) {
    for (int64_t m = 1; m <= 4 - b; ++m) {
      // indices shape: ds[:b] + [3] + [m]
      std::vector<int64_t> is(ds.dims().begin(), ds.dims().begin() + b);
      is.push_back(3);
      is.push_back(m);
      const Shape ishape(is);
      const int64_t batches = ds.span(0, static_cast<size_t>(b));
      std::vector<int64_t> iv;
      for (int64_t t = 0; t < batches * 3; ++t)
        for (int64_t j = 0; j < m; ++j) {
          const int64_t dim = ds[static_cast<size_t>(b + j)];
          const int64_t k = static_cast<int64_t>(rng() % dim);
          iv.push_back(rng() % 2 ? k - dim : k);
        }
      Tensor data = randomF32(ds, 500 + static_cast<uint32_t>(b * 10 + m));
      Tensor idx = i64(ishape, iv);
      graph::Node n = makeNode("GatherND", 2);
      n.attrs.set("batch_dims", graph::Attribute::Int(b));
      Tensor y = run1(n, {&data, &idx});
      const int64_t slice = ds.span(static_cast<size_t>(b + m), 4);
      ASSERT_EQ(y.numel(), batches * 3 * slice);
      std::vector<double> want;
      for (int64_t t = 0; t < batches * 3; ++t) {
        const int64_t bi = t / 3;
        int64_t off = 0, rem = bi;  // batch coordinates
        for (int64_t d = b; d-- > 0;) {
          off += (rem % ds[static_cast<size_t>(d)]) * st[static_cast<size_t>(d)];
          rem /= ds[static_cast<size_t>(d)];
        }
        for (int64_t j = 0; j < m; ++j) {
          int64_t k = iv[static_cast<size_t>(t * m + j)];
          if (k < 0) k += ds[static_cast<size_t>(b + j)];
          off += k * st[static_cast<size_t>(b + j)];
        }
        for (int64_t e = 0; e < slice; ++e) want.push_back(data.getAsDouble(off + e));
      }
      EXPECT_EQ(vals(y), want) << "b " << b << " m " << m;
    }
  }
}

TEST(RefGatherND, BatchDimsTooLarge_n) {
  graph::Node n = makeNode("GatherND", 2);
  n.attrs.set("batch_dims", graph::Attribute::Int(2));
  Tensor d = f32({2, 2}, {0, 1, 2, 3});
  Tensor idx = i64({2, 1}, {0, 1});
  EXPECT_EQ(runStatus(n, {&d, &idx}).code(), ErrorCode::kInvalidModel);
}

TEST(RefGatherND, IndexTupleTooLong_n) {
  graph::Node n = makeNode("GatherND", 2);
  Tensor d = f32({2, 2}, {0, 1, 2, 3});
  Tensor idx = i64({1, 3}, {0, 0, 0});
  EXPECT_EQ(runStatus(n, {&d, &idx}).code(), ErrorCode::kInvalidModel);
}

TEST(RefGatherND, IndexOutOfRange_n) {
  graph::Node n = makeNode("GatherND", 2);
  Tensor d = f32({2, 2}, {0, 1, 2, 3});
  Tensor idx = i64({1, 2}, {0, 2});
  EXPECT_FALSE(runStatus(n, {&d, &idx}).ok());
}

TEST(RefGatherND, BatchDimsDiffer_n) {
  graph::Node n = makeNode("GatherND", 2);
  n.attrs.set("batch_dims", graph::Attribute::Int(1));
  Tensor d = f32({2, 2}, {0, 1, 2, 3});
  Tensor idx = i64({3, 1}, {0, 1, 0});
  EXPECT_EQ(runStatus(n, {&d, &idx}).code(), ErrorCode::kInvalidModel);
}

TEST(RefGatherND, NegativeBatchDims_n) {
  graph::Node n = makeNode("GatherND", 2);
  n.attrs.set("batch_dims", graph::Attribute::Int(-1));
  Tensor d = f32({2, 2}, {0, 1, 2, 3});
  Tensor idx = i64({1, 1}, {0});
  EXPECT_EQ(runStatus(n, {&d, &idx}).code(), ErrorCode::kInvalidModel);
}

}  // namespace
}  // namespace edgeinfer
