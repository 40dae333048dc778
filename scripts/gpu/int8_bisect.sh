#!/usr/bin/env bash
# Runs on the GPU machine (device tool, carry as int8_classifier_check.sh): finds the first
# layer whose INT8 makes a strict INT8 engine's output wrong. MODEL (torchvision name, default
# mobilenet_v2, random weights) is calibrated (min-max) on the first photos; then a binary
# search over k: the first k quantizable layers (calibration cache order) in INT8, the rest
# FP16, output compared with PyTorch FP32 (wrong: cosine < 0.9). Prints the culprit layer and
# its lines from a verbose build. BATCH (default 4) photos run.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
carry=${CARRY:-.devcarry2}
gpu_bundle_from "$carry" || exit 1
export XDG_CACHE_HOME=/tmp/ei/cache
out=${OUT:-/tmp/out}
w=/tmp/ei/bis
mkdir -p "$out" "$w"
py=/opt/torch/.venv/bin/python
m=${MODEL:-mobilenet_v2}
b=${BATCH:-4}
"$py" - "$m" "$carry/images224.npy" "$w" "$b" <<'PY' 2>&1 | grep -v -i warn
import os, sys, numpy as np, torch, torchvision
name, images, w, b = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
torch.manual_seed(0)
model = getattr(torchvision.models, name)(weights=None).eval()
x = np.load(images)[:max(b, 8)].astype(np.float32) / 255.0
x = (x - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225], np.float32)
x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
torch.onnx.export(model, torch.from_numpy(x[:1]), f"{w}/m.onnx", opset_version=17,
                  input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, dynamo=False)
os.makedirs(f"{w}/cal", exist_ok=True)
for i in range(8):
    np.save(f"{w}/cal/s{i}.npy", x[i:i + 1])
np.save(f"{w}/eval.npy", x[:b])
with torch.no_grad():
    np.save(f"{w}/ref.npy", model(torch.from_numpy(x[:b])).numpy())
PY
edgeinfer calibrate "$w/m.onnx" --data "$w/cal" --method minmax --dynamic-dim 1 -o "$w/all.calib" >"$out/calibrate.log" 2>&1 || { tail -3 "$out/calibrate.log"; exit 1; }
mapfile -t layers < <(grep '^layer ' "$w/all.calib" | cut -d' ' -f3-)
n=${#layers[@]}
echo "$n quantizable layers"
try() {  # k: the first k layers INT8; prints the cosine with PyTorch
  local k=$1
  grep -v '^layer \|^end$' "$w/all.calib" >"$w/k.calib"
  local i
  for ((i = 0; i < n; ++i)); do
    if ((i < k)); then echo "layer int8 ${layers[$i]}"; else echo "layer fp16 ${layers[$i]}"; fi
  done >>"$w/k.calib"
  echo end >>"$w/k.calib"
  rm -rf "$w/o"
  edgeinfer run "$w/m.onnx" --backend cuda --int8 --strict-precision --dynamic-dim "$b" \
    --calibration-cache "$w/k.calib" --input input="$w/eval.npy" --outputs "$w/o" >"$w/run.log" 2>&1 ||
    { echo "k=$k run failed: $(tail -2 "$w/run.log")"; echo 0; return; }
  "$py" -c "
import numpy as np
y=np.load('$w/o/logits.npy').astype(np.float64); r=np.load('$w/ref.npy')
print(float(((y*r).sum())/(np.linalg.norm(y)*np.linalg.norm(r)+1e-30)))"
}
echo "all INT8: cosine $(try "$n" | tail -1); none: $(try 0 | tail -1)"
lo=0 hi=$n  # cos(lo) good, cos(hi) bad
while ((hi - lo > 1)); do
  mid=$(((lo + hi) / 2))
  c=$(try "$mid" | tail -1)
  echo "k=$mid cosine $c"
  if "$py" -c "import sys; sys.exit(0 if $c >= 0.9 else 1)"; then lo=$mid; else hi=$mid; fi
done
culprit=${layers[$((hi - 1))]}
echo "first bad layer: #$hi $culprit"
try "$hi" >/dev/null
EDGEINFER_LOG_LEVEL=verbose edgeinfer build "$w/m.onnx" --backend cuda --int8 --strict-precision \
  --dynamic-dim "$b" --calibration-cache "$w/k.calib" --verbose -o "$w/k.engine" >"$out/verbose.log" 2>&1
grep -n -F "$culprit" "$out/verbose.log" | head -20
edgeinfer inspect "$w/m.onnx" --dynamic-dim "$b" 2>/dev/null | grep -n -F -A2 "$culprit" | head -12
