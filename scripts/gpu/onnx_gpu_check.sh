#!/usr/bin/env bash
# Runs on the GPU machine (device tool): Debian's ONNX backend node tests against FP32 GPU
# engines, once with the CPU fallback allowed (every test must pass as on the CPU) and once
# with --gpu-only (a model with a layer that no GPU kernel runs counts as unsupported; the
# list of those, by op, is what is left to port), then the unit tests of UNIT_FILTER.
# Carry [".devcarry"] with .devcarry/bundle.tar.xz (edgeinfer_unit_tests and onnx_conformance,
# see vision_check.sh) and .devcarry/node.tar.xz (tar of libonnx-testdata's node/ folder).
# Writes conformance_fallback.txt, conformance_gpu_only.txt and unit_tests.log to $OUT.
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
mkdir -p /tmp/ei /tmp/onnxdata && tar -xJf .devcarry/bundle.tar.xz -C /tmp/ei &&
  tar -xJf .devcarry/node.tar.xz -C /tmp/onnxdata || exit 1
# shellcheck source=/dev/null
source /tmp/ei/.bundle/env.sh
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
known=tests/onnx/known_failures.txt
for mode in fallback gpu_only; do
  echo "== ONNX node tests on the GPU ($mode)"
  start=$SECONDS
  timeout -k 5 "${CONFORMANCE_TIMEOUT_S:-240}" onnx_conformance --data-dir /tmp/onnxdata \
    --suite node --backend cuda --known-failures "$known" --verbose \
    $([ $mode = gpu_only ] && echo --gpu-only) >"$out/conformance_$mode.txt" 2>&1
  echo "rc=$? in $((SECONDS - start)) s"
  grep -E "ONNX conformance:" "$out/conformance_$mode.txt" | tail -n 1
  grep -E "^\[ (FAILED|NOW PASSING) \]" "$out/conformance_$mode.txt" | head -n 40
done
# What keeps models off the GPU: the op of each layer named in a --gpu-only refusal.
echo "== layers without a GPU kernel (--gpu-only), by op"
grep -oE "layer '[^']*' \([A-Za-z]+\) has no GPU implementation" "$out/conformance_gpu_only.txt" |
  sed -E 's/.*\(([A-Za-z]+)\).*/\1/' | sort | uniq -c | sort -rn
echo "== outputs of data-dependent size (both modes), by op"
grep -oE "output of '[^']*', [A-Za-z]+\) depends on the input values" "$out/conformance_gpu_only.txt" |
  sed -E "s/.*', ([A-Za-z]+)\).*/\1/" | sort | uniq -c | sort -rn
if [ -n "${UNIT_FILTER:-}" ]; then
  echo "== unit tests ($UNIT_FILTER)"
  timeout -k 5 "${UNIT_TIMEOUT_S:-200}" edgeinfer_unit_tests --gtest_brief=1 \
    --gtest_filter="$UNIT_FILTER" >"$out/unit_tests.log" 2>&1
  echo "rc=$?"
  grep -E "^\[  (PASSED|FAILED) |tests? from .* ran|^\[  FAILED  \]" "$out/unit_tests.log" | tail -n 30
fi
