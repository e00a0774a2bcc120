"""Worker for tests/test_distributed_mpi.py, started by mpirun or numr_web.distributed.launch:
    python tests/dist_worker.py COMMAND [ARGS]
Prints what the test checks."""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import numr_web as nr  # noqa: E402
import numr_web.distributed as dist  # noqa: E402
from numr_web.errors import DistributedError, ShapeError  # noqa: E402


def collectives():
    dist.init("mpi", timeout=20, check=True)
    r, w = dist.rank(), dist.world_size()
    t = nr.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) * (r + 1))
    dist.all_reduce(t)
    assert t.tolist() == (np.arange(6).reshape(2, 3) * sum(range(1, w + 1))).tolist(), t
    dist.all_reduce(t, op="mean")
    m = nr.tensor(np.full(3, r, np.float16))
    dist.all_reduce(m, op="max")
    assert m.tolist() == [w - 1] * 3
    b = nr.tensor(np.full(4, 10 * r, np.int32))
    dist.broadcast(b, src=w - 1)
    assert b.tolist() == [10 * (w - 1)] * 4
    work = dist.all_reduce(nr.ones(5), async_op=True)
    work.wait()
    dist.barrier()
    try:
        dist.all_reduce(nr.zeros((2 + r,)))
        raise SystemExit("no ShapeError")
    except ShapeError as e:
        print(f"rank {r} ShapeError: {e}", flush=True)
    assert dist.all_gather_bytes(b"x" * (r + 1)) == [b"x" * (i + 1) for i in range(w)]
    print(f"rank {r} collectives OK", flush=True)
    dist.destroy()


def demo(epochs, out):
    from numr_web.apps.demo_distributed import run_digits
    res = run_digits(epochs=int(epochs), hidden=32, timeout=60, log=None)
    if res["rank"] == 0:
        with open(out, "w") as f:
            json.dump(res, f)
    dist.destroy()


def die():
    from numr_web.apps.demo_distributed import run_digits
    t0 = time.monotonic()
    try:
        run_digits(epochs=5, hidden=32, timeout=3, log=None, fail_rank=1, fail_step=5)
    except DistributedError as e:
        print(f"rank {dist.rank()} DistributedError after {time.monotonic() - t0:.1f} s: {e}",
              flush=True)
        raise


def stuck():
    dist.init("mpi", timeout=2)
    if dist.rank() == 1:
        time.sleep(60)
    try:
        dist.all_reduce(nr.ones(1000))
    except DistributedError as e:
        print(f"rank {dist.rank()} DistributedError: {e}", flush=True)
        raise


def worldsize():
    try:
        dist.init("mpi", world_size=3, timeout=5)
    except DistributedError as e:
        print(f"DistributedError: {e}", flush=True)


def store_rendezvous():
    from numr_web.distributed.store import make_store, rendezvous
    env = dist.read_env()
    store = make_store("env://", env, 2)
    try:
        rendezvous(store, env.rank, env.world_size, 2)
        print(f"rank {env.rank} joined", flush=True)
    except DistributedError as e:
        print(f"rank {env.rank} DistributedError: {e}", flush=True)
        sys.exit(1)
    finally:
        time.sleep(0.5)
        store.close()


def mpi_without_mpirun():
    try:
        dist.init("mpi", timeout=5)
    except DistributedError as e:
        print(f"DistributedError: {e}", flush=True)


if __name__ == "__main__":
    cmd, args = sys.argv[1], sys.argv[2:]
    globals()[cmd](*args)
