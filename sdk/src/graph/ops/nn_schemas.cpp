// Shape inference for the neural-network ops: convolution, pooling, normalisation, Gemm /
// MatMul, the softmax family, Resize, DepthToSpace / SpaceToDepth, PRelu, LpNormalization.
// Every function propagates unknown dims (-1) and unknown ranks, and rejects what can never
// be valid (rank or channel mismatches, bad attribute values) with an InvalidModel status.
#include <cmath>
#include <string>
#include <vector>

#include "graph/op_schema.h"
#include "graph/ops/conv_geometry.h"
#include "graph/ops/nn_shape_fns.h"

namespace edgeinfer::graph {
namespace {

Status invalid(const std::string& msg) {
  return Status(ErrorCode::kInvalidModel, msg);
}
Status unsupported(const std::string& msg) {
  return Status(ErrorCode::kUnsupported, msg);
}

bool known(int64_t d) {
  return d >= 0;
}
bool conflict(int64_t a, int64_t b) {
  return known(a) && known(b) && a != b;
}
std::string str(int64_t v) {
  return std::to_string(v);
}

void setOutput(InferContext& ctx, size_t i, DataType dtype, Shape shape) {
  if (i >= ctx.outputs.size()) return;
  ctx.outputs[i].dtype = dtype;
  ctx.outputs[i].shape = std::move(shape);
  ctx.outputs[i].shapeKnown = true;
}

void setUnknownRank(InferContext& ctx, size_t i, DataType dtype) {
  if (i >= ctx.outputs.size()) return;
  ctx.outputs[i].dtype = dtype;
  ctx.outputs[i].shape = Shape();
  ctx.outputs[i].shapeKnown = false;
}

/// Input i must be floating point (float32 / float16 / bfloat16).
Status requireFloat(const InferContext& ctx, size_t i, const char* what) {
  const DataType t = ctx.inputs[i].dtype;
  if (!isFloatingPoint(t))
    return invalid(std::string(what) + " must be a floating-point tensor, got " + dataTypeName(t));
  return Status::Ok();
}

/// Optional input i, when present, must have the same element type as input 0.
Status requireSameType(const InferContext& ctx, size_t i, const char* what) {
  if (!ctx.hasInput(i)) return Status::Ok();
  if (ctx.inputs[i].dtype != ctx.inputs[0].dtype)
    return invalid(std::string(what) + " has type " + dataTypeName(ctx.inputs[i].dtype) +
                   " but the input has type " + dataTypeName(ctx.inputs[0].dtype));
  return Status::Ok();
}

/// `from` must broadcast to `to` without changing `to` (ONNX unidirectional broadcasting).
Status checkUnidirectional(const Shape& from, const Shape& to, const std::string& what) {
  if (from.rank() > to.rank())
    return invalid(what + " " + from.toString() + " has a higher rank than " + to.toString());
  const size_t off = to.rank() - from.rank();
  for (size_t i = 0; i < from.rank(); ++i)
    if (from[i] != 1 && conflict(from[i], to[off + i]))
      return invalid(what + " " + from.toString() + " cannot be broadcast to " + to.toString());
  return Status::Ok();
}

/// A rank-1 input of length `len` (len may be unknown).
Status checkVector(const InferContext& ctx, size_t i, int64_t len, const std::string& what) {
  if (!ctx.hasInput(i) || !ctx.inputs[i].shapeKnown) return Status::Ok();
  const Shape& s = ctx.inputs[i].shape;
  if (s.rank() != 1 || conflict(s[0], len))
    return invalid(what + " has shape " + s.toString() + ", expected [" +
                   (known(len) ? str(len) : std::string("?")) + "]");
  return Status::Ok();
}

Status checkBinaryFlag(const Attributes& a, const char* name, int64_t def) {
  const int64_t v = a.getInt(name, def);
  if (v != 0 && v != 1) return invalid(std::string("attribute ") + name + " must be 0 or 1");
  return Status::Ok();
}

/// The shape of input i, or a shape of `rank` unknown dims when only the rank is expected.
Shape shapeOrUnknown(const InferValue& v, size_t rank) {
  return v.shapeKnown ? v.shape : Shape(std::vector<int64_t>(rank, -1));
}

std::vector<int64_t> spatialDims(const Shape& s) {
  return std::vector<int64_t>(s.dims().begin() + 2, s.dims().end());
}

// ---- Conv / ConvTranspose -----------------------------------------------------------------

Status inferConvLike(InferContext& ctx, bool transpose) {
  EI_RETURN_IF_ERROR(requireFloat(ctx, 0, "X"));
  EI_RETURN_IF_ERROR(requireSameType(ctx, 1, "W"));
  EI_RETURN_IF_ERROR(requireSameType(ctx, 2, "B"));
  const DataType dtype = ctx.inputs[0].dtype;
  const Attributes& a = ctx.attrs();
  const int64_t group = a.getInt("group", 1);
  if (group < 1 || group > kMaxWindowAttr)
    return invalid("group must be positive, got " + str(group));
  const InferValue& x = ctx.inputs[0];
  const InferValue& w = ctx.inputs[1];
  if (!x.shapeKnown && !w.shapeKnown) {
    setUnknownRank(ctx, 0, dtype);
    return Status::Ok();
  }
  const size_t rank = x.shapeKnown ? x.shape.rank() : w.shape.rank();
  if (rank < 3)
    return invalid("input must have rank >= 3 (N, C and at least one spatial dim), got rank " +
                   str(static_cast<int64_t>(rank)));
  if (x.shapeKnown && w.shapeKnown && w.shape.rank() != x.shape.rank())
    return invalid("weight " + w.shape.toString() + " must have the rank of the input " +
                   x.shape.toString());
  const Shape xs = shapeOrUnknown(x, rank);
  const Shape ws = shapeOrUnknown(w, rank);
  if (ws[0] == 0 || ws[1] == 0) return invalid("weight " + ws.toString() + " is empty");
  const int64_t c = xs[1];
  if (known(c) && c % group != 0)
    return invalid("group " + str(group) + " does not divide the " + str(c) + " input channels");
  int64_t outC = -1;
  if (!transpose) {  // W: [M, C / group, k...]
    if (known(c) && known(ws[1]) && c != ws[1] * group)
      return invalid("input has " + str(c) + " channels but weight " + ws.toString() +
                     " with group " + str(group) + " expects " + str(ws[1] * group));
    if (known(ws[0]) && ws[0] % group != 0)
      return invalid("group " + str(group) + " does not divide the " + str(ws[0]) +
                     " output channels");
    outC = ws[0];
  } else {  // W: [C, M / group, k...]
    if (conflict(c, ws[0]))
      return invalid("input has " + str(c) + " channels but weight " + ws.toString() + " expects " +
                     str(ws[0]));
    if (known(ws[0]) && ws[0] % group != 0)
      return invalid("group " + str(group) + " does not divide the " + str(ws[0]) +
                     " weight channels");
    if (known(ws[1])) outC = ws[1] * group;
  }
  const size_t spatial = rank - 2;
  WindowAttrs wa;
  EI_RETURN_IF_ERROR(readWindowAttrs(a, spatial, spatialDims(ws), &wa));
  wa.ceilMode = false;
  WindowDims dims;
  if (!transpose) {
    EI_RETURN_IF_ERROR(computeWindowDims(wa, spatialDims(xs), &dims));
  } else {
    ConvTransposeAttrs ta;
    EI_RETURN_IF_ERROR(readConvTransposeAttrs(a, wa, &ta));
    EI_RETURN_IF_ERROR(computeConvTransposeDims(wa, ta, spatialDims(xs), &dims));
  }
  EI_RETURN_IF_ERROR(checkVector(ctx, 2, outC, "bias B"));
  std::vector<int64_t> out = {xs[0], outC};
  out.insert(out.end(), dims.out.begin(), dims.out.end());
  Shape outShape(out);
  if (ctx.hasInput(3)) {  // FusedConv residual Z: exactly the output shape
    EI_RETURN_IF_ERROR(requireSameType(ctx, 3, "Z"));
    const InferValue& z = ctx.inputs[3];
    if (z.shapeKnown) {
      if (z.shape.rank() != rank)
        return invalid("residual Z " + z.shape.toString() + " must have the output shape " +
                       outShape.toString());
      for (size_t i = 0; i < rank; ++i) {
        if (conflict(z.shape[i], out[i]))
          return invalid("residual Z " + z.shape.toString() + " must have the output shape " +
                         outShape.toString());
        if (!known(out[i])) out[i] = z.shape[i];
      }
      outShape = Shape(out);
    }
  }
  setOutput(ctx, 0, dtype, outShape);
  return Status::Ok();
}

// ---- Pooling ------------------------------------------------------------------------------

enum class PoolKind { kMax, kAverage, kLp };

Status inferPool(InferContext& ctx, PoolKind kind) {
  const DataType dtype = ctx.inputs[0].dtype;
  if (kind == PoolKind::kMax && (dtype == DataType::kInt8 || dtype == DataType::kUInt8)) {
    // MaxPool-12 accepts 8-bit integers too.
  } else {
    EI_RETURN_IF_ERROR(requireFloat(ctx, 0, "X"));
  }
  const Attributes& a = ctx.attrs();
  if (kind == PoolKind::kMax) {
    EI_RETURN_IF_ERROR(checkBinaryFlag(a, "storage_order", 0));
    if (ctx.outputs.size() > 2) return invalid("MaxPool has at most 2 outputs");
  } else if (ctx.outputs.size() > 1) {
    return invalid("pooling op has 1 output, the node lists " +
                   str(static_cast<int64_t>(ctx.outputs.size())));
  }
  if (kind == PoolKind::kAverage) EI_RETURN_IF_ERROR(checkBinaryFlag(a, "count_include_pad", 0));
  if (kind == PoolKind::kLp && a.getInt("p", 2) < 1)
    return invalid("attribute p must be >= 1, got " + str(a.getInt("p", 2)));
  const std::vector<int64_t> ks = a.getInts("kernel_shape");
  if (!a.has("kernel_shape")) return invalid("attribute kernel_shape is required");
  const InferValue& x = ctx.inputs[0];
  const size_t rank = x.shapeKnown ? x.shape.rank() : ks.size() + 2;
  if (rank < 3)
    return invalid("input must have rank >= 3 (N, C and at least one spatial dim), got rank " +
                   str(static_cast<int64_t>(rank)));
  WindowAttrs wa;
  EI_RETURN_IF_ERROR(readWindowAttrs(a, rank - 2, {}, &wa));
  if (wa.autoPad == AutoPad::kNotSet) {
    for (size_t i = 0; i < wa.rank(); ++i)
      if (wa.padsBegin[i] >= wa.effectiveKernel(i) || wa.padsEnd[i] >= wa.effectiveKernel(i))
        return invalid("pads must be smaller than the kernel (spatial dim " +
                       str(static_cast<int64_t>(i)) + ")");
  }
  const Shape xs = shapeOrUnknown(x, rank);
  WindowDims dims;
  EI_RETURN_IF_ERROR(computeWindowDims(wa, spatialDims(xs), &dims));
  std::vector<int64_t> out = {xs[0], xs[1]};
  out.insert(out.end(), dims.out.begin(), dims.out.end());
  setOutput(ctx, 0, dtype, Shape(out));
  if (kind == PoolKind::kMax && ctx.outputs.size() > 1)
    setOutput(ctx, 1, DataType::kInt64, Shape(out));
  return Status::Ok();
}

Status inferGlobalPool(InferContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat(ctx, 0, "X"));
  const InferValue& x = ctx.inputs[0];
  if (!x.shapeKnown) {
    setUnknownRank(ctx, 0, x.dtype);
    return Status::Ok();
  }
  if (x.shape.rank() < 3) return invalid("input " + x.shape.toString() + " must have rank >= 3");
  Shape out = x.shape;
  for (size_t i = 2; i < out.rank(); ++i) out[i] = 1;
  setOutput(ctx, 0, x.dtype, out);
  return Status::Ok();
}

// ---- Normalisation ------------------------------------------------------------------------

Status inferBatchNorm(InferContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat(ctx, 0, "X"));
  for (size_t i = 1; i < 5; ++i)
    EI_RETURN_IF_ERROR(requireFloat(ctx, i, "BatchNormalization parameter"));
  const Attributes& a = ctx.attrs();
  if (a.getInt("training_mode", 0) != 0)
    return unsupported("BatchNormalization with training_mode = 1 is not supported");
  for (size_t i = 1; i < ctx.node.outputs.size(); ++i)
    if (!ctx.node.outputs[i].empty())
      return unsupported(
          "BatchNormalization training outputs (running mean/var) are not "
          "supported; only inference mode with one output");
  const float eps = a.getFloat("epsilon", 1e-5f);
  if (!(eps >= 0.f) || !std::isfinite(eps)) return invalid("epsilon must be finite and >= 0");
  const bool spatial = a.getInt("spatial", 1) != 0;  // opset 7-8 only
  const InferValue& x = ctx.inputs[0];
  // Absent trailing outputs (empty names) still get a (zero-size) shape.
  for (size_t i = 1; i < ctx.outputs.size(); ++i) setOutput(ctx, i, x.dtype, Shape{0});
  if (!x.shapeKnown) {
    setUnknownRank(ctx, 0, x.dtype);
    return Status::Ok();
  }
  if (x.shape.rank() < 2) return invalid("input " + x.shape.toString() + " must have rank >= 2");
  const int64_t c = x.shape[1];
  const int64_t perElement = x.shape.span(1, x.shape.rank());
  static const char* kNames[] = {"", "scale", "B", "mean", "var"};
  for (size_t i = 1; i < 5; ++i) {
    const InferValue& p = ctx.inputs[i];
    if (!p.shapeKnown) continue;
    const int64_t n = p.shape.numel();
    const bool ok = (p.shape.rank() == 1 && !conflict(p.shape[0], c)) ||
                    (!spatial && n >= 0 && perElement >= 0 && n == perElement);
    if (!ok)
      return invalid(std::string(kNames[i]) + " has shape " + p.shape.toString() +
                     " but the input has " + str(c) + " channels");
  }
  setOutput(ctx, 0, x.dtype, x.shape);
  return Status::Ok();
}

Status inferInstanceNorm(InferContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat(ctx, 0, "X"));
  EI_RETURN_IF_ERROR(requireSameType(ctx, 1, "scale"));
  EI_RETURN_IF_ERROR(requireSameType(ctx, 2, "B"));
  const InferValue& x = ctx.inputs[0];
  if (!x.shapeKnown) {
    setUnknownRank(ctx, 0, x.dtype);
    return Status::Ok();
  }
  if (x.shape.rank() < 3) return invalid("input " + x.shape.toString() + " must have rank >= 3");
  EI_RETURN_IF_ERROR(checkVector(ctx, 1, x.shape[1], "scale"));
  EI_RETURN_IF_ERROR(checkVector(ctx, 2, x.shape[1], "B"));
  setOutput(ctx, 0, x.dtype, x.shape);
  return Status::Ok();
}

Status inferLayerNorm(InferContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat(ctx, 0, "X"));
  EI_RETURN_IF_ERROR(requireSameType(ctx, 1, "Scale"));
  EI_RETURN_IF_ERROR(requireSameType(ctx, 2, "B"));
  const Attributes& a = ctx.attrs();
  if (a.getInt("stash_type", 1) != 1)
    return unsupported("LayerNormalization stash_type other than 1 (float) is not supported");
  if (ctx.outputs.size() > 3) return invalid("LayerNormalization has at most 3 outputs");
  const InferValue& x = ctx.inputs[0];
  if (!x.shapeKnown) {
    setUnknownRank(ctx, 0, x.dtype);
    for (size_t i = 1; i < ctx.outputs.size(); ++i) setUnknownRank(ctx, i, DataType::kFloat32);
    return Status::Ok();
  }
  const int64_t rank = static_cast<int64_t>(x.shape.rank());
  if (rank < 1) return invalid("input must have rank >= 1");
  EI_ASSIGN_OR_RETURN(const int64_t axis, normalizeAxis(a.getInt("axis", -1), rank));
  const Shape normShape(std::vector<int64_t>(x.shape.dims().begin() + axis, x.shape.dims().end()));
  if (ctx.inputs[1].shapeKnown)
    EI_RETURN_IF_ERROR(checkUnidirectional(ctx.inputs[1].shape, normShape, "Scale"));
  if (ctx.hasInput(2) && ctx.inputs[2].shapeKnown)
    EI_RETURN_IF_ERROR(checkUnidirectional(ctx.inputs[2].shape, normShape, "B"));
  setOutput(ctx, 0, x.dtype, x.shape);
  Shape stats = x.shape;
  for (int64_t i = axis; i < rank; ++i) stats[static_cast<size_t>(i)] = 1;
  for (size_t i = 1; i < ctx.outputs.size(); ++i) setOutput(ctx, i, DataType::kFloat32, stats);
  return Status::Ok();
}

Status inferLrn(InferContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat(ctx, 0, "X"));
  const Attributes& a = ctx.attrs();
  if (!a.has("size")) return invalid("attribute size is required");
  const int64_t size = a.getInt("size", 0);
  if (size < 1 || size > kMaxWindowAttr)
    return invalid("attribute size must be >= 1, got " + str(size));
  const InferValue& x = ctx.inputs[0];
  if (!x.shapeKnown) {
    setUnknownRank(ctx, 0, x.dtype);
    return Status::Ok();
  }
  if (x.shape.rank() < 3) return invalid("input " + x.shape.toString() + " must have rank >= 3");
  setOutput(ctx, 0, x.dtype, x.shape);
  return Status::Ok();
}

// ---- Softmax family, PRelu, LpNormalization ------------------------------------------------

Status inferSoftmax(InferContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat(ctx, 0, "input"));
  const Attributes& a = ctx.attrs();
  EI_RETURN_IF_ERROR(checkBinaryFlag(a, "coerce_2d", 0));
  const bool coerce = a.getInt("coerce_2d", 0) == 1;
  const InferValue& x = ctx.inputs[0];
  if (!x.shapeKnown) {
    setUnknownRank(ctx, 0, x.dtype);
    return Status::Ok();
  }
  const int64_t rank = static_cast<int64_t>(x.shape.rank());
  const int64_t axis = a.getInt("axis", coerce ? 1 : -1);
  if (coerce) {
    // Opset < 13: axis may equal the rank (then the 2-D view is [numel, 1]).
    if (axis < -rank || axis > rank)
      return invalid("axis " + str(axis) + " is out of range for rank " + str(rank));
  } else {
    if (rank < 1) return invalid("input must have rank >= 1");
    EI_RETURN_IF_ERROR(normalizeAxis(axis, rank).status());
  }
  setOutput(ctx, 0, x.dtype, x.shape);
  return Status::Ok();
}

Status inferPRelu(InferContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat(ctx, 0, "X"));
  EI_RETURN_IF_ERROR(requireSameType(ctx, 1, "slope"));
  const InferValue& x = ctx.inputs[0];
  if (!x.shapeKnown) {
    setUnknownRank(ctx, 0, x.dtype);
    return Status::Ok();
  }
  if (ctx.inputs[1].shapeKnown)
    EI_RETURN_IF_ERROR(checkUnidirectional(ctx.inputs[1].shape, x.shape, "slope"));
  setOutput(ctx, 0, x.dtype, x.shape);
  return Status::Ok();
}

Status inferLpNorm(InferContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat(ctx, 0, "input"));
  const Attributes& a = ctx.attrs();
  const int64_t p = a.getInt("p", 2);
  if (p != 1 && p != 2) return invalid("attribute p must be 1 or 2, got " + str(p));
  const InferValue& x = ctx.inputs[0];
  if (!x.shapeKnown) {
    setUnknownRank(ctx, 0, x.dtype);
    return Status::Ok();
  }
  EI_RETURN_IF_ERROR(
      normalizeAxis(a.getInt("axis", -1), static_cast<int64_t>(x.shape.rank())).status());
  setOutput(ctx, 0, x.dtype, x.shape);
  return Status::Ok();
}

// ---- DepthToSpace / SpaceToDepth -----------------------------------------------------------

Status inferDepthSpace(InferContext& ctx, bool depthToSpace) {
  const Attributes& a = ctx.attrs();
  if (!a.has("blocksize")) return invalid("attribute blocksize is required");
  const int64_t b = a.getInt("blocksize", 0);
  if (b < 1 || b > 65536) return invalid("blocksize must be in [1, 65536], got " + str(b));
  if (depthToSpace) {
    const std::string mode = a.getString("mode", "DCR");
    if (mode != "DCR" && mode != "CRD") return invalid("unknown DepthToSpace mode '" + mode + "'");
  }
  const InferValue& x = ctx.inputs[0];
  if (!x.shapeKnown) {
    setUnknownRank(ctx, 0, x.dtype);
    return Status::Ok();
  }
  if (x.shape.rank() != 4) return invalid("input " + x.shape.toString() + " must have rank 4");
  Shape out = x.shape;
  if (depthToSpace) {
    if (known(out[1]) && out[1] % (b * b) != 0)
      return invalid("channels " + str(out[1]) +
                     " are not divisible by blocksize^2 = " + str(b * b));
    out[1] = known(out[1]) ? out[1] / (b * b) : -1;
    out[2] = known(out[2]) ? out[2] * b : -1;
    out[3] = known(out[3]) ? out[3] * b : -1;
  } else {
    for (size_t i = 2; i < 4; ++i)
      if (known(out[i]) && out[i] % b != 0)
        return invalid("spatial dim " + str(out[i]) + " is not divisible by blocksize " + str(b));
    out[1] = known(out[1]) ? out[1] * b * b : -1;
    out[2] = known(out[2]) ? out[2] / b : -1;
    out[3] = known(out[3]) ? out[3] / b : -1;
  }
  setOutput(ctx, 0, x.dtype, out);
  return Status::Ok();
}

// ---- Resize ---------------------------------------------------------------------------------

/// True when optional input i is absent or an empty tensor (opset 13 passes "" or []).
bool absentOrEmpty(const InferContext& ctx, size_t i) {
  if (!ctx.hasInput(i)) return true;
  const InferValue& v = ctx.inputs[i];
  return v.shapeKnown && v.shape.numel() == 0;
}

Status inferResize(InferContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat(ctx, 0, "X"));
  const Attributes& a = ctx.attrs();
  const std::string mode = a.getString("mode", "nearest");
  if (mode != "nearest" && mode != "linear" && mode != "cubic")
    return invalid("unknown Resize mode '" + mode + "'");
  const std::string ctm = a.getString("coordinate_transformation_mode", "half_pixel");
  if (ctm != "half_pixel" && ctm != "pytorch_half_pixel" && ctm != "align_corners" &&
      ctm != "asymmetric" && ctm != "tf_crop_and_resize" && ctm != "tf_half_pixel_for_nn")
    return invalid("unknown coordinate_transformation_mode '" + ctm + "'");
  const std::string nm = a.getString("nearest_mode", "round_prefer_floor");
  if (nm != "round_prefer_floor" && nm != "round_prefer_ceil" && nm != "floor" && nm != "ceil")
    return invalid("unknown nearest_mode '" + nm + "'");
  EI_RETURN_IF_ERROR(checkBinaryFlag(a, "exclude_outside", 0));
  if (a.has("axes") || a.getString("keep_aspect_ratio_policy", "stretch") != "stretch")
    return unsupported("Resize axes / keep_aspect_ratio_policy (opset 18) are not supported");

  const InferValue& x = ctx.inputs[0];
  const bool hasScales = !absentOrEmpty(ctx, 2);
  const bool hasSizes = !absentOrEmpty(ctx, 3);
  if (hasScales == hasSizes)
    return invalid("exactly one of scales and sizes must be given (non-empty)");
  if (hasScales && ctx.inputs[2].dtype != DataType::kFloat32)
    return invalid("scales must be float32");
  if (hasSizes && ctx.inputs[3].dtype != DataType::kInt64) return invalid("sizes must be int64");
  const size_t param = hasScales ? 2 : 3;
  const InferValue& pv = ctx.inputs[param];
  if (pv.shapeKnown && pv.shape.rank() != 1)
    return invalid(std::string(hasScales ? "scales" : "sizes") + " must be 1-D");
  int64_t rank = x.shapeKnown ? static_cast<int64_t>(x.shape.rank()) : -1;
  if (pv.shapeKnown && known(pv.shape[0])) {
    if (rank >= 0 && pv.shape[0] != rank)
      return invalid(std::string(hasScales ? "scales" : "sizes") + " has " + str(pv.shape[0]) +
                     " entries but the input has rank " + str(rank));
    rank = pv.shape[0];
  }
  if (ctm == "tf_crop_and_resize") {
    if (absentOrEmpty(ctx, 1)) return invalid("tf_crop_and_resize needs the roi input");
    const InferValue& roi = ctx.inputs[1];
    if (!isFloatingPoint(roi.dtype)) return invalid("roi must be floating point");
    if (roi.shapeKnown && rank >= 0 && (roi.shape.rank() != 1 || conflict(roi.shape[0], 2 * rank)))
      return invalid("roi " + roi.shape.toString() + " must have 2 * rank = " + str(2 * rank) +
                     " entries");
  }
  if (rank < 0) {
    setUnknownRank(ctx, 0, x.dtype);
    return Status::Ok();
  }
  if (rank < 1) return invalid("input must have rank >= 1");
  std::vector<int64_t> out(static_cast<size_t>(rank), -1);
  if (pv.value) {
    for (int64_t i = 0; i < rank; ++i) {
      const int64_t in = x.shapeKnown ? x.shape[static_cast<size_t>(i)] : -1;
      if (hasSizes) {
        const int64_t s = pv.value->getAsInt64(i);
        if (s < 0 || s > (int64_t{1} << 40)) return invalid("sizes has invalid entry " + str(s));
        out[static_cast<size_t>(i)] = s;
      } else {
        const float s = static_cast<float>(pv.value->getAsDouble(i));
        if (!(s > 0.f) || !std::isfinite(s) || s > 1e6f)
          return invalid("scales must be positive and finite, got " + std::to_string(s));
        // floor(in * scale) in float, as onnxruntime and the ONNX reference compute it.
        if (known(in))
          out[static_cast<size_t>(i)] =
              static_cast<int64_t>(std::floor(s * static_cast<float>(in)));
      }
    }
  }
  setOutput(ctx, 0, x.dtype, Shape(out));
  return Status::Ok();
}

}  // namespace

// ---- Shape functions shared with the fused ops --------------------------------------------

namespace nn {

Status inferConv(InferContext& ctx) {
  return inferConvLike(ctx, /*transpose=*/false);
}

Status inferGemm(InferContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat(ctx, 0, "A"));
  EI_RETURN_IF_ERROR(requireSameType(ctx, 1, "B"));
  EI_RETURN_IF_ERROR(requireSameType(ctx, 2, "C"));
  const Attributes& a = ctx.attrs();
  EI_RETURN_IF_ERROR(checkBinaryFlag(a, "transA", 0));
  EI_RETURN_IF_ERROR(checkBinaryFlag(a, "transB", 0));
  const bool ta = a.getInt("transA", 0) == 1;
  const bool tb = a.getInt("transB", 0) == 1;
  const InferValue& av = ctx.inputs[0];
  const InferValue& bv = ctx.inputs[1];
  if (av.shapeKnown && av.shape.rank() != 2)
    return invalid("A " + av.shape.toString() + " must be 2-D");
  if (bv.shapeKnown && bv.shape.rank() != 2)
    return invalid("B " + bv.shape.toString() + " must be 2-D");
  const Shape as = shapeOrUnknown(av, 2);
  const Shape bs = shapeOrUnknown(bv, 2);
  const int64_t m = ta ? as[1] : as[0];
  const int64_t ka = ta ? as[0] : as[1];
  const int64_t kb = tb ? bs[1] : bs[0];
  const int64_t n = tb ? bs[0] : bs[1];
  if (conflict(ka, kb))
    return invalid("inner dimensions differ: A " + as.toString() + (ta ? " (transposed)" : "") +
                   ", B " + bs.toString() + (tb ? " (transposed)" : ""));
  const Shape out{m, n};
  if (ctx.hasInput(2) && ctx.inputs[2].shapeKnown)
    EI_RETURN_IF_ERROR(checkUnidirectional(ctx.inputs[2].shape, out, "C"));
  setOutput(ctx, 0, av.dtype, out);
  return Status::Ok();
}

Status inferMatMul(InferContext& ctx) {
  EI_RETURN_IF_ERROR(requireFloat(ctx, 0, "A"));
  EI_RETURN_IF_ERROR(requireSameType(ctx, 1, "B"));
  EI_RETURN_IF_ERROR(requireSameType(ctx, 2, "bias"));
  const InferValue& av = ctx.inputs[0];
  const InferValue& bv = ctx.inputs[1];
  if (!av.shapeKnown || !bv.shapeKnown) {
    if (ctx.hasInput(2) && ctx.inputs[2].shapeKnown && ctx.inputs[2].shape.rank() != 1)
      return invalid("bias " + ctx.inputs[2].shape.toString() + " must be 1-D");
    setUnknownRank(ctx, 0, av.dtype);
    return Status::Ok();
  }
  const Shape& as = av.shape;
  const Shape& bs = bv.shape;
  if (as.rank() < 1 || bs.rank() < 1) return invalid("MatMul operands must have rank >= 1");
  const int64_t ka = as[as.rank() - 1];
  const int64_t kb = bs.rank() == 1 ? bs[0] : bs[bs.rank() - 2];
  if (conflict(ka, kb))
    return invalid("inner dimensions differ: A " + as.toString() + ", B " + bs.toString());
  // Batch dims: everything before the last two (1-D operands have none).
  const Shape aBatch(
      std::vector<int64_t>(as.dims().begin(), as.dims().end() - std::min<size_t>(2, as.rank())));
  const Shape bBatch(
      std::vector<int64_t>(bs.dims().begin(), bs.dims().end() - std::min<size_t>(2, bs.rank())));
  EI_ASSIGN_OR_RETURN(Shape batch, broadcastShapes(aBatch, bBatch));
  std::vector<int64_t> out = batch.dims();
  if (as.rank() >= 2) out.push_back(as[as.rank() - 2]);
  if (bs.rank() >= 2) out.push_back(bs[bs.rank() - 1]);
  if (ctx.hasInput(2) && ctx.inputs[2].shapeKnown) {  // FusedMatMul bias: [last output dim]
    const Shape& bias = ctx.inputs[2].shape;
    if (out.empty() || bias.rank() != 1 || conflict(bias[0], out.back()))
      return invalid("bias " + bias.toString() +
                     " must be 1-D with the output's last dim (output " + Shape(out).toString() +
                     ")");
  }
  setOutput(ctx, 0, av.dtype, Shape(out));
  return Status::Ok();
}

}  // namespace nn

void registerNnSchemas(OpSchemaRegistry& r) {
  auto add = [&r](const char* op, int minIn, int maxIn, ShapeInferFn fn, int64_t minOpset = 7) {
    OpSchema s;
    s.opType = op;
    s.domain = "";
    s.minOpset = minOpset;
    s.maxOpset = 17;
    s.minInputs = minIn;
    s.maxInputs = maxIn;
    s.infer = std::move(fn);
    r.add(std::move(s));
  };
  add("Conv", 2, 3, nn::inferConv);
  add("ConvTranspose", 2, 3, [](InferContext& c) { return inferConvLike(c, /*transpose=*/true); });
  add("MaxPool", 1, 1, [](InferContext& c) { return inferPool(c, PoolKind::kMax); });
  add("AveragePool", 1, 1, [](InferContext& c) { return inferPool(c, PoolKind::kAverage); });
  add("LpPool", 1, 1, [](InferContext& c) { return inferPool(c, PoolKind::kLp); });
  add("GlobalAveragePool", 1, 1, inferGlobalPool);
  add("GlobalMaxPool", 1, 1, inferGlobalPool);
  add("BatchNormalization", 5, 5, inferBatchNorm);
  add("InstanceNormalization", 3, 3, inferInstanceNorm);
  add("LayerNormalization", 2, 3, inferLayerNorm, 17);
  add("LRN", 1, 1, inferLrn);
  add("Gemm", 2, 3, nn::inferGemm);
  add("MatMul", 2, 2, nn::inferMatMul);
  add("Softmax", 1, 1, inferSoftmax);
  add("LogSoftmax", 1, 1, inferSoftmax);
  add("Hardmax", 1, 1, inferSoftmax);
  add("Resize", 1, 4, inferResize, 10);
  add("DepthToSpace", 1, 1, [](InferContext& c) { return inferDepthSpace(c, true); });
  add("SpaceToDepth", 1, 1, [](InferContext& c) { return inferDepthSpace(c, false); });
  add("PRelu", 2, 2, inferPRelu);
  add("LpNormalization", 1, 1, inferLpNorm);
}

}  // namespace edgeinfer::graph
