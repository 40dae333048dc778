#!/usr/bin/env bash
# Runs on the GPU machine (device tool): `edgeinfer device`, every unit test (the GPU tactic
# tests included; they skip only where no GPU is usable) and a CPU bench of BlazeFace, from a
# bundle built on the dev machine with CUDA:
#   ninja -C build/cuda edgeinfer_unit_tests edgeinfer_cli
#   ../shared/tools/bundle-runtime.sh .bundle build/cuda/edgeinfer build/cuda/tests/edgeinfer_unit_tests
# and the device tool's carry [".bundle"].
set -uo pipefail
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
source .bundle/env.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
edgeinfer device
out=${OUT:-/tmp}
edgeinfer_unit_tests --gtest_brief=1 >"$out/unit_tests.log" 2>&1
rc=$?
grep -E "^\[  (PASSED|FAILED|SKIPPED)|tests? from .* ran|FAILED" "$out/unit_tests.log" | tail -n 20
grep -c "^\[  SKIPPED \] " "$out/unit_tests.log" || true
exit $rc
