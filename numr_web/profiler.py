"""`nr.profile()`: where a step's time goes, op by op.

    with nr.profile() as p:
        step()
    print(p.table())

Every op row that runs through `autograd.apply` is one event; so is every backward node's VJP
(named as its grad_fn, "MulBackward"), every optimizer step and every `nr.record_function(name)`
block. Events nest: an op inside a VJP is that VJP's child, so each row has a *self* time (its own
work) and a *total* time (with its children). Per row, summed over calls:

  * host time: wall clock in Python from the call to its return (launching, not waiting, on a GPU);
  * device time, where the device can time its own work: CUDA events around the op on the current
    stream (cuda); WebGPU timestamp queries around each dispatch where the adapter grants
    `timestamp-query`, else the wall clock of the op with a wait for the GPU after it (webgpu);
    the host time on cpu, whose ops run synchronously;
  * bytes of new device memory the op returned (its output arrays; views count 0).

An elementwise chain that the webgpu backend fused into one kernel runs as that kernel, so its
device time is its own row ("fused: add+mul+gelu"), not its ops'.

The active profile is a ContextVar: concurrent async tasks each see their own (or none), and code
outside a `with nr.profile()` block pays one ContextVar lookup per op.
"""
from __future__ import annotations

import contextlib
import contextvars
import time

_ACTIVE = contextvars.ContextVar("numr_profile", default=None)


def current():
    """The profile recording in this context, or None."""
    return _ACTIVE.get()


class _Event:
    __slots__ = ("name", "kind", "parent", "host_ns", "child_host_ns", "marks", "timer",
                 "bytes", "child_bytes", "device_ms", "child_device_ms")

    def __init__(self, name, kind, parent):
        self.name, self.kind, self.parent = name, kind, parent
        self.host_ns = self.child_host_ns = 0
        self.marks = self.timer = None
        self.bytes = self.child_bytes = 0
        self.device_ms = None
        self.child_device_ms = 0.0


class Row:
    """One line of the table: an event name's calls and times summed over its calls."""
    __slots__ = ("name", "kind", "calls", "self_host_ms", "host_ms", "self_device_ms",
                 "device_ms", "bytes")

    def __init__(self, name, kind):
        self.name, self.kind = name, kind
        self.calls = 0
        self.self_host_ms = self.host_ms = 0.0
        self.self_device_ms = self.device_ms = None
        self.bytes = 0

    def as_dict(self):
        return {k: getattr(self, k) for k in self.__slots__}


class Profile:
    """The recording of one `with nr.profile():` block (see the module docstring).

    device_time: False records host times only (no events on the device, no waits)."""

    def __init__(self, device_time=True):
        self.device_time = bool(device_time)
        self.events = []
        self.wall_ms = None
        self._stack = []
        self._timers = {}            # backend -> its device timer (None: cannot time)
        self._token = None
        self._done = False

    # -- the block -----------------------------------------------------------------------------------
    def __enter__(self):
        if self._token is not None or self._done:
            raise RuntimeError("a Profile records one with-block; make a new nr.profile()")
        self._token = _ACTIVE.set(self)
        self._t0 = time.perf_counter_ns()
        return self

    def __exit__(self, *exc):
        for timer in self._timers.values():
            if timer is not None:
                timer.finish()            # waits for the device; timestamps read back
        self.wall_ms = (time.perf_counter_ns() - self._t0) / 1e6
        _ACTIVE.reset(self._token)
        self._done = True
        for e in self.events:
            if e.marks is not None:
                e.device_ms = e.timer.elapsed_ms(*e.marks)
            if e.parent is not None and e.device_ms is not None:
                e.parent.child_device_ms += e.device_ms
        for timer in self._timers.values():
            for name, ms in (timer.extra_rows() if timer is not None else ()):
                e = _Event(name, "kernel", None)      # device work of no single op (fused)
                e.device_ms = ms
                self.events.append(e)
        return False

    def _timer(self, backend):
        if not self.device_time or backend is None:
            return None
        try:
            return self._timers[backend]
        except KeyError:
            t = self._timers[backend] = backend.profile_timer()
            return t

    # -- recording -----------------------------------------------------------------------------------
    def record(self, name, kind, backend, inputs, fn, *args):
        """Run fn(*args) as an event `name` and return its result: a tensor or a tuple of
        tensors (or None), whose memory not shared with the tensors `inputs` counts as the
        event's new bytes (less what its child events allocated)."""
        with self._event(name, kind, backend) as e:
            out = fn(*args)
        if backend is not None:
            e.bytes = max(0, _new_bytes(backend, inputs, out) - e.child_bytes)
            if e.parent is not None:
                e.parent.child_bytes += e.bytes
        return out

    def scope(self, name, kind="scope", backend=None):
        """A named block of the profile (nr.record_function, an optimizer step)."""
        return self._event(name, kind, backend, self)

    @contextlib.contextmanager
    def _event(self, name, kind, backend, value=None):
        """The event `name` around the block (which gets the event, or `value`): host time,
        device marks where the backend's timer gives them, nested under the innermost open one."""
        parent = self._stack[-1] if self._stack else None
        e = _Event(name, kind, parent)
        timer = self._timer(backend)
        self._stack.append(e)
        m0 = timer.mark() if timer is not None else None
        t0 = time.perf_counter_ns()
        try:
            yield e if value is None else value
        finally:
            dt = time.perf_counter_ns() - t0
            if timer is not None:
                e.marks, e.timer = (m0, timer.mark()), timer
            self._stack.remove(e)      # by identity: an awaited scope may interleave
            e.host_ns = dt
            if parent is not None:
                parent.child_host_ns += dt
            self.events.append(e)

    # -- results -------------------------------------------------------------------------------------
    def rows(self):
        """Rows by name (kind, calls, host/device self and total ms, bytes), in no order."""
        if not self._done:
            raise RuntimeError("the profile is still recording: read it after the with-block")
        by = {}
        for e in self.events:
            r = by.get((e.name, e.kind))
            if r is None:
                r = by[(e.name, e.kind)] = Row(e.name, e.kind)
            r.calls += 1
            r.host_ms += e.host_ns / 1e6
            r.self_host_ms += (e.host_ns - e.child_host_ns) / 1e6
            r.bytes += e.bytes
            if e.device_ms is not None:
                r.device_ms = (r.device_ms or 0.0) + e.device_ms
                own = e.device_ms - e.child_device_ms
                r.self_device_ms = (r.self_device_ms or 0.0) + max(own, 0.0)
        return list(by.values())

    def totals(self):
        """{"wall_ms", "host_ms" (top-level events), "device_ms" (every event's self device time),
        "bytes"}: the block's figures the rows add up to."""
        rows = self.rows()
        top = [e for e in self.events if e.parent is None and e.kind != "kernel"]
        dev = [r.self_device_ms for r in rows if r.self_device_ms is not None]
        return {"wall_ms": self.wall_ms, "host_ms": sum(e.host_ns for e in top) / 1e6,
                "device_ms": sum(dev) if dev else None, "bytes": sum(r.bytes for r in rows)}

    def table(self, sort_by="total", row_limit=None):
        """The rows as text, sorted by time summed over calls: sort_by "total" (device total where
        the device timed it, else host total), "self" (self time likewise), "host", "calls" or
        "bytes"."""
        rows = self.rows()
        keys = {
            "total": lambda r: (r.device_ms if r.device_ms is not None else r.host_ms),
            "self": lambda r: (r.self_device_ms if r.self_device_ms is not None
                               else r.self_host_ms),
            "host": lambda r: r.host_ms, "calls": lambda r: r.calls, "bytes": lambda r: r.bytes}
        if sort_by not in keys:
            raise ValueError(f"sort_by must be one of {sorted(keys)}, got {sort_by!r}")
        rows.sort(key=keys[sort_by], reverse=True)
        if row_limit is not None:
            rows = rows[:row_limit]
        w = max([len(r.name) for r in rows] + [24])
        head = (f"{'name':<{w}} {'calls':>7} {'self dev ms':>11} {'dev ms':>9} "
                f"{'self host ms':>12} {'host ms':>9} {'MB alloc':>9}")
        lines = [head, "-" * len(head)]

        def ms(v):
            return f"{v:.3f}" if v is not None else "-"
        for r in rows:
            lines.append(f"{r.name:<{w}} {r.calls:>7} {ms(r.self_device_ms):>11} "
                         f"{ms(r.device_ms):>9} {ms(r.self_host_ms):>12} {ms(r.host_ms):>9} "
                         f"{r.bytes / 2**20:>9.2f}")
        t = self.totals()
        lines.append("-" * len(head))
        lines.append(f"wall {t['wall_ms']:.3f} ms; in ops and scopes {t['host_ms']:.3f} ms of "
                     f"host time; device time {ms(t['device_ms'])} ms; "
                     f"{t['bytes'] / 2**20:.2f} MB allocated")
        return "\n".join(lines)

    def __str__(self):
        return self.table()


def _new_bytes(backend, inputs, out):
    """Bytes of the memory blocks the op's outputs live in, where no input lives too (a view of
    an input costs nothing; a view of new memory counts the whole block)."""
    try:
        seen = {backend.memory_block(getattr(a, "_data", a))[0] for a in inputs}
        n = 0
        for t in (out if type(out) is tuple else (out,)):
            if t is None:
                continue
            key, nbytes = backend.memory_block(getattr(t, "_data", t))
            if key not in seen:
                seen.add(key)
                n += nbytes
        return n
    except (AttributeError, TypeError):      # not tensors (an op returning other values)
        return 0


def profile(device_time=True):
    """A Profile to use as `with nr.profile() as p: ...`, then `print(p.table())`."""
    return Profile(device_time)


@contextlib.contextmanager
def record_function(name):
    """A named block in the active profile (nothing when none records), as torch.profiler's."""
    p = _ACTIVE.get()
    if p is None:
        yield
        return
    with p.scope(str(name)):
        yield


def call(name, backend, inputs, fn, *args):
    """fn(*args) (a backend primitive returning a handle), recorded as op `name` when a profile
    records: the paths that skip autograd's apply (no gradient to record) use it."""
    p = _ACTIVE.get()
    if p is None:
        return fn(*args)
    return p.record(name, "op", backend, inputs, fn, *args)


_NULL = contextlib.nullcontext()


def scope(name, backend=None):
    """A context: the profile scope `name` when a profile records (the library's own blocks: an
    optimizer's step, a readback), else nothing."""
    p = _ACTIVE.get()
    return _NULL if p is None else p.scope(name, "scope", backend)
