#include "kernels/ref/ref_kernels.h"

#include "graph/op_schema.h"

namespace edgeinfer::ref {

KernelRegistry& KernelRegistry::instance() {
  static KernelRegistry* registry = [] {
    auto* r = new KernelRegistry();
    registerElementwiseKernels(*r);
    registerTensorKernels(*r);
    registerReduceKernels(*r);
    registerNnKernels(*r);
    registerQuantKernels(*r);
    registerFusedKernels(*r);
    return r;
  }();
  return *registry;
}

void KernelRegistry::add(const std::string& domain, const std::string& opType, KernelFn fn) {
  map_[domain + "::" + opType] = fn;
}

KernelFn KernelRegistry::find(const std::string& domain, const std::string& opType) const {
  const std::string d = domain == "ai.onnx" ? "" : domain;
  auto it = map_.find(d + "::" + opType);
  return it == map_.end() ? nullptr : it->second;
}

Status runNode(const graph::Node& node, const std::vector<const Tensor*>& inputs,
               std::vector<Tensor>& outputs) {
  return runNode(node, inputs, outputs,
                 [](size_t, DataType dt, const Shape& shape) { return Tensor::create(dt, shape); });
}

Status runNode(const graph::Node& node, const std::vector<const Tensor*>& inputs,
               std::vector<Tensor>& outputs, const OutputAllocator& allocate) {
  KernelFn fn = KernelRegistry::instance().find(node.domain, node.opType);
  if (!fn)
    return Status(ErrorCode::kUnsupported, "the CPU backend has no kernel for " + node.opType,
                  node.location());
  std::vector<graph::InferValue> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) continue;
    in[i].dtype = inputs[i]->dtype();
    in[i].shape = inputs[i]->shape();
    in[i].shapeKnown = true;
    in[i].value = inputs[i];
  }
  graph::InferContext ictx(node, std::move(in));
  EI_RETURN_IF_ERROR(graph::inferNode(ictx));
  outputs.clear();
  outputs.resize(node.outputs.size());
  KernelContext kctx{node, inputs, {}};
  for (size_t i = 0; i < node.outputs.size(); ++i) {
    const auto& o = ictx.outputs[i];
    if (!o.shapeKnown || !o.shape.isStatic())
      return Status(ErrorCode::kInternal,
                    "shape inference left output " + std::to_string(i) + " unresolved",
                    node.location());
    auto t = allocate(i, o.dtype, o.shape);
    if (!t.ok()) return t.status().at(node.location());
    outputs[i] = std::move(t).value();
  }
  for (auto& t : outputs) kctx.outputs.push_back(&t);
  return fn(kctx).at(node.location());
}

}  // namespace edgeinfer::ref
