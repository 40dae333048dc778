#!/usr/bin/env bash
# Runs on the GPU machine (device tool): INT8 top-1 agreement of torchvision classifiers with
# random weights (seed 0) on real photos (issue 6). Carry one folder ($CARRY, default
# .devcarry2) holding bundle.tar.xz (bundle-runtime.sh of edgeinfer) and images224.npy from
# scripts/bench/classifier_images.py (the photos of scripts/fetch_media.sh, 224x224).
#   MODELS="resnet50 mobilenet_v2"   torchvision models, exported with a dynamic batch
#   CALIB=12                         the first CALIB photos calibrate (min-max); every photo
#                                    is then classified in one batch
# Per model: PyTorch FP32 (the reference), our GPU FP32, INT8 strict (every quantizable layer
# INT8), INT8 strict with the sensitivity policy (--exclude-threshold 0.999) and the CPU's
# emulated INT8; top-1 agreement with PyTorch, cosine of the logits. Logs to $OUT.
set -uo pipefail
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
carry=${CARRY:-.devcarry2}
gpu_bundle_from "$carry" || exit 1
export XDG_CACHE_HOME=/tmp/ei/cache
out=${OUT:-/tmp/out}
w=/tmp/ei/cls
mkdir -p "$out" "$w"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
py=/opt/torch/.venv/bin/python
calib=${CALIB:-12}

for m in ${MODELS:-resnet50 mobilenet_v2}; do
  echo "== $m"
  "$py" - "$m" "$carry/images224.npy" "$w" "$calib" <<'PY' 2>&1 | grep -v -i warn
import os, sys, numpy as np, torch, torchvision
name, images, w, calib = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
torch.manual_seed(0)
model = getattr(torchvision.models, name)(weights=None).eval()
x = np.load(images).astype(np.float32) / 255.0
x = (x - np.array([0.485, 0.456, 0.406], np.float32)) / np.array([0.229, 0.224, 0.225], np.float32)
x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
torch.onnx.export(model, torch.from_numpy(x[:1]), f"{w}/{name}.onnx", opset_version=17,
                  input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, dynamo=False)
os.makedirs(f"{w}/{name}_cal", exist_ok=True)
for i in range(calib):
    np.save(f"{w}/{name}_cal/s{i:02d}.npy", x[i:i + 1])
np.save(f"{w}/{name}_eval.npy", x)
with torch.no_grad():
    np.save(f"{w}/{name}_ref.npy", model(torch.from_numpy(x)).numpy())
print(f"exported {name}; {x.shape[0]} photos, the first {calib} calibrate")
PY
  n=$("$py" -c "import numpy as np; print(np.load('$w/${m}_eval.npy').shape[0])")
  edgeinfer calibrate "$w/$m.onnx" --data "$w/${m}_cal" --method minmax --dynamic-dim 1 \
    -o "$w/$m.calib" >"$out/${m}_calibrate.log" 2>&1
  echo "calibrate (all INT8) rc=$? $(tail -n 1 "$out/${m}_calibrate.log")"
  edgeinfer calibrate "$w/$m.onnx" --data "$w/${m}_cal" --method minmax --dynamic-dim 1 \
    --exclude-threshold 0.999 --report-images 4 -o "$w/${m}_mixed.calib" \
    >"$out/${m}_calibrate_mixed.log" 2>&1
  echo "calibrate (policy) rc=$? $(grep -E '^calibrated' "$out/${m}_calibrate_mixed.log")"
  for mode in gpu_fp32 gpu_int8 gpu_int8_mixed cpu_int8; do
    case $mode in
      gpu_fp32) args=(--backend cuda) ;;
      gpu_int8) args=(--backend cuda --int8 --strict-precision --calibration-cache "$w/$m.calib") ;;
      gpu_int8_mixed) args=(--backend cuda --int8 --strict-precision --calibration-cache "$w/${m}_mixed.calib") ;;
      cpu_int8) args=(--backend cpu --int8 --calibration-cache "$w/$m.calib") ;;
    esac
    EDGEINFER_LOG_LEVEL=info edgeinfer run "$w/$m.onnx" --dynamic-dim "$n" "${args[@]}" \
      --input input="$w/${m}_eval.npy" --outputs "$w/${m}_$mode" >"$out/${m}_$mode.log" 2>&1
    echo "$mode rc=$? $(grep -E 'INT8|precision' "$out/${m}_$mode.log" | head -2 | tr '\n' ' ' | cut -c1-200)"
  done
  "$py" - "$m" "$w" <<'PY'
import sys, os, numpy as np
name, w = sys.argv[1], sys.argv[2]
ref = np.load(f"{w}/{name}_ref.npy")
print(f"{name}: {ref.shape[0]} photos, {len(set(ref.argmax(1)))} distinct PyTorch FP32 top-1 classes")
for mode in ["gpu_fp32", "gpu_int8", "gpu_int8_mixed", "cpu_int8"]:
    p = f"{w}/{name}_{mode}/logits.npy"
    if not os.path.exists(p):
        print(f"  {mode}: no output"); continue
    y = np.load(p).astype(np.float64)
    cos = (y * ref).sum(1) / np.linalg.norm(y, axis=1) / np.linalg.norm(ref, axis=1)
    top5 = np.mean([ref[i].argmax() in np.argsort(-y[i])[:5] for i in range(len(y))])
    print(f"  {mode}: top-1 agreement {np.mean(y.argmax(1) == ref.argmax(1)) * 100:.1f} % "
          f"({int((y.argmax(1) == ref.argmax(1)).sum())}/{len(y)}), FP32 top-1 in top-5 {top5 * 100:.0f} %, "
          f"logit cosine min {cos.min():.5f} mean {cos.mean():.5f}")
PY
done
