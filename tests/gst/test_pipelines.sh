#!/usr/bin/env bash
# gst-launch-1.0 pipelines through the plugin, end to end (ctest: gst_pipelines):
#   1. gst-inspect-1.0 finds the five elements and shows their properties;
#   2. videotestsrc (30 frames, a real portrait laid over it with gdkpixbufoverlay) and
#   3. real video (kphotoalbum's webcam footage, 68 frames; and the 1080p phone clip of
#      forensics-samples-files when it is installed) each go through
#        edgeinfer ! tee ! edgeoverlay ! videoconvert ! x264enc ! mp4mux ! filesink
#      with edgemetasink and the undrawn frames on the tee's other branches. The MP4 is then
#      decoded with GStreamer (qtdemux ! h264parse ! avdec_h264) and checked: as many frames as
#      went in, faces found in (most) frames, and around every detection the decoded frame
#      differs from the input frame in the box's colour while a region away from the boxes
#      only carries the encoder's noise.
#   4. pipelines/multi_stream.sh (edgemux ! edgeinfer ! edgedemux) on three streams (the webcam
#      footage twice and the phone clip when installed): each stream's MP4 decodes to all its
#      frames, and the webcam streams' results equal those of the single-stream run of 3.
#
#   test_pipelines.sh BUILD_DIR [SANITIZERS]
#
# GST_PLUGIN_PATH defaults to BUILD_DIR/plugins/gst. The registry is a new file of this run's
# (GST_REGISTRY to choose another): a registry shared with other tests running at the same time
# could hold this plugin blacklisted by a tool that scanned it without the sanitizer runtimes
# preloaded, and a registry kept from an earlier run could hold it blacklisted for good.
# SANITIZERS (e.g. "address,undefined", CMake's EDGEINFER_SANITIZE): the plugin is
# instrumented but gst-launch-1.0 is not, so the sanitizer runtimes the plugin links are
# preloaded into the GStreamer tools, with leak detection off (GLib and gst-launch keep memory
# to the end on purpose; leaks are checked by edgeinfer_gst_tests, which is instrumented).
set -uo pipefail

build=${1:?usage: test_pipelines.sh BUILD_DIR [SANITIZERS]}
sanitize=${2:-}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
export GST_PLUGIN_PATH=${GST_PLUGIN_PATH:-$build/plugins/gst}
media=${EDGEINFER_MEDIA_DIR:-$repo/build/media}
models=${EDGEINFER_MODELS_DIR:-$repo/models}
clip=/usr/share/forensics-samples/original-files/movie1/VID_20191220_170832.mp4
plugin=$build/plugins/gst/libgstedgeinfer.so
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export GST_REGISTRY=${GST_REGISTRY:-$work/registry.bin}
export EDGEINFER_GST_REGISTRY=$GST_REGISTRY  # the pipelines/ scripts run below use it too
# GStreamer reads the _1_0 names first: make them say the same.
export GST_PLUGIN_PATH_1_0=$GST_PLUGIN_PATH GST_REGISTRY_1_0=$GST_REGISTRY

failures=0
fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}
pass() { echo "ok: $*"; }

[ -f "$plugin" ] || { echo "FAIL: $plugin is missing (build the gstedgeinfer target)" >&2; exit 1; }

preload=""
if [ -n "$sanitize" ]; then
  preload=$(ldd "$plugin" | awk '/lib(asan|ubsan|tsan|lsan)\.so/ {print $3}' | paste -sd: -)
  [ -n "$preload" ] || { echo "FAIL: $plugin links no sanitizer runtime (SANITIZERS=$sanitize)" >&2; exit 1; }
  echo "sanitizer build: preloading $preload into the GStreamer tools"
fi
# Runs a GStreamer tool (with the sanitizer runtimes preloaded in a sanitizer build), failing
# after 180 s.
gst() {
  if [ -n "$preload" ]; then
    LD_PRELOAD=$preload ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
      timeout 180 "$@"
  else
    timeout 180 "$@"
  fi
}

# ---- 1. gst-inspect-1.0 -------------------------------------------------------------------
for element in edgeinfer edgeoverlay edgemetasink edgemux edgedemux; do
  if out=$(gst gst-inspect-1.0 "$element" 2>&1); then
    pass "gst-inspect-1.0 $element"
  else
    fail "gst-inspect-1.0 $element: $out"
  fi
done
out=$(gst gst-inspect-1.0 edgeinfer 2>&1)
for prop in config model engine-cache-dir precision calibration-cache calibration-data \
  calibration-min-agreement batch-size interval device-id backend unique-id infer-on-id \
  infer-on-class post-messages; do
  grep -Eq "^  $prop( |:)" <<<"$out" || fail "gst-inspect-1.0 edgeinfer does not show property $prop"
done
out=$(gst gst-inspect-1.0 edgemux 2>&1)
for prop in batch-size timeout start-timeout; do
  grep -q "^  $prop " <<<"$out" || fail "gst-inspect-1.0 edgemux does not show property $prop"
done
grep -q "SINK template: 'sink_%u'" <<<"$out" || fail "gst-inspect-1.0 edgemux: no sink_%u pads"
grep -q "SRC template: 'src_%u'" <<<"$(gst gst-inspect-1.0 edgedemux 2>&1)" ||
  fail "gst-inspect-1.0 edgedemux: no src_%u pads"

if [ ! -f "$models/blazeface/blazeface_front_128.onnx" ] || [ ! -f "$media/kphotoalbum/movie.avi" ]; then
  echo "SKIP: the pipelines need the BlazeFace model (models/fetch.sh) and the test media" \
    "(scripts/fetch_media.sh)"
  exit $((failures > 0))
fi

# The engine build shows in GStreamer's log: the element's progress (category edgeinfer) and
# the SDK's own messages routed into category edgeinfer-sdk.
log=$(GST_DEBUG=edgeinfer:4,edgeinfer-sdk:4 GST_DEBUG_NO_COLOR=1 gst gst-launch-1.0 -q \
  videotestsrc num-buffers=2 ! video/x-raw,width=64,height=48 ! videoconvert ! \
  edgeinfer config="$models/blazeface/model.json" backend=cpu engine-cache-dir="$work/log-engines" ! \
  fakesink 2>&1)
grep -q "edgeinfer .*building the engine of .* or loading it from the engine cache" <<<"$log" &&
  grep -q "edgeinfer-sdk .*building the engine of blazeface-front" <<<"$log" &&
  grep -q "edgeinfer .*blazeface-front ready on the CPU .*engine built in" <<<"$log" &&
  pass "engine build progress in the GStreamer log" ||
  fail "engine build progress missing from the GStreamer log: $(grep -i engine <<<"$log" | head -5)"

# edgemetasink without a location writes to stdout, one line per frame.
lines=$(gst gst-launch-1.0 -q videotestsrc num-buffers=3 ! video/x-raw,width=32,height=24 ! \
  edgemetasink 2>/dev/null | grep -c '^{"frame":')
[ "$lines" = 3 ] && pass "edgemetasink to stdout" || fail "edgemetasink to stdout: $lines JSON lines, 3 frames"

# ---- Checks on a run's files ----------------------------------------------------------------
# check_run NAME FRAMES MIN_FACE_FRACTION: $work/NAME.jsonl (edgeinfer's results),
# $work/NAME-in/*.rgb (the frames before the overlay), $work/NAME.mp4 (the output).
check_run() {
  local name=$1 frames=$2 min_faces=$3 dir=$work/$1
  if ! gst gst-launch-1.0 -q filesrc location="$work/$name.mp4" ! qtdemux ! h264parse ! avdec_h264 ! \
    videoconvert ! video/x-raw,format=RGB ! tee name=t \
    t. ! queue ! edgemetasink location="$work/$name-decoded.jsonl" \
    t. ! queue ! multifilesink location="$dir-out/%05d.rgb" >"$work/$name-decode.log" 2>&1; then
    fail "$name: decoding the MP4 failed: $(tail -3 "$work/$name-decode.log")"
    return
  fi
  python3 - "$name" "$frames" "$min_faces" "$work" <<'EOF'
import json, os, sys
name, frames, min_faces, work = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
bad = []
found = [json.loads(l) for l in open(f"{work}/{name}.jsonl")]
decoded = [json.loads(l) for l in open(f"{work}/{name}-decoded.jsonl")]
if len(found) != frames: bad.append(f"edgemetasink wrote {len(found)} lines, {frames} frames went in")
if len(decoded) != frames: bad.append(f"the MP4 decodes to {len(decoded)} frames, {frames} went in")
w, h = found[0]["width"], found[0]["height"]
if (decoded[0]["width"], decoded[0]["height"]) != (w, h):
    bad.append(f"the MP4 is {decoded[0]['width']}x{decoded[0]['height']}, the input {w}x{h}")
with_faces = [i for i, f in enumerate(found) if f["results"] and f["results"][0]["detections"]]
if len(with_faces) < min_faces * frames:
    bad.append(f"faces in {len(with_faces)} of {frames} frames, expected at least {min_faces:.0%}")
def frame(kind, i):
    return open(f"{work}/{name}-{kind}/{i:05d}.rgb", "rb").read()
def inside(pixels):
    return [(x, y) for x, y in pixels if 0 <= x < w and 0 <= y < h]
def mean_diff(a, b, pixels):
    d = [abs(a[3 * (y * w + x) + c] - b[3 * (y * w + x) + c]) for x, y in pixels for c in range(3)]
    return sum(d) / len(d)
def mean_rgb(img, pixels):
    return [sum(img[3 * (y * w + x) + c] for x, y in pixels) / len(pixels) for c in range(3)]
checked = 0
for i in with_faces[:: max(1, len(with_faces) // 8)]:
    d = found[i]["results"][0]["detections"][0]
    x1, y1, x2, y2 = (round(v) for v in d["box"])
    x2, y2 = min(x2, w) - 1, min(y2, h) - 1
    if x2 - x1 < 8 or y2 - y1 < 8: continue
    src, out = frame("in", i), frame("out", i)
    # The box's left and right edges (2 pixels wide, below any label bar) and bottom edge.
    edge = [(x, y) for y in range(y1 + (y2 - y1) // 3, y2 - 1) for x in (x1, x1 + 1, x2 - 1, x2)]
    edge += [(x, y) for x in range(x1 + 2, x2 - 2) for y in (y2 - 1, y2)]
    edge = inside(edge)
    diff, colour = mean_diff(src, out, edge), mean_rgb(out, edge)
    # Class 0's colour is green: on the edge the output is green, whatever the photo was.
    if diff < 25 or not (colour[1] > 150 and colour[1] > colour[0] + 60 and colour[1] > colour[2] + 60):
        bad.append(f"frame {i}: box ({x1},{y1})-({x2},{y2}) not drawn: mean difference {diff:.1f}, "
                   f"mean RGB on the edge {[round(c) for c in colour]}")
    # A 12x12 region in the corner farthest from every box and keypoint: encoder noise only.
    corners = [(0, 0), (w - 12, 0), (0, h - 12), (w - 12, h - 12)]
    def clearance(c):
        cx, cy = c[0] + 6, c[1] + 6
        return min(max(abs(cx - (b["box"][0] + b["box"][2]) / 2) - (b["box"][2] - b["box"][0]) / 2,
                       abs(cy - (b["box"][1] + b["box"][3]) / 2) - (b["box"][3] - b["box"][1]) / 2)
                   for r in found[i]["results"] for b in r["detections"])
    cx, cy = max(corners, key=clearance)
    quiet = float("nan")
    if clearance((cx, cy)) > 40:
        quiet = mean_diff(src, out, [(x, y) for y in range(cy, cy + 12) for x in range(cx, cx + 12)])
        # Encoder noise (x264 ultrafast on noisy 160x120 webcam frames: about 12) stays well
        # below the drawing's difference.
        if quiet > 20 or diff < 3 * quiet:
            bad.append(f"frame {i}: the region at ({cx},{cy}) away from the boxes differs by "
                       f"{quiet:.1f}, the box edge by {diff:.1f}")
    quiet = quiet if clearance((cx, cy)) > 40 else float("nan")
    print(f"  frame {i}: box ({x1},{y1})-({x2},{y2}) edge difference {diff:.1f}, edge RGB "
          f"{[round(c) for c in colour]}, quiet region difference {quiet:.1f}")
    checked += 1
if checked == 0: bad.append("no detection was large enough to check the drawing")
print(f"{name}: {len(found)} frames in, {len(decoded)} decoded, faces in {len(with_faces)}, "
      f"drawing checked in {checked} frames")
for b in bad: print(f"  {b}")
sys.exit(1 if bad else 0)
EOF
  if [ $? -eq 0 ]; then pass "$name"; else fail "$name: see above"; fi
}

# run_pipeline NAME "SOURCE ELEMENTS" CONFIG [OVERLAY PROPERTIES]: the source's frames through
# edgeinfer, then overlay + H.264 MP4 on one branch, JSON and the undrawn frames on others.
# x264enc speed-preset=ultrafast: fast, and without lookahead, so the encoder does not hold
# frames back while the other branches' queues fill up and block the tee before the MP4
# branch has prerolled (with the default preset that deadlocks; see
# pipelines/detector_classifier.sh).
run_pipeline() {
  local name=$1 source=$2 config=$3 overlay=${4:-}
  mkdir -p "$work/$name-in" "$work/$name-out"
  # shellcheck disable=SC2086  # $source and $overlay are launch-line fragments
  if gst gst-launch-1.0 -q $source ! videoconvert ! \
    edgeinfer config="$config" backend=cpu engine-cache-dir="$work/engines" ! tee name=t \
    t. ! queue ! edgeoverlay $overlay ! videoconvert ! x264enc speed-preset=ultrafast ! mp4mux ! \
    filesink location="$work/$name.mp4" \
    t. ! queue ! edgemetasink location="$work/$name.jsonl" \
    t. ! queue ! videoconvert ! video/x-raw,format=RGB ! multifilesink location="$work/$name-in/%05d.rgb" \
    >"$work/$name.log" 2>&1; then
    pass "$name: pipeline ran to EOS"
  else
    fail "$name: pipeline failed: $(tail -5 "$work/$name.log")"
    return 1
  fi
}

# ---- 2. videotestsrc ----------------------------------------------------------------------------
if run_pipeline testsrc "videotestsrc num-buffers=30 pattern=ball ! video/x-raw,width=320,height=240 ! \
    gdkpixbufoverlay location=$media/kphotoalbum/anne_helene.jpg offset-x=80 overlay-width=160 \
    overlay-height=240" "$models/blazeface/model_back.json"; then
  check_run testsrc 30 1.0
fi

# ---- 3. Real video ------------------------------------------------------------------------------
if run_pipeline webcam "filesrc location=$media/kphotoalbum/movie.avi ! decodebin" \
  "$models/blazeface/model.json"; then
  check_run webcam 68 0.9
fi
if [ -f "$clip" ]; then
  # 1080p: thicker lines so the drawing survives the encoder; faces in 32 of 41 frames when
  # this was written.
  if run_pipeline phone "filesrc location=$clip ! decodebin" "$models/blazeface/model_back.json" \
    "thickness=6"; then
    check_run phone 41 0.6
  fi
else
  echo "SKIP: $clip is absent (Debian's forensics-samples-files)"
fi

# ---- 4. Several streams batched: pipelines/multi_stream.sh ------------------------------------
# The single-stream webcam run above wrote $work/webcam.jsonl with the same model and input.
if [ -f "$work/webcam.jsonl" ]; then
  inputs=("$media/kphotoalbum/movie.avi")
  [ -f "$clip" ] && inputs+=("$clip")
  inputs+=("$media/kphotoalbum/movie.avi")
  if EDGEINFER_BUILD_DIR=$build EDGEINFER_BACKEND=cpu \
    gst bash "$repo/pipelines/multi_stream.sh" "$work/multi" "${inputs[@]}" >"$work/multi.log" 2>&1; then
    pass "multi_stream.sh: ${#inputs[@]} streams ran to EOS"
    ok=1
    for i in "${!inputs[@]}"; do
      frames=$(gst gst-launch-1.0 -q filesrc location="$work/multi/stream$i.mp4" ! qtdemux ! \
        h264parse ! avdec_h264 ! edgemetasink 2>/dev/null | grep -c '^{"frame":')
      want=$(gst gst-launch-1.0 -q filesrc location="${inputs[$i]}" ! decodebin ! videoconvert ! \
        edgemetasink 2>/dev/null | grep -c '^{"frame":')
      if [ "$frames" != "$want" ]; then
        fail "multi_stream.sh: stream$i.mp4 has $frames frames, the input $want"
        ok=0
      fi
    done
    python3 - "$work/multi/results.jsonl" "$work/webcam.jsonl" "${#inputs[@]}" <<'EOF' || ok=0
import json, sys
multi, single, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
streams = {}
for l in open(multi):
    j = json.loads(l)
    streams.setdefault(j["stream"], []).append(j)
alone = [json.loads(l) for l in open(single)]
bad = []
if sorted(streams) != list(range(n)): bad.append(f"streams in results.jsonl: {sorted(streams)}")
for s in (0, n - 1):  # the webcam footage: the same frames as the single-stream run
    got = streams.get(s, [])
    if [j["frame"] for j in got] != list(range(len(alone))):
        bad.append(f"stream {s}: {len(got)} frames, the single-stream run {len(alone)}")
        continue
    for a, b in zip(got, alone):
        if a["results"][0]["detections"] != b["results"][0]["detections"] or a["pts"] != b["pts"]:
            bad.append(f"stream {s} frame {a['frame']}: results differ from the single-stream run")
            break
faces = sum(bool(j["results"][0]["detections"]) for j in streams.get(0, []))
print(f"multi_stream: frames per stream {[len(streams[s]) for s in sorted(streams)]}, "
      f"faces in {faces} frames of stream 0")
for b in bad: print(f"  {b}")
sys.exit(1 if bad else 0)
EOF
    if [ $ok = 1 ]; then
      pass "multi_stream.sh: every stream's MP4 whole, results equal the single-stream run"
    else
      fail "multi_stream.sh: see above"
    fi
  else
    fail "multi_stream.sh failed: $(tail -5 "$work/multi.log")"
  fi
fi

echo "$failures failure(s)"
exit $((failures > 0))
