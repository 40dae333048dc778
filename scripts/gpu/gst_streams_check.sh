#!/usr/bin/env bash
# Runs on the GPU machine (device tool, carry [".devcarry-gst"]): the main job and the
# streams-per-GPU benchmark through GStreamer. .devcarry-gst holds bundle.tar.xz
# (bundle-runtime.sh of the plugin, the meta library, gst-launch/inspect/typefind and the Debian
# plugins the pipelines use), models/ (BlazeFace), the 1080p phone clip as an H.264 MP4 and as
# an Annex B stream (phone.h264), and, when an earlier run left one, cache/ (a timing cache of
# this kind of GPU, so the engines build from it). STEPS (default "demo streams"):
#   detector the ResNet-18/34-class detector of the issue's goal (scripts/bench/make_detector.py,
#            DET_ARCH, default resnet34, 960x544, random weights) becomes the model of the
#            streams step that follows it (default: BlazeFace back, 256x256)
#   coldbuild ResNet-50 engines built with an empty timing cache at COLD_BATCHES (default "1 64")
#            through edgeinfer's start: the build time and where it went
#   demo     scripts/demo.sh's GPU path (BACKEND=gpu: nvh264dec -> edgeinfer in CUDA memory)
#            on the phone clip, setup/build/fetch skipped (the bundle is the build)
#   streams  scripts/bench/gst_streams.sh for each N in STREAMS (default "1 16 64"), on
#            COPIES concatenated copies of the clip (default 8: 328 frames a stream),
#            modes MODES (default decode,mux,infer), engine batch EDGEINFER_BATCH (default 16),
#            and for each edgeinfer in-flight value in IN_FLIGHTS (default "0": the element's
#            own choice, 2 on the GPU)
# The timing caches come back to $OUT as timing_cache.tgz (carry it as .devcarry-gst/ next time).
set -uo pipefail
out=${OUT:-/tmp/out}
repo=$PWD  # (env.sh sets $here)
mkdir -p "$out"
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
gpu_gst_bundle
export GST_REGISTRY=/tmp/eg/registry.bin XDG_CACHE_HOME=/tmp/eg/xdg
# A build folder as the scripts expect it, made of the bundle's files.
build=/tmp/eg/build
mkdir -p "$build/plugins/gst" "$build/lib" "$XDG_CACHE_HOME"
ln -sf /tmp/eg/.bundle-gst/gst/libgstedgeinfer.so "$build/plugins/gst/"
ln -sf /tmp/eg/.bundle-gst/lib/libedgeinfer-gstmeta.so "$build/lib/"
[ -x /tmp/eg/.bundle-gst/bin/edgeinfer ] && ln -sf /tmp/eg/.bundle-gst/bin/edgeinfer "$build/"
[ -d .devcarry-gst/cache ] && cp -r .devcarry-gst/cache/. "$XDG_CACHE_HOME/"
# timing_cache.tgz: the timing caches an earlier run returned (engines then build in seconds).
[ -f .devcarry-gst/timing_cache.tgz ] && tar -xzf .devcarry-gst/timing_cache.tgz -C "$XDG_CACHE_HOME"
config=$repo/.devcarry-gst/models/blazeface/model_back.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for step in ${STEPS:-demo streams}; do
  case $step in
    demo)
      echo "== demo (GPU path)"
      SKIP_SETUP=1 SKIP_BUILD=1 SKIP_FETCH=1 BUILD_DIR=$build OUT_DIR=$out/demo BACKEND=gpu \
        VIDEO=$repo/.devcarry-gst/VID_20191220_170832.mp4 MODEL=$config \
        timeout -k 5 "${DEMO_TIMEOUT_S:-300}" scripts/demo.sh >"$out/demo.log" 2>&1
      echo "demo rc=$?"
      grep -vE "^(Setting|Pipeline|Prerolling|Redistribute|New clock|Got EOS|Execution|Freeing|Waiting|Got context|Progress)" \
        "$out/demo.log" | tail -n 16
      ;;
    detector)
      arch=${DET_ARCH:-resnet34}
      echo "== $arch detector 960x544 for the streams step"
      mkdir -p /tmp/det
      /opt/torch/.venv/bin/python scripts/bench/make_detector.py --arch "$arch" \
        --out "/tmp/det/${arch}_det.onnx" 2>&1 | grep -v -i warn | tail -n 2
      config=/tmp/det/${arch}_det.json
      ;;
    coldbuild)
      # Cold builds (an empty timing cache) of ResNet-50 (torchvision, random weights) at
      # COLD_BATCHES (default "1 64"), FP16, through edgeinfer's start: the builder's summary
      # says how long it took and where the time went (initialising vs timing candidates).
      gpu_export_resnet50 /tmp/r50
      cp models/imagenet-classifier/model.json /tmp/r50/model.json
      for b in ${COLD_BATCHES:-1 64}; do
        echo "== ResNet-50 cold build, batch $b"
        XDG_CACHE_HOME=/tmp/eg/cold_$b GST_DEBUG=edgeinfer:4,edgeinfer-sdk:4 GST_DEBUG_NO_COLOR=1 \
          timeout -k 5 400 gst-launch-1.0 videotestsrc num-buffers=2 ! edgeinfer \
          config=/tmp/r50/model.json backend=gpu batch-size="$b" ! fakesink 2>&1 |
          grep -E "GPU engine for|ERROR" | sed 's/^.*log: /   /'
      done
      ;;
    streams)
      clip=/tmp/eg/long.h264
      # CLIP_H264: another Annex B clip in .devcarry-gst (e.g. phone_4mbps.h264, the phone clip
      # re-encoded at 4 Mbit/s, a usual camera bitrate; the original is about 15 Mbit/s).
      for _ in $(seq "${COPIES:-8}"); do cat ".devcarry-gst/${CLIP_H264:-phone.h264}"; done >"$clip"
      for n in ${STREAMS:-1 16 64}; do
        for f in ${IN_FLIGHTS:-0}; do
        echo "== $n streams, in-flight=$f"
        nvidia-smi --query-gpu=utilization.gpu,utilization.decoder --format=csv,noheader,nounits \
          -lms 250 >"$out/util_${n}_f$f.csv" 2>/dev/null &
        sampler=$!
        EDGEINFER_BUILD_DIR=$build EDGEINFER_CONFIG=$config EDGEINFER_BACKEND=gpu \
          EDGEINFER_BATCH=${EDGEINFER_BATCH:-16} EDGEINFER_IN_FLIGHT=$f \
          timeout -k 5 "${STREAM_TIMEOUT_S:-400}" \
          scripts/bench/gst_streams.sh -n "$n" -m "${MODES:-decode,mux,infer}" "$clip" 2>&1 |
          tee "$out/streams_${n}_f$f.txt" | tail -n 7
        kill "$sampler" 2>/dev/null
        # Busiest quarter-seconds of the whole run (both modes): GPU (SM) and NVDEC utilisation.
        sort -t, -k2 -n -r "$out/util_${n}_f$f.csv" | head -n 1 | sed 's/^/   peak GPU %, NVDEC %: /'
        done
      done
      ;;
  esac
done
nvidia-smi --query-gpu=utilization.gpu,utilization.decoder,memory.used --format=csv
# The timing caches (not the engines) as one file: the device tool returns files two folders
# deep at most. Put it in .devcarry-gst/ for the next run.
(cd "$XDG_CACHE_HOME" && find edgeinfer -name 'timing.cache*' -print0 |
  tar -czf "$out/timing_cache.tgz" --null -T -) && ls -la "$out/timing_cache.tgz"
