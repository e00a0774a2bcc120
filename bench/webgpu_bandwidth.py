"""Effective bandwidth of one-op webgpu kernels on large float32 tensors, fusion off and on.

    python bench/webgpu_bandwidth.py [--n 67108864] [--calls 20]

Per op: --calls calls with every output kept alive (so fusion skips none), first as a warm-up of
exactly that pattern (each new fused-chain shape compiles a pipeline, which would otherwise be
timed), then timed, closed by one read-back of one element; ms per call and TB/s counting one read
and one write of 4 bytes an element (x + x reads x once). Each call gets a new output buffer.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import numr_web as nr  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 26)
    ap.add_argument("--calls", type=int, default=20)
    a = ap.parse_args()
    be = nr.get_backend("webgpu")
    x = nr.tensor(np.random.default_rng(0).standard_normal(a.n).astype(np.float32), device="webgpu")
    ops = {"x * 2": lambda: x * 2, "x + x": lambda: x + x, "-x": lambda: -x,
           "x.exp()": lambda: x.exp(), "nr.tanh(x)": lambda: nr.tanh(x),
           "nr.gelu(x, approximate='tanh')": lambda: nr.gelu(x, approximate="tanh"),
           "nr.gelu(x)": lambda: nr.gelu(x)}
    print(f"adapter: {be.adapter.name}; n = {a.n} float32; {a.calls} calls per figure")
    print("| op | fusion off: ms / TB/s | fusion on: ms / TB/s |\n|---|---:|---:|")
    for name, fn in ops.items():
        cells = []
        for fuse in (False, True):
            be.fuse = fuse
            warm = [fn() for _ in range(a.calls)]
            warm[-1][0].item()
            del warm
            keep = []
            t0 = time.perf_counter()
            for _ in range(a.calls):
                keep.append(fn())
            keep[-1][0].item()
            ms = (time.perf_counter() - t0) * 1000 / a.calls
            cells.append(f"{ms:.3f} / {8 * a.n / ms / 1e9:.2f}")
            del keep
        print(f"| `{name}` | {cells[0]} | {cells[1]} |")


if __name__ == "__main__":
    main()
