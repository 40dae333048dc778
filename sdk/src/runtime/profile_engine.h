// An engine built for several input shapes (BuilderConfig::shapeProfiles): one complete
// single-shape engine per shape profile ("sub-engine": a GPU engine with its own tactics,
// plans and memory plan, or a CPU engine with static shapes), behind the Engine interface.
//
// Its contexts (shape_dispatch.h) pick, at each execute(), the profile whose shapes equal the
// bound inputs' shapes and run that profile's sub-context, created on the first run of that
// shape (GPU: its own stream, arena and CUDA graph, so a context replays one CUDA graph per
// shape). Weights
// are held once per profile in the file; the host copies of constants equal across profiles
// share memory, and so do the GPU copies of equal converted weights (a layer whose tactics
// in two profiles store its weights in the same format: kernels/cuda/device_weights.h).
// Files: builder/profile_format.h.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edgeinfer/engine.h"
#include "graph/graph.h"
#include "runtime/shape_dispatch.h"

namespace edgeinfer::runtime {

class ProfileEngine final : public Engine, public ShapeDispatcher {
 public:
  /// `engines[i]` is the engine of `profiles[i]`. Checks that there are at least two, that they
  /// agree (backend, device, input and output names, types and ranks), that each profile names
  /// the same inputs, that engine i's inputs have profile i's shapes and that no two profiles
  /// are equal; a failure is a `code` error naming what differs (kCorruptFile for a file).
  static Expected<std::unique_ptr<ProfileEngine>> create(
      std::vector<ShapeProfile> profiles, std::vector<std::unique_ptr<Engine>> engines,
      ErrorCode code);

  /// Input and output descriptions: -1 for the dims that differ between profiles.
  const std::vector<TensorDesc>& inputs() const override { return inputs_; }
  const std::vector<TensorDesc>& outputs() const override { return outputs_; }
  /// The first profile's facts; weightBytes summed over the profiles.
  const EngineInfo& info() const override { return info_; }
  std::vector<ShapeProfile> profiles() const override { return profiles_; }
  int64_t deviceWeightBytes() const override;
  using Engine::createExecutionContext;
  Expected<std::unique_ptr<ExecutionContext>> createExecutionContext(
      const ContextOptions& options) const override;
  Expected<std::vector<uint8_t>> serialize() const override;
  // ShapeDispatcher: the profile whose shapes equal the bound ones.
  Status acceptsInput(const std::string& name, const Shape& shape) const override;
  Expected<const Engine*> engineFor(const ShapeProfile& shapes, int64_t* built,
                                    double* builtMs) const override;

  const std::vector<ShapeProfile>& profileShapes() const { return profiles_; }
  size_t profileCount() const { return engines_.size(); }
  const Engine& profileEngine(size_t i) const { return *engines_[i]; }
  /// The first profile whose shapes match `shapes` (a -1 dim of a profile matches any size),
  /// or -1.
  int findProfile(const std::map<std::string, Shape>& shapes) const;
  /// "[0] x:1x3x8x8; [1] x:4x3x8x8"
  std::string describeProfiles() const;

 private:
  ProfileEngine() = default;

  std::vector<ShapeProfile> profiles_;
  std::vector<std::unique_ptr<Engine>> engines_;
  std::vector<TensorDesc> inputs_, outputs_;
  EngineInfo info_;
};

/// Loads a profile container (builder/profile_format.h): the container's checks, each
/// sub-engine's (errors name the profile), then ProfileEngine::create's, as kCorruptFile.
Expected<std::unique_ptr<Engine>> loadProfileEngine(const void* data, size_t size);

/// Makes the constants of `g` equal (name, type, shape, bytes) to one in `pool` share its host
/// memory, and adds the others to `pool`; returns the bytes now shared. The profiles of one
/// engine then hold one host copy of the weights they have in common.
int64_t shareConstants(graph::Graph& g, std::map<std::string, Tensor>& pool);

}  // namespace edgeinfer::runtime
