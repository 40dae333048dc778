#!/usr/bin/env bash
# Runs on the GPU machine (device tool) in one call of under 9 minutes: `edgeinfer device`,
# the unit tests (as device_tests.sh), then our GPU engines against PyTorch on ResNet-50,
# MobileNetV2 and EfficientNet-B0 (scripts/bench/compare_pytorch.py: cold and cached build
# times, identical engines, accuracy, speed at batch 1 and 64, FP16 and FP32).
# Needs the bundle built on the dev machine with CUDA (see device_tests.sh) and the device
# tool's carry [".bundle"]. Writes device.txt, unit_tests.log, compare.txt, compare.json and
# work_logs.tar.gz to $OUT; engines and ONNX files stay in /tmp.
# Environment: BUDGET_S (whole script, default 530), UNIT_TIMEOUT_S (default 150; 0 skips the
# unit tests), UNIT_FILTER (gtest filter, default all), COMPARE_ARGS (more compare_pytorch.py
# arguments, e.g. "--models resnet50 --compile").
set -uo pipefail
start=$SECONDS
budget=${BUDGET_S:-530}
unit_timeout=${UNIT_TIMEOUT_S:-150}
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# shellcheck source=/dev/null
source .bundle/env.sh
out=${OUT:-/tmp/out}
work=/tmp/edgeinfer_compare
mkdir -p "$out"
py=/opt/torch/.venv/bin/python
[ -x "$py" ] || py=python3
if ! command -v edgeinfer >/dev/null; then
  echo "error: edgeinfer is not in .bundle/bin (build the bundle first)" >&2
  exit 2
fi

echo "== device"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
edgeinfer device 2>&1 | tee "$out/device.txt"

unit_rc=skipped
if [ "$unit_timeout" -gt 0 ]; then
  echo "== unit tests (timeout ${unit_timeout} s, log in \$OUT/unit_tests.log)"
  timeout -k 5 "$unit_timeout" edgeinfer_unit_tests --gtest_brief=1 ${UNIT_FILTER:+--gtest_filter="$UNIT_FILTER"} \
    >"$out/unit_tests.log" 2>&1
  unit_rc=$?
  [ "$unit_rc" = 124 ] && echo "unit tests TIMED OUT after ${unit_timeout} s"
  grep -E "^\[  (PASSED|FAILED) |tests? from .* ran" "$out/unit_tests.log" | tail -n 12
  echo "skipped tests: $(grep -c "^\[  SKIPPED \] " "$out/unit_tests.log")"
fi

left=$((budget - (SECONDS - start) - 15))
[ "$left" -ge 60 ] || left=60
echo "== compare with PyTorch (${left} s left; tables in the summary)"
rm -rf "$work"
# --time-budget stops starting new configurations in time to print the tables; timeout is
# the backstop (compare_pytorch.py still prints and saves what it measured on SIGTERM).
# shellcheck disable=SC2086
PYTHONUNBUFFERED=1 timeout -k 10 "$left" "$py" scripts/bench/compare_pytorch.py \
  --edgeinfer "$(command -v edgeinfer)" --batch 1,64 --precision both \
  --json "$out/compare.json" --work "$work" --time-budget $((left * 3 / 4)) ${COMPARE_ARGS:-} \
  2>&1 | tee "$out/compare.txt" | grep -v -E '^(\||###)'
cmp_rc=${PIPESTATUS[0]}

# Logs and JSON of the work directory (build reports, bench results) as one archive in $OUT
# (the device tool returns at most 8 files); engines, ONNX and .npy files stay in /tmp.
if [ -d "$work" ]; then
  (cd "$work" && find . -type f \( -name '*.json' -o -name '*.log' -o -name '*.txt' \) -print0 |
    tar -czf "$out/work_logs.tar.gz" --null -T -)
  du -sh "$work" | sed 's/^/work dir, not copied: /'
fi

echo
echo "== summary ($((SECONDS - start)) s)"
sed -n '/^GPU .*ours: /,$p' "$out/compare.txt"  # tables, failures and counts
echo "unit tests: rc=$unit_rc; compare_pytorch.py: rc=$cmp_rc (0 all passed, 1 a failure, 3 budget left some out, 124 timed out)"
[ "$unit_rc" = 0 ] || [ "$unit_rc" = skipped ] || exit 1
exit "$cmp_rc"
