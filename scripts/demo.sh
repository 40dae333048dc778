#!/usr/bin/env bash
# The main job, from a fresh Debian machine: set up, build, fetch the real BlazeFace face
# detector, build an engine for this machine and run it, printing its outputs and timing.
#
# Today this runs the model from the command line on the CPU reference backend (the video
# pipeline and the GPU backend arrive with the vision, GStreamer and CUDA work; README.md
# says what exists). Environment: BUILD_DIR (default build/release), JOBS (default nproc).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
build=${BUILD_DIR:-build/release}
jobs=${JOBS:-$(nproc)}

echo "== demo: set-up"
scripts/setup.sh

echo "== demo: build ($build)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DEDGEINFER_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"$jobs"

echo "== demo: model"
models/fetch.sh blazeface
model=models/blazeface/blazeface_front_128.onnx

out=$build/demo
mkdir -p "$out"
echo "== demo: engine build"
"$build/edgeinfer" build "$model" -o "$out/blazeface.engine"

echo "== demo: run (100 timed runs after 10 warm-up runs)"
"$build/edgeinfer" run "$out/blazeface.engine" --seed 1 --warmup 10 --iterations 100 --outputs "$out/outputs"
echo "== demo: done. Engine: $out/blazeface.engine, outputs (.npy): $out/outputs/"
