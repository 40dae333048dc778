// The execution plan of a GPU engine: which implementation ("tactic") runs each layer, in
// which storage format every tensor lives, and where reformats and views sit. The builder
// (builder/cuda/gpu_builder.cpp) makes it by timing; the engine file stores it as JSON in its
// header (builder/engine_format.h) so a load recreates every tactic by id without timing.
//
// Tensors are *physical*: one graph value may exist in several formats (fp16 NHWC for the
// convolutions, fp32 row-major for a CPU-fallback layer), each a separate plan tensor
// produced by a reformat step. A view (Reshape, Flatten, Squeeze, Unsqueeze) writes nothing:
// its output shares the storage of its input (`aliasOf`).
//
// Plain C++ (no CUDA headers).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "builder/tactic.h"
#include "edgeinfer/engine.h"
#include "graph/graph.h"

namespace edgeinfer::runtime::cuda {

struct PlanTensor {
  std::string value;             ///< the graph value it holds
  builder::TensorFormat format;  ///< storage type and layout (canonical, see canonicalFormat)
  bool constant = false;         ///< uploaded once per engine from the graph's constant
  int aliasOf = -1;              ///< a view of this tensor (shares its storage)
  /// INT8 (issue 6): a float value stored as kInt8 holds round(x / scale); 0 otherwise.
  float scale = 0.f;
};

enum class StepKind : uint8_t {
  kTactic = 0,    ///< a GPU tactic runs node `node`
  kReformat = 1,  ///< converts tensor inputs[0] into outputs[0] (another format)
  kView = 2,      ///< node `node` is a view: outputs[0] aliases inputs[0]
  kCpu = 3,       ///< node `node` runs on the CPU reference (copies and a sync)
};
const char* stepKindName(StepKind k);

struct PlanStep {
  StepKind kind = StepKind::kTactic;
  int node = -1;                           ///< index in graph.nodes (not for kReformat)
  std::string tactic;                      ///< kTactic: the tactic id
  Precision precision = Precision::kFp32;  ///< kTactic: the precision it was chosen at
  std::string state;         ///< kTactic: Tactic::serializedState() (a cuDNN plan's JSON), or empty
  double timeMs = 0.0;       ///< measured time (build report; 0 when unknown)
  std::vector<int> inputs;   ///< plan tensor per node input; -1: absent or consumed
  std::vector<int> outputs;  ///< plan tensor per node output
};

struct ExecutionPlan {
  std::vector<PlanTensor> tensors;
  std::vector<PlanStep> steps;
  std::map<std::string, int> graphInputs;   ///< graph input -> its plan tensor (logical format)
  std::map<std::string, int> graphOutputs;  ///< graph output -> its plan tensor (logical format)
};

/// The one format a tensor of `rank`/`shape` is stored in when layouts make no difference:
/// non-4-D tensors are kLinear; 4-D ones are kNCHW or kNHWC, and NHWC with C == 1 or
/// H*W == 1 is the same memory as NCHW, so it becomes kNCHW.
builder::TensorFormat canonicalFormat(builder::TensorFormat f, const Shape& shape);
/// The format of a value as users see it: its own type, row-major.
builder::TensorFormat logicalFormat(DataType dtype, const Shape& shape);
/// "fp16.nhwc"-style text for logs.
std::string formatName(builder::TensorFormat f);
/// Whether step `s` is a folded layer's: a view step of a convolution (Conv or FusedConv, not a
/// view op), whose output aliases its input and whose only reader is the cuda-i8 ".fold" tactic
/// of the layer it is folded into, which computes that output itself from the input it reads
/// at input 3 (LayerContext::foldedZ; the builder's tryFold).
bool isFoldedStep(const PlanStep& s, const graph::Graph& g);
/// The index of the folded step whose output is input 3 of step `i`, or -1.
int foldedInto(const ExecutionPlan& plan, const graph::Graph& g, size_t i);

/// The end of a chained tactic's id (cuda-i8's ".chain" tactics: LayerContext::chained).
inline constexpr char kChainTacticSuffix[] = ".chain";
/// Whether a tactic id is a chained one (ends in kChainTacticSuffix).
bool isChainTactic(const std::string& id);
/// The node of the layer chained into tactic step `i` (the builder's tryChain): the
/// convolution whose output is the step's last output, one more than its node has; -1 where the
/// step is no ".chain" step or no such convolution exists.
int chainedNode(const ExecutionPlan& plan, const graph::Graph& g, size_t i);

/// True when plan tensor `t` stores a float value quantized to int8 (t.scale > 0).
bool isQuantized(const PlanTensor& t);
/// Steps whose tactic reads or writes a quantized tensor, or is recorded at INT8 (a tactic that
/// quantizes inside, on float tensors): the INT8 layers of the engine (two for a ".chain" step:
/// its layer and the chained one).
int countInt8Steps(const ExecutionPlan& plan);

std::string planToJson(const ExecutionPlan& plan, const graph::Graph& g);
/// Parses and checks the plan against the graph it was stored with (node indices, names and
/// ops, tensor references); kCorruptFile naming what is wrong.
Expected<ExecutionPlan> planFromJson(const std::string& json, const graph::Graph& g);

/// A human-readable table of the plan: one line per step with its tactic, formats and time.
std::string describePlan(const ExecutionPlan& plan, const graph::Graph& g);

}  // namespace edgeinfer::runtime::cuda
