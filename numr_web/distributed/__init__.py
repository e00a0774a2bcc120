"""Data-parallel training over MPI (cpu; cuda via CUDA-aware MPI or host staging) and NCCL (cuda),
with torch.distributed's names and semantics.

    import numr_web.distributed as dist
    dist.init(backend="mpi")               # under `mpirun -n N python train.py`
    model = dist.DistributedDataParallel(model)
    sampler = dist.DistributedSampler(n_train)
    ...
    dist.all_reduce(t, op="mean"); dist.broadcast(t, src=0); dist.barrier()

Nothing in numr_web's core imports this package; mpi4py and cupy are imported only by init().
"""
from ..errors import DistributedError
from .world import (all_gather_bytes, all_reduce, backend, barrier, broadcast, destroy,
                    destroy_process_group, get_rank, get_world_size, init, init_process_group,
                    is_initialized, local_rank, rank, world_size)
from .ddp import DistributedDataParallel
from .sampler import DistributedSampler
from .env import LaunchEnv, read_env

__all__ = ["DistributedError", "DistributedDataParallel", "DistributedSampler", "LaunchEnv",
           "all_gather_bytes", "all_reduce", "backend", "barrier", "broadcast", "destroy",
           "destroy_process_group", "get_rank", "get_world_size", "init", "init_process_group",
           "is_initialized", "local_rank", "rank", "read_env", "world_size"]
