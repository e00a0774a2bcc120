"""Fused causal attention, numr vs torch on the same GPU, side by side in one run: forward, and
forward + backward, for a char-GPT's shape and a long-sequence shape (float32).

    python bench/attention.py [--devices cuda,webgpu] [--reps 20] [--json out.json]

Times: medians of device-synchronised wall time per call (each call ends with a read of one element,
so asynchronous work is inside the timing on every device). torch: F.scaled_dot_product_attention
on CUDA (its default kernel choice), float32, TF32 off.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numr_web as nr  # noqa: E402

SHAPES = {"gpt 32x4x64x32": (32, 4, 64, 32), "long 8x16x1024x64": (8, 16, 1024, 64)}


def _median_ms(fn, reps):
    fn()
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def bench_numr(device, shape, reps):
    r = np.random.default_rng(0)
    q, k, v = (nr.tensor(r.normal(size=shape).astype(np.float32), device=device,
                         requires_grad=True) for _ in range(3))
    g = nr.tensor(r.normal(size=shape).astype(np.float32), device=device)

    def fwd():
        with nr.no_grad():
            out = nr.scaled_dot_product_attention(q, k, v, is_causal=True)
        out[0, 0, 0, 0].item()

    def fwd_bwd():
        out = nr.scaled_dot_product_attention(q, k, v, is_causal=True)
        (dq, dk, dv) = nr.autograd.grad([out], [q, k, v], [g])
        dv[0, 0, 0, 0].item()
    res = {"fwd_ms": _median_ms(fwd, reps), "fwd_bwd_ms": _median_ms(fwd_bwd, reps)}
    return res


def bench_torch(shape, reps):
    import torch
    import torch.nn.functional as F
    torch.backends.cuda.matmul.allow_tf32 = False
    r = np.random.default_rng(0)
    q, k, v = (torch.tensor(r.normal(size=shape).astype(np.float32), device="cuda",
                            requires_grad=True) for _ in range(3))
    g = torch.tensor(r.normal(size=shape).astype(np.float32), device="cuda")

    def fwd():
        with torch.no_grad():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out[0, 0, 0, 0].item()

    def fwd_bwd():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        dq, dk, dv = torch.autograd.grad([out], [q, k, v], [g])
        dv[0, 0, 0, 0].item()
    return {"fwd_ms": _median_ms(fwd, reps), "fwd_bwd_ms": _median_ms(fwd_bwd, reps)}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", default="cuda")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--json", default=None)
    a = p.parse_args()
    res = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "shapes": {}}
    for name, shape in SHAPES.items():
        row = res["shapes"][name] = {}
        for dev in a.devices.split(","):
            row["numr_" + dev] = bench_numr(dev, shape, a.reps)
        try:
            row["torch_cuda"] = bench_torch(shape, a.reps)
        except Exception as e:          # no torch / no CUDA: numr's figures alone
            row["torch_cuda"] = {"error": f"{type(e).__name__}: {e}"}
        print(name, json.dumps(row), flush=True)
    print("| shape | who | forward ms | forward + backward ms |")
    print("|---|---|---:|---:|")
    for name, row in res["shapes"].items():
        for who, r in row.items():
            if "fwd_ms" in r:
                print(f"| {name} | {who} | {r['fwd_ms']:.3f} | {r['fwd_bwd_ms']:.3f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
