#!/usr/bin/env bash
# Runs on the GPU machine (device tool, carry [".devcarry"]): where ResNet-50's INT8 time goes.
# Builds ResNet-50 (random weights) at batch B (default 64) in INT8 timed against FP16 with the
# verbose log: every layer's sorted timing table (INT8 and FP16 candidates) and the plan with
# the reformat steps. Then nsys (when installed) on the strict INT8 engine: time per kernel.
set -uo pipefail
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
gpu_cli_bundle
export XDG_CACHE_HOME=/tmp/ei/cache
out=${OUT:-/tmp/out}
mkdir -p "$out"
b=${B:-64}
/opt/torch/.venv/bin/python - <<'PY'
import numpy as np, os, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet50().eval()
torch.onnx.export(m, torch.randn(1, 3, 224, 224), "/tmp/ei/resnet50.onnx", opset_version=17,
                  input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, dynamo=False)
os.makedirs("/tmp/ei/r50data", exist_ok=True)
np.save("/tmp/ei/r50data/s0.npy", np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32))
PY
r=/tmp/ei/resnet50.onnx
edgeinfer calibrate "$r" --data /tmp/ei/r50data --method minmax --dynamic-dim 1 -o /tmp/ei/r50.calib >/dev/null 2>&1
edgeinfer build "$r" --int8 --calibration-cache /tmp/ei/r50.calib --dynamic-dim "$b" -o /tmp/ei/r.engine \
  --verbose >"$out/build_verbose.log" 2>&1
echo "build rc=$?"
# Per layer: the best INT8 and the best FP16 candidate.
python3 - "$out/build_verbose.log" <<'PY'
import re, sys
layer = None; best = {}
rows = []
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"layer '([^']+)' \[([^|]+)\|", line)
    if m:
        if layer and best: rows.append((layer, best))
        layer, best = m.group(1), {}
        continue
    m = re.match(r"\s+(?:\*\s+)?(\S+)\s+([0-9.]+)\s", line)
    if layer and m:
        tid, ms = m.group(1), float(m.group(2))
        kind = "i8" if tid.startswith("cuda-i8") else "fp"
        if kind not in best or ms < best[kind][1]: best[kind] = (tid, ms)
if layer and best: rows.append((layer, best))
ti = tf = 0
for layer, bst in rows:
    if "i8" in bst and "fp" in bst:
        ti += bst["i8"][1]; tf += bst["fp"][1]
        print(f"{layer[-40:]:40s} i8 {bst['i8'][1]:.4f} {bst['i8'][0][:28]:28s} fp {bst['fp'][1]:.4f} {bst['fp'][0][:40]}")
print(f"sum over conv layers: int8 {ti:.3f} ms, fp16/fp32 {tf:.3f} ms")
PY
grep -E "reformat" "$out/build_verbose.log" | grep -E "^\s+[0-9]+ reformat" | head -5
