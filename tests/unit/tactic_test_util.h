// Runs a GPU tactic on host inputs and compares it with the CPU reference: the harness every
// CUDA tactic test uses. Inputs and results are logical (NCHW, float32 or the op's integer
// type); the harness converts to and from the tactic's declared formats (NHWC, float16).
#pragma once

#ifdef EDGEINFER_HAVE_CUDA

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "builder/tactic.h"
#include "core/half.h"
#include "edgeinfer/builder.h"
#include "graph/op_schema.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer::test {

/// A GPU build for tests: its timing cache at `timingCache`, one warm-up and few timed runs, so
/// engines build fast (timings matter little in tests).
inline BuilderConfig quickGpuConfig(const std::string& timingCache,
                                    Precision precision = Precision::kFp32) {
  BuilderConfig c;
  c.backend = Backend::kCuda;
  c.precision = precision;
  c.timingCachePath = timingCache;
  c.timing.warmup = 1;
  c.timing.iterations = 2;
  c.timing.repeats = 3;
  return c;
}

/// True when a GPU is usable; otherwise `why` says why (for GTEST_SKIP).
inline bool gpuAvailable(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n == 0) {
    *why = e != cudaSuccess ? std::string("no usable GPU: ") + cudaGetErrorString(e) : "no GPU";
    return false;
  }
  return true;
}

#define EI_SKIP_WITHOUT_GPU()                                                \
  do {                                                                       \
    std::string ei_why_;                                                     \
    if (!::edgeinfer::test::gpuAvailable(&ei_why_)) GTEST_SKIP() << ei_why_; \
  } while (0)

/// QuantizeLinear with zero point 0 (the int8 storage of a float tensor with scale `s`).
inline int8_t quantizeHost(float x, float s) {
  const float q = std::nearbyint(x / s);
  if (std::isnan(q)) return 0;
  return static_cast<int8_t>(std::min(std::max(q, -128.f), 127.f));
}

/// Logical (NCHW) host tensor -> bytes in `fmt` (NHWC and/or float16 as requested; int8 for a
/// float tensor quantizes it with `scale`).
inline std::vector<uint8_t> toFormat(const Tensor& t, builder::TensorFormat fmt,
                                     float scale = 0.f) {
  const Shape& s = t.shape();
  const bool nhwc = fmt.layout == builder::Layout::kNHWC && s.rank() == 4;
  const int64_t n = t.numel();
  std::vector<uint8_t> out(static_cast<size_t>(n) * dataTypeSize(fmt.dtype));
  for (int64_t i = 0; i < n; ++i) {
    int64_t j = i;
    if (nhwc) {  // i indexes NCHW; j is the NHWC position
      const int64_t C = s[1], H = s[2], W = s[3];
      const int64_t w = i % W, h = (i / W) % H, c = (i / (W * H)) % C, b = i / (W * H * C);
      j = ((b * H + h) * W + w) * C + c;
    }
    if (fmt.dtype == DataType::kFloat16 && t.dtype() == DataType::kFloat32) {
      reinterpret_cast<uint16_t*>(out.data())[j] = floatToHalf(t.data<float>()[i]);
    } else if (fmt.dtype == DataType::kFloat32 && t.dtype() == DataType::kFloat16) {
      reinterpret_cast<float*>(out.data())[j] = halfToFloat(t.data<uint16_t>()[i]);
    } else if (fmt.dtype == DataType::kInt8 && t.dtype() == DataType::kFloat32 && scale > 0.f) {
      reinterpret_cast<int8_t*>(out.data())[j] = quantizeHost(t.data<float>()[i], scale);
    } else {
      const size_t es = dataTypeSize(t.dtype());
      std::memcpy(out.data() + j * es, static_cast<const uint8_t*>(t.raw()) + i * es, es);
    }
  }
  return out;
}

/// Bytes in `fmt` -> logical host tensor of `logicalType` and `shape` (int8 storage of a float
/// tensor is dequantized with `scale`).
inline Tensor fromFormat(const std::vector<uint8_t>& bytes, builder::TensorFormat fmt,
                         DataType logicalType, const Shape& s, float scale = 0.f) {
  Tensor t = Tensor::zeros(logicalType, s);
  const bool nhwc = fmt.layout == builder::Layout::kNHWC && s.rank() == 4;
  for (int64_t i = 0; i < t.numel(); ++i) {
    int64_t j = i;
    if (nhwc) {
      const int64_t C = s[1], H = s[2], W = s[3];
      const int64_t w = i % W, h = (i / W) % H, c = (i / (W * H)) % C, b = i / (W * H * C);
      j = ((b * H + h) * W + w) * C + c;
    }
    if (fmt.dtype == DataType::kFloat16 && logicalType == DataType::kFloat32) {
      t.data<float>()[i] = halfToFloat(reinterpret_cast<const uint16_t*>(bytes.data())[j]);
    } else if (fmt.dtype == DataType::kFloat32 && logicalType == DataType::kFloat16) {
      // A float16 value kept in float32 must be one float16 holds: anything else comes back
      // as NaN, so a tactic that forgets to round fails the comparison.
      const float f = reinterpret_cast<const float*>(bytes.data())[j];
      const uint16_t h = floatToHalf(f);
      t.data<uint16_t>()[i] = halfToFloat(h) == f || std::isnan(f) ? h : uint16_t{0x7e00};
    } else if (fmt.dtype == DataType::kInt8 && logicalType == DataType::kFloat32 && scale > 0.f) {
      t.data<float>()[i] =
          static_cast<float>(reinterpret_cast<const int8_t*>(bytes.data())[j]) * scale;
    } else {
      const size_t es = dataTypeSize(logicalType);
      std::memcpy(static_cast<uint8_t*>(t.raw()) + i * es, bytes.data() + j * es, es);
    }
  }
  return t;
}

/// Fills a LayerContext for `node` from concrete inputs (via the op's shape function).
inline Status makeLayer(const graph::Node& node, const graph::Graph& g,
                        const std::vector<const Tensor*>& inputs, builder::LayerContext* layer) {
  std::vector<graph::InferValue> in(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) continue;
    in[i].dtype = inputs[i]->dtype();
    in[i].shape = inputs[i]->shape();
    in[i].shapeKnown = true;
    in[i].value = inputs[i];
  }
  graph::InferContext ctx(node, in);
  EI_RETURN_IF_ERROR(graph::inferNode(ctx));
  layer->node = &node;
  layer->graph = &g;
  for (size_t i = 0; i < inputs.size(); ++i) {
    layer->inputShapes.push_back(inputs[i] ? inputs[i]->shape() : Shape());
    layer->inputTypes.push_back(inputs[i] ? inputs[i]->dtype() : DataType::kUndefined);
  }
  for (const auto& o : ctx.outputs) {
    layer->outputShapes.push_back(o.shape);
    layer->outputTypes.push_back(o.dtype);
  }
  return Status::Ok();
}

/// Runs `tactic` (already initialize()d for `layer`) on the host inputs; returns logical
/// host outputs. Constant inputs are passed too (a tactic may ignore them if it prepared
/// weights in initialize()).
inline Expected<std::vector<Tensor>> runTactic(builder::Tactic& tactic,
                                               const builder::LayerContext& layer,
                                               const std::vector<const Tensor*>& inputs) {
  std::vector<void*> dIn(inputs.size(), nullptr), dOut(layer.outputShapes.size(), nullptr);
  void* ws = nullptr;
  auto cleanup = [&] {
    for (void* p : dIn) cudaFree(p);
    for (void* p : dOut) cudaFree(p);
    cudaFree(ws);
  };
  builder::LaunchArgs args;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i]) {
      args.inputs.push_back(nullptr);
      continue;
    }
    const auto bytes = toFormat(*inputs[i], tactic.inputFormat(i), layer.inputScale(i));
    if (cudaMalloc(&dIn[i], std::max<size_t>(bytes.size(), 1)) != cudaSuccess ||
        cudaMemcpy(dIn[i], bytes.data(), bytes.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
      cleanup();
      return Status(ErrorCode::kCudaError, "input upload failed");
    }
    args.inputs.push_back(dIn[i]);
  }
  std::vector<size_t> outBytes;
  for (size_t i = 0; i < layer.outputShapes.size(); ++i) {
    const size_t b = static_cast<size_t>(layer.outputShapes[i].numel()) *
                     dataTypeSize(tactic.outputFormat(i).dtype);
    outBytes.push_back(b);
    // Poison: every element must be written by the tactic.
    if (cudaMalloc(&dOut[i], std::max<size_t>(b, 1)) != cudaSuccess ||
        cudaMemset(dOut[i], 0xff, b) != cudaSuccess) {
      cleanup();
      return Status(ErrorCode::kCudaError, "output allocation failed");
    }
    args.outputs.push_back(dOut[i]);
  }
  args.workspaceBytes = tactic.workspaceBytes();
  // Poison too: a tactic must not read workspace it did not write (split K's partial sums).
  if (args.workspaceBytes && (cudaMalloc(&ws, args.workspaceBytes) != cudaSuccess ||
                              cudaMemset(ws, 0xa5, args.workspaceBytes) != cudaSuccess)) {
    cleanup();
    return Status(ErrorCode::kCudaError, "workspace allocation failed");
  }
  args.workspace = ws;
  Status s = tactic.enqueue(args);
  if (s.ok() && cudaDeviceSynchronize() != cudaSuccess)
    s = Status(ErrorCode::kCudaError,
               std::string("kernel failed: ") + cudaGetErrorString(cudaGetLastError()));
  std::vector<Tensor> outs;
  for (size_t i = 0; s.ok() && i < dOut.size(); ++i) {
    std::vector<uint8_t> host(outBytes[i]);
    if (cudaMemcpy(host.data(), dOut[i], outBytes[i], cudaMemcpyDeviceToHost) != cudaSuccess) {
      s = Status(ErrorCode::kCudaError, "output download failed");
      break;
    }
    outs.push_back(fromFormat(host, tactic.outputFormat(i), layer.outputTypes[i],
                              layer.outputShapes[i], layer.outputScale(i)));
  }
  cleanup();
  if (!s.ok()) return s;
  return outs;
}

/// ||a - b|| / ||b|| over all elements (NaN anywhere gives +inf).
inline double relL2(const Tensor& a, const Tensor& b) {
  double num = 0, den = 0;
  for (int64_t i = 0; i < b.numel(); ++i) {
    const double x = a.getAsDouble(i), y = b.getAsDouble(i);
    if (std::isnan(x) != std::isnan(y)) return INFINITY;
    if (std::isnan(x)) continue;
    if (std::isinf(x) || std::isinf(y)) {  // equal infinities match; any other is off by inf
      if (x != y) return INFINITY;
      continue;
    }
    num += (x - y) * (x - y);
    den += y * y;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

/// Times every candidate on `input0` (the layer's only non-constant input; the others are
/// constants the tactics prepared in initialize()) with CUDA events: 5 warm-up launches, the
/// median of 20. Prints the sorted table (printing-only performance tests use this).
inline void printTacticTimings(std::vector<std::unique_ptr<builder::Tactic>>& candidates,
                               const builder::LayerContext& layer, const Tensor& input0) {
  struct Row {
    std::string id;
    double ms;
    size_t ws;
  };
  std::vector<Row> rows;
  const size_t yElems = static_cast<size_t>(layer.outputShapes[0].numel());
  cudaEvent_t e0, e1;
  if (cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess) return;
  for (auto& t : candidates) {
    if (!t->initialize(layer).ok()) {
      rows.push_back({t->id() + " (initialize failed)", INFINITY, 0});
      continue;
    }
    const auto xb = toFormat(input0, t->inputFormat(0));
    void *dx = nullptr, *dy = nullptr, *ws = nullptr;
    const size_t yb = yElems * dataTypeSize(t->outputFormat(0).dtype);
    bool ok = cudaMalloc(&dx, xb.size()) == cudaSuccess && cudaMalloc(&dy, yb) == cudaSuccess &&
              cudaMemcpy(dx, xb.data(), xb.size(), cudaMemcpyHostToDevice) == cudaSuccess &&
              (!t->workspaceBytes() || cudaMalloc(&ws, t->workspaceBytes()) == cudaSuccess);
    builder::LaunchArgs args;
    args.inputs.assign(layer.inputShapes.size(), nullptr);
    args.inputs[0] = dx;
    args.outputs = {dy};
    args.workspace = ws;
    args.workspaceBytes = t->workspaceBytes();
    for (int i = 0; ok && i < 5; ++i) ok = t->enqueue(args).ok();
    std::vector<float> times;
    for (int i = 0; ok && i < 20; ++i) {
      cudaEventRecord(e0);
      ok = t->enqueue(args).ok();
      cudaEventRecord(e1);
      float ms = 0;
      ok = ok && cudaEventSynchronize(e1) == cudaSuccess &&
           cudaEventElapsedTime(&ms, e0, e1) == cudaSuccess;
      times.push_back(ms);
    }
    if (ok) {
      std::sort(times.begin(), times.end());
      rows.push_back({t->id(), (times[9] + times[10]) / 2, t->workspaceBytes()});
    } else {
      cudaGetLastError();
      rows.push_back({t->id() + " (failed)", INFINITY, t->workspaceBytes()});
    }
    cudaFree(dx);
    cudaFree(dy);
    cudaFree(ws);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  std::sort(rows.begin(), rows.end(),
            [](const Row& a, const Row& b) { return a.ms != b.ms ? a.ms < b.ms : a.id < b.id; });
  for (const Row& r : rows) std::printf("  %9.4f ms  ws %9zu  %s\n", r.ms, r.ws, r.id.c_str());
  std::fflush(stdout);
}

}  // namespace edgeinfer::test

#endif  // EDGEINFER_HAVE_CUDA
