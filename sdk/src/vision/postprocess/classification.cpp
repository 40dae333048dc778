// Classification: optional softmax + top-k (see postprocess.h for the exact arithmetic).
#include <algorithm>
#include <cmath>
#include <limits>

#include "vision/postprocess/common.h"

namespace edgeinfer::vision {

Expected<std::vector<std::vector<Classification>>> classify(const Tensor& scores,
                                                            const ClassifyParams& params) {
  const char* what = "classification scores";
  if (scores.empty()) return Status(ErrorCode::kInvalidArgument, std::string(what) + " is empty");
  const Shape& s = scores.shape();
  const bool rank4 = s.rank() == 4;
  if (!(s.rank() == 2 || (rank4 && s[2] == 1 && s[3] == 1)))
    return Status(ErrorCode::kInvalidArgument, std::string(what) + " " + scores.describe() +
                                                   ": expected [N, C] or [N, C, 1, 1]");
  EI_RETURN_IF_ERROR(detail::checkFloatTensor(scores, what, s.rank()));
  if (params.topK < 1)
    return Status(ErrorCode::kInvalidArgument,
                  "classification topK is " + std::to_string(params.topK) + ", must be >= 1");
  const int64_t n = s[0], c = s[1];
  if (c > std::numeric_limits<int>::max())
    return Status(ErrorCode::kInvalidArgument, std::string(what) + ": too many classes");
  EI_RETURN_IF_ERROR(detail::checkLabels(params.labels, static_cast<int>(c), "classification"));

  const detail::FloatElements v(scores);
  std::vector<std::vector<Classification>> out(static_cast<size_t>(n));
  std::vector<float> p(static_cast<size_t>(c));
  std::vector<int> ids;
  for (int64_t b = 0; b < n; ++b) {
    const float* row = v.data() + b * c;
    ids.clear();
    for (int64_t i = 0; i < c; ++i)
      if (!std::isnan(row[i])) ids.push_back(static_cast<int>(i));
    if (params.applySoftmax && !ids.empty()) {
      float m = row[ids[0]];
      for (int i : ids) m = std::max(m, row[i]);
      float sum = 0.f;
      for (int i : ids) {
        p[static_cast<size_t>(i)] = std::exp(row[i] - m);
        sum += p[static_cast<size_t>(i)];
      }
      for (int i : ids) p[static_cast<size_t>(i)] /= sum;
    } else {
      for (int i : ids) p[static_cast<size_t>(i)] = row[i];
    }
    // A softmax over +inf logits can still make NaN: skip those too.
    ids.erase(std::remove_if(ids.begin(), ids.end(),
                             [&](int i) { return std::isnan(p[static_cast<size_t>(i)]); }),
              ids.end());
    const size_t k = std::min(ids.size(), static_cast<size_t>(params.topK));
    std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(),
                      [&](int a, int bb) {
                        const float pa = p[static_cast<size_t>(a)], pb = p[static_cast<size_t>(bb)];
                        return pa > pb || (pa == pb && a < bb);
                      });
    for (size_t j = 0; j < k; ++j) {
      Classification r;
      r.classId = ids[j];
      r.score = p[static_cast<size_t>(ids[j])];
      if (!params.labels.empty()) r.label = params.labels[static_cast<size_t>(ids[j])];
      out[static_cast<size_t>(b)].push_back(std::move(r));
    }
  }
  return out;
}

}  // namespace edgeinfer::vision
