// The file format of an engine with shape ranges (BuilderConfig::shapeRanges), version 2: a
// container (container_format.h) of two complete engine files, the weights pool they share
// (weight_pool.h: the model's weights and the opt build's equal ones once; version 1 had none
// and is still read) and what it takes to specialise the engine for another shape of its
// ranges at run time (runtime/range_engine.h).
//
//   magic      "EIRANGES"
//   header     {"sdk_version",
//               "ranges": {input: {"min": [dims], "opt": [dims], "max": [dims]}},
//               "opt_shapes": {input: [dims]}     every input's shape in the opt build,
//               "output_shapes": {output: [dims]} -1 where min, opt and max differ,
//               "build": {...}                    the builder options a specialisation reuses
//                                                 (precision, passes, layer precisions, ...),
//               "tactics": {layer: tactic-id}     the opt build's choice per GPU layer,
//               "engine_bytes": [source, opt], "weights_bytes", "payload_bytes"}
//   blobs      the imported model before optimisation (a CPU engine file of the unoptimised
//              graph, with the model's dynamic dims), then the engine built for the opt shapes
//   weights    the pool both refer to
//
// A reader checks the container, then every field (ranges: min <= opt <= max per dim, the same
// rank; option values it knows); kCorruptFile naming what is wrong, kVersionMismatch for
// another version.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "edgeinfer/builder.h"

namespace edgeinfer::builder {

inline constexpr char kRangeMagic[8] = {'E', 'I', 'R', 'A', 'N', 'G', 'E', 'S'};
inline constexpr uint32_t kRangeFormatVersion = 2;

/// Whether `data` starts like a range container (magic only).
bool isRangeContainer(const void* data, size_t size);

/// What a range engine keeps besides its two engines.
struct RangeSpec {
  ShapeRanges ranges;
  ShapeProfile optShapes;
  /// Every output's shape, -1 for the dims that differ between the ranges' min, opt and max.
  ShapeProfile outputShapes;
  /// The options a specialisation builds with (rangeBuildOptions(): precision,
  /// strictPrecision, int8BitExact, allowCpuFallback, passes, layerPrecision, maxTensorBytes,
  /// allowNonFiniteWeights), in an engine built here as in one loaded from its file; device,
  /// timing and cache options are the running process's, forced tactics none.
  BuilderConfig build;
  std::map<std::string, std::string> tactics;
};

/// `config` reduced to what RangeSpec::build keeps (the rest default).
BuilderConfig rangeBuildOptions(const BuilderConfig& config);

/// Checks `ranges` as a range engine needs them: each has min, opt and max of one rank, and
/// min <= opt <= max in every dim, dims >= 1. kInvalidArgument (`code`) naming the input and
/// dim.
Status checkShapeRanges(const ShapeRanges& ranges, ErrorCode code = ErrorCode::kInvalidArgument);

/// `weights`: the pool `source` and `opt` refer to (moveWeightsToPool()), empty for none.
Expected<std::vector<uint8_t>> encodeRangeContainer(const RangeSpec& spec,
                                                    const std::vector<uint8_t>& source,
                                                    const std::vector<uint8_t>& opt,
                                                    const std::vector<uint8_t>& weights = {});

struct DecodedRangeContainer {
  RangeSpec spec;
  std::pair<size_t, size_t> source, opt;    ///< offset and size of each engine file
  std::pair<size_t, size_t> weights{0, 0};  ///< the weights pool (size 0: none)
};

Expected<DecodedRangeContainer> decodeRangeContainer(const void* data, size_t size);

}  // namespace edgeinfer::builder
