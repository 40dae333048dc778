#!/usr/bin/env bash
# Shows: a video file -> BlazeFace face detection (edgeinfer) -> one JSON line of detections per frame (edgemetasink).
#
#   pipelines/file_to_json.sh [INPUT [OUTPUT.jsonl [MODEL_CONFIG]]]
#
# OUTPUT "-" writes to stdout. Each line: {"frame", "pts" (ns), "width", "height", "results":
# [{"unique_id", "detections": [{"box": [x1, y1, x2, y2], "score", "class", "label",
# "keypoints", "classifications"}], "classifications"}]} (plugins/gst/results_json.h).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
input=${1:-$media/kphotoalbum/movie.avi}
output=${2:-$repo/build/pipelines/faces.jsonl}
config=${3:-$models/blazeface/model.json}
[ "$output" = - ] || mkdir -p "$(dirname "$output")"
gst-launch-1.0 -q \
  filesrc location="$input" ! decodebin ! videoconvert ! \
  edgeinfer config="$config" backend="${EDGEINFER_BACKEND:-auto}" ! \
  edgemetasink location="$output"
[ "$output" = - ] || echo "wrote $output ($(wc -l <"$output") frames)"
