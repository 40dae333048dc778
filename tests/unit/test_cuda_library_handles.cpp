// The per-device library handles shared by the providers (kernels/cuda/library_handles.h): one
// cuDNN and one cuBLASLt handle per device for the whole process, freed with the last holder.
#include <gtest/gtest.h>

#ifdef EDGEINFER_HAVE_CUDA
#include "kernels/cuda/library_handles.h"
#include "tactic_test_util.h"

namespace edgeinfer::cuda {
namespace {

template <typename H>
void sharedWhileHeldThenFreed() {
  std::string why;
  DeviceHandles<H> a, b;
  std::shared_ptr<H> ha = a.current(&why);
  ASSERT_TRUE(ha) << why;
  ASSERT_NE(ha->handle, nullptr);
  std::shared_ptr<H> hb = b.current(&why);
  EXPECT_EQ(ha.get(), hb.get()) << "two providers on one device share one handle";
  EXPECT_EQ(a.current(&why).get(), ha.get()) << "a provider keeps its handle";
  EXPECT_EQ(sharedDeviceHandle<H>(&why).get(), ha.get());
  // a, b and the two locals hold it (plus none in the registry, which holds weak references).
  EXPECT_EQ(ha.use_count(), 4);
}

TEST(CudaLibraryHandles, CudnnHandleIsSharedPerDevice) {
  EI_SKIP_WITHOUT_GPU();
  sharedWhileHeldThenFreed<CudnnHandle>();
}

TEST(CudaLibraryHandles, CublasLtHandleIsSharedPerDevice) {
  EI_SKIP_WITHOUT_GPU();
  sharedWhileHeldThenFreed<CublasLtHandle>();
}

TEST(CudaLibraryHandles, ReleasedHandleIsMadeAgainOnNextUse) {
  EI_SKIP_WITHOUT_GPU();
  std::string why;
  std::weak_ptr<CublasLtHandle> weak;
  {
    DeviceHandles<CublasLtHandle> a;
    auto h = a.current(&why);
    ASSERT_TRUE(h) << why;
    weak = h;
  }
  EXPECT_TRUE(weak.expired()) << "the registry must not keep a handle alive";
  DeviceHandles<CublasLtHandle> b;
  auto again = b.current(&why);
  ASSERT_TRUE(again) << why;
  EXPECT_NE(again->handle, nullptr);
}

TEST(CudaLibraryHandles, NoDeviceIsAReasonNotACrash_n) {
  std::string why;
  if (::edgeinfer::test::gpuAvailable(&why)) GTEST_SKIP() << "needs a machine without a GPU";
  DeviceHandles<CudnnHandle> a;
  std::string reason;
  EXPECT_EQ(a.current(&reason), nullptr);
  EXPECT_FALSE(reason.empty());
}

}  // namespace
}  // namespace edgeinfer::cuda
#endif
