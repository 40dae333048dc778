#include "quant/qdq_absorb.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>

#include "quant/qdq.h"

namespace edgeinfer::quant {
namespace {

bool isOnnxOp(const graph::Node& n, const char* op) {
  return n.domain.empty() && n.opType == op;
}

/// A positive finite per-tensor scale (a float32 constant of one element), or 0.
float perTensorScale(const graph::Graph& g, const std::string& name) {
  const Tensor* t = name.empty() ? nullptr : g.constant(name);
  if (!t || t->dtype() != DataType::kFloat32 || t->numel() != 1) return 0.f;
  const float s = t->data<float>()[0];
  return std::isfinite(s) && s > 0.f ? s : 0.f;
}

/// Why the zero point input `slot` of `n` is not an int8 zero (per tensor), or "" when it is.
/// A DequantizeLinear may omit it when its data is int8 (the zero point then is int8 0); a
/// QuantizeLinear without one produces uint8.
std::string zeroPointProblem(const graph::Graph& g, const graph::Node& n, bool dequantize) {
  if (!n.hasInput(2)) {
    if (!dequantize) return "no zero point (the output is uint8: asymmetric)";
    const graph::Value* x = g.findValue(n.inputs[0]);
    return x && x->dtype == DataType::kInt8 ? "" : "input is not int8";
  }
  const Tensor* zp = g.constant(n.inputs[2]);
  if (!zp) return "zero point is not a constant";
  if (zp->dtype() == DataType::kUInt8) return "zero point is uint8 (asymmetric)";
  if (zp->dtype() != DataType::kInt8) return "zero point is not int8";
  if (zp->numel() != 1) return "per-axis zero point";
  if (zp->data<int8_t>()[0] != 0) return "zero point is not 0 (asymmetric)";
  return "";
}

/// Per tensor or per axis: the scale of every element of `data` (one entry per channel along
/// the axis), checked like the reference kernels check them. Empty when `n`'s scale is not a
/// positive finite constant fitting `data`.
struct ChannelScales {
  std::vector<float> scales;
  int64_t inner = 1;  ///< elements per channel step
  float of(int64_t i) const {
    return scales.size() == 1
               ? scales[0]
               : scales[static_cast<size_t>((i / inner) % static_cast<int64_t>(scales.size()))];
  }
};

bool channelScales(const graph::Graph& g, const graph::Node& n, const Shape& data,
                   ChannelScales* out) {
  const Tensor* s = g.constant(n.input(1));
  if (!s || s->dtype() != DataType::kFloat32 || s->numel() < 1) return false;
  out->scales.assign(s->data<float>(), s->data<float>() + s->numel());
  for (float v : out->scales)
    if (!std::isfinite(v) || v <= 0.f) return false;
  if (s->numel() == 1) return true;
  const int64_t rank = static_cast<int64_t>(data.rank());
  int64_t axis = n.attrs.getInt("axis", 1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank || s->shape().rank() != 1 ||
      s->numel() != data[static_cast<size_t>(axis)])
    return false;
  out->inner = data.span(static_cast<size_t>(axis) + 1, data.rank());
  return true;
}

/// Is every element of the (optional) zero point input 0?
bool zeroPointsAllZero(const graph::Graph& g, const graph::Node& n) {
  if (!n.hasInput(2)) return true;
  const Tensor* zp = g.constant(n.inputs[2]);
  if (!zp) return false;
  for (int64_t i = 0; i < zp->numel(); ++i)
    if (zp->getAsInt64(i) != 0) return false;
  return true;
}

class Absorber {
 public:
  explicit Absorber(graph::Graph& g) : g_(g) {}

  Expected<QdqAbsorbResult> run() {
    foldWeights();
    absorbActivations();
    removeMarked();
    propagate();
    return std::move(r_);
  }

 private:
  void index() {
    readers_.clear();
    producer_.clear();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      if (dead_.count(i)) continue;
      for (const auto& in : g_.nodes[i].inputs)
        if (!in.empty()) readers_[in].push_back(i);
      for (const auto& o : g_.nodes[i].outputs)
        if (!o.empty()) producer_[o] = i;
    }
    for (auto& [v, list] : readers_) {  // a node reading a value twice counts once
      std::sort(list.begin(), list.end());
      list.erase(std::unique(list.begin(), list.end()), list.end());
    }
  }
  const std::vector<size_t>& readersOf(const std::string& v) const {
    static const std::vector<size_t> none;
    const auto it = readers_.find(v);
    return it == readers_.end() ? none : it->second;
  }

  /// Weights: DequantizeLinear of a constant (int8, or int32 for a bias), or of a
  /// QuantizeLinear of a float constant, read only by Conv / Gemm / MatMul, becomes the float
  /// constant DequantizeLinear computes: q * s (zero points must be 0).
  //
  // The cuda-i8 tactics quantize these floats again per output channel with
  // s' = max |w| / 127 (quant::quantizeWeights). Where the model's weights are per channel on
  // the output-channel axis (or per tensor with one channel) and each channel's largest |q| is
  // 127 (what QAT tools produce: s_w = max |w| / 127), s' equals the model's s_w and the
  // tactic's int8 weights are the model's int8 weights exactly. Otherwise (a channel whose
  // largest |q| is below 127, per-tensor scales over several channels) s' is smaller than s_w:
  // a finer grid on which every model weight q * s_w still lies within half a step of s',
  // i.e. the engine's weights differ from the model's by at most s' / 2 per element.
  void foldWeights() {
    index();
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const graph::Node& d = g_.nodes[i];
      if (!isOnnxOp(d, "DequantizeLinear") || d.outputs.size() != 1 || !d.hasInput(0)) continue;
      const std::string& out = d.outputs[0];
      if (g_.isGraphOutput(out) || readersOf(out).empty()) continue;
      bool weightReaders = true, biasOnly = true;
      for (size_t k : readersOf(out)) {
        const graph::Node& c = g_.nodes[k];
        weightReaders =
            weightReaders && (isOnnxOp(c, "Conv") || isOnnxOp(c, "Gemm") || isOnnxOp(c, "MatMul"));
        for (size_t slot = 0; slot < c.inputs.size(); ++slot)
          if (c.inputs[slot] == out)
            biasOnly = biasOnly && slot == 2 && (isOnnxOp(c, "Conv") || isOnnxOp(c, "Gemm"));
      }
      if (!weightReaders) continue;

      // The quantized values: a constant, or a QuantizeLinear of a float constant.
      const Tensor* q = g_.constant(d.inputs[0]);
      int quantizeNode = -1;
      Tensor quantized;
      if (!q) {
        const auto p = producer_.find(d.inputs[0]);
        if (p == producer_.end()) continue;
        const graph::Node& qn = g_.nodes[p->second];
        const Tensor* w = qn.hasInput(0) ? g_.constant(qn.inputs[0]) : nullptr;
        if (!isOnnxOp(qn, "QuantizeLinear") || !w || w->dtype() != DataType::kFloat32) continue;
        ChannelScales qs;
        if (!channelScales(g_, qn, w->shape(), &qs) || !qn.hasInput(2) ||
            !zeroPointsAllZero(g_, qn) || g_.constant(qn.inputs[2])->dtype() != DataType::kInt8)
          continue;
        quantized = Tensor::zeros(DataType::kInt8, w->shape());
        for (int64_t e = 0; e < w->numel(); ++e) {  // as QuantizeLinear: round half to even
          const float v = std::nearbyint(w->data<float>()[e] / qs.of(e));
          quantized.data<int8_t>()[e] =
              std::isnan(v) ? 0 : static_cast<int8_t>(std::min(std::max(v, -128.f), 127.f));
        }
        q = &quantized;
        quantizeNode = static_cast<int>(p->second);
      }
      if (q->dtype() != DataType::kInt8 && !(q->dtype() == DataType::kInt32 && biasOnly)) continue;
      ChannelScales ds;
      if (!channelScales(g_, d, q->shape(), &ds) || !zeroPointsAllZero(g_, d)) continue;
      Tensor w = Tensor::zeros(DataType::kFloat32, q->shape());
      for (int64_t e = 0; e < q->numel(); ++e)  // as DequantizeLinear: (q - 0) * s in float
        w.data<float>()[e] = static_cast<float>(q->getAsInt64(e)) * ds.of(e);
      graph::Value& v = g_.value(out);
      v.dtype = DataType::kFloat32;
      v.shape = w.shape();
      v.shapeKnown = true;
      v.constant = std::move(w);
      dead_.insert(i);
      if (quantizeNode >= 0 && readersOf(d.inputs[0]).size() == 1 &&
          !g_.isGraphOutput(d.inputs[0])) {
        dead_.insert(static_cast<size_t>(quantizeNode));
        erased_.insert(d.inputs[0]);
      }
      ++r_.weightsFolded;
    }
  }

  /// Why the QuantizeLinear `qi` and the DequantizeLinear nodes reading it are not a
  /// symmetric per-tensor pair of scale `*scale`, or "" when they are (they are added to
  /// `pair`).
  std::string checkPair(size_t qi, float* scale, std::vector<size_t>* pair) {
    const graph::Node& q = g_.nodes[qi];
    const std::string what = "QuantizeLinear '" + q.name + "': ";
    const Tensor* st = g_.constant(q.input(1));
    if (st && st->numel() > 1) return what + "per-axis scale (activations are per tensor)";
    *scale = perTensorScale(g_, q.input(1));
    if (*scale <= 0.f) return what + "scale is not a positive finite float32 constant";
    if (std::string z = zeroPointProblem(g_, q, false); !z.empty()) return what + z;
    if (q.outputs.size() != 1 || g_.isGraphOutput(q.outputs[0]) || readersOf(q.outputs[0]).empty())
      return what + "its output is not read by a DequantizeLinear only";
    for (size_t di : readersOf(q.outputs[0])) {
      const graph::Node& d = g_.nodes[di];
      if (!isOnnxOp(d, "DequantizeLinear") || d.outputs.size() != 1 || d.input(0) != q.outputs[0])
        return what + "its output is not read by a DequantizeLinear only ('" + d.name + "', " +
               d.opType + ")";
      const Tensor* ds = g_.constant(d.input(1));
      if (ds && ds->numel() > 1) return what + "DequantizeLinear '" + d.name + "' is per axis";
      if (perTensorScale(g_, d.input(1)) != *scale)
        return what + "DequantizeLinear '" + d.name + "' has another scale";
      if (std::string z = zeroPointProblem(g_, d, true); !z.empty())
        return what + "DequantizeLinear '" + d.name + "': " + z;
      if (g_.isGraphOutput(d.outputs[0]))
        return what + "DequantizeLinear '" + d.name + "' writes a graph output";
      pair->push_back(di);
    }
    return "";
  }

  void absorbActivations() {
    index();
    std::set<std::string> done;
    for (size_t i = 0; i < g_.nodes.size(); ++i) {
      const graph::Node& first = g_.nodes[i];
      if (dead_.count(i) || !isOnnxOp(first, "QuantizeLinear") || !first.hasInput(0)) continue;
      const std::string x = first.inputs[0];
      if (g_.isConstant(x) || !done.insert(x).second) continue;
      const graph::Value* xv = g_.findValue(x);
      std::vector<size_t> pairNodes;
      std::string why;
      float scale = 0.f;
      if (!xv || xv->dtype != DataType::kFloat32) why = "input '" + x + "' is not float32";
      if (why.empty() && g_.isGraphOutput(x)) why = "'" + x + "' is a graph output";
      for (size_t k : readersOf(x)) {
        if (!why.empty()) break;
        if (!isOnnxOp(g_.nodes[k], "QuantizeLinear") || g_.nodes[k].input(0) != x) {
          why = "'" + x + "' is also read without Q/DQ (by '" + g_.nodes[k].name + "')";
          break;
        }
        float s = 0.f;
        why = checkPair(k, &s, &pairNodes);
        if (why.empty() && scale > 0.f && s != scale)
          why = "'" + x + "' is quantized with different scales";
        scale = s;
        pairNodes.push_back(k);
      }
      if (!why.empty()) {
        r_.leftInPlace.push_back(why.rfind("QuantizeLinear '", 0) == 0
                                     ? why
                                     : "QuantizeLinear '" + first.name + "': " + why);
        continue;
      }
      for (size_t k : pairNodes) {
        const graph::Node& n = g_.nodes[k];
        dead_.insert(k);
        erased_.insert(n.outputs[0]);
        if (isOnnxOp(n, "DequantizeLinear")) {
          for (graph::Node& c : g_.nodes)
            for (auto& in : c.inputs)
              if (in == n.outputs[0]) in = x;
          ++r_.pairsAbsorbed;
        }
      }
      r_.scales[x] = scale;
    }
  }

  void removeMarked() {
    std::vector<graph::Node> kept;
    kept.reserve(g_.nodes.size());
    for (size_t i = 0; i < g_.nodes.size(); ++i)
      if (!dead_.count(i)) kept.push_back(std::move(g_.nodes[i]));
    g_.nodes = std::move(kept);
    dead_.clear();
    for (const auto& v : erased_) g_.eraseValue(v);
    erased_.clear();
  }

  /// Relu and MaxPool outputs take their input's scale (they commute with quantization).
  void propagate() {
    for (bool changed = true; changed;) {
      changed = false;
      for (const graph::Node& n : g_.nodes) {
        const bool relu = isOnnxOp(n, "Relu");
        const bool pool = isOnnxOp(n, "MaxPool") && (n.outputs.size() == 1 || n.outputs[1].empty());
        if ((!relu && !pool) || !n.hasInput(0) || n.outputs.empty()) continue;
        const auto in = r_.scales.find(n.inputs[0]);
        const graph::Value* ov = g_.findValue(n.outputs[0]);
        if (in == r_.scales.end() || r_.scales.count(n.outputs[0]) || !ov ||
            ov->dtype != DataType::kFloat32)
          continue;
        r_.scales[n.outputs[0]] = in->second;
        ++r_.scalesPropagated;
        changed = true;
      }
    }
  }

  graph::Graph& g_;
  QdqAbsorbResult r_;
  std::unordered_map<std::string, std::vector<size_t>> readers_;
  std::unordered_map<std::string, size_t> producer_;
  std::set<size_t> dead_;
  std::set<std::string> erased_;
};

}  // namespace

Expected<QdqAbsorbResult> absorbQdq(graph::Graph& g) {
  return Absorber(g).run();
}

std::vector<std::string> ExplicitInt8::int8Layers() const {
  std::vector<std::string> out;
  for (const auto& [name, p] : calibration.layerPrecision)
    if (p == Precision::kInt8) out.push_back(name);
  return out;
}

ExplicitInt8 explicitInt8For(const graph::Graph& g, const std::map<std::string, float>& scales) {
  ExplicitInt8 e;
  for (const auto& [name, s] : scales) {
    const graph::Value* v = g.findValue(name);
    if (!v || g.isConstant(name) || v->dtype != DataType::kFloat32) {
      e.droppedScales.push_back(name);
      continue;
    }
    e.scales[name] = s;
    e.calibration.tensorAmax[name] = s * 127.f;
  }
  for (const QuantLayer& l : findQuantizableLayers(g)) {
    bool all = !l.activationSlots.empty();
    for (size_t slot : l.activationSlots) all = all && e.scales.count(g.nodes[l.node].inputs[slot]);
    e.calibration.layerPrecision[l.name] = all ? Precision::kInt8 : Precision::kFp16;
  }
  return e;
}

}  // namespace edgeinfer::quant
