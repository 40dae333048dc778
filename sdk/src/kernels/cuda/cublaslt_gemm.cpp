// cuBLASLt Gemm / MatMul with bias and activation epilogues: see cublaslt_gemm.h.
#include "kernels/cuda/cublaslt_gemm.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <utility>

#include "core/half.h"
#include "kernels/cuda/cublas_check.h"
#include "kernels/cuda/cublaslt_algo.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"
#include "kernels/cuda/device_weights.h"
#include "kernels/ref/activation.h"

namespace edgeinfer::cuda {

using builder::Layout;
using builder::TensorFormat;

namespace {

using detail::allPositive;
using detail::fail;

using Holder = CublasLtHandle;

constexpr int kRequestedAlgos = 16;
constexpr uint64_t kMaxWorkspace = 32ull << 20;  // 32 MiB

/// How the third input (Gemm's C, FusedMatMul's bias) enters the matmul.
enum class CMode {
  kNone,
  kBias,           // constant, the same for every row: epilogue bias vector (= beta * C)
  kConstMatrix,    // constant, broadcast once to [M, N]: matmul C with beta
  kRuntimeMatrix,  // runtime input of shape [M, N]: matmul C with beta
};

/// Everything that decides the matmul of one layer: Y[rows, N] = act(alpha * A'[rows, K] W + ...)
struct GemmSpec {
  int64_t rows = 0, K = 0, N = 0;
  bool transA = false, transB = false;  // Gemm's attributes (B's only matters in initialize())
  float alpha = 1.f, beta = 0.f;
  CMode cMode = CMode::kNone;
  bool relu = false;
};

/// The fused activation as an epilogue: Relu, or Clip(0, +inf) (also ReLU exactly), or the
/// identity Clip(-inf, +inf). False for every activation no cuBLASLt epilogue computes exactly.
bool mapActivation(const graph::Node& node, bool* relu, std::string* why) {
  const std::string name = node.attrs.getString("activation", "");
  ref::Activation act;
  if (!ref::parseActivation(name, &act)) return fail(why, "unknown activation '" + name + "'");
  *relu = false;
  switch (act) {
    case ref::Activation::kNone:
      return true;
    case ref::Activation::kRelu:
      *relu = true;
      return true;
    case ref::Activation::kClip: {  // the reference's defaults: -inf, +inf
      const float lo = node.attrs.getFloat("activation_alpha", -INFINITY);
      const float hi = node.attrs.getFloat("activation_beta", INFINITY);
      if (hi == INFINITY && (lo == 0.f || lo == -INFINITY)) {
        *relu = lo == 0.f;
        return true;
      }
      break;
    }
    default:
      break;
  }
  return fail(why, "activation '" + name + "' has no exact cuBLASLt epilogue");
}

/// C's broadcast dims against [M, N] (unidirectional, right-aligned); false if incompatible.
bool cDims(const Shape& c, int64_t M, int64_t N, int64_t* cm, int64_t* cn) {
  if (c.rank() > 2) return false;
  *cm = c.rank() == 2 ? c[0] : 1;
  *cn = c.rank() >= 1 ? c[c.rank() - 1] : 1;
  return (*cm == 1 || *cm == M) && (*cn == 1 || *cn == N);
}

/// Reads the layer into `spec`; false (with `why`) when this provider cannot run it.
bool parseLayer(const builder::LayerContext& layer, GemmSpec* spec, std::string* why) {
  const graph::Node* node = layer.node;
  if (!node || !layer.graph) return fail(why, "no node");
  const bool onnx = node->domain.empty();
  const bool ours = node->domain == graph::kEdgeInferDomain;
  const bool gemm = (onnx && node->opType == "Gemm") || (ours && node->opType == "FusedGemm");
  const bool matmul = (onnx && node->opType == "MatMul") || (ours && node->opType == "FusedMatMul");
  const bool fused = ours && (gemm || matmul);
  if (!gemm && !matmul) return fail(why, "not a Gemm / MatMul / FusedGemm / FusedMatMul node");
  if (layer.inputShapes.size() < 2 || layer.inputTypes.size() != layer.inputShapes.size() ||
      layer.outputShapes.size() != 1 || layer.outputTypes.size() != 1)
    return fail(why, "unexpected input/output count");
  const Shape& as = layer.inputShapes[0];
  const Shape& ys = layer.outputShapes[0];
  if (!allPositive(as) || !allPositive(ys) || !allPositive(layer.inputShapes[1]) ||
      (layer.hasInput(2) && layer.inputShapes.size() > 2 && !allPositive(layer.inputShapes[2])))
    return fail(why, "shapes must be static and non-empty");
  if (!detail::isFloatStorage(layer.inputTypes[0]) || !detail::isFloatStorage(layer.outputTypes[0]))
    return fail(why, "A and Y must be float32 or float16");
  const Tensor* b = layer.constantInput(1);
  if (!b) return fail(why, "B is not a constant (the weights are converted once)");
  if (!detail::isFloatStorage(b->dtype()))
    return fail(why, "B must be a float32 or float16 constant");
  const Shape& bs = b->shape();
  if (!allPositive(bs)) return fail(why, "B must have a static, non-empty shape");

  if (gemm) {
    if (as.rank() != 2 || bs.rank() != 2 || ys.rank() != 2)
      return fail(why, "Gemm operands must be 2-D");
    spec->transA = node->attrs.getInt("transA", 0) == 1;
    spec->transB = node->attrs.getInt("transB", 0) == 1;
    spec->alpha = node->attrs.getFloat("alpha", 1.f);
    spec->beta = node->attrs.getFloat("beta", 1.f);
    spec->rows = spec->transA ? as[1] : as[0];
    spec->K = spec->transA ? as[0] : as[1];
    spec->N = spec->transB ? bs[0] : bs[1];
    if ((spec->transB ? bs[1] : bs[0]) != spec->K) return fail(why, "inner dimensions differ");
    if (ys[0] != spec->rows || ys[1] != spec->N)
      return fail(why, "output shape disagrees with A and B");
  } else {
    if (bs.rank() < 2)
      return fail(why, "1-D B (matrix-vector product) is not offered; a 1-D A is supported");
    for (size_t i = 0; i + 2 < bs.rank(); ++i)
      if (bs[i] != 1) return fail(why, "B has a batch; only a 2-D constant B is offered");
    spec->K = as[as.rank() - 1];
    spec->N = bs[bs.rank() - 1];
    if (bs[bs.rank() - 2] != spec->K) return fail(why, "inner dimensions differ");
    spec->rows = as.numel() / spec->K;  // A's leading dims (or a 1-D A's M = 1) fold into rows
    if (ys.rank() == 0 || ys[ys.rank() - 1] != spec->N || ys.numel() != spec->rows * spec->N)
      return fail(why, "output shape disagrees with A and B");
  }

  if (layer.hasInput(2)) {
    if (!gemm && !fused) return fail(why, "MatMul has no third input");
    const Tensor* c = layer.constantInput(2);
    const Shape cs = c ? c->shape() : layer.inputShapes[2];
    const DataType ct = c ? c->dtype() : layer.inputTypes[2];
    if (!detail::isFloatStorage(ct)) return fail(why, "C / bias must be float32 or float16");
    if (gemm) {
      int64_t cm = 0, cn = 0;
      if (!cDims(cs, spec->rows, spec->N, &cm, &cn))
        return fail(why, "C does not broadcast to [M, N]");
      if (c) {
        spec->cMode = cm == 1 ? CMode::kBias : CMode::kConstMatrix;
      } else {
        if (cm != spec->rows || cn != spec->N)
          return fail(why, "a runtime C must have the output's shape [M, N]");
        spec->cMode = CMode::kRuntimeMatrix;
      }
    } else {
      if (!c) return fail(why, "the bias is not a constant");
      if (c->numel() != spec->N) return fail(why, "the bias must have N elements");
      spec->cMode = CMode::kBias;
      spec->beta = 1.f;
    }
  }
  if (fused && !mapActivation(*node, &spec->relu, why)) return false;
  return true;
}

cudaDataType_t cudaType(DataType t) {
  return t == DataType::kFloat16 ? CUDA_R_16F : CUDA_R_32F;
}

/// The matmul and matrix descriptors of one tactic (column-major view, see the header).
struct Descs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t w = nullptr, a = nullptr, c = nullptr, d = nullptr;
  Descs() = default;
  Descs(const Descs&) = delete;
  Descs& operator=(const Descs&) = delete;
  ~Descs() {
    if (op) cublasLtMatmulDescDestroy(op);
    for (cublasLtMatrixLayout_t l : {w, a, c, d})
      if (l) cublasLtMatrixLayoutDestroy(l);
  }
};

Status makeDescs(const GemmSpec& s, DataType dt, const void* bias, Descs* out) {
  const cudaDataType_t type = cudaType(dt);
  EI_CUBLAS_CHECK(cublasLtMatmulDescCreate(&out->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const int32_t opW = CUBLAS_OP_T;
  const int32_t opA = s.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  EI_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(out->op, CUBLASLT_MATMUL_DESC_TRANSA, &opW, sizeof(opW)));
  EI_CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(out->op, CUBLASLT_MATMUL_DESC_TRANSB, &opA, sizeof(opA)));
  const bool hasBias = s.cMode == CMode::kBias;
  const uint32_t epilogue = hasBias
                                ? (s.relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                                : (s.relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
  EI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(out->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                 sizeof(epilogue)));
  if (hasBias && bias) {
    EI_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(out->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                   &bias, sizeof(bias)));
  }
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  // W: K-major [N, K] = column-major K x N, ld K, used transposed.
  EI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&out->w, type, u(s.K), u(s.N), s.K));
  // A: row-major [rows, K] = column-major K x rows (ld K); transA: row-major [K, rows].
  if (s.transA)
    EI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&out->a, type, u(s.rows), u(s.K), s.rows));
  else
    EI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&out->a, type, u(s.K), u(s.rows), s.K));
  // C, D: row-major [rows, N] = column-major N x rows, ld N.
  EI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&out->c, type, u(s.N), u(s.rows), s.N));
  EI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&out->d, type, u(s.N), u(s.rows), s.N));
  return Status::Ok();
}

std::string algoId(DataType dt, const cublasLtMatmulAlgo_t& algo) {
  return std::string("cublaslt.") + (dt == DataType::kFloat16 ? "fp16" : "fp32") + "." +
         cublasLtAlgoText(algo);
}

struct AlgoChoice {
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;
  std::string id;
};

/// Every heuristic algorithm for `s` in `dt` that passes cublasLtMatmulAlgoCheck.
Status heuristicAlgos(cublasLtHandle_t h, const GemmSpec& s, DataType dt,
                      std::vector<AlgoChoice>* out, int* offered, int* failed) {
  Descs d;
  EI_RETURN_IF_ERROR(makeDescs(s, dt, nullptr, &d));
  cublasLtMatmulPreference_t pref = nullptr;
  EI_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, cublasStatus_t (*)(cublasLtMatmulPreference_t)>
      prefOwner(pref, cublasLtMatmulPreferenceDestroy);
  const uint64_t ws = kMaxWorkspace;
  EI_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  cublasLtMatmulHeuristicResult_t results[kRequestedAlgos] = {};
  int returned = 0;
  EI_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(h, d.op, d.w, d.a, d.c, d.d, pref, kRequestedAlgos,
                                                 results, &returned));
  std::set<std::string> seen;
  for (int i = 0; i < std::min(returned, kRequestedAlgos); ++i) {
    const cublasLtMatmulHeuristicResult_t& r = results[i];
    if (r.state != CUBLAS_STATUS_SUCCESS) continue;
    ++*offered;
    cublasLtMatmulHeuristicResult_t check = {};
    if (cublasLtMatmulAlgoCheck(h, d.op, d.w, d.a, d.c, d.d, &r.algo, &check) !=
        CUBLAS_STATUS_SUCCESS) {
      ++*failed;
      continue;
    }
    AlgoChoice c;
    c.algo = r.algo;
    c.workspace = std::max(r.workspaceSize, check.workspaceSize);
    c.id = algoId(dt, r.algo);
    if (!seen.insert(c.id).second) continue;  // the same configuration twice
    out->push_back(std::move(c));
  }
  return Status::Ok();
}

class CublasLtGemmTactic : public builder::Tactic {
 public:
  CublasLtGemmTactic(const GemmSpec& spec, DataType dtype, AlgoChoice choice,
                     std::shared_ptr<Holder> handle)
      : spec_(spec), dtype_(dtype), choice_(std::move(choice)), handle_(std::move(handle)) {}
  ~CublasLtGemmTactic() override { descs_.reset(); }

  std::string id() const override { return choice_.id; }
  TensorFormat inputFormat(size_t index) const override {
    if (index == 1 || (index == 2 && spec_.cMode != CMode::kRuntimeMatrix))
      return TensorFormat{DataType::kFloat32, Layout::kLinear};
    return TensorFormat{dtype_, Layout::kLinear};
  }
  TensorFormat outputFormat(size_t) const override { return TensorFormat{dtype_, Layout::kLinear}; }
  size_t workspaceBytes() const override { return choice_.workspace; }
  bool consumesInput(size_t index) const override {
    return index == 1 || (index == 2 && spec_.cMode != CMode::kRuntimeMatrix);
  }

  Status initialize(const builder::LayerContext& layer) override {
    descs_.reset();
    const Tensor* b = layer.constantInput(1);
    if (!b || b->numel() != spec_.K * spec_.N)
      return Status(ErrorCode::kInvalidArgument, id() + ": B missing or of another shape");
    const size_t es = dataTypeSize(dtype_);
    // B -> K-major W[N][K]: B is [K, N] row-major, or [N, K] with transB.
    std::vector<uint8_t> host(static_cast<size_t>(b->numel()) * es);
    for (int64_t n = 0; n < spec_.N; ++n)
      for (int64_t k = 0; k < spec_.K; ++k)
        store(host.data(), n * spec_.K + k,
              b->getAsDouble(spec_.transB ? n * spec_.K + k : k * spec_.N + n));
    EI_RETURN_IF_ERROR(uploadWeights(host.data(), host.size(), &dW_));
    if (spec_.cMode == CMode::kBias || spec_.cMode == CMode::kConstMatrix) {
      const Tensor* c = layer.constantInput(2);
      int64_t cm = 1, cn = 1;
      if (!c || !cDims(c->shape(), spec_.rows, spec_.N, &cm, &cn) ||
          (spec_.cMode == CMode::kBias && cm != 1))
        return Status(ErrorCode::kInvalidArgument, id() + ": C / bias missing or of another shape");
      const int64_t rows = spec_.cMode == CMode::kBias ? 1 : spec_.rows;
      std::vector<uint8_t> hc(static_cast<size_t>(rows * spec_.N) * es);
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < spec_.N; ++j) {
          const double v = c->getAsDouble((cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j));
          // Gemm's beta folds into the bias, in float as the reference computes beta * C.
          store(hc.data(), i * spec_.N + j,
                spec_.cMode == CMode::kBias ? spec_.beta * static_cast<float>(v) : v);
        }
      EI_RETURN_IF_ERROR(
          uploadWeights(hc.data(), hc.size(), spec_.cMode == CMode::kBias ? &dBias_ : &dC_));
    }
    auto d = std::make_unique<Descs>();
    EI_RETURN_IF_ERROR(makeDescs(spec_, dtype_, dBias_.get(), d.get()));
    descs_ = std::move(d);
    return Status::Ok();
  }

  Status enqueue(const builder::LaunchArgs& args) override {
    if (!descs_ || !dW_)
      return Status(ErrorCode::kInvalidArgument, id() + ": enqueue before initialize");
    const bool runtimeC = spec_.cMode == CMode::kRuntimeMatrix;
    if (args.inputs.empty() || !args.inputs[0] || args.outputs.empty() || !args.outputs[0] ||
        (runtimeC && (args.inputs.size() < 3 || !args.inputs[2])))
      return Status(ErrorCode::kInvalidArgument, id() + ": missing input or output pointer");
    if (choice_.workspace && (!args.workspace || args.workspaceBytes < choice_.workspace))
      return Status(ErrorCode::kInvalidArgument, id() + ": needs a workspace of " +
                                                     std::to_string(choice_.workspace) + " bytes");
    void* y = args.outputs[0];
    const void* c = y;  // not read when beta == 0
    float beta = 0.f;
    if (runtimeC) {
      c = args.inputs[2];
      beta = spec_.beta;
    } else if (spec_.cMode == CMode::kConstMatrix) {
      c = dC_.get();
      beta = spec_.beta;
    }
    const float alpha = spec_.alpha;
    EI_CUBLAS_CHECK(cublasLtMatmul(handle_->handle, descs_->op, &alpha, dW_.get(), descs_->w,
                                   args.inputs[0], descs_->a, &beta, c, descs_->c, y, descs_->d,
                                   &choice_.algo, choice_.workspace ? args.workspace : nullptr,
                                   choice_.workspace, static_cast<cudaStream_t>(args.stream)));
    return Status::Ok();
  }

 private:
  void store(uint8_t* base, int64_t j, double v) const {
    if (dtype_ == DataType::kFloat16)
      reinterpret_cast<uint16_t*>(base)[j] = floatToHalf(static_cast<float>(v));
    else
      reinterpret_cast<float*>(base)[j] = static_cast<float>(v);
  }

  GemmSpec spec_;
  DataType dtype_;
  AlgoChoice choice_;
  std::shared_ptr<Holder> handle_;
  std::unique_ptr<Descs> descs_;  // created in initialize(), with the tactic's bias pointer
  std::shared_ptr<void> dW_, dBias_, dC_;  // device_weights.h: shared with equal uploads
};

}  // namespace

CublasLtGemmProvider::CublasLtGemmProvider() = default;
CublasLtGemmProvider::~CublasLtGemmProvider() = default;

std::vector<std::unique_ptr<builder::Tactic>> CublasLtGemmProvider::candidates(
    const builder::LayerContext& layer, Precision precision) {
  std::vector<std::unique_ptr<builder::Tactic>> out;
  GemmSpec spec;
  if (precision == Precision::kInt8) {
    lastReason_ = "int8 precision is not offered by the cublaslt provider";
    return out;
  }
  if (!parseLayer(layer, &spec, &lastReason_)) return out;

  const std::shared_ptr<Holder> h = handles_.current(&lastReason_);
  if (!h) return out;

  std::vector<DataType> types;
  if (precision == Precision::kFp16) types.push_back(DataType::kFloat16);
  types.push_back(DataType::kFloat32);
  lastReason_.clear();
  for (DataType dt : types) {
    const char* tag = dt == DataType::kFloat16 ? "fp16" : "fp32";
    std::vector<AlgoChoice> algos;
    int offered = 0, failed = 0;
    const Status s = heuristicAlgos(h->handle, spec, dt, &algos, &offered, &failed);
    if (!s.ok()) {
      lastReason_ += std::string(tag) + ": no heuristic (" + s.message() + "); ";
      continue;
    }
    lastReason_ += std::string(tag) + ": " + std::to_string(offered) + " algorithms, " +
                   std::to_string(failed) + " failed the check; ";
    for (AlgoChoice& a : algos)
      out.push_back(std::make_unique<CublasLtGemmTactic>(spec, dt, std::move(a), h));
  }
  return out;
}

}  // namespace edgeinfer::cuda
