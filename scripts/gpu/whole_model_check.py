#!/usr/bin/env python3
"""Whole-model check (Polygraphy-style): export real architectures from torchvision with
random weights, run them through ONNX Runtime (the reference) and through `edgeinfer run`,
and compare every output. Runs where PyTorch, torchvision and onnxruntime are installed
(the GPU machine); the edgeinfer binary comes from a bundle built on the dev machine.

usage: whole_model_check.py --edgeinfer PATH --work DIR [--models a,b] [--extra-onnx f.onnx ...]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np


def export(name, work, batch=1, dynamic=False):
    import torch
    import torchvision

    torch.manual_seed(0)
    ctor = getattr(torchvision.models, name)
    model = ctor(weights=None).eval()
    x = torch.randn(batch, 3, 224, 224)
    path = os.path.join(work, f"{name}{'_dyn' if dynamic else ''}.onnx")
    kwargs = dict(input_names=["input"], output_names=["logits"], opset_version=17)
    if dynamic:
        kwargs["dynamic_axes"] = {"input": {0: "batch"}, "logits": {0: "batch"}}
    try:
        torch.onnx.export(model, x, path, dynamo=False, **kwargs)
    except TypeError:
        torch.onnx.export(model, x, path, **kwargs)
    return path


def run_ort(path, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    names = [o.name for o in s.get_outputs()]
    return dict(zip(names, s.run(names, feeds)))


def safe(n):
    return "".join("_" if c in "/\\: " else c for c in n)


def run_edgeinfer(binary, path, feeds, work):
    indir = os.path.join(work, "in_" + os.path.basename(path))
    outdir = os.path.join(work, "out_" + os.path.basename(path))
    os.makedirs(indir, exist_ok=True)
    for k, v in feeds.items():
        np.save(os.path.join(indir, safe(k) + ".npy"), v)
    t0 = time.time()
    r = subprocess.run([binary, "run", path, "--backend", "cpu", "--inputs", indir, "--outputs", outdir,
                        "--warmup", "1", "--iterations", "3"], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip() or r.stdout.strip())
    timing = [l for l in r.stdout.splitlines() if l.startswith("timing:")]
    outs = {}
    for f in os.listdir(outdir):
        outs[f[:-4]] = np.load(os.path.join(outdir, f))
    return outs, (timing[0] if timing else ""), time.time() - t0


def compare(ref, got):
    worst = {}
    for name, r in ref.items():
        g = got.get(safe(name))
        if g is None:
            return {"error": f"output {name} missing"}
        if g.shape != r.shape:
            return {"error": f"output {name} shape {g.shape} != {r.shape}"}
        r64, g64 = r.astype(np.float64), g.astype(np.float64)
        rel = float(np.linalg.norm(g64 - r64) / max(np.linalg.norm(r64), 1e-30))
        worst[name] = {"max_abs": float(np.max(np.abs(g64 - r64))), "rel_l2": rel}
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--edgeinfer", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--models", default="resnet50,mobilenet_v2,mobilenet_v3_small,efficientnet_b0,"
                                        "regnet_y_400mf,convnext_tiny,resnet18")
    ap.add_argument("--extra-onnx", nargs="*", default=[])
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    rng = np.random.default_rng(0)
    results = []
    jobs = [(m, False, 1) for m in a.models.split(",") if m] + [("resnet18", True, 3)]
    for name, dyn, batch in jobs:
        label = f"{name}{' (dynamic batch, run at 3)' if dyn else ''}"
        try:
            path = export(name, a.work, batch=1, dynamic=dyn)
            feeds = {"input": rng.standard_normal((batch, 3, 224, 224)).astype(np.float32)}
            ref = run_ort(path, feeds)
            got, timing, _ = run_edgeinfer(a.edgeinfer, path, feeds, a.work)
            results.append({"model": label, "cmp": compare(ref, got), "timing": timing})
        except Exception as e:  # report, keep going
            results.append({"model": label, "cmp": {"error": str(e)[:400]}})
    for path in a.extra_onnx:
        try:
            import onnx

            m = onnx.load(path)
            init = {i.name for i in m.graph.initializer}
            feeds = {}
            for i in m.graph.input:
                if i.name in init:
                    continue
                dims = [d.dim_value if d.dim_value > 0 else 1 for d in i.type.tensor_type.shape.dim]
                feeds[i.name] = rng.random(dims).astype(np.float32)
            ref = run_ort(path, feeds)
            got, timing, _ = run_edgeinfer(a.edgeinfer, path, feeds, a.work)
            results.append({"model": os.path.basename(path), "cmp": compare(ref, got), "timing": timing})
        except Exception as e:
            results.append({"model": os.path.basename(path), "cmp": {"error": str(e)[:400]}})
    ok = True
    print(f"{'model':44s} {'output':18s} {'max |err|':>11s} {'rel L2 err':>11s}  verdict")
    for r in results:
        c = r["cmp"]
        if "error" in c:
            ok = False
            print(f"{r['model']:44s} ERROR {c['error']}")
            continue
        for out, v in c.items():
            good = v["rel_l2"] < 1e-4
            ok &= good
            print(f"{r['model']:44s} {out[:18]:18s} {v['max_abs']:11.3e} {v['rel_l2']:11.3e}  {'ok' if good else 'MISMATCH'}")
        if r.get("timing"):
            print(f"    {r['timing']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(results, f, indent=1)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
