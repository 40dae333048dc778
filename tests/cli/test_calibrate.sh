#!/usr/bin/env bash
# End-to-end checks of `edgeinfer calibrate` (issue 6): a generated model calibrated on .npy
# tensors (ranges compared with numpy), the real BlazeFace model on real photos (JPEGs decoded
# by FFmpeg) with the sensitivity report, the cache accepted by a build of its model and refused
# by another, and the errors a user meets (bad data, damaged caches, bad options).
#   test_calibrate.sh PATH/TO/edgeinfer
set -uo pipefail
cli=$1
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
models=${EDGEINFER_MODELS_DIR:-$root/models}
media=${EDGEINFER_MEDIA_DIR:-$root/build/media}
py=${EDGEINFER_PYTHON:-/usr/bin/python3}
[[ -x $py ]] || py=python3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
pass=0
check() {  # check NAME CONDITION-COMMAND...
  local name=$1
  shift
  if "$@"; then
    pass=$((pass + 1))
  else
    echo "FAILED: $name" >&2
    failures=$((failures + 1))
  fi
}
expect_exit() {  # expect_exit CODE PATTERN COMMAND... : exit code and a message on stderr
  local code=$1 pattern=$2
  shift 2
  local err rc
  err=$("$@" 2>&1 >/dev/null)
  rc=$?
  [[ $rc -eq $code && $err == *"$pattern"* ]] || {
    echo "  exit $rc (wanted $code), stderr: $err" >&2
    return 1
  }
}

# A Conv -> Relu -> Conv model, eight random input samples, and a model with no Conv/Gemm/MatMul.
"$py" - "$work" <<'PY'
import sys, os, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
w = sys.argv[1]
rng = np.random.default_rng(1)
k1 = (rng.standard_normal((4, 3, 3, 3)) * 0.3).astype(np.float32)
k2 = (rng.standard_normal((2, 4, 3, 3)) * 0.3).astype(np.float32)
g = helper.make_graph(
    [helper.make_node("Conv", ["x", "k1"], ["c"], pads=[1, 1, 1, 1], name="conv1"),
     helper.make_node("Relu", ["c"], ["r"], name="relu1"),
     helper.make_node("Conv", ["r", "k2"], ["y"], pads=[1, 1, 1, 1], name="conv2")],
    "calib_test",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 5])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 6, 5])],
    [numpy_helper.from_array(k1, "k1"), numpy_helper.from_array(k2, "k2")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{w}/m.onnx")
os.makedirs(f"{w}/npy")
m = 0.0
for i in range(8):
    x = (rng.standard_normal((1, 3, 6, 5)) * (1 + i)).astype(np.float32)
    m = max(m, float(np.abs(x).max()))
    np.save(f"{w}/npy/s{i}.npy", x)
open(f"{w}/xmax.txt", "w").write(repr(m))
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "plain",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 5])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 3, 6, 5])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{w}/plain.onnx")
PY

# ---- the generated model on raw tensors
check "calibrate on npy tensors" "$cli" calibrate "$work/m.onnx" --data "$work/npy" --method minmax -o "$work/m.calib"
check "cache starts with its magic and version" bash -c "head -n1 '$work/m.calib' | grep -qx 'EDGEINFER-CALIBRATION 2'"
check "cache says raw preprocessing" grep -qx "preprocess raw" "$work/m.calib"
check "min-max range of x is the data maximum (numpy)" "$py" -c "
import sys
want = float(open('$work/xmax.txt').read())
got = [float(l.split()[1]) for l in open('$work/m.calib') if l.startswith('tensor ') and l.split()[2] == 'x']
sys.exit(0 if got and abs(got[0] - want) <= 1e-6 * want else 1)"
check "build accepts the model's cache" "$cli" build "$work/m.onnx" -o "$work/m.engine" --calibration-cache "$work/m.calib"
check "--smoothing writes factors the build applies" bash -c "'$cli' calibrate '$work/m.onnx' --data '$work/npy' --method minmax --smoothing -o '$work/s.calib' >/dev/null 2>&1 && grep -q '^smoothed ' '$work/s.calib' && '$cli' build '$work/m.onnx' -o '$work/s.engine' --calibration-cache '$work/s.calib' >/dev/null 2>&1"
check "report and json" bash -c "'$cli' calibrate '$work/m.onnx' --data '$work/npy' --report-json '$work/r.json' -o '$work/r.calib' 2>/dev/null | grep -q 'conv1'"
check "report json lists both layers" "$py" -c "
import json; d = json.load(open('$work/r.json'))
assert sorted(l['layer'] for l in d['layers']) == ['conv1', 'conv2'], d
assert all(-1 <= l['model_error']['cosine'] <= 1 for l in d['layers'])"
check "exclude-worst 1 keeps one layer in fp16" bash -c "'$cli' calibrate '$work/m.onnx' --data '$work/npy' --exclude-worst 1 -o '$work/x.calib' >/dev/null 2>&1 && [[ \$(grep -c '^layer fp16 ' '$work/x.calib') -eq 1 ]]"
check "help lists calibrate" bash -c "'$cli' --help | grep -q 'calibrate MODEL'"

# ---- errors
mkdir -p "$work/empty" "$work/broken"
printf 'not a jpeg' >"$work/broken/a.jpg"
check "empty data folder_n" expect_exit 2 "no image files" "$cli" calibrate "$work/m.onnx" --data "$work/empty" -o "$work/e.calib"
check "missing data folder_n" expect_exit 3 "calibration data" "$cli" calibrate "$work/m.onnx" --data "$work/nothere" -o "$work/e.calib"
check "images without --config_n" expect_exit 2 "--config" "$cli" calibrate "$work/m.onnx" --data "$work/broken" -o "$work/e.calib"
check "no quantizable layers_n" expect_exit 1 "no quantizable layers" "$cli" calibrate "$work/plain.onnx" --data "$work/npy" -o "$work/e.calib"
check "no cache written for it_n" test ! -e "$work/e.calib"
check "unknown method_n" expect_exit 2 "unknown calibration method" "$cli" calibrate "$work/m.onnx" --data "$work/npy" --method kl -o "$work/e.calib"
check "percentile out of range_n" expect_exit 2 "percentile" "$cli" calibrate "$work/m.onnx" --data "$work/npy" --method percentile --percentile 101 -o "$work/e.calib"
check "bad --max-images_n" expect_exit 2 "--max-images" "$cli" calibrate "$work/m.onnx" --data "$work/npy" --max-images 0 -o "$work/e.calib"
check "bad --exclude-threshold_n" expect_exit 2 "--exclude-threshold" "$cli" calibrate "$work/m.onnx" --data "$work/npy" --exclude-threshold 2 -o "$work/e.calib"
check "bad --smoothing-alpha_n" expect_exit 2 "--smoothing-alpha" "$cli" calibrate "$work/m.onnx" --data "$work/npy" --smoothing --smoothing-alpha 2 -o "$work/e.calib"
check "--decoder-view without --config_n" expect_exit 2 "--decoder-view needs --config" "$cli" calibrate "$work/m.onnx" --data "$work/npy" --decoder-view -o "$work/e.calib"
check "--min-agreement without --config_n" expect_exit 2 "--min-agreement needs --config" "$cli" calibrate "$work/m.onnx" --data "$work/npy" --min-agreement 0.98 -o "$work/e.calib"
check "bad --min-agreement_n" expect_exit 2 "--min-agreement needs a share in (0, 1]" "$cli" calibrate "$work/m.onnx" --data "$work/npy" --min-agreement 98 -o "$work/e.calib"
check "--min-agreement not a number_n" expect_exit 2 "--min-agreement needs a number" "$cli" calibrate "$work/m.onnx" --data "$work/npy" --min-agreement most -o "$work/e.calib"
check "bad --agreement-images_n" expect_exit 2 "--agreement-images needs an integer >= 1" "$cli" calibrate "$work/m.onnx" --data "$work/npy" --agreement-images 0 -o "$work/e.calib"
check "unwritable cache path_n" expect_exit 1 "cannot open" "$cli" calibrate "$work/m.onnx" --data "$work/npy" -o "$work/no/dir/c.calib"
# --backend cuda measures the ranges on the GPU (the same cache as the CPU's, within rounding);
# without a GPU it is an error that says so.
if ! "$cli" device 2>/dev/null | grep -q "^GPU: none usable"; then  # this binary sees a GPU
  check "calibrate on the GPU" "$cli" calibrate "$work/m.onnx" --data "$work/npy" --method minmax --backend cuda -o "$work/gpu.calib"
  check "GPU cache builds" "$cli" build "$work/m.onnx" --backend cpu --int8 --calibration-cache "$work/gpu.calib" -o "$work/g.engine"
  # The same ranges as the CPU's, to float rounding.
  "$cli" calibrate "$work/m.onnx" --data "$work/npy" --method minmax --backend cpu -o "$work/cpu.calib" >/dev/null 2>&1
  same_ranges() {
    paste <(grep '^tensor ' "$work/cpu.calib") <(grep '^tensor ' "$work/gpu.calib") |
      awk -F'\t' '{split($1, c, " "); split($2, g, " "); if (c[3] != g[3]) bad = 1;
        d = c[2] - g[2]; if (d < 0) d = -d; if (d > 1e-5 * c[2] + 1e-12) bad = 1; n++}
        END {exit (bad || n == 0)}'
  }
  check "GPU ranges are the CPU's" same_ranges
else
  check "calibrate on the GPU without one_n" expect_exit 1 "no GPU is usable" "$cli" calibrate "$work/m.onnx" --data "$work/npy" --backend cuda -o "$work/e.calib"
fi
check "missing cache at build_n" expect_exit 3 "calibration cache" "$cli" build "$work/m.onnx" -o "$work/t.engine" --calibration-cache "$work/none.calib"
head -c 200 "$work/m.calib" >"$work/trunc.calib"
check "truncated cache_n" expect_exit 1 "line" "$cli" build "$work/m.onnx" -o "$work/t.engine" --calibration-cache "$work/trunc.calib"
sed 's/^tensor \([^ ]*\) x$/tensor 1.2.3 x/' "$work/m.calib" >"$work/num.calib"
check "corrupt number in cache_n" expect_exit 1 "'1.2.3' is not a finite number" "$cli" build "$work/m.onnx" -o "$work/t.engine" --calibration-cache "$work/num.calib"
sed '1s/.*/EDGEINFER-CALIBRATION 99/' "$work/m.calib" >"$work/ver.calib"
check "other cache version_n" expect_exit 1 "format version 99" "$cli" build "$work/m.onnx" -o "$work/t.engine" --calibration-cache "$work/ver.calib"
sed 's/^model .*/model 0000000000000000/' "$work/m.calib" >"$work/other.calib"
check "cache of another model_n" expect_exit 2 "another model" "$cli" build "$work/m.onnx" -o "$work/t.engine" --calibration-cache "$work/other.calib"

# ---- INT8 builds from a cache or from data (the CPU emulates INT8: its outputs are not FP32's)
check "cpu int8 build from the cache" bash -c "'$cli' build '$work/m.onnx' --backend cpu --int8 --calibration-cache '$work/m.calib' -o '$work/i8.engine' >'$work/i8.out' 2>&1"
check "the int8 engine says int8" bash -c "'$cli' inspect '$work/i8.engine' | grep -q 'precision int8'"
check "cpu int8 build from data writes ENGINE.calib" bash -c "'$cli' build '$work/m.onnx' --backend cpu --int8 --calibration-data '$work/npy' -o '$work/d.engine' >/dev/null 2>&1 && [[ -s '$work/d.engine.calib' ]] && grep -q '^tensor ' '$work/d.engine.calib'"
check "a build with that cache gives the same engine outputs" bash -c "
  '$cli' run '$work/d.engine' --input x='$work/npy/s0.npy' --outputs '$work/o1' >/dev/null 2>&1 &&
  '$cli' run '$work/m.onnx' --backend cpu --int8 --calibration-cache '$work/d.engine.calib' --input x='$work/npy/s0.npy' --outputs '$work/o2' >/dev/null 2>&1 &&
  '$cli' run '$work/m.onnx' --backend cpu --input x='$work/npy/s0.npy' --outputs '$work/o3' >/dev/null 2>&1 &&
  '$py' -c \"
import numpy as np, sys
a, b, c = (np.load('$work/o%d/y.npy' % i) for i in (1, 2, 3))
sys.exit(0 if np.array_equal(a, b) and not np.array_equal(a, c) else 1)\""
check "run with --calibration-data calibrates for that run" bash -c "'$cli' run '$work/m.onnx' --backend cpu --int8 --calibration-data '$work/npy' --input x='$work/npy/s0.npy' --outputs '$work/o4' >/dev/null 2>&1 && '$py' -c \"import numpy as np, sys; sys.exit(0 if np.array_equal(np.load('$work/o4/y.npy'), np.load('$work/o1/y.npy')) else 1)\""
check "int8 without ranges_n" expect_exit 2 "INT8 needs a calibration cache" "$cli" build "$work/m.onnx" --backend cpu --int8 -o "$work/n.engine"
check "calibration data without --int8_n" expect_exit 2 "add --int8" "$cli" build "$work/m.onnx" --backend cpu --calibration-data "$work/npy" -o "$work/n.engine"
check "cache and data both_n" expect_exit 2 "not both" "$cli" build "$work/m.onnx" --backend cpu --int8 --calibration-data "$work/npy" --calibration-cache "$work/m.calib" -o "$work/n.engine"
check "--min-agreement without --calibration-data_n" expect_exit 2 "--min-agreement is for --calibration-data" "$cli" build "$work/m.onnx" --backend cpu --int8 --calibration-cache "$work/m.calib" --min-agreement 0.9 -o "$work/n.engine"
check "build --min-agreement without --config_n" expect_exit 2 "--min-agreement needs --config" "$cli" build "$work/m.onnx" --backend cpu --int8 --calibration-data "$work/npy" --min-agreement 0.9 -o "$work/n.engine"
check "missing calibration data_n" expect_exit 3 "calibration data" "$cli" build "$work/m.onnx" --backend cpu --int8 --calibration-data "$work/nothere" -o "$work/n.engine"
check "no engine after failed calibration_n" test ! -e "$work/n.engine"

# ---- BlazeFace on real photos (JPEGs through FFmpeg)
if [[ -f $models/blazeface/blazeface_front_128.onnx && -f $media/faces/2008_002506.jpg ]]; then
  mkdir -p "$work/photos"
  cp "$media"/faces/*.jpg "$work/photos/"
  n=$(ls "$work/photos"/*.jpg | wc -l)
  check "blazeface calibrates on real photos" bash -c "'$cli' calibrate --config '$models/blazeface/model.json' --data '$work/photos' --method minmax --report --report-images 2 --exclude-worst 2 --output-layers int8 -o '$work/bf.calib' >'$work/bf.out' 2>'$work/bf.err'"
  check "progress shows images and ETA" bash -c "grep -q 'ranges: $n/$n images' '$work/bf.err' && grep -q 'ETA' '$work/bf.err'"
  check "report names blazeface layers" grep -q "StatefulPartitionedCall" "$work/bf.out"
  check "--decoder-view reports blazeface as its decoder reads it" bash -c "'$cli' calibrate --config '$models/blazeface/model.json' --data '$work/photos' --method minmax --report --report-images 2 --decoder-view -o '$work/bfv.calib' 2>/dev/null | grep -q 'compared as the SSD decoder reads them'"
  check "--min-agreement keeps layers out of INT8 until the faces agree" bash -c "'$cli' calibrate --config '$models/blazeface/model.json' --data '$work/photos' --method minmax --min-agreement 1 --report-json '$work/bfa.json' -o '$work/bfa.calib' 2>/dev/null | grep -q 'agreement with FP32: the decoder.s detections, same class and IoU >= 0.9; target 100.0 %'"
  check "--agreement-images: the target judges more images than the ranking" bash -c "'$cli' calibrate --config '$models/blazeface/model.json' --data '$work/photos' --method minmax --min-agreement 0.9 --report-images 2 --agreement-images 4 -o '$work/bfi.calib' 2>/dev/null | grep -q 'the agreement on 4 sample(s); each layer alone on the first 2'"
  check "--min-agreement: the policy gives every FP32 face again" "$py" -c "
import json, sys
r = json.load(open('$work/bfa.json'))
p = r['with_policy']['agreement']
kept = sum(1 for l in r['layers'] if l['policy'] != 'int8')
heads = sum(1 for l in r['layers'] if l['output_layer'])
sys.exit(0 if p['total'] > 0 and p['matched'] == p['total'] and heads == r['kept_output_layers'] > 0 and kept == r['kept_for_agreement'] + heads else 1)"
  check "a detector's config keeps its output layers (the heads) out of INT8" bash -c "'$cli' calibrate --config '$models/blazeface/model.json' --data '$work/photos' --method minmax --report --report-images 1 --report-json '$work/bfo.json' -o '$work/bfo.calib' 2>/dev/null | grep -q 'layer(s) computing the model.s outputs kept out of INT8 (policy marked \*)' && '$py' -c \"
import json, sys
r = json.load(open('$work/bfo.json'))
heads = [l['layer'] for l in r['layers'] if l['output_layer']]
sys.exit(0 if len(heads) == r['kept_output_layers'] == 4 and all(l['policy'] == 'fp16' for l in r['layers'] if l['output_layer']) else 1)\""
  check "--output-layers int8: the heads in INT8 too" bash -c "'$cli' calibrate --config '$models/blazeface/model.json' --data '$work/photos' --method minmax --output-layers int8 -o '$work/bfn.calib' 2>/dev/null && [[ \$(grep -c '^layer fp16 ' '$work/bfn.calib') -eq 0 ]]"
  check "bad --output-layers_n" expect_exit 2 "--output-layers must be keep, int8 or auto, not 'some'" "$cli" calibrate --config "$models/blazeface/model.json" --data "$work/photos" --output-layers some -o "$work/bfx.calib"
  check "build --calibration-data --min-agreement: the target reaches the calibration" bash -c "'$cli' build '$models/blazeface/blazeface_front_128.onnx' --config '$models/blazeface/model.json' --backend cpu --int8 --calibration-data '$work/photos' --min-agreement 1 -o '$work/bfa.engine' 2>&1 >/dev/null | grep -q 'target 100.0 %, [0-9]* layer(s) kept out of INT8 for it' && [[ -s '$work/bfa.engine' ]]"
  check "bad --agreement-backend_n" expect_exit 2 "--agreement-backend must be cpu, cuda or auto" "$cli" calibrate --config "$models/blazeface/model.json" --data "$work/photos" --min-agreement 0.9 --agreement-backend tpu -o "$work/bfj.calib"
  if "$cli" device 2>/dev/null | grep -q "^GPU: none usable"; then
    check "--agreement-backend cuda without a GPU_n" expect_exit 1 "judged on the GPU engine, but no GPU is usable" "$cli" calibrate --config "$models/blazeface/model.json" --data "$work/photos" --min-agreement 0.9 --agreement-backend cuda -o "$work/bfj.calib"
  else
    check "--agreement-backend cuda: the policy judged on the GPU engine" bash -c "'$cli' calibrate --config '$models/blazeface/model.json' --data '$work/photos' --method minmax --min-agreement 0.9 --agreement-backend cuda -o '$work/bfj.calib' 2>/dev/null | grep -q 'the policy judged on the GPU engine'"
  fi
  check "build --min-agreement out of range_n" expect_exit 2 "needs a share in (0, 1]" "$cli" build "$models/blazeface/blazeface_front_128.onnx" --config "$models/blazeface/model.json" --backend cpu --int8 --calibration-data "$work/photos" --min-agreement 0 -o "$work/bfb.engine"
  check "two layers kept in fp16" bash -c "[[ \$(grep -c '^layer fp16 ' '$work/bf.calib') -eq 2 ]]"
  check "every photo calibrated" grep -qx "images $n" "$work/bf.calib"
  check "blazeface build accepts its cache" "$cli" build "$models/blazeface/blazeface_front_128.onnx" -o "$work/bf.engine" --calibration-cache "$work/bf.calib"
  check "the back model refuses the front cache_n" expect_exit 2 "another model" "$cli" build "$models/blazeface/blazeface_back_256.onnx" -o "$work/bb.engine" --calibration-cache "$work/bf.calib"
  check "only broken images_n" expect_exit 2 "no calibration sample could be read" "$cli" calibrate --config "$models/blazeface/model.json" --data "$work/broken" -o "$work/e.calib"
else
  echo "skipped the BlazeFace checks: run models/fetch.sh blazeface and scripts/fetch_media.sh"
fi

echo "$pass passed, $failures failed"
[[ $failures -eq 0 ]]
