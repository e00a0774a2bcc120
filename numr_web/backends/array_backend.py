"""One array-module backend for numpy (cpu) and cupy (cuda): the primitives written once against
`self.xp`. The cuda backend (backends/cuda/backend.py) subclasses it and swaps in raw CUDA kernels
where they pay.

Elementwise ops map to the numpy function their row names (numr_web/vocab/elementwise.py);
activations run the ACT table's numpy formulas. float16 is computed in float32 and rounded once
(as torch does on the CPU).
"""
from __future__ import annotations

import functools
import inspect
import math

from .. import dtypes, shapes
from ..errors import BackendLimitError, DTypeError
from ..vocab.activations import ACT
from ..vocab.registry import family_names, numpy_function
from .array_nn import ArrayNN
from .array_optim import ArrayOptim
from .array_rnn import ArrayRNN
from .base import Backend

_NP_NAMES = {"bool": "bool_"}
_FN = {"fwd": "fwd", "dz": "dz", "d2": "d2", "ds": "ds"}


def _quiet_state(np):
    """(get, set, reset, quiet): numpy's floating-point error state for the calling thread and its
    "ignore all" value. numpy >= 2 keeps that state in a context variable: setting it to one
    prebuilt value costs a fraction of np.errstate's enter/exit (which builds it anew each time:
    ~1 us an op on the cpu), and a nested call (one backend method calling another) finds it set
    and changes nothing. numpy 1.x: the same four names over np.errstate."""
    try:
        from numpy._core._ufunc_config import _extobj_contextvar as var
        from numpy._core.umath import _make_extobj
        return var.get, var.set, var.reset, _make_extobj(all="ignore")
    except (ImportError, AttributeError, TypeError):
        def put(_):
            state = np.errstate(all="ignore")
            state.__enter__()
            return state
        return (lambda: None), put, (lambda state: state.__exit__(None, None, None)), object()


class ArrayBackend(ArrayNN, ArrayRNN, ArrayOptim, Backend):
    xp = None  # numpy or cupy, set by subclasses

    def __init__(self):
        xp = self.xp
        self._np_dtype = {d: getattr(xp, _NP_NAMES.get(d.name, d.name)) for d in dtypes.ALL
                          if d is not dtypes.bfloat16}
        bf16 = self._bfloat16_type()
        if bf16 is not None:
            self._np_dtype[dtypes.bfloat16] = bf16
        self._our_dtype = {xp.dtype(v).char: d for d, v in self._np_dtype.items()}
        self._ufuncs = {}
        self._compare = None
        self._bool = xp.dtype(xp.bool_)
        # the dtypes computed in float32 and rounded once (float16; bfloat16 where it exists)
        self._narrow = frozenset(xp.dtype(self._np_dtype[d]) for d in dtypes.NARROW_FLOATS
                                 if d in self._np_dtype)
        self._quiet_numpy()

    # Methods whose host-side numpy work can overflow or meet NaN on every array backend (the
    # host data's conversion); on the cpu every method computes with numpy.
    _HOST_METHODS = ("from_host", "_host_numpy", "full", "arange", "random")
    _METADATA = ("dtype_of", "is_view", "strides", "covers", "info")

    def _quiet_numpy(self):
        """IEEE results (inf, NaN, -0.0) are the answer, as in torch, which is silent about them:
        run this backend's numpy work under np.errstate(all="ignore"), so no RuntimeWarning
        reaches the user whatever their warning filters, and their np.seterr is left alone.
        Instance attributes wrapping the bound methods: the class stays unwrapped."""
        import numpy as np
        # the entry points the engine calls (private helpers run inside them); not the few that
        # only read a handle's metadata
        names = self._HOST_METHODS if self.xp is not np else \
            [n for n in dir(type(self)) if not n.startswith("_") and n not in self._METADATA] + \
            list(self._HOST_METHODS)
        get, put, reset, quiet_state = _quiet_state(np)

        def quiet(fn):
            @functools.wraps(fn)
            def quietly(*args, **kwargs):
                token = put(quiet_state) if get() is not quiet_state else None
                try:
                    return fn(*args, **kwargs)
                except MemoryError:          # the last line: sizes are checked before
                    raise BackendLimitError(f"{self.device}: not enough memory for the result "
                                            f"of {fn.__name__}") from None
                finally:
                    if token is not None:
                        reset(token)
            return quietly
        for name in names:
            f = inspect.getattr_static(type(self), name, None)
            if inspect.isfunction(f) and not inspect.iscoroutinefunction(f):
                setattr(self, name, quiet(getattr(self, name)))

    def _ufunc(self, op):
        f = self._ufuncs.get(op)
        if f is None:
            f = self._ufuncs[op] = numpy_function(op, self.xp)
        return f

    def covers(self, family, name):
        """Whether this backend runs the elementwise vocabulary row (tests/test_architecture.py checks every row)."""
        try:
            return callable(numpy_function(name, self.xp))
        except AttributeError:
            return False

    def _bfloat16_type(self):
        """The array library's bfloat16 scalar type, or None where it has none."""
        return None

    def check_dtype(self, dtype):
        if dtype not in self._np_dtype:
            raise DTypeError(f"{dtype.name} is not supported on {self.device}: "
                             f"{self._missing_dtype_hint(dtype)}")
        return dtype

    def _missing_dtype_hint(self, dtype):
        return "use float32 or float16"

    def _widen(self, h):
        """float16 / bfloat16 -> float32 for computing; other dtypes unchanged."""
        return h.astype(self.xp.float32) if h.dtype in self._narrow else h

    def _floating(self, h):
        """Whether an array holds floats (ml_dtypes' bfloat16 is numpy kind "V")."""
        return h.dtype.kind == "f" or h.dtype in self._narrow

    # -- memory --------------------------------------------------------------------------------------
    def adopts(self, obj):
        return isinstance(obj, self.xp.ndarray)

    def from_host(self, host, dtype):
        # a HostArray; bfloat16 rounded on the host, as the cpu device rounds it
        if hasattr(host, "buf") or dtype is dtypes.bfloat16:
            return self.xp.array(self._host_numpy(host, dtype))
        return self.xp.array(host, dtype=self._np_dtype[dtype])

    def _host_numpy(self, host, dtype):
        """Host data (a HostArray, numpy array or nested lists) as a numpy array of `dtype`."""
        import numpy as np
        npd = self._np_dtype[dtype]
        if hasattr(host, "buf"):
            return np.frombuffer(host.buf, dtype=npd).reshape(host.shape)
        return np.array(host, dtype=npd)

    def from_dlpack(self, obj):
        return self.xp.from_dlpack(obj)

    def to_bytes(self, h):
        return self.to_numpy(h).tobytes()

    def dtype_of(self, h):
        return self._our_dtype[h.dtype.char]

    def is_view(self, h):
        return h.base is not None or not h.flags.c_contiguous

    def strides(self, h):
        return tuple(s // h.itemsize for s in h.strides)     # numpy / cupy count bytes

    def copy(self, h):
        return self.xp.array(h, copy=True, order="C")

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
        draw = rng.random if kind == "uniform" else rng.standard_normal
        if npd in (self.xp.float32, self.xp.float64):
            return draw(shape, dtype=npd)
        wide = draw(shape)
        if dtype is dtypes.bfloat16:          # through float32, as astype rounds it
            wide = wide.astype(self.xp.float32)
        return wide.astype(npd)

    # -- elementwise --------------------------------------------------------------------------------------
    def astype(self, h, dtype):
        if dtype is dtypes.bool_ and self._floating(h):
            return h != 0                 # NaN is True, as in C and torch (CuPy's cast gave False)
        if dtype is dtypes.bfloat16 and h.dtype not in self._narrow:  # through float32, as torch
            h = h.astype(self.xp.float32)
        return h.astype(self._np_dtype[dtype])

    def unary(self, op, h):
        f = self._ufuncs.get(op) or self._ufunc(op)
        out = f(self._widen(h))
        return self._asarray(out, h.dtype)

    def binary(self, op, a, b):
        f = self._ufuncs.get(op) or self._ufunc(op)
        nd = self.xp.ndarray
        ha = type(a) is nd or hasattr(a, "dtype")         # (a numpy scalar is a 0-d operand)
        hb = type(b) is nd or hasattr(b, "dtype")
        dtype = a.dtype if ha else b.dtype
        if dtype in self._narrow:                          # computed in float32, rounded once
            a, b = (self._widen(a) if ha else a), (self._widen(b) if hb else b)
        out = f(a, b)
        if self._compare is None:
            self._compare = frozenset(family_names("compare"))
        return self._asarray(out, self._bool if op in self._compare else dtype)

    def _asarray(self, out, dtype):
        """0-d inputs give numpy scalars; float16 work comes back in float32: one rounding."""
        if type(out) is self.xp.ndarray and out.dtype is dtype:
            return out
        return self.xp.asarray(out, dtype=dtype)

    def where(self, cond, a, b):
        dt = a.dtype if hasattr(a, "dtype") else b.dtype
        return self.xp.where(cond, a, b).astype(dt, copy=False)

    def activation(self, name, z, fn="fwd"):
        f = getattr(ACT[name].np, _FN[fn])
        zw = self._widen(z)
        if zw.ndim == 0:               # the formulas write in place (out=): give them an array
            return self._asarray(f(self.xp, zw.reshape(1).copy()).reshape(()), z.dtype)
        out = f(self.xp, zw.copy() if fn == "fwd" and not ACT[name].np.keeps_z else zw)
        return self._asarray(out, z.dtype)

    # -- reductions --------------------------------------------------------------------------------
    def reduce(self, op, h, axes, keepdims):
        if op == "mean" and h.size == 0:     # numpy warns "Mean of empty slice" (warnings.warn,
            out = self.xp.sum(h, axis=axes, keepdims=keepdims) / 0.0   # not errstate): 0/0
            return self._asarray(out, h.dtype)
        return self._reduce(op, h, axes, keepdims, self._pairwise(h, axes))

    def _reduce(self, op, h, axes, keepdims, pairwise):
        """reduce with the accumulation chosen: pairwise (numpy's own float sum) or, where
        numpy would add one row at a time, in float64."""
        if op in ("sum", "mean") and self._floating(h) and h.dtype.itemsize < 8 and \
                not pairwise:
            out = getattr(self.xp, op)(h, axis=axes, keepdims=keepdims, dtype=self.xp.float64)
            return self._asarray(out, h.dtype)
        out = getattr(self.xp, op)(self._widen(h), axis=axes, keepdims=keepdims)
        return self._asarray(out, h.dtype)

    def _pairwise(self, h, axes):
        """Whether numpy sums h over axes pairwise (error O(log n)): the trailing axes of a
        C-contiguous array. Other float sums (a column sum, a transposed view) add one row at a
        time, an error growing with n (3e-5 for 5000 float32 rows), so they accumulate in
        float64. CuPy's reductions are trees already."""
        if self.xp.__name__ != "numpy":
            return True
        nd = h.ndim
        ax = tuple(range(nd)) if axes is None else \
            tuple(sorted(a % nd for a in (axes if isinstance(axes, (tuple, list)) else (axes,))))
        return h.flags.c_contiguous and ax == tuple(range(nd - len(ax), nd))

    def argmax(self, h, axis, keepdims):
        xp = self.xp
        out = xp.argmax(h, axis=axis, keepdims=keepdims) if axis is not None else xp.argmax(h)
        out = xp.asarray(out, dtype=xp.int32)
        if axis is None and keepdims:
            out = out.reshape((1,) * h.ndim)
        return out

    can_argsort = True

    def argsort(self, h, axis, descending):
        """Stable; NaN after +inf ascending, first descending (torch's order): a stable sort by
        value, then a stable sort of that order by the NaN class."""
        xp = self.xp
        if h.dtype.kind == "b":
            h = h.astype(xp.int32)
        if self._floating(h):
            nan = xp.isnan(h)
            key = xp.where(nan, 0, -h if descending else h)
            order = xp.argsort(key, axis=axis, kind="stable")
            cls = xp.take_along_axis(nan, order, axis=axis).astype(xp.int8)
            order = xp.take_along_axis(order, xp.argsort(-cls if descending else cls, axis=axis,
                                                         kind="stable"), axis=axis)
        else:
            order = xp.argsort(~h if descending else h, axis=axis, kind="stable")
        return order.astype(xp.int32)

    def softmax(self, h, axis, log):
        xp = self.xp
        hw = self._widen(h)
        m = hw.max(axis=axis, keepdims=True)
        shifted = hw - m         # a row holding +inf or NaN, or only -inf, is NaN, as in torch
        e = xp.exp(shifted)
        s = e.sum(axis=axis, keepdims=True)
        if log:
            shifted -= xp.log(s)
            return self._asarray(shifted, h.dtype)
        e /= s
        return self._asarray(e, h.dtype)

    def one_hot(self, labels, n, dtype):
        xp = self.xp
        return (labels[..., None] == xp.arange(n, dtype=labels.dtype)).astype(self._np_dtype[dtype])

    # -- linear algebra ---------------------------------------------------------------------------
    def _gemm(self, a, b):
        """a @ b, with a's batch dims folded into its rows when b is one matrix: one BLAS call
        instead of numpy's loop of small GEMMs over the batch."""
        a, b = self._widen(a), self._widen(b)
        if b.ndim == 2 and a.ndim > 2:
            lead = a.shape[:-1]
            a2 = a.reshape(math.prod(lead), a.shape[-1])  # a copy only if a's rows are not dense
            return self.xp.matmul(a2, b).reshape(lead + (b.shape[-1],))
        return self.xp.matmul(a, b)

    def matmul(self, a, b):
        return self._asarray(self._gemm(a, b), a.dtype)

    def gemm_bias_act(self, a, b, bias, act):
        return self._epilogue(self._gemm(a, b), bias, ACT[act], a.dtype)   # the GEMM runs once

    def _epilogue(self, z, bias, row, dtype):
        """(y, z or None) of the fused layer from the GEMM's fresh z: the bias and the activation
        applied in place."""
        if bias is not None:
            z += self._widen(bias)
        y = row.np.fwd(self.xp, z.copy() if row.saves == "z" and not row.np.keeps_z else z)
        return self._asarray(y, dtype), (self._asarray(z, dtype) if row.saves == "z" else None)

    def act_backward(self, act, dy, s, y=None, bias_grad=False):
        if dy.ndim == 0:               # the formulas write in place (out=): give them arrays
            dz, _ = self.act_backward(act, dy.reshape(1), s.reshape(1),
                                      None if y is None else y.reshape(1))
            return dz.reshape(()), (dz.reshape(()) if bias_grad else None)
        dz = ACT[act].np.d1(self.xp, self._widen(dy), self._widen(s),
                            None if y is None else self._widen(y))
        dbias = dz.sum(axis=tuple(range(dz.ndim - 1))) if bias_grad else None
        dt = dy.dtype
        return self._asarray(dz, dt), (None if dbias is None else self._asarray(dbias, dt))

    # -- shapes ----------------------------------------------------------------------------------------
    def reshape(self, h, shape):
        return h if h.shape == tuple(shape) else h.reshape(shape)

    def permute(self, h, perm):
        """h's axes permuted; where that undoes the permutation h was made with, the array h
        views (x.T.T is x: a Linear's weight gradient, made in the weight's layout and
        transposed twice, reaches .grad as an array of its own, not a view .grad would copy)."""
        out = h.transpose(perm)
        base = out.base
        if isinstance(base, self.xp.ndarray) and base.shape == out.shape and \
                base.strides == out.strides and base.dtype == out.dtype and \
                self._address(base) == self._address(out):
            return base
        return out

    @staticmethod
    def _address(h):
        """Where h's first element lies (the cuda backend's is the device pointer)."""
        return h.__array_interface__["data"][0]

    def _allocation(self, h):
        """What identifies the memory h lies in (numpy: the array owning it; cupy: the device
        allocation), None where no array owns it (memory from a buffer)."""
        owner = h
        while isinstance(owner.base, self.xp.ndarray):   # (a subclass's views keep the chain)
            owner = owner.base
        return owner if owner.base is None and owner.flags.c_contiguous else None

    def _view_from(self, h, shape, strides, byte_offset=0):
        """A view of h's memory from `byte_offset` past h's first element, byte `strides`."""
        owner = self._allocation(h)
        return self.xp.ndarray(shape, h.dtype, buffer=owner, strides=strides,
                               offset=self._address(h) - self._address(owner) + byte_offset)

    def joined(self, hs, axis):
        h0 = hs[0]
        mem = self._allocation(h0)
        if mem is None or h0.strides[axis] <= 0 or any(
                self._allocation(h) is not mem or h.dtype != h0.dtype or h.strides != h0.strides
                or h.shape[:axis] + h.shape[axis + 1:] != h0.shape[:axis] + h0.shape[axis + 1:]
                for h in hs):
            return None
        at = self._address(h0)
        for h in hs:
            if self._address(h) != at:
                return None
            at += h.shape[axis] * h.strides[axis]
        shape = list(h0.shape)
        shape[axis] = sum(h.shape[axis] for h in hs)
        return self._view_from(h0, tuple(shape), h0.strides)

    def grads_in_place(self, *ts):
        """Gradients for the views ts, laid out in one new array as ts lie in theirs, where ts
        are disjoint views of one array alike in shape and strides that tile a range of it (the
        q, k, v heads of a fused projection: split's backward then joins their gradients
        without a copy, see joined); None otherwise."""
        t0 = ts[0]
        mem, item = self._allocation(t0), t0.itemsize
        if mem is None or t0.size == 0 or any(s <= 0 or s % item for s in t0.strides) or any(
                self._allocation(t) is not mem or t.dtype != t0.dtype or t.shape != t0.shape or
                t.strides != t0.strides for t in ts):
            return None
        lo = min(self._address(t) for t in ts)
        offsets = [(self._address(t) - lo) // item for t in ts]
        extent = 1 + sum((n - 1) * s // item for n, s in zip(t0.shape, t0.strides))
        if max(offsets) + extent != len(ts) * t0.size or not shapes.disjoint_alike(
                t0.shape, [s // item for s in t0.strides], offsets):
            return None           # not a tiling of one range: a gradient there would be partial
        g = self.xp.empty(len(ts) * t0.size, t0.dtype)
        return tuple(self._view_from(g, t0.shape, t0.strides, o * item) for o in offsets)

    def expand(self, h, shape):
        return self.xp.broadcast_to(h, shape)

    def slice(self, h, index):
        out = h[tuple(i if isinstance(i, int) else slice(*i) for i in index)]
        return out if type(out) is self.xp.ndarray else self.xp.asarray(out)   # x[0, 0]: 0-d

    def unslice(self, g, shape, index):
        out = self.xp.zeros(shape, dtype=g.dtype)
        out[tuple(i if isinstance(i, int) else slice(*i) for i in index)] = g
        return out

    def concat(self, hs, axis):
        return self.xp.concatenate(hs, axis=axis)

    def contiguous(self, h):
        return h if h.flags.c_contiguous else h.copy(order="C")   # (ascontiguousarray makes 0-d 1-d)
