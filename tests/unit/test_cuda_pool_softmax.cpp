// The `cuda` provider's pooling and Softmax/LogSoftmax tactics against the CPU reference:
// MaxPool / AveragePool (pads, strides, dilations, ceil_mode, count_include_pad), LpPool,
// GlobalAveragePool / GlobalMaxPool in NCHW and NHWC, FP32 and FP16; Softmax / LogSoftmax
// along each axis and in the coerce_2d form, short rows (a warp each), long rows (a block
// each) and strided columns; Hardmax (ties, NaN, -inf) and LpNormalization (p 1 and 2, zero
// vectors). Inputs are FP16-representable so every tactic sees exactly the
// reference's inputs. Negative cases (_n): layers the provider must not offer tactics for.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_provider.h"
#include "kernels/cuda/pool.h"
#include "tactic_test_util.h"

namespace edgeinfer {
namespace {

using builder::LayerContext;
using graph::Attribute;

Tensor randomTensor(const Shape& s, uint32_t seed, float lo = -3.f, float hi = 3.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  Tensor t = Tensor::zeros(DataType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = halfToFloat(floatToHalf(d(rng)));
  return t;
}

graph::Node makeNode(const std::string& op, size_t nOut = 1) {
  graph::Node n;
  n.name = op + "_gpu_test";
  n.opType = op;
  n.inputs.push_back("x");
  for (size_t i = 0; i < nOut; ++i) n.outputs.push_back("out" + std::to_string(i));
  return n;
}

/// Runs every candidate at FP16 precision against the reference; returns the ids seen.
std::set<std::string> checkAll(const graph::Node& node, const Tensor& x, double tol32,
                               size_t expectedCount) {
  std::set<std::string> ids;
  graph::Graph g;
  LayerContext layer;
  const Status ls = test::makeLayer(node, g, {&x}, &layer);
  EXPECT_TRUE(ls.ok()) << ls.toString();
  if (!ls.ok()) return ids;
  std::vector<Tensor> ref;
  const Status rs = ref::runNode(node, {&x}, ref);
  EXPECT_TRUE(rs.ok()) << rs.toString();
  if (!rs.ok()) return ids;
  cuda::CudaKernelProvider provider;
  auto cands = provider.candidates(layer, Precision::kFp16);
  EXPECT_EQ(cands.size(), expectedCount) << node.opType << " " << x.shape().toString();
  for (auto& t : cands) {
    ids.insert(t->id());
    const Status is = t->initialize(layer);
    EXPECT_TRUE(is.ok()) << t->id() << ": " << is.toString();
    if (!is.ok()) continue;
    auto outs = test::runTactic(*t, layer, {&x});
    EXPECT_TRUE(outs.ok()) << t->id() << ": " << outs.status().toString();
    if (!outs.ok()) continue;
    const double err = test::relL2((*outs)[0], ref[0]);
    const double tol = t->outputFormat(0).dtype == DataType::kFloat16 ? 2e-3 : tol32;
    EXPECT_LE(err, tol) << t->id() << " " << node.opType << " in " << x.shape().toString();
  }
  return ids;
}

struct WindowCase {
  Shape x;
  std::vector<int64_t> kernel, strides, pads, dilations;
  int64_t ceil = 0;
  std::string autoPad;
};

const std::vector<WindowCase>& windowCases() {
  static const std::vector<WindowCase> kCases = {
      {Shape{2, 3, 13, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0, ""},
      {Shape{2, 3, 13, 11}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 1, ""},
      {Shape{2, 3, 7, 5}, {2, 3}, {1, 2}, {0, 1, 1, 0}, {}, 1, ""},
      {Shape{1, 5, 12, 10}, {3, 2}, {2, 1}, {2, 0, 1, 1}, {2, 2}, 0, ""},
      {Shape{2, 16, 9, 8}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 0, ""},
      {Shape{2, 16, 9, 8}, {2, 2}, {2, 2}, {0, 0, 0, 0}, {}, 1, ""},
      {Shape{1, 24, 15, 15}, {3, 3}, {2, 2}, {}, {}, 0, "SAME_UPPER"},
      {Shape{3, 4, 6, 6}, {6, 6}, {1, 1}, {}, {}, 0, "VALID"},
  };
  return kCases;
}

graph::Node windowNode(const std::string& op, const WindowCase& c) {
  graph::Node n = makeNode(op);
  n.attrs.set("kernel_shape", Attribute::Ints(c.kernel));
  n.attrs.set("strides", Attribute::Ints(c.strides));
  if (!c.pads.empty()) n.attrs.set("pads", Attribute::Ints(c.pads));
  if (!c.dilations.empty()) n.attrs.set("dilations", Attribute::Ints(c.dilations));
  if (c.ceil) n.attrs.set("ceil_mode", Attribute::Int(1));
  if (!c.autoPad.empty()) n.attrs.set("auto_pad", Attribute::String(c.autoPad));
  return n;
}

TEST(CudaPool, MaxPool) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 10;
  for (const auto& c : windowCases()) {
    const auto ids = checkAll(windowNode("MaxPool", c), randomTensor(c.x, seed++), 1e-6, 4);
    EXPECT_TRUE(ids.count("cuda.pool.fp16.nhwc")) << c.x.toString();
  }
}

TEST(CudaPool, AveragePool) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 20;
  for (int64_t cip : {0, 1}) {
    for (const auto& c : windowCases()) {
      graph::Node n = windowNode("AveragePool", c);
      n.attrs.set("count_include_pad", Attribute::Int(cip));
      checkAll(n, randomTensor(c.x, seed++), 1e-5, 4);
    }
  }
}

// LpPool, p 1, 2 and 3 (pads count as zeros; the windows of MaxPool's cases without
// ceil_mode and dilations, which LpPool before opset 18 does not have).
TEST(CudaPool, LpPool) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 25;
  for (int64_t p : {1, 2, 3}) {
    for (const auto& c : windowCases()) {
      if (c.ceil || !c.dilations.empty()) continue;
      graph::Node n = windowNode("LpPool", c);
      n.attrs.set("p", Attribute::Int(p));
      checkAll(n, randomTensor(c.x, seed++), 1e-5, 4);
    }
  }
}

// 1-D pools ([N, C, W]) run as 2-D ones over [N, C, 1, W]: strides, pads, dilations,
// ceil_mode, count_include_pad, and the global pools.
TEST(CudaPool, OneDimensional) {
  EI_SKIP_WITHOUT_GPU();
  struct Case {
    const char* op;
    Shape x;
    int64_t k, stride, padB, padE, dilation, ceil;
  };
  const std::vector<Case> cases = {
      {"MaxPool", Shape{2, 3, 17}, 3, 2, 1, 1, 1, 0},
      {"MaxPool", Shape{1, 5, 20}, 2, 3, 0, 1, 2, 1},
      {"AveragePool", Shape{2, 3, 17}, 3, 2, 1, 0, 1, 0},
      {"AveragePool", Shape{3, 4, 9}, 4, 1, 2, 1, 1, 1},
      {"LpPool", Shape{2, 3, 11}, 3, 2, 1, 1, 1, 0},
  };
  uint32_t seed = 90;
  for (const auto& c : cases) {
    graph::Node n = makeNode(c.op);
    n.attrs.set("kernel_shape", Attribute::Ints({c.k}));
    n.attrs.set("strides", Attribute::Ints({c.stride}));
    n.attrs.set("pads", Attribute::Ints({c.padB, c.padE}));
    if (std::string(c.op) != "LpPool") {
      n.attrs.set("dilations", Attribute::Ints({c.dilation}));
      if (c.ceil) n.attrs.set("ceil_mode", Attribute::Int(1));
    }
    for (int64_t cip : {0, 1}) {
      if (cip && std::string(c.op) != "AveragePool") continue;
      if (cip) n.attrs.set("count_include_pad", Attribute::Int(1));
      SCOPED_TRACE(std::string(c.op) + " " + c.x.toString());
      checkAll(n, randomTensor(c.x, seed++), 1e-5, 2);
    }
  }
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"})
    checkAll(makeNode(op), randomTensor(Shape{2, 5, 300}, seed++), 1e-5, 2);
}

TEST(CudaPool, GlobalPools) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 30;
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool"}) {
    const double tol = std::string(op) == "GlobalMaxPool" ? 1e-6 : 1e-5;
    for (const Shape& s :
         {Shape{2, 3, 7, 5}, Shape{2, 16, 9, 8}, Shape{1, 24, 64, 64}, Shape{2, 8, 1, 1},
          Shape{1, 200, 7, 7}, Shape{3, 5, 50, 41}, Shape{1, 2048, 7, 7}, Shape{1, 1000, 13, 13}})
      checkAll(makeNode(op), randomTensor(s, seed++), tol, 4);
  }
}

struct SoftmaxCase {
  Shape x;
  int64_t axis;
  int64_t coerce;
  size_t expected;  // candidates: 2 per storage type for 4-D single-axis, else 1
};

TEST(CudaSoftmax, SoftmaxAndLogSoftmax) {
  EI_SKIP_WITHOUT_GPU();
  const std::vector<SoftmaxCase> cases = {
      {Shape{2, 3, 7, 5}, -1, 0, 4}, {Shape{2, 3, 7, 5}, 1, 0, 4},  {Shape{2, 3, 7, 5}, 2, 0, 4},
      {Shape{2, 3, 7, 5}, 0, 0, 4},  {Shape{2, 16, 9, 8}, 1, 0, 4}, {Shape{1, 13}, -1, 0, 2},
      {Shape{4, 1000}, 1, 0, 2},     {Shape{3, 2500}, -1, 0, 2},    {Shape{2, 4099}, 1, 0, 2},
      {Shape{5, 3, 1}, 1, 0, 2},     {Shape{2, 3, 7, 5}, 1, 1, 2},  {Shape{2, 3, 7, 5}, 2, 1, 2},
      {Shape{2, 3, 7, 5}, 0, 1, 2},  {Shape{6, 40, 33}, 1, 1, 2},   {Shape{77}, 0, 0, 2},
  };
  uint32_t seed = 40;
  for (const char* op : {"Softmax", "LogSoftmax"}) {
    for (const auto& c : cases) {
      graph::Node n = makeNode(op);
      n.attrs.set("axis", Attribute::Int(c.axis));
      if (c.coerce) n.attrs.set("coerce_2d", Attribute::Int(1));
      const auto ids = checkAll(n, randomTensor(c.x, seed++, -8.f, 8.f), 1e-5, c.expected);
      if (c.coerce) {
        EXPECT_FALSE(ids.count("cuda.softmax.fp16.nhwc"));
      }
    }
  }
}

// Hardmax: one-hot of the first maximum along the axis (ties from small integers; NaN never a
// maximum; a row of NaN or -inf gives index 0), every axis, coerce_2d, NCHW and NHWC.
TEST(CudaSoftmax, Hardmax) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 70;
  for (const auto& c : std::vector<SoftmaxCase>{{Shape{2, 3, 7, 5}, -1, 0, 4},
                                                {Shape{2, 3, 7, 5}, 1, 0, 4},
                                                {Shape{2, 3, 7, 5}, 0, 0, 4},
                                                {Shape{3, 2500}, -1, 0, 2},
                                                {Shape{2, 3, 7, 5}, 2, 1, 2},
                                                {Shape{77}, 0, 0, 2}}) {
    for (int variant = 0; variant < 3; ++variant) {
      graph::Node n = makeNode("Hardmax");
      n.attrs.set("axis", Attribute::Int(c.axis));
      if (c.coerce) n.attrs.set("coerce_2d", Attribute::Int(1));
      Tensor x = randomTensor(c.x, seed++, -8.f, 8.f);
      for (int64_t i = 0; i < x.numel(); ++i) {
        float& v = x.data<float>()[i];
        if (variant == 1) v = std::round(v / 4.f);  // many ties
        if (variant == 2 && i % 3 == 0) v = std::numeric_limits<float>::quiet_NaN();
        if (variant == 2 && i % 7 == 1) v = -std::numeric_limits<float>::infinity();
      }
      SCOPED_TRACE(c.x.toString() + " axis " + std::to_string(c.axis) + " variant " +
                   std::to_string(variant));
      const auto ids = checkAll(n, x, 0.0, c.expected);
      EXPECT_TRUE(
          ids.count("cuda.hardmax.fp16." + std::string(c.x.rank() == 4 ? "nchw" : "linear")))
          << "the Hardmax tactics are named hardmax";
    }
  }
}

// LpNormalization: p 1 and 2 along every axis, strided and contiguous, zero vectors stay zero.
TEST(CudaSoftmax, LpNormalization) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 90;
  for (int64_t p : {1, 2})
    for (const auto& c : std::vector<SoftmaxCase>{{Shape{2, 3, 7, 5}, -1, 0, 4},
                                                  {Shape{2, 3, 7, 5}, 1, 0, 4},
                                                  {Shape{2, 3, 7, 5}, 0, 0, 4},
                                                  {Shape{4, 1000}, 1, 0, 2},
                                                  {Shape{5, 3, 1}, 1, 0, 2}}) {
      graph::Node n = makeNode("LpNormalization");
      n.attrs.set("axis", Attribute::Int(c.axis));
      n.attrs.set("p", Attribute::Int(p));
      Tensor x = randomTensor(c.x, seed++, -8.f, 8.f);
      const int64_t len =
          c.x[static_cast<size_t>(c.axis < 0 ? c.axis + static_cast<int64_t>(c.x.rank()) : c.axis)];
      // The first vector along the axis made zero (for axis -1 / the last axis: its first row).
      if (c.axis == -1 || c.axis == static_cast<int64_t>(c.x.rank()) - 1)
        for (int64_t i = 0; i < len; ++i) x.data<float>()[i] = 0.f;
      SCOPED_TRACE(c.x.toString() + " axis " + std::to_string(c.axis) + " p " + std::to_string(p));
      const auto ids = checkAll(n, x, 1e-5, c.expected);
      EXPECT_TRUE(
          ids.count("cuda.lpnorm.fp32." + std::string(c.x.rank() == 4 ? "nchw" : "linear")));
    }
}

// ---- Negative cases: no candidates ---------------------------------------------------------

std::vector<std::unique_ptr<builder::Tactic>> candidatesFor(const graph::Node& node,
                                                            const Tensor& x,
                                                            LayerContext* layerOut = nullptr) {
  // The layer (returned through layerOut) points at the graph and the node: both must outlive
  // it, so the graph (these layers read no constants) is static and callers keep `node`.
  static const graph::Graph g;
  LayerContext layer;
  const Status s = test::makeLayer(node, g, {&x}, &layer);
  EXPECT_TRUE(s.ok()) << s.toString();
  cuda::CudaKernelProvider provider;
  auto c = provider.candidates(layer, Precision::kFp16);
  if (layerOut) *layerOut = layer;
  return c;
}

TEST(CudaPool, MaxPoolWithIndices_n) {
  graph::Node n = windowNode("MaxPool", windowCases()[0]);
  n.outputs.push_back("indices");
  EXPECT_TRUE(candidatesFor(n, randomTensor(Shape{2, 3, 13, 11}, 1)).empty());
}

TEST(CudaPool, MaxPoolInt8_n) {
  Tensor x = Tensor::zeros(DataType::kUInt8, Shape{1, 2, 6, 6});
  EXPECT_TRUE(candidatesFor(windowNode("MaxPool", windowCases()[0]), x).empty());
}

/// The ids of the candidates writing int8 that the provider offers for pooling node `n` over x
/// at `precision`, the layer's input and output given the scales sIn and sOut.
std::set<std::string> int8OutputIds(const graph::Node& n, const Tensor& x, Precision precision,
                                    float sIn, float sOut) {
  graph::Graph g;
  LayerContext layer;
  EXPECT_TRUE(test::makeLayer(n, g, {&x}, &layer).ok());
  layer.inputScales = {sIn};
  layer.outputScales = {sOut};
  cuda::CudaKernelProvider provider;
  std::set<std::string> ids;
  for (const auto& t : provider.candidates(layer, precision))
    if (t->outputFormat(0).dtype == DataType::kInt8) ids.insert(t->id());
  return ids;
}

// INT8 MaxPool (issue 6): the int8 tactic is offered at kInt8 for a 4-D MaxPool whose input and
// output both have scales, and nowhere else; its launcher refuses what it does not run.
TEST(CudaPool, Int8MaxPoolOnlyWithBothScales_n) {
  const Tensor x = randomTensor(Shape{2, 16, 9, 8}, 3);
  const auto int8Ids = [&](const graph::Node& n, Precision precision, float sIn, float sOut) {
    return int8OutputIds(n, x, precision, sIn, sOut);
  };
  const graph::Node maxPool = windowNode("MaxPool", windowCases()[4]);
  EXPECT_EQ(int8Ids(maxPool, Precision::kInt8, 0.02f, 0.03f),
            std::set<std::string>{"cuda.pool.i8.nhwc"});
  EXPECT_TRUE(int8Ids(maxPool, Precision::kInt8, 0.02f, 0.f).empty()) << "no output scale";
  EXPECT_TRUE(int8Ids(maxPool, Precision::kInt8, 0.f, 0.03f).empty()) << "no input scale";
  EXPECT_TRUE(int8Ids(maxPool, Precision::kInt8, 0.02f, NAN).empty()) << "NaN scale";
  EXPECT_TRUE(int8Ids(maxPool, Precision::kFp16, 0.02f, 0.03f).empty()) << "FP16 precision";
  EXPECT_TRUE(
      int8Ids(windowNode("AveragePool", windowCases()[4]), Precision::kInt8, 0.02f, 0.03f).empty())
      << "AveragePool";
  cuda::PoolPlan plan;
  plan.kind = cuda::PoolKind::kMax, plan.nhwc = true, plan.N = 1, plan.C = 16, plan.H = 4;
  plan.W = 4, plan.OH = 2, plan.OW = 2, plan.kh = plan.kw = plan.sh = plan.sw = 2;
  alignas(16) static int8_t in[256], out[64];
  EXPECT_EQ(cuda::launchMaxPoolInt8(plan, 0.f, 0.1f, in, out, 1, nullptr).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(cuda::launchMaxPoolInt8(plan, 0.1f, INFINITY, in, out, 1, nullptr).code(),
            ErrorCode::kInvalidArgument);
  cuda::PoolPlan nchw = plan;
  nchw.nhwc = false;
  EXPECT_EQ(cuda::launchMaxPoolInt8(nchw, 0.1f, 0.1f, in, out, 1, nullptr).code(),
            ErrorCode::kInvalidArgument);
  cuda::PoolPlan average = plan;
  average.kind = cuda::PoolKind::kAverage;
  EXPECT_EQ(cuda::launchMaxPoolInt8(average, 0.1f, 0.1f, in, out, 1, nullptr).code(),
            ErrorCode::kInvalidArgument);
}

// The int8 MaxPool gives exactly quantize(max(dequantize(x)), sOut): the float MaxPool of the
// dequantized input, quantized with the output's scale, for equal scales (the max of the int8
// values itself) and for a larger and a smaller output scale (saturating); channel counts that
// take the 16-, 4- and 1-channel paths; every window case of the float tests; 3x3 windows in
// the form that loads every tap first (small launches), in 2 x 2 output blocks (large launches
// of stride 2) and in the general walk (other large ones).
TEST(CudaPool, Int8MaxPoolIsTheDequantizedPoolQuantized) {
  EI_SKIP_WITHOUT_GPU();
  std::vector<WindowCase> cases = windowCases();
  cases.push_back({Shape{2, 64, 17, 15}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0, ""});  // ResNet's
  cases.push_back({Shape{1, 48, 9, 10}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 1, ""});
  cases.push_back({Shape{1, 20, 9, 10}, {2, 2}, {1, 1}, {0, 0, 0, 0}, {}, 0, ""});
  cases.push_back({Shape{1, 32, 11, 12}, {3, 3}, {1, 1}, {2, 2, 2, 2}, {2, 2}, 0, ""});  // dilated
  // Past the latency-bound form's limit (65,536 threads): a 3x3 window of stride 2 takes the
  // 2 x 2 output blocks (odd output sides: blocks cut at the edge; 16-, 4- and 1-channel
  // vectors; asymmetric padding), any other the general walk.
  cases.push_back({Shape{4, 64, 130, 130}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0, ""});
  cases.push_back({Shape{8, 48, 113, 111}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0, ""});
  cases.push_back({Shape{4, 20, 121, 119}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0, ""});
  cases.push_back({Shape{1, 5, 260, 230}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 0, ""});
  cases.push_back({Shape{5, 64, 128, 128}, {3, 3}, {2, 2}, {0, 0, 1, 1}, {}, 0, ""});
  cases.push_back({Shape{4, 64, 129, 131}, {3, 3}, {2, 2}, {1, 1, 1, 1}, {}, 1, ""});  // ceil
  cases.push_back({Shape{2, 32, 160, 160}, {3, 3}, {1, 1}, {1, 1, 1, 1}, {}, 0, ""});
  uint32_t seed = 60;
  size_t runs = 0;
  for (const auto& c : cases) {
    const graph::Node n = windowNode("MaxPool", c);
    const Tensor x = randomTensor(c.x, seed++);
    for (const float sOutOverIn : {1.f, 1.37f, 0.61f}) {
      SCOPED_TRACE(c.x.toString() + " sOut / sIn " + std::to_string(sOutOverIn));
      const float sIn = 3.f / 127.f, sOut = sIn * sOutOverIn;
      graph::Graph g;
      LayerContext layer;
      ASSERT_TRUE(test::makeLayer(n, g, {&x}, &layer).ok());
      layer.inputScales = {sIn};
      layer.outputScales = {sOut};
      // The reference: the input dequantized, the float MaxPool, quantized with sOut.
      Tensor xd = x.clone();
      for (int64_t i = 0; i < xd.numel(); ++i)
        xd.data<float>()[i] = static_cast<float>(test::quantizeHost(x.data<float>()[i], sIn)) * sIn;
      std::vector<Tensor> ref;
      ASSERT_TRUE(ref::runNode(n, {&xd}, ref).ok());
      cuda::CudaKernelProvider provider;
      bool found = false;
      for (auto& t : provider.candidates(layer, Precision::kInt8)) {
        if (t->id() != "cuda.pool.i8.nhwc") continue;
        found = true;
        ASSERT_TRUE(t->initialize(layer).ok());
        auto outs = test::runTactic(*t, layer, {&x});
        ASSERT_TRUE(outs.ok()) << outs.status().toString();
        const Tensor& got = (*outs)[0];
        ASSERT_EQ(got.shape(), ref[0].shape());
        int64_t differ = 0;
        for (int64_t i = 0; i < got.numel(); ++i) {
          const float want =
              static_cast<float>(test::quantizeHost(ref[0].data<float>()[i], sOut)) * sOut;
          differ += got.data<float>()[i] != want ? 1 : 0;
        }
        EXPECT_EQ(differ, 0) << "of " << got.numel();
        ++runs;
      }
      EXPECT_TRUE(found);
    }
  }
  EXPECT_EQ(runs, cases.size() * 3);
}

// A global pool that writes int8 for an INT8 reader (issue 6): offered at kInt8 for
// GlobalAveragePool and GlobalMaxPool whose output has a scale, for each float input type and
// layout, and nowhere else; its launcher refuses what it does not run.
TEST(CudaPool, Int8OutGlobalPoolOnlyWithAnOutputScale_n) {
  const Tensor x = randomTensor(Shape{2, 16, 9, 8}, 3);
  const auto int8Ids = [&](const graph::Node& n, Precision precision, float sOut) {
    return int8OutputIds(n, x, precision, 0.f, sOut);
  };
  const std::set<std::string> all{"cuda.pool.fp16.nchw.i8", "cuda.pool.fp16.nhwc.i8",
                                  "cuda.pool.fp32.nchw.i8", "cuda.pool.fp32.nhwc.i8"};
  EXPECT_EQ(int8Ids(makeNode("GlobalAveragePool"), Precision::kInt8, 0.03f), all);
  EXPECT_EQ(int8Ids(makeNode("GlobalMaxPool"), Precision::kInt8, 0.03f), all);
  EXPECT_TRUE(int8Ids(makeNode("GlobalAveragePool"), Precision::kInt8, 0.f).empty())
      << "no output scale";
  EXPECT_TRUE(int8Ids(makeNode("GlobalAveragePool"), Precision::kInt8, NAN).empty()) << "NaN";
  EXPECT_TRUE(int8Ids(makeNode("GlobalAveragePool"), Precision::kInt8, -0.5f).empty())
      << "negative scale";
  EXPECT_TRUE(int8Ids(makeNode("GlobalAveragePool"), Precision::kFp16, 0.03f).empty())
      << "FP16 precision";
  EXPECT_TRUE(int8Ids(windowNode("AveragePool", windowCases()[4]), Precision::kInt8, 0.03f).empty())
      << "a windowed AveragePool";
  // A tactic built for a scale refuses a layer without one (an engine whose plan lost it).
  {
    graph::Graph g;
    const graph::Node n = makeNode("GlobalAveragePool");
    LayerContext layer;
    ASSERT_TRUE(test::makeLayer(n, g, {&x}, &layer).ok());
    layer.outputScales = {0.03f};
    cuda::CudaKernelProvider provider;
    auto cands = provider.candidates(layer, Precision::kInt8);
    layer.outputScales = {0.f};
    size_t refused = 0;
    for (auto& t : cands)
      if (t->outputFormat(0).dtype == DataType::kInt8) {
        EXPECT_EQ(t->initialize(layer).code(), ErrorCode::kUnsupported) << t->id();
        ++refused;
      }
    EXPECT_EQ(refused, 4u);
  }
  cuda::PoolPlan plan;
  plan.kind = cuda::PoolKind::kGlobalAverage, plan.N = 1, plan.C = 16, plan.H = 4, plan.W = 4;
  alignas(16) static float in[256];
  alignas(16) static int8_t out[16];
  EXPECT_EQ(cuda::launchGlobalPoolInt8Out(plan, false, 0.f, in, out, 1, nullptr).code(),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(cuda::launchGlobalPoolInt8Out(plan, false, INFINITY, in, out, 1, nullptr).code(),
            ErrorCode::kInvalidArgument);
  cuda::PoolPlan windowed = plan;
  windowed.kind = cuda::PoolKind::kAverage;
  EXPECT_EQ(cuda::launchGlobalPoolInt8Out(windowed, false, 0.1f, in, out, 1, nullptr).code(),
            ErrorCode::kInvalidArgument);
}

// The int8-output global pools give the pooled value quantized with the output's scale: against
// the mean (or max) of the inputs in double precision, rounded half to even and clamped, with
// a difference allowed only where that value is within 1e-3 of a half step (the float sums'
// order moves it by far less than that), and then by one step. Shapes that take the NHWC
// vector and scalar paths, a block per NCHW plane (4,096 pixels) and a warp per plane, batch
// 1 and 64 at ResNet's 7x7; GlobalMaxPool with a scale its inputs (within 3) fit and with one
// that saturates most maxima at 127.
TEST(CudaPool, Int8OutGlobalPoolIsThePoolQuantized) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 90;
  size_t runs = 0, nearHalf = 0;
  const std::vector<std::pair<const char*, float>> opScales = {
      {"GlobalAveragePool", 0.01f}, {"GlobalMaxPool", 0.03f}, {"GlobalMaxPool", 0.02f}};
  for (const auto& [op, s] : opScales) {
    const bool mx = std::string(op) == "GlobalMaxPool";
    for (const Shape& shape : {Shape{1, 2048, 7, 7}, Shape{64, 16, 7, 7}, Shape{2, 40, 13, 11},
                               Shape{1, 24, 64, 64}, Shape{3, 5, 1, 1}}) {
      SCOPED_TRACE(std::string(op) + " " + shape.toString() + " scale " + std::to_string(s));
      const Tensor x = randomTensor(shape, seed++);
      graph::Graph g;
      const graph::Node n = makeNode(op);
      LayerContext layer;
      ASSERT_TRUE(test::makeLayer(n, g, {&x}, &layer).ok());
      layer.outputScales = {s};
      const int64_t N = shape[0], C = shape[1], size = shape[2] * shape[3];
      std::vector<double> want(static_cast<size_t>(N * C));
      for (int64_t p = 0; p < N * C; ++p) {
        const float* xp = x.data<float>() + p * size;
        double acc = mx ? -1e30 : 0.0;
        for (int64_t i = 0; i < size; ++i) acc = mx ? std::max(acc, double{xp[i]}) : acc + xp[i];
        want[static_cast<size_t>(p)] = (mx ? acc : acc / static_cast<double>(size)) / s;
      }
      cuda::CudaKernelProvider provider;
      size_t found = 0;
      for (auto& t : provider.candidates(layer, Precision::kInt8)) {
        if (t->outputFormat(0).dtype != DataType::kInt8) continue;
        ++found;
        ASSERT_TRUE(t->initialize(layer).ok()) << t->id();
        auto outs = test::runTactic(*t, layer, {&x});
        ASSERT_TRUE(outs.ok()) << t->id() << ": " << outs.status().toString();
        const Tensor& got = (*outs)[0];
        ASSERT_EQ(got.numel(), N * C);
        int64_t unexplained = 0;
        for (int64_t i = 0; i < got.numel(); ++i) {
          const double m = want[static_cast<size_t>(i)];
          const double q = std::nearbyint(static_cast<double>(got.data<float>()[i]) / s);
          const double exact = std::min(std::max(std::nearbyint(m), -128.0), 127.0);
          if (q == exact) continue;
          const bool half = std::fabs(m - std::floor(m) - 0.5) < 1e-3;
          nearHalf += half ? 1 : 0;
          unexplained += half && std::fabs(q - m) < 1.0 ? 0 : 1;
        }
        EXPECT_EQ(unexplained, 0) << t->id() << ", of " << got.numel();
        ++runs;
      }
      EXPECT_EQ(found, 4u);
    }
  }
  EXPECT_EQ(runs, 3u * 5u * 4u);
  std::printf("[          ] int8-output global pools: %zu runs, %zu values at a half step\n", runs,
              nearHalf);
}

TEST(CudaPool, ThreeDimensionalPool_n) {
  graph::Node n = makeNode("AveragePool");
  n.attrs.set("kernel_shape", Attribute::Ints({2, 2, 2}));
  EXPECT_TRUE(candidatesFor(n, randomTensor(Shape{1, 2, 4, 4, 4}, 1)).empty());
}

TEST(CudaPool, LpPoolBadP_n) {
  graph::Node n = makeNode("LpPool");
  n.attrs.set("kernel_shape", Attribute::Ints({2, 2}));
  LayerContext layer;
  ASSERT_FALSE(candidatesFor(n, randomTensor(Shape{1, 2, 4, 4}, 1), &layer).empty());
  graph::Node bad = n;  // p = 0 (the reference rejects it too)
  bad.attrs.set("p", Attribute::Int(0));
  layer.node = &bad;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaPool, GlobalPoolRank5_n) {
  EXPECT_TRUE(
      candidatesFor(makeNode("GlobalAveragePool"), randomTensor(Shape{2, 3, 4, 4, 4}, 1)).empty());
}

TEST(CudaPool, Int64AveragePool_n) {
  graph::Node n = windowNode("AveragePool", windowCases()[0]);
  LayerContext layer;
  ASSERT_FALSE(candidatesFor(n, randomTensor(Shape{2, 3, 13, 11}, 1), &layer).empty());
  layer.inputTypes[0] = layer.outputTypes[0] = DataType::kInt64;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaPool, BadCountIncludePad_n) {
  // Shape inference rejects it too; the provider must not rely on that.
  graph::Node n = windowNode("AveragePool", windowCases()[0]);
  LayerContext layer;
  ASSERT_FALSE(candidatesFor(n, randomTensor(Shape{2, 3, 13, 11}, 1), &layer).empty());
  graph::Node bad = n;
  bad.attrs.set("count_include_pad", Attribute::Int(2));
  layer.node = &bad;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaPool, DynamicShape_n) {
  LayerContext layer;
  const graph::Node n = makeNode("GlobalMaxPool");
  ASSERT_FALSE(candidatesFor(n, randomTensor(Shape{2, 3, 4, 4}, 1), &layer).empty());
  layer.inputShapes[0][2] = -1;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

// (The schema refuses p = 3 first; the provider must not rely on it.)
TEST(CudaSoftmax, LpNormalizationWithPOtherThanOneOrTwo_n) {
  const graph::Node n = makeNode("LpNormalization");
  LayerContext layer;
  ASSERT_FALSE(candidatesFor(n, randomTensor(Shape{2, 5}, 1), &layer).empty());
  graph::Node bad = n;
  bad.attrs.set("p", Attribute::Int(3));
  layer.node = &bad;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaSoftmax, Int32HardmaxAndLpNormalization_n) {
  for (const char* op : {"Hardmax", "LpNormalization"}) {
    LayerContext layer;
    const graph::Node n = makeNode(op);
    ASSERT_FALSE(candidatesFor(n, randomTensor(Shape{2, 5}, 1), &layer).empty()) << op;
    layer.inputTypes[0] = layer.outputTypes[0] = DataType::kInt32;
    cuda::CudaKernelProvider provider;
    EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty()) << op;
  }
}

TEST(CudaSoftmax, Int32Softmax_n) {
  LayerContext layer;
  const graph::Node n = makeNode("Softmax");
  ASSERT_FALSE(candidatesFor(n, randomTensor(Shape{2, 5}, 1), &layer).empty());
  layer.inputTypes[0] = layer.outputTypes[0] = DataType::kInt32;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaSoftmax, AxisOutOfRange_n) {
  graph::Node n = makeNode("LogSoftmax");
  LayerContext layer;
  ASSERT_FALSE(candidatesFor(n, randomTensor(Shape{2, 5}, 1), &layer).empty());
  graph::Node bad = n;
  bad.attrs.set("axis", Attribute::Int(2));
  layer.node = &bad;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaSoftmax, DynamicShape_n) {
  LayerContext layer;
  const graph::Node n = makeNode("Softmax");
  ASSERT_FALSE(candidatesFor(n, randomTensor(Shape{2, 5}, 1), &layer).empty());
  layer.inputShapes[0][0] = -1;
  layer.outputShapes[0][0] = -1;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaSoftmax, Coerce2dHasNoNhwc_n) {
  graph::Node n = makeNode("Softmax");
  n.attrs.set("coerce_2d", Attribute::Int(1));
  auto c = candidatesFor(n, randomTensor(Shape{2, 3, 4, 5}, 1));
  EXPECT_EQ(c.size(), 2u);
  for (auto& t : c) {
    EXPECT_EQ(t->id().find("nhwc"), std::string::npos) << t->id();
  }
}

TEST(CudaSoftmax, Fp32PrecisionOffersNoFp16_n) {
  graph::Graph g;
  graph::Node n = makeNode("Softmax");
  Tensor x = randomTensor(Shape{2, 5}, 1);
  LayerContext layer;
  ASSERT_TRUE(test::makeLayer(n, g, {&x}, &layer).ok());
  cuda::CudaKernelProvider provider;
  auto c = provider.candidates(layer, Precision::kFp32);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]->id(), "cuda.softmax.fp32.linear");
}

TEST(CudaPool, EnqueueBeforeInitialize_n) {
  auto c = candidatesFor(makeNode("GlobalMaxPool"), randomTensor(Shape{2, 3, 4, 4}, 1));
  ASSERT_FALSE(c.empty());
  builder::LaunchArgs args;
  EXPECT_FALSE(c[0]->enqueue(args).ok());
}

}  // namespace
}  // namespace edgeinfer

#else  // !EDGEINFER_HAVE_CUDA

TEST(CudaPoolSoftmax, BuiltWithoutCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif  // EDGEINFER_HAVE_CUDA
