"""GPT training-step time: numr_web's character GPT (numr_web.models.GPT) against the same model
written in PyTorch, same shapes, same batch, same optimizer (AdamW), side by side in one run.

    python bench/gpt.py                                # cpu (numr cpu vs torch cpu)
    python bench/gpt.py --devices cuda,webgpu          # on a GPU machine: numr cuda / webgpu vs torch cuda
    python bench/gpt.py --batch 64 --steps 20 --json out.json

Prints a table of median milliseconds per step (forward + backward + optimizer step, synchronised
by reading the loss) and, on cuda, the peak GPU memory of a step against torch's
max_memory_allocated (numr: CuPy's memory pool high-water mark).
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)   # numr_web from this checkout


def torch_gpt(cfg, device):
    """The same GPT in PyTorch (bench/models.py uses it too): model(idx) gives the logits,
    model(idx, targets) the mean cross-entropy."""
    import torch
    import torch.nn as tnn
    import torch.nn.functional as F

    class Block(tnn.Module):
        def __init__(self):
            super().__init__()
            c = cfg.n_embd
            self.ln1, self.ln2 = tnn.LayerNorm(c), tnn.LayerNorm(c)
            self.qkv, self.proj = tnn.Linear(c, 3 * c), tnn.Linear(c, c)
            self.fc, self.out = tnn.Linear(c, 4 * c), tnn.Linear(4 * c, c)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = (z.view(b, t, cfg.n_head, c // cfg.n_head).transpose(1, 2)
                       for z in self.qkv(self.ln1(x)).split(c, dim=2))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, c))
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(tnn.Module):
        def __init__(self):
            super().__init__()
            self.tok = tnn.Embedding(cfg.vocab_size, cfg.n_embd)
            self.pos = tnn.Embedding(cfg.block_size, cfg.n_embd)
            self.blocks = tnn.ModuleList(Block() for _ in range(cfg.n_layer))
            self.ln_f = tnn.LayerNorm(cfg.n_embd)
            self.head = tnn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
            self.head.weight = self.tok.weight

        def forward(self, idx, targets=None):
            t = idx.shape[1]
            x = self.tok(idx) + self.pos.weight[:t]
            for blk in self.blocks:
                x = blk(x)
            logits = self.head(self.ln_f(x))
            if targets is None:
                return logits
            return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1))

    return GPT().to(device)


def time_steps(step, sync, steps, warmup=3):
    for _ in range(warmup):
        step()
    sync()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        sync()
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times), min(times)


def bench_numr(device, cfg, batch, steps, capture=False):
    import random
    import numr_web as nr
    from numr_web import nn
    from numr_web.models import GPT
    model = GPT(cfg, device=device, dtype="float32", seed=0)
    opt = nn.optim.AdamW(model.parameters(), lr=3e-4, capturable=capture)
    rng = random.Random(0)
    x = nr.tensor([[rng.randrange(cfg.vocab_size) for _ in range(cfg.block_size)]
                   for _ in range(batch)], dtype="int32", device=device)
    y = nr.tensor([[rng.randrange(cfg.vocab_size) for _ in range(cfg.block_size)]
                   for _ in range(batch)], dtype="int32", device=device)
    state = {}

    def train_step(x, y):
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    run = nr.capture(train_step) if capture else train_step

    def step():
        state["loss"] = run(x, y)

    peak = None
    if device == "cuda":
        import cupy
        pool = cupy.get_default_memory_pool()
        step()
        cupy.cuda.Device().synchronize()
        pool.free_all_blocks()
        base = pool.used_bytes()
        hw = [base]

        def step_mem():
            step()
            hw.append(pool.total_bytes())
        med = time_steps(step_mem, lambda: state["loss"].item(), steps)
        peak = max(hw) - base
        return med, peak
    return time_steps(step, lambda: state["loss"].item(), steps), peak


def bench_torch(device, cfg, batch, steps, threads=None):
    import torch
    if threads:
        torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = torch_gpt(cfg, device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    x = torch.randint(0, cfg.vocab_size, (batch, cfg.block_size), device=device)
    y = torch.randint(0, cfg.vocab_size, (batch, cfg.block_size), device=device)
    state = {}

    def step():
        loss = model(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        state["loss"] = loss

    sync = (lambda: torch.cuda.synchronize()) if device == "cuda" else (lambda: state["loss"].item())
    peak = None
    if device == "cuda":
        step()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        res = time_steps(step, sync, steps)
        peak = torch.cuda.max_memory_allocated() - base
        return res, peak
    return time_steps(step, sync, steps), peak


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", default="cpu", help="numr devices, comma-separated (cpu, cuda, webgpu)")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--n-layer", type=int, default=4)
    p.add_argument("--n-embd", type=int, default=128)
    p.add_argument("--capture", action="store_true",
                   help="also time the step recorded once by nr.capture (AdamW(capturable=True))")
    p.add_argument("--json", default=None)
    a = p.parse_args()
    from numr_web.models import GPTConfig
    cfg = GPTConfig(n_layer=a.n_layer, n_embd=a.n_embd)
    n_params = 12 * cfg.n_layer * cfg.n_embd ** 2 + (cfg.vocab_size + cfg.block_size) * cfg.n_embd
    print(f"GPT: {cfg.n_layer} layers, {cfg.n_head} heads, {cfg.n_embd} dims (~{n_params / 1e6:.2f}M "
          f"parameters), context {cfg.block_size}, batch {a.batch}, AdamW; median of {a.steps} steps")
    rows = []
    devices = a.devices.split(",")
    for dev in devices:
        (med, best), peak = bench_numr(dev, cfg, a.batch, a.steps)
        rows.append({"who": f"numr {dev}", "ms": med, "best_ms": best, "peak_bytes": peak})
        if a.capture and dev != "cpu":
            (med, best), peak = bench_numr(dev, cfg, a.batch, a.steps, capture=True)
            rows.append({"who": f"numr {dev} captured", "ms": med, "best_ms": best,
                         "peak_bytes": peak})
    for dev in sorted({"cuda" if d in ("cuda", "webgpu") else "cpu" for d in devices}):
        (med, best), peak = bench_torch(dev, cfg, a.batch, a.steps)
        rows.append({"who": f"torch {dev}", "ms": med, "best_ms": best, "peak_bytes": peak})
    ref = {r["who"].split()[1]: r["ms"] for r in rows if r["who"].startswith("torch")}
    print(f"| {'':21s} | ms/step (median) | best | vs torch | peak memory |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        dev = r["who"].split()[1]
        base = ref.get("cuda" if dev in ("cuda", "webgpu") else "cpu")
        ratio = f"{r['ms'] / base:.2f}" if base else ""
        mem = "" if r["peak_bytes"] is None else f"{r['peak_bytes'] / 2**20:.1f} MiB"
        print(f"| {r['who']:21s} | {r['ms']:.1f} | {r['best_ms']:.1f} | {ratio} | {mem} |")
    if a.json:
        Path(a.json).write_text(json.dumps({"config": vars(a), "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
