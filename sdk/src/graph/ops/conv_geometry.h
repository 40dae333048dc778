// Sliding-window geometry shared by the Conv / ConvTranspose / pooling shape functions
// (graph/ops/nn_schemas.cpp) and the CPU reference kernels, so that the shapes the graph
// promises and the windows a kernel walks can never disagree. Header-only, no device code.
//
// All sizes are per spatial dimension. An input size below zero is unknown (build time); the
// computed output size is then unknown too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "edgeinfer/status.h"
#include "graph/graph.h"

namespace edgeinfer::graph {

enum class AutoPad { kNotSet, kSameUpper, kSameLower, kValid };

/// Largest value accepted for kernel_shape / strides / dilations / pads / output_padding, so
/// the window arithmetic below can never overflow int64.
inline constexpr int64_t kMaxWindowAttr = int64_t{1} << 30;

/// The window attributes of Conv, ConvTranspose and the pooling ops, one entry per spatial dim.
struct WindowAttrs {
  AutoPad autoPad = AutoPad::kNotSet;
  std::vector<int64_t> kernel;     // kernel_shape (entries may be -1 when taken from an
                                   // unknown weight dim at build time)
  std::vector<int64_t> strides;    // default 1
  std::vector<int64_t> dilations;  // default 1
  std::vector<int64_t> padsBegin;  // explicit `pads` (used with auto_pad NOTSET only)
  std::vector<int64_t> padsEnd;
  bool ceilMode = false;  // pooling only

  size_t rank() const { return kernel.size(); }
  /// Extent of the dilated kernel: (k - 1) * d + 1.
  int64_t effectiveKernel(size_t i) const { return (kernel[i] - 1) * dilations[i] + 1; }
};

/// The geometry of one concrete window op: pads actually used and the output size.
struct WindowDims {
  std::vector<int64_t> in, out, padBegin, padEnd;
};

inline Status windowError(const std::string& msg) {
  return Status(ErrorCode::kInvalidModel, msg);
}

inline Status parseAutoPad(const Attributes& a, AutoPad* out) {
  const std::string s = a.getString("auto_pad", "NOTSET");
  if (s == "NOTSET" || s.empty()) {
    *out = AutoPad::kNotSet;
  } else if (s == "SAME_UPPER") {
    *out = AutoPad::kSameUpper;
  } else if (s == "SAME_LOWER") {
    *out = AutoPad::kSameLower;
  } else if (s == "VALID") {
    *out = AutoPad::kValid;
  } else {
    return windowError("unknown auto_pad '" + s + "'");
  }
  return Status::Ok();
}

/// Reads an optional ints attribute of `count` entries, each in [minValue, kMaxWindowAttr].
inline Status readWindowInts(const Attributes& a, const std::string& name, size_t count,
                             int64_t def, int64_t minValue, std::vector<int64_t>* out) {
  if (!a.has(name)) {
    out->assign(count, def);
    return Status::Ok();
  }
  *out = a.getInts(name);
  if (out->size() != count)
    return windowError("attribute " + name + " has " + std::to_string(out->size()) +
                       " values, expected " + std::to_string(count));
  for (int64_t v : *out)
    if (v < minValue || v > kMaxWindowAttr)
      return windowError("attribute " + name + " has invalid value " + std::to_string(v));
  return Status::Ok();
}

/// Reads and validates kernel_shape, strides, dilations, pads, auto_pad and ceil_mode for
/// `spatialRank` spatial dims. `kernelFromWeights` (Conv/ConvTranspose: W's trailing dims,
/// possibly -1) is used when kernel_shape is absent and must agree with it when present.
/// Pooling passes an empty vector: kernel_shape is then required.
inline Status readWindowAttrs(const Attributes& a, size_t spatialRank,
                              const std::vector<int64_t>& kernelFromWeights, WindowAttrs* w) {
  EI_RETURN_IF_ERROR(parseAutoPad(a, &w->autoPad));
  if (a.has("kernel_shape")) {
    EI_RETURN_IF_ERROR(readWindowInts(a, "kernel_shape", spatialRank, 1, 1, &w->kernel));
    for (size_t i = 0; i < kernelFromWeights.size() && i < spatialRank; ++i)
      if (kernelFromWeights[i] >= 0 && kernelFromWeights[i] != w->kernel[i])
        return windowError(
            "kernel_shape[" + std::to_string(i) + "] = " + std::to_string(w->kernel[i]) +
            " does not match the weight dim " + std::to_string(kernelFromWeights[i]));
  } else if (!kernelFromWeights.empty()) {
    w->kernel = kernelFromWeights;
    for (int64_t k : w->kernel)
      if (k == 0 || k > kMaxWindowAttr)
        return windowError("weight has invalid kernel dim " + std::to_string(k));
  } else {
    return windowError("attribute kernel_shape is required");
  }
  EI_RETURN_IF_ERROR(readWindowInts(a, "strides", spatialRank, 1, 1, &w->strides));
  EI_RETURN_IF_ERROR(readWindowInts(a, "dilations", spatialRank, 1, 1, &w->dilations));
  std::vector<int64_t> pads;
  EI_RETURN_IF_ERROR(readWindowInts(a, "pads", 2 * spatialRank, 0, 0, &pads));
  w->padsBegin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(spatialRank));
  w->padsEnd.assign(pads.begin() + static_cast<std::ptrdiff_t>(spatialRank), pads.end());
  const int64_t ceil = a.getInt("ceil_mode", 0);
  if (ceil != 0 && ceil != 1) return windowError("ceil_mode must be 0 or 1");
  w->ceilMode = ceil == 1;
  return Status::Ok();
}

inline int64_t ceilDiv(int64_t a, int64_t b) {
  return a >= 0 ? (a + b - 1) / b : -((-a) / b);
}

/// Conv / pooling output size along spatial dim i for input size `in`, and the pads used.
///   NOTSET: floor((in + pb + pe - ek) / s) + 1   (ceil with ceil_mode)
///   VALID:  as NOTSET with zero pads
///   SAME_*: ceil(in / s), total pad max(0, (out - 1) * s + ek - in), the odd element at the
///           end (SAME_UPPER) or at the beginning (SAME_LOWER).
/// With ceil_mode, a last window that would start in the end padding is dropped (as PyTorch
/// and onnxruntime do), so every window starts inside the input or the begin padding.
inline Status windowOutputSize(const WindowAttrs& w, size_t i, int64_t in, int64_t* out,
                               int64_t* padBegin, int64_t* padEnd) {
  const int64_t s = w.strides[i];
  const int64_t k = w.kernel[i];
  *padBegin = w.autoPad == AutoPad::kNotSet ? w.padsBegin[i] : 0;
  *padEnd = w.autoPad == AutoPad::kNotSet ? w.padsEnd[i] : 0;
  if (in < 0 || k < 0) {  // unknown input or kernel size
    *out = -1;
    return Status::Ok();
  }
  const int64_t ek = w.effectiveKernel(i);
  if (w.autoPad == AutoPad::kSameUpper || w.autoPad == AutoPad::kSameLower) {
    *out = ceilDiv(in, s);
    const int64_t total = std::max<int64_t>(0, (*out - 1) * s + ek - in);
    *padBegin = w.autoPad == AutoPad::kSameUpper ? total / 2 : total - total / 2;
    *padEnd = total - *padBegin;
    return Status::Ok();
  }
  const int64_t padded = in + *padBegin + *padEnd;
  if (padded < ek)
    return windowError("spatial dim " + std::to_string(i) + ": kernel extent " +
                       std::to_string(ek) + " is larger than the padded input " +
                       std::to_string(padded));
  if (!w.ceilMode) {
    *out = (padded - ek) / s + 1;
  } else {
    *out = ceilDiv(padded - ek, s) + 1;
    if ((*out - 1) * s >= in + *padBegin) --*out;
  }
  return Status::Ok();
}

/// Computes the output sizes and pads of a Conv / pooling op for the spatial input sizes `in`.
inline Status computeWindowDims(const WindowAttrs& w, const std::vector<int64_t>& in,
                                WindowDims* d) {
  const size_t n = w.rank();
  d->in = in;
  d->out.assign(n, -1);
  d->padBegin.assign(n, 0);
  d->padEnd.assign(n, 0);
  for (size_t i = 0; i < n; ++i)
    EI_RETURN_IF_ERROR(windowOutputSize(w, i, in[i], &d->out[i], &d->padBegin[i], &d->padEnd[i]));
  return Status::Ok();
}

/// The extra attributes of ConvTranspose.
struct ConvTransposeAttrs {
  std::vector<int64_t> outputPadding;  // per spatial dim, default 0
  std::vector<int64_t> outputShape;    // spatial dims only; empty when absent
};

inline Status readConvTransposeAttrs(const Attributes& a, const WindowAttrs& w,
                                     ConvTransposeAttrs* t) {
  const size_t n = w.rank();
  EI_RETURN_IF_ERROR(readWindowInts(a, "output_padding", n, 0, 0, &t->outputPadding));
  for (size_t i = 0; i < n; ++i)
    if (t->outputPadding[i] >= std::max(w.strides[i], w.dilations[i]))
      return windowError("output_padding[" + std::to_string(i) +
                         "] = " + std::to_string(t->outputPadding[i]) +
                         " must be smaller than the stride or the dilation");
  t->outputShape.clear();
  if (a.has("output_shape")) {
    std::vector<int64_t> os = a.getInts("output_shape");
    // Accepted with or without the leading N and C dims.
    if (os.size() == n + 2) os.erase(os.begin(), os.begin() + 2);
    if (os.size() != n)
      return windowError("attribute output_shape has " + std::to_string(os.size()) +
                         " values, expected " + std::to_string(n));
    for (int64_t v : os)
      if (v < 1 || v > kMaxWindowAttr)
        return windowError("attribute output_shape has invalid value " + std::to_string(v));
    t->outputShape = os;
  }
  return Status::Ok();
}

/// ConvTranspose output size along spatial dim i, and the pads used, per the ONNX spec:
///   default: s * (in - 1) + output_padding + ek - pb - pe
///   output_shape given, or SAME_*: the total padding
///     s * (in - 1) + output_padding + ek - out  (out = output_shape, or in * s for SAME_*)
///   is split with the odd element at the beginning, except for SAME_UPPER which puts it at
///   the end (the ONNX spec and reference; onnxruntime swaps the two).
inline Status convTransposeOutputSize(const WindowAttrs& w, const ConvTransposeAttrs& t, size_t i,
                                      int64_t in, int64_t* out, int64_t* padBegin,
                                      int64_t* padEnd) {
  const int64_t s = w.strides[i];
  *padBegin = w.autoPad == AutoPad::kNotSet ? w.padsBegin[i] : 0;
  *padEnd = w.autoPad == AutoPad::kNotSet ? w.padsEnd[i] : 0;
  const bool same = w.autoPad == AutoPad::kSameUpper || w.autoPad == AutoPad::kSameLower;
  if (in < 0 || w.kernel[i] < 0) {
    *out = t.outputShape.empty() ? -1 : t.outputShape[i];
    return Status::Ok();
  }
  const int64_t ek = w.effectiveKernel(i);
  const int64_t full = s * (in - 1) + t.outputPadding[i] + ek;  // output size with no pads
  if (!t.outputShape.empty() || same) {
    *out = !t.outputShape.empty() ? t.outputShape[i] : in * s;
    int64_t total = full - *out;
    if (same) total = std::max<int64_t>(0, total);
    const bool oddAtEnd = w.autoPad == AutoPad::kSameUpper;
    // Floor division, as the ONNX reference does: a negative total (output_shape larger than
    // the full result) becomes a negative end pad, i.e. zero rows appended at the end.
    const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
    *padBegin = oddAtEnd ? half : total - half;
    *padEnd = total - *padBegin;
    return Status::Ok();
  }
  *out = full - *padBegin - *padEnd;
  if (*out < 1)
    return windowError("spatial dim " + std::to_string(i) + ": ConvTranspose output size " +
                       std::to_string(*out) + " is not positive (pads too large)");
  return Status::Ok();
}

inline Status computeConvTransposeDims(const WindowAttrs& w, const ConvTransposeAttrs& t,
                                       const std::vector<int64_t>& in, WindowDims* d) {
  const size_t n = w.rank();
  d->in = in;
  d->out.assign(n, -1);
  d->padBegin.assign(n, 0);
  d->padEnd.assign(n, 0);
  for (size_t i = 0; i < n; ++i)
    EI_RETURN_IF_ERROR(
        convTransposeOutputSize(w, t, i, in[i], &d->out[i], &d->padBegin[i], &d->padEnd[i]));
  return Status::Ok();
}

}  // namespace edgeinfer::graph
