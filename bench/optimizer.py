"""One optimizer step over a whole model's parameters, numr_web against torch in the same process:
AdamW over nanoGPT's 10.7M parameters (76 tensors) and SGD with momentum over the CIFAR-shaped
net's (18 tensors), their shapes taken from bench/models.py's models. Median ms of --reps steps
(each ending with a one-element readback, which waits for the device) after two warm-ups; torch's
default optimizer (its multi-tensor "foreach" form on cuda) and, on cuda, fused=True; torch on
the same device kind (cpu, or cuda for numr's cuda and webgpu; none where torch has no cuda).

    python bench/optimizer.py --devices cpu,cuda,webgpu [--reps 20]
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)   # numr_web from this checkout
sys.path.insert(1, str(Path(__file__).resolve().parent))

from timing import median_ms  # noqa: E402

SETS = {"nanogpt": "AdamW", "cifar_cnn": "SGD"}
KWARGS = {"AdamW": dict(lr=3e-4), "SGD": dict(lr=0.01, momentum=0.9)}


def shapes(model):
    """The parameter shapes of bench/models.py's model (built on the cpu)."""
    from models import numr_model
    net = numr_model(model, "cpu")[0]
    return [tuple(p.shape) for p in net.parameters()]


def _data(shapes_):
    import numpy as np
    r = np.random.default_rng(0)
    return [(r.standard_normal(s).astype(np.float32), r.standard_normal(s).astype(np.float32))
            for s in shapes_]


def numr_ms(device, shapes_, opt_name, reps):
    import numr_web as nr
    from numr_web import nn
    ps = []
    for p, g in _data(shapes_):
        ps.append(nn.Parameter(nr.tensor(p, device=device)))
        ps[-1].grad = nr.tensor(g, device=device)
    opt = getattr(nn.optim, opt_name)(ps, **KWARGS[opt_name])

    def step():
        opt.step()
        ps[-1].reshape(-1)[:1].tolist()
    return median_ms(step, reps, warmups=2)


def torch_ms(device, shapes_, opt_name, reps, **extra):
    import torch
    ps = []
    for p, g in _data(shapes_):
        ps.append(torch.nn.Parameter(torch.tensor(p, device=device)))
        ps[-1].grad = torch.tensor(g, device=device)
    opt = getattr(torch.optim, opt_name)(ps, **KWARGS[opt_name], **extra)

    def step():
        opt.step()
        ps[-1].view(-1)[:1].tolist()
    return median_ms(step, reps, warmups=2)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", default="cpu")
    p.add_argument("--models", default=",".join(SETS))
    p.add_argument("--reps", type=int, default=20)
    p.add_argument("--no-torch", action="store_true")
    a = p.parse_args()
    print("| device | parameters | optimizer | numr ms | torch ms (default / fused) | ratio |")
    print("|---|---|---|---:|---:|---:|")
    for model in a.models.split(","):
        sh, opt = shapes(model), SETS[model]
        label = f"{model} ({len(sh)} tensors, {sum(math.prod(s) for s in sh) / 1e6:.2f}M)"
        for device in a.devices.split(","):
            ours = numr_ms(device, sh, opt, a.reps)
            theirs, fused = None, None
            tdev = _torch_device(device) if not a.no_torch else None
            if tdev is not None:
                theirs = torch_ms(tdev, sh, opt, a.reps)
                if tdev == "cuda":
                    fused = torch_ms(tdev, sh, opt, a.reps, fused=True)
            t = "" if theirs is None else f"{theirs:.3f}" + ("" if fused is None
                                                               else f" / {fused:.3f}")
            ratio = "" if theirs is None else f"{ours / min(theirs, fused or theirs):.2f}x"
            print(f"| {device} | {label} | {opt} | {ours:.3f} | {t} | {ratio} |", flush=True)


def _torch_device(device):
    """torch's device beside numr's: cpu for cpu, cuda for a GPU (None: no such torch)."""
    import torch
    if device == "cpu":
        return "cpu"
    return "cuda" if torch.cuda.is_available() else None


if __name__ == "__main__":
    main()
