"""Device time of one training step on cuda, kernel by kernel, numr beside torch: both steps run
under torch.profiler (CUPTI records every kernel of the process, CuPy's included), and the kernels'
own durations are summed by name, largest first, with the total of each side. Kernel durations do
not depend on how the host launched them, so the eager numr step is profiled: its kernels are the
captured step's.

    python bench/cuda_step_kernels.py [--models nanogpt] [--amp float16] [--top 25]

The models and their steps are bench/models.py's. It imports numr_web from the checkout it lies in.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import models as M  # noqa: E402


def _device_us(e):
    for attr in ("self_device_time_total", "self_cuda_time_total", "device_time_total",
                 "cuda_time_total"):
        v = getattr(e, attr, None)
        if v:
            return v
    return 0.0


def kernel_times(step, sync, warmup=3):
    """{kernel name: (calls, ms)} of one step."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    for _ in range(warmup):
        step()
    sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        step()
        sync()
    out = collections.Counter()
    calls = collections.Counter()
    for e in prof.key_averages():
        us = _device_us(e)
        if us and e.device_type == torch.autograd.DeviceType.CUDA:
            out[e.key] += us / 1000.0
            calls[e.key] += e.count
    return out, calls


def numr_step(name, amp):
    train_step, x, y = M.numr_training_step(name, "cuda", amp=amp)
    box = {}

    def step():
        box["loss"] = train_step(x, y)
    return step, lambda: box["loss"].item()


def torch_step(name, amp):
    return M.torch_training_step(name, "cuda", amp)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="nanogpt")
    p.add_argument("--amp", default=None, help="float16 or bfloat16 (default: float32)")
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    for name in a.models.split(","):
        for who, make in (("numr", numr_step), ("torch", torch_step)):
            total, calls = kernel_times(*make(name, a.amp))
            print(f"== {name} {a.amp or 'float32'} {who}: {sum(calls.values())} kernels, "
                  f"{sum(total.values()):.3f} ms")
            for k, t in total.most_common(a.top):
                print(f"{t:8.3f} ms {calls[k]:4d}  {k[:110]}")


if __name__ == "__main__":
    main()
