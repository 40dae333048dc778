// Internal helpers and kernel entry points of the CPU reference kernels for the neural-network
// and fused ops (conv.cpp, pool.cpp, norm.cpp, gemm.cpp, softmax.cpp, resize.cpp,
// space_depth.cpp, nn_misc.cpp; registered in nn_kernels.cpp).
//
// The kernels compute in float32 on float32 tensors. nn_kernels.cpp wraps each of them so
// float16 / bfloat16 tensors are converted to float32 and back around the call.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "edgeinfer/status.h"
#include "kernels/ref/activation.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer::ref::nn {

/// Every present input and every output the kernel reads as float must be float32 (pass the
/// indices of inputs that are not float data, e.g. Resize sizes, as `skipMask` bits).
inline Status requireFloat32(const KernelContext& ctx, uint32_t skipMask = 0) {
  for (size_t i = 0; i < ctx.inputs.size(); ++i) {
    if (!ctx.inputs[i] || (skipMask >> i) & 1u) continue;
    if (ctx.inputs[i]->dtype() != DataType::kFloat32)
      return ctx.error(ErrorCode::kUnsupported, "the CPU reference computes " + ctx.node.opType +
                                                    " in float32 only; input " + std::to_string(i) +
                                                    " is " + dataTypeName(ctx.inputs[i]->dtype()));
    if (!ctx.inputs[i]->onHost())
      return ctx.error(ErrorCode::kInvalidArgument,
                       "input " + std::to_string(i) + " is not on the host");
  }
  if (ctx.outputs.empty() || ctx.outputs[0]->dtype() != DataType::kFloat32)
    return ctx.error(ErrorCode::kUnsupported, "output 0 must be float32");
  return Status::Ok();
}

/// The activation of a fused node with its parameters. Absent activation_alpha /
/// activation_beta take the ONNX defaults of that activation (the fuser always writes both).
struct FusedActivation {
  Activation act = Activation::kNone;
  float alpha = 0.f;
  float beta = 0.f;
  float operator()(float x) const { return applyActivation(x, act, alpha, beta); }
};

inline Status readFusedActivation(const KernelContext& ctx, FusedActivation* out) {
  const std::string name = ctx.attrs().getString("activation", "");
  if (!parseActivation(name, &out->act))
    return ctx.error(ErrorCode::kInvalidModel, "unknown fused activation '" + name + "'");
  float alpha = 0.f, beta = 0.f;
  switch (out->act) {
    case Activation::kLeakyRelu:
      alpha = 0.01f;
      break;
    case Activation::kHardSigmoid:
      alpha = 0.2f;
      beta = 0.5f;
      break;
    case Activation::kElu:
      alpha = 1.f;
      break;
    case Activation::kSelu:
      alpha = 1.67326319217681884765625f;
      beta = 1.05070102214813232421875f;
      break;
    case Activation::kClip:
      alpha = -std::numeric_limits<float>::infinity();
      beta = std::numeric_limits<float>::infinity();
      break;
    default:
      break;
  }
  out->alpha = ctx.attrs().getFloat("activation_alpha", alpha);
  out->beta = ctx.attrs().getFloat("activation_beta", beta);
  return Status::Ok();
}

/// Applies the activation to y[0..n). The switch sits outside the loop so each loop body is
/// a single inlined activation (the common ones vectorise); per element it computes exactly
/// applyActivation(), like the unfused elementwise kernels.
inline void activateInPlace(float* y, int64_t n, const FusedActivation& a) {
  switch (a.act) {
    case Activation::kNone:
      return;
    case Activation::kRelu:
      for (int64_t i = 0; i < n; ++i) y[i] = applyActivation(y[i], Activation::kRelu, 0.f, 0.f);
      return;
    case Activation::kClip:
      for (int64_t i = 0; i < n; ++i)
        y[i] = applyActivation(y[i], Activation::kClip, a.alpha, a.beta);
      return;
    case Activation::kLeakyRelu:
      for (int64_t i = 0; i < n; ++i)
        y[i] = applyActivation(y[i], Activation::kLeakyRelu, a.alpha, a.beta);
      return;
    default:
      for (int64_t i = 0; i < n; ++i) y[i] = a(y[i]);
      return;
  }
}

/// Row-major y[m][n] = a[m][k] * b[k][n], accumulated in float in k order.
///
/// The loop order is i-k-j: the inner loop runs along contiguous rows of b and y, so it
/// vectorises. Four rows of y are computed together so that every row of b loaded from
/// memory is used four times; columns are processed in tiles that keep those four rows in
/// L1. Blocks of rows run in parallel.
inline void gemmRowMajor(const float* a, const float* b, float* y, int64_t m, int64_t k,
                         int64_t n) {
  constexpr int64_t kRows = 4;
  constexpr int64_t kTile = 512;
  const int64_t blocks = (m + kRows - 1) / kRows;
#pragma omp parallel for schedule(static)
  for (int64_t blk = 0; blk < blocks; ++blk) {
    const int64_t i0 = blk * kRows;
    const int64_t rows = std::min(kRows, m - i0);
    for (int64_t j0 = 0; j0 < n; j0 += kTile) {
      const int64_t j1 = std::min(n, j0 + kTile);
      if (rows == kRows) {
        float* y0 = y + i0 * n;
        float* y1 = y0 + n;
        float* y2 = y1 + n;
        float* y3 = y2 + n;
        for (int64_t j = j0; j < j1; ++j) y0[j] = y1[j] = y2[j] = y3[j] = 0.f;
        for (int64_t kk = 0; kk < k; ++kk) {
          const float a0 = a[i0 * k + kk], a1 = a[(i0 + 1) * k + kk];
          const float a2 = a[(i0 + 2) * k + kk], a3 = a[(i0 + 3) * k + kk];
          const float* brow = b + kk * n;
          for (int64_t j = j0; j < j1; ++j) {
            const float bv = brow[j];
            y0[j] += a0 * bv;
            y1[j] += a1 * bv;
            y2[j] += a2 * bv;
            y3[j] += a3 * bv;
          }
        }
      } else {  // the last (partial) block: one row at a time
        for (int64_t i = i0; i < i0 + rows; ++i) {
          float* yr = y + i * n;
          for (int64_t j = j0; j < j1; ++j) yr[j] = 0.f;
          for (int64_t kk = 0; kk < k; ++kk) {
            const float av = a[i * k + kk];
            const float* brow = b + kk * n;
            for (int64_t j = j0; j < j1; ++j) yr[j] += av * brow[j];
          }
        }
      }
    }
  }
}

inline int64_t floorDiv(int64_t a, int64_t b) {
  return a >= 0 ? a / b : -((-a + b - 1) / b);
}
inline int64_t ceilDivInt(int64_t a, int64_t b) {
  return -floorDiv(-a, b);
}

/// Strides (in elements) for reading a tensor of shape `from`, broadcast by numpy rules
/// (dims aligned on the right), at the coordinates of a tensor of shape `to`: 0 along the
/// dims where `from` has size 1 or no dim at all.
inline std::vector<int64_t> broadcastStrides(const Shape& from, const Shape& to) {
  std::vector<int64_t> strides(to.rank(), 0);
  if (from.rank() > to.rank()) return strides;  // rejected by shape inference
  const size_t off = to.rank() - from.rank();
  int64_t stride = 1;
  for (size_t i = from.rank(); i-- > 0;) {
    strides[off + i] = from[i] == 1 ? 0 : stride;
    stride *= from[i];
  }
  return strides;
}

/// Offset into the broadcast tensor of element `index` (row-major) of shape `to`.
inline int64_t broadcastOffset(int64_t index, const Shape& to,
                               const std::vector<int64_t>& strides) {
  int64_t offset = 0;
  for (size_t d = to.rank(); d-- > 0;) {
    offset += (index % to[d]) * strides[d];
    index /= to[d];
  }
  return offset;
}

// ---- Kernel entry points -----------------------------------------------------------------
// conv.cpp
Status conv(KernelContext& ctx);
Status fusedConv(KernelContext& ctx);
Status convTranspose(KernelContext& ctx);
// pool.cpp
Status maxPool(KernelContext& ctx);
Status averagePool(KernelContext& ctx);
Status lpPool(KernelContext& ctx);
Status globalAveragePool(KernelContext& ctx);
Status globalMaxPool(KernelContext& ctx);
// norm.cpp
Status batchNormalization(KernelContext& ctx);
Status instanceNormalization(KernelContext& ctx);
Status layerNormalization(KernelContext& ctx);
Status lrn(KernelContext& ctx);
Status lpNormalization(KernelContext& ctx);
// gemm.cpp
Status gemm(KernelContext& ctx);
Status fusedGemm(KernelContext& ctx);
Status matMul(KernelContext& ctx);
Status fusedMatMul(KernelContext& ctx);
// softmax.cpp
Status softmax(KernelContext& ctx);
Status logSoftmax(KernelContext& ctx);
Status hardmax(KernelContext& ctx);
// resize.cpp
Status resize(KernelContext& ctx);
// space_depth.cpp
Status depthToSpace(KernelContext& ctx);
Status spaceToDepth(KernelContext& ctx);
// nn_misc.cpp
Status prelu(KernelContext& ctx);

}  // namespace edgeinfer::ref::nn
