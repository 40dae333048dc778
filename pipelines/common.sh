# Sourced by the pipeline scripts: finds the plugin of a build and the repository's model and
# media. EDGEINFER_BUILD_DIR chooses the build (default build/release, what scripts/demo.sh
# builds); GST_PLUGIN_PATH and GST_REGISTRY point into it so that GStreamer loads this build's
# plugin and never a stale registry.
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${EDGEINFER_BUILD_DIR:-$repo/build/release}
if [ ! -f "$build/plugins/gst/libgstedgeinfer.so" ]; then
  echo "no GStreamer plugin in $build/plugins/gst: build it first, e.g." >&2
  echo "  cmake -S $repo -B $build -G Ninja && ninja -C $build gstedgeinfer" >&2
  echo "(or set EDGEINFER_BUILD_DIR to a build that has it)" >&2
  exit 1
fi
export GST_PLUGIN_PATH=$build/plugins/gst
export GST_REGISTRY=$build/plugins/gst/registry.bin
export GST_PLUGIN_PATH_1_0=$GST_PLUGIN_PATH GST_REGISTRY_1_0=$GST_REGISTRY  # read first
models=${EDGEINFER_MODELS_DIR:-$repo/models}
media=${EDGEINFER_MEDIA_DIR:-$repo/build/media}
