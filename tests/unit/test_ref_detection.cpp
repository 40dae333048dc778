// CPU reference kernels and shape inference for TopK, NonMaxSuppression and NonZero:
// hand-computed cases, random inputs against brute-force loops (fixed seeds) and negative
// cases (suffix _n).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "graph/op_schema.h"
#include "kernels/ref/ref_kernels.h"
#include "ref_test_util.h"

namespace edgeinfer {
namespace {

using namespace test;

// ---- TopK ----------------------------------------------------------------------------------

TEST(RefTopK, LargestWithTiesKeepsLowerIndexFirst) {
  graph::Node n = makeNode("TopK", 2, 2);
  Tensor x = f32({2, 4}, {1, 3, 3, 2, 5, 5, 5, 0});
  Tensor k = i64({1}, {3});
  auto out = runAll(n, {&x, &k});
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].shape(), Shape({2, 3}));
  EXPECT_EQ(vals(out[0]), V({3, 3, 2, 5, 5, 5}));
  EXPECT_EQ(vals(out[1]), V({1, 2, 3, 0, 1, 2}));
  EXPECT_EQ(out[1].dtype(), DataType::kInt64);
}

TEST(RefTopK, AttributeKSmallestAlongAxis0) {
  graph::Node n = makeNode("TopK", 1, 2);  // opset < 10 form: k is an attribute
  n.attrs.set("k", graph::Attribute::Int(2));
  n.attrs.set("axis", graph::Attribute::Int(0));
  n.attrs.set("largest", graph::Attribute::Int(0));
  Tensor x = i32({3, 2}, {4, -1, 2, 7, 2, -3});
  auto out = runAll(n, {&x});
  EXPECT_EQ(out[0].shape(), Shape({2, 2}));
  EXPECT_EQ(vals(out[0]), V({2, -3, 2, -1}));
  EXPECT_EQ(vals(out[1]), V({1, 2, 2, 0}));
}

TEST(RefTopK, RandomAgainstBruteForce) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 12; ++trial) {
    const Shape s({3, 13, 5});
    // few distinct values so ties are common
    std::vector<float> v(static_cast<size_t>(s.numel()));
    for (auto& e : v) e = static_cast<float>(static_cast<int>(rng() % 7)) - 3.f;
    Tensor x = f32(s, v);
    const int64_t axis = trial % 3;
    const bool largest = trial % 2 == 0;
    const int64_t len = s[static_cast<size_t>(axis)];
    const int64_t kk = 1 + static_cast<int64_t>(rng() % static_cast<uint32_t>(len));
    graph::Node n = makeNode("TopK", 2, 2);
    n.attrs.set("axis", graph::Attribute::Int(axis - 3));  // negative axis form
    n.attrs.set("largest", graph::Attribute::Int(largest ? 1 : 0));
    Tensor k = i64({1}, {kk});
    auto out = runAll(n, {&x, &k});
    ASSERT_EQ(out.size(), 2u);
    const std::vector<int64_t> st = contiguousStrides(s);
    Shape os = s;
    os[static_cast<size_t>(axis)] = kk;
    ASSERT_EQ(out[0].shape(), os);
    const std::vector<int64_t> ost = contiguousStrides(os);
    for (int64_t i = 0; i < s.numel(); ++i) {
      int64_t c[3] = {i / st[0], (i / st[1]) % s[1], i % s[2]};
      if (c[axis] != 0) continue;  // one line per start element
      std::vector<std::pair<float, int64_t>> line;
      for (int64_t j = 0; j < len; ++j)
        line.push_back({v[static_cast<size_t>(i + j * st[axis])], j});
      // brute force: selection by repeated scan for the best remaining element
      std::vector<bool> used(static_cast<size_t>(len), false);
      for (int64_t r = 0; r < kk; ++r) {
        int64_t best = -1;
        for (int64_t j = 0; j < len; ++j) {
          if (used[static_cast<size_t>(j)]) continue;
          if (best < 0) {
            best = j;
            continue;
          }
          const float a = line[static_cast<size_t>(j)].first,
                      b = line[static_cast<size_t>(best)].first;
          if (largest ? a > b : a < b) best = j;
        }
        used[static_cast<size_t>(best)] = true;
        c[axis] = r;
        const int64_t o = c[0] * ost[0] + c[1] * ost[1] + c[2] * ost[2];
        EXPECT_EQ(out[0].getAsDouble(o), line[static_cast<size_t>(best)].first);
        EXPECT_EQ(out[1].getAsInt64(o), best) << "trial " << trial;
        c[axis] = 0;
      }
    }
  }
}

TEST(RefTopK, BuildTimeUnknownK) {
  graph::Node n = makeNode("TopK", 2, 2);
  auto r = inferBuild(n, {iv(DataType::kFloat32, {2, 9}), iv(DataType::kInt64, {1})});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ((*r)[0].shape, Shape({2, -1}));
  EXPECT_EQ((*r)[1].dtype, DataType::kInt64);
}

TEST(RefTopK, KLargerThanAxis_n) {
  graph::Node n = makeNode("TopK", 2, 2);
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor k = i64({1}, {4});
  EXPECT_EQ(runStatus(n, {&x, &k}).code(), ErrorCode::kInvalidModel);
}

TEST(RefTopK, NegativeK_n) {
  graph::Node n = makeNode("TopK", 2, 2);
  Tensor x = f32({3}, {1, 2, 3});
  Tensor k = i64({1}, {-1});
  EXPECT_FALSE(runStatus(n, {&x, &k}).ok());
}

TEST(RefTopK, MissingK_n) {
  graph::Node n = makeNode("TopK", 1, 2);
  Tensor x = f32({3}, {1, 2, 3});
  EXPECT_FALSE(runStatus(n, {&x}).ok());
}

TEST(RefTopK, AxisOutOfRange_n) {
  graph::Node n = makeNode("TopK", 2, 2);
  n.attrs.set("axis", graph::Attribute::Int(2));
  Tensor x = f32({3}, {1, 2, 3});
  Tensor k = i64({1}, {1});
  EXPECT_FALSE(runStatus(n, {&x, &k}).ok());
}

TEST(RefTopK, Int32K_n) {
  graph::Node n = makeNode("TopK", 2, 2);
  Tensor x = f32({3}, {1, 2, 3});
  Tensor k = i32({1}, {1});
  EXPECT_FALSE(runStatus(n, {&x, &k}).ok());
}

TEST(RefTopK, ScalarInput_n) {
  graph::Node n = makeNode("TopK", 2, 2);
  Tensor x = f32({}, {1});
  Tensor k = i64({1}, {1});
  EXPECT_FALSE(runStatus(n, {&x, &k}).ok());
}

// ---- NonMaxSuppression ---------------------------------------------------------------------

// The boxes of the ONNX NonMaxSuppression examples.
const std::vector<float> kBoxes = {0.5, 0.5,  1.0, 1.0, 0.5, 0.6,  1.0, 1.0, 0.5, 0.4,   1.0, 1.0,
                                   0.5, 10.5, 1.0, 1.0, 0.5, 10.6, 1.0, 1.0, 0.5, 100.5, 1.0, 1.0};
const std::vector<float> kCornerBoxes = {0.0, 0.0,  1.0, 1.0,  0.0, 0.1,   1.0, 1.1,
                                         0.0, -0.1, 1.0, 0.9,  0.0, 10.0,  1.0, 11.0,
                                         0.0, 10.1, 1.0, 11.1, 0.0, 100.0, 1.0, 101.0};
const std::vector<float> kScores = {0.9, 0.75, 0.6, 0.95, 0.5, 0.3};

TEST(RefNms, SuppressByIouCornerFormat) {
  graph::Node n = makeNode("NonMaxSuppression", 5);
  Tensor boxes = f32({1, 6, 4}, kCornerBoxes);
  Tensor scores = f32({1, 1, 6}, kScores);
  Tensor maxOut = i64({1}, {3});
  Tensor iou = f32({1}, {0.5f});
  Tensor thr = f32({1}, {0.0f});
  Tensor y = run1(n, {&boxes, &scores, &maxOut, &iou, &thr});
  EXPECT_EQ(y.shape(), Shape({3, 3}));
  EXPECT_EQ(vals(y), V({0, 0, 3, 0, 0, 0, 0, 0, 5}));
}

TEST(RefNms, CenterPointFormatAndScoreThreshold) {
  graph::Node n = makeNode("NonMaxSuppression", 5);
  n.attrs.set("center_point_box", graph::Attribute::Int(1));
  Tensor boxes = f32({1, 6, 4}, kBoxes);
  Tensor scores = f32({1, 1, 6}, kScores);
  Tensor maxOut = i64({1}, {3});
  Tensor iou = f32({1}, {0.5f});
  Tensor thr = f32({1}, {0.4f});  // drops box 5 (0.3)
  Tensor y = run1(n, {&boxes, &scores, &maxOut, &iou, &thr});
  EXPECT_EQ(vals(y), V({0, 0, 3, 0, 0, 0}));
}

TEST(RefNms, AbsentMaxOutputMeansNoOutput) {
  graph::Node n = makeNode("NonMaxSuppression", 2);
  Tensor boxes = f32({1, 6, 4}, kCornerBoxes);
  Tensor scores = f32({1, 1, 6}, kScores);
  Tensor y = run1(n, {&boxes, &scores});
  EXPECT_EQ(y.shape(), Shape({0, 3}));
}

TEST(RefNms, NaNScoresAreNeverSelected) {
  // With and without a score threshold: the NaN boxes (0 and 3) are left out, the others
  // come in score order.
  const std::vector<float> scores = {std::nanf(""), 0.75f, 0.6f, -std::nanf(""), 0.5f, 0.3f};
  for (bool threshold : {false, true}) {
    graph::Node n = makeNode("NonMaxSuppression", threshold ? 5 : 4);
    Tensor boxes = f32({1, 6, 4}, kCornerBoxes);
    Tensor sc = f32({1, 1, 6}, scores);
    Tensor maxOut = i64({1}, {6});
    Tensor iou = f32({1}, {0.5f});
    Tensor thr = f32({1}, {0.0f});
    std::vector<const Tensor*> in = {&boxes, &sc, &maxOut, &iou};
    if (threshold) in.push_back(&thr);
    Tensor y = run1(n, in);
    EXPECT_EQ(vals(y), V({0, 0, 1, 0, 0, 4, 0, 0, 5})) << (threshold ? "threshold" : "none");
  }
}

/// Brute-force NMS: repeatedly takes the best remaining box (lowest index on ties), then
/// removes every remaining box overlapping it by more than the threshold.
std::vector<std::array<int64_t, 3>> bruteNms(const std::vector<float>& bx,
                                             const std::vector<float>& sc, int64_t B, int64_t C,
                                             int64_t N, int64_t maxOut, float iouThr,
                                             float scoreThr) {
  auto iou = [&](int64_t b, int64_t i, int64_t j) {
    const float* p = &bx[static_cast<size_t>((b * N + i) * 4)];
    const float* q = &bx[static_cast<size_t>((b * N + j) * 4)];
    const float py1 = std::min(p[0], p[2]), py2 = std::max(p[0], p[2]);
    const float px1 = std::min(p[1], p[3]), px2 = std::max(p[1], p[3]);
    const float qy1 = std::min(q[0], q[2]), qy2 = std::max(q[0], q[2]);
    const float qx1 = std::min(q[1], q[3]), qx2 = std::max(q[1], q[3]);
    const float w = std::min(px2, qx2) - std::max(px1, qx1);
    const float h = std::min(py2, qy2) - std::max(py1, qy1);
    if (w <= 0 || h <= 0) return 0.f;
    const float inter = w * h;
    return inter / ((px2 - px1) * (py2 - py1) + (qx2 - qx1) * (qy2 - qy1) - inter);
  };
  std::vector<std::array<int64_t, 3>> out;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      std::vector<bool> alive(static_cast<size_t>(N));
      for (int64_t i = 0; i < N; ++i)
        alive[static_cast<size_t>(i)] = sc[static_cast<size_t>((b * C + c) * N + i)] > scoreThr;
      for (int64_t taken = 0; taken < maxOut; ++taken) {
        int64_t best = -1;
        for (int64_t i = 0; i < N; ++i)
          if (alive[static_cast<size_t>(i)] &&
              (best < 0 || sc[static_cast<size_t>((b * C + c) * N + i)] >
                               sc[static_cast<size_t>((b * C + c) * N + best)]))
            best = i;
        if (best < 0) break;
        out.push_back({b, c, best});
        for (int64_t i = 0; i < N; ++i)
          if (alive[static_cast<size_t>(i)] && (i == best || iou(b, best, i) > iouThr))
            alive[static_cast<size_t>(i)] = false;
      }
    }
  return out;
}

TEST(RefNms, RandomAgainstBruteForce) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> pos(0.f, 10.f), size(0.5f, 4.f), score(0.f, 1.f);
  for (int trial = 0; trial < 8; ++trial) {
    const int64_t B = 2, C = 3, N = 37;
    std::vector<float> bx, sc;
    for (int64_t i = 0; i < B * N; ++i) {
      const float y = pos(rng), x = pos(rng), h = size(rng), w = size(rng);
      if (i % 3 == 0)  // flipped corners must work too
        bx.insert(bx.end(), {y + h, x + w, y, x});
      else
        bx.insert(bx.end(), {y, x, y + h, x + w});
    }
    for (int64_t i = 0; i < B * C * N; ++i) sc.push_back(std::round(score(rng) * 20.f) / 20.f);
    const int64_t maxOut = 1 + trial * 2;
    const float iouThr = 0.1f * static_cast<float>(trial % 6);
    const float scoreThr = 0.25f;
    graph::Node n = makeNode("NonMaxSuppression", 5);
    Tensor boxes = f32({B, N, 4}, bx);
    Tensor scores = f32({B, C, N}, sc);
    Tensor m = i64({1}, {maxOut});
    Tensor iou = f32({1}, {iouThr});
    Tensor thr = f32({1}, {scoreThr});
    Tensor y = run1(n, {&boxes, &scores, &m, &iou, &thr});
    const auto want = bruteNms(bx, sc, B, C, N, maxOut, iouThr, scoreThr);
    ASSERT_EQ(y.shape(), Shape({static_cast<int64_t>(want.size()), 3})) << "trial " << trial;
    for (size_t i = 0; i < want.size(); ++i)
      for (size_t j = 0; j < 3; ++j)
        EXPECT_EQ(y.getAsInt64(static_cast<int64_t>(i * 3 + j)), want[i][j]) << "row " << i;
  }
}

TEST(RefNms, BuildTimeShapeIsUnknownByThree) {
  graph::Node n = makeNode("NonMaxSuppression", 3);
  Tensor maxOut = i64({1}, {3});
  auto r = inferBuild(n, {iv(DataType::kFloat32, {1, 6, 4}), iv(DataType::kFloat32, {1, 2, 6}),
                          iv(DataType::kInt64, {1}, &maxOut)});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ((*r)[0].shape, Shape({-1, 3}));
  EXPECT_EQ((*r)[0].dtype, DataType::kInt64);
}

TEST(RefNms, BoxesLastDimNotFour_n) {
  graph::Node n = makeNode("NonMaxSuppression", 2);
  Tensor boxes = f32({1, 2, 3}, {0, 0, 1, 0, 0, 1});
  Tensor scores = f32({1, 1, 2}, {0.5, 0.4});
  EXPECT_EQ(runStatus(n, {&boxes, &scores}).code(), ErrorCode::kInvalidModel);
}

TEST(RefNms, BatchMismatch_n) {
  graph::Node n = makeNode("NonMaxSuppression", 2);
  Tensor boxes = f32({1, 1, 4}, {0, 0, 1, 1});
  Tensor scores = f32({2, 1, 1}, {0.5, 0.4});
  EXPECT_EQ(runStatus(n, {&boxes, &scores}).code(), ErrorCode::kInvalidModel);
}

TEST(RefNms, BoxCountMismatch_n) {
  graph::Node n = makeNode("NonMaxSuppression", 2);
  Tensor boxes = f32({1, 1, 4}, {0, 0, 1, 1});
  Tensor scores = f32({1, 1, 2}, {0.5, 0.4});
  EXPECT_EQ(runStatus(n, {&boxes, &scores}).code(), ErrorCode::kInvalidModel);
}

TEST(RefNms, IouThresholdOutOfRange_n) {
  graph::Node n = makeNode("NonMaxSuppression", 4);
  Tensor boxes = f32({1, 1, 4}, {0, 0, 1, 1});
  Tensor scores = f32({1, 1, 1}, {0.5});
  Tensor m = i64({1}, {1});
  Tensor iou = f32({1}, {1.5f});
  EXPECT_EQ(runStatus(n, {&boxes, &scores, &m, &iou}).code(), ErrorCode::kInvalidModel);
}

TEST(RefNms, BadCenterPointBox_n) {
  graph::Node n = makeNode("NonMaxSuppression", 2);
  n.attrs.set("center_point_box", graph::Attribute::Int(2));
  Tensor boxes = f32({1, 1, 4}, {0, 0, 1, 1});
  Tensor scores = f32({1, 1, 1}, {0.5});
  EXPECT_EQ(runStatus(n, {&boxes, &scores}).code(), ErrorCode::kInvalidModel);
}

TEST(RefNms, MaxOutputNotInt64_n) {
  graph::Node n = makeNode("NonMaxSuppression", 3);
  Tensor boxes = f32({1, 1, 4}, {0, 0, 1, 1});
  Tensor scores = f32({1, 1, 1}, {0.5});
  Tensor m = i32({1}, {1});
  EXPECT_EQ(runStatus(n, {&boxes, &scores, &m}).code(), ErrorCode::kInvalidModel);
}

TEST(RefNms, IntegerBoxes_n) {
  graph::Node n = makeNode("NonMaxSuppression", 2);
  Tensor boxes = i32({1, 1, 4}, {0, 0, 1, 1});
  Tensor scores = i32({1, 1, 1}, {1});
  EXPECT_EQ(runStatus(n, {&boxes, &scores}).code(), ErrorCode::kInvalidModel);
}

// ---- NonZero -------------------------------------------------------------------------------

TEST(RefNonZero, TwoDimensional) {
  graph::Node n = makeNode("NonZero", 1);
  Tensor x = f32({2, 3}, {1, 0, 2, 0, 0, -3});
  Tensor y = run1(n, {&x});
  EXPECT_EQ(y.shape(), Shape({2, 3}));
  EXPECT_EQ(vals(y), V({0, 0, 1, 0, 2, 2}));
}

TEST(RefNonZero, BuildTimeAndEmpty) {
  graph::Node n = makeNode("NonZero", 1);
  auto r = inferBuild(n, {iv(DataType::kUInt8, {4, 5, 6})});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0].shape, Shape({3, -1}));
  Tensor x = i32({3}, {0, 0, 0});
  EXPECT_EQ(run1(n, {&x}).shape(), Shape({1, 0}));
}

TEST(RefNonZero, UndefinedInput_n) {
  graph::Node n = makeNode("NonZero", 1);
  graph::InferValue v;
  v.dtype = DataType::kUndefined;
  EXPECT_FALSE(inferBuild(n, {v}).ok());
}

}  // namespace
}  // namespace edgeinfer
