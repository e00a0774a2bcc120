"""Fused causal attention, numr vs torch on the same GPU, side by side in one run: forward, and
forward + backward, for a char-GPT's shape and T = 256, 1024, 2048 at head dim 64 (float32).

    python bench/attention.py [--devices cuda,webgpu] [--reps 20] [--shapes gpt,1024] [--check]
                              [--tiles "auto;16x8x8;fwd=16x8x8,dq=16x8x8,dkv=16x8x4"] [--json out.json]

Times: medians of device-synchronised wall time per call (each call ends with a read of one element,
so asynchronous work is inside the timing on every device). torch: F.scaled_dot_product_attention
on CUDA (its default kernel choice), float32, TF32 off. --tiles times the webgpu kernels at each
NUMR_WEBGPU_ATTN_TILE value given (`;`-separated; launch_attention.py), to tune its tile table: a
value naming one kernel (`dq=16x8x4`) leaves the others on the table's choice, so the difference
to `auto` is that kernel's.
TFLOP/s counts the causal half of the products: forward 2 GEMMs of B*H*T*T/2*d multiply-adds,
backward 5 (dq's kernel recomputes s and dp: 7 run). --check also compares numr's output and
gradients of the first batch element with torch float64 on the cpu: max |err| / (|want| + 1).
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

SHAPES = {"gpt": (32, 4, 64, 32), "256": (8, 16, 256, 64), "1024": (8, 16, 1024, 64),
          "2048": (8, 16, 2048, 64)}


def _name(key):
    b, h, t, d = SHAPES[key]
    return f"{'gpt' if key == 'gpt' else 'T=' + key} {b}x{h}x{t}x{d}"


def _flops(shape):
    """(forward, forward + backward) FLOPs of causal attention (the visible half of the scores)."""
    b, h, t, d = shape
    gemm = 2 * b * h * t * (t + 1) / 2 * d
    return 2 * gemm, 7 * gemm


def _median_ms(fn, reps):
    fn()
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def _data(shape):
    r = np.random.default_rng(0)
    return [r.normal(size=shape).astype(np.float32) for _ in range(4)]      # q, k, v, dout


def _calls(lib, make, shape, sdpa, grad, no_grad):
    q, k, v, g = (make(a, i < 3) for i, a in enumerate(_data(shape)))

    def fwd():
        with no_grad():
            out = sdpa(q, k, v, is_causal=True)
        out[0, 0, 0, 0].item()

    def fwd_bwd():
        out = sdpa(q, k, v, is_causal=True)
        dq, dk, dv = grad([out], [q, k, v], [g])
        dv[0, 0, 0, 0].item()
    return fwd, fwd_bwd


def check(device, shape):
    """max |err| / (|want| + 1) of numr's out, dq, dk, dv for batch element 0 against torch's
    float64 on the cpu (the batch elements are independent)."""
    import torch
    import torch.nn.functional as F
    q, k, v, g = _data(shape)
    xs = [nr.tensor(a, device=device, requires_grad=True) for a in (q, k, v)]
    out = nr.scaled_dot_product_attention(*xs, is_causal=True)
    got = [out[:1].numpy()] + [t[:1].numpy() for t in nr.autograd.grad([out], xs, [nr.tensor(
        g, device=device)])]
    ts = [torch.tensor(a[:1], dtype=torch.float64, requires_grad=True) for a in (q, k, v)]
    ref = F.scaled_dot_product_attention(*ts, is_causal=True)
    want = [ref.detach()] + list(torch.autograd.grad([ref], ts, [torch.tensor(g[:1]).double()]))
    return max(float(np.max(np.abs(x - w.numpy()) / (np.abs(w.numpy()) + 1)))
               for x, w in zip(got, want))


def bench_numr(device, shape, reps, tile=None, checked=False):
    if tile is not None:
        nr.get_backend(device).attn_tile = tile
    fwd, fwd_bwd = _calls(nr, lambda a, rg: nr.tensor(a, device=device, requires_grad=rg), shape,
                          nr.scaled_dot_product_attention, nr.autograd.grad, nr.no_grad)
    res = {"fwd_ms": _median_ms(fwd, reps), "fwd_bwd_ms": _median_ms(fwd_bwd, reps)}
    if checked:
        res["max_err"] = check(device, shape)
    return res


def bench_torch(shape, reps):
    import torch
    import torch.nn.functional as F
    torch.backends.cuda.matmul.allow_tf32 = False
    fwd, fwd_bwd = _calls(torch, lambda a, rg: torch.tensor(a, device="cuda", requires_grad=rg),
                          shape, F.scaled_dot_product_attention, torch.autograd.grad,
                          torch.no_grad)
    return {"fwd_ms": _median_ms(fwd, reps), "fwd_bwd_ms": _median_ms(fwd_bwd, reps)}


def auto_tiles(device, shape):
    """{kernel: "RxLxS"} the webgpu tile table picks on this device at `shape`'s head dim and
    sequence length."""
    from numr_web.backends.webgpu import launch_attention as la
    d4 = -(-shape[-1] // 4)
    lim = nr.get_backend(device).adapter.limits
    return {k: "x".join(str(la.tiles(k, d4, d4, lim, cols=shape[-2])[n])
                        for n in ("NRG", "NL", "SK")) for k in la.KINDS}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", default="cuda")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--shapes", default=",".join(SHAPES), help=f"of {', '.join(SHAPES)}")
    p.add_argument("--tiles", default=None, help="webgpu: NUMR_WEBGPU_ATTN_TILE values, ;-separated")
    p.add_argument("--check", action="store_true", help="numr's errors against torch float64")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    res = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "shapes": {}}
    for key in a.shapes.split(","):
        shape = SHAPES[key]
        row = res["shapes"][_name(key)] = {}
        for dev in a.devices.split(","):
            tiles = a.tiles.split(";") if dev == "webgpu" and a.tiles else [None]
            if dev == "webgpu":
                row["webgpu_auto_tiles"] = auto_tiles(dev, shape)
            for tile in tiles:
                who = "numr_" + dev + (f"[{tile}]" if tile else "")
                try:
                    row[who] = bench_numr(dev, shape, a.reps, tile, a.check)
                except nr.NumrError as e:   # a tile that does not fit this device
                    row[who] = {"error": f"{type(e).__name__}: {e}"}
        try:
            row["torch_cuda"] = bench_torch(shape, a.reps)
        except Exception as e:          # no torch / no CUDA: numr's figures alone
            row["torch_cuda"] = {"error": f"{type(e).__name__}: {e}"}
        print(_name(key), json.dumps(row), flush=True)
    print("| shape | who | forward ms | forward + backward ms | x torch (fwd / fwd+bwd) "
          "| TFLOP/s (fwd / fwd+bwd) | max err |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for key in a.shapes.split(","):
        row = res["shapes"][_name(key)]
        ff, fb = _flops(SHAPES[key])
        ref = row.get("torch_cuda", {})
        for who, r in row.items():
            if "fwd_ms" not in r:
                continue
            ratio = (f"{r['fwd_ms'] / ref['fwd_ms']:.2f} / {r['fwd_bwd_ms'] / ref['fwd_bwd_ms']:.2f}"
                     if "fwd_ms" in ref else "")
            err = f"{r['max_err']:.2g}" if "max_err" in r else ""
            print(f"| {_name(key)} | {who} | {r['fwd_ms']:.3f} | {r['fwd_bwd_ms']:.3f} | {ratio} | "
                  f"{ff / r['fwd_ms'] / 1e9:.3g} / {fb / r['fwd_bwd_ms'] / 1e9:.3g} | {err} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
