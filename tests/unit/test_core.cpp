#include <gtest/gtest.h>

#include <cmath>

#include "core/half.h"
#include "core/npy.h"
#include "edgeinfer/logger.h"
#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "test_model.h"

namespace edgeinfer {
namespace {

TEST(CoreStatus, ToStringNamesNodeAndOp) {
  Status s(ErrorCode::kInvalidModel, "weight has 3 dims", NodeLocation{3, "conv1", "Conv"});
  EXPECT_EQ(s.toString(), "InvalidModel: node #3 'conv1' (Conv): weight has 3 dims");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Status::Ok().ok());
}

TEST(CoreStatus, AtKeepsFirstLocation) {
  Status s = Status(ErrorCode::kInternal, "x").at({1, "a", "Relu"}).at({2, "b", "Add"});
  EXPECT_EQ(s.where().index, 1);
  EXPECT_EQ(s.withContext("ctx").message(), "ctx: x");
}

TEST(CoreExpected, HoldsValueOrStatus) {
  Expected<int> a = 5;
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(*a, 5);
  Expected<int> b = Status(ErrorCode::kNotFound, "nope");
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), ErrorCode::kNotFound);
}

TEST(CoreExpected, OkStatusIsAnError_n) {
  Expected<int> e = Status::Ok();  // programming error: must not look like a value
  EXPECT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), ErrorCode::kInternal);
}

TEST(CoreShape, NumelAndUnknown) {
  EXPECT_EQ((Shape{2, 3, 4}).numel(), 24);
  EXPECT_EQ((Shape{}).numel(), 1);
  EXPECT_EQ((Shape{2, -1}).numel(), -1);
  EXPECT_EQ((Shape{2, -1}).toString(), "[2,?]");
  EXPECT_EQ(contiguousStrides(Shape{2, 3, 4}), (std::vector<int64_t>{12, 4, 1}));
}

TEST(CoreTensor, CreateZeroFilledAndClone) {
  auto t = Tensor::create(DataType::kFloat32, Shape{3, 5});
  ASSERT_TRUE(t.ok());
  for (int64_t i = 0; i < 15; ++i) EXPECT_EQ(t->data<float>()[i], 0.f);
  t->data<float>()[7] = 2.5f;
  Tensor c = t->clone();
  t->data<float>()[7] = 0.f;
  EXPECT_EQ(c.data<float>()[7], 2.5f);
  EXPECT_EQ(c.describe(), "float32[3,5]");
}

TEST(CoreTensor, RefusesDynamicShape_n) {
  auto t = Tensor::create(DataType::kFloat32, Shape{-1, 3});
  EXPECT_EQ(t.status().code(), ErrorCode::kInvalidArgument);
}

TEST(CoreTensor, RefusesHugeShape_n) {
  auto t = Tensor::create(DataType::kFloat32, Shape{1000000, 1000000, 1000000});
  EXPECT_EQ(t.status().code(), ErrorCode::kOutOfMemory);
}

TEST(CoreTensor, RefusesUndefinedType_n) {
  EXPECT_FALSE(Tensor::create(DataType::kUndefined, Shape{1}).ok());
}

TEST(CoreTensor, ReshapeMismatch_n) {
  Tensor t = Tensor::zeros(DataType::kInt32, Shape{2, 3});
  EXPECT_FALSE(t.reshaped(Shape{4}).ok());
  EXPECT_TRUE(t.reshaped(Shape{3, 2}).ok());
}

TEST(CoreHalf, RoundTripsAndRounds) {
  for (float f : {0.f, 1.f, -2.5f, 65504.f, 6.1035156e-05f, 5.9604645e-08f, 0.333333f})
    EXPECT_NEAR(halfToFloat(floatToHalf(f)), f, std::fabs(f) * 1e-3f + 1e-8f) << f;
  EXPECT_TRUE(std::isinf(halfToFloat(floatToHalf(1e6f))));
  EXPECT_TRUE(std::isnan(halfToFloat(floatToHalf(NAN))));
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(bf16ToFloat(floatToBf16(1.5f)), 1.5f);
  // Exhaustive: every finite half survives half -> float -> half.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00) continue;
    ASSERT_EQ(floatToHalf(halfToFloat(static_cast<uint16_t>(h))), h) << h;
  }
}

TEST(CoreNpy, RoundTrip) {
  test::TempDir dir;
  Tensor t = Tensor::zeros(DataType::kFloat32, Shape{2, 3, 5});
  for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = static_cast<float>(i) * 0.5f;
  ASSERT_TRUE(writeNpy(dir.file("a.npy"), t).ok());
  auto r = readNpy(dir.file("a.npy"));
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(r->shape(), t.shape());
  for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(r->data<float>()[i], t.data<float>()[i]);
  Tensor s = Tensor::zeros(DataType::kInt64, Shape{});
  *s.data<int64_t>() = 42;
  ASSERT_TRUE(writeNpy(dir.file("s.npy"), s).ok());
  auto rs = readNpy(dir.file("s.npy"));
  ASSERT_TRUE(rs.ok());
  EXPECT_EQ(rs->shape().rank(), 0u);
  EXPECT_EQ(*rs->data<int64_t>(), 42);
}

TEST(CoreNpy, TruncatedFile_n) {
  test::TempDir dir;
  Tensor t = Tensor::zeros(DataType::kFloat32, Shape{100});
  ASSERT_TRUE(writeNpy(dir.file("a.npy"), t).ok());
  std::ifstream in(dir.file("a.npy"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  dir.write("b.npy", bytes.substr(0, bytes.size() - 10));
  EXPECT_EQ(readNpy(dir.file("b.npy")).status().code(), ErrorCode::kCorruptFile);
}

TEST(CoreNpy, NotNpy_n) {
  test::TempDir dir;
  dir.write("x.npy", "hello world, not numpy");
  EXPECT_EQ(readNpy(dir.file("x.npy")).status().code(), ErrorCode::kCorruptFile);
  EXPECT_EQ(readNpy(dir.file("missing.npy")).status().code(), ErrorCode::kNotFound);
}

class CapturingLogger : public ILogger {
 public:
  void log(Severity s, const char* m) noexcept override {
    lines.push_back(std::string(severityName(s)) + ":" + m);
  }
  std::vector<std::string> lines;
};

TEST(CoreLogger, ApplicationLoggerReceivesMessagesAboveLevel) {
  CapturingLogger cap;
  setLogger(&cap);
  const Severity old = getLogLevel();
  setLogLevel(Severity::kInfo);
  log(Severity::kInfo, "hello");
  log(Severity::kVerbose, "dropped");
  setLogLevel(old);
  setLogger(nullptr);
  ASSERT_EQ(cap.lines.size(), 1u);
  EXPECT_EQ(cap.lines[0], "info:hello");
}

}  // namespace
}  // namespace edgeinfer
