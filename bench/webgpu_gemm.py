"""fp32 GEMM kernels of the webgpu backend side by side, in one process on one adapter.

    python bench/webgpu_gemm.py [--m 8192 --n 4096 --k 4096] [--tiles 64,128,v4,v4w] [--rounds 3]
                                [--check 1024]

For each GEMM entry (the values of NUMR_WEBGPU_GEMM_TILE: 64 -> gemm, 128 -> gemm_big, v4 / v4w ->
gemm_v4; switched through the backend's `gemm_tile` knob, no restart) it times `be.matmul` of an
M x K by K x N float32 product: 2 warm-up calls, then per round 10 launches back to back and one
synchronising read-back of 4 bytes of the last output; the wall time of the round divided by 10 is
the time per GEMM (the sync is included, amortised over the 10 launches; nothing is subtracted).
It then checks max |err| of a --check^3 product on the same entry against numpy float64, and prints
a markdown table. The adapter is the backend's default (native wgpu, power preference
high-performance).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

from numr_web.backends.webgpu.backend import WebGPUBackend  # noqa: E402
from numr_web.dtypes import float32  # noqa: E402

ITERS = 10
WARMUP = 2
SHAPE = {64: "64x64, 4x4", 128: "128x128, 8x8", "v4": "128x64, 8x4, vec4", "v4w": "128x128, 8x8, vec4"}


def log(*a):
    print(*a, flush=True)


def sync(be, h):
    be.to_bytes(be.slice(h, tuple(0 for _ in h.shape)))


def entry_of(be, fn):
    """fn()'s result and the GEMM entry it dispatched (from the backend's dispatch counters)."""
    before = be.info()["dispatches"]
    out = fn()
    ran = [k for k, v in be.info()["dispatches"].items() if v != before.get(k, 0)]
    return out, ",".join(k.split(".", 1)[1] for k in ran if k.startswith("matmul.")) or "?"


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--m", type=int, default=8192)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--tiles", default="64,128,v4,v4w", help="comma-separated NUMR_WEBGPU_GEMM_TILE values")
    p.add_argument("--rounds", type=int, default=3, help="timed rounds per entry")
    p.add_argument("--iters", type=int, default=ITERS,
                   help="GEMM launches per round; one read-back per round (its latency is amortised)")
    p.add_argument("--check", type=int, default=1024, help="size of the cubic accuracy check")
    args = p.parse_args(argv)
    tiles = [int(t) if t.isdigit() else t for t in args.tiles.split(",") if t]
    t_start = time.perf_counter()

    be = WebGPUBackend()
    info = be.info()
    log(f"adapter: {info.get('adapter')} | {info.get('backend')}")
    M, N, K = args.m, args.n, args.k
    flop = 2.0 * M * N * K
    a = be.random((M, K), float32, 3, "normal")
    b = be.random((K, N), float32, 4, "normal")
    sync(be, b)
    rs = np.random.default_rng(0)
    c = args.check
    ca = rs.standard_normal((c, c)).astype(np.float32)
    cb = rs.standard_normal((c, c)).astype(np.float32)
    ref = ca.astype(np.float64) @ cb.astype(np.float64)
    ha, hb = be.from_host(ca, float32), be.from_host(cb, float32)
    log(f"GEMM {M}x{K}x{N} fp32, entries {tiles}, {args.rounds} rounds x {args.iters} "
        f"(setup {time.perf_counter() - t_start:.1f} s)")

    rows = []
    for tile in tiles:
        be.gemm_tile = tile
        t0 = time.perf_counter()
        for _ in range(WARMUP):
            out, entry = entry_of(be, lambda: be.matmul(a, b))
            sync(be, out)
        log(f"[{tile}] entry {entry}: warm-up {time.perf_counter() - t0:.2f} s")
        times = []
        for r in range(args.rounds):
            t0 = time.perf_counter()
            for _ in range(args.iters):
                out = be.matmul(a, b)
            sync(be, out)
            dt = (time.perf_counter() - t0) / args.iters
            times.append(dt)
            log(f"[{tile}] round {r + 1}: {dt * 1e3:8.3f} ms/GEMM  {flop / dt / 1e12:6.2f} TFLOP/s")
        del out
        got = be.to_numpy(be.matmul(ha, hb))
        err = float(np.max(np.abs(got - ref)))
        log(f"[{tile}] max |err| {c}^3 vs float64: {err:.3e}")
        best, med = min(times), statistics.median(times)
        rows.append((tile, entry, best, med, err))

    log("")
    log(f"GEMM {M}x{K}x{N} fp32 on {info.get('adapter')} ({info.get('backend')}), "
        f"{args.iters} launches + one 4-byte read-back per round, {args.rounds} rounds")
    log("")
    log(f"| NUMR_WEBGPU_GEMM_TILE | entry | tile, per invocation | best ms | best TFLOP/s | "
        f"median TFLOP/s | max abs err {c}^3 |")
    log("|---|---|---|---|---|---|---|")
    for tile, entry, best, med, err in rows:
        log(f"| {tile} | {entry} | {SHAPE.get(tile, '?')} | {best * 1e3:.3f} | {flop / best / 1e12:.2f} | "
            f"{flop / med / 1e12:.2f} | {err:.2e} |")
    log(f"\ntotal {time.perf_counter() - t_start:.1f} s")


if __name__ == "__main__":
    main()
