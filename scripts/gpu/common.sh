# Sourced by the scripts of scripts/gpu/, which run on the GPU machine through the device tool,
# in a copy of the working tree (docs: ../.library/device/README.md).
#   gpu_cuda_libs   puts the machine's CUDA, cuDNN and cuBLAS libraries on LD_LIBRARY_PATH
#   gpu_cli_bundle  unpacks .devcarry/bundle.tar.xz (bundle-runtime.sh of the CLI and the unit
#                   tests) into /tmp/ei, swaps in newer programs from .devcarry/fresh/<name>.xz,
#                   sources its env.sh and gpu_cuda_libs
#   gpu_bundle_from DIR  the same from DIR instead of .devcarry (and DIR/media.tar.xz unpacked,
#                   DIR/media/*/*.jpg decoded to PPM, DIR/models/*/*.onnx.xz unpacked)
#   gpu_gst_bundle  unpacks .devcarry-gst/bundle.tar.xz (the GStreamer plugin, gst-launch-1.0 and
#                   Debian's plugins) into /tmp/eg, sources its env.sh and gpu_cuda_libs
#   gpu_export_resnet50 DIR  torchvision's ResNet-50 (random weights, seed 0) as DIR/model.onnx,
#                   input "input" with a dynamic batch, output "output"
# shellcheck shell=bash

gpu_cuda_libs() {
  local venv=/opt/torch/.venv/lib/python3.12/site-packages/nvidia
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:$venv/cudnn/lib:$venv/cublas/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
}

gpu_cli_bundle() {
  gpu_bundle_from .devcarry
}

# gpu_bundle_from DIR: as gpu_cli_bundle, from DIR/bundle.tar.xz (DIR/fresh/<name>.xz).
gpu_bundle_from() {
  mkdir -p /tmp/ei && tar -xJf "$1/bundle.tar.xz" -C /tmp/ei || return 1
  # Test media may come compressed (the carry limit): DIR/media.tar.xz holds DIR/media.
  if [ -f "$1/media.tar.xz" ] && [ ! -d "$1/media" ]; then tar -xJf "$1/media.tar.xz" -C "$1" || return 1; fi
  # ... or as the JPEGs alone (DIR/media/*/*.jpg, a seventh of the PPMs' size), decoded here to
  # the PPMs the tests read (Pillow's libjpeg-turbo, as djpeg -pnm in scripts/fetch_media.sh);
  # models may come xz-compressed (DIR/models/*/*.onnx.xz).
  if compgen -G "$1/media/*/*.jpg" >/dev/null; then
    /opt/torch/.venv/bin/python - "$1"/media/*/*.jpg <<'PY' || return 1
import os, sys
from PIL import Image
for j in sys.argv[1:]:
    p = j[:-4] + ".ppm"
    if not os.path.exists(p):
        Image.open(j).convert("RGB").save(p)
PY
  fi
  for f in "$1"/models/*/*.onnx.xz; do [ -f "$f" ] && xz -d "$f"; done
  local f name
  for f in "$1"/fresh/*.xz; do
    [ -f "$f" ] || continue
    name=$(basename "$f" .xz)
    # The bundle's own edgeinfer stays as edgeinfer_old (binab's baseline) unless one is carried.
    if [ "$name" = edgeinfer ] && [ ! -f "$1/fresh/edgeinfer_old.xz" ] &&
      [ -f /tmp/ei/.bundle/bin/edgeinfer ]; then
      cp /tmp/ei/.bundle/bin/edgeinfer /tmp/ei/.bundle/bin/edgeinfer_old
    fi
    xz -dc "$f" >"/tmp/ei/.bundle/bin/$name" && chmod +x "/tmp/ei/.bundle/bin/$name"
  done
  # shellcheck source=/dev/null
  source /tmp/ei/.bundle/env.sh
  gpu_cuda_libs
}

gpu_gst_bundle() {
  mkdir -p /tmp/eg && tar -xJf .devcarry-gst/bundle.tar.xz -C /tmp/eg || return 1
  # shellcheck source=/dev/null
  source /tmp/eg/.bundle-gst/env.sh
  gpu_cuda_libs
}

gpu_export_resnet50() {
  mkdir -p "$1"
  /opt/torch/.venv/bin/python - "$1" <<'PY' 2>&1 | grep -v -i warn | tail -n 1
import sys, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet50(weights=None).eval()
torch.onnx.export(m, torch.rand(1, 3, 224, 224), sys.argv[1] + "/model.onnx", opset_version=17,
                  input_names=["input"], output_names=["output"],
                  dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}, dynamo=False)
print("exported " + sys.argv[1] + "/model.onnx")
PY
}
