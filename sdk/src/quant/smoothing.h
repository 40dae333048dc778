// Activation smoothing (per-channel equalization) before INT8: channel c of an activation is
// carried divided by a factor s_c, which the convolutions that read it take back in their
// weights, so the network computes the same function. Chosen well, the factors even out the
// channels' ranges, which INT8 quantizes with one scale per tensor: depthwise-separable
// networks (MobileNet, BlazeFace) have depthwise outputs whose channels span 100x and more, so
// one scale per tensor leaves the weak channels one or two int8 steps. The weights, quantized
// per output channel, take the factors' other side.
//
// The factor of a channel is s = a^alpha / w^(1 - alpha), where a is the activation's largest
// |x| in the channel over the calibration data and w the largest |w| of the reading
// convolutions' weights at that input channel (SmoothQuant, Xiao et al. 2023, migration
// strength alpha; the equalization of Nagel et al. 2019 for depthwise-separable layers). Where
// every reader is depthwise (each output channel reads one input channel), the weights are
// quantized per channel anyway: the factors then even the activation out completely (alpha 1).
//
// Which channels can be scaled: a tensor's channel c (axis 1) is linked to the channels that
// must carry the same factor: through elementwise ops that commute with a positive scale per
// channel (Relu, LeakyRelu, MaxPool, AveragePool, GlobalAveragePool, an Add of two same-shape
// tensors), a FusedConv's residual input and its output, a zero Pad or a Concat (of tensors or
// zeros) along the channels (the channel it lands on). A class of linked channels can be scaled
// when each of its tensors is written by a Conv / FusedConv with constant weights and a homogeneous
// activation (none, Relu, LeakyRelu) or by a linking op, and read only by linking ops or by
// convolutions with constant weights, and none is a graph input, a graph output or a
// constant. So a residual network's whole stream (block outputs, skip connections) shares
// its factors, and every convolution writing into it divides its rows by them.
//
// The calibration (calibrate.cpp) measures each channel's range, writes the factors of every
// scaled tensor into the calibration cache, and the builders (CPU and GPU) apply them to the
// same optimised graph before quantizing it (applySmoothing).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "edgeinfer/status.h"
#include "graph/graph.h"

namespace edgeinfer::quant {

class SmoothingPlan {
 public:
  /// The channel classes of `g` (see the top of this file).
  static SmoothingPlan analyze(const graph::Graph& g);

  /// Per channel of tensor `name`, its class, or -1 where it cannot be scaled; empty for a
  /// tensor without channels to scale (not float, rank < 3, unknown channel count).
  std::vector<int> classes(const std::string& name) const;
  int numClasses() const { return classes_; }
  /// Per class, its component: the classes linked to it through tensors they share (a
  /// residual network's stream at one width is one component).
  const std::vector<int>& components() const { return component_; }
  /// The factors per class from the channels' ranges measured on some of `g`'s tensors
  /// (tensor -> one range per channel): smoothingFactors() with `alpha` (1 for the classes
  /// whose readers are all depthwise). A component's factors are shared by all its tensors (a
  /// residual stream's blocks), so factors that even out one tensor may spread another, or the
  /// readers' weights: per measured tensor, the bits one scale per tensor wastes on its
  /// channels (the mean over the channels of log2(largest range / the channel's range)), and
  /// per convolution reading them the bits its weights waste likewise (per output channel,
  /// over its input channels). A component whose factors do not lower the sum of both keeps
  /// factors of 1 (BlazeFace's last block output, read by 1x1 heads whose weights the factors
  /// would spread, is one); `leftOut` (optional) counts those.
  std::vector<float> chooseFactors(const graph::Graph& g,
                                   const std::map<std::string, std::vector<double>>& ranges,
                                   double alpha, int* leftOut = nullptr) const;
  /// Every tensor with a class, and its factors per channel from the classes' (1 where it
  /// cannot be scaled); tensors whose factors are all 1 are left out.
  std::map<std::string, std::vector<float>> tensorFactors(const std::vector<float>& byClass) const;

 private:
  /// Per class, the largest |w| of the weights that read it (convolutions' input X).
  std::vector<double> readerWeightRanges(const graph::Graph& g) const;
  /// Per class: every convolution reading its tensors, and those linked to them, is depthwise.
  std::vector<bool> depthwiseReadersOnly(const graph::Graph& g) const;

  struct Slots {
    int64_t first = 0, channels = 0;
  };
  std::map<std::string, Slots> tensors_;
  std::vector<int> classOf_;    // slot -> class, -1: cannot be scaled
  std::vector<int> component_;  // class -> linked group of tensors (for the readers' kinds)
  int classes_ = 0;
};

/// The factors per class for the channels' activation ranges `act` and the readers' weight
/// ranges `weight` (one per class; 0: none measured), with `alpha[k]` in [0, 1] per class: the
/// scaled range a / s is (a * w)^(1 - alpha), all of them scaled so that the largest equals
/// the largest a (no range grows beyond the largest one measured, for the layers left in
/// FP16). A class no reader weighs takes the smallest scaled range; a class with no range
/// (always 0, or not measured) gets 1. Every factor is finite and > 0.
std::vector<float> smoothingFactors(const std::vector<double>& act,
                                    const std::vector<double>& weight,
                                    const std::vector<double>& alpha);

/// Applies `factors` (tensor -> one factor a channel, SmoothingPlan::tensorFactors) to `g`:
/// each convolution writing a listed tensor divides its weights and bias of channel c by
/// s_c, each one reading it (input X) multiplies its weights of input channel c by s_c (new
/// constants: a constant read elsewhere too is left as it is). A tensor `g` does not have is
/// skipped (a part of the graph). kInvalidArgument naming the tensor when a listed channel
/// cannot be scaled, the factors do not fit the tensor (count, not finite, <= 0), or linked
/// channels differ (a linked tensor missing from the list counts as factors of 1). Returns
/// how many tensors it scaled.
Expected<int> applySmoothing(graph::Graph& g,
                             const std::map<std::string, std::vector<float>>& factors);

}  // namespace edgeinfer::quant
