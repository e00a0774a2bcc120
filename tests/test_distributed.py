"""numr_web.distributed without launching anything: launcher-environment parsing, the sampler, the
TCP/file stores and the rendezvous, NCCL id exchange (no cupy needed), argument checks, deadlines,
and DistributedDataParallel on an in-process fake group (buckets reduced from the engine's
post-accumulate-grad hooks as gradients become final)."""
import os
import sys
import threading
import time

import numpy as np
import pytest

import numr_web as nr
import numr_web.distributed as dist
from numr_web.distributed import env as envmod, store as st, world
from numr_web.distributed.group import ProcessGroup, Work
from numr_web.distributed.nccl_backend import (bytes_to_uid, communicator, exchange_unique_id,
                                               uid_to_bytes)
from numr_web.errors import (BackendUnavailableError, DeviceError, DistributedError, DTypeError,
                             ShapeError)

sys.path.insert(0, os.path.dirname(__file__))


# -- launcher environment ---------------------------------------------------------------------------
def test_env_launchers():
    e = envmod.read_env({"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "4",
                         "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"})
    assert (e.rank, e.world_size, e.local_rank, e.local_world_size, e.launcher) == \
        (1, 4, 1, 2, "openmpi") and e.under_mpi
    e = envmod.read_env({"PMI_RANK": "2", "PMI_SIZE": "3", "MPI_LOCALRANKID": "0"})
    assert (e.rank, e.world_size, e.local_rank, e.launcher) == (2, 3, 0, "pmi")
    e = envmod.read_env({"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "3",
                         "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"})
    assert (e.rank, e.world_size, e.local_rank, e.master_addr, e.master_port, e.launcher) == \
        (3, 8, 3, "10.0.0.1", 29500, "torchrun")
    assert envmod.read_env({}).world_size == 1


@pytest.mark.parametrize("bad", [{"RANK": "2", "WORLD_SIZE": "2"}, {"RANK": "x", "WORLD_SIZE": "2"},
                                 {"OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "2",
                                  "WORLD_SIZE": "3"}, {"WORLD_SIZE": "2"}])
def test_env_contradictions_are_typed(bad):
    with pytest.raises(DistributedError):
        envmod.read_env(bad)


# -- sampler (torch's semantics) --------------------------------------------------------------------
def test_sampler_pads_by_repetition_and_partitions():
    shards = [list(dist.DistributedSampler(10, num_replicas=3, rank=r, shuffle=False))
              for r in range(3)]
    assert shards == [[0, 3, 6, 9], [1, 4, 7, 0], [2, 5, 8, 1]]
    assert all(len(dist.DistributedSampler(10, 3, r, shuffle=False)) == 4 for r in range(3))
    dropped = [list(dist.DistributedSampler(10, 3, r, shuffle=False, drop_last=True))
               for r in range(3)]
    assert dropped == [[0, 3, 6], [1, 4, 7], [2, 5, 8]]
    assert [list(dist.DistributedSampler(2, 5, r, shuffle=False)) for r in range(5)] == \
        [[0], [1], [0], [1], [0]]   # pad longer than data


def test_sampler_shuffle_depends_on_seed_and_epoch_only():
    a = [dist.DistributedSampler(100, 4, r, seed=7) for r in range(4)]
    b = [dist.DistributedSampler(100, 4, r, seed=7) for r in range(4)]
    union = sorted(i for s in a for i in s)
    assert union == list(range(100))
    assert [list(s) for s in a] == [list(s) for s in b]
    e0 = list(a[0])
    a[0].set_epoch(1)
    assert list(a[0]) != e0
    with pytest.raises(DistributedError):
        dist.DistributedSampler(10, 2, 2)


# -- stores and rendezvous --------------------------------------------------------------------------
def _run_ranks(fn, n):
    out, errs = [None] * n, [None] * n

    def run(r):
        try:
            out[r] = fn(r)
        except Exception as e:       # noqa: BLE001  (collected for the assertion)
            errs[r] = e
    ts = [threading.Thread(target=run, args=(r,)) for r in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    return out, errs


def _tcp_stores(n, timeout=5.0):
    master = st.TCPStore("127.0.0.1", 0, True, timeout)
    return [master] + [st.TCPStore("127.0.0.1", master.port, False, timeout) for _ in range(n - 1)]


def test_tcp_store_set_get_add_and_timeout():
    a, b = _tcp_stores(2)
    try:
        a.set("k", b"\x00v")
        assert b.get("k") == b"\x00v"
        assert a.add("c", 2) == 2 and b.add("c", 3) == 5
        t0 = time.monotonic()
        with pytest.raises(DistributedError, match="did not appear"):
            b.get("never", timeout=0.3)
        assert time.monotonic() - t0 < 3
    finally:
        b.close()
        a.close()


def test_tcp_store_unreachable_is_a_clear_error():
    t0 = time.monotonic()
    with pytest.raises(DistributedError, match="could not reach the store"):
        st.TCPStore("127.0.0.1", st_free_port(), False, 0.3)
    assert time.monotonic() - t0 < 3


def st_free_port():
    from numr_web.distributed.launch import free_port
    return free_port()


def test_rendezvous_joins_and_names_missing_ranks(tmp_path):
    stores = _tcp_stores(3)
    try:
        out, errs = _run_ranks(lambda r: st.rendezvous(stores[r], r, 3, 5), 3)
        assert errs == [None] * 3
        # WORLD_SIZE=3 but only ranks 0 and 1 started
        fs = [st.FileStore(str(tmp_path / "fs"), 1) for _ in range(2)]
        t0 = time.monotonic()
        out, errs = _run_ranks(lambda r: st.rendezvous(fs[r], r, 3, 0.5), 2)
        assert all(isinstance(e, DistributedError) for e in errs), errs
        assert "2 of WORLD_SIZE=3" in str(errs[0]) and "missing ranks [2]" in str(errs[0])
        assert time.monotonic() - t0 < 5
    finally:
        for s in reversed(stores):
            s.close()


def test_rendezvous_refuses_a_duplicate_rank(tmp_path):
    s = st.FileStore(str(tmp_path), 1)
    _run_ranks(lambda r: st.rendezvous(s, 0, 2, 0.2), 1)
    with pytest.raises(DistributedError, match="same RANK"):
        st.rendezvous(s, 0, 2, 0.2)


def test_make_store_argument_errors():
    e = envmod.LaunchEnv(1, 2, 1, 2, "torchrun")
    with pytest.raises(DistributedError, match="MASTER_ADDR"):
        st.make_store("env://", e, 1)
    with pytest.raises(DistributedError, match="tcp://HOST:PORT"):
        st.make_store("tcp://nohostport", e, 1)
    with pytest.raises(DistributedError):
        st.make_store("udp://x", e, 1)


# -- NCCL pieces that need no GPU -------------------------------------------------------------------
def test_nccl_unique_id_round_trip_and_exchange():
    raw = bytes((i * 37) % 256 for i in range(128))           # cupy 14: bytes
    uid = tuple(v - 256 if v > 127 else v for v in raw)        # older cupy: signed chars
    assert bytes_to_uid(uid_to_bytes(uid)) == raw == bytes_to_uid(uid_to_bytes(raw))

    class OldCupyNccl:                                         # refuses bytes, as cupy < 14
        @staticmethod
        def NcclCommunicator(size, uid, rank):
            if not isinstance(uid, tuple):
                raise TypeError("expected tuple")
            return uid
    assert communicator(OldCupyNccl, 1, raw, 0) == uid
    with pytest.raises(DistributedError):
        bytes_to_uid(b"short")
    stores = _tcp_stores(3)
    try:
        calls = []
        got, errs = _run_ranks(lambda r: exchange_unique_id(
            stores[r], r, lambda: calls.append(1) or uid_to_bytes(uid), 5), 3)
        assert errs == [None] * 3 and got == [uid_to_bytes(uid)] * 3 and calls == [1]
    finally:
        for s in reversed(stores):
            s.close()


def test_nccl_without_cupy_or_gpu_is_unavailable():
    ok, _ = nr.backends.probe("cuda")
    if ok:
        pytest.skip("a GPU is present: the nccl backend is tested on the GPU machine")
    with pytest.raises(BackendUnavailableError):
        dist.init(backend="nccl", timeout=2)
    assert not dist.is_initialized()


# -- front-end argument checks and deadlines on a fake group ----------------------------------------
class FakeGroup(ProcessGroup):
    """In-process stand-in: `size` ranks that all hold this rank's values; `hang` never completes."""
    name, accepts = "fake", ("cpu",)

    def __init__(self, size=2, hang=False, timeout=5.0, check=False):
        super().__init__(0, size, timeout, check)
        self.hang, self.calls, self.local_rank = hang, [], 0

    def _work(self, what, effect=lambda: None):
        self.calls.append(what)
        if self.hang:
            return Work(self, lambda: False, what)
        effect()
        return Work(self, lambda: True, what)

    def _allreduce(self, arr, op, what="all_reduce"):
        def eff():
            if op == "sum":
                arr[...] *= self.size
        return self._work(what, eff)

    def _broadcast(self, arr, src, what="broadcast"):
        return self._work(what)

    def _barrier(self):
        return self._work("barrier")

    def _allgather_fixed(self, b):
        return self._work("gather"), lambda: [bytes(b)] * self.size

    def _abort(self):
        pass

    def _close(self):
        pass


@pytest.fixture
def fake_group():
    def make(**kw):
        world._GROUP = FakeGroup(**kw)
        return world._GROUP
    yield make
    world._GROUP = None


def test_collectives_need_init():
    with pytest.raises(DistributedError, match="init"):
        dist.all_reduce(nr.zeros(3))
    with pytest.raises(DistributedError):
        dist.rank()


def test_all_reduce_in_place_and_argument_errors(fake_group):
    fake_group(size=4)
    t = nr.tensor([1.0, 2.0])
    view = t.detach()
    dist.all_reduce(t)
    assert t.tolist() == [4.0, 8.0] and view.tolist() == [4.0, 8.0]   # in place, like torch
    dist.all_reduce(t, op="mean")
    assert t.tolist() == [4.0, 8.0]
    w = dist.all_reduce(t, op="avg", async_op=True)
    assert w.wait() and t.tolist() == [4.0, 8.0]
    tt = nr.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).T     # non-contiguous
    dist.all_reduce(tt)
    assert tt.tolist() == (np.arange(6).reshape(2, 3).T * 4).tolist()
    with pytest.raises(DistributedError, match="unknown reduction op"):
        dist.all_reduce(t, op="median")
    with pytest.raises(DTypeError):
        dist.all_reduce(nr.tensor([1, 2]), op="mean")
    with pytest.raises(DistributedError, match="src must be a rank"):
        dist.broadcast(t, src=4)
    with pytest.raises(DistributedError, match="Tensor"):
        dist.all_reduce(np.zeros(3))


def test_wrong_device_for_the_backend(fake_group):
    g = fake_group()
    g.accepts = ("cuda",)
    g.name = "nccl"
    with pytest.raises(DeviceError, match="takes tensors on cuda"):
        dist.all_reduce(nr.zeros(2))


def test_check_mode_compares_headers(fake_group):
    g = fake_group(check=True)
    dist.all_reduce(nr.zeros(2))
    assert g.calls[0] == "gather"
    theirs = {}
    g._allgather_fixed = lambda b: (Work(g, lambda: True, "x"),
                                    lambda: [b, theirs.get("b", b)])
    theirs["b"] = b"99|all_reduce|sum|(3,)|float32".ljust(256, b"\0")
    g._seq = 98
    with pytest.raises(ShapeError, match="shapes differ"):
        dist.all_reduce(nr.zeros(2))
    g._seq = 98
    theirs["b"] = b"99|all_reduce|sum|(2,)|float64".ljust(256, b"\0")
    with pytest.raises(DTypeError):
        dist.all_reduce(nr.zeros(2))
    g._seq = 98
    theirs["b"] = b"99|barrier||||".ljust(256, b"\0")
    with pytest.raises(DistributedError, match="different collectives"):
        dist.all_reduce(nr.zeros(2))


def test_a_collective_that_never_completes_times_out(fake_group):
    g = fake_group(hang=True, timeout=0.3)
    t0 = time.monotonic()
    with pytest.raises(DistributedError, match="did not complete within 0.3 s"):
        dist.barrier()
    assert time.monotonic() - t0 < 3
    with pytest.raises(DistributedError, match="failed earlier"):
        dist.all_reduce(nr.zeros(2))
    assert g.broken


def test_init_argument_errors():
    with pytest.raises(DistributedError, match="unknown backend"):
        dist.init(backend="gloo")
    with pytest.raises(DistributedError, match="timeout"):
        dist.init(backend="mpi", timeout=0)


# -- DistributedDataParallel on the fake group ------------------------------------------------------
def _model(seed=0):
    return nr.nn.MLP([8, 16, 16, 4], activation="relu", seed=seed)


def _loss(net, seed=1):
    x = nr.randn((5, 8), seed=seed)
    y = nr.tensor([0, 1, 2, 3, 0])
    return nr.cross_entropy(net(x), y)


def _reference_grads(seed=0):
    m = _model(seed)
    _loss(m).backward()
    return [p.grad.tolist() for p in m.parameters()]


def test_ddp_averages_gradients_in_buckets(fake_group):
    g = fake_group(size=2)
    m = _model()
    ddp = dist.DistributedDataParallel(m, bucket_cap_mb=0.0005)     # ~512 B: several buckets
    assert len(ddp._buckets) > 1
    assert [b.params for b in ddp._buckets][0][0] is list(m.parameters())[-1]   # reverse order
    _loss(ddp).backward()
    # the fake all-reduce sums 2 identical ranks; DDP divides by 2: the local gradient again
    assert [p.grad.tolist() for p in m.parameters()] == _reference_grads()
    assert sum(c.startswith("DDP gradient bucket") for c in g.calls) == len(ddp._buckets)
    # a second iteration works (no "marked ready twice")
    m.zero_grad()
    _loss(ddp).backward()
    assert [p.grad.tolist() for p in m.parameters()] == _reference_grads()


def test_ddp_hooks_reduce_before_backward_returns(fake_group):
    g = fake_group(size=2)
    m = _model()
    ddp = dist.DistributedDataParallel(m)
    _loss(ddp).backward()
    assert sum(c.startswith("DDP gradient bucket") for c in g.calls) == 1
    assert not ddp._armed           # finished inside backward: nothing left for the step


def test_ddp_no_sync_accumulates_locally(fake_group):
    g = fake_group(size=2)
    m = _model()
    ddp = dist.DistributedDataParallel(m)
    with ddp.no_sync():
        _loss(ddp).backward()
    assert not any(c.startswith("DDP gradient bucket") for c in g.calls)
    _loss(ddp).backward()
    ref = _reference_grads()
    got = [p.grad.tolist() for p in m.parameters()]
    assert np.allclose(np.concatenate([np.ravel(x) for x in got]),
                       2 * np.concatenate([np.ravel(x) for x in ref]), rtol=1e-6)


def test_ddp_unused_parameters(fake_group):
    fake_group(size=2)

    class TwoHeads(nr.nn.Module):
        def __init__(self):
            self.a, self.b = nr.nn.Linear(4, 2, seed=0), nr.nn.Linear(4, 2, seed=5)

        def forward(self, x):
            return self.a(x)

    m = TwoHeads()
    ddp = dist.DistributedDataParallel(m, find_unused_parameters=True)
    ddp(nr.ones((3, 4))).sum().backward()
    assert m.b.weight.grad.tolist() == [[0.0] * 4] * 2 and m.a.weight.grad is not None
    ddp2 = dist.DistributedDataParallel(m)     # without find_unused_parameters: a stall, said
    ddp2(nr.ones((3, 4))).sum().backward()
    with pytest.raises(DistributedError, match="find_unused_parameters"):
        ddp2(nr.ones((3, 4)))


def test_ddp_checks_model_and_device(fake_group):
    g = fake_group(size=2)
    g.allgather_bytes = lambda b: [b, b.replace(b"(16, 8)", b"(17, 8)")]
    with pytest.raises(ShapeError, match="model differs across ranks"):
        dist.DistributedDataParallel(_model())
    g.accepts = ("cuda",)
    with pytest.raises(DeviceError):
        dist.DistributedDataParallel(_model())


def test_core_does_not_import_distributed():
    import subprocess
    code = ("import sys, numr_web, numr_web.nn; "
            "print([m for m in sys.modules if m.startswith(('numr_web.distributed', 'mpi4py'))])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.getcwd()}, timeout=60)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_ddp_forward_without_grad_does_not_start_a_reduction(fake_group):
    g = fake_group(size=2)
    m = _model()
    ddp = dist.DistributedDataParallel(m)
    with nr.no_grad():
        ddp(nr.ones((2, 8)))              # evaluation between steps
    assert not ddp._armed
    _loss(ddp).backward()
    ddp(nr.ones((2, 8)))                  # a forward whose backward is skipped ...
    _loss(ddp).backward()                 # ... does not block the next iteration
    got = np.concatenate([np.ravel(p.grad.tolist()) for p in m.parameters()])
    ref = np.concatenate([np.ravel(x) for x in _reference_grads()])
    np.testing.assert_allclose(got, 2 * ref, rtol=1e-6)     # accumulated: no zero_grad between
    assert sum(c.startswith("DDP gradient bucket") for c in g.calls) == 2
