#!/usr/bin/env bash
# Runs on the GPU machine (device tool, carry [".devcarry"]): the unit tests of UNIT_FILTER,
# then cold builds (an empty timing cache) of ResNet-50 (torchvision, random weights, FP16) at
# each batch of BATCHES (default "1 64") with each --build-threads of THREADS (default "1 8"),
# one cached rebuild, and a run of the last engine: the builder's summary says where the time
# went (initialising candidates vs timing them).
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
gpu_cli_bundle || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
nproc
if [ -n "${UNIT_FILTER:-}" ]; then
  echo "== unit tests: $UNIT_FILTER"
  edgeinfer_unit_tests --gtest_filter="$UNIT_FILTER" >"$out/unit.log" 2>&1
  echo "unit rc=$?"
  grep -E "^\[  (PASSED|FAILED|  SKIPPED) |candidates ran|tests ran" "$out/unit.log" | tail -n 20
fi
gpu_export_resnet50 /tmp/r50
for b in ${BATCHES:-1 64}; do
  for t in ${THREADS:-1 8}; do
    echo "== ResNet-50 FP16 cold build, batch $b, --build-threads $t"
    rm -f "/tmp/r50/cold_${b}_$t.cache"
    TIMEFORMAT="   wall %R s"
    time edgeinfer build /tmp/r50/model.onnx --fp16 \
      --shapes "input:${b}x3x224x224" --build-threads "$t" \
      --timing-cache "/tmp/r50/cold_${b}_$t.cache" -o "/tmp/r50/b${b}_t$t.engine" 2>&1 |
      grep -E "candidates timed|wall|rror" | sed 's/^/   /'
  done
done
b=$(echo "${BATCHES:-1 64}" | awk '{print $NF}')
t=$(echo "${THREADS:-1 8}" | awk '{print $NF}')
echo "== cached rebuild, batch $b"
time edgeinfer build /tmp/r50/model.onnx --fp16 \
  --shapes "input:${b}x3x224x224" --timing-cache "/tmp/r50/cold_${b}_$t.cache" \
  -o /tmp/r50/cached.engine 2>&1 | grep -E "candidates|wall|rror" | sed 's/^/   /'
echo "== bench of the cold-built engine, batch $b"
edgeinfer bench "/tmp/r50/b${b}_t$t.engine" --iterations 200 2>&1 | tail -n 6
