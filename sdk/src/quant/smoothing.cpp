#include "quant/smoothing.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

namespace edgeinfer::quant {
namespace {

bool isConv(const graph::Node& n) {
  return (n.domain.empty() && n.opType == "Conv") ||
         (n.domain == graph::kEdgeInferDomain && n.opType == "FusedConv");
}

const Tensor* floatConstant(const graph::Graph& g, const graph::Node& n, size_t slot) {
  if (!n.hasInput(slot)) return nullptr;
  const Tensor* t = g.constant(n.inputs[slot]);
  return t && t->dtype() == DataType::kFloat32 ? t : nullptr;
}

/// Conv weights [M, C/group, k...] of node `n` reading `channels` input channels, or null.
const Tensor* readerWeights(const graph::Graph& g, const graph::Node& n, int64_t channels) {
  const Tensor* w = floatConstant(g, n, 1);
  if (!w || w->shape().rank() < 3) return nullptr;
  const int64_t group = n.attrs.getInt("group", 1);
  if (group < 1 || channels % group || w->shape()[1] != channels / group || w->shape()[0] % group)
    return nullptr;
  return w;
}

/// A convolution that can write x / s for x: constant weights (and bias) of `channels` rows and
/// an activation that commutes with a positive scale.
bool scalableProducer(const graph::Graph& g, const graph::Node& n, int64_t channels) {
  const Tensor* w = floatConstant(g, n, 1);
  if (!w || w->shape().rank() < 3 || w->shape()[0] != channels) return false;
  if (n.hasInput(2)) {
    const Tensor* b = floatConstant(g, n, 2);
    if (!b || b->numel() != channels) return false;
  }
  if (n.domain.empty()) return true;
  const std::string act = n.attrs.getString("activation", "");
  return act.empty() || act == "Relu" || act == "LeakyRelu";
}

/// Ops whose output channel c is a function of their inputs' channel c alone that commutes
/// with a positive scale.
bool channelwiseOp(const graph::Node& n) {
  if (!n.domain.empty()) return false;
  static const char* const kOps[] = {"Relu",        "LeakyRelu",         "MaxPool",
                                     "AveragePool", "GlobalAveragePool", "GlobalMaxPool",
                                     "Identity"};
  for (const char* op : kOps)
    if (n.opType == op) return true;
  return false;
}

struct UnionFind {
  std::vector<int64_t> parent;
  explicit UnionFind(int64_t n) : parent(static_cast<size_t>(n)) {
    std::iota(parent.begin(), parent.end(), 0);
  }
  int64_t find(int64_t x) {
    while (parent[static_cast<size_t>(x)] != x) {
      parent[static_cast<size_t>(x)] = parent[static_cast<size_t>(parent[static_cast<size_t>(x)])];
      x = parent[static_cast<size_t>(x)];
    }
    return x;
  }
  void unite(int64_t a, int64_t b) { parent[static_cast<size_t>(find(a))] = find(b); }
};

/// Input `slot` of node `n` becomes a new constant `t` (another reader of the old constant
/// keeps it; one nothing reads any more is dropped).
void replaceConstant(graph::Graph& g, graph::Node& n, size_t slot, Tensor t) {
  const std::string old = n.inputs[slot];
  const std::string fresh = g.uniqueName(old + "/smoothed");
  graph::Value& v = g.value(fresh);
  v.dtype = t.dtype();
  v.shape = t.shape();
  v.shapeKnown = true;
  v.constant = std::move(t);
  n.inputs[slot] = fresh;
  for (const graph::Node& m : g.nodes)
    if (std::find(m.inputs.begin(), m.inputs.end(), old) != m.inputs.end()) return;
  if (!g.isGraphOutput(old)) g.eraseValue(old);
}

/// The constant ints of input `slot` (Pad's pads), or false.
bool constantInts(const graph::Graph& g, const graph::Node& n, size_t slot,
                  std::vector<int64_t>* out) {
  const Tensor* t = n.hasInput(slot) ? g.constant(n.inputs[slot]) : nullptr;
  if (!t || t->dtype() != DataType::kInt64) return false;
  out->assign(t->data<int64_t>(), t->data<int64_t>() + t->numel());
  return true;
}

}  // namespace

SmoothingPlan SmoothingPlan::analyze(const graph::Graph& g) {
  SmoothingPlan plan;
  int64_t slots = 0;
  const auto add = [&](const std::string& name) {
    if (name.empty() || plan.tensors_.count(name) || g.isConstant(name)) return;
    const graph::Value* v = g.findValue(name);
    if (!v || !v->shapeKnown || v->dtype != DataType::kFloat32 || v->shape.rank() < 3 ||
        v->shape[1] <= 0)
      return;
    plan.tensors_[name] = {slots, v->shape[1]};
    slots += v->shape[1];
  };
  for (const auto& n : g.nodes) {
    for (const auto& in : n.inputs) add(in);
    for (const auto& out : n.outputs) add(out);
  }
  UnionFind uf(slots);
  std::vector<char> bad(static_cast<size_t>(slots), 0);
  const auto slotsOf = [&](const std::string& name) -> const Slots* {
    auto it = plan.tensors_.find(name);
    return it == plan.tensors_.end() ? nullptr : &it->second;
  };
  const auto poison = [&](const std::string& name) {
    if (const Slots* s = slotsOf(name))
      for (int64_t c = 0; c < s->channels; ++c) bad[static_cast<size_t>(s->first + c)] = 1;
  };
  // Links channel c of `a` with channel c + offset of `b`.
  const auto link = [&](const Slots& a, const Slots& b, int64_t offset) {
    for (int64_t c = 0; c < a.channels; ++c) uf.unite(a.first + c, b.first + offset + c);
  };
  const auto poisonAll = [&](const graph::Node& n) {
    for (const auto& in : n.inputs) poison(in);
    for (const auto& out : n.outputs) poison(out);
  };
  for (const auto& in : g.inputs) poison(in);
  for (const auto& out : g.outputs) poison(out);

  for (const auto& n : g.nodes) {
    if (isConv(n)) {
      const Slots* x = n.hasInput(0) ? slotsOf(n.inputs[0]) : nullptr;
      if (x && !readerWeights(g, n, x->channels)) poison(n.inputs[0]);
      for (size_t i = 1; i < n.inputs.size(); ++i)
        if (i != 3 || n.domain.empty()) poison(n.inputs[i]);  // weights computed at run time
      const Slots* y = n.outputs.size() == 1 ? slotsOf(n.outputs[0]) : nullptr;
      if (n.outputs.size() != 1 || !y || !scalableProducer(g, n, y->channels)) {
        for (const auto& out : n.outputs) poison(out);
        if (n.domain == graph::kEdgeInferDomain && n.hasInput(3)) poison(n.inputs[3]);
        continue;
      }
      if (n.domain == graph::kEdgeInferDomain && n.hasInput(3)) {  // residual Z
        const Slots* z = slotsOf(n.inputs[3]);
        if (z && z->channels == y->channels && n.inputs[3] != n.inputs[0])
          link(*z, *y, 0);
        else
          poison(n.inputs[3]), poison(n.outputs[0]);
      }
      continue;
    }
    const Slots* y = n.outputs.size() == 1 ? slotsOf(n.outputs[0]) : nullptr;
    if (channelwiseOp(n) && y && n.hasInput(0)) {
      const Slots* x = slotsOf(n.inputs[0]);
      bool ok = x && x->channels == y->channels;
      for (size_t i = 1; i < n.inputs.size(); ++i) ok = ok && !n.hasInput(i);
      if (ok)
        link(*x, *y, 0);
      else
        poisonAll(n);
      continue;
    }
    if (n.domain.empty() && n.opType == "Add" && y && n.inputs.size() == 2) {
      const Slots* a = slotsOf(n.inputs[0]);
      const Slots* b = slotsOf(n.inputs[1]);
      const graph::Value* va = g.findValue(n.inputs[0]);
      const graph::Value* vb = g.findValue(n.inputs[1]);
      const graph::Value* vy = g.findValue(n.outputs[0]);
      if (a && b && va->shape == vy->shape && vb->shape == vy->shape) {
        link(*a, *y, 0);
        link(*b, *y, 0);
      } else {
        poisonAll(n);
      }
      continue;
    }
    if (n.domain.empty() && n.opType == "Pad" && y && n.hasInput(0)) {
      const Slots* x = slotsOf(n.inputs[0]);
      std::vector<int64_t> pads = n.attrs.getInts("pads");
      const bool fromInput = n.hasInput(1);
      const std::string mode = n.attrs.getString("mode", "constant");
      bool ok = x && mode == "constant" && !n.hasInput(3);
      if (ok && fromInput) ok = constantInts(g, n, 1, &pads);
      if (ok && n.hasInput(2)) {  // the pad value must be 0
        const Tensor* v = g.constant(n.inputs[2]);
        ok = v && v->dtype() == DataType::kFloat32 && v->numel() == 1 && v->data<float>()[0] == 0;
      }
      if (ok && !fromInput) ok = n.attrs.getFloat("value", 0.f) == 0.f;
      const graph::Value* vx = ok ? g.findValue(n.inputs[0]) : nullptr;
      const size_t rank = vx ? vx->shape.rank() : 0;
      ok = ok && pads.size() == 2 * rank && pads[1] >= 0 && pads[rank + 1] >= 0 &&
           x->channels + pads[1] + pads[rank + 1] == y->channels;
      if (ok)
        link(*x, *y, pads[1]);  // the zeros in the new channels take any factor
      else
        poisonAll(n);
      continue;
    }
    if (n.domain.empty() && n.opType == "Concat" && y) {
      const graph::Value* vy = g.findValue(n.outputs[0]);
      int64_t axis = n.attrs.getInt("axis", 0);
      if (axis < 0) axis += static_cast<int64_t>(vy->shape.rank());
      // Channels of each input: linked, or zeros (a constant of zeros: channel padding as
      // TensorFlow exports it), which take any factor.
      const auto channelsOf = [&](const std::string& in) -> int64_t {
        if (const Slots* x = slotsOf(in)) return x->channels;
        const Tensor* t = g.constant(in);
        if (!t || t->dtype() != DataType::kFloat32 || t->shape().rank() != vy->shape.rank())
          return -1;
        for (int64_t k = 0; k < t->numel(); ++k)
          if (t->data<float>()[k] != 0.f) return -1;
        return t->shape()[1];
      };
      int64_t offset = 0;
      bool ok = axis == 1;
      for (size_t i = 0; ok && i < n.inputs.size(); ++i) {
        const int64_t c = channelsOf(n.inputs[i]);
        ok = c >= 0;
        offset += c;
      }
      ok = ok && offset == y->channels;
      if (ok) {
        offset = 0;
        for (const auto& in : n.inputs) {
          if (const Slots* x = slotsOf(in)) link(*x, *y, offset);
          offset += channelsOf(in);
        }
      } else {
        poisonAll(n);
      }
      continue;
    }
    poisonAll(n);
  }

  // Classes: the linked sets without a slot that cannot be scaled.
  std::vector<char> rootBad(static_cast<size_t>(slots), 0);
  for (int64_t s = 0; s < slots; ++s)
    if (bad[static_cast<size_t>(s)]) rootBad[static_cast<size_t>(uf.find(s))] = 1;
  std::map<int64_t, int> ids;
  plan.classOf_.assign(static_cast<size_t>(slots), -1);
  for (int64_t s = 0; s < slots; ++s) {
    const int64_t r = uf.find(s);
    if (rootBad[static_cast<size_t>(r)]) continue;
    auto it = ids.emplace(r, static_cast<int>(ids.size())).first;
    plan.classOf_[static_cast<size_t>(s)] = it->second;
  }
  plan.classes_ = static_cast<int>(ids.size());
  // Components: classes that share a tensor.
  UnionFind comp(plan.classes_);
  for (const auto& [name, s] : plan.tensors_) {
    int first = -1;
    for (int64_t c = 0; c < s.channels; ++c) {
      const int k = plan.classOf_[static_cast<size_t>(s.first + c)];
      if (k < 0) continue;
      if (first < 0)
        first = k;
      else
        comp.unite(k, first);
    }
  }
  plan.component_.resize(static_cast<size_t>(plan.classes_));
  for (int k = 0; k < plan.classes_; ++k)
    plan.component_[static_cast<size_t>(k)] = static_cast<int>(comp.find(k));
  return plan;
}

std::vector<int> SmoothingPlan::classes(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) return {};
  return std::vector<int>(classOf_.begin() + it->second.first,
                          classOf_.begin() + it->second.first + it->second.channels);
}

std::vector<double> SmoothingPlan::readerWeightRanges(const graph::Graph& g) const {
  std::vector<double> range(static_cast<size_t>(classes_), 0.0);
  for (const auto& m : g.nodes) {
    if (!isConv(m) || !m.hasInput(0)) continue;
    const std::vector<int> k = classes(m.inputs[0]);
    if (k.empty()) continue;
    const auto channels = static_cast<int64_t>(k.size());
    const Tensor* w = readerWeights(g, m, channels);
    if (!w) continue;
    const int64_t group = m.attrs.getInt("group", 1);
    const int64_t cg = channels / group, mg = w->shape()[0] / group;
    const int64_t taps = w->numel() / (w->shape()[0] * cg);
    const float* p = w->data<float>();
    for (int64_t o = 0; o < w->shape()[0]; ++o)
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int cls = k[static_cast<size_t>((o / mg) * cg + ci)];
        if (cls < 0) continue;
        double& r = range[static_cast<size_t>(cls)];
        for (int64_t j = 0; j < taps; ++j)
          r = std::max(r, static_cast<double>(std::fabs(p[(o * cg + ci) * taps + j])));
      }
  }
  return range;
}

std::vector<bool> SmoothingPlan::depthwiseReadersOnly(const graph::Graph& g) const {
  std::map<int, bool> byComponent;
  for (int c : component_) byComponent[c] = true;
  for (const auto& m : g.nodes) {
    if (!isConv(m) || !m.hasInput(0)) continue;
    const std::vector<int> k = classes(m.inputs[0]);
    const Tensor* w = k.empty() ? nullptr : g.constant(m.inputs[1]);
    const bool depthwise = w && w->shape().rank() >= 2 && w->shape()[1] == 1 &&
                           m.attrs.getInt("group", 1) == static_cast<int64_t>(k.size());
    if (depthwise) continue;
    for (int cls : k)
      if (cls >= 0) byComponent[component_[static_cast<size_t>(cls)]] = false;
  }
  std::vector<bool> out(static_cast<size_t>(classes_));
  for (int k = 0; k < classes_; ++k)
    out[static_cast<size_t>(k)] = byComponent[component_[static_cast<size_t>(k)]];
  return out;
}

std::map<std::string, std::vector<float>> SmoothingPlan::tensorFactors(
    const std::vector<float>& byClass) const {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, s] : tensors_) {
    std::vector<float> f(static_cast<size_t>(s.channels), 1.f);
    bool any = false;
    for (int64_t c = 0; c < s.channels; ++c) {
      const int k = classOf_[static_cast<size_t>(s.first + c)];
      if (k >= 0 && static_cast<size_t>(k) < byClass.size())
        f[static_cast<size_t>(c)] = byClass[static_cast<size_t>(k)];
      any = any || f[static_cast<size_t>(c)] != 1.f;
    }
    if (any) out.emplace(name, std::move(f));
  }
  return out;
}

std::vector<float> SmoothingPlan::chooseFactors(
    const graph::Graph& g, const std::map<std::string, std::vector<double>>& ranges, double alpha,
    int* leftOut) const {
  // Per class, the largest range measured on its channels.
  std::vector<double> act(static_cast<size_t>(classes_), 0.0);
  std::map<int, std::vector<std::string>> members;  // component -> measured tensors
  for (const auto& [name, a] : ranges) {
    const std::vector<int> k = classes(name);
    std::set<int> seen;
    for (size_t c = 0; c < k.size() && c < a.size(); ++c) {
      if (k[c] < 0) continue;
      act[static_cast<size_t>(k[c])] = std::max(act[static_cast<size_t>(k[c])], a[c]);
      if (seen.insert(component_[static_cast<size_t>(k[c])]).second)
        members[component_[static_cast<size_t>(k[c])]].push_back(name);
    }
  }
  const std::vector<bool> depthwise = depthwiseReadersOnly(g);
  std::vector<double> alphas(act.size());
  for (size_t k = 0; k < act.size(); ++k) alphas[k] = depthwise[k] ? 1.0 : alpha;
  std::vector<float> f = smoothingFactors(act, readerWeightRanges(g), alphas);

  const auto mine = [&](int cls, int component) {
    return cls >= 0 && component_[static_cast<size_t>(cls)] == component;
  };
  // Bits a tensor's channels waste under one scale, with the component's factors or without.
  const auto waste = [&](const std::string& name, int component, bool smoothed) {
    const std::vector<int> k = classes(name);
    const std::vector<double>& a = ranges.at(name);
    std::vector<double> r(std::min(a.size(), k.size()));
    double top = 0;
    for (size_t c = 0; c < r.size(); ++c) {
      r[c] = smoothed && mine(k[c], component) ? a[c] / f[static_cast<size_t>(k[c])] : a[c];
      top = std::max(top, r[c]);
    }
    double sum = 0;
    int n = 0;
    for (double v : r)
      if (v > 0) sum += std::log2(top / v), ++n;
    return n ? sum / n : 0.0;
  };
  // The same for a reading convolution's weights, per output channel over its input channels.
  const auto weightWaste = [&](const graph::Node& n, int component, bool smoothed) {
    const std::vector<int> k = classes(n.inputs[0]);
    const auto channels = static_cast<int64_t>(k.size());
    const Tensor* w = readerWeights(g, n, channels);
    if (!w) return 0.0;
    const int64_t group = n.attrs.getInt("group", 1);
    const int64_t cg = channels / group, rows = w->shape()[0], mg = rows / group;
    if (cg <= 1) return 0.0;  // depthwise: each row reads one channel
    const int64_t taps = w->numel() / (rows * cg);
    const float* p = w->data<float>();
    double sum = 0;
    int64_t count = 0;
    std::vector<double> col(static_cast<size_t>(cg));
    for (int64_t o = 0; o < rows; ++o) {
      double top = 0;
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int cls = k[static_cast<size_t>((o / mg) * cg + ci)];
        double m = 0;
        for (int64_t j = 0; j < taps; ++j)
          m = std::max(m, static_cast<double>(std::fabs(p[(o * cg + ci) * taps + j])));
        if (smoothed && mine(cls, component)) m *= f[static_cast<size_t>(cls)];
        col[static_cast<size_t>(ci)] = m;
        top = std::max(top, m);
      }
      for (double v : col)
        if (v > 0) sum += std::log2(top / v), ++count;
    }
    return count ? sum / static_cast<double>(count) : 0.0;
  };
  std::map<int, std::vector<const graph::Node*>> readers;  // component -> convolutions
  for (const auto& n : g.nodes) {
    if (!isConv(n) || !n.hasInput(0)) continue;
    std::set<int> seen;
    for (int cls : classes(n.inputs[0]))
      if (cls >= 0 && seen.insert(component_[static_cast<size_t>(cls)]).second)
        readers[component_[static_cast<size_t>(cls)]].push_back(&n);
  }
  int left = 0;
  for (const auto& [component, names] : members) {
    double before = 0, after = 0;
    for (const std::string& name : names) {
      before += waste(name, component, false);
      after += waste(name, component, true);
    }
    for (const graph::Node* n : readers[component]) {
      before += weightWaste(*n, component, false);
      after += weightWaste(*n, component, true);
    }
    if (after < before) continue;
    ++left;
    for (size_t k = 0; k < f.size(); ++k)
      if (component_[k] == component) f[k] = 1.f;
  }
  if (leftOut) *leftOut = left;
  return f;
}

std::vector<float> smoothingFactors(const std::vector<double>& act,
                                    const std::vector<double>& weight,
                                    const std::vector<double>& alpha) {
  const size_t n = act.size();
  std::vector<double> scaled(n, 0.0);  // a / s before the common scale
  double amax = 0, top = 0;
  for (size_t k = 0; k < n; ++k) {
    amax = std::max(amax, act[k]);
    const double w = k < weight.size() ? weight[k] : 0.0;
    const double al = k < alpha.size() ? std::clamp(alpha[k], 0.0, 1.0) : 0.5;
    if (act[k] > 0 && w > 0) scaled[k] = std::pow(act[k] * w, 1.0 - al);
    top = std::max(top, scaled[k]);
  }
  std::vector<float> s(n, 1.f);
  if (!(amax > 0) || !(top > 0) || !std::isfinite(top) || !std::isfinite(amax)) return s;
  double least = top;  // the smallest scaled range: for the channels no reader weighs
  for (double v : scaled)
    if (v > 0) least = std::min(least, v);
  for (size_t k = 0; k < n; ++k) {
    if (!(act[k] > 0)) continue;
    const double range = (scaled[k] > 0 ? scaled[k] : least) * (amax / top);
    const auto f = static_cast<float>(act[k] / range);
    if (std::isfinite(f) && f > 0.f) s[k] = f;
  }
  return s;
}

Expected<int> applySmoothing(graph::Graph& g,
                             const std::map<std::string, std::vector<float>>& factors) {
  if (factors.empty()) return 0;
  const SmoothingPlan plan = SmoothingPlan::analyze(g);
  std::vector<float> byClass(static_cast<size_t>(plan.numClasses()), 1.f);
  std::vector<std::string> setBy(byClass.size());
  int listed = 0;
  for (const auto& [name, f] : factors) {
    if (!g.hasValue(name)) continue;
    const std::vector<int> k = plan.classes(name);
    if (k.empty())
      return Status(ErrorCode::kInvalidArgument,
                    "the calibration cache smooths tensor '" + name +
                        "', which has no channels to scale in this graph: calibrate again for "
                        "this model and options");
    if (k.size() != f.size())
      return Status(ErrorCode::kInvalidArgument,
                    "the calibration cache has " + std::to_string(f.size()) +
                        " smoothing factors for tensor '" + name + "', which has " +
                        std::to_string(k.size()) + " channels");
    for (size_t c = 0; c < f.size(); ++c) {
      if (!std::isfinite(f[c]) || f[c] <= 0.f)
        return Status(ErrorCode::kInvalidArgument,
                      "the calibration cache has a smoothing factor that is not a finite number "
                      "> 0 for tensor '" +
                          name + "'");
      if (k[c] < 0) {
        if (f[c] != 1.f)
          return Status(ErrorCode::kInvalidArgument,
                        "the calibration cache smooths channel " + std::to_string(c) +
                            " of tensor '" + name +
                            "', which this graph cannot scale (it must be carried from "
                            "convolutions to convolutions): calibrate again for this model");
        continue;
      }
      auto& have = byClass[static_cast<size_t>(k[c])];
      auto& by = setBy[static_cast<size_t>(k[c])];
      if (!by.empty() && have != f[c])
        return Status(ErrorCode::kInvalidArgument,
                      "the calibration cache gives channel " + std::to_string(c) + " of '" + name +
                          "' another smoothing factor than the same channel of '" + by +
                          "', which the graph links to it");
      have = f[c];
      by = name;
    }
    ++listed;
  }
  // A linked tensor the cache does not list carries factors of 1: its classes must too.
  for (const auto& n : g.nodes)
    for (const auto* names : {&n.inputs, &n.outputs})
      for (const std::string& t : *names) {
        if (t.empty() || factors.count(t)) continue;
        for (int k : plan.classes(t))
          if (k >= 0 && byClass[static_cast<size_t>(k)] != 1.f)
            return Status(ErrorCode::kInvalidArgument,
                          "the calibration cache smooths '" + setBy[static_cast<size_t>(k)] +
                              "' but not '" + t +
                              "', which the graph links to it: calibrate again for this model");
      }
  if (listed == 0) return 0;
  // Convolutions: rows of those writing a scaled tensor divided, input channels of those
  // reading one multiplied.
  for (auto& n : g.nodes) {
    if (!isConv(n)) continue;
    if (n.outputs.size() == 1) {
      const std::vector<int> k = plan.classes(n.outputs[0]);
      bool any = false;
      for (int cls : k) any = any || (cls >= 0 && byClass[static_cast<size_t>(cls)] != 1.f);
      if (any) {
        Tensor w = g.constant(n.inputs[1])->clone();
        const int64_t per = w.numel() / static_cast<int64_t>(k.size());
        float* d = w.data<float>();
        for (size_t c = 0; c < k.size(); ++c) {
          const float s = k[c] >= 0 ? byClass[static_cast<size_t>(k[c])] : 1.f;
          for (int64_t j = 0; j < per; ++j) d[static_cast<int64_t>(c) * per + j] /= s;
        }
        replaceConstant(g, n, 1, std::move(w));
        if (n.hasInput(2)) {
          Tensor b = g.constant(n.inputs[2])->clone();
          float* bd = b.data<float>();
          for (size_t c = 0; c < k.size(); ++c)
            bd[c] /= k[c] >= 0 ? byClass[static_cast<size_t>(k[c])] : 1.f;
          replaceConstant(g, n, 2, std::move(b));
        }
      }
    }
    const std::vector<int> k = n.hasInput(0) ? plan.classes(n.inputs[0]) : std::vector<int>{};
    bool any = false;
    for (int cls : k) any = any || (cls >= 0 && byClass[static_cast<size_t>(cls)] != 1.f);
    if (!any) continue;
    const auto channels = static_cast<int64_t>(k.size());
    Tensor w = readerWeights(g, n, channels)->clone();
    const int64_t group = n.attrs.getInt("group", 1);
    const int64_t cg = channels / group, mg = w.shape()[0] / group;
    const int64_t taps = w.numel() / (w.shape()[0] * cg);
    float* d = w.data<float>();
    for (int64_t o = 0; o < w.shape()[0]; ++o)
      for (int64_t ci = 0; ci < cg; ++ci) {
        const int cls = k[static_cast<size_t>((o / mg) * cg + ci)];
        const float s = cls >= 0 ? byClass[static_cast<size_t>(cls)] : 1.f;
        for (int64_t j = 0; j < taps; ++j) d[(o * cg + ci) * taps + j] *= s;
      }
    replaceConstant(g, n, 1, std::move(w));
  }
  return listed;
}

}  // namespace edgeinfer::quant
