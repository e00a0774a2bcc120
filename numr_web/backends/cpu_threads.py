"""The cpu device's worker threads: one pool of helper threads per process, shared by every
primitive that splits its work into blocks. numpy releases the GIL inside its loops, so blocks
of one op run on several cores at once, as torch spreads its CPU kernels. A parallel call queues
one job (its blocks) and wakes as many sleeping helpers as it can use: a few microseconds, where
a ThreadPoolExecutor future per helper cost tens.

Knobs (environment variables, read at the first large op; `configure()` changes them in a
running process, as torch.set_num_threads):
  NUMR_CPU_THREADS       threads per op; default: the CPUs this process may run on
                         (`os.sched_getaffinity`, as torch's default); 1 in Pyodide (no threads
                         there). 1 runs every block in the calling thread.
  NUMR_CPU_PARALLEL_MIN  ops on fewer elements (default 131072; a GEMM: multiply-adds) run as
                         one numpy call in the calling thread, exactly as before blocks
                         existed.

Rules that keep it safe:
  * a parallel call runs its blocks in the calling thread AND in up to threads - 1 helpers,
    which take the next block when done with one (a core slowed by other work takes fewer);
  * a parallel call made from inside a block (a helper, or the caller while it runs blocks)
    runs its blocks in that thread: no thread ever waits on work queued behind itself;
  * helpers run blocks in a copy of the caller's context (numpy's error state, grad mode);
  * a forked child makes its own pool (it inherits the parent's pool object, not its threads);
  * the state shared between threads (the pool, BLAS's thread limit) is changed under a lock;
    nothing here belongs to one async task (a parallel call runs to its end without awaiting).
"""
from __future__ import annotations

import collections
import contextlib
import contextvars
import os
import sys
import threading

from ..errors import BackendUnavailableError

ENV = "NUMR_CPU_THREADS"
MIN_ENV = "NUMR_CPU_PARALLEL_MIN"
PARALLEL_MIN = 1 << 17
_NAME = "numr-cpu"


class _State:
    """The process's pool and BLAS limit (one object, replaced in a forked child)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.pool = None           # _Pool, made on first use
        self.cpus = None           # CPUs this process may use (cached)
        self.blas = None           # threadpoolctl's BLAS library controllers, or False
        self.blas_users = 0        # parallel regions holding BLAS at one thread
        self.blas_saved = None     # [(controller, its thread count before the first region)]


_state = _State()
_local = threading.local()         # .depth: > 0 while this thread runs blocks of a parallel call


def _after_fork():
    global _state, _local
    _state = _State()
    _local = threading.local()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


def _cpus():
    if _state.cpus is None:
        try:
            _state.cpus = max(1, len(os.sched_getaffinity(0)))
        except (AttributeError, OSError):
            _state.cpus = max(1, os.cpu_count() or 1)
    return _state.cpus


def _knob(env, default):
    """A positive integer from the environment variable `env`, else `default`."""
    v = os.environ.get(env)
    if not v:
        return default
    try:
        got = int(v)
    except ValueError:
        got = 0
    if got < 1:
        raise BackendUnavailableError(f"cpu knob {env}={v!r}: expected a positive integer "
                                      f"({_KNOBS[env]})")
    return got


_KNOBS = {ENV: "the threads the cpu device may use; 1 runs single-threaded",
          MIN_ENV: "ops on fewer elements than this run in one numpy call in the calling thread"}
SETTINGS = [None]                  # (threads, parallel_min): the process's, read once


def configure(threads=None, parallel_min=None):
    """Set the cpu device's threads per op and the size from which an op runs in blocks, for
    the whole process (as torch.set_num_threads); a value left out is read from its environment
    variable, NUMR_CPU_THREADS / NUMR_CPU_PARALLEL_MIN, else its default (the CPUs this process
    may use / PARALLEL_MIN). Returns the previous (threads, parallel_min)."""
    before = SETTINGS[0]
    for name, v in (("threads", threads), ("parallel_min", parallel_min)):
        if v is not None and (not isinstance(v, int) or isinstance(v, bool) or v < 1):
            raise BackendUnavailableError(f"cpu configure: {name} must be a positive int, got "
                                          f"{v!r}")
    SETTINGS[0] = (threads or _knob(ENV, _cpus()), parallel_min or _knob(MIN_ENV, PARALLEL_MIN))
    return before if before is not None else SETTINGS[0]


def settings():
    """(threads, parallel_min) of this process, read from the environment at the first call.
    Hot paths read SETTINGS[0] (None until then) and call this only when it is None."""
    if SETTINGS[0] is None:
        configure()
    return SETTINGS[0]


def num_threads():
    """Threads a parallel call may use (configure(); 1 in Pyodide, which has no threads)."""
    if sys.platform == "emscripten":
        return 1
    return (SETTINGS[0] or settings())[0]


def parallel_min():
    """Ops on fewer elements run as one numpy call in the calling thread (configure()): handing
    work to threads costs microseconds, so a small model's ops stay as fast as before."""
    return (SETTINGS[0] or settings())[1]


def in_parallel():
    """Whether this thread is running blocks of a parallel call (a nested call runs serially)."""
    return getattr(_local, "depth", 0) > 0


def _np1_errstate():
    """numpy 1.x keeps its floating-point error state per thread, not in a context variable:
    the caller's, for its helpers (None on numpy >= 2, or without numpy)."""
    np = sys.modules.get("numpy")
    if np is None or not np.__version__.startswith("1."):
        return None
    return np.geterr()


class _Job:
    """One parallel call: blocks 0..n-1 of fn, taken one at a time by the caller and helpers."""
    __slots__ = ("fn", "n", "next", "lock", "helpers", "claimed", "error", "done", "context",
                 "errstate")

    def __init__(self, fn, n):
        self.fn, self.n, self.next = fn, n, 0
        self.lock = threading.Lock()
        self.helpers = 0            # helper threads inside work() now
        self.claimed = False        # every block taken (no helper joins after this)
        self.error = None
        self.done = None            # an Event the caller waits on while helpers finish
        self.context = contextvars.copy_context()     # numpy >= 2 keeps its error state here
        self.errstate = _np1_errstate()

    def helper_work(self):
        """work() in a helper thread, under the caller's context (and numpy 1.x error state)."""
        if self.errstate is None:
            return self.context.copy().run(self.work)
        import numpy
        with numpy.errstate(**self.errstate):
            return self.context.copy().run(self.work)

    def work(self):
        """Run blocks until none is left (or one failed)."""
        fn, lock = self.fn, self.lock
        while True:
            with lock:
                i = self.next
                if i >= self.n or self.error is not None:
                    self.claimed = True
                    return
                self.next = i + 1
            try:
                fn(i)
            except BaseException as e:
                with lock:
                    self.error = self.error or e
                return


class _Pool:
    """Helper threads that take blocks of the queued jobs (a job leaves the queue when its last
    block is taken); daemon threads, started on demand."""

    def __init__(self):
        self.cond = threading.Condition(threading.Lock())
        self.jobs = collections.deque()
        self.count = 0

    def grow(self, helpers):
        with self.cond:
            while self.count < helpers:
                threading.Thread(target=self._helper, name=f"{_NAME}-{self.count}",
                                 daemon=True).start()
                self.count += 1

    def _helper(self):
        _local.depth = 1                     # a parallel call from a block runs in this thread
        cond, jobs = self.cond, self.jobs
        while True:
            with cond:
                while not jobs:
                    cond.wait()
                job = jobs[0]
                with job.lock:
                    if job.claimed:          # its last block is taken: drop it from the queue
                        jobs.popleft()
                        continue
                    job.helpers += 1
            job.helper_work()
            with job.lock:
                job.helpers -= 1
                last = job.helpers == 0 and job.done is not None
            if last:
                job.done.set()

    def run(self, job, helpers):
        with self.cond:
            self.jobs.append(job)
            self.cond.notify(helpers)
        _local.depth = getattr(_local, "depth", 0) + 1
        try:
            job.work()
        finally:
            _local.depth -= 1
        with self.cond:
            if job in self.jobs:
                self.jobs.remove(job)
        with job.lock:
            job.claimed = True
            if job.helpers:
                job.done = threading.Event()
        if job.done is not None:
            job.done.wait()
        if job.error is not None:
            raise job.error


def _pool():
    with _state.lock:
        if _state.pool is None:
            _state.pool = _Pool()
        return _state.pool


def parallel_for(n, fn, threads=None):
    """fn(i) for i in range(n), spread over up to `threads` threads (default num_threads()): the
    calling thread and helpers each take the next block when done with one (a core slowed by
    other work takes fewer). The blocks' order is unspecified, so fn(i) must write only its own
    part of the result. Returns when every block is done; re-raises the first error a block
    raised (the blocks not yet started then do not run)."""
    threads = min(num_threads() if threads is None else threads, n)
    if threads <= 1 or in_parallel():
        _local.depth = getattr(_local, "depth", 0) + 1
        try:
            for i in range(n):
                fn(i)
        finally:
            _local.depth -= 1
        return
    pool = _pool()
    pool.grow(threads - 1)
    pool.run(_Job(fn, n), threads - 1)


def parallel_blas_for(n, fn):
    """parallel_for for blocks that call BLAS, with BLAS held at one thread: each block's GEMMs
    on its own core, or, on one thread, block after block (as a GEMM's single tile: BLAS's
    threads on each block's small GEMMs cost more than they give). Where BLAS's threads cannot
    be held (no threadpoolctl): block after block with BLAS's own threads."""
    if in_parallel():
        return parallel_for(n, fn, threads=1)
    with single_threaded_blas() as ok:
        parallel_for(n, fn, threads=None if ok else 1)


def blocks(n, size):
    """[(start, stop), ...] covering range(n) in pieces of `size` (the last may be shorter)."""
    size = max(1, size)
    return [(i, min(i + size, n)) for i in range(0, n, size)]


# -- BLAS inside parallel blocks ---------------------------------------------------------------------
def _blas_controller():
    if _state.blas is None:
        try:                                   # optional (the [cpu] extra installs it)
            from threadpoolctl import ThreadpoolController
            libs = ThreadpoolController().select(user_api="blas").lib_controllers
            _state.blas = list(libs) if libs else False
        except Exception:                      # not installed, or no BLAS it knows
            _state.blas = False
    return _state.blas


def can_hold_blas():
    """Whether single_threaded_blas can hold numpy's BLAS at one thread (threadpoolctl knows
    the BLAS)."""
    if _state.blas is None:
        with _state.lock:
            _blas_controller()
    return bool(_state.blas)


@contextlib.contextmanager
def single_threaded_blas():
    """Holds numpy's BLAS at one thread while parallel blocks call it (each block's GEMMs then
    run on its own core instead of every block asking BLAS's pool for all cores); yields
    whether it could (threadpoolctl knows the BLAS). The first region in sets the limit, the
    last one out restores BLAS's own setting (each a library call of a microsecond, through
    threadpoolctl's controllers: its limit() context costs tens). BLAS calls of other threads
    during the region run on one thread too (the limit is BLAS's, process-wide)."""
    with _state.lock:
        libs = _blas_controller()
        if libs and _state.blas_users == 0:
            _state.blas_saved = [(c, c.get_num_threads()) for c in libs]
            for c in libs:
                c.set_num_threads(1)
        if libs:
            _state.blas_users += 1
    try:
        yield bool(libs)
    finally:
        if libs:
            with _state.lock:
                _state.blas_users -= 1
                if _state.blas_users == 0 and _state.blas_saved is not None:
                    for c, n in _state.blas_saved:
                        c.set_num_threads(n)
                    _state.blas_saved = None
