// The calibrators: from a histogram of |x| to a clipping threshold (amax), and per-channel
// weight scales. See calibration.h for what each method means; the arithmetic is here.
#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "edgeinfer/calibration.h"

namespace edgeinfer {
namespace {

/// Bins TensorRT's entropy calibrator quantizes a candidate distribution into (int8: 128
/// non-negative levels), and the first candidate threshold (in histogram bins).
constexpr int kEntropyLevels = 128;

/// TensorRT/MXNet's smoothing: every empty bin gets `eps`, taken evenly from the others, so
/// that KL(P || Q) stays finite where Q has no mass and P has. False if `d` is all zeros.
bool smooth(std::vector<double>& d, double eps = 1e-4) {
  size_t zeros = 0;
  for (double v : d) zeros += v <= 0;
  if (zeros == d.size()) return false;
  const double take = eps * static_cast<double>(zeros) / static_cast<double>(d.size() - zeros);
  for (double& v : d) v = v <= 0 ? eps : std::max(v - take, eps * 1e-3);
  return true;
}

/// KL(P || Q) of two unnormalised distributions of equal length, Q > 0 everywhere.
double klDivergence(const std::vector<double>& p, const std::vector<double>& q) {
  double sp = 0, sq = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    sp += p[i];
    sq += q[i];
  }
  double kl = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0) continue;
    const double pi = p[i] / sp, qi = q[i] / sq;
    kl += pi * std::log(pi / qi);
  }
  return kl;
}

/// TensorRT's entropy calibration, as NVIDIA's "8-bit Inference with TensorRT" (GTC 2017)
/// describes it and MXNet's _get_optimal_threshold implements it. For each candidate threshold
/// of i bins (128 .. all): P = the first i bins with the count of every bin beyond folded into
/// bin i - 1 (the clipped values); Q = the first i bins (without the clipped values) merged
/// into 128 levels of i / 128 bins (the last level takes the rest), each level's count spread
/// evenly over the bins where P is not empty; both smoothed; the candidate with the least
/// KL(P || Q) wins (the last one on ties) and its upper edge is the threshold. As in
/// pytorch-quantization, bin 0 first takes bin 1's count, so a spike of exact zeros (ReLU)
/// does not dominate.
double entropyAmax(const AbsHistogram& h) {
  std::vector<double> bins = h.counts();
  const int n = static_cast<int>(bins.size());
  if (n > 1) bins[0] = bins[1];
  std::vector<double> tailFrom(static_cast<size_t>(n) + 1, 0.0);  // sum of bins[i..n)
  for (int i = n - 1; i >= 0; --i)
    tailFrom[static_cast<size_t>(i)] =
        tailFrom[static_cast<size_t>(i) + 1] + bins[static_cast<size_t>(i)];
  double best = std::numeric_limits<double>::infinity();
  int bestI = n;
  std::vector<double> p, q;
  for (int i = kEntropyLevels; i <= n; ++i) {
    const auto ui = static_cast<size_t>(i);
    p.assign(bins.begin(), bins.begin() + i);
    p[ui - 1] += tailFrom[ui];
    q.assign(ui, 0.0);
    const int merged = i / kEntropyLevels;
    for (int level = 0; level < kEntropyLevels; ++level) {
      const int start = level * merged;
      const int stop = level == kEntropyLevels - 1 ? i : start + merged;
      double sum = 0;
      int nonEmpty = 0;
      for (int j = start; j < stop; ++j) {
        sum += bins[static_cast<size_t>(j)];
        if (p[static_cast<size_t>(j)] > 0) ++nonEmpty;
      }
      if (nonEmpty > 0)
        for (int j = start; j < stop; ++j)
          if (p[static_cast<size_t>(j)] > 0) q[static_cast<size_t>(j)] = sum / nonEmpty;
    }
    if (!smooth(p) || !smooth(q)) continue;
    const double kl = klDivergence(p, q);
    if (kl <= best) {
      best = kl;
      bestI = i;
    }
  }
  if (!std::isfinite(best)) return h.maxAbs();  // nothing to compare: keep everything
  return std::min(h.maxAbs(), bestI * h.binWidth());
}

/// The smallest threshold below which `percentile` % of the values lie, interpolated linearly
/// inside the bin where the cumulative count crosses it.
double percentileAmax(const AbsHistogram& h, double percentile) {
  const double target = h.total() * percentile / 100.0;
  double cum = 0;
  const auto& c = h.counts();
  for (size_t b = 0; b < c.size(); ++b) {
    if (c[b] > 0 && cum + c[b] >= target) {
      const double frac = std::clamp((target - cum) / c[b], 0.0, 1.0);
      return std::min(h.maxAbs(), (static_cast<double>(b) + frac) * h.binWidth());
    }
    cum += c[b];
  }
  return h.maxAbs();
}

/// Symmetric int8 fake quantization of a magnitude with clipping threshold t: the value the
/// dequantized int8 represents (levels 0..127 of t / 127).
double fakeQuantMagnitude(double x, double t) {
  if (t <= 0) return 0;
  const double s = t / 127.0;
  return std::min(std::nearbyint(x / s), 127.0) * s;
}

/// The threshold with the least expected squared error over the histogram (each bin's values
/// taken at its centre): candidates are the upper edges of bins 128 .. all, as
/// pytorch-quantization's _compute_amax_mse, so it never clips more than the first 1/16 of the
/// range would.
double mseAmax(const AbsHistogram& h) {
  const auto& c = h.counts();
  const int n = static_cast<int>(c.size());
  const double w = h.binWidth();
  double best = std::numeric_limits<double>::infinity();
  double bestT = h.maxAbs();
  for (int i = std::min(kEntropyLevels, n); i <= n; ++i) {
    const double t = i * w;
    double err = 0;
    for (int b = 0; b < n; ++b) {
      if (c[static_cast<size_t>(b)] <= 0) continue;
      const double x = (b + 0.5) * w;
      const double d = x - fakeQuantMagnitude(x, t);
      err += c[static_cast<size_t>(b)] * d * d;
    }
    if (err < best) {
      best = err;
      bestT = t;
    }
  }
  return std::min(h.maxAbs(), bestT);
}

}  // namespace

const char* calibrationMethodName(CalibrationMethod m) {
  switch (m) {
    case CalibrationMethod::kEntropy:
      return "entropy";
    case CalibrationMethod::kMinMax:
      return "minmax";
    case CalibrationMethod::kPercentile:
      return "percentile";
    case CalibrationMethod::kMse:
      return "mse";
  }
  return "?";
}

Expected<CalibrationMethod> parseCalibrationMethod(const std::string& name) {
  for (CalibrationMethod m : {CalibrationMethod::kEntropy, CalibrationMethod::kMinMax,
                              CalibrationMethod::kPercentile, CalibrationMethod::kMse})
    if (name == calibrationMethodName(m)) return m;
  return Status(ErrorCode::kInvalidArgument,
                "unknown calibration method '" + name + "' (entropy, minmax, percentile or mse)");
}

std::string describeCalibrator(const CalibratorParams& p) {
  if (p.method != CalibrationMethod::kPercentile) return calibrationMethodName(p.method);
  std::ostringstream s;
  s << "percentile(" << p.percentile << ")";
  return s.str();
}

Status validateCalibrator(const CalibratorParams& p) {
  if (p.method == CalibrationMethod::kPercentile &&
      !(std::isfinite(p.percentile) && p.percentile > 0 && p.percentile <= 100)) {
    std::ostringstream s;
    s << "the percentile must be in (0, 100], not " << p.percentile;
    return Status(ErrorCode::kInvalidArgument, s.str());
  }
  return Status::Ok();
}

AbsHistogram::AbsHistogram(double range, int bins)
    : range_(std::max(0.0, range)), counts_(static_cast<size_t>(std::max(1, bins)), 0.0) {}

void AbsHistogram::add(const float* values, int64_t count) {
  const int n = bins();
  if (n == 0) return;
  const double scale = range_ > 0 ? n / range_ : 0.0;
  for (int64_t i = 0; i < count; ++i) {
    const float v = values[i];
    if (!std::isfinite(v)) {
      ++nonFinite_;
      continue;
    }
    const double a = std::fabs(static_cast<double>(v));
    maxAbs_ = std::max(maxAbs_, a);
    const double pos = a * scale;  // may exceed the range: clamp before converting
    const int b = pos >= n - 1 ? n - 1 : static_cast<int>(pos);
    counts_[static_cast<size_t>(b)] += 1;
    total_ += 1;
  }
}

void AbsHistogram::addRepeated(double value, double count) {
  const int n = bins();
  if (n == 0 || !(count > 0) || !std::isfinite(value)) return;
  const double a = std::fabs(value);
  maxAbs_ = std::max(maxAbs_, a);
  const double scale = range_ > 0 ? n / range_ : 0.0;
  const double pos = a * scale;
  const int b = pos >= n - 1 ? n - 1 : static_cast<int>(pos);
  counts_[static_cast<size_t>(b)] += count;
  total_ += count;
}

Expected<double> computeAmax(const AbsHistogram& h, const CalibratorParams& p) {
  EI_RETURN_IF_ERROR(validateCalibrator(p));
  if (h.total() <= 0 || h.maxAbs() <= 0 || h.range() <= 0) return h.maxAbs();
  switch (p.method) {
    case CalibrationMethod::kMinMax:
      return h.maxAbs();
    case CalibrationMethod::kPercentile:
      return percentileAmax(h, p.percentile);
    case CalibrationMethod::kMse:
      return mseAmax(h);
    case CalibrationMethod::kEntropy:
      if (h.bins() < kEntropyLevels)
        return Status(ErrorCode::kInvalidArgument,
                      "entropy calibration needs at least 128 histogram bins, not " +
                          std::to_string(h.bins()));
      return entropyAmax(h);
  }
  return Status(ErrorCode::kInternal, "unknown calibration method");
}

Expected<std::vector<float>> perChannelWeightScales(const Tensor& w, int axis) {
  if (w.dtype() != DataType::kFloat32 || !w.onHost())
    return Status(ErrorCode::kInvalidArgument,
                  "weights must be a float32 host tensor, got " + w.describe());
  const int rank = static_cast<int>(w.shape().rank());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank)
    return Status(ErrorCode::kInvalidArgument,
                  "axis " + std::to_string(axis) + " is outside weights " + w.describe());
  const int64_t channels = w.shape()[static_cast<size_t>(axis)];
  const int64_t inner = w.shape().span(static_cast<size_t>(axis) + 1, w.shape().rank());
  std::vector<float> scales(static_cast<size_t>(channels), 0.f);
  const float* x = w.data<float>();
  for (int64_t i = 0; i < w.numel(); ++i) {
    const int64_t c = (i / inner) % channels;
    if (std::isfinite(x[i]))
      scales[static_cast<size_t>(c)] = std::max(scales[static_cast<size_t>(c)], std::fabs(x[i]));
  }
  for (float& s : scales) s /= 127.f;
  return scales;
}

}  // namespace edgeinfer
