"""The cpu backend's nn primitives on many cores: layer / RMS norm (blocks of rows; the weight
and bias gradients as column sums), attention (blocks of heads, each block's scores, softmax and
products done before the next block, so its T x T temporaries stay in cache; BLAS held at one
thread per block meanwhile), im2col / col2im (blocks of images), gather and scatter-add
(blocks along a dim of the index the op does not index; the embedding's gradient sorted into
rounds of rows instead of np.add.at). Small inputs take ArrayNN's one-call path.

Each block computes exactly what the one-call path computes for its rows, heads, images or
columns (the same numpy calls, the same order of every sum), so results are bit-identical.
A mixin of NumpyBackend (numr_web/backends/numpy_backend.py)."""
from __future__ import annotations

import math

try:
    import numpy as np
except ImportError:         # no numpy (the browser): NumpyBackend.probe says so
    np = None

from . import cpu_jit
from .cpu_blocks import (CACHE_BLOCK, big, blocks_or_one, is_narrow, one_pass_block, row_blocks,
                         split_axis, thread_block)
from .cpu_blocks import widen as _widen
from .cpu_elementwise import along, column_sum
from .cpu_threads import blocks, num_threads, parallel_blas_for, parallel_for

# Score elements per block of heads: a block's T x T temporaries stay in a core's L2 cache
ATTENTION_BLOCK = 1 << 17
# Elements per chunk of rows of a layer / RMS norm's compiled backward, each of which adds its
# rows' share of the weight and bias gradients (fixed by the shape: the same sums on any thread
# count)
NORM_GRAD_CHUNK = 1 << 16
# Columns per block of the embedding's scatter-add (each block runs one step per row rank)
SCATTER_COLUMNS = 96


class CpuNN:
    # -- softmax cross-entropy --------------------------------------------------------------------
    def cross_entropy(self, x, labels, ignore_index, smoothing):
        """ArrayNN's rows, blocks of rows on the threads (rows are independent: the same
        bits)."""
        rows, n = x.shape
        if not big(x) or rows < 2:
            return super().cross_entropy(x, labels, ignore_index, smoothing)
        loss, stats = np.empty(rows, x.dtype), np.empty((rows, 3))
        parts, base = row_blocks(rows, n), super()

        def body(i):
            r0, r1 = parts[i]
            loss[r0:r1], stats[r0:r1] = base.cross_entropy(x[r0:r1], labels[r0:r1],
                                                           ignore_index, smoothing)
        parallel_for(len(parts), body)
        return loss, stats

    def cross_entropy_backward(self, x, labels, stats, g, ignore_index, smoothing):
        rows, n = x.shape
        if not big(x) or rows < 2:
            return super().cross_entropy_backward(x, labels, stats, g, ignore_index, smoothing)
        dx, parts, base = np.empty(x.shape, x.dtype), row_blocks(rows, n), super()

        def body(i):
            r0, r1 = parts[i]
            dx[r0:r1] = base.cross_entropy_backward(x[r0:r1], labels[r0:r1], stats[r0:r1],
                                                    g[r0:r1], ignore_index, smoothing)
        parallel_for(len(parts), body)
        return dx

    # -- normalization ---------------------------------------------------------------------------
    def layer_norm(self, x, weight, bias, k, eps, rms):
        n = math.prod(x.shape[x.ndim - k:])
        rows = x.size // max(1, n)
        jit = _jit_float(x, weight, bias)
        if jit is not None and n:               # one compiled loop per block of rows, any size
            x2 = self.reshape(x, (rows, n))
            y = np.empty((rows, n), x.dtype)
            mean, rstd = np.empty(0 if rms else rows, x.dtype), np.empty(rows, x.dtype)
            w, b = (jit.none if a is None else a.reshape(n) for a in (weight, bias))
            parts = blocks_or_one(rows, n, one_pass_block(rows * n))

            def run(i):
                r0, r1 = parts[i]
                jit.layer_norm(x2[r0:r1], w, b, eps, rms, y[r0:r1], mean[r0:r1] if not rms else
                               mean, rstd[r0:r1])
            parallel_for(len(parts), run)
            lead = x.shape[:x.ndim - k]
            return (y.reshape(x.shape), None if rms else mean.reshape(lead), rstd.reshape(lead))
        if not big(x) or rows < 2 or n == 0:
            return super().layer_norm(x, weight, bias, k, eps, rms)
        x2 = self.reshape(x, (rows, n))
        w = None if weight is None else weight.reshape(n)
        b = None if bias is None else bias.reshape(n)
        y = np.empty((rows, n), x.dtype)
        mean = None if rms else np.empty(rows, x.dtype)
        rstd = np.empty(rows, x.dtype)
        parts = row_blocks(rows, n)
        base = super()

        def half(i):                  # float16: ArrayNN's float32 arithmetic, rounded once
            r0, r1 = parts[i]
            yb, mb, rb = base.layer_norm(x2[r0:r1], w, b, 1, eps, rms)
            y[r0:r1], rstd[r0:r1] = yb, rb
            if mean is not None:
                mean[r0:r1] = mb

        def body(i):                  # ArrayNN.layer_norm's arithmetic, rows r0:r1, in place
            r0, r1 = parts[i]
            xb, yb, rb = x2[r0:r1], y[r0:r1], rstd[r0:r1]
            t = np.empty(yb.shape, yb.dtype)
            if rms:
                np.multiply(xb, xb, out=t)
                t.mean(axis=1, out=rb)
            else:
                mb = mean[r0:r1]
                xb.mean(axis=1, out=mb)
                np.subtract(xb, mb[:, None], out=yb)           # xc
                np.multiply(yb, yb, out=t)
                t.mean(axis=1, out=rb)
            rb += eps                                          # rstd = 1 / sqrt(var + eps)
            np.sqrt(rb, out=rb)
            np.divide(1.0, rb, out=rb)
            if rms:
                np.multiply(xb, rb[:, None], out=yb)
            else:
                yb *= rb[:, None]
            if w is not None:
                yb *= w
            if b is not None:
                yb += b
        parallel_for(len(parts), half if is_narrow(x) else body)
        lead = x.shape[:x.ndim - k]
        return (y.reshape(x.shape), None if rms else mean.reshape(lead), rstd.reshape(lead))

    def layer_norm_backward(self, dy, x, weight, mean, rstd, k, rms):
        n = math.prod(x.shape[x.ndim - k:])
        rows = x.size // max(1, n)
        jit = _jit_float(x, weight, dy)
        if jit is not None and n:               # one compiled loop per block of rows, any size
            g2, x2 = self.reshape(dy, (rows, n)), self.reshape(x, (rows, n))
            m1 = jit.none if rms else mean.reshape(rows)
            rs = rstd.reshape(rows)
            w = jit.none if weight is None else weight.reshape(n)
            dx = np.empty((rows, n), dy.dtype)
            # fixed chunks of rows (the shape decides them, not the threads): each adds its
            # rows' share of the weight and bias gradients in float64, then the chunks in order
            parts = blocks(rows, max(1, NORM_GRAD_CHUNK // n))
            wants = (0 if weight is None else n, 0 if weight is None or rms else n)
            dw_part, db_part = (np.empty((len(parts), k)) for k in wants)   # (zeroed there)

            def run(i):
                r0, r1 = parts[i]
                jit.layer_norm_backward(g2[r0:r1], x2[r0:r1], w, m1 if rms else m1[r0:r1],
                                        rs[r0:r1], rms, dx[r0:r1], dw_part[i], db_part[i])
            parallel_for(len(parts), run, threads=None if big(x) else 1)
            dw = None if weight is None else \
                self.reshape(dw_part.sum(axis=0).astype(weight.dtype), weight.shape)
            db = None if weight is None or rms else \
                self.reshape(db_part.sum(axis=0).astype(weight.dtype), weight.shape)
            return dx.reshape(x.shape), dw, db
        if not big(x) or rows < 2 or n == 0 or is_narrow(dy):
            return super().layer_norm_backward(dy, x, weight, mean, rstd, k, rms)
        g2 = self.reshape(dy, (rows, n))
        x2 = self.reshape(x, (rows, n))
        m2 = None if rms else mean.reshape(rows, 1)
        r2 = rstd.reshape(rows, 1)
        w = None if weight is None else weight.reshape(1, n)
        dx = np.empty((rows, n), dy.dtype)
        gx = None if weight is None else np.empty((rows, n), dy.dtype)   # g * xhat, for dw
        parts = row_blocks(rows, n)

        def body(i):                  # ArrayNN.layer_norm_backward's dx, rows r0:r1, in place
            r0, r1 = parts[i]
            g, r, d = g2[r0:r1], r2[r0:r1], dx[r0:r1]
            xhat = np.empty(d.shape, d.dtype)
            if rms:
                np.multiply(x2[r0:r1], r, out=xhat)
            else:
                np.subtract(x2[r0:r1], m2[r0:r1], out=xhat)
                xhat *= r
            if w is not None:
                np.multiply(g, xhat, out=gx[r0:r1])
                g = np.multiply(g, w, out=np.empty(d.shape, d.dtype))
            elif not rms:
                g = g.copy()                                   # g - mean(g) goes into it
            np.multiply(g, xhat, out=d)
            proj = d.mean(axis=1, keepdims=True)
            if not rms:
                g -= g.mean(axis=1, keepdims=True)
            np.multiply(xhat, proj, out=d)                     # (g [- mean g]) - xhat proj
            np.subtract(g, d, out=d)
            d *= r
        parallel_for(len(parts), body)
        dw = db = None
        if weight is not None:
            dw = self.reshape(column_sum(gx), weight.shape)
            if not rms:
                db = self.reshape(column_sum(g2), weight.shape)
        return dx.reshape(x.shape), dw, db

    # -- attention -------------------------------------------------------------------------------
    def _attention_plan(self, q, k, v, mask):
        """(batch shape, q/k/v/mask broadcast to it, the blocks of heads as index tuples)."""
        tq, tk = q.shape[-2], k.shape[-2]
        batch = np.broadcast_shapes(q.shape[:-2], k.shape[:-2], v.shape[:-2],
                                    () if mask is None else np.shape(mask)[:-2])
        views = [np.broadcast_to(t, batch + t.shape[-2:]) for t in (q, k, v)]
        if mask is not None:
            views.append(np.broadcast_to(mask, batch + (tq, tk)))
        heads = math.prod(batch)
        # on a few threads blocks of ATTENTION_BLOCK scores, two a thread; on more, larger
        # blocks, one a thread: each numpy call of a block hands the GIL over (cpu_blocks)
        threads = num_threads()
        most = ATTENTION_BLOCK * thread_block() // CACHE_BLOCK
        per = max(1, min(most // max(1, tq * tk),
                         -(-heads // ((2 if threads <= 4 else 1) * threads))))
        return batch, views, _batch_blocks(batch, per)

    def attention(self, q, k, v, mask, causal, scale):
        tq, tk = q.shape[-2], k.shape[-2]
        if not big(q, k, v) or tk == 0 or q.ndim < 3:
            return super().attention(q, k, v, mask, causal, scale)
        batch, (qb, kb, vb, *mb), parts = self._attention_plan(q, k, v, mask)
        if len(batch) >= 2:     # (..., H, T, d) laid out as (..., T, H, d): merging heads is a view
            out = np.empty(batch[:-1] + (tq, batch[-1], v.shape[-1]), q.dtype).swapaxes(-2, -3)
        else:
            out = np.empty(batch + (tq, v.shape[-1]), q.dtype)
        lse = np.empty(batch + (tq,), q.dtype)
        masked = _causal_mask(tq, tk) if causal else None

        def body(i):
            idx = parts[i]
            s = _scores(qb[idx], kb[idx], mb[0][idx] if mb else None, masked, scale)
            m = s.max(axis=-1, keepdims=True)
            s -= np.where(m == -np.inf, 0, m)     # a row with every key masked gives 0
            np.exp(s, out=s)
            ls = s.sum(axis=-1, keepdims=True)
            s /= np.where(ls == 0, 1, ls)
            out[idx] = np.matmul(s, _widen(vb[idx]))
            lse[idx] = (m + np.log(ls))[..., 0]
        parallel_blas_for(len(parts), body)
        return out, lse

    def attention_backward(self, do, q, k, v, out, lse, mask, causal, scale):
        tq, tk = q.shape[-2], k.shape[-2]
        if not big(q, k, v) or tk == 0 or q.ndim < 3:
            return super().attention_backward(do, q, k, v, out, lse, mask, causal, scale)
        batch, (qb, kb, vb, *mb), parts = self._attention_plan(q, k, v, mask)
        dob = np.broadcast_to(do, batch + do.shape[-2:])
        ob = np.broadcast_to(out, batch + out.shape[-2:])
        lb = np.broadcast_to(lse, batch + lse.shape[-1:])
        # where q, k, v are the heads of one fused projection, their gradients are too
        fused = q.shape == k.shape == v.shape == batch + q.shape[-2:] and \
            self.grads_in_place(q, k, v)
        dq, dk, dv = fused or (np.empty(batch + t.shape[-2:], q.dtype) for t in (q, k, v))
        masked = _causal_mask(tq, tk) if causal else None

        def body(i):                  # ArrayNN.attention_backward for the heads idx
            idx = parts[i]
            qw, kw, vw, dow = (_widen(t[idx]) for t in (qb, kb, vb, dob))
            p = _scores(qw, kw, mb[0][idx] if mb else None, masked, scale)
            lw = _widen(lb[idx])[..., None]
            p -= np.where(lw == -np.inf, 0, lw)
            np.exp(p, out=p)
            dv[idx] = np.matmul(np.swapaxes(p, -1, -2), dow)
            ds = np.matmul(dow, np.swapaxes(vw, -1, -2))
            ds -= (dow * _widen(ob[idx])).sum(axis=-1, keepdims=True)
            ds *= p
            dq[idx] = np.matmul(ds, kw) * scale
            dk[idx] = np.matmul(np.swapaxes(ds, -1, -2), qw) * scale
        parallel_blas_for(len(parts), body)
        return dq, dk, dv

    # -- convolution ---------------------------------------------------------------------------------
    def im2col(self, x, kernel, stride, padding, dilation, pad_value=0.0, cn=False):
        n, c = x.shape[:2]
        if not big(x) or n < 2:
            return super().im2col(x, kernel, stride, padding, dilation, pad_value, cn)
        oh, ow = self._conv_out(x.shape, kernel, stride, padding, dilation)
        kh, kw = kernel
        if cn:                  # (C*kh*kw, N*OH*OW): written through its (N, C, ...) view
            cols = np.empty((c, kh, kw, n, oh, ow), dtype=x.dtype)
            windows = cols.transpose(3, 0, 1, 2, 4, 5)
        else:
            cols = windows = np.empty((n, c, kh, kw, oh, ow), dtype=x.dtype)
        parts = row_blocks(n, windows[0].size)

        def body(i):
            a, b = parts[i]
            self._im2col_into(windows[a:b], x[a:b], kernel, stride, padding, dilation, pad_value)
        parallel_for(len(parts), body)
        return cols.reshape(c * kh * kw, n * oh * ow) if cn else cols.reshape(n, c * kh * kw,
                                                                               oh * ow)

    def col2im(self, cols, x_shape, kernel, stride, padding, dilation, cn=False):
        n, c = x_shape[:2]
        if not big(cols) or n < 2:
            return super().col2im(cols, x_shape, kernel, stride, padding, dilation, cn)
        oh, ow = self._conv_out(x_shape, kernel, stride, padding, dilation)
        if cn:
            c6 = cols.reshape(c, kernel[0], kernel[1], n, oh, ow).transpose(3, 0, 1, 2, 4, 5)
        else:
            c6 = cols.reshape(n, c, kernel[0], kernel[1], oh, ow)
        out = np.empty(tuple(x_shape), cols.dtype)
        parts = row_blocks(n, c6[0].size)

        def body(i):
            a, b = parts[i]
            out[a:b] = self._col2im_sum(c6[a:b], x_shape, kernel, stride, padding, dilation)
        parallel_for(len(parts), body)
        return out

    # -- the embedding's gather and scatter-add ------------------------------------------------------
    def gather(self, h, axis, index):
        if not big(index) or index.ndim == 0:
            return super().gather(h, axis, index)
        rows = _rows_index(h, axis, index)
        if rows is None:                      # blocks along another dim of the index
            d = split_axis(index, [d for d in range(index.ndim) if d != axis])
            if d is None:
                return super().gather(h, axis, index)
            out = np.empty(index.shape, h.dtype)
            parts = row_blocks(index.shape[d], index.size // index.shape[d],
                               one_pass_block(index.size))

            def body(i):
                sl = along(index.ndim, d, *parts[i])
                out[sl] = h[sl][self._index_tuple(index[sl], axis)]
            parallel_for(len(parts), body)
            return out
        out = np.empty(index.shape, h.dtype)
        parts = row_blocks(index.shape[0], index[0].size, CACHE_BLOCK)
        src = h[(slice(None),) + tuple(slice(0, d) for d in index.shape[1:])]

        def body(i):
            a, b = parts[i]
            np.take(src, rows[a:b], axis=0, out=out[a:b])
        parallel_for(len(parts), body)
        return out

    def scatter_add(self, shape, axis, index, src):
        if not big(src) or src.shape != index.shape or src.ndim == 0:
            return super().scatter_add(shape, axis, index, src)
        rows = _rows_index(None, axis, index)
        if rows is None or tuple(shape[1:]) != tuple(src.shape[1:]):
            return self._scatter_blocks(shape, axis, index, src)
        out = np.zeros(shape, dtype=np.float32 if is_narrow(src) else src.dtype)
        o2 = out.reshape(shape[0], -1)
        s2 = self.reshape(src, (src.shape[0], -1))
        jit = _jit_float(s2, o2)
        if jit is not None:                     # add.at's order: a block of targets a thread
            parts = blocks(shape[0], -(-shape[0] // num_threads()))

            def rows_body(i):
                jit.scatter_rows_add(rows, s2, parts[i][0], parts[i][1], o2)
            parallel_for(len(parts), rows_body)
            return out
        # add.at's order without add.at (one Python-level step per element): the rows sorted by
        # target (stably: each target keeps its rows in index order), then round r adds every
        # target's r-th row at once, so each target still sums 0 + its 1st + its 2nd + ...
        order = np.argsort(rows, kind="stable")
        targets = rows[order]
        starts = np.flatnonzero(np.r_[True, targets[1:] != targets[:-1]])
        counts = np.diff(np.r_[starts, targets.size])
        by = np.argsort(-counts, kind="stable")          # the longest first: round r adds a prefix
        starts, counts, targets = starts[by], counts[by], targets[starts[by]]
        live = np.searchsorted(-counts, -np.arange(counts[0]), side="left").tolist()  # counts > r
        parts = blocks(s2.shape[1], max(SCATTER_COLUMNS, -(-s2.shape[1] // num_threads())))

        def body(i):
            a, b = parts[i]
            ob, sb = o2[:, a:b], s2[:, a:b]
            for r, k in enumerate(live):
                ob[targets[:k]] += sb[order[starts[:k] + r]]
        parallel_for(len(parts), body)
        return out.astype(src.dtype, copy=False)


    def _scatter_blocks(self, shape, axis, index, src):
        """scatter_add in blocks along another dim (each target's adds stay in one block, in
        add.at's order); one source per target (index 1 long along axis: max-pooling's
        gradient) is a plain write of 0 + src, which is what add.at would store."""
        d = split_axis(index, [d for d in range(index.ndim) if d != axis])
        if d is None:
            return super().scatter_add(shape, axis, index, src)
        out = np.zeros(shape, dtype=np.float32 if is_narrow(src) else src.dtype)
        put = index.shape[axis] == 1
        parts = row_blocks(index.shape[d], index.size // index.shape[d],
                           one_pass_block(index.size))

        def body(i):
            sl = along(index.ndim, d, *parts[i])
            ob, ib, sb = out[sl], index[sl], src[sl]
            where = self._index_tuple(ib, axis)
            if put:
                ob[where] = sb + ob.dtype.type(0)
            else:
                np.add.at(ob, where, sb)
        parallel_for(len(parts), body)
        return out.astype(src.dtype, copy=False)

def _jit_float(x, *others):
    """The compiled loops (cpu_jit.py) for an op over a non-empty float32 / float64 x whose
    other operands share its dtype (a norm's weight and bias, a scatter's output), or None."""
    jit = cpu_jit.kernels()
    if jit is None or x.dtype not in (np.float32, np.float64) or x.size == 0 or \
            any(a is not None and a.dtype != x.dtype for a in others):
        return None
    return jit


def _causal_mask(tq, tk):
    """True where a key comes after the query (torch's tril, top-left aligned): masked out."""
    return np.arange(tk)[None, :] > np.arange(tq)[:, None]


def _scores(q, k, mask, masked, scale):
    """ArrayNN._scores for one block of heads, in place: q k^T * scale, -inf where masked."""
    s = np.matmul(_widen(q), np.swapaxes(_widen(k), -1, -2))
    s *= scale
    if masked is not None:
        np.copyto(s, -np.inf, where=masked)
    if mask is not None:
        if mask.dtype == np.bool_:
            np.copyto(s, -np.inf, where=~mask)
        else:
            s += _widen(mask)
    return s


def _batch_blocks(batch, per):
    """Index tuples covering the batch shape, each about `per` heads: slices of the last batch
    dim, or of the first when a whole last dim fits in a block (two batch dims)."""
    if not batch:
        return [()]
    last = batch[-1]
    if per >= last and len(batch) == 2:
        return [(slice(a, b), slice(None)) for a, b in blocks(batch[0], per // last)]
    inner = [(slice(a, b),) for a, b in blocks(last, min(per, last))]
    return [o + s for o in np.ndindex(*batch[:-1]) for s in inner]


def _rows_index(h, axis, index):
    """The 1-D row index of an embedding-style index (axis 0, the same value along every other
    dim: an expanded column), else None."""
    if axis != 0 or index.ndim < 2 or any(st != 0 for st in index.strides[1:]):
        return None
    if h is not None and (h.ndim != index.ndim or
                          any(index.shape[d] > h.shape[d] for d in range(1, h.ndim))):
        return None
    return index[(slice(None),) + (0,) * (index.ndim - 1)].astype(np.intp)
