"""torch.cuda's memory counters over CuPy's pool (numr_web/backends/cuda/memory.py): the
bookkeeping against a stand-in pool here, the real counters against tensors of known sizes on
a GPU (skipped without one), and torch's answers on a machine without CUDA."""
import gc
import warnings

import pytest

import numr_web as nr
import numr_web.torch as ntorch
from numr_web.backends.cuda.memory import MemoryStats

OK, WHY = nr.backends.probe("cuda")
needs_cuda = pytest.mark.skipif(not OK, reason=f"cuda: {WHY}")
MiB = 1 << 20


class _Block:
    def __init__(self, pool, size):
        self.pool, self.size = pool, size

    def free(self):
        self.pool.in_use.remove(self)
        self.pool.cached.append(self.size)


class _Pool:
    """CuPy's pool as the statistics see it: blocks in use, cached blocks, a total that grows
    only when no cached block fits and shrinks at free_all_blocks()."""

    def __init__(self):
        self.in_use, self.cached = [], []

    def malloc(self, size):
        fit = [c for c in self.cached if c >= size]
        if fit:
            self.cached.remove(min(fit))
            size = min(fit)
        block = _Block(self, size)
        self.in_use.append(block)
        return block

    def used_bytes(self):
        return sum(b.size for b in self.in_use)

    def total_bytes(self):
        return self.used_bytes() + sum(self.cached)

    def free_all_blocks(self):
        self.cached.clear()


class _Cupy:
    def __init__(self):
        pool = self.pool = _Pool()

        class cuda:                                     # noqa: N801 (cupy.cuda's shape)
            allocator = pool.malloc

            @staticmethod
            def get_allocator():
                return cuda.allocator

            @staticmethod
            def set_allocator(fn):
                cuda.allocator = fn

            @staticmethod
            def alloc(size):
                return cuda.allocator(size)
        self.cuda = cuda

    def get_default_memory_pool(self):
        return self.pool


def test_peaks_follow_allocations_and_resets():
    cp = _Cupy()
    stats = MemoryStats(cp)
    a = cp.cuda.alloc(4 * MiB)                          # before tracking: not seen as a peak
    assert stats.allocated() == stats.reserved() == 4 * MiB and not stats.tracking
    stats.reset_peak()
    assert stats.tracking and stats.peak_allocated() == 4 * MiB
    b = cp.cuda.alloc(8 * MiB)
    b.free()                                            # 12 MiB were in use at once
    assert stats.allocated() == 4 * MiB and stats.peak_allocated() == 12 * MiB
    c = cp.cuda.alloc(2 * MiB)                          # reuses the cached 8 MiB block
    assert stats.allocated() == 12 * MiB and stats.peak_allocated() == 12 * MiB
    c.free()
    stats.reset_peak()
    assert stats.peak_allocated() == 4 * MiB and stats.peak_reserved() == 12 * MiB
    stats.empty_cache()                                 # the cache goes, the reserved peak stays
    assert stats.reserved() == 4 * MiB and stats.peak_reserved() == 12 * MiB
    stats.reset_peak()
    assert stats.peak_reserved() == 4 * MiB
    a.free()
    assert stats.allocated() == 0 and stats.peak_allocated() == 4 * MiB


def test_tracking_wraps_the_default_pool_only():
    cp = _Cupy()
    cp.cuda.set_allocator(lambda size: None)            # someone else's allocator
    with pytest.raises(nr.NumrError, match="default memory pool"):
        MemoryStats(cp).track()


# -- on a GPU ----------------------------------------------------------------------------------------
@needs_cuda
def test_cuda_memory_counters_see_tensors_of_known_size():
    ntorch.cuda.synchronize()
    gc.collect()
    ntorch.cuda.empty_cache()
    ntorch.cuda.reset_peak_memory_stats()
    base = ntorch.cuda.memory_allocated()
    assert ntorch.cuda.max_memory_allocated() == base
    a = ntorch.zeros(MiB, device="cuda")                # 4 MiB of float32
    assert ntorch.cuda.memory_allocated() - base == 4 * MiB
    b = ntorch.ones(2 * MiB, device="cuda")             # 8 MiB more
    c = (b * 2).sum().item()
    assert c == 4 * MiB
    del b
    gc.collect()
    kept = ntorch.cuda.memory_allocated() - base          # a, and what the sum may cache (< 64 KiB)
    assert 4 * MiB <= kept < 4 * MiB + 64 * 1024
    peak = ntorch.cuda.max_memory_allocated() - base
    assert 20 * MiB <= peak <= 28 * MiB                  # a, b and b * 2 (+ the sum's scratch)
    assert ntorch.cuda.memory_reserved() >= ntorch.cuda.memory_allocated()
    assert ntorch.cuda.max_memory_reserved() >= ntorch.cuda.memory_reserved()
    stats = ntorch.cuda.memory_stats()
    assert stats["allocated_bytes.all.current"] == ntorch.cuda.memory_allocated()
    assert stats["allocated_bytes.all.peak"] == ntorch.cuda.max_memory_allocated()
    ntorch.cuda.reset_peak_memory_stats()
    assert ntorch.cuda.max_memory_allocated() == ntorch.cuda.memory_allocated()
    reserved = ntorch.cuda.memory_reserved()
    ntorch.cuda.empty_cache()
    assert ntorch.cuda.memory_reserved() <= reserved
    assert ntorch.cuda.max_memory_reserved() == reserved
    free, total = ntorch.cuda.mem_get_info()
    assert 0 < free <= total
    del a


@needs_cuda
def test_cuda_namespace_on_a_gpu():
    assert ntorch.cuda.is_available() and ntorch.cuda.device_count() == 1
    ntorch.cuda.manual_seed(3)
    x = ntorch.rand(4, device="cuda")
    ntorch.cuda.manual_seed_all(3)
    assert ntorch.rand(4, device="cuda").tolist() == x.tolist()
    ntorch.cuda.synchronize()
    ntorch.cuda.synchronize(ntorch.device("cuda:0"))
    for d in ("cuda", "cuda:0", ntorch.device("cuda", 0), 0):
        ntorch.cuda.set_device(d)
    with pytest.raises(nr.UnsupportedError, match="one GPU"):
        ntorch.cuda.set_device("cuda:1")
    assert ntorch.ones(2).cuda().device.type == "cuda"
    assert ntorch.ones(2).to(ntorch.device("cuda", 0)).cpu().device.type == "cpu"
    assert ntorch.accelerator.current_accelerator().type == "cuda"


# -- without one -----------------------------------------------------------------------------------
def test_memory_functions_answer_as_torch_without_cuda():
    torch = pytest.importorskip("torch")
    if OK:
        pytest.skip("this machine has CUDA")
    for name in ("memory_allocated", "max_memory_allocated", "memory_reserved",
                 "max_memory_reserved"):
        assert getattr(ntorch.cuda, name)() == getattr(torch.cuda, name)() == 0, name
    assert ntorch.cuda.memory_stats() == dict(torch.cuda.memory_stats()) == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ntorch.cuda.empty_cache()
        torch.cuda.empty_cache()
    for name in ("reset_peak_memory_stats", "mem_get_info", "synchronize"):
        with pytest.raises(Exception):
            getattr(torch.cuda, name)()
        with pytest.raises(nr.BackendUnavailableError):
            getattr(ntorch.cuda, name)()
