"""ProcessGroup: what the MPI and NCCL backends share. Every collective is started non-blocking and
waited for with a deadline (`Work.wait`), so a rank that died or hangs gives a DistributedError on
the others instead of a hang; after that the group is marked broken and refuses further work.

Backends implement, on contiguous backend arrays (numpy for cpu, cupy for cuda):
    _allreduce(arr, op) -> Work      op in "sum" | "max" | "min"  (in place)
    _broadcast(arr, src) -> Work     (in place)
    _barrier() -> Work
    _allgather_fixed(b: bytes) -> (Work, result()) every rank's bytes, all of len(b)
    _abort(), _close()
"""
from __future__ import annotations

import time

from ..errors import DistributedError, DTypeError, ShapeError

OPS = ("sum", "mean", "max", "min")
_ALIASES = {"avg": "mean", "average": "mean"}
HEADER = 256          # bytes per rank in the check-mode header exchange
_SPIN_S = 1.0         # poll without sleeping for this long (MPI progresses only inside its calls)


def normalize_op(op):
    o = str(getattr(op, "name", op)).lower()
    o = _ALIASES.get(o, o)
    if o not in OPS:
        raise DistributedError(f"unknown reduction op {op!r}; expected one of {', '.join(OPS)}")
    return o


class Work:
    """A started collective. is_completed() polls once; wait() polls until done or the group's
    timeout, then raises DistributedError (and breaks the group). `then` runs once on completion."""

    def __init__(self, group, test, what, then=None):
        """what: a description for the error message, or a callable making one (formatted only on
        failure: formatting numpy dtypes costs more than a small all-reduce)."""
        self.group, self._test, self._what, self._then = group, test, what, then
        self._done = False

    @property
    def what(self):
        return self._what() if callable(self._what) else self._what

    def is_completed(self):
        if not self._done and self._test():
            self._done = True
            if self._then is not None:
                self._then()
        return self._done

    def wait(self, timeout=None):
        if self._done:
            return True
        g = self.group
        limit = g.timeout if timeout is None else float(timeout)
        start = time.monotonic()
        i = 0
        while not self.is_completed():
            i += 1
            if i & 63 == 0:
                now = time.monotonic() - start
                if now > limit:
                    g._fail(f"{self.what} did not complete within {limit:g} s")
                if now > _SPIN_S:
                    time.sleep(0.0002)
                g._poll_errors()
        return True


class ProcessGroup:
    name = "?"
    device = "cpu"                  # the tensor device this backend takes ("cpu" for mpi also
    accepts = ("cpu",)              # stages cuda tensors); `accepts` lists every device it takes

    def __init__(self, rank, size, timeout, check):
        self.rank, self.size, self.timeout, self.check = rank, size, float(timeout), bool(check)
        self.broken = None
        self._seq = 0

    # -- failure handling ------------------------------------------------------------------------
    def _fail(self, why):
        msg = (f"rank {self.rank} of {self.size} ({self.name}): {why}. Another rank has probably "
               f"died, hangs, or called a different collective (every rank must call the same "
               f"collectives in the same order). This process group is unusable now; at exit this "
               f"process tears the job down so no rank hangs.")
        self.broken = msg
        try:
            self._abort()
        finally:
            raise DistributedError(msg)

    def _poll_errors(self):
        """Backend hook: raise early on an asynchronous error (NCCL)."""

    def ensure_usable(self):
        if self.broken:
            raise DistributedError(f"the process group failed earlier: {self.broken}")

    # -- check mode: a header exchange that finds mismatched calls before they hang -------------
    def check_same(self, kind, shape=None, dtype=None, extra=""):
        """Every rank publishes (sequence number, collective, shape, dtype, extra); all ranks get
        all headers and raise the same typed error if they differ."""
        self._seq += 1
        head = f"{self._seq}|{kind}|{extra}"
        desc = f"{head}|{tuple(shape) if shape is not None else ''}|{dtype or ''}"
        raw = desc.encode()[:HEADER].ljust(HEADER, b"\0")
        work, result = self._allgather_fixed(raw)
        work.wait()
        got = [r.rstrip(b"\0").decode(errors="replace") for r in result()]
        if len(set(got)) == 1:
            return
        heads = {g.rsplit("|", 2)[0] for g in got}
        shapes = {g.rsplit("|", 2)[1] for g in got}
        listing = "; ".join(f"rank {r}: {g}" for r, g in enumerate(got))
        if len(heads) > 1:
            raise DistributedError(f"ranks called different collectives (seq|call|args|shape|"
                                   f"dtype): {listing}")
        if len(shapes) > 1:
            raise ShapeError(f"{kind}: tensor shapes differ across ranks: {listing}")
        raise DTypeError(f"{kind}: tensor dtypes differ across ranks: {listing}")

    def allgather_bytes(self, b: bytes):
        """Variable-length bytes from every rank (two fixed-size exchanges), with the deadline."""
        work, result = self._allgather_fixed(len(b).to_bytes(8, "little"))
        work.wait()
        lens = [int.from_bytes(x, "little") for x in result()]
        work, result = self._allgather_fixed(bytes(b).ljust(max(max(lens), 1), b"\0"))
        work.wait()
        return [x[:n] for x, n in zip(result(), lens)]

    # -- teardown --------------------------------------------------------------------------------
    def close(self):
        self._close()
