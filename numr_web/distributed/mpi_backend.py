"""The "mpi" backend: mpi4py over Open MPI or MPICH, for cpu tensors (numpy buffers, zero-copy) and
cuda tensors (handed to MPI directly when the MPI library is CUDA-aware, else staged through host
memory). Every collective is MPI's non-blocking form (Iallreduce, Ibcast, Ibarrier, Iallgather)
polled with a deadline by group.Work.

After a timeout the process would hang in MPI_Finalize at exit (the peer it waits for is gone), so a
broken group calls MPI_Abort at exit instead, which also ends the stuck ranks, as torch's NCCL
watchdog does.
"""
from __future__ import annotations

import atexit
import os
import shutil
import subprocess
import sys

from ..errors import BackendUnavailableError, DistributedError, DTypeError
from .group import ProcessGroup, Work


# Open MPI's non-blocking all-reduce (libnbc) picks a binomial reduce+broadcast for in-place
# buffers, slower than the blocking MPI_Allreduce; Rabenseifner's reduce-scatter + all-gather
# matches it (figures in docs/benchmarks.md). A user's own setting wins.
LIBNBC_ALGORITHM = ("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "3")


def import_mpi():
    if "mpi4py.MPI" not in sys.modules:      # must be in the environment before MPI_Init
        os.environ.setdefault(*LIBNBC_ALGORITHM)
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise BackendUnavailableError(
            f"the mpi backend needs mpi4py and an MPI library ({e}); install them with "
            f"`apt-get install openmpi-bin libopenmpi-dev && pip install mpi4py` "
            f"(or pip install 'numr-web[distributed]')") from None
    return MPI


def cuda_aware(MPI):
    """NUMR_MPI_CUDA_AWARE=1/0 decides; otherwise ask Open MPI's ompi_info (MPICH: assume not)."""
    v = os.environ.get("NUMR_MPI_CUDA_AWARE")
    if v is not None:
        return v.strip().lower() in ("1", "true", "yes")
    if "Open MPI" not in MPI.Get_library_version() or not shutil.which("ompi_info"):
        return False
    try:
        out = subprocess.run(["ompi_info", "--parsable", "--all"], capture_output=True, text=True,
                             timeout=20).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "built_with_cuda_support:value:true" in out


class MPIGroup(ProcessGroup):
    name = "mpi"
    accepts = ("cpu", "cuda")

    def __init__(self, env, timeout, check, world_size=None):
        MPI = import_mpi()
        self.MPI = MPI
        comm = MPI.COMM_WORLD
        size = comm.Get_size()
        expected = world_size if world_size is not None else (
            env.world_size if env.launcher == "torchrun" else None)
        if expected is not None and expected != size:
            raise DistributedError(
                f"world size mismatch: {expected} ranks expected (world_size/WORLD_SIZE) but MPI "
                f"started {size} process{'es' if size != 1 else ''}; launch with "
                f"`mpirun -n {expected} ...`")
        super().__init__(comm.Get_rank(), size, timeout, check)
        self.comm = comm.Dup()           # our own communicator: user MPI traffic cannot interleave
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN}
        self._cuda_aware = None
        atexit.register(self._abort_job_if_broken)

    # -- helpers -------------------------------------------------------------------------------
    def _is_cuda(self, arr):
        return type(arr).__module__.startswith("cupy")

    def _staged(self, arr, start, then=None):
        """Run start(host_array) -> Request on a numpy array that MPI can take: cuda arrays are
        copied to the host unless MPI is CUDA-aware; float16 goes through float32 (MPI has no
        half type). The result is copied back into `arr` on completion."""
        cuda = self._is_cuda(arr)
        if not cuda and arr.dtype.char != "e":        # the common case: numpy, MPI-native dtype
            return start(arr), then
        import numpy as np
        if cuda:
            if self._cuda_aware is None:
                self._cuda_aware = cuda_aware(self.MPI)
            if self._cuda_aware and arr.dtype != np.float16:
                import cupy
                cupy.cuda.get_current_stream().synchronize()   # MPI reads device memory now
                return start(arr), then
        host = arr.get() if cuda else arr
        wire = host.astype(np.float32) if host.dtype == np.float16 else host
        if wire is arr:
            return start(arr), then

        def back():
            if wire is not host:
                host[...] = wire.astype(host.dtype)
            if cuda:
                arr.set(host)
            if then is not None:
                then()
        return start(wire), back

    def _work(self, req, what, then=None):
        MPI = self.MPI

        def test():
            try:
                return req.Test()
            except MPI.Exception as e:     # mpi4py turns MPI errors into exceptions
                self._fail(f"{what() if callable(what) else what} failed in MPI: {e}")
        return Work(self, test, what, then)

    # -- collectives ---------------------------------------------------------------------------
    def _allreduce(self, arr, op, what="all_reduce"):
        if arr.dtype.kind == "b":
            raise DTypeError("all_reduce of a bool tensor: cast it to int32 first")
        mop = self._ops[op]
        req, then = self._staged(arr, lambda a: self.comm.Iallreduce(self.MPI.IN_PLACE, a, mop))
        return self._work(req, lambda: f"{what} of {arr.size} {arr.dtype} elements", then)

    def _broadcast(self, arr, src, what="broadcast"):
        req, then = self._staged(arr, lambda a: self.comm.Ibcast(a, root=src))
        return self._work(req, lambda: f"{what} of {arr.size} {arr.dtype} elements from rank "
                                       f"{src}", then)

    def _barrier(self):
        return self._work(self.comm.Ibarrier(), "barrier")

    def _allgather_fixed(self, b):
        import numpy as np
        send = np.frombuffer(bytes(b), dtype=np.uint8).copy()
        recv = np.empty(self.size * send.size, dtype=np.uint8)
        req = self.comm.Iallgather(send, recv)
        n = send.size
        return (self._work(req, "header exchange"),
                lambda: [recv[i * n:(i + 1) * n].tobytes() for i in range(self.size)])

    # -- teardown ------------------------------------------------------------------------------
    def _abort(self):
        pass            # MPI_Abort waits for exit (see _abort_job_if_broken): the error is raised first

    def _abort_job_if_broken(self):
        if self.broken:
            self.comm.Abort(1)

    def _close(self):
        if not self.broken:
            try:
                self.comm.Free()
            except Exception:
                pass
