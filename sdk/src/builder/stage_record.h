// The outcomes of the builder's whole-engine trials kept in the device's timing cache, so that
// a rebuild of the same engine on the same kind of device does not repeat their trial builds:
// the INT8 stage search's (builder.cpp, searchInt8Stages) and the runner-up tactics' trials
// (builder.cpp, tryRunnerUpsInEngine). Device-free: what is stored, under which signature, and
// how it is read back.
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

// The runner-up trials' outcome: one row whose tactic id is "runner-ups:" and the kept
// choices, each a layer and its tactic joined by a tab, the choices joined by newlines
// ("runner-ups:" alone: none was kept), its time the kept engine's GPU time (with none kept:
// the first engine's, against which a rebuild checks that the device still runs it as it
// did). The signature is stageSearchSignature's digest of the first engine under another name.

/// The signature of the runner-up trials' outcome for the engine whose layers run `tactics`
/// (the build's first choice), as stageSearchSignature.
std::string runnerUpSignature(const std::string& modelHash,
                              const std::map<std::string, std::string>& inputs,
                              const std::map<std::string, std::string>& tactics,
                              const std::set<std::string>& fixed);

/// The entry recording that the trials kept `choices` (layer -> tactic; none: empty) and the
/// engine ran in `ms`; nullopt where a name holds a tab or a newline, or is empty (not
/// recordable).
std::optional<TimingEntry> runnerUpEntry(const std::map<std::string, std::string>& choices,
                                         double ms);

/// The choices an entry of runnerUpEntry's form kept; nullopt for any other entry (one row,
/// its id starting "runner-ups:", every choice a non-empty layer and tactic, no layer twice).
std::optional<std::map<std::string, std::string>> runnerUpChoices(const TimingEntry& entry);

}  // namespace edgeinfer::builder
