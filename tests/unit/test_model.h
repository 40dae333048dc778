// Builds small ONNX models in C++ for tests (onnx::ModelProto through libonnx's protobuf
// classes), so tests need no Python and no model files.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "onnx/onnx_pb.h"

namespace edgeinfer::test {

class TestModel {
 public:
  explicit TestModel(int64_t opset = 13, int64_t irVersion = 8) {
    proto.set_ir_version(irVersion);
    proto.set_producer_name("edgeinfer-tests");
    auto* op = proto.add_opset_import();
    op->set_domain("");
    op->set_version(opset);
    proto.mutable_graph()->set_name("test");
  }

  /// A tensor input; a negative dim becomes the symbolic dim "N".
  TestModel& input(const std::string& name, std::vector<int64_t> dims,
                   int elemType = onnx::TensorProto::FLOAT) {
    valueInfo(proto.mutable_graph()->add_input(), name, dims, elemType);
    return *this;
  }
  TestModel& output(const std::string& name, int elemType = onnx::TensorProto::FLOAT) {
    auto* vi = proto.mutable_graph()->add_output();
    vi->set_name(name);
    vi->mutable_type()->mutable_tensor_type()->set_elem_type(elemType);
    return *this;
  }
  TestModel& initializer(const std::string& name, std::vector<int64_t> dims,
                         const std::vector<float>& data) {
    auto* t = proto.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    for (auto d : dims) t->add_dims(d);
    for (float v : data) t->add_float_data(v);
    return *this;
  }
  TestModel& initializerI64(const std::string& name, std::vector<int64_t> dims,
                            const std::vector<int64_t>& data) {
    auto* t = proto.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    for (auto d : dims) t->add_dims(d);
    for (auto v : data) t->add_int64_data(v);
    return *this;
  }
  /// An initializer of random floats in [lo, hi) from a fixed seed.
  TestModel& randomInitializer(const std::string& name, std::vector<int64_t> dims, uint32_t seed,
                               float lo = -1.f, float hi = 1.f) {
    int64_t n = 1;
    for (auto d : dims) n *= d;
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(lo, hi);
    std::vector<float> v(static_cast<size_t>(n));
    for (auto& x : v) x = u(rng);
    return initializer(name, dims, v);
  }

  onnx::NodeProto& node(const std::string& op, std::vector<std::string> inputs,
                        std::vector<std::string> outputs, const std::string& name = "") {
    auto* n = proto.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? op + "_" + std::to_string(proto.graph().node_size() - 1) : name);
    for (auto& i : inputs) n->add_input(i);
    for (auto& o : outputs) n->add_output(o);
    return *n;
  }

  static void attr(onnx::NodeProto& n, const std::string& name, int64_t v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void attrF(onnx::NodeProto& n, const std::string& name, float v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  static void attrS(onnx::NodeProto& n, const std::string& name, const std::string& v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(v);
  }
  static void attrInts(onnx::NodeProto& n, const std::string& name, std::vector<int64_t> v) {
    auto* a = n.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
  }

  std::string bytes() const {
    std::string s;
    proto.SerializeToString(&s);
    return s;
  }

  onnx::ModelProto proto;

 private:
  static void valueInfo(onnx::ValueInfoProto* vi, const std::string& name,
                        const std::vector<int64_t>& dims, int elemType) {
    vi->set_name(name);
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(elemType);
    auto* shape = tt->mutable_shape();
    for (auto d : dims) {
      auto* dim = shape->add_dim();
      if (d >= 0)
        dim->set_dim_value(d);
      else
        dim->set_dim_param("N");
    }
  }
};

/// A scratch directory removed (with its files) at destruction.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/edgeinfer-test-XXXXXX";
    path_ = mkdtemp(tmpl) ? tmpl : "/tmp";
  }
  ~TempDir() {
    std::error_code ec;
    if (path_ != "/tmp" &&
        std::filesystem::remove_all(path_, ec) == static_cast<std::uintmax_t>(-1))
      std::fprintf(stderr, "cannot remove %s: %s\n", path_.c_str(), ec.message().c_str());
  }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  std::string write(const std::string& name, const std::string& bytes) const {
    std::ofstream f(file(name), std::ios::binary);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return file(name);
  }

 private:
  std::string path_;
};

}  // namespace edgeinfer::test
