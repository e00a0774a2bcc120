"""2-D GEMMs through cuBLAS called directly, on a handle of numr's own with a workspace of its own.

cupy.matmul refuses to run while a stream is being captured into a CUDA graph; cuBLAS itself
records fine once it has a workspace and needs no allocation. So the cuda backend calls
cublas{S,D}gemm itself on that handle (the library CuPy already loaded, through ctypes), for
eager steps and captured ones alike: the same handle, the same algorithms, the same numbers.
Default math mode (full float32 products, no TF32: the TF32 opt-in goes through cupy.matmul).
float16 and bfloat16 operands run through cublasGemmEx with float32 accumulation
(CUBLAS_COMPUTE_32F, torch's default for these dtypes): on tensor cores, the result written in
the operands' dtype (the accumulator rounded once) or in float32 (for an epilogue that rounds
once after it).
Operands may be dense or transposed views; the row-major product is computed as the column-major
C^T = B^T A^T with transpose flags. One lock per handle: its stream and the call go together.
"""
from __future__ import annotations

import ctypes
import threading

from ...errors import KernelError

_WORKSPACE = 32 * 2 ** 20
_OP_N, _OP_T = 0, 1
# cudaDataType_t codes (library_types.h) of the 16-bit float operands GemmEx takes, by numpy
# dtype name (bfloat16's where CuPy holds it), and of float32;
# cublasComputeType_t CUBLAS_COMPUTE_32F; cublasGemmAlgo_t CUBLAS_GEMM_DEFAULT
_CUDA_R = {"float16": 2}
_R_16BF = 14
_R_32F = 0
_COMPUTE_32F = 68
_ALGO_DEFAULT = -1


def _loaded(name):
    with open("/proc/self/maps") as f:
        for line in f:
            path = line.split()[-1]
            base = path.rsplit("/", 1)[-1]
            if base.startswith(name + ".") or base == name:
                return path
    return None


class Blas:
    def __init__(self, cupy, numpy, bfloat16=None):
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
        ll = ctypes.c_longlong
        for f in (lib.cublasSgemmStridedBatched, lib.cublasDgemmStridedBatched):
            f.argtypes = [vp, i, i, i, i, i, vp, vp, i, ll, vp, i, ll, vp, vp, i, ll, i]
        lib.cublasGemmEx.argtypes = [vp, i, i, i, i, i, vp, vp, i, i, vp, i, i, vp, vp, i, i,
                                     i, i]
        lib.cublasGemmStridedBatchedEx.argtypes = [vp, i, i, i, i, i, vp, vp, i, i, ll, vp, i, i,
                                                   ll, vp, vp, i, i, ll, i, i, i]
        handle = vp()
        self._check(lib.cublasCreate_v2(ctypes.byref(handle)), "cublasCreate")
        self.lib, self.handle = lib, handle
        self._on_stream = None              # the stream the handle was last set to (ours alone)
        self._lock = threading.Lock()
        self.workspace = cupy.empty(_WORKSPACE, dtype=cupy.uint8)
        self._check(lib.cublasSetWorkspace_v2(handle, self.workspace.data.ptr, _WORKSPACE),
                    "cublasSetWorkspace")
        self._check(lib.cublasSetPointerMode_v2(handle, 0), "cublasSetPointerMode")
        self._scalars = {c: (numpy.ones(1, c), numpy.zeros(1, c)) for c in "fd"}
        self._ptrs = {c: (a.ctypes.data, b.ctypes.data) for c, (a, b) in self._scalars.items()}
        self._gemm = {"f": lib.cublasSgemm_v2, "d": lib.cublasDgemm_v2}
        self._gemm_batched = {"f": lib.cublasSgemmStridedBatched,
                              "d": lib.cublasDgemmStridedBatched}
        # 16-bit operands by dtype character: their cudaDataType (alpha, beta: float32)
        self._ex = {numpy.dtype(name).char: code for name, code in _CUDA_R.items()}
        if bfloat16 is not None:
            self._ex[numpy.dtype(bfloat16).char] = _R_16BF
        self.dtypes = "fd" + "".join(self._ex)      # characters of the dtypes matmul takes

    @staticmethod
    def _check(status, what):
        if status:
            raise KernelError(f"cuBLAS {what} failed with status {status}")

    def _set_stream(self, stream):
        # cublasSetStream resets the handle's workspace to the default pool (cuBLAS docs): set
        # ours again, so no GEMM allocates (an allocation would break a CUDA-graph capture)
        lib = self.lib
        self._check(lib.cublasSetStream_v2(self.handle, stream), "cublasSetStream")
        self._check(lib.cublasSetWorkspace_v2(self.handle, self.workspace.data.ptr, _WORKSPACE),
                    "cublasSetWorkspace")
        self._on_stream = stream

    def matmul(self, a, b, out, stream):
        """out (m, n) = a (m, k) @ b (k, n) of one dtype of `dtypes`, each operand C- or
        F-contiguous (checked by the caller); out C-contiguous, of their dtype or (16-bit
        operands) float32."""
        m, k = a.shape
        n = b.shape[1]
        opb, ldb = (_OP_N, n) if b._c_contiguous else (_OP_T, k)
        opa, lda = (_OP_N, k) if a._c_contiguous else (_OP_T, m)
        ch = a.dtype.char
        ex = self._ex.get(ch)
        alpha, beta = self._ptrs["f" if ex is not None else ch]
        h = self.handle
        with self._lock:            # one handle: its stream and the call belong together
            if stream != self._on_stream:
                self._set_stream(stream)
            if ex is not None:
                cty = self._ex.get(out.dtype.char, _R_32F)
                status = self.lib.cublasGemmEx(h, opb, opa, n, m, k, alpha, b.data.ptr, ex, ldb,
                                               a.data.ptr, ex, lda, beta, out.data.ptr, cty, n,
                                               _COMPUTE_32F, _ALGO_DEFAULT)
            else:
                status = self._gemm[ch](h, opb, opa, n, m, k, alpha, b.data.ptr, ldb,
                                        a.data.ptr, lda, beta, out.data.ptr, n)
        if status:
            raise KernelError(f"cuBLAS gemm ({m}x{k} @ {k}x{n}, {a.dtype}) failed with status "
                              f"{status}")
        return out

    def matmul_batched(self, a, b, out, stream):
        """out (batch, m, n) = a (batch, m, k) @ b (batch, k, n) as one strided-batched call.
        Each operand is given as (array, op, ld, batch stride in elements) by matrix_layout;
        out C-contiguous."""
        (a, opa, lda, sa), (b, opb, ldb, sb) = a, b
        batch, m, n = out.shape
        k = a.shape[-1]
        ch = a.dtype.char
        ex = self._ex.get(ch)
        alpha, beta = self._ptrs["f" if ex is not None else ch]
        h = self.handle
        with self._lock:
            if stream != self._on_stream:
                self._set_stream(stream)
            if ex is not None:
                cty = self._ex.get(out.dtype.char, _R_32F)
                status = self.lib.cublasGemmStridedBatchedEx(
                    h, opb, opa, n, m, k, alpha, b.data.ptr, ex, ldb, sb, a.data.ptr, ex, lda,
                    sa, beta, out.data.ptr, cty, n, m * n, batch, _COMPUTE_32F, _ALGO_DEFAULT)
            else:
                status = self._gemm_batched[ch](h, opb, opa, n, m, k, alpha, b.data.ptr, ldb,
                                                sb, a.data.ptr, lda, sa, beta, out.data.ptr, n,
                                                m * n, batch)
        if status:
            raise KernelError(f"cuBLAS strided-batched gemm ({batch} x {m}x{k} @ {k}x{n}, "
                              f"{a.dtype}) failed with status {status}")
        return out


class CudaGemm:
    """The cuda backend's matmul primitive: 16-bit operands give their own dtype straight from
    cuBLAS (the float32 accumulator rounded once); the backend's _gemm, which the fused layer's
    epilogue and the composed attention call, gives float32 for them (as the cpu's does)."""

    def matmul(self, a, b):
        return self._asarray(self._gemm(a, b, True), a.dtype)


def matrix_layout(x):
    """How cuBLAS reads the batched matrices of x (..., r, c): (op, ld, batch stride), in
    elements, or None when x is not one stride per batch step with dense rows or columns."""
    item = x.itemsize
    r, c = x.shape[-2:]
    sr, sc = x.strides[-2:]
    if sc == item and (sr == c * item or r == 1):
        op, ld = _OP_N, c
    elif sr == item and (sc == r * item or c == 1):
        op, ld = _OP_T, r
    else:
        return None
    lead, step = x.shape[:-2], None
    for d in reversed(range(len(lead))):        # the batch dims must fold into one stride
        if lead[d] == 1:
            continue
        if step is None:
            step, span = x.strides[d], lead[d] * x.strides[d]
        elif x.strides[d] != span:
            return None
        else:
            span = lead[d] * x.strides[d]
    if step is None:
        step = r * c * item
    if step % item or step < 0:
        return None
    return op, max(ld, 1), step // item
