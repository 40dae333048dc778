// CPU reference kernels and shape inference for the reductions, ArgMax/ArgMin and
// QuantizeLinear/DequantizeLinear: hand-computed cases, random odd shapes against
// brute-force loops, and negative cases (suffix _n).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "graph/op_schema.h"
#include "kernels/ref/ref_kernels.h"
#include "ref_test_util.h"

namespace edgeinfer {
namespace {

using namespace test;

void expectNear(const V& got, const V& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << "at " << i;
}

graph::Node reduceNode(const std::string& op, std::vector<int64_t> axes, int64_t keepdims = 1) {
  auto n = makeNode(op, 1);
  if (!axes.empty()) n.attrs.set("axes", graph::Attribute::Ints(std::move(axes)));
  n.attrs.set("keepdims", graph::Attribute::Int(keepdims));
  return n;
}

// ---- Reductions ---------------------------------------------------------------------------------

TEST(RefReduce, AllReductionsRandomAgainstBruteForce) {
  // Reduce axes {0, 2} of a [3, 5, 7] tensor; positive inputs so the logs are defined.
  const Tensor x = randomF32(Shape{3, 5, 7}, 17, 0.1f, 2.f);
  const V xv = vals(x);
  using Fn = std::function<double(const V&)>;
  const std::vector<std::pair<std::string, Fn>> ops = {
      {"ReduceSum",
       [](const V& v) {
         double s = 0;
         for (double e : v) s += e;
         return s;
       }},
      {"ReduceMean",
       [](const V& v) {
         double s = 0;
         for (double e : v) s += e;
         return s / double(v.size());
       }},
      {"ReduceMax", [](const V& v) { return *std::max_element(v.begin(), v.end()); }},
      {"ReduceMin", [](const V& v) { return *std::min_element(v.begin(), v.end()); }},
      {"ReduceProd",
       [](const V& v) {
         double s = 1;
         for (double e : v) s *= e;
         return s;
       }},
      {"ReduceL1",
       [](const V& v) {
         double s = 0;
         for (double e : v) s += std::fabs(e);
         return s;
       }},
      {"ReduceL2",
       [](const V& v) {
         double s = 0;
         for (double e : v) s += e * e;
         return std::sqrt(s);
       }},
      {"ReduceLogSum",
       [](const V& v) {
         double s = 0;
         for (double e : v) s += e;
         return std::log(s);
       }},
      {"ReduceLogSumExp",
       [](const V& v) {
         double s = 0;
         for (double e : v) s += std::exp(e);
         return std::log(s);
       }},
      {"ReduceSumSquare",
       [](const V& v) {
         double s = 0;
         for (double e : v) s += e * e;
         return s;
       }},
  };
  for (const auto& [op, fn] : ops) {
    SCOPED_TRACE(op);
    for (int64_t keep : {0, 1}) {
      Tensor y = run1(reduceNode(op, {0, -1}, keep), {&x});
      EXPECT_EQ(y.shape(), keep ? (Shape{1, 5, 1}) : (Shape{5}));
      V want;
      for (int j = 0; j < 5; ++j) {
        V group;
        for (int i = 0; i < 3; ++i)
          for (int k = 0; k < 7; ++k) group.push_back(xv[size_t((i * 5 + j) * 7 + k)]);
        want.push_back(fn(group));
      }
      expectNear(vals(y), want, 1e-5);
    }
  }
}

TEST(RefReduce, EmptyAxesReduceAllOrNoop) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor all = run1(reduceNode("ReduceSum", {}), {&x});
  EXPECT_EQ(all.shape(), (Shape{1, 1}));
  EXPECT_EQ(vals(all), (V{21}));
  EXPECT_EQ(run1(reduceNode("ReduceSum", {}, 0), {&x}).shape(), (Shape{}));
  auto noop = reduceNode("ReduceSum", {});
  noop.attrs.set("noop_with_empty_axes", graph::Attribute::Int(1));
  Tensor same = run1(noop, {&x});
  EXPECT_EQ(same.shape(), (Shape{2, 3}));
  EXPECT_EQ(vals(same), vals(x));
}

TEST(RefReduce, IntegerReductions) {
  Tensor x = i32({2, 3}, {1, -2, 3, 4, 5, -7});
  EXPECT_EQ(vals(run1(reduceNode("ReduceSum", {1}, 0), {&x})), (V{2, 2}));
  EXPECT_EQ(vals(run1(reduceNode("ReduceMean", {1}, 0), {&x})), (V{0, 0}));  // truncates
  EXPECT_EQ(vals(run1(reduceNode("ReduceMax", {0}, 0), {&x})), (V{4, 5, 3}));
  EXPECT_EQ(vals(run1(reduceNode("ReduceMin", {0}, 0), {&x})), (V{1, -2, -7}));
  EXPECT_EQ(vals(run1(reduceNode("ReduceProd", {1}, 0), {&x})), (V{-6, -140}));
  EXPECT_EQ(vals(run1(reduceNode("ReduceL1", {1}, 0), {&x})), (V{6, 16}));
  EXPECT_EQ(run1(reduceNode("ReduceSum", {1}, 0), {&x}).dtype(), DataType::kInt32);
}

TEST(RefReduce, LogSumExpIsStable) {
  Tensor x = f32({2}, {1000.f, 1000.f});
  expectNear(vals(run1(reduceNode("ReduceLogSumExp", {0}), {&x})), {1000 + std::log(2.0)}, 1e-6);
}

TEST(RefReduce, ArgMaxArgMin) {
  Tensor x = f32({2, 4}, {1, 5, 5, 0, 7, 2, 7, -1});
  auto am = makeNode("ArgMax", 1);
  am.attrs.set("axis", graph::Attribute::Int(1));
  Tensor y = run1(am, {&x});
  EXPECT_EQ(y.dtype(), DataType::kInt64);
  EXPECT_EQ(y.shape(), (Shape{2, 1}));
  EXPECT_EQ(vals(y), (V{1, 0}));
  am.attrs.set("select_last_index", graph::Attribute::Int(1));
  am.attrs.set("keepdims", graph::Attribute::Int(0));
  Tensor last = run1(am, {&x});
  EXPECT_EQ(last.shape(), (Shape{2}));
  EXPECT_EQ(vals(last), (V{2, 2}));
  auto mn = makeNode("ArgMin", 1);
  EXPECT_EQ(vals(run1(mn, {&x})), (V{0, 1, 0, 1}));
  mn.attrs.set("axis", graph::Attribute::Int(-1));
  EXPECT_EQ(vals(run1(mn, {&x})), (V{3, 3}));
}

TEST(RefReduce, ArgMaxRandomAgainstBruteForce) {
  const Tensor x = randomF32(Shape{5, 11, 3}, 99);
  const V xv = vals(x);
  auto n = makeNode("ArgMax", 1);
  n.attrs.set("axis", graph::Attribute::Int(1));
  n.attrs.set("keepdims", graph::Attribute::Int(0));
  Tensor y = run1(n, {&x});
  ASSERT_EQ(y.shape(), (Shape{5, 3}));
  for (int i = 0; i < 5; ++i)
    for (int k = 0; k < 3; ++k) {
      int best = 0;
      for (int j = 1; j < 11; ++j)
        if (xv[size_t((i * 11 + j) * 3 + k)] > xv[size_t((i * 11 + best) * 3 + k)]) best = j;
      EXPECT_EQ(vals(y)[size_t(i * 3 + k)], best);
    }
}

TEST(RefReduce, ShapeInferenceUnknownDims) {
  auto n = reduceNode("ReduceMean", {1}, 0);
  graph::InferContext ctx(n,
                          {graph::InferValue{DataType::kFloat32, Shape{-1, 4, 5}, true, nullptr}});
  ASSERT_TRUE(graph::inferNode(ctx).ok());
  EXPECT_EQ(ctx.outputs[0].shape, (Shape{-1, 5}));
  graph::InferContext unk(n, {graph::InferValue{DataType::kFloat32, Shape{}, false, nullptr}});
  ASSERT_TRUE(graph::inferNode(unk).ok());
  EXPECT_FALSE(unk.outputs[0].shapeKnown);
}

// ---- Quantization -------------------------------------------------------------------------------

TEST(RefQuant, QuantizePerTensorRoundsHalfToEvenAndSaturates) {
  Tensor x = f32({8}, {0.f, 1.f, 3.f, 5.f, -1.f, 1000.f, -1000.f, 2.9f});
  Tensor scale = f32({}, {2.f});
  Tensor zp = u8({}, {128});
  Tensor y = run1(makeNode("QuantizeLinear", 3), {&x, &scale, &zp});
  EXPECT_EQ(y.dtype(), DataType::kUInt8);
  // 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> -0; saturate at 255 / 0
  EXPECT_EQ(vals(y), (V{128, 128, 130, 130, 128, 255, 0, 129}));
  Tensor zs = s8({}, {-1});
  Tensor ys = run1(makeNode("QuantizeLinear", 3), {&x, &scale, &zs});
  EXPECT_EQ(ys.dtype(), DataType::kInt8);
  EXPECT_EQ(vals(ys), (V{-1, -1, 1, 1, -1, 127, -128, 0}));
  Tensor noZp = run1(makeNode("QuantizeLinear", 2), {&x, &scale});
  EXPECT_EQ(noZp.dtype(), DataType::kUInt8);
  EXPECT_EQ(vals(noZp), (V{0, 0, 2, 2, 0, 255, 0, 1}));
}

TEST(RefQuant, PerAxisRoundTrip) {
  const Tensor x = randomF32(Shape{2, 3, 5}, 5, -1.f, 1.f);
  Tensor scale = f32({3}, {0.01f, 0.02f, 0.005f});
  Tensor zp = s8({3}, {0, 10, -20});
  auto q = makeNode("QuantizeLinear", 3);
  q.attrs.set("axis", graph::Attribute::Int(1));
  Tensor y = run1(q, {&x, &scale, &zp});
  const V xv = vals(x), yv = vals(y);
  const double sc[] = {0.01, 0.02, 0.005};
  const int zz[] = {0, 10, -20};
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = (i / 5) % 3;
    double want = std::nearbyint(double(float(xv[i]) / float(sc[c]))) + zz[c];
    want = std::min(127.0, std::max(-128.0, want));
    EXPECT_EQ(yv[i], want) << i;
  }
  auto dq = makeNode("DequantizeLinear", 3);
  dq.attrs.set("axis", graph::Attribute::Int(-2));
  Tensor back = run1(dq, {&y, &scale, &zp});
  EXPECT_EQ(back.dtype(), DataType::kFloat32);
  const V bv = vals(back);
  for (size_t i = 0; i < xv.size(); ++i) {
    const size_t c = (i / 5) % 3;
    EXPECT_NEAR(bv[i], (yv[i] - zz[c]) * float(sc[c]), 1e-6);
    if (yv[i] > -128 && yv[i] < 127) {
      EXPECT_NEAR(bv[i], xv[i], sc[c] / 2 + 1e-6);
    }
  }
}

TEST(RefQuant, DequantizeInt32AndDefaults) {
  Tensor x = i32({3}, {-1000, 0, 7});
  Tensor scale = f32({}, {0.5f});
  EXPECT_EQ(vals(run1(makeNode("DequantizeLinear", 2), {&x, &scale})), (V{-500, 0, 3.5}));
  Tensor xu = u8({2}, {0, 255});
  Tensor zu = u8({}, {128});
  EXPECT_EQ(vals(run1(makeNode("DequantizeLinear", 3), {&xu, &scale, &zu})), (V{-64, 63.5}));
}

TEST(RefQuant, DynamicQuantizeLinearOnnxExamples) {
  // ONNX's own examples (onnx/backend/test/case/node/dynamicquantizelinear.py).
  struct Case {
    std::vector<float> x;
    float scale;
    int zp;
    V y;
  };
  const std::vector<Case> cases = {
      {{0, 2, -3, -2.5f, 1.34f, 0.5f}, 0.0196078438f, 153, {153, 255, 0, 26, 221, 179}},
      {{-1.0f, -2.1f, -1.3f, -2.5f, -3.34f, -4.0f}, 0.0156862754f, 255, {191, 121, 172, 96, 42, 0}},
      {{1, 2.1f, 1.3f, 2.5f, 3.34f, 4.0f}, 0.0156862754f, 0, {64, 134, 83, 159, 213, 255}},
  };
  for (const Case& c : cases) {
    Tensor x = f32({static_cast<int64_t>(c.x.size())}, c.x);
    const auto out = runAll(makeNode("DynamicQuantizeLinear", 1, 3), {&x});
    ASSERT_EQ(out.size(), 3u);
    EXPECT_EQ(out[0].dtype(), DataType::kUInt8);
    EXPECT_EQ(out[0].shape(), x.shape());
    EXPECT_EQ(vals(out[0]), c.y);
    EXPECT_EQ(out[1].dtype(), DataType::kFloat32);
    EXPECT_EQ(out[1].shape(), Shape{});
    EXPECT_FLOAT_EQ(*out[1].data<float>(), c.scale);
    EXPECT_EQ(out[2].dtype(), DataType::kUInt8);
    EXPECT_EQ(*out[2].data<uint8_t>(), c.zp);
  }
}

TEST(RefQuant, DynamicQuantizeLinearOfZerosAndNaN) {
  // All zeros: no range, so scale 0, zero point 0 and y 0 (ONNX's formula divides 0 by 0).
  Tensor zeros = f32({2, 3}, {0, 0, 0, 0, 0, 0});
  auto out = runAll(makeNode("DynamicQuantizeLinear", 1, 3), {&zeros});
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(vals(out[0]), (V{0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(*out[1].data<float>(), 0.f);
  EXPECT_EQ(*out[2].data<uint8_t>(), 0);
  // A NaN is left out of the range and quantizes to the zero point.
  Tensor withNaN = f32({4}, {-1.f, NAN, 1.f, 0.5f});
  out = runAll(makeNode("DynamicQuantizeLinear", 1, 3), {&withNaN});
  ASSERT_EQ(out.size(), 3u);
  const float scale = 2.f / 255.f;
  EXPECT_FLOAT_EQ(*out[1].data<float>(), scale);
  EXPECT_EQ(*out[2].data<uint8_t>(), 127);  // 1 / scale is 127.49999 in float32
  EXPECT_EQ(vals(out[0]), (V{0, 127, 254, 191}));
}

// ---- Negative cases ---------------------------------------------------------------------------

TEST(RefQuant, DynamicQuantizeLinearOfAnIntegerInput_n) {
  graph::InferValue x;
  x.dtype = DataType::kInt32;
  x.shapeKnown = true;
  x.shape = Shape{3};
  auto r = inferBuild(makeNode("DynamicQuantizeLinear", 1, 3), {x});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidModel);
  EXPECT_NE(r.status().message().find("must be float32"), std::string::npos);
}

TEST(RefQuant, DynamicQuantizeLinearOfFloat16_n) {
  graph::InferValue x;
  x.dtype = DataType::kFloat16;
  x.shapeKnown = true;
  x.shape = Shape{3};
  auto r = inferBuild(makeNode("DynamicQuantizeLinear", 1, 3), {x});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), ErrorCode::kInvalidModel);
}

TEST(RefReduce, AxisOutOfRange_n) {
  Tensor x = randomF32(Shape{2, 3}, 1);
  EXPECT_EQ(runStatus(reduceNode("ReduceSum", {2}), {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefReduce, DuplicateAxes_n) {
  Tensor x = randomF32(Shape{2, 3}, 1);
  EXPECT_EQ(runStatus(reduceNode("ReduceMax", {1, -1}), {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefReduce, BoolInput_n) {
  Tensor x = make<uint8_t>(DataType::kBool, Shape{2}, {0, 1});
  EXPECT_EQ(runStatus(reduceNode("ReduceSum", {0}), {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefReduce, AxesAsInputNotCanonical_n) {
  Tensor x = randomF32(Shape{2, 3}, 1);
  Tensor axes = i64({1}, {0});
  EXPECT_EQ(runStatus(makeNode("ReduceSum", 2), {&x, &axes}).code(), ErrorCode::kInvalidModel);
}

TEST(RefReduce, ArgMaxAxisOutOfRange_n) {
  Tensor x = randomF32(Shape{2, 3}, 1);
  auto n = makeNode("ArgMax", 1);
  n.attrs.set("axis", graph::Attribute::Int(-3));
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefReduce, ArgMinEmptyAxis_n) {
  Tensor x = Tensor::zeros(DataType::kFloat32, Shape{2, 0});
  auto n = makeNode("ArgMin", 1);
  n.attrs.set("axis", graph::Attribute::Int(1));
  EXPECT_EQ(runStatus(n, {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefReduce, ArgMaxScalar_n) {
  Tensor x = f32({}, {1.f});
  EXPECT_EQ(runStatus(makeNode("ArgMax", 1), {&x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefQuant, ScaleLengthMismatch_n) {
  Tensor x = randomF32(Shape{2, 3}, 1);
  Tensor scale = f32({2}, {1.f, 1.f});
  EXPECT_EQ(runStatus(makeNode("QuantizeLinear", 2), {&x, &scale}).code(),
            ErrorCode::kInvalidModel);
}

TEST(RefQuant, ZeroPointShapeMismatch_n) {
  Tensor x = randomF32(Shape{2, 3}, 1);
  Tensor scale = f32({3}, {1.f, 1.f, 1.f});
  Tensor zp = u8({2}, {0, 0});
  EXPECT_EQ(runStatus(makeNode("QuantizeLinear", 3), {&x, &scale, &zp}).code(),
            ErrorCode::kInvalidModel);
}

TEST(RefQuant, QuantizeBadZeroPointType_n) {
  Tensor x = randomF32(Shape{2}, 1);
  Tensor scale = f32({}, {1.f});
  Tensor zp = i32({}, {0});
  EXPECT_EQ(runStatus(makeNode("QuantizeLinear", 3), {&x, &scale, &zp}).code(),
            ErrorCode::kInvalidModel);
}

TEST(RefQuant, QuantizeIntegerScale_n) {
  Tensor x = randomF32(Shape{2}, 1);
  Tensor scale = i32({}, {1});
  EXPECT_EQ(runStatus(makeNode("QuantizeLinear", 2), {&x, &scale}).code(),
            ErrorCode::kInvalidModel);
}

TEST(RefQuant, DequantizeFloatInput_n) {
  Tensor x = randomF32(Shape{2}, 1);
  Tensor scale = f32({}, {1.f});
  EXPECT_EQ(runStatus(makeNode("DequantizeLinear", 2), {&x, &scale}).code(),
            ErrorCode::kInvalidModel);
}

TEST(RefQuant, DequantizeZeroPointTypeMismatch_n) {
  Tensor x = u8({2}, {1, 2});
  Tensor scale = f32({}, {1.f});
  Tensor zp = s8({}, {0});
  EXPECT_EQ(runStatus(makeNode("DequantizeLinear", 3), {&x, &scale, &zp}).code(),
            ErrorCode::kInvalidModel);
}

TEST(RefQuant, DequantizeInt32NonZeroZeroPoint_n) {
  Tensor x = i32({2}, {1, 2});
  Tensor scale = f32({}, {1.f});
  Tensor zp = i32({}, {3});
  EXPECT_FALSE(runStatus(makeNode("DequantizeLinear", 3), {&x, &scale, &zp}).ok());
}

TEST(RefQuant, PerAxisBadAxis_n) {
  Tensor x = u8({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor scale = f32({3}, {1.f, 1.f, 1.f});
  auto n = makeNode("DequantizeLinear", 2);
  n.attrs.set("axis", graph::Attribute::Int(2));
  EXPECT_EQ(runStatus(n, {&x, &scale}).code(), ErrorCode::kInvalidModel);
}

TEST(RefQuant, ScaleRank2_n) {
  Tensor x = u8({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor scale = f32({1, 3}, {1.f, 1.f, 1.f});
  EXPECT_EQ(runStatus(makeNode("DequantizeLinear", 2), {&x, &scale}).code(),
            ErrorCode::kInvalidModel);
}

TEST(RefQuant, MissingScale_n) {
  Tensor x = u8({2}, {1, 2});
  EXPECT_EQ(runStatus(makeNode("DequantizeLinear", 1), {&x}).code(), ErrorCode::kInvalidModel);
}

}  // namespace
}  // namespace edgeinfer
