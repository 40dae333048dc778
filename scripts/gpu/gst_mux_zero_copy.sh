#!/usr/bin/env bash
# Runs on the GPU machine (device tool, carry [".devcarry-gst"], see gst_streams_check.sh): four
# copies of the 1080p clip through nvh264dec ! edgemux ! edgeinfer (batch 4) ! edgedemux, with
# edgeinfer's count of frames read in place from CUDA memory and each stream's faces.
set -u
mkdir -p /tmp/eg && tar -xJf .devcarry-gst/bundle.tar.xz -C /tmp/eg
source /tmp/eg/.bundle-gst/env.sh
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib:$LD_LIBRARY_PATH GST_REGISTRY=/tmp/eg/registry.bin XDG_CACHE_HOME=/tmp/eg/xdg
c=$PWD/.devcarry-gst/models/blazeface/model_back.json; v=$PWD/.devcarry-gst/VID_20191220_170832.mp4
desc=""
for i in 0 1 2 3; do desc+=" filesrc location=$v ! qtdemux ! h264parse ! nvh264dec ! m.sink_$i d.src_$i ! queue ! edgemetasink location=/tmp/s$i.jsonl"; done
GST_DEBUG=edgeinfer:4,edgemux:4 gst-launch-1.0 -q $desc edgemux name=m ! edgeinfer backend=gpu config=$c batch-size=4 ! edgedemux name=d >/tmp/mux.log 2>&1
echo "rc=$?"
for i in 0 1 2 3; do echo "stream $i: $(wc -l </tmp/s$i.jsonl) frames, faces in $(grep -c '"box"' /tmp/s$i.jsonl)"; done
grep -oE "ready on the .*|[0-9]+ frames \(.*" /tmp/mux.log | cut -c1-300
grep -iE "caps.*CUDAMemory" /tmp/mux.log | head -2 | cut -c1-200
