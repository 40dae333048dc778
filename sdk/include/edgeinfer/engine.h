// A built engine and the contexts that run it.
//
//   auto engine = edgeinfer::Builder::buildFromFile("model.onnx");
//   auto ctx = (*engine)->createExecutionContext();
//   (*ctx)->setInput("input", tensor);
//   (*ctx)->execute();
//   edgeinfer::Tensor out = *(*ctx)->getOutput("output");
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "edgeinfer/types.h"

namespace edgeinfer {

enum class Backend : uint8_t { kAuto = 0, kCpu = 1, kCuda = 2 };
enum class Precision : uint8_t { kFp32 = 0, kFp16 = 1, kInt8 = 2 };

const char* backendName(Backend b);
const char* precisionName(Precision p);

/// Name, element type and shape of an engine input or output (-1 marks a dynamic dim).
struct TensorDesc {
  std::string name;
  DataType dtype = DataType::kUndefined;
  Shape shape;
  std::vector<std::string> dimNames;  // symbolic names for dynamic dims ("" if none)
};

/// Facts recorded in every engine file; a load checks them against the running SDK/device.
struct EngineInfo {
  std::string sdkVersion;  // e.g. "0.1.0"
  Backend backend = Backend::kCpu;
  Precision precision = Precision::kFp32;
  std::string deviceKey;  // identifies the device the engine was built for
  std::string modelName;
  std::string modelHash;  // hex SHA-256-free FNV digest of the ONNX bytes it was built from
  int64_t nodeCount = 0;
  /// Bytes of the optimised graph's constants (weights), from the engine's graph (not stored
  /// in the file). An engine with several shape profiles reports the sum over its profiles
  /// (its file holds each distinct weight once); on the GPU, equal converted weights are held
  /// once (ContextStats::weightBytes says what the GPU holds).
  int64_t weightBytes = 0;
};

/// The input shapes of one shape profile (BuilderConfig::shapeProfiles): input name -> shape.
using ShapeProfile = std::map<std::string, Shape>;

/// "x:1x3x224x224,y:1x10" (a dynamic dim, which only CPU engines keep, is "?").
std::string formatShapeProfile(const ShapeProfile& profile);

/// The shapes an input may take in an engine with shape ranges (BuilderConfig::shapeRanges),
/// like TensorRT's optimisation profile: any shape with min[d] <= dim <= max[d] in every dim;
/// the builder times and plans `opt`.
struct ShapeRange {
  Shape min, opt, max;
  bool operator==(const ShapeRange& o) const {
    return min == o.min && opt == o.opt && max == o.max;
  }
};
/// Input name -> its range.
using ShapeRanges = std::map<std::string, ShapeRange>;

/// "x:[1x3x224x224 .. 8x3x224x224 .. 32x3x224x224]" (min .. opt .. max).
std::string formatShapeRanges(const ShapeRanges& ranges);

class ExecutionContext;

/// Memory and launch figures of an execution context (memory: the largest over the input
/// shapes it has run; launch counts: summed over them, e.g. one graph capture per shape).
struct ContextStats {
  int64_t activationArenaBytes = 0;  ///< activation memory after liveness planning (peak)
  int64_t activationNaiveBytes = 0;  ///< what one buffer per activation would take
  int64_t workspaceBytes = 0;        ///< scratch memory of the kernels (GPU)
  /// Device memory the engine took when it was loaded from a file (weights, constants, cuDNN
  /// plans; shared by its contexts). Weights another engine of the process already holds (an
  /// earlier shape profile, another load of the same file) are shared and not counted again.
  /// For an engine built in this process it undercounts: the tactics' weights were uploaded
  /// while they were timed, so only later uploads count.
  int64_t weightBytes = 0;
  bool cudaGraphs = false;  ///< runs replay CUDA graphs
  /// CUDA streams the layers run on: independent branches side by side (GPU; 1 elsewhere,
  /// or with EDGEINFER_DISABLE_CONCURRENT_BRANCHES=1).
  int64_t streams = 1;
  int64_t graphCaptures = 0;      ///< graphs captured and instantiated (one per shape)
  int64_t graphUpdates = 0;       ///< cudaGraphExecUpdate calls for new buffer addresses
  int64_t graphReplays = 0;       ///< runs that replayed a graph
  int64_t cpuFallbackLayers = 0;  ///< layers run on the CPU reference
  /// GPU: outputs its last kernel writes straight into the context's pinned host buffer (small
  /// outputs no layer reads; no copy after the run; EDGEINFER_DISABLE_ZERO_COPY_OUTPUTS=1: none),
  /// and their names.
  int64_t zeroCopyOutputs = 0;
  std::vector<std::string> zeroCopyOutputNames;
  double lastGpuMs = 0.0;  ///< GPU time of the last run's layers (CUDA events; no copies)
  /// Engines with shape ranges: the shapes this context's runs had the engine specialise for
  /// (built once per shape and engine, shared by its contexts; a shape another context had
  /// specialised first is not counted), and the milliseconds those builds took.
  int64_t shapeSpecializations = 0;
  double specializationMs = 0.0;
};

/// Per-context runtime choices.
struct ContextOptions {
  /// Capture each input shape's inference into one CUDA graph after a warm-up run and
  /// replay it. Also switched off by EDGEINFER_DISABLE_CUDA_GRAPHS=1.
  bool cudaGraphs = true;
};

class Engine {
 public:
  virtual ~Engine() = default;

  virtual const std::vector<TensorDesc>& inputs() const = 0;
  virtual const std::vector<TensorDesc>& outputs() const = 0;
  virtual const EngineInfo& info() const = 0;

  /// The input shapes the engine was built for, one entry per shape profile, in build order
  /// (every input named). An engine built for one shape (no profiles, or one) returns one
  /// entry, its inputs' shapes (a CPU engine may keep dynamic dims: -1, any size). A context
  /// runs the profile whose shapes equal the bound inputs' (-1 matches any size).
  virtual std::vector<ShapeProfile> profiles() const;

  /// An engine with shape ranges (BuilderConfig::shapeRanges): every ranged input's min, opt
  /// and max; empty for any other engine. Such an engine's profiles() is its opt shapes, and
  /// its inputs() mark the dims that vary within a range as -1.
  virtual ShapeRanges shapeRanges() const { return {}; }

  /// Device memory the engine took when it was created (its weights, constants and cuDNN
  /// plans; ContextStats::weightBytes): 0 on the CPU. Weights another engine of the process
  /// already held were shared, not counted. A shape-profile engine sums its profiles'.
  virtual int64_t deviceWeightBytes() const { return 0; }

  /// A context holds the per-run state (activations); several contexts may share one
  /// engine and run concurrently from different threads.
  virtual Expected<std::unique_ptr<ExecutionContext>> createExecutionContext(
      const ContextOptions& options) const = 0;
  Expected<std::unique_ptr<ExecutionContext>> createExecutionContext() const {
    return createExecutionContext(ContextOptions{});
  }

  /// The engine as a versioned, checksummed byte string / file.
  virtual Expected<std::vector<uint8_t>> serialize() const = 0;
  Status save(const std::string& path) const;

  /// Loads an engine. Fails with kCorruptFile (truncated, bad checksum), kVersionMismatch
  /// (another format version) or kDeviceMismatch (built for another device), naming both
  /// sides, instead of running something it cannot trust.
  static Expected<std::unique_ptr<Engine>> deserialize(const void* data, size_t size);
  static Expected<std::unique_ptr<Engine>> load(const std::string& path);
};

class ExecutionContext {
 public:
  virtual ~ExecutionContext() = default;

  /// The engine this context runs (it must outlive the context).
  virtual const Engine& engine() const = 0;

  /// Binds an input. Its shape must match the engine's input, dynamic dims excepted (an engine
  /// with several shape profiles: the shape of that input in one of its profiles); the
  /// tensor is read during execute() and not copied before. GPU engines also take a device
  /// tensor (of the engine's device), read in place without a host copy.
  virtual Status setInput(const std::string& name, const Tensor& tensor) = 0;
  /// Runs the engine on the bound inputs. An engine with several shape profiles runs the
  /// profile whose shapes equal the bound inputs' shapes (kInvalidArgument listing the
  /// profiles when none does); each profile's state (GPU: stream, arena, CUDA graph) is
  /// created on the first run of its shape.
  virtual Status execute() = 0;
  /// An output of the last execute() (valid until the next execute()).
  virtual Expected<Tensor> getOutput(const std::string& name) const = 0;
  /// GPU contexts: the next execute() waits, on the GPU and without blocking the host, for
  /// `cudaEvent` (a cudaEvent_t of the engine's device that the caller has recorded, e.g. after
  /// queuing the kernels that write a device input on a stream of its own) before it reads its
  /// inputs. It applies to the next execute() only, which is ordered after the event's work
  /// whatever stream that ran on. kUnsupported on a context that does not run on a GPU.
  virtual Status waitForEvent(void* cudaEvent);

  /// Activation memory this context uses (planned after its first run of each input shape).
  virtual ContextStats stats() const = 0;

  /// Convenience: binds `inputs`, executes, returns every output by name.
  Expected<std::map<std::string, Tensor>> run(const std::map<std::string, Tensor>& inputs);
};

/// A device copy of a host tensor on CUDA device `deviceId` (freed with the last Tensor that
/// shares it), to bind GPU-resident inputs without a per-run host copy. kUnsupported in a
/// build without CUDA or when no GPU is usable.
Expected<Tensor> copyToDevice(const Tensor& host, int deviceId = 0);

/// Whether GPU engines can be built and run here on CUDA device `deviceId` (a build with CUDA
/// and a usable GPU); if not, `why` (when given) says why, e.g. "this EdgeInfer was built
/// without CUDA" or the driver's words. Backend::kAuto picks the GPU exactly when this is true.
bool gpuUsable(int deviceId = 0, std::string* why = nullptr);

/// Version of this SDK ("major.minor.patch").
const char* sdkVersion();

}  // namespace edgeinfer
