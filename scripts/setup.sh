#!/usr/bin/env bash
# Installs every Debian package EdgeInfer needs to build and test, idempotently.
#
#   scripts/setup.sh            host build + tests (+ ONNX conformance data, clang-format, ccache)
#   scripts/setup.sh --cross    also the aarch64 cross toolchain, qemu-user and the arm64
#                               (multiarch) libraries the cross build links against
#   scripts/setup.sh --check    only report what is missing (exit 1 if anything is)
#
# Packages dpkg already reports as installed are skipped; `apt-get update` runs only when
# something is missing, so a second run does nothing and takes well under a second.
# The CUDA toolkit is optional and not installed here (CMake detects /usr/local/cuda).
# Needs root, or password-less sudo, only when something has to be installed.
set -uo pipefail

readonly HOST_PACKAGES=(
  build-essential cmake ninja-build pkg-config git clang-format ccache
  libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata python3-onnx python3-numpy
  nlohmann-json3-dev zlib1g-dev libgtest-dev libgmock-dev nodejs npm
  # OpenCV: the oracle of the vision preprocessing tests (the SDK does not link it);
  # lomiri-wallpapers-16.04: real photographs (JPEG, no dependencies) those tests run on.
  libopencv-dev lomiri-wallpapers-16.04
  # djpeg: scripts/fetch_media.sh decodes the test photos to PPM (read without OpenCV).
  libjpeg-turbo-progs
  # FFmpeg: video I/O (vision/video.h; without it VideoReader/VideoWriter return kUnsupported);
  # forensics-samples-files: a real phone-camera clip (H.264 1080p, 41 frames, 2.9 MB) the
  # video tests decode (tests/unit/test_vision_video.cpp).
  libavformat-dev libavcodec-dev libavutil-dev libswscale-dev forensics-samples-files
  # GStreamer: the plugin (plugins/gst) builds against gstreamer-1.0, -base-1.0, -check-1.0
  # (libgstreamer1.0-dev) and gstreamer-video-1.0 (libgstreamer-plugins-base1.0-dev). Its tests,
  # pipelines/ and scripts/demo.sh run gst-launch-1.0/gst-inspect-1.0/gst-typefind-1.0
  # (gstreamer1.0-tools) with videotestsrc, videoconvert, videoscale, decodebin, appsrc
  # (-plugins-base), mp4mux/qtdemux, jpegdec/jpegenc, avidemux/avimux, gdkpixbufoverlay,
  # multifilesink, rtspsrc (-plugins-good), h264parse and, on GPU
  # machines, nvh264dec (-plugins-bad), x264enc (-plugins-ugly) and avdec_h264 (-libav);
  # gstreamer-cuda-1.0 (libgstreamer-plugins-bad1.0-dev) lets it read nvh264dec's CUDA memory
  # in place.
  libgstreamer1.0-dev libgstreamer-plugins-base1.0-dev libgstreamer-plugins-bad1.0-dev
  gstreamer1.0-tools
  gstreamer1.0-plugins-base gstreamer1.0-plugins-good gstreamer1.0-plugins-bad
  gstreamer1.0-plugins-ugly gstreamer1.0-libav
)
readonly CROSS_PACKAGES=(
  g++-aarch64-linux-gnu qemu-user
  libprotobuf-dev:arm64 libgtest-dev:arm64 nlohmann-json3-dev zlib1g-dev:arm64 libgomp1:arm64
)
# libonnx-dev:arm64 is NOT installed through dpkg: Debian 12's libonnxifi (a dependency of
# libonnx-dev) ships /usr/lib/libonnxifi.so outside the multiarch directory, so its arm64 and
# amd64 builds collide ("trying to overwrite shared '/usr/lib/libonnxifi.so'") and apt is left
# with unmet dependencies. Instead the three arm64 .debs are downloaded (apt-get download, no
# root needed) and unpacked into a private root that toolchains/aarch64-linux-gnu.cmake adds to
# CMAKE_FIND_ROOT_PATH. Override its location with EDGEINFER_CROSS_DEPS.
readonly ONNX_ARM64_DEBS=(libonnx-dev:arm64 libonnx1:arm64 libonnxifi:arm64)
repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cross_deps=${EDGEINFER_CROSS_DEPS:-$repo_root/build/cross-deps/aarch64}

cross=0
check_only=0
for arg in "$@"; do
  case "$arg" in
    --cross) cross=1 ;;
    --check) check_only=1 ;;
    -h | --help)
      sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
      exit 0
      ;;
    *)
      echo "setup.sh: unknown argument '$arg' (see --help)" >&2
      exit 2
      ;;
  esac
done

say() { echo "[setup] $*"; }
warn() { echo "[setup] WARNING: $*" >&2; }
die() {
  echo "[setup] ERROR: $*" >&2
  exit 1
}

command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found: this script supports Debian/Ubuntu only"

installed() { [[ "$(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null)" == ii* ]]; }

# Runs a command as root (directly, or through password-less sudo).
as_root() {
  if [[ $EUID -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo -n "$@"
  else
    die "need root to run: $* (re-run as root or with password-less sudo)"
  fi
}

export DEBIAN_FRONTEND=noninteractive
# Wait for a concurrent apt/dpkg (another engineer, unattended-upgrades) instead of failing.
readonly APT=(apt-get -y -q -o DPkg::Lock::Timeout=600 -o Dpkg::Use-Pty=0)

wanted=("${HOST_PACKAGES[@]}")
((cross)) && wanted+=("${CROSS_PACKAGES[@]}")

missing=()
for pkg in "${wanted[@]}"; do
  # Node from another source (nodesource) bundles npm and conflicts with Debian's npm
  # package: take the commands if they are there.
  if [[ $pkg == npm ]] && command -v npm >/dev/null 2>&1; then continue; fi
  if [[ $pkg == nodejs ]] && command -v node >/dev/null 2>&1; then continue; fi
  [[ " ${missing[*]} " == *" $pkg "* ]] && continue
  installed "$pkg" || missing+=("$pkg")
done

# Unpacks the arm64 ONNX .debs into $cross_deps (idempotent: a stamp records the versions).
onnx_overlay_current() {
  [[ -f $cross_deps/usr/lib/aarch64-linux-gnu/cmake/ONNX/ONNXConfig.cmake ]] &&
    [[ "$(cat "$cross_deps/.stamp" 2>/dev/null)" == "$(dpkg-query -W -f='${Version}' libonnx-dev 2>/dev/null)" ]]
}
install_onnx_overlay() {
  local version tmp deb
  version=$(dpkg-query -W -f='${Version}' libonnx-dev) || die "libonnx-dev (host) is not installed"
  say "unpacking arm64 ONNX $version (${ONNX_ARM64_DEBS[*]}) into $cross_deps"
  tmp=$(mktemp -d) || die "mktemp failed"
  chmod 755 "$tmp"
  local dl=(apt-get download -q)
  # apt drops to the _apt user when run as root; let it write into our temp dir.
  [[ $EUID -eq 0 ]] && dl+=(-o APT::Sandbox::User=root)
  if ! (cd "$tmp" && "${dl[@]}" "${ONNX_ARM64_DEBS[@]/%/=$version}"); then
    rm -rf "$tmp"
    die "failed to download ${ONNX_ARM64_DEBS[*]} (version $version; arm64 lists present?)"
  fi
  rm -rf "$cross_deps" && mkdir -p "$cross_deps" || die "cannot create $cross_deps"
  for deb in "$tmp"/*.deb; do
    dpkg-deb -x "$deb" "$cross_deps" || die "dpkg-deb -x $deb failed"
  done
  rm -rf "$tmp"
  echo "$version" >"$cross_deps/.stamp"
  [[ -f $cross_deps/usr/lib/aarch64-linux-gnu/cmake/ONNX/ONNXConfig.cmake ]] ||
    die "arm64 ONNX unpacked, but $cross_deps/usr/lib/aarch64-linux-gnu/cmake/ONNX is missing"
}
if ((cross)) && installed libonnxifi:arm64; then
  warn "libonnxifi:arm64 is installed through dpkg (forced over the host's /usr/lib/libonnxifi.so?);" \
    "the cross build uses $cross_deps instead. 'apt-get remove libonnxifi:arm64' restores apt's consistency."
fi

need_arch=0
if ((cross)) && ! dpkg --print-foreign-architectures | grep -qx arm64; then need_arch=1; fi

need_overlay=0
((cross)) && ! onnx_overlay_current && need_overlay=1

if ((${#missing[@]} == 0 && need_arch == 0)); then
  if ((need_overlay)); then
    ((check_only)) && { say "arm64 ONNX not unpacked in $cross_deps"; exit 1; }
    install_onnx_overlay
    say "done: unpacked arm64 ONNX"
  else
    say "all ${#wanted[@]} packages already installed$( ((cross)) && echo ' (incl. cross, arm64 ONNX in '"$cross_deps"')'); nothing to do"
  fi
  exit 0
fi
say "missing: ${missing[*]:-(none)}$( ((need_arch)) && echo '; arm64 architecture not enabled')"
if ((check_only)); then exit 1; fi

if ((need_arch)); then
  say "enabling the arm64 architecture (dpkg --add-architecture arm64)"
  as_root dpkg --add-architecture arm64 || die "dpkg --add-architecture arm64 failed"
  # Debian serves arm64 from the same mirror. deb822 sources without an 'Architectures:'
  # line (and one-line sources without [arch=...]) cover every enabled architecture; a source
  # restricted to other architectures needs arm64 added by hand.
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    if grep -qiE '^\s*Architectures:' "$f" && ! grep -iE '^\s*Architectures:' "$f" | grep -q arm64; then
      warn "$f restricts Architectures (no arm64): fine for third-party repos, but a Debian mirror there needs arm64 added"
    fi
    if grep -qE '^\s*deb\s+\[[^]]*arch=' "$f" && ! grep -E '^\s*deb\s+\[[^]]*arch=' "$f" | grep -q arm64; then
      warn "$f has [arch=...] entries without arm64: a Debian mirror there needs arm64 added"
    fi
  done
fi

say "apt-get update"
if ! as_root "${APT[@]}" update; then
  # A broken third-party repository makes update fail while Debian's own lists are fine;
  # carry on and let the install say whether something is really unavailable.
  warn "apt-get update reported errors (see above); trying to install anyway"
fi

say "installing: ${missing[*]}"
if ! as_root "${APT[@]}" install --no-install-recommends "${missing[@]}"; then
  warn "installing all at once failed; retrying one by one to find the culprit(s)"
  for pkg in "${missing[@]}"; do
    installed "$pkg" && continue
    say "installing $pkg"
    as_root "${APT[@]}" install --no-install-recommends "$pkg" || warn "could not install $pkg"
  done
fi

failed=()
for pkg in "${missing[@]}"; do
  if [[ $pkg == npm ]]; then
    command -v npm >/dev/null 2>&1 || failed+=("$pkg")
  else
    installed "$pkg" || failed+=("$pkg")
  fi
done
if ((${#failed[@]})); then
  die "failed to install: ${failed[*]}"
fi
say "installed: ${missing[*]:-(nothing)}"
((cross)) && ! onnx_overlay_current && install_onnx_overlay
say "done"
