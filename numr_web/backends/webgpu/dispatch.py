"""Recording dispatches: the metadata arena, batching into queue submits, binding ranges, memory.

Every launch writes its metadata block (contract.META_WORDS words, named per kernel file in
contract.py) into slot k of a host copy of the arena, binds slot k of the uniform arena buffer at
binding 0 and its storage buffers by name, and records a Dispatch. `flush` uploads the used part
of the arena and submits every recorded dispatch in one queue submit; it runs when a run is
complete (FIRST_RUN dispatches after a readback, then twice as many, up to BATCH) and before any
readback. A binding an entry point declares but the
launcher does not pass (an operand given as a scalar, no bias...) gets a small dummy buffer.
While nr.capture records a step (`recording`, see graphs.py), launches go to the recording instead,
allocations to its private pool, and every storage bound or uploaded is kept alive with it.
"""
from __future__ import annotations

import struct

from ...errors import BackendLimitError, BackendUnavailableError, KernelError
from .adapter import Binding, Dispatch
from .buffers import BufferPool
from .fusion import Fuser
from .contract import FUSED_BUFFERS, GENERATED, KERNELS, MAX_GROUPS, META_BINDING, META_BYTES, META_WORDS, WG
from .kernels import KernelCache
from .views import ITEMSIZE, GPUArray, byte_range, prod

BATCH = 256                       # dispatches per queue submit at most (metadata arena slots)
# After a flush (a readback) the recorded dispatches go out in runs of FIRST_RUN, twice that, ...
# up to BATCH: the GPU starts early on a short run while Python records the next, longer ones,
# and a step pays a few submits, not one per large op (a submit's host cost and the A/B:
# docs/benchmarks.md). SUBMIT_BYTES: also submit once the pending dispatches bind this many
# bytes (0: off; a bytes trigger submitted for nearly every op of a nanoGPT-sized step).
FIRST_RUN = 16
SUBMIT_BYTES = 0
DUMMY_BYTES = 256
_PACK = struct.Struct(f"<{META_WORDS}I")


def next_run(size):
    """The length of the run after one of `size` dispatches (eager submits and replays alike)."""
    return min(2 * size, BATCH)


def grid_1d(n, cap=MAX_GROUPS):
    """Workgroups of WG invocations for n work items (one each): at most `cap` workgroups, laid
    out in a 2-D grid of at most MAX_GROUPS per dimension; the kernels' grid-stride loops cover
    the rest."""
    groups = min(max(1, -(-n // WG)), cap)
    gx = min(groups, MAX_GROUPS)
    return (gx, -(-groups // gx), 1)


def grid_per_item(n):
    """One workgroup per item (the *_wg reductions), capped; the kernels loop over the rest."""
    n = max(1, min(n, MAX_GROUPS * 64))
    gx = min(n, MAX_GROUPS)
    return (gx, -(-n // gx), 1)


class Dispatcher:
    def __init__(self, adapter, binding_limit, max_workgroups=MAX_GROUPS):
        self.adapter = adapter
        lim = adapter.limits
        self.binding_limit = binding_limit
        self.max_workgroups = max(1, min(int(max_workgroups), MAX_GROUPS * MAX_GROUPS))
        self.align = max(int(lim.get("minStorageBufferOffsetAlignment") or 256), 4)
        ualign = int(lim.get("minUniformBufferOffsetAlignment") or 256)
        if META_BYTES % ualign:
            raise BackendUnavailableError(f"minUniformBufferOffsetAlignment {ualign} > {META_BYTES}")
        self.max_buffer = int(lim.get("maxBufferSize") or (256 << 20))
        self.kernels = KernelCache.of(adapter)
        self.pending = []
        self.pending_bytes = 0        # bytes the pending dispatches bind
        self.submit_bytes = SUBMIT_BYTES
        self._run = FIRST_RUN         # dispatches the next submit waits for (grows, see BATCH)
        self._meta = bytearray(BATCH * META_BYTES)
        self.pool = BufferPool(adapter, self.max_buffer, lambda: bool(self.pending))
        self._arena = adapter.create_buffer(BATCH * META_BYTES, "uniform")
        self._dummy = {"read": adapter.create_buffer(DUMMY_BYTES, "storage"),
                       "read_write": adapter.create_buffer(DUMMY_BYTES, "storage")}
        self._specs: dict = {}
        self.submits = 0
        self.counts: dict = {}        # "file.entry" -> dispatches recorded
        self.recording = None         # a graphs.Recording while nr.capture records a step
        self.timing = None            # names of the dispatches recorded while nr.profile times
        # elementwise ops recorded lazily and run as one kernel (fusion.py); this device's own
        self.fusion = Fuser(self, min(FUSED_BUFFERS, int(lim.get("maxStorageBuffersPerShaderStage")
                                                         or FUSED_BUFFERS)))

    def set_submit_bytes(self, n):
        if not isinstance(n, int) or isinstance(n, bool) or n < 0:
            raise BackendUnavailableError(f"submit_bytes (NUMR_WEBGPU_SUBMIT_BYTES) must be an "
                                          f"integer >= 0 (0: submit by count only), got {n!r}")
        self.submit_bytes = n

    # -- recording and submitting --------------------------------------------------------------------
    def _spec(self, kfile, entry):
        """(label, [(binding name, index, dummy buffer)]) of an entry point (from the contract)."""
        key = (kfile, entry)
        spec = self._specs.get(key)
        if spec is None:
            k = KERNELS.get(kfile) or GENERATED[kfile]
            slots = [k.slots[n] for n in k.entries[entry]]
            spec = self._specs[key] = (f"{kfile[:-5]}.{entry}",
                                       [(s.name, s.index, self._dummy[s.access]) for s in slots])
        return spec

    def launch(self, kfile, entry, dtype, consts, words, bufs, groups, out_dtype=None):
        """Record one dispatch of `entry` of `kfile`. words: the metadata block (a list of
        META_WORDS ints, see contract.py); bufs: {binding name: (buffer, byte offset, byte size)}.
        A pending fused chain (fusion.py) is recorded first: this dispatch may read its values."""
        if self.fusion.ops:
            self.fusion.flush()
        self.launch_pipeline(self.kernels.pipeline(kfile, entry, dtype, out_dtype, consts), kfile,
                             entry, words, bufs, groups)

    def launch_pipeline(self, pipe, kfile, entry, words, bufs, groups, profile_name=None):
        """Record one dispatch of a compiled pipeline of entry point `entry` of `kfile`
        (profile_name: what nr.profile calls it, the kernel's label by default)."""
        rec = self.recording
        label, slots = self._spec(kfile, entry)
        if rec is None:
            slot = len(self.pending)
            _PACK.pack_into(self._meta, slot * META_BYTES, *words)
            binds = [Binding(META_BINDING, self._arena, slot * META_BYTES, META_BYTES)]
        else:
            binds = [rec.meta(_PACK.pack(*words))]
        used = nbytes = 0
        for name, index, dummy in slots:
            r = bufs.get(name)
            if r is None:
                binds.append(Binding(index, dummy, 0, DUMMY_BYTES))
            else:
                binds.append(Binding(index, r[0], r[1], r[2]))
                used += 1
                nbytes += r[2]
        if used != len(bufs):
            raise KernelError(f"{label} has no bindings {sorted(set(bufs) - {s[0] for s in slots})}")
        (self.pending if rec is None else rec.dispatches).append(Dispatch(pipe, binds, groups, label))
        self.counts[label] = self.counts.get(label, 0) + 1
        if rec is None:
            if self.timing is not None:
                self.timing.append(profile_name or label)
            self.pending_bytes += nbytes
            # a run is complete, or large work: start it now (a pending fused chain stays open)
            sb = self.submit_bytes
            if len(self.pending) >= self._run or (sb and self.pending_bytes >= sb):
                self._run = next_run(self._run)
                self._submit()

    def flush(self):
        """Submit every recorded dispatch (one queue submit), a pending fused chain included."""
        if self.fusion.ops:
            self.fusion.flush()
        self._submit()
        self._run = FIRST_RUN

    def _submit(self):
        """Submit the recorded dispatches (not a pending fused chain)."""
        if not self.pending:
            return
        n = len(self.pending)
        self.adapter.write_buffer(self._arena, 0, bytes(self._meta[:n * META_BYTES]))
        pend, self.pending = self.pending, []
        self.pending_bytes = 0
        self.adapter.submit(pend, timed=self.timing is not None)
        self.submits += 1
        self.pool.submits += 1

    @property
    def wait_buffer(self):
        """A small buffer to read when only waiting for the GPU."""
        return self._dummy["read"]

    # -- grids -----------------------------------------------------------------------------------------
    def grid(self, n):
        return grid_1d(n, self.max_workgroups)

    @staticmethod
    def grid_wg(n):
        return grid_per_item(n)

    # -- memory ------------------------------------------------------------------------------------------
    def bind(self, t, lo, span):
        """(buffer, byte offset, byte size) and the element offset inside that binding of the
        elements [lo, lo + span) of view t's storage; BackendLimitError beyond the binding limit."""
        start, size, rel = byte_range(lo, span, t.itemsize, self.align, t.storage.nbytes)
        if size > self.binding_limit:
            raise BackendLimitError(
                f"a {t.dtype.name} tensor of shape {t.shape} needs a {size}-byte storage binding, "
                f"more than maxStorageBufferBindingSize ({self.binding_limit} bytes); this "
                f"operation cannot be split into chunks (make the tensor smaller)")
        if self.recording is not None:
            self.recording.keep(t.storage)
        return (t.storage.raw, start, size), rel

    def bind_whole(self, arr):
        """The whole storage of a dense array written from element 0 (creation kernels)."""
        if arr.storage.nbytes > self.binding_limit:
            raise BackendLimitError(
                f"a {arr.dtype.name} tensor of {arr.size} elements ({arr.storage.nbytes} bytes) "
                f"exceeds maxStorageBufferBindingSize ({self.binding_limit} bytes) for this op")
        if self.recording is not None:
            self.recording.keep(arr.storage)
        return (arr.storage.raw, 0, arr.storage.nbytes)

    def alloc(self, shape, dtype):
        st = self.pool.alloc(max(prod(shape), 1) * ITEMSIZE[dtype.name])
        return GPUArray(st, shape, dtype)

    def upload(self, raw):
        """A Storage holding the bytes `raw` (queued write, ordered before later dispatches)."""
        nbytes = len(raw)
        st = self.pool.alloc(nbytes, upload=True)
        pad = (-nbytes) % 4
        data = bytes(raw) + b"\0" * pad if pad else raw
        self.adapter.write_buffer(st.raw, 0, data)
        if self.recording is not None:      # written again before every replay
            self.recording.upload(st, bytes(data))
        return st
