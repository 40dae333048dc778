// The `cuda` provider's data-movement tactics against the CPU reference: Concat (every axis,
// many inputs, NCHW/NHWC, integer types), Transpose (ranks 1-6), Slice (constant bounds,
// negative steps and axes, NCHW/NHWC), Expand, Pad (constant/reflect/edge, negative pads),
// Gather (runtime and constant int32/int64 indices, negative ones), GatherND (batch_dims,
// tuple lengths 1-3, runtime and constant indices), GatherElements, Split (equal and given
// sizes, several outputs), Tile, DepthToSpace (DCR, CRD), SpaceToDepth and Trilu; one-byte
// types (uint8, int8, bool). Inputs are
// FP16-representable, so every variant must match the reference exactly. Negative cases (_n):
// layers the provider must not offer tactics for (they need no GPU).
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA

#include <cmath>
#include <iterator>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "cuda_layer_case.h"

namespace edgeinfer {
namespace {

using graph::Attribute;
using test::floatScalar;
using test::ids;
using test::intTensor;
using test::LayerCase;
using test::randomHalfExact;
using test::randomInts;

const std::vector<std::string> kFloat = {"fp16", "fp32"};
const std::vector<std::string> kBoth = {"nchw", "nhwc"};

// ---- Concat ---------------------------------------------------------------------------------

TEST(CudaConcat, FourDimensionalEveryAxis) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 100;
  for (int64_t axis = -4; axis < 4; ++axis) {
    const size_t a = static_cast<size_t>(axis < 0 ? axis + 4 : axis);
    LayerCase c("Concat");
    c.attr("axis", Attribute::Int(axis));
    for (int64_t len : {3, 1, 8}) {
      std::vector<int64_t> d = {2, 5, 7, 9};
      d[a] = len;
      c.input(randomHalfExact(Shape(d), seed++));
    }
    c.check(ids("concat", kFloat, kBoth), 0, 0);
  }
}

TEST(CudaConcat, ManyInputsAndOtherRanks) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 200;
  {  // more inputs than one launch takes (8), rows of odd lengths
    LayerCase c("Concat");
    c.attr("axis", Attribute::Int(1));
    for (int64_t i = 0; i < 19; ++i) c.input(randomHalfExact(Shape{3, 1 + i % 5}, seed++));
    c.check(ids("concat", kFloat, {"linear"}), 0, 0);
  }
  {  // 16-byte rows (vector path) in 3-D
    LayerCase c("Concat");
    c.attr("axis", Attribute::Int(2));
    c.input(randomHalfExact(Shape{4, 3, 16}, seed++));
    c.input(randomHalfExact(Shape{4, 3, 32}, seed++));
    c.check(ids("concat", kFloat, {"linear"}), 0, 0);
  }
  {  // 1-D, one input
    LayerCase c("Concat");
    c.attr("axis", Attribute::Int(0));
    c.input(randomHalfExact(Shape{77}, seed++));
    c.check(ids("concat", kFloat, {"linear"}), 0, 0);
  }
  {  // 5-D along axis 3
    LayerCase c("Concat");
    c.attr("axis", Attribute::Int(3));
    c.input(randomHalfExact(Shape{2, 1, 3, 2, 5}, seed++));
    c.input(randomHalfExact(Shape{2, 1, 3, 5, 5}, seed++));
    c.check(ids("concat", kFloat, {"linear"}), 0, 0);
  }
}

TEST(CudaConcat, IntegerTensors) {
  EI_SKIP_WITHOUT_GPU();
  {
    LayerCase c("Concat");
    c.attr("axis", Attribute::Int(0));
    c.input(randomInts(Shape{3}, DataType::kInt64, 1))
        .input(randomInts(Shape{1}, DataType::kInt64, 2))
        .input(randomInts(Shape{4}, DataType::kInt64, 3));
    c.check({"cuda.concat.i64.linear"}, 0, 0);
  }
  {
    LayerCase c("Concat");
    c.attr("axis", Attribute::Int(1));
    c.input(randomInts(Shape{2, 3, 5, 5}, DataType::kInt32, 4))
        .input(randomInts(Shape{2, 6, 5, 5}, DataType::kInt32, 5));
    c.check(ids("concat", {"i32"}, kBoth), 0, 0);
  }
}

// ---- Transpose ------------------------------------------------------------------------------

TEST(CudaTranspose, EveryRank) {
  EI_SKIP_WITHOUT_GPU();
  struct Case {
    Shape x;
    std::vector<int64_t> perm;  // empty: the default (reversed)
  };
  const std::vector<Case> cases = {
      {Shape{37}, {0}},
      {Shape{13, 17}, {}},
      {Shape{64, 48}, {1, 0}},
      {Shape{3, 5, 7}, {2, 0, 1}},
      {Shape{2, 3, 7, 5}, {0, 2, 3, 1}},  // NCHW -> NHWC
      {Shape{2, 7, 5, 3}, {0, 3, 1, 2}},  // NHWC -> NCHW
      {Shape{2, 3, 7, 5}, {}},
      {Shape{2, 3, 1, 5}, {0, 2, 1, 3}},  // a size-1 swap: a plain copy
      {Shape{2, 3, 4, 5, 6}, {4, 2, 0, 3, 1}},
      {Shape{2, 3, 2, 3, 2, 5}, {5, 4, 3, 2, 1, 0}},
      {Shape{2, 3, 2, 3, 2, 8}, {1, 0, 3, 2, 4, 5}},  // contiguous inner rows (vector path)
      // Shared-memory tiles: partial tiles at both edges, a batch dim, both directions.
      {Shape{2, 40, 9, 10}, {0, 2, 3, 1}},
      {Shape{2, 9, 10, 40}, {0, 3, 1, 2}},
      {Shape{3, 33, 65}, {0, 2, 1}},
      {Shape{70, 3, 9}, {2, 1, 0}},
  };
  uint32_t seed = 300;
  for (const auto& tc : cases) {
    LayerCase c("Transpose");
    if (!tc.perm.empty()) c.attr("perm", Attribute::Ints(tc.perm));
    c.input(randomHalfExact(tc.x, seed++));
    c.check(ids("transpose", kFloat, {tc.x.rank() == 4 ? "nchw" : "linear"}), 0, 0);
  }
  for (const Shape& s : {Shape{3, 4, 5}, Shape{3, 20, 36}}) {  // generic and tiled
    LayerCase c("Transpose");
    c.attr("perm", Attribute::Ints({0, 2, 1}));
    c.input(randomInts(s, DataType::kInt64, seed++));
    c.check({"cuda.transpose.i64.linear"}, 0, 0);
  }
}

// ---- Slice ----------------------------------------------------------------------------------

struct SliceCase {
  Shape x;
  std::vector<int64_t> starts, ends, axes, steps;  // axes/steps empty: input absent
};

void checkSlice(const SliceCase& sc, DataType boundType, uint32_t seed) {
  LayerCase c("Slice");
  c.input(randomHalfExact(sc.x, seed))
      .constant(intTensor(boundType, sc.starts))
      .constant(intTensor(boundType, sc.ends));
  if (!sc.axes.empty())
    c.constant(intTensor(boundType, sc.axes));
  else if (!sc.steps.empty())
    c.absent();
  if (!sc.steps.empty()) c.constant(intTensor(boundType, sc.steps));
  c.check(ids("slice", kFloat, sc.x.rank() == 4 ? kBoth : std::vector<std::string>{"linear"}), 0,
          0);
}

TEST(CudaSlice, ConstantBounds) {
  EI_SKIP_WITHOUT_GPU();
  constexpr int64_t kBig = std::numeric_limits<int64_t>::max();
  const std::vector<SliceCase> cases = {
      {Shape{2, 3, 13, 11}, {1, 2}, {12, 10}, {2, 3}, {}},
      {Shape{2, 3, 13, 11}, {0, 1}, {kBig, 3}, {1, -1}, {}},  // channels 1..2, ends past the end
      {Shape{2, 3, 13, 11}, {-1, -2}, {-kBig, 0}, {2, 3}, {-1, -3}},  // negative steps
      {Shape{2, 3, 13, 11}, {12, 0}, {0, 11}, {2, 3}, {-4, 2}},
      {Shape{2, 8, 6, 6}, {0}, {4}, {1}, {}},  // NHWC: a contiguous channel run
      {Shape{2, 3, 13, 11}, {0, 0, 0, 0}, {2, 3, 13, 11}, {}, {}},  // identity, axes absent
      {Shape{17}, {-5}, {kBig}, {}, {}},
      {Shape{5, 9}, {4}, {-kBig}, {0}, {-2}},  // reversed rows, step 2, axes given
      {Shape{4, 5, 6}, {1, 5}, {3, -kBig}, {-3, 2}, {1, -1}},
      {Shape{3, 4, 40}, {0, 8}, {3, 40}, {0, 2}, {2, 1}},  // 32 contiguous floats: vector path
  };
  uint32_t seed = 400;
  for (const auto& sc : cases) {
    checkSlice(sc, DataType::kInt64, seed++);
    checkSlice(sc, DataType::kInt32, seed++);
  }
}

TEST(CudaSlice, IntegerData) {
  EI_SKIP_WITHOUT_GPU();
  LayerCase c("Slice");
  c.input(randomInts(Shape{4}, DataType::kInt64, 1))
      .constant(intTensor(DataType::kInt64, {1}))
      .constant(intTensor(DataType::kInt64, {3}));
  c.check({"cuda.slice.i64.linear"}, 0, 0);
}

// ---- Expand ---------------------------------------------------------------------------------

TEST(CudaExpand, Broadcasts) {
  EI_SKIP_WITHOUT_GPU();
  struct Case {
    Shape x;
    std::vector<int64_t> shape;
  };
  const std::vector<Case> cases = {
      {Shape{3, 1, 5}, {2, 3, 4, 5}},
      {Shape{1}, {7, 9}},
      {Shape{4, 1}, {4, 6}},
      {Shape{2, 3}, {1, 2, 3}},
      {Shape{1, 3, 1, 1}, {2, 1, 5, 7}},
      {Shape{5, 8}, {3, 1, 8}},
  };
  uint32_t seed = 500;
  for (const auto& ec : cases) {
    LayerCase c("Expand");
    c.input(randomHalfExact(ec.x, seed++)).constant(intTensor(DataType::kInt64, ec.shape));
    c.check(ids("expand", kFloat, {ec.shape.size() == 4 || ec.x.rank() == 4 ? "nchw" : "linear"}),
            0, 0);
  }
  LayerCase c("Expand");
  c.input(randomInts(Shape{3, 1}, DataType::kInt32, seed))
      .constant(intTensor(DataType::kInt64, {3, 4}));
  c.check({"cuda.expand.i32.linear"}, 0, 0);
}

// ---- Pad ------------------------------------------------------------------------------------

TEST(CudaPad, EveryMode) {
  EI_SKIP_WITHOUT_GPU();
  struct Case {
    Shape x;
    std::vector<int64_t> pads;
  };
  const std::vector<Case> cases = {
      {Shape{2, 3, 7, 5}, {0, 0, 1, 2, 0, 0, 3, 1}},
      {Shape{2, 3, 7, 5}, {0, 1, 2, 0, 1, 0, 0, 2}},    // channels padded too
      {Shape{1, 4, 6, 6}, {0, 0, -1, 1, 0, 0, 2, -2}},  // negative pads crop
      {Shape{3, 10}, {0, 4, 0, 5}},
      {Shape{9}, {3, 2}},
  };
  uint32_t seed = 600;
  for (const char* mode : {"constant", "reflect", "edge"}) {
    for (const auto& pc : cases) {
      LayerCase c("Pad");
      c.attr("mode", Attribute::String(mode));
      c.input(randomHalfExact(pc.x, seed++)).constant(intTensor(DataType::kInt64, pc.pads));
      if (std::string(mode) == "constant") c.constant(floatScalar(1.5f));
      c.check(ids("pad", kFloat, pc.x.rank() == 4 ? kBoth : std::vector<std::string>{"linear"}), 0,
              0);
    }
  }
  // No constant_value: zeros; integer data.
  LayerCase c("Pad");
  c.input(randomInts(Shape{3, 4}, DataType::kInt64, seed))
      .constant(intTensor(DataType::kInt64, {1, 0, 2, 3}));
  c.check({"cuda.pad.i64.linear"}, 0, 0);
}

// ---- Gather ---------------------------------------------------------------------------------

TEST(CudaGather, RuntimeAndConstantIndices) {
  EI_SKIP_WITHOUT_GPU();
  struct Case {
    Shape x;
    int64_t axis;
    Shape idxShape;
  };
  const std::vector<Case> cases = {
      {Shape{13, 7}, 0, Shape{5}},       {Shape{2, 9, 4}, 1, Shape{3, 2}},
      {Shape{2, 3, 5, 6}, -1, Shape{4}}, {Shape{10, 16}, 0, Shape{2, 3}},  // 16-float rows
      {Shape{6, 5}, 1, Shape{}},         // scalar index: rank drops
      {Shape{2, 3, 5, 6}, 1, Shape{2}},  // 4-D output
  };
  uint32_t seed = 700;
  for (const auto& gc : cases) {
    const size_t a =
        static_cast<size_t>(gc.axis < 0 ? gc.axis + static_cast<int64_t>(gc.x.rank()) : gc.axis);
    const int64_t dim = gc.x[a];
    for (DataType it : {DataType::kInt64, DataType::kInt32}) {
      for (bool constant : {false, true}) {
        Tensor idx = randomInts(gc.idxShape, it, seed++, -dim, dim - 1);  // negative ones too
        LayerCase c("Gather");
        c.attr("axis", Attribute::Int(gc.axis));
        c.input(randomHalfExact(gc.x, seed++));
        if (constant)
          c.constant(idx);
        else
          c.input(idx);
        const size_t outRank = gc.x.rank() - 1 + gc.idxShape.rank();
        c.check(ids("gather", kFloat, {outRank == 4 ? "nchw" : "linear"}), 0, 0);
      }
    }
  }
  LayerCase c("Gather");
  c.input(randomInts(Shape{5, 3}, DataType::kInt64, seed++))
      .input(intTensor(DataType::kInt64, {4, -5, 0}));
  c.check({"cuda.gather.i64.linear"}, 0, 0);
}

// One-byte tensors (uint8, int8, bool) move like the others.
TEST(CudaConcat, OneByteTypes) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 150;
  for (DataType t : {DataType::kUInt8, DataType::kInt8, DataType::kBool}) {
    const int64_t lo = t == DataType::kInt8 ? -128 : 0, hi = t == DataType::kBool ? 1 : 127;
    LayerCase c("Concat");
    c.attr("axis", Attribute::Int(1));
    c.input(randomInts(Shape{2, 3, 5}, t, seed + 0, lo, hi))
        .input(randomInts(Shape{2, 4, 5}, t, seed + 1, lo, hi));
    seed += 2;
    c.check({"cuda.concat." +
             std::string(t == DataType::kUInt8  ? "u8"
                         : t == DataType::kInt8 ? "i8"
                                                : "bool") +
             ".linear"},
            0, 0);
  }
}

// ---- Split, Tile, DepthToSpace, SpaceToDepth, Trilu -----------------------------------------

TEST(CudaSplit, EveryAxisSizesAndLayouts) {
  EI_SKIP_WITHOUT_GPU();
  struct Case {
    Shape x;
    int64_t axis;
    std::vector<int64_t> split;  // empty: equal parts
    size_t outputs;
  };
  const std::vector<Case> cases = {
      {Shape{2, 6, 5, 4}, 1, {}, 3},
      {Shape{2, 6, 5, 4}, 1, {1, 3, 2}, 3},
      {Shape{2, 6, 5, 4}, -1, {3, 1}, 2},
      {Shape{2, 6, 5, 4}, 2, {2, 3}, 2},
      {Shape{2, 6, 5, 4}, 0, {1, 1}, 2},
      {Shape{7, 9}, 1, {4, 5}, 2},
      {Shape{10}, 0, {}, 5},
      {Shape{3, 17, 2}, 1, {16, 1}, 2},
  };
  uint32_t seed = 1500;
  for (const auto& sc : cases) {
    LayerCase c("Split");
    c.outputs(sc.outputs);
    c.attr("axis", Attribute::Int(sc.axis));
    if (!sc.split.empty()) c.attr("split", Attribute::Ints(sc.split));
    c.input(randomHalfExact(sc.x, seed++));
    c.check(ids("split", kFloat, sc.x.rank() == 4 ? kBoth : std::vector<std::string>{"linear"}), 0,
            0);
  }
  LayerCase c("Split");  // integers
  c.outputs(2);
  c.attr("axis", Attribute::Int(0));
  c.input(randomInts(Shape{4, 3}, DataType::kInt64, seed++));
  c.check({"cuda.split.i64.linear"}, 0, 0);
}

TEST(CudaTile, RepeatsOnEveryAxis) {
  EI_SKIP_WITHOUT_GPU();
  struct Case {
    Shape x;
    std::vector<int64_t> repeats;
  };
  const std::vector<Case> cases = {
      {Shape{2, 3, 4, 5}, {1, 2, 1, 3}},
      {Shape{2, 3, 4, 5}, {2, 2, 2, 2}},
      {Shape{1, 3, 1, 5}, {4, 1, 3, 1}},
      {Shape{7}, {3}},
      {Shape{3, 5}, {1, 1}},
      {Shape{2, 1, 3}, {2, 5, 1}},
  };
  uint32_t seed = 1600;
  for (const auto& tc : cases) {
    LayerCase c("Tile");
    c.input(randomHalfExact(tc.x, seed++)).constant(intTensor(DataType::kInt64, tc.repeats));
    c.check(ids("tile", kFloat, {tc.x.rank() == 4 ? "nchw" : "linear"}), 0, 0);
  }
  LayerCase c("Tile");
  c.input(randomInts(Shape{3, 2}, DataType::kInt32, seed++))
      .constant(intTensor(DataType::kInt64, {2, 3}));
  c.check({"cuda.tile.i32.linear"}, 0, 0);
}

TEST(CudaDepthToSpace, DcrCrdAndSpaceToDepth) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 1700;
  for (int64_t b : {2, 3}) {
    for (const char* mode : {"DCR", "CRD"}) {
      LayerCase c("DepthToSpace");
      c.attr("blocksize", Attribute::Int(b)).attr("mode", Attribute::String(mode));
      c.input(randomHalfExact(Shape{2, 5 * b * b, 3, 4}, seed++));
      c.check(ids("depthtospace", kFloat, kBoth), 0, 0);
    }
    LayerCase c("SpaceToDepth");
    c.attr("blocksize", Attribute::Int(b));
    c.input(randomHalfExact(Shape{2, 5, 3 * b, 4 * b}, seed++));
    c.check(ids("spacetodepth", kFloat, kBoth), 0, 0);
  }
}

TEST(CudaTrilu, UpperLowerAndDiagonals) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 1800;
  for (int64_t upper : {0, 1}) {
    for (int64_t k : {-7, -1, 0, 2, 9}) {
      for (const Shape& x : {Shape{5, 7}, Shape{2, 3, 6, 4}}) {
        LayerCase c("Trilu");
        c.attr("upper", Attribute::Int(upper));
        c.input(randomHalfExact(x, seed++)).constant(intTensor(DataType::kInt64, {k}, nullptr));
        c.check(ids("trilu", kFloat, {x.rank() == 4 ? "nchw" : "linear"}), 0, 0);
      }
    }
  }
  LayerCase c("Trilu");  // no k: the main diagonal
  c.input(randomInts(Shape{4, 4}, DataType::kInt64, seed++));
  c.check({"cuda.trilu.i64.linear"}, 0, 0);
}

// ---- Identity, Dropout (what the graph passes could not remove) -------------------------------

TEST(CudaIdentity, CopiesEveryTypeAndLayout) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 1840;
  for (const Shape& x : {Shape{5, 7}, Shape{2, 3, 4, 5}, Shape{13}}) {
    LayerCase c("Identity");
    c.input(randomHalfExact(x, seed++));
    c.check(ids("identity", kFloat, x.rank() == 4 ? kBoth : std::vector<std::string>{"linear"}), 0,
            0);
  }
  LayerCase i64("Identity");
  i64.input(randomInts(Shape{3, 4}, DataType::kInt64, seed++));
  i64.check({"cuda.identity.i64.linear"}, 0, 0);
  // Dropout at inference: the ratio and a constant false training mode are consumed.
  LayerCase d("Dropout");
  d.input(randomHalfExact(Shape{4, 6}, seed++))
      .constant(floatScalar(0.3f))
      .constant(Tensor::zeros(DataType::kBool, Shape{}));
  d.check(ids("identity", kFloat, {"linear"}), 0, 0);
}

// ---- EyeLike, OneHot ------------------------------------------------------------------------

TEST(CudaEyeLike, DiagonalsAndOutputTypes) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 1850;
  struct Case {
    int64_t dtype;  // ONNX element type of the output; 0: the input's
    std::vector<std::string> storages;
  };
  for (const Case& oc :
       {Case{0, kFloat}, Case{7, {"i64"}}, Case{6, {"i32"}}, Case{9, {"bool"}}, Case{3, {"i8"}}}) {
    for (int64_t k : {-3, 0, 2, 9}) {
      for (const Shape& x : {Shape{5, 7}, Shape{6, 3}, Shape{1, 1}}) {
        LayerCase c("EyeLike");
        c.attr("k", Attribute::Int(k));
        if (oc.dtype) c.attr("dtype", Attribute::Int(oc.dtype));
        c.input(randomHalfExact(x, seed++));
        SCOPED_TRACE("dtype " + std::to_string(oc.dtype) + " k " + std::to_string(k));
        c.check(ids("eyelike", oc.storages, {"linear"}), 0, 0);
      }
    }
  }
  LayerCase c("EyeLike");  // an integer input, a float output
  c.attr("dtype", Attribute::Int(1));
  c.input(randomInts(Shape{4, 9}, DataType::kInt32, seed++));
  c.check(ids("eyelike", kFloat, {"linear"}), 0, 0);
}

TEST(CudaOneHot, AxesIndexTypesAndOutOfRange) {
  EI_SKIP_WITHOUT_GPU();
  uint32_t seed = 1870;
  const int64_t depth = 6;
  for (int64_t axis : {-1, 0, 1}) {
    for (DataType it : {DataType::kInt64, DataType::kInt32, DataType::kFloat32}) {
      for (bool constantValues : {true, false}) {
        // Indices from -8 to 8: negative ones count from the end, -7 and below and 6 and above
        // are out of range (their rows stay off).
        Tensor idx = it == DataType::kFloat32 ? Tensor::zeros(it, Shape{3, 5})
                                              : randomInts(Shape{3, 5}, it, seed++, -8, 8);
        if (it == DataType::kFloat32) {
          const float v[] = {-8.f, -6.5f, -1.f, 0.f,  0.9f, 2.5f,  5.f,  5.99f,
                             6.f,  7.f,   NAN,  -0.f, 3.f,  1e20f, -3.2f};
          std::copy(std::begin(v), std::end(v), idx.data<float>());
        }
        LayerCase c("OneHot");
        c.attr("axis", Attribute::Int(axis));
        c.input(idx).constant(intTensor(DataType::kInt64, {depth}, nullptr));
        Tensor values = Tensor::zeros(DataType::kFloat32, Shape{2});
        values.data<float>()[0] = -0.5f;
        values.data<float>()[1] = 3.25f;
        if (constantValues)
          c.constant(values);
        else
          c.input(values);
        SCOPED_TRACE("axis " + std::to_string(axis));
        c.check(ids("onehot", kFloat, {"linear"}), 0, 0);
      }
    }
  }
  // Integer values, a 3-D index tensor: a 4-D output.
  LayerCase c("OneHot");
  c.attr("axis", Attribute::Int(1));
  c.input(randomInts(Shape{2, 3, 4}, DataType::kInt64, seed++, -4, 4))
      .constant(intTensor(DataType::kInt64, {4}, nullptr))
      .constant(intTensor(DataType::kInt32, {0, 7}, nullptr));
  c.check(ids("onehot", {"i32"}, {"nchw"}), 0, 0);
}

// ---- GatherElements -------------------------------------------------------------------------

TEST(CudaGatherElements, EveryAxisRuntimeAndConstantIndices) {
  EI_SKIP_WITHOUT_GPU();
  struct Case {
    Shape x;
    int64_t axis;
    Shape idx;
  };
  const std::vector<Case> cases = {
      {Shape{5, 7}, 0, Shape{3, 7}},
      {Shape{5, 7}, 1, Shape{5, 9}},  // more indices than the axis has elements
      {Shape{2, 3, 4, 5}, -1, Shape{2, 3, 4, 2}},
      {Shape{2, 3, 4, 5}, 1, Shape{1, 2, 3, 5}},  // smaller on the other axes too
      {Shape{11}, 0, Shape{4}},
  };
  uint32_t seed = 1900;
  for (const auto& gc : cases) {
    const size_t a =
        static_cast<size_t>(gc.axis < 0 ? gc.axis + static_cast<int64_t>(gc.x.rank()) : gc.axis);
    const int64_t dim = gc.x[a];
    for (DataType it : {DataType::kInt64, DataType::kInt32}) {
      for (bool constant : {false, true}) {
        Tensor idx = randomInts(gc.idx, it, seed++, -dim, dim - 1);
        LayerCase c("GatherElements");
        c.attr("axis", Attribute::Int(gc.axis));
        c.input(randomHalfExact(gc.x, seed++));
        if (constant)
          c.constant(idx);
        else
          c.input(idx);
        c.check(ids("gatherelements", kFloat, {gc.idx.rank() == 4 ? "nchw" : "linear"}), 0, 0);
      }
    }
  }
}

// ---- GatherND --------------------------------------------------------------------------------

/// Index tuples for GatherND: component j of each tuple in [-dims[j], dims[j]) (negative ones
/// too), in `type`.
Tensor gatherNDIndices(const Shape& shape, const std::vector<int64_t>& dims, DataType type,
                       uint32_t seed) {
  Tensor t = Tensor::zeros(type, shape);
  const int64_t k = shape[shape.rank() - 1];
  uint32_t r = seed * 2654435761u + 12345u;
  for (int64_t e = 0; e < t.numel(); ++e) {
    r = r * 1664525u + 1013904223u;
    const int64_t d = dims[static_cast<size_t>(e % k)];
    const int64_t v = static_cast<int64_t>((r >> 8) % static_cast<uint32_t>(2 * d)) - d;
    if (type == DataType::kInt64)
      t.data<int64_t>()[e] = v;
    else
      t.data<int32_t>()[e] = static_cast<int32_t>(v);
  }
  return t;
}

TEST(CudaGatherND, BatchDimsTupleLengthsRuntimeAndConstantIndices) {
  EI_SKIP_WITHOUT_GPU();
  struct Case {
    Shape x;
    int64_t batchDims;
    Shape idx;  // last dim: the tuple length
  };
  const std::vector<Case> cases = {
      {Shape{5, 4, 3}, 0, Shape{2, 2}},
      {Shape{5, 4, 3}, 0, Shape{3, 1}},
      {Shape{5, 4, 3}, 0, Shape{4, 3}},
      {Shape{2, 6, 5}, 1, Shape{2, 3, 1}},
      {Shape{2, 3, 4, 8}, 1, Shape{2, 2, 2}},     // 8-float slices (vector units)
      {Shape{2, 3, 5, 6}, 2, Shape{2, 3, 4, 1}},  // 4-D output
      {Shape{7}, 0, Shape{5, 1}},
  };
  uint32_t seed = 900;
  for (const auto& gc : cases) {
    const int64_t k = gc.idx[gc.idx.rank() - 1];
    std::vector<int64_t> dims;
    for (int64_t j = 0; j < k; ++j) dims.push_back(gc.x[static_cast<size_t>(gc.batchDims + j)]);
    for (DataType it : {DataType::kInt64}) {  // (ONNX's GatherND takes int64 indices only)
      for (bool constant : {false, true}) {
        LayerCase c("GatherND");
        c.attr("batch_dims", Attribute::Int(gc.batchDims));
        c.input(randomHalfExact(gc.x, seed++));
        const Tensor idx = gatherNDIndices(gc.idx, dims, it, seed++);
        if (constant)
          c.constant(idx);
        else
          c.input(idx);
        SCOPED_TRACE(gc.x.toString() + " b " + std::to_string(gc.batchDims) + " idx " +
                     gc.idx.toString() + (constant ? " constant" : " runtime"));
        const size_t outRank =
            gc.idx.rank() - 1 + gc.x.rank() - static_cast<size_t>(gc.batchDims + k);
        c.check(ids("gathernd", kFloat, {outRank == 4 ? "nchw" : "linear"}), 0, 0);
      }
    }
  }
  const Shape kPairs{2, 2};
  LayerCase c("GatherND");
  c.input(randomInts(Shape{5, 3}, DataType::kInt64, seed++))
      .input(intTensor(DataType::kInt64, {4, -3, 0, 2}, &kPairs));
  c.check({"cuda.gathernd.i64.linear"}, 0, 0);
}

// ---- Negative cases: no candidates (no GPU needed) -----------------------------------------

TEST(CudaDataMovement, DynamicShape_n) {
  LayerCase c("Transpose");
  c.input(randomHalfExact(Shape{3, 4}, 1));
  builder::LayerContext layer;
  ASSERT_FALSE(c.candidates(Precision::kFp16, &layer).empty());
  layer.inputShapes[0][0] = -1;
  layer.outputShapes[0][1] = -1;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaSlice, RuntimeBounds_n) {
  LayerCase c("Slice");
  c.input(randomHalfExact(Shape{4, 6}, 1))
      .input(intTensor(DataType::kInt64, {1}))  // not a graph constant
      .constant(intTensor(DataType::kInt64, {3}));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaSlice, RuntimeSteps_n) {
  LayerCase c("Slice");
  c.input(randomHalfExact(Shape{4, 6}, 1))
      .constant(intTensor(DataType::kInt64, {1}))
      .constant(intTensor(DataType::kInt64, {3}))
      .constant(intTensor(DataType::kInt64, {1}))
      .input(intTensor(DataType::kInt64, {2}));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaSlice, EmptyResult_n) {
  LayerCase c("Slice");
  c.input(randomHalfExact(Shape{4, 6}, 1))
      .constant(intTensor(DataType::kInt64, {3}))
      .constant(intTensor(DataType::kInt64, {1}));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaSlice, ConsumesBoundsOnly_n) {
  LayerCase c("Slice");
  c.input(randomHalfExact(Shape{2, 3, 4, 5}, 1))
      .constant(intTensor(DataType::kInt64, {1}))
      .constant(intTensor(DataType::kInt64, {3}))
      .constant(intTensor(DataType::kInt64, {2}));
  auto cands = c.candidates();
  ASSERT_EQ(cands.size(), 4u);
  for (auto& t : cands) {
    EXPECT_FALSE(t->consumesInput(0)) << t->id();
    EXPECT_TRUE(t->consumesInput(1) && t->consumesInput(2) && t->consumesInput(3)) << t->id();
  }
}

TEST(CudaTranspose, RankSeven_n) {
  LayerCase c("Transpose");
  c.input(randomHalfExact(Shape{1, 2, 1, 2, 1, 2, 3}, 1));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaTranspose, NoNhwcVariant_n) {
  LayerCase c("Transpose");
  c.attr("perm", Attribute::Ints({0, 2, 3, 1}));
  c.input(randomHalfExact(Shape{1, 2, 3, 4}, 1));
  const auto cands = c.candidates();
  EXPECT_EQ(cands.size(), 2u);
  for (const auto& t : cands) EXPECT_EQ(t->id().find("nhwc"), std::string::npos) << t->id();
}

TEST(CudaConcat, BFloat16_n) {
  LayerCase c("Concat");
  c.attr("axis", Attribute::Int(0));
  c.input(Tensor::zeros(DataType::kBFloat16, Shape{3}))
      .input(Tensor::zeros(DataType::kBFloat16, Shape{2}));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaConcat, BadAxis_n) {
  // Shape inference rejects it too; the provider must not rely on that.
  LayerCase c("Concat");
  c.attr("axis", Attribute::Int(0));
  c.input(randomHalfExact(Shape{3, 2}, 1)).input(randomHalfExact(Shape{2, 2}, 2));
  builder::LayerContext layer;
  ASSERT_FALSE(c.candidates(Precision::kFp16, &layer).empty());
  graph::Node bad = c.node();
  bad.attrs.set("axis", Attribute::Int(2));
  layer.node = &bad;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaConcat, Fp32PrecisionOffersNoFp16_n) {
  LayerCase c("Concat");
  c.attr("axis", Attribute::Int(1));
  c.input(randomHalfExact(Shape{2, 3, 4, 5}, 1)).input(randomHalfExact(Shape{2, 1, 4, 5}, 2));
  std::set<std::string> got;
  for (auto& t : c.candidates(Precision::kFp32)) got.insert(t->id());
  EXPECT_EQ(got, ids("concat", {"fp32"}, kBoth));
}

TEST(CudaExpand, RuntimeShape_n) {
  LayerCase c("Expand");
  c.input(randomHalfExact(Shape{3, 1}, 1)).input(intTensor(DataType::kInt64, {3, 4}));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaPad, RuntimePads_n) {
  LayerCase c("Pad");
  c.input(randomHalfExact(Shape{3, 4}, 1)).input(intTensor(DataType::kInt64, {1, 1, 1, 1}));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaPad, RuntimeValue_n) {
  LayerCase c("Pad");
  c.input(randomHalfExact(Shape{3, 4}, 1))
      .constant(intTensor(DataType::kInt64, {1, 1, 1, 1}))
      .input(floatScalar(2.f));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaPad, WrapMode_n) {
  // Shape inference accepts only the three modes; the provider must check on its own.
  LayerCase c("Pad");
  c.input(randomHalfExact(Shape{3, 4}, 1)).constant(intTensor(DataType::kInt64, {1, 1, 1, 1}));
  builder::LayerContext layer;
  ASSERT_FALSE(c.candidates(Precision::kFp16, &layer).empty());
  graph::Node bad = c.node();
  bad.attrs.set("mode", Attribute::String("wrap"));
  layer.node = &bad;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaGather, FloatIndices_n) {
  LayerCase c("Gather");
  c.input(randomHalfExact(Shape{5, 3}, 1)).input(intTensor(DataType::kInt64, {1, 2}));
  builder::LayerContext layer;
  ASSERT_FALSE(c.candidates(Precision::kFp16, &layer).empty());
  layer.inputTypes[1] = DataType::kFloat32;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaGatherND, FloatIndices_n) {
  LayerCase c("GatherND");
  const Shape tuples{2, 1};
  c.input(randomHalfExact(Shape{5, 3}, 1)).input(intTensor(DataType::kInt64, {1, 2}, &tuples));
  builder::LayerContext layer;
  ASSERT_FALSE(c.candidates(Precision::kFp16, &layer).empty());
  layer.inputTypes[1] = DataType::kFloat32;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

// batch_dims out of range (the schema refuses it first; the provider must not rely on it).
TEST(CudaGatherND, BatchDimsOutOfRange_n) {
  const Shape tuples{5, 1};
  LayerCase c("GatherND");
  c.input(randomHalfExact(Shape{5, 3}, 1))
      .input(intTensor(DataType::kInt64, {1, 2, 0, 4, 3}, &tuples));
  builder::LayerContext layer;
  ASSERT_FALSE(c.candidates(Precision::kFp16, &layer).empty());
  for (int64_t b : {-1, 2}) {
    graph::Node bad = *layer.node;
    bad.attrs.set("batch_dims", Attribute::Int(b));
    builder::LayerContext l = layer;
    l.node = &bad;
    cuda::CudaKernelProvider provider;
    EXPECT_TRUE(provider.candidates(l, Precision::kFp16).empty()) << b;
  }
}

TEST(CudaGather, IndicesDeclaredInTheirType_n) {
  LayerCase c("Gather");
  c.input(randomHalfExact(Shape{5, 3}, 1)).input(intTensor(DataType::kInt32, {1, 2}));
  const auto cands = c.candidates();
  ASSERT_EQ(cands.size(), 2u);
  for (const auto& t : cands) {
    EXPECT_EQ(t->inputFormat(1).dtype, DataType::kInt32) << t->id();
    EXPECT_FALSE(t->consumesInput(1)) << t->id();
  }
}

TEST(CudaSplit, OutputOfAnotherType_n) {
  LayerCase c("Split");
  c.outputs(2);
  c.attr("axis", Attribute::Int(0));
  c.input(randomHalfExact(Shape{4, 3}, 1));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  layer.outputTypes[1] = DataType::kInt32;
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaTile, RuntimeRepeats_n) {
  LayerCase c("Tile");
  c.input(randomHalfExact(Shape{2, 3}, 1)).input(intTensor(DataType::kInt64, {2, 1}));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaDepthToSpace, SizesThatDoNotMatch_n) {
  LayerCase c("SpaceToDepth");
  c.attr("blocksize", Attribute::Int(2));
  c.input(randomHalfExact(Shape{2, 4, 6, 8}, 1));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  cuda::CudaKernelProvider provider;
  EXPECT_FALSE(provider.candidates(layer, Precision::kFp16).empty());
  layer.inputShapes[0] = Shape{2, 4, 7, 8};  // H not a multiple of the block
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaTrilu, RuntimeK_n) {
  LayerCase c("Trilu");
  c.input(randomHalfExact(Shape{4, 4}, 1)).input(intTensor(DataType::kInt64, {1}));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaIdentity, DropoutWithARuntimeTrainingMode_n) {
  // (A constant true training mode is refused by shape inference already.)
  LayerCase c("Dropout");
  c.input(randomHalfExact(Shape{4, 6}, 1))
      .constant(floatScalar(0.3f))
      .input(Tensor::zeros(DataType::kBool, Shape{}));
  EXPECT_TRUE(c.candidates().empty());
}

TEST(CudaOneHot, RuntimeDepth_n) {
  // A depth computed at run time sizes the output by a value: the CPU runs the layer.
  LayerCase c("OneHot");
  c.input(randomInts(Shape{3}, DataType::kInt64, 1, 0, 3))
      .input(intTensor(DataType::kInt64, {4}))
      .constant(intTensor(DataType::kInt64, {0, 1}));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
}

TEST(CudaOneHot, IndicesOfAnUnreadType_n) {
  LayerCase c("OneHot");
  c.input(randomInts(Shape{3}, DataType::kUInt8, 1, 0, 3))
      .constant(intTensor(DataType::kInt64, {4}))
      .constant(intTensor(DataType::kInt64, {0, 1}));
  builder::LayerContext layer;
  ASSERT_TRUE(c.layer(&layer).ok());
  cuda::CudaKernelProvider provider;
  EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
  layer.inputTypes[0] = DataType::kInt32;
  EXPECT_EQ(provider.candidates(layer, Precision::kFp16).size(), 1u);
}

TEST(CudaGatherElements, FloatIndicesAndConstantOutOfRange_n) {
  const Shape idxShape{1, 3};
  {
    LayerCase c("GatherElements");
    c.input(randomHalfExact(Shape{4, 3}, 1))
        .input(intTensor(DataType::kInt64, {0, 3, 1}, &idxShape));
    builder::LayerContext layer;
    ASSERT_TRUE(c.layer(&layer).ok());
    cuda::CudaKernelProvider provider;
    EXPECT_FALSE(provider.candidates(layer, Precision::kFp16).empty());
    layer.inputTypes[1] = DataType::kFloat32;
    EXPECT_TRUE(provider.candidates(layer, Precision::kFp16).empty());
  }
  // A constant index of 4 on an axis of 4: shape inference already names the problem, before
  // any provider sees the layer.
  LayerCase c("GatherElements");
  c.input(randomHalfExact(Shape{4, 3}, 1))
      .constant(intTensor(DataType::kInt64, {0, 4, 1}, &idxShape));
  builder::LayerContext layer;
  const Status st = c.layer(&layer);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.toString().find("out of range"), std::string::npos) << st.toString();
}

TEST(CudaDataMovement, EnqueueBeforeInitialize_n) {
  LayerCase c("Transpose");
  c.input(randomHalfExact(Shape{3, 4}, 1));
  auto cands = c.candidates();
  ASSERT_FALSE(cands.empty());
  builder::LaunchArgs args;
  EXPECT_FALSE(cands[0]->enqueue(args).ok());
}

}  // namespace
}  // namespace edgeinfer

#else  // !EDGEINFER_HAVE_CUDA

TEST(CudaDataMovement, BuiltWithoutCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif  // EDGEINFER_HAVE_CUDA
