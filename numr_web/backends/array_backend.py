"""One array-module backend for numpy (cpu) and cupy (cuda): the primitives written once against
`self.xp`. cupy_backend subclasses it and swaps in fused CUDA kernels where they pay."""
from __future__ import annotations

from .base import Backend
from ..ops.activations import ACT

_NP_NAMES = {"bool": "bool_"}


class ArrayBackend(Backend):
    xp = None  # numpy or cupy, set by subclasses

    def __init__(self):
        xp = self.xp
        from .. import dtypes
        self._np_dtype = {d: getattr(xp, _NP_NAMES.get(d.name, d.name)) for d in dtypes.ALL}
        self._our_dtype = {xp.dtype(v).char: d for d, v in self._np_dtype.items()}
        self._unary = {"neg": xp.negative, "abs": xp.abs, "exp": xp.exp, "log": xp.log,
                       "sqrt": xp.sqrt, "sin": xp.sin, "cos": xp.cos, "sign": xp.sign}
        self._binary = {"add": xp.add, "sub": xp.subtract, "mul": xp.multiply,
                        "div": xp.true_divide, "pow": xp.power, "maximum": xp.maximum,
                        "minimum": xp.minimum, "eq": xp.equal, "ne": xp.not_equal, "lt": xp.less,
                        "le": xp.less_equal, "gt": xp.greater, "ge": xp.greater_equal}
        self._reduce = {"sum": xp.sum, "mean": xp.mean, "max": xp.max, "min": xp.min}

    # -- memory --------------------------------------------------------------------------------------
    def from_host(self, host, dtype):
        xp, npd = self.xp, self._np_dtype[dtype]
        if hasattr(host, "buf"):  # HostArray
            import numpy as np
            arr = np.frombuffer(host.buf, dtype=npd).reshape(host.shape)
            return xp.array(arr, dtype=npd)
        return xp.array(host, dtype=npd)

    def to_bytes(self, h):
        return self.to_numpy(h).tobytes()

    def dtype_of(self, h):
        return self._our_dtype[h.dtype.char]

    async def to_list_async(self, h):
        return self.to_list(h)

    def np_dtype(self, dtype):
        return self._np_dtype[dtype]

    # -- creation --------------------------------------------------------------------------------------
    def full(self, shape, value, dtype):
        return self.xp.full(shape, value, dtype=self._np_dtype[dtype])

    def arange(self, start, stop, step, dtype):
        return self.xp.arange(start, stop, step, dtype=self._np_dtype[dtype])

    def random(self, shape, dtype, seed, kind):
        rng = self.xp.random.default_rng(seed)
        npd = self._np_dtype[dtype]
        if kind == "uniform":
            return rng.random(shape, dtype=npd) if npd in (self.xp.float32, self.xp.float64) \
                else rng.random(shape).astype(npd)
        return rng.standard_normal(shape, dtype=npd) if npd in (self.xp.float32, self.xp.float64) \
            else rng.standard_normal(shape).astype(npd)

    # -- elementwise --------------------------------------------------------------------------------------
    def astype(self, h, dtype):
        return h.astype(self._np_dtype[dtype])

    def unary(self, op, h):
        return self._unary[op](h)

    def binary(self, op, a, b):
        xp = self.xp
        # keep a Python scalar from changing the dtype (numpy 2 already treats it as weak)
        out = self._binary[op](a, b)
        if type(out) is not xp.ndarray:      # 0-d inputs give numpy scalars
            out = xp.asarray(out)
        return out

    def where(self, cond, a, b):
        xp = self.xp
        dt = a.dtype if hasattr(a, "dtype") else b.dtype
        return xp.where(cond, a, b).astype(dt, copy=False)

    def activation(self, name, z, order=0):
        act = ACT[name]
        if order == 0:
            return act.fwd(self.xp, z.copy()).astype(z.dtype, copy=False)
        return (act.dz if order == 1 else act.d2)(self.xp, z).astype(z.dtype, copy=False)

    # -- reductions --------------------------------------------------------------------------------
    def reduce(self, op, h, axes, keepdims):
        out = self._reduce[op](h, axis=axes, keepdims=keepdims)
        return self.xp.asarray(out, dtype=h.dtype)

    def argmax(self, h, axis, keepdims):
        xp = self.xp
        out = xp.argmax(h, axis=axis, keepdims=keepdims) if axis is not None else xp.argmax(h)
        out = xp.asarray(out, dtype=xp.int32)
        if axis is None and keepdims:
            out = out.reshape((1,) * h.ndim)
        return out

    def softmax(self, h, axis, log):
        xp = self.xp
        shifted = h - h.max(axis=axis, keepdims=True)
        e = xp.exp(shifted)
        s = e.sum(axis=axis, keepdims=True)
        if log:
            shifted -= xp.log(s)
            return shifted
        e /= s
        return e

    def one_hot(self, labels, n, dtype):
        xp = self.xp
        return (labels[..., None] == xp.arange(n, dtype=labels.dtype)).astype(self._np_dtype[dtype])

    # -- linear algebra ---------------------------------------------------------------------------
    def matmul(self, a, b):
        return self.xp.matmul(a, b)

    def gemm_bias_act(self, a, b, bias, act):
        z = self.xp.matmul(a, b)     # the GEMM runs once; bias and activation are applied in place
        if bias is not None:
            z += bias
        row = ACT[act]
        y = row.fwd(self.xp, z).astype(z.dtype, copy=False)
        return y, (z if row.grad_from == "z" else None)

    def act_backward(self, act, dy, y, z, with_bias_grad):
        dz = ACT[act].d1(self.xp, dy, y, z).astype(dy.dtype, copy=False)
        dbias = None
        if with_bias_grad:
            dbias = dz.reshape(-1, dz.shape[-1]).sum(axis=0)
        return dz, dbias

    # -- shapes ----------------------------------------------------------------------------------------
    def reshape(self, h, shape):
        return h.reshape(shape)

    def permute(self, h, perm):
        return h.transpose(perm)

    def expand(self, h, shape):
        return self.xp.broadcast_to(h, shape)

    def slice(self, h, index):
        return h[tuple(i if isinstance(i, int) else slice(*i) for i in index)]

    def unslice(self, g, shape, index):
        out = self.xp.zeros(shape, dtype=g.dtype)
        out[tuple(i if isinstance(i, int) else slice(*i) for i in index)] = g
        return out

    def concat(self, hs, axis):
        return self.xp.concatenate(hs, axis=axis)

    def contiguous(self, h):
        return self.xp.ascontiguousarray(h)
