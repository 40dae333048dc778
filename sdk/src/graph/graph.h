// The SDK's graph IR: values (named tensors), nodes (ops with attributes) and the graph.
// It mirrors ONNX closely so the importer is a translation, not an interpretation, and so
// an optimised graph can be written back out as a protobuf for the engine file. It knows
// nothing of devices or tactics.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "edgeinfer/types.h"

namespace edgeinfer::graph {

/// Op domain of the nodes the optimiser creates (fused ops).
inline constexpr const char* kEdgeInferDomain = "ai.edgeinfer";

struct Attribute {
  enum class Kind : uint8_t { kInt, kFloat, kString, kTensor, kInts, kFloats, kStrings };
  Kind kind = Kind::kInt;
  int64_t i = 0;
  float f = 0.f;
  std::string s;
  Tensor t;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> strings;

  static Attribute Int(int64_t v);
  static Attribute Float(float v);
  static Attribute String(std::string v);
  static Attribute TensorValue(Tensor v);
  static Attribute Ints(std::vector<int64_t> v);
  static Attribute Floats(std::vector<float> v);
  static Attribute Strings(std::vector<std::string> v);
  std::string toString() const;
};

class Attributes {
 public:
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  const Attribute* find(const std::string& name) const;
  void set(const std::string& name, Attribute a) { map_[name] = std::move(a); }
  void erase(const std::string& name) { map_.erase(name); }
  const std::map<std::string, Attribute>& all() const { return map_; }

  // Typed getters: return `def` when absent. Kind mismatches return `def` too; the
  // importer validates kinds so kernels can trust these.
  int64_t getInt(const std::string& name, int64_t def) const;
  float getFloat(const std::string& name, float def) const;
  std::string getString(const std::string& name, const std::string& def) const;
  std::vector<int64_t> getInts(const std::string& name, std::vector<int64_t> def = {}) const;
  std::vector<float> getFloats(const std::string& name, std::vector<float> def = {}) const;
  const Tensor* getTensor(const std::string& name) const;

 private:
  std::map<std::string, Attribute> map_;
};

/// A named tensor in the graph: a graph input, an initializer (constant) or a node output.
struct Value {
  std::string name;
  DataType dtype = DataType::kUndefined;
  Shape shape;                        // may hold unknown (-1) dims until shape inference
  bool shapeKnown = false;            // false: rank unknown too
  std::vector<std::string> dimNames;  // symbolic names of dims (graph inputs), "" if none
  std::optional<Tensor> constant;     // set for initializers and folded constants
};

struct Node {
  std::string name;
  std::string opType;
  std::string domain;               // "" for ONNX, kEdgeInferDomain for fused nodes
  std::vector<std::string> inputs;  // "" marks an absent optional input
  std::vector<std::string> outputs;
  Attributes attrs;
  int64_t sourceIndex = -1;  // index of the ONNX node it came from (for errors)

  NodeLocation location() const { return NodeLocation{sourceIndex, name, opType}; }
  /// Number of inputs that are present (trailing absent ones not counted).
  const std::string& input(size_t i) const;
  bool hasInput(size_t i) const { return i < inputs.size() && !inputs[i].empty(); }
};

class Graph {
 public:
  std::string name;
  int64_t opset = 0;  // default-domain opset the model was imported with
  std::vector<Node> nodes;
  std::vector<std::string> inputs;  // graph inputs that are not initializers
  std::vector<std::string> outputs;

  Value& value(const std::string& name);  // creates if missing
  const Value* findValue(const std::string& name) const;
  Value* findValue(const std::string& name);
  bool hasValue(const std::string& name) const { return values_.count(name) != 0; }
  void eraseValue(const std::string& name) { values_.erase(name); }
  const std::unordered_map<std::string, Value>& values() const { return values_; }
  bool isConstant(const std::string& name) const;
  const Tensor* constant(const std::string& name) const;
  bool isGraphOutput(const std::string& name) const;

  /// Map from value name to the index of the node producing it.
  std::unordered_map<std::string, size_t> producers() const;
  /// Number of nodes reading each value (graph outputs count as one extra reader).
  std::unordered_map<std::string, int> consumerCounts() const;
  /// Reorders nodes topologically; fails (naming a node on the cycle) if there is a cycle
  /// or a node reads a value nothing defines.
  Status topologicalSort();
  /// A fresh value name with the given prefix.
  std::string uniqueName(const std::string& prefix);

  /// Multi-line listing of nodes with input/output shapes (for `edgeinfer inspect`).
  std::string toString() const;

 private:
  std::unordered_map<std::string, Value> values_;
  int64_t nameCounter_ = 0;
};

}  // namespace edgeinfer::graph
