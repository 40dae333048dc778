#include "quant/qdq.h"

#include <algorithm>
#include <cmath>

#include "edgeinfer/calibration.h"

namespace edgeinfer::quant {
namespace {

bool isFloatActivation(const graph::Graph& g, const std::string& name) {
  if (name.empty() || g.isConstant(name)) return false;
  const graph::Value* v = g.findValue(name);
  return v && v->dtype == DataType::kFloat32;
}

bool isFloatConstant(const graph::Graph& g, const std::string& name) {
  const Tensor* t = name.empty() ? nullptr : g.constant(name);
  return t && t->dtype() == DataType::kFloat32 && t->shape().rank() >= 1;
}

Tensor scalarF32(float v) {
  Tensor t = Tensor::zeros(DataType::kFloat32, Shape(std::vector<int64_t>{}));
  *t.data<float>() = v;
  return t;
}

Tensor scalarI8(int8_t v) {
  Tensor t = Tensor::zeros(DataType::kInt8, Shape(std::vector<int64_t>{}));
  *t.data<int8_t>() = v;
  return t;
}

}  // namespace

std::vector<QuantLayer> findQuantizableLayers(const graph::Graph& g) {
  std::vector<QuantLayer> out;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const graph::Node& n = g.nodes[i];
    const bool onnx = n.domain.empty(), fused = n.domain == graph::kEdgeInferDomain;
    if (!onnx && !fused) continue;
    const std::string op = fused && n.opType.rfind("Fused", 0) == 0 ? n.opType.substr(5) : n.opType;
    if (fused && op == n.opType) continue;
    QuantLayer l;
    l.node = i;
    l.name = n.name;
    l.opType = n.opType;
    if (n.inputs.size() < 2 || !isFloatActivation(g, n.inputs[0])) continue;
    if (op == "Conv") {
      if (!isFloatConstant(g, n.inputs[1])) continue;  // runtime weights: not a weight layer
      l.activationSlots = {0};
      if (fused && n.hasInput(3) && isFloatActivation(g, n.inputs[3])) l.optionalSlots = {3};
      l.weightSlot = 1;
      l.weightAxis = 0;
    } else if (op == "Gemm") {
      if (!isFloatConstant(g, n.inputs[1]) || g.constant(n.inputs[1])->shape().rank() != 2)
        continue;
      l.activationSlots = {0};
      l.weightSlot = 1;
      l.weightAxis = n.attrs.getInt("transB", 0) ? 0 : 1;
    } else if (op == "MatMul") {
      if (isFloatConstant(g, n.inputs[1])) {
        l.activationSlots = {0};
        l.weightSlot = 1;
        l.weightAxis = static_cast<int>(g.constant(n.inputs[1])->shape().rank()) - 1;
      } else if (isFloatActivation(g, n.inputs[1])) {
        l.activationSlots = {0, 1};  // activation x activation (attention): both per tensor
      } else {
        continue;
      }
    } else {
      continue;
    }
    out.push_back(std::move(l));
  }
  return out;
}

std::vector<size_t> findOutputLayers(const graph::Graph& g, const std::vector<QuantLayer>& layers) {
  std::map<std::string, size_t> producer;
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (const std::string& o : g.nodes[i].outputs)
      if (!o.empty()) producer[o] = i;
  std::map<size_t, size_t> layerAt;  // node -> index in `layers`
  for (size_t l = 0; l < layers.size(); ++l) layerAt[layers[l].node] = l;
  std::set<size_t> found, seen;
  std::vector<std::string> todo(g.outputs.begin(), g.outputs.end());
  while (!todo.empty()) {
    const std::string v = std::move(todo.back());
    todo.pop_back();
    const auto p = producer.find(v);
    if (p == producer.end() || !seen.insert(p->second).second) continue;  // an input, or done
    if (const auto l = layerAt.find(p->second); l != layerAt.end()) {
      found.insert(l->second);
      continue;
    }
    for (const std::string& in : g.nodes[p->second].inputs)
      if (!in.empty() && !g.isConstant(in)) todo.push_back(in);
  }
  return {found.begin(), found.end()};
}

std::vector<size_t> quantizedSlots(const QuantLayer& l, const graph::Node& n,
                                   const std::map<std::string, float>& amax) {
  std::vector<size_t> slots = l.activationSlots;
  for (size_t slot : l.optionalSlots)
    if (amax.count(n.inputs[slot])) slots.push_back(slot);  // (none: read in float)
  return slots;
}

float fakeQuantize(float x, float scale) {
  const float q = std::nearbyint(x / scale);
  if (std::isnan(q)) return 0.f;
  return std::min(std::max(q, -128.f), 127.f) * scale;
}

float activationScale(double amax) {
  return static_cast<float>(std::max(amax, 1e-12) / 127.0);
}

Status quantizeWeights(const Tensor& w, int axis, std::vector<int8_t>* values,
                       std::vector<float>* scales) {
  EI_ASSIGN_OR_RETURN(*scales, perChannelWeightScales(w, axis));
  const int rank = static_cast<int>(w.shape().rank());
  if (axis < 0) axis += rank;
  const int64_t channels = w.shape()[static_cast<size_t>(axis)];
  const int64_t inner = w.shape().span(static_cast<size_t>(axis) + 1, w.shape().rank());
  values->assign(static_cast<size_t>(w.numel()), 0);
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float s = (*scales)[static_cast<size_t>((i / inner) % channels)];
    if (s <= 0.f) continue;
    const float q = std::nearbyint(static_cast<float>(w.getAsDouble(i)) / s);
    (*values)[static_cast<size_t>(i)] =
        std::isnan(q) ? 0 : static_cast<int8_t>(std::min(std::max(q, -127.f), 127.f));
  }
  return Status::Ok();
}

Expected<Tensor> fakeQuantizeWeights(const Tensor& w, int axis) {
  std::vector<int8_t> q;
  std::vector<float> scales;
  EI_RETURN_IF_ERROR(quantizeWeights(w, axis, &q, &scales));
  const int rank = static_cast<int>(w.shape().rank());
  if (axis < 0) axis += rank;
  const int64_t channels = w.shape()[static_cast<size_t>(axis)];
  const int64_t inner = w.shape().span(static_cast<size_t>(axis) + 1, w.shape().rank());
  Tensor out = w.clone();
  float* x = out.data<float>();
  for (int64_t i = 0; i < out.numel(); ++i)
    x[i] = static_cast<float>(q[static_cast<size_t>(i)]) *
           scales[static_cast<size_t>((i / inner) % channels)];
  return out;
}

Expected<graph::Graph> quantizeGraph(const graph::Graph& g, const std::vector<QuantLayer>& layers,
                                     const std::set<size_t>& which,
                                     const std::map<std::string, float>& amax) {
  graph::Graph q = g;  // constants are shared, not copied
  std::map<size_t, const QuantLayer*> byNode;
  for (size_t idx : which) {
    if (idx >= layers.size())
      return Status(ErrorCode::kInternal, "quantizeGraph: layer index out of range");
    byNode[layers[idx].node] = &layers[idx];
  }
  std::vector<graph::Node> nodes;
  nodes.reserve(g.nodes.size() + 2 * which.size());
  const Tensor zeroPoint = scalarI8(0);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    auto it = byNode.find(i);
    if (it == byNode.end()) {
      nodes.push_back(g.nodes[i]);
      continue;
    }
    const QuantLayer& l = *it->second;
    graph::Node layer = g.nodes[i];
    const std::string prefix = layer.name + "::int8::";
    for (size_t slot : quantizedSlots(l, layer, amax)) {
      const std::string& x = layer.inputs[slot];
      auto a = amax.find(x);
      if (a == amax.end())
        return Status(ErrorCode::kInvalidArgument, "no calibrated range for tensor '" + x +
                                                       "' (input of layer '" + layer.name + "')");
      const std::string s = prefix + std::to_string(slot);
      graph::Value& scale = q.value(s + ".scale");
      scale.dtype = DataType::kFloat32;
      scale.shape = Shape(std::vector<int64_t>{});
      scale.shapeKnown = true;
      scale.constant = scalarF32(activationScale(a->second));
      graph::Value& zp = q.value(s + ".zero_point");
      zp.dtype = DataType::kInt8;
      zp.shape = Shape(std::vector<int64_t>{});
      zp.shapeKnown = true;
      zp.constant = zeroPoint;
      const graph::Value* src = g.findValue(x);
      graph::Value& qv = q.value(s + ".q");
      graph::Value& dqv = q.value(s + ".dq");
      if (src) {
        qv.shape = dqv.shape = src->shape;
        qv.shapeKnown = dqv.shapeKnown = src->shapeKnown;
      }
      qv.dtype = DataType::kInt8;
      dqv.dtype = DataType::kFloat32;
      graph::Node quantize;
      quantize.name = s + ".quantize";
      quantize.opType = "QuantizeLinear";
      quantize.inputs = {x, s + ".scale", s + ".zero_point"};
      quantize.outputs = {s + ".q"};
      quantize.sourceIndex = layer.sourceIndex;
      graph::Node dequantize;
      dequantize.name = s + ".dequantize";
      dequantize.opType = "DequantizeLinear";
      dequantize.inputs = {s + ".q", s + ".scale", s + ".zero_point"};
      dequantize.outputs = {s + ".dq"};
      dequantize.sourceIndex = layer.sourceIndex;
      nodes.push_back(std::move(quantize));
      nodes.push_back(std::move(dequantize));
      layer.inputs[slot] = s + ".dq";
    }
    if (l.weightSlot >= 0) {
      const std::string& w = layer.inputs[static_cast<size_t>(l.weightSlot)];
      const Tensor* wt = g.constant(w);
      if (!wt)
        return Status(ErrorCode::kInternal, "weights of '" + layer.name + "' are not constant");
      auto fq = fakeQuantizeWeights(*wt, l.weightAxis);
      if (!fq.ok()) return fq.status().withContext("layer '" + layer.name + "'");
      const std::string name = prefix + "weights";
      graph::Value& v = q.value(name);
      v.dtype = DataType::kFloat32;
      v.shape = wt->shape();
      v.shapeKnown = true;
      v.constant = std::move(fq).value();
      layer.inputs[static_cast<size_t>(l.weightSlot)] = name;
    }
    nodes.push_back(std::move(layer));
  }
  q.nodes = std::move(nodes);
  return q;
}

}  // namespace edgeinfer::quant

namespace edgeinfer::quant {

Status checkCalibrationCache(const std::string& path, const std::string& modelHash,
                             const graph::Graph& g,
                             const std::map<std::string, float>* modelScales) {
  auto cache = CalibrationCache::load(path);
  if (!cache.ok()) return cache.status();
  const Status model = cache->checkModel(modelHash);
  if (!model.ok()) return model.withContext("calibration cache '" + path + "'");
  const std::vector<QuantLayer> layers = findQuantizableLayers(g);
  if (layers.empty())
    return Status(ErrorCode::kUnsupported,
                  "calibration cache '" + path +
                      "': the optimised graph has no quantizable layers (Conv, Gemm, MatMul)");
  std::string missing;
  int nMissing = 0;
  for (const QuantLayer& l : layers)
    for (size_t slot : l.activationSlots) {
      const std::string& t = g.nodes[l.node].inputs[slot];
      if (cache->tensorAmax.count(t) || (modelScales && modelScales->count(t))) continue;
      if (nMissing++ < 5)
        missing += (missing.empty() ? "'" : ", '") + t + "' (layer '" + l.name + "')";
    }
  if (nMissing)
    return Status(ErrorCode::kInvalidArgument,
                  "calibration cache '" + path + "' has no range for " + std::to_string(nMissing) +
                      " activation tensor(s) of this graph: " + missing +
                      (nMissing > 5 ? ", ..." : "") +
                      " (was it calibrated with other builder passes? calibrate with the same "
                      "options as the build)");
  for (const auto& [name, p] : cache->layerPrecision) {
    (void)p;
    bool found = false;
    for (const QuantLayer& l : layers) found = found || l.name == name;
    if (!found)
      return Status(ErrorCode::kInvalidArgument,
                    "calibration cache '" + path + "' sets a precision for layer '" + name +
                        "', which is not a quantizable layer of this graph");
  }
  return Status::Ok();
}

}  // namespace edgeinfer::quant
