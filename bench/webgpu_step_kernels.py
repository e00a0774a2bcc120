"""Device time of one eager training step on webgpu, kernel by kernel: every dispatch of the step
runs in a compute pass of its own with timestamps (the adapter must grant `timestamp-query`),
summed by kernel (file.entry point) and printed largest first with its dispatch count.
nr.profile gives the same times by op; this groups them by the kernel that ran.

    python bench/webgpu_step_kernels.py [--models cifar_cnn,nanogpt] [--top 28] [--by-grid]

--by-grid keeps dispatches of one kernel with different workgroup grids apart (a GEMM's grid
tells its output shape and tile), to find the calls of a kernel that take the time.

The models and their steps are bench/models.py's (numr_training_step). It imports numr_web
from the checkout it lies in.
"""
from __future__ import annotations

import argparse
import collections
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, HERE)

import numr_web as nr  # noqa: E402
import models as M  # noqa: E402
from timing import webgpu_dispatch_ms  # noqa: E402


def kernel_times(name, rounds=2, by_grid=False):
    train_step, x, y = M.numr_training_step(name, "webgpu")
    for _ in range(3):
        train_step(x, y).item()
    d = nr.get_backend("webgpu").d
    grids = []
    if by_grid:                             # the grid of each dispatch, beside its timing label
        launch = d.launch_pipeline

        def launch_pipeline(pipe, kfile, entry, words, bufs, groups, profile_name=None):
            if d.timing is not None:
                grids.append(tuple(groups))
            return launch(pipe, kfile, entry, words, bufs, groups, profile_name)
        d.launch_pipeline = launch_pipeline
    def step():
        grids.clear()
        train_step(x, y).item()
    times = webgpu_dispatch_ms(step, rounds)
    if by_grid:
        times = [(f"{n} {g}", t) for (n, t), g in zip(times, grids)]
    total, count = collections.Counter(), collections.Counter()
    for n, t in times:
        total[n] += t
        count[n] += 1
    return total, count


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="cifar_cnn,nanogpt")
    p.add_argument("--top", type=int, default=28)
    p.add_argument("--by-grid", action="store_true", help="a kernel's grids apart")
    a = p.parse_args()
    if "timestamp-query" not in nr.get_backend("webgpu").adapter.features:
        sys.exit("this WebGPU adapter does not grant timestamp-query")
    for name in a.models.split(","):
        total, count = kernel_times(name, by_grid=a.by_grid)
        print(f"== {name}: {sum(count.values())} dispatches, {sum(total.values()):.3f} ms")
        for n, t in total.most_common(a.top):
            print(f"{t:8.3f} ms {count[n]:4d}  {n}")


if __name__ == "__main__":
    main()
