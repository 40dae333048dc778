#!/usr/bin/env python3
"""Our GPU engines against PyTorch on torchvision models: build time (cold and with a warm
timing cache), engine reproducibility, accuracy and speed, in one run on the same weights
and inputs.

For each model, batch size and precision: export to ONNX (opset 17, static batch, input
"input", output "output"); `edgeinfer build` twice (empty timing cache, then warm) and compare
the two engine files; `edgeinfer run` on a fixed input against PyTorch eager in the same
precision (FP32 without TF32; FP16 with model.half()); `edgeinfer bench --json` against
PyTorch eager, eager + CUDA Graph and (with --compile) torch.compile(mode="max-autotune").

Weights are random (torch.manual_seed; no downloads). Unless --no-bn-calibration, the
BatchNorm statistics are then recomputed on one random batch and every BN scale set to 0.5:
with torchvision's initial statistics the logits of MobileNetV2 and EfficientNet-B0 are
~1e-9 and ~1e-14 and vanish in FP16; with the statistics alone the networks are chaotic
(PyTorch's own FP16 result is 2-3e-2 from FP64); with both, PyTorch FP16 is ~5e-4 from FP64
on all three models (H100, torch 2.11), so the 1e-2 tolerance means something.

Timing: PyTorch with CUDA events around each call (synchronised after each, median of
--iterations after --warmup), inputs already on the device. `edgeinfer bench` times each
execute() on the host, from host tensors; the "graph+copies" column is PyTorch's CUDA graph
with the same host-to-device input and device-to-host output copies, for a like-for-like view.

On the GPU machine (device tool, carry [".bundle"]):
  export LD_LIBRARY_PATH=/usr/local/cuda/lib64:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cudnn/lib:/opt/torch/.venv/lib/python3.12/site-packages/nvidia/cublas/lib
  source .bundle/env.sh         # puts edgeinfer on PATH
  /opt/torch/.venv/bin/python scripts/bench/compare_pytorch.py --batch 1,64 --precision both \\
      --json $OUT/compare.json --work /tmp/cmp [--models resnet50] [--compile]
or scripts/gpu/gpu_engine_check.sh, which does this and more. Exit status: 0 when every check
passed, 1 when an accuracy check, a build or a run failed (or SIGTERM stopped the run: what was
measured is still printed and saved), 2 on a setup error, 3 when all that ran passed but
--time-budget left configurations out.
"""
import argparse
import copy
import filecmp
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy as np

TOL = {"fp32": 1e-4, "fp16": 1e-2}


class Interrupted(Exception):
    pass


def on_signal(signum, _frame):
    raise Interrupted(f"stopped by signal {signum}")


def tail(text, n=15):
    return "\n".join((text or "").strip().splitlines()[-n:])


def run_cli(cmd, timeout, env=None):
    """Runs a CLI command; returns (ok, wall seconds, stdout, stderr)."""
    t0 = time.perf_counter()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return False, time.perf_counter() - t0, out, f"timed out after {timeout} s: {' '.join(cmd)}"
    return r.returncode == 0, time.perf_counter() - t0, r.stdout, r.stderr


def compare(ref, got, tol):
    if got.shape != ref.shape:
        return {"error": f"shape {list(got.shape)} != {list(ref.shape)}", "pass": False}
    r64, g64 = ref.astype(np.float64), got.astype(np.float64)
    rel = float(np.linalg.norm(g64 - r64) / max(np.linalg.norm(r64), 1e-30))
    mx = float(np.max(np.abs(g64 - r64)))
    ok = bool(np.isfinite(g64).all()) and rel <= tol  # NaN fails too
    return {"rel_l2": rel, "max_abs": mx, "pass": ok}


# ---------------------------------------------------------------- PyTorch side
def make_model(name, seed, calibrate):
    import torch
    import torchvision

    torch.manual_seed(seed)
    model = getattr(torchvision.models, name)(weights=None).eval()
    if calibrate:
        bns = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
        with torch.no_grad():
            for m in bns:
                m.reset_running_stats()
                m.momentum = None  # cumulative average over the calibration batch
                m.train()
            model(torch.randn(8, 3, 224, 224))
            for m in bns:
                m.weight.mul_(0.5)  # keeps residual nets out of the chaotic regime (see top)
        model.eval()
    return model


def export_onnx(model, path, batch):
    import torch

    x = torch.randn(batch, 3, 224, 224, device="cuda")
    kw = dict(input_names=["input"], output_names=["output"], opset_version=17)
    with torch.no_grad():
        try:
            torch.onnx.export(model, x, path, dynamo=False, **kw)
        except TypeError:  # older torch without the dynamo argument
            torch.onnx.export(model, x, path, **kw)


def time_cuda(fn, warmup, iters):
    """CUDA events around each call, synchronised after each: per-call latency."""
    import torch

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ms = []
    for _ in range(iters):
        start.record()
        fn()
        end.record()
        end.synchronize()
        ms.append(start.elapsed_time(end))
    ms.sort()
    return {"p50_ms": float(np.median(ms)), "mean_ms": float(np.mean(ms)),
            "p90_ms": float(np.percentile(ms, 90)), "min_ms": ms[0], "max_ms": ms[-1]}


def capture_graph(m, x):
    import torch

    static_x = x.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # cudnn.benchmark autotuning and lazy init happen before capture
            m(static_x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        static_y = m(static_x)
    return g, static_x, static_y


def torch_side(a, base, x32, prec, res):
    """Reference output and timings of PyTorch; fills `res`, returns the reference output."""
    import torch

    dt = torch.float16 if prec == "fp16" else torch.float32
    tol = TOL[prec]
    layouts = ["channels_last", "contiguous"] if prec == "fp16" else ["contiguous", "channels_last"]
    if not a.alt_layout:
        layouts = layouts[:1]
    x_host = torch.from_numpy(x32)
    x_dev = x_host.cuda().to(dt)
    ref = None
    for layout in layouts:
        fmt = torch.channels_last if layout == "channels_last" else torch.contiguous_format
        m = copy.deepcopy(base).cuda().to(dt).to(memory_format=fmt)
        xi = x_dev.contiguous(memory_format=fmt)
        out = m(xi).float().cpu().numpy()
        key = "eager" if ref is None else "eager_alt"
        res["torch"][key] = dict(time_cuda(lambda: m(xi), a.warmup, a.iterations), layout=layout)
        if ref is None:
            ref = out
            res["ref_std"] = float(out.std())
            g, sx, sy = capture_graph(m, xi)
            g.replay()  # capture records without running
            res["checks"]["eager+graph"] = compare(ref, sy.float().cpu().numpy(), tol)
            res["torch"]["graph"] = time_cuda(g.replay, a.warmup, a.iterations)

            def with_copies():
                sx.copy_(x_host)  # pageable host float32 -> device, as `edgeinfer bench` binds
                g.replay()
                sy.cpu()
            res["torch"]["graph+copies"] = time_cuda(with_copies, a.warmup, a.iterations)
            del g, sx, sy
            if a.compile:
                try:  # inductor prints every autotuning table to stderr otherwise
                    import torch._inductor.config as inductor_config
                    import torch._inductor.select_algorithm as select_algorithm

                    select_algorithm.PRINT_AUTOTUNE = False
                    inductor_config.max_autotune_report_choices_stats = False
                except (ImportError, AttributeError):
                    pass
                t0 = time.perf_counter()
                cm = torch.compile(m, mode="max-autotune")
                outc = cm(xi).float().cpu().numpy()
                res["torch"]["compile_s"] = time.perf_counter() - t0
                res["checks"]["compile"] = compare(ref, outc, tol)
                res["torch"]["compile"] = time_cuda(lambda: cm(xi), a.warmup, a.iterations)
                del cm
                torch._dynamo.reset()
        else:
            res["checks"][f"eager {layout}"] = compare(ref, out, tol)
        del m, xi
    if prec == "fp16":  # how far each FP16 result is from FP32 (informative, no tolerance)
        m32 = copy.deepcopy(base).cuda()
        res["fp32_ref"] = m32(x_host.cuda()).cpu().numpy()
        res["torch"]["fp16_rel_l2_vs_fp32"] = compare(res["fp32_ref"], ref, 1.0)["rel_l2"]
        del m32
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    return ref


# ---------------------------------------------------------------- our side
def build_engine(a, onnx, eng, prec, xdg, report, tag):
    env = dict(os.environ, XDG_CACHE_HOME=xdg)  # no default cache from earlier runs is seen
    cmd = [a.edgeinfer, "build", onnx, "-o", eng, "--backend", a.backend,
           "--timing-cache", os.path.join(xdg, "timing.cache"), "--build-report", report]
    if prec == "fp16":
        cmd.append("--fp16")
    ok, secs, out, err = run_cli(cmd, a.cli_timeout, env)
    if not ok:
        raise RuntimeError(f"{tag} build failed ({' '.join(cmd)}):\n{tail(err or out)}")
    return secs


def ours_side(a, onnx, d, prec, x32, res):
    xdg = os.path.join(d, "xdg")
    shutil.rmtree(xdg, ignore_errors=True)
    os.makedirs(xdg)
    e1, e2 = os.path.join(d, "cold.engine"), os.path.join(d, "cached.engine")
    b = res["ours"]
    b["cold_build_s"] = build_engine(a, onnx, e1, prec, xdg, os.path.join(d, "build_cold.json"), "cold")
    b["timing_cache_bytes"] = sum(os.path.getsize(os.path.join(r, f))
                                  for r, _, fs in os.walk(xdg) for f in fs)
    b["cached_build_s"] = build_engine(a, onnx, e2, prec, xdg, os.path.join(d, "build_cached.json"),
                                       "cached")
    b["identical_engine"] = filecmp.cmp(e1, e2, shallow=False)
    b["engine_bytes"] = os.path.getsize(e1)
    for which in ("cold", "cached"):
        p = os.path.join(d, f"build_{which}.json")
        if os.path.exists(p):
            with open(p) as f:
                rep = json.load(f)
            # Keep the report's scalars here; the whole file stays in the work directory.
            b[f"build_report_{which}"] = ({k: v for k, v in rep.items() if not isinstance(v, (dict, list))}
                                          if isinstance(rep, dict) else None)
    # The engine's input is float32 (FP16 engines convert inside) or, failing that, float16.
    got, err = None, ""
    for dtype in (["float32", "float16"] if prec == "fp16" else ["float32"]):
        xp, od = os.path.join(d, f"input_{dtype}.npy"), os.path.join(d, "out")
        np.save(xp, x32.astype(dtype))
        shutil.rmtree(od, ignore_errors=True)
        ok, _, out, err = run_cli([a.edgeinfer, "run", e1, "--input", f"input={xp}", "--outputs", od],
                                  a.cli_timeout)
        if ok:
            got = np.load(os.path.join(od, "output.npy")).astype(np.float32)
            b["input_dtype"] = dtype
            break
        err = tail(err or out)
    if got is None:
        raise RuntimeError(f"edgeinfer run failed:\n{err}")
    bj = os.path.join(d, "bench.json")
    ok, _, out, err = run_cli([a.edgeinfer, "bench", e1, "--input", f"input={xp}", "--iterations",
                               str(a.iterations), "--warmup", str(a.warmup), "--json", bj]
                               + (["--device-inputs"] if a.backend == "cuda" else []), a.cli_timeout)
    if not ok:
        raise RuntimeError(f"edgeinfer bench failed:\n{tail(err or out)}")
    with open(bj) as f:
        b["bench"] = json.load(f)
    if b["bench"].get("backend") != a.backend or b["bench"].get("precision") != prec:
        b["warning"] = (f"engine is backend {b['bench'].get('backend')}, precision "
                        f"{b['bench'].get('precision')}; asked for {a.backend}, {prec}")
    return got


# ---------------------------------------------------------------- one configuration
def run_config(a, name, base, onnx, batch, prec, work):
    import torch

    tag = f"{name} b{batch} {prec}"
    d = os.path.join(work, f"{name}_b{batch}_{prec}")
    os.makedirs(d, exist_ok=True)
    res = {"model": name, "batch": batch, "precision": prec, "status": "ok", "ours": {},
           "torch": {}, "checks": {}}
    g = torch.Generator().manual_seed(a.seed + batch)
    x = torch.randn(batch, 3, 224, 224, generator=g)
    if prec == "fp16":
        x = x.half().float()  # the values both sides see are exactly representable in FP16
    x32 = x.numpy()
    got = None
    try:
        got = ours_side(a, onnx, d, prec, x32, res)
    except Interrupted:
        raise
    except Exception as e:  # a failed build or run is reported; PyTorch is still measured
        res["status"], res["error"] = ("build_failed" if "build failed" in str(e) else "run_failed"), str(e)
        print(f"[{tag}] {str(e).splitlines()[0]}\n  " + "\n  ".join(str(e).splitlines()[1:]), flush=True)
    with torch.no_grad():
        ref = torch_side(a, base, x32, prec, res)
    fp32_ref = res.pop("fp32_ref", None)
    if got is not None:
        res["checks"]["ours"] = compare(ref, got, TOL[prec])
        if fp32_ref is not None:
            res["ours"]["fp16_rel_l2_vs_fp32"] = compare(fp32_ref, got, 1.0)["rel_l2"]
    res["pass"] = res["status"] == "ok" and all(c["pass"] for c in res["checks"].values())
    c = res["checks"].get("ours", {})
    o, t = res["ours"], res["torch"]
    print(f"[{tag}] {'PASS' if res['pass'] else 'FAIL'}"
          + (f"  ours {o['bench']['p50_ms']:.3f} ms (GPU {o['bench'].get('gpu_p50_ms', 0):.3f} ms)"
             if "bench" in o else "")
          + f"  eager {t['eager']['p50_ms']:.3f} ms  graph {t['graph']['p50_ms']:.3f} ms"
          + (f"  build {o['cold_build_s']:.1f}/{o['cached_build_s']:.1f} s, identical {o['identical_engine']}"
             if "identical_engine" in o else "")
          + (f"  rel L2 {c['rel_l2']:.2e}, max abs {c['max_abs']:.2e}" if "rel_l2" in c else "")
          + "".join(f"\n  check {k}: {v}" for k, v in res["checks"].items() if not v["pass"])
          + (f"\n  warning: {o['warning']}" if "warning" in o else ""), flush=True)
    return res


# ---------------------------------------------------------------- report
def fmt(v, spec=".3f"):
    return "—" if v is None else format(v, spec)


def table(results, prec):
    alt = "eager NCHW ms" if prec == "fp16" else "eager NHWC ms"
    cols = ["model", "batch", "ours ms", "eager ms", "eager/ours", "eager+graph ms", "graph/ours",
            "compile ms", "compile/ours", "graph+copies ms", alt, "ours img/s", "graph img/s",
            "cold build s", "cached build s", "identical engine", "rel L2", "check"]
    lines = [f"### {prec.upper()}", "", "| " + " | ".join(cols) + " |", "|" + " --- |" * len(cols)]
    for r in results:
        if r["precision"] != prec:
            continue
        o, t = r.get("ours", {}), r.get("torch", {})
        ours = o.get("bench", {}).get("p50_ms")

        def ms(k):
            return t.get(k, {}).get("p50_ms")

        def ratio(k):
            return None if ours is None or ms(k) is None else ms(k) / ours

        def ips(v):
            return None if v is None else 1000.0 * r["batch"] / v
        rel = r.get("checks", {}).get("ours", {}).get("rel_l2")
        ident = o.get("identical_engine")
        check = "PASS" if r.get("pass") else ("SKIPPED" if r["status"] == "skipped" else
                                              "FAIL" if r["status"] == "ok" else r["status"].upper())
        row = [r["model"], str(r["batch"]), fmt(ours), fmt(ms("eager")), fmt(ratio("eager"), ".2f"),
               fmt(ms("graph")), fmt(ratio("graph"), ".2f"), fmt(ms("compile")),
               fmt(ratio("compile"), ".2f"), fmt(ms("graph+copies")), fmt(ms("eager_alt")),
               fmt(ips(ours), ".0f"), fmt(ips(ms("graph")), ".0f"), fmt(o.get("cold_build_s"), ".1f"),
               fmt(o.get("cached_build_s"), ".1f"), "—" if ident is None else ("yes" if ident else "NO"),
               fmt(rel, ".1e"), check]
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def write_json(path, meta, results):
    if path:
        with open(path + ".tmp", "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
        os.replace(path + ".tmp", path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="resnet50,mobilenet_v2,efficientnet_b0")
    ap.add_argument("--batch", default="1,64", help="comma-separated batch sizes")
    ap.add_argument("--precision", choices=["fp16", "fp32", "both"], default="both")
    ap.add_argument("--work", default="", help="work directory (default: a temporary one, removed)")
    ap.add_argument("--json", default="", help="write every result to this JSON file")
    ap.add_argument("--edgeinfer", default="", help="the CLI (default: edgeinfer on PATH)")
    ap.add_argument("--backend", default="cuda", help="--backend of edgeinfer build (cpu: test the script)")
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--compile", action="store_true", help='also torch.compile(mode="max-autotune")')
    ap.add_argument("--no-alt-layout", dest="alt_layout", action="store_false",
                    help="skip eager in the other memory format (NCHW for FP16, NHWC for FP32)")
    ap.add_argument("--no-bn-calibration", dest="bn_calibration", action="store_false")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cli-timeout", type=int, default=600, help="seconds per edgeinfer command")
    ap.add_argument("--time-budget", type=float, default=0,
                    help="seconds; start no new configuration after this (0: none)")
    ap.add_argument("--skip-without-gpu", action="store_true", help="exit 0 with SKIP when no CUDA")
    a = ap.parse_args()
    t_start = time.monotonic()
    signal.signal(signal.SIGTERM, on_signal)  # `timeout`: still print and save what was measured

    cli = a.edgeinfer or shutil.which("edgeinfer")
    if not cli or not (os.path.isfile(cli) and os.access(cli, os.X_OK)):
        print(f"error: edgeinfer CLI not found ({a.edgeinfer or 'not on PATH'}); "
              "`source .bundle/env.sh` or pass --edgeinfer PATH", file=sys.stderr)
        return 2
    a.edgeinfer = os.path.abspath(cli)
    import torch
    import torchvision

    if not torch.cuda.is_available():
        if a.skip_without_gpu:
            print("SKIP: CUDA is not available to PyTorch")
            return 0
        print("error: CUDA is not available to PyTorch (--skip-without-gpu to skip)", file=sys.stderr)
        return 2
    torch.backends.cuda.matmul.allow_tf32 = False  # FP32 means FP32 (our engines use no TF32)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True  # PyTorch autotunes its convolutions as we do
    precs = ["fp16", "fp32"] if a.precision == "both" else [a.precision]
    batches = [int(b) for b in a.batch.split(",") if b]
    models = [m for m in a.models.split(",") if m]
    work = a.work or tempfile.mkdtemp(prefix="compare_pytorch_")
    os.makedirs(work, exist_ok=True)
    ok_v, _, ver, _ = run_cli([a.edgeinfer, "version"], 30)
    meta = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "torchvision": torchvision.__version__, "cudnn": torch.backends.cudnn.version(),
            "edgeinfer": ver.strip() if ok_v else None, "date": time.strftime("%Y-%m-%d %H:%M:%S"),
            "args": vars(a), "tolerances": TOL}
    print(f"{meta['gpu']}; torch {meta['torch']}, cuDNN {meta['cudnn']}; {meta['edgeinfer']}; work {work}",
          flush=True)
    results, interrupted, exported = [], None, set()
    todo = [(m, b, p) for m in models for b in batches for p in precs]

    def skip(m, b, p, why):
        results.append({"model": m, "batch": b, "precision": p, "status": "skipped", "error": why})
    try:
        for name in models:
            try:
                base = make_model(name, a.seed, a.bn_calibration).cuda()
            except Exception as e:  # e.g. an unknown model name: report, go on
                for b in batches:
                    for p in precs:
                        results.append({"model": name, "batch": b, "precision": p,
                                        "status": "error", "error": f"model: {e}"})
                print(f"[{name}] error: {e}", flush=True)
                continue
            for batch in batches:
                onnx = os.path.join(work, f"{name}_b{batch}.onnx")
                for prec in precs:
                    if a.time_budget and time.monotonic() - t_start > a.time_budget:
                        skip(name, batch, prec, "time budget spent")
                        continue
                    try:
                        if onnx not in exported:  # once per model and batch, both precisions
                            export_onnx(base, onnx, batch)
                            exported.add(onnx)
                        results.append(run_config(a, name, base, onnx, batch, prec, work))
                    except Interrupted:
                        raise
                    except Exception as e:  # e.g. export or CUDA out of memory: report, go on
                        results.append({"model": name, "batch": batch, "precision": prec,
                                        "status": "error", "error": f"{type(e).__name__}: {e}"})
                        print(f"[{name} b{batch} {prec}] error: {type(e).__name__}: {e}", flush=True)
                        torch.cuda.empty_cache()
                    write_json(a.json, meta, results)
            del base
            torch.cuda.empty_cache()
    except Interrupted as e:
        interrupted = str(e)
        print(f"interrupted: {e}", flush=True)
    done = {(r["model"], r["batch"], r["precision"]) for r in results}
    for m, b, p in todo:
        if (m, b, p) not in done:
            skip(m, b, p, interrupted or "not run")
    meta["wall_s"] = time.monotonic() - t_start
    meta["interrupted"] = interrupted
    write_json(a.json, meta, results)
    print(f"\nGPU {meta['gpu']}; ours: `edgeinfer bench` p50 (host wall clock, host tensors); "
          "PyTorch: CUDA-event p50, device tensors; ratios >1: ours faster\n")
    for p in precs:
        print(table(results, p) + "\n")
    failed = [r for r in results if r["status"] != "skipped" and not r.get("pass")]
    for r in failed:
        print(f"FAILED {r['model']} b{r['batch']} {r['precision']}: "
              + ("accuracy" if r["status"] == "ok" else r["status"])
              + (f": {tail(r.get('error', ''), 6)}" if r.get("error") else "")
              + "".join(f"\n  {k}: {v}" for k, v in r.get("checks", {}).items() if not v["pass"]))
    skipped = sum(r["status"] == "skipped" for r in results)
    print(f"{len(results) - len(failed) - skipped} passed, {len(failed)} failed, {skipped} skipped "
          f"in {meta['wall_s']:.0f} s" + (f"; JSON: {a.json}" if a.json else ""))
    if not a.work:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed or interrupted else (3 if skipped else 0)


if __name__ == "__main__":
    sys.exit(main())
