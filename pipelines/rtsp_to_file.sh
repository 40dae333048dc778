#!/usr/bin/env bash
# Shows: an RTSP camera (H.264) -> face detection (edgeinfer) -> boxes drawn (edgeoverlay) -> annotated MP4, stopped cleanly with Ctrl-C.
#
#   pipelines/rtsp_to_file.sh rtsp://CAMERA/STREAM [OUTPUT.mp4 [MODEL_CONFIG]]
#
# Not tested in CI: there is no RTSP server on the build machine. To try it locally, serve a
# file with any RTSP server (e.g. mediamtx, or gst-rtsp-server's test-launch) and point this at
# it. -e turns Ctrl-C into an end of stream, so mp4mux writes a playable file. latency=200 ms
# of jitter buffer; drop-on-latency keeps a live camera live when inference falls behind.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
url=${1:?usage: rtsp_to_file.sh rtsp://CAMERA/STREAM [OUTPUT.mp4 [MODEL_CONFIG]]}
output=${2:-$repo/build/pipelines/rtsp.mp4}
config=${3:-$models/blazeface/model_back.json}
mkdir -p "$(dirname "$output")"
gst-launch-1.0 -e \
  rtspsrc location="$url" latency=200 drop-on-latency=true ! rtph264depay ! h264parse ! \
  avdec_h264 ! videoconvert ! \
  edgeinfer config="$config" backend="${EDGEINFER_BACKEND:-auto}" ! \
  edgeoverlay ! videoconvert ! x264enc tune=zerolatency ! mp4mux ! filesink location="$output"
echo "wrote $output"
