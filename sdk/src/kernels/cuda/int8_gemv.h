// The `cuda-i8.gemv` tactic provider (issue 6): INT8 matrix products of few rows, such as a
// classifier's Gemm at batch 1 to 16, in one kernel of ours.
//
// A classifier at batch 1 is a matrix-vector product (ResNet-50: 2048 -> 1000, 2 MB of int8
// weights, 4 MOP): cuBLAS's integer GEMV took 7.4 us on an H200, and around it the strict INT8
// engine ran a quantize of the pooled features, our int32 epilogue and a conversion of the fp16
// logits to float32 (4 kernels, 11.6 us, where the FP16 engine's tail was one 5 us GEMM). This
// kernel reads the float input (fp16 or float32, the format its producer writes) or int8,
// quantizes a row into shared memory with the layer's input scale (quantize.cuh, as the
// quantize reformat does), multiplies it with the int8 weights (one warp per output channel,
// 16 bytes a lane a step, dp4a), and applies the cublaslt-i8 "i32" epilogue expression by
// expression (v = act((float(acc) * alpha[n]) + bias[n]), no FMA contraction) straight into the
// output's format: float32, fp16, or int8 with the output's scale (quantize.cuh). The integer
// sums are exact, so every result equals that of the cublaslt-i8 "i32" tactic after the same
// quantize reformat, and the CPU's INT8 emulation, bit for bit.
//
// Two forms. The one-row form ("cuda-i8.gemv.<x>.<y>", M <= 16) gives each block one row, so
// the weights are read once a row: right for batch 1, where the 2 MB of weights spread over
// every multiprocessor are the whole cost. The row-tile forms ("cuda-i8.gemv.m16c<C>.<x>.<y>",
// M <= 1024) copy up to 16 rows into shared memory and let each warp multiply C (1 or 4) output
// channels' weights, read once, with all of them: at batch 64 the one-row form would read the
// weights 64 times, and cuBLASLt's INT8 GEMM took 16.8 us for ResNet-50's classifier (64 x 2048
// -> 1000) on an H200. A warp's partial sums (16 rows x C channels a lane) are reduced by halving
// exchanges (each step a lane keeps half its values and adds its partner's other half), so
// lane L ends with sums 2L and 2L + 1 (C = 4) or sum L / 2 (C = 1). Both forms gather a block's
// sums in shared memory and store them a row's adjacent channels at a time: a small graph output
// lives in mapped host memory (runtime/cuda/cuda_context.cpp, zeroCopyOutputs), where every
// store instruction's pieces cross the bus, and scattered stores of ResNet-50's 64 x 1000
// logits cost the engine 0.1 ms on an H200.
//
// Offered at INT8 for the layers of int8_gemm_layer.h that are not convolutions, with K % 16 ==
// 0 (16-byte rows), K <= 16384 (a row's int8 copy in shared memory; the row-tile form takes
// fewer rows a block where 16 would pass 44 KB), and no residual. <x>, <y> each "i8" | "f16" |
// "f32" (the input's and the output's types; "i8" only where the tensor has a scale).
// EDGEINFER_DISABLE_INT8_GEMV=1 switches the provider off (to compare engines without it; an engine
// that holds its tactics then does not load, and says to rebuild it).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "builder/tactic.h"
#include "edgeinfer/status.h"
#include "kernels/cuda/fused_activation.h"

namespace edgeinfer::cuda {

class Int8GemvProvider : public builder::TacticProvider {
 public:
  std::string name() const override { return "cuda-i8.gemv"; }
  std::vector<std::unique_ptr<builder::Tactic>> candidates(const builder::LayerContext& layer,
                                                           Precision precision) override;
  /// find() on the layer with the scales the tactic serialized (its float input's, which a
  /// loaded engine's plan does not keep) where the layer lacks them.
  std::unique_ptr<builder::Tactic> restore(const builder::LayerContext& layer, Precision precision,
                                           const std::string& id,
                                           const std::string& state) override;
  /// Why the last candidates() call offered nothing. For logs and tests.
  const std::string& lastReason() const { return lastReason_; }

 private:
  std::string lastReason_;
};

/// The most rows (M) the one-row and the row-tile forms take, and inner elements (K) either.
inline constexpr int kInt8GemvMaxRows = 16;
inline constexpr int kInt8GemvMaxTiledRows = 1024;
/// The row-tile form's most rows a block, and its shared-memory budget for them.
inline constexpr int kInt8GemvRowTile = 16;
inline constexpr int kInt8GemvRowTileBytes = 44 * 1024;  // and 2 KB of sums: within 48 KB
inline constexpr int kInt8GemvMaxK = 16384;

/// Element types of the kernel's input and output.
enum class GemvType { kInt8, kFloat16, kFloat32 };

/// One launch: y[M][N] = act((float(q(x)[M][K] . w[N][K]) * alpha[N]) + bias[N]), where q(x) is
/// x itself (int8) or x quantized with xScale; y quantized with yScale when int8.
struct Int8GemvPlan {
  int32_t M = 0, K = 0, N = 0;
  GemvType x = GemvType::kFloat16, y = GemvType::kFloat32;
  float xScale = 0.f, yScale = 0.f;
  DeviceActivation act = DeviceActivation::kNone;
  float actAlpha = 0.f, actBeta = 0.f;
  /// 0: the one-row form. Otherwise the row-tile form with this many rows a block (1 to
  /// kInt8GemvRowTile, rowTile * K <= kInt8GemvRowTileBytes) and channelsPerWarp (1 or 4).
  int32_t rowTile = 0;
  int32_t channelsPerWarp = 1;
};

/// The row-tile form's rows a block for M rows of K elements.
inline int32_t int8GemvRowTile(int64_t M, int64_t K) {
  int64_t r = kInt8GemvRowTileBytes / (K > 0 ? K : 1);
  if (r > kInt8GemvRowTile) r = kInt8GemvRowTile;
  if (r > M) r = M;
  return static_cast<int32_t>(r < 1 ? 1 : r);
}

/// Enqueues the kernel on `stream` (cudaStream_t). kInvalidArgument for sizes out of range
/// (M 1..16 for the one-row form, 1..1024 for the row-tile form; K % 16 == 0 up to 16384; N >=
/// 1; a row tile or channels a warp other than the above), a missing scale, missing or
/// misaligned pointers (x, w 16 bytes; alpha, bias 4; y its element).
Status launchInt8Gemv(const Int8GemvPlan& p, const void* x, const int8_t* w, const float* alpha,
                      const float* bias, void* y, void* stream);

}  // namespace edgeinfer::cuda
