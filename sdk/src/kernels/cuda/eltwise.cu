// Elementwise kernels of the `cuda` tactic family (eltwise.h). One kernel template serves
// every unary and binary op: the op is a uniform run-time switch applied to a whole vector,
// so the per-element cost is the arithmetic alone. Each thread handles one 16-byte vector of
// the output (4 floats / 8 halves) in a grid-stride loop; broadcast operands along the
// innermost dim are read once per vector. Offsets come from the physical, dim-merged plan,
// in 32-bit index arithmetic whenever the tensors allow it.
//
// The arithmetic mirrors the CPU reference (kernels/ref/activation.h, elementwise.cpp)
// expression by expression, including its comparison-based min/max (NaN handling).
#include <cuda_runtime.h>

#include <climits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_half.h"
#include "kernels/cuda/eltwise.h"

namespace edgeinfer::cuda {
namespace {

constexpr int kThreads = 256;

/// Kernel parameters: dims and strides right-aligned in kEltMaxDims slots (index
/// kEltMaxDims - 1 is the innermost dim).
template <typename I>
struct EltParams {
  I dims[kEltMaxDims];
  I strides[2][kEltMaxDims];
  int first;  // kEltMaxDims - rank
  I numel;
  I nvec;  // whole vectors; numel - nvec * VEC tail elements follow
  EltOp op;
  float alpha, beta;
};

// std::max / std::min as the reference uses them (a NaN first operand is returned).
__device__ __forceinline__ float refMax(float a, float b) {
  return a < b ? b : a;
}
__device__ __forceinline__ float refMin(float a, float b) {
  return b < a ? b : a;
}

#define EI_ELT_CASE(OP, EXPR)                       \
  case EltOp::OP:                                   \
    _Pragma("unroll") for (int i = 0; i < N; ++i) { \
      const float x = v[i];                         \
      v[i] = (EXPR);                                \
    }                                               \
    break;

template <int N>
__device__ __forceinline__ void applyUnary(EltOp op, float alpha, float beta, float (&v)[N]) {
  switch (op) {
    EI_ELT_CASE(kRelu, x > 0.f ? x : 0.f)
    EI_ELT_CASE(kLeakyRelu, x >= 0.f ? x : alpha * x)
    EI_ELT_CASE(kSigmoid, 1.f / (1.f + expf(-x)))
    EI_ELT_CASE(kHardSigmoid, refMax(0.f, refMin(1.f, alpha * x + beta)))
    EI_ELT_CASE(kHardSwish, x * refMax(0.f, refMin(1.f, x / 6.f + 0.5f)))
    EI_ELT_CASE(kTanh, tanhf(x))
    EI_ELT_CASE(kElu, x >= 0.f ? x : alpha * (expf(x) - 1.f))
    EI_ELT_CASE(kSelu, x > 0.f ? beta * x : beta * (alpha * expf(x) - alpha))
    EI_ELT_CASE(kSoftplus, x > 20.f ? x : log1pf(expf(x)))
    EI_ELT_CASE(kClip, refMin(refMax(x, alpha), beta))
    EI_ELT_CASE(kAbs, fabsf(x))
    EI_ELT_CASE(kNeg, -x)
    EI_ELT_CASE(kExp, expf(x))
    EI_ELT_CASE(kLog, logf(x))
    EI_ELT_CASE(kSqrt, sqrtf(x))
    EI_ELT_CASE(kReciprocal, 1.f / x)
    EI_ELT_CASE(kErf, erff(x))
    EI_ELT_CASE(kFloor, floorf(x))
    EI_ELT_CASE(kCeil, ceilf(x))
    EI_ELT_CASE(kSin, sinf(x))
    EI_ELT_CASE(kCos, cosf(x))
    EI_ELT_CASE(kTan, tanf(x))
    EI_ELT_CASE(kAsin, asinf(x))
    EI_ELT_CASE(kAcos, acosf(x))
    EI_ELT_CASE(kAtan, atanf(x))
    EI_ELT_CASE(kSinh, sinhf(x))
    EI_ELT_CASE(kCosh, coshf(x))
    EI_ELT_CASE(kAsinh, asinhf(x))
    EI_ELT_CASE(kAcosh, acoshf(x))
    EI_ELT_CASE(kAtanh, atanhf(x))
    EI_ELT_CASE(kRound, rintf(x))
    EI_ELT_CASE(kSign, x != x ? x : (x > 0.f ? 1.f : (x < 0.f ? -1.f : 0.f)))
    EI_ELT_CASE(kSoftsign, x / (1.f + fabsf(x)))
    EI_ELT_CASE(kCelu, refMax(0.f, x) + refMin(0.f, alpha * (expf(x / alpha) - 1.f)))
    EI_ELT_CASE(kThresholdedRelu, x > alpha ? x : 0.f)
    EI_ELT_CASE(kShrink, x < -alpha ? x + beta : (x > alpha ? x - beta : 0.f))
    EI_ELT_CASE(kAffine, beta == 0.f ? alpha * x : alpha * x + beta)  // keeps -0 (a copy)
    default:
      break;
  }
}
#undef EI_ELT_CASE

#define EI_ELT_CASE2(OP, EXPR)                      \
  case EltOp::OP:                                   \
    _Pragma("unroll") for (int i = 0; i < N; ++i) { \
      const float x = a[i];                         \
      const float y = b[i];                         \
      a[i] = (EXPR);                                \
    }                                               \
    break;

template <int N>
__device__ __forceinline__ void applyBinary(EltOp op, float (&a)[N], const float (&b)[N]) {
  switch (op) {
    EI_ELT_CASE2(kAdd, x + y)
    EI_ELT_CASE2(kSub, x - y)
    EI_ELT_CASE2(kMul, x * y)
    EI_ELT_CASE2(kDiv, x / y)
    EI_ELT_CASE2(kPow, powf(x, y))
    // NaN propagates, like numpy.maximum (and the reference's variadic Max/Min).
    EI_ELT_CASE2(kMax, (isnan(x) || isnan(y)) ? __int_as_float(0x7fc00000) : refMax(x, y))
    EI_ELT_CASE2(kMin, (isnan(x) || isnan(y)) ? __int_as_float(0x7fc00000) : refMin(x, y))
    EI_ELT_CASE2(kPRelu, x < 0.f ? y * x : x)
    EI_ELT_CASE2(kFMod, fmodf(x, y))
    default:
      break;
  }
}
#undef EI_ELT_CASE2

/// Input offsets of the output element at physical index e.
template <int NIN, typename I>
__device__ __forceinline__ void offsetsOf(const EltParams<I>& p, I e, I& o0, I& o1) {
  o0 = 0;
  o1 = 0;
  I rem = e;
#pragma unroll
  for (int d = kEltMaxDims - 1; d >= 0; --d) {
    if (d < p.first) break;
    const I c = d == p.first ? rem : rem % p.dims[d];
    rem = d == p.first ? I(0) : rem / p.dims[d];
    o0 += c * p.strides[0][d];
    if constexpr (NIN > 1) o1 += c * p.strides[1][d];
  }
}

/// Loads VEC operand values for output elements [e, e + VEC) of one innermost row: a vector
/// (inner stride 1), or one broadcast value (inner stride 0). VEC == 1 reads any stride.
template <typename T, int VEC, typename I>
__device__ __forceinline__ void loadOperand(const T* __restrict__ x, I off, I innerStride,
                                            float (&v)[VEC]) {
  if constexpr (VEC == 1) {
    v[0] = dev::toFloat(x[off]);
  } else if (innerStride == 0) {
    const float s = dev::toFloat(x[off]);
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] = s;
  } else {
    dev::loadN<T, VEC>(x + off, v);
  }
}

template <typename T, int NIN, int VEC, typename I>
__device__ __forceinline__ void computeAt(const T* __restrict__ x0, const T* __restrict__ x1,
                                          T* __restrict__ y, const EltParams<I>& p, I e) {
  I o0, o1;
  offsetsOf<NIN>(p, e, o0, o1);
  float a[VEC];
  loadOperand<T, VEC>(x0, o0, p.strides[0][kEltMaxDims - 1], a);
  if constexpr (NIN > 1) {
    float b[VEC];
    loadOperand<T, VEC>(x1, o1, p.strides[1][kEltMaxDims - 1], b);
    applyBinary<VEC>(p.op, a, b);
  } else {
    applyUnary<VEC>(p.op, p.alpha, p.beta, a);
  }
  dev::storeN<T, VEC>(y + e, a);
}

template <typename T, int NIN, int VEC, typename I>
__global__ void __launch_bounds__(kThreads)
    eltwiseKernel(const T* __restrict__ x0, const T* __restrict__ x1, T* __restrict__ y,
                  const EltParams<I> p) {
  const I tid = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x;
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I v = tid; v < p.nvec; v += step) computeAt<T, NIN, VEC>(x0, x1, y, p, v * VEC);
  if constexpr (VEC > 1) {  // fewer than VEC trailing elements (contiguous plans only)
    const I tail = p.numel - p.nvec * VEC;
    if (tid < tail) computeAt<T, NIN, 1>(x0, x1, y, p, p.nvec * VEC + tid);
  }
}

template <typename T, int NIN, int VEC, typename I>
Status launchTyped(const EltwisePlan& plan, const void* const* inputs, void* output, int maxBlocks,
                   cudaStream_t stream) {
  EltParams<I> p{};
  p.first = kEltMaxDims - plan.rank;
  for (int d = 0; d < kEltMaxDims; ++d) {
    p.dims[d] = 1;
    p.strides[0][d] = p.strides[1][d] = 0;
  }
  for (int d = 0; d < plan.rank; ++d) {
    p.dims[p.first + d] = static_cast<I>(plan.dims[d]);
    for (int k = 0; k < plan.numInputs; ++k)
      p.strides[k][p.first + d] = static_cast<I>(plan.strides[k][d]);
  }
  p.numel = static_cast<I>(plan.numel);
  p.nvec = static_cast<I>(plan.numel / VEC);
  p.op = plan.op;
  p.alpha = plan.alpha;
  p.beta = plan.beta;
  const int grid = dev::gridFor(p.nvec > 0 ? static_cast<int64_t>(p.nvec) : 1, kThreads, maxBlocks);
  const T* x0 = static_cast<const T*>(inputs[0]);
  const T* x1 = NIN > 1 ? static_cast<const T*>(inputs[1]) : nullptr;
  eltwiseKernel<T, NIN, VEC, I><<<grid, kThreads, 0, stream>>>(x0, x1, static_cast<T*>(output), p);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

template <typename T, int NIN>
Status launchVec(const EltwisePlan& plan, const void* const* inputs, void* output, int maxBlocks,
                 cudaStream_t stream) {
  constexpr int V = dev::kVec16<T>;
  const int inner = plan.rank - 1;
  // Vectors need whole rows (or one contiguous run with a tail), 16-byte aligned pointers,
  // and every operand either contiguous (all its strides multiples of V) or broadcast
  // along the innermost dim.
  bool vec = dev::aligned16(output) && (plan.rank == 1 || plan.dims[inner] % V == 0);
  for (int k = 0; k < NIN && vec; ++k) {
    const int64_t s = plan.strides[k][inner];
    if (s == 1) {
      vec = dev::aligned16(inputs[k]);
      for (int d = 0; d < inner; ++d) vec = vec && plan.strides[k][d] % V == 0;
    } else if (s != 0) {  // a strided innermost dim: element by element
      vec = false;
    }
  }
  const bool small = plan.numel < INT_MAX;
  if (vec)
    return small ? launchTyped<T, NIN, V, uint32_t>(plan, inputs, output, maxBlocks, stream)
                 : launchTyped<T, NIN, V, int64_t>(plan, inputs, output, maxBlocks, stream);
  return small ? launchTyped<T, NIN, 1, uint32_t>(plan, inputs, output, maxBlocks, stream)
               : launchTyped<T, NIN, 1, int64_t>(plan, inputs, output, maxBlocks, stream);
}

}  // namespace

Status launchEltwise(const EltwisePlan& plan, bool fp16, const void* const* inputs, void* output,
                     int maxBlocks, void* stream) {
  if (plan.numel == 0) return Status::Ok();
  if (plan.rank < 1 || plan.rank > kEltMaxDims || plan.numInputs < 1 || plan.numInputs > 2)
    return Status(ErrorCode::kInternal, "malformed elementwise plan");
  auto s = static_cast<cudaStream_t>(stream);
  if (fp16)
    return plan.numInputs == 1 ? launchVec<__half, 1>(plan, inputs, output, maxBlocks, s)
                               : launchVec<__half, 2>(plan, inputs, output, maxBlocks, s);
  return plan.numInputs == 1 ? launchVec<float, 1>(plan, inputs, output, maxBlocks, s)
                             : launchVec<float, 2>(plan, inputs, output, maxBlocks, s);
}

}  // namespace edgeinfer::cuda
