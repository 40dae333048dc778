#!/usr/bin/env bash
# Runs on the GPU machine (device tool, carry [".devcarry"]): where the GPU time of one
# torchvision model goes. Exports MODEL (default efficientnet_b0, random weights) with a
# static batch BATCH (default 1), builds it in FP16 with --verbose (the GPU plan: every step
# with its tactic and timed ms, in $OUT/build.log), and benches the engine: the sum of the
# layers' timed ms against the engine's GPU time says how much is launch gaps.
set -uo pipefail
out=${OUT:-/tmp/out}
mkdir -p "$out"
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
gpu_cli_bundle || exit 1
model=${MODEL:-efficientnet_b0}
batch=${BATCH:-1}
dir=/tmp/lt
mkdir -p "$dir"
/opt/torch/.venv/bin/python - "$model" "$batch" "$dir/model.onnx" <<'PY' 2>&1 | grep -v -i warn | tail -n 1
import sys, torch, torchvision
torch.manual_seed(0)
m = getattr(torchvision.models, sys.argv[1])(weights=None).eval()
torch.onnx.export(m, torch.rand(int(sys.argv[2]), 3, 224, 224), sys.argv[3], opset_version=17,
                  input_names=["input"], output_names=["output"], dynamo=False)
print("exported " + sys.argv[3])
PY
edgeinfer build "$dir/model.onnx" --fp16 --verbose -o "$dir/model.engine" >"$out/build.log" 2>&1
echo "build rc=$?"
# The plan's steps with their timed ms: total, and by tactic family.
awk '/GPU plan:/{p=1;next} p' "$out/build.log" >"$out/plan.txt"
python3 - "$out/plan.txt" <<'PY'
import re, sys, collections
steps = total = 0; fam = collections.Counter(); n = collections.Counter()
for line in open(sys.argv[1]):
    m = re.search(r"([0-9.]+) ms", line)
    if not m: continue
    ms = float(m.group(1)); steps += 1; total += ms
    op = re.search(r"\(([A-Za-z0-9_]+)\) (\S+)", line)
    k = (op.group(1) + " " + op.group(2).split(".")[0]) if op else line.split()[1]
    fam[k] += ms; n[k] += 1
print(f"{steps} timed steps, sum {total:.4f} ms")
for k, v in fam.most_common(): print(f"  {k:24s} {n[k]:4d} steps {v:.4f} ms")
PY
edgeinfer bench "$dir/model.engine" --iterations 300 --device-inputs 2>&1 | grep -E "latency|GPU time"
