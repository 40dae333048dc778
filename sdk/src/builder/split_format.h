// The file format of a GPU engine with a CPU tail (runtime/split_engine.h: a model whose
// layers after a data-dependent output run on the CPU, or whose data-dependent outputs the
// GPU computes padded to a bound), version 2: a container (container_format.h) of the engine
// files and the weights pool they share.
//
//   magic      "EISPLITS"
//   header     {"sdk_version", "outputs": [the engine's outputs, in the model's order],
//               "bounded": [{"name", "padded", "count", "axis"}, ...] (graph/partition.h's
//               BoundedValue; absent: none), "engine_bytes": [head, tail] or [head] (no
//               tail), "weights_bytes", "payload_bytes"}
//   blobs      the GPU engine of the head, then the CPU engine of the tail (each a complete
//              engine file whose larger initializers are in the pool, weight_pool.h)
//   weights    the pool
//
// Version 1 had no "bounded" and always a tail; the container reads its weights pool only
// from version 2 on, so a version 1 file loads when its pool is empty.
//
// A reader checks the container, then the header; the runtime checks that the two engines fit
// together (the tail's inputs are the head's outputs or inputs, one model). Every failure is
// kCorruptFile naming what is wrong, except another version (kVersionMismatch).
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "edgeinfer/engine.h"
#include "graph/partition.h"

namespace edgeinfer::builder {

inline constexpr char kSplitMagic[8] = {'E', 'I', 'S', 'P', 'L', 'I', 'T', 'S'};
inline constexpr uint32_t kSplitFormatVersion = 2;

/// Whether `data` starts like a split container (magic only).
bool isSplitContainer(const void* data, size_t size);

/// The container of the head's and the tail's engine files (their initializers in `weights`
/// where moveWeightsToPool() put them; `tail` null for none), with the engine's output order
/// and its bounded values.
Expected<std::vector<uint8_t>> encodeSplitContainer(const std::vector<std::string>& outputs,
                                                    const std::vector<graph::BoundedValue>& bounded,
                                                    const std::vector<uint8_t>& head,
                                                    const std::vector<uint8_t>* tail,
                                                    const std::vector<uint8_t>& weights);

struct DecodedSplitContainer {
  std::vector<std::string> outputs;
  std::vector<graph::BoundedValue> bounded;
  bool hasTail = true;
  std::pair<size_t, size_t> head, tail;     ///< offset and size of each engine file
  std::pair<size_t, size_t> weights{0, 0};  ///< the weights pool
};

Expected<DecodedSplitContainer> decodeSplitContainer(const void* data, size_t size);

}  // namespace edgeinfer::builder
