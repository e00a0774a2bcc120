"""Bandwidth-bound kernels and the GEMM of the webgpu backend on whatever adapter is here, with torch
on the same GPU for comparison (--torch). Correctness is the tests' job (tests/test_webgpu_*.py).

    python bench/webgpu_kernels.py [--big] [--torch]

Times the fused activation backward (dz = dy * act'(saved)), add, copy under several workgroup
caps (the NUMR_WEBGPU_MAX_WORKGROUPS knob), the scalar (offset 1) path, forward activations, the
GEMM entries (the NUMR_WEBGPU_GEMM_TILE knob), a fused Linear + GELU forward + backward and a
bias-gradient column sum. --big: the sizes of the issue (2^28 elements, 8192x4096x4096).
The nn kernels (--nn runs only those): layer norm forward / backward, fused attention forward /
backward (a char-GPT's shape and a longer one), the embedding backward (scatter_add of a broadcast
1-D index: the segmented reduction), gather, im2col / col2im of a small CNN.
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


def bench_nn(big):
    import numpy as np
    from numr_web.dtypes import int32
    be = WebGPUBackend()
    rng = np.random.default_rng(0)
    rows, c = (65536, 768) if big else (8192, 384)
    x = be.random((rows, c), float32, 1, "normal")
    w = be.random((c,), float32, 2, "normal")
    t = timed(be, lambda: be.layer_norm(x, w, w, 1, 1e-5, False)[0], 10)
    print(f"layer_norm {rows}x{c}: {t * 1e3:8.3f} ms  {2 * 4 * rows * c / t / 1e12:6.2f} TB/s")
    y, mean, rstd = be.layer_norm(x, w, w, 1, 1e-5, False)
    t = timed(be, lambda: be.layer_norm_backward(x, x, w, mean, rstd, 1, False)[0], 10)
    print(f"layer_norm backward {rows}x{c}: {t * 1e3:8.3f} ms")
    for B, H, T, D in ((32, 4, 64, 32), (16, 6, 256, 64)) + (((8, 16, 1024, 128),) if big else ()):
        q, k, v = (be.random((B, H, T, D), float32, s, "normal") for s in (3, 4, 5))
        t = timed(be, lambda: be.attention(q, k, v, None, True, D ** -0.5)[0], 5)
        flops = 2 * 2 * B * H * T * T * D / 2                  # causal: half the scores
        print(f"attention causal {B}x{H}x{T}x{D}: {t * 1e3:8.3f} ms  {flops / t / 1e12:6.2f} TFLOP/s")
        out, lse = be.attention(q, k, v, None, True, D ** -0.5)
        t = timed(be, lambda: be.attention_backward(q, q, k, v, out, lse, None, True,
                                                    D ** -0.5)[0], 3)
        print(f"attention backward {B}x{H}x{T}x{D}: {t * 1e3:8.3f} ms  "
              f"{2.5 * flops / t / 1e12:6.2f} TFLOP/s")
    for V, n, dim in ((65, 2048, 128), (256, 8192, 384)):
        ids = be.from_host(rng.integers(0, V, n).astype(np.int32), int32)
        index = be.expand(be.reshape(ids, (n, 1)), (n, dim))
        g = be.random((n, dim), float32, 6, "normal")
        t = timed(be, lambda: be.scatter_add((V, dim), 0, index, g), 5)
        print(f"embedding backward (scatter_add) V={V} n={n} dim={dim}: {t * 1e3:8.3f} ms")
        table = be.random((V, dim), float32, 7, "normal")
        t = timed(be, lambda: be.gather(table, 0, index), 5)
        print(f"embedding forward (gather) V={V} n={n} dim={dim}: {t * 1e3:8.3f} ms  "
              f"{2 * 4 * n * dim / t / 1e12:6.2f} TB/s")
    N = 256 if big else 64
    img = be.random((N, 16, 28, 28), float32, 8, "normal")
    args = ((3, 3), (1, 1), (1, 1), (1, 1))
    t = timed(be, lambda: be.im2col(img, *args), 5)
    print(f"im2col {N}x16x28x28 3x3: {t * 1e3:8.3f} ms")
    cols = be.im2col(img, *args)
    t = timed(be, lambda: be.col2im(cols, img.shape, *args), 5)
    print(f"col2im {N}x16x28x28 3x3: {t * 1e3:8.3f} ms")


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
    p.add_argument("--nn", action="store_true", help="only the nn kernels")
    args = p.parse_args(argv)
    if not args.nn:
        bench(args.big)
    bench_nn(args.big)
    if args.torch:
        bench_torch(args.big)


if __name__ == "__main__":
    main()
