// CPU reference kernels and shape inference for the data-movement ops (Reshape, Transpose,
// Concat, Split, Slice, Gather, Pad, ...): hand-computed cases, random odd shapes against
// brute-force index formulas, and negative cases (suffix _n) that must fail cleanly.
#include <gtest/gtest.h>

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

/// A float tensor holding 0, 1, 2, ... so each element names its own flat index.
Tensor iota(Shape s) {
  std::vector<float> v(static_cast<size_t>(s.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  return f32(s, v);
}

void setInts(graph::Node& n, const char* name, std::vector<int64_t> v) {
  n.attrs.set(name, graph::Attribute::Ints(std::move(v)));
}
void setInt(graph::Node& n, const char* name, int64_t v) {
  n.attrs.set(name, graph::Attribute::Int(v));
}

// ---- Identity, Dropout, Reshape, Flatten
// ---------------------------------------------------------

TEST(RefTensor, IdentityAndDropout) {
  Tensor x = randomF32(Shape{3, 5}, 1, -5.f, 5.f);
  EXPECT_EQ(vals(run1(makeNode("Identity", 1), {&x})), vals(x));
  auto out = runAll(makeNode("Dropout", 1, 2), {&x});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(vals(out[0]), vals(x));
  EXPECT_EQ(out[1].dtype(), DataType::kBool);
  EXPECT_EQ(vals(out[1]), V(15, 1.0));
}

TEST(RefTensor, ReshapeZeroMinusOneAllowZero) {
  Tensor x = iota({2, 3, 4});
  Tensor s = i64({3}, {0, -1, 2});
  Tensor y = run1(makeNode("Reshape", 2), {&x, &s});
  EXPECT_EQ(y.shape(), (Shape{2, 6, 2}));
  EXPECT_EQ(vals(y), vals(x));
  Tensor empty = Tensor::zeros(DataType::kFloat32, Shape{0, 4});
  Tensor s2 = i64({2}, {4, 0});
  auto az = makeNode("Reshape", 2);
  setInt(az, "allowzero", 1);
  EXPECT_EQ(run1(az, {&empty, &s2}).shape(), (Shape{4, 0}));
  Tensor s3 = i64({1}, {-1});
  EXPECT_EQ(run1(makeNode("Reshape", 2), {&x, &s3}).shape(), (Shape{24}));
}

TEST(RefTensor, ReshapeShapeInferenceWithoutValue) {
  auto n = makeNode("Reshape", 2);
  graph::InferContext ctx(n, {iv(DataType::kFloat32, {-1, 4}), iv(DataType::kInt64, {3})});
  ASSERT_TRUE(graph::inferNode(ctx).ok());
  EXPECT_TRUE(ctx.outputs[0].shapeKnown);
  EXPECT_EQ(ctx.outputs[0].shape, (Shape{-1, -1, -1}));
  // With the value but an unknown batch: the -1 stays unknown, the 0 copies.
  Tensor s = i64({3}, {0, -1, 2});
  graph::InferContext ctx2(n, {iv(DataType::kFloat32, {-1, 4}), iv(DataType::kInt64, {3})});
  ctx2.inputs[1].value = &s;
  ASSERT_TRUE(graph::inferNode(ctx2).ok());
  EXPECT_EQ(ctx2.outputs[0].shape, (Shape{-1, -1, 2}));
}

TEST(RefTensor, Flatten) {
  Tensor x = iota({2, 3, 4, 5});
  auto n = makeNode("Flatten", 1);
  EXPECT_EQ(run1(n, {&x}).shape(), (Shape{2, 60}));
  setInt(n, "axis", -2);
  EXPECT_EQ(run1(n, {&x}).shape(), (Shape{6, 20}));
  setInt(n, "axis", 0);
  EXPECT_EQ(run1(n, {&x}).shape(), (Shape{1, 120}));
  setInt(n, "axis", 4);
  EXPECT_EQ(run1(n, {&x}).shape(), (Shape{120, 1}));
}

// ---- Transpose, Concat, Split
// --------------------------------------------------------------------

TEST(RefTensor, TransposeRandomAgainstBruteForce) {
  Tensor x = randomF32(Shape{3, 5, 7, 2}, 3, -5.f, 5.f);
  auto n = makeNode("Transpose", 1);
  setInts(n, "perm", {2, 0, 3, 1});
  Tensor y = run1(n, {&x});
  ASSERT_EQ(y.shape(), (Shape{7, 3, 2, 5}));
  const V xv = vals(x), yv = vals(y);
  for (int a = 0; a < 3; ++a)
    for (int b = 0; b < 5; ++b)
      for (int c = 0; c < 7; ++c)
        for (int d = 0; d < 2; ++d)
          ASSERT_EQ(yv[size_t(((c * 3 + a) * 2 + d) * 5 + b)],
                    xv[size_t(((a * 5 + b) * 7 + c) * 2 + d)]);
  Tensor m = iota({2, 3});
  Tensor t = run1(makeNode("Transpose", 1), {&m});  // default: reversed
  EXPECT_EQ(t.shape(), (Shape{3, 2}));
  EXPECT_EQ(vals(t), (V{0, 3, 1, 4, 2, 5}));
}

TEST(RefTensor, ConcatAndSplit) {
  Tensor a = iota({2, 2});
  Tensor b = f32({2, 1}, {10, 11});
  auto c = makeNode("Concat", 2);
  setInt(c, "axis", -1);
  Tensor y = run1(c, {&a, &b});
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(y), (V{0, 1, 10, 2, 3, 11}));
  auto s = makeNode("Split", 1, 2);
  setInt(s, "axis", 1);
  setInts(s, "split", {2, 1});
  auto parts = runAll(s, {&y});
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(vals(parts[0]), vals(a));
  EXPECT_EQ(vals(parts[1]), vals(b));
  Tensor z = iota({6});
  auto eq = makeNode("Split", 1, 3);
  auto thirds = runAll(eq, {&z});
  ASSERT_EQ(thirds.size(), 3u);
  EXPECT_EQ(vals(thirds[2]), (V{4, 5}));
  Tensor i = i64({1, 2}, {7, 8});
  auto c0 = makeNode("Concat", 3);
  setInt(c0, "axis", 0);
  EXPECT_EQ(vals(run1(c0, {&i, &i, &i})), (V{7, 8, 7, 8, 7, 8}));
}

// ---- Slice
// ----------------------------------------------------------------------------------------

TEST(RefTensor, SliceStepsAndClamping) {
  Tensor x = iota({4, 10});
  Tensor starts = i64({2}, {1, 9});
  Tensor ends = i64({2}, {1000, -1000});
  Tensor axes = i64({2}, {0, 1});
  Tensor steps = i64({2}, {2, -3});
  Tensor y = run1(makeNode("Slice", 5), {&x, &starts, &ends, &axes, &steps});
  ASSERT_EQ(y.shape(), (Shape{2, 4}));
  EXPECT_EQ(vals(y), (V{19, 16, 13, 10, 39, 36, 33, 30}));
  // Only ends on axis 1, default axes/steps, negative start.
  Tensor s2 = i64({2}, {0, -3});
  Tensor e2 = i64({2}, {2, 10});
  Tensor y2 = run1(makeNode("Slice", 3), {&x, &s2, &e2});
  EXPECT_EQ(y2.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(y2), (V{7, 8, 9, 17, 18, 19}));
  // Negative axis; empty result.
  Tensor s3 = i64({1}, {5});
  Tensor e3 = i64({1}, {2});
  Tensor a3 = i32({1}, {-1});
  EXPECT_EQ(run1(makeNode("Slice", 4), {&x, &s3, &e3, &a3}).shape(), (Shape{4, 0}));
  // Reverse the whole axis with INT64 sentinels.
  Tensor s4 = i64({1}, {-1});
  Tensor e4 = i64({1}, {INT64_MIN});
  Tensor a4 = i64({1}, {0});
  Tensor st4 = i64({1}, {-1});
  Tensor v = iota({4});
  EXPECT_EQ(vals(run1(makeNode("Slice", 5), {&v, &s4, &e4, &a4, &st4})), (V{3, 2, 1, 0}));
}

TEST(RefTensor, SliceRandomAgainstBruteForce) {
  std::mt19937 rng(123);
  Tensor x = randomF32(Shape{7, 9}, 4, -5.f, 5.f);
  const V xv = vals(x);
  for (int trial = 0; trial < 40; ++trial) {
    std::uniform_int_distribution<int64_t> pos(-12, 12), stp(-3, 3);
    int64_t st = 0;
    while (st == 0) st = stp(rng);
    const int64_t b = pos(rng), e = pos(rng);
    Tensor starts = i64({1}, {b}), ends = i64({1}, {e}), axes = i64({1}, {1}),
           steps = i64({1}, {st});
    Tensor y = run1(makeNode("Slice", 5), {&x, &starts, &ends, &axes, &steps});
    // Brute force: walk per ONNX clamping rules.
    const int64_t dim = 9;
    int64_t s = b < 0 ? b + dim : b, en = e < 0 ? e + dim : e;
    std::vector<int64_t> cols;
    if (st > 0) {
      s = std::clamp<int64_t>(s, 0, dim);
      en = std::clamp<int64_t>(en, 0, dim);
      for (int64_t c = s; c < en; c += st) cols.push_back(c);
    } else {
      s = std::clamp<int64_t>(s, 0, dim - 1);
      en = std::clamp<int64_t>(en, -1, dim - 1);
      for (int64_t c = s; c > en; c += st) cols.push_back(c);
    }
    ASSERT_EQ(y.shape(), (Shape{7, int64_t(cols.size())})) << b << " " << e << " " << st;
    V want;
    for (int r = 0; r < 7; ++r)
      for (int64_t c : cols) want.push_back(xv[size_t(r * 9 + c)]);
    ASSERT_EQ(vals(y), want);
  }
}

// ---- Squeeze, Unsqueeze, Gather
// ------------------------------------------------------------------

TEST(RefTensor, SqueezeUnsqueeze) {
  Tensor x = iota({1, 3, 1, 2});
  EXPECT_EQ(run1(makeNode("Squeeze", 1), {&x}).shape(), (Shape{3, 2}));
  auto sq = makeNode("Squeeze", 1);
  setInts(sq, "axes", {-2});
  EXPECT_EQ(run1(sq, {&x}).shape(), (Shape{1, 3, 2}));
  auto un = makeNode("Unsqueeze", 1);
  setInts(un, "axes", {0, -1, 3});
  Tensor y = run1(un, {&x});
  EXPECT_EQ(y.shape(), (Shape{1, 1, 3, 1, 1, 2, 1}));
  EXPECT_EQ(vals(y), vals(x));
}

TEST(RefTensor, GatherAxesAndNegativeIndices) {
  Tensor x = iota({3, 4});
  Tensor idx = i64({2, 2}, {0, -1, 2, 1});
  Tensor y = run1(makeNode("Gather", 2), {&x, &idx});
  EXPECT_EQ(y.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(vals(y), (V{0, 1, 2, 3, 8, 9, 10, 11, 8, 9, 10, 11, 4, 5, 6, 7}));
  auto g1 = makeNode("Gather", 2);
  setInt(g1, "axis", 1);
  Tensor i1 = i32({}, {-2});
  Tensor y1 = run1(g1, {&x, &i1});
  EXPECT_EQ(y1.shape(), (Shape{3}));
  EXPECT_EQ(vals(y1), (V{2, 6, 10}));
}

TEST(RefTensor, GatherElements) {
  Tensor x = iota({3, 3});
  Tensor idx = i64({2, 3}, {1, 2, 0, 2, 0, -1});
  Tensor y = run1(makeNode("GatherElements", 2), {&x, &idx});
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(y), (V{3, 7, 2, 6, 1, 8}));
  auto n1 = makeNode("GatherElements", 2);
  setInt(n1, "axis", 1);
  Tensor i1 = i64({3, 1}, {2, 0, 1});
  EXPECT_EQ(vals(run1(n1, {&x, &i1})), (V{2, 3, 7}));
}

// ---- Shape, Size, ConstantOfShape, Expand, Tile
// ----------------------------------------------------

TEST(RefTensor, ShapeAndSize) {
  Tensor x = iota({2, 3, 4});
  Tensor s = run1(makeNode("Shape", 1), {&x});
  EXPECT_EQ(s.dtype(), DataType::kInt64);
  EXPECT_EQ(vals(s), (V{2, 3, 4}));
  auto n = makeNode("Shape", 1);
  setInt(n, "start", -2);
  EXPECT_EQ(vals(run1(n, {&x})), (V{3, 4}));
  setInt(n, "end", -5);
  EXPECT_EQ(run1(n, {&x}).numel(), 0);
  Tensor sz = run1(makeNode("Size", 1), {&x});
  EXPECT_EQ(sz.shape().rank(), 0u);
  EXPECT_EQ(vals(sz), (V{24}));
  // Shape inference with an unknown rank still knows the output is 1-D.
  const graph::Node shapeNode = makeNode("Shape", 1);  // InferContext keeps a reference
  graph::InferContext ctx(shapeNode, {ivUnknown(DataType::kFloat32)});
  ASSERT_TRUE(graph::inferNode(ctx).ok());
  EXPECT_EQ(ctx.outputs[0].shape, (Shape{-1}));
}

TEST(RefTensor, ConstantOfShapeExpandTile) {
  Tensor shp = i64({2}, {2, 3});
  Tensor z = run1(makeNode("ConstantOfShape", 1), {&shp});
  EXPECT_EQ(z.dtype(), DataType::kFloat32);
  EXPECT_EQ(vals(z), V(6, 0.0));
  auto c = makeNode("ConstantOfShape", 1);
  c.attrs.set("value", graph::Attribute::TensorValue(i32({1}, {7})));
  Tensor sev = run1(c, {&shp});
  EXPECT_EQ(sev.dtype(), DataType::kInt32);
  EXPECT_EQ(vals(sev), V(6, 7.0));

  Tensor x = f32({3, 1}, {1, 2, 3});
  Tensor es = i64({3}, {2, 1, 4});
  Tensor e = run1(makeNode("Expand", 2), {&x, &es});
  ASSERT_EQ(e.shape(), (Shape{2, 3, 4}));
  for (int i = 0; i < 24; ++i) EXPECT_EQ(vals(e)[size_t(i)], 1 + (i / 4) % 3);

  Tensor t = f32({2, 2}, {1, 2, 3, 4});
  Tensor reps = i64({2}, {2, 3});
  Tensor tt = run1(makeNode("Tile", 2), {&t, &reps});
  ASSERT_EQ(tt.shape(), (Shape{4, 6}));
  const V tv = vals(tt);
  for (int r = 0; r < 4; ++r)
    for (int col = 0; col < 6; ++col) EXPECT_EQ(tv[size_t(r * 6 + col)], 1 + (r % 2) * 2 + col % 2);
}

// ---- Pad
// -------------------------------------------------------------------------------------------

TEST(RefTensor, PadModes) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor pads = i64({4}, {0, 2, 1, 1});  // begin (0, 2), end (1, 1)
  Tensor cv = f32({}, {9});
  Tensor y = run1(makeNode("Pad", 3), {&x, &pads, &cv});
  ASSERT_EQ(y.shape(), (Shape{3, 6}));
  EXPECT_EQ(vals(y), (V{9, 9, 1, 2, 3, 9, 9, 9, 4, 5, 6, 9, 9, 9, 9, 9, 9, 9}));
  auto refl = makeNode("Pad", 2);
  refl.attrs.set("mode", graph::Attribute::String("reflect"));
  EXPECT_EQ(vals(run1(refl, {&x, &pads})),
            (V{3, 2, 1, 2, 3, 2, 6, 5, 4, 5, 6, 5, 3, 2, 1, 2, 3, 2}));
  auto edge = makeNode("Pad", 2);
  edge.attrs.set("mode", graph::Attribute::String("edge"));
  EXPECT_EQ(vals(run1(edge, {&x, &pads})),
            (V{1, 1, 1, 2, 3, 3, 4, 4, 4, 5, 6, 6, 4, 4, 4, 5, 6, 6}));
  Tensor crop = i64({4}, {0, -1, 0, 1});  // negative pads crop
  EXPECT_EQ(vals(run1(makeNode("Pad", 2), {&x, &crop})), (V{2, 3, 0, 5, 6, 0}));
}

// ---- Range, OneHot, CumSum
// ---------------------------------------------------------------------------

TEST(RefTensor, Range) {
  Tensor s = i32({}, {10}), l = i32({}, {4}), d = i32({}, {-3});
  Tensor y = run1(makeNode("Range", 3), {&s, &l, &d});
  EXPECT_EQ(y.dtype(), DataType::kInt32);
  EXPECT_EQ(vals(y), (V{10, 7}));
  Tensor fs = f32({}, {0.5f}), fl = f32({}, {2.f}), fd = f32({}, {0.5f});
  EXPECT_EQ(vals(run1(makeNode("Range", 3), {&fs, &fl, &fd})), (V{0.5, 1.0, 1.5}));
  Tensor e = i64({}, {5}), el = i64({}, {5}), ed = i64({}, {1});
  EXPECT_EQ(run1(makeNode("Range", 3), {&e, &el, &ed}).numel(), 0);
}

TEST(RefTensor, OneHot) {
  Tensor idx = i64({3}, {0, -1, 5});
  Tensor depth = i64({}, {3});
  Tensor values = f32({2}, {0.f, 2.f});
  Tensor y = run1(makeNode("OneHot", 3), {&idx, &depth, &values});
  ASSERT_EQ(y.shape(), (Shape{3, 3}));
  EXPECT_EQ(vals(y), (V{2, 0, 0, 0, 0, 2, 0, 0, 0}));
  auto a0 = makeNode("OneHot", 3);
  setInt(a0, "axis", 0);
  Tensor y0 = run1(a0, {&idx, &depth, &values});
  EXPECT_EQ(vals(y0), (V{2, 0, 0, 0, 0, 0, 0, 2, 0}));
}

TEST(RefTensor, CumSumModes) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor ax = i32({}, {1});
  auto n = makeNode("CumSum", 2);
  EXPECT_EQ(vals(run1(n, {&x, &ax})), (V{1, 3, 6, 4, 9, 15}));
  setInt(n, "exclusive", 1);
  EXPECT_EQ(vals(run1(n, {&x, &ax})), (V{0, 1, 3, 0, 4, 9}));
  setInt(n, "reverse", 1);
  EXPECT_EQ(vals(run1(n, {&x, &ax})), (V{5, 3, 0, 11, 6, 0}));
  auto r = makeNode("CumSum", 2);
  setInt(r, "reverse", 1);
  Tensor a0 = i64({}, {-2});
  Tensor xi = i64({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_EQ(vals(run1(r, {&xi, &a0})), (V{5, 7, 9, 4, 5, 6}));
}

TEST(RefTensor, ShapeInferenceUnknownRankPropagates) {
  for (const char* op : {"Transpose", "Squeeze", "Flatten", "Identity"}) {
    SCOPED_TRACE(op);
    const graph::Node node = makeNode(op, 1);
    graph::InferContext ctx(node, {ivUnknown(DataType::kFloat32)});
    ASSERT_TRUE(graph::inferNode(ctx).ok());
    EXPECT_EQ(ctx.outputs[0].dtype, DataType::kFloat32);
  }
  auto sl = makeNode("Slice", 4);
  Tensor axes = i64({1}, {1});
  graph::InferContext ctx(sl, {iv(DataType::kFloat32, {-1, 8, 3}), iv(DataType::kInt64, {1}),
                               iv(DataType::kInt64, {1}), iv(DataType::kInt64, {1})});
  ctx.inputs[3].value = &axes;
  ASSERT_TRUE(graph::inferNode(ctx).ok());
  EXPECT_EQ(ctx.outputs[0].shape, (Shape{-1, -1, 3}));
}

// ---- Negative cases
// ----------------------------------------------------------------------------------

TEST(RefTensor, ReshapeCountMismatch_n) {
  Tensor x = iota({2, 3});
  Tensor s = i64({2}, {4, 2});
  Status st = runStatus(makeNode("Reshape", 2), {&x, &s});
  EXPECT_EQ(st.code(), ErrorCode::kInvalidModel);
  EXPECT_NE(st.message().find("reshape"), std::string::npos) << st.toString();
}

TEST(RefTensor, ReshapeTwoMinusOnes_n) {
  Tensor x = iota({2, 3});
  Tensor s = i64({2}, {-1, -1});
  EXPECT_EQ(runStatus(makeNode("Reshape", 2), {&x, &s}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, ReshapeNotDivisible_n) {
  Tensor x = iota({2, 3});
  Tensor s = i64({2}, {4, -1});
  EXPECT_EQ(runStatus(makeNode("Reshape", 2), {&x, &s}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, ReshapeAllowZeroWithMinusOne_n) {
  Tensor x = iota({2, 3});
  Tensor s = i64({2}, {0, -1});
  auto n = makeNode("Reshape", 2);
  setInt(n, "allowzero", 1);
  EXPECT_EQ(runStatus(n, {&x, &s}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, ReshapeShapeNotInt64_n) {
  Tensor x = iota({2, 3});
  Tensor s = i32({1}, {6});
  EXPECT_EQ(runStatus(makeNode("Reshape", 2), {&x, &s}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, ReshapeMissingInput_n) {
  Tensor x = iota({2, 3});
  EXPECT_EQ(runStatus(makeNode("Reshape", 1), {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, FlattenAxisOutOfRange_n) {
  Tensor x = iota({2, 3});
  auto n = makeNode("Flatten", 1);
  setInt(n, "axis", 3);
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, TransposeNotAPermutation_n) {
  Tensor x = iota({2, 3, 4});
  auto n = makeNode("Transpose", 1);
  setInts(n, "perm", {0, 2, 2});
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, TransposePermWrongLength_n) {
  Tensor x = iota({2, 3, 4});
  auto n = makeNode("Transpose", 1);
  setInts(n, "perm", {1, 0});
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, ConcatMismatchedDims_n) {
  Tensor a = iota({2, 3}), b = iota({3, 3});
  auto n = makeNode("Concat", 2);
  setInt(n, "axis", 1);
  EXPECT_EQ(runStatus(n, {&a, &b}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, ConcatMissingAxis_n) {
  Tensor a = iota({2, 3});
  EXPECT_EQ(runStatus(makeNode("Concat", 2), {&a, &a}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, ConcatAxisOutOfRange_n) {
  Tensor a = iota({2, 3});
  auto n = makeNode("Concat", 2);
  setInt(n, "axis", 2);
  EXPECT_EQ(runStatus(n, {&a, &a}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, SplitNotDivisible_n) {
  Tensor x = iota({7});
  EXPECT_EQ(runStatus(makeNode("Split", 1, 2), {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, SplitSizesDoNotSum_n) {
  Tensor x = iota({7});
  auto n = makeNode("Split", 1, 2);
  setInts(n, "split", {3, 3});
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, SplitCountMismatch_n) {
  Tensor x = iota({6});
  auto n = makeNode("Split", 1, 2);
  setInts(n, "split", {2, 2, 2});
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, SliceZeroStep_n) {
  Tensor x = iota({5});
  Tensor s = i64({1}, {0}), e = i64({1}, {5}), a = i64({1}, {0}), st = i64({1}, {0});
  EXPECT_EQ(runStatus(makeNode("Slice", 5), {&x, &s, &e, &a, &st}).code(),
            ErrorCode::kInvalidModel);
}

TEST(RefTensor, SliceRepeatedAxis_n) {
  Tensor x = iota({5, 5});
  Tensor s = i64({2}, {0, 0}), e = i64({2}, {2, 2}), a = i64({2}, {1, -1});
  EXPECT_EQ(runStatus(makeNode("Slice", 4), {&x, &s, &e, &a}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, SliceAxisOutOfRange_n) {
  Tensor x = iota({5});
  Tensor s = i64({1}, {0}), e = i64({1}, {2}), a = i64({1}, {1});
  EXPECT_EQ(runStatus(makeNode("Slice", 4), {&x, &s, &e, &a}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, SliceLengthMismatch_n) {
  Tensor x = iota({5, 5});
  Tensor s = i64({2}, {0, 0}), e = i64({1}, {2});
  EXPECT_EQ(runStatus(makeNode("Slice", 3), {&x, &s, &e}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, SqueezeNonUnitAxis_n) {
  Tensor x = iota({1, 3});
  auto n = makeNode("Squeeze", 1);
  setInts(n, "axes", {1});
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, SqueezeAxisOutOfRange_n) {
  Tensor x = iota({1, 3});
  auto n = makeNode("Squeeze", 1);
  setInts(n, "axes", {2});
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, UnsqueezeDuplicateAxes_n) {
  Tensor x = iota({3});
  auto n = makeNode("Unsqueeze", 1);
  setInts(n, "axes", {0, -3});  // -3 is axis 0 of the rank-3 output
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, UnsqueezeMissingAxes_n) {
  Tensor x = iota({3});
  EXPECT_EQ(runStatus(makeNode("Unsqueeze", 1), {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, GatherIndexOutOfRange_n) {
  Tensor x = iota({3, 4});
  Tensor idx = i64({2}, {0, 3});
  Status s = runStatus(makeNode("Gather", 2), {&x, &idx});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("out of range"), std::string::npos) << s.toString();
  Tensor neg = i32({1}, {-4});
  EXPECT_FALSE(runStatus(makeNode("Gather", 2), {&x, &neg}).ok());
}

TEST(RefTensor, GatherAxisOutOfRange_n) {
  Tensor x = iota({3, 4});
  Tensor idx = i64({1}, {0});
  auto n = makeNode("Gather", 2);
  setInt(n, "axis", 2);
  EXPECT_EQ(runStatus(n, {&x, &idx}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, GatherFloatIndices_n) {
  Tensor x = iota({3, 4});
  Tensor idx = f32({1}, {0.f});
  EXPECT_EQ(runStatus(makeNode("Gather", 2), {&x, &idx}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, GatherElementsIndexOutOfRange_n) {
  Tensor x = iota({3, 3});
  Tensor idx = i64({1, 3}, {0, 3, 1});
  EXPECT_FALSE(runStatus(makeNode("GatherElements", 2), {&x, &idx}).ok());
}

TEST(RefTensor, GatherElementsRankMismatch_n) {
  Tensor x = iota({3, 3});
  Tensor idx = i64({3}, {0, 1, 2});
  EXPECT_EQ(runStatus(makeNode("GatherElements", 2), {&x, &idx}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, TileRepeatsWrongLength_n) {
  Tensor x = iota({2, 2});
  Tensor r = i64({1}, {2});
  EXPECT_EQ(runStatus(makeNode("Tile", 2), {&x, &r}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, TileNegativeRepeats_n) {
  Tensor x = iota({2, 2});
  Tensor r = i64({2}, {2, -1});
  EXPECT_EQ(runStatus(makeNode("Tile", 2), {&x, &r}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, PadWrongLength_n) {
  Tensor x = iota({2, 2});
  Tensor p = i64({2}, {1, 1});
  EXPECT_EQ(runStatus(makeNode("Pad", 2), {&x, &p}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, PadBadMode_n) {
  Tensor x = iota({2, 2});
  Tensor p = i64({4}, {1, 1, 1, 1});
  auto n = makeNode("Pad", 2);
  n.attrs.set("mode", graph::Attribute::String("wrap"));
  EXPECT_EQ(runStatus(n, {&x, &p}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, PadCropsBelowZero_n) {
  Tensor x = iota({2, 2});
  Tensor p = i64({4}, {-2, 0, -1, 0});
  EXPECT_EQ(runStatus(makeNode("Pad", 2), {&x, &p}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, ExpandBadBroadcast_n) {
  Tensor x = iota({3});
  Tensor s = i64({2}, {2, 4});
  EXPECT_EQ(runStatus(makeNode("Expand", 2), {&x, &s}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, RangeZeroDelta_n) {
  Tensor s = i64({}, {0}), l = i64({}, {5}), d = i64({}, {0});
  EXPECT_EQ(runStatus(makeNode("Range", 3), {&s, &l, &d}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, RangeHuge_n) {
  Tensor s = i64({}, {0}), l = i64({}, {INT64_MAX}), d = i64({}, {1});
  EXPECT_EQ(runStatus(makeNode("Range", 3), {&s, &l, &d}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, ConstantOfShapeNegativeDim_n) {
  Tensor s = i64({2}, {2, -3});
  EXPECT_EQ(runStatus(makeNode("ConstantOfShape", 1), {&s}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, ConstantOfShapeHuge_n) {
  Tensor s = i64({3}, {1 << 20, 1 << 20, 1 << 20});
  EXPECT_EQ(runStatus(makeNode("ConstantOfShape", 1), {&s}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, OneHotBadValues_n) {
  Tensor idx = i64({2}, {0, 1});
  Tensor depth = i64({}, {3});
  Tensor values = f32({3}, {0, 1, 2});
  EXPECT_EQ(runStatus(makeNode("OneHot", 3), {&idx, &depth, &values}).code(),
            ErrorCode::kInvalidModel);
}

TEST(RefTensor, OneHotZeroDepth_n) {
  Tensor idx = i64({2}, {0, 1});
  Tensor depth = i64({}, {0});
  Tensor values = f32({2}, {0, 1});
  EXPECT_EQ(runStatus(makeNode("OneHot", 3), {&idx, &depth, &values}).code(),
            ErrorCode::kInvalidModel);
}

TEST(RefTensor, CumSumAxisOutOfRange_n) {
  Tensor x = iota({2, 3});
  Tensor ax = i64({}, {2});
  EXPECT_EQ(runStatus(makeNode("CumSum", 2), {&x, &ax}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTensor, DropoutTrainingMode_n) {
  Tensor x = iota({2});
  Tensor ratio = f32({}, {0.5f});
  Tensor train = make<uint8_t>(DataType::kBool, Shape{}, {1});
  EXPECT_EQ(runStatus(makeNode("Dropout", 3), {&x, &ratio, &train}).code(),
            ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace edgeinfer
