"""The "nccl" backend: cupy.cuda.nccl for cuda tensors, one process per GPU.

Start-up, in the order that keeps every step time-limited:
1. rendezvous: under mpirun through MPI (its size must match), else through a TCP/file store
   (MASTER_ADDR/MASTER_PORT as torch's launcher sets them); a missing rank is named on a timeout;
2. rank 0 makes the NCCL unique id and hands it to the others (MPI Ibcast or the store);
3. ncclCommInitRank, which would block forever on a missing rank but now only runs once every
   rank is known to be there.
Collectives run on a dedicated stream ordered after the caller's stream (events), and the caller's
stream waits for them, so no host synchronisation is needed; Work.wait polls the completion event
and NCCL's asynchronous error state with the deadline, and aborts the communicator on a timeout.
"""
from __future__ import annotations

import glob
import os
import struct
import sys

from ..errors import BackendUnavailableError, DistributedError, DTypeError
from .group import ProcessGroup, Work
from .store import make_store, rendezvous, store_barrier

UID_BYTES = 128


def uid_to_bytes(uid):
    """cupy's unique id -> its 128 bytes. cupy 14 hands out bytes; older cupy a tuple of 128
    C chars as small signed ints."""
    if len(uid) != UID_BYTES:
        raise DistributedError(f"an NCCL unique id has {UID_BYTES} bytes, got {len(uid)}")
    return bytes(v & 0xFF for v in uid)


def bytes_to_uid(b):
    """The 128 bytes of a unique id received from rank 0 (checked), as uid_to_bytes made them."""
    if len(b) != UID_BYTES:
        raise DistributedError(f"received an NCCL unique id of {len(b)} bytes, expected "
                               f"{UID_BYTES}: the ranks run different code?")
    return bytes(b)


def communicator(nccl, size, uid, rank):
    """nccl.NcclCommunicator from the id's bytes, in the form this cupy takes."""
    try:
        return nccl.NcclCommunicator(size, uid, rank)
    except TypeError:                   # cupy before 14: a tuple of signed chars
        return nccl.NcclCommunicator(size, struct.unpack(f"{UID_BYTES}b", uid), rank)


def exchange_unique_id(store, rank, make_id, timeout, key="nccl/uid"):
    """Rank 0 publishes make_id() (bytes); everyone returns it. Waits at most `timeout`."""
    if rank == 0:
        uid = make_id()
        store.set(key, uid)
        return uid
    return store.get(key, timeout)


def _preload_nccl():
    """cupy finds NCCL through the nvidia-nccl pip package; when only another copy exists (e.g. the
    one torch ships), load it globally so cupy.cuda.nccl can bind to it."""
    import ctypes
    for base in sys.path:
        found = glob.glob(os.path.join(base, "nvidia", "nccl*", "lib", "libnccl.so*")) + \
            glob.glob(os.path.join(base, "nvidia", "*", "lib", "libnccl.so*"))
        for lib in sorted(set(found)):
            try:
                ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
                return lib
            except OSError:
                continue
    return None


def import_nccl():
    try:
        import cupy
    except ImportError:
        raise BackendUnavailableError("the nccl backend needs CuPy (pip install cupy-cuda13x) "
                                      "and an NVIDIA GPU") from None
    try:
        if not cupy.cuda.is_available():
            raise BackendUnavailableError("the nccl backend needs a CUDA GPU; none is visible")
    except Exception as e:
        if isinstance(e, BackendUnavailableError):
            raise
        raise BackendUnavailableError(f"the nccl backend needs a CUDA GPU ({e})") from None
    try:
        from cupy.cuda import nccl
        if not getattr(cupy.cuda, "nccl_enabled", True):
            raise ImportError("cupy.cuda.nccl_enabled is False")
    except ImportError:
        lib = _preload_nccl()
        try:
            from cupy.cuda import nccl
        except ImportError as e:
            raise BackendUnavailableError(
                f"CuPy cannot load NCCL ({e}; preloaded: {lib}); pip install nvidia-nccl-cu13") \
                from None
    return cupy, nccl


class NCCLGroup(ProcessGroup):
    name = "nccl"
    device = "cuda"
    accepts = ("cuda",)

    def __init__(self, env, timeout, check, world_size=None, init_method=None):
        cupy, nccl = import_nccl()
        self.cupy, self.nccl = cupy, nccl
        size = env.world_size if world_size is None else int(world_size)
        if size != env.world_size and env.launcher != "none":
            raise DistributedError(f"world_size={size} contradicts the launcher's {env.world_size}")
        super().__init__(env.rank, size, timeout, check)
        ndev = cupy.cuda.runtime.getDeviceCount()
        self.device_index = env.local_rank % ndev
        cupy.cuda.Device(self.device_index).use()
        self.store = None
        uid = self._agree_on_uid(env, lambda: uid_to_bytes(nccl.get_unique_id()), init_method)
        self.comm = communicator(nccl, self.size, bytes_to_uid(uid), self.rank)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self._types = {"float32": nccl.NCCL_FLOAT32, "float64": nccl.NCCL_FLOAT64,
                       "float16": nccl.NCCL_FLOAT16, "int32": nccl.NCCL_INT32,
                       "uint8": nccl.NCCL_UINT8}
        self._ops = {"sum": nccl.NCCL_SUM, "max": nccl.NCCL_MAX, "min": nccl.NCCL_MIN}

    def _agree_on_uid(self, env, make_id, init_method):
        if env.under_mpi and self.size > 1:
            try:
                from .mpi_backend import MPIGroup
                mpi = MPIGroup(env, self.timeout, False, world_size=self.size)
            except BackendUnavailableError:
                mpi = None
            if mpi is not None:
                try:
                    import numpy as np
                    buf = np.frombuffer(make_id() if self.rank == 0 else bytes(UID_BYTES),
                                        dtype=np.uint8).copy()
                    mpi._broadcast(buf, 0, "NCCL unique-id broadcast").wait()
                    return buf.tobytes()
                finally:
                    mpi.close()
        if self.size == 1:
            return make_id()
        self.store = make_store(init_method, env, self.timeout)
        rendezvous(self.store, self.rank, self.size, self.timeout)
        return exchange_unique_id(self.store, self.rank, make_id, self.timeout)

    # -- collectives ---------------------------------------------------------------------------
    def _launch(self, fn, what):
        cupy = self.cupy
        caller = cupy.cuda.get_current_stream()
        self.stream.wait_event(caller.record())
        fn(self.stream.ptr)
        done = self.stream.record()
        caller.wait_event(done)
        return Work(self, lambda: done.done, what)

    def _nccl_type(self, arr):
        t = self._types.get(str(arr.dtype))
        if t is None:
            raise DTypeError(f"NCCL collectives take float16/32/64 and int32 tensors, not "
                             f"{arr.dtype}")
        return t

    def _allreduce(self, arr, op, what="all_reduce"):
        t = self._nccl_type(arr)
        return self._launch(lambda s: self.comm.allReduce(arr.data.ptr, arr.data.ptr, arr.size, t,
                                                          self._ops[op], s),
                            lambda: f"{what} of {arr.size} {arr.dtype} elements")

    def _broadcast(self, arr, src, what="broadcast"):
        t = self._nccl_type(arr)
        return self._launch(lambda s: self.comm.broadcast(arr.data.ptr, arr.data.ptr, arr.size, t,
                                                          src, s),
                            lambda: f"{what} of {arr.size} {arr.dtype} elements from rank {src}")

    def _barrier(self):
        buf = self.cupy.zeros(1, dtype=self.cupy.int32)
        return self._allreduce(buf, "sum", "barrier")

    def _allgather_fixed(self, b):
        import numpy as np
        cupy = self.cupy
        send = cupy.asarray(np.frombuffer(bytes(b), dtype=np.uint8))
        recv = cupy.empty(self.size * send.size, dtype=cupy.uint8)
        n = send.size
        work = self._launch(lambda s: self.comm.allGather(send.data.ptr, recv.data.ptr, n,
                                                          self.nccl.NCCL_UINT8, s),
                            "header exchange")
        return work, lambda: [bytes(recv[i * n:(i + 1) * n].get()) for i in range(self.size)]

    # -- errors and teardown -------------------------------------------------------------------
    def _poll_errors(self):
        try:
            self.comm.check_async_error()
        except Exception as e:
            self.broken = f"NCCL reported an asynchronous error: {e}"
            self._abort()
            raise DistributedError(f"rank {self.rank} (nccl): {self.broken}") from None

    def _abort(self):
        try:
            self.comm.abort()
        except Exception:
            pass

    def _close(self):
        if self.store is not None and not self.broken:
            try:   # rank 0 serves the store: it must not leave before the others are done with it
                store_barrier(self.store, self.rank, self.size, self.timeout, "exit")
            finally:
                self.store.close()
        if not self.broken:
            self.cupy.cuda.get_current_stream().synchronize()
            self.comm.destroy()
