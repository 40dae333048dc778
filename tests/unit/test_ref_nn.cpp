// Tests of the CPU reference kernels and shape functions of the neural-network and fused ops
// (sdk/src/kernels/ref/{conv,pool,norm,gemm,softmax,resize,space_depth,nn_misc}.cpp,
// sdk/src/graph/ops/{nn,fused}_schemas.cpp).
//
// Kernels are checked against small hand-computed cases (most from the ONNX operator docs)
// and against naive brute-force formulations written here, on random inputs with odd sizes
// and a fixed seed. Fused ops are checked against the unfused chains run node by node.
// Tests ending in _n feed invalid nodes and expect a clear error status, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "graph/op_schema.h"
#include "kernels/ref/activation.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer {
namespace {

using graph::Attribute;
using graph::Node;

// ---- Helpers --------------------------------------------------------------------------------

Tensor tensorOf(const Shape& shape, const std::vector<float>& values) {
  Tensor t = Tensor::zeros(DataType::kFloat32, shape);
  EXPECT_EQ(static_cast<int64_t>(values.size()), t.numel());
  for (size_t i = 0; i < values.size() && static_cast<int64_t>(i) < t.numel(); ++i)
    t.data<float>()[i] = values[i];
  return t;
}

Tensor int64Tensor(const Shape& shape, const std::vector<int64_t>& values) {
  Tensor t = Tensor::zeros(DataType::kInt64, shape);
  for (size_t i = 0; i < values.size(); ++i) t.data<int64_t>()[i] = values[i];
  return t;
}

Tensor randomTensor(const Shape& shape, uint32_t seed, float lo = -1.f, float hi = 1.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  Tensor t = Tensor::zeros(DataType::kFloat32, shape);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = dist(rng);
  return t;
}

std::vector<float> valuesOf(const Tensor& t) {
  return std::vector<float>(t.data<float>(), t.data<float>() + t.numel());
}

/// A node whose inputs are named after their position ("" for the absent ones).
Node makeNode(const std::string& op, const std::vector<const Tensor*>& inputs, size_t outputs = 1,
              const std::string& domain = "") {
  Node n;
  n.name = op + "_test";
  n.opType = op;
  n.domain = domain;
  for (size_t i = 0; i < inputs.size(); ++i)
    n.inputs.push_back(inputs[i] ? "in" + std::to_string(i) : "");
  for (size_t i = 0; i < outputs; ++i) n.outputs.push_back("out" + std::to_string(i));
  return n;
}

Node fusedNode(const std::string& op, const std::vector<const Tensor*>& inputs) {
  return makeNode(op, inputs, 1, graph::kEdgeInferDomain);
}

/// Runs one node; returns its first output (fails the test on error).
Tensor run(const Node& n, const std::vector<const Tensor*>& inputs) {
  std::vector<Tensor> outs;
  Status s = ref::runNode(n, inputs, outs);
  EXPECT_TRUE(s.ok()) << s.toString();
  return s.ok() ? outs[0] : Tensor();
}

/// Runs one node that must fail with `code`.
void expectFails(const Node& n, const std::vector<const Tensor*>& inputs,
                 ErrorCode code = ErrorCode::kInvalidModel) {
  std::vector<Tensor> outs;
  Status s = ref::runNode(n, inputs, outs);
  ASSERT_FALSE(s.ok()) << n.opType << " unexpectedly succeeded";
  EXPECT_EQ(s.code(), code) << s.toString();
  EXPECT_FALSE(s.message().empty());
  EXPECT_EQ(s.where().opType, n.opType);
}

void expectClose(const Tensor& actual, const Shape& shape, const std::vector<float>& expected,
                 float tol = 1e-4f) {
  ASSERT_FALSE(actual.empty());
  ASSERT_EQ(actual.shape(), shape) << actual.shape().toString() << " vs " << shape.toString();
  ASSERT_EQ(actual.numel(), static_cast<int64_t>(expected.size()));
  const float* a = actual.data<float>();
  int reported = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    const float e = expected[i];
    const bool ok =
        std::isnan(e) ? std::isnan(a[i]) : std::fabs(a[i] - e) <= tol * std::max(1.f, std::fabs(e));
    if (!ok && reported++ < 5) ADD_FAILURE() << "element " << i << ": " << a[i] << " vs " << e;
  }
}

std::vector<int64_t> unravel(int64_t index, const std::vector<int64_t>& dims) {
  std::vector<int64_t> c(dims.size());
  for (size_t d = dims.size(); d-- > 0;) {
    c[d] = index % dims[d];
    index /= dims[d];
  }
  return c;
}

int64_t product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// ---- Naive formulations ---------------------------------------------------------------------

struct Window {
  std::vector<int64_t> kernel, strides, dilations, padsBegin, padsEnd;
};

int64_t naiveOutSize(int64_t in, int64_t k, int64_t s, int64_t d, int64_t pb, int64_t pe) {
  return (in + pb + pe - ((k - 1) * d + 1)) / s + 1;
}

/// Direct N-d convolution: y[n][m][o] = B[m] + sum_{c in group, k} x[n][c][o*s - pb + k*d]
/// w[m][c][k].
std::vector<float> naiveConv(const Tensor& x, const Tensor& w, const Tensor* b, int64_t group,
                             const Window& win, std::vector<int64_t>* outShape) {
  const auto& xs = x.shape().dims();
  const auto& ws = w.shape().dims();
  const size_t sp = xs.size() - 2;
  std::vector<int64_t> in(xs.begin() + 2, xs.end()), k(ws.begin() + 2, ws.end()), out(sp);
  for (size_t i = 0; i < sp; ++i)
    out[i] = naiveOutSize(in[i], k[i], win.strides[i], win.dilations[i], win.padsBegin[i],
                          win.padsEnd[i]);
  const int64_t n = xs[0], c = xs[1], m = ws[0], cg = c / group, mg = m / group;
  *outShape = {n, m};
  outShape->insert(outShape->end(), out.begin(), out.end());
  std::vector<float> y(static_cast<size_t>(product(*outShape)));
  const int64_t outSize = product(out), kSize = product(k), inSize = product(in);
  for (int64_t nn = 0; nn < n; ++nn)
    for (int64_t mm = 0; mm < m; ++mm)
      for (int64_t o = 0; o < outSize; ++o) {
        const auto oc = unravel(o, out);
        double acc = b ? b->data<float>()[mm] : 0.0;
        const int64_t g = mm / mg;
        for (int64_t ci = 0; ci < cg; ++ci)
          for (int64_t kk = 0; kk < kSize; ++kk) {
            const auto kc = unravel(kk, k);
            int64_t offset = 0;
            bool inside = true;
            for (size_t i = 0; i < sp; ++i) {
              const int64_t pos =
                  oc[i] * win.strides[i] - win.padsBegin[i] + kc[i] * win.dilations[i];
              inside = inside && pos >= 0 && pos < in[i];
              offset = offset * in[i] + pos;
            }
            if (!inside) continue;
            acc += static_cast<double>(x.data<float>()[(nn * c + g * cg + ci) * inSize + offset]) *
                   w.data<float>()[(mm * cg + ci) * kSize + kk];
          }
        y[static_cast<size_t>((nn * m + mm) * outSize + o)] = static_cast<float>(acc);
      }
  return y;
}

/// Scatter formulation of ConvTranspose with explicit begin pads and output size.
std::vector<float> naiveConvTranspose(const Tensor& x, const Tensor& w, const Tensor* b,
                                      int64_t group, const std::vector<int64_t>& strides,
                                      const std::vector<int64_t>& dilations,
                                      const std::vector<int64_t>& padsBegin,
                                      const std::vector<int64_t>& out) {
  const auto& xs = x.shape().dims();
  const auto& ws = w.shape().dims();
  const size_t sp = xs.size() - 2;
  std::vector<int64_t> in(xs.begin() + 2, xs.end()), k(ws.begin() + 2, ws.end());
  const int64_t n = xs[0], c = xs[1], mg = ws[1], m = mg * group, cg = c / group;
  const int64_t outSize = product(out), kSize = product(k), inSize = product(in);
  std::vector<double> y(static_cast<size_t>(n * m * outSize), 0.0);
  for (int64_t nn = 0; nn < n; ++nn)
    for (int64_t cc = 0; cc < c; ++cc)
      for (int64_t i = 0; i < inSize; ++i) {
        const auto ic = unravel(i, in);
        const int64_t g = cc / cg;
        for (int64_t mm = 0; mm < mg; ++mm)
          for (int64_t kk = 0; kk < kSize; ++kk) {
            const auto kc = unravel(kk, k);
            int64_t offset = 0;
            bool inside = true;
            for (size_t d = 0; d < sp; ++d) {
              const int64_t pos = ic[d] * strides[d] - padsBegin[d] + kc[d] * dilations[d];
              inside = inside && pos >= 0 && pos < out[d];
              offset = offset * out[d] + pos;
            }
            if (!inside) continue;
            y[static_cast<size_t>((nn * m + g * mg + mm) * outSize + offset)] +=
                static_cast<double>(x.data<float>()[(nn * c + cc) * inSize + i]) *
                w.data<float>()[(cc * mg + mm) * kSize + kk];
          }
      }
  std::vector<float> r(y.size());
  for (size_t i = 0; i < y.size(); ++i)
    r[i] = static_cast<float>(
        y[i] + (b ? b->data<float>()[(static_cast<int64_t>(i) / outSize) % m] : 0.f));
  return r;
}

enum class NaivePool { kMax, kAvg, kAvgIncludePad, kLp2 };

/// Pooling with explicit pads and output size (for ceil_mode the caller passes the size).
std::vector<float> naivePool(const Tensor& x, NaivePool kind, const Window& win,
                             const std::vector<int64_t>& out, std::vector<int64_t>* argmax) {
  const auto& xs = x.shape().dims();
  const size_t sp = xs.size() - 2;
  std::vector<int64_t> in(xs.begin() + 2, xs.end());
  const int64_t planes = xs[0] * xs[1], inSize = product(in), outSize = product(out);
  const int64_t kSize = product(win.kernel);
  std::vector<float> y(static_cast<size_t>(planes * outSize));
  if (argmax) argmax->assign(y.size(), -1);
  for (int64_t p = 0; p < planes; ++p)
    for (int64_t o = 0; o < outSize; ++o) {
      const auto oc = unravel(o, out);
      double acc = 0.0, best = -std::numeric_limits<double>::infinity();
      int64_t count = 0, padded = 0, bestIdx = -1;
      for (int64_t kk = 0; kk < kSize; ++kk) {
        const auto kc = unravel(kk, win.kernel);
        int64_t offset = 0;
        bool inside = true, inPadded = true;
        for (size_t d = 0; d < sp; ++d) {
          const int64_t pos = oc[d] * win.strides[d] - win.padsBegin[d] + kc[d] * win.dilations[d];
          inside = inside && pos >= 0 && pos < in[d];
          inPadded = inPadded && pos >= -win.padsBegin[d] && pos < in[d] + win.padsEnd[d];
          offset = offset * in[d] + pos;
        }
        if (inPadded) ++padded;
        if (!inside) continue;
        const double v = x.data<float>()[p * inSize + offset];
        ++count;
        acc += kind == NaivePool::kLp2 ? v * v : v;
        if (v > best) {
          best = v;
          bestIdx = p * inSize + offset;
        }
      }
      float r = 0.f;
      switch (kind) {
        case NaivePool::kMax:
          r = static_cast<float>(best);
          break;
        case NaivePool::kAvg:
          r = static_cast<float>(acc / static_cast<double>(count));
          break;
        case NaivePool::kAvgIncludePad:
          r = static_cast<float>(acc / static_cast<double>(padded));
          break;
        case NaivePool::kLp2:
          r = static_cast<float>(std::sqrt(acc));
          break;
      }
      y[static_cast<size_t>(p * outSize + o)] = r;
      if (argmax) (*argmax)[static_cast<size_t>(p * outSize + o)] = bestIdx;
    }
  return y;
}

std::vector<float> naiveMatMul2D(const float* a, const float* b, int64_t m, int64_t k, int64_t n) {
  std::vector<float> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t kk = 0; kk < k; ++kk) acc += static_cast<double>(a[i * k + kk]) * b[kk * n + j];
      y[static_cast<size_t>(i * n + j)] = static_cast<float>(acc);
    }
  return y;
}

void setInts(Node& n, const std::string& name, std::vector<int64_t> v) {
  n.attrs.set(name, Attribute::Ints(std::move(v)));
}

// ---- Conv -----------------------------------------------------------------------------------

TEST(RefNnConv, HandComputed2x2Kernel) {
  Tensor x = tensorOf({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  Tensor w = tensorOf({1, 1, 2, 2}, {1, 1, 1, 1});
  Tensor b = tensorOf({1}, {0.5f});
  expectClose(run(makeNode("Conv", {&x, &w, &b}), {&x, &w, &b}), {1, 1, 2, 2},
              {12.5f, 16.5f, 24.5f, 28.5f});
}

TEST(RefNnConv, OnnxDocExampleWithPadding) {
  // ONNX Conv doc: 5x5 input 0..24, 3x3 ones, pads 1.
  std::vector<float> xv(25);
  for (int i = 0; i < 25; ++i) xv[static_cast<size_t>(i)] = static_cast<float>(i);
  Tensor x = tensorOf({1, 1, 5, 5}, xv);
  Tensor w = tensorOf({1, 1, 3, 3}, std::vector<float>(9, 1.f));
  Node n = makeNode("Conv", {&x, &w});
  setInts(n, "kernel_shape", {3, 3});
  setInts(n, "pads", {1, 1, 1, 1});
  expectClose(run(n, {&x, &w}), {1, 1, 5, 5},
              {12,  21, 27, 33,  24,  33,  54,  63, 72,  51,  63,  99, 108,
               117, 81, 93, 144, 153, 162, 111, 72, 111, 117, 123, 84});
  // Strided, no padding.
  Node s = makeNode("Conv", {&x, &w});
  setInts(s, "strides", {2, 2});
  expectClose(run(s, {&x, &w}), {1, 1, 2, 2}, {54, 72, 144, 162});
}

struct ConvCase {
  std::vector<int64_t> x, w;
  int64_t group;
  std::vector<int64_t> strides, dilations, pads;
};

void checkConvAgainstNaive(const ConvCase& cc, uint32_t seed) {
  Tensor x = randomTensor(Shape(cc.x), seed);
  Tensor w = randomTensor(Shape(cc.w), seed + 1);
  Tensor b = randomTensor(Shape{cc.w[0]}, seed + 2);
  Node n = makeNode("Conv", {&x, &w, &b});
  const size_t sp = cc.x.size() - 2;
  n.attrs.set("group", Attribute::Int(cc.group));
  setInts(n, "strides", cc.strides);
  setInts(n, "dilations", cc.dilations);
  setInts(n, "pads", cc.pads);
  Window win{{},
             cc.strides,
             cc.dilations,
             std::vector<int64_t>(cc.pads.begin(), cc.pads.begin() + static_cast<long>(sp)),
             std::vector<int64_t>(cc.pads.begin() + static_cast<long>(sp), cc.pads.end())};
  std::vector<int64_t> outShape;
  const std::vector<float> expected = naiveConv(x, w, &b, cc.group, win, &outShape);
  expectClose(run(n, {&x, &w, &b}), Shape(outShape), expected, 1e-4f);
}

TEST(RefNnConv, MatchesNaive2D) {
  const ConvCase cases[] = {
      {{1, 3, 13, 11}, {5, 3, 3, 3}, 1, {1, 1}, {1, 1}, {1, 1, 1, 1}},
      {{2, 4, 9, 7}, {6, 2, 3, 2}, 2, {2, 1}, {2, 1}, {1, 0, 2, 1}},
      {{1, 6, 13, 13}, {6, 1, 5, 5}, 6, {2, 2}, {1, 1}, {1, 2, 2, 1}},  // depthwise
      {{1, 4, 12, 12}, {4, 1, 3, 3}, 4, {1, 1}, {2, 3}, {2, 3, 2, 3}},  // depthwise dilated
      {{2, 5, 7, 9}, {3, 5, 1, 1}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}},    // pointwise
      {{1, 5, 7, 9}, {3, 5, 1, 1}, 1, {2, 2}, {1, 1}, {0, 1, 1, 0}},    // strided 1x1
      {{1, 6, 8, 8}, {9, 2, 3, 3}, 3, {3, 2}, {1, 1}, {0, 0, 0, 0}},
      {{1, 2, 4, 4}, {3, 2, 4, 4}, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}},  // kernel == input
  };
  uint32_t seed = 100;
  for (const ConvCase& c : cases) {
    SCOPED_TRACE(Shape(c.x).toString() + " * " + Shape(c.w).toString());
    checkConvAgainstNaive(c, seed += 10);
  }
}

TEST(RefNnConv, MatchesNaive1DAnd3D) {
  checkConvAgainstNaive({{2, 3, 13}, {4, 3, 3}, 1, {2}, {1}, {1, 2}}, 7);
  checkConvAgainstNaive({{1, 4, 17}, {4, 1, 5}, 4, {1}, {2}, {3, 1}}, 8);
  checkConvAgainstNaive(
      {{1, 2, 5, 7, 6}, {3, 2, 3, 2, 3}, 1, {1, 2, 1}, {1, 1, 2}, {1, 0, 1, 0, 1, 1}}, 9);
  checkConvAgainstNaive(
      {{1, 4, 5, 5, 5}, {4, 1, 3, 3, 3}, 4, {2, 2, 2}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}}, 10);
}

TEST(RefNnConv, AutoPadSameAndValid) {
  Tensor x = randomTensor({1, 3, 13, 10}, 21);
  Tensor w = randomTensor({4, 3, 4, 3}, 22);
  struct {
    const char* autoPad;
    std::vector<int64_t> strides;
    std::vector<int64_t> outHW;
  } cases[] = {{"SAME_UPPER", {2, 3}, {7, 4}},
               {"SAME_LOWER", {2, 3}, {7, 4}},
               {"VALID", {2, 3}, {5, 3}},
               {"SAME_UPPER", {1, 1}, {13, 10}}};
  for (const auto& c : cases) {
    SCOPED_TRACE(c.autoPad);
    Node n = makeNode("Conv", {&x, &w});
    n.attrs.set("auto_pad", Attribute::String(c.autoPad));
    setInts(n, "strides", c.strides);
    // Expected pads: total = max(0, (out - 1) * s + k - in); odd extra at the end for UPPER.
    Window win{{}, c.strides, {1, 1}, {0, 0}, {0, 0}};
    const int64_t in[2] = {13, 10}, k[2] = {4, 3};
    for (int i = 0; i < 2; ++i) {
      if (std::string(c.autoPad) == "VALID") continue;
      const int64_t total = std::max<int64_t>(
          0,
          (c.outHW[static_cast<size_t>(i)] - 1) * c.strides[static_cast<size_t>(i)] + k[i] - in[i]);
      const int64_t small = total / 2;
      win.padsBegin[static_cast<size_t>(i)] =
          std::string(c.autoPad) == "SAME_UPPER" ? small : total - small;
      win.padsEnd[static_cast<size_t>(i)] = total - win.padsBegin[static_cast<size_t>(i)];
    }
    std::vector<int64_t> outShape;
    const std::vector<float> expected = naiveConv(x, w, nullptr, 1, win, &outShape);
    ASSERT_EQ(outShape[2], c.outHW[0]);
    ASSERT_EQ(outShape[3], c.outHW[1]);
    expectClose(run(n, {&x, &w}), Shape(outShape), expected);
  }
}

TEST(RefNnConv, Float16InputsMatchFloat32) {
  Tensor x = randomTensor({1, 3, 9, 7}, 31);
  Tensor w = randomTensor({2, 3, 3, 3}, 32);
  auto toHalf = [](const Tensor& t) {
    Tensor h = Tensor::zeros(DataType::kFloat16, t.shape());
    for (int64_t i = 0; i < t.numel(); ++i) h.data<uint16_t>()[i] = floatToHalf(t.data<float>()[i]);
    return h;
  };
  Tensor xh = toHalf(x), wh = toHalf(w);
  Node n = makeNode("Conv", {&x, &w});
  setInts(n, "pads", {1, 1, 1, 1});
  Tensor y = run(n, {&x, &w});
  Tensor yh = run(n, {&xh, &wh});
  ASSERT_EQ(yh.dtype(), DataType::kFloat16);
  ASSERT_EQ(yh.shape(), y.shape());
  for (int64_t i = 0; i < y.numel(); ++i)
    EXPECT_NEAR(halfToFloat(yh.data<uint16_t>()[i]), y.data<float>()[i], 2e-2);  // fp16 inputs
}

TEST(RefNnConv, BlazeFaceSizedStackRuns) {
  // 37 convs shaped like BlazeFace at 128x128: a 5x5/2 stem, then depthwise 5x5 + 1x1 pairs.
  std::vector<Tensor> keep;
  Tensor x = randomTensor({1, 3, 128, 128}, 41);
  struct Layer {
    int64_t cin, cout, k, stride, group;
  };
  std::vector<Layer> layers = {{3, 24, 5, 2, 1}};
  const int64_t chans[] = {24, 24, 24, 24, 28, 32, 36, 42, 48, 56, 64, 72, 80, 88, 96, 96, 96, 96};
  for (int i = 0; i < 18; ++i) {
    const int64_t c = chans[i];
    const int64_t next = i + 1 < 18 ? chans[i + 1] : 96;
    const int64_t stride = (i == 4 || i == 9 || i == 13) ? 2 : 1;
    layers.push_back({c, c, 5, stride, c});
    layers.push_back({c, next, 1, 1, 1});
  }
  ASSERT_EQ(layers.size(), 37u);
  std::vector<Node> nodes;
  std::vector<Tensor> weights, biases;
  for (const Layer& l : layers) {
    weights.push_back(randomTensor({l.cout, l.cin / l.group, l.k, l.k}, 50, -0.2f, 0.2f));
    biases.push_back(randomTensor({l.cout}, 51));
  }
  auto forward = [&]() {
    Tensor cur = x;
    for (size_t i = 0; i < layers.size(); ++i) {
      const Layer& l = layers[i];
      Node n = fusedNode("FusedConv", {&cur, &weights[i], &biases[i]});
      n.attrs.set("group", Attribute::Int(l.group));
      setInts(n, "strides", {l.stride, l.stride});
      const int64_t p = l.k / 2;
      setInts(n, "pads", {p, p, p, p});
      n.attrs.set("activation", Attribute::String("Relu"));
      cur = run(n, {&cur, &weights[i], &biases[i]});
      if (cur.empty()) return cur;
    }
    return cur;
  };
  // Speed is measured by benchmarks (docs/performance.md), never asserted in a test: this
  // checks that a deep depthwise/pointwise stack runs and stays finite.
  const Tensor out = forward();
  ASSERT_FALSE(out.empty());
  EXPECT_EQ(out.shape().rank(), 4u);
  for (int64_t i = 0; i < out.numel(); ++i) ASSERT_TRUE(std::isfinite(out.data<float>()[i])) << i;
}

// ---- ConvTranspose ----------------------------------------------------------------------------

TEST(RefNnConvTranspose, OnnxDocExample) {
  Tensor x = tensorOf({1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  Tensor w = tensorOf({1, 2, 3, 3}, std::vector<float>(18, 1.f));
  const std::vector<float> plane = {0,  1,  3, 3,  2,  3,  8,  15, 12, 7,  9,  21, 36,
                                    27, 15, 9, 20, 33, 24, 13, 6,  13, 21, 15, 8};
  std::vector<float> expected = plane;
  expected.insert(expected.end(), plane.begin(), plane.end());
  expectClose(run(makeNode("ConvTranspose", {&x, &w}), {&x, &w}), {1, 2, 5, 5}, expected);
}

TEST(RefNnConvTranspose, MatchesNaive) {
  struct Case {
    std::vector<int64_t> x, w;
    int64_t group;
    std::vector<int64_t> strides, dilations, pads, outputPadding;
  } cases[] = {
      {{1, 3, 5, 4}, {3, 2, 3, 3}, 1, {2, 2}, {1, 1}, {1, 0, 1, 1}, {1, 0}},
      {{2, 4, 3, 5}, {4, 3, 2, 3}, 2, {3, 1}, {1, 2}, {0, 1, 0, 0}, {2, 0}},
      {{1, 2, 7}, {2, 3, 4}, 1, {2}, {1}, {1, 2}, {1}},
  };
  uint32_t seed = 300;
  for (const Case& c : cases) {
    SCOPED_TRACE(Shape(c.x).toString());
    Tensor x = randomTensor(Shape(c.x), seed++);
    Tensor w = randomTensor(Shape(c.w), seed++);
    Tensor b = randomTensor(Shape{c.w[1] * c.group}, seed++);
    Node n = makeNode("ConvTranspose", {&x, &w, &b});
    n.attrs.set("group", Attribute::Int(c.group));
    setInts(n, "strides", c.strides);
    setInts(n, "dilations", c.dilations);
    setInts(n, "pads", c.pads);
    setInts(n, "output_padding", c.outputPadding);
    const size_t sp = c.x.size() - 2;
    std::vector<int64_t> out(sp), padsBegin(c.pads.begin(), c.pads.begin() + static_cast<long>(sp));
    for (size_t i = 0; i < sp; ++i)
      out[i] = c.strides[i] * (c.x[i + 2] - 1) + c.outputPadding[i] +
               (c.w[i + 2] - 1) * c.dilations[i] + 1 - c.pads[i] - c.pads[i + sp];
    std::vector<int64_t> ys = {c.x[0], c.w[1] * c.group};
    ys.insert(ys.end(), out.begin(), out.end());
    expectClose(run(n, {&x, &w, &b}), Shape(ys),
                naiveConvTranspose(x, w, &b, c.group, c.strides, c.dilations, padsBegin, out));
  }
}

TEST(RefNnConvTranspose, OutputShapeAndSameUpper) {
  Tensor x = randomTensor({1, 2, 4, 5}, 401);
  Tensor w = randomTensor({2, 3, 3, 3}, 402);
  // output_shape [9, 11] with stride 2: total pad = 2 * (in - 1) + 3 - out = {0, 0}.
  Node n = makeNode("ConvTranspose", {&x, &w});
  setInts(n, "strides", {2, 2});
  setInts(n, "output_shape", {9, 10});
  // total = {0, 1}: the odd pad goes first (not SAME_UPPER).
  expectClose(run(n, {&x, &w}), {1, 3, 9, 10},
              naiveConvTranspose(x, w, nullptr, 1, {2, 2}, {1, 1}, {0, 1}, {9, 10}));
  Node s = makeNode("ConvTranspose", {&x, &w});
  setInts(s, "strides", {2, 2});
  s.attrs.set("auto_pad", Attribute::String("SAME_UPPER"));
  // out = in * s = {8, 10}; total = {1, 1}; SAME_UPPER puts the odd pad at the end.
  expectClose(run(s, {&x, &w}), {1, 3, 8, 10},
              naiveConvTranspose(x, w, nullptr, 1, {2, 2}, {1, 1}, {0, 0}, {8, 10}));
}

// ---- Pooling ----------------------------------------------------------------------------------

TEST(RefNnPool, MaxPoolHandComputedWithIndices) {
  Tensor x = tensorOf({1, 1, 4, 4}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16});
  Node n = makeNode("MaxPool", {&x}, 2);
  setInts(n, "kernel_shape", {2, 2});
  setInts(n, "strides", {2, 2});
  std::vector<Tensor> outs;
  ASSERT_TRUE(ref::runNode(n, {&x}, outs).ok());
  expectClose(outs[0], {1, 1, 2, 2}, {6, 8, 14, 16});
  ASSERT_EQ(outs[1].dtype(), DataType::kInt64);
  const int64_t* idx = outs[1].data<int64_t>();
  EXPECT_EQ(idx[0], 5);
  EXPECT_EQ(idx[1], 7);
  EXPECT_EQ(idx[2], 13);
  EXPECT_EQ(idx[3], 15);
  // storage_order 1: column-major within the plane (ONNX doc example values).
  n.attrs.set("storage_order", Attribute::Int(1));
  ASSERT_TRUE(ref::runNode(n, {&x}, outs).ok());
  EXPECT_EQ(outs[1].data<int64_t>()[0], 1 + 1 * 4);
  EXPECT_EQ(outs[1].data<int64_t>()[3], 3 + 3 * 4);
}

TEST(RefNnPool, MaxPoolMatchesNaive) {
  Tensor x = randomTensor({2, 3, 13, 11}, 501);
  Node n = makeNode("MaxPool", {&x}, 2);
  setInts(n, "kernel_shape", {3, 2});
  setInts(n, "strides", {2, 3});
  setInts(n, "dilations", {2, 1});
  setInts(n, "pads", {1, 1, 2, 1});
  Window win{{3, 2}, {2, 3}, {2, 1}, {1, 1}, {2, 1}};
  const std::vector<int64_t> out = {naiveOutSize(13, 3, 2, 2, 1, 2),
                                    naiveOutSize(11, 2, 3, 1, 1, 1)};
  std::vector<int64_t> argmax;
  const auto expected = naivePool(x, NaivePool::kMax, win, out, &argmax);
  std::vector<Tensor> outs;
  ASSERT_TRUE(ref::runNode(n, {&x}, outs).ok());
  expectClose(outs[0], {2, 3, out[0], out[1]}, expected);
  for (size_t i = 0; i < argmax.size(); ++i) ASSERT_EQ(outs[1].data<int64_t>()[i], argmax[i]) << i;
}

TEST(RefNnPool, AveragePoolCeilModeOnnxExample) {
  std::vector<float> xv(16);
  for (int i = 0; i < 16; ++i) xv[static_cast<size_t>(i)] = static_cast<float>(i + 1);
  Tensor x = tensorOf({1, 1, 4, 4}, xv);
  Node n = makeNode("AveragePool", {&x});
  setInts(n, "kernel_shape", {3, 3});
  setInts(n, "strides", {2, 2});
  n.attrs.set("ceil_mode", Attribute::Int(1));
  expectClose(run(n, {&x}), {1, 1, 2, 2}, {6, 7.5f, 12, 13.5f});
  Node m = makeNode("MaxPool", {&x});
  setInts(m, "kernel_shape", {3, 3});
  setInts(m, "strides", {2, 2});
  m.attrs.set("ceil_mode", Attribute::Int(1));
  expectClose(run(m, {&x}), {1, 1, 2, 2}, {11, 12, 15, 16});
}

TEST(RefNnPool, AveragePoolMatchesNaive) {
  Tensor x = randomTensor({1, 4, 9, 13}, 502);
  for (int includePad = 0; includePad < 2; ++includePad) {
    SCOPED_TRACE(includePad);
    Node n = makeNode("AveragePool", {&x});
    setInts(n, "kernel_shape", {3, 4});
    setInts(n, "strides", {2, 3});
    setInts(n, "pads", {1, 2, 2, 1});
    n.attrs.set("count_include_pad", Attribute::Int(includePad));
    Window win{{3, 4}, {2, 3}, {1, 1}, {1, 2}, {2, 1}};
    const std::vector<int64_t> out = {naiveOutSize(9, 3, 2, 1, 1, 2),
                                      naiveOutSize(13, 4, 3, 1, 2, 1)};
    expectClose(
        run(n, {&x}), {1, 4, out[0], out[1]},
        naivePool(x, includePad ? NaivePool::kAvgIncludePad : NaivePool::kAvg, win, out, nullptr));
  }
}

TEST(RefNnPool, AveragePoolSameUpper1DAnd3D) {
  Tensor x1 = randomTensor({2, 3, 13}, 503);
  Node n1 = makeNode("AveragePool", {&x1});
  setInts(n1, "kernel_shape", {4});
  setInts(n1, "strides", {3});
  n1.attrs.set("auto_pad", Attribute::String("SAME_UPPER"));
  // out = ceil(13 / 3) = 5; total pad = 4 * 3 + 4 - 13 = 3 -> begin 1, end 2.
  expectClose(run(n1, {&x1}), {2, 3, 5},
              naivePool(x1, NaivePool::kAvg, {{4}, {3}, {1}, {1}, {2}}, {5}, nullptr));
  Tensor x3 = randomTensor({1, 2, 5, 6, 7}, 504);
  Node n3 = makeNode("MaxPool", {&x3});
  setInts(n3, "kernel_shape", {2, 3, 2});
  setInts(n3, "strides", {2, 2, 2});
  expectClose(
      run(n3, {&x3}), {1, 2, 2, 2, 3},
      naivePool(x3, NaivePool::kMax, {{2, 3, 2}, {2, 2, 2}, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}},
                {2, 2, 3}, nullptr));
}

TEST(RefNnPool, LpPoolMatchesNaive) {
  Tensor x = randomTensor({1, 3, 7, 9}, 505);
  Node n = makeNode("LpPool", {&x});
  setInts(n, "kernel_shape", {3, 3});
  setInts(n, "pads", {1, 1, 1, 1});
  n.attrs.set("p", Attribute::Int(2));
  expectClose(
      run(n, {&x}), {1, 3, 7, 9},
      naivePool(x, NaivePool::kLp2, {{3, 3}, {1, 1}, {1, 1}, {1, 1}, {1, 1}}, {7, 9}, nullptr));
}

TEST(RefNnPool, GlobalPools) {
  Tensor x = randomTensor({2, 3, 5, 7}, 506);
  Tensor avg = run(makeNode("GlobalAveragePool", {&x}), {&x});
  Tensor mx = run(makeNode("GlobalMaxPool", {&x}), {&x});
  ASSERT_EQ(avg.shape(), (Shape{2, 3, 1, 1}));
  ASSERT_EQ(mx.shape(), (Shape{2, 3, 1, 1}));
  for (int64_t p = 0; p < 6; ++p) {
    double s = 0.0;
    float m = -1e30f;
    for (int64_t i = 0; i < 35; ++i) {
      s += x.data<float>()[p * 35 + i];
      m = std::max(m, x.data<float>()[p * 35 + i]);
    }
    EXPECT_NEAR(avg.data<float>()[p], s / 35.0, 1e-5);
    EXPECT_EQ(mx.data<float>()[p], m);
  }
}

// ---- Normalisation ----------------------------------------------------------------------------

TEST(RefNnNorm, BatchNormalizationMatchesFormula) {
  Tensor x = randomTensor({2, 3, 5, 4}, 601);
  Tensor scale = randomTensor({3}, 602);
  Tensor bias = randomTensor({3}, 603);
  Tensor mean = randomTensor({3}, 604);
  Tensor var = randomTensor({3}, 605, 0.1f, 2.f);
  Node n = makeNode("BatchNormalization", {&x, &scale, &bias, &mean, &var});
  n.attrs.set("epsilon", Attribute::Float(1e-3f));
  std::vector<float> expected(static_cast<size_t>(x.numel()));
  for (int64_t i = 0; i < x.numel(); ++i) {
    const int64_t c = (i / 20) % 3;
    expected[static_cast<size_t>(i)] =
        static_cast<float>((x.data<float>()[i] - mean.data<float>()[c]) /
                               std::sqrt(var.data<float>()[c] + 1e-3) * scale.data<float>()[c] +
                           bias.data<float>()[c]);
  }
  expectClose(run(n, {&x, &scale, &bias, &mean, &var}), x.shape(), expected);
  // Rank-2 input (N x C).
  Tensor x2 = randomTensor({4, 3}, 606);
  Tensor y2 = run(n, {&x2, &scale, &bias, &mean, &var});
  EXPECT_EQ(y2.shape(), x2.shape());
}

TEST(RefNnNorm, InstanceNormalizationMatchesNaive) {
  Tensor x = randomTensor({2, 3, 7, 5}, 611);
  Tensor scale = randomTensor({3}, 612);
  Tensor bias = randomTensor({3}, 613);
  std::vector<float> expected(static_cast<size_t>(x.numel()));
  for (int64_t p = 0; p < 6; ++p) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < 35; ++i) mean += x.data<float>()[p * 35 + i];
    mean /= 35;
    for (int64_t i = 0; i < 35; ++i) var += std::pow(x.data<float>()[p * 35 + i] - mean, 2);
    var /= 35;
    for (int64_t i = 0; i < 35; ++i)
      expected[static_cast<size_t>(p * 35 + i)] =
          static_cast<float>((x.data<float>()[p * 35 + i] - mean) / std::sqrt(var + 1e-5) *
                                 scale.data<float>()[p % 3] +
                             bias.data<float>()[p % 3]);
  }
  expectClose(run(makeNode("InstanceNormalization", {&x, &scale, &bias}), {&x, &scale, &bias}),
              x.shape(), expected);
}

TEST(RefNnNorm, LayerNormalizationWithStatsOutputs) {
  Tensor x = randomTensor({3, 4, 5}, 621);
  Tensor scale = randomTensor({4, 1}, 622);  // broadcast over the last dim
  Tensor bias = randomTensor({5}, 623);
  Node n = makeNode("LayerNormalization", {&x, &scale, &bias}, 3);
  n.attrs.set("axis", Attribute::Int(1));
  std::vector<Tensor> outs;
  Status s = ref::runNode(n, {&x, &scale, &bias}, outs);
  ASSERT_TRUE(s.ok()) << s.toString();
  std::vector<float> expected(60), means(3), invs(3);
  for (int64_t o = 0; o < 3; ++o) {
    double mean = 0, var = 0;
    for (int64_t i = 0; i < 20; ++i) mean += x.data<float>()[o * 20 + i];
    mean /= 20;
    for (int64_t i = 0; i < 20; ++i) var += std::pow(x.data<float>()[o * 20 + i] - mean, 2);
    var /= 20;
    const double inv = 1 / std::sqrt(var + 1e-5);
    means[static_cast<size_t>(o)] = static_cast<float>(mean);
    invs[static_cast<size_t>(o)] = static_cast<float>(inv);
    for (int64_t i = 0; i < 20; ++i)
      expected[static_cast<size_t>(o * 20 + i)] = static_cast<float>(
          (x.data<float>()[o * 20 + i] - mean) * inv * scale.data<float>()[i / 5] +
          bias.data<float>()[i % 5]);
  }
  expectClose(outs[0], x.shape(), expected);
  expectClose(outs[1], {3, 1, 1}, means);
  expectClose(outs[2], {3, 1, 1}, invs);
}

TEST(RefNnNorm, LrnMatchesNaive) {
  Tensor x = randomTensor({2, 7, 3, 3}, 631);
  Node n = makeNode("LRN", {&x});
  n.attrs.set("size", Attribute::Int(4));
  n.attrs.set("alpha", Attribute::Float(0.02f));
  n.attrs.set("beta", Attribute::Float(0.7f));
  n.attrs.set("bias", Attribute::Float(1.5f));
  std::vector<float> expected(static_cast<size_t>(x.numel()));
  for (int64_t nn = 0; nn < 2; ++nn)
    for (int64_t c = 0; c < 7; ++c)
      for (int64_t i = 0; i < 9; ++i) {
        double sq = 0;
        for (int64_t cc = std::max<int64_t>(0, c - 1); cc <= std::min<int64_t>(6, c + 2); ++cc)
          sq += std::pow(x.data<float>()[(nn * 7 + cc) * 9 + i], 2);
        expected[static_cast<size_t>((nn * 7 + c) * 9 + i)] = static_cast<float>(
            x.data<float>()[(nn * 7 + c) * 9 + i] / std::pow(1.5 + 0.02 / 4 * sq, 0.7));
      }
  expectClose(run(n, {&x}), x.shape(), expected);
}

TEST(RefNnNorm, LpNormalization) {
  Tensor x = tensorOf({2, 3}, {3, 4, 0, 0, 0, 0});
  Node n = makeNode("LpNormalization", {&x});
  expectClose(run(n, {&x}), {2, 3}, {0.6f, 0.8f, 0, 0, 0, 0});
  n.attrs.set("p", Attribute::Int(1));
  n.attrs.set("axis", Attribute::Int(0));
  Tensor x2 = tensorOf({2, 2}, {1, -1, 3, 0});
  expectClose(run(n, {&x2}), {2, 2}, {0.25f, -1, 0.75f, 0});
}

// ---- Gemm / MatMul ----------------------------------------------------------------------------

TEST(RefNnGemm, MatchesNaiveWithTransposesAndBroadcastC) {
  const int64_t m = 7, k = 13, n = 5;
  Tensor a = randomTensor({m, k}, 701), aT = randomTensor({k, m}, 702);
  Tensor b = randomTensor({k, n}, 703), bT = randomTensor({n, k}, 704);
  const std::vector<Shape> cShapes = {Shape{}, Shape{n}, Shape{m, 1}, Shape{m, n}, Shape{1}};
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb)
      for (size_t ci = 0; ci <= cShapes.size(); ++ci) {
        SCOPED_TRACE(std::to_string(ta) + std::to_string(tb) + " C#" + std::to_string(ci));
        const Tensor& A = ta ? aT : a;
        const Tensor& B = tb ? bT : b;
        Tensor c = ci < cShapes.size() ? randomTensor(cShapes[ci], 705 + static_cast<uint32_t>(ci))
                                       : Tensor();
        const Tensor* cp = ci < cShapes.size() ? &c : nullptr;
        Node node = makeNode("Gemm", {&A, &B, cp});
        node.attrs.set("transA", Attribute::Int(ta));
        node.attrs.set("transB", Attribute::Int(tb));
        node.attrs.set("alpha", Attribute::Float(0.75f));
        node.attrs.set("beta", Attribute::Float(-1.5f));
        std::vector<float> expected(static_cast<size_t>(m * n));
        for (int64_t i = 0; i < m; ++i)
          for (int64_t j = 0; j < n; ++j) {
            double acc = 0;
            for (int64_t kk = 0; kk < k; ++kk)
              acc += static_cast<double>(ta ? A.data<float>()[kk * m + i]
                                            : A.data<float>()[i * k + kk]) *
                     (tb ? B.data<float>()[j * k + kk] : B.data<float>()[kk * n + j]);
            double cv = 0;
            if (cp) {
              const Shape& cs = c.shape();
              const int64_t ci2 = cs.rank() == 2
                                      ? (cs[0] == 1 ? 0 : i) * cs[1] + (cs[1] == 1 ? 0 : j)
                                      : (cs.rank() == 1 && cs[0] != 1 ? j : 0);
              cv = c.data<float>()[ci2];
            }
            expected[static_cast<size_t>(i * n + j)] = static_cast<float>(0.75 * acc - 1.5 * cv);
          }
        expectClose(run(node, {&A, &B, cp}), {m, n}, expected);
      }
}

TEST(RefNnMatMul, MatchesNaiveWithBroadcastAnd1D) {
  struct Case {
    std::vector<int64_t> a, b, y;
  } cases[] = {
      {{7, 13}, {13, 5}, {7, 5}}, {{2, 1, 3, 4}, {5, 4, 6}, {2, 5, 3, 6}},
      {{13}, {13, 5}, {5}},       {{3, 7, 13}, {13}, {3, 7}},
      {{13}, {13}, {}},           {{4, 3, 2}, {2, 9}, {4, 3, 9}},
  };
  uint32_t seed = 720;
  for (const Case& c : cases) {
    SCOPED_TRACE(Shape(c.a).toString() + " @ " + Shape(c.b).toString());
    Tensor a = randomTensor(Shape(c.a), seed++), b = randomTensor(Shape(c.b), seed++);
    // Brute force: promote to 4-D batched matrices by hand.
    const bool av = c.a.size() == 1, bv = c.b.size() == 1;
    std::vector<int64_t> a4 = c.a, b4 = c.b;
    if (av) a4.insert(a4.begin(), 1);
    if (bv) b4.push_back(1);
    while (a4.size() < 4) a4.insert(a4.begin(), 1);
    while (b4.size() < 4) b4.insert(b4.begin(), 1);
    const int64_t m = a4[2], k = a4[3], n = b4[3];
    std::vector<float> expected;
    for (int64_t i0 = 0; i0 < std::max(a4[0], b4[0]); ++i0)
      for (int64_t i1 = 0; i1 < std::max(a4[1], b4[1]); ++i1) {
        const float* am =
            a.data<float>() + ((a4[0] == 1 ? 0 : i0) * a4[1] + (a4[1] == 1 ? 0 : i1)) * m * k;
        const float* bm =
            b.data<float>() + ((b4[0] == 1 ? 0 : i0) * b4[1] + (b4[1] == 1 ? 0 : i1)) * k * n;
        const auto r = naiveMatMul2D(am, bm, m, k, n);
        expected.insert(expected.end(), r.begin(), r.end());
      }
    expectClose(run(makeNode("MatMul", {&a, &b}), {&a, &b}), Shape(c.y), expected);
  }
}

// ---- Softmax family ---------------------------------------------------------------------------

TEST(RefNnSoftmax, HandComputed) {
  Tensor x = tensorOf({1, 3}, {1, 2, 3});
  const double e = std::exp(1.0) + std::exp(2.0) + std::exp(3.0);
  expectClose(run(makeNode("Softmax", {&x}), {&x}), {1, 3},
              {static_cast<float>(std::exp(1.0) / e), static_cast<float>(std::exp(2.0) / e),
               static_cast<float>(std::exp(3.0) / e)});
  expectClose(run(makeNode("LogSoftmax", {&x}), {&x}), {1, 3},
              {static_cast<float>(1 - std::log(e)), static_cast<float>(2 - std::log(e)),
               static_cast<float>(3 - std::log(e))});
  Tensor h = tensorOf({2, 3}, {1, 3, 3, -1, -2, -5});
  expectClose(run(makeNode("Hardmax", {&h}), {&h}), {2, 3}, {0, 1, 0, 1, 0, 0});
}

TEST(RefNnSoftmax, SingleAxisVersusCoerce2D) {
  Tensor x = randomTensor({2, 3, 4}, 801, -3.f, 3.f);
  // Single axis 1 (opset 13): normalise along the 3 entries of dim 1.
  Node n = makeNode("Softmax", {&x});
  n.attrs.set("axis", Attribute::Int(1));
  std::vector<float> single(24), coerced(24);
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t i = 0; i < 4; ++i) {
      double s = 0;
      for (int64_t c = 0; c < 3; ++c) s += std::exp(x.data<float>()[(a * 3 + c) * 4 + i]);
      for (int64_t c = 0; c < 3; ++c)
        single[static_cast<size_t>((a * 3 + c) * 4 + i)] =
            static_cast<float>(std::exp(x.data<float>()[(a * 3 + c) * 4 + i]) / s);
    }
  expectClose(run(n, {&x}), x.shape(), single);
  // coerce_2d with the default axis 1: rows of 12.
  Node c2 = makeNode("Softmax", {&x});
  c2.attrs.set("coerce_2d", Attribute::Int(1));
  for (int64_t a = 0; a < 2; ++a) {
    double s = 0;
    for (int64_t i = 0; i < 12; ++i) s += std::exp(x.data<float>()[a * 12 + i]);
    for (int64_t i = 0; i < 12; ++i)
      coerced[static_cast<size_t>(a * 12 + i)] =
          static_cast<float>(std::exp(x.data<float>()[a * 12 + i]) / s);
  }
  expectClose(run(c2, {&x}), x.shape(), coerced);
  // Default axis without coerce_2d is -1.
  Tensor y = run(makeNode("LogSoftmax", {&x}), {&x});
  for (int64_t r = 0; r < 6; ++r) {
    double s = 0;
    for (int64_t i = 0; i < 4; ++i) s += std::exp(y.data<float>()[r * 4 + i]);
    EXPECT_NEAR(s, 1.0, 1e-5);
  }
}

// ---- Resize -----------------------------------------------------------------------------------

Node resizeNode(const Tensor* x, const Tensor* roi, const Tensor* scales, const Tensor* sizes,
                const std::string& mode, const std::string& ctm) {
  Node n = makeNode("Resize", {x, roi, scales, sizes});
  n.attrs.set("mode", Attribute::String(mode));
  n.attrs.set("coordinate_transformation_mode", Attribute::String(ctm));
  return n;
}

TEST(RefNnResize, OnnxDocExamples) {
  Tensor x = tensorOf({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor s2 = tensorOf({4}, {1, 1, 2, 2});
  expectClose(
      run(resizeNode(&x, nullptr, &s2, nullptr, "linear", "half_pixel"), {&x, nullptr, &s2}),
      {1, 1, 4, 4},
      {1, 1.25f, 1.75f, 2, 1.5f, 1.75f, 2.25f, 2.5f, 2.5f, 2.75f, 3.25f, 3.5f, 3, 3.25f, 3.75f, 4});
  expectClose(
      run(resizeNode(&x, nullptr, &s2, nullptr, "linear", "align_corners"), {&x, nullptr, &s2}),
      {1, 1, 4, 4},
      {1, 4.f / 3, 5.f / 3, 2, 5.f / 3, 2, 7.f / 3, 8.f / 3, 7.f / 3, 8.f / 3, 3, 10.f / 3, 3,
       10.f / 3, 11.f / 3, 4});
  Tensor s23 = tensorOf({4}, {1, 1, 2, 3});
  expectClose(
      run(resizeNode(&x, nullptr, &s23, nullptr, "nearest", "half_pixel"), {&x, nullptr, &s23}),
      {1, 1, 4, 6}, {1, 1, 1, 2, 2, 2, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 3, 3, 3, 4, 4, 4});
  Tensor xd = tensorOf({1, 1, 2, 4}, {1, 2, 3, 4, 5, 6, 7, 8});
  Tensor s06 = tensorOf({4}, {1, 1, 0.6f, 0.6f});
  expectClose(
      run(resizeNode(&xd, nullptr, &s06, nullptr, "linear", "half_pixel"), {&xd, nullptr, &s06}),
      {1, 1, 1, 2}, {2.6666665f, 4.3333331f});
  expectClose(
      run(resizeNode(&xd, nullptr, &s06, nullptr, "nearest", "asymmetric"), {&xd, nullptr, &s06}),
      {1, 1, 1, 2}, {1, 3});
}

TEST(RefNnResize, SizesAndNearestModes) {
  Tensor x = tensorOf({1, 1, 1, 4}, {10, 20, 30, 40});
  Tensor sizes = int64Tensor({4}, {1, 1, 1, 8});
  struct {
    const char* mode;
    std::vector<float> expected;
  } cases[] = {
      // half_pixel, scale 2: x_orig = (o + 0.5) / 2 - 0.5 = -0.25, 0.25, 0.75, 1.25, ...
      {"round_prefer_floor", {10, 10, 20, 20, 30, 30, 40, 40}},
      {"floor", {10, 10, 10, 20, 20, 30, 30, 40}},
      {"ceil", {10, 20, 20, 30, 30, 40, 40, 40}},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.mode);
    Node n = resizeNode(&x, nullptr, nullptr, &sizes, "nearest", "half_pixel");
    n.attrs.set("nearest_mode", Attribute::String(c.mode));
    expectClose(run(n, {&x, nullptr, nullptr, &sizes}), {1, 1, 1, 8}, c.expected);
  }
  // Ties: asymmetric scale 0.5 maps o to 2 * o exactly; scale 4/3 gives x_orig = 0.75 * o.
  Tensor sizes3 = int64Tensor({4}, {1, 1, 1, 3});
  Node n = resizeNode(&x, nullptr, nullptr, &sizes3, "nearest", "align_corners");
  // align_corners: x_orig = o * 3 / 2 = 0, 1.5, 3.
  n.attrs.set("nearest_mode", Attribute::String("round_prefer_ceil"));
  expectClose(run(n, {&x, nullptr, nullptr, &sizes3}), {1, 1, 1, 3}, {10, 30, 40});
  n.attrs.set("nearest_mode", Attribute::String("round_prefer_floor"));
  expectClose(run(n, {&x, nullptr, nullptr, &sizes3}), {1, 1, 1, 3}, {10, 20, 40});
}

/// Separable 1-D interpolation along one axis with the ONNX reference's edge padding.
std::vector<float> interpAxis(const std::vector<float>& in, const std::vector<int64_t>& dims,
                              size_t axis, int64_t outLen, float scale, const std::string& mode,
                              const std::string& ctm, float a, std::vector<int64_t>* outDims) {
  *outDims = dims;
  (*outDims)[axis] = outLen;
  const int64_t len = dims[axis];
  int64_t inner = 1;
  for (size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
  const int64_t outer = product(dims) / (len * inner);
  std::vector<float> out(static_cast<size_t>(outer * outLen * inner));
  auto at = [&](int64_t o, int64_t i, int64_t idx) {
    idx = std::min(std::max<int64_t>(idx, 0), len - 1);
    return static_cast<double>(in[static_cast<size_t>((o * len + idx) * inner + i)]);
  };
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      for (int64_t r = 0; r < outLen; ++r) {
        double xo;
        if (ctm == "align_corners")  // the unrounded resized length len * scale (ONNX reference)
          xo = outLen == 1 ? 0.0 : r * static_cast<double>(len - 1) / (len * scale - 1.0);
        else if (ctm == "asymmetric")
          xo = r / static_cast<double>(scale);
        else
          xo = (r + 0.5) / static_cast<double>(scale) - 0.5;
        const double x0 = std::floor(xo), t = xo - x0;
        const int64_t i0 = static_cast<int64_t>(x0);
        double v;
        if (mode == "linear") {
          v = at(o, i, i0) * (1 - t) + at(o, i, i0 + 1) * t;
        } else {  // cubic, Keys kernel with parameter a
          auto w = [a](double d) {
            d = std::fabs(d);
            if (d <= 1) return ((a + 2) * d - (a + 3)) * d * d + 1;
            if (d < 2) return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a;
            return 0.0;
          };
          v = 0;
          for (int64_t k = -1; k <= 2; ++k) v += w(t - static_cast<double>(k)) * at(o, i, i0 + k);
        }
        out[static_cast<size_t>((o * outLen + r) * inner + i)] = static_cast<float>(v);
      }
  return out;
}

TEST(RefNnResize, LinearAndCubicMatchSeparableNaive) {
  Tensor x = randomTensor({2, 3, 7, 9}, 901);
  const struct {
    const char* mode;
    const char* ctm;
    float sh, sw;
  } cases[] = {{"linear", "half_pixel", 1.5f, 0.7f},
               {"linear", "asymmetric", 2.f, 3.f},
               {"linear", "align_corners", 1.3f, 2.2f},
               {"cubic", "half_pixel", 2.f, 0.6f},
               {"cubic", "asymmetric", 1.7f, 1.25f}};
  for (const auto& c : cases) {
    SCOPED_TRACE(std::string(c.mode) + " " + c.ctm);
    Tensor scales = tensorOf({4}, {1, 1, c.sh, c.sw});
    Node n = resizeNode(&x, nullptr, &scales, nullptr, c.mode, c.ctm);
    const int64_t oh = static_cast<int64_t>(std::floor(7 * c.sh)),
                  ow = static_cast<int64_t>(std::floor(9 * c.sw));
    std::vector<int64_t> d1, d2;
    const auto pass1 =
        interpAxis(valuesOf(x), {2, 3, 7, 9}, 2, oh, c.sh, c.mode, c.ctm, -0.75f, &d1);
    const auto pass2 = interpAxis(pass1, d1, 3, ow, c.sw, c.mode, c.ctm, -0.75f, &d2);
    expectClose(run(n, {&x, nullptr, &scales}), Shape(d2), pass2, 1e-4f);
  }
}

TEST(RefNnResize, TfCropAndResizeExtrapolates) {
  std::vector<float> xv(16);
  for (int i = 0; i < 16; ++i) xv[static_cast<size_t>(i)] = static_cast<float>(i + 1);
  Tensor x = tensorOf({1, 1, 4, 4}, xv);
  Tensor roi = tensorOf({8}, {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f});
  Tensor sizes = int64Tensor({4}, {1, 1, 3, 3});
  Node n = resizeNode(&x, &roi, nullptr, &sizes, "linear", "tf_crop_and_resize");
  n.attrs.set("extrapolation_value", Attribute::Float(10.f));
  // ONNX doc example resize_tf_crop_and_resize_extrapolation_value.
  expectClose(run(n, {&x, &roi, nullptr, &sizes}), {1, 1, 3, 3},
              {7.6000004f, 10, 10, 12.400001f, 10, 10, 10, 10, 10}, 1e-5f);
}

// ---- DepthToSpace / SpaceToDepth, PRelu
// ----------------------------------------------------------

TEST(RefNnSpaceDepth, DepthToSpaceModesAndRoundTrip) {
  std::vector<float> xv(48);
  for (int i = 0; i < 48; ++i) xv[static_cast<size_t>(i)] = static_cast<float>(i);
  Tensor x = tensorOf({1, 8, 2, 3}, xv);
  Node dcr = makeNode("DepthToSpace", {&x});
  dcr.attrs.set("blocksize", Attribute::Int(2));
  Tensor y = run(dcr, {&x});
  expectClose(y, {1, 2, 4, 6}, {0,  12, 1,  13, 2,  14, 24, 36, 25, 37, 26, 38, 3,  15, 4,  16,
                                5,  17, 27, 39, 28, 40, 29, 41, 6,  18, 7,  19, 8,  20, 30, 42,
                                31, 43, 32, 44, 9,  21, 10, 22, 11, 23, 33, 45, 34, 46, 35, 47});
  Node crd = dcr;
  crd.attrs.set("mode", Attribute::String("CRD"));
  expectClose(run(crd, {&x}), {1, 2, 4, 6},
              {0,  6,  1,  7,  2,  8,  12, 18, 13, 19, 14, 20, 3,  9,  4,  10,
               5,  11, 15, 21, 16, 22, 17, 23, 24, 30, 25, 31, 26, 32, 36, 42,
               37, 43, 38, 44, 27, 33, 28, 34, 29, 35, 39, 45, 40, 46, 41, 47});
  Node s2d = makeNode("SpaceToDepth", {&y});
  s2d.attrs.set("blocksize", Attribute::Int(2));
  expectClose(run(s2d, {&y}), x.shape(), xv);
}

TEST(RefNnMisc, PReluBroadcastsSlope) {
  Tensor x = randomTensor({2, 3, 4, 5}, 1001);
  Tensor slope = tensorOf({3, 1, 1}, {0.1f, 0.2f, 0.3f});
  std::vector<float> expected(120);
  for (int64_t i = 0; i < 120; ++i) {
    const float v = x.data<float>()[i];
    expected[static_cast<size_t>(i)] = v < 0 ? v * slope.data<float>()[(i / 20) % 3] : v;
  }
  expectClose(run(makeNode("PRelu", {&x, &slope}), {&x, &slope}), x.shape(), expected);
  Tensor s5 = randomTensor({5}, 1002);
  Tensor y = run(makeNode("PRelu", {&x, &s5}), {&x, &s5});
  for (int64_t i = 0; i < 120; ++i) {
    const float v = x.data<float>()[i];
    EXPECT_FLOAT_EQ(y.data<float>()[i], v < 0 ? v * s5.data<float>()[i % 5] : v);
  }
}

// ---- Fused ops versus the unfused chains --------------------------------------------------------

TEST(RefNnFused, FusedConvMatchesConvAddRelu) {
  Tensor x = randomTensor({2, 4, 9, 11}, 1101);
  Tensor w = randomTensor({6, 2, 3, 3}, 1102);
  Tensor b = randomTensor({6}, 1103);
  Node conv = makeNode("Conv", {&x, &w, &b});
  conv.attrs.set("group", Attribute::Int(2));
  setInts(conv, "strides", {2, 1});
  setInts(conv, "pads", {1, 1, 1, 1});
  Tensor y = run(conv, {&x, &w, &b});
  Tensor z = randomTensor(y.shape(), 1104);
  Tensor sum = run(makeNode("Add", {&y, &z}), {&y, &z});
  Tensor expected = run(makeNode("Relu", {&sum}), {&sum});

  Node fused = conv;
  fused.opType = "FusedConv";
  fused.domain = graph::kEdgeInferDomain;
  fused.inputs.push_back("in3");
  fused.attrs.set("activation", Attribute::String("Relu"));
  Tensor got = run(fused, {&x, &w, &b, &z});
  ASSERT_EQ(got.shape(), expected.shape());
  for (int64_t i = 0; i < got.numel(); ++i)
    ASSERT_EQ(got.data<float>()[i], expected.data<float>()[i]) << i;  // bit-exact

  // No residual, LeakyRelu with its default alpha (0.01), depthwise.
  Tensor wd = randomTensor({4, 1, 5, 5}, 1105);
  Node dw = makeNode("Conv", {&x, &wd});
  dw.attrs.set("group", Attribute::Int(4));
  setInts(dw, "pads", {2, 2, 2, 2});
  Tensor yd = run(dw, {&x, &wd});
  Tensor leaky = run(makeNode("LeakyRelu", {&yd}), {&yd});
  Node fdw = dw;
  fdw.opType = "FusedConv";
  fdw.domain = graph::kEdgeInferDomain;
  fdw.attrs.set("activation", Attribute::String("LeakyRelu"));
  Tensor got2 = run(fdw, {&x, &wd});
  for (int64_t i = 0; i < got2.numel(); ++i)
    ASSERT_EQ(got2.data<float>()[i], leaky.data<float>()[i]) << i;
}

TEST(RefNnFused, FusedConvClipMatchesClip) {
  Tensor x = randomTensor({1, 3, 7, 7}, 1111, -3.f, 3.f);
  Tensor w = randomTensor({5, 3, 3, 3}, 1112);
  Tensor lo = tensorOf({}, {0.f}), hi = tensorOf({}, {6.f});
  Tensor y = run(makeNode("Conv", {&x, &w}), {&x, &w});
  Tensor expected = run(makeNode("Clip", {&y, &lo, &hi}), {&y, &lo, &hi});
  Node f = fusedNode("FusedConv", {&x, &w});
  f.attrs.set("activation", Attribute::String("Clip"));
  f.attrs.set("activation_alpha", Attribute::Float(0.f));
  f.attrs.set("activation_beta", Attribute::Float(6.f));
  expectClose(run(f, {&x, &w}), y.shape(), valuesOf(expected), 0.f);
}

TEST(RefNnFused, FusedGemmAndMatMulMatchUnfused) {
  Tensor a = randomTensor({5, 13}, 1121), b = randomTensor({7, 13}, 1122),
         c = randomTensor({7}, 1123);
  Node g = makeNode("Gemm", {&a, &b, &c});
  g.attrs.set("transB", Attribute::Int(1));
  g.attrs.set("alpha", Attribute::Float(0.5f));
  Tensor y = run(g, {&a, &b, &c});
  Tensor expected = run(makeNode("Sigmoid", {&y}), {&y});
  Node fg = g;
  fg.opType = "FusedGemm";
  fg.domain = graph::kEdgeInferDomain;
  fg.attrs.set("activation", Attribute::String("Sigmoid"));
  expectClose(run(fg, {&a, &b, &c}), {5, 7}, valuesOf(expected), 1e-6f);

  Tensor ma = randomTensor({2, 3, 13}, 1124), mb = randomTensor({13, 9}, 1125),
         bias = randomTensor({9}, 1126);
  Tensor mm = run(makeNode("MatMul", {&ma, &mb}), {&ma, &mb});
  Tensor added = run(makeNode("Add", {&mm, &bias}), {&mm, &bias});
  Tensor relu = run(makeNode("Relu", {&added}), {&added});
  Node fm = fusedNode("FusedMatMul", {&ma, &mb, &bias});
  fm.attrs.set("activation", Attribute::String("Relu"));
  expectClose(run(fm, {&ma, &mb, &bias}), {2, 3, 9}, valuesOf(relu), 0.f);
  // No bias, no activation: plain MatMul.
  expectClose(run(fusedNode("FusedMatMul", {&ma, &mb}), {&ma, &mb}), {2, 3, 9}, valuesOf(mm), 0.f);
}

TEST(RefNnFused, EveryActivationNameRunsAndMatchesActivationH) {
  Tensor a = randomTensor({3, 4}, 1131, -3.f, 3.f), b = randomTensor({4, 5}, 1132);
  Tensor plain = run(makeNode("MatMul", {&a, &b}), {&a, &b});
  for (const char* name : {"", "Relu", "LeakyRelu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish",
                           "Tanh", "Elu", "Selu", "Softplus", "SiLU"}) {
    SCOPED_TRACE(name);
    ref::Activation act;
    ASSERT_TRUE(ref::parseActivation(name, &act));
    Node n = fusedNode("FusedMatMul", {&a, &b});
    n.attrs.set("activation", Attribute::String(name));
    n.attrs.set("activation_alpha", Attribute::Float(0.3f));
    n.attrs.set("activation_beta", Attribute::Float(0.9f));
    Tensor y = run(n, {&a, &b});
    for (int64_t i = 0; i < y.numel(); ++i)
      ASSERT_EQ(y.data<float>()[i], ref::applyActivation(plain.data<float>()[i], act, 0.3f, 0.9f));
  }
}

// ---- Shape inference with unknown dims ----------------------------------------------------------

graph::InferValue symbolic(DataType t, std::vector<int64_t> dims, bool known = true) {
  graph::InferValue v;
  v.dtype = t;
  v.shape = Shape(std::move(dims));
  v.shapeKnown = known;
  return v;
}

TEST(RefNnShape, PropagatesUnknownDimsAndRanks) {
  const DataType f = DataType::kFloat32;
  Node conv = makeNode("Conv", {nullptr, nullptr});
  conv.inputs = {"x", "w"};
  setInts(conv, "strides", {2, 2});
  setInts(conv, "pads", {1, 1, 1, 1});
  graph::InferContext c1(conv, {symbolic(f, {-1, 3, -1, 32}), symbolic(f, {8, 3, 3, 3})});
  ASSERT_TRUE(graph::inferNode(c1).ok());
  EXPECT_EQ(c1.outputs[0].shape, (Shape{-1, 8, -1, 16}));
  graph::InferContext c2(conv, {symbolic(f, {}, false), symbolic(f, {8, 3, 3, 3})});
  ASSERT_TRUE(graph::inferNode(c2).ok());
  EXPECT_EQ(c2.outputs[0].shape, (Shape{-1, 8, -1, -1}));
  graph::InferContext c3(conv, {symbolic(f, {}, false), symbolic(f, {}, false)});
  ASSERT_TRUE(graph::inferNode(c3).ok());
  EXPECT_FALSE(c3.outputs[0].shapeKnown);

  Node mm = makeNode("MatMul", {nullptr, nullptr});
  mm.inputs = {"a", "b"};
  graph::InferContext m1(mm, {symbolic(f, {-1, 5, 7}), symbolic(f, {3, 1, 7, -1})});
  ASSERT_TRUE(graph::inferNode(m1).ok());
  EXPECT_EQ(m1.outputs[0].shape, (Shape{3, -1, 5, -1}));

  Node rs = makeNode("Resize", {nullptr, nullptr, nullptr});
  rs.inputs = {"x", "", "scales"};
  graph::InferContext r1(rs, {symbolic(f, {1, 3, -1, -1}), graph::InferValue{}, symbolic(f, {4})});
  ASSERT_TRUE(graph::inferNode(r1).ok());
  EXPECT_EQ(r1.outputs[0].shape, (Shape{-1, -1, -1, -1}));

  Node mp = makeNode("MaxPool", {nullptr}, 2);
  mp.inputs = {"x"};
  setInts(mp, "kernel_shape", {2, 2});
  graph::InferContext p1(mp, {symbolic(f, {}, false)});
  ASSERT_TRUE(graph::inferNode(p1).ok());
  EXPECT_EQ(p1.outputs[0].shape, (Shape{-1, -1, -1, -1}));
  EXPECT_EQ(p1.outputs[1].dtype, DataType::kInt64);
}

// ---- Negative tests -----------------------------------------------------------------------------

struct ConvInputs {
  Tensor x = randomTensor({1, 4, 8, 8}, 1);
  Tensor w = randomTensor({6, 4, 3, 3}, 2);
  Node node() { return makeNode("Conv", {&x, &w}); }
  std::vector<const Tensor*> in() { return {&x, &w}; }
};

TEST(RefNnConv, WeightRankMismatch_n) {
  ConvInputs c;
  c.w = randomTensor({6, 4, 3}, 3);
  expectFails(c.node(), c.in());
}

TEST(RefNnConv, ChannelMismatch_n) {
  ConvInputs c;
  c.w = randomTensor({6, 3, 3, 3}, 3);
  expectFails(c.node(), c.in());
}

TEST(RefNnConv, GroupDoesNotDivideChannels_n) {
  ConvInputs c;
  c.w = randomTensor({6, 1, 3, 3}, 3);
  Node n = c.node();
  n.attrs.set("group", Attribute::Int(3));
  expectFails(n, c.in());
}

TEST(RefNnConv, GroupDoesNotDivideOutputChannels_n) {
  ConvInputs c;
  c.w = randomTensor({5, 2, 3, 3}, 3);
  Node n = c.node();
  n.attrs.set("group", Attribute::Int(2));
  expectFails(n, c.in());
}

TEST(RefNnConv, ZeroGroup_n) {
  ConvInputs c;
  Node n = c.node();
  n.attrs.set("group", Attribute::Int(0));
  expectFails(n, c.in());
}

TEST(RefNnConv, BadPadsLength_n) {
  ConvInputs c;
  Node n = c.node();
  setInts(n, "pads", {1, 1});
  expectFails(n, c.in());
}

TEST(RefNnConv, NegativePads_n) {
  ConvInputs c;
  Node n = c.node();
  setInts(n, "pads", {-1, 0, 0, 0});
  expectFails(n, c.in());
}

TEST(RefNnConv, KernelBiggerThanPaddedInput_n) {
  ConvInputs c;
  c.w = randomTensor({6, 4, 9, 3}, 3);
  expectFails(c.node(), c.in());
}

TEST(RefNnConv, ZeroStride_n) {
  ConvInputs c;
  Node n = c.node();
  setInts(n, "strides", {0, 1});
  expectFails(n, c.in());
}

TEST(RefNnConv, NegativeStride_n) {
  ConvInputs c;
  Node n = c.node();
  setInts(n, "strides", {1, -2});
  expectFails(n, c.in());
}

TEST(RefNnConv, ZeroDilation_n) {
  ConvInputs c;
  Node n = c.node();
  setInts(n, "dilations", {0, 1});
  expectFails(n, c.in());
}

TEST(RefNnConv, HugeKernelShapeAttribute_n) {
  ConvInputs c;
  Node n = c.node();
  setInts(n, "kernel_shape", {int64_t{1} << 40, 3});
  expectFails(n, c.in());
}

TEST(RefNnConv, KernelShapeDisagreesWithWeight_n) {
  ConvInputs c;
  Node n = c.node();
  setInts(n, "kernel_shape", {3, 2});
  expectFails(n, c.in());
}

TEST(RefNnConv, UnknownAutoPad_n) {
  ConvInputs c;
  Node n = c.node();
  n.attrs.set("auto_pad", Attribute::String("SAME"));
  expectFails(n, c.in());
}

TEST(RefNnConv, BiasWrongSize_n) {
  ConvInputs c;
  Tensor b = randomTensor({5}, 4);
  expectFails(makeNode("Conv", {&c.x, &c.w, &b}), {&c.x, &c.w, &b});
}

TEST(RefNnConv, Rank2Input_n) {
  Tensor x = randomTensor({4, 8}, 1), w = randomTensor({6, 4}, 2);
  expectFails(makeNode("Conv", {&x, &w}), {&x, &w});
}

TEST(RefNnConv, MissingWeight_n) {
  ConvInputs c;
  expectFails(makeNode("Conv", {&c.x}), {&c.x});
}

TEST(RefNnConv, IntegerInput_n) {
  Tensor x = Tensor::zeros(DataType::kInt32, {1, 4, 8, 8});
  ConvInputs c;
  expectFails(makeNode("Conv", {&x, &c.w}), {&x, &c.w});
}

TEST(RefNnConv, FourSpatialDimsUnsupportedOnCpu_n) {
  Tensor x = randomTensor({1, 1, 2, 2, 2, 2}, 1), w = randomTensor({1, 1, 1, 1, 1, 1}, 2);
  expectFails(makeNode("Conv", {&x, &w}), {&x, &w}, ErrorCode::kUnsupported);
}

TEST(RefNnConvTranspose, OutputPaddingTooLarge_n) {
  Tensor x = randomTensor({1, 2, 3, 3}, 1), w = randomTensor({2, 2, 3, 3}, 2);
  Node n = makeNode("ConvTranspose", {&x, &w});
  setInts(n, "strides", {2, 2});
  setInts(n, "output_padding", {2, 0});
  expectFails(n, {&x, &w});
}

TEST(RefNnConvTranspose, ChannelMismatch_n) {
  Tensor x = randomTensor({1, 3, 3, 3}, 1), w = randomTensor({2, 2, 3, 3}, 2);
  expectFails(makeNode("ConvTranspose", {&x, &w}), {&x, &w});
}

TEST(RefNnConvTranspose, PadsLeaveNoOutput_n) {
  Tensor x = randomTensor({1, 2, 2, 2}, 1), w = randomTensor({2, 2, 1, 1}, 2);
  Node n = makeNode("ConvTranspose", {&x, &w});
  setInts(n, "pads", {1, 1, 1, 1});
  expectFails(n, {&x, &w});
}

TEST(RefNnPool, MissingKernelShape_n) {
  Tensor x = randomTensor({1, 2, 5, 5}, 1);
  expectFails(makeNode("MaxPool", {&x}), {&x});
}

TEST(RefNnPool, PadsNotSmallerThanKernel_n) {
  Tensor x = randomTensor({1, 2, 5, 5}, 1);
  Node n = makeNode("AveragePool", {&x});
  setInts(n, "kernel_shape", {2, 2});
  setInts(n, "pads", {2, 0, 0, 0});
  expectFails(n, {&x});
}

TEST(RefNnPool, KernelBiggerThanInput_n) {
  Tensor x = randomTensor({1, 2, 5, 5}, 1);
  Node n = makeNode("MaxPool", {&x});
  setInts(n, "kernel_shape", {6, 2});
  expectFails(n, {&x});
}

TEST(RefNnPool, KernelShapeWrongLength_n) {
  Tensor x = randomTensor({1, 2, 5, 5}, 1);
  Node n = makeNode("LpPool", {&x});
  setInts(n, "kernel_shape", {2, 2, 2});
  expectFails(n, {&x});
}

TEST(RefNnPool, GlobalPoolRank2_n) {
  Tensor x = randomTensor({2, 5}, 1);
  expectFails(makeNode("GlobalAveragePool", {&x}), {&x});
}

TEST(RefNnPool, ZeroStride_n) {
  Tensor x = randomTensor({1, 2, 5, 5}, 1);
  Node n = makeNode("MaxPool", {&x});
  setInts(n, "kernel_shape", {2, 2});
  setInts(n, "strides", {0, 0});
  expectFails(n, {&x});
}

TEST(RefNnNorm, BatchNormTrainingOutputs_n) {
  Tensor x = randomTensor({1, 3, 2, 2}, 1), p = randomTensor({3}, 2, 0.5f, 1.f);
  Node n = makeNode("BatchNormalization", {&x, &p, &p, &p, &p}, 3);
  expectFails(n, {&x, &p, &p, &p, &p}, ErrorCode::kUnsupported);
}

TEST(RefNnNorm, BatchNormWrongChannels_n) {
  Tensor x = randomTensor({1, 3, 2, 2}, 1), p = randomTensor({4}, 2, 0.5f, 1.f);
  expectFails(makeNode("BatchNormalization", {&x, &p, &p, &p, &p}), {&x, &p, &p, &p, &p});
}

TEST(RefNnNorm, InstanceNormWrongScale_n) {
  Tensor x = randomTensor({1, 3, 2, 2}, 1), s = randomTensor({2}, 2), b = randomTensor({3}, 3);
  expectFails(makeNode("InstanceNormalization", {&x, &s, &b}), {&x, &s, &b});
}

TEST(RefNnNorm, LayerNormAxisOutOfRange_n) {
  Tensor x = randomTensor({2, 3}, 1), s = randomTensor({3}, 2);
  Node n = makeNode("LayerNormalization", {&x, &s});
  n.attrs.set("axis", Attribute::Int(2));
  expectFails(n, {&x, &s});
}

TEST(RefNnNorm, LayerNormScaleNotBroadcastable_n) {
  Tensor x = randomTensor({2, 3}, 1), s = randomTensor({4}, 2);
  expectFails(makeNode("LayerNormalization", {&x, &s}), {&x, &s});
}

TEST(RefNnNorm, LrnMissingSize_n) {
  Tensor x = randomTensor({1, 3, 2, 2}, 1);
  expectFails(makeNode("LRN", {&x}), {&x});
}

TEST(RefNnNorm, LpNormalizationBadP_n) {
  Tensor x = randomTensor({2, 3}, 1);
  Node n = makeNode("LpNormalization", {&x});
  n.attrs.set("p", Attribute::Int(3));
  expectFails(n, {&x});
}

TEST(RefNnGemm, InnerDimensionMismatch_n) {
  Tensor a = randomTensor({3, 4}, 1), b = randomTensor({5, 6}, 2);
  expectFails(makeNode("Gemm", {&a, &b}), {&a, &b});
}

TEST(RefNnGemm, Rank3Operand_n) {
  Tensor a = randomTensor({2, 3, 4}, 1), b = randomTensor({4, 6}, 2);
  expectFails(makeNode("Gemm", {&a, &b}), {&a, &b});
}

TEST(RefNnGemm, CNotBroadcastable_n) {
  Tensor a = randomTensor({3, 4}, 1), b = randomTensor({4, 6}, 2), c = randomTensor({3}, 3);
  expectFails(makeNode("Gemm", {&a, &b, &c}), {&a, &b, &c});
}

TEST(RefNnMatMul, InnerDimensionMismatch_n) {
  Tensor a = randomTensor({3, 4}, 1), b = randomTensor({5, 6}, 2);
  expectFails(makeNode("MatMul", {&a, &b}), {&a, &b});
}

TEST(RefNnMatMul, BatchNotBroadcastable_n) {
  Tensor a = randomTensor({2, 3, 4}, 1), b = randomTensor({3, 4, 6}, 2);
  expectFails(makeNode("MatMul", {&a, &b}), {&a, &b});
}

TEST(RefNnSoftmax, AxisOutOfRange_n) {
  Tensor x = randomTensor({2, 3}, 1);
  Node n = makeNode("Softmax", {&x});
  n.attrs.set("axis", Attribute::Int(2));
  expectFails(n, {&x});
}

TEST(RefNnResize, BothScalesAndSizes_n) {
  Tensor x = randomTensor({1, 1, 2, 2}, 1), s = tensorOf({4}, {1, 1, 2, 2});
  Tensor z = int64Tensor({4}, {1, 1, 4, 4});
  expectFails(resizeNode(&x, nullptr, &s, &z, "nearest", "asymmetric"), {&x, nullptr, &s, &z});
}

TEST(RefNnResize, NeitherScalesNorSizes_n) {
  Tensor x = randomTensor({1, 1, 2, 2}, 1);
  expectFails(resizeNode(&x, nullptr, nullptr, nullptr, "nearest", "asymmetric"), {&x});
}

TEST(RefNnResize, NegativeScale_n) {
  Tensor x = randomTensor({1, 1, 2, 2}, 1), s = tensorOf({4}, {1, 1, -2, 2});
  expectFails(resizeNode(&x, nullptr, &s, nullptr, "nearest", "asymmetric"), {&x, nullptr, &s});
}

TEST(RefNnResize, ScalesWrongLength_n) {
  Tensor x = randomTensor({1, 1, 2, 2}, 1), s = tensorOf({2}, {2, 2});
  expectFails(resizeNode(&x, nullptr, &s, nullptr, "linear", "half_pixel"), {&x, nullptr, &s});
}

TEST(RefNnResize, UnknownMode_n) {
  Tensor x = randomTensor({1, 1, 2, 2}, 1), s = tensorOf({4}, {1, 1, 2, 2});
  expectFails(resizeNode(&x, nullptr, &s, nullptr, "bilinear", "half_pixel"), {&x, nullptr, &s});
}

TEST(RefNnResize, CropAndResizeWithoutRoi_n) {
  Tensor x = randomTensor({1, 1, 2, 2}, 1), s = tensorOf({4}, {1, 1, 2, 2});
  expectFails(resizeNode(&x, nullptr, &s, nullptr, "linear", "tf_crop_and_resize"),
              {&x, nullptr, &s});
}

TEST(RefNnSpaceDepth, DepthToSpaceChannelsNotDivisible_n) {
  Tensor x = randomTensor({1, 6, 2, 2}, 1);
  Node n = makeNode("DepthToSpace", {&x});
  n.attrs.set("blocksize", Attribute::Int(2));
  expectFails(n, {&x});
}

TEST(RefNnSpaceDepth, SpaceToDepthSpatialNotDivisible_n) {
  Tensor x = randomTensor({1, 2, 5, 4}, 1);
  Node n = makeNode("SpaceToDepth", {&x});
  n.attrs.set("blocksize", Attribute::Int(2));
  expectFails(n, {&x});
}

TEST(RefNnMisc, PReluSlopeNotBroadcastable_n) {
  Tensor x = randomTensor({2, 3, 4}, 1), s = randomTensor({3}, 2);
  expectFails(makeNode("PRelu", {&x, &s}), {&x, &s});
}

TEST(RefNnFused, UnknownActivation_n) {
  ConvInputs c;
  Node n = fusedNode("FusedConv", {&c.x, &c.w});
  n.attrs.set("activation", Attribute::String("Gelu"));
  expectFails(n, c.in());
}

TEST(RefNnFused, ResidualWrongShape_n) {
  ConvInputs c;
  Tensor z = randomTensor({1, 6, 7, 7}, 5);  // output is [1, 6, 6, 6]
  expectFails(fusedNode("FusedConv", {&c.x, &c.w, nullptr, &z}), {&c.x, &c.w, nullptr, &z});
}

TEST(RefNnFused, MatMulBiasWrongSize_n) {
  Tensor a = randomTensor({3, 4}, 1), b = randomTensor({4, 6}, 2), bias = randomTensor({4}, 3);
  expectFails(fusedNode("FusedMatMul", {&a, &b, &bias}), {&a, &b, &bias});
}

TEST(RefNnFused, GemmTooManyInputs_n) {
  Tensor a = randomTensor({3, 4}, 1), b = randomTensor({4, 6}, 2), c = randomTensor({6}, 3);
  expectFails(fusedNode("FusedGemm", {&a, &b, &c, &c}), {&a, &b, &c, &c});
}

}  // namespace
}  // namespace edgeinfer
