"""2-D GEMMs through cuBLAS called directly, on a handle of numr's own with a workspace of its own.

CuPy's cuBLAS wrappers refuse to run while a stream is being captured into a CUDA graph; cuBLAS
itself records fine once it has a workspace and needs no allocation. So the cuda backend calls
cublas{S,D}gemm itself (the library CuPy already loaded), for eager steps and captured ones alike:
the same handle, the same algorithms, the same numbers. Default math mode (full float32 products,
no TF32: the TF32 opt-in goes through cupy.matmul). Operands may be dense or transposed views; the
row-major product is computed as the column-major C^T = B^T A^T with transpose flags.
"""
from __future__ import annotations

import ctypes

from ...errors import KernelError

_WORKSPACE = 32 * 2 ** 20
_OP_N, _OP_T = 0, 1


def _loaded(name):
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            base = path.rsplit("/", 1)[-1]
            if base.startswith(name + ".") or base == name:
                return path
    return None


class Blas:
    def __init__(self, cupy, numpy):
        cupy.cuda.device.get_cublas_handle()            # CuPy loads libcublas
        path = _loaded("libcublas.so")
        if path is None:
            raise OSError("libcublas is not loaded in this process")
        lib = ctypes.CDLL(path)
        vp, i = ctypes.c_void_p, ctypes.c_int
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(vp)]
        lib.cublasSetStream_v2.argtypes = [vp, vp]
        lib.cublasSetWorkspace_v2.argtypes = [vp, vp, ctypes.c_size_t]
        lib.cublasSetPointerMode_v2.argtypes = [vp, i]
        for f in (lib.cublasSgemm_v2, lib.cublasDgemm_v2):
            f.argtypes = [vp, i, i, i, i, i, vp, vp, i, vp, i, vp, vp, i]
        handle = vp()
        self._check(lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
        self.lib, self.handle = lib, handle
        self.workspace = cupy.empty(_WORKSPACE, dtype=cupy.uint8)
        self._check(lib.cublasSetWorkspace_v2(handle, self.workspace.data.ptr, _WORKSPACE),
                    "cublasSetWorkspace")
        self._check(lib.cublasSetPointerMode_v2(handle, 0), "cublasSetPointerMode")
        self._scalars = {c: (numpy.ones(1, c), numpy.zeros(1, c)) for c in "fd"}
        self._ptrs = {c: (a.ctypes.data, b.ctypes.data) for c, (a, b) in self._scalars.items()}
        self._gemm = {"f": lib.cublasSgemm_v2, "d": lib.cublasDgemm_v2}

    @staticmethod
    def _check(status, what):
        if status:
            raise KernelError(f"cuBLAS {what} failed with status {status}")

    def matmul(self, a, b, out, stream):
        """out (m, n) = a (m, k) @ b (k, n), float32 or float64, each operand C- or
        F-contiguous (checked by the caller); out C-contiguous."""
        m, k = a.shape
        n = b.shape[1]
        opb, ldb = (_OP_N, n) if b._c_contiguous else (_OP_T, k)
        opa, lda = (_OP_N, k) if a._c_contiguous else (_OP_T, m)
        ch = a.dtype.char
        alpha, beta = self._ptrs[ch]
        lib, h = self.lib, self.handle
        lib.cublasSetStream_v2(h, stream)
        status = self._gemm[ch](h, opb, opa, n, m, k, alpha, b.data.ptr, ldb, a.data.ptr, lda,
                                beta, out.data.ptr, n)
        if status:
            raise KernelError(f"cuBLAS gemm ({m}x{k} @ {k}x{n}, {a.dtype}) failed with status "
                              f"{status}")
        return out
