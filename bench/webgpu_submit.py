"""Host cost of a queue submit on webgpu: 512 small adds (256 x 256 float32, fusion off, so one
dispatch each) with a submit after every dispatch (submit_bytes=1) against the default runs
(16, 32, ... 256 dispatches a submit). The difference per add is a submit's host cost.

    python bench/webgpu_submit.py

It imports numr_web from the checkout it lies in.
"""
from __future__ import annotations

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numr_web as nr  # noqa: E402


def main():
    be = nr.get_backend("webgpu")
    be.fuse = False
    a = nr.randn((256, 256), device="webgpu", seed=0)
    b = nr.randn((256, 256), device="webgpu", seed=1)
    for sb in (1, 0, 1, 0):
        be.submit_bytes = sb
        (a + b).sum().item()
        t = time.perf_counter()
        x = a
        for _ in range(512):
            x = x + b
        t1 = time.perf_counter()
        x.sum().item()
        t2 = time.perf_counter()
        what = "a submit every dispatch" if sb else "runs of 16, 32, ... 256"
        print(f"{what:>24}: host {1e6 * (t1 - t) / 512:.1f} us an add, "
              f"with the GPU {1e6 * (t2 - t) / 512:.1f} us")


if __name__ == "__main__":
    main()
