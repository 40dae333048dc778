#!/usr/bin/env bash
# Runs on the GPU machine (device tool, carry [".devcarry"]): INT8 on the GPU (issue 6).
#   STEPS="unit blazeface resnet" (the default; "tactics" on request):
#   unit       the GPU unit tests of INT8 and of the kernels added with it (UNIT_FILTER)
#   perf       CudaInt8Perf, CublasLtInt8Perf: the INT8 convolution kernels against cuDNN FP16
#              on ResNet-50's 3x3 and 1x1 layers at batch 64 (EDGEINFER_PERF_LAYERS: only the
#              3x3 layers so named; EDGEINFER_PERF_BATCH: the 3x3 layers at another batch;
#              PERF_FILTER: other gtest filter)
#   blazeface  BlazeFace (back, 256x256) calibrated (min-max) on the real photos, built FP16,
#              INT8 (timed against FP16) and INT8 strict; `edgeinfer bench` of each
#   bfagree    BlazeFace back calibrated (min-max, the policy at 0.999) on the photos the unit tests'
#              INT8 frames leave out, without and with --min-agreement 0.98 (judged on the CPU's
#              simulation, and on the GPU engines: --agreement-backend cuda); INT8 strict engines
#              of the caches and the FP16 engine benched
#   resnet     ResNet-50 (torchvision, random weights, dynamic batch) calibrated (min-max) on
#              2 random tensors, then R50_MODES (fp16 int8 int8_strict; int8_strict_exact on
#              request: --int8-bit-exact) at R50_BATCHES (1 64): each built (wall time; with
#              R50_REBUILD=1 built again from the timing cache), its INT8 choices, its bench
#   contexts   the resnet step's engines (run it first) benched with CONTEXTS ("1 2 4") execution
#              contexts at once (`edgeinfer bench --contexts N`: a thread and a stream each;
#              throughput = all runs' inferences over the wall time), AB_REPS (1) rounds
#   calibgpu   `edgeinfer calibrate` of ResNet-50 on CALIB_SAMPLES (64) random tensors with
#              --backend cpu and cuda (twice: the second build from the timing cache), each of
#              CALIB_METHODS (minmax entropy): wall times, and the caches' ranges compared
#   ab         R50_BATCHES x R50_MODES (fp16, int8_strict) ResNet-50 engines, each run with the
#              switch AB_ENV (EDGEINFER_DISABLE_PDL; or EDGEINFER_DISABLE_CONCURRENT_BRANCHES) =0
#              and =1 (outputs compared) and benched AB_REPS (3) times with it =0 and =1 in turn
#   force      R50_BATCHES x R50_MODES (int8_strict) ResNet-50 engines built as they are and with
#              the build arguments FORCE_ARGS ("--tactic L=ID --layer-precision L=fp16 ...")
#              and the build's environment FORCE_ENV ("VAR=VALUE ..."; the runs have none),
#              benched AB_REPS (3) times alternately; FORCE_ARGS="ARGS | ARGS ...": several
#              variants (forced1, forced2, ...) against the default engine
#   binab      R50_BATCHES x R50_MODES (int8_strict) ResNet-50 engines built by edgeinfer_old (an
#              earlier build of the CLI, carried as fresh/edgeinfer_old.xz, else the bundle's
#              own when fresh/edgeinfer.xz replaces it) and by edgeinfer, each
#              with a timing cache of its own, their plans' timed sums, then each engine benched by
#              its own program AB_REPS (3) times alternately: a change of kernels measured in one
#              machine session
#   plan       R50_BATCHES x R50_MODES ResNet-50 engines built with --verbose: each plan's steps
#              with their timed ms to $OUT/plan_b<B>_<mode>.txt, the sum per tactic family and the
#              slowest steps printed
#   ncu        the plan step's engines (run it first) under Nsight Compute, one warm-up and one
#              run without CUDA graphs: every kernel's time to $OUT/ncu_b<B>_<mode>.csv, their
#              sum, and the slowest kernels; then the engine's GPU time with CUDA graphs, so
#              that sum against GPU time shows what the launches between kernels cost
#              NCU_KERNEL (a kernel name regex): that kernel's full Nsight Compute report
#              (--set full, the measured run's first launch) to $OUT/ncu_detail_b<B>_<mode>.txt;
#              NCU_NAME_BASE=demangled matches the regex against the demangled name with its
#              template arguments (e.g. 'i8ConvPointwise<\(int\)64, \(int\)256, \(int\)7>')
#              instead of the function's name alone
#   floor      the host's share of a run: a one-Relu model's GPU engine ([1, 16] float32)
#              benched as the ResNet engines are (latency against GPU time: what a run of an
#              engine with almost no GPU work costs from execute() to the outputs on the host)
#   trace      the plan step's engines (built here if missing; benched first) replaying their
#              CUDA graph under kernel_trace.cpp (CUPTI; carry its build as libkernel_trace.so and
#              libcupti.so.13.xz where the machine lacks CUPTI): one replay's kernels, their sum,
#              its span and the GPU's idle gaps between kernels, the largest named
#   tactics    every timing cache's tables to $OUT/timing_*.txt, and how many layers chose each
#              tactic family (e.g. cuda-i8.wg128x128, cublaslt-i8, cudnn)
# The card's clocks and power are sampled to $OUT/smi.csv while the steps run (SMI=0: not).
# Fresh binaries come as .devcarry/fresh/<program>.xz and replace the bundle's (CARRY_DIR: another
# folder than .devcarry). Logs to $OUT.
set -uo pipefail
# shellcheck source=scripts/gpu/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
carry=${CARRY_DIR:-.devcarry}
gpu_bundle_from "$carry"
export EDGEINFER_MEDIA_DIR=$PWD/$carry/media EDGEINFER_MODELS_DIR=$PWD/$carry/models
export XDG_CACHE_HOME=/tmp/ei/cache
out=${OUT:-/tmp/out}
mkdir -p "$out"
steps=${STEPS:-unit blazeface resnet}
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
# The card's clocks and power while the steps run, every 250 ms (SMI=0: not sampled): machine
# sessions differ by up to 4 % on the same engine, and this tells throttling from other causes.
smi_summary() {
  kill "$smi_pid" 2>/dev/null
  awk -F ', ' 'NR > 1 && $4 + 0 > 150 { n++; c += $2; w += $4; if ($4 + 0 > m) m = $4 + 0 }
    END { if (n) printf "nvidia-smi while busy (over 150 W): %d samples, SM clock %.0f MHz and %.0f W on average, %.0f W at most\n", n, c / n, w / n, m }' \
    "$out/smi.csv"
}
if [ "${SMI:-1}" != 0 ]; then
  nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,power.limit,temperature.gpu,clocks_throttle_reasons.active \
    --format=csv -lms 250 >"$out/smi.csv" 2>&1 &
  smi_pid=$!
  trap smi_summary EXIT
fi

bench() {  # label, then edgeinfer bench arguments (BENCH_BIN: another program than edgeinfer)
  local label=$1
  shift
  "${BENCH_BIN:-edgeinfer}" bench "$@" --iterations "${ITERS:-300}" --device-inputs >"$out/bench_$label.log" 2>&1
  echo "$label rc=$? $(grep -E "precision|latency|throughput|GPU time" "$out/bench_$label.log" |
    sed -E 's/.*latency \(ms\): mean [0-9.]+  (p50 [0-9.]+).*/\1/; s/.*\(backend [a-z]+, precision ([a-z0-9]+).*/\1/;
            s/^throughput: ([0-9.]+) .*/\1 inf\/s/; s/^GPU time [^:]*: (p50 [0-9.]+ ms).*overhead[^)]*\) (p50 [0-9.]+ ms)/GPU \1, host \2/' |
    tr '\n' ' ' | cut -c1-300)"
}

families() {  # a plan's timed steps (`edgeinfer build --verbose` after "GPU plan:") per family:
  # the tactic id's first two parts (cuda-i8.pw128x64, cudnn.conv, reformat steps), steps and ms
  awk '/ ms$/{f=$2; for(i=3;i<=NF;i++) if($i ~ /^(cuda|cudnn|cublas)/){f=$i; break}
       split(f, a, "."); k=a[1] (a[2] != "" ? "." a[2] : ""); s[k]+=$(NF-1); n[k]++}
       END{for(k in s) printf "   %-36s %3d steps %.4f ms\n", k, n[k], s[k]}' "$1" | sort -k4 -rn
}

if [[ " $steps " == *" unit "* ]]; then
  filter=${UNIT_FILTER:-CudaInt8*:CudaNormSelect*:CudaEngine*:CudaReduce*:CudaDepthwise*:CudaPlan*:CudaStemConv*:CudaPool*:CudaTimingData*:VisionModel.BlazeFaceInt8*}
  echo "== unit tests: $filter"
  timeout -k 5 "${UNIT_TIMEOUT_S:-300}" edgeinfer_unit_tests --gtest_filter="$filter" \
    >"$out/unit.log" 2>&1
  echo "unit rc=$?"
  grep -E "^\[  (PASSED|FAILED) |^\[  FAILED  \]|differ, worst|INT8 engine vs|BlazeFace INT8" \
    "$out/unit.log" | tail -n 40
  echo "skipped: $(grep -c '^\[  SKIPPED \] ' "$out/unit.log")"
fi

if [[ " $steps " == *" perf "* ]]; then
  echo "== INT8 convolution kernels per layer (CudaInt8Perf)"
  EDGEINFER_PERF_TESTS=1 timeout -k 5 300 edgeinfer_unit_tests \
    --gtest_filter="${PERF_FILTER:-CudaInt8Perf.*:CublasLtInt8Perf.*}" >"$out/perf.log" 2>&1
  echo "perf rc=$?"
  grep -E '^\[          \]|FAILED' "$out/perf.log"
fi

if [[ " $steps " == *" blazeface "* ]]; then
  echo "== BlazeFace back 256: calibrate (min-max, photos), FP16 / INT8 / INT8 strict"
  m=$carry/models/blazeface/blazeface_back_256.onnx
  mkdir -p /tmp/ei/photos && cp "$carry"/media/faces/*.ppm "$carry"/media/kphotoalbum/*.ppm /tmp/ei/photos/
  edgeinfer calibrate --config "$carry/models/blazeface/model_back.json" --data /tmp/ei/photos \
    --method minmax -o /tmp/ei/bf.calib >"$out/bf_calibrate.log" 2>&1
  echo "calibrate rc=$? $(tail -n 1 "$out/bf_calibrate.log")"
  bench bf_fp16 "$m" --backend cuda --fp16
  EDGEINFER_LOG_LEVEL=info bench bf_int8 "$m" --backend cuda --int8 --calibration-cache /tmp/ei/bf.calib
  grep -E "INT8:" "$out/bench_bf_int8.log" | head -2
  EDGEINFER_LOG_LEVEL=info bench bf_int8_strict "$m" --backend cuda --int8 --strict-precision \
    --calibration-cache /tmp/ei/bf.calib
  grep -E "INT8:" "$out/bench_bf_int8_strict.log" | head -2
fi

if [[ " $steps " == *" bfagree "* ]]; then
  echo "== BlazeFace back 256: the agreement target (--min-agreement 0.98) on the photos int8Frames() does not score"
  m=$carry/models/blazeface/blazeface_back_256.onnx
  mkdir -p /tmp/ei/other && cp "$carry"/media/faces/*.ppm "$carry"/media/kphotoalbum/*.ppm /tmp/ei/other/
  rm -f /tmp/ei/other/{2008_002506,2009_004587,grand_canyon_3}.ppm
  for target in 0 0.98 0.98gpu; do
    extra=()
    [ "$target" != 0 ] && extra=(--min-agreement "${target%gpu}")
    [ "$target" = 0.98gpu ] && extra+=(--agreement-backend cuda)
    edgeinfer calibrate --config "$carry/models/blazeface/model_back.json" --data /tmp/ei/other \
      --method minmax --exclude-threshold 0.999 --report-images 4 "${extra[@]}" \
      -o "/tmp/ei/bfa_$target.calib" >"$out/bfa_calibrate_$target.log" 2>&1
    echo "calibrate (agreement target $target) rc=$? $(grep -E '^  (every|with)|^calibrated' "$out/bfa_calibrate_$target.log" | tr -s ' ' | tr '\n' ';')"
    bench "bfa_int8_strict_$target" "$m" --backend cuda --int8 --strict-precision \
      --calibration-cache "/tmp/ei/bfa_$target.calib"
  done
  bench bfa_fp16 "$m" --backend cuda --fp16
fi

r50_args() {  # the `edgeinfer build/bench` precision arguments of MODE into the array args
  case $1 in
    fp16) args=(--fp16) ;;
    int8) args=(--int8 --calibration-cache /tmp/ei/r50.calib) ;;
    int8_strict) args=(--int8 --strict-precision --calibration-cache /tmp/ei/r50.calib) ;;
    int8_strict_exact) args=(--int8 --strict-precision --int8-bit-exact
      --calibration-cache /tmp/ei/r50.calib) ;;
    *) echo "unknown mode $1" >&2; args=() ;;
  esac
}

r50_prepare() {  # ResNet-50 as /tmp/ei/resnet50.onnx and its calibration cache /tmp/ei/r50.calib, once
  [ -f /tmp/ei/r50.calib ] && return 0
  /opt/torch/.venv/bin/python - <<'PY'
import numpy as np, os, torch, torchvision
torch.manual_seed(0)
m = torchvision.models.resnet50().eval()
torch.onnx.export(m, torch.randn(1, 3, 224, 224), "/tmp/ei/resnet50.onnx", opset_version=17,
                  input_names=["input"], output_names=["logits"],
                  dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, dynamo=False)
os.makedirs("/tmp/ei/r50data", exist_ok=True)
rng = np.random.default_rng(0)
for i in range(2):
    np.save(f"/tmp/ei/r50data/s{i}.npy", rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
PY
  r=/tmp/ei/resnet50.onnx
  /usr/bin/time -f "calibrate wall %e s" edgeinfer calibrate "$r" --data /tmp/ei/r50data \
    --method minmax --dynamic-dim 1 -o /tmp/ei/r50.calib >"$out/r50_calibrate.log" 2>&1
  echo "calibrate rc=$? $(tail -n 1 "$out/r50_calibrate.log")"
}

if [[ " $steps " == *" resnet "* ]]; then
  echo "== ResNet-50 (random weights): calibrate on 2 random tensors, FP16 / INT8 at batch 1 and 64"
  r50_prepare
  r=/tmp/ei/resnet50.onnx
  for b in ${R50_BATCHES:-1 64}; do
    for mode in ${R50_MODES:-fp16 int8 int8_strict}; do
      r50_args "$mode"
      e=/tmp/ei/r50_b${b}_$mode.engine
      for pass in 1 2; do  # the second from the first one's timing cache
        EDGEINFER_LOG_LEVEL=info /usr/bin/time -f "%e" -o /tmp/ei/t edgeinfer build "$r" \
          --backend cuda --dynamic-dim "$b" \
          "${args[@]}" -o "$e" >"$out/build_r50_b${b}_${mode}_$pass.log" 2>&1 ||
          echo "build b$b $mode failed: $(tail -n 2 "$out/build_r50_b${b}_${mode}_$pass.log")"
        echo "build b$b $mode (pass $pass): wall $(cat /tmp/ei/t) s"
        [ "${R50_REBUILD:-0}" = 1 ] || break
      done
      grep -E "INT8:" "$out/build_r50_b${b}_${mode}_1.log" | tail -n 3 | cut -c1-900
      bench "r50_b${b}_$mode" "$e"
    done
  done
fi

if [[ " $steps " == *" contexts "* ]]; then
  echo "== the resnet step's engines with several execution contexts at once (edgeinfer bench --contexts)"
  for b in ${R50_BATCHES:-1 64}; do
    for mode in ${R50_MODES:-fp16 int8 int8_strict}; do
      e=/tmp/ei/r50_b${b}_$mode.engine
      [ -f "$e" ] || { echo "no $e: run the resnet step first"; continue; }
      for rep in $(seq "${AB_REPS:-1}"); do
        for n in ${CONTEXTS:-1 2 4}; do
          "${BENCH_BIN:-edgeinfer}" bench "$e" --iterations "${ITERS:-300}" --device-inputs \
            --contexts "$n" >"$out/ctx_r50_b${b}_${mode}_$n.log" 2>&1
          echo "r50_b${b}_$mode contexts $n (rep $rep) rc=$? $(grep -E '^throughput|^latency' \
            "$out/ctx_r50_b${b}_${mode}_$n.log" | sed -E 's/latency \(ms\): mean [0-9.]+  (p50 [0-9.]+).*/\1 ms/;
            s/^throughput: ([0-9.]+) .*/\1 inf\/s/' | tr '\n' ' ')"
        done
      done
    done
  done
fi

if [[ " $steps " == *" calibgpu "* ]]; then
  n=${CALIB_SAMPLES:-64}
  echo "== calibration passes on the CPU reference and on the GPU: ResNet-50, $n random tensors"
  r50_prepare
  mkdir -p /tmp/ei/r50many
  /opt/torch/.venv/bin/python - "$n" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(1)
for i in range(int(sys.argv[1])):
    np.save(f"/tmp/ei/r50many/s{i:03d}.npy", rng.standard_normal((1, 3, 224, 224)).astype(np.float32))
PY
  for method in ${CALIB_METHODS:-minmax entropy}; do
    for where in cpu cuda cuda; do  # the second GPU run builds from the timing cache
      rm -f "/tmp/ei/r50_$where.calib"
      /usr/bin/time -f "%e" -o /tmp/ei/t edgeinfer calibrate /tmp/ei/resnet50.onnx --data /tmp/ei/r50many \
        --method "$method" --dynamic-dim 1 --backend "$where" -o "/tmp/ei/r50_$where.calib" \
        >"$out/calib_${method}_$where.log" 2>&1
      echo "$method on $where: rc=$? wall $(cat /tmp/ei/t) s"
    done
    /opt/torch/.venv/bin/python - "$method" <<'PY'
import sys
def amax(p):
    return {l.split(" ", 2)[2]: float(l.split(" ", 2)[1]) for l in open(p) if l.startswith("tensor ")}
c, g = amax("/tmp/ei/r50_cpu.calib"), amax("/tmp/ei/r50_cuda.calib")
if set(c) != set(g):
    print(f"   {sys.argv[1]}: the tensors differ: only CPU {sorted(set(c) - set(g))[:5]}, "
          f"only GPU {sorted(set(g) - set(c))[:5]}")
    sys.exit(0)
rel = [abs(g[k] - c[k]) / max(c[k], 1e-12) for k in c]
print(f"   {sys.argv[1]}: {len(c)} tensors (GPU {len(g)}), same names {set(c) == set(g)}, "
      f"relative amax difference max {max(rel):.2e}, median {sorted(rel)[len(rel) // 2]:.2e}")
PY
  done
fi

if [[ " $steps " == *" ab "* ]]; then
  sw=${AB_ENV:-EDGEINFER_DISABLE_PDL}
  echo "== $sw=0 and =1: one engine per batch and mode, outputs compared, benched alternately"
  r50_prepare
  r=/tmp/ei/resnet50.onnx
  for b in ${R50_BATCHES:-1 64}; do
    for mode in ${R50_MODES:-fp16 int8_strict}; do
      r50_args "$mode"
      e=/tmp/ei/r50_b${b}_$mode.engine
      edgeinfer build "$r" --backend cuda --dynamic-dim "$b" "${args[@]}" -o "$e" \
        >"$out/build_r50_b${b}_$mode.log" 2>&1 || echo "build b$b $mode failed"
      for off in 0 1; do  # 3 runs: plain, captured into a CUDA graph, replayed
        env "$sw=$off" edgeinfer run "$e" --seed 3 --dim N="$b" --iterations 3 \
          --outputs "/tmp/ei/ab_out$off" >"$out/run_b${b}_${mode}_$off.log" 2>&1 ||
          echo "run b$b $mode $sw=$off failed: $(tail -n 2 "$out/run_b${b}_${mode}_$off.log")"
      done
      /opt/torch/.venv/bin/python - "b$b $mode" <<'PY'
import glob, os, sys, numpy as np
for f in sorted(glob.glob("/tmp/ei/ab_out0/*.npy")):
    a, b = np.load(f), np.load(f.replace("ab_out0", "ab_out1"))
    print(f"{sys.argv[1]} {os.path.basename(f)}: {'identical' if np.array_equal(a, b) else 'DIFFER'}"
          f" (max |diff| {float(np.abs(a.astype(np.float64) - b).max()):.3g})")
PY
      for rep in $(seq "${AB_REPS:-3}"); do
        for off in 0 1; do
          export "$sw=$off"
          bench "ab_b${b}_${mode}_off${off}_$rep" "$e"
          unset "$sw"
        done
      done
    done
  done
fi

if [[ " $steps " == *" force "* ]]; then
  echo "== default engines against engines built with FORCE_ARGS too, benched alternately"
  r50_prepare
  r=/tmp/ei/resnet50.onnx
  IFS='|' read -r -a variants <<<"${FORCE_ARGS:-}"  # "ARGS | ARGS ...": variants forced1, ...
  names=(default)
  for i in "${!variants[@]}"; do names+=("forced$((i + 1))"); done
  [ "${#variants[@]}" -eq 1 ] && names=(default forced)
  for b in ${R50_BATCHES:-1 64}; do
    for mode in ${R50_MODES:-int8_strict}; do
      r50_args "$mode"
      for k in "${!names[@]}"; do
        v=${names[$k]}
        extra=()
        [ "$k" -gt 0 ] && read -r -a extra <<<"${variants[$((k - 1))]}"
        envs=()
        [ "$k" -gt 0 ] && read -r -a envs <<<"${FORCE_ENV:-}"
        env "${envs[@]}" edgeinfer build "$r" --backend cuda --dynamic-dim "$b" "${args[@]}" \
          "${extra[@]}" --verbose -o "/tmp/ei/force_b${b}_${mode}_$v.engine" \
          >"$out/build_force_b${b}_${mode}_$v.log" 2>&1 ||
          echo "build b$b $mode $v failed: $(tail -n 2 "$out/build_force_b${b}_${mode}_$v.log")"
        p=$out/plan_force_b${b}_${mode}_$v.txt
        awk '/GPU plan:/{p=1;next} p' "$out/build_force_b${b}_${mode}_$v.log" >"$p"
        echo "-- b$b $mode $v: $(awk '/ ms$/{s+=$(NF-1)} END{printf "%.4f", s}' "$p") ms timed"
        families "$p"
      done
      for rep in $(seq "${AB_REPS:-3}"); do
        for v in "${names[@]}"; do
          [ -f "/tmp/ei/force_b${b}_${mode}_$v.engine" ] || continue  # its build failed
          bench "force_b${b}_${mode}_${v}_$rep" "/tmp/ei/force_b${b}_${mode}_$v.engine"
        done
      done
    done
  done
fi

if [[ " $steps " == *" binab "* ]]; then
  echo "== engines of edgeinfer_old against edgeinfer's, benched alternately"
  if ! command -v edgeinfer_old >/dev/null; then
    echo "no edgeinfer_old: carry an earlier build as $carry/fresh/edgeinfer_old.xz"
  else
    r50_prepare
    for b in ${R50_BATCHES:-1 64}; do
      for mode in ${R50_MODES:-int8_strict}; do
        r50_args "$mode"
        for v in old new; do
          bin=edgeinfer
          [ "$v" = old ] && bin=edgeinfer_old
          e=/tmp/ei/binab_b${b}_${mode}_$v.engine
          XDG_CACHE_HOME=/tmp/ei/cache_$v "$bin" build /tmp/ei/resnet50.onnx --backend cuda \
            --dynamic-dim "$b" "${args[@]}" --verbose -o "$e" >"$out/build_binab_b${b}_${mode}_$v.log" 2>&1 ||
            echo "build b$b $mode $v failed: $(tail -n 2 "$out/build_binab_b${b}_${mode}_$v.log")"
          p=$out/plan_binab_b${b}_${mode}_$v.txt
          awk '/GPU plan:/{p=1;next} p' "$out/build_binab_b${b}_${mode}_$v.log" >"$p"
          echo "-- b$b $mode $v: $(grep -c ' ms$' "$p") timed steps, $(awk '/ ms$/{s+=$(NF-1)} END{printf "%.4f", s}' "$p") ms timed"
          families "$p"
        done
        for rep in $(seq "${AB_REPS:-3}"); do
          for v in old new; do
            e=/tmp/ei/binab_b${b}_${mode}_$v.engine
            [ -f "$e" ] || continue
            bin=edgeinfer
            [ "$v" = old ] && bin=edgeinfer_old
            BENCH_BIN=$bin bench "binab_b${b}_${mode}_${v}_$rep" "$e"
          done
        done
      done
    done
  fi
fi

if [[ " $steps " == *" plan "* ]]; then
  echo "== ResNet-50 plans: timed ms per step"
  r50_prepare
  r=/tmp/ei/resnet50.onnx
  for b in ${R50_BATCHES:-1 64}; do
    for mode in ${R50_MODES:-fp16 int8_strict}; do
      r50_args "$mode"
      p=$out/plan_b${b}_$mode.txt
      edgeinfer build "$r" --backend cuda --dynamic-dim "$b" "${args[@]}" --verbose \
        -o "/tmp/ei/plan_b${b}_$mode.engine" 2>&1 | awk '/GPU plan:/{p=1;next} p' >"$p"
      echo "-- b$b $mode: $(grep -c ' ms$' "$p") timed steps, $(awk '/ ms$/{s+=$(NF-1)} END{printf "%.4f", s}' "$p") ms"
      families "$p" | head -n 14
      echo "   slowest:"
      awk '/ ms$/{print $(NF-1), $0}' "$p" | sort -rn | head -n 8 | cut -c1-200 | sed 's/^/   /'
    done
  done
fi

if [[ " $steps " == *" ncu "* ]]; then
  echo "== Nsight Compute: every kernel of one run of the plan step's engines"
  for b in ${R50_BATCHES:-1 64}; do
    for mode in ${R50_MODES:-fp16 int8_strict}; do
      e=/tmp/ei/plan_b${b}_$mode.engine
      [ -f "$e" ] || { echo "no $e: run the plan step first"; continue; }
      c=$out/ncu_b${b}_$mode.csv
      timeout -k 5 240 ncu --clock-control none --cache-control none \
        --metrics gpu__time_duration.sum --csv edgeinfer bench "$e" --iterations 1 --warmup 1 \
        --device-inputs --no-cuda-graphs >"$c" 2>"$out/ncu_b${b}_$mode.err"
      echo "-- b$b $mode: ncu rc=$?"
      /opt/torch/.venv/bin/python - "$c" <<'PY'
import csv, sys
rows = [r for r in csv.reader(l for l in open(sys.argv[1]) if l.startswith('"'))]
head, rows = rows[0], rows[1:]
name, val, unit = head.index("Kernel Name"), head.index("Metric Value"), head.index("Metric Unit")
us = [(float(r[val].replace(",", "")) / (1000.0 if r[unit] == "nsecond" else 1.0), r[name]) for r in rows]
half = len(us) // 2  # warm-up run, then the measured run: the second half
run = us[half:]
print(f"   {len(us)} kernels in all, {len(run)} in the measured run, sum {sum(t for t, _ in run):.1f} us")
for t, n in sorted(run, reverse=True)[:12]:
    print(f"   {t:8.2f} us  {n[:110]}")
PY
      bench "graphs_b${b}_$mode" "$e"
      if [ -n "${NCU_KERNEL:-}" ]; then
        d=$out/ncu_detail_b${b}_$mode.txt
        timeout -k 5 240 ncu --set full --clock-control none \
          --kernel-name-base "${NCU_NAME_BASE:-function}" -k "regex:$NCU_KERNEL" \
          --launch-skip 1 --launch-count 1 edgeinfer bench "$e" --iterations 1 --warmup 1 \
          --device-inputs --no-cuda-graphs >"$d" 2>&1
        echo "-- b$b $mode: ncu detail of $NCU_KERNEL rc=$? ($d)"
        grep -E "Duration|Registers Per|Achieved Occupancy|Grid Size|Block Size|Dynamic Shared|Stall|Memory Throughput|L2 Hit" "$d" | head -n 20
      fi
    done
  done
fi

if [[ " $steps " == *" floor "* ]]; then
  echo "== the host's share of a run: a one-Relu GPU engine"
  /opt/torch/.venv/bin/python - <<'PY'
import onnx
from onnx import TensorProto, helper
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "relu",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), "/tmp/ei/relu.onnx")
PY
  edgeinfer build /tmp/ei/relu.onnx --backend cuda -o /tmp/ei/relu.engine >"$out/floor_build.log" 2>&1 ||
    tail -n 3 "$out/floor_build.log"
  for i in 1 2 3; do ITERS=2000 bench "floor_$i" /tmp/ei/relu.engine; done
fi

if [[ " $steps " == *" trace "* ]]; then
  echo "== kernel timeline (CUPTI, kernel_trace.cpp): one CUDA graph replay of each engine"
  cupti=
  for c in /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13 /usr/local/cuda/lib64/libcupti.so.13; do
    [ -f "$c" ] && { cupti=$c; break; }
  done
  if [ -z "$cupti" ] && [ -f "$carry/libcupti.so.13.xz" ]; then
    mkdir -p /tmp/ei/cupti && xz -dc "$carry/libcupti.so.13.xz" >/tmp/ei/cupti/libcupti.so.13
    cupti=/tmp/ei/cupti/libcupti.so.13
  fi
  if [ -z "$cupti" ] || [ ! -f "$carry/libkernel_trace.so" ]; then
    echo "no libcupti.so.13 or $carry/libkernel_trace.so"
  else
    r50_prepare
    for b in ${R50_BATCHES:-1 64}; do
      for mode in ${R50_MODES:-fp16 int8_strict}; do
        e=/tmp/ei/plan_b${b}_$mode.engine
        if [ ! -f "$e" ]; then
          r50_args "$mode"
          edgeinfer build /tmp/ei/resnet50.onnx --backend cuda --dynamic-dim "$b" "${args[@]}" \
            -o "$e" >"$out/build_trace_b${b}_$mode.log" 2>&1 || { echo "build b$b $mode failed"; continue; }
        fi
        bench "trace_b${b}_$mode" "$e"
        t=/tmp/ei/trace_b${b}_$mode.csv
        LD_LIBRARY_PATH=$(dirname "$cupti"):$LD_LIBRARY_PATH KTRACE_OUT=$t \
          CUDA_INJECTION64_PATH=$PWD/$carry/libkernel_trace.so \
          edgeinfer bench "$e" --iterations 20 --warmup 5 --device-inputs >"$out/trace_bench_b${b}_$mode.log" 2>&1
        echo "-- b$b $mode (traced run: $(grep -E "GPU time" "$out/trace_bench_b${b}_$mode.log" | cut -c1-60))"
        /opt/torch/.venv/bin/python - "$t" "$out/trace_b${b}_$mode.txt" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
ks = sorted((int(r["start_ns"]), int(r["end_ns"]) - int(r["start_ns"]), r["name"], r["stream"])
            for r in rows if r["graph"] != "0")
if not ks:
    sys.exit(f"   no graph kernels among {len(rows)} records")
groups, cur = [], [ks[0]]
for k in ks[1:]:  # replays: split where the GPU idles for over 20 us
    if k[0] - max(c[0] + c[1] for c in cur) > 20000:
        groups.append(cur); cur = [k]
    else:
        cur.append(k)
groups.append(cur)
n = max(len(g) for g in groups)
full = [g for g in groups if len(g) == n]
spans = sorted(max(s + d for s, d, _, _ in g) - g[0][0] for g in full)
g = full[len(full) // 2]  # a replay from the middle
span = max(s + d for s, d, _, _ in g) - g[0][0]
busy = sum(d for _, d, _, _ in g)
gaps, end, over = [], g[0][0] + g[0][1], 0
for (s, d, name, st), prev in zip(g[1:], g):
    if s < end: over += 1
    gaps.append((s - end, prev[2][:48], name[:48]))
    end = max(end, s + d)
print(f"   {len(full)} replays of {n} kernels, span median {spans[len(spans)//2]/1e3:.1f} us; one: span {span/1e3:.1f} us, "
      f"kernels {busy/1e3:.1f} us, idle {sum(x for x, _, _ in gaps if x > 0)/1e3:.1f} us in {sum(1 for x, _, _ in gaps if x > 0)} gaps, "
      f"{over} kernels started before the GPU was idle, streams {len(set(k[3] for k in g))}")
for x, a, b in sorted(gaps, reverse=True)[:5]:
    print(f"   gap {x/1e3:6.2f} us  {a} -> {b}")
print("   kernels us: " + " ".join(f"{d/1e3:.1f}" for _, d, _, _ in g))
with open(sys.argv[2], "w") as f:  # the replay's kernels: start, duration (us), stream, name
    for s, d, name, st in g:
        f.write(f"{(s - g[0][0])/1e3:8.2f} {d/1e3:7.2f} {st:>3} {name}\n")
PY
      done
    done
  fi
fi

if [[ " $steps " == *" tactics "* ]]; then
  echo "== chosen tactics (timing caches under $XDG_CACHE_HOME/edgeinfer)"
  i=0
  while IFS= read -r f; do
    i=$((i + 1))
    edgeinfer cache list "$f" --verbose >"$out/timing_$i.txt" 2>&1
    grep -E "^  chosen " "$out/timing_$i.txt" | awk '{print $2}' | sed -E 's/^(cuda-i8\.[a-z0-9]+|[a-z0-9-]+).*/\1/' |
      sort | uniq -c | sort -rn | head -n 20
  done < <(find "$XDG_CACHE_HOME/edgeinfer" -type f -name 'timing.cache' 2>/dev/null)
  [ "$i" -gt 0 ] || echo "no timing cache found"
fi
