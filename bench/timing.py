"""The timing the benchmarks share: the median of repeated calls after warm-ups; the device time
of each webgpu dispatch of a call."""
from __future__ import annotations

import statistics
import time


def median_ms(fn, reps, warmups=1):
    """Median milliseconds of `reps` calls of fn(), after `warmups` calls."""
    for _ in range(warmups):
        fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def webgpu_dispatch_ms(fn, rounds=2):
    """[(kernel, ms)] of every dispatch of fn() on the webgpu backend, each in a compute pass of
    its own between timestamps (the adapter must grant `timestamp-query`); the last of `rounds`
    calls (the first warms the timer). fn must wait for its results (e.g. .item())."""
    import numr_web as nr
    d = nr.get_backend("webgpu").d
    for _ in range(rounds):
        d.flush()
        d.timing = []
        fn()
        d.flush()
        names, d.timing = d.timing, None
        ms = d.adapter.read_timings()
    return list(zip(names, ms))
