"""Device time of webgpu work for nr.profile.

Where the adapter grants `timestamp-query`, every dispatch recorded while a profile times this
device runs in a compute pass of its own with timestamp writes at its beginning and end (the
adapter's `submit(..., timed=True)`); `finish` reads them back, and a mark is the number of
dispatches recorded so far, so an op's device time is the sum over the dispatches it recorded.
A fused elementwise chain (fusion.py) runs as one kernel recorded by whatever op flushed it: its
time is its own row, named by its ops, and no op's. Without timestamps, but where the adapter can
wait for the GPU, a mark submits the recorded work and waits for it (each op then costs a round
trip, and fused chains are timed with the op that flushed them); elsewhere (a browser without
JSPI) the device is not timed.
"""
from __future__ import annotations

import time

from ..base import HostTimer

FUSED_PREFIX = "fused: "


class TimestampTimer:
    def __init__(self, dispatcher):
        self.d = dispatcher
        dispatcher.flush()                  # work recorded before the profile is not its
        dispatcher.timing = []              # the name of each dispatch recorded from now on
        self.ms = None
        self._own = None                    # prefix sums of the non-fused dispatches' times

    def mark(self):
        return len(self.d.timing) if self.d.timing is not None else None

    def finish(self):
        d = self.d
        d.flush()
        names, d.timing = d.timing, None
        self.ms = d.adapter.read_timings()
        self.names = names[:len(self.ms)]
        own = [0.0]
        for name, ms in zip(self.names, self.ms):
            own.append(own[-1] + (0.0 if name.startswith(FUSED_PREFIX) else ms))
        self._own = own

    def elapsed_ms(self, m0, m1):
        if m0 is None or m1 is None or self._own is None:
            return None
        n = len(self._own) - 1
        return self._own[min(m1, n)] - self._own[min(m0, n)]

    def extra_rows(self):
        return [(n, ms) for n, ms in zip(self.names, self.ms) if n.startswith(FUSED_PREFIX)]


class WaitTimer(HostTimer):
    """Wall clock around each op, the GPU waited for at every mark."""

    def __init__(self, dispatcher):
        self.d = dispatcher

    def mark(self):
        d = self.d
        d._submit()
        d.adapter.read_buffer(d.wait_buffer, 0, 4)
        return time.perf_counter_ns()


def timer(backend):
    d = backend.d
    if "timestamp-query" in backend.adapter.features and d.recording is None:
        return TimestampTimer(d)
    if backend.adapter.can_block:
        return WaitTimer(d)
    return None
