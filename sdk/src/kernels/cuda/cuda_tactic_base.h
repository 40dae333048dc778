// Shared host-side pieces of the `cuda` provider's tactics (cuda_provider.cpp and
// cuda_provider_data.cpp): the base class that holds the storage type, the 4-D layout, the id
// and the launch-argument checks, and the small helpers every op family's support check uses.
// Host code only; internal to sdk/src/kernels/cuda/.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "builder/tactic.h"

namespace edgeinfer::cuda::detail {

inline bool isFloatStorage(DataType t) {
  return t == DataType::kFloat32 || t == DataType::kFloat16;
}

inline bool isStatic(const Shape& s) {
  for (int64_t d : s.dims())
    if (d < 0) return false;
  return true;
}

/// Every dim known and at least 1 (an empty or dynamic tensor is not supported).
inline bool allPositive(const Shape& s) {
  for (int64_t d : s.dims())
    if (d <= 0) return false;
  return true;
}

/// A support check's "no": sets `why` and returns false.
inline bool fail(std::string* why, std::string msg) {
  *why = std::move(msg);
  return false;
}

/// Storage types to offer at a precision (the builder times every one).
inline std::vector<DataType> storageTypes(Precision p) {
  if (p == Precision::kFp32) return {DataType::kFloat32};
  return {DataType::kFloat16, DataType::kFloat32};
}

/// The id part of a storage type: fp32, fp16, i32, i64, i8, u8, bool.
const char* storageName(DataType t);

/// Grid-size cap for grid-stride kernels: 16 blocks of 256 threads per multiprocessor.
int maxBlocksForDevice();

/// Compute capability of the current device as major * 10 + minor; 0 without one.
int deviceCapability();

/// Multiprocessors of the current device; 0 without one.
int deviceSmCount();

/// Shared memory a block of the current device may opt in to (bytes); 0 without a device.
int deviceSharedMemoryOptin();

/// Shared memory of a multiprocessor of the current device (bytes); 0 without a device.
int deviceSharedMemoryPerSm();

/// The launch arguments of a convolution tactic: X (input 0), Y (output 0) and, with a
/// residual, Z (input 3) present; else kInvalidArgument naming the tactic.
inline Status checkConvLaunch(const builder::LaunchArgs& args, bool hasZ, const std::string& id) {
  if (args.inputs.empty() || !args.inputs[0] || args.outputs.empty() || !args.outputs[0] ||
      (hasZ && (args.inputs.size() < 4 || !args.inputs[3])))
    return Status(ErrorCode::kInvalidArgument, id + ": missing input or output pointer");
  return Status::Ok();
}

/// Common part of every tactic here: one storage type, one layout for the layer's 4-D
/// tensors (other ranks are kLinear), the id, and the launch-argument checks.
class CudaTactic : public builder::Tactic {
 public:
  CudaTactic(const std::string& family, DataType dtype, builder::Layout layout4d,
             const builder::LayerContext& layer);
  std::string id() const override { return id_; }
  builder::TensorFormat inputFormat(size_t i) const override;
  builder::TensorFormat outputFormat(size_t i) const override;

 protected:
  bool fp16() const { return dtype_ == DataType::kFloat16; }
  builder::Layout formatFor(size_t rank) const {
    return rank == 4 ? layout4d_ : builder::Layout::kLinear;
  }
  bool nhwc() const { return layout4d_ == builder::Layout::kNHWC; }
  /// Gives input i its own storage type (Gather indices); others use the tactic's.
  void setInputType(size_t i, DataType t);

  /// Inputs [0, numInputs) and output 0 must be present; initialize() must have run.
  Status checkArgs(const builder::LaunchArgs& args, size_t numInputs) const;

  DataType dtype_;
  builder::Layout layout4d_;
  std::vector<size_t> inputRanks_, outputRanks_;
  std::vector<DataType> inputTypes_;  // kUndefined: the tactic's storage type
  std::string id_;
  bool initialized_ = false;
  int maxBlocks_ = 2048;
};

/// The data-movement, Resize and Reduce families (cuda_provider_data.cpp): appends the
/// tactics for the layer and returns true when the node is of one of those ops (whether or
/// not it is supported); false leaves the layer to the other families.
bool dataCandidates(const builder::LayerContext& layer, Precision precision,
                    std::vector<std::unique_ptr<builder::Tactic>>* out);

/// The normalisation (LayerNormalization, InstanceNormalization, LRN), selection (ArgMax,
/// ArgMin, TopK), CumSum and scatter families (cuda_provider_norm.cpp), as dataCandidates().
bool normSelectCandidates(const builder::LayerContext& layer, Precision precision,
                          std::vector<std::unique_ptr<builder::Tactic>>* out);

/// The typed elementwise family (cuda_provider_typed.cpp: Cast, comparisons, logic, Where,
/// IsNaN / IsInf, integer arithmetic), as dataCandidates().
bool typedCandidates(const builder::LayerContext& layer, Precision precision,
                     std::vector<std::unique_ptr<builder::Tactic>>* out);

/// The detection family (cuda_provider_detection.cpp: BoundedNonZero and
/// BoundedNonMaxSuppression), as dataCandidates().
bool detectionCandidates(const builder::LayerContext& layer, Precision precision,
                         std::vector<std::unique_ptr<builder::Tactic>>* out);

}  // namespace edgeinfer::cuda::detail
