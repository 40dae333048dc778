#!/usr/bin/env bash
# Runs on the GPU machine (device tool, carry [".devcarry"]): engines with shape ranges.
#  1. the unit tests of UNIT_FILTER (default: ranges, profiles and the GPU engine suites);
#  2. ResNet-50 (torchvision, random weights, dynamic batch) FP16 built once for batches
#     1..64 (opt 8) from an empty timing cache, against engines built for batch 1, 8 and 64
#     alone (same cache);
#  3. `edgeinfer bench` of each at batch 1, 8 and 64: the range engine specialises for 1 and 64
#     on its first run (reported), then runs like the dedicated engines;
#  4. a specialised batch (3) against PyTorch FP32 on one input (rel. L2).
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
gpu_cli_bundle || exit 1
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
filter=${UNIT_FILTER:-ShapeRanges.*:ShapeProfiles.*:CudaRanges.*:CudaProfiles.*:CudaEngine.*:DeviceWeight*}
echo "== unit tests: $filter"
timeout "${UNIT_TIMEOUT_S:-300}" edgeinfer_unit_tests --gtest_filter="$filter" >"$out/unit.log" 2>&1
rc=$?
echo "unit rc=$rc"
[ "$rc" -ne 0 ] && grep -E "^\[ RUN" "$out/unit.log" | tail -n 2  # the test that did not finish
grep -E "^\[  (PASSED|FAILED|  SKIPPED) |rel L2|specialisations|opt cuda|opt cudnn|Failure" "$out/unit.log" | tail -n 40
[ -n "${UNIT_ONLY:-}" ] && exit 0

d=/tmp/r50
gpu_export_resnet50 "$d"
/opt/torch/.venv/bin/python - "$d" <<'PY' 2>&1 | grep -v -i warn | tail -n 1
import sys, numpy as np, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None).eval()
x = torch.rand(3, 3, 224, 224, generator=torch.Generator().manual_seed(5))
with torch.no_grad():
    y = m(x)
np.save(sys.argv[1] + "/x3.npy", x.numpy())
np.save(sys.argv[1] + "/y3.npy", y.numpy())
print("reference batch 3 saved")
PY
cache=$d/timing.cache
rm -f "$cache"
timed() {  # timed LABEL COMMAND...: wall seconds of the command
  local label=$1 t0 t1
  shift
  t0=$(date +%s.%N)
  "$@" >"$out/$label.log" 2>&1
  local rc=$?
  t1=$(date +%s.%N)
  printf '   %-12s rc=%d  %.1f s\n' "$label" "$rc" "$(awk "BEGIN{print $t1 - $t0}")"
  grep -E "rror|GPU engine for|shape ranges" "$out/$label.log" | sed 's/^/      /' | tail -n 4
}
echo "== builds (FP16; the range engine first, from an empty timing cache)"
args=(--fp16 --timing-cache "$cache")
cd "$d" || exit 1
timed range edgeinfer build model.onnx "${args[@]}" --min-shapes input:1x3x224x224 \
  --opt-shapes input:8x3x224x224 --max-shapes input:64x3x224x224 -o range.engine
timed range_cached edgeinfer build model.onnx "${args[@]}" --min-shapes input:1x3x224x224 \
  --opt-shapes input:8x3x224x224 --max-shapes input:64x3x224x224 -o range2.engine
cmp -s range.engine range2.engine && echo "   cached rebuild: identical engine" || echo "   cached rebuild: DIFFERENT engine"
for b in 1 8 64; do
  timed "b$b" edgeinfer build model.onnx "${args[@]}" --shapes "input:${b}x3x224x224" -o "b$b.engine"
done
stat -c '   %s bytes  %n' range.engine b1.engine b8.engine b64.engine
bench() {  # bench ENGINE BATCH LABEL
  edgeinfer bench "$1.engine" --shapes "input:${2}x3x224x224" --iterations 100 --warmup 10 \
    --device-inputs --verbose --json "$out/bench_$3_$2.json" >"$out/bench_$3_$2.log" 2>&1
  grep -E "layers took the opt" "$out/bench_$3_$2.log" | sed 's/.*, \([0-9.]* s\);/      \1;/' | cut -c1-400
  /opt/torch/.venv/bin/python - "$out/bench_$3_$2.json" "$3" "$2" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
except Exception as ex:
    print(f"   {sys.argv[2]:12} batch {sys.argv[3]:>2}: no result ({ex})"); sys.exit(0)
print(f"   {sys.argv[2]:12} batch {sys.argv[3]:>2}: load {j['load_ms']:.0f} ms, p50 {j['p50_ms']:.3f} ms, "
      f"GPU {j['gpu_p50_ms']:.3f} ms ({j['gpu_throughput_per_s']:.0f} img/s), "
      f"specialised {j.get('shape_specializations', 0)} in {j.get('specialization_ms', 0):.0f} ms, "
      f"device memory {j['device_weight_bytes'] / 1048576:.1f} MiB")
PY
}
key=$(edgeinfer device | sed -n 's/.*device key: //p' | head -n 1)
echo "== bench (p50 latency, GPU time; device key $key)"
echo "   dedicated engines, and the range engine with an empty device timing cache (the opt"
echo "   build's tactics):"
export XDG_CACHE_HOME=/tmp/xdg-empty
for b in 1 8 64; do
  bench "b$b" "$b" "b$b"
  bench range "$b" range_opt
done
echo "   the range engine with the device timing cache seeded from the dedicated builds (each"
echo "   batch's timed tactics):"
export XDG_CACHE_HOME=/tmp/xdg-seeded
mkdir -p "$XDG_CACHE_HOME/edgeinfer/$key" && cp "$cache" "$XDG_CACHE_HOME/edgeinfer/$key/timing.cache"
for b in 1 64; do bench range "$b" range_seeded; done
unset XDG_CACHE_HOME
echo "== batch 3 (specialised) against PyTorch FP32"
edgeinfer run range.engine --input "input=$d/x3.npy" --outputs "$d/out3" >"$out/run3.log" 2>&1
echo "   run rc=$?"
/opt/torch/.venv/bin/python - "$d" <<'PY'
import sys, numpy as np
d = sys.argv[1]
y = np.load(d + "/out3/output.npy").astype(np.float64); r = np.load(d + "/y3.npy").astype(np.float64)
print(f"   shape {y.shape}, rel L2 {np.linalg.norm(y - r) / np.linalg.norm(r):.2e}, "
      f"top-1 agreement {np.mean(y.argmax(1) == r.argmax(1)):.2f}")
PY
grep -E "specialised|took the opt" "$out/run3.log" | sed 's/^/   /'
