"""Softmax cross-entropy with class labels, forward + backward, numr_web against torch in the same
process: the CIFAR-shaped net's head (128 x 10), nanoGPT's logits (16384 x 65) and a GPT-2-sized
vocabulary (2048 x 50257). Median ms of --reps steps (loss, backward, a readback of the loss)
after two warm-ups; torch on the same device kind (cpu, or cuda for numr's cuda and webgpu).

    python bench/cross_entropy.py --devices cpu,webgpu [--reps 15]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path[0] = str(Path(__file__).resolve().parent.parent)   # numr_web from this checkout
sys.path.insert(1, str(Path(__file__).resolve().parent))

from timing import median_ms  # noqa: E402

SHAPES = ((128, 10), (16384, 65), (2048, 50257))


def numr_ms(device, rows, classes, reps):
    import numpy as np
    import numr_web as nr
    r = np.random.default_rng(0)
    x = nr.tensor(r.standard_normal((rows, classes)).astype(np.float32), device=device,
                  requires_grad=True)
    y = nr.tensor(r.integers(0, classes, rows).astype(np.int32), device=device)

    def step():
        loss = nr.cross_entropy(x, y)
        loss.backward()
        x.grad = None
        loss.item()
    return median_ms(step, reps, warmups=2)


def torch_ms(device, rows, classes, reps):
    import numpy as np
    import torch
    r = np.random.default_rng(0)
    x = torch.tensor(r.standard_normal((rows, classes)).astype(np.float32), device=device,
                     requires_grad=True)
    y = torch.tensor(r.integers(0, classes, rows), device=device)

    def step():
        loss = torch.nn.functional.cross_entropy(x, y)
        loss.backward()
        x.grad = None
        loss.item()
    return median_ms(step, reps, warmups=2)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--devices", default="cpu")
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--no-torch", action="store_true")
    a = p.parse_args()
    print("| device | rows x classes | numr ms | torch ms | ratio |")
    print("|---|---|---:|---:|---:|")
    for dev in a.devices.split(","):
        tdev = "cpu" if dev == "cpu" else "cuda"
        for rows, classes in SHAPES:
            ours = numr_ms(dev, rows, classes, a.reps)
            theirs = None
            if not a.no_torch:
                try:
                    theirs = torch_ms(tdev, rows, classes, a.reps)
                except (ImportError, RuntimeError, AssertionError):
                    theirs = None
            ratio = f"{ours / theirs:.2f}x" if theirs else ""
            print(f"| {dev} | {rows} x {classes} | {ours:.3f} | "
                  f"{'' if theirs is None else f'{theirs:.3f}'} | {ratio} |", flush=True)


if __name__ == "__main__":
    main()
