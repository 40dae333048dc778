// Small models with data-dependent outputs (their sizes depend on the input values) for the
// tests of the engines that run them with a CPU tail: test_split_engine.cpp (CPU) and
// test_cuda_engine.cpp (GPU head). The ops before the data-dependent ones are exact (Relu,
// Abs), so a GPU head and the CPU reference agree bit for bit.
#pragma once

#include "test_model.h"

namespace edgeinfer::test {

/// x [2, 6] -> Relu -> r -> NonZero -> Transpose -> idx [?, 2] -> GatherND(x, idx) -> picked;
/// y = Abs(x). Outputs: picked (tail), y (head), idx (tail); the tail reads r and x.
inline TestModel nonZeroModel() {
  TestModel m(13);
  m.input("x", {2, 6});
  m.node("Relu", {"x"}, {"r"}, "relu");
  m.node("NonZero", {"r"}, {"nz"}, "nonzero");
  m.node("Transpose", {"nz"}, {"idx"}, "transpose");
  m.node("GatherND", {"x", "idx"}, {"picked"}, "gathernd");
  m.node("Abs", {"x"}, {"y"}, "abs");
  m.output("picked");
  m.output("y");
  m.output("idx", onnx::TensorProto::INT64);
  return m;
}

/// b [1, 20, 4], s [1, 1, 20] -> Abs each -> NonMaxSuppression (at most 5 boxes, IoU 0.5, score
/// 0.3) -> sel [?, 3]. Outputs: sel (tail), as (the scores, head).
inline TestModel nmsModel() {
  TestModel m(13);
  m.input("b", {1, 20, 4});
  m.input("s", {1, 1, 20});
  m.node("Abs", {"b"}, {"ab"}, "abs_b");
  m.node("Abs", {"s"}, {"as"}, "abs_s");
  m.initializerI64("max_out", {1}, {5});
  m.initializer("iou", {1}, {0.5f});
  m.initializer("score", {1}, {0.3f});
  m.node("NonMaxSuppression", {"ab", "as", "max_out", "iou", "score"}, {"sel"}, "nms");
  m.output("sel", onnx::TensorProto::INT64);
  m.output("as");
  return m;
}

}  // namespace edgeinfer::test
