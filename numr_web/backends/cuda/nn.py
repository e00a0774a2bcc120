"""Launches of nn.cu's fused kernels, a mixin of CudaBackend: layer / RMS norm forward and backward
(one warp per row, the row in registers up to ROW_REGISTERS values; one kernel each way, plus one
for the weight and bias gradients' partial column sums), softmax cross-entropy (one warp per row,
one kernel each way), and the scatter-add of whole rows (an embedding's backward: its L
indices sorted, not every element). Cases the kernels do not cover fall back to the composed
array-module forms (ArrayNN, the optimizer's ops). Also nr.profile's device timer."""
from __future__ import annotations

import math

from ...shapes import prod
from . import timing
from .launch import BLOCK

WARPS = 8                              # rows per block of the norm kernels (256 threads)
ROW_REGISTERS = (1, 2, 4, 8, 16, 32)   # values per lane kept in registers (rows up to 32 * 32)
GRAD_COLS = 256                        # columns per block of the weight-gradient partials


def _b(flag):
    return "true" if flag else "false"


def _nt(n):
    return next((t for t in ROW_REGISTERS if 32 * t >= n), 0)


class CudaNN:
    profile_timer = timing.timer          # nr.profile's device timer (CUDA events)

    def _nn_fn(self, name, family):
        return self.kernels.function(name, lambda: [name] + list(family()))

    # views of one device allocation (ArrayBackend.joined, grads_in_place: the fused qkv heads)
    @staticmethod
    def _allocation(h):
        return h.data.mem

    def _view_from(self, h, shape, strides, byte_offset=0):
        return self.xp.ndarray(shape, h.dtype, memptr=h.data + byte_offset, strides=strides)

    def _norm_plan(self, x, k):
        ct = self._ct.get(x.dtype.char)
        n = prod(x.shape[x.ndim - k:])
        rows = prod(x.shape[:x.ndim - k])
        return ct, n, rows

    # -- attention (attention.py's kernels; the composed form of array_nn where they do not reach)
    def attention(self, q, k, v, mask, causal, scale):
        return (self._attention.forward(q, k, v, mask, causal, scale)
                or super().attention(q, k, v, mask, causal, scale))

    def attention_backward(self, do, q, k, v, out, lse, mask, causal, scale):
        return (self._attention.backward(do, q, k, v, out, lse, mask, causal, scale)
                or super().attention_backward(do, q, k, v, out, lse, mask, causal, scale))

    # -- layer / RMS norm ------------------------------------------------------------------------
    def layer_norm(self, x, weight, bias, k, eps, rms):
        ct, n, rows = self._norm_plan(x, k)
        if ct is None or n == 0 or rows == 0:
            return super().layer_norm(x, weight, bias, k, eps, rms)
        xp = self.xp
        x = xp.ascontiguousarray(x)
        w = None if weight is None else xp.ascontiguousarray(weight)
        b = None if bias is None else xp.ascontiguousarray(bias)
        lead = x.shape[:x.ndim - k]
        y = xp.empty(x.shape, dtype=x.dtype)
        mean = None if rms else xp.empty(lead, dtype=x.dtype)
        rstd = xp.empty(lead, dtype=x.dtype)
        nt = _nt(n)
        name = f"ln_fwd<{ct}, {nt}, {_b(rms)}, {_b(w is not None)}, {_b(b is not None)}>"
        fn = self._nn_fn(name, lambda: (f"ln_fwd<{ct}, {nt}, {_b(rms)}, {_b(hw)}, {_b(hb)}>"
                                        for hw in (False, True) for hb in (False, True)))
        fn((-(-rows // WARPS),), (32 * WARPS,),
           (x, 0 if w is None else w, 0 if b is None else b, y, 0 if mean is None else mean,
            rstd, rows, n, float(eps)))
        return y, mean, rstd

    def layer_norm_backward(self, dy, x, weight, mean, rstd, k, rms):
        ct, n, rows = self._norm_plan(x, k)
        if ct is None or n == 0 or rows == 0:
            return super().layer_norm_backward(dy, x, weight, mean, rstd, k, rms)
        xp = self.xp
        dy, x = xp.ascontiguousarray(dy), xp.ascontiguousarray(x)
        w = None if weight is None else xp.ascontiguousarray(weight)
        mp = 0 if mean is None else xp.ascontiguousarray(mean)
        rstd = xp.ascontiguousarray(rstd)
        dx = xp.empty(x.shape, dtype=x.dtype)
        nt = _nt(n)
        name = f"ln_bwd_dx<{ct}, {nt}, {_b(rms)}, {_b(w is not None)}>"
        fn = self._nn_fn(name, lambda: (f"ln_bwd_dx<{ct}, {nt}, {_b(rms)}, {_b(hw)}>"
                                        for hw in (False, True)))
        fn((-(-rows // WARPS),), (32 * WARPS,),
           (dy, x, 0 if w is None else w, mp, rstd, dx, rows, n))
        if w is None:
            return dx, None, None
        hb = not rms
        acc = xp.float64 if ct == "double" else xp.float32
        col_blocks = -(-n // GRAD_COLS)
        chunks = max(1, min(rows, -(-4 * self._sms // col_blocks)))
        chunk = -(-rows // chunks)
        chunks = -(-rows // chunk)
        pw = xp.empty((chunks, n), dtype=acc)
        pb = xp.empty((chunks, n), dtype=acc) if hb else None
        name = f"ln_bwd_wb<{ct}, {_b(rms)}, {_b(hb)}>"
        fn = self._nn_fn(name, lambda: (f"ln_bwd_wb<{ct}, {_b(r)}, {_b(not r)}>"
                                        for r in (False, True)))
        fn((col_blocks, chunks), (GRAD_COLS,),
           (dy, x, mp, rstd, pw, 0 if pb is None else pb, rows, n, chunk))
        dw = self.reshape(pw.sum(axis=0).astype(weight.dtype, copy=False), weight.shape)
        db = None if pb is None else \
            self.reshape(pb.sum(axis=0).astype(weight.dtype, copy=False), weight.shape)
        return dx, dw, db

    # -- softmax cross-entropy -----------------------------------------------------------------------
    def cross_entropy(self, x, labels, ignore_index, smoothing):
        ct, (rows, n) = self._ct.get(x.dtype.char), x.shape
        if ct is None or rows == 0 or n == 0:
            return super().cross_entropy(x, labels, ignore_index, smoothing)
        xp = self.xp
        x, labels = xp.ascontiguousarray(x), xp.ascontiguousarray(labels)
        loss = xp.empty((rows,), dtype=x.dtype)
        stats = xp.empty((rows, 3), dtype=xp.float64 if ct == "double" else xp.float32)
        fn = self._xent_fn("xent_fwd", ct, smoothing)
        fn((-(-rows // WARPS),), (32 * WARPS,),
           (x, labels, loss, stats, rows, n, int(ignore_index), float(smoothing)))
        return loss, stats

    def cross_entropy_backward(self, x, labels, stats, g, ignore_index, smoothing):
        ct, (rows, n) = self._ct.get(x.dtype.char), x.shape
        if ct is None or rows == 0 or n == 0:
            return super().cross_entropy_backward(x, labels, stats, g, ignore_index, smoothing)
        xp = self.xp
        x, labels = xp.ascontiguousarray(x), xp.ascontiguousarray(labels)
        g_stride = 0 if g.strides[0] == 0 else 1      # a mean's gradient: one value, broadcast
        g = g if g_stride == 0 else xp.ascontiguousarray(g)
        dx = xp.empty(x.shape, dtype=x.dtype)
        fn = self._xent_fn("xent_bwd", ct, smoothing)
        fn((-(-rows // WARPS),), (32 * WARPS,),
           (x, labels, xp.ascontiguousarray(stats), g, g_stride, dx, rows, n, int(ignore_index),
            float(smoothing)))
        return dx

    def _xent_fn(self, kernel, ct, smoothing):
        return self._nn_fn(f"{kernel}<{ct}, {_b(smoothing)}>",
                           lambda: (f"{kernel}<{ct}, {_b(v)}>" for v in (False, True)))

    # -- scatter-add ---------------------------------------------------------------------------------
    def scatter_add(self, shape, axis, index, src):
        """One value a target (index 1 long along axis): a write (ArrayNN.scatter_unique); whole
        rows (an embedding's backward): CudaNN.scatter_rows; else every element's flat target
        sorted, then summed in source order. Out-of-range indices wrap, as CuPy's indexing."""
        if index.ndim and len(shape) == index.ndim and shape[axis]:
            out = self.scatter_unique(shape, axis, index % shape[axis], src) \
                if index.shape[axis] == 1 else self.scatter_rows(shape, axis, index, src)
            if out is not None:
                return out
        xp = self.xp
        ct = self._ct.get(src.dtype.char)
        total = math.prod(shape)
        m = index.size
        if ct is None or m == 0 or total == 0 or total * m >= 2 ** 62:
            return super().scatter_add(shape, axis, index, src)
        src = self._contig(src[tuple(slice(0, k) for k in index.shape)])
        # flat target of every source element (an index out of range, reported at the next sync,
        # wraps as CuPy's indexing does: no write leaves out), then sort (target, source
        # position): the order of each sum is the source order, whatever the sort's stability
        lin = xp.zeros(index.shape, dtype=xp.int64)
        stride = 1
        for d in range(len(shape) - 1, -1, -1):
            if d == axis:
                idx = index.astype(xp.int64) % shape[d]
            else:
                sh = [1] * index.ndim
                sh[d] = index.shape[d]
                idx = xp.arange(index.shape[d], dtype=xp.int64).reshape(sh)
            lin += idx * stride
            stride *= shape[d]
        keyed = lin.reshape(-1) * m + xp.arange(m, dtype=xp.int64)
        keyed = xp.sort(keyed)
        vals = src.reshape(-1)[keyed % m]
        keys = keyed // m
        out = xp.zeros(shape, dtype=src.dtype)
        self.kernels.seg_sum(ct)((max(1, -(-m // BLOCK)), 1), (BLOCK, 1),
                                 (keys.data.ptr, vals.data.ptr, out.data.ptr, m), self._stream().ptr)
        return out

    def scatter_rows(self, shape, axis, index, src):
        """scatter_add for an index that is one vector along `axis` broadcast over the other dims
        (an embedding's or index_select's backward): L keys sorted, not L x R elements. None for
        any other index."""
        xp = self.xp
        ct = self._ct.get(src.dtype.char)
        st = index.strides
        L = index.shape[axis] if index.ndim else 0
        if ct is None or L == 0 or prod(shape) == 0 or len(shape) != index.ndim or any(
                (s != 0 and index.shape[d] > 1) or index.shape[d] != shape[d]
                for d, s in enumerate(st) if d != axis):
            return None
        sel = tuple(slice(None) if d == axis else 0 for d in range(index.ndim))
        keys = index[sel].astype(xp.int64) % shape[axis]      # out of range wraps, as CuPy's
        order = xp.argsort(keys * L + xp.arange(L, dtype=xp.int64))
        keys = keys[order]
        rows = xp.ascontiguousarray(xp.moveaxis(
            src[tuple(slice(0, k) for k in index.shape)], axis, 0)).reshape(L, -1)
        R = rows.shape[1]
        out = xp.zeros((shape[axis], R), dtype=src.dtype)
        if R:
            fn = self._nn_fn(f"rows_seg_sum<{ct}>", lambda: [])
            fn((-(-R // 128), min(L, 65535), -(-L // 65535)), (128,),
               (keys, order, rows, out, L, R))
        rest = shape[:axis] + shape[axis + 1:]
        return xp.ascontiguousarray(xp.moveaxis(out.reshape((shape[axis],) + tuple(rest)), 0, axis))

    def concat(self, hs, axis):
        """cupy.concatenate of many parts uploads a table of their addresses (a host-to-device
        copy, which a capturing stream refuses): while a step is recorded, one device copy per
        part into the output instead (GradScaler's inf check concatenates every gradient)."""
        if not self.capturing or len(hs) < 2:
            return super().concat(hs, axis)
        xp = self.xp
        axis %= hs[0].ndim
        shape = list(hs[0].shape)
        shape[axis] = sum(h.shape[axis] for h in hs)
        out = xp.empty(shape, dtype=xp.result_type(*hs))
        start = 0
        for h in hs:
            stop = start + h.shape[axis]
            out[(slice(None),) * axis + (slice(start, stop),)] = h
            start = stop
        return out
