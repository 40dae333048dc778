#!/usr/bin/env bash
# Runs on the GPU machine (device tool, carry [".devcarry"]), two steps (STEPS, default both):
#   detector  the ResNet-18/34-class detector of the streams benchmark (scripts/bench/
#             make_detector.py, 960x544, random weights) built FP16 at DET_BATCHES (default
#             "1 32") and timed with `edgeinfer bench --device-inputs`: inference alone, the
#             ceiling of what the streams pipeline can reach with this model; the cold build
#             time is printed too. DET_ARCHS (default "resnet34 resnet18").
#   compile   scripts/bench/compare_pytorch.py --compile on COMPILE_MODELS (default resnet50)
#             at batch 1, FP16: torch.compile(mode="max-autotune") next to eager, eager + CUDA
#             graph and our engine, in one run (minutes: max-autotune compiles for long).
# Logs to $OUT.
set -uo pipefail
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
gpu_cli_bundle
export XDG_CACHE_HOME=/tmp/ei/cache
out=${OUT:-/tmp/out}
mkdir -p "$out" /tmp/det
py=/opt/torch/.venv/bin/python
steps=${STEPS:-detector compile}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader

if [[ " $steps " == *" detector "* ]]; then
  for arch in ${DET_ARCHS:-resnet34 resnet18}; do
    echo "== $arch detector 960x544"
    "$py" scripts/bench/make_detector.py --arch "$arch" --out "/tmp/det/${arch}_det.onnx" 2>&1 |
      grep -v -i warn | tail -n 2
    for b in ${DET_BATCHES:-1 32}; do
      t0=$SECONDS
      edgeinfer bench "/tmp/det/${arch}_det.onnx" --backend cuda --fp16 --dynamic-dim "$b" \
        --device-inputs --iterations "${ITERS:-100}" --json "$out/det_${arch}_b$b.json" \
        >"$out/det_${arch}_b$b.log" 2>&1
      rc=$?
      echo "$arch batch $b: rc=$rc, build + bench $((SECONDS - t0)) s; $(grep -E "latency|throughput|GPU time|build" \
        "$out/det_${arch}_b$b.log" | tr '\n' ' ' | tr -s ' ' | cut -c1-400)"
    done
  done
fi

if [[ " $steps " == *" compile "* ]]; then
  echo "== torch.compile max-autotune vs ours: ${COMPILE_MODELS:-resnet50}, batch 1, FP16"
  PYTHONUNBUFFERED=1 timeout -k 10 "${COMPILE_TIMEOUT_S:-420}" "$py" scripts/bench/compare_pytorch.py \
    --edgeinfer "$(command -v edgeinfer)" --models "${COMPILE_MODELS:-resnet50}" --batch 1 \
    --precision fp16 --compile --json "$out/compile.json" --work /tmp/cmp 2>&1 |
    tee "$out/compile.txt" | grep -v -E '^(###)' | tail -n 30
  echo "compare_pytorch rc=${PIPESTATUS[0]}"
fi
