#include "kernels/cuda/providers.h"

#include "kernels/cuda/batched_matmul.h"
#include "kernels/cuda/cublaslt_gemm.h"
#include "kernels/cuda/cublaslt_int8.h"
#include "kernels/cuda/cuda_provider.h"
#include "kernels/cuda/cudnn_conv.h"
#include "kernels/cuda/depthwise_conv.h"
#include "kernels/cuda/fused_eltwise.h"
#include "kernels/cuda/int8_conv.h"
#include "kernels/cuda/int8_gemv.h"
#include "kernels/cuda/stem_conv.h"

namespace edgeinfer::cuda {

std::vector<std::unique_ptr<builder::TacticProvider>> makeCudaProviders() {
  std::vector<std::unique_ptr<builder::TacticProvider>> p;
  p.push_back(std::make_unique<CudnnConvProvider>());
  p.push_back(std::make_unique<CublasLtGemmProvider>());
  p.push_back(std::make_unique<DepthwiseConvProvider>());
  p.push_back(std::make_unique<StemConvProvider>());
  p.push_back(std::make_unique<CublasBatchedMatMulProvider>());
  p.push_back(std::make_unique<FusedEltwiseProvider>());
  p.push_back(std::make_unique<CudaKernelProvider>());
  p.push_back(std::make_unique<Int8ConvProvider>());
  p.push_back(std::make_unique<CublasLtInt8Provider>());
  p.push_back(std::make_unique<Int8GemvProvider>());
  return p;
}

std::vector<std::unique_ptr<builder::Tactic>> allCandidates(
    const std::vector<std::unique_ptr<builder::TacticProvider>>& providers,
    const builder::LayerContext& layer, Precision precision) {
  std::vector<std::unique_ptr<builder::Tactic>> all;
  for (const auto& p : providers)
    for (auto& t : p->candidates(layer, precision)) all.push_back(std::move(t));
  return all;
}

Expected<std::unique_ptr<builder::Tactic>> findTactic(
    const std::vector<std::unique_ptr<builder::TacticProvider>>& providers,
    const builder::LayerContext& layer, Precision precision, const std::string& tacticId,
    const std::string& state) {
  for (const auto& p : providers) {
    const std::string prefix = p->name() + ".";
    if (tacticId.compare(0, prefix.size(), prefix) != 0) continue;  // ids start with the provider
    if (auto t = p->restore(layer, precision, tacticId, state)) return t;
  }
  return Status(ErrorCode::kNotFound,
                "tactic '" + tacticId + "' of layer '" + layer.node->name +
                    "' is not offered on this device with these libraries: rebuild the engine");
}

}  // namespace edgeinfer::cuda
