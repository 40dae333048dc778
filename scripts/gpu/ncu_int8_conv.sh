#!/usr/bin/env bash
# Runs on the GPU machine (device tool, carry [".devcarry2"]: the bundle of edgeinfer_unit_tests):
# the INT8 convolution kernels' correctness tests, their per-layer timings on ResNet-50's 3x3
# layers (CudaInt8Perf, EDGEINFER_PERF_TESTS=1), and Nsight Compute's view of the kernels in
# KERNELS (regular expressions on demangled names, separated by ";"; empty: none) on the layer
# EDGEINFER_PERF_LAYERS names (default 14x14), NCU_ARGS added to its arguments (e.g.
# "--print-details all" for the stall reasons). Full reports to $OUT/ncu_*.txt.
set -uo pipefail
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
gpu_bundle_from .devcarry2
out=${OUT:-/tmp/out}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 200 edgeinfer_unit_tests --gtest_filter="${UNIT_FILTER:-CudaInt8Conv.*}" >"$out/unit.log" 2>&1
echo "unit rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/unit.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \]|differ, worst' "$out/unit.log" | grep -v " 0 of " | head -20
export EDGEINFER_PERF_TESTS=1
timeout 200 edgeinfer_unit_tests --gtest_filter='CudaInt8Perf.*' 2>&1 | grep -E '^\[          \]|FAILED'
export EDGEINFER_PERF_LAYERS=${EDGEINFER_PERF_LAYERS:-14x14}
IFS=';' read -r -a kernels <<<"${KERNELS-i8ConvWgmma<.int.128, .int.128, .int.64>}"
for k in "${kernels[@]}"; do
  f="$out/ncu_${k//[^a-zA-Z0-9]/_}.txt"
  timeout 150 /usr/local/cuda/bin/ncu --kernel-name-base demangled --kernel-name regex:"$k" \
    --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section WarpStateStats --section Occupancy --section LaunchStats \
    --section ComputeWorkloadAnalysis --section SourceCounters ${NCU_ARGS:-} \
    edgeinfer_unit_tests --gtest_filter='CudaInt8Perf.*' >"$f" 2>&1
  echo "== ncu $k rc=$?"
  grep -E "ERR|Duration|Throughput|Eligible|Issued Warp|Registers Per|Achieved Occupancy|Est. Speedup|excessive" "$f" | head -40
done
