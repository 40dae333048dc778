#!/usr/bin/env bash
# Shows: N video files batched into one detector (edgemux -> edgeinfer batch-size=N -> edgedemux), each stream's faces drawn into its own H.264 MP4, every stream's results in one JSON file with stream ids.
#
#   pipelines/multi_stream.sh [OUTPUT_DIR [INPUT ...]]
#
# Defaults: build/pipelines/multi_stream, three streams: kphotoalbum's webcam footage
# (scripts/fetch_media.sh) three times. Any files decodebin can read work, of any sizes and
# frame rates: stream i is edgemux's sink_i and edgedemux's src_i, and is written to
# OUTPUT_DIR/stream<i>.mp4; OUTPUT_DIR/results.jsonl has one line per frame of every stream
# ("stream": i). EDGEINFER_CONFIG picks the model config (default
# models/blazeface/model.json), EDGEINFER_BACKEND=cpu|gpu|auto (default auto).
#
# The JSON sink reads the batches on a tee branch, so the frames are shared with it: the
# overlay then draws on a copy of each frame (drop the tee branch to avoid that copy). Each
# branch after edgedemux needs a queue, as after any demuxer.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
outdir=${1:-$repo/build/pipelines/multi_stream}
shift $(($# > 0 ? 1 : 0))
inputs=("$@")
if [ ${#inputs[@]} -eq 0 ]; then
  inputs=("$media/kphotoalbum/movie.avi" "$media/kphotoalbum/movie.avi" "$media/kphotoalbum/movie.avi")
fi
config=${EDGEINFER_CONFIG:-$models/blazeface/model.json}
n=${#inputs[@]}
mkdir -p "$outdir"

sources=() outputs=()
for i in "${!inputs[@]}"; do
  sources+=(filesrc location="${inputs[$i]}" ! decodebin ! videoconvert ! "m.sink_$i")
  outputs+=("d.src_$i" ! queue ! edgeoverlay ! videoconvert ! x264enc tune=zerolatency ! mp4mux !
    filesink location="$outdir/stream$i.mp4")
done
gst-launch-1.0 -e \
  edgemux name=m ! \
  edgeinfer config="$config" batch-size="$n" backend="${EDGEINFER_BACKEND:-auto}" ! tee name=t \
  t. ! queue ! edgemetasink location="$outdir/results.jsonl" \
  t. ! queue ! edgedemux name=d \
  "${sources[@]}" "${outputs[@]}"
echo "wrote $n streams: $outdir/stream{0..$((n - 1))}.mp4 and $outdir/results.jsonl"
