// Every tactic provider of the CUDA backend, in the order the builder asks them, and the
// lookup of a tactic by its id (an engine load recreates its tactics that way).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "builder/tactic.h"

namespace edgeinfer::cuda {

std::vector<std::unique_ptr<builder::TacticProvider>> makeCudaProviders();

/// Every candidate of every provider for `layer` at `precision`.
std::vector<std::unique_ptr<builder::Tactic>> allCandidates(
    const std::vector<std::unique_ptr<builder::TacticProvider>>& providers,
    const builder::LayerContext& layer, Precision precision);

/// The candidate with id `tacticId` (not yet initialised), rebuilt from `state` (what it
/// serialized at build time; may be empty) where its provider can; kNotFound naming the
/// layer and the id when no provider offers it any more (another cuDNN/cuBLAS version,
/// another GPU).
Expected<std::unique_ptr<builder::Tactic>> findTactic(
    const std::vector<std::unique_ptr<builder::TacticProvider>>& providers,
    const builder::LayerContext& layer, Precision precision, const std::string& tacticId,
    const std::string& state = {});

}  // namespace edgeinfer::cuda
