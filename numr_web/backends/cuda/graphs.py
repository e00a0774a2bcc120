"""Recording a step into a CUDA graph (the device half of nr.capture; numr_web/capture.py holds the
device-independent half: signatures, state carried between replays, the eager fallback).

While recording, every allocation comes from a memory pool private to the graph (so that no
address the graph writes is ever handed to anyone else, which replays would then overwrite), the
work goes to a non-blocking capture stream in relaxed mode, and readbacks are refused with a typed
error before they reach the device. The graph is launched on the caller's current stream, so it
is ordered with eager work like any kernel.
"""
from __future__ import annotations

from ...errors import KernelError


class Recording:
    def __init__(self, be):
        import cupy
        self._cp = cupy
        self.be = be
        self.pool = cupy.cuda.MemoryPool()
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.host = []                      # pinned host buffers the graph's copy nodes read
        self._ctx = []

    def begin(self):
        be, cp = self.be, self._cp
        be.raise_failed_checks()            # pending checks belong to the eager steps before
        cp.cuda.get_current_stream().synchronize()
        alloc = cp.cuda.using_allocator(self.pool.malloc)
        alloc.__enter__()
        self._ctx.append(alloc)
        self.stream.__enter__()
        self._ctx.append(self.stream)
        try:
            self.stream.begin_capture()
        except Exception:
            self._exit()
            raise
        be.capturing, be._recording = True, self

    def upload(self, arr):
        """Host data uploaded inside the step: copied once into pinned memory this recording
        keeps, and recorded as an asynchronous copy, so every replay uploads the same values
        (a copy from pageable memory would read whatever the freed host buffer holds later)."""
        import numpy
        cp = self._cp
        out = cp.empty(arr.shape, arr.dtype)                # from the graph's private pool
        if arr.size:
            mem = cp.cuda.alloc_pinned_memory(arr.nbytes)
            numpy.frombuffer(mem, arr.dtype, arr.size)[:] = arr.reshape(-1)
            self.host.append(mem)
            # the runtime call itself: ndarray.set refuses a capturing stream
            cp.cuda.runtime.memcpyAsync(out.data.ptr, mem.ptr, arr.nbytes,
                                        cp.cuda.runtime.memcpyHostToDevice, self.stream.ptr)
        return out

    def end(self):
        """The recorded graph (uploaded, ready to launch)."""
        try:
            graph = self.stream.end_capture()
        except Exception as e:
            raise KernelError(f"cuda step capture failed: {type(e).__name__}: {e}") from None
        finally:
            self._exit()
        graph.upload()
        return graph

    def abort(self):
        try:
            if self.stream.is_capturing():
                self.stream.end_capture()
        except Exception:                   # an invalidated capture: nothing to keep
            pass
        finally:
            self._exit()

    def _exit(self):
        self.be.capturing, self.be._recording = False, None
        while self._ctx:
            self._ctx.pop().__exit__(None, None, None)
