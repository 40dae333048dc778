#!/usr/bin/env bash
# Shows: the GPU path: H.264 decoded by NVDEC (nvh264dec) -> edgeinfer on the GPU -> boxes drawn -> H.264 MP4.
#
#   pipelines/nvdec_zero_copy.sh [INPUT.mp4 [OUTPUT.mp4 [MODEL_CONFIG [OUTPUT.jsonl]]]]
#
# Needs an NVIDIA GPU, GStreamer's nvcodec plugin (gstreamer1.0-plugins-bad; nvh264dec appears
# only where the driver's NVDEC is usable) and a build with CUDA. Not runnable on the GPU-less
# build machine; verified on a GPU machine.
# Zero copy: edgeinfer takes video/x-raw(memory:CUDAMemory) and offers nvh264dec the CUDA
# context its engine runs in, so decoded frames are preprocessed where NVDEC wrote them
# (GST_DEBUG=edgeinfer:4 logs, at the end, how many frames were read in place: on an H100 all
# 41 of the default clip). edgeoverlay then draws on the frames in CUDA memory too (one kernel
# launch per frame), and only the annotated frames are downloaded (cudadownload) for the
# encoder; a plugin built without gstreamer-cuda-1.0 (its edgeoverlay takes system memory only)
# gets them downloaded before edgeoverlay instead (GST_DEBUG=edgeoverlay:4 logs how many frames
# it drew on in CUDA memory).
# With OUTPUT.jsonl the same run also writes one JSON line of detections per frame
# (edgemetasink, on a tee after cudadownload so that no CUDA buffer waits in a queue): this is
# the GPU path of scripts/demo.sh. INPUT: H.264 in MP4/MOV (qtdemux). EDGEINFER_OVERLAY:
# edgeoverlay's properties (default "thickness=6", for the 1080p default clip).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
input=${1:-/usr/share/forensics-samples/original-files/movie1/VID_20191220_170832.mp4}
output=${2:-$repo/build/pipelines/nvdec.mp4}
config=${3:-$models/blazeface/model_back.json}
jsonl=${4:-}
if ! gst-inspect-1.0 nvh264dec >/dev/null 2>&1; then
  echo "nvh264dec is not available (no NVIDIA GPU/driver, or gstreamer1.0-plugins-bad's nvcodec" \
    "is missing): this pipeline needs NVDEC" >&2
  exit 1
fi
mkdir -p "$(dirname "$output")"
[ -z "$jsonl" ] || mkdir -p "$(dirname "$jsonl")"
download="" after_overlay=""
if gst-inspect-1.0 cudadownload >/dev/null 2>&1; then
  if gst-inspect-1.0 edgeoverlay | grep -q 'memory:CUDAMemory'; then
    after_overlay=cudadownload  # edgeoverlay draws in CUDA memory
  else
    download="cudadownload !"
  fi
fi
read -ra overlay <<<"${EDGEINFER_OVERLAY-thickness=6}"
encode_outputs "$output" "$jsonl" "${overlay[@]}"
# shellcheck disable=SC2086  # $download is a launch-line fragment
gst-launch-1.0 -e \
  filesrc location="$input" ! qtdemux ! h264parse ! nvh264dec ! \
  edgeinfer config="$config" backend=gpu ! $download "${outputs[@]}"
echo "wrote $output${jsonl:+ and $jsonl ($(wc -l <"$jsonl") frames)}"
