#!/usr/bin/env bash
# Runs on the GPU machine (device tool, carry [".devcarry-gst"]): the GStreamer plugin on the
# GPU. .devcarry-gst holds bundle.tar.xz (bundle-runtime.sh of the plugin, the meta library,
# gst-launch-1.0/gst-inspect-1.0 and the Debian plugins of the pipelines: coreelements,
# videoconvertscale, nvcodec, x264, videoparsersbad, isomp4), models/ (BlazeFace + configs) and
# the 1080p phone clip (forensics-samples-files). Checks, writing logs and outputs to $OUT:
#   1. zero copy: filesrc ! qtdemux ! h264parse ! nvh264dec ! edgeinfer (GPU) ! edgemetasink:
#      the caps edgeinfer negotiated carry memory:CUDAMemory and its count of frames read in
#      place equals the frame count (GST_DEBUG log);
#   2. the annotated MP4 through cudadownload ! edgeoverlay ! x264enc ! mp4mux;
#   3. throughput: N copies of the decode + inference branch in one pipeline (fakesink, no
#      clock sync), frames per second over all streams.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
gpu_gst_bundle
export GST_REGISTRY=/tmp/eg/registry.bin
clip=$PWD/.devcarry-gst/VID_20191220_170832.mp4
config=$PWD/.devcarry-gst/models/blazeface/model_back.json
cache=/tmp/eg/engines
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
gst-inspect-1.0 nvh264dec >/dev/null 2>&1 || { echo "nvh264dec missing"; gst-inspect-1.0 nvcodec | head; }
gst-inspect-1.0 edgeinfer | grep -E "CUDAMemory|Factory|Long-name" | head -5

echo "== 1. zero copy (first run builds the engine)"
GST_DEBUG=edgeinfer:5 gst-launch-1.0 -v filesrc location="$clip" ! qtdemux ! h264parse ! \
  nvh264dec ! edgeinfer name=infer config="$config" backend=gpu engine-cache-dir=$cache ! \
  edgemetasink location="$out/nvdec.jsonl" >"$out/zero_copy.log" 2>&1
echo "rc=$?"
grep -E "infer.sink: caps" "$out/zero_copy.log" | head -2 | cut -c1-220
grep -E "frames: .* read in place|ready on the|copied to the host|ERROR|WARN" "$out/zero_copy.log" | sed 's/^.*edgeinfer/edgeinfer/' | cut -c1-260 | head -8
echo "json lines: $(wc -l <"$out/nvdec.jsonl"); lines with a face: $(grep -c '"box"' "$out/nvdec.jsonl")"
head -c 400 "$out/nvdec.jsonl"; echo

echo "== 2. annotated MP4"
gst-launch-1.0 -e filesrc location="$clip" ! qtdemux ! h264parse ! nvh264dec ! \
  edgeinfer config="$config" backend=gpu engine-cache-dir=$cache ! cudadownload ! \
  edgeoverlay thickness=6 ! videoconvert ! x264enc speed-preset=ultrafast ! mp4mux ! \
  filesink location="$out/nvdec.mp4" >"$out/mp4.log" 2>&1
echo "rc=$? $(stat -c %s "$out/nvdec.mp4" 2>/dev/null) bytes"

echo "== 3. throughput: N streams of the 1080p clip (41 frames each) in one pipeline"
for n in ${STREAMS:-1 8}; do
  line=""
  for i in $(seq "$n"); do
    line+=" filesrc location=$clip ! qtdemux ! h264parse ! nvh264dec ! edgeinfer config=$config backend=gpu engine-cache-dir=$cache ! fakesink sync=false"
  done
  t0=$(date +%s.%N)
  # shellcheck disable=SC2086
  timeout -k 5 "${STREAM_TIMEOUT_S:-90}" gst-launch-1.0 -q $line >"$out/streams_$n.log" 2>&1
  rc=$?
  t1=$(date +%s.%N)
  python3 -c "import sys; n=$n; t=$t1-$t0; print(f'{n} streams: rc=$rc, {n*41} frames in {t:.2f} s (incl. start-up and engine load) = {n*41/t:.0f} frames/s')"
done
