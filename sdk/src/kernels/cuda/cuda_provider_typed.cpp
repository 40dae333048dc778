// The `cuda` provider's typed elementwise family (kernels in typed_eltwise.cu): Cast / CastLike,
// Equal / Greater / GreaterOrEqual / Less / LessOrEqual, And / Or / Xor / Not, Where, IsNaN /
// IsInf, Add / Sub / Mul / Div / Mod / Min / Max / Pow on integer tensors (float arithmetic is
// the eltwise family's), BitShift, QuantizeLinear / DequantizeLinear with constant scales and
// zero points, MatMulInteger and ConvInteger (integer_ops.cu; zero points constant or computed)
// and DynamicQuantizeLinear (dynamic_quantize.cu). Each tactic reads its value operands in one
// storage type and writes its output in another (bool, or the value type, or Cast's target); a
// float tensor may be stored as float16 or float32 at FP16 precision, and the builder times both.
// Host code only.
#include <cuda_runtime.h>

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "graph/ops/conv_geometry.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/dynamic_quantize.h"
#include "kernels/cuda/integer_ops.h"
#include "kernels/cuda/typed_eltwise.h"

namespace edgeinfer::cuda::detail {
namespace {

using builder::LaunchArgs;
using builder::LayerContext;
using builder::Layout;
using builder::Tactic;
using builder::TensorFormat;

bool isIntType(DataType t) {
  return t == DataType::kInt32 || t == DataType::kInt64 || t == DataType::kInt8 ||
         t == DataType::kUInt8;
}

/// The op of a node of this family; false when the node is not one (float arithmetic included).
bool typedOpFor(const LayerContext& layer, TypedOp* op) {
  static const std::map<std::string, TypedOp> kOps = {
      {"Cast", TypedOp::kCast},
      {"CastLike", TypedOp::kCast},
      {"Equal", TypedOp::kEqual},
      {"Greater", TypedOp::kGreater},
      {"GreaterOrEqual", TypedOp::kGreaterOrEqual},
      {"Less", TypedOp::kLess},
      {"LessOrEqual", TypedOp::kLessOrEqual},
      {"And", TypedOp::kAnd},
      {"Or", TypedOp::kOr},
      {"Xor", TypedOp::kXor},
      {"Not", TypedOp::kNot},
      {"Where", TypedOp::kWhere},
      {"IsNaN", TypedOp::kIsNaN},
      {"IsInf", TypedOp::kIsInf},
      {"QuantizeLinear", TypedOp::kQuantize},
      {"DequantizeLinear", TypedOp::kDequantize},
  };
  static const std::map<std::string, TypedOp> kIntOps = {
      {"Add", TypedOp::kIntAdd}, {"Sub", TypedOp::kIntSub}, {"Mul", TypedOp::kIntMul},
      {"Div", TypedOp::kIntDiv}, {"Mod", TypedOp::kIntMod}, {"Min", TypedOp::kIntMin},
      {"Max", TypedOp::kIntMax}, {"Pow", TypedOp::kIntPow}, {"BitShift", TypedOp::kShiftLeft},
  };
  const graph::Node& n = *layer.node;
  if (!n.domain.empty()) return false;
  if (const auto it = kOps.find(n.opType); it != kOps.end()) {
    *op = it->second;
    return true;
  }
  const auto it = kIntOps.find(n.opType);
  if (it == kIntOps.end() || layer.inputTypes.empty() || !isIntType(layer.inputTypes[0]))
    return false;
  *op = it->second;
  if (*op == TypedOp::kIntMod && n.attrs.getInt("fmod", 0) == 1) *op = TypedOp::kIntFMod;
  // Min and Max take any count of inputs: these kernels take two.
  if ((*op == TypedOp::kIntMin || *op == TypedOp::kIntMax) && n.inputs.size() != 2) return false;
  if (*op == TypedOp::kShiftLeft) {
    const std::string dir = n.attrs.getString("direction", "");
    if (dir != "LEFT" && dir != "RIGHT") return false;
    if (dir == "RIGHT") *op = TypedOp::kShiftRight;
  }
  return true;
}

/// How many inputs the kernels read (CastLike's input 1 only gives the type).
int operandsOf(TypedOp op) {
  switch (op) {
    case TypedOp::kCast:
    case TypedOp::kNot:
    case TypedOp::kIsNaN:
    case TypedOp::kIsInf:
    case TypedOp::kQuantize:
    case TypedOp::kDequantize:
      return 1;
    case TypedOp::kWhere:
      return 3;
    default:
      return 2;
  }
}

/// The logical type of the value operands: input 1 for Where, input 0 otherwise.
DataType valueType(const LayerContext& layer, TypedOp op) {
  return layer.inputTypes[op == TypedOp::kWhere ? 1 : 0];
}

/// The logical types each operand must have, given the value type v; false when they do not.
bool typesAgree(const LayerContext& layer, TypedOp op, DataType v) {
  const DataType out = layer.outputTypes[0];
  switch (op) {
    case TypedOp::kCast:
      return isTypedEltStorage(out) && isTypedEltStorage(v);
    case TypedOp::kAnd:
    case TypedOp::kOr:
    case TypedOp::kXor:
      return v == DataType::kBool && layer.inputTypes[1] == DataType::kBool;
    case TypedOp::kNot:
      return v == DataType::kBool;
    case TypedOp::kWhere:
      return layer.inputTypes[0] == DataType::kBool && layer.inputTypes[2] == v && out == v &&
             isTypedEltStorage(v);
    case TypedOp::kIsNaN:
    case TypedOp::kIsInf:
      return isFloatStorage(v);
    case TypedOp::kQuantize:
      return isFloatStorage(v) && (out == DataType::kInt8 || out == DataType::kUInt8);
    case TypedOp::kDequantize:
      return (v == DataType::kInt8 || v == DataType::kUInt8 || v == DataType::kInt32) &&
             isFloatStorage(out);
    case TypedOp::kEqual:
    case TypedOp::kGreater:
    case TypedOp::kGreaterOrEqual:
    case TypedOp::kLess:
    case TypedOp::kLessOrEqual:
      return layer.inputTypes[1] == v && isTypedEltStorage(v) && out == DataType::kBool;
    case TypedOp::kShiftLeft:
    case TypedOp::kShiftRight:  // unsigned only; uint8 is the unsigned type stored here
      return layer.inputTypes[1] == v && out == v && v == DataType::kUInt8;
    default:  // integer arithmetic (Pow: an exponent of the base's type)
      return layer.inputTypes[1] == v && out == v && isIntType(v);
  }
}

/// Storage types for a tensor of logical type t: float16 / float32 for a float tensor (as the
/// precision allows), the type itself otherwise.
std::vector<DataType> storageFor(DataType t, Precision p) {
  if (isFloatStorage(t)) return storageTypes(p);
  return {t};
}

/// The scale and zero point of a QuantizeLinear / DequantizeLinear with constant ones: per
/// tensor (one element) or per channel along `axis`; false otherwise (a run-time scale, a
/// size that does not match, an int32 dequantize with a nonzero zero point).
bool quantParams(const LayerContext& layer, std::vector<float>* scale, std::vector<int32_t>* zp,
                 size_t* axis) {
  const Tensor* s = layer.constantInput(1);
  const Shape& x = layer.inputShapes[0];
  if (!s || !isFloatStorage(s->dtype()) || s->numel() < 1) return false;
  const Tensor* z = layer.hasInput(2) ? layer.constantInput(2) : nullptr;
  if (layer.hasInput(2) && (!z || z->numel() != s->numel())) return false;
  *axis = 0;
  if (s->numel() > 1) {
    const int64_t r = static_cast<int64_t>(x.rank());
    int64_t a = layer.node->attrs.getInt("axis", 1);
    if (a < 0) a += r;
    if (a < 0 || a >= r || s->shape().rank() != 1 || x[static_cast<size_t>(a)] != s->numel())
      return false;
    *axis = static_cast<size_t>(a);
  }
  scale->clear();
  zp->clear();
  for (int64_t i = 0; i < s->numel(); ++i) {
    const double v = s->getAsDouble(i);
    if (!(v > 0.0) || !std::isfinite(v)) return false;  // the reference divides by it
    scale->push_back(static_cast<float>(v));
    const int64_t q = z ? z->getAsInt64(i) : 0;
    if (layer.inputTypes[0] == DataType::kInt32 && q != 0) return false;
    zp->push_back(static_cast<int32_t>(q));
  }
  return true;
}

class TypedTactic final : public CudaTactic {
 public:
  TypedTactic(TypedOp op, DataType valueStorage, DataType outStorage, Layout l,
              const LayerContext& layer)
      : CudaTactic(familyOf(op, layer), valueStorage, l, layer), op_(op), out_(outStorage) {
    if (op == TypedOp::kQuantize || op == TypedOp::kDequantize) {
      setInputType(1, DataType::kFloat32);  // consumed constants (uploaded at initialize)
      if (layer.inputTypes.size() > 2) setInputType(2, layer.inputTypes[2]);
    }
    const int n = operandsOf(op);
    if (op == TypedOp::kWhere) setInputType(0, DataType::kBool);
    if (op == TypedOp::kCast && layer.inputShapes.size() > 1)  // CastLike: input 1 as it is
      setInputType(1, layer.inputTypes[1]);
    if (outStorage != valueStorage || op == TypedOp::kCast || op == TypedOp::kQuantize ||
        op == TypedOp::kDequantize)
      id_ = "cuda." + familyOf(op, layer) + "." + storageName(valueStorage) + "-" +
            storageName(outStorage) + "." +
            (outputRanks_.empty() || outputRanks_[0] != 4 ? "linear" : builder::layoutName(l));
    numOperands_ = n;
  }
  ~TypedTactic() override { cudaFree(params_); }
  TensorFormat outputFormat(size_t i) const override {
    return {out_, formatFor(i < outputRanks_.size() ? outputRanks_[i] : 0)};
  }
  bool consumesInput(size_t index) const override {
    return index >= 1 && (op_ == TypedOp::kQuantize || op_ == TypedOp::kDequantize);
  }

  Status initialize(const LayerContext& layer) override {
    TypedEltPlan& p = plan_;
    p = TypedEltPlan{};
    p.op = op_;
    p.inType = dtype_;
    p.outType = out_;
    p.roundToHalf = op_ == TypedOp::kCast && layer.outputTypes[0] == DataType::kFloat16 &&
                    out_ == DataType::kFloat32;
    if (op_ == TypedOp::kIsInf) {
      p.detectNegative = layer.node->attrs.getInt("detect_negative", 1) != 0;
      p.detectPositive = layer.node->attrs.getInt("detect_positive", 1) != 0;
    }
    if (op_ == TypedOp::kQuantize || op_ == TypedOp::kDequantize) {
      std::vector<float> scale;
      std::vector<int32_t> zp;
      size_t axis = 0;
      if (!quantParams(layer, &scale, &zp, &axis))
        return Status(ErrorCode::kUnsupported, id() + ": scale / zero point not supported");
      p.roundToHalf = layer.outputTypes[0] == DataType::kFloat16 && out_ == DataType::kFloat32;
      p.channels = static_cast<int64_t>(scale.size());
      // Elements between consecutive channels, in the storage order of the tensor.
      const Shape& x = layer.inputShapes[0];
      std::vector<size_t> order(x.rank());
      for (size_t d = 0; d < order.size(); ++d) order[d] = d;
      if (x.rank() == 4 && nhwc()) order = {0, 2, 3, 1};
      p.inner = 1;
      bool after = false;
      for (size_t d : order) {
        if (after) p.inner *= x[d];
        after = after || d == axis;
      }
      cudaFree(params_);
      params_ = nullptr;
      const size_t bytes = scale.size() * (sizeof(float) + sizeof(int32_t));
      EI_CUDA_CHECK(cudaMalloc(&params_, bytes));
      EI_CUDA_CHECK(
          cudaMemcpy(params_, scale.data(), scale.size() * sizeof(float), cudaMemcpyHostToDevice));
      int32_t* dz = reinterpret_cast<int32_t*>(static_cast<float*>(params_) + scale.size());
      EI_CUDA_CHECK(cudaMemcpy(dz, zp.data(), zp.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
      p.scale = static_cast<const float*>(params_);
      p.zeroPoint = dz;
    }
    p.numInputs = numOperands_;
    std::vector<Shape> ops;
    for (int k = 0; k < numOperands_; ++k) ops.push_back(layer.inputShapes[static_cast<size_t>(k)]);
    const Shape& out = layer.outputShapes[0];
    if (!planBroadcast(out, ops.data(), numOperands_, nhwc(), p.dims, p.strides, &p.rank))
      return Status(ErrorCode::kUnsupported, id() + ": operands do not broadcast to the output");
    p.numel = out.numel();
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }

  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, static_cast<size_t>(numOperands_)));
    return launchTypedElt(plan_, args.inputs.data(), args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  static std::string familyOf(TypedOp op, const LayerContext& layer) {
    switch (op) {
      case TypedOp::kCast:
        return "cast";
      case TypedOp::kWhere:
        return "where";
      case TypedOp::kAnd:
      case TypedOp::kOr:
      case TypedOp::kXor:
      case TypedOp::kNot:
        return "logic";
      case TypedOp::kIsNaN:
      case TypedOp::kIsInf:
        return "classify";
      case TypedOp::kQuantize:
        return "quantize";
      case TypedOp::kDequantize:
        return "dequantize";
      case TypedOp::kEqual:
      case TypedOp::kGreater:
      case TypedOp::kGreaterOrEqual:
      case TypedOp::kLess:
      case TypedOp::kLessOrEqual:
        return "compare";
      default:
        (void)layer;
        return "intarith";
    }
  }

  TypedOp op_;
  DataType out_;
  int numOperands_ = 1;
  TypedEltPlan plan_;
  void* params_ = nullptr;  // Q/DQ: the scales, then the zero points
};

// ---- MatMulInteger, ConvInteger ----------------------------------------------------------------
// Zero points are ordinary inputs in their operand's type, constant or computed at run time
// (DynamicQuantizeLinear's): the kernels read them on the device.

bool isQuantType(DataType t) {
  return t == DataType::kInt8 || t == DataType::kUInt8;
}

/// Whether zero-point input i is absent, or of operand `operand`'s type with one value or
/// (`perLen` > 0) a 1-D run of perLen values; *per tells which.
bool zeroPointFits(const LayerContext& layer, size_t i, size_t operand, int64_t perLen, bool* per) {
  *per = false;
  if (i >= layer.inputShapes.size() || !layer.hasInput(i)) return true;
  const Shape& z = layer.inputShapes[i];
  if (layer.inputTypes[i] != layer.inputTypes[operand] || !isStatic(z)) return false;
  if (z.numel() == 1) return true;
  *per = perLen > 0 && z.rank() == 1 && z.numel() == perLen;
  return *per;
}

/// The plan of a MatMulInteger (int8 / uint8 operands, int32 output, static shapes, zero
/// points per tensor or A's per row / B's per column); false otherwise (the CPU runs it).
bool intMatMulPlan(const LayerContext& layer, IntMatMulPlan* p) {
  if (layer.inputShapes.size() < 2 || layer.inputShapes.size() > 4 ||
      layer.outputShapes.size() != 1 || !layer.hasInput(0) || !layer.hasInput(1) ||
      !isQuantType(layer.inputTypes[0]) || !isQuantType(layer.inputTypes[1]) ||
      layer.outputTypes[0] != DataType::kInt32)
    return false;
  Shape sa = layer.inputShapes[0], sb = layer.inputShapes[1];
  if (!isStatic(sa) || !isStatic(sb) || !isStatic(layer.outputShapes[0]) || sa.rank() == 0 ||
      sb.rank() == 0)
    return false;
  if (sa.rank() == 1) sa = Shape({1, sa[0]});
  if (sb.rank() == 1) sb = Shape({sb[0], 1});
  *p = IntMatMulPlan{};
  p->aSigned = layer.inputTypes[0] == DataType::kInt8;
  p->bSigned = layer.inputTypes[1] == DataType::kInt8;
  p->M = sa[sa.rank() - 2];
  p->K = sa[sa.rank() - 1];
  p->N = sb[sb.rank() - 1];
  if (sb[sb.rank() - 2] != p->K) return false;
  const size_t ra = sa.rank() - 2, rb = sb.rank() - 2, rank = std::max(ra, rb);
  if (rank > static_cast<size_t>(IntMatMulPlan::kMaxBatchDims)) return false;
  p->batchRank = static_cast<int>(rank);
  int64_t strideA = 1, strideB = 1;
  for (size_t d = rank; d-- > 0;) {
    const int64_t da = d + ra >= rank ? sa[d + ra - rank] : 1;
    const int64_t db = d + rb >= rank ? sb[d + rb - rank] : 1;
    if (da != db && da != 1 && db != 1) return false;
    p->batchDims[d] = std::max(da, db);
    p->aBatchStride[d] = da == 1 ? 0 : strideA;
    p->bBatchStride[d] = db == 1 ? 0 : strideB;
    strideA *= da;
    strideB *= db;
    p->batches *= p->batchDims[d];
  }
  if (layer.outputShapes[0].numel() != p->batches * p->M * p->N) return false;
  return zeroPointFits(layer, 2, 0, p->M, &p->aZpPerRow) &&
         zeroPointFits(layer, 3, 1, p->N, &p->bZpPerCol);
}

/// The plan of a ConvInteger (int8 / uint8 operands, int32 output, NCHW with 1 to 3 static
/// spatial dims, X's zero point one value, W's one value or one per output channel); false
/// otherwise (the CPU runs it).
bool intConvPlan(const LayerContext& layer, IntConvPlan* p) {
  if (layer.inputShapes.size() < 2 || layer.inputShapes.size() > 4 ||
      layer.outputShapes.size() != 1 || !layer.hasInput(0) || !layer.hasInput(1) ||
      !isQuantType(layer.inputTypes[0]) || !isQuantType(layer.inputTypes[1]) ||
      layer.outputTypes[0] != DataType::kInt32)
    return false;
  const Shape &xs = layer.inputShapes[0], &ws = layer.inputShapes[1];
  const Shape& ys = layer.outputShapes[0];
  if (!isStatic(xs) || !isStatic(ws) || !isStatic(ys) || xs.rank() < 3 ||
      xs.rank() > 2 + static_cast<size_t>(IntConvPlan::kMaxSpatial) || ws.rank() != xs.rank() ||
      ys.rank() != xs.rank())
    return false;
  *p = IntConvPlan{};
  const size_t sr = xs.rank() - 2;
  p->spatial = static_cast<int>(sr);
  p->xSigned = layer.inputTypes[0] == DataType::kInt8;
  p->wSigned = layer.inputTypes[1] == DataType::kInt8;
  p->N = xs[0];
  p->C = xs[1];
  p->M = ws[0];
  p->group = layer.node->attrs.getInt("group", 1);
  if (p->group < 1 || p->C != ws[1] * p->group || p->M % p->group != 0 || ys[0] != p->N ||
      ys[1] != p->M)
    return false;
  graph::WindowAttrs wa;
  const std::vector<int64_t> kernel(ws.dims().begin() + 2, ws.dims().end());
  graph::WindowDims d;
  if (!graph::readWindowAttrs(layer.node->attrs, sr, kernel, &wa).ok() ||
      !graph::computeWindowDims(wa, std::vector<int64_t>(xs.dims().begin() + 2, xs.dims().end()),
                                &d)
           .ok())
    return false;
  // Spatial dims right-aligned into the kernel's three; the leading ones have size 1.
  const size_t lead = static_cast<size_t>(IntConvPlan::kMaxSpatial) - sr;
  for (size_t i = 0; i < sr; ++i) {
    if (d.out[i] != ys[2 + i]) return false;
    p->in[lead + i] = d.in[i];
    p->out[lead + i] = d.out[i];
    p->kernel[lead + i] = kernel[i];
    p->stride[lead + i] = wa.strides[i];
    p->dilation[lead + i] = wa.dilations[i];
    p->padBegin[lead + i] = d.padBegin[i];
  }
  bool xPer = false;
  return zeroPointFits(layer, 2, 0, 0, &xPer) &&
         zeroPointFits(layer, 3, 1, p->M, &p->wZpPerChannel);
}

/// MatMulInteger / ConvInteger: every input in its own type (operands and zero points).
template <typename Plan, bool (*Planner)(const LayerContext&, Plan*),
          Status (*Launch)(const Plan&, const void*, const void*, const void*, const void*,
                           int32_t*, int, void*)>
class IntegerTactic final : public CudaTactic {
 public:
  IntegerTactic(const char* family, const LayerContext& layer)
      : CudaTactic(family, layer.inputTypes[0], Layout::kNCHW, layer) {
    for (size_t i = 1; i < layer.inputTypes.size(); ++i) setInputType(i, layer.inputTypes[i]);
    id_ = std::string("cuda.") + family + "." + storageName(layer.inputTypes[0]) + "-" +
          storageName(layer.inputTypes[1]);
  }
  TensorFormat outputFormat(size_t i) const override {
    return {DataType::kInt32, formatFor(i < outputRanks_.size() ? outputRanks_[i] : 0)};
  }
  Status initialize(const LayerContext& layer) override {
    if (!Planner(layer, &plan_))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 2));
    const auto zp = [&](size_t i) { return i < args.inputs.size() ? args.inputs[i] : nullptr; };
    return Launch(plan_, args.inputs[0], args.inputs[1], zp(2), zp(3),
                  static_cast<int32_t*>(args.outputs[0]), maxBlocks_, args.stream);
  }

 private:
  Plan plan_;
};

using IntMatMulTactic = IntegerTactic<IntMatMulPlan, intMatMulPlan, launchIntMatMul>;
using IntConvTactic = IntegerTactic<IntConvPlan, intConvPlan, launchIntConv>;

// ---- DynamicQuantizeLinear ---------------------------------------------------------------------

bool dynamicQuantizeSupported(const LayerContext& layer) {
  return layer.inputShapes.size() == 1 && layer.hasInput(0) &&
         layer.inputTypes[0] == DataType::kFloat32 && isStatic(layer.inputShapes[0]) &&
         layer.outputShapes.size() == 3 && layer.outputTypes[0] == DataType::kUInt8 &&
         layer.outputTypes[1] == DataType::kFloat32 && layer.outputTypes[2] == DataType::kUInt8;
}

/// x read in float32 (an FP16 copy would move the range and every quantized value); y in
/// uint8, the scale in float32, the zero point in uint8.
class DynamicQuantizeTactic final : public CudaTactic {
 public:
  explicit DynamicQuantizeTactic(const LayerContext& layer)
      : CudaTactic("dynquant", DataType::kFloat32, Layout::kNCHW, layer) {}
  TensorFormat outputFormat(size_t i) const override {
    const size_t rank = i < outputRanks_.size() ? outputRanks_[i] : 0;
    return {i == 1 ? DataType::kFloat32 : DataType::kUInt8, formatFor(rank)};
  }
  size_t workspaceBytes() const override { return dynamicQuantizeWorkspaceBytes(); }
  Status initialize(const LayerContext& layer) override {
    if (!dynamicQuantizeSupported(layer))
      return Status(ErrorCode::kUnsupported, id() + ": layer not supported");
    n_ = layer.inputShapes[0].numel();
    maxBlocks_ = maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }
  Status enqueue(const LaunchArgs& args) override {
    EI_RETURN_IF_ERROR(checkArgs(args, 1));
    const auto out = [&](size_t i) { return i < args.outputs.size() ? args.outputs[i] : nullptr; };
    return launchDynamicQuantize(static_cast<const float*>(args.inputs[0]), n_,
                                 static_cast<uint8_t*>(args.outputs[0]),
                                 static_cast<float*>(out(1)), static_cast<uint8_t*>(out(2)),
                                 args.workspace, args.workspaceBytes, maxBlocks_, args.stream);
  }

 private:
  int64_t n_ = 0;
};

}  // namespace

bool typedCandidates(const LayerContext& layer, Precision precision,
                     std::vector<std::unique_ptr<Tactic>>* out) {
  if (layer.node->opType == "MatMulInteger" && layer.node->domain.empty()) {
    IntMatMulPlan p;
    if (intMatMulPlan(layer, &p))
      out->push_back(std::make_unique<IntMatMulTactic>("intmatmul", layer));
    return true;
  }
  if (layer.node->opType == "DynamicQuantizeLinear" && layer.node->domain.empty()) {
    if (dynamicQuantizeSupported(layer))
      out->push_back(std::make_unique<DynamicQuantizeTactic>(layer));
    return true;
  }
  if (layer.node->opType == "ConvInteger" && layer.node->domain.empty()) {
    IntConvPlan p;
    if (intConvPlan(layer, &p)) out->push_back(std::make_unique<IntConvTactic>("intconv", layer));
    return true;
  }
  TypedOp op;
  if (!typedOpFor(layer, &op)) return false;
  const graph::Node& node = *layer.node;
  const int n = operandsOf(op);
  const bool quant = op == TypedOp::kQuantize || op == TypedOp::kDequantize;
  const size_t inputs = layer.inputShapes.size();
  const size_t expectInputs = node.opType == "CastLike" ? 2 : static_cast<size_t>(n);
  if ((quant ? inputs < 2 || inputs > 3 : inputs != expectInputs) ||
      layer.outputShapes.size() != 1 || node.outputs.size() != 1)
    return true;
  for (size_t i = 0; i < (quant ? 1 : expectInputs); ++i)
    if (!layer.hasInput(i) || !isStatic(layer.inputShapes[i])) return true;
  if (quant) {
    std::vector<float> scale;
    std::vector<int32_t> zp;
    size_t axis = 0;
    if (!quantParams(layer, &scale, &zp, &axis)) return true;
  }
  const Shape& y = layer.outputShapes[0];
  if (!isStatic(y) || y.numel() == 0 || y.rank() > static_cast<size_t>(kEltMaxDims)) return true;
  const DataType v = valueType(layer, op);
  if (!typesAgree(layer, op, v)) return true;
  // Broadcasting checked once, on the logical shapes.
  {
    std::vector<Shape> ops(layer.inputShapes.begin(), layer.inputShapes.begin() + n);
    TypedEltPlan probe;
    if (!planBroadcast(y, ops.data(), n, false, probe.dims, probe.strides, &probe.rank))
      return true;
  }
  const std::vector<Layout> layouts = y.rank() == 4
                                          ? std::vector<Layout>{Layout::kNCHW, Layout::kNHWC}
                                          : std::vector<Layout>{Layout::kLinear};
  // Ops whose result is exact (an integer, a bool, a quantized value) read a float input in
  // float32: FP16 storage would round it first (Cast(2049.0) to int, 70000 to inf for IsInf,
  // a flipped comparison). Casts between floats and Where (a copy) may use either.
  const bool exactResult = isFloatStorage(v) && op != TypedOp::kWhere &&
                           !(op == TypedOp::kCast && isFloatStorage(layer.outputTypes[0]));
  const std::vector<DataType> valueStorage =
      exactResult ? std::vector<DataType>{DataType::kFloat32} : storageFor(v, precision);
  for (DataType vs : valueStorage) {
    std::vector<DataType> outs;
    switch (op) {
      case TypedOp::kCast:
      case TypedOp::kQuantize:
      case TypedOp::kDequantize:
        outs = storageFor(layer.outputTypes[0], precision);
        break;
      case TypedOp::kWhere:
      case TypedOp::kIntAdd:
      case TypedOp::kIntSub:
      case TypedOp::kIntMul:
      case TypedOp::kIntDiv:
      case TypedOp::kIntMod:
      case TypedOp::kIntFMod:
      case TypedOp::kIntMin:
      case TypedOp::kIntMax:
      case TypedOp::kIntPow:
      case TypedOp::kShiftLeft:
      case TypedOp::kShiftRight:
        outs = {vs};
        break;
      default:
        outs = {DataType::kBool};
        break;
    }
    for (DataType os : outs)
      for (Layout l : layouts) out->push_back(std::make_unique<TypedTactic>(op, vs, os, l, layer));
  }
  return true;
}

}  // namespace edgeinfer::cuda::detail
