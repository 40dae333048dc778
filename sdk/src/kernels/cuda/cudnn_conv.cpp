// cuDNN graph-API convolutions: see cudnn_conv.h.
#include "kernels/cuda/cudnn_conv.h"

#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <deque>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <utility>
#include <vector>

#include "core/half.h"
#include "edgeinfer/logger.h"
#include "graph/ops/conv_geometry.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/cudnn_check.h"
#include "kernels/cuda/device_weights.h"
#include "kernels/cuda/eltwise.h"
#include "kernels/cuda/fused_activation.h"
#include "kernels/ref/activation.h"

namespace edgeinfer::cuda {

using builder::Layout;
using builder::TensorFormat;

namespace {

using detail::allPositive;
using detail::fail;

using Holder = CudnnHandle;

/// A backend descriptor, destroyed with its last owner.
using Desc = std::shared_ptr<void>;

Status createDesc(cudnnBackendDescriptorType_t type, Desc* out) {
  cudnnBackendDescriptor_t d = nullptr;
  EI_CUDNN_CHECK(cudnnBackendCreateDescriptor(type, &d));
  *out = Desc(d, [](void* p) { cudnnBackendDestroyDescriptor(p); });
  return Status::Ok();
}

#define EI_SET(desc, name, type, count, ptr) \
  EI_CUDNN_CHECK(cudnnBackendSetAttribute((desc).get(), name, type, count, ptr))

// Unique ids of the tensors in the variant pack (virtual intermediates need ids too).
constexpr int64_t kUidX = 1, kUidW = 2, kUidB = 3, kUidZ = 4, kUidY = 5;
constexpr int64_t kUidVirtual = 100;

/// Everything that decides the operation graph of one layer.
struct ConvSpec {
  // The forward convolution's sizes. A ConvTranspose is the backward-data convolution of the
  // forward one whose output is its input: its x is [N, K, P, Q], its W [K, C/group, R, S]
  // and its y [N, C, H, W] (`transpose`).
  int64_t N = 0, C = 0, H = 0, W = 0;   // input
  int64_t K = 0, Cg = 0, R = 0, S = 0;  // weights [K, C/group, R, S]
  int64_t P = 0, Q = 0;                 // output spatial
  bool transpose = false;  // ConvTranspose: cuDNN's conv_dgrad; the bias (C values) after it
  int64_t padBegin[2] = {0, 0}, padEnd[2] = {0, 0}, stride[2] = {1, 1}, dilation[2] = {1, 1};
  bool hasBias = false, hasZ = false;
  ref::Activation act = ref::Activation::kNone;
  float alpha = 0.f, beta = 0.f;
  DeviceActivation deviceAct = DeviceActivation::kNone;  // the same activation, for our kernel
  /// The activation has an exact cuDNN pointwise mode (mapActivation).
  bool actFusable = true;
  /// This variant's operation graph ends before the activation: the tactic applies it with
  /// launchActivationInPlace after cuDNN's kernel (id "...<format>.act.e<engine>...").
  bool actAfter = false;
};

/// The pointwise op an activation maps to exactly, or false.
struct PointwiseAct {
  cudnnPointwiseMode_t mode = CUDNN_POINTWISE_RELU_FWD;
  bool setLower = false, setUpper = false, setSlope = false, setEluAlpha = false,
       setSwishBeta = false;
  double lower = 0, upper = 0, slope = 0, eluAlpha = 1, swishBeta = 1;
};

bool mapActivation(ref::Activation act, float alpha, float beta, PointwiseAct* pw) {
  switch (act) {
    case ref::Activation::kRelu:
      pw->mode = CUDNN_POINTWISE_RELU_FWD;
      pw->setLower = true;
      return true;
    case ref::Activation::kLeakyRelu:  // x >= 0 ? x : alpha * x
      pw->mode = CUDNN_POINTWISE_RELU_FWD;
      pw->setLower = pw->setSlope = true;
      pw->slope = alpha;
      return true;
    case ref::Activation::kClip:  // min(max(x, alpha), beta)
      if (!std::isfinite(alpha) || std::isnan(beta) || beta < alpha) return false;
      pw->mode = CUDNN_POINTWISE_RELU_FWD;
      pw->setLower = true;
      pw->lower = alpha;
      if (std::isfinite(beta)) {
        pw->setUpper = true;
        pw->upper = beta;
      }
      return true;
    case ref::Activation::kSigmoid:
      pw->mode = CUDNN_POINTWISE_SIGMOID_FWD;
      return true;
    case ref::Activation::kSilu:  // x * sigmoid(beta x), beta = 1
      pw->mode = CUDNN_POINTWISE_SWISH_FWD;
      pw->setSwishBeta = true;
      return true;
    case ref::Activation::kTanh:
      pw->mode = CUDNN_POINTWISE_TANH_FWD;
      return true;
    case ref::Activation::kElu:  // x >= 0 ? x : alpha * (exp(x) - 1)
      pw->mode = CUDNN_POINTWISE_ELU_FWD;
      pw->setEluAlpha = true;
      pw->eluAlpha = alpha;
      return true;
    default:  // HardSigmoid, HardSwish, Selu, Softplus: no exact pointwise mode
      return false;
  }
}

/// Reads the layer into `spec`; false (with `why`) when this provider cannot run it.
/// A 2-D ConvTranspose with constant weights (and bias): the forward convolution it is the
/// backward-data pass of. The pads must not be negative (an output_shape larger than the full
/// result) and the forward convolution of the output must give back the input's size.
bool parseTransposeLayer(const builder::LayerContext& layer, ConvSpec* spec, std::string* why) {
  const graph::Node* node = layer.node;
  if (layer.inputShapes.size() < 2 || layer.inputShapes.size() > 3 ||
      layer.outputShapes.size() != 1)
    return fail(why, "unexpected input/output count");
  const Shape& xs = layer.inputShapes[0];
  const Shape& ys = layer.outputShapes[0];
  if (xs.rank() != 4 || ys.rank() != 4)
    return fail(why, "only 2-D transposed convolutions (4-D tensors) are supported");
  if (!allPositive(xs) || !allPositive(ys)) return fail(why, "shapes must be static");
  if (!detail::isFloatStorage(layer.inputTypes[0]) || !detail::isFloatStorage(layer.outputTypes[0]))
    return fail(why, "input and output must be float32 or float16");
  const Tensor* w = layer.constantInput(1);
  if (!w) return fail(why, "the weights are not a constant");
  if (!detail::isFloatStorage(w->dtype()) || w->shape().rank() != 4 || !allPositive(w->shape()))
    return fail(why, "the weights must be a static 4-D float tensor");
  spec->transpose = true;
  spec->N = xs[0], spec->K = xs[1], spec->P = xs[2], spec->Q = xs[3];
  spec->Cg = w->shape()[1], spec->R = w->shape()[2], spec->S = w->shape()[3];
  spec->C = ys[1], spec->H = ys[2], spec->W = ys[3];
  const int64_t group = node->attrs.getInt("group", 1);
  if (group < 1 || w->shape()[0] != spec->K || spec->C != spec->Cg * group ||
      spec->K % group != 0 || ys[0] != spec->N)
    return fail(why, "inconsistent group / channel counts");
  if (layer.hasInput(2)) {
    const Tensor* b = layer.constantInput(2);
    if (!b) return fail(why, "the bias is not a constant");
    if (!detail::isFloatStorage(b->dtype()) || b->numel() != spec->C)
      return fail(why, "the bias must be a float tensor of C_out elements");
    spec->hasBias = true;
  }
  graph::WindowAttrs wa;
  graph::ConvTransposeAttrs ta;
  graph::WindowDims wd;
  if (!graph::readWindowAttrs(node->attrs, 2, {spec->R, spec->S}, &wa).ok() ||
      !graph::readConvTransposeAttrs(node->attrs, wa, &ta).ok() ||
      !graph::computeConvTransposeDims(wa, ta, {spec->P, spec->Q}, &wd).ok())
    return fail(why, "invalid window attributes");
  if (wd.out[0] != spec->H || wd.out[1] != spec->W)
    return fail(why, "output shape disagrees with the window attributes");
  const int64_t in[2] = {spec->H, spec->W}, back[2] = {spec->P, spec->Q};
  for (int i = 0; i < 2; ++i) {
    const size_t u = static_cast<size_t>(i);
    spec->padBegin[i] = wd.padBegin[u];
    spec->padEnd[i] = wd.padEnd[u];
    spec->stride[i] = wa.strides[u];
    spec->dilation[i] = wa.dilations[u];
    if (spec->padBegin[i] < 0 || spec->padEnd[i] < 0)
      return fail(why, "negative pads (an output_shape beyond the full result)");
    const int64_t span = in[i] + spec->padBegin[i] + spec->padEnd[i] - wa.effectiveKernel(u);
    if (span < 0 || span / spec->stride[i] + 1 != back[i])
      return fail(why, "the output does not convolve back to the input's size");
  }
  return true;
}

bool parseLayer(const builder::LayerContext& layer, ConvSpec* spec, std::string* why) {
  const graph::Node* node = layer.node;
  if (!node || !layer.graph) return fail(why, "no node");
  const bool fused = node->opType == "FusedConv" && node->domain == graph::kEdgeInferDomain;
  const bool conv = node->opType == "Conv" && node->domain.empty();
  if (node->opType == "ConvTranspose" && node->domain.empty())
    return parseTransposeLayer(layer, spec, why);
  if (!fused && !conv) return fail(why, "not a Conv / FusedConv / ConvTranspose node");
  if (layer.inputShapes.size() < 2 || layer.outputShapes.size() != 1)
    return fail(why, "unexpected input/output count");
  const Shape& xs = layer.inputShapes[0];
  const Shape& ys = layer.outputShapes[0];
  if (xs.rank() != 4 || ys.rank() != 4)
    return fail(why, "only 2-D convolutions (4-D tensors) are supported");
  if (!allPositive(xs) || !allPositive(ys)) return fail(why, "shapes must be static");
  if (!detail::isFloatStorage(layer.inputTypes[0]) || !detail::isFloatStorage(layer.outputTypes[0]))
    return fail(why, "input and output must be float32 or float16");
  const Tensor* w = layer.constantInput(1);
  if (!w) return fail(why, "the weights are not a constant");
  if (!detail::isFloatStorage(w->dtype()) || w->shape().rank() != 4 || !allPositive(w->shape()))
    return fail(why, "the weights must be a static 4-D float tensor");
  spec->N = xs[0], spec->C = xs[1], spec->H = xs[2], spec->W = xs[3];
  spec->K = w->shape()[0], spec->Cg = w->shape()[1], spec->R = w->shape()[2],
  spec->S = w->shape()[3];
  spec->P = ys[2], spec->Q = ys[3];
  const int64_t group = node->attrs.getInt("group", 1);
  if (group < 1 || spec->C != spec->Cg * group || spec->K % group != 0 || ys[1] != spec->K ||
      ys[0] != spec->N)
    return fail(why, "inconsistent group / channel counts");
  if (layer.hasInput(2)) {
    const Tensor* b = layer.constantInput(2);
    if (!b) return fail(why, "the bias is not a constant");
    if (!detail::isFloatStorage(b->dtype()) || b->numel() != spec->K)
      return fail(why, "the bias must be a float tensor of K elements");
    spec->hasBias = true;
  }
  if (layer.hasInput(3)) {
    if (!fused) return fail(why, "Conv has no fourth input");
    if (layer.inputShapes.size() < 4 || layer.inputShapes[3] != ys ||
        !detail::isFloatStorage(layer.inputTypes[3]))
      return fail(why, "the residual Z must be a float tensor of the output's shape");
    spec->hasZ = true;
  }
  graph::WindowAttrs wa;
  graph::WindowDims wd;
  if (!graph::readWindowAttrs(node->attrs, 2, {spec->R, spec->S}, &wa).ok() ||
      !graph::computeWindowDims(wa, {spec->H, spec->W}, &wd).ok())
    return fail(why, "invalid window attributes");
  if (wd.out[0] != spec->P || wd.out[1] != spec->Q)
    return fail(why, "output shape disagrees with the window attributes");
  for (int i = 0; i < 2; ++i) {
    spec->padBegin[i] = wd.padBegin[static_cast<size_t>(i)];
    spec->padEnd[i] = wd.padEnd[static_cast<size_t>(i)];
    spec->stride[i] = wa.strides[static_cast<size_t>(i)];
    spec->dilation[i] = wa.dilations[static_cast<size_t>(i)];
  }
  if (fused) {
    const std::string act = node->attrs.getString("activation", "");
    if (!ref::parseActivation(act, &spec->act))
      return fail(why, "unknown activation '" + act + "'");
    // The attributes with the reference's defaults (fused_activation.h).
    if (!readFusedActivation(*node, &spec->deviceAct, &spec->alpha, &spec->beta, why)) return false;
    PointwiseAct pw;
    spec->actFusable = spec->act == ref::Activation::kNone ||
                       mapActivation(spec->act, spec->alpha, spec->beta, &pw);
  }
  return true;
}

cudnnDataType_t cudnnType(DataType t) {
  return t == DataType::kFloat16 ? CUDNN_DATA_HALF : CUDNN_DATA_FLOAT;
}

/// Strides of a [N, C, H, W] tensor stored in `layout`.
void stridesFor(const int64_t d[4], Layout layout, int64_t s[4]) {
  if (layout == Layout::kNHWC) {
    s[0] = d[1] * d[2] * d[3], s[1] = 1, s[2] = d[3] * d[1], s[3] = d[1];
  } else {
    s[0] = d[1] * d[2] * d[3], s[1] = d[2] * d[3], s[2] = d[3], s[3] = 1;
  }
}

Status makeTensor(int64_t uid, cudnnDataType_t type, const int64_t dims[4],
                  const int64_t strides[4], bool isVirtual, Desc* out) {
  EI_RETURN_IF_ERROR(createDesc(CUDNN_BACKEND_TENSOR_DESCRIPTOR, out));
  const int64_t alignment = 16;
  EI_SET(*out, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
  EI_SET(*out, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
  EI_SET(*out, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
  EI_SET(*out, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
  EI_SET(*out, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
  EI_SET(*out, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &isVirtual);
  EI_CUDNN_CHECK(cudnnBackendFinalize(out->get()));
  return Status::Ok();
}

/// A finalized operation graph and every descriptor it refers to.
struct OpGraph {
  std::vector<Desc> keep;
  Desc graph;
};

Status makePointwiseOp(const PointwiseAct& pw, const Desc& x, const Desc* b, const Desc& y,
                       OpGraph* g, Desc* op) {
  Desc pwd;
  EI_RETURN_IF_ERROR(createDesc(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, &pwd));
  const cudnnDataType_t prec = CUDNN_DATA_FLOAT;
  EI_SET(pwd, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &pw.mode);
  EI_SET(pwd, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
  if (pw.setLower)
    EI_SET(pwd, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP, CUDNN_TYPE_DOUBLE, 1, &pw.lower);
  if (pw.setUpper)
    EI_SET(pwd, CUDNN_ATTR_POINTWISE_RELU_UPPER_CLIP, CUDNN_TYPE_DOUBLE, 1, &pw.upper);
  if (pw.setSlope)
    EI_SET(pwd, CUDNN_ATTR_POINTWISE_RELU_LOWER_CLIP_SLOPE, CUDNN_TYPE_DOUBLE, 1, &pw.slope);
  if (pw.setEluAlpha)
    EI_SET(pwd, CUDNN_ATTR_POINTWISE_ELU_ALPHA, CUDNN_TYPE_DOUBLE, 1, &pw.eluAlpha);
  if (pw.setSwishBeta)
    EI_SET(pwd, CUDNN_ATTR_POINTWISE_SWISH_BETA, CUDNN_TYPE_DOUBLE, 1, &pw.swishBeta);
  EI_CUDNN_CHECK(cudnnBackendFinalize(pwd.get()));
  EI_RETURN_IF_ERROR(createDesc(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, op));
  void* raw[3] = {pwd.get(), x.get(), y.get()};
  EI_SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
         &raw[0]);
  EI_SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[1]);
  if (b) {
    void* braw = b->get();
    EI_SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &braw);
  }
  EI_SET(*op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &raw[2]);
  EI_CUDNN_CHECK(cudnnBackendFinalize(op->get()));
  g->keep.push_back(pwd);
  return Status::Ok();
}

/// conv_fprop [-> add B] [-> add Z] [-> act] for one tensor format.
Status buildOpGraph(const ConvSpec& s, TensorFormat fmt, cudnnHandle_t handle, OpGraph* g) {
  const cudnnDataType_t io = cudnnType(fmt.dtype);
  const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
  // The forward convolution's input and output; a transposed one reads the output (dy) and
  // writes the input (dx).
  const int64_t fx[4] = {s.N, s.C, s.H, s.W}, wdims[4] = {s.K, s.Cg, s.R, s.S};
  const int64_t fy[4] = {s.N, s.K, s.P, s.Q}, bd[4] = {1, s.K, 1, 1};
  const int64_t* xd = s.transpose ? fy : fx;
  const int64_t* yd = s.transpose ? fx : fy;
  int64_t xs[4], ws[4], ys[4];
  stridesFor(xd, fmt.layout, xs);
  stridesFor(wdims, fmt.layout, ws);  // NHWC weights are KRSC
  stridesFor(yd, fmt.layout, ys);
  const int64_t bs[4] = {s.K, 1, 1, 1};

  Desc x, w, y;
  EI_RETURN_IF_ERROR(makeTensor(kUidX, io, xd, xs, false, &x));
  EI_RETURN_IF_ERROR(makeTensor(kUidW, io, wdims, ws, false, &w));
  EI_RETURN_IF_ERROR(makeTensor(kUidY, io, yd, ys, false, &y));
  g->keep.insert(g->keep.end(), {x, w, y});

  // The stages after the convolution; the last one writes Y, the others virtual tensors.
  std::vector<std::pair<PointwiseAct, Desc>> stages;  // op, second operand (or null)
  if (s.hasBias && !s.transpose) {
    Desc b;
    EI_RETURN_IF_ERROR(makeTensor(kUidB, io, bd, bs, false, &b));
    g->keep.push_back(b);
    PointwiseAct add;
    add.mode = CUDNN_POINTWISE_ADD;
    stages.emplace_back(add, b);
  }
  if (s.hasZ) {
    Desc z;
    EI_RETURN_IF_ERROR(makeTensor(kUidZ, io, yd, ys, false, &z));
    g->keep.push_back(z);
    PointwiseAct add;
    add.mode = CUDNN_POINTWISE_ADD;
    stages.emplace_back(add, z);
  }
  if (s.act != ref::Activation::kNone && !s.actAfter) {
    PointwiseAct pw;
    if (!mapActivation(s.act, s.alpha, s.beta, &pw))
      return Status(ErrorCode::kUnsupported, "activation has no cuDNN pointwise mode");
    stages.emplace_back(pw, Desc());
  }
  int64_t nextVirtual = kUidVirtual;
  auto outputOf = [&](size_t stage, Desc* out) -> Status {  // stage 0 = the convolution
    if (stage == stages.size()) {
      *out = y;
      return Status::Ok();
    }
    EI_RETURN_IF_ERROR(makeTensor(nextVirtual++, f32, yd, ys, true, out));
    g->keep.push_back(*out);
    return Status::Ok();
  };

  Desc convDesc;
  EI_RETURN_IF_ERROR(createDesc(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, &convDesc));
  const int64_t spatial = 2;
  const cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
  EI_SET(convDesc, CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
  EI_SET(convDesc, CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
  EI_SET(convDesc, CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial);
  EI_SET(convDesc, CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, s.dilation);
  EI_SET(convDesc, CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, s.stride);
  EI_SET(convDesc, CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, s.padBegin);
  EI_SET(convDesc, CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, s.padEnd);
  EI_CUDNN_CHECK(cudnnBackendFinalize(convDesc.get()));
  g->keep.push_back(convDesc);

  Desc cur;
  EI_RETURN_IF_ERROR(outputOf(0, &cur));
  Desc convOp;
  if (s.transpose) {
    EI_RETURN_IF_ERROR(
        createDesc(CUDNN_BACKEND_OPERATION_CONVOLUTION_BACKWARD_DATA_DESCRIPTOR, &convOp));
    void* dyr = x.get();
    void* wr = w.get();
    void* dxr = cur.get();
    void* cr = convDesc.get();
    const float one = 1.f, zero = 0.f;
    EI_SET(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DY, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
           &dyr);
    EI_SET(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
           &wr);
    EI_SET(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_DX, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
           &dxr);
    EI_SET(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_CONV_DESC,
           CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cr);
    EI_SET(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_ALPHA, CUDNN_TYPE_FLOAT, 1, &one);
    EI_SET(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_BWD_DATA_BETA, CUDNN_TYPE_FLOAT, 1, &zero);
    EI_CUDNN_CHECK(cudnnBackendFinalize(convOp.get()));
  } else {
    EI_RETURN_IF_ERROR(createDesc(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, &convOp));
    void* xr = x.get();
    void* wr = w.get();
    void* yr = cur.get();
    void* cr = convDesc.get();
    const float one = 1.f, zero = 0.f;
    EI_SET(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
           &xr);
    EI_SET(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
           &wr);
    EI_SET(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
           &yr);
    EI_SET(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC,
           CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cr);
    EI_SET(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &one);
    EI_SET(convOp, CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &zero);
    EI_CUDNN_CHECK(cudnnBackendFinalize(convOp.get()));
  }
  std::vector<Desc> ops{convOp};
  for (size_t i = 0; i < stages.size(); ++i) {
    Desc out, op;
    EI_RETURN_IF_ERROR(outputOf(i + 1, &out));
    EI_RETURN_IF_ERROR(makePointwiseOp(
        stages[i].first, cur, stages[i].second ? &stages[i].second : nullptr, out, g, &op));
    ops.push_back(op);
    cur = out;
  }
  g->keep.insert(g->keep.end(), ops.begin(), ops.end());

  EI_RETURN_IF_ERROR(createDesc(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, &g->graph));
  std::vector<void*> raw;
  for (const Desc& d : ops) raw.push_back(d.get());
  EI_SET(g->graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR,
         static_cast<int64_t>(raw.size()), raw.data());
  EI_SET(g->graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  EI_CUDNN_CHECK(cudnnBackendFinalize(g->graph.get()));
  return Status::Ok();
}

/// What an engine configuration is: its engine, notes and knob choices.
struct EngineInfo {
  int64_t engine = -1;
  std::vector<cudnnBackendNumericalNote_t> notes;
  std::vector<std::pair<int64_t, int64_t>> knobs;  // (type, value), sorted by type
  bool has(cudnnBackendNumericalNote_t n) const {
    return std::find(notes.begin(), notes.end(), n) != notes.end();
  }
};

Status describeConfig(const Desc& cfg, EngineInfo* info) {
  Desc engine;
  EI_RETURN_IF_ERROR(createDesc(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &engine));
  int64_t n = 0;
  void* er = engine.get();
  EI_CUDNN_CHECK(cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_ENGINE,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &er));
  EI_CUDNN_CHECK(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_GLOBAL_INDEX,
                                          CUDNN_TYPE_INT64, 1, &n, &info->engine));
  cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
  EI_CUDNN_CHECK(cudnnBackendGetAttribute(engine.get(), CUDNN_ATTR_ENGINE_NUMERICAL_NOTE,
                                          CUDNN_TYPE_NUMERICAL_NOTE,
                                          CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes));
  info->notes.assign(notes, notes + std::min<int64_t>(n, CUDNN_NUMERICAL_NOTE_TYPE_COUNT));

  std::vector<Desc> choices(CUDNN_KNOB_TYPE_COUNTS);
  std::vector<void*> raw(choices.size());
  for (size_t i = 0; i < choices.size(); ++i) {
    EI_RETURN_IF_ERROR(createDesc(CUDNN_BACKEND_KNOB_CHOICE_DESCRIPTOR, &choices[i]));
    raw[i] = choices[i].get();
  }
  EI_CUDNN_CHECK(cudnnBackendGetAttribute(cfg.get(), CUDNN_ATTR_ENGINECFG_KNOB_CHOICES,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR,
                                          static_cast<int64_t>(raw.size()), &n, raw.data()));
  for (int64_t i = 0; i < std::min<int64_t>(n, static_cast<int64_t>(raw.size())); ++i) {
    cudnnBackendKnobType_t type;
    int64_t value = 0, m = 0;
    EI_CUDNN_CHECK(cudnnBackendGetAttribute(raw[static_cast<size_t>(i)],
                                            CUDNN_ATTR_KNOB_CHOICE_KNOB_TYPE, CUDNN_TYPE_KNOB_TYPE,
                                            1, &m, &type));
    EI_CUDNN_CHECK(cudnnBackendGetAttribute(raw[static_cast<size_t>(i)],
                                            CUDNN_ATTR_KNOB_CHOICE_KNOB_VALUE, CUDNN_TYPE_INT64, 1,
                                            &m, &value));
    info->knobs.emplace_back(static_cast<int64_t>(type), value);
  }
  std::sort(info->knobs.begin(), info->knobs.end());
  return Status::Ok();
}

/// The engine configurations the heuristics of `mode` offer for the graph.
Status heuristicConfigs(const OpGraph& g, cudnnBackendHeurMode_t mode, std::vector<Desc>* out) {
  Desc heur;
  EI_RETURN_IF_ERROR(createDesc(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, &heur));
  void* gr = g.graph.get();
  EI_SET(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &gr);
  EI_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
  EI_CUDNN_CHECK(cudnnBackendFinalize(heur.get()));
  int64_t count = 0;
  EI_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                          CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count, nullptr));
  std::vector<Desc> cfgs(static_cast<size_t>(count));
  std::vector<void*> raw(cfgs.size());
  for (size_t i = 0; i < cfgs.size(); ++i) {
    EI_RETURN_IF_ERROR(createDesc(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, &cfgs[i]));
    raw[i] = cfgs[i].get();
  }
  int64_t got = 0;
  if (count > 0)
    EI_CUDNN_CHECK(cudnnBackendGetAttribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS,
                                            CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                                            raw.data()));
  cfgs.resize(static_cast<size_t>(std::min(got, count)));
  *out = std::move(cfgs);
  return Status::Ok();
}

Status finalizePlan(cudnnHandle_t handle, const Desc& cfg, Desc* plan, int64_t* workspace) {
  EI_RETURN_IF_ERROR(createDesc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, plan));
  void* cr = cfg.get();
  EI_SET(*plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  EI_SET(*plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &cr);
  EI_CUDNN_CHECK(cudnnBackendFinalize(plan->get()));
  int64_t n = 0;
  EI_CUDNN_CHECK(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                          CUDNN_TYPE_INT64, 1, &n, workspace));
  return Status::Ok();
}

/// An execution plan rebuilt from its JSON (what serializedState() kept at build time):
/// cuDNN skips the heuristics and the compilation of runtime-fused kernels.
Status planFromJson(cudnnHandle_t handle, const std::string& json, Desc* plan, int64_t* workspace) {
  EI_RETURN_IF_ERROR(createDesc(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, plan));
  EI_SET(*plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
  EI_SET(*plan, CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION, CUDNN_TYPE_CHAR,
         static_cast<int64_t>(json.size()), json.data());
  EI_CUDNN_CHECK(cudnnBackendFinalize(plan->get()));
  int64_t n = 0;
  EI_CUDNN_CHECK(cudnnBackendGetAttribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE,
                                          CUDNN_TYPE_INT64, 1, &n, workspace));
  return Status::Ok();
}

/// The plan's JSON, or "" (logged at verbose level) when cuDNN cannot serialize it.
std::string planToJson(const Desc& plan, const std::string& id) {
  int64_t count = 0;
  cudnnStatus_t st =
      cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION,
                               CUDNN_TYPE_CHAR, 0, &count, nullptr);
  std::string json(static_cast<size_t>(std::max<int64_t>(count, 0)), '\0');
  if (st == CUDNN_STATUS_SUCCESS && count > 0)
    st = cudnnBackendGetAttribute(plan.get(), CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION,
                                  CUDNN_TYPE_CHAR, count, &count, json.data());
  if (st != CUDNN_STATUS_SUCCESS || count <= 0) {
    log(Severity::kVerbose, "cudnn: the plan of " + id + " does not serialize (" +
                                cudnnGetErrorString(st) + ", " + std::to_string(count) + " bytes)");
    return {};
  }
  json.resize(std::min(json.size(), static_cast<size_t>(std::max<int64_t>(count, 0))));
  while (!json.empty() && json.back() == '\0') json.pop_back();
  return json;
}

std::string formatTag(TensorFormat f) {
  return std::string(f.dtype == DataType::kFloat16 ? "fp16" : "fp32") + "." +
         (f.layout == Layout::kNHWC ? "nhwc" : "nchw");
}

class CudnnConvTactic : public builder::Tactic {
 public:
  // The execution plan is finalized in initialize(), not here: finalizing can compile a
  // kernel at run time (cuDNN's runtime-fusion engines), so a build whose timings come from
  // the cache, or an engine load, finalizes only the one plan it uses.
  CudnnConvTactic(std::string id, const ConvSpec& spec, TensorFormat fmt,
                  std::shared_ptr<Holder> handle, std::shared_ptr<OpGraph> graph, Desc cfg)
      : id_(std::move(id)),
        spec_(spec),
        fmt_(fmt),
        handle_(std::move(handle)),
        graph_(std::move(graph)),
        cfg_(std::move(cfg)) {}
  /// A tactic whose plan was restored from JSON (an engine load): no op graph or config.
  CudnnConvTactic(std::string id, const ConvSpec& spec, TensorFormat fmt,
                  std::shared_ptr<Holder> handle, Desc plan, int64_t workspace, std::string json)
      : id_(std::move(id)),
        spec_(spec),
        fmt_(fmt),
        handle_(std::move(handle)),
        plan_(std::move(plan)),
        workspace_(static_cast<size_t>(std::max<int64_t>(workspace, 0))),
        state_(std::move(json)) {}
  ~CudnnConvTactic() override { variantPacks_.clear(); }

  std::string id() const override { return id_; }
  TensorFormat inputFormat(size_t index) const override {
    if (index == 1 || index == 2) return TensorFormat{DataType::kFloat32, Layout::kLinear};
    return fmt_;
  }
  TensorFormat outputFormat(size_t) const override { return fmt_; }
  size_t workspaceBytes() const override { return workspace_; }
  bool consumesInput(size_t index) const override { return index == 1 || index == 2; }
  std::string serializedState() const override { return state_; }

  // Finalizes the plan on the calling thread (the weights are converted in initialize(): a
  // layer's candidates are all prepared before the first is timed, and holding a converted
  // copy for each would multiply the host memory a big layer needs). cuDNN builds execution
  // plans of one handle on several threads at once (cudnn-frontend's build_plan_at_index is
  // meant for that when autotuning): the handle's lock is held shared, executions hold it
  // exclusively.
  void prepare(const builder::LayerContext& layer) override {
    std::lock_guard<std::mutex> lock(prepareMu_);
    if (prepared_) return;
    prepared_ = true;
    try {
      prepareStatus_ = preparePlan(layer);
    } catch (const std::exception& e) {  // (on a builder thread: nothing may escape)
      prepareStatus_ = Status(ErrorCode::kInternal, id_ + ": preparing it failed: " + e.what());
    }
  }

  Status initialize(const builder::LayerContext& layer) override {
    prepare(layer);
    EI_RETURN_IF_ERROR(prepareStatus_);
    if (spec_.actAfter || spec_.transpose) maxBlocks_ = detail::maxBlocksForDevice();
    const Tensor* w = weights(layer);
    if (!w)
      return Status(ErrorCode::kInvalidArgument, id_ + ": weights missing or of another shape");
    const size_t es = dataTypeSize(fmt_.dtype);
    // Weights [K, Cg, R, S] -> KCRS (NCHW) or KRSC (NHWC), in the tactic's element type.
    std::vector<uint8_t> host(static_cast<size_t>(w->numel()) * es);
    const int64_t RS = spec_.R * spec_.S;
    for (int64_t i = 0; i < w->numel(); ++i) {
      int64_t j = i;
      if (fmt_.layout == Layout::kNHWC) {
        const int64_t rs = i % RS, c = (i / RS) % spec_.Cg, k = i / (RS * spec_.Cg);
        j = (k * RS + rs) * spec_.Cg + c;
      }
      store(host.data(), j, static_cast<float>(w->getAsDouble(i)));
    }
    EI_RETURN_IF_ERROR(uploadWeights(host.data(), host.size(), &dW_));
    if (spec_.hasBias) {
      const int64_t nb = spec_.transpose ? spec_.C : spec_.K;  // one per output channel
      const Tensor* b = layer.constantInput(2);
      if (!b || b->numel() != nb)
        return Status(ErrorCode::kInvalidArgument, id_ + ": bias missing or of another size");
      std::vector<uint8_t> hb(static_cast<size_t>(nb) * es);
      for (int64_t i = 0; i < nb; ++i) store(hb.data(), i, static_cast<float>(b->getAsDouble(i)));
      EI_RETURN_IF_ERROR(uploadWeights(hb.data(), hb.size(), &dB_));
      if (spec_.transpose) {  // y += bias after cuDNN's dgrad, broadcast over the channels
        biasAdd_ = EltwisePlan{};
        biasAdd_.op = EltOp::kAdd;
        biasAdd_.numInputs = 2;
        const Shape y{spec_.N, spec_.C, spec_.H, spec_.W};
        const Shape ops[2] = {y, Shape{spec_.C, 1, 1}};
        if (!planBroadcast(y, ops, 2, fmt_.layout == Layout::kNHWC, biasAdd_.dims, biasAdd_.strides,
                           &biasAdd_.rank))
          return Status(ErrorCode::kInternal, id_ + ": bias broadcast");
        biasAdd_.numel = y.numel();
      }
    }
    return Status::Ok();
  }

  Status enqueue(const builder::LaunchArgs& args) override {
    if (!dW_ || (spec_.hasBias && !dB_))
      return Status(ErrorCode::kInvalidArgument, id_ + ": enqueue before initialize");
    if (args.inputs.empty() || !args.inputs[0] || args.outputs.empty() || !args.outputs[0] ||
        (spec_.hasZ && (args.inputs.size() < 4 || !args.inputs[3])))
      return Status(ErrorCode::kInvalidArgument, id_ + ": missing input or output pointer");
    if (workspace_ && (!args.workspace || args.workspaceBytes < workspace_))
      return Status(ErrorCode::kInvalidArgument,
                    id_ + ": needs a workspace of " + std::to_string(workspace_) + " bytes");
    void* ptrs[5] = {const_cast<void*>(args.inputs[0]), dW_.get(), args.outputs[0], dB_.get(),
                     spec_.hasZ ? const_cast<void*>(args.inputs[3]) : nullptr};
    std::lock_guard<std::recursive_mutex> streams(cudnnStreamMutex());  // library_handles.h
    std::lock_guard<std::shared_mutex> lock(handle_->mu);
    EI_CUDNN_CHECK(cudnnSetStream(handle_->handle, static_cast<cudaStream_t>(args.stream)));
    // One variant pack per set of pointers, kept for the tactic's life: contexts sharing the
    // engine have their own activation memory, and a pack a captured CUDA graph was recorded
    // with is never freed under it (each context's pointers are stable after its first run).
    const VariantKey key{ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4], args.workspace};
    const Desc* pack = nullptr;
    for (const auto& [k, vp] : variantPacks_)
      if (k == key) pack = &vp;
    if (!pack) {
      int64_t uids[5] = {kUidX, kUidW, kUidY, kUidB, kUidZ};
      void* data[5] = {ptrs[0], ptrs[1], ptrs[2], ptrs[3], ptrs[4]};
      int64_t n = 3;
      if (spec_.hasBias && !spec_.transpose) uids[n] = kUidB, data[n++] = ptrs[3];
      if (spec_.hasZ) uids[n] = kUidZ, data[n++] = ptrs[4];
      Desc vp;
      EI_RETURN_IF_ERROR(createDesc(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp));
      void* ws = args.workspace;
      EI_SET(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
      EI_SET(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, data);
      EI_SET(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
      EI_CUDNN_CHECK(cudnnBackendFinalize(vp.get()));
      variantPacks_.emplace_back(key, std::move(vp));
      pack = &variantPacks_.back().second;
    }
    EI_CUDNN_CHECK(cudnnBackendExecute(handle_->handle, plan_.get(), pack->get()));
    if (spec_.transpose && spec_.hasBias) {
      const void* in[2] = {args.outputs[0], dB_.get()};
      return launchEltwise(biasAdd_, fmt_.dtype == DataType::kFloat16, in, args.outputs[0],
                           maxBlocks_, args.stream);
    }
    if (spec_.actAfter)  // the activation cuDNN's graph left out, in place on Y
      return launchActivationInPlace(args.outputs[0], spec_.N * spec_.K * spec_.P * spec_.Q,
                                     fmt_.dtype == DataType::kFloat16, spec_.deviceAct, spec_.alpha,
                                     spec_.beta, maxBlocks_, args.stream);
    return Status::Ok();
  }

 private:
  void store(uint8_t* base, int64_t j, float v) const {
    if (fmt_.dtype == DataType::kFloat16)
      reinterpret_cast<uint16_t*>(base)[j] = floatToHalf(v);
    else
      reinterpret_cast<float*>(base)[j] = v;
  }

  // The layer's weights, or null when they are missing or of another shape.
  const Tensor* weights(const builder::LayerContext& layer) const {
    const Tensor* w = layer.constantInput(1);
    return w && w->numel() == spec_.K * spec_.Cg * spec_.R * spec_.S ? w : nullptr;
  }

  // The plan, finalized once (the layer's weights checked first: no plan for a layer that
  // cannot run).
  Status preparePlan(const builder::LayerContext& layer) {
    const Tensor* w = weights(layer);
    if (!w)
      return Status(ErrorCode::kInvalidArgument, id_ + ": weights missing or of another shape");
    std::shared_lock<std::shared_mutex> lock(handle_->mu);
    if (!plan_) {
      int64_t workspace = 0;
      Desc plan;
      EI_RETURN_IF_ERROR(finalizePlan(handle_->handle, cfg_, &plan, &workspace)
                             .withContext(id_ + ": the execution plan did not finalize"));
      plan_ = std::move(plan);
      workspace_ = static_cast<size_t>(std::max<int64_t>(workspace, 0));
    }
    if (state_.empty()) state_ = planToJson(plan_, id_);  // before any execution
    return Status::Ok();
  }

  std::string id_;
  ConvSpec spec_;
  TensorFormat fmt_;
  std::shared_ptr<Holder> handle_;
  std::shared_ptr<OpGraph> graph_;  // the plan's engine config refers to it
  Desc cfg_;
  Desc plan_;             // finalized in prepare()
  size_t workspace_ = 0;  // known once the plan is finalized
  std::string state_;     // the plan's JSON (serializedState), read in prepare()
  std::mutex prepareMu_;
  bool prepared_ = false;  // prepare() ran: prepareStatus_ is its result
  Status prepareStatus_;
  std::shared_ptr<void> dW_, dB_;  // device_weights.h: shared with equal uploads
  int maxBlocks_ = 2048;           // the activation's grid (actAfter), the bias's (transpose)
  EltwisePlan biasAdd_;            // transpose: y += bias
  // X, W, Y, B, Z and the workspace; the packs made for them (guarded by handle_->mu).
  using VariantKey = std::array<void*, 6>;
  std::deque<std::pair<VariantKey, Desc>> variantPacks_;
};

/// The candidates of one tensor format and activation variant (appended to `out`; with
/// `wanted`, only that id; at most `limit` of them when > 0, in the heuristics' order);
/// `reason` gets what was offered and filtered.
void enumerateFormat(const ConvSpec& spec, const TensorFormat& fmt,
                     const std::shared_ptr<Holder>& h, const std::string* wanted, int limit,
                     std::vector<std::unique_ptr<builder::Tactic>>* outp, std::string* reason) {
  std::vector<std::unique_ptr<builder::Tactic>>& out = *outp;
  {
    const std::string tag = formatTag(fmt) + (spec.actAfter ? "+act" : "");
    const std::string idPrefix = std::string(spec.transpose ? "cudnn.convt." : "cudnn.conv.") +
                                 formatTag(fmt) + "." + (spec.actAfter ? "act." : "");
    if (wanted && wanted->compare(0, idPrefix.size(), idPrefix) != 0) return;
    auto g = std::make_shared<OpGraph>();
    Status s = buildOpGraph(spec, fmt, h->handle, g.get());
    if (!s.ok()) {
      *reason += tag + ": no operation graph (" + s.message() + "); ";
      return;
    }
    std::set<std::string> seen;
    int offered = 0, filtered = 0, failed = 0, kept = 0;
    for (cudnnBackendHeurMode_t mode : {CUDNN_HEUR_MODE_A, CUDNN_HEUR_MODE_FALLBACK}) {
      std::vector<Desc> cfgs;
      if (!heuristicConfigs(*g, mode, &cfgs).ok()) continue;
      for (const Desc& cfg : cfgs) {
        EngineInfo info;
        if (!describeConfig(cfg, &info).ok()) {
          ++failed;
          continue;
        }
        std::string id = idPrefix + "e" + std::to_string(info.engine) + ".k";
        for (size_t i = 0; i < info.knobs.size(); ++i)
          id += (i ? "," : "") + std::to_string(info.knobs[i].first) + "=" +
                std::to_string(info.knobs[i].second);
        if (!seen.insert(id).second) continue;
        ++offered;
        const bool fp32 = fmt.dtype == DataType::kFloat32;
        if (info.has(CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION) ||
            (fp32 && (info.has(CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS) ||
                      info.has(CUDNN_NUMERICAL_NOTE_TENSOR_CORE)))) {
          ++filtered;  // TF32 / half accumulation: not the precision the tactic promises
          continue;
        }
        if (limit > 0 && kept >= limit) break;
        ++kept;  // (counted before the id filter: find() sees the same `limit` candidates)
        if (wanted && id != *wanted) continue;
        out.push_back(std::make_unique<CudnnConvTactic>(id, spec, fmt, h, g, cfg));
        if (wanted) return;
      }
    }
    *reason += tag + ": " + std::to_string(offered) + " engine configs, " +
               std::to_string(filtered) + " filtered, " + std::to_string(failed) + " unreadable; ";
  }
}

}  // namespace

CudnnConvProvider::CudnnConvProvider() = default;
CudnnConvProvider::~CudnnConvProvider() = default;

std::vector<std::unique_ptr<builder::Tactic>> CudnnConvProvider::candidates(
    const builder::LayerContext& layer, Precision precision) {
  return enumerate(layer, precision, nullptr);
}

std::unique_ptr<builder::Tactic> CudnnConvProvider::restore(const builder::LayerContext& layer,
                                                            Precision precision,
                                                            const std::string& id,
                                                            const std::string& state) {
  if (state.empty() || precision == Precision::kInt8) return find(layer, precision, id);
  ConvSpec spec;
  std::string why;
  std::shared_ptr<Holder> h;
  TensorFormat fmt;
  bool known = false;
  const std::string family =
      id.compare(0, 12, "cudnn.convt.") == 0 ? "cudnn.convt." : "cudnn.conv.";
  for (TensorFormat f : {TensorFormat{DataType::kFloat16, Layout::kNHWC},
                         TensorFormat{DataType::kFloat32, Layout::kNHWC},
                         TensorFormat{DataType::kFloat32, Layout::kNCHW}}) {
    const std::string prefix = family + formatTag(f) + ".";
    if (id.compare(0, prefix.size(), prefix) == 0) fmt = f, known = true;
  }
  if (!known || !parseLayer(layer, &spec, &why) || !(h = handles_.current(&why)) ||
      spec.transpose != (family == "cudnn.convt."))
    return find(layer, precision, id);
  spec.actAfter = id.compare(family.size() + formatTag(fmt).size() + 1, 4, "act.") == 0;
  // An id that does not fit the layer (an activation-after id without an activation, or a
  // fused one whose activation cuDNN cannot fuse): not this plan; find() decides.
  if ((spec.actAfter && spec.act == ref::Activation::kNone) || (!spec.actAfter && !spec.actFusable))
    return find(layer, precision, id);
  Desc plan;
  int64_t workspace = 0;
  Status s;
  {
    std::lock_guard<std::shared_mutex> lock(h->mu);
    s = planFromJson(h->handle, state, &plan, &workspace);
  }
  if (!s.ok()) {  // another cuDNN, a plan it no longer reads: the heuristics find it again
    log(Severity::kVerbose,
        "cudnn: the saved plan of " + id + " did not load (" + s.message() + "); rebuilding it");
    return find(layer, precision, id);
  }
  return std::make_unique<CudnnConvTactic>(id, spec, fmt, h, std::move(plan), workspace, state);
}

std::unique_ptr<builder::Tactic> CudnnConvProvider::find(const builder::LayerContext& layer,
                                                         Precision precision,
                                                         const std::string& id) {
  auto found = enumerate(layer, precision, &id);
  return found.empty() ? nullptr : std::move(found.front());
}

std::vector<std::unique_ptr<builder::Tactic>> CudnnConvProvider::enumerate(
    const builder::LayerContext& layer, Precision precision, const std::string* wanted) {
  std::vector<std::unique_ptr<builder::Tactic>> out;
  ConvSpec spec;
  if (precision == Precision::kInt8) {
    lastReason_ = "int8 precision is not offered by the cudnn conv provider";
    return out;
  }
  if (!parseLayer(layer, &spec, &lastReason_)) return out;

  std::shared_ptr<Holder> h = handles_.current(&lastReason_);
  if (!h) return out;
  std::lock_guard<std::shared_mutex> lock(h->mu);

  std::vector<TensorFormat> formats;
  if (precision == Precision::kFp16) formats.push_back({DataType::kFloat16, Layout::kNHWC});
  formats.push_back({DataType::kFloat32, Layout::kNHWC});
  formats.push_back({DataType::kFloat32, Layout::kNCHW});

  lastReason_.clear();
  // Per format, the activation fused into cuDNN's graph, and a variant whose graph ends
  // before it and whose tactic applies it with our kernel: every engine configuration of it
  // where the activation cannot be fused (no exact pointwise mode), else the first
  // kActAfterConfigs ones, so that a layer whose fused plans all fail to finalize (which only
  // shows when they are prepared: runtime-fusion engines) still has GPU candidates, and the
  // builder times both. Not for ReLU, which cuDNN's precompiled conv-bias-act engines fuse.
  constexpr int kActAfterConfigs = 4;
  for (const TensorFormat& fmt : formats) {
    for (const bool after : {false, true}) {
      if (after && (spec.act == ref::Activation::kNone || spec.act == ref::Activation::kRelu))
        break;
      if (!after && !spec.actFusable) continue;
      ConvSpec vs = spec;
      vs.actAfter = after;
      const int limit = after && spec.actFusable ? kActAfterConfigs : 0;
      enumerateFormat(vs, fmt, h, wanted, limit, &out, &lastReason_);
      if (wanted && !out.empty()) return out;
    }
  }
  return out;
}

}  // namespace edgeinfer::cuda
