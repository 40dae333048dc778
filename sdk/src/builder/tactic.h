// Tactics: the candidate implementations of one layer that the builder times on the device
// (docs/design/gpu-backend.md). A TacticProvider answers which of its implementations can run a
// layer (ggml's supports_op, ncnn's support_* flags); the builder times those, consults the
// timing cache, accounts for reformat costs and keeps the fastest. Nothing here depends on
// CUDA headers: device pointers and streams travel as void*.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "edgeinfer/engine.h"
#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "graph/graph.h"

namespace edgeinfer::builder {

/// Memory layout of a 4-D activation (other ranks are always kLinear: row-major as declared).
enum class Layout : uint8_t { kLinear = 0, kNCHW = 1, kNHWC = 2 };
const char* layoutName(Layout l);

/// A float tensor stored as kInt8 is quantized with its own scale (LayerContext's
/// inputScales / outputScales, PlanTensor::scale): q = clamp(round_half_even(x / s), -128, 127).
struct TensorFormat {
  DataType dtype = DataType::kFloat32;
  Layout layout = Layout::kLinear;
  bool operator==(const TensorFormat& o) const { return dtype == o.dtype && layout == o.layout; }
  bool operator!=(const TensorFormat& o) const { return !(*this == o); }
};

/// One layer as the tactics see it: the node, its static input/output shapes (logical,
/// NCHW order) and element types, and read access to constant inputs (weights).
struct LayerContext {
  const graph::Node* node = nullptr;
  const graph::Graph* graph = nullptr;
  std::vector<Shape> inputShapes;  // empty Shape for an absent optional input
  std::vector<DataType> inputTypes;
  std::vector<Shape> outputShapes;
  std::vector<DataType> outputTypes;
  /// INT8 (issue 6): per input / output, the scale a float tensor is quantized with when a
  /// tactic reads or writes it as kInt8 (from the calibration cache), 0 where it has none.
  /// Empty, or 0 everywhere, outside INT8 layers: no tactic may then use int8 storage.
  std::vector<float> inputScales;
  std::vector<float> outputScales;
  /// INT8 kernels round bit for bit as the CPU reference does (BuilderConfig::int8BitExact);
  /// false: their fast epilogue, within one quantization step of it.
  bool int8BitExact = false;
  /// INT8: the layer that produces this layer's residual Z (a FusedConv's input 3), folded into
  /// this layer (cuda-i8's ".fold" tactics): the plan holds it as a view step whose output
  /// aliases its input, so the tactic reads that layer's input where Z would be and computes Z
  /// itself (ResNet's downsample branch). Its context carries its own scales (input: the
  /// folded layer's input, output: Z's). Null for every other layer.
  std::shared_ptr<const LayerContext> foldedZ;
  /// INT8: the 1x1 layer that reads this layer's output 0, chained into it (cuda-i8's ".chain"
  /// tactics): the tactic also writes that layer's output, as this layer's last output (one
  /// more entry in outputShapes, outputTypes and outputScales than the node has outputs), and
  /// the plan holds no step of that layer (ResNet: a block's expansion and the next block's
  /// reduction). Its context carries its own scales (input: this layer's output 0, output:
  /// its own). Null for every other layer.
  std::shared_ptr<const LayerContext> chained;

  bool hasInput(size_t i) const { return node->hasInput(i); }
  float inputScale(size_t i) const { return i < inputScales.size() ? inputScales[i] : 0.f; }
  float outputScale(size_t i) const { return i < outputScales.size() ? outputScales[i] : 0.f; }
  const Tensor* constantInput(size_t i) const {
    return node->hasInput(i) ? graph->constant(node->inputs[i]) : nullptr;
  }
  /// Canonical text of everything that decides a timing: op, attributes, shapes, types. The
  /// timing cache keys entries by it (with the device key).
  std::string signature(Precision precision) const;
};

/// Device pointers of one launch, in the formats the tactic declared.
struct LaunchArgs {
  std::vector<const void*> inputs;  // nullptr for an absent optional input
  std::vector<void*> outputs;
  void* workspace = nullptr;
  size_t workspaceBytes = 0;
  void* stream = nullptr;  // cudaStream_t
  /// Bit k: no later step reads input k (an activation, not a graph output), so a kernel may
  /// read it under an L2 evict-first policy and leave more of the L2 to what it writes. Only a
  /// hint: 0 (the builder's timing) is always correct.
  uint32_t lastReads = 0;
};

class Tactic {
 public:
  virtual ~Tactic() = default;
  /// Stable identifier: the implementation and its parameters ("cuda.eltwise.v4",
  /// "cudnn.e12.k3=1"). The timing cache and the engine file store it.
  virtual std::string id() const = 0;
  virtual TensorFormat inputFormat(size_t index) const = 0;
  virtual TensorFormat outputFormat(size_t index) const = 0;
  virtual size_t workspaceBytes() const { return 0; }
  /// True for a constant input that initialize() reads and converts itself (weights, bias,
  /// Slice bounds...): the engine then neither uploads it nor passes it at enqueue (its
  /// LaunchArgs pointer is nullptr). Other constant inputs are uploaded once, in the format
  /// inputFormat() declares, and passed like activations.
  virtual bool consumesInput(size_t index) const {
    (void)index;
    return false;
  }
  /// True for an INT8 tactic whose tensors may all be float (it quantizes its input itself, and
  /// dequantizes its result): its plan step is still recorded at INT8, so that a load asks the
  /// INT8 providers for it.
  virtual bool quantizesInternally() const { return false; }
  /// Optional, build time, before initialize(): the host-only part of it (compiling a plan),
  /// which the builder runs for a layer's candidates on several threads
  /// at once: no stream work, and nothing shared that is not thread-safe. A failure here is
  /// initialize()'s failure; prepare() is idempotent and initialize() calls it when the
  /// builder did not.
  virtual void prepare(const LayerContext& layer) { (void)layer; }
  /// Build/load time: prepares weights (layout, precision) on the device and any plans for
  /// the layer's shapes. Called once per engine, never per inference.
  virtual Status initialize(const LayerContext& layer) = 0;
  /// After initialize(): what lets a later load skip costly preparation, opaque to everyone
  /// but the provider (a cuDNN execution plan as JSON, its runtime-compiled kernel included);
  /// empty when the tactic has nothing worth keeping. Stored in the engine plan and handed
  /// back through TacticProvider::restore().
  virtual std::string serializedState() const { return {}; }
  /// Enqueues the layer on args.stream; must not synchronise, allocate or copy to the host
  /// (so it can be captured into a CUDA Graph).
  virtual Status enqueue(const LaunchArgs& args) = 0;
};

class TacticProvider {
 public:
  virtual ~TacticProvider() = default;
  virtual std::string name() const = 0;
  /// Every implementation of this provider that supports the layer at this precision.
  virtual std::vector<std::unique_ptr<Tactic>> candidates(const LayerContext& layer,
                                                          Precision precision) = 0;
  /// The candidate with this id (an engine load asks for the tactic it recorded), or null.
  /// The default scans candidates(); a provider whose enumeration is costly narrows it down
  /// by what its ids encode.
  virtual std::unique_ptr<Tactic> find(const LayerContext& layer, Precision precision,
                                       const std::string& id) {
    for (auto& t : candidates(layer, precision))
      if (t->id() == id) return std::move(t);
    return nullptr;
  }
  /// Like find(), with the state the tactic serialized when the engine was built (may be
  /// empty). A provider that can rebuild the tactic from it does so; a state it cannot use
  /// (another library version) falls back to find(). The default ignores the state.
  virtual std::unique_ptr<Tactic> restore(const LayerContext& layer, Precision precision,
                                          const std::string& id, const std::string& state) {
    (void)state;
    return find(layer, precision, id);
  }
};

}  // namespace edgeinfer::builder
