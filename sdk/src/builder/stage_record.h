// The INT8 stage search's outcome (builder.cpp, searchInt8Stages) kept in the device's timing
// cache, so that a rebuild of the same engine on the same kind of device does not repeat the
// search's trial builds. Device-free: what is stored, under which signature, and how it is read
// back.
//
// The outcome is stored as an entry of the timing cache whose one row's tactic id is "fp16:"
// and the layers the search moved to FP16, tab-separated ("fp16:" alone: none paid), its time
// the kept engine's GPU time (with none moved: the all-INT8 engine's, against which a rebuild
// checks that the device still runs it as it did). The signature names the model and digests
// the input shapes, the all-INT8 engine's tactics and the layers the configuration fixes:
// another shape, configuration or set of timings gives another signature.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "builder/timing_cache.h"

namespace edgeinfer::builder {

/// The signature of the search's outcome for the all-INT8 engine whose layers run `tactics`
/// (layer -> tactic id) of model `modelHash` built for `inputs` (input name -> its shape as
/// text: tactic ids need not change with the batch or the image size), `fixed` the layers the
/// configuration sets.
std::string stageSearchSignature(const std::string& modelHash,
                                 const std::map<std::string, std::string>& inputs,
                                 const std::map<std::string, std::string>& tactics,
                                 const std::set<std::string>& fixed);

/// The entry recording that the search moved `fp16Layers` (none: empty) and the engine ran
/// in `ms`.
TimingEntry stageSearchEntry(const std::vector<std::string>& fp16Layers, double ms);

/// The layers an entry of stageSearchEntry's form moved to FP16; nullopt for any other entry
/// (one row, its id starting "fp16:", no empty name).
std::optional<std::vector<std::string>> stageSearchLayers(const TimingEntry& entry);

}  // namespace edgeinfer::builder
