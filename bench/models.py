"""Training-step time of whole models: numr_web against the same model in PyTorch, side by side in
one process, per device, eager and captured (nr.capture), with peak memory on cuda.

    python bench/models.py                                   # cpu, every model
    python bench/models.py --devices cpu,cuda,webgpu --json out.json --plot out.png
    python bench/models.py --models nanogpt --devices cuda --profile    # nr.profile tables too
    python bench/models.py --models nanogpt,gpt --devices cuda --amp    # mixed precision rows too

Models (the same shapes, initialisation scheme and optimizer in both libraries):
  gpt        the character GPT of `numr-web demo --model gpt` (4 layers, 4 heads, 128 dims,
             context 64; 0.81M parameters), batch 32, AdamW
  nanogpt    nanoGPT's shakespeare-char configuration: 6 layers, 6 heads, 384 dims, context 256,
             vocabulary 65, batch 64 (10.7M parameters), AdamW
  digits_cnn the digits CNN of `numr-web demo --model cnn` (1x8x8 images), batch 32, AdamW
  cifar_cnn  a CIFAR-shaped conv net: batch 128 of 3x32x32, four 3x3 conv + BatchNorm + ReLU layers
             (32, 64, 128, 256 channels, a 2x2 max-pool after the last three), a Linear classifier;
             SGD with momentum (numr writes BatchNorm + ReLU as BatchNorm2d(c, activation="relu"),
             one fused op; --unfused: as torch, two modules)

A step is forward + cross-entropy + backward + optimizer step, ended by reading the loss (numr) or
a device synchronisation (torch); the figure is the median over --steps steps after warm-up.
torch runs eagerly in float32 with TF32 off, on cuda for the cuda and webgpu rows. Peak memory
(cuda): bytes in use above the model's resident state at the step's high-water mark (numr: CuPy's
pool through a tracking allocator; torch: max_memory_allocated).

--amp adds "amp" rows per model and device: the eager step (and on a GPU the captured one, with
a capturable AdamW, whose GradScaler step is undone on the device instead of read back) under
nr.autocast(device, dtype) with nr.amp.GradScaler against torch's eager step under
torch.autocast(device, dtype) with torch.amp.GradScaler (--amp-dtype float16 by default, or
bfloat16 where the device holds it; the parameters and the optimizer stay in float32 in both; a
GradScaler step reads back one flag, as torch's does).
"""
from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)   # numr_web from this checkout
sys.path.insert(1, str(Path(__file__).resolve().parent))    # bench/gpt.py's torch GPT

import blas_env  # noqa: E402

blas_env.unset()          # before numpy loads OpenBLAS

MODELS = ("gpt", "nanogpt", "digits_cnn", "cifar_cnn")


# -- the models, in both libraries -----------------------------------------------------------------
def gpt_config(name):
    from numr_web.models import GPTConfig
    if name == "gpt":
        return GPTConfig(), 32
    return GPTConfig(vocab_size=65, block_size=256, n_layer=6, n_head=6, n_embd=384), 64


def numr_model(name, device, fused=True):
    from numr_web import nn
    from numr_web.models import GPT
    from numr_web.models.cnn import DigitsCNN
    if name in ("gpt", "nanogpt"):
        cfg, batch = gpt_config(name)
        return GPT(cfg, device=device, dtype="float32", seed=0), batch, cfg
    if name == "digits_cnn":
        return DigitsCNN(device=device, seed=0), 32, None
    layers, c_in = [], 3
    for i, c in enumerate((32, 64, 128, 256)):
        layers += [nn.Conv2d(c_in, c, 3, padding=1, device=device, seed=i)]
        layers += [nn.BatchNorm2d(c, device=device, activation="relu")] if fused else \
            [nn.BatchNorm2d(c, device=device), nn.ReLU()]
        if i:
            layers.append(nn.MaxPool2d(2))
        c_in = c
    layers += [nn.Flatten(), nn.Linear(256 * 4 * 4, 10, device=device, seed=9)]
    return nn.Sequential(*layers), 128, None


def torch_model(name, device):
    import torch
    import torch.nn as tnn
    torch.manual_seed(0)
    if name in ("gpt", "nanogpt"):
        from gpt import torch_gpt              # bench/gpt.py: the same GPT in PyTorch
        cfg, batch = gpt_config(name)
        return torch_gpt(cfg, device), batch, cfg
    if name == "digits_cnn":
        m = tnn.Sequential(tnn.Conv2d(1, 32, 3, padding=1), tnn.ReLU(),
                           tnn.Conv2d(32, 64, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                           tnn.Flatten(), tnn.Linear(64 * 16, 128), tnn.ReLU(), tnn.Linear(128, 10))
        return m.to(device), 32, None
    layers, c_in = [], 3
    for i, c in enumerate((32, 64, 128, 256)):
        layers += [tnn.Conv2d(c_in, c, 3, padding=1), tnn.BatchNorm2d(c), tnn.ReLU()]
        if i:
            layers.append(tnn.MaxPool2d(2))
        c_in = c
    layers += [tnn.Flatten(), tnn.Linear(256 * 4 * 4, 10)]
    return tnn.Sequential(*layers).to(device), 128, None


def batch_data(name, batch, cfg, seed=0):
    """(inputs, targets) as nested Python lists of the model's input shape."""
    import random
    r = random.Random(seed)
    if cfg is not None:
        toks = [[r.randrange(cfg.vocab_size) for _ in range(cfg.block_size + 1)]
                for _ in range(batch)]
        return [t[:-1] for t in toks], [t[1:] for t in toks]
    shape = (1, 8, 8) if name == "digits_cnn" else (3, 32, 32)
    n = shape[0] * shape[1] * shape[2]
    x = [[r.gauss(0, 1) for _ in range(n)] for _ in range(batch)]
    return x, [r.randrange(10) for _ in range(batch)], shape


# -- timing ----------------------------------------------------------------------------------------
def median_ms(step, sync, steps, warmup=3):
    for _ in range(warmup):
        step()
    sync()
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter()
        step()
        sync()
        ts.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(ts), min(ts)


class CupyPeak:
    """Peak bytes in use in CuPy's default pool, through an allocator that records the high-water
    mark after each allocation (the counterpart of torch.cuda.max_memory_allocated)."""

    def __init__(self):
        import cupy
        self.cupy, self.pool = cupy, cupy.get_default_memory_pool()
        self.peak = 0

        def malloc(size):
            mem = self.pool.malloc(size)
            used = self.pool.used_bytes()
            if used > self.peak:
                self.peak = used
            return mem
        cupy.cuda.set_allocator(malloc)

    def reset(self):
        self.cupy.cuda.Device().synchronize()
        self.peak = self.pool.used_bytes()
        return self.peak

    def close(self):
        self.cupy.cuda.set_allocator(self.pool.malloc)


def graph_pool_bytes():
    """Bytes held by the private memory pools of recorded CUDA graphs (nr.capture allocates a
    step's temporaries there, outside CuPy's default pool)."""
    import gc
    from numr_web.backends.cuda.graphs import Recording
    return sum(r.pool.total_bytes() for r in gc.get_objects() if isinstance(r, Recording))


def numr_training_step(name, device, capture=False, amp=None, fused=True):
    """(train_step(x, y) -> loss, x, y): one optimizer step of the model on a fixed batch,
    under autocast + GradScaler when amp is a dtype name (AdamW capturable for a captured step)."""
    import numr_web as nr
    from numr_web import nn
    model, batch, cfg = numr_model(name, device, fused)
    data = batch_data(name, batch, cfg)
    x = nr.tensor(data[0], dtype="int32" if cfg else "float32", device=device)
    if cfg is None:
        x = x.reshape(batch, *data[2])
    y = nr.tensor(data[1], dtype="int32", device=device)
    if name == "cifar_cnn":
        opt = nn.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    else:
        opt = nn.optim.AdamW(model.parameters(), lr=3e-4, capturable=capture)

    def train_step(x, y):
        logits = model(x)
        if isinstance(logits, tuple):
            logits = logits[0]
        loss = nr.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss

    if amp is not None:
        scaler = nr.amp.GradScaler()

        def train_step(x, y):                                       # noqa: F811
            with nr.autocast(device, dtype=amp):
                logits = model(x)
                if isinstance(logits, tuple):
                    logits = logits[0]
                loss = nr.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            return loss

    return train_step, x, y


def bench_numr(name, device, steps, capture=False, profile=False, amp=None, fused=True):
    import numr_web as nr
    train_step, x, y = numr_training_step(name, device, capture, amp, fused)
    run = nr.capture(train_step) if capture else train_step
    box = {}

    def step():
        box["loss"] = run(x, y)

    def sync():
        box["loss"].item()

    peak = None
    if device == "cuda":
        tracker = CupyPeak()
        try:
            step()
            sync()
            base = tracker.reset()
            res = median_ms(step, sync, steps)
            peak = tracker.peak - base + graph_pool_bytes()
        finally:
            tracker.close()
    else:
        res = median_ms(step, sync, steps)
    table = None
    if profile and not capture:
        with nr.profile() as p:
            step()
            sync()
        table = p.table(row_limit=30)
        if device == "webgpu":          # timestamps split every dispatch into its own pass:
            with nr.profile(device_time=False) as p:     # the host's own cost, untimed
                step()
                sync()
            table += "\nhost time only:\n" + p.table(sort_by="self", row_limit=20)
    return res, peak, table


def torch_training_step(name, device, amp=None):
    """(step, sync): one torch training step of model `name` (SGD for the CNN, AdamW else), under
    autocast + GradScaler when amp is a dtype name, and the device synchronisation."""
    import torch
    import torch.nn.functional as F
    model, batch, cfg = torch_model(name, device)
    data = batch_data(name, batch, cfg)
    if cfg is not None:
        x = torch.tensor(data[0], device=device)
    else:
        x = torch.tensor(data[0], device=device).reshape(batch, *data[2])
    y = torch.tensor(data[1], device=device)
    if name == "cifar_cnn":
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    box = {}

    def step():
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        box["loss"] = loss

    if amp is not None:
        scaler = torch.amp.GradScaler(device)
        dtype = getattr(torch, amp)

        def step():                                                 # noqa: F811
            with torch.autocast(device, dtype=dtype):
                logits = model(x)
                loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            box["loss"] = loss

    sync = torch.cuda.synchronize if device == "cuda" else (lambda: box["loss"].item())
    return step, sync


def bench_torch(name, device, steps, amp=None):
    import torch
    step, sync = torch_training_step(name, device, amp)
    if device != "cuda":
        return median_ms(step, sync, steps), None
    step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    res = median_ms(step, sync, steps)
    return res, torch.cuda.max_memory_allocated() - base


# -- the run -----------------------------------------------------------------------------------------
def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--devices", default="cpu", help="numr devices, comma-separated: cpu,cuda,webgpu")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated: {','.join(MODELS)}")
    p.add_argument("--steps", type=int, default=10, help="timed steps per figure (median)")
    p.add_argument("--no-capture", action="store_true", help="skip the captured (nr.capture) rows")
    p.add_argument("--no-torch", action="store_true", help="numr only")
    p.add_argument("--profile", action="store_true", help="print an nr.profile table per eager row")
    p.add_argument("--amp", action="store_true",
                   help="add mixed-precision rows: autocast + GradScaler in both libraries")
    p.add_argument("--amp-dtype", default="float16", choices=("float16", "bfloat16"),
                   help="the autocast dtype of the --amp rows")
    p.add_argument("--unfused", action="store_true",
                   help="cifar_cnn: BatchNorm2d and ReLU as two modules (as torch's model)")
    p.add_argument("--json", default=None, help="write the rows to this file")
    p.add_argument(blas_env.KEEP, action="store_true",
                   help="keep OPENBLAS_CORETYPE / L2_SIZE (unset by default: bench/blas_env.py)")
    p.add_argument("--plot", default=None, help="a bar chart of the ratios (PNG; needs matplotlib)")
    a = p.parse_args(argv)
    models = [m for m in a.models.split(",") if m]
    bad = [m for m in models if m not in MODELS]
    if bad:
        p.error(f"unknown model(s) {bad}; choose from {list(MODELS)}")
    devices = [d for d in a.devices.split(",") if d]
    try:
        import torch
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        threads = torch.get_num_threads()
    except ImportError:
        torch, threads = None, None
    print(f"# bench/models.py, {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; "
          f"torch {getattr(torch, '__version__', 'absent')} ({threads} cpu threads); "
          f"{blas_env.note()}")
    rows = []
    for name in models:
        for dev in devices:
            modes = ["eager"] + ([] if a.no_capture or dev == "cpu" else ["captured"])
            if a.amp:
                modes += ["amp"] + ([] if a.no_capture or dev == "cpu" else ["amp captured"])
            tdev = "cpu" if dev == "cpu" else "cuda"
            ref = amp_ref = None
            if torch is not None and not a.no_torch:
                (t_ms, _), t_peak = bench_torch(name, tdev, a.steps)
                ref = (t_ms, t_peak)
                if a.amp:
                    (t_ms, _), t_peak = bench_torch(name, tdev, a.steps, a.amp_dtype)
                    amp_ref = (t_ms, t_peak)
            for mode in modes:
                amp = a.amp_dtype if mode.startswith("amp") else None
                (ms, best), peak, table = bench_numr(name, dev, a.steps, mode.endswith("captured"),
                                                    a.profile, amp, not a.unfused)
                r = amp_ref if amp else ref
                row = {"model": name, "device": dev, "mode": mode, "ms": ms, "best_ms": best,
                       "peak_bytes": peak, "torch_ms": r and r[0], "torch_peak_bytes": r and r[1]}
                rows.append(row)
                print(_line(row), flush=True)
                if table:
                    print(table, flush=True)
    print()
    print("| model | device | numr | ms/step | torch ms | ratio | peak MiB | torch MiB | mem ratio |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(_line(r))
    if a.json:
        Path(a.json).write_text(json.dumps({"args": vars(a), "rows": rows}, indent=1))
    if a.plot:
        plot(rows, a.plot)
    return rows


def _line(r):
    def mib(b):
        return "" if b is None else f"{b / 2**20:.0f}"
    ratio = f"{r['ms'] / r['torch_ms']:.2f}x" if r["torch_ms"] else ""
    mem = (f"{r['peak_bytes'] / r['torch_peak_bytes']:.2f}x"
           if r["peak_bytes"] and r["torch_peak_bytes"] else "")
    t = f"{r['torch_ms']:.2f}" if r["torch_ms"] else ""
    return (f"| {r['model']} | {r['device']} | {r['mode']} | {r['ms']:.2f} | {t} | {ratio} | "
            f"{mib(r['peak_bytes'])} | {mib(r['torch_peak_bytes'])} | {mem} |")


def plot(rows, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rows = [r for r in rows if r["torch_ms"]]
    labels = [f"{r['model']}\n{r['device']} {r['mode']}" for r in rows]
    ratios = [r["ms"] / r["torch_ms"] for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(rows)), 4))
    ax.bar(range(len(rows)), ratios, color=["C0" if v <= 1 else "C3" for v in ratios])
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(range(len(rows)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("step time / torch eager (lower is better)")
    ax.set_title("numr_web vs torch, whole training steps")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    main()
