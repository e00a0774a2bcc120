"""The cpu's GEMMs and convolutions at the models' shapes, on every core: numpy's one call (BLAS
with its own threads), numr_web's cpu matmul (tiles on its worker threads, BLAS at one thread
each: cpu_gemm.py) and torch, side by side in one process; then what each of OpenBLAS's kernel
families gives one of those GEMMs, each in a fresh process (OPENBLAS_CORETYPE).

    python bench/cpu_gemm_shapes.py                          # nanoGPT's GEMMs at batch 16 and 64
    python bench/cpu_gemm_shapes.py --batches 16 --conv      # and the CIFAR net's convolutions
    python bench/cpu_gemm_shapes.py --coretypes Haswell,SkylakeX,SapphireRapids

GEMM rows are nanoGPT's (context 256, 384 dims, 6 heads): the forward's x @ W^T as NN, the
input gradient dY @ W as NT (W stored as the layer keeps it), the weight gradient X^T dY as TN,
and attention's per-head products (a batch of B * 6). A 'T' operand is a transposed view, as
the backward reads it. Convolutions: CIFAR's four 3x3 layers at batch 128, forward and backward
(the first layer without an input gradient). Like bench/models.py, it runs without
OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE unless --keep-blas-env (bench/blas_env.py).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)   # numr_web from this checkout
sys.path.insert(1, str(Path(__file__).resolve().parent))

import blas_env  # noqa: E402

blas_env.unset()                           # before numpy loads OpenBLAS

import numpy as np  # noqa: E402

from timing import median_ms as _median_ms  # noqa: E402

# Seconds to wait before each figure: after a threaded call OpenBLAS's idle threads spin for about
# 2^28 cycles (its THREAD_TIMEOUT), OpenMP's for its blocktime, taking the cores from whatever runs
# next; measured back to back, numr's tiles ran in numpy's spin window.
SETTLE_S = 0.5


def median_ms(step, reps):
    time.sleep(SETTLE_S)
    return _median_ms(step, reps)

PROBE = ("import numpy as np, time, threadpoolctl; a = np.random.rand({m}, {k}).astype(np.float32); "
         "b = np.random.rand({k}, {n}).astype(np.float32); a @ b; t = time.perf_counter(); "
         "[a @ b for _ in range(5)]; print(threadpoolctl.threadpool_info()[0].get('architecture'), "
         "(time.perf_counter() - t) / 5 * 1e3)")


def operand(shape, transposed):
    a = np.random.rand(*shape).astype(np.float32)
    return np.swapaxes(np.ascontiguousarray(np.swapaxes(a, -1, -2)), -1, -2) if transposed else a


def gemm_rows(batch):
    m = batch * 256
    return [((), m, 384, 1152, "NN"), ((), m, 384, 384, "NN"), ((), m, 384, 1536, "NN"),
            ((), m, 1536, 384, "NN"), ((), m, 1152, 384, "NT"), ((), m, 1536, 384, "NT"),
            ((), 384, m, 1536, "TN"), ((), 1536, m, 384, "TN"), ((), 1152, m, 384, "TN"),
            ((batch * 6,), 256, 64, 256, "NT"), ((batch * 6,), 256, 256, 64, "NN"),
            ((batch * 6,), 256, 256, 64, "TN")]


def gemms(nr, torch, batches, reps):
    print("| batch, m, k, n | layout | numpy one call ms | numr ms | torch ms | numpy GFLOP/s | "
          "numr GFLOP/s | torch GFLOP/s |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for b in batches:
        for bt, m, k, n, lay in gemm_rows(b):
            a, c = operand(bt + (m, k), lay[0] == "T"), operand(bt + (k, n), lay[1] == "T")
            na, nc = nr.tensor(a), nr.tensor(c)
            times = [median_ms(lambda: a @ c, reps), median_ms(lambda: nr.matmul(na, nc), reps)]
            if torch is not None:
                ta, tc = torch.from_numpy(a), torch.from_numpy(c)
                times.append(median_ms(lambda: ta @ tc, reps))
            flop = 2 * m * n * k * (bt[0] if bt else 1)
            cells = [f"{t:.2f}" for t in times] + [""] * (3 - len(times))
            rates = [f"{flop / t / 1e6:.0f}" for t in times] + [""] * (3 - len(times))
            print(f"| {bt[0] if bt else 1}, {m}, {k}, {n} | {lay} | " + " | ".join(cells + rates)
                  + " |", flush=True)


def convs(nr, torch, reps):
    print("\n| conv c -> o, HxW (batch 128, 3x3) | numr fwd+bwd ms | torch fwd+bwd ms | ratio | "
          "torch GFLOP/s |")
    print("|---|---:|---:|---:|---:|")
    for c, o, hw in [(3, 32, 32), (32, 64, 32), (64, 128, 16), (128, 256, 8)]:
        rng = np.random.default_rng(0)
        x = rng.standard_normal((128, c, hw, hw), dtype=np.float32)
        w = rng.standard_normal((o, c, 3, 3), dtype=np.float32) / 10
        g = rng.standard_normal((128, o, hw, hw), dtype=np.float32)
        bias = np.zeros(o, np.float32)
        dx = c > 3                             # the first layer's input needs no gradient
        ts = {}
        for name, lib, conv in [("numr", nr, lambda *t: nr.nn.functional.conv2d(*t, padding=1)),
                                ("torch", torch, lambda *t: torch.nn.functional.conv2d(*t, padding=1))]:
            if lib is None:
                continue
            mk = (lambda v, r: nr.tensor(v, requires_grad=r)) if name == "numr" else \
                (lambda v, r: torch.tensor(v, requires_grad=r))
            tx, tw, tb = mk(x, dx), mk(w, True), mk(bias, True)
            tg = nr.tensor(g) if name == "numr" else torch.tensor(g)

            def step():
                conv(tx, tw, tb).backward(tg)
                tx.grad = tw.grad = tb.grad = None
            ts[name] = median_ms(step, reps)
        flop = 2 * 128 * o * c * 9 * hw * hw * (3 if dx else 2)
        t = ts.get("torch")
        print(f"| {c} -> {o}, {hw}x{hw} | {ts['numr']:.1f} | " +
              (f"{t:.1f} | {ts['numr'] / t:.2f}x | {flop / t / 1e6:.0f} |" if t else " | | |"),
              flush=True)


def coretypes(names):
    print("\n| OPENBLAS_CORETYPE (fresh process) | kernels in use | 16384 x 384 x 1536 ms |")
    print("|---|---|---:|")
    for core in names:
        env = {k: v for k, v in os.environ.items() if k not in blas_env.VARS}
        if core:
            env["OPENBLAS_CORETYPE"] = core
        out = subprocess.run([sys.executable, "-c", PROBE.format(m=16384, k=384, n=1536)], env=env,
                             capture_output=True, text=True)
        arch, ms = (out.stdout.split() + ["?", "nan"])[:2] if out.returncode == 0 else ("error", "nan")
        print(f"| {core or '(unset)'} | {arch} | {float(ms):.2f} |", flush=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--batches", default="16,64", help="nanoGPT batch sizes for the GEMM rows")
    p.add_argument("--conv", action="store_true", help="the CIFAR net's convolutions too")
    p.add_argument("--coretypes", default=",Haswell,SkylakeX",
                   help="OpenBLAS kernel families to time one GEMM with ('' = its own choice)")
    p.add_argument("--reps", type=int, default=7, help="timed repetitions (median)")
    p.add_argument(blas_env.KEEP, action="store_true", help="keep OPENBLAS_CORETYPE / L2_SIZE")
    a = p.parse_args(argv)
    import numr_web as nr
    try:
        import torch
        torch.set_num_threads(os.cpu_count())
    except ImportError:
        torch = None
    print(f"# bench/cpu_gemm_shapes.py; {os.cpu_count()} CPUs; BLAS "
          f"{nr.backends.get_backend('cpu').info().get('blas', '?')}; {blas_env.note()}; torch "
          f"{getattr(torch, '__version__', 'absent')}\n", flush=True)
    gemms(nr, torch, [int(b) for b in a.batches.split(",") if b], a.reps)
    if a.conv:
        convs(nr, torch, max(3, a.reps // 2))
    if a.coretypes:
        coretypes(a.coretypes.split(","))


if __name__ == "__main__":
    main()
