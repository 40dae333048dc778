#!/usr/bin/env bash
# Runs on the GPU machine (device tool): the cublaslt-i8 provider (cuBLASLt INT8 GEMMs for 1x1
# convolutions and Gemm/MatMul, issue 6). Carry a folder CARRY (default .devcarry-i8gemm) holding
# bundle.tar.xz (bundle-runtime.sh of build/cuda/edgeinfer and tests/edgeinfer_unit_tests into
# a folder "b") and this script with common.sh. Everything is bounded by BUDGET_S (default 540 s):
# a step that would start after it is skipped and says so. Logs: $OUT/logs.tgz (the device tool
# returns at most 8 files).
#   STEPS (default "unit perf strict timed64 timed1"):
#   unit     the INT8 unit tests (UNIT_FILTER)
#   perf     ResNet-50's 1x1 convolutions at batch 64: cublaslt-i8 vs cuda-i8 vs cuDNN FP16
#            (CublasLtInt8Perf.*, EDGEINFER_PERF_TESTS=1)
#   strict   ResNet-50 (torchvision, random weights) calibrated (min-max, 2 random tensors), INT8
#            strict at batch 64 and 1, and batch 64 without the provider
#            (EDGEINFER_DISABLE_CUBLASLT_INT8=1: the cuda-i8 baseline)
#   timed64  INT8 timed against FP16 at batch 64, verbose: every layer's timing table, and per
#            1x1 layer the best cublaslt-i8, cuda-i8 and FP16/FP32 candidate
#   timed1   INT8 timed at batch 1
#   fp16     FP16 at batch 64 and 1 (the same session's baseline; not in the default STEPS)
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=scripts/gpu/common.sh
source "$here/common.sh"
carry=${CARRY:-$here}
mkdir -p /tmp/ei && tar -xJf "$carry/bundle.tar.xz" -C /tmp/ei || exit 1
# shellcheck source=/dev/null
source /tmp/ei/b/env.sh
gpu_cuda_libs
export XDG_CACHE_HOME=/tmp/ei/cache
final=${OUT:-/tmp/out}
out=/tmp/ei/logs
mkdir -p "$out" "$final"
trap 'tar -C "$out" -czf "$final/logs.tgz" .' EXIT
steps=${STEPS:-unit perf strict timed64 timed1}
deadline=$((SECONDS + ${BUDGET_S:-540}))
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

left() { echo $((deadline - SECONDS)); }
want() {  # step name, seconds it needs at least
  [[ " $steps " == *" $1 "* ]] || return 1
  if [ "$(left)" -lt "$2" ]; then
    echo "== $1 skipped: $(left) s left of the budget"
    return 1
  fi
}

if want unit 60; then
  filter=${UNIT_FILTER:-CublasLt*:CudaInt8*:CudaQdq*}
  echo "== unit tests: $filter"
  timeout -k 5 "${UNIT_TIMEOUT_S:-200}" edgeinfer_unit_tests --gtest_filter="$filter" \
    >"$out/unit.log" 2>&1
  echo "unit rc=$?"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|differ, worst|offered|candidates$|engine vs" \
    "$out/unit.log" | cut -c1-220 | tail -n 70
  echo "skipped: $(grep -c '^\[  SKIPPED \] ' "$out/unit.log")"
fi

if want perf 60; then
  echo "== ResNet-50 1x1 convolutions, batch 64"
  EDGEINFER_PERF_TESTS=1 timeout -k 5 "${PERF_TIMEOUT_S:-150}" edgeinfer_unit_tests \
    --gtest_filter='CublasLtInt8Perf.*' >"$out/perf.log" 2>&1
  echo "perf rc=$?"
  grep -E "^\[          \]|FAILED" "$out/perf.log" | cut -c1-260
fi

r=/tmp/ei/resnet50.onnx
calib=/tmp/ei/r50.calib
resnet() {
  [ -f "$calib" ] && return 0
  /opt/torch/.venv/bin/python - <<'PY'
import numpy as np, os, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet50().eval()
torch.onnx.export(m, torch.randn(1, 3, 224, 224), "/tmp/ei/resnet50.onnx", opset_version=17,
                  input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, dynamo=False)
os.makedirs("/tmp/ei/r50data", exist_ok=True)
rng = np.random.default_rng(0)
for i in range(2):
    np.save(f"/tmp/ei/r50data/s{i}.npy", rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
PY
  edgeinfer calibrate "$r" --data /tmp/ei/r50data --method minmax --dynamic-dim 1 -o "$calib" \
    >"$out/r50_calibrate.log" 2>&1
  echo "calibrate rc=$? $(tail -n 1 "$out/r50_calibrate.log")"
}

# label, batch, then build options: build (log), tactic census of the plan, bench
run_model() {
  local label=$1 b=$2
  shift 2
  local t0=$SECONDS
  timeout -k 5 "$(left)" edgeinfer build "$r" --backend cuda --dynamic-dim "$b" \
    --calibration-cache "$calib" -o "/tmp/ei/$label.engine" "$@" >"$out/build_$label.log" 2>&1
  echo "$label build rc=$? $((SECONDS - t0)) s; $(grep -E "INT8:" "$out/build_$label.log" | head -1 | cut -c1-120)"
  echo "  tactics: $(grep -ao '"tactic":"[a-z0-9-]*' "/tmp/ei/$label.engine" 2>/dev/null |
    sed 's/"tactic":"//' | sort | uniq -c | tr '\n' ' ')"
  timeout -k 5 "$(left)" edgeinfer bench "/tmp/ei/$label.engine" --iterations "${ITERS:-200}" \
    --device-inputs >"$out/bench_$label.log" 2>&1
  echo "  bench rc=$? $(grep -E "latency|throughput|GPU time" "$out/bench_$label.log" | tr '\n' ' ' | cut -c1-260)"
}

if want strict 120; then
  echo "== ResNet-50 INT8 strict"
  resnet
  run_model b64_strict 64 --int8 --strict-precision
  (export EDGEINFER_DISABLE_CUBLASLT_INT8=1  # own timing cache: the shared one keeps its tables
    run_model b64_strict_cudai8 64 --int8 --strict-precision --timing-cache /tmp/ei/cudai8.cache)
  run_model b1_strict 1 --int8 --strict-precision
fi

if want timed64 150; then
  echo "== ResNet-50 INT8 timed, batch 64 (verbose)"
  resnet
  run_model b64_timed 64 --int8 --verbose
  # Per 1x1 layer of the verbose build: the best candidate of each provider.
  python3 - "$out/build_b64_timed.log" <<'PY'
import re, sys
rows, layer, sig, best = [], None, "", {}
def flush():
    if layer and best: rows.append((layer, sig, dict(best)))
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"layer '([^']+)' \[([^\]]*)\]", line)
    if m:
        flush(); layer, sig, best = m.group(1), m.group(2), {}
        continue
    m = re.match(r"\s+(?:\*\s+)?(\S+)\s+([0-9.]+)\s", line)
    if layer and m:
        tid, ms = m.group(1), float(m.group(2))
        kind = ("lt-e8" if tid.startswith("cublaslt-i8.e8") else "lt-i32" if tid.startswith("cublaslt-i8")
                else "cuda-i8" if tid.startswith("cuda-i8") else "fp")
        if kind not in best or ms < best[kind][1]: best[kind] = (tid, ms)
flush()
tot = {}
for layer, sig, b in rows:
    if "lt-e8" not in b and "lt-i32" not in b: continue
    cells = []
    for k in ("lt-e8", "lt-i32", "cuda-i8", "fp"):
        if k in b: tot[k] = tot.get(k, 0) + b[k][1]
        cells.append(f"{k} {b[k][1]:.4f}" if k in b else f"{k} -")
    print(f"{layer[-34:]:34s} " + " | ".join(cells) + f"  fp={b.get('fp', ('-',0))[0][:36]}")
print("sum over layers with cublaslt-i8 candidates: " + ", ".join(f"{k} {v:.3f} ms" for k, v in tot.items()))
PY
fi

if want timed1 60; then
  echo "== ResNet-50 INT8 timed, batch 1"
  resnet
  run_model b1_timed 1 --int8
fi
if want fp16 150; then
  echo "== ResNet-50 FP16, batch 64 and 1"
  resnet
  run_model b64_fp16 64 --fp16
  want fp16 60 && run_model b1_fp16 1 --fp16
fi
echo "done, $(left) s of the budget left"
