#!/usr/bin/env bash
# Runs on the GPU machine (carry [".devcarry"]): does an engine used straight from the builder
# compute what the same engine loaded from its file computes, and what the CPU reference does?
# MODEL (default BlazeFace back 256), random inputs (seed 0). Prints max abs differences.
set -uo pipefail
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
gpu_cli_bundle
export XDG_CACHE_HOME=/tmp/ei/cache
model=${MODEL:-.devcarry/models/blazeface/blazeface_back_256.onnx}
o=/tmp/ei/fvl && rm -rf $o && mkdir -p $o
edgeinfer run "$model" --backend cpu --outputs $o/cpu >/dev/null 2>&1 || echo "cpu run failed"
edgeinfer run "$model" --backend cuda --fp16 --outputs $o/fresh ${EXTRA:-} >$o/fresh.log 2>&1 || { echo "fresh failed"; tail -3 $o/fresh.log; }
EDGEINFER_DISABLE_CUDA_GRAPHS=1 edgeinfer run "$model" --backend cuda --fp16 --no-timing-cache \
  --outputs $o/fresh_nograph ${EXTRA:-} >$o/fresh_nograph.log 2>&1 || echo "fresh nograph failed"
edgeinfer build "$model" --fp16 -o $o/m.engine >/dev/null 2>&1 || echo "build failed"
edgeinfer run $o/m.engine --outputs $o/loaded >/dev/null 2>&1 || echo "loaded run failed"
edgeinfer run "$model" --backend cuda --fp16 --outputs $o/cached >/dev/null 2>&1 || echo "cached failed"
/opt/torch/.venv/bin/python - <<'PY'
import numpy as np, os
o = "/tmp/ei/fvl"
ref = {f: np.load(f"{o}/cpu/{f}").astype(np.float64) for f in sorted(os.listdir(f"{o}/cpu"))}
for run in ["fresh", "fresh_nograph", "loaded", "cached"]:
    if not os.path.isdir(f"{o}/{run}"):
        print(run, "missing"); continue
    errs = []
    for f, r in ref.items():
        g = np.load(f"{o}/{run}/{f}").astype(np.float64)
        errs.append(f"{f}: max|d| {np.abs(g - r).max():.3g} (|ref| {np.abs(r).max():.3g})")
    print(run, "; ".join(errs))
PY
