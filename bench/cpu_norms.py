"""Normalisation on the cpu device against torch in the same process, forward and backward, per
thread count: batch norm + relu at the CIFAR-shaped net's widest layer (128 x 64 x 32 x 32,
training) and layer norm at nanoGPT's rows (64 x 256 x 384). Median ms of --reps calls after one
warm-up; numr's threads through cpu_threads.configure (as NUMR_CPU_THREADS), torch's through
torch.set_num_threads.

    python bench/cpu_norms.py --threads 1,2 [--reps 7]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)   # numr_web from this checkout
sys.path.insert(1, str(Path(__file__).resolve().parent))

from timing import median_ms  # noqa: E402

BN_SHAPE, LN_SHAPE = (128, 64, 32, 32), (64, 256, 384)


def numr_rows(reps):
    import numpy as np
    import numr_web as nr
    from numr_web.nn import functional as F
    r = np.random.default_rng(0)
    rows = []
    x = nr.tensor(r.standard_normal(BN_SHAPE).astype(np.float32), requires_grad=True)
    w, b = nr.ones(BN_SHAPE[1], requires_grad=True), nr.zeros(BN_SHAPE[1], requires_grad=True)
    g = nr.tensor(r.standard_normal(BN_SHAPE).astype(np.float32))
    bn = lambda: F.batch_norm(x, None, None, w, b, training=True, activation="relu")  # noqa: E731
    y = bn()
    rows.append(median_ms(bn, reps))
    rows.append(median_ms(lambda: nr.grad(y, [x, w, b], g, retain_graph=True), reps))
    x = nr.tensor(r.standard_normal(LN_SHAPE).astype(np.float32), requires_grad=True)
    w, b = nr.ones(LN_SHAPE[-1], requires_grad=True), nr.zeros(LN_SHAPE[-1], requires_grad=True)
    g = nr.tensor(r.standard_normal(LN_SHAPE).astype(np.float32))
    ln = lambda: F.layer_norm(x, LN_SHAPE[-1:], w, b)  # noqa: E731
    y = ln()
    rows.append(median_ms(ln, reps))
    rows.append(median_ms(lambda: nr.grad(y, [x, w, b], g, retain_graph=True), reps))
    return rows


def torch_rows(reps):
    import torch
    F = torch.nn.functional
    rows = []
    x = torch.randn(BN_SHAPE, requires_grad=True)
    w = torch.ones(BN_SHAPE[1], requires_grad=True)
    b = torch.zeros(BN_SHAPE[1], requires_grad=True)
    g = torch.randn(BN_SHAPE)
    bn = lambda: F.relu(F.batch_norm(x, None, None, w, b, training=True))  # noqa: E731
    y = bn()
    rows.append(median_ms(bn, reps))
    rows.append(median_ms(lambda: torch.autograd.grad(y, [x, w, b], g, retain_graph=True), reps))
    x = torch.randn(LN_SHAPE, requires_grad=True)
    w = torch.ones(LN_SHAPE[-1], requires_grad=True)
    b = torch.zeros(LN_SHAPE[-1], requires_grad=True)
    g = torch.randn(LN_SHAPE)
    ln = lambda: F.layer_norm(x, LN_SHAPE[-1:], w, b)  # noqa: E731
    y = ln()
    rows.append(median_ms(ln, reps))
    rows.append(median_ms(lambda: torch.autograd.grad(y, [x, w, b], g, retain_graph=True), reps))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--reps", type=int, default=7)
    p.add_argument("--no-torch", action="store_true")
    a = p.parse_args(argv)
    from numr_web.backends import cpu_threads
    names = ["batch_norm + relu forward", "batch_norm + relu backward", "layer_norm forward",
             "layer_norm backward"]
    print(f"| op (ms) | threads | numr | torch | ratio |\n|---|---:|---:|---:|---:|")
    for t in (int(v) for v in a.threads.split(",")):
        cpu_threads.configure(threads=t)
        got = numr_rows(a.reps)
        ref = [None] * len(got)
        if not a.no_torch:
            import torch
            torch.set_num_threads(t)
            ref = torch_rows(a.reps)
        for name, n, r in zip(names, got, ref):
            tail = f"{r:.2f} | {n / r:.2f}x" if r else " | "
            print(f"| {name} | {t} | {n:.2f} | {tail} |")


if __name__ == "__main__":
    main()
