// One layer with activation and constant inputs, for the `cuda` provider's tests: builds the
// node and a graph holding its constants, runs every candidate against the CPU reference.
// Consumed constant inputs reach the tactic as nullptr, as in the engine (tactic.h).
#pragma once

#ifdef EDGEINFER_HAVE_CUDA

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_provider.h"
#include "tactic_test_util.h"

namespace edgeinfer::test {

/// Random float32 values that FP16 represents exactly (every tactic then sees the reference's
/// inputs, and data movement must match bit for bit).
inline Tensor randomHalfExact(const Shape& s, uint32_t seed, float lo = -3.f, float hi = 3.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  Tensor t = Tensor::zeros(DataType::kFloat32, s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = halfToFloat(floatToHalf(d(rng)));
  return t;
}

/// Random integers in [lo, hi] (int64, int32, int8, uint8, or bool: nonzero is true).
inline Tensor randomInts(const Shape& s, DataType dt, uint32_t seed, int64_t lo = -1000000,
                         int64_t hi = 1000000) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> d(lo, hi);
  Tensor t = Tensor::zeros(dt, s);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DataType::kInt64)
      t.data<int64_t>()[i] = d(rng);
    else if (dt == DataType::kInt32)
      t.data<int32_t>()[i] = static_cast<int32_t>(d(rng));
    else if (dt == DataType::kInt8)
      t.data<int8_t>()[i] = static_cast<int8_t>(d(rng));
    else if (dt == DataType::kBool)
      t.data<uint8_t>()[i] = d(rng) != 0 ? 1 : 0;
    else  // kUInt8
      t.data<uint8_t>()[i] = static_cast<uint8_t>(d(rng));
  }
  return t;
}

/// `v` as a 1-D tensor, or in `shape` (which must hold v.size() elements).
inline Tensor intTensor(DataType dt, const std::vector<int64_t>& v, const Shape* shape = nullptr) {
  Tensor t = Tensor::zeros(dt, shape ? *shape : Shape{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == DataType::kInt64)
      t.data<int64_t>()[i] = v[i];
    else
      t.data<int32_t>()[i] = static_cast<int32_t>(v[i]);
  }
  return t;
}

inline Tensor floatScalar(float v) {
  Tensor t = Tensor::zeros(DataType::kFloat32, Shape{});
  *t.data<float>() = v;
  return t;
}

inline Tensor floatTensor(const std::vector<float>& v) {
  Tensor t = Tensor::zeros(DataType::kFloat32, Shape{static_cast<int64_t>(v.size())});
  for (size_t i = 0; i < v.size(); ++i) t.data<float>()[i] = v[i];
  return t;
}

class LayerCase {
 public:
  explicit LayerCase(const std::string& op) {
    node_.name = op + "_gpu_test";
    node_.opType = op;
    node_.outputs = {"y"};
  }
  LayerCase& input(Tensor t) { return add(std::move(t), false); }
  LayerCase& constant(Tensor t) { return add(std::move(t), true); }
  LayerCase& absent() {
    node_.inputs.emplace_back();
    tensors_.push_back(nullptr);
    constant_.push_back(false);
    return *this;
  }
  /// `n` outputs y0 .. y(n-1), every one of them compared with the reference.
  LayerCase& outputs(size_t n) {
    node_.outputs.clear();
    for (size_t k = 0; k < n; ++k) node_.outputs.push_back("y" + std::to_string(k));
    allOutputs_ = true;
    return *this;
  }
  LayerCase& attr(const std::string& name, graph::Attribute a) {
    node_.attrs.set(name, std::move(a));
    return *this;
  }
  graph::Node& node() { return node_; }
  /// The graph holding the constants (to alter one after the layer is made).
  graph::Graph& graph() { return g_; }
  std::vector<const Tensor*> inputs() const {
    std::vector<const Tensor*> v;
    for (const auto& t : tensors_) v.push_back(t.get());
    return v;
  }
  Status layer(builder::LayerContext* out) const { return makeLayer(node_, g_, inputs(), out); }

  /// Candidates at `precision` (no GPU needed).
  std::vector<std::unique_ptr<builder::Tactic>> candidates(Precision precision = Precision::kFp16,
                                                           builder::LayerContext* out = nullptr) {
    builder::LayerContext layer;
    const Status s = this->layer(&layer);
    EXPECT_TRUE(s.ok()) << s.toString();
    if (!s.ok()) return {};
    cuda::CudaKernelProvider provider;
    auto c = provider.candidates(layer, precision);
    if (out) *out = layer;
    return c;
  }

  /// Runs every candidate at FP16 precision against the reference; expects exactly the ids
  /// `expected`. tol32/tol16: rel. L2 bound for FP32/integer and FP16 storage (0: exact).
  void check(const std::set<std::string>& expected, double tol32, double tol16) {
    cuda::CudaKernelProvider provider;
    EXPECT_EQ(runAll(provider, tol32, tol16), expected);
  }

  /// Runs every candidate `provider` offers at FP16 precision against the reference; returns
  /// their ids.
  std::set<std::string> runAll(builder::TacticProvider& provider, double tol32, double tol16) {
    std::set<std::string> ids;
    SCOPED_TRACE(node_.opType + " " + (tensors_[0] ? tensors_[0]->shape().toString() : ""));
    builder::LayerContext layer;
    const Status ls = this->layer(&layer);
    EXPECT_TRUE(ls.ok()) << ls.toString();
    if (!ls.ok()) return ids;
    std::vector<Tensor> ref;
    const Status rs = ref::runNode(node_, inputs(), ref);
    EXPECT_TRUE(rs.ok()) << rs.toString();
    if (!rs.ok()) return ids;
    auto cands = provider.candidates(layer, Precision::kFp16);
    for (auto& t : cands) ids.insert(t->id());
    EXPECT_EQ(ids.size(), cands.size()) << "duplicate tactic ids";
    for (auto& t : cands) {
      const Status is = t->initialize(layer);
      EXPECT_TRUE(is.ok()) << t->id() << ": " << is.toString();
      if (!is.ok()) continue;
      std::vector<const Tensor*> in = inputs();
      for (size_t i = 0; i < in.size(); ++i) {
        // Only constants (or absent inputs) may be consumed; activations are passed as they are.
        if (in[i] && !constant_[i]) {
          EXPECT_FALSE(t->consumesInput(i)) << t->id() << " input " << i;
        }
        if (t->consumesInput(i)) in[i] = nullptr;
      }
      auto outs = runTactic(*t, layer, in);
      EXPECT_TRUE(outs.ok()) << t->id() << ": " << outs.status().toString();
      if (!outs.ok()) continue;
      const size_t compared = allOutputs_ ? ref.size() : 1;
      EXPECT_GE(outs->size(), compared) << t->id();
      for (size_t k = 0; k < compared && k < outs->size(); ++k) {
        const Tensor& got = (*outs)[k];
        EXPECT_EQ(got.shape(), ref[k].shape()) << t->id() << " output " << k;
        if (got.shape() != ref[k].shape()) continue;
        const double err = relL2(got, ref[k]);
        const double tol = t->outputFormat(k).dtype == DataType::kFloat16 ? tol16 : tol32;
        EXPECT_LE(err, tol) << t->id() << " output " << k;
        if (tol == 0) {  // exact: compare every element
          int64_t bad = 0;
          for (int64_t i = 0; i < ref[k].numel(); ++i) {
            const double a = got.getAsDouble(i), b = ref[k].getAsDouble(i);
            bad += a != b && !(std::isnan(a) && std::isnan(b)) ? 1 : 0;
          }
          EXPECT_EQ(bad, 0) << t->id() << " output " << k;
        }
      }
    }
    return ids;
  }

 private:
  LayerCase& add(Tensor t, bool isConstant) {
    const std::string name = "in" + std::to_string(node_.inputs.size());
    node_.inputs.push_back(name);
    tensors_.push_back(std::make_unique<Tensor>(t));
    constant_.resize(tensors_.size(), false);
    constant_.back() = isConstant;
    if (isConstant) {
      graph::Value& v = g_.value(name);
      v.dtype = t.dtype();
      v.shape = t.shape();
      v.shapeKnown = true;
      v.constant = std::move(t);
    }
    return *this;
  }

  graph::Graph g_;
  graph::Node node_;
  std::vector<std::unique_ptr<Tensor>> tensors_;
  std::vector<bool> constant_;
  bool allOutputs_ = false;
};

/// The ids "cuda.<family>.<type>.<layout>" for every type and layout given.
inline std::set<std::string> ids(const std::string& family, const std::vector<std::string>& types,
                                 const std::vector<std::string>& layouts) {
  std::set<std::string> s;
  for (const auto& t : types)
    for (const auto& l : layouts) s.insert("cuda." + family + "." + t + "." + l);
  return s;
}

}  // namespace edgeinfer::test

#endif  // EDGEINFER_HAVE_CUDA
