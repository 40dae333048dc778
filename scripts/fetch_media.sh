#!/usr/bin/env bash
# Fetches the real test media (photos and video) from Debian packages, without installing them
# or their dependencies: `apt-get download` + `dpkg -x` of the files we use, into
# $EDGEINFER_MEDIA_DIR (default <repo>/build/media). Idempotent; no root needed.
#
#   libdlib19.1  examples/faces/*.jpg: PASCAL VOC group photos with hand-labelled face boxes
#                (testing.xml), the ground truth of the BlazeFace real-photo tests
#   kphotoalbum  demo/movie.avi: real webcam footage (MJPEG, 160x120, 68 frames) with one
#                frontal face in every frame; demo/*.jpg: real portraits (800x600)
# Every JPEG is also decoded to a binary PPM (djpeg, libjpeg-turbo-progs) so that tests and the
# GPU-machine bundle can read the pixels without OpenCV.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
media=${EDGEINFER_MEDIA_DIR:-$root/build/media}
mkdir -p "$media"
cd "$media"

# package  member-directory-in-package  destination
ENTRIES=(
  "libdlib19.1 ./usr/share/doc/libdlib19.1/examples/faces faces"
  "kphotoalbum ./usr/share/kphotoalbum/demo kphotoalbum"
)
for e in "${ENTRIES[@]}"; do
  read -r pkg member dest <<<"$e"
  if [ -f "$dest/.complete" ]; then
    echo "media: $dest present"
    continue
  fi
  rm -rf "$dest" "tmp-$pkg"
  mkdir -p "tmp-$pkg"
  (cd "tmp-$pkg" && apt-get download -q "$pkg" >/dev/null 2>&1) ||
    { echo "media: 'apt-get download $pkg' failed (run scripts/setup.sh for apt's lists)" >&2; exit 1; }
  dpkg -x "tmp-$pkg"/*.deb "tmp-$pkg/root"
  mv "tmp-$pkg/root/$member" "$dest"
  rm -rf "tmp-$pkg"
  if command -v djpeg >/dev/null; then
    for j in "$dest"/*.jpg; do djpeg -pnm "$j" >"${j%.jpg}.ppm"; done
  fi
  touch "$dest/.complete"
  echo "media: $dest ready ($pkg)"
done
