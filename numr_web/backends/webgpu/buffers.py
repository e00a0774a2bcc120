"""GPU memory: a pool of buffers by size class, returned to the pool when no handle uses them.

`Storage` owns one adapter buffer; every view (GPUArray) of it holds a reference, and a
weakref.finalize puts the buffer back into the free list of its size class when the last view dies.

Hazard handled here: GPUQueue.writeBuffer is ordered before *unsubmitted* command buffers, so a
buffer released while still referenced by recorded-but-unsubmitted dispatches must not be handed to
an upload (`alloc(..., upload=True)`) before the next submit. Kernel outputs may reuse it at once
(dispatches execute in recording order).

Allocations remember their place: the k-th allocation of a size class since the last readback
(`new_round`, called by every readback: once a step in a training loop) takes, when it is free,
the buffer the k-th took in the round before, or (a place whose last buffer was still held when
it came round: a parameter an optimizer rebinds each step) its second buffer, which no other
place's miss may take. A step's dispatches then bind the same buffers every step, and the
adapter's cached bind groups (one per pipeline and buffer set) are found instead of made again
(making one costs ~200 us in wgpu-native on the H200).
"""
from __future__ import annotations

import weakref

from ...errors import BackendLimitError

MIN_BYTES = 256
PLACES = 1 << 16        # allocations per size class and round whose buffers are remembered


def size_class(nbytes):
    """Round up to 4 classes per power of two (<= 25% waste), at least 256 bytes."""
    n = max(int(nbytes), MIN_BYTES)
    top = 1 << (n - 1).bit_length()          # next power of two >= n
    step = max(top // 8, MIN_BYTES)          # classes: top/2 + k*top/8
    return -(-n // step) * step


class Storage:
    __slots__ = ("raw", "nbytes", "__weakref__")

    def __init__(self, raw, nbytes):
        self.raw, self.nbytes = raw, nbytes


class BufferPool:
    def __init__(self, adapter, max_buffer_size, has_pending=lambda: False):
        self.adapter = adapter
        self.max_buffer_size = max_buffer_size
        self.has_pending = has_pending
        self.free: dict = {}         # size class -> {id(raw): (raw, submit count at release)}
        self.submits = 0             # bumped by the backend after every queue submit
        self.created = 0             # buffers ever created (stable once a workload warms up)
        self.live = 0                # buffers held by Storage objects
        self.bytes_total = 0         # bytes of all buffers the pool owns (live + free)
        self._round: dict = {}       # size class -> allocations of it since new_round()
        self._placed: dict = {}      # (size class, k) -> (id of the buffer taken, and before)
        self._alt: dict = {}         # size class -> {buffer id: the k whose second buffer it is}

    def alloc(self, nbytes, upload=False):
        cls = size_class(nbytes)
        if cls > self.max_buffer_size:
            raise BackendLimitError(
                f"a tensor of {nbytes} bytes exceeds the adapter's maxBufferSize "
                f"({self.max_buffer_size} bytes)")
        raw = None
        free = self.free.get(cls)
        k = self._round.get(cls, 0)
        self._round[cls] = k + 1
        placed = self._placed.get((cls, k), ())
        alt = self._alt.setdefault(cls, {})
        if free:
            if not upload or not self.has_pending():
                key = next((p for p in placed if p in free), None)
                if key is None:      # a miss: a buffer no other place keeps for its next value
                    key = next((p for p in free if alt.get(p, k) == k), None)
                if key is not None:
                    raw = free.pop(key)[0]
            else:
                for key in reversed(list(free)):
                    if free[key][1] < self.submits and alt.get(key, k) == k:
                        raw = free.pop(key)[0]
                        break
        if raw is None:
            raw = self.adapter.create_buffer(cls, "storage")
            self.created += 1
            self.bytes_total += cls
        if k < PLACES:
            self._place(cls, k, placed, id(raw), alt)
        st = Storage(raw, cls)
        self.live += 1
        weakref.finalize(st, self._release, raw, cls)
        return st

    def _place(self, cls, k, placed, got, alt):
        """Remember the buffer the k-th allocation took. A place keeps a second buffer only when
        it needed one (its last buffer was still held: a value replaced each step, as an
        optimizer's, alternates between two), and no other place's miss takes that second one:
        without it a miss took another place's spare, which then missed in turn, round after
        round, each making its bind groups anew."""
        if placed and got == placed[0]:
            return
        if len(placed) > 1 and got == placed[1]:
            new = (got, placed[0])
        elif placed and placed[0] not in self.free.get(cls, ()):
            new = (got, placed[0])   # the last buffer was still held: keep both
        else:
            new = (got,)
        for p in placed[1:]:
            if alt.get(p) == k:
                del alt[p]
        for p in new[1:]:
            alt[p] = k
        self._placed[(cls, k)] = new

    def _release(self, raw, cls):
        self.live -= 1
        self.free.setdefault(cls, {})[id(raw)] = (raw, self.submits)

    def new_round(self):
        """A readback: the next allocations are a new round (see the module docstring)."""
        self._round.clear()

    def trim(self):
        """Destroy every free buffer (gives the memory back to the driver)."""
        for cls, lst in self.free.items():
            for raw, _ in lst.values():
                self.adapter.destroy_buffer(raw)
                self.bytes_total -= cls
        self.free.clear()
        self._placed.clear()         # their ids may be reused by new buffers
        self._alt.clear()

    def stats(self):
        return {"created": self.created, "live": self.live,
                "free": sum(len(v) for v in self.free.values()), "bytes": self.bytes_total}
