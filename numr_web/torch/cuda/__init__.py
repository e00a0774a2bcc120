"""torch.cuda over numr_web's "cuda" device (CuPy). Without a usable GPU it answers as torch does
without one: is_available() False, device_count() 0, the seeding functions and empty_cache()
do nothing, the memory counters are 0; synchronize() raises BackendUnavailableError.

numr_web has one random generator for every device, so torch.cuda.manual_seed(s) (when CUDA is
available) seeds that one, as torch.manual_seed(s) does."""
from __future__ import annotations

from ...backends import get_backend, probe
from ...errors import UnsupportedError
from ...generator import default_generator
from . import amp  # noqa: F401


def is_available():
    return probe("cuda")[0]


def device_count():
    """1 where a GPU is usable (numr_web drives one GPU per process), else 0."""
    return 1 if is_available() else 0


def is_bf16_supported(including_emulation=True):
    return False                        # numr_web has no bfloat16 storage


def current_device():
    get_backend("cuda")
    return 0


def set_device(device):
    index = getattr(device, "index", device)
    if index not in (None, 0):
        raise UnsupportedError(f"torch.cuda.set_device({device!r}): numr_web drives one GPU per "
                               "process (index 0); choose it with CUDA_VISIBLE_DEVICES")


def get_device_name(device=None):
    return get_backend("cuda").info().get("name", "cuda")


def manual_seed(seed):
    if is_available():
        default_generator.manual_seed(seed)


manual_seed_all = manual_seed


def seed():
    if is_available():
        default_generator.seed()


seed_all = seed


def synchronize(device=None):
    """Wait for the GPU's queued work."""
    get_backend("cuda")
    import cupy
    cupy.cuda.get_current_stream().synchronize()


def _pool():
    if not is_available():
        return None
    get_backend("cuda")
    import cupy
    return cupy.get_default_memory_pool()


def memory_allocated(device=None):
    """Bytes of GPU memory held by tensors (CuPy's memory pool: used bytes)."""
    pool = _pool()
    return 0 if pool is None else pool.used_bytes()


def memory_reserved(device=None):
    """Bytes the memory pool holds, used or cached (torch's reserved memory)."""
    pool = _pool()
    return 0 if pool is None else pool.total_bytes()


def max_memory_allocated(device=None):
    """0 without a GPU (as torch). With one: CuPy's pool records no peak, so this raises
    UnsupportedError (memory_reserved() bounds the peak since the last empty_cache())."""
    if _pool() is None:
        return 0
    raise UnsupportedError("torch.cuda.max_memory_allocated: CuPy's memory pool keeps no peak "
                           "count; memory_reserved() (the pool's total since the last "
                           "empty_cache()) is an upper bound of it")


max_memory_reserved = max_memory_allocated


def reset_peak_memory_stats(device=None):
    pass


def empty_cache():
    """Return the memory pool's cached blocks to the GPU."""
    pool = _pool()
    if pool is not None:
        pool.free_all_blocks()
