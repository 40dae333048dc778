#!/usr/bin/env bash
# The machine code of our CUDA kernels, to count what a kernel executes (docs/performance.md:
# "The pointwise kernels' instructions"). The dev machine's toolkit has no disassembler; the GPU
# machine's has (device tool, ../.library/device/H200.md).
#   kernel_sass.sh build FILE.cu...   (dev machine) each file compiled as the build compiles it
#                                     (build/cuda's ninja command, BUILD_DIR to change), to a cubin
#                                     in .devcarry-sass/ (carry it: ignore it in .git/info/exclude)
#   kernel_sass.sh dump [REGEX]       (where cuobjdump is: CUOBJDUMP, else the toolkit's) each
#                                     cubin of .devcarry-sass/ disassembled to $OUT/NAME.sass, and
#                                     for each kernel whose mangled name matches REGEX its
#                                     instruction count and most frequent opcodes
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
dir=$root/.devcarry-sass
case "${1:-}" in
  build)
    shift
    build=${BUILD_DIR:-$root/build/cuda}
    mkdir -p "$dir"
    for f in "$@"; do
      name=$(basename "$f" .cu)
      obj=$(ninja -C "$build" -t targets all | grep -o "^[^:]*/$name.cu.o" | head -n 1)
      [ -n "$obj" ] || { echo "no object of $f in $build" >&2; exit 1; }
      cmd=$(ninja -C "$build" -t commands "$obj" | tail -n 1)
      cmd=${cmd#*ccache }
      cmd=$(echo "$cmd" | sed "s# -o [^ ]*# -o $dir/$name.cubin#; s# -c # -cubin #")
      (cd "$build" && eval "$cmd")
      echo "$dir/$name.cubin"
    done
    ;;
  dump)
    pattern=${2:-.}
    out=${OUT:-/tmp/out}
    tool=${CUOBJDUMP:-/usr/local/cuda/bin/cuobjdump}
    mkdir -p "$out"
    for c in "$dir"/*.cubin; do
      s=$out/$(basename "$c" .cubin).sass
      "$tool" -sass "$c" >"$s"
      # One line a matching kernel and opcode (kernel, count, opcode), then per kernel its
      # total and its 12 most frequent opcodes.
      awk -v pat="$pattern" '
        function flush() { for (o in ops) printf "%s\t%d\t%s\n", fn, ops[o], o; delete ops }
        /Function :/ { flush(); fn = ($0 ~ pat) ? $3 : ""; next }
        fn != "" && $1 ~ /^\/\*[0-9a-f]+\*\/$/ {
          op = ($2 ~ /^@/) ? $3 : $2; sub(/\..*/, "", op); ops[op]++
        }
        END { flush() }' "$s" | sort -t "$(printf '\t')" -k1,1 -k2,2nr |
        awk -F '\t' '
          $1 != fn { if (fn != "") print total "\n" line; fn = $1; k = 0; n = 0; line = "      " }
          { n += $2; if (++k <= 12) line = line " " $3 " " $2; total = sprintf("%6d instructions  %s", n, substr(fn, 1, 110)) }
          END { if (fn != "") print total "\n" line }'
    done
    ;;
  *)
    sed -n '2,12p' "$0"
    exit 2
    ;;
esac
