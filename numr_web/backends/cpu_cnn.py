"""The cpu backend's conv-net primitives on many cores, each a few passes over blocks of images
(or of image planes) that the worker threads take one at a time (cpu_threads.py), every pass
of a block done while its data is in the core's cache:

  * convolution: a block's columns are made, multiplied (BLAS at one thread per block) and
    turned into NCHW (with the bias and activation) before the next block, so the columns of
    the whole batch ((C*kh*kw) / C times the input) are never written to memory, nor the
    transposed gradient, nor the column gradient before col2im; the per-block GEMMs are those
    of ComposedConv (conv.py) on a block's columns;
  * max pooling, forward and backward: blocks of planes (batch norm: cpu_batchnorm.py).

Where the compiled loops run (cpu_jit.py), a convolution block's passes besides its GEMMs (the
columns, the bias + relu, the gradient's transposing copy, the wide col2im) are one compiled
loop each that holds no GIL (cpu_jit_cnn.py; the same bits): the blocks' numpy calls no
longer queue for the GIL on many threads.

Results are bit-identical to ArrayCNN's one-call code (the same numpy calls on each block; the
per-channel sums are per (image, channel) row sums, which a block computes as the one call
does, then added over the batch once), except the convolution: its blocks' GEMMs give the whole
GEMM's bits only where BLAS keeps them for a block of columns (OpenBLAS's SkylakeX kernels; its
Haswell kernels round such a block within a few ulp of the whole), and its weight gradient is a
sum over fixed blocks of images of the blocks' GEMMs (no less accurate than one BLAS GEMM,
tests/test_cpu_cnn.py). Blocks depend on shapes only: the same bits on every thread count.
float16 takes the one-call path, and so does the convolution where BLAS cannot be held at one
thread per block (no threadpoolctl).
A mixin of NumpyBackend, before CpuNN."""
from __future__ import annotations

try:
    import numpy as np
except ImportError:         # no numpy (the browser): NumpyBackend.probe says so
    np = None

from ..vocab.activations import ACT
from . import cpu_jit
from .cpu_blocks import CACHE_BLOCK, big, pass_block, row_blocks
from .cpu_elementwise import column_sum
from .cpu_threads import can_hold_blas, num_threads, parallel_for, single_threaded_blas

# Column elements per block of images of a convolution (at least one image; larger blocks give
# the weight gradient's GEMM a longer K), and at least CONV_MIN_BLOCKS blocks where the batch
# allows (work for many cores). Depends only on shapes (never on the thread count): the weight
# gradient adds the blocks' products in this fixed order.
CONV_BLOCK = 1 << 19
CONV_MIN_BLOCKS = 32
CONV_MIN_COLUMNS = 256      # output positions per block at least (a GEMM's N)
_WIDE = ("float32", "float64")
# _col2im_wide where an output row holds at least this many times the kw - 1 zero columns it
# adds (a 3x3 conv: OW >= 16; at OW = 8 the longer GEMM ate the gain)
WIDE_MIN = 8


def _pass_block(total):
    """Elements per block of a batch norm or pooling pass over `total`: two blocks per thread,
    between CACHE_BLOCK and 4 CACHE_BLOCK (in a core's L2 cache; fewer, larger blocks hold
    the GIL, which each numpy call takes, for a smaller share of the time); on many threads
    at least cpu_blocks.pass_block's size."""
    return max(pass_block(total),
               min(4 * CACHE_BLOCK, max(CACHE_BLOCK, -(-total // (2 * num_threads())))))


def _blocked(*arrays):
    """Whether these float32/float64 arrays take the blocked path: large, 2+ images."""
    return big(arrays[0]) and arrays[0].shape[0] >= 2 and \
        all(a is None or a.dtype.name in _WIDE and a.dtype == arrays[0].dtype for a in arrays)


def _blas_blocks(n, fn):
    """parallel_for of blocks that call BLAS, BLAS held at one thread (each block's GEMMs on its
    own core; on one thread too: BLAS's threads on a block's small GEMMs cost more than they
    give). Callers check can_hold_blas() first."""
    with single_threaded_blas():
        parallel_for(n, fn)


_INT = {4: "int32", 8: "int64"}


def _col2im_wide(dx, w2t, dzt, kernel, padding):
    """ArrayNN._col2im_sum of W^T @ dz' for stride and dilation 1, bit for bit, with rows of
    whole padded width: dz' gets kw - 1 zero columns per output row, so the column gradient of
    tap (i, j) is one run of OH * Wp values that adds into each padded plane at i * Wp + j (one
    long add per tap, where the windows' form adds OH rows of OW). The zero columns give exact
    zeros (finite weights) that land on other elements: adding +-0 to a sum that started at +0
    changes no bit (such a sum is never -0)."""
    nb, c, H, W = dx.shape
    (kh, kw), (ph, pw) = kernel, padding
    hp, wp = H + 2 * ph, W + 2 * pw
    oh, ow = hp - kh + 1, wp - kw + 1
    o = dzt.shape[0]
    dzw = np.empty((o, nb, oh, wp), dzt.dtype)
    dzw[..., ow:] = 0
    dzw[..., :ow] = dzt.reshape(o, nb, oh, ow)
    cols = np.matmul(w2t, dzw.reshape(o, -1)).reshape(c, kh, kw, nb, oh * wp)
    out = np.zeros((nb, c, hp * wp + kw - 1), dx.dtype)   # (the last tap's zeros run past)
    for i in range(kh):
        for j in range(kw):
            at = i * wp + j
            out[:, :, at:at + oh * wp] += cols[:, i, j].transpose(1, 0, 2)
    dx[...] = out[:, :, :hp * wp].reshape(nb, c, hp, wp)[:, :, ph:ph + H, pw:pw + W]


def _col2im_wide_jit(jit, dx, w2t, dz, kernel, padding):
    """_col2im_wide with the compiled loops (cpu_jit_cnn.py): dz (n, O, OH, OW) straight into
    the wide rows, the same GEMM, the same adds in the same order."""
    nb, c, H, W = dx.shape
    (kh, kw), (ph, pw) = kernel, padding
    o, oh, wp = dz.shape[1], dz.shape[2], W + 2 * pw
    dzw = np.empty((o, nb, oh, wp), dz.dtype)
    jit.to_rows_wide(dz, dzw)
    cols = np.matmul(w2t, dzw.reshape(o, -1)).reshape(c, kh, kw, nb, oh * wp)
    jit.col2im_wide(cols, ph, pw, dx.dtype.type(0), dx)


class CpuCNN:
    # -- convolution ---------------------------------------------------------------------------------
    def _conv_plan(self, x, w, stride, padding, dilation):
        n, (o, c, kh, kw) = x.shape[0], w.shape
        oh, ow = self._conv_out(x.shape, (kh, kw), stride, padding, dilation)
        per = max(1, -(-CONV_MIN_COLUMNS // max(1, oh * ow)),
                  min(CONV_BLOCK // max(1, c * kh * kw * oh * ow), -(-n // CONV_MIN_BLOCKS)))
        w2 = np.ascontiguousarray(w).reshape(o, c * kh * kw)
        return (oh, ow), w2, row_blocks(n, 1, per)

    def _block_cols(self, x, kernel, stride, padding, dilation, out_hw):
        """x's (a block's) columns in the (C*kh*kw, n*OH*OW) layout."""
        n, c = x.shape[:2]
        cols = np.empty((c,) + tuple(kernel) + (n,) + tuple(out_hw), x.dtype)
        jit = cpu_jit.kernels()
        if jit is not None:             # one compiled pass, no GIL held (cpu_jit_cnn.py)
            jit.im2col(x, cols, *stride, *padding, *dilation)
        else:
            self._im2col_into(cols.transpose(3, 0, 1, 2, 4, 5), x, kernel, stride, padding,
                              dilation, 0.0)
        return cols.reshape(-1, n * out_hw[0] * out_hw[1])

    def conv2d(self, x, w, bias, stride, padding, dilation, act):
        if not (_blocked(x, w, bias) and can_hold_blas()):     # else: whole-batch GEMMs
            return super().conv2d(x, w, bias, stride, padding, dilation, act)
        o, kernel = w.shape[0], w.shape[2:]
        out_hw, w2, parts = self._conv_plan(x, w, stride, padding, dilation)
        L = out_hw[0] * out_hw[1]
        row = None if act == "none" else ACT[act]
        z = np.empty((x.shape[0], o, L), x.dtype)
        y = np.empty_like(z) if row is not None and row.saves == "z" else z
        jit = cpu_jit.kernels() if act in ("none", "relu") else None

        def body(i):      # ArrayCNN._channel_bias_act on the block's GEMM, in place
            a, b = parts[i]
            cols = self._block_cols(x[a:b], kernel, stride, padding, dilation, out_hw)
            zg = np.matmul(w2, cols)
            if jit is not None:         # the bias add and relu in one compiled pass (y is z)
                jit.conv_bias_relu(zg, jit.none if bias is None else bias, act == "relu", z[a:b])
                return
            zv = zg.reshape(o, b - a, L).transpose(1, 0, 2)
            if bias is not None:
                np.add(zv, bias.reshape(1, -1, 1), out=z[a:b])
            else:
                z[a:b] = zv
            if row is not None:
                zb = z[a:b]
                got = row.np.fwd(np, zb if row.saves == "y" or row.np.keeps_z else zb.copy())
                if got is not y[a:b]:
                    y[a:b] = got
        _blas_blocks(len(parts), body)
        shape = x.shape[:1] + (o,) + tuple(out_hw)
        return y.reshape(shape), None if row is None else \
            (y if row.saves == "y" else z).reshape(shape)

    def conv2d_backward(self, dy, x, w, s, act, stride, padding, dilation, need_dx, need_dw,
                        need_db):
        if not (_blocked(x, w, dy) and can_hold_blas()):
            return super().conv2d_backward(dy, x, w, s, act, stride, padding, dilation, need_dx,
                                           need_dw, need_db)
        n, o, kernel = x.shape[0], w.shape[0], w.shape[2:]
        out_hw, w2, parts = self._conv_plan(x, w, stride, padding, dilation)
        L = out_hw[0] * out_hw[1]
        dz = dy if act == "none" else self.act_backward(act, dy, s)[0]
        dz3 = np.ascontiguousarray(dz).reshape(n, o, L)
        rows = np.empty((n, o), dz.dtype) if need_db else None
        partial = np.empty((len(parts), w2.shape[1], o), dz.dtype) if need_dw else None
        dx = np.empty(x.shape, dz.dtype) if need_dx else None
        w2t = w2.T
        jit = cpu_jit.kernels()
        dz4 = dz3.reshape((n, o) + tuple(out_hw))

        def body(i):
            a, b = parts[i]
            if need_db:                     # ArrayCNN._channel_sum's row sums, for the block
                rows[a:b] = dz3[a:b].sum(axis=2)
            if not (need_dw or need_dx):
                return
            if jit is not None and (need_dw or not wide):    # the transposing copy, compiled
                dzt = np.empty((o, b - a) + tuple(out_hw), dz.dtype)
                jit.to_rows_wide(dz4[a:b], dzt)
                dzt = dzt.reshape(o, (b - a) * L)
            elif jit is None:
                dzt = np.ascontiguousarray(dz3[a:b].transpose(1, 0, 2)).reshape(o, (b - a) * L)
            if need_dw:                     # dW^T's share of this block: cols' @ dz'^T
                cols = self._block_cols(x[a:b], kernel, stride, padding, dilation, out_hw)
                np.matmul(cols, dzt.T, out=partial[i])
                del cols
            if need_dx and wide and jit is not None:
                _col2im_wide_jit(jit, dx[a:b], w2t, dz4[a:b], kernel, padding)
            elif need_dx and wide:
                _col2im_wide(dx[a:b], w2t, dzt, kernel, padding)
            elif need_dx:
                c6 = np.matmul(w2t, dzt).reshape((x.shape[1],) + tuple(kernel) + (b - a,) +
                                                 tuple(out_hw)).transpose(3, 0, 1, 2, 4, 5)
                dx[a:b] = self._col2im_sum(c6, (b - a,) + x.shape[1:], kernel, stride, padding,
                                           dilation)
        # stride and dilation 1, finite weights: col2im as whole-row adds (_col2im_wide), where
        # its zero columns cost the GEMM less than the windows' short rows cost the adds
        wide = need_dx and tuple(stride) == (1, 1) and tuple(dilation) == (1, 1) and \
            out_hw[1] >= WIDE_MIN * (kernel[1] - 1) and bool(np.isfinite(w2).all())
        _blas_blocks(len(parts), body)
        db = rows.sum(axis=0, dtype=np.float64).astype(dz.dtype) if need_db else None
        if need_dw:                         # the blocks' products added in block order
            dw = column_sum(partial.reshape(len(parts), -1)).reshape(partial.shape[1:])
            dw = np.ascontiguousarray(dw.T).reshape(w.shape)
        else:
            dw = None
        return dx, dw, db

    # -- max pooling ---------------------------------------------------------------------------------
    def _planes(self, shape):
        """(planes, blocks of planes) of an (N, C, H, W) op done plane by plane."""
        p = shape[0] * shape[1]
        return p, row_blocks(p, shape[2] * shape[3], _pass_block(p * shape[2] * shape[3]))

    def _pool_geometry(self, x_shape, kernel, stride, padding, dilation, out_hw):
        """(taps, the first tap's flat index per window, each tap's offset from it) when every
        window lies inside the input (no padding read), else (taps, None, None)."""
        taps = self._pool_taps(x_shape, kernel, stride, padding, dilation, out_hw)
        if self._pool_padded_shape(x_shape, kernel, stride, padding, dilation, out_hw) != \
                tuple(x_shape[2:]):
            return taps, None, None
        base = taps[0][2]
        return taps, base, [int(t[2].flat[0] - base.flat[0]) for t in taps]

    def max_pool2d(self, x, kernel, stride, padding, dilation, out_hw):
        if not _blocked(x):
            return super().max_pool2d(x, kernel, stride, padding, dilation, out_hw)
        p, parts = self._planes(x.shape)
        x4 = np.ascontiguousarray(x).reshape(p, 1, x.shape[2], x.shape[3])
        taps, base, offs = self._pool_geometry(x.shape, kernel, stride, padding, dilation,
                                               out_hw)
        best = np.empty((p, 1) + tuple(out_hw), x.dtype)
        idx = np.empty(best.shape, np.int32)
        two_by_two = _two_by_two(kernel, stride, padding, dilation)
        jit = cpu_jit.kernels() if base is not None and two_by_two else None

        def body(i):
            a, b = parts[i]
            if jit is not None:     # one compiled pass (torch's rule for ties of signed zeros)
                jit.max_pool_2x2(x4[a:b, 0], best[a:b, 0], idx[a:b, 0])
            elif base is None or not _max_pool_inside(best[a:b], idx[a:b], x4[a:b], taps,
                                                      base, offs):
                self._max_pool_into(best[a:b], idx[a:b], x4[a:b], taps, kernel, stride,
                                    padding, dilation, out_hw)
        parallel_for(len(parts), body)
        shape = x.shape[:2] + tuple(out_hw)
        return best.reshape(shape), idx.reshape(shape)

    def max_pool2d_backward(self, dy, index, x_shape, kernel, stride, padding, dilation):
        if not _blocked(dy):
            return super().max_pool2d_backward(dy, index, x_shape, kernel, stride, padding,
                                               dilation)
        p, parts = self._planes(x_shape)
        H, W = x_shape[2:]
        out_hw = dy.shape[2:]
        g = np.ascontiguousarray(dy).reshape((p, 1) + tuple(out_hw))
        ix = np.ascontiguousarray(index).reshape(g.shape)
        hp, wp = self._pool_padded_shape(x_shape, kernel, stride, padding, dilation, out_hw)
        taps = self._pool_taps(x_shape, kernel, stride, padding, dilation, out_hw)
        dx = np.empty((p, 1, H, W), dy.dtype)
        (ph, pw), direct = padding, (hp, wp) == (H, W)
        # windows that share no element: each dx element is 0 + one window's g, or 0
        disjoint = all(stride[a] >= dilation[a] * (kernel[a] - 1) + 1 for a in (0, 1))
        jit = cpu_jit.kernels()
        two_by_two = _two_by_two(kernel, stride, padding, dilation) and \
            2 * out_hw[0] <= H and 2 * out_hw[1] <= W           # (no window past the input)

        def body(i):
            a, b = parts[i]
            if jit is not None and two_by_two:      # the same values, every element written once
                jit.max_pool_2x2_backward(g[a:b, 0], ix[a:b, 0], dy.dtype.type(0), dx[a:b, 0])
                return
            if jit is not None:         # the adds in the same order, compiled
                jit.max_pool_backward(g[a:b, 0], ix[a:b, 0], *kernel, *stride, *padding,
                                      *dilation, dy.dtype.type(0), dx[a:b, 0])
                return
            d = dx[a:b] if direct else np.zeros((b - a, 1, hp, wp), dy.dtype)
            if direct:
                d.fill(0)
            if direct and disjoint:
                _max_pool_grad_disjoint(d, g[a:b], ix[a:b], taps)
            else:
                self._max_pool_grad_into(d, g[a:b], ix[a:b], taps)
            if not direct:
                dx[a:b] = d[:, :, ph:ph + H, pw:pw + W]
        parallel_for(len(parts), body)
        return dx.reshape(x_shape)


def _two_by_two(kernel, stride, padding, dilation):
    """Whether a pool is the common 2x2 of stride 2 (no padding or dilation): its compiled
    loops are unrolled for it."""
    return (tuple(kernel), tuple(stride), tuple(padding), tuple(dilation)) == \
        ((2, 2), (2, 2), (0, 0), (1, 1))


def _max_pool_inside(best, idx, x, taps, base, offs):
    """ArrayCNN._max_pool_into for windows inside the input, without its masked copies: the
    first tap equal to the maximum found with boolean work, its index base + its offset.
    Returns False (nothing decided) where a window's maximum is NaN (then the last NaN wins:
    the caller runs the general form)."""
    views = [x[:, :, rs, cs] for rs, cs, _ in taps]
    np.copyto(best, views[0])
    for v in views[1:]:
        np.maximum(best, v, out=best)                # as ArrayCNN: NaN wins
    found = np.equal(views[0], best)
    np.copyto(idx, base)
    hit, new = np.empty_like(found), np.empty_like(found)
    step = np.empty(idx.shape, np.int32)
    for v, off in zip(views[1:], offs[1:]):
        np.equal(v, best, out=hit)
        np.greater(hit, found, out=new)              # a hit, and none before it
        np.multiply(new, off, out=step)
        idx += step
        found |= hit
    return bool(found.all())                         # a window without a hit holds a NaN


def _max_pool_grad_disjoint(d, g, index, taps):
    """ArrayCNN._max_pool_grad_into when no two windows share an element (d zeros): each tap
    writes g (as 0 + g: -0.0 becomes +0.0) or +0 through its view, by integer work."""
    g0 = g + g.dtype.type(0)
    t = _INT[g.itemsize]
    bits, dv = g0.view(t), d.view(t)
    hit = np.empty(g.shape, np.bool_)
    for rs, cs, pos in taps:
        np.equal(index, pos, out=hit)
        np.multiply(bits, hit, out=dv[:, :, rs, cs])
