#!/usr/bin/env bash
# Shows: a video file -> BlazeFace face detection (edgeinfer) -> boxes, labels and landmarks drawn (edgeoverlay) -> H.264 MP4.
#
#   pipelines/file_to_mp4.sh [INPUT [OUTPUT.mp4 [MODEL_CONFIG [OUTPUT.jsonl]]]]
#
# Defaults: kphotoalbum's webcam footage (scripts/fetch_media.sh), build/pipelines/faces.mp4,
# models/blazeface/model.json (front camera; model_back.json for smaller faces). Any file
# decodebin can read works. With OUTPUT.jsonl the same run also writes one JSON line of
# detections per frame (a tee into edgemetasink, as file_to_json.sh writes them): this is the
# CPU path of scripts/demo.sh. EDGEINFER_BACKEND=cpu|gpu|auto (default auto);
# EDGEINFER_OVERLAY: edgeoverlay's properties (e.g. "thickness=6"; default none).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
input=${1:-$media/kphotoalbum/movie.avi}
output=${2:-$repo/build/pipelines/faces.mp4}
config=${3:-$models/blazeface/model.json}
jsonl=${4:-}
mkdir -p "$(dirname "$output")"
[ -z "$jsonl" ] || mkdir -p "$(dirname "$jsonl")"
read -ra overlay <<<"${EDGEINFER_OVERLAY:-}"
encode_outputs "$output" "$jsonl" "${overlay[@]}"
gst-launch-1.0 -e \
  filesrc location="$input" ! decodebin ! videoconvert ! \
  edgeinfer config="$config" backend="${EDGEINFER_BACKEND:-auto}" ! "${outputs[@]}"
echo "wrote $output${jsonl:+ and $jsonl ($(wc -l <"$jsonl") frames)}"
