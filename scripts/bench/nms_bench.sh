#!/usr/bin/env bash
# NMS of a YOLOv8-class detector (scripts/bench/make_nms_model.py) on the GPU and on the CPU:
# `edgeinfer bench` of each backend on the same inputs, and `edgeinfer run` outputs compared
# (they must be equal). Needs python3 with onnx and numpy, and `edgeinfer` on PATH.
#   scripts/bench/nms_bench.sh [PYTHON] [WORKDIR]
set -euo pipefail
py=${1:-python3}
dir=${2:-/tmp/nms_bench}
"$py" "$(dirname "$0")/make_nms_model.py" --out "$dir"
for backend in cuda cpu; do
  echo "== $backend"
  edgeinfer bench "$dir/nms.onnx" --backend "$backend" --inputs "$dir/inputs" \
    --iterations 200 --warmup 20 --json "$dir/bench_$backend.json" 2>&1 |
    grep -E "^(model|latency|throughput|gpu|host)"
  edgeinfer run "$dir/nms.onnx" --backend "$backend" --inputs "$dir/inputs" \
    --outputs "$dir/out_$backend" >/dev/null
done
"$py" - "$dir" <<'PY'
import sys, numpy as np
d = sys.argv[1]
a, b = np.load(f"{d}/out_cuda/selected.npy"), np.load(f"{d}/out_cpu/selected.npy")
print(f"selected: GPU {a.shape[0]} rows, CPU {b.shape[0]} rows, equal: {a.shape == b.shape and (a == b).all()}")
PY
