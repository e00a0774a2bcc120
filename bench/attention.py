"""Fused causal attention, numr vs torch on the same GPU, side by side in one run.

Forward, and forward + backward, for a char-GPT's shape, nanoGPT's and T = 256, 1024, 2048 at d = 64.

    python bench/attention.py [--devices cuda,webgpu] [--shapes 8x16x1024x64,...]
                              [--dtype float32,float16] [--reps 20] [--json out.json]
    python bench/attention.py --sweep [--dtype float32,float16] [--shapes 8x16x1024x64]

Times: medians of device-synchronised wall time per call (each call ends with a read of one element,
so asynchronous work is inside the timing on every device). torch: F.scaled_dot_product_attention
on CUDA (its default kernel choice: the memory-efficient kernel for float32, flash for float16),
TF32 off. --sweep times the cuda backend's attention kernels alone (CUDA events around each launch:
forward, dq, dk/dv) for each tile shape of SWEEP_TILES (float32: warps a block, rows a thread, tile
columns) or SWEEP_TC_TILES (float16 on tensor cores: warps a block, tile columns), set for all
three kernels at once, to choose attention.py's TILES / TC_TILES after a measurement.
"""
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

SHAPES = {"gpt 32x4x64x32": (32, 4, 64, 32), "nanogpt 64x6x256x64": (64, 6, 256, 64),
          "8x16x256x64": (8, 16, 256, 64), "8x16x1024x64": (8, 16, 1024, 64),
          "8x16x2048x64": (8, 16, 2048, 64)}
SWEEP_TILES = [(4, 4, 64), (4, 4, 32), (2, 4, 64), (8, 4, 32), (8, 4, 64), (4, 8, 32),
               (4, 8, 64), (2, 8, 32), (4, 4, 128)]          # attention_tiled.cu (float32)
SWEEP_TC_TILES = [(4, 64), (4, 32), (2, 64), (8, 64), (8, 32), (4, 128)]   # attention_mma.cu


def _median_ms(fn, reps):
    fn()
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts)


def bench_numr(device, shape, reps, dtype="float32"):
    r = np.random.default_rng(0)
    q, k, v = (nr.tensor(r.normal(size=shape).astype(dtype), device=device,
                         requires_grad=True) for _ in range(3))
    g = nr.tensor(r.normal(size=shape).astype(dtype), device=device)

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


def bench_torch(shape, reps, dtype="float32"):
    import torch
    import torch.nn.functional as F
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    r = np.random.default_rng(0)
    q, k, v = (torch.tensor(r.normal(size=shape).astype(dtype), device="cuda",
                            requires_grad=True) for _ in range(3))
    g = torch.tensor(r.normal(size=shape).astype(dtype), device="cuda")

    def fwd():
        with torch.no_grad():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        out[0, 0, 0, 0].item()

    def fwd_bwd():
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        dq, dk, dv = torch.autograd.grad([out], [q, k, v], [g])
        dv[0, 0, 0, 0].item()
    return {"fwd_ms": _median_ms(fwd, reps), "fwd_bwd_ms": _median_ms(fwd_bwd, reps)}


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
        f = getattr(fn, "kernel", fn)               # registers / local (spilled) bytes a thread
        regs[kernel] = f"{getattr(f, 'num_regs', '?')}/{getattr(f, 'local_size_bytes', '?')}"

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


def _shapes(text):
    if not text:
        return SHAPES
    out = {}
    for item in text.split(","):
        dims = tuple(int(n) for n in item.lower().split("x"))
        if len(dims) != 4:
            raise SystemExit(f"--shapes: {item!r} is not BxHxTxD")
        out[item] = dims
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", default="cuda")
    p.add_argument("--shapes", default=None, help="BxHxTxD,... (default: %s)" % ", ".join(SHAPES))
    p.add_argument("--dtype", default="float32", help="float32, float16 or both: float32,float16")
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--sweep", action="store_true", help="time the cuda tile shapes (numr only)")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    shapes = _shapes(a.shapes)
    dtypes = a.dtype.split(",")
    if set(dtypes) - {"float32", "float16"}:
        raise SystemExit(f"--dtype: float32 and/or float16, not {a.dtype!r}")
    if a.sweep:
        for dtype in dtypes:
            sweep(shapes if a.shapes else {"8x16x1024x64": SHAPES["8x16x1024x64"]}, a.reps,
                  dtype)
        return
    res = {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
           "runs": {}}
    for dtype in dtypes:
        rows = res["runs"][dtype] = {}
        for name, shape in shapes.items():
            row = rows[name] = {}
            for dev in a.devices.split(","):
                row["numr_" + dev] = bench_numr(dev, shape, a.reps, dtype)
            try:
                row["torch_cuda"] = bench_torch(shape, a.reps, dtype)
            except Exception as e:          # no torch / no CUDA: numr's figures alone
                row["torch_cuda"] = {"error": f"{type(e).__name__}: {e}"}
            print(dtype, name, json.dumps(row), flush=True)
    print("| shape (causal) | dtype | who | forward ms | forward + backward ms "
          "| vs torch (fwd / fwd+bwd) |")
    print("|---|---|---|---:|---:|---:|")
    for dtype, rows in res["runs"].items():
        for name, row in rows.items():
            t = row.get("torch_cuda", {})
            for who, r in row.items():
                if "fwd_ms" not in r:
                    continue
                ratio = ""
                if "fwd_ms" in t:
                    ratio = (f"{r['fwd_ms'] / t['fwd_ms']:.2f}x / "
                             f"{r['fwd_bwd_ms'] / t['fwd_bwd_ms']:.2f}x")
                print(f"| {name} | {dtype} | {who} | {r['fwd_ms']:.3f} | {r['fwd_bwd_ms']:.3f} "
                      f"| {ratio} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
