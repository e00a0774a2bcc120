"""The cuda device: CuPy (cuBLAS GEMMs, CuPy's memory pool) behind the same array-module primitives
as the cpu backend (ArrayBackend), with the hot paths on raw kernels of kernels.cu (activation
dispatch generated from the table by codegen.py, launched through launch.py):

  * activation(name, z, fn): one kernel (fn: the table's fwd / dz / d2 / ds);
  * gemm_bias_act: cuBLAS GEMM (cupy.matmul), then ONE kernel adding the bias and applying the
    activation in place (writing the pre-activation z separately only when the row saves "z");
  * act_backward: ONE kernel dz = d1(dy, saved) with 16-byte vector loads, plus the bias gradient
    from per-block partial column sums written by that same kernel and one small reduction;
  * binary add / sub / mul / div of same-shape dense arrays, or with a Python number: one
    pre-bound kernel launch instead of CuPy's ufunc machinery;
  * scatter_add: deterministic (sorted keys, one in-order sum per target; no float atomics);
  * attention / attention_backward: fused FlashAttention-2 kernels (attention.py: tensor cores
    for float16, SIMT tiles for float32): one kernel forward, two backward, no T x T scores.

float16 is computed in float32 and rounded once; its GEMMs run on tensor cores (cublasGemmEx,
float32 accumulation: blas.py). bfloat16 (CuPy holds it as ml_dtypes' type where ml_dtypes is
installed) takes the same GEMMs and the array-module paths for the rest (computed in float32,
rounded once); the raw kernels are float16's and float32's. Sizes are checked
against the GPU's memory first (max_elements): a bad size is a typed error, never an illegal
address that would poison the CUDA context. Checks on values are raised at the next readback.

TF32: off by default, so float32 GEMMs match torch's default (full float32 products). Opt in with
NUMR_CUDA_TF32=1 (read when the backend starts) or `get_backend("cuda").tf32 = True` (it sets
CuPy's cuBLAS compute type for float32, process-wide for CuPy).

Step capture into CUDA graphs: graphs.py (nr.capture); the fused nn kernels: nn.py.
"""
from __future__ import annotations

import math
import os

from ... import dtypes
from ...errors import BackendLimitError, KernelError
from ...vocab.activations import ACT
from ..array_backend import ArrayBackend
from . import codegen as G
from .attention import Attention
from .bfloat16 import CudaBfloat16
from .blas import Blas, CudaGemm, matrix_layout
from .launch import BLOCK, CASTS, Kernels
from .cnn import CudaCNN
from .nn import CudaNN
from .optim import CudaOptim

SUM_SMALL_MAX = 1 << 14    # sums up to this many elements run as one block (sum_small)


def _as_rows(a):
    """a (..., n) as a 2-D (rows, n) view; reshape(-1, n) cannot infer rows when n is 0."""
    rows = 1
    for d in a.shape[:-1]:
        rows *= d
    return a.reshape(rows, a.shape[-1])


def _resident_blocks(fn, threads):
    """Blocks of `threads` threads of kernel `fn` resident per multiprocessor (occupancy API)."""
    try:
        from cupy_backends.cuda.api import driver
        return max(1, int(driver.occupancyMaxActiveBlocksPerMultiprocessor(fn.ptr, threads, 0)))
    except Exception:
        return 4


class CudaBackend(CudaBfloat16, CudaCNN, CudaGemm, CudaNN, CudaOptim, ArrayBackend):
    device = "cuda"
    dlpack_device_types = (2,)   # kDLCUDA
    can_capture = True           # nr.capture records steps into CUDA graphs

    # kernel variant knobs (bench/cuda_vs_torch.py sweeps them): vector bytes per access, vectors per
    # thread; the bias gradient "fused" (partial sums in the act-backward kernel) or "sum"
    _vec_bytes = 16
    unroll = 4                # vectors per thread: activation / act-backward / fused bias-gradient
    epilogue_unroll = 1       # vectors per thread in the GEMM bias + activation epilogue
    bias_grad = "fused"
    db_blocks_per_sm = 16     # fused bias-gradient grid: blocks per multiprocessor; 0 = one wave

    def __init__(self):
        import cupy
        import numpy
        self.xp = cupy
        super().__init__()
        dev = cupy.cuda.runtime.getDevice()
        props = cupy.cuda.runtime.getDeviceProperties(dev)
        self._sms = props["multiProcessorCount"]
        self._mem_total = int(props["totalGlobalMem"])
        self._nd = cupy.ndarray
        self._ct = {cupy.dtype(k).char: v for k, v in G.C_TYPES.items()}
        self.kernels = Kernels(cupy)
        self._stream = cupy.cuda.get_current_stream
        self._code = {name: i for i, name in enumerate(ACT)}
        self._half_pair = {dtypes.float16: "half_t", dtypes.float32: "float"}   # cast targets
        self._resident = {}
        self._oom = cupy.cuda.memory.OutOfMemoryError
        try:
            self._blas = Blas(cupy, numpy, self._np_dtype.get(dtypes.bfloat16))
            self._blas_why = "cuBLAS called directly (recordable in CUDA graphs)"
        except Exception as e:      # cuBLAS not reachable directly: cupy.matmul does every GEMM
            self._blas = None
            self._blas_why = (f"cupy.matmul (direct cuBLAS unavailable: {type(e).__name__}: {e}; "
                              "steps with GEMMs cannot be captured)")
        self._attention = Attention(self)
        self.capturing = False        # set by graphs.py while a step is being recorded
        self._recording = None
        self._tf32 = None
        self.tf32 = os.environ.get("NUMR_CUDA_TF32", "0").strip().lower() in ("1", "true", "yes", "on")

    # -- availability ----------------------------------------------------------------------------
    @classmethod
    def probe(cls):
        try:
            import cupy
        except ImportError:
            return False, "cupy is not installed (pip install 'numr-web[cuda]')"
        except Exception as e:  # a broken CUDA install can fail at import
            return False, f"cupy failed to import: {type(e).__name__}: {e}"
        try:
            if not cupy.cuda.is_available():
                return False, ("no CUDA driver or GPU found (cupy.cuda.is_available() is False; "
                               "cupy " + cupy.__version__ + " is installed)")
            n = cupy.cuda.runtime.getDeviceCount()
            name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
        except Exception as e:
            return False, f"CUDA runtime error: {type(e).__name__}: {e}"
        return True, f"cupy {cupy.__version__}, {n} GPU(s): {name}"

    def info(self):
        import cupy
        props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.runtime.getDevice())
        return {"library": f"cupy {cupy.__version__}", "gpu": props["name"].decode(),
                "memory": f"{props['totalGlobalMem'] / 2**30:.1f} GiB",
                "compute capability": f"{props['major']}.{props['minor']}",
                "multiprocessors": props["multiProcessorCount"],
                "tf32": "on" if self.tf32 else "off (NUMR_CUDA_TF32=1 to opt in)",
                "step capture": "CUDA graphs (nr.capture)", "gemm": self._blas_why,
                "conv": self.conv_info()}

    @property
    def tf32(self):
        return self._tf32

    @tf32.setter
    def tf32(self, on):
        import cupy
        from cupy._core import _routines_linalg as L
        L.set_compute_type(cupy.float32, L.COMPUTE_TYPE_TF32 if on else L.COMPUTE_TYPE_DEFAULT)
        self._tf32 = bool(on)       # the dtypes (characters) our direct cuBLAS calls take:
        self._blas_dtypes = "" if self._blas is None else self._blas.dtypes.replace("f" if on else " ", "")

    # -- limits and memory ---------------------------------------------------------------------
    def max_elements(self, dtype):
        return self._mem_total // dtype.itemsize

    def _limit(self, what, shape, dtype_name):
        return BackendLimitError(f"not enough GPU memory for {what} of shape {tuple(shape)} "
                                 f"({dtype_name}); free memory (del tensors) or use smaller sizes")

    def full(self, shape, value, dtype):
        try:
            if isinstance(value, float) and value == 0 and math.copysign(1.0, value) < 0:
                # -0.0: CuPy's fill takes a memset for any value == 0, which writes +0.0; the
                # negation of +0.0 is -0.0 (kernels only: recordable in a CUDA graph)
                return self.xp.negative(self.xp.zeros(shape, dtype=self.np_dtype(dtype)))
            return super().full(shape, value, dtype)
        except self._oom:
            raise self._limit("a tensor", shape, dtype.name) from None

    def arange(self, start, stop, step, dtype):
        try:
            return super().arange(start, stop, step, dtype)
        except self._oom:
            raise self._limit("an arange", ((stop - start) // step,), dtype.name) from None

    def random(self, shape, dtype, seed, kind):
        try:
            return super().random(shape, dtype, seed, kind)
        except self._oom:
            raise self._limit("a random tensor", shape, dtype.name) from None

    def from_host(self, host, dtype):
        try:
            if hasattr(host, "__cuda_array_interface__"):
                return self.xp.asarray(host).astype(self.np_dtype(dtype), copy=False)
            host = self._host_numpy(host, dtype)
            if self.capturing:                  # a copy node reading host memory the graph keeps
                return self._recording.upload(host)
            # 1-d for the copy: CuPy fills a 0-d array from its value, by a memset for any
            # value == 0, which turned -0.0 into +0.0
            return self.xp.asarray(host.reshape(-1)).reshape(host.shape)
        except self._oom:
            raise self._limit("an upload", getattr(host, "shape", ()), dtype.name) from None

    def _no_readback(self):
        if self.capturing:
            raise KernelError("cuda step capture: the step reads a value back to the host "
                              "(.item(), .numpy(), .tolist(), print); a captured step must stay "
                              "on the GPU: read results after the step")

    def to_numpy(self, h):
        self._no_readback()
        self.raise_failed_checks()
        return self.xp.asnumpy(h)

    def to_list(self, h):
        return self.to_numpy(h).tolist()

    def to_bytes(self, h):
        return self.to_numpy(h).tobytes()

    def to_bytes_unchecked(self, h):
        self._no_readback()
        return self.xp.asnumpy(h).tobytes()

    def assign(self, dst, src):
        self.xp.copyto(dst, src)

    def recording(self):
        from .graphs import Recording
        return Recording(self)

    # -- plumbing --------------------------------------------------------------------------------
    @property
    def vec_bytes(self):
        """Bytes per vector access of the elementwise kernels (a knob: 16 or 32 on current GPUs)."""
        return self._vec_bytes

    @vec_bytes.setter
    def vec_bytes(self, n):
        if not isinstance(n, int) or n < 1 or n & (n - 1):
            raise ValueError(f"vec_bytes must be a power of two (bytes a vector access), got {n!r}")
        self._vec_bytes = n

    def _lanes(self, item, ptrs, ncols=None):
        """Elements per vector access: vec_bytes wide (a power of two) when `ptrs`, the OR of
        every pointer the kernel reads or writes, is aligned to it and ncols (where given) is a
        multiple, else 1."""
        v = self._vec_bytes // item or 1
        if ptrs % (v * item) or (ncols is not None and ncols % v):
            return 1
        return v

    def _contig(self, h):
        return h if h._c_contiguous else self.xp.ascontiguousarray(h)

    # -- elementwise -------------------------------------------------------------------------------
    def binary(self, op, a, b):
        code = G.BIN_OPS.get(op)
        if code is not None:
            nd = self._nd
            if type(a) is nd:
                ct = self._ct.get(a.dtype.char)
                if ct is not None and a._c_contiguous:
                    if type(b) is nd:
                        shape = a.shape
                        if b.dtype == a.dtype and b.shape == shape and b._c_contiguous:
                            return self._bin(ct, op, a, b, shape)
                    elif type(b) is float or (type(b) is int and -2 ** 53 <= b <= 2 ** 53):
                        return self._bin_scalar(ct, op, a, b, False)
            elif type(b) is nd and (type(a) is float or (type(a) is int and -2 ** 53 <= a <= 2 ** 53)):
                ct = self._ct.get(b.dtype.char)
                if ct is not None and b._c_contiguous:
                    return self._bin_scalar(ct, op, b, a, True)
        return super().binary(op, a, b)

    def unary(self, op, h):
        if op == "neg" and h.dtype.kind == "f":    # a sign-bit flip: CUDA's negation leaves a NaN
            bits = self.xp.dtype(f"u{h.dtype.itemsize}")             # operand's sign as it was
            return (h.view(bits) ^ bits.type(1 << (8 * h.dtype.itemsize - 1))).view(h.dtype)
        return super().unary(op, h)

    def astype(self, h, dtype):
        """float32 <-> float16 of a dense array (autocast's casts) in the vectorised cast kernel;
        the rest through the array module (CuPy's copy kernel: an element a thread)."""
        src = self._ct.get(h.dtype.char)
        dst = self._half_pair.get(dtype)
        if src is None or dst is None or (src, dst) not in CASTS or not h._c_contiguous:
            return super().astype(h, dtype)
        out = self._nd(h.shape, self._np_dtype[dtype])
        n = out.size
        if n:
            pa, po = h.data.ptr, out.data.ptr
            pf, ph = (pa, po) if src == "float" else (po, pa)       # the float, the half side
            v = self._lanes(4, pf)
            if ph % (2 * v):
                v = 1
            self.kernels.cast(src, dst, v, self.unroll).run1d(n, v, self.unroll, (pa, po, n),
                                                              self._stream().ptr)
        return out

    def _bin(self, ct, op, a, b, shape):
        out = self._nd(shape, a.dtype)         # (cupy.empty_like costs twice a launch)
        n = out.size
        if n:
            pa, pb, po = a.data.ptr, b.data.ptr, out.data.ptr
            v = self._lanes(out.itemsize, pa | pb | po)
            self.kernels.binary(ct, op, v, 1).run1d(n, v, 1, (pa, pb, po, n), self._stream().ptr)
        return out

    def _bin_scalar(self, ct, op, a, s, rev):
        out = self._nd(a.shape, a.dtype)
        n = out.size
        if n:
            pa, po = a.data.ptr, out.data.ptr
            v = self._lanes(out.itemsize, pa | po)
            self.kernels.binary_scalar(ct, op, rev, v, 1).run1d(n, v, 1, (pa, float(s), po, n),
                                                                self._stream().ptr)
        return out

    def activation(self, name, z, fn="fwd"):
        ct = self._ct.get(z.dtype.char)
        if ct is None:
            return super().activation(name, z, fn)
        z = self._contig(z)
        out = self._nd(z.shape, z.dtype)
        n = out.size
        if n:
            pz, po = z.data.ptr, out.data.ptr
            v, u = self._lanes(out.itemsize, pz | po), self.unroll
            self.kernels.map(ct, self._code[name], fn, v, u).run1d(n, v, u, (pz, pz, po, n),
                                                                 self._stream().ptr)
        return out

    # -- reductions ---------------------------------------------------------------------------------
    def reduce(self, op, h, axes, keepdims):
        """A small contiguous sum or mean over every axis: one single-block kernel (sum_small:
        double accumulation, one rounding) instead of CuPy's reduction machinery."""
        n = h.size
        if (op == "sum" or op == "mean") and 0 < n <= SUM_SMALL_MAX and h._c_contiguous \
                and (axes is None or len(axes) == h.ndim):
            ct = self._ct.get(h.dtype.char)
            if ct is not None:
                out = self._nd((1,) * h.ndim if keepdims else (), h.dtype)
                self.kernels.sum_small(ct)((1, 1), (BLOCK, 1),
                                           (h.data.ptr, out.data.ptr, n,
                                            float(n) if op == "mean" else 1.0),
                                           self._stream().ptr)
                return out
        return super().reduce(op, h, axes, keepdims)

    # -- linear algebra ---------------------------------------------------------------------------
    def _gemm(self, a, b, narrow=False):     # 16-bit operands: a float32 result unless narrow
        if b.ndim == 2 and a.ndim >= 2:
            a2 = a if a.ndim == 2 else (_as_rows(a) if a._c_contiguous else None)
            out = None if a2 is None else self._mm2d(a2, b, narrow)
            if out is not None:
                return out if a.ndim == 2 else out.reshape(a.shape[:-1] + (b.shape[-1],))
        elif a.ndim >= 3 and a.shape[:-2] == b.shape[:-2]:
            out = self._mm_batched(a, b, narrow)
            if out is not None:
                return out
        return super()._gemm(a, b)

    def _mm_batched(self, a, b, narrow=False):
        """a @ b over equal batch dims as ONE strided-batched cuBLAS call (capturable, as
        _mm2d); None where it does not apply."""
        ch = a.dtype.char
        if ch not in self._blas_dtypes or b.dtype.char != ch:
            return None
        batch = 1
        for d in a.shape[:-2]:
            batch *= d
        m, k = a.shape[-2:]
        n = b.shape[-1]
        if not (m and n and k and batch) or max(m, n, k, batch) >= 2 ** 31:
            return None
        la, lb = matrix_layout(a), matrix_layout(b)
        if la is None:                  # batch dims that do not fold (a view into a wider
            a = self.xp.ascontiguousarray(a)        # tensor): one copy kernel, still capturable
            la = matrix_layout(a)
        if lb is None:
            b = self.xp.ascontiguousarray(b)
            lb = matrix_layout(b)
        out = self.xp.empty(a.shape[:-1] + (n,), dtype=a.dtype if narrow or a.itemsize > 2
                            else self.xp.float32)
        self._blas.matmul_batched((a,) + la, (b,) + lb, out.reshape(batch, m, n),
                                  self._stream().ptr)
        return out

    def _mm2d(self, a, b, narrow=False):
        """a @ b (2-D, float32 / float64 / float16, dense or transposed operands) as ONE
        cuBLAS call (blas.py: capturable, no cupy.matmul dispatch). None where it does not apply
        (float32 with TF32 opted in: cupy.matmul carries that compute type)."""
        ch = a.dtype.char
        if ch not in self._blas_dtypes or b.dtype.char != ch:
            return None
        m, k = a.shape
        n = b.shape[1]
        if not (m and n and k) or max(m, n, k) >= 2 ** 31:
            return None
        if not (a._c_contiguous or a._f_contiguous) or not (b._c_contiguous or b._f_contiguous):
            return None
        out = self._nd((m, n), a.dtype if narrow or a.itemsize > 2 else self.xp.float32)
        return self._blas.matmul(a, b, out, self._stream().ptr)

    def gemm_bias_act(self, a, b, bias, act):
        xp = self.xp
        z = self._gemm(a, b)      # cuBLAS once (float16: GemmEx on tensor cores, float32 out)
        if bias is not None and bias.dtype != z.dtype:
            bias = bias.astype(z.dtype)
        row = ACT[act]
        write_z = row.saves == "z"
        if act == "none" and bias is None and z._c_contiguous:
            y = z
        elif not z._c_contiguous or a.dtype.char not in self._ct:   # bfloat16: no kernel of its own
            z = self._contig(z)
            if bias is not None:
                z += bias
            y = row.np.fwd(xp, z.copy() if write_z else z)
        else:          # float16 from a float32 result: rounded in the same pass, into new arrays
            narrow = z.dtype != a.dtype
            y = self._nd(z.shape, a.dtype) if write_z or narrow else z
            zo = self._nd(z.shape, a.dtype) if write_z and narrow else None
            self._bias_act(z, bias, y, row, write_z, zo)
            if narrow:
                return y, zo
        if y.dtype != a.dtype:                      # computed in float32: rounded once
            return y.astype(a.dtype), (z.astype(a.dtype) if write_z else None)
        return y, (z if write_z else None)

    def _bias_act(self, z, bias, y, row, write_z, zo=None):
        """ONE kernel: z += bias (broadcast over rows); y = act(z). y is z (in place) unless the
        activation's backward needs z (then both are written; into zo, rounded once, when y is
        narrower than z). z: C-contiguous."""
        n = z.size
        if n == 0:
            return y
        ncols = z.shape[-1] if z.ndim else 1
        has_bias = bias is not None
        bias_arr = self._contig(bias) if has_bias else z
        pz, pb, py = z.data.ptr, bias_arr.data.ptr, y.data.ptr
        pzo = pz if zo is None else zo.data.ptr
        v = self._lanes(z.itemsize, pz | pb | pzo | py, ncols)
        u = self.epilogue_unroll
        ct, ot = self._ct[z.dtype.char], self._ct[y.dtype.char]
        fn = self.kernels.bias_act(ct, self._code[row.name], has_bias, write_z, v, u,
                                   None if ot == ct else ot)
        fn.run1d(n, v, u, (pz, pb, pzo, py, n, ncols), self._stream().ptr)
        return y

    def act_backward(self, act, dy, s, y=None, bias_grad=False):
        xp = self.xp
        ct = self._ct.get(dy.dtype.char)
        if ct is None or s.dtype != dy.dtype:
            return super().act_backward(act, dy, s, y, bias_grad)
        code = self._code[act]
        dy, s = self._contig(dy), self._contig(s)
        if s.shape != dy.shape:
            s = xp.ascontiguousarray(xp.broadcast_to(s, dy.shape))
        dz = self._nd(dy.shape, dy.dtype)
        n = dz.size
        ncols = dz.shape[-1] if dz.ndim else 1
        if not bias_grad or n == 0 or self.bias_grad == "sum":
            if n:
                pd, ps, pz = dy.data.ptr, s.data.ptr, dz.data.ptr
                v, u = self._lanes(dz.itemsize, pd | ps | pz), self.unroll
                self.kernels.bwd(ct, code, v, u).run1d(n, v, u, (pd, ps, pz, n),
                                                       self._stream().ptr)
            return dz, (self._colsum(dz) if bias_grad else None)
        # fused: dz and the per-block partial column sums in one pass
        rows = n // ncols
        v = self._lanes(dz.itemsize, dy.data.ptr | s.data.ptr | dz.data.ptr, ncols)
        u = self.unroll
        ncv = ncols // v
        bx = 1
        while bx < min(32, ncv):
            bx *= 2
        by = BLOCK // bx
        gx = -(-ncv // bx)
        fn = self.kernels.bwd_db(ct, code, v, u)
        if rows <= 32 * by:     # a few rows: one block row sums them all (no second pass)
            gy = 1
        elif self.db_blocks_per_sm:
            gy = -(-(self._sms * self.db_blocks_per_sm) // gx)
        else:   # rows loop inside the kernel; exactly the blocks that fit at once
            key = (ct, code, v, u)
            if key not in self._resident:
                self._resident[key] = _resident_blocks(fn, BLOCK)
            gy = (self._sms * self._resident[key]) // gx
        gy = max(1, min(gy, -(-rows // by), 65535))
        acc = xp.float64 if dz.dtype == xp.float64 else xp.float32
        partial = self._nd((gy, ncols), acc)
        fn((gx, gy), (bx, by), (dy.data.ptr, s.data.ptr, dz.data.ptr, partial.data.ptr, rows, ncv),
           self._stream().ptr)
        db = partial[0] if gy == 1 else partial.sum(axis=0)
        return dz, db.astype(dz.dtype, copy=False)

    def _colsum(self, dz):
        if dz.ndim == 0:
            return dz.copy()
        acc = self.xp.float32 if dz.dtype in self._narrow else dz.dtype
        return _as_rows(dz).sum(axis=0, dtype=acc).astype(dz.dtype, copy=False)
