#!/usr/bin/env bash
# Runs on the GPU machine (device tool): whole-model checks of the CPU reference against
# ONNX Runtime on torchvision architectures and BlazeFace, and BlazeFace timing on 2 pinned
# cores. Needs the bundle built on the dev machine (.bundle, see docs/performance.md).
set -uo pipefail
source .bundle/env.sh
out=${OUT:-/tmp/out}
mkdir -p "$out"
nproc; python3 -c 'import torch, torchvision, onnxruntime; print(torch.__version__, torchvision.__version__, onnxruntime.__version__)'
echo "== BlazeFace on 2 pinned cores (OMP_NUM_THREADS=2)"
for m in models/blazeface/blazeface_front_128.onnx models/blazeface/blazeface_back_256.onnx; do
  OMP_NUM_THREADS=2 taskset -c 0,1 edgeinfer run "$m" --backend cpu --warmup 20 --iterations 200 | grep timing
  OMP_NUM_THREADS=1 taskset -c 0 edgeinfer run "$m" --backend cpu --warmup 20 --iterations 200 | grep timing
done
echo "== whole-model checks against ONNX Runtime (CPU, fp32)"
PYTHONUNBUFFERED=1 python3 scripts/gpu/whole_model_check.py --edgeinfer "$(command -v edgeinfer)" \
  --work /tmp/wm --extra-onnx models/blazeface/blazeface_front_128.onnx \
  models/blazeface/blazeface_back_256.onnx --json "$out/whole_model.json" 2>&1 | tee "$out/whole_model.txt"
