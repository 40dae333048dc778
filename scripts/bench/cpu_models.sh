#!/usr/bin/env bash
# CPU benchmarks of the real models (models/fetch.sh): builds each engine and runs
# `edgeinfer bench`, writing one JSON file per model into OUT (default build/bench).
#   scripts/bench/cpu_models.sh [EDGEINFER_BINARY] [OUT]
# Pin cores for comparable figures, e.g.  OMP_NUM_THREADS=2 taskset -c 0,1 scripts/bench/...
# Record what you measure, with the machine and command, in docs/performance.md.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cli=${1:-$root/build/release/edgeinfer}
out=${2:-$root/build/bench}
mkdir -p "$out"
"$root/models/fetch.sh" blazeface >/dev/null
for model in "$root"/models/blazeface/*.onnx; do
  name=$(basename "$model" .onnx)
  "$cli" build "$model" -o "$out/$name.engine" --backend cpu >/dev/null
  echo "== $name"
  "$cli" bench "$out/$name.engine" --warmup 20 --iterations 200 --json "$out/$name.json"
done
