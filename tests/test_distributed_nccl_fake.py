"""The nccl backend's wiring without a GPU: a fake cupy (numpy arrays, streams whose work is done at
once) and a fake cupy.cuda.nccl whose communicator reduces across threads. Checks the TCP-store
rendezvous, the unique-id hand-over, the communicator's arguments, the collectives and the
header exchange, and that a peer that never shows up gives DistributedError, not a hang. The real
thing runs on the GPU machine (bench/distributed_gpu.py checks it first)."""
import threading
import types

import numpy as np
import pytest

from numr_web.distributed import nccl_backend
from numr_web.distributed.env import LaunchEnv
from numr_web.distributed.launch import free_port
from numr_web.errors import DistributedError


class FakeArray(np.ndarray):
    @property
    def data(self):
        return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])

    def get(self):
        return np.asarray(self).copy()


class FakeEvent:
    done = True


class FakeStream:
    ptr = 0

    def __init__(self, non_blocking=False):
        pass

    def record(self, event=None):
        return FakeEvent()

    def wait_event(self, ev):
        pass

    def synchronize(self):
        pass


def _as(a):
    return np.ascontiguousarray(a).view(FakeArray)


def make_cupy():
    cuda = types.SimpleNamespace(
        is_available=lambda: True, Stream=FakeStream, get_current_stream=lambda: FakeStream(),
        runtime=types.SimpleNamespace(getDeviceCount=lambda: 8),
        Device=lambda i: types.SimpleNamespace(use=lambda: None))
    return types.SimpleNamespace(
        cuda=cuda, int32=np.int32, uint8=np.uint8,
        zeros=lambda n, dtype: _as(np.zeros(n, dtype)),
        empty=lambda n, dtype: _as(np.empty(n, dtype)),
        asarray=lambda a: _as(np.asarray(a)))


class Fabric:
    """Ranks meet here: each call waits for every rank's buffer, then applies the collective."""

    def __init__(self, n):
        self.n, self.bufs, self.barrier = n, {}, threading.Barrier(n, timeout=10)
        self.uids, self.memory = [], {}

    def collective(self, rank, fn):
        self.barrier.wait()
        if rank == 0:
            fn()
        self.barrier.wait()


UID_SIGNED = tuple(range(-64, 64))                 # the id as cupy before 14 hands it out
UID_BYTES = bytes(v & 0xFF for v in UID_SIGNED)    # the same id as cupy 14 hands it out


def make_nccl(fabric, registry, uid_form):
    """uid_form: "bytes" acts as cupy >= 14, "tuple" as older cupy (each refuses the other form)."""
    nc = types.SimpleNamespace(NCCL_FLOAT32=7, NCCL_FLOAT64=8, NCCL_FLOAT16=6, NCCL_INT32=2,
                               NCCL_UINT8=1, NCCL_SUM=0, NCCL_MAX=2, NCCL_MIN=3)
    nc.get_unique_id = lambda: UID_BYTES if uid_form == "bytes" else UID_SIGNED

    class Comm:
        def __init__(self, ndev, uid, rank):
            if not isinstance(uid, bytes if uid_form == "bytes" else tuple):
                raise TypeError(f"this cupy takes the unique id as {uid_form}")
            assert ndev in (1, fabric.n) and len(uid) == 128
            fabric.uids.append(uid)
            self.rank = rank

        def _arr(self, ptr):
            return registry[ptr]

        def allReduce(self, send, recv, count, dtype, op, stream):
            fabric.bufs[self.rank] = self._arr(recv)

            def red():
                f = {0: np.add, 2: np.maximum, 3: np.minimum}[op]
                acc = fabric.bufs[0].copy()
                for r in range(1, fabric.n):
                    acc = f(acc, fabric.bufs[r])
                for r in range(fabric.n):
                    fabric.bufs[r][...] = acc
            fabric.collective(self.rank, red)

        def broadcast(self, send, recv, count, dtype, root, stream):
            fabric.bufs[self.rank] = self._arr(recv)
            fabric.collective(self.rank, lambda: [fabric.bufs[r].__setitem__(
                Ellipsis, fabric.bufs[root]) for r in range(fabric.n)])

        def allGather(self, send, recv, count, dtype, stream):
            fabric.bufs[self.rank] = (self._arr(send), self._arr(recv))

            def gather():
                allsend = np.concatenate([fabric.bufs[r][0] for r in range(fabric.n)])
                for r in range(fabric.n):
                    fabric.bufs[r][1][...] = allsend
            fabric.collective(self.rank, gather)

        def check_async_error(self):
            pass

        def abort(self):
            pass

        def destroy(self):
            pass
    nc.NcclCommunicator = Comm
    return nc


@pytest.fixture(params=["bytes", "tuple"])
def fake_nccl(monkeypatch, request):
    fabric, registry = Fabric(2), {}
    cupy, nccl = make_cupy(), make_nccl(fabric, registry, request.param)
    fabric.uid_form = request.param
    real_as = cupy.asarray

    def track(make):
        def f(*a, **k):
            arr = make(*a, **k)
            registry[arr.data.ptr] = arr
            return arr
        return f
    cupy.zeros, cupy.empty, cupy.asarray = track(cupy.zeros), track(cupy.empty), track(real_as)
    monkeypatch.setattr(nccl_backend, "import_nccl", lambda: (cupy, nccl))
    return fabric, cupy, registry


def _env(rank, port, n=2):
    return LaunchEnv(rank, n, rank, n, "torchrun", "127.0.0.1", port)


def _ranks(fn, n=2):
    out, errs = [None] * n, [None] * n

    def run(r):
        try:
            out[r] = fn(r)
        except Exception as e:     # noqa: BLE001
            errs[r] = e
    ts = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    [t.start() for t in ts]
    [t.join(30) for t in ts]
    return out, errs


def test_nccl_group_over_a_fake_fabric(fake_nccl):
    fabric, cupy, registry = fake_nccl
    port = free_port()

    def rank_main(r):
        g = nccl_backend.NCCLGroup(_env(r, port), timeout=5, check=True)
        a = cupy.asarray(np.arange(4, dtype=np.float32) * (r + 1))
        g._allreduce(a, "sum").wait()
        b = cupy.asarray(np.full(3, r, np.int32))
        g._broadcast(b, 1).wait()
        m = cupy.asarray(np.array([r, -r], np.float64))
        g._allreduce(m, "max").wait()
        g._barrier().wait()
        g.check_same("all_reduce", (4,), "float32", "sum")
        gathered = g.allgather_bytes(b"r%d" % r)
        g.close()
        return a.tolist(), b.tolist(), m.tolist(), gathered

    out, errs = _ranks(rank_main)
    assert errs == [None, None], errs
    for a, b, m, gathered in out:
        assert a == [0.0, 3.0, 6.0, 9.0] and b == [1, 1, 1] and m == [1.0, 0.0]
        assert gathered == [b"r0", b"r1"]
    assert fabric.uids[0] == fabric.uids[1] == (UID_BYTES if fabric.uid_form == "bytes"
                                                else UID_SIGNED)


def test_nccl_missing_rank_is_a_timeout_not_a_hang(fake_nccl):
    port = free_port()
    with pytest.raises(DistributedError, match=r"missing ranks \[1\]"):
        nccl_backend.NCCLGroup(_env(0, port), timeout=0.5, check=False)


def test_nccl_world_size_contradiction(fake_nccl):
    with pytest.raises(DistributedError, match="contradicts"):
        nccl_backend.NCCLGroup(_env(0, free_port()), timeout=1, check=False, world_size=3)


def test_nccl_collective_that_never_finishes_aborts_the_communicator(fake_nccl, monkeypatch):
    fabric, cupy, registry = fake_nccl
    g = nccl_backend.NCCLGroup(LaunchEnv(0, 1, 0, 1, "none"), timeout=0.3, check=False)
    aborted = []
    g.comm.abort = lambda: aborted.append(1)
    g.comm.allReduce = lambda *a: None          # enqueued, never completes:
    monkeypatch.setattr(FakeEvent, "done", False)
    with pytest.raises(DistributedError, match="did not complete within 0.3 s"):
        g._allreduce(cupy.asarray(np.ones(4, np.float32)), "sum").wait()
    assert aborted == [1] and g.broken
