"""torch.cuda over numr_web's "cuda" device (CuPy). Without a usable GPU it answers as torch does
without one: is_available() False, device_count() 0, the seeding functions and empty_cache()
do nothing, the memory counters are 0 (memory_stats() is {}); synchronize(),
reset_peak_memory_stats() and mem_get_info() raise BackendUnavailableError. With one, the memory
counters read CuPy's memory pool (numr_web.backends.cuda.memory).

numr_web has one random generator for every device, so torch.cuda.manual_seed(s) (when CUDA is
available) seeds that one, as torch.manual_seed(s) does."""
from __future__ import annotations

import warnings

from ...backends import get_backend, probe
from ...devices import Device
from ...errors import UnsupportedError
from ...generator import default_generator
from . import amp  # noqa: F401


def is_available():
    return probe("cuda")[0]


def device_count():
    """1 where a GPU is usable (numr_web drives one GPU per process), else 0."""
    return 1 if is_available() else 0


def is_bf16_supported(including_emulation=True):
    return False                        # numr_web holds bfloat16 on the cpu device only


def current_device():
    get_backend("cuda")
    return 0


def set_device(device):
    index = Device(device).index if isinstance(device, str) else getattr(device, "index", device)
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


def _stats():
    """The cuda device's memory statistics (backends/cuda/memory.py), None without a GPU."""
    if not is_available():
        return None
    get_backend("cuda")
    from ...backends.cuda.memory import memory_stats
    return memory_stats()


def memory_allocated(device=None):
    """Bytes of GPU memory held by tensors (CuPy's memory pool: the blocks in use); 0 without a
    GPU, as torch."""
    stats = _stats()
    return 0 if stats is None else stats.allocated()


def memory_reserved(device=None):
    """Bytes the memory pool holds, in use or cached (torch's reserved memory)."""
    stats = _stats()
    return 0 if stats is None else stats.reserved()


_warned = []


def max_memory_allocated(device=None):
    """The peak of memory_allocated() since the last reset_peak_memory_stats(). CuPy keeps no
    peak, so numr_web records it at each allocation from the first call of this function or of
    reset_peak_memory_stats() on (call that before the work to measure; a first call without it
    warns that the peak starts there). 0 without a GPU, as torch."""
    stats = _stats()
    if stats is None:
        return 0
    if not stats.tracking and not _warned:
        _warned.append(True)
        warnings.warn("torch.cuda.max_memory_allocated: numr_web records the peak from this call "
                      "on (CuPy's pool keeps none); call torch.cuda.reset_peak_memory_stats() "
                      "before the work to measure its peak", RuntimeWarning, stacklevel=2)
    return stats.peak_allocated()


def max_memory_reserved(device=None):
    """The peak of memory_reserved() since the last reset_peak_memory_stats()."""
    stats = _stats()
    return 0 if stats is None else stats.peak_reserved()


def reset_peak_memory_stats(device=None):
    """Restart the peaks (max_memory_allocated / max_memory_reserved) from the current values.
    Without a GPU it raises BackendUnavailableError, as torch raises there."""
    stats = _stats()
    if stats is None:
        get_backend("cuda")                 # raises BackendUnavailableError saying why
    stats.reset_peak()


reset_max_memory_allocated = reset_peak_memory_stats


def memory_stats(device=None):
    """torch.cuda.memory_stats' keys for all pools: allocated_bytes / reserved_bytes, current
    and peak ({} without a GPU, as torch)."""
    stats = _stats()
    if stats is None:
        return {}
    return {"allocated_bytes.all.current": stats.allocated(),
            "allocated_bytes.all.peak": max_memory_allocated(device),
            "reserved_bytes.all.current": stats.reserved(),
            "reserved_bytes.all.peak": stats.peak_reserved()}


def mem_get_info(device=None):
    """(free, total) bytes of the GPU's memory, as the driver reports them."""
    get_backend("cuda")
    import cupy
    return tuple(cupy.cuda.runtime.memGetInfo())


def empty_cache():
    """Return the memory pool's cached blocks to the GPU (a no-op without a GPU, as torch)."""
    stats = _stats()
    if stats is not None:
        stats.empty_cache()
