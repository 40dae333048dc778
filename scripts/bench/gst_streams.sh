#!/usr/bin/env bash
# Streams per machine through GStreamer: N copies of an H.264 file decoded in parallel, batched
# by edgemux, run through ONE edgeinfer (batch-size=N) and split again by edgedemux:
#
#   filesrc ! qtdemux ! h264parse ! DECODER ! edgemux.sink_i     (i = 0 .. N-1)
#   edgemux ! edgeinfer batch-size=N ! edgedemux ; edgedemux.src_i ! queue ! sink
#
# DECODER is nvh264dec when GStreamer has it (a GPU machine; with the CUDA build the frames stay
# in CUDA memory up to edgeinfer), else avdec_h264, else decodebin ! videoconvert. The sink is
# edgemetasink writing to a file (sync=false async=false: it renders as fast as frames come and
# does not hold the start) so that every stream's frames can be counted; it writes one short
# JSON line per frame.
#
# Modes (-m, default "decode,mux,infer"):
#   decode  decoding alone: DECODER ! sink per stream (no batching, no inference)
#   mux     decoding + edgemux ! edgedemux (batching alone, no inference)
#   infer   the whole pipeline above
# For each mode it prints frames, seconds, total FPS, FPS per stream, and whether every stream
# kept real time (FPS per stream >= REALTIME_FPS, default 30). Seconds are gst-launch-1.0's
# "Execution ended after": from PLAYING to EOS, so the engine build/load (edgeinfer's start,
# done before PLAYING) is not counted; the process's wall time, with it, is printed too.
#
#   scripts/bench/gst_streams.sh [-n STREAMS] [-m MODES] [CLIP.mp4]
#
# CLIP: an H.264 MP4 or Annex B elementary stream (.h264/.264: several copies of one `cat`
# together make a long clip without re-encoding) (default: the 1080p phone clip of Debian's forensics-samples-files when
# installed, else kphotoalbum's webcam footage from scripts/fetch_media.sh transcoded to H.264
# into build/bench/). EDGEINFER_BUILD_DIR (default build/release), EDGEINFER_CONFIG (default
# models/blazeface/model.json), EDGEINFER_BACKEND (default auto), EDGEINFER_BATCH (the engine's
# batch, default STREAMS: one engine call per batch; smaller, one engine serves every N),
# EDGEINFER_IN_FLIGHT (edgeinfer's in-flight, default 0: 2 on the GPU, 1 on the CPU),
# REALTIME_FPS (default 30). For the infer mode it also prints edgeinfer's own summary (GST_DEBUG
# edgeinfer:4): the engine's build or load time, how busy the element was, and its time per
# engine run by stage (preprocess, engine, outputs, decode, the element's own work).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/../../pipelines/common.sh"

streams=4
modes=decode,mux,infer
while getopts "n:m:h" opt; do
  case $opt in
    n) streams=$OPTARG ;;
    m) modes=$OPTARG ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed 's/^# \{0,1\}//;/^set -euo/d'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
config=${EDGEINFER_CONFIG:-$models/blazeface/model.json}
backend=${EDGEINFER_BACKEND:-auto}
realtime=${REALTIME_FPS:-30}
batch=${EDGEINFER_BATCH:-$streams}  # the engine's batch; a batch of more frames runs in passes
inflight=${EDGEINFER_IN_FLIGHT:-0}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

phone=/usr/share/forensics-samples/original-files/movie1/VID_20191220_170832.mp4
clip=${1:-}
if [ -z "$clip" ]; then
  if [ -f "$phone" ]; then
    clip=$phone
  else
    clip=$repo/build/bench/webcam_h264.mp4
    if [ ! -f "$clip" ]; then
      src=$media/kphotoalbum/movie.avi
      [ -f "$src" ] || { echo "no clip: give an H.264 MP4, or run scripts/fetch_media.sh" >&2; exit 1; }
      mkdir -p "$(dirname "$clip")"
      echo "transcoding $src to H.264: $clip"
      gst-launch-1.0 -q filesrc location="$src" ! decodebin ! videoconvert ! \
        x264enc speed-preset=ultrafast ! mp4mux ! filesink location="$clip"
    fi
  fi
fi
[ -f "$clip" ] || { echo "no such clip: $clip" >&2; exit 1; }

if gst-inspect-1.0 nvh264dec >/dev/null 2>&1; then
  decoder="nvh264dec"
elif gst-inspect-1.0 avdec_h264 >/dev/null 2>&1; then
  decoder="avdec_h264"
else
  decoder="decodebin ! videoconvert"
fi
parse="qtdemux ! h264parse !"
case $clip in *.h264 | *.264) parse="h264parse !" ;; esac  # an Annex B elementary stream
[ "$decoder" = "decodebin ! videoconvert" ] && parse=""
sink="edgemetasink sync=false async=false"

gpu="none"
command -v nvidia-smi >/dev/null && gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 || true)
echo "clip $clip, $streams streams, decoder $decoder, model $config (backend $backend, engine batch $batch)"
echo "machine: $(nproc) CPU cores, GPU: ${gpu:-none}; build $build"

# run MODE: the pipeline of MODE; prints one table row.
run() {
  local mode=$1 desc=() i
  for ((i = 0; i < streams; i++)); do
    # shellcheck disable=SC2206  # $parse and $decoder are launch-line fragments
    desc+=(filesrc location="$clip" ! $parse $decoder !)
    if [ "$mode" = decode ]; then
      desc+=(queue ! $sink location="$work/$mode-$i.jsonl")
    else
      desc+=("m.sink_$i" "d.src_$i" ! queue ! $sink location="$work/$mode-$i.jsonl")
    fi
  done
  case $mode in
    mux) desc+=(edgemux name=m ! edgedemux name=d) ;;
    infer) desc+=(edgemux name=m ! edgeinfer config="$config" backend="$backend" batch-size="$batch"
      in-flight="$inflight" ! edgedemux name=d) ;;
  esac
  local t0 t1 out
  t0=$(date +%s.%N)
  # edgeinfer's INFO lines: how its engine came to be, and at the end where its time went.
  if ! out=$(GST_DEBUG="${GST_DEBUG:-edgeinfer:4,edgeinfer-sdk:4}" GST_DEBUG_NO_COLOR=1 gst-launch-1.0 "${desc[@]}" 2>&1); then
    echo "$mode: the pipeline failed:" >&2
    tail -5 <<<"$out" >&2
    return 1
  fi
  t1=$(date +%s.%N)
  printf '%s\n' "$out" >"$work/$mode.log"
  python3 - "$mode" "$streams" "$realtime" "$t0" "$t1" "$work" <<'EOF'
import re, sys
mode, n, realtime, work = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[6]
t0, t1 = float(sys.argv[4]), float(sys.argv[5])
m = re.search(r"Execution ended after (\d+):(\d+):([\d.]+)", open(f"{work}/{mode}.log").read())
secs = int(m.group(1)) * 3600 + int(m.group(2)) * 60 + float(m.group(3)) if m else float("nan")
frames = [sum(1 for _ in open(f"{work}/{mode}-{i}.jsonl")) for i in range(n)]
total = sum(frames)
boxes = sum(open(f"{work}/{mode}-{i}.jsonl").read().count('"box"') for i in range(n))
per = [f / secs for f in frames]
ok = "yes" if min(per) >= realtime else "no"
print(f"{mode:7s} {n:7d} {total:7d} {secs:8.3f} {total / secs:10.1f} {min(per):9.1f} {max(per):9.1f} "
      f"{ok:>9s} {t1 - t0:10.2f}")
if mode == "infer" and total:
    print(f"    {boxes / total:.1f} detections a frame")
EOF
  grep -E "ready on the|busy [0-9]+% of|GPU engine for|runs in flight" "$work/$mode.log" | sed 's/^.*> /    edgeinfer: /' || true
}

printf "%-7s %7s %7s %8s %10s %9s %9s %9s %10s\n" mode streams frames seconds "total FPS" \
  "min FPS/s" "max FPS/s" "real time" "wall (s)"
IFS=, read -ra list <<<"$modes"
for mode in "${list[@]}"; do
  case $mode in decode | mux | infer) run "$mode" ;; *) echo "unknown mode $mode" >&2; exit 2 ;; esac
done
echo "(FPS/s: frames per second of one stream; real time: every stream >= $realtime FPS;" \
  "wall: the whole gst-launch-1.0 run, engine build or load included)"
