"""Device time of cuda work for nr.profile: a CUDA event recorded on the current stream at each
mark (no wait); `finish` synchronises the stream and the events give the elapsed times. While a
step is being captured into a CUDA graph nothing is timed (an event recorded into a capture
times nothing)."""
from __future__ import annotations


class CudaTimer:
    def __init__(self, backend):
        self.be = backend
        self.cuda = backend.xp.cuda

    def mark(self):
        if self.be.capturing:
            return None
        e = self.cuda.Event()
        e.record()
        return e

    def elapsed_ms(self, e0, e1):
        if e0 is None or e1 is None:
            return None
        return self.cuda.get_elapsed_time(e0, e1)

    def finish(self):
        self.cuda.get_current_stream().synchronize()

    @staticmethod
    def extra_rows():
        return ()


def timer(backend):
    return CudaTimer(backend)
