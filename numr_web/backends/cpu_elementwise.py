"""The cpu backend's elementwise primitives on many cores: unary / binary / where / casts,
activations and their fused backward, reductions and argmax along kept axes, softmax, copies
and transposing reshapes, each cut into blocks (cpu_blocks.py) that the worker threads run
(cpu_threads.py); the GEMMs and the fused layer's epilogue are in cpu_gemm.py. Ops below
cpu_threads.parallel_min() elements take ArrayBackend's one-call path.

Every block runs the same numpy code on its part as the one-call path runs on the whole array,
so results are bit-identical to it: elementwise work per element; reductions are split along
the axes they keep, never along the axes they add up, so each sum adds its terms in the same
order. float16 is computed in float32
per block and rounded once, into the output.
A mixin of NumpyBackend (numr_web/backends/numpy_backend.py)."""
from __future__ import annotations

import math

try:
    import numpy as np
except ImportError:         # no numpy (the browser): NumpyBackend.probe says so
    np = None

from ..vocab.activations import ACT
from ..vocab.registry import family_names
from . import cpu_jit
from .cpu_blocks import (Plan, alloc, big, blocks_or_one, column_blocks, corner, is_narrow,
                         layout, one_pass_block, pass_block, row_blocks, split_axis)
from .cpu_blocks import widen as _widen      # (_blocked's flag is named widen)
from .cpu_threads import SETTINGS, blocks, num_threads, parallel_for, settings

_FN = {"fwd": "fwd", "dz": "dz", "d2": "d2", "ds": "ds"}
_REDUCERS = ("sum", "mean", "max", "min", "prod")
# Rows per chunk of a column sum (column_sum): fixed, so the sum's order depends on the shape only
COLUMN_SUM_ROWS = 1024
def jit_act(name, dtype):
    """(compiled loops, fwd, d1, d1's tail, its limit) of activation `name` on arrays of `dtype`
    (cpu_jit_kernels.ACT_ROWS), or None:
    loops off, not a compiled row, or not float32 / float64."""
    k = cpu_jit.kernels()
    if k is None or dtype not in (np.float32, np.float64):
        return None
    row = k.ACT_ROWS.get(name)
    if row is None:
        return None
    return (k,) + row[0 if dtype == np.float32 else 1]


def _same(x):
    return x


def column_sum(x):
    """x summed over every axis but the last. Over more than COLUMN_SUM_ROWS rows (x's leading
    axes flattened, where that is a view): fixed chunks of COLUMN_SUM_ROWS rows, each summed as
    numpy's one call sums it (row after row), on the threads, then the chunks' sums added in
    order: a fixed order (the same bits on every thread count, no less accurate than numpy's
    row-after-row sum) that reads whole rows (a few columns of many rows, read as a strided
    block, cost numpy far more a value: docs/benchmarks.md). Otherwise blocks of columns: each
    column adds its terms in numpy's order, bit-identical to numpy's one call (any layout)."""
    cols = x.shape[-1]
    rows = x.size // max(1, cols)
    if rows > COLUMN_SUM_ROWS and x.ndim >= 2:
        try:
            x2 = x.reshape(rows, cols, copy=False)
        except (ValueError, TypeError):       # not a view (or numpy < 2.1: cannot tell)
            x2 = None
        if x2 is not None:
            parts = blocks(rows, COLUMN_SUM_ROWS)
            partial = np.empty((len(parts), cols), x.dtype)

            def chunk(i):
                np.add.reduce(x2[parts[i][0]:parts[i][1]], axis=0, out=partial[i])
            parallel_for(len(parts), chunk)
            return np.add.reduce(partial, axis=0)
    axes = tuple(range(x.ndim - 1))
    out = np.empty(cols, x.dtype)
    parts = column_blocks(cols, rows)

    def body(i):
        a, b = parts[i]
        out[a:b] = x[..., a:b].sum(axis=axes)
    parallel_for(len(parts), body)
    return out


def along(nd, axis, a, b):
    """The index of [a:b) along one axis of an nd-dim array."""
    idx = [slice(None)] * nd
    idx[axis] = slice(a, b)
    return tuple(idx)


class CpuElementwise:
    # -- elementwise -----------------------------------------------------------------------------
    def _blocked(self, fn, out_dtype, operands, block=None, widen=True):
        """fn(*operands) elementwise into a new array of out_dtype, laid out as numpy's one call
        would, block by block (operands broadcast together; float16 / bfloat16 operands
        widened to float32 per block when `widen`)."""
        shape = np.broadcast_shapes(*(np.shape(x) for x in operands))
        probe = fn(*[_widen(corner(x)) if widen else corner(x) for x in operands])
        plan = Plan(shape, operands, one_pass_block(math.prod(shape)) if block is None else block,
                    layout(probe, len(shape)))
        out = plan.alloc(out_dtype)
        src = [plan.prepare(x) for x in operands]
        dst = plan.prepare(out)
        direct = isinstance(fn, np.ufunc) and getattr(probe, "dtype", None) == out.dtype and \
            not (widen and any(is_narrow(x) for x in operands))

        def body(i):
            args = [plan.view(s, i) for s in src]
            if direct:                           # the ufunc's own result dtype: write into out
                fn(*args, out=plan.view(dst, i))
            else:
                plan.view(dst, i)[...] = fn(*[_widen(a) for a in args] if widen else args)
        parallel_for(plan.n, body)
        return out

    def unary(self, op, h):
        if h.size < (SETTINGS[0] or settings())[1]:
            return super().unary(op, h)
        return self._blocked(self._ufuncs.get(op) or self._ufunc(op), h.dtype, [h])

    def binary(self, op, a, b):
        if getattr(a, "size", 0) < (SETTINGS[0] or settings())[1] > getattr(b, "size", 0):
            return super().binary(op, a, b)
        if self._compare is None:
            self._compare = frozenset(family_names("compare"))
        dtype = a.dtype if hasattr(a, "dtype") else b.dtype
        return self._blocked(self._ufuncs.get(op) or self._ufunc(op),
                             self._bool if op in self._compare else dtype, [a, b])

    def where(self, cond, a, b):
        if not big(cond, a, b):
            return super().where(cond, a, b)
        dt = a.dtype if hasattr(a, "dtype") else b.dtype
        return self._blocked(np.where, dt, [cond, a, b], widen=False)

    def astype(self, h, dtype):
        if not big(h) or (dtype.name == "bool" and h.dtype.kind == "f"):
            return super().astype(h, dtype)
        return self._blocked(_same, self._np_dtype[dtype], [h], widen=False)

    def activation(self, name, z, fn="fwd"):
        jit = jit_act(name, z.dtype) if fn == "fwd" and z.ndim and z.flags.c_contiguous else None
        if jit is not None:                     # one compiled loop per block, any size
            k, f = jit[:2]
            out = np.empty(z.shape, z.dtype)
            zf, of = z.reshape(1, -1), out.reshape(1, -1)
            parts = blocks_or_one(z.size, 1, one_pass_block(z.size))

            def run(i):
                a, b = parts[i]
                k.act_fwd(f, zf[:, a:b], k.none, of[:, a:b])
            parallel_for(len(parts), run)
            return out
        if z.size < (SETTINGS[0] or settings())[1]:
            return super().activation(name, z, fn)
        f = getattr(ACT[name].np, _FN[fn])
        fresh = fn == "fwd" and not ACT[name].np.keeps_z     # the formula writes into its argument

        def one(x):
            w = _widen(x)
            return f(np, w.copy() if fresh and w is x else w)
        return self._blocked(one, z.dtype, [z], block=pass_block(z.size), widen=False)

    def act_backward(self, act, dy, s, y=None, bias_grad=False):
        jit = jit_act(act, dy.dtype) if dy.ndim and dy.shape == s.shape and \
            s.dtype == dy.dtype and dy.flags.c_contiguous and s.flags.c_contiguous else None
        if jit is not None:                     # one compiled loop per block, any size
            k, _, d1, tail, limit = jit
            dz = np.empty(dy.shape, dy.dtype)
            dyf, sf, dzf = dy.reshape(-1), s.reshape(-1), dz.reshape(-1)
            parts = blocks_or_one(dy.size, 1, one_pass_block(dy.size))

            def run(i):
                a, b = parts[i]
                k.act_d1(d1, tail, limit, dyf[a:b], sf[a:b], dzf[a:b])
            parallel_for(len(parts), run)
            dbias = None
            if bias_grad:
                dbias = column_sum(dz) if big(dz) else dz.sum(axis=tuple(range(dz.ndim - 1)))
            return dz, dbias
        if not big(dy) or dy.ndim == 0 or dy.shape != s.shape or is_narrow(dy) or \
                (y is not None and y.shape != dy.shape):
            return super().act_backward(act, dy, s, y, bias_grad)
        if act == "none":
            dz = dy
        else:
            d1 = ACT[act].np.d1
            ops = [dy, s] if y is None else [dy, s, y]
            dz = self._blocked(lambda *v: d1(np, *v), dy.dtype, ops, block=pass_block(dy.size),
                               widen=False)
        dbias = None
        if bias_grad:
            dbias = column_sum(dz)
        return dz, dbias

    # -- reductions along kept axes, softmax along the others ------------------------------------------
    def reduce(self, op, h, axes, keepdims):
        kept = [d for d in range(h.ndim) if d not in axes]
        ax = split_axis(h, kept)
        if not big(h) or ax is None or op not in _REDUCERS:
            return super().reduce(op, h, axes, keepdims)
        pairwise = self._pairwise(h, axes)      # the whole array's choice, for every block
        parts = blocks(h.shape[ax], -(-h.shape[ax] // (2 * num_threads())))
        base = super()
        shape = tuple(1 if d in axes else h.shape[d] for d in range(h.ndim))
        out = alloc(shape, h.dtype, layout(base._reduce(op, corner(h), axes, True, pairwise),
                                           h.ndim))

        def body(i):
            idx = along(h.ndim, ax, *parts[i])
            out[idx] = base._reduce(op, h[idx], axes, True, pairwise)
        parallel_for(len(parts), body)
        return out if keepdims else out.reshape([h.shape[d] for d in kept])

    def argmax(self, h, axis, keepdims):
        axis = None if axis is None or h.ndim == 0 else axis % h.ndim
        ax = None if axis is None else split_axis(h, [d for d in range(h.ndim) if d != axis])
        if not big(h) or ax is None:
            return super().argmax(h, axis, keepdims)
        parts = blocks(h.shape[ax], -(-h.shape[ax] // (2 * num_threads())))
        base = super()
        shape = tuple(1 if d == axis else h.shape[d] for d in range(h.ndim))
        out = alloc(shape, np.int32, layout(base.argmax(corner(h), axis, True), h.ndim))

        def body(i):
            idx = along(h.ndim, ax, *parts[i])
            out[idx] = base.argmax(h[idx], axis, True)
        parallel_for(len(parts), body)
        return out if keepdims else out.reshape(h.shape[:axis] + h.shape[axis + 1:])

    def softmax(self, h, axis, log):
        ax = split_axis(h, [d for d in range(h.ndim) if d != axis])
        if not big(h) or ax is None:
            return super().softmax(h, axis, log)
        parts = row_blocks(h.shape[ax], h.size // h.shape[ax])
        base = super()
        out = alloc(h.shape, h.dtype, layout(base.softmax(corner(h), axis, log), h.ndim))

        def body(i):
            idx = along(h.ndim, ax, *parts[i])
            out[idx] = base.softmax(h[idx], axis, log)
        parallel_for(len(parts), body)
        return out

    # -- copies ---------------------------------------------------------------------------------------
    def _dense_copy(self, h, dtype=None):
        """A C-contiguous copy of h (cast to dtype), block by block."""
        out = np.empty(h.shape, h.dtype if dtype is None else dtype)
        plan = Plan(h.shape, [out, h], one_pass_block(h.size))
        src, dst = plan.prepare(h), plan.prepare(out)

        def body(i):
            np.copyto(plan.view(dst, i), plan.view(src, i), casting="unsafe")
        parallel_for(plan.n, body)
        return out

    def copy(self, h):
        if not big(h) or h.ndim == 0:
            return super().copy(h)
        return self._dense_copy(h)

    def contiguous(self, h):
        if h.flags.c_contiguous or not big(h) or h.ndim == 0:
            return super().contiguous(h)
        return self._dense_copy(h)

    def _needs_copy(self, h, shape):
        """Whether h.reshape(shape) must copy (numpy >= 2.1 says so; older numpy: unknown)."""
        try:
            np.reshape(h, shape, copy=False)
            return False
        except ValueError:
            return True
        except TypeError:
            return False

    def reshape(self, h, shape):
        if h.size >= (SETTINGS[0] or settings())[1] and h.ndim and not h.flags.c_contiguous and \
                self._needs_copy(h, shape):
            return self._dense_copy(h).reshape(shape)
        return super().reshape(h, shape)

    def concat(self, hs, axis):
        nd = hs[0].ndim
        axis %= max(1, nd)
        if nd < 2 or sum(h.size for h in hs) < (SETTINGS[0] or settings())[1]:
            return super().concat(hs, axis)
        shape = list(hs[0].shape)
        shape[axis] = sum(h.shape[axis] for h in hs)
        perm = layout(np.concatenate([corner(h) for h in hs], axis), nd)   # numpy's layout
        lead = [d for d in perm if d != axis and shape[d] > 1]
        if not lead:
            return super().concat(hs, axis)
        ax = lead[0]                            # blocks along the outermost other axis
        out = alloc(shape, np.result_type(*hs), perm)
        parts = row_blocks(shape[ax], out.size // shape[ax], one_pass_block(out.size))

        def body(i):
            idx = along(nd, ax, *parts[i])
            np.concatenate([h[idx] for h in hs], axis=axis, out=out[idx])
        parallel_for(len(parts), body)
        return out

    def unslice(self, g, shape, index):
        if not big(g) or len(shape) < 2 or isinstance(index[0], int) or \
                tuple(index[0]) != (0, shape[0], 1):
            return super().unslice(g, shape, index)
        out = np.empty(shape, g.dtype)
        parts = row_blocks(shape[0], math.prod(shape[1:]), one_pass_block(math.prod(shape)))
        rest = (slice(None),) + tuple(i if isinstance(i, int) else slice(*i) for i in index[1:])

        def body(i):
            a, b = parts[i]
            ob = out[a:b]
            ob[...] = 0
            ob[rest] = g[a:b]
        parallel_for(len(parts), body)
        return out
