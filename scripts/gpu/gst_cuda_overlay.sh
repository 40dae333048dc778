#!/usr/bin/env bash
# Runs on the GPU machine (device tool, carry [".devcarry-gst"]): edgeoverlay drawing in CUDA
# memory. .devcarry-gst/bundle.tar.xz holds the plugin, the GStreamer test binary
# (edgeinfer_gst_tests) and the Debian plugins; the test binary has its build's plugin paths
# compiled in (tests/gst/CMakeLists.txt), so they are recreated here from the bundle
# (BUILD_DIR: the build directory the bundle was made from). Then:
#   1. edgeinfer_gst_tests --gtest_filter='CudaOverlay*:OverlayRuns*' (the kernel against the
#      host drawing; cudaupload ! edgeoverlay ! cudadownload; caps);
#   2. nvh264dec ! edgeinfer ! edgeoverlay (CUDA memory) ! cudadownload ! x264enc ! mp4mux on
#      the 1080p clip: no host copy before the overlay (the caps edgeoverlay negotiated).
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
gpu_gst_bundle
build=${BUILD_DIR:-/work/main/build/cuda}
mkdir -p "$build/plugins/gst" "$build/tests/gst/system-plugins"
cp /tmp/eg/.bundle-gst/gst/libgstedgeinfer.so "$build/plugins/gst/"
for p in /tmp/eg/.bundle-gst/gst/libgst*.so; do
  [ "$(basename "$p")" = libgstedgeinfer.so ] || ln -sf "$p" "$build/tests/gst/system-plugins/"
done
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

echo "== 1. edgeinfer_gst_tests ${GST_FILTER:-CudaOverlay*:OverlayRuns*}"
tests=$(command -v edgeinfer_gst_tests || echo /tmp/eg/.bundle-gst/gst/edgeinfer_gst_tests)
timeout -k 5 300 "$tests" --gtest_filter="${GST_FILTER:-CudaOverlay*:OverlayRuns*}" \
  >"$out/gst_tests.log" 2>&1
echo "rc=$?"
grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|^\[  SKIPPED \]" "$out/gst_tests.log" | head -n 30

echo "== 2. nvh264dec ! edgeinfer ! edgeoverlay in CUDA memory ! cudadownload ! x264enc"
export GST_REGISTRY=/tmp/eg/registry.bin
clip=$PWD/.devcarry-gst/VID_20191220_170832.mp4
config=$PWD/.devcarry-gst/models/blazeface/model_back.json
GST_DEBUG=edgeoverlay:5,edgeinfer:4 gst-launch-1.0 -v -e filesrc location="$clip" ! qtdemux ! \
  h264parse ! nvh264dec ! edgeinfer config="$config" backend=gpu engine-cache-dir=/tmp/eg/engines ! \
  edgeoverlay name=ov thickness=6 ! cudadownload ! videoconvert ! x264enc speed-preset=ultrafast ! \
  mp4mux ! filesink location="$out/overlay_cuda.mp4" >"$out/overlay_pipeline.log" 2>&1
echo "rc=$? $(stat -c %s "$out/overlay_cuda.mp4" 2>/dev/null) bytes"
grep -E "ov.sink: caps|ov.src: caps" "$out/overlay_pipeline.log" | head -2 | cut -c1-220
grep -E "ERROR|WARN" "$out/overlay_pipeline.log" | head -5 | cut -c1-240
