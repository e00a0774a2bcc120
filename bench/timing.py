"""The timing the benchmarks share: the median of repeated calls after warm-ups."""
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
