"""Bandwidth-bound kernels and the GEMM of the webgpu backend on whatever adapter is here, with torch
on the same GPU for comparison (--torch). Correctness is the tests' job (tests/test_webgpu_*.py).

    python bench/webgpu_kernels.py [--big] [--torch]

Times the fused activation backward (dz = dy * act'(saved)), add, copy under several workgroup
caps (the NUMR_WEBGPU_MAX_WORKGROUPS knob), the scalar (offset 1) path, forward activations, the
GEMM entries (the NUMR_WEBGPU_GEMM_TILE knob), a fused Linear + GELU forward + backward and a
bias-gradient column sum. --big: the sizes of the issue (2^28 elements, 8192x4096x4096).
Three untimed calls first (the pipeline is compiled, the pool holds every buffer the loop cycles
through); then the mean of `reps` calls ending in one synchronising 4-byte read-back.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from numr_web.backends.webgpu.backend import WebGPUBackend  # noqa: E402
from numr_web.dtypes import float32  # noqa: E402
from numr_web.ops.activations import ACT  # noqa: E402


def sync(be, h):
    be.to_bytes(be.slice(h, tuple(0 for _ in h.shape)))


def timed(be, fn, reps):
    for _ in range(3):
        sync(be, fn())
    t = time.perf_counter()
    for _ in range(reps):
        out = fn()
    sync(be, out)
    return (time.perf_counter() - t) / reps


def bench(big):
    be = WebGPUBackend()
    info = be.info()
    print("adapter:", info["adapter"], "|", info["backend"], "| features:", info["features"])
    n = (1 << 28) if big else (1 << 22)
    M, K, N = (8192, 4096, 4096) if big else (1024, 512, 512)
    dy = be.random((n,), float32, 1, "normal")
    z = be.random((n,), float32, 2, "normal")
    for _ in range(5):                                        # warm-up: clocks, pool, pipelines
        timed(be, lambda: be.unary("copy", dy), 100)
    for name in ("gelu", "relu", "silu"):
        y = be.activation(name, z, "fwd")
        s = y if ACT[name].saves == "y" else z
        t = timed(be, lambda: be.act_backward(name, dy, s)[0], 20 if big else 10)
        print(f"act_backward {name:5s} n=2^{n.bit_length() - 1}: {t * 1e3:8.3f} ms  "
              f"{3 * 4 * n / t / 1e12:6.2f} TB/s")
    t = timed(be, lambda: be.binary("add", dy, z), 20)
    print(f"binary add          : {t * 1e3:8.3f} ms  {3 * 4 * n / t / 1e12:6.2f} TB/s")
    for cap in (65535 * 64, 65535, 16384):
        bc = WebGPUBackend(max_workgroups=cap)
        t = timed(bc, lambda: bc.unary("copy", dy), 20)
        print(f"copy vec4, max_workgroups {cap:7d}: {t * 1e3:8.3f} ms  {2 * 4 * n / t / 1e12:6.2f} TB/s")
        t = timed(bc, lambda: bc.act_backward("gelu", dy, z)[0], 20)
        print(f"act_backward gelu, max_workgroups {cap:7d}: {t * 1e3:8.3f} ms  "
              f"{3 * 4 * n / t / 1e12:6.2f} TB/s")
    odd, zodd = be.slice(dy, ((1, n, 1),)), be.slice(z, ((1, n, 1),))
    t = timed(be, lambda: be.unary("copy", odd), 20)
    print(f"copy scalar (offset 1): {t * 1e3:8.3f} ms  {2 * 4 * n / t / 1e12:6.2f} TB/s")
    t = timed(be, lambda: be.act_backward("gelu", odd, zodd)[0], 20)
    print(f"act_backward gelu scalar (offset 1): {t * 1e3:8.3f} ms  {3 * 4 * n / t / 1e12:6.2f} TB/s")
    for name in ("gelu", "sigmoid"):
        t = timed(be, lambda: be.activation(name, z, "fwd"), 20)
        print(f"{name} forward: {t * 1e3:8.3f} ms  {2 * 4 * n / t / 1e12:6.2f} TB/s")
    t = timed(be, lambda: be.unary("exp", z), 20)
    print(f"exp: {t * 1e3:8.3f} ms  {2 * 4 * n / t / 1e12:6.2f} TB/s")
    a = be.random((M, K), float32, 3, "normal")
    w = be.random((K, N), float32, 4, "normal")
    bias = be.random((N,), float32, 5, "normal")
    at = be.permute(be.random((K, M), float32, 6, "normal"), (1, 0))
    wt = be.permute(be.random((N, K), float32, 7, "normal"), (1, 0))
    for tile in ("64", "128", "v4w"):
        bt = WebGPUBackend(gemm_tile=tile)
        for lab, x_, y_ in (("a@b", a, w), ("aT@b", at, w), ("a@bT", a, wt)):
            t = timed(bt, lambda: bt.matmul(x_, y_), 10 if big else 3)
            print(f"matmul {lab:5s} {M}x{K}x{N} tile {tile}: {t * 1e3:8.3f} ms  "
                  f"{2 * M * N * K / t / 1e12:6.2f} TFLOP/s")

    def layer():
        y, zz = be.gemm_bias_act(a, w, bias, "gelu")
        dz, db = be.act_backward("gelu", y, zz, y, True)
        be.matmul(dz, be.permute(w, (1, 0)))
        return be.matmul(be.permute(a, (1, 0)), dz)
    t = timed(be, layer, 5 if big else 2)
    print(f"linear+gelu fwd+bwd {M}x{K}x{N}: {t * 1e3:8.3f} ms")
    t = timed(be, lambda: be.reduce("sum", be.reshape(dy, (n // 4096, 4096)), (0,), False), 10)
    print(f"column sum (bias grad) {n // 4096}x4096: {t * 1e3:8.3f} ms  {4 * n / t / 1e12:6.2f} TB/s")


def bench_torch(big):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    n = (1 << 28) if big else (1 << 22)
    M, K, N = (8192, 4096, 4096) if big else (1024, 512, 512)
    dy = torch.randn(n, device="cuda")
    z = torch.randn(n, device="cuda")

    def tt(fn, reps=20):
        fn()
        torch.cuda.synchronize()
        t = time.perf_counter()
        for _ in range(reps):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t) / reps
    t = tt(lambda: torch.ops.aten.gelu_backward(dy, z))
    print(f"torch gelu_backward : {t * 1e3:8.3f} ms  {3 * 4 * n / t / 1e12:6.2f} TB/s")
    a = torch.randn(M, K, device="cuda")
    w = torch.randn(K, N, device="cuda")
    t = tt(lambda: a @ w, 10)
    print(f"torch matmul fp32   : {t * 1e3:8.3f} ms  {2 * M * N * K / t / 1e12:6.2f} TFLOP/s")
    lin = torch.nn.Linear(K, N, device="cuda")
    x = torch.randn(M, K, device="cuda", requires_grad=True)

    def layer():
        y = torch.nn.functional.gelu(lin(x))
        y.backward(y)
    t = tt(layer, 5)
    print(f"torch linear+gelu fwd+bwd: {t * 1e3:8.3f} ms")


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--big", action="store_true")
    p.add_argument("--torch", action="store_true")
    args = p.parse_args(argv)
    bench(args.big)
    if args.torch:
        bench_torch(args.big)


if __name__ == "__main__":
    main()
