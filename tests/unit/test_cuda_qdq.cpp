// Explicit quantization on the GPU (quant/qdq_absorb.h): a Q/DQ ResNet-style block built with
// precision int8 takes the model's own scales (no calibration cache), runs cuda-i8 tactics and
// matches the CPU reference running the Q/DQ graph (fake quantization) within about one
// quantization step; FP16 keeps the Q/DQ nodes as ops; the model's scales win over a
// calibration cache; models whose Q/DQ the pass leaves in place still need a cache (_n).
// Every test skips without a GPU.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "builder/optimize.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/calibration.h"
#include "edgeinfer/engine.h"
#include "qoperator_models.h"
#include "quant/qdq_absorb.h"
#include "tactic_test_util.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using test::TestModel;

constexpr int64_t kC = 16, kH = 12, kW = 12, kOut = 8;

void intInitializer(TestModel& m, const std::string& name, std::vector<int64_t> dims,
                    const std::vector<int>& data, int type = onnx::TensorProto::INT8) {
  auto* t = m.proto.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(type);
  for (auto d : dims) t->add_dims(d);
  for (int v : data) t->add_int32_data(v);
}

/// int8 weights [K, C, R, S] whose every output channel reaches |q| = 127 (as QAT tools make
/// them: s_w = max |w| / 127), so the cuda-i8 tactics' own per-channel grid is the model's.
std::vector<int> int8Weights(int64_t k, int64_t per, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> u(-127, 127);
  std::vector<int> q(static_cast<size_t>(k * per));
  for (int64_t c = 0; c < k; ++c) {
    for (int64_t i = 0; i < per; ++i) q[static_cast<size_t>(c * per + i)] = u(rng);
    q[static_cast<size_t>(c * per + (c % per))] = c % 2 ? 127 : -127;
  }
  return q;
}

struct Block {
  std::vector<int> q1 = int8Weights(kC, kC * 9, 1), q2 = int8Weights(kC, kC * 9, 2),
                   q3 = int8Weights(kOut, kC, 3);
  std::vector<float> s1w, s2w;  // per channel (axis 0)
  float s3w = 0.004f;           // per tensor
  std::vector<float> b1, b2;
  Block() {
    std::mt19937 rng(4);
    std::uniform_real_distribution<float> s(0.0015f, 0.004f), b(-0.2f, 0.2f);
    for (int64_t k = 0; k < kC; ++k) {
      s1w.push_back(s(rng));
      s2w.push_back(s(rng));
      b1.push_back(b(rng));
      b2.push_back(b(rng));
    }
  }
  static std::vector<float> dequantize(const std::vector<int>& q, const std::vector<float>& s) {
    std::vector<float> w(q.size());
    const size_t per = q.size() / s.size();
    for (size_t i = 0; i < q.size(); ++i) w[i] = static_cast<float>(q[i]) * s[i / per];
    return w;
  }
};

struct ActScales {
  float x = 0.f, r1 = 0.f, r2 = 0.f;
};

struct QdqSpec {
  int zpType = onnx::TensorProto::INT8;
  int zeroPoint = 0;
};

/// x -> Q/DQ -> conv1 (3x3) + bias -> Relu -> Q/DQ -> conv2 (3x3) + bias -> Add(x's Q/DQ
/// output, the residual) -> Relu -> Q/DQ -> conv3 (1x1) -> y. Weights are int8 constants
/// through DequantizeLinear (per channel for conv1 and conv2, per tensor for conv3). With
/// `act` null: the same block in float (the dequantized weights, no Q/DQ), writing r1 and r2
/// too, to choose the activation scales from.
TestModel resBlock(const Block& b, const ActScales* act, const QdqSpec& spec = {}) {
  TestModel m(13);
  m.input("x", {1, kC, kH, kW});
  const auto pair = [&](const std::string& in, const std::string& out, float s) {
    if (!act) return in;
    m.initializer(out + "_s", {}, {s});
    intInitializer(m, out + "_zp", {}, {spec.zeroPoint}, spec.zpType);
    m.node("QuantizeLinear", {in, out + "_s", out + "_zp"}, {out + "_q"}, out + "_quantize");
    m.node("DequantizeLinear", {out + "_q", out + "_s", out + "_zp"}, {out}, out + "_dequantize");
    return out;
  };
  const auto weights = [&](const std::string& name, std::vector<int64_t> dims,
                           const std::vector<int>& q, const std::vector<float>& s) {
    if (!act) {
      m.initializer(name, dims, Block::dequantize(q, s));
      return;
    }
    intInitializer(m, name + "_q", dims, q);
    m.initializer(name + "_s", s.size() == 1 ? std::vector<int64_t>{} : std::vector<int64_t>{kC},
                  s);
    auto& dq = m.node("DequantizeLinear", {name + "_q", name + "_s"}, {name}, name + "_dequantize");
    TestModel::attr(dq, "axis", 0);
  };
  const std::string xq = pair("x", "xq", act ? act->x : 0.f);
  weights("w1", {kC, kC, 3, 3}, b.q1, b.s1w);
  weights("w2", {kC, kC, 3, 3}, b.q2, b.s2w);
  weights("w3", {kOut, kC, 1, 1}, b.q3, {b.s3w});
  m.initializer("b1", {kC}, b.b1);
  m.initializer("b2", {kC}, b.b2);
  auto& c1 = m.node("Conv", {xq, "w1", "b1"}, {"c1"}, "conv1");
  TestModel::attrInts(c1, "pads", {1, 1, 1, 1});
  m.node("Relu", {"c1"}, {"r1"}, "relu1");
  const std::string r1q = pair("r1", "r1q", act ? act->r1 : 0.f);
  auto& c2 = m.node("Conv", {r1q, "w2", "b2"}, {"c2"}, "conv2");
  TestModel::attrInts(c2, "pads", {1, 1, 1, 1});
  m.node("Add", {"c2", xq}, {"a2"}, "add2");
  m.node("Relu", {"a2"}, {"r2"}, "relu2");
  const std::string r2q = pair("r2", "r2q", act ? act->r2 : 0.f);
  m.node("Conv", {r2q, "w3"}, {"y"}, "conv3");
  m.output("y");
  if (!act) m.output("r1").output("r2");
  return m;
}

Tensor sampleInput() {
  Tensor t = Tensor::zeros(DataType::kFloat32, Shape{1, kC, kH, kW});
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = u(rng);
  return t;
}

Expected<std::vector<Tensor>> run(Engine& e, const Tensor& x, std::vector<std::string> outputs) {
  EI_ASSIGN_OR_RETURN(auto ctx, e.createExecutionContext());
  EI_RETURN_IF_ERROR(ctx->setInput("x", x));
  EI_RETURN_IF_ERROR(ctx->execute());
  std::vector<Tensor> out;
  for (const auto& name : outputs) {
    EI_ASSIGN_OR_RETURN(Tensor t, ctx->getOutput(name));
    out.push_back(std::move(t));
  }
  return out;
}

double maxAbs(const Tensor& t) {
  double m = 0;
  for (int64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.getAsDouble(i)));
  return m;
}

/// The activation scales (max |value| / 127 on the sample) from the float block on the CPU.
ActScales chooseScales(const Block& b, const Tensor& x) {
  BuilderConfig cpu;
  cpu.backend = Backend::kCpu;
  const std::string bytes = resBlock(b, nullptr).bytes();
  auto e = Builder::buildFromBuffer(bytes.data(), bytes.size(), cpu);
  EXPECT_TRUE(e.ok()) << e.status().toString();
  ActScales s;
  if (!e.ok()) return s;
  auto out = run(**e, x, {"r1", "r2"});
  EXPECT_TRUE(out.ok()) << out.status().toString();
  if (!out.ok()) return s;
  s.x = static_cast<float>(maxAbs(x) / 127);
  s.r1 = static_cast<float>(maxAbs((*out)[0]) / 127);
  s.r2 = static_cast<float>(maxAbs((*out)[1]) / 127);
  return s;
}

BuilderConfig gpuConfig(Precision p, const test::TempDir& dir) {
  BuilderConfig c = test::quickGpuConfig(dir.file("timing.cache"), p);
  c.strictPrecision = true;
  return c;
}

struct Comparison {
  double cosine = 0, maxAbsErr = 0, step = 0;
};

/// The GPU engine's y against the CPU reference running the Q/DQ model (fake quantization);
/// `step` is max |y| / 127, the quantization step y would have.
Comparison compare(Engine& gpu, const std::string& qdqBytes, const Tensor& x) {
  BuilderConfig cpu;
  cpu.backend = Backend::kCpu;
  auto ref = Builder::buildFromBuffer(qdqBytes.data(), qdqBytes.size(), cpu);
  EXPECT_TRUE(ref.ok()) << ref.status().toString();
  Comparison c;
  if (!ref.ok()) return c;
  auto want = run(**ref, x, {"y"});
  auto got = run(gpu, x, {"y"});
  EXPECT_TRUE(want.ok() && got.ok());
  if (!want.ok() || !got.ok()) return c;
  const Tensor &a = (*got)[0], &w = (*want)[0];
  EXPECT_EQ(a.numel(), w.numel());
  double ab = 0, aa = 0, bb = 0;
  for (int64_t i = 0; i < std::min(a.numel(), w.numel()); ++i) {
    const double p = a.getAsDouble(i), q = w.getAsDouble(i);
    ab += p * q;
    aa += p * p;
    bb += q * q;
    c.maxAbsErr = std::max(c.maxAbsErr, std::fabs(p - q));
  }
  c.cosine = ab / std::sqrt(aa * bb + 1e-30);
  c.step = maxAbs(w) / 127;
  return c;
}

std::string planText(Engine& e) {
  auto bytes = e.serialize();
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size())
                    : std::string();
}

int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

TEST(CudaQdqModel, TheBlocksConvsAreTheModelsInt8LayersAndItsReferenceIsSound) {
  // Needs no GPU: what the GPU tests below build from. The pass makes conv1, conv2 (with the
  // residual x as Z) and conv3 INT8 layers; the CPU reference of the Q/DQ block is close to
  // the float block (so the scales quantize, not destroy, the values).
  const Block b;
  const Tensor x = sampleInput();
  const ActScales s = chooseScales(b, x);
  ASSERT_GT(s.r1, 0.f);
  ASSERT_GT(s.r2, 0.f);
  const std::string bytes = resBlock(b, &s).bytes();
  quant::ExplicitInt8 e;
  auto g = builder::importAndOptimize(bytes, BuilderConfig{}, ".", &e);
  ASSERT_TRUE(g.ok()) << g.status().toString();
  EXPECT_EQ(e.int8Layers(), (std::vector<std::string>{"conv1", "conv2", "conv3"}));
  EXPECT_EQ(e.scales.at("x"), s.x);
  EXPECT_EQ(e.scales.at("r1"), s.r1);
  EXPECT_EQ(e.scales.at("r2"), s.r2);
  int fused = 0;
  for (const auto& n : g->nodes) {
    EXPECT_NE(n.opType, "QuantizeLinear");
    EXPECT_NE(n.opType, "DequantizeLinear");
    if (n.name == "conv2") {
      EXPECT_EQ(n.opType, "FusedConv");
      ASSERT_EQ(n.inputs.size(), 4u);
      EXPECT_EQ(n.inputs[0], "r1");
      EXPECT_EQ(n.inputs[3], "x");  // the residual, read through the absorbed pair
      ++fused;
    }
  }
  EXPECT_EQ(fused, 1);

  BuilderConfig cpu;
  cpu.backend = Backend::kCpu;
  const std::string floatBytes = resBlock(b, nullptr).bytes();
  auto fq = Builder::buildFromBuffer(bytes.data(), bytes.size(), cpu);
  auto fp = Builder::buildFromBuffer(floatBytes.data(), floatBytes.size(), cpu);
  ASSERT_TRUE(fq.ok() && fp.ok());
  auto a = run(**fq, x, {"y"}), w = run(**fp, x, {"y"});
  ASSERT_TRUE(a.ok() && w.ok());
  double ab = 0, aa = 0, ww = 0, diff = 0;
  for (int64_t i = 0; i < (*a)[0].numel(); ++i) {
    const double p = (*a)[0].getAsDouble(i), q = (*w)[0].getAsDouble(i);
    ab += p * q, aa += p * p, ww += q * q;
    diff = std::max(diff, std::fabs(p - q));
  }
  const double cos = ab / std::sqrt(aa * ww);
  std::printf(
      "[          ] CPU: Q/DQ block vs float block: cosine %.6f, max |diff| %.4f (max |y| "
      "%.3f)\n",
      cos, diff, maxAbs((*w)[0]));
  EXPECT_GT(cos, 0.99);
  EXPECT_LT(cos, 1.0);  // it does quantize
}

TEST(CudaQdqEngine, ResNetBlockRunsInt8WithTheModelsScalesCloseToTheFakeQuantReference) {
  EI_SKIP_WITHOUT_GPU();
  test::TempDir dir;
  const Block b;
  const Tensor x = sampleInput();
  const ActScales s = chooseScales(b, x);
  ASSERT_GT(s.r1, 0.f);
  ASSERT_GT(s.r2, 0.f);
  const std::string bytes = resBlock(b, &s).bytes();
  // No calibration cache: the scales are the model's.
  auto e = Builder::buildFromBuffer(bytes.data(), bytes.size(), gpuConfig(Precision::kInt8, dir));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_EQ((*e)->info().precision, Precision::kInt8);
  const std::string plan = planText(**e);
  EXPECT_GE(occurrences(plan, "cuda-i8."), 3) << "every conv in INT8 (strict precision)";
  EXPECT_EQ(plan.find("QuantizeLinear"), std::string::npos) << "the Q/DQ pairs are absorbed";

  const Comparison c = compare(**e, bytes, x);
  std::printf(
      "[          ] Q/DQ block, GPU INT8 vs CPU fake quantization: cosine %.6f, max |err| %.5f "
      "= %.2f steps of y (step %.5f)\n",
      c.cosine, c.maxAbsErr, c.maxAbsErr / c.step, c.step);
  EXPECT_GT(c.cosine, 0.999);
  EXPECT_LE(c.maxAbsErr, 3 * c.step);

  // Serialised and loaded: the same results.
  auto ser = (*e)->serialize();
  ASSERT_TRUE(ser.ok());
  auto loaded = Engine::deserialize(ser->data(), ser->size());
  ASSERT_TRUE(loaded.ok()) << loaded.status().toString();
  auto y1 = run(**e, x, {"y"}), y2 = run(**loaded, x, {"y"});
  ASSERT_TRUE(y1.ok() && y2.ok());
  ASSERT_EQ((*y1)[0].bytes(), (*y2)[0].bytes());
  EXPECT_EQ(std::memcmp((*y1)[0].raw(), (*y2)[0].raw(), (*y1)[0].bytes()), 0);
}

TEST(CudaQdqEngine, ModelScalesWinOverACalibrationCache) {
  EI_SKIP_WITHOUT_GPU();
  test::TempDir dir;
  const Block b;
  const Tensor x = sampleInput();
  const ActScales s = chooseScales(b, x);
  const std::string bytes = resBlock(b, &s).bytes();
  // A cache for this model with an absurd range for x (every input would quantize to 0) and a
  // policy keeping conv1 in FP16: the model's scale and its INT8 conv1 win.
  CalibrationCache cache;
  cache.sdkVersion = "test";
  cache.modelHash = modelHashOf(bytes.data(), bytes.size());
  cache.preprocessHash = "raw";
  cache.tensorAmax["x"] = 1000.f;
  cache.layerPrecision["conv1"] = Precision::kFp16;
  BuilderConfig cfg = gpuConfig(Precision::kInt8, dir);
  cfg.calibrationCachePath = dir.file("block.calib");
  ASSERT_TRUE(cache.save(cfg.calibrationCachePath).ok());
  auto e = Builder::buildFromBuffer(bytes.data(), bytes.size(), cfg);
  ASSERT_TRUE(e.ok()) << e.status().toString();
  EXPECT_GE(occurrences(planText(**e), "cuda-i8."), 3);
  const Comparison c = compare(**e, bytes, x);
  std::printf("[          ] with a conflicting cache: cosine %.6f, %.2f steps\n", c.cosine,
              c.maxAbsErr / c.step);
  EXPECT_GT(c.cosine, 0.999);
  EXPECT_LE(c.maxAbsErr, 3 * c.step);
}

TEST(CudaQdqEngine, Fp16BuildRunsTheQdqNodesAsOps) {
  EI_SKIP_WITHOUT_GPU();
  test::TempDir dir;
  const Block b;
  const Tensor x = sampleInput();
  const ActScales s = chooseScales(b, x);
  const std::string bytes = resBlock(b, &s).bytes();
  auto e = Builder::buildFromBuffer(bytes.data(), bytes.size(), gpuConfig(Precision::kFp16, dir));
  ASSERT_TRUE(e.ok()) << e.status().toString();
  const std::string plan = planText(**e);
  EXPECT_EQ(plan.find("cuda-i8."), std::string::npos);
  EXPECT_NE(plan.find("QuantizeLinear"), std::string::npos) << "the Q/DQ nodes stay";
  const Comparison c = compare(**e, bytes, x);
  std::printf("[          ] Q/DQ block in FP16 vs CPU: cosine %.6f, %.2f steps\n", c.cosine,
              c.maxAbsErr / c.step);
  EXPECT_GT(c.cosine, 0.999);
}

TEST(CudaQdqEngine, AsymmetricQdqModelStillNeedsACalibrationCache_n) {
  EI_SKIP_WITHOUT_GPU();
  test::TempDir dir;
  const Block b;
  const ActScales s{0.01f, 0.02f, 0.03f};
  QdqSpec uint8;
  uint8.zpType = onnx::TensorProto::UINT8;
  uint8.zeroPoint = 128;
  const std::string bytes = resBlock(b, &s, uint8).bytes();
  auto e = Builder::buildFromBuffer(bytes.data(), bytes.size(), gpuConfig(Precision::kInt8, dir));
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("calibration cache"), std::string::npos)
      << e.status().toString();
}

TEST(CudaQdqEngine, SwitchedOffExplicitQuantizationNeedsACalibrationCache_n) {
  EI_SKIP_WITHOUT_GPU();
  test::TempDir dir;
  const Block b;
  const ActScales s{0.01f, 0.02f, 0.03f};
  const std::string bytes = resBlock(b, &s).bytes();
  BuilderConfig cfg = gpuConfig(Precision::kInt8, dir);
  cfg.passes.explicitQuantization = false;
  auto e = Builder::buildFromBuffer(bytes.data(), bytes.size(), cfg);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("calibration cache"), std::string::npos)
      << e.status().toString();
}

// ---- QOperator layers (QLinearConv, QLinearMatMul), lowered to Q/DQ for the GPU ------------

/// Max difference, in output steps, of a GPU engine of `m` against the CPU engine (which runs
/// the QOperator layers in exact integer arithmetic); its fallback layer count in `cpuLayers`.
/// At FP16 the dequantized float output may be stored in float16, whose rounding (at most
/// 2^-11 of the value) is not counted against the steps.
double qoperatorSteps(const test::TestModel& m, const Shape& xShape, float step, Precision p,
                      const test::TempDir& dir, bool lower, int* cpuLayers) {
  const std::string bytes = m.bytes();
  BuilderConfig cpu;
  cpu.backend = Backend::kCpu;
  auto ce = Builder::buildFromBuffer(bytes.data(), bytes.size(), cpu);
  EXPECT_TRUE(ce.ok()) << ce.status().toString();
  BuilderConfig g = gpuConfig(p, dir);
  g.passes.lowerQOperators = lower;
  auto ge = Builder::buildFromBuffer(bytes.data(), bytes.size(), g);
  EXPECT_TRUE(ge.ok()) << ge.status().toString();
  if (!ce.ok() || !ge.ok()) return 1e9;
  auto cc = (*ce)->createExecutionContext();
  auto gc = (*ge)->createExecutionContext();
  if (!cc.ok() || !gc.ok()) return 1e9;
  Tensor x = Tensor::zeros(DataType::kFloat32, xShape);
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = u(rng);
  double worst = 0;
  for (int run = 0; run < 2; ++run) {
    auto want = (*cc)->run({{"x", x}});
    auto got = (*gc)->run({{"x", x}});
    EXPECT_TRUE(want.ok() && got.ok());
    if (!want.ok() || !got.ok()) return 1e9;
    const Tensor& a = got->at("y");
    const Tensor& b = want->at("y");
    for (int64_t i = 0; i < b.numel(); ++i) {
      const double storage = p == Precision::kFp16 ? std::fabs(b.getAsDouble(i)) / 2048.0 : 0.0;
      const double diff = std::fabs(a.getAsDouble(i) - b.getAsDouble(i)) - storage;
      worst = std::max(worst, diff / step);
    }
  }
  *cpuLayers = (*gc)->stats().cpuFallbackLayers;
  return worst;
}

TEST(CudaQOperator, QLinearConvAndMatMulRunOnTheGpuWithinOneStep) {
  EI_SKIP_WITHOUT_GPU();
  test::TempDir dir;
  for (Precision p : {Precision::kFp32, Precision::kFp16}) {
    int cpuLayers = -1;
    const double conv = qoperatorSteps(test::qlinearConvModel(), Shape{1, 3, 9, 8}, 0.05f, p, dir,
                                       true, &cpuLayers);
    EXPECT_EQ(cpuLayers, 0);
    const double mm =
        qoperatorSteps(test::qlinearMatMulModel(), Shape{2, 6, 7}, 0.04f, p, dir, true, &cpuLayers);
    EXPECT_EQ(cpuLayers, 0);
    std::printf("[          ] %s: QLinearConv within %.2f steps, QLinearMatMul within %.2f\n",
                precisionName(p), conv, mm);
    EXPECT_LE(conv, 1.001);
    EXPECT_LE(mm, 1.001);
  }
}

TEST(CudaQOperator, WithoutLoweringTheyRunExactlyOnTheCpuFallback) {
  EI_SKIP_WITHOUT_GPU();
  test::TempDir dir;
  int cpuLayers = -1;
  const double steps = qoperatorSteps(test::qlinearConvModel(), Shape{1, 3, 9, 8}, 0.05f,
                                      Precision::kFp32, dir, false, &cpuLayers);
  EXPECT_EQ(cpuLayers, 1);
  EXPECT_EQ(steps, 0.0);
}

}  // namespace
}  // namespace edgeinfer

#else

TEST(CudaQdqEngine, RequiresCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif
