#include "graph/graph.h"

#include <algorithm>
#include <functional>
#include <sstream>
#include <unordered_set>

namespace edgeinfer::graph {

Attribute Attribute::Int(int64_t v) {
  Attribute a;
  a.kind = Kind::kInt;
  a.i = v;
  return a;
}
Attribute Attribute::Float(float v) {
  Attribute a;
  a.kind = Kind::kFloat;
  a.f = v;
  return a;
}
Attribute Attribute::String(std::string v) {
  Attribute a;
  a.kind = Kind::kString;
  a.s = std::move(v);
  return a;
}
Attribute Attribute::TensorValue(Tensor v) {
  Attribute a;
  a.kind = Kind::kTensor;
  a.t = std::move(v);
  return a;
}
Attribute Attribute::Ints(std::vector<int64_t> v) {
  Attribute a;
  a.kind = Kind::kInts;
  a.ints = std::move(v);
  return a;
}
Attribute Attribute::Floats(std::vector<float> v) {
  Attribute a;
  a.kind = Kind::kFloats;
  a.floats = std::move(v);
  return a;
}
Attribute Attribute::Strings(std::vector<std::string> v) {
  Attribute a;
  a.kind = Kind::kStrings;
  a.strings = std::move(v);
  return a;
}

std::string Attribute::toString() const {
  std::ostringstream os;
  switch (kind) {
    case Kind::kInt:
      os << i;
      break;
    case Kind::kFloat:
      os << f;
      break;
    case Kind::kString:
      os << '"' << s << '"';
      break;
    case Kind::kTensor:
      os << "tensor " << t.describe();
      break;
    case Kind::kInts:
      os << '[';
      for (size_t k = 0; k < ints.size(); ++k) os << (k ? "," : "") << ints[k];
      os << ']';
      break;
    case Kind::kFloats:
      os << '[';
      for (size_t k = 0; k < floats.size(); ++k) os << (k ? "," : "") << floats[k];
      os << ']';
      break;
    case Kind::kStrings:
      os << '[';
      for (size_t k = 0; k < strings.size(); ++k) os << (k ? "," : "") << '"' << strings[k] << '"';
      os << ']';
      break;
  }
  return os.str();
}

const Attribute* Attributes::find(const std::string& name) const {
  auto it = map_.find(name);
  return it == map_.end() ? nullptr : &it->second;
}

int64_t Attributes::getInt(const std::string& name, int64_t def) const {
  const Attribute* a = find(name);
  return a && a->kind == Attribute::Kind::kInt ? a->i : def;
}
float Attributes::getFloat(const std::string& name, float def) const {
  const Attribute* a = find(name);
  if (!a) return def;
  if (a->kind == Attribute::Kind::kFloat) return a->f;
  if (a->kind == Attribute::Kind::kInt) return static_cast<float>(a->i);
  return def;
}
std::string Attributes::getString(const std::string& name, const std::string& def) const {
  const Attribute* a = find(name);
  return a && a->kind == Attribute::Kind::kString ? a->s : def;
}
std::vector<int64_t> Attributes::getInts(const std::string& name, std::vector<int64_t> def) const {
  const Attribute* a = find(name);
  return a && a->kind == Attribute::Kind::kInts ? a->ints : def;
}
std::vector<float> Attributes::getFloats(const std::string& name, std::vector<float> def) const {
  const Attribute* a = find(name);
  return a && a->kind == Attribute::Kind::kFloats ? a->floats : def;
}
const Tensor* Attributes::getTensor(const std::string& name) const {
  const Attribute* a = find(name);
  return a && a->kind == Attribute::Kind::kTensor ? &a->t : nullptr;
}

const std::string& Node::input(size_t i) const {
  static const std::string kEmpty;
  return i < inputs.size() ? inputs[i] : kEmpty;
}

Value& Graph::value(const std::string& name) {
  auto it = values_.find(name);
  if (it != values_.end()) return it->second;
  Value& v = values_[name];
  v.name = name;
  return v;
}

const Value* Graph::findValue(const std::string& name) const {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

Value* Graph::findValue(const std::string& name) {
  auto it = values_.find(name);
  return it == values_.end() ? nullptr : &it->second;
}

bool Graph::isConstant(const std::string& name) const {
  const Value* v = findValue(name);
  return v && v->constant.has_value();
}

const Tensor* Graph::constant(const std::string& name) const {
  const Value* v = findValue(name);
  return v && v->constant ? &*v->constant : nullptr;
}

bool Graph::isGraphOutput(const std::string& name) const {
  return std::find(outputs.begin(), outputs.end(), name) != outputs.end();
}

std::unordered_map<std::string, size_t> Graph::producers() const {
  std::unordered_map<std::string, size_t> p;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (const auto& o : nodes[i].outputs)
      if (!o.empty()) p[o] = i;
  return p;
}

std::unordered_map<std::string, int> Graph::consumerCounts() const {
  std::unordered_map<std::string, int> c;
  for (const auto& n : nodes)
    for (const auto& in : n.inputs)
      if (!in.empty()) ++c[in];
  for (const auto& o : outputs) ++c[o];
  return c;
}

Status Graph::topologicalSort() {
  const auto prod = producers();
  // A value is available if it is a graph input, a constant, or produced by a node.
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& in : nodes[i].inputs) {
      if (in.empty() || prod.count(in)) continue;
      const Value* v = findValue(in);
      const bool isInput = std::find(inputs.begin(), inputs.end(), in) != inputs.end();
      if (!isInput && !(v && v->constant))
        return Status(
            ErrorCode::kInvalidModel,
            "input '" + in + "' is not a graph input, an initializer or any node's output",
            nodes[i].location());
    }
  }
  // Kahn's algorithm, stable (keeps the original order where it can).
  std::vector<int> pending(nodes.size(), 0);
  std::vector<std::vector<size_t>> users(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::unordered_set<size_t> deps;
    for (const auto& in : nodes[i].inputs) {
      auto it = in.empty() ? prod.end() : prod.find(in);
      if (it != prod.end()) deps.insert(it->second);
    }
    pending[i] = static_cast<int>(deps.size());
    for (size_t d : deps) users[d].push_back(i);
  }
  std::vector<size_t> order;
  order.reserve(nodes.size());
  std::vector<size_t> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (pending[i] == 0) ready.push_back(i);
  // Process in index order for determinism.
  while (!ready.empty()) {
    auto it = std::min_element(ready.begin(), ready.end());
    size_t n = *it;
    ready.erase(it);
    order.push_back(n);
    for (size_t u : users[n])
      if (--pending[u] == 0) ready.push_back(u);
  }
  if (order.size() != nodes.size()) {
    for (size_t i = 0; i < nodes.size(); ++i)
      if (pending[i] > 0)
        return Status(ErrorCode::kInvalidModel, "the graph has a cycle through this node",
                      nodes[i].location());
  }
  std::vector<Node> sorted;
  sorted.reserve(nodes.size());
  for (size_t i : order) sorted.push_back(std::move(nodes[i]));
  nodes = std::move(sorted);
  return Status::Ok();
}

std::string Graph::uniqueName(const std::string& prefix) {
  std::string n;
  do {
    n = prefix + "__" + std::to_string(nameCounter_++);
  } while (values_.count(n));
  return n;
}

namespace {
std::string describeValue(const Graph& g, const std::string& name) {
  if (name.empty()) return "<none>";
  const Value* v = g.findValue(name);
  std::string s = name;
  if (!v) return s;
  s += ":";
  s += dataTypeName(v->dtype);
  if (v->shapeKnown) {
    std::string shp = "[";
    for (size_t i = 0; i < v->shape.rank(); ++i) {
      if (i) shp += ",";
      if (v->shape[i] >= 0)
        shp += std::to_string(v->shape[i]);
      else if (i < v->dimNames.size() && !v->dimNames[i].empty())
        shp += v->dimNames[i];
      else
        shp += "?";
    }
    s += shp + "]";
  } else {
    s += "[?]";
  }
  if (v->constant) s += " (const)";
  return s;
}
}  // namespace

std::string Graph::toString() const {
  std::ostringstream os;
  os << "graph '" << name << "' opset " << opset << ": " << nodes.size() << " nodes\n";
  for (const auto& in : inputs) os << "  input  " << describeValue(*this, in) << "\n";
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    os << "  #" << i << " " << (n.domain.empty() ? "" : n.domain + "::") << n.opType << " '"
       << n.name << "'";
    if (!n.attrs.all().empty()) {
      os << " {";
      bool first = true;
      for (const auto& [k, a] : n.attrs.all()) {
        os << (first ? "" : ", ") << k << "=" << a.toString();
        first = false;
      }
      os << "}";
    }
    os << "\n      in:  ";
    for (size_t k = 0; k < n.inputs.size(); ++k)
      os << (k ? ", " : "") << describeValue(*this, n.inputs[k]);
    os << "\n      out: ";
    for (size_t k = 0; k < n.outputs.size(); ++k)
      os << (k ? ", " : "") << describeValue(*this, n.outputs[k]);
    os << "\n";
  }
  for (const auto& out : outputs) os << "  output " << describeValue(*this, out) << "\n";
  return os.str();
}

}  // namespace edgeinfer::graph
