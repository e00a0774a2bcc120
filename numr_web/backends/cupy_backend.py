"""The cuda device: CuPy (cuBLAS GEMMs, CuPy's memory pool); the same primitives as the cpu
backend through ArrayBackend, with fused CUDA kernels where they pay."""
from __future__ import annotations

from .array_backend import ArrayBackend


class CupyBackend(ArrayBackend):
    device = "cuda"

    def __init__(self):
        import cupy
        self.xp = cupy
        super().__init__()

    @classmethod
    def probe(cls):
        try:
            import cupy
        except ImportError:
            return False, "cupy is not installed (pip install 'numr-web[cuda]')"
        except Exception as e:  # a broken CUDA install can fail at import
            return False, f"cupy failed to import: {e}"
        try:
            if not cupy.cuda.is_available():
                return False, "no CUDA driver or GPU found (cupy.cuda.is_available() is False)"
            n = cupy.cuda.runtime.getDeviceCount()
            name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        except Exception as e:
            return False, f"CUDA runtime error: {e}"
        return True, f"cupy {cupy.__version__}, {n} GPU(s): {name}"

    def info(self):
        import cupy
        props = cupy.cuda.runtime.getDeviceProperties(0)
        return {"library": f"cupy {cupy.__version__}", "gpu": props["name"].decode(),
                "memory": f"{props['totalGlobalMem'] / 2**30:.1f} GiB",
                "compute capability": f"{props['major']}.{props['minor']}"}

    def from_host(self, host, dtype):
        if hasattr(host, "__cuda_array_interface__"):
            return host.astype(self.np_dtype(dtype), copy=False)
        return super().from_host(host, dtype)

    def to_numpy(self, h):
        return self.xp.asnumpy(h)

    def to_list(self, h):
        return self.to_numpy(h).tolist()

    def random(self, shape, dtype, seed, kind):
        rng = self.xp.random.default_rng(seed)
        npd = self.np_dtype(dtype)
        x = rng.random(shape, dtype=self.xp.float64) if kind == "uniform" \
            else rng.standard_normal(shape, dtype=self.xp.float64)
        return x.astype(npd)
