"""Memory statistics of the cuda device (torch.cuda.memory_allocated and friends) over CuPy's
default memory pool, where every tensor's storage comes from:

  * allocated: the bytes of the pool's blocks in use (pool.used_bytes());
  * reserved: the bytes the pool holds from the GPU, in use or cached (pool.total_bytes());
  * peak reserved: the pool only grows until its cache is emptied, so the peak is the larger of
    the total now and the total before each empty_cache() since the last reset;
  * peak allocated: CuPy keeps no high-water mark, so it is recorded at allocation, by an
    allocator around the pool's that reads the bytes in use after each allocation. That costs a
    sum over the live blocks per allocation, so it runs only once asked for: from the first
    reset_peak() or peak_allocated() on (torch.cuda.reset_peak_memory_stats() before the work
    measures it).

A captured step's temporaries live in its graph's private pool (graphs.py) and are not counted.
"""
from __future__ import annotations

import threading

from ...errors import NumrError


class MemoryStats:
    def __init__(self, cupy):
        self._cp = cupy
        self.pool = cupy.get_default_memory_pool()
        self._tracking = False
        self._peak = 0
        self._peak_reserved = 0
        self._lock = threading.Lock()

    def allocated(self):
        return self.pool.used_bytes()

    def reserved(self):
        return self.pool.total_bytes()

    @property
    def tracking(self):
        return self._tracking

    def _malloc(self, size):
        mem = self._base(size)
        used = self.pool.used_bytes()
        if used > self._peak:
            self._peak = used
        return mem

    def track(self):
        """Start recording the peak of allocated bytes (a no-op once started)."""
        with self._lock:
            if self._tracking:
                return
            cuda = self._cp.cuda
            base = cuda.get_allocator()
            if base != self.pool.malloc:
                raise NumrError("cuda memory statistics read CuPy's default memory pool, but "
                                "another allocator is installed (cupy.cuda.set_allocator); "
                                "restore the default pool's to use them")
            self._base = base
            try:
                cuda.set_allocator(self._malloc)
            except ValueError:        # inside cupy.cuda.using_allocator (a step being captured)
                raise NumrError("cuda memory statistics cannot start while a step is being "
                                "captured; start them (reset_peak_memory_stats()) before "
                                "nr.capture records") from None
            self._peak = self.allocated()
            self._tracking = True

    def peak_allocated(self):
        self.track()
        return max(self._peak, self.allocated())

    def peak_reserved(self):
        return max(self._peak_reserved, self.reserved())

    def reset_peak(self):
        """Peaks from now on: both restart from the current values."""
        self.track()
        self._peak = self.allocated()
        self._peak_reserved = self.reserved()

    def empty_cache(self):
        """Give the pool's cached (unused) blocks back to the GPU; the reserved peak keeps the
        total they made up."""
        self._peak_reserved = self.peak_reserved()
        self.pool.free_all_blocks()


_stats = None
_stats_lock = threading.Lock()


def memory_stats():
    """The process's MemoryStats (CuPy has one default pool per process)."""
    global _stats
    with _stats_lock:
        if _stats is None:
            import cupy
            _stats = MemoryStats(cupy)
        return _stats
