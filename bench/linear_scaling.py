"""Time against size for the fused Linear (x @ w + b, GELU, forward + backward through the public
API), n x n x n from 64 to 8192, on each numr device beside torch on the same hardware, with the
device's roofline: the least time its FMA peak and memory bandwidth allow.

    python bench/linear_scaling.py --devices cpu [--sizes 64,128,...,8192] --json cpu.json
    python bench/linear_scaling.py --devices cuda,webgpu --json h200.json
    python bench/linear_scaling.py --plot docs/linear_scaling.png cpu.json h200.json

One step: x, w (n x n, requires_grad), b (n); y = nr.matmul_bias_activation(x, w, b, "gelu");
y.backward(dy); closed by reading one element of w.grad (torch: F.gelu(F.linear(...)),
autograd, torch.cuda.synchronize). Steps are repeated until 0.3 s or `--reps` have run (at least
2), after one warm-up step; the median is kept. Work: 6 n³ FLOP (three GEMMs); memory: at least
10 n² values of 4 bytes (x, w, z, y, dy, dx, dw once each, z read twice, y written once more by
autograd), so the roofline time is max(6 n³ / peak, 40 n² / bandwidth).
Roofline figures: `--roofline device=TFLOPs:TBps` (defaults: cuda and webgpu the H200's fp32 FMA
peak 67 TFLOP/s and 4.8 TB/s; cpu: cores x 32 fp32 FMAs a cycle (AVX-512, two FMA units) x 2 x the
clock in /proc/cpuinfo, and the bandwidth of a numpy copy measured here). A peak that a measured step
beats (a turbo clock above the one /proc/cpuinfo shows) is raised to that step's FLOP rate.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

SIZES = [64, 128, 256, 512, 1024, 2048, 4096, 8192]
H200 = (67.0, 4.8)


def timed(step, sync, reps, budget=0.3):
    step()
    sync()
    ts, spent = [], 0.0
    while len(ts) < 2 or (len(ts) < reps and spent < budget):
        t0 = time.perf_counter()
        step()
        sync()
        ts.append(time.perf_counter() - t0)
        spent += ts[-1]
    return statistics.median(ts) * 1e3


def numr_ms(nr, device, n, reps):
    rng = np.random.default_rng(n)
    x = nr.tensor(rng.standard_normal((n, n), dtype=np.float32), device=device, requires_grad=True)
    w = nr.tensor(rng.standard_normal((n, n), dtype=np.float32) / float(np.sqrt(n)), device=device,
                  requires_grad=True)
    b = nr.tensor(rng.standard_normal(n, dtype=np.float32), device=device, requires_grad=True)
    dy = nr.tensor(rng.standard_normal((n, n), dtype=np.float32), device=device)

    def step():
        x.grad = w.grad = b.grad = None
        nr.matmul_bias_activation(x, w, b, "gelu").backward(dy)
    return timed(step, lambda: w.grad[0, 0].item(), reps)


def torch_ms(torch, device, n, reps):
    F = torch.nn.functional
    g = torch.Generator(device=device).manual_seed(n)
    x = torch.randn(n, n, device=device, generator=g, requires_grad=True)
    w = (torch.randn(n, n, device=device, generator=g) / n ** 0.5).requires_grad_()
    b = torch.randn(n, device=device, generator=g, requires_grad=True)
    dy = torch.randn(n, n, device=device, generator=g)

    def step():
        x.grad = w.grad = b.grad = None
        F.gelu(F.linear(x, w, b)).backward(dy)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    return timed(step, sync, reps)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            names = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
        return f"{names[0]}, {len(names)} cores" if names else "cpu"
    except OSError:
        return "cpu"


def cpu_roofline():
    ghz = 0.0
    try:
        with open("/proc/cpuinfo") as f:
            mhz = [float(line.split(":")[1]) for line in f if line.startswith("cpu MHz")]
        ghz = max(mhz) / 1000 if mhz else 0.0
    except OSError:
        pass
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    a = np.ones(1 << 26, np.float32)
    out = np.empty_like(a)
    np.copyto(out, a)
    t0 = time.perf_counter()
    for _ in range(5):
        np.copyto(out, a)
    tbps = 5 * 2 * a.nbytes / (time.perf_counter() - t0) / 1e12
    return cores * 32 * 2 * ghz / 1000, tbps


def run(args):
    import numr_web as nr
    devices = [d for d in args.devices.split(",") if d]
    sizes = [int(s) for s in args.sizes.split(",")]
    res = {"sizes": sizes, "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
           "numr": {}, "torch": {}, "roofline": {}, "machine": cpu_model()}
    try:
        import torch
    except ImportError:
        torch = None
    if torch is not None and any(d != "cpu" for d in devices) and torch.cuda.is_available():
        res["machine"] = torch.cuda.get_device_name(0)
    given = dict(kv.split("=") for kv in args.roofline.split(",") if kv)
    for dev in devices:
        if dev in given:
            peak, bw = (float(v) for v in given[dev].split(":"))
        else:
            peak, bw = cpu_roofline() if dev == "cpu" else H200
        res["roofline"][dev] = {"tflops": peak, "tbps": bw}
        res["numr"][dev] = {}
        for n in sizes:
            res["numr"][dev][n] = numr_ms(nr, dev, n, args.reps)
            print(f"numr {dev} n={n}: {res['numr'][dev][n]:.3f} ms", flush=True)
        tdev = "cpu" if dev == "cpu" else "cuda"
        if torch is not None and tdev not in res["torch"] and (
                tdev == "cpu" or torch.cuda.is_available()):
            if tdev == "cpu":
                res["torch_threads"] = torch.get_num_threads()
            res["torch"][tdev] = {}
            for n in sizes:
                res["torch"][tdev][n] = torch_ms(torch, tdev, n, args.reps)
                print(f"torch {tdev} n={n}: {res['torch'][tdev][n]:.3f} ms", flush=True)
    for dev, rl in res["roofline"].items():      # a roofline the measurements beat is no bound:
        tdev = "cpu" if dev == "cpu" else "cuda"  # raise it to the fastest step's FLOP rate
        best = max(6.0 * n ** 3 / (min([res["numr"][dev][n]] + (
            [res["torch"][tdev][n]] if n in res["torch"].get(tdev, {}) else [])) * 1e-3) / 1e12
            for n in sizes)
        if best > rl["tflops"]:
            rl["tflops"], rl["note"] = best, "raised to the fastest measured step"
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)
    return res


def roofline_ms(n, tflops, tbps):
    return max(6.0 * n ** 3 / (tflops * 1e12), 40.0 * n * n / (tbps * 1e12)) * 1e3


def plot(paths, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = []
    for p in paths:
        with open(p) as f:
            runs.append(json.load(f))
    fig, axes = plt.subplots(1, len(runs), figsize=(6.5 * len(runs), 4.8), squeeze=False)
    for ax, r in zip(axes[0], runs):
        for dev, times in r["numr"].items():
            ns = sorted(int(k) for k in times)
            ax.plot(ns, [times[str(n)] for n in ns], "o-", label=f"numr {dev}")
            rl = r["roofline"][dev]
            ax.plot(ns, [roofline_ms(n, rl["tflops"], rl["tbps"]) for n in ns], ":",
                    label=f"roofline {dev} ({rl['tflops']:.2g} TFLOP/s, {rl['tbps']:.2g} TB/s)")
        for dev, times in r["torch"].items():
            ns = sorted(int(k) for k in times)
            ax.plot(ns, [times[str(n)] for n in ns], "s--", label=f"torch {dev}")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("n (x: n x n, w: n x n)")
        ax.set_ylabel("ms per forward + backward step")
        ax.set_title(f"fused Linear + GELU fwd + bwd, float32: {r['machine']} ({r['date']})",
                     fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--devices", default="cpu")
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--roofline", default="", help="device=TFLOPs:TBps,... (see the docstring)")
    ap.add_argument("--json", default=None)
    ap.add_argument("--plot", default=None, help="write a PNG from the JSON files given")
    ap.add_argument("files", nargs="*")
    a = ap.parse_args()
    if a.plot:
        return plot(a.files, a.plot)
    run(a)


if __name__ == "__main__":
    main()
