// Small helpers shared by the CPU reference kernel tests (tests/unit/test_ref_*.cpp): tensor
// builders, random inputs, single-node graphs, running a node through ref::runNode and
// build-time shape inference.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "graph/op_schema.h"
#include "kernels/ref/ref_kernels.h"

namespace edgeinfer::test {

/// A tensor of type `dt` and shape `s` holding `v` (whose element type must match `dt`).
template <typename T>
inline Tensor make(DataType dt, Shape s, const std::vector<T>& v) {
  Tensor t = Tensor::zeros(dt, s);
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size());
  if (!v.empty()) std::memcpy(t.raw(), v.data(), v.size() * sizeof(T));
  return t;
}

/// Typed shorthands for make().
inline Tensor f32(Shape s, const std::vector<float>& v) {
  return make(DataType::kFloat32, s, v);
}
inline Tensor i32(Shape s, const std::vector<int32_t>& v) {
  return make(DataType::kInt32, s, v);
}
inline Tensor i64(Shape s, const std::vector<int64_t>& v) {
  return make(DataType::kInt64, s, v);
}
inline Tensor u8(Shape s, const std::vector<uint8_t>& v) {
  return make(DataType::kUInt8, s, v);
}
inline Tensor s8(Shape s, const std::vector<int8_t>& v) {
  return make(DataType::kInt8, s, v);
}

/// A float tensor of uniform random values in [lo, hi) from a fixed seed.
inline Tensor randomF32(Shape s, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(s.numel()));
  for (auto& x : v) x = d(rng);
  return f32(s, v);
}

/// A node of type `op` with inputs "in0".."in<nIn-1>" and outputs "out0".."out<nOut-1>".
inline graph::Node makeNode(const std::string& op, size_t nIn, size_t nOut = 1) {
  graph::Node n;
  n.name = op + "_test";
  n.opType = op;
  for (size_t i = 0; i < nIn; ++i) n.inputs.push_back("in" + std::to_string(i));
  for (size_t i = 0; i < nOut; ++i) n.outputs.push_back("out" + std::to_string(i));
  return n;
}

/// Runs a node that must succeed; returns all its outputs.
inline std::vector<Tensor> runAll(const graph::Node& n, const std::vector<const Tensor*>& in) {
  std::vector<Tensor> out;
  Status s = ref::runNode(n, in, out);
  EXPECT_TRUE(s.ok()) << s.toString();
  return out;
}

/// Runs a node that must succeed; returns its first output (an empty tensor on failure).
inline Tensor run1(const graph::Node& n, const std::vector<const Tensor*>& in) {
  std::vector<Tensor> out;
  Status s = ref::runNode(n, in, out);
  EXPECT_TRUE(s.ok()) << s.toString();
  return s.ok() && !out.empty() ? out[0] : Tensor();
}

/// Runs a node and returns its status (for the negative cases).
inline Status runStatus(const graph::Node& n, const std::vector<const Tensor*>& in) {
  std::vector<Tensor> out;
  return ref::runNode(n, in, out);
}

/// Build-time shape inference: inputs with known types/shapes, values only where given.
inline Expected<std::vector<graph::InferValue>> inferBuild(const graph::Node& n,
                                                           std::vector<graph::InferValue> in) {
  graph::InferContext ctx(n, std::move(in));
  Status s = graph::inferNode(ctx);
  if (!s.ok()) return s;
  return ctx.outputs;
}

/// An inference input of known type and shape (dims may be -1), with contents if `value`.
inline graph::InferValue iv(DataType dt, Shape s, const Tensor* value = nullptr) {
  graph::InferValue v;
  v.dtype = dt;
  v.shape = std::move(s);
  v.shapeKnown = true;
  v.value = value;
  return v;
}

/// An inference input of known type whose shape (even its rank) is unknown.
inline graph::InferValue ivUnknown(DataType dt) {
  graph::InferValue v;
  v.dtype = dt;
  v.shapeKnown = false;
  return v;
}

/// A tensor's elements as doubles, in flat order, for comparing with V{...}.
inline std::vector<double> vals(const Tensor& t) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = t.getAsDouble(int64_t(i));
  return v;
}
using V = std::vector<double>;

}  // namespace edgeinfer::test
