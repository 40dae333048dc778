// CPU reference kernel of ai.edgeinfer::FusedElementwise (graph/ops/fused_elementwise.h): runs
// the node's register program once per output element. Every opcode computes exactly the
// expression of the ONNX op's own reference kernel (elementwise.cpp, activation.h), so on
// float32 the fused node and the chain it replaced give identical results.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "graph/ops/fused_elementwise.h"
#include "kernels/ref/activation.h"
#include "kernels/ref/elementwise_common.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer::ref {
namespace {

using graph::FeOp;

/// Max/Min as the variadic reference kernel computes them for two float inputs.
float maxMin(bool isMax, float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<float>::quiet_NaN();
  return isMax ? std::max(a, b) : std::min(a, b);
}

float evalOp(FeOp op, float a, float b, float c) {
  switch (op) {
    case FeOp::kRelu:
      return applyActivation(a, Activation::kRelu, 0.f, 0.f);
    case FeOp::kLeakyRelu:
      return applyActivation(a, Activation::kLeakyRelu, b, 0.f);
    case FeOp::kSigmoid:
      return applyActivation(a, Activation::kSigmoid, 0.f, 0.f);
    case FeOp::kHardSigmoid:
      return applyActivation(a, Activation::kHardSigmoid, b, c);
    case FeOp::kHardSwish:
      return applyActivation(a, Activation::kHardSwish, 0.f, 0.f);
    case FeOp::kTanh:
      return applyActivation(a, Activation::kTanh, 0.f, 0.f);
    case FeOp::kElu:
      return applyActivation(a, Activation::kElu, b, 0.f);
    case FeOp::kSelu:
      return applyActivation(a, Activation::kSelu, b, c);
    case FeOp::kSoftplus:
      return applyActivation(a, Activation::kSoftplus, 0.f, 0.f);
    case FeOp::kClip:
      return applyActivation(a, Activation::kClip, b, c);
    case FeOp::kAbs:
      return std::fabs(a);
    case FeOp::kNeg:
      return -a;
    case FeOp::kExp:
      return std::exp(a);
    case FeOp::kLog:
      return std::log(a);
    case FeOp::kSqrt:
      return std::sqrt(a);
    case FeOp::kReciprocal:
      return 1.f / a;
    case FeOp::kErf:
      return std::erf(a);
    case FeOp::kFloor:
      return std::floor(a);
    case FeOp::kCeil:
      return std::ceil(a);
    case FeOp::kAdd:
      return a + b;
    case FeOp::kSub:
      return a - b;
    case FeOp::kMul:
      return a * b;
    case FeOp::kDiv:
      return a / b;
    case FeOp::kPow:
      return static_cast<float>(std::pow(static_cast<double>(a), static_cast<double>(b)));
    case FeOp::kMax:
      return maxMin(true, a, b);
    case FeOp::kMin:
      return maxMin(false, a, b);
  }
  return a;
}

template <DataType DT>
void run(const graph::FeProgram& prog, const std::vector<const Tensor*>& inputs, Tensor& y) {
  using Tr = TypeTraits<DT>;
  using S = typename Tr::Storage;
  std::vector<BroadcastIndexer> idx;
  std::vector<const S*> ptr;
  for (const Tensor* t : inputs) {
    idx.emplace_back(t->shape(), y.shape());
    ptr.push_back(t->data<S>());
  }
  S* out = y.data<S>();
  const int64_t n = y.numel();
  const size_t nIn = inputs.size();
  const int32_t result = prog.output();
#pragma omp parallel for if (n > kParallelThreshold / 4)
  for (int64_t i = 0; i < n; ++i) {
    float reg[graph::kFeMaxRegisters] = {};
    for (size_t k = 0; k < nIn; ++k) reg[k] = Tr::load(ptr[k][idx[k](i)]);
    auto operand = [&](int32_t v) {
      return v >= 0 ? reg[v] : prog.constants[static_cast<size_t>(-1 - v)];
    };
    for (const graph::FeInstr& ins : prog.instrs) {
      const int operands = graph::feOperandCount(static_cast<int32_t>(ins.op));
      const float a = operand(ins.a);
      const float b = operands > 1 ? operand(ins.b) : 0.f;
      const float c = operands > 2 ? operand(ins.c) : 0.f;
      reg[ins.dst] = evalOp(ins.op, a, b, c);
    }
    out[i] = Tr::store(reg[result]);
  }
}

Status fusedElementwiseKernel(KernelContext& ctx) {
  const int n = static_cast<int>(ctx.inputs.size());
  for (int i = 0; i < n; ++i)
    if (!ctx.inputs[static_cast<size_t>(i)])
      return ctx.error(ErrorCode::kInvalidModel, "FusedElementwise inputs cannot be absent");
  graph::FeProgram prog;
  EI_RETURN_IF_ERROR(graph::decodeFeProgram(ctx.attrs(), n, &prog).at(ctx.node.location()));
  Tensor& y = *ctx.outputs[0];
  for (int i = 0; i < n; ++i) {
    const Tensor& t = *ctx.inputs[static_cast<size_t>(i)];
    if (t.dtype() != y.dtype())
      return ctx.error(ErrorCode::kInvalidArgument, "FusedElementwise input types differ");
    if (!broadcastsTo(t.shape(), y.shape()))
      return ctx.error(ErrorCode::kInvalidArgument,
                       "input " + std::to_string(i) + " " + t.shape().toString() +
                           " does not broadcast to " + y.shape().toString());
  }
  switch (y.dtype()) {
    case DataType::kFloat32:
      run<DataType::kFloat32>(prog, ctx.inputs, y);
      return Status::Ok();
    case DataType::kFloat16:
      run<DataType::kFloat16>(prog, ctx.inputs, y);
      return Status::Ok();
    default:
      return ctx.error(ErrorCode::kUnsupported, std::string("FusedElementwise on ") +
                                                    dataTypeName(y.dtype()) +
                                                    " (float32 or float16 only)");
  }
}

}  // namespace

void registerFusedElementwiseKernel(KernelRegistry& r) {
  r.add(graph::kEdgeInferDomain, "FusedElementwise", fusedElementwiseKernel);
}

}  // namespace edgeinfer::ref
