"""The cpu device: numpy. The reference semantics every other backend is tested against."""
from __future__ import annotations

from .array_backend import ArrayBackend


class NumpyBackend(ArrayBackend):
    device = "cpu"

    def __init__(self):
        import numpy
        self.xp = numpy
        super().__init__()

    @classmethod
    def probe(cls):
        try:
            import numpy
        except ImportError:
            return False, "numpy is not installed (pip install numpy)"
        return True, f"numpy {numpy.__version__}"

    def info(self):
        import numpy
        d = {"library": f"numpy {numpy.__version__}"}
        try:
            from threadpoolctl import threadpool_info
            blas = [i for i in threadpool_info() if i.get("user_api") == "blas"]
            if blas:
                d["blas"] = f"{blas[0].get('internal_api')} {blas[0].get('version')} " \
                            f"({blas[0].get('architecture')}, {blas[0].get('num_threads')} threads)"
        except ImportError:
            pass
        return d

    def to_numpy(self, h):
        return h

    def to_list(self, h):
        return h.tolist()
