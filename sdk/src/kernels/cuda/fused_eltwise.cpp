// The `cuda-fe` tactic provider (fused_eltwise.h): which FusedElementwise layers it runs, and
// the tactic that plans the launch (initialize) and enqueues the kernel of fused_eltwise.cu.
#include "kernels/cuda/fused_eltwise.h"

#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_tactic_base.h"

namespace edgeinfer::cuda {
namespace {

using detail::fail;

using builder::Layout;
using builder::TensorFormat;

/// Checks the layer and decodes its program; false (with `why`) when not supported.
bool parseLayer(const builder::LayerContext& layer, graph::FeProgram* prog, std::string* why) {
  const graph::Node* node = layer.node;
  if (!node || !layer.graph) return fail(why, "no node");
  if (node->opType != "FusedElementwise" || node->domain != graph::kEdgeInferDomain)
    return fail(why, "not a FusedElementwise node");
  const size_t n = layer.inputShapes.size();
  if (n == 0 || layer.inputTypes.size() != n || layer.outputShapes.size() != 1 ||
      layer.outputTypes.size() != 1)
    return fail(why, "unexpected input/output count");
  const Status s = graph::decodeFeProgram(node->attrs, static_cast<int>(n), prog);
  if (!s.ok()) return fail(why, s.message());
  const DataType t = layer.outputTypes[0];
  if (t != DataType::kFloat32 && t != DataType::kFloat16)
    return fail(why, "the output must be float32 or float16");
  const Shape& out = layer.outputShapes[0];
  if (!out.isStatic()) return fail(why, "shapes must be static");
  if (out.rank() > static_cast<size_t>(kFeMaxDims)) return fail(why, "rank above 8");
  for (size_t i = 0; i < n; ++i) {
    if (!layer.hasInput(i) || layer.inputTypes[i] != t)
      return fail(why, "every input must be present and of the output's type");
    const Shape& s = layer.inputShapes[i];
    if (!s.isStatic()) return fail(why, "shapes must be static");
    if (s.rank() > out.rank()) return fail(why, "an input does not broadcast to the output");
    for (size_t d = 0; d < s.rank(); ++d) {
      const int64_t od = out[out.rank() - s.rank() + d];
      if (s[d] != od && s[d] != 1) return fail(why, "an input does not broadcast to the output");
    }
  }
  return true;
}

class FusedEltwiseTactic final : public builder::Tactic {
 public:
  FusedEltwiseTactic(DataType dtype, Layout layout4d, const builder::LayerContext& layer)
      : dtype_(dtype), layout4d_(layout4d) {
    for (const Shape& s : layer.inputShapes) inputRanks_.push_back(s.rank());
    outRank_ = layer.outputShapes[0].rank();
    id_ = std::string("cuda-fe.") + (dtype == DataType::kFloat16 ? "fp16" : "fp32") + "." +
          (outRank_ == 4 ? builder::layoutName(layout4d) : "linear");
  }
  std::string id() const override { return id_; }
  TensorFormat inputFormat(size_t i) const override {
    return {dtype_, formatFor(i < inputRanks_.size() ? inputRanks_[i] : 0)};
  }
  TensorFormat outputFormat(size_t) const override { return {dtype_, formatFor(outRank_)}; }

  Status initialize(const builder::LayerContext& layer) override {
    FusedEltwisePlan p;
    std::string why;
    if (!parseLayer(layer, &p.program, &why))
      return Status(ErrorCode::kUnsupported, id_ + ": " + why);
    const bool nhwc = layout4d_ == Layout::kNHWC;
    const Shape& out = layer.outputShapes[0];
    const size_t rank = out.rank();
    const int nIn = p.program.numInputs;
    // Logical (NCHW-order) strides of each input in its own storage, 0 where broadcast.
    std::vector<std::vector<int64_t>> logical(static_cast<size_t>(nIn),
                                              std::vector<int64_t>(rank, 0));
    for (int k = 0; k < nIn; ++k) {
      const Shape& s = layer.inputShapes[static_cast<size_t>(k)];
      std::vector<int64_t> st(s.rank(), 1);
      if (s.rank() == 4 && nhwc) {
        st = {s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]};
      } else {
        for (size_t d = s.rank(); d-- > 1;) st[d - 1] = st[d] * s[d];
      }
      const size_t lead = rank - s.rank();
      for (size_t d = lead; d < rank; ++d)
        logical[static_cast<size_t>(k)][d] = s[d - lead] == 1 ? 0 : st[d - lead];
    }
    // Physical order of the output, size-1 dims dropped, adjacent dims merged where every
    // input is contiguous across them.
    std::vector<size_t> order(rank);
    for (size_t d = 0; d < rank; ++d) order[d] = d;
    if (rank == 4 && nhwc) order = {0, 2, 3, 1};
    p.rank = 0;
    p.numel = out.numel();
    for (size_t d : order) {
      const int64_t size = out[d];
      if (size == 1) continue;
      if (p.rank > 0) {
        const int last = p.rank - 1;
        bool merge = true;
        for (int k = 0; k < nIn; ++k)
          merge = merge && p.strides[k][last] == logical[static_cast<size_t>(k)][d] * size;
        if (merge) {
          p.dims[last] *= size;
          for (int k = 0; k < nIn; ++k) p.strides[k][last] = logical[static_cast<size_t>(k)][d];
          continue;
        }
      }
      p.dims[p.rank] = size;
      for (int k = 0; k < nIn; ++k) p.strides[k][p.rank] = logical[static_cast<size_t>(k)][d];
      ++p.rank;
    }
    if (p.rank == 0) {  // a single element
      p.rank = 1;
      p.dims[0] = 1;
    }
    plan_ = std::move(p);
    maxBlocks_ = detail::maxBlocksForDevice();
    initialized_ = true;
    return Status::Ok();
  }

  Status enqueue(const builder::LaunchArgs& args) override {
    if (!initialized_)
      return Status(ErrorCode::kInvalidArgument, id_ + ": enqueue before initialize");
    const size_t n = static_cast<size_t>(plan_.program.numInputs);
    if (args.inputs.size() < n || args.outputs.empty() || !args.outputs[0])
      return Status(ErrorCode::kInvalidArgument, id_ + ": missing input or output pointers");
    for (size_t i = 0; i < n; ++i)
      if (!args.inputs[i])
        return Status(ErrorCode::kInvalidArgument,
                      id_ + ": input " + std::to_string(i) + " pointer is null");
    return launchFusedEltwise(plan_, dtype_ == DataType::kFloat16, args.inputs.data(),
                              args.outputs[0], maxBlocks_, args.stream);
  }

 private:
  Layout formatFor(size_t rank) const { return rank == 4 ? layout4d_ : Layout::kLinear; }

  DataType dtype_;
  Layout layout4d_;
  std::vector<size_t> inputRanks_;
  size_t outRank_ = 0;
  std::string id_;
  FusedEltwisePlan plan_;
  bool initialized_ = false;
  int maxBlocks_ = 2048;
};

}  // namespace

std::vector<std::unique_ptr<builder::Tactic>> FusedEltwiseProvider::candidates(
    const builder::LayerContext& layer, Precision precision) {
  std::vector<std::unique_ptr<builder::Tactic>> out;
  if (precision == Precision::kInt8) {
    lastReason_ = "int8 precision is not offered by the cuda-fe provider";
    return out;
  }
  graph::FeProgram prog;
  if (!parseLayer(layer, &prog, &lastReason_)) return out;
  lastReason_.clear();
  const bool out4d = layer.outputShapes[0].rank() == 4;
  const std::vector<Layout> layouts = out4d ? std::vector<Layout>{Layout::kNCHW, Layout::kNHWC}
                                            : std::vector<Layout>{Layout::kLinear};
  std::vector<DataType> types;
  if (precision == Precision::kFp16) types.push_back(DataType::kFloat16);
  types.push_back(DataType::kFloat32);
  for (DataType t : types)
    for (Layout l : layouts) out.push_back(std::make_unique<FusedEltwiseTactic>(t, l, layer));
  return out;
}

}  // namespace edgeinfer::cuda
