"""Quick correctness check + kernel benchmarks of the webgpu backend on whatever adapter is here.

    python -m numr_web.backends.webgpu.selfcheck [--bench] [--torch] [--big]

Checks every activation (forward, derivatives, fused backward), matmul with both GEMM tiles, and the
reductions against numpy; --bench times the bandwidth-bound fused activation backward and the GEMM
(--big: the issue's sizes, 2^28 elements and 8192x4096x4096); --torch times torch on the same GPU.
Needs numpy (native only).
"""
from __future__ import annotations

import argparse
import time


def _sync(be, h):
    be.to_bytes(be.slice(h, tuple(0 for _ in h.shape)))


def check(be):
    import numpy as np
    from ...dtypes import float32
    from ...ops.activations import ACT
    from ..numpy_backend import NumpyBackend
    nb = NumpyBackend()
    rs = np.random.default_rng(0)
    up = lambda x: be.from_host(np.ascontiguousarray(x, dtype=np.float32), float32)  # noqa: E731
    x = np.concatenate([rs.uniform(-8, 8, 4000), [-1e4, -100, -88.5, 0, 88.5, 100, 1e4]]).astype(np.float32)
    worst = 0.0
    for name, row in ACT.items():
        for order in (0, 1, 2):
            got = be.to_numpy(be.activation(name, up(x), order))
            with np.errstate(all="ignore"):
                ref = row.fwd(np, x.astype(np.float64)) if order == 0 else \
                    (row.dz if order == 1 else row.d2)(np, x.astype(np.float64))
            assert np.isfinite(got).all(), (name, order)
            err = np.max(np.abs(got - ref) / (1e-6 + np.abs(ref)).clip(1e-3, None))
            worst = max(worst, err)
            assert err < 1e-4, (name, order, err)
    a, b, bias = rs.standard_normal((300, 200), np.float32), rs.standard_normal((200, 260), np.float32), \
        rs.standard_normal(260, dtype=np.float32)
    for tile in (64, 128):
        be.gemm_tile, old = tile, be.gemm_tile
        for name in ACT:
            y, z = be.gemm_bias_act(up(a), up(b), up(bias), name)
            ry, rz = nb.gemm_bias_act(a, b, bias, name)
            np.testing.assert_allclose(be.to_numpy(y), ry, rtol=1e-4, atol=1e-4)
            dy = rs.standard_normal(ry.shape, np.float32)
            dz, db = be.act_backward(name, up(dy), y, z, True)
            rdz, rdb = nb.act_backward(name, dy, ry, rz, True)
            np.testing.assert_allclose(be.to_numpy(dz), rdz, rtol=1e-4, atol=1e-4)
            np.testing.assert_allclose(be.to_numpy(db), rdb, rtol=1e-4, atol=1e-3)
        be.gemm_tile = old
    m = rs.standard_normal((37, 5000), np.float32)
    for op in ("sum", "mean", "max", "min"):
        for axes in ((0,), (1,), (0, 1)):
            np.testing.assert_allclose(be.to_numpy(be.reduce(op, up(m), axes, False)),
                                       nb.reduce(op, m, axes, False), rtol=1e-4, atol=1e-3)
    print(f"check: OK (activations worst rel. err {worst:.2e})")


def _time(fn, sync, reps):
    # three untimed calls: the pipeline is compiled and the pool holds every output buffer the
    # loop cycles through (a new 1 GiB buffer costs ~10 ms of allocation on the first use)
    for _ in range(3):
        sync(fn())
    t = time.perf_counter()
    for _ in range(reps):
        out = fn()
    sync(out)
    return (time.perf_counter() - t) / reps


def bench(be, big):
    from ...dtypes import float32
    n = (1 << 28) if big else (1 << 22)
    M, K, N = (8192, 4096, 4096) if big else (1024, 512, 512)
    dy = be.random((n,), float32, 1, "normal")
    z = be.random((n,), float32, 2, "normal")
    sync = lambda h=None: _sync(be, h if h is not None else dy)  # noqa: E731
    for _ in range(5):                                             # warm-up: clocks, pool, pipelines
        _time(lambda: be.unary("copy", dy), sync, 100)
    for name in ("gelu", "relu", "silu"):
        act_y = be.activation(name, z, 0)
        t = _time(lambda: be.act_backward(name, dy, act_y, z, False)[0], sync, 20 if big else 10)
        print(f"act_backward {name:5s} n=2^{n.bit_length() - 1}: {t * 1e3:8.3f} ms  "
              f"{3 * 4 * n / t / 1e12:6.2f} TB/s")
    t = _time(lambda: be.binary("add", dy, z), sync, 20)
    print(f"binary add          : {t * 1e3:8.3f} ms  {3 * 4 * n / t / 1e12:6.2f} TB/s")
    for cap in (65535 * 64, 65535, 16384):
        be.grid_cap = cap
        t = _time(lambda: be.unary("copy", dy), sync, 20)
        print(f"copy vec4 grid cap {cap:7d}: {t * 1e3:8.3f} ms  {2 * 4 * n / t / 1e12:6.2f} TB/s")
        t = _time(lambda: be.act_backward("gelu", dy, act_y, z, False)[0], sync, 20)
        print(f"act_backward gelu grid cap {cap:7d}: {t * 1e3:8.3f} ms  {3 * 4 * n / t / 1e12:6.2f} TB/s")
    del be.grid_cap
    odd = be.slice(dy, ((1, n, 1),))
    zodd = be.slice(z, ((1, n, 1),))
    t = _time(lambda: be.unary("copy", odd), sync, 20)
    print(f"copy scalar (offset 1): {t * 1e3:8.3f} ms  {2 * 4 * n / t / 1e12:6.2f} TB/s")
    t = _time(lambda: be.act_backward("gelu", odd, zodd, zodd, False)[0], sync, 20)
    print(f"act_backward gelu scalar (offset 1): {t * 1e3:8.3f} ms  {3 * 4 * n / t / 1e12:6.2f} TB/s")
    t = _time(lambda: be.activation("gelu", z, 0), sync, 20)
    print(f"gelu forward: {t * 1e3:8.3f} ms  {2 * 4 * n / t / 1e12:6.2f} TB/s")
    t = _time(lambda: be.activation("sigmoid", z, 0), sync, 20)
    print(f"sigmoid forward: {t * 1e3:8.3f} ms  {2 * 4 * n / t / 1e12:6.2f} TB/s")
    t = _time(lambda: be.unary("exp", z), sync, 20)
    print(f"exp: {t * 1e3:8.3f} ms  {2 * 4 * n / t / 1e12:6.2f} TB/s")
    a = be.random((M, K), float32, 3, "normal")
    w = be.random((K, N), float32, 4, "normal")
    bias = be.random((N,), float32, 5, "normal")
    at = be.permute(be.random((K, M), float32, 6, "normal"), (1, 0))
    wt = be.permute(be.random((N, K), float32, 7, "normal"), (1, 0))
    for tile in (64, 128):
        be.gemm_tile = tile
        for lab, x_, y_ in (("a@b", a, w), ("aT@b", at, w), ("a@bT", a, wt)):
            t = _time(lambda: be.matmul(x_, y_), sync, 10 if big else 3)
            print(f"matmul {lab:5s} {M}x{K}x{N} tile {tile}: {t * 1e3:8.3f} ms  "
                  f"{2 * M * N * K / t / 1e12:6.2f} TFLOP/s")
    be.gemm_tile = 64

    def layer():
        y, zz = be.gemm_bias_act(a, w, bias, "gelu")
        dz, db = be.act_backward("gelu", y, y, zz, True)
        dx = be.matmul(dz, be.permute(w, (1, 0)))
        dw = be.matmul(be.permute(a, (1, 0)), dz)
        return dw
    t = _time(layer, sync, 5 if big else 2)
    print(f"linear+gelu fwd+bwd {M}x{K}x{N}: {t * 1e3:8.3f} ms")
    t = _time(lambda: be.reduce("sum", be.reshape(dy, (n // 4096, 4096)), (0,), False), sync, 10)
    print(f"column sum (bias grad) {n // 4096}x4096: {t * 1e3:8.3f} ms  {4 * n / t / 1e12:6.2f} TB/s")


def bench_torch(big):
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    n = (1 << 28) if big else (1 << 22)
    M, K, N = (8192, 4096, 4096) if big else (1024, 512, 512)
    dev = "cuda"
    dy = torch.randn(n, device=dev)
    z = torch.randn(n, device=dev)

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
    a = torch.randn(M, K, device=dev)
    w = torch.randn(K, N, device=dev)
    t = tt(lambda: a @ w, 10)
    print(f"torch matmul fp32   : {t * 1e3:8.3f} ms  {2 * M * N * K / t / 1e12:6.2f} TFLOP/s")
    lin = torch.nn.Linear(K, N, device=dev)
    x = torch.randn(M, K, device=dev, requires_grad=True)

    def layer():
        y = torch.nn.functional.gelu(lin(x))
        y.backward(y)
    t = tt(layer, 5)
    print(f"torch linear+gelu fwd+bwd: {t * 1e3:8.3f} ms")


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--bench", action="store_true")
    p.add_argument("--big", action="store_true")
    p.add_argument("--torch", action="store_true")
    p.add_argument("--no-check", action="store_true")
    args = p.parse_args(argv)
    from .backend import WebGPUBackend
    be = WebGPUBackend()
    info = be.info()
    print("adapter:", info["adapter"], "|", info["backend"], "| features:", info["features"])
    print("limits:", {k: v for k, v in info["limits"].items() if k.startswith("maxStorage") or
                      k == "maxBufferSize"})
    if not args.no_check:
        check(be)
    if args.bench:
        bench(be, args.big)
    if args.torch:
        bench_torch(args.big)


if __name__ == "__main__":
    main()
