// The `cublaslt-i8` tactic provider (cublaslt_int8.h): which layers it runs, the cuBLASLt
// descriptors and heuristics of its two modes, and the tactics that quantize the weights
// (initialize) and launch cuBLASLt and, in the i32 mode, our epilogue (enqueue).
#include "kernels/cuda/cublaslt_int8.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <utility>

#include "kernels/cuda/conv2d_layer.h"
#include "kernels/cuda/cublas_check.h"
#include "kernels/cuda/cublaslt_algo.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/device_weights.h"
#include "kernels/cuda/int8_gemm_layer.h"

namespace edgeinfer::cuda {

using builder::Layout;
using builder::TensorFormat;

namespace {

using detail::allPositive;
using detail::fail;

using Holder = CublasLtHandle;
using GemmLayer = Int8GemmLayer;

constexpr int kRequestedAlgos = 8;
constexpr uint64_t kMaxWorkspace = 32ull << 20;  // cuBLASLt's own workspace, at most
constexpr int64_t kMaxScratch = 32ll << 20;      // the i32 mode's int32 products per chunk
constexpr int64_t kChunkAlign = 64;              // chunk rows: 16-byte aligned row offsets

enum class Mode { kE8, kI32 };

const char* modeName(Mode m) {
  return m == Mode::kE8 ? "e8" : "i32";
}

/// The layer as a GEMM (int8_gemm_layer.h) that cuBLASLt's IMMA kernels take; false with `why`
/// when this provider does not run it.
bool parseLayer(const builder::LayerContext& layer, GemmLayer* g, std::string* why) {
  if (!parseInt8GemmLayer(layer, g, why)) return false;
  if (g->K % 4 != 0 || g->N % 4 != 0)
    return fail(why, "cuBLASLt's IMMA kernels need C_in % 4 == 0 and C_out % 4 == 0 (here " +
                         std::to_string(g->K) + " and " + std::to_string(g->N) + ")");
  return true;
}

/// An activation cuBLASLt's epilogue computes exactly on values scaled by 1 / s_y > 0: none,
/// ReLU, Clip(0, +inf) (ReLU) and Clip(-inf, +inf) (none). `relu` says which.
bool e8Activation(const GemmLayer& g, bool* relu) {
  switch (g.act) {
    case DeviceActivation::kNone:
      *relu = false;
      return true;
    case DeviceActivation::kRelu:
      *relu = true;
      return true;
    case DeviceActivation::kClip:
      if (g.actBeta == INFINITY && (g.actAlpha == 0.f || g.actAlpha == -INFINITY)) {
        *relu = g.actAlpha == 0.f;
        return true;
      }
      return false;
    default:
      return false;
  }
}

/// The matmul and matrix descriptors of one tactic for `rows` rows of the layer.
struct Descs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr, d = nullptr;
  Descs() = default;
  Descs(const Descs&) = delete;
  Descs& operator=(const Descs&) = delete;
  ~Descs() {
    if (op) cublasLtMatmulDescDestroy(op);
    for (cublasLtMatrixLayout_t l : {a, b, c, d})
      if (l) cublasLtMatrixLayoutDestroy(l);
  }
};

/// D[N x rows] (col-major, = row-major [rows][N]) = op(A)[N x K] * B[K x rows]: A the packed
/// weights [N][K] (col-major K x N, transposed), B the activations [rows][K] (col-major K x rows).
Status makeDescs(const GemmLayer& g, Mode mode, int64_t rows, const void* bias, Descs* out) {
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  const int32_t opA = CUBLAS_OP_T, opB = CUBLAS_OP_N;
  if (mode == Mode::kE8) {
    EI_CUBLAS_CHECK(cublasLtMatmulDescCreate(&out->op, CUBLAS_COMPUTE_32I, CUDA_R_32F));
    const int32_t pm = CUBLASLT_POINTER_MODE_ALPHA_DEVICE_VECTOR_BETA_HOST;
    EI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(out->op, CUBLASLT_MATMUL_DESC_POINTER_MODE, &pm,
                                                   sizeof(pm)));
    bool relu = false;
    e8Activation(g, &relu);
    const bool hasBias = g.biasSource != nullptr;
    const uint32_t epilogue = hasBias
                                  ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                  : (relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
    EI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(out->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                   &epilogue, sizeof(epilogue)));
    if (hasBias) {
      // IMMA with an int8 C: the bias has the scale type (float), as its default says; set
      // explicitly so that no version's default changes it.
      const int32_t bt = CUDA_R_32F;
      EI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(out->op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                                                     &bt, sizeof(bt)));
      if (bias)
        EI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(out->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &bias, sizeof(bias)));
    }
  } else {
    EI_CUBLAS_CHECK(cublasLtMatmulDescCreate(&out->op, CUBLAS_COMPUTE_32I, CUDA_R_32I));
  }
  EI_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(out->op, CUBLASLT_MATMUL_DESC_TRANSA, &opA, sizeof(opA)));
  EI_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(out->op, CUBLASLT_MATMUL_DESC_TRANSB, &opB, sizeof(opB)));
  const cudaDataType_t dt = mode == Mode::kE8 ? CUDA_R_8I : CUDA_R_32I;
  EI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&out->a, CUDA_R_8I, u(g.K), u(g.N), g.K));
  EI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&out->b, CUDA_R_8I, u(g.K), u(rows), g.K));
  EI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&out->c, dt, u(g.N), u(rows), g.N));
  EI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&out->d, dt, u(g.N), u(rows), g.N));
  return Status::Ok();
}

/// Rows per cuBLASLt call: all of them, except in the i32 mode when the int32 products of all
/// rows would exceed kMaxScratch.
int64_t chunkRowsFor(const GemmLayer& g, Mode mode) {
  if (mode == Mode::kE8 || g.M * g.N * 4 <= kMaxScratch) return g.M;
  return std::max<int64_t>(kChunkAlign, kMaxScratch / (g.N * 4) / kChunkAlign * kChunkAlign);
}

int64_t alignUp(int64_t v, int64_t a) {
  return (v + a - 1) / a * a;
}

struct AlgoChoice {
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;
  std::string text;  ///< cublasLtAlgoText
};

/// Every heuristic algorithm for the layer in `mode` that cublasLtMatmulAlgoCheck accepts (for
/// the last, shorter chunk too, when there is one).
Status heuristicAlgos(cublasLtHandle_t h, const GemmLayer& g, Mode mode,
                      std::vector<AlgoChoice>* out, int* offered, int* failed) {
  const int64_t chunk = chunkRowsFor(g, mode), rest = g.M % chunk;
  Descs d, dRest;
  EI_RETURN_IF_ERROR(makeDescs(g, mode, chunk, nullptr, &d));
  if (rest) EI_RETURN_IF_ERROR(makeDescs(g, mode, rest, nullptr, &dRest));
  cublasLtMatmulPreference_t pref = nullptr;
  EI_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, cublasStatus_t (*)(cublasLtMatmulPreference_t)>
      prefOwner(pref, cublasLtMatmulPreferenceDestroy);
  const uint64_t ws = kMaxWorkspace;
  EI_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  cublasLtMatmulHeuristicResult_t results[kRequestedAlgos] = {};
  int returned = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h, d.op, d.a, d.b, d.c, d.d, pref,
                                                           kRequestedAlgos, results, &returned);
  if (hs == CUBLAS_STATUS_NOT_SUPPORTED) return Status::Ok();  // no algorithm: none offered
  EI_CUBLAS_CHECK(hs);
  std::set<std::string> seen;
  for (int i = 0; i < std::min(returned, kRequestedAlgos); ++i) {
    const cublasLtMatmulHeuristicResult_t& r = results[i];
    if (r.state != CUBLAS_STATUS_SUCCESS) continue;
    ++*offered;
    cublasLtMatmulHeuristicResult_t check = {}, checkRest = {};
    if (cublasLtMatmulAlgoCheck(h, d.op, d.a, d.b, d.c, d.d, &r.algo, &check) !=
            CUBLAS_STATUS_SUCCESS ||
        (rest && cublasLtMatmulAlgoCheck(h, dRest.op, dRest.a, dRest.b, dRest.c, dRest.d, &r.algo,
                                         &checkRest) != CUBLAS_STATUS_SUCCESS)) {
      ++*failed;
      continue;
    }
    AlgoChoice c;
    c.algo = r.algo;
    c.workspace = std::max({r.workspaceSize, check.workspaceSize, checkRest.workspaceSize});
    c.text = cublasLtAlgoText(r.algo);
    if (!seen.insert(c.text).second) continue;  // the same configuration twice
    out->push_back(std::move(c));
  }
  return Status::Ok();
}

class CublasLtInt8Tactic final : public builder::Tactic {
 public:
  /// yScale / zScale > 0: the output / residual is int8 (the scales the layer had when it was
  /// offered; initialize() takes them from the layer again).
  CublasLtInt8Tactic(const GemmLayer& g, Mode mode, float yScale, float zScale, AlgoChoice choice,
                     std::shared_ptr<Holder> handle)
      : g_(g),
        mode_(mode),
        yInt8_(yScale > 0.f),
        zInt8_(zScale > 0.f),
        choice_(std::move(choice)),
        handle_(std::move(handle)) {
    id_ = std::string("cublaslt-i8.") + modeName(mode) + "." + choice_.text + "." +
          (yInt8_ ? "i8" : "f16") + "." +
          (!g.hasZ  ? "-"
           : zInt8_ ? "i8"
                    : "f16");
    chunkRows_ = chunkRowsFor(g, mode);
  }
  ~CublasLtInt8Tactic() override { release(); }

  std::string id() const override { return id_; }
  TensorFormat inputFormat(size_t index) const override {
    const Layout l = g_.conv ? Layout::kNHWC : Layout::kLinear;
    if (index == 1 || index == 2) return TensorFormat{DataType::kFloat32, Layout::kLinear};
    if (index == 3) return {zInt8_ ? DataType::kInt8 : DataType::kFloat16, l};
    return {DataType::kInt8, l};
  }
  TensorFormat outputFormat(size_t) const override {
    return {yInt8_ ? DataType::kInt8 : DataType::kFloat16,
            g_.conv ? Layout::kNHWC : Layout::kLinear};
  }
  bool consumesInput(size_t index) const override { return index == 1 || index == 2; }
  size_t workspaceBytes() const override {
    if (mode_ == Mode::kE8) return choice_.workspace;
    return static_cast<size_t>(alignUp(static_cast<int64_t>(choice_.workspace), 256) +
                               chunkRows_ * g_.N * 4);
  }

  Status initialize(const builder::LayerContext& layer) override {
    GemmLayer g;
    std::string why;
    if (!parseLayer(layer, &g, &why)) return Status(ErrorCode::kUnsupported, id_ + ": " + why);
    if (g.conv != g_.conv || g.M != g_.M || g.K != g_.K || g.N != g_.N || g.hasZ != g_.hasZ ||
        (g.biasSource != nullptr) != (g_.biasSource != nullptr) || g.act != g_.act)
      return Status(ErrorCode::kUnsupported, id_ + ": the layer changed");
    const float sx = layer.inputScale(0);
    const float sy = yInt8_ ? layer.outputScale(0) : 0.f;
    const float sz = zInt8_ ? layer.inputScale(3) : 0.f;
    if ((yInt8_ && !positiveInt8Scale(sy)) || (zInt8_ && !positiveInt8Scale(sz)))
      return Status(ErrorCode::kInvalidArgument,
                    id_ + ": an int8 tensor of the layer has no scale");

    Int8GemmWeights wts;
    EI_RETURN_IF_ERROR(prepareInt8GemmWeights(g, sx, &wts).withContext(id_ + ": weights"));
    const std::vector<int8_t>& packed = wts.packed;
    std::vector<float>& alpha = wts.alpha;
    std::vector<float>& bias = wts.bias;
    if (mode_ == Mode::kE8) {  // the division by s_y folded into the constants
      for (size_t k = 0; k < alpha.size(); ++k) {
        alpha[k] = alpha[k] / sy;
        bias[k] = bias[k] / sy;
      }
      beta_ = g.hasZ ? sz / sy : 0.f;
    }
    release();
    EI_RETURN_IF_ERROR(uploadWeights(packed.data(), packed.size(), &dW_));
    EI_RETURN_IF_ERROR(uploadWeights(alpha.data(), alpha.size() * sizeof(float), &dAlpha_));
    EI_RETURN_IF_ERROR(uploadWeights(bias.data(), bias.size() * sizeof(float), &dBias_));
    g_ = g;
    epi_ = Int8GemmEpilogue{};
    epi_.K = static_cast<int32_t>(g.N);
    epi_.act = g.act;
    epi_.actAlpha = g.actAlpha;
    epi_.actBeta = g.actBeta;
    epi_.yScale = sy;
    epi_.hasZ = g.hasZ;
    epi_.zScale = sz;
    auto d = std::make_unique<Descs>();
    EI_RETURN_IF_ERROR(
        makeDescs(g_, mode_, chunkRows_, mode_ == Mode::kE8 ? dBias_.get() : nullptr, d.get()));
    descs_ = std::move(d);
    if (const int64_t rest = g_.M % chunkRows_; rest) {
      auto r = std::make_unique<Descs>();
      EI_RETURN_IF_ERROR(makeDescs(g_, mode_, rest, nullptr, r.get()));
      descsRest_ = std::move(r);
    }
    return Status::Ok();
  }

  Status enqueue(const builder::LaunchArgs& args) override {
    if (!descs_ || !dW_)
      return Status(ErrorCode::kInvalidArgument, id_ + ": enqueue before initialize");
    if (args.inputs.empty() || !args.inputs[0] || args.outputs.empty() || !args.outputs[0] ||
        (g_.hasZ && (args.inputs.size() < 4 || !args.inputs[3])))
      return Status(ErrorCode::kInvalidArgument, id_ + ": missing input or output pointer");
    if (workspaceBytes() && (!args.workspace || args.workspaceBytes < workspaceBytes()))
      return Status(ErrorCode::kInvalidArgument,
                    id_ + ": needs a workspace of " + std::to_string(workspaceBytes()) + " bytes");
    auto stream = static_cast<cudaStream_t>(args.stream);
    const auto* x = static_cast<const int8_t*>(args.inputs[0]);
    void* y = args.outputs[0];
    const void* z = g_.hasZ ? args.inputs[3] : nullptr;
    void* cublasWs = choice_.workspace ? args.workspace : nullptr;
    if (mode_ == Mode::kE8) {
      const float beta = g_.hasZ ? beta_ : 0.f;
      EI_CUBLAS_CHECK(cublasLtMatmul(handle_->handle, descs_->op, dAlpha_.get(), dW_.get(),
                                     descs_->a, x, descs_->b, &beta, g_.hasZ ? z : y, descs_->c, y,
                                     descs_->d, &choice_.algo, cublasWs, choice_.workspace,
                                     stream));
      return Status::Ok();
    }
    auto* acc = reinterpret_cast<int32_t*>(static_cast<uint8_t*>(args.workspace) +
                                           alignUp(static_cast<int64_t>(choice_.workspace), 256));
    const int32_t one = 1, zero = 0;
    const size_t ye = yInt8_ ? 1 : 2, ze = zInt8_ ? 1 : 2;
    for (int64_t row0 = 0; row0 < g_.M; row0 += chunkRows_) {
      const int64_t rows = std::min(chunkRows_, g_.M - row0);
      const Descs& d = rows == chunkRows_ ? *descs_ : *descsRest_;
      EI_CUBLAS_CHECK(cublasLtMatmul(handle_->handle, d.op, &one, dW_.get(), d.a, x + row0 * g_.K,
                                     d.b, &zero, acc, d.c, acc, d.d, &choice_.algo, cublasWs,
                                     choice_.workspace, stream));
      Int8GemmEpilogue e = epi_;
      e.rows = rows;
      const size_t off = static_cast<size_t>(row0 * g_.N);
      EI_RETURN_IF_ERROR(launchInt8GemmEpilogue(
          e, acc, static_cast<const float*>(dAlpha_.get()), static_cast<const float*>(dBias_.get()),
          z ? static_cast<const uint8_t*>(z) + off * ze : nullptr,
          static_cast<uint8_t*>(y) + off * ye, stream));
    }
    return Status::Ok();
  }

 private:
  void release() {
    descs_.reset();
    descsRest_.reset();
    dW_.reset();
    dAlpha_.reset();
    dBias_.reset();
  }

  GemmLayer g_;
  Mode mode_;
  bool yInt8_, zInt8_;
  AlgoChoice choice_;
  std::shared_ptr<Holder> handle_;
  std::string id_;
  int64_t chunkRows_ = 0;
  float beta_ = 0.f;
  Int8GemmEpilogue epi_;
  std::unique_ptr<Descs> descs_, descsRest_;   // full chunks, and the last shorter one (i32)
  std::shared_ptr<void> dW_, dAlpha_, dBias_;  // device_weights.h: shared with equal uploads
};

}  // namespace

CublasLtInt8Provider::CublasLtInt8Provider() = default;
CublasLtInt8Provider::~CublasLtInt8Provider() = default;

std::vector<std::unique_ptr<builder::Tactic>> CublasLtInt8Provider::candidates(
    const builder::LayerContext& layer, Precision precision) {
  std::vector<std::unique_ptr<builder::Tactic>> out;
  if (precision != Precision::kInt8) {
    lastReason_ = "the cublaslt-i8 provider offers INT8 tactics only";
    return out;
  }
  const char* env = std::getenv("EDGEINFER_DISABLE_CUBLASLT_INT8");
  const std::string disable = env ? env : "";
  if (disable == "1") {
    lastReason_ = "switched off by EDGEINFER_DISABLE_CUBLASLT_INT8=1";
    return out;
  }
  GemmLayer g;
  if (!parseLayer(layer, &g, &lastReason_)) return out;

  const std::shared_ptr<Holder> h = handles_.current(&lastReason_);
  if (!h) return out;

  const float sy = layer.outputScale(0), sz = g.hasZ ? layer.inputScale(3) : 0.f;
  std::vector<float> yScales{0.f}, zScales{0.f};
  if (positiveInt8Scale(sy)) yScales.push_back(sy);
  if (positiveInt8Scale(sz)) zScales.push_back(sz);
  bool relu = false;
  std::string e8Why;
  if (disable == "e8")
    e8Why = "switched off by EDGEINFER_DISABLE_CUBLASLT_INT8=e8";
  else if (layer.int8BitExact)
    e8Why = "a bit-exact build (cuBLASLt's float epilogue is within one step, not exact)";
  else if (!positiveInt8Scale(sy))
    e8Why = "the output has no int8 scale";
  else if (g.hasZ && !positiveInt8Scale(sz))
    e8Why = "the residual has no int8 scale";
  else if (!e8Activation(g, &relu))
    e8Why = "the activation has no exact cuBLASLt epilogue";

  lastReason_.clear();
  for (Mode mode : {Mode::kE8, Mode::kI32}) {
    const std::string tag = modeName(mode);
    if (mode == Mode::kE8 && !e8Why.empty()) {
      lastReason_ += tag + ": " + e8Why + "; ";
      continue;
    }
    std::vector<AlgoChoice> algos;
    int offered = 0, failed = 0;
    const Status s = heuristicAlgos(h->handle, g, mode, &algos, &offered, &failed);
    if (!s.ok()) {
      lastReason_ += tag + ": no heuristic (" + s.message() + "); ";
      continue;
    }
    lastReason_ += tag + ": " + std::to_string(offered) + " algorithms, " + std::to_string(failed) +
                   " failed the check; ";
    for (const AlgoChoice& a : algos) {
      if (mode == Mode::kE8) {
        out.push_back(std::make_unique<CublasLtInt8Tactic>(g, mode, sy, g.hasZ ? sz : 0.f, a, h));
        continue;
      }
      for (float ys : yScales)
        for (float zs : zScales)
          out.push_back(std::make_unique<CublasLtInt8Tactic>(g, mode, ys, zs, a, h));
    }
  }
  return out;
}

}  // namespace edgeinfer::cuda
