"""webgpu performance against torch on the same GPU, in one process and one command:

    python bench/webgpu_perf.py [--m 8192 --n 4096 --k 4096] [--tiles 64,128,v4,v4w,sg] [--reps 5]
                                [--linear-tiles auto,v4w] [--skip-linear] [--epilogues]

1. fp32 GEMM M x K by K x N per GEMM entry (the NUMR_WEBGPU_GEMM_TILE values, switched through the
   backend's `gemm_tile` knob), TFLOP/s, against torch.matmul (cuBLAS) fp32 with TF32 off; also the
   float16 GEMM (f16 storage, f32 accumulation) on the default ("auto") entry where the adapter
   has shader-f16, against torch fp16 (tensor cores: not a like-for-like rate, printed for scale);
2. Linear + bias + GELU forward + backward (x: M x K, w: K x N) through the public API on webgpu in
   float32 and float16, against torch fp32 (and fp16) on CUDA;
3. with --epilogues: a float32 GEMM + bias + each activation, the activation in the GEMM's epilogue
   against the activation as its own pass after the GEMM.
Timing: warm-up, then per round `--iters` launches back to back closed by one small synchronising
read-back (webgpu) / torch.cuda.synchronize(); the time per call is the round's wall time divided
by --iters; the median of --reps rounds is reported. torch is skipped when it sees no CUDA device.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

# numr_web from this checkout
sys.path[0] = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

import numr_web as nr  # noqa: E402
from numr_web.backends.webgpu.backend import WebGPUBackend  # noqa: E402
from numr_web.dtypes import float16, float32  # noqa: E402


def log(*a):
    print(*a, flush=True)


def timed(fn, sync, iters, reps):
    fn()
    sync()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        ts.append((time.perf_counter() - t0) / iters)
    return statistics.median(ts)


def torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def gemm_rows(be, torch, M, N, K, tiles, iters, reps):
    flop = 2.0 * M * N * K
    rows = []
    for dt in (float32, float16):
        if dt is float16 and not be.f16:
            continue
        a = be.random((M, K), dt, 3, "normal")
        b = be.random((K, N), dt, 4, "normal")
        for tile in (tiles if dt is float32 else ["auto"] + [t for t in tiles if t == "sg"]):
            be.gemm_tile = tile
            before = dict(be.d.counts)
            out = [be.matmul(a, b)]
            ran = ",".join(k.split(".", 1)[1] for k, v in be.d.counts.items()
                           if v != before.get(k, 0) and k.startswith("matmul"))

            def sync():
                be.to_bytes(be.slice(out[0], ((0, 1, 1), (0, 1, 1))))

            def run():
                out[0] = be.matmul(a, b)
            t = timed(run, sync, iters, reps)
            rows.append((dt.name, tile, ran, t, flop / t / 1e12))
            log(f"GEMM {dt.name} tile {tile} ({ran}): {t * 1e3:.3f} ms, {flop / t / 1e12:.2f} TFLOP/s")
        be.gemm_tile = "auto"
        a = b = None                     # free the GPU memory before the next dtype
    if torch is not None:
        for tdt in (torch.float32, torch.float16):
            ta = torch.randn(M, K, device="cuda", dtype=tdt)
            tb = torch.randn(K, N, device="cuda", dtype=tdt)
            t = timed(lambda: torch.matmul(ta, tb), torch.cuda.synchronize, iters, reps)
            name = str(tdt).split(".")[1]
            rows.append((name, "torch", "cuBLAS", t, flop / t / 1e12))
            log(f"GEMM {name} torch.matmul: {t * 1e3:.3f} ms, {flop / t / 1e12:.2f} TFLOP/s")
            ta = tb = None
    return rows


def linear_rows(be, torch, M, N, K, iters, reps, tiles):
    rows = []
    for dt, tile in [(d, t) for d in ("float32", "float16") for t in tiles]:
        if dt == "float16" and not be.f16:
            continue
        be.gemm_tile = tile
        x = nr.randn((M, K), seed=0, device="webgpu").astype(dt).requires_grad_()
        w = (nr.randn((K, N), seed=1, device="webgpu") * 0.02).astype(dt).detach().requires_grad_()
        b = nr.zeros(N, device="webgpu", dtype=dt, requires_grad=True)
        dy = nr.randn((M, N), seed=2, device="webgpu").astype(dt)

        def step():
            x.grad = w.grad = b.grad = None
            nr.matmul_bias_activation(x, w, b, "gelu").backward(dy)

        def sync():
            be.to_bytes(be.slice(w.grad._data, ((0, 1, 1), (0, 1, 1))))
        t = timed(step, sync, 1, reps)
        who = "webgpu" if tile == "auto" else f"webgpu tile {tile}"
        rows.append((dt, who, t))
        log(f"Linear+GELU fwd+bwd {dt} {who}: {t * 1e3:.2f} ms")
        x = w = b = dy = None
    be.gemm_tile = "auto"
    if torch is not None:
        F = torch.nn.functional
        for tdt in (torch.float32, torch.float16):
            tx = torch.randn(M, K, device="cuda", dtype=tdt, requires_grad=True)
            tw = (torch.randn(N, K, device="cuda", dtype=tdt) * 0.02).requires_grad_()
            tb = torch.zeros(N, device="cuda", dtype=tdt, requires_grad=True)
            tdy = torch.randn(M, N, device="cuda", dtype=tdt)

            def tstep():
                tx.grad = tw.grad = tb.grad = None
                F.gelu(F.linear(tx, tw, tb)).backward(tdy)
            t = timed(tstep, torch.cuda.synchronize, 1, reps)
            name = str(tdt).split(".")[1]
            rows.append((name, "torch", t))
            log(f"Linear+GELU fwd+bwd {name} torch: {t * 1e3:.2f} ms")
            tx = tw = tb = tdy = None
    return rows


def epilogue_rows(be, M, N, K, iters, reps):
    """float32 GEMM + bias + each activation: in the GEMM's epilogue against the GEMM with the bias
    followed by the activation as its own pass (what launch_gemm.ACT_AFTER_MIN chooses)."""
    from numr_web.backends.webgpu import launch_gemm
    from numr_web.ops.activations import ACT
    x = nr.randn((M, K), seed=0, device="webgpu")._data
    w = (nr.randn((K, N), seed=1, device="webgpu") * 0.02)._data
    b = nr.randn((N,), seed=3, device="webgpu")._data
    out, rows, was = [None], [], launch_gemm.ACT_AFTER_MIN

    def run(act):
        out[0] = be.gemm_bias_act(x, w, b, act)[0]
        be.settle()

    def sync():
        be.to_bytes(be.slice(out[0], ((0, 1, 1), (0, 1, 1))))
    try:
        for act in [a for a in ACT if a != "none"]:
            ts = []
            for threshold in (1 << 62, 0):           # never split, always split
                launch_gemm.ACT_AFTER_MIN = threshold
                ts.append(timed(lambda: run(act), sync, iters, reps))
            rows.append((act, *ts))
            log(f"GEMM + {act}: in the epilogue {ts[0] * 1e3:.3f} ms, as a pass after it "
                f"{ts[1] * 1e3:.3f} ms")
    finally:
        launch_gemm.ACT_AFTER_MIN = was
    return rows


def main(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--m", type=int, default=8192)
    p.add_argument("--n", type=int, default=4096)
    p.add_argument("--k", type=int, default=4096)
    p.add_argument("--tiles", default="64,128,v4,v4w,sg")
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--linear-tiles", default="auto",
                   help="GEMM tiles for the webgpu Linear rows (auto: the default selection)")
    p.add_argument("--skip-linear", action="store_true")
    p.add_argument("--epilogues", action="store_true",
                   help="also time each activation in the GEMM's epilogue against a pass after it")
    args = p.parse_args(argv)
    t0 = time.perf_counter()
    be = nr.get_backend("webgpu")
    if not isinstance(be, WebGPUBackend):
        raise SystemExit("no webgpu backend")
    info = be.info()
    torch = torch_cuda()
    log(f"adapter: {info.get('adapter')} | {info.get('backend')} | features {info.get('features')}"
        f" | torch: {'CUDA ' + torch.cuda.get_device_name() if torch else 'none'}")
    M, N, K = args.m, args.n, args.k
    tiles = [t for t in args.tiles.split(",") if t]
    g = gemm_rows(be, torch, M, N, K, tiles, args.iters, args.reps)
    lin = [] if args.skip_linear else linear_rows(be, torch, M, N, K, args.iters, args.reps,
                                                    args.linear_tiles.split(","))

    log(f"\n## GEMM {M}x{K}x{N}, {args.iters} calls per round, median of {args.reps} rounds\n")
    ref = {r[0]: r[4] for r in g if r[1] == "torch"}
    log("| dtype | tile | entry | ms | TFLOP/s | / torch |")
    log("|---|---|---|---|---|---|")
    for dt, tile, ran, t, tf in g:
        rel = f"{tf / ref[dt]:.2f}" if dt in ref else "-"
        log(f"| {dt} | {tile} | {ran} | {t * 1e3:.3f} | {tf:.2f} | {rel} |")
    if lin:
        log(f"\n## Linear+bias+GELU fwd+bwd {M}x{K}x{N} (6MKN = {6 * M * N * K / 1e12:.2f} TFLOP)\n")
        tref = {dt: t for dt, who, t in lin if who == "torch"}
        wref = {dt: t for dt, who, t in lin if who == "webgpu"}
        log("| dtype | who | ms | TFLOP/s | x torch same dtype | x torch fp32 |")
        log("|---|---|---|---|---|---|")
        for dt, who, t in lin:
            same = f"{t / tref[dt]:.2f}" if dt in tref else "-"
            f32 = f"{t / tref['float32']:.2f}" if "float32" in tref else "-"
            log(f"| {dt} | {who} | {t * 1e3:.2f} | {6 * M * N * K / t / 1e12:.2f} | {same} | {f32} |")
        if "float16" in wref:
            log(f"\nwebgpu float16 vs float32 Linear fwd+bwd: "
                f"{wref['float32'] / wref['float16']:.2f}x faster")
    if args.epilogues:
        log(f"\n## float32 GEMM {M}x{K}x{N} + bias + activation, ms\n")
        log("| activation | in the epilogue | a pass after the GEMM |")
        log("|---|---|---|")
        for act, fused, split in epilogue_rows(be, M, N, K, args.iters, args.reps):
            log(f"| {act} | {fused * 1e3:.3f} | {split * 1e3:.3f} |")
    log(f"\ntotal {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
