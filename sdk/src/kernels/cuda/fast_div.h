// Division by a divisor fixed for a launch, as a multiply-high, an add and a shift (Granlund and
// Montgomery, "Division by invariant integers using multiplication", 1994; CUTLASS's FastDivmod
// does the same): a persistent kernel splitting each tile index into image, row and column did
// three integer divisions a tile, about 20 instructions each. Plain C++ for the host (the
// divisor's constants, and tests), the same arithmetic on the device.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define EI_FAST_DIV_HD __host__ __device__ __forceinline__
#else
#define EI_FAST_DIV_HD inline
#endif

namespace edgeinfer::cuda {

/// n / d for 0 <= n < 2^31 and 1 <= d < 2^31: fastDivisor(d) once, divide() per use.
struct FastDiv {
  uint32_t mul = 1, shift = 0;
  int32_t d = 1;
};

/// The multiplier and shift of `d` (below 1: 1): shift = ceil(log2 d), mul = 2^32 (2^shift - d)
/// / d + 1, which fits in 32 bits because 2^shift - d < d.
inline FastDiv fastDivisor(int32_t d) {
  FastDiv f;
  f.d = d < 1 ? 1 : d;
  while ((uint64_t{1} << f.shift) < static_cast<uint64_t>(f.d)) ++f.shift;
  f.mul = static_cast<uint32_t>(((uint64_t{1} << 32) * ((uint64_t{1} << f.shift) - f.d)) / f.d + 1);
  return f;
}

/// n / f.d for 0 <= n < 2^31 (the sum below stays under 2^32 there).
EI_FAST_DIV_HD int divide(const FastDiv& f, int n) {
  const uint32_t u = static_cast<uint32_t>(n);
#ifdef __CUDA_ARCH__
  const uint32_t hi = __umulhi(u, f.mul);
#else
  const uint32_t hi = static_cast<uint32_t>((uint64_t{u} * f.mul) >> 32);
#endif
  return static_cast<int>((hi + u) >> f.shift);
}

}  // namespace edgeinfer::cuda

#undef EI_FAST_DIV_HD
