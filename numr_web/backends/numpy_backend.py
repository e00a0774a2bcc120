"""The cpu device: numpy. The reference semantics every other backend is tested against.
Large ops run on every core the process may use (NUMR_CPU_THREADS; cpu_threads.py): the
elementwise work in cpu_elementwise.py, the GEMMs in cpu_gemm.py, the nn primitives in
cpu_nn.py and cpu_cnn.py, the Adam update in cpu_optim.py, bit-identical to the one-call numpy
code of ArrayBackend they fall back to for small inputs (a GEMM's to one call with BLAS at one thread: cpu_gemm.py; split-K GEMMs and
a convolution's weight gradient add in another fixed order)."""
from __future__ import annotations

import os

from ..errors import BackendLimitError, ShapeError
from .array_backend import ArrayBackend
from .cpu_batchnorm import CpuBatchNorm
from .checks import Check, call_site
from .cpu_cnn import CpuCNN
from .cpu_elementwise import CpuElementwise
from .cpu_gemm import CpuGemm
from .cpu_nn import CpuNN
from .cpu_optim import CpuOptim
from .cpu_threads import ENV, num_threads


def _physical_memory():
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):   # not POSIX (e.g. the browser): no limit known
        return 2 ** 62


class NumpyBackend(CpuCNN, CpuBatchNorm, CpuNN, CpuOptim, CpuGemm, CpuElementwise, ArrayBackend):
    device = "cpu"
    dlpack_device_types = (1,)     # kDLCPU

    def __init__(self):
        import numpy
        self.xp = numpy
        super().__init__()
        self._memory = _physical_memory()

    def _bfloat16_type(self):
        try:
            import ml_dtypes            # numpy's bfloat16 (JAX's): imported once, with the device
        except ImportError:
            return None
        return ml_dtypes.bfloat16

    def _missing_dtype_hint(self, dtype):
        if dtype.name == "bfloat16":
            return "numpy's bfloat16 comes from ml_dtypes: pip install ml_dtypes (or numr-web[cpu])"
        return super()._missing_dtype_hint(dtype)

    @classmethod
    def probe(cls):
        try:
            import numpy
        except ImportError:
            return False, "numpy is not installed (pip install numpy)"
        return True, f"numpy {numpy.__version__}"

    def info(self):
        import numpy
        from . import cpu_jit
        d = {"library": f"numpy {numpy.__version__}",
             "threads": f"{num_threads()} ({ENV} or the CPUs this process may use)",
             "compiled loops": cpu_jit.status()}
        try:
            from threadpoolctl import threadpool_info
            blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
            if blas:
                d["blas"] = f"{blas[0].get('internal_api')} {blas[0].get('version')} " \
                            f"({blas[0].get('architecture')}, {blas[0].get('num_threads')} threads)"
        except ImportError:
            pass
        return d

    def max_elements(self, dtype):
        return self._memory // dtype.itemsize

    def full(self, shape, value, dtype):
        try:
            return super().full(shape, value, dtype)
        except MemoryError:
            raise BackendLimitError(f"not enough memory for a {dtype.name} tensor of shape "
                                    f"{tuple(shape)}") from None

    def check_later(self, flag, op, text, error=ShapeError):
        if flag is not None and bool(flag):     # the values are on the host: check at once
            raise Check(op, text, error, call_site()).at_once()

    def to_numpy(self, h):
        return h

    def to_list(self, h):
        return h.tolist()
