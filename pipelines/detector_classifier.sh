#!/usr/bin/env bash
# Shows: a detector and a secondary classifier chained: BlazeFace finds faces (unique-id=1), an ImageNet-style classifier runs on each face's crop (infer-on-id=1) and its best class is drawn beside the face's label.
#
#   pipelines/detector_classifier.sh [INPUT [OUTPUT.mp4 [CLASSIFIER_CONFIG]]]
#
# The classifier is models/imagenet-classifier/model.json, the template for an ImageNet
# classifier export (224x224 NCHW, ImageNet normalisation, top 5). No classifier model is
# shipped: put yours at models/imagenet-classifier/model.onnx, or pass another config. Without
# one this script generates a stand-in with the template's input and output (random weights,
# python3-onnx): the chain, the crops and the drawing are real, its classes are meaningless.
# The results (the faces, each with its classes) are also written as JSON lines next to the
# video.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
input=${1:-$media/kphotoalbum/movie.avi}
output=${2:-$repo/build/pipelines/faces_classified.mp4}
classifier=${3:-$models/imagenet-classifier/model.json}
mkdir -p "$(dirname "$output")"

if [ "$classifier" = "$models/imagenet-classifier/model.json" ] &&
  [ ! -f "$models/imagenet-classifier/model.onnx" ]; then
  stand_in=$repo/build/pipelines/stand-in-classifier
  mkdir -p "$stand_in"
  py=${EDGEINFER_PYTHON:-/usr/bin/python3}  # Debian's, with python3-onnx and python3-numpy
  echo "no models/imagenet-classifier/model.onnx: generating a stand-in with random weights" \
    "in $stand_in (its classes are meaningless)"
  "$py" - "$stand_in/model.onnx" <<'PY'
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.default_rng(5)
w = numpy_helper.from_array(rng.uniform(-0.05, 0.05, (8, 3, 16, 16)).astype(np.float32), "w")
fc = numpy_helper.from_array(rng.uniform(-1, 1, (1000, 8)).astype(np.float32), "fc")
fcb = numpy_helper.from_array(np.zeros(1000, np.float32), "fcb")
nodes = [
    helper.make_node("Conv", ["input", "w"], ["c"], kernel_shape=[16, 16], strides=[16, 16]),
    helper.make_node("GlobalAveragePool", ["c"], ["p"]),
    helper.make_node("Flatten", ["p"], ["f"]),
    helper.make_node("Gemm", ["f", "fc", "fcb"], ["output"], transB=1),
]
graph = helper.make_graph(
    nodes, "stand-in-classifier",
    [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 224, 224])],
    [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 1000])], [w, fc, fcb])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
model.ir_version = 8
onnx.checker.check_model(model)
onnx.save(model, sys.argv[1])
PY
  cp "$models/imagenet-classifier/model.json" "$stand_in/model.json"
  classifier=$stand_in/model.json
fi

# tune=zerolatency: x264enc then holds no frames back (no lookahead, no B-frames). With its
# default lookahead the encoder waits for dozens of frames before its first output, while the
# JSON branch's queue fills and blocks the tee before the MP4 branch can preroll: a deadlock.
gst-launch-1.0 -e \
  filesrc location="$input" ! decodebin ! videoconvert ! \
  edgeinfer config="$models/blazeface/model.json" unique-id=1 backend="${EDGEINFER_BACKEND:-auto}" ! \
  edgeinfer config="$classifier" unique-id=2 infer-on-id=1 backend="${EDGEINFER_BACKEND:-auto}" ! \
  tee name=t \
  t. ! queue ! edgeoverlay ! videoconvert ! x264enc tune=zerolatency ! mp4mux ! \
  filesink location="$output" \
  t. ! queue ! edgemetasink location="${output%.mp4}.jsonl"
echo "wrote $output and ${output%.mp4}.jsonl"
