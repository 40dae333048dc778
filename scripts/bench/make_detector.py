#!/usr/bin/env python3
"""A ResNet-18/34-class object detector for the streams-per-GPU benchmark (issue 5), as ONNX
plus the EdgeInfer model config that runs it. Needs PyTorch and torchvision (the GPU machine
has them); weights are random (torch.manual_seed), nothing is downloaded.

The network is shaped like the detectors DeepStream's published stream counts use (NVIDIA's
DetectNet_v2 family, e.g. PeopleNet/TrafficCamNet on ResNet-34/18 at 960x544): the torchvision
ResNet trunk with its last stage at stride 1, so the feature map is 1/16 of the input (60x34 at
960x544), and a 1x1 convolution head. The head is a YOLOv5-style decoded head (so the SDK's
"yolov5" decoder reads it): per cell and anchor, sigmoid(x, y) -> box centre, (2 sigmoid)^2 *
anchor -> box size, sigmoid objectness and class scores; output "output" [N, cells*anchors,
5 + classes]. Differences from the real thing, stated so that figures are read rightly: DetectNet
heads are a coverage grid plus box regression, and the published models are pruned and INT8;
this one is unpruned.

Random BatchNorm statistics make a 34-layer network chaotic, so (as scripts/bench/
compare_pytorch.py does) each BN scale is set to 0.5 and its statistics are recomputed on one
random batch. The objectness bias starts at the usual detector prior (RetinaNet: p = 0.01), so
few cells pass the score threshold, as in a real scene; the benchmark prints how many
detections a frame had.

  python3 scripts/bench/make_detector.py --arch resnet34 --out /tmp/det/resnet34_det.onnx
      [--width 960 --height 544 --classes 4 --seed 0]

writes /tmp/det/resnet34_det.onnx and /tmp/det/resnet34_det.json (the model config; its "model"
is the ONNX file's name, next to it). The batch dimension is dynamic ("batch"): the GStreamer
element's batch-size (or `edgeinfer build --dynamic-dim N`) fixes it.
"""
import argparse
import json
import math
import os
import sys


def build(arch, width, height, classes, anchors, seed):
    import torch
    import torchvision

    torch.manual_seed(seed)
    trunk = getattr(torchvision.models, arch)(weights=None)
    # Last stage at stride 1: output stride 16, as DetectNet_v2 has it.
    first = trunk.layer4[0]
    first.conv1.stride = (1, 1)
    if first.downsample is not None:
        first.downsample[0].stride = (1, 1)
    channels = trunk.fc.in_features
    na = len(anchors)

    class Detector(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = torch.nn.Sequential(trunk.conv1, trunk.bn1, trunk.relu, trunk.maxpool)
            self.body = torch.nn.Sequential(trunk.layer1, trunk.layer2, trunk.layer3, trunk.layer4)
            self.head = torch.nn.Conv2d(channels, na * (5 + classes), 1)
            gh, gw = math.ceil(height / 16), math.ceil(width / 16)
            ys, xs = torch.meshgrid(torch.arange(gh), torch.arange(gw), indexing="ij")
            grid = torch.stack([xs, ys], -1).float().view(1, 1, gh, gw, 2)
            self.register_buffer("grid", grid)
            self.register_buffer("anchor", torch.tensor(anchors, dtype=torch.float32).view(1, na, 1, 1, 2))
            self.stride = 16.0
            with torch.no_grad():  # objectness prior p = 0.01 (bias = -log((1 - p) / p))
                b = self.head.bias.view(na, 5 + classes)
                b[:, 4] = -math.log(99.0)

        def forward(self, x):
            y = self.head(self.body(self.stem(x)))
            n, _, gh, gw = y.shape
            y = y.view(n, na, 5 + classes, gh, gw).permute(0, 1, 3, 4, 2).sigmoid()
            xy = (y[..., 0:2] * 2.0 - 0.5 + self.grid) * self.stride
            wh = (y[..., 2:4] * 2.0) ** 2 * self.anchor
            return torch.cat([xy, wh, y[..., 4:]], -1).reshape(n, -1, 5 + classes)

    model = Detector()
    # BN: scale 0.5, statistics of one random batch (cumulative average, momentum None).
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.reset_running_stats()
            m.momentum = None
            with torch.no_grad():
                m.weight.fill_(0.5)
    model.train()
    with torch.no_grad():
        model(torch.rand(4, 3, height, width))
    model.eval()
    return model


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="resnet34", choices=["resnet18", "resnet34"])
    ap.add_argument("--width", type=int, default=960)
    ap.add_argument("--height", type=int, default=544)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="ONNX file to write (the config goes beside it)")
    a = ap.parse_args()
    if a.width % 16 or a.height % 16:
        sys.exit(f"--width/--height must be multiples of 16 (got {a.width}x{a.height})")
    import torch

    anchors = [[24.0, 48.0], [64.0, 96.0], [160.0, 192.0]]  # pixels (person/car-sized)
    model = build(a.arch, a.width, a.height, a.classes, anchors, a.seed)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    x = torch.rand(1, 3, a.height, a.width)
    torch.onnx.export(model, x, a.out, opset_version=17, input_names=["input"],
                      output_names=["output"], dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}},
                      dynamo=False)
    macs = 0

    def count(m, inp, out):
        nonlocal macs
        k = m.weight.shape[1] * m.weight.shape[2] * m.weight.shape[3]
        macs += out.numel() * k

    hooks = [m.register_forward_hook(count) for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    with torch.no_grad():
        out = model(x)
    for h in hooks:
        h.remove()
    score = out[0, :, 4:5] * out[0, :, 5:].max(-1, keepdim=True).values
    config = {
        "name": f"{a.arch}-det-{a.width}x{a.height}",
        "model": os.path.basename(a.out),
        "input": {"tensor": "input", "width": a.width, "height": a.height, "layout": "NCHW",
                  "dtype": "float32", "resize": "stretch", "interpolation": "bilinear",
                  "channels": "RGB", "scale": 1.0 / 255.0},
        "decoder": {"type": "yolov5", "output": "output", "num_classes": a.classes,
                    "score_threshold": 0.25, "iou_threshold": 0.45, "max_detections": 100},
    }
    cfg = os.path.splitext(a.out)[0] + ".json"
    with open(cfg, "w") as f:
        json.dump(config, f, indent=2)
    print(f"{a.arch} detector {a.width}x{a.height}: {macs / 1e9:.1f} GMAC per frame, "
          f"{sum(p.numel() for p in model.parameters()) / 1e6:.1f} M parameters, output "
          f"{list(out.shape)}, {int((score > 0.25).sum())} boxes over 0.25 on a random frame; "
          f"wrote {a.out} and {cfg}")


if __name__ == "__main__":
    main()
