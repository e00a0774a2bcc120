"""The cuda device: CuPy (cuBLAS GEMMs, CuPy's memory pool); the same primitives as the cpu
backend through ArrayBackend, with fused CUDA kernels (numr_web/backends/cuda_kernels.py) for

  * gemm_bias_act: cuBLAS GEMM (cupy.matmul), then ONE kernel adding the bias and applying the
    activation in place (writing the pre-activation z separately only when ACT[act].saves == "z");
  * act_backward: ONE kernel dz = dy * act'(saved) with 16-byte vector loads, plus the bias gradient
    from per-block partial column sums written by that same kernel and one small reduction;
  * activation(order 0/1/2): one kernel each.
float32 / float64 / float16 (float16 computed in float32). Other dtypes take the ArrayBackend path.

TF32: off by default, so float32 GEMMs match torch's default (full float32 products). Opt in with
the environment variable NUMR_CUDA_TF32=1 (read when the backend starts) or at run time with
`numr_web.backends.get_backend("cuda").tf32 = True`. It sets CuPy's cuBLAS compute type for float32
(process-wide for CuPy).
"""
from __future__ import annotations

import os

from .array_backend import ArrayBackend
from ..ops.activations import ACT
from . import cuda_kernels as K

_BLOCK = 256
# per ACT code: does the backward read the pre-activation z (else the output y)?
_FZ = {a.code: "true" if a.saves == "z" else "false" for a in ACT.values()}


def _resident_blocks(fn, threads):
    """Blocks of `threads` threads of kernel `fn` resident per multiprocessor (occupancy API)."""
    try:
        from cupy_backends.cuda.api import driver
        f = getattr(fn, "kernel", fn)
        return max(1, int(driver.occupancyMaxActiveBlocksPerMultiprocessor(f.ptr, threads, 0)))
    except Exception:
        return 4


class CupyBackend(ArrayBackend):
    device = "cuda"

    # kernel variant knobs (bench/cuda.py sweeps them): vector bytes per access, vectors per
    # thread, streaming cache hints; the bias gradient "fused" (partial sums in the kernel) or "sum"
    # (defaults: the fastest variants measured on the H200, docs/benchmarks.md "## cuda (H200)")
    vec_bytes = 16            # bytes per vector access (float4 / double2 / 8 x half)
    unroll = 4                # vectors per thread: activation / act-backward / fused bias-gradient
    epilogue_unroll = 1       # vectors per thread in the GEMM bias + activation epilogue
    streaming = False         # ld/st.global.cs hints (measured slower)
    bias_grad = "fused"       # "fused": partial column sums in the act-backward kernel; "sum": cupy
    db_blocks_per_sm = 16     # fused bias-gradient grid: blocks per multiprocessor; 0 = one wave
                              # of the blocks that fit at once (occupancy API; measured slower)

    def __init__(self):
        import cupy
        self.xp = cupy
        super().__init__()
        self._sms = cupy.cuda.runtime.getDeviceProperties(
            cupy.cuda.runtime.getDevice())["multiProcessorCount"]
        self._tf32 = None
        self._fns = {}       # specialisation key -> compiled kernel
        self._resident = {}  # bwd_db key -> blocks resident per multiprocessor
        import numpy
        self._i64 = numpy.int64
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
        props = cupy.cuda.runtime.getDeviceProperties(0)
        return {"library": f"cupy {cupy.__version__}", "gpu": props["name"].decode(),
                "memory": f"{props['totalGlobalMem'] / 2**30:.1f} GiB",
                "compute capability": f"{props['major']}.{props['minor']}",
                "multiprocessors": props["multiProcessorCount"],
                "tf32": "on" if self.tf32 else "off (NUMR_CUDA_TF32=1 to opt in)"}

    # -- TF32 opt-in ---------------------------------------------------------------------------------
    @property
    def tf32(self):
        return self._tf32

    @tf32.setter
    def tf32(self, on):
        import cupy
        from cupy._core import _routines_linalg as L
        L.set_compute_type(cupy.float32, L.COMPUTE_TYPE_TF32 if on else L.COMPUTE_TYPE_DEFAULT)
        self._tf32 = bool(on)

    # -- memory --------------------------------------------------------------------------------------
    def from_host(self, host, dtype):
        if hasattr(host, "__cuda_array_interface__"):
            return self.xp.asarray(host).astype(self.np_dtype(dtype), copy=False)
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

    # -- kernel plumbing -----------------------------------------------------------------------------
    def _ctype(self, h):
        return K.C_TYPES.get(h.dtype.name)

    def _vec(self, h, *arrays, ncols=None):
        """Elements per vector access: vec_bytes wide when every pointer is aligned to it (and
        ncols, where given, is a multiple), else 1."""
        v = max(1, self.vec_bytes // h.dtype.itemsize)
        if ncols is not None and ncols % v:
            return 1
        if any(a.data.ptr % (v * h.dtype.itemsize) for a in arrays):
            return 1
        return v

    def _contig(self, h):
        return h if h.flags.c_contiguous else self.xp.ascontiguousarray(h)

    def _ew(self, op, code, nin, a, b, out):
        """ONE launch of ew<ctype, Op, nin, V, U, CS> over a (and b) into out.
        op: ("map", order) -> MapOp<code, order>; ("bwd",) -> BwdOp<code, from_z>."""
        n = out.size
        if n == 0:
            return out
        ct = K.C_TYPES[out.dtype.name]
        v = self._vec(out, a, out) if nin == 1 else self._vec(out, a, b, out)
        u, cs = self.unroll, self.streaming
        key = (op, code, ct, v, u, cs)
        fn = self._fns.get(key)
        if fn is None:
            if op[0] == "map":
                opstr = lambda c: f"MapOp<{c}, {op[1]}>"  # noqa: E731
            else:
                opstr = lambda c: f"BwdOp<{c}, {_FZ[c]}>"  # noqa: E731
            fns = K.get(("ew", op, nin), ct, (v, u, cs),
                        lambda c: K.ew_expr(ct, opstr(c), nin, v, u, cs))
            fn = self._fns[key] = fns[K.ew_expr(ct, opstr(code), nin, v, u, cs)]
        grid = max(1, -(-(n // v) // (_BLOCK * u)))
        fn((grid,), (_BLOCK,), (a, b if b is not None else a, out, self._i64(n)))
        return out

    # -- activations -------------------------------------------------------------------------------
    def activation(self, name, z, order=0):
        if z.dtype.name not in K.C_TYPES:
            return super().activation(name, z, order)
        z = self._contig(z)
        return self._ew(("map", order), ACT[name].code, 1, z, None, self.xp.empty_like(z))

    # -- linear algebra ---------------------------------------------------------------------------
    def gemm_bias_act(self, a, b, bias, act):
        xp = self.xp
        z = xp.matmul(a, b)                     # cuBLAS, once
        if self._ctype(z) is None or not z.flags.c_contiguous or (bias is not None and bias.dtype != z.dtype):
            return self._xp_epilogue(z, bias, act)
        if act == "none" and bias is None:
            return z, None
        write_z = ACT[act].saves == "z"
        y = xp.empty_like(z) if write_z else z
        self._bias_act(z, bias, y, act)
        return y, (z if write_z else None)

    def _bias_act(self, z, bias, y, act):
        """ONE kernel: z += bias (broadcast over rows); y = act(z). y is z (in place) unless the
        activation's backward needs z (then both are written). z: C-contiguous."""
        n = z.size
        if n == 0:
            return y
        code = ACT[act].code
        ncols = z.shape[-1] if z.ndim else 1
        has_bias = bias is not None
        bias_arr = self._contig(bias) if has_bias else z
        v = self._vec(z, z, y, bias_arr, ncols=ncols)
        u = self.epilogue_unroll
        ct = self._ctype(z)
        key = ("bias_act", ct, has_bias, v, u, code)
        fn = self._fns.get(key)
        if fn is None:
            hb = "true" if has_bias else "false"
            expr = lambda c: f"bias_act<{ct}, {c}, {hb}, {_FZ[c]}, {v}, {u}>"  # noqa: E731
            fn = self._fns[key] = K.get(("bias_act", has_bias), ct, (v, u), expr)[expr(code)]
        grid = max(1, -(-(n // v) // (_BLOCK * u)))
        fn((grid,), (_BLOCK,), (z, bias_arr, y, self._i64(n), self._i64(ncols)))
        return y

    def _xp_epilogue(self, z, bias, act):
        if bias is not None:
            z += bias
        row = ACT[act]
        if row.saves == "y":
            return row.fwd(self.xp, z), None
        return row.fwd(self.xp, z.copy()), z

    def act_backward(self, act, dy, y, z, with_bias_grad):
        xp = self.xp
        row = ACT[act]
        saved = z if row.saves == "z" else y
        if self._ctype(dy) is None or saved.dtype != dy.dtype:
            return super().act_backward(act, dy, y, z, with_bias_grad)
        if act == "none":
            dz = dy
            return dz, (self._colsum(dz) if with_bias_grad else None)
        dy, saved = self._contig(dy), self._contig(saved)
        if saved.shape != dy.shape:
            saved = xp.ascontiguousarray(xp.broadcast_to(saved, dy.shape))
        dz = xp.empty_like(dy)
        n = dz.size
        code = row.code
        if not with_bias_grad or n == 0 or self.bias_grad == "sum":
            self._ew(("bwd",), code, 2, dy, saved, dz)
            return dz, (self._colsum(dz) if with_bias_grad else None)
        # fused: dz and the per-block partial column sums in one pass
        ncols = dz.shape[-1] if dz.ndim else 1
        rows = n // ncols
        v = self._vec(dz, dy, saved, dz, ncols=ncols)
        u = self.unroll
        ncv = ncols // v
        bx = 1
        while bx < min(32, ncv):
            bx *= 2
        by = _BLOCK // bx
        gx = -(-ncv // bx)
        ct = self._ctype(dz)
        key = ("bwd_db", ct, v, u, code)
        fn = self._fns.get(key)
        if fn is None:
            expr = lambda c: f"bwd_db<{ct}, {c}, {_FZ[c]}, {v}, {u}>"  # noqa: E731
            fn = self._fns[key] = K.get(("bwd_db",), ct, (v, u), expr)[expr(code)]
            self._resident[key] = _resident_blocks(fn, _BLOCK)
        if self.db_blocks_per_sm:
            gy = -(-(self._sms * self.db_blocks_per_sm) // gx)
        else:   # rows loop inside the kernel; exactly the blocks that fit at once (no tail wave)
            gy = (self._sms * self._resident[key]) // gx
        gy = max(1, min(gy, -(-rows // by), 65535))
        acc = xp.float64 if dz.dtype == xp.float64 else xp.float32
        partial = xp.empty((gy, ncols), dtype=acc)
        fn((gx, gy), (bx, by), (dy, saved, dz, partial, self._i64(rows), self._i64(ncv)))
        db = partial[0] if gy == 1 else partial.sum(axis=0)
        return dz, db.astype(dz.dtype, copy=False)

    def _colsum(self, dz):
        if dz.ndim == 0:
            return dz.copy()
        return dz.reshape(-1, dz.shape[-1]).sum(axis=0)
