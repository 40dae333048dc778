# Sourced by the pipeline scripts: finds the plugin of a build and the repository's model and
# media. EDGEINFER_BUILD_DIR chooses the build (default build/release, what scripts/demo.sh
# builds); GST_PLUGIN_PATH and GST_REGISTRY point into it so that GStreamer loads this build's
# plugin and never a stale registry. EDGEINFER_GST_REGISTRY names another registry file (the
# tests give each run one of its own).
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${EDGEINFER_BUILD_DIR:-$repo/build/release}
if [ ! -f "$build/plugins/gst/libgstedgeinfer.so" ]; then
  echo "no GStreamer plugin in $build/plugins/gst: build it first, e.g." >&2
  echo "  cmake -S $repo -B $build -G Ninja && ninja -C $build gstedgeinfer" >&2
  echo "(or set EDGEINFER_BUILD_DIR to a build that has it)" >&2
  exit 1
fi
export GST_PLUGIN_PATH=$build/plugins/gst
export GST_REGISTRY=${EDGEINFER_GST_REGISTRY:-$build/plugins/gst/registry.bin}
export GST_PLUGIN_PATH_1_0=$GST_PLUGIN_PATH GST_REGISTRY_1_0=$GST_REGISTRY  # read first
models=${EDGEINFER_MODELS_DIR:-$repo/models}
media=${EDGEINFER_MEDIA_DIR:-$repo/build/media}
# The meta library (libedgeinfer-gstmeta.so) is found through the plugin's RPATH in a build; a
# build copied elsewhere (a bundle for another machine) finds it here.
export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
# The CPU backend's OpenMP threads share the cores with the decoder's, encoder's and queues'
# threads: waiting passively leaves those the cores. With libgomp's default (spinning) the
# CPU path of scripts/demo.sh took 3-15 s instead of 1 s for 68 frames on a busy 2-core
# machine (docs/performance.md). Set OMP_WAIT_POLICY=active to compare.
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}

# encode_outputs MP4 [JSONL [OVERLAY PROPERTY...]]: sets the array `outputs`, the end of a
# launch line after edgeinfer: edgeoverlay (with the properties given) ! videoconvert !
# x264enc ! mp4mux ! filesink location=MP4; with a JSONL file also a tee whose other branch
# writes one JSON line per frame (edgemetasink). With `after_overlay` set (the GPU path:
# cudadownload), edgeoverlay comes first, drawing in CUDA memory, then `after_overlay`, then the
# tee: no CUDA buffer waits in a queue. On the tee x264enc gets no lookahead (tune=zerolatency,
# see README.md), else its branch does not preroll.
encode_outputs() {
  local mp4=$1 jsonl=${2:-}
  shift $(($# < 2 ? $# : 2))
  local head=() encode=(edgeoverlay "$@" ! videoconvert ! x264enc)
  if [ -n "${after_overlay:-}" ]; then
    head=(edgeoverlay "$@" ! "$after_overlay" !)
    encode=(videoconvert ! x264enc)
  fi
  if [ -z "$jsonl" ]; then
    outputs=("${head[@]}" "${encode[@]}" ! mp4mux ! filesink location="$mp4")
    return
  fi
  outputs=("${head[@]}" tee name=results
    results. ! queue ! edgemetasink location="$jsonl"
    results. ! queue ! "${encode[@]}" tune=zerolatency ! mp4mux ! filesink location="$mp4")
}
