#!/usr/bin/env python3
"""The NMS stage of a YOLOv8-class detector at 640x640, for `edgeinfer bench`: boxes
[1, 8400, 4] (centre form, pixels) and class scores [1, 80, 8400] -> NonMaxSuppression (at most
100 boxes a class, IoU 0.45, score 0.25) -> selected [?, 3]. Writes the model and inputs shaped
like a real frame's (most scores low, a few hundred candidates above the threshold, clustered
boxes), so the GPU and CPU runs select the same realistic number of boxes. Needs onnx and numpy.

  python3 scripts/bench/make_nms_model.py --out /tmp/nms   # nms.onnx, inputs/boxes.npy, inputs/scores.npy
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--boxes", type=int, default=8400)
    ap.add_argument("--classes", type=int, default=80)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    n, c = a.boxes, a.classes
    os.makedirs(os.path.join(a.out, "inputs"), exist_ok=True)
    graph = helper.make_graph(
        [helper.make_node("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "score"],
                          ["selected"], name="nms", center_point_box=1)],
        "nms_stage",
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [1, n, 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, [1, c, n])],
        [helper.make_tensor_value_info("selected", TensorProto.INT64, ["count", 3])],
        [helper.make_tensor("max_out", TensorProto.INT64, [1], [100]),
         helper.make_tensor("iou", TensorProto.FLOAT, [1], [0.45]),
         helper.make_tensor("score", TensorProto.FLOAT, [1], [0.25])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(model, os.path.join(a.out, "nms.onnx"))
    rng = np.random.default_rng(a.seed)
    # 30 objects; each draws ~1 % of the anchors around it with jittered boxes.
    objects = rng.uniform(40, 600, size=(30, 2))
    sizes = rng.uniform(20, 200, size=(30, 2))
    owner = rng.integers(0, 30, size=n)
    near = rng.random(n) < 0.04
    centre = np.where(near[:, None], objects[owner] + rng.normal(0, 6, (n, 2)),
                      rng.uniform(0, 640, (n, 2)))
    size = np.where(near[:, None], sizes[owner] * rng.uniform(0.8, 1.2, (n, 2)),
                    rng.uniform(5, 100, (n, 2)))
    boxes = np.concatenate([centre, size], axis=1)[None].astype(np.float32)
    scores = (rng.random((1, c, n)) ** 8 * 0.2).astype(np.float32)  # mostly near 0
    cls = rng.integers(0, c, size=30)
    for i in np.nonzero(near)[0]:
        scores[0, cls[owner[i]], i] = rng.uniform(0.3, 0.95)
    np.save(os.path.join(a.out, "inputs", "boxes.npy"), boxes)
    np.save(os.path.join(a.out, "inputs", "scores.npy"), scores)
    print(f"{a.out}/nms.onnx: {n} boxes, {c} classes, "
          f"{int((scores > 0.25).sum())} scores above 0.25")


if __name__ == "__main__":
    main()
