// The engine file format (version 1):
//
//   offset 0   "EIENGINE"                 8-byte magic
//   offset 8   u32 format version         (kEngineFormatVersion)
//   offset 12  u32 header length H
//   offset 16  header: H bytes of JSON     (SDK version, backend, precision, device key,
//                                           model name and hash, payload length; for GPU
//                                           engines "plan": the chosen tactic of every layer
//                                           and the format of every tensor, see
//                                           runtime/cuda/cuda_plan.h)
//   then       payload: a serialized onnx::ModelProto holding the optimised graph
//              (fused ops in domain ai.edgeinfer, weights as raw initializers)
//   last 4     u32 CRC-32 (zlib) of every byte before it
//
// All integers little-endian. A reader checks, in order: size, magic, version, checksum,
// header, SDK version, device; each failure names what it found and what it expected.
#pragma once

#include <cstdint>
#include <vector>

#include "builder/weight_pool.h"
#include "edgeinfer/engine.h"
#include "graph/graph.h"

namespace edgeinfer::builder {

inline constexpr uint32_t kEngineFormatVersion = 1;

struct DecodedEngine {
  graph::Graph graph;
  EngineInfo info;
  std::string plan;  ///< the backend's plan (JSON text), empty for CPU engines
};

/// `plan`: JSON text of the backend's execution plan ("" for none).
Expected<std::vector<uint8_t>> encodeEngine(const graph::Graph& g, const EngineInfo& info,
                                            const std::string& plan = "");
/// `weights`: the pool of the container the engine is part of (weight_pool.h), which its
/// initializers may refer to; nullptr for an engine file of its own, where such a reference is
/// kCorruptFile.
Expected<DecodedEngine> decodeEngine(const void* data, size_t size,
                                     const SharedWeights* weights = nullptr);

/// `engine` (an encoded engine) with every initializer of at least kMinPooledBytes moved into
/// `pool` and referred to from there (for a container file: weight_pool.h). Checks the
/// engine's checksum first (kCorruptFile).
Expected<std::vector<uint8_t>> moveWeightsToPool(const std::vector<uint8_t>& engine,
                                                 WeightPool& pool);

/// EngineInfo::modelHash of model bytes (64-bit FNV-1a, hex).
std::string fnv1aHex(const void* data, size_t size);
/// The same hash as a number.
uint64_t fnv1a64(const void* data, size_t size);

/// The key of the device this process would build for with `backend`.
std::string currentDeviceKey(Backend backend);

}  // namespace edgeinfer::builder
