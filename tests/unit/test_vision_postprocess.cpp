// Vision postprocessing (CPU reference): classification, NMS (hard and weighted), YOLOv5,
// YOLOv8 (decoded and raw DFL), SSD/BlazeFace anchors and decoding, segmentation argmax.
// Hand cases compute the expected values in comments; random cases compare with brute-force
// references written here; negative cases (suffix _n) check each bad input gets a clear Status.
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "edgeinfer/builder.h"
#include "edgeinfer/engine.h"
#include "edgeinfer/tensor.h"
#include "edgeinfer/vision/postprocess.h"
#include "edgeinfer/vision/vision_model.h"

namespace edgeinfer::vision {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();

Tensor f32(const Shape& shape, const std::vector<float>& v) {
  Tensor t = Tensor::zeros(DataType::kFloat32, shape);
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size()) << "test bug: value count";
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

Tensor f16(const Shape& shape, const std::vector<float>& v) {
  Tensor t = Tensor::zeros(DataType::kFloat16, shape);
  EXPECT_EQ(static_cast<size_t>(t.numel()), v.size()) << "test bug: value count";
  for (size_t i = 0; i < v.size(); ++i) t.data<uint16_t>()[i] = floatToHalf(v[i]);
  return t;
}

// Random values already rounded to fp16, so an fp32 and an fp16 tensor hold the same numbers.
std::vector<float> randomHalfValues(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = halfToFloat(floatToHalf(dist(rng)));
  return v;
}

template <typename T>
void expectError(const Expected<T>& r, ErrorCode code, const std::string& needle) {
  ASSERT_FALSE(r.ok()) << "expected an error mentioning '" << needle << "'";
  EXPECT_EQ(r.status().code(), code) << r.status().toString();
  EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().toString();
}

void expectBox(const Box& b, float x1, float y1, float x2, float y2, float tol = 1e-4f) {
  EXPECT_NEAR(b.x1, x1, tol);
  EXPECT_NEAR(b.y1, y1, tol);
  EXPECT_NEAR(b.x2, x2, tol);
  EXPECT_NEAR(b.y2, y2, tol);
}

Detection det(Box b, float score, int cls = 0, int batch = 0) {
  Detection d;
  d.box = b;
  d.score = score;
  d.classId = cls;
  d.batchIndex = batch;
  return d;
}

void expectSameDetections(const std::vector<Detection>& a, const std::vector<Detection>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].classId, b[i].classId) << i;
    EXPECT_EQ(a[i].batchIndex, b[i].batchIndex) << i;
    EXPECT_EQ(a[i].score, b[i].score) << i;
    EXPECT_EQ(a[i].box.x1, b[i].box.x1) << i;
    EXPECT_EQ(a[i].box.y1, b[i].box.y1) << i;
    EXPECT_EQ(a[i].box.x2, b[i].box.x2) << i;
    EXPECT_EQ(a[i].box.y2, b[i].box.y2) << i;
    ASSERT_EQ(a[i].keypoints.size(), b[i].keypoints.size()) << i;
    for (size_t k = 0; k < a[i].keypoints.size(); ++k) {
      EXPECT_EQ(a[i].keypoints[k].x, b[i].keypoints[k].x);
      EXPECT_EQ(a[i].keypoints[k].y, b[i].keypoints[k].y);
    }
  }
}

// ---- brute-force references ------------------------------------------------------------------

double refIou(const Box& a, const Box& b) {
  const double iw = std::max(0.0, double(std::min(a.x2, b.x2)) - std::max(a.x1, b.x1));
  const double ih = std::max(0.0, double(std::min(a.y2, b.y2)) - std::max(a.y1, b.y1));
  const double areaA = std::max(0.0, double(a.x2) - a.x1) * std::max(0.0, double(a.y2) - a.y1);
  const double areaB = std::max(0.0, double(b.x2) - b.x1) * std::max(0.0, double(b.y2) - b.y1);
  const double u = areaA + areaB - iw * ih;
  return u > 0 ? iw * ih / u : 0.0;
}

// Selection form of greedy NMS, O(n^2): repeatedly take the best remaining candidate (highest
// score, lowest index), output it, and delete every remaining one it suppresses.
std::vector<int> refNms(const std::vector<Box>& boxes, const std::vector<float>& scores,
                        const std::vector<int>& cls, float iouThr, float scoreThr, int maxDet,
                        bool agnostic) {
  std::vector<bool> alive(boxes.size());
  for (size_t i = 0; i < boxes.size(); ++i) alive[i] = scores[i] >= scoreThr;
  std::vector<int> out;
  while (static_cast<int>(out.size()) < maxDet) {
    int best = -1;
    for (size_t i = 0; i < boxes.size(); ++i)
      if (alive[i] && (best < 0 || scores[i] > scores[static_cast<size_t>(best)]))
        best = static_cast<int>(i);
    if (best < 0) break;
    out.push_back(best);
    alive[static_cast<size_t>(best)] = false;
    for (size_t i = 0; i < boxes.size(); ++i)
      if (alive[i] && (agnostic || cls.empty() || cls[i] == cls[static_cast<size_t>(best)]) &&
          refIou(boxes[i], boxes[static_cast<size_t>(best)]) > iouThr)
        alive[i] = false;
  }
  return out;
}

std::vector<Box> randomBoxes(std::mt19937& rng, size_t n, float extent) {
  std::uniform_real_distribution<float> pos(0.f, extent), size(1.f, extent / 3.f);
  std::vector<Box> boxes(n);
  for (Box& b : boxes) {
    b.x1 = pos(rng);
    b.y1 = pos(rng);
    b.x2 = b.x1 + size(rng);
    b.y2 = b.y1 + size(rng);
  }
  return boxes;
}

// ==== Classification ===========================================================================

TEST(VisionClassify, SoftmaxTopKHandCase) {
  // logits (0, ln 3, 0, ln 2): exp = (1, 3, 1, 2), sum 7 -> p = (1/7, 3/7, 1/7, 2/7).
  // Top 3: class 1 (3/7), class 3 (2/7), then the tie 1/7 goes to the lower id, class 0.
  ClassifyParams p;
  p.applySoftmax = true;
  p.topK = 3;
  p.labels = {"a", "b", "c", "d"};
  auto r = classify(f32({1, 4}, {0.f, std::log(3.f), 0.f, std::log(2.f)}), p);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 1u);
  const auto& top = (*r)[0];
  ASSERT_EQ(top.size(), 3u);
  EXPECT_EQ(top[0].classId, 1);
  EXPECT_NEAR(top[0].score, 3.f / 7.f, 1e-6f);
  EXPECT_EQ(top[0].label, "b");
  EXPECT_EQ(top[1].classId, 3);
  EXPECT_NEAR(top[1].score, 2.f / 7.f, 1e-6f);
  EXPECT_EQ(top[2].classId, 0);
  EXPECT_NEAR(top[2].score, 1.f / 7.f, 1e-6f);
  EXPECT_EQ(top[2].label, "a");
}

TEST(VisionClassify, ProbabilitiesBatchRank4AndLargeK) {
  // [2, 3, 1, 1] probabilities, no softmax, topK 10 > C: every class, sorted.
  ClassifyParams p;
  p.topK = 10;
  auto r = classify(f32({2, 3, 1, 1}, {0.2f, 0.5f, 0.3f, 0.6f, 0.1f, 0.6f}), p);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 2u);
  ASSERT_EQ((*r)[0].size(), 3u);
  EXPECT_EQ((*r)[0][0].classId, 1);
  EXPECT_EQ((*r)[0][1].classId, 2);
  EXPECT_EQ((*r)[0][2].classId, 0);
  EXPECT_EQ((*r)[1][0].classId, 0);  // 0.6 tie with class 2: lower id first
  EXPECT_EQ((*r)[1][1].classId, 2);
  EXPECT_EQ((*r)[1][2].classId, 1);
  EXPECT_FLOAT_EQ((*r)[1][2].score, 0.1f);
}

TEST(VisionClassify, RandomMatchesBruteForceAndFp16MatchesFp32) {
  const int n = 3, c = 37;
  const std::vector<float> v = randomHalfValues(n * c, -6.f, 6.f, 11);
  ClassifyParams p;
  p.applySoftmax = true;
  p.topK = 7;
  auto r32 = classify(f32({n, c}, v), p);
  auto r16 = classify(f16({n, c}, v), p);
  ASSERT_TRUE(r32.ok() && r16.ok());
  for (int b = 0; b < n; ++b) {
    // Reference softmax in double, full sort.
    std::vector<std::pair<double, int>> ref;
    double m = -1e30, s = 0;
    for (int i = 0; i < c; ++i) m = std::max(m, double(v[size_t(b * c + i)]));
    for (int i = 0; i < c; ++i) s += std::exp(double(v[size_t(b * c + i)]) - m);
    for (int i = 0; i < c; ++i) ref.push_back({std::exp(double(v[size_t(b * c + i)]) - m) / s, i});
    std::sort(ref.begin(), ref.end(), [](auto& a, auto& bb) {
      return a.first > bb.first || (a.first == bb.first && a.second < bb.second);
    });
    ASSERT_EQ((*r32)[size_t(b)].size(), 7u);
    for (size_t k = 0; k < 7; ++k) {
      EXPECT_EQ((*r32)[size_t(b)][k].classId, ref[k].second);
      EXPECT_NEAR((*r32)[size_t(b)][k].score, ref[k].first, 1e-6);
      EXPECT_EQ((*r16)[size_t(b)][k].classId, (*r32)[size_t(b)][k].classId);
      EXPECT_EQ((*r16)[size_t(b)][k].score, (*r32)[size_t(b)][k].score);
    }
  }
}

TEST(VisionClassify, NaNLogitsSkipped_n) {
  // Row 0: NaN at class 1; softmax over (0, ln 3) = (1/4, 3/4). Row 1: all NaN -> no results.
  ClassifyParams p;
  p.applySoftmax = true;
  p.topK = 3;
  auto r = classify(f32({2, 3}, {0.f, kNaN, std::log(3.f), kNaN, kNaN, kNaN}), p);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ((*r)[0].size(), 2u);
  EXPECT_EQ((*r)[0][0].classId, 2);
  EXPECT_NEAR((*r)[0][0].score, 0.75f, 1e-6f);
  EXPECT_EQ((*r)[0][1].classId, 0);
  EXPECT_TRUE((*r)[1].empty());
}

TEST(VisionClassify, WrongRank_n) {
  expectError(classify(f32({1, 2, 3}, std::vector<float>(6)), {}), ErrorCode::kInvalidArgument,
              "expected [N, C] or [N, C, 1, 1]");
  expectError(classify(f32({1, 2, 2, 1}, std::vector<float>(4)), {}), ErrorCode::kInvalidArgument,
              "expected [N, C]");
}

TEST(VisionClassify, IntegerDtype_n) {
  expectError(classify(Tensor::zeros(DataType::kInt32, {1, 4}), {}), ErrorCode::kUnsupported,
              "float32 or float16");
}

TEST(VisionClassify, TopKZero_n) {
  ClassifyParams p;
  p.topK = 0;
  expectError(classify(f32({1, 2}, {0.f, 1.f}), p), ErrorCode::kInvalidArgument, "topK");
}

TEST(VisionClassify, LabelCountMismatch_n) {
  ClassifyParams p;
  p.labels = {"cat"};
  expectError(classify(f32({1, 2}, {0.f, 1.f}), p), ErrorCode::kInvalidArgument,
              "1 labels given for 2 classes");
}

TEST(VisionClassify, EmptyTensor_n) {
  expectError(classify(Tensor(), {}), ErrorCode::kInvalidArgument, "is empty");
}

// ==== NMS ======================================================================================

TEST(VisionNms, OverlapSameClassSuppressedFarKept) {
  // A (0,0,10,10) 0.9; B (1,0,11,10) 0.8: inter 9*10 = 90, union 110, IoU 0.818 > 0.45 ->
  // suppressed. C (50,50,60,60) 0.7 does not overlap -> kept.
  auto r = nmsIndices({{0, 0, 10, 10}, {1, 0, 11, 10}, {50, 50, 60, 60}}, {0.9f, 0.8f, 0.7f}, {},
                      NmsParams{});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  EXPECT_EQ(*r, (std::vector<int>{0, 2}));
}

TEST(VisionNms, ClassAwareKeepsOtherClassAgnosticSuppresses) {
  const std::vector<Box> boxes = {{0, 0, 10, 10}, {1, 0, 11, 10}};
  const std::vector<float> scores = {0.8f, 0.9f};
  NmsParams p;
  auto aware = nmsIndices(boxes, scores, {0, 1}, p);
  ASSERT_TRUE(aware.ok());
  EXPECT_EQ(*aware, (std::vector<int>{1, 0}));  // score order, both kept
  p.classAgnostic = true;
  auto agnostic = nmsIndices(boxes, scores, {0, 1}, p);
  ASSERT_TRUE(agnostic.ok());
  EXPECT_EQ(*agnostic, (std::vector<int>{1}));
}

TEST(VisionNms, IouExactlyAtThresholdIsKept) {
  // A (0,0,3,1), B (1,0,4,1): inter 2, union 4, IoU exactly 0.5 (exact in float).
  const std::vector<Box> boxes = {{0, 0, 3, 1}, {1, 0, 4, 1}};
  NmsParams p;
  p.iouThreshold = 0.5f;  // suppress only when IoU > 0.5
  auto kept = nmsIndices(boxes, {0.9f, 0.8f}, {}, p);
  ASSERT_TRUE(kept.ok());
  EXPECT_EQ(kept->size(), 2u);
  p.iouThreshold = 0.49f;
  auto suppressed = nmsIndices(boxes, {0.9f, 0.8f}, {}, p);
  ASSERT_TRUE(suppressed.ok());
  EXPECT_EQ(*suppressed, (std::vector<int>{0}));
}

TEST(VisionNms, ScoreExactlyAtThresholdIsKept) {
  NmsParams p;
  p.scoreThreshold = 0.5f;
  auto r = nmsIndices({{0, 0, 1, 1}, {5, 5, 6, 6}, {9, 9, 10, 10}},
                      {0.5f, std::nextafter(0.5f, 0.f), 1.0f}, {}, p);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<int>{2, 0}));
}

TEST(VisionNms, TiesGoToLowerIndex) {
  // Identical boxes and scores: index 0 survives, 1 and 2 are suppressed by it; the disjoint
  // boxes 3 and 4 with equal scores come out in index order.
  auto r = nmsIndices({{0, 0, 4, 4}, {0, 0, 4, 4}, {0, 0, 4, 4}, {20, 0, 24, 4}, {10, 0, 14, 4}},
                      {0.6f, 0.6f, 0.6f, 0.6f, 0.6f}, {}, NmsParams{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<int>{0, 3, 4}));
}

TEST(VisionNms, MaxDetectionsAndPerImage) {
  // Two images with the same two overlapping boxes: images never suppress each other; with
  // maxDetections 1 each image keeps only its best.
  std::vector<Detection> c = {det({0, 0, 10, 10}, 0.9f, 0, 1), det({0, 0, 10, 10}, 0.8f, 0, 0),
                              det({30, 0, 40, 10}, 0.7f, 0, 0), det({30, 0, 40, 10}, 0.95f, 0, 1)};
  NmsParams p;
  auto all = nms(c, p);
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].batchIndex, 0);
  EXPECT_FLOAT_EQ((*all)[0].score, 0.8f);
  EXPECT_FLOAT_EQ((*all)[1].score, 0.7f);
  EXPECT_EQ((*all)[2].batchIndex, 1);
  EXPECT_FLOAT_EQ((*all)[2].score, 0.95f);
  p.maxDetections = 1;
  auto one = nms(c, p);
  ASSERT_TRUE(one.ok());
  ASSERT_EQ(one->size(), 2u);
  EXPECT_FLOAT_EQ((*one)[0].score, 0.8f);
  EXPECT_FLOAT_EQ((*one)[1].score, 0.95f);
}

TEST(VisionNms, WeightedHandCase) {
  // A (0,0,10,10) 0.75 and B (2,0,12,10) 0.25: inter 80, union 120, IoU 0.667 > 0.3 -> one
  // cluster. Weighted corners: x1 = (0*.75 + 2*.25) / 1 = 0.5, x2 = (10*.75 + 12*.25) = 10.5,
  // y unchanged; keypoint (4, 4)*.75 + (8, 0)*.25 = (5, 3). Score is A's 0.75.
  // C (100,100,110,110) 0.5 is its own cluster.
  Detection a = det({0, 0, 10, 10}, 0.75f), b = det({2, 0, 12, 10}, 0.25f),
            c = det({100, 100, 110, 110}, 0.5f);
  a.keypoints = {{4, 4, 0.75f}};
  b.keypoints = {{8, 0, 0.25f}};
  c.keypoints = {{105, 105, 0.5f}};
  NmsParams p;
  p.method = NmsMethod::kWeighted;
  p.iouThreshold = 0.3f;
  p.scoreThreshold = 0.1f;
  auto r = nms({b, c, a}, p);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 2u);
  expectBox((*r)[0].box, 0.5f, 0.f, 10.5f, 10.f, 1e-6f);
  EXPECT_FLOAT_EQ((*r)[0].score, 0.75f);
  EXPECT_NEAR((*r)[0].keypoints[0].x, 5.f, 1e-6f);
  EXPECT_NEAR((*r)[0].keypoints[0].y, 3.f, 1e-6f);
  expectBox((*r)[1].box, 100, 100, 110, 110, 1e-6f);
  // Class-aware weighted NMS: B of another class is not merged into A.
  b.classId = 1;
  auto aware = nms({a, b}, p);
  ASSERT_TRUE(aware.ok());
  ASSERT_EQ(aware->size(), 2u);
  expectBox((*aware)[0].box, 0, 0, 10, 10, 0.f);
}

TEST(VisionNms, RandomMatchesBruteForce) {
  std::mt19937 rng(7);
  for (int iter = 0; iter < 40; ++iter) {
    const size_t n = 1 + rng() % 60;
    const std::vector<Box> boxes = randomBoxes(rng, n, 100.f);
    std::vector<float> scores(n);
    std::vector<int> cls(n);
    for (size_t i = 0; i < n; ++i) {
      scores[i] = static_cast<float>(rng() % 20) / 20.f;  // many ties on purpose
      cls[i] = static_cast<int>(rng() % 3);
    }
    NmsParams p;
    p.iouThreshold = 0.1f + 0.1f * static_cast<float>(iter % 8);
    p.scoreThreshold = 0.2f;
    p.maxDetections = 1 + static_cast<int>(rng() % 20);
    p.classAgnostic = iter % 2 == 0;
    auto r = nmsIndices(boxes, scores, cls, p);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(*r, refNms(boxes, scores, cls, p.iouThreshold, p.scoreThreshold, p.maxDetections,
                         p.classAgnostic))
        << "iteration " << iter;
  }
}

TEST(VisionNms, BatchedMatchesPerImageAndFp16) {
  std::mt19937 rng(3);
  const int64_t n = 3, b = 25;
  std::vector<float> bv, sv;
  Tensor ids = Tensor::zeros(DataType::kInt64, {n, b});
  for (int64_t img = 0; img < n; ++img) {
    for (const Box& x : randomBoxes(rng, size_t(b), 60.f))
      for (float c : {x.x1, x.y1, x.x2, x.y2}) bv.push_back(halfToFloat(floatToHalf(c)));
    for (int64_t i = 0; i < b; ++i) {
      sv.push_back(halfToFloat(floatToHalf(static_cast<float>(rng() % 100) / 100.f)));
      ids.data<int64_t>()[img * b + i] = static_cast<int64_t>(rng() % 2);
    }
  }
  NmsParams p;
  p.iouThreshold = 0.3f;
  auto r = batchedNms(f32({n, b, 4}, bv), f32({n, b}, sv), ids, p);
  auto r16 = batchedNms(f16({n, b, 4}, bv), f16({n, b}, sv), ids, p);
  ASSERT_TRUE(r.ok() && r16.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), size_t(n));
  EXPECT_EQ(*r, *r16);
  for (int64_t img = 0; img < n; ++img) {
    std::vector<Box> boxes;
    std::vector<float> scores;
    std::vector<int> cls;
    for (int64_t i = 0; i < b; ++i) {
      const float* q = bv.data() + (img * b + i) * 4;
      boxes.push_back({q[0], q[1], q[2], q[3]});
      scores.push_back(sv[size_t(img * b + i)]);
      cls.push_back(static_cast<int>(ids.data<int64_t>()[img * b + i]));
    }
    EXPECT_EQ((*r)[size_t(img)],
              refNms(boxes, scores, cls, 0.3f, p.scoreThreshold, p.maxDetections, false));
  }
}

TEST(VisionNms, EmptyCandidatesGiveEmptyResult) {
  auto r = nms({}, NmsParams{});
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
  auto i = nmsIndices({}, {}, {}, NmsParams{});
  ASSERT_TRUE(i.ok());
  EXPECT_TRUE(i->empty());
}

TEST(VisionNms, IouThresholdOutOfRange_n) {
  NmsParams p;
  p.iouThreshold = 1.5f;
  expectError(nmsIndices({}, {}, {}, p), ErrorCode::kInvalidArgument, "iouThreshold");
  p.iouThreshold = kNaN;
  expectError(nms({}, p), ErrorCode::kInvalidArgument, "iouThreshold");
}

TEST(VisionNms, ScoreThresholdOutOfRange_n) {
  NmsParams p;
  p.scoreThreshold = -0.1f;
  expectError(nms({}, p), ErrorCode::kInvalidArgument, "scoreThreshold");
}

TEST(VisionNms, MaxDetectionsZero_n) {
  NmsParams p;
  p.maxDetections = 0;
  expectError(nms({}, p), ErrorCode::kInvalidArgument, "maxDetections");
}

TEST(VisionNms, ArraySizeMismatch_n) {
  expectError(nmsIndices({{0, 0, 1, 1}}, {0.5f, 0.6f}, {}, NmsParams{}),
              ErrorCode::kInvalidArgument, "1 boxes, 2 scores");
}

TEST(VisionNms, IndicesWithWeightedMethod_n) {
  NmsParams p;
  p.method = NmsMethod::kWeighted;
  expectError(nmsIndices({{0, 0, 1, 1}}, {0.5f}, {}, p), ErrorCode::kInvalidArgument,
              "hard NMS only");
}

TEST(VisionNms, NegativeBatchIndex_n) {
  expectError(nms({det({0, 0, 1, 1}, 0.5f, 0, -1)}, NmsParams{}), ErrorCode::kInvalidArgument,
              "batchIndex -1");
}

TEST(VisionNms, WeightedKeypointCountMismatch_n) {
  Detection a = det({0, 0, 1, 1}, 0.5f), b = det({0, 0, 1, 1}, 0.6f);
  a.keypoints.resize(2);
  NmsParams p;
  p.method = NmsMethod::kWeighted;
  expectError(nms({a, b}, p), ErrorCode::kInvalidArgument, "different keypoint counts");
}

TEST(VisionNms, NaNScoresAndBoxesDropped_n) {
  // NaN score: fails score >= threshold; NaN coordinate: dropped; neither suppresses others.
  const std::vector<Box> boxes = {{0, 0, 10, 10}, {kNaN, 0, 10, 10}, {0, 0, 10, 10}};
  auto r = nmsIndices(boxes, {kNaN, 0.9f, 0.5f}, {}, NmsParams{});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(*r, (std::vector<int>{2}));
  NmsParams w;
  w.method = NmsMethod::kWeighted;
  auto rw = nms({det(boxes[0], kNaN), det(boxes[1], 0.9f), det(boxes[2], 0.5f)}, w);
  ASSERT_TRUE(rw.ok());
  ASSERT_EQ(rw->size(), 1u);
  expectBox((*rw)[0].box, 0, 0, 10, 10, 0.f);
}

TEST(VisionNms, BatchedWrongBoxDim_n) {
  expectError(
      batchedNms(f32({1, 2, 3}, std::vector<float>(6)), f32({1, 2}, {1, 1}), Tensor(), NmsParams{}),
      ErrorCode::kInvalidArgument, "last dimension must be 4");
}

TEST(VisionNms, BatchedScoreShapeMismatch_n) {
  expectError(batchedNms(f32({1, 2, 4}, std::vector<float>(8)), f32({1, 3}, {1, 1, 1}), Tensor(),
                         NmsParams{}),
              ErrorCode::kInvalidArgument, "do not match boxes");
}

TEST(VisionNms, BatchedClassIdsFloat_n) {
  expectError(
      batchedNms(f32({1, 1, 4}, {0, 0, 1, 1}), f32({1, 1}, {1}), f32({1, 1}, {0}), NmsParams{}),
      ErrorCode::kUnsupported, "int32 or int64");
}

TEST(VisionNms, BatchedZeroBoxes_n) {
  expectError(batchedNms(Tensor::zeros(DataType::kFloat32, {1, 0, 4}),
                         Tensor::zeros(DataType::kFloat32, {1, 0}), Tensor(), NmsParams{}),
              ErrorCode::kInvalidArgument, "empty or unknown dimension");
}

// ==== YOLOv5 ===================================================================================

// [1, 3, 5 + 2]: box 0 (cx 50, cy 50, w 20, h 10) obj .8, cls (.5, .9) -> scores (.4, .72):
// class 1, 0.72, corners (40, 45, 60, 55). Box 1 (52, 50, 20, 10) obj .9 cls (.6, .1) ->
// (.54, .09): class 0, 0.54, corners (42, 45, 62, 55); overlaps box 0 but another class. Box 2
// obj .1 -> every score <= .1 < .25: dropped.
const std::vector<float> kYolo5 = {50,  50,  20,  10, .8f, .5f, .9f, 52,  50, 20, 10,
                                   .9f, .6f, .1f, 10, 10,  4,   4,   .1f, 1,  1};

TEST(VisionYoloV5, HandCase) {
  YoloV5Params p;
  p.numClasses = 2;
  p.labels = {"cat", "dog"};
  auto r = decodeYoloV5(f32({1, 3, 7}, kYolo5), p);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].classId, 1);
  EXPECT_EQ((*r)[0].label, "dog");
  EXPECT_NEAR((*r)[0].score, 0.72f, 1e-6f);
  expectBox((*r)[0].box, 40, 45, 60, 55);
  EXPECT_EQ((*r)[1].classId, 0);
  EXPECT_NEAR((*r)[1].score, 0.54f, 1e-6f);
  expectBox((*r)[1].box, 42, 45, 62, 55);
  // Class-agnostic: box 1 (IoU = 18*10 / (200 + 200 - 180) = 0.818) is suppressed by box 0.
  p.nms.classAgnostic = true;
  auto a = decodeYoloV5(f32({1, 3, 7}, kYolo5), p);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->size(), 1u);
}

TEST(VisionYoloV5, LogitsAndMultiLabel) {
  // obj logit 0 -> 0.5; cls logits ln 3 -> 0.75 and 0 -> 0.5: scores 0.375 and 0.25. With
  // multiLabel both pass 0.25 (>=) and, being different classes, both survive NMS.
  YoloV5Params p;
  p.numClasses = 2;
  p.scoresAreLogits = true;
  p.multiLabel = true;
  auto r = decodeYoloV5(f32({1, 1, 7}, {10, 10, 4, 4, 0.f, std::log(3.f), 0.f}), p);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].classId, 0);
  EXPECT_NEAR((*r)[0].score, 0.375f, 1e-6f);
  EXPECT_EQ((*r)[1].classId, 1);
  EXPECT_NEAR((*r)[1].score, 0.25f, 1e-6f);
  p.multiLabel = false;
  auto single = decodeYoloV5(f32({1, 1, 7}, {10, 10, 4, 4, 0.f, std::log(3.f), 0.f}), p);
  ASSERT_TRUE(single.ok());
  ASSERT_EQ(single->size(), 1u);
  EXPECT_EQ((*single)[0].classId, 0);
}

TEST(VisionYoloV5, LetterboxTransformToFrame) {
  // Frame 200x100 letterboxed into 128x128: scale 0.64, padding top (128 - 64) / 2 = 32.
  // Box 0 in the tensor (40, 45, 60, 55) -> frame x = 40 / .64 = 62.5, y = (45 - 32) / .64 =
  // 20.3125, x2 = 93.75, y2 = 35.9375. Image 1 uses an identity transform with a ROI at (5, 7).
  Transform lb;
  lb.scaleX = lb.scaleY = 0.64f;
  lb.offsetY = 32.f;
  lb.frameWidth = 200.f;
  lb.frameHeight = 100.f;
  Transform roi;
  roi.roiX = 5.f;
  roi.roiY = 7.f;
  std::vector<float> two = kYolo5;
  two.insert(two.end(), kYolo5.begin(), kYolo5.end());
  YoloV5Params p;
  p.numClasses = 2;
  auto r = decodeYoloV5(f32({2, 3, 7}, two), p, {lb, roi});
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 4u);
  expectBox((*r)[0].box, 62.5f, 20.3125f, 93.75f, 35.9375f);
  EXPECT_EQ((*r)[2].batchIndex, 1);
  expectBox((*r)[2].box, 45, 52, 65, 62);
  // A box running off the padding is clipped to the frame: (-10, 0, 20, 40) in the tensor ->
  // x1 -15.6 -> 0, y1 (0 - 32) / .64 = -50 -> 0.
  auto c = decodeYoloV5(f32({1, 1, 7}, {5, 20, 30, 40, 1, 1, 0}), p, {lb});
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->size(), 1u);
  expectBox((*c)[0].box, 0, 0, 31.25f, 12.5f);
}

TEST(VisionYoloV5, Fp16MatchesFp32Random) {
  const int64_t n = 2, b = 40, c = 3;
  std::vector<float> v;
  std::mt19937 rng(5);
  for (int64_t i = 0; i < n * b; ++i) {
    for (float x : randomHalfValues(4, 10.f, 100.f, rng())) v.push_back(x);
    for (float x : randomHalfValues(1 + c, 0.f, 1.f, rng())) v.push_back(x);
  }
  YoloV5Params p;
  p.numClasses = int(c);
  auto a = decodeYoloV5(f32({n, b, 5 + c}, v), p);
  auto h = decodeYoloV5(f16({n, b, 5 + c}, v), p);
  ASSERT_TRUE(a.ok() && h.ok());
  EXPECT_FALSE(a->empty());
  expectSameDetections(*a, *h);
}

TEST(VisionYoloV5, WrongRank_n) {
  expectError(decodeYoloV5(f32({3, 7}, std::vector<float>(21)), YoloV5Params{}),
              ErrorCode::kInvalidArgument, "rank 2, expected 3");
}

TEST(VisionYoloV5, NumClassesMismatch_n) {
  YoloV5Params p;  // 80 classes, tensor has 2
  expectError(decodeYoloV5(f32({1, 3, 7}, kYolo5), p), ErrorCode::kInvalidArgument,
              "holds 2 classes but numClasses is 80");
}

TEST(VisionYoloV5, TooFewColumns_n) {
  YoloV5Params p;
  p.numClasses = 0;
  expectError(decodeYoloV5(f32({1, 1, 5}, {1, 1, 1, 1, 1}), p), ErrorCode::kInvalidArgument,
              "at least 6");
}

TEST(VisionYoloV5, IntegerDtype_n) {
  expectError(decodeYoloV5(Tensor::zeros(DataType::kInt32, {1, 1, 85}), YoloV5Params{}),
              ErrorCode::kUnsupported, "float32 or float16");
}

TEST(VisionYoloV5, TransformCountMismatch_n) {
  YoloV5Params p;
  p.numClasses = 2;
  expectError(decodeYoloV5(f32({1, 3, 7}, kYolo5), p, {Transform{}, Transform{}}),
              ErrorCode::kInvalidArgument, "2 transforms for a batch of 1");
  Transform bad;
  bad.scaleX = 0.f;
  expectError(decodeYoloV5(f32({1, 3, 7}, kYolo5), p, {bad}), ErrorCode::kInvalidArgument,
              "scale must be finite and > 0");
}

TEST(VisionYoloV5, NaNScoresAndBoxes_n) {
  // Box 0: NaN objectness; box 1: NaN class score for class 0 (class 1 at .5*.8 = .4 wins);
  // box 2: NaN width. Only box 1 comes out.
  YoloV5Params p;
  p.numClasses = 2;
  auto r = decodeYoloV5(f32({1, 3, 7}, {10,  10,   4,   4,  kNaN, 1,    1, 30, 30, 4, 4,
                                        .5f, kNaN, .8f, 50, 50,   kNaN, 4, 1,  1,  1}),
                        p);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].classId, 1);
  EXPECT_NEAR((*r)[0].score, 0.4f, 1e-6f);
}

TEST(VisionYoloV5, ScoreThresholdOutOfRange_n) {
  YoloV5Params p;
  p.numClasses = 2;
  p.nms.scoreThreshold = 2.f;
  expectError(decodeYoloV5(f32({1, 3, 7}, kYolo5), p), ErrorCode::kInvalidArgument,
              "scoreThreshold");
}

// ==== YOLOv8 ===================================================================================

TEST(VisionYoloV8, DecodedHandCase) {
  // [1, 4 + 2, 3] channels first. Anchor 0: (20, 20, 10, 10), cls (.3, .6) -> class 1 .6,
  // corners (15, 15, 25, 25). Anchor 1: (21, 20, 10, 10) cls (.5, .1) -> class 0 .5, (16, 15,
  // 26, 25). Anchor 2: cls (.2, .1) < .25 -> dropped.
  const std::vector<float> v = {20, 21, 70, 20,  20,  70,  10,  10,  4,
                                10, 10, 4,  .3f, .5f, .2f, .6f, .1f, .1f};
  YoloV8Params p;
  p.numClasses = 2;
  auto r = decodeYoloV8(f32({1, 6, 3}, v), p);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].classId, 1);
  expectBox((*r)[0].box, 15, 15, 25, 25);
  EXPECT_EQ((*r)[1].classId, 0);
  expectBox((*r)[1].box, 16, 15, 26, 25);
  auto h = decodeYoloV8(f16({1, 6, 3}, v), p);
  ASSERT_TRUE(h.ok());
  ASSERT_EQ(h->size(), 2u);
  EXPECT_NEAR((*h)[0].score, 0.6f, 1e-3f);  // 0.6 is not exact in fp16
}

TEST(VisionYoloV8, RawDflHandCase) {
  // Input 16x16, strides {8, 16}: grids 2x2 (anchors 0-3) and 1x1 (anchor 4) = 5 anchors.
  // regMax 4. Anchor 0, point (0.5, 0.5), stride 8: left and top bins all 0 -> uniform softmax,
  // distance (0+1+2+3)/4 = 1.5; right bins (0,0,100,0) -> 2 (the others weigh e^-100); bottom
  // (0,100,0,0) -> 1. Box: x1 = (0.5-1.5)*8 = -8, y1 = -8, x2 = (0.5+2)*8 = 20, y2 = 12.
  // Class logit 0 -> 0.5. Anchor 4, point (0.5, 0.5), stride 16, all bins 0 -> 1.5 each side:
  // (-16, -16, 32, 32), class logit 1 -> 0.731. IoU = 28*20 / (48*48) = 0.243 < 0.45: both kept,
  // anchor 4 first. Anchors 1-3: class logit -10 -> 4.5e-5, dropped.
  const int na = 5, reg = 4;
  std::vector<float> v(size_t((4 * reg + 1) * na), 0.f);
  auto at = [&](int ch, int a) -> float& { return v[size_t(ch * na + a)]; };
  at(2 * reg + 2, 0) = 100.f;  // right, bin 2
  at(3 * reg + 1, 0) = 100.f;  // bottom, bin 1
  at(4 * reg, 0) = 0.f;
  at(4 * reg, 4) = 1.f;
  for (int a = 1; a <= 3; ++a) at(4 * reg, a) = -10.f;
  YoloV8Params p;
  p.numClasses = 1;
  p.rawDfl = true;
  p.regMax = reg;
  p.strides = {8, 16};
  p.inputWidth = p.inputHeight = 16;
  p.scoresAreLogits = true;
  auto r = decodeYoloV8(f32({1, 4 * reg + 1, na}, v), p);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_NEAR((*r)[0].score, 1.f / (1.f + std::exp(-1.f)), 1e-6f);
  expectBox((*r)[0].box, -16, -16, 32, 32);
  EXPECT_NEAR((*r)[1].score, 0.5f, 1e-6f);
  expectBox((*r)[1].box, -8, -8, 20, 12);
}

TEST(VisionYoloV8, RawDflFp16MatchesFp32Random) {
  const int reg = 8, c = 3;
  YoloV8Params p;
  p.numClasses = c;
  p.rawDfl = true;
  p.regMax = reg;
  p.strides = {8, 16, 32};
  p.inputWidth = 64;
  p.inputHeight = 32;  // grids 4x8 + 2x4 + 1x2 = 42 anchors
  p.scoresAreLogits = true;
  const int na = 42;
  const std::vector<float> v = randomHalfValues(size_t(2 * (4 * reg + c) * na), -4.f, 4.f, 9);
  auto a = decodeYoloV8(f32({2, 4 * reg + c, na}, v), p);
  auto h = decodeYoloV8(f16({2, 4 * reg + c, na}, v), p);
  ASSERT_TRUE(a.ok() && h.ok()) << a.status().toString();
  EXPECT_FALSE(a->empty());
  expectSameDetections(*a, *h);
}

TEST(VisionYoloV8, ChannelsMismatch_n) {
  YoloV8Params p;  // 80 classes
  expectError(decodeYoloV8(f32({1, 6, 3}, std::vector<float>(18)), p), ErrorCode::kInvalidArgument,
              "holds 2 classes but numClasses is 80");
}

TEST(VisionYoloV8, DflAnchorCountMismatch_n) {
  YoloV8Params p;
  p.numClasses = 1;
  p.rawDfl = true;
  p.regMax = 4;
  p.strides = {8, 16};
  p.inputWidth = p.inputHeight = 16;  // 5 anchors, tensor has 6
  expectError(decodeYoloV8(f32({1, 17, 6}, std::vector<float>(17 * 6)), p),
              ErrorCode::kInvalidArgument,
              "has 6 anchors, but strides and input size 16x16 give 5");
}

TEST(VisionYoloV8, DflBadStrideAndRegMax_n) {
  YoloV8Params p;
  p.numClasses = 1;
  p.rawDfl = true;
  p.regMax = 4;
  p.strides = {8, 0};
  p.inputWidth = p.inputHeight = 16;
  expectError(decodeYoloV8(f32({1, 17, 5}, std::vector<float>(17 * 5)), p),
              ErrorCode::kInvalidArgument, "stride 0");
  p.regMax = 0;
  expectError(decodeYoloV8(f32({1, 17, 5}, std::vector<float>(17 * 5)), p),
              ErrorCode::kInvalidArgument, "regMax 0");
}

TEST(VisionYoloV8, LabelsMismatch_n) {
  YoloV8Params p;
  p.numClasses = 2;
  p.labels = {"a", "b", "c"};
  expectError(decodeYoloV8(f32({1, 6, 3}, std::vector<float>(18)), p), ErrorCode::kInvalidArgument,
              "3 labels given for 2 classes");
}

// ==== SSD / BlazeFace ==========================================================================

TEST(VisionSsd, BlazeFaceAnchors) {
  // Front: layer 0 stride 8 -> 16x16 cells x (ratio 1 + interpolated) = 512; layers 1-3 stride
  // 16 merge -> 8x8 cells x 6 = 384. Centres (x + .5) / 16 then (x + .5) / 8; fixed size 1.
  auto front = generateSsdAnchors(blazeFaceFrontParams().anchors);
  ASSERT_TRUE(front.ok()) << front.status().toString();
  ASSERT_EQ(front->size(), 896u);
  EXPECT_FLOAT_EQ((*front)[0].xCenter, 0.03125f);
  EXPECT_FLOAT_EQ((*front)[1].xCenter, 0.03125f);   // 2 anchors per cell
  EXPECT_FLOAT_EQ((*front)[2].xCenter, 0.09375f);   // next column
  EXPECT_FLOAT_EQ((*front)[32].yCenter, 0.09375f);  // next row (16 cells * 2)
  EXPECT_FLOAT_EQ((*front)[512].xCenter, 0.0625f);
  EXPECT_FLOAT_EQ((*front)[517].xCenter, 0.0625f);  // 6 anchors per cell
  EXPECT_FLOAT_EQ((*front)[518].xCenter, 0.1875f);
  EXPECT_FLOAT_EQ((*front)[895].xCenter, 0.9375f);
  EXPECT_FLOAT_EQ((*front)[895].yCenter, 0.9375f);
  EXPECT_FLOAT_EQ((*front)[895].w, 1.f);
  // Back: 256 / 16 = 16x16 x 2 + 256 / 32 = 8x8 x 6 = 896 with the same centres.
  auto back = generateSsdAnchors(blazeFaceBackParams().anchors);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 896u);
  EXPECT_FLOAT_EQ((*back)[0].xCenter, 0.03125f);
  EXPECT_FLOAT_EQ((*back)[512].xCenter, 0.0625f);
}

TEST(VisionSsd, AnchorSizesWhenNotFixed) {
  // One layer: scale = (0.2 + 0.6) / 2 = 0.4. Ratios 1 and 2, then interpolated ratio 1 with
  // scale sqrt(0.4 * 1) = 0.632456. Sizes (w, h): (0.4, 0.4), (0.4*sqrt2, 0.4/sqrt2),
  // (0.632456, 0.632456). Input 16 / stride 8 = 2x2 cells -> 12 anchors.
  SsdAnchorOptions o;
  o.numLayers = 1;
  o.strides = {8};
  o.inputWidth = o.inputHeight = 16;
  o.minScale = 0.2f;
  o.maxScale = 0.6f;
  o.aspectRatios = {1.f, 2.f};
  o.fixedAnchorSize = false;
  auto r = generateSsdAnchors(o);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 12u);
  EXPECT_NEAR((*r)[0].w, 0.4f, 1e-6f);
  EXPECT_NEAR((*r)[1].w, 0.4f * std::sqrt(2.f), 1e-6f);
  EXPECT_NEAR((*r)[1].h, 0.4f / std::sqrt(2.f), 1e-6f);
  EXPECT_NEAR((*r)[2].w, std::sqrt(0.4f), 1e-6f);
  EXPECT_FLOAT_EQ((*r)[11].xCenter, 0.75f);
  EXPECT_FLOAT_EQ((*r)[11].yCenter, 0.75f);
  // Two layers of different strides: scales 0.2 and 0.6 (min + (max - min) * i / 1).
  o.numLayers = 2;
  o.strides = {8, 16};
  o.aspectRatios = {1.f};
  o.interpolatedScaleAspectRatio = 0.f;
  auto two = generateSsdAnchors(o);
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 5u);
  EXPECT_NEAR((*two)[0].w, 0.2f, 1e-6f);
  EXPECT_NEAR((*two)[4].w, 0.6f, 1e-6f);
  EXPECT_FLOAT_EQ((*two)[4].xCenter, 0.5f);
}

// A tiny SSD: input 128, one layer of stride 64 -> 2x2 cells, one fixed-size anchor each, 1
// keypoint (numCoords 6), scales 128.
SsdParams tinySsd() {
  SsdParams p;
  p.anchors.numLayers = 1;
  p.anchors.strides = {64};
  p.anchors.interpolatedScaleAspectRatio = 0.f;
  p.numCoords = 6;
  p.numKeypoints = 1;
  p.nms.scoreThreshold = 0.5f;
  p.nms.iouThreshold = 0.3f;
  p.nms.method = NmsMethod::kWeighted;
  return p;
}

TEST(VisionSsd, DecodeHandCase) {
  // Anchor 3: centre (0.75, 0.75). Row (12.8, -12.8, 32, 64, 0, 12.8):
  //   cx = 12.8/128 + .75 = .85, cy = .65, w = 32/128 = .25, h = .5
  //   box (0.725, 0.4, 0.975, 0.9) * 128 = (92.8, 51.2, 124.8, 115.2)
  //   keypoint (0/128 + .75, 12.8/128 + .75) * 128 = (96, 108.8)
  // Score logit 0 -> sigmoid 0.5 = threshold: kept. Anchor 0 logit 1000 is clipped to 100 ->
  // score 1 (no overflow); its row is all 0 -> box (0.25 +- .0) = empty box at (32, 32).
  // Anchors 1 and 2: logit -5 -> 0.0067, dropped.
  const std::vector<float> boxes = {0, 0, 0, 0, 0, 0, 0,     0,      0,  0,  0, 0,
                                    0, 0, 0, 0, 0, 0, 12.8f, -12.8f, 32, 64, 0, 12.8f};
  const std::vector<float> scores = {1000.f, -5.f, -5.f, 0.f};
  auto r = decodeSsd({f32({1, 4, 6}, boxes)}, {f32({1, 4, 1}, scores)}, tinySsd());
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 2u);
  EXPECT_FLOAT_EQ((*r)[0].score, 1.f);
  expectBox((*r)[0].box, 32, 32, 32, 32);
  EXPECT_FLOAT_EQ((*r)[1].score, 0.5f);
  expectBox((*r)[1].box, 92.8f, 51.2f, 124.8f, 115.2f);
  ASSERT_EQ((*r)[1].keypoints.size(), 1u);
  EXPECT_NEAR((*r)[1].keypoints[0].x, 96.f, 1e-4f);
  EXPECT_NEAR((*r)[1].keypoints[0].y, 108.8f, 1e-4f);
  EXPECT_FLOAT_EQ((*r)[1].keypoints[0].score, 0.5f);

  // The same anchors split over two heads (anchors 0-1 and 2-3) decode identically.
  auto split = decodeSsd({f32({1, 2, 6}, std::vector<float>(boxes.begin(), boxes.begin() + 12)),
                          f32({1, 2, 6}, std::vector<float>(boxes.begin() + 12, boxes.end()))},
                         {f32({1, 2, 1}, {1000.f, -5.f}), f32({1, 2, 1}, {-5.f, 0.f})}, tinySsd());
  ASSERT_TRUE(split.ok());
  expectSameDetections(*r, *split);

  // Mapped to a 256x256 frame (scale 0.5): box doubles, keypoint (192, 217.6).
  Transform t;
  t.scaleX = t.scaleY = 0.5f;
  t.frameWidth = t.frameHeight = 256.f;
  auto f = decodeSsd({f32({1, 4, 6}, boxes)}, {f32({1, 4, 1}, scores)}, tinySsd(), {t});
  ASSERT_TRUE(f.ok());
  expectBox((*f)[1].box, 185.6f, 102.4f, 249.6f, 230.4f, 1e-3f);
  EXPECT_NEAR((*f)[1].keypoints[0].x, 192.f, 1e-3f);
  EXPECT_NEAR((*f)[1].keypoints[0].y, 217.6f, 1e-3f);
}

TEST(VisionSsd, WeightedNmsMergesNeighbours) {
  // Anchors 2 (0.25, 0.75) and 3 (0.75, 0.75) both predict a box of size 64x64: anchor 2 with
  // dx = +0.25 * 128 = 32 -> centre (64, 96); anchor 3 with dx = -0.125 * 128 = -16 ->
  // centre (80, 96). Boxes (32, 64, 96, 128) and (48, 64, 112, 128): IoU 48/80 = 0.6 > 0.3.
  // Scores sigmoid(ln 3) = .75 and sigmoid(ln 1/3) = .25 ... below 0.5, so use threshold 0.2.
  // Weighted: x1 = 32*.75 + 48*.25 = 36, x2 = 100, y unchanged; score 0.75.
  const std::vector<float> boxes = {0,  0, 0,  0,  0, 0, 0,   0, 0,  0,  0, 0,
                                    32, 0, 64, 64, 0, 0, -16, 0, 64, 64, 0, 0};
  SsdParams p = tinySsd();
  p.nms.scoreThreshold = 0.2f;
  auto r = decodeSsd({f32({1, 4, 6}, boxes)},
                     {f32({1, 4, 1}, {-9.f, -9.f, std::log(3.f), std::log(1.f / 3.f)})}, p);
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 1u);
  EXPECT_NEAR((*r)[0].score, 0.75f, 1e-6f);
  expectBox((*r)[0].box, 36, 64, 100, 128, 1e-4f);
  p.nms.method = NmsMethod::kHard;
  auto hard = decodeSsd({f32({1, 4, 6}, boxes)},
                        {f32({1, 4, 1}, {-9.f, -9.f, std::log(3.f), std::log(1.f / 3.f)})}, p);
  ASSERT_TRUE(hard.ok());
  ASSERT_EQ(hard->size(), 1u);
  expectBox((*hard)[0].box, 32, 64, 96, 128, 1e-4f);
}

TEST(VisionSsd, BlazeFaceFp16MatchesFp32Random) {
  SsdParams p = blazeFaceFrontParams();
  p.nms.scoreThreshold = 0.3f;
  const std::vector<float> b0 = randomHalfValues(512 * 16, -20.f, 20.f, 21);
  const std::vector<float> b1 = randomHalfValues(384 * 16, -20.f, 20.f, 22);
  const std::vector<float> s0 = randomHalfValues(512, -3.f, 1.f, 23);
  const std::vector<float> s1 = randomHalfValues(384, -3.f, 1.f, 24);
  auto a = decodeSsd({f32({1, 512, 16}, b0), f32({1, 384, 16}, b1)},
                     {f32({1, 512, 1}, s0), f32({1, 384, 1}, s1)}, p);
  auto h = decodeSsd({f16({1, 512, 16}, b0), f16({1, 384, 16}, b1)},
                     {f16({1, 512, 1}, s0), f16({1, 384, 1}, s1)}, p);
  ASSERT_TRUE(a.ok() && h.ok()) << a.status().toString();
  EXPECT_FALSE(a->empty());
  expectSameDetections(*a, *h);
  for (const Detection& d : *a) EXPECT_EQ(d.keypoints.size(), 6u);
}

TEST(VisionSsd, NumLayersMismatch_n) {
  SsdAnchorOptions o;
  o.numLayers = 3;
  expectError(generateSsdAnchors(o), ErrorCode::kInvalidArgument,
              "numLayers is 3 but 4 strides are given");
}

TEST(VisionSsd, AnchorCountMismatch_n) {
  SsdParams p = blazeFaceFrontParams();
  p.anchors.strides = {8, 16};
  p.anchors.numLayers = 2;  // 512 + 64*2 = 640 anchors, the outputs hold 896
  expectError(decodeSsd({f32({1, 512, 16}, std::vector<float>(512 * 16)),
                         f32({1, 384, 16}, std::vector<float>(384 * 16))},
                        {f32({1, 512, 1}, std::vector<float>(512)),
                         f32({1, 384, 1}, std::vector<float>(384))},
                        p),
              ErrorCode::kInvalidArgument, "hold 896 anchors but the anchor options generate 640");
}

TEST(VisionSsd, NumCoordsMismatch_n) {
  expectError(decodeSsd({f32({1, 4, 5}, std::vector<float>(20))},
                        {f32({1, 4, 1}, std::vector<float>(4))}, tinySsd()),
              ErrorCode::kInvalidArgument, "5 coordinates, numCoords is 6");
  SsdParams p = tinySsd();
  p.numKeypoints = 3;  // needs 10 coords
  expectError(decodeSsd({f32({1, 4, 6}, std::vector<float>(24))},
                        {f32({1, 4, 1}, std::vector<float>(4))}, p),
              ErrorCode::kInvalidArgument, "numCoords 6 >= 4 + 2 * numKeypoints (3)");
}

TEST(VisionSsd, NumClassesMismatch_n) {
  expectError(decodeSsd({f32({1, 4, 6}, std::vector<float>(24))},
                        {f32({1, 4, 2}, std::vector<float>(8))}, tinySsd()),
              ErrorCode::kInvalidArgument, "2 classes, numClasses is 1");
}

TEST(VisionSsd, TensorListMismatch_n) {
  expectError(decodeSsd({f32({1, 4, 6}, std::vector<float>(24))}, {}, tinySsd()),
              ErrorCode::kInvalidArgument, "1 box tensors and 0 score tensors");
  expectError(decodeSsd({f32({1, 4, 6}, std::vector<float>(24))},
                        {f32({1, 3, 1}, std::vector<float>(3))}, tinySsd()),
              ErrorCode::kInvalidArgument, "disagree on batch or anchor count");
  expectError(decodeSsd({f32({4, 6}, std::vector<float>(24))},
                        {f32({1, 4, 1}, std::vector<float>(4))}, tinySsd()),
              ErrorCode::kInvalidArgument, "rank 2, expected 3");
}

TEST(VisionSsd, MissingOutputName_n) {
  std::map<std::string, Tensor> outs = {{"Identity:0", f32({1, 512, 1}, std::vector<float>(512))}};
  expectError(decodeSsdOutputs(outs, blazeFaceFrontParams()), ErrorCode::kNotFound,
              "no output named 'Identity_2:0'");
}

TEST(VisionSsd, BadScalesAndRatios_n) {
  SsdParams p = tinySsd();
  p.xScale = 0.f;
  expectError(decodeSsd({f32({1, 4, 6}, std::vector<float>(24))},
                        {f32({1, 4, 1}, std::vector<float>(4))}, p),
              ErrorCode::kInvalidArgument, "scales must be finite and > 0");
  SsdAnchorOptions o;
  o.aspectRatios = {1.f, -2.f};
  expectError(generateSsdAnchors(o), ErrorCode::kInvalidArgument, "aspect ratio");
  o = SsdAnchorOptions{};
  o.minScale = 0.9f;  // > maxScale 0.75
  expectError(generateSsdAnchors(o), ErrorCode::kInvalidArgument, "minScale <= maxScale");
}

TEST(VisionSsd, NaNScoresAndRegressors_n) {
  // Anchor 0: NaN score (dropped); anchor 1: score 1 but NaN width (dropped); anchor 3 valid.
  std::vector<float> boxes(24, 0.f);
  boxes[6 + 2] = kNaN;
  auto r =
      decodeSsd({f32({1, 4, 6}, boxes)}, {f32({1, 4, 1}, {kNaN, 10.f, -10.f, 10.f})}, tinySsd());
  ASSERT_TRUE(r.ok()) << r.status().toString();
  ASSERT_EQ(r->size(), 1u);
  expectBox((*r)[0].box, 96, 96, 96, 96);
}

// ==== Segmentation =============================================================================

TEST(VisionSegmentation, ArgmaxHandCase) {
  // [1, 3, 2, 2]: pixel 0 values (1, 5, 2) -> 1; pixel 1 (3, 3, 0) tie -> 0; pixel 2
  // (0, 1, 7) -> 2; pixel 3 (NaN, 2, 2) -> NaN never wins, tie -> 1.
  const std::vector<float> v = {1, 3, 0, kNaN, 5, 3, 1, 2, 2, 0, 7, 2};
  auto u8 = segmentationArgmax(f32({1, 3, 2, 2}, v));
  ASSERT_TRUE(u8.ok()) << u8.status().toString();
  EXPECT_EQ(u8->shape(), (Shape{1, 2, 2}));
  EXPECT_EQ(u8->dtype(), DataType::kUInt8);
  const uint8_t* m = u8->data<uint8_t>();
  EXPECT_EQ(std::vector<int>(m, m + 4), (std::vector<int>{1, 0, 2, 1}));
  auto i32 = segmentationArgmax(f16({1, 3, 2, 2}, v), DataType::kInt32);
  ASSERT_TRUE(i32.ok());
  const int32_t* q = i32->data<int32_t>();
  EXPECT_EQ(std::vector<int>(q, q + 4), (std::vector<int>{1, 0, 2, 1}));
}

TEST(VisionSegmentation, RandomMatchesBruteForce) {
  const int64_t n = 2, c = 5, h = 7, w = 13;
  const std::vector<float> v = randomHalfValues(size_t(n * c * h * w), -3.f, 3.f, 31);
  auto r = segmentationArgmax(f32({n, c, h, w}, v), DataType::kInt32);
  auto r16 = segmentationArgmax(f16({n, c, h, w}, v), DataType::kInt32);
  ASSERT_TRUE(r.ok() && r16.ok());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t i = 0; i < h * w; ++i) {
      int best = 0;
      for (int k = 1; k < c; ++k)
        if (v[size_t((b * c + k) * h * w + i)] > v[size_t((b * c + best) * h * w + i)]) best = k;
      EXPECT_EQ(r->data<int32_t>()[b * h * w + i], best);
      EXPECT_EQ(r16->data<int32_t>()[b * h * w + i], best);
    }
}

TEST(VisionSegmentation, WrongRank_n) {
  expectError(segmentationArgmax(f32({3, 2, 2}, std::vector<float>(12))),
              ErrorCode::kInvalidArgument, "rank 3, expected 4");
}

TEST(VisionSegmentation, TooManyClassesForUint8_n) {
  expectError(segmentationArgmax(Tensor::zeros(DataType::kFloat32, {1, 300, 1, 1})),
              ErrorCode::kInvalidArgument, "300 classes do not fit a uint8");
}

TEST(VisionSegmentation, BadOutputType_n) {
  expectError(segmentationArgmax(f32({1, 2, 1, 1}, {0, 1}), DataType::kFloat32),
              ErrorCode::kUnsupported, "must be uint8 or int32");
}

TEST(VisionSegmentation, AllNaNPixel_n) {
  auto r = segmentationArgmax(f32({1, 2, 1, 1}, {kNaN, kNaN}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->data<uint8_t>()[0], 0);
}

// One channel: a binary map at the threshold (strictly above it), NaN background; more
// channels: the argmax, the threshold unused.
TEST(VisionSegmentation, OneChannelIsThresholded) {
  SegmentationParams p;
  p.threshold = 0.3f;
  const std::vector<float> v = {0.1f, 0.3f, 0.31f, kNaN, 0.9f, -2.f};
  auto u8 = segmentationClasses(f32({2, 1, 1, 3}, v), p);
  ASSERT_TRUE(u8.ok()) << u8.status().toString();
  EXPECT_EQ(u8->shape(), (Shape{2, 1, 3}));
  const uint8_t* m = u8->data<uint8_t>();
  EXPECT_EQ(std::vector<int>(m, m + 6), (std::vector<int>{0, 0, 1, 0, 1, 0}));
  auto i32 = segmentationClasses(f16({2, 1, 1, 3}, v), p, DataType::kInt32);
  ASSERT_TRUE(i32.ok()) << i32.status().toString();
  EXPECT_EQ(i32->data<int32_t>()[0], 0);
  EXPECT_EQ(i32->data<int32_t>()[2], 1);
  EXPECT_EQ(i32->data<int32_t>()[3], 0);
  EXPECT_EQ(i32->data<int32_t>()[4], 1);
  p.threshold = 5.f;  // two channels: argmax whatever the threshold
  auto two = segmentationClasses(f32({1, 2, 1, 1}, {0.2f, 0.1f}), p);
  ASSERT_TRUE(two.ok());
  EXPECT_EQ(two->data<uint8_t>()[0], 0);
  auto two2 = segmentationClasses(f32({1, 2, 1, 1}, {0.1f, 0.2f}), p);
  ASSERT_TRUE(two2.ok());
  EXPECT_EQ(two2->data<uint8_t>()[0], 1);
}

TEST(VisionSegmentation, OneChannelBadInput_n) {
  SegmentationParams p;
  expectError(segmentationClasses(f32({1, 1, 4}, std::vector<float>(4)), p),
              ErrorCode::kInvalidArgument, "rank 3, expected 4");
  expectError(segmentationClasses(f32({1, 1, 1, 1}, {0.f}), p, DataType::kFloat32),
              ErrorCode::kUnsupported, "must be uint8 or int32");
}

// ==== BlazeFace end to end on the CPU engine ===================================================

std::string modelPath(const std::string& file) {
  // EDGEINFER_MODELS_DIR overrides; else <repo>/models, the repo root being the test data dir
  // (<repo>/tests/data) with "/tests/data" removed.
  if (const char* env = std::getenv("EDGEINFER_MODELS_DIR"))
    return std::string(env) + "/blazeface/" + file;
  std::string root = EDGEINFER_TEST_DATA_DIR;
  const std::string suffix = "/tests/data";
  if (root.size() >= suffix.size() &&
      root.compare(root.size() - suffix.size(), suffix.size(), suffix) == 0)
    root.resize(root.size() - suffix.size());
  return root + "/models/blazeface/" + file;
}

void runBlazeFace(const std::string& file, int size, const SsdParams& params) {
  const std::string path = modelPath(file);
  struct stat st {};
  if (stat(path.c_str(), &st) != 0)
    GTEST_SKIP() << path << " is absent: run models/fetch.sh blazeface to fetch it";
  BuilderConfig cfg;
  cfg.backend = Backend::kCpu;
  auto engine = Builder::buildFromFile(path, cfg);
  ASSERT_TRUE(engine.ok()) << engine.status().toString();
  auto ctx = (*engine)->createExecutionContext();
  ASSERT_TRUE(ctx.ok()) << ctx.status().toString();
  // Synthetic NHWC input in [-1, 1]: a bright disc on a dark ramp.
  Tensor in = Tensor::zeros(DataType::kFloat32, {1, size, size, 3});
  for (int y = 0; y < size; ++y)
    for (int x = 0; x < size; ++x) {
      const float dx = float(x - size / 2), dy = float(y - size / 2);
      const bool disc = dx * dx + dy * dy < float(size * size) / 10.f;
      for (int c = 0; c < 3; ++c)
        in.data<float>()[(y * size + x) * 3 + c] =
            disc ? 0.8f - 0.1f * float(c) : -1.f + float(x) / float(size);
    }
  auto outs = (*ctx)->run({{"input:0", in}});
  ASSERT_TRUE(outs.ok()) << outs.status().toString();
  // The outputs the params name, with the documented shapes.
  EXPECT_EQ(outs->at("Identity:0").shape(), (Shape{1, 512, 1}));
  EXPECT_EQ(outs->at("Identity_1:0").shape(), (Shape{1, 384, 1}));
  EXPECT_EQ(outs->at("Identity_2:0").shape(), (Shape{1, 512, 16}));
  EXPECT_EQ(outs->at("Identity_3:0").shape(), (Shape{1, 384, 16}));

  // Threshold 0 so the decoder sees every anchor whatever this input scores; map to a 640x480
  // frame letterboxed into the square input.
  SsdParams p = params;
  p.nms.scoreThreshold = 0.f;
  Transform t;
  t.scaleX = t.scaleY = float(size) / 640.f;
  t.offsetY = (float(size) - 480.f * t.scaleY) / 2.f;
  t.frameWidth = 640.f;
  t.frameHeight = 480.f;
  auto dets = decodeSsdOutputs(*outs, p, {t});
  ASSERT_TRUE(dets.ok()) << dets.status().toString();
  ASSERT_FALSE(dets->empty());
  EXPECT_LE(dets->size(), size_t(p.nms.maxDetections));
  for (size_t i = 0; i < dets->size(); ++i) {
    const Detection& d = (*dets)[i];
    EXPECT_GE(d.score, 0.f);
    EXPECT_LE(d.score, 1.f);
    if (i > 0) {
      EXPECT_LE(d.score, (*dets)[i - 1].score);
    }
    EXPECT_EQ(d.batchIndex, 0);
    EXPECT_EQ(d.classId, 0);
    EXPECT_TRUE(d.box.x1 >= 0.f && d.box.x1 <= d.box.x2 && d.box.x2 <= 640.f) << i;
    EXPECT_TRUE(d.box.y1 >= 0.f && d.box.y1 <= d.box.y2 && d.box.y2 <= 480.f) << i;
    ASSERT_EQ(d.keypoints.size(), 6u);
    for (const Keypoint& k : d.keypoints) EXPECT_TRUE(std::isfinite(k.x) && std::isfinite(k.y));
  }
  // With the real threshold (0.5) the result is a subset of plausible size, no crash.
  auto strict = decodeSsdOutputs(*outs, params, {t});
  ASSERT_TRUE(strict.ok());
  EXPECT_LE(strict->size(), dets->size());
}

TEST(VisionBlazeFace, FrontModelEndToEnd) {
  runBlazeFace("blazeface_front_128.onnx", 128, blazeFaceFrontParams());
}

TEST(VisionBlazeFace, BackModelEndToEnd) {
  runBlazeFace("blazeface_back_256.onnx", 256, blazeFaceBackParams());
}

// ---- The SSD output view (what the decoder reads, for INT8 reports) ----------------------------

/// Two heads' worth of outputs: scores [1, A, 1] and boxes [1, A, 4].
std::map<std::string, Tensor> ssdOutputs(const std::vector<float>& scores,
                                         const std::vector<float>& boxes) {
  const auto a = static_cast<int64_t>(scores.size());
  Tensor s = Tensor::zeros(DataType::kFloat32, Shape{1, a, 1});
  Tensor b = Tensor::zeros(DataType::kFloat32, Shape{1, a, 4});
  std::copy(scores.begin(), scores.end(), s.data<float>());
  std::copy(boxes.begin(), boxes.end(), b.data<float>());
  return {{"scores", s}, {"boxes", b}};
}

SsdParams viewParams() {
  SsdParams p;
  p.numClasses = 1;
  p.scoreOutputs = {"scores"};
  p.boxOutputs = {"boxes"};
  return p;
}

TEST(VisionSsdOutputView, BackgroundAnchorsCountForNothingAndFacesFully) {
  // Anchor 0: background (logit -60 against -40 quantized: far apart, both far below the
  // threshold); anchor 1: a face (logit 3). Boxes differ by 8 on the background anchor, 1 on
  // the face's.
  auto ref = ssdOutputs({-60.f, 3.f}, {10, 10, 10, 10, 5, 5, 5, 5});
  auto got = ssdOutputs({-40.f, 3.f}, {18, 10, 10, 10, 6, 5, 5, 5});
  ASSERT_TRUE(ssdOutputView(viewParams(), ref, got).ok());
  const float* rs = ref.at("scores").data<float>();
  const float* gs = got.at("scores").data<float>();
  EXPECT_NEAR(rs[0], 0.f, 1e-12);
  EXPECT_NEAR(gs[0], 0.f, 1e-12);
  EXPECT_NEAR(rs[1], 1.f / (1.f + std::exp(-3.f)), 1e-6);
  const float* rb = ref.at("boxes").data<float>();
  const float* gb = got.at("boxes").data<float>();
  EXPECT_LT(std::fabs(gb[0] - rb[0]), 1e-10);                      // background: nothing
  EXPECT_NEAR(gb[4] - rb[4], 1.f / (1.f + std::exp(-3.f)), 1e-6);  // face: weighted by its score
  // Clipping as the decoder does: a logit of 1000 reads as 100.
  auto r2 = ssdOutputs({1000.f}, {1, 1, 1, 1});
  auto g2 = ssdOutputs({1000.f}, {1, 1, 1, 1});
  ASSERT_TRUE(ssdOutputView(viewParams(), r2, g2).ok());
  EXPECT_NEAR(r2.at("scores").data<float>()[0], 1.f, 1e-6);
}

TEST(VisionSsdOutputView, OutputsThatDoNotFit_n) {
  auto ref = ssdOutputs({0.f, 1.f}, {1, 1, 1, 1, 1, 1, 1, 1});
  {
    auto r = ref, g = ref;
    r.erase("boxes");
    const Status s = ssdOutputView(viewParams(), r, g);
    EXPECT_EQ(s.code(), ErrorCode::kNotFound);
    EXPECT_NE(s.message().find("'boxes'"), std::string::npos) << s.toString();
  }
  {
    auto r = ssdOutputs({0.f, 1.f, 2.f}, {});  // 3 anchors, 5 box values
    r["boxes"] = Tensor::zeros(DataType::kFloat32, Shape{1, 5});
    auto g = ssdOutputs({0.f, 1.f, 2.f}, {});
    g["boxes"] = Tensor::zeros(DataType::kFloat32, Shape{1, 5});
    const Status s = ssdOutputView(viewParams(), r, g);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(s.message().find("same anchors"), std::string::npos) << s.toString();
  }
  {
    auto r = ref, g = ref;
    g["scores"] = Tensor::zeros(DataType::kFloat16, Shape{1, 2, 1});
    const Status s = ssdOutputView(viewParams(), r, g);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(s.message().find("float32"), std::string::npos) << s.toString();
  }
  {
    SsdParams p = viewParams();
    p.boxOutputs.push_back("boxes2");
    auto r = ref, g = ref;
    const Status s = ssdOutputView(p, r, g);
    EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  }
}

// ==== Agreement of quantized outputs with FP32 (resultAgreement) ===============================

// YOLOv8, [1, 4 + 2, 3] as in VisionYoloV8.DecodedHandCase: FP32 finds class 1 at (15, 15, 25,
// 25) and class 0 at (16, 15, 26, 25); `edit` changes the values first.
std::map<std::string, Tensor> yoloOutputs(const std::function<void(std::vector<float>&)>& edit) {
  std::vector<float> v = {20, 21, 70, 20,  20,  70,  10,  10,  4,
                          10, 10, 4,  .3f, .5f, .2f, .6f, .1f, .1f};
  if (edit) edit(v);
  return {{"out", f32({1, 6, 3}, v)}};
}

ModelConfig yoloConfig() {
  ModelConfig c;
  c.decoder = DecoderType::kYoloV8;
  c.outputTensor = "out";
  c.yolov8.numClasses = 2;
  return c;
}

TEST(VisionResultAgreement, DetectionsMatchedOneToOneAtTheIoU) {
  const ModelConfig c = yoloConfig();
  const auto ref = yoloOutputs(nullptr);
  const auto agree = [&](const std::map<std::string, Tensor>& q, float iou = 0.9f) {
    auto a = resultAgreement(c, ref, q, iou);
    EXPECT_TRUE(a.ok()) << a.status().toString();
    return a.ok() ? std::make_pair(a->matched, a->total) : std::make_pair(int64_t{-1}, int64_t{-1});
  };
  EXPECT_EQ(agree(ref), std::make_pair(int64_t{2}, int64_t{2}));
  // Anchor 0's box 2 px to the right: IoU 80 / 120 = 0.67, a miss and an extra box at 0.9 ...
  const auto moved = yoloOutputs([](std::vector<float>& v) { v[0] = 22; });
  EXPECT_EQ(agree(moved), std::make_pair(int64_t{1}, int64_t{3}));
  // ... a match at 0.6.
  EXPECT_EQ(agree(moved, 0.6f), std::make_pair(int64_t{2}, int64_t{2}));
  // Anchor 1 under the score threshold: FP32's detection lost.
  EXPECT_EQ(agree(yoloOutputs([](std::vector<float>& v) { v[13] = .1f; })),
            std::make_pair(int64_t{1}, int64_t{2}));
  // Anchor 2 over it: a detection FP32 does not give (its box overlaps none of FP32's enough).
  EXPECT_EQ(agree(yoloOutputs([](std::vector<float>& v) { v[14] = .9f; })),
            std::make_pair(int64_t{2}, int64_t{3}));
  // Anchor 0 as class 0: same box, other class, no match; and NMS of class 0 now drops anchor
  // 1 (IoU 0.82 with anchor 0), whose box the class-0 one does not match at 0.9 either.
  EXPECT_EQ(agree(yoloOutputs([](std::vector<float>& v) {
              v[12] = .7f;
              v[15] = .1f;
            })),
            std::make_pair(int64_t{0}, int64_t{3}));
}

TEST(VisionResultAgreement, ClassifierTop1AndSegmentationPixels) {
  ModelConfig c;
  c.decoder = DecoderType::kClassification;
  c.outputTensor = "prob";
  c.classify.topK = 5;  // the agreement looks at the first only
  const std::map<std::string, Tensor> ref = {
      {"prob", f32({3, 4}, {.7f, .1f, .1f, .1f, .1f, .6f, .2f, .1f, .1f, .1f, .5f, .3f})}};
  const std::map<std::string, Tensor> q = {
      {"prob", f32({3, 4}, {.6f, .2f, .1f, .1f, .1f, .5f, .3f, .1f, .1f, .1f, .3f, .5f})}};
  auto a = resultAgreement(c, ref, q);
  ASSERT_TRUE(a.ok()) << a.status().toString();
  EXPECT_EQ(a->matched, 2);
  EXPECT_EQ(a->total, 3);

  ModelConfig seg;
  seg.decoder = DecoderType::kSegmentation;
  seg.outputTensor = "logits";
  // [1, 2 classes, 2, 2]: pixel 3 changes class.
  const std::map<std::string, Tensor> sr = {
      {"logits", f32({1, 2, 2, 2}, {1, 1, 0, 2, 0, 0, 1, 1})}};
  const std::map<std::string, Tensor> sq = {
      {"logits", f32({1, 2, 2, 2}, {1, 1, 0, 0, 0, 0, 1, 1})}};
  auto b = resultAgreement(seg, sr, sq);
  ASSERT_TRUE(b.ok()) << b.status().toString();
  EXPECT_EQ(b->matched, 3);
  EXPECT_EQ(b->total, 4);
}

TEST(VisionResultAgreement, OutputsTheDecoderCannotRead_n) {
  const ModelConfig c = yoloConfig();
  const auto ref = yoloOutputs(nullptr);
  {
    std::map<std::string, Tensor> none;
    auto a = resultAgreement(c, ref, none);
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.status().code(), ErrorCode::kNotFound);
    EXPECT_NE(a.status().message().find("'out'"), std::string::npos) << a.status().toString();
  }
  {
    const std::map<std::string, Tensor> wrong = {{"out", f32({1, 5, 3}, std::vector<float>(15))}};
    EXPECT_FALSE(resultAgreement(c, wrong, wrong).ok()) << "3 classes' channels for 2";
  }
  for (float iou : {0.f, -1.f, 1.5f}) {
    auto a = resultAgreement(c, ref, ref, iou);
    ASSERT_FALSE(a.ok()) << iou;
    EXPECT_EQ(a.status().code(), ErrorCode::kInvalidArgument);
  }
  ModelConfig seg;
  seg.decoder = DecoderType::kSegmentation;
  seg.outputTensor = "logits";
  auto a = resultAgreement(seg, {{"logits", f32({1, 2, 1, 2}, {0, 1, 1, 0})}},
                           {{"logits", f32({1, 2, 2, 1}, {0, 1, 1, 0})}});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("differ in shape"), std::string::npos)
      << a.status().toString();
}

TEST(VisionResultAgreement, SetOnCalibrationOptions) {
  CalibrationOptions o;
  setResultAgreement(yoloConfig(), &o, 0.98);
  ASSERT_TRUE(o.agreement);
  EXPECT_EQ(o.minAgreement, 0.98);
  EXPECT_NE(o.agreementName.find("IoU >= 0.9"), std::string::npos);
  const auto ref = yoloOutputs(nullptr);
  auto a = o.agreement(ref, ref);
  ASSERT_TRUE(a.ok()) << a.status().toString();
  EXPECT_EQ(a->share(), 1.0);
}

}  // namespace
}  // namespace edgeinfer::vision
