#!/usr/bin/python3
"""Real photos as a classifier's input batch, for scripts/gpu/int8_classifier_check.sh.

Reads every binary PPM of scripts/fetch_media.sh (dlib's faces/*.ppm and kphotoalbum's demo
photos), resizes the shorter side to 256 (bilinear) and crops the centre 224x224, as
torchvision's ImageNet evaluation does, and writes them as one uint8 array [N, 224, 224, 3]
(RGB) plus the list of their names:

    /usr/bin/python3 scripts/bench/classifier_images.py build/media OUT.npy
"""
import glob
import os
import re
import sys

import numpy as np


def read_ppm(path):
    data = open(path, "rb").read()
    m = re.match(rb"P6\s+(\d+)\s+(\d+)\s+(\d+)\s", data)
    if not m or m.group(3) != b"255":
        raise ValueError(f"{path}: not a binary 8-bit PPM")
    w, h = int(m.group(1)), int(m.group(2))
    return np.frombuffer(data[m.end():m.end() + w * h * 3], np.uint8).reshape(h, w, 3)


def resize_crop(img, short=256, size=224):
    h, w, _ = img.shape
    s = short / min(h, w)
    nh, nw = max(short, round(h * s)), max(short, round(w * s))
    ys = (np.arange(nh) + 0.5) / s - 0.5
    xs = (np.arange(nw) + 0.5) / s - 0.5
    y0 = np.clip(np.floor(ys).astype(int), 0, h - 1)
    x0 = np.clip(np.floor(xs).astype(int), 0, w - 1)
    y1, x1 = np.clip(y0 + 1, 0, h - 1), np.clip(x0 + 1, 0, w - 1)
    fy = np.clip(ys - np.floor(ys), 0, 1)[:, None, None]
    fx = np.clip(xs - np.floor(xs), 0, 1)[None, :, None]
    f = img.astype(np.float32)
    top = f[y0][:, x0] * (1 - fx) + f[y0][:, x1] * fx
    bottom = f[y1][:, x0] * (1 - fx) + f[y1][:, x1] * fx
    out = top * (1 - fy) + bottom * fy
    oy, ox = (nh - size) // 2, (nw - size) // 2
    return np.clip(out[oy:oy + size, ox:ox + size] + 0.5, 0, 255).astype(np.uint8)


def main():
    media, out = sys.argv[1], sys.argv[2]
    files = sorted(glob.glob(f"{media}/faces/*.ppm")) + sorted(glob.glob(f"{media}/kphotoalbum/*.ppm"))
    if not files:
        sys.exit(f"no PPM photos under {media}: run scripts/fetch_media.sh")
    np.save(out, np.stack([resize_crop(read_ppm(f)) for f in files]))
    with open(os.path.splitext(out)[0] + ".txt", "w") as f:
        f.write("\n".join(os.path.relpath(p, media) for p in files) + "\n")
    print(f"{len(files)} photos -> {out}")


if __name__ == "__main__":
    main()
