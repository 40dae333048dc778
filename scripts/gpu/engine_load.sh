#!/usr/bin/env bash
# Runs on the GPU machine (device tool, carry [".devcarry"]): where an engine load spends its
# time. Builds BlazeFace (FP16) once with an empty timing cache, then loads the saved engine
# three times with EDGEINFER_LOG_LEVEL=verbose, which logs the load's phases and its slowest
# steps (sdk/src/runtime/cuda/cuda_engine.cpp, LoadProfile). Fresh binaries, when the bundle
# is older than the code, come as .devcarry/fresh/<program>.xz and replace the bundle's.
set -uo pipefail
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
gpu_cli_bundle
out=${OUT:-/tmp/out}
mkdir -p "$out"
model=${MODEL:-.devcarry/models/blazeface/blazeface_front_128.onnx}
export XDG_CACHE_HOME=/tmp/ei/cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "== unit tests: ${UNIT_FILTER:-CudnnConv.*:CudaEngine*:CudaPlan*}"
timeout -k 5 300 edgeinfer_unit_tests --gtest_brief=1 \
  --gtest_filter="${UNIT_FILTER:-CudnnConv.*:CudaEngine*:CudaPlan*}" >"$out/unit.log" 2>&1
echo "unit rc=$?"; grep -E "PASSED|FAILED|serialized their plan" "$out/unit.log" | tail -n 15
/usr/bin/time -f "edgeinfer device wall %e s" edgeinfer device >/dev/null
echo "== build (cold timing cache): $model"
/usr/bin/time -f "build wall %e s, max RSS %M KB" edgeinfer build "$model" --fp16 -o /tmp/ei/m.engine \
  ${BUILD_ARGS:-} >"$out/build.log" 2>&1
tail -n 3 "$out/build.log"
echo "== rebuild (every layer from the timing cache)"
EDGEINFER_LOG_LEVEL=info /usr/bin/time -f "rebuild wall %e s" edgeinfer build "$model" --fp16 \
  -o /tmp/ei/m2.engine >"$out/rebuild.log" 2>&1
grep -E "GPU engine for|wall" "$out/rebuild.log"
cmp /tmp/ei/m.engine /tmp/ei/m2.engine && echo "rebuild: bit-identical engine"
for i in 1 2 3; do
  echo "== load $i"
  EDGEINFER_LOG_LEVEL=verbose /usr/bin/time -f "run wall %e s" edgeinfer run /tmp/ei/m.engine \
    >"$out/load$i.log" 2>&1
  grep -E "engine load|^ +[0-9.]+ ms find|run wall" "$out/load$i.log" | head -n 20
done
if [ -n "${RESNET:-}" ]; then
  echo "== ResNet-50 (random weights, batch 1): build, then load"
  /opt/torch/.venv/bin/python - <<'PY'
import torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet50().eval()
torch.onnx.export(m, torch.randn(1, 3, 224, 224), "/tmp/ei/resnet50.onnx", opset_version=17,
                  input_names=["input"], output_names=["logits"], dynamo=False)
PY
  /usr/bin/time -f "build wall %e s" edgeinfer build /tmp/ei/resnet50.onnx --fp16 -o /tmp/ei/r.engine \
    >"$out/build_r50.log" 2>&1
  tail -n 2 "$out/build_r50.log"
  EDGEINFER_LOG_LEVEL=info /usr/bin/time -f "rebuild (cached) wall %e s" edgeinfer build \
    /tmp/ei/resnet50.onnx --fp16 -o /tmp/ei/r2.engine >"$out/rebuild_r50.log" 2>&1
  grep -E "GPU engine for|wall" "$out/rebuild_r50.log"
  cmp /tmp/ei/r.engine /tmp/ei/r2.engine && echo "rebuild: bit-identical engine"
  ls -l /tmp/ei/r.engine /tmp/ei/m.engine
  EDGEINFER_LOG_LEVEL=verbose /usr/bin/time -f "run wall %e s" edgeinfer run /tmp/ei/r.engine \
    >"$out/load_r50.log" 2>&1
  grep -E "engine load|^ +[0-9.]+ ms find|run wall" "$out/load_r50.log" | head -n 20
fi
