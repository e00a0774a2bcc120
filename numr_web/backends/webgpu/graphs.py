"""Recording a step's dispatches for nr.capture on webgpu (the device half; numr_web/capture.py holds
the device-independent half: signatures, state carried between replays, the eager fallback).

WebGPU command buffers are single-use and compute passes have no bundles, so a recorded step is its
list of dispatches (pipeline, bound buffer ranges, workgroup counts) with every dispatch's metadata
block in a uniform arena of its own, written once; a replay encodes that list and submits it in
runs of growing length (submit_runs): the GPU starts on the first while the host encodes the next,
instead of idling until the whole step is encoded. What a replay saves is the Python work of an
eager step: autograd, validation, shape algebra, kernel selection, metadata packing, one launch at
a time.

While recording, allocations come from a pool private to the recording (no buffer a replay writes
is ever handed to anyone else), every storage a dispatch binds is kept alive with the recording (a
buffer the step reads cannot be recycled under it), host data the step uploads (nr.tensor inside
the step) is written again before each replay with the bytes it had when recorded, and readbacks
are refused with a typed error before they reach the device.
"""
from __future__ import annotations

from ...errors import KernelError
from .adapter import Binding
from .buffers import BufferPool
from .dispatch import FIRST_RUN, next_run
from .contract import META_BINDING, META_BYTES


def submit_runs(dispatches):
    """The dispatches cut into runs of FIRST_RUN, then next_run's lengths (as an eager step's
    submits after a readback): the GPU starts on a short first run while the host encodes the
    longer ones after it, and a step of n dispatches costs about log2(n / FIRST_RUN) submits."""
    runs, start, size = [], 0, FIRST_RUN
    while start < len(dispatches):
        runs.append(dispatches[start:start + size])
        start, size = start + size, next_run(size)
    return runs


class Recording:
    def __init__(self, be):
        self.d = be.d
        self.pool = BufferPool(self.d.adapter, self.d.max_buffer, lambda: True)
        self.dispatches = []
        self._meta = bytearray()
        self._meta_bindings = []          # this recording's own (not those of graphs it replays)
        self._keep = {}
        self._uploads = []
        self._shared = None

    # -- called by the dispatcher while recording -----------------------------------------------------
    def meta(self, block):
        """The metadata binding of the next dispatch (its arena is created by `end`)."""
        off = len(self._meta)
        self._meta += block
        b = Binding(META_BINDING, None, off, META_BYTES)
        self._meta_bindings.append(b)
        return b

    def keep(self, obj):
        self._keep[id(obj)] = obj

    def upload(self, storage, data):
        self.keep(storage)
        self._uploads.append((storage, data))

    # -- called by capture.py ----------------------------------------------------------------------------
    def begin(self):
        d = self.d
        if d.recording is not None:
            raise KernelError("nr.capture: another step is being recorded on this device")
        d.flush()                          # eager work so far goes first, on the shared arena
        self._shared, d.pool = d.pool, self.pool
        d.recording = self

    def end(self):
        """The recorded step, ready to launch."""
        self.d.fusion.flush()              # a pending fused chain of the step belongs to it
        self._exit()
        arena = None
        if self._meta:
            arena = self.d.adapter.create_buffer(len(self._meta), "uniform")
            self.d.adapter.write_buffer(arena, 0, bytes(self._meta))
            for b in self._meta_bindings:
                b.buffer = arena
        return Graph(self.d, self.dispatches, arena, self._keep, self._uploads)

    def abort(self):
        self._exit()

    def _exit(self):
        if self.d.recording is self:
            self.d.pool, self.d.recording = self._shared, None


class Graph:
    def __init__(self, d, dispatches, arena, keep, uploads):
        self.d, self.dispatches, self.arena = d, dispatches, arena
        self.keep, self.uploads = keep, uploads
        self.runs = submit_runs(dispatches)
        self.counts = {}
        for disp in dispatches:
            self.counts[disp.label] = self.counts.get(disp.label, 0) + 1

    def launch(self):
        """Submit the recorded dispatches after the eager work recorded so far (inside another
        recording: append them to it)."""
        d = self.d
        rec = d.recording
        if rec is not None:
            d.fusion.flush()               # what the outer step recorded so far goes first
            rec.keep(self)
            for st, data in self.uploads:
                rec.upload(st, data)
            rec.dispatches.extend(self.dispatches)
            return
        d.flush()
        for st, data in self.uploads:
            d.adapter.write_buffer(st.raw, 0, data)
        for run in self.runs:
            d.adapter.submit(run)
            d.submits += 1
            d.pool.submits += 1
        for label, n in self.counts.items():
            d.counts[label] = d.counts.get(label, 0) + n
