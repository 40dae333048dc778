// MatMul with a runtime B through cuBLASLt strided batches: see batched_matmul.h.
#include "kernels/cuda/batched_matmul.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <set>
#include <utility>

#include "kernels/cuda/cublas_check.h"
#include "kernels/cuda/cublaslt_algo.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"

namespace edgeinfer::cuda {

using builder::Layout;
using builder::TensorFormat;

namespace {

using detail::allPositive;
using detail::fail;

using Holder = CublasLtHandle;

constexpr int kRequestedAlgos = 8;
constexpr uint64_t kMaxWorkspace = 32ull << 20;  // 32 MiB
constexpr size_t kMaxBatchDims = 8;

/// The matmuls of one layer: `outer` groups (host loop) of `batch` strided matmuls.
struct BmmSpec {
  int64_t M = 0, K = 0, N = 0;
  int64_t batch = 1;                 // cuBLASLt batch count
  int64_t strideA = 0, strideB = 0;  // batch strides in elements (0: broadcast)
  // Outer batch dims (outermost first) with the element offsets of each operand per step.
  std::vector<int64_t> outerDims, outerA, outerB, outerY;
};

bool parseLayer(const builder::LayerContext& layer, BmmSpec* spec, std::string* why) {
  const graph::Node* node = layer.node;
  if (!node || !layer.graph) return fail(why, "no node");
  if (!node->domain.empty() || node->opType != "MatMul") return fail(why, "not a MatMul node");
  if (layer.inputShapes.size() != 2 || !layer.hasInput(0) || !layer.hasInput(1) ||
      layer.outputShapes.size() != 1 || layer.inputTypes.size() != 2 ||
      layer.outputTypes.size() != 1)
    return fail(why, "MatMul needs two inputs and one output");
  if (layer.constantInput(1)) return fail(why, "B is a constant (the cublaslt provider's)");
  const DataType t = layer.inputTypes[0];
  if (!detail::isFloatStorage(t) || layer.inputTypes[1] != t || layer.outputTypes[0] != t)
    return fail(why, "A, B and Y must be float32 or float16 of one type");
  const Shape& a = layer.inputShapes[0];
  const Shape& b = layer.inputShapes[1];
  const Shape& y = layer.outputShapes[0];
  if (a.rank() == 0 || b.rank() == 0 || !allPositive(a) || !allPositive(b) || !allPositive(y))
    return fail(why, "shapes must be static, non-empty and at least 1-D");
  // 1-D operands: A [K] -> [1, K], B [K] -> [K, 1] (the output drops the dim; same memory).
  std::vector<int64_t> ad = a.dims(), bd = b.dims();
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  spec->M = ad[ad.size() - 2];
  spec->K = ad[ad.size() - 1];
  spec->N = bd[bd.size() - 1];
  if (bd[bd.size() - 2] != spec->K) return fail(why, "A and B disagree on K");
  const std::vector<int64_t> aBatch(ad.begin(), ad.end() - 2), bBatch(bd.begin(), bd.end() - 2);
  const size_t rank = std::max(aBatch.size(), bBatch.size());
  if (rank > kMaxBatchDims) return fail(why, "more than 8 batch dims");
  // Broadcast batch dims with each operand's element stride (0 where broadcast).
  std::vector<int64_t> dims(rank), sa(rank, 0), sb(rank, 0);
  int64_t accA = spec->M * spec->K, accB = spec->K * spec->N;
  for (size_t i = rank; i-- > 0;) {
    const size_t fromEnd = rank - 1 - i;
    const int64_t da = fromEnd < aBatch.size() ? aBatch[aBatch.size() - 1 - fromEnd] : 1;
    const int64_t db = fromEnd < bBatch.size() ? bBatch[bBatch.size() - 1 - fromEnd] : 1;
    if (da != db && da != 1 && db != 1) return fail(why, "batch dims do not broadcast");
    dims[i] = std::max(da, db);
    sa[i] = da == 1 ? 0 : accA;
    sb[i] = db == 1 ? 0 : accB;
    accA *= da;
    accB *= db;
  }
  int64_t total = spec->M * spec->N;
  for (int64_t d : dims) total *= d;
  if (y.numel() != total) return fail(why, "the output does not match A @ B");
  // Merge dims (dropping size 1) from the innermost while both operands step uniformly (a
  // broadcast operand, stride 0, stays broadcast: 0 * size == 0).
  std::vector<int64_t> md, ma, mb;  // innermost first
  for (size_t i = rank; i-- > 0;) {
    if (dims[i] == 1) continue;
    if (!md.empty() && ma.back() * md.back() == sa[i] && mb.back() * md.back() == sb[i]) {
      md.back() *= dims[i];
      continue;
    }
    md.push_back(dims[i]);
    ma.push_back(sa[i]);
    mb.push_back(sb[i]);
  }
  spec->batch = 1;
  spec->strideA = spec->strideB = 0;
  spec->outerDims.clear();
  spec->outerA.clear();
  spec->outerB.clear();
  spec->outerY.clear();
  if (!md.empty()) {
    spec->batch = md[0];
    spec->strideA = ma[0];
    spec->strideB = mb[0];
    int64_t yStride = spec->M * spec->N * md[0];
    for (size_t g = 1; g < md.size(); ++g) {  // outer groups, innermost first
      spec->outerDims.insert(spec->outerDims.begin(), md[g]);
      spec->outerA.insert(spec->outerA.begin(), ma[g]);
      spec->outerB.insert(spec->outerB.begin(), mb[g]);
      spec->outerY.insert(spec->outerY.begin(), yStride);
      yStride *= md[g];
    }
  }
  if (spec->batch > INT32_MAX) return fail(why, "batch too large");
  // B shared by the whole batch, A contiguous: one GEMM with batch * M rows.
  if (spec->outerDims.empty() && spec->batch > 1 && spec->strideB == 0 &&
      spec->strideA == spec->M * spec->K) {
    spec->M *= spec->batch;
    spec->batch = 1;
    spec->strideA = 0;
  }
  return true;
}

cudaDataType_t cudaType(DataType t) {
  return t == DataType::kFloat16 ? CUDA_R_16F : CUDA_R_32F;
}

struct Descs {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t b = nullptr, a = nullptr, d = nullptr;
  Descs() = default;
  Descs(const Descs&) = delete;
  Descs& operator=(const Descs&) = delete;
  ~Descs() {
    if (op) cublasLtMatmulDescDestroy(op);
    for (cublasLtMatrixLayout_t l : {b, a, d})
      if (l) cublasLtMatrixLayoutDestroy(l);
  }
};

Status setBatch(cublasLtMatrixLayout_t l, int64_t count, int64_t stride) {
  const int32_t c = static_cast<int32_t>(count);
  EI_CUBLAS_CHECK(
      cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &c, sizeof(c)));
  EI_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                   &stride, sizeof(stride)));
  return Status::Ok();
}

/// Column-major view: D (N x M, ld N) = B (N x K, ld N) * A (K x M, ld K), batched.
Status makeDescs(const BmmSpec& s, DataType dt, Descs* out) {
  const cudaDataType_t type = cudaType(dt);
  EI_CUBLAS_CHECK(cublasLtMatmulDescCreate(&out->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const auto u = [](int64_t v) { return static_cast<uint64_t>(v); };
  EI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&out->b, type, u(s.N), u(s.K), s.N));
  EI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&out->a, type, u(s.K), u(s.M), s.K));
  EI_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&out->d, type, u(s.N), u(s.M), s.N));
  if (s.batch > 1) {
    EI_RETURN_IF_ERROR(setBatch(out->b, s.batch, s.strideB));
    EI_RETURN_IF_ERROR(setBatch(out->a, s.batch, s.strideA));
    EI_RETURN_IF_ERROR(setBatch(out->d, s.batch, s.M * s.N));
  }
  return Status::Ok();
}

std::string algoId(DataType dt, const cublasLtMatmulAlgo_t& algo) {
  const auto n = [](auto v) { return std::to_string(static_cast<long long>(v)); };
  return std::string("cublas.bmm.") + (dt == DataType::kFloat16 ? "fp16" : "fp32") + ".a" +
         n(cublasLtAlgoAttr<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID)) + ".t" +
         n(cublasLtAlgoAttr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID)) + ".s" +
         n(cublasLtAlgoAttr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID)) + ".sk" +
         n(cublasLtAlgoAttr<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) + ".r" +
         n(cublasLtAlgoAttr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME)) + ".sw" +
         n(cublasLtAlgoAttr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING)) + ".c" +
         n(cublasLtAlgoAttr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION));
}

struct AlgoChoice {
  cublasLtMatmulAlgo_t algo;
  size_t workspace = 0;
  std::string id;
};

Status heuristicAlgos(cublasLtHandle_t h, const BmmSpec& s, DataType dt,
                      std::vector<AlgoChoice>* out) {
  Descs d;
  EI_RETURN_IF_ERROR(makeDescs(s, dt, &d));
  cublasLtMatmulPreference_t pref = nullptr;
  EI_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, cublasStatus_t (*)(cublasLtMatmulPreference_t)>
      prefOwner(pref, cublasLtMatmulPreferenceDestroy);
  const uint64_t ws = kMaxWorkspace;
  EI_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
  cublasLtMatmulHeuristicResult_t results[kRequestedAlgos] = {};
  int returned = 0;
  EI_CUBLAS_CHECK(cublasLtMatmulAlgoGetHeuristic(h, d.op, d.b, d.a, d.d, d.d, pref, kRequestedAlgos,
                                                 results, &returned));
  std::set<std::string> seen;
  for (int i = 0; i < std::min(returned, kRequestedAlgos); ++i) {
    const cublasLtMatmulHeuristicResult_t& r = results[i];
    if (r.state != CUBLAS_STATUS_SUCCESS) continue;
    cublasLtMatmulHeuristicResult_t check = {};
    if (cublasLtMatmulAlgoCheck(h, d.op, d.b, d.a, d.d, d.d, &r.algo, &check) !=
        CUBLAS_STATUS_SUCCESS)
      continue;
    AlgoChoice c;
    c.algo = r.algo;
    c.workspace = std::max(r.workspaceSize, check.workspaceSize);
    c.id = algoId(dt, r.algo);
    if (!seen.insert(c.id).second) continue;
    out->push_back(std::move(c));
  }
  return Status::Ok();
}

class CublasBatchedMatMulTactic : public builder::Tactic {
 public:
  CublasBatchedMatMulTactic(BmmSpec spec, DataType dtype, AlgoChoice choice,
                            std::shared_ptr<Holder> handle)
      : spec_(std::move(spec)),
        dtype_(dtype),
        choice_(std::move(choice)),
        handle_(std::move(handle)) {}

  std::string id() const override { return choice_.id; }
  TensorFormat inputFormat(size_t) const override { return {dtype_, Layout::kLinear}; }
  TensorFormat outputFormat(size_t) const override { return {dtype_, Layout::kLinear}; }
  size_t workspaceBytes() const override { return choice_.workspace; }

  Status initialize(const builder::LayerContext& layer) override {
    descs_.reset();
    BmmSpec s;
    std::string why;
    if (!parseLayer(layer, &s, &why)) return Status(ErrorCode::kUnsupported, id() + ": " + why);
    spec_ = std::move(s);
    auto d = std::make_unique<Descs>();
    EI_RETURN_IF_ERROR(makeDescs(spec_, dtype_, d.get()));
    descs_ = std::move(d);
    return Status::Ok();
  }

  Status enqueue(const builder::LaunchArgs& args) override {
    if (!descs_) return Status(ErrorCode::kInvalidArgument, id() + ": enqueue before initialize");
    if (args.inputs.size() < 2 || !args.inputs[0] || !args.inputs[1] || args.outputs.empty() ||
        !args.outputs[0])
      return Status(ErrorCode::kInvalidArgument, id() + ": missing input or output pointer");
    if (choice_.workspace && (!args.workspace || args.workspaceBytes < choice_.workspace))
      return Status(ErrorCode::kInvalidArgument, id() + ": needs a workspace of " +
                                                     std::to_string(choice_.workspace) + " bytes");
    const size_t es = dataTypeSize(dtype_);
    const auto* a = static_cast<const uint8_t*>(args.inputs[0]);
    const auto* b = static_cast<const uint8_t*>(args.inputs[1]);
    auto* y = static_cast<uint8_t*>(args.outputs[0]);
    const float alpha = 1.f, beta = 0.f;
    // Odometer over the outer batch groups (none: one call).
    std::vector<int64_t> coord(spec_.outerDims.size(), 0);
    while (true) {
      int64_t offA = 0, offB = 0, offY = 0;
      for (size_t g = 0; g < coord.size(); ++g) {
        offA += coord[g] * spec_.outerA[g];
        offB += coord[g] * spec_.outerB[g];
        offY += coord[g] * spec_.outerY[g];
      }
      uint8_t* yp = y + static_cast<size_t>(offY) * es;
      EI_CUBLAS_CHECK(cublasLtMatmul(
          handle_->handle, descs_->op, &alpha, b + static_cast<size_t>(offB) * es, descs_->b,
          a + static_cast<size_t>(offA) * es, descs_->a, &beta, yp, descs_->d, yp, descs_->d,
          &choice_.algo, choice_.workspace ? args.workspace : nullptr, choice_.workspace,
          static_cast<cudaStream_t>(args.stream)));
      size_t g = coord.size();
      while (g-- > 0) {
        if (++coord[g] < spec_.outerDims[g]) break;
        coord[g] = 0;
      }
      if (g == static_cast<size_t>(-1)) break;
    }
    return Status::Ok();
  }

 private:
  BmmSpec spec_;
  DataType dtype_;
  AlgoChoice choice_;
  std::shared_ptr<Holder> handle_;
  std::unique_ptr<Descs> descs_;
};

}  // namespace

CublasBatchedMatMulProvider::CublasBatchedMatMulProvider() = default;
CublasBatchedMatMulProvider::~CublasBatchedMatMulProvider() = default;

std::vector<std::unique_ptr<builder::Tactic>> CublasBatchedMatMulProvider::candidates(
    const builder::LayerContext& layer, Precision precision) {
  std::vector<std::unique_ptr<builder::Tactic>> out;
  BmmSpec spec;
  if (precision == Precision::kInt8) {
    lastReason_ = "int8 precision is not offered by the cublas provider";
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
    std::vector<AlgoChoice> algos;
    const Status s = heuristicAlgos(h->handle, spec, dt, &algos);
    if (!s.ok()) {
      lastReason_ += std::string(dt == DataType::kFloat16 ? "fp16" : "fp32") + ": no heuristic (" +
                     s.message() + "); ";
      continue;
    }
    for (AlgoChoice& a : algos)
      out.push_back(std::make_unique<CublasBatchedMatMulTactic>(spec, dt, std::move(a), h));
  }
  return out;
}

}  // namespace edgeinfer::cuda
