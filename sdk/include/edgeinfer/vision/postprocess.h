// CPU reference of vision postprocessing: output tensors -> Classification / Detection results
// (issue 4). The CUDA versions must reproduce these results, so every decoder's arithmetic is
// written out below; where a GPU may reorder a floating-point sum the tolerance is stated.
//
// Conventions shared by every function here
// -----------------------------------------
// * Inputs are host tensors of float32 or float16 (float16 is widened to float32 exactly, then
//   everything is computed in float32). Anything else is kInvalidArgument / kUnsupported with a
//   message naming the tensor, its dtype and shape. A tensor with a zero (or unknown)
//   dimension is kInvalidArgument too, never an empty result.
// * Score thresholds keep a candidate when `score >= threshold` (MediaPipe's convention; note
//   that Ultralytics uses `>`). IoU thresholds suppress when `IoU > threshold`, so a pair with
//   IoU exactly equal to the threshold is kept (torchvision and MediaPipe agree).
// * Ordering is deterministic: candidates are sorted by score descending, then by their index
//   in the tensor ascending (for detections: the anchor/box index; for classes: the class id).
// * NaN never crashes anything. A candidate whose score is NaN fails every `>=` test and is
//   dropped; a candidate whose decoded box has a non-finite coordinate is dropped too. In
//   classification a NaN score (or logit) is skipped: that class is never reported, and the
//   softmax is taken over the other classes (so a row of NaNs yields no results).
// * Boxes are decoded in tensor (network-input) pixels, NMS runs there, and the kept boxes are
//   mapped to frame pixels with Transform::toFrame (which clips to the frame when its size is
//   set). Keypoints are mapped with toFrameX/toFrameY and are not clipped.
// * `transforms` is per batch image: empty = identity (results stay in tensor pixels), one
//   entry = the same transform for every image, or exactly N entries.
// * `labels`, when not empty, must have exactly num_classes entries; Detection::label and
//   Classification::label are filled from it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "edgeinfer/status.h"
#include "edgeinfer/tensor.h"
#include "edgeinfer/types.h"
#include "edgeinfer/vision/types.h"

namespace edgeinfer::vision {

// ---------------------------------------------------------------------------------------------
// Classification
// ---------------------------------------------------------------------------------------------

struct ClassifyParams {
  /// The model outputs logits: apply softmax over the classes first. Softmax, in float32:
  ///   m = max over non-NaN x_c;  e_c = expf(x_c - m);  s = sum of e_c in class order;
  ///   p_c = e_c / s.  (A GPU may sum in another order: match within 1e-6 relative.)
  bool applySoftmax = false;
  /// How many classes to return per image (>= 1); fewer when the row has fewer non-NaN classes.
  int topK = 5;
  /// Optional class names (size must equal the number of classes).
  std::vector<std::string> labels;
};

/// Top-k classes of `scores` shaped [N, C] or [N, C, 1, 1] (float32/float16), one list per
/// image, ordered by score descending, ties broken by the lower class id.
Expected<std::vector<std::vector<Classification>>> classify(const Tensor& scores,
                                                            const ClassifyParams& params);

// ---------------------------------------------------------------------------------------------
// Non-maximum suppression
// ---------------------------------------------------------------------------------------------

enum class NmsMethod : uint8_t {
  /// Greedy NMS: walk the candidates in order (score desc, index asc); keep one unless a
  /// box already kept (of the same class, unless class-agnostic) has IoU > iouThreshold with it.
  kHard = 0,
  /// MediaPipe's WEIGHTED NMS (used for BlazeFace): take the first remaining candidate L; its
  /// cluster is every remaining candidate (L included, same class unless class-agnostic) with
  /// IoU(candidate, L) > iouThreshold. Emit one detection with L's score, class and label, whose
  /// box corners and keypoints are the score-weighted means over the cluster:
  ///   x1 = sum(s_i * x1_i) / sum(s_i)  (likewise y1, x2, y2 and each keypoint x, y),
  /// sums in candidate order, in float32; keypoint scores are L's (if the cluster's scores sum to
  /// 0, L's box is kept as is). Remove the cluster; repeat.
  kWeighted = 1,
};

struct NmsParams {
  float iouThreshold = 0.45f;    ///< in [0, 1]; suppress when IoU > iouThreshold
  float scoreThreshold = 0.25f;  ///< in [0, 1]; candidates with score < it are dropped first
  int maxDetections = 300;       ///< >= 1; at most this many results per image
  bool classAgnostic = false;    ///< true: boxes of different classes suppress each other
  NmsMethod method = NmsMethod::kHard;
};

/// Checks the ranges above; kInvalidArgument naming the field otherwise.
Status validate(const NmsParams& params);

/// NMS over one image's candidates given as parallel arrays (classIds may be empty: all class
/// 0). Returns the indices kept, in output order (score desc, index asc). Hard NMS only (the
/// weighted method builds new boxes; use nms() on detections for it).
Expected<std::vector<int>> nmsIndices(const std::vector<Box>& boxes,
                                      const std::vector<float>& scores,
                                      const std::vector<int>& classIds, const NmsParams& params);

/// NMS over detections of possibly several images: each Detection::batchIndex is processed on
/// its own. Results are ordered by batchIndex, then as the method emits them. Supports both
/// methods (the weighted one averages keypoints too; all candidates of a cluster must have the
/// same number of keypoints, else kInvalidArgument).
Expected<std::vector<Detection>> nms(const std::vector<Detection>& candidates,
                                     const NmsParams& params);

/// Batched hard NMS on tensors: boxes [N, B, 4] (x1, y1, x2, y2), scores [N, B], optional
/// classIds [N, B] (int32 or int64; pass an empty Tensor for all class 0). Returns the kept
/// box indices per image.
Expected<std::vector<std::vector<int>>> batchedNms(const Tensor& boxes, const Tensor& scores,
                                                   const Tensor& classIds, const NmsParams& params);

/// GPU batched hard NMS: the same kept indices, in the same order, as batchedNms() on the CPU
/// (score threshold, NaN and non-finite boxes dropped, IoU computed with the same float
/// rounding; class-aware unless classAgnostic). Candidates are filtered and sorted on the GPU
/// (CUB radix sort, stable, so equal scores keep index order), the IoU > threshold
/// bit matrix of the upper triangle is built in parallel (64 pairs a thread), and one thread block
/// per image walks it greedily, so suppressed candidates cost a bit test. Memory: about B * B / 8
/// bytes per image (12.5 MB for 10,000 candidates), kept and grown by the object.
class CudaNms {
 public:
  /// kUnsupported in a build without CUDA or when no GPU is usable.
  static Expected<std::unique_ptr<CudaNms>> create(int deviceId = 0);
  virtual ~CudaNms() = default;
  /// boxes: device float32 [N, B, 4] (x1, y1, x2, y2); scores: device float32 [N, B];
  /// classIds: device int32 [N, B], or an empty Tensor for all class 0. Runs on `stream` (a
  /// cudaStream_t, null: the legacy default stream) and waits for it; returns the kept box
  /// indices per image. Hard NMS only (kInvalidArgument for kWeighted).
  virtual Expected<std::vector<std::vector<int>>> run(const Tensor& boxes, const Tensor& scores,
                                                      const Tensor& classIds,
                                                      const NmsParams& params, void* stream) = 0;
};

// ---------------------------------------------------------------------------------------------
// YOLO decoders
// ---------------------------------------------------------------------------------------------

/// YOLOv5-style output [N, B, 5 + C]: per box (cx, cy, w, h) in input pixels, objectness,
/// C class scores. Per box: for each class c, s_c = obj * cls_c (after sigmoid(v) = 1 / (1 +
/// expf(-v)) on obj and cls_c when scoresAreLogits); score = max_c s_c, class = the lowest c
/// reaching it (multiLabel: every c with s_c >= threshold is a candidate). Box corners:
///   x1 = cx - w * 0.5f, y1 = cy - h * 0.5f, x2 = cx + w * 0.5f, y2 = cy + h * 0.5f.
/// Then candidates with score >= nms.scoreThreshold go through nms().
struct YoloV5Params {
  int numClasses = 80;  ///< must equal the tensor's last dim - 5
  /// Apply the sigmoid to objectness and class scores (the official export already did). The
  /// boxes must be decoded either way (this decoder does no grid/anchor decoding).
  bool scoresAreLogits = false;
  bool multiLabel = false;
  NmsParams nms;
  std::vector<std::string> labels;
};
Expected<std::vector<Detection>> decodeYoloV5(const Tensor& output, const YoloV5Params& params,
                                              const std::vector<Transform>& transforms = {});

/// YOLOv8-style anchor-free output, channels first: [N, 4 + C, A] with rows (cx, cy, w, h)
/// already decoded in input pixels and C class scores (sigmoid-ed in the official export), no
/// objectness; score = max_c cls_c (lowest c on ties), box corners as for YOLOv5.
///
/// With rawDfl, the input is the raw head [N, 4 * regMax + C, A] and anchors are generated:
/// for each stride s in `strides` in order, a grid of ceil(inputHeight / s) rows by
/// ceil(inputWidth / s) columns, row-major, anchor point (ax, ay) = (col + 0.5, row + 0.5) in
/// grid units; A must equal the total. Channel k * regMax + i (k = 0..3 for left, top, right,
/// bottom; i = 0..regMax-1) holds bin i of side k. Each distance is the expectation of a
/// softmax over its bins, in float32:
///   m = max_i b_i;  e_i = expf(b_i - m);  d_k = (sum_i i * e_i) / (sum_i e_i)  (sums in i order)
/// and the box in input pixels is
///   x1 = (ax - d_left) * s, y1 = (ay - d_top) * s, x2 = (ax + d_right) * s, y2 = (ay + d_bottom) *
///   s.
/// Raw heads carry class logits: set scoresAreLogits to apply the sigmoid.
struct YoloV8Params {
  int numClasses = 80;  ///< must equal channels - 4 (or channels - 4 * regMax with rawDfl)
  bool scoresAreLogits = false;
  bool multiLabel = false;
  bool rawDfl = false;
  int regMax = 16;
  std::vector<int> strides = {8, 16, 32};
  int inputWidth = 640, inputHeight = 640;  ///< network input size (rawDfl only)
  NmsParams nms;
  std::vector<std::string> labels;
};
Expected<std::vector<Detection>> decodeYoloV8(const Tensor& output, const YoloV8Params& params,
                                              const std::vector<Transform>& transforms = {});

// ---------------------------------------------------------------------------------------------
// SSD / anchor boxes (MediaPipe SsdAnchorsCalculator + TensorsToDetectionsCalculator)
// ---------------------------------------------------------------------------------------------

/// MediaPipe's SsdAnchorsCalculatorOptions (the fields the face detectors use, with MediaPipe's
/// defaults). Generation, as in mediapipe/calculators/tflite/ssd_anchors_calculator.cc:
///   scale(i) = (minScale + maxScale) / 2 if strides.size() == 1, else
///              minScale + (maxScale - minScale) * i / (strides.size() - 1).
///   Layers with equal consecutive strides are merged into one feature map. For each merged
///   layer l: per aspect ratio r, an anchor of scale(l) (height scale / sqrt(r), width scale *
///   sqrt(r)); then, when interpolatedScaleAspectRatio > 0, one more of scale
///   sqrt(scale(l) * scale(l + 1)) (scale(l + 1) = 1 for the last layer) and that ratio. (With
///   reduceBoxesInLowestLayer, layer 0 instead uses ratios 1, 2, 0.5 with scales 0.1, s, s.)
///   The feature map is ceil(inputHeight / stride) x ceil(inputWidth / stride); anchors run
///   row, column, then anchor; centre ((col + offsetX) / fmWidth, (row + offsetY) / fmHeight),
///   size (1, 1) when fixedAnchorSize, else the width/height above. All in [0, 1] units.
/// BlazeFace front (128x128): strides {8, 16, 16, 16} -> 16*16*2 + 8*8*6 = 896 anchors;
/// back (256x256): strides {16, 32, 32, 32} -> 896 anchors.
struct SsdAnchorOptions {
  int numLayers = 4;  ///< must equal strides.size()
  float minScale = 0.1484375f;
  float maxScale = 0.75f;
  int inputWidth = 128, inputHeight = 128;
  float anchorOffsetX = 0.5f, anchorOffsetY = 0.5f;
  std::vector<int> strides = {8, 16, 16, 16};
  std::vector<float> aspectRatios = {1.0f};
  float interpolatedScaleAspectRatio = 1.0f;
  bool reduceBoxesInLowestLayer = false;
  bool fixedAnchorSize = true;
};

/// One anchor, normalised to [0, 1] of the input.
struct Anchor {
  float xCenter = 0, yCenter = 0, w = 1, h = 1;
};

Expected<std::vector<Anchor>> generateSsdAnchors(const SsdAnchorOptions& options);

/// Decoding, as MediaPipe's TensorsToDetectionsCalculator with reverse_output_order = true
/// (coordinates stored x before y). For anchor a (normalised), raw regressor row r:
///   cx = r[0] / xScale * a.w + a.xCenter;  cy = r[1] / yScale * a.h + a.yCenter
///   w  = r[2] / wScale * a.w (expf(r[2] / wScale) * a.w when applyExponentialOnBoxSize)
///   h  = r[3] / hScale * a.h (likewise)
///   box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2), then times (inputWidth,
///   inputHeight) of the anchor options to get tensor pixels.
///   keypoint k: x = r[4 + 2k] / xScale * a.w + a.xCenter, y = r[5 + 2k] / yScale * a.h +
///   a.yCenter, also times the input size; keypoint score = the detection's score.
/// Scores: per class v clipped to [-scoreClippingThresh, scoreClippingThresh] (when > 0), then
/// sigmoid when sigmoidScore; score = max over classes (lowest class on ties). Candidates with
/// score >= nms.scoreThreshold go through nms() (BlazeFace: weighted, IoU 0.3).
///
/// The model may split anchors over several heads: boxes and scores are lists of tensors
/// ([N, A_i, numCoords] and [N, A_i, numClasses]) concatenated along the anchor axis in list
/// order; the total must equal the generated anchor count.
struct SsdParams {
  SsdAnchorOptions anchors;
  int numClasses = 1;
  int numCoords = 16;  ///< 4 + numKeypoints * 2 (more values are allowed and ignored)
  int numKeypoints = 6;
  float xScale = 128, yScale = 128, wScale = 128, hScale = 128;
  bool applyExponentialOnBoxSize = false;
  bool sigmoidScore = true;
  float scoreClippingThresh = 100.f;  ///< <= 0: no clipping
  NmsParams nms;
  std::vector<std::string> labels;
  /// Engine output names, in anchor order, for decodeSsdOutputs().
  std::vector<std::string> boxOutputs;
  std::vector<std::string> scoreOutputs;
};

/// BlazeFace short-range ("front", 128x128 NHWC input `input:0`) as the model in
/// models/blazeface/blazeface_front_128.onnx has it (MediaPipe face_detection_short_range):
///   Identity:0   [1, 512, 1]  scores, stride-8 head (16x16 cells x 2 anchors)
///   Identity_1:0 [1, 384, 1]  scores, stride-16 head (8x8 cells x 6 anchors)
///   Identity_2:0 [1, 512, 16] regressors of the stride-8 head
///   Identity_3:0 [1, 384, 16] regressors of the stride-16 head
/// Scales 128, min score 0.5, clipping 100, weighted NMS with IoU 0.3, up to 100 faces.
SsdParams blazeFaceFrontParams();
/// BlazeFace back camera (256x256, models/blazeface/blazeface_back_256.onnx): same output
/// names and shapes (strides 16 and 32), minScale 0.15625, scales 256, min score 0.5.
SsdParams blazeFaceBackParams();

Expected<std::vector<Detection>> decodeSsd(const std::vector<Tensor>& boxes,
                                           const std::vector<Tensor>& scores,
                                           const SsdParams& params,
                                           const std::vector<Transform>& transforms = {});
/// decodeSsd() on engine outputs looked up by params.boxOutputs / params.scoreOutputs.
Expected<std::vector<Detection>> decodeSsdOutputs(const std::map<std::string, Tensor>& outputs,
                                                  const SsdParams& params,
                                                  const std::vector<Transform>& transforms = {});

/// The outputs as decodeSsd() reads them, for comparing quantized outputs with FP32 ones
/// (CalibrationOptions::outputView): every score output through the decoder's clipping and
/// sigmoid (sigmoidScore), every box output's rows (one an anchor) multiplied by that anchor's
/// FP32 score (the largest over the classes, at least 0), so an anchor the decoder would drop
/// counts for nothing and one near or above its threshold counts fully. In place on both maps.
/// kNotFound naming a missing output; kInvalidArgument for box and score lists of different
/// lengths, a tensor that is not float32, or shapes whose anchors do not agree.
Status ssdOutputView(const SsdParams& params, std::map<std::string, Tensor>& reference,
                     std::map<std::string, Tensor>& quantized);

// ---------------------------------------------------------------------------------------------
// Semantic segmentation
// ---------------------------------------------------------------------------------------------

/// Per-pixel argmax of [N, C, H, W] logits or scores -> class map [N, H, W] of `outType`
/// (kUInt8, needs C <= 256, or kInt32). Ties go to the lower class; NaN never wins (a pixel
/// whose every value is NaN gets class 0).
Expected<Tensor> segmentationArgmax(const Tensor& scores, DataType outType = DataType::kUInt8);

struct SegmentationParams {
  /// A map of one channel ([N, 1, H, W]: a foreground probability or logit, e.g. a text or
  /// background-removal model) is binary: class 1 where the value is above this, else 0.
  float threshold = 0.5f;
};

/// The class map of a segmentation output: segmentationArgmax() for C > 1 channels; for one
/// channel, class 1 where the value exceeds params.threshold (NaN: class 0).
Expected<Tensor> segmentationClasses(const Tensor& scores, const SegmentationParams& params,
                                     DataType outType = DataType::kUInt8);

}  // namespace edgeinfer::vision
