// Gemm, MatMul and their fused forms on the CPU.
//
// Both reduce to row-major C[M][N] = A[M][K] * B[K][N] (gemmRowMajor in nn_common.h, i-k-j
// order, accumulated in float). Transposed Gemm operands are copied into row-major form first. The
// epilogue (alpha, beta * C, bias, activation) is applied per output element in the same order as
// the unfused chain.
#include <algorithm>
#include <vector>

#include "kernels/ref/nn_common.h"

namespace edgeinfer::ref::nn {
namespace {

/// out[cols][rows] = in[rows][cols]^T
std::vector<float> transposed(const float* in, int64_t rows, int64_t cols) {
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[static_cast<size_t>(c * rows + r)] = in[r * cols + c];
  return out;
}

/// Y = act(alpha * A'B' + beta * C)
Status gemmForward(KernelContext& ctx, const FusedActivation& act) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  const bool transA = ctx.attrs().getInt("transA", 0) == 1;
  const bool transB = ctx.attrs().getInt("transB", 0) == 1;
  const float alpha = ctx.attrs().getFloat("alpha", 1.f);
  const float beta = ctx.attrs().getFloat("beta", 1.f);
  const Shape& as = ctx.inputs[0]->shape();
  const Shape& bs = ctx.inputs[1]->shape();
  if (as.rank() != 2 || bs.rank() != 2)
    return ctx.error(ErrorCode::kInvalidModel, "Gemm operands must be 2-D");
  const int64_t m = transA ? as[1] : as[0];
  const int64_t k = transA ? as[0] : as[1];
  const int64_t n = transB ? bs[0] : bs[1];
  if ((transB ? bs[1] : bs[0]) != k)
    return ctx.error(ErrorCode::kInvalidModel, "Gemm inner dimensions differ");
  std::vector<float> aT, bT;
  const float* a = ctx.inputs[0]->data<float>();
  const float* b = ctx.inputs[1]->data<float>();
  if (transA) {
    aT = transposed(a, k, m);
    a = aT.data();
  }
  if (transB) {
    bT = transposed(b, n, k);
    b = bT.data();
  }
  const Shape ys{m, n};
  const float* c = ctx.hasInput(2) ? ctx.inputs[2]->data<float>() : nullptr;
  const std::vector<int64_t> cStrides =
      c ? broadcastStrides(ctx.inputs[2]->shape(), ys) : std::vector<int64_t>{0, 0};
  float* y = ctx.outputs[0]->data<float>();
  gemmRowMajor(a, b, y, m, k, n);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < m; ++i) {
    float* yrow = y + i * n;
    for (int64_t j = 0; j < n; ++j) {
      float v = alpha * yrow[j];
      if (c) v += beta * c[i * cStrides[0] + j * cStrides[1]];
      yrow[j] = v;
    }
    activateInPlace(yrow, n, act);
  }
  return Status::Ok();
}

/// Y = act(A @ B + bias) with numpy matmul semantics: a 1-D A is a row vector, a 1-D B a
/// column vector (the added dim is dropped from the result), batch dims broadcast.
Status matmulForward(KernelContext& ctx, const float* bias, const FusedActivation& act) {
  EI_RETURN_IF_ERROR(requireFloat32(ctx));
  const Shape& as = ctx.inputs[0]->shape();
  const Shape& bs = ctx.inputs[1]->shape();
  const Shape& ys = ctx.outputs[0]->shape();
  if (as.rank() < 1 || bs.rank() < 1)
    return ctx.error(ErrorCode::kInvalidModel, "MatMul operands must have rank >= 1");
  const bool aVector = as.rank() == 1;
  const bool bVector = bs.rank() == 1;
  const int64_t m = aVector ? 1 : as[as.rank() - 2];
  const int64_t k = as[as.rank() - 1];
  const int64_t n = bVector ? 1 : bs[bs.rank() - 1];
  if ((bVector ? bs[0] : bs[bs.rank() - 2]) != k)
    return ctx.error(ErrorCode::kInvalidModel, "MatMul inner dimensions differ");
  const Shape aBatch(std::vector<int64_t>(as.dims().begin(), as.dims().end() - (aVector ? 1 : 2)));
  const Shape bBatch(std::vector<int64_t>(bs.dims().begin(), bs.dims().end() - (bVector ? 1 : 2)));
  const size_t batchRank = ys.rank() - (aVector ? 0 : 1) - (bVector ? 0 : 1);
  const Shape batch(std::vector<int64_t>(
      ys.dims().begin(), ys.dims().begin() + static_cast<std::ptrdiff_t>(batchRank)));
  const std::vector<int64_t> aStrides = broadcastStrides(aBatch, batch);
  const std::vector<int64_t> bStrides = broadcastStrides(bBatch, batch);
  const float* a = ctx.inputs[0]->data<float>();
  const float* b = ctx.inputs[1]->data<float>();
  float* y = ctx.outputs[0]->data<float>();
  for (int64_t bi = 0; bi < batch.numel(); ++bi) {
    const float* am = a + broadcastOffset(bi, batch, aStrides) * m * k;
    const float* bm = b + broadcastOffset(bi, batch, bStrides) * k * n;
    gemmRowMajor(am, bm, y + bi * m * n, m, k, n);
  }
  if (!bias && act.act == Activation::kNone) return Status::Ok();
  const int64_t rows = batch.numel() * m;
#pragma omp parallel for schedule(static)
  for (int64_t row = 0; row < rows; ++row) {
    float* yrow = y + row * n;
    if (bias) {
      // With a 1-D B the output's last dim is M, so the bias follows the row instead.
      for (int64_t j = 0; j < n; ++j) yrow[j] += bias[bVector ? row % m : j];
    }
    activateInPlace(yrow, n, act);
  }
  return Status::Ok();
}

}  // namespace

Status gemm(KernelContext& ctx) {
  return gemmForward(ctx, FusedActivation{});
}

Status fusedGemm(KernelContext& ctx) {
  FusedActivation act;
  EI_RETURN_IF_ERROR(readFusedActivation(ctx, &act));
  return gemmForward(ctx, act);
}

Status matMul(KernelContext& ctx) {
  return matmulForward(ctx, nullptr, FusedActivation{});
}

Status fusedMatMul(KernelContext& ctx) {
  FusedActivation act;
  EI_RETURN_IF_ERROR(readFusedActivation(ctx, &act));
  const float* bias = nullptr;
  if (ctx.hasInput(2)) {
    const Shape& ys = ctx.outputs[0]->shape();
    if (ys.rank() == 0 || ctx.inputs[2]->numel() != ys[ys.rank() - 1])
      return ctx.error(ErrorCode::kInvalidModel, "bias must have the output's last dim");
    if (ctx.inputs[2]->dtype() != DataType::kFloat32)
      return ctx.error(ErrorCode::kUnsupported, "bias must be float32");
    bias = ctx.inputs[2]->data<float>();
  }
  return matmulForward(ctx, bias, act);
}

}  // namespace edgeinfer::ref::nn
