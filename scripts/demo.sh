#!/usr/bin/env bash
# The main job, from a fresh Debian machine: set up, build the CLI and the GStreamer plugin,
# fetch the real BlazeFace face detector and real webcam footage (Debian's kphotoalbum demo
# video, fetched without installing it), then run a GStreamer pipeline through our plugin:
#   GPU (an NVIDIA GPU that the SDK can use, and GStreamer's nvh264dec):
#     filesrc ! qtdemux ! h264parse ! nvh264dec ! edgeinfer backend=gpu   (NVDEC's frames read
#       in place in memory:CUDAMemory: zero copy) ! edgeoverlay (drawn on in CUDA memory) !
#       cudadownload ! tee
#   CPU (otherwise):
#     filesrc ! decodebin ! videoconvert ! edgeinfer backend=cpu ! tee
#   and from the tee: edgemetasink (one JSON line of detections per frame) and
#     [CPU: edgeoverlay (boxes, scores, landmarks) !] videoconvert ! x264enc ! mp4mux
#     (annotated MP4).
# The launch lines are pipelines/nvdec_zero_copy.sh and pipelines/file_to_mp4.sh. The footage
# is transcoded once to an H.264 MP4 (x264enc, in the output directory) when it is not one, so
# that both paths read the same file. Prints the path taken, frames, wall time and FPS, frames
# with a face, and where the outputs are; exits non-zero when the pipeline fails or writes no
# frame. examples/camera_app is the same job with the SDK alone (FFmpeg + OpenCV, no GStreamer).
#
# Environment:
#   BUILD_DIR   build directory (default build/release; configured here with Ninja, tests off,
#               CUDA only when an NVIDIA GPU is visible, for its architecture: CUDA_ARCHS,
#               default native)
#   JOBS        parallel build jobs (default nproc)
#   VIDEO       input video file (default the kphotoalbum footage; any file decodebin reads;
#               RTSP cameras: pipelines/rtsp_to_file.sh)
#   MODEL       model config (default models/blazeface/model.json; model_back.json for small
#               faces in large frames)
#   BACKEND     auto (default: GPU path when possible), gpu (fail when not possible) or cpu
#   OUT_DIR     where the outputs go (default BUILD_DIR/demo)
#   SKIP_SETUP=1, SKIP_BUILD=1, SKIP_FETCH=1   skip those steps, e.g. on a GPU machine with a
#               prebuilt build (BUILD_DIR with edgeinfer, plugins/gst/libgstedgeinfer.so and
#               lib/libedgeinfer-gstmeta.so) and GStreamer's tools on PATH:
#                 SKIP_SETUP=1 SKIP_BUILD=1 SKIP_FETCH=1 BUILD_DIR=/path/to/build \
#                   VIDEO=clip.mp4 BACKEND=gpu scripts/demo.sh
set -euo pipefail
caller=$PWD
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build/release}
jobs=${JOBS:-$(nproc)}
backend=${BACKEND:-auto}
model=${MODEL:-models/blazeface/model.json}
video=${VIDEO:-build/media/kphotoalbum/movie.avi}
out=${OUT_DIR:-$build/demo}
build=$(realpath -m "$build")
out=$(realpath -m "$out")
# VIDEO and MODEL may be given relative to where the demo was started.
[[ $video == /* || ! -e $caller/$video ]] || video=$caller/$video
[[ $model == /* || ! -e $caller/$model ]] || model=$caller/$model

die() {
  echo "== demo: FAILED: $*" >&2
  exit 1
}
case "$backend" in auto | gpu | cpu) ;; *) die "BACKEND=$backend: use auto, gpu or cpu" ;; esac

# Whether the machine shows an NVIDIA GPU at all (driver device nodes; Jetson's integrated
# GPU included). Without one, building the CUDA backend would only cost time.
nvidia_gpu_present() {
  local node
  for node in /dev/nvidiactl /dev/nvidia0 /dev/nvhost-ctrl-gpu /dev/nvgpu/igpu0/ctrl; do
    [ -e "$node" ] && return 0
  done
  return 1
}

build_sdk_and_plugin() {
  local args=()
  if [ ! -f "$build/CMakeCache.txt" ]; then
    args+=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DEDGEINFER_BUILD_TESTS=OFF)
    if [ "$backend" = cpu ] || ! nvidia_gpu_present; then
      echo "   (no NVIDIA GPU visible or BACKEND=cpu: CUDA backend not built)"
      args+=(-DEDGEINFER_WITH_CUDA=OFF)
    else
      args+=(-DCMAKE_CUDA_ARCHITECTURES="${CUDA_ARCHS:-native}")
    fi
    if command -v ccache >/dev/null 2>&1; then  # as scripts/test.sh
      export CCACHE_DIR=${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/edgeinfer-ccache}
      args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
        -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
    fi
  fi
  mkdir -p "$build"
  cmake -S . -B "$build" "${args[@]}" >"$build/configure.log" 2>&1 ||
    die "configuring $build failed (see $build/configure.log)"
  grep -E "EdgeInfer: (CUDA backend|GStreamer plugin)" "$build/configure.log" | sed 's/^-- /   /'
  [ -d "$build/plugins/gst" ] ||
    die "CMake found no GStreamer development files (libgstreamer1.0-dev, libgstreamer-plugins-base1.0-dev: scripts/setup.sh)"
  # Only what the demo runs: the CLI (it tells whether the SDK can use the GPU) and the plugin
  # (which builds the SDK and the meta library it links).
  cmake --build "$build" -j"$jobs" --target edgeinfer_cli gstedgeinfer ||
    die "building the CLI and the plugin in $build failed (see above)"
}

# h264_footage VIDEO: prints the path of an H.264 (4:2:0, 8-bit) MP4 of VIDEO, which NVDEC and
# decodebin both read: VIDEO itself when it is one, else a copy transcoded once into $out.
h264_footage() {
  local src=$1 dst type
  # qtdemux only on what typefind calls QuickTime/MP4: on other files its error sometimes
  # leaves gst-launch-1.0 hanging (seen 2 in 40 times on an AVI here); the timeout is a safety net.
  if command -v gst-typefind-1.0 >/dev/null 2>&1; then
    type=$(gst-typefind-1.0 "$src" 2>/dev/null || true)
  else
    type="video/quicktime?"  # no typefind: let qtdemux say
  fi
  if [[ $type == *video/quicktime* ]] &&
    timeout 60 gst-launch-1.0 -q filesrc location="$src" ! qtdemux ! h264parse ! \
      "video/x-h264,chroma-format=(string)4:2:0,bit-depth-luma=(uint)8" ! fakesink >/dev/null 2>&1; then
    echo "$src"
    return
  fi
  dst=$out/footage-$(basename "${src%.*}").mp4
  if [ ! -s "$dst" ] || [ "$src" -nt "$dst" ]; then
    echo "   transcoding $src to H.264: $dst" >&2
    gst-launch-1.0 -q filesrc location="$src" ! decodebin ! videoconvert ! video/x-raw,format=I420 ! \
      x264enc ! h264parse ! mp4mux ! filesink location="$dst.tmp" >"$out/transcode.log" 2>&1 ||
      die "transcoding $src to H.264 failed: $(grep -m1 '^ERROR' "$out/transcode.log" || tail -n 1 "$out/transcode.log")"
    mv "$dst.tmp" "$dst"
  fi
  echo "$dst"
}

# choose_path: sets `path` (gpu or cpu) and `why` from BACKEND, GStreamer's nvh264dec and the
# SDK's view of the GPU (`edgeinfer device`).
choose_path() {
  path=cpu
  why="BACKEND=cpu"
  [ "$backend" = cpu ] && return
  local device
  if ! gst-inspect-1.0 nvh264dec >/dev/null 2>&1; then
    why="GStreamer has no nvh264dec (no NVIDIA GPU or driver with NVDEC, or gstreamer1.0-plugins-bad is missing)"
  elif [ ! -x "$build/edgeinfer" ]; then
    if [ "$backend" = gpu ]; then path=gpu; why="BACKEND=gpu (no $build/edgeinfer to ask)"; return; fi
    why="no $build/edgeinfer to ask whether the SDK can use the GPU"
  elif ! device=$("$build/edgeinfer" device 2>&1) || ! grep -q '^GPU [0-9]*:' <<<"$device"; then
    why="the SDK has no usable GPU ($(grep -m1 '^GPU' <<<"$device" || echo "edgeinfer device failed"))"
  else
    path=gpu
    why="$(grep -m1 '^GPU [0-9]*:' <<<"$device") and nvh264dec"
    return
  fi
  [ "$backend" = gpu ] && die "BACKEND=gpu, but $why"
  return 0
}

# run_demo_pipeline PATH CLIP: runs the pipeline of PATH (gpu or cpu) on CLIP into
# $out/faces.mp4 and $out/faces.jsonl, timing it, then checks and reports the outputs.
run_demo_pipeline() {
  local path=$1 clip=$2 mp4=$out/faces.mp4 jsonl=$out/faces.jsonl log=$out/pipeline.log
  local debug=$out/gst-debug.log script t0 t1
  rm -f "$mp4" "$jsonl" "$debug"
  if [ "$path" = gpu ]; then script=pipelines/nvdec_zero_copy.sh; else script=pipelines/file_to_mp4.sh; fi
  echo "== demo: $script $clip -> $mp4 + $jsonl"
  # edgeinfer logs (category edgeinfer, level INFO) when its engine is ready and, at the end,
  # how many frames it read in place from CUDA memory.
  t0=$EPOCHREALTIME
  if ! GST_DEBUG="${GST_DEBUG:+$GST_DEBUG,}edgeinfer:4" GST_DEBUG_FILE=$debug GST_DEBUG_NO_COLOR=1 \
    EDGEINFER_BACKEND=$path EDGEINFER_OVERLAY=${EDGEINFER_OVERLAY:-} \
    "$script" "$clip" "$mp4" "$model" "$jsonl" 2>&1 | tee "$log"; then
    die "the pipeline failed (log: $log, GStreamer debug log: $debug)"
  fi
  t1=$EPOCHREALTIME
  local frames faces ready load inplace decoded=""
  frames=$(grep -c '^{"frame":' "$jsonl" 2>/dev/null || true)
  [ "${frames:-0}" -gt 0 ] || die "the pipeline wrote no frame to $jsonl (log: $log)"
  [ -s "$mp4" ] || die "the pipeline wrote no $mp4 (log: $log)"
  faces=$(grep -c '"box"' "$jsonl" || true)
  ready=$(grep -m1 -o 'ready on the [A-Z]* in [0-9.]* s: engine .*' "$debug" 2>/dev/null || true)
  load=$(sed -n 's/^ready on the [A-Z]* in \([0-9.]*\) s.*/\1/p' <<<"$ready")
  inplace=$(grep -m1 -o '[0-9]* in CUDA memory read in place' "$debug" 2>/dev/null | cut -d' ' -f1 || true)
  # The MP4 decoded again (decodebin: whichever decoder this machine has), frames counted.
  if gst-inspect-1.0 decodebin >/dev/null 2>&1; then
    decoded=$(gst-launch-1.0 -q filesrc location="$mp4" ! decodebin ! edgemetasink location=- 2>/dev/null |
      grep -c '^{"frame":' || true)
    [ "$decoded" = "$frames" ] || die "$mp4 decodes to ${decoded:-no} frames, $frames went through the pipeline"
  fi

  echo "== demo: done"
  if [ "$path" = gpu ]; then
    echo "   path:    GPU: nvh264dec (NVDEC) -> edgeinfer backend=gpu in CUDA memory: ${inplace:-?} of $frames frames read in place (zero copy)"
    [ "${inplace:-0}" = "$frames" ] ||
      echo "   WARNING: not zero copy for every frame (a plugin built without gstreamer-cuda-1.0 maps CUDA frames to the host)"
  else
    echo "   path:    CPU: decodebin -> videoconvert -> edgeinfer backend=cpu ($why)"
  fi
  if [ "$clip" = "$video" ]; then echo "   footage: $video"; else echo "   footage: $video (as H.264: $clip)"; fi
  echo "   model:   $model${ready:+, $ready}"
  echo "   frames:  $frames, a face found in $faces"
  awk -v n="$frames" -v t0="$t0" -v t1="$t1" -v load="${load:-}" 'BEGIN {
    w = t1 - t0
    printf "   time:    %.2f s wall for the whole gst-launch-1.0 run = %.1f FPS; this includes the start-up and the engine load or build", w, n / w
    if (load != "" && w - load > 0) printf " (%.2f s): %.1f FPS after it", load, n / (w - load)
    printf "\n"
  }'
  echo "   outputs: $mp4 (annotated, H.264${decoded:+, decodes to $decoded frames})"
  echo "            $jsonl (one JSON line of detections per frame)"
  echo "   logs:    $log, $debug"
}

if [ "${SKIP_SETUP:-0}" != 1 ]; then
  echo "== demo: set-up"
  scripts/setup.sh
fi
if [ "${SKIP_BUILD:-0}" != 1 ]; then
  echo "== demo: build ($build, the CLI and the GStreamer plugin)"
  build_sdk_and_plugin
fi
if [ "${SKIP_FETCH:-0}" != 1 ]; then
  echo "== demo: model and footage"
  models/fetch.sh blazeface
  scripts/fetch_media.sh
fi
[ -f "$video" ] || die "no video at $video (scripts/fetch_media.sh fetches the default)"
[ -f "$model" ] || die "no model config at $model"

# The plugin of this build, and GStreamer's registry in it (pipelines/common.sh); exits when
# the plugin is missing.
export EDGEINFER_BUILD_DIR=$build
# shellcheck disable=SC1091
source pipelines/common.sh
mkdir -p "$out"

choose_path
echo "== demo: ${path^^} path ($why)"
clip=$(h264_footage "$video")
run_demo_pipeline "$path" "$clip"
