"""The process group of this process and the public collectives on Tensors (torch.distributed's
names and semantics: in place on the tensor's storage, async_op=True returns a Work to wait on)."""
from __future__ import annotations

import datetime
import os

from ..errors import DeviceError, DistributedError, DTypeError
from .. import Tensor
from ._seam import writable_array
from .env import read_env
from .group import normalize_op

_GROUP = None
DEFAULT_TIMEOUT = 300.0
BACKENDS = ("mpi", "nccl")


def _seconds(timeout):
    if timeout is None:
        return float(os.environ.get("NUMR_DIST_TIMEOUT", DEFAULT_TIMEOUT))
    if isinstance(timeout, datetime.timedelta):
        timeout = timeout.total_seconds()
    timeout = float(timeout)
    if not timeout > 0:
        raise DistributedError(f"timeout must be a positive number of seconds, got {timeout}")
    return timeout


def init(backend="mpi", timeout=None, world_size=None, rank=None, init_method=None, check=None):
    """Join the job this process was launched in. Rank and world size come from the launcher's
    environment (mpirun, MPICH's PMI, torchrun-style RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/
    MASTER_PORT); world_size/rank, when given, must agree with it.

    backend: "mpi" (mpi4py; cpu tensors, cuda through CUDA-aware MPI or host staging) or "nccl"
    (cupy.cuda.nccl; cuda tensors, one process per GPU).
    timeout: seconds (or a timedelta) any collective may take before it raises DistributedError;
    default NUMR_DIST_TIMEOUT or 300.
    init_method: for nccl without MPI: "env://" (default), "tcp://HOST:PORT" or "file:///DIR".
    check: exchange a small header before every collective so that ranks calling different
    collectives, or with different shapes/dtypes, get a typed error instead of a hang or garbage
    (default: NUMR_DIST_CHECK=1 in the environment).
    """
    global _GROUP
    if _GROUP is not None:
        raise DistributedError(f"numr_web.distributed is already initialised ({_GROUP.name}, rank "
                               f"{_GROUP.rank} of {_GROUP.size}); call destroy() first")
    if backend not in BACKENDS:
        raise DistributedError(f"unknown backend {backend!r}; expected one of {BACKENDS}")
    timeout = _seconds(timeout)
    if check is None:
        check = os.environ.get("NUMR_DIST_CHECK", "").strip().lower() in ("1", "true", "yes")
    env = read_env()
    if rank is not None or world_size is not None:
        if env.launcher == "none" and backend == "nccl":
            from dataclasses import replace
            env = replace(env, rank=int(rank or 0), world_size=int(world_size or 1),
                          local_rank=int(rank or 0))
        elif rank is not None and int(rank) != env.rank:
            raise DistributedError(f"rank={rank} contradicts the launcher ({env.launcher}), "
                                   f"which says rank {env.rank}")
    if backend == "mpi":
        from .mpi_backend import MPIGroup
        group = MPIGroup(env, timeout, check, world_size=world_size)
    else:
        from .nccl_backend import NCCLGroup
        group = NCCLGroup(env, timeout, check, world_size=world_size, init_method=init_method)
    group.local_rank = env.local_rank
    group._barrier().wait()           # every rank is there (or a clear error within the timeout)
    _GROUP = group
    return group


def destroy():
    """Leave the group (torch: destroy_process_group). Safe to call when not initialised."""
    global _GROUP
    g, _GROUP = _GROUP, None
    if g is not None:
        g.close()


def is_initialized():
    return _GROUP is not None


def group(what="this call", usable=True):
    """The current process group; usable=True also refuses one broken by an earlier failure."""
    if _GROUP is None:
        raise DistributedError(f"{what} needs numr_web.distributed.init(backend=...) first")
    if usable:
        _GROUP.ensure_usable()
    return _GROUP


def rank():
    return group("rank()", usable=False).rank


def world_size():
    return group("world_size()", usable=False).size


def local_rank():
    return group("local_rank()", usable=False).local_rank


def backend():
    return group("backend()", usable=False).name


def _check_tensor(g, t, fn):
    if not isinstance(t, Tensor):
        raise DistributedError(f"{fn} takes a numr_web Tensor, got {type(t).__name__}")
    if t.device not in g.accepts:
        raise DeviceError(f"{fn}: the {g.name} backend takes tensors on "
                          f"{' or '.join(g.accepts)}, this one is on {t.device!r}; move it with "
                          f"t.to({g.accepts[0]!r})")


def all_reduce(tensor, op="sum", async_op=False):
    """Reduce `tensor` over all ranks in place: op "sum" | "mean" (alias "avg") | "max" | "min".
    Returns None, or a Work (wait(), is_completed()) with async_op=True."""
    g = group("all_reduce")
    _check_tensor(g, tensor, "all_reduce")
    op = normalize_op(op)
    if op == "mean" and not tensor.dtype.is_floating:
        raise DTypeError(f"all_reduce(op='mean') needs a floating tensor, not {tensor.dtype.name}")
    if g.check:
        g.check_same("all_reduce", tensor.shape, tensor.dtype.name, op)
    arr, commit = writable_array(tensor)

    def done():
        if op == "mean":
            arr[...] /= g.size
        commit()
    work = g._allreduce(arr, "sum" if op == "mean" else op)
    work._then = _chain(work._then, done)
    return work if async_op else work.wait() and None


def broadcast(tensor, src=0, async_op=False):
    """Overwrite `tensor` on every rank with rank `src`'s values, in place."""
    g = group("broadcast")
    _check_tensor(g, tensor, "broadcast")
    if not isinstance(src, int) or not 0 <= src < g.size:
        raise DistributedError(f"broadcast: src must be a rank in 0..{g.size - 1}, got {src!r}")
    if g.check:
        g.check_same("broadcast", tensor.shape, tensor.dtype.name, f"src={src}")
    arr, commit = writable_array(tensor)
    work = g._broadcast(arr, src)
    work._then = _chain(work._then, commit)
    return work if async_op else work.wait() and None


def barrier():
    """Return when every rank got here (DistributedError after the timeout otherwise)."""
    g = group("barrier")
    if g.check:
        g.check_same("barrier")
    g._barrier().wait()


def all_gather_bytes(b):
    """Every rank's bytes (any length), in rank order."""
    return group("all_gather_bytes").allgather_bytes(bytes(b))


def _chain(first, second):
    if first is None:
        return second

    def both():
        first()
        second()
    return both


# torch.distributed's names
init_process_group = init
destroy_process_group = destroy
get_rank = rank
get_world_size = world_size
