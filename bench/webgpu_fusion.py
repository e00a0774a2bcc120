"""Fusion of elementwise chains on webgpu: the unfused GELU graph (tanh form, written op by op)
forward + backward with fusion off and on, against the fused op nr.gelu(approximate="tanh") (one
kernel forward, one backward; with fusion on, an iteration's forward and backward kernels fuse too).

    python bench/webgpu_fusion.py [--n 1048576] [--rounds 5] [--iters 3] [--torch]
    python bench/webgpu_fusion.py --gpt [--rounds 5] [--iters 3]
    python bench/webgpu_fusion.py --breakdown [--n 67108864] [--rounds 5] [--iters 10]

--gpt: a small character GPT's training step instead (2 layers, n_embd 64, 4 heads, 32 tokens,
batch 8; AdamW with weight decay), fusion off and on, interleaved the same way: dispatches and ms
per step, and whether the losses and parameters after the steps are bit-identical.

One iteration: x (n float32 values on the device, requires_grad; its gradient reset) -> y = 0.5*x*(1+tanh(0.79788456*(x+0.044715*x**3)))
(or nr.gelu(x, approximate="tanh")), y.backward(dy). Per round, each variant in turn runs `--iters` iterations back to back
(each one's y and x.grad kept referenced: fusion never writes a value nobody references, which
would skip the work) and one synchronising read-back of one element of the last x.grad; ms per
iteration is the round's wall time divided by --iters (median over rounds; 2 warm-up iterations before). Dispatches per
iteration (of one more iteration run alone) come from the backend's info()["dispatches"]; the fusion knob is switched through the
backend's `fuse` attribute (NUMR_WEBGPU_FUSE). The variants' y and x.grad are compared: the
graph with fusion on must equal it with fusion off bit for bit.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np  # noqa: E402

import numr_web as nr  # noqa: E402


def graph(x):
    return 0.5 * x * (1 + nr.tanh(0.79788456 * (x + 0.044715 * x ** 3)))


def fused_op(x):
    return nr.gelu(x, approximate="tanh")


def step(fn, x, dy):
    """One forward + backward of x, which lives on the device (no upload is timed); its previous
    gradient is dropped first, so each iteration computes a fresh x.grad."""
    x.grad = None
    y = fn(x)
    y.backward(dy)
    return y, x.grad


def warm(be, fn, fuse, x, dy):
    be.fuse = fuse
    for _ in range(2):
        y, g = step(fn, x, dy)
    g[0].item()


def one_round(be, fn, fuse, x, dy, iters):
    """(ms per iteration, dispatches per iteration, (y, x.grad) of the last iteration)."""
    be.fuse = fuse
    d0 = sum(be.info()["dispatches"].values())
    kept = []                  # every iteration's y and x.grad stay referenced, so none is skipped
    t0 = time.perf_counter()
    for _ in range(iters):
        y, g = step(fn, x, dy)
        kept.append((y, g))
    g[0].item()
    ms = (time.perf_counter() - t0) * 1000 / iters
    return ms, (sum(be.info()["dispatches"].values()) - d0) / iters, (y, g)


def gpt_bench(be, rounds, iters):
    from numr_web import nn
    from numr_web.models.gpt import GPT
    rng = np.random.default_rng(0)
    batches = [(rng.integers(0, 96, (8, 32)).astype(np.int32), rng.integers(0, 96, (8, 32))
                .astype(np.int32)) for _ in range(iters)]
    runs = {}
    for fuse in (False, True):
        model = GPT(device="webgpu", seed=0, n_layer=2, n_embd=64, n_head=4, block_size=32)
        opt = nn.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.1)
        runs[fuse] = (model, opt, [], [], [])

    def steps(fuse):
        be.fuse = fuse
        model, opt, times, disp, losses = runs[fuse]
        d0 = sum(be.info()["dispatches"].values())
        t0 = time.perf_counter()
        for x, y in batches:
            opt.zero_grad()
            _, loss = model(nr.tensor(x, device="webgpu"), nr.tensor(y, device="webgpu"))
            loss.backward()
            opt.step()
            losses.append(loss)
        losses[-1].item()
        times.append((time.perf_counter() - t0) * 1000 / iters)
        disp.append((sum(be.info()["dispatches"].values()) - d0) / iters)
    for fuse in (False, True):                 # warm-up: pipelines, the first steps' moments
        steps(fuse)
    for _ in range(rounds):
        for fuse in (False, True):
            steps(fuse)
    same = all(a.numpy().tobytes() == b.numpy().tobytes() for a, b in
               zip(runs[False][4] + list(runs[False][0].parameters()),
                   runs[True][4] + list(runs[True][0].parameters())))
    print(f"adapter: {be.adapter.name}; GPT 2 layers, n_embd 64, batch 8 x 32 tokens, AdamW; "
          f"{rounds} rounds x {iters} steps")
    print("| NUMR_WEBGPU_FUSE | dispatches / step | ms / step |\n|---|---|---|")
    for fuse in (False, True):
        _, _, times, disp, _ = runs[fuse]
        print(f"| {int(fuse)} | {disp[-1]:.0f} | {statistics.median(times[1:]):.1f} |")
    print(f"losses and parameters with fusion on == off bit for bit: {same}")


def torch_times(x_np, dy_np, rounds, iters):
    """torch eager on CUDA, same values, same protocol (iterations back to back, each one's y and
    x.grad kept, one synchronisation per round; median ms per iteration): the unfused graph
    written with torch ops, and F.gelu(approximate="tanh")."""
    import torch
    import torch.nn.functional as F
    if not torch.cuda.is_available():
        print("torch: no CUDA device, torch rows left out")
        return []
    x = torch.tensor(x_np, device="cuda", requires_grad=True)
    dy = torch.tensor(dy_np, device="cuda")

    def t_graph(x):
        return 0.5 * x * (1 + torch.tanh(0.79788456 * (x + 0.044715 * x ** 3)))
    out = []
    for name, fn in (("torch cuda eager, the same graph", t_graph),
                     ("torch cuda, F.gelu(approximate='tanh')",
                      lambda x: F.gelu(x, approximate="tanh"))):
        ts = []
        for r in range(rounds + 1):
            kept = []
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(iters):
                x.grad = None
                y = fn(x)
                y.backward(dy)
                kept.append((y, x.grad))
            torch.cuda.synchronize()
            if r:                                # the first round warms up
                ts.append((time.perf_counter() - t0) * 1000 / iters)
        out.append((name, statistics.median(ts)))
    return out


def breakdown(be, x, dy, rounds, iters, top):
    """Where one iteration of the unfused graph (fusion on) spends its time: eager wall time;
    the time to issue it (the loop before the synchronising read-back); the same step recorded
    by nr.capture and replayed (its dispatches resubmitted: GPU time plus one submit, no Python);
    buffers the pool created per iteration; and a profile of the eager iterations (the `top`
    functions by own time)."""
    import cProfile
    import io
    import pstats
    be.fuse = True

    def eager_step(dy):
        x.grad = None
        y = graph(x)
        y.backward(dy)
        return y

    captured = nr.capture(eager_step)
    default_submit = be.submit_bytes
    rows = {"eager": [], "eager, issue only (no wait)": [],
            "eager, NUMR_WEBGPU_SUBMIT_BYTES=0 (one submit at the read-back)": [],
            "nr.capture replay": []}
    for _ in range(3):
        eager_step(dy)
        captured(dy)
    x.grad[0].item()
    created0 = be.pool.stats()["created"]
    for _ in range(rounds):
        kept = []
        t0 = time.perf_counter()
        for _ in range(iters):
            kept.append((eager_step(dy), x.grad))
        t1 = time.perf_counter()
        x.grad[0].item()
        t2 = time.perf_counter()
        rows["eager"].append((t2 - t0) * 1000 / iters)
        rows["eager, issue only (no wait)"].append((t1 - t0) * 1000 / iters)
        kept = []
        be.submit_bytes = 0
        t0 = time.perf_counter()
        for _ in range(iters):
            kept.append((eager_step(dy), x.grad))
        x.grad[0].item()
        be.submit_bytes = default_submit
        rows["eager, NUMR_WEBGPU_SUBMIT_BYTES=0 (one submit at the read-back)"].append(
            (time.perf_counter() - t0) * 1000 / iters)
        kept = []
        t0 = time.perf_counter()
        for _ in range(iters):
            kept.append(captured(dy))
        x.grad[0].item()
        rows["nr.capture replay"].append((time.perf_counter() - t0) * 1000 / iters)
    created = (be.pool.stats()["created"] - created0) / (rounds * 3 * iters)
    print(f"adapter: {be.adapter.name}; n = {x.shape[0]} float32; unfused graph, fusion on; "
          f"{rounds} rounds x {iters} iterations; graphs recorded: {len(captured.graphs)}, "
          f"eager fallbacks: {captured.eager or 'none'}")
    print("| variant | ms / iteration |\n|---|---|")
    for name, ts in rows.items():
        print(f"| {name} | {statistics.median(ts):.3f} |")
    print(f"buffers created by the pool per iteration after warm-up: {created:.2f}; submit_bytes "
          f"{default_submit}")
    prof = cProfile.Profile()
    kept = []
    prof.enable()
    for _ in range(iters):
        kept.append((eager_step(dy), x.grad))
    x.grad[0].item()
    prof.disable()
    out = io.StringIO()
    pstats.Stats(prof, stream=out).sort_stats("tottime").print_stats(top)
    print(f"profile of {iters} eager iterations and the read-back (own time):")
    print("\n".join(line for line in out.getvalue().splitlines() if line.strip()))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--gpt", action="store_true")
    ap.add_argument("--breakdown", action="store_true",
                    help="where an iteration of the unfused graph spends its time (see breakdown)")
    ap.add_argument("--top", type=int, default=25, help="--breakdown: functions in the profile")
    ap.add_argument("--torch", action="store_true",
                    help="also time torch eager on CUDA (same values, same protocol)")
    a = ap.parse_args()
    be = nr.get_backend("webgpu")
    if a.gpt:
        return gpt_bench(be, a.rounds, a.iters)
    rng = np.random.default_rng(0)
    x = nr.tensor(rng.uniform(-4, 4, a.n).astype(np.float32), device="webgpu", requires_grad=True)
    dy = nr.tensor(rng.standard_normal(a.n).astype(np.float32), device="webgpu")
    if a.breakdown:
        return breakdown(be, x, dy, a.rounds, a.iters, a.top)
    variants = (("unfused graph, NUMR_WEBGPU_FUSE=0", graph, False),
                ("unfused graph, NUMR_WEBGPU_FUSE=1", graph, True),
                ("nr.gelu(approximate='tanh'), NUMR_WEBGPU_FUSE=0", fused_op, False),
                ("nr.gelu(approximate='tanh'), NUMR_WEBGPU_FUSE=1", fused_op, True))
    for _, fn, fuse in variants:
        warm(be, fn, fuse, x, dy)
    times = [[] for _ in variants]
    for _ in range(a.rounds):  # the variants interleaved round by round: load drifts hit them alike
        for i, (name, fn, fuse) in enumerate(variants):
            ms, disp, res = one_round(be, fn, fuse, x, dy, a.iters)
            times[i].append(ms)
    rows = []
    for i, (name, fn, fuse) in enumerate(variants):
        ms, disp, res = one_round(be, fn, fuse, x, dy, 1)
        rows.append((name, statistics.median(times[i]), disp, tuple(t.numpy() for t in res)))
    torch_rows = torch_times(x.numpy(), dy.numpy(), a.rounds, a.iters) if a.torch else []
    same = all(np.array_equal(u.view(np.uint32), v.view(np.uint32))
               for u, v in zip(rows[0][3], rows[1][3]))
    err = max(float(np.max(np.abs(u - v))) for u, v in zip(rows[1][3], rows[2][3]))
    print(f"adapter: {be.adapter.name}; n = {a.n} float32; {a.rounds} rounds x {a.iters} iterations")
    print("| variant | dispatches / iteration | ms / iteration |\n|---|---|---|")
    for name, ms, disp, _ in rows:
        print(f"| {name} | {disp:.1f} | {ms:.3f} |")
    for name, ms in torch_rows:
        print(f"| {name} | | {ms:.3f} |")
    if torch_rows:
        print(f"unfused graph with fusion on / torch's eager graph: "
              f"{rows[1][1] / torch_rows[0][1]:.2f}")
    print(f"fusion on == off bit for bit: {same}; max |graph - nr.gelu| over y and x.grad: {err:.2e}")
    print("fusion counters:", be.info()["fusion"])


if __name__ == "__main__":
    main()
