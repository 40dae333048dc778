#!/usr/bin/env bash
# Runs on the GPU machine (device tool, carry [".devcarry"]): how much device memory a
# ResNet-50 (torchvision, random weights) FP16 engine takes with one shape profile (batch 1)
# and with two (batch 1 and PROFILE_BATCH, default 8), loaded from their files: the GPU holds
# weights converted alike in both profiles once (kernels/cuda/device_weights.h). Then the
# same engine file loaded twice in one process (`edgeinfer bench` of two engines is two
# processes, so this runs UNIT_FILTER's unit tests too, default DeviceWeightStore.*).
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
gpu_cli_bundle || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
b2=${PROFILE_BATCH:-8}
gpu_export_resnet50 /tmp/r50
cache=/tmp/r50/timing.cache
echo "== build: batch 1 (one profile), then batch 1 + batch $b2 (two profiles)"
edgeinfer build /tmp/r50/model.onnx --fp16 --shapes input:1x3x224x224 --timing-cache "$cache" \
  -o /tmp/r50/one.engine 2>&1 | grep -E "rror|wall" | sed 's/^/   /'
edgeinfer build /tmp/r50/model.onnx --fp16 --shapes input:1x3x224x224 \
  --shapes "input:${b2}x3x224x224" --timing-cache "$cache" -o /tmp/r50/two.engine 2>&1 |
  grep -E "rror|shape profiles" | sed 's/^/   /'
stat -c '   %s bytes  %n' /tmp/r50/one.engine /tmp/r50/two.engine
for e in one two; do
  echo "== bench $e.engine (batch 1)"
  edgeinfer bench "/tmp/r50/$e.engine" --iterations 50 --json "$out/bench_$e.json" 2>&1 |
    grep -E "device memory|latency|rror" | sed 's/^/   /'
done
echo "== unit tests: ${UNIT_FILTER:-DeviceWeightStore.*}"
edgeinfer_unit_tests --gtest_filter="${UNIT_FILTER:-DeviceWeightStore.*}" >"$out/unit.log" 2>&1
echo "unit rc=$?"
grep -E "^\[  (PASSED|FAILED|  SKIPPED) " "$out/unit.log" | tail -n 12
