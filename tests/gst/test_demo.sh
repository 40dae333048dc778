#!/usr/bin/env bash
# scripts/demo.sh's pipeline part, end to end, on a short clip (ctest: gst_demo): the demo
# itself with its set-up, build and fetch steps skipped (SKIP_SETUP/SKIP_BUILD/SKIP_FETCH),
# this build as BUILD_DIR and BACKEND=cpu, on 12 frames of videotestsrc with a real portrait
# laid over it, written as an MJPEG AVI so that the demo's transcoding to H.264 runs too.
# Checks: exit 0, the summary's figures (12 frames, faces in most), as many JSON lines as
# frames, the MP4 decoding to 12 frames; and that the demo fails with a clear message on a
# missing video, an unreadable one, a bad BACKEND and (where GStreamer has no nvh264dec)
# BACKEND=gpu.
#
#   test_demo.sh BUILD_DIR [SANITIZERS]
#
# SANITIZERS (CMake's EDGEINFER_SANITIZE): the plugin is instrumented but the GStreamer tools
# are not, so the sanitizer runtimes the plugin links are preloaded into the demo (and so into
# every tool it runs) and into every GStreamer tool run here, with leak detection off, as
# test_pipelines.sh does. GStreamer's registry is a new file of this run's, for the reason
# test_pipelines.sh gives.
set -uo pipefail

build=$(realpath "${1:?usage: test_demo.sh BUILD_DIR [SANITIZERS]}")
sanitize=${2:-}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
media=${EDGEINFER_MEDIA_DIR:-$repo/build/media}
models=${EDGEINFER_MODELS_DIR:-$repo/models}
plugin=$build/plugins/gst/libgstedgeinfer.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
pass() { echo "ok: $*"; }

[ -f "$plugin" ] || { echo "FAIL: $plugin is missing (build the gstedgeinfer target)" >&2; exit 1; }
if [ ! -f "$models/blazeface/blazeface_back_256.onnx" ] || [ ! -f "$media/kphotoalbum/anne_helene.jpg" ]; then
  echo "SKIP: needs the BlazeFace model (models/fetch.sh) and the test media (scripts/fetch_media.sh)"
  exit 0
fi
preload=""
if [ -n "$sanitize" ]; then
  preload=$(ldd "$plugin" | awk '/lib(asan|ubsan|tsan|lsan)\.so/ {print $3}' | paste -sd: -)
  [ -n "$preload" ] || { echo "FAIL: $plugin links no sanitizer runtime (SANITIZERS=$sanitize)" >&2; exit 1; }
fi

# demo LOG [VAR=VALUE...]: runs scripts/demo.sh on this build (no set-up, build or fetch), its
# output in LOG; returns its exit status.
demo() {
  local log=$1
  shift
  env SKIP_SETUP=1 SKIP_BUILD=1 SKIP_FETCH=1 BUILD_DIR="$build" OUT_DIR="$work/out" \
    XDG_CACHE_HOME="$work/cache" MODEL="$models/blazeface/model_back.json" BACKEND=cpu \
    ${preload:+LD_PRELOAD=$preload ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0} \
    "$@" timeout 300 "$repo/scripts/demo.sh" >"$log" 2>&1
}

# gsttool COMMAND...: a GStreamer tool, with the sanitizer runtimes preloaded in a sanitizer
# build (a tool without them that scans the plugin first would blacklist it in the registry).
gsttool() {
  env ${preload:+LD_PRELOAD=$preload ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0} "$@"
}

# The clip: 12 frames, a portrait (a real face) over videotestsrc, MJPEG in AVI.
export GST_PLUGIN_PATH=$build/plugins/gst GST_REGISTRY=$work/registry.bin
export GST_PLUGIN_PATH_1_0=$GST_PLUGIN_PATH GST_REGISTRY_1_0=$GST_REGISTRY
export EDGEINFER_GST_REGISTRY=$GST_REGISTRY  # read by the demo's pipelines/common.sh
if ! gsttool gst-launch-1.0 -q videotestsrc num-buffers=12 pattern=ball ! \
  video/x-raw,width=320,height=240,framerate=15/1 ! \
  gdkpixbufoverlay location="$media/kphotoalbum/anne_helene.jpg" offset-x=80 overlay-width=160 \
  overlay-height=240 ! videoconvert ! jpegenc ! avimux ! filesink location="$work/clip.avi" \
  >"$work/clip.log" 2>&1; then
  echo "FAIL: making the test clip failed: $(tail -3 "$work/clip.log")" >&2
  exit 1
fi

# ---- The demo on the clip ------------------------------------------------------------------
if demo "$work/demo.log" VIDEO="$work/clip.avi"; then
  pass "demo.sh ran (BACKEND=cpu, 12-frame clip)"
  sed -n '/^== demo: done/,$p' "$work/demo.log"
  summary=$(sed -n '/^== demo: done/,$p' "$work/demo.log")
  grep -q "path: *CPU" <<<"$summary" || fail "the summary names no CPU path"
  faces=$(sed -n 's/^ *frames: *12, a face found in \([0-9]*\)$/\1/p' <<<"$summary")
  if [ -z "$faces" ]; then
    fail "the summary does not say 12 frames: $(grep frames: <<<"$summary")"
  elif [ "$faces" -lt 12 ]; then
    fail "faces found in $faces of 12 frames (the portrait is in every frame)"
  else
    pass "summary: 12 frames, faces in $faces"
  fi
  grep -Eq "time: .* s wall .* FPS" <<<"$summary" || fail "the summary has no time and FPS"
  grep -q "decodes to 12 frames" <<<"$summary" || fail "the summary does not say the MP4 decodes to 12 frames"
  lines=$(grep -c '^{"frame":' "$work/out/faces.jsonl" 2>/dev/null)
  [ "$lines" = 12 ] && pass "faces.jsonl: 12 lines" || fail "faces.jsonl: ${lines:-no} lines, 12 frames"
  [ -s "$work/out/footage-clip.mp4" ] && pass "the AVI was transcoded to H.264 once" ||
    fail "no transcoded footage-clip.mp4 in the output directory"
  # The MP4 decoded here too, independently of the demo's own check.
  decoded=$(gsttool gst-launch-1.0 -q filesrc location="$work/out/faces.mp4" ! qtdemux ! h264parse ! \
    avdec_h264 ! edgemetasink location=- 2>/dev/null | grep -c '^{"frame":')
  [ "$decoded" = 12 ] && pass "faces.mp4 decodes (avdec_h264) to 12 frames" ||
    fail "faces.mp4 decodes to ${decoded:-no} frames, 12 went in"
  # A second run reuses the transcoded clip.
  if demo "$work/demo2.log" VIDEO="$work/clip.avi" && ! grep -q "transcoding" "$work/demo2.log"; then
    pass "second run: the transcoded clip reused"
  else
    fail "second run: $(tail -3 "$work/demo2.log")"
  fi
else
  fail "demo.sh failed: $(tail -20 "$work/demo.log")"
fi

# ---- Failures are reported -----------------------------------------------------------------
# expect_failure NAME MESSAGE VAR=VALUE...: the demo exits non-zero and says MESSAGE.
expect_failure() {
  local name=$1 message=$2
  shift 2
  if demo "$work/$name.log" "$@"; then
    fail "$name: demo.sh succeeded"
  elif grep -q "== demo: FAILED: .*$message" "$work/$name.log"; then
    pass "$name: fails with '$(grep -m1 '== demo: FAILED' "$work/$name.log" | cut -c1-120)'"
  else
    fail "$name: no '$message' in: $(tail -3 "$work/$name.log")"
  fi
}
expect_failure missing_video "no video at" VIDEO="$work/none.mp4"
head -c 5000 /dev/urandom >"$work/noise.avi"
expect_failure unreadable_video "transcoding .* failed" VIDEO="$work/noise.avi"
expect_failure bad_backend "BACKEND=tpu" VIDEO="$work/clip.avi" BACKEND=tpu
if gsttool gst-inspect-1.0 nvh264dec >/dev/null 2>&1; then
  echo "SKIP: BACKEND=gpu without nvh264dec (this machine has nvh264dec)"
else
  expect_failure gpu_without_nvdec "BACKEND=gpu, but GStreamer has no nvh264dec" \
    VIDEO="$work/clip.avi" BACKEND=gpu
fi

echo "$failures failure(s)"
exit $((failures > 0))
