"""Where this process sits in the job, read from the launcher's environment (pure; no MPI import).

Launchers understood, first match wins:
  Open MPI's mpirun   OMPI_COMM_WORLD_RANK / _SIZE / _LOCAL_RANK / _LOCAL_SIZE
  MPICH / Hydra, PMI  PMI_RANK / PMI_SIZE (MPI_LOCALRANKID or PMI_LOCAL_RANK for the local rank)
  torchrun-style      RANK / WORLD_SIZE / LOCAL_RANK / LOCAL_WORLD_SIZE / MASTER_ADDR / MASTER_PORT
                      (also what numr_web.distributed.launch sets)
  none of them        a single process: rank 0 of 1
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from ..errors import DistributedError


@dataclass(frozen=True)
class LaunchEnv:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    launcher: str                 # "openmpi" | "pmi" | "torchrun" | "none"
    master_addr: str | None = None
    master_port: int | None = None

    @property
    def under_mpi(self):
        return self.launcher in ("openmpi", "pmi")


def _int(env, key, default=None):
    v = env.get(key)
    if v is None or v == "":
        if default is None:
            raise DistributedError(f"the launcher's environment lacks {key}")
        return default
    try:
        return int(v)
    except ValueError:
        raise DistributedError(f"environment variable {key}={v!r} is not an integer") from None


def read_env(env=None) -> LaunchEnv:
    """Parse the launcher's variables (os.environ by default). Raises DistributedError when they
    contradict each other (rank outside 0..world_size-1, MPI's size != WORLD_SIZE, ...)."""
    env = os.environ if env is None else env
    addr = env.get("MASTER_ADDR") or None
    port = _int(env, "MASTER_PORT", 0) or None
    if "OMPI_COMM_WORLD_RANK" in env:
        rank, size = _int(env, "OMPI_COMM_WORLD_RANK"), _int(env, "OMPI_COMM_WORLD_SIZE")
        local = _int(env, "OMPI_COMM_WORLD_LOCAL_RANK", rank)
        lsize = _int(env, "OMPI_COMM_WORLD_LOCAL_SIZE", size)
        launcher = "openmpi"
    elif "PMI_RANK" in env:
        rank, size = _int(env, "PMI_RANK"), _int(env, "PMI_SIZE")
        local = _int(env, "MPI_LOCALRANKID", _int(env, "PMI_LOCAL_RANK", rank))
        lsize = _int(env, "MPI_LOCALNRANKS", _int(env, "PMI_LOCAL_SIZE", size))
        launcher = "pmi"
    elif "RANK" in env or "WORLD_SIZE" in env:
        rank, size = _int(env, "RANK"), _int(env, "WORLD_SIZE")
        local = _int(env, "LOCAL_RANK", rank)
        lsize = _int(env, "LOCAL_WORLD_SIZE", size)
        launcher = "torchrun"
    else:
        return LaunchEnv(0, 1, 0, 1, "none", addr, port)
    if size < 1 or not 0 <= rank < size:
        raise DistributedError(f"{launcher} environment gives rank {rank} of world size {size}: "
                               f"the rank must be in 0..{size - 1}")
    if launcher != "torchrun" and "WORLD_SIZE" in env and _int(env, "WORLD_SIZE") != size:
        raise DistributedError(f"WORLD_SIZE={env['WORLD_SIZE']} contradicts the MPI launcher, which "
                               f"started {size} processes")
    return LaunchEnv(rank, size, local, lsize, launcher, addr, port)
