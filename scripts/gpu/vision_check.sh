#!/usr/bin/env bash
# Runs on the GPU machine (device tool), in one call: the unit tests (GPU tests included),
# the GPU vision benchmarks (edgeinfer bench-vision: 1080p NV12 -> 640x640 letterboxed FP16
# NCHW at batch 1 and 8; NMS of 10,000 candidates), then, time allowing, COMPARE_ARGS through
# scripts/bench/compare_pytorch.py (as gpu_engine_check.sh). Needs the bundle built with
# CUDA on the dev machine (see device_tests.sh) and the device tool's carry [".bundle"].
# Writes unit_tests.log and vision_bench.txt to $OUT.
set -uo pipefail
start=$SECONDS
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# A bundle too large to carry as a folder (FFmpeg's libraries) comes as .devcarry/bundle.tar.xz
# with the media and models the tests read (.devcarry/media, .devcarry/models, the 1080p clip),
# carried with the device tool's carry [".devcarry"]; see docs/performance.md, "Vision on the GPU".
if [ -f .devcarry/bundle.tar.xz ]; then
  mkdir -p /tmp/ei && tar -xJf .devcarry/bundle.tar.xz -C /tmp/ei
  # Programs newer than the bundle: .devcarry/fresh/<program>.xz replace the bundle's.
  for f in .devcarry/fresh/*.xz; do
    [ -f "$f" ] || continue
    xz -dc "$f" >"/tmp/ei/.bundle/bin/$(basename "$f" .xz)" && chmod +x "/tmp/ei/.bundle/bin/$(basename "$f" .xz)"
  done
  # shellcheck source=/dev/null
  source /tmp/ei/.bundle/env.sh
  export EDGEINFER_MEDIA_DIR=$PWD/.devcarry/media EDGEINFER_MODELS_DIR=$PWD/.devcarry/models
  mkdir -p /usr/share/forensics-samples/original-files/movie1
  cp .devcarry/*.mp4 /usr/share/forensics-samples/original-files/movie1/ 2>/dev/null || true
else
  # shellcheck source=/dev/null
  source .bundle/env.sh
fi
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
echo "== unit tests (${UNIT_FILTER:-all})"
timeout -k 5 "${UNIT_TIMEOUT_S:-200}" edgeinfer_unit_tests --gtest_brief=1 \
  ${UNIT_FILTER:+--gtest_filter="$UNIT_FILTER"} >"$out/unit_tests.log" 2>&1
unit_rc=$?
grep -E "^\[  (PASSED|FAILED) |tests? from .* ran|^\[  FAILED  \]" "$out/unit_tests.log" | tail -n 30
echo "skipped: $(grep -c '^\[  SKIPPED \] ' "$out/unit_tests.log")"
[ -n "${UNIT_ONLY:-}" ] && exit "$unit_rc"
echo "== vision benchmarks"
{
  edgeinfer bench-vision preprocess --batch 8 --fp16
  edgeinfer bench-vision preprocess --batch 1 --fp16
  edgeinfer bench-vision preprocess --batch 8
  edgeinfer bench-vision preprocess --batch 8 --fp16 --layout NHWC
  edgeinfer bench-vision preprocess --batch 8 --fp16 --format BGRx
  edgeinfer bench-vision nms --boxes 10000 --objects 200
  edgeinfer bench-vision nms --boxes 10000 --objects 2000
  edgeinfer bench-vision nms --boxes 1000 --objects 50
  if [ -n "${EDGEINFER_MODELS_DIR:-}" ]; then
    for p in fp16 fp32; do
      edgeinfer bench "$EDGEINFER_MODELS_DIR/blazeface/blazeface_back_256.onnx" --backend cuda \
        $([ $p = fp16 ] && echo --fp16) --iterations 500 2>&1 | grep -E "latency|p50|throughput|GPU" | head -5
    done
  fi
} 2>&1 | tee "$out/vision_bench.txt"
if [ -n "${COMPARE_ARGS:-}" ]; then
  left=$((${BUDGET_S:-540} - (SECONDS - start) - 20))
  echo "== compare_pytorch.py $COMPARE_ARGS (${left} s)"
  py=/opt/torch/.venv/bin/python
  # shellcheck disable=SC2086
  PYTHONUNBUFFERED=1 timeout -k 10 "$left" "$py" scripts/bench/compare_pytorch.py \
    --edgeinfer "$(command -v edgeinfer)" --work /tmp/ei_compare --time-budget $((left * 3 / 4)) \
    $COMPARE_ARGS 2>&1 | tee "$out/compare.txt" | grep -v -E '^(###)'
fi
echo "== done in $((SECONDS - start)) s; unit tests rc=$unit_rc"
exit $unit_rc
