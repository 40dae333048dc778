#!/usr/bin/env bash
# The main job, from a fresh Debian machine: set up, build, fetch the real BlazeFace face
# detector and real webcam footage (Debian's kphotoalbum demo video, fetched without
# installing it), then run the video pipeline: decode (FFmpeg) -> preprocess -> BlazeFace
# (GPU engine when a GPU is usable, else the CPU) -> decode boxes and landmarks -> draw
# (OpenCV) -> encode H.264 MP4, plus one JSON line of detections per frame.
#
# The pipeline is examples/camera_app.cpp (the SDK in an application, no GStreamer); the
# GStreamer element arrives with issue 5. Environment: BUILD_DIR (default build/release),
# JOBS (default nproc), VIDEO (another input video or rtsp:// URL), MODEL (another config).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build/release}
jobs=${JOBS:-$(nproc)}

echo "== demo: set-up"
scripts/setup.sh

echo "== demo: build ($build)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DEDGEINFER_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$jobs" --target edgeinfer_cli camera_app

echo "== demo: model and footage"
models/fetch.sh blazeface
scripts/fetch_media.sh
model=${MODEL:-models/blazeface/model.json}
video=${VIDEO:-build/media/kphotoalbum/movie.avi}

out=$build/demo
mkdir -p "$out"
echo "== demo: $video -> BlazeFace -> $out/faces.mp4 + $out/faces.jsonl"
"$build/camera_app" "$model" "$video" "$out/faces.mp4" "$out/faces.jsonl"
echo "== demo: done. Annotated video: $out/faces.mp4, detections (JSON lines): $out/faces.jsonl"
