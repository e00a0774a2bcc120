"""Fused causal attention, numr vs torch on the same GPU, side by side in one run: forward, and
forward + backward, for a char-GPT's shape and T = 256, 1024, 2048 at head dim 64 (float32).

    python bench/attention.py [--devices cuda,webgpu] [--reps 20] [--shapes gpt,1024] [--check]
                              [--dtype float32,float16] [--kernels]
                              [--tiles "auto;16x8x8;fwd=16x8x8,dq=16x8x8,dkv=16x8x4"] [--json out.json]
    python bench/attention.py --sweep [--dtype float32,float16] [--shapes 1024]

Times: medians of device-synchronised wall time per call (each call ends with a read of one element,
so asynchronous work is inside the timing on every device). torch: F.scaled_dot_product_attention
on CUDA (its default kernel choice), float32, TF32 off. --tiles times the webgpu kernels at each
NUMR_WEBGPU_ATTN_TILE value given (`;`-separated; launch_attention.py), to tune its tile table: a
value naming one kernel (`dq=16x8x4`) leaves the others on the table's choice, so the difference
to `auto` is that kernel's; with --kernels each webgpu row also has its kernels' device times in
one forward + backward (a timestamp around every dispatch). --sweep times the cuda backend's
attention kernels alone (CUDA events around each launch: forward, dq, dk/dv) for each tile shape
of SWEEP_TILES (float32: warps a block, rows a thread, tile columns) or SWEEP_TC_TILES (float16 on
tensor cores: warps a block, tile columns), to choose backends/cuda/attention.py's TILES /
TC_TILES after a measurement. TFLOP/s counts the causal half of the products: forward 2 GEMMs of
B*H*T*T/2*d multiply-adds, backward 5 (dq's kernel recomputes s and dp: 7 run). --check also compares numr's output and
gradients of the first batch element with torch float64 on the cpu: max |err| / (|want| + 1).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))

import numr_web as nr  # noqa: E402
from timing import median_ms, webgpu_dispatch_ms  # noqa: E402

SHAPES = {"gpt": (32, 4, 64, 32), "nanogpt": (64, 6, 256, 64), "256": (8, 16, 256, 64),
          "1024": (8, 16, 1024, 64), "2048": (8, 16, 2048, 64)}
SWEEP_TILES = [(4, 4, 64), (4, 4, 32), (2, 4, 64), (8, 4, 32), (8, 4, 64), (4, 8, 32),
               (4, 8, 64), (2, 8, 32), (4, 4, 128)]          # attention_tiled.cu (float32)
SWEEP_TC_TILES = [(4, 64), (4, 32), (2, 64), (8, 64), (8, 32), (4, 128)]   # attention_mma.cu


def _name(key):
    b, h, t, d = SHAPES[key]
    return f"{key if not key.isdigit() else 'T=' + key} {b}x{h}x{t}x{d}"


def _label(key, dtype):
    return _name(key) + ("" if dtype == "float32" else f" {dtype}")


def _flops(shape):
    """(forward, forward + backward) FLOPs of causal attention (the visible half of the scores)."""
    b, h, t, d = shape
    gemm = 2 * b * h * t * (t + 1) / 2 * d
    return 2 * gemm, 7 * gemm


def _data(shape, dtype="float32"):
    r = np.random.default_rng(0)
    return [r.normal(size=shape).astype(dtype) for _ in range(4)]      # q, k, v, dout


def _calls(lib, make, shape, sdpa, grad, no_grad, dtype="float32"):
    q, k, v, g = (make(a, i < 3) for i, a in enumerate(_data(shape, dtype)))

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


def bench_numr(device, shape, reps, tile=None, checked=False, dtype="float32", kernels=False):
    if tile is not None:
        nr.get_backend(device).attn_tile = tile
    fwd, fwd_bwd = _calls(nr, lambda a, rg: nr.tensor(a, device=device, requires_grad=rg), shape,
                          nr.scaled_dot_product_attention, nr.autograd.grad, nr.no_grad, dtype)
    res = {"fwd_ms": median_ms(fwd, reps, warmups=2), "fwd_bwd_ms": median_ms(fwd_bwd, reps, warmups=2)}
    if kernels and device == "webgpu":         # device ms of each kernel of one fwd + bwd
        res["kernel_ms"] = {}
        for name, ms in webgpu_dispatch_ms(fwd_bwd):
            k = name.split(".")[-1]
            res["kernel_ms"][k] = round(res["kernel_ms"].get(k, 0.0) + ms, 4)
    if checked and dtype == "float32":
        res["max_err"] = check(device, shape)
    return res


def bench_torch(shape, reps, dtype="float32"):
    import torch
    import torch.nn.functional as F
    torch.backends.cuda.matmul.allow_tf32 = False
    fwd, fwd_bwd = _calls(torch, lambda a, rg: torch.tensor(a, device="cuda", requires_grad=rg),
                          shape, F.scaled_dot_product_attention, torch.autograd.grad,
                          torch.no_grad, dtype)
    return {"fwd_ms": median_ms(fwd, reps, warmups=2), "fwd_bwd_ms": median_ms(fwd_bwd, reps, warmups=2)}


def _registers(fn):
    """'registers/local (spilled) bytes' a thread of a compiled kernel uses, as the driver's own
    ptxas built it (cuFuncGetAttribute), '?/?' where neither cupy nor the driver says."""
    f = getattr(fn, "kernel", fn)
    if hasattr(f, "num_regs"):
        return f"{f.num_regs}/{f.local_size_bytes}"
    local_size_bytes, num_regs = 3, 4                      # CUfunction_attribute
    try:
        from cupy_backends.cuda.api import driver
        return (f"{driver.funcGetAttribute(num_regs, f.ptr)}/"
                f"{driver.funcGetAttribute(local_size_bytes, f.ptr)}")
    except Exception as e:                                 # noqa: BLE001 (a figure, not a result)
        return f"?/? ({type(e).__name__})"


def sweep(shapes, reps, dtype):
    """The cuda backend's attention kernels alone, per tile shape: median ms of each kernel
    (forward, dq, dk/dv), timed with CUDA events around its launch."""
    import cupy as cp
    from numr_web.backends.cuda import attention as A
    be = nr.backends.get_backend("cuda")
    att = A.Attention(be)
    times, regs = {}, {}
    launcher = att._tiled_fn

    def timed(path, kernel, *args):                 # each launch between two events
        fn, threads, rows, smem = launcher(path, kernel, *args)
        regs[kernel] = _registers(fn)

        def run(*a, **kw):
            ev = cp.cuda.Event(), cp.cuda.Event()
            ev[0].record()
            fn(*a, **kw)
            ev[1].record()
            times.setdefault(kernel, []).append(ev)
        return run, threads, rows, smem
    att._tiled_fn = timed
    print(f"| shape ({dtype}, causal) | tile | forward ms | dq ms | dk, dv ms | backward ms "
          "| registers / local bytes (fwd, dq, dkv) |")
    print("|---|---|---:|---:|---:|---:|---|")
    for name, shape in shapes.items():
        r = np.random.default_rng(0)
        q, k, v, g = (cp.asarray(r.normal(size=shape).astype(dtype)) for _ in range(4))
        scale = shape[-1] ** -0.5
        for tile in (SWEEP_TC_TILES if dtype == "float16" else SWEEP_TILES):
            table = {kernel: {dm: tile for dm in A.TILED_DIMS} for kernel in A.KERNELS}
            if dtype == "float16":
                att.tc_tiles = table
            else:
                att.tiles = table
            path = att._tiled(be._ct[q.dtype.char], shape[-1], shape[-2], shape[-2])
            if path is None or path[0] != ("tc" if dtype == "float16" else "simt"):
                print(f"| {name} | {tile} | (does not fit) | | | | |")
                continue
            if any(t != tile for t in path[2].values()):     # halved to fit the device
                tile = path[2]
            for _ in range(2):                       # compile, warm up
                out, lse = att.forward(q, k, v, None, True, scale)
                att.backward(g, q, k, v, out, lse, None, True, scale)
            times.clear()
            for _ in range(reps):
                out, lse = att.forward(q, k, v, None, True, scale)
                att.backward(g, q, k, v, out, lse, None, True, scale)
            cp.cuda.get_current_stream().synchronize()
            ms = {kn: statistics.median(cp.cuda.get_elapsed_time(*ev) for ev in evs)
                  for kn, evs in times.items()}
            print(f"| {name} | {tile} | {ms['fwd']:.3f} | {ms['dq']:.3f} | {ms['dkv']:.3f} "
                  f"| {ms['dq'] + ms['dkv']:.3f} | {regs['fwd']}, {regs['dq']}, {regs['dkv']} |",
                  flush=True)


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
    p.add_argument("--kernels", action="store_true",
                   help="webgpu: each kernel's device time in one fwd + bwd (timestamp-query)")
    p.add_argument("--dtype", default="float32", help="float32, float16 or both: float32,float16")
    p.add_argument("--sweep", action="store_true", help="time the cuda tile shapes (numr only)")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    if a.sweep:
        for dtype in a.dtype.split(","):
            sweep({_name(k): SHAPES[k] for k in a.shapes.split(",")}, a.reps, dtype)
        return
    res = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "shapes": {}}
    runs = [(key, dt) for key in a.shapes.split(",") for dt in a.dtype.split(",")]
    for key, dtype in runs:
        shape = SHAPES[key]
        row = res["shapes"][_label(key, dtype)] = {}
        for dev in a.devices.split(","):
            tiles = a.tiles.split(";") if dev == "webgpu" and a.tiles else [None]
            if dev == "webgpu":
                row["webgpu_auto_tiles"] = auto_tiles(dev, shape)
            for tile in tiles:
                who = "numr_" + dev + (f"[{tile}]" if tile else "")
                try:
                    row[who] = bench_numr(dev, shape, a.reps, tile, a.check, dtype, a.kernels)
                except nr.NumrError as e:   # a tile that does not fit this device
                    row[who] = {"error": f"{type(e).__name__}: {e}"}
        try:
            row["torch_cuda"] = bench_torch(shape, a.reps, dtype)
        except Exception as e:          # no torch / no CUDA: numr's figures alone
            row["torch_cuda"] = {"error": f"{type(e).__name__}: {e}"}
        print(_label(key, dtype), json.dumps(row), flush=True)
    print("| shape | who | forward ms | forward + backward ms | x torch (fwd / fwd+bwd) "
          "| TFLOP/s (fwd / fwd+bwd) | max err |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for key, dtype in runs:
        row = res["shapes"][_label(key, dtype)]
        ff, fb = _flops(SHAPES[key])
        ref = row.get("torch_cuda", {})
        for who, r in row.items():
            if "fwd_ms" not in r:
                continue
            ratio = (f"{r['fwd_ms'] / ref['fwd_ms']:.2f} / {r['fwd_bwd_ms'] / ref['fwd_bwd_ms']:.2f}"
                     if "fwd_ms" in ref else "")
            err = f"{r['max_err']:.2g}" if "max_err" in r else ""
            print(f"| {_label(key, dtype)} | {who} | {r['fwd_ms']:.3f} | {r['fwd_bwd_ms']:.3f} | {ratio} | "
                  f"{ff / r['fwd_ms'] / 1e9:.3g} / {fb / r['fwd_bwd_ms'] / 1e9:.3g} | {err} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
