"""The cpu device on 1 thread against N threads (NUMR_CPU_THREADS), and against torch on the same
numbers of threads: the fused Linear + exact GELU, the character GPT of the demo, nanoGPT's
shakespeare-char GPT and a CIFAR-shaped conv net, whole training steps.

    python bench/cpu_threads.py                                  # 1 and all CPUs, every model
    python bench/cpu_threads.py --threads 1,16 --models nanogpt,linear --profile
    python bench/cpu_threads.py --batch-scale 0.125 --steps 3   # a quick look on a small machine

Columns: "one call" is every op as one numpy call in the calling thread (parallel_min past every
size: the engine before it had blocks); "N thr" the blocked ops on N threads
(numr_web.backends.cpu_threads.configure, as NUMR_CPU_THREADS=N would set them; numpy's BLAS
keeps its own threads for the GEMMs in every column). torch runs in a child process per thread
count (torch.set_num_threads), after numr's rows, so the two thread pools never compete.
--profile prints, for the largest thread count, the host time of each backend primitive over one
step (each primitive's wall time, nested calls counted in the outer one).

Models (same shapes, initialisation scheme and optimizer in both libraries):
  linear     x (4096, 1024) @ w (1024, 1024) + b, exact GELU, forward + backward
  gpt        the demo's character GPT (4 layers, 4 heads, 128 dims, context 64), batch 32, AdamW
  nanogpt    6 layers, 6 heads, 384 dims, context 256, vocabulary 65, batch 64, AdamW
  cifar_cnn  batch 128 of 3x32x32, four 3x3 conv + BatchNorm + ReLU (32, 64, 128, 256 channels,
             a 2x2 max-pool after the last three), a Linear classifier; SGD with momentum
"""
from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[0] = str(ROOT)                    # numr_web from this checkout
sys.path.insert(1, str(ROOT / "bench"))

import blas_env  # noqa: E402
from timing import median_ms  # noqa: E402

blas_env.unset()                           # before numpy loads OpenBLAS

MODELS = ("linear", "gpt", "nanogpt", "cifar_cnn")
ONE_CALL = 1 << 40


def shapes(name, scale):
    """(config dict, batch) of a model; scale shrinks the batch for quick runs."""
    if name == "linear":
        return {"m": max(8, int(4096 * scale)), "k": 1024, "n": 1024}, None
    if name == "gpt":
        return dict(vocab_size=96, block_size=64, n_layer=4, n_head=4, n_embd=128), \
            max(1, int(32 * scale))
    if name == "nanogpt":
        return dict(vocab_size=65, block_size=256, n_layer=6, n_head=6, n_embd=384), \
            max(1, int(64 * scale))
    return {}, max(2, int(128 * scale))


def batch_data(name, cfg, batch, seed=0):
    import random
    r = random.Random(seed)
    if name in ("gpt", "nanogpt"):
        toks = [[r.randrange(cfg["vocab_size"]) for _ in range(cfg["block_size"] + 1)]
                for _ in range(batch)]
        return [t[:-1] for t in toks], [t[1:] for t in toks]
    return [[r.gauss(0, 1) for _ in range(3 * 32 * 32)] for _ in range(batch)], \
        [r.randrange(10) for _ in range(batch)]


# -- numr ------------------------------------------------------------------------------------------
def numr_step(name, scale):
    """A function running one step (returns when its result is on the host)."""
    import numr_web as nr
    from numr_web import nn
    cfg, batch = shapes(name, scale)
    if name == "linear":
        import numpy as np
        rng = np.random.default_rng(0)
        x = nr.tensor(rng.standard_normal((cfg["m"], cfg["k"]), dtype=np.float32),
                      requires_grad=True)
        w = nr.tensor(rng.standard_normal((cfg["k"], cfg["n"]), dtype=np.float32) / 32,
                      requires_grad=True)
        b = nr.tensor(rng.standard_normal(cfg["n"], dtype=np.float32), requires_grad=True)
        dy = nr.tensor(rng.standard_normal((cfg["m"], cfg["n"]), dtype=np.float32))

        def step():
            x.grad = w.grad = b.grad = None
            nr.matmul_bias_activation(x, w, b, "gelu").backward(dy)
            return b.grad.numpy()
        return step
    xs, ys = batch_data(name, cfg, batch)
    if name in ("gpt", "nanogpt"):
        from numr_web.models import GPT, GPTConfig
        model = GPT(GPTConfig(**cfg), device="cpu", dtype="float32", seed=0)
        x, y = nr.tensor(xs, dtype="int32"), nr.tensor(ys, dtype="int32")
        opt = nn.optim.AdamW(model.parameters(), lr=3e-4)
    else:
        layers, c_in = [], 3
        for i, c in enumerate((32, 64, 128, 256)):
            layers += [nn.Conv2d(c_in, c, 3, padding=1, seed=i), nn.BatchNorm2d(c), nn.ReLU()]
            if i:
                layers.append(nn.MaxPool2d(2))
            c_in = c
        model = nn.Sequential(*layers, nn.Flatten(), nn.Linear(256 * 4 * 4, 10, seed=9))
        x = nr.tensor(xs, dtype="float32").reshape(batch, 3, 32, 32)
        y = nr.tensor(ys, dtype="int32")
        opt = nn.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)

    def step():
        logits = model(x)
        logits = logits[0] if isinstance(logits, tuple) else logits
        loss = nr.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item()
    return step


def primitive_profile(step):
    """Host ms per backend primitive over one step (outermost calls only)."""
    from numr_web.backends import get_backend
    be = get_backend("cpu")
    stats = collections.defaultdict(lambda: [0, 0.0])
    depth = [0]
    saved = {}

    def wrap(name, f):
        def timed(*a, **k):
            depth[0] += 1
            t0 = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    s = stats[name]
                    s[0] += 1
                    s[1] += (time.perf_counter() - t0) * 1e3
        return timed
    for n in dir(be):
        f = getattr(be, n)
        if not n.startswith("_") and callable(f) and not isinstance(f, type):
            saved[n] = be.__dict__.get(n)
            setattr(be, n, wrap(n, f))
    try:
        t0 = time.perf_counter()
        step()
        total = (time.perf_counter() - t0) * 1e3
    finally:
        for n, f in saved.items():
            if f is None:
                delattr(be, n)
            else:
                setattr(be, n, f)
    rows = sorted(stats.items(), key=lambda kv: -kv[1][1])
    lines = [f"| primitive | calls | host ms | share of the step ({total:.0f} ms) |",
             "|---|---:|---:|---:|"]
    lines += [f"| {k} | {c} | {ms:.1f} | {ms / total:.0%} |" for k, (c, ms) in rows if ms >= 0.5]
    return "\n".join(lines)


# -- torch, in a child process per thread count ----------------------------------------------------
TORCH_CHILD = r"""
import json, statistics, sys, time, torch
import torch.nn as tnn, torch.nn.functional as F
name, threads, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
cfg, batch, data = json.loads(sys.stdin.read())
torch.set_num_threads(threads)
torch.manual_seed(0)
if name == "linear":
    x = torch.randn(cfg["m"], cfg["k"], requires_grad=True)
    w = torch.randn(cfg["n"], cfg["k"], requires_grad=True)
    b = torch.randn(cfg["n"], requires_grad=True); dy = torch.randn(cfg["m"], cfg["n"])
    def step():
        x.grad = w.grad = b.grad = None
        F.gelu(F.linear(x, w, b)).backward(dy)
else:
    if name in ("gpt", "nanogpt"):
        class Block(tnn.Module):
            def __init__(self):
                super().__init__()
                c = cfg["n_embd"]
                self.ln1, self.ln2 = tnn.LayerNorm(c), tnn.LayerNorm(c)
                self.qkv, self.proj = tnn.Linear(c, 3 * c), tnn.Linear(c, c)
                self.fc, self.out = tnn.Linear(c, 4 * c), tnn.Linear(4 * c, c)
            def forward(self, x):
                b, t, c = x.shape
                q, k, v = (z.view(b, t, cfg["n_head"], c // cfg["n_head"]).transpose(1, 2)
                           for z in self.qkv(self.ln1(x)).split(c, dim=2))
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
                return x + self.out(F.gelu(self.fc(self.ln2(x))))
        class GPT(tnn.Module):
            def __init__(self):
                super().__init__()
                self.tok = tnn.Embedding(cfg["vocab_size"], cfg["n_embd"])
                self.pos = tnn.Embedding(cfg["block_size"], cfg["n_embd"])
                self.blocks = tnn.ModuleList(Block() for _ in range(cfg["n_layer"]))
                self.ln_f = tnn.LayerNorm(cfg["n_embd"])
                self.head = tnn.Linear(cfg["n_embd"], cfg["vocab_size"], bias=False)
                self.head.weight = self.tok.weight
            def forward(self, idx):
                h = self.tok(idx) + self.pos.weight[:idx.shape[1]]
                for blk in self.blocks:
                    h = blk(h)
                return self.head(self.ln_f(h))
        model = GPT()
        x = torch.tensor(data[0]); y = torch.tensor(data[1])
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    else:
        layers, c_in = [], 3
        for i, c in enumerate((32, 64, 128, 256)):
            layers += [tnn.Conv2d(c_in, c, 3, padding=1), tnn.BatchNorm2d(c), tnn.ReLU()]
            if i:
                layers.append(tnn.MaxPool2d(2))
            c_in = c
        model = tnn.Sequential(*layers, tnn.Flatten(), tnn.Linear(256 * 4 * 4, 10))
        x = torch.tensor(data[0]).reshape(batch, 3, 32, 32); y = torch.tensor(data[1])
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    def step():
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        loss.item()
step()
ts = []
for _ in range(steps):
    t0 = time.perf_counter(); step(); ts.append((time.perf_counter() - t0) * 1e3)
print(json.dumps({"ms": statistics.median(ts), "version": torch.__version__}))
"""


def torch_ms(name, threads, steps, scale):
    cfg, batch = shapes(name, scale)
    data = batch_data(name, cfg, batch) if name != "linear" else None
    out = subprocess.run([sys.executable, "-c", TORCH_CHILD, name, str(threads), str(steps)],
                         input=json.dumps([cfg, batch, data]), capture_output=True, text=True)
    if out.returncode != 0:
        lines = out.stderr.strip().splitlines()
        raise RuntimeError(lines[-1] if lines else f"exit status {out.returncode}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", default=None,
                   help="comma-separated thread counts (default: 1 and the CPUs this process may use)")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated: {','.join(MODELS)}")
    p.add_argument("--steps", type=int, default=5, help="timed steps per figure (median)")
    p.add_argument("--batch-scale", type=float, default=1.0, help="scale the batches (and the "
                   "Linear's rows) for a quick run")
    p.add_argument("--no-one-call", action="store_true", help="skip the one-call rows")
    p.add_argument("--no-torch", action="store_true", help="numr only")
    p.add_argument("--profile", action="store_true", help="a primitive table per model")
    p.add_argument("--write", default=None, help="append the table to this markdown file")
    p.add_argument(blas_env.KEEP, action="store_true",
                   help="keep OPENBLAS_CORETYPE / L2_SIZE (unset by default: bench/blas_env.py)")
    a = p.parse_args(argv)
    models = [m for m in a.models.split(",") if m]
    bad = [m for m in models if m not in MODELS]
    if bad:
        p.error(f"unknown model(s) {bad}; choose from {list(MODELS)}")
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    threads = [int(t) for t in (a.threads or f"1,{cpus}").split(",") if t]
    import numpy
    from numr_web.backends import cpu_threads, get_backend
    default_min = cpu_threads.parallel_min()        # NUMR_CPU_PARALLEL_MIN, else the default
    head = (f"# bench/cpu_threads.py, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M}"
            f" UTC; {cpus} CPUs; numpy {numpy.__version__}; "
            f"BLAS {get_backend('cpu').info().get('blas', '?')} ({blas_env.note()}); steps {a.steps}, "
            f"batch scale {a.batch_scale}; `{' '.join(['python', 'bench/cpu_threads.py'] + sys.argv[1:])}`")
    print(head, flush=True)
    table = ["| model | numr one call | " + " | ".join(f"numr {t} thr" for t in threads) +
             " | " + " | ".join(f"torch {t} thr" for t in threads) + " | numr/torch at "
             f"{threads[-1]} thr | numr {threads[0]} -> {threads[-1]} thr |",
             "|---|" + "---:|" * (2 * len(threads) + 3)]
    profiles = []
    for name in models:
        step = numr_step(name, a.batch_scale)
        ours = {}
        if not a.no_one_call:
            cpu_threads.configure(threads=1, parallel_min=ONE_CALL)
            ours["one"] = median_ms(step, a.steps)
        for t in threads:
            cpu_threads.configure(threads=t, parallel_min=default_min)
            ours[t] = median_ms(step, a.steps)
            print(f"{name}: numr {t} threads {ours[t]:.1f} ms", flush=True)
        if a.profile:
            profiles.append((name, primitive_profile(step)))
        del step
        theirs = {}
        if not a.no_torch:
            for t in threads:
                try:
                    theirs[t] = torch_ms(name, t, a.steps, a.batch_scale)["ms"]
                    print(f"{name}: torch {t} threads {theirs[t]:.1f} ms", flush=True)
                except Exception as e:       # torch missing: numr's columns still print
                    print(f"torch skipped: {e}")
                    break
        last, first = threads[-1], threads[0]
        ratio = f"{ours[last] / theirs[last]:.2f}x" if last in theirs else ""
        cells = [f"{ours['one']:.1f}" if "one" in ours else ""] + \
            [f"{ours[t]:.1f}" for t in threads] + \
            [f"{theirs[t]:.1f}" if t in theirs else "" for t in threads]
        table.append(f"| {name} | " + " | ".join(cells) +
                     f" | {ratio} | {ours[first] / ours[last]:.2f}x |")
    text = "\n".join([head, "", "median ms per step", ""] + table)
    for name, prof in profiles:
        text += f"\n\n{name}, {threads[-1]} threads, one step:\n\n{prof}"
    print()
    print(text)
    if a.write:
        with open(a.write, "a") as f:
            f.write("\n" + text + "\n")


if __name__ == "__main__":
    main()
