// Building an engine: import an ONNX model, optimise the graph, pick implementations for
// the target backend and produce an Engine that can be run or serialised.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edgeinfer/engine.h"
#include "edgeinfer/status.h"

namespace edgeinfer {

/// Graph optimisation passes. Each can be switched off here or, at build time, through the
/// environment variable named beside it (set to 1 to disable), so a suspected mis-fusion
/// can be confirmed without recompiling.
struct PassOptions {
  bool constantFolding = true;     ///< EDGEINFER_DISABLE_CONSTANT_FOLDING
  bool eliminateIdentity = true;   ///< EDGEINFER_DISABLE_ELIMINATE_IDENTITY (Identity, Dropout)
  bool eliminateDeadNodes = true;  ///< EDGEINFER_DISABLE_DEAD_NODE_ELIMINATION
  bool foldBatchNorm = true;       ///< EDGEINFER_DISABLE_FOLD_BATCHNORM (into Conv/Gemm)
  bool fuseConvActivation = true;  ///< EDGEINFER_DISABLE_FUSE_CONV (Conv+bias+act, +residual)
  bool fuseGemmActivation = true;  ///< EDGEINFER_DISABLE_FUSE_GEMM (Gemm/MatMul+bias+act)
  /// EDGEINFER_DISABLE_FUSE_ELEMENTWISE: chains of elementwise ops (SiLU, HardSwish, GELU...)
  /// become one FusedElementwise node, run as one kernel.
  bool fuseElementwise = true;
  /// EDGEINFER_DISABLE_FUSION=1 switches off every fusion above at once.
  /// EDGEINFER_DISABLE_EXPLICIT_QUANTIZATION: GPU INT8 builds of a model with its own
  /// QuantizeLinear/DequantizeLinear nodes take their int8 scales from those nodes (the pairs
  /// are removed, docs/design/int8-calibration.md "Explicit Q/DQ models"). Off: the Q/DQ nodes
  /// run as ops and INT8 needs a calibration cache, as for any other model.
  bool explicitQuantization = true;
  /// EDGEINFER_DISABLE_LOWER_QOPERATORS: GPU builds turn QLinearConv / QLinearMatMul (with
  /// constant scales) into DequantizeLinear -> Conv / MatMul -> QuantizeLinear, which run on
  /// the GPU (within one quantization step of the integer reference). Off: they run on the
  /// CPU fallback, exactly.
  bool lowerQOperators = true;
};

/// How the GPU builder times each candidate implementation ("tactic") of a layer: one
/// untimed launch and one timed launch (the probe), then `iterations` launches captured into
/// one CUDA graph (as the runtime runs them), `warmup` replays, and the median of `repeats`
/// replays timed with CUDA events.
struct TimingOptions {
  int warmup = 2;
  int iterations = 8;
  int repeats = 5;
  /// Slow candidates get fewer launches per replay, so that a replay takes about this long
  /// (at least one launch): the graph exists to hide launch overhead, which does not matter
  /// next to a millisecond kernel. A 10 ms convolution is then timed with 9 launches, not 58.
  double replayMs = 1.0;
  /// A candidate whose probe is over this many times the fastest time of the layer so far
  /// (and over 0.05 ms) is not timed further: the probe is its time. It cannot win, and big
  /// layers have cuDNN engines 100x slower than their best. 0 times every candidate fully.
  double pruneFactor = 8.0;
  /// Threads that prepare a layer's candidates at once before they are timed (the host part
  /// of initialising them: compiling cuDNN execution plans), which is most of a cold build.
  /// 0 (the default): the machine's cores, at most 8; 1: one at a time. On an H100 host with
  /// 16 cores, 8 threads halved a cold ResNet-50 build (docs/performance.md).
  int prepareThreads = 0;
};

/// Everything that decides how an engine is built. Defaults are what a user wants for a
/// first try; every field takes effect at Builder::build().
struct BuilderConfig {
  /// Where the engine runs. kAuto picks the GPU when one is usable, else the CPU.
  Backend backend = Backend::kAuto;
  /// Numeric precision of the kernels (the CPU reference always computes in FP32).
  Precision precision = Precision::kFp32;
  PassOptions passes;
  /// Value used for every dynamic (unnamed or symbolic) input dimension when the engine's
  /// static shapes are planned. -1 keeps them dynamic (shapes are resolved per run).
  int64_t dynamicDimDefault = -1;
  /// Input shapes to build for, by input name (like trtexec's --shapes): each fixes the
  /// dynamic dims of its input and wins over dynamicDimDefault. A shape must have the
  /// input's rank, agree with every static dim of the model and have dims >= 1; a name the
  /// model lacks is an error too (each names the input, the dim and both values).
  std::map<std::string, Shape> inputShapes;
  /// Shape profiles: one input-shape map per profile (each over inputShapes: a profile names
  /// only the inputs it sets, the others take inputShapes'). Two or more make an engine that
  /// holds one complete build per profile (the GPU builder times and plans each; the memory
  /// plan is static per profile); a context runs the profile whose shapes equal the bound
  /// inputs' (Engine::profiles() lists them). Each profile holds its own copy of the weights
  /// on the GPU and in the engine file (memory x profiles; a CPU engine shares the host copy
  /// of the constants that are equal across profiles). Two profiles of equal shapes are an
  /// error. One profile is the same as inputShapes (an ordinary single-shape engine file).
  std::vector<std::map<std::string, Shape>> shapeProfiles;
  /// Shape ranges, like trtexec's --minShapes/--optShapes/--maxShapes: the engine runs any
  /// input shape within min..max (per dim). The builder times and plans the opt shapes (the
  /// inputs without a range take inputShapes / the model's shapes). A context given other
  /// shapes has the engine specialise for them on its first run of them: the graph optimised
  /// for those shapes, each layer taking the device timing cache's choice for its new shapes
  /// when the cache has one, else the opt build's tactic where that is a candidate (no
  /// timing), else timing. It is done once per shape and engine and shared by the engine's
  /// contexts, and equal converted weights are held once on the GPU; docs/performance.md has
  /// what it costs (ResNet-50) and how a pre-seeded timing cache gives each shape its own timed
  /// tactics. The engine file holds the model (unoptimised) and the opt build.
  /// Cannot be combined with shapeProfiles or a calibration cache (INT8 of models with their
  /// own Q/DQ scales works); min <= opt <= max in every dim, of the input's rank.
  ShapeRanges shapeRanges;
  /// Reject models whose single tensor (input, weight or inferred activation) would exceed
  /// this many bytes: protects against corrupt files declaring absurd dimensions.
  int64_t maxTensorBytes = int64_t{4} << 30;  // 4 GiB
  /// Accept NaN/Inf in float weights (rejected by default: they usually mean a corrupt or
  /// badly exported file).
  bool allowNonFiniteWeights = false;
  /// Directory holding external-data files of the model; default: the model's directory.
  std::string externalDataDir;
  /// Calibration cache (edgeinfer calibrate, edgeinfer/calibration.h). When set, the build
  /// loads it and fails if it is unreadable, made for another model (hashes named), or lacks
  /// a range for an activation input of any quantizable layer of the optimised graph. GPU
  /// INT8 builds need it: its ranges are the int8 tensors' scales and its policy keeps layers
  /// in FP16. (The CPU backend computes in FP32 and only validates it.) A model with its own
  /// Q/DQ scales (explicit quantization) needs none; given one, the model's scales and INT8
  /// layers win, and the cache serves only the tensors and layers the model leaves unquantized.
  std::string calibrationCachePath;
  /// INT8 layers use an INT8 tactic whenever one is offered, even where an FP16 one is faster
  /// (TensorRT's "obey precision constraints"). Off: INT8 competes with FP16/FP32 by time.
  bool strictPrecision = false;
  /// A timed INT8 GPU build (strictPrecision off; no shape ranges, at most one shape profile)
  /// also builds the engine with every layer that has an INT8 kernel in INT8 (strictPrecision's),
  /// runs both on the device (GPU time of the layers, twice each, medians of 10 runs on fixed
  /// pseudo-random inputs) and keeps the strict one if it is at least 1 % faster, as an info
  /// message says: the per-layer choice cannot see that a run of INT8 layers saves the quantize
  /// and dequantize between them (ResNet-50, batch 64, docs/performance.md). The second build
  /// reads the timing cache the first one wrote where there is one (useTimingCache), else it
  /// times the INT8 candidates again; both engines are on the GPU while it runs. Off: the
  /// per-layer choice alone.
  bool int8WholeEngineChoice = true;
  /// With int8WholeEngineChoice: before that comparison, runs of the all-INT8 engine's network
  /// stages (graph::networkStages: ResNet's stem, pool, layer1, layer2..., the runs of blocks
  /// between cuts where one tensor is alive) have their INT8 layers tried in FP16 in trial
  /// builds of the whole engine, in rounds, the best run of a round kept when the engine's GPU
  /// time drops by at least 0.5 % (medians measured in turn; never the last INT8 layers, never a
  /// layer layerPrecision or a forced tactic sets). Layers timed alone cannot show how a run of
  /// them behaves in the engine: ResNet-50 at batch 1 on an H200 ran 6 % faster with layer1 and
  /// layer2 in FP16 than all-INT8, which per-layer timing rated the other way
  /// (docs/performance.md). A build and a run per trial, at most 16 (ResNet-50 at batch 1: 28 s);
  /// the outcome is kept in the timing cache (builder/stage_record.h), and a rebuild of the same
  /// all-INT8 engine builds and measures the recorded run once instead. Not with useTimingCache
  /// off or timingCacheMissIsError. Off: the all-INT8 engine as it is.
  bool int8StageSearch = true;
  /// GPU builds of one shape: layers whose tactic won its timing by less than 15 % over one of
  /// another family (the tactic id up to its first '.': cuda-i8, cublaslt-i8, cudnn, cuda-dw...;
  /// in a timed INT8 build an FP16 candidate can be the runner-up of an INT8 one) or over another
  /// kernel of its family (the id up to its second '.': cuda-i8.tmard128x256k128) get that
  /// runner-up in trial builds of the whole engine, every other layer keeping its tactic, at
  /// most 10 groups of equal layers (one timing signature), each kept when the engine's GPU time
  /// drops by at least 0.5 % (medians measured in turn). Candidates are timed alone, and in the
  /// engine a kernel can run slower or faster after the one before it: ResNet-50 strict INT8 at
  /// batch 64 on an H200 ran in 1.230 ms with the trials against 1.267-1.274 ms without, its
  /// build taking 31-34 s instead of 20-23 s (docs/performance.md). The outcome is kept in the
  /// timing cache (builder/stage_record.h): a rebuild of the same engine builds and measures
  /// the kept choices once instead of trying again (with useTimingCache off or
  /// timingCacheMissIsError nothing is recorded: each build tries again). Engines faster than
  /// runnerUpTrialsMinEngineMs are not tried. A layer the user forced keeps its tactic.
  bool tryRunnerUpsInEngine = true;
  /// The engine GPU time under which tryRunnerUpsInEngine tries nothing: a 0.5 % gain of a
  /// 0.1 ms engine is half a microsecond, the resolution of the CUDA event timer that measures
  /// it. 0: try every engine.
  double runnerUpTrialsMinEngineMs = 0.1;
  /// INT8 kernels of our own (cuda-i8) round bit for bit as the CPU backend's INT8 emulation
  /// does: every float operation of the epilogue rounded on its own, the quantize's division
  /// correctly rounded; cuBLASLt's own INT8 epilogue (cublaslt-i8 "e8", within one step) is not
  /// offered then. Off (the default): fused multiply-adds and a reciprocal, within one
  /// quantization step of it (a differing output lies within rounding noise of a half step),
  /// 5-18 % faster per layer on ResNet-50 (docs/performance.md). The engine file records the
  /// rounding in its tactics (the fast ones' ids end ".f").
  bool int8BitExact = false;

  // ---- GPU backend ----
  /// CUDA device the engine is built for (and timed on).
  int deviceId = 0;
  /// Timing cache file. Empty: "$XDG_CACHE_HOME/edgeinfer/<device-key>/timing.cache".
  std::string timingCachePath;
  /// Read and update the timing cache (false: time every layer, write nothing).
  bool useTimingCache = true;
  /// A layer whose timings are not in the cache is an error instead of being timed
  /// (reproducible builds from a pre-seeded cache).
  bool timingCacheMissIsError = false;
  TimingOptions timing;
  /// Forced tactics by layer (node) name, like TensorRT's algorithm selector; an id that is
  /// not a candidate of the layer is a build error listing the candidates.
  std::map<std::string, std::string> forcedTactics;
  /// File of forced tactics ("layer = tactic-id" lines or a JSON object), merged with
  /// forcedTactics (the map wins).
  std::string forcedTacticsFile;
  /// Per-layer precision overrides by layer name (e.g. keep a sensitive layer in kFp32).
  std::map<std::string, Precision> layerPrecision;
  /// A layer no GPU kernel supports runs on the CPU reference (with copies and a sync, and
  /// without CUDA graphs); false makes such a layer a build error naming it. Also decides the
  /// data-dependent layers (NonZero, NonMaxSuppression: output sizes depending on the values)
  /// of an engine of one shape: with it, they and every layer after them run on the CPU after
  /// the GPU part (runtime/split_engine.h); without it, the build is refused naming them.
  bool allowCpuFallback = true;
};

class Builder {
 public:
  /// Imports, checks, optimises and compiles the model at `onnxPath`.
  static Expected<std::unique_ptr<Engine>> buildFromFile(const std::string& onnxPath,
                                                         const BuilderConfig& config = {});
  /// Same, from a serialized ModelProto in memory (external data is resolved against
  /// config.externalDataDir).
  static Expected<std::unique_ptr<Engine>> buildFromBuffer(const void* data, size_t size,
                                                           const BuilderConfig& config = {});
  /// The graph before and after optimisation, with shapes (what `edgeinfer inspect` prints).
  static Expected<std::string> inspect(const std::string& onnxPath,
                                       const BuilderConfig& config = {});
};

}  // namespace edgeinfer
