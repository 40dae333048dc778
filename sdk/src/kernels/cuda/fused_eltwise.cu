// The FusedElementwise kernel of the `cuda-fe` provider (fused_eltwise.h). Each thread takes
// 4 consecutive output elements (one 16-byte float access where every input allows, else one
// element) in a grid-stride loop: coordinates once, one offset per input, the inputs loaded
// into registers 0..n-1, then the program. The program lives in the kernel parameters
// (constant bank, warp-uniform reads), so the opcode switch never diverges and is taken once
// per 4 elements. The register file is a fixed-size array touched only at unrolled,
// compile-time indices (compare and select), so it stays in hardware registers; the kernel is
// instantiated for 2, 4, 8 and 16 registers and the smallest that holds the program runs, so
// the selects stay few (the pass allocates registers by liveness: SiLU or GELU need 2 or 3).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_half.h"
#include "kernels/cuda/fused_eltwise.h"

namespace edgeinfer::cuda {
namespace {

using graph::FeOp;
using graph::kFeMaxConstants;
using graph::kFeMaxInputs;
using graph::kFeMaxInstructions;
using graph::kFeMaxRegisters;

constexpr int kThreads = 256;

/// Dense opcodes of the kernel (FeOp values are sparse; a dense switch becomes a jump table).
enum KOp : int8_t {
  kRelu,
  kLeakyRelu,
  kSigmoid,
  kHardSigmoid,
  kHardSwish,
  kTanh,
  kElu,
  kSelu,
  kSoftplus,
  kClip,
  kAbs,
  kNeg,
  kExp,
  kLog,
  kSqrt,
  kReciprocal,
  kErf,
  kFloor,
  kCeil,
  kAdd,
  kSub,
  kMul,
  kDiv,
  kPow,
  kMax,
  kMin,
};

struct KInstr {
  int8_t op, dst, a, b, c, operands;  // operands: how many of a, b, c the op reads
};

/// The program as the kernel reads it (registers < 16, constant operands >= -64).
struct KProgram {
  KInstr code[kFeMaxInstructions];
  float constants[kFeMaxConstants];
  int numInstrs;
  int numInputs;
  int output;
};

template <typename I>
struct KParams {
  I dims[kFeMaxDims];
  I strides[kFeMaxInputs][kFeMaxDims];
  int first;  // kFeMaxDims - rank
  I numel;
  I nvec;  // whole vectors; numel - nvec * VEC tail elements follow
};

template <typename T>
struct KInputs {
  const T* ptr[kFeMaxInputs];
};

__device__ __forceinline__ float refMax(float a, float b) {
  return a < b ? b : a;
}
__device__ __forceinline__ float refMin(float a, float b) {
  return b < a ? b : a;
}

#define EI_FE_CASE(OP, EXPR)                        \
  case OP:                                          \
    _Pragma("unroll") for (int i = 0; i < N; ++i) { \
      const float x = a[i], p = b[i], q = c[i];     \
      (void)p;                                      \
      (void)q;                                      \
      a[i] = (EXPR);                                \
    }                                               \
    break;

/// a = op(a, b, c) on N values: the reference expression of each opcode
/// (kernels/ref/fused_elementwise.cpp); the switch is taken once for all N.
template <int N>
__device__ __forceinline__ void evalOp(int op, float (&a)[N], const float (&b)[N],
                                       const float (&c)[N]) {
  switch (op) {
    EI_FE_CASE(kRelu, x > 0.f ? x : 0.f)
    EI_FE_CASE(kLeakyRelu, x >= 0.f ? x : p * x)
    EI_FE_CASE(kSigmoid, 1.f / (1.f + expf(-x)))
    EI_FE_CASE(kHardSigmoid, refMax(0.f, refMin(1.f, p * x + q)))
    EI_FE_CASE(kHardSwish, x * refMax(0.f, refMin(1.f, x / 6.f + 0.5f)))
    EI_FE_CASE(kTanh, tanhf(x))
    EI_FE_CASE(kElu, x >= 0.f ? x : p * (expf(x) - 1.f))
    EI_FE_CASE(kSelu, x > 0.f ? q * x : q * (p * expf(x) - p))
    EI_FE_CASE(kSoftplus, x > 20.f ? x : log1pf(expf(x)))
    EI_FE_CASE(kClip, refMin(refMax(x, p), q))
    EI_FE_CASE(kAbs, fabsf(x))
    EI_FE_CASE(kNeg, -x)
    EI_FE_CASE(kExp, expf(x))
    EI_FE_CASE(kLog, logf(x))
    EI_FE_CASE(kSqrt, sqrtf(x))
    EI_FE_CASE(kReciprocal, 1.f / x)
    EI_FE_CASE(kErf, erff(x))
    EI_FE_CASE(kFloor, floorf(x))
    EI_FE_CASE(kCeil, ceilf(x))
    EI_FE_CASE(kAdd, x + p)
    EI_FE_CASE(kSub, x - p)
    EI_FE_CASE(kMul, x * p)
    EI_FE_CASE(kDiv, x / p)
    EI_FE_CASE(kPow, static_cast<float>(pow(static_cast<double>(x), static_cast<double>(p))))
    EI_FE_CASE(kMax, (isnan(x) || isnan(p)) ? __int_as_float(0x7fc00000) : refMax(x, p))
    EI_FE_CASE(kMin, (isnan(x) || isnan(p)) ? __int_as_float(0x7fc00000) : refMin(x, p))
    default:
      break;
  }
}
#undef EI_FE_CASE

/// out = register v (v >= 0) or constants[-1 - v]. The register file is only indexed at
/// unrolled, compile-time indices, so it stays in hardware registers; NREG (the program's
/// register count rounded up) keeps the selects few.
template <int NREG, int N>
__device__ __forceinline__ void readOperand(const float (&r)[NREG][N], int v, const KProgram& p,
                                            float (&out)[N]) {
  if (v < 0) {
    const float k = p.constants[-1 - v];
#pragma unroll
    for (int i = 0; i < N; ++i) out[i] = k;
    return;
  }
#pragma unroll
  for (int j = 0; j < NREG; ++j)
    if (j == v) {
#pragma unroll
      for (int i = 0; i < N; ++i) out[i] = r[j][i];
    }
}

template <int NREG, int N>
__device__ __forceinline__ void writeRegister(float (&r)[NREG][N], int d, const float (&v)[N]) {
#pragma unroll
  for (int j = 0; j < NREG; ++j)
    if (j == d) {
#pragma unroll
      for (int i = 0; i < N; ++i) r[j][i] = v[i];
    }
}

/// Output elements [e, e + N) (one innermost row, or one element when N == 1).
template <typename T, typename I, int NREG, int N>
__device__ __forceinline__ void computeAt(const KInputs<T>& in, T* __restrict__ y,
                                          const KProgram& prog, const KParams<I>& p, I e) {
  I off[kFeMaxInputs];
#pragma unroll
  for (int k = 0; k < kFeMaxInputs; ++k) off[k] = 0;
  I rem = e;
#pragma unroll
  for (int d = kFeMaxDims - 1; d >= 0; --d) {
    if (d < p.first) break;
    const I c = d == p.first ? rem : rem % p.dims[d];
    rem = d == p.first ? I(0) : rem / p.dims[d];
#pragma unroll
    for (int k = 0; k < kFeMaxInputs; ++k)
      if (k < prog.numInputs) off[k] += c * p.strides[k][d];
  }
  float r[NREG][N];
#pragma unroll
  for (int k = 0; k < NREG; ++k) {
#pragma unroll
    for (int i = 0; i < N; ++i) r[k][i] = 0.f;
    if (k >= kFeMaxInputs || k >= prog.numInputs) continue;
    const T* x = in.ptr[k < kFeMaxInputs ? k : 0] + off[k < kFeMaxInputs ? k : 0];
    if constexpr (N == 1) {
      r[k][0] = dev::toFloat(x[0]);
    } else if (p.strides[k < kFeMaxInputs ? k : 0][kFeMaxDims - 1] == 0) {
      const float v = dev::toFloat(x[0]);  // broadcast along the innermost dim
#pragma unroll
      for (int i = 0; i < N; ++i) r[k][i] = v;
    } else {
      dev::loadN<T, N>(x, r[k]);
    }
  }
  for (int i = 0; i < prog.numInstrs; ++i) {
    const KInstr ins = prog.code[i];
    float a[N], b[N], c[N];
#pragma unroll
    for (int v = 0; v < N; ++v) b[v] = c[v] = 0.f;
    readOperand<NREG, N>(r, ins.a, prog, a);
    if (ins.operands > 1) readOperand<NREG, N>(r, ins.b, prog, b);
    if (ins.operands > 2) readOperand<NREG, N>(r, ins.c, prog, c);
    evalOp<N>(ins.op, a, b, c);
    writeRegister<NREG, N>(r, ins.dst, a);
  }
  float out[N];
  readOperand<NREG, N>(r, prog.output, prog, out);
  dev::storeN<T, N>(y + e, out);
}

template <typename T, typename I, int NREG, int VEC>
__global__ void __launch_bounds__(kThreads)
    fusedEltwiseKernel(const KInputs<T> in, T* __restrict__ y, const KProgram prog,
                       const KParams<I> p) {
  const I tid = static_cast<I>(blockIdx.x) * kThreads + threadIdx.x;
  const I step = static_cast<I>(gridDim.x) * kThreads;
  for (I v = tid; v < p.nvec; v += step) computeAt<T, I, NREG, VEC>(in, y, prog, p, v * VEC);
  if constexpr (VEC > 1) {  // fewer than VEC trailing elements (contiguous plans only)
    const I tail = p.numel - p.nvec * VEC;
    if (tid < tail) computeAt<T, I, NREG, 1>(in, y, prog, p, p.nvec * VEC + tid);
  }
}

template <typename T, typename I, int NREG, int VEC>
Status launchTyped(const FusedEltwisePlan& plan, const KProgram& prog, const void* const* inputs,
                   void* output, int maxBlocks, cudaStream_t stream) {
  KParams<I> p{};
  p.first = kFeMaxDims - plan.rank;
  for (int d = 0; d < kFeMaxDims; ++d) {
    p.dims[d] = 1;
    for (int k = 0; k < kFeMaxInputs; ++k) p.strides[k][d] = 0;
  }
  for (int d = 0; d < plan.rank; ++d) {
    p.dims[p.first + d] = static_cast<I>(plan.dims[d]);
    for (int k = 0; k < prog.numInputs; ++k)
      p.strides[k][p.first + d] = static_cast<I>(plan.strides[k][d]);
  }
  p.numel = static_cast<I>(plan.numel);
  p.nvec = static_cast<I>(plan.numel / VEC);
  KInputs<T> in{};
  for (int k = 0; k < prog.numInputs; ++k) in.ptr[k] = static_cast<const T*>(inputs[k]);
  const int grid = dev::gridFor(p.nvec > 0 ? static_cast<int64_t>(p.nvec) : 1, kThreads, maxBlocks);
  fusedEltwiseKernel<T, I, NREG, VEC>
      <<<grid, kThreads, 0, stream>>>(in, static_cast<T*>(output), prog, p);
  EI_CUDA_CHECK(cudaGetLastError());
  return Status::Ok();
}

/// Vectors of 4 elements when every row is whole and every input is either contiguous along
/// the innermost dim (16-byte aligned for float) or broadcast along it; else one element.
template <typename T, typename I, int NREG>
Status launchVec(const FusedEltwisePlan& plan, const KProgram& prog, const void* const* inputs,
                 void* output, int maxBlocks, cudaStream_t stream) {
  constexpr int V = 4;
  const int inner = plan.rank - 1;
  bool vec = dev::aligned16(output) && (plan.rank == 1 || plan.dims[inner] % V == 0);
  for (int k = 0; k < prog.numInputs && vec; ++k) {
    const int64_t s = plan.strides[k][inner];
    if (s == 1) {
      vec = dev::aligned16(inputs[k]);
      for (int d = 0; d < inner; ++d) vec = vec && plan.strides[k][d] % V == 0;
    } else if (s != 0) {
      vec = false;
    }
  }
  return vec ? launchTyped<T, I, NREG, V>(plan, prog, inputs, output, maxBlocks, stream)
             : launchTyped<T, I, NREG, 1>(plan, prog, inputs, output, maxBlocks, stream);
}

template <typename T, typename I>
Status launchRegs(const FusedEltwisePlan& plan, const KProgram& prog, const void* const* inputs,
                  void* output, int maxBlocks, cudaStream_t stream) {
  const int regs = plan.program.numRegisters;
  if (regs <= 2) return launchVec<T, I, 2>(plan, prog, inputs, output, maxBlocks, stream);
  if (regs <= 4) return launchVec<T, I, 4>(plan, prog, inputs, output, maxBlocks, stream);
  if (regs <= 8) return launchVec<T, I, 8>(plan, prog, inputs, output, maxBlocks, stream);
  return launchVec<T, I, 16>(plan, prog, inputs, output, maxBlocks, stream);
}

KOp denseOp(FeOp op) {
  switch (op) {
    case FeOp::kRelu:
      return kRelu;
    case FeOp::kLeakyRelu:
      return kLeakyRelu;
    case FeOp::kSigmoid:
      return kSigmoid;
    case FeOp::kHardSigmoid:
      return kHardSigmoid;
    case FeOp::kHardSwish:
      return kHardSwish;
    case FeOp::kTanh:
      return kTanh;
    case FeOp::kElu:
      return kElu;
    case FeOp::kSelu:
      return kSelu;
    case FeOp::kSoftplus:
      return kSoftplus;
    case FeOp::kClip:
      return kClip;
    case FeOp::kAbs:
      return kAbs;
    case FeOp::kNeg:
      return kNeg;
    case FeOp::kExp:
      return kExp;
    case FeOp::kLog:
      return kLog;
    case FeOp::kSqrt:
      return kSqrt;
    case FeOp::kReciprocal:
      return kReciprocal;
    case FeOp::kErf:
      return kErf;
    case FeOp::kFloor:
      return kFloor;
    case FeOp::kCeil:
      return kCeil;
    case FeOp::kAdd:
      return kAdd;
    case FeOp::kSub:
      return kSub;
    case FeOp::kMul:
      return kMul;
    case FeOp::kDiv:
      return kDiv;
    case FeOp::kPow:
      return kPow;
    case FeOp::kMax:
      return kMax;
    case FeOp::kMin:
      return kMin;
  }
  return kRelu;
}

}  // namespace

Status launchFusedEltwise(const FusedEltwisePlan& plan, bool fp16, const void* const* inputs,
                          void* output, int maxBlocks, void* stream) {
  const graph::FeProgram& fp = plan.program;
  if (plan.rank < 1 || plan.rank > kFeMaxDims || fp.numInputs < 1 || fp.numInputs > kFeMaxInputs ||
      fp.instrs.empty() || fp.instrs.size() > static_cast<size_t>(kFeMaxInstructions) ||
      fp.constants.size() > static_cast<size_t>(kFeMaxConstants) ||
      fp.numRegisters > kFeMaxRegisters || fp.numRegisters < fp.numInputs)
    return Status(ErrorCode::kInternal, "malformed fused elementwise plan");
  if (plan.numel == 0) return Status::Ok();
  KProgram prog{};
  prog.numInstrs = static_cast<int>(fp.instrs.size());
  prog.numInputs = fp.numInputs;
  prog.output = fp.output();
  for (size_t i = 0; i < fp.instrs.size(); ++i) {
    const graph::FeInstr& ins = fp.instrs[i];
    KInstr& k = prog.code[i];
    k.op = denseOp(ins.op);
    k.dst = static_cast<int8_t>(ins.dst);
    k.a = static_cast<int8_t>(ins.a);
    k.b = static_cast<int8_t>(ins.b);
    k.c = static_cast<int8_t>(ins.c);
    k.operands = static_cast<int8_t>(graph::feOperandCount(static_cast<int32_t>(ins.op)));
  }
  for (size_t i = 0; i < fp.constants.size(); ++i) prog.constants[i] = fp.constants[i];
  auto s = static_cast<cudaStream_t>(stream);
  const bool small = plan.numel < INT_MAX / 2;
  if (fp16)
    return small ? launchRegs<__half, uint32_t>(plan, prog, inputs, output, maxBlocks, s)
                 : launchRegs<__half, int64_t>(plan, prog, inputs, output, maxBlocks, s);
  return small ? launchRegs<float, uint32_t>(plan, prog, inputs, output, maxBlocks, s)
               : launchRegs<float, int64_t>(plan, prog, inputs, output, maxBlocks, s);
}

}  // namespace edgeinfer::cuda
