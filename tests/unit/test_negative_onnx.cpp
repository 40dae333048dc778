// Negative tests (suffix _n) for Builder::buildFromFile / buildFromBuffer: damaged files,
// unsupported and malformed models, absurd sizes, bad weights and external data. Each checks
// that the build fails cleanly (no crash, no huge allocation, no exception) with the right
// ErrorCode and a message that names what is wrong. A few positive tests make sure the models
// are otherwise right, so the negative ones fail for the reason they claim.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <initializer_list>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <sys/stat.h>

#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "edgeinfer/tensor.h"
#include "onnx/onnx_pb.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

using test::TempDir;
using test::TestModel;
using EngineResult = Expected<std::unique_ptr<Engine>>;

BuilderConfig cpuConfig() {
  BuilderConfig c;
  c.backend = Backend::kCpu;
  return c;
}

EngineResult buildBytes(const std::string& bytes, const BuilderConfig& config = cpuConfig()) {
  return Builder::buildFromBuffer(bytes.data(), bytes.size(), config);
}

std::string describe(const EngineResult& r) {
  return r.ok() ? std::string("OK (the build succeeded)") : r.status().toString();
}

// Asserts that the build failed with one of `codes` and that the message names each of
// `mentions`. toString() is searched so a name in the node location also counts.
void expectFailure(const EngineResult& r, std::initializer_list<ErrorCode> codes,
                   std::initializer_list<std::string> mentions = {}) {
  ASSERT_FALSE(r.ok()) << "expected the build to fail";
  const Status& s = r.status();
  bool codeOk = false;
  std::string wanted;
  for (ErrorCode c : codes) {
    codeOk = codeOk || s.code() == c;
    wanted += std::string(wanted.empty() ? "" : " or ") + errorCodeName(c);
  }
  EXPECT_TRUE(codeOk) << "expected " << wanted << ", got " << s.toString();
  EXPECT_FALSE(s.message().empty()) << "an error needs a message";
  const std::string text = s.toString();
  for (const auto& m : mentions)
    EXPECT_NE(text.find(m), std::string::npos)
        << "the error should mention '" << m << "': " << text;
}

// Y = Relu(X), X: float[2,3].
TestModel reluModel(int64_t opset = 13) {
  TestModel m(opset);
  m.input("X", {2, 3}).output("Y");
  m.node("Relu", {"X"}, {"Y"}, "relu");
  return m;
}

// Y = X + B with B an initializer of 6 floats (enough bytes that truncation lands inside it).
TestModel addBiasModel() {
  TestModel m;
  m.input("X", {2, 3}).output("Y");
  m.initializer("B", {2, 3}, {1, 2, 3, 4, 5, 6});
  m.node("Add", {"X", "B"}, {"Y"}, "add");
  return m;
}

// Y = X + W where W's 6 floats live in an external file.
TestModel externalWeightModel(const std::string& location, int64_t offset, int64_t length) {
  TestModel m;
  m.input("X", {2, 3}).output("Y");
  auto* w = m.proto.mutable_graph()->add_initializer();
  w->set_name("W_ext");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(2);
  w->add_dims(3);
  w->set_data_location(onnx::TensorProto::EXTERNAL);
  auto kv = [&](const std::string& k, const std::string& v) {
    auto* e = w->add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  kv("location", location);
  if (offset >= 0) kv("offset", std::to_string(offset));
  if (length >= 0) kv("length", std::to_string(length));
  m.node("Add", {"X", "W_ext"}, {"Y"}, "add_ext");
  return m;
}

std::string floatBytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// ---- Damaged files --------------------------------------------------------------------------

TEST(NegativeOnnx, ZeroByteFile_n) {
  TempDir dir;
  const std::string path = dir.write("empty.onnx", "");
  expectFailure(Builder::buildFromFile(path, cpuConfig()),
                {ErrorCode::kCorruptFile, ErrorCode::kInvalidModel});
}

TEST(NegativeOnnx, ZeroByteBuffer_n) {
  const char dummy = 0;
  expectFailure(Builder::buildFromBuffer(&dummy, 0, cpuConfig()),
                {ErrorCode::kCorruptFile, ErrorCode::kInvalidModel, ErrorCode::kInvalidArgument});
  expectFailure(Builder::buildFromBuffer(nullptr, 0, cpuConfig()),
                {ErrorCode::kCorruptFile, ErrorCode::kInvalidModel, ErrorCode::kInvalidArgument});
}

TEST(NegativeOnnx, GarbageBytes_n) {
  TempDir dir;
  std::mt19937 rng(1234);
  std::string garbage(4096, '\0');
  for (auto& c : garbage) c = static_cast<char>(rng() & 0xff);
  expectFailure(Builder::buildFromFile(dir.write("garbage.onnx", garbage), cpuConfig()),
                {ErrorCode::kCorruptFile, ErrorCode::kInvalidModel});
  // Text that is not a protobuf at all.
  expectFailure(buildBytes("this is not an ONNX model\n"),
                {ErrorCode::kCorruptFile, ErrorCode::kInvalidModel});
}

TEST(NegativeOnnx, TruncatedModel_n) {
  const std::string full = addBiasModel().bytes();
  ASSERT_TRUE(buildBytes(full).ok()) << "the untruncated model must build";
  TempDir dir;
  for (size_t keep : {full.size() / 2, full.size() - 1}) {
    SCOPED_TRACE("kept " + std::to_string(keep) + " of " + std::to_string(full.size()) + " bytes");
    const std::string path = dir.write("truncated.onnx", full.substr(0, keep));
    expectFailure(Builder::buildFromFile(path, cpuConfig()),
                  {ErrorCode::kCorruptFile, ErrorCode::kInvalidModel});
  }
}

TEST(NegativeOnnx, NonexistentPath_n) {
  TempDir dir;
  const std::string path = dir.file("does_not_exist.onnx");
  expectFailure(Builder::buildFromFile(path, cpuConfig()), {ErrorCode::kNotFound}, {path});
}

TEST(NegativeOnnx, DirectoryInsteadOfFile_n) {
  TempDir dir;
  const EngineResult r = Builder::buildFromFile(dir.path(), cpuConfig());
  expectFailure(r, {ErrorCode::kNotFound, ErrorCode::kIoError, ErrorCode::kCorruptFile,
                    ErrorCode::kInvalidArgument});
}

TEST(NegativeOnnx, ModelWithoutGraph_n) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  std::string bytes;
  ASSERT_TRUE(m.SerializeToString(&bytes));
  expectFailure(buildBytes(bytes), {ErrorCode::kCorruptFile, ErrorCode::kInvalidModel});
}

// ---- Unsupported ------------------------------------------------------------------------------

TEST(NegativeOnnx, UnknownOp_n) {
  TestModel m;
  m.input("X", {2, 3}).output("Y");
  m.node("TotallyUnknownOp", {"X"}, {"Y"}, "mystery_node");
  expectFailure(buildBytes(m.bytes()), {ErrorCode::kUnsupported},
                {"TotallyUnknownOp", "mystery_node"});
}

// Every unsupported node is reported at once (index, name, op type), supported ones are not.
TEST(NegativeOnnx, SeveralUnknownOpsAllReported_n) {
  TestModel m;
  m.input("X", {2, 3}).output("Y");
  m.node("Relu", {"X"}, {"a"}, "ok_relu_0");         // #0
  m.node("FrobnicateA", {"a"}, {"b"}, "bad_alpha");  // #1
  m.node("FrobnicateB", {"b"}, {"c"}, "bad_beta");   // #2
  m.node("Relu", {"c"}, {"d"}, "ok_relu_3");         // #3
  m.node("FrobnicateC", {"d"}, {"Y"}, "bad_gamma");  // #4
  const EngineResult r = buildBytes(m.bytes());
  expectFailure(r, {ErrorCode::kUnsupported},
                {"FrobnicateA", "bad_alpha", "#1", "FrobnicateB", "bad_beta", "#2", "FrobnicateC",
                 "bad_gamma", "#4"});
  if (!r.ok()) {
    const std::string text = r.status().toString();
    EXPECT_EQ(text.find("ok_relu_0"), std::string::npos) << "a supported node was listed: " << text;
    EXPECT_EQ(text.find("ok_relu_3"), std::string::npos) << "a supported node was listed: " << text;
  }
}

TEST(NegativeOnnx, UnknownOpInCustomDomain_n) {
  TestModel m;
  auto* op = m.proto.add_opset_import();
  op->set_domain("com.example.custom");
  op->set_version(1);
  m.input("X", {2, 3}).output("Y");
  m.node("Relu", {"X"}, {"Y"}, "custom_relu").set_domain("com.example.custom");
  expectFailure(buildBytes(m.bytes()), {ErrorCode::kUnsupported}, {"custom_relu"});
}

TEST(NegativeOnnx, OpsetTooOld_n) {
  expectFailure(buildBytes(reluModel(/*opset=*/6).bytes()), {ErrorCode::kUnsupported},
                {"opset", "6"});
}

TEST(NegativeOnnx, OpsetTooNew_n) {
  expectFailure(buildBytes(reluModel(/*opset=*/99).bytes()), {ErrorCode::kUnsupported},
                {"opset", "99"});
}

// ---- Malformed graphs --------------------------------------------------------------------------

TEST(NegativeOnnx, GraphCycle_n) {
  // a = X + b; b = Relu(a): a and b depend on each other.
  TestModel m;
  m.input("X", {2, 3}).output("b");
  m.node("Add", {"X", "b"}, {"a"}, "cyc_add");
  m.node("Relu", {"a"}, {"b"}, "cyc_relu");
  expectFailure(buildBytes(m.bytes()), {ErrorCode::kInvalidModel});
}

TEST(NegativeOnnx, SelfLoop_n) {
  TestModel m;
  m.input("X", {2, 3}).output("Y");
  m.node("Add", {"X", "Y"}, {"Y"}, "self_add");
  expectFailure(buildBytes(m.bytes()), {ErrorCode::kInvalidModel});
}

TEST(NegativeOnnx, UndefinedNodeInput_n) {
  TestModel m;
  m.input("X", {2, 3}).output("Y");
  m.node("Relu", {"defined_nowhere"}, {"Y"}, "orphan_relu");
  expectFailure(buildBytes(m.bytes()), {ErrorCode::kInvalidModel}, {"defined_nowhere"});
}

TEST(NegativeOnnx, MissingInitializer_n) {
  TestModel m;
  m.input("X", {2, 3}).output("Y");
  m.node("Add", {"X", "missing_bias"}, {"Y"}, "add_bias");
  expectFailure(buildBytes(m.bytes()), {ErrorCode::kInvalidModel}, {"missing_bias"});
}

TEST(NegativeOnnx, GraphOutputNeverProduced_n) {
  TestModel m;
  m.input("X", {2, 3}).output("Y").output("ghost_output");
  m.node("Relu", {"X"}, {"Y"}, "relu");
  expectFailure(buildBytes(m.bytes()), {ErrorCode::kInvalidModel}, {"ghost_output"});
}

TEST(NegativeOnnx, ShapeMismatchAdd_n) {
  TestModel m;
  m.input("A", {2, 3}).input("B", {4, 5}).output("Y");
  m.node("Add", {"A", "B"}, {"Y"}, "bad_add");
  expectFailure(buildBytes(m.bytes()), {ErrorCode::kInvalidModel}, {"bad_add"});
}

TEST(NegativeOnnx, ShapeMismatchMatMul_n) {
  TestModel m;
  m.input("A", {2, 3}).input("B", {4, 5}).output("Y");
  m.node("MatMul", {"A", "B"}, {"Y"}, "bad_matmul");
  expectFailure(buildBytes(m.bytes()), {ErrorCode::kInvalidModel}, {"bad_matmul"});
}

TEST(NegativeOnnx, DuplicateNodeOutputNames_n) {
  TestModel m;
  m.input("X", {2, 3}).output("dup");
  m.node("Relu", {"X"}, {"dup"}, "first_writer");
  m.node("Neg", {"X"}, {"dup"}, "second_writer");
  expectFailure(buildBytes(m.bytes()), {ErrorCode::kInvalidModel}, {"dup"});
}

TEST(NegativeOnnx, EmptyGraph_n) {
  TestModel m;  // no inputs, nodes or outputs
  expectFailure(buildBytes(m.bytes()), {ErrorCode::kInvalidModel});
}

TEST(NegativeOnnx, GraphWithoutOutputs_n) {
  TestModel m;
  m.input("X", {2, 3});
  m.node("Relu", {"X"}, {"Y"}, "relu");
  expectFailure(buildBytes(m.bytes()), {ErrorCode::kInvalidModel});
}

// ---- Absurd sizes: a clear error, not a crash, not an allocation attempt ---------------------

TEST(NegativeOnnx, HugeInputDimensions_n) {
  TestModel m;
  m.input("huge_input", {1000000000000, 1000000000000}).output("Y");  // 1e24 elements
  m.node("Relu", {"huge_input"}, {"Y"}, "relu");
  expectFailure(buildBytes(m.bytes()),
                {ErrorCode::kInvalidModel, ErrorCode::kOutOfMemory, ErrorCode::kUnsupported},
                {"huge_input"});
}

TEST(NegativeOnnx, InputElementCountOverflowsInt64_n) {
  TestModel m;
  m.input("overflow_input", {int64_t{1} << 62, 8}).output("Y");  // 2^65 elements
  m.node("Relu", {"overflow_input"}, {"Y"}, "relu");
  expectFailure(buildBytes(m.bytes()),
                {ErrorCode::kInvalidModel, ErrorCode::kOutOfMemory, ErrorCode::kUnsupported},
                {"overflow_input"});
}

TEST(NegativeOnnx, HugeInitializerWithoutData_n) {
  // Declares a 4 TB weight but carries no data: must be rejected before any allocation.
  TestModel m;
  m.input("X", {1}).output("Y");
  auto* w = m.proto.mutable_graph()->add_initializer();
  w->set_name("huge_weight");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(1000000);
  w->add_dims(1000000);
  m.node("Add", {"X", "huge_weight"}, {"Y"}, "add");
  expectFailure(buildBytes(m.bytes()), {ErrorCode::kInvalidModel, ErrorCode::kOutOfMemory},
                {"huge_weight"});
}

TEST(NegativeOnnx, TensorBytesAboveConfiguredLimit_n) {
  BuilderConfig config = cpuConfig();
  config.maxTensorBytes = 16;  // the 24-byte bias is over the limit
  expectFailure(buildBytes(addBiasModel().bytes(), config),
                {ErrorCode::kOutOfMemory, ErrorCode::kInvalidModel});
}

// ---- Bad weights ----------------------------------------------------------------------------

TEST(NegativeOnnx, NaNInWeights_n) {
  TestModel m;
  m.input("X", {2, 3}).output("Y");
  m.initializer("weights_with_nan", {2, 3}, {1, 2, std::nanf(""), 4, 5, 6});
  m.node("Add", {"X", "weights_with_nan"}, {"Y"}, "add");
  const EngineResult r = buildBytes(m.bytes());
  ASSERT_FALSE(r.ok()) << "NaN in a weight must fail the build";
  EXPECT_NE(r.status().toString().find("weights_with_nan"), std::string::npos)
      << r.status().toString();
}

TEST(NegativeOnnx, InfInWeights_n) {
  TestModel m;
  m.input("X", {2, 3}).output("Y");
  m.initializer("weights_with_inf", {2, 3},
                {1, 2, 3, -std::numeric_limits<float>::infinity(), 5, 6});
  m.node("Add", {"X", "weights_with_inf"}, {"Y"}, "add");
  const EngineResult r = buildBytes(m.bytes());
  ASSERT_FALSE(r.ok()) << "Inf in a weight must fail the build";
  EXPECT_NE(r.status().toString().find("weights_with_inf"), std::string::npos)
      << r.status().toString();
}

TEST(NegativeOnnx, InitializerDataSizeMismatch_n) {
  TestModel m;
  m.input("X", {2, 3}).output("Y");
  m.initializer("short_weight", {2, 3}, {1, 2, 3});  // 3 values for 6 elements
  m.node("Add", {"X", "short_weight"}, {"Y"}, "add");
  expectFailure(buildBytes(m.bytes()), {ErrorCode::kInvalidModel, ErrorCode::kCorruptFile},
                {"short_weight"});
}

// ---- External data -----------------------------------------------------------------------------

TEST(NegativeOnnx, ExternalDataFileMissing_n) {
  TempDir dir;
  const std::string model = dir.write("m.onnx", externalWeightModel("weights.bin", 0, 24).bytes());
  expectFailure(Builder::buildFromFile(model, cpuConfig()),
                {ErrorCode::kNotFound, ErrorCode::kIoError}, {"W_ext", "weights.bin"});
}

TEST(NegativeOnnx, ExternalDataOffsetBeyondFile_n) {
  TempDir dir;
  dir.write("weights.bin", floatBytes({1, 2, 3, 4, 5, 6}));  // 24 bytes
  const std::string model =
      dir.write("m.onnx", externalWeightModel("weights.bin", 1024, 24).bytes());
  expectFailure(Builder::buildFromFile(model, cpuConfig()),
                {ErrorCode::kCorruptFile, ErrorCode::kInvalidModel}, {"W_ext"});
}

TEST(NegativeOnnx, ExternalDataFileTooShort_n) {
  TempDir dir;
  dir.write("weights.bin", floatBytes({1, 2, 3}));  // 12 of the 24 bytes
  const std::string model = dir.write("m.onnx", externalWeightModel("weights.bin", 0, -1).bytes());
  expectFailure(Builder::buildFromFile(model, cpuConfig()),
                {ErrorCode::kCorruptFile, ErrorCode::kInvalidModel}, {"W_ext"});
}

TEST(NegativeOnnx, ExternalDataHugeOffset_n) {
  // offset + size must not overflow (UBSan would flag a signed overflow here).
  TempDir dir;
  dir.write("weights.bin", floatBytes({1, 2, 3, 4, 5, 6}));
  const std::string model = dir.write(
      "m.onnx",
      externalWeightModel("weights.bin", std::numeric_limits<int64_t>::max() - 8, 24).bytes());
  expectFailure(Builder::buildFromFile(model, cpuConfig()),
                {ErrorCode::kCorruptFile, ErrorCode::kInvalidModel, ErrorCode::kIoError},
                {"W_ext"});
}

TEST(NegativeOnnx, ExternalDataOutsideModelDirectory_n) {
  // A model must not read files outside its directory ("../", absolute paths).
  TempDir dir;
  ASSERT_EQ(mkdir(dir.file("model").c_str(), 0755), 0);
  dir.write("outside.bin", floatBytes({1, 2, 3, 4, 5, 6}));
  for (const std::string& location : {std::string("../outside.bin"), dir.file("outside.bin")}) {
    SCOPED_TRACE("location " + location);
    const std::string model =
        dir.write("model/m.onnx", externalWeightModel(location, 0, 24).bytes());
    expectFailure(Builder::buildFromFile(model, cpuConfig()), {ErrorCode::kInvalidModel},
                  {"W_ext"});
  }
}

// ---- Execution-time misuse -------------------------------------------------------------------

class NegativeOnnxContext : public ::testing::Test {
 protected:
  void SetUp() override {
    auto e = buildBytes(reluModel().bytes());
    ASSERT_TRUE(e.ok()) << describe(e);
    engine_ = std::move(*e);
    auto c = engine_->createExecutionContext();
    ASSERT_TRUE(c.ok()) << c.status().toString();
    ctx_ = std::move(*c);
  }
  std::unique_ptr<Engine> engine_;
  std::unique_ptr<ExecutionContext> ctx_;
};

TEST_F(NegativeOnnxContext, SetUnknownInput_n) {
  Status s = ctx_->setInput("no_such_input", Tensor::zeros(DataType::kFloat32, {2, 3}));
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.toString().find("no_such_input"), std::string::npos) << s.toString();
}

TEST_F(NegativeOnnxContext, SetInputWrongShape_n) {
  Status s = ctx_->setInput("X", Tensor::zeros(DataType::kFloat32, {3, 2}));
  EXPECT_FALSE(s.ok()) << "a [3,2] tensor was accepted for a [2,3] input";
}

TEST_F(NegativeOnnxContext, SetInputWrongDtype_n) {
  Status s = ctx_->setInput("X", Tensor::zeros(DataType::kInt32, {2, 3}));
  EXPECT_FALSE(s.ok()) << "an int32 tensor was accepted for a float32 input";
}

TEST_F(NegativeOnnxContext, ExecuteWithoutInputs_n) {
  EXPECT_FALSE(ctx_->execute().ok()) << "execute() ran with an unbound input";
}

TEST_F(NegativeOnnxContext, GetUnknownOutput_n) {
  ASSERT_TRUE(ctx_->setInput("X", Tensor::zeros(DataType::kFloat32, {2, 3})).ok());
  ASSERT_TRUE(ctx_->execute().ok());
  EXPECT_FALSE(ctx_->getOutput("no_such_output").ok());
}

// ---- Positive sanity checks --------------------------------------------------------------------

void expectReluRuns(Engine& engine) {
  ASSERT_EQ(engine.inputs().size(), 1u);
  ASSERT_EQ(engine.outputs().size(), 1u);
  EXPECT_EQ(engine.inputs()[0].name, "X");
  EXPECT_EQ(engine.inputs()[0].dtype, DataType::kFloat32);
  EXPECT_EQ(engine.inputs()[0].shape, Shape({2, 3}));
  EXPECT_EQ(engine.outputs()[0].name, "Y");
  auto ctx = engine.createExecutionContext();
  ASSERT_TRUE(ctx.ok()) << ctx.status().toString();
  float in[6] = {-1.5f, 0.f, 2.f, -0.f, 3.25f, -7.f};
  ASSERT_TRUE((*ctx)->setInput("X", Tensor::wrap(in, DataType::kFloat32, {2, 3})).ok());
  ASSERT_TRUE((*ctx)->execute().ok());
  auto out = (*ctx)->getOutput("Y");
  ASSERT_TRUE(out.ok()) << out.status().toString();
  ASSERT_EQ(out->dtype(), DataType::kFloat32);
  ASSERT_EQ(out->shape(), Shape({2, 3}));
  const float want[6] = {0.f, 0.f, 2.f, 0.f, 3.25f, 0.f};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out->data<float>()[i], want[i]) << "element " << i;
}

TEST(NegativeOnnxSanity, ReluFromBufferRuns) {
  auto e = buildBytes(reluModel().bytes());
  ASSERT_TRUE(e.ok()) << describe(e);
  expectReluRuns(**e);
}

TEST(NegativeOnnxSanity, ReluFromFileRuns) {
  TempDir dir;
  auto e = Builder::buildFromFile(dir.write("relu.onnx", reluModel().bytes()), cpuConfig());
  ASSERT_TRUE(e.ok()) << describe(e);
  expectReluRuns(**e);
}

TEST(NegativeOnnxSanity, SupportedOpsetRangeBuilds) {
  for (int64_t opset : {7, 13, 17}) {
    auto e = buildBytes(reluModel(opset).bytes());
    EXPECT_TRUE(e.ok()) << "opset " << opset << ": " << describe(e);
  }
}

TEST(NegativeOnnxSanity, ExternalDataLoads) {
  TempDir dir;
  dir.write("weights.bin", std::string(8, '\0') + floatBytes({1, 2, 3, 4, 5, 6}));
  const std::string model = dir.write("m.onnx", externalWeightModel("weights.bin", 8, 24).bytes());
  auto e = Builder::buildFromFile(model, cpuConfig());
  ASSERT_TRUE(e.ok()) << describe(e);
  auto ctx = (*e)->createExecutionContext();
  ASSERT_TRUE(ctx.ok()) << ctx.status().toString();
  float in[6] = {10, 20, 30, 40, 50, 60};
  ASSERT_TRUE((*ctx)->setInput("X", Tensor::wrap(in, DataType::kFloat32, {2, 3})).ok());
  ASSERT_TRUE((*ctx)->execute().ok());
  auto out = (*ctx)->getOutput("Y");
  ASSERT_TRUE(out.ok()) << out.status().toString();
  for (int i = 0; i < 6; ++i) EXPECT_EQ(out->data<float>()[i], in[i] + float(i + 1));
}

}  // namespace
}  // namespace edgeinfer
