// The `cuda-i8` tactic provider (issue 6): INT8 convolutions, our own kernels, for the layers of
// an INT8 engine (Conv and ai.edgeinfer::FusedConv, 2-D). Activations are int8 NHWC tensors,
// each quantized per tensor with the scale calibration gave it (LayerContext::inputScales /
// outputScales); weights are quantized per output channel (quant::quantizeWeights) once, at
// initialize(). One kernel computes
//
//   acc = sum over (r, s, c) of x_q * w_q                       (exact, int32)
//   v   = act(((float(acc) * alpha[k]) + B[k]) + Z)             alpha[k] = s_x * s_w[k]
//   Y   = clamp(round_half_even(v / s_y), -128, 127)  (int8 output)   or   half(v)  (fp16)
//
// in one of two roundings, chosen per build (BuilderConfig::int8BitExact; the fast one's tactic
// ids end ".f", so an engine or timing cache written before it existed keeps its meaning):
//   bit-exact  each float operation rounded on its own (no contraction into FMAs), the quantize's
//              division correctly rounded: a result equals the host computation of the same
//              expressions (the CPU backend's INT8 emulation) bit for bit, activations with
//              exp/tanh aside (within one quantization step). About 30 operations an element.
//   fast       (the default) v in fused multiply-adds, and for int8 outputs of activations that
//              commute with a positive scale (none, Relu, LeakyRelu) alpha, B and s_z divided by
//              s_y on the host, so the kernel computes v / s_y directly; the quantize rounds
//              with the 1.5 * 2^23 addition after a clamp. A result differs from the bit-exact
//              one by at most one step, and only where v / s_y lies within rounding noise
//              (about 2^-20 of the terms) of a half-integer: TensorRT's INT8 is no closer to
//              ONNX's arithmetic either. About 8 arithmetic operations an element against 30;
//              the whole TMA kernel of a write-bound 1x1 layer went from 46 to 36 instructions
//              an output element and is now latency-bound (docs/performance.md).
// Z, the residual, is read as fp16 or as int8 dequantized with its own scale (q * s_z).
//
// Candidates, each a tactic the builder times, ids "cuda-i8.<kernel>.<y>.<z>":
//   kernel  "mma<BM>x<BN>v<16|4>" (group 1; 128x128, 128x64, 64x128): implicit GEMM on tensor
//           cores, mma.sync m16n8k32 s8 (sm_80 and newer: Orin, Hopper, Thor), a block tile of
//           BM output pixels by BN output channels, a two-stage cp.async pipeline, ldmatrix
//           fragments; v16 copies the input in 16-byte pieces (C % 16 == 0), v4 in 4-byte ones
//           (C % 4 == 0).
//           "mma<BM>x<BN>v<16|4>s<S>" (S = 2 to 16, int8ConvSplits): the same kernel with its K
//           steps split S ways, for layers of fewer tiles than the device has multiprocessors
//           (batch 1 on Orin's 16): block z of a tile stores its int32 sums to the workspace,
//           a second kernel adds up the S partial tiles (integers: exact) and runs the epilogue,
//           so the result equals the unsplit kernel's bit for bit.
//           "wg<BM>x<BN>[k128]" (group 1, C % 16 == 0, compute 9.0 devices, builds with sm_90a
//           code: 128x128, 128x256, 128x64, 64x128 with K steps of 64 bytes; 128x128k128 and
//           128x64k128 with steps of 128): the same implicit GEMM with Hopper's warpgroup MMA,
//           wgmma.mma_async m64nNk32 s8, operands straight from swizzled shared memory, a
//           four-stage cp.async pipeline (int8_conv_sm90a.cu).
//           "tma<BM>x<BN>[k128]" (the same tiles, C % 64 == 0, or C % 128 == 0 for 128x128k128,
//           and geometry within the TMA's im2col box, int8ConvTmaFits): wgmma fed by the
//           Tensor Memory Accelerator, one producer thread issuing an im2col and a tile load per
//           K step, consumer warpgroups that only run wgmmas (int8_conv_tma_sm90a.cu). Offered
//           instead of the "wg" kernel of the same tile wherever it fits (faster on every
//           layer measured).
//           "tma<BM>x<BN>[k128]s<S>" (S = 2 to 16, int8ConvSplits; not the 128x256 tile,
//           whose sums do not fit in shared memory at once): the same kernel with its K steps
//           split S ways, for layers of fewer tiles than the device has multiprocessors (batch
//           1: a 7x7 layer of 512 channels is 4 tiles of 128x128). The S blocks of a tile form
//           a thread block cluster; each leaves its int32 sums in its shared memory, and block z
//           adds up the z-th S-th of the tile's rows of all S through distributed shared memory
//           (integers: exact, the unsplit kernel's result bit for bit) and runs the epilogue on
//           them. One launch, no workspace.
//           "tmar128x128", "tmar128x64", "tmar128x128k128" (the TMA kernels' layers with K % 32
//           == 0): the same producer, stages and wgmmas in persistent blocks (as many as fit at
//           once, every gridDim.x-th tile each; the producer loads the next tile's stages during
//           this tile's epilogue), the epilogue from the accumulator registers, 8 consecutive
//           channels a thread (the weights' rows permuted within groups of 32 output channels,
//           int8ConvPermutedChannel), an int8 residual fetched into registers before the tile's
//           main loop. No split K. "tmard128x128k128", "tmard128x256k128" (K > 128): the same
//           with one block a multiprocessor and a deeper stage ring (6 and 4 steps of 128
//           bytes ahead of the wgmmas; offered where the layer has at least half as many tiles
//           as the device has multiprocessors, int8ConvManyTiles). "tmard192x128k128": tiles
//           of 192 pixels on three consumer warpgroups, 5 stages, for the layers whose tiles of
//           128 leave a last wave mostly idle (ResNet-50's 14x14 layers at batch 64: 12,544
//           pixels are 98 tiles of 128x256 or 196 of 128x128 for 132 multiprocessors, 66 x 2
//           tiles of 192x128). "tmap128x128k128",
//           "tmap128x64" (the same layers): one block a
//           multiprocessor, deep rings, and the two consumer warpgroups each on every other tile
//           (all its rows), their main loops taking turns, so one's epilogue runs under the
//           other's wgmmas (pingpong).
//           "pw128x128", "pw128x64", "pw64x256", "pw64x128" (1x1 without padding, any stride, C %
//           32 == 0, C <= 256, K % 32 == 0; sm_80 and newer): for layers bound by memory (ResNet's
//           1x1 expansions), persistent blocks that keep their BN channels' weights in shared
//           memory, copy the next 128 pixels' input and residual rows while multiplying the current
//           ones (mma.sync), and run the epilogue straight from the accumulator registers, 8
//           consecutive channels of a pixel a thread, stored as one piece
//           (int8_conv_pointwise.cu). Offered: 128x64, 128x128 and 64x128 for K > 64, 64x256 for
//           K > 128 (64x128: 128x128's weights with stages of half its rows, so that two
//           blocks share a multiprocessor where 256 input channels keep 128x128 to one).
//           "halo128x64" (3x3, stride 1, padding 1, C % 32 == 0, C <= 128, K % 32 == 0, at
//           most 128 output columns; sm_80 and newer): persistent blocks that keep their 64
//           channels' weights for the nine window positions in shared memory and copy each
//           tile's input once, as a halo of whole rows, instead of once per window position
//           (int8_conv_halo.cu); mma.sync, the pointwise kernels' register epilogue.
//           "halowg128x64" (the same layers with C % 64 == 0, compute 9.0 devices, builds with
//           sm_90a code): the halo kernel with wgmma, A fragments from registers, the weights in
//           wgmma's swizzled layout (int8_conv_halo_sm90a.cu).
//           "dw<4|1>" (group == C_in == C_out): depthwise, one output pixel and 4 (C % 4 == 0)
//           or 1 channels per thread.
//   y       "i8" (when the output has a scale) or "f16"
//   z       "-" (no residual), "i8" (when Z has a scale) or "f16"
//   ".f"    appended for the fast rounding (the default; none: bit-exact,
//   LayerContext::int8BitExact)
// Only Precision::kInt8 offers them, and only when the input has a scale; the builder times
// them against the FP16 and FP32 tactics of the other providers and keeps the fastest.
//
// Not offered (candidates() returns none, lastReason() says why): other precisions, an input
// without a scale, other ranks than 2-D, dynamic shapes, non-constant or non-float weights or
// bias, groups other than 1 or depthwise, C_in not a multiple of 4 (dense), tensors of 2^31
// bytes or more, a device older than sm_80 (dense) or no device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "builder/tactic.h"
#include "edgeinfer/status.h"
#include "kernels/cuda/fused_activation.h"

namespace edgeinfer::cuda {

class Int8ConvProvider : public builder::TacticProvider {
 public:
  std::string name() const override { return "cuda-i8"; }
  std::vector<std::unique_ptr<builder::Tactic>> candidates(const builder::LayerContext& layer,
                                                           Precision precision) override;
  /// The rounding is the id's (".f": fast), whatever the layer's int8BitExact says: an
  /// engine file records it in its tactics.
  std::unique_ptr<builder::Tactic> find(const builder::LayerContext& layer, Precision precision,
                                        const std::string& id) override;
  /// Why the last candidates() call offered nothing (empty when it offered tactics).
  const std::string& lastReason() const { return lastReason_; }

 private:
  std::string lastReason_;
};

// ---- Kernel launch interface (plain C++; kernels in int8_conv.cu and int8_conv_sm90a.cu) ----

enum class Int8ConvKernel : int32_t {
  kMma128x128,        ///< dense, tensor cores, 128 pixels x 128 channels per block
  kMma128x64,         ///< dense, 128 x 64 (few output channels)
  kMma64x128,         ///< dense, 64 x 128 (few output pixels: more blocks)
  kDepthwise,         ///< depthwise, CUDA cores
  kWgmma128x128,      ///< dense, Hopper wgmma (int8_conv_sm90a.cu), 128 x 128
  kWgmma128x256,      ///< dense, wgmma, 128 x 256 (many output channels)
  kWgmma128x64,       ///< dense, wgmma, 128 x 64
  kWgmma64x128,       ///< dense, wgmma, 64 x 128 (few output pixels)
  kWgmma128x128k128,  ///< dense, wgmma, 128 x 128, K steps of 128 bytes (128-byte swizzle)
  kWgmma128x64k128,   ///< dense, wgmma, 128 x 64, K steps of 128 bytes
  kTma128x128,        ///< dense, wgmma fed by TMA (int8_conv_tma_sm90a.cu), 128 x 128
  kTma128x256,        ///< dense, wgmma + TMA, 128 x 256
  kTma128x64,         ///< dense, wgmma + TMA, 128 x 64
  kTma64x128,         ///< dense, wgmma + TMA, 64 x 128
  kTma128x128k128,    ///< dense, wgmma + TMA, 128 x 128, K steps of 128 bytes
  kPw128x128,         ///< 1x1, persistent, mma.sync (int8_conv_pointwise.cu), 128 x 128 a tile
  kPw128x64,          ///< 1x1, persistent, mma.sync, 128 x 64
  kPw64x256,          ///< 1x1, persistent, mma.sync, 64 x 256 (whole rows of 256 channels)
  kHalo128x64,        ///< 3x3 stride 1, persistent, mma.sync, halo tiles (int8_conv_halo.cu)
  kHaloWg128x64,      ///< the same with wgmma, A from registers (int8_conv_halo_sm90a.cu)
  kTmaR128x128,       ///< wgmma + TMA, persistent, epilogue from registers, 128 x 128
  kTmaR128x64,        ///< wgmma + TMA, persistent, epilogue from registers, 128 x 64
  kTmaR128x128k128,   ///< wgmma + TMA, persistent, epilogue from registers, 128 x 128, BK 128
  kTmaRD128x128k128,  ///< the same, one block an SM, 6 stages
  kTmaRD128x256k128,  ///< the same, 128 x 256, one block an SM, 4 stages
  kTmaP128x128k128,   ///< register epilogue, pingpong warpgroups, 128 x 128, BK 128, 6 stages
  kTmaP128x64,        ///< register epilogue, pingpong warpgroups, 128 x 64, 10 stages
  kPw64x128,          ///< 1x1, persistent, mma.sync, 64 x 128 (two blocks an SM where C = 256)
  kTmaRD192x128k128,  ///< register epilogue, 192 x 128 (three consumer warpgroups), 5 stages
};

/// Whether `kernel` is one of the pointwise (1x1) persistent kernels.
inline bool isInt8ConvPointwiseKernel(Int8ConvKernel kernel) {
  return kernel == Int8ConvKernel::kPw128x128 || kernel == Int8ConvKernel::kPw128x64 ||
         kernel == Int8ConvKernel::kPw64x256 || kernel == Int8ConvKernel::kPw64x128;
}

/// Whether `kernel` is one of the TMA-fed wgmma kernels of one tile a block (those K splits).
inline bool isInt8ConvTmaKernel(Int8ConvKernel kernel) {
  return kernel >= Int8ConvKernel::kTma128x128 && kernel <= Int8ConvKernel::kTma128x128k128;
}

/// Whether `kernel` is one of the persistent TMA kernels with the epilogue from registers
/// (int8_conv_tma_sm90a.cu; tmar, tmard, tmap: kTmaR128x128 .. kTmaP128x64 and
/// kTmaRD192x128k128): their weights' rows
/// permuted (int8ConvPermutedChannel), K % 32 == 0, no split K.
inline bool isInt8ConvTmaRegKernel(Int8ConvKernel kernel) {
  return (kernel >= Int8ConvKernel::kTmaR128x128 && kernel <= Int8ConvKernel::kTmaP128x64) ||
         kernel == Int8ConvKernel::kTmaRD192x128k128;
}

/// The output channel that row `r` of the weights holds for the kernels whose epilogue runs
/// from the MMA accumulators, 8 consecutive channels a thread (the TMA register-epilogue
/// kernels' packed weights; the pointwise and halo kernels permute their shared copy so): row
/// 8b + c of each group of 32 holds channel 8 (c / 2) + 2b + c % 2, so that the m16n8 (or wgmma
/// m64nN) accumulator columns 2t and 2t + 1 of the group's 4 tiles b are channels 8t .. 8t + 7.
/// The device's copy: dev::permutedWeightChannel (mma_sync.cuh).
inline int int8ConvPermutedChannel(int r) {
  const int b = (r & 31) >> 3, c = r & 7;
  return (r & ~31) + 8 * (c >> 1) + 2 * b + (c & 1);
}

/// A TMA, mma.sync or pointwise kernel's block tile: BM output pixels x BN output channels, K
/// steps of BK bytes (0 for the pointwise kernels, whose K loop is the whole of C; zeros for the
/// other kernels).
struct Int8ConvTile {
  int bm = 0, bn = 0, bk = 0;
};
inline Int8ConvTile int8ConvTmaTile(Int8ConvKernel kernel) {
  switch (kernel) {
    case Int8ConvKernel::kMma128x128:
      return {128, 128, 64};
    case Int8ConvKernel::kMma128x64:
      return {128, 64, 64};
    case Int8ConvKernel::kMma64x128:
      return {64, 128, 64};
    case Int8ConvKernel::kTma128x128:
      return {128, 128, 64};
    case Int8ConvKernel::kTma128x256:
      return {128, 256, 64};
    case Int8ConvKernel::kTma128x64:
      return {128, 64, 64};
    case Int8ConvKernel::kTma64x128:
      return {64, 128, 64};
    case Int8ConvKernel::kTma128x128k128:
    case Int8ConvKernel::kTmaR128x128k128:
    case Int8ConvKernel::kTmaRD128x128k128:
    case Int8ConvKernel::kTmaP128x128k128:
      return {128, 128, 128};
    case Int8ConvKernel::kTmaP128x64:
      return {128, 64, 64};
    case Int8ConvKernel::kTmaRD128x256k128:
      return {128, 256, 128};
    case Int8ConvKernel::kTmaRD192x128k128:
      return {192, 128, 128};
    case Int8ConvKernel::kTmaR128x128:
      return {128, 128, 64};
    case Int8ConvKernel::kTmaR128x64:
      return {128, 64, 64};
    case Int8ConvKernel::kPw128x128:
      return {128, 128, 0};
    case Int8ConvKernel::kPw128x64:
      return {128, 64, 0};
    case Int8ConvKernel::kPw64x256:
      return {64, 256, 0};
    case Int8ConvKernel::kPw64x128:
      return {64, 128, 0};
    case Int8ConvKernel::kHalo128x64:
    case Int8ConvKernel::kHaloWg128x64:
      return {128, 64, 0};
    default:
      return {};
  }
}

/// Whether the wgmma kernels run here: this build carries sm_90a code and the current device is
/// compute 9.0 (H100, H200, GH200).
bool int8ConvWgmmaAvailable();

/// Whether this build carries the wgmma kernels' sm_90a code (90 among the SASS architectures
/// of CMAKE_CUDA_ARCHITECTURES, CUDA 12 or newer).
bool int8ConvBuildHasWgmma();

/// One INT8 convolution, logical sizes (every index fits in int32).
struct Int8ConvPlan {
  Int8ConvKernel kernel = Int8ConvKernel::kMma128x128;
  int32_t vec = 16;                    ///< bytes per input load: 16 or 4 (dense), 4 or 1 (dw)
  int32_t N = 0, C = 0, H = 0, W = 0;  ///< input
  int32_t K = 0, P = 0, Q = 0;         ///< output channels and spatial size
  int32_t R = 0, S = 0;                ///< kernel
  int32_t strideH = 1, strideW = 1, dilH = 1, dilW = 1, padTop = 0, padLeft = 0;
  int32_t gemmK = 0;     ///< R * S * C (dense)
  int32_t gemmKPad = 0;  ///< gemmK rounded up to 64: the row length of the dense weights
  DeviceActivation act = DeviceActivation::kNone;
  float alpha = 0.f, beta = 0.f;  ///< activation parameters
  float yScale = 0.f;             ///< > 0: int8 output with this scale; 0: fp16 output
  bool hasZ = false;
  float zScale = 0.f;  ///< > 0: Z is int8 with this scale; 0: Z is fp16
  bool exact = false;  ///< the bit-exact epilogue; false: the fast one (see the top of the file)
  /// Fast epilogue, int8 output, activation none / Relu / LeakyRelu: alpha and bias hold
  /// alpha / s_y and B / s_y, so v comes out in output steps.
  bool prescaled = false;
  /// Fast epilogue: Z's multiplier (int8 Z: s_z, fp16 Z: 1; divided by s_y if prescaled).
  float zMul = 0.f;
  float yInv = 0.f;  ///< fast epilogue, int8 output: 1 / s_y
  /// Fast epilogue: a NaN can reach the quantize (an fp16 residual, or a non-finite alpha,
  /// bias or multiplier), which must then give 0 as the bit-exact quantize does.
  bool nanToZero = false;
  /// TMA and mma.sync kernels: the K steps split this many ways (1: not split; int8ConvSplits).
  int32_t splitK = 1;
  /// This launch is the last to read x (lastX) or its residual, or a folded layer's input
  /// (lastZ): the pointwise and halo kernels read them under an L2 evict-first policy
  /// (dev::l2ReadPolicy). Set at enqueue from builder::LaunchArgs::lastReads.
  bool lastX = false, lastZ = false;
};

/// Whether `kernel` is one of the mma.sync kernels.
inline bool isInt8ConvMmaKernel(Int8ConvKernel kernel) {
  return kernel == Int8ConvKernel::kMma128x128 || kernel == Int8ConvKernel::kMma128x64 ||
         kernel == Int8ConvKernel::kMma64x128;
}

/// Workspace of a launch of `plan`: the int32 partial sums of a split-K mma.sync kernel (S x
/// output pixels x whole tiles of channels); 0 otherwise (the TMA kernels add up in a cluster).
size_t int8ConvWorkspaceBytes(const Int8ConvPlan& plan);

/// The largest split-K factor: blocks in a cluster of the TMA kernels (16, a non-portable size
/// Hopper allows), and the mma.sync kernels' too.
constexpr int32_t kInt8ConvMaxSplitK = 16;

/// Device pointers of one launch. Weights: dense [K][gemmKPad] with k = (r * S + s) * C + c
/// (zero padded), depthwise [R][S][C]; alpha[K] = s_x * s_w[k]; bias[K] (zeros without one);
/// x, z and y NHWC.
struct Int8ConvArgs {
  const void* x = nullptr;
  const void* w = nullptr;
  const float* alpha = nullptr;
  const float* bias = nullptr;
  const void* z = nullptr;
  void* y = nullptr;
  void* workspace = nullptr;  ///< int8ConvWorkspaceBytes(plan) bytes, 16-byte aligned
};

/// Enqueues the convolution on `stream` (cudaStream_t); never synchronises. kInvalidArgument
/// for pointers not aligned to the plan's vector width.
Status launchInt8Conv(const Int8ConvPlan& plan, const Int8ConvArgs& args, void* stream);

/// The wgmma kernels' launch (int8_conv_sm90a.cu; launchInt8Conv calls it for them, once it has
/// checked the pointers and the grid's size): in builds without sm_90a code, kUnsupported.
Status launchInt8ConvWgmma(const Int8ConvPlan& plan, const Int8ConvArgs& args, void* stream);

/// The TMA-fed wgmma kernels' launch, the register-epilogue ones included
/// (int8_conv_tma_sm90a.cu; called as launchInt8ConvWgmma);
/// in builds without sm_90a code, kUnsupported.
Status launchInt8ConvTma(const Int8ConvPlan& plan, const Int8ConvArgs& args, void* stream);

/// Whether the pointwise kernels run the layer of `plan` (geometry set, gemmKPad included): a
/// 1x1 convolution without padding (the output covers the strided input exactly), C % 32 == 0,
/// C <= 256, K % 32 == 0. The device must also allow int8ConvPointwiseSharedBytes.
bool int8ConvPointwiseFits(const Int8ConvPlan& plan);

/// Whether the halo kernel runs the layer of `plan`: a 3x3 convolution of stride 1, dilation 1
/// and padding 1 on every side (P = H, Q = W), C % 32 == 0, C <= 128, K % 32 == 0, Q <= 128.
/// The device must also allow int8ConvHaloSharedBytes.
bool int8ConvHaloFits(const Int8ConvPlan& plan);

/// Dynamic shared memory of the halo kernel's launch at its fewest stages (two): the weights of
/// 64 channels at the nine window positions, alpha and bias, two halos of input rows.
int int8ConvHaloSharedBytes(const Int8ConvPlan& plan);

/// The halo kernel's launch (int8_conv_halo.cu; launchInt8Conv calls it for kHalo128x64).
Status launchInt8ConvHalo(const Int8ConvPlan& plan, const Int8ConvArgs& args, void* stream);

/// Dynamic shared memory of the wgmma halo kernel's launch at two stages (its weights in
/// wgmma's swizzled layout, no padding); 0 in builds without sm_90a code.
int int8ConvHaloWgSharedBytes(const Int8ConvPlan& plan);

/// The wgmma halo kernel's launch (int8_conv_halo_sm90a.cu; int8ConvHaloFits and C % 64 == 0);
/// in builds without sm_90a code, kUnsupported.
Status launchInt8ConvHaloWg(const Int8ConvPlan& plan, const Int8ConvArgs& args, void* stream);

/// Dynamic shared memory of a pointwise kernel's launch: plan.kernel's weights, alpha and bias,
/// and two stages of input and residual rows (plan.hasZ and plan.zScale say which residual).
int int8ConvPointwiseSharedBytes(const Int8ConvPlan& plan);

/// The pointwise kernels' launch (int8_conv_pointwise.cu; called by launchInt8Conv).
Status launchInt8ConvPointwise(const Int8ConvPlan& plan, const Int8ConvArgs& args, void* stream);

/// A pointwise layer `p` whose residual Z is the output of another 1x1 INT8 layer `d` (ResNet's
/// downsample branch), folded into it: each block computes its tile's residual from d's input,
/// rounds it to int8 as d's own pointwise kernel would, and adds it from registers, so Z is
/// never written or read. Fits where p's kernel is a pointwise one, both layers are 1x1 layers
/// the pointwise kernels run (int8ConvPointwiseFits) with the same output pixels and channels,
/// p has a residual and d none nor an activation, both in the lean epilogue (fast rounding,
/// int8 output and residual, sums within 2^22), and both layers' weights with two stages of
/// both inputs fit in a block's share of shared memory; `why` says what is missing.
bool int8ConvPointwiseFoldFits(const Int8ConvPlan& p, const Int8ConvPlan& d, std::string* why);
/// Dynamic shared memory of a folded launch at two stages.
int int8ConvPointwiseFoldSharedBytes(const Int8ConvPlan& p, const Int8ConvPlan& d);
/// The folded launch: `a` as for launchInt8ConvPointwise but without z; `da` holds d's input
/// (x), weights, alpha and bias (prescaled by Z's scale, as d's own tactic makes them).
Status launchInt8ConvPointwiseFold(const Int8ConvPlan& p, const Int8ConvArgs& a,
                                   const Int8ConvPlan& d, const Int8ConvArgs& da, void* stream);

/// A pointwise layer `p` followed by the 1x1 layer `c` that reads its output (ResNet: a block's
/// expansion and the next block's reduction), chained: each block writes its tile of p's int8
/// outputs to memory as usual, keeps it in shared memory and computes c's outputs for those
/// pixels from it, so c's input is never read back from memory. Fits where p's kernel is
/// pw64x256 or pw128x128 and p's output channels fit one block's (p.K <= its BN), both layers
/// are 1x1 layers the pointwise kernels run (int8ConvPointwiseFits), c reads p's output pixel
/// for pixel (stride 1) and has no residual, both in the lean epilogue, and both layers'
/// weights with two stages fit in a block's share of shared memory; `why` says what is missing.
bool int8ConvPointwiseChainFits(const Int8ConvPlan& p, const Int8ConvPlan& c, std::string* why);
/// Dynamic shared memory of a chained launch at two stages.
int int8ConvPointwiseChainSharedBytes(const Int8ConvPlan& p, const Int8ConvPlan& c);
/// The chained launch: `a` as for launchInt8ConvPointwise; `ca` holds c's weights (rows
/// unpermuted, c.gemmKPad bytes apart), alpha, bias (prescaled as c's own tactic makes them)
/// and output y (its x is p's output, read from shared memory).
Status launchInt8ConvPointwiseChain(const Int8ConvPlan& p, const Int8ConvArgs& a,
                                    const Int8ConvPlan& c, const Int8ConvArgs& ca, void* stream);

/// Whether the TMA kernels run here: the wgmma kernels do (int8ConvWgmmaAvailable) and the
/// CUDA driver has the tensor-map encoders (looked up once).
bool int8ConvTmaAvailable();

/// Whether the TMA kernels with K steps of `bk` bytes (64 or 128) run the layer of `plan`
/// (geometry set, gemmKPad included): C % bk == 0, strides of 1 to 8, and the im2col bounding
/// box of a 4-D tensor map (corners within [-128, 127]: padding, and the last window's
/// overhang past the image). False in builds without sm_90a code.
bool int8ConvTmaFits(const Int8ConvPlan& plan, int bk);

/// Whether the split-K TMA kernel `kernel` runs in clusters of `split` blocks on the current
/// device (asked of the driver once per device, kernel and split: cudaOccupancyMaxActiveClusters);
/// true for split 1, false for the 128x256 tile and in builds without sm_90a code. The provider
/// offers only the splits that run.
bool int8ConvTmaSplitRuns(Int8ConvKernel kernel, int split);

/// Whether the layer of `plan` has at least half as many tiles of `bm` output pixels x `bn`
/// channels as the device has multiprocessors (`sms`): where the provider offers the
/// one-block-a-multiprocessor TMA kernels (tmard, tmap).
bool int8ConvManyTiles(const Int8ConvPlan& plan, int bn, int sms, int bm = 128);

/// The split-K factors the provider offers for plan.kernel, a TMA kernel (not 128x256) or an
/// mma.sync one, on a device of `sms` multiprocessors: for a layer of fewer tiles than
/// multiprocessors, the two largest S of 2, 4, 8 and 16 with tiles * S <= 2 * sms (two blocks
/// an SM) and at least one K step per split; none otherwise (TMA kernels: the provider also
/// asks int8ConvTmaSplitRuns).
std::vector<int> int8ConvSplits(const Int8ConvPlan& plan, int sms);

}  // namespace edgeinfer::cuda
