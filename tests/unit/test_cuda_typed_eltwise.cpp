// The `cuda` provider's typed elementwise tactics against the CPU reference: Cast between every
// storage type (float truncation, saturation and NaN, integer wrap-around, bool), Cast to a
// float16 kept in float32 storage (rounded), the comparisons on float and integer tensors with
// broadcasting, And / Or / Xor / Not, Where (broadcast condition, float and integer values),
// IsNaN / IsInf (with detect_negative / detect_positive), integer Add / Sub / Mul / Div / Mod,
// and QuantizeLinear / DequantizeLinear (int8, uint8, int32; per tensor and per channel, in
// both layouts). Every result is exact (a dequantized FP16 result up to its rounding). Negative
// cases (_n): layers the provider must not offer tactics for (they need no GPU).
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "cuda_layer_case.h"

namespace edgeinfer {
namespace {

using graph::Attribute;
using test::ids;
using test::intTensor;
using test::LayerCase;
using test::randomHalfExact;
using test::randomInts;

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

/// The id suffix of a storage type, as the provider names it.
std::string storage(DataType t) {
  switch (t) {
    case DataType::kFloat16:
      return "fp16";
    case DataType::kInt32:
      return "i32";
    case DataType::kInt64:
      return "i64";
    case DataType::kInt8:
      return "i8";
    case DataType::kUInt8:
      return "u8";
    case DataType::kBool:
      return "bool";
    default:
      return "fp32";
  }
}

/// Storage types a tensor of logical type t may take at FP16 precision.
std::vector<DataType> storages(DataType t) {
  if (t == DataType::kFloat32 || t == DataType::kFloat16)
    return {DataType::kFloat16, DataType::kFloat32};
  return {t};
}

bool isFloat(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16;
}

/// A float input of an op with an exact (integer / bool) result is read in float32 only.
std::vector<DataType> exactInput(DataType from, DataType to) {
  if (isFloat(from) && !isFloat(to)) return {DataType::kFloat32};
  return storages(from);
}

std::set<std::string> castIds(DataType from, DataType to, const std::string& layout) {
  std::set<std::string> s;
  for (DataType a : exactInput(from, to))
    for (DataType b : storages(to))
      s.insert("cuda.cast." + storage(a) + "-" + storage(b) + "." + layout);
  return s;
}

/// A tensor of `dt` with the given values (converted).
Tensor valuesOf(DataType dt, const std::vector<double>& v, const Shape& s) {
  Tensor t = Tensor::zeros(dt, s);
  for (size_t i = 0; i < v.size(); ++i) {
    switch (dt) {
      case DataType::kFloat32:
        t.data<float>()[i] = static_cast<float>(v[i]);
        break;
      case DataType::kFloat16:
        t.data<uint16_t>()[i] = floatToHalf(static_cast<float>(v[i]));
        break;
      case DataType::kInt64:
        t.data<int64_t>()[i] = static_cast<int64_t>(v[i]);
        break;
      case DataType::kInt32:  // integers wrap into the narrower types
        t.data<int32_t>()[i] = static_cast<int32_t>(static_cast<int64_t>(v[i]));
        break;
      case DataType::kInt8:
        t.data<int8_t>()[i] = static_cast<int8_t>(static_cast<int64_t>(v[i]));
        break;
      default:  // uint8, bool
        t.data<uint8_t>()[i] = static_cast<uint8_t>(static_cast<int64_t>(v[i]));
        break;
    }
  }
  return t;
}

// ---- Cast -----------------------------------------------------------------------------------

TEST(CudaTyped, CastFromFloat) {
  EI_SKIP_WITHOUT_GPU();
  // FP16-representable values: truncation toward zero, saturation, NaN -> 0, NaN -> true.
  const std::vector<double> v = {0.0,  -0.0,  0.5,   -0.5,   1.75,  -1.75, 127.5, 128.0,
                                 -129, 255.5, 256.0, 300.0,  -300., 1e4,   -1e4,  kNaN,
                                 kInf, -kInf, 3.25,  -7.125, 65504, 2.0,   -2.0,  0.25};
  const Tensor x = valuesOf(DataType::kFloat32, v, Shape{4, 6});
  for (DataType to : {DataType::kInt32, DataType::kInt64, DataType::kInt8, DataType::kUInt8,
                      DataType::kBool, DataType::kFloat16, DataType::kFloat32}) {
    LayerCase c("Cast");
    c.attr("to", Attribute::Int(static_cast<int64_t>(to)));
    c.input(x);
    SCOPED_TRACE(std::string("to ") + dataTypeName(to));
    c.check(castIds(DataType::kFloat32, to, "linear"), 0, 0);
  }
}

TEST(CudaTyped, CastFromIntegersAndBool) {
  EI_SKIP_WITHOUT_GPU();
  // Wrap-around between integer types; FP16-representable values towards floats (a float32
  // result may be stored as FP16 at FP16 precision).
  const std::vector<double> wide = {0, 1, -1, 127, -128, 255, 256, -300, 70000, -70000, 2047, 3};
  const std::vector<double> small = {0, 1, -1, 127, -128, 255, 256, -300, 2047, -2048, 100, 3};
  uint32_t seed = 10;
  for (DataType from :
       {DataType::kInt64, DataType::kInt32, DataType::kInt8, DataType::kUInt8, DataType::kBool}) {
    for (DataType to : {DataType::kInt64, DataType::kInt32, DataType::kInt8, DataType::kUInt8,
                        DataType::kBool, DataType::kFloat32, DataType::kFloat16}) {
      if (to == from) continue;
      const bool toFloat = to == DataType::kFloat32 || to == DataType::kFloat16;
      Tensor x = from == DataType::kBool ? randomInts(Shape{3, 4}, from, seed++, 0, 1)
                                         : valuesOf(from, toFloat ? small : wide, Shape{3, 4});
      LayerCase c("Cast");
      c.attr("to", Attribute::Int(static_cast<int64_t>(to)));
      c.input(x);
      SCOPED_TRACE(std::string(dataTypeName(from)) + " to " + dataTypeName(to));
      c.check(castIds(from, to, "linear"), 0, 0);
    }
  }
}

TEST(CudaTyped, CastFourDimensionalInBothLayouts) {
  EI_SKIP_WITHOUT_GPU();
  LayerCase c("Cast");
  c.attr("to", Attribute::Int(static_cast<int64_t>(DataType::kInt64)));
  c.input(randomHalfExact(Shape{2, 3, 5, 7}, 3, -50.f, 50.f));
  auto want = castIds(DataType::kFloat32, DataType::kInt64, "nchw");
  for (const auto& id : castIds(DataType::kFloat32, DataType::kInt64, "nhwc")) want.insert(id);
  c.check(want, 0, 0);
}

// A float16 result kept in float32 storage (FP32 precision) is still rounded to float16.
TEST(CudaTyped, CastToFloat16InFloat32StorageRounds) {
  EI_SKIP_WITHOUT_GPU();
  const float in[4] = {1.0001f, 3.14159265f, 1e-7f, 70000.f};
  Tensor x = Tensor::zeros(DataType::kFloat32, Shape{4});
  std::memcpy(x.raw(), in, sizeof(in));
  LayerCase c("Cast");
  c.attr("to", Attribute::Int(static_cast<int64_t>(DataType::kFloat16)));
  c.input(x);
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  cuda::CudaKernelProvider provider;
  auto cands = provider.candidates(layer, Precision::kFp32);
  ASSERT_EQ(cands.size(), 1u);
  auto& t = *cands[0];
  EXPECT_EQ(t.id(), "cuda.cast.fp32-fp32.linear");
  ASSERT_TRUE(t.initialize(layer).ok());
  void *dx = nullptr, *dy = nullptr;
  ASSERT_EQ(cudaMalloc(&dx, sizeof(in)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&dy, sizeof(in)), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(dx, in, sizeof(in), cudaMemcpyHostToDevice), cudaSuccess);
  builder::LaunchArgs args;
  args.inputs = {dx};
  args.outputs = {dy};
  EXPECT_TRUE(t.enqueue(args).ok());
  float out[4] = {};
  ASSERT_EQ(cudaMemcpy(out, dy, sizeof(out), cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(dx);
  cudaFree(dy);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out[i], halfToFloat(floatToHalf(in[i]))) << in[i];
}

// ---- Comparisons ----------------------------------------------------------------------------

struct PairShapes {
  Shape a, b;
};

const std::vector<PairShapes>& pairShapes() {
  static const std::vector<PairShapes> kShapes = {
      {Shape{2, 3, 7, 5}, Shape{2, 3, 7, 5}}, {Shape{2, 1, 7, 1}, Shape{3, 1, 5}},
      {Shape{2, 16, 9, 8}, Shape{16, 1, 1}},  {Shape{1, 13}, Shape{13}},
      {Shape{4, 1, 6}, Shape{5, 1}},          {Shape{7}, Shape{1}},
  };
  return kShapes;
}

TEST(CudaTyped, ComparisonsOnFloats) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 100;
  for (const char* op : {"Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual"}) {
    for (const auto& ps : pairShapes()) {
      // Small integers: many equal pairs.
      Tensor a = randomHalfExact(ps.a, seed++, -3.f, 3.f),
             b = randomHalfExact(ps.b, seed++, -3.f, 3.f);
      for (Tensor* t : {&a, &b})
        for (int64_t i = 0; i < t->numel(); ++i)
          t->data<float>()[i] = std::round(t->data<float>()[i]);
      if (a.numel() > 2) a.data<float>()[1] = kNaN;  // NaN compares false (Equal too)
      LayerCase c(op);
      c.input(a).input(b);
      builder::LayerContext layer;
      ASSERT_TRUE(c.layer(&layer).ok());
      const std::string lay = layer.outputShapes[0].rank() == 4 ? "nchw" : "linear";
      // Float comparisons read float32 (an FP16 copy could flip them).
      std::set<std::string> want = {"cuda.compare.fp32-bool." + lay};
      if (lay == "nchw") want.insert("cuda.compare.fp32-bool.nhwc");
      SCOPED_TRACE(std::string(op) + " " + ps.a.toString() + " vs " + ps.b.toString());
      c.check(want, 0, 0);
    }
  }
}

TEST(CudaTyped, ComparisonsOnIntegersAndBool) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 200;
  for (DataType t : {DataType::kInt64, DataType::kInt32, DataType::kInt8, DataType::kUInt8}) {
    for (const char* op : {"Equal", "Greater", "LessOrEqual"}) {
      LayerCase c(op);
      // int64 values beyond 2^53 must compare exactly, not through double.
      Tensor a = randomInts(Shape{3, 5}, t, seed++, -4, 4);
      Tensor b = randomInts(Shape{5}, t, seed++, -4, 4);
      if (t == DataType::kInt64) {
        a.data<int64_t>()[0] = (int64_t{1} << 60) + 1;
        b.data<int64_t>()[0] = int64_t{1} << 60;
      }
      c.input(a).input(b);
      c.check({"cuda.compare." + storage(t) + "-bool.linear"}, 0, 0);
    }
  }
  LayerCase c("Equal");
  c.input(randomInts(Shape{4, 3}, DataType::kBool, seed + 0, 0, 1))
      .input(randomInts(Shape{3}, DataType::kBool, seed + 1, 0, 1));
  seed += 2;
  c.check({"cuda.compare.bool.linear"}, 0, 0);  // bool in, bool out
}

// ---- Logic, Where, IsNaN / IsInf ------------------------------------------------------------

TEST(CudaTyped, AndOrXorNot) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 300;
  for (const char* op : {"And", "Or", "Xor"}) {
    for (const auto& ps : pairShapes()) {
      LayerCase c(op);
      c.input(randomInts(ps.a, DataType::kBool, seed + 0, 0, 1))
          .input(randomInts(ps.b, DataType::kBool, seed + 1, 0, 1));
      seed += 2;
      builder::LayerContext layer;
      ASSERT_TRUE(c.layer(&layer).ok());
      const bool r4 = layer.outputShapes[0].rank() == 4;
      c.check(r4 ? ids("logic", {"bool"}, {"nchw", "nhwc"}) : ids("logic", {"bool"}, {"linear"}), 0,
              0);
    }
  }
  LayerCase c("Not");
  c.input(randomInts(Shape{3, 7}, DataType::kBool, seed++, 0, 1));
  c.check({"cuda.logic.bool.linear"}, 0, 0);
}

TEST(CudaTyped, WhereBroadcastsEveryOperand) {
  EI_SKIP_WITHOUT_GPU();
  struct Case {
    Shape cond, x, y;
  };
  const std::vector<Case> cases = {
      {Shape{2, 3, 4, 5}, Shape{2, 3, 4, 5}, Shape{2, 3, 4, 5}},
      {Shape{1, 1, 4, 5}, Shape{2, 3, 4, 5}, Shape{1}},  // attention-mask style
      {Shape{3, 1}, Shape{1, 6}, Shape{3, 6}},
      {Shape{7}, Shape{}, Shape{7}},
  };
  uint32_t seed = 400;
  for (const auto& wc : cases) {
    LayerCase c("Where");
    c.input(randomInts(wc.cond, DataType::kBool, seed + 0, 0, 1))
        .input(randomHalfExact(wc.x, seed + 1))
        .input(randomHalfExact(wc.y, seed + 2));
    seed += 3;
    builder::LayerContext layer;
    ASSERT_TRUE(c.layer(&layer).ok());
    const bool r4 = layer.outputShapes[0].rank() == 4;
    c.check(r4 ? ids("where", {"fp16", "fp32"}, {"nchw", "nhwc"})
               : ids("where", {"fp16", "fp32"}, {"linear"}),
            0, 0);
  }
  for (DataType t : {DataType::kInt64, DataType::kInt32, DataType::kUInt8}) {
    LayerCase c("Where");
    c.input(randomInts(Shape{5, 1}, DataType::kBool, seed + 0, 0, 1))
        .input(randomInts(Shape{5, 3}, t, seed + 1, 0, 100))
        .input(randomInts(Shape{3}, t, seed + 2, 0, 100));
    seed += 3;
    c.check({"cuda.where." + storage(t) + ".linear"}, 0, 0);
  }
}

TEST(CudaTyped, IsNaNAndIsInf) {
  EI_SKIP_WITHOUT_GPU();
  const Tensor x =
      valuesOf(DataType::kFloat32, {0, kNaN, kInf, -kInf, 1.5, -2, kNaN, 65504}, Shape{2, 4});
  {
    LayerCase c("IsNaN");
    c.input(x);
    c.check(ids("classify", {"fp32-bool"}, {"linear"}), 0, 0);
  }
  for (int64_t neg : {0, 1}) {
    for (int64_t pos : {0, 1}) {
      LayerCase c("IsInf");
      c.attr("detect_negative", Attribute::Int(neg)).attr("detect_positive", Attribute::Int(pos));
      c.input(x);
      c.check(ids("classify", {"fp32-bool"}, {"linear"}), 0, 0);
    }
  }
}

// ---- Integer arithmetic ---------------------------------------------------------------------

TEST(CudaTyped, IntegerArithmetic) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 500;
  for (DataType t : {DataType::kInt64, DataType::kInt32, DataType::kInt8, DataType::kUInt8}) {
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Mod"}) {
      for (int64_t fmod : {0, 1}) {
        if (fmod && std::string(op) != "Mod") continue;
        LayerCase c(op);
        if (fmod) c.attr("fmod", Attribute::Int(1));
        const bool u8 = t == DataType::kUInt8;
        Tensor a = randomInts(Shape{4, 6}, t, seed++, u8 ? 0 : -100, u8 ? 255 : 100);
        Tensor b = randomInts(Shape{6}, t, seed++, u8 ? 1 : -9, 9);
        for (int64_t i = 0; i < b.numel(); ++i)  // no zero divisors (the reference rejects them)
          if (b.getAsInt64(i) == 0)
            b = valuesOf(t, {3., u8 ? 4. : -4., 7., u8 ? 1. : -1., 5., 2.}, Shape{6});
        if (t == DataType::kInt32) a.data<int32_t>()[0] = std::numeric_limits<int32_t>::max();
        c.input(a).input(b);
        SCOPED_TRACE(std::string(op) + " " + dataTypeName(t) + " fmod " + std::to_string(fmod));
        c.check({"cuda.intarith." + storage(t) + ".linear"}, 0, 0);
      }
    }
  }
}

TEST(CudaTyped, IntegerMinMaxPow) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 700;
  for (DataType t : {DataType::kInt64, DataType::kInt32, DataType::kInt8, DataType::kUInt8}) {
    for (const char* op : {"Min", "Max", "Pow"}) {
      LayerCase c(op);
      const bool u8 = t == DataType::kUInt8;
      const bool pow = std::string(op) == "Pow";
      Tensor a = randomInts(Shape{3, 5, 4}, t, seed++, u8 ? 0 : -100, u8 ? 255 : 100);
      // Pow: exponents from -2 (saturated pow(): 0 ** -1 is the type's max) to 9 (wraps).
      Tensor b = pow ? randomInts(Shape{5, 1}, t, seed++, u8 ? 0 : -2, 9)
                     : randomInts(Shape{5, 1}, t, seed++, u8 ? 0 : -100, u8 ? 255 : 100);
      if (pow) std::memset(a.raw(), 0, dataTypeSize(t));  // 0 to a negative power, if b has one
      c.input(a).input(b);
      SCOPED_TRACE(std::string(op) + " " + dataTypeName(t));
      c.check({"cuda.intarith." + storage(t) + ".linear"}, 0, 0);
    }
  }
}

TEST(CudaTyped, BitShift) {
  EI_SKIP_WITHOUT_GPU();
  for (const char* dir : {"LEFT", "RIGHT"}) {
    LayerCase c("BitShift");
    c.attr("direction", Attribute::String(dir));
    // Shifts from 0 to 10: 8 and over give 0, as in the reference.
    c.input(randomInts(Shape{2, 7, 3}, DataType::kUInt8, 11, 0, 255))
        .input(randomInts(Shape{7, 1}, DataType::kUInt8, 12, 0, 10));
    SCOPED_TRACE(dir);
    c.check({"cuda.intarith.u8.linear"}, 0, 0);
  }
}

TEST(CudaTyped, MatMulInteger) {
  EI_SKIP_WITHOUT_GPU();
  struct Case {
    Shape a, b;
    DataType ta, tb;
    int zeroPoints;                  // 0: none; 1: per tensor; 2: A's per row, B's per column
    bool runtimeZeroPoints = false;  // as DynamicQuantizeLinear gives them
  };
  const std::vector<Case> cases = {
      {Shape{5, 7}, Shape{7, 3}, DataType::kUInt8, DataType::kUInt8, 0},
      {Shape{5, 7}, Shape{7, 3}, DataType::kUInt8, DataType::kInt8, 1},
      {Shape{2, 4, 9}, Shape{9, 6}, DataType::kInt8, DataType::kInt8, 2},
      {Shape{3, 1, 4, 5}, Shape{2, 5, 3}, DataType::kInt8, DataType::kUInt8, 1},  // broadcast
      {Shape{7}, Shape{7, 4}, DataType::kUInt8, DataType::kUInt8, 1},             // 1-D A
      {Shape{6, 300}, Shape{300, 5}, DataType::kUInt8, DataType::kInt8, 2},       // long K
      {Shape{3, 5, 8}, Shape{8, 6}, DataType::kUInt8, DataType::kInt8, 1, true},
      {Shape{4, 9}, Shape{9, 5}, DataType::kInt8, DataType::kUInt8, 2, true},
  };
  uint32_t seed = 800;
  for (const Case& k : cases) {
    LayerCase c("MatMulInteger");
    const auto range = [](DataType t, int64_t* lo, int64_t* hi) {
      *lo = t == DataType::kUInt8 ? 0 : -128;
      *hi = t == DataType::kUInt8 ? 255 : 127;
    };
    int64_t loA, hiA, loB, hiB;
    range(k.ta, &loA, &hiA);
    range(k.tb, &loB, &hiB);
    const Tensor a = randomInts(k.a, k.ta, seed++, loA, hiA);
    const Tensor b = randomInts(k.b, k.tb, seed++, loB, hiB);
    c.input(a).input(b);
    if (k.zeroPoints > 0) {
      const int64_t m = k.a.rank() == 1 ? 1 : k.a[k.a.rank() - 2], n = k.b[k.b.rank() - 1];
      Tensor za = randomInts(k.zeroPoints == 2 ? Shape{m} : Shape{}, k.ta, seed++, loA, hiA);
      Tensor zb = randomInts(k.zeroPoints == 2 ? Shape{n} : Shape{}, k.tb, seed++, loB, hiB);
      if (k.runtimeZeroPoints)
        c.input(za).input(zb);
      else
        c.constant(za).constant(zb);
    }
    SCOPED_TRACE(k.a.toString() + " x " + k.b.toString() +
                 (k.runtimeZeroPoints ? ", run-time zero points" : ""));
    c.check({"cuda.intmatmul." + storage(k.ta) + "-" + storage(k.tb)}, 0, 0);
  }
}

TEST(CudaTyped, MatMulIntegerZeroPointOfRankTwo_n) {
  // A's zero points as an [M, 1] column (the reference reads them per row): the kernel takes
  // one value or [M]; the CPU runs the layer.
  const Shape col{2, 1};
  LayerCase c("MatMulInteger");
  c.input(randomInts(Shape{2, 3}, DataType::kUInt8, 1, 0, 255))
      .input(randomInts(Shape{3, 2}, DataType::kUInt8, 2, 0, 255))
      .input(randomInts(col, DataType::kUInt8, 3, 0, 255));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaTyped, IntegerLayersTakeRunTimeZeroPoints) {
  // Zero points computed at run time (DynamicQuantizeLinear's) are GPU layers; none are
  // consumed at build time (they are ordinary inputs in their operand's type).
  cuda::CudaKernelProvider provider;
  LayerCase mm("MatMulInteger");
  mm.input(randomInts(Shape{2, 3}, DataType::kUInt8, 1, 0, 255))
      .input(randomInts(Shape{3, 2}, DataType::kInt8, 2, -128, 127))
      .input(randomInts(Shape{}, DataType::kUInt8, 3, 0, 255))
      .constant(randomInts(Shape{}, DataType::kInt8, 4, -128, 127));
  builder::LayerContext layer;
  ASSERT_TRUE(mm.layer(&layer).ok());
  auto t = provider.candidates(layer, Precision::kFp16);
  ASSERT_EQ(t.size(), 1u);
  EXPECT_FALSE(t[0]->consumesInput(3));
  EXPECT_EQ(t[0]->inputFormat(2).dtype, DataType::kUInt8);
  EXPECT_EQ(t[0]->inputFormat(3).dtype, DataType::kInt8);
  LayerCase conv("ConvInteger");
  conv.input(randomInts(Shape{1, 2, 4, 4}, DataType::kUInt8, 1, 0, 255))
      .constant(randomInts(Shape{3, 2, 3, 3}, DataType::kUInt8, 2, 0, 255))
      .input(randomInts(Shape{}, DataType::kUInt8, 3, 0, 255));
  builder::LayerContext convLayer;
  ASSERT_TRUE(conv.layer(&convLayer).ok());
  EXPECT_EQ(provider.candidates(convLayer, Precision::kFp16).size(), 1u);
}

TEST(CudaTyped, ConvInteger) {
  EI_SKIP_WITHOUT_GPU();
  struct Case {
    Shape x, w;
    DataType tx, tw;
    int zeroPoints;  // 0: none; 1: per tensor; 2: W's per output channel
    std::vector<std::pair<std::string, graph::Attribute>> attrs;
    bool weightsAsInput = false;
    bool runtimeZeroPoints = false;
  };
  using graph::Attribute;
  const std::vector<Case> cases = {
      {Shape{1, 3, 7, 9},
       Shape{4, 3, 3, 3},
       DataType::kUInt8,
       DataType::kUInt8,
       0,
       {{"pads", Attribute::Ints({1, 1, 1, 1})}}},
      {Shape{2, 4, 9, 8},
       Shape{6, 2, 3, 2},
       DataType::kInt8,
       DataType::kInt8,
       2,
       {{"group", Attribute::Int(2)},
        {"strides", Attribute::Ints({2, 1})},
        {"dilations", Attribute::Ints({1, 2})},
        {"pads", Attribute::Ints({1, 0, 2, 1})}}},
      {Shape{2, 3, 11},
       Shape{5, 3, 4},
       DataType::kUInt8,
       DataType::kInt8,
       1,
       {{"auto_pad", Attribute::String("SAME_UPPER")}},
       true},
      {Shape{1, 2, 4, 5, 6},
       Shape{3, 2, 2, 3, 2},
       DataType::kInt8,
       DataType::kUInt8,
       1,
       {{"pads", Attribute::Ints({0, 1, 1, 1, 0, 0})}}},
      {Shape{1, 64, 5, 5}, Shape{8, 64, 3, 3}, DataType::kUInt8, DataType::kUInt8, 2, {}},
      {Shape{1, 6, 13, 5},
       Shape{6, 1, 3, 3},
       DataType::kInt8,
       DataType::kInt8,
       1,  // depthwise
       {{"group", Attribute::Int(6)}, {"pads", Attribute::Ints({1, 1, 1, 1})}}},
      {Shape{2, 3, 6, 7},
       Shape{4, 3, 2, 2},
       DataType::kUInt8,
       DataType::kInt8,
       2,
       {{"strides", Attribute::Ints({2, 2})}},
       false,
       true},
  };
  const auto range = [](DataType t, int64_t* lo, int64_t* hi) {
    *lo = t == DataType::kUInt8 ? 0 : -128;
    *hi = t == DataType::kUInt8 ? 255 : 127;
  };
  uint32_t seed = 900;
  for (const Case& k : cases) {
    LayerCase c("ConvInteger");
    for (const auto& [name, a] : k.attrs) c.attr(name, a);
    int64_t loX, hiX, loW, hiW;
    range(k.tx, &loX, &hiX);
    range(k.tw, &loW, &hiW);
    c.input(randomInts(k.x, k.tx, seed++, loX, hiX));
    const Tensor w = randomInts(k.w, k.tw, seed++, loW, hiW);
    if (k.weightsAsInput)
      c.input(w);
    else
      c.constant(w);
    if (k.zeroPoints > 0) {
      Tensor zx = randomInts(Shape{}, k.tx, seed++, loX, hiX);
      Tensor zw = randomInts(k.zeroPoints == 2 ? Shape{k.w[0]} : Shape{}, k.tw, seed++, loW, hiW);
      if (k.runtimeZeroPoints)
        c.input(zx).input(zw);
      else
        c.constant(zx).constant(zw);
    }
    SCOPED_TRACE(k.x.toString() + " * " + k.w.toString());
    c.check({"cuda.intconv." + storage(k.tx) + "-" + storage(k.tw)}, 0, 0);
  }
}

TEST(CudaTyped, ConvIntegerOfFourSpatialDims_n) {
  // The kernel takes 1 to 3 spatial dims.
  LayerCase c("ConvInteger");
  c.input(randomInts(Shape{1, 1, 3, 3, 3, 3}, DataType::kUInt8, 1, 0, 255))
      .constant(randomInts(Shape{1, 1, 2, 2, 2, 2}, DataType::kUInt8, 2, 0, 255));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaTyped, DynamicQuantizeLinear) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 950;
  struct Case {
    Shape x;
    float lo, hi;
  };
  // Mixed signs, all positive (zero point 0), all negative (zero point 255), one element, and
  // enough elements for every block of the range reduction (odd count). Half-exact values:
  // many land on rounding ties.
  for (const Case& k : {Case{Shape{2, 3, 5}, -3.f, 2.f}, Case{Shape{4, 7}, 0.5f, 4.f},
                        Case{Shape{9}, -6.f, -1.f}, Case{Shape{1}, -0.25f, -0.25f},
                        Case{Shape{3, 100001}, -1.5f, 7.f}, Case{Shape{2, 3, 4, 5}, -1.f, 1.f}}) {
    LayerCase c("DynamicQuantizeLinear");
    c.outputs(3);
    c.input(randomHalfExact(k.x, seed++, k.lo, k.hi));
    SCOPED_TRACE(k.x.toString());
    c.check({"cuda.dynquant.fp32." + std::string(k.x.rank() == 4 ? "nchw" : "linear")}, 0, 0);
  }
  // Zeros (scale 0), and a NaN.
  LayerCase z("DynamicQuantizeLinear");
  z.outputs(3);
  z.input(Tensor::zeros(DataType::kFloat32, Shape{5, 3}));
  z.check({"cuda.dynquant.fp32.linear"}, 0, 0);
  Tensor odd = randomHalfExact(Shape{6}, seed++, -2.f, 2.f);
  odd.data<float>()[1] = NAN;
  LayerCase n("DynamicQuantizeLinear");
  n.outputs(3);
  n.input(odd);
  n.check({"cuda.dynquant.fp32.linear"}, 0, 0);
}

TEST(CudaTyped, DynamicQuantizeLinearWithOtherOutputTypes_n) {
  // The kernels write y in uint8, its scale in float32 and its zero point in uint8.
  LayerCase c("DynamicQuantizeLinear");
  c.outputs(3);
  c.input(randomHalfExact(Shape{4}, 1, -1.f, 1.f));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  cuda::CudaKernelProvider provider;
  EXPECT_EQ(provider.candidates(layer, Precision::kFp16).size(), 1u);
  layer.outputTypes[1] = DataType::kFloat16;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaTyped, MinOfThreeIntegers_n) {
  // Min and Max of three or more inputs: not these kernels' (they take two).
  LayerCase c("Min");
  c.input(randomInts(Shape{3}, DataType::kInt32, 1))
      .input(randomInts(Shape{3}, DataType::kInt32, 2))
      .input(randomInts(Shape{3}, DataType::kInt32, 3));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaTyped, BitShiftOnSignedIntegers_n) {
  LayerCase c("BitShift");
  c.attr("direction", Attribute::String("LEFT"));
  c.input(randomInts(Shape{3}, DataType::kUInt8, 1))
      .input(randomInts(Shape{3}, DataType::kUInt8, 2));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  layer.inputTypes[0] = layer.inputTypes[1] = layer.outputTypes[0] = DataType::kInt32;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaTyped, PowWithAFloatExponent_n) {
  // Pow of integers by a float exponent: not these kernels' (the CPU runs it).
  LayerCase c("Pow");
  c.input(randomInts(Shape{3}, DataType::kInt32, 1)).input(randomHalfExact(Shape{3}, 2));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

// ---- QuantizeLinear / DequantizeLinear ------------------------------------------------------

std::set<std::string> quantIds(const std::string& family, DataType from, DataType to, size_t rank) {
  std::set<std::string> s;
  for (const char* lay :
       rank == 4 ? std::vector<const char*>{"nchw", "nhwc"} : std::vector<const char*>{"linear"})
    for (DataType a : exactInput(from, to))
      for (DataType b : storages(to))
        s.insert("cuda." + family + "." + storage(a) + "-" + storage(b) + "." + lay);
  return s;
}

struct QuantCase {
  Shape x;
  int64_t axis;  // with per-channel scales
  bool perChannel;
};

const std::vector<QuantCase>& quantCases() {
  static const std::vector<QuantCase> kCases = {
      {Shape{2, 3, 5, 7}, 1, false}, {Shape{2, 3, 5, 7}, 1, true}, {Shape{2, 3, 5, 7}, 2, true},
      {Shape{6, 9}, 0, true},        {Shape{6, 9}, -1, true},      {Shape{11}, 0, false},
  };
  return kCases;
}

/// Scales (including ones that are not powers of two) and zero points for a case.
void addQuantParams(LayerCase& c, const QuantCase& qc, DataType zpType, uint32_t seed) {
  const int64_t n = qc.perChannel
                        ? qc.x[static_cast<size_t>(
                              qc.axis < 0 ? qc.axis + static_cast<int64_t>(qc.x.rank()) : qc.axis)]
                        : 1;
  std::vector<float> scales;
  for (int64_t i = 0; i < n; ++i) scales.push_back(i % 2 ? 0.0123f * (i + 1) : 0.03125f);
  Tensor s = Tensor::zeros(DataType::kFloat32, qc.perChannel ? Shape{n} : Shape{});
  for (int64_t i = 0; i < n; ++i) s.data<float>()[i] = scales[static_cast<size_t>(i)];
  c.constant(s);
  const int64_t lo = zpType == DataType::kUInt8 ? 100 : -20,
                hi = zpType == DataType::kUInt8 ? 140 : 20;
  c.constant(randomInts(qc.perChannel ? Shape{n} : Shape{}, zpType, seed, lo, hi));
  if (qc.perChannel) c.attr("axis", Attribute::Int(qc.axis));
}

TEST(CudaTyped, QuantizeLinear) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 600;
  for (DataType q : {DataType::kInt8, DataType::kUInt8}) {
    for (const auto& qc : quantCases()) {
      LayerCase c("QuantizeLinear");
      // Half-exact inputs, some saturating, so FP16 storage quantizes the same values.
      Tensor x = randomHalfExact(qc.x, seed++, -6.f, 6.f);
      if (x.numel() > 3) x.data<float>()[2] = kNaN;  // NaN gives the zero point
      c.input(x);
      addQuantParams(c, qc, q, seed++);
      SCOPED_TRACE(std::string(dataTypeName(q)) + " " + qc.x.toString() + " axis " +
                   std::to_string(qc.axis) + (qc.perChannel ? " per channel" : ""));
      c.check(quantIds("quantize", DataType::kFloat32, q, qc.x.rank()), 0, 0);
    }
  }
}

TEST(CudaTyped, DequantizeLinear) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 700;
  for (DataType q : {DataType::kInt8, DataType::kUInt8, DataType::kInt32}) {
    for (const auto& qc : quantCases()) {
      LayerCase c("DequantizeLinear");
      const int64_t lo = q == DataType::kUInt8 ? 0 : -128, hi = q == DataType::kUInt8 ? 255 : 127;
      c.input(randomInts(qc.x, q, seed++, lo, hi));
      if (q == DataType::kInt32) {  // an int32 input has no zero point (or zero)
        const int64_t n =
            qc.perChannel ? qc.x[static_cast<size_t>(qc.axis < 0 ? qc.axis + 2 : qc.axis)] : 1;
        Tensor s = Tensor::zeros(DataType::kFloat32, qc.perChannel ? Shape{n} : Shape{});
        for (int64_t i = 0; i < n; ++i) s.data<float>()[i] = 0.001f * static_cast<float>(i + 1);
        c.constant(s);
        if (qc.perChannel) c.attr("axis", Attribute::Int(qc.axis));
      } else {
        addQuantParams(c, qc, q, seed++);
      }
      SCOPED_TRACE(std::string(dataTypeName(q)) + " " + qc.x.toString() + " axis " +
                   std::to_string(qc.axis) + (qc.perChannel ? " per channel" : ""));
      c.check(quantIds("dequantize", q, DataType::kFloat32, qc.x.rank()), 0, 2e-3);
    }
  }
}

TEST(CudaTyped, QuantizeRuntimeScale_n) {
  LayerCase c("QuantizeLinear");
  c.input(randomHalfExact(Shape{4, 3}, 1)).input(randomHalfExact(Shape{}, 2, 0.1f, 0.2f));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaTyped, DequantizeInt32WithZeroPoint_n) {
  LayerCase c("DequantizeLinear");
  c.input(randomInts(Shape{4, 3}, DataType::kInt32, 1, -100, 100));
  Tensor s = Tensor::zeros(DataType::kFloat32, Shape{});
  s.data<float>()[0] = 0.5f;
  const Shape scalar{};
  c.constant(s).constant(intTensor(DataType::kInt32, {0}, &scalar));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  cuda::CudaKernelProvider provider;
  EXPECT_FALSE(provider.candidates(layer, Precision::kFp16).empty());
  // The reference rejects a nonzero zero point on int32; so must the provider.
  c.graph().value("in2").constant = intTensor(DataType::kInt32, {3}, &scalar);
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaTyped, QuantizeZeroScale_n) {
  LayerCase c("QuantizeLinear");
  c.input(randomHalfExact(Shape{4, 3}, 1));
  c.constant(Tensor::zeros(DataType::kFloat32, Shape{}));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  EXPECT_TRUE(c.candidates().empty());
}

// ---- Negative cases -------------------------------------------------------------------------

TEST(CudaTyped, CastToBFloat16_n) {
  LayerCase c("Cast");
  c.attr("to", Attribute::Int(static_cast<int64_t>(DataType::kBFloat16)));
  c.input(randomHalfExact(Shape{3}, 1));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaTyped, WhereWithAFloatCondition_n) {
  LayerCase c("Where");
  c.input(randomInts(Shape{3}, DataType::kBool, 1, 0, 1))
      .input(randomHalfExact(Shape{3}, 2))
      .input(randomHalfExact(Shape{3}, 3));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  cuda::CudaKernelProvider provider;
  EXPECT_FALSE(provider.candidates(layer, Precision::kFp16).empty());
  layer.inputTypes[0] = DataType::kFloat32;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaTyped, AndOnIntegers_n) {
  LayerCase c("And");
  c.input(randomInts(Shape{3}, DataType::kBool, 1, 0, 1))
      .input(randomInts(Shape{3}, DataType::kBool, 2, 0, 1));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  layer.inputTypes[1] = DataType::kInt32;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaTyped, IsNaNOnIntegers_n) {
  LayerCase c("IsNaN");
  c.input(randomHalfExact(Shape{3}, 1));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  layer.inputTypes[0] = DataType::kInt64;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaTyped, ComparisonNotBroadcastable_n) {
  LayerCase c("Less");
  c.input(randomHalfExact(Shape{2, 3}, 1)).input(randomHalfExact(Shape{2, 3}, 2));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  layer.inputShapes[1] = Shape{4};
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaTyped, DynamicShape_n) {
  LayerCase c("Equal");
  c.input(randomInts(Shape{3}, DataType::kInt64, 1))
      .input(randomInts(Shape{3}, DataType::kInt64, 2));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  layer.inputShapes[0] = Shape{-1};
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaTyped, EnqueueBeforeInitialize_n) {
  LayerCase c("Not");
  c.input(randomInts(Shape{3}, DataType::kBool, 1, 0, 1));
  auto cands = c.candidates();
  ASSERT_EQ(cands.size(), 1u);
  builder::LaunchArgs args;
  int dummy = 0;
  args.inputs = {&dummy};
  args.outputs = {&dummy};
  EXPECT_FALSE(cands[0]->enqueue(args).ok());
}

}  // namespace
}  // namespace edgeinfer

#else

TEST(CudaTyped, BuiltWithoutCuda) {
  GTEST_SKIP() << "EdgeInfer was built without CUDA";
}

#endif  // EDGEINFER_HAVE_CUDA
