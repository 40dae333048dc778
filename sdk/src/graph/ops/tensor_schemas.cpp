// Schemas and shape inference for the data-movement ops: Identity, Dropout, Reshape,
// Flatten, Transpose, Concat, Split, Slice, Squeeze, Unsqueeze, Gather, GatherElements,
// Shape, Size, ConstantOfShape, Expand, Tile, Pad, Range, OneHot and CumSum.
//
// Ops whose output shape depends on an input's *contents* (Reshape's shape, Slice's starts,
// Tile's repeats ...) use InferValue::value when it is known (constants, or every input at run
// time) and otherwise produce the right rank with unknown dims where that much is knowable.
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "graph/op_schema.h"

namespace edgeinfer::graph {
namespace {

constexpr int64_t kUnknown = Shape::kUnknown;
/// Largest element count a shape function accepts (Tensor::create's own limit).
constexpr int64_t kMaxElements = int64_t{1} << 50;

std::string str(int64_t v) {
  return std::to_string(v);
}

std::string join(const std::vector<int64_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + str(v[i]);
  return s + "]";
}

/// Contents of an integer input when known.
std::optional<std::vector<int64_t>> intValues(const InferValue& v) {
  if (!v.value || !(isInteger(v.dtype) || v.dtype == DataType::kBool)) return std::nullopt;
  std::vector<int64_t> out(static_cast<size_t>(v.value->numel()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = v.value->getAsInt64(static_cast<int64_t>(i));
  return out;
}

Status checkIndexType(const InferContext& ctx, size_t i, const char* what) {
  const DataType t = ctx.inputs[i].dtype;
  if (t == DataType::kInt64 || t == DataType::kInt32) return Status::Ok();
  return ctx.error(ErrorCode::kInvalidModel,
                   std::string(what) + " must be int32 or int64, got " + dataTypeName(t));
}

Status checkInt64(const InferContext& ctx, size_t i, const char* what) {
  if (ctx.inputs[i].dtype == DataType::kInt64) return Status::Ok();
  return ctx.error(ErrorCode::kInvalidModel,
                   std::string(what) + " must be int64, got " + dataTypeName(ctx.inputs[i].dtype));
}

/// Fails unless input i is known to be (or may be) a 1-D tensor.
Status check1D(const InferContext& ctx, size_t i, const char* what) {
  const InferValue& v = ctx.inputs[i];
  if (v.shapeKnown && v.shape.rank() != 1)
    return ctx.error(ErrorCode::kInvalidModel,
                     std::string(what) + " must be 1-D, got shape " + v.shape.toString());
  return Status::Ok();
}

/// Fails unless input i is known to be (or may be) a single element.
Status checkScalar(const InferContext& ctx, size_t i, const char* what) {
  const InferValue& v = ctx.inputs[i];
  if (v.shapeKnown && v.shape.isStatic() && v.shape.numel() != 1)
    return ctx.error(ErrorCode::kInvalidModel,
                     std::string(what) + " must be a scalar, got shape " + v.shape.toString());
  return Status::Ok();
}

/// Rejects shapes whose (known) element count is absurd or overflows.
Status checkSize(const InferContext& ctx, const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s.dims()) {
    if (d < 0) continue;
    if (d != 0 && n > kMaxElements / d)
      return ctx.error(ErrorCode::kInvalidModel, "output shape " + s.toString() + " is too large");
    n *= d;
  }
  return Status::Ok();
}

/// Product of dims [b, e) or kUnknown if any of them is unknown (0 wins over unknown).
int64_t product(const Shape& s, size_t b, size_t e) {
  int64_t n = 1;
  bool unknown = false;
  for (size_t i = b; i < e; ++i) {
    if (s[i] == 0) return 0;
    if (s[i] < 0)
      unknown = true;
    else
      n *= s[i];
  }
  return unknown ? kUnknown : n;
}

Status axisIn(const InferContext& ctx, int64_t axis, int64_t rank, int64_t* out) {
  auto a = normalizeAxis(axis, rank);
  if (!a.ok()) return ctx.error(ErrorCode::kInvalidModel, a.status().message());
  *out = *a;
  return Status::Ok();
}

/// Sets output 0 to `dtype` with the given shape (or unknown rank).
void setOut(InferContext& ctx, size_t i, DataType dtype, std::optional<Shape> shape) {
  InferValue& o = ctx.outputs[i];
  o.dtype = dtype;
  o.value = nullptr;
  o.shapeKnown = shape.has_value();
  o.shape = shape ? *shape : Shape();
}

Shape unknownDims(size_t rank) {
  return Shape(std::vector<int64_t>(rank, kUnknown));
}

// ---- Identity, Dropout ---------------------------------------------------------------------

Status inferIdentity(InferContext& ctx) {
  ctx.outputs[0] = ctx.inputs[0];
  ctx.outputs[0].value = nullptr;
  return Status::Ok();
}

Status inferDropout(InferContext& ctx) {
  if (ctx.hasInput(2)) {
    // Only inference-mode Dropout is supported. A training_mode that is not a constant at
    // build time could be true at run time, so the model is unsupported, not just failing.
    if (!ctx.inputs[2].value)
      return ctx.error(ErrorCode::kUnsupported,
                       "Dropout's training_mode must be a constant (false): training-mode Dropout "
                       "is not supported");
    const auto mode = intValues(ctx.inputs[2]);
    if (mode && !mode->empty() && (*mode)[0] != 0)
      return ctx.error(ErrorCode::kUnsupported, "Dropout with training_mode=true is not supported");
  }
  EI_RETURN_IF_ERROR(inferIdentity(ctx));
  if (ctx.outputs.size() > 1) {
    ctx.outputs[1] = ctx.outputs[0];
    ctx.outputs[1].dtype = DataType::kBool;
  }
  return Status::Ok();
}

// ---- Reshape, Flatten ----------------------------------------------------------------------

Status inferReshape(InferContext& ctx) {
  EI_RETURN_IF_ERROR(checkInt64(ctx, 1, "Reshape shape"));
  EI_RETURN_IF_ERROR(check1D(ctx, 1, "Reshape shape"));
  const InferValue& data = ctx.inputs[0];
  const InferValue& shp = ctx.inputs[1];
  const DataType dt = data.dtype;
  const auto target = intValues(shp);
  if (!target) {
    if (shp.shapeKnown && shp.shape[0] >= 0)
      setOut(ctx, 0, dt, unknownDims(static_cast<size_t>(shp.shape[0])));
    else
      setOut(ctx, 0, dt, std::nullopt);
    return Status::Ok();
  }
  const bool allowZero = ctx.attrs().getInt("allowzero", 0) != 0;
  std::vector<int64_t> out(target->size());
  int inferIdx = -1;
  bool hasZero = false;
  for (size_t i = 0; i < target->size(); ++i) {
    const int64_t t = (*target)[i];
    if (t < -1)
      return ctx.error(ErrorCode::kInvalidModel,
                       "Reshape shape " + join(*target) + " has a negative dimension " + str(t));
    if (t == -1) {
      if (inferIdx >= 0)
        return ctx.error(ErrorCode::kInvalidModel,
                         "Reshape shape " + join(*target) + " has more than one -1");
      inferIdx = static_cast<int>(i);
      out[i] = kUnknown;
    } else if (t == 0 && !allowZero) {
      if (data.shapeKnown && i >= data.shape.rank())
        return ctx.error(ErrorCode::kInvalidModel,
                         "Reshape shape " + join(*target) + " copies dimension " + str(int64_t(i)) +
                             " (0) but the input " + data.shape.toString() + " has rank " +
                             str(static_cast<int64_t>(data.shape.rank())));
      out[i] = data.shapeKnown ? data.shape[i] : kUnknown;
    } else {
      hasZero = hasZero || t == 0;
      out[i] = t;
    }
  }
  if (allowZero && hasZero && inferIdx >= 0)
    return ctx.error(ErrorCode::kInvalidModel,
                     "Reshape with allowzero=1 cannot have both 0 and -1 in its shape");
  Shape result(out);
  EI_RETURN_IF_ERROR(checkSize(ctx, result));
  const int64_t inCount = data.shapeKnown ? data.shape.numel() : kUnknown;
  int64_t known = 1;
  bool othersKnown = true;
  for (size_t i = 0; i < out.size(); ++i) {
    if (static_cast<int>(i) == inferIdx) continue;
    if (out[i] < 0)
      othersKnown = false;
    else
      known *= out[i];
  }
  if (inferIdx >= 0 && inCount >= 0 && othersKnown) {
    if (known == 0 || inCount % known != 0)
      return ctx.error(ErrorCode::kInvalidModel, "cannot reshape " + data.shape.toString() + " (" +
                                                     str(inCount) + " elements) to " +
                                                     join(*target));
    result[static_cast<size_t>(inferIdx)] = inCount / known;
  } else if (inferIdx < 0 && inCount >= 0 && othersKnown && known != inCount) {
    return ctx.error(ErrorCode::kInvalidModel,
                     "cannot reshape " + data.shape.toString() + " (" + str(inCount) +
                         " elements) to " + result.toString() + " (" + str(known) + " elements)");
  }
  setOut(ctx, 0, dt, result);
  return Status::Ok();
}

Status inferFlatten(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  const int64_t axis = ctx.attrs().getInt("axis", 1);
  if (!x.shapeKnown) {
    setOut(ctx, 0, x.dtype, unknownDims(2));
    return Status::Ok();
  }
  const int64_t r = static_cast<int64_t>(x.shape.rank());
  if (axis < -r || axis > r)
    return ctx.error(ErrorCode::kInvalidModel,
                     "Flatten axis " + str(axis) + " is out of range for rank " + str(r));
  const size_t a = static_cast<size_t>(axis < 0 ? axis + r : axis);
  setOut(ctx, 0, x.dtype, Shape({product(x.shape, 0, a), product(x.shape, a, x.shape.rank())}));
  return Status::Ok();
}

// ---- Transpose -----------------------------------------------------------------------------

Status inferTranspose(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  const Attribute* permAttr = ctx.attrs().find("perm");
  std::vector<int64_t> perm = ctx.attrs().getInts("perm");
  if (!x.shapeKnown && !permAttr) {
    setOut(ctx, 0, x.dtype, std::nullopt);
    return Status::Ok();
  }
  const size_t rank = x.shapeKnown ? x.shape.rank() : perm.size();
  if (!permAttr) {
    perm.resize(rank);
    for (size_t i = 0; i < rank; ++i) perm[i] = static_cast<int64_t>(rank - 1 - i);
  }
  if (perm.size() != rank)
    return ctx.error(ErrorCode::kInvalidModel,
                     "Transpose perm " + join(perm) + " has " + str(int64_t(perm.size())) +
                         " entries for a tensor of rank " + str(int64_t(rank)));
  std::vector<bool> seen(rank, false);
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(rank) || seen[static_cast<size_t>(p)])
      return ctx.error(ErrorCode::kInvalidModel,
                       "Transpose perm " + join(perm) + " is not a permutation");
    seen[static_cast<size_t>(p)] = true;
  }
  Shape out = unknownDims(rank);
  if (x.shapeKnown)
    for (size_t i = 0; i < rank; ++i) out[i] = x.shape[static_cast<size_t>(perm[i])];
  setOut(ctx, 0, x.dtype, out);
  return Status::Ok();
}

// ---- Concat, Split -------------------------------------------------------------------------

Status inferConcat(InferContext& ctx) {
  if (!ctx.attrs().has("axis"))
    return ctx.error(ErrorCode::kInvalidModel, "Concat requires the `axis` attribute");
  const int64_t axisAttr = ctx.attrs().getInt("axis", 0);
  const size_t n = ctx.inputs.size();
  std::optional<Shape> out;
  bool anyUnknownRank = false;
  for (size_t i = 0; i < n; ++i) {
    if (!ctx.hasInput(i))
      return ctx.error(ErrorCode::kInvalidModel, "Concat input " + str(int64_t(i)) + " is absent");
    if (ctx.inputs[i].dtype != ctx.inputs[0].dtype)
      return ctx.error(ErrorCode::kInvalidModel, "Concat inputs must all have the same type");
    if (!ctx.inputs[i].shapeKnown) anyUnknownRank = true;
  }
  int64_t axis = 0;
  for (size_t i = 0; i < n; ++i) {
    const InferValue& in = ctx.inputs[i];
    if (!in.shapeKnown) continue;
    const int64_t r = static_cast<int64_t>(in.shape.rank());
    if (r == 0) return ctx.error(ErrorCode::kInvalidModel, "Concat cannot join scalars");
    if (!out) {
      EI_RETURN_IF_ERROR(axisIn(ctx, axisAttr, r, &axis));
      out = in.shape;
      continue;
    }
    if (in.shape.rank() != out->rank())
      return ctx.error(
          ErrorCode::kInvalidModel,
          "Concat inputs have different ranks: " + out->toString() + " and " + in.shape.toString());
    for (size_t d = 0; d < in.shape.rank(); ++d) {
      int64_t& o = (*out)[d];
      const int64_t v = in.shape[d];
      if (static_cast<int64_t>(d) == axis) {
        o = (o < 0 || v < 0) ? kUnknown : o + v;
      } else if (o < 0) {
        o = v;
      } else if (v >= 0 && v != o) {
        return ctx.error(ErrorCode::kInvalidModel, "Concat inputs " + out->toString() + " and " +
                                                       in.shape.toString() +
                                                       " differ outside axis " + str(axis));
      }
    }
  }
  if (out && anyUnknownRank) (*out)[static_cast<size_t>(axis)] = kUnknown;
  if (out) EI_RETURN_IF_ERROR(checkSize(ctx, *out));
  setOut(ctx, 0, ctx.inputs[0].dtype, out);
  return Status::Ok();
}

Status inferSplit(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  const size_t nOut = ctx.outputs.size();
  if (nOut == 0) return ctx.error(ErrorCode::kInvalidModel, "Split has no outputs");
  const std::vector<int64_t> split = ctx.attrs().getInts("split");
  const bool hasSplit = ctx.attrs().has("split");
  if (hasSplit && split.size() != nOut)
    return ctx.error(ErrorCode::kInvalidModel, "Split has " + str(int64_t(nOut)) +
                                                   " outputs but split " + join(split) + " has " +
                                                   str(int64_t(split.size())) + " entries");
  int64_t total = 0;
  for (int64_t s : split) {
    if (s < 0)
      return ctx.error(ErrorCode::kInvalidModel, "Split sizes " + join(split) + " are negative");
    if (s > kMaxElements) return ctx.error(ErrorCode::kInvalidModel, "Split size is too large");
    total += s;
  }
  if (!x.shapeKnown) {
    for (size_t i = 0; i < nOut; ++i) setOut(ctx, i, x.dtype, std::nullopt);
    return Status::Ok();
  }
  int64_t axis = 0;
  EI_RETURN_IF_ERROR(
      axisIn(ctx, ctx.attrs().getInt("axis", 0), static_cast<int64_t>(x.shape.rank()), &axis));
  const int64_t dim = x.shape[static_cast<size_t>(axis)];
  if (hasSplit && dim >= 0 && total != dim)
    return ctx.error(ErrorCode::kInvalidModel, "Split sizes " + join(split) + " sum to " +
                                                   str(total) + ", not to dimension " + str(dim));
  if (!hasSplit && dim >= 0 && dim % static_cast<int64_t>(nOut) != 0)
    return ctx.error(
        ErrorCode::kInvalidModel,
        "dimension " + str(dim) + " cannot be split equally into " + str(int64_t(nOut)) + " parts");
  for (size_t i = 0; i < nOut; ++i) {
    Shape s = x.shape;
    s[static_cast<size_t>(axis)] =
        hasSplit ? split[i] : (dim < 0 ? kUnknown : dim / static_cast<int64_t>(nOut));
    setOut(ctx, i, x.dtype, s);
  }
  return Status::Ok();
}

// ---- Slice ---------------------------------------------------------------------------------

/// Output length of one sliced axis (ONNX opset-13 clamping rules).
int64_t sliceLength(int64_t dim, int64_t start, int64_t end, int64_t step) {
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    return end <= start ? 0 : (end - start - 1) / step + 1;
  }
  start = std::clamp<int64_t>(start, 0, dim - 1);
  end = std::clamp<int64_t>(end, -1, dim - 1);
  return start <= end ? 0 : (start - end - 1) / (-step) + 1;
}

Status inferSlice(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  for (size_t i = 1; i < 5; ++i) {
    if (!ctx.hasInput(i)) continue;
    static const char* kNames[] = {"", "starts", "ends", "axes", "steps"};
    EI_RETURN_IF_ERROR(checkIndexType(ctx, i, kNames[i]));
    EI_RETURN_IF_ERROR(check1D(ctx, i, kNames[i]));
  }
  const auto starts = intValues(ctx.inputs[1]);
  const auto ends = intValues(ctx.inputs[2]);
  std::optional<std::vector<int64_t>> axes, steps;
  if (ctx.hasInput(3)) axes = intValues(ctx.inputs[3]);
  if (ctx.hasInput(4)) steps = intValues(ctx.inputs[4]);
  // Lengths that are known must agree.
  std::vector<std::pair<const char*, int64_t>> lens;
  const char* kNames[] = {"starts", "ends", "axes", "steps"};
  for (size_t i = 1; i < 5; ++i)
    if (ctx.hasInput(i) && ctx.inputs[i].shapeKnown && ctx.inputs[i].shape[0] >= 0)
      lens.emplace_back(kNames[i - 1], ctx.inputs[i].shape[0]);
  for (const auto& l : lens)
    if (l.second != lens[0].second)
      return ctx.error(ErrorCode::kInvalidModel, std::string("Slice ") + lens[0].first + " and " +
                                                     l.first + " differ in length");
  if (steps)
    for (int64_t s : *steps)
      if (s == 0) return ctx.error(ErrorCode::kInvalidModel, "Slice steps cannot be 0");
  if (!x.shapeKnown) {
    setOut(ctx, 0, x.dtype, std::nullopt);
    return Status::Ok();
  }
  const int64_t rank = static_cast<int64_t>(x.shape.rank());
  std::vector<int64_t> ax;
  if (axes) {
    std::set<int64_t> seen;
    for (int64_t a : *axes) {
      int64_t na = 0;
      EI_RETURN_IF_ERROR(axisIn(ctx, a, rank, &na));
      if (!seen.insert(na).second)
        return ctx.error(ErrorCode::kInvalidModel, "Slice axes " + join(*axes) + " repeat an axis");
      ax.push_back(na);
    }
  }
  Shape out = x.shape;
  const bool valuesKnown =
      starts && ends && (!ctx.hasInput(3) || axes) && (!ctx.hasInput(4) || steps);
  if (!valuesKnown) {
    // Contents unknown: the rank is kept; the sliced axes (all, if unknown) become unknown.
    if (axes) {
      for (int64_t a : ax) out[static_cast<size_t>(a)] = kUnknown;
    } else {
      out = unknownDims(x.shape.rank());
    }
    setOut(ctx, 0, x.dtype, out);
    return Status::Ok();
  }
  const size_t n = starts->size();
  if (ends->size() != n || (axes && axes->size() != n) || (steps && steps->size() != n))
    return ctx.error(ErrorCode::kInvalidModel,
                     "Slice starts, ends, axes and steps must have the same length");
  if (static_cast<int64_t>(n) > rank)
    return ctx.error(ErrorCode::kInvalidModel,
                     "Slice has " + str(int64_t(n)) + " axes for a tensor of rank " + str(rank));
  if (!axes)
    for (size_t i = 0; i < n; ++i) ax.push_back(static_cast<int64_t>(i));
  for (size_t i = 0; i < ax.size(); ++i) {
    const size_t a = static_cast<size_t>(ax[i]);
    const int64_t step = steps ? (*steps)[i] : 1;
    out[a] = x.shape[a] < 0 ? kUnknown : sliceLength(x.shape[a], (*starts)[i], (*ends)[i], step);
  }
  setOut(ctx, 0, x.dtype, out);
  return Status::Ok();
}

// ---- Squeeze, Unsqueeze ------------------------------------------------------------------------

Status inferSqueeze(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  const bool hasAxes = ctx.attrs().has("axes");
  const std::vector<int64_t> axes = ctx.attrs().getInts("axes");
  if (!x.shapeKnown) {
    setOut(ctx, 0, x.dtype, std::nullopt);
    return Status::Ok();
  }
  const int64_t rank = static_cast<int64_t>(x.shape.rank());
  std::vector<bool> drop(x.shape.rank(), false);
  if (hasAxes) {
    for (int64_t a : axes) {
      int64_t na = 0;
      EI_RETURN_IF_ERROR(axisIn(ctx, a, rank, &na));
      if (drop[static_cast<size_t>(na)])
        return ctx.error(ErrorCode::kInvalidModel,
                         "Squeeze axes " + join(axes) + " repeat an axis");
      const int64_t d = x.shape[static_cast<size_t>(na)];
      if (d >= 0 && d != 1)
        return ctx.error(ErrorCode::kInvalidModel,
                         "Squeeze axis " + str(a) + " of " + x.shape.toString() + " is not 1");
      drop[static_cast<size_t>(na)] = true;
    }
  } else {
    for (size_t i = 0; i < x.shape.rank(); ++i) {
      if (x.shape[i] < 0) {  // cannot tell whether it will be squeezed
        setOut(ctx, 0, x.dtype, std::nullopt);
        return Status::Ok();
      }
      drop[i] = x.shape[i] == 1;
    }
  }
  std::vector<int64_t> out;
  for (size_t i = 0; i < x.shape.rank(); ++i)
    if (!drop[i]) out.push_back(x.shape[i]);
  setOut(ctx, 0, x.dtype, Shape(out));
  return Status::Ok();
}

Status inferUnsqueeze(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  if (!ctx.attrs().has("axes"))
    return ctx.error(ErrorCode::kInvalidModel, "Unsqueeze requires `axes`");
  const std::vector<int64_t> axes = ctx.attrs().getInts("axes");
  if (!x.shapeKnown) {
    setOut(ctx, 0, x.dtype, std::nullopt);
    return Status::Ok();
  }
  const int64_t outRank = static_cast<int64_t>(x.shape.rank() + axes.size());
  std::vector<bool> inserted(static_cast<size_t>(outRank), false);
  for (int64_t a : axes) {
    int64_t na = 0;
    EI_RETURN_IF_ERROR(axisIn(ctx, a, outRank, &na));
    if (inserted[static_cast<size_t>(na)])
      return ctx.error(ErrorCode::kInvalidModel,
                       "Unsqueeze axes " + join(axes) + " repeat an axis");
    inserted[static_cast<size_t>(na)] = true;
  }
  std::vector<int64_t> out;
  size_t k = 0;
  for (size_t i = 0; i < inserted.size(); ++i) out.push_back(inserted[i] ? 1 : x.shape[k++]);
  setOut(ctx, 0, x.dtype, Shape(out));
  return Status::Ok();
}

// ---- Gather, GatherElements --------------------------------------------------------------------

Status checkIndicesInRange(const InferContext& ctx, const InferValue& idx, int64_t dim) {
  const auto v = intValues(idx);
  if (!v || dim < 0) return Status::Ok();
  for (int64_t i : *v)
    if (i < -dim || i >= dim)
      return ctx.error(ErrorCode::kInvalidModel,
                       "index " + str(i) + " is out of range for a dimension of size " + str(dim));
  return Status::Ok();
}

Status inferGather(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  const InferValue& idx = ctx.inputs[1];
  EI_RETURN_IF_ERROR(checkIndexType(ctx, 1, "Gather indices"));
  if (!x.shapeKnown || !idx.shapeKnown) {
    setOut(ctx, 0, x.dtype, std::nullopt);
    return Status::Ok();
  }
  const int64_t rank = static_cast<int64_t>(x.shape.rank());
  if (rank == 0) return ctx.error(ErrorCode::kInvalidModel, "Gather data cannot be a scalar");
  int64_t axis = 0;
  EI_RETURN_IF_ERROR(axisIn(ctx, ctx.attrs().getInt("axis", 0), rank, &axis));
  EI_RETURN_IF_ERROR(checkIndicesInRange(ctx, idx, x.shape[static_cast<size_t>(axis)]));
  std::vector<int64_t> out(x.shape.dims().begin(), x.shape.dims().begin() + axis);
  out.insert(out.end(), idx.shape.dims().begin(), idx.shape.dims().end());
  out.insert(out.end(), x.shape.dims().begin() + axis + 1, x.shape.dims().end());
  setOut(ctx, 0, x.dtype, Shape(out));
  return Status::Ok();
}

Status inferGatherElements(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  const InferValue& idx = ctx.inputs[1];
  EI_RETURN_IF_ERROR(checkIndexType(ctx, 1, "GatherElements indices"));
  if (x.shapeKnown && idx.shapeKnown) {
    const int64_t rank = static_cast<int64_t>(x.shape.rank());
    if (rank == 0 || idx.shape.rank() != x.shape.rank())
      return ctx.error(ErrorCode::kInvalidModel, "GatherElements data " + x.shape.toString() +
                                                     " and indices " + idx.shape.toString() +
                                                     " must have the same rank (>= 1)");
    int64_t axis = 0;
    EI_RETURN_IF_ERROR(axisIn(ctx, ctx.attrs().getInt("axis", 0), rank, &axis));
    for (size_t d = 0; d < x.shape.rank(); ++d)
      if (static_cast<int64_t>(d) != axis && x.shape[d] >= 0 && idx.shape[d] > x.shape[d])
        return ctx.error(ErrorCode::kInvalidModel, "GatherElements indices " +
                                                       idx.shape.toString() + " exceed data " +
                                                       x.shape.toString() + " outside the axis");
    EI_RETURN_IF_ERROR(checkIndicesInRange(ctx, idx, x.shape[static_cast<size_t>(axis)]));
  }
  setOut(ctx, 0, x.dtype, idx.shapeKnown ? std::optional<Shape>(idx.shape) : std::nullopt);
  return Status::Ok();
}

// ---- Shape, Size, ConstantOfShape --------------------------------------------------------------

Status inferShape(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  if (!x.shapeKnown) {
    setOut(ctx, 0, DataType::kInt64, Shape({kUnknown}));
    return Status::Ok();
  }
  const int64_t rank = static_cast<int64_t>(x.shape.rank());
  int64_t start = ctx.attrs().getInt("start", 0);
  int64_t end = ctx.attrs().getInt("end", rank);
  if (start < 0) start += rank;
  if (end < 0) end += rank;
  start = std::clamp<int64_t>(start, 0, rank);
  end = std::clamp<int64_t>(end, 0, rank);
  setOut(ctx, 0, DataType::kInt64, Shape({std::max<int64_t>(end - start, 0)}));
  return Status::Ok();
}

Status inferSize(InferContext& ctx) {
  setOut(ctx, 0, DataType::kInt64, Shape());
  return Status::Ok();
}

/// Output shape from a 1-D int64 "shape" input (ConstantOfShape): values, else rank.
Status shapeFromInput(InferContext& ctx, size_t i, std::optional<Shape>* out) {
  EI_RETURN_IF_ERROR(checkInt64(ctx, i, "shape"));
  EI_RETURN_IF_ERROR(check1D(ctx, i, "shape"));
  const InferValue& s = ctx.inputs[i];
  if (const auto v = intValues(s)) {
    for (int64_t d : *v)
      if (d < 0)
        return ctx.error(ErrorCode::kInvalidModel, "shape " + join(*v) + " has a negative dim");
    *out = Shape(*v);
    return checkSize(ctx, **out);
  }
  if (s.shapeKnown && s.shape[0] >= 0)
    *out = unknownDims(static_cast<size_t>(s.shape[0]));
  else
    *out = std::nullopt;
  return Status::Ok();
}

Status inferConstantOfShape(InferContext& ctx) {
  DataType dt = DataType::kFloat32;
  if (ctx.attrs().has("value")) {
    const Tensor* v = ctx.attrs().getTensor("value");
    if (!v || v->numel() != 1)
      return ctx.error(ErrorCode::kInvalidModel,
                       "ConstantOfShape `value` must be a one-element tensor");
    dt = v->dtype();
  }
  std::optional<Shape> out;
  EI_RETURN_IF_ERROR(shapeFromInput(ctx, 0, &out));
  setOut(ctx, 0, dt, out);
  return Status::Ok();
}

// ---- Expand, Tile, Pad -------------------------------------------------------------------------

Status inferExpand(InferContext& ctx) {
  EI_RETURN_IF_ERROR(checkInt64(ctx, 1, "Expand shape"));
  EI_RETURN_IF_ERROR(check1D(ctx, 1, "Expand shape"));
  const InferValue& x = ctx.inputs[0];
  const InferValue& s = ctx.inputs[1];
  const auto v = intValues(s);
  if (v) {
    for (int64_t d : *v)
      if (d < 0)
        return ctx.error(ErrorCode::kInvalidModel, "Expand shape " + join(*v) + " is negative");
    if (!x.shapeKnown) {
      setOut(ctx, 0, x.dtype, std::nullopt);
      return Status::Ok();
    }
    auto b = broadcastShapes(x.shape, Shape(*v));
    if (!b.ok()) return ctx.error(ErrorCode::kInvalidModel, "Expand: " + b.status().message());
    EI_RETURN_IF_ERROR(checkSize(ctx, *b));
    setOut(ctx, 0, x.dtype, *b);
    return Status::Ok();
  }
  if (x.shapeKnown && s.shapeKnown && s.shape[0] >= 0)
    setOut(ctx, 0, x.dtype,
           unknownDims(std::max<size_t>(x.shape.rank(), static_cast<size_t>(s.shape[0]))));
  else
    setOut(ctx, 0, x.dtype, std::nullopt);
  return Status::Ok();
}

Status inferTile(InferContext& ctx) {
  EI_RETURN_IF_ERROR(checkInt64(ctx, 1, "Tile repeats"));
  EI_RETURN_IF_ERROR(check1D(ctx, 1, "Tile repeats"));
  const InferValue& x = ctx.inputs[0];
  const InferValue& rep = ctx.inputs[1];
  if (!x.shapeKnown) {
    if (rep.shapeKnown && rep.shape[0] >= 0)
      setOut(ctx, 0, x.dtype, unknownDims(static_cast<size_t>(rep.shape[0])));
    else
      setOut(ctx, 0, x.dtype, std::nullopt);
    return Status::Ok();
  }
  if (rep.shapeKnown && rep.shape[0] >= 0 && rep.shape[0] != static_cast<int64_t>(x.shape.rank()))
    return ctx.error(ErrorCode::kInvalidModel, "Tile repeats has " + str(rep.shape[0]) +
                                                   " entries for a tensor of rank " +
                                                   str(int64_t(x.shape.rank())));
  Shape out = x.shape;
  if (const auto v = intValues(rep)) {
    for (size_t i = 0; i < v->size(); ++i) {
      if ((*v)[i] < 0)
        return ctx.error(ErrorCode::kInvalidModel, "Tile repeats " + join(*v) + " are negative");
      if (out[i] >= 0) {
        if ((*v)[i] != 0 && out[i] > kMaxElements / (*v)[i])
          return ctx.error(ErrorCode::kInvalidModel, "Tile output is too large");
        out[i] *= (*v)[i];
      }
    }
    EI_RETURN_IF_ERROR(checkSize(ctx, out));
  } else {
    out = unknownDims(x.shape.rank());
  }
  setOut(ctx, 0, x.dtype, out);
  return Status::Ok();
}

Status inferPad(InferContext& ctx) {
  EI_RETURN_IF_ERROR(checkInt64(ctx, 1, "Pad pads"));
  EI_RETURN_IF_ERROR(check1D(ctx, 1, "Pad pads"));
  const InferValue& x = ctx.inputs[0];
  const std::string mode = ctx.attrs().getString("mode", "constant");
  if (mode != "constant" && mode != "reflect" && mode != "edge")
    return ctx.error(ErrorCode::kInvalidModel, "Pad mode '" + mode + "' is not supported");
  if (ctx.hasInput(2)) {
    if (ctx.inputs[2].dtype != x.dtype)
      return ctx.error(ErrorCode::kInvalidModel, "Pad constant_value type differs from data");
    EI_RETURN_IF_ERROR(checkScalar(ctx, 2, "Pad constant_value"));
  }
  if (!x.shapeKnown) {
    setOut(ctx, 0, x.dtype, std::nullopt);
    return Status::Ok();
  }
  const size_t rank = x.shape.rank();
  const InferValue& p = ctx.inputs[1];
  if (p.shapeKnown && p.shape[0] >= 0 && p.shape[0] != static_cast<int64_t>(2 * rank))
    return ctx.error(ErrorCode::kInvalidModel, "Pad pads has " + str(p.shape[0]) +
                                                   " entries, expected " + str(int64_t(2 * rank)));
  const auto pads = intValues(p);
  if (!pads) {
    setOut(ctx, 0, x.dtype, unknownDims(rank));
    return Status::Ok();
  }
  Shape out = x.shape;
  for (size_t i = 0; i < rank; ++i) {
    const int64_t b = (*pads)[i], e = (*pads)[i + rank];
    if (std::llabs(b) > kMaxElements || std::llabs(e) > kMaxElements)
      return ctx.error(ErrorCode::kInvalidModel, "Pad pads " + join(*pads) + " are too large");
    if (out[i] < 0) continue;
    if (mode != "constant" && out[i] == 0 && (b > 0 || e > 0))
      return ctx.error(ErrorCode::kInvalidModel,
                       "Pad mode '" + mode + "' cannot pad an empty dimension");
    out[i] += b + e;
    if (out[i] < 0)
      return ctx.error(ErrorCode::kInvalidModel,
                       "Pad pads " + join(*pads) + " crop " + x.shape.toString() + " below zero");
  }
  EI_RETURN_IF_ERROR(checkSize(ctx, out));
  setOut(ctx, 0, x.dtype, out);
  return Status::Ok();
}

// ---- Range, OneHot, CumSum ---------------------------------------------------------------------

Status inferRange(InferContext& ctx) {
  const DataType t = ctx.inputs[0].dtype;
  if (!(t == DataType::kFloat32 || t == DataType::kInt32 || t == DataType::kInt64))
    return ctx.error(ErrorCode::kInvalidModel,
                     std::string("Range needs float32, int32 or int64, got ") + dataTypeName(t));
  static const char* kNames[] = {"start", "limit", "delta"};
  for (size_t i = 0; i < 3; ++i) {
    if (ctx.inputs[i].dtype != t)
      return ctx.error(ErrorCode::kInvalidModel, "Range inputs must have the same type");
    EI_RETURN_IF_ERROR(checkScalar(ctx, i, kNames[i]));
  }
  for (size_t i = 0; i < 3; ++i) {
    if (!ctx.inputs[i].value || ctx.inputs[i].value->numel() != 1) {
      setOut(ctx, 0, t, Shape({kUnknown}));
      return Status::Ok();
    }
  }
  const double start = ctx.inputs[0].value->getAsDouble(0);
  const double limit = ctx.inputs[1].value->getAsDouble(0);
  const double delta = ctx.inputs[2].value->getAsDouble(0);
  if (delta == 0 || std::isnan(delta) || std::isnan(start) || std::isnan(limit))
    return ctx.error(ErrorCode::kInvalidModel, "Range delta cannot be 0 (or NaN)");
  double n = std::ceil((limit - start) / delta);
  if (t != DataType::kFloat32 && std::fabs(start) < 4e18 && std::fabs(limit) < 4e18) {
    // exact integer count (the bounds keep limit - start from overflowing)
    const int64_t s = ctx.inputs[0].value->getAsInt64(0), l = ctx.inputs[1].value->getAsInt64(0),
                  d = ctx.inputs[2].value->getAsInt64(0);
    const int64_t diff = l - s;
    n = static_cast<double>(diff / d + ((diff % d != 0 && ((diff < 0) == (d < 0))) ? 1 : 0));
  }
  if (!(n < static_cast<double>(kMaxElements)))
    return ctx.error(ErrorCode::kInvalidModel, "Range output is too large");
  setOut(ctx, 0, t, Shape({std::max<int64_t>(0, static_cast<int64_t>(n))}));
  return Status::Ok();
}

Status inferOneHot(InferContext& ctx) {
  const InferValue& idx = ctx.inputs[0];
  const InferValue& values = ctx.inputs[2];
  if (!isInteger(idx.dtype) && !isFloatingPoint(idx.dtype))
    return ctx.error(ErrorCode::kInvalidModel, "OneHot indices must be numeric");
  if (!isInteger(ctx.inputs[1].dtype) && !isFloatingPoint(ctx.inputs[1].dtype))
    return ctx.error(ErrorCode::kInvalidModel, "OneHot depth must be numeric");
  EI_RETURN_IF_ERROR(checkScalar(ctx, 1, "OneHot depth"));
  if (values.shapeKnown && values.shape != Shape({2}) && values.shape != Shape({kUnknown}))
    return ctx.error(ErrorCode::kInvalidModel,
                     "OneHot values must have shape [2], got " + values.shape.toString());
  int64_t depth = kUnknown;
  if (ctx.inputs[1].value && ctx.inputs[1].value->numel() == 1) {
    const double d = ctx.inputs[1].value->getAsDouble(0);
    if (!(d >= 1) || d > static_cast<double>(kMaxElements))
      return ctx.error(ErrorCode::kInvalidModel,
                       "OneHot depth must be positive, got " + std::to_string(d));
    depth = static_cast<int64_t>(d);
  }
  if (!idx.shapeKnown) {
    setOut(ctx, 0, values.dtype, std::nullopt);
    return Status::Ok();
  }
  const int64_t outRank = static_cast<int64_t>(idx.shape.rank()) + 1;
  int64_t axis = 0;
  EI_RETURN_IF_ERROR(axisIn(ctx, ctx.attrs().getInt("axis", -1), outRank, &axis));
  std::vector<int64_t> out = idx.shape.dims();
  out.insert(out.begin() + axis, depth);
  Shape s(out);
  EI_RETURN_IF_ERROR(checkSize(ctx, s));
  setOut(ctx, 0, values.dtype, s);
  return Status::Ok();
}

Status inferCumSum(InferContext& ctx) {
  const InferValue& x = ctx.inputs[0];
  const DataType t = x.dtype;
  if (!(isFloatingPoint(t) || t == DataType::kInt32 || t == DataType::kInt64))
    return ctx.error(ErrorCode::kInvalidModel,
                     std::string("CumSum does not support type ") + dataTypeName(t));
  EI_RETURN_IF_ERROR(checkIndexType(ctx, 1, "CumSum axis"));
  EI_RETURN_IF_ERROR(checkScalar(ctx, 1, "CumSum axis"));
  if (ctx.inputs[1].shapeKnown && ctx.inputs[1].shape.rank() > 1)
    return ctx.error(ErrorCode::kInvalidModel, "CumSum axis must be a scalar");
  if (x.shapeKnown && ctx.inputs[1].value && ctx.inputs[1].value->numel() == 1) {
    int64_t a = 0;
    EI_RETURN_IF_ERROR(
        axisIn(ctx, ctx.inputs[1].value->getAsInt64(0), static_cast<int64_t>(x.shape.rank()), &a));
  }
  return inferIdentity(ctx);
}

void add(OpSchemaRegistry& r, const std::string& op, int64_t minOpset, int minIn, int maxIn,
         ShapeInferFn fn) {
  OpSchema s;
  s.opType = op;
  s.minOpset = minOpset;
  s.maxOpset = 17;
  s.minInputs = minIn;
  s.maxInputs = maxIn;
  s.infer = std::move(fn);
  r.add(std::move(s));
}

}  // namespace

void registerTensorSchemas(OpSchemaRegistry& r) {
  add(r, "Identity", 7, 1, 1, inferIdentity);
  add(r, "Dropout", 7, 1, 3, inferDropout);
  add(r, "Reshape", 7, 2, 2, inferReshape);
  add(r, "Flatten", 7, 1, 1, inferFlatten);
  add(r, "Transpose", 7, 1, 1, inferTranspose);
  add(r, "Concat", 7, 1, -1, inferConcat);
  add(r, "Split", 7, 1, 1, inferSplit);
  add(r, "Slice", 7, 3, 5, inferSlice);
  add(r, "Squeeze", 7, 1, 1, inferSqueeze);
  add(r, "Unsqueeze", 7, 1, 1, inferUnsqueeze);
  add(r, "Gather", 7, 2, 2, inferGather);
  add(r, "GatherElements", 11, 2, 2, inferGatherElements);
  add(r, "Shape", 7, 1, 1, inferShape);
  add(r, "Size", 7, 1, 1, inferSize);
  add(r, "ConstantOfShape", 9, 1, 1, inferConstantOfShape);
  add(r, "Expand", 8, 2, 2, inferExpand);
  add(r, "Tile", 7, 2, 2, inferTile);
  add(r, "Pad", 7, 2, 3, inferPad);
  add(r, "Range", 11, 3, 3, inferRange);
  add(r, "OneHot", 9, 3, 3, inferOneHot);
  add(r, "CumSum", 11, 2, 2, inferCumSum);
  registerDetectionSchemas(r);
  registerScatterGatherSchemas(r);
  registerMiscSchemas(r);
}

}  // namespace edgeinfer::graph
