// The GPU vision entry points in a build without CUDA: each says so instead of failing later.
#include "edgeinfer/vision/postprocess.h"
#include "edgeinfer/vision/preprocess.h"

#if !EDGEINFER_HAVE_CUDA
namespace edgeinfer::vision {

Expected<std::unique_ptr<CudaPreprocessor>> CudaPreprocessor::create(const PreprocessConfig& cfg,
                                                                     int) {
  EI_RETURN_IF_ERROR(validatePreprocessConfig(cfg));
  return Status(ErrorCode::kUnsupported,
                "CudaPreprocessor: EdgeInfer was built without CUDA (use preprocessCpu)");
}

Expected<std::unique_ptr<CudaNms>> CudaNms::create(int) {
  return Status(ErrorCode::kUnsupported,
                "CudaNms: EdgeInfer was built without CUDA (use batchedNms)");
}

}  // namespace edgeinfer::vision
#endif
