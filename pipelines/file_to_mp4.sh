#!/usr/bin/env bash
# Shows: a video file -> BlazeFace face detection (edgeinfer) -> boxes, labels and landmarks drawn (edgeoverlay) -> H.264 MP4.
#
#   pipelines/file_to_mp4.sh [INPUT [OUTPUT.mp4 [MODEL_CONFIG]]]
#
# Defaults: kphotoalbum's webcam footage (scripts/fetch_media.sh), build/pipelines/faces.mp4,
# models/blazeface/model.json (front camera; model_back.json for smaller faces). Any file
# decodebin can read works. EDGEINFER_BACKEND=cpu|gpu|auto (default auto).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
input=${1:-$media/kphotoalbum/movie.avi}
output=${2:-$repo/build/pipelines/faces.mp4}
config=${3:-$models/blazeface/model.json}
mkdir -p "$(dirname "$output")"
gst-launch-1.0 -e \
  filesrc location="$input" ! decodebin ! videoconvert ! \
  edgeinfer config="$config" backend="${EDGEINFER_BACKEND:-auto}" ! \
  edgeoverlay ! videoconvert ! x264enc ! mp4mux ! filesink location="$output"
echo "wrote $output"
