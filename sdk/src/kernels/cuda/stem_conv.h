// The `cuda-stem` tactic provider: our own FP16 tensor-core kernel for dense 2-D convolutions
// with few input channels, the first layer of an image network (ResNet's 7x7 stride-2 conv on
// 3 channels, the 3x3 stride-2 stems of MobileNet / EfficientNet, BlazeFace's 5x5), where
// cuDNN is weak: on an H100 its best engine for ResNet-50's first layer at batch 64 ran at about
// 20 TFLOP/s (0.369 ms, more than a seventh of the whole network). One kernel computes
//
//   Y = act((conv(X, W) + B) + Z)      (the order of the CPU reference, kernels/ref/conv.cpp)
//
// as an implicit GEMM on mma.sync m16n8k16 (fp16 inputs, fp32 accumulation): a block copies
// the input rows its tile of output pixels reads into shared memory while the tile before
// computes, turns them into the patch (half, zeros outside the image), and every warp gathers
// its A fragments from that patch, a pair of taps per 32-bit load, through a table of tap
// offsets, so the 147 products of ResNet's 7x7x3 window never go through an im2col buffer. The
// weights of the block's output channels stay in shared memory while the block walks over
// tiles (a persistent grid). Bias, the residual Z and every activation the FusedConv schema
// allows are fused into the epilogue; outputs leave through shared memory in 16-byte stores.
//
// Candidates, each a tactic the builder times against cuDNN, ids
// "cuda-stem.<tile>.<x format>[.i8]":
//   tile      "m128" (8 x 16 output pixels per block, 4 warps of two rows), "m128w8" (the
//             same tile on 8 warps of one row: half a warp's serial work, for batch 1) or
//             "m64" (4 x 16, 2 warps);
//             "n32" after it where C_out is over 32: blocks of 32 output channels (twice the
//             blocks, each with half the products and epilogue: more parallel work at batch 1)
//   x format  "f16nhwc", "f16nchw" or "f32nchw": the input as it is stored; a network's own
//             float32 NCHW input is read directly, with no reformat before the layer
//   .i8       INT8 builds (issue 6): the output is quantized in the epilogue to int8 NHWC with
//             the output's scale, q = clamp(round_half_even(y * (1 / scale)), -128, 127) of the
//             float value y (no fp16 rounding in between; with ReLU or no activation as
//             acc * (1 / scale) + bias * (1 / scale) in one multiply-add, ReLU and the clamp as
//             its saturation to [0, 1] after a division by 127: within one step of the
//             quotient's rounding, which it leaves only within a few units in the last place of
//             a half step), for INT8 readers. The arithmetic stays FP16 with FP32 sums (a 3-channel
//             image layer: few operations, and the one whose input quantization would cost
//             the most accuracy). Offered at kInt8 only when the output has a scale (its
//             readers read int8) whose reciprocal is finite, there is no residual Z and the
//             build is not bit-exact
//             (LayerContext::int8BitExact: FP16 arithmetic cannot match the CPU's INT8).
// The output (and Z) is otherwise fp16 NHWC; a block covers 64 output channels (32 when C_out
// <= 32, or in the "n32" tactics), more channels take more blocks.
//
// Padding positions of K have weight zero and read a real input value (the next one in the
// patch row, zero past its end): an input that is infinite in half precision (beyond 65504,
// as in any FP16 tactic) can give NaN where the CPU reference gives a large finite value.
//
// Shared memory: the block's weights, the patch (at most kStemMaxPatchBytes) and the raw input
// rows it is made from (about as large again): a layer of large strides or dilations can need
// more than a device's block allows (99 KiB on sm_86 / sm_89), where its tactics are offered
// but fail to initialize (prepareStemConv: kUnsupported), and the builder times the others.
//
// Inputs 1 (W) and 2 (B) are consumed: initialize() converts them once (W to half rows in the
// kernel's K order, stemTap(); B to float) on the device.
//
// Not offered (candidates() returns none, lastReason() says why): Precision kFp32, kInt8
// without an output scale, with a residual or in a bit-exact build,
// group != 1, C_in over 8, R*S*C_in (padded as stemTap() orders it, then to a multiple of 16)
// over 256, an input patch over 32 KiB, other ranks than 2-D,
// dynamic shapes, non-constant weights or bias, more than 2^31 elements in a tensor, no device or
// one older than sm_80 (mma.sync m16n8k16 f16).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "builder/tactic.h"
#include "edgeinfer/status.h"
#include "kernels/cuda/fused_activation.h"

namespace edgeinfer::cuda {

class StemConvProvider : public builder::TacticProvider {
 public:
  std::string name() const override { return "cuda-stem"; }
  std::vector<std::unique_ptr<builder::Tactic>> candidates(const builder::LayerContext& layer,
                                                           Precision precision) override;
  /// Why the last candidates() call offered nothing (empty when it offered tactics).
  const std::string& lastReason() const { return lastReason_; }

 private:
  std::string lastReason_;
};

// ---- Kernel launch interface (plain C++; the kernel is in stem_conv.cu) ---------------------

/// How the input X is stored.
enum class StemInput : int32_t { kHalfNhwc, kHalfNchw, kFloatNchw };

/// Most input channels, largest R * S * C_in (the GEMM's K) and input patch (bytes) the
/// provider offers its tactics for.
constexpr int32_t kStemMaxInputChannels = 8;
constexpr int32_t kStemMaxGemmK = 256;
constexpr int32_t kStemMaxPatchBytes = 32 * 1024;

/// One convolution, logical sizes (every index fits in int32).
struct StemConvPlan {
  int32_t N = 0, C = 0, H = 0, W = 0;  ///< input
  int32_t K = 0, P = 0, Q = 0;         ///< output channels and spatial size
  int32_t R = 0, S = 0;                ///< kernel
  int32_t strideH = 1, strideW = 1, dilH = 1, dilW = 1, padTop = 0, padLeft = 0;
  int32_t gemmK = 0;        ///< K positions: stemGemmK()
  int32_t gemmKPad = 0;     ///< gemmK rounded up to 16: the row length of the weights
  int32_t blockN = 64;      ///< output channels per block: 64 or 32
  int32_t warps = 4;        ///< 4 (128 output pixels per block), 2 (64) or 8 (128, rowsPerWarp 1)
  int32_t rowsPerWarp = 2;  ///< output rows of 16 pixels a warp computes: 2, or 1 with 8 warps
  StemInput input = StemInput::kHalfNhwc;
  DeviceActivation act = DeviceActivation::kNone;
  float alpha = 0.f, beta = 0.f;
  bool hasZ = false;
  bool int8Out = false;  ///< y int8 NHWC quantized with yScale (no Z), else fp16 NHWC
  float yScale = 0.f;
  /// The launch is the last to read x: its rows are copied under an L2 evict-first policy
  /// (builder::LaunchArgs::lastReads).
  bool lastX = false;
};

/// Output rows of a block's tile (its width is 16 pixels).
inline int32_t stemTileRows(const StemConvPlan& p) {
  return p.warps * p.rowsPerWarp;
}

// The GEMM's K order. The window's taps are grouped in units of values that lie side by side
// in the input patch: a whole window row (S * C values) when dilW == 1, else one tap's C
// channels. Each unit is padded to an even length, so every pair of positions (2j, 2j + 1) is
// two neighbouring patch values (the kernel loads it as one word); a padding position reads
// the value after its unit and has weight zero.

/// Values in a unit: S * C (dilW == 1) or C.
int32_t stemUnitLength(const StemConvPlan& p);
/// K positions: R * (units per window row) * (unit length rounded up to even).
int32_t stemGemmK(const StemConvPlan& p);
/// The tap (r, s, c) at K position k; false for a padding position (or k out of range).
bool stemTap(const StemConvPlan& p, int32_t k, int32_t* r, int32_t* s, int32_t* c);
/// Patch offsets of the K pairs, gemmKPad / 2 of them: entry j is the offset of position 2j in
/// a window's patch values ([row][column][C]), 0 for padding.
std::vector<int32_t> stemPairOffsets(const StemConvPlan& p);

/// Bytes of the input patch one block holds (each value as a word of two halves).
int64_t stemPatchBytes(const StemConvPlan& p);
/// Dynamic shared memory of one block (weights, tap offsets, output stage, bias, the patch and
/// the raw copy of the input rows it is made from); for a plan validPlan() accepts.
int64_t stemSharedBytes(const StemConvPlan& p);

/// Device pointers of one launch: w [ceil(K / blockN) * blockN][gemmKPad] half in stemTap()'s
/// K order (zeros at padding positions and past K), offsets = stemPairOffsets(), bias [same
/// rows] float (zeros without one), z fp16 NHWC, y fp16 or (int8Out) int8 NHWC.
struct StemConvArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  const int32_t* offsets = nullptr;
  const float* bias = nullptr;
  const void* z = nullptr;
  void* y = nullptr;
};

/// Raises the kernel's shared-memory limit to what the plan needs (above 48 KiB; never lowers
/// it: the limit is shared by every plan of the same kernel version) and returns how many blocks of
/// this plan run at once on the current device (the persistent grid's size); an error when
/// the device cannot run one.
Expected<int> prepareStemConv(const StemConvPlan& plan);

/// Enqueues the convolution on `stream` (cudaStream_t) with at most `maxBlocks` blocks per
/// channel block (prepareStemConv); never synchronises.
Status launchStemConv(const StemConvPlan& plan, const StemConvArgs& args, int maxBlocks,
                      void* stream);

}  // namespace edgeinfer::cuda
