#include "runtime/cuda/cuda_plan.h"

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <sstream>

namespace edgeinfer::runtime::cuda {

using builder::Layout;
using builder::TensorFormat;
using nlohmann::json;

const char* stepKindName(StepKind k) {
  switch (k) {
    case StepKind::kTactic:
      return "tactic";
    case StepKind::kReformat:
      return "reformat";
    case StepKind::kView:
      return "view";
    case StepKind::kCpu:
      return "cpu";
  }
  return "?";
}

TensorFormat canonicalFormat(TensorFormat f, const Shape& shape) {
  if (shape.rank() != 4) return {f.dtype, Layout::kLinear};
  if (f.layout == Layout::kLinear) f.layout = Layout::kNCHW;
  if (f.layout == Layout::kNHWC && (shape[1] == 1 || shape[2] * shape[3] == 1))
    f.layout = Layout::kNCHW;
  return f;
}

TensorFormat logicalFormat(DataType dtype, const Shape& shape) {
  return canonicalFormat({dtype, Layout::kLinear}, shape);
}

std::string formatName(TensorFormat f) {
  return std::string(dataTypeName(f.dtype)) + "." + builder::layoutName(f.layout);
}

bool isFoldedStep(const PlanStep& s, const graph::Graph& g) {
  if (s.kind != StepKind::kView || s.node < 0 || static_cast<size_t>(s.node) >= g.nodes.size())
    return false;
  const graph::Node& n = g.nodes[static_cast<size_t>(s.node)];
  return (n.domain.empty() && n.opType == "Conv") ||
         (n.domain == graph::kEdgeInferDomain && n.opType == "FusedConv");
}

int foldedInto(const ExecutionPlan& plan, const graph::Graph& g, size_t i) {
  const PlanStep& s = plan.steps[i];
  if (s.kind != StepKind::kTactic || s.inputs.size() < 4 || s.inputs[3] < 0) return -1;
  for (size_t k = 0; k < i; ++k)
    if (isFoldedStep(plan.steps[k], g) && !plan.steps[k].outputs.empty() &&
        plan.steps[k].outputs[0] == s.inputs[3])
      return static_cast<int>(k);
  return -1;
}

bool isChainTactic(const std::string& id) {
  const size_t n = sizeof(kChainTacticSuffix) - 1;
  return id.size() > n && id.compare(id.size() - n, n, kChainTacticSuffix) == 0;
}

int chainedNode(const ExecutionPlan& plan, const graph::Graph& g, size_t i) {
  const PlanStep& s = plan.steps[i];
  if (s.kind != StepKind::kTactic || !isChainTactic(s.tactic) || s.node < 0 ||
      static_cast<size_t>(s.node) >= g.nodes.size() ||
      s.outputs.size() != g.nodes[static_cast<size_t>(s.node)].outputs.size() + 1 ||
      s.outputs.back() < 0 || static_cast<size_t>(s.outputs.back()) >= plan.tensors.size())
    return -1;
  const std::string& v = plan.tensors[static_cast<size_t>(s.outputs.back())].value;
  for (size_t k = 0; k < g.nodes.size(); ++k) {
    const graph::Node& n = g.nodes[k];
    const bool conv = (n.domain.empty() && n.opType == "Conv") ||
                      (n.domain == graph::kEdgeInferDomain && n.opType == "FusedConv");
    if (conv && n.outputs.size() == 1 && n.outputs[0] == v) return static_cast<int>(k);
  }
  return -1;
}

bool isQuantized(const PlanTensor& t) {
  return t.format.dtype == DataType::kInt8 && t.scale > 0.f;
}

int countInt8Steps(const ExecutionPlan& plan) {
  int n = 0;
  for (const auto& s : plan.steps) {
    if (s.kind != StepKind::kTactic) continue;
    bool q = s.precision == Precision::kInt8;  // also a tactic quantizing inside (float tensors)
    for (int t : s.inputs) q = q || (t >= 0 && isQuantized(plan.tensors[static_cast<size_t>(t)]));
    for (int t : s.outputs) q = q || (t >= 0 && isQuantized(plan.tensors[static_cast<size_t>(t)]));
    n += q ? (isChainTactic(s.tactic) ? 2 : 1) : 0;  // (a chained step runs two INT8 layers)
  }
  return n;
}

namespace {

Expected<DataType> typeFromName(const std::string& s) {
  for (int i = 1; i <= static_cast<int>(DataType::kBool); ++i) {
    const auto t = static_cast<DataType>(i);
    if (t != DataType::kUndefined && s == dataTypeName(t)) return t;
  }
  return Status(ErrorCode::kCorruptFile, "unknown element type '" + s + "' in the engine plan");
}

Expected<Layout> layoutFromName(const std::string& s) {
  for (Layout l : {Layout::kLinear, Layout::kNCHW, Layout::kNHWC})
    if (s == builder::layoutName(l)) return l;
  return Status(ErrorCode::kCorruptFile, "unknown layout '" + s + "' in the engine plan");
}

Status corrupt(const std::string& what) {
  return Status(ErrorCode::kCorruptFile, "engine plan: " + what);
}

}  // namespace

std::string planToJson(const ExecutionPlan& plan, const graph::Graph& g) {
  json j;
  json tensors = json::array();
  for (const auto& t : plan.tensors) {
    json e = {{"value", t.value},
              {"dtype", dataTypeName(t.format.dtype)},
              {"layout", builder::layoutName(t.format.layout)}};
    if (t.constant) e["constant"] = true;
    if (t.aliasOf >= 0) e["alias_of"] = t.aliasOf;
    if (t.scale > 0.f) e["scale"] = t.scale;
    tensors.push_back(std::move(e));
  }
  json steps = json::array();
  for (const auto& s : plan.steps) {
    json e = {{"kind", stepKindName(s.kind)}, {"inputs", s.inputs}, {"outputs", s.outputs}};
    if (s.node >= 0) {
      e["node"] = s.node;
      e["name"] = g.nodes[static_cast<size_t>(s.node)].name;
      e["op"] = g.nodes[static_cast<size_t>(s.node)].opType;
    }
    if (s.kind == StepKind::kTactic) {
      e["tactic"] = s.tactic;
      e["precision"] = precisionName(s.precision);
      if (!s.state.empty()) e["state"] = s.state;
    }
    steps.push_back(std::move(e));
  }
  j["tensors"] = std::move(tensors);
  j["steps"] = std::move(steps);
  j["inputs"] = plan.graphInputs;
  j["outputs"] = plan.graphOutputs;
  return j.dump();
}

Expected<ExecutionPlan> planFromJson(const std::string& text, const graph::Graph& g) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return corrupt("not a JSON object");
  ExecutionPlan plan;
  const auto tensors = j.find("tensors");
  const auto steps = j.find("steps");
  if (tensors == j.end() || !tensors->is_array() || steps == j.end() || !steps->is_array())
    return corrupt("missing 'tensors' or 'steps'");
  const auto str = [](const json& o, const char* k) -> std::string {
    const auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const auto intOr = [](const json& o, const char* k, int def) -> int {
    const auto it = o.find(k);
    return it != o.end() && it->is_number_integer() ? it->get<int>() : def;
  };
  for (const auto& e : *tensors) {
    if (!e.is_object()) return corrupt("a tensor entry is not an object");
    PlanTensor t;
    t.value = str(e, "value");
    if (!g.findValue(t.value)) return corrupt("tensor of unknown value '" + t.value + "'");
    EI_ASSIGN_OR_RETURN(t.format.dtype, typeFromName(str(e, "dtype")));
    EI_ASSIGN_OR_RETURN(t.format.layout, layoutFromName(str(e, "layout")));
    t.constant = e.value("constant", false);
    t.aliasOf = intOr(e, "alias_of", -1);
    if (t.constant && !g.isConstant(t.value))
      return corrupt("tensor '" + t.value + "' marked constant is not a constant");
    if (e.contains("scale")) {
      if (!e["scale"].is_number()) return corrupt("tensor '" + t.value + "': scale not a number");
      t.scale = e["scale"].get<float>();
      if (!(t.scale > 0.f) || !std::isfinite(t.scale) || t.format.dtype != DataType::kInt8)
        return corrupt("tensor '" + t.value + "': a scale must be positive and finite, on int8");
    }
    const DataType logical = g.findValue(t.value)->dtype;
    if (t.format.dtype == DataType::kInt8 && logical != DataType::kInt8 && t.scale <= 0.f)
      return corrupt("tensor '" + t.value + "' stores a " + dataTypeName(logical) +
                     " value as int8 without a scale");
    plan.tensors.push_back(std::move(t));
  }
  const int numTensors = static_cast<int>(plan.tensors.size());
  for (const auto& t : plan.tensors)
    if (t.aliasOf < -1 || t.aliasOf >= numTensors) return corrupt("tensor alias out of range");
  const auto refs = [&](const json& e, const char* k, std::vector<int>* out) -> Status {
    const auto it = e.find(k);
    if (it == e.end() || !it->is_array()) return corrupt(std::string("step without '") + k + "'");
    for (const auto& v : *it) {
      if (!v.is_number_integer()) return corrupt("a tensor reference is not an integer");
      const int r = v.get<int>();
      if (r < -1 || r >= numTensors) return corrupt("tensor reference out of range");
      out->push_back(r);
    }
    return Status::Ok();
  };
  for (const auto& e : *steps) {
    if (!e.is_object()) return corrupt("a step is not an object");
    PlanStep s;
    const std::string kind = str(e, "kind");
    if (kind == "tactic")
      s.kind = StepKind::kTactic;
    else if (kind == "reformat")
      s.kind = StepKind::kReformat;
    else if (kind == "view")
      s.kind = StepKind::kView;
    else if (kind == "cpu")
      s.kind = StepKind::kCpu;
    else
      return corrupt("unknown step kind '" + kind + "'");
    EI_RETURN_IF_ERROR(refs(e, "inputs", &s.inputs));
    EI_RETURN_IF_ERROR(refs(e, "outputs", &s.outputs));
    if (s.kind != StepKind::kReformat) {
      s.node = intOr(e, "node", -1);
      if (s.node < 0 || s.node >= static_cast<int>(g.nodes.size()))
        return corrupt("step node index out of range");
      const graph::Node& n = g.nodes[static_cast<size_t>(s.node)];
      if (n.name != str(e, "name") || n.opType != str(e, "op"))
        return corrupt("step " + std::to_string(plan.steps.size()) + " names node '" +
                       str(e, "name") + "' (" + str(e, "op") + ") but the graph has '" + n.name +
                       "' (" + n.opType + ") there");
      // (A ".chain" tactic writes one output more: the chained layer's, checked below.)
      const size_t extra = kind == "tactic" && isChainTactic(str(e, "tactic")) ? 1 : 0;
      if (s.inputs.size() != n.inputs.size() || s.outputs.size() != n.outputs.size() + extra)
        return corrupt("step for node '" + n.name + "' has the wrong number of tensors");
    } else if (s.inputs.size() != 1 || s.outputs.size() != 1 || s.inputs[0] < 0 ||
               s.outputs[0] < 0) {
      return corrupt("a reformat step needs one input and one output");
    }
    for (int o : s.outputs)
      if (o < 0) return corrupt("a step output is missing");
    if (s.kind == StepKind::kTactic) {
      s.tactic = str(e, "tactic");
      const std::string p = str(e, "precision");
      if (s.tactic.empty()) return corrupt("a tactic step without a tactic id");
      if (e.contains("state")) {
        if (!e["state"].is_string()) return corrupt("a tactic state that is not a string");
        s.state = e["state"].get<std::string>();
      }
      if (p == "fp32")
        s.precision = Precision::kFp32;
      else if (p == "fp16")
        s.precision = Precision::kFp16;
      else if (p == "int8")
        s.precision = Precision::kInt8;
      else
        return corrupt("unknown precision '" + p + "'");
    }
    plan.steps.push_back(std::move(s));
  }
  for (const char* k : {"inputs", "outputs"}) {
    const auto it = j.find(k);
    if (it == j.end() || !it->is_object()) return corrupt(std::string("missing '") + k + "'");
    auto& dst = std::string(k) == "inputs" ? plan.graphInputs : plan.graphOutputs;
    for (const auto& [name, v] : it->items()) {
      if (!v.is_number_integer() || v.get<int>() < 0 || v.get<int>() >= numTensors)
        return corrupt("bad tensor for graph " + std::string(k) + " '" + name + "'");
      dst[name] = v.get<int>();
    }
  }
  for (const auto& in : g.inputs)
    if (!plan.graphInputs.count(in)) return corrupt("graph input '" + in + "' has no tensor");
  for (const auto& out : g.outputs)
    if (!plan.graphOutputs.count(out)) return corrupt("graph output '" + out + "' has no tensor");
  // A folded layer's view step: its output aliases its input, and its only reader is the
  // ".fold" tactic of the layer it is folded into, at input 3 (that tactic reads the alias as
  // the folded layer's input; any other reader would take it for the folded layer's output).
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    if (!isFoldedStep(s, g)) continue;
    const std::string name = g.nodes[static_cast<size_t>(s.node)].name;
    if (s.inputs.empty() || s.inputs[0] < 0 || s.outputs.size() != 1 ||
        plan.tensors[static_cast<size_t>(s.outputs[0])].aliasOf != s.inputs[0])
      return corrupt("the view step of convolution '" + name +
                     "' does not alias its output to its input");
    int readers = 0;
    for (size_t k = 0; k < plan.steps.size(); ++k) {
      const PlanStep& r = plan.steps[k];
      for (size_t m = 0; m < r.inputs.size(); ++m) {
        if (r.inputs[m] != s.outputs[0]) continue;
        ++readers;
        if (k <= i || m != 3 || r.kind != StepKind::kTactic ||
            r.tactic.find(".fold") == std::string::npos)
          return corrupt("convolution '" + name +
                         "' is a view step but is not folded into the layer reading it");
      }
    }
    for (const auto& [out, t] : plan.graphOutputs) readers += t == s.outputs[0] ? 2 : 0;
    if (readers != 1)
      return corrupt("convolution '" + name + "' is a view step read by " +
                     std::to_string(readers) + " steps, not by the one it is folded into");
  }
  // A chained layer: the ".chain" step's last output is the output of a convolution that
  // reads the step's output 0 and has no step of its own.
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    if (s.kind != StepKind::kTactic || !isChainTactic(s.tactic)) continue;
    const std::string& name = g.nodes[static_cast<size_t>(s.node)].name;
    const int c = chainedNode(plan, g, i);
    if (c < 0)
      return corrupt("the chained output of layer '" + name + "' is no convolution's output");
    const graph::Node& cn = g.nodes[static_cast<size_t>(c)];
    if (cn.inputs.empty() || cn.inputs[0] != plan.tensors[static_cast<size_t>(s.outputs[0])].value)
      return corrupt("layer '" + cn.name + "' is chained into layer '" + name +
                     "' but does not read its output");
    for (const PlanStep& o : plan.steps)
      if (o.node == c)
        return corrupt("layer '" + cn.name + "' is chained into layer '" + name +
                       "' and has a step of its own");
    const PlanTensor& out = plan.tensors[static_cast<size_t>(s.outputs.back())];
    if (out.format.dtype != DataType::kInt8 || !(out.scale > 0.f) || out.aliasOf >= 0)
      return corrupt("the chained output of layer '" + name + "' is not a quantized int8 tensor");
    for (size_t k = 0; k < plan.steps.size(); ++k) {
      for (int t : plan.steps[k].outputs)
        if (t == s.outputs.back() && k != i)
          return corrupt("the chained output of layer '" + name + "' has another writer");
      for (int t : plan.steps[k].inputs)
        if (t == s.outputs.back() && k <= i)
          return corrupt("the chained output of layer '" + name + "' is read before its step");
    }
  }
  return plan;
}

std::string describePlan(const ExecutionPlan& plan, const graph::Graph& g) {
  std::ostringstream os;
  char buf[64];
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep& s = plan.steps[i];
    os << "  " << i << " " << stepKindName(s.kind);
    if (s.node >= 0) {
      const graph::Node& n = g.nodes[static_cast<size_t>(s.node)];
      os << " '" << n.name << "' (" << n.opType << ")";
    }
    if (s.kind == StepKind::kTactic) os << " " << s.tactic;
    if (isFoldedStep(s, g)) os << " (folded into its reader)";
    if (const int c = chainedNode(plan, g, i); c >= 0)
      os << " (chained: '" << g.nodes[static_cast<size_t>(c)].name << "')";
    os << "  in:";
    for (int t : s.inputs)
      os << " "
         << (t < 0 ? std::string("-") : formatName(plan.tensors[static_cast<size_t>(t)].format));
    os << "  out:";
    for (int t : s.outputs) os << " " << formatName(plan.tensors[static_cast<size_t>(t)].format);
    if (s.timeMs > 0) {
      std::snprintf(buf, sizeof buf, "  %.4f ms", s.timeMs);
      os << buf;
    }
    os << "\n";
  }
  return os.str();
}

}  // namespace edgeinfer::runtime::cuda
