#!/usr/bin/env bash
# End-to-end checks of the `edgeinfer` command line on a model generated here (python3-onnx):
# inspect, build, run (outputs compared with numpy), bench, device, cache — and the errors a
# user meets (missing file, garbage model, truncated engine, unknown input, missing option).
#   test_cli.sh PATH/TO/edgeinfer
set -uo pipefail
cli=$1
# Debian's python3 carries python3-onnx/python3-numpy (scripts/setup.sh); another python3 on
# PATH (pyenv, a venv) may not.
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

"$py" - "$work" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
w = sys.argv[1]
rng = np.random.default_rng(0)
b = rng.standard_normal((1, 4, 1, 1)).astype(np.float32)
k = rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.2
g = helper.make_graph(
    [helper.make_node("Conv", ["x", "k"], ["c"], pads=[1, 1, 1, 1]),
     helper.make_node("Add", ["c", "b"], ["s"]),
     helper.make_node("Relu", ["s"], ["y"])],
    "cli_test",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 5])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 6, 5])],
    [numpy_helper.from_array(k, "k"), numpy_helper.from_array(b, "b")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{w}/m.onnx")
x = rng.standard_normal((1, 3, 6, 5)).astype(np.float32)
np.save(f"{w}/x.npy", x)
# numpy reference: direct convolution with zero padding
xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
y = np.zeros((1, 4, 6, 5), np.float64)
for o in range(4):
    for i in range(6):
        for j in range(5):
            y[0, o, i, j] = np.sum(xp[0, :, i:i + 3, j:j + 3] * k[o])
np.save(f"{w}/y_ref.npy", np.maximum(y + b, 0).astype(np.float32))
PY

check "inspect shows the fused conv" bash -c "'$cli' inspect '$work/m.onnx' | grep -q FusedConv"
check "build writes an engine" "$cli" build "$work/m.onnx" -o "$work/m.engine"
check "run writes outputs" "$cli" run "$work/m.engine" --input "x=$work/x.npy" --outputs "$work/out" --iterations 3
check "outputs match numpy" "$py" -c "
import numpy as np, sys
y = np.load('$work/out/y.npy'); r = np.load('$work/y_ref.npy')
sys.exit(0 if y.shape == r.shape and np.allclose(y, r, rtol=1e-5, atol=1e-5) else 1)"
check "bench writes json" "$cli" bench "$work/m.engine" --iterations 5 --warmup 1 --json "$work/b.json"
check "bench json is complete" "$py" -c "
import json; d = json.load(open('$work/b.json')); assert d['iterations'] == 5 and d['p50_ms'] > 0"
check "bench with several contexts" "$cli" bench "$work/m.engine" --iterations 4 --warmup 1 --contexts 3 --json "$work/bc.json"
check "several contexts: every context's runs counted" "$py" -c "
import json; d = json.load(open('$work/bc.json'))
assert d['contexts'] == 3 and d['wall_ms'] > 0, d
assert abs(d['throughput_per_s'] - 1000.0 * 3 * 4 * d['batch'] / d['wall_ms']) < 1e-6 * d['throughput_per_s'], d"
check "no contexts_n" expect_exit 2 "--contexts needs" "$cli" bench "$work/m.engine" --iterations 1 --contexts 0
check "too many contexts_n" expect_exit 2 "--contexts needs" "$cli" bench "$work/m.engine" --iterations 1 --contexts 65
check "non-numeric contexts_n" expect_exit 2 "--contexts needs" "$cli" bench "$work/m.engine" --iterations 1 --contexts two
check "device prints the cpu key" bash -c "'$cli' device | grep -q 'device key cpu-'"
mkdir -p "$work/cachedir"
check "cache list on an empty dir" "$cli" cache list --dir "$work/cachedir"
check "cache list on a missing dir_n" expect_exit 3 "no timing cache directory" "$cli" cache list --dir "$work/nocache"

# Errors: clear message, right exit code, no crash.
check "missing model_n" expect_exit 3 "cannot open" "$cli" run "$work/none.onnx"
printf 'this is not a model' >"$work/garbage.onnx"
check "garbage model_n" expect_exit 1 "not a valid ONNX model" "$cli" build "$work/garbage.onnx" -o "$work/g.engine"
head -c 100 "$work/m.engine" >"$work/trunc.engine"
check "truncated engine_n" expect_exit 1 "engine" "$cli" run "$work/trunc.engine"
check "unknown input name_n" expect_exit 3 "not an input" "$cli" run "$work/m.engine" --input "nope=$work/x.npy"
check "build without -o_n" expect_exit 2 "" "$cli" build "$work/m.onnx"
check "contradicting runner-up options_n" expect_exit 2 "contradict each other" "$cli" build "$work/m.onnx" -o "$work/r.engine" --try-runner-ups --no-runner-up-trials
check "build without runner-up trials" "$cli" build "$work/m.onnx" -o "$work/r.engine" --no-runner-up-trials
check "bad backend_n" expect_exit 2 "--backend" "$cli" run "$work/m.onnx" --backend tpu
check "unknown command_n" expect_exit 2 "unknown command" "$cli" frobnicate
check "build report" bash -c "'$cli' build '$work/m.onnx' -o '$work/r.engine' --build-report '$work/r.json' >/dev/null && grep -q build_seconds '$work/r.json'"
check "unknown option_n" expect_exit 2 "unknown option --fp61" "$cli" build "$work/m.onnx" -o "$work/t.engine" --fp61
check "bad --tactic_n" expect_exit 2 "LAYER=TACTIC-ID" "$cli" build "$work/m.onnx" -o "$work/t.engine" --tactic conv1
check "bad --layer-precision_n" expect_exit 2 "--layer-precision" "$cli" build "$work/m.onnx" -o "$work/t.engine" --layer-precision conv1=fp64
check "bad --timing-iterations_n" expect_exit 2 "--timing-iterations" "$cli" build "$work/m.onnx" -o "$work/t.engine" --timing-iterations 0
check "bad --timing-prune_n" expect_exit 2 "--timing-prune" "$cli" build "$work/m.onnx" -o "$work/t.engine" --timing-prune 0.5
check "non-numeric --timing-prune_n" expect_exit 2 "--timing-prune" "$cli" build "$work/m.onnx" -o "$work/t.engine" --timing-prune fast
check "build with --build-threads" "$cli" build "$work/m.onnx" -o "$work/bt.engine" --build-threads 2
check "build with --build-threads 0 (the cores)" "$cli" build "$work/m.onnx" -o "$work/bt0.engine" --build-threads 0
check "negative --build-threads_n" expect_exit 2 "--build-threads" "$cli" build "$work/m.onnx" -o "$work/t.engine" --build-threads -3
check "too many --build-threads_n" expect_exit 2 "--build-threads" "$cli" build "$work/m.onnx" -o "$work/t.engine" --build-threads 257
check "non-numeric --build-threads_n" expect_exit 2 "--build-threads" "$cli" build "$work/m.onnx" -o "$work/t.engine" --build-threads 4x
check "device inputs on a cpu engine_n" expect_exit 2 "--device-inputs" "$cli" bench "$work/m.engine" --iterations 1 --device-inputs
if ! "$cli" device 2>/dev/null | grep -q "^GPU 0"; then  # the messages a machine without a GPU gives
  check "backend cuda without a GPU_n" expect_exit 1 "no GPU is usable" "$cli" build "$work/m.onnx" -o "$work/t.engine" --backend cuda
fi
"$py" -c "import numpy as np; np.save('$work/bad.npy', np.zeros((2, 2), np.float32))"
check "wrong input shape_n" expect_exit 2 "shape" "$cli" run "$work/m.engine" --input "x=$work/bad.npy"

# Input shapes and shape profiles (--shapes): a model with a dynamic batch, built for batches 1
# and 3; run and bench pick the profile to feed; inspect lists the profiles.
"$py" - "$work" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
w = sys.argv[1]
rng = np.random.default_rng(1)
k = rng.standard_normal((2, 3, 1, 1)).astype(np.float32)
g = helper.make_graph(
    [helper.make_node("Conv", ["x", "k"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
    "cli_profiles",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 4, 4])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, 4, 4])],
    [numpy_helper.from_array(k, "k")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), f"{w}/dyn.onnx")
x = rng.standard_normal((3, 3, 4, 4)).astype(np.float32)
np.save(f"{w}/x3.npy", x)
np.save(f"{w}/y3_ref.npy", np.maximum(np.einsum("oi,nihw->nohw", k[:, :, 0, 0], x), 0))
PY
check "build with two shape profiles" bash -c "'$cli' build '$work/dyn.onnx' -o '$work/p.engine' --shapes x:1x3x4x4 --shapes x:3x3x4x4 | grep -q '2 shape profiles'"
check "inspect lists the profiles" bash -c "out=\$('$cli' inspect '$work/p.engine') && grep -q 'shape profiles (2)' <<<\"\$out\" && grep -q '\\[0\\] x:1x3x4x4' <<<\"\$out\" && grep -q '\\[1\\] x:3x3x4x4' <<<\"\$out\" && grep -q 'x: float32 \\[?x3x4x4\\]' <<<\"\$out\""
check "run feeds the first profile by default" bash -c "'$cli' run '$work/p.engine' | grep -q 'shape profile: x:1x3x4x4'"
check "run --shapes picks a profile" bash -c "'$cli' run '$work/p.engine' --shapes x:3x3x4x4 | grep -q 'y: float32\\[3,2,4,4\\]'"
check "run the batch-3 profile from a file" "$cli" run "$work/p.engine" --input "x=$work/x3.npy" --outputs "$work/out3"
check "batch-3 outputs match numpy" "$py" -c "
import numpy as np, sys
y = np.load('$work/out3/y.npy'); r = np.load('$work/y3_ref.npy')
sys.exit(0 if y.shape == r.shape and np.allclose(y, r, rtol=1e-5, atol=1e-5) else 1)"
check "bench --shapes" bash -c "'$cli' bench '$work/p.engine' --shapes x:3x3x4x4 --iterations 3 --warmup 1 --json '$work/pb.json' >/dev/null && grep -q '\"input_shapes\": \"x:3x3x4x4\"' '$work/pb.json'"
check "run a model with --shapes" bash -c "'$cli' run '$work/dyn.onnx' --shapes x:3x3x4x4 | grep -q 'y: float32\\[3,2,4,4\\]'"
check "inspect a model with --shapes" bash -c "'$cli' inspect '$work/dyn.onnx' --shapes x:2x3x4x4 | grep -q 'input shapes: x:2x3x4x4'"
check "a shape in no profile_n" expect_exit 2 "[1] x:3x3x4x4" "$cli" run "$work/p.engine" --shapes x:2x3x4x4
check "a file of a shape in no profile_n" expect_exit 2 "no shape profile" "$cli" run "$work/p.engine" --input "x=$work/x.npy"
check "several --shapes on an engine_n" expect_exit 2 "fixed when it was built" "$cli" run "$work/p.engine" --shapes x:1x3x4x4 --shapes x:3x3x4x4
check "--shapes syntax_n" expect_exit 2 "--shapes needs NAME:" "$cli" build "$work/dyn.onnx" -o "$work/t.engine" --shapes x:1xAx4x4
check "--shapes without a name_n" expect_exit 2 "has no NAME:" "$cli" build "$work/dyn.onnx" -o "$work/t.engine" --shapes 1x3x4x4
check "--shapes against a static dim_n" expect_exit 2 "input 'x' dim 1: the model fixes it to 3, the shape gives 5" "$cli" build "$work/dyn.onnx" -o "$work/t.engine" --shapes x:1x5x4x4
check "--shapes of another rank_n" expect_exit 2 "has rank 3" "$cli" build "$work/dyn.onnx" -o "$work/t.engine" --shapes x:1x3x4
check "--shapes of an unknown input_n" expect_exit 2 "not an input of the model" "$cli" build "$work/dyn.onnx" -o "$work/t.engine" --shapes images:1x3x4x4
check "duplicate profiles_n" expect_exit 2 "are the same" "$cli" build "$work/dyn.onnx" -o "$work/t.engine" --shapes x:1x3x4x4 --shapes x:1x3x4x4
check "--shapes of an unknown input on an engine_n" expect_exit 3 "not an input of the engine" "$cli" run "$work/p.engine" --shapes images:1x3x4x4
head -c 200 "$work/p.engine" >"$work/ptrunc.engine"
check "truncated profile engine_n" expect_exit 1 "truncated" "$cli" inspect "$work/ptrunc.engine"

# Shape ranges (--min/--opt/--max-shapes): one engine for batches 1 to 4, built for 2; other
# batches are specialised on their first run.
ranges=(--min-shapes x:1x3x4x4 --opt-shapes x:2x3x4x4 --max-shapes x:4x3x4x4)
check "build with shape ranges" bash -c "'$cli' build '$work/dyn.onnx' -o '$work/r.engine' ${ranges[*]} | grep -q 'shape ranges x:\[1x3x4x4 .. 2x3x4x4 .. 4x3x4x4\]'"
check "inspect lists the ranges" bash -c "out=\$('$cli' inspect '$work/r.engine') && grep -q 'x:\[1x3x4x4 .. 2x3x4x4 .. 4x3x4x4\]' <<<\"\$out\" && grep -q 'x: float32 \[?x3x4x4\]' <<<\"\$out\""
check "run a batch of the range" bash -c "'$cli' run '$work/r.engine' --shapes x:3x3x4x4 | grep -q 'y: float32\\[3,2,4,4\\]'"
check "run the range engine on a file" "$cli" run "$work/r.engine" --input "x=$work/x3.npy" --outputs "$work/rout3"
check "range outputs match numpy" "$py" -c "
import numpy as np, sys
y = np.load('$work/rout3/y.npy'); r = np.load('$work/y3_ref.npy')
sys.exit(0 if y.shape == r.shape and np.allclose(y, r, rtol=1e-5, atol=1e-5) else 1)"
check "bench reports the specialisation" bash -c "'$cli' bench '$work/r.engine' --shapes x:4x3x4x4 --iterations 3 --warmup 1 --json '$work/rb.json' >/dev/null && grep -q '\"shape_specializations\": 1' '$work/rb.json'"
check "a batch outside the range_n" expect_exit 2 "outside the engine's shape range 1x3x4x4 .. 4x3x4x4" "$cli" run "$work/r.engine" --shapes x:5x3x4x4
check "ranges without --max-shapes_n" expect_exit 2 "need --min-shapes, --opt-shapes and --max-shapes" "$cli" build "$work/dyn.onnx" -o "$work/t.engine" --min-shapes x:1x3x4x4 --opt-shapes x:2x3x4x4
check "ranges out of order_n" expect_exit 2 "it needs min <= opt <= max" "$cli" build "$work/dyn.onnx" -o "$work/t.engine" --min-shapes x:2x3x4x4 --opt-shapes x:1x3x4x4 --max-shapes x:4x3x4x4
check "ranges and profiles_n" expect_exit 2 "cannot be combined" "$cli" build "$work/dyn.onnx" -o "$work/t.engine" "${ranges[@]}" --shapes x:1x3x4x4 --shapes x:2x3x4x4
head -c 300 "$work/r.engine" >"$work/rtrunc.engine"
check "truncated range engine_n" expect_exit 1 "engine with shape ranges: the file is truncated" "$cli" inspect "$work/rtrunc.engine"

echo "$pass passed, $failures failed"
[[ $failures -eq 0 ]]
