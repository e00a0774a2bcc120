"""Linear + bias + GELU forward + backward on the cpu device, side by side in one run with the same
computation hand-written in numpy and with PyTorch CPU; plus the engine's per-op overhead.

    python bench/linear.py [--m 4096 --k 1024 --n 1024] [--reps 5] [--write docs/benchmarks.md]

OPENBLAS_CORETYPE / OPENBLAS_L2_SIZE (set on some machines for old OpenBLAS builds) slow a current
numpy; this script unsets both for its own process only (bench/blas_env.py; --keep-blas-env keeps
them) and reports the BLAS kernel in use.
torch runs in a child process after the numpy phases so OpenBLAS's and torch's threads never compete.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))    # also under `numr-web bench`
import blas_env  # noqa: E402  (bench/blas_env.py)
from timing import median_ms  # noqa: E402

blas_env.unset()

try:
    import numpy as np  # noqa: E402
    from scipy.special import erf  # noqa: E402  (the numpy-by-hand baseline's exact GELU)
except ModuleNotFoundError as _e:
    sys.exit(f"bench/linear.py: {_e.name} is not installed: pip install 'numr-web[bench]' "
             "(numpy, scipy, threadpoolctl)")

GELU_C, GELU_A = float(np.sqrt(2 / np.pi)), 0.044715


def timeit(fn, reps, warmup=1):
    """Median seconds of reps calls (bench/timing.py's, in seconds)."""
    return median_ms(fn, reps, warmup) / 1e3


# -- numpy by hand: what a careful numpy user would write (in-place epilogue, closed-form derivative)
def numpy_linear(x, w, b, dy, approximate):
    z = x @ w
    z += b
    if approximate == "tanh":
        t = z * z
        t *= GELU_A
        t += 1
        t *= z
        t *= GELU_C
        np.tanh(t, out=t)
        y = t + 1
        y *= z
        y *= 0.5
        d = z * z                                            # 0.5(1+t) + 0.5 z (1-t²) c (1+3a z²)
        d *= 3 * GELU_A
        d += 1
        d *= GELU_C
        d *= z
        d *= 1 - t * t
        d += 1 + t
        d *= 0.5
    else:
        cdf = erf(z * np.float32(1 / np.sqrt(2)))
        cdf += 1
        cdf *= 0.5
        y = z * cdf
        d = z * z
        d *= -0.5
        np.exp(d, out=d)
        d *= np.float32(1 / np.sqrt(2 * np.pi))
        d *= z
        d += cdf
    d *= dy
    dx = d @ w.T
    dw = x.T @ d
    db = d.sum(axis=0)
    return y, dx, dw, db


def numr_linear(nr, x, w, b, dy, activation):
    y = nr.matmul_bias_activation(x, w, b, activation)
    y.backward(dy)
    return y, x.grad, w.grad, b.grad


TORCH_CHILD = r"""
import json, statistics, sys, time, torch
torch.manual_seed(0)
m, k, n, reps = map(int, sys.argv[1:5])
x = torch.randn(m, k, requires_grad=True); w = torch.randn(n, k, requires_grad=True)
b = torch.randn(n, requires_grad=True); dy = torch.randn(m, n)
res = {"threads": torch.get_num_threads(), "version": torch.__version__}
for approx in ("tanh", "none"):
    def step():
        x.grad = w.grad = b.grad = None
        y = torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b), approximate=approx)
        y.backward(dy)
    step()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter(); step(); ts.append(time.perf_counter() - t0)
    res[approx] = statistics.median(ts)
print(json.dumps(res))
"""


def blas_info():
    try:
        from threadpoolctl import threadpool_info
        for i in threadpool_info():
            if i.get("user_api") == "blas":
                return f"{i.get('internal_api')} {i.get('version')}, kernel {i.get('architecture')}, {i.get('num_threads')} threads"
    except ImportError:
        return "threadpoolctl not installed"
    return "unknown"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--m", type=int, default=4096)
    p.add_argument("--k", type=int, default=1024)
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument(blas_env.KEEP, action="store_true", help="keep OPENBLAS_CORETYPE / L2_SIZE")
    p.add_argument("--write", default=None, help="append a results section to this markdown file")
    p.add_argument("--plot", default=None,
                   help="save a bar chart here (default with --write: docs/bench_linear_cpu.png)")
    args = p.parse_args()
    if args.plot is None and args.write:
        args.plot = "docs/bench_linear_cpu.png"
    import numr_web as nr

    m, k, n = args.m, args.k, args.n
    rng = np.random.default_rng(0)
    X, W = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32) / 32
    B, DY = rng.standard_normal(n, dtype=np.float32), rng.standard_normal((m, n), dtype=np.float32)
    x = nr.tensor(X, requires_grad=True)
    w = nr.tensor(W, requires_grad=True)
    b = nr.tensor(B, requires_grad=True)
    dy = nr.tensor(DY)

    results = {}
    for act, approx in (("gelu_tanh", "tanh"), ("gelu", "none")):
        def ours():
            x.grad = w.grad = b.grad = None
            numr_linear(nr, x, w, b, dy, act)
        # correctness first: the two implementations agree
        x.grad = w.grad = b.grad = None
        y1, dx1, dw1, db1 = numr_linear(nr, x, w, b, dy, act)
        y2, dx2, dw2, db2 = numpy_linear(X, W, B, DY, approx)
        err = max(float(np.abs(a.numpy() - bb).max() / (np.abs(bb).max() + 1e-30))
                  for a, bb in ((y1, y2), (dx1, dx2), (dw1, dw2), (db1, db2)))
        t_np = timeit(lambda: numpy_linear(X, W, B, DY, approx), args.reps)
        t_ours = timeit(ours, args.reps)
        t_np2 = timeit(lambda: numpy_linear(X, W, B, DY, approx), args.reps)
        results[act] = {"ours": t_ours, "numpy": min(t_np, t_np2), "rel_err": err}

    # per-op overhead: 1,000 small elementwise ops on 64x64 tensors
    a_np, b_np = rng.standard_normal((64, 64), dtype=np.float32), rng.standard_normal((64, 64), dtype=np.float32)
    a_t, b_t = nr.tensor(a_np), nr.tensor(b_np)

    def chain(a, b, tanh):          # the same 1,000 ops on numr tensors or numpy arrays
        u = a
        for _ in range(250):
            u = tanh((u + b) * b - a)
        return u

    def small_ours():
        return chain(a_t, b_t, nr.tanh)

    def small_np():
        return chain(a_np, b_np, np.tanh)
    np.testing.assert_allclose(small_ours().numpy(), small_np(), rtol=1e-4, atol=1e-5)
    t_small_np = timeit(small_np, 21, 3)
    t_small = timeit(small_ours, 21, 3)

    torch_res = {}
    try:
        out = subprocess.run([sys.executable, "-c", TORCH_CHILD, str(m), str(k), str(n), str(args.reps)],
                             capture_output=True, text=True)
        if out.returncode != 0:      # the child's last error line, not its whole source
            lines = out.stderr.strip().splitlines()
            raise RuntimeError(lines[-1] if lines else f"exit status {out.returncode}")
        torch_res = json.loads(out.stdout.strip().splitlines()[-1])
    except Exception as e:
        print(f"torch column skipped: {e} (pip install torch to compare with it)")

    flops = 3 * 2 * m * k * n
    lines = [f"blas: {blas_info()}; {blas_env.note()}; torch {torch_res.get('version', '-')}, "
             f"{torch_res.get('threads', '-')} threads", "",
             "| Linear+bias+act fwd+bwd, M,K,N = %d,%d,%d fp32 | numr_web cpu | numpy by hand | torch CPU | ours/numpy | ours/torch | GFLOP/s (ours) | max rel diff vs numpy |" % (m, k, n),
             "|---|---|---|---|---|---|---|---|"]
    for act, approx in (("gelu_tanh", "tanh"), ("gelu", "none")):
        r = results[act]
        tt = torch_res.get(approx)
        lines.append(f"| {act} | {r['ours'] * 1e3:.1f} ms | {r['numpy'] * 1e3:.1f} ms | "
                     f"{tt * 1e3:.1f} ms | {r['ours'] / r['numpy']:.2f} | {r['ours'] / tt:.2f} | "
                     f"{flops / r['ours'] / 1e9:.1f} | {r['rel_err']:.1e} |" if tt else
                     f"| {act} | {r['ours'] * 1e3:.1f} ms | {r['numpy'] * 1e3:.1f} ms | - | "
                     f"{r['ours'] / r['numpy']:.2f} | - | {flops / r['ours'] / 1e9:.1f} | {r['rel_err']:.1e} |")
    lines += ["", f"1,000 elementwise ops on 64x64 float32 (add, mul, sub, tanh): numr_web "
              f"{t_small * 1e3:.2f} ms, raw numpy {t_small_np * 1e3:.2f} ms, ratio "
              f"{t_small / t_small_np:.2f} ({t_small / 1000 * 1e6:.1f} µs per op)"]
    report = "\n".join(lines)
    print(report)
    if args.plot:
        try:
            import matplotlib
            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
            fig, ax = plt.subplots(figsize=(6.5, 3.5))
            acts = list(results)
            xs = np.arange(len(acts))
            ax.bar(xs - 0.25, [results[a]["ours"] * 1e3 for a in acts], 0.25, label="numr_web cpu")
            ax.bar(xs, [results[a]["numpy"] * 1e3 for a in acts], 0.25, label="numpy by hand")
            if torch_res:
                ax.bar(xs + 0.25, [torch_res[ap] * 1e3 for ap in ("tanh", "none")], 0.25, label="torch CPU")
            ax.set_xticks(xs, acts)
            ax.set_ylabel("ms (lower is better)")
            ax.set_title(f"Linear+bias+GELU fwd+bwd {m}x{k}x{n} fp32, 2 cores")
            ax.legend()
            fig.tight_layout()
            fig.savefig(args.plot, dpi=100)
        except ImportError:
            pass
    if args.write:
        with open(args.write, "a") as f:
            f.write(f"\n### cpu: `python bench/linear.py --write {args.write}` ({datetime.date.today()})\n\n")
            f.write(report + "\n")
            if args.plot:
                f.write(f"\n![cpu linear benchmark]({os.path.relpath(args.plot, os.path.dirname(args.write))})\n")


if __name__ == "__main__":
    main()
