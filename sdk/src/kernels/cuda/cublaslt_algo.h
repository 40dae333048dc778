// A cuBLASLt algorithm's whole configuration as text ("a<id>.t<tile>.s<stages>.sk<splitK>
// .r<reduction>.sw<swizzle>.c<custom>.in<inner>.cl<cluster>"): the stable part of the tactic ids
// of the cublaslt and cublaslt-i8 providers (the timing cache and engine files store them).
#pragma once

#include <cublasLt.h>

#include <cstdint>
#include <string>

namespace edgeinfer::cuda {

/// Reads one algorithm configuration attribute into T (T{} when it cannot be read).
template <typename T>
T cublasLtAlgoAttr(const cublasLtMatmulAlgo_t& algo, cublasLtMatmulAlgoConfigAttributes_t attr) {
  T v{};
  size_t written = 0;
  if (cublasLtMatmulAlgoConfigGetAttribute(&algo, attr, &v, sizeof(v), &written) !=
      CUBLAS_STATUS_SUCCESS)
    return T{};
  return v;
}

inline std::string cublasLtAlgoText(const cublasLtMatmulAlgo_t& algo) {
  const auto n = [](auto v) { return std::to_string(static_cast<long long>(v)); };
  return "a" + n(cublasLtAlgoAttr<int32_t>(algo, CUBLASLT_ALGO_CONFIG_ID)) + ".t" +
         n(cublasLtAlgoAttr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_TILE_ID)) + ".s" +
         n(cublasLtAlgoAttr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID)) + ".sk" +
         n(cublasLtAlgoAttr<int32_t>(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM)) + ".r" +
         n(cublasLtAlgoAttr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME)) + ".sw" +
         n(cublasLtAlgoAttr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING)) + ".c" +
         n(cublasLtAlgoAttr<uint32_t>(algo, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION)) + ".in" +
         n(cublasLtAlgoAttr<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_INNER_SHAPE_ID)) + ".cl" +
         n(cublasLtAlgoAttr<uint16_t>(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID));
}

}  // namespace edgeinfer::cuda
