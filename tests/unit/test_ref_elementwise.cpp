// CPU reference kernels and shape inference for the elementwise ops: hand-computed cases,
// random inputs with odd shapes (fixed seed) against brute-force formulas, broadcasting and
// negative cases (suffix _n) that must return an error status, never crash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "graph/op_schema.h"
#include "kernels/ref/ref_kernels.h"
#include "ref_test_util.h"

namespace edgeinfer {
namespace {

using namespace test;

/// A bool tensor (one byte per element).
Tensor boolean(Shape s, const std::vector<uint8_t>& v) {
  return make(DataType::kBool, s, v);
}

std::vector<float> toFloats(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(t.getAsDouble(int64_t(i)));
  return v;
}
std::vector<int64_t> toInts(const Tensor& t) {
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.getAsInt64(int64_t(i));
  return v;
}

void expectNear(const std::vector<float>& got, const std::vector<float>& want, float tol = 1e-5f) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "at " << i;
      continue;
    }
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.f, std::fabs(want[i]))) << "at " << i;
  }
}

// ---- Unary ------------------------------------------------------------------------------------

TEST(RefElementwise, UnaryMathMatchesStd) {
  const std::vector<std::pair<std::string, std::function<double(double)>>> ops = {
      {"Abs", [](double x) { return std::fabs(x); }},
      {"Neg", [](double x) { return -x; }},
      {"Floor", [](double x) { return std::floor(x); }},
      {"Ceil", [](double x) { return std::ceil(x); }},
      {"Exp", [](double x) { return std::exp(x); }},
      {"Sin", [](double x) { return std::sin(x); }},
      {"Cos", [](double x) { return std::cos(x); }},
      {"Tan", [](double x) { return std::tan(x); }},
      {"Atan", [](double x) { return std::atan(x); }},
      {"Sinh", [](double x) { return std::sinh(x); }},
      {"Cosh", [](double x) { return std::cosh(x); }},
      {"Asinh", [](double x) { return std::asinh(x); }},
      {"Erf", [](double x) { return std::erf(x); }},
      {"Tanh", [](double x) { return std::tanh(x); }},
      {"Sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"Relu", [](double x) { return x > 0 ? x : 0; }},
      {"Softsign", [](double x) { return x / (1 + std::fabs(x)); }},
      {"Softplus", [](double x) { return std::log1p(std::exp(x)); }},
      {"Sign", [](double x) { return x > 0 ? 1.0 : (x < 0 ? -1.0 : 0.0); }},
      {"HardSwish", [](double x) { return x * std::max(0.0, std::min(1.0, x / 6 + 0.5)); }},
      {"Elu", [](double x) { return x >= 0 ? x : std::exp(x) - 1; }},
  };
  const Tensor x = randomF32(Shape{13, 7}, 42, -3.f, 3.f);
  for (const auto& [op, fn] : ops) {
    SCOPED_TRACE(op);
    Tensor y = run1(makeNode(op, 1), {&x});
    ASSERT_EQ(y.shape(), x.shape());
    std::vector<float> want;
    for (float v : toFloats(x)) want.push_back(static_cast<float>(fn(v)));
    expectNear(toFloats(y), want, 1e-5f);
  }
  // Functions with restricted domains get inputs inside them.
  const Tensor pos = randomF32(Shape{5, 3}, 7, 0.1f, 5.f);
  const Tensor unit = randomF32(Shape{5, 3}, 8, -0.95f, 0.95f);
  const Tensor big = randomF32(Shape{5, 3}, 9, 1.05f, 5.f);
  const std::vector<std::tuple<std::string, const Tensor*, std::function<double(double)>>> dom = {
      {"Sqrt", &pos, [](double v) { return std::sqrt(v); }},
      {"Log", &pos, [](double v) { return std::log(v); }},
      {"Reciprocal", &pos, [](double v) { return 1 / v; }},
      {"Asin", &unit, [](double v) { return std::asin(v); }},
      {"Acos", &unit, [](double v) { return std::acos(v); }},
      {"Atanh", &unit, [](double v) { return std::atanh(v); }},
      {"Acosh", &big, [](double v) { return std::acosh(v); }},
  };
  for (const auto& [op, in, fn] : dom) {
    SCOPED_TRACE(op);
    Tensor y = run1(makeNode(op, 1), {in});
    std::vector<float> want;
    for (float v : toFloats(*in)) want.push_back(static_cast<float>(fn(v)));
    expectNear(toFloats(y), want, 1e-5f);
  }
}

TEST(RefElementwise, RoundHalfToEven) {
  Tensor x = f32({7}, {0.5f, 1.5f, 2.5f, -0.5f, -1.5f, 2.4f, -2.6f});
  expectNear(toFloats(run1(makeNode("Round", 1), {&x})), {0, 2, 2, -0.f, -2, 2, -3});
}

TEST(RefElementwise, ActivationAttributes) {
  Tensor x = f32({4}, {-2.f, -0.5f, 0.5f, 2.f});
  auto node = makeNode("LeakyRelu", 1);
  expectNear(toFloats(run1(node, {&x})), {-0.02f, -0.005f, 0.5f, 2.f});
  node.attrs.set("alpha", graph::Attribute::Float(0.1f));
  expectNear(toFloats(run1(node, {&x})), {-0.2f, -0.05f, 0.5f, 2.f});
  expectNear(toFloats(run1(makeNode("HardSigmoid", 1), {&x})), {0.1f, 0.4f, 0.6f, 0.9f});
  auto tr = makeNode("ThresholdedRelu", 1);
  tr.attrs.set("alpha", graph::Attribute::Float(0.4f));
  expectNear(toFloats(run1(tr, {&x})), {0, 0, 0.5f, 2.f});
  const double a = 1.67326319217681884765625, g = 1.05070102214813232421875;
  expectNear(toFloats(run1(makeNode("Selu", 1), {&x})),
             {float(g * a * (std::exp(-2.0) - 1)), float(g * a * (std::exp(-0.5) - 1)),
              float(g * 0.5), float(g * 2)});
  auto celu = makeNode("Celu", 1);
  celu.attrs.set("alpha", graph::Attribute::Float(2.f));
  expectNear(toFloats(run1(celu, {&x})),
             {float(2 * (std::exp(-1.0) - 1)), float(2 * (std::exp(-0.25) - 1)), 0.5f, 2.f});
}

TEST(RefElementwise, IntegerUnary) {
  Tensor x = i32({4}, {-3, 0, 5, -2147483647 - 1});
  EXPECT_EQ(toInts(run1(makeNode("Abs", 1), {&x})),
            (std::vector<int64_t>{3, 0, 5, -2147483647 - 1}));  // wraps like C
  EXPECT_EQ(toInts(run1(makeNode("Neg", 1), {&x})),
            (std::vector<int64_t>{3, 0, -5, -2147483647 - 1}));
  EXPECT_EQ(toInts(run1(makeNode("Relu", 1), {&x})), (std::vector<int64_t>{0, 0, 5, 0}));
  EXPECT_EQ(toInts(run1(makeNode("Sign", 1), {&x})), (std::vector<int64_t>{-1, 0, 1, -1}));
}

TEST(RefElementwise, NotIsNanIsInf) {
  Tensor b = boolean({3}, {0, 1, 0});
  Tensor y = run1(makeNode("Not", 1), {&b});
  EXPECT_EQ(y.dtype(), DataType::kBool);
  EXPECT_EQ(toInts(y), (std::vector<int64_t>{1, 0, 1}));
  const float inf = INFINITY;
  Tensor x = f32({4}, {NAN, inf, -inf, 1.f});
  EXPECT_EQ(toInts(run1(makeNode("IsNaN", 1), {&x})), (std::vector<int64_t>{1, 0, 0, 0}));
  EXPECT_EQ(toInts(run1(makeNode("IsInf", 1), {&x})), (std::vector<int64_t>{0, 1, 1, 0}));
  auto n = makeNode("IsInf", 1);
  n.attrs.set("detect_negative", graph::Attribute::Int(0));
  EXPECT_EQ(toInts(run1(n, {&x})), (std::vector<int64_t>{0, 1, 0, 0}));
}

TEST(RefElementwise, ClipFloatAndInt) {
  Tensor x = f32({5}, {-3, -1, 0, 1, 3});
  Tensor lo = f32({}, {-1.5f});
  Tensor hi = f32({}, {2.f});
  auto n = makeNode("Clip", 3);
  expectNear(toFloats(run1(n, {&x, &lo, &hi})), {-1.5f, -1, 0, 1, 2});
  auto minOnly = makeNode("Clip", 2);
  expectNear(toFloats(run1(minOnly, {&x, &lo})), {-1.5f, -1, 0, 1, 3});
  auto maxOnly = makeNode("Clip", 3);
  maxOnly.inputs[1] = "";
  expectNear(toFloats(run1(maxOnly, {&x, nullptr, &hi})), {-3, -1, 0, 1, 2});
  Tensor xi = i64({4}, {-10, 3, 7, 100});
  Tensor loi = i64({1}, {0});
  Tensor hii = i64({1}, {9});
  EXPECT_EQ(toInts(run1(n, {&xi, &loi, &hii})), (std::vector<int64_t>{0, 3, 7, 9}));
  EXPECT_EQ(toInts(run1(makeNode("Clip", 1), {&xi})), (std::vector<int64_t>{-10, 3, 7, 100}));
}

TEST(RefElementwise, Float16AndBFloat16ComputeThroughFloat) {
  Tensor h = Tensor::zeros(DataType::kFloat16, Shape{3});
  Tensor b = Tensor::zeros(DataType::kBFloat16, Shape{3});
  const float vals[] = {-1.5f, 0.25f, 4.f};
  for (int i = 0; i < 3; ++i) {
    h.data<uint16_t>()[i] = floatToHalf(vals[i]);
    b.data<uint16_t>()[i] = floatToBf16(vals[i]);
  }
  Tensor y = run1(makeNode("Add", 2), {&h, &h});
  EXPECT_EQ(y.dtype(), DataType::kFloat16);
  expectNear(toFloats(y), {-3.f, 0.5f, 8.f});
  Tensor r = run1(makeNode("Relu", 1), {&b});
  EXPECT_EQ(r.dtype(), DataType::kBFloat16);
  expectNear(toFloats(r), {0.f, 0.25f, 4.f});
}

// ---- Binary -----------------------------------------------------------------------------------

TEST(RefElementwise, BinaryBroadcastRandom) {
  const Tensor a = randomF32(Shape{3, 1, 5}, 1, -3.f, 3.f);
  const Tensor b = randomF32(Shape{4, 1}, 2, 0.5f, 2.f);
  const std::vector<std::pair<std::string, std::function<float(float, float)>>> ops = {
      {"Add", [](float p, float q) { return p + q; }},
      {"Sub", [](float p, float q) { return p - q; }},
      {"Mul", [](float p, float q) { return p * q; }},
      {"Div", [](float p, float q) { return p / q; }},
      {"Pow", [](float p, float q) { return float(std::pow(double(p), double(q))); }},
  };
  const std::vector<float> av = toFloats(a), bv = toFloats(b);
  for (const auto& [op, fn] : ops) {
    SCOPED_TRACE(op);
    Tensor y = run1(makeNode(op, 2), {&a, &b});
    ASSERT_EQ(y.shape(), (Shape{3, 4, 5}));
    std::vector<float> want;
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 4; ++j)
        for (int k = 0; k < 5; ++k) want.push_back(fn(av[size_t(i * 5 + k)], bv[size_t(j)]));
    expectNear(toFloats(y), want, 1e-5f);
  }
}

TEST(RefElementwise, BinaryScalarBroadcastLarge) {
  // Large enough to take the OpenMP path.
  const Tensor a = randomF32(Shape{257, 131}, 5, -3.f, 3.f);
  const Tensor s = f32({}, {2.f});
  Tensor y = run1(makeNode("Mul", 2), {&a, &s});
  std::vector<float> want = toFloats(a);
  for (auto& v : want) v *= 2.f;
  expectNear(toFloats(y), want, 0.f);
}

TEST(RefElementwise, IntegerDivModTruncate) {
  Tensor a = i32({4}, {7, -7, 7, -7});
  Tensor b = i32({4}, {2, 2, -2, -2});
  EXPECT_EQ(toInts(run1(makeNode("Div", 2), {&a, &b})), (std::vector<int64_t>{3, -3, -3, 3}));
  Tensor c = i32({4}, {5, -5, 5, -5});
  Tensor d = i32({4}, {3, 3, -3, -3});
  EXPECT_EQ(toInts(run1(makeNode("Mod", 2), {&c, &d})), (std::vector<int64_t>{2, 1, -1, -2}));
  auto fm = makeNode("Mod", 2);
  fm.attrs.set("fmod", graph::Attribute::Int(1));
  EXPECT_EQ(toInts(run1(fm, {&c, &d})), (std::vector<int64_t>{2, -2, 2, -2}));
  Tensor fa = f32({2}, {5.5f, -5.5f});
  Tensor fb = f32({2}, {2.f, 2.f});
  expectNear(toFloats(run1(fm, {&fa, &fb})), {1.5f, -1.5f});
  Tensor mn = i32({1}, {-2147483647 - 1});
  Tensor m1 = i32({1}, {-1});
  EXPECT_EQ(toInts(run1(makeNode("Div", 2), {&mn, &m1})),
            (std::vector<int64_t>{-2147483647 - 1}));  // wraps, no SIGFPE
}

TEST(RefElementwise, PowMixedTypes) {
  Tensor base = i64({4}, {2, 3, -2, 5});
  Tensor e = f32({4}, {3.f, 2.f, 3.f, 0.f});
  Tensor y = run1(makeNode("Pow", 2), {&base, &e});
  EXPECT_EQ(y.dtype(), DataType::kInt64);
  EXPECT_EQ(toInts(y), (std::vector<int64_t>{8, 9, -8, 1}));
  Tensor fb = f32({2}, {4.f, 2.f});
  Tensor ie = i32({2}, {2, -1});
  expectNear(toFloats(run1(makeNode("Pow", 2), {&fb, &ie})), {16.f, 0.5f});
}

TEST(RefElementwise, ComparisonAndLogic) {
  Tensor a = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor b = f32({3}, {2, 2, 7});
  auto cmp = [&](const char* op) { return toInts(run1(makeNode(op, 2), {&a, &b})); };
  EXPECT_EQ(cmp("Equal"), (std::vector<int64_t>{0, 1, 0, 0, 0, 0}));
  EXPECT_EQ(cmp("Less"), (std::vector<int64_t>{1, 0, 1, 0, 0, 1}));
  EXPECT_EQ(cmp("Greater"), (std::vector<int64_t>{0, 0, 0, 1, 1, 0}));
  EXPECT_EQ(cmp("LessOrEqual"), (std::vector<int64_t>{1, 1, 1, 0, 0, 1}));
  EXPECT_EQ(cmp("GreaterOrEqual"), (std::vector<int64_t>{0, 1, 0, 1, 1, 0}));
  EXPECT_EQ(run1(makeNode("Less", 2), {&a, &b}).dtype(), DataType::kBool);
  Tensor p = boolean({4}, {0, 0, 1, 1});
  Tensor q = boolean({4}, {0, 1, 0, 1});
  EXPECT_EQ(toInts(run1(makeNode("And", 2), {&p, &q})), (std::vector<int64_t>{0, 0, 0, 1}));
  EXPECT_EQ(toInts(run1(makeNode("Or", 2), {&p, &q})), (std::vector<int64_t>{0, 1, 1, 1}));
  EXPECT_EQ(toInts(run1(makeNode("Xor", 2), {&p, &q})), (std::vector<int64_t>{0, 1, 1, 0}));
  EXPECT_EQ(toInts(run1(makeNode("Equal", 2), {&p, &q})), (std::vector<int64_t>{1, 0, 0, 1}));
  Tensor ia = i64({3}, {1, 5, -3});
  Tensor ib = i64({1}, {1});
  EXPECT_EQ(toInts(run1(makeNode("Greater", 2), {&ia, &ib})), (std::vector<int64_t>{0, 1, 0}));
}

TEST(RefElementwise, BitShift) {
  Tensor a = u8({3}, {1, 16, 255});
  Tensor s = u8({3}, {3, 2, 9});
  auto l = makeNode("BitShift", 2);
  l.attrs.set("direction", graph::Attribute::String("LEFT"));
  EXPECT_EQ(toInts(run1(l, {&a, &s})), (std::vector<int64_t>{8, 64, 0}));
  auto r = makeNode("BitShift", 2);
  r.attrs.set("direction", graph::Attribute::String("RIGHT"));
  EXPECT_EQ(toInts(run1(r, {&a, &s})), (std::vector<int64_t>{0, 4, 0}));
}

// ---- Variadic, Where, Cast ---------------------------------------------------------------------

TEST(RefElementwise, VariadicBroadcastRandom) {
  const Tensor a = randomF32(Shape{2, 3, 4}, 11, -3.f, 3.f);
  const Tensor b = randomF32(Shape{3, 1}, 12, -3.f, 3.f);
  const Tensor c = randomF32(Shape{4}, 13, -3.f, 3.f);
  const std::vector<float> av = toFloats(a), bv = toFloats(b), cv = toFloats(c);
  for (const char* op : {"Max", "Min", "Sum", "Mean"}) {
    SCOPED_TRACE(op);
    Tensor y = run1(makeNode(op, 3), {&a, &b, &c});
    ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
    std::vector<float> want;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 3; ++j)
        for (int k = 0; k < 4; ++k) {
          const float p = av[size_t((i * 3 + j) * 4 + k)], q = bv[size_t(j)], r = cv[size_t(k)];
          const std::string o = op;
          want.push_back(o == "Max"   ? std::max({p, q, r})
                         : o == "Min" ? std::min({p, q, r})
                         : o == "Sum" ? p + q + r
                                      : (p + q + r) / 3);
        }
    expectNear(toFloats(y), want, 1e-6f);
  }
  Tensor one = f32({2}, {1.f, NAN});
  Tensor two = f32({2}, {3.f, 0.f});
  expectNear(toFloats(run1(makeNode("Max", 2), {&one, &two})), {3.f, NAN});
  Tensor single = i32({2}, {4, -4});
  EXPECT_EQ(toInts(run1(makeNode("Min", 1), {&single})), (std::vector<int64_t>{4, -4}));
}

TEST(RefElementwise, WhereBroadcast) {
  Tensor c = boolean({2, 1}, {1, 0});
  Tensor x = i64({3}, {1, 2, 3});
  Tensor y = i64({2, 3}, {10, 20, 30, 40, 50, 60});
  Tensor out = run1(makeNode("Where", 3), {&c, &x, &y});
  ASSERT_EQ(out.shape(), (Shape{2, 3}));
  EXPECT_EQ(toInts(out), (std::vector<int64_t>{1, 2, 3, 40, 50, 60}));
}

graph::Node castNode(DataType to) {
  auto n = makeNode("Cast", 1);
  n.attrs.set("to", graph::Attribute::Int(static_cast<int64_t>(to)));
  return n;
}

TEST(RefElementwise, CastSemantics) {
  Tensor x = f32({6}, {1.9f, -1.9f, 0.f, 300.f, NAN, -0.4f});
  Tensor toI32 = run1(castNode(DataType::kInt32), {&x});
  EXPECT_EQ(toI32.dtype(), DataType::kInt32);
  EXPECT_EQ(toInts(toI32), (std::vector<int64_t>{1, -1, 0, 300, 0, 0}));
  EXPECT_EQ(toInts(run1(castNode(DataType::kBool), {&x})),
            (std::vector<int64_t>{1, 1, 0, 1, 1, 1}));
  EXPECT_EQ(toInts(run1(castNode(DataType::kUInt8), {&x})),
            (std::vector<int64_t>{1, 0, 0, 255, 0, 0}));  // saturates
  Tensor h = run1(castNode(DataType::kFloat16), {&x});
  EXPECT_EQ(h.dtype(), DataType::kFloat16);
  EXPECT_EQ(h.data<uint16_t>()[0], floatToHalf(1.9f));
  Tensor back = run1(castNode(DataType::kFloat32), {&h});
  EXPECT_NEAR(back.data<float>()[3], 300.f, 0.f);
  Tensor bf = run1(castNode(DataType::kBFloat16), {&h});  // half -> bf16 via float
  EXPECT_EQ(bf.data<uint16_t>()[1], floatToBf16(halfToFloat(floatToHalf(-1.9f))));
  Tensor b = boolean({3}, {1, 0, 1});
  expectNear(toFloats(run1(castNode(DataType::kFloat32), {&b})), {1.f, 0.f, 1.f});
  Tensor big = i64({3}, {257, -129, 5});
  EXPECT_EQ(toInts(run1(castNode(DataType::kInt8), {&big})), (std::vector<int64_t>{1, 127, 5}));
  EXPECT_EQ(toInts(run1(castNode(DataType::kInt64), {&big})), (std::vector<int64_t>{257, -129, 5}));
}

// ---- Shape inference with unknown dims ----------------------------------------------------------

TEST(RefElementwise, ShapeInferenceUnknownDims) {
  auto n = makeNode("Add", 2);
  graph::InferContext ctx(n, {iv(DataType::kFloat32, {-1, 3, 1}), iv(DataType::kFloat32, {4})});
  ASSERT_TRUE(graph::inferNode(ctx).ok());
  EXPECT_TRUE(ctx.outputs[0].shapeKnown);
  EXPECT_EQ(ctx.outputs[0].shape, (Shape{-1, 3, 4}));
  graph::InferContext ctx2(n, {ivUnknown(DataType::kFloat32), iv(DataType::kFloat32, {4})});
  ASSERT_TRUE(graph::inferNode(ctx2).ok());
  EXPECT_FALSE(ctx2.outputs[0].shapeKnown);
  EXPECT_EQ(ctx2.outputs[0].dtype, DataType::kFloat32);
  auto w = makeNode("Where", 3);
  graph::InferContext ctx3(
      w, {iv(DataType::kBool, {-1, 1}), iv(DataType::kInt8, {1, 5}), iv(DataType::kInt8, {1})});
  ASSERT_TRUE(graph::inferNode(ctx3).ok());
  EXPECT_EQ(ctx3.outputs[0].shape, (Shape{-1, 5}));
  EXPECT_EQ(ctx3.outputs[0].dtype, DataType::kInt8);
}

// ---- Negative cases ---------------------------------------------------------------------------

TEST(RefElementwise, AddBadBroadcast_n) {
  Tensor a = randomF32(Shape{3, 4}, 1, -3.f, 3.f), b = randomF32(Shape{5}, 2, -3.f, 3.f);
  Status s = runStatus(makeNode("Add", 2), {&a, &b});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidModel);
  EXPECT_NE(s.message().find("broadcast"), std::string::npos) << s.toString();
}

TEST(RefElementwise, AddTypeMismatch_n) {
  Tensor a = randomF32(Shape{3}, 1, -3.f, 3.f);
  Tensor b = i32({3}, {1, 2, 3});
  EXPECT_EQ(runStatus(makeNode("Add", 2), {&a, &b}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, AddTooFewInputs_n) {
  Tensor a = randomF32(Shape{3}, 1, -3.f, 3.f);
  EXPECT_EQ(runStatus(makeNode("Add", 1), {&a}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, AddTooManyInputs_n) {
  Tensor a = randomF32(Shape{3}, 1, -3.f, 3.f);
  EXPECT_EQ(runStatus(makeNode("Add", 3), {&a, &a, &a}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, SqrtOnInt_n) {
  Tensor a = i32({2}, {4, 9});
  EXPECT_FALSE(runStatus(makeNode("Sqrt", 1), {&a}).ok());
}

TEST(RefElementwise, NotOnFloat_n) {
  Tensor a = randomF32(Shape{2}, 1, -3.f, 3.f);
  EXPECT_FALSE(runStatus(makeNode("Not", 1), {&a}).ok());
}

TEST(RefElementwise, AndOnFloat_n) {
  Tensor a = randomF32(Shape{2}, 1, -3.f, 3.f);
  EXPECT_FALSE(runStatus(makeNode("And", 2), {&a, &a}).ok());
}

TEST(RefElementwise, IsNanOnInt_n) {
  Tensor a = i32({2}, {1, 2});
  EXPECT_FALSE(runStatus(makeNode("IsNaN", 1), {&a}).ok());
}

TEST(RefElementwise, FloatModWithoutFmod_n) {
  Tensor a = randomF32(Shape{2}, 1, -3.f, 3.f);
  EXPECT_EQ(runStatus(makeNode("Mod", 2), {&a, &a}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, IntegerDivByZero_n) {
  Tensor a = i32({2}, {1, 2});
  Tensor z = i32({2}, {1, 0});
  Status s = runStatus(makeNode("Div", 2), {&a, &z});
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(s.message().find("zero"), std::string::npos);
}

TEST(RefElementwise, IntegerModByZero_n) {
  Tensor a = i64({1}, {5});
  Tensor z = i64({1}, {0});
  EXPECT_FALSE(runStatus(makeNode("Mod", 2), {&a, &z}).ok());
}

TEST(RefElementwise, BitShiftBadDirection_n) {
  Tensor a = u8({1}, {1});
  auto n = makeNode("BitShift", 2);
  n.attrs.set("direction", graph::Attribute::String("UP"));
  EXPECT_EQ(runStatus(n, {&a, &a}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, BitShiftSignedType_n) {
  Tensor a = i32({1}, {1});
  auto n = makeNode("BitShift", 2);
  n.attrs.set("direction", graph::Attribute::String("LEFT"));
  EXPECT_EQ(runStatus(n, {&a, &a}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, CastBadTarget_n) {
  Tensor a = randomF32(Shape{2}, 1, -3.f, 3.f);
  auto n = makeNode("Cast", 1);
  n.attrs.set("to", graph::Attribute::Int(42));
  EXPECT_EQ(runStatus(n, {&a}).code(), ErrorCode::kInvalidModel);
  auto missing = makeNode("Cast", 1);
  EXPECT_EQ(runStatus(missing, {&a}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, WhereConditionNotBool_n) {
  Tensor c = i32({2}, {1, 0});
  Tensor x = randomF32(Shape{2}, 1, -3.f, 3.f);
  EXPECT_EQ(runStatus(makeNode("Where", 3), {&c, &x, &x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, WhereBadBroadcast_n) {
  Tensor c = boolean({3}, {1, 0, 1});
  Tensor x = randomF32(Shape{2}, 1, -3.f, 3.f);
  EXPECT_EQ(runStatus(makeNode("Where", 3), {&c, &x, &x}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, WhereValueTypesDiffer_n) {
  Tensor c = boolean({2}, {1, 0});
  Tensor x = randomF32(Shape{2}, 1, -3.f, 3.f);
  Tensor y = i32({2}, {1, 2});
  EXPECT_EQ(runStatus(makeNode("Where", 3), {&c, &x, &y}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, ClipNonScalarMin_n) {
  Tensor x = randomF32(Shape{3}, 1, -3.f, 3.f);
  Tensor lo = f32({2}, {0.f, 1.f});
  EXPECT_EQ(runStatus(makeNode("Clip", 2), {&x, &lo}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, ClipMinTypeMismatch_n) {
  Tensor x = randomF32(Shape{3}, 1, -3.f, 3.f);
  Tensor lo = i32({}, {0});
  EXPECT_EQ(runStatus(makeNode("Clip", 2), {&x, &lo}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, MaxTypeMismatch_n) {
  Tensor a = randomF32(Shape{2}, 1, -3.f, 3.f);
  Tensor b = i32({2}, {1, 2});
  EXPECT_EQ(runStatus(makeNode("Max", 2), {&a, &b}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, SumOnInt_n) {
  Tensor a = i32({2}, {1, 2});
  EXPECT_EQ(runStatus(makeNode("Sum", 2), {&a, &a}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, VariadicBadBroadcast_n) {
  Tensor a = randomF32(Shape{2, 3}, 1, -3.f, 3.f), b = randomF32(Shape{3}, 2, -3.f, 3.f),
         c = randomF32(Shape{2}, 3, -3.f, 3.f);
  EXPECT_EQ(runStatus(makeNode("Mean", 3), {&a, &b, &c}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, VariadicNoInputs_n) {
  EXPECT_EQ(runStatus(makeNode("Max", 0), {}).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, ShapeInferenceBadBroadcastKnownDims_n) {
  auto n = makeNode("Mul", 2);
  graph::InferContext ctx(n, {iv(DataType::kFloat32, {-1, 3}), iv(DataType::kFloat32, {2, 4})});
  EXPECT_EQ(graph::inferNode(ctx).code(), ErrorCode::kInvalidModel);
}

TEST(RefElementwise, ComparisonOnBoolUnsupported_n) {
  Tensor p = boolean({2}, {0, 1});
  EXPECT_EQ(runStatus(makeNode("Less", 2), {&p, &p}).code(), ErrorCode::kInvalidModel);
}

}  // namespace
}  // namespace edgeinfer
